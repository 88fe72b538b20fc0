/*
 * rover_trainer.h: librover-trainer, the library a training process links
 * (or loads with ctypes, python/rover/) to take data shards from rover-master
 * exactly once, report its steps and flash-checkpoint its state.
 *
 * A struct rv_trainer belongs to one thread (an overlapped save runs on a
 * thread of its own, see rv_trainer_save_start).  Every call returns 0 (or a
 * status >= 0) on success and a negative errno on failure, with the detail
 * in *err when err is not NULL (and in rv_trainer_last_error() for callers
 * that cannot pass a struct rv_err, such as ctypes).  The library never
 * logs and never exits.
 *
 * Flash checkpoint: each rank owns two POSIX shared-memory slots,
 * /dev/shm/rover-<job>-<rank>-0 and -1.  A save writes the older slot (its
 * committed flag cleared first), copies the buffers, records the shard
 * position and a CRC32C of the payload in the slot's header and sets the
 * committed flag last, after a release fence; a load takes the newest slot
 * whose flag is set and whose CRC matches.  A writer killed in the middle of
 * a save therefore leaves the previous checkpoint loadable, and a torn or
 * corrupted slot is never loaded.  The segments outlive the process: the
 * node agent (rover-run) owns them and removes them when the job ends
 * (rv_trainer_unlink).
 *
 *	struct rv_err err;
 *	struct rv_trainer *t = rv_trainer_open(&err);     // from rover-run's variables
 *	if (!t) { fprintf(stderr, "%s\n", err.msg); exit(1); }
 *	struct rv_trainer_shard s;
 *	int64_t step = 0;
 *	while ((rc = rv_trainer_next(t, &s, &err)) != RV_TRAINER_FINISHED) {
 *		if (rc < 0) ...;
 *		if (rc == RV_TRAINER_WAIT) { usleep(10000); continue; }
 *		for (int64_t i = s.start; i < s.end; i++) {
 *			train_on(i);
 *			rv_trainer_consumed(t, i - s.start + 1);
 *			rv_trainer_report_step(t, ++step, 1, NULL);
 *			const void *p[] = { weights }; size_t n[] = { sizeof(weights) };
 *			rv_trainer_save(t, step, p, n, 1, NULL, &err);
 *		}
 *		rv_trainer_done(t, &err);
 *	}
 *	rv_trainer_close(t);
 */
#ifndef RV_ROVER_TRAINER_H
#define RV_ROVER_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define RV_TRAINER_MAX_BUFS    8192 /* buffers one checkpoint holds */
/* A slot is a header of this many bytes, then the buffers one after the
 * other, each at a 64-byte boundary. */
#define RV_TRAINER_SLOT_HEADER 69632

struct rv_trainer;

/* Where to find the master and who this process is. */
struct rv_trainer_opts {
	const char *master;  /* "host:port" or "http://host:port"; NULL: no master
			      * (shards and reports fail with -ENOTCONN, checkpoints work) */
	const char *node;    /* the node's name (ROVER_NODE_NAME) */
	const char *job;     /* names the shared memory; NULL: the master's job name */
	const char *dataset; /* "" or NULL: any dataset of the job */
	int rank, local_rank, world_size;
	int timeout_ms; /* per master call; 0: 10000 */
};

/*
 * From the variables rover-run sets for each worker: ROVER_MASTER_ADDR,
 * ROVER_NODE_NAME, RANK, LOCAL_RANK, WORLD_SIZE (and, optional,
 * ROVER_JOB_NAME and ROVER_DATASET).  NULL with *err set naming the missing
 * or bad variable (-EINVAL), or the master's error.  Free with
 * rv_trainer_close.
 */
struct rv_trainer *rv_trainer_open(struct rv_err *err);
/* The same from explicit options (copied).  NULL with *err set. */
struct rv_trainer *rv_trainer_open_opts(const struct rv_trainer_opts *o, struct rv_err *err);
/* Unmaps the checkpoint slots (they stay in /dev/shm) and frees t.  NULL ok. */
void rv_trainer_close(struct rv_trainer *t);
/* The text of the last error on t (never NULL; "" when none).  Borrowed:
 * valid until the next call on t. */
const char *rv_trainer_last_error(const struct rv_trainer *t);
int rv_trainer_rank(const struct rv_trainer *t);
int rv_trainer_world_size(const struct rv_trainer *t);

/* ---- data shards ---- */
enum rv_trainer_status {
	RV_TRAINER_SHARD = 0,    /* *out holds a shard: samples [start, end) */
	RV_TRAINER_WAIT = 1,     /* none free now, some in flight: ask again */
	RV_TRAINER_FINISHED = 2, /* every epoch of every dataset is done */
};
struct rv_trainer_shard {
	char dataset[64];
	int64_t id;
	int64_t start, end; /* sample indices [start, end); of a stream: offsets */
	int32_t epoch;      /* 0 for a stream */
	/* "" for a batch dataset; of a streaming dataset, the partition whose
	 * offsets [start, end) the task names.  Added last: a caller built
	 * against the older, shorter struct must pass one of this size. */
	char partition[64];
};
/* The next shard: a status >= 0 or a negative errno.  -EBUSY while the
 * current shard is not done yet.  A thread of the handle keeps a window of
 * shards fetched ahead: as many as the loop uses in $ROVER_PREFETCH_S
 * seconds at its pace so far (default RV_TRAINER_PREFETCH_S; at least 2,
 * at most RV_TRAINER_MAX_PREFETCH), or $ROVER_PREFETCH_SHARDS (a count;
 * 0: each fetched when asked for, as a stream's always are).  They come
 * in the order the master handed them out, so the loop trains on through
 * a master that stops answering for that long; the master's data
 * checkpoints count a task fetched ahead as not begun, and give it back
 * when this worker dies. */
#define RV_TRAINER_PREFETCH_S 15.0
/* How many shards the window holds now (0 without a master). */
int rv_trainer_ahead(struct rv_trainer *t);
enum { RV_TRAINER_MAX_PREFETCH = 256, RV_TRAINER_QUEUE = 1024 };
int rv_trainer_next(struct rv_trainer *t, struct rv_trainer_shard *out, struct rv_err *err);
/* How many samples of the current shard have been consumed (the position a
 * checkpoint records).  -ENOENT without a current shard, -ERANGE beyond it. */
int rv_trainer_consumed(struct rv_trainer *t, int64_t consumed);
/* The current shard's samples are all consumed: tell the master (counted
 * once, even when repeated; queued, delivered in order with the step
 * reports and the saves' positions, off the caller's path).  -ENOENT
 * without a current shard. */
int rv_trainer_done(struct rv_trainer *t, struct rv_err *err);

/* Global step step was reached; samples were trained since the last report
 * (the master derives the speed from them).  Queued as a done is; with
 * RV_TRAINER_QUEUE reports waiting for the master (gone that long) the
 * report is dropped: -ENOBUFS. */
int rv_trainer_report_step(struct rv_trainer *t, int64_t step, int64_t samples, struct rv_err *err);
/* The same with compute_s: the seconds of this node's own work in the step,
 * without the wait for its peers (in DDP: from the forward's start to its
 * gradients being ready to reduce); 0: unknown.  In a synchronous job every
 * node's step takes the slowest's time; this tells the slow one (the
 * brain's straggler rule reads it).  -EINVAL when negative. */
int rv_trainer_report_step_compute(struct rv_trainer *t, int64_t step, int64_t samples,
				   double compute_s, struct rv_err *err);

/* Wait up to timeout_ms for every queued done, step report and save's
 * position to reach the master.  0; -ETIMEDOUT some still wait; another
 * negative errno when the master refused one since the last flush (err
 * says which).  rv_trainer_close flushes for 10 s. */
int rv_trainer_flush(struct rv_trainer *t, int timeout_ms, struct rv_err *err);

/* ---- flash checkpoint ---- */
struct rv_trainer_save_stats {
	double stall_s;    /* how long the call blocked */
	double copy_s;     /* of which copying (and checksumming) the buffers */
	uint64_t bytes;    /* payload */
	int slot;          /* 0 or 1 */
	int reported;      /* 1: the shard position reached the master */
	int report_failed; /* 1: a master was there but refused or missed it (see
			    * rv_trainer_last_error): no restore can resume the
			    * data at this step */
};

/* Size both slots for at least bytes of payload and fault their pages in,
 * so the first saves do not pay for it.  0 or a negative errno. */
int rv_trainer_reserve(struct rv_trainer *t, uint64_t bytes, struct rv_err *err);

/*
 * Save step: copies the n buffers (bufs[i], sizes[i] bytes; borrowed, not
 * kept) and the shard position into the older slot and returns once the
 * copy is committed (a large one is copied by two threads, the caller's
 * and one more).  With a master the position is also reported as the
 * data checkpoint of step, with a short retry budget (about a second: a
 * master that is away does not hold the loop; a failure there is not an
 * error of the save: stats->reported says).  *stats may be NULL.  -E2BIG for more than
 * RV_TRAINER_MAX_BUFS buffers, -ENOSPC when /dev/shm is full.
 */
int rv_trainer_save(struct rv_trainer *t, int64_t step, const void *const *bufs,
		    const uint64_t *sizes, int n, struct rv_trainer_save_stats *stats,
		    struct rv_err *err);

/*
 * An overlapped save, for a loop on the CPU: rv_trainer_save_start chooses
 * the slot, reports the position (one round trip to the master: the next
 * step will finish the task it names, and the master refuses a report
 * that comes after that) and returns; a thread of the library copies the
 * buffers and commits the slot while the next step's forward and backward
 * run.  The buffers' bytes must not change until
 * rv_trainer_save_wait returns, so the loop waits before its optimizer
 * writes the parameters:
 *
 *	rv_trainer_save_start(t, step, p, n, k, &err);  // step's state
 *	forward_backward();                            // step + 1, reads it
 *	rv_trainer_save_wait(t, &st);                  // what is left of the copy
 *	optimizer_step();                              // now writes it
 *
 * A save killed before its commit leaves its slot uncommitted and the
 * previous checkpoint loadable, as a synchronous one does.  Any other
 * checkpoint call on t (save, load, steps, reserve, close) waits for the
 * save first.  start: 0, or the errors of rv_trainer_save (nothing is in
 * flight then); the bufs and sizes arrays are copied, the bytes borrowed.
 * wait: 1 when a save was in flight (done now; *stats, if not NULL, says how long the two
 * calls blocked together in stall_s and how long the copy took), 0 when
 * none was (stats->slot -1).  A failed report of the
 * position is, as for rv_trainer_save, in stats->reported and
 * rv_trainer_last_error, not an error.
 */
int rv_trainer_save_start(struct rv_trainer *t, int64_t step, const void *const *bufs,
			  const uint64_t *sizes, int n, struct rv_err *err);
int rv_trainer_save_wait(struct rv_trainer *t, struct rv_trainer_save_stats *stats);

/* The shard position a save would record now: the current task (0: none)
 * and samples of it consumed. */
void rv_trainer_position(const struct rv_trainer *t, int64_t *task_id, int64_t *consumed);
/* rv_trainer_save with the shard position given (taken with
 * rv_trainer_position when the step ended): for a save that another
 * thread finishes while the loop goes on (GPU tensors staged through pinned
 * memory).  That thread may call only this while the loop's thread uses
 * the handle for shards and steps. */
int rv_trainer_save_at(struct rv_trainer *t, int64_t step, int64_t task_id, int64_t consumed,
		       const void *const *bufs, const uint64_t *sizes, int n,
		       struct rv_trainer_save_stats *stats, struct rv_err *err);

/*
 * Load the newest complete checkpoint: 1 with *step and *nbufs set (then
 * rv_trainer_loaded gives each buffer), 0 when there is none (no slot, or
 * each one torn or corrupted), or a negative errno.  The newest consistent
 * copy in memory is taken, else the newest complete step on storage
 * ($ROVER_CKPT_DIR, where rover-run persists them; its manifest names the
 * complete steps).  A rank with no part of its own anywhere (the world
 * grew) loads rank 0's part: the state is taken to be replicated, as data
 * parallel training keeps it.  The shard position saved with it:
 * rv_trainer_loaded_position.
 */
int rv_trainer_load(struct rv_trainer *t, int64_t *step, int *nbufs, struct rv_err *err);
/* The same for step want exactly (want < 0: the newest): 1, or 0 when no
 * consistent copy of that step is left. */
int rv_trainer_load_step(struct rv_trainer *t, int64_t want, int64_t *step, int *nbufs,
			 struct rv_err *err);
/* The steps this rank could load (memory and storage; their CRCs in memory
 * checked, on storage at load), newest first, up to max into steps: the
 * count, or a negative errno.  Ranks agree on a step all of them hold
 * (the highest in every list) before they load it. */
int rv_trainer_steps(struct rv_trainer *t, int64_t *steps, int max, struct rv_err *err);
/* Where the loaded checkpoint came from: 0 memory, 1 storage, with *rank
 * (may be NULL) the rank whose part it is; -ENOENT without one. */
int rv_trainer_loaded_from(const struct rv_trainer *t, int *rank);
/*
 * Put the data back where it was at step: the master's data checkpoint of
 * step (composed from every rank's report of it, else the copy rover-run
 * stored with the step) is imported into the master, so the shards resume
 * at step whatever the world size is now.  One rank calls it, before any
 * rank asks for a shard.  0; -ENOENT when neither has that step; the
 * master's error.
 */
int rv_trainer_restore_data(struct rv_trainer *t, int64_t step, struct rv_err *err);
/* Buffer i of the loaded checkpoint: *data points into the shared memory
 * (borrowed: valid until the second save after the load, or close; copy it
 * out).  -ENOENT without a loaded checkpoint, -ERANGE for a bad i. */
int rv_trainer_loaded(const struct rv_trainer *t, int i, const void **data, uint64_t *size);
/* The shard position saved with the loaded checkpoint: task id (0: none)
 * and samples of it consumed.  -ENOENT without a loaded checkpoint. */
int rv_trainer_loaded_position(const struct rv_trainer *t, int64_t *task_id, int64_t *consumed);

/* Remove this rank's slots from /dev/shm (the agent does it at the end of
 * the job; a test cleans up with it).  0 or a negative errno. */
int rv_trainer_unlink(const char *job, int rank);

/* CRC32C (Castagnoli) of n bytes continuing crc (0 to start). */
uint32_t rv_trainer_crc32c(uint32_t crc, const void *data, size_t n);

#endif
