/*
 * api_jobs.c: register, list and get jobs.  Registration stores the job and
 * its create-stage plan in one transaction, so a job never exists without
 * its first plan.  Runs on libmicrohttpd's connection threads.
 */
#include <stdio.h>
#include <string.h>

#include "brain.h"
#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "parse.h"

int api_jobs_create(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_job_spec spec;
	memset(&spec, 0, sizeof(spec));
	int rc = rv_job_spec_from_json(doc, &spec, &err);
	if (rc < 0) {
		cJSON_Delete(doc);
		return api_fail(b, resp, rc, &err);
	}
	RV_CLEANUP_FREE char *spec_json = rv_json_print(doc);
	cJSON_Delete(doc);
	PGconn *c = api_db(b, resp);
	if (!c || !spec_json) {
		rv_job_spec_release(&spec);
		rv_db_release(b->db, c);
		return c ? -ENOMEM : 0;
	}
	struct store_job job = { 0 };
	struct rv_scale_plan plan;
	memset(&plan, 0, sizeof(plan));
	rc = rv_db_begin(c, &err);
	if (rc == 0)
		rc = store_quota_check(c, spec.namespace_, store_spec_nodes(&spec),
				       b->cfg.quota_jobs, b->cfg.quota_nodes, &err);
	if (rc == 0)
		rc = store_job_insert(c, &spec, spec_json, &job, &err);
	if (rc == 0)
		rc = planner_create_plan(b, c, &job, &spec, &plan, &err);
	if (rc == 0)
		rc = store_plan_insert(c, job.id, &plan, 0, &err);
	if (rc == 0)
		rc = rv_db_commit(c, &err);
	else
		rv_db_rollback(c);
	rv_job_spec_release(&spec);
	if (rc < 0) {
		rv_db_release(b->db, c);
		return api_fail(b, resp, rc, &err);
	}
	atomic_fetch_add(&b->plans_stored, 1);
	planner_notify(b);
	cJSON *job_doc = NULL, *plan_doc = NULL;
	rc = store_job_get_json(c, job.uid, &job_doc, &err);
	if (rc == 0)
		rc = store_plan_latest_json(c, job.id, "create", 0, &plan_doc, &err);
	rv_db_release(b->db, c);
	if (rc < 0) {
		cJSON_Delete(job_doc);
		return api_fail(b, resp, rc, &err);
	}
	char qn[160];
	rv_log_info("job registered", "job=%s name=%s namespace=%s plan=%lld", job.uid,
		    rv_log_q(qn, sizeof(qn), job.name), job.namespace_, (long long)plan.id);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "uid", job.uid);
	cJSON_AddItemToObject(out, "job", job_doc);
	cJSON_AddItemToObject(out, "plan", plan_doc ? plan_doc : cJSON_CreateNull());
	return rv_rest_reply(resp, 201, out);
}

int api_query_int(const struct rv_http_req *req, struct rv_http_resp *resp, const char *key,
		  int64_t min, int64_t max, int64_t *out)
{
	const char *v = rv_http_query(req, key);
	if (!v)
		return 0;
	if (rv_parse_i64(v, min, max, out) < 0) {
		char detail[160];
		snprintf(detail, sizeof(detail), "%s must be an integer between %lld and %lld", key,
			 (long long)min, (long long)max);
		rv_http_resp_error_text(resp, 400, "invalid_argument", detail, key);
		return -EINVAL;
	}
	return 1;
}

int api_jobs_list(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	int64_t limit = 100, offset = 0;
	if (api_query_int(req, resp, "limit", 1, 1000, &limit) < 0 ||
	    api_query_int(req, resp, "offset", 0, 1000000000, &offset) < 0)
		return 0;
	const char *status = rv_http_query(req, "status");
	if (status && strcmp(status, "running") != 0 && strcmp(status, "finished") != 0 &&
	    strcmp(status, "failed") != 0) {
		rv_http_resp_error_text(resp, 400, "invalid_argument",
					"status must be running, finished or failed", "status");
		return 0;
	}
	const char *ns;
	int qrc = rv_http_query_name(req, "namespace", RV_NAME_MAX - 1, false, &ns, &err);
	if (qrc < 0)
		return api_fail(b, resp, qrc, &err);
	PGconn *c = api_db(b, resp);
	if (!c)
		return 0;
	cJSON *doc = NULL;
	int rc = store_job_list_json(c, ns, status, (int)limit, (int)offset, &doc, &err);
	rv_db_release(b->db, c);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	return rv_rest_reply(resp, 200, doc);
}

int api_jobs_get(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	PGconn *c = api_db(b, resp);
	if (!c)
		return 0;
	cJSON *doc = NULL;
	int rc = store_job_get_json(c, req->params[0], &doc, &err);
	rv_db_release(b->db, c);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	return rv_rest_reply(resp, 200, doc);
}

/* GET /v1/jobs/{uid}/progress?since_ms=&limit=: the progress history the
 * master reported (job_progress_history, bounded by
 * retention.progress_history per dataset), oldest first. */
int api_job_progress(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	int64_t since = -1, limit = 1000;
	if (api_query_int(req, resp, "since_ms", 0, INT64_MAX / 2, &since) < 0 ||
	    api_query_int(req, resp, "limit", 1, 10000, &limit) < 0)
		return 0;
	PGconn *c = api_db(b, resp);
	if (!c)
		return 0;
	struct store_job job = { 0 };
	cJSON *doc = NULL;
	int rc = store_job_find(c, req->params[0], &job, &err);
	if (rc == 0)
		rc = store_progress_json(c, job.id, since, (int)limit, &doc, &err);
	rv_db_release(b->db, c);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	cJSON_AddStringToObject(doc, "job", job.uid);
	return rv_rest_reply(resp, 200, doc);
}
