/*
 * check_master_brain.c: the real rover-master's brain link against the real
 * rover-brain (on a private PostgreSQL), agents simulated with the typed
 * master client.  Cluster mode registers the job once, also across a
 * kill -9 and restart of the master; step reports reach the brain as speed
 * samples; a plan the brain makes changes the master's desired state and
 * the brain records it applied; with the brain stopped the master keeps
 * serving and the buffered reports arrive once it is back, none stored
 * twice; a node that leaves and the job's end reach the brain as events;
 * the shards done, doing and left reach the brain and roverctl status
 * (with the job's last word when it finishes).  Single-job mode plans in-process with no brain, manual mode only
 * proposes, and cluster mode without a brain url refuses to start.  Last, a
 * real PyTorch job of two nodes run by the master's local scheduler: with
 * planner passes slower than the gaps between its metrics batches, its
 * running-stage plans are stored and applied while it trains, and no pass
 * fails (needs /usr/bin/python3 with torch).
 */
#include <arpa/inet.h>
#include <check.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brain_client.h"
#include "brainfix.h"
#include "buf.h"
#include "masterfix.h"
#include "parse.h"
#include "proc.h"
#include "testutil.h"

static char conninfo[1024];
static struct rv_test_brain brain;
static struct rv_test_master master;
static struct rv_master_client *mc;
static int brain_port;

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	ck_assert(fd >= 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static void brain_start(void)
{
	char listen[64];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", brain_port);
	const char *args[] = { "--db",        conninfo,   "--plan-debounce-ms",
			       "0",           "--listen", listen,
			       "--log-level", "debug",    NULL };
	ck_assert_int_eq(rv_test_brain_start(&brain, args), 0);
}

static void setup(void)
{
	ck_assert_int_eq(rv_test_pg_fresh_db(0, conninfo, sizeof(conninfo)), 0);
	brain_port = free_port();
	brain_start();
	mc = NULL;
	memset(&master, 0, sizeof(master));
}

static void teardown(void)
{
	rv_master_client_free(mc);
	mc = NULL;
	if (master.dir[0])
		rv_test_master_cleanup(&master);
	rv_test_brain_stop(&brain, SIGTERM, 10);
}

/* A spec in mode with workers 1..16 (replicas given), 4 cores and 8 GiB each. */
static char *spec_json(const char *mode, int replicas)
{
	char *s = NULL;
	ck_assert_int_ge(
		asprintf(&s,
			 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
			 "\"metadata\":{\"name\":\"brain-job\"},"
			 "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
			 "\"optimizeMode\":\"%s\",\"replicaSpecs\":{\"worker\":{\"replicas\":%d,"
			 "\"minReplicas\":1,\"maxReplicas\":16,"
			 "\"resources\":{\"cpu\":4,\"memory\":\"8Gi\"}}},"
			 "\"datasets\":[{\"name\":\"train\",\"size\":1000,\"shardSize\":10,"
			 "\"epochs\":1}]}}",
			 mode, replicas),
		0);
	return s;
}

/* Start the master for spec in cluster mode against the brain, with short
 * batching and back-off so a test sees reports soon. */
static void master_start(const char *spec, bool with_brain)
{
	ck_assert_int_eq(rv_test_master_init(&master, spec), 0);
	static const char *args[16];
	int n = 0;
	if (with_brain) {
		args[n++] = "--brain";
		args[n++] = brain.url;
	}
	const char *more[] = { RV_TEST_MASTER_BRAIN_SOON, "--brain-progress-interval-ms", "100",
			       NULL };
	for (int i = 0; more[i]; i++)
		args[n++] = more[i];
	args[n] = NULL;
	ck_assert_int_eq(rv_test_master_start(&master, args), 0);
	mc = rv_test_master_client(&master);
	ck_assert_ptr_nonnull(mc);
}

static struct rv_job_status job(void)
{
	struct rv_job_status js;
	struct rv_err err = { 0 };
	int rc = rv_master_job(mc, &js, &err);
	ck_assert_msg(rc == 0, "job: %d %s", rc, err.msg);
	return js;
}

/* What wait_job waits for. */
enum until { UNTIL_UID, UNTIL_PLAN, UNTIL_APPLIED, UNTIL_PLAN_ID, UNTIL_DOWN, UNTIL_DRAINED };
static int64_t until_id;

static bool reached(enum until u, const struct rv_job_status *js)
{
	switch (u) {
	case UNTIL_UID:
		return js->brain.uid[0] != 0;
	case UNTIL_PLAN:
		return js->has_plan;
	case UNTIL_APPLIED:
		return js->has_plan && js->plan.applied;
	case UNTIL_PLAN_ID:
		return js->plan.id == until_id;
	case UNTIL_DOWN:
		return !js->brain.reachable && js->brain.queued > 0;
	case UNTIL_DRAINED:
		return js->brain.reachable && js->brain.queued == 0;
	}
	return false;
}

/* The master's job status once it shows u (up to 10 s; the last one else). */
static struct rv_job_status wait_job(enum until u)
{
	struct rv_job_status js = job();
	for (int i = 0; i < 500 && !reached(u, &js); i++) {
		usleep(20 * 1000);
		js = job();
	}
	ck_assert(js.has_brain && js.has_desired);
	return js;
}

/* The job's uid at the brain, once the master has journaled it. */
static void wait_uid(char uid[RV_BRAIN_UID_MAX])
{
	struct rv_job_status js = wait_job(UNTIL_UID);
	ck_assert_msg(js.brain.uid[0], "the master never registered the job");
	snprintf(uid, RV_BRAIN_UID_MAX, "%s", js.brain.uid);
}

/* The master's /metrics text (malloc'd). */
static char *master_metrics(void)
{
	struct rv_test_brain as = { .port = master.port };
	snprintf(as.url, sizeof(as.url), "%s", master.url);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&as, "GET", "/metrics", NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	char *body = r.body;
	r.body = NULL;
	rv_test_reply_release(&r);
	return body;
}

static struct rv_brain_client *brain_client(void)
{
	struct rv_brain_opts o = { .url = brain.url, .max_attempts = 1, .timeout_ms = 5000 };
	struct rv_err err = { 0 };
	struct rv_brain_client *c = rv_brain_client_new(&o, &err);
	ck_assert_msg(c != NULL, "brain client: %s", err.msg);
	return c;
}

static struct rv_brain_job brain_job(const char *uid)
{
	struct rv_brain_client *c = brain_client();
	struct rv_brain_job j;
	struct rv_err err = { 0 };
	int rc = rv_brain_job_get(c, uid, &j, &err);
	rv_brain_client_free(c);
	ck_assert_msg(rc == 0, "brain job: %d %s", rc, err.msg);
	return j;
}

/* Wait until the brain stored n speed samples of uid (and not more). */
static void wait_speed_samples(const char *uid, int64_t n)
{
	int64_t got = -1;
	for (int i = 0; i < 500 && got < n; i++) {
		got = brain_job(uid).speed_samples;
		if (got < n)
			usleep(20 * 1000);
	}
	ck_assert_int_eq(got, n);
	usleep(300 * 1000); /* nothing more comes: none stored twice */
	ck_assert_int_eq(brain_job(uid).speed_samples, n);
}

/* One node joins a world of one. */
static void rendezvous(const char *node)
{
	struct rv_rdzv_join j = { .local_world_size = 1 };
	snprintf(j.node, sizeof(j.node), "%s", node);
	struct rv_rdzv_world_reply w;
	struct rv_err err = { 0 };
	int rc = rv_master_rendezvous(mc, &j, 20000, &w, &err);
	ck_assert_msg(rc == 0, "rendezvous: %d %s", rc, err.msg);
	ck_assert_int_eq(w.status, RV_RDZV_COMPLETE);
	rv_rdzv_world_reply_release(&w);
}

static void steps(int64_t from, int64_t to)
{
	for (int64_t s = from; s <= to; s++) {
		struct rv_step_report r = { .node = "node-0",
					    .step = s,
					    .speed = 100.0 + (double)s };
		struct rv_err err = { 0 };
		ck_assert_msg(rv_master_step(mc, &r, &err) == 0, "step %" PRId64 ": %s", s,
			      err.msg);
	}
}

/* One unlabelled value of the master's /metrics, -1 when absent. */
static int64_t metric(const char *name)
{
	char *text = master_metrics();
	char key[128];
	snprintf(key, sizeof(key), "\n%s ", name);
	const char *at = strstr(text, key);
	int64_t v = at ? strtoll(at + strlen(key), NULL, 10) : -1;
	free(text);
	return v;
}

/* A master in cluster mode for replicas workers, once it registered the job
 * at the brain as uid. */
static void start_with_brain(int replicas, char uid[RV_BRAIN_UID_MAX])
{
	char *spec = spec_json("cluster", replicas);
	master_start(spec, true);
	free(spec);
	wait_uid(uid);
}

static int64_t brain_jobs_total(void)
{
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "GET", "/v1/jobs", NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	int64_t n = (int64_t)rv_test_json_num(r.json, "total", -1);
	rv_test_reply_release(&r);
	return n;
}

START_TEST(test_registers_once_across_kill9)
{
	char uid[RV_BRAIN_UID_MAX];
	start_with_brain(1, uid);
	rendezvous("node-0");
	steps(1, 5);
	wait_speed_samples(uid, 5);
	struct rv_job_status js = job();
	ck_assert_int_eq(js.brain.mode, RV_OPT_CLUSTER);
	ck_assert(js.brain.reachable);
	ck_assert_int_ge(js.brain.sent, 5);

	ck_assert_int_ge(rv_test_master_stop(&master, SIGKILL, 5000), 0);
	ck_assert_int_eq(rv_test_master_restart(&master), 0);
	char again[RV_BRAIN_UID_MAX];
	wait_uid(again);
	ck_assert_str_eq(again, uid);
	steps(6, 10);
	/* the reports after the restart go to the same job at the brain */
	wait_speed_samples(uid, 10);
	ck_assert_int_eq(brain_jobs_total(), 1);
	js = job();
	ck_assert_str_eq(js.brain.uid, uid);
	ck_assert_int_eq(js.brain.dropped, 0);
}
END_TEST

/* Speed samples straight to the brain at w workers, as check_brain_plans. */
static int64_t ts = 0;
static void post_speed(const char *uid, int w, double speed, int n)
{
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_puts(&b, "{\"samples\":[");
	for (int i = 0; i < n; i++) {
		ts += 10000;
		rv_buf_printf(&b,
			      "%s{\"kind\":\"speed\",\"ts\":%" PRId64 ",\"speed\":%.3f,"
			      "\"step\":%d,\"workers\":%d,\"ps\":0}",
			      i ? "," : "", ts, speed * (1.0 + 0.01 * ((i % 3) - 1)), i, w);
	}
	ck_assert_int_eq(rv_test_brain_post_batch(&brain, uid, &b), 200);
}

static double truth(int w)
{
	return 1.0 / (2.0 / w + 0.01 + 0.004 * w);
}

/* Whether the brain's history says plan id was applied. */
static bool brain_says_applied(const char *uid, int64_t id)
{
	struct rv_brain_client *c = brain_client();
	struct rv_brain_plan_record *recs = NULL;
	int n = 0;
	struct rv_err err = { 0 };
	int rc = rv_brain_plan_history(c, uid, 50, &recs, &n, &err);
	rv_brain_client_free(c);
	ck_assert_msg(rc == 0, "plans: %s", err.msg);
	bool applied = false;
	for (int i = 0; i < n; i++)
		if (recs[i].plan.id == id)
			applied = recs[i].applied;
	free(recs);
	return applied;
}

START_TEST(test_brain_plan_changes_desired)
{
	char uid[RV_BRAIN_UID_MAX];
	start_with_brain(2, uid);
	/* the create plan is applied: desired follows it */
	struct rv_job_status js = wait_job(UNTIL_APPLIED);
	ck_assert(js.has_plan && js.plan.applied);
	ck_assert_str_eq(js.plan.stage, "create");
	ck_assert(js.desired[RV_ROLE_WORKER].present);
	ck_assert_int_eq(js.desired[RV_ROLE_WORKER].count, 2);
	int64_t create_id = js.plan.id;

	ts = rv_now_ms();
	int w = 2;
	int64_t id = 0;
	int want = 0;
	for (int round = 0; round < 12 && !id; round++) {
		post_speed(uid, w, truth(w) * 100, 8);
		ck_assert_int_eq(rv_test_brain_wait_planned(&brain, uid, ts, 300), 0);
		cJSON *p = NULL;
		long st = rv_test_brain_running_plan(&brain, uid, create_id, &p);
		ck_assert(st == 200 || st == 204);
		if (!p)
			continue;
		id = (int64_t)rv_test_json_num(p, "id", 0);
		want = (int)rv_test_json_num(p, "groups.worker.count", 0);
		cJSON_Delete(p);
	}
	ck_assert_msg(id > 0, "the brain made no running plan");
	/* the master long-polls it, journals it, and says applied */
	until_id = id;
	js = wait_job(UNTIL_PLAN_ID);
	ck_assert_int_eq(js.plan.id, id);
	ck_assert(js.plan.applied && !js.plan.proposed);
	ck_assert_str_eq(js.plan.stage, "running");
	ck_assert_int_eq(js.desired[RV_ROLE_WORKER].count, want < 1 ? 1 : want > 16 ? 16 : want);
	ck_assert_int_ne(js.desired[RV_ROLE_WORKER].count, 2);
	bool applied = false;
	for (int i = 0; i < 250 && !applied; i++) {
		applied = brain_says_applied(uid, id);
		if (!applied)
			usleep(20 * 1000);
	}
	ck_assert_msg(applied, "the brain never heard plan %" PRId64 " applied", id);

	/* a restart: the brain hands the same plan again; it is not applied twice */
	int64_t version = metric("rover_master_desired_version");
	ck_assert_int_ge(rv_test_master_stop(&master, SIGKILL, 5000), 0);
	ck_assert_int_eq(rv_test_master_restart(&master), 0);
	for (int i = 0; i < 250 && metric("rover_master_plans_skipped_total") < 1; i++)
		usleep(20 * 1000);
	ck_assert_int_ge(metric("rover_master_plans_skipped_total"), 1);
	ck_assert_int_eq(metric("rover_master_desired_version"), version);
	js = job();
	ck_assert_int_eq(js.plan.id, id);
	ck_assert_int_eq(js.desired[RV_ROLE_WORKER].count, want < 1 ? 1 : want > 16 ? 16 : want);
}
END_TEST

START_TEST(test_brain_down_reports_buffered)
{
	char uid[RV_BRAIN_UID_MAX];
	start_with_brain(1, uid);
	rendezvous("node-0");
	steps(1, 5);
	wait_speed_samples(uid, 5);

	ck_assert_int_ge(rv_test_brain_stop(&brain, SIGKILL, 10), 0);
	/* the master keeps serving while the brain is away */
	steps(6, 20);
	struct rv_job_status js = wait_job(UNTIL_DOWN);
	ck_assert(!js.brain.reachable);
	ck_assert_int_gt(js.brain.queued, 0);
	ck_assert_msg(js.brain.last_error[0], "no error shown");
	ck_assert_int_eq(js.step, 20);

	brain_start();
	wait_speed_samples(uid, 20);
	js = wait_job(UNTIL_DRAINED);
	ck_assert(js.brain.reachable);
	ck_assert_int_eq(js.brain.queued, 0);
	ck_assert_int_eq(js.brain.dropped, 0);
	/* the 20 speed samples and the datasets' progress, reported once at
	 * start (no shard moved since) */
	ck_assert_int_eq(metric("rover_master_brain_samples_sent_total"), 21);
}
END_TEST

START_TEST(test_node_failure_and_job_end_reach_the_brain)
{
	char uid[RV_BRAIN_UID_MAX];
	start_with_brain(1, uid);
	rendezvous("node-0");
	/* the node leaves: a node_failed event */
	struct rv_failure_report f = { .node = "node-0", .reason = "exited", .exit_code = 1 };
	struct rv_err err = { 0 };
	ck_assert_int_eq(rv_master_failure(mc, &f, &err), 0);
	char status[16] = "";
	for (int i = 0; i < 250 && strcmp(status, "failed"); i++) {
		char path[128];
		snprintf(path, sizeof(path), "/v1/jobs/%s", uid);
		struct rv_test_reply r;
		ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
		const cJSON *it;
		cJSON_ArrayForEach(it, cJSON_GetObjectItem(r.json, "nodes"))
		{
			const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(it, "name"));
			const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(it, "status"));
			if (n && st && !strcmp(n, "node-0"))
				snprintf(status, sizeof(status), "%s", st);
		}
		rv_test_reply_release(&r);
		usleep(20 * 1000);
	}
	ck_assert_str_eq(status, "failed");
	/* every shard done: job_finished */
	atomic_int *counts = calloc(1000, sizeof(*counts));
	struct rv_test_shard_worker w = {
		.url = master.url, .node = "node-0", .worker = 0, .counts = counts, .size = 1000
	};
	rv_test_shard_worker_main(&w);
	ck_assert_int_eq(w.rc, 0);
	free(counts);
	for (int i = 0; i < 250; i++) {
		struct rv_brain_job j = brain_job(uid);
		snprintf(status, sizeof(status), "%s", j.status);
		if (!strcmp(status, "finished"))
			break;
		usleep(20 * 1000);
	}
	ck_assert_str_eq(status, "finished");
}
END_TEST

/* A node's own usage report (rover-run's POST /v1/usage) becomes a node
 * sample at the brain, and the master keeps the last one (GPU memory
 * included, which the brain's sample has no field for). */
START_TEST(test_agent_usage_reaches_the_brain)
{
	char uid[RV_BRAIN_UID_MAX];
	start_with_brain(1, uid);
	rendezvous("node-0");
	struct rv_node_usage u = { .node = "node-0",
				   .rank = 0,
				   .cpu = 1.5,
				   .memory_mb = 700,
				   .gpus = 1,
				   .gpu_memory_mb = 2048,
				   .gpu_memory_total_mb = 81559 };
	struct rv_err err = { 0 };
	ck_assert_msg(rv_master_usage(mc, &u, &err) == 0, "%s", err.msg);
	int64_t got = 0;
	for (int i = 0; i < 250 && got < 1; i++) {
		got = brain_job(uid).node_samples;
		if (got < 1)
			usleep(20 * 1000);
	}
	ck_assert_int_eq(got, 1);
	struct rv_node_usage list[2];
	int n = 0;
	ck_assert_int_eq(rv_master_usage_list(mc, list, 2, &n, &err), 0);
	ck_assert_int_eq(n, 1);
	ck_assert_str_eq(list[0].node, "node-0");
	ck_assert_int_eq(list[0].gpu_memory_mb, 2048);
	ck_assert(list[0].cpu > 1.49 && list[0].cpu < 1.51);
}
END_TEST

/* No brain at all: a master in mode for 3 workers, its status once it shows u. */
static struct rv_job_status start_without_brain(const char *mode, enum until u)
{
	rv_test_brain_stop(&brain, SIGTERM, 10);
	char *spec = spec_json(mode, 3);
	master_start(spec, false);
	free(spec);
	return wait_job(u);
}

START_TEST(test_single_job_plans_in_process)
{
	struct rv_job_status js = start_without_brain("single-job", UNTIL_APPLIED);
	ck_assert(js.has_plan && js.plan.applied && !js.plan.proposed);
	ck_assert_int_ge(js.plan.id, 1);
	ck_assert_str_eq(js.plan.stage, "create");
	ck_assert_msg(strlen(js.plan.reason) > 5, "plan without a reason");
	ck_assert_int_eq(js.brain.mode, RV_OPT_SINGLE_JOB);
	ck_assert_str_eq(js.brain.uid, "");
	ck_assert_int_eq(js.desired[RV_ROLE_WORKER].count, js.plan.groups[RV_ROLE_WORKER].count);
	ck_assert_int_eq(js.desired[RV_ROLE_WORKER].memory_mb, 8192);
	/* a restart keeps the applied plan and does not apply the create plan again */
	int64_t id = js.plan.id;
	ck_assert_int_ge(rv_test_master_stop(&master, SIGKILL, 5000), 0);
	ck_assert_int_eq(rv_test_master_restart(&master), 0);
	usleep(500 * 1000);
	js = job();
	ck_assert_int_eq(js.plan.id, id);
	ck_assert(js.plan.applied);
}
END_TEST

START_TEST(test_manual_only_proposes)
{
	struct rv_job_status js = start_without_brain("manual", UNTIL_PLAN);
	ck_assert(js.has_plan);
	ck_assert(js.plan.proposed && !js.plan.applied);
	ck_assert(js.plan.groups[RV_ROLE_WORKER].present);
	ck_assert_int_eq(js.brain.mode, RV_OPT_MANUAL);
	/* nothing changed: the desired state is the spec's */
	ck_assert_int_eq(js.desired[RV_ROLE_WORKER].count, 3);
	char *metrics = master_metrics();
	ck_assert_msg(strstr(metrics, "rover_master_plans_applied_total 0") &&
			      strstr(metrics, "rover_master_desired_version 1\n"),
		      "metrics: %s", metrics);
	free(metrics);
}
END_TEST

START_TEST(test_cluster_without_url_exits_2)
{
	char *spec = spec_json("cluster", 1);
	ck_assert_int_eq(rv_test_master_init(&master, spec), 0);
	free(spec);
	ck_assert_int_lt(rv_test_master_start(&master, NULL), 0);
	ck_assert(master.exit_status >= 0 && WIFEXITED(master.exit_status));
	ck_assert_int_eq(WEXITSTATUS(master.exit_status), 2);
	char *log = rv_test_read_file(master.log);
	ck_assert_ptr_nonnull(log);
	ck_assert_msg(strstr(log, "spec.brainService") && strstr(log, "--brain"),
		      "the error does not say what to set: %s", log);
	free(log);
}
END_TEST

/* node-0's worker 0 reports shard id done; with counted, the master must
 * count it (not a repeat). */
static void shard_done(int64_t id, bool counted)
{
	struct rv_shard_done d = { .node = "node-0", .worker = 0, .id = id };
	bool was = false;
	struct rv_err err = { 0 };
	ck_assert_msg(rv_master_shard_done(mc, &d, &was, &err) == 0, "done: %s", err.msg);
	ck_assert(was || !counted);
}

/* GET /v1/jobs/{uid} once the shards counted at done_key and doing_key
 * (dotted paths) are done and doing (10 s at most): the job (the caller's,
 * cJSON_Delete); never showing them fails the test. */
static cJSON *brain_job_until(const char *uid, const char *done_key, int done,
			      const char *doing_key, int doing)
{
	char path[160];
	snprintf(path, sizeof(path), "/v1/jobs/%s", uid);
	cJSON *j = NULL;
	for (int i = 0; i < 500; i++) {
		struct rv_test_reply r;
		ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
		ck_assert_int_eq(r.status, 200);
		cJSON_Delete(j);
		j = r.json;
		r.json = NULL;
		rv_test_reply_release(&r);
		if (rv_test_json_num(j, done_key, -1) == done &&
		    rv_test_json_num(j, doing_key, -1) == doing)
			return j;
		usleep(20 * 1000);
	}
	ck_abort_msg("the brain never showed %d shards done and %d doing: %s", done, doing,
		     cJSON_PrintUnformatted(j));
	return NULL;
}

/* The job once its shards say done and doing. */
static cJSON *brain_job_shards(const char *uid, int done, int doing)
{
	return brain_job_until(uid, "shards.done", done, "shards.doing", doing);
}

/* roverctl ARGS against the test brain: its exit code; *out its stdout. */
static int roverctl(const char *const *args, char **out)
{
	char exe[512];
	snprintf(exe, sizeof(exe), "%s/roverctl",
		 getenv("ROVER_BIN_DIR") ? getenv("ROVER_BIN_DIR") : "build/bin");
	const char *argv[16] = { exe, "--brain", brain.url };
	int n = 3;
	for (int i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	struct rv_proc_opts o = { .argv = argv };
	struct rv_buf b;
	rv_buf_init(&b);
	int st = -1;
	ck_assert_int_eq(rv_proc_run(&o, 20000, &st, &b), 0);
	*out = rv_buf_steal(&b);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Take n shards of the job's dataset as worker 0; done the first ndone. */
static void take_shards(int n, int ndone, int64_t *ids)
{
	for (int i = 0; i < n; i++) {
		struct rv_shard_next req = { .node = "node-0", .worker = 0 };
		struct rv_shard_task t;
		struct rv_err err = { 0 };
		ck_assert_msg(rv_master_shard_next(mc, &req, &t, &err) == 0, "next: %s", err.msg);
		ck_assert_int_eq(t.status, RV_SHARD_TASK);
		ids[i] = t.id;
	}
	for (int i = 0; i < ndone; i++) {
		shard_done(ids[i], true);
	}
}

START_TEST(test_progress_reaches_the_brain)
{
	char uid[RV_BRAIN_UID_MAX];
	start_with_brain(1, uid);
	rendezvous("node-0");
	/* 100 shards of 10 samples: 25 done, 5 in a worker's hands */
	int64_t ids[100];
	take_shards(30, 25, ids);
	cJSON *j = brain_job_shards(uid, 25, 5);
	ck_assert_int_eq((int)rv_test_json_num(j, "shards.total", -1), 100);
	ck_assert_int_eq((int)rv_test_json_num(j, "shards.left", -1), 70);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "progress")), 1);
	ck_assert_str_eq(rv_test_json_str(j, "progress.0.dataset"), "train");
	ck_assert_int_eq((int)rv_test_json_num(j, "progress.0.samples_done", -1), 250);
	ck_assert_int_eq((int)rv_test_json_num(j, "progress.0.samples_total", -1), 1000);
	ck_assert(cJSON_IsFalse(
		cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "progress"), 0),
				    "finished")));
	cJSON_Delete(j);

	/* roverctl status: the bar and the counts (no tty: no colour), and
	 * the same numbers in --json */
	char *out = NULL;
	const char *st[] = { "status", uid, NULL };
	ck_assert_int_eq(roverctl(st, &out), 0);
	ck_assert_msg(strstr(out, "shards     [########......................]  25%  25 done, "
				  "5 doing, 70 left of 100"),
		      "roverctl status:\n%s", out);
	free(out);
	const char *js[] = { "--json", "status", uid, NULL };
	ck_assert_int_eq(roverctl(js, &out), 0);
	cJSON *doc = cJSON_Parse(out);
	free(out);
	ck_assert_int_eq((int)rv_test_json_num(doc, "job.shards.done", -1), 25);
	ck_assert_int_eq((int)rv_test_json_num(doc, "job.progress.0.shards_left", -1), 70);
	cJSON_Delete(doc);

	/* every shard done: the job finishes and its progress says so */
	take_shards(70, 70, ids + 30);
	for (int i = 25; i < 30; i++) {
		shard_done(ids[i], false);
	}
	j = brain_job_shards(uid, 100, 0);
	ck_assert_int_eq((int)rv_test_json_num(j, "shards.left", -1), 0);
	ck_assert(cJSON_IsTrue(
		cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "progress"), 0),
				    "finished")));
	ck_assert_int_eq((int)rv_test_json_num(j, "progress.0.samples_done", -1), 1000);
	cJSON_Delete(j);
}
END_TEST

/* A stream's progress reaches the brain with what is known of it: no
 * shards total (0: a stream has no end), its tasks done and in hand as
 * shards done and doing, kept out of the job's shard sums; the brain
 * serves it in the job's progress history too. */
START_TEST(test_stream_progress_reaches_the_brain)
{
	static const char spec[] =
		"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		"\"metadata\":{\"name\":\"brain-stream\"},"
		"\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
		"\"optimizeMode\":\"cluster\",\"replicaSpecs\":{\"worker\":{\"replicas\":1,"
		"\"minReplicas\":1,\"maxReplicas\":4,"
		"\"resources\":{\"cpu\":4,\"memory\":\"8Gi\"}}},"
		"\"datasets\":[{\"name\":\"clicks\",\"streaming\":true,\"shardSize\":10,"
		"\"partitions\":[{\"name\":\"p0\",\"end_offset\":100}]}]}}";
	master_start(spec, true);
	char uid[RV_BRAIN_UID_MAX];
	wait_uid(uid);
	rendezvous("node-0");
	/* 5 tasks of 10 offsets taken, 3 of them done: [0, 20) and [30, 40),
	 * so 20 records are committed and the consumer lag is 80 */
	int64_t ids[5];
	for (int i = 0; i < 5; i++) {
		struct rv_shard_next req = { .node = "node-0", .worker = 0, .dataset = "clicks" };
		struct rv_shard_task t;
		struct rv_err err = { 0 };
		ck_assert_msg(rv_master_shard_next(mc, &req, &t, &err) == 0, "next: %s", err.msg);
		ck_assert_int_eq(t.status, RV_SHARD_TASK);
		ids[i] = t.id;
	}
	for (int i = 0; i < 4; i++) {
		if (i == 2)
			continue;
		shard_done(ids[i], true);
	}
	cJSON *j = brain_job_until(uid, "progress.0.shards_done", 3, "progress.0.shards_doing", 2);
	ck_assert_str_eq(rv_test_json_str(j, "progress.0.dataset"), "clicks");
	ck_assert_int_eq((int)rv_test_json_num(j, "progress.0.shards_total", -1), 0);
	/* a stream has no total: nothing is "left" to count */
	ck_assert(cJSON_IsNull(
		cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "progress"), 0),
				    "shards_left")));
	ck_assert_int_eq((int)rv_test_json_num(j, "progress.0.samples_done", -1), 20);
	ck_assert_int_eq((int)rv_test_json_num(j, "progress.0.samples_total", -1), 100);
	ck_assert(cJSON_IsNull(cJSON_GetObjectItem(j, "shards"))); /* no total to sum */
	cJSON_Delete(j);
	/* roverctl status says the lag */
	char *out = NULL;
	const char *stc[] = { "status", uid, NULL };
	ck_assert_int_eq(roverctl(stc, &out), 0);
	ck_assert_msg(strstr(out, "clicks   stream, 20 records committed, lag 80\n"),
		      "roverctl status:\n%s", out);
	free(out);

	char path[160];
	snprintf(path, sizeof(path), "/v1/jobs/%s/progress", uid);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	cJSON *arr = cJSON_GetObjectItem(r.json, "progress");
	int n = cJSON_GetArraySize(arr);
	ck_assert_int_ge(n, 1);
	cJSON *last = cJSON_GetArrayItem(arr, n - 1);
	ck_assert_int_eq((int)cJSON_GetObjectItem(last, "shards_done")->valuedouble, 3);
	ck_assert_int_eq((int)cJSON_GetObjectItem(last, "shards_doing")->valuedouble, 2);
	rv_test_reply_release(&r);
}
END_TEST

/* ---- a real PyTorch job trained by the local scheduler ---- */

/* The brain's /metrics series, which must be there. */
static long long brain_metric(const char *series)
{
	long long v = rv_test_brain_metric(&brain, series);
	ck_assert_msg(v >= 0, "%s: %lld", series, v);
	return v;
}

/* Hold scale_plans (ACCESS EXCLUSIVE) on a connection of the test's: a
 * planner pass that starts takes its snapshot, then waits at its first read
 * of the plans, as a pass on a loaded machine takes long.  Wait until one
 * does (up to 15 s), then until two more metrics batches were stored
 * meanwhile (up to 6 s; false when no pass or no batches came), and let
 * go. */
static bool slow_pass_over_batches(void)
{
	PGconn *pg = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(pg) == CONNECTION_OK, "%s", PQerrorMessage(pg));
	PGresult *r = PQexec(pg, "BEGIN; LOCK TABLE scale_plans IN ACCESS EXCLUSIVE MODE");
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(pg));
	PQclear(r);
	int64_t until = rv_mono_ms() + 15000;
	bool held = false;
	while (!held && rv_mono_ms() < until) {
		/* a session in a planner pass (holding a job's planner
		 * lock, class 7411) waits for the plans; a plan request
		 * waiting too is no pass */
		r = PQexec(pg, "SELECT count(*) FROM pg_locks w JOIN pg_locks a ON a.pid = w.pid"
			       " WHERE NOT w.granted AND w.relation = 'scale_plans'::regclass"
			       " AND a.locktype = 'advisory' AND a.classid = 7411 AND a.granted");
		ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQerrorMessage(pg));
		held = atoi(PQgetvalue(r, 0, 0)) > 0;
		PQclear(r);
		if (!held)
			usleep(20 * 1000);
	}
	/* within the brain's statement timeout (db.statement_timeout_ms, 10 s) */
	until = rv_mono_ms() + 6000;
	long long from = brain_metric("rover_brain_batches_ingested_total");
	while (held && brain_metric("rover_brain_batches_ingested_total") < from + 2 &&
	       rv_mono_ms() < until)
		usleep(50 * 1000);
	bool batches = brain_metric("rover_brain_batches_ingested_total") >= from + 2;
	r = PQexec(pg, "COMMIT");
	PQclear(r);
	PQfinish(pg);
	return held && batches;
}

/* The last n lines of the log at path that hold what, on stderr. */
static void print_last(const char *path, const char *what, int n)
{
	char *log = rv_test_read_file(path);
	const char *at[16];
	int got = 0;
	for (const char *p = log ? strstr(log, what) : NULL; p; p = strstr(p + 1, what))
		at[got++ % 16] = p;
	for (int i = got > n ? got - n : 0; i < got; i++) {
		const char *p = at[i % 16];
		while (p > log && p[-1] != '\n')
			p--;
		fprintf(stderr, "diag: %s: %.*s\n", path, (int)strcspn(p, "\n"), p);
	}
	free(log);
}

/* The newest running plan the brain stored for uid and heard applied, 0
 * when none. */
static int64_t running_plan_applied(const char *uid)
{
	cJSON *p = NULL;
	long st = rv_test_brain_running_plan(&brain, uid, 0, &p);
	ck_assert_msg(st == 200 || st == 204, "plan: %ld", st);
	int64_t id = p ? (int64_t)rv_test_json_num(p, "id", 0) : 0;
	cJSON_Delete(p);
	return id && brain_says_applied(uid, id) ? id : 0;
}

/* Two nodes of the master's local scheduler, each rover-run with real
 * PyTorch (examples/digits_rover.py: every step reported, 4 CPU asked on this
 * machine), their metrics streaming to the brain about once a second.  Each
 * step sleeps 50 ms: a compute-bound job's speed on a loaded 2-core machine
 * kept rising for over 80 s, and the policy rightly holds a rising job. 
 * Planner passes are made slow (each held while batches are stored): the
 * brain must still store running-stage plans, the master applies them while
 * the job trains, and no pass fails. */
START_TEST(test_training_job_is_planned_while_metrics_stream)
{
	char bin[PATH_MAX], script[PATH_MAX], run[PATH_MAX + 16];
	const char *dir = getenv("ROVER_BIN_DIR") ? getenv("ROVER_BIN_DIR") : "build/bin";
	ck_assert_ptr_nonnull(realpath(dir, bin));
	ck_assert_ptr_nonnull(realpath("examples/digits_rover.py", script));
	snprintf(run, sizeof(run), "%s/rover-run", bin);
	char *spec = NULL;
	ck_assert_int_ge(
		asprintf(&spec,
			 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
			 "\"metadata\":{\"name\":\"busy\"},"
			 "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
			 "\"optimizeMode\":\"cluster\","
			 "\"replicaSpecs\":{\"worker\":{\"replicas\":2,\"minReplicas\":1,"
			 "\"maxReplicas\":2,\"restartCount\":2,"
			 "\"resources\":{\"cpu\":4,\"memory\":\"2Gi\"},\"command\":[\"%s\","
			 "\"--nproc-per-node\",\"1\",\"--max-restarts\",\"2\",\"%s\","
			 "\"--log-every\",\"50\",\"--step-sleep\",\"0.05\"]}},"
			 "\"datasets\":[{\"name\":\"digits\",\"size\":1437,\"shardSize\":64,"
			 "\"epochs\":1000}]}}",
			 run, script),
		0);
	ck_assert_int_eq(rv_test_master_init(&master, spec), 0);
	free(spec);
	setenv("PYTHON_EXEC", "/usr/bin/python3", 1); /* the nodes inherit it */
	/* resources as asked, not enforced (--node-limits none): a memory
	 * right-sized before torch is loaded would OOM-kill the nodes and keep
	 * the job from training for the test's length */
	static const char *args[] = { "--brain",
				      NULL,
				      "--scheduler",
				      "local",
				      "--node-limits",
				      "none",
				      "--rdzv-last-call-ms",
				      "0",
				      "--node-stop-grace-ms",
				      "2000",
				      "--node-usage-interval-ms",
				      "1000",
				      "--brain-poll-wait-s",
				      "1",
				      NULL };
	args[1] = brain.url;
	ck_assert_int_eq(rv_test_master_start(&master, args), 0);
	mc = rv_test_master_client(&master);
	ck_assert_ptr_nonnull(mc);
	char uid[RV_BRAIN_UID_MAX];
	wait_uid(uid);
	struct rv_job_status js = wait_job(UNTIL_APPLIED);
	ck_assert_msg(js.has_plan && js.plan.applied, "the create plan was never applied");

	/* slow passes until a running plan is stored and applied and the job
	 * trains (its steps reach the brain as speed samples) */
	int slow = 0;
	int64_t id = 0, speed = 0;
	int64_t t0 = rv_mono_ms(), t_speed = -1, t_slow = -1, t_id = -1;
	int64_t until = t0 + 80000;
	while ((slow < 2 || !id || !speed) && rv_mono_ms() < until) {
		slow += slow_pass_over_batches();
		if (slow >= 2 && t_slow < 0)
			t_slow = rv_mono_ms() - t0;
		for (int i = 0; i < 30 && !(id = running_plan_applied(uid)); i++)
			usleep(50 * 1000);
		if (id && t_id < 0)
			t_id = rv_mono_ms() - t0;
		speed = brain_job(uid).speed_samples;
		if (speed && t_speed < 0)
			t_speed = rv_mono_ms() - t0;
	}
	/* where the time went, for a run that fails */
	fprintf(stderr,
		"diag: timeline: first speed sample %lld ms, 2 slow passes %lld ms, "
		"running plan applied %lld ms (-1: never)\n",
		(long long)t_speed, (long long)t_slow, (long long)t_id);
	char *log = rv_test_read_file(brain.log);
	const char *failed = log ? strstr(log, "could not plan job") : NULL;
	ck_assert_msg(!failed, "a planner pass failed: %.*s",
		      failed ? (int)strcspn(failed, "\n") : 0, failed);
	free(log);
	ck_assert_msg(slow >= 2, "%d passes held while batches were stored", slow);
	if (!id) {
		print_last(brain.log, "no new plan", 3);
		char path[128];
		snprintf(path, sizeof(path), "/v1/jobs/%s/plans", uid);
		struct rv_test_reply h;
		if (rv_test_http(&brain, "GET", path, NULL, NULL, &h) == 0)
			fprintf(stderr, "diag: plans: %s\n", h.body);
		rv_test_reply_release(&h);
	}
	ck_assert_msg(id > 0, "no running plan stored and applied (see %s)", master.log);
	ck_assert_int_eq(brain_metric(
				 "rover_brain_plan_passes_failed_total{reason=\"serialization\"}"),
			 0);
	ck_assert_int_eq(brain_metric("rover_brain_plan_passes_failed_total{reason=\"other\"}"), 0);
	/* and the job trained meanwhile, and still does */
	ck_assert_msg(speed > 0, "the job never reported a step");
	js = job();
	ck_assert_str_eq(js.job_state, "running");
}
END_TEST

static Suite *master_brain_suite(void)
{
	TCase *tc = RV_TEST_TCASE("brain", 120, test_registers_once_across_kill9,
				  test_brain_plan_changes_desired, test_brain_down_reports_buffered,
				  test_node_failure_and_job_end_reach_the_brain,
				  test_agent_usage_reaches_the_brain,
				  test_single_job_plans_in_process, test_manual_only_proposes,
				  test_cluster_without_url_exits_2, test_progress_reaches_the_brain,
				  test_stream_progress_reaches_the_brain);
	tcase_add_checked_fixture(tc, setup, teardown);
	TCase *train =
		RV_TEST_TCASE("training", 150, test_training_job_is_planned_while_metrics_stream);
	tcase_add_checked_fixture(train, setup, teardown);
	return RV_TEST_SUITE("master_brain", tc, train);
}

RV_TEST_MAIN_PG(master_brain_suite)
