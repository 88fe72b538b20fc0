/*
 * journal_append: records/s made durable through the master's journal when
 * THREADS threads each append a 128-byte record and wait for its sync (as
 * the master's handlers do), against one thread that appends and syncs one
 * record at a time (one fdatasync per record), in the same run on the same
 * file system (a temp folder under $TMPDIR, else /tmp).  Usage:
 *   journal_append [threads [seconds]]      (default 8 threads, 2 s a side)
 * Ends with:
 *   bench=journal_append threads=N records_per_s=R fsyncs_per_s=F ratio=R
 * where ratio = group-committed records/s / one-fsync-per-record records/s.
 */
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "journal.h"
#include "parse.h"

#define RECORD      128
#define MAX_THREADS 256

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct worker {
	struct journal *j;
	double until;
	int64_t done;
	int err;
};

static void *worker_run(void *p)
{
	struct worker *w = p;
	char rec[RECORD];
	memset(rec, 'r', sizeof(rec));
	while (now_s() < w->until) {
		int64_t seq = journal_append(w->j, 1, rec, sizeof(rec));
		int rc = seq < 0 ? (int)seq : journal_sync(w->j, seq, 10000);
		if (rc < 0) {
			w->err = rc;
			break;
		}
		w->done++;
	}
	return NULL;
}

/* Run nthreads appenders for secs in a fresh journal under dir; records/s
 * and fsyncs/s out.  0 or -errno. */
static int run_side(const char *dir, int nthreads, double secs, double *rps, double *fps)
{
	struct journal_opts o = { .dir = dir };
	struct rv_err err = { 0 };
	struct journal *j = journal_open(&o, NULL, NULL, NULL, &err);
	if (!j) {
		fprintf(stderr, "journal_append: could not open the journal: %s\n", err.msg);
		return err.code;
	}
	static struct worker w[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	double t0 = now_s();
	for (int t = 0; t < nthreads; t++) {
		w[t] = (struct worker){ .j = j, .until = t0 + secs };
		pthread_create(&th[t], NULL, worker_run, &w[t]);
	}
	int64_t done = 0;
	int rc = 0;
	for (int t = 0; t < nthreads; t++) {
		pthread_join(th[t], NULL);
		done += w[t].done;
		if (w[t].err)
			rc = w[t].err;
	}
	double el = now_s() - t0;
	struct journal_stats st;
	journal_stats(j, &st);
	journal_close(j);
	rv_test_rm_rf(dir);
	if (rc < 0) {
		fprintf(stderr, "journal_append: a sync failed: %s\n", strerror(-rc));
		return rc;
	}
	*rps = (double)done / el;
	*fps = (double)st.fsyncs / el;
	fprintf(stderr,
		"journal_append: %d thread(s): %" PRId64 " records, %" PRId64 " fsyncs in %.2f s\n",
		nthreads, done, st.fsyncs, el);
	return 0;
}

int main(int argc, char **argv)
{
	int64_t threads = 8, secs = 2;
	if ((argc > 1 && rv_parse_i64(argv[1], 1, MAX_THREADS, &threads) < 0) ||
	    (argc > 2 && rv_parse_i64(argv[2], 1, 600, &secs) < 0)) {
		fprintf(stderr, "usage: journal_append [threads (1..%d) [seconds]]\n", MAX_THREADS);
		return 2;
	}
	const char *base = getenv("TMPDIR");
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/rv-journal-bench-XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(dir)) {
		perror("journal_append: mkdtemp");
		return 1;
	}
	char sub[4200];
	double g_rps, g_fps, s_rps, s_fps;
	snprintf(sub, sizeof(sub), "%s/group", dir);
	if (run_side(sub, (int)threads, (double)secs, &g_rps, &g_fps) < 0)
		return 1;
	snprintf(sub, sizeof(sub), "%s/serial", dir);
	if (run_side(sub, 1, (double)secs, &s_rps, &s_fps) < 0)
		return 1;
	rv_test_rm_rf(dir);
	printf("bench=journal_append threads=%" PRId64 " records_per_s=%.0f fsyncs_per_s=%.0f "
	       "ratio=%.2f\n",
	       threads, g_rps, g_fps, s_rps > 0 ? g_rps / s_rps : 0.0);
	return 0;
}
