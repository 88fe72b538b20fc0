/*
 * source_k8s.c: the Kubernetes source (--k8s), for rover-monitor running
 * as a DaemonSet: one node sample per tick of the node it runs on.
 *
 * Capacity (CPU, memory, GPUs) and readiness come from the Node object
 * (its allocatable, read at open and every K8S_NODE_REFRESH_MS); CPU and
 * memory in use from /proc as the host source reads them.  Per job: each
 * pod folder under source.cgroup_root (cgpod.h) is mapped by the UID in
 * its name to a pod of this node (podwatch.h: list and watch through the
 * API server) and summed by the pod's rover.dev/job label, the ElasticJob's
 * name: processes, memory in the cgroup, cores (the cgroup's CPU time, or
 * its processes' where the cpu controller lacks the pod) and CPU periods
 * throttled since the previous tick.  A pod the API server does not know
 * (deleted, or not yet seen) or without the label is left out.
 *
 * Owned by the sampler thread (see source.h); podwatch runs a thread of
 * its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "cgpod.h"
#include "cleanup.h"
#include "json.h"
#include "k8s_client.h"
#include "monitor.h"
#include "parse.h"
#include "podwatch.h"
#include "usage.h"

#define K8S_NODE_REFRESH_MS 30000

/* A pod's counters at the previous tick. */
struct k8s_prev {
	char uid[CGPOD_UID_MAX];
	bool has_cpu;
	uint64_t cpu; /* µs with has_cpu, else clock ticks */
	int64_t throttled;
};

struct k8s_node {
	double cpu;
	int64_t memory_mb;
	int gpu;
	bool ready;
};

struct k8s {
	const struct monitor_cfg *cfg;
	struct rv_k8s_conf conf;
	struct podwatch *pods;
	struct cgpod_root root;
	struct k8s_node node;
	int64_t node_at_ms;
	struct rv_cpu_times cpu_prev;
	int64_t prev_ms;
	long hz;
	struct cgpod_dir dirs[CGPOD_MAX];
	struct k8s_prev prev[CGPOD_MAX], next[CGPOD_MAX];
	int nprev;
	int pods_seen, njobs;
};

/* A CPU quantity ("4", "3500m", "0.5") in cores: 0 or -EINVAL. */
static int k8s_cores(const char *q, double *out)
{
	size_t n = q ? strlen(q) : 0;
	char num[32];
	if (n == 0 || n >= sizeof(num))
		return -EINVAL;
	bool milli = q[n - 1] == 'm';
	snprintf(num, sizeof(num), "%.*s", (int)(milli ? n - 1 : n), q);
	if (rv_parse_double(num, 0, 1e9, out) < 0)
		return -EINVAL;
	if (milli)
		*out /= 1000.0;
	return 0;
}

/* The Node object's allocatable (else capacity) and Ready condition. */
static int k8s_node_parse(const cJSON *node, struct k8s_node *out)
{
	const cJSON *st = cJSON_GetObjectItem(node, "status");
	const cJSON *a = cJSON_GetObjectItem(st, "allocatable");
	if (!a)
		a = cJSON_GetObjectItem(st, "capacity");
	const char *cpu = cJSON_GetStringValue(cJSON_GetObjectItem(a, "cpu"));
	const char *mem = cJSON_GetStringValue(cJSON_GetObjectItem(a, "memory"));
	const char *gpu = cJSON_GetStringValue(cJSON_GetObjectItem(a, "nvidia.com/gpu"));
	if (k8s_cores(cpu, &out->cpu) < 0 || rv_parse_memory_mb(mem, &out->memory_mb) < 0)
		return -EINVAL;
	int64_t g = 0;
	out->gpu = gpu && rv_parse_i64(gpu, 0, RV_MAX_GPU, &g) == 0 ? (int)g : 0;
	out->ready = false;
	const cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(st, "conditions"))
	{
		const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(c, "type"));
		const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(c, "status"));
		if (type && s && strcmp(type, "Ready") == 0)
			out->ready = strcmp(s, "True") == 0;
	}
	return 0;
}

/* GET the Node: k->node refreshed.  0 or -errno with err. */
static int k8s_node_get(struct k8s *k, struct rv_err *err)
{
	char path[300];
	long code = 0;
	struct rv_buf out;
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", k->cfg->node);
	rv_buf_init(&out);
	if (k->conf.token_file[0])
		rv_k8s_conf_token_reload(&k->conf);
	int rc = rv_k8s_call(&k->conf, NULL, "GET", path, NULL, NULL, k->cfg->timeout_ms, &code,
			     &out, err);
	RV_CLEANUP_CJSON cJSON *j = rc == 0 && code == 200 ? cJSON_Parse(out.data) : NULL;
	struct k8s_node n;
	if (rc == 0 && (!j || k8s_node_parse(j, &n) < 0)) {
		char m[256];
		rv_k8s_status_message(out.data, code, m, sizeof(m));
		rc = rv_err_set(err, code != 200 ? rv_k8s_status_errno(code) : -EINVAL, "node",
				"could not read node %s at %s: %s", k->cfg->node, k->conf.server,
				code == 200 ? "no allocatable cpu and memory" : m);
	}
	rv_buf_release(&out);
	if (rc < 0)
		return rc;
	k->node = n;
	k->node_at_ms = rv_mono_ms();
	return 0;
}

static void k8s_close(void *state)
{
	struct k8s *k = state;
	if (!k)
		return;
	podwatch_stop(k->pods);
	rv_k8s_conf_release(&k->conf);
	free(k);
}

static int k8s_open(const struct monitor_cfg *cfg, void **out, struct rv_err *err)
{
	struct k8s *k = calloc(1, sizeof(*k));
	if (!k)
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	k->cfg = cfg;
	k->hz = rv_usage_clk_tck();
	int rc = cgpod_root_open(cfg->cgroup_root, &k->root, err);
	if (rc == 0)
		rc = rv_k8s_conf_load(cfg->kubeconfig, &k->conf, err);
	if (rc == 0)
		rc = k8s_node_get(k, err);
	if (rc == 0 && !(k->pods = podwatch_start(&k->conf, cfg->node, cfg->timeout_ms, err)))
		rc = err->code ? err->code : -EIO;
	if (rc == 0 && (rc = rv_usage_cpu_times(&k->cpu_prev)) < 0)
		rv_err_set(err, rc, "", "could not read /proc/stat: %s", strerror(-rc));
	if (rc < 0) {
		k8s_close(k);
		return rc;
	}
	k->prev_ms = rv_mono_ms();
	*out = k;
	return 0;
}

/* The job entry of name in n (added when new; NULL past the limit). */
static struct rv_cluster_job *k8s_job(struct rv_cluster_node *n, const char *name)
{
	for (int i = 0; i < n->njobs; i++)
		if (strcmp(n->jobs[i].name, name) == 0)
			return &n->jobs[i];
	if (n->njobs == RV_MAX_CLUSTER_JOBS)
		return NULL;
	struct rv_cluster_job *j = &n->jobs[n->njobs++];
	snprintf(j->name, sizeof(j->name), "%s", name);
	return j;
}

/* The counters of uid at the previous tick, NULL the first time. */
static const struct k8s_prev *k8s_prev_of(const struct k8s *k, const char *uid)
{
	for (int i = 0; i < k->nprev; i++)
		if (strcmp(k->prev[i].uid, uid) == 0)
			return &k->prev[i];
	return NULL;
}

/* One pod folder added to its job in n; its counters kept in k->next. */
static void k8s_pod_add(struct k8s *k, const struct cgpod_dir *d, double elapsed_s,
			struct rv_cluster_node *n, int *nnext)
{
	struct podwatch_pod p;
	struct cgpod_usage u;
	if (!podwatch_lookup(k->pods, d->uid, &p) || !p.job[0] ||
	    cgpod_usage(&k->root, d->rel, &u) < 0 || u.procs == 0)
		return;
	struct k8s_prev *nx = &k->next[(*nnext)++];
	snprintf(nx->uid, sizeof(nx->uid), "%s", d->uid);
	nx->has_cpu = u.has_cpu;
	nx->cpu = u.has_cpu ? u.cpu_us : u.ticks;
	nx->throttled = u.throttled;
	struct rv_cluster_job *j = k8s_job(n, p.job);
	if (!j)
		return;
	j->procs += u.procs;
	j->memory_used_mb += u.memory_b / (1024 * 1024);
	const struct k8s_prev *pv = k8s_prev_of(k, d->uid);
	if (!pv || pv->has_cpu != nx->has_cpu || nx->cpu < pv->cpu || elapsed_s <= 0)
		return;
	double secs = (double)(nx->cpu - pv->cpu) / (u.has_cpu ? 1e6 : (double)k->hz);
	j->cpu_used += secs / elapsed_s;
	if (j->cpu_used > RV_MAX_CPU)
		j->cpu_used = RV_MAX_CPU;
	if (nx->throttled >= pv->throttled)
		j->throttled += nx->throttled - pv->throttled;
}

/* The node's jobs from its pod cgroups.  0 or -ENOMEM. */
static int k8s_jobs(struct k8s *k, double elapsed_s, struct rv_cluster_node *n)
{
	int nd = cgpod_scan(&k->root, k->dirs, CGPOD_MAX);
	k->pods_seen = nd > 0 ? nd : 0;
	if (nd <= 0) {
		k->nprev = 0;
		return 0;
	}
	n->jobs = calloc(RV_MAX_CLUSTER_JOBS, sizeof(*n->jobs));
	if (!n->jobs)
		return -ENOMEM;
	int nnext = 0;
	for (int i = 0; i < nd; i++)
		k8s_pod_add(k, &k->dirs[i], elapsed_s, n, &nnext);
	memcpy(k->prev, k->next, sizeof(k->next[0]) * (size_t)nnext);
	k->nprev = nnext;
	k->njobs = n->njobs;
	return 0;
}

static int k8s_sample(void *state, int64_t ts_ms, struct rv_cluster_node *nodes, int max,
		      struct rv_err *err)
{
	struct k8s *k = state;
	struct rv_cpu_times cur;
	struct rv_meminfo mem;
	int rc;
	if (max < 1)
		return 0;
	if (rv_mono_ms() - k->node_at_ms >= K8S_NODE_REFRESH_MS)
		k8s_node_get(k, err); /* a failure keeps the last one read */
	if ((rc = rv_usage_cpu_times(&cur)) < 0)
		return rv_err_set(err, rc, "", "could not read /proc/stat: %s", strerror(-rc));
	if ((rc = rv_usage_meminfo(&mem)) < 0)
		return rv_err_set(err, rc, "", "could not read /proc/meminfo: %s", strerror(-rc));
	int64_t now = rv_mono_ms();
	double elapsed_s = (double)(now - k->prev_ms) / 1000.0;
	struct rv_cluster_node *n = &nodes[0];
	snprintf(n->name, sizeof(n->name), "%s", k->cfg->node);
	n->ts_ms = ts_ms;
	n->cpu = k->node.cpu;
	n->memory_mb = k->node.memory_mb;
	n->gpu = k->node.gpu;
	n->ready = k->node.ready;
	n->cpu_used = rv_usage_cpu_busy(&k->cpu_prev, &cur);
	n->cpu_used = n->cpu_used > n->cpu ? n->cpu : n->cpu_used;
	n->memory_used_mb = (mem.total_kb - mem.available_kb) / 1024;
	if (n->memory_used_mb > n->memory_mb)
		n->memory_used_mb = n->memory_mb;
	n->cpu_pressure = n->memory_pressure = n->io_pressure = -1;
	n->gpu_memory_used_mb = -1;
	n->gpu_util_pct = -1;
	k->cpu_prev = cur;
	if (k8s_jobs(k, elapsed_s, n) < 0)
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	k->prev_ms = now;
	return 1;
}

static void k8s_stats(void *state, struct source_stats *out)
{
	const struct k8s *k = state;
	out->cgroup_mode = k->root.mode;
	out->gpus = k->node.gpu;
	out->procs_scanned = k->pods_seen;
	out->jobs = k->njobs;
	snprintf(out->gpu_why, sizeof(out->gpu_why), "%s",
		 k->node.gpu ? "" : "the Node has no nvidia.com/gpu allocatable");
}

const struct source_ops source_k8s = {
	.name = "k8s",
	.open = k8s_open,
	.sample = k8s_sample,
	.stats = k8s_stats,
	.close = k8s_close,
};
