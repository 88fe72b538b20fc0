/*
 * brain_client.h: typed calls to rover-brain's REST API, over the wire
 * messages (wire.h) and the HTTP client (http.h).  rover-sim uses it; the
 * master and the monitor are meant to, so no daemon builds a message or
 * parses a plan by hand.
 *
 * Every call has a timeout and sends the bearer token when one is set.
 * Calls that are safe to repeat are retried after a transport error or a
 * 502/503/504, with exponential back-off bounded by a count and a total
 * time: reads, metrics batches and events (each carries an id the brain
 * stores once, generated here when the caller gives none) and cluster
 * reports (they replace node rows).  Registering a job is not idempotent (a
 * second one gets 409) and is retried only when the connection was refused,
 * when nothing reached the brain.
 *
 * Errors: a negative errno from the HTTP status (400 -EINVAL, 401 -EACCES,
 * 404 -ENOENT, 409 -EEXIST, 410 -ECANCELED, 413 -EMSGSIZE, 422 -EDOM, 503
 * -EAGAIN, 504 -ETIMEDOUT, other -EIO) or from the transport (-ECONNREFUSED,
 * -ETIMEDOUT, ...), with err->msg naming the call, the status and the
 * brain's error text and err->field the field the brain named.
 *
 * A struct rv_brain_client belongs to one thread (it owns one curl handle).
 * Never logs.
 */
#ifndef RV_BRAIN_CLIENT_H
#define RV_BRAIN_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "wire.h"

#define RV_BRAIN_UID_MAX 64

struct rv_brain_opts {
	const char *url;        /* "http://127.0.0.1:8080"; copied */
	const char *token;      /* NULL or "" = none; copied */
	int connect_timeout_ms; /* per attempt; default 2000 */
	int timeout_ms;         /* per attempt (a long-poll adds its wait); default 10000 */
	int max_attempts;       /* for retried calls; default 5, 1 = never retry */
	int backoff_ms;         /* first pause, doubled after each retry; default 100 */
	int backoff_max_ms;     /* longest pause; default 2000 */
	int retry_budget_ms;    /* no retry starts after this long since the call began
				   * (a long-poll's wait is added); default 30000 */
};

struct rv_brain_client;

/* A client, or NULL with *err set (bad url or token, out of memory).  opts
 * is borrowed for the call; fields left 0 take their defaults.  Free with
 * rv_brain_client_free. */
struct rv_brain_client *rv_brain_client_new(const struct rv_brain_opts *opts, struct rv_err *err);
/* Accepts NULL; returns NULL. */
struct rv_brain_client *rv_brain_client_free(struct rv_brain_client *c);

/* HTTP status of the last call's last response (0: none came) and how many
 * attempts it took. */
long rv_brain_last_status(const struct rv_brain_client *c);
int rv_brain_last_attempts(const struct rv_brain_client *c);

/* A fresh random id for a batch or an event (32 hex digits) into out
 * (RV_ID_MAX bytes).  0 or a negative errno from getrandom. */
int rv_brain_new_id(char out[RV_ID_MAX]);

/* POST /v1/jobs.  spec is borrowed.  On success uid gets the job's uid and
 * *plan (when not NULL) the create-stage plan.  -EEXIST when a running job
 * has the name. */
int rv_brain_register(struct rv_brain_client *c, const struct rv_job_spec *spec,
		      char uid[RV_BRAIN_UID_MAX], struct rv_scale_plan *plan, struct rv_err *err);

/* POST /v1/jobs/{uid}/metrics.  batch is borrowed; when batch->batch_id is
 * "" it is filled with a new id before the first attempt, so a later resend
 * of the same struct is stored once.  *accepted (may be NULL) gets the
 * sample count the brain acknowledged. */
int rv_brain_post_metrics(struct rv_brain_client *c, const char *uid,
			  struct rv_metrics_batch *batch, int *accepted, struct rv_err *err);

/* POST /v1/jobs/{uid}/events.  ev is borrowed; ev->event_id is filled as
 * batch_id above.  *plan_id (may be NULL) gets the plan the event made (an
 * OOM's oom plan), 0 when none; a resend gets the same id. */
int rv_brain_post_event(struct rv_brain_client *c, const char *uid, struct rv_event *ev,
			int64_t *plan_id, struct rv_err *err);

/* GET /v1/jobs/{uid}/plan: the newest plan of stage (NULL: any) with an id
 * above after (0: any); wait_s > 0 long-polls that long for one.  1 with
 * *plan filled, 0 when none came (or none exists yet), negative errno. */
int rv_brain_plan_get(struct rv_brain_client *c, const char *uid, const char *stage, int64_t after,
		      int wait_s, struct rv_scale_plan *plan, struct rv_err *err);

/* One plan of the history, with what the brain learnt of it. */
struct rv_brain_plan_record {
	struct rv_scale_plan plan;
	bool applied;
	char outcome[16];        /* pending, better, neutral, worse, unknown */
	double speed_before;     /* -1 when not measured */
	double speed_after;      /* -1 when not measured */
	int64_t reverts_plan_id; /* 0 when it reverts none */
	/* applied: what the master did not apply of it, "" when applied in full */
	char not_applied[RV_NOT_APPLIED_MAX];
};

/* GET /v1/jobs/{uid}/plans?limit=: *out gets a malloc'd array of *n records,
 * oldest first (free() it; NULL when none). */
int rv_brain_plan_history(struct rv_brain_client *c, const char *uid, int limit,
			  struct rv_brain_plan_record **out, int *n, struct rv_err *err);

/* What GET /v1/jobs/{uid} says of a job's progress. */
struct rv_brain_job {
	char uid[RV_BRAIN_UID_MAX];
	char status[16];           /* running, finished, failed */
	int64_t last_sample_ts_ms; /* newest sample stored (job time) */
	int64_t planned_ts_ms;     /* newest sample the planner has considered */
	int64_t speed_samples, node_samples;
	int64_t latest_plan_id; /* 0 when none */
};
int rv_brain_job_get(struct rv_brain_client *c, const char *uid, struct rv_brain_job *out,
		     struct rv_err *err);

/* POST /v1/cluster/nodes.  r is borrowed. */
int rv_brain_cluster_report(struct rv_brain_client *c, const struct rv_cluster_report *r,
			    struct rv_err *err);

struct rv_brain_cluster {
	struct rv_cluster_report nodes; /* release with rv_cluster_report_release */
	int ready_nodes;
	double cpu, cpu_used, cpu_free; /* ready nodes, cores */
	int64_t memory_mb, memory_used_mb, memory_free_mb;
	int gpu;
};
/* GET /v1/cluster: the totals over every node, and the first page of nodes
 * (the brain's default page, 100; the listing is paginated by cursor).
 * out->nodes is the caller's to release. */
int rv_brain_cluster_get(struct rv_brain_client *c, struct rv_brain_cluster *out,
			 struct rv_err *err);

#endif
