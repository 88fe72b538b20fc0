/*
 * ckpt.h: rover-run's side of the flash checkpoint.
 *
 * The workers save into shared memory (/dev/shm/rover-<job>-<rank>-{0,1},
 * trainer/): those segments belong to this node's agent, so they outlive a
 * worker's death.  A persister thread copies the newest step that every
 * local rank holds to storage, as soon as one appears:
 *   DIR/step-<S>/rank-<R>.ckpt (written to a temporary name, fsync'd,
 *   renamed, the folder fsync'd), DIR/step-<S>/data.json (the master's
 *   data checkpoint of S, when it has one), then DIR/manifest.json (the
 *   same way) names S among the complete steps; the last K are kept, older
 *   and incomplete steps are removed.
 * A step is complete only when every local rank's part is written and
 * checked (a slot overwritten during its copy is not a checkpoint: it is
 * tried again later), and its data checkpoint holds the reports of every
 * rank of the world, on every node: until the master has them all the
 * step waits (a few seconds at most; the master answers 409 meanwhile),
 * so that the step stored on each node is one whose data position is
 * exact wherever the restore reads it; a step the master says can never
 * be whole (410: its missing ranks died or reported a later step) is
 * dropped at once.  ckpt_flush persists at once (--save-at-breakpoint:
 * after a worker failed, before the restart); ckpt_stop flushes, stops the
 * thread and removes the segments of every rank this node ran.
 * Layout and checks: common/ckslot.h.  The supervisor's thread calls every
 * function; the persister thread is private.
 */
#ifndef AGENT_CKPT_H
#define AGENT_CKPT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

#define CKPT_MAX_RANKS 1024

struct ckpt_opts {
	const char *job;        /* the shared memory's job name (borrowed) */
	const char *dir;        /* storage folder; NULL or "": memory only */
	int keep;               /* complete steps kept on storage (>= 1) */
	const char *master_url; /* for the data checkpoint of a step; NULL: none */
};

struct ckpt {
	bool started;
	bool at_breakpoint; /* persist the in-memory copy when a worker fails */
	char job[128];
	char dir[512]; /* "" memory only */
	int keep;
	char master_url[320];
	pthread_t th;
	bool th_running;
	pthread_mutex_t mu; /* guards everything below but persisted/kept */
	pthread_cond_t cv;
	bool stop;
	int rank0, nranks;                  /* the local ranks of the current group */
	int64_t group_gen;                  /* bumped by each ckpt_group */
	unsigned char seen[CKPT_MAX_RANKS]; /* ranks that ran here: their segments */
	pthread_mutex_t run_mu;             /* one persist round at a time */
	/* persister state (under run_mu) */
	int64_t persisted; /* newest complete step on storage, -1 none */
	struct ckpt_kept {
		int64_t step;
		int rank0, n;
		bool data;
	} kept[64]; /* complete steps on storage, newest first */
	int nkept;
	int64_t pending; /* a step written but for its data (see settle_data), -1 none */
	int64_t never;   /* the last step whose data the master said is never whole */
	int64_t never_gen; /* group_gen when it was said */
	int pending_rank0, pending_n;
	int64_t pending_since;               /* rv_mono_ms when its data was first asked for */
	int64_t pending_gen, group_gen_seen; /* group_gen of it, and of the last round */
	bool data_seen;                      /* the master gave a data checkpoint once */
	struct rv_master_client *mc;         /* for the data checkpoints; NULL none */
	int64_t rounds, steps_written, steps_dropped; /* counters, for tests and logs */
};

struct flags;
struct rv_master_client;

/*
 * rover-run's setup: the job name of the shared memory ($ROVER_JOB_NAME,
 * else --rdzv-id unless "none", else "rover-run-<pid>" with a private
 * master (its job name is the same for every such run on the host), else
 * the master's job name through mc), then ckpt_start with --ckpt-dir and
 * --ckpt-keep, and ROVER_JOB_NAME and ROVER_CKPT_DIR set in our environment
 * for the workers.  --save-at-breakpoint or ROVER_SAVE_AT_BREAKPOINT=1
 * arms ckpt_breakpoint.  0 or a negative errno.
 */
int ckpt_begin(struct ckpt *c, const struct flags *f, bool private_master,
	       struct rv_master_client *mc, const char *master_addr, struct rv_err *err);
/* After a failed group, before its restart: ckpt_flush when armed. */
void ckpt_breakpoint(struct ckpt *c);

/* Start (c zeroed by the caller): remember o (copied), read what storage
 * already has, start the persister thread when o->dir is set.  The
 * folder is created.  0 or a negative errno (err says why). */
int ckpt_start(struct ckpt *c, const struct ckpt_opts *o, struct rv_err *err);
/* The local ranks of the group about to start: rank0 .. rank0+n-1. */
void ckpt_group(struct ckpt *c, int rank0, int n);
/* Persist the newest step every local rank holds, now, waiting for it
 * (at most timeout_ms).  1 when a step was written, 0 when nothing newer
 * was there, or a negative errno. */
int ckpt_flush(struct ckpt *c, int timeout_ms);
/* Flush (when storage is set), stop the thread, and with unlink remove
 * the shared memory of every rank that ran here.  Safe when not started. */
void ckpt_stop(struct ckpt *c, bool unlink);

/* The newest step committed in the slots of rank on this node, -1 when
 * there is none (or the checkpoint is not started): the hang check's sign
 * that a silent worker trains.  Maps the slots for the call; the
 * supervisor's thread. */
int64_t ckpt_newest(const struct ckpt *c, int rank);

#endif
