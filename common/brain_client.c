/*
 * brain_client.c: rover-brain's REST API as typed calls (see brain_client.h).
 *
 * Every call goes through call(), that is rest_client.c's rv_rest_call: one
 * URL, one body, the retry policy (which errors are retried, the back-off,
 * the budget) and the mapping of an error reply to errno + rv_err.  Messages go out through wire.c's
 * *_to_json and come back through *_from_json, so what this client sends
 * the brain validates with the same code.  One client per thread; no
 * globals; never logs.
 */
#include "brain_client.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "cleanup.h"
#include "http.h"
#include "json.h"
#include "parse.h"
#include "rest_client.h"

struct rv_brain_client {
	struct rv_rest rest;
};

struct rv_brain_client *rv_brain_client_new(const struct rv_brain_opts *opts, struct rv_err *err)
{
	static const struct rv_rest_opts dflt = {
		.connect_timeout_ms = 2000,
		.timeout_ms = 10000,
		.max_attempts = 5,
		.backoff_ms = 100,
		.backoff_max_ms = 2000,
		.retry_budget_ms = 30000,
	};
	struct rv_brain_client *c = calloc(1, sizeof(*c));
	if (!c) {
		rv_err_set(err, -ENOMEM, "", "could not allocate a brain client");
		return NULL;
	}
	struct rv_rest_opts o = { 0 };
	if (opts)
		o = RV_REST_OPTS_OF(opts);
	if (rv_rest_init(&c->rest, "brain", RV_REST_HTTPS, &o, &dflt, err) < 0)
		return rv_brain_client_free(c);
	return c;
}

struct rv_brain_client *rv_brain_client_free(struct rv_brain_client *c)
{
	if (!c)
		return NULL;
	rv_rest_release(&c->rest);
	free(c);
	return NULL;
}

long rv_brain_last_status(const struct rv_brain_client *c)
{
	return c->rest.last_status;
}

int rv_brain_last_attempts(const struct rv_brain_client *c)
{
	return c->rest.last_attempts;
}

int rv_brain_new_id(char out[RV_ID_MAX])
{
	unsigned char r[16];
	size_t got = 0;
	while (got < sizeof(r)) {
		ssize_t k = getrandom(r + got, sizeof(r) - got, 0);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)k;
	}
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
	return 0;
}

/* ---- one call: rest_client.c retries and maps errors ---- */

enum {
	CALL_IDEMPOTENT = RV_REST_IDEMPOTENT,
	CALL_REFUSED_ONLY = RV_REST_REFUSED_ONLY,
};

static int call(struct rv_brain_client *c, const char *what, const char *method, const char *path,
		const char *body, int extra_ms, int flags, long *status, cJSON **reply,
		struct rv_err *err)
{
	return rv_rest_call(&c->rest, what, method, path, body, extra_ms, flags, status, reply,
			    err);
}

/* POST a cJSON document (consumed). */
static int post(struct rv_brain_client *c, const char *what, const char *path, cJSON *doc,
		int flags, long *status, cJSON **reply, struct rv_err *err)
{
	return rv_rest_post(&c->rest, what, path, doc, flags, status, reply, err);
}

/* A uid goes into a path: only the characters the brain makes uids of. */
static int check_uid(const char *uid, struct rv_err *err)
{
	size_t n = uid ? strlen(uid) : 0;
	bool ok = n > 0 && n < RV_BRAIN_UID_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = (uid[i] >= 'a' && uid[i] <= 'z') || (uid[i] >= 'A' && uid[i] <= 'Z') ||
		     (uid[i] >= '0' && uid[i] <= '9') || uid[i] == '-' || uid[i] == '_' ||
		     uid[i] == '.';
	return ok ? 0
		  : rv_err_set(err, -EINVAL, "uid", "job uid \"%.64s\" is not a uid",
			       uid ? uid : "");
}

static int64_t num_or(const cJSON *o, const char *key, int64_t dflt_v)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(it) ? (int64_t)it->valuedouble : dflt_v;
}

static double dbl_or(const cJSON *o, const char *key, double dflt_v)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(it) ? it->valuedouble : dflt_v;
}

static void str_into(const cJSON *o, const char *key, char *out, size_t size)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	snprintf(out, size, "%s", cJSON_IsString(it) ? it->valuestring : "");
}

/* A plan in a reply through the wire parser; field names where it sits. */
static int plan_from(const char *what, const cJSON *o, struct rv_scale_plan *plan,
		     struct rv_err *err)
{
	struct rv_err perr = { 0 };
	if (rv_scale_plan_from_json(o, plan, &perr) < 0)
		return rv_err_set(err, -EPROTO, perr.field, "could not %s: bad plan in reply: %s",
				  what, perr.msg);
	return 0;
}

/* ---- calls ---- */

int rv_brain_register(struct rv_brain_client *c, const struct rv_job_spec *spec,
		      char uid[RV_BRAIN_UID_MAX], struct rv_scale_plan *plan, struct rv_err *err)
{
	const char *what = "register job";
	long st = 0;
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	int rc = post(c, what, "/v1/jobs", rv_job_spec_to_json(spec), CALL_REFUSED_ONLY, &st,
		      &reply, err);
	if (rc < 0)
		return rc;
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(reply, "uid");
	if (!cJSON_IsString(u) || check_uid(u->valuestring, NULL) < 0)
		return rv_err_set(err, -EPROTO, "uid", "could not %s: reply has no uid", what);
	snprintf(uid, RV_BRAIN_UID_MAX, "%s", u->valuestring);
	if (plan)
		return plan_from(what, cJSON_GetObjectItemCaseSensitive(reply, "plan"), plan, err);
	return 0;
}

int rv_brain_post_metrics(struct rv_brain_client *c, const char *uid,
			  struct rv_metrics_batch *batch, int *accepted, struct rv_err *err)
{
	const char *what = "post metrics";
	int rc = check_uid(uid, err);
	if (rc < 0)
		return rc;
	if (!batch->batch_id[0] && (rc = rv_brain_new_id(batch->batch_id)) < 0)
		return rv_err_set(err, rc, "batch_id", "could not %s: no random id: %s", what,
				  strerror(-rc));
	char path[160];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	long st = 0;
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	rc = post(c, what, path, rv_metrics_batch_to_json(batch), CALL_IDEMPOTENT, &st, &reply,
		  err);
	if (rc == 0 && accepted)
		*accepted = (int)num_or(reply, "accepted", 0);
	return rc;
}

int rv_brain_post_event(struct rv_brain_client *c, const char *uid, struct rv_event *ev,
			int64_t *plan_id, struct rv_err *err)
{
	const char *what = "post event";
	int rc = check_uid(uid, err);
	if (rc < 0)
		return rc;
	if (!ev->event_id[0] && (rc = rv_brain_new_id(ev->event_id)) < 0)
		return rv_err_set(err, rc, "event_id", "could not %s: no random id: %s", what,
				  strerror(-rc));
	char path[160];
	snprintf(path, sizeof(path), "/v1/jobs/%s/events", uid);
	long st = 0;
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	rc = post(c, what, path, rv_event_to_json(ev), CALL_IDEMPOTENT, &st, &reply, err);
	if (rc == 0 && plan_id)
		*plan_id = num_or(reply, "plan_id", 0);
	return rc;
}

int rv_brain_plan_get(struct rv_brain_client *c, const char *uid, const char *stage, int64_t after,
		      int wait_s, struct rv_scale_plan *plan, struct rv_err *err)
{
	const char *what = "get plan";
	int rc = check_uid(uid, err);
	if (rc < 0)
		return rc;
	if (stage && strcmp(stage, "create") != 0 && strcmp(stage, "running") != 0 &&
	    strcmp(stage, "oom") != 0)
		return rv_err_set(err, -EINVAL, "stage", "stage must be create, running or oom");
	char path[256];
	int n = snprintf(path, sizeof(path), "/v1/jobs/%s/plan?", uid);
	if (stage)
		n += snprintf(path + n, sizeof(path) - (size_t)n, "stage=%s&", stage);
	if (after > 0 || wait_s > 0)
		n += snprintf(path + n, sizeof(path) - (size_t)n, "after=%" PRId64 "&", after);
	if (wait_s > 0)
		n += snprintf(path + n, sizeof(path) - (size_t)n, "wait=%d&", wait_s);
	path[n - 1] = '\0'; /* the last '&' or the '?' */
	long st = 0;
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	struct rv_err cerr = { 0 };
	rc = call(c, what, "GET", path, NULL, wait_s > 0 ? wait_s * 1000 : 0, CALL_IDEMPOTENT, &st,
		  &reply, &cerr);
	if (rc == -ENOENT && !strcmp(cerr.field, "stage"))
		return 0; /* the job exists but has no plan of the stage yet */
	if (rc < 0) {
		if (err)
			*err = cerr;
		return rc;
	}
	if (st == 204 || !reply)
		return 0;
	rc = plan_from(what, reply, plan, err);
	return rc < 0 ? rc : 1;
}

static void record_from(const cJSON *o, struct rv_brain_plan_record *r)
{
	const cJSON *applied = cJSON_GetObjectItemCaseSensitive(o, "applied_at");
	r->applied = applied && !cJSON_IsNull(applied);
	str_into(o, "outcome", r->outcome, sizeof(r->outcome));
	r->speed_before = dbl_or(o, "speed_before", -1);
	r->speed_after = dbl_or(o, "speed_after", -1);
	r->reverts_plan_id = num_or(o, "reverts_plan_id", 0);
	str_into(o, "not_applied", r->not_applied, sizeof(r->not_applied));
}

int rv_brain_plan_history(struct rv_brain_client *c, const char *uid, int limit,
			  struct rv_brain_plan_record **out, int *n, struct rv_err *err)
{
	const char *what = "get plan history";
	*out = NULL;
	*n = 0;
	int rc = check_uid(uid, err);
	if (rc < 0)
		return rc;
	char path[160];
	snprintf(path, sizeof(path), "/v1/jobs/%s/plans?limit=%d", uid,
		 limit > 0 && limit <= 1000 ? limit : 100);
	long st = 0;
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	rc = call(c, what, "GET", path, NULL, 0, CALL_IDEMPOTENT, &st, &reply, err);
	if (rc < 0)
		return rc;
	const cJSON *plans = cJSON_GetObjectItemCaseSensitive(reply, "plans");
	int count = cJSON_IsArray(plans) ? cJSON_GetArraySize(plans) : 0;
	if (count == 0)
		return 0;
	RV_CLEANUP_FREE struct rv_brain_plan_record *recs = calloc((size_t)count, sizeof(*recs));
	if (!recs)
		return rv_err_set(err, -ENOMEM, "", "could not %s: out of memory", what);
	int i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, plans)
	{
		if ((rc = plan_from(what, it, &recs[i].plan, err)) < 0)
			return rc;
		record_from(it, &recs[i]);
		i++;
	}
	*out = RV_TAKE_PTR(recs);
	*n = count;
	return 0;
}

int rv_brain_job_get(struct rv_brain_client *c, const char *uid, struct rv_brain_job *out,
		     struct rv_err *err)
{
	memset(out, 0, sizeof(*out));
	int rc = check_uid(uid, err);
	if (rc < 0)
		return rc;
	char path[160];
	snprintf(path, sizeof(path), "/v1/jobs/%s", uid);
	long st = 0;
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	rc = call(c, "get job", "GET", path, NULL, 0, CALL_IDEMPOTENT, &st, &reply, err);
	if (rc < 0)
		return rc;
	str_into(reply, "uid", out->uid, sizeof(out->uid));
	str_into(reply, "status", out->status, sizeof(out->status));
	out->last_sample_ts_ms = num_or(reply, "last_sample_ts", 0);
	out->planned_ts_ms = num_or(reply, "planned_ts", 0);
	out->speed_samples = num_or(reply, "speed_samples", 0);
	out->node_samples = num_or(reply, "node_samples", 0);
	out->latest_plan_id = num_or(reply, "latest_plan_id", 0);
	return 0;
}

int rv_brain_cluster_report(struct rv_brain_client *c, const struct rv_cluster_report *r,
			    struct rv_err *err)
{
	long st = 0;
	return post(c, "post cluster report", "/v1/cluster/nodes", rv_cluster_report_to_json(r),
		    CALL_IDEMPOTENT, &st, NULL, err);
}

int rv_brain_cluster_get(struct rv_brain_client *c, struct rv_brain_cluster *out,
			 struct rv_err *err)
{
	const char *what = "get cluster";
	memset(out, 0, sizeof(*out));
	long st = 0;
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	int rc = call(c, what, "GET", "/v1/cluster", NULL, 0, CALL_IDEMPOTENT, &st, &reply, err);
	if (rc < 0)
		return rc;
	const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(reply, "nodes");
	if (cJSON_GetArraySize(nodes) > 0) {
		struct rv_err perr = { 0 };
		if (rv_cluster_report_from_json(reply, &out->nodes, &perr) < 0)
			return rv_err_set(err, -EPROTO, perr.field,
					  "could not %s: bad node in reply: %s", what, perr.msg);
	}
	const cJSON *cap = cJSON_GetObjectItemCaseSensitive(reply, "capacity");
	const cJSON *used = cJSON_GetObjectItemCaseSensitive(reply, "used");
	const cJSON *fr = cJSON_GetObjectItemCaseSensitive(reply, "free");
	out->ready_nodes = (int)num_or(cap, "nodes", 0);
	out->cpu = dbl_or(cap, "cpu", 0);
	out->memory_mb = num_or(cap, "memory_mb", 0);
	out->gpu = (int)num_or(cap, "gpu", 0);
	out->cpu_used = dbl_or(used, "cpu", 0);
	out->memory_used_mb = num_or(used, "memory_mb", 0);
	out->cpu_free = dbl_or(fr, "cpu", 0);
	out->memory_free_mb = num_or(fr, "memory_mb", 0);
	return 0;
}
