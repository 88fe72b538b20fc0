/*
 * check_sched_local.c: the local scheduler backend (master/sched_local.c)
 * with real processes and real cgroups: exit codes and signals come back as
 * events, a command that outgrows a 64 MiB memory limit is reported as an
 * OOM kill with that limit and, relaunched by the node policy with more
 * memory, exits normally; a CPU quota shows as throttling in the usage; a
 * removal stops the whole process group after its grace; every cgroup is
 * gone afterwards.  The cgroup v2 hierarchy here has no controllers: the
 * detection must say so and fall back.
 *
 * Needs root and a writable cgroup: without them the tests fail when
 * CI=true and are skipped (saying why) otherwise.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nodes.h"
#include "parse.h"
#include "proc.h"
#include "sched_local.h"
#include "testutil.h"

/* The nodes' log folder of this test (each test runs in its own process). */
static const char *log_dir(void)
{
	static char dir[64];
	snprintf(dir, sizeof(dir), "/tmp/rv-sched-logs-%d", (int)getpid());
	return dir;
}

/* Free the backend and the test's log folder. */
static void finish(struct sched *s)
{
	sched_free(s);
	DIR *d = opendir(log_dir());
	for (struct dirent *e; d && (e = readdir(d));) {
		char p[400];
		snprintf(p, sizeof(p), "%s/%s", log_dir(), e->d_name);
		if (e->d_name[0] != '.')
			unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(log_dir());
}

/* A backend with cgroup limits, or NULL when this machine cannot give one
 * (a failure of test under CI=true, a counted skip otherwise). */
#define cgroup_backend() cgroup_backend_for(__func__)
static struct sched *cgroup_backend_for(const char *test)
{
	struct rv_err err = { 0 };
	/* The nodes' output goes to <log_dir>/<name>.log, not into ours. */
	mkdir(log_dir(), 0700);
	struct sched_local_opts o = { .job = "check", .log_dir = log_dir() };
	struct sched *s = geteuid() == 0 ? sched_local_new(&o, &err) : NULL;
	const char *why = geteuid() == 0 ? "" : "not root";
	enum sched_local_mode m = s ? sched_local_mode(s, &why) : SCHED_LOCAL_NONE;
	if (s && (m == SCHED_LOCAL_CGROUP1 || m == SCHED_LOCAL_CGROUP2))
		return s;
	sched_free(s);
	rv_test_skip(test, true, "no writable cgroup for the local backend: %s %s", why, err.msg);
	return NULL;
}

/* The next event within ms, or a failure. */
static struct sched_event next(struct sched *s, int ms)
{
	struct sched_event ev;
	int64_t until = rv_mono_ms() + ms;
	for (;;) {
		int r = sched_next_event(s, &ev);
		ck_assert_int_ge(r, 0);
		if (r == 1)
			return ev;
		int left = (int)(until - rv_mono_ms());
		ck_assert_msg(left > 0, "no event within %d ms", ms);
		struct pollfd pf = { .fd = sched_fd(s), .events = POLLIN };
		poll(&pf, 1, left);
	}
}

static void launch(struct sched *s, const char *name, int rank, struct sched_resources res,
		   const char *const *argv)
{
	struct sched_node_spec sp = { .name = name,
				      .role = "worker",
				      .rank = rank,
				      .host = "local",
				      .res = res,
				      .argv = argv };
	struct rv_err err = { 0 };
	ck_assert_msg(sched_launch(s, &sp, &err) == 0, "%s", err.msg);
}

static void expect_started(struct sched *s)
{
	struct sched_event ev = next(s, 5000);
	ck_assert_msg(ev.type == SCHED_EV_STARTED, "%s %s: %s", ev.name, sched_event_name(ev.type),
		      ev.detail);
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

START_TEST(test_exit_codes_and_signals)
{
	struct sched *s = cgroup_backend();
	if (!s)
		return;
	char parent[512];
	snprintf(parent, sizeof(parent), "%s", sched_local_cgroup(s));
	ck_assert(exists(parent));
	const char *ok[] = { "sh", "-c", "echo out; echo err >&2", NULL };
	const char *three[] = { "sh", "-c", "exit 3", NULL };
	const char *sig[] = { "sh", "-c", "kill -USR1 $$", NULL };
	const char *nope[] = { "/nonexistent/rover-run", NULL };
	struct sched_resources r = { 1, 64, 0 };
	/* A launch into a fresh slot leaves our fds alone (it once closed fd 0). */
	int zero = fcntl(0, F_GETFD);
	launch(s, "n0", 0, r, ok);
	launch(s, "n1", 1, r, three);
	launch(s, "n2", 2, r, sig);
	launch(s, "n3", 3, r, nope);
	int seen = 0;
	while (seen != 0x7f) {
		struct sched_event ev = next(s, 5000);
		int i = ev.name[1] - '0';
		if (ev.type == SCHED_EV_STARTED) {
			ck_assert_int_ne(i, 3);
			seen |= 1 << i;
			continue;
		}
		if (i == 3) {
			ck_assert_int_eq(ev.type, SCHED_EV_FAILED);
			ck_assert_int_eq(ev.err, -ENOENT);
			ck_assert_msg(strstr(ev.detail, "rover-run"), "%s", ev.detail);
			seen |= 1 << 6;
			continue;
		}
		ck_assert_msg(ev.type == SCHED_EV_EXITED, "%s %s: %s", ev.name,
			      sched_event_name(ev.type), ev.detail);
		ck_assert_int_eq(ev.rank, i);
		ck_assert(!ev.removed);
		if (i == 0)
			ck_assert(ev.exit_code == 0 && ev.signal == 0);
		if (i == 1)
			ck_assert(ev.exit_code == 3 && ev.signal == 0);
		if (i == 2)
			ck_assert(ev.exit_code == -1 && ev.signal == SIGUSR1);
		seen |= 1 << (3 + i);
	}
	ck_assert_int_eq(fcntl(0, F_GETFD), zero);
	/* Its output went to its log file: stdout and stderr, in order. */
	char logf[128], text[64] = "";
	snprintf(logf, sizeof(logf), "%s/n0.log", log_dir());
	int fd = open(logf, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(read(fd, text, sizeof(text) - 1), 8);
	close(fd);
	ck_assert_str_eq(text, "out\nerr\n");
	/* Each node's cgroup went with it; the parent goes at free. */
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/n1", parent);
	ck_assert(!exists(dir));
	finish(s);
	ck_assert_msg(!exists(parent), "%s left behind", parent);
}
END_TEST

/* 80 MiB held by tail (a line without end) under a 64 MiB limit: OOM.  The
 * node policy relaunches it with 96 MiB, where it fits and exits 0. */
START_TEST(test_oom_relaunched_with_more_memory)
{
	struct sched *s = cgroup_backend();
	if (!s)
		return;
	struct nodes_alg_oom alg;
	rv_alg_params_default(&alg.p);
	memset(&alg.lim, 0, sizeof(alg.lim));
	alg.lim.free_memory_mb = -1;
	alg.lim.free_cpu = -1;
	struct nodes *m = nodes_new(NULL, nodes_alg_oom_plan, &alg, NULL);
	const char *argv[] = { "sh", "-c", "head -c 80M /dev/zero | tail >/dev/null", NULL };
	struct sched_resources r = { 0, 64, 0 };
	ck_assert_int_eq(nodes_add(m, "big", "worker", 0, "local", &r), 0);
	launch(s, "big", 0, r, argv);
	struct sched_event ev = next(s, 5000);
	ck_assert_int_eq(ev.type, SCHED_EV_STARTED);
	struct nodes_action a;
	ck_assert_int_eq(nodes_on_event(m, &ev, &a), 0);
	ev = next(s, 20000);
	ck_assert_msg(ev.type == SCHED_EV_OOM, "%s: %s", sched_event_name(ev.type), ev.detail);
	ck_assert_int_eq(ev.memory_limit_mb, 64);
	ck_assert_int_ge(ev.peak_memory_mb, 60);
	ck_assert_int_eq(nodes_on_event(m, &ev, &a), 0);
	ck_assert_int_eq(a.type, NODES_RELAUNCH);
	ck_assert_int_eq(a.rank, 0);
	ck_assert_int_eq(a.res.memory_mb, 128); /* x2 */
	launch(s, a.name, a.rank, a.res, argv);
	ev = next(s, 5000);
	ck_assert_int_eq(ev.type, SCHED_EV_STARTED);
	ck_assert_int_eq(nodes_on_event(m, &ev, &a), 0);
	ev = next(s, 20000);
	ck_assert_msg(ev.type == SCHED_EV_EXITED && ev.exit_code == 0, "%s: %s",
		      sched_event_name(ev.type), ev.detail);
	ck_assert_str_eq(ev.name, "big.1");
	ck_assert_int_eq(nodes_on_event(m, &ev, &a), 0);
	struct nodes_status st;
	nodes_status(m, &st);
	ck_assert_int_eq(st.state, NODES_JOB_SUCCEEDED);
	ck_assert_int_eq(st.oom_relaunches, 1);
	nodes_free(m);
	finish(s);
}
END_TEST

/* A busy loop under a 0.2-core quota: throttled, and about 0.2 s of CPU per
 * second; then removed without grace. */
START_TEST(test_cpu_quota_throttles)
{
	struct sched *s = cgroup_backend();
	if (!s)
		return;
	const char *argv[] = { "sh", "-c", "while :; do :; done", NULL };
	launch(s, "spin", 0, (struct sched_resources){ 0.2, 64, 0 }, argv);
	expect_started(s);
	/* A second at least; on a busy machine the loop may get its first
	 * 0.2 s of CPU (and so its first throttled period) later: up to 10 s.
	 * The throttled count can be read a moment before the throttled time
	 * (still 0), so both are waited for. */
	int64_t t0 = rv_mono_ms();
	struct sched_usage u;
	do {
		usleep(200000);
		ck_assert_int_eq(sched_usage(s, "spin", &u), 0);
	} while (rv_mono_ms() - t0 < 10000 &&
		 (rv_mono_ms() - t0 < 1000 || u.nr_throttled == 0 || u.throttled_usec == 0 ||
		  (u.cpu_seconds >= 0 && u.cpu_seconds <= 0.05)));
	double secs = (double)(rv_mono_ms() - t0) / 1000;
	ck_assert_msg(u.nr_throttled > 0 && u.throttled_usec > 0 && u.nr_periods >= u.nr_throttled,
		      "periods %lld throttled %lld for %lld us", (long long)u.nr_periods,
		      (long long)u.nr_throttled, (long long)u.throttled_usec);
	ck_assert_int_gt(u.memory_bytes, 0);
	if (u.cpu_seconds >= 0) /* v1 without cpuacct cannot say */
		ck_assert_msg(u.cpu_seconds > 0.05 && u.cpu_seconds < 0.2 * secs + 0.15,
			      "%.3f s of CPU in %.3f s under 0.2 cores", u.cpu_seconds, secs);
	/* Raise the quota live: throttling stops growing as fast. */
	struct rv_err err = { 0 };
	ck_assert_msg(sched_resize(s, "spin", &(struct sched_resources){ 2, 128, 0 }, &err) == 0,
		      "%s", err.msg);
	/* The new memory limit is in force in the node's cgroup. */
	char limf[700], lim[64] = "";
	snprintf(limf, sizeof(limf), "%s/%s", sched_local_node_cgroup(s, "spin"),
		 sched_local_mode(s, NULL) == SCHED_LOCAL_CGROUP2 ? "memory.max"
								  : "memory.limit_in_bytes");
	int fd = open(limf, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(read(fd, lim, sizeof(lim) - 1), 0);
	close(fd);
	ck_assert_str_eq(lim, "134217728\n");
	ck_assert_int_eq(sched_remove(s, "spin", 0), 0);
	struct sched_event ev = next(s, 5000);
	ck_assert_int_eq(ev.type, SCHED_EV_EXITED);
	ck_assert(ev.removed);
	ck_assert_int_eq(ev.signal, SIGKILL);
	ck_assert_int_eq(sched_remove(s, "spin", 0), -ENOENT);
	finish(s);
}
END_TEST

/* The node and its background child ignore SIGTERM: after the grace, the
 * whole group is killed, the child included. */
START_TEST(test_remove_with_grace_stops_group)
{
	struct sched *s = cgroup_backend();
	if (!s)
		return;
	char dir[] = "/tmp/rv-sched-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char script[256], pidf[64];
	snprintf(pidf, sizeof(pidf), "%s/pid", dir);
	snprintf(script, sizeof(script),
		 "trap '' TERM; sleep 60 & echo $! > %s.tmp; mv %s.tmp %s; wait; wait", pidf, pidf,
		 pidf);
	const char *argv[] = { "sh", "-c", script, NULL };
	launch(s, "stubborn", 0, (struct sched_resources){ 0, 0, 0 }, argv);
	expect_started(s);
	char cg[512];
	snprintf(cg, sizeof(cg), "%s", sched_local_node_cgroup(s, "stubborn"));
	ck_assert(exists(cg));
	pid_t child = 0;
	for (int i = 0; i < 500 && !child; i++) {
		FILE *f = fopen(pidf, "r");
		if (f) {
			int v = 0;
			if (fscanf(f, "%d", &v) == 1)
				child = v;
			fclose(f);
		}
		if (!child)
			usleep(10000);
	}
	ck_assert_int_gt(child, 0);
	int64_t t0 = rv_mono_ms();
	ck_assert_int_eq(sched_remove(s, "stubborn", 300), 0);
	struct sched_event ev = next(s, 5000);
	int64_t took = rv_mono_ms() - t0;
	ck_assert_int_eq(ev.type, SCHED_EV_EXITED);
	ck_assert(ev.removed);
	ck_assert_int_eq(ev.signal, SIGKILL); /* TERM was ignored */
	ck_assert_msg(took >= 280 && took < 3000, "stopped after %lld ms", (long long)took);
	/* The child is gone (or a zombie nobody of ours waits for). */
	char stat[64], buf[256] = "";
	snprintf(stat, sizeof(stat), "/proc/%d/stat", (int)child);
	FILE *f = fopen(stat, "r");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
		const char *st = strrchr(buf, ')');
		ck_assert_msg(st && st[2] == 'Z', "child %d still runs: %s", (int)child, buf);
	}
	ck_assert_msg(!exists(cg), "%s left behind", cg);
	unlink(pidf);
	rmdir(dir);
	finish(s);
}
END_TEST

/* Detection: v2 without its controllers is unusable and says why; AUTO then
 * takes v1; a forced mode that cannot work fails the constructor. */
START_TEST(test_detection_and_fallback)
{
	struct sched *s = cgroup_backend();
	if (!s)
		return;
	/* What a master killed earlier left behind is swept by the next one
	 * of the same job: a parent named after a dead pid, with a node. */
	struct rv_proc p;
	const char *tr[] = { "true", NULL };
	ck_assert_int_eq(rv_proc_spawn(&p, &(struct rv_proc_opts){ .argv = tr }), 0);
	pid_t dead = p.pid;
	ck_assert_int_eq(rv_proc_wait(&p, 5000, NULL), 0);
	rv_proc_release(&p);
	char stale[600], node[700];
	snprintf(stale, sizeof(stale), "%s", sched_local_cgroup(s));
	snprintf(strrchr(stale, '/') + 1, 64, "check-%d", (int)dead);
	snprintf(node, sizeof(node), "%s/n0", stale);
	ck_assert_int_eq(mkdir(stale, 0755), 0);
	ck_assert_int_eq(mkdir(node, 0755), 0);
	struct sched *again = cgroup_backend();
	ck_assert_msg(!exists(stale), "%s not swept", stale);
	sched_free(again);

	const char *w = NULL;
	enum sched_local_mode m = sched_local_mode(s, &w);
	char why[1024];
	snprintf(why, sizeof(why), "%s", w);
	sched_free(s);
	struct rv_err err = { 0 };
	struct sched_local_opts o = { .job = "check", .mode = SCHED_LOCAL_CGROUP2 };
	struct sched *v2 = sched_local_new(&o, &err);
	if (m == SCHED_LOCAL_CGROUP1) {
		/* AUTO passed over v2: it must have said why, and forcing it fails. */
		ck_assert_msg(strstr(why, "cgroup v2") && !strstr(why, "; ;") &&
				      why[strlen(why) - 1] != ' ',
			      "%s", why);
		ck_assert_ptr_null(v2);
		ck_assert_int_eq(err.code, -EOPNOTSUPP);
		ck_assert_msg(strstr(err.msg, "cgroup v2") && strstr(err.msg, "cgroup2"), "%s",
			      err.msg);
	} else {
		ck_assert_ptr_nonnull(v2);
	}
	sched_free(v2);
	o.mode = SCHED_LOCAL_RLIMIT;
	o.log_dir = log_dir();
	struct sched *rl = sched_local_new(&o, &err);
	ck_assert_ptr_nonnull(rl);
	ck_assert_int_eq(sched_local_mode(rl, &w), SCHED_LOCAL_RLIMIT);
	ck_assert_msg(strstr(w, "RLIMIT_AS"), "%s", w);
	ck_assert_str_eq(sched_local_cgroup(rl), "");
	/* RLIMIT_AS in force: a 64 MiB address space cannot hold 128 MiB. */
	const char *argv[] = { "sh", "-c", "head -c 128M /dev/zero | tail >/dev/null", NULL };
	launch(rl, "capped", 0, (struct sched_resources){ 0, 64, 0 }, argv);
	expect_started(rl);
	struct sched_event ev = next(rl, 20000);
	ck_assert_int_eq(ev.type, SCHED_EV_EXITED);
	ck_assert_int_ne(ev.exit_code, 0);
	struct rv_err e2 = { 0 };
	ck_assert_int_eq(sched_resize(rl, "capped", &(struct sched_resources){ 1, 1, 0 }, &e2),
			 -ENOENT);
	finish(rl);
}
END_TEST

/* limits none enforces nothing: a resize is taken as is (the node keeps
 * running, no relaunch), where rlimit cannot change a live node. */
START_TEST(test_resize_without_limits)
{
	struct rv_err err = { 0 };
	struct sched_local_opts o = { .job = "check",
				      .mode = SCHED_LOCAL_NONE,
				      .log_dir = log_dir() };
	mkdir(log_dir(), 0700);
	struct sched *s = sched_local_new(&o, &err);
	ck_assert_msg(s != NULL, "%s", err.msg);
	const char *argv[] = { "sleep", "30", NULL };
	launch(s, "free", 0, (struct sched_resources){ 1, 64, 0 }, argv);
	expect_started(s);
	ck_assert_int_eq(sched_resize(s, "free", &(struct sched_resources){ 2, 128, 0 }, &err), 0);
	ck_assert_int_eq(sched_remove(s, "free", 0), 0);
	struct sched_event ev = next(s, 5000);
	ck_assert_int_eq(ev.type, SCHED_EV_EXITED);
	ck_assert_int_eq(ev.signal, SIGKILL);
	finish(s);

	o.mode = SCHED_LOCAL_RLIMIT;
	mkdir(log_dir(), 0700);
	struct sched *rl = sched_local_new(&o, &err);
	ck_assert_ptr_nonnull(rl);
	launch(rl, "capped", 0, (struct sched_resources){ 1, 64, 0 }, argv);
	expect_started(rl);
	ck_assert_int_eq(sched_resize(rl, "capped", &(struct sched_resources){ 2, 128, 0 }, &err),
			 -EOPNOTSUPP);
	ck_assert_int_eq(sched_remove(rl, "capped", 0), 0);
	finish(rl);
}
END_TEST

RV_TEST_MAIN_TCASE("sched_local", "sched_local", 60, test_exit_codes_and_signals,
		   test_oom_relaunched_with_more_memory, test_cpu_quota_throttles,
		   test_remove_with_grace_stops_group, test_detection_and_fallback,
		   test_resize_without_limits)
