/*
 * db.c: the libpq connection pool, statement execution, the SQLSTATE -> errno
 * mapping and schema migrations.
 *
 * Used by the brain (store.c) and by the test fixture.  The pool is a fixed
 * array of slots guarded by one mutex; a slot's PGconn belongs to exactly one
 * thread between rv_db_acquire and rv_db_release, and connecting, probing and
 * resetting happen outside the mutex.  Results handed out by rv_db_exec are
 * the caller's to PQclear.
 */
#include "clock.h"
#include "db.h"
#include "buf.h"

#include <dirent.h>
#include <fcntl.h>
#include <libpq-events.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"

#define DB_DEFAULT_CONNECT_TIMEOUT_S  5
#define DB_DEFAULT_ACQUIRE_TIMEOUT_MS 5000
#define DB_DEFAULT_BACKOFF_MS         50
#define DB_DEFAULT_BACKOFF_MAX_MS     2000
/* pg_advisory_lock key serialising migrations: "rover" in ASCII. */
#define DB_MIGRATE_LOCK_KEY           "495874155890"
#define DB_MIGRATE_MAX_FILES          4096
#define DB_MIGRATE_MAX_BYTES          (16 << 20)

struct db_slot {
	PGconn *conn; /* NULL until first use or after a broken connection */
	int in_use;
};

struct rv_db_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* signalled when a slot is released */
	char *conninfo;
	int size, connect_timeout_s, statement_timeout_ms, acquire_timeout_ms;
	struct db_slot *slots;
	uint64_t acquires, acquire_failures;
	uint64_t exec_errors; /* atomic: rv_db_exec has no lock to take */
	/* Reconnect back-off, under mu: no connect is tried before retry_at_ms
	 * (monotonic); backoff_ms is the current pause, 0 while connects work. */
	int backoff_min_ms, backoff_max_ms, backoff_ms;
	int64_t retry_at_ms;
	char down_why[sizeof(((struct rv_err *)0)->msg)];
	uint64_t connects, connect_failures;
};

/* What a pool connection carries beside its PGconn: its pool (for
 * exec_errors) and the statements prepared on it, each under the name
 * "rv<id>" (ids never reused on a connection, so a name whose prepare
 * failed can never clash with a later one). */
enum { DB_PREPARED_MAX = 32 };
struct db_conn {
	struct rv_db_pool *pool;
	int nprepared, next_id;
	struct {
		const char *sql; /* the caller's constant: compared by address */
		int id;
	} prepared[DB_PREPARED_MAX];
};

/*
 * libpq event procedure: registering it on a pool connection lets rv_db_exec
 * find its struct db_conn from the PGconn alone, through PQinstanceData,
 * without a lookup table.  A reset connection has no prepared statements.
 */
static int db_event_proc(PGEventId id, void *info, void *pass)
{
	if (id == PGEVT_REGISTER) {
		PGEventRegister *reg = info;
		struct db_conn *dc = calloc(1, sizeof(*dc));
		if (!dc)
			return 0;
		dc->pool = pass;
		PQsetInstanceData(reg->conn, db_event_proc, dc);
	} else if (id == PGEVT_CONNRESET) {
		struct db_conn *dc =
			PQinstanceData(((PGEventConnReset *)info)->conn, db_event_proc);
		if (dc)
			dc->nprepared = 0;
	} else if (id == PGEVT_CONNDESTROY) {
		free(PQinstanceData(((PGEventConnDestroy *)info)->conn, db_event_proc));
	}
	return 1;
}

static void db_notice_quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/* libpq's messages end in newlines and may span lines; err->msg is one line. */
static void one_line(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
	size_t n = strlen(dst);
	while (n && (dst[n - 1] == '\n' || dst[n - 1] == ' '))
		dst[--n] = '\0';
	for (char *p = dst; *p; p++)
		if (*p == '\n' || *p == '\t')
			*p = ' ';
}

int rv_db_sqlstate_errno(const char *s)
{
	if (!s || strlen(s) != 5)
		return -EIO;
	if (!strcmp(s, "23505"))
		return -EEXIST;
	if (!strcmp(s, "23503"))
		return -ENOENT;
	if (!strncmp(s, "22", 2) || !strncmp(s, "23", 2))
		return -EINVAL;
	if (!strcmp(s, "40001") || !strcmp(s, "40P01"))
		return -EAGAIN;
	if (!strcmp(s, "57014"))
		return -ETIMEDOUT;
	/* 25006: a write on a server (or session) that is read-only now */
	if (!strcmp(s, "25006"))
		return -EROFS;
	/* 53100: disk full (a relation or a temp file could not grow) */
	if (!strcmp(s, "53100"))
		return -ENOSPC;
	/* 08: connection exception; 57P01-57P03: admin/crash shutdown, cannot connect now */
	if (!strncmp(s, "08", 2) || !strcmp(s, "57P01") || !strcmp(s, "57P02") ||
	    !strcmp(s, "57P03"))
		return -ECONNRESET;
	return -EIO;
}

struct rv_db_pool *rv_db_pool_new(const struct rv_db_pool_opts *opts)
{
	struct rv_db_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->size = opts->size >= 1 ? opts->size : 1;
	p->connect_timeout_s = opts->connect_timeout_s > 0 ? opts->connect_timeout_s
							   : DB_DEFAULT_CONNECT_TIMEOUT_S;
	p->statement_timeout_ms = opts->statement_timeout_ms > 0 ? opts->statement_timeout_ms : 0;
	p->acquire_timeout_ms = opts->acquire_timeout_ms > 0 ? opts->acquire_timeout_ms
							     : DB_DEFAULT_ACQUIRE_TIMEOUT_MS;
	p->backoff_min_ms = opts->reconnect_backoff_ms > 0 ? opts->reconnect_backoff_ms
							   : DB_DEFAULT_BACKOFF_MS;
	p->backoff_max_ms = opts->reconnect_backoff_max_ms > 0 ? opts->reconnect_backoff_max_ms
							       : DB_DEFAULT_BACKOFF_MAX_MS;
	if (p->backoff_max_ms < p->backoff_min_ms)
		p->backoff_max_ms = p->backoff_min_ms;
	p->conninfo = strdup(opts->conninfo ? opts->conninfo : "");
	p->slots = calloc((size_t)p->size, sizeof(*p->slots));
	if (!p->conninfo || !p->slots || rv_cond_init_mono(&p->cv) != 0)
		goto fail;
	if (pthread_mutex_init(&p->mu, NULL) != 0) {
		pthread_cond_destroy(&p->cv);
		goto fail;
	}
	return p;
fail:
	free(p->conninfo);
	free(p->slots);
	free(p);
	return NULL;
}

/* Every connection must have been released first. */
struct rv_db_pool *rv_db_pool_free(struct rv_db_pool *pool)
{
	if (!pool)
		return NULL;
	for (int i = 0; i < pool->size; i++)
		if (pool->slots[i].conn)
			PQfinish(pool->slots[i].conn);
	pthread_mutex_destroy(&pool->mu);
	pthread_cond_destroy(&pool->cv);
	free(pool->slots);
	free(pool->conninfo);
	free(pool);
	return NULL;
}

/* Open a new connection for the pool: NULL with *err set when it fails. */
static PGconn *db_connect(struct rv_db_pool *pool, struct rv_err *err)
{
	char timeout[16];
	snprintf(timeout, sizeof(timeout), "%d", pool->connect_timeout_s);
	/* expand_dbname: the conninfo string is parsed; later keywords add to it. */
	const char *keys[] = { "dbname", "connect_timeout", "fallback_application_name", NULL };
	const char *vals[] = { pool->conninfo, timeout, "rover", NULL };
	RV_CLEANUP_PGCONN PGconn *c = PQconnectdbParams(keys, vals, 1);
	char why[400];
	if (!c) {
		rv_err_set(err, -ENOMEM, NULL, "could not connect to the database: out of memory");
		return NULL;
	}
	if (PQstatus(c) != CONNECTION_OK) {
		one_line(why, sizeof(why), PQerrorMessage(c));
		rv_err_set(err, -ECONNREFUSED, NULL, "could not connect to the database: %s", why);
		return NULL;
	}
	if (pool->statement_timeout_ms > 0) {
		char ms[16];
		snprintf(ms, sizeof(ms), "%d", pool->statement_timeout_ms);
		const char *params[] = { ms };
		RV_CLEANUP_PGRESULT PGresult *res =
			PQexecParams(c, "SELECT set_config('statement_timeout', $1, false)", 1,
				     NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK) {
			one_line(why, sizeof(why), PQerrorMessage(c));
			rv_err_set(err, -ECONNRESET, NULL, "could not set statement_timeout: %s",
				   why);
			return NULL;
		}
	}
	/* libpq prints notices on stderr by default; common/ stays quiet. */
	PQsetNoticeProcessor(c, db_notice_quiet, NULL);
	if (!PQregisterEventProc(c, db_event_proc, "rover-pool", pool)) {
		rv_err_set(err, -ENOMEM, NULL, "could not register the pool's libpq event proc");
		return NULL;
	}
	return RV_TAKE_PTR(c);
}

/*
 * An idle connection whose socket is readable has been told something by the
 * server (a FATAL "terminating connection" on shutdown) or hit EOF: both mean
 * it is dead even though PQstatus still says CONNECTION_OK.
 */
static int db_conn_usable(PGconn *c)
{
	if (PQstatus(c) != CONNECTION_OK || PQtransactionStatus(c) != PQTRANS_IDLE)
		return 0;
	/* A shutdown arrives as an ErrorResponse then EOF: libpq notices the EOF
	 * only on a later read, so keep reading while there is something to read. */
	for (int i = 0; i < 8; i++) {
		struct pollfd p = { .fd = PQsocket(c), .events = POLLIN };
		if (p.fd < 0)
			return 0;
		int r = poll(&p, 1, 0);
		if (r == 0)
			break;
		if (r < 0 || !PQconsumeInput(c) || PQstatus(c) != CONNECTION_OK)
			return 0;
		/* Readable but still fine (a notification): drain it. */
		PGnotify *n;
		while ((n = PQnotifies(c)))
			PQfreemem(n);
		if (i == 7)
			return 0;
	}
	return 1;
}

PGconn *rv_db_acquire(struct rv_db_pool *pool, struct rv_err *err)
{
	struct timespec deadline;
	rv_mono_timespec(&deadline, rv_mono_ms() + pool->acquire_timeout_ms);

	pthread_mutex_lock(&pool->mu);
	struct db_slot *slot = NULL;
	for (;;) {
		/* Prefer a slot that is already connected. */
		for (int i = 0; i < pool->size; i++) {
			struct db_slot *s = &pool->slots[i];
			if (s->in_use)
				continue;
			if (!slot || (!slot->conn && s->conn))
				slot = s;
		}
		if (slot)
			break;
		int r = pthread_cond_timedwait(&pool->cv, &pool->mu, &deadline);
		if (r == ETIMEDOUT) {
			pool->acquire_failures++;
			pthread_mutex_unlock(&pool->mu);
			rv_err_set(
				err, -ETIMEDOUT, NULL,
				"could not acquire a database connection: all %d in use for %d ms",
				pool->size, pool->acquire_timeout_ms);
			return NULL;
		}
	}
	slot->in_use = 1;
	PGconn *c = slot->conn;
	slot->conn = NULL;
	pool->acquires++;
	pthread_mutex_unlock(&pool->mu);

	/* The slot is ours: probe and (re)connect without holding the mutex. */
	if (c && !db_conn_usable(c)) {
		PQfinish(c);
		c = NULL;
	}
	if (!c) {
		pthread_mutex_lock(&pool->mu);
		int64_t wait = pool->retry_at_ms - rv_mono_ms();
		if (wait > 0)
			rv_err_set(err, -ECONNREFUSED, NULL, "%s (next attempt in %lld ms)",
				   pool->down_why, (long long)wait);
		else
			pool->connects++;
		pthread_mutex_unlock(&pool->mu);
		if (wait <= 0) {
			struct rv_err cerr = { 0 };
			c = db_connect(pool, &cerr);
			pthread_mutex_lock(&pool->mu);
			if (c) {
				pool->backoff_ms = 0;
				pool->retry_at_ms = 0;
			} else {
				pool->connect_failures++;
				pool->backoff_ms = pool->backoff_ms ? pool->backoff_ms * 2
								    : pool->backoff_min_ms;
				if (pool->backoff_ms > pool->backoff_max_ms)
					pool->backoff_ms = pool->backoff_max_ms;
				pool->retry_at_ms = rv_mono_ms() + pool->backoff_ms;
				memcpy(pool->down_why, cerr.msg, sizeof(pool->down_why));
			}
			pthread_mutex_unlock(&pool->mu);
			if (!c && err)
				*err = cerr;
		}
	}

	pthread_mutex_lock(&pool->mu);
	slot->conn = c;
	if (!c) {
		slot->in_use = 0;
		pool->acquire_failures++;
		pthread_cond_signal(&pool->cv);
	}
	pthread_mutex_unlock(&pool->mu);
	return c;
}

void rv_db_release(struct rv_db_pool *pool, PGconn *conn)
{
	if (!conn)
		return;
	PGconn *orig = conn;
	/* Give the next user a clean session: no open transaction, no pending
	 * result, not left in pipeline mode by a broken pipeline. */
	switch (PQpipelineStatus(conn) != PQ_PIPELINE_OFF ? PQTRANS_UNKNOWN
							  : PQtransactionStatus(conn)) {
	case PQTRANS_IDLE:
		break;
	case PQTRANS_INTRANS:
	case PQTRANS_INERROR:
		rv_db_rollback(conn);
		if (PQtransactionStatus(conn) == PQTRANS_IDLE)
			break;
		/* fall through */
	default: /* ACTIVE (a result not read), UNKNOWN (broken) */
		PQfinish(conn);
		conn = NULL;
		break;
	}
	if (conn && PQstatus(conn) != CONNECTION_OK) {
		PQfinish(conn);
		conn = NULL;
	}

	pthread_mutex_lock(&pool->mu);
	for (int i = 0; i < pool->size; i++) {
		struct db_slot *s = &pool->slots[i];
		if (s->in_use && s->conn == orig) {
			s->conn = conn;
			s->in_use = 0;
			pthread_cond_signal(&pool->cv);
			break;
		}
	}
	pthread_mutex_unlock(&pool->mu);
}

/* Count, describe and map a failed result (r may be NULL). */
static int db_fail(PGconn *conn, const PGresult *r, struct rv_err *err)
{
	struct db_conn *dc = PQinstanceData(conn, db_event_proc);
	if (dc)
		__atomic_add_fetch(&dc->pool->exec_errors, 1, __ATOMIC_RELAXED);
	char why[400];
	one_line(why, sizeof(why), r ? PQresultErrorMessage(r) : PQerrorMessage(conn));
	if (!why[0])
		one_line(why, sizeof(why), PQerrorMessage(conn));
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	if (PQstatus(conn) != CONNECTION_OK || !state)
		return rv_err_set(err, -ECONNRESET, NULL,
				  "could not execute statement: connection lost: %s", why);
	return rv_err_set(err, rv_db_sqlstate_errno(state), NULL,
			  "could not execute statement: %s (sqlstate %s)", why, state);
}

int rv_db_exec(PGconn *conn, const char *sql, int nparams, const char *const *params,
	       PGresult **res, struct rv_err *err)
{
	if (res)
		*res = NULL;
	RV_CLEANUP_PGRESULT PGresult *r =
		PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(r);
	if (r && (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK || st == PGRES_EMPTY_QUERY)) {
		int rows = 0;
		if (st == PGRES_TUPLES_OK) {
			rows = PQntuples(r);
		} else {
			const char *t = PQcmdTuples(r);
			rows = t && *t ? (int)strtol(t, NULL, 10) : 0;
		}
		if (res)
			*res = RV_TAKE_PTR(r);
		return rows;
	}

	return db_fail(conn, r, err);
}

/* A result of a statement that ran: its row count, or db_fail's errno. */
static int stmt_rows(PGconn *conn, PGresult *r, struct rv_err *err)
{
	ExecStatusType st = PQresultStatus(r);
	if (st == PGRES_TUPLES_OK)
		return PQntuples(r);
	if (st == PGRES_COMMAND_OK || st == PGRES_EMPTY_QUERY) {
		const char *t = PQcmdTuples(r);
		return t && *t ? (int)strtol(t, NULL, 10) : 0;
	}
	return db_fail(conn, r, err);
}

/* Send s: prepared on conn under its name when s->prepare (first prepared
 * when it is not yet: *new_id the id it gets once that succeeded, else -1).
 * 1 sent, 0 not (the connection is lost). */
static int stmt_send(PGconn *conn, const struct rv_db_stmt *s, int *new_id)
{
	*new_id = -1;
	struct db_conn *dc = s->prepare ? PQinstanceData(conn, db_event_proc) : NULL;
	if (!dc)
		return PQsendQueryParams(conn, s->sql, s->nparams, NULL, s->params, NULL, NULL, 0);
	int id = -1;
	for (int k = 0; k < dc->nprepared && id < 0; k++)
		if (dc->prepared[k].sql == s->sql)
			id = dc->prepared[k].id;
	char name[16];
	if (id < 0) {
		if (dc->nprepared == DB_PREPARED_MAX) /* full: plain */
			return PQsendQueryParams(conn, s->sql, s->nparams, NULL, s->params, NULL,
						 NULL, 0);
		id = *new_id = dc->next_id++;
		snprintf(name, sizeof(name), "rv%d", id);
		if (PQsendPrepare(conn, name, s->sql, s->nparams, NULL) != 1)
			return 0;
	}
	snprintf(name, sizeof(name), "rv%d", id);
	return PQsendQueryPrepared(conn, name, s->nparams, s->params, NULL, NULL, 0);
}

/* The result of the prepare stmt_send sent for s (id): 0 and s remembered
 * as prepared on conn, or the failure's negative errno (described and
 * counted only when the pipeline had not failed before: ok). */
static int stmt_prepared(PGconn *conn, const struct rv_db_stmt *s, int id, bool ok,
			 struct rv_err *err)
{
	PGresult *r = PQgetResult(conn);
	int rc = 0;
	if (!r)
		return ok ? db_fail(conn, NULL, err) : -ECONNRESET;
	if (PQresultStatus(r) == PGRES_COMMAND_OK) {
		struct db_conn *dc = PQinstanceData(conn, db_event_proc);
		if (dc && dc->nprepared < DB_PREPARED_MAX) {
			dc->prepared[dc->nprepared].sql = s->sql;
			dc->prepared[dc->nprepared++].id = id;
		}
	} else {
		rc = ok ? db_fail(conn, r, err) : -EIO;
	}
	PQclear(r);
	while ((r = PQgetResult(conn))) /* the prepare's results end with a NULL */
		PQclear(r);
	return rc;
}

int rv_db_exec_pipeline(PGconn *conn, struct rv_db_stmt *s, int n, int *failed, struct rv_err *err)
{
	for (int i = 0; i < n; i++) {
		s[i].res = NULL;
		s[i].rows = 0;
		s[i].prepare_id = -1;
	}
	if (failed)
		*failed = -1;
	if (PQenterPipelineMode(conn) != 1)
		return db_fail(conn, NULL, err);
	/* Send everything, then one sync; the server answers in order.  The
	 * statements are few and their answers small, so sending all before
	 * reading cannot fill both socket buffers. */
	int sent = 0;
	while (sent < n && stmt_send(conn, &s[sent], &s[sent].prepare_id) == 1)
		sent++;
	int rc = 0;
	if (sent < n || PQpipelineSync(conn) != 1) {
		rc = rv_err_set(err, -ECONNRESET, NULL,
				"could not send statements: connection lost: %s",
				PQerrorMessage(conn));
		if (failed)
			*failed = sent;
		sent = 0; /* nothing can be read back reliably */
	}
	for (int i = 0; i < sent; i++) {
		if (s[i].prepare_id >= 0) {
			int prc = stmt_prepared(conn, &s[i], s[i].prepare_id, rc == 0, err);
			if (prc < 0 && rc == 0) {
				rc = prc;
				if (failed)
					*failed = i;
			}
		}
		PGresult *r = PQgetResult(conn);
		if (!r) {
			rc = rc < 0 ? rc : db_fail(conn, NULL, err);
			break;
		}
		if (rc == 0) {
			int rows = stmt_rows(conn, r, err);
			if (rows < 0) {
				rc = rows;
				if (failed)
					*failed = i;
			} else {
				s[i].rows = rows;
				if (s[i].want_res) {
					s[i].res = r;
					r = NULL;
				}
			}
		}
		PQclear(r);
		/* Each statement's results end with a NULL. */
		while ((r = PQgetResult(conn)))
			PQclear(r);
	}
	/* Up to the sync's own result; then the connection takes plain
	 * statements again. */
	for (int guard = 0; sent > 0 && guard < 2 * n + 2; guard++) {
		PGresult *r = PQgetResult(conn);
		if (!r) {
			if (PQstatus(conn) != CONNECTION_OK)
				break;
			continue;
		}
		ExecStatusType st = PQresultStatus(r);
		PQclear(r);
		if (st == PGRES_PIPELINE_SYNC)
			break;
	}
	if (PQexitPipelineMode(conn) != 1 && rc == 0)
		rc = rv_err_set(err, -ECONNRESET, NULL, "could not leave pipeline mode: %s",
				PQerrorMessage(conn));
	return rc;
}

int rv_db_copy_in(PGconn *conn, const char *copy_sql, const char *data, size_t len,
		  struct rv_err *err)
{
	RV_CLEANUP_PGRESULT PGresult *r =
		PQexecParams(conn, copy_sql, 0, NULL, NULL, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COPY_IN)
		return db_fail(conn, r, err);
	PQclear(RV_TAKE_PTR(r));
	/* libpq sends in pieces; chunk so one call never exceeds INT_MAX. */
	int ok = 1;
	for (size_t off = 0; ok && off < len;) {
		size_t n = len - off > (1u << 20) ? (1u << 20) : len - off;
		ok = PQputCopyData(conn, data + off, (int)n) == 1;
		off += n;
	}
	if (PQputCopyEnd(conn, ok ? NULL : "client could not send rows") != 1)
		ok = 0;
	r = PQgetResult(conn);
	int rows = -1;
	if (PQresultStatus(r) == PGRES_COMMAND_OK) {
		const char *t = PQcmdTuples(r);
		rows = t && *t ? (int)strtol(t, NULL, 10) : 0;
	}
	int rc = rows >= 0 && ok ? rows : db_fail(conn, r, err);
	PGresult *more;
	while ((more = PQgetResult(conn)))
		PQclear(more);
	return rc;
}

void rv_db_copy_text(struct rv_buf *b, const char *s)
{
	for (const char *p = s; *p; p++) {
		switch (*p) {
		case '\\':
			rv_buf_append(b, "\\\\", 2);
			break;
		case '\t':
			rv_buf_append(b, "\\t", 2);
			break;
		case '\n':
			rv_buf_append(b, "\\n", 2);
			break;
		case '\r':
			rv_buf_append(b, "\\r", 2);
			break;
		default:
			rv_buf_append(b, p, 1);
		}
	}
}

int rv_db_begin(PGconn *conn, struct rv_err *err)
{
	int r = rv_db_exec(conn, "BEGIN", 0, NULL, NULL, err);
	return r < 0 ? r : 0;
}

int rv_db_commit(PGconn *conn, struct rv_err *err)
{
	RV_CLEANUP_PGRESULT PGresult *res = NULL;
	int r = rv_db_exec(conn, "COMMIT", 0, NULL, &res, err);
	if (r < 0)
		return r;
	/* COMMIT of a failed transaction "succeeds" with the tag ROLLBACK. */
	if (!strcmp(PQcmdStatus(res), "ROLLBACK"))
		return rv_err_set(
			err, -EIO, NULL,
			"could not commit: the transaction had failed and was rolled back");
	return 0;
}

void rv_db_rollback(PGconn *conn)
{
	if (conn)
		PQclear(PQexecParams(conn, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0));
}

/* ---- migrations ---- */

struct mig_file {
	long version;
	char name[256];
};

static int mig_cmp(const void *a, const void *b)
{
	const struct mig_file *x = a, *y = b;
	return (x->version > y->version) - (x->version < y->version);
}

/* "NNN_description.sql" -> version NNN, or -1 when the name does not match. */
static long mig_version(const char *name)
{
	const char *p = name;
	while (*p >= '0' && *p <= '9')
		p++;
	size_t len = strlen(name);
	if (p == name || *p != '_' || len < 5 || strcmp(name + len - 4, ".sql") != 0 ||
	    p - name > 9)
		return -1;
	return strtol(name, NULL, 10);
}

/* The migration files in dir, sorted by version; *out is the caller's to free. */
static int mig_list(const char *dir, struct mig_file **out, size_t *count, struct rv_err *err)
{
	DIR *d = opendir(dir);
	if (!d)
		return rv_err_set(err, -errno, NULL, "could not open migrations folder \"%s\": %s",
				  dir, strerror(errno));
	RV_CLEANUP_FREE struct mig_file *files = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int r = 0;
	while ((de = readdir(d))) {
		long v = mig_version(de->d_name);
		if (v < 0)
			continue;
		if (strlen(de->d_name) >= sizeof(files->name) || n >= DB_MIGRATE_MAX_FILES) {
			r = rv_err_set(err, -E2BIG, NULL,
				       "could not list migrations in \"%s\": "
				       "too many files or name too long (\"%s\")",
				       dir, de->d_name);
			break;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			struct mig_file *nf = realloc(files, cap * sizeof(*files));
			if (!nf) {
				r = rv_err_set(err, -ENOMEM, NULL,
					       "could not list migrations: out of memory");
				break;
			}
			files = nf;
		}
		files[n].version = v;
		snprintf(files[n].name, sizeof(files[n].name), "%s", de->d_name);
		n++;
	}
	closedir(d);
	if (r < 0)
		return r;
	if (n)
		qsort(files, n, sizeof(*files), mig_cmp);
	for (size_t i = 1; i < n; i++)
		if (files[i].version == files[i - 1].version)
			return rv_err_set(
				err, -EINVAL, NULL,
				"could not migrate: \"%s\" and \"%s\" have the same version",
				files[i - 1].name, files[i].name);
	*out = RV_TAKE_PTR(files);
	*count = n;
	return 0;
}

/* Read a whole text file (NUL-terminated, malloc'd) or NULL with *err set. */
static char *mig_read(const char *dir, const char *name, struct rv_err *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	RV_CLEANUP_CLOSE int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		rv_err_set(err, -errno, NULL, "could not read migration \"%s\": %s", name,
			   strerror(errno));
		return NULL;
	}
	if (st.st_size > DB_MIGRATE_MAX_BYTES) {
		rv_err_set(err, -EFBIG, NULL,
			   "could not read migration \"%s\": larger than %d bytes", name,
			   DB_MIGRATE_MAX_BYTES);
		return NULL;
	}
	RV_CLEANUP_FREE char *buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		rv_err_set(err, -ENOMEM, NULL, "could not read migration \"%s\": out of memory",
			   name);
		return NULL;
	}
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rv_err_set(err, k < 0 ? -errno : -EIO, NULL,
				   "could not read migration \"%s\": %s", name,
				   k < 0 ? strerror(errno) : "short read");
			return NULL;
		}
		got += (size_t)k;
	}
	buf[got] = '\0';
	if (strlen(buf) != got) {
		rv_err_set(err, -EINVAL, NULL,
			   "could not read migration \"%s\": contains a NUL byte", name);
		return NULL;
	}
	return RV_TAKE_PTR(buf);
}

/* Apply one file in its own transaction and record it. */
static int mig_apply(PGconn *conn, const struct mig_file *f, const char *sql, const char *checksum,
		     struct rv_err *err)
{
	char why[400];
	RV_CLEANUP_PGRESULT PGresult *res = NULL;
	int r = rv_db_begin(conn, err);
	if (r < 0)
		return r;
	/* A migration may legitimately run longer than the pool's statement_timeout. */
	r = rv_db_exec(conn, "SELECT set_config('statement_timeout', '0', true)", 0, NULL, NULL,
		       err);
	if (r < 0)
		goto fail;
	/*
	 * The one place SQL goes through PQexec instead of PQexecParams: a migration
	 * file is a trusted, multi-statement script read from our own sql/ folder,
	 * and only the simple query protocol runs several statements at once.  It
	 * carries no user input.
	 */
	res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY) {
		const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
		one_line(why, sizeof(why), PQerrorMessage(conn));
		r = rv_err_set(err, state ? rv_db_sqlstate_errno(state) : -ECONNRESET, NULL,
			       "could not apply migration \"%s\": %s", f->name, why);
		goto fail;
	}
	if (PQtransactionStatus(conn) != PQTRANS_INTRANS) {
		r = rv_err_set(err, -EINVAL, NULL,
			       "could not apply migration \"%s\": it must not end the transaction "
			       "itself (no COMMIT/ROLLBACK in migration files)",
			       f->name);
		goto fail;
	}
	char ver[24];
	snprintf(ver, sizeof(ver), "%ld", f->version);
	const char *params[] = { ver, f->name, checksum };
	r = rv_db_exec(conn,
		       "INSERT INTO rover_schema_version (version, name, checksum) "
		       "VALUES ($1, $2, $3)",
		       3, params, NULL, err);
	if (r < 0)
		goto fail;
	r = rv_db_commit(conn, err);
	if (r < 0)
		goto fail;
	return 0;
fail:
	rv_db_rollback(conn);
	return r;
}

static int mig_locked(PGconn *conn, const char *dir, const struct mig_file *files, size_t n,
		      struct rv_err *err)
{
	/* Create it only when missing (we hold the lock): IF NOT EXISTS would
	 * send a NOTICE on every start. */
	RV_CLEANUP_PGRESULT PGresult *exists = NULL;
	int r = rv_db_exec(conn, "SELECT to_regclass('rover_schema_version') IS NOT NULL", 0, NULL,
			   &exists, err);
	if (r < 0)
		return r;
	if (strcmp(PQgetvalue(exists, 0, 0), "t") != 0)
		r = rv_db_exec(conn,
			       "CREATE TABLE rover_schema_version ("
			       " version int PRIMARY KEY,"
			       " name text NOT NULL,"
			       " checksum text NOT NULL,"
			       " applied_at timestamptz NOT NULL DEFAULT now())",
			       0, NULL, NULL, err);
	if (r < 0)
		return r;
	int applied = 0;
	for (size_t i = 0; i < n; i++) {
		const struct mig_file *f = &files[i];
		RV_CLEANUP_FREE char *sql = mig_read(dir, f->name, err);
		if (!sql)
			return err ? err->code : -EIO;
		/* md5 of the file's bytes, computed by the server (same as md5sum). */
		const char *cp[] = { sql };
		RV_CLEANUP_PGRESULT PGresult *sum = NULL;
		r = rv_db_exec(conn, "SELECT md5(convert_to($1, 'UTF8'))", 1, cp, &sum, err);
		if (r < 0)
			return r;
		char ver[24];
		snprintf(ver, sizeof(ver), "%ld", f->version);
		const char *vp[] = { ver };
		RV_CLEANUP_PGRESULT PGresult *row = NULL;
		r = rv_db_exec(conn,
			       "SELECT name, checksum FROM rover_schema_version WHERE version = $1",
			       1, vp, &row, err);
		if (r < 0)
			return r;
		const char *checksum = PQgetvalue(sum, 0, 0);
		if (r > 0) {
			if (strcmp(PQgetvalue(row, 0, 1), checksum) != 0)
				return rv_err_set(
					err, -EINVAL, f->name,
					"could not migrate: \"%s\" changed after it was applied "
					"as \"%s\" (checksum %s, recorded %s)",
					f->name, PQgetvalue(row, 0, 0), checksum,
					PQgetvalue(row, 0, 1));
			continue;
		}
		r = mig_apply(conn, f, sql, checksum, err);
		if (r < 0)
			return r;
		applied++;
	}
	return applied;
}

int rv_db_migrate(PGconn *conn, const char *dir, struct rv_err *err)
{
	if (PQtransactionStatus(conn) != PQTRANS_IDLE)
		return rv_err_set(
			err, -EINVAL, NULL,
			"could not migrate: the connection is busy or inside a transaction");
	RV_CLEANUP_FREE struct mig_file *files = NULL;
	size_t n = 0;
	int r = mig_list(dir, &files, &n, err);
	if (r < 0)
		return r;
	/* Session-level lock: held across the per-file transactions, so a second
	 * migrator waits here and then finds everything applied. */
	const char *key[] = { DB_MIGRATE_LOCK_KEY };
	r = rv_db_exec(conn, "SELECT pg_advisory_lock($1::bigint)", 1, key, NULL, err);
	if (r < 0)
		return r;
	r = mig_locked(conn, dir, files, n, err);
	PQclear(PQexecParams(conn, "SELECT pg_advisory_unlock($1::bigint)", 1, NULL, key, NULL,
			     NULL, 0));
	return r;
}

void rv_db_pool_stats(struct rv_db_pool *pool, struct rv_db_pool_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&pool->mu);
	out->size = pool->size;
	for (int i = 0; i < pool->size; i++) {
		out->in_use += pool->slots[i].in_use;
		/* A slot's conn is only read here while it is idle: in-use ones are
		 * counted as connected (their owner holds a live connection). */
		if (pool->slots[i].in_use || pool->slots[i].conn)
			out->connected++;
	}
	out->acquires = pool->acquires;
	out->acquire_failures = pool->acquire_failures;
	out->connects = pool->connects;
	out->connect_failures = pool->connect_failures;
	pthread_mutex_unlock(&pool->mu);
	out->exec_errors = __atomic_load_n(&pool->exec_errors, __ATOMIC_RELAXED);
}
