/*
 * netcheck.h: pairing and verdicts of the network check, pure functions (no
 * I/O, no clock) that the master's API calls; agents run the checks.  Each
 * group of nodes runs one collective (NCCL or TCP allgather) and reports
 * whether it succeeded and how long it took.  Two rounds: round 0 pairs
 * neighbours; round 1 pairs the fastest of round 0 with the slowest, so a
 * node that failed or lagged in round 0 is tried again beside a healthy
 * one.  With an odd count one node is alone in each round (its time is its
 * compute only, so it clears nobody and counts against nobody), never the
 * same one twice.  A node with no successful round beside a partner is
 * faulty; one whose time is above ratio x the median, or that was late in
 * both rounds, is a straggler; a node flagged only beside
 * a worse one (in more bad rounds) is cleared, which is how three nodes
 * place a fault (with two nodes a fault cannot be placed: both fail both
 * rounds).  Thread-safe; borrows all.
 */
#ifndef NETCHECK_H
#define NETCHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"

enum { NETCHECK_GROUP_MAX = 2 }; /* pairs, and one node alone when n is odd */
enum { NETCHECK_OK = 0, NETCHECK_FAULTY = 1, NETCHECK_STRAGGLER = 2 };

/* One node's results: ok[r] and time_s[r] of round r (time_s ignored when
 * !ok[r]); late[r]: it had not reported when the round closed early (the
 * others were done and the straggler wait was over): ok, and time_s[r] is
 * how long the round had been open (its time is more); compute_s[r]: the
 * part of time_s[r] that was the node's own work (0: not measured, as in
 * the TCP check). */
struct netcheck_node {
	bool ok[2];
	double time_s[2];
	bool late[2];
	double compute_s[2];
};

struct netcheck_group {
	int n;                         /* 1 or 2 */
	int nodes[NETCHECK_GROUP_MAX]; /* indexes into the node array */
};

/* The groups of round (0 or 1) for nodes 0..n-1 (n >= 2).  Round 0: (0,1),
 * (2,3), ..., node n-1 alone when n is odd; round 1: nodes ordered by
 * round 0 (on time by their time, then the one alone, then the late, then
 * the failed; ties by index), the k-th fastest with the k-th slowest; when
 * n is odd the fastest node that was not alone in round 0 is alone (its
 * round 0 was the cleanest).  nodes may be NULL for round 0.  Returns the
 * number of groups written to g ((n + 1) / 2), -EINVAL on a bad round or
 * n < 2, -ENOSPC when max_groups is short. */
int netcheck_groups(int round, const struct netcheck_node *nodes, int n, struct netcheck_group *g,
		    int max_groups);

/* Verdict of each node into verdict[0..n-1].  groups[r] (ngroups[r] of
 * them) are round r's groups; groups may be NULL (no node alone, nothing
 * cleared).  NETCHECK_FAULTY: no round passed beside a partner (a round
 * alone does not count), at least one failed; NETCHECK_STRAGGLER (at least
 * 3 nodes): its best time over the rounds it was timed in (not alone, not
 * late) is above straggler_ratio x the median best time (at least 3 nodes
 * timed), or it was late in both rounds (alone or not: a node late once,
 * beside a slow partner or behind a slow start, is not).  Then a flagged node whose
 * every bad round (failed, late, or above the ratio) had a partner flagged
 * with more bad rounds is cleared: the partner explains it.  Returns the
 * number of nodes not OK, -EINVAL on n < 1 or a ratio <= 1. */
int netcheck_verdict(const struct netcheck_node *nodes, int n,
		     const struct netcheck_group *const groups[2], const int ngroups[2],
		     double straggler_ratio, int *verdict);

/*
 * One check run as the master serves it: its members (fixed when it
 * starts: the world being checked), the reports of each round, a deadline
 * per round and the verdicts.  A member that has not reported round r by
 * its deadline (timeout_ms after the round opened) counts as failed in r and
 * as silent, so a dead or cut-off node never holds the check (or the
 * rendezvous behind it) up: a silent node fails both rounds and is faulty.
 * Round 1 opens once every member reported round 0 or its deadline passed;
 * the verdicts come once round 1 is complete the same way.  A straggler
 * does not hold a round up either: once every member joined and at least
 * (n - 1) / 2 reported the round, the others get wait x the median time
 * reported
 * (at least wait_min_ms) more; who has not reported then is late (when no
 * one of its group reported a failure: else failed), which is how a slow
 * node is judged without waiting for its own work to end.  Pure (every
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
	bool joined; /* joined the check (or reported): alive */
	bool silent; /* missed a round's deadline, counted failed */
	int verdict; /* NETCHECK_OK/FAULTY/STRAGGLER once done */
};

struct netcheck_run {
	int64_t id;    /* 0: no check yet; each start adds 1 */
	int64_t world; /* the rendezvous round it checks */
	enum netcheck_state state;
	int round;           /* the open round (0 or 1) while running */
	int64_t deadline_ms; /* of the open round */
	int64_t opened_ms;   /* when the open round opened */
	int64_t half_ms;     /* when half the members had reported it, -1: not yet */
	int64_t timeout_ms;
	double straggler_ratio;
	double wait;         /* the straggler wait: x the median reported time */
	int64_t wait_min_ms; /* and at least this */
	int n;
	struct netcheck_member *m; /* n entries */
	struct netcheck_group *groups[2];
	int ngroups[2];
};

/* How a run judges: a silent member's round timeout, the straggler ratio,
 * the straggler wait (x the median, at least wait_min_ms). */
struct netcheck_limits {
	int64_t timeout_ms;
	double straggler_ratio;
	double wait;
	int64_t wait_min_ms;
};

/* Start check id+1 over n members (names and addresses copied), round 0
 * open until now_ms + lim->timeout_ms.  The previous run is forgotten.  0;
 * -EINVAL n < 2 or > NETCHECK_MAX_NODES, timeout <= 0, ratio <= 1, wait <= 0
 * or wait_min_ms < 0; -ENOMEM (nothing changed). */
int netcheck_run_start(struct netcheck_run *r, int64_t world, const char (*nodes)[64],
		       const char (*addrs)[64], int n, int64_t now_ms,
		       const struct netcheck_limits *lim);
/* node joined the check (its interpreter is ready): 1 newly, 0 already or
 * no check running, -ENOENT not a member. */
int netcheck_run_join(struct netcheck_run *r, const char *node, int64_t now_ms);
/* Index of node among the members, or -ENOENT. */
int netcheck_run_member(const struct netcheck_run *r, const char *node);
/* The group of node in round: *out gets its members' indexes (the node's
 * own among them).  1 ready; 0 not yet (round 1 before round 0 is over);
 * -ENOENT not a member or no check; -EINVAL bad round. */
int netcheck_run_group(const struct netcheck_run *r, const char *node, int round,
		       struct netcheck_group *out);
/* node's result of round (compute_s: the part of time_s that was its own
 * work, 0 when not measured).  1 recorded (and maybe the round closed); 0 the
 * same report again, or a report of a round already closed (ignored: it came
 * after the deadline); -ENOENT not a member or no check running; -EINVAL bad
 * round or time; -EEXIST a different result for a round already reported;
 * -EAGAIN round 1 before it opened; -ENOMEM. */
int netcheck_run_report(struct netcheck_run *r, const char *node, int round, bool ok, double time_s,
			double compute_s, int64_t now_ms);
/* Close the open round when its deadline (the timeout, or the straggler
 * wait) is due: the silent count as failed, the late as late.  1 something changed, 0 not; -ENOMEM. */
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
