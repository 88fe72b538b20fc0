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
	{ "GET", "/v1/jobs/{uid}", api_jobs_get, 0,
	  "A job: spec, status, nodes and its datasets' progress" },
	{ "POST", "/v1/jobs/{uid}/metrics", api_metrics_post, RV_HTTP_WRITE,
	  "Store a batch of samples (speed, node usage, model, data progress); all or nothing" },
	{ "POST", "/v1/jobs/{uid}/events", api_events_post, RV_HTTP_WRITE,
	  "Record a node or job event (failure, OOM, relaunch, finish, plan applied)" },
	{ "GET", "/v1/jobs/{uid}/plan", api_plan_get, 0,
	  "Latest plan of a stage; with after= and wait= a long-poll for a newer one" },
	{ "GET", "/v1/jobs/{uid}/plans", api_plans_list, 0,
	  "Plan history with reasons and outcomes" },
	{ "GET", "/v1/jobs/{uid}/events", api_events_list, 0, "A job's events, oldest first" },
	{ "GET", "/v1/jobs/{uid}/progress", api_job_progress, 0,
	  "A job's data progress over time as its master reported it, oldest first" },
	{ "POST", "/v1/cluster/nodes", api_cluster_post, RV_HTTP_WRITE,
	  "Cluster monitor report: node capacity and usage" },
	{ "GET", "/v1/cluster", api_cluster_get, 0,
	  "Cluster nodes, capacity, usage and free capacity" },
	{ "GET", "/v1/jobs/{uid}/series", api_job_series, 0,
	  "A job's speed and node usage over time, and its plans at the job time they apply" },
	{ "GET", "/v1/cluster/usage", api_cluster_usage, 0,
	  "CPU and memory the jobs used and held over time, and the cluster's capacity" },
	{ "GET", "/v1/dashboards/{view}", api_dashboard, 0,
	  "The rows of a dashboard view (sql/002_dashboards.sql)" },
	{ "GET", "/", api_web_page, 0, "The status page" },
	{ "GET", "/web/{file}", api_web_asset, 0, "The status page's script and style" },
	{ "GET", "/web/vendor/{file}", api_web_vendor, 0, "The status page's vendored library" },
	{ "GET", "/healthz", api_healthz, 0, "Liveness and database reachability" },
	{ "GET", "/metrics", api_metrics_get, 0, "Prometheus metrics" },
	{ "GET", "/v1/openapi.json", api_openapi, 0, "This API as an OpenAPI 3 document" },
};

/* What the route table does not say, for /v1/openapi.json (in step with it). */
static const struct rv_openapi_route docs[] = {
	{ .id = "createJob",
	  .body = "ElasticJob",
	  .ok = "JobCreated",
	  .ok_code = "201",
	  .errors = "403:a namespace quota (quota.jobs_per_namespace, quota.nodes_per_namespace) "
		    "would be passed;409:a running job has this name in the namespace" },
	{ .id = "listJobs",
	  .ok = "JobList",
	  .query = "namespace:string:only jobs of this namespace;"
		   "status:string:running, finished or failed;"
		   "limit:integer:at most this many (1..1000, default 100);"
		   "offset:integer:skip this many" },
	{ .id = "getJob", .ok = "Job", .errors = "404:unknown job" },
	{ .id = "postJobMetrics",
	  .body = "MetricsBatch",
	  .ok = "Accepted",
	  .errors = "404:unknown job" },
	{ .id = "postJobEvent", .body = "Event", .ok = "Accepted", .errors = "404:unknown job" },
	{ .id = "getJobPlan",
	  .ok = "ScalePlan",
	  .query = "stage:string:create, running or oom (default: any);"
		   "after:integer:only a plan with a larger id;"
		   "wait:integer:seconds to wait for such a plan (long-poll; 204 when none came)",
	  .errors = "204:no plan newer than after= came within wait=;404:unknown job" },
	{ .id = "listJobPlans",
	  .ok = "PlanHistory",
	  .query = "limit:integer:at most this many (1..1000, default 100)",
	  .errors = "404:unknown job" },
	{ .id = "listJobEvents",
	  .ok = "EventList",
	  .query = "limit:integer:the newest this many (1..1000, default 100)",
	  .errors = "404:unknown job" },
	{ .id = "listJobProgress",
	  .ok = "ProgressHistory",
	  .query = "since_ms:integer:only reports after this time, ms (job time; exclusive);"
		   "limit:integer:at most this many (1..10000, default 1000); a page ends "
		   "between two report times, next_since_ms says where the next begins",
	  .errors = "404:unknown job" },
	{ .id = "postClusterReport",
	  .body = "ClusterReport",
	  .ok = "Accepted",
	  .errors = "403:the report's new nodes would pass cluster.max_nodes;"
		    "413:more nodes than cluster.max_report_nodes" },
	{ .id = "getCluster",
	  .ok = "Cluster",
	  .query = "limit:integer:at most this many nodes (1..cluster.max_page, default 100);"
		   "cursor:string:the next_cursor of the previous page (nodes after this name)" },
	{ .id = "getJobSeries",
	  .ok = "JobSeries",
	  .query = "max_points:integer:at most this many points per series (2..20000, default "
		   "2000); more samples are averaged over equal spans of time",
	  .errors = "404:unknown job" },
	{ .id = "getClusterUsage",
	  .ok = "ClusterUsage",
	  .query =
		  "window_s:integer:how far back from the newest node sample, seconds "
		  "(60..7776000, "
		  "default 3600);"
		  "bucket_s:integer:one point per this many seconds (1..86400, default 60; at most "
		  "10000 buckets)" },
	{ .id = "getDashboard",
	  .ok = "Dashboard",
	  .query = "limit:integer:at most this many rows (1..1000, default 100)",
	  .errors = "404:no such view (job_utilisation, user_utilisation, overprovisioning, "
		    "plan_outcomes, failures_by_cause)" },
	{ .hidden = true },
	{ .hidden = true },
	{ .hidden = true },
	{ .id = "getHealth", .ok = "Health" },
	{ .id = "getMetrics", .ok_text = "prometheus" },
	{ .id = "getOpenapi" },
};

/*
 * A 503 for want of the database: while PostgreSQL is down every request
 * gets one, so the log says it at most once per log.unavailable_interval_s,
 * with how many it left out since the last line.
 */
static void log_unavailable(struct brain *b, const char *why)
{
	atomic_fetch_add(&b->db_unavailable, 1);
	int64_t now = rv_mono_ms(), last = atomic_load(&b->unavail_logged_ms);
	int64_t every = b->cfg.unavailable_log_interval_s * 1000;
	if ((last && now - last < every) ||
	    !atomic_compare_exchange_strong(&b->unavail_logged_ms, &last, now)) {
		atomic_fetch_add(&b->unavail_suppressed, 1);
		return;
	}
	char q[600];
	rv_log_warn("database unavailable", "reason=%s suppressed=%llu",
		    rv_log_q(q, sizeof(q), why),
		    (unsigned long long)atomic_exchange(&b->unavail_suppressed, 0));
}

PGconn *api_db(struct brain *b, struct rv_http_resp *resp)
{
	struct rv_err err = { 0 };
	PGconn *c = rv_db_acquire(b->db, &err);
	if (!c) {
		log_unavailable(b, err.msg);
		rv_http_resp_error_text(resp, 503, "unavailable", err.msg[0] ? err.msg : "database unavailable",
					"");
	}
	return c;
}

int api_fail(struct brain *b, struct rv_http_resp *resp, int rc, const struct rv_err *err)
{
	int status = rv_errno_to_http(rc);
	if (status == 503) {
		log_unavailable(b, err ? err->msg : "");
	} else if (status >= 500) {
		char q[600];
		rv_log_error("request failed", "status=%d reason=%s", status,
			     rv_log_q(q, sizeof(q), err ? err->msg : ""));
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

static const struct rv_rest_counter api_counters[] = {
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
	{ "rover_brain_ingest_commits_total",
	  "Transactions that stored metrics batches (several batches each under load)",
	  offsetof(struct brain, ingest_commits) },
	{ "rover_brain_ingest_slow_groups_total",
	  "Groups of metrics batches stored one job and batch at a time because one "
	  "statement failed",
	  offsetof(struct brain, ingest_slow_groups) },
	{ "rover_brain_db_unavailable_total", "Requests answered 503 for lack of a database",
	  offsetof(struct brain, db_unavailable) },
	{ "rover_brain_pg_restarts_total",
	  "Times the brain started its embedded PostgreSQL again after it died",
	  offsetof(struct brain, pg_restarts) },
	{ "rover_brain_pg_restart_failures_total",
	  "Attempts to start the embedded PostgreSQL again that failed",
	  offsetof(struct brain, pg_restart_failures) },
	{ "rover_brain_cluster_nodes_expired_total",
	  "Cluster nodes deleted after cluster.node_ttl_s without a report",
	  offsetof(struct brain, cluster_nodes_expired) },
};

/* The planner's failures and the pool's figures, after the counters. */
static void api_metrics_more(struct rv_buf *out, void *base)
{
	struct brain *b = base;
	rv_buf_printf(out,
		      "# HELP rover_brain_plan_passes_failed_total Planner passes that stored"
		      " nothing, by cause: a serialization failure or deadlock (SQLSTATE"
		      " 40001/40P01), or any other error\n"
		      "# TYPE rover_brain_plan_passes_failed_total counter\n"
		      "rover_brain_plan_passes_failed_total{reason=\"serialization\"} %llu\n"
		      "rover_brain_plan_passes_failed_total{reason=\"other\"} %llu\n",
		      (unsigned long long)atomic_load(&b->plan_passes_failed_serialization),
		      (unsigned long long)atomic_load(&b->plan_passes_failed_other));
	struct rv_db_pool_stats st;
	rv_db_pool_stats(b->db, &st);
	rv_buf_printf(
		out,
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
		"rover_brain_db_exec_errors_total %llu\n"
		"# HELP rover_brain_db_connect_failures_total Connect attempts that failed\n"
		"# TYPE rover_brain_db_connect_failures_total counter\n"
		"rover_brain_db_connect_failures_total %llu\n",
		st.size, st.in_use, st.connected, (unsigned long long)st.acquires,
		(unsigned long long)st.acquire_failures, (unsigned long long)st.exec_errors,
		(unsigned long long)st.connect_failures);
}

static const struct rv_rest_metrics_page api_metrics_page = {
	.counters = api_counters,
	.ncounters = RV_ARRAY_SIZE(api_counters),
	.more = api_metrics_more,
};

static int api_metrics_get(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	struct brain *b = ctx;
	return rv_rest_metrics_reply(resp, b->http, b, &api_metrics_page);
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
	"\"speed\":{\"type\":\"number\",\"nullable\":true,\"description\":\"newest speed sample, "
	"samples/s\"},\"workers\":{\"type\":\"integer\",\"nullable\":true,\"description\":"
	"\"workers the newest speed sample measured\"},"
	"\"speed_samples\":{\"type\":\"integer\"},\"node_samples\":{\"type\":\"integer\"},"
	"\"latest_plan_id\":{\"type\":\"integer\",\"nullable\":true},"
	"\"spec\":{\"$ref\":\"#/components/schemas/"
	"ElasticJob\"},\"nodes\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},"
	"\"progress\":{\"type\":\"array\",\"description\":\"each dataset's newest progress "
	"report from the master\",\"items\":{\"$ref\":\"#/components/schemas/DatasetProgress\"}},"
	"\"shards\":{\"type\":\"object\",\"nullable\":true,\"description\":\"the shards of "
	"every batch dataset together: total, done, doing, left, samples_total, samples_done, ts; "
	"null until the master reports them\"}}},"
	"\"DatasetProgress\":{\"type\":\"object\",\"properties\":{\"dataset\":{\"type\":"
	"\"string\"},\"ts\":{\"type\":\"integer\",\"description\":\"report time, ms (job "
	"time)\"},\"epoch\":{\"type\":\"integer\"},\"samples_total\":{\"type\":\"integer\"},"
	"\"samples_done\":{\"type\":\"integer\"},\"shards_total\":{\"type\":\"integer\","
	"\"description\":\"0: not known (a stream)\"},\"shards_done\":{\"type\":\"integer\"},"
	"\"shards_doing\":{\"type\":\"integer\"},\"shards_left\":{\"type\":\"integer\","
	"\"nullable\":true,\"description\":\"null for a stream (no total)\"},"
	"\"finished\":{\"type\":\"boolean\"}}},"
	"\"ProgressHistory\":{\"type\":\"object\",\"properties\":{\"job\":{\"type\":"
	"\"string\"},\"progress\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
	"\"properties\":{\"dataset\":{\"type\":\"string\"},\"ts\":{\"type\":\"integer\"},"
	"\"epoch\":{\"type\":\"integer\"},\"samples_done\":{\"type\":\"integer\"},"
	"\"shards_done\":{\"type\":\"integer\"},\"shards_doing\":{\"type\":\"integer\"}}}},"
	"\"more\":{\"type\":\"boolean\"},\"next_since_ms\":{\"type\":\"integer\","
	"\"nullable\":true,\"description\":\"pass as since_ms for the next page; null on the "
	"last\"}}},"
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
	"\"next_cursor\":{\"type\":\"string\",\"nullable\":true,\"description\":\"pass as "
	"cursor= for the next page; null on the last\"},"
	"\"total_nodes\":{\"type\":\"integer\",\"description\":\"nodes stored, ready or not\"},"
	"\"capacity\":{\"type\":\"object\"},\"used\":{\"type\":\"object\"},\"free\":{\"type\":"
	"\"object\"}}},"
	"\"JobSeries\":{\"type\":\"object\",\"properties\":{\"job\":{\"type\":\"string\"},"
	"\"samples\":{\"type\":\"integer\",\"description\":\"speed samples stored\"},"
	"\"speed\":{\"type\":\"object\",\"description\":\"columns of equal length: ts (ms, job "
	"time), speed (samples/s), workers\"},"
	"\"usage\":{\"type\":\"object\",\"description\":\"columns: ts, cpu, cpu_limit, memory_mb, "
	"memory_limit_mb, nodes (sums over the job's nodes)\"},"
	"\"plans\":{\"type\":\"array\",\"items\":{\"type\":\"object\"},\"description\":\"id, "
	"stage, algorithm, reason, outcome, ts (job time applied, else based on; null for "
	"none)\"}}},"
	"\"ClusterUsage\":{\"type\":\"object\",\"description\":\"columns of equal length\","
	"\"properties\":{\"window_s\":{\"type\":\"integer\"},\"bucket_s\":{\"type\":"
	"\"integer\"},\"ts\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},"
	"\"cpu_used\":{\"type\":\"array\",\"items\":{\"type\":\"number\"}},"
	"\"cpu_alloc\":{\"type\":\"array\",\"items\":{\"type\":\"number\"}},"
	"\"memory_used_mb\":{\"type\":\"array\",\"items\":{\"type\":\"number\"}},"
	"\"memory_alloc_mb\":{\"type\":\"array\",\"items\":{\"type\":\"number\"}},"
	"\"jobs\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},"
	"\"capacity\":{\"type\":\"object\"}}},"
	"\"Dashboard\":{\"type\":\"object\",\"properties\":{\"view\":{\"type\":\"string\"},"
	"\"rows\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}}},"
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
	"\"reverts_plan_id\":{\"type\":\"integer\",\"nullable\":true,\"readOnly\":true},"
	"\"not_applied\":{\"type\":\"string\",\"readOnly\":true,\"description\":\"what the "
	"master did not apply of the plan it reported applied, '; '-separated; '' in full\"}}";

static int api_openapi(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)ctx;
	char url[300];
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
		.server_url = rv_openapi_server_url(rv_http_header(req, "Host"), url, sizeof(url)),
	};
	return rv_rest_reply(resp, 200, rv_openapi_doc(&spec));
}

int api_start(struct brain *b, struct rv_err *err)
{
	_Static_assert(RV_ARRAY_SIZE(routes) == RV_ARRAY_SIZE(docs), "route docs out of step");
	/* Each connection is a descriptor: leave room for the pool, the
	 * embedded PostgreSQL's pipes, logs and libraries. */
	long long max_conns = b->cfg.max_conns;
	long long room = b->nofile - b->cfg.pool_size - 64;
	if (b->nofile > 0 && room < max_conns) {
		max_conns = room < 4 ? 4 : room;
		rv_log_warn("connection limit lowered to fit the open-file limit",
			    "max_conns=%lld nofile=%lld", max_conns, b->nofile);
	}
	struct rv_http_server_opts o = {
		.token = b->cfg.token,
		.max_body = (size_t)b->cfg.max_body_kb * 1024,
		.conn_timeout_s = (int)b->cfg.conn_timeout_s,
		.max_conns = (int)max_conns,
		.threads = (int)b->cfg.threads,
		.per_ip_conns = (int)b->cfg.per_ip_conns,
		.request_timeout_s = (int)b->cfg.request_timeout_s,
		.max_deferred = (int)b->cfg.max_waits,
		.max_deferred_per_ip = (int)b->cfg.max_waits_per_ip,
		.body_budget = (size_t)b->cfg.body_budget_mb << 20,
		.routes = routes,
		.nroutes = (int)RV_ARRAY_SIZE(routes),
		.ctx = b,
	};
	b->http = rv_rest_server_start(b->cfg.listen, &o, err);
	return b->http ? 0 : (err && err->code ? err->code : -EIO);
}

void api_stop(struct brain *b)
{
	/* Answer every long-poll and queued batch first: the server waits for
	 * deferred replies. */
	api_plans_wait_stop(b);
	api_ingest_stop(b);
	rv_http_server_stop(b->http);
	b->http = NULL;
	api_plans_cache_free(b);
}

int api_job_listing(void *ctx, struct rv_http_req *req, struct rv_http_resp *resp, const char *key,
		    int64_t lo, int64_t hi, int64_t dflt,
		    int (*fn)(PGconn *c, int64_t job_id, int n, cJSON **out, struct rv_err *err))
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	int64_t n = dflt;
	if (api_query_int(req, resp, key, lo, hi, &n) < 0)
		return 0;
	PGconn *c = api_db(b, resp);
	if (!c)
		return 0;
	struct store_job job = { 0 };
	cJSON *doc = NULL;
	int rc = store_job_find(c, req->params[0], &job, &err);
	if (rc == 0)
		rc = fn(c, job.id, (int)n, &doc, &err);
	rv_db_release(b->db, c);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	cJSON_AddStringToObject(doc, "job", job.uid);
	return rv_rest_reply(resp, 200, doc);
}
