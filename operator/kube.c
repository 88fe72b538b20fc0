/*
 * kube.c: rover-operator's API calls and watchers (kube.h).  Each watcher
 * thread owns its curl handle and watch position; the caches are under
 * kube.lock.  The position moves only after a change was applied to the
 * cache, so a watch cut mid-line resumes before that change and sees it
 * again (applying a change twice is harmless: the cache holds the object).
 */
#include "kube.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "parse.h"

#define KUBE_BACKOFF_MAX 5000

int kube_init(struct kube *k, const char *kubeconfig, long timeout_ms, struct rv_err *err)
{
	memset(k, 0, sizeof(*k));
	int rc = rv_k8s_conf_load(kubeconfig, &k->conf, err);
	if (rc < 0)
		return rc;
	k->timeout_ms = timeout_ms;
	k->watch_s = 30;
	pthread_mutex_init(&k->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->changed, &ca);
	pthread_condattr_destroy(&ca);
	return 0;
}

void kube_release(struct kube *k)
{
	atomic_store(&k->stop, true);
	for (int i = 0; i < k->nw; i++) {
		if (k->w[i].started)
			pthread_join(k->w[i].thread, NULL);
		cJSON_Delete(k->w[i].items);
		rv_buf_release(&k->w[i].line);
	}
	pthread_cond_destroy(&k->changed);
	pthread_mutex_destroy(&k->lock);
	rv_k8s_conf_release(&k->conf);
}

int kube_call(struct kube *k, const char *method, const char *path, const char *body,
	      const char *ctype, long *status, cJSON **out, struct rv_err *err)
{
	struct rv_buf b;
	rv_buf_init(&b);
	*out = NULL;
	int rc = rv_k8s_call(&k->conf, NULL, method, path, body, ctype, k->timeout_ms, status, &b,
			     err);
	if (rc == 0 && b.data)
		*out = cJSON_ParseWithLength(b.data, b.len);
	rv_buf_release(&b);
	return rc;
}

static void kube_changed(struct kube *k)
{
	k->gen++;
	pthread_cond_broadcast(&k->changed);
}

static void kube_key(const cJSON *obj, char *out, size_t size)
{
	const cJSON *md = cJSON_GetObjectItem(obj, "metadata");
	const char *ns = cJSON_GetStringValue(cJSON_GetObjectItem(md, "namespace"));
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(md, "name"));
	snprintf(out, size, "%s/%s", ns ? ns : "", name ? name : "");
}

static const char *kube_rv(const cJSON *obj)
{
	return cJSON_GetStringValue(
		cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "resourceVersion"));
}

/* One watch event: the cache updated; false ends the stream (410). */
static bool kube_line(void *arg, const char *line, size_t len)
{
	struct kube_watcher *w = arg;
	RV_CLEANUP_CJSON cJSON *j = cJSON_ParseWithLength(line, len);
	const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(j, "type"));
	cJSON *obj = cJSON_GetObjectItem(j, "object");
	if (!type || !obj)
		return true;
	if (!strcmp(type, "ERROR")) {
		const cJSON *code = cJSON_GetObjectItem(obj, "code");
		w->gone = cJSON_IsNumber(code) && code->valueint == 410;
		return !w->gone;
	}
	const char *rv = kube_rv(obj);
	char key[400], v[64];
	snprintf(v, sizeof(v), "%s", rv ? rv : "");
	if (strcmp(type, "BOOKMARK") != 0) {
		kube_key(obj, key, sizeof(key));
		pthread_mutex_lock(&w->k->lock);
		cJSON_DeleteItemFromObjectCaseSensitive(w->items, key);
		if (strcmp(type, "DELETED") != 0)
			cJSON_AddItemToObject(w->items, key, cJSON_Duplicate(obj, true));
		kube_changed(w->k);
		pthread_mutex_unlock(&w->k->lock);
	}
	if (v[0])
		snprintf(w->rv, sizeof(w->rv), "%s", v);
	return true;
}

static size_t kube_on_watch(char *p, size_t size, size_t n, void *arg)
{
	struct kube_watcher *w = arg;
	return rv_k8s_lines(&w->line, p, size * n, kube_line, w) == 0 ? size * n : 0;
}

static int kube_on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a, (void)b, (void)c, (void)d;
	struct kube_watcher *w = arg;
	return atomic_load(&w->k->stop) ? 1 : 0;
}

/* LIST: the cache replaced, the position set.  0, or -errno. */
static int kube_list(struct kube_watcher *w)
{
	long code = 0;
	cJSON *out = NULL;
	struct rv_err err = { 0 };
	int rc = kube_call(w->k, "GET", w->path, NULL, NULL, &code, &out, &err);
	const char *rv = kube_rv(out);
	if (rc < 0 || code != 200 || !rv) {
		rv_log_debug("could not list", "path=%s code=%ld rc=%d", w->path, code, rc);
		cJSON_Delete(out);
		return rc < 0 ? rc : -EIO;
	}
	cJSON *items = cJSON_CreateObject(), *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(out, "items"))
	{
		char key[400];
		kube_key(it, key, sizeof(key));
		cJSON_AddItemToObject(items, key, cJSON_Duplicate(it, true));
	}
	snprintf(w->rv, sizeof(w->rv), "%s", rv);
	cJSON_Delete(out);
	pthread_mutex_lock(&w->k->lock);
	cJSON_Delete(w->items);
	w->items = items;
	w->synced = true;
	w->lists++;
	kube_changed(w->k);
	pthread_mutex_unlock(&w->k->lock);
	return 0;
}

/* WATCH from w->rv until the stream ends: 0 (resume), -ESTALE (list
 * again) or -ECONNREFUSED (back off). */
static int kube_watch_once(struct kube_watcher *w)
{
	char url[1200];
	snprintf(url, sizeof(url),
		 "%s%s%cwatch=1&allowWatchBookmarks=true&timeoutSeconds=%d&resourceVersion=%s",
		 w->k->conf.server, w->path, strchr(w->path, '?') ? '&' : '?', w->k->watch_s,
		 w->rv);
	struct curl_slist *hdrs = NULL;
	CURL *h = rv_k8s_easy_new(&w->k->conf, NULL, "GET", url, NULL, NULL, &hdrs,
				  (w->k->watch_s + 15) * 1000L);
	if (!h) {
		curl_slist_free_all(hdrs);
		return -ECONNREFUSED;
	}
	rv_buf_truncate(&w->line, 0);
	w->gone = false;
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, kube_on_watch);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, kube_on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, w);
	CURLcode rc = curl_easy_perform(h);
	long code = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	pthread_mutex_lock(&w->k->lock);
	w->watches++;
	w->expired += w->gone || code == 410;
	pthread_mutex_unlock(&w->k->lock);
	if (w->gone || code == 410 || (code && code != 200))
		return -ESTALE;
	if (rc != CURLE_OK && code == 0)
		return -ECONNREFUSED;
	return 0; /* the server's timeout, or a cut: resume from rv */
}

/* The cache no longer counts as listed: no pass reads it until a LIST
 * succeeds again (a server restarted empty, or a resource gone, must not
 * leave jobs in it that a pass would act on). */
static void kube_unsync(struct kube_watcher *w)
{
	pthread_mutex_lock(&w->k->lock);
	w->synced = false;
	pthread_mutex_unlock(&w->k->lock);
}

static void *kube_watcher_main(void *arg)
{
	struct kube_watcher *w = arg;
	int backoff = 0;
	bool need_list = true;
	while (!atomic_load(&w->k->stop)) {
		int rc = need_list ? kube_list(w) : kube_watch_once(w);
		if (rc == 0) {
			need_list = false;
			backoff = 0;
			continue;
		}
		if (rc == -ESTALE) {
			rv_log_info("watch expired, listing again", "path=%s", w->path);
			need_list = true;
			continue;
		}
		/* unreachable: back off, then resume (a failed resume lists) */
		if (need_list)
			kube_unsync(w);
		backoff = backoff ? backoff * 2 : 100;
		if (backoff > KUBE_BACKOFF_MAX)
			backoff = KUBE_BACKOFF_MAX;
		for (int t = 0; t < backoff && !atomic_load(&w->k->stop); t += 50)
			usleep(50 * 1000);
		if (!need_list && backoff >= 400) {
			need_list = true;
			kube_unsync(w);
		}
	}
	return NULL;
}

struct kube_watcher *kube_watch(struct kube *k, const char *path)
{
	if (k->nw == KUBE_MAX_WATCHERS)
		return NULL;
	struct kube_watcher *w = &k->w[k->nw];
	memset(w, 0, sizeof(*w));
	w->k = k;
	snprintf(w->path, sizeof(w->path), "%s", path);
	rv_buf_init(&w->line);
	if (pthread_create(&w->thread, NULL, kube_watcher_main, w) != 0)
		return NULL;
	w->started = true;
	k->nw++;
	return w;
}

cJSON *kube_snapshot(struct kube_watcher *w)
{
	pthread_mutex_lock(&w->k->lock);
	cJSON *c = w->synced ? cJSON_Duplicate(w->items, true) : NULL;
	pthread_mutex_unlock(&w->k->lock);
	return c;
}

bool kube_wait(struct kube *k, uint64_t *seen, int timeout_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&k->lock);
	while (k->gen == *seen && !atomic_load(&k->stop))
		if (pthread_cond_timedwait(&k->changed, &k->lock, &ts) != 0)
			break;
	bool changed = k->gen != *seen;
	*seen = k->gen;
	pthread_mutex_unlock(&k->lock);
	return changed;
}
