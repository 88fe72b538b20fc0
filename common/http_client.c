/*
 * http_client.c: a small blocking HTTP client on libcurl (see http.h).
 *
 * One CURL easy handle per struct rv_http_client: not thread-safe, give each
 * thread its own client.  The handle is reset (options only) before every
 * request, which keeps its connection cache, so consecutive requests to one
 * host reuse the keep-alive connection.  Every request has a connect and a
 * total timeout and a cap on the response body.  curl_global_init runs once
 * per process (pthread_once).
 */
#include "http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cleanup.h"

/* Largest response body accepted; beyond it the request fails -EMSGSIZE. */
#define RESP_MAX ((size_t)64 << 20)

struct rv_http_client {
	CURL *h;
	char *auth;              /* "Authorization: Bearer <token>" or NULL */
	int connect_timeout_ms;
	int timeout_ms;
	char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct rv_http_client *rv_http_client_new(const char *token, int connect_timeout_ms,
					  int timeout_ms)
{
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK)
		return NULL;
	/* A token with a line break would inject headers. */
	if (token && strpbrk(token, "\r\n"))
		return NULL;
	struct rv_http_client *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->connect_timeout_ms = connect_timeout_ms > 0 ? connect_timeout_ms : 5000;
	c->timeout_ms = timeout_ms > 0 ? timeout_ms : 30000;
	if (token && token[0] && asprintf(&c->auth, "Authorization: Bearer %s", token) < 0) {
		c->auth = NULL;
		free(c);
		return NULL;
	}
	c->h = curl_easy_init();
	if (!c->h) {
		free(c->auth);
		free(c);
		return NULL;
	}
	return c;
}

void rv_http_client_free(struct rv_http_client *c)
{
	if (!c)
		return;
	curl_easy_cleanup(c->h);
	if (c->auth) {
		explicit_bzero(c->auth, strlen(c->auth));
		free(c->auth);
	}
	free(c);
}

void rv_http_result_release(struct rv_http_result *r)
{
	if (!r)
		return;
	free(r->body);
	r->body = NULL;
	r->body_len = 0;
	r->status = 0;
}

struct sink {
	struct rv_buf b;
	bool overflow;
};

static size_t on_write(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct sink *s = userdata;
	size_t n = size * nmemb;
	if (n > RESP_MAX - s->b.len) {
		s->overflow = true;
		return 0; /* aborts with CURLE_WRITE_ERROR */
	}
	rv_buf_append(&s->b, data, n);
	return rv_buf_failed(&s->b) ? 0 : n;
}

static int curl_to_errno(CURLcode rc, const struct sink *s)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_FILESIZE_EXCEEDED:
		return -EMSGSIZE;
	case CURLE_WRITE_ERROR:
		return s->overflow ? -EMSGSIZE : rv_buf_failed(&s->b) ? -ENOMEM : -EIO;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return -EINVAL;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	case CURLE_GOT_NOTHING:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
		/* The peer dropped the connection (e.g. over its connection limit). */
		return -ECONNRESET;
	default:
		return -EIO;
	}
}

static void slist_freep(struct curl_slist **l)
{
	curl_slist_free_all(*l);
}

/* Append to *l; on failure *l is left as it was (curl would drop it). */
static bool slist_add(struct curl_slist **l, const char *s)
{
	struct curl_slist *n = curl_slist_append(*l, s);
	if (!n)
		return false;
	*l = n;
	return true;
}

int rv_http_request(struct rv_http_client *c, const char *method, const char *url,
		    const char *body, size_t body_len, int timeout_ms,
		    struct rv_http_result *out, struct rv_err *err)
{
	if (out)
		*out = (struct rv_http_result){ 0 };
	if (!c || !method || !url || !out)
		return rv_err_set(err, -EINVAL, NULL, "could not send request: bad arguments");

	CURL *h = c->h;
	long total = timeout_ms > 0 ? timeout_ms : c->timeout_ms;
	long conn = c->connect_timeout_ms < total ? c->connect_timeout_ms : total;
	RV_CLEANUP(slist_freep) struct curl_slist *hdrs = NULL;
	struct sink sink = { 0 };

	/* Options only: live connections survive the reset. */
	curl_easy_reset(h);
	c->errbuf[0] = '\0';
	bool ok = true;
#define SET(opt, val) ok = ok && curl_easy_setopt(h, opt, val) == CURLE_OK
	SET(CURLOPT_URL, url);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_CONNECTTIMEOUT_MS, conn);
	SET(CURLOPT_TIMEOUT_MS, total);
	SET(CURLOPT_ERRORBUFFER, c->errbuf);
	SET(CURLOPT_WRITEFUNCTION, on_write);
	SET(CURLOPT_WRITEDATA, &sink);
	SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)RESP_MAX);
	SET(CURLOPT_TCP_NODELAY, 1L);
	if (strcmp(method, "GET") == 0) {
		SET(CURLOPT_HTTPGET, 1L);
	} else if (strcmp(method, "HEAD") == 0) {
		SET(CURLOPT_NOBODY, 1L);
	} else if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
		   strcmp(method, "PATCH") == 0) {
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
		SET(CURLOPT_POSTFIELDS, body ? body : "");
		if (strcmp(method, "POST") != 0)
			SET(CURLOPT_CUSTOMREQUEST, method);
	} else {
		SET(CURLOPT_CUSTOMREQUEST, method);
	}
#undef SET
	if (c->auth)
		ok = ok && slist_add(&hdrs, c->auth);
	if (body)
		ok = ok && slist_add(&hdrs, "Content-Type: application/json");
	if (ok && hdrs)
		ok = curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs) == CURLE_OK;
	if (!ok)
		return rv_err_set(err, -ENOMEM, NULL, "could not %s %s: could not set up request",
				  method, url);

	CURLcode rc = curl_easy_perform(h);
	if (rc != CURLE_OK) {
		int e = curl_to_errno(rc, &sink);
		rv_buf_release(&sink.b);
		const char *why = c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc);
		if (e == -EMSGSIZE)
			why = "response body too large";
		return rv_err_set(err, e, NULL, "could not %s %s: %s", method, url, why);
	}
	long status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	size_t len = sink.b.len;
	char *text = rv_buf_steal(&sink.b); /* "" for an empty body */
	if (!text)
		return rv_err_set(err, -ENOMEM, NULL, "could not %s %s: out of memory", method,
				  url);
	out->status = status;
	out->body = text;
	out->body_len = len;
	return 0;
}
