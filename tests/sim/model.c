/*
 * model.c: the hidden truth of a simulated job, the oracle, and the baseline
 * policy built from DLRover's published rules (FACTS.md).  Pure functions of
 * the job and a per-job random stream; thread-safe.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim.h"

/* DLRover's figures (FACTS.md). */
#define BASE_OOM_MAX_ADD_MB 8192
#define BASE_OOM_CAP_MB     65536
#define NODE_MAX_CPU 32.0

void rng_seed(struct sim_rng *r, const char *name, uint64_t seed)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a: same job and seed, same noise */
	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ULL;
	for (int i = 0; i < 8; i++)
		h = (h ^ ((seed >> (8 * i)) & 0xff)) * 1099511628211ULL;
	r->s = h ? h : 1;
}

double rng_uniform(struct sim_rng *r)
{
	/* xorshift64* */
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return (double)((r->s * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

double rng_normal(struct sim_rng *r)
{
	double u = rng_uniform(r), v = rng_uniform(r);
	if (u < 1e-300)
		u = 1e-300;
	return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

double model_speed_ideal(const struct sim_job *j, int w, int p)
{
	if (w < 1)
		return 0;
	if (j->strategy == SIM_ALLREDUCE)
		return 1.0 / (j->t[0] / w + j->t[1] + j->t[2] * w);
	if (p < 1)
		return 0;
	return w / (j->t[0] + j->t[1] * w / p + j->t[2] * w + j->t[3] * p);
}

double model_ps_cpu_need(const struct sim_job *j, int w, int p)
{
	if (j->strategy != SIM_PS || p < 1)
		return 0;
	return j->ps_cpu_per_worker * w / p;
}

int64_t model_ps_mem_need(const struct sim_job *j, int p)
{
	if (j->strategy != SIM_PS || p < 1)
		return 0;
	return (j->ps_mem_total_mb + p - 1) / p + 512;
}

/* The share of the peak memory need reached t_s seconds into the run. */
static double mem_share_at(const struct sim_job *j, double t_s)
{
	if (j->mem_rise <= 0)
		return 1;
	double x = j->mem_rise_s > 0 ? t_s / j->mem_rise_s : 1;
	return 1 - j->mem_rise * (1 - (x < 1 ? x : 1));
}

int64_t model_worker_mem_at(const struct sim_job *j, double t_s)
{
	return (int64_t)ceil((double)j->worker_mem_need_mb * mem_share_at(j, t_s));
}

int64_t model_ps_mem_at(const struct sim_job *j, int p, double t_s)
{
	if (j->strategy != SIM_PS || p < 1)
		return 0;
	return (int64_t)ceil((double)((j->ps_mem_total_mb + p - 1) / p) * mem_share_at(j, t_s)) +
	       512;
}

int model_oom_role_at(const struct sim_job *j, const struct sim_config *c, double t_s)
{
	if (c->worker_mem_mb < model_worker_mem_at(j, t_s))
		return 0;
	if (j->strategy == SIM_PS && c->ps_mem_mb < model_ps_mem_at(j, c->ps, t_s))
		return 1;
	return -1;
}

bool config_fits_node(const struct sim_job *j, const struct sim_config *c,
		      const struct sim_cluster_shape *k)
{
	if (c->worker_cpu > k->node_cpu + 1e-9 || c->worker_mem_mb > k->node_mem_mb)
		return false;
	return j->strategy != SIM_PS ||
	       (c->ps_cpu <= k->node_cpu + 1e-9 && c->ps_mem_mb <= k->node_mem_mb);
}

double config_mem_gb(const struct sim_job *j, const struct sim_config *c)
{
	double mb = (double)c->workers * (double)c->worker_mem_mb +
		    (j->strategy == SIM_PS ? (double)c->ps * (double)c->ps_mem_mb : 0);
	return mb / 1024;
}

double config_cost(const struct sim_job *j, const struct sim_config *c,
		   const struct sim_cluster_shape *k)
{
	double gb_per_core = (double)k->node_mem_mb / 1024 / k->node_cpu;
	return config_cores(j, c) + config_mem_gb(j, c) / gb_per_core;
}

int model_oom_role(const struct sim_job *j, const struct sim_config *c)
{
	if (c->worker_mem_mb < j->worker_mem_need_mb)
		return 0;
	if (j->strategy == SIM_PS && c->ps_mem_mb < model_ps_mem_need(j, c->ps))
		return 1;
	return -1;
}

double model_speed(const struct sim_job *j, const struct sim_config *c)
{
	if (model_oom_role(j, c) >= 0)
		return 0;
	return model_speed_running(j, c);
}

double model_speed_running(const struct sim_job *j, const struct sim_config *c)
{
	double f = model_speed_ideal(j, c->workers, c->ps);
	double k = c->worker_cpu / j->worker_cpu_need;
	if (j->strategy == SIM_PS) {
		double kp = c->ps_cpu / model_ps_cpu_need(j, c->workers, c->ps);
		if (kp < k)
			k = kp;
	}
	return f * (k < 1 ? k : 1);
}

double model_straggler_factor(const struct sim_job *j, int workers, int slow)
{
	if (slow <= 0 || workers <= 0 || j->straggler_slowdown <= 1)
		return 1;
	if (slow > workers)
		slow = workers;
	/* All-reduce waits for the slowest worker; async PS workers each
	 * contribute their own rate. */
	if (j->strategy == SIM_ALLREDUCE)
		return 1 / j->straggler_slowdown;
	return (workers - slow + slow / j->straggler_slowdown) / workers;
}

double config_cores(const struct sim_job *j, const struct sim_config *c)
{
	return c->workers * c->worker_cpu + (j->strategy == SIM_PS ? c->ps * c->ps_cpu : 0);
}

/* CPU in tenths of a core, rounded up, as plans express it. */
static double tenths_up(double x)
{
	return ceil(x * 10 - 1e-9) / 10;
}

void oracle_compute(const struct sim_job *j, const struct sim_cluster_shape *k,
		    struct sim_oracle *o)
{
	memset(o, 0, sizeof(*o));
	int pmin = j->strategy == SIM_PS ? j->min_ps : 0;
	int pmax = j->strategy == SIM_PS ? j->max_ps : 0;
	for (int w = j->min_workers; w <= j->max_workers; w++)
		for (int p = pmin; p <= pmax; p++) {
			double f = model_speed_ideal(j, w, p);
			struct sim_config c = { .workers = w, .ps = p };
			c.worker_cpu = tenths_up(j->worker_cpu_need);
			c.worker_mem_mb = j->worker_mem_need_mb;
			if (p) {
				c.ps_cpu = tenths_up(model_ps_cpu_need(j, w, p));
				c.ps_mem_mb = model_ps_mem_need(j, p);
			}
			if (f > o->best_speed && config_fits_node(j, &c, k))
				o->best_speed = f;
		}
	o->cost = INFINITY;
	for (int w = j->min_workers; w <= j->max_workers; w++)
		for (int p = pmin; p <= pmax; p++) {
			double f = model_speed_ideal(j, w, p);
			if (f < 0.9 * o->best_speed)
				continue;
			struct sim_config c = { .workers = w, .ps = p };
			c.worker_cpu = tenths_up(j->worker_cpu_need);
			c.worker_mem_mb = j->worker_mem_need_mb;
			if (p) {
				c.ps_cpu = tenths_up(model_ps_cpu_need(j, w, p));
				c.ps_mem_mb = model_ps_mem_need(j, p);
			}
			if (!config_fits_node(j, &c, k))
				continue;
			double cost = config_cost(j, &c, k);
			if (cost < o->cost - 1e-9 ||
			    (fabs(cost - o->cost) < 1e-9 && f > o->speed)) {
				o->cost = cost;
				o->cores = config_cores(j, &c);
				o->speed = f;
				o->config = c;
			}
		}
}

static bool config_eq(const struct sim_config *a, const struct sim_config *b)
{
	return a->workers == b->workers && a->ps == b->ps &&
	       fabs(a->worker_cpu - b->worker_cpu) < 1e-6 && fabs(a->ps_cpu - b->ps_cpu) < 1e-6 &&
	       a->worker_mem_mb == b->worker_mem_mb && a->ps_mem_mb == b->ps_mem_mb;
}

/* One usage sample of a node: its demand (the need, scaled by what the rest
 * of the job lets it do), capped by the limit, with half the job's noise. */
static double used_cpu(const struct sim_job *j, double demand, double limit, struct sim_rng *rng)
{
	double u = demand * (1 + 0.5 * j->noise * rng_normal(rng));
	u = u < limit ? u : limit;
	return u > 0 ? u : 0;
}

/* Per-node CPU demand of each role under c: a role short of CPU slows the
 * whole job, so the others only use their need times that share. */
void model_role_demand(const struct sim_job *j, const struct sim_config *c, double *dw, double *dp)
{
	double kw = c->worker_cpu / j->worker_cpu_need;
	double need_p = model_ps_cpu_need(j, c->workers, c->ps);
	double kp = j->strategy == SIM_PS && need_p > 0 ? c->ps_cpu / need_p : 1;
	*dw = j->worker_cpu_need * (kp < 1 ? kp : 1);
	*dp = need_p * (kw < 1 ? kw : 1);
}

/*
 * DLRover's master without a brain (its LocalOptimizer, FACTS.md): over the
 * latest 5 usage samples of every node,
 * - PS jobs, once at the first running round (PS_INITIAL): PS count =
 *   ceil(PS CPU the job's CPU quota leaves / PS CPU requested), PS memory =
 *   1.2 x the largest PS use;
 * - every round: a hot PS (mean use >= 0.9 of its limit) gets its mean use
 *   times (quota workers / current workers, at least 1, at most a 32-core
 *   node); else workers x 0.9 / (highest PS utilisation) when that is > 1,
 *   worker CPU = their mean use, memory = 1.5 x their largest use, within
 *   the quota.  No PS utilisation (an all-reduce job): no plan.
 * The quota is the user's request in cores (what the job was allowed).
 */
#define BASE_SAMPLES           5
#define BASE_PS_HOT            0.9
#define BASE_PS_OVERLOAD       0.9
#define BASE_PS_MEM_MARGIN     0.2
#define BASE_WORKER_MEM_MARGIN 0.5

static double round1(double x)
{
	return round(x * 10) / 10;
}

void baseline_run(const struct sim_job *j, const struct sim_opts *o, struct sim_result *r)
{
	memset(r, 0, sizeof(*r));
	r->ran = true;
	struct sim_rng rng;
	rng_seed(&rng, j->name, o->seed ^ 0x62617365ULL);
	struct sim_config c = j->user;
	int quiet = 0;
	bool ps_initial = j->strategy == SIM_PS;
	double quota = config_cores(j, &j->user);
	double t_s = 0;
	for (r->rounds = 0; r->rounds < o->max_rounds; r->rounds++) {
		struct sim_config before = c;
		int role = model_oom_role_at(j, &c, t_s + o->round_s);
		if (role >= 0) {
			r->ooms++;
			struct sim_oom_event *ev = &r->oom[r->noom < SIM_MAX_EVENTS ? r->noom++ : r->noom - 1];
			ev->role = role;
			int64_t *mem = role ? &c.ps_mem_mb : &c.worker_mem_mb;
			ev->from_mb = *mem;
			if (j->strategy == SIM_ALLREDUCE) {
				/* DLRover never relaunches an all-reduce job for OOM: it fails. */
				r->oom_failed = true;
				snprintf(r->last_reason, sizeof(r->last_reason),
					 "all-reduce job not relaunched after OOM");
				break;
			}
			int64_t next = *mem * 2;
			if (next > *mem + BASE_OOM_MAX_ADD_MB)
				next = *mem + BASE_OOM_MAX_ADD_MB;
			if (next > BASE_OOM_CAP_MB)
				next = BASE_OOM_CAP_MB;
			if (next <= *mem) {
				r->oom_failed = true;
				break;
			}
			ev->to_mb = next;
			*mem = next;
			r->plans++;
			r->plans_to_converge = r->plans;
			snprintf(r->last_reason, sizeof(r->last_reason), "oom: memory x2 at most +8 GiB");
			quiet = 0;
			continue;
		}
		t_s += o->round_s;
		if (j->strategy == SIM_PS) {
			double dw, dp;
			model_role_demand(j, &c, &dw, &dp);
			/* The latest samples: mean and peak per role. */
			double w_sum = 0, ps_max_util = 0, ps_mean_max = 0, ps_mean_sum = 0;
			int64_t w_mem = 0, p_mem = 0;
			for (int k = 0; k < BASE_SAMPLES; k++)
				w_sum += used_cpu(j, dw, c.worker_cpu, &rng);
			double w_mean = w_sum / BASE_SAMPLES;
			w_mem = (int64_t)((double)model_worker_mem_at(j, t_s) *
					  (0.9 + 0.1 * rng_uniform(&rng)));
			p_mem = (int64_t)((double)model_ps_mem_at(j, c.ps, t_s) *
					  (0.9 + 0.1 * rng_uniform(&rng)));
			for (int q = 0; q < c.ps && q < 64; q++) {
				double sum = 0;
				for (int k = 0; k < BASE_SAMPLES; k++) {
					double u = used_cpu(j, dp, c.ps_cpu, &rng);
					sum += u;
					if (u / c.ps_cpu > ps_max_util)
						ps_max_util = u / c.ps_cpu;
				}
				double mean = sum / BASE_SAMPLES;
				ps_mean_sum += mean;
				if (mean > ps_mean_max)
					ps_mean_max = mean;
			}
			double per_proc = (w_mean + ps_mean_sum / c.workers);
			int quota_workers = per_proc > 0 ? (int)(quota / per_proc) : c.workers;
			if (ps_initial) {
				ps_initial = false;
				double ps_total = quota - quota_workers * w_mean;
				int n = (int)ceil(ps_total / c.ps_cpu - 1e-9);
				n = n < j->min_ps ? j->min_ps : n > j->max_ps ? j->max_ps : n;
				c.ps = n;
				c.ps_mem_mb = (int64_t)((double)p_mem * (1 + BASE_PS_MEM_MARGIN));
				snprintf(r->last_reason, sizeof(r->last_reason),
					 "ps initial: %d ps from the quota", n);
			} else if (ps_mean_max / c.ps_cpu >= BASE_PS_HOT) {
				double tune = quota_workers > c.workers
						      ? (double)quota_workers / c.workers
						      : 1;
				if (tune > NODE_MAX_CPU / ps_mean_max)
					tune = NODE_MAX_CPU / ps_mean_max;
				double cpu = round1(ps_mean_max * tune);
				if (cpu > c.ps_cpu)
					c.ps_cpu = cpu;
				snprintf(r->last_reason, sizeof(r->last_reason),
					 "hot ps: cpu x%.2f", tune);
			} else {
				int n = c.workers;
				double f = BASE_PS_OVERLOAD / ps_max_util;
				if (f > 1)
					n = (int)(n * f);
				double cpu = round1(w_mean);
				if (cpu < 0.1)
					cpu = 0.1;
				int64_t mem =
					(int64_t)((double)w_mem * (1 + BASE_WORKER_MEM_MARGIN));
				double remaining = quota - c.ps * c.ps_cpu;
				if (n > (int)(remaining / cpu))
					n = (int)(remaining / cpu);
				n = n < j->min_workers   ? j->min_workers
				    : n > j->max_workers ? j->max_workers
							 : n;
				c.workers = n;
				c.worker_cpu = cpu;
				c.worker_mem_mb = mem;
				snprintf(r->last_reason, sizeof(r->last_reason),
					 "workers from ps utilisation %.2f", ps_max_util);
			}
		}
		if (!config_eq(&before, &c)) {
			r->plans++;
			r->plans_to_converge = r->plans;
			quiet = 0;
		} else if (++quiet >= o->settle_rounds) {
			r->rounds++;
			break;
		}
	}
	/* The final config must also hold the peak memory. */
	if (!r->oom_failed && model_oom_role(j, &c) >= 0)
		r->oom_failed = true;
	r->final = c;
	r->speed = r->oom_failed ? 0 : model_speed(j, &c);
	r->cores = config_cores(j, &c);
	r->cost = config_cost(j, &c, &o->cluster);
	r->infeasible = !config_fits_node(j, &c, &o->cluster);
}
