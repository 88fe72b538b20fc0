/*
 * lease.c: leader election through a Lease (lease.h).  Every write is an
 * update carrying the resourceVersion just read: of two replicas writing
 * at once one gets 409 Conflict and stays a follower.
 */
#include "lease.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "json.h"
#include "log.h"

void lease_init(struct lease *l, struct kube *k, const char *ns, const char *name, const char *id,
		int duration_s)
{
	memset(l, 0, sizeof(*l));
	l->k = k;
	snprintf(l->ns, sizeof(l->ns), "%s", ns);
	snprintf(l->name, sizeof(l->name), "%s", name);
	snprintf(l->id, sizeof(l->id), "%s", id);
	l->duration_s = duration_s;
}

static void lease_now(char *out, size_t size)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char base[32];
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, size, "%.20s.%06dZ", base, (int)(ts.tv_nsec / 1000) % 1000000);
}

/* Write the lease held by holder: create (rv NULL) or update from rv.
 * Returns the HTTP status, 0 when the server could not be reached. */
static long lease_write(struct lease *l, const char *rv, const char *holder, int64_t transitions,
			bool acquired)
{
	char now[64], path[320];
	lease_now(now, sizeof(now));
	RV_CLEANUP_CJSON cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "apiVersion", "coordination.k8s.io/v1");
	cJSON_AddStringToObject(j, "kind", "Lease");
	cJSON *md = cJSON_AddObjectToObject(j, "metadata");
	cJSON_AddStringToObject(md, "name", l->name);
	cJSON_AddStringToObject(md, "namespace", l->ns);
	if (rv)
		cJSON_AddStringToObject(md, "resourceVersion", rv);
	cJSON *spec = cJSON_AddObjectToObject(j, "spec");
	cJSON_AddStringToObject(spec, "holderIdentity", holder);
	cJSON_AddNumberToObject(spec, "leaseDurationSeconds", l->duration_s);
	cJSON_AddStringToObject(spec, "renewTime", now);
	if (acquired)
		cJSON_AddStringToObject(spec, "acquireTime", now);
	cJSON_AddNumberToObject(spec, "leaseTransitions", (double)transitions);
	RV_CLEANUP_FREE char *body = cJSON_PrintUnformatted(j);
	if (rv)
		snprintf(path, sizeof(path), "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s",
			 l->ns, l->name);
	else
		snprintf(path, sizeof(path), "/apis/coordination.k8s.io/v1/namespaces/%s/leases",
			 l->ns);
	long code = 0;
	cJSON *out = NULL;
	struct rv_err err = { 0 };
	kube_call(l->k, rv ? "PUT" : "POST", path, body, NULL, &code, &out, &err);
	cJSON_Delete(out);
	return code;
}

/* GET the lease: the HTTP status (0 when the server could not be reached)
 * and the object into *cur (the caller's, cJSON_Delete; NULL when none). */
static long lease_get(struct lease *l, cJSON **cur)
{
	char path[320];
	snprintf(path, sizeof(path), "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s", l->ns,
		 l->name);
	long code = 0;
	struct rv_err err = { 0 };
	kube_call(l->k, "GET", path, NULL, NULL, &code, cur, &err);
	return code;
}

static int lease_lead(struct lease *l, bool now_leader, int64_t now_ms, const char *why)
{
	if (now_leader) {
		l->renewed_ms = now_ms;
		if (!l->leader)
			rv_log_info("leading", "lease=%s/%s id=%s reason=%s", l->ns, l->name, l->id,
				    why);
		l->leader = true;
		return 1;
	}
	if (l->leader)
		rv_log_warn("no longer leading", "lease=%s/%s id=%s reason=%s", l->ns, l->name,
			    l->id, why);
	l->leader = false;
	return 0;
}

int lease_tick(struct lease *l, int64_t now_ms)
{
	RV_CLEANUP_CJSON cJSON *cur = NULL;
	long code = lease_get(l, &cur);
	if (code == 404)
		return lease_lead(l, lease_write(l, NULL, l->id, 0, true) == 201, now_ms,
				  "created");
	if (code != 200) /* unreachable: lead on until the renewal deadline */
		return lease_lead(l, l->leader && now_ms - l->renewed_ms < l->duration_s * 1000L,
				  l->renewed_ms, "could not renew");
	const cJSON *spec = cJSON_GetObjectItem(cur, "spec");
	const char *holder = cJSON_GetStringValue(cJSON_GetObjectItem(spec, "holderIdentity"));
	const char *rv = cJSON_GetStringValue(
		cJSON_GetObjectItem(cJSON_GetObjectItem(cur, "metadata"), "resourceVersion"));
	const cJSON *tr = cJSON_GetObjectItem(spec, "leaseTransitions");
	int64_t transitions = cJSON_IsNumber(tr) ? (int64_t)tr->valuedouble : 0;
	if (!rv)
		return lease_lead(l, false, now_ms, "no resourceVersion");
	if (holder && !strcmp(holder, l->id))
		return lease_lead(l, lease_write(l, rv, l->id, transitions, false) == 200, now_ms,
				  "renewed");
	if (strcmp(rv, l->seen_rv) != 0) { /* the holder renewed: wait a duration from now */
		snprintf(l->seen_rv, sizeof(l->seen_rv), "%s", rv);
		l->seen_at_ms = now_ms;
	}
	bool expired = !holder || !holder[0] || now_ms - l->seen_at_ms > l->duration_s * 1000L;
	if (!expired)
		return lease_lead(l, false, now_ms, "held by another");
	l->transitions = transitions + 1;
	rv_log_info("taking the lease over", "lease=%s/%s id=%s from=%s", l->ns, l->name, l->id,
		    holder ? holder : "");
	return lease_lead(l, lease_write(l, rv, l->id, transitions + 1, true) == 200, now_ms,
			  "taken over");
}

void lease_release(struct lease *l)
{
	if (!l->leader)
		return;
	RV_CLEANUP_CJSON cJSON *cur = NULL;
	long code = lease_get(l, &cur);
	const char *rv = cJSON_GetStringValue(
		cJSON_GetObjectItem(cJSON_GetObjectItem(cur, "metadata"), "resourceVersion"));
	const char *holder = cJSON_GetStringValue(
		cJSON_GetObjectItem(cJSON_GetObjectItem(cur, "spec"), "holderIdentity"));
	if (code == 200 && rv && holder && !strcmp(holder, l->id))
		lease_write(l, rv, "", l->transitions, false);
	l->leader = false;
}
