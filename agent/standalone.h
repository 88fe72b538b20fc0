/*
 * standalone.h: the private rover-master of `rover-run --standalone` (and
 * of one node without --rdzv-endpoint): the build's rover-master binary
 * (next to our own executable), started on a free loopback port with a job
 * spec made from the flags, its state in a temp folder, dying with us
 * (PR_SET_PDEATHSIG) and stopped and removed by standalone_stop.
 *
 * One thread; a struct standalone owns its process and its folder.
 */
#ifndef STANDALONE_H
#define STANDALONE_H

#include "err.h"
#include "flags.h"
#include "proc.h"

struct standalone {
	struct rv_proc proc;
	char dir[256]; /* the temp folder: job.json, state/, master.log */
	char url[80];  /* http://127.0.0.1:PORT */
	char addr[64]; /* 127.0.0.1:PORT */
};

/* Start the master for f's --nnodes and --node-unit; waits (up to 30 s) for
 * it to listen.  0, or a negative errno with err saying why (its log is
 * named). */
int standalone_start(struct standalone *s, const struct flags *f, struct rv_err *err);

/* SIGTERM (SIGKILL after 2 s), then remove the folder.  Idempotent. */
void standalone_stop(struct standalone *s);

#endif
