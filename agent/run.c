/*
 * run.c: rover-run's supervisor (run.h).
 *
 * run_job: find the master (--rdzv-endpoint, $ROVER_MASTER_ADDR, or a
 * private one), then loop: rendezvous (join with a fresh free port in the
 * join's addr, long-poll the world), start the group (worker_launch per
 * local rank), supervise it until it ends, and decide:
 *   - every worker exited 0: done;
 *   - a worker failed (a pidfd woke the loop): stop the others (SIGTERM to
 *     each process group, SIGKILL after the grace), report the failure to
 *     the master, and restart within --max-restarts; the same Python
 *     traceback on two failures in a row is a user-code error and stops;
 *   - the master says the world changes (heartbeat reply rejoin): stop and
 *     rendezvous again, no restart spent;
 *   - no output for --hang-timeout: a failure naming the silent ranks;
 *   - SIGINT/SIGTERM: stop every worker and the private master, exit.
 * Invariant: between groups no worker runs; every worker reaped is never
 * signalled by pid again (common/proc), and its process group gets a
 * SIGKILL so nothing it started outlives it.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu.h"
#include "ckpt.h"
#include "log.h"
#include "master_client.h"
#include "netif.h"
#include "netprobe.h"
#include "parse.h"
#include "run.h"
#include "standalone.h"
#include "tcpstore.h"
#include "worldwatch.h"
#include "node_usage.h"
#include "warm.h"
#include "worker.h"

#define RUN_HEARTBEAT_MS   1000
#define RUN_STOP_GRACE_MS  5000
#define RUN_WORLD_POLL_MS  500
#define RUN_PEER_REPORT_MS 300
#define RUN_STACK_WAIT_MS  2000
#define RUN_HANG_START_MS  120000 /* the hang limit before a group's first sign of life */
#define RUN_STORE_WAIT_MS  500
#define RUN_STORE_READY_MS 10000
#define RUN_GPU_PROBE_MS   20000
/* GPU memory in use is asked of rover-gpuinfo this rarely: the CUDA runtime
 * makes a context on each device to answer (hundreds of MiB, for a moment,
 * beside the training) */
#define RUN_GPU_USAGE_MS   300000
#define RUN_GPU_USAGE_WAIT 5000 /* and given this long (the loop waits) */

enum run_tag { TAG_SIG = 1, TAG_TIMER, TAG_PIDFD, TAG_OUT, TAG_ERR, TAG_WATCH };

enum run_outcome {
	OUT_DONE,   /* every worker exited 0 */
	OUT_FAILED, /* a worker failed: r->failed is its index */
	OUT_REJOIN, /* the master announced a new round */
	OUT_HANG,   /* no output for --hang-timeout */
	OUT_SIGNAL, /* SIGINT/SIGTERM: r->stop_sig */
};

struct run {
	const struct flags *f;
	/* --log-dir, else a new temp folder when -r or -t asks for log files
	 * (torchrun's), else "" */
	char log_dir[600];
	int nproc;
	struct rv_gpu_info gpu; /* this node's GPUs (count 0: none, why says so) */
	char node[RV_NAME_MAX];
	char local_addr[256];
	char sock_if[64];      /* the interface of --local-addr, "" none */
	int join_port;         /* the port of our last join's addr */
	char master_addr[300]; /* host:port of the rover-master */
	struct standalone sa;
	bool have_sa;
	struct rv_master_client *mc;
	/* heartbeats from the supervisor loop: one attempt, a short timeout, so
	 * a master that is down never holds a worker's death unseen */
	struct rv_master_client *hb;
	int64_t hb_ok_ms; /* the last heartbeat answered (or the group's start) */
	const char *python;
	/* the warm interpreter workers are forked from (warm.h), started by
	 * this thread, which stays alive as their PDEATHSIG parent; not
	 * started: every worker starts cold */
	struct warm warm;
	int epfd, sigfd, tfd;
	int restarts; /* failures restarted so far: TORCHELASTIC_RESTART_COUNT */
	int attempt;  /* groups started: the log folder attempt_N */
	/* the world of this round */
	int64_t round;
	int group_rank, group_world_size, world_size, rank_offset;
	char w_master_addr[RV_ADDR_MAX];
	int w_master_port;
	struct worker *w;          /* nproc */
	int failed;                /* index of the worker whose death ended the group */
	char last_tb[WORKER_TAIL]; /* the previous failure's traceback, "" none */
	char hung[128];            /* the ranks of a hang: "0,1" */
	int stop_sig;
	/* usage reports (--monitor-interval): the previous sample, for rates */
	struct node_usage_sample u_prev;
	int64_t u_prev_ms, u_next_ms, gpu_next_ms;
	int64_t gpu_used_mb, gpu_total_mb;
	struct ckpt ck; /* the flash checkpoints' segments and their persister */
	/* the workers' c10d store (tcpstore.h), listening on our join port
	 * from each join on, so a round's store is up before any worker of
	 * it starts; NULL: rank 0's worker hosts it (ROVER_AGENT_STORE=0,
	 * torchrun's static flags) */
	struct tcpstore *store;
	/* the master tells us at once when our round ends (worldwatch.h) */
	struct worldwatch *watch;
};

/* ---- small helpers ---- */

/* This node's GPUs, asked of the CUDA runtime in a child (common/gpu.h:
 * rover-gpuinfo; the supervisor never loads CUDA, so it stays fork-safe).
 * --accelerator cpu asks nothing.  A probe that fails counts as no GPU,
 * with its reason. */
static void probe_gpus(struct run *r)
{
	struct rv_err e = { 0 };
	char q[200];
	memset(&r->gpu, 0, sizeof(r->gpu));
	if (strcmp(r->f->accelerator, "nvidia.com/gpu") != 0) {
		snprintf(r->gpu.why, sizeof(r->gpu.why), "--accelerator %s", r->f->accelerator);
		return;
	}
	if (rv_gpu_probe(&r->gpu, RUN_GPU_PROBE_MS, &e) < 0) {
		memset(&r->gpu, 0, sizeof(r->gpu));
		snprintf(r->gpu.why, sizeof(r->gpu.why), "%.159s", e.msg);
		rv_log_warn("could not ask for GPUs: counting none", "reason=%s",
			    rv_log_q(q, sizeof(q), e.msg));
		return;
	}
	if (r->gpu.count > 0)
		rv_log_info("GPUs found", "count=%d gpu0=%s total_mb=%lld", r->gpu.count,
			    rv_log_q(q, sizeof(q), r->gpu.dev[0].name),
			    (long long)r->gpu.dev[0].total_mb);
	else
		rv_log_info("no GPU: workers run on the CPU", "why=%s",
			    rv_log_q(q, sizeof(q), r->gpu.why));
}

/* Workers on this node; -ENODEV for gpu without a GPU. */
static int resolve_nproc(struct run *r)
{
	const struct flags *f = r->f;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus < 1)
		cpus = 1;
	if (cpus > FLAGS_MAX_NPROC)
		cpus = FLAGS_MAX_NPROC;
	switch (f->nproc_kind) {
	case FLAGS_NPROC_N:
		return f->nproc;
	case FLAGS_NPROC_CPU:
		return (int)cpus;
	case FLAGS_NPROC_GPU:
		return r->gpu.count > 0 ? r->gpu.count : -ENODEV;
	case FLAGS_NPROC_AUTO: /* torchrun's: one per GPU, else one per CPU */
		return r->gpu.count > 0 ? r->gpu.count : (int)cpus;
	}
	return -EINVAL;
}

/* A port free now on every address, for node 0's MASTER_PORT. */
static int free_port(void)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t len = sizeof(a);
	int rc = 0;
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(s, (struct sockaddr *)&a, &len) < 0)
		rc = -errno;
	close(s);
	return rc < 0 ? rc : ntohs(a.sin_port);
}

static bool is_loopback(const char *hostport)
{
	return !strncmp(hostport, "127.", 4) || !strncmp(hostport, "localhost", 9) ||
	       !strncmp(hostport, "[::1]", 5);
}

/* The signal waiting on the signalfd (0: none, or SIGCHLD only). */
static int take_signal(struct run *r)
{
	struct signalfd_siginfo si;
	int sig = 0;
	while (read(r->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM)
			sig = (int)si.ssi_signo;
	return sig;
}

/* ---- the world ---- */

static int join(struct run *r, struct rv_err *err)
{
	/* the store's new round listens on the port we announce (with
	 * --network-check the check has it first: net_check) */
	int port = r->store && !r->f->network_check ? tcpstore_round(r->store, 0, err)
						    : free_port();
	if (port < 0 && r->store && !r->f->network_check) {
		rv_log_error("could not start the store's round", "reason=\"%s\"", err->msg);
		port = free_port();
	}
	if (port < 0)
		return rv_err_set(err, port, "", "could not find a free port: %s", strerror(-port));
	r->join_port = port;
	struct rv_rdzv_join j = { .local_world_size = r->nproc };
	snprintf(j.node, sizeof(j.node), "%s", r->node);
	snprintf(j.addr, sizeof(j.addr), "%.*s:%d", (int)sizeof(j.addr) - 13, r->local_addr, port);
	return rv_master_join(r->mc, &j, &r->round, err);
}

/* torchrun's static rendezvous over the master's world: --node-rank fixes
 * this node's group rank (every node runs as many workers, so the ranks
 * are node_rank x nproc + local rank), and --master-addr/--master-port
 * (torchrun's defaults 127.0.0.1:29500 with --node-rank) say where rank 0's
 * store listens instead of node 0's join address.  -EINVAL: the world does
 * not fit the fixed rank. */
static int static_world(struct run *r, const struct rv_rdzv_world_reply *w, struct rv_err *err)
{
	const struct flags *f = r->f;
	bool fixed = f->node_rank >= 0;
	if (fixed) {
		if (f->node_rank >= w->nnodes)
			return rv_err_set(err, -EINVAL, "--node-rank",
					  "--node-rank %d is outside the world of %d node(s)",
					  f->node_rank, w->nnodes);
		for (int i = 0; i < w->nmembers; i++)
			if (w->members[i].local_world_size != r->nproc)
				return rv_err_set(err, -EINVAL, "--node-rank",
						  "--node-rank needs the same --nproc-per-node on "
						  "every node (%s runs %d, this node %d)",
						  w->members[i].node,
						  w->members[i].local_world_size, r->nproc);
		r->group_rank = f->node_rank;
		r->rank_offset = f->node_rank * r->nproc;
	}
	if (f->master_addr[0])
		snprintf(r->w_master_addr, sizeof(r->w_master_addr), "%.*s",
			 (int)sizeof(r->w_master_addr) - 1, f->master_addr);
	else if (fixed)
		snprintf(r->w_master_addr, sizeof(r->w_master_addr), "127.0.0.1");
	if (f->master_port)
		r->w_master_port = f->master_port;
	else if (fixed || f->master_addr[0])
		r->w_master_port = 29500;
	return 0;
}

/* Take the world of a complete round: our rank, node 0's address. */
static int take_world(struct run *r, const struct rv_rdzv_world_reply *w, struct rv_err *err)
{
	const struct rv_rdzv_member *zero = NULL, *me = NULL;
	for (int i = 0; i < w->nmembers; i++) {
		if (w->members[i].group_rank == 0)
			zero = &w->members[i];
		if (!strcmp(w->members[i].node, r->node))
			me = &w->members[i];
	}
	if (!zero || !me)
		return rv_err_set(err, -EPROTO, "", "the world of round %lld lacks %s",
				  (long long)w->round, zero ? "this node" : "node 0");
	const char *colon = strrchr(zero->addr, ':');
	int64_t port;
	if (!colon || rv_parse_i64(colon + 1, 1, 65535, &port) < 0)
		return rv_err_set(err, -EPROTO, "", "node 0 gave no HOST:PORT (\"%s\")",
				  zero->addr);
	snprintf(r->w_master_addr, sizeof(r->w_master_addr), "%.*s", (int)(colon - zero->addr),
		 zero->addr);
	r->w_master_port = (int)port;
	r->round = w->round;
	r->group_rank = me->group_rank;
	r->rank_offset = me->rank_offset;
	r->group_world_size = w->nnodes;
	r->world_size = w->world_size;
	return static_world(r, w, err);
}

static void warm_check(struct run *r, int wait_ms);

/* A node that comes to a world already training below --nnodes MAX (a
 * relaunched node, one added later) joins once its warm interpreter is
 * ready: its join opens a round that grows the world and stops the
 * others' workers, and workers started cold would hold them up for a whole
 * import of torch; warm, they lose about a second.  A first start (no
 * world yet) joins at once, everyone imports then anyway; so does a spare
 * for a world at MAX, which it does not disturb.  Bounded by the
 * interpreter's own start timeout. */
static void join_when_warm(struct run *r)
{
	if (r->attempt > 0 || !r->warm.started || r->warm.ready || r->f->nnodes_max < 2)
		return;
	struct rv_job_status *js = calloc(1, sizeof(*js));
	struct rv_err err = { 0 };
	bool trains = js && rv_master_job(r->mc, js, &err) == 0 && js->state == RV_RDZV_COMPLETE &&
		      js->nnodes > 0 && js->nnodes < r->f->nnodes_max;
	free(js);
	if (!trains)
		return;
	rv_log_info("a world trains: joining once the warm interpreter is ready", "node=%s",
		    r->node);
	struct pollfd sig = { .fd = r->sigfd, .events = POLLIN };
	while (!r->warm.ready && r->warm.started && poll(&sig, 1, 0) == 0)
		warm_check(r, 200); /* a signal is the rendezvous loop's to take */
}

/* Join and wait for a world with this node in it.  0, -EINTR on a signal
 * (r->stop_sig), -ECANCELED when the rendezvous failed, -ETIMEDOUT past the
 * join timeout, or the master's error. */
static int rendezvous(struct run *r, struct rv_err *err)
{
	join_when_warm(r);
	int64_t until = rv_mono_ms() + (int64_t)r->f->rdzv_join_timeout_s * 1000;
	bool joined = false;
	int64_t last_hb = rv_mono_ms();
	while (rv_mono_ms() < until) {
		int sig = take_signal(r);
		if (sig) {
			r->stop_sig = sig;
			return -EINTR;
		}
		int rc;
		if (!joined) {
			rc = join(r, err);
			if (rc == -ECANCELED)
				return rc;
			if (rc < 0) {
				/* the master may still be starting: try again shortly */
				rv_log_warn("could not join the rendezvous", "reason=\"%s\"",
					    err->msg);
				usleep(200 * 1000);
				continue;
			}
			joined = true;
			rv_log_info("joined the rendezvous", "node=%s round=%lld port=%d store=%s",
				    r->node, (long long)r->round, r->join_port,
				    r->store && !r->f->network_check ? "listening" : "no");
		}
		struct rv_rdzv_world_reply w = { 0 };
		rc = rv_master_world(r->mc, r->node, r->round, RUN_WORLD_POLL_MS, &w, err);
		if (rc < 0) {
			rv_log_warn("could not read the world", "reason=\"%s\"", err->msg);
			usleep(200 * 1000);
			continue;
		}
		switch (w.status) {
		case RV_RDZV_COMPLETE:
			rc = take_world(r, &w, err);
			rv_rdzv_world_reply_release(&w);
			return rc;
		case RV_RDZV_FAILED:
			rv_rdzv_world_reply_release(&w);
			return rv_err_set(err, -ECANCELED, "",
					  "the rendezvous failed: too few nodes within the wait");
		case RV_RDZV_STALE:
		case RV_RDZV_UNKNOWN:
			joined = false;
			break;
		case RV_RDZV_GATHERING:
		case RV_RDZV_SPARE:
			break;
		}
		rv_rdzv_world_reply_release(&w);
		warm_check(r, 0); /* a spare's interpreter readies while it waits */
		if (rv_mono_ms() - last_hb >= RUN_HEARTBEAT_MS) {
			rv_master_heartbeat(r->mc, r->node, NULL, NULL);
			last_hb = rv_mono_ms();
		}
	}
	return rv_err_set(err, -ETIMEDOUT, "",
			  "no world formed within %d s (--rdzv-conf "
			  "join_timeout)",
			  r->f->rdzv_join_timeout_s);
}

static void report_failure(struct run *r, const char *reason, int code);

/* --network-check: check this world's links before training (netprobe.h).
 * 0: go on (passed, or no check to run: logged); 1: the world moved on,
 * rendezvous again; -EHOSTUNREACH: this node failed it (or is a straggler
 * with --exclude-straggler): reported to the master, the job goes on
 * without it. */
static int net_check(struct run *r)
{
	if (!r->f->network_check || r->group_world_size < 2)
		return 0;
	/* the collective needs torch: a warm interpreter still importing it is
	 * no slower to wait for than a cold start (--no-python: TCP) */
	bool coll = !r->f->no_python;
	int64_t t0 = rv_mono_ms();
	int64_t wend = t0 + r->f->netcheck_round_timeout_s * 1000;
	while (coll && r->warm.started && !r->warm.ready && rv_mono_ms() < wend) {
		warm_check(r, 1000);
		rv_master_heartbeat(r->mc, r->node, NULL, NULL); /* as the check does */
	}
	int64_t t1 = rv_mono_ms();
	struct netprobe_opts o = { .node = r->node,
				   .port = r->join_port,
				   .world = r->round,
				   .mb = r->f->netcheck_mb,
				   .timeout_ms = r->f->netcheck_timeout_s * 1000,
				   .round_timeout_ms = r->f->netcheck_round_timeout_s * 1000,
				   .collective = coll,
				   .python = r->python,
				   .warm = r->warm.started ? &r->warm : NULL,
				   .addr = r->local_addr,
				   .gpu = r->gpu.count > 0 };
	struct netprobe_result res;
	struct rv_err err = { 0 };
	char q[300];
	int rc = netprobe_run(r->mc, &o, &res, &err);
	if (rc != 0)
		netprobe_result_release(&res);
	if (rc == 1)
		return 1;
	if (rc < 0) {
		rv_log_warn("network check not run: training anyway", "reason=%s",
			    rv_log_q(q, sizeof(q), err.msg));
		return 0;
	}
	bool out = res.verdict == RV_VERDICT_FAULTY ||
		   (r->f->exclude_straggler && res.verdict == RV_VERDICT_STRAGGLER);
	rv_log_info("network check done",
		    "check=%lld verdict=%s faulty=\"%s\" stragglers=\"%s\" median_s=%.3f "
		    "time0_s=%.3f time1_s=%.3f compute0_s=%.3f comm0_s=%.3f compute1_s=%.3f "
		    "comm1_s=%.3f backend=%s warm_wait_ms=%lld check_ms=%lld",
		    (long long)res.check, rv_netcheck_verdict_name(res.verdict), res.faulty,
		    res.stragglers, res.median_s, res.time_s[0], res.time_s[1], res.compute_s[0],
		    res.comm_s[0], res.compute_s[1], res.comm_s[1], res.backend,
		    (long long)(t1 - t0), (long long)(rv_mono_ms() - t1));
	if (!out) {
		netprobe_result_release(&res);
		return 0;
	}
	char reason[200];
	snprintf(reason, sizeof(reason), "network check %lld: this node is %s",
		 (long long)res.check, res.verdict == RV_VERDICT_FAULTY ? "faulty" : "a straggler");
	report_failure(r, reason, -1);
	netprobe_result_release(&res); /* once the others can go on without it */
	if (res.verdict == RV_VERDICT_FAULTY)
		fprintf(stderr, "rover-run: %s: leaving the job (it failed both check rounds)\n",
			reason);
	else
		fprintf(stderr,
			"rover-run: %s: leaving the job (--exclude-straggler; its rounds took "
			"%.3f s and %.3f s, compute %.3f s and %.3f s; the median node %.3f s)\n",
			reason, res.time_s[0], res.time_s[1], res.compute_s[0], res.compute_s[1],
			res.median_s);
	return -EHOSTUNREACH;
}

/* With --network-check the check listened on the join port: the store's
 * round takes it now, on node 0.  The other nodes hear the verdicts as
 * node 0 does, up to a poll of the master apart, and fork their workers in
 * ms: one that reached node 0's port before its store listened would wait
 * torch's connect retry (a second), so they start theirs once node 0's
 * store answers (RUN_STORE_READY_MS at most, then anyway). */
static void store_after_check(struct run *r)
{
	struct rv_err err = { 0 };
	if (!r->store || !r->f->network_check)
		return;
	if (r->group_rank == 0) {
		if (tcpstore_round(r->store, r->join_port, &err) < 0)
			rv_log_error("could not start the store's round", "reason=\"%s\"", err.msg);
		return;
	}
	if (r->group_world_size < 2)
		return;
	int64_t t0 = rv_mono_ms();
	int rc = tcpstore_ready(r->w_master_addr, r->w_master_port, RUN_STORE_READY_MS);
	if (rc < 0)
		rv_log_warn("node 0's store does not answer: starting the workers", "addr=%s:%d",
			    r->w_master_addr, r->w_master_port);
	else
		rv_log_info("node 0's store answers", "waited_ms=%lld",
			    (long long)(rv_mono_ms() - t0));
}

/* ---- the group ---- */

static void ep_add(struct run *r, int fd, enum run_tag tag, int idx)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.u64 = ((uint64_t)tag << 32) | (uint32_t)idx };
	if (fd >= 0)
		epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void ep_del(struct run *r, int fd)
{
	if (fd >= 0)
		epoll_ctl(r->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* Store start order: with env:// the store lives in rank 0 and every other
 * rank connects to it; one that comes before it listens retries a second
 * later (torch 1.13), which would be most of a warm restart.  So after a
 * warm rank 0 (forked in ms: the others would win the race) wait, at most
 * RUN_STORE_WAIT_MS and while rank 0 lives, until MASTER_PORT accepts on
 * this node.  A script that never listens there loses that bound once per
 * start; a cold rank 0 takes seconds to import torch, its peers as long,
 * and is not waited for. */
static void store_wait(struct run *r)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)r->w_master_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int64_t t0 = rv_mono_ms(), until = t0 + RUN_STORE_WAIT_MS;
	/* rank 0's pidfd looked at, not waited for: the loop reaps it */
	struct pollfd dead = { .fd = r->w[0].proc.pidfd, .events = POLLIN };
	while (rv_mono_ms() < until && (dead.fd < 0 || poll(&dead, 1, 0) == 0)) {
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0)
			return;
		int rc = connect(s, (struct sockaddr *)&a, sizeof(a));
		close(s);
		if (rc == 0) {
			rv_log_debug("rank 0 listens", "port=%d waited_ms=%lld", r->w_master_port,
				     (long long)(rv_mono_ms() - t0));
			return;
		}
		usleep(2000);
	}
	rv_log_debug("rank 0 does not listen: starting the others", "port=%d waited_ms=%lld",
		     r->w_master_port, (long long)(rv_mono_ms() - t0));
}

/* Start every local rank; -errno when one could not start (the others are
 * stopped by the caller's group_stop). */
static int group_start(struct run *r, struct rv_err *err)
{
	char attempt_dir[700];
	char rover_master[300];
	r->hb_ok_ms = rv_mono_ms();
	snprintf(rover_master, sizeof(rover_master), "%s", r->master_addr);
	if (r->log_dir[0])
		snprintf(attempt_dir, sizeof(attempt_dir), "%s/attempt_%d", r->log_dir, r->attempt);
	struct worker_group g = {
		.flags = r->f,
		.local_world_size = r->nproc,
		.world_size = r->world_size,
		.group_rank = r->group_rank,
		.group_world_size = r->group_world_size,
		.rank_offset = r->rank_offset,
		.master_addr = r->w_master_addr,
		.master_port = r->w_master_port,
		.restart_count = r->restarts,
		.run_id = r->f->rdzv_id,
		.rover_master = rover_master,
		.node_name = r->node,
		.python = r->python,
		.attempt_dir = r->log_dir[0] ? attempt_dir : NULL,
		.warm = r->warm.started ? &r->warm : NULL,
		.gpus = r->gpu.count,
		.agent_store = r->store != NULL,
		.sock_ifname = r->sock_if,
	};
	r->attempt++;
	if (r->watch)
		worldwatch_round(r->watch, r->round);
	ckpt_group(&r->ck, r->rank_offset, r->nproc);
	rv_log_info("starting workers",
		    "round=%lld group_rank=%d nnodes=%d world_size=%d "
		    "local=%d restart=%d master_addr=%s master_port=%d",
		    (long long)r->round, r->group_rank, r->group_world_size, r->world_size,
		    r->nproc, r->restarts, r->w_master_addr, r->w_master_port);
	for (int i = 0; i < r->nproc; i++) {
		int rc = worker_launch(&r->w[i], &g, i, err);
		if (rc < 0)
			return rc;
		ep_add(r, r->w[i].proc.pidfd, TAG_PIDFD, i);
		ep_add(r, r->w[i].out[0].fd, TAG_OUT, i);
		ep_add(r, r->w[i].out[1].fd, TAG_ERR, i);
		if (i == 0 && r->nproc > 1 && r->group_rank == 0 && r->w[0].warm && !r->store)
			store_wait(r);
	}
	return 0;
}

/* A reaped worker: its output drained, whatever its group left killed. */
static void reaped(struct run *r, struct worker *w, int status)
{
	w->running = false;
	w->status = status;
	ep_del(r, w->proc.pidfd);
	if (w->proc.pgid > 0)
		kill(-w->proc.pgid, SIGKILL);
	for (int i = 0; i < 2; i++)
		worker_pump(w, i);
	worker_flush(w);
}

/* Stop every worker still running: SIGTERM to each process group, then
 * SIGKILL to those still there after the grace; release them all (their
 * status and stderr tail stay for the summary). */
static void group_stop(struct run *r, int grace_ms)
{
	for (int i = 0; i < r->nproc; i++)
		if (r->w[i].running) {
			r->w[i].stopped = true;
			rv_proc_kill(&r->w[i].proc, SIGTERM);
			/* a stopped worker (SIGSTOP: a hang) takes its SIGTERM
			 * only once continued; else it waited out the grace */
			rv_proc_kill(&r->w[i].proc, SIGCONT);
		}
	int64_t until = rv_mono_ms() + grace_ms;
	for (int i = 0; i < r->nproc; i++) {
		struct worker *w = &r->w[i];
		if (!w->running)
			continue;
		int st = -1;
		int64_t left = until - rv_mono_ms();
		if (rv_proc_wait(&w->proc, left > 0 ? (int)left : 0, &st) == -ETIMEDOUT) {
			rv_log_warn("worker did not stop in time: killing it", "rank=%d", w->rank);
			rv_proc_kill(&w->proc, SIGKILL);
			rv_proc_wait(&w->proc, -1, &st);
		}
		reaped(r, w, st);
	}
	for (int i = 0; i < r->nproc; i++) {
		ep_del(r, r->w[i].out[0].fd);
		ep_del(r, r->w[i].out[1].fd);
		worker_release(&r->w[i]);
	}
}

/* Reap the orphans reparented to us (we are a child subreaper while the
 * warm interpreter runs): never waitpid(-1), which would take a worker's
 * status from its rv_proc. */
static void reap_strays(struct run *r)
{
	pid_t keep[FLAGS_MAX_NPROC + 2 + 2 * WARM_MAX_STANDBY];
	int n = 0;
	for (int i = 0; i < r->nproc && n < FLAGS_MAX_NPROC; i++)
		if (r->w[i].proc.pid > 0)
			keep[n++] = r->w[i].proc.pid;
	if (r->have_sa && r->sa.proc.pid > 0)
		keep[n++] = r->sa.proc.pid;
	if (r->warm.proc.pid > 0)
		keep[n++] = r->warm.proc.pid;
	for (int i = 0; i < r->warm.nstandby; i++)
		if (r->warm.standby[i].pid > 0)
			keep[n++] = r->warm.standby[i].pid;
	rv_proc_reap_strays(keep, n);
}

/* The worker whose pidfd woke us (or every one, on SIGCHLD without
 * pidfds).  Returns 1 when the group ended (r->failed set on a failure). */
static int check_exit(struct run *r, int idx, enum run_outcome *out)
{
	struct worker *w = &r->w[idx];
	int st;
	if (!w->running || rv_proc_wait(&w->proc, 0, &st) == -ETIMEDOUT)
		return 0;
	reaped(r, w, st);
	if (st != 0) {
		char how[96];
		rv_log_error("worker failed", "rank=%d local_rank=%d pid_status=\"%s\"", w->rank,
			     w->local_rank, worker_describe(st, how, sizeof(how)));
		r->failed = idx;
		*out = OUT_FAILED;
		return 1;
	}
	rv_log_info("worker finished", "rank=%d", w->rank);
	for (int i = 0; i < r->nproc; i++)
		if (r->w[i].running)
			return 0;
	*out = OUT_DONE;
	return 1;
}

/* Whether the warm interpreter finished its imports (waiting up to
 * wait_ms): log it once, or why it will not serve. */
static void warm_check(struct run *r, int wait_ms)
{
	if (!r->warm.started || r->warm.ready)
		return;
	struct rv_err e = { 0 };
	int rc = warm_ready(&r->warm, wait_ms, &e);
	char q[300];
	if (rc == 0)
		rv_log_info("warm interpreter ready", "pid=%d import_ms=%d", (int)r->warm.proc.pid,
			    r->warm.import_ms);
	else if (rc != -EAGAIN)
		rv_log_warn("warm interpreter unavailable: workers start cold", "reason=%s",
			    rv_log_q(q, sizeof(q), e.msg));
}

/* Sample this node's usage and tell the master (POST /v1/usage), every
 * --monitor-interval (at least each timer tick): CPU cores and RSS of our
 * process tree (the private master left out), our cgroup's CPU throttling
 * when it has a quota, GPU memory now and then.  A failed report is logged
 * at debug: the heartbeat says when the master is gone. */
static void report_usage(struct run *r, int64_t now)
{
	if (now < r->u_next_ms)
		return;
	r->u_next_ms = now + (int64_t)(r->f->monitor_interval * 1000) - RUN_HEARTBEAT_MS / 2;
	struct node_usage_sample s = { 0 };
	pid_t skip = r->have_sa ? r->sa.proc.pid : 0;
	if (node_usage_tree(getpid(), skip, &s) < 0)
		return;
	char cg[2048];
	int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	ssize_t k = fd >= 0 ? read(fd, cg, sizeof(cg) - 1) : -1;
	if (fd >= 0)
		close(fd);
	cg[k > 0 ? k : 0] = 0;
	node_usage_cgroup("/sys/fs/cgroup", cg, &s);
	if (r->gpu.count > 0 && now >= r->gpu_next_ms) {
		struct rv_gpu_info g;
		r->gpu_next_ms = now + RUN_GPU_USAGE_MS;
		if (rv_gpu_probe(&g, RUN_GPU_USAGE_WAIT, NULL) == 0) {
			r->gpu_used_mb = r->gpu_total_mb = 0;
			for (int i = 0; i < g.count; i++) {
				r->gpu_total_mb += g.dev[i].total_mb;
				r->gpu_used_mb += g.dev[i].total_mb - g.dev[i].free_mb;
			}
		}
	}
	struct rv_node_usage u = {
		.rank = r->group_rank,
		.memory_mb = s.rss_bytes / (1024 * 1024),
		.cpu_limit = s.has_quota ? s.quota_cores : 0,
		.nr_periods = s.has_quota && s.nr_periods > 0 ? s.nr_periods : 0,
		.nr_throttled = s.has_quota && s.nr_throttled > 0 ? s.nr_throttled : 0,
		.throttled_us = s.has_quota && s.throttled_us > 0 ? s.throttled_us : 0,
		.gpus = r->gpu.count,
		.gpu_memory_mb = r->gpu_used_mb,
		.gpu_memory_total_mb = r->gpu_total_mb,
		.ts_ms = rv_now_ms(),
	};
	snprintf(u.node, sizeof(u.node), "%s", r->node);
	bool first = r->u_prev_ms == 0;
	if (!first && now > r->u_prev_ms && s.cpu_seconds >= r->u_prev.cpu_seconds)
		u.cpu = (s.cpu_seconds - r->u_prev.cpu_seconds) * 1000.0 /
			(double)(now - r->u_prev_ms);
	if (!first && s.has_quota && s.nr_periods > r->u_prev.nr_periods &&
	    s.nr_throttled >= r->u_prev.nr_throttled)
		u.throttled = (double)(s.nr_throttled - r->u_prev.nr_throttled) /
			      (double)(s.nr_periods - r->u_prev.nr_periods);
	r->u_prev = s;
	r->u_prev_ms = now;
	if (first)
		return; /* no rate yet */
	struct rv_err err = { 0 };
	if (rv_master_usage(r->hb, &u, &err) < 0)
		rv_log_debug("could not report usage", "reason=\"%s\"", err.msg);
	else
		rv_log_debug("usage reported",
			     "cpu=%.2f memory_mb=%lld procs=%d throttled=%.2f gpu_memory_mb=%lld",
			     u.cpu, (long long)u.memory_mb, s.nprocs, u.throttled,
			     (long long)u.gpu_memory_mb);
}

/* A sign that w trains though it may print nothing: a new step in its
 * flash checkpoint slots (the first look only learns the step there). */
static void hang_sign(struct run *r, struct worker *w, int64_t now)
{
	int64_t step = ckpt_newest(&r->ck, w->rank);
	if (w->ck_step != INT64_MIN && step != w->ck_step) {
		w->last_output_ms = now;
		w->lived = true;
	}
	w->ck_step = step;
}

static int on_timer(struct run *r, enum run_outcome *out)
{
	uint64_t ticks;
	if (read(r->tfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		return 0;
	struct rv_heartbeat_reply hb;
	struct rv_err err = { 0 };
	int64_t now = rv_mono_ms();
	if (rv_master_heartbeat(r->hb, r->node, &hb, &err) < 0) {
		rv_log_warn("could not send a heartbeat", "reason=\"%s\"", err.msg);
		/* cut off: the master has long declared this node dead and the
		 * others re-formed without it, so our workers wait on peers that
		 * are gone (gloo and NCCL for 30 min): stop them and rejoin */
		if (now - r->hb_ok_ms > (int64_t)r->f->rdzv_master_timeout_s * 1000) {
			rv_log_error("lost the master: stopping the workers to rendezvous again",
				     "silent_s=%lld master_timeout_s=%d",
				     (long long)((now - r->hb_ok_ms) / 1000),
				     r->f->rdzv_master_timeout_s);
			*out = OUT_REJOIN;
			return 1;
		}
	} else {
		r->hb_ok_ms = now;
		if (hb.rejoin || hb.round > r->round) {
			rv_log_info("the world changes: rendezvous again",
				    "round=%lld next=%lld waiting=%d", (long long)r->round,
				    (long long)hb.round, hb.waiting);
			*out = OUT_REJOIN;
			return 1;
		}
	}
	warm_check(r, 0);
	if (r->hb_ok_ms == now) /* a master that did not answer is not asked twice */
		report_usage(r, now);
	/* several nodes: only group rank 0's judges by output.  Scripts often
	 * print on rank 0 alone, so another node's silence says nothing (its
	 * check stopped a world that trained), while a hang anywhere stalls
	 * rank 0 at its next collective and node 0's report re-forms them all */
	if (r->f->hang_timeout_s <= 0 || (r->group_world_size > 1 && r->group_rank != 0))
		return 0;
	int64_t newest = 0, limit_ms = (int64_t)(r->f->hang_timeout_s * 1000);
	bool lived = false;
	for (int i = 0; i < r->nproc; i++)
		if (r->w[i].running) {
			hang_sign(r, &r->w[i], now);
			lived = lived || r->w[i].lived;
			if (r->w[i].last_output_ms > newest)
				newest = r->w[i].last_output_ms;
		}
	/* a group that showed no life yet may be importing its libraries (a
	 * cold start: 40 s on a busy machine, silent): a short timeout, which
	 * a job picks to find a stopped worker in seconds, waits for that */
	if (!lived && limit_ms < RUN_HANG_START_MS)
		limit_ms = RUN_HANG_START_MS;
	if (newest && now - newest > limit_ms) {
		for (int i = 0; i < r->nproc; i++)
			if (r->w[i].running)
				rv_log_error("worker hangs: no output", "rank=%d silent_s=%lld",
					     r->w[i].rank,
					     (long long)((now - r->w[i].last_output_ms) / 1000));
		*out = OUT_HANG;
		return 1;
	}
	return 0;
}

/* Wait for the group to end; no interval: every wake-up is an event. */
static enum run_outcome supervise(struct run *r)
{
	enum run_outcome out = OUT_DONE;
	for (;;) {
		struct epoll_event evs[32];
		int n = epoll_wait(r->epfd, evs, 32, -1);
		if (n < 0 && errno == EINTR)
			continue;
		for (int k = 0; k < n; k++) {
			enum run_tag tag = (enum run_tag)(evs[k].data.u64 >> 32);
			int idx = (int)(evs[k].data.u64 & 0xffffffffu);
			int sig;
			switch (tag) {
			case TAG_SIG:
				sig = take_signal(r);
				if (sig) {
					r->stop_sig = sig;
					return OUT_SIGNAL;
				}
				/* SIGCHLD: covers a kernel without pidfds */
				reap_strays(r);
				for (int i = 0; i < r->nproc; i++)
					if (check_exit(r, i, &out))
						return out;
				break;
			case TAG_TIMER:
				if (on_timer(r, &out))
					return out;
				break;
			case TAG_WATCH:
				if (worldwatch_take(r->watch) == r->round) {
					rv_log_info("the world changes: rendezvous again",
						    "round=%lld by=watch", (long long)r->round);
					return OUT_REJOIN;
				}
				break;
			case TAG_PIDFD:
				if (check_exit(r, idx, &out))
					return out;
				break;
			case TAG_OUT:
			case TAG_ERR:
				worker_pump(&r->w[idx], tag == TAG_OUT ? 0 : 1);
				break;
			}
		}
	}
}

/* ---- endings ---- */

static void print_summary(struct run *r, const char *why)
{
	fprintf(stderr, "rover-run: the job failed: %s\n", why);
	for (int i = 0; i < r->nproc; i++) {
		struct worker *w = &r->w[i];
		if (w->stopped || w->status == 0)
			continue;
		char how[96];
		fprintf(stderr, "  rank %d (local rank %d, node %s): %s\n", w->rank, w->local_rank,
			r->node, worker_describe(w->status, how, sizeof(how)));
		/* the last lines of its stderr */
		const char *start = w->tail;
		int lines = 0;
		for (const char *p = w->tail + w->tail_len; p > w->tail; p--)
			if (p[-1] == '\n' && ++lines > 20) {
				start = p;
				break;
			}
		/* what torch's @record wrote there, as torchrun's summary shows */
		if (w->error_file[0] && access(w->error_file, F_OK) == 0)
			fprintf(stderr, "    error_file: %s\n", w->error_file);
		if (w->tail_len == 0)
			fprintf(stderr, "    (no stderr)\n");
		else
			fprintf(stderr, "    --- stderr tail ---\n%.*s%s",
				(int)(w->tail + w->tail_len - start), start,
				w->tail[w->tail_len - 1] == '\n' ? "" : "\n");
	}
	fflush(stderr);
}

static void report_failure(struct run *r, const char *reason, int code)
{
	struct rv_failure_report fr = { .exit_code = code };
	snprintf(fr.node, sizeof(fr.node), "%s", r->node);
	snprintf(fr.reason, sizeof(fr.reason), "%s", reason);
	struct rv_err err = { 0 };
	if (rv_master_failure(r->mc, &fr, &err) < 0)
		rv_log_warn("could not report the failure", "reason=\"%s\"", err.msg);
}

/* Stopped by a signal (a spot reclaim, an eviction, ^C): the master hears
 * at once that this node leaves, before its workers are stopped, so the
 * other nodes re-form the world now instead of failing on a closed
 * connection or waiting for this node's heartbeats to time out. */
static void say_leaving(struct run *r)
{
	char reason[96];
	snprintf(reason, sizeof(reason), "leaving: rover-run stopped by signal %d (%s)",
		 r->stop_sig, strsignal(r->stop_sig));
	report_failure(r, reason, 128 + r->stop_sig);
}

/* Did the world move on without us (another node failed or left)?  Asked
 * after our own workers failed: in a world of several nodes a worker often
 * dies of a peer's death (a closed connection), and that is the other
 * node's failure, not ours.  The peer's report may trail our workers'
 * death by a little, so a worker that exited (rather than being killed by a
 * signal, which is this node's own fault) makes us ask twice. */
static bool world_moved_on(struct run *r, int status)
{
	if (r->group_world_size <= 1)
		return false;
	int tries = WIFSIGNALED(status) ? 1 : 2;
	for (int i = 0; i < tries; i++) {
		struct rv_heartbeat_reply hb;
		if (rv_master_heartbeat(r->mc, r->node, &hb, NULL) == 0 &&
		    (hb.rejoin || hb.round > r->round))
			return true;
		if (i + 1 < tries)
			usleep(RUN_PEER_REPORT_MS * 1000);
	}
	return false;
}

/* A hung group: SIGABRT to each worker still running (not its group), whose
 * faulthandler (PYTHONFAULTHANDLER, set by worker_env) writes every
 * thread's Python stack to stderr before it dies; then SIGCONT, since a
 * stopped worker (SIGSTOP, SIGTSTP: a hang too) holds the SIGABRT pending
 * and dumps nothing until continued.  Wait for them a little, log each
 * stack, and name the ranks in *names. */
static void capture_stacks(struct run *r, char *names, size_t size)
{
	size_t used = 0;
	names[0] = 0;
	for (int i = 0; i < r->nproc; i++)
		if (r->w[i].running) {
			kill(r->w[i].proc.pid, SIGABRT);
			kill(r->w[i].proc.pid, SIGCONT);
			int k = snprintf(names + used, size - used, "%s%d", used ? "," : "",
					 r->w[i].rank);
			if (k > 0 && (size_t)k < size - used)
				used += (size_t)k;
		}
	int64_t until = rv_mono_ms() + RUN_STACK_WAIT_MS;
	for (int i = 0; i < r->nproc; i++) {
		struct worker *w = &r->w[i];
		int st;
		int64_t left = until - rv_mono_ms();
		if (!w->running || rv_proc_wait(&w->proc, left > 0 ? (int)left : 0, &st) < 0)
			continue;
		reaped(r, w, st);
		const char *dump =
			w->tail_len ? memmem(w->tail, w->tail_len, "Fatal Python error", 18) : NULL;
		char q[2 * WORKER_TAIL], stack[2 * WORKER_TAIL];
		size_t n = 0;
		/* one log line: its lines joined with " | " */
		for (const char *p = dump; p && p < w->tail + w->tail_len && n + 4 < sizeof(stack);
		     p++) {
			if (*p != '\n')
				stack[n++] = *p;
			else if (p + 1 < w->tail + w->tail_len && p[1] != '\n' && n > 0) {
				memcpy(stack + n, " | ", 3);
				n += 3;
			}
		}
		stack[n] = 0;
		rv_log_error("hung worker's stack", "rank=%d stack=%s", w->rank,
			     rv_log_q(q, sizeof(q),
				      stack[0] ? stack : "(none: not a Python worker?)"));
	}
}

/* After a failed group: -1 to restart, or the exit code. */
static int after_failure(struct run *r, enum run_outcome o)
{
	char reason[256], how[96];
	int code = -1;
	if (o == OUT_FAILED && world_moved_on(r, r->w[r->failed].status)) {
		rv_log_warn("workers failed after the world changed: rendezvous again",
			    "rank=%d round=%lld", r->w[r->failed].rank, (long long)r->round);
		return -1;
	}
	if (o == OUT_HANG) {
		snprintf(reason, sizeof(reason), "ranks %s hung: no output for %.0f s", r->hung,
			 r->f->hang_timeout_s);
	} else {
		struct worker *fw = &r->w[r->failed];
		worker_describe(fw->status, how, sizeof(how));
		snprintf(reason, sizeof(reason), "rank %d %s", fw->rank, how);
		code = WIFEXITED(fw->status) ? WEXITSTATUS(fw->status) : -WTERMSIG(fw->status);
		char tb[WORKER_TAIL];
		worker_traceback(fw, tb, sizeof(tb));
		if (tb[0] && !strcmp(tb, r->last_tb)) {
			fprintf(stderr,
				"rover-run: stopping: rank %d failed with the same Python "
				"traceback "
				"on two starts in a row; that is an error in the script, which "
				"restarts would not fix:\n%s%s",
				fw->rank, tb, tb[strlen(tb) - 1] == '\n' ? "" : "\n");
			report_failure(r, reason, code);
			return RUN_EXIT_FAILED;
		}
		snprintf(r->last_tb, sizeof(r->last_tb), "%s", tb);
	}
	report_failure(r, reason, code);
	if (r->restarts >= r->f->max_restarts) {
		char why[320];
		snprintf(why, sizeof(why), "%s, after %d restart(s) of %d", reason, r->restarts,
			 r->f->max_restarts);
		print_summary(r, why);
		return RUN_EXIT_FAILED;
	}
	r->restarts++;
	rv_log_warn("restarting the workers", "restart=%d max_restarts=%d reason=\"%s\"",
		    r->restarts, r->f->max_restarts, reason);
	return -1;
}

/* ---- setup ---- */

/* The interface holding --local-addr, for the workers' collectives
 * (worker.h sock_ifname); an address no interface here holds (behind a
 * NAT, say) leaves gloo's own choice, and says so. */
static void local_ifname(struct run *r)
{
	int rc = netif_of_addr(r->local_addr, r->sock_if, sizeof(r->sock_if));
	if (rc == 0)
		rv_log_info("workers' sockets", "interface=%s local_addr=%s%s", r->sock_if,
			    r->local_addr,
			    getenv("GLOO_SOCKET_IFNAME") ? " (GLOO_SOCKET_IFNAME set: kept)" : "");
	else
		rv_log_warn("workers' sockets",
			    "no interface of this machine holds --local-addr %s (%s): gloo picks "
			    "the host name's address unless GLOO_SOCKET_IFNAME is set",
			    r->local_addr, strerror(-rc));
	if (rc < 0)
		r->sock_if[0] = 0;
}

static int find_master(struct run *r, struct rv_err *err)
{
	const char *env = getenv("ROVER_MASTER_ADDR");
	const char *ep = r->f->rdzv_endpoint[0] ? r->f->rdzv_endpoint : env && env[0] ? env : NULL;
	if (ep) {
		if (!strncmp(ep, "http://", 7))
			ep += 7;
		snprintf(r->master_addr, sizeof(r->master_addr), "%s", ep);
		return 0;
	}
	if (!r->f->standalone && r->f->nnodes_max > 1)
		return rv_err_set(err, -EINVAL, "--rdzv-endpoint",
				  "--nnodes %d:%d needs a master: --rdzv-endpoint HOST:PORT (or "
				  "$ROVER_MASTER_ADDR)",
				  r->f->nnodes_min, r->f->nnodes_max);
	int rc = standalone_start(&r->sa, r->f, err);
	r->have_sa = true;
	if (rc < 0)
		return rc;
	snprintf(r->master_addr, sizeof(r->master_addr), "%s", r->sa.addr);
	rv_log_info("started a private master", "addr=%s", r->sa.addr);
	return 0;
}

/* Start the warm interpreter without waiting for its imports (the first
 * workers may start cold meanwhile): Python workers only, unless turned off
 * by --no-warm or ROVER_WARM=0.  Called by the supervisor's thread, which
 * the forked workers' PDEATHSIG hangs from. */
static void warm_setup(struct run *r)
{
	const char *env = getenv("ROVER_WARM");
	const char *off = r->f->no_python            ? "--no-python"
			  : r->f->no_warm            ? "--no-warm"
			  : env && !strcmp(env, "0") ? "ROVER_WARM=0"
						     : NULL;
	if (off) {
		rv_log_info("warm interpreter off: workers start cold", "by=%s", off);
		return;
	}
	/* Several workers get OMP_NUM_THREADS=1 (worker_env, as torchrun does);
	 * the interpreter they are forked from must load its libraries with the
	 * same, or a threaded BLAS (OpenBLAS's pthread build) starts a pool at
	 * import and no fork is safe. */
	if (r->nproc > 1 && !getenv("OMP_NUM_THREADS"))
		setenv("OMP_NUM_THREADS", "1", 1);
	struct rv_err e = { 0 };
	/* the workers' own interpreter, so that warm and cold run alike; one
	 * standby more for each round of --network-check's collective, which
	 * forks none in their place (netprobe.c); they stay, idle, for the
	 * job's life (a standby is a fork sharing the interpreter's pages) */
	bool coll = r->f->network_check && !r->f->no_python;
	struct warm_opts o = { .python = r->python,
			       .log_fd = STDERR_FILENO,
			       .standby = r->nproc + (coll ? NETPROBE_ROUNDS : 0) };
	char imports[600];
	const char *more = r->f->warm_import[0] ? r->f->warm_import : getenv("ROVER_WARM_IMPORT");
	if (more && more[0]) {
		snprintf(imports, sizeof(imports), "torch,torch.distributed,%.512s", more);
		o.imports = imports;
	}
	char q[300];
	if (warm_begin(&r->warm, &o, &e) < 0)
		rv_log_warn("warm interpreter unavailable: workers start cold", "reason=%s",
			    rv_log_q(q, sizeof(q), e.msg));
	else
		rv_log_info("warm interpreter starting", "pid=%d python=%s standby=%d",
			    (int)r->warm.proc.pid, r->python, o.standby);
}

/* The workers' c10d store in rover-run (tcpstore.h), as torchrun's
 * TORCHELASTIC_USE_AGENT_STORE: unless ROVER_AGENT_STORE=0 (on every node:
 * the workers of one world must agree on who hosts it) or torchrun's static
 * flags put the store at a fixed address, which rank 0 then hosts. */
static void store_setup(struct run *r)
{
	const struct flags *f = r->f;
	const char *env = getenv("ROVER_AGENT_STORE");
	const char *off = env && !strcmp(env, "0") ? "ROVER_AGENT_STORE=0"
			  : f->node_rank >= 0      ? "--node-rank"
			  : f->master_addr[0]      ? "--master-addr"
			  : f->master_port         ? "--master-port"
						   : NULL;
	struct rv_err e = { 0 };
	if (!off && !(r->store = tcpstore_new(&e)))
		off = e.msg;
	if (off)
		rv_log_info("store hosted by rank 0", "by=\"%s\"", off);
}

/* --auto-config (DLRover's): the workers per node from the master's job
 * spec (its GPUs per worker node) and this host (its GPUs, else its CPUs),
 * unless --nproc-per-node was given; the node count is the spec's. */
static int auto_config(struct run *r, struct rv_err *err)
{
	struct rv_job_status *js = calloc(1, sizeof(*js));
	if (!js)
		return -ENOMEM;
	int rc = rv_master_job(r->mc, js, err);
	if (rc < 0) {
		free(js);
		return rc;
	}
	const struct rv_role_target *t = js->has_desired ? &js->desired[RV_ROLE_WORKER] : NULL;
	int nnodes = t && t->present ? t->count : js->nnodes;
	int spec_gpu = t && t->present ? t->gpu : 0;
	free(js);
	const char *from = "--nproc-per-node";
	if (!r->f->nproc_given) {
		if (spec_gpu > 0) {
			r->nproc = spec_gpu;
			from = "the job spec's GPUs per node";
		} else {
			struct flags auto_f = *r->f;
			auto_f.nproc_kind = FLAGS_NPROC_AUTO;
			const struct flags *keep = r->f;
			r->f = &auto_f;
			r->nproc = resolve_nproc(r);
			r->f = keep;
			from = r->gpu.count > 0 ? "this node's GPUs" : "this node's CPUs";
		}
	}
	rv_log_info("auto-config", "nnodes=%d nproc=%d nproc_from=\"%s\"", nnodes, r->nproc, from);
	return 0;
}

/* Where the log files go.  Without --log-dir, a stream that -r or -t sends
 * to a file goes, as under torchrun, to a new folder in $TMPDIR, named in
 * the log and kept afterwards: a redirected stream stays off the console. */
static int log_dir_setup(struct run *r, struct rv_err *err)
{
	const struct flags *f = r->f;
	if (f->log_dir[0] || !(flags_std_any(&f->redirects) || flags_std_any(&f->tee))) {
		snprintf(r->log_dir, sizeof(r->log_dir), "%s", f->log_dir);
		return 0;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(r->log_dir, sizeof(r->log_dir), "%s/rover-run_XXXXXX",
		 tmp && tmp[0] && strlen(tmp) < 400 ? tmp : "/tmp");
	if (!mkdtemp(r->log_dir)) {
		int e = errno;
		return rv_err_set(err, -e, "--log-dir", "could not create a log folder in %s: %s",
				  tmp && tmp[0] ? tmp : "/tmp", strerror(e));
	}
	rv_log_info("log directory set", "dir=%s", r->log_dir);
	return 0;
}

static int setup(struct run *r, struct rv_err *err)
{
	const struct flags *f = r->f;
	int rc = log_dir_setup(r, err);
	if (rc < 0)
		return rc;
	worker_trainer_env();
	probe_gpus(r);
	r->nproc = resolve_nproc(r);
	if (r->nproc < 0)
		return rv_err_set(err, -EINVAL, "--nproc-per-node",
				  "--nproc-per-node gpu: no GPU on this node (%s)", r->gpu.why);
	const char *py = getenv("PYTHON_EXEC");
	r->python = py && py[0] ? py : "python3";

	char host[128] = "localhost";
	gethostname(host, sizeof(host) - 1);
	const char *name = getenv("ROVER_NODE_NAME");
	if (name && name[0])
		snprintf(r->node, sizeof(r->node), "%s", name);
	else
		snprintf(r->node, sizeof(r->node), "%.40s-%d", host, (int)f->pid);
	/* a DNS-1123 label, as the master wants names */
	for (char *c = r->node; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
		else if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
			*c = '-';

	rc = find_master(r, err);
	if (rc < 0)
		return rc;
	if (f->local_addr[0]) {
		snprintf(r->local_addr, sizeof(r->local_addr), "%s", f->local_addr);
		local_ifname(r);
	} else
		snprintf(r->local_addr, sizeof(r->local_addr), "%s",
			 is_loopback(r->master_addr) ? "127.0.0.1" : host);

	char url[320];
	snprintf(url, sizeof(url), "http://%s", r->master_addr);
	struct rv_master_opts mo = { .url = url,
				     .connect_timeout_ms = 2000,
				     .timeout_ms = 5000,
				     .max_attempts = 5,
				     .retry_budget_ms = 10000 };
	r->mc = rv_master_client_new(&mo, err);
	if (!r->mc)
		return err->code ? err->code : -ENOMEM;
	struct rv_master_opts ho = {
		.url = url, .connect_timeout_ms = 1000, .timeout_ms = 2000, .max_attempts = 1
	};
	r->hb = rv_master_client_new(&ho, err);
	if (!r->hb)
		return err->code ? err->code : -ENOMEM;
	if (f->auto_config && (rc = auto_config(r, err)) < 0)
		return rc;
	struct rv_err we = { 0 };
	if (f->nnodes_max > 1 && !(r->watch = worldwatch_start(url, r->node, &we)))
		rv_log_warn("world changes heard by heartbeat only", "reason=\"%s\"", we.msg);
	if (r->gpu.count > 0 && r->nproc > r->gpu.count)
		rv_log_warn("more workers than GPUs: local ranks share devices", "nproc=%d gpus=%d",
			    r->nproc, r->gpu.count);
	/* worker_env gives each worker OMP_NUM_THREADS=1: say so, as torchrun
	 * does, since it slows down a worker that computes on the CPU */
	if (r->nproc > 1 && !getenv("OMP_NUM_THREADS"))
		rv_log_warn("OMP_NUM_THREADS set to 1 for every worker: tune it for your "
			    "application",
			    "nproc=%d", r->nproc);
	r->w = calloc((size_t)r->nproc, sizeof(*r->w));
	if (!r->w)
		return -ENOMEM;
	for (int i = 0; i < r->nproc; i++)
		r->w[i].proc.pidfd = r->w[i].out[0].fd = r->w[i].out[1].fd = -1;
	if ((rc = ckpt_begin(&r->ck, f, r->have_sa, r->mc, r->master_addr, err)) < 0)
		return rc;

	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGCHLD);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* orphans of the workers come to us, for teardown's rv_proc_kill_strays */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		rv_log_warn("could not become a child subreaper", "reason=\"%s\"", strerror(errno));
	r->sigfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	r->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (r->sigfd < 0 || r->tfd < 0 || r->epfd < 0)
		return rv_err_set(err, -errno, "", "could not set up the event loop: %s",
				  strerror(errno));
	struct itimerspec it = {
		.it_interval = { RUN_HEARTBEAT_MS / 1000, (RUN_HEARTBEAT_MS % 1000) * 1000000L },
		.it_value = { RUN_HEARTBEAT_MS / 1000, (RUN_HEARTBEAT_MS % 1000) * 1000000L }
	};
	timerfd_settime(r->tfd, 0, &it, NULL);
	ep_add(r, r->sigfd, TAG_SIG, 0);
	ep_add(r, r->tfd, TAG_TIMER, 0);
	if (r->watch)
		ep_add(r, worldwatch_fd(r->watch), TAG_WATCH, 0);
	warm_setup(r);
	store_setup(r);
	rv_log_info("rover-run starting",
		    "node=%s master=%s nproc=%d nnodes=%d:%d "
		    "max_restarts=%d script=%s",
		    r->node, r->master_addr, r->nproc, f->nnodes_min, f->nnodes_max,
		    f->max_restarts, f->script);
	return 0;
}

/* Tell the master every worker here finished, before the teardown (a
 * checkpoint's drain may outlast the heartbeat timeout): a peer still in
 * its last steps is then not stopped for a new round. */
static void say_finished(struct run *r)
{
	struct rv_err err = { 0 };
	if (rv_master_finished(r->mc, r->node, &err) < 0)
		rv_log_warn("could not tell the master this node finished", "reason=\"%s\"",
			    err.msg);
}

static void teardown(struct run *r)
{
	if (r->w) {
		group_stop(r, RUN_STOP_GRACE_MS);
		free(r->w);
		r->w = NULL;
	}
	ckpt_stop(&r->ck, true);
	r->store = tcpstore_free(r->store);
	r->watch = worldwatch_stop(r->watch);
	warm_stop(&r->warm);
	rv_master_client_free(r->mc);
	rv_master_client_free(r->hb);
	if (r->have_sa)
		standalone_stop(&r->sa);
	/* What the workers started and left behind (a child in a session of
	 * its own) was reparented here: in the job's PID namespace it would
	 * die with us anyway, without one this is the last look at it. */
	int k = rv_proc_kill_strays(RUN_STOP_GRACE_MS);
	if (k < 0)
		rv_log_warn("could not stop every process the workers left", "reason=\"%s\"",
			    strerror(-k));
	if (r->epfd >= 0)
		close(r->epfd);
	if (r->tfd >= 0)
		close(r->tfd);
	if (r->sigfd >= 0)
		close(r->sigfd);
}

int run_job(const struct flags *f)
{
	struct run *r = calloc(1, sizeof(*r));
	if (!r)
		return RUN_EXIT_FAILED;
	r->f = f;
	r->epfd = r->sigfd = r->tfd = -1;
	r->warm.sock = -1;
	rv_proc_init(&r->warm.proc);
	struct rv_err err = { 0 };
	int code = -1;
	int rc = setup(r, &err);
	if (rc < 0) {
		fprintf(stderr, "rover-run: %s\n", err.msg[0] ? err.msg : strerror(-rc));
		code = rc == -EINVAL ? RUN_EXIT_USAGE : RUN_EXIT_FAILED;
	}
	while (code < 0) {
		rc = rendezvous(r, &err);
		if (rc == -EINTR) {
			say_leaving(r);
			break;
		}
		if (rc < 0) {
			fprintf(stderr, "rover-run: %s\n", err.msg);
			code = rc == -EINVAL ? RUN_EXIT_USAGE : RUN_EXIT_FAILED;
			break;
		}
		rc = net_check(r);
		if (rc == 1)
			continue;
		if (rc < 0) {
			code = RUN_EXIT_FAILED;
			break;
		}
		store_after_check(r);
		rc = group_start(r, &err);
		enum run_outcome o;
		if (rc < 0) {
			group_stop(r, RUN_STOP_GRACE_MS);
			fprintf(stderr, "rover-run: %s\n", err.msg);
			code = RUN_EXIT_FAILED;
			break;
		}
		o = supervise(r);
		if (o == OUT_SIGNAL)
			say_leaving(r);
		if (o == OUT_HANG)
			capture_stacks(r, r->hung, sizeof(r->hung));
		group_stop(r, RUN_STOP_GRACE_MS);
		switch (o) {
		case OUT_DONE:
			rv_log_info("every worker finished", "restarts=%d", r->restarts);
			say_finished(r);
			code = RUN_EXIT_OK;
			break;
		case OUT_SIGNAL:
		case OUT_REJOIN:
			break;
		case OUT_FAILED:
		case OUT_HANG:
			ckpt_breakpoint(&r->ck);
			code = after_failure(r, o);
			break;
		}
		if (o == OUT_SIGNAL)
			break;
	}
	if (r->stop_sig) {
		rv_log_warn("stopping on a signal", "signal=%d", r->stop_sig);
		code = 128 + r->stop_sig;
	}
	teardown(r);
	free(r);
	return code;
}
