/*
 * source_host.c: the host source: one node sample per tick of the machine
 * the monitor runs on, from common/usage.h.
 *
 * CPU capacity is the online CPUs and its use the busy share of /proc/stat
 * between ticks; memory is MemTotal and MemTotal - MemAvailable; pressure
 * is PSI's "some avg10" of cpu, memory and io; GPUs come from rover-gpuinfo
 * (common/gpu.h), probed at open and every gpu_interval_s, never in this
 * process.  Each Rover job on the host (its processes carry ROVER_JOB_NAME
 * or sit in a rover/ cgroup) gets its cores, RSS, process count and the CPU
 * periods its cgroup was throttled since the previous tick.
 *
 * Owned by the sampler thread (see source.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "monitor.h"
#include "usage.h"

#define MAX_SCAN_JOBS RV_MAX_CLUSTER_JOBS

/* The throttle counter of a job's cgroup at the previous tick. */
struct job_prev {
	char name[RV_USAGE_JOB_NAME_MAX];
	int64_t nr_throttled;
};

struct host {
	const struct monitor_cfg *cfg;
	struct rv_usage_scanner *scan;
	enum rv_cgroup_mode mode;
	char mnt[256];
	struct rv_cpu_times cpu_prev;
	int64_t prev_ms;
	long hz;
	struct rv_gpu_info gpu;
	bool gpu_probed;
	int64_t gpu_at_ms;
	struct job_prev prev[MAX_SCAN_JOBS];
	int nprev;
	struct rv_usage_job jobs[MAX_SCAN_JOBS];
	int procs_scanned, njobs;
};

static void probe_gpus(struct host *h, int64_t now_ms)
{
	struct rv_err e = { 0 };
	struct rv_gpu_info g;
	if (rv_gpu_probe(&g, 10000, &e) == 0) {
		h->gpu = g;
	} else {
		h->gpu.count = 0;
		snprintf(h->gpu.why, sizeof(h->gpu.why), "%.159s", e.msg);
	}
	h->gpu_probed = true;
	h->gpu_at_ms = now_ms;
}

static int host_open(const struct monitor_cfg *cfg, void **out, struct rv_err *err)
{
	struct host *h = calloc(1, sizeof(*h));
	if (!h || !(h->scan = rv_usage_scanner_new(NULL))) {
		free(h);
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	}
	h->cfg = cfg;
	h->hz = sysconf(_SC_CLK_TCK);
	h->mode = rv_usage_cgroup_mode(h->mnt, sizeof(h->mnt));
	int rc = rv_usage_cpu_times(&h->cpu_prev);
	if (rc < 0) {
		rv_usage_scanner_free(h->scan);
		free(h);
		return rv_err_set(err, rc, "", "could not read /proc/stat: %s", strerror(-rc));
	}
	h->prev_ms = report_now_ms();
	/* a first scan, so the first tick has differences to report */
	h->njobs = rv_usage_scan_jobs(h->scan, h->jobs, MAX_SCAN_JOBS, &h->procs_scanned);
	if (cfg->gpu_interval_s > 0)
		probe_gpus(h, h->prev_ms);
	*out = h;
	return 0;
}

/* Periods the job's cgroup was throttled since the last tick (0 the first
 * time, or outside a cgroup of its own). */
static int64_t job_throttled(struct host *h, const struct rv_usage_job *j, struct job_prev *next,
			     int *nnext)
{
	char dir[512];
	struct rv_cgroup_cpu c;
	if (h->mode == RV_CGROUP_NONE ||
	    rv_usage_pid_cgroup(j->first_pid, h->mode, h->mnt, "cpu", dir, sizeof(dir)) < 0 ||
	    rv_usage_cgroup_cpu(h->mode, dir, &c) < 0)
		return 0;
	int64_t d = 0;
	for (int i = 0; i < h->nprev; i++)
		if (!strcmp(h->prev[i].name, j->name) && c.nr_throttled >= h->prev[i].nr_throttled)
			d = c.nr_throttled - h->prev[i].nr_throttled;
	if (*nnext < MAX_SCAN_JOBS) {
		snprintf(next[*nnext].name, sizeof(next[*nnext].name), "%s", j->name);
		next[(*nnext)++].nr_throttled = c.nr_throttled;
	}
	return d;
}

/* Job names go on the wire: letters, digits, '.', '_', '-' only. */
static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= RV_NAME_MAX)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
			return false;
	return true;
}

static double psi10(const char *what)
{
	char path[64];
	struct rv_psi p;
	snprintf(path, sizeof(path), "/proc/pressure/%s", what);
	return rv_usage_psi(path, &p) == 0 ? p.some_avg10 : -1;
}

static int host_sample(void *state, int64_t ts_ms, struct rv_cluster_node *nodes, int max,
		       struct rv_err *err)
{
	struct host *h = state;
	if (max < 1)
		return 0;
	struct rv_cluster_node *n = &nodes[0];
	struct rv_cpu_times cur;
	struct rv_meminfo mem;
	int rc;
	if ((rc = rv_usage_cpu_times(&cur)) < 0)
		return rv_err_set(err, rc, "", "could not read /proc/stat: %s", strerror(-rc));
	if ((rc = rv_usage_meminfo(&mem)) < 0)
		return rv_err_set(err, rc, "", "could not read /proc/meminfo: %s", strerror(-rc));
	int64_t now = report_now_ms();
	double elapsed_s = (double)(now - h->prev_ms) / 1000.0;

	snprintf(n->name, sizeof(n->name), "%s", h->cfg->node);
	n->ts_ms = ts_ms;
	n->cpu = cur.ncpu;
	n->cpu_used = rv_usage_cpu_busy(&h->cpu_prev, &cur);
	if (n->cpu_used > n->cpu)
		n->cpu_used = n->cpu;
	n->memory_mb = mem.total_kb / 1024;
	n->memory_used_mb = (mem.total_kb - mem.available_kb) / 1024;
	n->ready = true;
	n->cpu_pressure = psi10("cpu");
	n->memory_pressure = psi10("memory");
	n->io_pressure = psi10("io");
	h->cpu_prev = cur;

	if (h->cfg->gpu_interval_s > 0 && now - h->gpu_at_ms >= h->cfg->gpu_interval_s * 1000)
		probe_gpus(h, now);
	n->gpu = h->gpu.count > RV_MAX_GPU ? RV_MAX_GPU : h->gpu.count;
	n->gpu_memory_used_mb = -1;
	n->gpu_util_pct = -1;
	if (h->gpu_probed && h->gpu.count > 0) {
		double util = 0;
		int known = 0;
		n->gpu_memory_used_mb = 0;
		for (int i = 0; i < h->gpu.count && i < RV_GPU_MAX; i++) {
			n->gpu_memory_used_mb += h->gpu.dev[i].total_mb - h->gpu.dev[i].free_mb;
			if (h->gpu.dev[i].util_pct >= 0) {
				util += h->gpu.dev[i].util_pct;
				known++;
			}
		}
		/* the mean over the GPUs NVML read (all of them, or none) */
		if (known > 0)
			n->gpu_util_pct = util / known;
	}

	h->njobs = rv_usage_scan_jobs(h->scan, h->jobs, MAX_SCAN_JOBS, &h->procs_scanned);
	if (h->njobs < 0)
		h->njobs = 0;
	struct job_prev next[MAX_SCAN_JOBS] = { 0 };
	int nnext = 0;
	if (h->njobs > 0) {
		n->jobs = calloc((size_t)h->njobs, sizeof(*n->jobs));
		if (!n->jobs)
			return rv_err_set(err, -ENOMEM, "", "out of memory");
	}
	for (int i = 0; i < h->njobs; i++) {
		const struct rv_usage_job *j = &h->jobs[i];
		if (!name_ok(j->name))
			continue;
		struct rv_cluster_job *o = &n->jobs[n->njobs++];
		snprintf(o->name, sizeof(o->name), "%s", j->name);
		o->procs = j->nprocs;
		o->cpu_used = elapsed_s > 0 ? (double)j->ticks_delta / (double)h->hz / elapsed_s
					    : 0;
		if (o->cpu_used > RV_MAX_CPU)
			o->cpu_used = RV_MAX_CPU;
		o->memory_used_mb = j->rss_kb / 1024;
		o->throttled = job_throttled(h, j, next, &nnext);
	}
	memcpy(h->prev, next, sizeof(next[0]) * (size_t)nnext);
	h->nprev = nnext;
	h->prev_ms = now;
	return 1;
}

static void host_stats(void *state, struct source_stats *out)
{
	const struct host *h = state;
	out->cgroup_mode = h->mode;
	out->gpus = h->gpu.count;
	out->procs_scanned = h->procs_scanned;
	out->jobs = h->njobs;
	snprintf(out->gpu_why, sizeof(out->gpu_why), "%s",
		 h->gpu_probed ? h->gpu.why : "GPU probe off");
}

static void host_close(void *state)
{
	struct host *h = state;
	if (!h)
		return;
	rv_usage_scanner_free(h->scan);
	free(h);
}

const struct source_ops source_host = {
	.name = "host",
	.open = host_open,
	.sample = host_sample,
	.stats = host_stats,
	.close = host_close,
};
