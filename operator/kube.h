/*
 * kube.h: rover-operator's view of the API server (common/k8s_client.h
 * underneath): blocking JSON calls, and watchers that keep a cache of one
 * collection current by a LIST then a WATCH from its resourceVersion.
 *
 * A watcher runs in a thread of its own: a watch that ends (the server's
 * timeoutSeconds, a cut connection, the server restarted) is resumed from
 * the last version seen; a 410 Gone (an ERROR event or the status) or a
 * failed resume lists again; a refused connection backs off (100 ms
 * doubling to 5 s).  Each change bumps the kube's generation and signals
 * its condition, which the reconcile loop waits on.  The caches, the
 * generation and the condition are under kube.lock; calls (kube_call) take
 * no lock and may run from any thread, each with its own curl handle.
 */
#ifndef KUBE_H
#define KUBE_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "k8s_client.h"

#define KUBE_MAX_WATCHERS 4

struct kube;

/* One collection kept current: its items by namespace/name. */
struct kube_watcher {
	struct kube *k;
	char path[512];     /* "/apis/.../elasticjobs" or ".../pods?labelSelector=..." */
	cJSON *items;       /* object: "ns/name" -> the object (k->lock) */
	bool synced;        /* the first LIST was read (k->lock) */
	char rv[64];        /* the watch position (the thread's own) */
	bool gone;          /* a 410 seen in the stream (the thread's own) */
	struct rv_buf line; /* a watch line being read (the thread's own) */
	int64_t lists, watches, expired; /* counts, for the log and tests (k->lock) */
	pthread_t thread;
	bool started;
};

struct kube {
	struct rv_k8s_conf conf;
	long timeout_ms;
	int watch_s; /* a watch's timeoutSeconds */
	pthread_mutex_t lock;
	pthread_cond_t changed;
	uint64_t gen; /* bumped on every change a watcher saw */
	atomic_bool stop;
	struct kube_watcher w[KUBE_MAX_WATCHERS];
	int nw;
};

/* Read the credentials (kubeconfig as in k8s_conf.h).  0, or -errno with
 * err filled. */
int kube_init(struct kube *k, const char *kubeconfig, long timeout_ms, struct rv_err *err);
/* Stop the watchers (waits for them) and release everything. */
void kube_release(struct kube *k);

/* One JSON call: 0 with the HTTP status in *status and the parsed reply in
 * *out (NULL when it was not JSON; the caller cJSON_Deletes it), or -errno
 * (the server could not be reached) with err filled.  body may be NULL;
 * ctype NULL is application/json. */
int kube_call(struct kube *k, const char *method, const char *path, const char *body,
	      const char *ctype, long *status, cJSON **out, struct rv_err *err);

/* Add a watcher of path (a collection, an optional labelSelector query) and
 * start its thread.  Returns it, or NULL (too many, no memory). */
struct kube_watcher *kube_watch(struct kube *k, const char *path);

/* A copy of w's items ("ns/name" -> object; the caller cJSON_Deletes it),
 * or NULL while its first LIST has not been read. */
cJSON *kube_snapshot(struct kube_watcher *w);

/* Wait until the generation differs from *seen or timeout_ms passed; sets
 * *seen to the generation now.  true when it changed. */
bool kube_wait(struct kube *k, uint64_t *seen, int timeout_ms);

#endif
