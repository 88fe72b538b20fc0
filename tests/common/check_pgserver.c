/*
 * check_pgserver.c: the private PostgreSQL cluster (common/pgserver.c).
 *
 * Each test starts its own cluster in a fresh temp folder, so these tests do
 * not use the shared fixture; they stop the server and remove the folder at
 * the end.
 */
#include <ftw.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pgserver.h"
#include "testutil.h"

static char tmpdir[64];

static void setup(void)
{
	setenv("ROVER_PG_NOSYNC", "1", 1);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rover-check-pgserver-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
	rv_test_rm_rf(tmpdir);
}

/* Run sql on conninfo, return the first value of the first row (static buffer). */
static const char *query1(const char *conninfo, const char *sql)
{
	static char val[256];
	return rv_test_sql_value(conninfo, sql, val, sizeof(val));
}

START_TEST(start_fresh_folder_creates_cluster)
{
	char dir[128];
	snprintf(dir, sizeof(dir), "%s/brain/pg", tmpdir);
	struct rv_pgserver srv;
	struct rv_err err = { 0 };
	int r = rv_pgserver_start(&srv, dir, 60, &err);
	ck_assert_msg(r == 0, "start: %d %s", r, err.msg);
	ck_assert_int_eq(srv.started, 1);
	ck_assert_ptr_nonnull(strstr(srv.conninfo, "dbname='rover'"));
	ck_assert_str_eq(query1(srv.conninfo, "SELECT current_database()"), "rover");
	ck_assert_str_eq(query1(srv.conninfo, "SELECT 6 * 7"), "42");
	/* unix socket only: no TCP listener */
	ck_assert_str_eq(query1(srv.conninfo, "SHOW listen_addresses"), "");
	ck_assert_int_eq(access(srv.logfile, F_OK), 0);
	ck_assert_int_eq(rv_pgserver_stop(&srv), 0);
	ck_assert_int_eq(srv.started, 0);
	ck_assert_int_eq(PQping(srv.conninfo), PQPING_NO_RESPONSE);
	/* stop is idempotent */
	ck_assert_int_eq(rv_pgserver_stop(&srv), 0);
}
END_TEST

START_TEST(restart_keeps_data)
{
	struct rv_pgserver srv;
	struct rv_err err = { 0 };
	int r = rv_pgserver_start(&srv, tmpdir, 60, &err);
	ck_assert_msg(r == 0, "start: %d %s", r, err.msg);
	query1(srv.conninfo, "CREATE TABLE kept (v text)");
	query1(srv.conninfo, "INSERT INTO kept VALUES ('before restart')");
	ck_assert_int_eq(rv_pgserver_stop(&srv), 0);

	r = rv_pgserver_start(&srv, tmpdir, 60, &err);
	ck_assert_msg(r == 0, "restart: %d %s", r, err.msg);
	ck_assert_int_eq(srv.started, 1);
	ck_assert_str_eq(query1(srv.conninfo, "SELECT v FROM kept"), "before restart");

	/* an immediate stop (crash) loses nothing committed either */
	ck_assert_int_eq(rv_pgserver_kill(&srv), 0);
	ck_assert_int_eq(PQping(srv.conninfo), PQPING_NO_RESPONSE);
	r = rv_pgserver_start(&srv, tmpdir, 60, &err);
	ck_assert_msg(r == 0, "start after kill: %d %s", r, err.msg);
	ck_assert_str_eq(query1(srv.conninfo, "SELECT count(*) FROM kept"), "1");
	ck_assert_int_eq(rv_pgserver_stop(&srv), 0);
}
END_TEST

START_TEST(start_on_running_folder_reuses_it)
{
	struct rv_pgserver a, b;
	struct rv_err err = { 0 };
	int r = rv_pgserver_start(&a, tmpdir, 60, &err);
	ck_assert_msg(r == 0, "start: %d %s", r, err.msg);
	query1(a.conninfo, "CREATE TABLE shared_t (v int)");
	query1(a.conninfo, "INSERT INTO shared_t VALUES (7)");

	r = rv_pgserver_start(&b, tmpdir, 60, &err);
	ck_assert_msg(r == 0, "second start: %d %s", r, err.msg);
	ck_assert_int_eq(b.started, 0);
	ck_assert_str_eq(b.conninfo, a.conninfo);
	ck_assert_str_eq(query1(b.conninfo, "SELECT v FROM shared_t"), "7");
	/* b did not start it, so b's stop leaves it running */
	ck_assert_int_eq(rv_pgserver_stop(&b), 0);
	ck_assert_int_eq(PQping(a.conninfo), PQPING_OK);
	ck_assert_int_eq(rv_pgserver_stop(&a), 0);
	ck_assert_int_eq(PQping(a.conninfo), PQPING_NO_RESPONSE);
}
END_TEST

START_TEST(failed_start_reports_server_log)
{
	struct rv_pgserver srv;
	struct rv_err err = { 0 };
	int r = rv_pgserver_start(&srv, tmpdir, 60, &err);
	ck_assert_msg(r == 0, "start: %d %s", r, err.msg);
	ck_assert_int_eq(rv_pgserver_stop(&srv), 0);
	char conf[700];
	snprintf(conf, sizeof(conf), "%s/postgresql.conf", srv.datadir);
	FILE *f = fopen(conf, "a");
	ck_assert_ptr_nonnull(f);
	fputs("shared_buffers = 'not a size'\n", f);
	fclose(f);
	r = rv_pgserver_start(&srv, tmpdir, 20, &err);
	ck_assert_int_lt(r, 0);
	ck_assert_int_eq(err.code, r);
	/* the reason comes from the server log, not just "pg_ctl failed" */
	ck_assert_msg(strstr(err.msg, "shared_buffers") != NULL, "msg: %s", err.msg);
	ck_assert_ptr_null(strchr(err.msg, '\n'));
}
END_TEST

START_TEST(bad_bindir_is_a_clear_error)
{
	setenv("ROVER_PG_BINDIR", "/nonexistent/pg/bin", 1);
	struct rv_pgserver srv;
	struct rv_err err = { 0 };
	int r = rv_pgserver_start(&srv, tmpdir, 10, &err);
	ck_assert_int_eq(r, -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/pg/bin"));
	unsetenv("ROVER_PG_BINDIR");
}
END_TEST

RV_TEST_MAIN_FIXTURE_TCASE("pgserver", setup, teardown, "cluster", 60,
			   start_fresh_folder_creates_cluster, restart_keeps_data,
			   start_on_running_folder_reuses_it, failed_start_reports_server_log,
			   bad_bindir_is_a_clear_error)
