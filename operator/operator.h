/*
 * operator.h: rover-operator's state and configuration (one struct, the
 * main thread's), and the actions of one reconcile pass (operator.c):
 * the master pod and Service made for a job, the calls that apply a
 * reconcile_out.
 */
#ifndef OPERATOR_H
#define OPERATOR_H

#include <limits.h>
#include <stdatomic.h>

#include "kube.h"
#include "lease.h"
#include "reconcile.h"

/* On the worker pods (through the job's pod templates): the job they are
 * for, by name and by uid (a job made again under the same name is
 * another job: the sweep goes by the uid). */
#define OPERATOR_LABEL_OWNER     "elastic.rover.dev/owner"
#define OPERATOR_LABEL_OWNER_UID "elastic.rover.dev/owner-uid"
/* A job's own service account, role binding (per job: a validating
 * admission policy reads the job from the name) and state volume. */
#define OPERATOR_SA_PREFIX       "rover-master-"
#define OPERATOR_STATE_SUFFIX    "-master-state"
#define OPERATOR_STATE_VOLUME    "state"

struct operator_cfg {
	char kubeconfig[PATH_MAX];
	char namespace_[64]; /* "" every namespace */
	long long timeout_ms;
	char lease_name[128], lease_namespace[64], lease_id[128];
	long long lease_duration_s, lease_renew_ms;
	char master_image[256], master_command[PATH_MAX];
	char master_service_account[128]; /* "" each job its own, OPERATOR_SA_PREFIX JOB */
	char master_cluster_role[128];    /* what a job's own service account is bound to */
	char master_kubeconfig[PATH_MAX]; /* "" in-cluster (its service account) */
	char master_state_root[PATH_MAX]; /* "" a PersistentVolumeClaim per job */
	char master_state_mount[PATH_MAX]; /* where the claim is mounted: the --state-dir */
	char master_state_size[32], master_state_class[128]; /* the claim's defaults */
	char master_addr_host[256];       /* "" the Service's DNS name */
	char master_args[1024];           /* extra flags, space separated */
	long long master_port, master_max_restarts, master_poll_ms;
	char listen[128]; /* /healthz and /metrics */
	char log_level[16];
};

struct operator_state {
	struct operator_cfg cfg;
	struct kube k;
	struct lease lease;
	struct kube_watcher *jobs, *masters, *services, *workers;
	struct rv_http_server *http;
	atomic_uint_least64_t passes, creates, conflicts; /* for the log and /metrics */
	atomic_bool leader;
	cJSON *polled; /* "ns/name" -> when its master was last asked for its plan (ms) */
	atomic_int polled_n; /* its entries, after each pass (jobs gone are pruned) */
};

/* The master pod of job (ownerReferences naming it, labels, the job spec in
 * its env, --scheduler k8s); the caller cJSON_Deletes it. */
cJSON *operator_master_pod(const struct operator_cfg *cfg, const cJSON *job);
/* The master's Service (port master_port, selecting the master pod). */
cJSON *operator_service(const struct operator_cfg *cfg, const cJSON *job);
/* The job's own service account and its RoleBinding to
 * master_cluster_role (with master_service_account ""). */
cJSON *operator_service_account(const struct operator_cfg *cfg, const cJSON *job);
cJSON *operator_role_binding(const struct operator_cfg *cfg, const cJSON *job);
/* The master's state volume, JOB-master-state: spec.masterState's
 * storageClassName and size, else master_state_class and _size (with
 * master_state_root "": else no claim). */
cJSON *operator_state_claim(const struct operator_cfg *cfg, const cJSON *job);

/* One pass over every job seen (the leader only). */
void operator_pass(struct operator_state *op);

/* serve.c: /healthz and /metrics on cfg.listen.  0 or a negative errno. */
int operator_serve_start(struct operator_state *op, struct rv_err *err);
void operator_serve_stop(struct operator_state *op);

#endif
