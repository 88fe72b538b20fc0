/*
 * rest_client.h: one JSON call to a Rover daemon's REST API over the HTTP
 * client (http.h), with the retry policy and the error mapping every typed
 * client (brain_client.c, master_client.c) shares: a timeout per attempt,
 * the bearer token, retries with capped jittered exponential back-off for
 * the calls that are safe to repeat, and an error reply
 * {"error","detail","field"} turned into a negative errno + rv_err.
 *
 * Status -> errno: 400 -EINVAL, 401/403 -EACCES, 404 -ENOENT, 409 -EEXIST,
 * 410 -ECANCELED, 413 -EMSGSIZE, 422 -EDOM, 503 -EAGAIN, 504 -ETIMEDOUT,
 * other -EIO.
 *
 * A struct rv_rest is embedded in the typed client and belongs to one
 * thread (one curl handle).  Never logs.
 */
#ifndef RV_REST_CLIENT_H
#define RV_REST_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "json.h"

struct rv_http_client;

/* What rv_rest_init needs; int fields 0 take the caller's defaults. */
struct rv_rest_opts {
	const char *url;        /* base url; copied */
	const char *token;      /* NULL or "" = none; copied */
	int connect_timeout_ms; /* per attempt */
	int timeout_ms;         /* per attempt (a long-poll adds its wait) */
	int max_attempts;       /* for retried calls; 1 = never retry */
	int backoff_ms;         /* first pause, doubled after each retry */
	int backoff_max_ms;     /* longest pause */
	int retry_budget_ms;    /* no retry starts after this long since the call began */
};

/* A struct rv_rest_opts from a typed client's options (a pointer to a
 * struct with the same fields: rv_brain_opts, rv_master_opts). */
#define RV_REST_OPTS_OF(p)                                                                         \
	((struct rv_rest_opts){ .url = (p)->url,                                                   \
				.token = (p)->token,                                               \
				.connect_timeout_ms = (p)->connect_timeout_ms,                     \
				.timeout_ms = (p)->timeout_ms,                                     \
				.max_attempts = (p)->max_attempts,                                 \
				.backoff_ms = (p)->backoff_ms,                                     \
				.backoff_max_ms = (p)->backoff_max_ms,                             \
				.retry_budget_ms = (p)->retry_budget_ms })

/* Flags of a client (rv_rest_init). */
enum {
	RV_REST_HTTPS = 1 << 0,        /* https:// urls are accepted too */
	RV_REST_RETRY_BROKEN = 1 << 1, /* a broken reply (-EPIPE, -EIO, -EPROTO) is
					* transient too */
};

/* Flags of a call (rv_rest_call). */
enum {
	RV_REST_IDEMPOTENT = 1 << 0,   /* retry transport errors and 502/503/504 */
	RV_REST_REFUSED_ONLY = 1 << 1, /* retry only a refused connection */
};

struct rv_rest {
	struct rv_http_client *http;
	char *url;             /* base, no trailing '/' */
	const char *peer;      /* "brain", "master": in messages; static */
	int flags;             /* RV_REST_HTTPS, RV_REST_RETRY_BROKEN */
	struct rv_rest_opts o; /* with the defaults filled in; url/token not kept here */
	uint64_t rnd;          /* xorshift state: back-off jitter, request ids */
	long last_status;      /* of the last call's last response; 0: none came */
	int last_attempts;
};

/*
 * Set r up for peer (a static string, "brain") from opts (borrowed; fields
 * 0 take dflt's).  0, or a negative errno with err set (a url that is not
 * http:// (or https:// with RV_REST_HTTPS), a token with a line break, out
 * of memory); r is released either way on failure.  rv_rest_release frees.
 */
int rv_rest_init(struct rv_rest *r, const char *peer, int flags, const struct rv_rest_opts *opts,
		 const struct rv_rest_opts *dflt, struct rv_err *err);
/* Frees what r holds; r may be zeroed or already released. */
void rv_rest_release(struct rv_rest *r);

/* The next number of r's xorshift generator (not for secrets). */
uint64_t rv_rest_rand(struct rv_rest *r);

/*
 * method path (joined to the base url), body may be NULL; extra_ms lengthens
 * the attempt's timeout and the retry budget (a long-poll's wait); call_flags
 * RV_REST_IDEMPOTENT or RV_REST_REFUSED_ONLY (0: never retried); what names
 * the call in messages ("get job").  0 for a 2xx with *status (may be NULL)
 * and *reply (may be NULL; the parsed body or NULL when empty, the caller's:
 * cJSON_Delete); otherwise a negative errno with err set.
 */
int rv_rest_call(struct rv_rest *r, const char *what, const char *method, const char *path,
		 const char *body, int extra_ms, int call_flags, long *status, cJSON **reply,
		 struct rv_err *err);

/* rv_rest_call with method POST and the body doc (consumed, may be NULL
 * after a failed build: -ENOMEM). */
int rv_rest_post(struct rv_rest *r, const char *what, const char *path, cJSON *doc, int call_flags,
		 long *status, cJSON **reply, struct rv_err *err);

#endif
