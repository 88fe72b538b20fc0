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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brain.h"
#include "log.h"
#include "parse.h"

/* Safe defaults when a job gives no resources and no history helps. */
#define DEFAULT_WORKER_CPU 2.0
#define DEFAULT_PS_CPU 4.0
#define MIN_MEMORY_MB 2048
/* fp32 weights + gradients + two Adam moments = 16 bytes per parameter. */
#define BYTES_PER_PARAM 16.0
#define PS_SHARD_MB 4096.0

static int64_t model_memory_mb(int64_t params)
{
	return (int64_t)ceil((double)params * BYTES_PER_PARAM / (1024.0 * 1024.0));
}

static void fill_group(struct rv_plan_group *g, int count, double cpu, int64_t mem, int gpu)
{
	g->present = true;
	g->count = count;
	g->resource.cpu = cpu;
	g->resource.memory_mb = mem;
	g->resource.gpu = gpu;
}

int planner_create_plan(struct brain *b, PGconn *c, const struct store_job *job,
			const struct rv_job_spec *spec, struct rv_scale_plan *plan)
{
	(void)b;
	(void)c;
	memset(plan, 0, sizeof(*plan));
	snprintf(plan->job, sizeof(plan->job), "%s", job->uid);
	snprintf(plan->stage, sizeof(plan->stage), "create");
	int64_t model_mb = model_memory_mb(spec->model_parameters);
	bool all_given = true;
	for (int r = 0; r < RV_ROLE_COUNT; r++)
		if (spec->replicas[r].present && !spec->replicas[r].has_resources)
			all_given = false;
	int nps = 0;
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		const struct rv_replica_spec *rs = &spec->replicas[r];
		if (!rs->present)
			continue;
		if (rs->has_resources) {
			fill_group(&plan->groups[r], rs->replicas, rs->resource.cpu, rs->resource.memory_mb,
				   rs->resource.gpu);
			continue;
		}
		if (r == RV_ROLE_PS) {
			/* Parameters split over PS nodes of at most PS_SHARD_MB each. */
			nps = (int)ceil((double)model_mb / PS_SHARD_MB);
			if (nps < 1)
				nps = 1;
			if (nps < rs->min_replicas)
				nps = rs->min_replicas;
			if (rs->max_replicas > 0 && nps > rs->max_replicas)
				nps = rs->max_replicas;
			int64_t mem = (int64_t)ceil((double)model_mb / nps * 1.5) + 1024;
			fill_group(&plan->groups[r], nps, DEFAULT_PS_CPU,
				   mem < MIN_MEMORY_MB ? MIN_MEMORY_MB : mem, 0);
		} else {
			int64_t mem = model_mb * 2 + 2048;
			int count = rs->replicas > 0 ? rs->replicas : 1;
			fill_group(&plan->groups[r], count, DEFAULT_WORKER_CPU,
				   mem < MIN_MEMORY_MB ? MIN_MEMORY_MB : mem, 0);
		}
	}
	if (all_given) {
		snprintf(plan->algorithm, sizeof(plan->algorithm), "user_spec");
		snprintf(plan->reason, sizeof(plan->reason),
			 "the job gave resources for every role; kept as asked");
	} else {
		snprintf(plan->algorithm, sizeof(plan->algorithm), "default_by_model_size");
		snprintf(plan->reason, sizeof(plan->reason),
			 "no resources given: %" PRId64 " parameters need ~%" PRId64
			 " MiB of model state; workers get %.0f CPU and 2x that plus 2 GiB%s",
			 spec->model_parameters, model_mb, DEFAULT_WORKER_CPU,
			 nps ? "; model split over PS of at most 4 GiB each" : "");
	}
	return 0;
}

int planner_oom_plan(struct brain *b, PGconn *c, const struct store_job *job,
		     const struct rv_event *ev, struct rv_scale_plan *plan)
{
	(void)b;
	(void)c;
	memset(plan, 0, sizeof(*plan));
	int64_t prev = ev->memory_mb > 0 ? ev->memory_mb : MIN_MEMORY_MB;
	int64_t peak = ev->peak_memory_mb > prev ? ev->peak_memory_mb : prev;
	int64_t next = peak * 3 / 2 > prev * 2 ? peak * 3 / 2 : prev * 2;
	if (next > RV_MAX_MEMORY_MB)
		next = RV_MAX_MEMORY_MB;
	snprintf(plan->job, sizeof(plan->job), "%s", job->uid);
	snprintf(plan->stage, sizeof(plan->stage), "oom");
	snprintf(plan->algorithm, sizeof(plan->algorithm), "oom_memory_step");
	snprintf(plan->reason, sizeof(plan->reason),
		 "node %s ran out of memory at %" PRId64 " MiB (peak %" PRId64
		 " MiB); relaunch with %" PRId64 " MiB",
		 ev->node, prev, peak, next);
	plan->based_on_ts_ms = ev->ts_ms;
	plan->nlaunch = 1;
	snprintf(plan->launch[0].node, sizeof(plan->launch[0].node), "%s", ev->node);
	plan->launch[0].role = ev->role;
	plan->launch[0].resource.memory_mb = next;
	return 0;
}

/* Running-stage computation for one job; leaves plan->stage empty when the
 * job should keep its configuration. */
static int planner_running_plan(struct brain *b, PGconn *c, const struct store_job *job,
				struct rv_scale_plan *plan, struct rv_err *err)
{
	(void)b;
	(void)c;
	(void)job;
	(void)err;
	memset(plan, 0, sizeof(*plan));
	return 0;
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
	struct store_job job;
	struct rv_scale_plan plan;
	rc = store_job_find_id(c, job_id, &job, &err);
	if (rc == 0 && !strcmp(job.status, "running"))
		rc = planner_running_plan(b, c, &job, &plan, &err);
	else
		plan.stage[0] = 0;
	if (rc == 0 && plan.stage[0]) {
		rc = store_plan_insert(c, job_id, &plan, 0, &err);
		if (rc == 0) {
			atomic_fetch_add(&b->plans_stored, 1);
			planner_notify(b);
			char q[600];
			rv_log_info("plan stored", "job=%s plan=%" PRId64 " algorithm=%s reason=%s", job.uid,
				    plan.id, plan.algorithm, rv_log_q(q, sizeof(q), plan.reason));
		}
	}
	if (rc < 0) {
		char q[600];
		rv_log_warn("could not plan job", "job_id=%" PRId64 " reason=%s", job_id,
			    rv_log_q(q, sizeof(q), err.msg));
	}
	rv_db_exec(c, "SELECT pg_advisory_unlock(7411, $1::int)", 1, p, NULL, NULL);
	rv_db_release(b->db, c);
}

/* Every running job, for the timer pass. */
static void touch_running_jobs(struct brain *b)
{
	struct rv_err err = { 0 };
	PGconn *c = rv_db_acquire(b->db, &err);
	if (!c)
		return;
	PGresult *r = NULL;
	int rc = rv_db_exec(c, "SELECT id FROM jobs WHERE status = 'running' ORDER BY id LIMIT 4096",
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
