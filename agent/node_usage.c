/* node_usage.c: see node_usage.h; the reading is common/usage.h's. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cleanup.h"
#include "node_usage.h"
#include "usage.h"

int node_usage_tree(pid_t root, pid_t skip, struct node_usage_sample *out)
{
	struct rv_proc_tree t;
	int rc = rv_usage_proc_tree(NULL, root, skip, &t);
	if (rc < 0)
		return rc;
	out->cpu_seconds = (double)t.ticks / (double)rv_usage_clk_tck();
	out->rss_bytes = t.rss_kb * 1024;
	out->nprocs = t.nprocs;
	return 0;
}

int node_usage_cgroup(const char *cg_root, const char *proc_cgroup, struct node_usage_sample *out)
{
	/* v1's cpu hierarchy wins over "0::": the cpu controller is then
	 * mounted apart (as cpu,cpuacct, or cpu beside it) */
	static const char *const v1_mounts[] = { "cpu,cpuacct", "cpu" };
	char rel[600], mnt[700] = "";
	enum rv_cgroup_mode mode = RV_CGROUP_V1;
	if (rv_usage_parse_pid_cgroup(proc_cgroup, RV_CGROUP_V1, "cpu", rel, sizeof(rel)) == 0) {
		for (size_t i = 0; i < RV_ARRAY_SIZE(v1_mounts) && !mnt[0]; i++) {
			struct stat st;
			snprintf(mnt, sizeof(mnt), "%s/%s", cg_root, v1_mounts[i]);
			if (stat(mnt, &st) < 0)
				mnt[0] = 0;
		}
	} else if (rv_usage_parse_pid_cgroup(proc_cgroup, RV_CGROUP_V2, "", rel, sizeof(rel)) ==
		   0) {
		mode = RV_CGROUP_V2;
		snprintf(mnt, sizeof(mnt), "%s", cg_root);
	}
	struct rv_cgroup_cpu c;
	if (!mnt[0] || rv_usage_cgroup_quota(mode, mnt, rel, &c, NULL, 0) < 0)
		return -ENOENT;
	out->has_quota = true;
	out->quota_cores = c.quota_cores;
	out->nr_periods = c.has_periods ? c.nr_periods : -1;
	out->nr_throttled = c.has_periods ? c.nr_throttled : -1;
	out->throttled_us = c.has_periods ? (int64_t)c.throttled_us : -1;
	return 0;
}
