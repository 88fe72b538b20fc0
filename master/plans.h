/*
 * plans.h: what the node manager tells the planner, and what it asks it.
 *
 * The node manager reads each node's usage (cgroup cpu, memory, limits and
 * throttling) and sees nodes exit or run out of memory; it reports them
 * here and they reach the brain (cluster mode) or the in-process policy
 * (single-job, manual without a brain) as samples and events.  On an OOM it
 * asks plans_oom_memory for the memory of the relaunch.
 *
 * Threading: any thread, with or without the state lock, except
 * plans_oom_memory, which waits and must be called without it.  Before
 * plans_start and after plans_stop the calls do nothing (return 0).
 * Below them, the daemon's own calls (start, stop, status) and what the
 * job state reaches through m->svc.
 */
#ifndef MASTER_PLANS_H
#define MASTER_PLANS_H

#include <stdint.h>

#include "master.h"

/* One node's usage, as the node manager reads it. */
struct plans_usage {
	char node[RV_NAME_MAX];
	enum rv_role role;
	int rank;                /* -1: unknown */
	int64_t ts_ms;           /* 0: now */
	double cpu;              /* cores used */
	double cpu_limit;        /* cores, 0: none */
	int64_t memory_mb;       /* used */
	int64_t memory_limit_mb; /* 0: none */
	double throttled;        /* share of CPU periods throttled since the last
			      * sample (cpu.stat), 0..1: counted in /metrics */
	/* the cgroup's cumulative cpu.stat counters (0: none): the planner
	 * (the brain, or the in-process policy) turns consecutive samples into
	 * the throttled share that tells a starved role from a tight one */
	int64_t nr_periods, nr_throttled, throttled_usec;
	double step_time;        /* seconds per step, -1: unknown */
};

/* Queue one usage sample for the planner.  0, -EINVAL (no node name), or
 * the link's negative errno. */
int plans_node_sample(struct master *m, const struct plans_usage *u);

/*
 * Queue one node event (ev borrowed): node_failed, node_oom (prefer
 * plans_oom_memory, which reports it too), node_relaunched or
 * node_finished.  ev->ts_ms 0: now.  0, -EINVAL (a job-level or plan
 * event, or no node name), or the link's negative errno.
 */
int plans_node_event(struct master *m, const struct rv_event *ev);

/*
 * The job ended as the node manager sees it (every node exited 0, or one
 * was given up): tell the brain once, job_finished or job_failed with
 * reason (borrowed), as a finished dataset or a failed rendezvous does.
 * Takes the state lock.
 */
void plans_job_end(struct master *m, bool succeeded, const char *reason);

/*
 * The memory for the relaunch of the node that ran out (ev: a node_oom
 * event with node, role, memory_mb in force and peak_memory_mb; reported
 * to the planner here).  Waits up to cfg.plan_oom_wait_ms for the
 * planner's oom plan naming the node (the brain's in cluster mode); when
 * none came, the in-process policy (rv_scaling_oom) over the desired state.
 * Returns 1 with *memory_mb from the planner's plan, 0 with it from the
 * in-process policy, or a negative errno.  Never under the state lock.
 */
int plans_oom_memory(struct master *m, const struct rv_event *ev, int64_t *memory_mb);

/* ---- the daemon's own calls: main.c, api.c, and the job state through
 * the entries plans_init registers in m->svc ---- */

/* Before state_open: the desired state from the spec, and the planner's
 * entries in m->svc (MASTER_OP_PLAN, its snapshot part, the operations and
 * deaths it reports). */
void plans_init(struct master *m);
/* Before state_open: the mode and brain url make sense (cluster mode has a
 * url); 0 or -EINVAL with err naming the field. */
int plans_check(const struct master *m, struct rv_err *err);
/* After state_open (the journalled uid is known), before the API: start the
 * link and the plan thread.  0 or a negative errno with err. */
int plans_start(struct master *m, struct rv_err *err);
/* After the API and the node manager stopped, before state_close: stop the
 * plan thread, send what is queued for up to cfg.brain_stop_ms.
 * Idempotent. */
void plans_stop(struct master *m);
/* Under m->lock, from state_apply (m->svc.after_op): an operation was
 * journaled (not replay): report it (steps, leaves, the job's end). */
void plans_after_op(struct master *m, int type, const struct master_op *op);
/* Under m->lock (m->svc.node_lost): the timer declared node dead for
 * silence. */
void plans_node_lost(struct master *m, const char *node);
/* Under m->lock, from apply (m->svc.apply_plan; live and replay):
 * MASTER_OP_PLAN with the plan's JSON: the desired state follows it.  1
 * when it changed, 0 when not, or a negative errno with err. */
int plans_apply(struct master *m, const void *doc, size_t len, struct rv_err *err);
/* Under m->lock: the snapshot's part, appended as `,"plans":{...}`, and
 * its load from the snapshot's extra document (absent: nothing). */
int plans_snapshot_save(const struct master *m, struct rv_buf *out);
int plans_snapshot_load(struct master *m, const cJSON *extra, struct rv_err *err);
/* Under m->lock: the brain, plan and desired parts of GET /v1/job. */
void plans_status(struct master *m, struct rv_job_status *js);
/* The link's counters for /metrics (takes no state lock). */
void plans_metrics(struct master *m, struct rv_buf *out);

#endif
