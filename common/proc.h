/*
 * proc.h: start, watch and stop child processes; the one place that forks.
 *
 * Used by pgserver (initdb, pg_ctl), the test fixtures (the real daemons) and
 * the daemons that supervise workers.  rv_proc_spawn() blocks every signal
 * around fork(); the child resets handlers 1..31 to default, clears its
 * mask, joins a new process group (or session), drops to uid/gid when asked,
 * sets PR_SET_PDEATHSIG when asked and then checks that its parent is still
 * the process that forked it (pid 1 of a new PID namespace, whose getppid()
 * is 0, by the parent's pidfd), puts the asked-for fds on 0/1/2, closes every
 * other fd, and execs.  A failed exec comes back as the call's -errno through
 * a close-on-exec pipe, so "command not found" is a return value, not an exit
 * code.  The child is reaped through a pidfd: poll-able, and a pid is never
 * signalled or waited for once reaped, so pid reuse cannot hit a stranger.
 *
 * Thread-safe in the sense that several threads may each spawn and wait for
 * their own children; one struct rv_proc has one owner.  Do not reap our
 * children elsewhere (waitpid(-1), SIGCHLD set to SIG_IGN): the wait then
 * returns -ECHILD and the exit status is lost.
 *
 *   struct rv_proc p;
 *   const char *argv[] = { "pg_ctl", "-D", dir, "status", NULL };
 *   struct rv_proc_opts o = { .argv = argv, .io[1] = { RV_PROC_PIPE } };
 *   if (rv_proc_spawn(&p, &o) == 0) {
 *           ... read(p.fd[1], ...) until EOF ...
 *           rv_proc_wait(&p, 5000, &status);   // or rv_proc_stop(&p, 2000, &status)
 *           rv_proc_release(&p);
 *   }
 */
#ifndef RV_PROC_H
#define RV_PROC_H

#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "buf.h"

/* What the child gets on fd 0, 1 or 2 (opts.io[0..2]). */
enum rv_proc_io_mode {
	RV_PROC_INHERIT = 0, /* the parent's own fd 0/1/2, as it is */
	RV_PROC_NULL,        /* /dev/null, read-write */
	/* io.fd, borrowed: dup'ed in the child; the caller keeps and closes its
	 * copy (even when spawn fails) */
	RV_PROC_FD,
	RV_PROC_PIPE,   /* a new pipe; the parent's end is p->fd[i], owned by *p */
	RV_PROC_STDOUT, /* only for io[2]: the same as the child's fd 1 (2>&1) */
};

struct rv_proc_io {
	enum rv_proc_io_mode mode;
	int fd; /* RV_PROC_FD only */
};

/* Where the child lives.  The default (0) is its own process group, so that
 * rv_proc_kill() reaches whatever it starts. */
enum rv_proc_group {
	RV_PROC_NEW_GROUP = 0, /* setpgid(0, 0): own group, same session */
	RV_PROC_NEW_SESSION,   /* setsid(): own session and group, no controlling tty */
	RV_PROC_SAME_GROUP,    /* stay in the parent's group: kill reaches the leader only */
};

#define RV_PROC_MAX_KEEP    8
#define RV_PROC_MAX_CGROUPS 4
#define RV_PROC_MAX_RLIMITS 4

/* One resource limit the child sets on itself before exec. */
struct rv_proc_rlimit {
	int resource; /* RLIMIT_AS, RLIMIT_NOFILE, ... */
	struct rlimit lim;
};

/* Everything is borrowed for the duration of the call; zero means default. */
struct rv_proc_opts {
	/* NULL-terminated; argv[0] with a '/' is run as is, without one it is
	 * looked up in the PATH of this process's environment. */
	const char *const *argv;
	/* The child's whole environment, NULL-terminated "K=V"; NULL: ours (environ). */
	const char *const *envp;
	/* Applied over envp (or environ), NULL-terminated: "K=V" sets K, "K" unsets it. */
	const char *const *env;
	const char *cwd;         /* chdir there before exec; NULL: stay */
	struct rv_proc_io io[3]; /* fds 0, 1, 2 */
	/* Extra fds (>= 3) the child keeps under the same number, close-on-exec
	 * cleared in the child only; borrowed.  Every other fd is closed. */
	int keep_fds[RV_PROC_MAX_KEEP];
	int nkeep;
	enum rv_proc_group group;
	/* Signal the child gets when the thread that spawned it dies (usually
	 * SIGKILL); 0: none.  Set after the uid/gid drop, which would clear it. */
	int pdeathsig;
	/* Drop to this uid/gid (supplementary groups: gid alone) before exec. */
	bool set_ids;
	uid_t uid;
	gid_t gid;
	/* Fds (>= 3) open for writing on cgroup.procs files, borrowed: the
	 * child writes "0" to each (joins that cgroup: one per cgroup v1
	 * hierarchy, one for v2) first thing after fork, so nothing it runs
	 * escapes the cgroup's limits.  A refused write fails the spawn with
	 * its errno.  The caller keeps and closes them. */
	int cgroup_fds[RV_PROC_MAX_CGROUPS];
	int ncgroup;
	/* Set in the child with setrlimit() before exec; a refusal fails the
	 * spawn with its errno. */
	struct rv_proc_rlimit rlimits[RV_PROC_MAX_RLIMITS];
	int nrlimit;
};

/* A spawned child.  Fields are read-only for the caller. */
struct rv_proc {
	pid_t pid;  /* > 0 while not reaped; 0 once reaped (never signalled again) */
	pid_t pgid; /* its process group, or 0 for RV_PROC_SAME_GROUP */
	/* Owned; readable (POLLIN) once the child exited; -1 if the kernel has
	 * none (then waits poll every 10 ms). */
	int pidfd;
	/* Owned parent ends of RV_PROC_PIPE, else -1: fd[0] is write-only (the
	 * child's stdin), fd[1]/fd[2] read-only; close-on-exec; the caller may
	 * close one early with rv_proc_close_fd(). */
	int fd[3];
	int status; /* wait status (WIFEXITED, ...) once reaped; -1 when lost */
	bool reaped;
};

/* Start opts->argv.  On success returns 0 with *p filled; the exec already
 * succeeded.  On failure returns a negative errno (-ENOENT: no such program,
 * -EACCES, -EINVAL for bad opts, a fork/pipe error, or what failed in the
 * child before exec: chdir, setuid, ...), *p holds no fds and no process. */
int rv_proc_spawn(struct rv_proc *p, const struct rv_proc_opts *opts);

/* Take charge of pid, an unreaped child of this process that another
 * process forked (one reparented here, this process being a child subreaper:
 * PR_SET_CHILD_SUBREAPER), as if rv_proc_spawn() had started it; pgid is its
 * process group for rv_proc_kill() (0: signal it alone).  Returns 0 with *p
 * filled (no pipes); -ECHILD when pid is not a child of ours (nothing taken,
 * nothing signalled); -EINVAL for pid <= 0; or pidfd_open's error. */
int rv_proc_adopt(struct rv_proc *p, pid_t pid, pid_t pgid);

/* Reap every child of this process that has exited and whose pid is not in
 * keep[] (the children the caller reaps itself: its workers).  A child
 * subreaper gets the orphans of everything below it, and reaping those by
 * waitpid(-1) would steal its workers' statuses; this looks the children up
 * in /proc/self/task/<tid>/children instead and waits for each by pid.  A
 * child still running is left alone.  Returns how many were reaped, or a
 * negative errno (-ENOSYS: the kernel has no such list). */
int rv_proc_reap_strays(const pid_t *keep, int nkeep);

/* SIGKILL every child of this process and reap it, then those reparented
 * here meanwhile (a child subreaper gets its children's orphans), until
 * none is left or timeout_ms passed.  For the end of a supervisor, once
 * every child it reaps itself is reaped: nothing is kept.  Returns 0 once
 * none is left, -ETIMEDOUT when some still were, or -ENOSYS as
 * rv_proc_reap_strays. */
int rv_proc_kill_strays(int timeout_ms);

/* Wait up to timeout_ms (< 0: forever, 0: just look) for the child to exit
 * and reap it.  Returns 0 with *status (may be NULL) the wait status, also on
 * a later call once reaped; -ETIMEDOUT when it still runs; -ECHILD when
 * someone else reaped it (the status is lost, p counts as reaped, and later
 * calls say -ECHILD again). */
int rv_proc_wait(struct rv_proc *p, int timeout_ms, int *status);

/* Send sig to the child's process group (and to the child itself).  Returns
 * 0, -ESRCH once reaped, or a negative errno. */
int rv_proc_kill(struct rv_proc *p, int sig);

/* SIGTERM to the group, wait up to grace_ms, then SIGKILL to the group and
 * wait for the child.  Returns 0 when it exited within the grace period,
 * -ETIMEDOUT when it had to be killed, -ESRCH/-ECHILD as above; *status (may
 * be NULL) holds the wait status in the first two cases. */
int rv_proc_stop(struct rv_proc *p, int grace_ms, int *status);

/* Close p->fd[i] now (the child then sees EOF or EPIPE).  Idempotent. */
void rv_proc_close_fd(struct rv_proc *p, int i);

/* The first of rel[] (NULL-terminated paths relative to the folder of our
 * executable, /proc/self/exe) that access(2) allows with mode, made
 * absolute into out.  0, -ENOENT when none does, -ENAMETOOLONG, or -errno
 * when our executable cannot be read. */
int rv_proc_exe_relative(char *out, size_t size, const char *const *rel, int mode);

/* Make *p empty: no process, no fds (what a failed spawn leaves); safe to
 * release, wait for (-ESRCH) or kill (-ESRCH). */
void rv_proc_init(struct rv_proc *p);

/* Close the pidfd and the pipe ends.  Neither signals nor waits: a child
 * still running keeps running (stop it first).  Accepts a zeroed or released
 * struct; idempotent. */
void rv_proc_release(struct rv_proc *p);

/*
 * Run a short command to completion: spawn with opts (io[1] and io[2] are
 * replaced by one pipe when out is not NULL, whose bytes are appended to out,
 * at most 1 MiB, the rest read and dropped), wait up to timeout_ms (< 0:
 * forever), and on timeout kill the group with SIGKILL.  Returns 0 with
 * *status (may be NULL) the wait status, whatever the exit code;
 * -ETIMEDOUT after the kill; -EINVAL when opts ask for RV_PROC_PIPE (nobody
 * would read it); or rv_proc_spawn's error.  The output read until
 * then stays in out in every case.
 */
int rv_proc_run(const struct rv_proc_opts *opts, int timeout_ms, int *status, struct rv_buf *out);

#endif
