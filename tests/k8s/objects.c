/*
 * objects.c: get, list, create, update (PUT), patch and delete of pods,
 * events, nodes and namespaces, with the API server's rules that clients
 * notice: defaulting at create, generateName, 409 AlreadyExists and
 * Conflict on a stale resourceVersion, the status subresource (only status
 * changes there, never through the main resource), a pod's spec immutable
 * but for its image and (through pods/resize) its resources, graceful
 * deletion and ownerReferences.  Runs on the connection's thread; takes
 * s->mu for the whole call.
 */
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "standin.h"

static bool objects_name_ok(const char *n)
{
	size_t len = strlen(n);
	if (len == 0 || len > 253 || !isalnum((unsigned char)n[0]) ||
	    !isalnum((unsigned char)n[len - 1]))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!(islower((unsigned char)n[i]) || isdigit((unsigned char)n[i]) || n[i] == '-' ||
		      n[i] == '.'))
			return false;
	return true;
}

/* j[a][b] (j[b] when a is NULL) as a string, "" when absent. */
static const char *objects_str(const cJSON *j, const char *a, const char *b)
{
	const cJSON *o = a ? cJSON_GetObjectItem(j, a) : j;
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(o, b));
	return v ? v : "";
}

static cJSON *objects_md(cJSON *j)
{
	cJSON *md = cJSON_GetObjectItem(j, "metadata");
	return cJSON_IsObject(md) ? md : NULL;
}

static void objects_set(cJSON *obj, const char *key, cJSON *val)
{
	if (cJSON_GetObjectItem(obj, key))
		cJSON_ReplaceItemInObject(obj, key, val);
	else
		cJSON_AddItemToObject(obj, key, val);
}

static void objects_default(cJSON *obj, const char *key, cJSON *val)
{
	if (cJSON_GetObjectItem(obj, key))
		cJSON_Delete(val);
	else
		cJSON_AddItemToObject(obj, key, val);
}

/* Guaranteed: every container's requests equal its limits for cpu and
 * memory; BestEffort: none has any; else Burstable. */
static const char *objects_qos(const cJSON *spec)
{
	bool any = false, all = true;
	const cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(spec, "containers"))
	{
		const cJSON *res = cJSON_GetObjectItem(c, "resources");
		const cJSON *req = cJSON_GetObjectItem(res, "requests");
		const cJSON *lim = cJSON_GetObjectItem(res, "limits");
		any = any || cJSON_GetArraySize(req) > 0 || cJSON_GetArraySize(lim) > 0;
		const char *keys[] = { "cpu", "memory" };
		for (int i = 0; i < 2; i++) {
			const cJSON *a = cJSON_GetObjectItem(req, keys[i]);
			const cJSON *b = cJSON_GetObjectItem(lim, keys[i]);
			all = all && a && b && cJSON_Compare(a, b, true);
		}
	}
	return !any ? "BestEffort" : all ? "Guaranteed" : "Burstable";
}

/* The API server's defaults for a container and a pod. */
static void objects_default_pod(struct standin *s, cJSON *pod)
{
	cJSON *spec = cJSON_GetObjectItem(pod, "spec");
	cJSON *c;
	objects_default(spec, "restartPolicy", cJSON_CreateString("Always"));
	objects_default(spec, "schedulerName", cJSON_CreateString("default-scheduler"));
	objects_default(spec, "terminationGracePeriodSeconds", cJSON_CreateNumber(30));
	objects_default(spec, "dnsPolicy", cJSON_CreateString("ClusterFirst"));
	objects_default(spec, "securityContext", cJSON_CreateObject());
	objects_default(spec, "enableServiceLinks", cJSON_CreateBool(true));
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(spec, "containers"))
	{
		objects_default(c, "imagePullPolicy", cJSON_CreateString("IfNotPresent"));
		objects_default(c, "terminationMessagePath",
				cJSON_CreateString("/dev/termination-log"));
		objects_default(c, "terminationMessagePolicy", cJSON_CreateString("File"));
		objects_default(c, "resources", cJSON_CreateObject());
		cJSON *res = cJSON_GetObjectItem(c, "resources");
		cJSON *lim = cJSON_GetObjectItem(res, "limits");
		if (cJSON_IsObject(lim)) {
			objects_default(res, "requests", cJSON_CreateObject());
			cJSON *req = cJSON_GetObjectItem(res, "requests");
			cJSON *l;
			cJSON_ArrayForEach(l, lim)
			{
				objects_default(req, l->string, cJSON_Duplicate(l, true));
			}
		}
	}
	cJSON *st = cJSON_CreateObject();
	cJSON_AddStringToObject(st, "phase", "Pending");
	cJSON_AddStringToObject(st, "qosClass", objects_qos(spec));
	objects_set(pod, "status", st);
	(void)s;
}

/* 0, or a 422 in r naming the field. */
static int objects_validate_pod(const struct call *c, cJSON *pod, struct reply *r)
{
	const cJSON *spec = cJSON_GetObjectItem(pod, "spec");
	const cJSON *cs = cJSON_GetObjectItem(spec, "containers");
	const cJSON *ct;
	if (!cJSON_IsArray(cs) || cJSON_GetArraySize(cs) == 0) {
		api_status(r, 422, "Invalid", c,
			   "Pod \"%s\" is invalid: spec.containers: Required value",
			   c->name ? c->name : "");
		return -EINVAL;
	}
	int i = 0;
	cJSON_ArrayForEach(ct, cs)
	{
		const char *f = !cJSON_IsString(cJSON_GetObjectItem(ct, "name"))    ? "name"
				: !cJSON_IsString(cJSON_GetObjectItem(ct, "image")) ? "image"
										    : NULL;
		if (f) {
			api_status(r, 422, "Invalid", c,
				   "Pod is invalid: spec.containers[%d].%s: Required value", i, f);
			return -EINVAL;
		}
		i++;
	}
	return 0;
}

static void objects_random_suffix(char *out, size_t n)
{
	static const char al[] = "bcdfghjklmnpqrstvwxz2456789";
	unsigned char b[8];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		memset(b, 7, sizeof(b));
	for (size_t i = 0; i + 1 < n && i < sizeof(b); i++)
		out[i] = al[b[i] % (sizeof(al) - 1)];
	out[n - 1] = 0;
}

/* The name to create under: metadata.name or generateName + 5 letters. */
static int objects_create_name(const struct call *c, cJSON *j, char *name, size_t size,
			       struct reply *r)
{
	cJSON *md = objects_md(j);
	const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(md, "name"));
	const char *g = cJSON_GetStringValue(cJSON_GetObjectItem(md, "generateName"));
	char sfx[6];
	if ((!n || !*n) && g && *g) {
		objects_random_suffix(sfx, sizeof(sfx));
		snprintf(name, size, "%.200s%s", g, sfx);
	} else {
		snprintf(name, size, "%s", n ? n : "");
	}
	if (!name[0]) {
		api_status(r, 422, "Invalid", c,
			   "%s \"\" is invalid: metadata.name: Required value: name or "
			   "generateName is required",
			   store_kind_name(c->kind));
		return -EINVAL;
	}
	if (!objects_name_ok(name)) {
		api_status(r, 422, "Invalid", c,
			   "%s \"%s\" is invalid: metadata.name: Invalid value: \"%s\": a "
			   "lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
			   "characters, '-' or '.'",
			   store_kind_name(c->kind), name, name);
		return -EINVAL;
	}
	return 0;
}

/* A custom object against its CRD's schema, a CRD against what the
 * stand-in needs of one (and then served): 0, or -EINVAL with a 422 in r
 * naming the field, as the API server words it. */
static int objects_validate_custom(const struct call *c, const char *name, const cJSON *j,
				   struct reply *r)
{
	char field[256] = "", why[700] = "";
	const char *crd_why = NULL;
	if (c->kind == KIND_CRD) {
		if (schema_crd_ok(j, &crd_why) == 0)
			return 0;
		api_status(r, 422, "Invalid", c,
			   "CustomResourceDefinition.apiextensions.k8s.io \"%s\" is invalid: %s",
			   name, crd_why);
		return -EINVAL;
	}
	if (c->kind < KIND_BUILTIN || schema_check(store_kind_schema(c->kind), j, field,
						   sizeof(field), why, sizeof(why)) == 0)
		return 0;
	struct call named = *c;
	named.name = name;
	api_status(r, 422, "Invalid", &named, "%s.%s \"%s\" is invalid: %s: %s",
		   store_kind_name(c->kind), store_kind_group(c->kind), name, field, why);
	return -EINVAL;
}

/* A Service's cluster IP, as the API server allocates one. */
static void objects_default_service(struct standin *s, cJSON *j)
{
	cJSON *spec = cJSON_GetObjectItem(j, "spec");
	if (!cJSON_IsObject(spec))
		spec = cJSON_AddObjectToObject(j, "spec");
	if (cJSON_GetObjectItem(spec, "clusterIP"))
		return;
	char ip[32];
	snprintf(ip, sizeof(ip), "10.96.%d.%d", (int)((s->rv / 250) % 250), (int)(s->rv % 250 + 1));
	cJSON_AddStringToObject(spec, "clusterIP", ip);
	cJSON *ips = cJSON_AddArrayToObject(spec, "clusterIPs");
	cJSON_AddItemToArray(ips, cJSON_CreateString(ip));
	if (!cJSON_GetObjectItem(spec, "type"))
		cJSON_AddStringToObject(spec, "type", "ClusterIP");
}

/* A CRD is Established at once (no controller here) and its kind served. */
static void objects_crd_established(cJSON *j)
{
	const char *why = NULL;
	store_kind_register(j, &why);
	cJSON *st = cJSON_CreateObject();
	cJSON *conds = cJSON_AddArrayToObject(st, "conditions");
	const char *types[] = { "NamesAccepted", "Established" };
	char ts[32];
	store_now_rfc3339(ts, sizeof(ts));
	for (int i = 0; i < 2; i++) {
		cJSON *c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "type", types[i]);
		cJSON_AddStringToObject(c, "status", "True");
		cJSON_AddStringToObject(c, "reason", i ? "InitialNamesAccepted" : "NoConflicts");
		cJSON_AddStringToObject(c, "lastTransitionTime", ts);
		cJSON_AddItemToArray(conds, c);
	}
	cJSON_AddItemToObject(st, "acceptedNames",
			      cJSON_Duplicate(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "spec"),
								  "names"),
					      true));
	cJSON_DeleteItemFromObject(j, "status");
	cJSON_AddItemToObject(j, "status", st);
}

static bool objects_dry_run(const struct call *c)
{
	const char *d = api_query(c, "dryRun");
	return d && strcmp(d, "All") == 0;
}

static void objects_create(const struct call *c, struct reply *r)
{
	struct standin *s = c->s;
	char name[254];
	cJSON *j = cJSON_ParseWithLength(c->body, c->len);
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		api_status(r, 400, "BadRequest", NULL,
			   "the body of the request was in an unknown format");
		return;
	}
	const char *ns = c->ns ? c->ns : "";
	if (objects_create_name(c, j, name, sizeof(name), r) < 0 ||
	    (c->kind == KIND_POD && objects_validate_pod(c, j, r) < 0) ||
	    objects_validate_custom(c, name, j, r) < 0) {
		cJSON_Delete(j);
		return;
	}
	if (store_kind_namespaced(c->kind) && !store_find(s, KIND_NAMESPACE, "", ns)) {
		cJSON_Delete(j);
		api_status(r, 404, "NotFound", NULL, "namespaces \"%s\" not found", ns);
		return;
	}
	if (store_find(s, c->kind, ns, name)) {
		cJSON_Delete(j);
		struct call named = *c;
		named.name = name;
		api_status(r, 409, "AlreadyExists", &named, "%s \"%s\" already exists",
			   store_kind_resource(c->kind), name);
		return;
	}
	if (c->kind == KIND_POD)
		objects_default_pod(s, j);
	if (c->kind == KIND_SERVICE)
		objects_default_service(s, j);
	if (c->kind == KIND_PVC)
		volume_claim_defaults(j);
	if (objects_dry_run(c)) {
		api_json(r, 201, j);
		return;
	}
	if (c->kind == KIND_CRD)
		objects_crd_established(j);
	struct obj *o = store_add(s, c->kind, ns, name, j);
	if (c->kind == KIND_PVC)
		volume_claim_bound(s, o);
	api_json(r, 201, store_served(o));
}

static void objects_get(const struct call *c, struct obj *o, struct reply *r)
{
	cJSON *j = store_served(o);
	if (!c->table) {
		api_json(r, 200, j);
		return;
	}
	cJSON *items[1] = { j };
	api_json(r, 200, table_of(c->kind, items, 1, true, c->table_object));
	cJSON_Delete(j);
}

static bool objects_in_scope(const struct call *c, const struct obj *o, const char *ls,
			     const char *fs)
{
	return o->kind == c->kind && (!c->ns || strcmp(o->ns, c->ns) == 0) &&
	       select_labels(ls, o->j) && select_fields(fs, o->j);
}

/* limit and continue: items[0..*n) cut to the page asked for (the token is
 * the offset of the next page), the rest freed; cont set when more follow.
 * Each page is read from the state now, not from the first page's version,
 * as a real server does once that version is compacted. */
static void objects_page(const struct call *c, cJSON **items, int *n, char *cont, size_t size)
{
	const char *l = api_query(c, "limit"), *k = api_query(c, "continue");
	long limit = l ? strtol(l, NULL, 10) : 0, from = k ? strtol(k, NULL, 10) : 0;
	if (from < 0 || from > *n)
		from = *n;
	long end = limit > 0 && from + limit < *n ? from + limit : *n;
	for (long i = 0; i < *n; i++)
		if (i < from || i >= end)
			cJSON_Delete(items[i]);
	memmove(items, items + from, sizeof(*items) * (size_t)(end - from));
	if (end < *n)
		snprintf(cont, size, "%ld", end);
	*n = (int)(end - from);
}

static void objects_list(const struct call *c, struct reply *r)
{
	struct standin *s = c->s;
	const char *ls = api_query(c, "labelSelector"), *fs = api_query(c, "fieldSelector");
	const char *why = NULL;
	if (select_check_labels(ls, &why) < 0 || select_check_fields(fs, &why) < 0) {
		api_status(r, 400, "BadRequest", NULL, "%s", why);
		return;
	}
	int n = 0, cap = 16;
	cJSON **items = malloc(sizeof(*items) * (size_t)cap);
	for (struct obj *o = s->objs; o; o = o->next) {
		if (!objects_in_scope(c, o, ls, fs))
			continue;
		if (n == cap) {
			cJSON **nb = realloc(items, sizeof(*items) * (size_t)(cap * 2));
			if (!nb)
				break;
			items = nb;
			cap *= 2;
		}
		items[n++] = store_served(o);
	}
	/* oldest first, as etcd lists them by key: here by creation */
	for (int i = 0; i < n / 2; i++) {
		cJSON *t = items[i];
		items[i] = items[n - 1 - i];
		items[n - 1 - i] = t;
	}
	char v[24], cont[48] = "";
	snprintf(v, sizeof(v), "%lld", (long long)s->rv);
	objects_page(c, items, &n, cont, sizeof(cont));
	cJSON *out;
	if (c->table) {
		out = table_of(c->kind, items, n, true, c->table_object);
		for (int i = 0; i < n; i++)
			cJSON_Delete(items[i]);
	} else {
		char kind[40];
		snprintf(kind, sizeof(kind), "%sList", store_kind_name(c->kind));
		out = cJSON_CreateObject();
		cJSON_AddStringToObject(out, "kind", kind);
		cJSON_AddStringToObject(out, "apiVersion", store_kind_api_version(c->kind));
		cJSON *arr = cJSON_AddArrayToObject(out, "items");
		for (int i = 0; i < n; i++)
			cJSON_AddItemToArray(arr, items[i]);
	}
	free(items);
	cJSON *md = cJSON_GetObjectItem(out, "metadata");
	if (!md)
		md = cJSON_AddObjectToObject(out, "metadata");
	cJSON_AddStringToObject(md, "resourceVersion", v);
	if (cont[0])
		cJSON_AddStringToObject(md, "continue", cont);
	api_json(r, 200, out);
}

/* The spec of a pod without what an update may change (images). */
static cJSON *objects_fixed_spec(const cJSON *pod, bool resources_too)
{
	cJSON *spec = cJSON_Duplicate(cJSON_GetObjectItem(pod, "spec"), true);
	cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(spec, "containers"))
	{
		cJSON_DeleteItemFromObject(c, "image");
		if (resources_too)
			cJSON_DeleteItemFromObject(c, "resources");
	}
	cJSON_DeleteItemFromObject(spec, "activeDeadlineSeconds");
	cJSON_DeleteItemFromObject(spec, "tolerations");
	return spec;
}

/* Whether a pod update (or resize) changes only what it may. */
static bool objects_pod_change_ok(const cJSON *old, const cJSON *nw, bool resize)
{
	cJSON *a = objects_fixed_spec(old, true), *b = objects_fixed_spec(nw, true);
	bool ok = cJSON_Compare(a, b, true);
	cJSON_Delete(a);
	cJSON_Delete(b);
	if (!ok || resize)
		return ok;
	a = objects_fixed_spec(old, false);
	b = objects_fixed_spec(nw, false);
	ok = cJSON_Compare(a, b, true);
	cJSON_Delete(a);
	cJSON_Delete(b);
	return ok;
}

/* Keep what the caller may not change through this path: identity,
 * timestamps, and status (main resource) or everything else (status). */
static void objects_keep_fixed(const struct call *c, const cJSON *old, cJSON *nw)
{
	static const char *const md_fixed[] = { "name",
						"namespace",
						"uid",
						"creationTimestamp",
						"deletionTimestamp",
						"deletionGracePeriodSeconds",
						"generation",
						"resourceVersion" };
	const cJSON *omd = cJSON_GetObjectItem(old, "metadata");
	cJSON *nmd = objects_md(nw);
	if (!nmd)
		nmd = cJSON_AddObjectToObject(nw, "metadata");
	for (size_t i = 0; i < sizeof(md_fixed) / sizeof(md_fixed[0]); i++) {
		cJSON_DeleteItemFromObject(nmd, md_fixed[i]);
		const cJSON *v = cJSON_GetObjectItem(omd, md_fixed[i]);
		if (v)
			cJSON_AddItemToObject(nmd, md_fixed[i], cJSON_Duplicate(v, true));
	}
	bool status = c->sub && strcmp(c->sub, "status") == 0;
	const char *keep[] = { "kind", "apiVersion", status ? "spec" : "status" };
	/* without a status subresource the main path changes status too */
	size_t nkeep = status || store_kind_status_sub(c->kind) ? 3 : 2;
	for (size_t i = 0; i < nkeep; i++) {
		cJSON_DeleteItemFromObject(nw, keep[i]);
		const cJSON *v = cJSON_GetObjectItem(old, keep[i]);
		if (v)
			cJSON_AddItemToObject(nw, keep[i], cJSON_Duplicate(v, true));
	}
	if (status) /* the status subresource changes status alone */
		cJSON_ReplaceItemInObject(nw, "metadata",
					  cJSON_Duplicate(cJSON_GetObjectItem(old, "metadata"),
							  true));
}

/* A stale resourceVersion in the request: 409 in r, true. */
static bool objects_conflict(const struct call *c, const struct obj *o, const cJSON *nw,
			     struct reply *r)
{
	const char *want = cJSON_GetStringValue(
		cJSON_GetObjectItem(cJSON_GetObjectItem(nw, "metadata"), "resourceVersion"));
	char have[24];
	snprintf(have, sizeof(have), "%lld", (long long)o->rv);
	if (!want || !*want || strcmp(want, have) == 0)
		return false;
	api_status(r, 409, "Conflict", c,
		   "Operation cannot be fulfilled on %s \"%s\": the object has been modified; "
		   "please apply your changes to the latest version and try again",
		   store_kind_resource(c->kind), o->name);
	return true;
}

static void objects_bump_generation(struct obj *o)
{
	cJSON *md = objects_md(o->j);
	cJSON *g = cJSON_GetObjectItem(md, "generation");
	double v = cJSON_IsNumber(g) ? g->valuedouble + 1 : 1;
	objects_set(md, "generation", cJSON_CreateNumber(v));
}

/* Store nw (taken) as o's new state after the checks of an update. */
static void objects_commit(const struct call *c, struct obj *o, cJSON *nw, struct reply *r)
{
	bool resize = c->sub && strcmp(c->sub, "resize") == 0;
	if (o->kind == KIND_POD && !objects_pod_change_ok(o->j, nw, resize)) {
		cJSON_Delete(nw);
		api_status(
			r, 422, "Invalid", c,
			resize ? "Pod \"%s\" is invalid: spec: Forbidden: only cpu and memory "
				 "resources are mutable"
			       : "Pod \"%s\" is invalid: spec: Forbidden: pod updates may not "
				 "change fields other than "
				 "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec."
				 "activeDeadlineSeconds`,`spec.tolerations` (only additions to "
				 "existing tolerations),`spec.terminationGracePeriodSeconds` "
				 "(allow it to be set to 1 if it was previously negative)",
			o->name);
		return;
	}
	if (objects_validate_custom(c, o->name, nw, r) < 0) {
		cJSON_Delete(nw);
		return;
	}
	cJSON *old = o->j;
	bool spec_changed = !cJSON_Compare(cJSON_GetObjectItem(old, "spec"),
					   cJSON_GetObjectItem(nw, "spec"), true);
	o->j = nw;
	if (spec_changed && (o->kind == KIND_POD || o->kind >= KIND_BUILTIN))
		objects_bump_generation(o);
	if (o->kind == KIND_CRD)
		objects_crd_established(o->j);
	if (resize)
		kubelet_resize(c->s, o);
	cJSON_Delete(old);
	store_touch(c->s, o, "MODIFIED");
	api_json(r, 200, store_served(o));
	store_finalized(c->s, o); /* the last finalizer taken off a deleted object */
}

static void objects_update(const struct call *c, struct obj *o, struct reply *r)
{
	cJSON *nw = cJSON_ParseWithLength(c->body, c->len);
	if (!cJSON_IsObject(nw)) {
		cJSON_Delete(nw);
		api_status(r, 400, "BadRequest", NULL,
			   "the body of the request was in an unknown format");
		return;
	}
	if (objects_conflict(c, o, nw, r)) {
		cJSON_Delete(nw);
		return;
	}
	bool resize = c->sub && strcmp(c->sub, "resize") == 0;
	if (resize) { /* resize takes the containers' resources alone */
		cJSON *spec = cJSON_Duplicate(cJSON_GetObjectItem(nw, "spec"), true);
		cJSON_Delete(nw);
		nw = cJSON_Duplicate(o->j, true);
		objects_set(nw, "spec", spec);
	}
	objects_keep_fixed(c, o->j, nw);
	objects_commit(c, o, nw, r);
}

static void objects_patch(const struct call *c, struct obj *o, struct reply *r)
{
	const char *ct = MHD_lookup_connection_value(c->c, MHD_HEADER_KIND, "Content-Type");
	cJSON *p = cJSON_ParseWithLength(c->body, c->len);
	const char *why = NULL;
	if (!p) {
		api_status(r, 400, "BadRequest", NULL,
			   "the body of the request was in an unknown format");
		return;
	}
	cJSON *nw = cJSON_Duplicate(o->j, true);
	int rc = 0;
	if (ct && strncmp(ct, "application/merge-patch+json", 28) == 0)
		patch_merge(nw, p);
	else if (ct && strncmp(ct, "application/strategic-merge-patch+json", 38) == 0)
		patch_strategic(nw, p);
	else if (ct && strncmp(ct, "application/json-patch+json", 27) == 0)
		rc = patch_json(nw, p, &why);
	else
		rc = -EPROTO;
	cJSON_Delete(p);
	if (rc == -EPROTO)
		api_status(r, 415, "UnsupportedMediaType", NULL,
			   "the body of the request was in an unknown format - accepted media "
			   "types include: application/json-patch+json, "
			   "application/merge-patch+json, application/strategic-merge-patch+json");
	else if (rc < 0)
		api_status(r, 422, "Invalid", c, "%s", why);
	if (rc < 0 || objects_conflict(c, o, nw, r)) {
		cJSON_Delete(nw);
		return;
	}
	objects_keep_fixed(c, o->j, nw);
	objects_commit(c, o, nw, r);
}

/* gracePeriodSeconds and propagationPolicy from the query or the body. */
static void objects_delete_opts(const struct call *c, int64_t *grace, bool *orphan)
{
	cJSON *b = c->len ? cJSON_ParseWithLength(c->body, c->len) : NULL;
	const char *q = api_query(c, "gracePeriodSeconds");
	const char *pp = api_query(c, "propagationPolicy");
	const cJSON *g = cJSON_GetObjectItem(b, "gracePeriodSeconds");
	*grace = -1;
	if (q)
		*grace = strtoll(q, NULL, 10);
	else if (cJSON_IsNumber(g))
		*grace = (int64_t)g->valuedouble;
	if (!pp)
		pp = cJSON_GetStringValue(cJSON_GetObjectItem(b, "propagationPolicy"));
	const cJSON *oc = cJSON_GetObjectItem(b, "orphanDependents");
	*orphan = (pp && strcmp(pp, "Orphan") == 0) || cJSON_IsTrue(oc);
	cJSON_Delete(b);
}

static void objects_delete_one(const struct call *c, struct obj *o, int64_t grace, bool orphan)
{
	struct standin *s = c->s;
	if (orphan)
		store_cascade(s, o->uid, true);
	if (store_finalizing(s, o))
		return;
	if (o->kind == KIND_POD && o->running && grace != 0) {
		kubelet_mark_deleting(s, o, grace);
		return;
	}
	if (o->kind == KIND_CRD) { /* its objects go with it */
		int k = store_kind_from_resource(
			objects_str(o->j, "spec", "group"),
			objects_str(cJSON_GetArrayItem(
					    cJSON_GetObjectItem(cJSON_GetObjectItem(o->j, "spec"),
								"versions"),
					    0),
				    NULL, "name"),
			objects_str(cJSON_GetObjectItem(o->j, "spec"), "names", "plural"));
		for (struct obj *p = s->objs, *nx; k >= 0 && p; p = nx) {
			nx = p->next;
			if ((int)p->kind == k)
				store_remove(s, p);
		}
		store_kind_unregister(o->name);
	}
	if (o->kind == KIND_NAMESPACE) {
		for (struct obj *p = s->objs, *nx; p; p = nx) {
			nx = p->next;
			if (store_kind_namespaced(p->kind) && strcmp(p->ns, o->name) == 0) {
				kubelet_kill_now(s, p);
				store_remove(s, p);
			}
		}
	}
	kubelet_kill_now(s, o);
	store_remove(s, o);
}

static void objects_delete(const struct call *c, struct obj *o, struct reply *r)
{
	int64_t grace;
	bool orphan;
	objects_delete_opts(c, &grace, &orphan);
	cJSON *before = store_served(o);
	char uid[40];
	snprintf(uid, sizeof(uid), "%s", o->uid);
	objects_delete_one(c, o, grace, orphan);
	struct obj *still = store_find_uid(c->s, uid);
	if (still) {
		cJSON_Delete(before);
		api_json(r, 200, store_served(still));
	} else {
		api_json(r, 200, before);
	}
}

static void objects_delete_collection(const struct call *c, struct reply *r)
{
	const char *ls = api_query(c, "labelSelector"), *fs = api_query(c, "fieldSelector");
	int64_t grace;
	bool orphan;
	objects_delete_opts(c, &grace, &orphan);
	for (bool again = true; again;) {
		again = false;
		for (struct obj *o = c->s->objs; o; o = o->next) {
			const cJSON *dt =
				cJSON_GetObjectItem(objects_md(o->j), "deletionTimestamp");
			if (!objects_in_scope(c, o, ls, fs) || dt)
				continue;
			objects_delete_one(c, o, grace, orphan);
			again = true;
			break;
		}
	}
	objects_list(c, r);
}

static void objects_named(const struct call *c, struct obj *o, struct reply *r)
{
	const char *m = c->method;
	if (strcmp(m, "GET") == 0)
		objects_get(c, o, r);
	else if (strcmp(m, "PUT") == 0)
		objects_update(c, o, r);
	else if (strcmp(m, "PATCH") == 0)
		objects_patch(c, o, r);
	else if (strcmp(m, "DELETE") == 0 && !c->sub)
		objects_delete(c, o, r);
	else
		api_status(r, 405, "MethodNotAllowed", c,
			   "the server does not allow this method on the requested resource");
}

void objects_handle(const struct call *c, struct reply *r)
{
	struct standin *s = c->s;
	bool sub_ok = !c->sub || strcmp(c->sub, "status") == 0 ||
		      (strcmp(c->sub, "resize") == 0 && c->kind == KIND_POD && s->o.resize);
	if (!sub_ok) {
		api_status(r, 404, "NotFound", NULL,
			   "the server could not find the requested resource");
		return;
	}
	pthread_mutex_lock(&s->mu);
	if (!c->name) {
		if (strcmp(c->method, "GET") == 0)
			objects_list(c, r);
		else if (strcmp(c->method, "POST") == 0 &&
			 (c->ns || !store_kind_namespaced(c->kind)))
			objects_create(c, r);
		else if (strcmp(c->method, "DELETE") == 0)
			objects_delete_collection(c, r);
		else
			api_status(
				r, 405, "MethodNotAllowed", NULL,
				"the server does not allow this method on the requested resource");
	} else {
		struct obj *o = store_find(s, c->kind, c->ns ? c->ns : "", c->name);
		if (o)
			objects_named(c, o, r);
		else
			api_status(r, 404, "NotFound", c, "%s \"%s\" not found",
				   store_kind_resource(c->kind), c->name);
	}
	pthread_mutex_unlock(&s->mu);
}
