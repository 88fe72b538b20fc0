/*
 * check_run_netcheck.c: rover-run --network-check as the collective check
 * (agent/rover_netcheck.py: gloo all-gather and a matmul in pairs, two
 * rounds) with real PyTorch, four nodes against a rover-master, each with
 * --exclude-straggler:
 *
 *   - a slow node: one rover-run (its warm interpreter and the check's
 *     processes with it) in a cgroup v1 CPU quota of 2 %, set once its
 *     warm interpreter is ready;
 *   - a slow link: four nodes in their own network namespaces behind veths
 *     on a bridge, one node's veth pair delayed and rate-limited by tc
 *     netem both ways (tbf's rate alone where the kernel has no netem).
 *
 * And a cut link: one node's namespace routes its peers into a blackhole
 * (the master it still reaches); it is found faulty, not a straggler.
 *
 * Each in three placements (which node is slowed): the slowed node, and
 * only it, is found, leaves the job (exit 1, its times in the message),
 * and the three others train in a world of three, naming it with its time.
 * And three nodes, one slowed by the quota (in round 0's pair, and the one
 * alone in round 0): the same, the two others training in a world of two.
 * Needs root, a writable cgroup v1 cpu hierarchy, iproute2 and tc; without
 * them a test says why and passes.  The parent makes and removes the
 * namespaces, the links and the bridge.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "masterfix.h"
#include "netnsfix.h"
#include "runfix.h"
#include "testutil.h"

#define NODES 4
#define RUN   RV_TEST_CMD
#define QUIET RV_TEST_CMD_QUIET

/* Sleeps first: a node whose workers ended before the others started
 * theirs would leave the world and open a new round. */
static const char worker_script[] = "import os, time\n"
				    "time.sleep(3)\n"
				    "print('W=%s' % os.environ['WORLD_SIZE'], flush=True)\n";

/* Node placements slowed: the first of the first pair, the second of the
 * first pair, the last node. */
static const int placement[3] = { 0, 1, 3 };

static char ns[NODES][40], veth_host[NODES][24], veth_ns[NODES][24], addr_ns[NODES][32];
static char bridge[16], addr_master[32];
static char netns_skip[256];

static void netns_setup(void)
{
	const char *why = rv_test_netns_skip();
	if (why || access("/usr/sbin/tc", X_OK) != 0) {
		snprintf(netns_skip, sizeof(netns_skip), "%s", why ? why : "no tc");
		return;
	}
	int pid = (int)getpid();
	int a = 150 + pid % 50, b = (pid / 50) % 250;
	char cidr[48];
	snprintf(bridge, sizeof(bridge), "rvc%d", pid % 1000000);
	snprintf(addr_master, sizeof(addr_master), "10.%d.%d.1", a, b);
	snprintf(cidr, sizeof(cidr), "%s/24", addr_master);
	if (RUN("ip", "link", "add", bridge, "type", "bridge") < 0) {
		bridge[0] = '\0';
		snprintf(netns_skip, sizeof(netns_skip), "could not add a bridge");
		return;
	}
	if (RUN("ip", "addr", "add", cidr, "dev", bridge) < 0 ||
	    RUN("ip", "link", "set", bridge, "up") < 0) {
		snprintf(netns_skip, sizeof(netns_skip), "could not set up the bridge");
		return;
	}
	for (int i = 0; i < NODES; i++) {
		snprintf(addr_ns[i], sizeof(addr_ns[i]), "10.%d.%d.%d", a, b, 2 + i);
		snprintf(cidr, sizeof(cidr), "%s/24", addr_ns[i]);
		snprintf(ns[i], sizeof(ns[i]), "rover-nc-%d-%d", pid, i);
		snprintf(veth_host[i], sizeof(veth_host[i]), "rch%d%d", i, pid % 100000);
		snprintf(veth_ns[i], sizeof(veth_ns[i]), "rcn%d%d", i, pid % 100000);
		if (RUN("ip", "netns", "add", ns[i]) < 0) {
			ns[i][0] = '\0';
			snprintf(netns_skip, sizeof(netns_skip), "ip netns add failed");
			return;
		}
		if (RUN("ip", "link", "add", veth_host[i], "type", "veth", "peer", "name",
			veth_ns[i]) < 0) {
			veth_host[i][0] = '\0';
			snprintf(netns_skip, sizeof(netns_skip), "could not add a veth pair");
			return;
		}
		if (RUN("ip", "link", "set", veth_ns[i], "netns", ns[i]) < 0 ||
		    RUN("ip", "link", "set", veth_host[i], "master", bridge) < 0 ||
		    RUN("ip", "link", "set", veth_host[i], "up") < 0 ||
		    RUN("ip", "netns", "exec", ns[i], "ip", "addr", "add", cidr, "dev",
			veth_ns[i]) < 0 ||
		    RUN("ip", "netns", "exec", ns[i], "ip", "link", "set", veth_ns[i], "up") < 0 ||
		    RUN("ip", "netns", "exec", ns[i], "ip", "link", "set", "lo", "up") < 0) {
			snprintf(netns_skip, sizeof(netns_skip), "could not set up the veths");
			return;
		}
	}
}

static void netns_teardown(void)
{
	for (int i = 0; i < NODES; i++) {
		if (veth_host[i][0])
			QUIET("ip", "link", "del", veth_host[i]);
		if (ns[i][0])
			QUIET("ip", "netns", "del", ns[i]);
	}
	if (bridge[0])
		QUIET("ip", "link", "del", bridge);
}

/* The links as netns_setup made them: no qdisc on either end of a veth and
 * no blackhole route, whatever a case that failed half-way left (a failed
 * assertion ends its case before the case's own cleanup). */
static void links_reset(void)
{
	for (int i = 0; i < NODES; i++) {
		QUIET("tc", "qdisc", "del", "dev", veth_host[i], "root");
		QUIET("ip", "netns", "exec", ns[i], "tc", "qdisc", "del", "dev", veth_ns[i],
		      "root");
		for (int k = 0; k < NODES; k++) {
			char route[160];
			snprintf(route, sizeof(route), "%s/32", addr_ns[k]);
			if (k != i)
				QUIET("ip", "netns", "exec", ns[i], "ip", "route", "del",
				      "blackhole", route);
		}
	}
}

struct job {
	int n; /* nodes */
	struct rv_test_master m;
	struct rv_test_run r[NODES];
	char ep[64], name[NODES][32], script[NODES][400];
	const char *env[NODES][2];
};

/* The master: on the bridge's address with namespaces, else loopback;
 * three to four nodes, the last call long enough for a slowed node's
 * join (and for the three's after it left). */
static void start_master(struct job *j, bool netns)
{
	char *spec = rv_test_master_spec(1000, 10, 1, j->n - 1, j->n);
	ck_assert_int_eq(rv_test_master_init(&j->m, spec), 0);
	free(spec);
	if (!netns) {
		const char *const args[] = { "--rdzv-last-call-ms", "15000", NULL };
		ck_assert_int_eq(rv_test_master_start(&j->m, args), 0);
		snprintf(j->ep, sizeof(j->ep), "%s", j->m.addr);
		return;
	}
	char listen[48];
	snprintf(listen, sizeof(listen), "%s:%d", addr_master, j->m.port);
	snprintf(j->m.url, sizeof(j->m.url), "http://%s", listen);
	snprintf(j->ep, sizeof(j->ep), "%s", listen);
	const char *const args[] = { "--listen", listen, "--rdzv-last-call-ms", "15000", NULL };
	ck_assert_int_eq(rv_test_master_start(&j->m, args), 0);
}

/* Node i (ROVER_NODE_NAME n<i>) under wrap (may be NULL). */
static void start_node(struct job *j, int i, const char *const *wrap, const char *addr)
{
	struct rv_test_run *r = &j->r[i];
	ck_assert_int_eq(rv_test_run_init(r), 0);
	ck_assert_int_eq(rv_test_run_file(r, "w.py", worker_script, j->script[i],
					  sizeof(j->script[i])),
			 0);
	snprintf(j->name[i], sizeof(j->name[i]), "ROVER_NODE_NAME=n%d", i);
	j->env[i][0] = j->name[i];
	j->env[i][1] = NULL;
	r->wrap = wrap;
	static char nn[16];
	snprintf(nn, sizeof(nn), "%d:%d", j->n - 1, j->n);
	const char *argv[24] = {
		"--nnodes",         nn,
		"--nproc-per-node", "1",
		"--rdzv-endpoint",  j->ep,
		"--network-check",  "--exclude-straggler",
		"--rdzv-conf",      "netcheck_round_timeout=60,netcheck_timeout=300"
	};
	int k = 10;
	if (addr) {
		argv[k++] = "--local-addr";
		argv[k++] = addr;
	}
	argv[k++] = j->script[i];
	argv[k] = NULL;
	ck_assert_int_eq(rv_test_run_start(r, argv, j->env[i]), 0);
}

/* The slowed node leaves as the straggler; the others train in a world of
 * n - 1 and name it with its time. */
static void expect_found(struct job *j, int slow)
{
	char *err = rv_test_run_expect_exit(&j->r[slow], 1, 240000);
	ck_assert_msg(strstr(err, "this node is a straggler: leaving the job"), "node %d: %s", slow,
		      err);
	ck_assert_msg(strstr(err, "its rounds took"), "node %d: %s", slow, err);
	free(err);
	char named[48], world[16], bigger[16];
	snprintf(named, sizeof(named), "stragglers=\"n%d:", slow);
	snprintf(world, sizeof(world), "W=%d\n", j->n - 1);
	snprintf(bigger, sizeof(bigger), "W=%d", j->n);
	for (int i = 0; i < j->n; i++) {
		if (i == slow)
			continue;
		err = rv_test_run_expect_exit(&j->r[i], 0, 120000);
		ck_assert_msg(strstr(err, named), "node %d does not name n%d: %s", i, slow, err);
		ck_assert_msg(strstr(err, "backend=gloo"), "node %d: %s", i, err);
		free(err);
		char *out = rv_test_run_output(&j->r[i], 1);
		ck_assert_msg(strstr(out, world) && !strstr(out, bigger), "node %d: %s", i, out);
		free(out);
	}
}

static void job_cleanup(struct job *j)
{
	for (int i = 0; i < j->n; i++)
		rv_test_run_cleanup(&j->r[i]);
	rv_test_master_cleanup(&j->m);
}

/* ---- a slow node: a CPU quota ---- */

static const char *cgroup_skip(void)
{
	if (geteuid() != 0)
		return "not root";
	if (access("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", W_OK) != 0)
		return "no writable cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu";
	return NULL;
}

static void write_to(const char *dir, const char *file, const char *text)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "could not open %s", path);
	ck_assert_int_ge(fputs(text, f), 0);
	ck_assert_int_eq(fclose(f), 0);
}

/* Remove the cgroup cg: what still runs in it (a killed node's processes
 * dying at the quota) moves to the root group first, so it ends at full
 * speed and leaves cg empty. */
static void cgroup_remove(const char *cg)
{
	char path[300], pid[32];
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	for (int k = 0; k < 50 && rmdir(cg) < 0 && errno == EBUSY; k++) {
		FILE *f = fopen(path, "r");
		while (f && fgets(pid, sizeof(pid), f)) {
			FILE *root = fopen("/sys/fs/cgroup/cpu/cgroup.procs", "w");
			if (root) {
				fputs(pid, root);
				fclose(root);
			}
		}
		if (f)
			fclose(f);
		usleep(100 * 1000);
	}
}

static void slow_node(int n, int slow)
{
	const char *why = cgroup_skip();
	if (why) {
		RV_TEST_SKIP(true, "no cgroup CPU quota to slow a node with: %s", why);
		return;
	}
	char cg[200], cmd[300];
	snprintf(cg, sizeof(cg), "/sys/fs/cgroup/cpu/rover-netcheck-%d", (int)getpid());
	ck_assert_msg(mkdir(cg, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", cg, strerror(errno));
	snprintf(cmd, sizeof(cmd), "echo $$ > %s/cgroup.procs && exec \"$@\"", cg);
	const char *const wrap[] = { "/bin/sh", "-c", cmd, "sh", NULL };
	struct job j = { .n = n };
	start_master(&j, false);
	/* the slow node first: its warm interpreter imports torch at full
	 * speed, then its quota drops to 2 % and the others come */
	start_node(&j, slow, wrap, NULL);
	ck_assert_msg(rv_test_run_wait_for(&j.r[slow], 2, "warm interpreter ready", 120000),
		      "node %d's warm interpreter is not ready", slow);
	write_to(cg, "cpu.cfs_period_us", "100000");
	write_to(cg, "cpu.cfs_quota_us", "2000");
	for (int i = 0; i < n; i++)
		if (i != slow)
			start_node(&j, i, NULL, NULL);
	expect_found(&j, slow);
	job_cleanup(&j);
	cgroup_remove(cg);
}

START_TEST(test_slow_node_found)
{
	slow_node(NODES, placement[_i]);
}
END_TEST

/* Three nodes: the first of round 0's pair, and the one alone in round 0. */
static const int placement3[2] = { 0, 2 };

START_TEST(test_three_nodes_slow_node_found)
{
	slow_node(3, placement3[_i]);
}
END_TEST

/* ---- a slow link: tc netem ---- */

/* dev (in namespace nsname, NULL: ours) made slow: netem's delay and rate,
 * else (a kernel without sch_netem) tbf's rate alone. */
static void slow_dev(const char *nsname, const char *dev)
{
	const char *netem[] = { "ip", "netns", "exec",  nsname,  "tc",   "qdisc", "add",    "dev",
				dev,  "root",  "netem", "delay", "20ms", "rate",  "10mbit", NULL };
	const char *tbf[] = { "ip",     "netns", "exec",   nsname,    "tc",  "qdisc",
			      "add",    "dev",   dev,      "root",    "tbf", "rate",
			      "10mbit", "burst", "32kbit", "latency", "2s",  NULL };
	int skip = nsname ? 0 : 4; /* ours: without "ip netns exec NS" */
	if (rv_test_cmd(netem + skip, true) == 0)
		return;
	ck_assert_int_eq(rv_test_cmd(tbf + skip, false), 0);
}

/* The master (on every address) and the NODES nodes, each in its
 * namespace. */
static void start_in_namespaces(struct job *j)
{
	static const char *wrap[NODES][5];
	start_master(j, true);
	for (int i = 0; i < NODES; i++) {
		wrap[i][0] = "ip";
		wrap[i][1] = "netns";
		wrap[i][2] = "exec";
		wrap[i][3] = ns[i];
		wrap[i][4] = NULL;
		start_node(j, i, wrap[i], addr_ns[i]);
	}
}

static void slow_link(int slow)
{
	if (netns_skip[0]) {
		RV_TEST_SKIP(true, "no network namespaces: %s", netns_skip);
		return;
	}
	links_reset();
	/* 10 Mbit/s both ways: the 4 MiB all-gathers take seconds over this
	 * node's link, a fraction of one over the others' */
	slow_dev(NULL, veth_host[slow]);
	slow_dev(ns[slow], veth_ns[slow]);
	struct job j = { .n = NODES };
	start_in_namespaces(&j);
	expect_found(&j, slow);
	job_cleanup(&j);
	QUIET("tc", "qdisc", "del", "dev", veth_host[slow], "root");
	QUIET("ip", "netns", "exec", ns[slow], "tc", "qdisc", "del", "dev", veth_ns[slow], "root");
}

START_TEST(test_slow_link_found)
{
	slow_link(placement[_i]);
}
END_TEST

/* ---- a cut link: blackholed routes ---- */

/* Node cut's namespace routes its peers' addresses into a blackhole (the
 * master's stays): its peers' connects get no answer and its own fail, so
 * its collective cannot form in either round.  It is faulty, not a
 * straggler (its collectives would hang until the straggler wait): it
 * leaves, and the three others train in a world of three, naming it. */
static void cut_link(int cut)
{
	if (netns_skip[0]) {
		RV_TEST_SKIP(true, "no network namespaces: %s", netns_skip);
		return;
	}
	links_reset();
	char route[NODES][160];
	for (int i = 0; i < NODES; i++) {
		snprintf(route[i], sizeof(route[i]), "%s/32", addr_ns[i]);
		if (i != cut)
			ck_assert_int_eq(RUN("ip", "netns", "exec", ns[cut], "ip", "route", "add",
					     "blackhole", route[i]),
					 0);
	}
	struct job j = { .n = NODES };
	start_in_namespaces(&j);
	char *err = rv_test_run_expect_exit(&j.r[cut], 1, 240000);
	ck_assert_msg(strstr(err, "this node is faulty: leaving the job"), "node %d: %s", cut, err);
	free(err);
	char named[64];
	snprintf(named, sizeof(named), "faulty=\"n%d:", cut);
	for (int i = 0; i < NODES; i++) {
		if (i == cut)
			continue;
		err = rv_test_run_expect_exit(&j.r[i], 0, 120000);
		ck_assert_msg(strstr(err, named), "node %d does not name n%d: %s", i, cut, err);
		ck_assert_msg(strstr(err, "stragglers=\"\""), "node %d: %s", i, err);
		free(err);
		char *out = rv_test_run_output(&j.r[i], 1);
		ck_assert_msg(strstr(out, "W=3\n") && !strstr(out, "W=4"), "node %d: %s", i, out);
		free(out);
	}
	job_cleanup(&j);
	for (int i = 0; i < NODES; i++)
		if (i != cut)
			QUIET("ip", "netns", "exec", ns[cut], "ip", "route", "del", "blackhole",
			      route[i]);
}

/* The store's host of round 0's first pair, and the second of its last. */
static const int placement_cut[2] = { 0, 3 };

START_TEST(test_cut_link_faulty)
{
	cut_link(placement_cut[_i]);
}
END_TEST

int main(void)
{
	/* ROVER_TEST_ONLY=node|link|cut|three:N runs one placement (while
	 * debugging) */
	const char *only = getenv("ROVER_TEST_ONLY");
	int from = only && strchr(only, ':') ? atoi(strchr(only, ':') + 1) : 0;
	int to = only && strchr(only, ':') ? from + 1 : 3;
	netns_setup();
	Suite *s = suite_create("run_netcheck");
	TCase *tc = tcase_create("netcheck");
	tcase_set_timeout(tc, 420);
	if (!only || !strncmp(only, "node", 4))
		tcase_add_loop_test(tc, test_slow_node_found, from, to);
	if (!only || !strncmp(only, "link", 4))
		tcase_add_loop_test(tc, test_slow_link_found, from, to);
	if (!only || !strncmp(only, "cut", 3))
		tcase_add_loop_test(tc, test_cut_link_faulty, from, to < 2 ? to : 2);
	if (!only || !strncmp(only, "three", 5))
		tcase_add_loop_test(tc, test_three_nodes_slow_node_found, from, to < 2 ? to : 2);
	suite_add_tcase(s, tc);
	int rc = rv_test_run_suite(s);
	netns_teardown();
	return rc;
}
