/*
 * check_fault_process.c: the whole stack (the real rover-master, rover-run
 * and PyTorch workers training examples/digits_rover.py) under processes
 * that are not dead but stopped (SIGSTOP):
 *   - a worker stopped: rover-run's hang check finds it, names it with its
 *     Python stack, and restarts the group from the last flash checkpoint;
 *   - one node's rover-run stopped past the master's heartbeat timeout,
 *     then continued: the other node trains on alone, the stopped one joins
 *     again (one copy of its rank, no fight) and the world is two again;
 *   - the master stopped for longer than a heartbeat timeout, then
 *     continued: with the nodes silent meanwhile (threads of this test),
 *     and under real training (ROVER_FAULT_ALL=1 only).
 * Each ends with accounting: every sample of every epoch trained exactly
 * once (the shard log), the job at its accuracy, and the recovery time
 * measured and printed ("fault=NAME recovery_ms=N" on stdout, a "diag:"
 * line too).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brainfix.h"
#include "faultfix.h"
#include "masterfix.h"
#include "parse.h"
#include "runfix.h"
#include "testutil.h"

/* The dataset: 1200 samples in shards of 16, two epochs. */
#define SIZE   1200
#define EPOCHS 2

/* Starts the node with args a and waits for 40 steps of its shard log. */
static void start_trained(struct rv_test_run *r, struct rv_test_master *m, const char **a,
			  const char **env, const char *log)
{
	ck_assert_int_eq(rv_test_run_start(r, a, env), 0);
	if (!rv_test_wait_lines(log, 40, 120000))
		rv_test_run_dump(r, 1, m->log);
	ck_assert_msg(rv_test_wait_lines(log, 40, 0), "no 40 steps trained");
}

/* SIGSTOPs local rank 1's worker and waits up to limit_ms for the shard
 * log to grow again; reports the time as fault name and returns it. */
static int64_t stop_worker_until_resumed(struct rv_test_run *r, struct rv_test_master *m,
					 const char *log, int limit_ms, const char *name)
{
	pid_t pid[4];
	ck_assert_int_eq(rv_test_run_workers(r, 0, 1, pid, 4), 1);
	int at = rv_test_count_lines(log);
	int64_t t0 = rv_mono_ms();
	ck_assert_int_eq(kill(pid[0], SIGSTOP), 0);
	int64_t rec = rv_test_fault_wait_resumed(log, at, limit_ms);
	if (rec < 0)
		rv_test_run_dump(r, 1, m->log);
	ck_assert_msg(rec >= 0, "training never resumed after the worker was stopped");
	rv_test_fault_report(name, rec - t0);
	return rec - t0;
}

/* A worker stopped mid-epoch is a hang: found within --hang-timeout,
 * named with its Python stack (rover-run continues it so that the
 * SIGABRT it sent can dump the stack), the group restarted from the last
 * checkpoint; every sample trained once. */
START_TEST(test_worker_sigstop)
{
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_start_job(&m, SIZE, 16, EPOCHS, 1, 1, NULL), 0);
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char log[400], job[96];
	snprintf(log, sizeof(log), "%s/shards.log", r.dir);
	rv_test_fault_job_env(job, sizeof(job), "wstop");
	const char *env[] = { job, NULL };
	const char *a[24];
	/* 60 s: longer than the workers' first start (importing torch on a
	 * busy 2-core machine takes 40 s, with no output yet) */
	rv_test_fault_node_args(a, "1", "2", m.addr, "60", log);
	start_trained(&r, &m, a, env, log);

	stop_worker_until_resumed(&r, &m, log, 90000, "worker_sigstop");

	char *err = rv_test_run_expect_exit(&r, 0, 180000);
	/* found and named with its stack: where the stopped worker was */
	const char *stack =
		strstr(err, "msg=\"hung worker's stack\" rank=1 stack=\"Fatal Python error");
	bool named = stack && strstr(err, "msg=\"worker hangs: no output\" rank=1") &&
		     strstr(stack, "digits_rover.py");
	if (!named)
		fprintf(stderr, "%s\n", err);
	ck_assert_msg(named, "the stopped worker was not named with its Python stack");
	free(err);
	rv_test_fault_expect_trained(&r, 1, log, SIZE, EPOCHS, 3);
	rv_test_run_end(&r);
	rv_test_master_cleanup(&m);
}
END_TEST

/* A worker that prints nothing while it trains (the soak's job) but saves
 * every step, under a short --hang-timeout of 5 s: not called hung
 * through its silent cold start (imports) nor its silent training (each
 * new checkpoint step is a sign of life); stopped, it is found within the
 * timeout, named with its stack, and the group trains again in seconds. */
START_TEST(test_worker_sigstop_silent)
{
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_start_job(&m, SIZE, 16, 4, 1, 1, NULL), 0);
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char log[400], job[96];
	snprintf(log, sizeof(log), "%s/shards.log", r.dir);
	rv_test_fault_job_env(job, sizeof(job), "wsilent");
	const char *env[] = { job, NULL };
	const char *a[24];
	rv_test_fault_node_args(a, "1", "2", m.addr, "5", log);
	for (int i = 0; a[i]; i++) /* silent: no step lines on its output */
		if (!strcmp(a[i], "--log-every"))
			a[i + 1] = "1000000";
	start_trained(&r, &m, a, env, log);
	/* two timeouts of silent training: no hang called */
	usleep(10000 * 1000);
	char *err = rv_test_read_file(r.err);
	bool quiet = err && !strstr(err, "worker hangs");
	if (!quiet)
		rv_test_run_dump(&r, 1, m.log);
	free(err);
	ck_assert_msg(quiet, "a silent worker that trains was called hung");

	int64_t took = stop_worker_until_resumed(&r, &m, log, 60000, "worker_sigstop_silent");
	/* the timeout, a tick, the stacks' 2 s at most and a warm restart */
	ck_assert_msg(took < 15000, "found and restarted %lld ms after the stop", (long long)took);
	err = rv_test_run_expect_exit(&r, 0, 180000);
	bool named = strstr(err, "msg=\"hung worker's stack\" rank=1 stack=\"Fatal Python error");
	if (!named)
		fprintf(stderr, "%s\n", err);
	ck_assert_msg(named, "the stopped worker was not named with its Python stack");
	free(err);
	rv_test_fault_expect_trained(&r, 1, log, SIZE, 4, 3);
	rv_test_run_end(&r);
	rv_test_master_cleanup(&m);
}
END_TEST

/* A master (heartbeat timeout 2 s) and two rover-runs r[0], r[1] of one
 * worker each, the job named after tag, trained 40 steps in a world of 2;
 * the shard log's path into log. */
static void start_two_nodes(struct rv_test_master *m, struct rv_test_run *r, char *log,
			    size_t lsize, const char *tag)
{
	const char *margs[] = { "--rdzv-heartbeat-timeout-ms", "2000", NULL };
	ck_assert_int_eq(rv_test_master_start_job(m, SIZE, 16, EPOCHS, 1, 2, margs), 0);
	char job[96];
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(rv_test_run_init(&r[i]), 0);
	snprintf(log, lsize, "%s/shards.log", r[0].dir);
	rv_test_fault_job_env(job, sizeof(job), tag);
	const char *env[] = { job, NULL };
	const char *a[24];
	rv_test_fault_node_args(a, "1:2", "1", m->addr, "0", log);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(rv_test_run_start_joined(&r[i], a, env, 60000), 0);
	if (!rv_test_wait_lines(log, 40, 120000))
		rv_test_run_dump(r, 2, m->log);
	ck_assert_msg(rv_test_wait_lines(log, 40, 0), "no 40 steps trained by the world of 2");
}

/* Every sample trained exactly once, both ranks at the end; then the runs
 * and the master are cleaned up. */
static void finish_two_nodes(struct rv_test_master *m, struct rv_test_run *r, const char *log)
{
	rv_test_fault_expect_trained(r, 2, log, SIZE, EPOCHS, 3);
	for (int i = 0; i < 2; i++)
		rv_test_run_end(&r[i]);
	rv_test_master_cleanup(m);
}

/* One node's rover-run (every stage of it: the workers keep running)
 * stopped for three heartbeat timeouts, then continued.  Meanwhile the
 * master declares it dead and the other node trains alone; continued, it
 * joins again as one node (its old workers stopped first: no second copy
 * of its rank), the world is two again, and no sample counts twice. */
START_TEST(test_run_sigstop_past_heartbeat)
{
	struct rv_test_master m;
	struct rv_test_run r[2];
	char log[400];
	start_two_nodes(&m, r, log, sizeof(log), "rstop");

	pid_t stages[4];
	int ns = rv_test_fault_run_stages(&r[1], stages, 4);
	ck_assert_int_ge(ns, 1);
	int at = rv_test_count_lines(log);
	int64_t t0 = rv_mono_ms();
	for (int i = 0; i < ns; i++)
		ck_assert_int_eq(kill(stages[i], SIGSTOP), 0);
	/* the other node trains on alone, from its checkpoint */
	int64_t rec = rv_test_fault_wait_resumed(log, at, 60000);
	if (rec < 0)
		rv_test_run_dump(r, 2, m.log);
	ck_assert_msg(rec >= 0, "the world of one never trained");
	/* stopped for three heartbeat timeouts in all */
	while (rv_mono_ms() - t0 < 6000)
		usleep(50 * 1000);
	at = rv_test_count_lines(log);
	for (int i = ns - 1; i >= 0; i--)
		ck_assert_int_eq(kill(stages[i], SIGCONT), 0);
	int64_t t1 = rv_mono_ms();
	rv_test_fault_report("run_sigstop_world_of_one", rec - t0);
	int64_t back = rv_test_fault_wait_world(log, at, 2, 90000);
	if (back < 0)
		rv_test_run_dump(r, 2, m.log);
	ck_assert_msg(back >= 0, "the continued node never trained in a world of 2 again");
	rv_test_fault_report("run_sigstop_rejoin", back - t1);
	for (int i = 0; i < 2; i++)
		free(rv_test_run_expect_exit(&r[i], 0, 180000));
	finish_two_nodes(&m, r, log);
}
END_TEST

/* The master stopped for 12 s (six heartbeat timeouts of 2 s: what 30 s
 * would show, in less of the suite's time; under the agents' master
 * timeout of 30 s, past which they would stop their workers themselves),
 * then continued: its own pause is not the nodes' silence, so nobody is
 * declared dead and the group trains on where it was, without a restart;
 * nothing is lost or trained twice. */
START_TEST(test_master_sigstop)
{
	struct rv_test_master m;
	struct rv_test_run r[2];
	char log[400];
	start_two_nodes(&m, r, log, sizeof(log), "mstop");

	ck_assert_int_eq(kill(m.pid, SIGSTOP), 0);
	usleep(12000 * 1000);
	int at = rv_test_count_lines(log);
	ck_assert_int_eq(kill(m.pid, SIGCONT), 0);
	int64_t t1 = rv_mono_ms();
	int64_t back = rv_test_fault_wait_steps(log, at, 2, 90000);
	if (back < 0)
		rv_test_run_dump(r, 2, m.log);
	ck_assert_msg(back >= 0, "no step trained by both ranks after the master continued");
	rv_test_fault_report("master_sigstop", back - t1);
	char *mlog = rv_test_read_file(m.log);
	ck_assert_msg(!strstr(mlog, "node declared dead"), "%s", mlog);
	free(mlog);
	for (int i = 0; i < 2; i++)
		free(rv_test_run_expect_exit(&r[i], 0, 180000));
	int loads = rv_test_fault_lines_after(log, at, "load ");
	if (loads)
		rv_test_run_dump(r, 2, m.log);
	ck_assert_msg(loads == 0, "the group restarted %d time(s) after the master continued",
		      loads);
	finish_two_nodes(&m, r, log);
}
END_TEST

/* The master stopped for 6 s (three heartbeat timeouts) while two nodes
 * (threads of this test) send nothing, then continued, the nodes
 * heartbeating again 300 ms later: the master's own pause is not their
 * silence (as after a restart, everyone counts as heard from when it goes
 * on), so nobody is declared dead.  Deterministic where test_master_sigstop
 * is a race: there rover-run's heartbeats, sent during the pause, wait in
 * the listen queue and may be served before the master's timer ticks. */
START_TEST(test_master_stall_no_death)
{
	struct rv_test_master m;
	char *spec = rv_test_master_spec(1000, 10, 1, 1, 2);
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	const char *margs[] = { "--rdzv-heartbeat-timeout-ms", "2000", NULL };
	ck_assert_int_eq(rv_test_master_start(&m, margs), 0);
	struct rv_test_fault_node n[2];
	pthread_t t[2];
	long long round = rv_test_fault_nodes_start(&m, n, t, 2);

	for (int i = 0; i < 2; i++)
		atomic_store(&n[i].pause, 1);
	usleep(500 * 1000); /* no heartbeat in flight */
	ck_assert_int_eq(kill(m.pid, SIGSTOP), 0);
	usleep(6000 * 1000);
	ck_assert_int_eq(kill(m.pid, SIGCONT), 0);
	usleep(300 * 1000);
	for (int i = 0; i < 2; i++)
		atomic_store(&n[i].pause, 0);
	usleep(3000 * 1000);
	char *log = rv_test_read_file(m.log);
	bool alive = !strstr(log, "node declared dead") && atomic_load(&n[0].round) == round &&
		     atomic_load(&n[1].round) == round;
	if (!alive)
		fprintf(stderr, "%s\n", log);
	free(log);
	ck_assert_msg(alive,
		      "the master's pause was taken for the nodes' silence (round %lld -> %lld)",
		      round, (long long)atomic_load(&n[0].round));
	for (int i = 0; i < 2; i++) {
		atomic_store(&n[i].stop, 1);
		pthread_join(t[i], NULL);
	}
	rv_test_master_cleanup(&m);
}
END_TEST

static Suite *fault_process_suite(void)
{
	Suite *s = suite_create("fault_process");
	rv_test_fault_add(s, "worker_sigstop", test_worker_sigstop, true);
	rv_test_fault_add(s, "worker_sigstop_silent", test_worker_sigstop_silent, true);
	rv_test_fault_add(s, "run_sigstop", test_run_sigstop_past_heartbeat, true);
	rv_test_fault_add(s, "master_stall", test_master_stall_no_death, true);
	rv_test_fault_add(s, "master_sigstop", test_master_sigstop, false);
	return s;
}

RV_TEST_MAIN(fault_process_suite)
