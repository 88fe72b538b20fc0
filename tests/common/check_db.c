/*
 * check_db.c: the libpq layer (common/db.c) against a real private PostgreSQL:
 * parameter passing, SQLSTATE -> errno, the pool under threads, limits and
 * outages, and migrations.  Each test gets its own database from the fixture.
 */
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "db.h"
#include "testutil.h"

static char dbci[1024];

static void fresh(void)
{
	ck_assert_int_eq(rv_test_pg_fresh_db(0, dbci, sizeof(dbci)), 0);
}

static struct rv_db_pool *pool_for(int size, int acquire_timeout_ms, int stmt_timeout_ms)
{
	struct rv_db_pool_opts o = { .conninfo = dbci,
				     .size = size,
				     .connect_timeout_s = 5,
				     .statement_timeout_ms = stmt_timeout_ms,
				     .acquire_timeout_ms = acquire_timeout_ms };
	struct rv_db_pool *p = rv_db_pool_new(&o);
	ck_assert_ptr_nonnull(p);
	return p;
}

static PGconn *must_acquire(struct rv_db_pool *p)
{
	struct rv_err err = { 0 };
	PGconn *c = rv_db_acquire(p, &err);
	ck_assert_msg(c != NULL, "acquire: %d %s", err.code, err.msg);
	return c;
}

static void must_exec(PGconn *c, const char *sql)
{
	struct rv_err err = { 0 };
	int r = rv_db_exec(c, sql, 0, NULL, NULL, &err);
	ck_assert_msg(r >= 0, "%s: %d %s", sql, r, err.msg);
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- exec and errors ---- */

START_TEST(params_round_trip_verbatim)
{
	fresh();
	struct rv_db_pool *p = pool_for(1, 2000, 0);
	PGconn *c = must_acquire(p);
	must_exec(c, "CREATE TABLE t (id int PRIMARY KEY, s text)");
	static const char *const evil[] = {
		"'; DROP TABLE t; --",
		"Robert'); DROP TABLE t;--",
		"\\'\\\\ $1 $2 %s %n",
		"\"quoted\" E'\\x41' $$dollar$$",
		"unicode: \xc3\xa9\xe2\x82\xac \xf0\x9f\x9a\x80",
		"",
	};
	struct rv_err err = { 0 };
	for (size_t i = 0; i < RV_ARRAY_SIZE(evil); i++) {
		char id[16];
		snprintf(id, sizeof(id), "%zu", i);
		const char *params[] = { id, evil[i] };
		ck_assert_int_eq(rv_db_exec(c, "INSERT INTO t VALUES ($1, $2)", 2, params, NULL, &err),
				 1);
	}
	const char *nullp[] = { "100", NULL };
	ck_assert_int_eq(rv_db_exec(c, "INSERT INTO t VALUES ($1, $2)", 2, nullp, NULL, &err), 1);

	PGresult *res = NULL;
	int n = rv_db_exec(c, "SELECT id, s FROM t ORDER BY id", 0, NULL, &res, &err);
	ck_assert_int_eq(n, (int)RV_ARRAY_SIZE(evil) + 1);
	for (size_t i = 0; i < RV_ARRAY_SIZE(evil); i++)
		ck_assert_str_eq(PQgetvalue(res, (int)i, 1), evil[i]);
	ck_assert(PQgetisnull(res, n - 1, 1));
	PQclear(res);
	/* UPDATE reports affected rows */
	ck_assert_int_eq(rv_db_exec(c, "UPDATE t SET s = 'x' WHERE id < 3", 0, NULL, NULL, &err), 3);
	rv_db_release(p, c);
	rv_db_pool_free(p);
}
END_TEST

START_TEST(unique_violation_is_eexist)
{
	fresh();
	struct rv_db_pool *p = pool_for(1, 2000, 0);
	PGconn *c = must_acquire(p);
	must_exec(c, "CREATE TABLE u (k text PRIMARY KEY)");
	must_exec(c, "CREATE TABLE child (k text REFERENCES u(k))");
	const char *params[] = { "job-1" };
	struct rv_err err = { 0 };
	ck_assert_int_eq(rv_db_exec(c, "INSERT INTO u VALUES ($1)", 1, params, NULL, &err), 1);
	ck_assert_int_eq(rv_db_exec(c, "INSERT INTO u VALUES ($1)", 1, params, NULL, &err), -EEXIST);
	ck_assert_int_eq(err.code, -EEXIST);
	ck_assert_msg(strstr(err.msg, "duplicate key") != NULL, "msg: %s", err.msg);
	const char *missing[] = { "nope" };
	ck_assert_int_eq(rv_db_exec(c, "INSERT INTO child VALUES ($1)", 1, missing, NULL, &err),
			 -ENOENT);
	const char *bad[] = { "not a number" };
	ck_assert_int_eq(rv_db_exec(c, "SELECT $1::int", 1, bad, NULL, &err), -EINVAL);

	struct rv_db_pool_stats st;
	rv_db_pool_stats(p, &st);
	ck_assert_uint_eq(st.exec_errors, 3);
	rv_db_release(p, c);
	rv_db_pool_free(p);
}
END_TEST

START_TEST(syntax_error_has_message)
{
	fresh();
	struct rv_db_pool *p = pool_for(1, 2000, 0);
	PGconn *c = must_acquire(p);
	struct rv_err err = { 0 };
	int r = rv_db_exec(c, "SELEC 1", 0, NULL, NULL, &err);
	ck_assert_int_lt(r, 0);
	ck_assert_int_eq(err.code, r);
	ck_assert_msg(strstr(err.msg, "syntax error") && strstr(err.msg, "42601"), "msg: %s",
		      err.msg);
	/* the connection is still usable afterwards */
	ck_assert_int_eq(rv_db_exec(c, "SELECT 1", 0, NULL, NULL, &err), 1);
	rv_db_release(p, c);
	rv_db_pool_free(p);
}
END_TEST

START_TEST(sqlstate_mapping)
{
	ck_assert_int_eq(rv_db_sqlstate_errno("23505"), -EEXIST);
	ck_assert_int_eq(rv_db_sqlstate_errno("23503"), -ENOENT);
	ck_assert_int_eq(rv_db_sqlstate_errno("25006"), -EROFS);
	ck_assert_int_eq(rv_db_sqlstate_errno("53100"), -ENOSPC);
	ck_assert_int_eq(rv_db_sqlstate_errno("23502"), -EINVAL);
	ck_assert_int_eq(rv_db_sqlstate_errno("22P02"), -EINVAL);
	ck_assert_int_eq(rv_db_sqlstate_errno("40001"), -EAGAIN);
	ck_assert_int_eq(rv_db_sqlstate_errno("40P01"), -EAGAIN);
	ck_assert_int_eq(rv_db_sqlstate_errno("57014"), -ETIMEDOUT);
	ck_assert_int_eq(rv_db_sqlstate_errno("08006"), -ECONNRESET);
	ck_assert_int_eq(rv_db_sqlstate_errno("57P01"), -ECONNRESET);
	ck_assert_int_eq(rv_db_sqlstate_errno("42601"), -EIO);
	ck_assert_int_eq(rv_db_sqlstate_errno(NULL), -EIO);
}
END_TEST

START_TEST(statement_timeout_is_etimedout)
{
	fresh();
	struct rv_db_pool *p = pool_for(1, 2000, 200);
	PGconn *c = must_acquire(p);
	struct rv_err err = { 0 };
	int64_t t0 = mono_ms();
	ck_assert_int_eq(rv_db_exec(c, "SELECT pg_sleep(5)", 0, NULL, NULL, &err), -ETIMEDOUT);
	ck_assert_int_lt(mono_ms() - t0, 3000);
	rv_db_release(p, c);
	rv_db_pool_free(p);
}
END_TEST

START_TEST(transactions_commit_and_rollback)
{
	fresh();
	struct rv_db_pool *p = pool_for(1, 2000, 0);
	PGconn *c = must_acquire(p);
	struct rv_err err = { 0 };
	must_exec(c, "CREATE TABLE tx (v int)");
	ck_assert_int_eq(rv_db_begin(c, &err), 0);
	must_exec(c, "INSERT INTO tx VALUES (1)");
	ck_assert_int_eq(rv_db_commit(c, &err), 0);
	ck_assert_int_eq(rv_db_begin(c, &err), 0);
	must_exec(c, "INSERT INTO tx VALUES (2)");
	rv_db_rollback(c);
	/* a failed transaction cannot be committed */
	ck_assert_int_eq(rv_db_begin(c, &err), 0);
	must_exec(c, "INSERT INTO tx VALUES (3)");
	ck_assert_int_lt(rv_db_exec(c, "SELEC", 0, NULL, NULL, &err), 0);
	ck_assert_int_lt(rv_db_commit(c, &err), 0);
	/* a transaction left open is rolled back by release */
	ck_assert_int_eq(rv_db_begin(c, &err), 0);
	must_exec(c, "INSERT INTO tx VALUES (4)");
	rv_db_release(p, c);
	c = must_acquire(p);
	ck_assert_int_eq(PQtransactionStatus(c), PQTRANS_IDLE);
	PGresult *res = NULL;
	ck_assert_int_eq(rv_db_exec(c, "SELECT v FROM tx", 0, NULL, &res, &err), 1);
	ck_assert_str_eq(PQgetvalue(res, 0, 0), "1");
	PQclear(res);
	rv_db_release(p, c);
	rv_db_pool_free(p);
}
END_TEST

/* Statements in one round trip: results of those that ran, the first
 * failure's errno and index, nothing after it, and a connection that
 * takes plain statements again. */
START_TEST(pipeline_runs_in_order_and_stops_at_failure)
{
	fresh();
	struct rv_db_pool *p = pool_for(1, 2000, 0);
	PGconn *c = must_acquire(p);
	struct rv_err err = { 0 };
	must_exec(c, "CREATE TABLE pl (v int PRIMARY KEY)");
	const char *one[] = { "1" }, *two[] = { "2" };
	struct rv_db_stmt ok[] = {
		{ .sql = "BEGIN" },
		{ .sql = "INSERT INTO pl VALUES ($1::int)", .nparams = 1, .params = one },
		{ .sql = "INSERT INTO pl SELECT $1::int + 1", .nparams = 1, .params = one },
		{ .sql = "SELECT v FROM pl ORDER BY v", .want_res = true },
		{ .sql = "COMMIT" },
	};
	int failed = 7;
	ck_assert_int_eq(rv_db_exec_pipeline(c, ok, 5, &failed, &err), 0);
	ck_assert_int_eq(failed, -1);
	ck_assert_int_eq(ok[1].rows, 1);
	ck_assert_int_eq(ok[3].rows, 2);
	ck_assert_str_eq(PQgetvalue(ok[3].res, 1, 0), "2");
	PQclear(ok[3].res);

	struct rv_db_stmt bad[] = {
		{ .sql = "BEGIN" },
		{ .sql = "SELECT count(*) FROM pl", .want_res = true },
		{ .sql = "INSERT INTO pl VALUES ($1::int)", .nparams = 1, .params = two },
		{ .sql = "INSERT INTO pl VALUES (3)" },
		{ .sql = "COMMIT" },
	};
	ck_assert_int_eq(rv_db_exec_pipeline(c, bad, 5, &failed, &err), -EEXIST);
	ck_assert_int_eq(failed, 2);
	ck_assert_ptr_nonnull(strstr(err.msg, "23505"));
	ck_assert_str_eq(PQgetvalue(bad[1].res, 0, 0), "2");
	PQclear(bad[1].res);
	ck_assert_ptr_null(bad[3].res);
	ck_assert_int_eq(PQtransactionStatus(c), PQTRANS_INERROR);
	rv_db_rollback(c);
	PGresult *res = NULL;
	ck_assert_int_eq(rv_db_exec(c, "SELECT v FROM pl", 0, NULL, &res, &err), 2);
	PQclear(res);
	rv_db_release(p, c);
	rv_db_pool_free(p);
}
END_TEST

static long count_of(PGconn *c, const char *sql)
{
	PGresult *res = NULL;
	struct rv_err err = { 0 };
	ck_assert_int_eq(rv_db_exec(c, sql, 0, NULL, &res, &err), 1);
	long n = atol(PQgetvalue(res, 0, 0));
	PQclear(res);
	return n;
}

/* A statement marked prepare is prepared once on a connection and then run
 * prepared, also after the connection went back to the pool; one whose
 * pipeline failed before it got prepared is prepared the next time, and
 * a prepare that fails reports the server's message. */
START_TEST(pipeline_prepares_once_per_connection)
{
	fresh();
	struct rv_db_pool *p = pool_for(1, 2000, 0);
	PGconn *c = must_acquire(p);
	struct rv_err err = { 0 };
	must_exec(c, "CREATE TABLE pp (v int PRIMARY KEY)");
	static const char ins[] = "INSERT INTO pp VALUES ($1::int)";
	static const char sum[] = "SELECT sum(v) FROM pp WHERE v > $1::int";
	const char *v[] = { "1", "2", "3", "4" }, *zero[] = { "0" };
	for (int i = 0; i < 2; i++) {
		struct rv_db_stmt st[] = {
			{ .sql = ins, .nparams = 1, .params = &v[i], .prepare = true },
			{ .sql = sum,
			  .nparams = 1,
			  .params = zero,
			  .want_res = true,
			  .prepare = true },
		};
		ck_assert_int_eq(rv_db_exec_pipeline(c, st, 2, NULL, &err), 0);
		ck_assert_int_eq(atoi(PQgetvalue(st[1].res, 0, 0)), i ? 3 : 1);
		PQclear(st[1].res);
	}
	ck_assert_int_eq(count_of(c, "SELECT count(*) FROM pg_prepared_statements"), 2);

	/* A duplicate key before a statement seen the first time: not prepared. */
	static const char del[] = "DELETE FROM pp WHERE v = $1::int";
	struct rv_db_stmt bad[] = {
		{ .sql = ins, .nparams = 1, .params = &v[0], .prepare = true },
		{ .sql = del, .nparams = 1, .params = &v[1], .prepare = true },
	};
	int failed = 0;
	ck_assert_int_eq(rv_db_exec_pipeline(c, bad, 2, &failed, &err), -EEXIST);
	ck_assert_int_eq(failed, 0);
	rv_db_release(p, c);
	c = must_acquire(p);
	struct rv_db_stmt again[] = {
		{ .sql = del, .nparams = 1, .params = &v[1], .prepare = true },
		{ .sql = ins, .nparams = 1, .params = &v[2], .prepare = true },
	};
	ck_assert_int_eq(rv_db_exec_pipeline(c, again, 2, NULL, &err), 0);
	ck_assert_int_eq(again[0].rows, 1);
	ck_assert_int_eq(count_of(c, "SELECT sum(v) FROM pp"), 4);
	ck_assert_int_eq(count_of(c, "SELECT count(*) FROM pg_prepared_statements"), 3);

	static const char typo[] = "SELEC $1::int";
	struct rv_db_stmt syn[] = {
		{ .sql = typo, .nparams = 1, .params = zero, .prepare = true },
	};
	ck_assert_int_lt(rv_db_exec_pipeline(c, syn, 1, &failed, &err), 0);
	ck_assert_int_eq(failed, 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "syntax"));
	struct rv_db_stmt last[] = {
		{ .sql = ins, .nparams = 1, .params = &v[3], .prepare = true },
	};
	ck_assert_int_eq(rv_db_exec_pipeline(c, last, 1, NULL, &err), 0);
	ck_assert_int_eq(count_of(c, "SELECT sum(v) FROM pp"), 8);
	rv_db_release(p, c);
	rv_db_pool_free(p);
}
END_TEST

/* ---- pool ---- */

struct worker {
	struct rv_db_pool *pool;
	int id, iters, failures;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < w->iters; i++) {
		struct rv_err err = { 0 };
		PGconn *c = rv_db_acquire(w->pool, &err);
		if (!c) {
			w->failures++;
			continue;
		}
		char a[16], b[16];
		snprintf(a, sizeof(a), "%d", w->id);
		snprintf(b, sizeof(b), "%d", i);
		const char *params[] = { a, b };
		if (rv_db_exec(c, "INSERT INTO hits VALUES ($1, $2)", 2, params, NULL, &err) != 1)
			w->failures++;
		rv_db_release(w->pool, c);
	}
	return NULL;
}

START_TEST(pool_concurrent_threads)
{
	fresh();
	enum { THREADS = 8, ITERS = 50, SIZE = 3 };
	struct rv_db_pool *p = pool_for(SIZE, 10000, 0);
	PGconn *c = must_acquire(p);
	must_exec(c, "CREATE TABLE hits (w int, i int, PRIMARY KEY (w, i))");
	rv_db_release(p, c);

	pthread_t th[THREADS];
	struct worker w[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ .pool = p, .id = i, .iters = ITERS };
		ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].failures, 0);
	}
	struct rv_db_pool_stats st;
	rv_db_pool_stats(p, &st);
	ck_assert_int_eq(st.size, SIZE);
	ck_assert_int_eq(st.in_use, 0);
	ck_assert_int_le(st.connected, SIZE);
	ck_assert_uint_eq(st.acquires, THREADS * ITERS + 1);
	ck_assert_uint_eq(st.acquire_failures, 0);

	c = must_acquire(p);
	PGresult *res = NULL;
	struct rv_err err = { 0 };
	ck_assert_int_eq(rv_db_exec(c, "SELECT count(*) FROM hits", 0, NULL, &res, &err), 1);
	ck_assert_int_eq(atoi(PQgetvalue(res, 0, 0)), THREADS * ITERS);
	PQclear(res);
	/* no more server sessions than the pool size were ever open at once */
	ck_assert_int_eq(rv_db_exec(c, "SELECT count(*) FROM pg_stat_activity "
				       "WHERE datname = current_database()",
				    0, NULL, &res, &err),
			 1);
	ck_assert_int_le(atoi(PQgetvalue(res, 0, 0)), SIZE);
	PQclear(res);
	rv_db_release(p, c);
	rv_db_pool_free(p);
}
END_TEST

struct waiter {
	struct rv_db_pool *pool;
	PGconn *got;
	struct rv_err err;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	w->got = rv_db_acquire(w->pool, &w->err);
	return NULL;
}

START_TEST(pool_limit_and_acquire_timeout)
{
	fresh();
	struct rv_db_pool *p = pool_for(2, 300, 0);
	PGconn *a = must_acquire(p);
	PGconn *b = must_acquire(p);
	ck_assert_ptr_ne(a, b);
	struct rv_err err = { 0 };
	int64_t t0 = mono_ms();
	ck_assert_ptr_null(rv_db_acquire(p, &err));
	int64_t waited = mono_ms() - t0;
	ck_assert_int_eq(err.code, -ETIMEDOUT);
	ck_assert_int_ge(waited, 250);
	ck_assert_int_lt(waited, 3000);
	ck_assert_ptr_nonnull(strstr(err.msg, "all 2 in use"));

	/* a waiter is woken by a release, well before its timeout */
	struct rv_db_pool *q = pool_for(1, 5000, 0);
	PGconn *only = must_acquire(q);
	struct waiter w = { .pool = q };
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
	usleep(200 * 1000);
	t0 = mono_ms();
	rv_db_release(q, only);
	pthread_join(th, NULL);
	ck_assert_msg(w.got != NULL, "waiter: %s", w.err.msg);
	ck_assert_ptr_eq(w.got, only); /* the same connection was reused */
	ck_assert_int_lt(mono_ms() - t0, 2000);
	rv_db_release(q, w.got);
	rv_db_pool_free(q);

	struct rv_db_pool_stats st;
	rv_db_pool_stats(p, &st);
	ck_assert_int_eq(st.in_use, 2);
	ck_assert_uint_eq(st.acquire_failures, 1);
	rv_db_release(p, a);
	PGconn *c = must_acquire(p);
	must_exec(c, "SELECT 1");
	rv_db_release(p, c);
	rv_db_release(p, b);
	rv_db_pool_free(p);
}
END_TEST

START_TEST(pool_survives_server_outage)
{
	fresh();
	struct rv_db_pool *p = pool_for(2, 2000, 0);
	PGconn *held = must_acquire(p);
	PGconn *idle = must_acquire(p);
	must_exec(held, "SELECT 1");
	must_exec(idle, "SELECT 1");
	rv_db_release(p, idle);

	int stopped = rv_test_pg_stop_server();
	if (stopped == -ENOTSUP) {
		/* ROVER_TEST_PG points at a shared server we must not stop */
		fprintf(stderr, "pool_survives_server_outage: not run against ROVER_TEST_PG\n");
		rv_db_release(p, held);
		rv_db_pool_free(p);
		return;
	}
	ck_assert_int_eq(stopped, 0);

	/* a connection held across the outage fails with a reason */
	struct rv_err err = { 0 };
	int r = rv_db_exec(held, "SELECT 1", 0, NULL, NULL, &err);
	ck_assert_msg(r == -ECONNRESET, "exec on dead conn: %d %s", r, err.msg);
	ck_assert_ptr_nonnull(strstr(err.msg, "connection lost"));
	rv_db_release(p, held);

	/* the idle one is found dead and the reconnect is refused, with libpq's reason */
	memset(&err, 0, sizeof(err));
	PGconn *c = rv_db_acquire(p, &err);
	ck_assert_ptr_null(c);
	ck_assert_msg(err.code == -ECONNREFUSED, "acquire while down: %d %s", err.code, err.msg);
	ck_assert_msg(strstr(err.msg, "could not connect") != NULL, "msg: %s", err.msg);
	struct rv_db_pool_stats st;
	rv_db_pool_stats(p, &st);
	ck_assert_int_eq(st.in_use, 0);
	ck_assert_uint_eq(st.connect_failures, 1);

	/* Within the back-off the next acquires fail at once with the same
	 * reason and try no connect: a down server costs one attempt per pause. */
	for (int i = 0; i < 20; i++) {
		memset(&err, 0, sizeof(err));
		ck_assert_ptr_null(rv_db_acquire(p, &err));
		ck_assert_int_eq(err.code, -ECONNREFUSED);
	}
	ck_assert_msg(strstr(err.msg, "could not connect") && strstr(err.msg, "next attempt in"),
		      "msg: %s", err.msg);
	rv_db_pool_stats(p, &st);
	ck_assert_msg(st.connect_failures <= 2, "%llu connect attempts while backing off",
		      (unsigned long long)st.connect_failures);

	ck_assert_int_eq(rv_test_pg_start_server(), 0);
	usleep(250 * 1000); /* past the back-off (50, 100 ms) */
	c = must_acquire(p);
	PGresult *res = NULL;
	ck_assert_int_eq(rv_db_exec(c, "SELECT 40 + 2", 0, NULL, &res, &err), 1);
	ck_assert_str_eq(PQgetvalue(res, 0, 0), "42");
	PQclear(res);
	PGconn *d = must_acquire(p);
	must_exec(d, "SELECT 1");
	rv_db_release(p, d);
	rv_db_release(p, c);
	rv_db_pool_free(p);
}
END_TEST

/* ---- migrations ---- */

static char migdir[64];

static void write_file(const char *name, const char *text)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", migdir, name);
	rv_test_write_file(path, text);
}

static void mig_setup(void)
{
	snprintf(migdir, sizeof(migdir), "/tmp/rover-check-mig-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(migdir));
	/* 10 sorts before 9 as text: numeric order is what is checked */
	write_file("1_create.sql", "CREATE TABLE steps (id serial PRIMARY KEY, v int);\n"
				   "CREATE TABLE other (x text);\n");
	write_file("9_nine.sql", "INSERT INTO steps (v) VALUES (9);\n");
	write_file("10_ten.sql", "-- comment\nINSERT INTO steps (v) VALUES (10);\n"
				 "INSERT INTO other VALUES ('a;b');\n");
	write_file("README", "not a migration");
	write_file("abc.sql", "SELEC broken, not a migration name");
}

static void mig_teardown(void)
{
	rv_test_rm_rf(migdir);
}

static PGconn *connect_db(void)
{
	PGconn *c = PQconnectdb(dbci);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	return c;
}

static const char *query1(PGconn *c, const char *sql)
{
	static char val[256];
	PGresult *res = NULL;
	struct rv_err err = { 0 };
	int r = rv_db_exec(c, sql, 0, NULL, &res, &err);
	ck_assert_msg(r >= 1, "%s: %d %s", sql, r, err.msg);
	snprintf(val, sizeof(val), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return val;
}

START_TEST(migrate_numeric_order_once)
{
	fresh();
	PGconn *c = connect_db();
	struct rv_err err = { 0 };
	int r = rv_db_migrate(c, migdir, &err);
	ck_assert_msg(r == 3, "migrate: %d %s", r, err.msg);
	ck_assert_str_eq(query1(c, "SELECT string_agg(v::text, ',' ORDER BY id) FROM steps"), "9,10");
	ck_assert_str_eq(query1(c, "SELECT x FROM other"), "a;b");
	ck_assert_str_eq(query1(c, "SELECT string_agg(version || ':' || name, ',' ORDER BY version) "
				   "FROM rover_schema_version"),
			 "1:1_create.sql,9:9_nine.sql,10:10_ten.sql");
	ck_assert_str_eq(query1(c, "SELECT count(*) FROM rover_schema_version "
				   "WHERE length(checksum) = 32 AND applied_at <= now()"),
			 "3");

	ck_assert_int_eq(rv_db_migrate(c, migdir, &err), 0);
	ck_assert_str_eq(query1(c, "SELECT count(*) FROM steps"), "2");

	/* a new file is applied alone */
	write_file("11_more.sql", "INSERT INTO steps (v) VALUES (11);");
	ck_assert_int_eq(rv_db_migrate(c, migdir, &err), 1);
	ck_assert_str_eq(query1(c, "SELECT string_agg(v::text, ',' ORDER BY id) FROM steps"),
			 "9,10,11");
	/* the advisory lock was released */
	ck_assert_str_eq(query1(c, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"), "0");
	PQfinish(c);
}
END_TEST

START_TEST(migrate_changed_file_is_an_error)
{
	fresh();
	PGconn *c = connect_db();
	struct rv_err err = { 0 };
	ck_assert_int_eq(rv_db_migrate(c, migdir, &err), 3);
	write_file("9_nine.sql", "INSERT INTO steps (v) VALUES (99);\n");
	int r = rv_db_migrate(c, migdir, &err);
	ck_assert_int_lt(r, 0);
	ck_assert_msg(strstr(err.msg, "9_nine.sql") && strstr(err.msg, "changed"), "msg: %s",
		      err.msg);
	ck_assert_str_eq(query1(c, "SELECT count(*) FROM steps"), "2");
	PQfinish(c);
}
END_TEST

START_TEST(migrate_failing_file_is_rolled_back)
{
	fresh();
	write_file("12_bad.sql", "INSERT INTO steps (v) VALUES (12);\nSELEC oops;\n");
	PGconn *c = connect_db();
	struct rv_err err = { 0 };
	int r = rv_db_migrate(c, migdir, &err);
	ck_assert_int_lt(r, 0);
	ck_assert_msg(strstr(err.msg, "12_bad.sql") && strstr(err.msg, "syntax error"), "msg: %s",
		      err.msg);
	/* earlier files stay applied, the failed one left nothing behind */
	ck_assert_str_eq(query1(c, "SELECT string_agg(v::text, ',' ORDER BY id) FROM steps"), "9,10");
	ck_assert_str_eq(query1(c, "SELECT count(*) FROM rover_schema_version"), "3");
	ck_assert_int_eq(PQtransactionStatus(c), PQTRANS_IDLE);
	ck_assert_int_lt(rv_db_migrate(c, "/nonexistent/sql", &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/sql"));
	PQfinish(c);
}
END_TEST

struct migrator {
	PGconn *conn;
	int applied;
	struct rv_err err;
};

static void *migrator_main(void *arg)
{
	struct migrator *m = arg;
	m->applied = rv_db_migrate(m->conn, migdir, &m->err);
	return NULL;
}

START_TEST(migrate_concurrent_applies_once)
{
	fresh();
	/* slow first file: the second migrator arrives while the first is inside */
	write_file("1_create.sql", "SELECT pg_sleep(0.5);\n"
				   "CREATE TABLE steps (id serial PRIMARY KEY, v int);\n"
				   "CREATE TABLE other (x text);\n");
	struct migrator m[2];
	pthread_t th[2];
	for (int i = 0; i < 2; i++) {
		m[i] = (struct migrator){ .conn = connect_db() };
		ck_assert_int_eq(pthread_create(&th[i], NULL, migrator_main, &m[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ck_assert_msg(m[0].applied >= 0 && m[1].applied >= 0, "errors: %s | %s", m[0].err.msg,
		      m[1].err.msg);
	ck_assert_int_eq(m[0].applied + m[1].applied, 3);
	ck_assert_str_eq(query1(m[0].conn, "SELECT string_agg(v::text, ',' ORDER BY id) FROM steps"),
			 "9,10");
	ck_assert_str_eq(query1(m[0].conn, "SELECT count(*) FROM rover_schema_version"), "3");
	PQfinish(m[0].conn);
	PQfinish(m[1].conn);
}
END_TEST

START_TEST(fresh_db_isolated_and_migrated)
{
	/* two fresh databases never share rows */
	char a[1024], b[1024];
	ck_assert_int_eq(rv_test_pg_fresh_db(0, a, sizeof(a)), 0);
	ck_assert_int_eq(rv_test_pg_fresh_db(0, b, sizeof(b)), 0);
	ck_assert_str_ne(a, b);
	snprintf(dbci, sizeof(dbci), "%s", a);
	PGconn *c = connect_db();
	must_exec(c, "CREATE TABLE only_in_a (v int)");
	PQfinish(c);
	snprintf(dbci, sizeof(dbci), "%s", b);
	c = connect_db();
	ck_assert_str_eq(query1(c, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'"),
			 "0");
	PQfinish(c);

	/* migrate=1 applies ROVER_SQL_DIR */
	setenv("ROVER_SQL_DIR", migdir, 1);
	ck_assert_int_eq(rv_test_pg_fresh_db(1, dbci, sizeof(dbci)), 0);
	c = connect_db();
	ck_assert_str_eq(query1(c, "SELECT count(*) FROM rover_schema_version"), "3");
	PQfinish(c);
}
END_TEST

static Suite *db_suite(void)
{
	TCase *tc_exec = RV_TEST_TCASE("exec", 30, params_round_trip_verbatim,
				       unique_violation_is_eexist, syntax_error_has_message,
				       sqlstate_mapping, statement_timeout_is_etimedout,
				       transactions_commit_and_rollback,
				       pipeline_runs_in_order_and_stops_at_failure,
				       pipeline_prepares_once_per_connection);
	TCase *tc_pool = RV_TEST_TCASE("pool", 60, pool_concurrent_threads,
				       pool_limit_and_acquire_timeout, pool_survives_server_outage);
	TCase *tc_migrate =
		RV_TEST_TCASE("migrate", 60, migrate_numeric_order_once,
			      migrate_changed_file_is_an_error, migrate_failing_file_is_rolled_back,
			      migrate_concurrent_applies_once, fresh_db_isolated_and_migrated);
	tcase_add_checked_fixture(tc_migrate, mig_setup, mig_teardown);
	return RV_TEST_SUITE("db", tc_exec, tc_pool, tc_migrate);
}

RV_TEST_MAIN_PG(db_suite)
