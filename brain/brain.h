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
	char db[1024];
	char data_dir[512];
	char sql_dir[512];
	long long pool_size;
	long long statement_timeout_ms;
	long long acquire_timeout_ms;
	long long plan_interval_s;
	long long plan_debounce_ms;
	long long max_wait_s;
	long long min_samples;
	char log_level[16];
};

#define PLANNER_QUEUE_MAX 4096

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

	/* Planner: jobs whose metrics changed, computed after the debounce. */
	pthread_t planner_thread;
	bool planner_running;
	pthread_mutex_t planner_mu;
	pthread_cond_t planner_cv;
	atomic_bool planner_stop;   /* also read by long-polls, without the lock */
	int64_t dirty_job[PLANNER_QUEUE_MAX];
	int64_t dirty_since_ms[PLANNER_QUEUE_MAX];
	int ndirty;

	atomic_uint_least64_t samples_ingested;
	atomic_uint_least64_t batches_ingested;
	atomic_uint_least64_t batches_rejected;
	atomic_uint_least64_t events_ingested;
	atomic_uint_least64_t plans_stored;
	atomic_uint_least64_t db_unavailable;
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
int api_events_list(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_cluster_post(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);
int api_cluster_get(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);

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
int store_job_find_id(PGconn *c, int64_t id, struct store_job *out, struct rv_err *err);
/* Full job document (spec, status, node table); caller owns the cJSON. */
int store_job_get_json(PGconn *c, const char *uid, cJSON **out, struct rv_err *err);
int store_job_list_json(PGconn *c, const char *namespace_, const char *status, int limit,
			int offset, cJSON **out, struct rv_err *err);
/* Store a batch inside the caller's transaction (which makes it all or
 * nothing).  0 stored, *accepted = b->n; 1 when b->batch_id was stored for
 * the job before: nothing written, *accepted = that batch's sample count. */
int store_metrics_insert(PGconn *c, int64_t job_id, const struct rv_metrics_batch *b, int *accepted,
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
/* A node whose monitor has not reported for this long no longer counts as
 * capacity (SQL interval text, seconds). */
#define STORE_CLUSTER_FRESH_S "120"
/* Every node sample into the history (once per node and ts) and the newest
 * per node into cluster_nodes.  Run in a transaction.  0 stored, 1 a resend
 * of a report_id already stored (nothing written), negative errno. */
/* The newest limit events of a job, oldest first: {"events":[...]}. */
int store_events_json(PGconn *c, int64_t job_id, int limit, cJSON **out, struct rv_err *err);
int store_cluster_upsert(PGconn *c, const struct rv_cluster_report *r, struct rv_err *err);
int store_cluster_json(PGconn *c, cJSON **out, struct rv_err *err);
/* Free cluster capacity (ready nodes that reported within
 * STORE_CLUSTER_FRESH_S, capacity - used); -1/-1 when no node ever reported. */
int store_cluster_free(PGconn *c, double *cpu, int64_t *memory_mb, struct rv_err *err);
int store_ping(PGconn *c, struct rv_err *err);

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
};
int store_job_spec(PGconn *c, int64_t job_id, struct rv_job_spec *spec, struct rv_err *err);
/* Applied plans, newest application first (the create plan counts as
 * applied); returns how many rows were written (at most max). */
int store_plans_applied(PGconn *c, int64_t job_id, struct store_plan_row *rows, int max,
			struct rv_err *err);
/* Newest plan of a stage: 1 found, 0 none, negative errno. */
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
/* Begin a REPEATABLE READ transaction: everything the pass reads is one
 * snapshot.  The caller owns it (rv_db_commit / rv_db_rollback). */
int store_begin_snapshot(PGconn *c, struct rv_err *err);
/* Ids of running jobs with samples newer than their planned_ts (at most
 * max, lowest first); returns how many. */
int store_jobs_unplanned(PGconn *c, int64_t *ids, int max, struct rv_err *err);

/* An integer column of a result PostgreSQL produced (so well-formed); 0 for
 * NULL or anything out of int range. */
int store_pg_int(const char *text);

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

#endif
