/*
 * main.c: rover-monitor's entry point: configuration, wiring, signals.
 *
 * run() loads the config, opens the source (the host, or with --k8s the
 * node a DaemonSet pod runs on: source_k8s.c), starts the sampler and sender
 * (report.c) and the /metrics and /healthz server (serve.c), then waits for
 * SIGINT/SIGTERM, stops the server, and gives the sender one last try at
 * the backlog.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfg.h"
#include "cleanup.h"
#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "monitor.h"
#include "usage.h"
#include "version.h"

#define OPT(...) RV_CFG_OPT(struct monitor_cfg, __VA_ARGS__)

static const struct rv_cfg_opt monitor_opts[] = {
	OPT("server", "listen", "listen", RV_CFG_STR, listen, "127.0.0.1:9102", 0, 0, 0,
	    "address and port of /metrics and /healthz (HOST:PORT; port 0 picks a free one)"),
	OPT("brain", "url", "brain", RV_CFG_STR, brain, "http://127.0.0.1:8080", 0, 0, 0,
	    "rover-brain's url, where the samples go"),
	OPT("brain", "token", "token", RV_CFG_STR, token, "", 0, 0, RV_CFG_SECRET,
	    "bearer token for rover-brain (empty: none)"),
	OPT("brain", "timeout_ms", NULL, RV_CFG_INT, timeout_ms, "5000", 100, 600000, 0,
	    "timeout of each report to the brain, ms"),
	OPT("sample", "node", "node", RV_CFG_STR, node, "", 0, 0, 0,
	    "this node's name in the reports (empty: the host name)"),
	OPT("sample", "interval_ms", "interval-ms", RV_CFG_INT, interval_ms, "5000", 100, 3600000,
	    0, "how often the node is sampled, ms"),
	OPT("sample", "gpu_interval_s", NULL, RV_CFG_INT, gpu_interval_s, "60", 0, 86400, 0,
	    "how often GPUs are probed through rover-gpuinfo, seconds (0: never)"),
	OPT("report", "interval_ms", "report-interval-ms", RV_CFG_INT, report_interval_ms, "10000",
	    100, 3600000, 0,
	    "a report goes to the brain at least this often when samples wait, ms"),
	OPT("report", "batch_max", NULL, RV_CFG_INT, batch_max, "256", 1, 4096, 0,
	    "samples per report (a full batch goes at once)"),
	OPT("report", "buffer_max", "buffer-max", RV_CFG_INT, buffer_max, "8640", 1, 1000000, 0,
	    "samples kept while the brain is down; beyond it the oldest are dropped and counted"),
	OPT("source", "kubernetes", "k8s", RV_CFG_BOOL, k8s, "false", 0, 0, 0,
	    "run as a DaemonSet: capacity from this node's Node object, per-job usage from its "
	    "pods' cgroups mapped to pods through the Kubernetes API (needs sample.node: the "
	    "Node's name)"),
	OPT("source", "kubeconfig", "kubeconfig", RV_CFG_STR, kubeconfig, "", 0, 0, 0,
	    "with --k8s: the kubeconfig file (empty: $KUBECONFIG, else in-cluster, else "
	    "~/.kube/config)"),
	OPT("source", "cgroup_root", "cgroup-root", RV_CFG_STR, cgroup_root, "/sys/fs/cgroup", 0, 0,
	    0,
	    "with --k8s: where the node's pod cgroups are (the cgroup v2 mount, the v1 mount, or "
	    "a folder of v1's memory controller; in a DaemonSet the host's, mounted)"),
	RV_DAEMON_OPT_LOG_LEVEL(struct monitor_cfg),
};

static const char usage[] = "rover-monitor [--brain URL] [--token T] [--node NAME] "
			    "[--interval-ms MS] [--listen HOST:PORT] [--config FILE] "
			    "[--k8s [--kubeconfig FILE] [--cgroup-root DIR]]";
static const char summary[] =
	"Rover's node monitor: samples this host (CPU, memory, PSI pressure, CPU\n"
	"throttling of job cgroups, the processes of Rover jobs, GPUs) and reports\n"
	"to rover-brain in batches, which plans cluster capacity from them.  While\n"
	"the brain is down it buffers up to report.buffer_max samples and catches\n"
	"up later; nothing is stored twice.  Serves /metrics and /healthz.\n"
	"Print the full conf file with --print-conf.";

/* The host name, made a valid node name ([A-Za-z0-9._-], 1..127). */
static void default_node(char *out, size_t size)
{
	char h[256] = "";
	if (gethostname(h, sizeof(h) - 1) < 0 || !h[0])
		snprintf(h, sizeof(h), "localhost");
	for (char *p = h; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
			*p = '-';
	snprintf(out, size, "%.127s", h);
}

static int run(int argc, char **argv)
{
	static const struct rv_daemon d =
		RV_DAEMON_INIT("rover-monitor", "monitor", monitor_opts, usage, summary);
	struct rv_err err = { 0 };
	int rc;
	struct monitor *m =
		rv_daemon_new(&d, sizeof(*m), offsetof(struct monitor, cfg), argc, argv, &rc);
	if (!m)
		return rc < 0 ? 1 : 0;
	if (!m->cfg.node[0])
		default_node(m->cfg.node, sizeof(m->cfg.node));
	rv_daemon_log_config(&d, &m->cfg);

	sigset_t sigs;
	rv_daemon_block_signals(&sigs);
	pthread_mutex_init(&m->lock, NULL);
	rv_cond_init_mono(&m->wake);

	char q[600];
	int code = 1;
	m->src = m->cfg.k8s ? &source_k8s : &source_host;
	rc = m->src->open(&m->cfg, &m->src_state, &err);
	if (rc < 0) {
		rv_log_error("could not open the source", "source=%s reason=%s", m->src->name,
			     rv_log_q(q, sizeof(q), err.msg));
		goto out;
	}
	m->src->stats(m->src_state, &m->stats);
	rc = report_start(m);
	if (rc < 0) {
		rv_log_error("could not start the sampler", "errno=%d", -rc);
		goto out;
	}
	rc = serve_start(m, &err);
	if (rc < 0) {
		rv_log_error("could not start the HTTP server", "reason=%s",
			     rv_log_q(q, sizeof(q), err.msg));
		goto out;
	}
	rv_log_info("rover-monitor ready",
		    "listen=%s port=%d node=%s source=%s cgroup=%s gpus=%d "
		    "brain=%s version=%s",
		    m->cfg.listen, rv_http_server_port(m->http), m->cfg.node, m->src->name,
		    rv_cgroup_mode_name(m->stats.cgroup_mode), m->stats.gpus, m->cfg.brain,
		    ROVER_VERSION);
	rv_daemon_print_listening(m->cfg.listen, rv_http_server_port(m->http));
	int sig = rv_daemon_wait(&sigs);
	rv_log_info("shutting down", "signal=%d", sig);
	code = 0;
out:
	serve_stop(m);
	report_stop(m);
	if (code == 0)
		rv_log_info("stopped", "samples=%llu sent=%llu dropped=%llu unsent=%ld",
			    (unsigned long long)atomic_load(&m->samples),
			    (unsigned long long)atomic_load(&m->samples_sent),
			    (unsigned long long)atomic_load(&m->dropped), m->unsent);
	if (m->src_state)
		m->src->close(m->src_state);
	pthread_cond_destroy(&m->wake);
	pthread_mutex_destroy(&m->lock);
	free(m);
	return code;
}

int main(int argc, char **argv)
{
	return run(argc, argv);
}
