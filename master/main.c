/*
 * main.c: rover-master's entry point: configuration, the job spec, wiring,
 * signals.
 *
 * run() loads the config (master_opts[] drives parsing, --help,
 * --print-conf and conf/rover-master.conf), reads and validates the job
 * spec (exit 2 on a bad one, naming the field), restores the state from the
 * journal in --state-dir (state.c), starts the control API (api.c), then
 * waits for SIGINT/SIGTERM and stops the API, the timer thread and the
 * journal, in that order.  SIGINT/SIGTERM are blocked in every thread and
 * taken with sigwaitinfo here (common/daemon.c).
 */
#include <gsl/gsl_errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "cfg.h"
#include "cleanup.h"
#include "daemon.h"
#include "json.h"
#include "log.h"
#include "master.h"
#include "nodelink.h"
#include "nodemgr.h"
#include "parse.h"
#include "plans.h"
#include "version.h"

#define EXIT_BAD_SPEC 2

#define OPT(...) RV_CFG_OPT(struct master_cfg, __VA_ARGS__)

static const struct rv_cfg_opt master_opts[] = {
	OPT("job", "spec", "job", RV_CFG_STR, job, "", 0, 0, 0,
	    "the job spec (ElasticJob JSON file); required"),
	OPT("job", "uid", "job-uid", RV_CFG_STR, job_uid, "", 0, 0, 0,
	    "the job's uid (rover-operator sets the ElasticJob's): kept in state.dir, and a "
	    "folder kept for another uid is refused, its journal not replayed"),
	OPT("job", "linger_s", "linger-s", RV_CFG_INT, job_linger_s, "5", 0, 86400, 0,
	    "once the job ended (every node exited 0, or a node was given up) the master "
	    "answers this long more, then exits 0 (succeeded) or 1 (failed), seconds"),
	OPT("server", "listen", "listen", RV_CFG_STR, listen, "127.0.0.1:7070", 0, 0, 0,
	    "address and port of the control API (HOST:PORT; port 0 picks a free one)"),
	RV_DAEMON_OPTS_SERVER_TOKEN(struct master_cfg),
	OPT("server", "max_body_kb", NULL, RV_CFG_INT, max_body_kb, "16384", 1, 1048576, 0,
	    "largest request body accepted, KiB (413 above; a data checkpoint is the largest)"),
	OPT("server", "conn_timeout_s", NULL, RV_CFG_INT, conn_timeout_s, "120", 1, 3600, 0,
	    "idle connection timeout, seconds"),
	OPT("server", "max_conns", NULL, RV_CFG_INT, max_conns, "2048", 4, 65536, 0,
	    "most concurrent connections: agents plus workers (one thread each when "
	    "server.threads is 0)"),
	OPT("server", "threads", "threads", RV_CFG_INT, threads, "2", 0, 256, 0,
	    "threads serving every connection (epoll); a journaled write is answered by a "
	    "completer thread once durable.  0: a thread per connection instead"),
	OPT("state", "dir", "state-dir", RV_CFG_STR, state_dir, "var/master", 0, 0, 0,
	    "folder of the journal and snapshot; a restart with the same folder restores the job"),
	OPT("rdzv", "nnodes", "nnodes", RV_CFG_STR, nnodes, "", 0, 0, 0,
	    "MIN:MAX nodes in a world (or N); empty: the worker minReplicas:maxReplicas of the "
	    "spec"),
	OPT("rdzv", "node_unit", "node-unit", RV_CFG_INT, node_unit, "1", 1, 1024, 0,
	    "the world's node count is a multiple of it"),
	OPT("rdzv", "last_call_ms", NULL, RV_CFG_INT, last_call_ms, "3000", 0, 3600000, 0,
	    "once MIN nodes wait, wait this long for more before completing a round, ms "
	    "(a round with MAX waiting completes at once; 3 s covers agents started together)"),
	OPT("rdzv", "max_wait_s", NULL, RV_CFG_INT, max_wait_s, "600", 0, 604800, 0,
	    "gang wait: a round short of MIN nodes this long fails the job, seconds (0: forever)"),
	OPT("rdzv", "heartbeat_timeout_ms", NULL, RV_CFG_INT, heartbeat_timeout_ms, "5000", 1000,
	    3600000, 0, "a node silent this long is declared dead and its shards requeued, ms"),
	OPT("rdzv", "world_wait_max_ms", NULL, RV_CFG_INT, world_wait_max_ms, "30000", 0, 600000, 0,
	    "longest world long-poll a client may ask for with wait_ms=, ms"),
	OPT("shard", "doing_timeout_ms", NULL, RV_CFG_INT, doing_timeout_ms, "600000", 0, 604800000,
	    0,
	    "a shard not done this long after it was handed out is requeued unless its worker's "
	    "node is alive, ms (0: never)"),
	OPT("shard", "max_todo_ranges", NULL, RV_CFG_INT, max_todo_ranges, "65536", 1, 16777216, 0,
	    "most returned ranges a dataset keeps (and a checkpoint may hold)"),
	OPT("shard", "max_in_flight", NULL, RV_CFG_INT, max_in_flight, "65536", 1, 16777216, 0,
	    "most shards handed out and not done, all workers together"),
	OPT("shard", "seed", NULL, RV_CFG_INT, shard_seed, "0", 0, 9007199254740991.0, 0,
	    "shuffle seed of every dataset with shuffle set"),
	OPT("journal", "commit_delay_us", NULL, RV_CFG_INT, commit_delay_us, "0", 0, 100000, 0,
	    "a commit waits this long for more records before its fdatasync, us"),
	OPT("journal", "snapshot_every", NULL, RV_CFG_INT, snapshot_every, "100000", 1, 1000000000,
	    0, "take a snapshot (and start a fresh journal) after this many records"),
	OPT("journal", "sync_timeout_ms", NULL, RV_CFG_INT, sync_timeout_ms, "10000", 10, 600000, 0,
	    "a request waits this long for its record to be durable, then fails (503), ms"),
	OPT("journal", "prewrite_kb", NULL, RV_CFG_INT, prewrite_kb, "16384", 4, 1048576, 0,
	    "the journal file is kept written with zeros this far ahead of its records, so "
	    "that a commit need not grow it; also the room the journal needs to start, KiB"),
	OPT("journal", "nosync", NULL, RV_CFG_BOOL, nosync, "false", 0, 0, 0,
	    "never fsync (tests and benchmarks only: a crash of the machine loses records)"),
	OPT("netcheck", "timeout_ms", NULL, RV_CFG_INT, netcheck_timeout_ms, "30000", 1000, 3600000,
	    0, "a check member silent this long in a round counts as failed in it, ms"),
	OPT("netcheck", "straggler_ratio", NULL, RV_CFG_DOUBLE, netcheck_straggler_ratio, "2.0",
	    1.01, 100, 0, "a node slower than this times the median check time is a straggler"),
	OPT("netcheck", "straggler_wait", NULL, RV_CFG_DOUBLE, netcheck_straggler_wait, "2.0", 0.1,
	    1000, 0,
	    "once half the others reported a round, the rest get this times the median "
	    "reported time more (at least straggler_wait_min_ms); then they are late"),
	OPT("netcheck", "straggler_wait_min_ms", NULL, RV_CFG_INT, netcheck_straggler_wait_min_ms,
	    "1000", 0, 3600000, 0, "the least a round waits for its last members, ms"),
	OPT("timer", "tick_ms", NULL, RV_CFG_INT, tick_ms, "100", 1, 10000, 0,
	    "longest sleep of the timer thread between deadline checks, ms"),
	OPT("node", "scheduler", "scheduler", RV_CFG_STR, scheduler, "auto", 0, 0, 0,
	    "who starts the job's nodes: local (this master, each replica spec's command), k8s "
	    "(pods from each replica spec's template or command, through the Kubernetes API), "
	    "slurm (each node a Slurm job through slurmrestd, see [slurm]), none (someone else "
	    "starts the agents) or auto (local when a replica spec has a command, else none)"),
	OPT("node", "limits", "node-limits", RV_CFG_STR, node_limits, "auto", 0, 0, 0,
	    "how the local scheduler enforces a node's resources: auto (cgroup2, else cgroup1, "
	    "else rlimit), cgroup2, cgroup1, rlimit or none"),
	OPT("node", "log_dir", "node-log-dir", RV_CFG_STR, node_log_dir, "", 0, 0, 0,
	    "folder of the nodes' logs (<instance>.log); empty: <state.dir>/nodes"),
	OPT("node", "stop_grace_ms", NULL, RV_CFG_INT, node_stop_grace_ms, "10000", 0, 3600000, 0,
	    "a node asked to stop gets SIGTERM, then SIGKILL this long after, ms"),
	OPT("node", "survive_master", "node-survive-master", RV_CFG_BOOL, node_survive_master,
	    "true", 0, 0, 0,
	    "nodes keep running when the master is killed (their own session, no parent-death "
	    "signal) and a master restarted on the same state folder adopts them; false: they "
	    "die with it and the restart relaunches them"),
	OPT("node", "usage_interval_ms", NULL, RV_CFG_INT, node_usage_interval_ms, "5000", 100,
	    3600000, 0, "how often each node's CPU, memory and throttling are read, ms"),
	OPT("node", "host_max_crashes", NULL, RV_CFG_INT, node_host_max_crashes, "2", 1, 1000, 0,
	    "crashes of nodes on one host after which no relaunch goes there"),
	OPT("node", "max_oom_relaunches", NULL, RV_CFG_INT, node_max_oom_relaunches, "5", 1, 1000,
	    0, "OOM-killed relaunches of one node, each with more memory, on top of restartCount"),
	OPT("k8s", "namespace", "k8s-namespace", RV_CFG_STR, k8s_namespace, "", 0, 0, 0,
	    "namespace of the job's pods (--scheduler k8s); empty: the job spec's "
	    "metadata.namespace"),
	OPT("k8s", "kubeconfig", "kubeconfig", RV_CFG_STR, k8s_kubeconfig, "", 0, 0, 0,
	    "kubeconfig of the API server (its current context); empty: $KUBECONFIG, else "
	    "in-cluster (service-account token and CA), else ~/.kube/config"),
	OPT("k8s", "image", "k8s-image", RV_CFG_STR, k8s_image, "rover-worker", 0, 0, 0,
	    "image of a pod's container when its replica has no template (or the template none)"),
	OPT("k8s", "scheduler_name", "k8s-scheduler-name", RV_CFG_STR, k8s_scheduler_name, "", 0, 0,
	    0,
	    "spec.schedulerName of the pods (volcano, a coscheduling plugin) unless the template "
	    "sets one; empty: the cluster's default scheduler"),
	OPT("k8s", "max_pending_s", NULL, RV_CFG_INT, k8s_max_pending_s, "300", 0, 604800, 0,
	    "a pod Unschedulable this long fails to start, naming the scheduler's reason, "
	    "seconds (0: wait forever)"),
	OPT("k8s", "timeout_ms", NULL, RV_CFG_INT, k8s_timeout_ms, "10000", 100, 600000, 0,
	    "timeout of each call to the API server (a watch has its own), ms"),
	OPT("k8s", "master_addr", "k8s-master-addr", RV_CFG_STR, k8s_master_addr, "", 0, 0, 0,
	    "host:port the pods reach this master at (a Service, the pod's IP); empty: the "
	    "listen address"),
	OPT("slurm", "url", "slurm-url", RV_CFG_STR, slurm_url, "", 0, 0, 0,
	    "slurmrestd for --scheduler slurm: unix:/path/to/socket or http://host:port"),
	OPT("slurm", "token", "slurm-token", RV_CFG_STR, slurm_token, "", 0, 0, RV_CFG_SECRET,
	    "JWT for slurmrestd (scontrol token), sent as X-SLURM-USER-TOKEN; empty: none (a "
	    "unix socket with rest_auth/local needs none)"),
	OPT("slurm", "user", "slurm-user", RV_CFG_STR, slurm_user, "", 0, 0, 0,
	    "X-SLURM-USER-NAME sent with the token; empty: none"),
	OPT("slurm", "partition", "slurm-partition", RV_CFG_STR, slurm_partition, "", 0, 0, 0,
	    "partition of the nodes' Slurm jobs; empty: the cluster's default"),
	OPT("slurm", "account", "slurm-account", RV_CFG_STR, slurm_account, "", 0, 0, 0,
	    "account of the nodes' Slurm jobs; empty: the user's default"),
	OPT("slurm", "workdir", "slurm-workdir", RV_CFG_STR, slurm_workdir, "", 0, 0, 0,
	    "working folder of the nodes' Slurm jobs; empty: the master's"),
	OPT("slurm", "poll_ms", NULL, RV_CFG_INT, slurm_poll_ms, "500", 100, 600000, 0,
	    "how often the nodes' Slurm job states are read, ms"),
	OPT("slurm", "timeout_ms", NULL, RV_CFG_INT, slurm_timeout_ms, "10000", 100, 600000, 0,
	    "timeout of each request to slurmrestd, ms"),
	RV_DAEMON_OPT_LOG_LEVEL(struct master_cfg),
	OPT("brain", "url", "brain", RV_CFG_STR, brain_url, "", 0, 0, 0,
	    "rover-brain's url; overrides spec.brainService (cluster mode needs one of them)"),
	OPT("brain", "token", "brain-token", RV_CFG_STR, brain_token, "", 0, 0, RV_CFG_SECRET,
	    "bearer token for rover-brain (empty: none)"),
	OPT("brain", "token_file", "brain-token-file", RV_CFG_STR, brain_token_file, "", 0, 0, 0,
	    "file holding the token for rover-brain (keeps it off the command line; wins over "
	    "token)"),
	OPT("brain", "connect_timeout_ms", NULL, RV_CFG_INT, brain_connect_timeout_ms, "2000", 10,
	    60000, 0, "connect timeout of each call to the brain, ms"),
	OPT("brain", "timeout_ms", NULL, RV_CFG_INT, brain_timeout_ms, "10000", 100, 600000, 0,
	    "timeout of each call to the brain, ms (a plan long-poll adds its wait)"),
	OPT("brain", "max_queue", NULL, RV_CFG_INT, brain_max_queue, "20000", 1, 10000000, 0,
	    "reports (samples and events) buffered while the brain is slow or down; the oldest "
	    "are dropped and counted beyond it"),
	OPT("brain", "max_queue_kb", NULL, RV_CFG_INT, brain_max_queue_kb, "8192", 64, 4194304, 0,
	    "memory of the buffered reports, KiB"),
	OPT("brain", "batch_max", NULL, RV_CFG_INT, brain_batch_max, "500", 1, 10000, 0,
	    "samples per metrics batch"),
	OPT("brain", "batch_delay_ms", NULL, RV_CFG_INT, brain_batch_delay_ms, "1000", 0, 600000, 0,
	    "longest a sample waits for its batch to fill, ms"),
	OPT("brain", "poll_wait_s", NULL, RV_CFG_INT, brain_poll_wait_s, "5", 1, 60, 0,
	    "wait of each plan long-poll, seconds (a stop waits for the one in flight)"),
	OPT("brain", "backoff_ms", NULL, RV_CFG_INT, brain_backoff_ms, "100", 1, 60000, 0,
	    "first pause after a failed call to the brain, ms (doubled up to backoff_max_ms)"),
	OPT("brain", "backoff_max_ms", NULL, RV_CFG_INT, brain_backoff_max_ms, "5000", 1, 600000, 0,
	    "longest pause between calls to a brain that does not answer, ms"),
	OPT("brain", "stop_ms", NULL, RV_CFG_INT, brain_stop_ms, "2000", 0, 600000, 0,
	    "at shutdown, send the buffered reports for up to this long, ms"),
	OPT("brain", "progress_interval_ms", NULL, RV_CFG_INT, brain_progress_interval_ms, "2000",
	    100, 3600000, 0,
	    "report the datasets' progress (shards done, doing, left) to the brain this often "
	    "while it changes, ms"),
	OPT("plan", "interval_ms", NULL, RV_CFG_INT, plan_interval_ms, "30000", 100, 86400000, 0,
	    "single-job mode: run the planning policy in-process this often, ms"),
	OPT("plan", "min_samples", NULL, RV_CFG_INT, plan_min_samples, "3", 1, 100000, 0,
	    "single-job mode: samples the policy needs before it judges or plans (as the "
	    "brain's plan.min_samples)"),
	OPT("plan", "oom_wait_ms", NULL, RV_CFG_INT, plan_oom_wait_ms, "3000", 0, 600000, 0,
	    "an OOM relaunch waits this long for the planner's oom plan, then uses the "
	    "in-process one, ms"),
};

static const char usage[] =
	"rover-master --job SPEC.json [--listen HOST:PORT] [--brain URL] "
	"[--state-dir DIR] [--nnodes MIN:MAX] [--node-unit N] [--token-file FILE] "
	"[--config FILE]";
static const char summary[] =
	"Rover's job master: rendezvous of the job's nodes, exactly-once data shards with\n"
	"step-tied checkpoints, failure detection, all journaled in --state-dir so a\n"
	"restart with the same folder carries on where it stopped.  Plans from rover-brain\n"
	"(optimizeMode cluster, --brain URL), from the same policy in-process (single-job)\n"
	"or only shown (manual) set what the job should run.  With --scheduler local it\n"
	"also runs the job's nodes (relaunching failed ones) and exits once the job ended.\n"
	"A spec without spec.datasets shards nothing (as roverctl and the brain accept it):\n"
	"the workers read their own data and the job ends when its nodes do.\n"
	"Print the full conf file with --print-conf.";

/* "MIN:MAX" or "N". */
static int parse_nnodes(const char *s, int *min, int *max)
{
	char a[16];
	const char *colon = strchr(s, ':');
	int64_t lo, hi;
	if (!colon) {
		if (rv_parse_i64(s, 1, RDZV_MAX_NODES, &lo) < 0)
			return -EINVAL;
		*min = *max = (int)lo;
		return 0;
	}
	size_t n = (size_t)(colon - s);
	if (n == 0 || n >= sizeof(a))
		return -EINVAL;
	memcpy(a, s, n);
	a[n] = 0;
	if (rv_parse_i64(a, 1, RDZV_MAX_NODES, &lo) < 0 ||
	    rv_parse_i64(colon + 1, 1, RDZV_MAX_NODES, &hi) < 0 || lo > hi)
		return -EINVAL;
	*min = (int)lo;
	*max = (int)hi;
	return 0;
}

static int load_spec(struct master *m, struct rv_err *err)
{
	if (!m->cfg.job[0])
		return rv_err_set(err, -EINVAL, "job.spec", "--job SPEC.json is required");
	FILE *f = fopen(m->cfg.job, "rb");
	if (!f)
		return rv_err_set(err, -errno, "job.spec", "could not open \"%s\": %s", m->cfg.job,
				  strerror(errno));
	struct rv_buf b;
	rv_buf_init(&b);
	char chunk[8192];
	size_t k;
	while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0 && b.len < (16u << 20))
		rv_buf_append(&b, chunk, k);
	fclose(f);
	struct rv_err jerr = { 0 };
	RV_CLEANUP_CJSON cJSON *doc = rv_json_parse(b.data ? b.data : "", b.len, &jerr);
	rv_buf_release(&b);
	if (!doc)
		return rv_err_set(err, -EINVAL, "", "%s: %s", m->cfg.job, jerr.msg);
	int rc = rv_job_spec_from_json(doc, &m->spec, &jerr);
	if (rc < 0)
		return rv_err_set(err, rc, jerr.field, "%s: %s", m->cfg.job, jerr.msg);
	const struct rv_replica_spec *w = &m->spec.replicas[RV_ROLE_WORKER];
	m->min_nodes = w->min_replicas > 0 ? w->min_replicas : 1;
	m->max_nodes = w->max_replicas > m->min_nodes ? w->max_replicas : m->min_nodes;
	if (m->cfg.nnodes[0] && parse_nnodes(m->cfg.nnodes, &m->min_nodes, &m->max_nodes) < 0)
		return rv_err_set(err, -EINVAL, "rdzv.nnodes",
				  "--nnodes \"%s\" must be MIN:MAX or N with 1 <= MIN <= MAX <= %d",
				  m->cfg.nnodes, RDZV_MAX_NODES);
	return 0;
}

/* host:port the API listens on, for the nodes: a wildcard host is reached
 * at loopback (the local scheduler's nodes run here). */
static void master_addr(const struct master *m, char *out, size_t size)
{
	char host[128];
	snprintf(host, sizeof(host), "%s", m->cfg.listen);
	char *colon = strrchr(host, ':');
	if (colon)
		*colon = 0;
	if (!host[0] || !strcmp(host, "0.0.0.0") || !strcmp(host, "*"))
		snprintf(host, sizeof(host), "127.0.0.1");
	else if (!strcmp(host, "[::]") || !strcmp(host, "::"))
		snprintf(host, sizeof(host), "[::1]");
	snprintf(out, size, "%s:%d", host, rv_http_server_port(m->http));
}

/* Read the configuration and the token files into m->cfg.  1 to go on,
 * else what run returns (0 after --help or --print-conf). */
static int run_configure(struct master *m, int argc, char **argv)
{
	static const struct rv_daemon d =
		RV_DAEMON_INIT("rover-master", "master", master_opts, usage, summary);
	struct rv_err err = { 0 };
	int rc = rv_daemon_configure(&d, &m->cfg, argc, argv);
	if (rc <= 0)
		return rc;
	/* Tokens kept in files win over the ones given as values. */
	if ((m->cfg.token_file[0] &&
	     (rc = rv_daemon_read_token(m->cfg.token_file, "server.token_file", m->cfg.token,
					sizeof(m->cfg.token), &err)) < 0) ||
	    (m->cfg.brain_token_file[0] &&
	     (rc = rv_daemon_read_token(m->cfg.brain_token_file, "brain.token_file",
					m->cfg.brain_token, sizeof(m->cfg.brain_token), &err)) <
		     0)) {
		fprintf(stderr, "rover-master: %s (key %s)\n", err.msg, err.field);
		return rc;
	}
	return 1;
}

/* Load and check the job spec, the plan's mode and the node manager's
 * needs; *run_nodes 1 when the master runs the job's nodes.  0, or
 * -EXIT_BAD_SPEC - 1000 with the reason printed (the caller releases the
 * spec). */
static int run_load_spec(struct master *m, int *run_nodes)
{
	struct rv_err err = { 0 };
	if (load_spec(m, &err) < 0) {
		if (err.field[0])
			fprintf(stderr, "rover-master: invalid job spec: %s (field %s)\n", err.msg,
				err.field);
		else
			fprintf(stderr, "rover-master: invalid job spec: %s\n", err.msg);
		return -EXIT_BAD_SPEC - 1000;
	}
	plans_init(m);
	nodemgr_register(m);
	if (plans_check(m, &err) < 0) {
		fprintf(stderr, "rover-master: %s (field %s)\n", err.msg, err.field);
		return -EXIT_BAD_SPEC - 1000;
	}
	*run_nodes = nodemgr_wanted(&m->cfg, &m->spec, &err);
	if (*run_nodes < 0) {
		fprintf(stderr, "rover-master: %s (%s %s)\n", err.msg,
			strchr(err.field, '.') && !strncmp(err.field, "spec.", 5) ? "field" : "key",
			err.field);
		return -EXIT_BAD_SPEC - 1000;
	}
	RV_CLEANUP_FREE char *effective =
		rv_cfg_effective(master_opts, (int)RV_ARRAY_SIZE(master_opts), &m->cfg);
	rv_log_info("effective config", "%s job=%s nnodes=%d:%d", effective ? effective : "",
		    m->spec.name, m->min_nodes, m->max_nodes);
	return 0;
}

/* Start the services in order: the job state (journal replay), the brain
 * link, the control API, the node manager when run_nodes.  0, or -errno
 * with the failure logged (run_stop stops what started). */
static int run_start(struct master *m, int run_nodes)
{
	struct rv_err err = { 0 };
	char q[600];
	int rc = state_open(m, &err);
	if (rc < 0) {
		rv_log_error("could not restore the job state", "dir=%s reason=%s",
			     m->cfg.state_dir, rv_log_q(q, sizeof(q), err.msg));
		return rc;
	}
	rc = plans_start(m, &err);
	if (rc < 0) {
		rv_log_error("could not start the brain link", "reason=%s",
			     rv_log_q(q, sizeof(q), err.msg));
		return rc;
	}
	rc = master_api_start(m, &err);
	if (rc < 0) {
		rv_log_error("could not start the control API", "reason=%s",
			     rv_log_q(q, sizeof(q), err.msg));
		return rc;
	}
	if (!run_nodes)
		return 0;
	char addr[160];
	master_addr(m, addr, sizeof(addr));
	if (!strcmp(m->cfg.scheduler, "k8s") && m->cfg.k8s_master_addr[0])
		snprintf(addr, sizeof(addr), "%s", m->cfg.k8s_master_addr);
	nodelink_attach(m);
	rc = nodemgr_start(m, addr, &err);
	if (rc < 0)
		rv_log_error("could not start the node manager", "reason=%s",
			     rv_log_q(q, sizeof(q), err.msg));
	return rc;
}

/* Stop everything run_start started (each stop copes with a service that
 * never started) and free m. */
static void run_stop(struct master *m)
{
	/* Wake the long-polls first so the server's stop does not wait for them. */
	state_lock(m, "run_stop");
	m->stopping = true;
	pthread_cond_broadcast(&m->changed);
	master_world_poll(m);
	state_unlock(m);
	master_api_stop(m);
	nodemgr_stop(m);
	plans_stop(m);
	state_close(m);
	rv_job_spec_release(&m->spec);
	free(m);
}

static int run(int argc, char **argv)
{
	struct master *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	int rc = run_configure(m, argc, argv);
	if (rc <= 0) {
		free(m);
		return rc;
	}
	gsl_set_error_handler_off();
	int run_nodes = 0;
	rc = run_load_spec(m, &run_nodes);
	if (rc < 0) {
		rv_job_spec_release(&m->spec);
		free(m);
		return rc;
	}
	sigset_t sigs;
	rv_daemon_block_signals(&sigs);
	rc = run_start(m, run_nodes);
	if (rc == 0) {
		rv_log_info("rover-master ready", "listen=%s port=%d auth=%s version=%s",
			    m->cfg.listen, rv_http_server_port(m->http),
			    m->cfg.token[0] ? "bearer" : "none", ROVER_VERSION);
		/* Scripts and tests read this line from stdout to learn the port. */
		rv_daemon_print_listening(m->cfg.listen, rv_http_server_port(m->http));
		int sig = rv_daemon_wait(&sigs);
		rv_log_info("shutting down", "signal=%d", sig);
		state_lock(m, "run");
		rc = m->job_state == MASTER_JOB_FAILED ? -ECANCELED : 0;
		state_unlock(m);
	}
	run_stop(m);
	return rc;
}

int main(int argc, char **argv)
{
	int rc = run(argc, argv);
	if (rc == -EXIT_BAD_SPEC - 1000)
		return EXIT_BAD_SPEC;
	return rc < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
