/*
 * master_failover: 16 simulated workers take shards from the real
 * rover-master (journal on, fsync'd); mid-epoch the master gets kill -9 and
 * is started again on the same state folder and port.  resume_ms is the
 * time from the kill until the first shard request after it succeeds
 * (process start and journal replay included); every sample is counted as
 * the workers finish, and lost/duplicated say how many samples were never
 * processed or processed twice.  Ends with:
 *   bench=master_failover agents=16 resume_ms=N lost=N duplicated=N
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "masterfix.h"
#include "parse.h"

#define AGENTS 16
#define SIZE   200000
#define SHARD  50

static atomic_int counts[SIZE];
static atomic_llong kill_ms;    /* 0 until the kill */
static atomic_llong resumed_ms; /* first success after the kill */
static atomic_int dead;         /* the old master is gone */

struct worker {
	pthread_t t;
	const char *url;
	int i;
	int64_t samples;
	int rc;
	char err[512];
};

/* A success after the kill: one that started once the old master was gone,
 * or that had to retry (its first attempt hit the dead master).  A reply
 * the old master sent just before its death counts for nothing. */
static void note_success(struct rv_master_client *c, bool started_dead)
{
	if (!atomic_load(&dead) || (!started_dead && rv_master_last_attempts(c) < 2))
		return;
	long long now = rv_mono_ms(), zero = 0;
	atomic_compare_exchange_strong(&resumed_ms, &zero, now);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct rv_master_opts o = {
		.url = w->url,
		.max_attempts = 1000,
		.backoff_ms = 5,
		.backoff_max_ms = 50,
	};
	struct rv_err err = { 0 };
	struct rv_master_client *c = rv_master_client_new(&o, &err);
	struct rv_shard_next req = { .worker = w->i };
	snprintf(req.node, sizeof(req.node), "node-%d", w->i);
	for (;;) {
		struct rv_shard_task t;
		bool started_dead = atomic_load(&dead);
		if ((w->rc = rv_master_shard_next(c, &req, &t, &err)) < 0)
			break;
		note_success(c, started_dead);
		if (t.status == RV_SHARD_FINISHED)
			break;
		if (t.status == RV_SHARD_WAIT) {
			usleep(1000);
			continue;
		}
		struct rv_shard_done d = { .worker = w->i, .id = t.id };
		snprintf(d.node, sizeof(d.node), "%s", req.node);
		started_dead = atomic_load(&dead);
		if ((w->rc = rv_master_shard_done(c, &d, NULL, &err)) < 0)
			break;
		note_success(c, started_dead);
		for (int64_t s = t.start; s < t.end; s++)
			atomic_fetch_add(&counts[s], 1);
		w->samples += t.end - t.start;
	}
	if (w->rc < 0)
		snprintf(w->err, sizeof(w->err), "%s", err.msg);
	rv_master_client_free(c);
	return NULL;
}

int main(void)
{
	char *spec = rv_test_master_spec(SIZE, SHARD, 1, 1, 1);
	struct rv_test_master m;
	if (rv_test_master_bench_start(&m, spec) < 0)
		return 1;
	static struct worker w[AGENTS];
	for (int i = 0; i < AGENTS; i++) {
		w[i] = (struct worker){ .url = m.url, .i = i };
		pthread_create(&w[i].t, NULL, worker_main, &w[i]);
	}
	/* mid-epoch: once about half the samples are done */
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_job_status js;
	struct rv_err err = { 0 };
	do {
		usleep(10000);
		if (rv_master_job(c, &js, &err) < 0) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
	} while (js.datasets[0].samples_done < SIZE / 2);
	atomic_store(&kill_ms, rv_mono_ms());
	rv_test_master_stop(&m, SIGKILL, 5000);
	atomic_store(&dead, 1);
	if (rv_test_master_restart(&m) < 0)
		return 1;
	int64_t restarted = rv_mono_ms() - atomic_load(&kill_ms);
	int failed = 0;
	for (int i = 0; i < AGENTS; i++) {
		pthread_join(w[i].t, NULL);
		if (w[i].rc < 0 && !failed++)
			fprintf(stderr, "worker %d: %s\n", i, w[i].err);
	}
	long lost = 0, dup = 0;
	for (int i = 0; i < SIZE; i++) {
		lost += counts[i] == 0;
		dup += counts[i] > 1;
	}
	rv_master_job(c, &js, &err);
	rv_master_client_free(c);
	rv_test_master_cleanup(&m);
	free(spec);
	long long resume = atomic_load(&resumed_ms) - atomic_load(&kill_ms);
	fprintf(stderr,
		"master listening again after %lld ms; samples done by the master %lld/%d\n",
		(long long)restarted, (long long)js.datasets[0].samples_done, SIZE);
	printf("bench=master_failover agents=%d resume_ms=%lld lost=%ld duplicated=%ld\n", AGENTS,
	       resume, lost, dup);
	return failed || lost || dup ? 1 : 0;
}
