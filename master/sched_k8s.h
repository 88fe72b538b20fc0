/*
 * sched_k8s.h: the "k8s" scheduler backend: each node is a pod made from
 * its replica's pod template (k8s_pod.h), through the Kubernetes API
 * (libcurl, cJSON; credentials from k8s_conf.h).
 *
 * launch POSTs the pod, remove DELETEs it with its grace period, resize
 * PATCHes the pod's resize subresource where the server has one (found at
 * start in /api/v1), else answers -EOPNOTSUPP so the node manager
 * relaunches.  Events come from one LIST then a WATCH on the job's pods
 * (label rover.dev/job) from its resourceVersion, with bookmarks; a watch
 * that ends is resumed from the last version seen, a 410 Gone (or any
 * failed watch resume) re-lists.  Events are derived from each pod's state
 * against what the node last reported (k8s_pod_events), so a re-list or a
 * re-sent change never repeats an event and a change missed while cut off
 * is still seen.  A pod that ended is deleted; so is a pod of the job that
 * no node owns (once adoption is over).
 *
 * Threads: the owner (the node thread) calls the sched.h operations; a
 * worker thread runs every request and the watch on one curl multi handle,
 * so creates and deletes go out in parallel.  They share the node table,
 * the command queue and the event queue under one mutex.  sched_fd() is an
 * eventfd, readable while events wait.  resize is the one call the owner
 * makes itself (a PATCH with the request timeout).  sched_new lists the
 * job's pods once before returning, so sched_adopt can answer at once:
 * pods survive the master; a restarted one adopts them by name.  Every
 * request has a timeout; a watch has the server's timeoutSeconds and a
 * client timeout above it.
 */
#ifndef SCHED_K8S_H
#define SCHED_K8S_H

#include "sched.h"

#define SCHED_K8S_MAX_TEMPLATES 8

/* Borrowed for the call (copied). */
struct sched_k8s_opts {
	const char *job;            /* labels and names the pods: a DNS label */
	const char *namespace_;     /* "": the kubeconfig's, else "default" */
	const char *kubeconfig;     /* "": $KUBECONFIG, in-cluster, ~/.kube/config */
	const char *image;          /* a container without one: this image */
	const char *scheduler_name; /* spec.schedulerName unless the template sets it */
	int64_t max_pending_ms;     /* Unschedulable this long: FAILED (0: wait forever) */
	int timeout_ms;             /* each request (not the watch); 0: 10000 */
	/* each role's PodTemplateSpec as JSON; a role without one gets a pod of
	 * one container running the node's argv in image */
	struct {
		const char *role, *template_json;
	} templates[SCHED_K8S_MAX_TEMPLATES];
	int ntemplates;
};

/* Connect (read the credentials, discover the API, list the job's pods).
 * Returns NULL with err filled: the kubeconfig's error, -ECONNREFUSED or
 * the server's refusal (err says what it said), -ENOMEM.  sched_free stops
 * the worker and leaves the pods running. */
struct sched *sched_k8s_new(const struct sched_k8s_opts *o, struct rv_err *err);

/* The API server's url, the namespace in use and whether pods/resize is
 * served; owned by s. */
const char *sched_k8s_server(struct sched *s);
const char *sched_k8s_namespace(struct sched *s);
bool sched_k8s_can_resize(struct sched *s);

#endif
