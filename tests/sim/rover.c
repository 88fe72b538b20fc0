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
#include "parse.h"
#include "rover_scaling.h"
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
	double job_s;            /* job time since the start (memory rises with it) */
	double since_change_s;   /* for warm-up */
	int oom_role;            /* an OOM seen during the last round: 0 worker, 1 ps, -1 */
	int64_t last_rss[2];     /* last sampled memory of each role since its relaunch, 0 none */
	bool slow[256];          /* workers still straggling (by rank) */
	/* cumulative cgroup CPU throttling counters of each node (by role, rank) */
	int64_t periods[2][256], throttled[2][256], throttled_us[2][256];
	int64_t step;
	int64_t last_plan_id;
	struct sim_config c;
	struct rv_job_spec spec; /* as registered: the replica bounds plans apply within */
	struct rv_scaling_target t; /* the nodes as the master would run them */
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

/* The job's nodes as the plan library sees them, from the config. */
static void target_from_config(struct run *s)
{
	const struct sim_config *c = &s->c;
	struct rv_scaling_target *t = &s->t;
	memset(t, 0, sizeof(*t));
	struct rv_plan_group *w = &t->groups[RV_ROLE_WORKER];
	w->present = true;
	w->count = c->workers;
	w->resource = (struct rv_resource){ .cpu = c->worker_cpu, .memory_mb = c->worker_mem_mb };
	if (s->j->strategy == SIM_PS) {
		struct rv_plan_group *ps = &t->groups[RV_ROLE_PS];
		ps->present = true;
		ps->count = c->ps;
		ps->resource = (struct rv_resource){ .cpu = c->ps_cpu, .memory_mb = c->ps_mem_mb };
	}
}

/* Apply a plan as rover-master applies it: through rv_scaling_apply, the one
 * function the master's plans_apply calls, so the simulation credits no
 * action the master does not take.  Counts and resources become the config;
 * a migrated PS runs with its own CPU (the simulated PS share the load
 * evenly: the slowest PS sets the pace, so the PS CPU is the lowest); a
 * replaced straggler's relaunch is a healthy worker.  A relaunch restarts
 * the job's warm-up (*relaunched).  eff (may be NULL) gets what was done and
 * what was not, for plan_applied. */
static void apply_plan(struct run *s, const struct rv_scale_plan *plan, bool *relaunched,
		       struct rv_scaling_effect *eff)
{
	struct rv_scaling_effect local;
	if (!eff)
		eff = &local;
	rv_scaling_apply(plan, &s->spec, &s->t, eff);
	const struct rv_plan_group *w = &s->t.groups[RV_ROLE_WORKER];
	s->c.workers = w->count;
	if (w->resource.cpu > 0)
		s->c.worker_cpu = w->resource.cpu;
	if (w->resource.memory_mb > 0)
		s->c.worker_mem_mb = w->resource.memory_mb;
	if (s->j->strategy == SIM_PS) {
		const struct rv_plan_group *ps = &s->t.groups[RV_ROLE_PS];
		s->c.ps = ps->count;
		double lo = INFINITY;
		for (int i = 0; i < ps->count; i++) {
			char node[RV_NAME_MAX];
			snprintf(node, sizeof(node), "ps-%d", i);
			double cpu = rv_scaling_node_resource(&s->t, RV_ROLE_PS, node).cpu;
			if (cpu > 0 && cpu < lo)
				lo = cpu;
		}
		if (isfinite(lo))
			s->c.ps_cpu = lo;
		if (ps->resource.memory_mb > 0)
			s->c.ps_mem_mb = ps->resource.memory_mb;
	}
	for (int i = 0; i < eff->nact; i++) {
		const struct rv_scaling_action *a = &eff->act[i];
		if (a->kind == RV_SCALING_REPLACE && a->role == RV_ROLE_WORKER && a->rank < 256)
			s->slow[a->rank] = false;
	}
	if (relaunched)
		*relaunched = eff->nact > 0;
	if (!config_fits_node(s->j, &s->c, &s->o->cluster))
		s->r->infeasible = true;
	snprintf(s->r->last_reason, sizeof(s->r->last_reason), "%.255s", plan->reason);
	/* ROVER_SIM_PLANS=1: every applied plan on stderr, to see how a job
	 * converged (the JSON keeps only the last reason) */
	const char *trace = getenv("ROVER_SIM_PLANS");
	if (trace && *trace == '1')
		fprintf(stderr,
			"plan %s t=%.0f w=%d wcpu=%.1f wmem=%lld ps=%d pscpu=%.1f psmem=%lld: %s\n",
			s->j->name, s->job_s, s->c.workers, s->c.worker_cpu,
			(long long)s->c.worker_mem_mb, s->c.ps, s->c.ps_cpu,
			(long long)s->c.ps_mem_mb, plan->reason);
}

/* Stragglers among the current workers. */
static int slow_count(const struct run *s)
{
	int n = 0;
	for (int i = 0; i < s->c.workers && i < 256; i++)
		n += s->slow[i];
	return n;
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

/* plan_applied as a master sends it: with the parts it did not apply. */
static int post_applied(struct run *s, int64_t plan_id, const struct rv_scaling_effect *eff)
{
	struct rv_event ev = { .type = RV_EVENT_PLAN_APPLIED,
			       .role = RV_ROLE_WORKER,
			       .rank = -1,
			       .exit_code = -1,
			       .plan_id = plan_id };
	snprintf(ev.not_applied, sizeof(ev.not_applied), "%s", eff->not_applied);
	return post_event(s, &ev, NULL);
}

/* A role relaunched with other memory (or other PS) has its RSS sampled
 * afresh. */
static void rss_afresh(struct run *s, const struct sim_config *before)
{
	if (before->worker_mem_mb != s->c.worker_mem_mb)
		s->last_rss[0] = 0;
	if (before->ps_mem_mb != s->c.ps_mem_mb || before->ps != s->c.ps)
		s->last_rss[1] = 0;
}

/* The job died of OOM on role's first node: report it, apply the oom plan. */
static int handle_oom(struct run *s, int role)
{
	struct sim_result *r = s->r;
	int64_t *mem = role ? &s->c.ps_mem_mb : &s->c.worker_mem_mb;
	/* What a killed container shows: the limit it hit and the last RSS
	 * sampled before the kill (never the true need); with no sample since
	 * its start, the RSS on the way up to the limit. */
	int64_t rss = s->last_rss[role];
	if (rss <= 0 || rss > *mem)
		rss = (int64_t)((double)*mem * (0.8 + 0.18 * rng_uniform(&s->rng)));
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
				.peak_memory_mb = rss };
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
	 * the relaunch memory applies to the role.  The rest of the plan is
	 * applied as a master applies it (an oom plan may carry a change the
	 * brain planned before the kill). */
	struct sim_config before = s->c;
	struct rv_scaling_effect eff;
	apply_plan(s, &plan, NULL, &eff);
	/* the node manager relaunches the role's nodes with that memory */
	*mem = next;
	s->t.groups[role ? RV_ROLE_PS : RV_ROLE_WORKER].resource.memory_mb = next;
	ev->to_mb = next;
	rss_afresh(s, &before);
	const char *trace = getenv("ROVER_SIM_PLANS");
	if (trace && *trace == '1')
		fprintf(stderr, "plan %s t=%.0f oom %s: %lld -> %lld MiB (last rss %lld): %s\n",
			s->j->name, s->job_s, role ? "ps" : "worker", (long long)ev->from_mb,
			(long long)next, (long long)rss, plan.reason);
	if (!config_fits_node(s->j, &s->c, &s->o->cluster))
		r->infeasible = true;
	r->plans++;
	r->plans_to_converge = r->plans;
	s->since_change_s = 0;
	return post_applied(s, plan_id, &eff);
}

/* The next free sample of the batch being filled. */
static struct rv_sample *next_sample(struct rv_metrics_batch *b, int64_t ts)
{
	struct rv_sample *x = &b->samples[b->n++];
	memset(x, 0, sizeof(*x));
	x->ts_ms = ts;
	return x;
}

/* Standard normal distribution function. */
static double phi(double z)
{
	return 0.5 * erfc(-z / M_SQRT2);
}

/* Demand within one 100 ms quota period varies around the mean demand by
 * this share (threads wake and sleep); a period whose demand exceeds the
 * limit is throttled, for the part it could not run. */
#define PERIOD_SPREAD 0.1
#define PERIOD_US     100000

/* Advance a node's cgroup cpu.stat counters over dt_s seconds of a mean
 * demand `demand` under `limit` cores.  The kernel adds to throttled time
 * each CPU's run queue of the group for as long as it sat throttled: a
 * period's demand D over a limit L adds about (D - L) x the period, the
 * cores held back (a 2-thread spinner under a 0.5-core quota for 3 s read
 * 4.48 s here, not 2.25).  Over the periods: the mean excess E[(D - L)+]
 * for the period's demand N(demand, PERIOD_SPREAD x demand). */
static void throttle_step(struct run *s, int role, int rank, double demand, double limit,
			  double dt_s)
{
	if (rank >= 256 || limit <= 0)
		return;
	int64_t periods = (int64_t)(dt_s * 1e6 / PERIOD_US);
	double sd = PERIOD_SPREAD * demand;
	double a = sd > 0 ? (demand - limit) / sd : 0;
	double share = demand > 0 ? phi(a) : 0;
	int64_t thr = (int64_t)llround((double)periods * share);
	/* binomial noise on the count */
	thr += (int64_t)llround(sqrt((double)periods * share * (1 - share)) * rng_normal(&s->rng));
	thr = thr < 0 ? 0 : thr > periods ? periods : thr;
	/* cores held back in a throttled period: E[(D - L)+] / P(D > L) */
	double excess = sd * exp(-a * a / 2) / sqrt(2 * M_PI) + (demand - limit) * share;
	double held = share > 0 ? excess / share : 0;
	s->periods[role][rank] += periods;
	s->throttled[role][rank] += thr;
	s->throttled_us[role][rank] += (int64_t)((double)thr * PERIOD_US * held);
}

static void add_node_sample(struct run *s, struct rv_metrics_batch *b, int64_t ts,
			    enum rv_role role, int rank, double cpu, int64_t mem, double cpu_limit,
			    int64_t mem_limit, double step_time)
{
	struct rv_sample *n = next_sample(b, ts);
	int r = role == RV_ROLE_PS;
	if (rank < 256 && s->periods[r][rank] > 0) {
		n->nr_periods = s->periods[r][rank];
		n->nr_throttled = s->throttled[r][rank];
		n->throttled_usec = s->throttled_us[r][rank];
	}
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

/* Simulate one round of job time and report its samples.  A node whose
 * memory need rises past its limit during the round ends it: s->oom_role. */
static int report_round(struct run *s)
{
	const struct sim_job *j = s->j;
	const struct sim_config *c = &s->c;
	double steady = model_speed_running(j, c) *
			model_straggler_factor(j, c->workers, slow_count(s));
	double dw, dp;
	model_role_demand(j, c, &dw, &dp);
	/* A batch is posted once it holds BATCH_SAMPLES; one step adds at most
	 * 1 + workers + ps more. */
	size_t cap = BATCH_SAMPLES + 1 + (size_t)c->workers + (size_t)c->ps;
	struct rv_metrics_batch b = { .samples = calloc(cap, sizeof(struct rv_sample)) };
	if (!b.samples)
		return -ENOMEM;
	int rc = 0;
	s->oom_role = -1;
	for (double t = s->o->sample_s; t <= s->o->round_s + 1e-9; t += s->o->sample_s) {
		s->ts_ms += (int64_t)(s->o->sample_s * 1000);
		s->job_s += s->o->sample_s;
		s->since_change_s += s->o->sample_s;
		int oom = model_oom_role_at(j, c, s->job_s);
		if (oom >= 0) {
			s->oom_role = oom;
			break;
		}
		double warm = 1;
		if (j->warmup_s > 0 && s->since_change_s < j->warmup_s)
			warm = j->warmup_start +
			       (1 - j->warmup_start) * s->since_change_s / j->warmup_s;
		double speed = noisy(s, steady * warm, 1);
		s->step += (int64_t)(speed * s->o->sample_s / (j->batch_size > 0 ? j->batch_size : 1));
		struct rv_sample *sp = next_sample(&b, s->ts_ms);
		sp->kind = RV_SAMPLE_SPEED;
		sp->speed = round(speed * 1000) / 1000;
		sp->step = s->step;
		sp->workers = c->workers;
		sp->ps = c->ps;
		/* Usage follows the work the job can do (warm-up, the slowest
		 * role), capped by the limit, with half the job's noise; the speed
		 * sample's own noise is not in it. */
		double step_time = speed > 0 ? j->batch_size * c->workers / speed : 0;
		int64_t wmem = model_worker_mem_at(j, s->job_s);
		int64_t pmem = model_ps_mem_at(j, c->ps, s->job_s);
		for (int i = 0; i < c->workers; i++) {
			double d = dw * warm;
			throttle_step(s, 0, i, d, c->worker_cpu, s->o->sample_s);
			double cpu = fmin(c->worker_cpu, noisy(s, d, 0.5));
			int64_t mem = (int64_t)((double)wmem * (0.9 + 0.1 * rng_uniform(&s->rng)));
			if (mem > s->last_rss[0])
				s->last_rss[0] = mem;
			double st = step_time * (i < 256 && s->slow[i] ? j->straggler_slowdown : 1);
			add_node_sample(s, &b, s->ts_ms, RV_ROLE_WORKER, i, cpu, mem, c->worker_cpu,
					c->worker_mem_mb, noisy(s, st, 0.5));
		}
		for (int i = 0; i < c->ps; i++) {
			double d = dp * warm;
			throttle_step(s, 1, i, d, c->ps_cpu, s->o->sample_s);
			double cpu = fmin(c->ps_cpu, noisy(s, d, 0.5));
			int64_t mem = (int64_t)((double)pmem * (0.9 + 0.1 * rng_uniform(&s->rng)));
			if (mem > s->last_rss[1])
				s->last_rss[1] = mem;
			add_node_sample(s, &b, s->ts_ms, RV_ROLE_PS, i, cpu, mem, c->ps_cpu,
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
	/* Up to 30 s: a loaded machine (eight jobs at once, a test run beside)
	 * can keep the planner past a couple of seconds, and a round played
	 * before its plan made the line move between runs. */
	int64_t until = rv_mono_ms() + 30000;
	while (rv_mono_ms() < until) {
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
	job_spec(s, &s->spec);
	struct rv_scale_plan plan;
	int rc = rv_brain_register(s->bc, &s->spec, s->uid, &plan, &err);
	if (rc < 0)
		return failed(s, -EIO, &err);
	/* The create plan sets everything; what it leaves out the user gave. */
	s->c = s->j->user;
	target_from_config(s);
	struct rv_scaling_effect eff;
	apply_plan(s, &plan, NULL, &eff);
	s->last_plan_id = plan.id;
	if (s->last_plan_id && post_applied(s, s->last_plan_id, &eff) < 0)
		return -EIO;
	int quiet = 0;
	for (r->rounds = 0; r->rounds < s->o->max_rounds; r->rounds++) {
		int role = model_oom_role_at(s->j, &s->c, s->job_s);
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
		if (s->oom_role >= 0) {
			/* Killed during the round: report it before anything else,
			 * once the planner has seen the round's samples (a plan
			 * it makes from them rides in the oom plan; whether it
			 * came first must not depend on timing). */
			wait_planned(s);
			if (handle_oom(s, s->oom_role) < 0)
				return -EIO;
			if (r->oom_failed)
				return 0;
			quiet = 0;
			continue;
		}
		wait_planned(s);
		rc = rv_brain_plan_get(s->bc, s->uid, "running", s->last_plan_id, 0, &plan, &err);
		if (rc < 0)
			return failed(s, -EIO, &err);
		if (rc == 1) {
			struct sim_config before = s->c;
			bool relaunched = false;
			apply_plan(s, &plan, &relaunched, &eff);
			if (plan.id > s->last_plan_id)
				s->last_plan_id = plan.id;
			r->plans++;
			if (!config_same(&before, &s->c)) {
				r->plans_to_converge = r->plans;
				s->since_change_s = 0;
				rss_afresh(s, &before);
			} else if (relaunched) {
				/* a replaced or migrated node re-forms the job */
				s->since_change_s = 0;
			}
			if (post_applied(s, plan.id, &eff) < 0)
				return -EIO;
			quiet = 0;
			continue;
		}
		/* A round within the job's warm-up after a change, or before its
		 * memory reached its peak, is not quiet: the job is not done
		 * showing what it needs. */
		if (s->since_change_s < s->j->warmup_s ||
		    (s->j->mem_rise > 0 && s->job_s < s->j->mem_rise_s))
			continue;
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

struct rv_brain_client *rover_brain_client_new(const struct sim_opts *o, struct rv_err *err)
{
	struct rv_brain_opts bo = { .url = o->brain,
				    .token = o->token,
				    .connect_timeout_ms = 3000,
				    .timeout_ms = 30000,
				    .max_attempts = 3,
				    .backoff_ms = 100,
				    .backoff_max_ms = 200 };
	return rv_brain_client_new(&bo, err);
}

void rover_run(const struct sim_job *j, const struct sim_opts *o, struct sim_result *r)
{
	memset(r, 0, sizeof(*r));
	struct run *sp = calloc(1, sizeof(*sp));
	if (!sp) {
		snprintf(r->error, sizeof(r->error), "out of memory");
		return;
	}
	struct run s_ = { .j = j, .o = o, .r = r, .ts_ms = SIM_T0_MS, .oom_role = -1 };
	*sp = s_;
	struct run *s = sp;
	rng_seed(&s->rng, j->name, o->seed);
	for (int i = 0; i < j->stragglers && i < 256; i++)
		s->slow[i] = true;
	struct rv_err err = { 0 };
	s->bc = rover_brain_client_new(o, &err);
	if (!s->bc) {
		snprintf(r->error, sizeof(r->error), "could not create brain client: %.100s",
			 err.msg);
		free(s);
		return;
	}
	int rc = play(s);
	rv_job_spec_release(&s->spec);
	s->bc = rv_brain_client_free(s->bc);
	r->ran = rc == 0;
	r->final = s->c;
	r->speed = r->oom_failed ? 0
				 : model_speed(j, &s->c) *
					   model_straggler_factor(j, s->c.workers, slow_count(s));
	r->cores = config_cores(j, &s->c);
	r->cost = config_cost(j, &s->c, &o->cluster);
	free(s);
}
