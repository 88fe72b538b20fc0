/*
 * check_proc.c: the spawn helper of common/proc.c with real processes: exit
 * codes and signals come back, a missing program is -ENOENT from the spawn
 * itself, a timeout kills, a stop reaches the whole process group, the death
 * signal fires when the spawner dies, no fd of ours leaks into the child, the
 * child starts with no blocked or ignored signal, output is captured.
 *
 * The test binary doubles as a helper: "check_proc orphan <deathsig>" spawns
 * `sleep 30` with that death signal, prints its pid and exits.
 */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include "parse.h"
#include "proc.h"
#include "testutil.h"

/* Run argv, capturing stdout+stderr into out; asserts it ran and exited. */
static int run_capture(const char *const *argv, struct rv_buf *out)
{
	struct rv_proc_opts o = { .argv = argv };
	int st = -1;
	int r = rv_proc_run(&o, 10000, &st, out);
	ck_assert_msg(r == 0, "run %s: %s", argv[0], strerror(-r));
	ck_assert_msg(WIFEXITED(st), "%s did not exit: status %d", argv[0], st);
	return WEXITSTATUS(st);
}

/* Read one line from fd (up to size-1 bytes), within 5 s. */
static void read_line(int fd, char *buf, size_t size)
{
	size_t n = 0;
	int64_t until = rv_mono_ms() + 5000;
	while (n + 1 < size && rv_mono_ms() < until) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, 100) <= 0)
			continue;
		ssize_t k = read(fd, buf + n, 1);
		if (k <= 0)
			break;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = 0;
	ck_assert_msg(n > 0, "no line from the child");
}

/* As a subreaper, orphans of ours come back to us: reap them and say whether
 * pid is gone within ms (its wait status in *st when we reaped it). */
static bool gone_within(pid_t pid, int ms, int *st)
{
	int64_t until = rv_mono_ms() + ms;
	*st = -1;
	while (rv_mono_ms() < until) {
		int s;
		pid_t w;
		while ((w = waitpid(-1, &s, WNOHANG)) > 0)
			if (w == pid)
				*st = s;
		if (kill(pid, 0) < 0 && errno == ESRCH)
			return true;
		usleep(10000);
	}
	return false;
}

START_TEST(test_exit_codes)
{
	const char *ok[] = { "true", NULL };
	const char *seven[] = { "sh", "-c", "exit 7", NULL };
	ck_assert_int_eq(run_capture(ok, NULL), 0);
	ck_assert_int_eq(run_capture(seven, NULL), 7);

	/* A wait after the reap gives the same status; the pid is forgotten. */
	struct rv_proc p;
	struct rv_proc_opts o = { .argv = seven };
	ck_assert_int_eq(rv_proc_spawn(&p, &o), 0);
	ck_assert_int_gt(p.pid, 0);
	int st = 0;
	ck_assert_int_eq(rv_proc_wait(&p, 5000, &st), 0);
	ck_assert_int_eq(WEXITSTATUS(st), 7);
	ck_assert_int_eq(p.pid, 0);
	ck_assert_int_eq(p.pidfd, -1);
	st = 0;
	ck_assert_int_eq(rv_proc_wait(&p, 0, &st), 0);
	ck_assert_int_eq(WEXITSTATUS(st), 7);
	ck_assert_int_eq(rv_proc_kill(&p, SIGTERM), -ESRCH);
	rv_proc_release(&p);
	rv_proc_release(&p);
}
END_TEST

START_TEST(test_reaped_elsewhere)
{
	/* Someone else's waitpid(-1) took our child: the wait says so, and the
	 * number, no longer ours, is never signalled. */
	const char *argv[] = { "true", NULL };
	struct rv_proc_opts o = { .argv = argv };
	struct rv_proc p;
	ck_assert_int_eq(rv_proc_spawn(&p, &o), 0);
	pid_t pid = p.pid;
	ck_assert_int_eq(waitpid(-1, NULL, 0), pid);
	ck_assert_int_eq(rv_proc_wait(&p, 1000, NULL), -ECHILD);
	ck_assert_int_eq(p.pid, 0);
	ck_assert_int_eq(rv_proc_kill(&p, SIGKILL), -ESRCH);
	ck_assert_int_eq(rv_proc_wait(&p, 0, NULL), -ECHILD);
	ck_assert_int_eq(rv_proc_stop(&p, 100, NULL), -ECHILD);
	rv_proc_release(&p);
}
END_TEST

START_TEST(test_signal_status)
{
	const char *argv[] = { "sh", "-c", "kill -USR1 $$; sleep 5", NULL };
	struct rv_proc_opts o = { .argv = argv };
	int st = 0;
	ck_assert_int_eq(rv_proc_run(&o, 5000, &st, NULL), 0);
	ck_assert(WIFSIGNALED(st));
	ck_assert_int_eq(WTERMSIG(st), SIGUSR1);
}
END_TEST

START_TEST(test_exec_failure_errno)
{
	struct rv_proc p;
	const char *abs[] = { "/nonexistent/rover-prog", NULL };
	struct rv_proc_opts o = { .argv = abs };
	ck_assert_int_eq(rv_proc_spawn(&p, &o), -ENOENT);
	ck_assert_int_eq(p.pid, 0);
	ck_assert_int_eq(p.pidfd, -1);

	const char *path[] = { "rover-no-such-command", NULL };
	o.argv = path;
	ck_assert_int_eq(rv_proc_spawn(&p, &o), -ENOENT);
	ck_assert_int_eq(rv_proc_run(&o, 1000, NULL, NULL), -ENOENT);

	/* Not executable: -EACCES. */
	char tmpl[] = "/tmp/rover-proc-XXXXXX";
	int fd = mkstemp(tmpl);
	ck_assert_int_ge(fd, 0);
	close(fd);
	chmod(tmpl, 0600);
	const char *noexec[] = { tmpl, NULL };
	o.argv = noexec;
	int r = rv_proc_spawn(&p, &o);
	unlink(tmpl);
	/* root may exec anything with an x bit; none is set here */
	ck_assert_int_eq(r, -EACCES);

	/* What fails before exec comes back the same way. */
	const char *ok[] = { "true", NULL };
	o.argv = ok;
	o.cwd = "/nonexistent/dir";
	ck_assert_int_eq(rv_proc_spawn(&p, &o), -ENOENT);

	struct rv_proc_opts bad = { .argv = ok, .nkeep = 1, .keep_fds = { 1 } };
	ck_assert_int_eq(rv_proc_spawn(&p, &bad), -EINVAL);
	ck_assert_int_eq(rv_proc_spawn(&p, &(struct rv_proc_opts){ 0 }), -EINVAL);

	/* No child left behind by any of these. */
	ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
	ck_assert_int_eq(errno, ECHILD);
}
END_TEST

START_TEST(test_timeout_kills)
{
	const char *argv[] = { "sleep", "30", NULL };
	struct rv_proc_opts o = { .argv = argv };
	int st = 0;
	int64_t t0 = rv_mono_ms();
	ck_assert_int_eq(rv_proc_run(&o, 300, &st, NULL), -ETIMEDOUT);
	int64_t took = rv_mono_ms() - t0;
	ck_assert_msg(took >= 250 && took < 5000, "took %lld ms", (long long)took);
	ck_assert(WIFSIGNALED(st));
	ck_assert_int_eq(WTERMSIG(st), SIGKILL);

	/* A wait that times out leaves it running; a stop then ends it. */
	struct rv_proc p;
	ck_assert_int_eq(rv_proc_spawn(&p, &o), 0);
	ck_assert_int_eq(rv_proc_wait(&p, 0, &st), -ETIMEDOUT);
	ck_assert_int_eq(rv_proc_wait(&p, 100, &st), -ETIMEDOUT);
	ck_assert_int_eq(kill(p.pid, 0), 0);
	ck_assert_int_eq(rv_proc_stop(&p, 5000, &st), 0);
	ck_assert(WIFSIGNALED(st));
	ck_assert_int_eq(WTERMSIG(st), SIGTERM);
	rv_proc_release(&p);
}
END_TEST

START_TEST(test_stop_escalates_to_kill)
{
	/* SIG_IGN survives exec, so sleep ignores SIGTERM as the shell does. */
	const char *argv[] = { "sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done",
			       NULL };
	struct rv_proc_opts o = { .argv = argv, .io[1] = { RV_PROC_PIPE } };
	struct rv_proc p;
	ck_assert_int_eq(rv_proc_spawn(&p, &o), 0);
	char line[64];
	read_line(p.fd[1], line, sizeof(line));
	ck_assert_str_eq(line, "ready");
	int st = 0;
	int64_t t0 = rv_mono_ms();
	ck_assert_int_eq(rv_proc_stop(&p, 300, &st), -ETIMEDOUT);
	ck_assert(rv_mono_ms() - t0 >= 250);
	ck_assert(WIFSIGNALED(st));
	ck_assert_int_eq(WTERMSIG(st), SIGKILL);
	rv_proc_release(&p);
}
END_TEST

START_TEST(test_group_kill_reaches_grandchild)
{
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	const char *argv[] = { "sh", "-c", "sleep 30 & echo $!; wait", NULL };
	struct rv_proc_opts o = { .argv = argv, .io[1] = { RV_PROC_PIPE } };
	struct rv_proc p;
	ck_assert_int_eq(rv_proc_spawn(&p, &o), 0);
	char line[64];
	read_line(p.fd[1], line, sizeof(line));
	pid_t grandchild = (pid_t)atoi(line);
	ck_assert_int_gt(grandchild, 0);
	ck_assert_int_eq(getpgid(grandchild), p.pgid);
	ck_assert_int_eq(rv_proc_stop(&p, 5000, NULL), 0);
	int st;
	ck_assert_msg(gone_within(grandchild, 3000, &st), "grandchild %d outlived the stop",
		      (int)grandchild);
	rv_proc_release(&p);
}
END_TEST

START_TEST(test_same_group_kill_spares_grandchild)
{
	/* The control for the test above: without a group of its own only the
	 * leader is signalled, and the grandchild lives on. */
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	const char *argv[] = { "sh", "-c", "sleep 30 & echo $!; wait", NULL };
	struct rv_proc_opts o = { .argv = argv,
				  .io[1] = { RV_PROC_PIPE },
				  .group = RV_PROC_SAME_GROUP };
	struct rv_proc p;
	ck_assert_int_eq(rv_proc_spawn(&p, &o), 0);
	ck_assert_int_eq(p.pgid, 0);
	char line[64];
	read_line(p.fd[1], line, sizeof(line));
	pid_t grandchild = (pid_t)atoi(line);
	ck_assert_int_eq(rv_proc_stop(&p, 5000, NULL), 0);
	int st;
	ck_assert(!gone_within(grandchild, 300, &st));
	kill(grandchild, SIGKILL);
	ck_assert(gone_within(grandchild, 3000, &st));
	rv_proc_release(&p);
}
END_TEST

/* Spawn the helper mode of this binary; returns the orphan's pid. */
static pid_t spawn_orphan(const char *deathsig)
{
	const char *argv[] = { "/proc/self/exe", "orphan", deathsig, NULL };
	struct rv_buf out;
	rv_buf_init(&out);
	ck_assert_int_eq(run_capture(argv, &out), 0);
	pid_t pid = (pid_t)atoi(out.data ? out.data : "0");
	rv_buf_release(&out);
	ck_assert_int_gt(pid, 0);
	return pid;
}

START_TEST(test_pdeathsig)
{
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	int st;
	pid_t orphan = spawn_orphan("9");
	ck_assert_msg(gone_within(orphan, 3000, &st), "child outlived its parent");
	ck_assert(WIFSIGNALED(st));
	ck_assert_int_eq(WTERMSIG(st), SIGKILL);

	/* Without a death signal it outlives its parent. */
	orphan = spawn_orphan("0");
	ck_assert(!gone_within(orphan, 300, &st));
	kill(orphan, SIGKILL);
	ck_assert(gone_within(orphan, 3000, &st));
}
END_TEST

/* The first child after unshare(CLONE_NEWPID) is pid 1 of the new
 * namespace, where getppid() says 0 whether the parent lives or not: a
 * death signal still starts it (the parent is checked through a pidfd). */
START_TEST(test_pdeathsig_pid1_of_a_new_namespace)
{
	if (unshare(CLONE_NEWPID) < 0 && unshare(CLONE_NEWUSER | CLONE_NEWPID) < 0) {
		fprintf(stderr, "no PID namespace here (%s): not tested\n", strerror(errno));
		return;
	}
	const char *argv[] = { "sh", "-c", "echo $$ $PPID", NULL };
	struct rv_proc_opts o = { .argv = argv, .pdeathsig = SIGKILL };
	struct rv_buf out = { 0 };
	int st = -1;
	ck_assert_int_eq(rv_proc_run(&o, 5000, &st, &out), 0);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert_str_eq(out.data ? out.data : "", "1 0\n");
	rv_buf_release(&out);
}
END_TEST

static int count_fds_once(pid_t pid, int *has)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.') {
			n++;
			if (has && atoi(de->d_name) == *has)
				*has = -1;
		}
	closedir(d);
	return n;
}

/* The child's open fds once it settles at want (sleep opens and closes
 * locale files while it starts); a leaked fd stays, so the count stays above. */
static int count_fds(pid_t pid, int want, int *has)
{
	int keep = has ? *has : 0, n = 0;
	for (int i = 0; i < 200; i++) {
		if (has)
			*has = keep;
		n = count_fds_once(pid, has);
		if (n == want)
			break;
		usleep(10000);
	}
	return n;
}

START_TEST(test_no_fd_leaks)
{
	/* fds of ours without close-on-exec, as a careless library leaves them */
	int leak[4];
	for (int i = 0; i < 3; i++) {
		leak[i] = open("/dev/null", O_RDONLY);
		ck_assert_int_ge(leak[i], 3);
	}
	leak[3] = dup(leak[0]);
	const char *argv[] = { "sleep", "30", NULL };
	struct rv_proc_opts o = { .argv = argv,
				  .io[0] = { RV_PROC_NULL },
				  .io[1] = { RV_PROC_PIPE },
				  .io[2] = { RV_PROC_STDOUT } };
	struct rv_proc p;
	ck_assert_int_eq(rv_proc_spawn(&p, &o), 0);
	ck_assert_int_eq(count_fds(p.pid, 3, NULL), 3);
	ck_assert_int_eq(rv_proc_stop(&p, 2000, NULL), 0);
	rv_proc_release(&p);

	/* An fd asked for is kept under its number. */
	o.keep_fds[0] = leak[2];
	o.nkeep = 1;
	ck_assert_int_eq(fcntl(leak[2], F_SETFD, FD_CLOEXEC), 0);
	ck_assert_int_eq(rv_proc_spawn(&p, &o), 0);
	int has = leak[2];
	ck_assert_int_eq(count_fds(p.pid, 4, &has), 4);
	ck_assert_int_eq(has, -1);
	ck_assert_int_eq(rv_proc_stop(&p, 2000, NULL), 0);
	rv_proc_release(&p);
	for (int i = 0; i < 4; i++)
		close(leak[i]);
}
END_TEST

static void on_term(int sig)
{
	(void)sig;
}

START_TEST(test_child_signal_state_reset)
{
	/* A parent that blocks, ignores and handles signals (as daemons do). */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGHUP);
	ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, &set, NULL), 0);
	signal(SIGUSR2, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_term);
	const char *argv[] = { "cat", "/proc/self/status", NULL };
	struct rv_buf out;
	rv_buf_init(&out);
	ck_assert_int_eq(run_capture(argv, &out), 0);
	ck_assert_msg(strstr(out.data, "\nSigBlk:\t0000000000000000\n"), "%s", out.data);
	/* Ignored: only 1..31 are reset (glibc keeps real-time signals for
	 * itself; whoever started us may have set those). */
	const char *ign = strstr(out.data, "\nSigIgn:\t");
	ck_assert_ptr_nonnull(ign);
	unsigned long long bits = strtoull(ign + strlen("\nSigIgn:\t"), NULL, 16);
	ck_assert_msg((bits & 0x7fffffffULL) == 0, "ignored in the child: %llx", bits);
	rv_buf_release(&out);
}
END_TEST

START_TEST(test_output_capture)
{
	const char *argv[] = { "sh", "-c", "echo out; echo err >&2; exit 3", NULL };
	struct rv_buf out;
	rv_buf_init(&out);
	ck_assert_int_eq(run_capture(argv, &out), 3);
	ck_assert_str_eq(out.data, "out\nerr\n");
	rv_buf_release(&out);

	/* Long output: the first MiB kept, the rest read so the child finishes. */
	const char *big[] = { "head", "-c", "3000000", "/dev/zero", NULL };
	ck_assert_int_eq(run_capture(big, &out), 0);
	ck_assert_uint_eq(out.len, 1u << 20);
	rv_buf_release(&out);

	/* Pipes on both ends. */
	const char *cat[] = { "cat", NULL };
	struct rv_proc_opts o = { .argv = cat,
				  .io[0] = { RV_PROC_PIPE },
				  .io[1] = { RV_PROC_PIPE } };
	struct rv_proc p;
	ck_assert_int_eq(rv_proc_spawn(&p, &o), 0);
	ck_assert_int_eq(write(p.fd[0], "hello\n", 6), 6);
	rv_proc_close_fd(&p, 0);
	char line[32];
	read_line(p.fd[1], line, sizeof(line));
	ck_assert_str_eq(line, "hello");
	int st;
	ck_assert_int_eq(rv_proc_wait(&p, 5000, &st), 0);
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	rv_proc_release(&p);

	/* Output to a file of the caller's. */
	char tmpl[] = "/tmp/rover-proc-XXXXXX";
	int fd = mkstemp(tmpl);
	ck_assert_int_ge(fd, 0);
	struct rv_proc_opts f = { .argv = argv,
				  .io[1] = { RV_PROC_FD, fd },
				  .io[2] = { RV_PROC_NULL } };
	ck_assert_int_eq(rv_proc_run(&f, 5000, &st, NULL), 0);
	char text[64] = { 0 };
	ck_assert_int_eq(pread(fd, text, sizeof(text) - 1, 0), 4);
	ck_assert_str_eq(text, "out\n");
	close(fd);
	unlink(tmpl);
}
END_TEST

START_TEST(test_env_cwd)
{
	setenv("ROVER_T_GONE", "x", 1);
	const char *argv[] = { "sh", "-c", "echo \"$ROVER_T:${ROVER_T_GONE-unset}:$(pwd)\"", NULL };
	const char *env[] = { "ROVER_T=0", "ROVER_T=1", "ROVER_T_GONE", NULL };
	struct rv_proc_opts o = { .argv = argv, .env = env, .cwd = "/" };
	struct rv_buf out;
	rv_buf_init(&out);
	int st;
	ck_assert_int_eq(rv_proc_run(&o, 5000, &st, &out), 0);
	ck_assert_str_eq(out.data, "1:unset:/\n");
	rv_buf_release(&out);

	/* A whole environment: nothing of ours. */
	const char *envp[] = { "ROVER_T=2", "PATH=/usr/bin:/bin", NULL };
	struct rv_proc_opts w = { .argv = argv, .envp = envp };
	ck_assert_int_eq(rv_proc_run(&w, 5000, &st, &out), 0);
	ck_assert_msg(!strncmp(out.data, "2:unset:", 8), "%s", out.data);
	rv_buf_release(&out);
}
END_TEST

/* The child joins the cgroups it is given before exec: a real v1 memory
 * cgroup where we may make one (root), and always the refusal path: an fd it
 * cannot write fails the spawn with that errno, nothing runs. */
START_TEST(test_cgroup_join_and_rlimit)
{
	const char *argv[] = { "sh", "-c", "ulimit -n; cat /proc/self/cgroup", NULL };
	struct rv_proc_opts o = { .argv = argv, .nrlimit = 1 };
	o.rlimits[0] = (struct rv_proc_rlimit){ RLIMIT_NOFILE, { 77, 77 } };
	char dir[128];
	snprintf(dir, sizeof(dir), "/sys/fs/cgroup/memory/rv-proc-test-%d", (int)getpid());
	bool cg = mkdir(dir, 0755) == 0;
	int fd = -1;
	if (cg) {
		char procs[160];
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
		fd = open(procs, O_WRONLY | O_CLOEXEC);
		ck_assert_int_ge(fd, 3);
		o.cgroup_fds[o.ncgroup++] = fd;
	}
	struct rv_buf out;
	rv_buf_init(&out);
	int st;
	ck_assert_int_eq(rv_proc_run(&o, 5000, &st, &out), 0);
	ck_assert_msg(!strncmp(out.data, "77\n", 3), "%s", out.data);
	if (cg) {
		ck_assert_msg(strstr(out.data, dir + strlen("/sys/fs/cgroup/memory")), "%s",
			      out.data);
		close(fd);
		ck_assert_int_eq(rmdir(dir), 0); /* empty again: the child ran in it */
	}
	rv_buf_release(&out);

	int rd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct rv_proc_opts bad = { .argv = argv, .ncgroup = 1 };
	bad.cgroup_fds[0] = rd;
	struct rv_proc p;
	ck_assert_int_eq(rv_proc_spawn(&p, &bad), -EBADF);
	close(rd);
	bad.cgroup_fds[0] = 1; /* below 3: refused before fork */
	ck_assert_int_eq(rv_proc_spawn(&p, &bad), -EINVAL);
}
END_TEST

START_TEST(test_drop_ids)
{
	const char *argv[] = { "sh", "-c", "echo $(id -u):$(id -g):$(id -G)", NULL };
	struct rv_proc_opts o = {
		.argv = argv, .set_ids = true, .uid = 65534, .gid = 65534, .cwd = "/"
	};
	struct rv_buf out;
	rv_buf_init(&out);
	int st;
	int r = rv_proc_run(&o, 5000, &st, &out);
	if (geteuid() != 0) {
		ck_assert_int_eq(r, -EPERM);
	} else {
		ck_assert_int_eq(r, 0);
		ck_assert_str_eq(out.data, "65534:65534:65534\n");
	}
	rv_buf_release(&out);
}
END_TEST

START_TEST(test_adopt_reparented_orphan)
{
	/* A subreaper gets the orphans below it back: sh starts a background
	 * job, prints its pid and exits; the job is reparented here, adopted,
	 * and its real exit status comes through the pidfd. */
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	const char *argv[] = { "sh", "-c",
			       "(sleep 0.2; exit 7) </dev/null >/dev/null 2>&1 & echo $!", NULL };
	struct rv_buf out = { 0 };
	ck_assert_int_eq(run_capture(argv, &out), 0);
	rv_buf_append(&out, "", 1);
	pid_t pid = (pid_t)strtol(out.data, NULL, 10);
	ck_assert_int_gt(pid, 0);
	rv_buf_release(&out);

	struct rv_proc p;
	ck_assert_int_eq(rv_proc_adopt(&p, pid, 0), 0);
	ck_assert_int_eq(p.pid, pid);
	ck_assert_int_eq(rv_proc_wait(&p, 0, NULL), -ETIMEDOUT);
	int st = -1;
	ck_assert_int_eq(rv_proc_wait(&p, 5000, &st), 0);
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 7);
	rv_proc_release(&p);

	/* Not a child of ours: refused, nothing taken. */
	ck_assert_int_eq(rv_proc_adopt(&p, getppid(), 0), -ECHILD);
	ck_assert_int_eq(p.pid, 0);
	ck_assert_int_eq(p.pidfd, -1);
	ck_assert_int_eq(rv_proc_adopt(&p, pid, 0), -ECHILD); /* reaped: no longer ours */
	ck_assert_int_eq(rv_proc_adopt(&p, 0, 0), -EINVAL);
}
END_TEST

/* An orphan in a session of its own comes back to us as subreaper, with a
 * child of its own: both killed and reaped, none left. */
START_TEST(test_kill_strays)
{
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	const char *argv[] = { "sh", "-c",
			       "setsid sh -c 'sleep 300 & wait' </dev/null >/dev/null 2>&1 & "
			       "echo $!",
			       NULL };
	struct rv_buf out = { 0 };
	ck_assert_int_eq(run_capture(argv, &out), 0);
	pid_t orphan = (pid_t)atoi(out.data ? out.data : "0");
	rv_buf_release(&out);
	ck_assert_int_gt(orphan, 0);
	ck_assert_int_eq(kill(orphan, 0), 0);
	ck_assert_int_eq(rv_proc_kill_strays(5000), 0);
	ck_assert_int_eq(kill(orphan, 0), -1); /* killed and reaped */
	ck_assert_int_eq(rv_proc_reap_strays(NULL, 0), 0);
	DIR *d = opendir("/proc/self/task");
	ck_assert_ptr_nonnull(d);
	for (struct dirent *e; (e = readdir(d));) {
		char path[300], buf[64] = "";
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/children", e->d_name);
		FILE *f = fopen(path, "r");
		ck_assert_ptr_nonnull(f);
		ck_assert_msg(!fgets(buf, sizeof(buf), f), "children left: %s", buf);
		fclose(f);
	}
	closedir(d);
}
END_TEST

START_TEST(test_reap_strays_spares_the_kept)
{
	/* Two orphans come back to us as subreaper, and a child of our own
	 * exits: strays are reaped, ours keeps its status for rv_proc_wait. */
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	const char *mine[] = { "sh", "-c", "exit 5", NULL };
	struct rv_proc_opts o = { .argv = mine };
	struct rv_proc p;
	ck_assert_int_eq(rv_proc_spawn(&p, &o), 0);
	const char *argv[] = { "sh", "-c",
			       "(sleep 0.2; exit 3) </dev/null >/dev/null 2>&1 & a=$!; "
			       "sleep 30 </dev/null >/dev/null 2>&1 & echo $a $!",
			       NULL };
	struct rv_buf out = { 0 };
	ck_assert_int_eq(run_capture(argv, &out), 0);
	long dead = 0, alive = 0;
	ck_assert_int_eq(sscanf(out.data, "%ld %ld", &dead, &alive), 2);
	rv_buf_release(&out);
	/* Both exited children are zombies before we reap (the kept one too). */
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	ck_assert_int_eq(waitid(P_PID, (id_t)p.pid, &si, WEXITED | WNOWAIT), 0);
	/* sh is reaped, so its orphans are ours already: wait for the exit. */
	ck_assert_int_eq(waitid(P_PID, (id_t)dead, &si, WEXITED | WNOWAIT), 0);
	ck_assert_int_eq(rv_proc_reap_strays(&p.pid, 1), 1);
	ck_assert_int_eq(kill((pid_t)dead, 0), -1); /* gone for good */
	ck_assert_int_eq(kill((pid_t)alive, 0), 0); /* running: left alone */
	int st = -1;
	ck_assert_int_eq(rv_proc_wait(&p, 1000, &st), 0);
	ck_assert_int_eq(WEXITSTATUS(st), 5);
	rv_proc_release(&p);
	kill((pid_t)alive, SIGKILL);
	ck_assert_int_eq(waitpid((pid_t)alive, NULL, 0), (pid_t)alive);
	ck_assert_int_eq(rv_proc_reap_strays(NULL, 0), 0);
}
END_TEST

START_TEST(test_exe_relative)
{
	char self[PATH_MAX], out[PATH_MAX];
	rv_test_self_exe(self, sizeof(self));
	const char *name = strrchr(self, '/') + 1;
	const char *const rel[] = { "no-such-file", name, NULL };
	ck_assert_int_eq(rv_proc_exe_relative(out, sizeof(out), rel, X_OK), 0);
	ck_assert_str_eq(out, self); /* the first that exists, made absolute */
	const char *const none[] = { "no-such-file", "../no-such-folder/", NULL };
	ck_assert_int_eq(rv_proc_exe_relative(out, sizeof(out), none, F_OK), -ENOENT);
	ck_assert_int_eq(rv_proc_exe_relative(out, 4, rel, X_OK), -ENAMETOOLONG);
}
END_TEST

static Suite *proc_suite(void)
{
	TCase *tc = RV_TEST_TCASE("proc", 30, test_exit_codes, test_reaped_elsewhere,
				  test_signal_status, test_exec_failure_errno, test_timeout_kills,
				  test_stop_escalates_to_kill, test_group_kill_reaches_grandchild,
				  test_same_group_kill_spares_grandchild, test_pdeathsig,
				  test_pdeathsig_pid1_of_a_new_namespace, test_no_fd_leaks,
				  test_child_signal_state_reset, test_output_capture, test_env_cwd,
				  test_drop_ids, test_cgroup_join_and_rlimit,
				  test_adopt_reparented_orphan, test_reap_strays_spares_the_kept,
				  test_kill_strays, test_exe_relative);
	return RV_TEST_SUITE("proc", tc);
}

/* Helper mode: spawn `sleep 30` with death signal argv[2], print its pid, exit. */
static int orphan_main(const char *deathsig)
{
	const char *argv[] = { "sleep", "30", NULL };
	struct rv_proc_opts o = { .argv = argv,
				  .pdeathsig = atoi(deathsig),
				  .io = { { RV_PROC_NULL }, { RV_PROC_NULL }, { RV_PROC_NULL } } };
	struct rv_proc p;
	if (rv_proc_spawn(&p, &o) < 0)
		return 1;
	printf("%d\n", (int)p.pid);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "orphan"))
		return orphan_main(argv[2]);
	return rv_test_run_suite(proc_suite());
}
