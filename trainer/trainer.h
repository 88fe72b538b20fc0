/*
 * trainer.h: what trainer.c (the handle, shards, steps) and ckpt.c (the
 * flash checkpoint slots) share inside librover-trainer.  Not installed:
 * rover_trainer.h is the library's interface.
 */
#ifndef RV_TRAINER_INTERNAL_H
#define RV_TRAINER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "master_client.h"
#include "rover_trainer.h"

/* One shared-memory slot as this process has it mapped. */
struct trainer_slot {
	int fd; /* -1 until opened */
	unsigned char *map;
	uint64_t mapped; /* bytes mapped (the segment's size) */
};

struct rv_trainer {
	struct rv_master_client *mc; /* NULL: no master */
	/* the same master with a short retry budget: a save's report of the
	 * data position must not hold the training loop through an outage */
	struct rv_master_client *mc_report;
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
	char errbuf[512];
};

/* Record err (or, without one, msg) as t's last error; returns code. */
int trainer_fail(struct rv_trainer *t, const struct rv_err *err, int code);

/* ckpt.c: unmap both slots. */
void trainer_ckpt_close(struct rv_trainer *t);

/* Monotonic clock in ns. */
int64_t trainer_now_ns(void);

#endif
