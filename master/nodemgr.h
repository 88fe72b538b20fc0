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
 * / ENDED, JSON documents applied by nodemgr_apply under the state lock), so
 * a restarted master relaunches the nodes that were live, with their rank
 * and counters, without charging a crash.
 *
 * The table m->nodes (struct master_node) is under m->lock: /v1/job and the
 * brain link read it there (nodemgr_usage_each).
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
#include "sched.h"

enum master_node_state {
	MASTER_NODE_LAUNCHED = 0, /* asked of the backend */
	MASTER_NODE_RUNNING,      /* the backend said it started */
	MASTER_NODE_EXITED,       /* ended by a failure; a relaunch follows */
	MASTER_NODE_SUCCEEDED,    /* exited 0 */
	MASTER_NODE_FAILED,       /* ended and given up: the job failed */
};

/* One node (a role and rank) and its current instance. */
struct master_node {
	char name[SCHED_NAME_MAX];     /* <role>-<rank>: the name it joins the rendezvous with */
	char instance[SCHED_NAME_MAX]; /* this launch: name, then name.<attempt> */
	char role[SCHED_ROLE_MAX];
	char host[SCHED_NAME_MAX];
	char left[SCHED_NAME_MAX]; /* the host its last instance left for a fault, "" none */
	int rank, attempt, restarts, ooms;
	enum master_node_state state;
	int pid;             /* RUNNING on the local backend, else 0 */
	int64_t start_ticks; /* the pid's start time: a restarted master adopts the pid */
	int exit_code, signal;
	struct sched_resources res; /* the limits of this launch */
	int64_t plan; /* the newest plan that relaunched it (desired.act_plan), 0 none */
	bool has_usage;
	struct sched_usage usage; /* last sample (node.usage_interval_ms) */
	int64_t usage_ms;         /* when, ms since the epoch */
};

/* "running", "succeeded", "failed"; "launched", "running", "exited", ... */
const char *nodemgr_job_state_name(enum master_job_state s);
const char *nodemgr_node_state_name(enum master_node_state s);

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
/* Before state_open: register the node table's entries in m->svc (its
 * operations, its snapshot part and release) and nodemgr_wake for a moved
 * desired state.  The master and every test that opens a state call it. */
void nodemgr_register(struct master *m);
/* Under m->lock, from state.c's apply (m->svc.apply_nodes; live and
 * replay): a journaled MASTER_OP_NODE_LAUNCHED/ENDED document.  0 or
 * -EINVAL (err: what is wrong with it). */
int nodemgr_apply(struct master *m, int type, const void *doc, size_t len, struct rv_err *err);
/* A plan's resources above the backend's largest node (m->node_shape)
 * would never start (Slurm refuses the job): r capped there by sched_fit,
 * never below what the job spec asked for role (an enum rv_role).  true
 * when r changed.  The node manager launches with it; plans.c reports it. */
bool nodemgr_fit(const struct master *m, int role, struct sched_resources *r);
/* Append ,"nodemgr":{...} (the node table, the job's end; the desired state
 * is the brain link's, plans.c) to the
 * snapshot's extra object; load it back (o may be NULL: an older snapshot). */
void nodemgr_snapshot_save(const struct master *m, struct rv_buf *out);
int nodemgr_snapshot_load(struct master *m, const cJSON *o, struct rv_err *err);
/* Free the table. */
void nodemgr_release(struct master *m);

#endif
