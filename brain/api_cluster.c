/*
 * api_cluster.c: cluster monitor reports in, capacity out.  A report holds
 * at most cluster.max_report_nodes nodes (413 above) and may not take the
 * cluster past cluster.max_nodes (403); the listing comes in pages of at
 * most cluster.max_page nodes (limit= and cursor=).  A report with a
 * report_id is stored once (a resend answers "duplicate":true); every node
 * sample goes into the history once per (node, ts) and the newest sample of
 * each node into the capacity table, in one transaction.
 */
#include <string.h>

#include "brain.h"
#include "json.h"

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
	if (rc == 0 && r.n > b->cfg.cluster_max_report_nodes)
		rc = rv_err_set(&err, -E2BIG, "nodes",
				"a report holds at most %lld nodes (cluster.max_report_nodes), "
				"this one %d: split it",
				b->cfg.cluster_max_report_nodes, r.n);
	if (rc < 0) {
		rv_cluster_report_release(&r);
		return api_fail(b, resp, rc, &err);
	}
	PGconn *c = api_db(b, resp);
	if (!c) {
		rv_cluster_report_release(&r);
		return 0;
	}
	rc = store_cluster_upsert(c, &r, b->cfg.cluster_max_nodes, &err);
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
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	int64_t limit = b->cfg.cluster_max_page < 100 ? b->cfg.cluster_max_page : 100;
	if (api_query_int(req, resp, "limit", 1, b->cfg.cluster_max_page, &limit) < 0)
		return 0;
	const char *cursor = rv_http_query(req, "cursor");
	if (!cursor)
		cursor = "";
	if (strlen(cursor) >= 2 * RV_NAME_MAX || !rv_utf8_valid(cursor, strlen(cursor))) {
		rv_err_set(&err, -EINVAL, "cursor",
			   "cursor must be a node name (UTF-8, at most %d bytes) from next_cursor",
			   2 * RV_NAME_MAX - 1);
		return api_fail(b, resp, err.code, &err);
	}
	PGconn *c = api_db(b, resp);
	if (!c)
		return 0;
	cJSON *doc = NULL;
	int rc = store_cluster_json(c, cursor, (int)limit, &doc, &err);
	rv_db_release(b->db, c);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	return rv_rest_reply(resp, 200, doc);
}
