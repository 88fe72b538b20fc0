/*
 * netprobe.h: rover-run's side of the master's network check
 * (--network-check; master/README.md, the /v1/netcheck calls).
 *
 * Every node of a complete world joins the check, then in each of its two
 * rounds runs a short job with the peers of its group (the master pairs
 * them): with collective set, rover_netcheck.py (forked from the warm
 * interpreter when there is one, else python) forms a process group of the
 * group (gloo, NCCL when every member has a GPU), times a matmul and an
 * all-gather of mb MiB; without it (a job that is not Python) the node
 * sends mb MiB over TCP to each peer while serving its peers' transfers on
 * its rendezvous port.  It reports whether the round completed and its
 * time (compute plus collective, or its own sends).  The master's verdicts
 * (faulty: failed both rounds with two partners; straggler: much slower
 * than the median) come back once both rounds closed.  One thread (plus
 * the listener's, inside the call, for TCP).
 */
#ifndef AGENT_NETPROBE_H
#define AGENT_NETPROBE_H

#include <stdint.h>

#include "err.h"
#include "master_client.h"
#include "warm.h"

struct netprobe_opts {
	const char *node; /* this node's name in the world */
	int port;         /* this node's rendezvous port: peers connect here */
	int64_t world;    /* the round of the world being checked */
	int mb;           /* MiB sent to each peer per round (1..1024) */
	int timeout_ms;   /* bound on the whole check */
	int round_timeout_ms; /* bound on one round's transfers or collective */
	/* the collective check: rover_netcheck.py under python (borrowed), forked
	 * from warm when it is ready (borrowed, NULL: cold); gloo binds to addr
	 * (this node's address, as peers reach it); gpu: NCCL when every member
	 * of the group has one */
	bool collective;
	const char *python;
	struct warm *warm;
	const char *addr;
	bool gpu;
};

/* The check's rounds (DLRover's two), and the collectives left stopped:
 * one per round. */
enum { NETPROBE_ROUNDS = 2, NETPROBE_STOPPED_MAX = NETPROBE_ROUNDS };

struct netprobe_result {
	int64_t check;                    /* the master's check id */
	enum rv_netcheck_verdict verdict; /* this node's */
	bool ok[2];                       /* this node's rounds as reported */
	double time_s[2];
	double compute_s[2], comm_s[2]; /* the collective's parts of time_s */
	char backend[8];                /* "gloo", "nccl", "tcp" */
	double median_s;                /* of the nodes' best times */
	int nfaulty, nstragglers;       /* over the world */
	/* their names, comma-separated, each with its best time ("n3:1.234") */
	char faulty[256], stragglers[256];
	/* the collectives of rounds the master closed without this node:
	 * stopped, not yet ended (see netprobe_result_release) */
	struct rv_proc stopped[NETPROBE_STOPPED_MAX];
	int nstopped;
	/* the check's own bookkeeping: the verdicts came with the close of a
	 * round (no call more to ask for them), and when it last beat */
	bool decided;
	int64_t beat_ms;
};

/* Where rover_netcheck.py is: $ROVER_NETCHECK_SCRIPT when set, else
 * <folder of this executable>/../lib/rover/rover_netcheck.py.  0, -ENOENT,
 * -ENAMETOOLONG. */
int netprobe_script_path(char *buf, size_t size);

/* Run the check of world o->world with the master behind mc.  0 with *out
 * filled; 1 when the master's check is of a newer world (this node must
 * rendezvous again); -EEXIST when the master runs no check for this world
 * (fewer than two nodes); -ETIMEDOUT; another negative errno with err. */
int netprobe_run(struct rv_master_client *mc, const struct netprobe_opts *o,
		 struct netprobe_result *out, struct rv_err *err);
/* End (kill and reap) the collectives netprobe_run left stopped: after the
 * node acted on its verdict, whatever netprobe_run returned.  A collective
 * whose process holds torch takes long to die on a node short of CPU, so
 * the verdict does not wait for it; the store's port it may hold is free
 * once this returns. */
void netprobe_result_release(struct netprobe_result *out);

#endif
