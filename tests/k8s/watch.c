/*
 * watch.c: watch streams (?watch=true) and pod logs (pods/NAME/log).
 *
 * A watch is a chunked response whose reader runs on the connection's own
 * thread and blocks on s->changed: it sends one JSON event per line
 * ({"type":"ADDED","object":{...}}) from the history after its cursor,
 * BOOKMARKs when asked (allowWatchBookmarks), and ends at timeoutSeconds,
 * when the client hangs up, or when a fault cuts it.  A watch from a
 * version older than the history gets one ERROR event holding a Status
 * with code 410 and reason Expired, as the API server's watch cache sends
 * it.  A log with follow=true streams the file until the process is gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "standin.h"

#define WATCH_TICK_MS 200

struct watch {
	struct standin *s;
	enum kind kind;
	char ns[64];
	bool all_ns;
	char *ls, *fs;
	int64_t cursor;
	bool bookmarks, table, table_object, columns_sent;
	double deadline, next_bookmark;
	int cut_gen;
	int fd; /* the client's socket, for hang-ups */
	char *buf;
	size_t len, off;
	bool done, abort_after; /* abort: close without the last chunk */
};

static void watch_push(struct watch *w, const char *type, cJSON *obj)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", type);
	cJSON_AddItemToObject(ev, "object", obj);
	char *line = cJSON_PrintUnformatted(ev);
	cJSON_Delete(ev);
	size_t n = strlen(line);
	char *nb = realloc(w->buf, w->len + n + 2);
	if (!nb) {
		free(line);
		return;
	}
	w->buf = nb;
	memcpy(w->buf + w->len, line, n);
	w->buf[w->len + n] = '\n';
	w->len += n + 1;
	free(line);
}

static cJSON *watch_expired(int64_t rv)
{
	char msg[160];
	snprintf(msg, sizeof(msg), "too old resource version: %lld", (long long)rv);
	cJSON *st = api_failure("Expired", msg);
	cJSON_AddNumberToObject(st, "code", 410);
	return st;
}

static bool watch_match(const struct watch *w, enum kind k, const cJSON *obj)
{
	const char *ns = cJSON_GetStringValue(
		cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "namespace"));
	return k == w->kind && (w->all_ns || (ns && strcmp(ns, w->ns) == 0)) &&
	       select_labels(w->ls, obj) && select_fields(w->fs, obj);
}

/* One object as this watch sends it (a Table row when asked). */
static cJSON *watch_form(struct watch *w, const cJSON *obj)
{
	if (!w->table)
		return cJSON_Duplicate(obj, true);
	cJSON *items[1] = { (cJSON *)obj };
	cJSON *t = table_of(w->kind, items, 1, !w->columns_sent, w->table_object);
	w->columns_sent = true;
	return t;
}

/* Move what happened after the cursor into the buffer (s->mu held). */
static void watch_drain(struct watch *w)
{
	struct standin *s = w->s;
	int i = store_hist_after(s, w->kind, w->cursor);
	if (i == -2) {
		watch_push(w, "ERROR", watch_expired(w->cursor));
		w->done = true;
		return;
	}
	for (const struct hist *h; i >= 0 && (h = store_hist_at(s, w->kind, i)); i++) {
		w->cursor = h->rv;
		if (watch_match(w, h->kind, h->obj))
			watch_push(w, h->type, watch_form(w, h->obj));
	}
}

static void watch_bookmark(struct watch *w)
{
	cJSON *o = cJSON_CreateObject();
	char v[24];
	cJSON_AddStringToObject(o, "kind", w->table ? "Table" : store_kind_name(w->kind));
	cJSON_AddStringToObject(o, "apiVersion",
				w->table ? "meta.k8s.io/v1" : store_kind_api_version(w->kind));
	cJSON *md = cJSON_AddObjectToObject(o, "metadata");
	snprintf(v, sizeof(v), "%lld", (long long)w->cursor);
	cJSON_AddStringToObject(md, "resourceVersion", v);
	watch_push(w, "BOOKMARK", o);
}

static bool watch_hung_up(const struct watch *w)
{
	struct pollfd p = { .fd = w->fd, .events = POLLRDHUP };
	return w->fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Wait until there is something to send or the watch is over. */
static void watch_wait(struct watch *w)
{
	struct standin *s = w->s;
	pthread_mutex_lock(&s->mu);
	while (!w->len && !w->done) {
		double now = store_mono_s();
		if (s->stop || now >= w->deadline || s->fault_cut != w->cut_gen ||
		    watch_hung_up(w)) {
			w->abort_after = s->fault_cut != w->cut_gen && s->fault_cut_mid;
			w->done = !w->abort_after;
			if (w->abort_after) { /* cut in the middle of the next event */
				watch_drain(w);
				if (!w->len)
					watch_bookmark(w);
				w->len = w->len / 2 > 0 ? w->len / 2 : 1;
				w->done = true;
			}
			break;
		}
		watch_drain(w);
		if (w->len || w->done)
			break;
		if (w->bookmarks && now >= w->next_bookmark) {
			w->cursor = s->rv; /* drained: nothing of ours up to it is unsent */
			watch_bookmark(w);
			w->next_bookmark = now + s->o.bookmark_ms / 1000.0;
			break;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += WATCH_TICK_MS * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&s->changed, &s->mu, &ts);
	}
	pthread_mutex_unlock(&s->mu);
}

static ssize_t watch_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct watch *w = cls;
	if (w->off == w->len) {
		w->off = w->len = 0;
		if (w->done)
			return w->abort_after ? MHD_CONTENT_READER_END_WITH_ERROR
					      : MHD_CONTENT_READER_END_OF_STREAM;
		watch_wait(w);
		if (!w->len)
			return w->abort_after ? MHD_CONTENT_READER_END_WITH_ERROR
					      : MHD_CONTENT_READER_END_OF_STREAM;
	}
	size_t n = w->len - w->off < max ? w->len - w->off : max;
	memcpy(buf, w->buf + w->off, n);
	w->off += n;
	return (ssize_t)n;
}

static void watch_free(void *cls)
{
	struct watch *w = cls;
	free(w->ls);
	free(w->fs);
	free(w->buf);
	free(w);
}

/* The starting point: the synthetic ADDED events of a watch from "now"
 * ("" or "0"), 410 for an expired or forced one (s->mu held). */
static void watch_begin(struct watch *w, const char *rv)
{
	struct standin *s = w->s;
	char *end = NULL;
	long long v = rv && *rv ? strtoll(rv, &end, 10) : 0;
	if (s->fault_expire > 0) {
		s->fault_expire--;
		watch_push(w, "ERROR", watch_expired(v));
		w->done = true;
		return;
	}
	if (v > 0) {
		w->cursor = v;
		return;
	}
	struct obj *arr[4096];
	int n = 0;
	for (struct obj *o = s->objs; o && n < 4096; o = o->next)
		if (watch_match(w, o->kind, o->j))
			arr[n++] = o;
	for (int i = n - 1; i >= 0; i--)
		watch_push(w, "ADDED", watch_form(w, arr[i]->j));
	w->cursor = s->rv;
}

void watch_start(const struct call *c, struct reply *r)
{
	struct standin *s = c->s;
	const char *ls = api_query(c, "labelSelector"), *fs = api_query(c, "fieldSelector");
	const char *to = api_query(c, "timeoutSeconds"), *bm = api_query(c, "allowWatchBookmarks");
	const char *why = NULL;
	if (select_check_labels(ls, &why) < 0 || select_check_fields(fs, &why) < 0) {
		api_status(r, 400, "BadRequest", NULL, "%s", why);
		return;
	}
	struct watch *w = calloc(1, sizeof(*w));
	w->s = s;
	w->kind = c->kind;
	w->all_ns = !c->ns;
	snprintf(w->ns, sizeof(w->ns), "%s", c->ns ? c->ns : "");
	w->ls = ls ? strdup(ls) : NULL;
	w->fs = fs ? strdup(fs) : NULL;
	w->bookmarks = bm && strcmp(bm, "true") == 0;
	w->table = c->table;
	w->table_object = c->table_object;
	long tos = to ? strtol(to, NULL, 10) : 0;
	w->deadline = store_mono_s() + (tos > 0 ? (double)tos : 1800.0);
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c->c, MHD_CONNECTION_INFO_CONNECTION_FD);
	w->fd = ci ? ci->connect_fd : -1;
	pthread_mutex_lock(&s->mu);
	w->cut_gen = s->fault_cut;
	w->next_bookmark = store_mono_s() + s->o.bookmark_ms / 1000.0;
	watch_begin(w, api_query(c, "resourceVersion"));
	pthread_mutex_unlock(&s->mu);
	r->status = 200;
	r->stream = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, watch_read, w,
						      watch_free);
	MHD_add_response_header(r->stream, "Content-Type", "application/json");
}

/* ---- logs ---- */

struct watch_log {
	struct standin *s;
	char uid[40];
	int fd;
	bool follow;
};

static ssize_t watch_log_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct watch_log *l = cls;
	for (;;) {
		ssize_t n = read(l->fd, buf, max);
		if (n > 0)
			return n;
		if (n < 0 && errno == EINTR)
			continue;
		if (!l->follow)
			return MHD_CONTENT_READER_END_OF_STREAM;
		pthread_mutex_lock(&l->s->mu);
		struct obj *o = store_find_uid(l->s, l->uid);
		bool live = o && (o->running || !o->started) && !l->s->stop;
		pthread_mutex_unlock(&l->s->mu);
		if (!live) {
			n = read(l->fd, buf, max);
			return n > 0 ? n : MHD_CONTENT_READER_END_OF_STREAM;
		}
		usleep(WATCH_TICK_MS * 1000);
	}
}

static void watch_log_free(void *cls)
{
	struct watch_log *l = cls;
	close(l->fd);
	free(l);
}

/* Start fd at the last tail lines (tailLines) of the file. */
static void watch_log_tail(int fd, long lines)
{
	off_t end = lseek(fd, 0, SEEK_END), pos = end;
	char c;
	long seen = 0;
	while (pos > 0 && lines >= 0) {
		if (pread(fd, &c, 1, pos - 1) != 1)
			break;
		if (c == '\n' && pos != end && ++seen > lines - 1)
			break;
		pos--;
	}
	lseek(fd, lines == 0 ? end : pos, SEEK_SET);
}

void watch_log(const struct call *c, struct reply *r)
{
	struct standin *s = c->s;
	char path[768];
	pthread_mutex_lock(&s->mu);
	struct obj *o = store_find(s, KIND_POD, c->ns ? c->ns : "", c->name);
	int rc = o ? kubelet_log_path(s, o, api_query(c, "container"), path, sizeof(path))
		   : -ENOENT;
	char uid[40];
	snprintf(uid, sizeof(uid), "%s", o ? o->uid : "");
	pthread_mutex_unlock(&s->mu);
	if (!o) {
		api_status(r, 404, "NotFound", c, "pods \"%s\" not found", c->name);
		return;
	}
	int fd = rc == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0) {
		api_status(r, 400, "BadRequest", NULL,
			   "container in pod \"%s\" is waiting to start: ContainerCreating",
			   c->name);
		return;
	}
	const char *tl = api_query(c, "tailLines"), *fo = api_query(c, "follow");
	if (tl)
		watch_log_tail(fd, strtol(tl, NULL, 10));
	struct watch_log *l = calloc(1, sizeof(*l));
	l->s = s;
	l->fd = fd;
	l->follow = fo && strcmp(fo, "true") == 0;
	snprintf(l->uid, sizeof(l->uid), "%s", uid);
	r->status = 200;
	r->stream = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, watch_log_read, l,
						      watch_log_free);
	MHD_add_response_header(r->stream, "Content-Type", "text/plain");
}
