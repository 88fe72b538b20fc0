/*
 * worldwatch.h: rover-run hears at once that its world changed.  A thread
 * long-polls the master (rv_master_world_watch) while the node's round is
 * complete; when the master opens a new round (a node failed, left or
 * joined) it makes an eventfd readable, which the supervisor's epoll loop
 * takes to stop its workers at once, instead of waiting for a collective
 * to fail (gloo: a closed connection; NCCL: its timeout, minutes) or for
 * the next heartbeat.
 *
 * Threads: the supervisor calls every function here; the watch thread
 * owns its own master client.  worldwatch_stop leaves the thread to end
 * by itself (its long-poll may be in flight): the last of the two to let
 * go frees the struct.
 */
#ifndef WORLDWATCH_H
#define WORLDWATCH_H

#include <stdint.h>

#include "err.h"

struct worldwatch;

/* Watch node's rounds at the master at url ("http://HOST:PORT").  NULL with
 * err set. */
struct worldwatch *worldwatch_start(const char *url, const char *node, struct rv_err *err);

/* The eventfd to poll: readable once the watched round ended. */
int worldwatch_fd(const struct worldwatch *w);

/* Watch round from now on (0: none). */
void worldwatch_round(struct worldwatch *w, int64_t round);

/* Read the eventfd: the last round seen to end (0: none). */
int64_t worldwatch_take(struct worldwatch *w);

/* Stop watching.  Accepts NULL; returns NULL. */
struct worldwatch *worldwatch_stop(struct worldwatch *w);

#endif
