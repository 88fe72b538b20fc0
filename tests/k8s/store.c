/*
 * store.c: the stand-in's objects, resource versions and change history.
 *
 * Every change takes the next resource version (one counter for all kinds,
 * as etcd's revision) and enters a bounded ring that watches read from; a
 * watch from a version older than the ring gets 410 Gone.  Callers hold
 * s->mu.  Objects are kept with their kind and apiVersion.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "clock.h"
#include "standin.h"

/* The kinds served: the built-in ones, then one per CustomResourceDefinition
 * (appended under s->mu, never removed: a deleted CRD's kind is unserved).
 * Process-wide, as one stand-in runs per process; store_nkinds is read
 * without the lock, so an entry is whole before the count covers it. */
struct kinddef {
	char kind[64], resource[64], singular[64], shortname[16], group[128], version[32];
	char api_version[160];
	char crd[200]; /* the CustomResourceDefinition's name, "" built-in */
	bool namespaced, status_sub, served;
	cJSON *schema, *columns; /* a CRD's, owned here */
};

static struct kinddef store_kinds[KIND_MAX] = {
	[KIND_POD] = { "Pod", "pods", "pod", "po", "", "v1", "v1", "", true, true, true, 0, 0 },
	[KIND_EVENT] = { "Event", "events", "event", "ev", "", "v1", "v1", "", true, false, true, 0,
			 0 },
	[KIND_NODE] = { "Node", "nodes", "node", "no", "", "v1", "v1", "", false, true, true, 0,
			0 },
	[KIND_NAMESPACE] = { "Namespace", "namespaces", "namespace", "ns", "", "v1", "v1", "",
			     false, true, true, 0, 0 },
	[KIND_SERVICE] = { "Service", "services", "service", "svc", "", "v1", "v1", "", true, true,
			   true, 0, 0 },
	[KIND_LEASE] = { "Lease", "leases", "lease", "", "coordination.k8s.io", "v1",
			 "coordination.k8s.io/v1", "", true, false, true, 0, 0 },
	[KIND_CRD] = { "CustomResourceDefinition", "customresourcedefinitions",
		       "customresourcedefinition", "crd", "apiextensions.k8s.io", "v1",
		       "apiextensions.k8s.io/v1", "", false, true, true, 0, 0 },
#define STORE_APPS "apps", "v1", "apps/v1", ""
#define STORE_RBAC "rbac.authorization.k8s.io", "v1", "rbac.authorization.k8s.io/v1", ""
	[KIND_SERVICEACCOUNT] = { "ServiceAccount", "serviceaccounts", "serviceaccount", "sa", "",
				  "v1", "v1", "", true, false, true, 0, 0 },
	[KIND_SECRET] = { "Secret", "secrets", "secret", "", "", "v1", "v1", "", true, false, true,
			  0, 0 },
	[KIND_CONFIGMAP] = { "ConfigMap", "configmaps", "configmap", "cm", "", "v1", "v1", "", true,
			     false, true, 0, 0 },
	[KIND_DEPLOYMENT] = { "Deployment", "deployments", "deployment", "deploy", STORE_APPS, true,
			      true, true, 0, 0 },
	[KIND_STATEFULSET] = { "StatefulSet", "statefulsets", "statefulset", "sts", STORE_APPS,
			       true, true, true, 0, 0 },
	[KIND_DAEMONSET] = { "DaemonSet", "daemonsets", "daemonset", "ds", STORE_APPS, true, true,
			     true, 0, 0 },
	[KIND_ROLE] = { "Role", "roles", "role", "", STORE_RBAC, true, false, true, 0, 0 },
	[KIND_ROLEBINDING] = { "RoleBinding", "rolebindings", "rolebinding", "", STORE_RBAC, true,
			       false, true, 0, 0 },
	[KIND_CLUSTERROLE] = { "ClusterRole", "clusterroles", "clusterrole", "", STORE_RBAC, false,
			       false, true, 0, 0 },
	[KIND_CLUSTERROLEBINDING] = { "ClusterRoleBinding", "clusterrolebindings",
				      "clusterrolebinding", "", STORE_RBAC, false, false, true, 0,
				      0 },
#define STORE_ADM "admissionregistration.k8s.io", "v1", "admissionregistration.k8s.io/v1", ""
	[KIND_VAP] = { "ValidatingAdmissionPolicy", "validatingadmissionpolicies",
		       "validatingadmissionpolicy", "", STORE_ADM, false, true, true, 0, 0 },
	[KIND_VAPB] = { "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings",
			"validatingadmissionpolicybinding", "", STORE_ADM, false, false, true, 0,
			0 },
	[KIND_PVC] = { "PersistentVolumeClaim", "persistentvolumeclaims", "persistentvolumeclaim",
		       "pvc", "", "v1", "v1", "", true, true, true, 0, 0 },
#undef STORE_APPS
#undef STORE_RBAC
#undef STORE_ADM
};
static _Atomic int store_kinds_n = KIND_BUILTIN;

int store_nkinds(void)
{
	return store_kinds_n;
}

const char *store_kind_name(enum kind k)
{
	return store_kinds[k].kind;
}

const char *store_kind_resource(enum kind k)
{
	return store_kinds[k].resource;
}

const char *store_kind_group(enum kind k)
{
	return store_kinds[k].group;
}

const char *store_kind_version(enum kind k)
{
	return store_kinds[k].version;
}

const char *store_kind_api_version(enum kind k)
{
	return store_kinds[k].api_version;
}

const char *store_kind_short(enum kind k)
{
	return store_kinds[k].shortname[0] ? store_kinds[k].shortname : NULL;
}

bool store_kind_namespaced(enum kind k)
{
	return store_kinds[k].namespaced;
}

bool store_kind_status_sub(enum kind k)
{
	return store_kinds[k].status_sub;
}

bool store_kind_served(enum kind k)
{
	return store_kinds[k].served;
}

const cJSON *store_kind_schema(enum kind k)
{
	return store_kinds[k].schema;
}

const cJSON *store_kind_columns(enum kind k)
{
	return store_kinds[k].columns;
}

int store_kind_from_resource(const char *group, const char *version, const char *res)
{
	int n = store_kinds_n;
	for (int k = 0; k < n; k++) {
		const struct kinddef *d = &store_kinds[k];
		if (d->served && strcmp(res, d->resource) == 0 && strcmp(group, d->group) == 0 &&
		    strcmp(version, d->version) == 0)
			return k;
	}
	return -1;
}

static void store_copy(char *out, size_t size, const cJSON *o, const char *key)
{
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(o, key));
	snprintf(out, size, "%s", v ? v : "");
}

/* Fill d from crd (already checked by schema_crd_ok). */
static void store_kind_fill(struct kinddef *d, const cJSON *crd)
{
	const cJSON *spec = cJSON_GetObjectItem(crd, "spec");
	const cJSON *names = cJSON_GetObjectItem(spec, "names");
	const cJSON *ver = cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "versions"), 0);
	store_copy(d->kind, sizeof(d->kind), names, "kind");
	store_copy(d->resource, sizeof(d->resource), names, "plural");
	store_copy(d->singular, sizeof(d->singular), names, "singular");
	const cJSON *sn = cJSON_GetArrayItem(cJSON_GetObjectItem(names, "shortNames"), 0);
	snprintf(d->shortname, sizeof(d->shortname), "%s",
		 sn && sn->valuestring ? sn->valuestring : "");
	store_copy(d->group, sizeof(d->group), spec, "group");
	store_copy(d->version, sizeof(d->version), ver, "name");
	snprintf(d->api_version, sizeof(d->api_version), "%s/%s", d->group, d->version);
	store_copy(d->crd, sizeof(d->crd), cJSON_GetObjectItem(crd, "metadata"), "name");
	const char *scope = cJSON_GetStringValue(cJSON_GetObjectItem(spec, "scope"));
	d->namespaced = !scope || strcmp(scope, "Cluster") != 0;
	d->status_sub = cJSON_GetObjectItem(cJSON_GetObjectItem(ver, "subresources"), "status");
	cJSON_Delete(d->schema);
	cJSON_Delete(d->columns);
	d->schema = cJSON_Duplicate(cJSON_GetObjectItem(cJSON_GetObjectItem(ver, "schema"),
							"openAPIV3Schema"),
				    true);
	d->columns = cJSON_Duplicate(cJSON_GetObjectItem(ver, "additionalPrinterColumns"), true);
	d->served = true;
}

int store_kind_register(const cJSON *crd, const char **why)
{
	if (schema_crd_ok(crd, why) < 0)
		return -EINVAL;
	char name[200];
	store_copy(name, sizeof(name), cJSON_GetObjectItem(crd, "metadata"), "name");
	int n = store_kinds_n;
	for (int k = KIND_BUILTIN; k < n; k++)
		if (strcmp(store_kinds[k].crd, name) == 0) {
			store_kind_fill(&store_kinds[k], crd);
			return k;
		}
	if (n == KIND_MAX) {
		*why = "spec: Forbidden: the stand-in serves no more custom resources";
		return -EINVAL;
	}
	store_kind_fill(&store_kinds[n], crd);
	store_kinds_n = n + 1;
	return n;
}

void store_kind_unregister(const char *crd_name)
{
	int n = store_kinds_n;
	for (int k = KIND_BUILTIN; k < n; k++)
		if (strcmp(store_kinds[k].crd, crd_name) == 0)
			store_kinds[k].served = false;
}

double store_mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void store_now_rfc3339(char *out, size_t size)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void store_uuid(char *out, size_t size)
{
	unsigned char b[16];
	while (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		; /* 16 bytes: only a signal interrupts it */
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	snprintf(out, size, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}

void store_init(struct standin *s)
{
	pthread_mutex_init(&s->mu, NULL);
	rv_cond_init_mono(&s->changed);
	for (int k = 0; k < KIND_MAX; k++)
		s->hist[k] = calloc((size_t)s->o.history, sizeof(*s->hist[k]));
	s->started_s = store_mono_s();
}

static void store_obj_free(struct obj *o)
{
	cJSON_Delete(o->j);
	rv_proc_release(&o->proc);
	free(o);
}

void store_release(struct standin *s)
{
	while (s->objs) {
		struct obj *o = s->objs;
		s->objs = o->next;
		store_obj_free(o);
	}
	store_compact(s);
	for (int k = 0; k < KIND_MAX; k++)
		free(s->hist[k]);
	pthread_cond_destroy(&s->changed);
	pthread_mutex_destroy(&s->mu);
}

struct obj *store_find(struct standin *s, enum kind k, const char *ns, const char *name)
{
	for (struct obj *o = s->objs; o; o = o->next)
		if (o->kind == k && strcmp(o->name, name) == 0 &&
		    (!store_kind_namespaced(k) || strcmp(o->ns, ns) == 0))
			return o;
	return NULL;
}

struct obj *store_find_uid(struct standin *s, const char *uid)
{
	for (struct obj *o = s->objs; o; o = o->next)
		if (strcmp(o->uid, uid) == 0)
			return o;
	return NULL;
}

static void store_hist_push(struct standin *s, const struct obj *o, const char *type)
{
	int cap = s->o.history, k = o->kind;
	if (s->hist_n[k] == cap) {
		struct hist *old = &s->hist[k][s->hist_head[k]];
		s->hist_floor[k] = old->rv;
		cJSON_Delete(old->obj);
		s->hist_head[k] = (s->hist_head[k] + 1) % cap;
		s->hist_n[k]--;
	}
	struct hist *h = &s->hist[k][(s->hist_head[k] + s->hist_n[k]) % cap];
	h->rv = o->rv;
	h->kind = o->kind;
	snprintf(h->type, sizeof(h->type), "%s", type);
	h->obj = cJSON_Duplicate(o->j, true);
	s->hist_n[k]++;
	pthread_cond_broadcast(&s->changed);
}

void store_touch(struct standin *s, struct obj *o, const char *type)
{
	char v[24];
	o->rv = ++s->rv;
	snprintf(v, sizeof(v), "%lld", (long long)o->rv);
	cJSON *md = cJSON_GetObjectItem(o->j, "metadata");
	cJSON_DeleteItemFromObject(md, "resourceVersion");
	cJSON_AddStringToObject(md, "resourceVersion", v);
	store_hist_push(s, o, type);
	s->kick = 1;
}

static void store_set_str(cJSON *obj, const char *key, const char *val)
{
	cJSON_DeleteItemFromObject(obj, key);
	cJSON_AddStringToObject(obj, key, val);
}

struct obj *store_add(struct standin *s, enum kind k, const char *ns, const char *name, cJSON *j)
{
	struct obj *o = calloc(1, sizeof(*o));
	char ts[32];
	o->kind = k;
	snprintf(o->ns, sizeof(o->ns), "%s", store_kind_namespaced(k) ? ns : "");
	snprintf(o->name, sizeof(o->name), "%s", name);
	store_uuid(o->uid, sizeof(o->uid));
	rv_proc_init(&o->proc);
	o->j = j;
	store_set_str(j, "kind", store_kind_name(k));
	store_set_str(j, "apiVersion", store_kind_api_version(k));
	cJSON *md = cJSON_GetObjectItem(j, "metadata");
	if (!cJSON_IsObject(md)) {
		cJSON_DeleteItemFromObject(j, "metadata");
		md = cJSON_AddObjectToObject(j, "metadata");
	}
	store_set_str(md, "name", name);
	if (o->ns[0])
		store_set_str(md, "namespace", o->ns);
	store_set_str(md, "uid", o->uid);
	store_now_rfc3339(ts, sizeof(ts));
	store_set_str(md, "creationTimestamp", ts);
	cJSON_DeleteItemFromObject(md, "deletionTimestamp");
	cJSON_DeleteItemFromObject(md, "generation");
	if (k == KIND_POD || k >= KIND_BUILTIN)
		cJSON_AddNumberToObject(md, "generation", 1);
	o->next = s->objs;
	s->objs = o;
	store_touch(s, o, "ADDED");
	return o;
}

void store_remove(struct standin *s, struct obj *o)
{
	struct obj **pp = &s->objs;
	while (*pp && *pp != o)
		pp = &(*pp)->next;
	if (!*pp)
		return;
	*pp = o->next;
	char uid[40];
	snprintf(uid, sizeof(uid), "%s", o->uid);
	if (o->kind == KIND_PVC)
		volume_claim_release(s, o);
	store_touch(s, o, "DELETED");
	store_obj_free(o);
	store_cascade(s, uid, false);
}

cJSON *store_served(const struct obj *o)
{
	return cJSON_Duplicate(o->j, true);
}

static bool store_owned_by(const cJSON *j, const char *uid)
{
	const cJSON *refs =
		cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "ownerReferences");
	const cJSON *r;
	cJSON_ArrayForEach(r, refs)
	{
		const char *u = cJSON_GetStringValue(cJSON_GetObjectItem(r, "uid"));
		if (u && strcmp(u, uid) == 0)
			return true;
	}
	return false;
}

static void store_drop_owner(struct standin *s, struct obj *o, const char *uid)
{
	cJSON *refs = cJSON_GetObjectItem(cJSON_GetObjectItem(o->j, "metadata"), "ownerReferences");
	for (int i = cJSON_GetArraySize(refs) - 1; i >= 0; i--) {
		const char *u = cJSON_GetStringValue(
			cJSON_GetObjectItem(cJSON_GetArrayItem(refs, i), "uid"));
		if (u && strcmp(u, uid) == 0)
			cJSON_DeleteItemFromArray(refs, i);
	}
	store_touch(s, o, "MODIFIED");
}

bool store_finalizing(struct standin *s, struct obj *o)
{
	cJSON *md = cJSON_GetObjectItem(o->j, "metadata");
	if (o->kind == KIND_POD || cJSON_GetArraySize(cJSON_GetObjectItem(md, "finalizers")) == 0)
		return false;
	if (!cJSON_GetObjectItem(md, "deletionTimestamp")) {
		char ts[40];
		store_now_rfc3339(ts, sizeof(ts));
		cJSON_AddStringToObject(md, "deletionTimestamp", ts);
		store_touch(s, o, "MODIFIED");
	}
	return true;
}

bool store_finalized(struct standin *s, struct obj *o)
{
	cJSON *md = cJSON_GetObjectItem(o->j, "metadata");
	if (o->kind == KIND_POD || !cJSON_GetObjectItem(md, "deletionTimestamp") ||
	    cJSON_GetArraySize(cJSON_GetObjectItem(md, "finalizers")) > 0)
		return false;
	store_remove(s, o);
	return true;
}

/* The garbage collector's part: dependents of a deleted owner go too (a
 * running pod through its grace period, as any deletion), or lose the
 * reference when the owner was deleted with propagationPolicy Orphan. */
void store_cascade(struct standin *s, const char *uid, bool orphan)
{
	for (bool again = true; again;) {
		again = false;
		for (struct obj *o = s->objs; o; o = o->next) {
			if (!store_owned_by(o->j, uid))
				continue;
			if (orphan) {
				store_drop_owner(s, o, uid);
				continue;
			}
			if (o->kind == KIND_POD && o->running) {
				if (!cJSON_GetObjectItem(cJSON_GetObjectItem(o->j, "metadata"),
							 "deletionTimestamp"))
					kubelet_mark_deleting(s, o, -1);
				continue;
			}
			if (store_finalizing(s, o))
				continue;
			store_remove(s, o);
			again = true;
			break;
		}
	}
}

int store_hist_after(struct standin *s, enum kind k, int64_t rv)
{
	if (rv < s->hist_floor[k])
		return -2;
	/* the ring is in version order: binary search for the first > rv */
	int lo = 0, hi = s->hist_n[k];
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (s->hist[k][(s->hist_head[k] + mid) % s->o.history].rv > rv)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo < s->hist_n[k] ? lo : -1;
}

const struct hist *store_hist_at(struct standin *s, enum kind k, int i)
{
	if (i < 0 || i >= s->hist_n[k])
		return NULL;
	return &s->hist[k][(s->hist_head[k] + i) % s->o.history];
}

void store_compact(struct standin *s)
{
	for (int k = 0; k < KIND_MAX; k++) {
		for (int i = 0; i < s->hist_n[k]; i++)
			cJSON_Delete(s->hist[k][(s->hist_head[k] + i) % s->o.history].obj);
		s->hist_n[k] = 0;
		s->hist_head[k] = 0;
		s->hist_floor[k] = s->rv;
	}
}

void store_prune_events(struct standin *s)
{
	int n = 0;
	struct obj *oldest = NULL;
	for (struct obj *o = s->objs; o; o = o->next)
		if (o->kind == KIND_EVENT) {
			n++;
			oldest = o; /* newest first: the last one seen is the oldest */
		}
	while (n-- > s->o.max_events && oldest) {
		struct obj *prev = NULL;
		for (struct obj *o = s->objs; o; o = o->next)
			if (o->kind == KIND_EVENT && o != oldest)
				prev = o;
		store_remove(s, oldest);
		oldest = prev;
	}
}

static cJSON *store_involved(const struct obj *about)
{
	cJSON *io = cJSON_CreateObject();
	cJSON_AddStringToObject(io, "kind", store_kind_name(about->kind));
	if (about->ns[0])
		cJSON_AddStringToObject(io, "namespace", about->ns);
	cJSON_AddStringToObject(io, "name", about->name);
	cJSON_AddStringToObject(io, "uid", about->uid);
	cJSON_AddStringToObject(io, "apiVersion", store_kind_api_version(about->kind));
	char v[24];
	snprintf(v, sizeof(v), "%lld", (long long)about->rv);
	cJSON_AddStringToObject(io, "resourceVersion", v);
	return io;
}

void store_event(struct standin *s, const struct obj *about, const char *type, const char *reason,
		 const char *component, const char *fmt, ...)
{
	char msg[512], name[320], ts[32];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(name, sizeof(name), "%.250s.%llx", about->name,
		 (unsigned long long)(s->rv + 1) * 0x9e3779b1ull);
	store_now_rfc3339(ts, sizeof(ts));
	cJSON *j = cJSON_CreateObject();
	cJSON_AddObjectToObject(j, "metadata");
	cJSON_AddItemToObject(j, "involvedObject", store_involved(about));
	cJSON_AddStringToObject(j, "reason", reason);
	cJSON_AddStringToObject(j, "message", msg);
	cJSON *src = cJSON_AddObjectToObject(j, "source");
	cJSON_AddStringToObject(src, "component", component);
	cJSON_AddStringToObject(j, "firstTimestamp", ts);
	cJSON_AddStringToObject(j, "lastTimestamp", ts);
	cJSON_AddNumberToObject(j, "count", 1);
	cJSON_AddStringToObject(j, "type", type);
	cJSON_AddNullToObject(j, "eventTime");
	cJSON_AddStringToObject(j, "reportingComponent", component);
	cJSON_AddStringToObject(j, "reportingInstance", "");
	store_add(s, KIND_EVENT, about->ns[0] ? about->ns : "default", name, j);
}
