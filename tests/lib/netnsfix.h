/*
 * netnsfix.h: network namespaces and links for integration tests (ip
 * netns, ip link, tc).
 *
 * rv_test_cmd() runs argv to completion (10 s at most) and says whether it
 * exited 0; unless quiet, a failure prints the command and its output on
 * stderr.  RV_TEST_CMD("ip", "link", ...) and RV_TEST_CMD_QUIET take the
 * words directly.  rv_test_netns_skip() says why such a test cannot run
 * here (not root, no iproute2) or returns NULL.
 *
 * struct rv_test_netns is a set of "hosts": a bridge in the root namespace
 * with the address .1 of a /24 (a rover-master listens there), and n
 * network namespaces, each behind a veth pair enslaved to the bridge, with
 * .2, .3, ... on its end and lo up.  Names and the subnet come from the
 * caller's pid: make it in the parent of check's forks (an unchecked
 * fixture) and remove it there, whatever the tests did.
 */
#ifndef RV_NETNSFIX_H
#define RV_NETNSFIX_H

#include <stdbool.h>

/* 0 when argv (NULL-terminated) exited 0, else a negative errno. */
int rv_test_cmd(const char *const *argv, bool quiet);

#define RV_TEST_CMD(...)       rv_test_cmd((const char *const[]){ __VA_ARGS__, NULL }, false)
#define RV_TEST_CMD_QUIET(...) rv_test_cmd((const char *const[]){ __VA_ARGS__, NULL }, true)

/* Why namespaces cannot be made here ("not root", ...), or NULL. */
const char *rv_test_netns_skip(void);

#define RV_TEST_NETNS_MAX 4

struct rv_test_netns {
	int n;
	char bridge[16];
	char addr_root[32]; /* the bridge's address: reachable from every namespace */
	char ns[RV_TEST_NETNS_MAX][40];
	char veth_host[RV_TEST_NETNS_MAX][16]; /* on the bridge */
	char veth_ns[RV_TEST_NETNS_MAX][16];   /* inside ns[i] */
	char addr[RV_TEST_NETNS_MAX][32];      /* veth_ns[i]'s */
	char mac[RV_TEST_NETNS_MAX][20];       /* veth_ns[i]'s, fixed: peers' caches hold */
	/* "ip netns exec NS", NULL-terminated: struct rv_test_run's wrap */
	const char *wrap[RV_TEST_NETNS_MAX][5];
	char skip[256]; /* why the hosts could not be made, or "" */
};

/* Make the bridge and n (at most RV_TEST_NETNS_MAX) namespaces, named
 * after prefix (a few letters) and our pid.  0, or a negative errno with
 * net->skip saying why; what was made is left for rv_test_netns_down. */
int rv_test_netns_up(struct rv_test_netns *net, const char *prefix, int n);
/* Remove whatever rv_test_netns_up made (also after it failed). */
void rv_test_netns_down(struct rv_test_netns *net);
/* Delay every packet that crosses namespace i's link by ms, each way:
 * tc netem on both ends of the veth pair, else (a kernel without
 * sch_netem) a thread of this process relaying the frames between two TAP
 * devices that take the pair's place, names and addresses; they go with
 * this process, leaving namespace i without a link.  0 takes netem's delay
 * off or stops the relay.  0 or a negative errno. */
int rv_test_netns_delay(struct rv_test_netns *net, int i, int ms);
/* Namespace i's link (its bridge end) up or down: down cuts it off.  0 or
 * a negative errno. */
int rv_test_netns_link(const struct rv_test_netns *net, int i, bool up);
/* A qdisc on namespace i's link: on its bridge end (what i receives), or
 * inside (its own end: what i sends).  `tc qdisc replace dev VETH root`
 * followed by words (NULL-terminated); words NULL removes it.  Quiet: 0 or
 * a negative errno. */
int rv_test_netns_qdisc(const struct rv_test_netns *net, int i, bool inside,
			const char *const *words);

#endif
