/*
 * check_nodemgr.c: the node manager (master/nodemgr.c) reconciling real
 * processes (`sleep`) with the desired state through the local backend:
 * more ranks are launched, the highest ranks go when the count drops, and
 * new resources relaunch a node (rlimits cannot resize in place)
 * without counting a crash; the hosts crashes were charged to, and the
 * host a node left, outlive a master restart; a node the network check
 * named that fails has its host charged as bad, journaled, once per node
 * and check, across a restart too.  A master state (journal in a
 * temp folder) is built as main.c does, without the API.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "master.h"
#include "nodemgr.h"
#include "parse.h"
#include "plans.h"
#include "testutil.h"
#include "unitmaster.h"

static const char spec_json[] =
	"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
	"\"metadata\":{\"name\":\"nm-unit\"},\"spec\":{\"distributionStrategy\":"
	"\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{\"replicas\":2,\"minReplicas\":1,"
	"\"maxReplicas\":4,\"command\":[\"sleep\",\"30\"]}},"
	"\"datasets\":[{\"name\":\"train\",\"size\":100,\"shardSize\":10}]}}";

static char dir[64];

/* A master on dir's state folder (made by the caller); with nodes, its
 * node thread started. */
static struct master *master_open(const char *spec, bool nodes)
{
	rv_log_setup("master", RV_LOG_WARN);
	char state[96];
	snprintf(state, sizeof(state), "%s/state", dir);
	struct master *m = unitmaster_new(spec, state, 1, 4);
	struct master_cfg *c = &m->cfg;
	snprintf(c->scheduler, sizeof(c->scheduler), "local");
	snprintf(c->node_limits, sizeof(c->node_limits), "rlimit");
	c->last_call_ms = 0;
	c->nosync = 1;
	c->node_stop_grace_ms = 500;
	c->node_usage_interval_ms = 100;
	c->job_linger_s = 60;
	struct rv_err err = { 0 };
	plans_init(m);
	nodemgr_register(m);
	ck_assert_int_eq(nodemgr_wanted(c, &m->spec, &err), 1);
	ck_assert_msg(state_open(m, &err) == 0, "%s", err.msg);
	if (nodes)
		ck_assert_msg(nodemgr_start(m, "127.0.0.1:1", &err) == 0, "%s", err.msg);
	return m;
}

static struct master *master_new_spec(const char *spec)
{
	snprintf(dir, sizeof(dir), "/tmp/rover-nodemgr-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	return master_open(spec, true);
}

static struct master *master_new(void)
{
	return master_new_spec(spec_json);
}

static void master_free(struct master *m)
{
	nodemgr_stop(m);
	state_close(m);
	rv_job_spec_release(&m->spec);
	free(m);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* What the table says: running nodes, and the pid and instance of name. */
struct view {
	int running, total;
	int pid;
	char instance[SCHED_NAME_MAX];
	int64_t memory_mb;
	int restarts;
	bool has_usage;
};

static void look(struct master *m, const char *name, struct view *v)
{
	memset(v, 0, sizeof(*v));
	state_lock(m, "test");
	for (int i = 0; i < m->nnodes; i++) {
		const struct master_node *n = &m->nodes[i];
		v->total++;
		v->running += n->state == MASTER_NODE_RUNNING;
		if (name && !strcmp(n->name, name)) {
			v->pid = n->pid;
			snprintf(v->instance, sizeof(v->instance), "%s", n->instance);
			v->memory_mb = n->res.memory_mb;
			v->restarts = n->restarts;
			v->has_usage = n->has_usage;
		}
	}
	state_unlock(m);
}

/* Wait until the table has `running` running nodes out of `total`. */
static void wait_for(struct master *m, int running, int total)
{
	struct view v;
	for (int i = 0; i < 200; i++) {
		look(m, NULL, &v);
		if (v.running == running && v.total == total)
			return;
		usleep(25 * 1000);
	}
	ck_abort_msg("%d of %d nodes running, want %d of %d", v.running, v.total, running, total);
}

static void set_desired(struct master *m, int count, int64_t memory_mb)
{
	state_lock(m, "test");
	struct master_group *g = &m->desired.groups[RV_ROLE_WORKER];
	g->count = count;
	if (memory_mb) {
		g->has_resources = true;
		g->cpu = 1;
		g->memory_mb = memory_mb;
	}
	m->desired.version++;
	state_unlock(m);
	nodemgr_wake(m);
}

START_TEST(test_reconcile_count_and_resources)
{
	struct master *m = master_new();
	wait_for(m, 2, 2); /* the spec's 2 replicas */
	struct view v;
	look(m, "worker-1", &v);
	ck_assert_int_gt(v.pid, 0);
	int pid1 = v.pid;

	set_desired(m, 3, 0);
	wait_for(m, 3, 3);
	look(m, "worker-2", &v);
	ck_assert_str_eq(v.instance, "worker-2");
	int pid2 = v.pid;

	set_desired(m, 1, 0); /* the highest ranks go */
	wait_for(m, 1, 1);
	look(m, "worker-0", &v);
	ck_assert_str_eq(v.instance, "worker-0");
	for (int i = 0; i < 100 && (kill(pid1, 0) == 0 || kill(pid2, 0) == 0); i++)
		usleep(20 * 1000);
	ck_assert_int_ne(kill(pid1, 0), 0);
	ck_assert_int_ne(kill(pid2, 0), 0);

	/* New memory: rlimits cannot change live, so a relaunch. */
	set_desired(m, 1, 128);
	for (int i = 0; i < 200; i++) {
		look(m, "worker-0", &v);
		if (!strcmp(v.instance, "worker-0.1") && v.pid > 0)
			break;
		usleep(25 * 1000);
	}
	ck_assert_str_eq(v.instance, "worker-0.1");
	ck_assert_int_eq(v.memory_mb, 128);
	ck_assert_int_eq(v.restarts, 0); /* not a crash */
	wait_for(m, 1, 1);

	/* Back up to 2: rank 1 comes back as a fresh node. */
	set_desired(m, 2, 128);
	wait_for(m, 2, 2);
	look(m, "worker-1", &v);
	ck_assert_str_eq(v.instance, "worker-1");
	ck_assert_int_eq(v.memory_mb, 128);
	state_lock(m, "test");
	ck_assert_int_eq(m->job_state, MASTER_JOB_RUNNING);
	state_unlock(m);
	master_free(m);
}
END_TEST

/* Apply one operation as the API would, under the lock. */
static struct master_result apply_op(struct master *m, int type, const char *node, int64_t now)
{
	struct master_op op = { .now_ms = now, .local_world_size = 1 };
	struct master_result res;
	snprintf(op.node, sizeof(op.node), "%s", node);
	snprintf(op.addr, sizeof(op.addr), "127.0.0.1:29500");
	state_lock(m, "test");
	state_apply(m, type, &op, NULL, 0, &res, NULL);
	state_unlock(m);
	return res;
}

/* Nodes whose agents finished (exit 0) stop heartbeating: their silence
 * afterwards is no death and opens no new round, which would stop the
 * workers of a peer still finishing its last steps. */
START_TEST(test_succeeded_node_silence_is_no_death)
{
	static const char spec[] =
		"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		"\"metadata\":{\"name\":\"nm-done\"},\"spec\":{\"distributionStrategy\":"
		"\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{\"replicas\":2,"
		"\"minReplicas\":1,\"maxReplicas\":4,\"command\":[\"sleep\",\"1\"]}},"
		"\"datasets\":[{\"name\":\"train\",\"size\":100,\"shardSize\":10}]}}";
	struct master *m = master_new_spec(spec);
	state_lock(m, "test");
	int64_t t0 = state_now(m);
	state_unlock(m);
	ck_assert_int_eq(apply_op(m, MASTER_OP_JOIN, "worker-0", t0).rc, 0);
	ck_assert_int_eq(apply_op(m, MASTER_OP_JOIN, "worker-1", t0).rc, 0);
	int succeeded = 0;
	for (int i = 0; i < 200 && succeeded < 2; i++) {
		usleep(25 * 1000);
		state_lock(m, "test");
		succeeded = 0;
		for (int k = 0; k < m->nnodes; k++)
			succeeded += m->nodes[k].state == MASTER_NODE_SUCCEEDED;
		state_unlock(m);
	}
	ck_assert_int_eq(succeeded, 2);
	int64_t before, after;
	state_lock(m, "test");
	rdzv_state(m->rdzv, &before, NULL);
	state_unlock(m);
	apply_op(m, MASTER_OP_TICK, "", t0 + 60000);
	state_lock(m, "test");
	rdzv_state(m->rdzv, &after, NULL);
	state_unlock(m);
	unsigned long long dead = (unsigned long long)atomic_load(&m->nodes_dead);
	ck_assert_msg(dead == 0, "%llu succeeded nodes declared dead for their silence", dead);
	ck_assert_int_eq(after, before);
	master_free(m);
}
END_TEST

/* Apply a plan (JSON) as the plan thread does; the result's rc. */
static int apply_plan(struct master *m, const char *plan)
{
	struct master_op op = { .now_ms = 1 };
	struct master_result res;
	int64_t seq = 0;
	state_lock(m, "test");
	op.now_ms = state_now(m);
	state_apply(m, MASTER_OP_PLAN, &op, plan, strlen(plan), &res, &seq);
	state_unlock(m);
	nodemgr_wake(m);
	return res.rc;
}

/* Wait until node name runs as instance; its view. */
static struct view wait_instance(struct master *m, const char *name, const char *instance)
{
	struct view v;
	for (int i = 0; i < 400; i++) {
		look(m, name, &v);
		if (!strcmp(v.instance, instance) && v.pid > 0)
			return v;
		usleep(25 * 1000);
	}
	ck_abort_msg("%s runs as %s, not %s", name, v.instance, instance);
	return v;
}

/* A plan with `remove` (a straggler) and `migrate` (a hot PS) is carried
 * out: the straggler relaunched with its rank, the PS relaunched with the
 * plan's resources and kept on them, nothing else touched; and what the
 * master did is what rv_scaling_apply, which rover-sim applies plans with,
 * says it does (the same actions, the same parts not applied). */
START_TEST(test_plan_remove_and_migrate_carried_out)
{
	static const char spec[] =
		"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		"\"metadata\":{\"name\":\"nm-plan\"},\"spec\":{\"distributionStrategy\":"
		"\"ParameterServerStrategy\",\"replicaSpecs\":{\"worker\":{\"replicas\":3,"
		"\"minReplicas\":1,\"maxReplicas\":4,\"resources\":{\"cpu\":1,\"memory\":"
		"\"128Mi\"},\"command\":[\"sleep\",\"30\"]},\"ps\":{\"replicas\":2,"
		"\"minReplicas\":1,\"maxReplicas\":2,\"resources\":{\"cpu\":1,\"memory\":"
		"\"128Mi\"},\"command\":[\"sleep\",\"30\"]}},"
		"\"datasets\":[{\"name\":\"train\",\"size\":100,\"shardSize\":10}]}}";
	static const char plan[] =
		"{\"job\":\"u\",\"id\":7,\"stage\":\"running\",\"algorithm\":\"straggler\","
		"\"reason\":\"r\",\"groups\":{\"worker\":{\"count\":3,\"resource\":{\"cpu\":1,"
		"\"memory_mb\":128}},\"ps\":{\"count\":2,\"resource\":{\"cpu\":1,\"memory_mb\":128}"
		"}},"
		"\"launch\":[{\"node\":\"worker-1\",\"role\":\"worker\",\"resource\":{\"cpu\":1,"
		"\"memory_mb\":128}}],"
		"\"remove\":[{\"node\":\"worker-1\",\"role\":\"worker\"},"
		"{\"node\":\"worker-9\",\"role\":\"worker\"}],"
		"\"migrate\":[{\"node\":\"ps-1\",\"role\":\"ps\",\"resource\":{\"cpu\":2,"
		"\"memory_mb\":192}}]}";
	struct master *m = master_new_spec(spec);
	wait_for(m, 5, 5);
	struct view w0, w2, ps0;
	look(m, "worker-0", &w0);
	look(m, "worker-2", &w2);
	look(m, "ps-0", &ps0);

	/* what the simulator would credit */
	struct rv_err err = { 0 };
	cJSON *doc = rv_json_parse(plan, strlen(plan), &err);
	ck_assert_ptr_nonnull(doc);
	struct rv_scale_plan *pl = malloc(sizeof(*pl));
	struct rv_scaling_target *t = malloc(sizeof(*t));
	struct rv_scaling_effect *eff = malloc(sizeof(*eff));
	ck_assert(pl && t && eff);
	ck_assert_int_eq(rv_scale_plan_from_json(doc, pl, &err), 0);
	cJSON_Delete(doc);
	rv_scaling_target_init(t, &m->spec);
	rv_scaling_apply(pl, &m->spec, t, eff);
	ck_assert_int_eq(eff->nact, 2);

	ck_assert_int_eq(apply_plan(m, plan), 0);
	for (int i = 0; i < eff->nact; i++) {
		char inst[SCHED_NAME_MAX];
		snprintf(inst, sizeof(inst), "%s.1", eff->act[i].node);
		struct view v = wait_instance(m, eff->act[i].node, inst);
		ck_assert_int_eq(v.memory_mb, eff->act[i].resource.memory_mb);
		ck_assert_int_eq(v.restarts, 0); /* not a crash */
	}
	struct view v = wait_instance(m, "worker-1", "worker-1.1");
	ck_assert_int_eq(v.memory_mb, 128);
	v = wait_instance(m, "ps-1", "ps-1.1");
	ck_assert_int_eq(v.memory_mb, 192);
	state_lock(m, "test");
	ck_assert_str_eq(m->plan.not_applied, eff->not_applied);
	state_unlock(m);
	ck_assert_msg(strstr(eff->not_applied, "remove worker-9") &&
			      strstr(eff->not_applied, "migrate ps-1"),
		      "%s", eff->not_applied);

	/* a later plan without lists: nobody relaunched again, the migrated
	 * PS keeps its own resources */
	static const char next[] =
		"{\"job\":\"u\",\"id\":8,\"stage\":\"running\",\"algorithm\":\"hold\","
		"\"reason\":\"r\",\"groups\":{\"worker\":{\"count\":3,\"resource\":{\"cpu\":1,"
		"\"memory_mb\":128}},\"ps\":{\"count\":2,\"resource\":{\"cpu\":1,\"memory_mb\":128}"
		"}}}";
	ck_assert_int_eq(apply_plan(m, next), 0);
	usleep(600 * 1000);
	wait_for(m, 5, 5);
	look(m, "ps-1", &v);
	ck_assert_str_eq(v.instance, "ps-1.1");
	ck_assert_int_eq(v.memory_mb, 192);
	look(m, "worker-1", &v);
	ck_assert_str_eq(v.instance, "worker-1.1");
	/* the others were never touched */
	look(m, "worker-0", &v);
	ck_assert_int_eq(v.pid, w0.pid);
	look(m, "worker-2", &v);
	ck_assert_int_eq(v.pid, w2.pid);
	look(m, "ps-0", &v);
	ck_assert_int_eq(v.pid, ps0.pid);
	free(pl);
	free(t);
	free(eff);
	master_free(m);
}
END_TEST

/* A plan asking more memory than the largest node has (here: this
 * machine) would never start where the scheduler refuses it: the node is
 * launched with the largest node's memory instead, and the plan says so
 * in its parts not applied. */
START_TEST(test_plan_above_the_largest_node_capped)
{
	struct master *m = master_new();
	wait_for(m, 2, 2);
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
	int64_t machine = (int64_t)pages * size / (1024 * 1024);
	char plan[512];
	snprintf(plan, sizeof(plan),
		 "{\"job\":\"u\",\"id\":3,\"stage\":\"running\",\"algorithm\":\"a\","
		 "\"reason\":\"r\",\"groups\":{\"worker\":{\"count\":1,\"resource\":{"
		 "\"cpu\":1,\"memory_mb\":%" PRId64 "}}}}",
		 machine * 4);
	ck_assert_int_eq(apply_plan(m, plan), 0);
	state_lock(m, "test");
	char na[RV_NOT_APPLIED_MAX];
	snprintf(na, sizeof(na), "%s", m->plan.not_applied);
	state_unlock(m);
	char want[128];
	snprintf(want, sizeof(want), "capped at cpu 1, memory %" PRId64 " MiB (the largest node)",
		 machine);
	ck_assert_msg(strstr(na, "worker resources cpu 1, memory") && strstr(na, want), "%s", na);
	struct view v = wait_instance(m, "worker-0", "worker-0.1");
	ck_assert_int_eq(v.memory_mb, machine);
	/* at the cap already: no relaunch after relaunch */
	usleep(500 * 1000);
	look(m, "worker-0", &v);
	ck_assert_str_eq(v.instance, "worker-0.1");
	master_free(m);
}
END_TEST

/* A node document journaled as the node thread does. */
static void journal_node(struct master *m, int type, const char *doc)
{
	struct master_result res;
	int64_t seq = 0;
	state_lock(m, "test");
	int rc = state_apply(m, type, NULL, doc, strlen(doc), &res, &seq);
	state_unlock(m);
	ck_assert_msg(rc >= 0, "%s", res.err.msg);
	ck_assert_int_eq(state_sync(m, seq), 0);
}

/* The table's left host of name, and whether host is charged (crashes)
 * and bad; -1 crashes: not in the table. */
static int charged(struct master *m, const char *name, char *left, const char *host, bool *bad)
{
	int crashes = -1;
	state_lock(m, "test");
	for (int i = 0; i < m->nnodes; i++)
		if (!strcmp(m->nodes[i].name, name))
			snprintf(left, SCHED_NAME_MAX, "%s", m->nodes[i].left);
	for (int i = 0; i < m->nhosts; i++)
		if (!strcmp(m->hosts[i].name, host)) {
			crashes = m->hosts[i].crashes;
			*bad = m->hosts[i].bad;
		}
	state_unlock(m);
	return crashes;
}

/* The hosts crashes were charged to, and the host a node left, survive a
 * master restart: a master killed while worker-0 was being relaunched off
 * the bad host h1 is followed by one whose relaunch of worker-0 still
 * keeps off h1 (its own journal says so again), and so does a third
 * master that starts from a snapshot. */
START_TEST(test_charged_hosts_survive_a_restart)
{
	snprintf(dir, sizeof(dir), "/tmp/rover-nodemgr-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct master *m = master_open(spec_json, false);
	journal_node(m, MASTER_OP_NODE_LAUNCHED,
		     "{\"name\":\"worker-0\",\"instance\":\"worker-0.1\",\"role\":\"worker\","
		     "\"host\":\"\",\"left\":\"h1\",\"rank\":0,\"attempt\":1,\"restarts\":1,"
		     "\"ooms\":0,\"state\":\"launched\",\"hosts\":[{\"name\":\"h1\","
		     "\"crashes\":2,\"bad\":true},{\"name\":\"h2\",\"crashes\":1}]}");
	journal_node(m, MASTER_OP_NODE_LAUNCHED,
		     "{\"name\":\"worker-1\",\"instance\":\"worker-1\",\"role\":\"worker\","
		     "\"host\":\"\",\"rank\":1,\"attempt\":0,\"restarts\":0,\"ooms\":0,"
		     "\"state\":\"launched\"}");
	state_close(m);
	rv_job_spec_release(&m->spec);
	free(m);

	/* the restarted master relaunches worker-0 (gone with the master) */
	m = master_open(spec_json, false);
	m->cfg.snapshot_every = 1; /* the next record brings a snapshot */
	struct rv_err err = { 0 };
	ck_assert_msg(nodemgr_start(m, "127.0.0.1:1", &err) == 0, "%s", err.msg);
	struct view v;
	for (int i = 0; i < 200; i++) {
		look(m, "worker-0", &v);
		if (!strcmp(v.instance, "worker-0.2") && v.pid > 0)
			break;
		usleep(25 * 1000);
	}
	ck_assert_str_eq(v.instance, "worker-0.2");
	ck_assert_int_eq(v.restarts, 1); /* a master restart charges nothing */
	char left[SCHED_NAME_MAX] = "";
	bool bad = false;
	ck_assert_int_eq(charged(m, "worker-0", left, "h1", &bad), 2);
	ck_assert_str_eq(left, "h1");
	ck_assert(bad);
	ck_assert_int_eq(charged(m, "worker-0", left, "h2", &bad), 1);
	ck_assert(!bad);
	ck_assert_uint_gt(atomic_load(&m->snapshots), 0);
	nodemgr_stop(m);
	state_close(m);
	rv_job_spec_release(&m->spec);
	free(m);

	/* from the snapshot (and the records after it) */
	m = master_open(spec_json, false);
	memset(left, 0, sizeof(left));
	ck_assert_int_eq(charged(m, "worker-0", left, "h1", &bad), 2);
	ck_assert_str_eq(left, "h1");
	ck_assert(bad);
	master_free(m);
}
END_TEST

/* worker-0's instance as the table has it, once it runs. */
static struct view wait_running(struct master *m, const char *name)
{
	struct view v;
	for (int i = 0; i < 200; i++) {
		look(m, name, &v);
		if (v.pid > 0)
			return v;
		usleep(25 * 1000);
	}
	ck_abort_msg("%s never ran", name);
	return v;
}

/* Close m and open its state folder again (the node thread with nodes). */
static struct master *master_reopen(struct master *m, bool nodes)
{
	state_close(m);
	rv_job_spec_release(&m->spec);
	free(m);
	return master_open(spec_json, nodes);
}

/* Journal the launch of worker-RANK's instance (attempt) on host. */
static void launched_on(struct master *m, int rank, int attempt, int restarts, const char *host)
{
	char doc[400], inst[32];
	if (attempt)
		snprintf(inst, sizeof(inst), "worker-%d.%d", rank, attempt);
	else
		snprintf(inst, sizeof(inst), "worker-%d", rank);
	snprintf(doc, sizeof(doc),
		 "{\"name\":\"worker-%d\",\"instance\":\"%s\",\"role\":\"worker\","
		 "\"host\":\"%s\",\"rank\":%d,\"attempt\":%d,\"restarts\":%d,\"ooms\":0,"
		 "\"state\":\"launched\"}",
		 rank, inst, host, rank, attempt, restarts);
	journal_node(m, MASTER_OP_NODE_LAUNCHED, doc);
}

/* The last network check of m (check 1, three members) as the master
 * serves it: worker-0 late in both rounds, a straggler; the others OK. */
static void worker0_straggler(struct master *m)
{
	static const char names[3][64] = { "worker-0", "worker-1", "worker-2" };
	static const char addrs[3][64] = { "a:1", "b:1", "c:1" };
	const struct netcheck_limits lim = { 30000, 2.0, 4.0, 100 };
	state_lock(m, "test");
	struct netcheck_run *r = &m->netcheck;
	ck_assert_int_eq(netcheck_run_start(r, 1, names, addrs, 3, 0, &lim), 0);
	for (int i = 0; i < 3; i++)
		netcheck_run_join(r, names[i], 0);
	for (int round = 0; round < 2; round++) {
		for (int i = 1; i < 3; i++) {
			struct netcheck_group g;
			ck_assert_int_eq(netcheck_run_group(r, names[i], round, &g), 1);
			if (g.nodes[0] != 0 && (g.n < 2 || g.nodes[1] != 0))
				netcheck_run_report(r, names[i], round, true, 0.1, 0, 10);
		}
		ck_assert_int_eq(netcheck_run_tick(r, netcheck_run_deadline(r)), 1);
	}
	ck_assert_int_eq(r->id, 1);
	ck_assert_int_eq(r->m[0].verdict, NETCHECK_STRAGGLER);
	state_unlock(m);
}

/* worker-0 killed; until host has a crash charged.  Whether it is bad. */
static bool kill_charged(struct master *m, const char *host)
{
	struct view v = wait_running(m, "worker-0");
	char left[SCHED_NAME_MAX] = "";
	bool bad = false;
	int crashes = -1;
	kill(v.pid, SIGKILL);
	for (int i = 0; i < 200 && (crashes = charged(m, "worker-0", left, host, &bad)) < 1; i++)
		usleep(25 * 1000);
	ck_assert_int_eq(crashes, 1);
	return bad;
}

/* The last network check found worker-0 a straggler (three members, it
 * late in both rounds) and its agent left the job over it (exit 1; here
 * a kill): its host h1 is charged as bad before the relaunch, so the
 * relaunch does not go back there (no other host: it gives up naming
 * h1); the charge is journaled and a restarted master still has it.
 * worker-1, found OK, fails too: its host is charged only as a crash. */
START_TEST(test_netcheck_verdict_charges_the_host)
{
	snprintf(dir, sizeof(dir), "/tmp/rover-nodemgr-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct master *m = master_open(spec_json, false);
	launched_on(m, 0, 0, 0, "h1");
	launched_on(m, 1, 0, 0, "h2");
	m = master_reopen(m, true); /* relaunches both, on h1 and h2 */
	struct view v1 = wait_running(m, "worker-1");
	worker0_straggler(m);
	state_lock(m, "test");
	ck_assert_int_eq(m->netcheck.state, NETCHECK_DONE);
	ck_assert_int_eq(m->netcheck.m[1].verdict, NETCHECK_OK);
	state_unlock(m);

	char left[SCHED_NAME_MAX] = "";
	bool bad = false;
	kill(v1.pid, SIGKILL);
	struct view v;
	for (int i = 0; i < 200 && (look(m, "worker-1", &v), !strcmp(v.instance, v1.instance)); i++)
		usleep(25 * 1000);
	ck_assert_str_ne(v.instance, v1.instance); /* relaunched */
	ck_assert_int_eq(charged(m, "worker-1", left, "h2", &bad), 1);
	ck_assert(!bad);
	ck_assert_msg(kill_charged(m, "h1"), "h1 not charged as bad for the verdict");
	nodemgr_stop(m);
	state_close(m);
	rv_job_spec_release(&m->spec);
	free(m);

	m = master_open(spec_json, false);
	bad = false;
	ck_assert_int_eq(charged(m, "worker-0", left, "h1", &bad), 1);
	ck_assert(bad);
	master_free(m);
}
END_TEST

/* A verdict charges a node's host once per check, and a restarted master
 * remembers it (the journal, then a snapshot): worker-0, a straggler,
 * fails on h1 (charged as bad); after a restart it runs on h3, as a
 * relaunch elsewhere does, and fails again under the same verdict: h3
 * takes the crash, not the verdict. */
START_TEST(test_netcheck_charge_remembered_across_a_restart)
{
	snprintf(dir, sizeof(dir), "/tmp/rover-nodemgr-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct master *m = master_open(spec_json, false);
	launched_on(m, 0, 0, 0, "h1");
	m = master_reopen(m, true);
	worker0_straggler(m);
	ck_assert(kill_charged(m, "h1"));
	nodemgr_stop(m);
	launched_on(m, 0, 7, 1, "h3");
	m = master_reopen(m, false);
	m->cfg.snapshot_every = 1; /* the next record brings a snapshot */
	struct rv_err err = { 0 };
	ck_assert_msg(nodemgr_start(m, "127.0.0.1:1", &err) == 0, "%s", err.msg);
	worker0_straggler(m); /* the same check and verdict, as the journal has it */
	ck_assert_msg(!kill_charged(m, "h3"), "h3 charged again for check 1's verdict");
	ck_assert_uint_gt(atomic_load(&m->snapshots), 0);
	nodemgr_stop(m);
	m = master_reopen(m, false); /* from the snapshot */
	state_lock(m, "test");
	ck_assert_int_eq(m->nc_check, 1);
	ck_assert_int_eq(m->nc_nnamed, 1);
	ck_assert_str_eq(m->nc_named[0], "worker-0");
	state_unlock(m);
	master_free(m);
}
END_TEST

START_TEST(test_local_without_command_is_refused)
{
	static const char bad[] =
		"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		"\"metadata\":{\"name\":\"x\"},\"spec\":{\"distributionStrategy\":"
		"\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{\"replicas\":1}},"
		"\"datasets\":[{\"name\":\"train\",\"size\":10,\"shardSize\":1}]}}";
	struct rv_job_spec spec;
	struct master_cfg cfg;
	memset(&cfg, 0, sizeof(cfg));
	struct rv_err err = { 0 };
	cJSON *doc = rv_json_parse(bad, strlen(bad), &err);
	ck_assert_int_eq(rv_job_spec_from_json(doc, &spec, &err), 0);
	cJSON_Delete(doc);
	snprintf(cfg.node_limits, sizeof(cfg.node_limits), "auto");
	snprintf(cfg.scheduler, sizeof(cfg.scheduler), "auto");
	ck_assert_int_eq(nodemgr_wanted(&cfg, &spec, &err), 0); /* agents by hand */
	snprintf(cfg.scheduler, sizeof(cfg.scheduler), "local");
	ck_assert_int_eq(nodemgr_wanted(&cfg, &spec, &err), -EINVAL);
	ck_assert_str_eq(err.field, "spec.replicaSpecs.worker.command");
	snprintf(cfg.scheduler, sizeof(cfg.scheduler), "pbs");
	ck_assert_int_eq(nodemgr_wanted(&cfg, &spec, &err), -EINVAL);
	ck_assert_str_eq(err.field, "scheduler");
	/* slurm needs slurmrestd's url, then a command like local */
	snprintf(cfg.scheduler, sizeof(cfg.scheduler), "slurm");
	ck_assert_int_eq(nodemgr_wanted(&cfg, &spec, &err), -EINVAL);
	ck_assert_str_eq(err.field, "slurm.url");
	snprintf(cfg.slurm_url, sizeof(cfg.slurm_url), "unix:/run/slurmrestd.socket");
	ck_assert_int_eq(nodemgr_wanted(&cfg, &spec, &err), -EINVAL);
	ck_assert_str_eq(err.field, "spec.replicaSpecs.worker.command");
	rv_job_spec_release(&spec);
}
END_TEST

RV_TEST_MAIN_TCASE("nodemgr", "reconcile", 60, test_reconcile_count_and_resources,
		   test_plan_above_the_largest_node_capped, test_local_without_command_is_refused,
		   test_plan_remove_and_migrate_carried_out,
		   test_succeeded_node_silence_is_no_death, test_charged_hosts_survive_a_restart,
		   test_netcheck_verdict_charges_the_host,
		   test_netcheck_charge_remembered_across_a_restart)
