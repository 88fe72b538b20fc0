/*
 * journal.h: the master's append-only journal of operations, with group
 * commit and snapshot compaction.  The daemon applies an operation under its
 * state lock, appends a record of it, unlocks, then waits in journal_sync
 * until the record is durable before it replies; after a restart it loads the
 * snapshot and re-applies every record after it, in order.
 *
 * Files in the state folder (see journal.c for the byte layout):
 *   snapshot   one record: the whole state as of sequence number S
 *   journal    the records appended after it (sequence numbers S+1, S+2, ...),
 *              then zeros written ahead of them (see journal_opts.prewrite)
 *   lock       held with flock() while open: one process per folder
 * Thread-safe: any thread may append, sync or snapshot.  Records are ordered
 * by journal_append; a snapshot covers every record appended before
 * journal_snapshot_begin (call it under the lock that orders the appends,
 * with the state it saves serialised) and is written by
 * journal_snapshot_write without that lock: records go on being appended
 * and made durable meanwhile.
 */
#ifndef MASTER_JOURNAL_H
#define MASTER_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

enum {
	JOURNAL_MAX_RECORD_DEFAULT = 1 << 20,   /* 1 MiB per record */
	JOURNAL_MAX_SNAPSHOT_DEFAULT = 1 << 30, /* 1 GiB snapshot */
	JOURNAL_COMMIT_DELAY_MAX_US = 100000,   /* commit_delay_us bound */
	JOURNAL_PREWRITE_DEFAULT = 16 << 20,    /* 16 MiB of zeros ahead */
	JOURNAL_PREWRITE_MAX = 1 << 30,
	JOURNAL_SYNC_BUCKETS = 10, /* sync time histogram, journal_stats */
	JOURNAL_SLOW_MS = 1000,    /* a commit or prewrite this long is logged */
};

struct journal_opts {
	const char *dir;     /* state folder, created (0700) when missing; borrowed */
	size_t max_record;   /* payload bound of one record; 0: JOURNAL_MAX_RECORD_DEFAULT */
	size_t max_snapshot; /* payload bound of the snapshot; 0: JOURNAL_MAX_SNAPSHOT_DEFAULT */
	int commit_delay_us; /* a commit waits this long for more records (0..100000) */
	bool nosync;         /* write but never fsync (and no prewrite): tests and benches only */
	/* The journal file is kept written with zeros this far (bytes) ahead of
	 * its records, so that a commit overwrites blocks the file system has
	 * already allocated and its fdatasync need not commit the file's size:
	 * 0: JOURNAL_PREWRITE_DEFAULT; at most JOURNAL_PREWRITE_MAX. */
	size_t prewrite;
	/* Tests only (NULL: none): called by journal_snapshot_write at each of
	 * its steps, on its thread, holding no lock of the journal's. */
	void (*snapshot_step)(void *ctx, int step);
	void *snapshot_step_ctx;
};

/* The steps of journal_snapshot_write told to journal_opts.snapshot_step. */
enum {
	JOURNAL_SNAP_WRITTEN = 1, /* snapshot.tmp written and fsynced */
	JOURNAL_SNAP_RENAMED,     /* the snapshot in place, the old journal still read */
	JOURNAL_SNAP_DONE,        /* the fresh journal in place */
};

/* Replay callback: data (len bytes) is valid only during the call.  Return 0,
 * or a negative errno (detail in err) to stop journal_open with it. */
typedef int (*journal_apply_fn)(void *ctx, int type, const void *data, size_t len,
				struct rv_err *err);

/*
 * Open (or create) the journal in o->dir: on_snapshot once if there is a
 * snapshot (type 0), then on_record for every record after it, in order.
 * The log ends where no valid batch follows (zeros: the prewritten room).
 * Damage in the last batch written (what one commit wrote before its
 * fdatasync: short, or a bad checksum, as a crash mid-write leaves) is a torn
 * tail: that batch is overwritten with zeros (up to its last non-zero byte)
 * and counted (torn_records, torn_bytes_truncated); the next record goes
 * where it was.  The prewritten room is made when there is space for it: a
 * full folder still opens.  Returns the journal (free with journal_close) or NULL with
 * err filled: -EUCLEAN a damaged record with a later batch after it, a
 * damaged snapshot or a gap in the sequence numbers (err->msg names the file
 * and the byte offset; nothing applied, nothing changed on disk); -EMSGSIZE
 * a record above max_record; -EBUSY another process has the folder open;
 * -EINVAL bad options; the callback's error; another -errno from the file
 * system.  Both callbacks may be NULL.
 */
struct journal *journal_open(const struct journal_opts *o, journal_apply_fn on_snapshot,
			     journal_apply_fn on_record, void *ctx, struct rv_err *err);

/*
 * Append one record (type >= 0, len bytes of data, copied) to the buffer;
 * nothing is written until a journal_sync.  Returns its sequence number (> 0,
 * one more than the last), -EMSGSIZE len above max_record, -EINVAL a negative
 * type, -EIO the journal failed (an fsync error: restart and replay).
 */
int64_t journal_append(struct journal *j, int type, const void *data, size_t len);

/*
 * Wait until every record up to seq (seq <= 0: every record appended so far)
 * is durable.  One thread writes and fdatasyncs what all threads appended;
 * the others wait for it.  Returns 0; -ETIMEDOUT after timeout_ms (a write in
 * progress is not interrupted); -EINVAL seq was never appended; the -errno of
 * a failed write (-ENOSPC, -EFBIG, ...: the file is cut back to its last good
 * record and the records stay buffered for the next sync); -EIO the journal
 * failed for good (an fsync error).
 */
int journal_sync(struct journal *j, int64_t seq, int timeout_ms);

/*
 * Start a snapshot: it covers every record appended before this call.
 * Call it under the lock that orders the appends, with the state it saves
 * serialised under the same hold, then journal_snapshot_write (without that
 * lock).  Returns the last sequence number covered (>= 0); -EBUSY a
 * snapshot is already started; -EIO the journal failed.
 */
int64_t journal_snapshot_begin(struct journal *j);

/*
 * Write the snapshot journal_snapshot_begin started: state (len bytes,
 * copied out before return) to snapshot.tmp and fsync it while records are
 * appended and synced to the old journal, then (the writer slot held, for a
 * rename, a folder fsync and the fresh journal's write) rename it over the
 * snapshot and start a fresh journal holding the records after the
 * snapshot's: the ones made durable meanwhile (copied) and the ones still
 * buffered (written).  Once it returns 0 every record appended before it
 * is durable.  -EMSGSIZE len above max_snapshot; -ETIMEDOUT a write did not
 * finish within 60 s; -EIO the journal failed (a folder fsync failed after
 * a rename); another -errno (err names the file and the step): either the
 * snapshot was not replaced, or it was (stats.durable_seq says so) but the
 * fresh journal could not be started.  Either way the journal goes on, in
 * the old journal file, and the snapshot is over.
 */
int journal_snapshot_write(struct journal *j, const void *state, size_t len, struct rv_err *err);

/* End a snapshot begun without writing it (its state could not be made):
 * nothing changes on disk. */
void journal_snapshot_abort(struct journal *j);

/* journal_snapshot_begin then journal_snapshot_write: the snapshot covers
 * every record appended before the call. */
int journal_snapshot(struct journal *j, const void *state, size_t len, struct rv_err *err);

struct journal_stats {
	int64_t records;              /* appended since open */
	int64_t bytes;                /* written to the journal file since open */
	int64_t fsyncs;               /* fdatasyncs of the journal file since open */
	int64_t snapshots;            /* snapshots taken since open */
	int64_t torn_bytes_truncated; /* cleared of a torn tail at open */
	int64_t torn_records;         /* 1 when open cut a torn last batch, else 0 */
	int64_t replayed;             /* records replayed at open */
	int64_t seq;                  /* last appended sequence number */
	int64_t durable_seq;          /* last durable sequence number */
	/* Each commit's write and fdatasync (the time its waiters waited for
	 * the disk, not for the lock): a histogram, upper bounds
	 * journal_sync_le_ms, the last bucket unbounded. */
	int64_t sync_hist[JOURNAL_SYNC_BUCKETS + 1];
	int64_t sync_us_sum, sync_us_max;
	int64_t extend_us_max; /* the longest prewrite of zeros (and its fsync) */
};
/* The histogram's bucket bounds (ms), ascending. */
extern const double journal_sync_le_ms[JOURNAL_SYNC_BUCKETS];
void journal_stats(const struct journal *j, struct journal_stats *st);
/* The last durable sequence number (stats.durable_seq), cheaply. */
int64_t journal_durable_seq(const struct journal *j);

/* Sync what was appended (at most 60 s), close the files, free.  No other
 * call on j may run during or after it.  NULL ok. */
void journal_close(struct journal *j);

#endif
