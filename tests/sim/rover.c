/*
 * rover.c: play one simulated job against a live rover-brain over REST, the
 * way a master would: register, apply each plan, report speed and node
 * samples with simulated timestamps, raise node_oom when a plan gives less
 * memory than the truth needs, report plan_applied and job_finished.
 * Every message goes through common/brain_client (the wire structs), as a
 * master's would.  Thread-safe: each call owns its brain client.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "brain_client.h"
#include "sim.h"

#define SIM_T0_MS 1700000000000LL
#define MAX_OOM_PLANS 8
#define BATCH_SAMPLES 4000

struct run {
	const struct sim_job *j;
	const struct sim_opts *o;
	struct sim_result *r;
	struct rv_brain_client *bc;
	struct sim_rng rng;
	char uid[RV_BRAIN_UID_MAX];
	int64_t ts_ms;           /* the job's clock */
	double since_change_s;   /* for warm-up */
	int64_t step;
	int64_t last_plan_id;
	struct sim_config c;
};

/* Record a failed call for the report; returns rc. */
static int failed(struct run *s, int rc, const struct rv_err *err)
{
	snprintf(s->r->error, sizeof(s->r->error), "%.150s", err->msg);
	return rc;
}

static void replica(struct rv_replica_spec *r, int n, int min, int max, bool with_res, double cpu,
		    int64_t mem)
{
	r->present = true;
	r->replicas = n;
	r->min_replicas = min;
	r->max_replicas = max;
	r->restart_count = 3;
	r->has_resources = with_res;
	r->resource.cpu = cpu;
	r->resource.memory_mb = mem;
}

static void job_spec(const struct run *s, struct rv_job_spec *spec)
{
	const struct sim_job *j = s->j;
	memset(spec, 0, sizeof(*spec));
	snprintf(spec->name, sizeof(spec->name), "%s%s", j->name, s->o->run_tag);
	snprintf(spec->namespace_, sizeof(spec->namespace_), "sim");
	snprintf(spec->labels[0].key, sizeof(spec->labels[0].key), "user");
	snprintf(spec->labels[0].value, sizeof(spec->labels[0].value), "sim");
	spec->nlabels = 1;
	spec->strategy = j->strategy == SIM_PS ? RV_STRATEGY_PS : RV_STRATEGY_ALLREDUCE;
	spec->optimize_mode = RV_OPT_CLUSTER;
	replica(&spec->replicas[RV_ROLE_WORKER], j->user.workers, j->min_workers, j->max_workers,
		!j->zero_config, j->user.worker_cpu, j->user.worker_mem_mb);
	if (j->strategy == SIM_PS)
		replica(&spec->replicas[RV_ROLE_PS], j->user.ps, j->min_ps, j->max_ps,
			!j->zero_config, j->user.ps_cpu, j->user.ps_mem_mb);
	spec->model_parameters = j->parameters;
	spec->batch_size = j->batch_size;
	struct rv_dataset *d = &spec->datasets[0];
	snprintf(d->name, sizeof(d->name), "train");
	d->size = (int64_t)j->work;
	d->shard_size = (int64_t)j->batch_size * 100;
	d->epochs = 1;
	spec->ndatasets = 1;
}

static bool config_same(const struct sim_config *a, const struct sim_config *b)
{
	return a->workers == b->workers && a->ps == b->ps &&
	       fabs(a->worker_cpu - b->worker_cpu) < 1e-6 && fabs(a->ps_cpu - b->ps_cpu) < 1e-6 &&
	       a->worker_mem_mb == b->worker_mem_mb && a->ps_mem_mb == b->ps_mem_mb;
}

/* Apply a plan's groups (and a migrate that moves every PS) to the config. */
static void apply_plan(struct run *s, const struct rv_scale_plan *plan)
{
	for (int role = 0; role < 2; role++) {
		const struct rv_plan_group *g = &plan->groups[role ? RV_ROLE_PS : RV_ROLE_WORKER];
		if (!g->present || (role && s->j->strategy != SIM_PS))
			continue;
		int count = g->count;
		double cpu = g->resource.cpu;
		int64_t mem = g->resource.memory_mb;
		if (role) {
			if (count > 0)
				s->c.ps = count;
			if (cpu > 0)
				s->c.ps_cpu = cpu;
			if (mem > 0)
				s->c.ps_mem_mb = mem;
		} else {
			if (count > 0)
				s->c.workers = count;
			if (cpu > 0)
				s->c.worker_cpu = cpu;
			if (mem > 0)
				s->c.worker_mem_mb = mem;
		}
	}
	/* The simulated PS share the load evenly, so only a migration of every PS
	 * moves the bottleneck; a partial one is recorded but changes nothing. */
	if (plan->nmigrate >= s->c.ps && s->c.ps > 0) {
		double lo = INFINITY;
		for (int i = 0; i < plan->nmigrate; i++)
			if (plan->migrate[i].resource.cpu < lo)
				lo = plan->migrate[i].resource.cpu;
		if (lo > 0 && isfinite(lo))
			s->c.ps_cpu = lo;
	}
	snprintf(s->r->last_reason, sizeof(s->r->last_reason), "%.255s", plan->reason);
}

/* A job or plan event at the job's clock; *plan_id (may be NULL) gets the plan
 * it made. */
static int post_event(struct run *s, struct rv_event *ev, int64_t *plan_id)
{
	struct rv_err err = { 0 };
	ev->ts_ms = s->ts_ms;
	int rc = rv_brain_post_event(s->bc, s->uid, ev, plan_id, &err);
	return rc < 0 ? failed(s, rc, &err) : 0;
}

static int post_simple_event(struct run *s, enum rv_event_type type, int64_t plan_id)
{
	struct rv_event ev = { .type = type,
			       .role = RV_ROLE_WORKER,
			       .rank = -1,
			       .exit_code = -1,
			       .plan_id = plan_id };
	return post_event(s, &ev, NULL);
}

/* The job died of OOM on role's first node: report it, apply the oom plan. */
static int handle_oom(struct run *s, int role)
{
	struct sim_result *r = s->r;
	int64_t *mem = role ? &s->c.ps_mem_mb : &s->c.worker_mem_mb;
	int64_t need = role ? model_ps_mem_need(s->j, s->c.ps) : s->j->worker_mem_need_mb;
	struct sim_oom_event *ev = &r->oom[r->noom < SIM_MAX_EVENTS ? r->noom++ : r->noom - 1];
	ev->role = role;
	ev->from_mb = *mem;
	r->ooms++;
	if (r->ooms > MAX_OOM_PLANS) {
		r->oom_failed = true;
		return 0;
	}
	s->ts_ms += 5000;
	struct rv_event oom = { .type = RV_EVENT_NODE_OOM,
				.role = role ? RV_ROLE_PS : RV_ROLE_WORKER,
				.rank = 0,
				.exit_code = 137,
				.memory_mb = *mem,
				.peak_memory_mb = need };
	snprintf(oom.node, sizeof(oom.node), "%s", role ? "ps-0" : "worker-0");
	int64_t plan_id = 0;
	if (post_event(s, &oom, &plan_id) < 0)
		return -EIO;
	if (!plan_id) {
		r->oom_failed = true;
		snprintf(r->last_reason, sizeof(r->last_reason), "no oom plan for the node_oom event");
		return 0;
	}
	struct rv_scale_plan plan;
	struct rv_err err = { 0 };
	int rc = rv_brain_plan_get(s->bc, s->uid, "oom", 0, 0, &plan, &err);
	if (rc <= 0) {
		if (rc < 0)
			failed(s, rc, &err);
		return -EIO;
	}
	int64_t next = plan.nlaunch > 0 ? plan.launch[0].resource.memory_mb : 0;
	snprintf(r->last_reason, sizeof(r->last_reason), "%.255s", plan.reason);
	if (next <= *mem) {
		r->oom_failed = true;
		return 0;
	}
	/* Every node of the role runs the same program and would OOM alike:
	 * the relaunch memory applies to the role. */
	*mem = next;
	ev->to_mb = next;
	r->plans++;
	r->plans_to_converge = r->plans;
	s->since_change_s = 0;
	return post_simple_event(s, RV_EVENT_PLAN_APPLIED, plan_id);
}

/* The next free sample of the batch being filled. */
static struct rv_sample *next_sample(struct rv_metrics_batch *b, int64_t ts)
{
	struct rv_sample *x = &b->samples[b->n++];
	memset(x, 0, sizeof(*x));
	x->ts_ms = ts;
	return x;
}

static void add_node_sample(struct rv_metrics_batch *b, int64_t ts, enum rv_role role, int rank,
			    double cpu, int64_t mem, double cpu_limit, int64_t mem_limit,
			    double step_time)
{
	struct rv_sample *n = next_sample(b, ts);
	n->kind = RV_SAMPLE_NODE;
	snprintf(n->node, sizeof(n->node), "%s-%d", rv_role_name(role), rank);
	n->role = role;
	n->rank = rank;
	n->cpu = round(cpu * 100) / 100;
	n->memory_mb = mem;
	n->cpu_limit = cpu_limit;
	n->memory_limit_mb = mem_limit;
	n->step_time = step_time > 0 ? round(step_time * 1e4) / 1e4 : -1;
}

static double noisy(struct run *s, double x, double scale)
{
	double v = x * (1 + scale * s->j->noise * rng_normal(&s->rng));
	return v > 0 ? v : 0;
}

/* Post the batch (under a new id) and start an empty one. */
static int flush(struct run *s, struct rv_metrics_batch *b)
{
	struct rv_err err = { 0 };
	int rc = rv_brain_post_metrics(s->bc, s->uid, b, NULL, &err);
	b->n = 0;
	b->batch_id[0] = '\0';
	return rc < 0 ? failed(s, rc, &err) : 0;
}

/* Simulate one round of job time and report its samples. */
static int report_round(struct run *s)
{
	const struct sim_job *j = s->j;
	const struct sim_config *c = &s->c;
	double steady = model_speed(j, c);
	double need_w = j->worker_cpu_need;
	double need_p = model_ps_cpu_need(j, c->workers, c->ps);
	int64_t mem_p = model_ps_mem_need(j, c->ps);
	/* A batch is posted once it holds BATCH_SAMPLES; one step adds at most
	 * 1 + workers + ps more. */
	size_t cap = BATCH_SAMPLES + 1 + (size_t)c->workers + (size_t)c->ps;
	struct rv_metrics_batch b = { .samples = calloc(cap, sizeof(struct rv_sample)) };
	if (!b.samples)
		return -ENOMEM;
	int rc = 0;
	for (double t = s->o->sample_s; t <= s->o->round_s + 1e-9; t += s->o->sample_s) {
		s->ts_ms += (int64_t)(s->o->sample_s * 1000);
		s->since_change_s += s->o->sample_s;
		double warm = j->warmup_s > 0 ? 0.5 + 0.5 * s->since_change_s / j->warmup_s : 1;
		if (warm > 1)
			warm = 1;
		double speed = noisy(s, steady * warm, 1);
		s->step += (int64_t)(speed * s->o->sample_s / (j->batch_size > 0 ? j->batch_size : 1));
		struct rv_sample *sp = next_sample(&b, s->ts_ms);
		sp->kind = RV_SAMPLE_SPEED;
		sp->speed = round(speed * 1000) / 1000;
		sp->step = s->step;
		sp->workers = c->workers;
		sp->ps = c->ps;
		/* Usage follows the work actually done: the need scaled by the
		 * speed reached, capped by the limit. */
		double load = steady > 0 ? speed / model_speed_ideal(j, c->workers, c->ps) : 0;
		double step_time = speed > 0 ? j->batch_size * c->workers / speed : 0;
		for (int i = 0; i < c->workers; i++) {
			double cpu = fmin(c->worker_cpu, noisy(s, need_w * load, 0.5));
			int64_t mem = (int64_t)(j->worker_mem_need_mb * (0.9 + 0.1 * rng_uniform(&s->rng)));
			add_node_sample(&b, s->ts_ms, RV_ROLE_WORKER, i, cpu, mem, c->worker_cpu,
					c->worker_mem_mb, noisy(s, step_time, 0.5));
		}
		for (int i = 0; i < c->ps; i++) {
			double cpu = fmin(c->ps_cpu, noisy(s, need_p * load, 0.5));
			int64_t mem = (int64_t)(mem_p * (0.9 + 0.1 * rng_uniform(&s->rng)));
			add_node_sample(&b, s->ts_ms, RV_ROLE_PS, i, cpu, mem, c->ps_cpu,
					c->ps_mem_mb, -1);
		}
		if (b.n >= BATCH_SAMPLES && (rc = flush(s, &b)) < 0)
			break;
	}
	if (rc == 0 && b.n > 0)
		rc = flush(s, &b);
	rv_metrics_batch_release(&b);
	return rc < 0 ? -EIO : 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Wait until the planner has looked at our newest sample ("planned_ts" of the
 * job), or a short pause when the job cannot be read. */
static void wait_planned(struct run *s)
{
	for (int i = 0; i < 400; i++) {
		struct rv_brain_job job;
		if (rv_brain_job_get(s->bc, s->uid, &job, NULL) < 0) {
			sleep_ms(40);
			return;
		}
		if (job.planned_ts_ms >= s->ts_ms)
			return;
		sleep_ms(5);
	}
}

static int play(struct run *s)
{
	struct sim_result *r = s->r;
	struct rv_err err = { 0 };
	struct rv_job_spec spec;
	job_spec(s, &spec);
	struct rv_scale_plan plan;
	int rc = rv_brain_register(s->bc, &spec, s->uid, &plan, &err);
	rv_job_spec_release(&spec);
	if (rc < 0)
		return failed(s, -EIO, &err);
	/* The create plan sets everything; what it leaves out the user gave. */
	s->c = s->j->user;
	apply_plan(s, &plan);
	s->last_plan_id = plan.id;
	if (s->last_plan_id && post_simple_event(s, RV_EVENT_PLAN_APPLIED, s->last_plan_id) < 0)
		return -EIO;
	int quiet = 0;
	for (r->rounds = 0; r->rounds < s->o->max_rounds; r->rounds++) {
		int role = model_oom_role(s->j, &s->c);
		if (role >= 0) {
			if (handle_oom(s, role) < 0)
				return -EIO;
			if (r->oom_failed)
				return 0;
			quiet = 0;
			continue;
		}
		if (report_round(s) < 0)
			return -EIO;
		wait_planned(s);
		rc = rv_brain_plan_get(s->bc, s->uid, "running", s->last_plan_id, 0, &plan, &err);
		if (rc < 0)
			return failed(s, -EIO, &err);
		if (rc == 1) {
			struct sim_config before = s->c;
			apply_plan(s, &plan);
			if (plan.id > s->last_plan_id)
				s->last_plan_id = plan.id;
			r->plans++;
			if (!config_same(&before, &s->c)) {
				r->plans_to_converge = r->plans;
				s->since_change_s = 0;
			}
			if (post_simple_event(s, RV_EVENT_PLAN_APPLIED, plan.id) < 0)
				return -EIO;
			quiet = 0;
			continue;
		}
		if (++quiet >= s->o->settle_rounds) {
			r->rounds++;
			break;
		}
	}
	/* The last config must also survive: one more OOM check after the loop. */
	if (model_oom_role(s->j, &s->c) >= 0) {
		r->oom_failed = true;
		r->ooms++;
	}
	s->ts_ms += 1000;
	return post_simple_event(s, RV_EVENT_JOB_FINISHED, 0);
}

void rover_run(const struct sim_job *j, const struct sim_opts *o, struct sim_result *r)
{
	memset(r, 0, sizeof(*r));
	struct run s = { .j = j, .o = o, .r = r, .ts_ms = SIM_T0_MS };
	rng_seed(&s.rng, j->name);
	/* As before the client: three tries 100 ms apart when the brain is busy. */
	struct rv_brain_opts bo = { .url = o->brain,
				    .token = o->token,
				    .connect_timeout_ms = 3000,
				    .timeout_ms = 30000,
				    .max_attempts = 3,
				    .backoff_ms = 100,
				    .backoff_max_ms = 200 };
	struct rv_err err = { 0 };
	s.bc = rv_brain_client_new(&bo, &err);
	if (!s.bc) {
		snprintf(r->error, sizeof(r->error), "could not create brain client: %.100s",
			 err.msg);
		return;
	}
	int rc = play(&s);
	s.bc = rv_brain_client_free(s.bc);
	r->ran = rc == 0;
	r->final = s.c;
	r->speed = r->oom_failed ? 0 : model_speed(j, &s.c);
	r->cores = config_cores(j, &s.c);
}
