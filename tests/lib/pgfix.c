/*
 * pgfix.c: the PostgreSQL test fixture.
 *
 * rv_test_pg_global_start() runs once in the test binary's parent, before
 * check forks: it starts a private cluster in a temp folder under /tmp (or
 * uses ROVER_TEST_PG) and the forked tests inherit the state below.  Each test
 * then asks for its own database.  State is process-global on purpose (tests
 * only); the fixture is not thread-safe, call it from the test's main thread.
 */
#include "pgfix.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <ftw.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "db.h"
#include "pgserver.h"
#include "proc.h"
#include "testutil.h"

static struct rv_pgserver pg_srv;
static char pg_tmpdir[64];
static char pg_admin[1024];  /* conninfo of the maintenance database */
static int pg_external;      /* ROVER_TEST_PG given: not ours to stop */
static int pg_ready;

/* base with dbname replaced, written to out (libpq conninfo quoting). */
static int conninfo_with_db(const char *base, const char *dbname, char *out, size_t size)
{
	char *errmsg = NULL;
	PQconninfoOption *opts = PQconninfoParse(base, &errmsg);
	if (!opts) {
		fprintf(stderr, "pgfix: bad conninfo \"%s\": %s\n", base, errmsg ? errmsg : "");
		PQfreemem(errmsg);
		return -EINVAL;
	}
	size_t n = 0;
	out[0] = '\0';
	for (PQconninfoOption *o = opts; o->keyword; o++) {
		const char *v = strcmp(o->keyword, "dbname") == 0 ? dbname : o->val;
		if (!v)
			continue;
		n += (size_t)snprintf(out + n, n < size ? size - n : 0, "%s%s='", n ? " " : "",
				      o->keyword);
		for (const char *p = v; *p && n + 3 < size; p++) {
			if (*p == '\'' || *p == '\\')
				out[n++] = '\\';
			out[n++] = *p;
		}
		if (n + 2 > size) {
			PQconninfoFree(opts);
			return -ENAMETOOLONG;
		}
		out[n++] = '\'';
		out[n] = '\0';
	}
	PQconninfoFree(opts);
	return 0;
}

static void remove_tmpdir(void)
{
	if (pg_tmpdir[0])
		rv_test_rm_rf(pg_tmpdir);
	pg_tmpdir[0] = '\0';
}

/* The write end every watchdog of this process waits on; never written,
 * close-on-exec, so only this process and its forks hold it. */
static int reaper_wfd = -1, reaper_rfd = -1;
static pid_t reaper_owner;

static const char reaper_script[] =
	/* $1 pgdata, $2 folder to remove; stdin the pipe: EOF once the test
	 * process and its forks are gone. */
	"read -r _\n"
	"exec </dev/null\n"
	"pid=$(head -n 1 \"$1/postmaster.pid\" 2>/dev/null)\n"
	"if [ -n \"$pid\" ] && tr '\\0' '\\n' < /proc/$pid/cmdline 2>/dev/null |"
	" grep -qxF -- \"$1\"; then\n"
	"  kill -QUIT \"$pid\" 2>/dev/null\n"
	"  i=0\n"
	"  while kill -0 \"$pid\" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done\n"
	"  if kill -0 \"$pid\" 2>/dev/null; then\n"
	"    pkill -KILL -P \"$pid\"; kill -KILL \"$pid\" 2>/dev/null\n"
	"  fi\n"
	"fi\n"
	"[ -z \"$2\" ] || rm -rf -- \"$2\"\n";

int rv_test_pg_reaper(const char *pgdata, const char *remove_dir)
{
	if (reaper_wfd < 0 || reaper_owner != getpid()) {
		/* A fork watches its own lifetime, not its parent's. */
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0)
			return -errno;
		if (reaper_wfd >= 0) {
			close(reaper_wfd); /* the parent's, inherited */
			close(reaper_rfd);
		}
		reaper_wfd = p[1];
		reaper_rfd = p[0]; /* kept to hand to each watchdog */
		reaper_owner = getpid();
	}
	/* The watchdog reads the pipe on its stdin; common/proc closes every
	 * other fd and puts it in a session of its own.  It is never waited
	 * for here: it ends after this process does. */
	const char *argv[] = { "/bin/sh",     "-c",
			       reaper_script, "rover-pg-reaper",
			       pgdata,        remove_dir ? remove_dir : "",
			       NULL };
	struct rv_proc_opts o = {
		.argv = argv,
		.io = { { RV_PROC_FD, reaper_rfd }, { RV_PROC_NULL, -1 }, { RV_PROC_NULL, -1 } },
		.group = RV_PROC_NEW_SESSION
	};
	struct rv_proc w;
	int rc = rv_proc_spawn(&w, &o);
	if (rc == 0)
		rv_proc_release(&w);
	return rc;
}

const char *rv_test_pg_datadir(void)
{
	return pg_external ? "" : pg_srv.datadir;
}

int rv_test_pg_global_start(void)
{
	const char *ext = getenv("ROVER_TEST_PG");
	const char *ci = getenv("CI");
	int in_ci = ci && strcmp(ci, "true") == 0;
	if (ext && *ext) {
		if (conninfo_with_db(ext, "postgres", pg_admin, sizeof(pg_admin)) < 0)
			return -EINVAL;
		if (PQping(pg_admin) != PQPING_OK) {
			fprintf(stderr, "pgfix: ROVER_TEST_PG=\"%s\" does not answer\n", ext);
			return -ECONNREFUSED;
		}
		pg_external = 1;
		pg_ready = 1;
		return 0;
	}

	snprintf(pg_tmpdir, sizeof(pg_tmpdir), "/tmp/rover-test-pg-XXXXXX");
	if (!mkdtemp(pg_tmpdir)) {
		fprintf(stderr, "pgfix: could not create a temp folder: %s\n", strerror(errno));
		pg_tmpdir[0] = '\0';
		return -errno;
	}
	/* Test clusters are thrown away: no fsync (never set for the daemon). */
	setenv("ROVER_PG_NOSYNC", "1", 0);
	struct rv_err err = { 0 };
	int r = rv_pgserver_start(&pg_srv, pg_tmpdir, 60, &err);
	if (r < 0) {
		if (in_ci)
			fprintf(stderr, "pgfix: CI=true and PostgreSQL is required, but %s\n",
				err.msg);
		else
			fprintf(stderr, "pgfix: these tests need PostgreSQL (install postgresql, "
					"or set ROVER_TEST_PG to a conninfo): %s\n",
				err.msg);
		remove_tmpdir();
		return r;
	}
	if (conninfo_with_db(pg_srv.conninfo, "postgres", pg_admin, sizeof(pg_admin)) < 0) {
		rv_pgserver_stop(&pg_srv);
		remove_tmpdir();
		return -EINVAL;
	}
	if (rv_test_pg_reaper(pg_srv.datadir, pg_tmpdir) < 0)
		fprintf(stderr, "pgfix: could not start the cluster's watchdog: %s\n",
			strerror(errno));
	pg_ready = 1;
	return 0;
}

void rv_test_pg_global_stop(void)
{
	if (!pg_external && pg_tmpdir[0]) {
		/* A test may have restarted it in a child: stop whatever runs there. */
		pg_srv.started = 1;
		rv_pgserver_stop(&pg_srv);
		remove_tmpdir();
	}
	pg_ready = 0;
}

const char *rv_test_pg_admin_conninfo(void)
{
	return pg_admin;
}

const char *rv_test_sql_dir(void)
{
	const char *d = getenv("ROVER_SQL_DIR");
	return d && *d ? d : "./sql";
}

static int valid_db_name(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return 0;
	return 1;
}

int rv_test_pg_fresh_db(int migrate, char *conninfo, size_t size)
{
	if (!pg_ready) {
		fprintf(stderr, "pgfix: rv_test_pg_global_start was not called\n");
		return -EINVAL;
	}
	/* A previous test may have left the server stopped (an outage test that failed). */
	if (!pg_external && PQping(pg_admin) == PQPING_NO_RESPONSE && rv_test_pg_start_server() < 0)
		return -ECONNREFUSED;

	static unsigned seq;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	char name[64];
	snprintf(name, sizeof(name), "rv_test_%ld_%u_%ld", (long)getpid(), ++seq,
		 (long)(ts.tv_nsec % 1000000));
	if (!valid_db_name(name))
		return -EINVAL;

	PGconn *c = PQconnectdb(pg_admin);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "pgfix: could not connect to \"%s\": %s", pg_admin, PQerrorMessage(c));
		PQfinish(c);
		return -ECONNREFUSED;
	}
	/*
	 * CREATE DATABASE is a utility statement and takes no bind parameters, so
	 * the name has to be part of the SQL text.  It is generated above, checked
	 * to be [a-z0-9_] only, and still quoted with PQescapeIdentifier so the
	 * text can never be anything but one identifier.
	 */
	char *ident = PQescapeIdentifier(c, name, strlen(name));
	if (!ident) {
		PQfinish(c);
		return -ENOMEM;
	}
	char sql[160];
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s TEMPLATE template0", ident);
	PQfreemem(ident);
	PGresult *res = PQexecParams(c, sql, 0, NULL, NULL, NULL, NULL, 0);
	int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	if (!ok)
		fprintf(stderr, "pgfix: could not create database %s: %s", name, PQerrorMessage(c));
	PQclear(res);
	PQfinish(c);
	if (!ok)
		return -EIO;

	const char *base = pg_external ? pg_admin : pg_srv.conninfo;
	int r = conninfo_with_db(base, name, conninfo, size);
	if (r < 0 || !migrate)
		return r;

	c = PQconnectdb(conninfo);
	struct rv_err err = { 0 };
	r = PQstatus(c) == CONNECTION_OK ? rv_db_migrate(c, rv_test_sql_dir(), &err) : -ECONNREFUSED;
	if (r < 0)
		fprintf(stderr, "pgfix: could not migrate %s from \"%s\": %s%s\n", name,
			rv_test_sql_dir(), err.msg, PQstatus(c) == CONNECTION_OK ? "" : PQerrorMessage(c));
	PQfinish(c);
	return r < 0 ? r : 0;
}

int rv_test_pg_stop_server(void)
{
	if (pg_external)
		return -ENOTSUP;
	pg_srv.started = 1;
	return rv_pgserver_stop(&pg_srv);
}

int rv_test_pg_kill_server(void)
{
	if (pg_external)
		return -ENOTSUP;
	pg_srv.started = 1;
	return rv_pgserver_kill(&pg_srv);
}

int rv_test_pg_start_server(void)
{
	if (pg_external)
		return -ENOTSUP;
	struct rv_err err = { 0 };
	int r = rv_pgserver_start(&pg_srv, pg_tmpdir, 60, &err);
	if (r < 0)
		fprintf(stderr, "pgfix: could not restart postgresql: %s\n", err.msg);
	return r;
}

const char *rv_test_sql_value(const char *conninfo, const char *sql, char *out, size_t size)
{
	PGconn *c = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "connect: %s", PQerrorMessage(c));
	PGresult *r = PQexecParams(c, sql, 0, NULL, NULL, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK,
		      "%s: %s", sql, PQerrorMessage(c));
	out[0] = '\0';
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0)
		snprintf(out, size, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	PQfinish(c);
	return out;
}
