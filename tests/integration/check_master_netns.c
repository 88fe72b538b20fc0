/*
 * check_master_netns.c: failure detection across a real network cut.  The
 * master listens on the root-namespace end of a veth pair; one simulated
 * agent (this binary run with --agent: join, then a heartbeat every 200 ms,
 * rejoining when told to) runs in its own network namespace behind the
 * other end, a second agent in the root namespace.  Once their world has
 * formed, the veth link goes down: the master must declare the cut-off
 * node dead within rdzv.heartbeat_timeout_ms (1000 ms here) plus a small
 * slack, not before, and the remaining node's world must re-form.
 *
 * Needs root and iproute2 (ip netns); without them it says why and passes.
 * Every name is unique per run (the test's pid); the namespace and the link
 * are removed by the parent process after the test, whatever its outcome.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "masterfix.h"
#include "netnsfix.h"
#include "parse.h"
#include "testutil.h"

#define HEARTBEAT_MS 200
#define TIMEOUT_MS   1000
#define SLACK_MS     500

static char ns[32], veth_host[16], veth_ns[16], addr_host[32], addr_ns[32];
static char skip_reason[256];
static char self_exe[512];

#define RUN       RV_TEST_CMD
#define RUN_QUIET RV_TEST_CMD_QUIET

/* Parent, before the tests fork: the namespace and the veth pair. */
static void netns_setup(void)
{
	int pid = (int)getpid();
	snprintf(ns, sizeof(ns), "rover-test-%d", pid);
	snprintf(veth_host, sizeof(veth_host), "rvh%d", pid % 1000000);
	snprintf(veth_ns, sizeof(veth_ns), "rvn%d", pid % 1000000);
	snprintf(addr_host, sizeof(addr_host), "10.%d.%d.1", 200 + pid % 50, (pid / 50) % 250);
	snprintf(addr_ns, sizeof(addr_ns), "10.%d.%d.2", 200 + pid % 50, (pid / 50) % 250);
	const char *why = rv_test_netns_skip();
	if (why) {
		snprintf(skip_reason, sizeof(skip_reason), "%s", why);
		return;
	}
	if (RUN("ip", "netns", "add", ns) < 0) {
		snprintf(skip_reason, sizeof(skip_reason), "ip netns add failed (no permission?)");
		ns[0] = '\0';
		return;
	}
	char cidr_host[40], cidr_ns[40];
	snprintf(cidr_host, sizeof(cidr_host), "%s/30", addr_host);
	snprintf(cidr_ns, sizeof(cidr_ns), "%s/30", addr_ns);
	if (RUN("ip", "link", "add", veth_host, "type", "veth", "peer", "name", veth_ns) < 0 ||
	    RUN("ip", "link", "set", veth_ns, "netns", ns) < 0 ||
	    RUN("ip", "addr", "add", cidr_host, "dev", veth_host) < 0 ||
	    RUN("ip", "link", "set", veth_host, "up") < 0 ||
	    RUN("ip", "netns", "exec", ns, "ip", "addr", "add", cidr_ns, "dev", veth_ns) < 0 ||
	    RUN("ip", "netns", "exec", ns, "ip", "link", "set", veth_ns, "up") < 0 ||
	    RUN("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up") < 0)
		snprintf(skip_reason, sizeof(skip_reason), "could not set up the veth pair");
}

/* Parent, after the tests, whatever they did. */
static void netns_teardown(void)
{
	if (veth_host[0])
		RUN_QUIET("ip", "link", "del", veth_host);
	if (ns[0])
		RUN_QUIET("ip", "netns", "del", ns);
}

/* ---- the simulated agent (this binary with --agent URL NODE ADDR) ---- */

static int agent(const char *url, const char *node, const char *addr)
{
	struct rv_err err = { 0 };
	struct rv_master_opts o = {
		.url = url, .connect_timeout_ms = 300, .timeout_ms = 500, .max_attempts = 1
	};
	struct rv_master_client *c = rv_master_client_new(&o, &err);
	if (!c)
		return 2;
	struct rv_rdzv_join j = { .local_world_size = 1 };
	snprintf(j.node, sizeof(j.node), "%s", node);
	snprintf(j.addr, sizeof(j.addr), "%s", addr);
	bool joined = false;
	for (;;) {
		if (!joined) {
			struct rv_rdzv_world_reply w;
			joined = rv_master_rendezvous(c, &j, 5000, &w, &err) == 0;
			rv_rdzv_world_reply_release(&w);
			if (!joined) {
				usleep(HEARTBEAT_MS * 1000);
				continue;
			}
		}
		struct rv_heartbeat_reply hb;
		if (rv_master_heartbeat(c, node, &hb, &err) == 0 && hb.rejoin)
			joined = false;
		usleep(HEARTBEAT_MS * 1000);
	}
}

/* ---- the test ---- */

static int start_agent(struct rv_proc *p, const char *url, const char *node, const char *addr,
		       bool in_ns)
{
	const char *argv_ns[] = { "ip",      "netns", "exec", ns,   self_exe,
				  "--agent", url,     node,   addr, NULL };
	const char *argv_root[] = { self_exe, "--agent", url, node, addr, NULL };
	struct rv_proc_opts o = { .argv = in_ns ? argv_ns : argv_root, .pdeathsig = SIGKILL };
	return rv_proc_spawn(p, &o);
}

START_TEST(test_cut_agent_declared_dead)
{
	if (skip_reason[0]) {
		RV_TEST_SKIP(true, "%s", skip_reason);
		return;
	}
	char *spec = rv_test_master_spec(1000, 10, 1, 1, 2);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	char listen[48], hb[16];
	snprintf(listen, sizeof(listen), "%s:%d", addr_host, m.port);
	snprintf(m.url, sizeof(m.url), "http://%s", listen);
	snprintf(hb, sizeof(hb), "%d", TIMEOUT_MS);
	const char *args[] = { "--listen",
			       listen,
			       "--rdzv-heartbeat-timeout-ms",
			       hb,
			       "--rdzv-last-call-ms",
			       "200",
			       "--timer-tick-ms",
			       "20",
			       NULL };
	ck_assert_int_eq(rv_test_master_start(&m, args), 0);
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_err err = { 0 };

	char agent_addr[48];
	snprintf(agent_addr, sizeof(agent_addr), "%s:29500", addr_ns);
	struct rv_proc a_ns, a_root;
	ck_assert_int_eq(start_agent(&a_ns, m.url, "node-cut", agent_addr, true), 0);
	ck_assert_int_eq(start_agent(&a_root, m.url, "node-root", "127.0.0.1:29500", false), 0);

	/* the world of both forms (the namespaced agent reaches the master) */
	struct rv_job_status js;
	int64_t until = rv_mono_ms() + 15000;
	for (;;) {
		ck_assert_msg(rv_master_job(c, &js, &err) == 0, "%s", err.msg);
		if (js.state == RV_RDZV_COMPLETE && js.nnodes == 2)
			break;
		ck_assert_msg(rv_mono_ms() < until, "no world of 2 nodes (state %d, nodes %d)",
			      js.state, js.nnodes);
		usleep(20000);
	}
	int64_t round = js.round;
	ck_assert_int_eq(rv_test_master_world_of(c, "node-cut", round), RV_RDZV_COMPLETE);
	usleep(3 * TIMEOUT_MS * 1000); /* heartbeats keep it alive meanwhile */
	ck_assert_int_eq(rv_test_master_world_of(c, "node-cut", round), RV_RDZV_COMPLETE);

	/* cut */
	int64_t cut = rv_mono_ms();
	ck_assert_int_eq(RUN("ip", "link", "set", veth_host, "down"), 0);
	int64_t dead_ms =
		rv_test_master_wait_dead(c, "node-cut", round, cut, TIMEOUT_MS + SLACK_MS + 2000);
	printf("check_master_netns: cut-off node declared dead after %ld ms "
	       "(heartbeat_timeout_ms=%d)\n",
	       (long)dead_ms, TIMEOUT_MS);
	ck_assert_msg(dead_ms >= 0, "the cut-off node was never declared dead");
	ck_assert_int_le(dead_ms, TIMEOUT_MS + SLACK_MS);
	/* silence, not anything sooner: its last heartbeat was at most one period before */
	ck_assert_int_ge(dead_ms, TIMEOUT_MS / 2 - HEARTBEAT_MS);
	ck_assert_msg(rv_master_job(c, &js, &err) == 0, "%s", err.msg);
	ck_assert_int_gt(js.round, round); /* /v1/job: the old world is gone */

	/* the remaining node's world re-forms without it */
	until = rv_mono_ms() + 10000;
	for (;;) {
		ck_assert_msg(rv_master_job(c, &js, &err) == 0, "%s", err.msg);
		if (js.state == RV_RDZV_COMPLETE && js.round > round)
			break;
		ck_assert_msg(rv_mono_ms() < until, "no new world (state %d)", js.state);
		usleep(20000);
	}
	ck_assert_int_eq(js.nnodes, 1);
	ck_assert_int_eq(rv_test_master_world_of(c, "node-root", js.round), RV_RDZV_COMPLETE);

	rv_proc_kill(&a_ns, SIGKILL);
	rv_proc_kill(&a_root, SIGKILL);
	rv_proc_wait(&a_ns, 5000, NULL);
	rv_proc_wait(&a_root, 5000, NULL);
	rv_proc_release(&a_ns);
	rv_proc_release(&a_root);
	rv_master_client_free(c);
	rv_test_master_cleanup(&m);
}
END_TEST

static Suite *master_netns_suite(void)
{
	TCase *tc = RV_TEST_TCASE("core", 60, test_cut_agent_declared_dead);
	tcase_add_unchecked_fixture(tc, netns_setup, netns_teardown);
	return RV_TEST_SUITE("master_netns", tc);
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "--agent") == 0)
		return agent(argv[2], argv[3], argv[4]);
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	if (n <= 0)
		return EXIT_FAILURE;
	self_exe[n] = '\0';
	return rv_test_run_suite(master_netns_suite());
}
