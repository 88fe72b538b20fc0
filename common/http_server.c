/*
 * http_server.c: the route-table HTTP server on libmicrohttpd (see http.h).
 *
 * Threads: libmicrohttpd's listen thread plus one thread per connection, so a
 * handler may block (long-poll) without holding up other clients; or, with
 * opts.threads > 0, a fixed pool of epoll threads serving every connection,
 * where a handler may defer its reply: the connection is suspended until
 * another thread completes it (rv_http_complete resumes it, and
 * libmicrohttpd calls on_access again, which queues the stored reply).  Handlers
 * and the metrics reader run concurrently; counters are under srv->mu.
 * A reaper thread (when opts.request_timeout_s is set) shuts down the
 * sockets of connections still receiving a request past their deadline;
 * the connection list it walks is under srv->conn_mu.  Long-poll counts
 * per address are under defer_mu; the body memory in use is an atomic.
 * Per-request state (struct req) is allocated by the URI log callback, the
 * first callback libmicrohttpd makes for a request and the one that sees the
 * raw, undecoded URI; it is freed in one place, on_completed.
 * Routing runs on the raw path so "%2F" and "%00" inside a parameter are
 * rejected instead of silently changing the segments.
 */
#include "http.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "parse.h"

/* Longest stop waits for requests in flight before cutting them off. */
#define DRAIN_MAX_S 10u
/* Bytes of an over-limit chunked body read and dropped so the client can
 * still get its 413, when no request deadline bounds the time that takes
 * (the body limit itself when larger); past this the connection is dropped
 * instead. */
#define DISCARD_MAX ((size_t)1 << 20)
/* How often the deadline reaper looks at the connections, ms. */
#define REAP_MS       200
/* Retry-After of a 429 (too many deferred replies) or a 503 (bodies over
 * the memory budget), seconds. */
#define RETRY_AFTER_S 2

/* Memory per connection of a pooled server: headers and the read buffer. */
#define POOL_CONN_MEM ((size_t)8 * 1024)

/* Longest decoded path parameter, in bytes. */
#define PARAM_MAX 256

/* Latency histogram upper bounds in seconds; +Inf is implied. */
static const double bucket_le[] = { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
				    0.25,  0.5,   1,    2.5,   5,    10 };
#define NBUCKETS RV_ARRAY_SIZE(bucket_le)

/* Method label values; anything else counts as "OTHER" so a client cannot
 * grow the metric set without bound. */
static const char *const method_names[] = { "GET",  "POST",    "PUT",  "DELETE",
					    "PATCH", "OPTIONS", "HEAD", "OTHER" };
#define NMETHODS RV_ARRAY_SIZE(method_names)

enum reject {
	REJ_BAD_REQUEST,
	REJ_UNAUTHORIZED,
	REJ_NOT_FOUND,
	REJ_METHOD,
	REJ_TOO_LARGE,
	REJ_DEADLINE,
	REJ_TOO_MANY_WAITS,
	REJ_BODY_BUDGET,
	NREJ
};
static const char *const reject_names[] = { "bad_request",        "unauthorized", "not_found",
					    "method_not_allowed", "too_large",    "request_timeout",
					    "too_many_deferred",  "body_memory" };

struct histo {
	uint64_t bucket[NBUCKETS + 1]; /* non-cumulative; last is +Inf */
	uint64_t count;
	uint64_t sum_ns;
};

/* One rover_http_requests_total series. */
struct counter {
	int slot;        /* index into srv->labels, or -1 for unmatched paths */
	int method;      /* index into method_names */
	int code;
	uint64_t n;
};

/*
 * One open connection (libmicrohttpd's socket context), on srv->conn_list
 * under srv->conn_mu from its accept to its close.  While a request is
 * being received, deadline_ms says when the reaper shuts the socket
 * (libmicrohttpd then closes the connection); 0 while a handler runs or a
 * reply is on its way, so a deferred reply or a slow reader is not cut.
 */
struct conn {
	struct conn *prev, *next;
	int fd;
	unsigned char addr[16]; /* client address; IPv4 as v4-mapped IPv6 */
	bool had_request;       /* a request was answered on it before */
	int64_t deadline_ms;    /* monotonic; 0 = none */
};

/* Deferred replies open from one client address. */
struct addr_count {
	unsigned char addr[16];
	int n;
};

struct rv_http_server {
	struct MHD_Daemon *mhd;
	struct rv_http_server_opts opts;
	char *token;
	size_t token_len;
	int port;
	unsigned int drain_ms;   /* how long stop waits for requests in flight */

	/* Histogram slot per distinct pattern: routes sharing a pattern share one
	 * "route" label.  slot_of[i] is route i's slot. */
	int *slot_of;
	const char **labels;
	int nlabels;

	pthread_mutex_t mu;      /* guards everything below */
	struct histo *histos;    /* [nlabels + 1]; the last is for unmatched paths */
	struct counter *counters;
	size_t ncounters, capcounters;
	uint64_t rejected[NREJ];

	/* Deferred replies: req.ready, req.suspended and req.done are under
	 * defer_mu; suspended counts connections suspended and not yet answered. */
	pthread_mutex_t defer_mu;
	atomic_int suspended;

	int ndeferred;                       /* deferred replies not yet completed */
	struct addr_count *deferred_by_addr; /* [opts.max_deferred], entries n > 0 */

	atomic_int conns;
	atomic_int active;       /* requests past their headers, not yet completed */
	atomic_ullong conns_total;
	atomic_size_t body_used; /* bytes of bodies held, against opts.body_budget */

	/* Connections and the request-deadline reaper thread. */
	pthread_mutex_t conn_mu;
	pthread_cond_t reap_wake;
	struct conn conn_list; /* circular, the head is a sentinel */
	bool reap_stop;
	bool reaper_running;
	pthread_t reaper;
};

struct req {
	struct rv_http_server *srv;
	char *raw_path;      /* undecoded, query stripped */
	size_t uri_len;      /* the whole request target's */
	struct timespec start;
	bool started;        /* first access-handler call done */
	int route;           /* matched route or -1 */
	int slot;            /* metrics slot of the matched pattern or -1 */
	int method;          /* index into method_names */
	int status;          /* status queued, 0 until then */
	bool too_large;
	size_t discarded;    /* body bytes dropped after too_large */
	char *body;
	size_t body_len, body_cap;
	char params[RV_HTTP_MAX_PARAMS][PARAM_MAX + 1];
	int nparams;
	struct MHD_Connection *conn;
	struct conn *cs;   /* the connection's state, NULL if unknown */
	size_t budgeted;   /* bytes of body_used this request holds */
	bool over_budget;  /* body did not fit the memory budget: 503 */
	bool wait_counted; /* counts in ndeferred and deferred_by_addr */
	bool deferred;  /* the handler deferred its reply */
	bool suspended; /* connection suspended, reply not yet queued */
	bool ready;     /* rv_http_complete stored the reply in done */
	struct rv_http_resp done;
};

/* ---- responses ---- */

void rv_http_resp_json(struct rv_http_resp *resp, int status, char *json)
{
	free(resp->body);
	resp->body = NULL;
	if (!json) {
		/* The caller's serialiser ran out of memory. */
		rv_http_resp_error_text(resp, 500, "internal", "out of memory", NULL);
		return;
	}
	resp->status = status;
	resp->body = json;
	resp->content_type = "application/json";
}

void rv_http_resp_error_text(struct rv_http_resp *resp, int status, const char *error,
			     const char *detail, const char *field)
{
	free(resp->body);
	resp->body = NULL;
	resp->status = status;
	resp->content_type = "application/json";
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return;
	if (cJSON_AddStringToObject(o, "error", error ? error : "") &&
	    cJSON_AddStringToObject(o, "detail", detail ? detail : "") &&
	    cJSON_AddStringToObject(o, "field", field ? field : ""))
		resp->body = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
}

void rv_http_resp_error(struct rv_http_resp *resp, int neg_errno, const struct rv_err *err)
{
	char detail[512];
	if (err && err->msg[0]) {
		snprintf(detail, sizeof(detail), "%s", err->msg);
	} else {
		const char *d = neg_errno < 0 ? strerrordesc_np(-neg_errno) : NULL;
		snprintf(detail, sizeof(detail), "%s", d ? d : "unknown error");
		detail[0] = (char)tolower((unsigned char)detail[0]);
	}
	rv_http_resp_error_text(resp, rv_errno_to_http(neg_errno), rv_errno_name(neg_errno),
				detail, err ? err->field : NULL);
}

/* ---- request accessors ---- */

int rv_http_query_name(const struct rv_http_req *req, const char *key, size_t max_len,
		       bool required, const char **out, struct rv_err *err)
{
	const char *v = rv_http_query(req, key);
	*out = NULL;
	if (!v || !v[0])
		return required ? rv_err_set(err, -EINVAL, key, "%s is required", key) : 0;
	if (strlen(v) > max_len)
		return rv_err_set(err, -EINVAL, key, "%s is longer than %zu bytes", key, max_len);
	*out = v;
	return 1;
}

const char *rv_http_query(const struct rv_http_req *req, const char *key)
{
	if (!req || !req->conn || !key)
		return NULL;
	return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *rv_http_header(const struct rv_http_req *req, const char *key)
{
	if (!req || !req->conn || !key)
		return NULL;
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, key);
}

/* ---- routing ---- */

/* Match raw path against pattern; on success the raw parameter segments are
 * in seg[]/seglen[].  Patterns were validated at start. */
static bool route_match(const char *pattern, const char *path, const char *seg[],
			size_t seglen[], int *nseg)
{
	const char *p = pattern, *s = path;
	int n = 0;
	while (*p && *s) {
		if (*p == '{') {
			const char *end = strchrnul(s, '/');
			if (end == s)
				return false;
			seg[n] = s;
			seglen[n] = (size_t)(end - s);
			n++;
			p = strchr(p, '}') + 1;
			s = end;
			continue;
		}
		if (*p != *s)
			return false;
		p++;
		s++;
	}
	if (*p || *s)
		return false;
	*nseg = n;
	return true;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Percent-decode one raw segment into out (PARAM_MAX + 1 bytes).  -EINVAL on
 * a bad escape or a decoded '/' or NUL, -E2BIG when too long. */
static int param_decode(const char *s, size_t len, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == '%') {
			if (len - i < 3)
				return -EINVAL;
			int hi = hexval(s[i + 1]);
			int lo = hexval(s[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = (char)(hi << 4 | lo);
			i += 2;
		}
		if (c == '/' || c == '\0')
			return -EINVAL;
		if (o >= PARAM_MAX)
			return -E2BIG;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

/* The name inside the idx-th "{...}" of pattern, copied to buf. */
static const char *param_name(const char *pattern, int idx, char *buf, size_t size)
{
	const char *p = pattern;
	for (int i = 0; (p = strchr(p, '{')); i++, p++) {
		if (i == idx) {
			const char *end = strchr(p, '}');
			snprintf(buf, size, "%.*s", (int)(end - p - 1), p + 1);
			return buf;
		}
	}
	snprintf(buf, size, "%s", "");
	return buf;
}

/* Constant-time token check: the time depends only on the longer length,
 * never on where the first difference is; a length mismatch is folded in. */
static bool token_ok(const struct rv_http_server *srv, const char *auth)
{
	if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
		return false;
	const char *got = auth + 7;
	while (*got == ' ')
		got++;
	size_t glen = strlen(got);
	size_t n = glen > srv->token_len ? glen : srv->token_len;
	volatile unsigned char diff = (unsigned char)(glen != srv->token_len);
	for (size_t i = 0; i < n; i++) {
		unsigned char a = i < glen ? (unsigned char)got[i] : 0;
		unsigned char b = i < srv->token_len ? (unsigned char)srv->token[i] : 0;
		diff |= a ^ b;
	}
	return diff == 0;
}

/* ---- metrics ---- */

static int method_index(const char *m)
{
	for (size_t i = 0; i < NMETHODS - 1; i++)
		if (strcmp(m, method_names[i]) == 0)
			return (int)i;
	return (int)NMETHODS - 1;
}

static void metrics_record(struct rv_http_server *srv, const struct req *r)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t ns = (int64_t)(now.tv_sec - r->start.tv_sec) * 1000000000 +
		     (now.tv_nsec - r->start.tv_nsec);
	if (ns < 0)
		ns = 0;
	double secs = (double)ns / 1e9;
	int slot = r->slot;
	int mi = r->method;

	pthread_mutex_lock(&srv->mu);
	struct histo *h = &srv->histos[slot >= 0 ? slot : srv->nlabels];
	size_t b = 0;
	while (b < NBUCKETS && secs > bucket_le[b])
		b++;
	h->bucket[b]++;
	h->count++;
	h->sum_ns += (uint64_t)ns;

	struct counter *c = NULL;
	for (size_t i = 0; i < srv->ncounters; i++) {
		struct counter *x = &srv->counters[i];
		if (x->slot == slot && x->method == mi && x->code == r->status) {
			c = x;
			break;
		}
	}
	if (!c) {
		if (srv->ncounters == srv->capcounters) {
			size_t cap = srv->capcounters ? srv->capcounters * 2 : 16;
			struct counter *nc = realloc(srv->counters, cap * sizeof(*nc));
			if (nc) {
				srv->counters = nc;
				srv->capcounters = cap;
			}
		}
		if (srv->ncounters < srv->capcounters) {
			c = &srv->counters[srv->ncounters++];
			*c = (struct counter){ .slot = slot, .method = mi, .code = r->status };
		}
	}
	if (c)
		c->n++;
	pthread_mutex_unlock(&srv->mu);
}

static void reject_count(struct rv_http_server *srv, enum reject why)
{
	pthread_mutex_lock(&srv->mu);
	srv->rejected[why]++;
	pthread_mutex_unlock(&srv->mu);
}

/* Label values are route patterns: escape '\\', '"' and newlines as the
 * exposition format asks. */
static const char *label_escape(const char *v, char *out, size_t size)
{
	size_t o = 0;
	for (; *v && o + 3 < size; v++) {
		if (*v == '\\' || *v == '"') {
			out[o++] = '\\';
			out[o++] = *v;
		} else if (*v == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else {
			out[o++] = *v;
		}
	}
	out[o] = '\0';
	return out;
}

char *rv_http_server_metrics(struct rv_http_server *srv)
{
	if (!srv)
		return NULL;
	struct rv_buf b;
	char esc[512];
	rv_buf_init(&b);

	pthread_mutex_lock(&srv->mu);
	rv_buf_printf(&b, "# HELP rover_http_requests_total HTTP requests answered, by route, "
			  "method and status code.\n"
			  "# TYPE rover_http_requests_total counter\n");
	for (size_t i = 0; i < srv->ncounters; i++) {
		const struct counter *c = &srv->counters[i];
		const char *route = c->slot >= 0 ? srv->labels[c->slot] : "unmatched";
		rv_buf_printf(
			&b,
			"rover_http_requests_total{route=\"%s\",method=\"%s\",code=\"%d\"} %llu\n",
			label_escape(route, esc, sizeof(esc)), method_names[c->method], c->code,
			(unsigned long long)c->n);
	}

	rv_buf_printf(&b, "# HELP rover_http_request_duration_seconds Time from request line to "
			  "response sent, by route.\n"
			  "# TYPE rover_http_request_duration_seconds histogram\n");
	for (int s = 0; s <= srv->nlabels; s++) {
		const struct histo *h = &srv->histos[s];
		const char *route = s < srv->nlabels ? srv->labels[s] : "unmatched";
		if (s == srv->nlabels && h->count == 0)
			continue;
		label_escape(route, esc, sizeof(esc));
		uint64_t cum = 0;
		for (size_t i = 0; i < NBUCKETS; i++) {
			cum += h->bucket[i];
			rv_buf_printf(&b,
				      "rover_http_request_duration_seconds_bucket"
				      "{route=\"%s\",le=\"%g\"} %llu\n",
				      esc, bucket_le[i], (unsigned long long)cum);
		}
		cum += h->bucket[NBUCKETS];
		rv_buf_printf(&b,
			      "rover_http_request_duration_seconds_bucket"
			      "{route=\"%s\",le=\"+Inf\"} %llu\n"
			      "rover_http_request_duration_seconds_sum{route=\"%s\"} %.9f\n"
			      "rover_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
			      esc, (unsigned long long)cum, esc, (double)h->sum_ns / 1e9, esc,
			      (unsigned long long)h->count);
	}

	rv_buf_printf(&b, "# HELP rover_http_rejected_total Requests refused by the server before "
			  "any handler ran, by reason.\n"
			  "# TYPE rover_http_rejected_total counter\n");
	for (int i = 0; i < NREJ; i++)
		rv_buf_printf(&b, "rover_http_rejected_total{reason=\"%s\"} %llu\n",
			      reject_names[i], (unsigned long long)srv->rejected[i]);
	pthread_mutex_unlock(&srv->mu);

	pthread_mutex_lock(&srv->defer_mu);
	int deferred = srv->ndeferred;
	pthread_mutex_unlock(&srv->defer_mu);
	rv_buf_printf(&b,
		      "# HELP rover_http_connections Open client connections.\n"
		      "# TYPE rover_http_connections gauge\n"
		      "rover_http_connections %d\n"
		      "# HELP rover_http_connections_total Client connections accepted.\n"
		      "# TYPE rover_http_connections_total counter\n"
		      "rover_http_connections_total %llu\n"
		      "# HELP rover_http_waits Long-poll replies open now.\n"
		      "# TYPE rover_http_waits gauge\n"
		      "rover_http_waits %d\n"
		      "# HELP rover_http_body_bytes Bytes of request bodies held now.\n"
		      "# TYPE rover_http_body_bytes gauge\n"
		      "rover_http_body_bytes %zu\n",
		      atomic_load(&srv->conns), (unsigned long long)atomic_load(&srv->conns_total),
		      deferred, atomic_load(&srv->body_used));
	return rv_buf_steal(&b);
}

/* ---- connections: deadlines, per-address counts, body memory ---- */

/* The client address of conn as 16 bytes (IPv4 v4-mapped); zeros if unknown. */
static void conn_addr(struct MHD_Connection *conn, unsigned char out[16])
{
	memset(out, 0, 16);
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	if (!sa)
		return;
	if (sa->sa_family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
	}
}

/* Set the receive deadline of cs: after_ms from now, or none (0). */
static void conn_deadline(struct rv_http_server *srv, struct conn *cs, int64_t after_ms)
{
	if (!cs || srv->opts.request_timeout_s <= 0)
		return;
	pthread_mutex_lock(&srv->conn_mu);
	cs->deadline_ms = after_ms > 0 ? rv_mono_ms() + after_ms : 0;
	pthread_mutex_unlock(&srv->conn_mu);
}

/*
 * The reaper: a connection still receiving its request past the deadline is
 * shut down.  shutdown(2), not close: the socket stays libmicrohttpd's, it
 * sees end of file and closes the connection itself on its own thread.
 * conn_mu is held across, and a connection leaves the list (on its close
 * notification, before libmicrohttpd closes the fd) under it too, so the fd
 * is never a reused one.
 */
static void *reaper_main(void *arg)
{
	struct rv_http_server *srv = arg;
	pthread_mutex_lock(&srv->conn_mu);
	while (!srv->reap_stop) {
		struct timespec ts;
		rv_mono_timespec(&ts, rv_mono_ms() + REAP_MS);
		pthread_cond_timedwait(&srv->reap_wake, &srv->conn_mu, &ts);
		int64_t now = rv_mono_ms();
		int cut = 0;
		for (struct conn *c = srv->conn_list.next; c != &srv->conn_list; c = c->next) {
			if (c->deadline_ms && now >= c->deadline_ms && c->fd >= 0) {
				shutdown(c->fd, SHUT_RDWR);
				c->deadline_ms = 0;
				cut++;
			}
		}
		if (cut) {
			pthread_mutex_lock(&srv->mu);
			srv->rejected[REJ_DEADLINE] += (uint64_t)cut;
			pthread_mutex_unlock(&srv->mu);
		}
	}
	pthread_mutex_unlock(&srv->conn_mu);
	return NULL;
}

/* Take n bytes of the body budget for r: 0, or -EBUSY when they do not fit. */
static int body_reserve(struct rv_http_server *srv, struct req *r, size_t n)
{
	if (!srv->opts.body_budget) {
		r->budgeted += n;
		return 0;
	}
	size_t used = atomic_load(&srv->body_used);
	do {
		if (n > srv->opts.body_budget - used || used > srv->opts.body_budget)
			return -EBUSY;
	} while (!atomic_compare_exchange_weak(&srv->body_used, &used, used + n));
	r->budgeted += n;
	return 0;
}

/* Free r's body and give its bytes back to the budget. */
static void body_drop(struct rv_http_server *srv, struct req *r)
{
	free(r->body);
	r->body = NULL;
	r->body_len = r->body_cap = 0;
	if (srv->opts.body_budget && r->budgeted)
		atomic_fetch_sub(&srv->body_used, r->budgeted);
	r->budgeted = 0;
}

/* ---- libmicrohttpd callbacks ---- */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct rv_http_server *srv = cls;
	struct req *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->srv = srv;
	r->route = -1;
	r->slot = -1;
	clock_gettime(CLOCK_MONOTONIC, &r->start);
	r->uri_len = strlen(uri);
	r->raw_path = strndup(uri, strcspn(uri, "?"));
	if (!r->raw_path) {
		free(r);
		return NULL;
	}
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	r->cs = ci ? ci->socket_context : NULL;
	/* The first request's clock runs from the accept; a later one's from
	 * its request line. */
	if (r->cs && r->cs->had_request)
		conn_deadline(srv, r->cs, (int64_t)srv->opts.request_timeout_s * 1000);
	return r;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)conn;
	(void)toe;
	struct rv_http_server *srv = cls;
	struct req *r = *con_cls;
	if (!r)
		return;
	if (r->status)
		metrics_record(srv, r);
	if (r->suspended)
		atomic_fetch_sub(&srv->suspended, 1); /* resumed, client gone */
	if (r->wait_counted) {
		static const unsigned char zero[16];
		const unsigned char *addr = r->cs ? r->cs->addr : zero;
		pthread_mutex_lock(&srv->defer_mu);
		srv->ndeferred--;
		for (int i = 0; srv->deferred_by_addr && i < srv->opts.max_deferred; i++) {
			struct addr_count *a = &srv->deferred_by_addr[i];
			if (a->n > 0 && memcmp(a->addr, addr, 16) == 0) {
				a->n--;
				break;
			}
		}
		pthread_mutex_unlock(&srv->defer_mu);
	}
	free(r->done.body);
	if (r->started)
		atomic_fetch_sub(&srv->active, 1);
	body_drop(srv, r);
	if (r->cs) {
		/* Idle until the next request line: libmicrohttpd's own timeout
		 * governs, and this bounds a trickled request line. */
		r->cs->had_request = true;
		conn_deadline(srv, r->cs,
			      ((int64_t)srv->opts.conn_timeout_s + srv->opts.request_timeout_s) *
				      1000);
	}
	free(r->raw_path);
	free(r);
	*con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct rv_http_server *srv = cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		atomic_fetch_add(&srv->conns, 1);
		atomic_fetch_add(&srv->conns_total, 1);
		struct conn *c = calloc(1, sizeof(*c));
		if (!c)
			return; /* no deadline, counted as address zero */
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		c->fd = ci ? ci->connect_fd : -1;
		conn_addr(conn, c->addr);
		pthread_mutex_lock(&srv->conn_mu);
		if (srv->opts.request_timeout_s > 0)
			c->deadline_ms = rv_mono_ms() + (int64_t)srv->opts.request_timeout_s * 1000;
		c->next = srv->conn_list.next;
		c->prev = &srv->conn_list;
		c->next->prev = c;
		srv->conn_list.next = c;
		pthread_mutex_unlock(&srv->conn_mu);
		*socket_context = c;
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		atomic_fetch_sub(&srv->conns, 1);
		struct conn *c = *socket_context;
		if (!c)
			return;
		pthread_mutex_lock(&srv->conn_mu);
		c->prev->next = c->next;
		c->next->prev = c->prev;
		pthread_mutex_unlock(&srv->conn_mu);
		free(c);
		*socket_context = NULL;
	}
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char msg[512];
	char q[600];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	rv_log_debug("libmicrohttpd", "detail=%s", rv_log_q(q, sizeof(q), msg));
}

/* Hand resp to libmicrohttpd; the body is freed by libmicrohttpd. */
static enum MHD_Result send_resp(struct MHD_Connection *conn, struct req *r,
				 struct rv_http_resp *resp, const char *allow, bool challenge)
{
	int status = resp->status;
	if (status < 100 || status > 599)
		status = 500;
	struct MHD_Response *mr;
	if (resp->body) {
		mr = MHD_create_response_from_buffer(strlen(resp->body), resp->body,
						     MHD_RESPMEM_MUST_FREE);
		if (!mr) {
			free(resp->body);
			resp->body = NULL;
			return MHD_NO;
		}
		resp->body = NULL;
		MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE,
					resp->content_type ? resp->content_type : "application/json");
		if (resp->cache_control)
			MHD_add_response_header(mr, MHD_HTTP_HEADER_CACHE_CONTROL,
						resp->cache_control);
	} else {
		mr = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
		if (!mr)
			return MHD_NO;
	}
	if (allow)
		MHD_add_response_header(mr, MHD_HTTP_HEADER_ALLOW, allow);
	if (resp->retry_after_s > 0) {
		char ra[16];
		snprintf(ra, sizeof(ra), "%d", resp->retry_after_s);
		MHD_add_response_header(mr, MHD_HTTP_HEADER_RETRY_AFTER, ra);
	}
	if (challenge)
		MHD_add_response_header(mr, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"rover\"");
	enum MHD_Result ret = MHD_queue_response(conn, (unsigned int)status, mr);
	MHD_destroy_response(mr);
	if (ret == MHD_YES) {
		r->status = status;
		conn_deadline(r->srv, r->cs, 0); /* sending: no receive deadline */
	}
	return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *conn, struct req *r, int status,
				  const char *error, const char *detail, const char *field,
				  const char *allow, bool challenge)
{
	struct rv_http_resp resp = { 0 };
	rv_http_resp_error_text(&resp, status, error, detail, field);
	return send_resp(conn, r, &resp, allow, challenge);
}

/* 503 with a retry-after: the body, declared or grown, would pass the
 * memory set aside for bodies in flight (counted as such a reject). */
static enum MHD_Result send_over_budget(struct MHD_Connection *conn, struct req *r)
{
	reject_count(r->srv, REJ_BODY_BUDGET);
	struct rv_http_resp resp = { .retry_after_s = RETRY_AFTER_S };
	rv_http_resp_error_text(&resp, 503, "unavailable",
				"request bodies in flight use all the memory set aside for them; "
				"retry later",
				NULL);
	return send_resp(conn, r, &resp, NULL, false);
}

/* What a request says about its body's framing. */
struct framing {
	int nlength;         /* Content-Length headers */
	bool lengths_differ; /* two of them disagree */
	const char *length;  /* the first */
	bool transfer_encoding;
};

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
				      const char *value)
{
	(void)kind;
	struct framing *f = cls;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
		if (f->nlength++ && strcmp(f->length, value ? value : "") != 0)
			f->lengths_differ = true;
		if (!f->length)
			f->length = value ? value : "";
	} else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
		f->transfer_encoding = true;
	}
	return MHD_YES;
}

/* Bytes of the header lines as sent: name, ": ", value, CRLF. */
static enum MHD_Result header_bytes(void *cls, enum MHD_ValueKind kind, const char *key,
				    const char *value)
{
	(void)kind;
	*(size_t *)cls += strlen(key) + 4 + (value ? strlen(value) : 0);
	return MHD_YES;
}

/* The first query parameter that is not UTF-8 or too long. */
struct query_check {
	char field[64];
	char detail[160];
};

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
				 const char *value)
{
	(void)kind;
	struct query_check *q = cls;
	if (!rv_utf8_valid(key, strlen(key))) {
		snprintf(q->field, sizeof(q->field), "query");
		snprintf(q->detail, sizeof(q->detail), "a query parameter name is not valid UTF-8");
		return MHD_NO;
	}
	size_t n = value ? strlen(value) : 0;
	if (n > RV_HTTP_QUERY_VALUE_MAX || (value && !rv_utf8_valid(value, n))) {
		/* A name too long to repeat whole is cut at a character boundary. */
		size_t k = strlen(key) < sizeof(q->field) - 1 ? strlen(key) : sizeof(q->field) - 1;
		while (k > 0 && !rv_utf8_valid(key, k))
			k--;
		snprintf(q->field, sizeof(q->field), "%.*s", (int)k, key);
		if (n > RV_HTTP_QUERY_VALUE_MAX)
			snprintf(q->detail, sizeof(q->detail), "%s is longer than %d bytes",
				 q->field, RV_HTTP_QUERY_VALUE_MAX);
		else
			snprintf(q->detail, sizeof(q->detail), "%s is not valid UTF-8", q->field);
		return MHD_NO;
	}
	return MHD_YES;
}

/* First call for a request: route, authenticate, check the declared size.
 * Returns MHD_YES with r->status set when it already answered. */
static enum MHD_Result begin(struct rv_http_server *srv, struct MHD_Connection *conn,
			     struct req *r, const char *method)
{
	const char *seg[RV_HTTP_MAX_PARAMS];
	size_t seglen[RV_HTTP_MAX_PARAMS];
	int nseg = 0;
	bool path_known = false;
	char allow[128] = "";

	r->method = method_index(method);

	/* The head's limits, answered in JSON while libmicrohttpd still has
	 * room to let us (it answers in HTML past its own). */
	if (r->uri_len > RV_HTTP_URI_MAX) {
		char detail[96];
		snprintf(detail, sizeof(detail), "request target longer than %d bytes",
			 RV_HTTP_URI_MAX);
		reject_count(srv, REJ_BAD_REQUEST);
		return send_error(conn, r, 414, "uri_too_long", detail, NULL, NULL, false);
	}
	size_t hbytes = 0;
	MHD_get_connection_values(conn, MHD_HEADER_KIND, header_bytes, &hbytes);
	if (hbytes > RV_HTTP_HEADERS_MAX) {
		char detail[96];
		snprintf(detail, sizeof(detail), "header lines longer than %d bytes in all",
			 RV_HTTP_HEADERS_MAX);
		reject_count(srv, REJ_BAD_REQUEST);
		return send_error(conn, r, 431, "headers_too_large", detail, NULL, NULL, false);
	}

	for (int i = 0; i < srv->opts.nroutes; i++) {
		const struct rv_http_route *rt = &srv->opts.routes[i];
		if (!route_match(rt->pattern, r->raw_path, seg, seglen, &nseg))
			continue;
		path_known = true;
		r->slot = srv->slot_of[i];
		if (strcmp(rt->method, method) == 0) {
			r->route = i;
			break;
		}
		size_t len = strlen(allow);
		snprintf(allow + len, sizeof(allow) - len, "%s%s", len ? ", " : "", rt->method);
	}
	if (r->route < 0 && path_known) {
		/* Count under the pattern it matched so 405s show per route. */
		reject_count(srv, REJ_METHOD);
		return send_error(conn, r, 405, "method_not_allowed", "method not allowed for this path",
				  NULL, allow, false);
	}
	if (r->route < 0) {
		reject_count(srv, REJ_NOT_FOUND);
		return send_error(conn, r, 404, "not_found", "no such path", NULL, NULL, false);
	}

	const struct rv_http_route *rt = &srv->opts.routes[r->route];
	if ((rt->flags & RV_HTTP_WRITE) && srv->token_len &&
	    !token_ok(srv, MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_AUTHORIZATION))) {
		reject_count(srv, REJ_UNAUTHORIZED);
		return send_error(conn, r, 401, "unauthorized", "missing or wrong bearer token",
				  NULL, NULL, true);
	}

	for (int i = 0; i < nseg; i++) {
		int rc = param_decode(seg[i], seglen[i], r->params[i]);
		if (rc < 0) {
			char name[64];
			reject_count(srv, REJ_BAD_REQUEST);
			return send_error(conn, r, 400, "invalid_argument",
					  rc == -E2BIG ? "path parameter too long"
						       : "bad path parameter encoding",
					  param_name(rt->pattern, i, name, sizeof(name)), NULL, false);
		}
	}
	r->nparams = nseg;

	struct query_check q = { "", "" };
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, query_arg, &q);
	if (q.field[0]) {
		reject_count(srv, REJ_BAD_REQUEST);
		return send_error(conn, r, 400, "invalid_argument", q.detail, q.field, NULL, false);
	}

	/* A body framed two ways is how requests are smuggled past a proxy
	 * that reads the other one (RFC 9112 section 6.3): refused, and the
	 * connection closed after the answer (libmicrohttpd does so for a reply
	 * queued before the body was read). */
	struct framing f = { 0 };
	MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_header, &f);
	if (f.lengths_differ || (f.nlength && f.transfer_encoding)) {
		reject_count(srv, REJ_BAD_REQUEST);
		return send_error(conn, r, 400, "invalid_argument",
				  f.lengths_differ ? "conflicting Content-Length headers"
						   : "Content-Length with Transfer-Encoding",
				  "Content-Length", NULL, false);
	}
	const char *cl = f.length;
	int64_t declared = 0;
	if (cl && rv_parse_i64(cl, 0, INT64_MAX, &declared) == 0 &&
	    (uint64_t)declared > srv->opts.max_body) {
		/* Answer before reading: libmicrohttpd skips the 100-continue and
		 * closes the connection after the response. */
		reject_count(srv, REJ_TOO_LARGE);
		return send_error(conn, r, 413, "too_large", "request body too large", NULL, NULL,
				  false);
	}
	if (declared > 0) {
		if (body_reserve(srv, r, (size_t)declared + 1) < 0) {
			return send_over_budget(conn, r);
		}
		r->body = malloc((size_t)declared + 1);
		if (!r->body)
			return MHD_NO;
		r->body_cap = (size_t)declared + 1;
	}
	return MHD_YES;
}

/* How many bytes of an unwanted body are read and dropped before the
 * connection is cut instead: unbounded when the request deadline bounds
 * the time it takes. */
static size_t discard_max(const struct rv_http_server *srv)
{
	if (srv->opts.request_timeout_s > 0)
		return SIZE_MAX;
	return srv->opts.max_body > DISCARD_MAX ? srv->opts.max_body : DISCARD_MAX;
}

/* Keep n more body bytes (dropped once the body is over the size limit or
 * does not fit the memory budget).  0, or -EMSGSIZE when too much was
 * dropped, -ENOMEM. */
static int body_append(struct rv_http_server *srv, struct req *r, const char *data, size_t n)
{
	size_t max = srv->opts.max_body;
	bool over = r->too_large || r->over_budget;
	if (!over && n > max - r->body_len) {
		r->too_large = over = true;
		body_drop(srv, r);
	}
	if (over) {
		if (n > discard_max(srv) - r->discarded)
			return -EMSGSIZE;
		r->discarded += n;
		return 0;
	}
	if (r->body_len + n + 1 > r->body_cap) {
		size_t cap = r->body_cap ? r->body_cap : 1024;
		while (cap < r->body_len + n + 1)
			cap *= 2;
		if (cap > max + 1)
			cap = max + 1;
		if (body_reserve(srv, r, cap - r->body_cap) < 0) {
			r->over_budget = true;
			body_drop(srv, r);
			r->discarded += n;
			return 0;
		}
		char *nb = realloc(r->body, cap);
		if (!nb)
			return -ENOMEM;
		r->body = nb;
		r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, data, n);
	r->body_len += n;
	r->body[r->body_len] = '\0';
	return 0;
}

static struct rv_http_defer *defer(struct rv_http_resp *resp, bool capped)
{
	struct req *r = resp ? resp->priv : NULL;
	if (!r || r->srv->opts.threads <= 0 || r->deferred)
		return NULL;
	struct rv_http_server *srv = r->srv;
	if (capped && srv->opts.max_deferred > 0) {
		static const unsigned char zero[16];
		const unsigned char *addr = r->cs ? r->cs->addr : zero;
		pthread_mutex_lock(&srv->defer_mu);
		struct addr_count *mine = NULL, *free_slot = NULL;
		for (int i = 0; i < srv->opts.max_deferred; i++) {
			struct addr_count *a = &srv->deferred_by_addr[i];
			if (a->n > 0 && memcmp(a->addr, addr, 16) == 0)
				mine = a;
			else if (a->n == 0 && !free_slot)
				free_slot = a;
		}
		const char *why = NULL;
		if (srv->ndeferred >= srv->opts.max_deferred)
			why = "too many open long-polls; retry later";
		else if (srv->opts.max_deferred_per_ip > 0 && mine &&
			 mine->n >= srv->opts.max_deferred_per_ip)
			why = "too many open long-polls from this address; retry later";
		if (!why) {
			if (!mine) {
				mine = free_slot; /* one exists: fewer than max open */
				memcpy(mine->addr, addr, 16);
			}
			mine->n++;
			srv->ndeferred++;
			r->wait_counted = true;
		}
		pthread_mutex_unlock(&srv->defer_mu);
		if (why) {
			reject_count(srv, REJ_TOO_MANY_WAITS);
			rv_http_resp_error_text(resp, 429, "too_many_requests", why, NULL);
			resp->retry_after_s = RETRY_AFTER_S;
			return NULL;
		}
	}
	free(resp->body);
	resp->body = NULL;
	resp->deferred = true;
	r->deferred = true;
	return (struct rv_http_defer *)r;
}

struct rv_http_defer *rv_http_resp_defer(struct rv_http_resp *resp)
{
	return defer(resp, false);
}

struct rv_http_defer *rv_http_resp_wait(struct rv_http_resp *resp)
{
	return defer(resp, true);
}

void rv_http_complete(struct rv_http_defer *d, int status, char *json)
{
	struct req *r = (struct req *)d;
	if (!r)
		return;
	struct rv_http_server *srv = r->srv;
	pthread_mutex_lock(&srv->defer_mu);
	r->done.status = status;
	r->done.body = NULL;
	if (!json && status == 204)
		r->done.status = 204; /* no content */
	else
		rv_http_resp_json(&r->done, status, json);
	r->ready = true;
	/* Not yet suspended: on_access finds it ready and queues it itself.
	 * After the resume r may be freed at any moment: not touched again. */
	if (r->suspended)
		MHD_resume_connection(r->conn);
	pthread_mutex_unlock(&srv->defer_mu);
}

bool rv_http_defer_gone(const struct rv_http_defer *d)
{
	const struct req *r = (const struct req *)d;
	if (!r || !r->conn)
		return false;
	/* a suspended connection is not polled by libmicrohttpd, so its close
	 * goes unseen until the reply: ask the socket (its fd stays open until
	 * the connection is resumed, which only rv_http_complete does) */
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return false;
	struct pollfd p = { .fd = ci->connect_fd, .events = POLLIN | POLLRDHUP };
	if (poll(&p, 1, 0) <= 0)
		return false;
	return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/* A deferred request: queue its reply when it is ready, else suspend the
 * connection until rv_http_complete resumes it. */
static enum MHD_Result send_deferred(struct rv_http_server *srv, struct MHD_Connection *conn,
				     struct req *r)
{
	pthread_mutex_lock(&srv->defer_mu);
	if (!r->ready) {
		if (!r->suspended) {
			r->suspended = true;
			atomic_fetch_add(&srv->suspended, 1);
			MHD_suspend_connection(conn);
		}
		pthread_mutex_unlock(&srv->defer_mu);
		return MHD_YES;
	}
	struct rv_http_resp resp = r->done;
	r->done.body = NULL;
	if (r->suspended) {
		r->suspended = false;
		atomic_fetch_sub(&srv->suspended, 1);
	}
	pthread_mutex_unlock(&srv->defer_mu);
	return send_resp(conn, r, &resp, NULL, false);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
				 const char *method, const char *version, const char *upload_data,
				 size_t *upload_data_size, void **con_cls)
{
	(void)url;
	(void)version;
	struct rv_http_server *srv = cls;
	struct req *r = *con_cls;
	if (!r)
		return MHD_NO; /* on_uri ran out of memory: drop the connection */
	if (r->status)
		return MHD_YES; /* already answered; libmicrohttpd discards the rest */
	if (r->deferred)
		return send_deferred(srv, conn, r);

	if (!r->started) {
		r->started = true;
		atomic_fetch_add(&srv->active, 1);
		return begin(srv, conn, r, method);
	}
	if (*upload_data_size) {
		int rc = body_append(srv, r, upload_data, *upload_data_size);
		if (rc < 0) {
			if (rc == -EMSGSIZE)
				reject_count(srv, REJ_TOO_LARGE);
			return MHD_NO; /* drop the connection */
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (r->too_large) {
		/* Chunked upload that outgrew the limit (no Content-Length to
		 * refuse up front). */
		reject_count(srv, REJ_TOO_LARGE);
		return send_error(conn, r, 413, "too_large", "request body too large", NULL, NULL,
				  false);
	}
	if (r->over_budget) {
		return send_over_budget(conn, r);
	}
	conn_deadline(srv, r->cs, 0); /* whole request in: the handler's time */

	const struct rv_http_route *rt = &srv->opts.routes[r->route];
	struct rv_http_req req = {
		.method = method,
		.path = r->raw_path,
		.body = r->body ? r->body : "",
		.body_len = r->body_len,
		.nparams = r->nparams,
		.conn = conn,
	};
	for (int i = 0; i < r->nparams; i++)
		req.params[i] = r->params[i];
	struct rv_http_resp resp = { .status = 200, .priv = r };
	r->conn = conn;
	int rc = rt->fn(&req, &resp, srv->opts.ctx);
	body_drop(srv, r); /* the handler only borrowed it */
	if (resp.deferred)
		return send_deferred(srv, conn, r);
	if (rc < 0 && !resp.body)
		rv_http_resp_error(&resp, rc, NULL);
	else if (rc < 0 && resp.status < 400)
		resp.status = rv_errno_to_http(rc);
	return send_resp(conn, r, &resp, NULL, false);
}

/* ---- start/stop ---- */

static int listen_socket(const char *host, int port, struct rv_err *err)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t sslen;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		sslen = sizeof(*sin);
	} else if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		sslen = sizeof(*sin6);
	} else {
		return rv_err_set(err, -EINVAL, "host",
				  "could not parse listen address \"%s\": not an IPv4 or IPv6 address",
				  host);
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return rv_err_set(err, -errno, NULL, "could not create socket: %s", strerror(errno));
	int one = 1;
	/* Lets a restarted daemon bind over TIME_WAIT; a live listener still
	 * gives EADDRINUSE on Linux. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sslen) < 0) {
		int e = errno;
		close(fd);
		return rv_err_set(err, -e, "port", "could not bind %s port %d: %s", host, port,
				  strerror(e));
	}
	if (listen(fd, SOMAXCONN) < 0) {
		int e = errno;
		close(fd);
		return rv_err_set(err, -e, NULL, "could not listen on %s port %d: %s", host, port,
				  strerror(e));
	}
	return fd;
}

/* Check patterns and give each distinct pattern a histogram slot. */
static int build_routes(struct rv_http_server *srv, struct rv_err *err)
{
	int n = srv->opts.nroutes;
	srv->slot_of = calloc((size_t)(n ? n : 1), sizeof(*srv->slot_of));
	srv->labels = calloc((size_t)(n ? n : 1), sizeof(*srv->labels));
	if (!srv->slot_of || !srv->labels)
		return rv_err_set(err, -ENOMEM, NULL, "could not allocate route table");
	for (int i = 0; i < n; i++) {
		const struct rv_http_route *rt = &srv->opts.routes[i];
		char field[64];
		snprintf(field, sizeof(field), "routes[%d]", i);
		if (!rt->method || !rt->pattern || !rt->fn || rt->pattern[0] != '/')
			return rv_err_set(err, -EINVAL, field,
					  "could not add route: method, pattern starting with '/' "
					  "and handler are required");
		int nparams = 0;
		for (const char *p = rt->pattern; *p; p++) {
			if (*p == '}')
				return rv_err_set(err, -EINVAL, field,
						  "could not add route \"%s\": unbalanced '}'",
						  rt->pattern);
			if (*p != '{')
				continue;
			const char *end = strchr(p, '}');
			/* A parameter is a whole segment: "/{x}/" or "/{x}" at the end. */
			if (!end || end == p + 1 || p[-1] != '/' || (end[1] && end[1] != '/') ||
			    memchr(p + 1, '/', (size_t)(end - p - 1)) ||
			    memchr(p + 1, '{', (size_t)(end - p - 1)))
				return rv_err_set(err, -EINVAL, field,
						  "could not add route \"%s\": a {param} must be a "
						  "whole segment",
						  rt->pattern);
			if (++nparams > RV_HTTP_MAX_PARAMS)
				return rv_err_set(err, -EINVAL, field,
						  "could not add route \"%s\": more than %d parameters",
						  rt->pattern, RV_HTTP_MAX_PARAMS);
			p = end;
		}
		srv->slot_of[i] = -1;
		for (int j = 0; j < srv->nlabels; j++)
			if (strcmp(srv->labels[j], rt->pattern) == 0)
				srv->slot_of[i] = j;
		if (srv->slot_of[i] < 0) {
			srv->slot_of[i] = srv->nlabels;
			srv->labels[srv->nlabels++] = rt->pattern;
		}
	}
	srv->histos = calloc((size_t)srv->nlabels + 1, sizeof(*srv->histos));
	if (!srv->histos)
		return rv_err_set(err, -ENOMEM, NULL, "could not allocate metrics");
	return 0;
}

static void server_free(struct rv_http_server *srv)
{
	if (!srv)
		return;
	if (srv->token) {
		explicit_bzero(srv->token, srv->token_len);
		free(srv->token);
	}
	free(srv->slot_of);
	free(srv->labels);
	free(srv->histos);
	free(srv->counters);
	free(srv->deferred_by_addr);
	pthread_mutex_destroy(&srv->mu);
	pthread_mutex_destroy(&srv->defer_mu);
	pthread_mutex_destroy(&srv->conn_mu);
	pthread_cond_destroy(&srv->reap_wake);
	free(srv);
}

struct rv_http_server *rv_http_server_start(const struct rv_http_server_opts *opts,
					    struct rv_err *err)
{
	if (!opts || !opts->host || opts->port < 0 || opts->port > 65535 || opts->nroutes < 0 ||
	    (opts->nroutes && !opts->routes)) {
		rv_err_set(err, -EINVAL, NULL, "could not start http server: bad options");
		return NULL;
	}
	struct rv_http_server *srv = calloc(1, sizeof(*srv));
	if (!srv) {
		rv_err_set(err, -ENOMEM, NULL, "could not start http server: out of memory");
		return NULL;
	}
	pthread_mutex_init(&srv->mu, NULL);
	pthread_mutex_init(&srv->defer_mu, NULL);
	pthread_mutex_init(&srv->conn_mu, NULL);
	rv_cond_init_mono(&srv->reap_wake);
	srv->conn_list.next = srv->conn_list.prev = &srv->conn_list;
	srv->opts = *opts;
	if (srv->opts.max_deferred < 0)
		srv->opts.max_deferred = 0;
	if (srv->opts.max_deferred > 0) {
		srv->deferred_by_addr =
			calloc((size_t)srv->opts.max_deferred, sizeof(*srv->deferred_by_addr));
		if (!srv->deferred_by_addr) {
			rv_err_set(err, -ENOMEM, NULL,
				   "could not start http server: out of memory");
			server_free(srv);
			return NULL;
		}
	}
	srv->opts.host = NULL; /* not kept: the caller's string may go away */
	if (opts->token && opts->token[0]) {
		srv->token = strdup(opts->token);
		if (!srv->token) {
			rv_err_set(err, -ENOMEM, NULL, "could not start http server: out of memory");
			server_free(srv);
			return NULL;
		}
		srv->token_len = strlen(srv->token);
	}
	srv->opts.token = NULL;
	if (build_routes(srv, err) < 0) {
		server_free(srv);
		return NULL;
	}

	int fd = listen_socket(opts->host, opts->port, err);
	if (fd < 0) {
		server_free(srv);
		return NULL;
	}
	unsigned int max_conns = opts->max_conns > 0 ? (unsigned int)opts->max_conns : 64;
	unsigned int timeout = opts->conn_timeout_s > 0 ? (unsigned int)opts->conn_timeout_s : 60;
	srv->opts.conn_timeout_s = (int)timeout;
	unsigned int per_ip = opts->per_ip_conns > 0 ? (unsigned int)opts->per_ip_conns : 0;
	srv->drain_ms = (timeout < DRAIN_MAX_S ? timeout : DRAIN_MAX_S) * 1000u;
	unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			     MHD_USE_AUTO | MHD_USE_ITC | MHD_USE_ERROR_LOG;
	unsigned int pool = 0;
	if (opts->threads > 0) {
		flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME |
			MHD_USE_ERROR_LOG;
		pool = (unsigned int)opts->threads;
	}
	srv->mhd = MHD_start_daemon(
		flags, 0, NULL, NULL, on_access, srv, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
		MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, max_conns,
		MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION,
		on_connection, srv, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
		/* Pooled only (an MHD_OPTION_END cuts the list short otherwise).
		 * libmicrohttpd zeroes a connection's whole memory pool after every
		 * request of a keep-alive connection: keep it to what headers need
		 * (bodies are copied out as they arrive). */
		pool ? MHD_OPTION_CONNECTION_MEMORY_LIMIT : MHD_OPTION_END, POOL_CONN_MEM,
		pool > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, pool, MHD_OPTION_END);
	if (!srv->mhd) {
		close(fd);
		rv_err_set(err, -EIO, NULL, "could not start http server on %s port %d",
			   opts->host, opts->port);
		server_free(srv);
		return NULL;
	}
	if (srv->opts.request_timeout_s > 0) {
		int prc = pthread_create(&srv->reaper, NULL, reaper_main, srv);
		if (prc != 0) {
			MHD_stop_daemon(srv->mhd);
			rv_err_set(err, -prc, NULL,
				   "could not start http server: no reaper thread");
			server_free(srv);
			return NULL;
		}
		srv->reaper_running = true;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
	srv->port = info ? info->port : 0;
	if (!srv->port) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
			srv->port = ntohs(ss.ss_family == AF_INET6
						  ? ((struct sockaddr_in6 *)&ss)->sin6_port
						  : ((struct sockaddr_in *)&ss)->sin_port);
	}
	return srv;
}

void rv_http_server_stop(struct rv_http_server *srv)
{
	if (!srv)
		return;
	/* Stop accepting, then give requests in flight up to the idle timeout to
	 * be answered: MHD_stop_daemon shuts every connection's socket, so a
	 * response still being produced would be lost.  MHD_stop_daemon then
	 * joins every connection thread; a handler still blocked is waited for
	 * (handlers bound their own waits). */
	MHD_socket lfd = MHD_quiesce_daemon(srv->mhd);
	int64_t deadline = rv_mono_ms() + (int64_t)srv->drain_ms;
	while (atomic_load(&srv->active) > 0 && rv_mono_ms() < deadline)
		usleep(5000);
	/* libmicrohttpd cannot stop with a connection suspended: a deferred
	 * reply is waited for (whoever completes it bounds its own wait). */
	while (atomic_load(&srv->suspended) > 0)
		usleep(5000);
	if (srv->reaper_running) {
		pthread_mutex_lock(&srv->conn_mu);
		srv->reap_stop = true;
		pthread_cond_signal(&srv->reap_wake);
		pthread_mutex_unlock(&srv->conn_mu);
		pthread_join(srv->reaper, NULL);
	}
	MHD_stop_daemon(srv->mhd);
	/* After quiesce the listen socket is ours to close, and only once
	 * every thread is gone. */
	if (lfd != MHD_INVALID_SOCKET)
		close(lfd);
	server_free(srv);
}

int rv_http_server_port(const struct rv_http_server *srv)
{
	return srv ? srv->port : -EINVAL;
}
