/*
 * brainlink.h: the master's link to the job's planner.
 *
 * cluster: rover-brain over common/brain_client.  A sender thread registers
 * the job (unless the caller gives the uid it journalled, so a restarted
 * master never registers twice), then posts the reports the caller enqueued
 * (speed and usage samples in metrics batches, events one by one) in order,
 * each batch and event with its id, resent with the same id until the brain
 * acknowledges it, so the brain stores each once.  A poller thread long-polls
 * running-stage plans; oom plans come back in the reply to their node_oom
 * event.  Every plan goes to a queue the master's state owner drains
 * (brainlink_plan_take, with brainlink_fd() readable while one waits).
 * Brain down or slow: reports stay in a bounded queue (count and bytes; when
 * full the oldest are dropped and counted), both threads back off and carry
 * on, the last plan stays available; enqueueing never waits for the brain.
 *
 * single-job: no brain, no threads.  Reports feed bounded in-memory windows
 * and brainlink_plan_local() runs the brain's own policy (rv_alg_plan_step,
 * rv_alg_plan_oom, rv_alg_plan_create_job from algorithms/) over them, so
 * the plans are the ones the brain would make from the same history.
 *
 * manual: as cluster when a brain url is given, else as single-job, but
 * every plan handed back says apply = false: nothing changes by itself.
 *
 * Threading: every function may be called from any thread; enqueueing takes
 * one short mutex and never does I/O.  Never logs above debug.
 */
#ifndef MASTER_BRAINLINK_H
#define MASTER_BRAINLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brain_client.h"
#include "err.h"
#include "wire.h"

struct brainlink_opts {
	enum rv_optimize_mode mode;     /* RV_OPT_CLUSTER, RV_OPT_SINGLE_JOB, RV_OPT_MANUAL */
	const struct rv_job_spec *spec; /* borrowed for the call; copied */
	struct rv_brain_opts brain;     /* url (cluster, manual), token, timeouts; copied.
				      * Retries are the link's own: the client
				      * makes one attempt per call */
	const char *uid;                /* the uid a previous run registered (from the
				      * master's journal): NULL or "" registers */
	int max_queue;                  /* reports buffered (samples + events): 20000 */
	size_t max_queue_bytes;         /* their memory: 8 MiB */
	int batch_max;                  /* samples per metrics batch: 500 */
	int batch_delay_ms;             /* longest a sample waits to fill a batch: 1000 */
	int poll_wait_s;                /* long-poll wait per plan request: 5 (a stop
				      * waits for the one in flight) */
	int backoff_ms;                 /* first pause after a failed call: 100 */
	int backoff_max_ms;             /* longest pause: 5000 */
	int min_samples;                /* single-job: as the brain's plan.min_samples: 3 */
	int max_plans;                  /* plans waiting in the queue (oldest dropped): 64 */
};

/* A plan handed to the master.  apply is false in manual mode (report it,
 * change nothing).  plan.job is the job's uid (cluster; the master journals
 * it to pass back as opts.uid after a restart), plan.id the brain's id (a
 * local sequence in single-job mode).  After a master restart the poller
 * hands the brain's newest running plan again: the master skips an id it
 * journalled as applied. */
struct brainlink_plan {
	struct rv_scale_plan plan;
	bool apply;
};

struct brainlink_stats {
	int64_t queued; /* reports waiting (samples + events) */
	int64_t queued_bytes;
	int64_t sent_samples; /* acknowledged by the brain */
	int64_t sent_events;
	int64_t dropped_samples; /* the oldest, dropped when the queue was full */
	int64_t dropped_events;
	int64_t resends;       /* batches and events sent again after a failure */
	int64_t plans;         /* plans handed to the queue */
	int64_t plans_dropped; /* plans the caller did not take in time */
	bool registered;       /* the job has its uid */
	bool reachable;        /* the last call to the brain got an answer */
	char last_error[512];  /* "" when none yet */
};

struct brainlink;

/*
 * Start the link (and in cluster mode its two threads).  NULL with *err set
 * on a bad option or out of memory; the brain being down is no error here
 * (reports wait, registration is retried).  In single-job and manual mode
 * without a brain the create-stage plan is queued at once; in cluster mode
 * it is queued when the brain registered the job (none when opts->uid was
 * given).  Stop and free with brainlink_stop.
 */
struct brainlink *brainlink_start(const struct brainlink_opts *opts, struct rv_err *err);

/*
 * Stop: sends what it can until deadline_ms from now (0: drop at once),
 * joins the threads (a call in flight is waited for: a post at most the
 * client's timeout_ms, a long-poll poll_wait_s more), frees everything.  Returns how
 * many reports were left unsent, 0 when all went.  Accepts NULL.
 */
int brainlink_stop(struct brainlink *l, int deadline_ms);

/* Queue one sample or event; never blocks on the brain.  s/ev borrowed;
 * ev->event_id may be "" (one is made).  0, or -EINVAL on a bad kind.  When
 * the queue is full the oldest reports are dropped (counted in stats). */
int brainlink_sample(struct brainlink *l, const struct rv_sample *s);
int brainlink_event(struct brainlink *l, const struct rv_event *ev);
/* A plan_applied event for plan_id at job time ts_ms (the policy measures
 * the plan from then on). */
int brainlink_plan_applied(struct brainlink *l, int64_t plan_id, int64_t ts_ms);

/* Readable (eventfd) while a plan waits in the queue; owned by the link. */
int brainlink_fd(const struct brainlink *l);
/* Take the oldest waiting plan: 1 with *out, 0 when none came within
 * timeout_ms (0: do not wait). */
int brainlink_plan_take(struct brainlink *l, struct brainlink_plan *out, int timeout_ms);
/* The newest plan received (kept while the brain is down): 1, or 0 none yet. */
int brainlink_last_plan(struct brainlink *l, struct brainlink_plan *out);

/* The job's uid into uid (RV_BRAIN_UID_MAX): 1, or 0 while not registered. */
int brainlink_uid(struct brainlink *l, char uid[RV_BRAIN_UID_MAX]);

void brainlink_stats(struct brainlink *l, struct brainlink_stats *st);

/*
 * single-job (and manual without a brain): one running-stage pass of the
 * policy over the samples held in memory, as the brain's planner makes it.
 * 1 with *out (may be NULL) when it made a plan, which also goes to the
 * plan queue; 0 when none; -EOPNOTSUPP with a brain; -ENOMEM.
 */
int brainlink_plan_local(struct brainlink *l, struct brainlink_plan *out, struct rv_err *err);

#endif
