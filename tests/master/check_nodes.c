/*
 * check_nodes.c: the node manager's relaunch policy (master/nodes.c) fed
 * with backend events: a failed node comes back with the same rank until its
 * role's restartCount is spent, then the job fails with a reason naming the
 * node; an OOM kill comes back with more memory from the in-process OOM plan
 * (algorithms/) until the cap; a bad host gets no relaunch; a node whose
 * machine was lost comes back uncharged; one left pending fails the job.
 */
#include <string.h>

#include "nodes.h"
#include "testutil.h"

static struct sched_event ev_of(enum sched_event_type t, const char *name, const char *host,
				int code, int sig)
{
	struct sched_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.type = t;
	snprintf(ev.name, sizeof(ev.name), "%s", name);
	snprintf(ev.host, sizeof(ev.host), "%s", host);
	ev.exit_code = code;
	ev.signal = sig;
	return ev;
}

static struct nodes_action feed(struct nodes *m, struct sched_event ev)
{
	struct nodes_action a;
	ck_assert_int_eq(nodes_on_event(m, &ev, &a), 0);
	return a;
}

static const struct sched_resources res64 = { 1.0, 64, 0 };

START_TEST(test_relaunch_same_rank)
{
	struct nodes_conf c = { .host_max_crashes = 5, .default_restart_count = -1 };
	struct nodes *m = nodes_new(&c, NULL, NULL, NULL);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(nodes_add(m, "worker-3", "worker", 3, "h1", &res64), 0);
	ck_assert_int_eq(nodes_add(m, "worker-x", "worker", 3, "h1", &res64), -EEXIST);
	ck_assert_int_eq(feed(m, ev_of(SCHED_EV_STARTED, "worker-3", "h1", 0, 0)).type, NODES_NONE);
	struct nodes_action a = feed(m, ev_of(SCHED_EV_EXITED, "worker-3", "h1", 1, 0));
	ck_assert_int_eq(a.type, NODES_RELAUNCH);
	ck_assert_int_eq(a.rank, 3);
	ck_assert_str_eq(a.role, "worker");
	ck_assert_str_eq(a.name, "worker-3.1");
	ck_assert_str_eq(a.host, "h1");
	ck_assert_int_eq(a.res.memory_mb, 64);
	ck_assert_msg(strstr(a.reason, "exited with code 1") && strstr(a.reason, "restart 1 of 3"),
		      "%s", a.reason);
	/* A late event of the replaced instance changes nothing. */
	ck_assert_int_eq(feed(m, ev_of(SCHED_EV_EXITED, "worker-3", "h1", 1, 0)).type, NODES_NONE);
	/* Killed by a signal counts as a failure too. */
	a = feed(m, ev_of(SCHED_EV_EXITED, "worker-3.1", "h1", -1, 9));
	ck_assert_int_eq(a.type, NODES_RELAUNCH);
	ck_assert_str_eq(a.name, "worker-3.2");
	ck_assert_msg(strstr(a.reason, "signal 9"), "%s", a.reason);
	/* Exit 0 is done, not relaunched; the job then succeeded. */
	ck_assert_int_eq(feed(m, ev_of(SCHED_EV_EXITED, "worker-3.2", "h1", 0, 0)).type,
			 NODES_NONE);
	struct nodes_status st;
	nodes_status(m, &st);
	ck_assert_int_eq(st.state, NODES_JOB_SUCCEEDED);
	ck_assert_int_eq(st.restarts, 2);
	nodes_free(m);
}
END_TEST

/* A relaunch that stays on its host (a master restart, a lost machine's
 * node, an OOM) keeps the host's name: the new instance is placed, and its
 * next crash charged, there. */
START_TEST(test_relaunch_in_place_keeps_the_host)
{
	struct nodes_conf c = { .host_max_crashes = 5, .default_restart_count = -1 };
	struct nodes *m = nodes_new(&c, NULL, NULL, NULL);
	ck_assert_int_eq(nodes_add(m, "a", "worker", 0, "h1", &res64), 0);
	struct nodes_action a;
	ck_assert_int_eq(nodes_relaunch(m, "a", NULL, &a), 0);
	ck_assert_str_eq(a.host, "h1");
	struct nodes_info ni;
	ck_assert_int_eq(nodes_get(m, "a", &ni), 0);
	ck_assert_str_eq(ni.host, "h1");
	struct sched_event ev = ev_of(SCHED_EV_EXITED, "a.1", "", -1, 0);
	ev.lost = true;
	a = feed(m, ev);
	ck_assert_int_eq(a.type, NODES_RELAUNCH);
	ck_assert_str_eq(a.host, "h1");
	nodes_free(m);
}
END_TEST

/* A node table of two workers, w0 and w1 (ranks 0 and 1), of restarts
 * restarts each (the caller's, nodes_free). */
static struct nodes *two_workers(int restarts)
{
	struct nodes *m = nodes_new(NULL, NULL, NULL, NULL);
	ck_assert_int_eq(nodes_set_restart_count(m, "worker", restarts), 0);
	ck_assert_int_eq(nodes_add(m, "w0", "worker", 0, NULL, &res64), 0);
	ck_assert_int_eq(nodes_add(m, "w1", "worker", 1, NULL, &res64), 0);
	return m;
}

START_TEST(test_restart_budget_gives_up)
{
	struct nodes *m = two_workers(2);
	ck_assert_int_eq(feed(m, ev_of(SCHED_EV_EXITED, "w0", "", 2, 0)).type, NODES_RELAUNCH);
	/* A start failure is a failure like any other. */
	struct sched_event f = ev_of(SCHED_EV_FAILED, "w0.1", "", 0, 0);
	f.err = -ENOENT;
	snprintf(f.detail, sizeof(f.detail),
		 "could not start rover-run: No such file or directory");
	ck_assert_int_eq(feed(m, f).type, NODES_RELAUNCH);
	struct nodes_status st;
	nodes_status(m, &st);
	ck_assert_int_eq(st.state, NODES_JOB_RUNNING);
	struct nodes_action a = feed(m, ev_of(SCHED_EV_EXITED, "w0.2", "", 2, 0));
	ck_assert_int_eq(a.type, NODES_GIVE_UP);
	nodes_status(m, &st);
	ck_assert_int_eq(st.state, NODES_JOB_FAILED);
	ck_assert_msg(strstr(st.reason, "w0") && strstr(st.reason, "rank 0") &&
			      strstr(st.reason, "restartCount 2") &&
			      strstr(st.reason, "exited with code 2"),
		      "%s", st.reason);
	/* A removal asked by the master is never relaunched. */
	struct sched_event r = ev_of(SCHED_EV_EXITED, "w1", "", -1, 15);
	r.removed = true;
	ck_assert_int_eq(feed(m, r).type, NODES_NONE);
	nodes_free(m);
}
END_TEST

/* A node whose machine was lost (Slurm's NODE_FAIL or a requeue) comes
 * back with its rank as often as that happens, never spending restartCount;
 * one that waited for resources past the gang wait fails the job at once,
 * with the scheduler's reason. */
START_TEST(test_lost_not_charged_pending_gives_up)
{
	struct nodes *m = two_workers(1);
	char name[SCHED_NAME_MAX] = "w0";
	for (int i = 1; i <= 3; i++) {
		struct sched_event l = ev_of(SCHED_EV_EXITED, name, "rvn2", -1, 9);
		l.lost = true;
		snprintf(l.detail, sizeof(l.detail), "slurm job %d NODE_FAIL on rvn2", i);
		struct nodes_action a = feed(m, l);
		ck_assert_int_eq(a.type, NODES_RELAUNCH);
		ck_assert_int_eq(a.rank, 0);
		ck_assert_msg(strstr(a.reason, "NODE_FAIL") && strstr(a.reason, "not counted"),
			      "%s", a.reason);
		snprintf(name, sizeof(name), "%s", a.name);
	}
	struct nodes_status st;
	nodes_status(m, &st);
	ck_assert_int_eq(st.restarts, 0);
	/* its one restart is still there */
	ck_assert_int_eq(feed(m, ev_of(SCHED_EV_EXITED, name, "", 1, 0)).type, NODES_RELAUNCH);

	struct sched_event p = ev_of(SCHED_EV_FAILED, "w1", "", 0, 0);
	p.err = -ETIMEDOUT;
	snprintf(p.detail, sizeof(p.detail),
		 "slurm job 9 still pending after 8 s: reason Resources");
	ck_assert_int_eq(feed(m, p).type, NODES_GIVE_UP);
	nodes_status(m, &st);
	ck_assert_int_eq(st.state, NODES_JOB_FAILED);
	ck_assert_msg(strstr(st.reason, "w1") && strstr(st.reason, "reason Resources"), "%s",
		      st.reason);
	nodes_free(m);
}
END_TEST

START_TEST(test_oom_memory_step)
{
	struct nodes_alg_oom alg;
	rv_alg_params_default(&alg.p);
	memset(&alg.lim, 0, sizeof(alg.lim));
	alg.lim.max_memory_mb = 150;
	alg.lim.free_memory_mb = -1;
	alg.lim.free_cpu = -1;
	struct nodes *m = nodes_new(NULL, nodes_alg_oom_plan, &alg, NULL);
	/* OOM relaunches do not spend restartCount: none is allowed here. */
	ck_assert_int_eq(nodes_set_restart_count(m, "worker", 0), 0);
	ck_assert_int_eq(nodes_add(m, "w0", "worker", 0, "h1", &res64), 0);
	struct sched_event e = ev_of(SCHED_EV_OOM, "w0", "h1", -1, 9);
	e.memory_limit_mb = 64;
	struct nodes_action a = feed(m, e);
	ck_assert_int_eq(a.type, NODES_RELAUNCH);
	ck_assert_int_eq(a.res.memory_mb, 128); /* x2 */
	ck_assert_int_eq(a.rank, 0);
	ck_assert_msg(strstr(a.reason, "64") && strstr(a.reason, "128"), "%s", a.reason);
	e = ev_of(SCHED_EV_OOM, "w0.1", "h1", -1, 9);
	e.memory_limit_mb = 128;
	a = feed(m, e);
	ck_assert_int_eq(a.type, NODES_RELAUNCH);
	ck_assert_int_eq(a.res.memory_mb, 150); /* x4 = 512, capped */
	e = ev_of(SCHED_EV_OOM, "w0.2", "h1", -1, 9);
	e.memory_limit_mb = 150;
	a = feed(m, e);
	ck_assert_int_eq(a.type, NODES_GIVE_UP);
	struct nodes_status st;
	nodes_status(m, &st);
	ck_assert_int_eq(st.state, NODES_JOB_FAILED);
	ck_assert_int_eq(st.oom_relaunches, 2);
	ck_assert_msg(strstr(st.reason, "memory cannot grow") && strstr(st.reason, "150"), "%s",
		      st.reason);
	/* OOM kills say nothing against the host. */
	ck_assert(!nodes_host_bad(m, "h1"));
	nodes_free(m);
}
END_TEST

START_TEST(test_bad_host_exclusion)
{
	const char *hosts[] = { "h1", "h2", "h3", NULL };
	struct nodes_conf c = { .host_max_crashes = 2,
				.hosts = hosts,
				.default_restart_count = 10 };
	struct nodes *m = nodes_new(&c, NULL, NULL, NULL);
	ck_assert_int_eq(nodes_add(m, "a", "worker", 0, "h1", &res64), 0);
	ck_assert_int_eq(nodes_add(m, "b", "worker", 1, "h2", &res64), 0);
	/* One crash on h1: relaunched there. */
	struct nodes_action x = feed(m, ev_of(SCHED_EV_EXITED, "a", "h1", 1, 0));
	ck_assert_str_eq(x.host, "h1");
	/* The second crash on h1 makes it bad: the next launch goes elsewhere. */
	x = feed(m, ev_of(SCHED_EV_EXITED, "a.1", "h1", 1, 0));
	ck_assert(nodes_host_bad(m, "h1"));
	ck_assert_int_eq(x.type, NODES_RELAUNCH);
	ck_assert_str_eq(x.host, "h2");
	ck_assert_msg(strstr(x.reason, "on host h2"), "%s", x.reason);
	/* h2 fails its node check: b's relaunch skips it too. */
	ck_assert_int_eq(nodes_host_failed(m, "h2"), 0);
	x = feed(m, ev_of(SCHED_EV_EXITED, "b", "h2", 1, 0));
	ck_assert_str_eq(x.host, "h3");
	/* With h3 bad as well, nothing is left: the job fails saying so. */
	ck_assert_int_eq(nodes_host_failed(m, "h3"), 0);
	x = feed(m, ev_of(SCHED_EV_EXITED, "b.1", "h3", 1, 0));
	ck_assert_int_eq(x.type, NODES_GIVE_UP);
	struct nodes_status st;
	nodes_status(m, &st);
	ck_assert_int_eq(st.state, NODES_JOB_FAILED);
	ck_assert_int_eq(st.bad_hosts, 3);
	ck_assert_msg(strstr(st.reason, "no usable host"), "%s", st.reason);
	nodes_free(m);
}
END_TEST

/* A straggler a plan replaces: the same rank on another host, its slow
 * host charged like a crash host, no restart charged to the node. */
START_TEST(test_straggler_replaced_on_another_host)
{
	const char *hosts[] = { "h1", "h2", NULL };
	struct nodes_conf c = { .host_max_crashes = 2, .hosts = hosts, .default_restart_count = 1 };
	struct nodes *m = nodes_new(&c, NULL, NULL, NULL);
	ck_assert_int_eq(nodes_add(m, "worker-2", "worker", 2, "h1", &res64), 0);
	ck_assert_int_eq(nodes_add(m, "worker-3", "worker", 3, "h1", &res64), 0);
	/* the master stopped it for the plan */
	struct sched_event ev = ev_of(SCHED_EV_EXITED, "worker-2", "h1", -1, 15);
	ev.removed = true;
	ck_assert_int_eq(feed(m, ev).type, NODES_NONE);
	struct nodes_action a;
	ck_assert_int_eq(nodes_replace(m, "worker-2", NULL, &a), 0);
	ck_assert_int_eq(a.type, NODES_RELAUNCH);
	ck_assert_str_eq(a.name, "worker-2.1");
	ck_assert_int_eq(a.rank, 2);
	ck_assert_str_eq(a.host, "h2");
	ck_assert_int_eq(a.res.memory_mb, 64);
	struct nodes_info ni;
	ck_assert_int_eq(nodes_get(m, "worker-2", &ni), 0);
	ck_assert_int_eq(ni.restarts, 0);
	ck_assert(!nodes_host_bad(m, "h1"));
	/* h1 holds one charge: one crash there makes it bad */
	a = feed(m, ev_of(SCHED_EV_EXITED, "worker-3", "h1", 1, 0));
	ck_assert_int_eq(a.type, NODES_RELAUNCH);
	ck_assert(nodes_host_bad(m, "h1"));
	ck_assert_str_eq(a.host, "h2");
	ck_assert_int_eq(nodes_replace(m, "nobody", NULL, &a), -ENOENT);
	nodes_free(m);
}
END_TEST

/* Where the backend places nodes itself (no host list: Kubernetes,
 * Slurm), the host a node ran on is the one its STARTED event names; a
 * straggler's, a crashed or a lost node's next launch is told to keep off
 * that host, and every launch off the bad hosts; a crash's reason names
 * the host it happened on. */
START_TEST(test_avoid_where_the_backend_places)
{
	struct nodes_conf c = { .host_max_crashes = 2,
				.default_restart_count = 5,
				.backend_places = true };
	struct nodes *m = nodes_new(&c, NULL, NULL, NULL);
	ck_assert_int_eq(nodes_add(m, "worker-0", "worker", 0, NULL, &res64), 0);
	ck_assert_int_eq(nodes_add(m, "worker-1", "worker", 1, NULL, &res64), 0);
	struct nodes_info ni;
	ck_assert_int_eq(nodes_get(m, "worker-0", &ni), 0);
	ck_assert_int_eq(ni.navoid, 0);
	feed(m, ev_of(SCHED_EV_STARTED, "worker-0", "n1", 0, 0));
	feed(m, ev_of(SCHED_EV_STARTED, "worker-1", "n2", 0, 0));
	/* a straggler on n1 replaced: kept off n1 */
	struct sched_event ev = ev_of(SCHED_EV_EXITED, "worker-0", "n1", -1, 15);
	ev.removed = true;
	feed(m, ev);
	struct nodes_action a;
	ck_assert_int_eq(nodes_replace(m, "worker-0", NULL, &a), 0);
	ck_assert_msg(strstr(a.reason, "host n1 charged"), "%s", a.reason);
	ck_assert_int_eq(nodes_get(m, "worker-0", &ni), 0);
	ck_assert_int_eq(ni.navoid, 1);
	ck_assert_str_eq(ni.avoid[0], "n1");
	/* it runs on n3 now and crashes there: kept off n3, reason names it */
	feed(m, ev_of(SCHED_EV_STARTED, "worker-0.1", "n3", 0, 0));
	a = feed(m, ev_of(SCHED_EV_EXITED, "worker-0.1", "n3", 1, 0));
	ck_assert_int_eq(a.type, NODES_RELAUNCH);
	ck_assert_msg(strstr(a.reason, "exited with code 1 on host n3;"), "%s", a.reason);
	ck_assert_int_eq(nodes_get(m, "worker-0", &ni), 0);
	ck_assert_str_eq(ni.avoid[0], "n3");
	/* worker-1's machine is lost: not a restart, kept off n2, named */
	ev = ev_of(SCHED_EV_EXITED, "worker-1", "n2", -1, 9);
	ev.lost = true;
	a = feed(m, ev);
	ck_assert_int_eq(a.type, NODES_RELAUNCH);
	ck_assert_msg(strstr(a.reason, "on host n2: its machine was lost"), "%s", a.reason);
	ck_assert_int_eq(nodes_get(m, "worker-1", &ni), 0);
	ck_assert_int_eq(ni.restarts, 0);
	ck_assert_int_eq(ni.navoid, 1);
	ck_assert_str_eq(ni.avoid[0], "n2");
	/* n1 (charged once) crashes again: bad, so every launch keeps off it */
	feed(m, ev_of(SCHED_EV_STARTED, "worker-1.1", "n1", 0, 0));
	a = feed(m, ev_of(SCHED_EV_EXITED, "worker-1.1", "n1", 1, 0));
	ck_assert(nodes_host_bad(m, "n1"));
	/* its own host bad and no host list: the backend places it, off n1 */
	ck_assert_int_eq(a.type, NODES_RELAUNCH);
	ck_assert_str_eq(a.host, "");
	ck_assert_int_eq(nodes_get(m, "worker-1", &ni), 0);
	ck_assert_str_eq(ni.avoid[0], "n1");
	ck_assert_int_eq(nodes_get(m, "worker-0", &ni), 0);
	ck_assert_int_eq(ni.navoid, 2);
	ck_assert_str_eq(ni.avoid[0], "n3");
	ck_assert_str_eq(ni.avoid[1], "n1");
	nodes_free(m);
}
END_TEST

/* A node whose end is the first the backend tells of it (its Slurm job
 * started and was cancelled between two polls) is charged to the host the
 * end names, and its relaunch keeps off that host. */
START_TEST(test_crash_before_start_charges_its_host)
{
	struct nodes_conf c = { .host_max_crashes = 3, .default_restart_count = 5 };
	struct nodes *m = nodes_new(&c, NULL, NULL, NULL);
	ck_assert_int_eq(nodes_add(m, "worker-0", "worker", 0, NULL, &res64), 0);
	struct nodes_action a = feed(m, ev_of(SCHED_EV_EXITED, "worker-0", "rvn1", -1, 15));
	ck_assert_int_eq(a.type, NODES_RELAUNCH);
	ck_assert_msg(strstr(a.reason, "killed by signal 15 on host rvn1;"), "%s", a.reason);
	struct nodes_info ni;
	ck_assert_int_eq(nodes_get(m, "worker-0", &ni), 0);
	ck_assert_int_eq(ni.navoid, 1);
	ck_assert_str_eq(ni.avoid[0], "rvn1");
	nodes_free(m);
}
END_TEST

/* What a restarted master puts back from its journal (the charged hosts,
 * the host a node left) gives the same placement as the policy that
 * charged them: the bad host and the left one stay avoided. */
START_TEST(test_charged_hosts_restored)
{
	const char *hosts[] = { "h1", "h2", "h3", NULL };
	struct nodes_conf c = { .host_max_crashes = 1, .hosts = hosts, .default_restart_count = 5 };
	struct nodes *m = nodes_new(&c, NULL, NULL, NULL);
	ck_assert_int_eq(nodes_add(m, "a", "worker", 0, "h1", &res64), 0);
	ck_assert_int_eq(nodes_hosts(m, NULL, 0), 0);
	struct nodes_action x = feed(m, ev_of(SCHED_EV_EXITED, "a", "h1", 1, 0));
	ck_assert_str_eq(x.host, "h2");
	struct nodes_host h[4];
	ck_assert_int_eq(nodes_hosts(m, h, 4), 1);
	ck_assert_str_eq(h[0].name, "h1");
	ck_assert_int_eq(h[0].crashes, 1);
	ck_assert(h[0].bad);
	struct nodes_info ni;
	ck_assert_int_eq(nodes_get(m, "a", &ni), 0);
	ck_assert_str_eq(ni.left, "h1");

	/* the next master: the node as journaled, then its hosts */
	struct nodes *r = nodes_new(&c, NULL, NULL, NULL);
	ck_assert_int_eq(nodes_add(r, "a", "worker", 0, ni.host, &res64), 0);
	ck_assert_int_eq(nodes_restore(r, "a", ni.attempt, ni.restarts, ni.ooms, false, ni.left),
			 0);
	ck_assert_int_eq(nodes_host_restore(r, h[0].name, h[0].crashes, h[0].bad), 0);
	ck_assert_int_eq(nodes_host_restore(r, "", 1, false), -EINVAL);
	struct nodes_info ri;
	ck_assert_int_eq(nodes_get(r, "a", &ri), 0);
	ck_assert_int_eq(ri.navoid, 1);
	ck_assert_str_eq(ri.avoid[0], "h1");
	/* its crash on h2 makes h2 bad too: h3, never h1 */
	x = feed(r, ev_of(SCHED_EV_EXITED, "a.1", "h2", 1, 0));
	ck_assert_int_eq(x.type, NODES_RELAUNCH);
	ck_assert_str_eq(x.host, "h3");
	nodes_free(r);
	nodes_free(m);
}
END_TEST

RV_TEST_MAIN_TCASE("nodes", "nodes", 10, test_relaunch_same_rank, test_restart_budget_gives_up,
		   test_lost_not_charged_pending_gives_up, test_oom_memory_step,
		   test_bad_host_exclusion, test_straggler_replaced_on_another_host,
		   test_avoid_where_the_backend_places, test_crash_before_start_charges_its_host,
		   test_charged_hosts_restored, test_relaunch_in_place_keeps_the_host)
