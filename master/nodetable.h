/*
 * nodetable.h: the node table's journaled half, part of the job state
 * (tier 2, beside state.c): the job's nodes as journaled
 * (MASTER_OP_NODE_LAUNCHED / ENDED documents), the job's end, the hosts
 * crashes were charged to, and their part of the snapshot.  state.c applies
 * and replays them itself, so opening a state needs no node manager
 * (nodemgr.c, which writes these documents).  Everything here is under
 * m->lock.
 */
#ifndef NODETABLE_H
#define NODETABLE_H

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
const char *nodetable_job_state_name(enum master_job_state s);
const char *nodetable_node_state_name(enum master_node_state s);

/* The node of that name, NULL when the table has none. */
struct master_node *nodetable_find(struct master *m, const char *name);
/* n as the journal's and the snapshot's JSON object (the caller's,
 * cJSON_Delete; NULL when out of memory). */
cJSON *nodetable_node_to_json(const struct master_node *n);
/* The charged hosts h (n of them) as a "hosts" member of doc: [{name,
 * crashes, bad}] (doc NULL: nothing). */
void nodetable_hosts_to_json(const struct nodes_host *h, int n, cJSON *doc);
/* The nodes charged for network check m->nc_check as a "netcheck_charged"
 * member of doc: {check, nodes: [names]} (none charged: no member). */
void nodetable_charged_to_json(const struct master *m, cJSON *doc);
/* From state.c's apply (live and replay): a journaled
 * MASTER_OP_NODE_LAUNCHED/ENDED document.  0 or -EINVAL (err: what is wrong
 * with it), -ENOMEM. */
int nodetable_apply(struct master *m, int type, const void *doc, size_t len, struct rv_err *err);
/* Append ,"nodemgr":{...} (the node table, the job's end; the desired state
 * is the brain link's, plans.c) to the snapshot's extra object; load it
 * back (o may be NULL: an older snapshot).  Load: 0, -EUCLEAN or -ENOMEM
 * with err. */
void nodetable_snapshot_save(const struct master *m, struct rv_buf *out);
int nodetable_snapshot_load(struct master *m, const cJSON *o, struct rv_err *err);
/* Free the table. */
void nodetable_release(struct master *m);
/* The snapshot part (MASTER_PART_NODES) state_open registers. */
extern const struct master_part nodetable_part;

#endif
