/*
 * check_usage.c: what rover-run reports of its node (usage.h): the CPU
 * and memory of a real process tree (a busy child counted, a left-out
 * subtree not), and the CPU throttling of its cgroup read from cgroup v2
 * and v1 folders laid out as the kernel does (in a temp folder: no quota
 * can be set on this machine's own cgroup).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "node_usage.h"

static pid_t busy_child(void)
{
	pid_t p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0)
		for (volatile unsigned long i = 0;; i++)
			;
	return p;
}

/* The child's own CPU seconds (utime + stime of /proc/PID/stat). */
static double child_cpu_seconds(pid_t kid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)kid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')');
	unsigned long ut = 0, st = 0;
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Waits until the busy child has had CPU_S seconds of a core (up to 30 s
 * of wall time: on a loaded machine 1.5 s of wall can give it less). */
static void wait_child_cpu(pid_t kid, double cpu_s)
{
	for (int i = 0; i < 300 && child_cpu_seconds(kid) < cpu_s; i++)
		usleep(100 * 1000);
}

START_TEST(test_tree_counts_a_busy_child)
{
	struct node_usage_sample a = { 0 }, b = { 0 }, c = { 0 };
	ck_assert_int_eq(node_usage_tree(getpid(), 0, &a), 0);
	ck_assert_int_ge(a.nprocs, 1);
	ck_assert(a.rss_bytes > 1024 * 1024);
	pid_t kid = busy_child();
	wait_child_cpu(kid, 0.4);
	ck_assert_int_eq(node_usage_tree(getpid(), 0, &b), 0);
	ck_assert_int_eq(b.nprocs, a.nprocs + 1);
	/* a busy loop on a shared machine: a part of a core at least */
	ck_assert_msg(b.cpu_seconds - a.cpu_seconds > 0.2, "%.2f -> %.2f", a.cpu_seconds,
		      b.cpu_seconds);
	/* left out: the child and its CPU */
	ck_assert_int_eq(node_usage_tree(getpid(), kid, &c), 0);
	ck_assert_int_eq(c.nprocs, a.nprocs);
	ck_assert(c.cpu_seconds < b.cpu_seconds - 0.2);
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	ck_assert_int_eq(node_usage_tree(999999999, 0, &c), -ESRCH);
}
END_TEST

START_TEST(test_cgroup_v2_quota_on_a_parent)
{
	struct rv_test_cgtree t;
	rv_test_cgtree_make(&t);
	rv_test_put(t.parent, "cpu.stat",
		    "usage_usec 5000\nuser_usec 4000\nsystem_usec 1000\nnr_periods 40\n"
		    "nr_throttled 10\nthrottled_usec 25000\n");
	struct node_usage_sample s = { 0 };
	ck_assert_int_eq(node_usage_cgroup(t.root, "0::/job/node\n", &s), 0);
	ck_assert(s.has_quota);
	ck_assert(s.quota_cores > 1.49 && s.quota_cores < 1.51);
	ck_assert_int_eq(s.nr_periods, 40);
	ck_assert_int_eq(s.nr_throttled, 10);
	ck_assert_int_eq(s.throttled_us, 25000);
	/* no quota anywhere */
	rv_test_put(t.parent, "cpu.max", "max 100000\n");
	struct node_usage_sample n = { 0 };
	ck_assert_int_eq(node_usage_cgroup(t.root, "0::/job/node\n", &n), -ENOENT);
	ck_assert(!n.has_quota);
	/* a container: its cgroup path is not under its mount, the mount is it */
	rv_test_put(t.root, "cpu.max", "50000 100000\n");
	rv_test_put(t.root, "cpu.stat", "nr_periods 7\nnr_throttled 7\nthrottled_usec 9\n");
	ck_assert_int_eq(node_usage_cgroup(t.root, "0::/kubepods/pod1/abc\n", &n), 0);
	ck_assert_int_eq(n.nr_throttled, 7);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t.root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(test_cgroup_v1_cpu_hierarchy)
{
	char root[] = "/tmp/rv-usage-XXXXXX", dir[300];
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(dir, sizeof(dir), "%s/cpu,cpuacct/docker/c1", root);
	rv_test_put(dir, "cpu.cfs_quota_us", "200000\n");
	rv_test_put(dir, "cpu.cfs_period_us", "100000\n");
	rv_test_put(dir, "cpu.stat", "nr_periods 100\nnr_throttled 30\nthrottled_time 4000000\n");
	struct node_usage_sample s = { 0 };
	const char *pc = "12:memory:/docker/c1\n3:cpu,cpuacct:/docker/c1\n0::/\n";
	ck_assert_int_eq(node_usage_cgroup(root, pc, &s), 0);
	ck_assert(s.quota_cores > 1.99 && s.quota_cores < 2.01);
	ck_assert_int_eq(s.nr_periods, 100);
	ck_assert_int_eq(s.nr_throttled, 30);
	ck_assert_int_eq(s.throttled_us, 4000); /* ns in v1 */
	rv_test_put(dir, "cpu.cfs_quota_us", "-1\n");
	ck_assert_int_eq(node_usage_cgroup(root, pc, &s), -ENOENT);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

RV_TEST_MAIN_TCASE("usage", "core", 20, test_tree_counts_a_busy_child,
		   test_cgroup_v2_quota_on_a_parent, test_cgroup_v1_cpu_hierarchy)
