/*
 * master_client.h: typed calls to rover-master's control API over the wire
 * messages (wire.h) and the HTTP client (http.h).  rover-run, the trainer
 * library and the tests use it, so nobody builds a control message by hand.
 *
 * Every call has a timeout and sends the bearer token when one is set.
 * Calls that are safe to repeat are retried after a transport error or a
 * 502/503/504 with exponential back-off (jittered), bounded by a count and a
 * total time, so a client carries on across a master restart: reads (world,
 * job, checkpoint export), heartbeats, step and checkpoint reports, shard
 * done (a repeated done is counted once), shard next (it carries a request
 * id, so a retry gets the task the lost reply held, never a second one) and
 * failure reports (a node that already left stays left).  A rendezvous join
 * and a checkpoint import are retried only when the connection was refused,
 * when nothing reached the master.
 *
 * Errors: a negative errno from the HTTP status (400 -EINVAL, 401 -EACCES,
 * 404 -ENOENT, 409 -EEXIST, 410 -ECANCELED (the rendezvous failed: the job
 * stops), 413 -EMSGSIZE, 422 -EDOM, 503 -EAGAIN, 504
 * -ETIMEDOUT, other -EIO) or from the transport, with err->msg naming the
 * call, the status and the master's error text and err->field the field the
 * master named.
 *
 * A struct rv_master_client belongs to one thread (one curl handle, kept
 * alive between calls).  Never logs.
 */
#ifndef RV_MASTER_CLIENT_H
#define RV_MASTER_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "wire.h"

struct rv_master_opts {
	const char *url;        /* "http://127.0.0.1:7070"; copied */
	const char *token;      /* NULL or "" = none; copied */
	int connect_timeout_ms; /* per attempt; default 2000 */
	int timeout_ms;         /* per attempt (a long-poll adds its wait); default 10000 */
	int max_attempts;       /* retried calls; default 20, 1 = never retry */
	int backoff_ms;         /* first pause, doubled after each retry; default 20 */
	int backoff_max_ms;     /* longest pause; default 1000 */
	int retry_budget_ms;    /* no retry starts after this long; default 30000 */
};

struct rv_master_client;

/* A client, or NULL with *err set (bad url, out of memory).  opts is
 * borrowed; fields left 0 take their defaults.  Free with
 * rv_master_client_free (accepts NULL, returns NULL). */
struct rv_master_client *rv_master_client_new(const struct rv_master_opts *opts,
					      struct rv_err *err);
struct rv_master_client *rv_master_client_free(struct rv_master_client *c);

/* How many attempts the last call made. */
int rv_master_last_attempts(const struct rv_master_client *c);

/* POST /v1/rdzv/join: *round gets the round the node waits for.  -ECANCELED
 * once the rendezvous failed (gang wait ran out). */
int rv_master_join(struct rv_master_client *c, const struct rv_rdzv_join *j, int64_t *round,
		   struct rv_err *err);

/* GET /v1/rdzv/world?node=&round=&wait=: long-polls up to wait_ms (0: just
 * look) for the round to complete.  0 with *out filled (its status says
 * complete, gathering, stale, spare, failed or unknown; release *out with
 * rv_rdzv_world_reply_release), or a negative errno. */
int rv_master_world(struct rv_master_client *c, const char *node, int64_t round, int wait_ms,
		    struct rv_rdzv_world_reply *out, struct rv_err *err);

/* The other way round: long-poll while round is complete with this node in
 * it, answering (*out as above) once it is not, or after wait_ms: a status
 * other than RV_RDZV_COMPLETE means the world changed (a node failed, left
 * or joined).  rover-run stops its workers on it at once. */
int rv_master_world_watch(struct rv_master_client *c, const char *node, int64_t round, int wait_ms,
			  struct rv_rdzv_world_reply *out, struct rv_err *err);

/* Join, then long-poll until the round completes with this node in it
 * (joining again when the round went stale or the master forgot the node),
 * or timeout_ms passes (-ETIMEDOUT), or the rendezvous failed (-ECANCELED).
 * *out as above. */
int rv_master_rendezvous(struct rv_master_client *c, const struct rv_rdzv_join *j, int timeout_ms,
			 struct rv_rdzv_world_reply *out, struct rv_err *err);

/* POST /v1/heartbeat.  *out may be NULL. */
int rv_master_heartbeat(struct rv_master_client *c, const char *node,
			struct rv_heartbeat_reply *out, struct rv_err *err);
/* POST /v1/heartbeat with done: every worker of the node finished, so the
 * master takes its silence from now on for an end, not a death (a peer may
 * still be in its last steps). */
int rv_master_finished(struct rv_master_client *c, const char *node, struct rv_err *err);

/* POST /v1/failure. */
int rv_master_failure(struct rv_master_client *c, const struct rv_failure_report *f,
		      struct rv_err *err);

/* POST /v1/shards/next.  req is borrowed; when req->req is 0 a fresh random
 * id is used for this call (kept over its retries).  *out: a task, wait or
 * finished. */
int rv_master_shard_next(struct rv_master_client *c, const struct rv_shard_next *req,
			 struct rv_shard_task *out, struct rv_err *err);

/* POST /v1/shards/done.  *counted (may be NULL): false for a late or
 * repeated done.  -EPERM (409 from the master maps to -EEXIST) when the task
 * is another worker's. */
int rv_master_shard_done(struct rv_master_client *c, const struct rv_shard_done *d, bool *counted,
			 struct rv_err *err);

/* POST /v1/shards/ckpt/report. */
int rv_master_ckpt_report(struct rv_master_client *c, const struct rv_ckpt_report *r,
			  struct rv_err *err);

/* GET /v1/shards/ckpt?step=: *out is the caller's (rv_data_ckpt_release).
 * -ENOENT when no report of that step is kept; -EEXIST (409) when not every
 * rank of the world that trained the step reported it yet. */
int rv_master_ckpt_export(struct rv_master_client *c, int64_t step, struct rv_data_ckpt *out,
			  struct rv_err *err);

/* POST /v1/shards/ckpt/import: replaces the shard state with ck. */
int rv_master_ckpt_import(struct rv_master_client *c, const struct rv_data_ckpt *ck,
			  struct rv_err *err);

/* POST /v1/steps. */
int rv_master_step(struct rv_master_client *c, const struct rv_step_report *s, struct rv_err *err);

/* GET /v1/job. */
int rv_master_job(struct rv_master_client *c, struct rv_job_status *out, struct rv_err *err);

/* POST /v1/streams/{dataset}/partitions: offsets below e->end_offset of
 * partition e->partition are available (a lower end than known changes
 * nothing, so a retry is harmless).  -ENOENT: not a streaming dataset of the
 * job, or no such partition. */
int rv_master_stream_end(struct rv_master_client *c, const char *dataset,
			 const struct rv_stream_end *e, struct rv_err *err);

/* GET /v1/streams/{dataset}: per partition the committed offset (resume
 * there) and the known end.  *out is the caller's (nothing to release). */
int rv_master_stream(struct rv_master_client *c, const char *dataset, struct rv_stream_status *out,
		     struct rv_err *err);

/* Network check (master/README.md).  POST /v1/netcheck/join: the first join
 * of a world starts a check of its members; *out says which.  -EEXIST: no
 * world of two or more nodes yet, or the node is not in it. */
int rv_master_netcheck_join(struct rv_master_client *c, const char *node,
			    struct rv_netcheck_joined *out, struct rv_err *err);
/* GET /v1/netcheck/group: node's group in round (0 or 1): status ready with
 * the peers, or wait (ask again).  -ENOENT: the node is not in the check. */
int rv_master_netcheck_group(struct rv_master_client *c, const char *node, int round,
			     struct rv_netcheck_group_reply *out, struct rv_err *err);
/* POST /v1/netcheck/report.  A report after its round closed is accepted
 * and ignored (the node counted as failed).  -EEXIST: not the current
 * check, round 1 not open yet, or another result for the round. */
int rv_master_netcheck_report(struct rv_master_client *c, const struct rv_netcheck_report *r,
			      struct rv_err *err);
/* POST /v1/usage: this node's resource usage (retried: a repeat only
 * replaces the node's last report).  GET /v1/usage: the last report of each
 * node, at most max into out; *n gets the count. */
int rv_master_usage(struct rv_master_client *c, const struct rv_node_usage *u, struct rv_err *err);
int rv_master_usage_list(struct rv_master_client *c, struct rv_node_usage *out, int max, int *n,
			 struct rv_err *err);
/* GET /v1/netcheck: release *out with rv_netcheck_status_release. */
int rv_master_netcheck(struct rv_master_client *c, struct rv_netcheck_status *out,
		       struct rv_err *err);

#endif
