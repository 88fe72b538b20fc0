/*
 * podwatch.c: one node's pods by list and watch (podwatch.h).  The watch
 * thread owns the curl handles and the watch position; the pod table is
 * shared with the sampler under w->mu.
 */
#include "podwatch.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "json.h"
#include "k8s_client.h"
#include "log.h"
#include "parse.h"

#define PODWATCH_WATCH_S     50  /* the server ends a watch after this */
#define PODWATCH_BACKOFF_MS  500 /* after a failed list or watch, doubling */
#define PODWATCH_BACKOFF_MAX 10000

struct podwatch {
	const struct rv_k8s_conf *conf;
	char node[RV_NAME_MAX * 2];
	char selector[RV_NAME_MAX * 3]; /* "fieldSelector=spec.nodeName%3D<node>" */
	long timeout_ms;
	pthread_t thread;
	bool started;
	atomic_bool stop;

	pthread_mutex_t mu; /* guards pods, npods and the counters */
	struct podwatch_pod pods[PODWATCH_MAX];
	int npods;
	long lists, watches, expired;

	/* the watch thread's own */
	char rv[64];        /* the resource version applied last */
	bool gone;          /* the watch said 410 */
	struct rv_buf part; /* a watch line not yet whole */
	char token[sizeof(((struct rv_k8s_conf *)0)->token)];
};

/* The service account's token is rotated by the kubelet: read it again
 * before each request that starts a list or a watch. */
static const char *podwatch_token(struct podwatch *w)
{
	if (!w->conf->token_file[0])
		return NULL;
	FILE *f = fopen(w->conf->token_file, "re");
	if (!f)
		return NULL;
	size_t n = fread(w->token, 1, sizeof(w->token) - 1, f);
	fclose(f);
	while (n > 0 && (w->token[n - 1] == '\n' || w->token[n - 1] == '\r'))
		n--;
	w->token[n] = 0;
	return n ? w->token : NULL;
}

static const char *podwatch_str(const cJSON *o, const char *a, const char *b)
{
	const cJSON *x = cJSON_GetObjectItem(o, a);
	return cJSON_GetStringValue(b ? cJSON_GetObjectItem(x, b) : x);
}

/* A pod object into *p: 0, or -EINVAL without a uid. */
static int podwatch_parse(const cJSON *pod, struct podwatch_pod *p)
{
	const cJSON *meta = cJSON_GetObjectItem(pod, "metadata");
	const cJSON *labels = cJSON_GetObjectItem(meta, "labels");
	const char *uid = podwatch_str(meta, "uid", NULL);
	const char *job = podwatch_str(labels, PODWATCH_LABEL_JOB, NULL);
	const char *role = podwatch_str(labels, PODWATCH_LABEL_ROLE, NULL);
	const char *rank = podwatch_str(labels, PODWATCH_LABEL_RANK, NULL);
	const char *name = podwatch_str(meta, "name", NULL);
	if (!uid || !uid[0] || strlen(uid) >= sizeof(p->uid))
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	snprintf(p->uid, sizeof(p->uid), "%s", uid);
	snprintf(p->name, sizeof(p->name), "%s", name ? name : "");
	if (job && strlen(job) < sizeof(p->job))
		snprintf(p->job, sizeof(p->job), "%s", job);
	snprintf(p->role, sizeof(p->role), "%s", role ? role : "");
	int64_t r = -1;
	p->rank = rank && rv_parse_i64(rank, 0, 1 << 30, &r) == 0 ? (int)r : -1;
	return 0;
}

/* Add or replace (gone: remove) p in the table; w->mu held. */
static void podwatch_put(struct podwatch *w, const struct podwatch_pod *p, bool gone)
{
	for (int i = 0; i < w->npods; i++) {
		if (strcmp(w->pods[i].uid, p->uid) != 0)
			continue;
		if (gone)
			w->pods[i] = w->pods[--w->npods];
		else
			w->pods[i] = *p;
		return;
	}
	if (!gone && w->npods < PODWATCH_MAX)
		w->pods[w->npods++] = *p;
}

/* GET the node's pods: the table replaced, w->rv set.  0 or -errno. */
static int podwatch_list(struct podwatch *w, struct rv_err *err)
{
	char path[512];
	long code = 0;
	struct rv_buf out;
	snprintf(path, sizeof(path), "/api/v1/pods?%s", w->selector);
	rv_buf_init(&out);
	int rc = rv_k8s_call(w->conf, podwatch_token(w), "GET", path, NULL, NULL, w->timeout_ms,
			     &code, &out, err);
	RV_CLEANUP_CJSON cJSON *j = rc == 0 && code == 200 ? cJSON_Parse(out.data) : NULL;
	const char *rv = podwatch_str(j, "metadata", "resourceVersion");
	if (rc == 0 && !rv) {
		char m[256];
		rv_k8s_status_message(out.data, code, m, sizeof(m));
		rc = rv_err_set(err, code ? rv_k8s_status_errno(code) : -EIO, "k8s",
				"could not list the pods of node %s at %s: %s", w->node,
				w->conf->server, m);
	}
	rv_buf_release(&out);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&w->mu);
	w->npods = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "items"))
	{
		struct podwatch_pod p;
		if (podwatch_parse(it, &p) == 0)
			podwatch_put(w, &p, false);
	}
	w->lists++;
	pthread_mutex_unlock(&w->mu);
	snprintf(w->rv, sizeof(w->rv), "%s", rv);
	return 0;
}

/* One line of the watch: an event applied.  false ends the stream (410). */
static bool podwatch_line(void *arg, const char *line, size_t len)
{
	struct podwatch *w = arg;
	RV_CLEANUP_CJSON cJSON *ev = cJSON_ParseWithLength(line, len);
	const char *type = podwatch_str(ev, "type", NULL);
	const cJSON *obj = cJSON_GetObjectItem(ev, "object");
	if (!type || !obj)
		return true;
	if (strcmp(type, "ERROR") == 0) {
		if (cJSON_GetNumberValue(cJSON_GetObjectItem(obj, "code")) == 410)
			w->gone = true;
		return false;
	}
	const char *rv = podwatch_str(obj, "metadata", "resourceVersion");
	struct podwatch_pod p;
	if (strcmp(type, "BOOKMARK") != 0 && podwatch_parse(obj, &p) == 0) {
		pthread_mutex_lock(&w->mu);
		podwatch_put(w, &p, strcmp(type, "DELETED") == 0);
		pthread_mutex_unlock(&w->mu);
	}
	if (rv && strlen(rv) < sizeof(w->rv))
		snprintf(w->rv, sizeof(w->rv), "%s", rv);
	return true;
}

static size_t podwatch_on_data(char *p, size_t size, size_t n, void *arg)
{
	struct podwatch *w = arg;
	return rv_k8s_lines(&w->part, p, size * n, podwatch_line, w) == 0 ? size * n : 0;
}

/* Ends the transfer once podwatch_stop asked. */
static int podwatch_on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a, (void)b, (void)c, (void)d;
	return atomic_load(&((struct podwatch *)arg)->stop) ? 1 : 0;
}

/* One watch from w->rv until the server ends it: 0, -ESTALE after a 410,
 * or another negative errno when it failed. */
static int podwatch_watch(struct podwatch *w)
{
	char url[1200];
	snprintf(url, sizeof(url),
		 "%s/api/v1/pods?%s&watch=1&allowWatchBookmarks=true&timeoutSeconds=%d"
		 "&resourceVersion=%s",
		 w->conf->server, w->selector, PODWATCH_WATCH_S, w->rv);
	struct curl_slist *hdrs = NULL;
	CURL *h = rv_k8s_easy_new(w->conf, podwatch_token(w), "GET", url, NULL, NULL, &hdrs,
				  (PODWATCH_WATCH_S + 15) * 1000L);
	if (!h) {
		curl_slist_free_all(hdrs);
		return -ENOMEM;
	}
	rv_buf_truncate(&w->part, 0);
	w->gone = false;
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, podwatch_on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, podwatch_on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, w);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	pthread_mutex_lock(&w->mu);
	w->watches++;
	pthread_mutex_unlock(&w->mu);
	CURLcode rc = curl_easy_perform(h);
	long code = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	if (w->gone || code == 410)
		return -ESTALE;
	if (code != 200)
		return code ? rv_k8s_status_errno(code) : -ECONNRESET;
	/* a clean end, or the client's timeout: resume from w->rv */
	return rc == CURLE_OK || rc == CURLE_OPERATION_TIMEDOUT ? 0 : -ECONNRESET;
}

/* Sleep ms, or less once stopped. */
static void podwatch_nap(struct podwatch *w, int ms)
{
	for (int t = 0; t < ms && !atomic_load(&w->stop); t += 100)
		usleep(100 * 1000);
}

static void *podwatch_main(void *arg)
{
	struct podwatch *w = arg;
	bool need_list = false, failing = false;
	int backoff = PODWATCH_BACKOFF_MS;
	while (!atomic_load(&w->stop)) {
		struct rv_err err = { 0 };
		int rc = need_list ? podwatch_list(w, &err) : 0;
		if (rc == 0)
			rc = podwatch_watch(w);
		if (rc == -ESTALE) {
			pthread_mutex_lock(&w->mu);
			w->expired++;
			pthread_mutex_unlock(&w->mu);
		}
		need_list = rc < 0; /* a 410, or a watch that could not resume */
		if (rc == 0 || rc == -ESTALE) {
			if (failing)
				rv_log_info("pod watch resumed", "node=%s", w->node);
			failing = false;
			backoff = PODWATCH_BACKOFF_MS;
			continue;
		}
		if (!failing && !atomic_load(&w->stop)) {
			char q[600];
			rv_log_warn("pod watch failed", "node=%s errno=%d reason=%s", w->node, -rc,
				    rv_log_q(q, sizeof(q), err.msg[0] ? err.msg : strerror(-rc)));
		}
		failing = true;
		podwatch_nap(w, backoff);
		backoff = backoff * 2 > PODWATCH_BACKOFF_MAX ? PODWATCH_BACKOFF_MAX : backoff * 2;
	}
	return NULL;
}

struct podwatch *podwatch_start(const struct rv_k8s_conf *conf, const char *node, long timeout_ms,
				struct rv_err *err)
{
	struct podwatch *w = calloc(1, sizeof(*w));
	if (!w) {
		rv_err_set(err, -ENOMEM, "", "out of memory");
		return NULL;
	}
	w->conf = conf;
	w->timeout_ms = timeout_ms;
	snprintf(w->node, sizeof(w->node), "%s", node);
	snprintf(w->selector, sizeof(w->selector), "fieldSelector=spec.nodeName%%3D%s", node);
	pthread_mutex_init(&w->mu, NULL);
	rv_buf_init(&w->part);
	if (podwatch_list(w, err) < 0) {
		podwatch_stop(w);
		return NULL;
	}
	if (pthread_create(&w->thread, NULL, podwatch_main, w) != 0) {
		rv_err_set(err, -EAGAIN, "", "could not start the pod watch thread");
		podwatch_stop(w);
		return NULL;
	}
	w->started = true;
	return w;
}

bool podwatch_lookup(struct podwatch *w, const char *uid, struct podwatch_pod *out)
{
	bool found = false;
	pthread_mutex_lock(&w->mu);
	for (int i = 0; i < w->npods && !found; i++)
		if (strcmp(w->pods[i].uid, uid) == 0) {
			*out = w->pods[i];
			found = true;
		}
	pthread_mutex_unlock(&w->mu);
	return found;
}

void podwatch_stats(struct podwatch *w, int *pods, long *lists, long *watches, long *expired)
{
	pthread_mutex_lock(&w->mu);
	*pods = w->npods;
	*lists = w->lists;
	*watches = w->watches;
	*expired = w->expired;
	pthread_mutex_unlock(&w->mu);
}

void podwatch_stop(struct podwatch *w)
{
	if (!w)
		return;
	atomic_store(&w->stop, true);
	if (w->started)
		pthread_join(w->thread, NULL);
	rv_buf_release(&w->part);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
