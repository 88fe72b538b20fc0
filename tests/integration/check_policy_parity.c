/*
 * check_policy_parity.c: the brain plans with the algorithms library and
 * nothing else.  A job's history (speed and usage samples, plan_applied
 * events) goes to a real rover-brain over REST; the same history, kept in
 * memory, goes to the algorithms directly (rv_alg_plan_step, as a master in
 * single-job mode calls it).  After every batch both must agree: a plan or
 * none, and the plan's algorithm, counts and resources, a judged outcome,
 * a revert and what it reverts.  The create stage is compared the same way.
 */
#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "brainfix.h"
#include "buf.h"
#include "rover_alg.h"
#include "testutil.h"

#define MAX_OBS   2000
#define MAX_USAGE 16000
#define MAX_PLANS 32

static char conninfo[1024];
static struct rv_test_brain brain;
static char uid[64];
static int64_t ts = 1700000000000LL;

/* The history as the test keeps it, newest plan first. */
static struct rv_alg_applied applied[MAX_PLANS];
static char algs[MAX_PLANS][64];
static size_t napplied;
static struct rv_alg_speed_obs obs[MAX_OBS];
static size_t nobs;
static struct rv_alg_usage usage[MAX_USAGE];
static struct rv_alg_step steps[MAX_USAGE];
static size_t nusage, nsteps;
static struct rv_alg_params P;

static void params(void)
{
	rv_alg_params_default(&P);
	/* as the brain sets them from its plan.min_samples (default 3) */
	P.min_usage_samples = 3;
	P.min_outcome_samples = 3;
}

static struct rv_alg_limits limits(void)
{
	/* the spec's 1..16 workers; the brain's default node ceilings; no
	 * cluster report, so free capacity is unknown */
	return (struct rv_alg_limits){
		.min_workers = 1,
		.max_workers = 16,
		.node_unit = 1,
		.max_cpu = P.node_cpu_default,
		.max_memory_mb = P.node_memory_mb_default,
		.free_cpu = -1,
		.free_memory_mb = -1,
	};
}

static void teardown(void)
{
	rv_test_brain_stop(&brain, SIGTERM, 10);
}

static cJSON *post_job(const char *doc)
{
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/jobs", doc, NULL, &r), 0);
	ck_assert_msg(r.status == 201, "register: %ld %s", r.status, r.body);
	cJSON *j = r.json;
	r.json = NULL;
	rv_test_reply_release(&r);
	return j;
}

static struct rv_alg_config config_of(const cJSON *plan)
{
	struct rv_alg_config c = { 0 };
	c.worker.count = (int)rv_test_json_num(plan, "groups.worker.count", -1);
	c.worker.res.cpu = rv_test_json_num(plan, "groups.worker.resource.cpu", -1);
	c.worker.res.memory_mb =
		(int64_t)rv_test_json_num(plan, "groups.worker.resource.memory_mb", -1);
	return c;
}

static void assert_same_config(const cJSON *plan, const struct rv_alg_decision *d)
{
	struct rv_alg_config c = config_of(plan);
	ck_assert_str_eq(rv_test_json_str(plan, "algorithm"), rv_alg_id_name(d->algorithm));
	ck_assert_int_eq(c.worker.count, d->cfg.worker.count);
	ck_assert_double_eq_tol(c.worker.res.cpu, d->cfg.worker.res.cpu, 1e-9);
	ck_assert_int_eq(c.worker.res.memory_mb, d->cfg.worker.res.memory_mb);
	ck_assert_int_eq(cJSON_GetArraySize(rv_test_json_at(plan, "migrate")), (int)d->n_migrate);
	ck_assert_int_eq(cJSON_GetArraySize(rv_test_json_at(plan, "remove")), (int)d->n_replace);
}

/* A batch of n speed samples at the current configuration (each batch
 * starts a run: its first samples are warm-up), with each worker's usage
 * and step time; kept in memory as the brain stores it. */
static void post_batch(double speed, int n)
{
	const struct rv_alg_config *cur = &applied[0].cfg;
	/* only the first batch after a change starts with warm-up */
	static int64_t warmed_plan = -1;
	bool fresh = warmed_plan != applied[0].id;
	warmed_plan = applied[0].id;
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_puts(&b, "{\"samples\":[");
	for (int i = 0; i < n; i++) {
		ts += 10000;
		/* the first samples after a change are warm-up: slow */
		double s = speed * (1.0 + 0.01 * ((i % 3) - 1)) * (fresh && i < 3 ? 0.5 : 1);
		rv_buf_printf(&b,
			      "%s{\"kind\":\"speed\",\"ts\":%" PRId64 ",\"speed\":%.3f,"
			      "\"step\":%d,\"workers\":%d,\"ps\":0}",
			      i ? "," : "", ts, s, i, cur->worker.count);
		ck_assert_uint_lt(nobs, MAX_OBS);
		obs[nobs++] = (struct rv_alg_speed_obs){
			.workers = cur->worker.count,
			.ps = 0,
			.speed = s,
			.t_ms = ts,
		};
		for (int k = 0; k < cur->worker.count; k++) {
			double cpu = 2.5 + 0.05 * ((i + k) % 3);
			double st = 0.5 + 0.01 * (k % 2);
			rv_buf_printf(
				&b,
				",{\"kind\":\"node\",\"ts\":%" PRId64 ",\"node\":\"worker-%d\","
				"\"role\":\"worker\",\"rank\":%d,\"cpu\":%.2f,\"memory_mb\":4000,"
				"\"cpu_limit\":%.1f,\"memory_limit_mb\":%" PRId64 ","
				"\"step_time\":%.2f}",
				ts, k, k, cpu, cur->worker.res.cpu, cur->worker.res.memory_mb, st);
			ck_assert_uint_lt(nusage, MAX_USAGE);
			usage[nusage++] = (struct rv_alg_usage){
				.role = RV_ALG_WORKER,
				.node = k,
				.t_ms = ts,
				.cpu = cpu,
				.memory_mb = 4000,
			};
			steps[nsteps++] =
				(struct rv_alg_step){ .node = k, .t_ms = ts, .step_s = st };
		}
	}
	ck_assert_int_eq(rv_test_brain_post_batch(&brain, uid, &b), 200);
}

static void wait_planned(void)
{
	rv_test_brain_expect_planned(&brain, uid, ts, 300);
}

static cJSON *running_plan(int64_t after)
{
	return rv_test_brain_expect_running_plan(&brain, uid, after);
}

/* The outcome the brain recorded for a plan. */
static const char *brain_outcome(int64_t id, char *buf, size_t size)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/plans", uid);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	const cJSON *plans = rv_test_json_at(r.json, "plans");
	buf[0] = 0;
	for (int i = 0; i < cJSON_GetArraySize(plans); i++) {
		const cJSON *pl = cJSON_GetArrayItem(plans, i);
		if ((int64_t)rv_test_json_num(pl, "id", 0) == id)
			snprintf(buf, size, "%s", rv_test_json_str(pl, "outcome"));
	}
	rv_test_reply_release(&r);
	return buf;
}

/* Tell the brain a plan was applied and put it first in our history. */
static void apply(const cJSON *plan, enum rv_alg_stage stage, int64_t applied_ts)
{
	int64_t id = (int64_t)rv_test_json_num(plan, "id", 0);
	if (applied_ts > 0) {
		char path[128], body[160];
		snprintf(path, sizeof(path), "/v1/jobs/%s/events", uid);
		snprintf(body, sizeof(body),
			 "{\"type\":\"plan_applied\",\"ts\":%" PRId64 ",\"plan_id\":%" PRId64 "}",
			 applied_ts, id);
		struct rv_test_reply r;
		ck_assert_int_eq(rv_test_http(&brain, "POST", path, body, NULL, &r), 0);
		ck_assert_msg(r.status == 200, "applied: %ld %s", r.status, r.body);
		rv_test_reply_release(&r);
	}
	ck_assert_uint_lt(napplied, MAX_PLANS);
	memmove(&applied[1], &applied[0], napplied * sizeof(applied[0]));
	memmove(&algs[1], &algs[0], napplied * sizeof(algs[0]));
	napplied++;
	snprintf(algs[0], sizeof(algs[0]), "%s", rv_test_json_str(plan, "algorithm"));
	applied[0] = (struct rv_alg_applied){
		.id = id,
		.stage = stage,
		.outcome = RV_ALG_OUTCOME_PENDING,
		.applied_ts_ms = applied_ts,
		.based_on_ts_ms = (int64_t)rv_test_json_num(plan, "based_on_ts", 0),
		.predicted_speed = rv_test_json_num(plan, "predicted_speed", 0),
		.cfg = config_of(plan),
		.n_migrate = cJSON_GetArraySize(rv_test_json_at(plan, "migrate")),
		.n_replace = cJSON_GetArraySize(rv_test_json_at(plan, "remove")),
	};
	for (size_t i = 0; i < napplied; i++)
		applied[i].algorithm = algs[i];
}

/* The algorithms' step over the history in memory. */
static int local_step(struct rv_alg_verdict *v, struct rv_alg_decision *d)
{
	struct rv_alg_job_history h = {
		.strategy = RV_ALG_ALLREDUCE,
		.lim = limits(),
		.now_ms = ts,
		.applied = applied,
		.n_applied = napplied,
		.speed = obs,
		.n_speed = nobs,
	};
	/* usage and steps from where the brain reads them */
	static struct rv_alg_usage u[MAX_USAGE];
	static struct rv_alg_step s[MAX_USAGE];
	int64_t since = rv_alg_usage_since(&h, &P);
	int64_t steps_since = rv_alg_steps_since(&h, &P);
	size_t nu = 0, ns = 0;
	for (size_t i = 0; i < nusage; i++)
		if (usage[i].t_ms >= since)
			u[nu++] = usage[i];
	for (size_t i = 0; i < nsteps; i++)
		if (steps[i].t_ms >= steps_since)
			s[ns++] = steps[i];
	h.usage = u;
	h.n_usage = nu;
	h.steps = s;
	h.n_steps = ns;
	return rv_alg_plan_step(&h, &P, v, d);
}

/* True speed of a sync all-reduce job: 1 / (t0/w + t1 + t2*w). */
static double truth(int w)
{
	return 100.0 / (2.0 / w + 0.01 + 0.004 * w);
}

static void start(void)
{
	params();
	ck_assert_int_eq(rv_test_pg_fresh_db(0, conninfo, sizeof(conninfo)), 0);
	const char *args[] = { "--db", conninfo, "--plan-debounce-ms", "0", NULL };
	ck_assert_int_eq(rv_test_brain_start(&brain, args), 0);
}

START_TEST(create_plans_match)
{
	start();
	struct rv_alg_limits lim = limits();
	struct rv_alg_decision d;
	/* every role gave resources: kept as asked */
	cJSON *j = post_job("{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"given\"},\"spec\":{"
			    "\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{"
			    "\"worker\":{\"replicas\":2,\"minReplicas\":1,\"maxReplicas\":16,"
			    "\"resources\":{\"cpu\":4,\"memory\":\"8Gi\"}}}}}");
	struct rv_alg_job_features f = { .strategy = RV_ALG_ALLREDUCE, .name = "given" };
	struct rv_alg_ask ask = {
		.worker_given = true,
		.cfg = { .worker = { .count = 2, .res = { .cpu = 4, .memory_mb = 8192 } } },
	};
	ck_assert_int_eq(rv_alg_plan_create_job(&f, &ask, NULL, 0, &lim, &P, &d), 0);
	assert_same_config(rv_test_json_at(j, "plan"), &d);
	cJSON_Delete(j);
	/* none gave resources: sized from the model alone (no finished jobs) */
	j = post_job("{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"auto\"},\"spec\":{"
		     "\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{"
		     "\"worker\":{\"replicas\":2,\"minReplicas\":1,\"maxReplicas\":16}},"
		     "\"model\":{\"parameters\":350000000,\"batchSize\":64}}}");
	f = (struct rv_alg_job_features){ .strategy = RV_ALG_ALLREDUCE,
					  .parameters = 350000000,
					  .batch_size = 64,
					  .name = "auto" };
	ask = (struct rv_alg_ask){ .cfg = { .worker = { .count = 2 } } };
	ck_assert_int_eq(rv_alg_plan_create_job(&f, &ask, NULL, 0, &lim, &P, &d), 0);
	ck_assert_str_ne(rv_alg_id_name(d.algorithm), "user_spec");
	assert_same_config(rv_test_json_at(j, "plan"), &d);
	cJSON_Delete(j);
}
END_TEST

START_TEST(running_plans_match)
{
	start();
	cJSON *j = post_job("{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"parity\"},\"spec\":{"
			    "\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{"
			    "\"worker\":{\"replicas\":2,\"minReplicas\":1,\"maxReplicas\":16,"
			    "\"resources\":{\"cpu\":4,\"memory\":\"8Gi\"}}}}}");
	snprintf(uid, sizeof(uid), "%s", rv_test_json_str(j, "uid"));
	napplied = nobs = nusage = nsteps = 0;
	/* the create plan counts as applied from the start */
	apply(rv_test_json_at(j, "plan"), RV_ALG_STAGE_CREATE, 0);
	cJSON_Delete(j);

	int64_t last = 0;
	int plans = 0, judged = 0, model = 0, reverted = 0;
	for (int round = 0; round < 14 && !reverted; round++) {
		/* on the curve, until the model's plan runs: then much slower */
		bool slow = model && applied[0].stage == RV_ALG_STAGE_RUNNING &&
			    !strcmp(applied[0].algorithm, "worker_count_model");
		post_batch(slow ? truth(2) * 0.6 : truth(applied[0].cfg.worker.count), 8);
		wait_planned();
		cJSON *p = running_plan(last);
		struct rv_alg_verdict v;
		struct rv_alg_decision d;
		int rc = local_step(&v, &d);
		ck_assert_int_ge(rc, 0);
		if (v.outcome != RV_ALG_OUTCOME_PENDING) {
			char buf[32];
			ck_assert_str_eq(brain_outcome(applied[0].id, buf, sizeof(buf)),
					 rv_alg_outcome_name(v.outcome));
			applied[0].outcome = v.outcome;
			judged++;
		}
		ck_assert_msg((p != NULL) == (rc == 1),
			      "round %d: brain %s a plan, algorithms %s (%s)", round,
			      p ? "made" : "made no", rc == 1 ? "one" : "none", d.reason);
		if (!p)
			continue;
		plans++;
		assert_same_config(p, &d);
		if (d.algorithm == RV_ALG_ID_REVERT) {
			ck_assert_int_eq((int64_t)rv_test_json_num(p, "reverts_plan_id", 0),
					 applied[0].id);
			reverted = 1;
		}
		if (d.algorithm == RV_ALG_ID_WORKER_COUNT_MODEL)
			model = 1;
		last = (int64_t)rv_test_json_num(p, "id", 0);
		apply(p, RV_ALG_STAGE_RUNNING, ts + 1);
		cJSON_Delete(p);
	}
	/* the history went through exploration, the model, judged outcomes and
	 * a revert: every part of the policy was compared */
	ck_assert_int_ge(plans, 3);
	ck_assert_int_ge(judged, 2);
	ck_assert_msg(model, "the throughput model never planned");
	ck_assert_msg(reverted, "the worse model plan was never reverted");
}
END_TEST

static Suite *parity_suite(void)
{
	gsl_set_error_handler_off();
	TCase *tc = RV_TEST_TCASE("parity", 120, create_plans_match, running_plans_match);
	tcase_add_checked_fixture(tc, NULL, teardown);
	return RV_TEST_SUITE("policy_parity", tc);
}

RV_TEST_MAIN_PG(parity_suite)
