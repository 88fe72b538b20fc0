/*
 * check_master_restart.c: kill -9 of the real rover-master mid-epoch, then
 * a restart on the same state folder: the workers' clients reconnect with
 * back-off and carry on, and at the end every sample of every epoch was
 * processed exactly once (counted per sample), the rendezvous world is the
 * one from before, and the master's own count agrees.  Repeated several
 * times in one run, so the kill lands at different points.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brainfix.h" /* rv_test_read_file */
#include "masterfix.h"
#include "parse.h"
#include "testutil.h"

struct agent {
	const struct rv_test_master *m;
	char node[64];
	struct rv_rdzv_world_reply world;
	int rc;
};

static void *agent_main(void *arg)
{
	struct agent *a = arg;
	struct rv_master_client *c = rv_test_master_client(a->m);
	struct rv_rdzv_join j = { .local_world_size = 1 };
	snprintf(j.node, sizeof(j.node), "%s", a->node);
	a->rc = rv_master_rendezvous(c, &j, 20000, &a->world, NULL);
	rv_master_client_free(c);
	return NULL;
}

static void kill_and_restart(long size, int epochs, int nworkers, int kills, const char *nosync)
{
	char *spec = rv_test_master_spec(size, 7, epochs, nworkers, nworkers);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	const char *args[] = { "--journal-snapshot-every", "300", "--journal-nosync", nosync,
			       NULL };
	ck_assert_int_eq(rv_test_master_start(&m, args), 0);

	struct agent ag[16];
	pthread_t t[16];
	for (int i = 0; i < nworkers; i++) {
		memset(&ag[i], 0, sizeof(ag[i]));
		ag[i].m = &m;
		snprintf(ag[i].node, sizeof(ag[i].node), "node-%d", i);
		ck_assert_int_eq(pthread_create(&t[i], NULL, agent_main, &ag[i]), 0);
	}
	for (int i = 0; i < nworkers; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(ag[i].rc, 0);
	}
	int64_t round = ag[0].world.round;

	atomic_int *counts = calloc((size_t)(size * epochs), sizeof(*counts));
	struct rv_test_shard_worker w[16];
	for (int i = 0; i < nworkers; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].url = m.url;
		snprintf(w[i].node, sizeof(w[i].node), "node-%d", i);
		w[i].worker = i;
		w[i].counts = counts;
		w[i].size = size;
		ck_assert_int_eq(pthread_create(&t[i], NULL, rv_test_shard_worker_main, &w[i]), 0);
	}
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_err err = { 0 };
	struct rv_job_status js;
	for (int k = 0; k < kills; k++) {
		/* wait until this kill's share of the samples is done, then kill -9 */
		int64_t target = size * epochs * (k + 1) / (kills + 1);
		for (;;) {
			ck_assert_msg(rv_master_job(c, &js, &err) == 0, "%s", err.msg);
			if (js.datasets[0].samples_done >= target || js.finished)
				break;
			usleep(5000);
		}
		int st = rv_test_master_stop(&m, SIGKILL, 5000);
		ck_assert(st >= 0 && WIFSIGNALED(st));
		usleep(100 * 1000);
		ck_assert_int_eq(rv_test_master_restart(&m), 0);
		ck_assert_msg(rv_master_job(c, &js, &err) == 0, "%s", err.msg);
		/* the world survived the crash */
		ck_assert_int_eq(js.state, RV_RDZV_COMPLETE);
		ck_assert_int_eq(js.round, round);
		ck_assert_int_eq(js.nnodes, nworkers);
	}
	for (int i = 0; i < nworkers; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(w[i].rc == 0, "worker %d: %s", i, w[i].err);
	}
	rv_test_assert_once(counts, size * epochs, "samples");
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert(js.finished);
	ck_assert_int_eq(js.datasets[0].samples_done, size * epochs);
	rv_master_client_free(c);
	for (int i = 0; i < nworkers; i++)
		rv_rdzv_world_reply_release(&ag[i].world);
	free(counts);
	rv_test_master_cleanup(&m);
}

START_TEST(test_kill9_mid_epoch_fsync)
{
	kill_and_restart(3000, 2, 4, 2, "false");
}
END_TEST

START_TEST(test_kill9_many_times)
{
	kill_and_restart(6000, 1, 6, 5, "true");
}
END_TEST

struct late_call {
	struct rv_master_client *c;
	int rc;
	int attempts;
	int64_t round;
};

static void *late_join(void *arg)
{
	struct late_call *l = arg;
	struct rv_rdzv_join j = { .node = "late", .local_world_size = 1 };
	l->rc = rv_master_join(l->c, &j, &l->round, NULL);
	l->attempts = rv_master_last_attempts(l->c);
	return NULL;
}

/* Start m (a job of 2 nodes) with args, join "first" and stop it with
 * SIGTERM, a clean exit: the round it joined; the client into *c (the
 * caller's, rv_master_client_free). */
static int64_t join_first_and_stop(struct rv_test_master *m, const char *const *args,
				   struct rv_master_client **c)
{
	char *spec = rv_test_master_spec(100, 10, 1, 2, 2);
	ck_assert_int_eq(rv_test_master_init(m, spec), 0);
	free(spec);
	ck_assert_int_eq(rv_test_master_start(m, args), 0);
	struct rv_master_client *mc = rv_test_master_client(m);
	struct rv_rdzv_join j = { .node = "first", .local_world_size = 1 };
	int64_t round;
	ck_assert_int_eq(rv_master_join(mc, &j, &round, NULL), 0);
	int st = rv_test_master_stop(m, SIGTERM, 10000);
	ck_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	*c = mc;
	return round;
}

/* A call made while the master is down waits for it with back-off (a join
 * is retried only while the connection is refused: nothing reached the
 * master), and a SIGTERM'd master restarts on its state with the round it
 * had. */
START_TEST(test_client_waits_for_restart)
{
	struct rv_test_master m;
	struct rv_master_client *c;
	int64_t round = join_first_and_stop(&m, NULL, &c);
	struct late_call l = { .c = c };
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, late_join, &l), 0);
	usleep(400 * 1000);
	ck_assert_int_eq(rv_test_master_restart(&m), 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(l.rc, 0);
	ck_assert_int_gt(l.attempts, 1);
	ck_assert_int_eq(l.round, round); /* the same round, still gathering */
	struct rv_job_status js;
	ck_assert_int_eq(rv_master_job(c, &js, NULL), 0);
	ck_assert_int_eq(js.state, RV_RDZV_COMPLETE); /* "first" and "late": 2 of 2 */
	rv_master_client_free(c);
	rv_test_master_cleanup(&m);
}
END_TEST

/* The journal's size in the state folder, -1 none. */
static long journal_size(const struct rv_test_master *m)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/journal", m->state);
	struct stat st;
	return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* --job-uid: the folder keeps the uid of the job that wrote it; a master
 * of another uid on it exits 1 saying so, replaying and changing nothing;
 * the job's own master replays it as before. */
START_TEST(test_job_uid_guards_state)
{
	struct rv_test_master m;
	char uid[32] = "uid-first";
	const char *args[] = { "--job-uid", uid, NULL };
	struct rv_master_client *c;
	int64_t round = join_first_and_stop(&m, args, &c);
	long size = journal_size(&m);
	ck_assert_int_gt(size, 0);
	snprintf(uid, sizeof(uid), "uid-second");
	ck_assert_int_ne(rv_test_master_restart(&m), 0);
	ck_assert(WIFEXITED(m.exit_status) && WEXITSTATUS(m.exit_status) == 1);
	char *log = rv_test_read_file(m.log);
	ck_assert_ptr_nonnull(log);
	ck_assert_msg(strstr(log, "holds the journal of job uid uid-first, not of this job (uid "
				  "uid-second)"),
		      "%s", log);
	free(log);
	ck_assert_int_eq(journal_size(&m), size);
	snprintf(uid, sizeof(uid), "uid-first");
	ck_assert_int_eq(rv_test_master_restart(&m), 0);
	struct rv_job_status js;
	ck_assert_int_eq(rv_master_job(c, &js, NULL), 0);
	ck_assert_int_eq(js.round, round); /* "first" still waits: the journal replayed */
	ck_assert_int_eq(js.waiting, 1);
	rv_master_client_free(c);
	rv_test_master_cleanup(&m);
}
END_TEST

RV_TEST_MAIN_TCASE("master_restart", "restart", 120, test_kill9_mid_epoch_fsync,
		   test_kill9_many_times, test_client_waits_for_restart, test_job_uid_guards_state)
