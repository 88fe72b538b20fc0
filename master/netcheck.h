/*
 * netcheck.h: pairing and verdicts of the network check, pure functions (no
 * I/O, no clock) that the master's API calls; agents run the checks.  Each
 * group of nodes runs one collective (NCCL or TCP allgather) and reports
 * whether it succeeded and how long it took.  Two rounds: round 0 pairs
 * neighbours; round 1 pairs the fastest of round 0 with the slowest, so a
 * node that failed round 0 is tried again beside a healthy one.  A node that
 * fails both rounds (with two different partners) is faulty; one whose time
 * is above ratio x the median is a straggler (with two nodes a fault cannot
 * be placed: both fail both rounds).  Thread-safe; borrows all.
 */
#ifndef NETCHECK_H
#define NETCHECK_H

#include <stdbool.h>

enum { NETCHECK_GROUP_MAX = 3 }; /* pairs, and one triple when n is odd */
enum { NETCHECK_OK = 0, NETCHECK_FAULTY = 1, NETCHECK_STRAGGLER = 2 };

/* One node's results: ok[r] and time_s[r] of round r (time_s ignored when
 * !ok[r]). */
struct netcheck_node {
	bool ok[2];
	double time_s[2];
};

struct netcheck_group {
	int n;                         /* 2 or 3 */
	int nodes[NETCHECK_GROUP_MAX]; /* indexes into the node array */
};

/* The groups of round (0 or 1) for nodes 0..n-1 (n >= 2).  Round 0: (0,1),
 * (2,3), ...; round 1: nodes ordered by their round-0 time (failed ones
 * last, ties by index), the k-th fastest with the k-th slowest; when n is
 * odd the node left over joins the last group.  nodes may be NULL for round
 * 0.  Returns the number of groups written to g (n / 2), -EINVAL on a bad
 * round or n < 2, -ENOSPC when max_groups is short. */
int netcheck_groups(int round, const struct netcheck_node *nodes, int n, struct netcheck_group *g,
		    int max_groups);

/* Verdict of each node into verdict[0..n-1]: NETCHECK_FAULTY when it failed
 * both rounds; NETCHECK_STRAGGLER when its best time over the rounds it
 * passed is above straggler_ratio x the median best time (at least 3 nodes
 * timed, so there is a majority to compare with); else NETCHECK_OK.  Returns
 * the number of nodes not OK, -EINVAL on n < 1 or a ratio <= 1. */
int netcheck_verdict(const struct netcheck_node *nodes, int n, double straggler_ratio,
		     int *verdict);

#endif
