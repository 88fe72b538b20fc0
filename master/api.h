/*
 * api.h: rover-master's control API (api.c): the REST server the agents,
 * trainers and roverctl talk to, and the world long-polls it parks.
 *
 * main.c starts and stops it; master_api_start registers the long-polls'
 * entries in m->svc, through which the job state (state.c) and its timer
 * reach them.  Threading: libmicrohttpd's threads run the handlers; the
 * world functions run under m->lock.
 */
#ifndef MASTER_API_H
#define MASTER_API_H

#include <stdint.h>

#include "master.h"

/* Under m->lock: answer every parked world long-poll whose world is
 * decided, whose wait is over, or all of them once m->stopping. */
void master_world_poll(struct master *m);
/* Under m->lock: the earliest parked long-poll deadline (monotonic ms), or
 * INT64_MAX; at most MASTER_WATCH_LOOK_MS away while a world watch is
 * parked, for master_world_lost. */
int64_t master_world_deadline(const struct master *m);
#define MASTER_WATCH_LOOK_MS 20
/* Under m->lock: the members of the complete world whose world watch (a
 * long-poll held by their rover-run while it trains) found its connection
 * closed: that rover-run is gone (killed, its host's network down on its
 * side), which the heartbeat timeout would tell only seconds later.  Their
 * watches are dropped and up to max names copied to lost; returns how
 * many.  The caller makes each leave (MASTER_OP_LEAVE). */
int master_world_lost(struct master *m, char (*lost)[RV_NAME_MAX], int max);

/* Start the REST server on cfg.listen and register the long-polls'
 * entries in m->svc.  After state_open and plans_start.  0 or a negative
 * errno with err. */
int master_api_start(struct master *m, struct rv_err *err);
/* Stop the server (its handlers done).  Idempotent. */
void master_api_stop(struct master *m);

#endif
