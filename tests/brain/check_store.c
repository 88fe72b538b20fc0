/*
 * check_store.c: brain/store.c's statements as the planner and the metrics
 * ingest run them, on two connections of a private PostgreSQL (the brain's
 * own functions, no daemon).  A planner pass is held open in its
 * REPEATABLE READ snapshot while a metrics batch of the same job commits,
 * then writes what a pass writes (a running plan, the job's planned time)
 * and commits: the pass must not fail for the batch, however long it took.
 * Each test has its own database; the connections are the test's.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>

#include "brain.h"
#include "cleanup.h"
#include "db.h"
#include "json.h"
#include "testutil.h"
#include "wire.h"

static char conninfo[1024];

static PGconn *connect_db(void)
{
	PGconn *c = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	return c;
}

/* A job registered as POST /v1/jobs does (the spec parsed from doc). */
static void job_insert(PGconn *c, const char *doc, struct store_job *job)
{
	struct rv_err err = { 0 };
	RV_CLEANUP_CJSON cJSON *root = cJSON_Parse(doc);
	ck_assert_ptr_nonnull(root);
	struct rv_job_spec spec;
	memset(&spec, 0, sizeof(spec));
	ck_assert_msg(rv_job_spec_from_json(root, &spec, &err) == 0, "%s", err.msg);
	int rc = store_job_insert(c, &spec, doc, job, &err);
	rv_job_spec_release(&spec);
	ck_assert_msg(rc == 0, "%s", err.msg);
}

/* One metrics batch of n speed samples from ts_ms on, stored in its own
 * transaction as the ingest stores a batch (store_metrics_insert: the
 * samples, the per-node summary, the job's last_sample_ms). */
static void batch_commit(PGconn *c, int64_t job_id, int64_t ts_ms, int n)
{
	char doc[2048];
	size_t k = (size_t)snprintf(doc, sizeof(doc), "{\"samples\":[");
	for (int i = 0; i < n; i++)
		k += (size_t)snprintf(doc + k, sizeof(doc) - k,
				      "%s{\"kind\":\"speed\",\"ts\":%" PRId64
				      ",\"speed\":50,\"step\":%d,\"workers\":2,\"ps\":0}",
				      i ? "," : "", ts_ms + i * 1000, i);
	snprintf(doc + k, sizeof(doc) - k, "]}");
	struct rv_err err = { 0 };
	RV_CLEANUP_CJSON cJSON *root = cJSON_Parse(doc);
	ck_assert_ptr_nonnull(root);
	struct rv_metrics_batch b;
	memset(&b, 0, sizeof(b));
	ck_assert_msg(rv_metrics_batch_from_json(root, &b, &err) == 0, "%s", err.msg);
	int accepted = 0;
	int rc = rv_db_begin(c, &err);
	if (rc == 0)
		rc = store_metrics_insert(c, job_id, &b, 10, &accepted, &err);
	if (rc == 0)
		rc = rv_db_commit(c, &err);
	rv_metrics_batch_release(&b);
	ck_assert_msg(rc == 0, "the batch was not stored: %s", err.msg);
	ck_assert_int_eq(accepted, n);
}

static const char job_doc[] =
	"{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"busy\"},\"spec\":{"
	"\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{"
	"\"replicas\":2,\"minReplicas\":1,\"maxReplicas\":4,"
	"\"resources\":{\"cpu\":4,\"memory\":\"8Gi\"}}}}}";

/* A planner pass (the job's lock, its snapshot, what it reads) while a
 * batch of the job commits on another connection, then the pass's writes
 * and commit: every one succeeds, and the pass's planned time is the
 * newest sample its snapshot saw, so the batch is left for the next pass. */
START_TEST(pass_commits_over_a_batch_stored_meanwhile)
{
	ck_assert_int_eq(rv_test_pg_fresh_db(1, conninfo, sizeof(conninfo)), 0);
	RV_CLEANUP_PGCONN PGconn *pass = connect_db();
	RV_CLEANUP_PGCONN PGconn *ingest = connect_db();
	struct store_job job;
	job_insert(ingest, job_doc, &job);
	int64_t ts = 1700000000000LL;
	batch_commit(ingest, job.id, ts, 4);

	struct rv_err err = { 0 };
	ck_assert_int_eq(store_plan_lock(pass, job.id, &err), 1);
	ck_assert_msg(store_begin_snapshot(pass, &err) == 0, "%s", err.msg);
	struct store_job seen;
	ck_assert_msg(store_job_find_id(pass, job.id, &seen, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(seen.last_sample_ms, ts + 3000);
	struct store_plan_row row;
	ck_assert_int_ge(store_plan_latest_row(pass, job.id, NULL, &row, &err), 0);

	/* the next batch arrives while the pass is still reading */
	batch_commit(ingest, job.id, ts + 4000, 4);

	struct rv_scale_plan plan;
	memset(&plan, 0, sizeof(plan));
	snprintf(plan.job, sizeof(plan.job), "%s", job.uid);
	snprintf(plan.stage, sizeof(plan.stage), "running");
	snprintf(plan.algorithm, sizeof(plan.algorithm), "worker_count_model");
	snprintf(plan.reason, sizeof(plan.reason), "a test plan");
	plan.based_on_ts_ms = seen.last_sample_ms;
	int rc = store_plan_insert(pass, job.id, &plan, 0, &err);
	ck_assert_msg(rc == 0, "the plan: %s (%d)", err.msg, rc);
	rc = store_job_set_planned(pass, job.id, seen.last_sample_ms, &err);
	ck_assert_msg(rc == 0, "the planned time failed for the batch: %s (%d)", err.msg, rc);
	rc = rv_db_commit(pass, &err);
	ck_assert_msg(rc == 0, "the pass's commit: %s (%d)", err.msg, rc);
	ck_assert_int_eq(store_plan_unlock(pass, job.id, &err), 0);

	/* what the pass wrote and what the batch wrote are both there */
	RV_CLEANUP_CJSON cJSON *doc = NULL;
	ck_assert_msg(store_job_get_json(ingest, job.uid, &doc, &err) == 0, "%s", err.msg);
	ck_assert_int_eq((int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "planned_ts")),
			 ts + 3000);
	ck_assert_int_eq((int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "last_sample_ts")),
			 ts + 7000);
	ck_assert_int_eq((int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "latest_plan_id")),
			 plan.id);
	/* the batch the pass did not see is still to plan */
	int64_t ids[4];
	ck_assert_int_eq(store_jobs_unplanned(ingest, ids, 4, &err), 1);
	ck_assert_int_eq(ids[0], job.id);
}
END_TEST

/* A job the planner never saw reads planned_ts 0 and is to plan once it
 * has samples; a pass's planned time never goes back. */
START_TEST(planned_time_starts_at_zero_and_never_goes_back)
{
	ck_assert_int_eq(rv_test_pg_fresh_db(1, conninfo, sizeof(conninfo)), 0);
	RV_CLEANUP_PGCONN PGconn *c = connect_db();
	struct store_job job;
	job_insert(c, job_doc, &job);
	struct rv_err err = { 0 };
	int64_t ids[4];
	ck_assert_int_eq(store_jobs_unplanned(c, ids, 4, &err), 0);
	RV_CLEANUP_CJSON cJSON *doc = NULL;
	ck_assert_msg(store_job_get_json(c, job.uid, &doc, &err) == 0, "%s", err.msg);
	ck_assert_int_eq((int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "planned_ts")), 0);
	batch_commit(c, job.id, 5000, 1);
	ck_assert_int_eq(store_jobs_unplanned(c, ids, 4, &err), 1);
	ck_assert_int_eq(store_job_set_planned(c, job.id, 5000, &err), 0);
	ck_assert_int_eq(store_jobs_unplanned(c, ids, 4, &err), 0);
	ck_assert_int_eq(store_job_set_planned(c, job.id, 3000, &err), 0);
	RV_CLEANUP_CJSON cJSON *again = NULL;
	ck_assert_msg(store_job_get_json(c, job.uid, &again, &err) == 0, "%s", err.msg);
	ck_assert_int_eq((int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(again, "planned_ts")),
			 5000);
}
END_TEST

RV_TEST_MAIN_PG_TCASE("brain_store", "planner", 60, pass_commits_over_a_batch_stored_meanwhile,
		      planned_time_starts_at_zero_and_never_goes_back)
