/*
 * pgserver.h: a private PostgreSQL cluster in a folder of ours.
 *
 * Used by rover-brain when no --db is given, and by the test fixture.  On
 * first start it runs initdb; then pg_ctl start with the unix socket in the
 * data folder's parent (a private -k folder), listen_addresses='' (no TCP).
 * When run as root, initdb/pg_ctl run as the user postgres (common/proc drops
 * to its uid/gid) and the folders are chowned to postgres.  The binaries are
 * found in /usr/lib/postgresql/<newest>/bin unless ROVER_PG_BINDIR is set.
 * Not thread-safe: one thread at a time per struct (main, or the thread
 * that supervises the server once main handed it over).
 */
#ifndef RV_PGSERVER_H
#define RV_PGSERVER_H

#include <sys/types.h>

#include "err.h"

struct rv_pgserver {
	char dir[512];       /* the folder given: holds pgdata/, the socket and log */
	char datadir[600];   /* dir/pgdata */
	char sockdir[600];   /* dir (socket lives here) */
	char logfile[600];   /* dir/postgres.log */
	char conninfo[1024]; /* "host=<sockdir> port=<port> dbname=rover user=<user>" */
	int port;            /* port number used for the socket name (no TCP) */
	int started;         /* 1 when this process started it (and so must stop it) */
};

/* Create dir if needed, initdb if no cluster is there, start the server if not
 * already running, wait until it accepts connections (timeout_s), create the
 * database "rover" if missing.  Fills *srv.  Returns 0 or a negative errno
 * with the reason (including the tail of the server log) in *err. */
int rv_pgserver_start(struct rv_pgserver *srv, const char *dir, int timeout_s, struct rv_err *err);

/* The live postmaster's pid (read from postmaster.pid, checked with
 * kill(pid, 0)), or 0 when none runs.  It is not our child (pg_ctl
 * detaches it): watch it with pidfd_open. */
pid_t rv_pgserver_pid(const struct rv_pgserver *srv);

/* Start the cluster again after it stopped or crashed: as rv_pgserver_start
 * on srv->dir (PostgreSQL runs its crash recovery on start).  It fails
 * while backends of a killed postmaster still hold its shared memory: call
 * again after a pause.  0 or a negative errno with the log's tail in *err. */
int rv_pgserver_restart(struct rv_pgserver *srv, int timeout_s, struct rv_err *err);

/* Stop it (pg_ctl stop -m fast) when this process started it.  Idempotent. */
int rv_pgserver_stop(struct rv_pgserver *srv);

/* Immediate stop regardless of who started it (tests simulate an outage). */
int rv_pgserver_kill(struct rv_pgserver *srv);

#endif
