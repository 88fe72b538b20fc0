/*
 * stream.h: streaming datasets (online learning) for rover-master: shards
 * that are offset ranges of a partition, handed out exactly once, and the
 * committed offset of each partition.
 *
 * A streaming dataset has partitions (a topic's partitions, a log's
 * segments); each has a start offset and a known end (what a producer said
 * is available, or unbounded).  Workers pull tasks [a, b) of one partition,
 * at most shard_size records, never past the known end; a done makes a task
 * DONE once; a dead worker's tasks go back at once, a stalled one's after
 * doing_timeout_ms, and are handed out again before fresh offsets.  The
 * committed offset of a partition is the lowest offset not yet DONE: DONE
 * ranges above a gap are held until the gap closes, so a job resumed from
 * the committed offset loses nothing (it may redo the held ranges only if
 * they were never journaled, which the master never lets happen).
 *
 * Memory follows the tasks in flight and the ranges returned or held, never
 * the offsets seen.  Pure like shard.c: no I/O, no clock, no locks; the same
 * calls give the same answers, so the master's journal replays them.  Not
 * thread-safe: the caller holds its state lock.
 */
#ifndef MASTER_STREAM_H
#define MASTER_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"

enum {
	STREAM_NAME_MAX = 64,
	STREAM_MAX_DATASETS = 64,
	STREAM_MAX_PARTITIONS = 1024,
	STREAM_DEFAULT_MAX_IN_FLIGHT = 65536,
};

/* Task ids of streaming tasks start here, so that they never meet the ids
 * of shard.c's tasks (which count from 1) on the same done endpoint; below
 * 2^53, so JSON numbers keep them exact. */
#define STREAM_ID_BASE ((int64_t)1 << 52)

struct stream_partition {
	char name[STREAM_NAME_MAX]; /* unique within its dataset */
	int64_t start;              /* first offset, >= 0 */
	int64_t end;                /* known available end, >= start; < 0: unbounded */
};

struct stream_dataset {
	char name[STREAM_NAME_MAX];
	int64_t shard_size;                   /* records per task, >= 1 */
	int nparts;                           /* 1..STREAM_MAX_PARTITIONS */
	const struct stream_partition *parts; /* borrowed by stream_new (copied) */
};

/* Offsets [start, end) of partition part of dataset ds. */
struct stream_task {
	int64_t id; /* >= STREAM_ID_BASE, increasing over the manager's life */
	int ds, part;
	int64_t start, end;
};

struct stream_conf {
	int64_t doing_timeout_ms; /* <= 0: never */
	int max_tasks_in_flight;  /* all datasets together; <= 0: default */
};

/* One partition's position. */
struct stream_part_stats {
	const char *name;                      /* the manager's storage */
	int64_t start, committed, handed, end; /* handed: next fresh offset; end < 0: unbounded */
	int64_t done;                          /* records DONE since start (committed or held) */
	int64_t tasks_done;                    /* tasks DONE since start */
	int64_t doing;                         /* tasks DOING */
	int64_t returned; /* ranges taken back, waiting to be handed out again */
	int64_t held;     /* DONE ranges above the committed offset */
};

struct stream_mgr;

/* A manager over nds (0..STREAM_MAX_DATASETS) datasets, copied.  NULL with
 * *err (field "datasets[i].partitions[j].end", ...) on a bad dataset or out
 * of memory.  Free with stream_free (NULL ok). */
struct stream_mgr *stream_new(const struct stream_dataset *ds, int nds, const struct stream_conf *c,
			      struct rv_err *err);
void stream_free(struct stream_mgr *m);

/* Hand worker a task of dataset ds, due back by now_ms + doing_timeout_ms:
 * a returned range first (lowest partition, lowest offset), else the next
 * fresh offsets of the partitions in turn (a task may be short when the
 * known end is near).  1 with *out; 0 nothing available now (ask again once
 * a producer said more is there); -EINVAL unknown ds; -ENOSPC
 * max_tasks_in_flight tasks are DOING; -ENOMEM. */
int stream_next(struct stream_mgr *m, int ds, int64_t worker, int64_t now_ms,
		struct stream_task *out);

/* Worker finished task id.  1 counted now (the committed offset moves when
 * the range closes the gap); 0 already counted or unknown (late, repeated,
 * or taken back); -EPERM the task is DOING for another worker; -ENOMEM. */
int stream_done(struct stream_mgr *m, int64_t id, int64_t worker);

/* Every DOING task of worker back at once; how many, or -ENOMEM. */
int stream_worker_dead(struct stream_mgr *m, int64_t worker);
/* Whether worker still holds its tasks (its process is known to be
 * alive); pure over the caller's state, so a replay takes the same back. */
typedef bool (*stream_held_fn)(const void *arg, int64_t worker);
/* Every DOING task due by now_ms back, but those of a worker held (may be
 * NULL: none is) says still holds: they get another doing timeout (a live
 * worker may still be reading them).  How many went back, or -ENOMEM. */
int stream_expire(struct stream_mgr *m, int64_t now_ms, stream_held_fn held, const void *arg);
/* The earliest DOING deadline, INT64_MAX when none (or no timeout). */
int64_t stream_next_deadline(const struct stream_mgr *m);

/* A producer says offsets below end are available in partition part
 * (by name) of ds.  1 the known end moved; 0 nothing changed (the end was
 * already there or beyond, or the partition is unbounded); -EINVAL unknown
 * ds or end < 0; -ENOENT unknown partition. */
int stream_extend(struct stream_mgr *m, int ds, const char *part, int64_t end);

/* Dataset index by name, -ENOENT. */
int stream_dataset(const struct stream_mgr *m, const char *name);
/* Number of partitions of ds (0 for an unknown one) and their positions. */
int stream_nparts(const struct stream_mgr *m, int ds);
void stream_part_stats(const struct stream_mgr *m, int ds, int part, struct stream_part_stats *st);
/* Name of partition part of ds (the manager's storage), "" when unknown. */
const char *stream_part_name(const struct stream_mgr *m, int ds, int part);

/* Append the committed offsets as a JSON object to *out:
 * {"datasets":[{"name","partitions":[{"name","committed"}]}]}.  0; -ENOMEM. */
int stream_offsets_save(const struct stream_mgr *m, struct rv_buf *out);
/* Resume every partition named in doc (a stream_offsets_save object) from
 * its committed offset: nothing of it DOING, returned or held; the known
 * end is at least the offset.  Partitions the document does not name keep
 * their state.  0; -EINVAL a dataset or partition the manager lacks or a
 * bad document (*err names the field), the state unchanged; -ENOMEM. */
int stream_offsets_load(struct stream_mgr *m, const char *doc, size_t len, struct rv_err *err);

/* Whole state (tasks, ranges, ends) as JSON, and back: after a load the
 * manager answers every call as the saved one would.  0; -EINVAL bad
 * document or other datasets (*err), the state unchanged; -ENOMEM. */
int stream_snapshot_save(const struct stream_mgr *m, struct rv_buf *out);
int stream_snapshot_load(struct stream_mgr *m, const char *doc, size_t len, struct rv_err *err);

#endif
