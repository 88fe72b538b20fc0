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
#include <stdint.h>

#include "buf.h"
#include "err.h"

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

/*
 * One check run as the master serves it: its members (fixed when it
 * starts: the world being checked), the reports of each round, a deadline
 * per round and the verdicts.  A member that has not reported round r by
 * its deadline (timeout_ms after the round opened) counts as failed in r and
 * as silent, so a dead or cut-off node never holds the check (or the
 * rendezvous behind it) up: a silent node fails both rounds and is faulty.
 * Round 1 opens once every member reported round 0 or its deadline passed;
 * the verdicts come once round 1 is complete the same way.  Pure (every
 * time is an argument) and deterministic, so the master journals each call;
 * not thread-safe (the state lock).
 */
enum { NETCHECK_MAX_NODES = 1024, NETCHECK_NAME_MAX = 64 };
enum netcheck_state { NETCHECK_NONE, NETCHECK_RUNNING, NETCHECK_DONE };

struct netcheck_member {
	char node[NETCHECK_NAME_MAX];
	char addr[NETCHECK_NAME_MAX];
	struct netcheck_node res;
	bool reported[2];
	bool silent; /* missed a round's deadline */
	int verdict; /* NETCHECK_OK/FAULTY/STRAGGLER once done */
};

struct netcheck_run {
	int64_t id;    /* 0: no check yet; each start adds 1 */
	int64_t world; /* the rendezvous round it checks */
	enum netcheck_state state;
	int round;           /* the open round (0 or 1) while running */
	int64_t deadline_ms; /* of the open round */
	int64_t timeout_ms;
	double straggler_ratio;
	int n;
	struct netcheck_member *m; /* n entries */
	struct netcheck_group *groups[2];
	int ngroups[2];
};

/* Start check id+1 over n members (names and addresses copied), round 0
 * open until now_ms + timeout_ms.  The previous run is forgotten.  0;
 * -EINVAL n < 2 or > NETCHECK_MAX_NODES, timeout <= 0 or ratio <= 1;
 * -ENOMEM (nothing changed). */
int netcheck_run_start(struct netcheck_run *r, int64_t world, const char (*nodes)[64],
		       const char (*addrs)[64], int n, int64_t now_ms, int64_t timeout_ms,
		       double straggler_ratio);
/* Index of node among the members, or -ENOENT. */
int netcheck_run_member(const struct netcheck_run *r, const char *node);
/* The group of node in round: *out gets its members' indexes (the node's
 * own among them).  1 ready; 0 not yet (round 1 before round 0 is over);
 * -ENOENT not a member or no check; -EINVAL bad round. */
int netcheck_run_group(const struct netcheck_run *r, const char *node, int round,
		       struct netcheck_group *out);
/* node's result of round.  1 recorded (and maybe the round closed); 0 the
 * same report again, or a report of a round already closed (ignored: it came
 * after the deadline); -ENOENT not a member or no check running; -EINVAL bad
 * round or time; -EEXIST a different result for a round already reported;
 * -EAGAIN round 1 before it opened; -ENOMEM. */
int netcheck_run_report(struct netcheck_run *r, const char *node, int round, bool ok, double time_s,
			int64_t now_ms);
/* Close the open round when its deadline is due: the silent count as
 * failed.  1 something changed, 0 not; -ENOMEM. */
int netcheck_run_tick(struct netcheck_run *r, int64_t now_ms);
/* A restarted master serves again: the open round's deadline is at least
 * now_ms + timeout_ms, so its downtime is not taken for the members'
 * silence.  1 the deadline moved, 0 not. */
int netcheck_run_grace(struct netcheck_run *r, int64_t now_ms);
/* The open round's deadline, INT64_MAX when none. */
int64_t netcheck_run_deadline(const struct netcheck_run *r);
/* Free what the run holds; it is then as zeroed. */
void netcheck_run_release(struct netcheck_run *r);
/* The run as JSON and back (a master's snapshot).  0; -EINVAL (*err);
 * -ENOMEM.  A failed load leaves *r as it was. */
int netcheck_run_save(const struct netcheck_run *r, struct rv_buf *out);
int netcheck_run_load(struct netcheck_run *r, const char *doc, size_t len, struct rv_err *err);

#endif
