/*
 * check_plans.c: master/plans.c on a master state of its own (journal in a
 * temp folder) against the real rover-brain: the node manager's calls
 * (plans_node_sample, plans_node_event, plans_oom_memory) reach the brain
 * as usage samples, node events and an oom plan; without a brain the oom
 * memory comes from the in-process policy; a plan's counts are clamped to
 * the replica spec and an old plan changes nothing; the desired state, the
 * uid and the newest plan survive a snapshot and a journal replay.
 */
#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "brain_client.h"
#include "brainfix.h"
#include "buf.h"
#include "json.h"
#include "parse.h"
#include "nodelink.h"
#include "nodemgr.h"
#include "plans.h"
#include "testutil.h"
#include "unitmaster.h"

static char conninfo[1024];
static struct rv_test_brain brain;
static char dir[64];

static const char job_json[] =
	"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
	"\"metadata\":{\"name\":\"plans-job\"},"
	"\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\",\"optimizeMode\":\"%s\","
	"\"replicaSpecs\":{\"worker\":{\"replicas\":2,\"minReplicas\":1,\"maxReplicas\":16,"
	"\"resources\":{\"cpu\":4,\"memory\":\"8Gi\"}}},"
	"\"datasets\":[{\"name\":\"train\",\"size\":100,\"shardSize\":10}]}}";

/* A master state for the job spec doc (url: the brain's, "" none) in dir,
 * opened. */
static struct master *master_new_doc(const char *doc, const char *url)
{
	struct master *m = unitmaster_new(doc, dir, 1, 16);
	struct master_cfg *c = &m->cfg;
	snprintf(c->brain_url, sizeof(c->brain_url), "%s", url);
	c->nosync = 1;
	c->brain_connect_timeout_ms = 1000;
	c->brain_timeout_ms = 5000;
	c->brain_max_queue = 1000;
	c->brain_max_queue_kb = 1024;
	c->brain_batch_max = 100;
	c->brain_batch_delay_ms = 10;
	c->brain_poll_wait_s = 1;
	c->brain_backoff_ms = 20;
	c->brain_backoff_max_ms = 200;
	c->brain_stop_ms = 1000;
	c->plan_interval_ms = 100000;
	c->plan_min_samples = 3;
	c->plan_oom_wait_ms = 5000;
	plans_init(m);
	nodemgr_register(m);
	struct rv_err err = { 0 };
	ck_assert_int_eq(state_open(m, &err), 0);
	return m;
}

/* A master state for mode (url: the brain's, "" none) in dir, opened. */
static struct master *master_new(const char *mode, const char *url)
{
	char doc[2048];
	snprintf(doc, sizeof(doc), job_json, mode);
	return master_new_doc(doc, url);
}

static void master_free(struct master *m)
{
	plans_stop(m);
	state_close(m);
	rv_job_spec_release(&m->spec);
	free(m);
}

static void setup(void)
{
	gsl_set_error_handler_off();
	snprintf(dir, sizeof(dir), "/tmp/rover-plans-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	rv_test_brain_stop(&brain, SIGTERM, 10);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void brain_start(void)
{
	ck_assert_int_eq(rv_test_pg_fresh_db(0, conninfo, sizeof(conninfo)), 0);
	const char *args[] = { "--db", conninfo, "--plan-debounce-ms", "0", NULL };
	ck_assert_int_eq(rv_test_brain_start(&brain, args), 0);
}

static void wait_uid(struct master *m, char uid[RV_BRAIN_UID_MAX])
{
	for (int i = 0; i < 500; i++) {
		state_lock(m, "test");
		snprintf(uid, RV_BRAIN_UID_MAX, "%s", m->brain_uid);
		state_unlock(m);
		if (uid[0])
			return;
		usleep(20 * 1000);
	}
	ck_abort_msg("never registered");
}

static cJSON *brain_job(const char *uid)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s", uid);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	cJSON *j = r.json;
	r.json = NULL;
	rv_test_reply_release(&r);
	return j;
}

/* The brain's status of node name, or "" when it does not know it. */
static void node_status(const cJSON *job, const char *name, char *out, size_t size)
{
	const cJSON *it;
	out[0] = 0;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(job, "nodes"))
	{
		const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(it, "name"));
		const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(it, "status"));
		if (n && s && !strcmp(n, name))
			snprintf(out, size, "%s", s);
	}
}

/* worker-<rank> killed for memory at its 8 GiB limit, peak_mb seen. */
static struct rv_event oom_event(int rank, int64_t peak_mb)
{
	struct rv_event ev = { .role = RV_ROLE_WORKER,
			       .rank = rank,
			       .exit_code = 137,
			       .memory_mb = 8192,
			       .peak_memory_mb = peak_mb };
	snprintf(ev.node, sizeof(ev.node), "worker-%d", rank);
	return ev;
}

/* A fresh brain and a cluster-mode master registered with it: its uid. */
static struct master *cluster_master(char uid[RV_BRAIN_UID_MAX])
{
	brain_start();
	struct master *m = master_new("cluster", brain.url);
	struct rv_err err = { 0 };
	ck_assert_int_eq(plans_start(m, &err), 0);
	wait_uid(m, uid);
	return m;
}

START_TEST(test_node_reports_reach_the_brain)
{
	char uid[RV_BRAIN_UID_MAX];
	struct master *m = cluster_master(uid);
	for (int i = 0; i < 3; i++) {
		struct plans_usage u = { .node = "worker-0",
					 .role = RV_ROLE_WORKER,
					 .rank = 0,
					 .cpu = 3.5,
					 .cpu_limit = 4,
					 .memory_mb = 6000 + i,
					 .memory_limit_mb = 8192,
					 .throttled = i ? 0.2 : 0,
					 .step_time = 0.5 };
		ck_assert_int_eq(plans_node_sample(m, &u), 0);
	}
	struct plans_usage bad = { .role = RV_ROLE_WORKER };
	ck_assert_int_eq(plans_node_sample(m, &bad), -EINVAL);
	struct rv_event ev = { .type = RV_EVENT_NODE_FAILED,
			       .node = "worker-1",
			       .rank = 1,
			       .exit_code = 1,
			       .reason = "exited" };
	ck_assert_int_eq(plans_node_event(m, &ev), 0);
	struct rv_event job_ev = { .type = RV_EVENT_JOB_FINISHED };
	ck_assert_int_eq(plans_node_event(m, &job_ev), -EINVAL);
	struct rv_event nameless = { .type = RV_EVENT_NODE_FAILED };
	ck_assert_int_eq(plans_node_event(m, &nameless), -EINVAL);

	int64_t samples = 0;
	char st[32] = "";
	for (int i = 0; i < 250 && (samples < 3 || strcmp(st, "failed")); i++) {
		cJSON *j = brain_job(uid);
		samples = (int64_t)rv_test_json_num(j, "node_samples", 0);
		node_status(j, "worker-1", st, sizeof(st));
		cJSON_Delete(j);
		usleep(20 * 1000);
	}
	ck_assert_int_eq(samples, 3);
	ck_assert_str_eq(st, "failed");

	/* an OOM: the brain's oom plan gives the relaunch more memory, and it
	 * becomes the desired memory of the role */
	struct rv_event oom = oom_event(0, 8190);
	int64_t mb = 0;
	ck_assert_int_eq(plans_oom_memory(m, &oom, &mb), 1);
	ck_assert_int_gt(mb, 8192);
	for (int i = 0; i < 250; i++) {
		state_lock(m, "test");
		int64_t want = m->desired.groups[RV_ROLE_WORKER].memory_mb;
		state_unlock(m);
		if (want == mb)
			break;
		usleep(20 * 1000);
	}
	state_lock(m, "test");
	ck_assert_int_eq(m->desired.groups[RV_ROLE_WORKER].memory_mb, mb);
	ck_assert_str_eq(m->plan.stage, "oom");
	state_unlock(m);
	master_free(m);
}
END_TEST

/* The first number the query answers (psql, as the master links no libpq),
 * -1 on none. */
static long query_long(const char *sql)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "psql '%s' -Atc \"%s\"", conninfo, sql);
	FILE *f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	long n = -1;
	if (fscanf(f, "%ld", &n) != 1)
		n = -1;
	pclose(f);
	return n;
}

/* A node's compute times from its step reports reach the brain in its next
 * usage sample: their mean since the sample before, none when none came. */
START_TEST(test_compute_time_reaches_the_brain)
{
	char uid[RV_BRAIN_UID_MAX];
	struct master *m = cluster_master(uid);
	const double compute[] = { 0.2, 0.4, 0 }; /* the last step's unknown */
	for (int i = 0; i < 3; i++) {
		struct master_op op = { .now_ms = 1000 + 500 * i,
					.step = i + 1,
					.compute_time = compute[i] };
		snprintf(op.node, sizeof(op.node), "worker-0");
		plans_after_op(m, MASTER_OP_STEP, &op);
	}
	struct plans_usage u = { .node = "worker-0",
				 .role = RV_ROLE_WORKER,
				 .ts_ms = 3000,
				 .cpu = 1,
				 .memory_mb = 100,
				 .step_time = -1 };
	ck_assert_int_eq(plans_node_sample(m, &u), 0);
	u.ts_ms = 4000;
	ck_assert_int_eq(plans_node_sample(m, &u), 0);
	for (int i = 0; i < 250 && query_long("SELECT count(*) FROM node_usage") < 2; i++)
		usleep(20 * 1000);
	ck_assert_int_eq(query_long("SELECT count(*) FROM node_usage WHERE ts_ms = 3000"
				    " AND abs(compute_time - 0.3) < 1e-9"
				    " AND abs(step_time - 0.5) < 1e-9"),
			 1);
	ck_assert_int_eq(query_long("SELECT count(*) FROM node_usage WHERE ts_ms = 4000"
				    " AND compute_time IS NULL AND step_time = -1"),
			 1);
	master_free(m);
}
END_TEST

/* A node's own usage report goes to the planner under the rank of its name
 * (worker-1: 1), whatever rank the rendezvous gave its rover-run: the
 * brain names the node of a plan's remove from it. */
START_TEST(test_agent_usage_ranked_by_name)
{
	char uid[RV_BRAIN_UID_MAX];
	struct master *m = cluster_master(uid);
	struct master_node node = { .name = "worker-1", .rank = 1 };
	state_lock(m, "test");
	m->nodes = &node;
	m->nnodes = 1;
	state_unlock(m);
	struct rv_node_usage u = { .node = "worker-1", .rank = 0, .ts_ms = 5000, .cpu = 1 };
	ck_assert_int_eq(nodelink_agent_usage(m, &u), 0);
	/* a node the node manager does not run keeps the rank it reported */
	struct rv_node_usage v = { .node = "worker-9", .rank = 3, .ts_ms = 5000, .cpu = 1 };
	ck_assert_int_eq(nodelink_agent_usage(m, &v), 0);
	for (int i = 0; i < 250 && query_long("SELECT count(*) FROM node_usage") < 2; i++)
		usleep(20 * 1000);
	ck_assert_int_eq(query_long("SELECT rank FROM node_usage WHERE node = 'worker-1'"), 1);
	ck_assert_int_eq(query_long("SELECT rank FROM node_usage WHERE node = 'worker-9'"), 3);
	state_lock(m, "test");
	m->nodes = NULL;
	m->nnodes = 0;
	state_unlock(m);
	master_free(m);
}
END_TEST

/* The node manager's end of the job (no dataset finished: the script
 * never asked for shards) reaches the brain once, so it no longer holds
 * the job as running and the job's name is free again. */
START_TEST(test_job_end_reaches_the_brain)
{
	char uid[RV_BRAIN_UID_MAX];
	struct master *m = cluster_master(uid);
	plans_job_end(m, true, "every node exited 0");
	plans_job_end(m, false, "reported twice: ignored");
	const char *st = "";
	cJSON *j = NULL;
	for (int i = 0; i < 250; i++) {
		cJSON_Delete(j);
		j = brain_job(uid);
		st = cJSON_GetStringValue(cJSON_GetObjectItem(j, "status"));
		if (st && strcmp(st, "running"))
			break;
		usleep(20 * 1000);
	}
	ck_assert_msg(st && !strcmp(st, "finished"), "brain says %s", st ? st : "(none)");
	usleep(200 * 1000); /* the second report, had it been sent */
	cJSON_Delete(j);
	j = brain_job(uid);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "status")), "finished");
	cJSON_Delete(j);
	master_free(m);
}
END_TEST

START_TEST(test_oom_memory_without_a_brain)
{
	/* not started (or no brain at all): the in-process policy */
	struct master *m = master_new("single-job", "");
	struct rv_event oom = oom_event(1, 8100);
	int64_t mb = 0;
	ck_assert_int_eq(plans_oom_memory(m, &oom, &mb), 0);
	ck_assert_int_gt(mb, 8192);
	int64_t local = mb;
	/* single-job: the link's own oom plan, applied like any plan */
	struct rv_err err = { 0 };
	ck_assert_int_eq(plans_start(m, &err), 0);
	ck_assert_int_eq(plans_oom_memory(m, &oom, &mb), 1);
	ck_assert_int_eq(mb, local);
	master_free(m);
}
END_TEST

/* A DLRover ElasticJob sizes its workers in the pod template's containers:
 * the master's desired state is what they ask for. */
START_TEST(test_template_resources_desired)
{
	struct master *m = master_new_doc(
		"{\"apiVersion\":\"elastic.iml.github.io/v1alpha1\",\"kind\":\"ElasticJob\","
		"\"metadata\":{\"name\":\"torch-mnist\",\"namespace\":\"dlrover\"},"
		"\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\",\"optimizeMode\":"
		"\"single-job\",\"replicaSpecs\":{\"worker\":{\"replicas\":5,\"template\":{"
		"\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"main\","
		"\"image\":\"dlrover:pytorch-example\",\"command\":[\"/bin/bash\",\"-c\","
		"\"dlrover-run train.py\"],\"resources\":{\"limits\":{\"cpu\":\"2\","
		"\"memory\":\"3Gi\"},\"requests\":{\"cpu\":\"2\",\"memory\":\"3Gi\"}}}]}}}},"
		"\"datasets\":[{\"name\":\"train\",\"size\":100,\"shardSize\":10}]}}",
		"");
	const struct master_group *g = &m->desired.groups[RV_ROLE_WORKER];
	ck_assert_int_eq(g->count, 5);
	ck_assert(g->has_resources);
	ck_assert_double_eq_tol(g->cpu, 2.0, 1e-9);
	ck_assert_int_eq(g->memory_mb, 3072);
	master_free(m);
}
END_TEST

static int apply_doc(struct master *m, const char *doc)
{
	struct master_op op;
	memset(&op, 0, sizeof(op));
	struct master_result res;
	int64_t seq = 0;
	state_lock(m, "test");
	op.now_ms = state_now(m);
	int rc = state_apply(m, MASTER_OP_PLAN, &op, doc, strlen(doc), &res, &seq);
	state_unlock(m);
	if (rc == 0)
		rc = state_sync(m, seq);
	return rc < 0 ? rc : seq > 0;
}

START_TEST(test_plan_clamped_and_replayed)
{
	struct master *m = master_new("manual", "");
	ck_assert_int_eq(m->desired.groups[RV_ROLE_WORKER].count, 2);
	int64_t v0 = m->desired.version;
	const char *big = "{\"job\":\"j\",\"id\":7,\"stage\":\"running\",\"algorithm\":\"x\","
			  "\"reason\":\"grow\",\"groups\":{\"worker\":{\"count\":40,\"resource\":"
			  "{\"cpu\":2,\"memory_mb\":4096,\"gpu\":0}}}}";
	ck_assert_int_eq(apply_doc(m, big), 1);
	ck_assert_int_eq(m->desired.groups[RV_ROLE_WORKER].count, 16); /* maxReplicas */
	ck_assert_int_eq(m->desired.groups[RV_ROLE_WORKER].memory_mb, 4096);
	ck_assert_int_eq(m->desired.plan_id, 7);
	ck_assert_int_eq(m->desired.version, v0 + 1);
	ck_assert(m->plan.applied);
	ck_assert_str_eq(m->plan.reason, "grow");
	const char *old = "{\"job\":\"j\",\"id\":5,\"stage\":\"running\",\"algorithm\":\"x\","
			  "\"reason\":\"old\",\"groups\":{\"worker\":{\"count\":1,\"resource\":"
			  "{\"cpu\":1,\"memory_mb\":1024,\"gpu\":0}}}}";
	ck_assert_int_eq(apply_doc(m, old), 0); /* not newer: nothing journaled */
	ck_assert_int_eq(m->desired.groups[RV_ROLE_WORKER].count, 16);
	const char *bad = "{\"job\":\"j\",\"id\":9,\"stage\":\"running\",\"groups\":"
			  "{\"worker\":{\"count\":\"x\"}}}";
	ck_assert_int_eq(apply_doc(m, bad), -EINVAL);
	/* the uid too */
	struct master_op op;
	memset(&op, 0, sizeof(op));
	snprintf(op.node, sizeof(op.node), "uid-42");
	struct master_result res;
	int64_t seq = 0;
	state_lock(m, "test");
	op.now_ms = state_now(m);
	ck_assert_int_eq(state_apply(m, MASTER_OP_BRAIN_UID, &op, NULL, 0, &res, &seq), 0);
	state_unlock(m);
	ck_assert_int_gt(seq, 0);
	ck_assert_int_eq(state_sync(m, seq), 0);
	master_free(m);

	/* replay of the journal */
	m = master_new("manual", "");
	ck_assert_int_eq(m->desired.groups[RV_ROLE_WORKER].count, 16);
	ck_assert_int_eq(m->desired.plan_id, 7);
	ck_assert_int_eq(m->desired.version, v0 + 1);
	ck_assert_str_eq(m->brain_uid, "uid-42");
	ck_assert_str_eq(m->plan.reason, "grow");

	/* and through a snapshot */
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_puts(&b, "{\"x\":0");
	ck_assert_int_eq(plans_snapshot_save(m, &b), 0);
	rv_buf_puts(&b, "}");
	struct rv_err err = { 0 };
	cJSON *doc = rv_json_parse(b.data, b.len, &err);
	ck_assert_ptr_nonnull(doc);
	struct master *n = calloc(1, sizeof(*n));
	ck_assert_ptr_nonnull(n);
	ck_assert_int_eq(plans_snapshot_load(n, doc, &err), 0);
	ck_assert_int_eq(memcmp(&n->desired, &m->desired, sizeof(n->desired)), 0);
	ck_assert_str_eq(n->brain_uid, "uid-42");
	ck_assert_int_eq(n->plan.id, 7);
	ck_assert(n->plan.applied);
	cJSON_Delete(doc);
	rv_buf_release(&b);
	free(n);
	master_free(m);
}
END_TEST

RV_TEST_MAIN_PG_FIXTURE_TCASE("plans", setup, teardown, "plans", 60,
			      test_node_reports_reach_the_brain, test_job_end_reaches_the_brain,
			      test_oom_memory_without_a_brain, test_template_resources_desired,
			      test_plan_clamped_and_replayed, test_compute_time_reaches_the_brain,
			      test_agent_usage_ranked_by_name)
