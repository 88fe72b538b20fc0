/*
 * api_cluster.c: cluster monitor reports in, capacity out.  A report with a
 * report_id is stored once (a resend answers "duplicate":true); every node
 * sample goes into the history once per (node, ts) and the newest sample of
 * each node into the capacity table, in one transaction.
 */
#include "brain.h"

int api_cluster_post(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_cluster_report r = { 0 };
	int rc = rv_cluster_report_from_json(doc, &r, &err);
	cJSON_Delete(doc);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	PGconn *c = api_db(b, resp);
	if (!c) {
		rv_cluster_report_release(&r);
		return 0;
	}
	/* the report id, the history and the newest rows: all or nothing */
	rc = rv_db_begin(c, &err);
	if (rc == 0) {
		rc = store_cluster_upsert(c, &r, &err);
		if (rc < 0)
			rv_db_rollback(c);
		else {
			int crc = rv_db_commit(c, &err);
			rc = crc < 0 ? crc : rc;
		}
	}
	rv_db_release(b->db, c);
	int n = r.n;
	rv_cluster_report_release(&r);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddNumberToObject(out, "accepted", n);
	/* a resend of a stored report_id: acknowledged, nothing written */
	cJSON_AddBoolToObject(out, "duplicate", rc == 1);
	return rv_rest_reply(resp, 200, out);
}

int api_cluster_get(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	PGconn *c = api_db(b, resp);
	if (!c)
		return 0;
	cJSON *doc = NULL;
	int rc = store_cluster_json(c, &doc, &err);
	rv_db_release(b->db, c);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	return rv_rest_reply(resp, 200, doc);
}
