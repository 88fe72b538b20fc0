/*
 * planner.c: when rover-brain makes plans, and the glue to the policy.
 *
 * create stage: on registration, in the registering transaction.
 * oom stage: on a node_oom event, in the event's request.
 * running stage: one planner thread.  Metrics ingestion marks a job dirty
 * (planner_touch); the job is planned once no new batch came for the
 * debounce time, and every running job is also revisited on a timer.  One
 * pass over one job holds the job's advisory lock (store_plan_lock: several
 * brains on one database never plan a job twice) and owns one REPEATABLE
 * READ transaction.  What to plan is algorithms/ (policy.c): this file only
 * reads the job's history from the store into the algorithms' structs and
 * turns their decisions into ScalePlans.  No SQL here (store.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brain.h"
#include "log.h"
#include "parse.h"
#include "rover_scaling.h"

static void params_for(const struct brain *b, struct rv_alg_params *p)
{
	rv_alg_params_default(p);
	p->min_usage_samples = (int)b->cfg.min_samples;
	p->min_outcome_samples = (int)b->cfg.min_samples;
}

/* Never a node larger than the largest the cluster reported (without
 * reports, the documented default of rv_alg_params); cluster mode: never ask
 * for more than the monitor says is free. */
static int cluster_limits(PGconn *c, const struct rv_job_spec *spec, struct rv_alg_limits *lim,
			  struct rv_err *err)
{
	double cpu;
	int64_t mem;
	int rc = store_cluster_largest(c, &cpu, &mem, err);
	if (rc < 0)
		return rc;
	if (cpu > 0 && (lim->max_cpu <= 0 || cpu < lim->max_cpu))
		lim->max_cpu = cpu;
	if (mem > 0 && (lim->max_memory_mb <= 0 || mem < lim->max_memory_mb))
		lim->max_memory_mb = mem;
	if (spec->optimize_mode != RV_OPT_CLUSTER)
		return 0;
	rc = store_cluster_free(c, &cpu, &mem, err);
	if (rc == 0 && cpu >= 0) {
		lim->free_cpu = cpu;
		lim->free_memory_mb = mem;
	}
	return rc;
}

int planner_create_plan(struct brain *b, PGconn *c, const struct store_job *job,
			const struct rv_job_spec *spec, struct rv_scale_plan *plan,
			struct rv_err *err)
{
	struct rv_alg_params p;
	params_for(b, &p);
	struct rv_alg_limits lim;
	rv_scaling_limits(spec, &p, &lim);
	int rc = cluster_limits(c, spec, &lim, err);
	if (rc < 0)
		return rc;
	struct rv_alg_job_features f;
	rv_scaling_features(spec, &f);
	struct rv_alg_ask ask;
	rv_scaling_ask(spec, &ask);

	size_t max = (size_t)p.create_history_max;
	struct store_history_row *rows = calloc(max, sizeof(*rows));
	struct rv_alg_history_job *hist = calloc(max, sizeof(*hist));
	if (!rows || !hist) {
		free(rows);
		free(hist);
		return rv_err_set(err, -ENOMEM, "", "out of memory for the create-stage history");
	}
	int n = rc = store_history(c, spec->strategy, (int)max, rows, err);
	for (int i = 0; i < n; i++) {
		hist[i].id = rows[i].uid;
		hist[i].f.strategy = f.strategy;
		hist[i].f.parameters = rows[i].parameters;
		hist[i].f.batch_size = rows[i].batch_size;
		hist[i].f.dataset_size = rows[i].dataset_size;
		hist[i].f.user = rows[i].user;
		hist[i].f.name = rows[i].name;
		rv_scaling_config(&rows[i].plan, &hist[i].cfg);
		/* Neighbours contribute what they used, not what they were
		 * given (the create stage adds its margin). */
		struct rv_alg_group *g[2] = { &hist[i].cfg.worker, &hist[i].cfg.ps };
		for (int k = 0; k < 2; k++) {
			if (rows[i].used_cpu[k] > 0)
				g[k]->res.cpu = rows[i].used_cpu[k];
			if (rows[i].used_mem_mb[k] > 0)
				g[k]->res.memory_mb = rows[i].used_mem_mb[k];
		}
	}
	struct rv_alg_decision d;
	if (rc >= 0) {
		rc = rv_alg_plan_create_job(&f, &ask, hist, (size_t)n, &lim, &p, &d);
		if (rc < 0)
			rv_err_set(err, rc, "", "could not compute a create-stage plan");
	}
	free(rows);
	free(hist);
	if (rc < 0)
		return rc;
	rv_scaling_from_decision(&d, spec, job->uid, "create", plan);
	return 0;
}

/* The oom plan carries the pending plan's change: the killed role's memory
 * is the larger of the two. */
static void oom_fold_pending(struct rv_scale_plan *plan, const struct rv_alg_config *pend,
			     const struct rv_event *ev, int64_t pend_id)
{
	bool ps = ev->role == RV_ROLE_PS;
	int64_t want = ps ? pend->ps.res.memory_mb : pend->worker.res.memory_mb;
	struct rv_plan_group *g = &plan->groups[ps ? RV_ROLE_PS : RV_ROLE_WORKER];
	if (want > g->resource.memory_mb) {
		g->resource.memory_mb = want;
		plan->launch[0].resource.memory_mb = want;
	}
	size_t n = strlen(plan->reason);
	if (n < sizeof(plan->reason))
		snprintf(plan->reason + n, sizeof(plan->reason) - n,
			 "; with plan %" PRId64 "'s change, not applied yet", pend_id);
}

int planner_oom_plan(struct brain *b, PGconn *c, const struct store_job *job,
		     const struct rv_event *ev, struct rv_scale_plan *plan, struct rv_err *err)
{
	struct rv_job_spec spec;
	memset(&spec, 0, sizeof(spec));
	struct store_plan_row cur;
	struct rv_alg_params p;
	params_for(b, &p);
	struct rv_alg_limits lim;
	int ooms = 0;
	int rc = store_job_spec(c, job->id, &spec, err);
	if (rc < 0)
		goto out;
	rc = store_plans_applied(c, job->id, &cur, 1, err);
	if (rc == 0)
		rc = rv_err_set(err, -ENOENT, "", "job %s has no applied plan to grow", job->uid);
	if (rc < 0)
		goto out;
	rv_scaling_limits(&spec, &p, &lim);
	rc = cluster_limits(c, &spec, &lim, err);
	if (rc == 0)
		rc = store_node_oom_count(c, job->id, ev->node, &ooms, err);
	if (rc < 0)
		goto out;
	struct rv_alg_config cfg;
	rv_scaling_config(&cur.plan, &cfg);
	/* A running or oom plan stored after the applied one and not applied
	 * yet (another role's OOM a moment before): the job takes only the
	 * newest plan, so this one would drop its change.  It is folded in (the
	 * OOM raises memory from what the node had). */
	struct store_plan_row pend;
	rc = store_plan_latest_row(c, job->id, NULL, &pend, err);
	if (rc < 0)
		goto out;
	bool fold = rc == 1 && pend.applied_ts_ms == 0 && pend.plan.id > cur.plan.id;
	if (fold)
		rv_scaling_config(&pend.plan, &cfg);
	/* the event itself is stored before this runs: at least one OOM */
	rc = rv_scaling_oom(&cfg, ev, ooms, &spec, job->uid, &lim, &p, plan);
	if (rc < 0) {
		rv_err_set(err, rc, "", "could not compute an oom plan for node %s", ev->node);
		goto out;
	}
	if (fold)
		oom_fold_pending(plan, &cfg, ev, pend.plan.id);
out:
	rv_job_spec_release(&spec);
	return rc;
}

/* A stored plan row as the policy sees it (algorithm borrowed from row). */
static void applied_of(const struct store_plan_row *row, struct rv_alg_applied *a)
{
	rv_scaling_applied(&row->plan, a);
	a->stage = row->stage;
	a->algorithm = row->algorithm;
	a->outcome = row->outcome;
	a->applied_ts_ms = row->applied_ts_ms;
	a->predicted_speed = row->predicted_speed;
}

/* What one running-stage pass reads from the store, and owns until
 * planner_pass_release. */
struct planner_pass {
	PGconn *c;
	const struct store_job *job;
	struct rv_alg_params p;
	struct rv_job_spec spec;
	struct store_plan_row *rows;
	struct store_plan_row last; /* the newest running plan: pending borrows it */
	struct rv_alg_applied *applied, pending;
	struct rv_alg_job_history h;
	struct rv_alg_speed_obs *obs;
	struct rv_alg_usage *usage, *mem_usage, *old_usage;
	struct rv_alg_step *steps, *mem_steps, *old_steps;
	size_t nobs, nusage, nsteps, nmem_usage, nmem_steps, nold_usage, nold_steps;
};

static void planner_pass_release(struct planner_pass *s)
{
	rv_job_spec_release(&s->spec);
	free(s->rows);
	free(s->applied);
	free(s->obs);
	free(s->usage);
	free(s->steps);
	free(s->mem_usage);
	free(s->mem_steps);
	free(s->old_usage);
	free(s->old_steps);
}

/* The job's plans and limits: 1 when there is nothing to plan (a
 * single-job master plans in-process, an unapplied plan still stands, an
 * oom plan the job has not applied waits), 0 to go on, < 0 on error. */
static int planner_pass_plans(struct planner_pass *s, struct rv_err *err)
{
	struct store_plan_row oom;
	int rc = store_job_spec(s->c, s->job->id, &s->spec, err);

	if (rc < 0 || s->spec.optimize_mode == RV_OPT_SINGLE_JOB)
		return rc < 0 ? rc : 1;
	s->h.strategy = rv_scaling_strategy(s->spec.strategy);
	s->h.now_ms = s->job->last_sample_ms;
	rc = store_plan_latest_row(s->c, s->job->id, "running", &s->last, err);
	if (rc < 0)
		return rc;
	if (rc == 1 && s->last.applied_ts_ms == 0) {
		applied_of(&s->last, &s->pending);
		s->h.pending = &s->pending;
	}
	if (rv_alg_pending_stands(&s->h))
		return 1;
	rc = store_plan_latest_row(s->c, s->job->id, "oom", &oom, err);
	if (rc < 0)
		return rc;
	if (rc == 1 && oom.applied_ts_ms == 0 &&
	    rv_alg_oom_plan_waits(oom.plan.based_on_ts_ms, s->job->last_sample_ms, &s->p))
		return 1;
	rc = store_plans_applied(s->c, s->job->id, s->rows, s->p.applied_max, err);
	if (rc < 0)
		return rc;
	for (int i = 0; i < rc; i++)
		applied_of(&s->rows[i], &s->applied[i]);
	s->h.applied = s->applied;
	s->h.n_applied = (size_t)rc;
	rv_scaling_limits(&s->spec, &s->p, &s->h.lim);
	rc = cluster_limits(s->c, &s->spec, &s->h.lim, err);
	return rc < 0 ? rc : 0;
}

/* The speeds, and the newest plan judged once its outcome window is
 * measured: 1 when this pass ends (still measuring, or *plan holds a
 * revert), 0 to go on, < 0 on error. */
static int planner_pass_judge(struct planner_pass *s, struct rv_scale_plan *plan, int64_t *reverts,
			      struct rv_err *err)
{
	struct rv_alg_outcome_window w;
	struct rv_alg_outcome_speeds sp;
	struct rv_alg_verdict v;
	struct rv_alg_decision d;
	int rc = store_speed_obs(s->c, s->job->id, s->p.speed_obs_max, &s->obs, &s->nobs, err);

	if (rc < 0)
		return rc;
	s->h.speed = s->obs;
	s->h.n_speed = s->nobs;
	if (rv_alg_outcome_window(&s->h, &s->p, &w) != 1)
		return 0;
	rc = store_outcome_speeds(s->c, s->job->id, &w, s->p.min_outcome_samples, &sp, err);
	if (rc < 0)
		return rc;
	rc = rv_alg_judge_outcome(&s->h, &sp, &s->p, &v, &d);
	if (rc == -EAGAIN) /* still measuring: no new plan until judged */
		return 1;
	if (rc < 0)
		return rv_err_set(err, rc, "", "could not judge plan %" PRId64, s->applied[0].id);
	int src = store_plan_set_outcome(s->c, s->applied[0].id, rv_alg_outcome_name(v.outcome),
					 v.before, v.after, err);
	if (src < 0)
		return src;
	if (rc == 1) {
		rv_scaling_from_decision(&d, &s->spec, s->job->uid, "running", plan);
		plan->based_on_ts_ms = s->job->last_sample_ms;
		*reverts = s->applied[0].id;
		return 1;
	}
	/* the rest of this pass sees the outcome too */
	s->applied[0].outcome = v.outcome;
	return 0;
}

/* The usage and step-time windows the policy names: step times back to a
 * configuration whose stragglers a plan replaced, memory a window back
 * across plans. */
static int planner_pass_usage(struct planner_pass *s, struct rv_err *err)
{
	struct rv_alg_job_history *h = &s->h;
	int rc = store_usage(s->c, s->job->id, rv_alg_usage_since(h, &s->p), s->p.usage_max,
			     &s->usage, &s->nusage, &s->steps, &s->nsteps, err);

	if (rc < 0)
		return rc;
	h->usage = s->usage;
	h->n_usage = s->nusage;
	h->steps = s->steps;
	h->n_steps = s->nsteps;
	int64_t steps_since = rv_alg_steps_since(h, &s->p);
	if (steps_since < rv_alg_usage_since(h, &s->p)) {
		rc = store_usage(s->c, s->job->id, steps_since, s->p.usage_max, &s->old_usage,
				 &s->nold_usage, &s->old_steps, &s->nold_steps, err);
		if (rc < 0)
			return rc;
		h->steps = s->old_steps;
		h->n_steps = s->nold_steps;
	}
	rc = store_usage(s->c, s->job->id, rv_alg_mem_usage_since(h, &s->p), s->p.usage_max,
			 &s->mem_usage, &s->nmem_usage, &s->mem_steps, &s->nmem_steps, err);
	if (rc < 0)
		return rc;
	h->mem_usage = s->mem_usage;
	h->n_mem_usage = s->nmem_usage;
	return 0;
}

/* Running-stage pass for one job, in the caller's snapshot: reads the
 * history from the store, asks the policy (algorithms/), writes a judged
 * outcome.  Leaves plan->stage empty when the job keeps its configuration;
 * *reverts is the plan a revert undoes. */
static int planner_running_plan(struct brain *b, PGconn *c, const struct store_job *job,
				struct rv_scale_plan *plan, int64_t *reverts, struct rv_err *err)
{
	struct planner_pass s = { .c = c, .job = job };
	struct rv_alg_decision d;
	int rc;

	memset(plan, 0, sizeof(*plan));
	*reverts = 0;
	params_for(b, &s.p);
	s.rows = calloc((size_t)s.p.applied_max, sizeof(*s.rows));
	s.applied = calloc((size_t)s.p.applied_max, sizeof(*s.applied));
	if (!s.rows || !s.applied)
		rc = rv_err_set(err, -ENOMEM, "", "out of memory for the plan history");
	else
		rc = planner_pass_plans(&s, err);
	if (rc == 0)
		rc = planner_pass_judge(&s, plan, reverts, err);
	if (rc == 0)
		rc = planner_pass_usage(&s, err);
	if (rc == 0) {
		rc = rv_alg_plan_job(&s.h, &s.p, &d);
		if (rc < 0)
			rv_err_set(err, rc, "", "could not compute a running plan");
	}
	if (rc == 0 && d.changed) {
		rv_scaling_from_decision(&d, &s.spec, job->uid, "running", plan);
		plan->based_on_ts_ms = job->last_sample_ms;
	} else if (rc == 0) {
		char q[600];
		rv_log_debug("no new plan", "job=%s reason=%s", job->uid,
			     rv_log_q(q, sizeof(q), d.reason));
	}
	planner_pass_release(&s);
	return rc < 0 ? rc : 0;
}

void planner_notify(struct brain *b)
{
	api_plans_changed(b);
	pthread_mutex_lock(&b->plan_mu);
	b->plan_seq++;
	pthread_cond_broadcast(&b->plan_cv);
	pthread_mutex_unlock(&b->plan_mu);
}

/* Mark a job to plan once the debounce time has passed since since_ms. */
static void touch_since(struct brain *b, int64_t job_id, int64_t since_ms)
{
	pthread_mutex_lock(&b->planner_mu);
	int i;
	for (i = 0; i < b->ndirty; i++)
		if (b->dirty_job[i] == job_id)
			break;
	/* Debounce: the clock restarts on every batch. */
	if (i == b->ndirty && b->ndirty < PLANNER_QUEUE_MAX) {
		b->dirty_job[b->ndirty++] = job_id;
		b->dirty_since_ms[i] = since_ms;
	}
	if (i < b->ndirty && b->dirty_since_ms[i] < since_ms)
		b->dirty_since_ms[i] = since_ms;
	pthread_cond_signal(&b->planner_cv);
	pthread_mutex_unlock(&b->planner_mu);
}

void planner_touch(struct brain *b, int64_t job_id)
{
	touch_since(b, job_id, rv_mono_ms());
}

static void log_pass_failed(int64_t job_id, const struct rv_err *err)
{
	char q[600];
	rv_log_warn("could not plan job", "job_id=%" PRId64 " reason=%s", job_id,
		    rv_log_q(q, sizeof(q), err->msg));
}

/* A pass that stored nothing: logged, and counted by its cause (rc, a
 * negative errno: -EAGAIN is a serialization failure or deadlock). */
static void pass_failed(struct brain *b, int64_t job_id, int rc, const struct rv_err *err)
{
	log_pass_failed(job_id, err);
	atomic_fetch_add(rc == -EAGAIN ? &b->plan_passes_failed_serialization
				       : &b->plan_passes_failed_other,
			 1);
}

/* A pass that found its job's lock held (another brain's pass, or an oom
 * event being stored) is tried again this long after: the samples it was
 * for may be the job's last for a while. */
#define PLAN_BUSY_RETRY_MS 200

/* One planner pass over one job: under its advisory lock, in one
 * transaction this function owns. */
static void plan_job(struct brain *b, int64_t job_id)
{
	struct rv_err err = { 0 };
	PGconn *c = rv_db_acquire(b->db, &err);
	if (!c) {
		pass_failed(b, job_id, err.code, &err);
		return;
	}
	int rc = store_plan_lock(c, job_id, &err);
	if (rc <= 0) {
		/* 0: another brain plans this job now, or an oom event of
		 * the job is being stored */
		if (rc < 0)
			pass_failed(b, job_id, rc, &err);
		rv_db_release(b->db, c);
		if (rc == 0)
			touch_since(b, job_id, rv_mono_ms() + PLAN_BUSY_RETRY_MS);
		return;
	}
	struct store_job job = { 0 };
	struct rv_scale_plan plan;
	int64_t reverts = 0;
	plan.stage[0] = 0;
	/* One snapshot for the whole pass: the job row, its samples and plans
	 * are read as of one moment, so a plan's based_on_ts and planned_ts
	 * name exactly the data the plan was made from. */
	rc = store_begin_snapshot(c, &err);
	if (rc == 0)
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
			rv_log_info("plan stored", "job=%s plan=%" PRId64 " algorithm=%s reason=%s",
				    job.uid, plan.id, plan.algorithm,
				    rv_log_q(q, sizeof(q), plan.reason));
		}
	} else {
		pass_failed(b, job_id, rc, &err);
	}
	struct rv_err uerr = { 0 };
	/* A serialization failure (a row the pass writes changed under its
	 * snapshot; no metrics batch writes one, so not for a batch stored
	 * meanwhile) is tried again like a held lock, not left to the timer
	 * pass: the samples it was for may be the job's last for a while. */
	if (rc == -EAGAIN)
		touch_since(b, job_id, rv_mono_ms() + PLAN_BUSY_RETRY_MS);
	if (store_plan_unlock(c, job_id, &uerr) < 0)
		log_pass_failed(job_id, &uerr);
	rv_db_release(b->db, c);
}

/* The timer pass: running jobs with samples the planner has not seen yet
 * (a job whose batch arrived while its last pass ran, or one planned by a
 * brain that died mid-pass). */
static void touch_running_jobs(struct brain *b)
{
	struct rv_err err = { 0 };
	int64_t *ids = calloc(PLANNER_QUEUE_MAX, sizeof(*ids));
	if (!ids) {
		rv_log_warn("could not list the jobs to plan", "reason=\"out of memory\"");
		return;
	}
	PGconn *c = rv_db_acquire(b->db, &err);
	int n = -EAGAIN;
	if (c) {
		n = store_jobs_unplanned(c, ids, PLANNER_QUEUE_MAX, &err);
		rv_db_release(b->db, c);
	}
	if (n < 0) {
		char q[600];
		rv_log_warn("could not list the jobs to plan", "reason=%s",
			    rv_log_q(q, sizeof(q), err.msg));
	}
	for (int i = 0; i < n; i++)
		planner_touch(b, ids[i]);
	free(ids);
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
		rv_mono_timespec(&ts, due);
		pthread_cond_timedwait(&b->planner_cv, &b->planner_mu, &ts);
	}
	pthread_mutex_unlock(&b->planner_mu);
	return NULL;
}

int planner_start(struct brain *b)
{
	pthread_mutex_init(&b->plan_mu, NULL);
	rv_cond_init_mono(&b->plan_cv);
	pthread_mutex_init(&b->planner_mu, NULL);
	rv_cond_init_mono(&b->planner_cv);
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
