/*
 * standin.h: the Kubernetes stand-in API server's shared state.
 *
 * One process plays an API server (HTTP on 127.0.0.1, the core v1 JSON for
 * pods, events and nodes, list and watch with resource versions), a
 * scheduler (fake nodes with CPU and memory) and a kubelet (each placed
 * pod's first container runs as a local process in a memory cgroup).  It is
 * a test program: tests of Kubernetes clients (rover-master's k8s backend)
 * and kubectl itself drive it.
 *
 * Threads: libmicrohttpd runs a thread per connection (a watch blocks in its
 * own); the main thread runs the scheduler and the kubelet (loop.c).  All
 * state is in one struct standin guarded by its mutex; `changed` is
 * broadcast whenever an event enters the history.  Stored objects are cJSON
 * trees owned by their struct obj; the history holds its own copies.
 */
#ifndef STANDIN_H
#define STANDIN_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "proc.h"

/* The built-in kinds; a CustomResourceDefinition adds one after them (up to
 * KIND_MAX in all, store_kind_register). */
enum kind {
	KIND_POD,
	KIND_EVENT,
	KIND_NODE,
	KIND_NAMESPACE,
	KIND_SERVICE,
	KIND_LEASE,
	KIND_CRD,
	/* stored as they are, nothing acts on them: what Rover's manifests
	 * (docker/k8s/) hold besides the kinds above */
	KIND_SERVICEACCOUNT,
	KIND_SECRET,
	KIND_CONFIGMAP,
	KIND_DEPLOYMENT,
	KIND_STATEFULSET,
	KIND_DAEMONSET,
	KIND_ROLE,
	KIND_ROLEBINDING,
	KIND_CLUSTERROLE,
	KIND_CLUSTERROLEBINDING,
	KIND_VAP,  /* ValidatingAdmissionPolicy: stored, not evaluated */
	KIND_VAPB, /* ValidatingAdmissionPolicyBinding */
	/* claims are Bound at once to a host folder (volume.c) */
	KIND_PVC,
	KIND_BUILTIN
};
#define KIND_MAX 32

/* A stored object.  Pods carry the kubelet's state of their process. */
struct obj {
	enum kind kind;
	char ns[64]; /* "" for cluster-scoped kinds */
	char name[254];
	char uid[40];
	cJSON *j; /* the object as served, without kind/apiVersion */
	int64_t rv;
	/* kubelet, pods only */
	bool started; /* a process was started (or could not be) */
	bool running; /* proc holds a live process */
	struct rv_proc proc;
	char cg[512];        /* the pod's memory cgroup folder, "" when none */
	int64_t mem_limit;   /* bytes in the cgroup, 0: none */
	char cid[32];        /* containerID of the last start, "standin://PID" */
	double term_at;      /* SIGTERM sent at (monotonic s), 0: not yet */
	double kill_at;      /* SIGKILL due at (monotonic s) */
	double restart_at;   /* restartPolicy Always/OnFailure: start again then */
	char sched_msg[256]; /* the last Unschedulable message given */
	struct obj *next;
};

/* One change, as a watch sends it.  obj is a copy taken at the change. */
struct hist {
	int64_t rv;
	enum kind kind;
	char type[10]; /* ADDED, MODIFIED, DELETED */
	cJSON *obj;    /* with kind and apiVersion */
};

struct node_load {
	int64_t cpu_m; /* millicores requested by the node's pods */
	int64_t mem_b; /* bytes */
	int pods;
};

struct standin_opts {
	int port;
	const char *port_file;
	const char *dir; /* pod logs, working folders */
	int nodes;
	int64_t node_cpu_m;
	int64_t node_mem_b;
	int node_pods;
	int history; /* events kept for watches */
	int bookmark_ms;
	bool resize;           /* serve pods/resize */
	bool cgroups;          /* memory cgroups for pods */
	bool cgroup_systemd;   /* name them as the systemd cgroup driver does */
	const char *scheduler; /* the schedulerName this scheduler serves */
	const char *audit_log; /* each API request appended there, NULL none */
	int max_events;        /* Event objects kept */
};

struct standin {
	struct standin_opts o;
	pthread_mutex_t mu;
	pthread_cond_t changed;
	int64_t rv;       /* the last resource version given */
	struct obj *objs; /* every object, newest first */
	/* One ring of o.history changes per kind, as the API server keeps a
	 * watch cache per resource: Events do not push pods out. */
	struct hist *hist[KIND_MAX];
	int hist_n[KIND_MAX], hist_head[KIND_MAX]; /* count, index of the oldest */
	int64_t hist_floor[KIND_MAX];              /* a watch from below this gets 410 */
	/* faults */
	int fault_expire;   /* the next N watches get 410 */
	int fault_cut;      /* generation: watches opened before it end */
	bool fault_cut_mid; /* the cut leaves half an event */
	int fault_delay_ms; /* every reply waits this long */
	int audit_fd;       /* o.audit_log open for appending, -1 none */
	char cg_base[400];  /* our memory cgroup folder for pods, "" when none */
	char cg_pods[420];  /* cg_base/kubepods (.slice with systemd), where pods go */
	double started_s;   /* monotonic start */
	volatile sig_atomic_t stop;
	int kick; /* the loop has work (guarded by mu) */
};

/* ---- store.c (callers hold s->mu unless said) ---- */
const char *store_kind_name(enum kind k);        /* "Pod" */
const char *store_kind_resource(enum kind k);    /* "pods" */
const char *store_kind_group(enum kind k);       /* "" (core), "coordination.k8s.io" */
const char *store_kind_version(enum kind k);     /* "v1", "v1alpha1" */
const char *store_kind_api_version(enum kind k); /* "v1", "elastic.rover.dev/v1alpha1" */
const char *store_kind_short(enum kind k);       /* "po", NULL when none */
/* The kind served at group/version/resource; -1 when none (or no longer). */
int store_kind_from_resource(const char *group, const char *version, const char *res);
bool store_kind_namespaced(enum kind k);
bool store_kind_status_sub(enum kind k); /* a status subresource: the main path keeps status */
int store_nkinds(void);                  /* kinds so far (built-in ones first) */
bool store_kind_served(enum kind k);
/* A CustomResourceDefinition's schema (its served version's openAPIV3Schema)
 * and printer columns, borrowed while s->mu is held; NULL when none. */
const cJSON *store_kind_schema(enum kind k);
const cJSON *store_kind_columns(enum kind k);
/* Serve (or serve again, with a new schema) the kind a stored
 * CustomResourceDefinition describes; unserve it (stored = NULL, name).
 * Returns the kind, or -EINVAL with *why naming the bad field. */
int store_kind_register(const cJSON *crd, const char **why);
void store_kind_unregister(const char *crd_name);
void store_init(struct standin *s);
void store_release(struct standin *s);
struct obj *store_find(struct standin *s, enum kind k, const char *ns, const char *name);
struct obj *store_find_uid(struct standin *s, const char *uid);
/* Give obj->j a new resource version, record the change, wake watches. */
void store_touch(struct standin *s, struct obj *o, const char *type);
/* Insert a new object (takes j): sets uid, creationTimestamp, rv. */
struct obj *store_add(struct standin *s, enum kind k, const char *ns, const char *name, cJSON *j);
/* Unlink and free o, recording DELETED. */
void store_remove(struct standin *s, struct obj *o);
/* A copy of o as served (with kind and apiVersion); caller frees. */
cJSON *store_served(const struct obj *o);
/* Drop the oldest Event objects past o.max_events (from the main loop
 * only: callers of store_event may be walking the list). */
void store_prune_events(struct standin *s);
/* Record an Event about o (Normal or Warning). */
void store_event(struct standin *s, const struct obj *about, const char *type, const char *reason,
		 const char *component, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The index in kind k's history of the first change after rv; -1 when
 * none yet, -2 when rv is older than the history. */
int store_hist_after(struct standin *s, enum kind k, int64_t rv);
/* i from store_hist_after; NULL past the end. */
const struct hist *store_hist_at(struct standin *s, enum kind k, int i);
void store_compact(struct standin *s); /* forget the history */
/* A deletion of o held by metadata.finalizers (any kind but a pod): true
 * when it has some, o then marked with deletionTimestamp and kept until an
 * update empties them (store_finalized). */
bool store_finalizing(struct standin *s, struct obj *o);
/* After an update of o: a deleted o whose finalizers are all gone goes
 * (true: o was freed). */
bool store_finalized(struct standin *s, struct obj *o);
/* Cascade: delete (or orphan) what names uid in its ownerReferences. */
void store_cascade(struct standin *s, const char *uid, bool orphan);
void store_now_rfc3339(char *out, size_t size);
double store_mono_s(void);

/* ---- select.c: label and field selectors (pure) ---- */
/* 0 when sel parses, -EINVAL with *why set otherwise. */
int select_check_labels(const char *sel, const char **why);
int select_check_fields(const char *sel, const char **why);
bool select_labels(const char *sel, const cJSON *obj);
bool select_fields(const char *sel, const cJSON *obj);

/* ---- quantity.c (pure) ---- */
/* A Kubernetes quantity ("500m", "2", "3Gi", "1e3") scaled by 1000 when
 * milli (CPU in millicores) or as is (bytes).  0 or -EINVAL. */
int quantity_parse(const char *s, bool milli, int64_t *out);
/* The pod's requests summed over its containers (limits when a request is
 * absent, as the API server defaults them). */
void quantity_pod_requests(const cJSON *pod, int64_t *cpu_m, int64_t *mem_b);
/* The first container's memory limit in bytes, 0 when none. */
int64_t quantity_pod_mem_limit(const cJSON *pod);

/* ---- patch.c (pure) ---- */
/* Apply a JSON merge patch (RFC 7386) to target in place. */
void patch_merge(cJSON *target, const cJSON *patch);
/* Apply a JSON patch (RFC 6902: add, remove, replace, test); 0 or -EINVAL. */
int patch_json(cJSON *target, const cJSON *ops, const char **why);
/* Strategic merge patch for the fields clients patch: maps merge as in a
 * merge patch; lists of containers merge by name; other lists replace. */
void patch_strategic(cJSON *target, const cJSON *patch);

/* ---- schema.c: a custom object checked against its CRD's schema (pure) ---- */
/* 0, or -EINVAL with the field path ("spec.replicaSpecs.worker.replicas")
 * in field and the reason in why, as the API server words them. */
int schema_check(const cJSON *schema, const cJSON *obj, char *field, size_t fsize, char *why,
		 size_t wsize);
/* The subset of a CRD the stand-in needs: 0 or -EINVAL with *why. */
int schema_crd_ok(const cJSON *crd, const char **why);

/* ---- table.c: the Table kubectl asks for ---- */
/* A meta.k8s.io/v1 Table of items (served objects, borrowed); columns when
 * with_columns; row objects whole when include_object, else metadata. */
cJSON *table_of(enum kind k, cJSON *const *items, int n, bool with_columns, bool include_object);

/* ---- sched.c ---- */
/* Place Pending pods on nodes (or mark them Unschedulable). */
void sched_run(struct standin *s);
void sched_node_load(struct standin *s, const char *node, struct node_load *out);

/* ---- kubelet.c ---- */
int kubelet_init(struct standin *s, char *why, size_t wsize);
void kubelet_run(struct standin *s);                         /* start, watch, stop pod processes */
void kubelet_node_down(struct standin *s, const char *node); /* its pods Failed */
/* The pod evicted as a kubelet under node pressure does it: its process
 * killed, phase Failed, reason Evicted, message msg, the condition
 * DisruptionTarget (TerminationByKubelet), an Evicted event. */
void kubelet_evict(struct standin *s, struct obj *pod, const char *msg);
void kubelet_stop_all(struct standin *s);
/* Start a pod's graceful deletion: deletionTimestamp now + grace_s (< 0:
 * the pod's terminationGracePeriodSeconds), SIGTERM, SIGKILL at the end;
 * the pod object goes once its process is gone. */
void kubelet_mark_deleting(struct standin *s, struct obj *pod, int64_t grace_s);
void kubelet_release(struct standin *s);
/* The log file of a pod's container, into out; 0 or -ENOENT. */
int kubelet_log_path(struct standin *s, const struct obj *pod, const char *container, char *out,
		     size_t size);
/* After a pods/resize: the pod's cgroup gets its new memory limit when the
 * node has room (status then shows the new resources), else the pod gets
 * the condition PodResizePending (Infeasible). */
void kubelet_resize(struct standin *s, struct obj *pod);
/* SIGKILL a pod's process now and reap it (a forced deletion). */
void kubelet_kill_now(struct standin *s, struct obj *pod);
/* Set the pod condition type to status ("True"), reason and msg optional. */
void kubelet_condition(struct obj *pod, const char *type, const char *status, const char *reason,
		       const char *msg);

/* ---- volume.c: PersistentVolumeClaims ---- */
/* A new claim's defaults and status: Bound, its capacity the request. */
void volume_claim_defaults(cJSON *pvc);
/* The claim stored: its host folder made (DIR/volumes/<uid>). */
void volume_claim_bound(struct standin *s, struct obj *pvc);
/* The claim deleted: its folder and everything in it removed. */
void volume_claim_release(struct standin *s, const struct obj *pvc);
/* -ENOENT (why filled) when a volume of pod names a claim that is not
 * there, else 0. */
int volume_missing_claim(struct standin *s, const struct obj *pod, char *why, size_t wsize);
/* Each env value ("K=V", NULL ended) and argument starting with the
 * mountPath of a claim the container mounts starts with the claim's
 * folder instead (the stand-in has no mount namespace). */
void volume_map(struct standin *s, const struct obj *pod, const cJSON *container, char **env,
		char **argv);

/* ---- api.c: HTTP, routing, discovery, errors, the admin endpoints ---- */
struct MHD_Daemon;
struct MHD_Connection;
struct MHD_Response;
/* One request, as the handlers see it (everything borrowed). */
struct call {
	struct standin *s;
	struct MHD_Connection *c;
	const char *method;
	enum kind kind;
	const char *ns;   /* NULL: every namespace (or a cluster-scoped kind) */
	const char *name; /* NULL for a collection */
	const char *sub;  /* "status", "log", "resize" or NULL */
	const char *body;
	size_t len;
	bool table;        /* Accept asks for a meta.k8s.io Table */
	bool table_object; /* includeObject=Object */
};
/* A reply: a JSON (or text) body, or a streaming response. */
struct reply {
	int status;
	char *body;        /* malloc'd */
	const char *ctype; /* NULL: application/json */
	struct MHD_Response *stream;
};
struct MHD_Daemon *api_start(struct standin *s, int *port);
void api_stop(struct MHD_Daemon *d);
const char *api_query(const struct call *c, const char *key); /* NULL when absent */
/* A Status reply (kind Status, reason, code, details). */
/* A Status "Failure" object (kind, apiVersion, metadata, status, message,
 * reason; the caller adds details and code); the caller owns it. */
cJSON *api_failure(const char *reason, const char *msg);
void api_status(struct reply *r, int code, const char *reason, const struct call *c,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void api_json(struct reply *r, int code, cJSON *j); /* takes j */

/* ---- admin.c: /standin/... fault injection ---- */
void admin_handle(struct standin *s, const struct call *c, char **seg, int n, struct reply *r);

/* ---- objects.c: get, list, create, update, patch, delete ---- */
void objects_handle(const struct call *c, struct reply *r);

/* ---- watch.c: watch streams and pod logs ---- */
void watch_start(const struct call *c, struct reply *r);
void watch_log(const struct call *c, struct reply *r);

#endif
