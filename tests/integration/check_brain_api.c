/*
 * check_brain_api.c: the real rover-brain binary on loopback against a
 * private PostgreSQL: the REST API, bad input, auth, outages, long-polls.
 * Each test gets a fresh database and its own brain process.
 */
#include <check.h>
#include <libpq-fe.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brainfix.h"
#include "buf.h"
#include "parse.h"
#include "wire.h"
#include "testutil.h"

static char conninfo[1024];
static struct rv_test_brain brain;

static void start_brain(const char *const *extra)
{
	const char *const args[] = { "--plan-debounce-ms", "100", NULL };
	ck_assert_int_eq(rv_test_brain_start_fresh(&brain, 0, conninfo, sizeof(conninfo), args,
						   extra),
			 0);
}

static void teardown(void)
{
	rv_test_brain_stop(&brain, SIGTERM, 10);
}

static long count_rows(const char *sql)
{
	char v[64];
	return atol(rv_test_sql_value(conninfo, sql, v, sizeof(v)));
}

static char *job_doc(const char *name, const char *extra_spec)
{
	char *s = malloc(4096);
	snprintf(s, 4096,
		 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		 "\"metadata\":{\"name\":\"%s\",\"namespace\":\"team-a\",\"labels\":{\"user\":\"bo\"}},"
		 "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\",%s"
		 "\"replicaSpecs\":{\"worker\":{\"replicas\":2,\"minReplicas\":1,\"maxReplicas\":8}},"
		 "\"model\":{\"parameters\":50000000,\"batchSize\":32}}}",
		 name, extra_spec ? extra_spec : "");
	return s;
}

/* Register a job; returns its uid (static buffer). */
static const char *register_job(const char *name)
{
	static char uid[64];
	char *doc = job_doc(name, NULL);
	rv_test_brain_register(&brain, doc, uid, sizeof(uid));
	free(doc);
	return uid;
}

static void expect_error(const char *method, const char *path, const char *body, long status,
			 const char *field)
{
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, method, path, body, NULL, &r), 0);
	ck_assert_msg(r.status == status, "%s %s: status %ld, want %ld; body %s", method, path,
		      r.status, status, r.body);
	ck_assert_msg(r.json && rv_test_json_str(r.json, "error") && rv_test_json_str(r.json, "detail"),
		      "error body not JSON {error,detail}: %s", r.body);
	if (field)
		ck_assert_msg(rv_test_json_str(r.json, "field") &&
				      !strcmp(rv_test_json_str(r.json, "field"), field),
			      "field: got %s want %s (body %s)", rv_test_json_str(r.json, "field"), field,
			      r.body);
	rv_test_reply_release(&r);
}

START_TEST(register_get_list)
{
	start_brain(NULL);
	char *doc = rv_test_read_file("examples/job.json");
	ck_assert_ptr_nonnull(doc);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/jobs", doc, NULL, &r), 0);
	free(doc);
	ck_assert_msg(r.status == 201, "body %s", r.body);
	const char *uid = rv_test_json_str(r.json, "uid");
	ck_assert_ptr_nonnull(uid);
	ck_assert_str_eq(rv_test_json_str(r.json, "plan.stage"), "create");
	ck_assert_str_eq(rv_test_json_str(r.json, "plan.job"), uid);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "plan.groups.worker.count", -1), 2);
	ck_assert(rv_test_json_num(r.json, "plan.groups.worker.resource.memory_mb", 0) >= 2048);
	ck_assert(rv_test_json_num(r.json, "plan.groups.worker.resource.cpu", 0) > 0);
	ck_assert_ptr_nonnull(rv_test_json_str(r.json, "plan.reason"));
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s", uid);
	struct rv_test_reply g;
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &g), 0);
	ck_assert_int_eq(g.status, 200);
	ck_assert_str_eq(rv_test_json_str(g.json, "name"), "mnist-ddp");
	ck_assert_str_eq(rv_test_json_str(g.json, "user"), "ana");
	ck_assert_str_eq(rv_test_json_str(g.json, "status"), "running");
	ck_assert_str_eq(rv_test_json_str(g.json, "spec.metadata.name"), "mnist-ddp");
	rv_test_reply_release(&g);
	ck_assert_int_eq(rv_test_http(&brain, "GET", "/v1/jobs?namespace=default", NULL, NULL, &g), 0);
	ck_assert_int_eq(g.status, 200);
	ck_assert_int_eq((int)rv_test_json_num(g.json, "total", -1), 1);
	ck_assert_str_eq(rv_test_json_str(g.json, "jobs.0.uid"), uid);
	rv_test_reply_release(&g);
	ck_assert_int_eq(rv_test_http(&brain, "GET", "/v1/jobs?namespace=other", NULL, NULL, &g), 0);
	ck_assert_int_eq((int)rv_test_json_num(g.json, "total", -1), 0);
	rv_test_reply_release(&g);
	rv_test_reply_release(&r);
}
END_TEST

START_TEST(duplicate_name_conflicts_until_finished)
{
	start_brain(NULL);
	const char *uid = register_job("dup");
	char uid1[64];
	snprintf(uid1, sizeof(uid1), "%s", uid);
	char *doc = job_doc("dup", NULL);
	expect_error("POST", "/v1/jobs", doc, 409, "metadata.name");
	ck_assert_int_eq(count_rows("SELECT count(*) FROM jobs"), 1);
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/events", uid1);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", path, "{\"type\":\"job_finished\",\"ts\":1000}",
				      NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	rv_test_reply_release(&r);
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/jobs", doc, NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	ck_assert_str_ne(rv_test_json_str(r.json, "uid"), uid1);
	rv_test_reply_release(&r);
	free(doc);
	/* a finished job takes no more metrics */
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid1);
	expect_error("POST", path, "{\"samples\":[{\"kind\":\"speed\",\"ts\":5,\"speed\":1,\"step\":1,"
		     "\"workers\":1,\"ps\":0}]}", 409, "uid");
}
END_TEST

START_TEST(bad_job_documents)
{
	start_brain(NULL);
	expect_error("POST", "/v1/jobs", "{\"kind\":\"ElasticJob\",", 400, NULL);
	expect_error("POST", "/v1/jobs", "", 400, NULL);
	expect_error("POST", "/v1/jobs", "[1,2,3]", 400, NULL);
	char *d = job_doc("Bad_Name", NULL);
	expect_error("POST", "/v1/jobs", d, 400, "metadata.name");
	free(d);
	const char *neg = "{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"neg\"},\"spec\":{"
			  "\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{"
			  "\"replicas\":1,\"resources\":{\"cpu\":-2,\"memory\":\"1Gi\"}}}}}";
	expect_error("POST", "/v1/jobs", neg, 400, "spec.replicaSpecs.worker.resources.cpu");
	const char *huge = "{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"huge\"},\"spec\":{"
			   "\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{"
			   "\"replicas\":1,\"resources\":{\"cpu\":2,\"memory\":\"900Pi\"}}}}}";
	expect_error("POST", "/v1/jobs", huge, 400, "spec.replicaSpecs.worker.resources.memory");
	const char *type = "{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"typ\"},\"spec\":{"
			   "\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{"
			   "\"replicas\":\"two\"}}}}";
	expect_error("POST", "/v1/jobs", type, 400, "spec.replicaSpecs.worker.replicas");
	const char *nops = "{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"nops\"},\"spec\":{"
			   "\"distributionStrategy\":\"ParameterServerStrategy\",\"replicaSpecs\":{"
			   "\"worker\":{\"replicas\":1}}}}";
	expect_error("POST", "/v1/jobs", nops, 400, NULL);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM jobs"), 0);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM scale_plans"), 0);
}
END_TEST

START_TEST(unknown_job_is_404)
{
	start_brain(NULL);
	expect_error("GET", "/v1/jobs/j-doesnotexist", NULL, 404, NULL);
	expect_error("GET", "/v1/jobs/j-doesnotexist/plan", NULL, 404, NULL);
	expect_error("GET", "/v1/jobs/j-doesnotexist/plans", NULL, 404, NULL);
	expect_error("POST", "/v1/jobs/j-doesnotexist/metrics",
		     "{\"samples\":[{\"kind\":\"speed\",\"ts\":5,\"speed\":1,\"step\":1,\"workers\":1,"
		     "\"ps\":0}]}", 404, NULL);
	expect_error("POST", "/v1/jobs/j-doesnotexist/events", "{\"type\":\"job_finished\",\"ts\":9}",
		     404, NULL);
	expect_error("GET", "/v1/nothing", NULL, 404, NULL);
}
END_TEST

START_TEST(body_over_limit_is_413)
{
	const char *extra[] = { "--server-max-body-kb", "1", NULL };
	start_brain(extra);
	char *big = malloc(8192);
	memset(big, ' ', 8191);
	big[0] = '{';
	big[8190] = '}';
	big[8191] = 0;
	expect_error("POST", "/v1/jobs", big, 413, NULL);
	free(big);
	/* still serving */
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "GET", "/healthz", NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	rv_test_reply_release(&r);
}
END_TEST

START_TEST(batch_with_one_bad_sample_is_rejected_whole)
{
	start_brain(NULL);
	const char *uid = register_job("metrics");
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	const char *bad =
		"{\"samples\":["
		"{\"kind\":\"speed\",\"ts\":1000,\"speed\":10,\"step\":1,\"workers\":2,\"ps\":0},"
		"{\"kind\":\"node\",\"ts\":1000,\"node\":\"worker-0\",\"role\":\"worker\",\"rank\":0,"
		"\"cpu\":1.5,\"memory_mb\":900,\"cpu_limit\":2,\"memory_limit_mb\":2048},"
		"{\"kind\":\"speed\",\"ts\":2000,\"speed\":\"fast\",\"step\":2,\"workers\":2,\"ps\":0}]}";
	expect_error("POST", path, bad, 400, "samples[2].speed");
	ck_assert_int_eq(count_rows("SELECT count(*) FROM job_speed"), 0);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM node_usage"), 0);
	const char *neg = "{\"samples\":[{\"kind\":\"node\",\"ts\":1000,\"node\":\"worker-0\","
			  "\"role\":\"worker\",\"rank\":0,\"cpu\":-1,\"memory_mb\":900,\"cpu_limit\":2,"
			  "\"memory_limit_mb\":2048}]}";
	expect_error("POST", path, neg, 400, "samples[0].cpu");
	const char *good =
		"{\"samples\":["
		"{\"kind\":\"speed\",\"ts\":1000,\"speed\":10,\"step\":1,\"workers\":2,\"ps\":0},"
		"{\"kind\":\"speed\",\"ts\":2000,\"speed\":11,\"step\":2,\"workers\":2,\"ps\":0},"
		"{\"kind\":\"node\",\"ts\":1000,\"node\":\"worker-0\",\"role\":\"worker\",\"rank\":0,"
		"\"cpu\":1.5,\"memory_mb\":900,\"cpu_limit\":2,\"memory_limit_mb\":2048},"
		"{\"kind\":\"node\",\"ts\":2000,\"node\":\"worker-0\",\"role\":\"worker\",\"rank\":0,"
		"\"cpu\":1.7,\"memory_mb\":1100,\"cpu_limit\":2,\"memory_limit_mb\":2048}]}";
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", path, good, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "body %s", r.body);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "accepted", -1), 4);
	rv_test_reply_release(&r);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM job_speed"), 2);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM node_usage"), 2);
	snprintf(path, sizeof(path), "/v1/jobs/%s", uid);
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "last_sample_ts", -1), 2000);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "nodes.0.peak_memory_mb", -1), 1100);
	rv_test_reply_release(&r);
}
END_TEST

/* cgroup throttling counters are stored as sent; a sample without them (an
 * older sender) is stored with none. */
START_TEST(throttling_counters_stored)
{
	start_brain(NULL);
	const char *uid = register_job("throttle");
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	const char *doc =
		"{\"samples\":["
		"{\"kind\":\"node\",\"ts\":1000,\"node\":\"worker-0\",\"cpu\":2,\"memory_mb\":900,"
		"\"cpu_limit\":2,\"memory_limit_mb\":2048,\"nr_periods\":100,\"nr_throttled\":10,"
		"\"throttled_usec\":50000},"
		"{\"kind\":\"node\",\"ts\":2000,\"node\":\"worker-0\",\"cpu\":2,\"memory_mb\":900,"
		"\"cpu_limit\":2,\"memory_limit_mb\":2048,\"nr_periods\":200,\"nr_throttled\":70,"
		"\"throttled_usec\":950000,\"compute_time\":0.375},"
		"{\"kind\":\"node\",\"ts\":2000,\"node\":\"worker-1\",\"cpu\":1,\"memory_mb\":900}]"
		"}";
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", path, doc, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "body %s", r.body);
	rv_test_reply_release(&r);
	ck_assert_int_eq(count_rows("SELECT sum(nr_throttled) FROM node_usage"), 80);
	ck_assert_int_eq(count_rows("SELECT max(throttled_usec) FROM node_usage"), 950000);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM node_usage WHERE nr_periods IS NULL"
				    " AND node = 'worker-1'"),
			 1);
	/* the compute time too, NULL where the sample had none */
	ck_assert_int_eq(count_rows("SELECT count(*) FROM node_usage WHERE compute_time = 0.375"
				    " AND ts_ms = 2000 AND node = 'worker-0'"),
			 1);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM node_usage WHERE compute_time IS NULL"),
			 2);
	const char *over = "{\"samples\":[{\"kind\":\"node\",\"ts\":3000,\"node\":\"worker-0\","
			   "\"cpu\":1,\"memory_mb\":9,\"nr_periods\":5,\"nr_throttled\":6}]}";
	expect_error("POST", path, over, 400, "samples[0].nr_throttled");
}
END_TEST

static void post_ok(const char *path, const char *body)
{
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", path, body, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body);
	rv_test_reply_release(&r);
}

/* A batch of many node samples (enough for the brain to store them with
 * COPY rather than its multi-row INSERT) is stored exactly as a small one:
 * every row, each value as sent, the throttling counters and the compute
 * time NULL where a sample had none, the per-node summary, the job's last sample time. */
START_TEST(many_node_samples_stored_exactly)
{
	start_brain(NULL);
	const char *uid = register_job("many-nodes");
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_puts(&b, "{\"samples\":[");
	for (int i = 0; i < 200; i++) {
		rv_buf_printf(&b,
			      "%s{\"kind\":\"node\",\"ts\":%d,\"node\":\"worker-%d.a_b\","
			      "\"role\":\"%s\",\"rank\":%d,\"cpu\":%.12f,\"memory_mb\":%d,"
			      "\"cpu_limit\":2.5,\"memory_limit_mb\":4096,\"step_time\":0.%03d",
			      i ? "," : "", 1000 + i, i % 20, i % 20 ? "worker" : "ps", i % 20,
			      1.0 + i / 1000.0 + 1e-12, 100 + i, i);
		if (i % 2)
			rv_buf_printf(&b,
				      ",\"nr_periods\":%d,\"nr_throttled\":%d,"
				      "\"throttled_usec\":%lld",
				      i, i / 2, 5000000000LL + i);
		if (i % 3 == 0)
			rv_buf_printf(&b, ",\"compute_time\":0.%03d", i / 2 + 1);
		rv_buf_puts(&b, "}");
	}
	rv_buf_puts(&b, "]}");
	ck_assert(!rv_buf_failed(&b));
	post_ok(path, b.data);
	rv_buf_release(&b);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM node_usage"), 200);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM node_usage WHERE nr_periods IS NULL"
				    " AND nr_throttled IS NULL AND throttled_usec IS NULL"),
			 100);
	ck_assert_int_eq(
		count_rows("SELECT count(*) FROM node_usage u JOIN jobs j ON"
			   " j.id = u.job_id WHERE u.node = 'worker-' || (u.ts_ms - 1000)"
			   " % 20 || '.a_b' AND u.rank = (u.ts_ms - 1000) % 20"
			   " AND u.role = CASE WHEN (u.ts_ms - 1000) % 20 = 0 THEN 'ps'"
			   " ELSE 'worker' END AND u.memory_mb = u.ts_ms - 900"
			   " AND u.cpu = 1.0 + (u.ts_ms - 1000) / 1000.0 + 1e-12"
			   " AND u.cpu_limit = 2.5 AND u.memory_limit_mb = 4096"
			   " AND u.step_time = (u.ts_ms - 1000) / 1000.0"
			   " AND coalesce(u.nr_periods, u.ts_ms - 1000) = u.ts_ms - 1000"
			   " AND coalesce(u.nr_throttled * 2 + 1, u.ts_ms - 1000) = u.ts_ms - 1000"
			   " AND coalesce(u.throttled_usec, 5000000000 + u.ts_ms - 1000) ="
			   " 5000000000 + u.ts_ms - 1000"
			   " AND CASE WHEN (u.ts_ms - 1000) % 3 = 0"
			   "  THEN u.compute_time = ((u.ts_ms - 1000) / 2 + 1) / 1000.0"
			   "  ELSE u.compute_time IS NULL END"),
		200);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM job_nodes"), 20);
	ck_assert_int_eq(count_rows("SELECT peak_memory_mb FROM job_nodes"
				    " WHERE name = 'worker-19.a_b'"),
			 299);
	ck_assert_int_eq(count_rows("SELECT last_sample_ms FROM jobs"), 1199);
}
END_TEST

static void post_progress(const char *path, const char *dataset, long long ts, int done)
{
	char body[512];
	snprintf(body, sizeof(body),
		 "{\"samples\":[{\"kind\":\"progress\",\"ts\":%lld,\"dataset\":\"%s\","
		 "\"epoch\":0,\"samples_total\":1000,\"samples_done\":%d,\"shards_total\":100,"
		 "\"shards_done\":%d,\"shards_doing\":4}]}",
		 ts, dataset, done * 10, done);
	post_ok(path, body);
}

/* Progress samples: the newest per dataset is the job's, an older one
 * (reordered, resent) does not replace it, the history keeps
 * retention.progress_history per dataset, a dataset the spec lacks is
 * refused naming the sample, and the planner's sample time is untouched. */
START_TEST(progress_newest_kept_history_bounded)
{
	const char *extra[] = { "--retention-progress-history", "3", NULL };
	start_brain(extra);
	char *doc = job_doc("progress",
			    "\"datasets\":[{\"name\":\"train\",\"size\":1000,\"shardSize\":10},"
			    "{\"name\":\"eval\",\"size\":1000,\"shardSize\":10}],");
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/jobs", doc, NULL, &r), 0);
	free(doc);
	ck_assert_int_eq(r.status, 201);
	char uid[64], path[128], get[128];
	snprintf(uid, sizeof(uid), "%s", rv_test_json_str(r.json, "uid"));
	rv_test_reply_release(&r);
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	snprintf(get, sizeof(get), "/v1/jobs/%s", uid);

	ck_assert_int_eq(rv_test_http(&brain, "GET", get, NULL, NULL, &r), 0);
	ck_assert(cJSON_IsNull(cJSON_GetObjectItem(r.json, "shards")));
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "progress")), 0);
	rv_test_reply_release(&r);

	for (int i = 1; i <= 5; i++)
		post_progress(path, "train", 1000 * i, 10 * i);
	post_progress(path, "eval", 1000, 7);
	post_progress(path, "train", 2500, 99); /* older than the newest: history only */
	ck_assert_int_eq(count_rows("SELECT count(*) FROM job_progress_history"
				    " WHERE dataset = 'train'"),
			 3);
	ck_assert_int_eq(count_rows("SELECT min(ts_ms) FROM job_progress_history"
				    " WHERE dataset = 'train'"),
			 3000); /* the newest three by ts: the old one came and went */
	ck_assert_int_eq(count_rows("SELECT count(*) FROM job_progress_history"
				    " WHERE dataset = 'eval'"),
			 1);
	ck_assert_int_eq(rv_test_http(&brain, "GET", get, NULL, NULL, &r), 0);
	ck_assert_str_eq(rv_test_json_str(r.json, "progress.0.dataset"), "eval");
	ck_assert_int_eq((int)rv_test_json_num(r.json, "progress.1.shards_done", -1), 50);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "progress.1.shards_left", -1), 46);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "shards.done", -1), 57);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "shards.total", -1), 200);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "last_sample_ts", -1), 0);
	rv_test_reply_release(&r);

	expect_error("POST", path,
		     "{\"samples\":[{\"kind\":\"speed\",\"ts\":9000,\"speed\":1},"
		     "{\"kind\":\"progress\",\"ts\":9000,\"dataset\":\"test\","
		     "\"samples_total\":10,\"samples_done\":1}]}",
		     400, "samples[1].dataset");
	expect_error("POST", path,
		     "{\"samples\":[{\"kind\":\"progress\",\"ts\":9000,\"dataset\":\"train\","
		     "\"samples_total\":10,\"samples_done\":11}]}",
		     400, "samples[0].samples_done");
	/* the refused batch left nothing */
	ck_assert_int_eq(count_rows("SELECT count(*) FROM job_speed"), 0);
}
END_TEST

/* GET /v1/jobs/{uid}/progress: the reports kept (retention.progress_history
 * per dataset), oldest first, after since_ms; pages of limit that end between two report times, read on
 * with next_since_ms without a gap or a repeat; 404 for an unknown job,
 * 400 naming a bad parameter; SQL in a parameter is a bad parameter. */
START_TEST(progress_history_served)
{
	const char *extra[] = { "--retention-progress-history", "4", NULL };
	start_brain(extra);
	char *doc = job_doc("history",
			    "\"datasets\":[{\"name\":\"train\",\"size\":1000,\"shardSize\":10},"
			    "{\"name\":\"eval\",\"size\":1000,\"shardSize\":10}],");
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/jobs", doc, NULL, &r), 0);
	free(doc);
	ck_assert_int_eq(r.status, 201);
	char uid[64], path[128], get[256];
	snprintf(uid, sizeof(uid), "%s", rv_test_json_str(r.json, "uid"));
	rv_test_reply_release(&r);
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);

	snprintf(get, sizeof(get), "/v1/jobs/%s/progress", uid);
	ck_assert_int_eq(rv_test_http(&brain, "GET", get, NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "progress")), 0);
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(r.json, "more")));
	rv_test_reply_release(&r);

	/* train at 1..5 s (the one at 1 s goes: 4 kept), eval at 2 and 4 s
	 * (the same times as train's) */
	for (int i = 1; i <= 5; i++)
		post_progress(path, "train", 1000 * i, i);
	post_progress(path, "eval", 4000, 40);
	post_progress(path, "eval", 2000, 20);

	ck_assert_int_eq(rv_test_http(&brain, "GET", get, NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(rv_test_json_str(r.json, "job"), uid);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "progress")), 6);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "progress.0.ts", -1), 2000);
	ck_assert_str_eq(rv_test_json_str(r.json, "progress.0.dataset"), "eval");
	ck_assert_int_eq((int)rv_test_json_num(r.json, "progress.0.shards_done", -1), 20);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "progress.0.samples_done", -1), 200);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "progress.0.shards_doing", -1), 4);
	ck_assert_str_eq(rv_test_json_str(r.json, "progress.1.dataset"), "train");
	ck_assert_int_eq((int)rv_test_json_num(r.json, "progress.1.ts", -1), 2000);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "progress.5.ts", -1), 5000);
	rv_test_reply_release(&r);

	/* since_ms is exclusive */
	snprintf(get, sizeof(get), "/v1/jobs/%s/progress?since_ms=4000", uid);
	ck_assert_int_eq(rv_test_http(&brain, "GET", get, NULL, NULL, &r), 0);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "progress")), 1);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "progress.0.ts", -1), 5000);
	rv_test_reply_release(&r);

	/* pages of 2: the two reports of 2 s are never split, every report
	 * comes once */
	int64_t since = -1;
	int seen = 0, pages = 0;
	long long sum = 0;
	for (bool more = true; more && pages < 10; pages++) {
		if (since < 0)
			snprintf(get, sizeof(get), "/v1/jobs/%s/progress?limit=2", uid);
		else
			snprintf(get, sizeof(get), "/v1/jobs/%s/progress?limit=2&since_ms=%lld",
				 uid, (long long)since);
		ck_assert_int_eq(rv_test_http(&brain, "GET", get, NULL, NULL, &r), 0);
		ck_assert_int_eq(r.status, 200);
		cJSON *arr = cJSON_GetObjectItem(r.json, "progress");
		int n = cJSON_GetArraySize(arr);
		ck_assert_int_ge(n, 1);
		ck_assert_int_le(n, 2);
		for (int i = 0; i < n; i++)
			sum += (long long)cJSON_GetObjectItem(cJSON_GetArrayItem(arr, i),
							      "shards_done")
				       ->valuedouble;
		seen += n;
		more = cJSON_IsTrue(cJSON_GetObjectItem(r.json, "more"));
		if (more)
			since = (int64_t)rv_test_json_num(r.json, "next_since_ms", -1);
		rv_test_reply_release(&r);
	}
	ck_assert_int_eq(seen, 6);
	ck_assert_int_eq(sum, 2 + 3 + 4 + 5 + 20 + 40);

	expect_error("GET", "/v1/jobs/no-such-job/progress", NULL, 404, NULL);
	const char *bad[] = { "limit=0", "limit=10001", "limit=x", "since_ms=-5",
			      "since_ms=1%27%3B%20DROP%20TABLE%20jobs%3B--" };
	const char *field[] = { "limit", "limit", "limit", "since_ms", "since_ms" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(get, sizeof(get), "/v1/jobs/%s/progress?%s", uid, bad[i]);
		expect_error("GET", get, NULL, 400, field[i]);
	}
	ck_assert_int_eq(count_rows("SELECT count(*) FROM jobs"), 1);
}
END_TEST

/* What grows with the clock alone goes after its retention: the monitor's
 * node samples by their ts, report and batch ids by when they were
 * stored; recent rows stay. */
START_TEST(retention_deletes_old_rows_only)
{
	const char *extra[] = { "--retention-interval-s", "1", NULL };
	start_brain(extra);
	const char *uid = register_job("retain");
	long long now = (long long)rv_now_ms(), old = now - 8LL * 24 * 3600 * 1000;
	char body[1024];
	for (int i = 0; i < 2; i++) {
		snprintf(body, sizeof(body),
			 "{\"report_id\":\"rep-%d\",\"nodes\":[{\"name\":\"h1\",\"ts\":%lld,"
			 "\"cpu\":4,\"memory_mb\":8192,\"cpu_used\":1,\"memory_used_mb\":10}]}",
			 i, i == 0 ? old : now);
		post_ok("/v1/cluster/nodes", body);
	}
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	post_ok(path, "{\"batch_id\":\"b-old\",\"samples\":[{\"kind\":\"speed\",\"ts\":1,"
		      "\"speed\":1}]}");
	post_ok(path, "{\"batch_id\":\"b-new\",\"samples\":[{\"kind\":\"speed\",\"ts\":2,"
		      "\"speed\":1}]}");
	/* stored two days ago: past retention.report_ids_s (1 day) and not
	 * past retention.batch_ids_s (7 days); eight days ago: past both */
	PGconn *c = PQconnectdb(conninfo);
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	PGresult *q = PQexec(c, "UPDATE cluster_reports SET created_at = now() - interval '2 days'"
				" WHERE report_id = 'rep-0';"
				"UPDATE metrics_batches SET created_at = now() - interval '8 days'"
				" WHERE batch_id = 'b-old'");
	ck_assert_int_eq(PQresultStatus(q), PGRES_COMMAND_OK);
	PQclear(q);
	PQfinish(c);
	long left = -1;
	for (int i = 0; i < 100; i++) {
		left = count_rows("SELECT count(*) FROM cluster_node_samples") +
		       count_rows("SELECT count(*) FROM cluster_reports") +
		       count_rows("SELECT count(*) FROM metrics_batches");
		if (left == 3)
			break;
		usleep(100 * 1000);
	}
	ck_assert_int_eq(left, 3);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM cluster_node_samples WHERE ts_ms = "
				    "(SELECT max(ts_ms) FROM cluster_node_samples)"),
			 1);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM cluster_reports WHERE report_id = "
				    "'rep-1'"),
			 1);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM metrics_batches WHERE batch_id = "
				    "'b-new'"),
			 1);
	/* the node itself (cluster_nodes: its newest sample) is the expiry's */
	ck_assert_int_eq(count_rows("SELECT count(*) FROM cluster_nodes"), 1);
	/* and the speed samples of the batches are the job's history: kept */
	ck_assert_int_eq(count_rows("SELECT count(*) FROM job_speed"), 2);
}
END_TEST

START_TEST(injection_strings_stored_verbatim)
{
	start_brain(NULL);
	const char *evil = "x'); DROP TABLE jobs; --";
	char doc[2048];
	snprintf(doc, sizeof(doc),
		 "{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"evil\",\"labels\":{\"user\":\"%s\","
		 "\"note\":\"\\\"; DELETE FROM scale_plans; --\"}},\"spec\":{\"distributionStrategy\":"
		 "\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{\"replicas\":1}}}}",
		 evil);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/jobs", doc, NULL, &r), 0);
	ck_assert_msg(r.status == 201, "body %s", r.body);
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/events", rv_test_json_str(r.json, "uid"));
	char ev[512];
	snprintf(ev, sizeof(ev), "{\"type\":\"node_failed\",\"ts\":5,\"node\":\"worker-0\","
		 "\"exit_code\":1,\"reason\":\"%s\"}", evil);
	struct rv_test_reply e;
	ck_assert_int_eq(rv_test_http(&brain, "POST", path, ev, NULL, &e), 0);
	ck_assert_int_eq(e.status, 200);
	rv_test_reply_release(&e);
	snprintf(path, sizeof(path), "/v1/jobs/%s", rv_test_json_str(r.json, "uid"));
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &e), 0);
	ck_assert_str_eq(rv_test_json_str(e.json, "user"), evil);
	ck_assert_str_eq(rv_test_json_str(e.json, "spec.metadata.labels.note"),
			 "\"; DELETE FROM scale_plans; --");
	ck_assert_str_eq(rv_test_json_str(e.json, "nodes.0.exit_reason"), evil);
	rv_test_reply_release(&e);
	rv_test_reply_release(&r);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM jobs"), 1);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM scale_plans"), 1);
}
END_TEST

START_TEST(token_guards_writes)
{
	const char *extra[] = { "--token", "s3cret-token", NULL };
	start_brain(extra);
	char *doc = job_doc("authd", NULL);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/jobs", doc, NULL, &r), 0);
	ck_assert_int_eq(r.status, 401);
	ck_assert_ptr_nonnull(rv_test_json_str(r.json, "error"));
	rv_test_reply_release(&r);
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/jobs", doc, "s3cret-tokem", &r), 0);
	ck_assert_int_eq(r.status, 401);
	rv_test_reply_release(&r);
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/jobs", doc, "s3cret", &r), 0);
	ck_assert_int_eq(r.status, 401);
	rv_test_reply_release(&r);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM jobs"), 0);
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/jobs", doc, "s3cret-token", &r), 0);
	ck_assert_int_eq(r.status, 201);
	rv_test_reply_release(&r);
	ck_assert_int_eq(rv_test_http(&brain, "GET", "/v1/jobs", NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	rv_test_reply_release(&r);
	free(doc);
}
END_TEST

START_TEST(database_down_is_503_then_recovers)
{
	start_brain(NULL);
	const char *uid = register_job("outage");
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	const char *batch = "{\"samples\":[{\"kind\":\"speed\",\"ts\":1000,\"speed\":10,\"step\":1,"
			    "\"workers\":2,\"ps\":0}]}";
	ck_assert_int_eq(rv_test_pg_stop_server(), 0);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", path, batch, NULL, &r), 0);
	ck_assert_msg(r.status == 503, "status %ld body %s", r.status, r.body);
	ck_assert_ptr_nonnull(rv_test_json_str(r.json, "detail"));
	ck_assert(strlen(rv_test_json_str(r.json, "detail")) > 10);
	rv_test_reply_release(&r);
	ck_assert_int_eq(rv_test_http(&brain, "GET", "/healthz", NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 503);
	ck_assert_str_eq(rv_test_json_str(r.json, "status"), "degraded");
	rv_test_reply_release(&r);
	ck_assert_int_eq(kill(brain.pid, 0), 0);
	/* Requests while it is down do not each try to connect: the pool backs
	 * off (one attempt per pause, doubling), answering 503 in between. */
	for (int i = 0; i < 30; i++) {
		ck_assert_int_eq(rv_test_http(&brain, "POST", path, batch, NULL, &r), 0);
		ck_assert_int_eq(r.status, 503);
		rv_test_reply_release(&r);
	}
	ck_assert_int_eq(rv_test_http(&brain, "GET", "/metrics", NULL, NULL, &r), 0);
	const char *cf = strstr(r.body, "\nrover_brain_db_connect_failures_total ");
	ck_assert_ptr_nonnull(cf);
	long failures = strtol(cf + strlen("\nrover_brain_db_connect_failures_total "), NULL, 10);
	ck_assert_msg(failures >= 1 && failures <= 12, "%ld connect attempts for 32 requests",
		      failures);
	rv_test_reply_release(&r);
	ck_assert_int_eq(rv_test_pg_start_server(), 0);
	long status = 0;
	for (int i = 0; i < 50 && status != 200; i++) {
		ck_assert_int_eq(rv_test_http(&brain, "POST", path, batch, NULL, &r), 0);
		status = r.status;
		rv_test_reply_release(&r);
		if (status != 200)
			usleep(100000);
	}
	ck_assert_int_eq(status, 200);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM job_speed"), 1);
}
END_TEST

/* Thread: 0.4 s later, report an OOM for job uid; returns 1 when accepted. */
static void *post_oom_later(void *uid)
{
	usleep(400000);
	char ep[128];
	snprintf(ep, sizeof(ep), "/v1/jobs/%s/events", (const char *)uid);
	struct rv_test_reply e;
	int rc = rv_test_http(&brain, "POST", ep,
			      "{\"type\":\"node_oom\",\"ts\":7000,\"node\":\"worker-1\","
			      "\"role\":\"worker\",\"rank\":1,\"exit_code\":137,"
			      "\"memory_mb\":4096,\"peak_memory_mb\":4090}",
			      NULL, &e);
	bool ok = rc == 0 && e.status == 200;
	if (rc == 0)
		rv_test_reply_release(&e);
	return (void *)(intptr_t)ok;
}

START_TEST(long_poll_wakes_on_oom_plan)
{
	start_brain(NULL);
	const char *uid = register_job("longpoll");
	char path[160];
	/* no running plan: a bounded wait answers 204 */
	snprintf(path, sizeof(path), "/v1/jobs/%s/plan?stage=running&after=0&wait=1", uid);
	int64_t t0 = rv_mono_ms();
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 204);
	ck_assert(rv_mono_ms() - t0 >= 900);
	rv_test_reply_release(&r);
	snprintf(path, sizeof(path), "/v1/jobs/%s/plan?stage=bogus", uid);
	expect_error("GET", path, NULL, 400, "stage");
	snprintf(path, sizeof(path), "/v1/jobs/%s/plan?stage=oom&wait=99999", uid);
	expect_error("GET", path, NULL, 400, "wait");
	pthread_t poster;
	ck_assert_int_eq(pthread_create(&poster, NULL, post_oom_later, (void *)uid), 0);
	snprintf(path, sizeof(path), "/v1/jobs/%s/plan?stage=oom&after=0&wait=20", uid);
	t0 = rv_mono_ms();
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	int64_t waited = rv_mono_ms() - t0;
	void *posted;
	pthread_join(poster, &posted);
	ck_assert_msg(posted == (void *)1, "the OOM event was not accepted");
	ck_assert_msg(r.status == 200, "status %ld body %s", r.status, r.body);
	ck_assert_msg(waited < 5000, "long-poll took %lld ms", (long long)waited);
	ck_assert_str_eq(rv_test_json_str(r.json, "stage"), "oom");
	ck_assert_str_eq(rv_test_json_str(r.json, "launch.0.node"), "worker-1");
	ck_assert(rv_test_json_num(r.json, "launch.0.resource.memory_mb", 0) > 4096);
	rv_test_reply_release(&r);
	snprintf(path, sizeof(path), "/v1/jobs/%s/plans", uid);
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(cJSON_GetArraySize(rv_test_json_at(r.json, "plans")), 2);
	ck_assert_str_eq(rv_test_json_str(r.json, "plans.0.stage"), "create");
	ck_assert_str_eq(rv_test_json_str(r.json, "plans.1.stage"), "oom");
	ck_assert_ptr_nonnull(rv_test_json_str(r.json, "plans.1.reason"));
	rv_test_reply_release(&r);
	snprintf(path, sizeof(path), "/v1/jobs/%s", uid);
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "nodes.0.oom_count", -1), 1);
	rv_test_reply_release(&r);
}
END_TEST

START_TEST(cluster_reports)
{
	start_brain(NULL);
	const char *rep = "{\"nodes\":[{\"name\":\"n1\",\"ts\":1000,\"cpu\":16,\"memory_mb\":65536,"
			  "\"gpu\":0,\"cpu_used\":4,\"memory_used_mb\":16384},{\"name\":\"n2\",\"ts\":1000,"
			  "\"cpu\":8,\"memory_mb\":32768,\"gpu\":1,\"cpu_used\":8,\"memory_used_mb\":1024}]}";
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/cluster/nodes", rep, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "body %s", r.body);
	rv_test_reply_release(&r);
	ck_assert_int_eq(rv_test_http(&brain, "GET", "/v1/cluster", NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "capacity.cpu", -1), 24);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "free.cpu", -1), 12);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "capacity.nodes", -1), 2);
	rv_test_reply_release(&r);
	expect_error("POST", "/v1/cluster/nodes", "{\"nodes\":[{\"name\":\"n1\",\"ts\":1,\"cpu\":-4,"
		     "\"memory_mb\":1}]}", 400, "nodes[0].cpu");
}
END_TEST

/* Every $ref in the document names a schema. */
static void refs_resolve(const cJSON *doc, const cJSON *node)
{
	for (const cJSON *it = node ? node->child : NULL; it; it = it->next) {
		if (it->string && !strcmp(it->string, "$ref")) {
			const char *pre = "#/components/schemas/";
			ck_assert_msg(cJSON_IsString(it) &&
					      !strncmp(it->valuestring, pre, strlen(pre)),
				      "odd $ref");
			const cJSON *schemas = rv_test_json_at(doc, "components.schemas");
			ck_assert_msg(cJSON_GetObjectItemCaseSensitive(schemas,
								       it->valuestring +
									       strlen(pre)),
				      "$ref %s names no schema", it->valuestring);
		}
		refs_resolve(doc, it);
	}
}

/* The document's schema of every wire message holds exactly the fields of
 * its table, required where the table says (replies may add read-only ones). */
static void openapi_matches_wire(const cJSON *doc)
{
	const cJSON *schemas = rv_test_json_at(doc, "components.schemas");
	int n;
	const struct rv_wire_message *m = rv_wire_messages(&n);
	ck_assert_int_ge(n, 10);
	for (int i = 0; i < n; i++) {
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(schemas, m[i].name);
		ck_assert_msg(s, "no schema %s", m[i].name);
		const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
		const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
		for (int k = 0; k < m[i].nfields; k++) {
			const struct rv_wire_field *f = &m[i].fields[k];
			ck_assert_msg(cJSON_GetObjectItemCaseSensitive(props, f->name),
				      "%s.%s missing", m[i].name, f->name);
			bool listed = false;
			const cJSON *q;
			cJSON_ArrayForEach(q, req)
				listed |= cJSON_IsString(q) && !strcmp(q->valuestring, f->name);
			ck_assert_msg(listed == f->required, "%s.%s required: doc %d table %d",
				      m[i].name, f->name, listed, f->required);
		}
		const cJSON *p;
		cJSON_ArrayForEach(p, props)
		{
			bool known = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "readOnly"));
			for (int k = 0; !known && k < m[i].nfields; k++)
				known = !strcmp(m[i].fields[k].name, p->string);
			ck_assert_msg(known, "%s.%s is in the document but not in the wire table",
				      m[i].name, p->string);
		}
	}
	refs_resolve(doc, doc);
}

START_TEST(health_metrics_openapi)
{
	start_brain(NULL);
	const char *uid = register_job("observed");
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", path,
				      "{\"samples\":[{\"kind\":\"speed\",\"ts\":1000,\"speed\":10,"
				      "\"step\":1,\"workers\":2,\"ps\":0},{\"kind\":\"speed\",\"ts\":2000,"
				      "\"speed\":10,\"step\":2,\"workers\":2,\"ps\":0}]}",
				      NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	rv_test_reply_release(&r);
	ck_assert_int_eq(rv_test_http(&brain, "GET", "/healthz", NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(rv_test_json_str(r.json, "status"), "ok");
	rv_test_reply_release(&r);
	ck_assert_int_eq(rv_test_http(&brain, "GET", "/metrics", NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "rover_brain_samples_ingested_total 2\n"));
	ck_assert_ptr_nonnull(strstr(r.body, "rover_http_requests_total{"));
	ck_assert_ptr_nonnull(strstr(r.body, "rover_brain_db_pool_size 8\n"));
	rv_test_reply_release(&r);
	ck_assert_int_eq(rv_test_http(&brain, "GET", "/v1/openapi.json", NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(rv_test_json_str(r.json, "openapi"), "3.0.3");
	static const char *const paths[] = { "/v1/jobs", "/v1/jobs/{uid}", "/v1/jobs/{uid}/metrics",
					     "/v1/jobs/{uid}/events", "/v1/jobs/{uid}/plan",
					     "/v1/jobs/{uid}/plans", "/v1/cluster/nodes", "/v1/cluster",
					     "/healthz", "/metrics", "/v1/openapi.json" };
	const cJSON *p = rv_test_json_at(r.json, "paths");
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		ck_assert_msg(cJSON_GetObjectItemCaseSensitive(p, paths[i]), "missing %s", paths[i]);
	ck_assert_ptr_nonnull(rv_test_json_at(r.json, "components.schemas.ScalePlan"));
	ck_assert_ptr_nonnull(rv_test_json_at(r.json, "paths./v1/jobs.post.requestBody"));
	/* the fields that once drifted are there */
	ck_assert_ptr_nonnull(
		rv_test_json_at(r.json, "components.schemas.Sample.properties.flops"));
	ck_assert_ptr_nonnull(
		rv_test_json_at(r.json, "components.schemas.ScalePlan.properties.based_on_ts"));
	openapi_matches_wire(r.json);
	/* What Redocly's recommended rules ask (tests/scripts/check_openapi.sh
	 * runs them): servers, and on every operation an operationId, security
	 * (the bearer scheme on writes, none on reads) and a 4xx response. */
	ck_assert_int_eq(cJSON_GetArraySize(rv_test_json_at(r.json, "servers")), 1);
	ck_assert_ptr_nonnull(rv_test_json_at(r.json, "components.securitySchemes.bearer"));
	const cJSON *pth, *op;
	int ops = 0;
	cJSON_ArrayForEach(pth, p)
	{
		cJSON_ArrayForEach(op, pth)
		{
			const cJSON *sec = cJSON_GetObjectItemCaseSensitive(op, "security");
			ck_assert_msg(rv_test_json_str(op, "operationId"), "%s %s: no operationId",
				      op->string, pth->string);
			ck_assert_msg(cJSON_IsArray(sec), "%s %s: no security", op->string,
				      pth->string);
			ck_assert_int_eq(cJSON_GetArraySize(sec), strcmp(op->string, "post") == 0);
			bool has4xx = false;
			const cJSON *code;
			cJSON_ArrayForEach(code, cJSON_GetObjectItemCaseSensitive(op, "responses"))
				has4xx |= code->string[0] == '4';
			ck_assert_msg(has4xx, "%s %s: no 4xx response", op->string, pth->string);
			ops++;
		}
	}
	ck_assert_int_ge(ops, 15);
	rv_test_reply_release(&r);
}
END_TEST

/* GET the path; asserts the status and returns the reply (release it). */
static struct rv_test_reply get_ok(const char *path, long status)
{
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	ck_assert_msg(r.status == status, "GET %s: status %ld body %s", path, r.status, r.body);
	return r;
}

static double num_at(const cJSON *root, const char *dotted, int i)
{
	const cJSON *a = rv_test_json_at(root, dotted);
	ck_assert_msg(cJSON_IsArray(a), "%s is not an array", dotted);
	const cJSON *v = cJSON_GetArrayItem(a, i);
	ck_assert_msg(cJSON_IsNumber(v), "%s[%d] is not a number", dotted, i);
	return v->valuedouble;
}

START_TEST(status_page_series_usage_dashboards)
{
	start_brain(NULL);
	const char *uid = register_job("plotted");
	char path[160];
	/* 30 timestamps 1 s apart: speed 10..39, two nodes of 1.5 of 4 cores. */
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_puts(&b, "{\"samples\":[");
	for (int i = 0; i < 30; i++) {
		long ts = 1000L * (i + 1);
		rv_buf_printf(
			&b,
			"%s{\"kind\":\"speed\",\"ts\":%ld,\"speed\":%d,\"step\":%d,\"workers\":2}",
			i ? "," : "", ts, 10 + i, i);
		for (int n = 0; n < 2; n++)
			rv_buf_printf(
				&b,
				",{\"kind\":\"node\",\"ts\":%ld,\"node\":\"worker-%d\",\"rank\":%d,"
				"\"cpu\":1.5,\"memory_mb\":1000,\"cpu_limit\":4,"
				"\"memory_limit_mb\":4096}",
				ts, n, n);
	}
	ck_assert_int_eq(rv_test_brain_post_batch(&brain, uid, &b), 200);

	snprintf(path, sizeof(path), "/v1/jobs/%s/series", uid);
	struct rv_test_reply r = get_ok(path, 200);
	ck_assert_int_eq(cJSON_GetArraySize(rv_test_json_at(r.json, "speed.ts")), 30);
	ck_assert_int_eq(cJSON_GetArraySize(rv_test_json_at(r.json, "speed.speed")), 30);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "samples", -1), 30);
	ck_assert_double_eq(num_at(r.json, "speed.ts", 0), 1000);
	ck_assert_double_eq(num_at(r.json, "speed.speed", 0), 10);
	ck_assert_double_eq(num_at(r.json, "speed.speed", 29), 39);
	ck_assert_int_eq(cJSON_GetArraySize(rv_test_json_at(r.json, "usage.ts")), 30);
	ck_assert_double_eq_tol(num_at(r.json, "usage.cpu", 0), 3.0, 1e-9);
	ck_assert_double_eq_tol(num_at(r.json, "usage.cpu_limit", 0), 8.0, 1e-9);
	ck_assert_double_eq(num_at(r.json, "usage.nodes", 0), 2);
	const cJSON *plans = rv_test_json_at(r.json, "plans");
	ck_assert_int_ge(cJSON_GetArraySize(plans), 1);
	const cJSON *first = cJSON_GetArrayItem(plans, 0);
	ck_assert_str_eq(rv_test_json_str(first, "stage"), "create");
	ck_assert_ptr_nonnull(rv_test_json_str(first, "reason"));
	ck_assert(cJSON_IsNull(rv_test_json_at(first, "ts"))); /* before any sample */
	rv_test_reply_release(&r);

	/* Thinned: three equal spans of ten samples, each its mean. */
	snprintf(path, sizeof(path), "/v1/jobs/%s/series?max_points=3", uid);
	r = get_ok(path, 200);
	ck_assert_int_eq(cJSON_GetArraySize(rv_test_json_at(r.json, "speed.speed")), 3);
	ck_assert_double_eq_tol(num_at(r.json, "speed.speed", 0), 14.5, 1e-9);
	ck_assert_double_eq_tol(num_at(r.json, "speed.speed", 2), 34.5, 1e-9);
	ck_assert_double_eq(num_at(r.json, "speed.ts", 0), 5500);
	rv_test_reply_release(&r);
	snprintf(path, sizeof(path), "/v1/jobs/%s/series?max_points=1", uid);
	r = get_ok(path, 400);
	ck_assert_str_eq(rv_test_json_str(r.json, "field"), "max_points");
	rv_test_reply_release(&r);
	r = get_ok("/v1/jobs/j-0000000000000000/series", 404);
	rv_test_reply_release(&r);

	/* Buckets of 10 s: 1..9 s, 10..19 s, 20..29 s, 30 s; the job's sums. */
	r = get_ok("/v1/cluster/usage?window_s=60&bucket_s=10", 200);
	ck_assert_int_eq(cJSON_GetArraySize(rv_test_json_at(r.json, "ts")), 4);
	ck_assert_double_eq(num_at(r.json, "ts", 1), 10000);
	for (int i = 0; i < 4; i++) {
		ck_assert_double_eq_tol(num_at(r.json, "cpu_used", i), 3.0, 1e-9);
		ck_assert_double_eq_tol(num_at(r.json, "cpu_alloc", i), 8.0, 1e-9);
		ck_assert_double_eq(num_at(r.json, "jobs", i), 1);
	}
	rv_test_reply_release(&r);
	r = get_ok("/v1/cluster/usage?window_s=7776000&bucket_s=1", 400);
	ck_assert_str_eq(rv_test_json_str(r.json, "field"), "bucket_s");
	rv_test_reply_release(&r);

	/* The waste: (4 - 1.5) cores on each of two nodes. */
	r = get_ok("/v1/dashboards/overprovisioning", 200);
	const cJSON *row = cJSON_GetArrayItem(rv_test_json_at(r.json, "rows"), 0);
	ck_assert_ptr_nonnull(row);
	ck_assert_str_eq(rv_test_json_str(row, "name"), "plotted");
	ck_assert_double_eq_tol(rv_test_json_num(row, "cpu_wasted", -1), 5.0, 1e-9);
	rv_test_reply_release(&r);
	r = get_ok("/v1/dashboards/failures_by_cause", 200);
	ck_assert_int_eq(cJSON_GetArraySize(rv_test_json_at(r.json, "rows")), 0);
	rv_test_reply_release(&r);
	r = get_ok("/v1/dashboards/pg_authid", 404);
	ck_assert_str_eq(rv_test_json_str(r.json, "field"), "view");
	rv_test_reply_release(&r);

	/* The list carries the newest speed. */
	r = get_ok("/v1/jobs", 200);
	const cJSON *job = cJSON_GetArrayItem(rv_test_json_at(r.json, "jobs"), 0);
	ck_assert_double_eq(rv_test_json_num(job, "speed", -1), 39);
	ck_assert_double_eq(rv_test_json_num(job, "workers", -1), 2);
	rv_test_reply_release(&r);

	/* The page, found next to the binary; nothing outside its files. */
	r = get_ok("/", 200);
	ck_assert_ptr_nonnull(strstr(r.body, "<script src=\"/web/app.js\">"));
	rv_test_reply_release(&r);
	r = get_ok("/web/app.js", 200);
	ck_assert_ptr_nonnull(strstr(r.body, "/series?max_points="));
	rv_test_reply_release(&r);
	r = get_ok("/web/brain.h", 404);
	rv_test_reply_release(&r);
	r = get_ok("/web/vendor/.VERSIONS", 404);
	rv_test_reply_release(&r);

	r = get_ok("/v1/openapi.json", 200);
	const cJSON *p = rv_test_json_at(r.json, "paths");
	ck_assert_ptr_nonnull(cJSON_GetObjectItemCaseSensitive(p, "/v1/jobs/{uid}/series"));
	ck_assert_ptr_nonnull(cJSON_GetObjectItemCaseSensitive(p, "/v1/cluster/usage"));
	ck_assert_ptr_nonnull(cJSON_GetObjectItemCaseSensitive(p, "/v1/dashboards/{view}"));
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(p, "/")); /* the page is no API */
	rv_test_reply_release(&r);
}
END_TEST

/* Appends the samples of second from..to: the job's speed on each whole
 * second, two nodes of 1.5 of 4 cores each reporting half a second apart.
 * first: these are the batch's first samples. */
static void offset_samples(struct rv_buf *b, int from, int to, bool first)
{
	for (int i = from; i <= to; i++) {
		long ts = 1000L * i;
		rv_buf_printf(
			b,
			"%s{\"kind\":\"speed\",\"ts\":%ld,\"speed\":20,\"step\":%d,\"workers\":2}",
			first && i == from ? "" : ",", ts, i);
		for (int n = 0; n < 2; n++)
			rv_buf_printf(
				b,
				",{\"kind\":\"node\",\"ts\":%ld,\"node\":\"worker-%d\",\"rank\":%d,"
				"\"cpu\":1.5,\"memory_mb\":1024,\"cpu_limit\":4,"
				"\"memory_limit_mb\":4096}",
				ts + 500L * n, n, n);
	}
}

/* The number of nulls in the array at dotted; every other item is v. */
static int nulls_else_all(const cJSON *root, const char *dotted, double v)
{
	const cJSON *a = rv_test_json_at(root, dotted), *it;
	int nulls = 0;
	ck_assert_msg(cJSON_GetArraySize(a) > 0, "%s is empty", dotted);
	cJSON_ArrayForEach(it, a)
	{
		if (cJSON_IsNull(it)) {
			nulls++;
			continue;
		}
		ck_assert_msg(cJSON_IsNumber(it) && fabs(it->valuedouble - v) < 1e-9,
			      "%s: %g where every point should be %g", dotted,
			      cJSON_IsNumber(it) ? it->valuedouble : -1.0, v);
	}
	return nulls;
}

/* Two nodes that never report at the same moment are summed as two nodes
 * at every point (not one node here and two there), and a minute without
 * samples is one gap in each plot, not a line across it. */
START_TEST(status_page_series_aligns_nodes_and_shows_gaps)
{
	start_brain(NULL);
	const char *uid = register_job("aligned");
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_puts(&b, "{\"samples\":[");
	offset_samples(&b, 1, 30, true);
	offset_samples(&b, 91, 100, false);
	ck_assert_int_eq(rv_test_brain_post_batch(&brain, uid, &b), 200);

	char path[160];
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "/v1/jobs/%s/series%s", uid,
			 i ? "?max_points=20" : "");
		struct rv_test_reply r = get_ok(path, 200);
		ck_assert_int_eq(nulls_else_all(r.json, "usage.cpu_limit", 8.0), 1);
		ck_assert_int_eq(nulls_else_all(r.json, "usage.cpu", 3.0), 1);
		ck_assert_int_eq(nulls_else_all(r.json, "usage.memory_mb", 2048), 1);
		ck_assert_int_eq(nulls_else_all(r.json, "speed.speed", 20), 1);
		/* the gap sits between the two runs of samples */
		const cJSON *ts = rv_test_json_at(r.json, "usage.ts");
		const cJSON *cpu = rv_test_json_at(r.json, "usage.cpu");
		for (int k = 0; k < cJSON_GetArraySize(cpu); k++)
			if (cJSON_IsNull(cJSON_GetArrayItem(cpu, k))) {
				double t = cJSON_GetArrayItem(ts, k)->valuedouble;
				ck_assert_msg(t > 30000 && t < 91000, "gap drawn at %g ms", t);
			}
		rv_test_reply_release(&r);
	}
}
END_TEST

RV_TEST_MAIN_PG_FIXTURE_TCASE("brain_api", NULL, teardown, "api", 60, register_get_list,
			      duplicate_name_conflicts_until_finished, bad_job_documents,
			      unknown_job_is_404, body_over_limit_is_413,
			      batch_with_one_bad_sample_is_rejected_whole,
			      throttling_counters_stored, many_node_samples_stored_exactly,
			      progress_newest_kept_history_bounded, progress_history_served,
			      retention_deletes_old_rows_only, injection_strings_stored_verbatim,
			      token_guards_writes, database_down_is_503_then_recovers,
			      long_poll_wakes_on_oom_plan, cluster_reports, health_metrics_openapi,
			      status_page_series_usage_dashboards,
			      status_page_series_aligns_nodes_and_shows_gaps)
