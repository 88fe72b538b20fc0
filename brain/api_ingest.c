/*
 * api_ingest.c: metrics batches and events from masters.  A batch is
 * validated whole before anything is written (one bad sample rejects it,
 * naming the sample index and field) and stored in one transaction.  An OOM
 * event produces an oom-stage plan at once, in the event's transaction.
 * The handlers own the transactions (store.c runs inside them).  A batch or
 * event resent with the id it had is answered as the first time and not
 * stored again.  Runs on connection threads.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brain.h"
#include "json.h"
#include "log.h"

/* A job looked up for data (rc and err from the lookup): fill resp and
 * return a negative errno unless it is running.  Finished jobs take no data. */
static int job_takes_data(struct brain *b, int rc, const struct rv_err *err,
			  const struct store_job *job, struct rv_http_resp *resp)
{
	if (rc < 0)
		return api_fail(b, resp, rc, err), rc;
	if (strcmp(job->status, "running") != 0) {
		char detail[160];
		snprintf(detail, sizeof(detail), "job %s is %s and takes no more data", job->uid,
			 job->status);
		rv_http_resp_error_text(resp, 409, "conflict", detail, "uid");
		return -EEXIST;
	}
	return 0;
}

/* Find the job in the path; fill resp on failure. */
static int ingest_job(struct brain *b, PGconn *c, struct rv_http_req *req,
		      struct rv_http_resp *resp, struct store_job *job)
{
	struct rv_err err = { 0 };
	int rc = store_job_find(c, req->params[0], job, &err);
	return job_takes_data(b, rc, &err, job, resp);
}

/*
 * An event, and for a node_oom the oom plan it makes, in one transaction: a
 * crash between the two can no longer leave an OOM counted without its plan.
 * 0 stored, 1 a resend (*id and plan->id those of the first time).
 */
static int event_tx(struct brain *b, PGconn *c, const struct store_job *job,
		    const struct rv_event *ev, int64_t *id, struct rv_scale_plan *plan,
		    struct rv_err *err)
{
	int rc = rv_db_begin(c, err);
	if (rc < 0)
		return rc;
	/* A planner pass whose snapshot predates this commit would store a
	 * running plan made from the configuration the OOM ended, numbered
	 * after the oom plan: the OOM waits for the pass to end instead. */
	if (ev->type == RV_EVENT_NODE_OOM && (rc = store_plan_lock_xact(c, job->id, err)) < 0) {
		rv_db_rollback(c);
		return rc;
	}
	int64_t made = 0;
	int seen = rc = store_event_insert(c, job->id, ev, id, &made, err);
	if (rc == 1)
		plan->id = made;
	if (rc == 0 && ev->type == RV_EVENT_NODE_OOM) {
		rc = planner_oom_plan(b, c, job, ev, plan, err);
		if (rc == 0 && plan->stage[0] &&
		    (rc = store_plan_insert(c, job->id, plan, 0, err)) == 0)
			rc = store_event_set_result_plan(c, *id, plan->id, err);
	}
	if (rc < 0) {
		rv_db_rollback(c);
		plan->id = 0;
		return rc;
	}
	rc = rv_db_commit(c, err);
	if (rc < 0) {
		plan->id = 0;
		return rc;
	}
	return seen;
}

/* ---- metrics: group commit ---- */

/*
 * One batch on its way: queued by the handler (whose reply is deferred),
 * stored by the committer in the group's transaction, answered once that
 * transaction committed.  The item is the committer's from the queue on.
 */
struct ingest_item {
	struct ingest_item *next;
	struct rv_http_defer *d; /* NULL: stored inline, reply in resp */
	char uid[40];
	struct rv_metrics_batch batch;
	/* results */
	int rc; /* 0 stored, 1 a resend, negative errno */
	int accepted;
	int64_t job_id;
	struct rv_http_resp resp; /* an error reply, when rc < 0 */
	/* the fast path's */
	int job;                 /* index in the group's jobs */
	struct ingest_item *dup; /* an earlier batch of the group with this id */
	bool seen;               /* its id was stored before: count from the store */
};

static void item_free(struct ingest_item *it)
{
	rv_metrics_batch_release(&it->batch);
	free(it->resp.body);
	free(it);
}

/* One batch alone under a savepoint, so that a batch that fails leaves
 * the others in (the slow path, after a job's merged insert failed).  0
 * (it->rc says how it went) or a negative errno when the transaction
 * itself is lost. */
static int store_one(struct brain *b, PGconn *c, struct ingest_item *it)
{
	struct rv_err err = { 0 };
	int rc = rv_db_exec(c, "SAVEPOINT batch", 0, NULL, NULL, &err);
	if (rc < 0)
		return rc;
	it->rc = store_metrics_insert(c, it->job_id, &it->batch,
				      (int)b->cfg.retain_progress_history, &it->accepted, &err);
	if (it->rc < 0) {
		api_fail(b, &it->resp, it->rc, &err);
		rc = rv_db_exec(c, "ROLLBACK TO SAVEPOINT batch", 0, NULL, NULL, &err);
		return rc < 0 ? rc : 0;
	}
	rc = rv_db_exec(c, "RELEASE SAVEPOINT batch", 0, NULL, NULL, &err);
	return rc < 0 ? rc : 0;
}

/* The batches of the group for job uid from items on, in order. */
static int job_items(struct ingest_item *items, const char *uid, struct ingest_item **out, int max)
{
	int n = 0;
	for (struct ingest_item *it = items; it && n < max; it = it->next)
		if (strcmp(it->uid, uid) == 0)
			out[n++] = it;
	return n;
}

/* Claim each batch id, then store the new batches' samples as one: one
 * COPY per table and one update of the job for all of them (the same rows
 * and the same job state as storing them one after the other). */
static int store_merged(PGconn *c, int64_t job_id, struct ingest_item **its, int n,
			int progress_keep, struct rv_err *err)
{
	size_t total = 0;
	for (int i = 0; i < n; i++) {
		its[i]->job_id = job_id;
		its[i]->accepted = its[i]->batch.n;
		its[i]->rc = 0;
		if (its[i]->batch.batch_id[0]) {
			int rc = store_metrics_claim(c, job_id, &its[i]->batch, &its[i]->accepted,
						     err);
			if (rc < 0)
				return rc;
			if (rc == 0) {
				its[i]->rc = 1; /* a resend: answered as the first time */
				continue;
			}
		}
		total += (size_t)its[i]->batch.n;
	}
	if (!total)
		return 0;
	struct rv_metrics_batch all = { .samples = calloc(total, sizeof(*all.samples)) };
	if (!all.samples)
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	for (int i = 0; i < n; i++) {
		if (its[i]->rc != 0)
			continue;
		memcpy(all.samples + all.n, its[i]->batch.samples,
		       (size_t)its[i]->batch.n * sizeof(*all.samples));
		all.n += its[i]->batch.n;
	}
	int accepted = 0;
	int rc = store_metrics_insert(c, job_id, &all, progress_keep, &accepted, err);
	free(all.samples);
	return rc;
}

/*
 * Store one job's batches of the group in the open transaction: all at
 * once when that works, else one by one, each under a savepoint.  0 (each
 * item's rc says how it went) or a negative errno when the transaction
 * itself is lost.
 */
static int store_job_batches(struct brain *b, PGconn *c, struct ingest_item **its, int n)
{
	struct rv_err err = { 0 };
	int rc = rv_db_exec(c, "SAVEPOINT job", 0, NULL, NULL, &err);
	if (rc < 0)
		return rc;
	struct store_job job = { 0 };
	struct rv_http_req req = { .params = { its[0]->uid }, .nparams = 1 };
	struct rv_http_resp first = { 0 };
	rc = ingest_job(b, c, &req, &first, &job);
	if (rc < 0) {
		/* Unknown or finished job: the same answer for each batch. */
		for (int i = 0; i < n; i++) {
			its[i]->rc = rc;
			its[i]->resp.status = first.status;
			its[i]->resp.body = first.body ? strdup(first.body) : NULL;
		}
		free(first.body);
		rc = rv_db_exec(c, "ROLLBACK TO SAVEPOINT job", 0, NULL, NULL, &err);
		return rc < 0 ? rc : 0;
	}
	rc = store_merged(c, job.id, its, n, (int)b->cfg.retain_progress_history, &err);
	if (rc >= 0)
		rc = rv_db_exec(c, "RELEASE SAVEPOINT job", 0, NULL, NULL, &err);
	if (rc >= 0 || rc == -ECONNRESET)
		return rc < 0 ? rc : 0;
	/* One batch spoilt the lot: find which, one at a time. */
	rc = rv_db_exec(c, "ROLLBACK TO SAVEPOINT job", 0, NULL, NULL, &err);
	for (int i = 0; rc >= 0 && i < n; i++) {
		its[i]->job_id = job.id;
		rc = store_one(b, c, its[i]);
	}
	return rc;
}

static int cmp_item_uid(const void *a, const void *b)
{
	const struct ingest_item *x = *(const struct ingest_item *const *)a;
	const struct ingest_item *y = *(const struct ingest_item *const *)b;
	return strcmp(x->uid, y->uid);
}

/* The slow path: job by job under savepoints, a failing job's batches
 * one at a time, so one bad batch spoils only itself. */
static int group_slow(struct brain *b, PGconn *c, struct ingest_item *items,
		      struct ingest_item **firsts, int njobs, struct ingest_item **its, int n,
		      struct rv_err *err)
{
	int rc = rv_db_begin(c, err);
	for (int j = 0; rc >= 0 && j < njobs; j++)
		rc = store_job_batches(b, c, its, job_items(items, firsts[j]->uid, its, n));
	if (rc >= 0)
		return rv_db_commit(c, err);
	rv_db_rollback(c);
	return rc;
}

static void fast_reset(struct ingest_item *items)
{
	for (struct ingest_item *it = items; it; it = it->next) {
		it->rc = 0;
		it->accepted = 0;
		it->dup = NULL;
		it->seen = false;
		free(it->resp.body);
		it->resp.body = NULL;
		it->resp.status = 200;
	}
}

/* Append a string (or a number) to a PostgreSQL array literal. */
static void lit_str(struct rv_buf *b, const char *v)
{
	rv_buf_puts(b, b->len ? "," : "{");
	rv_buf_pg_array_str(b, v);
}

static void lit_i64(struct rv_buf *b, int64_t v)
{
	rv_buf_puts(b, b->len ? "," : "{");
	rv_buf_printf(b, "%" PRId64, v);
}

static const char *lit_end(struct rv_buf *b)
{
	rv_buf_puts(b, b->len ? "}" : "{}");
	return b->data;
}

enum { LIT_UIDS, LIT_CUID, LIT_CBID, LIT_CN, LIT_SJOB, LIT_SBID, LIT_N };

/*
 * The fast path: the whole group in two round trips, one commit, and a
 * number of statements that does not grow with the group's jobs or
 * batches.  Round one: BEGIN, the jobs' rows, the claims of every batch
 * id.  Round two: the counts of resent batches, every new sample
 * (store_samples), COMMIT.  No savepoints: 1 when a statement failed (the
 * transaction is rolled back, nothing stored; the slow path finds the
 * culprit), 0 committed (each item's rc and reply set), a negative errno
 * when the connection was lost.
 */
static int group_fast(struct brain *b, PGconn *c, struct ingest_item *items,
		      struct ingest_item **firsts, int njobs, int n, struct rv_err *err)
{
	struct rv_buf lit[LIT_N];
	for (int k = 0; k < LIT_N; k++)
		rv_buf_init(&lit[k]);
	struct store_job *jobs = calloc((size_t)njobs, sizeof(*jobs));
	int *jrc = calloc((size_t)njobs, sizeof(*jrc));
	struct rv_http_resp *jresp = calloc((size_t)njobs, sizeof(*jresp));
	struct store_batch_in *in = calloc((size_t)n, sizeof(*in));
	struct store_samples ss;
	memset(&ss, 0, sizeof(ss));
	struct rv_db_stmt st1[3], st2[SS_STMTS + 2];
	memset(st1, 0, sizeof(st1));
	memset(st2, 0, sizeof(st2));
	const char *p_uids[1], *p_claim[3], *p_seen[2];
	int rc = 0, n1 = 0, n2 = 0, nin = 0, nclaim = 0, nseen = 0;
	if (!jobs || !jrc || !jresp || !in) {
		rc = rv_err_set(err, -ENOMEM, "", "out of memory");
		goto out;
	}

	/* Round one. */
	for (int j = 0; j < njobs; j++)
		lit_str(&lit[LIT_UIDS], firsts[j]->uid);
	for (struct ingest_item *it = items; it; it = it->next) {
		if (!it->batch.batch_id[0])
			continue;
		for (struct ingest_item *e = items; e != it && !it->dup; e = e->next)
			if (e->job == it->job && strcmp(e->batch.batch_id, it->batch.batch_id) == 0)
				it->dup = e;
		if (it->dup)
			continue; /* a resend of a batch of this group: claimed once */
		lit_str(&lit[LIT_CUID], it->uid);
		lit_str(&lit[LIT_CBID], it->batch.batch_id);
		lit_i64(&lit[LIT_CN], it->batch.n);
		nclaim++;
	}
	p_uids[0] = lit_end(&lit[LIT_UIDS]);
	p_claim[0] = lit_end(&lit[LIT_CUID]);
	p_claim[1] = lit_end(&lit[LIT_CBID]);
	p_claim[2] = lit_end(&lit[LIT_CN]);
	st1[n1++] = (struct rv_db_stmt){ .sql = "BEGIN" };
	store_jobs_find_stmt(&st1[n1++], p_uids);
	if (nclaim)
		store_metrics_claims_stmt(&st1[n1++], p_claim);
	for (int k = 0; k < LIT_N; k++)
		if (rv_buf_failed(&lit[k])) {
			rc = rv_err_set(err, -ENOMEM, "", "out of memory");
			goto out;
		}
	rc = rv_db_exec_pipeline(c, st1, n1, NULL, err);
	if (rc < 0)
		goto out;

	/* Which jobs take data, which batches are new. */
	for (int j = 0; j < njobs; j++) {
		struct rv_err jerr = { 0 };
		int frc = store_jobs_from_stmt(&st1[1], firsts[j]->uid, &jobs[j], &jerr);
		jrc[j] = job_takes_data(b, frc, &jerr, &jobs[j], &jresp[j]);
	}
	for (struct ingest_item *it = items; it; it = it->next) {
		if (jrc[it->job] < 0) {
			it->rc = jrc[it->job];
			it->resp.status = jresp[it->job].status;
			it->resp.body = jresp[it->job].body ? strdup(jresp[it->job].body) : NULL;
			continue;
		}
		it->job_id = jobs[it->job].id;
		it->accepted = it->batch.n;
		if (it->dup) {
			it->rc = 1; /* answered as the first of the group */
			continue;
		}
		if (it->batch.batch_id[0] &&
		    !store_metrics_claimed(&st1[2], it->job_id, it->batch.batch_id)) {
			it->rc = 1; /* a resend: answered as the first time */
			it->seen = true;
			lit_i64(&lit[LIT_SJOB], it->job_id);
			lit_str(&lit[LIT_SBID], it->batch.batch_id);
			nseen++;
			continue;
		}
		in[nin++] = (struct store_batch_in){ it->job_id, &it->batch };
	}

	/* Round two. */
	p_seen[0] = lit_end(&lit[LIT_SJOB]);
	p_seen[1] = lit_end(&lit[LIT_SBID]);
	if (rv_buf_failed(&lit[LIT_SJOB]) || rv_buf_failed(&lit[LIT_SBID])) {
		rc = rv_err_set(err, -ENOMEM, "", "out of memory");
		goto out;
	}
	int seen_st = -1, ss_st = -1;
	if (nseen) {
		seen_st = n2;
		store_metrics_seen_stmt(&st2[n2++], p_seen);
	}
	if (nin) {
		rc = store_samples_build(&ss, in, nin, err);
		if (rc < 0)
			goto out;
		ss_st = n2;
		for (int k = 0; k < ss.n; k++)
			st2[n2++] = ss.st[k];
	}
	st2[n2++] = (struct rv_db_stmt){ .sql = "COMMIT", .want_res = true };
	rc = ss_st >= 0 ? store_samples_exec(c, &ss, st2, n2, ss_st, err)
			: rv_db_exec_pipeline(c, st2, n2, NULL, err);
	if (rc == 0 && strcmp(PQcmdStatus(st2[n2 - 1].res), "ROLLBACK") == 0)
		rc = rv_err_set(err, -EIO, NULL,
				"could not commit: the transaction was rolled back");
	if (rc < 0)
		goto out;

	/* Committed. */
	if (ss_st >= 0) {
		for (int k = 0; k < ss.n; k++)
			ss.st[k].rows = st2[ss_st + k].rows;
		struct rv_err cerr = { 0 };
		if (store_samples_check(&ss, &cerr) < 0)
			rv_log_warn("metrics not all stored", "reason=\"%s\"", cerr.msg);
	}
	for (struct ingest_item *it = items; it; it = it->next) {
		if (!it->seen)
			continue;
		struct rv_err serr = { 0 };
		int src = store_metrics_seen_from_stmt(&st2[seen_st], it->job_id,
						       it->batch.batch_id, &it->accepted, &serr);
		if (src < 0) {
			it->rc = src;
			api_fail(b, &it->resp, src, &serr);
		}
	}
	for (struct ingest_item *it = items; it; it = it->next)
		if (it->dup && it->rc == 1) {
			it->accepted = it->dup->accepted;
			if (it->dup->rc < 0) {
				it->rc = it->dup->rc;
				it->resp.status = it->dup->resp.status;
				it->resp.body = it->dup->resp.body ? strdup(it->dup->resp.body)
								   : NULL;
			}
		}
out:
	for (int k = 0; k < n1; k++)
		PQclear(st1[k].res);
	for (int k = 0; k < n2; k++)
		PQclear(st2[k].res);
	store_samples_release(&ss); /* its results were in st2 */
	for (int j = 0; jresp && j < njobs; j++)
		free(jresp[j].body);
	free(jobs);
	free(jrc);
	free(jresp);
	free(in);
	for (int k = 0; k < LIT_N; k++)
		rv_buf_release(&lit[k]);
	if (rc == -ECONNRESET || rc == 0)
		return rc;
	/* A statement failed: nothing of the group is stored. */
	rv_db_rollback(c);
	fast_reset(items);
	return PQstatus(c) == CONNECTION_OK ? 1 : -ECONNRESET;
}

/*
 * Store a group of batches in one transaction with one commit: each
 * item's rc and reply are set; none counts as stored unless the commit
 * succeeded.  A lost transaction fails every batch of the group (the
 * senders resend, and their batch ids keep a resend from being stored
 * twice).
 */
static void group_commit(struct brain *b, struct ingest_item *items, int n)
{
	struct rv_err err = { 0 };
	PGconn *c = rv_db_acquire(b->db, &err);
	int rc = 0;
	if (!c) {
		atomic_fetch_add(&b->db_unavailable, 1);
		rc = err.code ? err.code : -EAGAIN;
		goto fail;
	}
	/* Job by job in uid order: two committers lock job rows in the same
	 * order, so they wait for each other but never deadlock. */
	struct ingest_item **firsts = calloc((size_t)n, sizeof(*firsts));
	struct ingest_item **its = calloc((size_t)n, sizeof(*its));
	int njobs = 0;
	if (!firsts || !its) {
		rv_err_set(&err, -ENOMEM, "", "out of memory");
		rc = -ENOMEM;
	}
	for (struct ingest_item *it = items; rc >= 0 && it; it = it->next) {
		bool seen = false;
		for (int j = 0; j < njobs && !seen; j++)
			seen = strcmp(firsts[j]->uid, it->uid) == 0;
		if (!seen)
			firsts[njobs++] = it;
	}
	if (rc >= 0) {
		qsort(firsts, (size_t)njobs, sizeof(*firsts), cmp_item_uid);
		for (struct ingest_item *it = items; it; it = it->next)
			for (int j = 0; j < njobs; j++)
				if (strcmp(firsts[j]->uid, it->uid) == 0)
					it->job = j;
		/* Progress reports (a master's, every few seconds at most) are
		 * stored with their dataset checked, batch by batch: such a
		 * group takes the slow path. */
		bool progress = false;
		for (struct ingest_item *it = items; it && !progress; it = it->next)
			for (int k = 0; k < it->batch.n && !progress; k++)
				progress = it->batch.samples[k].kind == RV_SAMPLE_PROGRESS;
		rc = progress ? 1 : group_fast(b, c, items, firsts, njobs, n, &err);
		if (rc == 1) {
			if (!progress) /* a statement of the fast path failed */
				atomic_fetch_add(&b->ingest_slow_groups, 1);
			err = (struct rv_err){ 0 };
			rc = group_slow(b, c, items, firsts, njobs, its, n, &err);
		}
	}
	free(firsts);
	free(its);
	rv_db_release(b->db, c);
	if (rc >= 0) {
		atomic_fetch_add(&b->ingest_commits, 1);
		return;
	}
fail:;
	bool logged = false;
	for (struct ingest_item *it = items; it; it = it->next) {
		if (it->rc < 0 && it->resp.body && it->rc != rc)
			continue; /* its own error, not the group's */
		it->rc = rc;
		if (!logged)
			api_fail(b, &it->resp, rc, &err); /* logs it, once per group */
		else
			rv_http_resp_error(&it->resp, rc, &err);
		logged = true;
	}
}

/* After the commit: count, mark the jobs for planning, fill the reply. */
static void item_reply(struct brain *b, struct ingest_item *it)
{
	if (it->rc < 0) {
		if (!it->resp.body)
			rv_http_resp_error(&it->resp, it->rc, NULL);
		return;
	}
	if (it->rc == 0) {
		atomic_fetch_add(&b->samples_ingested, (uint64_t)it->accepted);
		atomic_fetch_add(&b->batches_ingested, 1);
		planner_touch(b, it->job_id);
	}
	char out[48];
	snprintf(out, sizeof(out), "{\"accepted\":%d}", it->accepted);
	rv_http_resp_json(&it->resp, 200, strdup(out));
}

/* Memory a queued batch holds (its parsed samples). */
static size_t item_bytes(const struct ingest_item *it)
{
	return sizeof(*it) + (size_t)it->batch.n * sizeof(*it->batch.samples);
}

static void *ingest_main(void *arg)
{
	struct brain *b = arg;
	pthread_mutex_lock(&b->ingest_mu);
	for (;;) {
		while (!b->ingest_head && !b->ingest_stop)
			pthread_cond_wait(&b->ingest_cv, &b->ingest_mu);
		if (!b->ingest_head)
			break; /* stopping, nothing left */
		/* Everything queued while the last group committed, up to the cap. */
		struct ingest_item *group = b->ingest_head, *last = group;
		int n = 1;
		size_t bytes = item_bytes(group);
		while (last->next && n < b->cfg.ingest_group_max) {
			last = last->next;
			bytes += item_bytes(last);
			n++;
		}
		b->ingest_queued_bytes -= bytes;
		b->ingest_head = last->next;
		if (!b->ingest_head)
			b->ingest_tail = &b->ingest_head;
		last->next = NULL;
		b->ingest_queued -= n;
		pthread_mutex_unlock(&b->ingest_mu);

		group_commit(b, group, n);
		while (group) {
			struct ingest_item *it = group;
			group = it->next;
			item_reply(b, it);
			rv_http_complete(it->d, it->resp.status, it->resp.body);
			it->resp.body = NULL;
			item_free(it);
		}
		pthread_mutex_lock(&b->ingest_mu);
	}
	pthread_mutex_unlock(&b->ingest_mu);
	return NULL;
}

int api_ingest_start(struct brain *b)
{
	pthread_mutex_init(&b->ingest_mu, NULL);
	pthread_cond_init(&b->ingest_cv, NULL);
	b->ingest_head = NULL;
	b->ingest_tail = &b->ingest_head;
	b->ingest_stop = false;
	b->ningest_threads = 0;
	for (int i = 0; i < b->cfg.ingest_committers && i < INGEST_THREADS_MAX; i++) {
		int rc = pthread_create(&b->ingest_thread[i], NULL, ingest_main, b);
		if (rc) {
			if (b->ningest_threads) {
				b->ingest_running = true;
				api_ingest_stop(b);
			}
			return -rc;
		}
		b->ningest_threads++;
	}
	b->ingest_running = true;
	return 0;
}

void api_ingest_stop(struct brain *b)
{
	if (!b->ingest_running)
		return;
	pthread_mutex_lock(&b->ingest_mu);
	b->ingest_stop = true;
	pthread_cond_broadcast(&b->ingest_cv);
	pthread_mutex_unlock(&b->ingest_mu);
	for (int i = 0; i < b->ningest_threads; i++)
		pthread_join(b->ingest_thread[i], NULL);
	b->ningest_threads = 0;
	b->ingest_running = false;
}

int api_metrics_post(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc) {
		atomic_fetch_add(&b->batches_rejected, 1);
		return 0;
	}
	struct ingest_item *it = calloc(1, sizeof(*it));
	if (!it) {
		cJSON_Delete(doc);
		return -ENOMEM;
	}
	int rc = rv_metrics_batch_from_json(doc, &it->batch, &err);
	cJSON_Delete(doc);
	if (rc < 0) {
		item_free(it);
		atomic_fetch_add(&b->batches_rejected, 1);
		return api_fail(b, resp, rc, &err);
	}
	snprintf(it->uid, sizeof(it->uid), "%s", req->params[0]);
	it->resp.status = 200;

	/* Queue it for the committer, the reply deferred until its group
	 * committed; once the committer stopped, store it here alone. */
	pthread_mutex_lock(&b->ingest_mu);
	if (b->ingest_running && !b->ingest_stop) {
		/* Parsed batches waiting are bounded in number and, with the
		 * bodies being received, by the memory budget for bodies. */
		if (b->ingest_queued >= b->cfg.ingest_queue_max ||
		    b->ingest_queued_bytes + item_bytes(it) > (size_t)b->cfg.body_budget_mb << 20) {
			pthread_mutex_unlock(&b->ingest_mu);
			item_free(it);
			rv_http_resp_error_text(
				resp, 503, "unavailable",
				"too many metrics batches waiting to be stored; retry "
				"later",
				"");
			resp->retry_after_s = 1;
			return 0;
		}
		it->d = rv_http_resp_defer(resp);
		if (it->d) {
			*b->ingest_tail = it;
			b->ingest_tail = &it->next;
			b->ingest_queued++;
			b->ingest_queued_bytes += item_bytes(it);
			pthread_cond_signal(&b->ingest_cv);
			pthread_mutex_unlock(&b->ingest_mu);
			return 0;
		}
	}
	pthread_mutex_unlock(&b->ingest_mu);
	group_commit(b, it, 1);
	item_reply(b, it);
	resp->status = it->resp.status;
	resp->body = it->resp.body;
	it->resp.body = NULL;
	item_free(it);
	return 0;
}

int api_events_post(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_event ev;
	memset(&ev, 0, sizeof(ev));
	int rc = rv_event_from_json(doc, &ev, &err);
	cJSON_Delete(doc);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	PGconn *c = api_db(b, resp);
	if (!c)
		return 0;
	struct store_job job = { 0 };
	int64_t id = 0;
	struct rv_scale_plan plan;
	memset(&plan, 0, sizeof(plan));
	rc = ingest_job(b, c, req, resp, &job);
	if (rc < 0) {
		rv_db_release(b->db, c);
		return 0;
	}
	rc = event_tx(b, c, &job, &ev, &id, &plan, &err);
	rv_db_release(b->db, c);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	bool resent = rc == 1;
	if (!resent && plan.stage[0] && plan.id) {
		atomic_fetch_add(&b->plans_stored, 1);
		planner_notify(b);
	}
	if (!resent) {
		atomic_fetch_add(&b->events_ingested, 1);
		api_plans_changed(b);
	}
	if (!resent && (ev.type == RV_EVENT_NODE_OOM || ev.type == RV_EVENT_NODE_FAILED ||
			ev.type == RV_EVENT_JOB_FAILED)) {
		char qn[160];
		rv_log_info("job event", "job=%s type=%s node=%s exit=%d plan=%lld", job.uid,
			    rv_event_type_name(ev.type), rv_log_q(qn, sizeof(qn), ev.node), ev.exit_code,
			    (long long)plan.id);
	}
	if (!resent && ev.type == RV_EVENT_PLAN_APPLIED)
		planner_touch(b, job.id);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddNumberToObject(out, "accepted", 1);
	cJSON_AddNumberToObject(out, "id", (double)id);
	if (plan.id)
		cJSON_AddNumberToObject(out, "plan_id", (double)plan.id);
	return rv_rest_reply(resp, 200, out);
}
