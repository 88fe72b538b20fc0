/*
 * k8s_client.c: requests to a Kubernetes API server (k8s_client.h): the
 * credentials on a curl easy handle, one blocking call, error replies, the
 * watch stream's lines.  Reentrant: no state but the caller's.
 */
#include "k8s_client.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"

size_t rv_k8s_on_body(char *p, size_t size, size_t n, void *buf)
{
	struct rv_buf *b = buf;
	if (b->len + size * n > RV_K8S_RESP_MAX)
		return 0;
	rv_buf_append(b, p, size * n);
	return rv_buf_failed(b) ? 0 : size * n;
}

static void easy_tls(CURL *h, const struct rv_k8s_conf *c)
{
	if (c->ca_file[0])
		curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
	if (c->ca_pem) {
		struct curl_blob b = { c->ca_pem, c->ca_len, CURL_BLOB_COPY };
		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
	}
	if (c->cert_file[0])
		curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
	if (c->key_file[0])
		curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
	if (c->cert_pem) {
		struct curl_blob b = { c->cert_pem, c->cert_len, CURL_BLOB_COPY };
		curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
	}
	if (c->key_pem) {
		struct curl_blob b = { c->key_pem, c->key_len, CURL_BLOB_COPY };
		curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
	}
	if (c->insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
}

CURL *rv_k8s_easy_new(const struct rv_k8s_conf *c, const char *token, const char *method,
		      const char *url, const char *body, const char *ctype,
		      struct curl_slist **hdrs, long timeout_ms)
{
	CURL *h = curl_easy_init();
	if (!h)
		return NULL;
	char auth[sizeof(c->token) + 32] = "", ct[96];
	if (!token)
		token = c->token;
	if (token[0])
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	snprintf(ct, sizeof(ct), "Content-Type: %s", ctype ? ctype : "application/json");
	*hdrs = curl_slist_append(*hdrs, "Accept: application/json");
	if (body)
		*hdrs = curl_slist_append(*hdrs, ct);
	if (auth[0])
		*hdrs = curl_slist_append(*hdrs, auth);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	}
	if (strcmp(method, body ? "POST" : "GET") != 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	easy_tls(h, c);
	return h;
}

int rv_k8s_call(const struct rv_k8s_conf *c, const char *token, const char *method,
		const char *path, const char *body, const char *ctype, long timeout_ms,
		long *status, struct rv_buf *out, struct rv_err *err)
{
	char url[2048];
	snprintf(url, sizeof(url), "%s%s", c->server, path);
	struct curl_slist *hdrs = NULL;
	CURL *h = rv_k8s_easy_new(c, token, method, url, body, ctype, &hdrs, timeout_ms);
	if (!h) {
		curl_slist_free_all(hdrs);
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	}
	char ebuf[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, rv_k8s_on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	CURLcode rc = curl_easy_perform(h);
	*status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	if (rc != CURLE_OK)
		return rv_err_set(err, rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED,
				  "k8s", "could not reach the API server %s: %s", c->server,
				  ebuf[0] ? ebuf : curl_easy_strerror(rc));
	return 0;
}

void rv_k8s_status_message(const char *body, long code, char *out, size_t size)
{
	cJSON *j = body ? cJSON_Parse(body) : NULL;
	const char *m = cJSON_GetStringValue(cJSON_GetObjectItem(j, "message"));
	snprintf(out, size, "HTTP %ld: %.200s", code, m ? m : body ? body : "");
	cJSON_Delete(j);
}

int rv_k8s_status_errno(long code)
{
	switch (code) {
	case 400:
	case 422:
		return -EINVAL;
	case 401:
	case 403:
		return -EACCES;
	case 404:
		return -ENOENT;
	case 409:
		return -EEXIST;
	case 410: /* the API server's Gone: the resourceVersion asked for has
		   been compacted away, list again (not rest_client's 410, a
		   master's "stopped for good", which is -ECANCELED) */
		return -ESTALE;
	default:
		return -EIO;
	}
}

int rv_k8s_lines(struct rv_buf *b, const char *p, size_t len, rv_k8s_line_fn fn, void *arg)
{
	if (b->len + len > RV_K8S_RESP_MAX)
		return -E2BIG;
	rv_buf_append(b, p, len);
	if (rv_buf_failed(b))
		return -ENOMEM;
	size_t start = 0;
	int rc = 0;
	for (size_t i = 0; i < b->len && rc == 0; i++)
		if (b->data[i] == '\n') {
			if (i > start && !fn(arg, b->data + start, i - start))
				rc = -ECANCELED;
			start = i + 1;
		}
	memmove(b->data, b->data + start, b->len - start);
	rv_buf_truncate(b, b->len - start);
	return rc;
}
