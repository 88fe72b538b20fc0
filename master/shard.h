/*
 * shard.h: exactly-once dynamic data sharding for rover-master.
 *
 * Datasets are split into shards (ranges of sample indices); each epoch visits
 * every shard once, in an order shuffled by (seed, epoch) through a keyed
 * bijection computed on the fly.  Workers pull tasks (TODO -> DOING); a done
 * makes a task DONE once; a dead worker's DOING tasks go back to TODO at once,
 * a stalled one's after doing_timeout_ms unless the caller knows it is alive.  Step-tied data checkpoints (report
 * at step S, export S, import into any manager) resume the data at S with no
 * sample lost or repeated, whatever the number of workers then.
 *
 * Memory follows the tasks in flight, the returned ranges and the pending
 * checkpoint steps, never the dataset: 10^7 shards cost kilobytes.
 *
 * Pure: no I/O, no clock (every time is an argument), no locks, no randomness
 * but what is seeded by the inputs; the same calls give the same answers, so
 * the daemon's journal can replay them.  Not thread-safe: the caller holds its
 * state lock around every call.
 */
#ifndef MASTER_SHARD_H
#define MASTER_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"

enum {
	SHARD_NAME_MAX = 64,
	SHARD_MAX_DATASETS = 64,
	SHARD_RING = 32,             /* recent dones kept per worker for checkpoints */
	SHARD_MAX_PENDING_STEPS = 8, /* checkpoint steps kept; the oldest is dropped */
	SHARD_DEFAULT_MAX_IN_FLIGHT = 65536,
	SHARD_DEFAULT_MAX_TODO_RANGES = 65536,
};

struct shard_dataset {
	char name[SHARD_NAME_MAX]; /* unique among the manager's datasets */
	int64_t size;              /* samples, >= 1 */
	int64_t shard_size;        /* samples per shard, 1..size; the last shard may be short */
	int epochs;                /* >= 1 */
	bool shuffle;              /* false: shards in index order every epoch */
	uint64_t seed;             /* shuffle key, with the epoch */
};

/* One task: samples [start, end) of dataset ds in epoch epoch.  A task never
 * spans two shards; it is a whole shard, or a part of one after a checkpoint
 * import cut it.  Ids are > 0, unique and increasing over the manager's life
 * (also across snapshot load and checkpoint import). */
struct shard_task {
	int64_t id;
	int ds;
	int epoch;
	int64_t start, end;
};

struct shard_conf {
	int64_t doing_timeout_ms; /* a DOING task older than this goes back to TODO; <= 0: never */
	int max_todo_ranges;      /* most TODO ranges a loaded document may hold; <= 0: default */
	int max_tasks_in_flight;  /* most DOING tasks, all datasets together; <= 0: default */
};

/* epoch: the epoch being handed out (for ds < 0 the smallest over datasets). */
struct shard_stats {
	int64_t samples_total; /* size * epochs */
	int64_t samples_done;  /* DONE: counted by done, or by an imported checkpoint */
	int64_t tasks_doing;
	int64_t todo_ranges; /* returned ranges waiting to be served again */
	int epoch;
	bool finished; /* every sample of every epoch DONE */
};

struct shard_mgr;

/* A manager over nds (1..SHARD_MAX_DATASETS) datasets, copied.  NULL with *err
 * (field "datasets[i].size", ...) when a dataset or c is invalid or out of memory.
 * Free with shard_free. */
struct shard_mgr *shard_new(const struct shard_dataset *ds, int nds, const struct shard_conf *c,
			    struct rv_err *err);
/* NULL ok. */
void shard_free(struct shard_mgr *m);

/* Hand worker a task of dataset ds, due back by now_ms + doing_timeout_ms.
 * Worker ids are the caller's (e.g. global ranks or node ids), within
 * +-2^53 so that snapshots keep them exact; times are ms >= 0.
 * Returned ranges are served first (lowest epoch, then lowest sample), then
 * the epoch's shuffled order.  The next epoch starts once the current one's
 * order is handed out and none of its returned ranges is left, even while
 * some of its tasks are still DOING.
 * 1 with *out; 0 nothing to hand out now (stats.finished, or every TODO sample
 * is DOING: ask again later); -EINVAL unknown ds; -ENOSPC max_tasks_in_flight
 * tasks are DOING; -ENOMEM. */
int shard_next(struct shard_mgr *m, int ds, int64_t worker, int64_t now_ms, struct shard_task *out);

/* Worker finished task_id: every sample of it has gone into a training step.
 * 1 counted now; 0 already counted or unknown (a late or repeated done, or a
 * task taken back from a dead or stalled worker: nothing is counted twice);
 * -EPERM the task is DOING for another worker (nothing changes); -ENOMEM. */
int shard_done(struct shard_mgr *m, int64_t task_id, int64_t worker, int64_t now_ms);

/* Every DOING task of worker back to TODO at once; returns how many, or
 * -ENOMEM (nothing changed).  The tasks stay known to the worker's ring
 * (at its death's seq), so a step report it sent before it stopped and
 * that lands after this still places what it consumed of them
 * (shard_ckpt_report). */
int shard_worker_dead(struct shard_mgr *m, int64_t worker);

/* Whether worker still holds its tasks: its process is known to be alive
 * (its node's agent heartbeats).  Must be pure over the caller's state, so
 * that a replay takes the same tasks back. */
typedef bool (*shard_held_fn)(const void *arg, int64_t worker);

/* Every DOING task whose deadline is <= now_ms back to TODO, unless held
 * (may be NULL: none is) says its worker still holds it: such a task gets
 * the deadline now_ms + doing_timeout_ms instead, since a live worker may
 * be training it, however slowly (stopped and resumed), and a second worker
 * would train its samples twice.  Returns how many went back, or -ENOMEM
 * (nothing changed).  A stalled worker's later done of a task taken back
 * answers 0: what it consumed of it counts for nothing, as for a dead one. */
int shard_expire(struct shard_mgr *m, int64_t now_ms, shard_held_fn held, const void *arg);

/* The earliest DOING deadline, INT64_MAX when none (or no timeout). */
int64_t shard_next_deadline(const struct shard_mgr *m);

/* Counters of dataset ds, or of all datasets for ds < 0 (an unknown ds gives zeros). */
void shard_stats(const struct shard_mgr *m, int ds, struct shard_stats *st);

/*
 * Step-tied data checkpoints.  Every worker that saves model step S reports
 * the task it was in at S and how many of its samples had gone into steps up
 * to S (the last task it finished, with its full length, when it was between
 * tasks; task_id 0 when it had consumed nothing yet).  A worker consumes its
 * tasks in the order it got them.  In the checkpoint of S:
 *   - the consumed part of the reported task is DONE, its rest TODO;
 *   - the worker's tasks of that dataset with a smaller id are DONE (consumed
 *     before S, even when their done arrives later);
 *   - its tasks with a greater id (taken after S: prefetched) are TODO, done or not;
 *   - tasks of workers that did not report S and were not DONE at the first
 *     report of S are TODO; tasks taken back from a dead or stalled worker are TODO.
 * The first report of S copies the TODO state (DOING counted as TODO); later
 * reports carve what they consumed out of that copy.  At most
 * SHARD_MAX_PENDING_STEPS steps are kept, the oldest dropped.
 */

/* 0 recorded (or the same report again); -EINVAL consumed out of [0, task length]
 * or step < 0; -EEXIST this worker reported a different position for S and
 * that dataset; -ERANGE the report cannot be reconciled (task of another
 * worker, a finished task reported as partly consumed, samples another report
 * of S already claimed (they were taken back from a stalled reporter and
 * handed to this one), more than SHARD_RING dones since the first report of
 * S, the worker died after the first report of S, a step older than those
 * kept, several datasets and a task no longer known): *err says why, nothing
 * is recorded, the worker counts as one that did not report, and the
 * checkpoint stays exact.  -ENOMEM. */
int shard_ckpt_report(struct shard_mgr *m, int64_t step, int64_t worker, int64_t task_id,
		      int64_t consumed, struct rv_err *err);

/* The world that reports step S has ranks ranks (workers 0..ranks-1): its
 * checkpoint is whole once that many workers reported it.  The first known
 * count stays (reports of S from a later world do not change it); ranks 0
 * says nothing.  0, or -ENOENT no report of S is kept. */
int shard_ckpt_expect(struct shard_mgr *m, int64_t step, int ranks);

/* Append the checkpoint of step S to *out as a JSON document (datasets with
 * their cursor, TODO ranges, samples done: ranges, never lists of shards).
 * 0; -ENOENT no report of S is kept; -EBUSY fewer workers reported S than
 * its world has ranks (shard_ckpt_expect: the samples of those that did not
 * would count as TODO, to be trained twice); -ESTALE the same, and none of
 * the missing ranks will ever report S (each died since its first report,
 * or reported a later step): S is never whole; -ERANGE the document would
 * exceed max_todo_ranges; -ENOMEM. */
int shard_ckpt_export(const struct shard_mgr *m, int64_t step, struct rv_buf *out,
		      struct rv_err *err);

/* Replace the whole state with the checkpoint document: its TODO is TODO, the
 * rest DONE, nothing DOING, no pending step; task ids keep increasing.  The
 * datasets must be the manager's (name, size, shard_size, epochs, shuffle,
 * seed).  0; -EINVAL bad document (*err names the field), the state unchanged;
 * -ENOMEM. */
int shard_ckpt_import(struct shard_mgr *m, const char *doc, size_t len, struct rv_err *err);

/* Append the whole state (DOING tasks, recent dones, pending steps) to *out
 * as JSON.  0; -ENOMEM. */
int shard_snapshot_save(const struct shard_mgr *m, struct rv_buf *out);

/* Replace the state with a document from shard_snapshot_save of a manager
 * over the same datasets; afterwards the manager answers every call as the
 * saved one would have.  0; -EINVAL bad document or other datasets (*err
 * names the field), the state unchanged; -ENOMEM. */
int shard_snapshot_load(struct shard_mgr *m, const char *doc, size_t len, struct rv_err *err);

#endif
