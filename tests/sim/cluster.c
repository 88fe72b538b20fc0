/*
 * cluster.c: a stream of jobs on N identical simulated nodes.  Strict FIFO:
 * the job at the head of the queue starts when every one of its nodes
 * (workers and PS) fits first-fit by CPU and memory; a job runs at the true
 * steady speed of its config until its work is done.  Single-threaded.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct cjob {
	int idx;
	double speed, used_cpu, end;
	bool started, done, skip;
	int *place;   /* node of each pod: workers first, then PS */
	int npods;
};

static double pod_cpu(const struct sim_config *c, int k)
{
	return k < c->workers ? c->worker_cpu : c->ps_cpu;
}

static int64_t pod_mem(const struct sim_config *c, int k)
{
	return k < c->workers ? c->worker_mem_mb : c->ps_mem_mb;
}

static bool try_place(struct cjob *cj, const struct sim_config *c, double *free_cpu,
		      int64_t *free_mem, int nodes)
{
	for (int k = 0; k < cj->npods; k++) {
		int n;
		for (n = 0; n < nodes; n++)
			if (free_cpu[n] >= pod_cpu(c, k) - 1e-9 && free_mem[n] >= pod_mem(c, k))
				break;
		if (n == nodes) {
			for (int u = 0; u < k; u++) {
				free_cpu[cj->place[u]] += pod_cpu(c, u);
				free_mem[cj->place[u]] += pod_mem(c, u);
			}
			return false;
		}
		cj->place[k] = n;
		free_cpu[n] -= pod_cpu(c, k);
		free_mem[n] -= pod_mem(c, k);
	}
	return true;
}

/* What the owner runs when a policy's config cannot run: the request, memory
 * raised to the need, each node cut to the cluster's node size. */
static void fallback(const struct sim_job *j, const struct sim_cluster_shape *k,
		     struct sim_config *c)
{
	*c = j->user;
	if (c->worker_mem_mb < j->worker_mem_need_mb)
		c->worker_mem_mb = j->worker_mem_need_mb;
	if (j->strategy == SIM_PS && c->ps_mem_mb < model_ps_mem_need(j, c->ps))
		c->ps_mem_mb = model_ps_mem_need(j, c->ps);
	c->worker_cpu = fmin(c->worker_cpu, k->node_cpu);
	c->ps_cpu = fmin(c->ps_cpu, k->node_cpu);
	if (c->worker_mem_mb > k->node_mem_mb)
		c->worker_mem_mb = k->node_mem_mb;
	if (c->ps_mem_mb > k->node_mem_mb)
		c->ps_mem_mb = k->node_mem_mb;
}

void cluster_run(const struct sim_trace *t, const struct sim_config *configs_in,
		 const struct sim_cluster_shape *k, struct sim_cluster_result *out)
{
	memset(out, 0, sizeof(*out));
	int nodes = k->nodes;
	double node_cpu = k->node_cpu;
	int64_t node_mem_mb = k->node_mem_mb;
	struct sim_config *configs = calloc((size_t)t->n, sizeof(*configs));
	struct cjob *jobs = calloc((size_t)t->n, sizeof(*jobs));
	int *order = calloc((size_t)t->n, sizeof(*order));
	double *free_cpu = calloc((size_t)nodes, sizeof(double));
	int64_t *free_mem = calloc((size_t)nodes, sizeof(int64_t));
	if (!configs || !jobs || !order || !free_cpu || !free_mem)
		goto out;
	memcpy(configs, configs_in, (size_t)t->n * sizeof(*configs));
	for (int n = 0; n < nodes; n++) {
		free_cpu[n] = node_cpu;
		free_mem[n] = node_mem_mb;
	}
	for (int i = 0; i < t->n; i++) {
		const struct sim_job *j = &t->jobs[i];
		const struct sim_config *c = &configs[i];
		struct cjob *cj = &jobs[i];
		cj->idx = i;
		/* A config that runs at speed 0 or fits no empty cluster is
		 * replaced by the owner's fallback and counted. */
		bool fit = model_speed(j, c) > 0 && config_fits_node(j, c, k);
		if (fit) {
			cj->npods = c->workers + c->ps;
			cj->place = calloc((size_t)(cj->npods ? cj->npods : 1), sizeof(int));
			fit = cj->place && try_place(cj, c, free_cpu, free_mem, nodes);
			for (int q = 0; fit && q < cj->npods; q++) {
				free_cpu[cj->place[q]] += pod_cpu(c, q);
				free_mem[cj->place[q]] += pod_mem(c, q);
			}
			free(cj->place);
			cj->place = NULL;
		}
		if (!fit) {
			out->unplaced++;
			fallback(j, k, &configs[i]);
		}
		cj->npods = c->workers + c->ps;
		cj->place = calloc((size_t)(cj->npods ? cj->npods : 1), sizeof(int));
		cj->speed = model_speed(j, c);
		double ideal = model_speed_ideal(j, c->workers, c->ps);
		double load = ideal > 0 ? cj->speed / ideal : 0;
		cj->used_cpu = c->workers * fmin(c->worker_cpu, j->worker_cpu_need * load) +
			       c->ps * fmin(c->ps_cpu, model_ps_cpu_need(j, c->workers, c->ps) * load);
		/* A job that does not fit an empty cluster never runs. */
		bool fits = cj->place && try_place(cj, c, free_cpu, free_mem, nodes);
		for (int q = 0; fits && q < cj->npods; q++) {
			free_cpu[cj->place[q]] += pod_cpu(c, q);
			free_mem[cj->place[q]] += pod_mem(c, q);
		}
		/* Not even the fallback runs (a need larger than any node): the
		 * job cannot run under any policy. */
		if (cj->speed <= 0 || !fits)
			cj->skip = true;
	}
	/* FIFO by arrival, ties by trace order. */
	for (int i = 0; i < t->n; i++)
		order[i] = i;
	for (int a = 1; a < t->n; a++)
		for (int b = a; b > 0 && t->jobs[order[b]].arrival_s < t->jobs[order[b - 1]].arrival_s;
		     b--) {
			int x = order[b];
			order[b] = order[b - 1];
			order[b - 1] = x;
		}
	double now = 0, start = INFINITY, used_cs = 0, alloc_cs = 0, jct_sum = 0;
	double used_now = 0, alloc_now = 0;
	int head = 0, finished = 0, active = 0;
	for (int i = 0; i < t->n; i++)
		if (!jobs[i].skip) {
			active++;
			if (t->jobs[i].arrival_s < start)
				start = t->jobs[i].arrival_s;
		}
	if (!active)
		goto out;
	now = start;
	while (finished < active) {
		/* Start what fits, in order. */
		while (head < t->n) {
			struct cjob *cj = &jobs[order[head]];
			if (cj->skip) {
				head++;
				continue;
			}
			if (t->jobs[cj->idx].arrival_s > now + 1e-9)
				break;
			if (!try_place(cj, &configs[cj->idx], free_cpu, free_mem, nodes))
				break;
			cj->started = true;
			cj->end = now + t->jobs[cj->idx].work / cj->speed;
			used_now += cj->used_cpu;
			alloc_now += config_cores(&t->jobs[cj->idx], &configs[cj->idx]);
			head++;
		}
		/* Next event: a completion or the head's arrival. */
		double next = INFINITY;
		for (int i = 0; i < t->n; i++)
			if (jobs[i].started && !jobs[i].done && jobs[i].end < next)
				next = jobs[i].end;
		while (head < t->n && jobs[order[head]].skip)
			head++;
		if (head < t->n && t->jobs[order[head]].arrival_s > now &&
		    t->jobs[order[head]].arrival_s < next)
			next = t->jobs[order[head]].arrival_s;
		if (!isfinite(next))
			break;  /* the head can never fit: cannot happen after the size check */
		used_cs += used_now * (next - now);
		alloc_cs += alloc_now * (next - now);
		now = next;
		for (int i = 0; i < t->n; i++) {
			struct cjob *cj = &jobs[i];
			if (!cj->started || cj->done || cj->end > now + 1e-9)
				continue;
			cj->done = true;
			finished++;
			jct_sum += cj->end - t->jobs[i].arrival_s;
			used_now -= cj->used_cpu;
			alloc_now -= config_cores(&t->jobs[i], &configs[i]);
			for (int q = 0; q < cj->npods; q++) {
				free_cpu[cj->place[q]] += pod_cpu(&configs[i], q);
				free_mem[cj->place[q]] += pod_mem(&configs[i], q);
			}
		}
	}
	out->makespan_s = now - start;
	double cap = nodes * node_cpu * out->makespan_s;
	out->util = cap > 0 ? 100 * used_cs / cap : 0;
	out->alloc = cap > 0 ? 100 * alloc_cs / cap : 0;
	out->mean_jct_s = finished ? jct_sum / finished : 0;
out:
	if (jobs)
		for (int i = 0; i < t->n; i++)
			free(jobs[i].place);
	free(jobs);
	free(configs);
	free(order);
	free(free_cpu);
	free(free_mem);
}
