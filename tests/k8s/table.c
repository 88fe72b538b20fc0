/*
 * table.c: server-side printing.  kubectl get asks for
 * "application/json;as=Table;v=v1;g=meta.k8s.io" and prints the Table's
 * cells as they come; its columns here are those of the API server's
 * printers (NAME READY STATUS RESTARTS AGE, with IP and NODE for -o wide).
 * Pure but for the clock (AGE).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "standin.h"

struct table_col {
	const char *name, *type, *format;
	int priority;
};

static const struct table_col table_pod[] = {
	{ "Name", "string", "name", 0 },
	{ "Ready", "string", "", 0 },
	{ "Status", "string", "", 0 },
	{ "Restarts", "string", "", 0 },
	{ "Age", "string", "", 0 },
	{ "IP", "string", "", 1 },
	{ "Node", "string", "", 1 },
	{ "Nominated Node", "string", "", 1 },
	{ "Readiness Gates", "string", "", 1 },
	{ NULL, NULL, NULL, 0 },
};
static const struct table_col table_event[] = {
	{ "Last Seen", "string", "", 0 }, { "Type", "string", "", 0 },
	{ "Reason", "string", "", 0 },    { "Object", "string", "", 0 },
	{ "Message", "string", "", 0 },   { "Name", "string", "name", 1 },
	{ NULL, NULL, NULL, 0 },
};
static const struct table_col table_node[] = {
	{ "Name", "string", "name", 0 },    { "Status", "string", "", 0 },
	{ "Roles", "string", "", 0 },       { "Age", "string", "", 0 },
	{ "Version", "string", "", 0 },     { "Internal-IP", "string", "", 1 },
	{ "External-IP", "string", "", 1 }, { NULL, NULL, NULL, 0 },
};
static const struct table_col table_ns[] = {
	{ "Name", "string", "name", 0 },
	{ "Status", "string", "", 0 },
	{ "Age", "string", "", 0 },
	{ NULL, NULL, NULL, 0 },
};

static const char *table_str(const cJSON *j, const char *a, const char *b)
{
	const cJSON *x = cJSON_GetObjectItem(j, a);
	const char *v = cJSON_GetStringValue(b ? cJSON_GetObjectItem(x, b) : x);
	return v ? v : "";
}

/* "5s", "3m2s", "2h10m", "4d" as kubectl prints ages. */
static void table_age(const char *ts, char *out, size_t size)
{
	struct tm tm = { 0 };
	if (!ts || !*ts || !strptime(ts, "%Y-%m-%dT%H:%M:%SZ", &tm)) {
		snprintf(out, size, "<unknown>");
		return;
	}
	long d = (long)difftime(time(NULL), timegm(&tm));
	if (d < 0)
		d = 0;
	if (d < 120)
		snprintf(out, size, "%lds", d);
	else if (d < 600)
		snprintf(out, size, "%ldm%lds", d / 60, d % 60);
	else if (d < 3 * 3600)
		snprintf(out, size, "%ldm", d / 60);
	else if (d < 8 * 3600)
		snprintf(out, size, "%ldh%ldm", d / 3600, (d % 3600) / 60);
	else if (d < 2 * 86400)
		snprintf(out, size, "%ldh", d / 3600);
	else
		snprintf(out, size, "%ldd", d / 86400);
}

/* The STATUS column: a container's reason over the phase, Terminating. */
static const char *table_pod_status(const cJSON *pod)
{
	const cJSON *st = cJSON_GetObjectItem(pod, "status");
	const char *reason = table_str(pod, "status", "phase");
	if (*table_str(pod, "status", "reason"))
		reason = table_str(pod, "status", "reason");
	const cJSON *cs;
	cJSON_ArrayForEach(cs, cJSON_GetObjectItem(st, "containerStatuses"))
	{
		const cJSON *state = cJSON_GetObjectItem(cs, "state");
		const char *w = table_str(state, "waiting", "reason");
		const char *t = table_str(state, "terminated", "reason");
		if (*w)
			reason = w;
		else if (*t)
			reason = t;
	}
	if (cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "deletionTimestamp"))
		reason = "Terminating";
	return reason;
}

static void table_pod_cells(const cJSON *pod, cJSON *cells)
{
	const cJSON *st = cJSON_GetObjectItem(pod, "status");
	const cJSON *cs;
	int total = cJSON_GetArraySize(
		cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "containers"));
	int ready = 0, restarts = 0;
	char buf[64], age[32];
	cJSON_ArrayForEach(cs, cJSON_GetObjectItem(st, "containerStatuses"))
	{
		ready += cJSON_IsTrue(cJSON_GetObjectItem(cs, "ready"));
		const cJSON *rc = cJSON_GetObjectItem(cs, "restartCount");
		restarts += cJSON_IsNumber(rc) ? rc->valueint : 0;
	}
	cJSON_AddItemToArray(cells, cJSON_CreateString(table_str(pod, "metadata", "name")));
	snprintf(buf, sizeof(buf), "%d/%d", ready, total);
	cJSON_AddItemToArray(cells, cJSON_CreateString(buf));
	cJSON_AddItemToArray(cells, cJSON_CreateString(table_pod_status(pod)));
	snprintf(buf, sizeof(buf), "%d", restarts);
	cJSON_AddItemToArray(cells, cJSON_CreateString(buf));
	table_age(table_str(pod, "metadata", "creationTimestamp"), age, sizeof(age));
	cJSON_AddItemToArray(cells, cJSON_CreateString(age));
	const char *ip = table_str(pod, "status", "podIP");
	const char *node = table_str(pod, "spec", "nodeName");
	cJSON_AddItemToArray(cells, cJSON_CreateString(*ip ? ip : "<none>"));
	cJSON_AddItemToArray(cells, cJSON_CreateString(*node ? node : "<none>"));
	cJSON_AddItemToArray(cells, cJSON_CreateString("<none>"));
	cJSON_AddItemToArray(cells, cJSON_CreateString("<none>"));
}

static void table_event_cells(const cJSON *ev, cJSON *cells)
{
	char age[32], obj[320];
	table_age(table_str(ev, "lastTimestamp", NULL), age, sizeof(age));
	cJSON_AddItemToArray(cells, cJSON_CreateString(age));
	cJSON_AddItemToArray(cells, cJSON_CreateString(table_str(ev, "type", NULL)));
	cJSON_AddItemToArray(cells, cJSON_CreateString(table_str(ev, "reason", NULL)));
	char kind[32];
	snprintf(kind, sizeof(kind), "%s", table_str(ev, "involvedObject", "kind"));
	for (char *p = kind; *p; p++)
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
	snprintf(obj, sizeof(obj), "%s/%s", kind, table_str(ev, "involvedObject", "name"));
	cJSON_AddItemToArray(cells, cJSON_CreateString(obj));
	cJSON_AddItemToArray(cells, cJSON_CreateString(table_str(ev, "message", NULL)));
	cJSON_AddItemToArray(cells, cJSON_CreateString(table_str(ev, "metadata", "name")));
}

static void table_node_cells(const cJSON *node, cJSON *cells)
{
	const cJSON *c;
	const char *ready = "Unknown";
	char age[32], status[64];
	const cJSON *conds = cJSON_GetObjectItem(cJSON_GetObjectItem(node, "status"), "conditions");
	cJSON_ArrayForEach(c, conds)
	{
		if (strcmp(table_str(c, "type", NULL), "Ready") == 0)
			ready = strcmp(table_str(c, "status", NULL), "True") == 0 ? "Ready"
										  : "NotReady";
	}
	snprintf(status, sizeof(status), "%s%s", ready,
		 cJSON_IsTrue(
			 cJSON_GetObjectItem(cJSON_GetObjectItem(node, "spec"), "unschedulable"))
			 ? ",SchedulingDisabled"
			 : "");
	cJSON_AddItemToArray(cells, cJSON_CreateString(table_str(node, "metadata", "name")));
	cJSON_AddItemToArray(cells, cJSON_CreateString(status));
	cJSON_AddItemToArray(cells, cJSON_CreateString("<none>"));
	table_age(table_str(node, "metadata", "creationTimestamp"), age, sizeof(age));
	cJSON_AddItemToArray(cells, cJSON_CreateString(age));
	const cJSON *info = cJSON_GetObjectItem(cJSON_GetObjectItem(node, "status"), "nodeInfo");
	cJSON_AddItemToArray(cells, cJSON_CreateString(table_str(info, "kubeletVersion", NULL)));
	cJSON_AddItemToArray(cells, cJSON_CreateString("127.0.0.1"));
	cJSON_AddItemToArray(cells, cJSON_CreateString("<none>"));
}

static void table_ns_cells(const cJSON *ns, cJSON *cells)
{
	char age[32];
	cJSON_AddItemToArray(cells, cJSON_CreateString(table_str(ns, "metadata", "name")));
	cJSON_AddItemToArray(cells, cJSON_CreateString(table_str(ns, "status", "phase")));
	table_age(table_str(ns, "metadata", "creationTimestamp"), age, sizeof(age));
	cJSON_AddItemToArray(cells, cJSON_CreateString(age));
}

/* A printer column's simple JSONPath (".status.phase"), as the column's
 * type wants it ("" when absent; a date as an age). */
static cJSON *table_path(const cJSON *item, const cJSON *col)
{
	const char *path = cJSON_GetStringValue(cJSON_GetObjectItem(col, "jsonPath"));
	const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(col, "type"));
	char buf[256], age[32];
	snprintf(buf, sizeof(buf), "%s", path ? path : "");
	const cJSON *v = item;
	char *save = NULL;
	for (char *t = strtok_r(buf, ".", &save); t && v; t = strtok_r(NULL, ".", &save))
		v = cJSON_GetObjectItem(v, t);
	if (cJSON_IsNumber(v))
		return cJSON_CreateNumber(v->valuedouble);
	if (cJSON_IsBool(v))
		return cJSON_CreateString(cJSON_IsTrue(v) ? "true" : "false");
	if (!cJSON_IsString(v))
		return cJSON_CreateString("");
	if (type && strcmp(type, "date") == 0) {
		table_age(v->valuestring, age, sizeof(age));
		return cJSON_CreateString(age);
	}
	return cJSON_CreateString(v->valuestring);
}

/* Any other kind: Name and its CRD's printer columns, else Name and Age. */
static void table_generic_cells(enum kind k, const cJSON *item, cJSON *cells)
{
	char age[32];
	const cJSON *col;
	cJSON_AddItemToArray(cells, cJSON_CreateString(table_str(item, "metadata", "name")));
	cJSON_ArrayForEach(col, store_kind_columns(k))
		cJSON_AddItemToArray(cells, table_path(item, col));
	if (store_kind_columns(k)) /* a CRD's columns are all there is */
		return;
	table_age(table_str(item, "metadata", "creationTimestamp"), age, sizeof(age));
	cJSON_AddItemToArray(cells, cJSON_CreateString(age));
}

static cJSON *table_row(enum kind k, const cJSON *item, bool include_object)
{
	cJSON *row = cJSON_CreateObject();
	cJSON *cells = cJSON_AddArrayToObject(row, "cells");
	if (k == KIND_POD)
		table_pod_cells(item, cells);
	else if (k == KIND_EVENT)
		table_event_cells(item, cells);
	else if (k == KIND_NODE)
		table_node_cells(item, cells);
	else if (k == KIND_NAMESPACE)
		table_ns_cells(item, cells);
	else
		table_generic_cells(k, item, cells);
	cJSON *o;
	if (include_object) {
		o = cJSON_Duplicate(item, true);
	} else {
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "kind", "PartialObjectMetadata");
		cJSON_AddStringToObject(o, "apiVersion", "meta.k8s.io/v1");
		cJSON_AddItemToObject(o, "metadata",
				      cJSON_Duplicate(cJSON_GetObjectItem(item, "metadata"), true));
	}
	cJSON_AddItemToObject(row, "object", o);
	return row;
}

static void table_coldef(cJSON *defs, const char *name, const char *type, const char *format,
			 int priority)
{
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "name", name ? name : "");
	cJSON_AddStringToObject(d, "type", type);
	cJSON_AddStringToObject(d, "format", format);
	cJSON_AddStringToObject(d, "description", "");
	cJSON_AddNumberToObject(d, "priority", priority);
	cJSON_AddItemToArray(defs, d);
}

cJSON *table_of(enum kind k, cJSON *const *items, int n, bool with_columns, bool include_object)
{
	const struct table_col *cols = k == KIND_POD         ? table_pod
				       : k == KIND_EVENT     ? table_event
				       : k == KIND_NODE      ? table_node
				       : k == KIND_NAMESPACE ? table_ns
							     : NULL;
	cJSON *t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "kind", "Table");
	cJSON_AddStringToObject(t, "apiVersion", "meta.k8s.io/v1");
	cJSON_AddObjectToObject(t, "metadata");
	cJSON *defs = cJSON_AddArrayToObject(t, "columnDefinitions");
	for (int i = 0; with_columns && cols && cols[i].name; i++)
		table_coldef(defs, cols[i].name, cols[i].type, cols[i].format, cols[i].priority);
	if (with_columns && !cols) {
		const cJSON *col;
		table_coldef(defs, "Name", "string", "name", 0);
		cJSON_ArrayForEach(col, store_kind_columns(k))
		{
			const char *ty = cJSON_GetStringValue(cJSON_GetObjectItem(col, "type"));
			const cJSON *pr = cJSON_GetObjectItem(col, "priority");
			table_coldef(defs, cJSON_GetStringValue(cJSON_GetObjectItem(col, "name")),
				     ty && strcmp(ty, "date") != 0 ? ty : "string", "",
				     cJSON_IsNumber(pr) ? pr->valueint : 0);
		}
		if (!store_kind_columns(k))
			table_coldef(defs, "Age", "string", "", 0);
	}
	cJSON *rows = cJSON_AddArrayToObject(t, "rows");
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(rows, table_row(k, items[i], include_object));
	return t;
}
