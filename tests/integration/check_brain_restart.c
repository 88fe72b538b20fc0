/*
 * check_brain_restart.c: rover-brain on its embedded PostgreSQL: first start
 * creates the cluster, SIGTERM stops it, a restart with the same --data-dir
 * finds every acknowledged write, including after SIGKILL mid-ingest.
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
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/jobs", doc, NULL, &r), 0);
	free(doc);
	ck_assert_msg(r.status == 201, "status %ld body %s", r.status, r.body);
	snprintf(uid, sizeof(uid), "%s", rv_test_json_str(r.json, "uid"));
	rv_test_reply_release(&r);
	return uid;
}

static long speed_samples(const char *uid)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s", uid);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "status %ld body %s", r.status, r.body);
	long n = (long)rv_test_json_num(r.json, "speed_samples", -1);
	rv_test_reply_release(&r);
	return n;
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
	usleep(700000);
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

static Suite *brain_restart_suite(void)
{
	Suite *s = suite_create("brain_restart");
	TCase *tc = tcase_create("restart");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, sigterm_stops_cluster_and_restart_keeps_data);
	tcase_add_test(tc, sigkill_mid_ingest_loses_no_acknowledged_write);
	suite_add_tcase(s, tc);
	return s;
}

RV_TEST_MAIN(brain_restart_suite)
