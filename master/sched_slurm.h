/*
 * sched_slurm.h: the "slurm" scheduler backend: each node is a Slurm job of
 * one node, submitted, cancelled and watched through slurmrestd.
 *
 * launch submits the node's command as a batch job (cpus, memory and GPUs
 * from its resources, the master's environment without SLURM_* plus the
 * node's, output to the node log); remove cancels it (SIGTERM, then SIGKILL
 * once the grace passed); resize is -EOPNOTSUPP (the node manager
 * relaunches).  A worker thread does every request (each with a timeout)
 * and polls the jobs' states every poll_ms; what it sees becomes events on
 * an eventfd: RUNNING -> STARTED (pid: the Slurm job id, start_ticks: its
 * start time, host: its Slurm node), COMPLETED/FAILED/CANCELLED/TIMEOUT ->
 * EXITED with the exit code or signal, OUT_OF_MEMORY -> OOM, NODE_FAIL,
 * PREEMPTED and BOOT_FAIL -> EXITED with lost set; a job pending longer than
 * pend_max_ms is cancelled and FAILED (-ETIMEDOUT) naming Slurm's reason;
 * a job Slurm requeued is taken as lost too (and killed), and the Slurm
 * nodes that lost one, with the spec's avoid list, are excluded from later
 * jobs (never every node of the partition).  Each poll asks for each of
 * its jobs by id.  Jobs outlive the master: adopt takes a job id back, or
 * with pid 0 finds the job by its name (rover-<job>-<instance>).
 *
 * The REST API version is read from the server's /openapi at start; the
 * JSON shape of each version (v0.0.38 of Slurm 22.05, v0.0.40-44 of 24.05 to
 * 25.11) is in sched_slurm.c's version table.  Same threading as sched.h.
 */
#ifndef SCHED_SLURM_H
#define SCHED_SLURM_H

#include <stdint.h>

#include "sched.h"

/* Borrowed for the call; zero means default. */
struct sched_slurm_opts {
	/* "unix:/path/slurmrestd.socket" or "http://host:port" */
	const char *url;
	const char *token;     /* JWT sent as X-SLURM-USER-TOKEN; NULL or "": none */
	const char *user;      /* X-SLURM-USER-NAME with a token; NULL or "": none */
	const char *partition; /* NULL or "": the cluster's default */
	const char *account;   /* NULL or "": the user's default */
	const char *job;       /* Slurm job names are rover-<job>-<instance>; NULL: "job" */
	const char *workdir;   /* each job's working folder; NULL: ours */
	const char *log_dir;   /* a spec without log_path logs to <log_dir>/<name>.log */
	int poll_ms;           /* how often job states are read: 0 is 500 */
	int timeout_ms;        /* each request: 0 is 10000 */
	int64_t pend_max_ms;   /* a job pending this long fails: 0 never */
	int max_nodes;         /* live nodes at most: 0 is 1024 */
};

/* A new Slurm backend; asks the server for its API version first (one
 * request, opts.timeout_ms).  Returns NULL with err filled: -EINVAL bad
 * opts, -ECONNREFUSED (or curl's errno) when slurmrestd cannot be reached,
 * -EPROTONOSUPPORT when it offers no version known here.  Free with
 * sched_free(). */
struct sched *sched_slurm_new(const struct sched_slurm_opts *o, struct rv_err *err);

/* The API version in use ("v0.0.38"); owned by s. */
const char *sched_slurm_version(struct sched *s);

/* A live node's Slurm job id, 0 before it was submitted, -1 unknown node. */
int64_t sched_slurm_job_id(struct sched *s, const char *name);

#endif
