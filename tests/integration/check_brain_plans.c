/*
 * check_brain_plans.c: running-stage plans from the real rover-brain: a job
 * whose speed scales gets more workers, each plan says why, planned_ts tells
 * a client the planner has seen its samples, a model plan whose measured
 * outcome is clearly worse is reverted by a plan that says so, and a slower
 * exploration is kept as data (not reverted) and followed by a smaller config;
 * speeds measured before a CPU doubling are dropped only when the doubling
 * measured faster (the role was really starved); an OOM stored while a
 * planner pass runs waits for the pass, a pass held while metrics batches
 * are stored still stores its plan, a pass that found the job busy is
 * made again, and a running plan older than an oom plan is not served (the
 * oom plan carries its change, as a second OOM's plan carries the first's).
 */
#include <check.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "brainfix.h"
#include "buf.h"
#include "parse.h"
#include "testutil.h"

static char conninfo[1024];
static struct rv_test_brain brain;
static char uid[64];
static int64_t ts = 1700000000000LL;

/* A fresh brain and database, with the job doc registered. */
static void start_job(const char *doc)
{
	ck_assert_int_eq(rv_test_pg_fresh_db(0, conninfo, sizeof(conninfo)), 0);
	const char *args[] = { "--db", conninfo, "--plan-debounce-ms", "0", NULL };
	ck_assert_int_eq(rv_test_brain_start(&brain, args), 0);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/jobs", doc, NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	snprintf(uid, sizeof(uid), "%s", rv_test_json_str(r.json, "uid"));
	ck_assert_str_eq(rv_test_json_str(r.json, "plan.algorithm"), "user_spec");
	rv_test_reply_release(&r);
}

static void start(void)
{
	start_job("{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"scaling\"},\"spec\":{"
		  "\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{"
		  "\"replicas\":2,\"minReplicas\":1,\"maxReplicas\":16,"
		  "\"resources\":{\"cpu\":4,\"memory\":\"8Gi\"}}}}}");
}

static void teardown(void)
{
	rv_test_brain_stop(&brain, SIGTERM, 10);
}

/* Close a metrics batch begun with {"samples":[ and post it. */
static void post_metrics(struct rv_buf *b)
{
	ck_assert_int_eq(rv_test_brain_post_batch(&brain, uid, b), 200);
}

/* n speed samples at w workers and the given speed (1% wobble). */
static void post_speed(int w, double speed, int n)
{
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_puts(&b, "{\"samples\":[");
	for (int i = 0; i < n; i++) {
		ts += 10000;
		rv_buf_printf(&b, "%s{\"kind\":\"speed\",\"ts\":%" PRId64 ",\"speed\":%.3f,\"step\":%d,"
			      "\"workers\":%d,\"ps\":0}", i ? "," : "", ts,
			      speed * (1.0 + 0.01 * ((i % 3) - 1)), i, w);
	}
	post_metrics(&b);
}

/* Wait until the planner has seen our newest sample. */
static void wait_planned(void)
{
	rv_test_brain_expect_planned(&brain, uid, ts, 200);
}

/* Newest running plan after id `after`, or NULL (204). */
static cJSON *running_plan(int64_t after)
{
	return rv_test_brain_expect_running_plan(&brain, uid, after);
}

static void applied(int64_t plan_id)
{
	char path[128], body[160];
	snprintf(path, sizeof(path), "/v1/jobs/%s/events", uid);
	snprintf(body, sizeof(body), "{\"type\":\"plan_applied\",\"ts\":%" PRId64 ",\"plan_id\":%" PRId64 "}",
		 ts + 1, plan_id);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", path, body, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "applied: %ld %s", r.status, r.body);
	rv_test_reply_release(&r);
}

/* True speed of a sync all-reduce job: 1 / (t0/w + t1 + t2*w). */
static double truth(int w)
{
	return 1.0 / (2.0 / w + 0.01 + 0.004 * w);
}

START_TEST(scaling_job_gets_more_workers)
{
	start();
	int w = 2, plans = 0;
	int64_t last = 0;
	for (int round = 0; round < 12; round++) {
		post_speed(w, truth(w) * 100, 8);
		wait_planned();
		cJSON *p = running_plan(last);
		if (!p)
			continue;
		plans++;
		const char *reason = rv_test_json_str(p, "reason");
		ck_assert_msg(reason && strlen(reason) > 10, "plan without a reason");
		ck_assert_int_eq((int)rv_test_json_num(p, "groups.worker.resource.cpu", 0) > 0, 1);
		last = (int64_t)rv_test_json_num(p, "id", 0);
		w = (int)rv_test_json_num(p, "groups.worker.count", w);
		ck_assert(w >= 1 && w <= 16);
		applied(last);
		cJSON_Delete(p);
	}
	/* the optimum of this curve is sqrt(t0/t2) ~ 22 -> capped at 16; with a 5%
	 * marginal-gain threshold the choice lands well above the start */
	ck_assert_msg(w >= 6, "ended at %d workers after %d plans", w, plans);
	ck_assert_msg(plans <= 8, "%d plans: thrashing", plans);
}
END_TEST

START_TEST(worse_plan_is_reverted)
{
	start();
	/* Follow the plans on the scaling curve until the throughput model
	 * (not an exploration) makes one. */
	int w = 2;
	int64_t last = 0, id = 0;
	for (int round = 0; round < 10 && !id; round++) {
		post_speed(w, truth(w) * 100, 8);
		wait_planned();
		cJSON *p = running_plan(last);
		if (!p)
			continue;
		last = (int64_t)rv_test_json_num(p, "id", 0);
		if (!strcmp(rv_test_json_str(p, "algorithm"), "worker_count_model"))
			id = last;
		else
			w = (int)rv_test_json_num(p, "groups.worker.count", w);
		applied(last);
		if (id)
			w = (int)rv_test_json_num(p, "groups.worker.count", w);
		cJSON_Delete(p);
	}
	ck_assert_msg(id > 0, "the throughput model never planned");
	int before = w;
	/* the model's configuration turns out much slower than before */
	post_speed(w, truth(2) * 60, 8);
	wait_planned();
	cJSON *p = running_plan(id);
	ck_assert_msg(p != NULL, "no revert after a worse outcome");
	if (strcmp(rv_test_json_str(p, "algorithm"), "revert") != 0) {
		char hp[128];
		snprintf(hp, sizeof(hp), "/v1/jobs/%s/plans", uid);
		struct rv_test_reply h;
		rv_test_http(&brain, "GET", hp, NULL, NULL, &h);
		fprintf(stderr, "plans: %s\n", h.body);
		rv_test_reply_release(&h);
	}
	ck_assert_str_eq(rv_test_json_str(p, "algorithm"), "revert");
	ck_assert_int_ne((int)rv_test_json_num(p, "groups.worker.count", before), before);
	ck_assert_int_eq((int64_t)rv_test_json_num(p, "reverts_plan_id", 0), id);
	cJSON_Delete(p);
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/plans", uid);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	int n = cJSON_GetArraySize(rv_test_json_at(r.json, "plans"));
	int found = 0;
	for (int i = 0; i < n; i++) {
		const cJSON *pl = cJSON_GetArrayItem(rv_test_json_at(r.json, "plans"), i);
		if ((int64_t)rv_test_json_num(pl, "id", 0) == id) {
			ck_assert_str_eq(rv_test_json_str(pl, "outcome"), "worse");
			ck_assert(rv_test_json_num(pl, "speed_after", 0) < rv_test_json_num(pl, "speed_before", 0));
			found = 1;
		}
	}
	ck_assert(found);
	rv_test_reply_release(&r);
}
END_TEST

/* The job's first running plan once the samples just posted are planned:
 * an exploration (what names it when there is none); its id and worker
 * count into *id and *w.  The caller deletes it. */
static cJSON *first_exploration(const char *what, int64_t *id, int *w)
{
	wait_planned();
	cJSON *p = running_plan(0);
	ck_assert_msg(p != NULL, "no %s", what);
	ck_assert_str_eq(rv_test_json_str(p, "algorithm"), "explore");
	*id = (int64_t)rv_test_json_num(p, "id", 0);
	*w = (int)rv_test_json_num(p, "groups.worker.count", 0);
	return p;
}

START_TEST(slower_exploration_is_kept_as_data)
{
	start();
	post_speed(2, 100, 8);
	int64_t id;
	int w;
	cJSON *p = first_exploration("exploration plan from one configuration", &id, &w);
	ck_assert_int_gt(w, 2);
	cJSON_Delete(p);
	applied(id);
	/* growth made it slower: the exploration is data, not a mistake */
	post_speed(w, 60, 8);
	wait_planned();
	p = running_plan(id);
	ck_assert_msg(p != NULL, "no plan after a slower exploration");
	ck_assert_str_ne(rv_test_json_str(p, "algorithm"), "revert");
	ck_assert_int_lt((int)rv_test_json_num(p, "groups.worker.count", w), w);
	cJSON_Delete(p);
}
END_TEST

/* n speed samples at w workers with each worker's CPU use (1% wobble on
 * both; a use at or above the limit is reported at the limit). */
static void post_speed_usage(int w, double speed, double cpu, double limit, int n)
{
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_puts(&b, "{\"samples\":[");
	for (int i = 0; i < n; i++) {
		ts += 10000;
		double wob = 1.0 + 0.01 * ((i % 3) - 1);
		rv_buf_printf(&b, "%s{\"kind\":\"speed\",\"ts\":%" PRId64 ",\"speed\":%.3f,"
			      "\"step\":%d,\"workers\":%d,\"ps\":0}", i ? "," : "", ts, speed * wob, i, w);
		for (int k = 0; k < w; k++) {
			double c = cpu * wob >= limit ? limit : cpu * wob;
			rv_buf_printf(&b, ",{\"kind\":\"node\",\"ts\":%" PRId64 ",\"node\":\"worker-%d\","
				      "\"role\":\"worker\",\"rank\":%d,\"cpu\":%.2f,\"memory_mb\":4000,"
				      "\"cpu_limit\":%.1f,\"memory_limit_mb\":8192}", ts, k, k, c, limit);
		}
	}
	post_metrics(&b);
}

/*
 * A job explores 2 -> 3 workers (speed 100 -> before), then reads as
 * starved at 3 (CPU pinned) and its CPU doubles; then it runs at `after`.
 * Returns the plan that follows the doubling.
 */
static cJSON *after_starvation(double before, double after)
{
	start();
	post_speed_usage(2, 100, 3.0, 4.0, 8);
	int64_t id;
	int w;
	cJSON *p = first_exploration("plan from the first configuration", &id, &w);
	double cpu = rv_test_json_num(p, "groups.worker.resource.cpu", 0);
	ck_assert_int_eq(w, 3);
	cJSON_Delete(p);
	applied(id);
	post_speed_usage(w, before, cpu * 1.2, cpu, 8);
	wait_planned();
	p = running_plan(id);
	ck_assert_msg(p != NULL, "no plan for a pinned CPU");
	ck_assert_str_eq(rv_test_json_str(p, "algorithm"), "rightsize");
	ck_assert_double_eq_tol(rv_test_json_num(p, "groups.worker.resource.cpu", 0), 2 * cpu, 1e-9);
	ck_assert_int_eq((int)rv_test_json_num(p, "groups.worker.count", 0), w);
	id = (int64_t)rv_test_json_num(p, "id", 0);
	cJSON_Delete(p);
	applied(id);
	post_speed_usage(w, after, cpu * 1.1, 2 * cpu, 8);
	wait_planned();
	p = running_plan(id);
	ck_assert_msg(p != NULL, "no plan after the CPU growth");
	return p;
}

/* The doubling measured no faster: the role only read as starved, so the
 * speeds from before it stand: growth from 2 to 3 workers did not pay
 * (100 -> 103), and the next plan measures below 3 rather than above. */
START_TEST(false_starvation_keeps_history)
{
	cJSON *p = after_starvation(103, 104);
	ck_assert_str_eq(rv_test_json_str(p, "algorithm"), "explore");
	ck_assert_int_lt((int)rv_test_json_num(p, "groups.worker.count", 0), 3);
	cJSON_Delete(p);
}
END_TEST

/* The doubling measured faster: the speeds before it were CPU-bound and are
 * dropped, so the next plan starts over from the one speed measured since
 * (its prediction is that speed, not a blend with the CPU-bound one). */
START_TEST(real_starvation_drops_history)
{
	cJSON *p = after_starvation(103, 150);
	ck_assert_str_eq(rv_test_json_str(p, "algorithm"), "explore");
	ck_assert_int_gt((int)rv_test_json_num(p, "groups.worker.count", 0), 3);
	ck_assert_double_eq_tol(rv_test_json_num(p, "predicted_speed", 0), 150, 150 * 0.03);
	cJSON_Delete(p);
}
END_TEST

/* The monitor reports 2 free cores: not enough for one more 4-core worker.
 * A first measurement explores (up to 3 workers when the cluster has room),
 * so a plan must come: here it cannot grow, and it never asks for more than
 * the free cores on top of what the job holds. */
START_TEST(cluster_free_capacity_caps_plans)
{
	start();
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/cluster/nodes",
				      "{\"nodes\":[{\"name\":\"n1\",\"ts\":1,\"cpu\":16,"
				      "\"memory_mb\":65536,\"cpu_used\":14,\"memory_used_mb\":8192}]}",
				      NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	rv_test_reply_release(&r);
	post_speed_usage(2, truth(2) * 100, 2.0, 4.0, 8);
	wait_planned();
	cJSON *p = running_plan(0);
	ck_assert_msg(p != NULL, "no plan for a job using half its CPU");
	double cpu = rv_test_json_num(p, "groups.worker.resource.cpu", 0);
	int w = (int)rv_test_json_num(p, "groups.worker.count", 0);
	/* without the cap it explores up to 3 workers; here it cannot grow */
	ck_assert_str_eq(rv_test_json_str(p, "algorithm"), "explore");
	ck_assert_int_lt(w, 3);
	ck_assert_double_lt(cpu, 4);
	/* 2 workers x 4 cores now; at most 2 more cores may be asked for */
	ck_assert_msg(w * cpu <= 2 * 4 + 2 + 1e-9, "plan asks %d x %.1f cores with 2 free", w, cpu);
	cJSON_Delete(p);
}
END_TEST

/* Rounds of samples at 2 workers until a running plan comes (up to 4). */
static cJSON *plan_within_rounds(void)
{
	cJSON *p = NULL;
	for (int round = 0; round < 4 && !p; round++) {
		post_speed(2, truth(2) * 100, 8);
		wait_planned();
		p = running_plan(0);
	}
	return p;
}

/* The body of worker-0's node_oom event at job time at (8 GiB limit). */
static void oom_body(char *body, size_t size, int64_t at)
{
	snprintf(body, size,
		 "{\"type\":\"node_oom\",\"ts\":%" PRId64 ",\"node\":\"worker-0\","
		 "\"role\":\"worker\",\"rank\":0,\"exit_code\":137,\"memory_mb\":8192,"
		 "\"peak_memory_mb\":8100}",
		 at);
}

/* POST body to the job's events; the HTTP status, or -1. */
static long post_event(const char *body)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/events", uid);
	struct rv_test_reply r;
	if (rv_test_http(&brain, "POST", path, body, NULL, &r) != 0)
		return -1;
	long status = r.status;
	rv_test_reply_release(&r);
	return status;
}

static void post_oom(int64_t at)
{
	char body[320];
	oom_body(body, sizeof(body), at);
	long st = post_event(body);
	ck_assert_msg(st == 200, "oom: %ld", st);
}

/* The job's newest oom plan: its id, and *mem its worker memory. */
static int64_t oom_plan(double *mem)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/plan?stage=oom", uid);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "oom plan: %ld %s", r.status, r.body);
	int64_t id = (int64_t)rv_test_json_num(r.json, "id", 0);
	*mem = rv_test_json_num(r.json, "groups.worker.resource.memory_mb", 0);
	rv_test_reply_release(&r);
	return id;
}

/* A worker OOMs and the brain makes its oom plan; before the job applies
 * it, a planning pass over the samples from before the OOM makes no running
 * plan (one made from the configuration before would undo the memory the
 * oom plan gave).  Once the oom plan is applied and samples come after it,
 * planning goes on from it. */
START_TEST(oom_plan_not_undone_by_a_running_pass)
{
	start();
	int64_t oom_ts = ts + 200000;
	post_oom(oom_ts);
	/* the samples of the round the OOM ended, a scaling job at 2 workers */
	post_speed(2, truth(2) * 100, 8);
	wait_planned();
	cJSON *p = running_plan(0);
	ck_assert_msg(!p, "a running plan over the unapplied oom plan: %s",
		      p ? rv_test_json_str(p, "reason") : "");
	/* applied, and a round after it: planning goes on, with its memory */
	double mem;
	int64_t oom_id = oom_plan(&mem);
	ck_assert(mem > 8192);
	ts = oom_ts;
	applied(oom_id);
	p = plan_within_rounds();
	ck_assert_msg(p, "no running plan after the oom plan was applied");
	ck_assert_double_eq_tol(rv_test_json_num(p, "groups.worker.resource.memory_mb", 0), mem,
				0.5);
	cJSON_Delete(p);
}
END_TEST

/* A running plan the job has not applied when a node runs out of memory
 * was made from the configuration the OOM ended: served after the oom
 * plan, it would set the memory back.  Neither it nor anything older than
 * the oom plan is served.  Its change is not lost: the oom plan carries it
 * (one restart, not two), with the memory the OOM asks for. */
START_TEST(running_plan_older_than_an_oom_plan_is_not_served)
{
	start();
	cJSON *p = plan_within_rounds();
	ck_assert_msg(p, "no running plan for a scaling job");
	int64_t stale = (int64_t)rv_test_json_num(p, "id", 0);
	double workers = rv_test_json_num(p, "groups.worker.count", 0);
	cJSON_Delete(p);
	ck_assert_msg(workers > 2, "the scaling job's plan keeps %.0f workers", workers);
	post_oom(ts + 5000);
	p = running_plan(0);
	ck_assert_msg(!p, "running plan %" PRId64 " from before the OOM still served: %s", stale,
		      p ? rv_test_json_str(p, "reason") : "");
	double mem;
	int64_t oom_id = oom_plan(&mem);
	ck_assert(oom_id > stale && mem > 8192);
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/plan?stage=oom", uid);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	ck_assert_msg(rv_test_json_num(r.json, "groups.worker.count", 0) == workers,
		      "the oom plan dropped plan %" PRId64 "'s %.0f workers: %s", stale, workers,
		      r.body);
	ck_assert_msg(strstr(rv_test_json_str(r.json, "reason"), "not applied yet"),
		      "the oom plan does not say it carries plan %" PRId64 ": %s", stale, r.body);
	rv_test_reply_release(&r);
}
END_TEST

/* A PS job whose worker and PS both run out of memory at start: the PS's
 * OOM comes before the job applied the worker's oom plan.  The job takes
 * only the newest plan, so the PS's oom plan keeps the worker's memory. */
START_TEST(second_oom_keeps_the_first_oom_plan)
{
	start_job("{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"two-ooms\"},\"spec\":{"
		  "\"distributionStrategy\":\"ParameterServerStrategy\",\"replicaSpecs\":{"
		  "\"worker\":{\"replicas\":4,\"resources\":{\"cpu\":4,\"memory\":\"8Gi\"}},"
		  "\"ps\":{\"replicas\":2,\"resources\":{\"cpu\":2,\"memory\":\"2Gi\"}}}}}");
	struct rv_test_reply r;
	post_oom(ts + 1000);
	double wmem;
	int64_t first = oom_plan(&wmem);
	ck_assert(wmem > 8192);
	char body[320];
	snprintf(body, sizeof(body),
		 "{\"type\":\"node_oom\",\"ts\":%" PRId64 ",\"node\":\"ps-0\","
		 "\"role\":\"ps\",\"rank\":0,\"exit_code\":137,\"memory_mb\":2048,"
		 "\"peak_memory_mb\":2000}",
		 ts + 2000);
	ck_assert_int_eq(post_event(body), 200);
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/plan?stage=oom", uid);
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert((int64_t)rv_test_json_num(r.json, "id", 0) > first);
	ck_assert_msg(rv_test_json_num(r.json, "groups.ps.resource.memory_mb", 0) > 2048,
		      "the PS's oom plan does not raise its memory: %s", r.body);
	ck_assert_msg(rv_test_json_num(r.json, "groups.worker.resource.memory_mb", 0) == wmem,
		      "the PS's oom plan sets the worker memory back from %.0f MiB: %s", wmem,
		      r.body);
	rv_test_reply_release(&r);
}
END_TEST

/* An oom event posted from another thread; done says it was answered. */
struct oom_post {
	char body[320];
	long status;
	volatile int done;
};

static void *post_oom_thread(void *arg)
{
	struct oom_post *o = arg;
	o->status = post_event(o->body);
	o->done = 1;
	return NULL;
}

static void sleep_ms(int ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&t, NULL);
}

/* A planner pass in progress is the job's advisory lock held by another
 * session (here the test's).  The pass's snapshot predates the OOM, so a
 * plan it stored would be made from the configuration the OOM ended: the
 * OOM must wait for the pass to end.  The samples that came while the lock
 * was held must still be planned once it is free, with no new batch. */
START_TEST(oom_waits_for_a_pass_in_progress)
{
	start();
	PGconn *pg = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(pg) == CONNECTION_OK, "%s", PQerrorMessage(pg));
	const char *p1[] = { uid };
	PGresult *r =
		PQexecParams(pg, "SELECT pg_advisory_lock(7411, id::int) FROM jobs WHERE uid = $1",
			     1, NULL, p1, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1, "%s",
		      PQerrorMessage(pg));
	PQclear(r);
	post_speed(2, truth(2) * 100, 8);
	struct oom_post o = { .status = 0 };
	oom_body(o.body, sizeof(o.body), ts + 1);
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, post_oom_thread, &o), 0);
	sleep_ms(800);
	int answered_while_held = o.done;
	r = PQexec(pg, "SELECT pg_advisory_unlock_all()");
	PQclear(r);
	pthread_join(th, NULL);
	PQfinish(pg);
	ck_assert_msg(!answered_while_held, "the oom event was stored inside a planner pass");
	ck_assert_msg(o.status == 200, "oom: %ld", o.status);
	/* the pass the held lock skipped is made again */
	wait_planned();
	cJSON *p = running_plan(0);
	ck_assert_msg(!p, "a running plan over the unapplied oom plan: %s",
		      p ? rv_test_json_str(p, "reason") : "");
}
END_TEST

#define FAILED_SERIALIZATION "rover_brain_plan_passes_failed_total{reason=\"serialization\"}"

/* Hold scale_plans (ACCESS EXCLUSIVE) on a connection of the test's own:
 * a planner pass that starts then takes its snapshot (the job's row) and
 * waits at its first read of the plans, as a slow pass would. */
static PGconn *hold_plans(void)
{
	PGconn *pg = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(pg) == CONNECTION_OK, "%s", PQerrorMessage(pg));
	PGresult *r = PQexec(pg, "BEGIN; LOCK TABLE scale_plans IN ACCESS EXCLUSIVE MODE");
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(pg));
	PQclear(r);
	return pg;
}

/* Wait (up to 5 s) until another session waits for the held scale_plans:
 * the pass is inside its snapshot. */
static void wait_pass_held(PGconn *pg)
{
	int64_t until = rv_mono_ms() + 5000;
	int waiting = 0;
	while (!waiting && rv_mono_ms() < until) {
		PGresult *r = PQexec(pg, "SELECT count(*) FROM pg_locks WHERE NOT granted"
					 " AND relation = 'scale_plans'::regclass");
		ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQerrorMessage(pg));
		waiting = atoi(PQgetvalue(r, 0, 0)) > 0;
		PQclear(r);
		if (!waiting)
			sleep_ms(20);
	}
	ck_assert_msg(waiting, "no planner pass waited for the plans");
}

static void release_plans(PGconn *pg)
{
	PGresult *r = PQexec(pg, "COMMIT");
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(pg));
	PQclear(r);
	PQfinish(pg);
}

/* A job planned once, then a pass held at its first read of the plans
 * after another batch: the connection that holds it (release_plans); the
 * time of that batch into *seen. */
static PGconn *pass_held(int64_t *seen)
{
	start();
	post_speed(2, truth(2) * 100, 8);
	wait_planned();
	PGconn *pg = hold_plans();
	post_speed(2, truth(2) * 100, 8);
	*seen = ts;
	wait_pass_held(pg);
	return pg;
}

/* A pass slower than the gap between the job's metrics batches (here
 * held at its first read of the plans while two batches are stored) must
 * still store what it planned: the batches update the job's row, the pass
 * must not fail for it.  Its successor plans the batches it did not see. */
START_TEST(pass_survives_batches_stored_meanwhile)
{
	int64_t seen;
	PGconn *pg = pass_held(&seen);
	post_speed(2, truth(2) * 100, 8);
	post_speed(2, truth(2) * 100, 8);
	release_plans(pg);
	int rc = rv_test_brain_wait_planned(&brain, uid, seen, 200);
	ck_assert_msg(rc == 0, "the held pass stored nothing: %s", strerror(-rc));
	wait_planned();
	char *log = rv_test_read_file(brain.log);
	const char *line = log ? strstr(log, "could not plan job") : NULL;
	ck_assert_msg(!line, "a pass failed: %.*s", line ? (int)strcspn(line, "\n") : 0, line);
	free(log);
	long long failed = rv_test_brain_metric(&brain, FAILED_SERIALIZATION);
	ck_assert_msg(failed == 0, "%s is %lld", FAILED_SERIALIZATION, failed);
	ck_assert_int_eq(rv_test_brain_metric(
				 &brain, "rover_brain_plan_passes_failed_total{reason=\"other\"}"),
			 0);
}
END_TEST

/* A pass that loses a serialization race all the same (here the test
 * updates the job's planned row, which only passes write, while the pass
 * is held in its snapshot) is counted and made again within a second, not
 * at the timer pass (30 s). */
START_TEST(pass_after_a_serialization_failure_is_retried)
{
	int64_t seen;
	PGconn *pg = pass_held(&seen);
	const char *p1[] = { uid };
	PGresult *r = PQexecParams(pg,
				   "UPDATE job_planned SET planned_ts_ms = planned_ts_ms"
				   " WHERE job_id = (SELECT id FROM jobs WHERE uid = $1)",
				   1, NULL, p1, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK && !strcmp(PQcmdTuples(r), "1"), "%s",
		      PQerrorMessage(pg));
	PQclear(r);
	release_plans(pg);
	int rc = rv_test_brain_wait_planned(&brain, uid, seen, 50);
	ck_assert_msg(rc == 0, "the pass that failed was not made again within a second");
	ck_assert_int_eq(rv_test_brain_metric(&brain, FAILED_SERIALIZATION), 1);
}
END_TEST

/* The plan history's entry of plan id (a new reference: cJSON_Delete it),
 * or NULL. */
static cJSON *history_entry(int64_t id)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/plans", uid);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	cJSON *found = NULL, *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(r.json, "plans")) if (rv_test_json_num(it, "id",
											  0) ==
									 (double)id)
		found = cJSON_Duplicate(it, 1);
	rv_test_reply_release(&r);
	return found;
}

/* A plan the master applied in part is recorded applied, with what was
 * not applied; one applied in full says so with "". */
START_TEST(partly_applied_plan_is_recorded)
{
	start();
	cJSON *p = NULL;
	int w = 2;
	for (int round = 0; round < 12 && !p; round++) {
		post_speed(w, truth(w) * 100, 8);
		wait_planned();
		p = running_plan(0);
	}
	ck_assert_msg(p, "no running plan");
	int64_t id = (int64_t)rv_test_json_num(p, "id", 0);
	cJSON_Delete(p);
	cJSON *h = history_entry(id);
	ck_assert_ptr_nonnull(h);
	ck_assert_str_eq(rv_test_json_str(h, "not_applied"), "");
	cJSON_Delete(h);
	char body[400];
	snprintf(body, sizeof(body),
		 "{\"type\":\"plan_applied\",\"ts\":%" PRId64 ",\"plan_id\":%" PRId64
		 ",\"not_applied\":\"migrate ps-1: the PS data handover\"}",
		 ts + 1, id);
	ck_assert_int_eq(post_event(body), 200);
	h = history_entry(id);
	ck_assert_ptr_nonnull(h);
	ck_assert_msg(cJSON_IsString(cJSON_GetObjectItem(h, "applied_at")), "not applied: %s",
		      cJSON_PrintUnformatted(h));
	ck_assert_str_eq(rv_test_json_str(h, "not_applied"), "migrate ps-1: the PS data handover");
	cJSON_Delete(h);
}
END_TEST

RV_TEST_MAIN_PG_FIXTURE_TCASE(
	"brain_plans", NULL, teardown, "running", 90, scaling_job_gets_more_workers,
	worse_plan_is_reverted, slower_exploration_is_kept_as_data,
	cluster_free_capacity_caps_plans, false_starvation_keeps_history,
	real_starvation_drops_history, oom_plan_not_undone_by_a_running_pass,
	oom_waits_for_a_pass_in_progress, running_plan_older_than_an_oom_plan_is_not_served,
	second_oom_keeps_the_first_oom_plan, pass_survives_batches_stored_meanwhile,
	pass_after_a_serialization_failure_is_retried, partly_applied_plan_is_recorded)
