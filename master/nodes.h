/*
 * nodes.h: the node manager's policy over scheduler events (sched.h).
 *
 * Pure: no I/O, no clock, no locks.  The master feeds it every event from
 * its backend and carries out the action it answers: a failed node is
 * relaunched with the same role and rank, bounded by its role's
 * restartCount; an OOM-killed node is relaunched with the memory an OOM plan
 * gives (a hook: the brain's plan in cluster mode, nodes_alg_oom_plan() over
 * algorithms/ in single-job mode), bounded by max_oom_relaunches and by the
 * plan's cap; a host whose node check failed, or on which nodes crashed
 * host_max_crashes times, is not used again for a relaunch; when no budget
 * or host is left the job status becomes FAILED with the reason.
 *
 * One owner (the master's state thread); strings are copied in.
 */
#ifndef NODES_H
#define NODES_H

#include <stdbool.h>
#include <stdint.h>

#include "rover_alg.h"
#include "sched.h"

#define NODES_MAX_HOSTS  64
#define NODES_REASON_MAX 384
#define NODES_AVOID_MAX  8 /* hosts a launch keeps off, at most */

struct nodes_conf {
	/* Crashes of nodes on one host (OOM kills and removals not counted)
	 * after which it is not used again: 0 is 2. */
	int host_max_crashes;
	/* OOM relaunches of one node (on top of restartCount): 0 is 5. */
	int max_oom_relaunches;
	/* restartCount of roles without nodes_set_restart_count(): -1 is 3. */
	int default_restart_count;
	/* Hosts a relaunch may go to when its node's host is bad, in order of
	 * preference; NULL-terminated, borrowed for nodes_new().  NULL: a
	 * relaunch stays on its node's host and fails the job once that host
	 * is bad. */
	const char *const *hosts;
	/* The backend places each node itself (Kubernetes, Slurm): a relaunch
	 * off a bad host that hosts has no replacement for is left to it
	 * (host "", kept off the bad hosts by nodes_info.avoid) instead of
	 * failing the job. */
	bool backend_places;
};

/* What an OOM plan is asked. */
struct nodes_oom_req {
	const char *name, *role;
	int rank;
	int64_t memory_mb; /* the limit the node had */
	int64_t peak_mb;   /* its peak, 0 when unknown */
	int oom_count;     /* OOMs of this node so far, this one included (>= 1) */
};

/* Memory for the relaunch of an OOM-killed node.  Returns 1 with *out_mb
 * (more than req->memory_mb), 0 when memory cannot grow (a cap), or a
 * negative errno; reason (may be left "") says why, for the job status. */
typedef int (*nodes_oom_plan_fn)(void *ctx, const struct nodes_oom_req *req, int64_t *out_mb,
				 char *reason, size_t rsize);

enum nodes_action_type {
	NODES_NONE = 0, /* nothing to do */
	NODES_RELAUNCH, /* sched_launch the node described in the action */
	NODES_GIVE_UP,  /* the job cannot go on: see reason (and nodes_status) */
};

struct nodes_action {
	enum nodes_action_type type;
	char name[SCHED_NAME_MAX]; /* RELAUNCH: the new instance's name: <base>.<attempt> */
	char role[SCHED_ROLE_MAX];
	int rank;
	char host[SCHED_NAME_MAX];
	struct sched_resources res;
	int attempt; /* RELAUNCH: 1 for the first relaunch */
	char reason[NODES_REASON_MAX];
};

enum nodes_job_state { NODES_JOB_RUNNING = 0, NODES_JOB_SUCCEEDED, NODES_JOB_FAILED };

struct nodes_status {
	enum nodes_job_state state;
	int nodes, running, succeeded;
	int restarts, oom_relaunches, bad_hosts;
	char reason[NODES_REASON_MAX]; /* FAILED: why, e.g. "node worker-3 (rank 3) ..." */
};

/* A new policy.  c may be NULL (defaults); oom may be NULL (an OOM is then a
 * crash, relaunched with the same memory).  NULL with err on bad conf or out
 * of memory.  Free with nodes_free(). */
struct nodes *nodes_new(const struct nodes_conf *c, nodes_oom_plan_fn oom, void *ctx,
			struct rv_err *err);

/* NULL ok; returns NULL. */
struct nodes *nodes_free(struct nodes *m);

/* restartCount of a role: relaunches after crashes allowed per node. 0 or
 * -EINVAL (negative count, bad role). */
int nodes_set_restart_count(struct nodes *m, const char *role, int restart_count);

/* Register a node as first launched.  0, -EEXIST when (role, rank) or the
 * name is taken, -EINVAL bad arguments, -ENOMEM. */
int nodes_add(struct nodes *m, const char *name, const char *role, int rank, const char *host,
	      const struct sched_resources *res);

/* Feed one backend event; *act says what to do.  Events of an instance that
 * was already replaced, or of unknown nodes, answer NODES_NONE.  Returns 0 or
 * -EINVAL. */
int nodes_on_event(struct nodes *m, const struct sched_event *ev, struct nodes_action *act);

/* A host failed its node check: no relaunch goes there again.  0 or -ENOSPC
 * when the bad-host list is full. */
int nodes_host_failed(struct nodes *m, const char *host);

/* Is host on the bad-host list? */
bool nodes_host_bad(const struct nodes *m, const char *host);

void nodes_status(const struct nodes *m, struct nodes_status *st);

/* One node as the policy knows it. */
struct nodes_info {
	char name[SCHED_NAME_MAX]; /* the current instance */
	char role[SCHED_ROLE_MAX], host[SCHED_NAME_MAX];
	int rank, attempt, restarts, ooms;
	struct sched_resources res; /* what its next launch gets */
	/* Hosts its next launch keeps off where the backend places nodes
	 * itself (Kubernetes, Slurm): the host its last instance left as a
	 * straggler, a crash or a lost machine, then the bad hosts. */
	char avoid[NODES_AVOID_MAX][SCHED_NAME_MAX];
	int navoid;
	char left[SCHED_NAME_MAX]; /* the host its last instance left for a fault, "" none */
	bool live; /* launched or running */
	bool succeeded, failed, removed;
};

/* The node whose base name is base: 0 with *out, or -ENOENT. */
int nodes_get(const struct nodes *m, const char *base, struct nodes_info *out);

/* After a master restart: put back what the journal knew of a node added
 * again with nodes_add (attempt, restarts, OOM relaunches; succeeded: it
 * finished; left: the host its last instance left for a fault, NULL or ""
 * none).  0 or -ENOENT. */
int nodes_restore(struct nodes *m, const char *base, int attempt, int restarts, int ooms,
		  bool succeeded, const char *left);

/* A host crashes were charged to, as the journal keeps it. */
struct nodes_host {
	char name[SCHED_NAME_MAX];
	int crashes;
	bool bad; /* not used again */
};

/* The hosts with a charge or marked bad, up to max into out (may be NULL
 * with max 0).  Returns how many there are. */
int nodes_hosts(const struct nodes *m, struct nodes_host *out, int max);

/* After a master restart: a host's charges as journaled (bad also when
 * crashes reach host_max_crashes).  0, -EINVAL, or -ENOSPC when the host
 * table is full. */
int nodes_host_restore(struct nodes *m, const char *host, int crashes, bool bad);

/* A relaunch that no failure caused (the master restarted and the node is
 * gone, or its resources changed and could not be resized in place): a new
 * instance name with res (NULL: the same), not charged to restartCount.
 * *act is a RELAUNCH.  0, -ENOENT, or -EALREADY when the node failed or
 * succeeded. */
int nodes_relaunch(struct nodes *m, const char *base, const struct sched_resources *res,
		   struct nodes_action *act);

/* A straggler a plan replaces (its instance was stopped): its host is
 * charged as for a crash (host_max_crashes of them make it bad) and the
 * new instance goes to another good host of conf.hosts when there is one,
 * else stays on its own; res (NULL: the same) for its next launches.  Not
 * charged to restartCount: the node's program did not fail.  *act is a
 * RELAUNCH.  0, -ENOENT, or -EALREADY when the node failed or succeeded. */
int nodes_replace(struct nodes *m, const char *base, const struct sched_resources *res,
		  struct nodes_action *act);

/* Resources for the node's next launches (a resize done in place). */
int nodes_set_resources(struct nodes *m, const char *base, const struct sched_resources *res);

/* Forget a node (scaled down): its role and rank may be added again.
 * 0 or -ENOENT. */
int nodes_forget(struct nodes *m, const char *base);

/* The in-process OOM plan of single-job mode: rv_alg_plan_oom() with these
 * limits and tunables (ctx is a struct nodes_alg_oom, borrowed). */
struct nodes_alg_oom {
	struct rv_alg_limits lim;
	struct rv_alg_params p;
};
int nodes_alg_oom_plan(void *ctx, const struct nodes_oom_req *req, int64_t *out_mb, char *reason,
		       size_t rsize);

#endif
