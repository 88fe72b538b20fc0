/*
 * netprobe.h: rover-run's side of the master's network check
 * (--network-check; master/README.md, the /v1/netcheck calls).
 *
 * Every node of a complete world joins the check, then in each of its two
 * rounds sends mb MiB over TCP to each peer of its group (the master pairs
 * them) while serving its peers' transfers on its rendezvous port, and
 * reports whether every transfer both ways completed and how long its own
 * sends took.  The master's verdicts (faulty: failed both rounds with two
 * partners; straggler: much slower than the median) come back once both
 * rounds closed.  One thread (plus the listener's, inside the call).
 */
#ifndef AGENT_NETPROBE_H
#define AGENT_NETPROBE_H

#include <stdint.h>

#include "err.h"
#include "master_client.h"

struct netprobe_opts {
	const char *node; /* this node's name in the world */
	int port;         /* this node's rendezvous port: peers connect here */
	int64_t world;    /* the round of the world being checked */
	int mb;           /* MiB sent to each peer per round (1..1024) */
	int timeout_ms;   /* bound on the whole check */
};

struct netprobe_result {
	int64_t check;                    /* the master's check id */
	enum rv_netcheck_verdict verdict; /* this node's */
	bool ok[2];                       /* this node's rounds as reported */
	double time_s[2];
	int nfaulty, nstragglers;          /* over the world */
	char faulty[160], stragglers[160]; /* their names, comma-separated */
};

/* Run the check of world o->world with the master behind mc.  0 with *out
 * filled; 1 when the master's check is of a newer world (this node must
 * rendezvous again); -EEXIST when the master runs no check for this world
 * (fewer than two nodes); -ETIMEDOUT; another negative errno with err. */
int netprobe_run(struct rv_master_client *mc, const struct netprobe_opts *o,
		 struct netprobe_result *out, struct rv_err *err);

#endif
