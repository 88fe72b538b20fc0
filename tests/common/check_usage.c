/*
 * check_usage.c: the host and cgroup readers.  Parsers get the text the
 * kernel prints (v1 and v2, PSI with and without "full", a command name with
 * spaces and parentheses); the readers read this host's real /proc; the job
 * scanner finds real child processes by ROVER_JOB_NAME, counts their CPU
 * time and forgets them when they exit.  The process tree (rover-run's and
 * the local scheduler's nodes') is read from a /proc laid out in a temp
 * folder (parents, a left-out subtree, reaped children's time) and from
 * the real /proc; cgroup folders (quota on a parent, a container's own
 * mount, v1 cpuacct apart, memory peak) likewise.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "usage.h"

START_TEST(test_parse_cpu_times)
{
	const char *t = "cpu  100 5 50 800 20 0 5 0 7 0\n"
			"cpu0 50 2 25 400 10 0 3 0 0 0\n"
			"cpu1 50 3 25 400 10 0 2 0 0 0\n"
			"intr 12345\n";
	struct rv_cpu_times a;
	ck_assert_int_eq(rv_usage_parse_cpu_times(t, &a), 0);
	ck_assert_int_eq(a.ncpu, 2);
	ck_assert_uint_eq(a.total, 980); /* guest (7) is already in user */
	ck_assert_uint_eq(a.idle, 820);
	struct rv_cpu_times b = a;
	b.total += 100;
	b.idle += 50; /* half of 2 CPUs busy */
	ck_assert_double_eq_tol(rv_usage_cpu_busy(&a, &b), 1.0, 1e-9);
	ck_assert_double_eq(rv_usage_cpu_busy(&a, &a), 0);
	ck_assert_int_eq(rv_usage_parse_cpu_times("intr 1\n", &a), -EINVAL);
}
END_TEST

START_TEST(test_parse_meminfo_and_psi)
{
	struct rv_meminfo m;
	ck_assert_int_eq(rv_usage_parse_meminfo("MemTotal:       16384000 kB\n"
						"MemFree:         1000000 kB\n"
						"MemAvailable:    8192000 kB\n",
						&m),
			 0);
	ck_assert_int_eq(m.total_kb, 16384000);
	ck_assert_int_eq(m.available_kb, 8192000);
	/* an old kernel without MemAvailable: free + buffers + cached */
	ck_assert_int_eq(rv_usage_parse_meminfo("MemTotal: 1000 kB\nMemFree: 100 kB\n"
						"Buffers: 10 kB\nCached: 200 kB\n",
						&m),
			 0);
	ck_assert_int_eq(m.available_kb, 310);

	struct rv_psi p;
	ck_assert_int_eq(rv_usage_parse_psi("some avg10=70.19 avg60=21.21 avg300=7.85 total=5773\n"
					    "full avg10=1.50 avg60=0.25 avg300=0.00 total=42\n",
					    &p),
			 0);
	ck_assert_double_eq_tol(p.some_avg10, 70.19, 1e-9);
	ck_assert_uint_eq(p.some_total_us, 5773);
	ck_assert(p.has_full);
	ck_assert_double_eq_tol(p.full_avg10, 1.5, 1e-9);
	ck_assert_int_eq(rv_usage_parse_psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", &p),
			 0);
	ck_assert(!p.has_full);
	ck_assert_int_eq(rv_usage_parse_psi("garbage\n", &p), -EINVAL);
}
END_TEST

START_TEST(test_parse_cgroup_files)
{
	const char *v1 = "12:cpu,cpuacct:/rover/train-4242/worker-0\n"
			 "4:memory:/rover/train-4242/worker-0\n"
			 "1:name=systemd:/\n"
			 "0::/user.slice\n";
	char out[256];
	ck_assert_int_eq(rv_usage_parse_pid_cgroup(v1, RV_CGROUP_V1, "cpu", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "/rover/train-4242/worker-0");
	ck_assert_int_eq(rv_usage_parse_pid_cgroup(v1, RV_CGROUP_V1, "cpuacct", out, sizeof(out)),
			 0);
	ck_assert_int_eq(rv_usage_parse_pid_cgroup(v1, RV_CGROUP_V1, "pids", out, sizeof(out)),
			 -ENOENT);
	ck_assert_int_eq(rv_usage_parse_pid_cgroup(v1, RV_CGROUP_V2, "cpu", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "/user.slice");

	ck_assert_int_eq(rv_usage_job_of_cgroup("/rover/train-4242/worker-0", out, sizeof(out)), 1);
	ck_assert_str_eq(out, "train");
	ck_assert_int_eq(rv_usage_job_of_cgroup("/a/b/rover/big-job-7/w", out, sizeof(out)), 1);
	ck_assert_str_eq(out, "big-job");
	ck_assert_int_eq(rv_usage_job_of_cgroup("/user.slice/notrover/x", out, sizeof(out)), 0);
	ck_assert_int_eq(rv_usage_job_of_cgroup("/user.slice", out, sizeof(out)), 0);

	struct rv_cgroup_cpu c = { 0 };
	rv_usage_parse_cgroup_cpu_stat("usage_usec 900000\nuser_usec 1\nsystem_usec 2\n"
				       "nr_periods 10\nnr_throttled 4\nthrottled_usec 25000\n",
				       RV_CGROUP_V2, &c);
	ck_assert_uint_eq(c.usage_us, 900000);
	ck_assert_int_eq(c.nr_periods, 10);
	ck_assert_int_eq(c.nr_throttled, 4);
	ck_assert_uint_eq(c.throttled_us, 25000);
	memset(&c, 0, sizeof(c));
	rv_usage_parse_cgroup_cpu_stat("nr_periods 3\nnr_throttled 1\nthrottled_time 7000000\n",
				       RV_CGROUP_V1, &c);
	ck_assert_uint_eq(c.throttled_us, 7000);
	ck_assert_int_eq(c.nr_throttled, 1);
}
END_TEST

/* Copy fixture file name (tests/common/fixtures, read from the source tree
 * the suites run in) into dir/as. */
static void put_fixture(const char *dir, const char *name, const char *as)
{
	char src[256], dst[512], buf[4096];
	snprintf(src, sizeof(src), "tests/common/fixtures/%s", name);
	snprintf(dst, sizeof(dst), "%s/%s", dir, as);
	FILE *in = fopen(src, "r");
	ck_assert_msg(in, "fixture %s: run the suite from the source tree", src);
	size_t n = fread(buf, 1, sizeof(buf), in);
	fclose(in);
	FILE *out = fopen(dst, "w");
	ck_assert_ptr_nonnull(out);
	ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
	fclose(out);
}

static void put_text(const char *dir, const char *as, const char *text)
{
	char dst[512];
	snprintf(dst, sizeof(dst), "%s/%s", dir, as);
	rv_test_write_file(dst, text);
}

/* The cgroup readers over folders holding the files as the kernel writes
 * them: v1 captured on this host from a throttled group, v2 in Linux 6.x's
 * format (this host's cgroup2 has no cpu controller: fixtures/README.md). */
START_TEST(test_read_cgroup_cpu_fixtures)
{
	char dir[] = "/tmp/rover-cgfix-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));

	put_fixture(dir, "cpu.stat.v2", "cpu.stat");
	put_text(dir, "cpu.max", "25000 100000\n");
	struct rv_cgroup_cpu c;
	ck_assert_int_eq(rv_usage_cgroup_cpu(RV_CGROUP_V2, dir, &c), 0);
	ck_assert_uint_eq(c.usage_us, 39636497112ULL); /* not nice_usec's line */
	ck_assert_int_eq(c.nr_periods, 2406);
	ck_assert_int_eq(c.nr_throttled, 1532);
	ck_assert_uint_eq(c.throttled_us, 118733096ULL);
	ck_assert_double_eq_tol(c.quota_cores, 0.25, 1e-9);
	put_text(dir, "cpu.max", "max 100000\n");
	ck_assert_int_eq(rv_usage_cgroup_cpu(RV_CGROUP_V2, dir, &c), 0);
	ck_assert_double_eq(c.quota_cores, -1);

	put_fixture(dir, "cpu.stat.v1", "cpu.stat");
	put_text(dir, "cpu.cfs_quota_us", "10000\n");
	put_text(dir, "cpu.cfs_period_us", "100000\n");
	put_text(dir, "cpuacct.usage", "1234567000\n");
	ck_assert_int_eq(rv_usage_cgroup_cpu(RV_CGROUP_V1, dir, &c), 0);
	ck_assert_int_eq(c.nr_periods, 11);
	ck_assert_int_eq(c.nr_throttled, 10);
	ck_assert_uint_eq(c.throttled_us, 784976ULL); /* ns to us */
	ck_assert_uint_eq(c.usage_us, 1234567ULL);
	ck_assert_double_eq_tol(c.quota_cores, 0.1, 1e-9);

	const char *names[] = { "cpu.stat", "cpu.max", "cpu.cfs_quota_us", "cpu.cfs_period_us",
				"cpuacct.usage" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char f[512];
		snprintf(f, sizeof(f), "%s/%s", dir, names[i]);
		unlink(f);
	}
	ck_assert_int_eq(rv_usage_cgroup_cpu(RV_CGROUP_V2, dir, &c), -ENOENT);
	rmdir(dir);
}
END_TEST

START_TEST(test_parse_proc_stat)
{
	/* a command name holding ") (" must not shift the fields */
	const char *t = "4242 (a) (b c) S 1 4242 4242 0 -1 4194560 100 0 0 0 "
			"150 50 0 0 20 0 1 0 987654 10000000 256 18446744073709551615\n";
	struct rv_proc_sample s;
	ck_assert_int_eq(rv_usage_parse_proc_stat(t, &s), 0);
	ck_assert_int_eq(s.pid, 4242);
	ck_assert_int_eq(s.ppid, 1);
	ck_assert_uint_eq(s.ticks, 200);
	ck_assert_uint_eq(s.child_ticks, 0);
	ck_assert_uint_eq(s.starttime, 987654);
	ck_assert_int_eq(s.rss_kb, 256 * (sysconf(_SC_PAGESIZE) / 1024));
	const char *reaped = "7 (sh) S 3 7 7 0 -1 0 0 0 0 0 5 5 30 12 20 0 1 0 99 0 10\n";
	ck_assert_int_eq(rv_usage_parse_proc_stat(reaped, &s), 0);
	ck_assert_int_eq(s.ppid, 3);
	ck_assert_uint_eq(s.ticks, 10);
	ck_assert_uint_eq(s.child_ticks, 42);
	ck_assert_int_eq(rv_usage_parse_proc_stat("12 noparen S", &s), -EINVAL);
}
END_TEST

START_TEST(test_read_this_host)
{
	struct rv_cpu_times c;
	ck_assert_int_eq(rv_usage_cpu_times(&c), 0);
	ck_assert_int_eq(c.ncpu, (int)sysconf(_SC_NPROCESSORS_ONLN));
	struct rv_meminfo m;
	ck_assert_int_eq(rv_usage_meminfo(&m), 0);
	ck_assert_int_gt(m.total_kb, 0);
	ck_assert_int_le(m.available_kb, m.total_kb);
	struct rv_psi p;
	int rc = rv_usage_psi("/proc/pressure/memory", &p);
	ck_assert_msg(rc == 0 || rc == -ENOENT || rc == -EOPNOTSUPP, "psi: %d", rc);
	struct rv_proc_sample s;
	ck_assert_int_eq(rv_usage_proc_sample(getpid(), &s), 0);
	ck_assert_int_eq(s.pid, getpid());
	ck_assert_int_gt(s.rss_kb, 0);
	ck_assert_int_eq(rv_usage_proc_sample(0x3ffffff, &s), -ENOENT);

	char mnt[256], dir[512];
	enum rv_cgroup_mode mode = rv_usage_cgroup_mode(mnt, sizeof(mnt));
	if (mode != RV_CGROUP_NONE) {
		ck_assert_int_eq(rv_usage_pid_cgroup(getpid(), mode, mnt, "cpu", dir, sizeof(dir)),
				 0);
		struct rv_cgroup_cpu cc;
		ck_assert_int_eq(rv_usage_cgroup_cpu(mode, dir, &cc), 0);
		ck_assert_int_ge(cc.nr_throttled, 0);
	}
	char v[64];
	setenv("ROVER_USAGE_PROBE", "here", 1);
	/* our own environ is what we started with, not setenv's: a child has it */
	ck_assert_int_eq(rv_usage_proc_env(getpid(), "NO_SUCH_KEY_ROVER", v, sizeof(v)), 0);
}
END_TEST

static pid_t spawn_job(const char *job, bool spin)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (job)
			setenv("ROVER_JOB_NAME", job, 1);
		if (spin)
			execl("/bin/sh", "sh", "-c", "while :; do :; done", (char *)NULL);
		else
			execl("/bin/sleep", "sleep", "60", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static const struct rv_usage_job *find(const struct rv_usage_job *j, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(j[i].name, name))
			return &j[i];
	return NULL;
}

START_TEST(test_scanner_finds_jobs)
{
	char a[64], b[64];
	snprintf(a, sizeof(a), "usage-a-%d", (int)getpid());
	snprintf(b, sizeof(b), "usage-b-%d", (int)getpid());
	pid_t p1 = spawn_job(a, true), p2 = spawn_job(a, false), p3 = spawn_job(b, false);
	pid_t p4 = spawn_job(NULL, false); /* not a job's */
	ck_assert(p1 > 0 && p2 > 0 && p3 > 0 && p4 > 0);
	usleep(200 * 1000); /* let them exec */
	struct rv_usage_scanner *s = rv_usage_scanner_new(NULL);
	struct rv_usage_job jobs[64];
	int nprocs = 0;
	int n = rv_usage_scan_jobs(s, jobs, 64, &nprocs);
	ck_assert_int_gt(n, 1);
	ck_assert_int_ge(nprocs, 5);
	const struct rv_usage_job *ja = find(jobs, n, a), *jb = find(jobs, n, b);
	ck_assert_ptr_nonnull(ja);
	ck_assert_ptr_nonnull(jb);
	ck_assert_int_eq(ja->nprocs, 2);
	ck_assert_int_eq(jb->nprocs, 1);
	ck_assert_int_gt(ja->rss_kb, 0);
	ck_assert_int_eq(ja->first_pid, p1 < p2 ? p1 : p2);

	/* the spinning process's CPU time shows as differences on the next
	 * scans (summed over scans: on a loaded machine it may get little CPU
	 * in one interval), the sleeping one's does not */
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t da = 0, db = 0;
	for (int i = 0; i < 100 && da < (uint64_t)(hz / 10); i++) {
		usleep(100 * 1000);
		n = rv_usage_scan_jobs(s, jobs, 64, NULL);
		ja = find(jobs, n, a);
		jb = find(jobs, n, b);
		ck_assert_ptr_nonnull(ja);
		ck_assert_ptr_nonnull(jb);
		da += ja->ticks_delta;
		db += jb->ticks_delta;
	}
	ck_assert_msg(da >= (uint64_t)(hz / 10), "delta %llu ticks", (unsigned long long)da);
	ck_assert_uint_le(db, (uint64_t)(hz / 10));

	/* a job whose processes exit is gone from the next scan */
	kill(p3, SIGKILL);
	waitpid(p3, NULL, 0);
	n = rv_usage_scan_jobs(s, jobs, 64, NULL);
	ck_assert_ptr_null(find(jobs, n, b));
	ck_assert_ptr_nonnull(find(jobs, n, a));

	/* at most max jobs */
	ck_assert_int_eq(rv_usage_scan_jobs(s, jobs, 0, NULL), 0);
	rv_usage_scanner_free(s);
	pid_t all[] = { p1, p2, p4 };
	for (size_t i = 0; i < 3; i++) {
		kill(all[i], SIGKILL);
		waitpid(all[i], NULL, 0);
	}
	ck_assert_ptr_null(rv_usage_scanner_free(NULL));
}
END_TEST

/* /proc/<pid>/stat of a made-up process in root. */
static void fake_proc(const char *root, int pid, int ppid, int ticks, int cticks, int rss)
{
	char dir[600], text[300];
	snprintf(dir, sizeof(dir), "%s/%d", root, pid);
	snprintf(text, sizeof(text),
		 "%d (p %d) S %d 1 1 0 -1 0 0 0 0 0 %d 0 %d 0 20 0 1 0 %d 0 %d\n", pid, pid, ppid,
		 ticks, cticks, 1000 + pid, rss);
	rv_test_put(dir, "stat", text);
}

static void rm_rf(const char *dir)
{
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_proc_tree)
{
	char root[] = "/tmp/rv-proc-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(root));
	/* 10 -> 11 -> 12, 10 -> 20 (left out) -> 21; 30 not ours; a child
	 * listed before its parent (5, child of 12) */
	fake_proc(root, 10, 1, 100, 50, 10);
	fake_proc(root, 11, 10, 10, 0, 20);
	fake_proc(root, 12, 11, 1, 0, 30);
	fake_proc(root, 5, 12, 2, 0, 40);
	fake_proc(root, 20, 10, 1000, 0, 500);
	fake_proc(root, 21, 20, 1000, 0, 500);
	fake_proc(root, 30, 1, 7, 0, 7);
	rv_test_put(root, "self", "not a process\n");
	long pkb = sysconf(_SC_PAGESIZE) / 1024;
	struct rv_proc_tree t;
	ck_assert_int_eq(rv_usage_proc_tree(root, 10, 20, &t), 0);
	ck_assert_int_eq(t.nprocs, 4);
	ck_assert_uint_eq(t.ticks, 100 + 50 + 10 + 1 + 2); /* the reaped children's too */
	ck_assert_int_eq(t.rss_kb, (10 + 20 + 30 + 40) * pkb);
	ck_assert_int_eq(rv_usage_proc_tree(root, 10, 0, &t), 0);
	ck_assert_int_eq(t.nprocs, 6);
	ck_assert_int_eq(rv_usage_proc_tree(root, 11, 0, &t), 0);
	ck_assert_int_eq(t.nprocs, 3);
	ck_assert_int_eq(rv_usage_proc_tree(root, 99, 0, &t), -ESRCH);
	ck_assert_int_eq(rv_usage_proc_tree("/nonexistent-proc", 1, 0, &t), -ENOENT);
	rm_rf(root);

	/* the real /proc: this process and a child that burns CPU, then is
	 * reaped: its time stays in the tree */
	struct rv_proc_tree a, b;
	ck_assert_int_eq(rv_usage_proc_tree(NULL, getpid(), 0, &a), 0);
	ck_assert_int_ge(a.nprocs, 1);
	ck_assert_int_gt(a.rss_kb, 0);
	pid_t kid = fork();
	if (kid == 0) {
		/* 300 ms of its own CPU time, however loaded the machine is */
		struct timespec t1;
		do
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
		while (t1.tv_sec * 1000 + t1.tv_nsec / 1000000 < 300);
		_exit(0);
	}
	ck_assert_int_gt(kid, 0);
	usleep(100 * 1000);
	ck_assert_int_eq(rv_usage_proc_tree(NULL, getpid(), 0, &b), 0);
	ck_assert_int_eq(b.nprocs, a.nprocs + 1);
	ck_assert_int_eq(rv_usage_proc_tree(NULL, getpid(), kid, &b), 0);
	ck_assert_int_eq(b.nprocs, a.nprocs);
	waitpid(kid, NULL, 0);
	ck_assert_int_eq(rv_usage_proc_tree(NULL, getpid(), 0, &b), 0);
	ck_assert_int_eq(b.nprocs, a.nprocs);
	ck_assert_uint_ge(b.ticks, a.ticks + (uint64_t)rv_usage_clk_tck() / 10);
}
END_TEST

START_TEST(test_cgroup_folders)
{
	struct rv_test_cgtree t;
	rv_test_cgtree_make(&t);
	rv_test_put(t.node, "cpu.stat", "usage_usec 5\n");
	rv_test_put(t.parent, "cpu.stat",
		    "usage_usec 5000\nnr_periods 40\nnr_throttled 10\n"
		    "throttled_usec 25000\n");
	struct rv_cgroup_cpu c;
	char at[400];
	/* v2: the nearest quota up from the node, the parent's */
	ck_assert_int_eq(rv_usage_cgroup_quota(RV_CGROUP_V2, t.root, "/job/node", &c, at,
					       sizeof(at)),
			 0);
	ck_assert_str_eq(at, t.parent);
	ck_assert(c.quota_cores > 1.49 && c.quota_cores < 1.51);
	ck_assert(c.has_periods);
	ck_assert_int_eq(c.nr_throttled, 10);
	ck_assert_uint_eq(c.throttled_us, 25000);
	/* the node's own folder: no quota, no throttling counters */
	ck_assert_int_eq(rv_usage_cgroup_cpu(RV_CGROUP_V2, t.node, &c), 0);
	ck_assert(!c.has_periods);
	ck_assert(c.quota_cores < 0);
	ck_assert_uint_eq(c.usage_us, 5);
	/* none anywhere; then a container's cgroup, not under its mount */
	rv_test_put(t.parent, "cpu.max", "max 100000\n");
	ck_assert_int_eq(rv_usage_cgroup_quota(RV_CGROUP_V2, t.root, "/job/node", &c, NULL, 0),
			 -ENOENT);
	rv_test_put(t.root, "cpu.max", "50000 100000\n");
	rv_test_put(t.root, "cpu.stat", "nr_periods 7\nnr_throttled 7\nthrottled_usec 9\n");
	ck_assert_int_eq(rv_usage_cgroup_quota(RV_CGROUP_V2, t.root, "/kubepods/pod1", &c, at,
					       sizeof(at)),
			 0);
	ck_assert_str_eq(at, t.root);
	ck_assert_int_eq(c.nr_throttled, 7);
	/* v1: cpuacct mounted apart has no cpu.stat, cpu has no cpuacct.usage */
	char acct[300], cpu[300];
	snprintf(acct, sizeof(acct), "%s/cpuacct/n", t.root);
	snprintf(cpu, sizeof(cpu), "%s/cpu/n", t.root);
	rv_test_put(acct, "cpuacct.usage", "3000000000\n");
	rv_test_put(cpu, "cpu.stat", "nr_periods 5\nnr_throttled 2\nthrottled_time 4000000\n");
	ck_assert_int_eq(rv_usage_cgroup_cpu(RV_CGROUP_V1, acct, &c), 0);
	ck_assert_uint_eq(c.usage_us, 3000000);
	ck_assert(!c.has_periods);
	ck_assert_int_eq(rv_usage_cgroup_cpu(RV_CGROUP_V1, cpu, &c), 0);
	ck_assert_int_eq(c.nr_throttled, 2);
	ck_assert_uint_eq(c.throttled_us, 4000);
	snprintf(cpu, sizeof(cpu), "%s/cpuacct", t.root); /* neither file */
	ck_assert_int_eq(rv_usage_cgroup_cpu(RV_CGROUP_V1, cpu, &c), -ENOENT);
	/* memory: v2 with a peak, v1 without one */
	struct rv_cgroup_mem m;
	rv_test_put(t.node, "memory.current", "4096\n");
	rv_test_put(t.node, "memory.max", "max\n");
	rv_test_put(t.node, "memory.peak", "8192\n");
	ck_assert_int_eq(rv_usage_cgroup_mem(RV_CGROUP_V2, t.node, &m), 0);
	ck_assert_int_eq(m.current_bytes, 4096);
	ck_assert_int_eq(m.limit_bytes, -1);
	ck_assert_int_eq(m.peak_bytes, 8192);
	rv_test_put(acct, "memory.usage_in_bytes", "100\n");
	rv_test_put(acct, "memory.limit_in_bytes", "200\n");
	ck_assert_int_eq(rv_usage_cgroup_mem(RV_CGROUP_V1, acct, &m), 0);
	ck_assert_int_eq(m.limit_bytes, 200);
	ck_assert_int_eq(m.peak_bytes, -1);
	rm_rf(t.root);
}
END_TEST

START_TEST(test_scanner_bad_root)
{
	struct rv_usage_scanner *s = rv_usage_scanner_new("/nonexistent-proc");
	struct rv_usage_job j[1];
	ck_assert_int_eq(rv_usage_scan_jobs(s, j, 1, NULL), -ENOENT);
	rv_usage_scanner_free(s);
}
END_TEST

static Suite *usage_suite(void)
{
	TCase *tc = RV_TEST_TCASE("usage", 30, test_parse_cpu_times, test_parse_meminfo_and_psi,
				  test_parse_cgroup_files, test_read_cgroup_cpu_fixtures,
				  test_parse_proc_stat, test_read_this_host,
				  test_scanner_finds_jobs, test_scanner_bad_root, test_proc_tree,
				  test_cgroup_folders);
	return RV_TEST_SUITE("usage", tc);
}

RV_TEST_MAIN(usage_suite)
