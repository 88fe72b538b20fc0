/*
 * api.c: rover-brain's route table, the shared handler helpers, and the
 * /healthz, /metrics and /v1/openapi.json handlers.  The OpenAPI document is
 * generated (common/openapi.c) from the same route table that dispatches
 * requests, so it names every route, and its component schemas from
 * common/wire.c's field tables, so they name every field the brain reads.  Handlers run on libmicrohttpd's
 * connection threads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brain.h"
#include "buf.h"
#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "openapi.h"
#include "parse.h"

static int api_healthz(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
static int api_metrics_get(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
static int api_openapi(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);

static const struct rv_http_route routes[] = {
	{ "POST", "/v1/jobs", api_jobs_create, RV_HTTP_WRITE,
	  "Register a job (ElasticJob spec); returns its uid and the create-stage plan" },
	{ "GET", "/v1/jobs", api_jobs_list, 0, "List jobs, newest first" },
	{ "GET", "/v1/jobs/{uid}", api_jobs_get, 0, "A job: spec, status and nodes" },
	{ "POST", "/v1/jobs/{uid}/metrics", api_metrics_post, RV_HTTP_WRITE,
	  "Store a batch of samples (speed, node usage, model); all or nothing" },
	{ "POST", "/v1/jobs/{uid}/events", api_events_post, RV_HTTP_WRITE,
	  "Record a node or job event (failure, OOM, relaunch, finish, plan applied)" },
	{ "GET", "/v1/jobs/{uid}/plan", api_plan_get, 0,
	  "Latest plan of a stage; with after= and wait= a long-poll for a newer one" },
	{ "GET", "/v1/jobs/{uid}/plans", api_plans_list, 0,
	  "Plan history with reasons and outcomes" },
	{ "GET", "/v1/jobs/{uid}/events", api_events_list, 0, "A job's events, oldest first" },
	{ "POST", "/v1/cluster/nodes", api_cluster_post, RV_HTTP_WRITE,
	  "Cluster monitor report: node capacity and usage" },
	{ "GET", "/v1/cluster", api_cluster_get, 0,
	  "Cluster nodes, capacity, usage and free capacity" },
	{ "GET", "/healthz", api_healthz, 0, "Liveness and database reachability" },
	{ "GET", "/metrics", api_metrics_get, 0, "Prometheus metrics" },
	{ "GET", "/v1/openapi.json", api_openapi, 0, "This API as an OpenAPI 3 document" },
};

/* What the route table does not say, for /v1/openapi.json (in step with it). */
static const struct rv_openapi_route docs[] = {
	{ .body = "ElasticJob",
	  .ok = "JobCreated",
	  .ok_code = "201",
	  .errors = "409:a running job has this name in the namespace" },
	{ .ok = "JobList",
	  .query = "namespace:string:only jobs of this namespace;"
		   "status:string:running, finished or failed;"
		   "limit:integer:at most this many (1..1000, default 100);"
		   "offset:integer:skip this many" },
	{ .ok = "Job", .errors = "404:unknown job" },
	{ .body = "MetricsBatch", .ok = "Accepted", .errors = "404:unknown job" },
	{ .body = "Event", .ok = "Accepted", .errors = "404:unknown job" },
	{ .ok = "ScalePlan",
	  .query = "stage:string:create, running or oom (default: any);"
		   "after:integer:only a plan with a larger id;"
		   "wait:integer:seconds to wait for such a plan (long-poll; 204 when none came)",
	  .errors = "204:no plan newer than after= came within wait=;404:unknown job" },
	{ .ok = "PlanHistory",
	  .query = "limit:integer:at most this many (1..1000, default 100)",
	  .errors = "404:unknown job" },
	{ .ok = "EventList",
	  .query = "limit:integer:the newest this many (1..1000, default 100)",
	  .errors = "404:unknown job" },
	{ .body = "ClusterReport", .ok = "Accepted" },
	{ .ok = "Cluster" },
	{ .ok = "Health" },
	{ .ok_text = "prometheus" },
	{ 0 },
};

PGconn *api_db(struct brain *b, struct rv_http_resp *resp)
{
	struct rv_err err = { 0 };
	PGconn *c = rv_db_acquire(b->db, &err);
	if (!c) {
		atomic_fetch_add(&b->db_unavailable, 1);
		char q[600];
		rv_log_warn("database unavailable", "reason=%s", rv_log_q(q, sizeof(q), err.msg));
		rv_http_resp_error_text(resp, 503, "unavailable", err.msg[0] ? err.msg : "database unavailable",
					"");
	}
	return c;
}

int api_fail(struct brain *b, struct rv_http_resp *resp, int rc, const struct rv_err *err)
{
	int status = rv_errno_to_http(rc);
	if (status >= 500) {
		char q[600];
		rv_log_error("request failed", "status=%d reason=%s", status,
			     rv_log_q(q, sizeof(q), err ? err->msg : ""));
		if (status == 503)
			atomic_fetch_add(&b->db_unavailable, 1);
	}
	rv_http_resp_error(resp, rc, err);
	return 0;
}

static int api_healthz(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	cJSON *doc = cJSON_CreateObject();
	PGconn *c = rv_db_acquire(b->db, &err);
	int rc = c ? store_ping(c, &err) : err.code;
	rv_db_release(b->db, c);
	cJSON_AddStringToObject(doc, "status", rc == 0 ? "ok" : "degraded");
	cJSON_AddStringToObject(doc, "db", rc == 0 ? "ok" : err.msg);
	cJSON_AddStringToObject(doc, "db_mode", b->embedded ? "embedded" : "external");
	return rv_rest_reply(resp, rc == 0 ? 200 : 503, doc);
}

static int api_metrics_get(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	struct brain *b = ctx;
	struct rv_buf out;
	rv_buf_init(&out);
	static const struct rv_rest_counter counters[] = {
		{ "rover_brain_samples_ingested_total", "Samples stored through the metrics API",
		  offsetof(struct brain, samples_ingested) },
		{ "rover_brain_batches_ingested_total", "Metrics batches stored",
		  offsetof(struct brain, batches_ingested) },
		{ "rover_brain_batches_rejected_total", "Metrics batches rejected as invalid",
		  offsetof(struct brain, batches_rejected) },
		{ "rover_brain_events_ingested_total", "Events stored",
		  offsetof(struct brain, events_ingested) },
		{ "rover_brain_plans_stored_total", "Scale plans stored by this brain",
		  offsetof(struct brain, plans_stored) },
		{ "rover_brain_db_unavailable_total",
		  "Requests answered 503 for lack of a database",
		  offsetof(struct brain, db_unavailable) },
	};
	rv_rest_metrics_counters(&out, b->http, b, counters, RV_ARRAY_SIZE(counters));
	struct rv_db_pool_stats st;
	rv_db_pool_stats(b->db, &st);
	rv_buf_printf(&out,
		      "# HELP rover_brain_db_pool_size Connections in the PostgreSQL pool\n"
		      "# TYPE rover_brain_db_pool_size gauge\nrover_brain_db_pool_size %d\n"
		      "# HELP rover_brain_db_pool_in_use Pool connections borrowed now\n"
		      "# TYPE rover_brain_db_pool_in_use gauge\nrover_brain_db_pool_in_use %d\n"
		      "# HELP rover_brain_db_pool_connected Pool connections open now\n"
		      "# TYPE rover_brain_db_pool_connected gauge\nrover_brain_db_pool_connected %d\n"
		      "# HELP rover_brain_db_acquires_total Connections borrowed from the pool\n"
		      "# TYPE rover_brain_db_acquires_total counter\nrover_brain_db_acquires_total %llu\n"
		      "# HELP rover_brain_db_acquire_failures_total Borrow attempts that failed\n"
		      "# TYPE rover_brain_db_acquire_failures_total counter\n"
		      "rover_brain_db_acquire_failures_total %llu\n"
		      "# HELP rover_brain_db_exec_errors_total Statements that failed\n"
		      "# TYPE rover_brain_db_exec_errors_total counter\n"
		      "rover_brain_db_exec_errors_total %llu\n",
		      st.size, st.in_use, st.connected, (unsigned long long)st.acquires,
		      (unsigned long long)st.acquire_failures, (unsigned long long)st.exec_errors);
	return rv_rest_reply_metrics(resp, &out);
}

/* ---- OpenAPI ---- */

/*
 * Component schemas.  The wire messages (request bodies, plans, cluster
 * nodes) are generated from common/wire.c's field tables, the same tables
 * tests/common/check_wire.c holds equal to the parsing code, so the document
 * cannot drift from what the brain accepts.  What only the brain's replies
 * hold is typed here.
 */
static const char openapi_reply_schemas[] =
	"{"
	"\"Error\":{\"type\":\"object\",\"required\":[\"error\",\"detail\"],\"properties\":{"
	"\"error\":{\"type\":\"string\"},\"detail\":{\"type\":\"string\"},\"field\":{\"type\":"
	"\"string\"}}},"
	"\"EventList\":{\"type\":\"object\",\"properties\":{\"job\":{\"type\":\"string\"},"
	"\"events\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}}},"
	"\"PlanHistory\":{\"type\":\"object\",\"properties\":{\"job\":{\"type\":\"string\"},"
	"\"plans\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/components/schemas/ScalePlan\"}}}},"
	"\"Job\":{\"type\":\"object\",\"properties\":{\"uid\":{\"type\":\"string\"},\"namespace\":{"
	"\"type\":\"string\"},"
	"\"name\":{\"type\":\"string\"},\"user\":{\"type\":\"string\"},\"status\":{\"type\":"
	"\"string\"},"
	"\"last_sample_ts\":{\"type\":\"integer\"},\"planned_ts\":{\"type\":\"integer\"},"
	"\"speed_samples\":{\"type\":\"integer\"},\"node_samples\":{\"type\":\"integer\"},"
	"\"latest_plan_id\":{\"type\":\"integer\",\"nullable\":true},"
	"\"spec\":{\"$ref\":\"#/components/schemas/"
	"ElasticJob\"},\"nodes\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}}},"
	"\"JobCreated\":{\"type\":\"object\",\"properties\":{\"uid\":{\"type\":\"string\"},"
	"\"plan\":{\"$ref\":\"#/components/schemas/ScalePlan\"}}},"
	"\"JobList\":{\"type\":\"object\",\"properties\":{\"jobs\":{\"type\":\"array\",\"items\":{"
	"\"$ref\":\"#/components/schemas/Job\"}},"
	"\"total\":{\"type\":\"integer\"}}},"
	"\"Accepted\":{\"type\":\"object\",\"properties\":{\"accepted\":{\"type\":\"integer\"},"
	"\"id\":{\"type\":\"integer\",\"description\":\"events: the stored event\"},"
	"\"plan_id\":{\"type\":\"integer\",\"description\":\"events: the plan the event made "
	"(node_oom)\"},\"duplicate\":{\"type\":\"boolean\",\"description\":\"cluster reports: "
	"a resend of a stored report_id, not stored again\"}}},"
	"\"Cluster\":{\"type\":\"object\",\"properties\":{\"nodes\":{\"type\":\"array\",\"items\":{"
	"\"$ref\":\"#/components/schemas/ClusterNode\"}},"
	"\"capacity\":{\"type\":\"object\"},\"used\":{\"type\":\"object\"},\"free\":{\"type\":"
	"\"object\"}}},"
	"\"Health\":{\"type\":\"object\",\"properties\":{\"status\":{\"type\":\"string\"},\"db\":{"
	"\"type\":\"string\"},"
	"\"db_mode\":{\"type\":\"string\"}}}"
	"}";

/* What a stored plan adds to the ScalePlan message in replies. */
static const char openapi_plan_reply_fields[] =
	"{\"created_at\":{\"type\":\"string\",\"readOnly\":true},"
	"\"applied_at\":{\"type\":\"string\",\"nullable\":true,\"readOnly\":true},"
	"\"outcome\":{\"type\":\"string\",\"enum\":[\"pending\",\"better\",\"neutral\",\"worse\","
	"\"unknown\"],"
	"\"readOnly\":true},"
	"\"speed_before\":{\"type\":\"number\",\"nullable\":true,\"readOnly\":true},"
	"\"speed_after\":{\"type\":\"number\",\"nullable\":true,\"readOnly\":true},"
	"\"reverts_plan_id\":{\"type\":\"integer\",\"nullable\":true,\"readOnly\":true}}";

static int api_openapi(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	(void)ctx;
	int n;
	const struct rv_wire_message *msgs = rv_wire_messages(&n);
	const struct rv_openapi spec = {
		.title = "rover-brain",
		.description = "Rover's brain: job metrics and events in, resource plans out.",
		.routes = routes,
		.docs = docs,
		.nroutes = (int)RV_ARRAY_SIZE(routes),
		.messages = msgs,
		.nmessages = n,
		.reply_schemas = openapi_reply_schemas,
		.extend = "ScalePlan",
		.extend_fields = openapi_plan_reply_fields,
		.write_errors = "413:body over the size limit",
		.all_errors = "503:database unavailable",
	};
	return rv_rest_reply(resp, 200, rv_openapi_doc(&spec));
}

int api_start(struct brain *b, struct rv_err *err)
{
	_Static_assert(RV_ARRAY_SIZE(routes) == RV_ARRAY_SIZE(docs), "route docs out of step");
	struct rv_http_server_opts o = {
		.token = b->cfg.token,
		.max_body = (size_t)b->cfg.max_body_kb * 1024,
		.conn_timeout_s = (int)b->cfg.conn_timeout_s,
		.max_conns = (int)b->cfg.max_conns,
		.routes = routes,
		.nroutes = (int)RV_ARRAY_SIZE(routes),
		.ctx = b,
	};
	b->http = rv_rest_server_start(b->cfg.listen, &o, err);
	return b->http ? 0 : (err && err->code ? err->code : -EIO);
}

void api_stop(struct brain *b)
{
	rv_http_server_stop(b->http);
	b->http = NULL;
}
