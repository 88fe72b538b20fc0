/*
 * trainer.h: what trainer.c (the handle, shards, steps) and ckpt.c (the
 * flash checkpoint slots) share inside librover-trainer.  Not installed:
 * rover_trainer.h is the library's interface.
 */
#ifndef RV_TRAINER_INTERNAL_H
#define RV_TRAINER_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master_client.h"
#include "rover_trainer.h"

/* One shared-memory slot as this process has it mapped. */
struct trainer_slot {
	int fd; /* -1 until opened */
	unsigned char *map;
	uint64_t mapped; /* bytes mapped (the segment's size) */
	/* the committed save (seq, crc) whose payload was checked: only this
	 * process writes its slots, so it is checked once, not at every look
	 * (a restart's steps and load each read it: 2 x 256 MiB more CRC per
	 * rank and slot cost a restart about a second on 2 cores) */
	uint64_t ok_seq;
	uint32_t ok_crc;
};

struct trainer_courier;

struct rv_trainer {
	struct rv_master_client *mc; /* NULL: no master */
	/* the same master with a short retry budget: a save's report of the
	 * data position must not hold the training loop through an outage */
	struct rv_master_client *mc_report;
	char url[300]; /* the master's */
	/* courier.c: shards fetched ahead, reports queued (NULL: none) */
	struct trainer_courier *courier;
	char node[64];
	char job[64];
	char dataset[64];
	int rank, local_rank, world_size;
	/* the current shard (id 0: none) and samples of it consumed */
	struct rv_trainer_shard cur;
	int64_t consumed;
	/* the last shard done, with its length: the position between shards */
	int64_t last_id, last_len;
	/* report_step: when the last report was made, for the speed */
	int64_t last_step_ns;
	/* flash checkpoint */
	struct trainer_slot slot[3]; /* this rank's two slots, and a view of
				      * a checkpoint loaded from storage or
				      * from another rank's slot */
	int loaded_slot;             /* -1: nothing loaded */
	int loaded_from, loaded_rank;
	/* the save rv_trainer_save_start began, its thread still copying or
	 * not yet waited for (NULL: none) */
	struct trainer_save *pending;
	char errbuf[512];
};

/* Record err (or, without one, msg) as t's last error; returns code. */
int trainer_fail(struct rv_trainer *t, const struct rv_err *err, int code);

/* ckpt.c: wait for a save in flight, unmap both slots. */
void trainer_ckpt_close(struct rv_trainer *t);

/* copy.c: the copy of a save's buffers into a slot with their CRC32C. */
struct trainer_copy_piece {
	int buf;      /* the first buffer it covers */
	uint64_t off; /* from this offset of it (a multiple of 4 KiB) */
	uint64_t len; /* bytes, over as many buffers as they take */
};
struct trainer_copy {
	unsigned char *payload; /* the slot's first payload byte */
	int n;
	const unsigned char **src; /* n buffers, borrowed */
	uint64_t *sizes, *dsto;    /* each one's size and offset in the payload */
	uint64_t bytes;            /* the buffers' bytes, padding not counted */
	struct trainer_copy_piece *pieces;
	uint32_t *crcs; /* each piece's CRC32C, from zero */
	size_t npieces;
	atomic_size_t next; /* the next piece to take */
	uint32_t crc;       /* of all the bytes, once run */
};
/* Plan the copy of n buffers (bufs[i], sizes[i] bytes; the arrays are
 * copied, the bytes borrowed) into payload, each at a 64-byte boundary.
 * 0 or -ENOMEM; release with trainer_copy_release. */
int trainer_copy_init(struct trainer_copy *c, unsigned char *payload, const void *const *bufs,
		      const uint64_t *sizes, int n);
/* Copy and checksum on the calling thread and, with threads 2, one more
 * (the caller alone when it cannot be started); c->crc is then set. */
void trainer_copy_run(struct trainer_copy *c, int threads);
/* Free what trainer_copy_init allocated (twice is harmless). */
void trainer_copy_release(struct trainer_copy *c);

/* courier.c: the master's calls off the loop's path.  Each returns a
 * negative errno with err set, or 0; -ENOSYS when t has no courier here
 * (none could be started, or a forked child): the caller calls the master
 * itself. */
int trainer_courier_start(struct rv_trainer *t, struct rv_err *err);
/* The next task of the window, waiting for the thread to fetch one when
 * it is empty; a wait or finished status when that was the last answer. */
int trainer_courier_next(struct rv_trainer *t, struct rv_shard_task *out, struct rv_err *err);
/* Queued, delivered in order: a step report (dropped with -ENOBUFS when
 * the queue is full), a done and a data position (which wait for room). */
int trainer_courier_step(struct rv_trainer *t, const struct rv_step_report *s, struct rv_err *err);
int trainer_courier_done(struct rv_trainer *t, const struct rv_shard_done *d, struct rv_err *err);
int trainer_courier_ckpt(struct rv_trainer *t, const struct rv_ckpt_report *r, struct rv_err *err);
/* Deliver what is queued, then drop the window: the master's shard state
 * is about to be replaced (a data checkpoint imported).  0, or
 * -ETIMEDOUT. */
int trainer_courier_forget(struct rv_trainer *t);
/* Deliver what is queued (10 s at most), stop the thread, free it. */
void trainer_courier_close(struct rv_trainer *t);

/* Monotonic clock in ns. */
int64_t trainer_now_ns(void);

#endif
