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
#define BASE_GROW_BELOW 0.85
#define BASE_SHRINK_ABOVE 0.95
#define BASE_HOT_PS 0.80
#define BASE_HOT_SAMPLES 3
#define BASE_GROW_STEP 4
#define BASE_MAX_WORKERS 60
#define BASE_OOM_MAX_ADD_MB 8192
#define BASE_OOM_CAP_MB 65536
/* Hot PS migration: the PS moves to a node giving it this much more CPU. */
#define BASE_HOT_CPU_FACTOR 1.5
#define NODE_MAX_CPU 32.0

void rng_seed(struct sim_rng *r, const char *name)
{
	uint64_t h = 1469598103934665603ULL;  /* FNV-1a: same job, same noise */
	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ULL;
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
	double f = model_speed_ideal(j, c->workers, c->ps);
	double k = c->worker_cpu / j->worker_cpu_need;
	if (j->strategy == SIM_PS) {
		double kp = c->ps_cpu / model_ps_cpu_need(j, c->workers, c->ps);
		if (kp < k)
			k = kp;
	}
	return f * (k < 1 ? k : 1);
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

void oracle_compute(const struct sim_job *j, struct sim_oracle *o)
{
	memset(o, 0, sizeof(*o));
	int pmin = j->strategy == SIM_PS ? j->min_ps : 0;
	int pmax = j->strategy == SIM_PS ? j->max_ps : 0;
	for (int w = j->min_workers; w <= j->max_workers; w++)
		for (int p = pmin; p <= pmax; p++) {
			double f = model_speed_ideal(j, w, p);
			if (f > o->best_speed)
				o->best_speed = f;
		}
	o->cores = INFINITY;
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
			double cores = config_cores(j, &c);
			if (cores < o->cores - 1e-9 || (fabs(cores - o->cores) < 1e-9 && f > o->speed)) {
				o->cores = cores;
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

/* Mean PS CPU utilisation (used / limit) over the last few samples, as the
 * master would report it: usage is the need, capped by the limit, with noise. */
static double ps_util(const struct sim_job *j, const struct sim_config *c, struct sim_rng *rng)
{
	double need = model_ps_cpu_need(j, c->workers, c->ps);
	double sum = 0;
	for (int i = 0; i < BASE_HOT_SAMPLES; i++) {
		double used = (need < c->ps_cpu ? need : c->ps_cpu) * (1 + j->noise * rng_normal(rng));
		if (used > c->ps_cpu)
			used = c->ps_cpu;
		sum += used / c->ps_cpu;
	}
	return sum / BASE_HOT_SAMPLES;
}

void baseline_run(const struct sim_job *j, const struct sim_opts *o, struct sim_result *r)
{
	memset(r, 0, sizeof(*r));
	r->ran = true;
	struct sim_rng rng;
	rng_seed(&rng, j->name);
	struct sim_config c = j->user;
	int quiet = 0;
	int max_workers = j->max_workers < BASE_MAX_WORKERS ? j->max_workers : BASE_MAX_WORKERS;
	for (r->rounds = 0; r->rounds < o->max_rounds; r->rounds++) {
		struct sim_config before = c;
		int role = model_oom_role(j, &c);
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
		if (j->strategy == SIM_PS) {
			double u = ps_util(j, &c, &rng);
			if (u > BASE_HOT_PS && c.ps_cpu < NODE_MAX_CPU) {
				double cpu = tenths_up(c.ps_cpu * BASE_HOT_CPU_FACTOR);
				c.ps_cpu = cpu < NODE_MAX_CPU ? cpu : NODE_MAX_CPU;
				snprintf(r->last_reason, sizeof(r->last_reason), "hot ps: cpu util %.2f", u);
			} else if (u > BASE_SHRINK_ABOVE && c.workers > j->min_workers) {
				c.workers--;
				snprintf(r->last_reason, sizeof(r->last_reason), "ps saturated: fewer workers");
			} else if (u < BASE_GROW_BELOW && c.workers < max_workers) {
				int add = max_workers - c.workers;
				c.workers += add < BASE_GROW_STEP ? add : BASE_GROW_STEP;
				snprintf(r->last_reason, sizeof(r->last_reason), "ps cpu %.2f < 0.85: more workers",
					 u);
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
	r->final = c;
	r->speed = r->oom_failed ? 0 : model_speed(j, &c);
	r->cores = config_cores(j, &c);
}
