/*
 * tcpstore.h: the workers' c10d store, held by rover-run instead of rank 0's
 * worker (torchrun's TORCHELASTIC_USE_AGENT_STORE): a TCP server speaking
 * torch's TCPStore protocol, so that it listens before any worker of a round
 * starts and every rank is a client.  Without it a restarted rank 1 that
 * reaches the store before the new rank 0 listens waits torch's one-second
 * connect retry.
 *
 * Both protocols are spoken, told apart per connection: torch 1.13's (the
 * query type first: SET 0 .. GETNUMKEYS 6, DELETE_KEY 8) and 2.x's (a
 * VALIDATE query with its magic number first, then VALIDATE 0, SET 1 ..
 * CANCEL_WAIT 12, PING 13).  Not served (the connection is closed, logged):
 * 1.13's WATCH_KEY and 2.x's queues.
 *
 * Rounds: tcpstore_round opens a fresh listener (the port node 0 announces
 * in its join) with a fresh, empty key space, and closes the previous
 * round's listener and connections: a round never reads the keys of the one
 * before (torch >= 2.5's agent makes a new store per rendezvous the same
 * way; 1.13's env:// also prefixes keys with /worker/attempt_N, which here
 * differs between nodes that spent different restarts, so that prefix is
 * dropped: one round is one key space).
 *
 * Threads: the store runs a thread of its own (one epoll loop); the
 * supervisor calls tcpstore_round and tcpstore_free only.  Limits: keys of
 * at most 1 MiB, values of 64 MiB, 256 MiB and 1 << 20 keys in all, 4096
 * connections; a client beyond them is disconnected.
 */
#ifndef TCPSTORE_H
#define TCPSTORE_H

#include "err.h"

struct tcpstore;

/* Start the store's thread, with no listener yet.  NULL with err set. */
struct tcpstore *tcpstore_new(struct rv_err *err);

/* A new round: listen on port (0: one the kernel picks) on every address
 * (IPv6 dual-stack where there is IPv6), at once, before returning; the
 * store thread then drops the previous round (its listener, its
 * connections, its keys) and serves this one.  Returns the port, or a
 * negative errno with err set (the previous round is dropped either way). */
int tcpstore_round(struct tcpstore *s, int port, struct rv_err *err);

/* From another node (any thread): wait up to timeout_ms until a store
 * listens at host:port and answers (a torch 1.13 GETNUMKEYS, which no other
 * listener on that port, such as the network check's, answers).  0, or
 * -ETIMEDOUT. */
int tcpstore_ready(const char *host, int port, int timeout_ms);

/* Stop the thread, close everything.  Accepts NULL; returns NULL. */
struct tcpstore *tcpstore_free(struct tcpstore *s);

#endif
