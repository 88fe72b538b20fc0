/*
 * db.h: PostgreSQL access over libpq.
 *
 * A fixed-size connection pool; each PGconn is used by one thread at a time
 * (acquire -> use -> release).  SQL goes only through PQexecParams
 * (rv_db_exec), never built with sprintf.  SQLSTATE maps to errno in one place:
 * 23505 -> -EEXIST, 23503 -> -ENOENT, 22xxx/23xxx other -> -EINVAL,
 * 40001/40P01 -> -EAGAIN, lost connection / server down -> -ECONNRESET,
 * statement timeout 57014 -> -ETIMEDOUT, read-only 25006 -> -EROFS, disk full
 * 53100 -> -ENOSPC.
 * Thread-safe: the pool has its own mutex; connections are never shared.
 */
#ifndef RV_DB_H
#define RV_DB_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

struct rv_db_pool;

struct rv_db_pool_opts {
	const char *conninfo;     /* libpq conninfo string */
	int size;                 /* connections, >= 1 */
	int connect_timeout_s;    /* per connection attempt (default 5) */
	int statement_timeout_ms; /* SET statement_timeout on each connection (0: none) */
	int acquire_timeout_ms;   /* how long rv_db_acquire waits for a free slot */
	/* After a failed connect, acquires that would connect fail at once
	 * (with the last reason) for a back-off that starts here and doubles
	 * on each failure up to the max; a good connect resets it (defaults
	 * 50 and 2000 ms).  A server that is down costs one connect attempt
	 * per back-off, not one per request. */
	int reconnect_backoff_ms;
	int reconnect_backoff_max_ms;
};

/* Create a pool.  Connections open lazily, so this succeeds even while the server
 * is down.  Returns NULL only when out of memory.  Free with rv_db_pool_free. */
struct rv_db_pool *rv_db_pool_new(const struct rv_db_pool_opts *opts);
struct rv_db_pool *rv_db_pool_free(struct rv_db_pool *pool);

/* Borrow a live connection (reconnects a broken one).  Returns NULL on failure with
 * *err set (-ECONNREFUSED with libpq's reason when the server is down or the
 * reconnect back-off runs, -ETIMEDOUT when every slot stays busy).  Return it
 * with rv_db_release. */
PGconn *rv_db_acquire(struct rv_db_pool *pool, struct rv_err *err);
/* Give a connection back; a connection in a bad state or an open transaction
 * is reset/closed so the next user gets a clean one.  conn may be NULL. */
void rv_db_release(struct rv_db_pool *pool, PGconn *conn);

/* Run one parameterised statement (text params, NULL entry = SQL NULL).
 * On success returns the number of rows (tuples or affected rows) and, when
 * res is not NULL, hands the result to the caller (PQclear it).  On failure
 * returns a negative errno from the SQLSTATE with the server's message in *err. */
int rv_db_exec(PGconn *conn, const char *sql, int nparams, const char *const *params,
	       PGresult **res, struct rv_err *err);

/* One statement of rv_db_exec_pipeline.  sql and params are borrowed; res
 * (when the statement succeeded and want_res is set) is the caller's to
 * PQclear; rows as rv_db_exec returns them.  prepare: sql is a string
 * constant (known by its address) that a pool connection parses and plans
 * once, the first time it runs it, and then runs prepared (the server's
 * plan cache), as long as the connection lives. */
struct rv_db_stmt {
	const char *sql;
	int nparams;
	const char *const *params;
	bool want_res;
	bool prepare;
	PGresult *res;
	int rows;
	int prepare_id; /* rv_db_exec_pipeline's own */
};

/* Run n statements in one round trip (libpq's pipeline mode, one sync):
 * the statements run in order as if by rv_db_exec one after the other.
 * Returns 0 when every one succeeded, else the first failure's negative
 * errno with its message in *err (*failed, when not NULL, its index; the
 * later statements were not run).  Inside a transaction a failure leaves it
 * aborted, as one statement's failure does.  Results of statements that
 * succeeded are handed over as said above even when a later one failed. */
int rv_db_exec_pipeline(PGconn *conn, struct rv_db_stmt *s, int n, int *failed, struct rv_err *err);

/* COPY ... FROM STDIN: copy_sql is a constant statement; data holds text-format
 * rows (tab-separated, newline-terminated) built by the caller, with text
 * fields escaped by rv_db_copy_text.  Data is never parsed as SQL.  Returns the
 * number of rows copied or a negative errno as rv_db_exec does. */
int rv_db_copy_in(PGconn *conn, const char *copy_sql, const char *data, size_t len,
		  struct rv_err *err);
struct rv_buf;
/* Append s to b escaped for COPY text format (backslash, tab, newline, CR). */
void rv_db_copy_text(struct rv_buf *b, const char *s);

/* BEGIN / COMMIT / ROLLBACK helpers (rollback never fails loudly). */
int rv_db_begin(PGconn *conn, struct rv_err *err);
int rv_db_commit(PGconn *conn, struct rv_err *err);
void rv_db_rollback(PGconn *conn);

/* SQLSTATE (5 chars) -> negative errno as described above. */
int rv_db_sqlstate_errno(const char *sqlstate);

/* Apply sql/NNN_*.sql files from dir in numeric order, each in its own
 * transaction, recording (version, name, checksum) in rover_schema_version.
 * Serialised by a session advisory lock so two brains starting together never
 * both apply one.  Already applied versions are skipped.  Returns the number
 * applied. */
int rv_db_migrate(PGconn *conn, const char *dir, struct rv_err *err);

struct rv_db_pool_stats {
	int size, in_use, connected;
	uint64_t acquires, acquire_failures, exec_errors;
	uint64_t connects, connect_failures; /* connect attempts made, and failed */
};
void rv_db_pool_stats(struct rv_db_pool *pool, struct rv_db_pool_stats *out);

/* Destructors behind RV_CLEANUP_PGCONN / RV_CLEANUP_PGRESULT (cleanup.h);
 * both accept a NULL handle. */
static inline void rv_db_finishp(PGconn **c)
{
	if (*c)
		PQfinish(*c);
}

static inline void rv_db_clearp(PGresult **r)
{
	if (*r)
		PQclear(*r);
}

#endif
