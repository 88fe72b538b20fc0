/*
 * rest_server.h: what the daemons' api.c files share around the HTTP
 * server (http.h): a JSON reply, a JSON body, starting on a HOST:PORT
 * listen address, and a /metrics page (its counters, then the daemon's
 * own lines).  Every daemon's HTTP face uses it; handlers run on libmicrohttpd's threads and these
 * functions keep no state.  Never logs.
 */
#ifndef RV_REST_SERVER_H
#define RV_REST_SERVER_H

#include <stddef.h>

#include "buf.h"
#include "http.h"
#include "json.h"

/* Reply doc (consumed; NULL counts as out of memory) with status.  0 or
 * -ENOMEM. */
int rv_rest_reply(struct rv_http_resp *resp, int status, cJSON *doc);

/* The request body as JSON, the caller's (cJSON_Delete); NULL with a 400
 * reply set when it is empty or not JSON. */
cJSON *rv_rest_parse_body(const struct rv_http_req *req, struct rv_http_resp *resp);

/* "HOST:PORT" ("[::1]:80" too) into host (hsize bytes) and *port.  0 or
 * -EINVAL. */
int rv_rest_split_listen(const char *listen, char *host, size_t hsize, int *port);

/* rv_http_server_start on listen ("HOST:PORT") with the rest of o (its
 * host and port are ignored).  NULL with err set (err->field
 * "server.listen" for a bad address). */
struct rv_http_server *rv_rest_server_start(const char *listen, const struct rv_http_server_opts *o,
					    struct rv_err *err);

/* rv_rest_server_start for a daemon's small server (its /healthz and
 * /metrics) into *srv: bodies up to 4 KiB, 30 s a connection, 32
 * connections, one thread; token NULL or "" for none.  0, or a negative
 * errno with err set and *srv NULL. */
int rv_rest_small_server_start(struct rv_http_server **srv, const char *listen, const char *token,
			       const struct rv_http_route *routes, int nroutes, void *ctx,
			       struct rv_err *err);

/* One counter of a /metrics page: an atomic_uint_least64_t at off in the
 * daemon's state. */
struct rv_rest_counter {
	const char *name, *help;
	size_t off;
};

/* out gets srv's own metrics (srv may be NULL) then each counter read at
 * base + off, in Prometheus text. */
void rv_rest_metrics_counters(struct rv_buf *out, struct rv_http_server *srv, const void *base,
			      const struct rv_rest_counter *c, size_t n);

/* Reply out's text (its buffer moves to resp) as a Prometheus page.  0 or
 * -ENOMEM. */
int rv_rest_reply_metrics(struct rv_http_resp *resp, struct rv_buf *out);

/* A daemon's /metrics page: its counters, then what more appends (NULL:
 * nothing) from the daemon's state base. */
struct rv_rest_metrics_page {
	const struct rv_rest_counter *counters;
	size_t ncounters;
	void (*more)(struct rv_buf *out, void *base);
};

/* Reply the page: srv's own metrics (srv may be NULL), page's counters read
 * at base, then page->more's lines.  0 or -ENOMEM. */
int rv_rest_metrics_reply(struct rv_http_resp *resp, struct rv_http_server *srv, void *base,
			  const struct rv_rest_metrics_page *page);

#endif
