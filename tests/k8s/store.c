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

static const struct {
	const char *kind, *resource;
	bool namespaced;
} store_kinds[KIND_COUNT] = {
	[KIND_POD] = { "Pod", "pods", true },
	[KIND_EVENT] = { "Event", "events", true },
	[KIND_NODE] = { "Node", "nodes", false },
	[KIND_NAMESPACE] = { "Namespace", "namespaces", false },
};

const char *store_kind_name(enum kind k)
{
	return store_kinds[k].kind;
}

const char *store_kind_resource(enum kind k)
{
	return store_kinds[k].resource;
}

bool store_kind_namespaced(enum kind k)
{
	return store_kinds[k].namespaced;
}

int store_kind_from_resource(const char *res)
{
	for (int k = 0; k < KIND_COUNT; k++)
		if (strcmp(res, store_kinds[k].resource) == 0)
			return k;
	return -1;
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
	for (int k = 0; k < KIND_COUNT; k++)
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
	for (int k = 0; k < KIND_COUNT; k++)
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
	store_set_str(j, "apiVersion", "v1");
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
	if (k == KIND_POD)
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
	for (int k = 0; k < KIND_COUNT; k++) {
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
	cJSON_AddStringToObject(io, "apiVersion", "v1");
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
