/*
 * k8s_client.h: requests to a Kubernetes API server over libcurl, shared by
 * rover-master's k8s backend, rover-operator and rover-monitor: an easy
 * handle carrying the credentials of k8s_conf.h, one blocking call, an
 * error reply turned into an errno and a message, and a watch stream cut
 * into whole lines.  No state of its own; each handle belongs to the
 * thread that made it.
 */
#ifndef RV_K8S_CLIENT_H
#define RV_K8S_CLIENT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "err.h"
#include "k8s_conf.h"

#define RV_K8S_RESP_MAX (64 << 20) /* a reply (or a watch line) larger than this is cut */

/* A configured easy handle for method on url (the server's address plus a
 * path): the credentials of c, token (NULL: c->token; the caller copies a
 * token another thread may reload), Accept and Content-Type (ctype NULL:
 * application/json) headers appended to *hdrs (the caller frees them with
 * curl_slist_free_all after the handle), body borrowed until the transfer
 * ends, a connect timeout of at most 5 s and timeout_ms in all.  NULL when
 * curl ran out of memory. */
CURL *rv_k8s_easy_new(const struct rv_k8s_conf *c, const char *token, const char *method,
		      const char *url, const char *body, const char *ctype,
		      struct curl_slist **hdrs, long timeout_ms);

/* CURLOPT_WRITEFUNCTION appending to the struct rv_buf in CURLOPT_WRITEDATA,
 * refusing (ending the transfer) past RV_K8S_RESP_MAX. */
size_t rv_k8s_on_body(char *p, size_t size, size_t n, void *buf);

/* One blocking request to c->server + path: 0 with the HTTP status in
 * *status and the body appended to out (whatever the status), or
 * -ETIMEDOUT / -ECONNREFUSED (could not reach the server) / -ENOMEM with
 * err naming the server and curl's reason. */
int rv_k8s_call(const struct rv_k8s_conf *c, const char *token, const char *method,
		const char *path, const char *body, const char *ctype, long timeout_ms,
		long *status, struct rv_buf *out, struct rv_err *err);

/* "HTTP <code>: <the Status reply's message, or the body's first bytes>". */
void rv_k8s_status_message(const char *body, long code, char *out, size_t size);

/* An error status as an errno: 400/422 -EINVAL, 401/403 -EACCES, 404
 * -ENOENT, 409 -EEXIST, 410 -ESTALE (a watch or list too old), else -EIO. */
int rv_k8s_status_errno(long code);

/* Called for each whole line of a watch stream; false ends the stream. */
typedef bool (*rv_k8s_line_fn)(void *arg, const char *line, size_t len);

/* Feed bytes of a watch stream: appended to b (the part line kept between
 * calls), fn called on each whole non-empty line in order.  Returns 0, or
 * -ECANCELED when fn returned false, -E2BIG past RV_K8S_RESP_MAX, -ENOMEM.
 * A line cut short by the end of the stream is never passed to fn. */
int rv_k8s_lines(struct rv_buf *b, const char *p, size_t len, rv_k8s_line_fn fn, void *arg);

#endif
