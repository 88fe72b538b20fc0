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
/* The sql/ folder (ROVER_SQL_DIR or ./sql). */
const char *rv_test_sql_dir(void);
/* Stop/start the server (to test outages); start waits until it is ready. */
int rv_test_pg_stop_server(void);
int rv_test_pg_start_server(void);

#endif
