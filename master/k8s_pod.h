/*
 * k8s_pod.h: the pure half of the k8s scheduler backend (sched_k8s.c): a
 * node's pod built from its replica's pod template, a pod read back from
 * the API server's JSON, and what a pod's change means for the node
 * manager (sched.h events).  No I/O, no clock, no globals: sched_k8s.c
 * passes the time in; tests reach every rule without a server.
 *
 * Labels on every pod (stable across relaunches but for the instance):
 *   rover.dev/job=<job>  rover.dev/role=<role>  rover.dev/rank=<rank>
 *   rover.dev/instance=<instance>  (the sched.h node name, "worker-0.2")
 * The pod's name is "<job>-<instance>": a relaunch is a new pod name with
 * the same rank label.
 */
#ifndef K8S_POD_H
#define K8S_POD_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "sched.h"

#define K8S_LABEL_JOB      "rover.dev/job"
#define K8S_LABEL_ROLE     "rover.dev/role"
#define K8S_LABEL_RANK     "rover.dev/rank"
#define K8S_LABEL_INSTANCE "rover.dev/instance"
#define K8S_POD_NAME_MAX   254 /* a DNS-1123 subdomain, 253 characters at most */

/* What a pod is made from; everything borrowed for the call. */
struct k8s_pod_args {
	const char *job;                    /* the job's name (a DNS label) */
	const char *namespace_;             /* where the pod goes */
	const char *template_json;          /* the replica's PodTemplateSpec, NULL: none */
	const char *image;                  /* the container's image when the template has none */
	const char *scheduler_name;         /* spec.schedulerName unless the template sets one */
	const struct sched_node_spec *spec; /* name (instance), role, rank, res, argv, env */
};

/* "<job>-<instance>" in out; -ENAMETOOLONG when it does not fit a pod name. */
int k8s_pod_name(char *out, size_t size, const char *job, const char *instance);

/* Kubernetes quantities: cores as "2" or "1500m", MiB as "3072Mi". */
void k8s_pod_cpu_quantity(char *out, size_t size, double cores);
void k8s_pod_memory_quantity(char *out, size_t size, int64_t mb);

/* The pod for a->spec: the template (metadata labels and annotations, spec
 * fields such as schedulerName, tolerations, volumes: all kept), with
 * Rover's labels, restartPolicy Never (the master relaunches), its first
 * container given the spec's env (replacing same-named variables), the
 * spec's argv when the container has no command, requests = limits =
 * the spec's resources, and the spec's avoid list as a required node
 * affinity (kubernetes.io/hostname NotIn) merged into the template's.
 * Returns a new tree (cJSON_Delete), or NULL with
 * err filled: -EINVAL a template that is no PodTemplateSpec, -ENOMEM. */
cJSON *k8s_pod_build(const struct k8s_pod_args *a, struct rv_err *err);

/* A pod as read from the server: what the backend needs of it. */
struct k8s_pod_state {
	char name[K8S_POD_NAME_MAX];
	char instance[SCHED_NAME_MAX]; /* "": not a pod of ours */
	char role[SCHED_ROLE_MAX];
	int rank;
	char node_name[SCHED_NAME_MAX]; /* spec.nodeName, "" while unplaced */
	char container[SCHED_NAME_MAX]; /* the first container's name */
	bool deleting;                  /* metadata.deletionTimestamp is set */
	bool running;                   /* phase Running and the first container runs */
	bool ended;                     /* phase Succeeded/Failed or the container terminated */
	bool ran;                       /* the container started at some point */
	int exit_code;                  /* ended: the first container's, -1 unknown */
	char reason[64];                /* ended: "OOMKilled", "Error", "Evicted", ... */
	bool unschedulable;             /* PodScheduled False, reason Unschedulable */
	bool evicted; /* status.reason Evicted, Preempting or NodeLost, or a DisruptionTarget */
	char message[SCHED_DETAIL_MAX]; /* the scheduler's or the kubelet's words */
	int64_t memory_limit_mb;        /* the first container's limit, 0 none */
};

/* Fill *st from a pod object.  Returns 0, or -EINVAL when it is no pod
 * (no metadata.name). */
int k8s_pod_parse(const cJSON *pod, struct k8s_pod_state *st);

/* What the backend knows of one node between the pod's changes. */
struct k8s_pod_track {
	bool started, ended;
	bool removing;                  /* sched_remove asked for it */
	bool deleting;                  /* seen with a deletionTimestamp */
	char node_name[SCHED_NAME_MAX]; /* the node it was last seen on */
	int64_t unsched_since_ms;       /* first seen Unschedulable, 0 not */
};

/* The events a change of the node's pod means, in order, at most 2 (a
 * container seen first after it ended still gets STARTED before EXITED).
 * st NULL: the pod is gone (deleted, or missing from a re-list).  Each
 * STARTED, EXITED, OOM and FAILED comes once per node however often the
 * same state is seen again (a re-list, a watch re-sent): *t remembers.
 * Unschedulable longer than max_pending_ms (0: forever) is FAILED with
 * -ENOSPC and the scheduler's message.  A pod deleted by someone else (a
 * deletionTimestamp or its disappearance while remove was not asked) ends
 * as EXITED with lost set: its program did not fail.  So does an evicted
 * pod (a node under pressure, the Eviction API, a preemption, a taint),
 * even one evicted before it ran.  Events name the node
 * the pod was last seen on.  Returns the number of events. */
int k8s_pod_events(struct k8s_pod_track *t, const struct k8s_pod_state *st, const char *instance,
		   int64_t now_ms, int64_t max_pending_ms, struct sched_event *out);

#endif
