/*
 * pidns.c: the three stages of rover-run around a PID namespace (pidns.h).
 *
 * Each stage is rover-run itself, exec'd again through common/proc with
 * ROVER_RUN_STAGE saying which (ns: make the namespaces; init: pid 1, run
 * the job) and ROVER_RUN_PID the outer stage's pid.  A stage that cannot
 * do its part exits PIDNS_EXIT_NONE before anything of the job started;
 * the outer stage then runs the job itself.  The waits block SIGINT,
 * SIGTERM and SIGCHLD and take them with sigtimedwait(): no handler, no
 * thread, and a signal that came before the wait is still pending.
 */
#include "pidns.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "parse.h"
#include "proc.h"

#define PIDNS_ENV_STAGE "ROVER_RUN_STAGE"
#define PIDNS_ENV_PID   "ROVER_RUN_PID"
/* a stage could not do its part: never a job's code (0, 1, 2, 128+N) */
#define PIDNS_EXIT_NONE 3
#define PIDNS_NONE_MSG                                                                             \
	"no PID namespace for the job: what its workers start may outlive a kill -9 of "           \
	"rover-run"

/* Block SIGINT and SIGTERM (and SIGCHLD when chld), the old mask into *old
 * (may be NULL). */
static void block_signals(bool chld, sigset_t *old)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	if (chld)
		sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, old);
}

/* Write text to path (a /proc/self file of the user namespace). */
static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	int e = n < 0 ? errno : 0;
	close(fd);
	return n < 0 ? -e : n == (ssize_t)strlen(text) ? 0 : -EIO;
}

/* Our uid and gid mapped to themselves in a new user namespace. */
static int map_ids(uid_t uid, gid_t gid, char *why, size_t size)
{
	char line[64];
	int r = write_file("/proc/self/setgroups", "deny");
	if (r < 0 && r != -ENOENT) {
		snprintf(why, size, "could not write setgroups: %s", strerror(-r));
		return r;
	}
	snprintf(line, sizeof(line), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if ((r = write_file("/proc/self/uid_map", line)) < 0) {
		snprintf(why, size, "could not write uid_map: %s", strerror(-r));
		return r;
	}
	snprintf(line, sizeof(line), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if ((r = write_file("/proc/self/gid_map", line)) < 0) {
		snprintf(why, size, "could not write gid_map: %s", strerror(-r));
		return r;
	}
	return 0;
}

/* A new PID namespace for our next child, and a mount namespace whose
 * mounts do not reach the host's (for pid 1's /proc); a new user
 * namespace too when we may not make them in ours. */
static int make_ns(char *why, size_t size)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	if (unshare(CLONE_NEWPID | CLONE_NEWNS) < 0) {
		int e = errno;
		if (unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS) < 0) {
			int eu = errno;
			snprintf(why, size, "unshare: %s; with a user namespace: %s", strerror(e),
				 strerror(eu));
			return -eu;
		}
		int r = map_ids(uid, gid, why, size);
		if (r < 0)
			return r;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0) {
		int e = errno;
		snprintf(why, size, "could not make the mounts private: %s", strerror(e));
		return -e;
	}
	return 0;
}

/* Run this program again as stage, its parent's death its SIGKILL, and
 * wait for it, passing SIGINT and SIGTERM on.  The caller blocked them and
 * SIGCHLD.  Returns 0 with *code its exit code (128+N after signal N), or
 * a negative errno when it could not be started. */
static int stage_spawn_wait(char **argv, const char *stage, pid_t outer, int *code)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -errno;
	exe[n] = 0;
	int argc = 0;
	while (argv[argc])
		argc++;
	const char **av = calloc((size_t)argc + 1, sizeof(*av));
	if (!av)
		return -ENOMEM;
	av[0] = exe;
	for (int i = 1; i < argc; i++)
		av[i] = argv[i];
	char env_stage[64], env_pid[64];
	snprintf(env_stage, sizeof(env_stage), "%s=%s", PIDNS_ENV_STAGE, stage);
	snprintf(env_pid, sizeof(env_pid), "%s=%d", PIDNS_ENV_PID, (int)outer);
	const char *env[] = { env_stage, env_pid, NULL };
	struct rv_proc_opts o = {
		.argv = av, .env = env, .group = RV_PROC_NEW_GROUP, .pdeathsig = SIGKILL
	};
	struct rv_proc p;
	int r = rv_proc_spawn(&p, &o);
	free(av);
	if (r < 0)
		return r;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGCHLD);
	int st = 0; /* SIGCHLD only wakes the wait: rv_proc_wait reaps */
	while ((r = rv_proc_wait(&p, 0, &st)) == -ETIMEDOUT) {
		struct timespec tick = { 1, 0 };
		int sig = sigtimedwait(&set, NULL, &tick);
		if (sig == SIGINT || sig == SIGTERM)
			rv_proc_kill(&p, sig);
	}
	rv_proc_release(&p);
	if (r < 0)
		return r;
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return 0;
}

/* The middle stage: the namespaces, then pid 1 in them. */
static int stage_ns(char **argv, pid_t outer, int *code)
{
	char why[300] = "";
	block_signals(true, NULL);
	int r = make_ns(why, sizeof(why));
	if (r == 0 && (r = stage_spawn_wait(argv, "init", outer, code)) < 0)
		snprintf(why, sizeof(why), "could not start pid 1: %s", strerror(-r));
	if (r < 0) {
		char q[340];
		rv_log_warn(PIDNS_NONE_MSG, "reason=%s", rv_log_q(q, sizeof(q), why));
		*code = PIDNS_EXIT_NONE;
	}
	return 0;
}

/* Pid 1: a /proc of the namespace, and SIGINT/SIGTERM blocked at once (pid
 * 1 never gets a signal it leaves at its default action). */
static int stage_init(int *code)
{
	block_signals(false, NULL);
	char why[160] = "";
	if (getpid() != 1)
		snprintf(why, sizeof(why), "not pid 1 of the new namespace");
	else if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		snprintf(why, sizeof(why), "could not mount /proc: %s", strerror(errno));
	if (!why[0])
		return 1;
	char q[200];
	rv_log_warn(PIDNS_NONE_MSG, "reason=%s", rv_log_q(q, sizeof(q), why));
	*code = PIDNS_EXIT_NONE;
	return 0;
}

int pidns_run(char **argv, pid_t *job_pid, int *code)
{
	const char *stage = getenv(PIDNS_ENV_STAGE);
	const char *pid = getenv(PIDNS_ENV_PID);
	int64_t outer = getpid();
	if (stage && pid && rv_parse_i64(pid, 1, INT32_MAX, &outer) < 0)
		stage = NULL;
	*job_pid = (pid_t)outer;
	*code = 0;
	if (stage && !strcmp(stage, "ns"))
		return stage_ns(argv, (pid_t)outer, code);
	if (stage && !strcmp(stage, "init")) {
		unsetenv(PIDNS_ENV_STAGE); /* not for the workers */
		unsetenv(PIDNS_ENV_PID);
		return stage_init(code);
	}
	const char *off = getenv(PIDNS_ENV_OFF);
	if (off && !strcmp(off, "0")) {
		rv_log_info("PID namespace off: what the workers start is stopped by rover-run "
			    "only",
			    "by=%s=0", PIDNS_ENV_OFF);
		return 1;
	}
	sigset_t old;
	block_signals(true, &old);
	int r = stage_spawn_wait(argv, "ns", (pid_t)getpid(), code);
	if (r == 0 && *code != PIDNS_EXIT_NONE)
		return 0;
	if (r < 0)
		rv_log_warn(PIDNS_NONE_MSG, "reason=\"could not run rover-run again: %s\"",
			    strerror(-r));
	sigprocmask(SIG_SETMASK, &old, NULL);
	*code = 0;
	return 1;
}
