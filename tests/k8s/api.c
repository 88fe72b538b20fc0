/*
 * api.c: the stand-in's HTTP side: libmicrohttpd with a thread per
 * connection (a watch blocks in its own), the routes of the core v1 API
 * (/api/v1/namespaces/NS/pods/NAME/SUB, /api/v1/nodes/NAME, ...), the
 * discovery documents kubectl reads first (/version, /api, /api/v1, /apis;
 * the OpenAPI documents are a 404, which kubectl takes as "none"), Status
 * errors as the API server writes them, and the admin endpoints of fault
 * injection under /standin/.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "standin.h"

#define API_MAX_BODY (4 << 20)
#define API_MAX_SEG  9

struct api_req {
	char *body;
	size_t len;
	bool too_big;
};

const char *api_query(const struct call *c, const char *key)
{
	return MHD_lookup_connection_value(c->c, MHD_GET_ARGUMENT_KIND, key);
}

void api_json(struct reply *r, int code, cJSON *j)
{
	r->status = code;
	r->body = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
}

static const char *api_reason_default(int code)
{
	switch (code) {
	case 400:
		return "BadRequest";
	case 404:
		return "NotFound";
	case 405:
		return "MethodNotAllowed";
	case 409:
		return "Conflict";
	case 410:
		return "Expired";
	case 415:
		return "UnsupportedMediaType";
	case 422:
		return "Invalid";
	default:
		return "InternalError";
	}
}

/* An Invalid status's cause, "FIELD: WHY" after "is invalid: ", which
 * kubectl prints ("The Pod "x" is invalid: spec: Forbidden: ..."). */
static void api_causes(cJSON *details, const char *msg)
{
	const char *rest = strstr(msg, "is invalid: ");
	rest = rest ? rest + 12 : msg;
	const char *colon = strstr(rest, ": ");
	char field[128] = "";
	if (colon && (size_t)(colon - rest) < sizeof(field))
		snprintf(field, sizeof(field), "%.*s", (int)(colon - rest), rest);
	cJSON *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "reason", "FieldValueInvalid");
	cJSON_AddStringToObject(c, "message", field[0] ? colon + 2 : rest);
	cJSON_AddStringToObject(c, "field", field);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(details, "causes"), c);
}

cJSON *api_failure(const char *reason, const char *msg)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "kind", "Status");
	cJSON_AddStringToObject(j, "apiVersion", "v1");
	cJSON_AddObjectToObject(j, "metadata");
	cJSON_AddStringToObject(j, "status", "Failure");
	cJSON_AddStringToObject(j, "message", msg);
	cJSON_AddStringToObject(j, "reason", reason);
	return j;
}

void api_status(struct reply *r, int code, const char *reason, const struct call *c,
		const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON *j = api_failure(reason ? reason : api_reason_default(code), msg);
	cJSON *d = NULL;
	if (c && c->name) {
		d = cJSON_AddObjectToObject(j, "details");
		cJSON_AddStringToObject(d, "name", c->name);
		cJSON_AddStringToObject(d, "kind",
					code == 422 ? store_kind_name(c->kind)
						    : store_kind_resource(c->kind));
	}
	if (code == 422)
		api_causes(d ? d : cJSON_AddObjectToObject(j, "details"), msg);
	cJSON_AddNumberToObject(j, "code", code);
	api_json(r, code, j);
}

static cJSON *api_version_doc(void)
{
	static const char *const fields[][2] = {
		{ "major", "1" },
		{ "minor", "32" },
		{ "gitVersion", "v1.32.0-standin" },
		{ "gitCommit", "0000000000000000000000000000000000000000" },
		{ "gitTreeState", "clean" },
		{ "buildDate", "2026-01-01T00:00:00Z" },
		{ "goVersion", "go1.23.0" },
		{ "compiler", "gc" },
		{ "platform", "linux/amd64" },
	};
	cJSON *j = cJSON_CreateObject();
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		cJSON_AddStringToObject(j, fields[i][0], fields[i][1]);
	return j;
}

static cJSON *api_versions_doc(void)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "kind", "APIVersions");
	cJSON *v = cJSON_AddArrayToObject(j, "versions");
	cJSON_AddItemToArray(v, cJSON_CreateString("v1"));
	cJSON *a = cJSON_AddArrayToObject(j, "serverAddressByClientCIDRs");
	cJSON *e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "clientCIDR", "0.0.0.0/0");
	cJSON_AddStringToObject(e, "serverAddress", "127.0.0.1");
	cJSON_AddItemToArray(a, e);
	return j;
}

static void api_resource(cJSON *list, const char *name, const char *kind, bool namespaced,
			 const char *verbs, const char *shortname)
{
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "name", name);
	char singular[32];
	snprintf(singular, sizeof(singular), "%s", strchr(name, '/') ? "" : kind);
	for (char *p = singular; *p; p++)
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
	cJSON_AddStringToObject(r, "singularName", singular);
	cJSON_AddBoolToObject(r, "namespaced", namespaced);
	cJSON_AddStringToObject(r, "kind", kind);
	cJSON *v = cJSON_AddArrayToObject(r, "verbs");
	char buf[160];
	snprintf(buf, sizeof(buf), "%s", verbs);
	char *save = NULL;
	for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
		cJSON_AddItemToArray(v, cJSON_CreateString(t));
	if (shortname) {
		cJSON *sn = cJSON_AddArrayToObject(r, "shortNames");
		cJSON_AddItemToArray(sn, cJSON_CreateString(shortname));
		cJSON *cat = cJSON_AddArrayToObject(r, "categories");
		if (strcmp(name, "pods") == 0)
			cJSON_AddItemToArray(cat, cJSON_CreateString("all"));
	}
	cJSON_AddItemToArray(list, r);
}

#define API_VERBS_ALL "create delete deletecollection get list patch update watch"

static cJSON *api_v1_doc(const struct standin *s)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "kind", "APIResourceList");
	cJSON_AddStringToObject(j, "groupVersion", "v1");
	cJSON *l = cJSON_AddArrayToObject(j, "resources");
	api_resource(l, "events", "Event", true, API_VERBS_ALL, "ev");
	api_resource(l, "namespaces", "Namespace", false,
		     "create delete get list patch update watch", "ns");
	api_resource(l, "nodes", "Node", false, API_VERBS_ALL, "no");
	api_resource(l, "nodes/status", "Node", false, "get patch update", NULL);
	api_resource(l, "pods", "Pod", true, API_VERBS_ALL, "po");
	api_resource(l, "pods/log", "Pod", true, "get", NULL);
	if (s->o.resize)
		api_resource(l, "pods/resize", "Pod", true, "get patch update", NULL);
	api_resource(l, "pods/status", "Pod", true, "get patch update", NULL);
	api_resource(l, "services", "Service", true, API_VERBS_ALL, "svc");
	api_resource(l, "services/status", "Service", true, "get patch update", NULL);
	api_resource(l, "serviceaccounts", "ServiceAccount", true, API_VERBS_ALL, "sa");
	api_resource(l, "secrets", "Secret", true, API_VERBS_ALL, NULL);
	api_resource(l, "configmaps", "ConfigMap", true, API_VERBS_ALL, "cm");
	api_resource(l, "persistentvolumeclaims", "PersistentVolumeClaim", true, API_VERBS_ALL,
		     "pvc");
	api_resource(l, "persistentvolumeclaims/status", "PersistentVolumeClaim", true,
		     "get patch update", NULL);
	return j;
}

/* The kinds served in group/version (not core v1); true when any. */
static bool api_group_resources(const char *group, const char *version, cJSON *list)
{
	bool any = false;
	for (int k = KIND_NAMESPACE + 1; k < store_nkinds(); k++) {
		if (!store_kind_served(k) || strcmp(store_kind_group(k), group) != 0 ||
		    strcmp(store_kind_version(k), version) != 0)
			continue;
		any = true;
		if (!list)
			continue;
		api_resource(list, store_kind_resource(k), store_kind_name(k),
			     store_kind_namespaced(k), API_VERBS_ALL, store_kind_short(k));
		if (store_kind_status_sub(k)) {
			char sub[96];
			snprintf(sub, sizeof(sub), "%s/status", store_kind_resource(k));
			api_resource(list, sub, store_kind_name(k), store_kind_namespaced(k),
				     "get patch update", NULL);
		}
	}
	return any;
}

/* /apis/GROUP/VERSION */
static cJSON *api_group_version_doc(const char *group, const char *version)
{
	cJSON *j = cJSON_CreateObject();
	char gv[200];
	snprintf(gv, sizeof(gv), "%s/%s", group, version);
	cJSON_AddStringToObject(j, "kind", "APIResourceList");
	cJSON_AddStringToObject(j, "apiVersion", "v1");
	cJSON_AddStringToObject(j, "groupVersion", gv);
	api_group_resources(group, version, cJSON_AddArrayToObject(j, "resources"));
	return j;
}

/* One APIGroup of /apis: its one version (a group serves one here). */
static cJSON *api_group(int k)
{
	cJSON *g = cJSON_CreateObject();
	char gv[200];
	snprintf(gv, sizeof(gv), "%s/%s", store_kind_group(k), store_kind_version(k));
	cJSON_AddStringToObject(g, "name", store_kind_group(k));
	cJSON *vs = cJSON_AddArrayToObject(g, "versions");
	cJSON *v = cJSON_CreateObject();
	cJSON_AddStringToObject(v, "groupVersion", gv);
	cJSON_AddStringToObject(v, "version", store_kind_version(k));
	cJSON_AddItemToArray(vs, v);
	cJSON_AddItemToObject(g, "preferredVersion", cJSON_Duplicate(v, true));
	return g;
}

/* The first served kind of each group (in kind order), -1 past the end. */
static int api_next_group(int from)
{
	for (int k = from; k < store_nkinds(); k++) {
		if (!store_kind_served(k) || !store_kind_group(k)[0])
			continue;
		bool first = true;
		for (int e = 0; e < k && first; e++)
			first = !(store_kind_served(e) &&
				  strcmp(store_kind_group(e), store_kind_group(k)) == 0);
		if (first)
			return k;
	}
	return -1;
}

static cJSON *api_groups_doc(void)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "kind", "APIGroupList");
	cJSON_AddStringToObject(j, "apiVersion", "v1");
	cJSON *groups = cJSON_AddArrayToObject(j, "groups");
	for (int k = api_next_group(0); k >= 0; k = api_next_group(k + 1))
		cJSON_AddItemToArray(groups, api_group(k));
	return j;
}

/* /openapi/v3: one group-version, core v1. */
static cJSON *api_openapi_root(void)
{
	cJSON *j = cJSON_CreateObject();
	cJSON *paths = cJSON_AddObjectToObject(j, "paths");
	cJSON *v1 = cJSON_AddObjectToObject(paths, "api/v1");
	cJSON_AddStringToObject(v1, "serverRelativeURL", "/openapi/v3/api/v1?hash=standin1");
	for (int k = api_next_group(0); k >= 0; k = api_next_group(k + 1)) {
		char key[200], url[260];
		snprintf(key, sizeof(key), "apis/%s/%s", store_kind_group(k),
			 store_kind_version(k));
		snprintf(url, sizeof(url), "/openapi/v3/%s?hash=standin%d", key, store_nkinds());
		cJSON_AddStringToObject(cJSON_AddObjectToObject(paths, key), "serverRelativeURL",
					url);
	}
	return j;
}

/* /openapi/v3/api/v1: a path per kind whose PATCH takes fieldValidation,
 * which tells kubectl (1.27+) that the server validates the fields itself
 * (kubectl then sends fieldValidation=Strict; the stand-in checks what
 * it stores, not unknown fields) and needs no schema of its own.  No
 * schemas: kubectl's apply then builds strategic merge patches from its
 * built-in types. */
static cJSON *api_openapi_v1(const char *group, const char *version)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "openapi", "3.0.0");
	cJSON *info = cJSON_AddObjectToObject(j, "info");
	cJSON_AddStringToObject(info, "title", "Kubernetes");
	cJSON_AddStringToObject(info, "version", "v1.32.0-standin");
	cJSON *paths = cJSON_AddObjectToObject(j, "paths");
	for (int k = 0; k < store_nkinds(); k++) {
		if (!store_kind_served(k) || strcmp(store_kind_group(k), group) != 0 ||
		    strcmp(store_kind_version(k), version) != 0)
			continue;
		char path[400], prefix[200] = "/api/v1";
		if (group[0])
			snprintf(prefix, sizeof(prefix), "/apis/%s/%s", group, version);
		snprintf(path, sizeof(path), "%s/%s%s/{name}", prefix,
			 store_kind_namespaced((enum kind)k) ? "namespaces/{namespace}/" : "",
			 store_kind_resource((enum kind)k));
		cJSON *patch =
			cJSON_AddObjectToObject(cJSON_AddObjectToObject(paths, path), "patch");
		cJSON *gvk = cJSON_AddObjectToObject(patch, "x-kubernetes-group-version-kind");
		cJSON_AddStringToObject(gvk, "group", group);
		cJSON_AddStringToObject(gvk, "kind", store_kind_name((enum kind)k));
		cJSON_AddStringToObject(gvk, "version", version);
		cJSON *params = cJSON_AddArrayToObject(patch, "parameters");
		cJSON *fv = cJSON_CreateObject();
		cJSON_AddStringToObject(fv, "name", "fieldValidation");
		cJSON_AddStringToObject(fv, "in", "query");
		cJSON_AddStringToObject(cJSON_AddObjectToObject(fv, "schema"), "type", "string");
		cJSON_AddItemToArray(params, fv);
		cJSON_AddObjectToObject(patch, "responses");
	}
	return j;
}

/* /openapi/v2: an empty document.  kubectl before 1.27 asks for it in
 * protobuf only and validates against it; an empty message (no bytes)
 * has no definitions, and kubectl skips the validation of a kind it has
 * no schema for. */
static void api_openapi_v2(struct MHD_Connection *conn, struct reply *r)
{
	const char *a = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept");
	r->status = 200;
	if (a && strstr(a, "protobuf")) {
		r->body = strdup("");
		r->ctype = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
		return;
	}
	r->body = strdup("{\"swagger\":\"2.0\",\"info\":{\"title\":\"Kubernetes\","
			 "\"version\":\"v1.32.0-standin\"},\"paths\":{},\"definitions\":{}}");
}

/* /openapi/...: true when seg was one of them. */
static bool api_openapi(struct MHD_Connection *conn, char **seg, int n, struct reply *r)
{
	if (n < 2 || strcmp(seg[0], "openapi") != 0)
		return false;
	if (n == 2 && strcmp(seg[1], "v2") == 0)
		api_openapi_v2(conn, r);
	else if (n == 2 && strcmp(seg[1], "v3") == 0)
		api_json(r, 200, api_openapi_root());
	else if (n == 4 && strcmp(seg[1], "v3") == 0 && strcmp(seg[2], "api") == 0 &&
		 strcmp(seg[3], "v1") == 0)
		api_json(r, 200, api_openapi_v1("", "v1"));
	else if (n == 5 && strcmp(seg[1], "v3") == 0 && strcmp(seg[2], "apis") == 0 &&
		 api_group_resources(seg[3], seg[4], NULL))
		api_json(r, 200, api_openapi_v1(seg[3], seg[4]));
	else
		api_status(r, 404, NULL, NULL, "the server could not find the requested resource");
	return true;
}

/* /version, /api, /api/v1, /apis, /healthz: true when seg was one. */
static bool api_discovery(struct standin *s, char **seg, int n, struct reply *r)
{
	if (n == 1 && strcmp(seg[0], "version") == 0)
		api_json(r, 200, api_version_doc());
	else if (n == 1 && strcmp(seg[0], "api") == 0)
		api_json(r, 200, api_versions_doc());
	else if (n == 2 && strcmp(seg[0], "api") == 0 && strcmp(seg[1], "v1") == 0)
		api_json(r, 200, api_v1_doc(s));
	else if (n == 1 && strcmp(seg[0], "apis") == 0)
		api_json(r, 200, api_groups_doc());
	else if (n == 3 && strcmp(seg[0], "apis") == 0 && api_group_resources(seg[1], seg[2], NULL))
		api_json(r, 200, api_group_version_doc(seg[1], seg[2]));
	else if (n == 1 && (strcmp(seg[0], "healthz") == 0 || strcmp(seg[0], "readyz") == 0 ||
			    strcmp(seg[0], "livez") == 0)) {
		r->status = 200;
		r->body = strdup("ok");
		r->ctype = "text/plain";
	} else
		return false;
	return true;
}

/* Split url ("/api/v1/...") into at most API_MAX_SEG segments of buf. */
static int api_split(char *buf, char **seg)
{
	int n = 0;
	char *save = NULL;
	for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		if (n == API_MAX_SEG)
			return -1;
		seg[n++] = t;
	}
	return n;
}

/* Fill c's kind, ns, name and sub from /api/v1/...: 0, or -ENOENT. */
static int api_parse_path(struct call *c, char **seg, int n)
{
	const char *group = "", *version = "v1";
	int i = 2;
	if (n >= 3 && strcmp(seg[0], "api") == 0 && strcmp(seg[1], "v1") == 0) {
		i = 2;
	} else if (n >= 4 && strcmp(seg[0], "apis") == 0) {
		group = seg[1];
		version = seg[2];
		i = 3;
	} else {
		return -ENOENT;
	}
	if (strcmp(seg[i], "namespaces") == 0 && n >= i + 3) {
		c->ns = seg[i + 1];
		i += 2;
	}
	int k = store_kind_from_resource(group, version, seg[i]);
	if (k < 0 || (c->ns && !store_kind_namespaced(k)))
		return -ENOENT;
	c->kind = (enum kind)k;
	c->name = n > i + 1 ? seg[i + 1] : NULL;
	c->sub = n > i + 2 ? seg[i + 2] : NULL;
	if (n > i + 3)
		return -ENOENT;
	return 0;
}

static bool api_wants_table(struct MHD_Connection *conn)
{
	const char *a = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept");
	return a && strstr(a, "as=Table") && strstr(a, "g=meta.k8s.io");
}

/* The request in the audit log, as RBAC names it: who (the bearer token,
 * "-" without one), the verb, the group ("-" for core), the resource with
 * its subresource, the namespace ("-" none).  One write per line. */
static void api_audit(const struct standin *s, const struct call *c)
{
	if (s->audit_fd < 0)
		return;
	const char *auth = MHD_lookup_connection_value(c->c, MHD_HEADER_KIND, "Authorization");
	const char *user = auth && strncmp(auth, "Bearer ", 7) == 0 && auth[7] ? auth + 7 : "-";
	const char *w = api_query(c, "watch");
	bool watch = w && (strcmp(w, "true") == 0 || strcmp(w, "1") == 0);
	const char *verb = strcmp(c->method, "POST") == 0    ? "create"
			   : strcmp(c->method, "PUT") == 0   ? "update"
			   : strcmp(c->method, "PATCH") == 0 ? "patch"
			   : strcmp(c->method, "DELETE") == 0
				   ? (c->name ? "delete" : "deletecollection")
			   : c->name ? "get"
			   : watch   ? "watch"
				     : "list";
	const char *group = store_kind_group(c->kind);
	char line[512];
	int n = snprintf(line, sizeof(line), "%.128s %s %s %s%s%s %s\n", user, verb,
			 group[0] ? group : "-", store_kind_resource(c->kind), c->sub ? "/" : "",
			 c->sub ? c->sub : "", c->ns ? c->ns : "-");
	if (n > 0 &&
	    write(s->audit_fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line)) < 0)
		return; /* a test's log: nothing to do about it */
}

static void api_route(struct standin *s, struct call *c, char *url, struct reply *r)
{
	char *seg[API_MAX_SEG];
	int n = api_split(url, seg);
	if (n < 0) {
		api_status(r, 404, NULL, NULL, "the server could not find the requested resource");
		return;
	}
	if (api_discovery(s, seg, n, r) || api_openapi(c->c, seg, n, r))
		return;
	if (n >= 1 && strcmp(seg[0], "standin") == 0) {
		admin_handle(s, c, seg, n, r);
		return;
	}
	if (api_parse_path(c, seg, n) < 0) {
		api_status(r, 404, NULL, NULL, "the server could not find the requested resource");
		return;
	}
	api_audit(s, c);
	c->table = api_wants_table(c->c);
	const char *inc = api_query(c, "includeObject");
	c->table_object = inc && strcmp(inc, "Object") == 0;
	const char *w = api_query(c, "watch");
	if (strcmp(c->method, "GET") == 0 && !c->name && w &&
	    (strcmp(w, "true") == 0 || strcmp(w, "1") == 0))
		watch_start(c, r);
	else if (c->sub && strcmp(c->sub, "log") == 0 && c->kind == KIND_POD)
		watch_log(c, r);
	else
		objects_handle(c, r);
}

static enum MHD_Result api_send(struct MHD_Connection *conn, struct reply *r)
{
	struct MHD_Response *resp = r->stream;
	if (!resp) {
		char *b = r->body ? r->body : strdup("");
		resp = MHD_create_response_from_buffer(strlen(b), b, MHD_RESPMEM_MUST_FREE);
		MHD_add_response_header(resp, "Content-Type",
					r->ctype ? r->ctype : "application/json");
	}
	MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
	enum MHD_Result ret = MHD_queue_response(conn, (unsigned)r->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void api_delay(struct standin *s)
{
	pthread_mutex_lock(&s->mu);
	int ms = s->fault_delay_ms;
	pthread_mutex_unlock(&s->mu);
	if (ms > 0)
		usleep((useconds_t)ms * 1000);
}

/* Gather the body; 1 while more is coming, 0 when whole. */
static int api_gather(struct api_req *q, const char *data, size_t *size)
{
	if (*size == 0)
		return 0;
	if (q->len + *size > API_MAX_BODY) {
		q->too_big = true;
	} else {
		char *nb = realloc(q->body, q->len + *size + 1);
		if (nb) {
			memcpy(nb + q->len, data, *size);
			q->len += *size;
			nb[q->len] = 0;
			q->body = nb;
		}
	}
	*size = 0;
	return 1;
}

static enum MHD_Result api_access(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *data,
				  size_t *size, void **con_cls)
{
	(void)version;
	struct standin *s = cls;
	struct api_req *q = *con_cls;
	if (!q) {
		*con_cls = calloc(1, sizeof(*q));
		return *con_cls ? MHD_YES : MHD_NO;
	}
	if (api_gather(q, data, size))
		return MHD_YES;
	api_delay(s);
	struct reply r = { .status = 200 };
	struct call c = {
		.s = s, .c = conn, .method = method, .body = q->body ? q->body : "", .len = q->len
	};
	char path[2048];
	snprintf(path, sizeof(path), "%s", url);
	if (q->too_big)
		api_status(&r, 413, "RequestEntityTooLarge", NULL, "request entity too large");
	else
		api_route(s, &c, path, &r);
	return api_send(conn, &r);
}

static void api_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			  enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)conn;
	(void)toe;
	struct api_req *q = *con_cls;
	if (q) {
		free(q->body);
		free(q);
	}
	*con_cls = NULL;
}

struct MHD_Daemon *api_start(struct standin *s, int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)*port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	struct MHD_Daemon *d =
		MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0,
				 NULL, NULL, api_access, s, MHD_OPTION_SOCK_ADDR,
				 (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, api_completed,
				 s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)1024,
				 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)3600, MHD_OPTION_END);
	if (!d)
		return NULL;
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	*port = info ? info->port : *port;
	return d;
}

void api_stop(struct MHD_Daemon *d)
{
	if (d)
		MHD_stop_daemon(d);
}
