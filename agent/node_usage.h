/*
 * node_usage.h: this node's resource usage as rover-run reports it to the master
 * (POST /v1/usage): the CPU time and resident memory of rover-run's process
 * tree (its workers, the warm interpreter and what they started; a subtree
 * can be left out, the private master's), and the CPU throttling of
 * rover-run's own cgroup when it has a CPU quota (cgroup v2 cpu.max and
 * cpu.stat, or v1 cpu.cfs_quota_us and cpu.stat).  GPU memory comes from
 * common/gpu.h.  Reads /proc and /sys through common/usage.h; no thread,
 * no state.
 */
#ifndef AGENT_NODE_USAGE_H
#define AGENT_NODE_USAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct node_usage_sample {
	double cpu_seconds; /* the tree's CPU time, its reaped children's included */
	int64_t rss_bytes;  /* the tree's resident memory now */
	int nprocs;         /* processes counted */
	/* rover-run's cgroup, when it (or a parent) has a CPU quota */
	bool has_quota;
	double quota_cores;
	int64_t nr_periods, nr_throttled, throttled_us;
};

/* CPU time and RSS of root and its live descendants, leaving out skip and
 * its descendants (skip <= 0: none), into cpu_seconds, rss_bytes and
 * nprocs.  0, -ESRCH when root is gone, or a negative errno reading /proc. */
int node_usage_tree(pid_t root, pid_t skip, struct node_usage_sample *out);

/* The CPU quota and throttling of the cgroup that proc_cgroup (the text of
 * /proc/PID/cgroup) names, under the cgroup mount cg_root ("/sys/fs/cgroup"):
 * v2 ("0::/path": cpu.max, cpu.stat nr_periods/nr_throttled/throttled_usec)
 * or v1 (the "cpu" hierarchy: cpu.cfs_quota_us, cpu.cfs_period_us, cpu.stat
 * throttled_time in ns).  The nearest folder from the cgroup up to the
 * mount that has a quota counts (a container sees its cgroup as the mount
 * itself).  0 with has_quota and the counters set; -ENOENT when no folder
 * has a quota (or the cgroup is not found). */
int node_usage_cgroup(const char *cg_root, const char *proc_cgroup, struct node_usage_sample *out);

#endif
