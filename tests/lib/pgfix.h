/*
 * pgfix.h: the PostgreSQL test fixture: one private cluster per test binary,
 * a fresh database per test.
 *
 * rv_test_pg_global_start() runs in the test binary's parent before check
 * forks: it starts a cluster in a temp folder (tests/lib uses common/pgserver),
 * or reuses ROVER_TEST_PG (a conninfo) when set.  Without PostgreSQL installed
 * it fails loudly when CI=true and otherwise prints why and fails too (never a
 * silent skip).  rv_test_pg_fresh_db() creates an empty database with every
 * sql/ migration applied and returns its conninfo, so tests never see each
 * other's rows.
 *
 * A test process killed before its teardown (kill -9, a timeout, a crash)
 * must not leave a PostgreSQL behind: rv_test_pg_reaper() starts a
 * watchdog for a cluster's data folder that outlives the process and, once
 * the process and every fork of it are gone, stops that cluster's
 * postmaster (if it still runs) and removes a folder.  The private cluster
 * has one; brainfix starts one for each brain run with --data-dir.
 */
#ifndef RV_PGFIX_H
#define RV_PGFIX_H

#include <stddef.h>

int rv_test_pg_global_start(void);
void rv_test_pg_global_stop(void);
/* conninfo of the server's maintenance database ("postgres"). */
const char *rv_test_pg_admin_conninfo(void);
/* Create a new database (migrated when migrate != 0); write its conninfo. */
int rv_test_pg_fresh_db(int migrate, char *conninfo, size_t size);
/* The first value of sql's first row in the database at conninfo into
 * out ("" when no row); out.  Called from a test: a failed connect or
 * statement fails it. */
const char *rv_test_sql_value(const char *conninfo, const char *sql, char *out, size_t size);
/* The sql/ folder (ROVER_SQL_DIR or ./sql). */
const char *rv_test_sql_dir(void);
/* The private cluster's data folder ("" with ROVER_TEST_PG). */
const char *rv_test_pg_datadir(void);
/* Watch this process: when it and all its forks have exited, stop the
 * postmaster of pgdata if one runs there (SIGQUIT, then SIGKILL after 5 s)
 * and remove remove_dir (may be NULL).  The watchdog is a shell in its own
 * session holding no descriptor of ours but the pipe it waits on.
 * 0 or a negative errno. */
int rv_test_pg_reaper(const char *pgdata, const char *remove_dir);
/* Stop/start the server (to test outages); start waits until it is ready. */
int rv_test_pg_stop_server(void);
int rv_test_pg_start_server(void);
/* Stop it as a crash would (pg_ctl stop -m immediate: no checkpoint, the
 * next start recovers from the WAL). */
int rv_test_pg_kill_server(void);

#endif
