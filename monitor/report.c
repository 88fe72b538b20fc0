/*
 * report.c: the sampler and the sender.
 *
 * The sampler ticks every interval_ms: the source fills node samples, which
 * go into a ring of buffer_max samples (when full the oldest is dropped and
 * counted).  The sender takes up to batch_max of the oldest samples into a
 * report with a fresh report_id, and posts it to the brain, once batch_max
 * samples wait or report_interval_ms passed.  A report that failed is kept
 * whole, with the same report_id, and tried again with growing pauses
 * (0.5 s doubling to 30 s) while new samples keep filling the ring; once
 * the brain answers, the backlog goes in batches back to back.  The brain
 * stores a report_id once and each (node, ts) once, so a report that reached
 * it although the reply was lost is not stored twice.  A report the brain
 * refuses as invalid (4xx but 401/408/429) is dropped: sending it again
 * would not change the answer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brain_client.h"
#include "log.h"
#include "monitor.h"

#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 30000
#define SAMPLE_MAX     16 /* node samples one tick may give */

static void abs_deadline(struct timespec *ts, int64_t in_ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += in_ms / 1000;
	ts->tv_nsec += (in_ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void node_release(struct rv_cluster_node *n)
{
	free(n->jobs);
	n->jobs = NULL;
	n->njobs = 0;
}

/* Under m->lock: append n (its jobs move to the ring). */
static void ring_push(struct monitor *m, struct rv_cluster_node *n)
{
	long cap = (long)m->cfg.buffer_max;
	if (m->count == cap) {
		node_release(&m->ring[m->head]);
		m->head = (m->head + 1) % cap;
		m->count--;
		atomic_fetch_add(&m->dropped, 1);
	}
	m->ring[(m->head + m->count) % cap] = *n;
	m->count++;
	n->jobs = NULL;
	n->njobs = 0;
}

static void *sampler_main(void *arg)
{
	struct monitor *m = arg;
	int64_t next = rv_mono_ms();
	bool failing = false;
	pthread_mutex_lock(&m->lock);
	while (!m->stopping) {
		next += m->cfg.interval_ms;
		int64_t now = rv_mono_ms();
		if (next < now)
			next = now + m->cfg.interval_ms; /* fell behind: skip, never burst */
		struct timespec dl;
		abs_deadline(&dl, next - now);
		while (!m->stopping && pthread_cond_timedwait(&m->wake, &m->lock, &dl) != ETIMEDOUT)
			;
		if (m->stopping)
			break;
		pthread_mutex_unlock(&m->lock);

		struct rv_cluster_node nodes[SAMPLE_MAX];
		memset(nodes, 0, sizeof(nodes));
		struct rv_err err = { 0 };
		int n = m->src->sample(m->src_state, rv_now_ms(), nodes, SAMPLE_MAX, &err);
		struct source_stats st = { 0 };
		m->src->stats(m->src_state, &st);
		if (n < 0 && !failing) {
			char q[300];
			rv_log_warn("could not sample", "source=%s reason=%s", m->src->name,
				    rv_log_q(q, sizeof(q), err.msg));
		}
		failing = n < 0;

		pthread_mutex_lock(&m->lock);
		m->stats = st;
		if (n < 0)
			atomic_fetch_add(&m->sample_errors, 1);
		for (int i = 0; i < n; i++) {
			m->last = nodes[i];
			m->last.jobs = NULL;
			m->last.njobs = nodes[i].njobs;
			ring_push(m, &nodes[i]);
			atomic_fetch_add(&m->samples, 1);
		}
		for (int i = 0; i < SAMPLE_MAX; i++)
			node_release(&nodes[i]);
		pthread_cond_broadcast(&m->wake);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

/* Under m->lock: move up to batch_max of the oldest samples into b. */
static int batch_take(struct monitor *m, struct monitor_batch *b)
{
	long k = m->count < m->cfg.batch_max ? m->count : (long)m->cfg.batch_max;
	b->r.nodes = calloc((size_t)k, sizeof(*b->r.nodes));
	if (!b->r.nodes)
		return -ENOMEM;
	long cap = (long)m->cfg.buffer_max;
	for (long i = 0; i < k; i++) {
		b->r.nodes[i] = m->ring[m->head];
		memset(&m->ring[m->head], 0, sizeof(m->ring[m->head]));
		m->head = (m->head + 1) % cap;
		m->count--;
	}
	b->r.n = (int)k;
	rv_brain_new_id(b->r.report_id);
	b->first_try_ms = rv_now_ms();
	return 0;
}

/* Worth sending again: the brain or the way to it may recover. */
static bool transient(int rc, long status)
{
	if (status == 0 || status >= 500 || status == 401 || status == 403 || status == 408 ||
	    status == 429)
		return true;
	return rc == -ENOMEM;
}

static void *sender_main(void *arg)
{
	struct monitor *m = arg;
	struct rv_err err = { 0 };
	struct rv_brain_opts o = {
		.url = m->cfg.brain,
		.token = m->cfg.token,
		.connect_timeout_ms = (int)(m->cfg.timeout_ms < 2000 ? m->cfg.timeout_ms : 2000),
		.timeout_ms = (int)m->cfg.timeout_ms,
		.max_attempts = 1, /* this loop retries, keeping the report_id */
	};
	struct rv_brain_client *bc = rv_brain_client_new(&o, &err);
	if (!bc) {
		char q[300];
		rv_log_error("could not make the brain client", "reason=%s",
			     rv_log_q(q, sizeof(q), err.msg));
		return NULL;
	}
	struct monitor_batch b = { 0 };
	bool have = false, down = false;
	int64_t backoff = 0, retry_at = 0, last_send = rv_mono_ms();
	pthread_mutex_lock(&m->lock);
	for (;;) {
		/* wait for: a full batch, the report interval with something to
		 * send, the retry time, or stop (one last attempt) */
		while (!m->stopping) {
			int64_t now = rv_mono_ms(), due;
			if (have)
				due = retry_at;
			else if (m->count >= m->cfg.batch_max)
				due = now;
			else if (m->count > 0)
				due = last_send + m->cfg.report_interval_ms;
			else
				due = now + 3600000;
			if (due <= now)
				break;
			struct timespec dl;
			abs_deadline(&dl, due - now);
			pthread_cond_timedwait(&m->wake, &m->lock, &dl);
		}
		bool final = m->stopping;
		if (!have && m->count > 0 && batch_take(m, &b) == 0)
			have = true;
		pthread_mutex_unlock(&m->lock);
		if (!have) {
			pthread_mutex_lock(&m->lock);
			if (final)
				break;
			continue;
		}

		err = (struct rv_err){ 0 };
		int rc = rv_brain_cluster_report(bc, &b.r, &err);
		long status = rv_brain_last_status(bc);
		last_send = rv_mono_ms();
		char q[300];
		pthread_mutex_lock(&m->lock);
		if (rc == 0) {
			atomic_fetch_add(&m->reports_sent, 1);
			atomic_fetch_add(&m->samples_sent, (uint64_t)b.r.n);
			m->brain_ok = true;
			m->last_report_ms = rv_now_ms();
			if (down)
				rv_log_info("brain reachable again", "url=%s backlog=%ld",
					    m->cfg.brain, m->count);
			down = false;
			backoff = 0;
			rv_cluster_report_release(&b.r);
			have = false;
		} else if (!transient(rc, status)) {
			rv_log_error("brain refused a report; dropped",
				     "status=%ld samples=%d reason=%s", status, b.r.n,
				     rv_log_q(q, sizeof(q), err.msg));
			atomic_fetch_add(&m->reports_failed, 1);
			atomic_fetch_add(&m->dropped, (uint64_t)b.r.n);
			snprintf(m->last_error, sizeof(m->last_error), "%s", err.msg);
			rv_cluster_report_release(&b.r);
			have = false;
		} else {
			atomic_fetch_add(&m->reports_failed, 1);
			m->brain_ok = false;
			snprintf(m->last_error, sizeof(m->last_error), "%s", err.msg);
			if (!down)
				rv_log_warn("could not report to the brain; buffering",
					    "url=%s reason=%s", m->cfg.brain,
					    rv_log_q(q, sizeof(q), err.msg));
			down = true;
			backoff = backoff ? backoff * 2 : BACKOFF_MIN_MS;
			if (backoff > BACKOFF_MAX_MS)
				backoff = BACKOFF_MAX_MS;
			retry_at = rv_mono_ms() + backoff;
			if (final)
				break;
		}
		if (final && !have && m->count == 0)
			break;
	}
	pthread_mutex_unlock(&m->lock);
	if (have) {
		rv_log_warn("report not delivered at exit", "samples=%d buffered=%ld", b.r.n,
			    m->count);
		m->unsent += b.r.n;
		rv_cluster_report_release(&b.r);
	}
	rv_brain_client_free(bc);
	return NULL;
}

int report_start(struct monitor *m)
{
	m->ring = calloc((size_t)m->cfg.buffer_max, sizeof(*m->ring));
	if (!m->ring)
		return -ENOMEM;
	int rc = pthread_create(&m->sampler, NULL, sampler_main, m);
	if (rc)
		return -rc;
	m->sampler_started = true;
	rc = pthread_create(&m->sender, NULL, sender_main, m);
	if (rc)
		return -rc;
	m->sender_started = true;
	return 0;
}

void report_stop(struct monitor *m)
{
	pthread_mutex_lock(&m->lock);
	m->stopping = true;
	pthread_cond_broadcast(&m->wake);
	pthread_mutex_unlock(&m->lock);
	if (m->sampler_started)
		pthread_join(m->sampler, NULL);
	if (m->sender_started)
		pthread_join(m->sender, NULL);
	m->sampler_started = m->sender_started = false;
	m->unsent += m->count;
	for (long i = 0; m->ring && i < m->count; i++)
		node_release(&m->ring[(m->head + i) % m->cfg.buffer_max]);
	free(m->ring);
	m->ring = NULL;
	m->count = 0;
}
