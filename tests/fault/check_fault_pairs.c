/*
 * check_fault_pairs.c: the whole stack (rover-brain on the private
 * PostgreSQL, rover-master reporting to it, two rover-run nodes training
 * examples/digits_rover.py) under two faults at once:
 *   - the master and the brain killed together (kill -9), then restarted:
 *     the job is registered once, the group trains on, no speed sample is
 *     stored twice;
 *   - a worker and the master killed together: the restarted master and
 *     rover-run's own restart of the group meet; every sample once;
 *   - the brain's PostgreSQL killed (stopped as a crash would) while the
 *     master is restarting: the master starts and serves without the
 *     brain's storage, training goes on, and its reports are stored once
 *     PostgreSQL is back.
 * Each ends with accounting (faultfix.h: every sample of every epoch once,
 * the job at its accuracy) and prints its recovery times.
 */
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brainfix.h"
#include "faultfix.h"
#include "masterfix.h"
#include "parse.h"
#include "pgfix.h"
#include "runfix.h"
#include "testutil.h"

/* The dataset: 1200 samples in shards of 16, two epochs. */
#define SIZE   1200
#define EPOCHS 2

struct stack {
	char conninfo[1024];
	char listen[64]; /* the brain's, kept across its restart */
	const char *bargs[8];
	struct rv_test_brain b; /* pid 0: none */
	struct rv_test_master m;
	const char *margs[16];
	struct rv_test_run r[2];
	char log[400], job[96];
	const char *env[2];
	const char *a[24];
};

static void brain_up(struct stack *x)
{
	x->bargs[0] = "--db";
	x->bargs[1] = x->conninfo;
	x->bargs[2] = "--listen";
	x->bargs[3] = x->listen;
	x->bargs[4] = NULL;
	ck_assert_int_eq(rv_test_brain_start(&x->b, x->bargs), 0);
	snprintf(x->listen, sizeof(x->listen), "127.0.0.1:%d", x->b.port);
}

/* A brain (with_brain) on a fresh database, a master reporting to it
 * (heartbeat timeout 2 s), two nodes of one worker each, joined in order,
 * 40 steps trained. */
static void stack_start(struct stack *x, bool with_brain, const char *what)
{
	memset(x, 0, sizeof(*x));
	int n = 0;
	x->margs[n++] = "--rdzv-heartbeat-timeout-ms";
	x->margs[n++] = "2000";
	if (with_brain) {
		ck_assert_int_eq(rv_test_pg_fresh_db(0, x->conninfo, sizeof(x->conninfo)), 0);
		snprintf(x->listen, sizeof(x->listen), "127.0.0.1:0");
		brain_up(x);
		const char *more[] = { "--brain",
				       x->b.url,
				       "--brain-batch-delay-ms",
				       "100",
				       "--brain-backoff-max-ms",
				       "500",
				       "--brain-timeout-ms",
				       "2000",
				       NULL };
		for (int i = 0; more[i]; i++)
			x->margs[n++] = more[i];
	}
	x->margs[n] = NULL;
	ck_assert_int_eq(rv_test_master_start_job(&x->m, SIZE, 16, EPOCHS, 1, 2, x->margs), 0);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(rv_test_run_init(&x->r[i]), 0);
	snprintf(x->log, sizeof(x->log), "%s/shards.log", x->r[0].dir);
	rv_test_fault_job_env(x->job, sizeof(x->job), what);
	x->env[0] = x->job;
	rv_test_fault_node_args(x->a, "1:2", "1", x->m.addr, "0", x->log);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(rv_test_run_start_joined(&x->r[i], x->a, x->env, 60000), 0);
	if (!rv_test_wait_lines(x->log, 40, 120000))
		rv_test_run_dump(x->r, 2, x->m.log);
	ck_assert_msg(rv_test_wait_lines(x->log, 40, 0), "no 40 steps trained by the world of 2");
}

static void stack_finish(struct stack *x)
{
	for (int i = 0; i < 2; i++)
		free(rv_test_run_expect_exit(&x->r[i], 0, 240000));
	rv_test_fault_expect_trained(x->r, 2, x->log, SIZE, EPOCHS, 3);
	for (int i = 0; i < 2; i++)
		rv_test_run_end(&x->r[i]);
	rv_test_master_cleanup(&x->m);
	if (x->b.pid > 0)
		rv_test_brain_stop(&x->b, SIGTERM, 10);
}

/* After the master's restart: wait until it hears a step newer than the
 * one it restored (the trainers report to it again); the time, or
 * -ETIMEDOUT. */
static int64_t master_hears_steps(struct stack *x, int timeout_ms)
{
	struct rv_master_client *c = rv_test_master_client(&x->m);
	ck_assert_ptr_nonnull(c);
	int64_t until = rv_mono_ms() + timeout_ms, first = -1, t = -ETIMEDOUT;
	while (rv_mono_ms() < until) {
		struct rv_job_status js;
		if (rv_master_job(c, &js, NULL) == 0) {
			if (first < 0)
				first = js.step;
			else if (js.step > first) {
				t = rv_mono_ms();
				break;
			}
		}
		usleep(20 * 1000);
	}
	rv_master_client_free(c);
	return t;
}

/* After the master's restart (the fault began at t0, the shard log had at
 * lines): the restarted master hears a step and both ranks step again;
 * report the time to the first as name. */
static void expect_steps_after_restart(struct stack *x, int at, int64_t t0, const char *name)
{
	int64_t heard = master_hears_steps(x, 60000);
	int64_t back = rv_test_fault_wait_steps(x->log, at, 2, 90000);
	if (back < 0 || heard < 0)
		rv_test_run_dump(x->r, 2, x->m.log);
	ck_assert_msg(heard >= 0, "the restarted master heard no step");
	ck_assert_msg(back >= 0, "no step of both ranks after the master restarted");
	rv_test_fault_report(name, heard - t0);
}

/* One query's single number, -1 when the database does not answer. */
static long long sql_num(const char *conninfo, const char *q)
{
	PGconn *c = PQconnectdb(conninfo);
	long long n = -1;
	PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, q) : NULL;
	if (r && PQresultStatus(r) == PGRES_TUPLES_OK)
		n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	PQfinish(c);
	return n;
}

static long long speed_rows(const struct stack *x)
{
	return sql_num(x->conninfo, "SELECT count(*) FROM job_speed");
}

/* The brain's store after the job: registered once, no speed sample
 * (a job time and step) stored twice, and some stored after t_rows, the
 * row count at the fault. */
static void expect_brain_once(const struct stack *x, long long rows_at_fault)
{
	ck_assert_int_eq(sql_num(x->conninfo, "SELECT count(*) FROM jobs"), 1);
	long long twice = sql_num(
		x->conninfo,
		"SELECT count(*) - count(DISTINCT (ts_ms, step, speed, workers)) FROM job_speed");
	long long rows = speed_rows(x);
	if (twice) {
		PGconn *c = PQconnectdb(x->conninfo);
		PGresult *r = PQexec(c, "SELECT ts_ms, step, count(*) FROM job_speed GROUP BY "
					"ts_ms, step, speed, workers "
					"HAVING count(*) > 1 ORDER BY 1 LIMIT 8");
		for (int i = 0; i < PQntuples(r); i++)
			printf("diag: twice ts_ms=%s step=%s n=%s\n", PQgetvalue(r, i, 0),
			       PQgetvalue(r, i, 1), PQgetvalue(r, i, 2));
		PQclear(r);
		r = PQexec(c, "SELECT min(ts_ms), max(ts_ms), min(step), max(step) FROM job_speed");
		printf("diag: ts %s..%s steps %s..%s\n", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1),
		       PQgetvalue(r, 0, 2), PQgetvalue(r, 0, 3));
		PQclear(r);
		PQfinish(c);
	}
	printf("diag: speed rows at the fault %lld, at the end %lld, twice %lld\n", rows_at_fault,
	       rows, twice);
	fflush(stdout);
	ck_assert_int_eq(twice, 0);
	ck_assert_msg(rows > rows_at_fault, "no speed sample stored after the fault (%lld)", rows);
}

/* The master and the brain killed together and restarted (the brain
 * first, on its port; the master on its state folder): the agents hear
 * the master again and train on, the journal's uid keeps the job
 * registered once, the reports flow again. */
START_TEST(test_master_and_brain_kill9)
{
	struct stack x;
	stack_start(&x, true, "mbkill");
	long long rows0 = speed_rows(&x);
	ck_assert_msg(rows0 > 0, "no speed sample reached the brain before the fault");
	int at = rv_test_count_lines(x.log);
	int64_t t0 = rv_mono_ms();
	ck_assert_int_eq(kill(x.m.pid, SIGKILL), 0);
	ck_assert_int_eq(kill(x.b.pid, SIGKILL), 0);
	ck_assert_int_ge(rv_test_master_stop(&x.m, SIGKILL, 10000), 0);
	ck_assert_int_ge(rv_test_brain_stop(&x.b, SIGKILL, 10), 0);
	usleep(1000 * 1000);
	brain_up(&x);
	ck_assert_int_eq(rv_test_master_restart(&x.m), 0);
	expect_steps_after_restart(&x, at, t0, "master_brain_kill9");
	stack_finish(&x);
	expect_brain_once(&x, rows0);
}
END_TEST

/* A worker of node 1 and the master killed together; the master back
 * after 1 s.  rover-run restarts its group (the worker died) while the
 * master replays its journal: the group trains again from the last
 * checkpoint, nothing lost or trained twice. */
START_TEST(test_worker_and_master_kill9)
{
	struct stack x;
	stack_start(&x, false, "wmkill");
	pid_t w[2];
	ck_assert_int_eq(rv_test_run_workers(&x.r[1], 0, -1, w, 2), 1);
	int at = rv_test_count_lines(x.log);
	int64_t t0 = rv_mono_ms();
	ck_assert_int_eq(kill(w[0], SIGKILL), 0);
	ck_assert_int_eq(kill(x.m.pid, SIGKILL), 0);
	ck_assert_int_ge(rv_test_master_stop(&x.m, SIGKILL, 10000), 0);
	usleep(1000 * 1000);
	ck_assert_int_eq(rv_test_master_restart(&x.m), 0);
	int64_t back = rv_test_fault_wait_resumed(x.log, at, 120000);
	if (back < 0)
		rv_test_run_dump(x.r, 2, x.m.log);
	ck_assert_msg(back >= 0, "training never resumed after the worker and the master died");
	rv_test_fault_report("worker_master_kill9", back - t0);
	stack_finish(&x);
}
END_TEST

/* The master killed; while it is down and restarting, the brain's
 * PostgreSQL crashes (immediate stop).  The master must come up and serve
 * its agents without the brain's storage (its reports wait in its queue),
 * and once PostgreSQL is back every report reaches it, none twice. */
START_TEST(test_postgres_down_while_master_restarts)
{
	struct stack x;
	stack_start(&x, true, "pgdown");
	long long rows0 = speed_rows(&x);
	int at = rv_test_count_lines(x.log);
	int64_t t0 = rv_mono_ms();
	ck_assert_int_eq(kill(x.m.pid, SIGKILL), 0);
	ck_assert_int_ge(rv_test_master_stop(&x.m, SIGKILL, 10000), 0);
	ck_assert_int_eq(rv_test_pg_kill_server(), 0);
	ck_assert_int_eq(rv_test_master_restart(&x.m), 0);
	expect_steps_after_restart(&x, at, t0, "postgres_down_master_restart");
	usleep(2000 * 1000);
	ck_assert_msg(kill(x.b.pid, 0) == 0, "the brain died with its PostgreSQL");
	ck_assert_int_eq(rv_test_pg_start_server(), 0);
	int64_t t1 = rv_mono_ms();
	while (speed_rows(&x) <= rows0 && rv_mono_ms() - t1 < 60000)
		usleep(100 * 1000);
	rv_test_fault_report("postgres_back_reports_stored", rv_mono_ms() - t1);
	stack_finish(&x);
	expect_brain_once(&x, rows0);
}
END_TEST

static Suite *fault_pairs_suite(void)
{
	Suite *s = suite_create("fault_pairs");
	rv_test_fault_add(s, "master_brain_kill9", test_master_and_brain_kill9, true);
	rv_test_fault_add(s, "worker_master_kill9", test_worker_and_master_kill9, false);
	rv_test_fault_add(s, "postgres_down_master_restart",
			  test_postgres_down_while_master_restarts, true);
	return s;
}

RV_TEST_MAIN_PG(fault_pairs_suite)
