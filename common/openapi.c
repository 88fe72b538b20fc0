/*
 * openapi.c: OpenAPI 3 document from a route table and wire field tables
 * (see openapi.h).  Used by rover-brain's and rover-master's api.c.
 */
#include "openapi.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static cJSON *schemas(const struct rv_openapi *spec)
{
	cJSON *all = cJSON_Parse(spec->reply_schemas);
	if (!all)
		all = cJSON_CreateObject();
	const struct rv_wire_message *m = spec->messages;
	for (int i = 0; i < spec->nmessages; i++) {
		cJSON *s = cJSON_AddObjectToObject(all, m[i].name);
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
		if (spec->extend && !strcmp(m[i].name, spec->extend)) {
			cJSON *extra = cJSON_Parse(spec->extend_fields);
			cJSON *it;
			while (extra && (it = extra->child)) {
				cJSON_DetachItemViaPointer(extra, it);
				cJSON_AddItemToObject(props, it->string, it);
			}
			cJSON_Delete(extra);
		}
	}
	return all;
}

static cJSON *json_content(const char *schema)
{
	cJSON *content = cJSON_CreateObject();
	cJSON *mt = cJSON_AddObjectToObject(content, "application/json");
	cJSON_AddItemToObject(mt, "schema", ref_schema(schema));
	return content;
}

/* A response; a 4xx or 5xx code replies an Error. */
static void add_response(cJSON *responses, const char *code, const char *desc)
{
	/* A code named twice (a route's own 413 and the body limit's): one
	 * response whose description says both. */
	cJSON *had = cJSON_GetObjectItemCaseSensitive(responses, code);
	const char *was = had ? cJSON_GetStringValue(cJSON_GetObjectItem(had, "description"))
			      : NULL;
	if (had) {
		char both[1024];
		snprintf(both, sizeof(both), "%s; or %s", was ? was : "", desc);
		cJSON_ReplaceItemInObjectCaseSensitive(had, "description",
						       cJSON_CreateString(both));
		return;
	}
	cJSON *e = cJSON_AddObjectToObject(responses, code);
	cJSON_AddStringToObject(e, "description", desc);
	if (code[0] >= '4')
		cJSON_AddItemToObject(e, "content", json_content("Error"));
}

/* A response with an HTML body that is not ours. */
static void add_html_response(cJSON *responses, const char *code, const char *desc)
{
	cJSON *e = cJSON_AddObjectToObject(responses, code);
	cJSON_AddStringToObject(e, "description", desc);
	cJSON *mt = cJSON_AddObjectToObject(cJSON_AddObjectToObject(e, "content"), "text/html");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(mt, "schema"), "type", "string");
}

/* "code:description;..." into responses. */
static void add_responses(cJSON *responses, const char *list)
{
	if (!list)
		return;
	char q[512];
	snprintf(q, sizeof(q), "%s", list);
	char *save = NULL;
	for (char *tok = strtok_r(q, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
		char *desc = strchr(tok, ':');
		if (!desc)
			continue;
		*desc++ = 0;
		add_response(responses, tok, desc);
	}
}

/* A required string parameter for each {name} of the pattern. */
static void add_path_params(cJSON *params, const char *pattern)
{
	for (const char *o = strchr(pattern, '{'); o; o = strchr(o + 1, '{')) {
		const char *c = strchr(o, '}');
		if (!c)
			break;
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int)(c - o - 1), o + 1);
		cJSON *p = cJSON_CreateObject();
		cJSON_AddStringToObject(p, "name", name);
		cJSON_AddStringToObject(p, "in", "path");
		cJSON_AddBoolToObject(p, "required", 1);
		cJSON_AddStringToObject(cJSON_AddObjectToObject(p, "schema"), "type", "string");
		cJSON_AddItemToArray(params, p);
	}
}

static void add_query_params(cJSON *params, const char *query)
{
	if (!query)
		return;
	char q[512];
	snprintf(q, sizeof(q), "%s", query);
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

static void add_operation(cJSON *paths, const struct rv_http_route *rt,
			  const struct rv_openapi_route *d, const struct rv_openapi *spec)
{
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
	if (d->id) {
		cJSON_AddStringToObject(op, "operationId", d->id);
	} else {
		/* "GET /v1/jobs/{uid}" -> "get_v1_jobs_uid" */
		char id[160];
		size_t n = (size_t)snprintf(id, sizeof(id), "%s", method);
		for (const char *c = rt->pattern; *c && n + 1 < sizeof(id); c++) {
			if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			    (*c >= '0' && *c <= '9'))
				id[n++] = *c;
			else if (*c == '/' || *c == '.')
				id[n++] = '_';
		}
		id[n] = 0;
		cJSON_AddStringToObject(op, "operationId", id);
	}
	cJSON *params = cJSON_AddArrayToObject(op, "parameters");
	add_path_params(params, rt->pattern);
	add_query_params(params, d->query);
	if (d->body) {
		cJSON *rb = cJSON_AddObjectToObject(op, "requestBody");
		cJSON_AddBoolToObject(rb, "required", 1);
		cJSON_AddItemToObject(rb, "content", json_content(d->body));
	}
	bool write = rt->flags & RV_HTTP_WRITE;
	/* Reads need no token (an empty list says so); writes the bearer one. */
	cJSON *sec = cJSON_AddArrayToObject(op, "security");
	if (write) {
		cJSON *req = cJSON_CreateObject();
		cJSON_AddArrayToObject(req, "bearer");
		cJSON_AddItemToArray(sec, req);
	}
	cJSON *responses = cJSON_AddObjectToObject(op, "responses");
	cJSON *ok = cJSON_AddObjectToObject(responses, d->ok_code ? d->ok_code : "200");
	cJSON_AddStringToObject(ok, "description", "success");
	if (d->ok)
		cJSON_AddItemToObject(ok, "content", json_content(d->ok));
	else if (d->ok_text)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(ok,
											"content"),
								"text/plain"),
					"x-format", d->ok_text);
	if (d->body || d->query)
		add_response(responses, "400", "bad input; field names the offender");
	if (write) {
		add_response(responses, "401", "missing or wrong bearer token");
		add_responses(responses, spec->write_errors);
	}
	add_responses(responses, d->errors);
	add_responses(responses, spec->all_errors);
	/* libmicrohttpd's own answers, before any handler runs (an HTML page). */
	add_html_response(responses, "414", "request line over the server's memory limit");
	add_html_response(responses, "431", "request headers over the server's memory limit");
}

char *rv_openapi_server_url(const char *host_header, char *out, size_t n)
{
	snprintf(out, n, "/");
	if (!host_header || !host_header[0] || strlen(host_header) + 8 > n)
		return out;
	for (const char *c = host_header; *c; c++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]",
			    *c))
			return out;
	snprintf(out, n, "http://%s", host_header);
	return out;
}

cJSON *rv_openapi_doc(const struct rv_openapi *spec)
{
	cJSON *doc = cJSON_CreateObject();
	cJSON_AddStringToObject(doc, "openapi", "3.0.3");
	cJSON *info = cJSON_AddObjectToObject(doc, "info");
	cJSON_AddStringToObject(info, "title", spec->title);
	cJSON_AddStringToObject(info, "version", "1");
	cJSON_AddStringToObject(info, "description", spec->description);
	cJSON *servers = cJSON_AddArrayToObject(doc, "servers");
	cJSON *server = cJSON_CreateObject();
	cJSON_AddStringToObject(server, "url",
				spec->server_url && spec->server_url[0] ? spec->server_url : "/");
	cJSON_AddStringToObject(server, "description", "this daemon, as the document was fetched");
	cJSON_AddItemToArray(servers, server);
	cJSON *paths = cJSON_AddObjectToObject(doc, "paths");
	for (int i = 0; i < spec->nroutes; i++)
		if (!spec->docs[i].hidden)
			add_operation(paths, &spec->routes[i], &spec->docs[i], spec);
	cJSON *components = cJSON_AddObjectToObject(doc, "components");
	cJSON_AddItemToObject(components, "schemas", schemas(spec));
	cJSON *ss = cJSON_AddObjectToObject(components, "securitySchemes");
	cJSON *bearer = cJSON_AddObjectToObject(ss, "bearer");
	cJSON_AddStringToObject(bearer, "type", "http");
	cJSON_AddStringToObject(bearer, "scheme", "bearer");
	return doc;
}
