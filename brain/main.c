/*
 * main.c: rover-brain's entry point: configuration, wiring, signals.
 *
 * run() loads the config, starts (or connects to) PostgreSQL, applies the
 * sql/ migrations, starts the planner thread and the REST server, then waits
 * for SIGINT/SIGTERM and stops the planner (which also wakes every
 * long-poll), the REST server, the pool and the embedded PostgreSQL last.
 * SIGINT/SIGTERM are blocked in every thread and taken with sigwaitinfo
 * here, so no handler runs in a library call (common/daemon.c).
 */
#include <gsl/gsl_errno.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brain.h"
#include "cfg.h"
#include "cleanup.h"
#include "daemon.h"
#include "log.h"
#include "proc.h"
#include "version.h"

#define OPT(...) RV_CFG_OPT(struct brain_cfg, __VA_ARGS__)

static const struct rv_cfg_opt brain_opts[] = {
	OPT("server", "listen", "listen", RV_CFG_STR, listen, "127.0.0.1:8080", 0, 0, 0,
	    "address and port of the REST API (HOST:PORT; port 0 picks a free one)"),
	RV_DAEMON_OPTS_SERVER_TOKEN(struct brain_cfg),
	OPT("server", "max_body_kb", NULL, RV_CFG_INT, max_body_kb, "8192", 1, 1048576, 0,
	    "largest request body accepted, KiB (413 above)"),
	OPT("server", "conn_timeout_s", NULL, RV_CFG_INT, conn_timeout_s, "120", 1, 3600, 0,
	    "idle connection timeout, seconds"),
	OPT("server", "request_timeout_s", NULL, RV_CFG_INT, request_timeout_s, "30", 1, 3600, 0,
	    "a client has this long to send a whole request, head and body, from connecting "
	    "(or from its request line on a kept-alive connection), seconds; slow bytes do not "
	    "extend it"),
	OPT("server", "max_conns", NULL, RV_CFG_INT, max_conns, "4096", 4, 1048576, 0,
	    "most open connections (lowered to fit the open-file limit)"),
	OPT("server", "per_ip_conns", NULL, RV_CFG_INT, per_ip_conns, "256", 0, 1048576, 0,
	    "most open connections from one client address (0: no limit)"),
	OPT("server", "threads", NULL, RV_CFG_INT, threads, "4", 1, 256, 0,
	    "threads serving every connection (epoll); a long-poll holds none"),
	OPT("server", "max_waits", NULL, RV_CFG_INT, max_waits, "2048", 1, 1048576, 0,
	    "most long-polls (GET plan with wait=) open at once; 429 beyond"),
	OPT("server", "max_waits_per_ip", NULL, RV_CFG_INT, max_waits_per_ip, "256", 0, 1048576, 0,
	    "most long-polls open at once from one client address; 429 beyond (0: no limit)"),
	OPT("server", "body_budget_mb", NULL, RV_CFG_INT, body_budget_mb, "256", 1, 1048576, 0,
	    "memory for request bodies being received, over all connections, MiB; 503 beyond"),
	OPT("server", "web_dir", "web-dir", RV_CFG_STR, web_dir, "", 0, 0, 0,
	    "folder of the status page served at / (empty: found next to the binary)"),
	OPT("ingest", "group_max", NULL, RV_CFG_INT, ingest_group_max, "256", 1, 65536, 0,
	    "most metrics batches stored in one transaction (one commit)"),
	OPT("ingest", "committers", NULL, RV_CFG_INT, ingest_committers, "2", 1, 16, 0,
	    "threads storing metrics batches, each a transaction at a time (one builds a group "
	    "while another waits for its commit)"),
	OPT("ingest", "queue_max", NULL, RV_CFG_INT, ingest_queue_max, "4096", 1, 1048576, 0,
	    "most metrics batches waiting to be stored (their samples also count in "
	    "server.body_budget_mb); 503 beyond"),
	OPT("db", "conninfo", "db", RV_CFG_STR, db, "", 0, 0, RV_CFG_SECRET,
	    "PostgreSQL conninfo; empty runs a private PostgreSQL under data_dir"),
	OPT("db", "data_dir", "data-dir", RV_CFG_STR, data_dir, "var/brain", 0, 0, 0,
	    "folder of the embedded PostgreSQL (used without conninfo)"),
	OPT("db", "sql_dir", "sql-dir", RV_CFG_STR, sql_dir, "", 0, 0, 0,
	    "folder of the NNN_*.sql migrations (empty: found next to the binary)"),
	OPT("db", "pool_size", NULL, RV_CFG_INT, pool_size, "8", 1, 256, 0,
	    "PostgreSQL connections in the pool"),
	OPT("db", "statement_timeout_ms", NULL, RV_CFG_INT, statement_timeout_ms, "10000", 0,
	    3600000, 0, "statement timeout per query, ms (0: none)"),
	OPT("db", "acquire_timeout_ms", NULL, RV_CFG_INT, acquire_timeout_ms, "5000", 10, 600000, 0,
	    "how long a request waits for a free pool connection, ms"),
	OPT("db", "restart_backoff_ms", NULL, RV_CFG_INT, restart_backoff_ms, "100", 10, 60000, 0,
	    "embedded PostgreSQL died: first pause before starting it again, ms"),
	OPT("db", "restart_backoff_max_ms", NULL, RV_CFG_INT, restart_backoff_max_ms, "5000", 10,
	    600000, 0, "longest pause between restarts of the embedded PostgreSQL, ms"),
	OPT("db", "reconnect_backoff_ms", NULL, RV_CFG_INT, reconnect_backoff_ms, "50", 1, 60000, 0,
	    "after a failed connect, no new attempt for this long (doubling), ms"),
	OPT("db", "reconnect_backoff_max_ms", NULL, RV_CFG_INT, reconnect_backoff_max_ms, "2000", 1,
	    600000, 0, "longest pause between connect attempts, ms"),
	OPT("plan", "interval_s", NULL, RV_CFG_INT, plan_interval_s, "30", 1, 86400, 0,
	    "every running job is re-planned at least this often, seconds"),
	OPT("plan", "debounce_ms", NULL, RV_CFG_INT, plan_debounce_ms, "1000", 0, 600000, 0,
	    "a job is planned once no metrics came for this long, ms"),
	OPT("plan", "max_wait_s", NULL, RV_CFG_INT, max_wait_s, "300", 0, 3600, 0,
	    "longest long-poll a client may ask for with wait=, seconds"),
	OPT("plan", "min_samples", NULL, RV_CFG_INT, min_samples, "3", 1, 10000, 0,
	    "speed samples a configuration needs before the throughput model uses it"),
	RV_DAEMON_OPT_LOG_LEVEL(struct brain_cfg),
	OPT("log", "unavailable_interval_s", NULL, RV_CFG_INT, unavailable_log_interval_s, "5", 0,
	    3600, 0, "at most one \"database unavailable\" line per this many seconds"),
	OPT("cluster", "node_ttl_s", NULL, RV_CFG_INT, cluster_node_ttl_s, "300", 1, 31536000, 0,
	    "a cluster node not reported for this long is deleted, seconds"),
	OPT("cluster", "max_nodes", NULL, RV_CFG_INT, cluster_max_nodes, "100000", 1, 10000000, 0,
	    "most cluster nodes stored; a report adding more is refused (403)"),
	OPT("cluster", "max_report_nodes", NULL, RV_CFG_INT, cluster_max_report_nodes, "4096", 1,
	    4096, 0, "most nodes in one monitor report (413 above)"),
	OPT("cluster", "max_page", NULL, RV_CFG_INT, cluster_max_page, "1000", 1, 100000, 0,
	    "largest limit= of GET /v1/cluster"),
	OPT("retention", "cluster_samples_s", NULL, RV_CFG_INT, retain_cluster_samples_s, "604800",
	    60, 315360000, 0,
	    "the monitor's node samples (cluster_node_samples) older than this (their ts) are "
	    "deleted, seconds"),
	OPT("retention", "report_ids_s", NULL, RV_CFG_INT, retain_report_ids_s, "86400", 60,
	    315360000, 0,
	    "a monitor report_id is remembered this long (a resend after it would be stored "
	    "again), seconds"),
	OPT("retention", "batch_ids_s", NULL, RV_CFG_INT, retain_batch_ids_s, "604800", 60,
	    315360000, 0,
	    "a metrics batch_id is remembered this long (a resend after it would be stored "
	    "again), seconds"),
	OPT("retention", "progress_history", NULL, RV_CFG_INT, retain_progress_history, "1000", 1,
	    1000000, 0, "data progress reports kept per job and dataset (the newest)"),
	OPT("retention", "interval_s", NULL, RV_CFG_INT, retain_interval_s, "60", 1, 86400, 0,
	    "how often the retention deletes run, seconds"),
	OPT("quota", "jobs_per_namespace", NULL, RV_CFG_INT, quota_jobs, "1000", 1, 10000000, 0,
	    "most running jobs in one namespace (403 above)"),
	OPT("quota", "nodes_per_namespace", NULL, RV_CFG_INT, quota_nodes, "10000", 1, 100000000, 0,
	    "most nodes (each role's max of replicas and maxReplicas) of running jobs in one "
	    "namespace (403 above)"),
};

static const char usage[] = "rover-brain [--listen HOST:PORT] [--data-dir DIR] [--db CONNINFO] "
			    "[--token-file FILE] [--config FILE]";
static const char summary[] =
	"Rover's brain: stores job metrics and events in PostgreSQL and serves resource\n"
	"plans over REST.  Without --db it runs a private PostgreSQL in --data-dir\n"
	"(created on first start, stopped on SIGTERM/SIGINT, reused on restart).\n"
	"Print the full conf file with --print-conf.";

static int find_sql_dir(char *out, size_t size)
{
	/* the folder itself must be searchable: X_OK on a directory */
	static const char *const rel[] = { "../../sql/", "../../../sql/", "../share/rover/sql/",
					   NULL };
	if (rv_proc_exe_relative(out, size, rel, R_OK | X_OK) == 0)
		return 0;
	struct stat st;
	if (stat("sql", &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(out, size, "sql");
		return 0;
	}
	return -ENOENT;
}

/* Raise the open-file limit to its hard limit: every connection is a
 * descriptor.  Returns the soft limit now in force. */
static long long raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1024;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t was = rl.rlim_cur;
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			rl.rlim_cur = was;
	}
	return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)LLONG_MAX
		       ? LLONG_MAX
		       : (long long)rl.rlim_cur;
}

static int open_database(struct brain *b, struct rv_err *err)
{
	const char *conninfo = b->cfg.db;
	if (!conninfo[0]) {
		rv_log_info("starting embedded postgresql", "dir=%s", b->cfg.data_dir);
		int rc = rv_pgserver_start(&b->pg, b->cfg.data_dir, 60, err);
		if (rc < 0)
			return rc;
		b->embedded = true;
		/* The cluster in our data dir is ours even when an earlier brain
		 * (killed without a chance to stop it) left it running. */
		b->pg.started = 1;
		conninfo = b->pg.conninfo;
		rv_log_info("embedded postgresql ready", "dir=%s socket_dir=%s started=%d", b->pg.dir,
			    b->pg.sockdir, b->pg.started);
	}
	struct rv_db_pool_opts po = {
		.conninfo = conninfo,
		.size = (int)b->cfg.pool_size,
		.connect_timeout_s = 5,
		.statement_timeout_ms = (int)b->cfg.statement_timeout_ms,
		.acquire_timeout_ms = (int)b->cfg.acquire_timeout_ms,
		.reconnect_backoff_ms = (int)b->cfg.reconnect_backoff_ms,
		.reconnect_backoff_max_ms = (int)b->cfg.reconnect_backoff_max_ms,
	};
	b->db = rv_db_pool_new(&po);
	if (!b->db)
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	PGconn *c = rv_db_acquire(b->db, err);
	if (!c)
		return err->code ? err->code : -ECONNREFUSED;
	int rc = rv_db_migrate(c, b->cfg.sql_dir, err);
	rv_db_release(b->db, c);
	if (rc < 0)
		return rc;
	rv_log_info("schema up to date", "applied=%d sql_dir=%s", rc, b->cfg.sql_dir);
	return 0;
}

static int run(int argc, char **argv)
{
	static const struct rv_daemon d =
		RV_DAEMON_INIT("rover-brain", "brain", brain_opts, usage, summary);
	struct rv_err err = { 0 };
	int rc;
	struct brain *b =
		rv_daemon_new(&d, sizeof(*b), offsetof(struct brain, cfg), argc, argv, &rc);
	if (!b)
		return rc;
	gsl_set_error_handler_off();
	rv_daemon_log_config(&d, &b->cfg);
	if (!b->cfg.sql_dir[0] && find_sql_dir(b->cfg.sql_dir, sizeof(b->cfg.sql_dir)) < 0) {
		rv_log_error("could not find the sql migrations", "hint=\"set --sql-dir\"");
		free(b);
		return -ENOENT;
	}

	char q[600];
	if (b->cfg.token_file[0]) {
		rc = rv_daemon_read_token(b->cfg.token_file, "server.token_file", b->cfg.token,
					  sizeof(b->cfg.token), &err);
		if (rc < 0) {
			rv_log_error("could not read the token file", "reason=%s",
				     rv_log_q(q, sizeof(q), err.msg));
			free(b);
			return rc;
		}
	}

	sigset_t sigs;
	rv_daemon_block_signals(&sigs);
	b->nofile = raise_nofile();

	rc = open_database(b, &err);
	if (rc < 0) {
		rv_log_error("could not open the database", "reason=%s", rv_log_q(q, sizeof(q), err.msg));
		goto out;
	}
	rc = api_web_load(b, &err);
	if (rc < 0) {
		rv_log_error("could not load the status page", "reason=%s",
			     rv_log_q(q, sizeof(q), err.msg));
		goto out;
	}
	rc = supervisor_start(b);
	if (rc < 0) {
		rv_log_error("could not start the supervisor", "errno=%d", -rc);
		goto out;
	}
	rc = planner_start(b);
	if (rc < 0) {
		rv_log_error("could not start the planner", "errno=%d", -rc);
		goto out;
	}
	rc = api_ingest_start(b);
	if (rc < 0) {
		rv_log_error("could not start the metrics committer", "errno=%d", -rc);
		goto out;
	}
	rc = api_plans_wait_start(b);
	if (rc < 0) {
		rv_log_error("could not start the long-poll thread", "errno=%d", -rc);
		goto out;
	}
	rc = api_start(b, &err);
	if (rc < 0) {
		rv_log_error("could not start the REST server", "reason=%s",
			     rv_log_q(q, sizeof(q), err.msg));
		goto out;
	}
	rv_log_info("rover-brain ready", "listen=%s port=%d auth=%s version=%s", b->cfg.listen,
		    rv_http_server_port(b->http), b->cfg.token[0] ? "bearer" : "none", ROVER_VERSION);
	/* Scripts read this line from stdout to learn the port. */
	rv_daemon_print_listening(b->cfg.listen, rv_http_server_port(b->http));

	int sig = rv_daemon_wait(&sigs);
	rv_log_info("shutting down", "signal=%d", sig);
	rc = 0;
out:
	planner_stop(b);
	api_stop(b);
	api_web_free(b);
	supervisor_stop(b); /* before the pool goes and the server stops */
	b->db = rv_db_pool_free(b->db);
	if (b->embedded) {
		rv_pgserver_stop(&b->pg);
		rv_log_info("embedded postgresql stopped", "dir=%s", b->pg.dir);
	}
	free(b);
	return rc;
}

int main(int argc, char **argv)
{
	int rc = run(argc, argv);
	return rc < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
