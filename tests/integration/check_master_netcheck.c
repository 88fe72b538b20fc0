/*
 * check_master_netcheck.c: the network check on the real rover-master with
 * four simulated agents (threads, each with its own client): they form a
 * world, join the check, take their group for rounds 0 and 1 and report.
 * One agent's collective always fails: it is faulty; one is slow: it is a
 * straggler; both show in /v1/job and survive a kill -9 of the master.  In a
 * second run one agent never reports: each round closes at the timeout, the
 * silent node counts as failed (faulty) and the check ends without it, the
 * world untouched.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "masterfix.h"
#include "parse.h"
#include "testutil.h"

enum { NAGENTS = 4 };
enum role { GOOD, FAULTY, SLOW, SILENT };

struct agent {
	const struct rv_test_master *m;
	int index;
	enum role role;
	const enum role *roles; /* everyone's, by index */
	int rc;
	char err[512];
};

static void *agent_main(void *arg)
{
	struct agent *a = arg;
	struct rv_err err = { 0 };
	struct rv_master_client *c = rv_test_master_client(a->m);
	struct rv_rdzv_join j = { .local_world_size = 1 };
	snprintf(j.node, sizeof(j.node), "node-%d", a->index);
	snprintf(j.addr, sizeof(j.addr), "10.0.0.%d:29500", a->index + 1);
	struct rv_rdzv_world_reply w;
	struct rv_netcheck_joined nj;
	if ((a->rc = rv_master_rendezvous(c, &j, 20000, &w, &err)) < 0)
		goto out;
	rv_rdzv_world_reply_release(&w);
	if ((a->rc = rv_master_netcheck_join(c, j.node, &nj, &err)) < 0 || a->role == SILENT)
		goto out;
	for (int round = 0; round < 2; round++) {
		struct rv_netcheck_group_reply g;
		for (int k = 0;; k++) {
			if ((a->rc = rv_master_netcheck_group(c, j.node, round, &g, &err)) < 0)
				goto out;
			if (g.status == RV_NETCHECK_READY)
				break;
			if (k > 2000) {
				a->rc = -ETIMEDOUT;
				snprintf(err.msg, sizeof(err.msg), "round %d never opened", round);
				goto out;
			}
			usleep(5000);
		}
		/* the group's collective fails when a faulty or silent node is in it */
		bool ok = true;
		for (int k = 0; k < g.npeers; k++) {
			int p = g.peers[k].node[strlen("node-")] - '0'; /* node-0..node-3 */
			ok = ok && a->roles[p] != FAULTY && a->roles[p] != SILENT;
		}
		struct rv_netcheck_report r = { .check = nj.check,
						.round = round,
						.ok = ok,
						.time_s = a->role == SLOW ? 1.5 : 0.1 };
		snprintf(r.node, sizeof(r.node), "%s", j.node);
		if ((a->rc = rv_master_netcheck_report(c, &r, &err)) < 0)
			goto out;
	}
out:
	snprintf(a->err, sizeof(a->err), "%s", err.msg);
	rv_master_client_free(c);
	return NULL;
}

static void run_agents(const struct rv_test_master *m, const enum role *roles)
{
	struct agent a[NAGENTS];
	pthread_t t[NAGENTS];
	for (int i = 0; i < NAGENTS; i++) {
		a[i] = (struct agent){ .m = m, .index = i, .role = roles[i], .roles = roles };
		ck_assert_int_eq(pthread_create(&t[i], NULL, agent_main, &a[i]), 0);
	}
	for (int i = 0; i < NAGENTS; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(a[i].rc == 0, "agent %d: %s", i, a[i].err);
	}
}

static const struct rv_netcheck_result *result_of(const struct rv_netcheck_status *st,
						  const char *node)
{
	for (int i = 0; i < st->nnodes; i++)
		if (strcmp(st->nodes[i].node, node) == 0)
			return &st->nodes[i];
	ck_abort_msg("%s is not in the check", node);
	return NULL;
}

static const char *verdict_of(const struct rv_netcheck_status *st, const char *node)
{
	return rv_netcheck_verdict_name(result_of(st, node)->verdict);
}

static struct rv_test_master *start(const char *timeout_ms)
{
	static struct rv_test_master m;
	char *spec = rv_test_master_spec(100, 10, 1, NAGENTS, NAGENTS);
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	static const char *args[8];
	args[0] = "--rdzv-heartbeat-timeout-ms";
	args[1] = "60000";
	args[2] = "--netcheck-timeout-ms";
	args[3] = timeout_ms;
	args[4] = "--rdzv-last-call-ms";
	args[5] = "100";
	args[6] = NULL;
	ck_assert_int_eq(rv_test_master_start(&m, args), 0);
	return &m;
}

START_TEST(test_faulty_and_straggler)
{
	struct rv_test_master *m = start("30000");
	struct rv_master_client *c = rv_test_master_client(m);
	struct rv_err err = { 0 };
	struct rv_job_status js;
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert_int_eq(js.netcheck, RV_NETCHECK_NONE);
	/* no world yet: nothing to check */
	struct rv_netcheck_joined nj;
	ck_assert_int_eq(rv_master_netcheck_join(c, "node-0", &nj, &err), -EEXIST);

	const enum role roles[NAGENTS] = { GOOD, FAULTY, SLOW, GOOD };
	run_agents(m, roles);
	for (int pass = 0; pass < 2; pass++) {
		struct rv_netcheck_status st;
		ck_assert_msg(rv_master_netcheck(c, &st, &err) == 0, "%s", err.msg);
		ck_assert_int_eq(st.state, RV_NETCHECK_DONE);
		ck_assert_int_eq(st.check, 1);
		ck_assert_int_eq(st.nnodes, NAGENTS);
		ck_assert_str_eq(verdict_of(&st, "node-0"), "ok");
		ck_assert_str_eq(verdict_of(&st, "node-1"), "faulty");
		ck_assert_str_eq(verdict_of(&st, "node-2"), "straggler");
		ck_assert_str_eq(verdict_of(&st, "node-3"), "ok");
		rv_netcheck_status_release(&st);
		ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
		ck_assert_int_eq(js.netcheck, RV_NETCHECK_DONE);
		ck_assert_int_eq(js.nfaulty, 1);
		ck_assert_str_eq(js.faulty[0], "node-1");
		ck_assert_int_eq(js.nstragglers, 1);
		ck_assert_str_eq(js.stragglers[0], "node-2");
		if (pass == 0) {
			/* the results are journaled: a restarted master keeps them */
			int ws = rv_test_master_stop(m, SIGKILL, 5000);
			ck_assert(ws >= 0 && WIFSIGNALED(ws));
			ck_assert_int_eq(rv_test_master_restart(m), 0);
		}
	}
	/* a join of the world already checked starts nothing */
	ck_assert_int_eq(rv_master_netcheck_join(c, "node-0", &nj, &err), 0);
	ck_assert_int_eq(nj.check, 1);
	rv_master_client_free(c);
	rv_test_master_cleanup(m);
}
END_TEST

START_TEST(test_silent_node_fails_after_the_timeout)
{
	struct rv_test_master *m = start("1000");
	struct rv_master_client *c = rv_test_master_client(m);
	struct rv_err err = { 0 };
	const enum role roles[NAGENTS] = { GOOD, GOOD, GOOD, SILENT };
	int64_t t0 = rv_mono_ms();
	run_agents(m, roles); /* returns only once round 1 opened without node-3 */
	struct rv_netcheck_status st = { 0 };
	for (;;) {
		rv_netcheck_status_release(&st);
		ck_assert_msg(rv_master_netcheck(c, &st, &err) == 0, "%s", err.msg);
		if (st.state == RV_NETCHECK_DONE)
			break;
		ck_assert_int_lt(rv_mono_ms() - t0, 10000);
		usleep(20000);
	}
	int64_t took = rv_mono_ms() - t0;
	/* two rounds, each closed by the 1 s timeout, plus the rendezvous */
	ck_assert_int_ge(took, 2000);
	ck_assert_int_lt(took, 6000);
	ck_assert_str_eq(verdict_of(&st, "node-3"), "faulty");
	ck_assert(result_of(&st, "node-3")->silent);
	for (int i = 0; i < 3; i++) {
		char name[24];
		snprintf(name, sizeof(name), "node-%d", i);
		ck_assert(!result_of(&st, name)->silent);
		ck_assert_str_eq(verdict_of(&st, name), "ok");
	}
	rv_netcheck_status_release(&st);
	struct rv_job_status js;
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert_int_eq(js.state, RV_RDZV_COMPLETE); /* the world was never held */
	ck_assert_int_eq(js.nnodes, NAGENTS);
	ck_assert_int_eq(js.nfaulty, 1);
	rv_master_client_free(c);
	rv_test_master_cleanup(m);
}
END_TEST

RV_TEST_MAIN_TCASE("master_netcheck", "core", 60, test_faulty_and_straggler,
		   test_silent_node_fails_after_the_timeout)
