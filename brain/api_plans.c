/*
 * api_plans.c: serve plans.  GET .../plan returns the latest plan of a stage;
 * with after=ID it only returns a newer one and with wait=S it long-polls.
 * A long-poll holds no thread and no database connection while it waits:
 * the handler defers its reply (the connection is suspended) and puts a
 * waiter on b->waits; one waiter thread (api_plans_wait_main) re-queries a
 * waiter's job when this brain stores a plan (plan_seq grows) and at least
 * every WAIT_POLL_MS, so plans stored by another brain on the same database
 * are seen too, and answers it when a plan came, the wait ended or the
 * brain stops.  How many long-polls are open at once, in total and from
 * one address, is capped by the HTTP server (429 beyond).
 *
 * A found plan is kept in a small cache for PLAN_CACHE_MS, dropped at once
 * when this brain stores a plan or an event (plan_gen), so a plan read
 * costs no query under load; a change made by another brain on the same
 * database shows within PLAN_CACHE_MS, as it does for long-polls.  Handlers run on
 * the server's worker threads; the waiter list is under b->wait_mu.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brain.h"
#include "log.h"
#include "parse.h"

/* How often a waiter's job is re-read for plans stored elsewhere, ms. */
#define WAIT_POLL_MS 250
/* How often the waiter thread wakes with nothing to do, ms (bounds how late
 * a wait ends). */
#define WAIT_TICK_MS 50

/* Found-plan answers kept, and for how long, ms. */
#define PLAN_CACHE    1024
#define PLAN_CACHE_MS 250

struct plan_cache_entry {
	char uid[40];
	char stage[16];
	int64_t after;
	uint64_t gen; /* plan_gen before the query that filled it */
	int64_t at_ms;
	char *text; /* NULL: empty slot */
};

static size_t cache_slot(const char *uid, const char *stage, int64_t after)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (const char *p = uid; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	for (const char *p = stage; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	h = (h ^ (uint64_t)after) * 1099511628211ULL;
	return (size_t)(h % PLAN_CACHE);
}

void api_plans_changed(struct brain *b)
{
	atomic_fetch_add(&b->plan_gen, 1);
}

/* A fresh cached answer (malloc'd copy) or NULL. */
static char *cache_get(struct brain *b, const char *uid, const char *stage, int64_t after)
{
	if (!b->plan_cache)
		return NULL;
	struct plan_cache_entry *e = &b->plan_cache[cache_slot(uid, stage, after)];
	char *text = NULL;
	pthread_mutex_lock(&b->plan_cache_mu);
	if (e->text && e->after == after && strcmp(e->uid, uid) == 0 &&
	    strcmp(e->stage, stage) == 0 && e->gen == atomic_load(&b->plan_gen) &&
	    rv_mono_ms() - e->at_ms < PLAN_CACHE_MS)
		text = strdup(e->text);
	pthread_mutex_unlock(&b->plan_cache_mu);
	return text;
}

static void cache_put(struct brain *b, const char *uid, const char *stage, int64_t after,
		      uint64_t gen, int64_t at_ms, const char *text)
{
	if (!b->plan_cache || strlen(uid) >= sizeof(b->plan_cache->uid))
		return;
	char *copy = strdup(text);
	if (!copy)
		return;
	struct plan_cache_entry *e = &b->plan_cache[cache_slot(uid, stage, after)];
	pthread_mutex_lock(&b->plan_cache_mu);
	free(e->text);
	snprintf(e->uid, sizeof(e->uid), "%s", uid);
	snprintf(e->stage, sizeof(e->stage), "%s", stage);
	e->after = after;
	e->gen = gen;
	e->at_ms = at_ms;
	e->text = copy;
	pthread_mutex_unlock(&b->plan_cache_mu);
}

struct plan_wait {
	struct plan_wait *next;
	struct rv_http_defer *d;
	char uid[40];
	char stage[16]; /* "" = any */
	int64_t after;
	bool have_after;
	uint64_t seen; /* plan_seq when last queried */
	int64_t until_ms;
	int64_t next_ms; /* next re-query */
};

/* The reply when no plan came: 204 after after=, else 404. */
static void no_plan_reply(const char *uid, const char *stage, bool have_after,
			  struct rv_http_resp *resp)
{
	if (have_after) {
		resp->status = 204;
		return;
	}
	char detail[160];
	snprintf(detail, sizeof(detail), "job %s has no %s plan yet", uid, stage);
	rv_http_resp_error_text(resp, 404, "not_found", detail, "stage");
}

/* Answer w's deferred reply from resp (its body moves) and free w. */
static void wait_finish(struct plan_wait *w, struct rv_http_resp *resp)
{
	rv_http_complete(w->d, resp->status, resp->body);
	resp->body = NULL;
	free(w);
}

static uint64_t plan_seq_now(struct brain *b)
{
	pthread_mutex_lock(&b->plan_mu);
	uint64_t seen = b->plan_seq;
	pthread_mutex_unlock(&b->plan_mu);
	return seen;
}

/* One pass over the waiters: those due are re-queried; the answered and
 * the expired leave the list.  final: answer every one. */
static void wait_pass(struct brain *b, bool final)
{
	uint64_t seq = plan_seq_now(b);
	int64_t now = rv_mono_ms();
	/* Take the due ones off the list, so no lock is held over queries. */
	struct plan_wait *due = NULL, **pp;
	pthread_mutex_lock(&b->wait_mu);
	for (pp = &b->waits; *pp;) {
		struct plan_wait *w = *pp;
		if (final || w->seen != seq || now >= w->next_ms || now >= w->until_ms) {
			*pp = w->next;
			w->next = due;
			due = w;
			b->nwaits--;
			continue;
		}
		pp = &w->next;
	}
	pthread_mutex_unlock(&b->wait_mu);
	if (!due)
		return;

	struct rv_err err = { 0 };
	PGconn *c = rv_db_acquire(b->db, &err);
	struct plan_wait *keep = NULL;
	while (due) {
		struct plan_wait *w = due;
		due = w->next;
		struct rv_http_resp resp = { .status = 200 };
		char *text = NULL;
		int64_t job_id = 0;
		int rc = c ? store_plan_latest_text(c, w->uid, w->stage[0] ? w->stage : NULL,
						    w->after, &text, &job_id, &err)
			   : -EAGAIN;
		if (rc < 0) {
			if (c) {
				api_fail(b, &resp, rc, &err);
			} else {
				atomic_fetch_add(&b->db_unavailable, 1);
				rv_http_resp_error_text(&resp, 503, "unavailable",
							err.msg[0] ? err.msg
								   : "database unavailable",
							"");
			}
			wait_finish(w, &resp);
		} else if (text) {
			rv_http_resp_json(&resp, 200, text);
			wait_finish(w, &resp);
		} else if (final || b->planner_stop || now >= w->until_ms) {
			no_plan_reply(w->uid, w->stage, w->have_after, &resp);
			wait_finish(w, &resp);
		} else {
			w->seen = seq;
			w->next_ms = now + WAIT_POLL_MS;
			w->next = keep;
			keep = w;
		}
	}
	rv_db_release(b->db, c);
	if (!keep)
		return;
	pthread_mutex_lock(&b->wait_mu);
	while (keep) {
		struct plan_wait *w = keep;
		keep = w->next;
		w->next = b->waits;
		b->waits = w;
		b->nwaits++;
	}
	pthread_mutex_unlock(&b->wait_mu);
}

static void *api_plans_wait_main(void *arg)
{
	struct brain *b = arg;
	for (;;) {
		pthread_mutex_lock(&b->wait_mu);
		bool stop = b->wait_stop;
		pthread_mutex_unlock(&b->wait_mu);
		if (stop)
			break;
		wait_pass(b, b->planner_stop);
		struct timespec ts;
		rv_mono_timespec(&ts, rv_mono_ms() + WAIT_TICK_MS);
		/* Woken at once by planner_notify (a plan stored) and by stop. */
		pthread_mutex_lock(&b->plan_mu);
		pthread_cond_timedwait(&b->plan_cv, &b->plan_mu, &ts);
		pthread_mutex_unlock(&b->plan_mu);
	}
	wait_pass(b, true);
	return NULL;
}

int api_plans_wait_start(struct brain *b)
{
	pthread_mutex_init(&b->plan_cache_mu, NULL);
	b->plan_cache = calloc(PLAN_CACHE, sizeof(*b->plan_cache));
	if (!b->plan_cache)
		return -ENOMEM;
	pthread_mutex_init(&b->wait_mu, NULL);
	b->wait_stop = false;
	int rc = pthread_create(&b->wait_thread, NULL, api_plans_wait_main, b);
	if (rc)
		return -rc;
	b->wait_running = true;
	return 0;
}

void api_plans_wait_stop(struct brain *b)
{
	if (!b->wait_running)
		return;
	pthread_mutex_lock(&b->wait_mu);
	b->wait_stop = true;
	pthread_mutex_unlock(&b->wait_mu);
	pthread_mutex_lock(&b->plan_mu);
	pthread_cond_broadcast(&b->plan_cv);
	pthread_mutex_unlock(&b->plan_mu);
	pthread_join(b->wait_thread, NULL);
	b->wait_running = false;
	/* A waiter added after the last pass: none, since registering checks
	 * wait_stop under wait_mu. */
	pthread_mutex_destroy(&b->wait_mu);
}

void api_plans_cache_free(struct brain *b)
{
	if (!b->plan_cache)
		return;
	for (int i = 0; i < PLAN_CACHE; i++)
		free(b->plan_cache[i].text);
	free(b->plan_cache);
	b->plan_cache = NULL;
	pthread_mutex_destroy(&b->plan_cache_mu);
}

/* Defer resp and queue a waiter: 0, or 1 when the reply must be given now
 * (the brain is stopping, or resp holds a 429 from the server's caps). */
static int wait_register(struct brain *b, struct rv_http_req *req, struct rv_http_resp *resp,
			 const char *stage, int64_t after, bool have_after, uint64_t seen,
			 int64_t until)
{
	struct plan_wait *w = calloc(1, sizeof(*w));
	if (!w)
		return 1;
	snprintf(w->uid, sizeof(w->uid), "%s", req->params[0]);
	snprintf(w->stage, sizeof(w->stage), "%s", stage ? stage : "");
	w->after = after;
	w->have_after = have_after;
	w->seen = seen;
	w->until_ms = until;
	w->next_ms = rv_mono_ms() + WAIT_POLL_MS;
	pthread_mutex_lock(&b->wait_mu);
	if (b->wait_stop || b->planner_stop || !b->wait_running) {
		pthread_mutex_unlock(&b->wait_mu);
		free(w);
		return 1;
	}
	w->d = rv_http_resp_wait(resp);
	if (!w->d) {
		pthread_mutex_unlock(&b->wait_mu);
		free(w);
		return 1;
	}
	w->next = b->waits;
	b->waits = w;
	b->nwaits++;
	pthread_mutex_unlock(&b->wait_mu);
	return 0;
}

int api_plan_get(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	const char *stage = rv_http_query(req, "stage");
	if (stage && strcmp(stage, "create") != 0 && strcmp(stage, "running") != 0 &&
	    strcmp(stage, "oom") != 0) {
		rv_http_resp_error_text(resp, 400, "invalid_argument",
					"stage must be create, running or oom", "stage");
		return 0;
	}
	int64_t after = 0, wait = 0;
	if (api_query_int(req, resp, "after", 0, INT64_MAX / 2, &after) < 0 ||
	    api_query_int(req, resp, "wait", 0, b->cfg.max_wait_s, &wait) < 0)
		return 0;
	bool have_after = rv_http_query(req, "after") != NULL;
	int64_t until = rv_mono_ms() + wait * 1000;
	int64_t job_id = 0;
	uint64_t seen = plan_seq_now(b);
	const char *cstage = stage ? stage : "";
	char *text = cache_get(b, req->params[0], cstage, after);
	if (text) {
		rv_http_resp_json(resp, 200, text);
		return 0;
	}
	uint64_t gen = atomic_load(&b->plan_gen);
	int64_t at = rv_mono_ms();
	PGconn *c = api_db(b, resp);
	if (!c)
		return 0;
	int rc = store_plan_latest_text(c, req->params[0], stage, after, &text, &job_id, &err);
	rv_db_release(b->db, c);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	if (text) {
		cache_put(b, req->params[0], cstage, after, gen, at, text);
		rv_http_resp_json(resp, 200, text);
		return 0;
	}
	if (wait > 0 && wait_register(b, req, resp, stage, after, have_after, seen, until) == 0)
		return 0;
	if (resp->status == 429)
		return 0;
	no_plan_reply(req->params[0], stage ? stage : "", have_after, resp);
	return 0;
}

int api_plans_list(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	return api_job_listing(ctx, req, resp, "limit", 1, 1000, 100, store_plan_history_json);
}

int api_events_list(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	return api_job_listing(ctx, req, resp, "limit", 1, 1000, 100, store_events_json);
}
