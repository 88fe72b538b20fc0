/*
 * api.c: rover-brain's route table, the shared handler helpers, and the
 * /healthz, /metrics and /v1/openapi.json handlers.  The OpenAPI document is
 * generated from the same route table that dispatches requests, so it names
 * every route, and its component schemas from common/wire.c's field tables,
 * so they name every field the brain reads.  Handlers run on libmicrohttpd's
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
#include "parse.h"

static int api_healthz(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
static int api_metrics_get(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
static int api_openapi(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);

/* Request body schema for each write route (components/schemas). */
struct route_doc {
	const char *pattern;
	const char *method;
	const char *body_schema;
	const char *ok_schema;
	const char *ok_code;
	const char *query; /* "name:type:description;..." */
};

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
	{ "GET", "/v1/jobs/{uid}/plans", api_plans_list, 0, "Plan history with reasons and outcomes" },
	{ "POST", "/v1/cluster/nodes", api_cluster_post, RV_HTTP_WRITE,
	  "Cluster monitor report: node capacity and usage" },
	{ "GET", "/v1/cluster", api_cluster_get, 0, "Cluster nodes, capacity, usage and free capacity" },
	{ "GET", "/healthz", api_healthz, 0, "Liveness and database reachability" },
	{ "GET", "/metrics", api_metrics_get, 0, "Prometheus metrics" },
	{ "GET", "/v1/openapi.json", api_openapi, 0, "This API as an OpenAPI 3 document" },
};

static const struct route_doc docs[] = {
	{ "/v1/jobs", "POST", "ElasticJob", "JobCreated", "201", NULL },
	{ "/v1/jobs", "GET", NULL, "JobList", "200",
	  "namespace:string:only jobs of this namespace;status:string:running, finished or failed;"
	  "limit:integer:at most this many (1..1000, default 100);offset:integer:skip this many" },
	{ "/v1/jobs/{uid}", "GET", NULL, "Job", "200", NULL },
	{ "/v1/jobs/{uid}/metrics", "POST", "MetricsBatch", "Accepted", "200", NULL },
	{ "/v1/jobs/{uid}/events", "POST", "Event", "Accepted", "200", NULL },
	{ "/v1/jobs/{uid}/plan", "GET", NULL, "ScalePlan", "200",
	  "stage:string:create, running or oom (default: any);"
	  "after:integer:only a plan with a larger id;"
	  "wait:integer:seconds to wait for such a plan (long-poll; 204 when none came)" },
	{ "/v1/jobs/{uid}/plans", "GET", NULL, "PlanHistory", "200",
	  "limit:integer:at most this many (1..1000, default 100)" },
	{ "/v1/cluster/nodes", "POST", "ClusterReport", "Accepted", "200", NULL },
	{ "/v1/cluster", "GET", NULL, "Cluster", "200", NULL },
	{ "/healthz", "GET", NULL, "Health", "200", NULL },
	{ "/metrics", "GET", NULL, NULL, "200", NULL },
	{ "/v1/openapi.json", "GET", NULL, NULL, "200", NULL },
};

cJSON *api_parse_body(const struct rv_http_req *req, struct rv_http_resp *resp)
{
	struct rv_err err = { 0 };
	if (req->body_len == 0) {
		rv_http_resp_error_text(resp, 400, "invalid_argument", "request body is empty", "");
		return NULL;
	}
	cJSON *doc = rv_json_parse(req->body, req->body_len, &err);
	if (!doc)
		rv_http_resp_error(resp, -EINVAL, &err);
	return doc;
}

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

int api_reply(struct rv_http_resp *resp, int status, cJSON *doc)
{
	char *s = doc ? rv_json_print(doc) : NULL;
	cJSON_Delete(doc);
	if (!s)
		return -ENOMEM;
	rv_http_resp_json(resp, status, s);
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
	return api_reply(resp, rc == 0 ? 200 : 503, doc);
}

static int api_metrics_get(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	struct brain *b = ctx;
	struct rv_buf out;
	rv_buf_init(&out);
	RV_CLEANUP_FREE char *http = rv_http_server_metrics(b->http);
	if (http)
		rv_buf_puts(&out, http);
	static const struct {
		const char *name, *help;
		size_t off;
	} counters[] = {
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
		{ "rover_brain_db_unavailable_total", "Requests answered 503 for lack of a database",
		  offsetof(struct brain, db_unavailable) },
	};
	for (size_t i = 0; i < RV_ARRAY_SIZE(counters); i++) {
		atomic_uint_least64_t *v = (atomic_uint_least64_t *)((char *)b + counters[i].off);
		rv_buf_printf(&out, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", counters[i].name,
			      counters[i].help, counters[i].name, counters[i].name,
			      (unsigned long long)atomic_load(v));
	}
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
	resp->status = 200;
	resp->content_type = "text/plain; version=0.0.4";
	resp->body = rv_buf_steal(&out);
	return resp->body ? 0 : -ENOMEM;
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
	"(node_oom)\"}}},"
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

/* {"type":t} or {"$ref":...} for a table's ref ("string" is a plain type). */
static cJSON *ref_schema(const char *ref)
{
	cJSON *o = cJSON_CreateObject();
	if (!strcmp(ref, "string")) {
		cJSON_AddStringToObject(o, "type", "string");
	} else {
		char r[128];
		snprintf(r, sizeof(r), "#/components/schemas/%s", ref);
		cJSON_AddStringToObject(o, "$ref", r);
	}
	return o;
}

static cJSON *field_schema(const struct rv_wire_field *f)
{
	if (f->ref && !strcmp(f->type, "object") && !f->map)
		return ref_schema(f->ref);
	cJSON *o = cJSON_CreateObject();
	const char *bar = strchr(f->type, '|');
	if (bar) {
		cJSON *one = cJSON_AddArrayToObject(o, "oneOf");
		char a[32];
		snprintf(a, sizeof(a), "%.*s", (int)(bar - f->type), f->type);
		cJSON *t = cJSON_CreateObject();
		cJSON_AddStringToObject(t, "type", a);
		cJSON_AddItemToArray(one, t);
		t = cJSON_CreateObject();
		cJSON_AddStringToObject(t, "type", bar + 1);
		cJSON_AddItemToArray(one, t);
	} else {
		cJSON_AddStringToObject(o, "type", f->type);
	}
	if (f->ref && f->map)
		cJSON_AddItemToObject(o, "additionalProperties", ref_schema(f->ref));
	else if (f->ref)
		cJSON_AddItemToObject(o, "items", ref_schema(f->ref));
	if (f->enums) {
		cJSON *e = cJSON_AddArrayToObject(o, "enum");
		char buf[256];
		snprintf(buf, sizeof(buf), "%s", f->enums);
		char *save = NULL;
		for (char *v = strtok_r(buf, "|", &save); v; v = strtok_r(NULL, "|", &save))
			cJSON_AddItemToArray(e, cJSON_CreateString(v));
	}
	if (f->description)
		cJSON_AddStringToObject(o, "description", f->description);
	return o;
}

static cJSON *openapi_schemas(void)
{
	cJSON *schemas = cJSON_Parse(openapi_reply_schemas);
	int n;
	const struct rv_wire_message *m = rv_wire_messages(&n);
	for (int i = 0; i < n; i++) {
		cJSON *s = cJSON_AddObjectToObject(schemas, m[i].name);
		cJSON_AddStringToObject(s, "type", "object");
		cJSON_AddStringToObject(s, "description", m[i].description);
		cJSON *req = cJSON_CreateArray();
		cJSON *props = cJSON_AddObjectToObject(s, "properties");
		for (int k = 0; k < m[i].nfields; k++) {
			const struct rv_wire_field *f = &m[i].fields[k];
			cJSON_AddItemToObject(props, f->name, field_schema(f));
			if (f->required)
				cJSON_AddItemToArray(req, cJSON_CreateString(f->name));
		}
		if (cJSON_GetArraySize(req) > 0)
			cJSON_AddItemToObject(s, "required", req);
		else
			cJSON_Delete(req);
		if (!strcmp(m[i].name, "ScalePlan")) {
			cJSON *extra = cJSON_Parse(openapi_plan_reply_fields);
			cJSON *it;
			while (extra && (it = extra->child)) {
				cJSON_DetachItemViaPointer(extra, it);
				cJSON_AddItemToObject(props, it->string, it);
			}
			cJSON_Delete(extra);
		}
	}
	return schemas;
}

static cJSON *schema_ref(const char *name)
{
	char ref[128];
	snprintf(ref, sizeof(ref), "#/components/schemas/%s", name);
	cJSON *s = cJSON_CreateObject();
	cJSON_AddStringToObject(s, "$ref", ref);
	return s;
}

static cJSON *json_content(const char *schema)
{
	cJSON *content = cJSON_CreateObject();
	cJSON *mt = cJSON_AddObjectToObject(content, "application/json");
	cJSON_AddItemToObject(mt, "schema", schema_ref(schema));
	return content;
}

static void add_error_response(cJSON *responses, const char *code, const char *desc)
{
	cJSON *r = cJSON_AddObjectToObject(responses, code);
	cJSON_AddStringToObject(r, "description", desc);
	cJSON_AddItemToObject(r, "content", json_content("Error"));
}

static cJSON *openapi_doc(void)
{
	cJSON *doc = cJSON_CreateObject();
	cJSON_AddStringToObject(doc, "openapi", "3.0.3");
	cJSON *info = cJSON_AddObjectToObject(doc, "info");
	cJSON_AddStringToObject(info, "title", "rover-brain");
	cJSON_AddStringToObject(info, "version", "1");
	cJSON_AddStringToObject(info, "description",
				"Rover's brain: job metrics and events in, resource plans out.");
	cJSON *paths = cJSON_AddObjectToObject(doc, "paths");
	for (size_t i = 0; i < RV_ARRAY_SIZE(routes); i++) {
		const struct rv_http_route *rt = &routes[i];
		const struct route_doc *d = &docs[i];
		cJSON *path = cJSON_GetObjectItemCaseSensitive(paths, rt->pattern);
		if (!path)
			path = cJSON_AddObjectToObject(paths, rt->pattern);
		char method[8];
		size_t k;
		for (k = 0; k < sizeof(method) - 1 && rt->method[k]; k++)
			method[k] = (char)(rt->method[k] | 0x20);
		method[k] = 0;
		cJSON *op = cJSON_AddObjectToObject(path, method);
		cJSON_AddStringToObject(op, "summary", rt->summary);
		cJSON *params = cJSON_AddArrayToObject(op, "parameters");
		if (strstr(rt->pattern, "{uid}")) {
			cJSON *p = cJSON_CreateObject();
			cJSON_AddStringToObject(p, "name", "uid");
			cJSON_AddStringToObject(p, "in", "path");
			cJSON_AddBoolToObject(p, "required", 1);
			cJSON_AddStringToObject(cJSON_AddObjectToObject(p, "schema"), "type", "string");
			cJSON_AddItemToArray(params, p);
		}
		if (d->query) {
			char q[512];
			snprintf(q, sizeof(q), "%s", d->query);
			char *save = NULL;
			for (char *tok = strtok_r(q, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
				char *type = strchr(tok, ':');
				char *desc = type ? strchr(type + 1, ':') : NULL;
				if (!type || !desc)
					continue;
				*type++ = 0;
				*desc++ = 0;
				cJSON *p = cJSON_CreateObject();
				cJSON_AddStringToObject(p, "name", tok);
				cJSON_AddStringToObject(p, "in", "query");
				cJSON_AddStringToObject(p, "description", desc);
				cJSON_AddStringToObject(cJSON_AddObjectToObject(p, "schema"), "type", type);
				cJSON_AddItemToArray(params, p);
			}
		}
		if (d->body_schema) {
			cJSON *rb = cJSON_AddObjectToObject(op, "requestBody");
			cJSON_AddBoolToObject(rb, "required", 1);
			cJSON_AddItemToObject(rb, "content", json_content(d->body_schema));
		}
		if (rt->flags & RV_HTTP_WRITE) {
			cJSON *sec = cJSON_AddArrayToObject(op, "security");
			cJSON *req = cJSON_CreateObject();
			cJSON_AddArrayToObject(req, "bearer");
			cJSON_AddItemToArray(sec, req);
		}
		cJSON *responses = cJSON_AddObjectToObject(op, "responses");
		cJSON *ok = cJSON_AddObjectToObject(responses, d->ok_code);
		cJSON_AddStringToObject(ok, "description", "success");
		if (d->ok_schema)
			cJSON_AddItemToObject(ok, "content", json_content(d->ok_schema));
		else if (!strcmp(rt->pattern, "/metrics"))
			cJSON_AddStringToObject(
				cJSON_AddObjectToObject(cJSON_AddObjectToObject(ok, "content"), "text/plain"),
				"x-format", "prometheus");
		if (!strcmp(rt->pattern, "/v1/jobs/{uid}/plan"))
			cJSON_AddStringToObject(cJSON_AddObjectToObject(responses, "204"), "description",
						"no plan newer than after= came within wait=");
		if (d->body_schema || d->query)
			add_error_response(responses, "400", "bad input; field names the offender");
		if (rt->flags & RV_HTTP_WRITE) {
			add_error_response(responses, "401", "missing or wrong bearer token");
			add_error_response(responses, "413", "body over the size limit");
		}
		if (strstr(rt->pattern, "{uid}"))
			add_error_response(responses, "404", "unknown job");
		if (!strcmp(rt->pattern, "/v1/jobs") && !strcmp(rt->method, "POST"))
			add_error_response(responses, "409", "a running job has this name in the namespace");
		add_error_response(responses, "503", "database unavailable");
	}
	cJSON *components = cJSON_AddObjectToObject(doc, "components");
	cJSON_AddItemToObject(components, "schemas", openapi_schemas());
	cJSON *ss = cJSON_AddObjectToObject(components, "securitySchemes");
	cJSON *bearer = cJSON_AddObjectToObject(ss, "bearer");
	cJSON_AddStringToObject(bearer, "type", "http");
	cJSON_AddStringToObject(bearer, "scheme", "bearer");
	return doc;
}

static int api_openapi(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	(void)ctx;
	return api_reply(resp, 200, openapi_doc());
}

static int split_listen(const char *listen, char *host, size_t hsize, int *port)
{
	const char *colon = strrchr(listen, ':');
	if (!colon)
		return -EINVAL;
	const char *h = listen;
	size_t hlen = (size_t)(colon - listen);
	if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
		h++;
		hlen -= 2;
	}
	if (hlen == 0 || hlen >= hsize)
		return -EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = 0;
	int64_t p;
	if (rv_parse_i64(colon + 1, 0, 65535, &p) < 0)
		return -EINVAL;
	*port = (int)p;
	return 0;
}

int api_start(struct brain *b, struct rv_err *err)
{
	_Static_assert(RV_ARRAY_SIZE(routes) == RV_ARRAY_SIZE(docs), "route docs out of step");
	char host[128];
	int port;
	if (split_listen(b->cfg.listen, host, sizeof(host), &port) < 0)
		return rv_err_set(err, -EINVAL, "server.listen",
				  "bad listen address \"%s\" (want HOST:PORT)", b->cfg.listen);
	struct rv_http_server_opts o = {
		.host = host,
		.port = port,
		.token = b->cfg.token,
		.max_body = (size_t)b->cfg.max_body_kb * 1024,
		.conn_timeout_s = (int)b->cfg.conn_timeout_s,
		.max_conns = (int)b->cfg.max_conns,
		.routes = routes,
		.nroutes = (int)RV_ARRAY_SIZE(routes),
		.ctx = b,
	};
	b->http = rv_http_server_start(&o, err);
	return b->http ? 0 : (err && err->code ? err->code : -EIO);
}

void api_stop(struct brain *b)
{
	rv_http_server_stop(b->http);
	b->http = NULL;
}
