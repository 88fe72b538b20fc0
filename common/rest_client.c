/*
 * rest_client.c: one JSON call with retries and error mapping (see
 * rest_client.h), shared by the typed clients of the brain and the master.
 * No globals; never logs.
 */
#include "rest_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "cleanup.h"
#include "http.h"
#include "parse.h"

static int dflt_int(int v, int d)
{
	return v > 0 ? v : d;
}

int rv_rest_init(struct rv_rest *r, const char *peer, int flags, const struct rv_rest_opts *opts,
		 const struct rv_rest_opts *dflt, struct rv_err *err)
{
	memset(r, 0, sizeof(*r));
	r->peer = peer;
	r->flags = flags;
	bool https = flags & RV_REST_HTTPS;
	if (!opts || !opts->url ||
	    (strncmp(opts->url, "http://", 7) != 0 &&
	     (!https || strncmp(opts->url, "https://", 8) != 0)))
		return rv_err_set(err, -EINVAL, "url", "%s url must start with http://%s", peer,
				  https ? " or https://" : "");
	r->o.connect_timeout_ms = dflt_int(opts->connect_timeout_ms, dflt->connect_timeout_ms);
	r->o.timeout_ms = dflt_int(opts->timeout_ms, dflt->timeout_ms);
	r->o.max_attempts = dflt_int(opts->max_attempts, dflt->max_attempts);
	r->o.backoff_ms = dflt_int(opts->backoff_ms, dflt->backoff_ms);
	r->o.backoff_max_ms = dflt_int(opts->backoff_max_ms, dflt->backoff_max_ms);
	r->o.retry_budget_ms = dflt_int(opts->retry_budget_ms, dflt->retry_budget_ms);
	r->url = strdup(opts->url);
	size_t n = r->url ? strlen(r->url) : 0;
	while (n > 0 && r->url[n - 1] == '/')
		r->url[--n] = '\0';
	r->http = r->url ? rv_http_client_new(opts->token, r->o.connect_timeout_ms, r->o.timeout_ms)
			 : NULL;
	if (!r->http) {
		int rc = rv_err_set(err, r->url ? -EINVAL : -ENOMEM, "token",
				    "could not create the http client (token with a line break?)");
		rv_rest_release(r);
		return rc;
	}
	if (getrandom(&r->rnd, sizeof(r->rnd), GRND_NONBLOCK) != sizeof(r->rnd))
		r->rnd = (uint64_t)rv_mono_ms() ^ (uint64_t)(uintptr_t)r;
	r->rnd |= 1;
	return 0;
}

void rv_rest_release(struct rv_rest *r)
{
	rv_http_client_free(r->http);
	r->http = NULL;
	free(r->url);
	r->url = NULL;
}

uint64_t rv_rest_rand(struct rv_rest *r)
{
	r->rnd ^= r->rnd << 13;
	r->rnd ^= r->rnd >> 7;
	r->rnd ^= r->rnd << 17;
	return r->rnd;
}

static bool transient_errno(const struct rv_rest *r, int rc)
{
	if (rc == -ECONNREFUSED || rc == -ECONNRESET || rc == -ETIMEDOUT || rc == -EHOSTUNREACH)
		return true;
	return (r->flags & RV_REST_RETRY_BROKEN) && (rc == -EPIPE || rc == -EIO || rc == -EPROTO);
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
	case 410: /* gone for good (the master: the rendezvous failed, the job stops) */
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
static int64_t backoff(struct rv_rest *r, int n)
{
	int64_t p = r->o.backoff_ms;
	for (int i = 1; i < n && p < r->o.backoff_max_ms; i++)
		p *= 2;
	if (p > r->o.backoff_max_ms)
		p = r->o.backoff_max_ms;
	return p / 2 + (int64_t)(rv_rest_rand(r) % (uint64_t)(p / 2 + 1));
}

/* err from an error reply: {"error","detail","field"} when the peer sent it. */
static int reply_error(const struct rv_rest *r, const char *what, const struct rv_http_result *res,
		       struct rv_err *err)
{
	int code = status_errno(res->status);
	RV_CLEANUP_CJSON cJSON *doc =
		res->body && res->body_len ? rv_json_parse(res->body, res->body_len, NULL) : NULL;
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(doc, "error");
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(doc, "detail");
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(doc, "field");
	if (cJSON_IsString(e))
		return rv_err_set(err, code, cJSON_IsString(f) ? f->valuestring : "",
				  "could not %s: %s answered %ld %s: %s", what, r->peer,
				  res->status, e->valuestring,
				  cJSON_IsString(d) ? d->valuestring : "");
	return rv_err_set(err, code, "", "could not %s: %s answered %ld %.200s", what, r->peer,
			  res->status, res->body ? res->body : "");
}

int rv_rest_call(struct rv_rest *r, const char *what, const char *method, const char *path,
		 const char *body, int extra_ms, int call_flags, long *status, cJSON **reply,
		 struct rv_err *err)
{
	if (reply)
		*reply = NULL;
	r->last_status = 0;
	r->last_attempts = 0;
	RV_CLEANUP_FREE char *url = NULL;
	if (asprintf(&url, "%s%s", r->url, path) < 0) {
		url = NULL;
		return rv_err_set(err, -ENOMEM, "", "could not %s: out of memory", what);
	}
	int timeout = r->o.timeout_ms + extra_ms;
	int64_t deadline = rv_mono_ms() + r->o.retry_budget_ms + extra_ms;
	struct rv_http_result res = { 0 };
	struct rv_err herr = { 0 };
	int rc = 0;
	for (int attempt = 1;; attempt++) {
		r->last_attempts = attempt;
		rv_http_result_release(&res);
		rc = rv_http_request(r->http, method, url, body, body ? strlen(body) : 0, timeout,
				     &res, &herr);
		r->last_status = rc == 0 ? res.status : 0;
		bool again;
		if (rc < 0)
			again = ((call_flags & RV_REST_IDEMPOTENT) && transient_errno(r, rc)) ||
				((call_flags & RV_REST_REFUSED_ONLY) && rc == -ECONNREFUSED);
		else
			again = (call_flags & RV_REST_IDEMPOTENT) &&
				(res.status == 502 || res.status == 503 || res.status == 504);
		if (!again || attempt >= r->o.max_attempts)
			break;
		int64_t pause = backoff(r, attempt);
		if (rv_mono_ms() + pause >= deadline)
			break;
		sleep_ms(pause);
	}
	if (rc < 0)
		return rv_err_set(err, rc, "", "could not %s: %s (%d attempt%s)", what, herr.msg,
				  r->last_attempts, r->last_attempts == 1 ? "" : "s");
	if (res.status < 200 || res.status >= 300) {
		rc = reply_error(r, what, &res, err);
		rv_http_result_release(&res);
		return rc;
	}
	if (status)
		*status = res.status;
	if (reply && res.body_len > 0) {
		*reply = rv_json_parse(res.body, res.body_len, &herr);
		if (!*reply)
			rc = rv_err_set(err, -EPROTO, "", "could not %s: reply is not json: %s",
					what, herr.msg);
	}
	rv_http_result_release(&res);
	return rc;
}

int rv_rest_post(struct rv_rest *r, const char *what, const char *path, cJSON *doc, int call_flags,
		 long *status, cJSON **reply, struct rv_err *err)
{
	RV_CLEANUP_FREE char *body = doc ? rv_json_print(doc) : NULL;
	cJSON_Delete(doc);
	if (reply)
		*reply = NULL;
	if (!body)
		return rv_err_set(err, -ENOMEM, "", "could not %s: out of memory", what);
	return rv_rest_call(r, what, "POST", path, body, 0, call_flags, status, reply, err);
}
