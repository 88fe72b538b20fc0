/*
 * supervisor.c: the brain's housekeeping thread.
 *
 * With the embedded PostgreSQL it watches the postmaster (a pidfd: the
 * postmaster is not our child) and, when it dies (kill -9, OOM killer),
 * starts it again: PostgreSQL runs crash recovery on start; a start that
 * fails (backends of the dead postmaster still hold its shared memory) is
 * retried after a pause that doubles from db.restart_backoff_ms up to
 * db.restart_backoff_max_ms.  One log line per restart or failed attempt;
 * rover_brain_pg_restarts_total counts them.  The pool reconnects by itself
 * (common/db.c) once the server is back.  In every mode it deletes the
 * cluster nodes not heard from for cluster.node_ttl_s and, every
 * retention.interval_s, what the retention keys say is old (the monitor's
 * node samples, report and batch ids).
 *
 * Threads: this one thread owns b->pg from supervisor_start until
 * supervisor_stop returns (main stops the server only after that).
 */
#include <inttypes.h>
#include <poll.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "brain.h"
#include "log.h"
#include "parse.h"

#define SUP_PG_START_TIMEOUT_S 60
#define SUP_TICK_MS            1000

static int pidfd_for(pid_t pid)
{
	if (pid <= 0)
		return -1;
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Sleep ms or until supervisor_stop: true when told to stop. */
static bool sup_pause(struct brain *b, int ms)
{
	struct pollfd p = { .fd = b->sup_wake, .events = POLLIN };
	while (!atomic_load(&b->sup_stop)) {
		int r = poll(&p, 1, ms);
		if (r >= 0 || errno != EINTR)
			break;
	}
	return atomic_load(&b->sup_stop);
}

/* The postmaster died: start it again until it runs (or we are stopped). */
static void pg_revive(struct brain *b, pid_t dead)
{
	char q[600];
	int64_t down_at = rv_mono_ms();
	int backoff = (int)b->cfg.restart_backoff_ms;
	rv_log_warn("embedded postgresql exited", "pid=%d dir=%s", (int)dead, b->pg.dir);
	for (int attempt = 1;; attempt++) {
		if (sup_pause(b, backoff))
			return;
		struct rv_err err = { 0 };
		int rc = rv_pgserver_restart(&b->pg, SUP_PG_START_TIMEOUT_S, &err);
		if (rc == 0) {
			b->pg.started = 1; /* ours to stop at exit */
			atomic_fetch_add(&b->pg_restarts, 1);
			rv_log_warn("embedded postgresql restarted",
				    "pid=%d attempt=%d down_ms=%" PRId64 " restarts=%llu",
				    (int)rv_pgserver_pid(&b->pg), attempt, rv_mono_ms() - down_at,
				    (unsigned long long)atomic_load(&b->pg_restarts));
			return;
		}
		atomic_fetch_add(&b->pg_restart_failures, 1);
		backoff = backoff * 2 > b->cfg.restart_backoff_max_ms
				  ? (int)b->cfg.restart_backoff_max_ms
				  : backoff * 2;
		rv_log_warn("could not restart embedded postgresql",
			    "attempt=%d retry_ms=%d reason=%s", attempt, backoff,
			    rv_log_q(q, sizeof(q), err.msg));
	}
}

static void purge_cluster(struct brain *b)
{
	struct rv_err err = { 0 };
	PGconn *c = rv_db_acquire(b->db, &err);
	if (!c)
		return; /* the database is down: requests say so already */
	int n = store_cluster_expire(c, (int)b->cfg.cluster_node_ttl_s, &err);
	rv_db_release(b->db, c);
	if (n > 0) {
		atomic_fetch_add(&b->cluster_nodes_expired, (unsigned)n);
		rv_log_info("cluster nodes expired", "nodes=%d ttl_s=%lld", n,
			    b->cfg.cluster_node_ttl_s);
	} else if (n < 0) {
		char q[600];
		rv_log_warn("could not expire cluster nodes", "reason=%s",
			    rv_log_q(q, sizeof(q), err.msg));
	}
}

static void retain(struct brain *b)
{
	struct rv_err err = { 0 };
	PGconn *c = rv_db_acquire(b->db, &err);
	if (!c)
		return;
	int n = store_retention(c, rv_now_ms(), b->cfg.retain_cluster_samples_s,
				b->cfg.retain_report_ids_s, b->cfg.retain_batch_ids_s, &err);
	rv_db_release(b->db, c);
	if (n > 0) {
		rv_log_info("old rows deleted", "rows=%d cluster_samples_s=%lld", n,
			    b->cfg.retain_cluster_samples_s);
	} else if (n < 0) {
		char q[600];
		rv_log_warn("could not delete old rows", "reason=%s",
			    rv_log_q(q, sizeof(q), err.msg));
	}
}

static void *supervisor_main(void *arg)
{
	struct brain *b = arg;
	int pidfd = -1;
	pid_t pid = 0;
	/* Expiry runs a few times per TTL, at least every 10 s. */
	int64_t purge_every = b->cfg.cluster_node_ttl_s * 1000 / 4;
	if (purge_every > 10000)
		purge_every = 10000;
	if (purge_every < 250)
		purge_every = 250;
	int64_t next_purge = rv_mono_ms() + purge_every;
	int64_t retain_every = b->cfg.retain_interval_s * 1000;
	int64_t next_retain = rv_mono_ms() + (retain_every < 1000 ? retain_every : 1000);

	while (!atomic_load(&b->sup_stop)) {
		if (b->embedded && pidfd < 0) {
			pid = rv_pgserver_pid(&b->pg);
			pidfd = pidfd_for(pid);
		}
		struct pollfd p[2] = { { .fd = b->sup_wake, .events = POLLIN },
				       { .fd = pidfd, .events = POLLIN } };
		int64_t next = next_purge < next_retain ? next_purge : next_retain;
		int64_t wait = next - rv_mono_ms();
		if (wait > SUP_TICK_MS)
			wait = SUP_TICK_MS;
		if (wait < 0)
			wait = 0;
		int r = poll(p, pidfd >= 0 ? 2 : 1, (int)wait);
		if (atomic_load(&b->sup_stop))
			break;
		/* The pidfd says the postmaster exited; without one (old kernel)
		 * the tick looks at postmaster.pid. */
		bool died = b->embedded && ((pidfd >= 0 && r > 0 && (p[1].revents & POLLIN)) ||
					    (pidfd < 0 && rv_pgserver_pid(&b->pg) == 0));
		if (died) {
			if (pidfd >= 0)
				close(pidfd);
			pidfd = -1;
			pg_revive(b, pid);
			continue;
		}
		if (rv_mono_ms() >= next_purge) {
			purge_cluster(b);
			next_purge = rv_mono_ms() + purge_every;
		}
		if (rv_mono_ms() >= next_retain) {
			retain(b);
			next_retain = rv_mono_ms() + retain_every;
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	return NULL;
}

int supervisor_start(struct brain *b)
{
	b->sup_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (b->sup_wake < 0)
		return -errno;
	atomic_store(&b->sup_stop, false);
	int r = pthread_create(&b->sup_thread, NULL, supervisor_main, b);
	if (r != 0) {
		close(b->sup_wake);
		b->sup_wake = -1;
		return -r;
	}
	b->sup_running = true;
	return 0;
}

void supervisor_stop(struct brain *b)
{
	if (!b->sup_running)
		return;
	atomic_store(&b->sup_stop, true);
	uint64_t one = 1;
	if (write(b->sup_wake, &one, sizeof(one)) < 0) {
		/* a full counter still wakes poll: nothing to do */
	}
	pthread_join(b->sup_thread, NULL);
	close(b->sup_wake);
	b->sup_wake = -1;
	b->sup_running = false;
}
