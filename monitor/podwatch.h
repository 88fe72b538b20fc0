/*
 * podwatch.h: the pods of one node as the API server has them, for the
 * Kubernetes source (source_k8s.c): a LIST of the node's pods
 * (fieldSelector spec.nodeName) then a WATCH from its resourceVersion,
 * resumed after each end, re-listed after a 410 Gone, over the shared
 * client (common/k8s_client.h).  Each pod is kept by UID with the job,
 * role and rank labels rover-master puts on its pods (master/k8s_pod.h);
 * a pod deleted is forgotten.
 *
 * Threads: a thread of its own runs the list and the watch; lookups come
 * from the sampler.  The table is guarded by a mutex.  Every request has
 * a timeout; the watch has the server's timeoutSeconds and a client
 * timeout above it, and podwatch_stop ends it within 200 ms.
 */
#ifndef MONITOR_PODWATCH_H
#define MONITOR_PODWATCH_H

#include <stdbool.h>

#include "err.h"
#include "k8s_conf.h"
#include "wire.h"

/* The labels rover-master sets on its pods (master/k8s_pod.h). */
#define PODWATCH_LABEL_JOB  "rover.dev/job"
#define PODWATCH_LABEL_ROLE "rover.dev/role"
#define PODWATCH_LABEL_RANK "rover.dev/rank"
#define PODWATCH_MAX        1024 /* pods kept; a node runs 110 by default */

struct podwatch_pod {
	char uid[40];
	char name[254];
	char job[RV_NAME_MAX]; /* "" for a pod that is not a Rover job's */
	char role[32];
	int rank; /* -1 without the label */
};

struct podwatch;

/* List the pods of node (a first LIST before returning, so lookups answer
 * at once) and start the watch thread.  conf is borrowed for the watch's
 * life; timeout_ms bounds each request but the watch.  NULL with err
 * filled: the server unreachable or refusing (err says what it said),
 * -ENOMEM. */
struct podwatch *podwatch_start(const struct rv_k8s_conf *conf, const char *node, long timeout_ms,
				struct rv_err *err);

/* The pod with this UID into *out: true when known. */
bool podwatch_lookup(struct podwatch *w, const char *uid, struct podwatch_pod *out);

/* Pods known, lists and watches made, 410s seen (for /metrics and tests). */
void podwatch_stats(struct podwatch *w, int *pods, long *lists, long *watches, long *expired);

/* Stop the thread and free w; accepts NULL. */
void podwatch_stop(struct podwatch *w);

#endif
