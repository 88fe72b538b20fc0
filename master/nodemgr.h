/*
 * nodemgr.h: rover-master's node manager: the thread that runs the job's
 * nodes through a scheduler backend (sched.h, the local one today) and the
 * relaunch policy (nodes.h).
 *
 * One node thread owns the backend and the policy.  It launches each role's
 * nodes <role>-<rank> from m->desired (the spec's replica specs, then the
 * applied plans), feeds every backend event to the policy and carries out
 * its answer (relaunch with the same rank, more memory after an OOM kill,
 * or the job FAILED), reconciles the nodes whenever m->desired.version
 * changes, samples each node's usage, and ends the job: every node exited 0
 * is SUCCEEDED; then, job.linger_s later, the master stops (exit 0, or 1
 * when FAILED).  Every launch and end is journaled (MASTER_OP_NODE_LAUNCHED
 * / ENDED, JSON documents applied by nodetable_apply under the state lock), so
 * a restarted master relaunches the nodes that were live, with their rank
 * and counters, without charging a crash.
 *
 * The table m->nodes (struct master_node, nodetable.h) is under m->lock:
 * /v1/job and the brain link read it there (nodemgr_usage_each).
 */
#ifndef NODEMGR_H
#define NODEMGR_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "json.h"
#include "master.h"
#include "nodes.h"
#include "nodetable.h"
#include "sched.h"

/* Whether the master runs the nodes itself: 1 (scheduler local, or auto
 * with a command in a replica spec), 0 (none: agents are started by someone
 * else), or -EINVAL with err naming the key or spec field (local without a
 * worker command, an unknown scheduler or limits mode). */
int nodemgr_wanted(const struct master_cfg *cfg, const struct rv_job_spec *spec,
		   struct rv_err *err);

/* Start the node thread; master_addr ("host:port" the API listens on) is
 * what each node gets in ROVER_MASTER_ADDR (copied).  After state_open and
 * master_api_start.  0 or a negative errno with err (the backend cannot be
 * used, out of memory). */
int nodemgr_start(struct master *m, const char *master_addr, struct rv_err *err);

/* Stop the thread: live nodes get SIGTERM, then SIGKILL after
 * node.stop_grace_ms; they stay journaled as live, so a restart relaunches
 * them.  Before state_close.  Idempotent; nothing started is fine. */
void nodemgr_stop(struct master *m);

/* m->desired changed: the node thread reconciles.  Any thread; no-op
 * without a node thread. */
void nodemgr_wake(struct master *m);

/* Call fn for every node of the table, under m->lock (fn must not take it,
 * nor keep the pointer): the brain link's usage report reads the last
 * sample here (has_usage, usage, res).  Returns the count of nodes. */
int nodemgr_usage_each(struct master *m, void (*fn)(void *ctx, const struct master_node *n),
		       void *ctx);
/* Register nodemgr_wake for a moved desired state (m->svc), before or
 * after state_open (under m->lock when the timer runs). */
void nodemgr_register(struct master *m);
/* A plan's resources above the backend's largest node (m->node_shape)
 * would never start (Slurm refuses the job): r capped there by sched_fit,
 * never below what the job spec asked for role (an enum rv_role).  true
 * when r changed.  The node manager launches with it; plans.c reports it. */
bool nodemgr_fit(const struct master *m, int role, struct sched_resources *r);
#endif
