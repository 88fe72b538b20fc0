/*
 * api_plans.c: serve plans.  GET .../plan returns the latest plan of a stage;
 * with after=ID it only returns a newer one and with wait=S it long-polls:
 * it sleeps on the brain's plan condition variable (woken when this brain
 * stores a plan) and re-queries PostgreSQL at least every 250 ms, so plans
 * stored by another brain on the same database are seen too.  No database
 * connection is held while waiting.  Runs on connection threads.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "brain.h"
#include "parse.h"

static void wait_for_plan(struct brain *b, uint64_t seen, int64_t until_ms)
{
	int64_t now = rv_mono_ms();
	int64_t slice = until_ms - now < 250 ? until_ms - now : 250;
	if (slice <= 0)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += slice / 1000;
	ts.tv_nsec += (slice % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&b->plan_mu);
	while (b->plan_seq == seen && !b->planner_stop) {
		if (pthread_cond_timedwait(&b->plan_cv, &b->plan_mu, &ts) != 0)
			break;
	}
	pthread_mutex_unlock(&b->plan_mu);
}

int api_plan_get(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	const char *stage = rv_http_query(req, "stage");
	if (stage && strcmp(stage, "create") != 0 && strcmp(stage, "running") != 0 &&
	    strcmp(stage, "oom") != 0) {
		rv_http_resp_error_text(resp, 400, "invalid_argument",
					"stage must be create, running or oom", "stage");
		return 0;
	}
	int64_t after = 0, wait = 0;
	if (api_query_int(req, resp, "after", 0, INT64_MAX / 2, &after) < 0 ||
	    api_query_int(req, resp, "wait", 0, b->cfg.max_wait_s, &wait) < 0)
		return 0;
	bool have_after = rv_http_query(req, "after") != NULL;
	int64_t until = rv_mono_ms() + wait * 1000;
	int64_t job_id = 0;
	for (;;) {
		pthread_mutex_lock(&b->plan_mu);
		uint64_t seen = b->plan_seq;
		pthread_mutex_unlock(&b->plan_mu);
		PGconn *c = api_db(b, resp);
		if (!c)
			return 0;
		char *text = NULL;
		int rc = store_plan_latest_text(c, req->params[0], stage, after, &text, &job_id, &err);
		rv_db_release(b->db, c);
		if (rc < 0)
			return api_fail(b, resp, rc, &err);
		if (text) {
			rv_http_resp_json(resp, 200, text);
			return 0;
		}
		if (rv_mono_ms() >= until)
			break;
		wait_for_plan(b, seen, until);
		if (b->planner_stop)
			break;
	}
	if (have_after) {
		resp->status = 204;
		return 0;
	}
	char detail[160];
	snprintf(detail, sizeof(detail), "job %s has no %s plan yet", req->params[0],
		 stage ? stage : "");
	rv_http_resp_error_text(resp, 404, "not_found", detail, "stage");
	return 0;
}

int api_plans_list(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	int64_t limit = 100;
	if (api_query_int(req, resp, "limit", 1, 1000, &limit) < 0)
		return 0;
	PGconn *c = api_db(b, resp);
	if (!c)
		return 0;
	struct store_job job = { 0 };
	cJSON *doc = NULL;
	int rc = store_job_find(c, req->params[0], &job, &err);
	if (rc == 0)
		rc = store_plan_history_json(c, job.id, (int)limit, &doc, &err);
	rv_db_release(b->db, c);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	cJSON_AddStringToObject(doc, "job", job.uid);
	return rv_rest_reply(resp, 200, doc);
}

int api_events_list(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	int64_t limit = 100;
	if (api_query_int(req, resp, "limit", 1, 1000, &limit) < 0)
		return 0;
	PGconn *c = api_db(b, resp);
	if (!c)
		return 0;
	struct store_job job = { 0 };
	cJSON *doc = NULL;
	int rc = store_job_find(c, req->params[0], &job, &err);
	if (rc == 0)
		rc = store_events_json(c, job.id, (int)limit, &doc, &err);
	rv_db_release(b->db, c);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	cJSON_AddStringToObject(doc, "job", job.uid);
	return rv_rest_reply(resp, 200, doc);
}
