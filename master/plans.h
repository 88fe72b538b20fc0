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
 * none came, the in-process policy (rv_plan_oom) over the desired state.
 * Returns 1 with *memory_mb from the planner's plan, 0 with it from the
 * in-process policy, or a negative errno.  Never under the state lock.
 */
int plans_oom_memory(struct master *m, const struct rv_event *ev, int64_t *memory_mb);

#endif
