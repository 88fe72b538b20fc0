/*
 * main.c: rover-operator's entry point: configuration (one table drives
 * flags, environment, the conf file and --help), the watchers, leader
 * election, and the loop: while this replica holds the Lease, a reconcile
 * pass after every change a watcher saw and at least every second.
 * SIGTERM or SIGINT: the Lease is given up and the operator exits 0.
 */
#include <errno.h>
#include <gsl/gsl_errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfg.h"
#include "cleanup.h"
#include "json.h"
#include "daemon.h"
#include "http.h"
#include "log.h"
#include "operator.h"
#include "parse.h"
#include "version.h"

#define OPT(...) RV_CFG_OPT(struct operator_cfg, __VA_ARGS__)

static const struct rv_cfg_opt operator_opts[] = {
	OPT("k8s", "kubeconfig", "kubeconfig", RV_CFG_STR, kubeconfig, "", 0, 0, 0,
	    "kubeconfig of the API server; empty: $KUBECONFIG, else in-cluster, else "
	    "~/.kube/config"),
	OPT("k8s", "namespace", "namespace", RV_CFG_STR, namespace_, "", 0, 0, 0,
	    "the namespace whose ElasticJobs this operator runs; empty: every namespace"),
	OPT("k8s", "timeout_ms", NULL, RV_CFG_INT, timeout_ms, "10000", 100, 600000, 0,
	    "timeout of each call to the API server (a watch has its own), ms"),
	OPT("lease", "name", "lease-name", RV_CFG_STR, lease_name, "rover-operator", 0, 0, 0,
	    "the Lease the replicas elect a leader with"),
	OPT("lease", "namespace", "lease-namespace", RV_CFG_STR, lease_namespace, "default", 0, 0,
	    0, "namespace of the Lease"),
	OPT("lease", "id", "lease-id", RV_CFG_STR, lease_id, "", 0, 0, 0,
	    "this replica's identity in the Lease; empty: hostname_pid"),
	OPT("lease", "duration_s", "lease-duration-s", RV_CFG_INT, lease_duration_s, "15", 1, 3600,
	    0,
	    "a Lease not renewed this long is taken over; a leader that could not renew it "
	    "this long stops acting, seconds"),
	OPT("lease", "renew_ms", "lease-renew-ms", RV_CFG_INT, lease_renew_ms, "2000", 100, 600000,
	    0, "how often the leader renews (and a follower looks), ms"),
	OPT("master", "image", "master-image", RV_CFG_STR, master_image, "rover-master", 0, 0, 0,
	    "image of the master pod"),
	OPT("master", "command", "master-command", RV_CFG_STR, master_command, "rover-master", 0, 0,
	    0, "rover-master's path in that image"),
	OPT("master", "service_account", "master-service-account", RV_CFG_STR,
	    master_service_account, "", 0, 0, 0,
	    "one service account for every master pod; empty: each job its own, "
	    "rover-master-JOB, bound to master.cluster_role in the job's namespace (the "
	    "admission policy of docker/k8s lets it touch only its job's pods)"),
	OPT("master", "cluster_role", "master-cluster-role", RV_CFG_STR, master_cluster_role,
	    "rover-master", 0, 0, 0, "the ClusterRole a job's own service account is bound to"),
	OPT("master", "kubeconfig", "master-kubeconfig", RV_CFG_STR, master_kubeconfig, "", 0, 0, 0,
	    "a kubeconfig path the master reads; empty: in-cluster (its service account)"),
	OPT("master", "state_root", "master-state-root", RV_CFG_STR, master_state_root, "", 0, 0, 0,
	    "the master's --state-dir is ROOT/NAMESPACE/JOB-UID (a folder every master pod sees); "
	    "empty: a PersistentVolumeClaim per job, JOB-master-state, owned by the job"),
	OPT("master", "state_mount", "master-state-mount", RV_CFG_STR, master_state_mount,
	    "/var/lib/rover-master", 0, 0, 0,
	    "where the master pod mounts its job's claim: its --state-dir"),
	OPT("master", "state_size", "master-state-size", RV_CFG_STR, master_state_size, "1Gi", 0, 0,
	    0, "the claim's size unless spec.masterState.size says"),
	OPT("master", "state_class", "master-state-class", RV_CFG_STR, master_state_class, "", 0, 0,
	    0,
	    "the claim's storage class unless spec.masterState.storageClassName says; empty: "
	    "the cluster's default"),
	OPT("master", "addr_host", "master-addr-host", RV_CFG_STR, master_addr_host, "", 0, 0, 0,
	    "host the worker pods reach the master at; empty: the job's Service, "
	    "JOB-master.NAMESPACE.svc"),
	OPT("master", "port", "master-port", RV_CFG_INT, master_port, "50001", 1, 65535, 0,
	    "the master's API port (its pod's and its Service's)"),
	OPT("master", "args", "master-args", RV_CFG_STR, master_args, "", 0, 0, 0,
	    "more rover-master flags, space separated (\"--linger-s 1\")"),
	OPT("master", "max_restarts", "master-max-restarts", RV_CFG_INT, master_max_restarts, "3",
	    0, 1000, 0,
	    "master pods that ended without a verdict made again before the job "
	    "fails"),
	OPT("master", "poll_ms", "master-poll-ms", RV_CFG_INT, master_poll_ms, "10000", 0, 3600000,
	    0,
	    "how often a running job's master is asked for its newest plan (status.lastPlan, an "
	    "Event), ms; 0: never"),
	OPT("server", "listen", "listen", RV_CFG_STR, listen, "127.0.0.1:9103", 0, 0, 0,
	    "HOST:PORT of /healthz and /metrics (port 0: any free one, printed)"),
	RV_DAEMON_OPT_LOG_LEVEL(struct operator_cfg),
};

static const char usage[] = "rover-operator [--kubeconfig FILE] [--namespace NS] [options]";
static const char summary[] =
	"Rover's Kubernetes controller: for each ElasticJob (elastic.rover.dev/v1alpha1) one\n"
	"master pod (rover-master --scheduler k8s, which makes the worker pods) and one\n"
	"Service, owned by the job; the job's status kept current; spec.suspend honoured.\n"
	"Replicas elect one leader through a Lease.\n";

/* A signal waiting: true when SIGTERM or SIGINT came. */
static bool operator_signalled(const sigset_t *sigs)
{
	struct timespec zero = { 0, 0 };
	return sigtimedwait(sigs, NULL, &zero) > 0;
}

static int operator_watch(struct operator_state *op, struct rv_err *err)
{
	char p[4][400], ns[100] = "";
	if (op->cfg.namespace_[0])
		snprintf(ns, sizeof(ns), "/namespaces/%s", op->cfg.namespace_);
	snprintf(p[0], sizeof(p[0]), "/apis/elastic.rover.dev/v1alpha1%s/elasticjobs", ns);
	snprintf(p[1], sizeof(p[1]), "/api/v1%s/pods?labelSelector=elastic.rover.dev%%2Fjob", ns);
	snprintf(p[2], sizeof(p[2]), "/api/v1%s/services?labelSelector=elastic.rover.dev%%2Fjob",
		 ns);
	snprintf(p[3], sizeof(p[3]), "/api/v1%s/pods?labelSelector=rover.dev%%2Fjob", ns);
	op->jobs = kube_watch(&op->k, p[0]);
	op->masters = kube_watch(&op->k, p[1]);
	op->services = kube_watch(&op->k, p[2]);
	op->workers = kube_watch(&op->k, p[3]);
	if (!op->jobs || !op->masters || !op->services || !op->workers)
		return rv_err_set(err, -ENOMEM, "", "could not start the watchers");
	return 0;
}

static void operator_loop(struct operator_state *op, const sigset_t *sigs)
{
	uint64_t seen = 0;
	int64_t next_lease = 0;
	bool leader = false;
	while (!operator_signalled(sigs)) {
		int64_t now = rv_mono_ms();
		if (now >= next_lease) {
			leader = lease_tick(&op->lease, now) == 1;
			atomic_store(&op->leader, leader);
			next_lease = now + op->cfg.lease_renew_ms;
		}
		if (leader)
			operator_pass(op);
		int wait = (int)(next_lease - rv_mono_ms());
		kube_wait(&op->k, &seen, wait < 1000 ? (wait > 0 ? wait : 1) : 1000);
	}
}

static int run(int argc, char **argv)
{
	static const struct rv_daemon d =
		RV_DAEMON_INIT("rover-operator", "operator", operator_opts, usage, summary);
	int rc;
	struct operator_state *op = rv_daemon_new(&d, sizeof(*op),
						  offsetof(struct operator_state, cfg), argc, argv,
						  &rc);
	if (!op)
		return rc;
	gsl_set_error_handler_off();
	if (!op->cfg.lease_id[0]) {
		char host[64] = "";
		gethostname(host, sizeof(host) - 1);
		snprintf(op->cfg.lease_id, sizeof(op->cfg.lease_id), "%.64s_%d", host,
			 (int)getpid());
	}
	rv_daemon_log_config(&d, &op->cfg);
	sigset_t sigs;
	rv_daemon_block_signals(&sigs);
	struct rv_err err = { 0 };
	char q[600];
	rc = kube_init(&op->k, op->cfg.kubeconfig, (long)op->cfg.timeout_ms, &err);
	if (rc < 0) {
		rv_log_error("could not read the kubeconfig", "reason=%s",
			     rv_log_q(q, sizeof(q), err.msg));
		free(op);
		return rc;
	}
	lease_init(&op->lease, &op->k, op->cfg.lease_namespace, op->cfg.lease_name,
		   op->cfg.lease_id, (int)op->cfg.lease_duration_s);
	rc = operator_watch(op, &err);
	if (rc == 0)
		rc = operator_serve_start(op, &err);
	if (rc == 0) {
		rv_daemon_print_listening(op->cfg.listen, rv_http_server_port(op->http));
		rv_log_info("rover-operator ready", "server=%s id=%s version=%s", op->k.conf.server,
			    op->cfg.lease_id, ROVER_VERSION);
		operator_loop(op, &sigs);
		rv_log_info("shutting down", "passes=%lld creates=%lld conflicts=%lld",
			    (long long)op->passes, (long long)op->creates,
			    (long long)op->conflicts);
		lease_release(&op->lease);
		operator_serve_stop(op);
	} else {
		rv_log_error("could not start", "reason=%s", rv_log_q(q, sizeof(q), err.msg));
	}
	kube_release(&op->k);
	cJSON_Delete(op->polled);
	free(op);
	return rc;
}

int main(int argc, char **argv)
{
	int rc = run(argc, argv);
	return rc < 0 ? 1 : 0;
}
