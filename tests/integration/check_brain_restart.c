/*
 * check_brain_restart.c: rover-brain on its embedded PostgreSQL: first start
 * creates the cluster, SIGTERM stops it, a restart with the same --data-dir
 * finds every acknowledged write, including after SIGKILL mid-ingest; the
 * embedded PostgreSQL killed with SIGKILL mid-ingest is started again by
 * the brain and no acknowledged sample is lost.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brainfix.h"
#include "testutil.h"

static char dir[256];
static struct rv_test_brain brain;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/rover-restart-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	chmod(dir, 0755);
}

/* A brain killed with SIGKILL leaves its cluster running: stop it as
 * PostgreSQL's immediate shutdown (SIGQUIT to the postmaster) does. */
static void stop_orphan_cluster(void)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/data/pgdata/postmaster.pid", dir);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	long pid = 0;
	if (fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	fclose(f);
	if (pid <= 0 || kill((pid_t)pid, SIGQUIT) < 0)
		return;
	for (int i = 0; i < 300 && kill((pid_t)pid, 0) == 0; i++)
		usleep(20000);
}

static void teardown(void)
{
	if (brain.pid > 0)
		rv_test_brain_stop(&brain, SIGTERM, 30);
	stop_orphan_cluster();
	const char *argv[] = { "rm", "-rf", dir, NULL };
	struct rv_proc_opts o = { .argv = argv };
	int st;
	if (rv_proc_run(&o, 30000, &st, NULL) < 0 || st != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

static void start(void)
{
	char data[300];
	snprintf(data, sizeof(data), "%s/data", dir);
	const char *args[] = { "--data-dir", data, NULL };
	ck_assert_int_eq(rv_test_brain_start(&brain, args), 0);
}

static const char *register_job(void)
{
	static char uid[64];
	char *doc = rv_test_read_file("examples/job.json");
	ck_assert_ptr_nonnull(doc);
	rv_test_brain_register(&brain, doc, uid, sizeof(uid));
	free(doc);
	return uid;
}

static long speed_samples(const char *uid)
{
	return (long)rv_test_brain_job_num(&brain, uid, "speed_samples");
}

static int post_batch(const char *uid, int i)
{
	char path[128], body[512];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	snprintf(body, sizeof(body),
		 "{\"samples\":[{\"kind\":\"speed\",\"ts\":%d,\"speed\":10,\"step\":%d,\"workers\":2,"
		 "\"ps\":0},{\"kind\":\"speed\",\"ts\":%d,\"speed\":11,\"step\":%d,\"workers\":2,\"ps\":0}]}",
		 1000 + 2 * i, 2 * i, 1001 + 2 * i, 2 * i + 1);
	struct rv_test_reply r;
	int rc = rv_test_http(&brain, "POST", path, body, NULL, &r);
	int ok = rc == 0 && r.status == 200;
	rv_test_reply_release(&r);
	return ok;
}

START_TEST(sigterm_stops_cluster_and_restart_keeps_data)
{
	start();
	const char *uid = register_job();
	for (int i = 0; i < 10; i++)
		ck_assert(post_batch(uid, i));
	int st = rv_test_brain_stop(&brain, SIGTERM, 30);
	ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
	char pid[400];
	snprintf(pid, sizeof(pid), "%s/data/pgdata/postmaster.pid", dir);
	ck_assert_msg(access(pid, F_OK) != 0, "postgres still running after brain stopped");
	start();
	ck_assert_int_eq(speed_samples(uid), 20);
	/* the same name is still taken by the running job */
	char *doc = rv_test_read_file("examples/job.json");
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/jobs", doc, NULL, &r), 0);
	ck_assert_int_eq(r.status, 409);
	rv_test_reply_release(&r);
	free(doc);
}
END_TEST

struct ingest {
	const char *uid;
	atomic_int acked; /* batches the brain acknowledged */
};

/* Thread: post batches until the brain stops answering. */
static void *ingest_until_refused(void *arg)
{
	struct ingest *ing = arg;
	for (int i = 0; i < 100000 && post_batch(ing->uid, i); i++)
		atomic_fetch_add(&ing->acked, 1);
	return NULL;
}

START_TEST(sigkill_mid_ingest_loses_no_acknowledged_write)
{
	start();
	const char *uid = register_job();
	struct ingest ing = { .uid = uid };
	pthread_t poster;
	ck_assert_int_eq(pthread_create(&poster, NULL, ingest_until_refused, &ing), 0);
	/* mid-ingest: once writes flow (how soon depends on the machine's
	 * load, not on the brain), and while they still do */
	for (int i = 0; i < 600 && atomic_load(&ing.acked) <= 5; i++)
		usleep(50 * 1000);
	usleep(100 * 1000);
	ck_assert_int_ge(rv_test_brain_stop(&brain, SIGKILL, 30), 0);
	pthread_join(poster, NULL);
	int acked = atomic_load(&ing.acked);
	ck_assert_msg(acked > 5, "only %d batches acknowledged before the kill", acked);
	start();
	long stored = speed_samples(uid);
	/* every acknowledged batch is there; at most the one in flight extra */
	ck_assert_msg(stored >= 2L * acked && stored <= 2L * acked + 2,
		      "acked %d batches (%d samples), stored %ld", acked, 2 * acked, stored);
}
END_TEST

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A writer that resends each batch (same batch_id) until it is acknowledged,
 * as a master's brain client does, counting what was acknowledged. */
struct resender {
	const char *uid;
	atomic_bool stop;
	atomic_int acked;                       /* batches acknowledged (200) */
	atomic_int refused;                     /* answers other than 200, or no answer */
	atomic_llong first_refused_ms, back_ms; /* first failure; first ack after it */
};

static void *resend_until_stopped(void *arg)
{
	struct resender *w = arg;
	char path[128], body[512];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", w->uid);
	for (int i = 0; !atomic_load(&w->stop); i++) {
		snprintf(body, sizeof(body),
			 "{\"batch_id\":\"b-%d\",\"samples\":[{\"kind\":\"speed\",\"ts\":%d,"
			 "\"speed\":10,\"step\":%d,\"workers\":2,\"ps\":0},{\"kind\":\"speed\","
			 "\"ts\":%d,\"speed\":11,\"step\":%d,\"workers\":2,\"ps\":0}]}",
			 i, 1000 + 2 * i, 2 * i, 1001 + 2 * i, 2 * i + 1);
		for (;;) {
			struct rv_test_reply r;
			int rc = rv_test_http(&brain, "POST", path, body, NULL, &r);
			bool ok = rc == 0 && r.status == 200;
			rv_test_reply_release(&r);
			if (ok) {
				atomic_fetch_add(&w->acked, 1);
				long long zero = 0;
				if (atomic_load(&w->first_refused_ms))
					atomic_compare_exchange_strong(&w->back_ms, &zero,
								       mono_ms());
				break;
			}
			atomic_fetch_add(&w->refused, 1);
			long long zero = 0;
			atomic_compare_exchange_strong(&w->first_refused_ms, &zero, mono_ms());
			if (atomic_load(&w->stop))
				return NULL; /* never acknowledged: not counted */
			usleep(50 * 1000);
		}
	}
	return NULL;
}

static pid_t postmaster_pid(void)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/data/pgdata/postmaster.pid", dir);
	FILE *f = fopen(path, "re");
	long pid = 0;
	if (f && fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	if (f)
		fclose(f);
	return (pid_t)pid;
}

/* Lines of the brain's log that contain what. */
static int log_count(const char *what)
{
	FILE *f = fopen(brain.log, "re");
	ck_assert_ptr_nonnull(f);
	char line[4096];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	fclose(f);
	return n;
}

START_TEST(postgres_killed_mid_ingest_is_restarted_and_loses_nothing)
{
	start();
	const char *uid = register_job();
	struct resender w = { .uid = uid };
	pthread_t poster;
	ck_assert_int_eq(pthread_create(&poster, NULL, resend_until_stopped, &w), 0);
	for (int i = 0; i < 200 && atomic_load(&w.acked) < 20; i++)
		usleep(50 * 1000);
	ck_assert_int_ge(atomic_load(&w.acked), 20);

	pid_t pm = postmaster_pid();
	ck_assert_int_gt(pm, 0);
	int64_t killed_at = mono_ms();
	ck_assert_int_eq(kill(pm, SIGKILL), 0);
	int before = atomic_load(&w.acked);

	/* Writes flow again: 20 more batches acknowledged within 30 s, and one
	 * after a refusal (the backends serve on for a moment after their
	 * postmaster died: the first acknowledgments may precede the outage). */
	while (mono_ms() - killed_at < 30000 &&
	       (atomic_load(&w.acked) < before + 20 || !atomic_load(&w.back_ms)))
		usleep(50 * 1000);
	atomic_store(&w.stop, true);
	pthread_join(poster, NULL);
	int acked = atomic_load(&w.acked);
	if (acked < before + 20) {
		/* the brain's own account of what went wrong */
		const char *argv[] = { "tail", "-40", brain.log, NULL };
		struct rv_proc_opts o = { .argv = argv };
		int st;
		rv_proc_run(&o, 5000, &st, NULL);
	}
	ck_assert_msg(acked >= before + 20, "only %d batches acknowledged in 30 s after the kill",
		      acked - before);
	ck_assert_msg(atomic_load(&w.refused) > 0, "no write was refused: was it killed?");
	long long back = atomic_load(&w.back_ms);
	ck_assert_msg(back > 0 && back - killed_at < 30000, "writes back %lld ms after the kill",
		      back - killed_at);
	fprintf(stderr, "postgres kill: writes back after %lld ms, %d refusals\n", back - killed_at,
		atomic_load(&w.refused));
	ck_assert_int_ne(postmaster_pid(), pm);

	/* Exact accounting: every acknowledged sample is stored, once. */
	ck_assert_int_eq(speed_samples(uid), 2L * acked);

	/* One log line per restart, counted on /metrics; the 503s in the
	 * meantime did not each get a line. */
	ck_assert_int_eq(rv_test_metric(&brain, "rover_brain_pg_restarts_total"), 1);
	ck_assert_int_eq(log_count("msg=\"embedded postgresql restarted\""), 1);
	ck_assert_int_eq(log_count("msg=\"embedded postgresql exited\""), 1);
	int lines = log_count("msg=\"database unavailable\"");
	int secs = (int)((back - killed_at) / 1000);
	ck_assert_msg(lines <= secs / 5 + 2,
		      "%d \"database unavailable\" lines for %d refusals in %d s", lines,
		      atomic_load(&w.refused), secs);

	/* And the brain stops its (new) cluster on SIGTERM as before. */
	int st = rv_test_brain_stop(&brain, SIGTERM, 30);
	ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
	ck_assert_int_eq(postmaster_pid() > 0 && kill(postmaster_pid(), 0) == 0, 0);
}
END_TEST

RV_TEST_MAIN_FIXTURE_TCASE("brain_restart", setup, teardown, "restart", 120,
			   sigterm_stops_cluster_and_restart_keeps_data,
			   sigkill_mid_ingest_loses_no_acknowledged_write,
			   postgres_killed_mid_ingest_is_restarted_and_loses_nothing)
