/*
 * netnsfix.h: run the short commands that build network namespaces and
 * links in integration tests (ip netns, ip link).
 *
 * rv_test_cmd() runs argv to completion (10 s at most) and says whether it
 * exited 0; unless quiet, a failure prints the command and its output on
 * stderr.  RV_TEST_CMD("ip", "link", ...) and RV_TEST_CMD_QUIET take the
 * words directly.  rv_test_netns_skip() says why such a test cannot run
 * here (not root, no iproute2) or returns NULL.
 *
 * struct rv_test_net is a small network of "hosts": a bridge in the root
 * network namespace holding address .1 (a daemon of the test listens
 * there), and n namespaces behind veth pairs enslaved to it (.2, .3, ...).
 * Build it in the test binary's parent (an unchecked fixture) and tear it
 * down there too, whatever the tests did; names are unique per test pid.
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

#define RV_TEST_NET_MAX 4

struct rv_test_net {
	int n;
	char bridge[16];
	char addr_root[32]; /* the bridge's address */
	char ns[RV_TEST_NET_MAX][40];
	char veth_host[RV_TEST_NET_MAX][16];  /* the bridge's end: down cuts host i off */
	char veth_ns[RV_TEST_NET_MAX][16];    /* the end inside ns[i] */
	char addr[RV_TEST_NET_MAX][32];       /* host i's address in ns[i] */
	const char *wrap[RV_TEST_NET_MAX][5]; /* "ip netns exec NS": runs a command there */
};

/* Build net with n hosts (at most RV_TEST_NET_MAX) under names holding
 * tag (a letter or two, to tell two suites of one pid apart).  0, or a
 * negative errno with why (a sentence) in why; tear down what was made
 * either way. */
int rv_test_net_setup(struct rv_test_net *net, int n, const char *tag, char *why, size_t size);
/* Remove the links, namespaces and the bridge (what exists). */
void rv_test_net_teardown(struct rv_test_net *net);
/* Host i's link (its bridge end) up or down: 0 or a negative errno. */
int rv_test_net_link(const struct rv_test_net *net, int i, bool up);
/* A qdisc on host i's link: on its bridge end (what host i receives), or
 * inside (its namespace's end: what host i sends).  `tc qdisc replace dev
 * VETH root` followed by words (NULL-terminated); words NULL removes it.
 * Quiet: 0 or a negative errno. */
int rv_test_net_qdisc(const struct rv_test_net *net, int i, bool inside, const char *const *words);

#endif
