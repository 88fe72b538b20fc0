/*
 * rdzv.h: the rendezvous of one job's nodes (agents), as a pure state
 * machine: no I/O, no clock, no randomness.  Every call that changes the
 * state takes the time (ms) from its caller, so the daemon can journal each
 * operation with its timestamp and a replay reaches the same state.  Not
 * thread-safe: the daemon calls it under its state lock.  A struct rdzv owns
 * all its memory; the caller owns every buffer it passes in.
 *
 * Rounds.  Round 0 means "nothing yet"; the first join opens round 1.  A
 * round is GATHERING until enough nodes wait, then COMPLETE with a world, or
 * FAILED when the gang wait ran out (terminal: the job stops).  With
 * eff_min = min_nodes rounded up to node_unit and eff_max = max_nodes rounded
 * down, a gathering round completes when eff_min nodes wait and either
 * eff_max wait (and every member of the previous world still known waits
 * again) or last_call_ms has passed since eff_min was first reached in this
 * round (later joins do not push that deadline back) and every member of
 * the previous world still known waits again or heartbeat_timeout_ms passed
 * since the round opened (they learn of it by their heartbeat: a short last
 * call must not form a world without them, or the one left out opens the
 * next round in turn, again and again).  The world takes
 * the largest multiple of node_unit <= min(waiting, eff_max), preferring the
 * previous world's members, then the earliest joiners; the others stay
 * waiting as spares.
 *
 * A new round opens (the round number grows by one) when a member of the
 * complete world leaves, dies or joins again (its workers restarted), or when
 * spares could grow the world (world < eff_max and node_unit spares wait).
 * Spares never disturb a world at eff_max.  Joins and leaves while a round
 * gathers change who waits, not the round.  When a round opens, the old
 * members are no longer waiting: each must call rdzv_join again (its
 * rdzv_world for the old round says -ESTALE).  Waiting spares carry over.
 *
 * Agent protocol: round = rdzv_join(); poll rdzv_world(name, round) until 1
 * (train as group_rank of the world) or -EAGAIN (spare, keep polling),
 * -ESTALE (join again), -ECANCELED (the job failed), -ENOENT (declared dead:
 * join again).  While training, heartbeat; when rdzv_state's round is greater
 * than the agent's round (rdzv_waiting() > 0 implies it), join again.
 *
 * Group ranks are stable: a member of the previous world keeps its group rank
 * when it is < the new world's node count; the others fill the free ranks in
 * join order.  rank_offset = sum of local_world_size over lower group ranks.
 */
#ifndef RDZV_H
#define RDZV_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "buf.h"
#include "err.h"

enum { RDZV_MAX_NODES = 1024 }; /* known nodes: world, waiting and idle */
enum { RDZV_GATHERING = 0, RDZV_COMPLETE = 1, RDZV_FAILED = 2 };

struct rdzv_conf {
	int min_nodes, max_nodes;     /* 1 <= min <= max <= RDZV_MAX_NODES */
	int node_unit;                /* world size in nodes is a multiple of it (>= 1) */
	int64_t last_call_ms;         /* wait after eff_min is reached to gather more (>= 0) */
	int64_t max_wait_ms;          /* gang wait for eff_min; 0 = forever */
	int64_t heartbeat_timeout_ms; /* a node silent this long is dead; 0 = never */
};

struct rdzv_node {
	char name[64];        /* unique per node, 1..63 printable bytes */
	char addr[64];        /* how its peers reach it ("host:port"), may be empty */
	int local_world_size; /* processes on this node, 1..65536 */
};

struct rdzv_member {
	struct rdzv_node node;
	int group_rank;  /* 0..nnodes-1, the index in members[] */
	int rank_offset; /* global rank of its local rank 0 */
};

struct rdzv_world {
	int64_t round;
	int nnodes;
	int world_size;                             /* sum of local_world_size */
	struct rdzv_member members[RDZV_MAX_NODES]; /* by group rank; nnodes used */
};

/* NULL with *err (-EINVAL naming the field: bounds, or no multiple of
 * node_unit within min..max) or out of memory.  Free with rdzv_free. */
struct rdzv *rdzv_new(const struct rdzv_conf *c, struct rv_err *err);
/* Accepts NULL. */
void rdzv_free(struct rdzv *r);

/* Node n (copied) waits for a round.  Returns the round to pass to
 * rdzv_world (> 0): the gathering round, or while COMPLETE the current round
 * (a non-member waits as a spare: -EAGAIN until a round opens; a member
 * joining again opens a new round and gets its number).  Also counts as a
 * heartbeat.  -EINVAL bad node, -ECANCELED the rendezvous failed, -ENOSPC
 * RDZV_MAX_NODES nodes are known already. */
int64_t rdzv_join(struct rdzv *r, const struct rdzv_node *n, int64_t now_ms);

/* Where node name stands in round.  1: complete and the node is *group_rank
 * in *w (w and group_rank may be NULL); 0: still gathering with this node
 * waiting; -ESTALE: round superseded, or the node is not waiting in it (join
 * again); -EAGAIN: complete without this node (a spare, waits for the next
 * round); -ECANCELED: the rendezvous failed (min not reached within max
 * wait); -ENOENT: unknown node (never joined, left or declared dead);
 * -EINVAL: a round that was never opened. */
int rdzv_world(const struct rdzv *r, const char *name, int64_t round, struct rdzv_world *w,
	       int *group_rank);

/* Node name left or died: it is forgotten.  1 when that opened a new round
 * (it was a member of the complete world), 0 otherwise, -ENOENT unknown. */
int rdzv_leave(struct rdzv *r, const char *name, int64_t now_ms);
/* The same for a node whose agent is gone (killed, declared dead): the
 * round it opens completes as soon as every other member of the world is
 * back, without the last call (the world shrinks at once; the node, when it
 * comes back, grows it again). */
int rdzv_lost(struct rdzv *r, const char *name, int64_t now_ms);

/* Node name is alive at now_ms.  0, or -ENOENT unknown (declared dead: it
 * must join again). */
int rdzv_heartbeat(struct rdzv *r, const char *name, int64_t now_ms);

/* Whether node name is alive at now_ms: known (joined, neither left nor
 * declared dead), not done, and heard from within heartbeat_timeout_ms
 * (whenever, when that is <= 0). */
bool rdzv_alive(const struct rdzv *r, const char *name, int64_t now_ms);

/* Node name finished its work (its agent exited with success): its silence
 * from now on is not taken for a death, so it opens no new round, which
 * would stop its peers' workers in their last moments.  A join clears it.
 * 0, or -ENOENT unknown. */
int rdzv_done(struct rdzv *r, const char *name);

/* Every known node counts as seen at now_ms: a restarted master calls it
 * (as a journaled operation) once it serves again, so its own downtime is
 * not taken for silence.  Returns the number of known nodes. */
int rdzv_grace(struct rdzv *r, int64_t now_ms);

/* Advance time: first declares dead (as rdzv_leave) the nodes silent for
 * heartbeat_timeout_ms or more, at most max_dead of them, their names into
 * dead[0..*ndead-1] in order of silence (more left: rdzv_next_deadline is
 * already due, tick again); then completes a round whose last call ran out,
 * or fails one that gathered max_wait_ms short of eff_min.  Returns 1 when
 * the round or its state changed, 0 when not.  dead may be NULL when
 * max_dead is 0; ndead may be NULL. */
int rdzv_tick(struct rdzv *r, int64_t now_ms, char (*dead)[64], int max_dead, int *ndead);

/* The earliest time rdzv_tick has something to do (a last call, a gang wait
 * or a heartbeat running out); INT64_MAX when none. */
int64_t rdzv_next_deadline(const struct rdzv *r);

/* Nodes waiting in a gathering round (they will form the next world); 0 while
 * COMPLETE (spares that cannot change the world) or FAILED. */
int rdzv_waiting(const struct rdzv *r);

/* RDZV_GATHERING / RDZV_COMPLETE / RDZV_FAILED; *round the current round,
 * *nnodes the world's nodes when COMPLETE, else the nodes waiting (either
 * pointer may be NULL). */
int rdzv_state(const struct rdzv *r, int64_t *round, int *nnodes);

/* Nodes known (joined, neither left nor declared dead). */
int rdzv_nknown(const struct rdzv *r);

/* Ranks (the sum of local_world_size) of the last world that completed: it
 * may still train while the next round gathers.  0 before the first. */
int rdzv_last_world_size(const struct rdzv *r);

/* The current world for status pages: the state as rdzv_state, *w filled
 * when COMPLETE (else w->nnodes = 0, w->round the current round). */
int rdzv_current(const struct rdzv *r, struct rdzv_world *w);

/* Why the rendezvous failed ("" unless FAILED); borrowed, valid until the
 * next call on r. */
const char *rdzv_reason(const struct rdzv *r);

/* Counts of known nodes by what they do (for status and metrics). */
struct rdzv_stats {
	int known, members, waiting, idle;
	int64_t rounds_completed;
};
void rdzv_stats(const struct rdzv *r, struct rdzv_stats *st);

/* The whole state as one JSON object appended to out (the conf is not in it:
 * load into an rdzv made with the same conf).  0, or -ENOMEM. */
int rdzv_snapshot_save(const struct rdzv *r, struct rv_buf *out);
/* Replace the state with a document from rdzv_snapshot_save.  -EINVAL with
 * *err naming the field on a bad document; r is unchanged then. */
int rdzv_snapshot_load(struct rdzv *r, const char *doc, size_t len, struct rv_err *err);

#endif
