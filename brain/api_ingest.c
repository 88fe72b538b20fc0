/*
 * api_ingest.c: metrics batches and events from masters.  A batch is
 * validated whole before anything is written (one bad sample rejects it,
 * naming the sample index and field) and stored in one transaction.  An OOM
 * event produces an oom-stage plan at once, in the event's transaction.
 * The handlers own the transactions (store.c runs inside them).  A batch or
 * event resent with the id it had is answered as the first time and not
 * stored again.  Runs on connection threads.
 */
#include <stdio.h>
#include <string.h>

#include "brain.h"
#include "json.h"
#include "log.h"

/* Find the job in the path; fill resp on failure.  Finished jobs take no data. */
static int ingest_job(struct brain *b, PGconn *c, struct rv_http_req *req,
		      struct rv_http_resp *resp, struct store_job *job)
{
	struct rv_err err = { 0 };
	int rc = store_job_find(c, req->params[0], job, &err);
	if (rc < 0)
		return api_fail(b, resp, rc, &err), rc;
	if (strcmp(job->status, "running") != 0) {
		char detail[160];
		snprintf(detail, sizeof(detail), "job %s is %s and takes no more data", job->uid,
			 job->status);
		rv_http_resp_error_text(resp, 409, "conflict", detail, "uid");
		return -EEXIST;
	}
	return 0;
}

/* One batch in one transaction: 0 stored, 1 a resend (nothing stored). */
static int metrics_tx(PGconn *c, int64_t job_id, const struct rv_metrics_batch *batch,
		      int *accepted, struct rv_err *err)
{
	int rc = rv_db_begin(c, err);
	if (rc < 0)
		return rc;
	rc = store_metrics_insert(c, job_id, batch, accepted, err);
	if (rc < 0) {
		rv_db_rollback(c);
		return rc;
	}
	int crc = rv_db_commit(c, err);
	return crc < 0 ? crc : rc;
}

/*
 * An event, and for a node_oom the oom plan it makes, in one transaction: a
 * crash between the two can no longer leave an OOM counted without its plan.
 * 0 stored, 1 a resend (*id and plan->id those of the first time).
 */
static int event_tx(struct brain *b, PGconn *c, const struct store_job *job,
		    const struct rv_event *ev, int64_t *id, struct rv_scale_plan *plan,
		    struct rv_err *err)
{
	int rc = rv_db_begin(c, err);
	if (rc < 0)
		return rc;
	int64_t made = 0;
	int seen = rc = store_event_insert(c, job->id, ev, id, &made, err);
	if (rc == 1)
		plan->id = made;
	if (rc == 0 && ev->type == RV_EVENT_NODE_OOM) {
		rc = planner_oom_plan(b, c, job, ev, plan, err);
		if (rc == 0 && plan->stage[0] &&
		    (rc = store_plan_insert(c, job->id, plan, 0, err)) == 0)
			rc = store_event_set_result_plan(c, *id, plan->id, err);
	}
	if (rc < 0) {
		rv_db_rollback(c);
		plan->id = 0;
		return rc;
	}
	rc = rv_db_commit(c, err);
	if (rc < 0) {
		plan->id = 0;
		return rc;
	}
	return seen;
}

int api_metrics_post(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc) {
		atomic_fetch_add(&b->batches_rejected, 1);
		return 0;
	}
	struct rv_metrics_batch batch = { 0 };
	int rc = rv_metrics_batch_from_json(doc, &batch, &err);
	cJSON_Delete(doc);
	if (rc < 0) {
		atomic_fetch_add(&b->batches_rejected, 1);
		return api_fail(b, resp, rc, &err);
	}
	PGconn *c = api_db(b, resp);
	if (!c) {
		rv_metrics_batch_release(&batch);
		return 0;
	}
	struct store_job job = { 0 };
	int accepted = 0;
	rc = ingest_job(b, c, req, resp, &job);
	if (rc == 0) {
		rc = metrics_tx(c, job.id, &batch, &accepted, &err);
		if (rc < 0)
			api_fail(b, resp, rc, &err);
	}
	rv_db_release(b->db, c);
	rv_metrics_batch_release(&batch);
	if (rc < 0)
		return 0;
	if (rc == 0) {
		atomic_fetch_add(&b->samples_ingested, (uint64_t)accepted);
		atomic_fetch_add(&b->batches_ingested, 1);
		planner_touch(b, job.id);
	}
	cJSON *out = cJSON_CreateObject();
	cJSON_AddNumberToObject(out, "accepted", accepted);
	return rv_rest_reply(resp, 200, out);
}

int api_events_post(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_event ev;
	memset(&ev, 0, sizeof(ev));
	int rc = rv_event_from_json(doc, &ev, &err);
	cJSON_Delete(doc);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	PGconn *c = api_db(b, resp);
	if (!c)
		return 0;
	struct store_job job = { 0 };
	int64_t id = 0;
	struct rv_scale_plan plan;
	memset(&plan, 0, sizeof(plan));
	rc = ingest_job(b, c, req, resp, &job);
	if (rc < 0) {
		rv_db_release(b->db, c);
		return 0;
	}
	rc = event_tx(b, c, &job, &ev, &id, &plan, &err);
	rv_db_release(b->db, c);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	bool resent = rc == 1;
	if (!resent && plan.stage[0] && plan.id) {
		atomic_fetch_add(&b->plans_stored, 1);
		planner_notify(b);
	}
	if (!resent)
		atomic_fetch_add(&b->events_ingested, 1);
	if (!resent && (ev.type == RV_EVENT_NODE_OOM || ev.type == RV_EVENT_NODE_FAILED ||
			ev.type == RV_EVENT_JOB_FAILED)) {
		char qn[160];
		rv_log_info("job event", "job=%s type=%s node=%s exit=%d plan=%lld", job.uid,
			    rv_event_type_name(ev.type), rv_log_q(qn, sizeof(qn), ev.node), ev.exit_code,
			    (long long)plan.id);
	}
	if (!resent && ev.type == RV_EVENT_PLAN_APPLIED)
		planner_touch(b, job.id);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddNumberToObject(out, "accepted", 1);
	cJSON_AddNumberToObject(out, "id", (double)id);
	if (plan.id)
		cJSON_AddNumberToObject(out, "plan_id", (double)plan.id);
	return rv_rest_reply(resp, 200, out);
}
