/*
 * run.h: rover-run's supervisor: rendezvous with a rover-master, start the
 * local worker group, watch it, restart it, and say how the job ended.
 *
 * One thread, one loop (run.c): an epoll set over a signalfd (SIGINT,
 * SIGTERM, SIGCHLD), a timerfd (heartbeats, the hang check), every
 * worker's pidfd and output pipes.  Nothing polls on an interval: a
 * worker's death wakes the loop through its pidfd at once.
 */
#ifndef RUN_H
#define RUN_H

#include "flags.h"

/* Exit codes of rover-run. */
enum {
	RUN_EXIT_OK = 0,
	RUN_EXIT_FAILED = 1, /* workers failed past --max-restarts, or a user-code error */
	RUN_EXIT_USAGE = 2,  /* bad flags, no master to reach */
};

/* Run the job f describes to its end.  Returns the exit code: RUN_EXIT_*,
 * or 128 + the signal that stopped it (SIGINT, SIGTERM). */
int run_job(const struct flags *f);

#endif
