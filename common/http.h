/*
 * http.h: the HTTP server wrapper (libmicrohttpd) and client (libcurl).
 *
 * Server: a route table ("GET", "/v1/jobs/{uid}/plan") dispatched to handlers
 * that fill a response; thread per connection (so a long-poll handler may
 * block), or a pool of epoll threads (opts.threads) where a handler may
 * defer its reply to another thread instead (the connection is suspended
 * and holds no thread).  Limits: connections in total and per client
 * address, a deadline for receiving a whole request that slow bytes do
 * not extend, long-polls in total and per address (429 with Retry-After),
 * request body size (413, chunked too) and the memory all bodies in flight
 * hold (503 with Retry-After); idle timeout; keep-alive.  A body framed two
 * ways (two different Content-Lengths, or Content-Length with
 * Transfer-Encoding) is refused with 400 and the connection closed.  Every
 * error the server or a handler gives is JSON {"error","detail","field"};
 * the few libmicrohttpd answers itself before any callback (a request
 * head over the connection's memory: 431, a URI too long: 414, an
 * unsupported HTTP version: 505, a malformed chunk) stay its HTML, as
 * 0.9.75 has no way to replace them.  Routes flagged RV_HTTP_WRITE need
 * "Authorization: Bearer <token>" when a token is set (constant-time compare).
 * Per-route request counts and latency histograms feed rv_http_server_metrics.
 * Handlers run on libmicrohttpd's threads: they must be thread-safe.
 *
 * Client: one easy handle per rv_http_client (one per thread), keep-alive,
 * connect and total timeouts on every call.
 */
#ifndef RV_HTTP_H
#define RV_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define RV_HTTP_MAX_PARAMS 4

/* Limits the server answers itself, in JSON, below libmicrohttpd's own
 * (a request's head must fit the connection's memory, 8 KiB for a pooled
 * server, or libmicrohttpd answers 414/431 itself, in HTML):
 * the request target (path and query) at most RV_HTTP_URI_MAX bytes (414),
 * the header lines (names, values, ": " and CRLF) at most
 * RV_HTTP_HEADERS_MAX bytes (431), every query parameter's value at most
 * RV_HTTP_QUERY_VALUE_MAX bytes and every name and value valid UTF-8 (400
 * naming the parameter; a handler may ask for less). */
#define RV_HTTP_URI_MAX         2048
#define RV_HTTP_HEADERS_MAX     4096
#define RV_HTTP_QUERY_VALUE_MAX 1024

struct rv_http_req {
	const char *method;
	const char *path;
	const char *body;   /* NUL-terminated, may be "" */
	size_t body_len;
	/* path parameters from the pattern, in order ({uid} -> params[0]) */
	const char *params[RV_HTTP_MAX_PARAMS];
	int nparams;
	void *conn;         /* opaque: used by rv_http_query/header */
};

/* Query-string argument or header value, or NULL.  Borrowed for the request. */
const char *rv_http_query(const struct rv_http_req *req, const char *key);
/* Query parameter key as a name of at most max_len bytes (the server has
 * refused values that are not UTF-8 or longer than RV_HTTP_QUERY_VALUE_MAX):
 * 1 with *out set; 0 when absent or empty (*out NULL), or -EINVAL "KEY is
 * required" when required; -EINVAL "KEY is longer than N bytes".  *err
 * names the parameter. */
int rv_http_query_name(const struct rv_http_req *req, const char *key, size_t max_len,
		       bool required, const char **out, struct rv_err *err);
const char *rv_http_header(const struct rv_http_req *req, const char *key);

struct rv_http_resp {
	int status;                /* default 200 */
	char *body;                /* malloc'd, owned by the server after return */
	const char *content_type;  /* default "application/json" */
	const char *cache_control; /* NULL: no Cache-Control header; else its value */
	void *priv;                /* the server's: set before the handler runs */
	bool deferred;             /* set by rv_http_resp_defer */
	int retry_after_s;         /* > 0: a Retry-After header */
};

/* Set a JSON body (takes ownership of the malloc'd string). */
void rv_http_resp_json(struct rv_http_resp *resp, int status, char *json);
/* Set {"error","detail","field"} from a negative errno and optional err. */
void rv_http_resp_error(struct rv_http_resp *resp, int neg_errno, const struct rv_err *err);
/* Same with an explicit status and texts. */
void rv_http_resp_error_text(struct rv_http_resp *resp, int status, const char *error,
			     const char *detail, const char *field);

/* A deferred reply: the handler returns without a response and the
 * connection is suspended (it holds no thread) until rv_http_complete.  Only
 * on a pooled server (opts.threads > 0); NULL otherwise, and the handler
 * replies as usual.  Anything already in resp is dropped.  The handle must
 * be completed exactly once; rv_http_server_stop waits for every one. */
struct rv_http_defer;
struct rv_http_defer *rv_http_resp_defer(struct rv_http_resp *resp);
/* The same for a reply that waits on the client's behalf (a long-poll):
 * it counts against opts.max_deferred and opts.max_deferred_per_ip, and
 * past them NULL with resp holding a 429 with Retry-After (JSON), which
 * the handler returns. */
struct rv_http_defer *rv_http_resp_wait(struct rv_http_resp *resp);
/* From any thread: queue the reply (takes ownership of the malloc'd json;
 * NULL answers 500, except with status 204: no body) and resume the
 * connection.  The handle is gone after. */
void rv_http_complete(struct rv_http_defer *d, int status, char *json);
/* Whether the client of a deferred request closed its connection (its
 * process died, or it gave up waiting): the socket reads end-of-file.  Call
 * it only before rv_http_complete, from the one thread that completes d. */
bool rv_http_defer_gone(const struct rv_http_defer *d);

/* A handler returns 0 after filling resp; a negative errno return (with resp
 * left empty) becomes an error response by rv_errno_to_http. */
typedef int (*rv_http_handler_fn)(struct rv_http_req *req, struct rv_http_resp *resp,
				  void *ctx);

enum { RV_HTTP_WRITE = 1 << 0 };

struct rv_http_route {
	const char *method;     /* "GET", "POST", ... */
	const char *pattern;    /* "/v1/jobs/{uid}/plan": {x} matches one segment */
	rv_http_handler_fn fn;
	int flags;              /* RV_HTTP_WRITE */
	const char *summary;    /* one line, for /v1/openapi.json and logs */
};

struct rv_http_server_opts {
	const char *host;          /* "127.0.0.1" */
	int port;                  /* 0 = pick a free port (see rv_http_server_port) */
	const char *token;         /* NULL or "" = no auth */
	size_t max_body;           /* bytes; larger bodies get 413 */
	int conn_timeout_s;        /* idle connection timeout */
	int max_conns;             /* connection limit */
	/* 0: a thread per connection (a handler may block).  > 0: this many
	 * threads serve every connection with epoll; a handler must not block
	 * for long, and may defer its reply (rv_http_resp_defer). */
	int threads;
	/* 0 means no limit for each of these. */
	int per_ip_conns; /* open connections from one client address */
	/* Seconds a client has to send a whole request (head and body) from
	 * the moment it connected (or, on a kept-alive connection, sent the
	 * next request line); bytes trickling in do not extend it.  Past it
	 * the connection is closed. */
	int request_timeout_s;
	int max_deferred;        /* rv_http_resp_wait replies open at once */
	int max_deferred_per_ip; /* of those, from one client address */
	/* Bytes of request bodies held at once over all connections (bodies
	 * being received or waiting for their handler); a body that does not
	 * fit gets 503 with Retry-After. */
	size_t body_budget;
	const struct rv_http_route *routes;
	int nroutes;
	void *ctx;                 /* passed to every handler */
};

struct rv_http_server;

/* Start listening.  NULL on failure with *err set (e.g. address in use). */
struct rv_http_server *rv_http_server_start(const struct rv_http_server_opts *opts,
					    struct rv_err *err);
/* Stop accepting, wait for handlers to finish, free.  Accepts NULL. */
void rv_http_server_stop(struct rv_http_server *srv);
int rv_http_server_port(const struct rv_http_server *srv);

/* Prometheus text for the server's own counters (rover_http_requests_total
 * {route,method,code}, rover_http_request_duration_seconds histogram,
 * rover_http_rejected_total{reason}, connections).
 * malloc'd; caller frees. */
char *rv_http_server_metrics(struct rv_http_server *srv);

/* ---- client ---- */
struct rv_http_client;

struct rv_http_client *rv_http_client_new(const char *token, int connect_timeout_ms,
					  int timeout_ms);
void rv_http_client_free(struct rv_http_client *c);

struct rv_http_result {
	long status;   /* HTTP status, 0 when no response */
	char *body;    /* malloc'd response body (NUL-terminated) or NULL; caller frees */
	size_t body_len;
};

/* method "GET"/"POST"/..., body may be NULL.  timeout_ms <= 0 uses the client's.
 * Returns 0 when a response arrived (any status), negative errno otherwise
 * (-ECONNREFUSED, -ETIMEDOUT, ...) with curl's text in *err. */
int rv_http_request(struct rv_http_client *c, const char *method, const char *url,
		    const char *body, size_t body_len, int timeout_ms,
		    struct rv_http_result *out, struct rv_err *err);
void rv_http_result_release(struct rv_http_result *r);

#endif
