/*
 * check_throttled_need.c: the CPU a node was held back from, read from the
 * kernel's own cgroup counters.  Two spinning processes (a need of about two
 * cores) run under a CFS quota of half a core in a cgroup of their own;
 * cpu.stat's throttled time, read by rv_usage_cgroup_cpu, over the wall time
 * (rv_alg_usage_throttling) plus the CPU they got must come back near the
 * CPU the same two processes take with no quota.  The kernel adds each CPU's
 * throttled time: read as time the group as a whole sat throttled, the
 * need would come to at most 1.25 cores.
 *
 * Both runs happen in the test's cgroup at the highest CPU weight, so that
 * the spinners take their two cores from whatever else this machine runs
 * (a build on both cores leaves a nice-0 process about half of one): the
 * CPU free to them is then about two cores, not whatever the load left.
 *
 * It needs root and a cgroup hierarchy with the cpu controller (v1 or v2)
 * it may make a folder in; where there is none, it skips (counted, and a
 * failure under CI=true).  Should the spinners still get under 1.5 cores
 * (a machine whose other work outweighs them: real-time tasks, a busy
 * parent cgroup), the two readings cannot be told apart and the
 * comparison is skipped, counted.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "parse.h"
#include "rover_alg.h"
#include "testutil.h"
#include "usage.h"

#define SPINNERS  2
#define QUOTA_US  50000
#define PERIOD_US 100000
/* the highest weight of each version (the default is 1024 and 100) */
#define V1_SHARES "262144\n"
#define V2_WEIGHT "10000\n"

static int put(const char *dir, const char *file, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	int rc = n == (ssize_t)strlen(text) ? 0 : -errno;
	close(fd);
	return rc;
}

/* The i-th CPU this process may run on, or -1. */
static int nth_cpu(int i)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set) && i-- == 0)
			return c;
	return -1;
}

/* Run SPINNERS processes that spin for seconds of wall time, each first
 * joining cgroup dir when dir is not NULL, each on a CPU of its own: the
 * kernel's throttled time is per CPU, and two spinners the scheduler put on
 * one CPU would be held back on that CPU only.  Returns the cores they used
 * (their CPU time over the wall time), or -1. */
static double spin(const char *dir, double seconds)
{
	pid_t pid[SPINNERS];
	int core[SPINNERS];
	for (int i = 0; i < SPINNERS; i++)
		core[i] = nth_cpu(i);
	int64_t t0 = rv_mono_ms();
	for (int i = 0; i < SPINNERS; i++) {
		pid[i] = fork();
		if (pid[i] < 0)
			return -1;
		if (pid[i] == 0) {
			char self[32];
			snprintf(self, sizeof(self), "%d\n", (int)getpid());
			if (dir && put(dir, "cgroup.procs", self) < 0)
				_exit(3);
			cpu_set_t one;
			CPU_ZERO(&one);
			CPU_SET(core[i], &one);
			if (core[i] >= 0 && sched_setaffinity(0, sizeof(one), &one) < 0)
				_exit(4);
			volatile unsigned long x = 0;
			while ((double)(rv_mono_ms() - t0) < seconds * 1000)
				x++;
			_exit(0);
		}
	}
	double cpu = 0;
	for (int i = 0; i < SPINNERS; i++) {
		int st = 0;
		struct rusage ru;
		if (wait4(pid[i], &st, 0, &ru) != pid[i] || !WIFEXITED(st) || WEXITSTATUS(st))
			return -1;
		cpu += (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	}
	return cpu * 1000 / (double)(rv_mono_ms() - t0);
}

/* A CFS quota of quota_us per PERIOD_US on dir, or none when quota_us < 0.
 * 0 or a negative errno. */
static int set_quota(enum rv_cgroup_mode mode, const char *dir, int quota_us)
{
	char text[64];
	if (mode == RV_CGROUP_V2) {
		if (quota_us < 0)
			snprintf(text, sizeof(text), "max %d\n", PERIOD_US);
		else
			snprintf(text, sizeof(text), "%d %d\n", quota_us, PERIOD_US);
		return put(dir, "cpu.max", text);
	}
	snprintf(text, sizeof(text), "%d\n", PERIOD_US);
	int rc = put(dir, "cpu.cfs_period_us", text);
	snprintf(text, sizeof(text), "%d\n", quota_us < 0 ? -1 : quota_us);
	return rc < 0 ? rc : put(dir, "cpu.cfs_quota_us", text);
}

/* A cgroup folder at the highest CPU weight with no quota: v2 under the
 * mount's root, v1 under the cpu hierarchy's root.  0, or a negative errno
 * (none here). */
static int make_group(enum rv_cgroup_mode *mode, char *dir, size_t size)
{
	char mnt[256], root[256];
	*mode = rv_usage_cgroup_mode(mnt, sizeof(mnt));
	if (*mode == RV_CGROUP_NONE)
		return -ENOENT;
	if (*mode == RV_CGROUP_V2) {
		snprintf(root, sizeof(root), "%s", mnt);
	} else {
		/* the hierarchy's root: this process's folder less its path */
		char own[256], rel[256], text[4096];
		FILE *f = fopen("/proc/self/cgroup", "re");
		size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
		if (f)
			fclose(f);
		text[n] = '\0';
		if (rv_usage_pid_cgroup(getpid(), *mode, mnt, "cpu", own, sizeof(own)) < 0 ||
		    rv_usage_parse_pid_cgroup(text, *mode, "cpu", rel, sizeof(rel)) < 0)
			return -ENOENT;
		size_t lo = strlen(own), lr = strcmp(rel, "/") ? strlen(rel) : 0;
		if (lr > lo || (lr && strcmp(own + lo - lr, rel)))
			return -ENOENT;
		own[lo - lr] = '\0';
		snprintf(root, sizeof(root), "%s", own);
	}
	snprintf(dir, size, "%s/rv-throttle-test-%d", root, (int)getpid());
	if (mkdir(dir, 0755) < 0)
		return -errno;
	int rc = *mode == RV_CGROUP_V2 ? put(dir, "cpu.weight", V2_WEIGHT)
				       : put(dir, "cpu.shares", V1_SHARES);
	if (rc == 0)
		rc = set_quota(*mode, dir, -1);
	if (rc < 0)
		rmdir(dir);
	return rc;
}

START_TEST(test_throttled_time_is_the_cpu_held_back)
{
	enum rv_cgroup_mode mode;
	char dir[512];
	if (nth_cpu(SPINNERS - 1) < 0) {
		RV_TEST_SKIP(false, "fewer than %d CPUs to run on: NOT TESTED", SPINNERS);
		return;
	}
	int rc = make_group(&mode, dir, sizeof(dir));
	if (rc < 0) {
		RV_TEST_SKIP(true, "no cgroup with a CPU quota here: %s", strerror(-rc));
		return;
	}
	/* what the two processes take with no quota, on this machine now */
	double free_cores = spin(dir, 1.0);
	ck_assert_int_eq(set_quota(mode, dir, QUOTA_US), 0);
	struct rv_cgroup_cpu before, after;
	ck_assert_int_eq(rv_usage_cgroup_cpu(mode, dir, &before), 0);
	int64_t t0 = rv_mono_ms();
	double used = spin(dir, 2.0);
	int64_t wall_ms = rv_mono_ms() - t0;
	ck_assert_int_eq(rv_usage_cgroup_cpu(mode, dir, &after), 0);
	ck_assert_int_eq(rmdir(dir), 0);
	ck_assert_msg(free_cores > 0 && used > 0, "spinners failed: %.2f %.2f", free_cores, used);
	ck_assert(after.has_periods);

	struct rv_alg_usage u = { .cpu = used };
	rv_alg_usage_throttling(&u, after.nr_periods - before.nr_periods,
				after.nr_throttled - before.nr_throttled,
				(int64_t)(after.throttled_us - before.throttled_us), wall_ms);
	ck_assert(u.has_throttled && u.has_held);
	double need = used + u.held;
	fprintf(stderr,
		"check_throttled_need: %s, no quota %.2f cores; quota 0.5: used %.2f, "
		"throttled in %.0f%% of periods, held back %.2f: need %.2f\n",
		rv_cgroup_mode_name(mode), free_cores, used, 100 * u.throttled, u.held, need);
	ck_assert_msg(used <= 0.6, "the quota held: used %.2f cores", used);
	/* A machine too busy to give two spinners more than 1.5 cores cannot
	 * tell the two readings apart. */
	if (free_cores < 1.5) {
		RV_TEST_SKIP(false,
			     "%.2f cores free for two spinners at the highest CPU weight: "
			     "the need NOT COMPARED",
			     free_cores);
		return;
	}
	ck_assert_msg(u.throttled >= 0.8, "throttled in %.0f%% of periods", 100 * u.throttled);
	ck_assert_msg(need >= 0.75 * free_cores && need <= 1.25 * free_cores,
		      "need %.2f cores against %.2f taken with no quota", need, free_cores);
}
END_TEST

RV_TEST_MAIN_TCASE("throttled_need", "throttled_need", 30, test_throttled_time_is_the_cpu_held_back)
