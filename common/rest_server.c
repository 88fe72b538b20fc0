/*
 * rest_server.c: JSON replies and bodies, the listen address, /metrics
 * counters for the daemons' api.c (see rest_server.h).  No state.
 */
#include "rest_server.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "cleanup.h"
#include "parse.h"

int rv_rest_reply(struct rv_http_resp *resp, int status, cJSON *doc)
{
	char *s = doc ? rv_json_print(doc) : NULL;
	cJSON_Delete(doc);
	if (!s)
		return -ENOMEM;
	rv_http_resp_json(resp, status, s);
	return 0;
}

cJSON *rv_rest_parse_body(const struct rv_http_req *req, struct rv_http_resp *resp)
{
	struct rv_err err = { 0 };
	if (req->body_len == 0) {
		rv_http_resp_error_text(resp, 400, "invalid_argument", "request body is empty", "");
		return NULL;
	}
	cJSON *doc = rv_json_parse(req->body, req->body_len, &err);
	if (!doc)
		rv_http_resp_error(resp, -EINVAL, &err);
	return doc;
}

int rv_rest_split_listen(const char *listen, char *host, size_t hsize, int *port)
{
	const char *colon = strrchr(listen, ':');
	if (!colon)
		return -EINVAL;
	const char *h = listen;
	size_t hlen = (size_t)(colon - listen);
	if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
		h++;
		hlen -= 2;
	}
	if (hlen == 0 || hlen >= hsize)
		return -EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = 0;
	int64_t p;
	if (rv_parse_i64(colon + 1, 0, 65535, &p) < 0)
		return -EINVAL;
	*port = (int)p;
	return 0;
}

struct rv_http_server *rv_rest_server_start(const char *listen, const struct rv_http_server_opts *o,
					    struct rv_err *err)
{
	char host[128];
	struct rv_http_server_opts at = *o;
	if (rv_rest_split_listen(listen, host, sizeof(host), &at.port) < 0) {
		rv_err_set(err, -EINVAL, "server.listen",
			   "bad listen address \"%s\" (want HOST:PORT)", listen);
		return NULL;
	}
	at.host = host;
	return rv_http_server_start(&at, err);
}

int rv_rest_small_server_start(struct rv_http_server **srv, const char *listen, const char *token,
			       const struct rv_http_route *routes, int nroutes, void *ctx,
			       struct rv_err *err)
{
	struct rv_http_server_opts o = {
		.token = token,
		.max_body = 4096,
		.conn_timeout_s = 30,
		.max_conns = 32,
		.threads = 1,
		.routes = routes,
		.nroutes = nroutes,
		.ctx = ctx,
	};
	*srv = rv_rest_server_start(listen, &o, err);
	return *srv ? 0 : (err && err->code ? err->code : -EIO);
}

void rv_rest_metrics_counters(struct rv_buf *out, struct rv_http_server *srv, const void *base,
			      const struct rv_rest_counter *c, size_t n)
{
	RV_CLEANUP_FREE char *http = srv ? rv_http_server_metrics(srv) : NULL;
	if (http)
		rv_buf_puts(out, http);
	for (size_t i = 0; i < n; i++) {
		const atomic_uint_least64_t *v =
			(const atomic_uint_least64_t *)((const char *)base + c[i].off);
		rv_buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", c[i].name,
			      c[i].help, c[i].name, c[i].name, (unsigned long long)atomic_load(v));
	}
}

int rv_rest_reply_metrics(struct rv_http_resp *resp, struct rv_buf *out)
{
	resp->status = 200;
	resp->content_type = "text/plain; version=0.0.4";
	resp->body = rv_buf_steal(out);
	return resp->body ? 0 : -ENOMEM;
}

int rv_rest_metrics_reply(struct rv_http_resp *resp, struct rv_http_server *srv, void *base,
			  const struct rv_rest_metrics_page *page)
{
	struct rv_buf out;
	rv_buf_init(&out);
	rv_rest_metrics_counters(&out, srv, base, page->counters, page->ncounters);
	if (page->more)
		page->more(&out, base);
	return rv_rest_reply_metrics(resp, &out);
}
