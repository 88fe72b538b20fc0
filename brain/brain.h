/*
 * brain.h: rover-brain's state and the interfaces between its files.
 *
 * One struct brain holds everything (no globals at all: main.c takes
 * SIGINT/SIGTERM with sigwaitinfo).  Threads: libmicrohttpd's connection
 * threads run the api_*.c handlers; one planner thread (planner.c) decides
 * when a running job is planned.  What a plan says is algorithms/.  Each
 * thread borrows its own PGconn from the pool for the length of one request
 * or one planner pass.  store.c holds all SQL; a transaction has one owner,
 * the caller named at each prototype.
 */
#ifndef BRAIN_H
#define BRAIN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "buf.h"
#include "db.h"
#include "rover_alg.h"
#include "http.h"
#include "pgserver.h"
#include "rest_server.h"
#include "wire.h"

struct brain_cfg {
	char listen[128];
	char token[256];
	long long max_body_kb;
	long long conn_timeout_s;
	long long max_conns;
	long long threads;
	long long per_ip_conns;
	long long request_timeout_s;
	long long max_waits;
	long long max_waits_per_ip;
	long long body_budget_mb;
	long long ingest_group_max;
	long long ingest_committers;
	long long ingest_queue_max;
	char db[1024];
	char data_dir[512];
	char sql_dir[512];
	char web_dir[512];
	long long pool_size;
	long long statement_timeout_ms;
	long long acquire_timeout_ms;
	long long plan_interval_s;
	long long plan_debounce_ms;
	long long max_wait_s;
	long long min_samples;
	char log_level[16];
	/* supervision and bounds (main.c's table says what each does) */
	char token_file[512];
	long long restart_backoff_ms;
	long long restart_backoff_max_ms;
	long long reconnect_backoff_ms;
	long long reconnect_backoff_max_ms;
	long long unavailable_log_interval_s;
	long long cluster_node_ttl_s;
	long long cluster_max_nodes;
	long long cluster_max_report_nodes;
	long long cluster_max_page;
	long long quota_jobs;
	long long quota_nodes;
	long long retain_cluster_samples_s;
	long long retain_report_ids_s;
	long long retain_batch_ids_s;
	long long retain_progress_history;
	long long retain_interval_s;
};

#define PLANNER_QUEUE_MAX 4096
#define INGEST_THREADS_MAX 16

struct brain {
	struct brain_cfg cfg;
	struct rv_pgserver pg;
	bool embedded;
	struct rv_db_pool *db;
	struct rv_http_server *http;

	/* Plan notification for long-polls: plan_seq grows on every plan this
	 * brain stores; waiters also re-query PostgreSQL so plans stored by
	 * another replica are seen within one poll interval. */
	pthread_mutex_t plan_mu;
	pthread_cond_t plan_cv;
	uint64_t plan_seq;

	/* Grows with plan_seq and on every stored event: what a stored plan's
	 * JSON shows (applied_at, outcome) may have changed.  The plan cache
	 * (api_plans.c) keeps an answer only while this stays the same. */
	atomic_uint_least64_t plan_gen;
	pthread_mutex_t plan_cache_mu;
	struct plan_cache_entry *plan_cache;

	/* Long-polls waiting for a plan (api_plans.c): their replies are
	 * deferred; one thread answers them. */
	pthread_mutex_t wait_mu;
	struct plan_wait *waits;
	int nwaits;
	bool wait_stop;
	bool wait_running;
	pthread_t wait_thread;

	/* Metrics batches waiting for the committer (api_ingest.c): one
	 * transaction and one commit for every batch queued meanwhile. */
	pthread_mutex_t ingest_mu;
	pthread_cond_t ingest_cv;
	struct ingest_item *ingest_head, **ingest_tail;
	int ingest_queued;
	size_t ingest_queued_bytes; /* of parsed samples, within server.body_budget_mb */
	bool ingest_stop;
	bool ingest_running;
	int ningest_threads;
	pthread_t ingest_thread[INGEST_THREADS_MAX];

	/* The open-file limit after start (raised to its hard limit), which
	 * bounds server.max_conns. */
	long long nofile;

	/* Planner: jobs whose metrics changed, computed after the debounce. */
	pthread_t planner_thread;
	bool planner_running;
	pthread_mutex_t planner_mu;
	pthread_cond_t planner_cv;
	atomic_bool planner_stop;   /* also read by long-polls, without the lock */
	int64_t dirty_job[PLANNER_QUEUE_MAX];
	int64_t dirty_since_ms[PLANNER_QUEUE_MAX];
	int ndirty;

	/* The status page's files (api_web.c), read once at start; never
	 * changed after, so every connection thread reads them unlocked. */
	struct api_web_file *web;
	int nweb;

	atomic_uint_least64_t samples_ingested;
	atomic_uint_least64_t batches_ingested;
	atomic_uint_least64_t batches_rejected;
	atomic_uint_least64_t events_ingested;
	atomic_uint_least64_t plans_stored;
	/* planner passes that stored nothing: a serialization failure or
	 * deadlock (SQLSTATE 40001/40P01), anything else */
	atomic_uint_least64_t plan_passes_failed_serialization;
	atomic_uint_least64_t plan_passes_failed_other;
	atomic_uint_least64_t db_unavailable;

	/* supervisor.c: the embedded PostgreSQL's watchdog, cluster expiry */
	pthread_t sup_thread;
	bool sup_running;
	int sup_wake; /* eventfd: supervisor_stop wakes the thread */
	atomic_bool sup_stop;
	atomic_uint_least64_t pg_restarts;
	atomic_uint_least64_t pg_restart_failures;
	atomic_uint_least64_t cluster_nodes_expired;
	/* "database unavailable" is logged once per interval (api.c) */
	atomic_int_least64_t unavail_logged_ms;
	atomic_uint_least64_t unavail_suppressed;
	atomic_uint_least64_t ingest_commits;
	atomic_uint_least64_t ingest_slow_groups;
};

/* ---- api.c (JSON replies and bodies: rest_server.h) ---- */
int api_start(struct brain *b, struct rv_err *err);
void api_stop(struct brain *b);
/* Borrow a connection or fill resp with 503 and return NULL. */
PGconn *api_db(struct brain *b, struct rv_http_resp *resp);
/* Respond with an error from rc/err (logging 5xx once). */
int api_fail(struct brain *b, struct rv_http_resp *resp, int rc, const struct rv_err *err);
/* Optional integer query argument within [min,max]: 1 stored, 0 absent, -EINVAL
 * with resp filled (400 naming the argument). */
/* GET of a job's JSON listing: the integer query key (lo..hi, default dflt)
 * bounds it, fn(c, job_id, n, &doc, err) builds it; the reply carries the
 * job's uid as "job".  404 for an unknown job.  Always 0 (the reply is set). */
int api_job_listing(void *ctx, struct rv_http_req *req, struct rv_http_resp *resp, const char *key,
		    int64_t lo, int64_t hi, int64_t dflt,
		    int (*fn)(PGconn *c, int64_t job_id, int n, cJSON **out, struct rv_err *err));
int api_query_int(const struct rv_http_req *req, struct rv_http_resp *resp, const char *key,
		  int64_t min, int64_t max, int64_t *out);

/* handlers, one file each family */
int api_jobs_create(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_jobs_list(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_jobs_get(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_metrics_post(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_events_post(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_plan_get(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_plans_list(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
/* The long-poll waiter thread (api_plans.c): started before the REST
 * server, stopped (answering every waiter) before it stops. */
int api_plans_wait_start(struct brain *b);
void api_plans_wait_stop(struct brain *b);
/* Free the plan cache, once no handler runs (after the server stopped). */
void api_plans_cache_free(struct brain *b);
/* The metrics committer thread (api_ingest.c): started before the REST
 * server, stopped (storing and answering every queued batch) before it
 * stops. */
int api_ingest_start(struct brain *b);
void api_ingest_stop(struct brain *b);
int api_events_list(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
/* GET /v1/jobs/{uid}/progress (api_jobs.c) */
int api_job_progress(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_cluster_post(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_cluster_get(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);

/* ---- api_web.c: the status page at / and the JSON it reads ---- */
/* Read the page's files from b->cfg.web_dir (found next to the binary when
 * empty) into b->web.  No folder is no page (a warning; the API serves on);
 * 0 or a negative errno (out of memory, a file over the size limit). */
int api_web_load(struct brain *b, struct rv_err *err);
/* Free b->web.  Accepts a brain without one. */
void api_web_free(struct brain *b);
int api_web_page(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_web_asset(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_web_vendor(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_job_series(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_cluster_usage(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_dashboard(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);

/* ---- store.c: every SQL statement of the brain ---- */
struct store_job {
	int64_t id;
	char uid[40];
	char namespace_[RV_NAME_MAX];
	char name[RV_NAME_MAX];
	char user[128];
	enum rv_strategy strategy;
	enum rv_optimize_mode optimize_mode;
	char status[16];
	int64_t last_sample_ms;
};

/* Insert a job (uid generated here); -EEXIST when a running job has that name. */
int store_job_insert(PGconn *c, const struct rv_job_spec *spec, const char *spec_json,
		     struct store_job *out, struct rv_err *err);
/* Look up by uid; -ENOENT when unknown. */
int store_job_find(PGconn *c, const char *uid, struct store_job *out, struct rv_err *err);
/* Several jobs by uid as one statement of a pipeline: uids borrowed (one
 * parameter, a text[] literal); after it ran, store_jobs_from_stmt fills
 * out with the job of uid (-ENOENT when unknown). */
void store_jobs_find_stmt(struct rv_db_stmt *st, const char *const *uids);
int store_jobs_from_stmt(const struct rv_db_stmt *st, const char *uid, struct store_job *out,
			 struct rv_err *err);
int store_job_find_id(PGconn *c, int64_t id, struct store_job *out, struct rv_err *err);
/* Full job document (spec, status, node table); caller owns the cJSON. */
int store_job_get_json(PGconn *c, const char *uid, cJSON **out, struct rv_err *err);
int store_job_list_json(PGconn *c, const char *namespace_, const char *status, int limit,
			int offset, cJSON **out, struct rv_err *err);
/* Store a batch inside the caller's transaction (which makes it all or
 * nothing).  0 stored, *accepted = b->n; 1 when b->batch_id was stored for
 * the job before: nothing written, *accepted = that batch's sample count.
 * Progress samples: the newest per dataset is the job's progress, the
 * history keeps progress_keep per dataset (store_samples_build skips
 * them: the fast path leaves groups with progress to this); -EINVAL (field
 * "samples[i].dataset") when one names no dataset of the job's spec. */
int store_metrics_insert(PGconn *c, int64_t job_id, const struct rv_metrics_batch *b,
			 int progress_keep, int *accepted, struct rv_err *err);
/* Claims as statements of a pipeline, for many jobs at once; parameters
 * borrowed (array literals).  store_metrics_claims_stmt: p = {job uids,
 * batch ids, sample counts}, one element per batch (no (uid, batch id)
 * twice); claims for running jobs only; store_metrics_claimed then says
 * whether a job's batch id was claimed by it (else it was stored before, or
 * the job is not running).  store_metrics_seen_stmt: p = {job ids, batch
 * ids}; store_metrics_seen_from_stmt gives a stored batch's count. */
void store_metrics_claims_stmt(struct rv_db_stmt *st, const char *const *p);
bool store_metrics_claimed(const struct rv_db_stmt *st, int64_t job_id, const char *batch_id);
void store_metrics_seen_stmt(struct rv_db_stmt *st, const char *const *p);
int store_metrics_seen_from_stmt(const struct rv_db_stmt *st, int64_t job_id, const char *batch_id,
				 int *accepted, struct rv_err *err);
/* The statements that store the samples of batches, of one job or many
 * (no batch id handling: claim first): a key share lock of the jobs' rows
 * (-ENOENT when one is gone),
 * one multi-row INSERT per sample table and for the per-node summary, then
 * the jobs' rows locked in id order and their last sample time updated
 * (from there to the commit a second transaction storing samples of one
 * of these jobs waits).  store_samples_build sorts in by job (the batches
 * are borrowed until it returns) and gives 0 or -ENOMEM (release either
 * way); st[0..n) borrow its buffers: run them with store_samples_exec
 * (alone or among other statements), then store_samples_check compares the
 * row counts (-EIO when short).  Many node samples (STORE_COPY_MIN_ROWS or
 * more) go in with COPY instead of their INSERT, which costs the server
 * about a third less a row but cannot share a pipeline: store_samples_exec
 * runs it between st[copy_at - 1] and st[copy_at], before the per-node
 * summary and the jobs' row locks.  store_samples_release frees the
 * buffers and the results in st. */
struct store_batch_in {
	int64_t job_id;
	const struct rv_metrics_batch *batch;
};
enum { SS_SPEED_COLS = 6, SS_NODE_COLS = 14, SS_AGG_COLS = 8, SS_JOB_COLS = 4, SS_STMTS = 6 };
struct store_samples {
	union {
		struct {
			struct rv_buf speed[SS_SPEED_COLS];
			struct rv_buf node[SS_NODE_COLS];
			struct rv_buf agg[SS_AGG_COLS];
			struct rv_buf job[SS_JOB_COLS];
		};
		struct rv_buf bufs[SS_SPEED_COLS + SS_NODE_COLS + SS_AGG_COLS + SS_JOB_COLS];
	};
	const char *p_speed[SS_SPEED_COLS], *p_node[SS_NODE_COLS];
	const char *p_agg[SS_AGG_COLS], *p_job[SS_JOB_COLS];
	struct rv_db_stmt st[SS_STMTS];
	int want[SS_STMTS]; /* rows each statement must touch, -1 any */
	int n;
	struct rv_buf copy; /* node_usage rows as COPY text, when copy_rows */
	int copy_rows;      /* 0: the node samples' INSERT is in st */
	int copy_at;        /* the COPY runs before st[copy_at] */
};
enum { STORE_COPY_MIN_ROWS = 64 };
int store_samples_build(struct store_samples *ss, struct store_batch_in *in, int n,
			struct rv_err *err);
/* Run st[0..n) of the caller (ss's statements among them from st[first]
 * on, in their order) as one pipeline, or, with ss's COPY, as the
 * statements before it, the COPY, and the rest: 0, or the first failure's
 * negative errno (the later statements not run, the transaction aborted). */
int store_samples_exec(PGconn *c, const struct store_samples *ss, struct rv_db_stmt *st, int n,
		       int first, struct rv_err *err);
int store_samples_check(const struct store_samples *ss, struct rv_err *err);
void store_samples_release(struct store_samples *ss);
/* Claim b->batch_id (non-empty) for the job inside the caller's
 * transaction: 1 claimed (store the samples with a batch whose batch_id
 * is ""), 0 when it was stored before (*accepted = that batch's count). */
int store_metrics_claim(PGconn *c, int64_t job_id, const struct rv_metrics_batch *b, int *accepted,
			struct rv_err *err);
/* Store an event and its effect on the job/nodes/plans inside the caller's
 * transaction.  0 stored: *id_out the new row; 1 when ev->event_id was stored
 * for the job before: nothing written, *id_out that event's row and
 * *plan_out the plan it made (0 none). */
int store_event_insert(PGconn *c, int64_t job_id, const struct rv_event *ev, int64_t *id_out,
		       int64_t *plan_out, struct rv_err *err);
/* Record the plan an event made (an OOM's oom plan), for its resends. */
int store_event_set_result_plan(PGconn *c, int64_t event_id, int64_t plan_id, struct rv_err *err);
/* Insert a plan; fills plan->id. */
int store_plan_insert(PGconn *c, int64_t job_id, struct rv_scale_plan *plan, int64_t reverts,
		      struct rv_err *err);
/* Latest plan of stage (NULL/"" = any) with id > after; *out NULL when none. */
int store_plan_latest_json(PGconn *c, int64_t job_id, const char *stage, int64_t after,
			   cJSON **out, struct rv_err *err);
/* The same for a job given by uid, in one query: *text is the plan's JSON
 * (malloc'd, free it) or NULL when none; -ENOENT for an unknown job. */
int store_plan_latest_text(PGconn *c, const char *uid, const char *stage, int64_t after,
			   char **text, int64_t *job_id, struct rv_err *err);
int store_plan_history_json(PGconn *c, int64_t job_id, int limit, cJSON **out, struct rv_err *err);
/* A node whose monitor has not reported for this long is shown "stale" in
 * the listing (SQL interval text, seconds); it counts as capacity until
 * the expiry (cluster.node_ttl_s) deletes it. */
#define STORE_CLUSTER_FRESH_S "120"
/* The newest limit events of a job, oldest first: {"events":[...]}. */
int store_events_json(PGconn *c, int64_t job_id, int limit, cJSON **out, struct rv_err *err);
/* A job's data progress reports after since_ms (exclusive; -1 all), oldest
 * first, at most limit: {"progress":[{dataset, ts, epoch, samples_done,
 * shards_done, shards_doing}], "more", "next_since_ms"}.  A page that is
 * cut ends before the last report time it would have held in part, so
 * passing next_since_ms as since_ms reads on without a gap.  *out is the
 * caller's (cJSON_Delete).  0 or a negative errno. */
int store_progress_json(PGconn *c, int64_t job_id, int64_t since_ms, int limit, cJSON **out,
			struct rv_err *err);
/* Store a monitor report in one transaction of its own: every node sample
 * into the history (once per node and ts) and the newest per node into
 * cluster_nodes.  0 stored, 1 a resend of a report_id already stored
 * (nothing written), -EDQUOT (nothing stored) when its new nodes would take
 * the cluster past max_nodes, or a negative errno. */
int store_cluster_upsert(PGconn *c, const struct rv_cluster_report *r, int64_t max_nodes,
			 struct rv_err *err);
/* One page of nodes by name after cursor ("" from the start), at most limit,
 * with the cluster's totals and "next_cursor" when more follow. */
int store_cluster_json(PGconn *c, const char *cursor, int limit, cJSON **out, struct rv_err *err);
/* Free cluster capacity (ready nodes, capacity - used) from the totals the
 * triggers keep (no scan); -1/-1 when no ready node. */
int store_cluster_free(PGconn *c, double *cpu, int64_t *memory_mb, struct rv_err *err);
/* The largest ready node's CPU and memory (-1 each when none reported). */
int store_cluster_largest(PGconn *c, double *cpu, int64_t *memory_mb, struct rv_err *err);
/* Delete nodes not reported for ttl_s, at most 10,000 per call, in a
 * transaction of its own; returns how many. */
int store_cluster_expire(PGconn *c, int ttl_s, struct rv_err *err);
#define STORE_EXPIRE_BATCH 10000
/* The retention deletes: cluster node samples with a ts older than
 * samples_s, monitor report ids and metrics batch ids stored longer ago than
 * report_ids_s and batch_ids_s.  Each table in statements of at most
 * STORE_EXPIRE_BATCH rows, each its own transaction; returns the rows
 * deleted, or a negative errno (what was deleted before it stays deleted). */
int store_retention(PGconn *c, int64_t now_ms, int64_t samples_s, int64_t report_ids_s,
		    int64_t batch_ids_s, struct rv_err *err);
/* Namespace quotas, inside the registering transaction (serialised per
 * namespace): -EDQUOT naming the limit when one more running job, or
 * nodes more nodes, would pass max_jobs / max_nodes. */
int store_quota_check(PGconn *c, const char *namespace_, int64_t nodes, int64_t max_jobs,
		      int64_t max_nodes, struct rv_err *err);
/* The most nodes a spec may run: every role's max(replicas, maxReplicas). */
int64_t store_spec_nodes(const struct rv_job_spec *spec);
int store_ping(PGconn *c, struct rv_err *err);
/* A job's speed and per-timestamp node usage sums as columns (ts, ...),
 * each thinned to at most max_points by averaging equal spans of time, and
 * its last 500 plans with the job time they apply at; *out the caller's. */
int store_job_series_json(PGconn *c, int64_t job_id, int max_points, cJSON **out,
			  struct rv_err *err);
/* The jobs' CPU and memory used and allocated, summed per bucket_s over the
 * window_s before the newest node sample, and the cluster's ready capacity;
 * *out the caller's. */
int store_cluster_usage_json(PGconn *c, int64_t window_s, int64_t bucket_s, cJSON **out,
			     struct rv_err *err);
/* The rows (at most limit) of dashboard view v_<view> as a JSON array in the
 * view's order; -ENOENT for a name not among store_dashboard_name(0..). */
int store_dashboard_json(PGconn *c, const char *view, int limit, cJSON **out, struct rv_err *err);
/* The i-th dashboard's name, NULL past the last. */
const char *store_dashboard_name(int i);

/* planner inputs: every row read is parsed whole; one that does not parse
 * fails the call (-EIO naming the row) rather than being skipped. */
struct store_plan_row {
	struct rv_scale_plan plan;   /* plan.id set */
	enum rv_alg_stage stage;
	char algorithm[64];
	enum rv_alg_outcome outcome;
	int64_t applied_ts_ms;       /* 0 when not applied */
	double predicted_speed;
	int64_t reverts;             /* plan id this one reverts, 0 if none */
};
struct store_history_row {
	char uid[40], name[RV_NAME_MAX], user[128];
	double parameters, batch_size, dataset_size;
	struct rv_scale_plan plan;
	/* what its nodes used, [0] workers, [1] PS: p80 of CPU and peak memory
	 * over its samples; -1 when the role reported none */
	double used_cpu[2];
	int64_t used_mem_mb[2];
};
int store_job_spec(PGconn *c, int64_t job_id, struct rv_job_spec *spec, struct rv_err *err);
/* Applied plans, newest application first (the create plan counts as
 * applied); returns how many rows were written (at most max). */
int store_plans_applied(PGconn *c, int64_t job_id, struct store_plan_row *rows, int max,
			struct rv_err *err);
/* Newest plan of a stage (NULL: running or oom, the plans made after
 * registration): 1 found, 0 none, negative errno. */
int store_plan_latest_row(PGconn *c, int64_t job_id, const char *stage,
			  struct store_plan_row *out, struct rv_err *err);
/* Newest speed samples (at most limit), returned oldest first; caller frees *out. */
int store_speed_obs(PGconn *c, int64_t job_id, int limit, struct rv_alg_speed_obs **out,
		    size_t *n, struct rv_err *err);
/* Node usage and worker step times since since_ts; caller frees both arrays. */
int store_usage(PGconn *c, int64_t job_id, int64_t since_ts, int limit,
		struct rv_alg_usage **usage, size_t *nusage, struct rv_alg_step **steps,
		size_t *nsteps, struct rv_err *err);
/* The running-stage metrics summary: mean speed, count and sample standard
 * deviation (sd may be NULL) of samples in [from_ts, to_ts) for a
 * configuration (workers/ps < 0: any). */
int store_speed_summary(PGconn *c, int64_t job_id, int64_t from_ts, int64_t to_ts, int workers,
			int ps, double *mean, int *count, double *sd, struct rv_err *err);
/* Mean, count and sample standard deviation (sd may be NULL) of the newest
 * last_n speed samples in [since_ts, before_ts), any configuration. */
int store_speed_before(PGconn *c, int64_t job_id, int64_t since_ts, int64_t before_ts, int last_n,
		       double *mean, int *count, double *sd, struct rv_err *err);
int store_plan_set_outcome(PGconn *c, int64_t plan_id, const char *outcome, double before,
			   double after, struct rv_err *err);
/* The newest sample time the planner considered for the job becomes ts_ms
 * (never lower).  Written to job_planned, a row only planner passes write,
 * so a pass's snapshot never meets a metrics batch there (a batch updates
 * the job's row).  0 or negative errno. */
int store_job_set_planned(PGconn *c, int64_t job_id, int64_t ts_ms, struct rv_err *err);
/* Finished jobs of a strategy with the configuration they kept; returns rows
 * (jobs without a plan are left out; a plan that does not parse is -EIO). */
int store_history(PGconn *c, enum rv_strategy strategy, int limit, struct store_history_row *rows,
		  struct rv_err *err);
/* The speed summaries of an outcome window (rv_alg_outcome_window); the
 * fallback before_all is read only when before has fewer than min_before. */
int store_outcome_speeds(PGconn *c, int64_t job_id, const struct rv_alg_outcome_window *w,
			 int min_before, struct rv_alg_outcome_speeds *out, struct rv_err *err);
/* How many OOMs a node of the job had (0 for an unknown node). */
int store_node_oom_count(PGconn *c, int64_t job_id, const char *node, int *count,
			 struct rv_err *err);

/* ---- store.c: the planner's pass ---- */
/* The per-job planner lock (a session-level PostgreSQL advisory lock, so
 * two brains on one database never plan a job at once): 1 taken, 0 held
 * by another session, negative errno.  store_plan_unlock releases it. */
int store_plan_lock(PGconn *c, int64_t job_id, struct rv_err *err);
int store_plan_unlock(PGconn *c, int64_t job_id, struct rv_err *err);
/* The same lock until the caller's transaction ends, waiting for a pass in
 * progress (the connection's statement timeout bounds the wait): an oom
 * event and its plan commit between two passes, never inside one whose
 * snapshot predates them.  0 or negative errno. */
int store_plan_lock_xact(PGconn *c, int64_t job_id, struct rv_err *err);
/* Begin a REPEATABLE READ transaction: everything the pass reads is one
 * snapshot.  The caller owns it (rv_db_commit / rv_db_rollback). */
int store_begin_snapshot(PGconn *c, struct rv_err *err);
/* Ids of running jobs with samples newer than their planned_ts (at most
 * max, lowest first); returns how many. */
int store_jobs_unplanned(PGconn *c, int64_t *ids, int max, struct rv_err *err);

/* An integer column of a result PostgreSQL produced (so well-formed); 0 for
 * NULL or anything out of int range. */
int store_pg_int(const char *text);

/* ---- supervisor.c ---- */
/* Start the housekeeping thread (after the pool exists); 0 or -errno. */
int supervisor_start(struct brain *b);
/* Stop it and wait; a no-op when not running.  Before rv_pgserver_stop. */
void supervisor_stop(struct brain *b);

/* ---- planner.c ---- */
/* Create-stage plan for a new job, read and decided in the caller's
 * transaction (the caller stores it).  0, or a negative errno with *err
 * naming the cause. */
int planner_create_plan(struct brain *b, PGconn *c, const struct store_job *job,
			const struct rv_job_spec *spec, struct rv_scale_plan *plan,
			struct rv_err *err);
/* OOM-stage plan after a node_oom event (the caller stores it).  0 with the
 * plan, -ENOENT when the job has no applied plan, another negative errno
 * on failure; *err names the cause either way. */
int planner_oom_plan(struct brain *b, PGconn *c, const struct store_job *job,
		     const struct rv_event *ev, struct rv_scale_plan *plan, struct rv_err *err);
/* Mark a job's metrics changed (debounced running-stage planning). */
void planner_touch(struct brain *b, int64_t job_id);
int planner_start(struct brain *b);
void planner_stop(struct brain *b);
/* Wake long-polls after a plan was stored. */
void planner_notify(struct brain *b);
/* Drop cached plan answers: something a plan's JSON shows changed. */
void api_plans_changed(struct brain *b);

#endif
