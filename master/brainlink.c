/*
 * brainlink.c: the master's link to rover-brain (cluster mode) or to the
 * same policy in-process (single-job mode); see brainlink.h.
 *
 * Cluster threads: the sender owns one brain client and the report queue's
 * head; the poller owns another client for long-polls.  One mutex (l->mu)
 * guards the queue, the plan queue, the stats and the single-job history;
 * no call to the brain is made while it is held, so enqueueing costs a lock
 * and a copy.  The report queue is a FIFO of units: a metrics batch being
 * filled, or one event.  The sender seals the head when it first posts it
 * (no more samples, its batch id fixed) and it is never dropped from then
 * on, so a resend carries exactly the id and samples of the first try.
 */
#include "brainlink.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "parse.h"
#include "rover_alg.h"
#include "rover_scaling.h"

#define LOCAL_PLANS 16
#define OOM_NODES   64
#define NAMED_NODES 256

/* One entry of the report queue. */
struct unit {
	struct unit *next;
	bool is_event;
	bool sealed;     /* posted at least once: fixed content and id */
	int64_t born_ms; /* monotonic time of its first report */
	struct rv_event ev;
	char batch_id[RV_ID_MAX];
	struct rv_sample *s; /* samples [off, n) are still to send */
	int off, n, cap;
};

/* A usage sample as the brain stores it (node_usage row). */
struct usage_row {
	struct rv_alg_usage u;
	double step_time;    /* < 0: none */
	double compute_time; /* <= 0: none */
};

/* A plan of the policy's history with its algorithm name held here. */
struct hist_plan {
	struct rv_alg_applied a;
	char alg[64];
};

struct brainlink {
	struct brainlink_opts o;
	struct rv_job_spec spec;
	char url[256], token[256];
	bool remote; /* a brain is used */
	bool apply;  /* plans are applied by the master (not manual) */
	int efd;

	pthread_mutex_t mu;
	pthread_cond_t cv;      /* sender and poller wake-ups, stop */
	pthread_cond_t plan_cv; /* a plan was queued */
	bool stopping;
	int64_t deadline_ms; /* monotonic: the sender gives up then */
	pthread_t sender, poller;
	bool threads;

	char uid[RV_BRAIN_UID_MAX]; /* "" until registered */
	struct unit *head, *tail, *busy;
	struct brainlink_stats st;

	struct brainlink_plan *plans; /* ring of o.max_plans */
	int plan_head, plan_n;
	struct brainlink_plan last;
	bool has_last;

	/* single-job history */
	struct rv_alg_params P;
	struct rv_alg_limits lim;
	int64_t now_ms;
	struct rv_alg_speed_obs *speed; /* ring of P.speed_obs_max */
	size_t speed_head, speed_n;
	struct usage_row *usage; /* ring of P.usage_max */
	size_t usage_head, usage_n;
	struct hist_plan applied[32]; /* newest first */
	size_t napplied;
	struct hist_plan local[LOCAL_PLANS]; /* plans made here, by id */
	int64_t next_id;
	int64_t pending_id; /* newest running plan not applied; 0: none */
	/* newest oom plan not applied (0: none) and its OOM's time: no
	 * running plan until it is, as in the brain (planner.c) */
	int64_t oom_wait_id, oom_wait_ts;
	struct {
		char node[RV_NAME_MAX];
		int count;
	} ooms[OOM_NODES];
	int nooms;
	char names[2][NAMED_NODES][RV_NAME_MAX]; /* nodes without a rank, by role */
	int nnames[2];
	/* Each node's last cgroup CPU counters (cumulative nr_periods,
	 * nr_throttled and throttled_usec, and when; periods 0: none yet), by
	 * role and node index: a sample's throttled share and cores held back
	 * follow from the difference to them, as the brain computes them from
	 * consecutive rows of node_usage. */
	struct cpu_stat {
		int64_t periods, throttled, throttled_us, ts_ms;
	} cpu_stat[2][NAMED_NODES];
};

/* ---- small helpers ---- */

static int64_t unit_items(const struct unit *u)
{
	return u->is_event ? 1 : u->n - u->off;
}

static struct unit *unit_free(struct unit *u)
{
	if (u) {
		free(u->s);
		free(u);
	}
	return NULL;
}

static void set_error_locked(struct brainlink *l, const struct rv_err *err, int rc)
{
	if (err->msg[0])
		snprintf(l->st.last_error, sizeof(l->st.last_error), "%s", err->msg);
	else
		snprintf(l->st.last_error, sizeof(l->st.last_error), "%s", strerror(-rc));
	/* an answer with a status means the brain is there, only unhappy */
	l->st.reachable = false;
}

static void wait_until_locked(struct brainlink *l, pthread_cond_t *cv, int64_t mono_ms)
{
	struct timespec ts;
	rv_mono_timespec(&ts, mono_ms);
	pthread_cond_timedwait(cv, &l->mu, &ts);
}

/* ---- the plan queue ---- */

static void plan_push_locked(struct brainlink *l, const struct rv_scale_plan *p)
{
	struct brainlink_plan bp = { .plan = *p, .apply = l->apply };
	if (l->plan_n == l->o.max_plans) { /* the caller is behind: the oldest goes */
		l->plan_head = (l->plan_head + 1) % l->o.max_plans;
		l->plan_n--;
		l->st.plans_dropped++;
	}
	l->plans[(l->plan_head + l->plan_n) % l->o.max_plans] = bp;
	if (l->plan_n++ == 0) {
		uint64_t one = 1;
		ssize_t w = write(l->efd, &one, sizeof(one));
		(void)w; /* an eventfd counter far from overflow: cannot fail */
	}
	l->last = bp;
	l->has_last = true;
	l->st.plans++;
	pthread_cond_broadcast(&l->plan_cv);
}

int brainlink_fd(const struct brainlink *l)
{
	return l->efd;
}

int brainlink_plan_take(struct brainlink *l, struct brainlink_plan *out, int timeout_ms)
{
	pthread_mutex_lock(&l->mu);
	int64_t until = rv_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	while (l->plan_n == 0 && timeout_ms > 0 && rv_mono_ms() < until)
		wait_until_locked(l, &l->plan_cv, until);
	int got = 0;
	if (l->plan_n > 0) {
		*out = l->plans[l->plan_head];
		l->plan_head = (l->plan_head + 1) % l->o.max_plans;
		if (--l->plan_n == 0) {
			uint64_t v;
			ssize_t r = read(l->efd, &v, sizeof(v));
			(void)r; /* EAGAIN when already drained: fine */
		}
		got = 1;
	}
	pthread_mutex_unlock(&l->mu);
	return got;
}

int brainlink_last_plan(struct brainlink *l, struct brainlink_plan *out)
{
	pthread_mutex_lock(&l->mu);
	int got = l->has_last;
	if (got)
		*out = l->last;
	pthread_mutex_unlock(&l->mu);
	return got;
}

int brainlink_uid(struct brainlink *l, char uid[RV_BRAIN_UID_MAX])
{
	pthread_mutex_lock(&l->mu);
	int got = l->uid[0] != 0;
	snprintf(uid, RV_BRAIN_UID_MAX, "%s", l->uid);
	pthread_mutex_unlock(&l->mu);
	return got;
}

void brainlink_stats(struct brainlink *l, struct brainlink_stats *st)
{
	pthread_mutex_lock(&l->mu);
	*st = l->st;
	pthread_mutex_unlock(&l->mu);
}

/* ---- single-job history ---- */

/* Remember a plan made here (the ring keeps the newest LOCAL_PLANS). */
static void local_remember(struct brainlink *l, const struct rv_scale_plan *p,
			   enum rv_alg_stage stage)
{
	struct hist_plan *h = &l->local[p->id % LOCAL_PLANS];
	memset(h, 0, sizeof(*h));
	snprintf(h->alg, sizeof(h->alg), "%s", p->algorithm);
	rv_scaling_applied(p, &h->a);
	h->a.stage = stage;
	h->a.outcome = RV_ALG_OUTCOME_PENDING;
}

/* Plan id took effect at ts: it becomes applied[0]. */
static void local_applied_locked(struct brainlink *l, int64_t id, int64_t ts)
{
	struct hist_plan *h = &l->local[id % LOCAL_PLANS];
	if (id <= 0 || h->a.id != id)
		return; /* not one of ours, or too old to matter */
	for (size_t i = 0; i < l->napplied; i++)
		if (l->applied[i].a.id == id)
			return; /* applied twice: the first counts, as in the brain */
	size_t n = l->napplied < RV_ARRAY_SIZE(l->applied) ? l->napplied
							   : RV_ARRAY_SIZE(l->applied) - 1;
	memmove(&l->applied[1], &l->applied[0], n * sizeof(l->applied[0]));
	l->applied[0] = *h;
	l->applied[0].a.applied_ts_ms = ts;
	l->napplied = n + 1;
	if (l->pending_id == id)
		l->pending_id = 0;
	if (l->oom_wait_id == id)
		l->oom_wait_id = 0;
}

static int node_index_locked(struct brainlink *l, enum rv_alg_role role, const struct rv_sample *s)
{
	if (s->rank >= 0)
		return s->rank;
	/* no rank: first-seen order of names (the brain numbers them by name) */
	for (int i = 0; i < l->nnames[role]; i++)
		if (!strcmp(l->names[role][i], s->node))
			return i;
	if (l->nnames[role] == NAMED_NODES)
		return NAMED_NODES - 1;
	snprintf(l->names[role][l->nnames[role]], RV_NAME_MAX, "%s", s->node);
	return l->nnames[role]++;
}

/* The share of CPU quota periods the node was throttled since its previous
 * sample with counters, and the cores held back (none for a first sample, a
 * sender without counters, or a counter reset: a relaunched node starts
 * again from zero). */
static void throttled_share_locked(struct brainlink *l, const struct rv_sample *s,
				   struct rv_alg_usage *u)
{
	if (u->node < 0 || u->node >= NAMED_NODES || (int)u->role < 0 || (int)u->role > 1)
		return;
	if (s->nr_periods <= 0)
		return;
	struct cpu_stat *c = &l->cpu_stat[u->role][u->node];
	if (c->periods > 0)
		rv_alg_usage_throttling(u, s->nr_periods - c->periods,
					s->nr_throttled - c->throttled,
					s->throttled_usec - c->throttled_us, s->ts_ms - c->ts_ms);
	c->periods = s->nr_periods;
	c->throttled = s->nr_throttled;
	c->throttled_us = s->throttled_usec;
	c->ts_ms = s->ts_ms;
}

static void local_sample_locked(struct brainlink *l, const struct rv_sample *s)
{
	if (s->ts_ms > l->now_ms)
		l->now_ms = s->ts_ms;
	if (s->kind == RV_SAMPLE_SPEED) {
		size_t cap = (size_t)l->P.speed_obs_max;
		struct rv_alg_speed_obs *o = &l->speed[(l->speed_head + l->speed_n) % cap];
		if (l->speed_n == cap)
			l->speed_head = (l->speed_head + 1) % cap;
		else
			l->speed_n++;
		*o = (struct rv_alg_speed_obs){
			.workers = s->workers, .ps = s->ps, .speed = s->speed, .t_ms = s->ts_ms
		};
	} else if (s->kind == RV_SAMPLE_NODE) {
		size_t cap = (size_t)l->P.usage_max;
		struct usage_row *r = &l->usage[(l->usage_head + l->usage_n) % cap];
		if (l->usage_n == cap)
			l->usage_head = (l->usage_head + 1) % cap;
		else
			l->usage_n++;
		enum rv_alg_role role = rv_scaling_role(s->role);
		r->u = (struct rv_alg_usage){ .role = role,
					      .node = node_index_locked(l, role, s),
					      .t_ms = s->ts_ms,
					      .cpu = s->cpu,
					      .memory_mb = s->memory_mb };
		r->step_time = role == RV_ALG_WORKER ? s->step_time : -1;
		r->compute_time = role == RV_ALG_WORKER ? s->compute_time : 0;
		throttled_share_locked(l, s, &r->u);
	}
}

/* node_oom: the oom plan now, as the brain makes it in the event's request. */
static void local_oom_locked(struct brainlink *l, const struct rv_event *ev)
{
	int i;
	for (i = 0; i < l->nooms; i++)
		if (!strcmp(l->ooms[i].node, ev->node))
			break;
	if (i == l->nooms && l->nooms < OOM_NODES)
		snprintf(l->ooms[l->nooms++].node, RV_NAME_MAX, "%s", ev->node);
	int count = 1;
	if (i < l->nooms)
		count = ++l->ooms[i].count;
	if (l->napplied == 0)
		return;
	struct rv_scale_plan plan;
	const struct rv_alg_config *cur = &l->applied[0].a.cfg;
	if (rv_scaling_oom(cur, ev, count, &l->spec, l->uid, &l->lim, &l->P, &plan) < 0)
		return;
	plan.id = l->next_id++;
	local_remember(l, &plan, RV_ALG_STAGE_OOM);
	l->oom_wait_id = plan.id;
	l->oom_wait_ts = ev->ts_ms;
	plan_push_locked(l, &plan);
}

static void local_event_locked(struct brainlink *l, const struct rv_event *ev)
{
	if (ev->type == RV_EVENT_PLAN_APPLIED)
		local_applied_locked(l, ev->plan_id, ev->ts_ms);
	else if (ev->type == RV_EVENT_NODE_OOM)
		local_oom_locked(l, ev);
}

static int local_create_plan(struct brainlink *l, struct rv_err *err)
{
	struct rv_alg_job_features f;
	rv_scaling_features(&l->spec, &f);
	struct rv_alg_ask ask;
	rv_scaling_ask(&l->spec, &ask);
	struct rv_alg_decision d;
	/* no database: no finished jobs to compare with */
	int rc = rv_alg_plan_create_job(&f, &ask, NULL, 0, &l->lim, &l->P, &d);
	if (rc < 0)
		return rv_err_set(err, rc, "", "could not compute a create-stage plan");
	struct rv_scale_plan plan;
	rv_scaling_from_decision(&d, &l->spec, l->uid, "create", &plan);
	plan.id = l->next_id++;
	local_remember(l, &plan, RV_ALG_STAGE_CREATE);
	/* the create plan counts as applied from the start */
	local_applied_locked(l, plan.id, 0);
	plan_push_locked(l, &plan);
	return 0;
}

int brainlink_plan_local(struct brainlink *l, struct brainlink_plan *out, struct rv_err *err)
{
	if (l->remote)
		return rv_err_set(err, -EOPNOTSUPP, "", "the brain plans this job");
	pthread_mutex_lock(&l->mu);
	/* an oom plan not applied yet holds the running stage back */
	if (l->oom_wait_id > 0 && rv_alg_oom_plan_waits(l->oom_wait_ts, l->now_ms, &l->P)) {
		pthread_mutex_unlock(&l->mu);
		return 0;
	}
	int rc = 0;
	struct rv_alg_applied applied[RV_ARRAY_SIZE(l->applied)];
	for (size_t i = 0; i < l->napplied; i++) {
		applied[i] = l->applied[i].a;
		applied[i].algorithm = l->applied[i].alg;
	}
	struct rv_alg_applied pending;
	struct rv_alg_job_history h = {
		.strategy = rv_scaling_strategy(l->spec.strategy),
		.lim = l->lim,
		.now_ms = l->now_ms,
		.applied = applied,
		.n_applied = l->napplied,
	};
	if (l->pending_id > 0) {
		pending = l->local[l->pending_id % LOCAL_PLANS].a;
		pending.algorithm = l->local[l->pending_id % LOCAL_PLANS].alg;
		h.pending = &pending;
	}
	/* the windows, oldest first, as the brain reads its tables */
	struct rv_alg_speed_obs *speed = calloc(l->speed_n + 1, sizeof(*speed));
	struct rv_alg_usage *usage = calloc(l->usage_n + 1, sizeof(*usage));
	struct rv_alg_step *steps = calloc(l->usage_n + 1, sizeof(*steps));
	struct rv_alg_usage *mem_usage = calloc(l->usage_n + 1, sizeof(*mem_usage));
	if (!speed || !usage || !steps || !mem_usage) {
		rc = rv_err_set(err, -ENOMEM, "", "out of memory for the plan history");
		goto out;
	}
	for (size_t i = 0; i < l->speed_n; i++)
		speed[i] = l->speed[(l->speed_head + i) % (size_t)l->P.speed_obs_max];
	h.speed = speed;
	h.n_speed = l->speed_n;
	int64_t since = rv_alg_usage_since(&h, &l->P);
	int64_t steps_since = rv_alg_steps_since(&h, &l->P);
	int64_t mem_since = rv_alg_mem_usage_since(&h, &l->P);
	size_t nu = 0, ns = 0, nm = 0;
	for (size_t i = 0; i < l->usage_n; i++) {
		const struct usage_row *r = &l->usage[(l->usage_head + i) % (size_t)l->P.usage_max];
		/* the memory trend reads across plans */
		if (r->u.t_ms >= mem_since)
			mem_usage[nm++] = r->u;
		if (r->u.role == RV_ALG_WORKER && (r->step_time >= 0 || r->compute_time > 0) &&
		    r->u.t_ms >= steps_since)
			steps[ns++] = (struct rv_alg_step){ .node = r->u.node,
							    .t_ms = r->u.t_ms,
							    .step_s = r->step_time,
							    .compute_s = r->compute_time };
		if (r->u.t_ms >= since)
			usage[nu++] = r->u;
	}
	h.usage = usage;
	h.n_usage = nu;
	h.steps = steps;
	h.n_steps = ns;
	h.mem_usage = mem_usage;
	h.n_mem_usage = nm;
	struct rv_alg_verdict v;
	struct rv_alg_decision d;
	rc = rv_alg_plan_step(&h, &l->P, &v, &d);
	if (rc < 0) {
		rv_err_set(err, rc, "", "could not compute a running plan");
		goto out;
	}
	if (v.outcome != RV_ALG_OUTCOME_PENDING && l->napplied > 0)
		l->applied[0].a.outcome = v.outcome;
	if (rc == 1) {
		struct rv_scale_plan plan;
		rv_scaling_from_decision(&d, &l->spec, l->uid, "running", &plan);
		plan.based_on_ts_ms = l->now_ms;
		plan.id = l->next_id++;
		local_remember(l, &plan, RV_ALG_STAGE_RUNNING);
		l->pending_id = plan.id;
		plan_push_locked(l, &plan);
		if (out)
			*out = l->last;
	}
out:
	pthread_mutex_unlock(&l->mu);
	free(speed);
	free(usage);
	free(steps);
	free(mem_usage);
	return rc;
}

/* ---- the report queue ---- */

static size_t unit_bytes(const struct unit *u)
{
	return sizeof(*u) + (u->is_event ? 0 : (size_t)(u->n - u->off) * sizeof(struct rv_sample));
}

/* Drop the oldest reports until `items` more reports of `bytes` fit; false
 * when nothing more can go.  The head, once posted (sealed), is never cut:
 * its resends carry the same id and the same samples. */
static bool make_room_locked(struct brainlink *l, int64_t items, size_t bytes)
{
	while (l->st.queued + items > l->o.max_queue ||
	       (size_t)l->st.queued_bytes + bytes > l->o.max_queue_bytes) {
		struct unit **pp = &l->head;
		if (*pp && (*pp == l->busy || (*pp)->sealed))
			pp = &(*pp)->next;
		struct unit *u = *pp;
		if (!u)
			return false;
		if (!u->is_event && u->n - u->off > 1) {
			/* one sample at a time: the oldest goes first */
			u->off++;
			l->st.queued--;
			l->st.queued_bytes -= (int64_t)sizeof(struct rv_sample);
			l->st.dropped_samples++;
			continue;
		}
		if (u->is_event)
			l->st.dropped_events++;
		else
			l->st.dropped_samples += u->n - u->off;
		l->st.queued -= unit_items(u);
		l->st.queued_bytes -= (int64_t)unit_bytes(u);
		*pp = u->next;
		if (l->tail == u) {
			/* find the new tail: the list is short-lived here */
			struct unit *t = l->head;
			while (t && t->next)
				t = t->next;
			l->tail = t;
		}
		unit_free(u);
	}
	return true;
}

static void append_unit_locked(struct brainlink *l, struct unit *u)
{
	if (l->tail)
		l->tail->next = u;
	else
		l->head = u;
	l->tail = u;
}

int brainlink_sample(struct brainlink *l, const struct rv_sample *s)
{
	if (s->kind != RV_SAMPLE_SPEED && s->kind != RV_SAMPLE_NODE && s->kind != RV_SAMPLE_MODEL &&
	    s->kind != RV_SAMPLE_PROGRESS)
		return -EINVAL;
	pthread_mutex_lock(&l->mu);
	if (!l->remote) {
		local_sample_locked(l, s);
		pthread_mutex_unlock(&l->mu);
		return 0;
	}
	int rc = 0;
	/* room for a new batch's overhead too: conservative by one unit */
	if (!make_room_locked(l, 1, sizeof(*s) + sizeof(struct unit))) {
		l->st.dropped_samples++;
		goto out;
	}
	struct unit *u = l->tail;
	if (!u || u->is_event || u->sealed || u->n == l->o.batch_max) {
		u = calloc(1, sizeof(*u));
		if (!u) {
			rc = -ENOMEM;
			goto out;
		}
		u->born_ms = rv_mono_ms();
		append_unit_locked(l, u);
		l->st.queued_bytes += (int64_t)sizeof(*u);
		pthread_cond_broadcast(&l->cv); /* the sender times the new batch */
	}
	if (u->n == u->cap) {
		int cap = u->cap ? u->cap * 2 : 16;
		if (cap > l->o.batch_max)
			cap = l->o.batch_max;
		struct rv_sample *ns = realloc(u->s, (size_t)cap * sizeof(*ns));
		if (!ns) {
			rc = -ENOMEM;
			goto out;
		}
		u->s = ns;
		u->cap = cap;
	}
	u->s[u->n++] = *s;
	l->st.queued++;
	l->st.queued_bytes += (int64_t)sizeof(*s);
	if (u->n == l->o.batch_max)
		pthread_cond_broadcast(&l->cv);
out:
	pthread_mutex_unlock(&l->mu);
	return rc;
}

int brainlink_event(struct brainlink *l, const struct rv_event *ev)
{
	struct rv_event e = *ev;
	/* the id is fixed now, so every resend of this event carries it */
	if (!e.event_id[0] && l->remote) {
		int rc = rv_brain_new_id(e.event_id);
		if (rc < 0)
			return rc;
	}
	pthread_mutex_lock(&l->mu);
	if (!l->remote) {
		local_event_locked(l, &e);
		pthread_mutex_unlock(&l->mu);
		return 0;
	}
	int rc = 0;
	struct unit *u = NULL;
	if (!make_room_locked(l, 1, sizeof(*u))) {
		l->st.dropped_events++;
		goto out;
	}
	u = calloc(1, sizeof(*u));
	if (!u) {
		rc = -ENOMEM;
		goto out;
	}
	u->is_event = true;
	u->ev = e;
	u->born_ms = rv_mono_ms();
	append_unit_locked(l, u);
	l->st.queued++;
	l->st.queued_bytes += (int64_t)sizeof(*u);
	pthread_cond_broadcast(&l->cv);
out:
	pthread_mutex_unlock(&l->mu);
	return rc;
}

int brainlink_plan_applied(struct brainlink *l, int64_t plan_id, int64_t ts_ms)
{
	struct rv_event ev = {
		.type = RV_EVENT_PLAN_APPLIED,
		.ts_ms = ts_ms,
		.rank = -1,
		.exit_code = -1,
		.plan_id = plan_id,
	};
	return brainlink_event(l, &ev);
}

/* ---- cluster threads ---- */

static struct rv_brain_client *client_new(struct brainlink *l, struct rv_err *err)
{
	struct rv_brain_opts o = l->o.brain;
	o.url = l->url;
	o.token = l->token[0] ? l->token : NULL;
	o.max_attempts = 1; /* the link retries itself, with the same ids */
	return rv_brain_client_new(&o, err);
}

static int64_t backoff_next(const struct brainlink *l, int *cur)
{
	int b = *cur;
	*cur = b * 2 > l->o.backoff_max_ms ? l->o.backoff_max_ms : b * 2;
	return rv_mono_ms() + b;
}

/* Register the job unless it has a uid: 0, or the error. */
static int sender_register(struct brainlink *l, struct rv_brain_client *c)
{
	char uid[RV_BRAIN_UID_MAX];
	struct rv_scale_plan plan;
	struct rv_err err = { 0 };
	memset(&plan, 0, sizeof(plan));
	int rc = rv_brain_register(c, &l->spec, uid, &plan, &err);
	pthread_mutex_lock(&l->mu);
	if (rc == 0) {
		snprintf(l->uid, sizeof(l->uid), "%s", uid);
		l->st.registered = true;
		l->st.reachable = true;
		if (!plan.job[0])
			snprintf(plan.job, sizeof(plan.job), "%s", uid);
		if (plan.stage[0])
			plan_push_locked(l, &plan);
		pthread_cond_broadcast(&l->cv); /* the poller waits for the uid */
	} else {
		set_error_locked(l, &err, rc);
		/* -EEXIST: a job of this name runs (a registration whose reply
		 * was lost, or a clash): retried, as a finished one frees it;
		 * last_error says so */
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

/* Post one unit (a sealed copy); 0 when the brain acknowledged it. */
static int sender_post(struct brainlink *l, struct rv_brain_client *c, struct unit *u,
		       struct rv_err *err)
{
	if (!u->is_event) {
		struct rv_metrics_batch b = { .samples = u->s, .n = u->n };
		snprintf(b.batch_id, sizeof(b.batch_id), "%s", u->batch_id);
		int accepted = 0;
		return rv_brain_post_metrics(c, l->uid, &b, &accepted, err);
	}
	int64_t plan_id = 0;
	int rc = rv_brain_post_event(c, l->uid, &u->ev, &plan_id, err);
	if (rc < 0 || plan_id <= 0)
		return rc;
	/* node_oom: its plan, made in the event's request, fetched by id (the
	 * newest oom plan may already be another node's); a resend of the
	 * event answers the same id, so a failed fetch just goes again */
	struct rv_brain_plan_record *recs = NULL;
	int n = 0;
	rc = rv_brain_plan_history(c, l->uid, 64, &recs, &n, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&l->mu);
	for (int i = n - 1; i >= 0; i--)
		if (recs[i].plan.id == plan_id) {
			plan_push_locked(l, &recs[i].plan);
			break;
		}
	pthread_mutex_unlock(&l->mu);
	free(recs);
	return 0;
}

/* The head unit u leaves the queue (posted, or refused for good); under l->mu. */
static void head_drop_locked(struct brainlink *l, struct unit *u)
{
	l->st.queued -= unit_items(u);
	l->st.queued_bytes -= (int64_t)unit_bytes(u);
	l->head = u->next;
	if (l->tail == u)
		l->tail = NULL;
	unit_free(u);
}

static void *sender_main(void *arg)
{
	struct brainlink *l = arg;
	struct rv_err err = { 0 };
	struct rv_brain_client *c = client_new(l, &err);
	int backoff = l->o.backoff_ms;
	int64_t retry_at = 0;
	pthread_mutex_lock(&l->mu);
	for (;;) {
		int64_t now = rv_mono_ms();
		if (l->stopping && (now >= l->deadline_ms || !l->head))
			break;
		if (!c)
			break; /* cannot happen: the options were checked at start */
		if (retry_at > now) {
			wait_until_locked(l, &l->cv,
					  l->stopping && l->deadline_ms < retry_at ? l->deadline_ms
										   : retry_at);
			continue;
		}
		if (!l->uid[0]) {
			pthread_mutex_unlock(&l->mu);
			int rc = sender_register(l, c);
			pthread_mutex_lock(&l->mu);
			if (rc < 0)
				retry_at = backoff_next(l, &backoff);
			else
				backoff = l->o.backoff_ms;
			continue;
		}
		struct unit *u = l->head;
		if (!u) {
			pthread_cond_wait(&l->cv, &l->mu);
			continue;
		}
		/* a batch fills for batch_delay_ms unless full, followed, or stopping */
		if (!u->is_event && !u->sealed && u->n < l->o.batch_max && !u->next &&
		    !l->stopping && now < u->born_ms + l->o.batch_delay_ms) {
			wait_until_locked(l, &l->cv, u->born_ms + l->o.batch_delay_ms);
			continue;
		}
		if (u->sealed)
			l->st.resends++;
		if (!u->is_event && !u->sealed && rv_brain_new_id(u->batch_id) < 0) {
			snprintf(l->st.last_error, sizeof(l->st.last_error), "%s",
				 "could not make a batch id");
			retry_at = backoff_next(l, &backoff);
			continue;
		}
		u->sealed = true;
		l->busy = u;
		/* the samples still to send: dropping never touches a busy unit */
		struct unit copy = *u;
		copy.s = NULL;
		copy.next = NULL;
		if (!u->is_event) {
			copy.n = u->n - u->off;
			copy.s = malloc((size_t)copy.n * sizeof(*copy.s));
			if (copy.s)
				memcpy(copy.s, u->s + u->off, (size_t)copy.n * sizeof(*copy.s));
		}
		pthread_mutex_unlock(&l->mu);
		int rc = -ENOMEM;
		rv_err_clear(&err);
		if (u->is_event || copy.s)
			rc = sender_post(l, c, &copy, &err);
		free(copy.s);
		pthread_mutex_lock(&l->mu);
		l->busy = NULL;
		if (rc == 0) {
			l->st.reachable = true;
			if (u->is_event)
				l->st.sent_events++;
			else
				l->st.sent_samples += copy.n;
			head_drop_locked(l, u);
			backoff = l->o.backoff_ms;
		} else if (rc == -EINVAL || rc == -EDOM || rc == -EMSGSIZE || rc == -EEXIST) {
			/* the brain refuses it for good (bad, too large, or the job
			 * is finished): resending cannot help; counted as dropped */
			set_error_locked(l, &err, rc);
			l->st.reachable = true;
			if (u->is_event)
				l->st.dropped_events++;
			else
				l->st.dropped_samples += copy.n;
			head_drop_locked(l, u);
		} else {
			set_error_locked(l, &err, rc);
			retry_at = backoff_next(l, &backoff);
		}
	}
	pthread_mutex_unlock(&l->mu);
	rv_brain_client_free(c);
	return NULL;
}

static void *poller_main(void *arg)
{
	struct brainlink *l = arg;
	struct rv_err err = { 0 };
	struct rv_brain_client *c = client_new(l, &err);
	int backoff = l->o.backoff_ms;
	int64_t after = 0;
	char uid[RV_BRAIN_UID_MAX];
	pthread_mutex_lock(&l->mu);
	while (!l->stopping && c) {
		if (!l->uid[0]) {
			pthread_cond_wait(&l->cv, &l->mu);
			continue;
		}
		snprintf(uid, sizeof(uid), "%s", l->uid);
		pthread_mutex_unlock(&l->mu);
		struct rv_scale_plan plan;
		rv_err_clear(&err);
		int rc = rv_brain_plan_get(c, uid, "running", after, l->o.poll_wait_s, &plan, &err);
		pthread_mutex_lock(&l->mu);
		if (rc >= 0) {
			l->st.reachable = true;
			backoff = l->o.backoff_ms;
			if (rc == 1 && plan.id > after) {
				after = plan.id;
				plan_push_locked(l, &plan);
			}
			continue;
		}
		set_error_locked(l, &err, rc);
		int64_t until = backoff_next(l, &backoff);
		while (!l->stopping && rv_mono_ms() < until)
			wait_until_locked(l, &l->cv, until);
	}
	pthread_mutex_unlock(&l->mu);
	rv_brain_client_free(c);
	return NULL;
}

/* ---- start and stop ---- */

static int copy_spec(const struct rv_job_spec *in, struct rv_job_spec *out, struct rv_err *err)
{
	cJSON *doc = rv_job_spec_to_json(in);
	if (!doc)
		return rv_err_set(err, -ENOMEM, "", "out of memory for the job spec");
	int rc = rv_job_spec_from_json(doc, out, err);
	cJSON_Delete(doc);
	return rc;
}

static void defaults(struct brainlink_opts *o)
{
	if (o->max_queue <= 0)
		o->max_queue = 20000;
	if (o->max_queue_bytes == 0)
		o->max_queue_bytes = 8u << 20;
	if (o->batch_max <= 0 || o->batch_max > RV_MAX_SAMPLES)
		o->batch_max = 500;
	if (o->batch_delay_ms <= 0)
		o->batch_delay_ms = 1000;
	if (o->poll_wait_s <= 0)
		o->poll_wait_s = 5;
	if (o->backoff_ms <= 0)
		o->backoff_ms = 100;
	if (o->backoff_max_ms < o->backoff_ms)
		o->backoff_max_ms = o->backoff_ms > 5000 ? o->backoff_ms : 5000;
	/* a posted batch is never cut: it must leave room for the rest */
	while (o->batch_max > 1 &&
	       (o->batch_max > o->max_queue / 2 ||
		(size_t)o->batch_max * sizeof(struct rv_sample) > o->max_queue_bytes / 2))
		o->batch_max /= 2;
	if (o->min_samples <= 0)
		o->min_samples = 3;
	if (o->max_plans <= 0)
		o->max_plans = 16;
}

static struct brainlink *link_free(struct brainlink *l)
{
	if (!l)
		return NULL;
	while (l->head) {
		struct unit *u = l->head;
		l->head = u->next;
		unit_free(u);
	}
	if (l->efd >= 0)
		close(l->efd);
	pthread_cond_destroy(&l->plan_cv);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	rv_job_spec_release(&l->spec);
	free(l->plans);
	free(l->speed);
	free(l->usage);
	free(l);
	return NULL;
}

/* Whether the link talks to a brain (remote) and applies plans, by mode. */
static int link_mode(struct brainlink *l, enum rv_optimize_mode mode, const char *url,
		     struct rv_err *err)
{
	switch (mode) {
	case RV_OPT_CLUSTER:
		if (!url[0])
			return rv_err_set(err, -EINVAL, "brain.url",
					  "cluster mode needs the brain's url");
		l->remote = true;
		l->apply = true;
		return 0;
	case RV_OPT_MANUAL:
		l->remote = url[0] != 0;
		return 0;
	case RV_OPT_SINGLE_JOB:
		l->apply = true;
		return 0;
	default:
		return rv_err_set(err, -EINVAL, "mode", "unknown optimize mode %d", (int)mode);
	}
}

/* The sender and poller threads of a remote link, once a client can be
 * made; on failure none runs. */
static int link_threads_start(struct brainlink *l, struct rv_err *err)
{
	struct rv_brain_client *probe = client_new(l, err);
	if (!probe)
		return -EINVAL;
	rv_brain_client_free(probe);
	if (pthread_create(&l->sender, NULL, sender_main, l) != 0)
		return rv_err_set(err, -EAGAIN, "", "could not start the brain sender thread");
	if (pthread_create(&l->poller, NULL, poller_main, l) != 0) {
		pthread_mutex_lock(&l->mu);
		l->stopping = true;
		l->deadline_ms = 0;
		pthread_cond_broadcast(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->sender, NULL);
		return rv_err_set(err, -EAGAIN, "", "could not start the brain poller thread");
	}
	l->threads = true;
	return 0;
}

struct brainlink *brainlink_start(const struct brainlink_opts *opts, struct rv_err *err)
{
	if (!opts->spec) {
		rv_err_set(err, -EINVAL, "spec", "a job spec is required");
		return NULL;
	}
	struct brainlink *l = calloc(1, sizeof(*l));
	if (!l) {
		rv_err_set(err, -ENOMEM, "", "out of memory for the brain link");
		return NULL;
	}
	l->o = *opts;
	defaults(&l->o);
	l->o.spec = NULL;
	l->efd = -1;
	pthread_mutex_init(&l->mu, NULL);
	rv_cond_init_mono(&l->cv);
	rv_cond_init_mono(&l->plan_cv);
	const char *url = opts->brain.url ? opts->brain.url : "";
	if (link_mode(l, opts->mode, url, err) < 0)
		return link_free(l);
	if (snprintf(l->url, sizeof(l->url), "%s", url) >= (int)sizeof(l->url) ||
	    snprintf(l->token, sizeof(l->token), "%s",
		     opts->brain.token ? opts->brain.token : "") >= (int)sizeof(l->token)) {
		rv_err_set(err, -EINVAL, "brain.url", "brain url or token too long");
		return link_free(l);
	}
	if (copy_spec(opts->spec, &l->spec, err) < 0)
		return link_free(l);
	if (opts->uid && opts->uid[0]) {
		if (snprintf(l->uid, sizeof(l->uid), "%s", opts->uid) >= (int)sizeof(l->uid)) {
			rv_err_set(err, -EINVAL, "uid", "job uid too long");
			return link_free(l);
		}
		l->st.registered = true;
	}
	l->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	l->plans = calloc((size_t)l->o.max_plans, sizeof(*l->plans));
	if (l->efd < 0 || !l->plans) {
		rv_err_set(err, l->efd < 0 ? -errno : -ENOMEM, "",
			   "could not set up the plan queue");
		return link_free(l);
	}
	rv_alg_params_default(&l->P);
	l->P.min_usage_samples = l->o.min_samples;
	l->P.min_outcome_samples = l->o.min_samples;
	/* no monitor in single-job mode: the cluster's free capacity stays unknown */
	rv_scaling_limits(&l->spec, &l->P, &l->lim);
	l->next_id = 1;
	if (!l->remote) {
		l->speed = calloc((size_t)l->P.speed_obs_max, sizeof(*l->speed));
		l->usage = calloc((size_t)l->P.usage_max, sizeof(*l->usage));
		if (!l->speed || !l->usage) {
			rv_err_set(err, -ENOMEM, "", "out of memory for the sample windows");
			return link_free(l);
		}
		pthread_mutex_lock(&l->mu);
		int rc = local_create_plan(l, err);
		pthread_mutex_unlock(&l->mu);
		if (rc < 0)
			return link_free(l);
		return l;
	}
	if (link_threads_start(l, err) < 0)
		return link_free(l);
	return l;
}

int brainlink_stop(struct brainlink *l, int deadline_ms)
{
	if (!l)
		return 0;
	if (l->threads) {
		pthread_mutex_lock(&l->mu);
		l->stopping = true;
		l->deadline_ms = rv_mono_ms() + (deadline_ms > 0 ? deadline_ms : 0);
		pthread_cond_broadcast(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->sender, NULL);
		pthread_join(l->poller, NULL);
	}
	int left = (int)l->st.queued;
	link_free(l);
	return left;
}
