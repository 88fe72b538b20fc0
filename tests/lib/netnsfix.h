/*
 * netnsfix.h: run the short commands that build network namespaces and
 * links in integration tests (ip netns, ip link).
 *
 * rv_test_cmd() runs argv to completion (10 s at most) and says whether it
 * exited 0; unless quiet, a failure prints the command and its output on
 * stderr.  RV_TEST_CMD("ip", "link", ...) and RV_TEST_CMD_QUIET take the
 * words directly.  rv_test_netns_skip() says why such a test cannot run
 * here (not root, no iproute2) or returns NULL.
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

#endif
