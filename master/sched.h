/*
 * sched.h: the scheduler-backend interface of the node manager.
 *
 * A backend starts, stops and resizes the job's nodes (one agent process,
 * container or pod each) and reports what happens to them.  Every call is
 * asynchronous: launch and remove only ask; what follows (the node runs, it
 * exited, it was OOM-killed, it could not start) comes back as events, which
 * the master reads with sched_next_event() whenever sched_fd() polls
 * readable.  That fits the local backend (pidfds), Kubernetes (a watch on
 * pods) and Slurm through slurmrestd (a poll on jobs) alike.
 *
 * Backends: sched_local.c (processes in cgroups), sched_slurm.c (Slurm jobs
 * through slurmrestd).  One struct sched has one
 * owner thread (the master's event loop); nothing here locks.  Strings in
 * specs are borrowed for the call; events are copied out.
 */
#ifndef SCHED_H
#define SCHED_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

#define SCHED_NAME_MAX   64
#define SCHED_ROLE_MAX   32
#define SCHED_DETAIL_MAX 256

/* What a node may use.  cpu in cores (0: no limit), memory_mb in MiB (0: no
 * limit), gpu a count (the local backend only passes it on in the env). */
struct sched_resources {
	double cpu;
	int64_t memory_mb;
	int gpu;
};

/* One node to start.  Everything is borrowed for the duration of the call. */
struct sched_node_spec {
	const char *name; /* unique among the backend's live nodes, < SCHED_NAME_MAX */
	const char *role; /* "worker", "ps", ... < SCHED_ROLE_MAX */
	int rank;         /* stable across relaunches of the same node */
	const char *host; /* where to run it: a placement label; NULL or "": anywhere */
	/* Hosts to keep it off (a straggler's, a lost or crashed node's, bad
	 * hosts), NULL-terminated, may be NULL: backends that place nodes
	 * themselves honour it (k8s: a required node affinity, slurm:
	 * exclude); the local backend runs on one host and ignores it. */
	const char *const *avoid;
	struct sched_resources res;
	const char *const *argv; /* NULL-terminated command */
	const char *const *env;  /* NULL-terminated "K=V" added to the backend's; may be NULL */
	const char *log_path;    /* stdout+stderr appended here; NULL: the backend's default */
};

enum sched_event_type {
	SCHED_EV_STARTED = 1, /* the node runs (pid for local, pod Running for k8s) */
	SCHED_EV_EXITED,      /* it ended by itself or was removed: exit_code or signal */
	SCHED_EV_OOM,         /* killed for memory: memory_limit_mb is what it had */
	SCHED_EV_FAILED,      /* it never started: err (negative errno) and detail; -ETIMEDOUT:
			       * it waited for resources past the gang wait (not retried) */
};

struct sched_event {
	enum sched_event_type type;
	char name[SCHED_NAME_MAX];
	char role[SCHED_ROLE_MAX];
	char host[SCHED_NAME_MAX];
	int rank;
	int pid;             /* STARTED: its process id (slurm: its job id), else 0 */
	int64_t start_ticks; /* STARTED: the pid's start time (clock ticks since boot) */
	bool status_unknown; /* EXITED: an adopted node; how it ended is not known */
	int exit_code;                 /* EXITED: >= 0 when it exited, -1 when a signal ended it */
	int signal;                    /* EXITED/OOM: the signal that ended it, else 0 */
	bool removed;                  /* EXITED: it ended because sched_remove() asked */
	/* EXITED: its machine failed or the scheduler took it back (Slurm's
	 * NODE_FAIL, PREEMPTED): relaunched, not charged to restartCount */
	bool lost;
	int64_t memory_limit_mb;       /* OOM (and EXITED): the limit in force, 0 when none */
	int64_t peak_memory_mb;        /* OOM/EXITED: its peak memory when known, else 0 */
	int err;                       /* FAILED: negative errno */
	char detail[SCHED_DETAIL_MAX]; /* human text: what the backend saw */
};

/* A node's usage so far.  Fields the backend cannot read are -1. */
struct sched_usage {
	double cpu_seconds;
	int64_t memory_bytes;      /* now */
	int64_t memory_peak_bytes; /* highest seen */
	/* CPU quota throttling (cgroup cpu.stat): periods elapsed with a quota,
	 * periods in which the node was throttled, and the time it was held. */
	int64_t nr_periods, nr_throttled, throttled_usec;
};

struct sched;

/* A backend's operations; see the sched_* wrappers below for each contract. */
struct sched_ops {
	const char *name;
	int (*launch)(struct sched *s, const struct sched_node_spec *spec, struct rv_err *err);
	int (*remove)(struct sched *s, const char *name, int grace_ms);
	int (*resize)(struct sched *s, const char *name, const struct sched_resources *res,
		      struct rv_err *err);
	int (*fd)(struct sched *s);
	int (*next_event)(struct sched *s, struct sched_event *ev);
	int (*usage)(struct sched *s, const char *name, struct sched_usage *u);
	int (*adopt)(struct sched *s, const struct sched_node_spec *spec, int pid,
		     int64_t start_ticks, struct rv_err *err);
	void (*free)(struct sched *s);
	/* may be NULL: the backend does not know its nodes' size */
	int (*shape)(struct sched *s, struct sched_resources *out);
};

/* Every backend's state begins with this. */
struct sched {
	const struct sched_ops *ops;
};

/* Ask for a node.  Returns 0 when the request was taken: STARTED or FAILED
 * follows as an event; -EINVAL on a bad spec (err names the field), -EEXIST
 * when a live node has that name, -ENOSPC when the backend is full. */
static inline int sched_launch(struct sched *s, const struct sched_node_spec *spec,
			       struct rv_err *err)
{
	return s->ops->launch(s, spec, err);
}

/* Ask a node to stop: SIGTERM (or the backend's polite stop), then a hard
 * kill of everything it started once grace_ms passed.  Returns 0 (EXITED with
 * removed set follows), -ENOENT when no live node has that name. */
static inline int sched_remove(struct sched *s, const char *name, int grace_ms)
{
	return s->ops->remove(s, name, grace_ms);
}

/* Change a live node's limits in place.  Returns 0, -ENOENT unknown node,
 * -EOPNOTSUPP when this backend (or its mode) cannot (relaunch instead),
 * -EBUSY when the node already uses more memory than the new limit. */
static inline int sched_resize(struct sched *s, const char *name, const struct sched_resources *res,
			       struct rv_err *err)
{
	return s->ops->resize(s, name, res, err);
}

/* The fd to poll for POLLIN; owned by the backend, valid until sched_free. */
static inline int sched_fd(struct sched *s)
{
	return s->ops->fd(s);
}

/* Take the next event: 1 with *ev filled, 0 when none is ready now (poll
 * the fd again), or a negative errno.  Call until 0 once the fd is readable. */
static inline int sched_next_event(struct sched *s, struct sched_event *ev)
{
	return s->ops->next_event(s, ev);
}

/* The largest node a launch can get (cpu and memory_mb each the largest
 * of the nodes it places on; gpu 0): local, this machine; Slurm, the
 * partition's largest node as slurmrestd listed it at start.  Returns 0,
 * or -EOPNOTSUPP when the backend does not know (Kubernetes today). */
static inline int sched_shape(struct sched *s, struct sched_resources *out)
{
	*out = (struct sched_resources){ 0 };
	return s->ops->shape ? s->ops->shape(s, out) : -EOPNOTSUPP;
}

/* r capped at shape (the largest node, 0s: not known) but never below ask
 * (what the job spec itself asked: an ask too big for every node fails
 * with the scheduler's own reason).  true when r changed. */
static inline bool sched_fit(const struct sched_resources *shape, const struct sched_resources *ask,
			     struct sched_resources *r)
{
	int64_t mem = shape->memory_mb > ask->memory_mb ? shape->memory_mb : ask->memory_mb;
	double cpu = shape->cpu > ask->cpu ? shape->cpu : ask->cpu;
	bool over_mem = shape->memory_mb > 0 && r->memory_mb > mem;
	bool over_cpu = shape->cpu > 0 && r->cpu > cpu;
	if (over_mem)
		r->memory_mb = mem;
	if (over_cpu)
		r->cpu = cpu;
	return over_mem || over_cpu;
}

/* A live node's usage.  Returns 0, -ENOENT unknown node, -EOPNOTSUPP when
 * the backend measures nothing. */
static inline int sched_usage(struct sched *s, const char *name, struct sched_usage *u)
{
	return s->ops->usage(s, name, u);
}

/* Take over a node that a previous master started and left running: pid,
 * and its start time as a STARTED event gave it, so a reused pid is not
 * taken for it.  Returns 0 (STARTED follows; when it ends, EXITED has
 * status_unknown set: not our child, its status is lost), -ESRCH when it
 * is gone or the pid names another process now, -EEXIST, -ENOSPC, or
 * -EOPNOTSUPP when the backend cannot. */
static inline int sched_adopt(struct sched *s, const struct sched_node_spec *spec, int pid,
			      int64_t start_ticks, struct rv_err *err)
{
	if (!s->ops->adopt)
		return rv_err_set(err, -EOPNOTSUPP, "", "the %s backend cannot adopt nodes",
				  s->ops->name);
	return s->ops->adopt(s, spec, pid, start_ticks, err);
}

/* Stop every node (hard), release everything; NULL ok.  Returns NULL. */
static inline struct sched *sched_free(struct sched *s)
{
	if (s)
		s->ops->free(s);
	return NULL;
}

/* "started", "exited", "oom", "failed"; "?" otherwise. */
static inline const char *sched_event_name(enum sched_event_type t)
{
	switch (t) {
	case SCHED_EV_STARTED:
		return "started";
	case SCHED_EV_EXITED:
		return "exited";
	case SCHED_EV_OOM:
		return "oom";
	case SCHED_EV_FAILED:
		return "failed";
	}
	return "?";
}

#endif
