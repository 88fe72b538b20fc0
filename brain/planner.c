/*
 * planner.c: when and how rover-brain makes plans.
 *
 * create stage: on registration, in the registering transaction.
 * oom stage: on a node_oom event, in the event's request.
 * running stage: one planner thread.  Metrics ingestion marks a job dirty
 * (planner_touch); the job is planned once no new batch came for the
 * debounce time, and every running job is also revisited on a timer.  The
 * computation for one job runs under a PostgreSQL advisory lock keyed by
 * the job id, so several brains on one database never plan a job twice.
 * Plans read the timestamps in the samples, never the wall clock.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brain.h"
#include "log.h"
#include "parse.h"

/* Per-node ceilings when the cluster has not reported its nodes. */
#define DEFAULT_MAX_NODE_CPU 64.0
#define DEFAULT_MAX_NODE_MEMORY_MB (512LL * 1024)
/* Speed samples after each configuration change that are warm-up: those
 * within WARMUP_MS of job time of the change, but at most half of a run. */
#define WARMUP_MS 30000
/* Outcome of a plan: "better" above +2%, "worse" below -10% (and below what
 * it predicted), else "neutral". */
#define OUTCOME_BETTER 1.02
#define OUTCOME_WORSE 0.90
#define MAX_APPLIED 32
#define MAX_HISTORY 200

static void params_for(const struct brain *b, struct rv_alg_params *p)
{
	rv_alg_params_default(p);
	p->min_usage_samples = (int)b->cfg.min_samples;
}

static enum rv_alg_strategy alg_strategy(enum rv_strategy s)
{
	return s == RV_STRATEGY_PS ? RV_ALG_PS : RV_ALG_ALLREDUCE;
}

static void spec_limits(const struct rv_job_spec *spec, struct rv_alg_limits *lim)
{
	const struct rv_replica_spec *w = &spec->replicas[RV_ROLE_WORKER];
	const struct rv_replica_spec *ps = &spec->replicas[RV_ROLE_PS];
	memset(lim, 0, sizeof(*lim));
	lim->min_workers = w->min_replicas > 0 ? w->min_replicas : 1;
	lim->max_workers = w->max_replicas >= lim->min_workers ? w->max_replicas : lim->min_workers;
	lim->node_unit = 1;
	if (ps->present) {
		lim->min_ps = ps->min_replicas > 0 ? ps->min_replicas : 1;
		lim->max_ps = ps->max_replicas >= lim->min_ps ? ps->max_replicas : lim->min_ps;
	}
	lim->max_cpu = DEFAULT_MAX_NODE_CPU;
	lim->max_memory_mb = DEFAULT_MAX_NODE_MEMORY_MB;
	lim->free_cpu = -1;
	lim->free_memory_mb = -1;
}

/* Cluster mode: never ask for more than the monitor says is free. */
static void cluster_limits(PGconn *c, const struct rv_job_spec *spec, struct rv_alg_limits *lim)
{
	if (spec->optimize_mode != RV_OPT_CLUSTER)
		return;
	double cpu;
	int64_t mem;
	if (store_cluster_free(c, &cpu, &mem, NULL) == 0 && cpu >= 0) {
		lim->free_cpu = cpu;
		lim->free_memory_mb = mem;
	}
}

static void plan_to_config(const struct rv_scale_plan *plan, struct rv_alg_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	const struct rv_plan_group *w = &plan->groups[RV_ROLE_WORKER];
	const struct rv_plan_group *ps = &plan->groups[RV_ROLE_PS];
	if (w->present) {
		cfg->worker.count = w->count;
		cfg->worker.res.cpu = w->resource.cpu;
		cfg->worker.res.memory_mb = w->resource.memory_mb;
	}
	if (ps->present) {
		cfg->ps.count = ps->count;
		cfg->ps.res.cpu = ps->resource.cpu;
		cfg->ps.res.memory_mb = ps->resource.memory_mb;
	}
}

static void config_to_plan(const struct rv_alg_config *cfg, const struct rv_job_spec *spec,
			   struct rv_scale_plan *plan)
{
	struct rv_plan_group *w = &plan->groups[RV_ROLE_WORKER];
	w->present = true;
	w->count = cfg->worker.count;
	w->resource.cpu = cfg->worker.res.cpu;
	w->resource.memory_mb = cfg->worker.res.memory_mb;
	w->resource.gpu = spec->replicas[RV_ROLE_WORKER].resource.gpu;
	if (spec->replicas[RV_ROLE_PS].present) {
		struct rv_plan_group *ps = &plan->groups[RV_ROLE_PS];
		ps->present = true;
		ps->count = cfg->ps.count;
		ps->resource.cpu = cfg->ps.res.cpu;
		ps->resource.memory_mb = cfg->ps.res.memory_mb;
	}
	/* Other roles (chief, evaluator) keep what the spec asked. */
	for (int r = RV_ROLE_CHIEF; r < RV_ROLE_COUNT; r++) {
		const struct rv_replica_spec *rs = &spec->replicas[r];
		if (!rs->present)
			continue;
		plan->groups[r].present = true;
		plan->groups[r].count = rs->replicas;
		plan->groups[r].resource = rs->resource;
	}
}

static void plan_init(struct rv_scale_plan *plan, const char *uid, const char *stage,
		      const char *algorithm)
{
	memset(plan, 0, sizeof(*plan));
	snprintf(plan->job, sizeof(plan->job), "%s", uid);
	snprintf(plan->stage, sizeof(plan->stage), "%s", stage);
	snprintf(plan->algorithm, sizeof(plan->algorithm), "%s", algorithm);
}

/* Reasons are cut at the buffer's end rather than refused. */
__attribute__((format(printf, 2, 3))) static void reason_set(struct rv_scale_plan *plan,
							     const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(plan->reason, sizeof(plan->reason), fmt, ap);
	va_end(ap);
	(void)n;
}

static void features_of(const struct rv_job_spec *spec, struct rv_alg_job_features *f)
{
	memset(f, 0, sizeof(*f));
	f->strategy = alg_strategy(spec->strategy);
	f->parameters = (double)spec->model_parameters;
	f->batch_size = spec->batch_size;
	for (int i = 0; i < spec->ndatasets; i++)
		f->dataset_size += (double)spec->datasets[i].size;
	f->user = spec->user;
	f->name = spec->name;
}

int planner_create_plan(struct brain *b, PGconn *c, const struct store_job *job,
			const struct rv_job_spec *spec, struct rv_scale_plan *plan)
{
	struct rv_alg_params p;
	params_for(b, &p);
	struct rv_alg_limits lim;
	spec_limits(spec, &lim);
	cluster_limits(c, spec, &lim);
	struct rv_alg_job_features f;
	features_of(spec, &f);

	struct store_history_row *rows = calloc(MAX_HISTORY, sizeof(*rows));
	struct rv_alg_history_job *hist = calloc(MAX_HISTORY, sizeof(*hist));
	int n = 0;
	if (rows && hist) {
		n = store_history(c, spec->strategy, MAX_HISTORY, rows, NULL);
		for (int i = 0; i < n; i++) {
			hist[i].id = rows[i].uid;
			hist[i].f.strategy = f.strategy;
			hist[i].f.parameters = rows[i].parameters;
			hist[i].f.batch_size = rows[i].batch_size;
			hist[i].f.dataset_size = rows[i].dataset_size;
			hist[i].f.user = rows[i].user;
			hist[i].f.name = rows[i].name;
			plan_to_config(&rows[i].plan, &hist[i].cfg);
		}
	}
	struct rv_alg_decision d;
	int rc = rv_alg_plan_create(&f, hist, n > 0 ? (size_t)n : 0, &lim, &p, &d);
	free(rows);
	free(hist);
	if (rc < 0)
		return rc;

	/* Explicit asks win: a role that gave resources keeps its count and
	 * resources (the running stage right-sizes them from real usage). */
	const struct rv_replica_spec *w = &spec->replicas[RV_ROLE_WORKER];
	const struct rv_replica_spec *ps = &spec->replicas[RV_ROLE_PS];
	bool kept = false;
	if (w->has_resources) {
		d.cfg.worker.count = w->replicas;
		d.cfg.worker.res.cpu = w->resource.cpu;
		d.cfg.worker.res.memory_mb = w->resource.memory_mb;
		kept = true;
	}
	if (ps->present && ps->has_resources) {
		d.cfg.ps.count = ps->replicas;
		d.cfg.ps.res.cpu = ps->resource.cpu;
		d.cfg.ps.res.memory_mb = ps->resource.memory_mb;
		kept = true;
	}
	bool all_kept = w->has_resources && (!ps->present || ps->has_resources);
	plan_init(plan, job->uid, "create", all_kept ? "user_spec" : d.algorithm);
	config_to_plan(&d.cfg, spec, plan);
	if (all_kept)
		snprintf(plan->reason, sizeof(plan->reason),
			 "the job gave resources for every role; kept as asked (the running stage "
			 "right-sizes them from observed usage)");
	else
		reason_set(plan, "%s%s", d.reason, kept ? "; roles that gave resources keep them" : "");
	plan->predicted_speed = d.predicted_speed;
	return 0;
}

int planner_oom_plan(struct brain *b, PGconn *c, const struct store_job *job,
		     const struct rv_event *ev, struct rv_scale_plan *plan)
{
	struct rv_err err = { 0 };
	struct rv_job_spec spec;
	int rc = store_job_spec(c, job->id, &spec, &err);
	if (rc < 0)
		return rc;
	struct store_plan_row cur;
	rc = store_plans_applied(c, job->id, &cur, 1, &err);
	if (rc <= 0) {
		rv_job_spec_release(&spec);
		return rc < 0 ? rc : -ENOENT;
	}
	struct rv_alg_params p;
	params_for(b, &p);
	struct rv_alg_limits lim;
	spec_limits(&spec, &lim);
	cluster_limits(c, &spec, &lim);
	struct rv_alg_config cfg;
	plan_to_config(&cur.plan, &cfg);
	enum rv_alg_role role = ev->role == RV_ROLE_PS ? RV_ALG_PS_ROLE : RV_ALG_WORKER;
	struct rv_alg_group *g = role == RV_ALG_PS_ROLE ? &cfg.ps : &cfg.worker;
	if (ev->memory_mb > 0)
		g->res.memory_mb = ev->memory_mb;
	int ooms = 1;
	{
		char id_s[24];
		snprintf(id_s, sizeof(id_s), "%" PRId64, job->id);
		const char *q[] = { id_s, ev->node };
		PGresult *r = NULL;
		if (rv_db_exec(c, "SELECT oom_count, peak_memory_mb FROM job_nodes WHERE job_id = $1::bigint"
				  " AND name = $2", 2, q, &r, NULL) > 0)
			ooms = pg_int(PQgetvalue(r, 0, 0));
		if (r)
			PQclear(r);
	}
	int64_t peak = ev->peak_memory_mb > 0 ? ev->peak_memory_mb : g->res.memory_mb;
	struct rv_alg_decision d;
	rc = rv_alg_plan_oom(&cfg, role, peak, ooms < 1 ? 1 : ooms, &lim, &p, &d);
	if (rc < 0) {
		rv_job_spec_release(&spec);
		return rc;
	}
	plan_init(plan, job->uid, "oom", "oom_memory_step");
	config_to_plan(&d.cfg, &spec, plan);
	reason_set(plan, "node %s: %s", ev->node, d.reason);
	plan->based_on_ts_ms = ev->ts_ms;
	plan->nlaunch = 1;
	snprintf(plan->launch[0].node, sizeof(plan->launch[0].node), "%s", ev->node);
	plan->launch[0].role = ev->role;
	const struct rv_alg_group *ng = role == RV_ALG_PS_ROLE ? &d.cfg.ps : &d.cfg.worker;
	plan->launch[0].resource.cpu = ng->res.cpu;
	plan->launch[0].resource.memory_mb = ng->res.memory_mb;
	rv_job_spec_release(&spec);
	return 0;
}

/* Speed samples averaged into one observation for the model: batch means
 * cut the noise the fit sees by half without hiding the curve. */
#define BATCH_MEAN 4

/* Drop the warm-up of every run of one configuration (samples oldest first)
 * and average the rest in batches of BATCH_MEAN consecutive samples. */
static size_t drop_warmup(struct rv_alg_speed_obs *o, size_t n)
{
	size_t out = 0;
	for (size_t start = 0; start < n;) {
		size_t end = start;
		while (end < n && o[end].workers == o[start].workers && o[end].ps == o[start].ps)
			end++;
		size_t skip = start;
		while (skip < end && o[skip].t_ms < o[start].t_ms + WARMUP_MS &&
		       skip - start < (end - start) / 2)
			skip++;
		for (size_t i = skip; i < end; i += BATCH_MEAN) {
			size_t k = end - i < BATCH_MEAN ? end - i : BATCH_MEAN;
			double sum = 0;
			for (size_t j = 0; j < k; j++)
				sum += o[i + j].speed;
			o[out] = o[i + k - 1];
			o[out++].speed = sum / (double)k;
		}
		start = end;
	}
	return out;
}

static bool same_groups(const struct rv_scale_plan *a, const struct rv_scale_plan *b)
{
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		const struct rv_plan_group *x = &a->groups[r], *y = &b->groups[r];
		if (x->present != y->present)
			return false;
		if (x->present && (x->count != y->count || fabs(x->resource.cpu - y->resource.cpu) > 1e-6 ||
				   x->resource.memory_mb != y->resource.memory_mb))
			return false;
	}
	return a->nmigrate == b->nmigrate && a->nremove == b->nremove;
}

/* Judge the newest applied running plan once enough samples came after it.
 * Returns 1 when a revert plan was made (in *plan), 0 otherwise; sets
 * *measuring while the outcome is still open (no new plan until it is). */
static int judge_outcome(struct brain *b, PGconn *c, const struct store_job *job,
			 struct store_plan_row *applied, int napplied,
			 struct rv_scale_plan *plan, bool *measuring, struct rv_err *err)
{
	struct store_plan_row *cur = &applied[0];
	*measuring = false;
	if (strcmp(cur->stage, "running") != 0 || strcmp(cur->outcome, "pending") != 0 ||
	    cur->applied_ts_ms <= 0)
		return 0;
	int w = cur->plan.groups[RV_ROLE_WORKER].present ? cur->plan.groups[RV_ROLE_WORKER].count : -1;
	int ps = cur->plan.groups[RV_ROLE_PS].present ? cur->plan.groups[RV_ROLE_PS].count : 0;
	double after = 0, before = 0;
	int nafter = 0, nbefore = 0;
	int rc = store_speed_summary(c, job->id, cur->applied_ts_ms, INT64_MAX, w, ps, &after,
				     &nafter, NULL, err);
	if (rc < 0)
		return rc;
	/* Past the warm-up; with few samples, the later half of them. */
	int64_t settled = cur->applied_ts_ms + WARMUP_MS;
	double late = 0, sd_after = 0, sd_before = 0;
	int nlate = 0;
	rc = store_speed_summary(c, job->id, settled, INT64_MAX, w, ps, &late, &nlate, &sd_after, err);
	if (rc < 0)
		return rc;
	if (nlate < (int)b->cfg.min_samples) {
		*measuring = true;
		return 0;
	}
	after = late;
	/* Before: the configuration the plan replaced, past its own warm-up
	 * (samples of older configurations would blur the comparison); all of
	 * its samples when too few are settled. */
	int64_t prev_ts = napplied > 1 ? applied[1].applied_ts_ms : 0;
	rc = store_speed_before(c, job->id, prev_ts + WARMUP_MS, cur->applied_ts_ms, 20, &before,
				&nbefore, &sd_before, err);
	if (rc >= 0 && nbefore < (int)b->cfg.min_samples && prev_ts > 0)
		rc = store_speed_before(c, job->id, prev_ts, cur->applied_ts_ms, 20, &before, &nbefore,
					&sd_before, err);
	if (rc < 0)
		return rc;
	const char *outcome = "unknown";
	double ratio = before > 0 ? after / before : 0;
	if (nbefore > 0 && before > 0) {
		bool below_prediction = cur->predicted_speed <= 0 ||
					after < OUTCOME_WORSE * cur->predicted_speed;
		/* "Clearly" worse: also beyond two standard errors of the
		 * difference, so noise alone does not undo a plan. */
		double se = sqrt(sd_after * sd_after / nlate + sd_before * sd_before / nbefore);
		bool significant = before - after > 2 * se;
		if (ratio >= OUTCOME_BETTER)
			outcome = "better";
		else if (ratio < OUTCOME_WORSE && below_prediction && significant)
			outcome = "worse";
		else
			outcome = "neutral";
	}
	rc = store_plan_set_outcome(c, cur->plan.id, outcome, before, after, err);
	if (rc < 0)
		return rc;
	/* the rest of this pass sees the outcome too */
	snprintf(cur->outcome, sizeof(cur->outcome), "%s", outcome);
	/* An exploration measures a configuration on purpose: a slower result
	 * is data for the model (and the configuration is not proposed again),
	 * not a mistake to undo. */
	if (strcmp(outcome, "worse") != 0 || napplied < 2 || !strcmp(cur->algorithm, "explore"))
		return 0;
	/* Revert to the configuration that ran before it. */
	const struct store_plan_row *prev = &applied[1];
	plan_init(plan, job->uid, "running", "revert");
	for (int r = 0; r < RV_ROLE_COUNT; r++)
		plan->groups[r] = prev->plan.groups[r];
	plan->predicted_speed = before;
	plan->based_on_ts_ms = job->last_sample_ms;
	snprintf(plan->reason, sizeof(plan->reason),
		 "plan %" PRId64 " (%s) measured %.1f samples/s after vs %.1f before (%+.0f%%); "
		 "reverting to %d workers",
		 cur->plan.id, cur->algorithm, after, before, (ratio - 1) * 100,
		 prev->plan.groups[RV_ROLE_WORKER].count);
	return 1;
}

/* Running-stage computation for one job; leaves plan->stage empty when the
 * job should keep its configuration.  *reverts is the plan a revert undoes. */
static int planner_running_plan(struct brain *b, PGconn *c, const struct store_job *job,
				struct rv_scale_plan *plan, int64_t *reverts, struct rv_err *err)
{
	memset(plan, 0, sizeof(*plan));
	*reverts = 0;
	struct store_plan_row *applied = calloc(MAX_APPLIED, sizeof(*applied));
	if (!applied)
		return -ENOMEM;
	struct rv_job_spec spec;
	memset(&spec, 0, sizeof(spec));
	struct rv_alg_speed_obs *obs = NULL;
	struct rv_alg_usage *usage = NULL;
	struct rv_alg_step *steps = NULL;
	size_t nobs = 0, nusage = 0, nsteps = 0;
	int rc = store_job_spec(c, job->id, &spec, err);
	if (rc < 0)
		goto out;
	/* single-job mode: the job's master plans in-process. */
	if (spec.optimize_mode == RV_OPT_SINGLE_JOB)
		goto out;
	/* An unapplied plan stands until samples newer than the data it was
	 * made from arrive: a second pass over the same data must not replace
	 * it (a revert in particular). */
	{
		struct store_plan_row last;
		if (store_plan_latest_row(c, job->id, "running", &last, err) == 1 &&
		    last.applied_ts_ms == 0 && last.plan.based_on_ts_ms >= job->last_sample_ms) {
			rc = 0;
			goto out;
		}
	}
	int napplied = rc = store_plans_applied(c, job->id, applied, MAX_APPLIED, err);
	if (rc <= 0)
		goto out;
	bool measuring;
	rc = judge_outcome(b, c, job, applied, napplied, plan, &measuring, err);
	if (rc != 0 || measuring) {
		if (rc > 0) {
			*reverts = applied[0].plan.id;
			rc = 0;
		}
		goto out;
	}
	struct rv_alg_params p;
	params_for(b, &p);
	struct rv_alg_job_state st;
	memset(&st, 0, sizeof(st));
	st.strategy = alg_strategy(spec.strategy);
	spec_limits(&spec, &st.lim);
	cluster_limits(c, &spec, &st.lim);
	plan_to_config(&applied[0].plan, &st.cur);
	st.now_ms = job->last_sample_ms;
	rc = store_speed_obs(c, job->id, 4000, &obs, &nobs, err);
	if (rc < 0)
		goto out;
	/* Speeds measured before the latest starvation growth (CPU raised by
	 * more than half, beyond any load scaling) were CPU-bound: they would
	 * teach the model a curve the job does not have.  Only when the growth
	 * measured faster ("better"): a role that only read as starved (noise
	 * at a tight limit) ran at full speed before, and its data stands. */
	for (int i = 0; i + 1 < napplied; i++) {
		if (strcmp(applied[i].outcome, "better") != 0)
			continue;
		struct rv_alg_config a, b2;
		plan_to_config(&applied[i].plan, &a);
		plan_to_config(&applied[i + 1].plan, &b2);
		/* PS CPU follows the workers/PS ratio (load scaling): only growth
		 * beyond it is starvation growth. */
		double load = 1;
		if (a.ps.count > 0 && b2.ps.count > 0 && a.worker.count > 0 && b2.worker.count > 0)
			load = ((double)a.worker.count / a.ps.count) /
			       ((double)b2.worker.count / b2.ps.count);
		if (load < 1)
			load = 1;
		if (a.worker.res.cpu > 1.6 * b2.worker.res.cpu ||
		    a.ps.res.cpu > 1.6 * load * b2.ps.res.cpu) {
			size_t k = 0;
			for (size_t j = 0; j < nobs; j++)
				if (obs[j].t_ms >= applied[i].applied_ts_ms)
					obs[k++] = obs[j];
			nobs = k;
			break;
		}
	}
	nobs = drop_warmup(obs, nobs);
	int64_t since = applied[0].applied_ts_ms;
	if (since < job->last_sample_ms - 600000)
		since = job->last_sample_ms - 600000;
	rc = store_usage(c, job->id, since, 8000, &usage, &nusage, &steps, &nsteps, err);
	if (rc < 0)
		goto out;
	st.speed = obs;
	st.n_speed = nobs;
	st.usage = usage;
	st.n_usage = nusage;
	/* Step times of the warm-up after a change would look like stragglers. */
	{
		size_t k = 0;
		for (size_t i = 0; i < nsteps; i++)
			if (steps[i].t_ms >= applied[0].applied_ts_ms + WARMUP_MS)
				steps[k++] = steps[i];
		nsteps = k;
	}
	st.steps = steps;
	st.n_steps = nsteps;
	/* The last right-sizing of each role, for hysteresis. */
	for (int i = 0; i + 1 < napplied; i++) {
		if (strcmp(applied[i].algorithm, "rightsize") != 0)
			continue;
		struct rv_alg_config to, from;
		plan_to_config(&applied[i].plan, &to);
		plan_to_config(&applied[i + 1].plan, &from);
		for (int r = 0; r < 2; r++) {
			if (st.last_resize[r].t_ms)
				continue;
			st.last_resize[r].t_ms = applied[i].applied_ts_ms;
			st.last_resize[r].to = r == RV_ALG_WORKER ? to.worker.res : to.ps.res;
			st.last_resize[r].from = r == RV_ALG_WORKER ? from.worker.res : from.ps.res;
		}
	}
	struct rv_alg_decision d;
	rc = rv_alg_plan_running(&st, &p, &d);
	if (rc < 0) {
		rv_err_set(err, rc, "", "could not compute a running plan");
		goto out;
	}
	if (!d.changed)
		goto out;
	plan_init(plan, job->uid, "running", d.algorithm);
	config_to_plan(&d.cfg, &spec, plan);
	snprintf(plan->reason, sizeof(plan->reason), "%s", d.reason);
	plan->predicted_speed = d.predicted_speed;
	plan->based_on_ts_ms = job->last_sample_ms;
	for (size_t i = 0; i < d.n_migrate && plan->nmigrate < RV_MAX_PLAN_NODES; i++) {
		struct rv_plan_node *m = &plan->migrate[plan->nmigrate++];
		snprintf(m->node, sizeof(m->node), "ps-%d", d.migrate[i].node);
		m->role = RV_ROLE_PS;
		m->resource.cpu = d.migrate[i].res.cpu;
		m->resource.memory_mb = d.migrate[i].res.memory_mb;
	}
	for (size_t i = 0; i < d.n_replace && plan->nremove < RV_MAX_PLAN_NODES; i++) {
		struct rv_plan_node *m = &plan->remove[plan->nremove++];
		snprintf(m->node, sizeof(m->node), "worker-%d", d.replace[i]);
		m->role = RV_ROLE_WORKER;
		plan->launch[plan->nlaunch++] = *m;
		plan->launch[plan->nlaunch - 1].resource.cpu = d.cfg.worker.res.cpu;
		plan->launch[plan->nlaunch - 1].resource.memory_mb = d.cfg.worker.res.memory_mb;
	}
	/* A configuration measured worse (and reverted) is not proposed again:
	 * that is how plans thrash. */
	for (int i = 0; i < napplied && plan->stage[0]; i++) {
		if (!strcmp(applied[i].outcome, "worse") && same_groups(&applied[i].plan, plan)) {
			rv_log_debug("plan not repeated", "job=%s plan=%" PRId64, job->uid,
				     applied[i].plan.id);
			plan->stage[0] = 0;
		}
	}
	if (!plan->stage[0]) {
		rc = 0;
		goto out;
	}
	/* The same advice not yet applied is not repeated. */
	struct store_plan_row last;
	if (store_plan_latest_row(c, job->id, "running", &last, err) == 1 && last.applied_ts_ms == 0 &&
	    same_groups(&last.plan, plan) && !strcmp(last.algorithm, plan->algorithm))
		plan->stage[0] = 0;
	rc = 0;
out:
	rv_job_spec_release(&spec);
	free(applied);
	free(obs);
	free(usage);
	free(steps);
	return rc;
}

void planner_notify(struct brain *b)
{
	pthread_mutex_lock(&b->plan_mu);
	b->plan_seq++;
	pthread_cond_broadcast(&b->plan_cv);
	pthread_mutex_unlock(&b->plan_mu);
}

void planner_touch(struct brain *b, int64_t job_id)
{
	pthread_mutex_lock(&b->planner_mu);
	int i;
	for (i = 0; i < b->ndirty; i++)
		if (b->dirty_job[i] == job_id)
			break;
	/* Debounce: the clock restarts on every batch. */
	if (i == b->ndirty && b->ndirty < PLANNER_QUEUE_MAX)
		b->dirty_job[b->ndirty++] = job_id;
	if (i < b->ndirty)
		b->dirty_since_ms[i] = rv_mono_ms();
	pthread_cond_signal(&b->planner_cv);
	pthread_mutex_unlock(&b->planner_mu);
}

static void plan_job(struct brain *b, int64_t job_id)
{
	struct rv_err err = { 0 };
	PGconn *c = rv_db_acquire(b->db, &err);
	if (!c) {
		char q[600];
		rv_log_warn("could not plan job", "job_id=%" PRId64 " reason=%s", job_id,
			    rv_log_q(q, sizeof(q), err.msg));
		return;
	}
	char id_s[24];
	snprintf(id_s, sizeof(id_s), "%" PRId64, job_id);
	const char *p[] = { id_s };
	PGresult *r = NULL;
	int rc = rv_db_exec(c, "SELECT pg_try_advisory_lock(7411, $1::int)", 1, p, &r, &err);
	bool locked = rc > 0 && PQgetvalue(r, 0, 0)[0] == 't';
	if (r)
		PQclear(r);
	if (!locked) {
		rv_db_release(b->db, c);
		return;
	}
	struct store_job job = { 0 };
	struct rv_scale_plan plan;
	int64_t reverts = 0;
	plan.stage[0] = 0;
	/* One snapshot for the whole pass: the job row, its samples and plans
	 * are read as of one moment, so a plan's based_on_ts and planned_ts
	 * name exactly the data the plan was made from. */
	rc = rv_db_exec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ", 0, NULL, NULL, &err);
	if (rc >= 0)
		rc = store_job_find_id(c, job_id, &job, &err);
	if (rc == 0 && !strcmp(job.status, "running"))
		rc = planner_running_plan(b, c, &job, &plan, &reverts, &err);
	if (rc == 0 && plan.stage[0])
		rc = store_plan_insert(c, job_id, &plan, reverts, &err);
	/* planned_ts in the same transaction: whoever sees it sees the plan */
	if (rc == 0)
		rc = store_job_set_planned(c, job_id, job.last_sample_ms, &err);
	if (rc == 0)
		rc = rv_db_commit(c, &err);
	else
		rv_db_rollback(c);
	if (rc == 0) {
		planner_notify(b);
		if (plan.stage[0]) {
			atomic_fetch_add(&b->plans_stored, 1);
			char q[600];
			rv_log_info("plan stored", "job=%s plan=%" PRId64 " algorithm=%s reason=%s", job.uid,
				    plan.id, plan.algorithm, rv_log_q(q, sizeof(q), plan.reason));
		}
	} else {
		char q[600];
		rv_log_warn("could not plan job", "job_id=%" PRId64 " reason=%s", job_id,
			    rv_log_q(q, sizeof(q), err.msg));
	}
	rv_db_exec(c, "SELECT pg_advisory_unlock(7411, $1::int)", 1, p, NULL, NULL);
	rv_db_release(b->db, c);
}

/* The timer pass: running jobs with samples the planner has not seen yet
 * (a job whose batch arrived while its last pass ran, or one planned by a
 * brain that died mid-pass). */
static void touch_running_jobs(struct brain *b)
{
	struct rv_err err = { 0 };
	PGconn *c = rv_db_acquire(b->db, &err);
	if (!c)
		return;
	PGresult *r = NULL;
	int rc = rv_db_exec(c, "SELECT id FROM jobs WHERE status = 'running'"
			    " AND last_sample_ms > planned_ts_ms ORDER BY id LIMIT 4096",
			    0, NULL, &r, &err);
	rv_db_release(b->db, c);
	for (int i = 0; i < rc; i++)
		planner_touch(b, strtoll(PQgetvalue(r, i, 0), NULL, 10));
	if (r)
		PQclear(r);
}

static void *planner_main(void *arg)
{
	struct brain *b = arg;
	int64_t next_timer = rv_mono_ms() + b->cfg.plan_interval_s * 1000;
	pthread_mutex_lock(&b->planner_mu);
	while (!b->planner_stop) {
		int64_t now = rv_mono_ms();
		int64_t due = next_timer;
		int64_t ready[64];
		int nready = 0;
		for (int i = 0; i < b->ndirty;) {
			int64_t at = b->dirty_since_ms[i] + b->cfg.plan_debounce_ms;
			if (at <= now && nready < 64) {
				ready[nready++] = b->dirty_job[i];
				b->dirty_job[i] = b->dirty_job[b->ndirty - 1];
				b->dirty_since_ms[i] = b->dirty_since_ms[b->ndirty - 1];
				b->ndirty--;
				continue;
			}
			if (at < due)
				due = at;
			i++;
		}
		if (nready) {
			pthread_mutex_unlock(&b->planner_mu);
			for (int i = 0; i < nready && !b->planner_stop; i++)
				plan_job(b, ready[i]);
			pthread_mutex_lock(&b->planner_mu);
			continue;
		}
		if (now >= next_timer) {
			next_timer = now + b->cfg.plan_interval_s * 1000;
			pthread_mutex_unlock(&b->planner_mu);
			touch_running_jobs(b);
			pthread_mutex_lock(&b->planner_mu);
			continue;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int64_t wait = due - now;
		ts.tv_sec += wait / 1000;
		ts.tv_nsec += (wait % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&b->planner_cv, &b->planner_mu, &ts);
	}
	pthread_mutex_unlock(&b->planner_mu);
	return NULL;
}

static void cond_init_monotonic(pthread_cond_t *cv)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
}

int planner_start(struct brain *b)
{
	pthread_mutex_init(&b->plan_mu, NULL);
	cond_init_monotonic(&b->plan_cv);
	pthread_mutex_init(&b->planner_mu, NULL);
	cond_init_monotonic(&b->planner_cv);
	b->planner_stop = false;
	int rc = pthread_create(&b->planner_thread, NULL, planner_main, b);
	if (rc)
		return -rc;
	b->planner_running = true;
	return 0;
}

void planner_stop(struct brain *b)
{
	pthread_mutex_lock(&b->planner_mu);
	b->planner_stop = true;
	pthread_cond_broadcast(&b->planner_cv);
	pthread_mutex_unlock(&b->planner_mu);
	pthread_mutex_lock(&b->plan_mu);
	pthread_cond_broadcast(&b->plan_cv);
	pthread_mutex_unlock(&b->plan_mu);
	if (b->planner_running)
		pthread_join(b->planner_thread, NULL);
	b->planner_running = false;
}
