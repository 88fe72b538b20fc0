/*
 * sched_local.h: the "local" scheduler backend: each node is a process
 * group on this machine, in its own cgroup with its resource limits.
 *
 * Limits, in the order tried by SCHED_LOCAL_AUTO: cgroup v2 (memory.max,
 * cpu.max; usable only where the memory and cpu controllers can be enabled
 * below our own cgroup), cgroup v1 (the memory hierarchy, with cpu and
 * cpuacct when present: memory.limit_in_bytes (+memsw), cpu.cfs_quota_us),
 * then rlimits (RLIMIT_AS for memory, no CPU limit, no OOM detection).  All
 * node cgroups sit under one parent, rover/<job>-<pid>, below the master's
 * own cgroup in each hierarchy; it is removed by sched_free().  Each node
 * joins its cgroup before exec (common/proc), gets SIGKILL when the master
 * dies (PR_SET_PDEATHSIG) unless detached, and its cgroup is removed once it
 * exited.  A detached node left by a killed master is adopted by the next
 * one: a pidfd on its pid once its start time matches, its cgroups found
 * from /proc/<pid>/cgroup.
 *
 * Same threading as sched.h: one owner thread.
 */
#ifndef SCHED_LOCAL_H
#define SCHED_LOCAL_H

#include "sched.h"

enum sched_local_mode {
	SCHED_LOCAL_AUTO = 0, /* v2 if usable, else v1, else rlimits */
	SCHED_LOCAL_CGROUP2,
	SCHED_LOCAL_CGROUP1,
	SCHED_LOCAL_RLIMIT,
	SCHED_LOCAL_NONE, /* no limits at all (tests, trusted commands) */
};

/* Borrowed for the call; zero means default. */
struct sched_local_opts {
	const char *job; /* names the parent cgroup rover/<job>-<pid>: [A-Za-z0-9._-], NULL: "job" */
	enum sched_local_mode mode;
	const char *
		log_dir; /* a spec without log_path logs to <log_dir>/<name>.log; NULL: our stderr */
	int max_nodes;   /* live nodes at most: 0 is 1024 */
	/* Nodes outlive the master: their own session and no PR_SET_PDEATHSIG,
	 * so a restarted master adopts them (sched_adopt).  false: they get
	 * SIGKILL when the master dies. */
	bool detach;
};

/* A new local backend.  Returns NULL with err filled: -EOPNOTSUPP when the
 * mode asked for cannot be used here (err says why), -EINVAL bad opts, or a
 * system error.  Free with sched_free(). */
struct sched *sched_local_new(const struct sched_local_opts *o, struct rv_err *err);

/* The limits in use (never AUTO) and why: which mode, and why the ones tried
 * before it were unusable ("cgroup v2: no memory controller in ...").  The
 * string is owned by s. */
enum sched_local_mode sched_local_mode(struct sched *s, const char **why);

/* "cgroup2", "cgroup1", "rlimit", "none", "auto". */
const char *sched_local_mode_name(enum sched_local_mode m);

/* The parent cgroup directory in the memory hierarchy (v1) or the unified one
 * (v2), "" without cgroups; owned by s.  For tests and logs. */
const char *sched_local_cgroup(struct sched *s);

/* The cgroup directory of a live node in that hierarchy, or NULL. */
const char *sched_local_node_cgroup(struct sched *s, const char *name);

#endif
