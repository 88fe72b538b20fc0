/*
 * master_client.c: rover-master's control API as typed calls (see
 * master_client.h).  Every call goes through call(): the URL, the body, the
 * retry policy and the mapping of an error reply to errno + rv_err.  Bodies
 * go out through wire.c's *_to_json and replies come back through
 * *_from_json, the code the master validates with.  One client per thread;
 * never logs.
 */
#include "master_client.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "cleanup.h"
#include "http.h"
#include "json.h"
#include "parse.h"

struct rv_master_client {
	struct rv_http_client *http;
	char *url;               /* base, no trailing '/' */
	struct rv_master_opts o; /* timeouts and retry policy (url/token not kept here) */
	uint64_t rnd;            /* xorshift state: back-off jitter, request ids */
	long last_status;
	int last_attempts;
};

static int dflt(int v, int d)
{
	return v > 0 ? v : d;
}

struct rv_master_client *rv_master_client_new(const struct rv_master_opts *opts, struct rv_err *err)
{
	if (!opts || !opts->url || strncmp(opts->url, "http://", 7) != 0) {
		rv_err_set(err, -EINVAL, "url", "master url must start with http://");
		return NULL;
	}
	struct rv_master_client *c = calloc(1, sizeof(*c));
	if (!c) {
		rv_err_set(err, -ENOMEM, "", "could not allocate a master client");
		return NULL;
	}
	c->o = *opts;
	c->o.url = c->o.token = NULL;
	c->o.connect_timeout_ms = dflt(opts->connect_timeout_ms, 2000);
	c->o.timeout_ms = dflt(opts->timeout_ms, 10000);
	c->o.max_attempts = dflt(opts->max_attempts, 20);
	c->o.backoff_ms = dflt(opts->backoff_ms, 20);
	c->o.backoff_max_ms = dflt(opts->backoff_max_ms, 1000);
	c->o.retry_budget_ms = dflt(opts->retry_budget_ms, 30000);
	c->url = strdup(opts->url);
	size_t n = c->url ? strlen(c->url) : 0;
	while (n > 0 && c->url[n - 1] == '/')
		c->url[--n] = '\0';
	c->http = c->url ? rv_http_client_new(opts->token, c->o.connect_timeout_ms, c->o.timeout_ms)
			 : NULL;
	if (!c->http) {
		rv_err_set(err, c->url ? -EINVAL : -ENOMEM, "token",
			   "could not create the http client (token with a line break?)");
		return rv_master_client_free(c);
	}
	if (getrandom(&c->rnd, sizeof(c->rnd), GRND_NONBLOCK) != sizeof(c->rnd))
		c->rnd = (uint64_t)rv_mono_ms() ^ (uint64_t)(uintptr_t)c;
	c->rnd |= 1;
	return c;
}

struct rv_master_client *rv_master_client_free(struct rv_master_client *c)
{
	if (!c)
		return NULL;
	rv_http_client_free(c->http);
	free(c->url);
	free(c);
	return NULL;
}

long rv_master_last_status(const struct rv_master_client *c)
{
	return c->last_status;
}

int rv_master_last_attempts(const struct rv_master_client *c)
{
	return c->last_attempts;
}

static uint64_t next_rnd(struct rv_master_client *c)
{
	c->rnd ^= c->rnd << 13;
	c->rnd ^= c->rnd >> 7;
	c->rnd ^= c->rnd << 17;
	return c->rnd;
}

/* ---- one call: retries, back-off, errors ---- */

enum {
	CALL_IDEMPOTENT = 1 << 0,   /* retry transport errors and 502/503/504 */
	CALL_REFUSED_ONLY = 1 << 1, /* retry only a refused connection */
};

static bool transient_errno(int rc)
{
	return rc == -ECONNREFUSED || rc == -ECONNRESET || rc == -ETIMEDOUT ||
	       rc == -EHOSTUNREACH || rc == -EPIPE || rc == -EIO || rc == -EPROTO;
}

static int status_errno(long status)
{
	switch (status) {
	case 400:
		return -EINVAL;
	case 401:
	case 403:
		return -EACCES;
	case 404:
		return -ENOENT;
	case 409:
		return -EEXIST;
	case 410: /* the rendezvous failed: the job stops */
		return -ECANCELED;
	case 413:
		return -EMSGSIZE;
	case 422:
		return -EDOM;
	case 503:
		return -EAGAIN;
	case 504:
		return -ETIMEDOUT;
	default:
		return -EIO;
	}
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Pause before retry n (1-based): backoff * 2^(n-1), capped, then between
 * half and all of it so clients that failed together do not return together. */
static int64_t backoff(struct rv_master_client *c, int n)
{
	int64_t p = c->o.backoff_ms;
	for (int i = 1; i < n && p < c->o.backoff_max_ms; i++)
		p *= 2;
	if (p > c->o.backoff_max_ms)
		p = c->o.backoff_max_ms;
	return p / 2 + (int64_t)(next_rnd(c) % (uint64_t)(p / 2 + 1));
}

static int reply_error(const char *what, const struct rv_http_result *res, struct rv_err *err)
{
	int code = status_errno(res->status);
	RV_CLEANUP_CJSON cJSON *doc =
		res->body && res->body_len ? rv_json_parse(res->body, res->body_len, NULL) : NULL;
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(doc, "error");
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(doc, "detail");
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(doc, "field");
	if (cJSON_IsString(e))
		return rv_err_set(err, code, cJSON_IsString(f) ? f->valuestring : "",
				  "could not %s: master answered %ld %s: %s", what, res->status,
				  e->valuestring, cJSON_IsString(d) ? d->valuestring : "");
	return rv_err_set(err, code, "", "could not %s: master answered %ld %.200s", what,
			  res->status, res->body ? res->body : "");
}

/*
 * method path (joined to the base url), body may be NULL; extra_ms
 * lengthens the attempt's timeout (a long-poll's wait).  0 with *reply (the
 * parsed body; the caller's) for a 2xx, else a negative errno with err set.
 */
static int call(struct rv_master_client *c, const char *what, const char *method, const char *path,
		const char *body, int extra_ms, int flags, cJSON **reply, struct rv_err *err)
{
	*reply = NULL;
	c->last_status = 0;
	c->last_attempts = 0;
	RV_CLEANUP_FREE char *url = NULL;
	if (asprintf(&url, "%s%s", c->url, path) < 0) {
		url = NULL;
		return rv_err_set(err, -ENOMEM, "", "could not %s: out of memory", what);
	}
	int timeout = c->o.timeout_ms + extra_ms;
	int64_t deadline = rv_mono_ms() + c->o.retry_budget_ms + extra_ms;
	struct rv_http_result res = { 0 };
	struct rv_err herr = { 0 };
	int rc = 0;
	for (int attempt = 1;; attempt++) {
		c->last_attempts = attempt;
		rv_http_result_release(&res);
		rc = rv_http_request(c->http, method, url, body, body ? strlen(body) : 0, timeout,
				     &res, &herr);
		c->last_status = rc == 0 ? res.status : 0;
		bool again;
		if (rc < 0)
			again = ((flags & CALL_IDEMPOTENT) && transient_errno(rc)) ||
				((flags & CALL_REFUSED_ONLY) && rc == -ECONNREFUSED);
		else
			again = (flags & CALL_IDEMPOTENT) &&
				(res.status == 502 || res.status == 503 || res.status == 504);
		if (!again || attempt >= c->o.max_attempts)
			break;
		int64_t pause = backoff(c, attempt);
		if (rv_mono_ms() + pause >= deadline)
			break;
		sleep_ms(pause);
	}
	if (rc < 0)
		return rv_err_set(err, rc, "", "could not %s: %s (%d attempt%s)", what, herr.msg,
				  c->last_attempts, c->last_attempts == 1 ? "" : "s");
	if (res.status < 200 || res.status >= 300) {
		rc = reply_error(what, &res, err);
		rv_http_result_release(&res);
		return rc;
	}
	if (res.body_len > 0) {
		*reply = rv_json_parse(res.body, res.body_len, &herr);
		if (!*reply)
			rc = rv_err_set(err, -EPROTO, "", "could not %s: reply is not json: %s",
					what, herr.msg);
	}
	rv_http_result_release(&res);
	if (rc == 0 && !*reply)
		rc = rv_err_set(err, -EPROTO, "", "could not %s: empty reply", what);
	return rc;
}

/* POST a cJSON document (consumed). */
static int post(struct rv_master_client *c, const char *what, const char *path, cJSON *doc,
		int flags, cJSON **reply, struct rv_err *err)
{
	RV_CLEANUP_FREE char *body = doc ? rv_json_print(doc) : NULL;
	cJSON_Delete(doc);
	*reply = NULL;
	if (!body)
		return rv_err_set(err, -ENOMEM, "", "could not %s: out of memory", what);
	return call(c, what, "POST", path, body, 0, flags, reply, err);
}

/* A reply that does not parse as its message names the field. */
static int bad_reply(const char *what, int rc, struct rv_err *err)
{
	if (err)
		return rv_err_set(err, -EPROTO, err->field, "could not %s: bad reply: %s", what,
				  err->msg);
	return rc < 0 ? -EPROTO : rc;
}

int rv_master_join(struct rv_master_client *c, const struct rv_rdzv_join *j, int64_t *round,
		   struct rv_err *err)
{
	const char *what = "join the rendezvous";
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	int rc = post(c, what, "/v1/rdzv/join", rv_rdzv_join_to_json(j), CALL_REFUSED_ONLY, &reply,
		      err);
	if (rc < 0)
		return rc;
	struct rv_rdzv_joined m;
	if ((rc = rv_rdzv_joined_from_json(reply, &m, err)) < 0)
		return bad_reply(what, rc, err);
	*round = m.round;
	return 0;
}

/* Node names go into a query string: only the characters wire.c allows. */
static int check_node(const char *node, struct rv_err *err)
{
	size_t n = node ? strlen(node) : 0;
	bool ok = n > 0 && n < RV_NAME_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = (node[i] >= 'a' && node[i] <= 'z') || (node[i] >= 'A' && node[i] <= 'Z') ||
		     (node[i] >= '0' && node[i] <= '9') || node[i] == '-' || node[i] == '_' ||
		     node[i] == '.';
	return ok ? 0
		  : rv_err_set(err, -EINVAL, "node", "node \"%.64s\" is not a node name",
			       node ? node : "");
}

int rv_master_world(struct rv_master_client *c, const char *node, int64_t round, int wait_ms,
		    struct rv_rdzv_world_reply *out, struct rv_err *err)
{
	const char *what = "get the rendezvous world";
	memset(out, 0, sizeof(*out));
	int rc = check_node(node, err);
	if (rc < 0)
		return rc;
	char path[256];
	snprintf(path, sizeof(path), "/v1/rdzv/world?node=%s&round=%" PRId64 "&wait_ms=%d", node,
		 round, wait_ms > 0 ? wait_ms : 0);
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	rc = call(c, what, "GET", path, NULL, wait_ms > 0 ? wait_ms : 0, CALL_IDEMPOTENT, &reply,
		  err);
	if (rc < 0)
		return rc;
	if ((rc = rv_rdzv_world_reply_from_json(reply, out, err)) < 0)
		return bad_reply(what, rc, err);
	return 0;
}

int rv_master_rendezvous(struct rv_master_client *c, const struct rv_rdzv_join *j, int timeout_ms,
			 struct rv_rdzv_world_reply *out, struct rv_err *err)
{
	int64_t until = rv_mono_ms() + timeout_ms;
	int64_t round = 0;
	int rc;
	memset(out, 0, sizeof(*out));
	bool join = true;
	for (;;) {
		if (join && (rc = rv_master_join(c, j, &round, err)) < 0)
			return rc;
		join = false;
		int64_t left = until - rv_mono_ms();
		if (left <= 0)
			return rv_err_set(err, -ETIMEDOUT, "", "could not rendezvous within %d ms",
					  timeout_ms);
		rv_rdzv_world_reply_release(out);
		rc = rv_master_world(c, j->node, round, (int)(left < 5000 ? left : 5000), out, err);
		if (rc < 0)
			return rc;
		switch (out->status) {
		case RV_RDZV_COMPLETE:
			return 0;
		case RV_RDZV_FAILED:
			return rv_err_set(err, -ECANCELED, "",
					  "the rendezvous failed: min nodes not reached in time");
		case RV_RDZV_STALE:
		case RV_RDZV_UNKNOWN:
			join = true;
			break;
		case RV_RDZV_SPARE: /* waits until a round opens: then stale */
		case RV_RDZV_GATHERING:
			break;
		}
	}
}

int rv_master_heartbeat(struct rv_master_client *c, const char *node,
			struct rv_heartbeat_reply *out, struct rv_err *err)
{
	const char *what = "send a heartbeat";
	struct rv_heartbeat hb = { 0 };
	int rc = check_node(node, err);
	if (rc < 0)
		return rc;
	snprintf(hb.node, sizeof(hb.node), "%s", node);
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	if ((rc = post(c, what, "/v1/heartbeat", rv_heartbeat_to_json(&hb), CALL_IDEMPOTENT, &reply,
		       err)) < 0)
		return rc;
	struct rv_heartbeat_reply m;
	if ((rc = rv_heartbeat_reply_from_json(reply, &m, err)) < 0)
		return bad_reply(what, rc, err);
	if (out)
		*out = m;
	return 0;
}

int rv_master_failure(struct rv_master_client *c, const struct rv_failure_report *f,
		      struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	return post(c, "report a failure", "/v1/failure", rv_failure_report_to_json(f),
		    CALL_IDEMPOTENT, &reply, err);
}

int rv_master_shard_next(struct rv_master_client *c, const struct rv_shard_next *req,
			 struct rv_shard_task *out, struct rv_err *err)
{
	const char *what = "get the next shard";
	struct rv_shard_next m = *req;
	if (m.req <= 0)
		m.req = (int64_t)(next_rnd(c) & ((UINT64_C(1) << 52) - 1)) + 1;
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	int rc = post(c, what, "/v1/shards/next", rv_shard_next_to_json(&m), CALL_IDEMPOTENT,
		      &reply, err);
	if (rc < 0)
		return rc;
	if ((rc = rv_shard_task_from_json(reply, out, err)) < 0)
		return bad_reply(what, rc, err);
	return 0;
}

int rv_master_shard_done(struct rv_master_client *c, const struct rv_shard_done *d, bool *counted,
			 struct rv_err *err)
{
	const char *what = "report a shard done";
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	int rc = post(c, what, "/v1/shards/done", rv_shard_done_to_json(d), CALL_IDEMPOTENT, &reply,
		      err);
	if (rc < 0)
		return rc;
	struct rv_shard_done_reply m;
	if ((rc = rv_shard_done_reply_from_json(reply, &m, err)) < 0)
		return bad_reply(what, rc, err);
	if (counted)
		*counted = m.counted;
	return 0;
}

int rv_master_ckpt_report(struct rv_master_client *c, const struct rv_ckpt_report *r,
			  struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	return post(c, "report a data checkpoint", "/v1/shards/ckpt/report",
		    rv_ckpt_report_to_json(r), CALL_IDEMPOTENT, &reply, err);
}

int rv_master_ckpt_export(struct rv_master_client *c, int64_t step, struct rv_data_ckpt *out,
			  struct rv_err *err)
{
	const char *what = "export a data checkpoint";
	memset(out, 0, sizeof(*out));
	char path[96];
	snprintf(path, sizeof(path), "/v1/shards/ckpt?step=%" PRId64, step);
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	int rc = call(c, what, "GET", path, NULL, 0, CALL_IDEMPOTENT, &reply, err);
	if (rc < 0)
		return rc;
	if ((rc = rv_data_ckpt_from_json(reply, out, err)) < 0)
		return bad_reply(what, rc, err);
	return 0;
}

int rv_master_ckpt_import(struct rv_master_client *c, const struct rv_data_ckpt *ck,
			  struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	cJSON *doc = rv_data_ckpt_to_json(ck);
	if (!doc)
		return rv_err_set(err, -EINVAL, "checkpoint",
				  "could not import a data checkpoint: it is not json");
	return post(c, "import a data checkpoint", "/v1/shards/ckpt/import", doc, CALL_REFUSED_ONLY,
		    &reply, err);
}

int rv_master_step(struct rv_master_client *c, const struct rv_step_report *s, struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	return post(c, "report a step", "/v1/steps", rv_step_report_to_json(s), CALL_IDEMPOTENT,
		    &reply, err);
}

int rv_master_job(struct rv_master_client *c, struct rv_job_status *out, struct rv_err *err)
{
	const char *what = "get the job status";
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	int rc = call(c, what, "GET", "/v1/job", NULL, 0, CALL_IDEMPOTENT, &reply, err);
	if (rc < 0)
		return rc;
	if ((rc = rv_job_status_from_json(reply, out, err)) < 0)
		return bad_reply(what, rc, err);
	return 0;
}
