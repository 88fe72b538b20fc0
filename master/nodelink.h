/*
 * nodelink.h: the node manager's events and usage, told to the planner
 * (plans.h); see nodelink.c.
 */
#ifndef MASTER_NODELINK_H
#define MASTER_NODELINK_H

struct master;
struct rv_node_usage;

/* Point m's node-manager hooks (oom_plan, node_event) at the brain link.
 * Call after plans_start and before nodemgr_start. */
void nodelink_attach(struct master *m);

/* The previous usage of each node instance, for rates between reports.
 * One owner thread.  new: NULL when out of memory; free: NULL ok. */
struct nodelink_usage *nodelink_usage_new(void);
void nodelink_usage_free(struct nodelink_usage *u);

/* Queue one usage sample per running node measured since the last report
 * (none for an instance's first measurement: it has no rate yet).  Takes
 * m->lock briefly.  Returns the samples queued or -ENOMEM. */
int nodelink_usage_report(struct master *m, struct nodelink_usage *u);

/* A node's own usage report (POST /v1/usage from its rover-run; u
 * borrowed): kept as the node's last (GET /v1/usage) and queued for the
 * planner as a node usage sample, under the rank of the node manager's
 * node of that name (the planner names nodes by it) when there is one.
 * Takes the state lock.  0; -ENOSPC when
 * MASTER_USAGE_MAX other nodes already reported; -ENOMEM. */
int nodelink_agent_usage(struct master *m, const struct rv_node_usage *u);

#endif
