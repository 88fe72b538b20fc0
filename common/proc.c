/*
 * proc.c: spawn, wait for and stop child processes (see proc.h).
 *
 * The habits are those of libuv's process.c and git's run-command.c: every
 * signal is blocked across fork() so no handler of ours runs in the child;
 * between fork and exec the child calls only async-signal-safe functions
 * (the parent may have threads holding malloc's or stdio's locks); whatever
 * fails there reaches the parent as an errno through a close-on-exec pipe,
 * which the parent reads until EOF (exec done) or an int (it failed).
 * Children are reaped with waitid(P_PIDFD) on a pidfd taken right after fork,
 * while the child cannot be reaped by anyone else yet; once reaped, pid is
 * set to 0 and nothing signals that number again.
 */
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <grp.h>

#include "parse.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define RUN_OUT_MAX (1u << 20)

extern char **environ;

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void rv_proc_init(struct rv_proc *p)
{
	memset(p, 0, sizeof(*p));
	p->pidfd = -1;
	for (int i = 0; i < 3; i++)
		p->fd[i] = -1;
}

/* ---- environment, built in the parent (the child may not malloc) ---- */

static size_t env_key_len(const char *s)
{
	const char *eq = strchr(s, '=');
	return eq ? (size_t)(eq - s) : strlen(s);
}

/* Is base entry e named by an override in env ("K=V" or "K")? */
static bool env_overridden(const char *e, const char *const *env)
{
	size_t n = env_key_len(e);
	for (size_t i = 0; env[i]; i++)
		if (env_key_len(env[i]) == n && !strncmp(env[i], e, n))
			return true;
	return false;
}

/* A malloc'd array of borrowed strings; *out NULL when nothing to change. */
static int env_build(const struct rv_proc_opts *o, char ***out)
{
	*out = NULL;
	if (!o->env)
		return 0;
	char *const *base = o->envp ? (char *const *)o->envp : environ;
	size_t nb = 0, ne = 0;
	while (base && base[nb])
		nb++;
	while (o->env[ne])
		ne++;
	char **v = malloc((nb + ne + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < nb; i++)
		if (!env_overridden(base[i], o->env))
			v[k++] = base[i];
	for (size_t i = 0; i < ne; i++) {
		if (!strchr(o->env[i], '='))
			continue; /* an unset: already dropped from base */
		/* The last setting of a key wins, as with repeated setenv(). */
		bool later = false;
		for (size_t j = i + 1; j < ne && !later; j++)
			later = env_key_len(o->env[j]) == env_key_len(o->env[i]) &&
				!strncmp(o->env[j], o->env[i], env_key_len(o->env[i]));
		if (!later)
			v[k++] = (char *)o->env[i];
	}
	v[k] = NULL;
	*out = v;
	return 0;
}

/* ---- the child: async-signal-safe calls only ---- */

__attribute__((noreturn)) static void child_fail(int errfd, int e)
{
	ssize_t w;
	do
		w = write(errfd, &e, sizeof(e));
	while (w < 0 && errno == EINTR);
	_exit(127);
}

/* Close every fd >= 3 but those in keep[] (sorted, all >= 3). */
static int close_others(const int *keep, int nkeep)
{
	unsigned int from = 3;
	int r = 0;
	for (int i = 0; i <= nkeep && r == 0; i++) {
		unsigned int to = i < nkeep ? (unsigned int)keep[i] : ~0U;
		if (to > from)
			r = close_range(from, i < nkeep ? to - 1 : to, 0);
		if (i < nkeep)
			from = to + 1;
	}
	if (r == 0)
		return 0;
	/* No close_range (kernel < 5.9): walk /proc/self/fd with getdents64
	 * into a stack buffer, as opendir() would malloc. */
	int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	char buf[4096];
	long n;
	while ((n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			struct dirent64 *de = (struct dirent64 *)(buf + off);
			off += de->d_reclen;
			int fd = 0;
			const char *c = de->d_name;
			if (*c < '0' || *c > '9')
				continue;
			for (; *c >= '0' && *c <= '9'; c++)
				fd = fd * 10 + (*c - '0');
			bool kept = fd < 3 || fd == dfd;
			for (int i = 0; i < nkeep && !kept; i++)
				kept = keep[i] == fd;
			if (!kept)
				close(fd);
		}
	}
	close(dfd);
	return n < 0 ? -errno : 0;
}

/* src[i] >= 0: the fd to put on i; -1: leave i alone; -2: dup 1 onto 2. */
__attribute__((noreturn)) static void child_run(const struct rv_proc_opts *o, int src[3], int errfd,
						pid_t parent, int parent_fd, char *const *envp)
{
	/* Handlers back to default while every signal is still blocked.  Only
	 * 1..31: glibc uses real-time signals of its own. */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < 32; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &dfl, NULL);

	/* Into the cgroups before anything else runs here: "0" names the
	 * writer, in v1 and v2 alike. */
	for (int i = 0; i < o->ncgroup; i++) {
		ssize_t w;
		do
			w = write(o->cgroup_fds[i], "0", 1);
		while (w < 0 && errno == EINTR);
		if (w < 0)
			child_fail(errfd, errno);
	}
	for (int i = 0; i < o->nrlimit; i++)
		if (setrlimit((__rlimit_resource_t)o->rlimits[i].resource, &o->rlimits[i].lim) < 0)
			child_fail(errfd, errno);

	if (o->group == RV_PROC_NEW_SESSION && setsid() < 0)
		child_fail(errfd, errno);
	if (o->group == RV_PROC_NEW_GROUP && setpgid(0, 0) < 0)
		child_fail(errfd, errno);

	/* The error pipe and every source must sit above 2 before dup2 onto
	 * 0..2 can clobber them. */
	if (errfd < 3 && (errfd = fcntl(errfd, F_DUPFD_CLOEXEC, 3)) < 0)
		_exit(127);
	for (int i = 0; i < 3; i++) {
		if (src[i] == -3) { /* /dev/null, opened only here */
			src[i] = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (src[i] < 0)
				child_fail(errfd, errno);
		}
		if (src[i] >= 0 && src[i] < 3 && (src[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 3)) < 0)
			child_fail(errfd, errno);
	}
	for (int i = 0; i < 3; i++) {
		if (src[i] >= 0 && dup2(src[i], i) < 0)
			child_fail(errfd, errno);
		if (src[i] == -2 && dup2(1, 2) < 0)
			child_fail(errfd, errno);
	}

	if (o->set_ids) {
		if (setgroups(1, &o->gid) < 0 || setgid(o->gid) < 0 || setuid(o->uid) < 0)
			child_fail(errfd, errno);
	}
	/* After the id change, which clears the death signal.  The parent may
	 * have died before prctl: then nobody will send it, so look.  pid 1 of
	 * a new PID namespace sees its parent as 0, then and after: its pidfd
	 * says whether it still runs. */
	if (o->pdeathsig) {
		if (prctl(PR_SET_PDEATHSIG, o->pdeathsig) < 0)
			child_fail(errfd, errno);
		pid_t pp = getppid();
		struct pollfd pf = { .fd = parent_fd, .events = POLLIN };
		if (pp != parent && !(pp == 0 && parent_fd >= 0 && poll(&pf, 1, 0) == 0))
			child_fail(errfd, ESRCH);
	}
	if (o->cwd && chdir(o->cwd) < 0)
		child_fail(errfd, errno);

	int keep[RV_PROC_MAX_KEEP + 1], nkeep = 0;
	for (int i = 0; i < o->nkeep; i++) {
		if (fcntl(o->keep_fds[i], F_SETFD, 0) < 0)
			child_fail(errfd, errno);
		keep[nkeep++] = o->keep_fds[i];
	}
	keep[nkeep++] = errfd;
	for (int i = 1; i < nkeep; i++) /* insertion sort: at most 9 */
		for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];
			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	int r = close_others(keep, nkeep);
	if (r < 0)
		child_fail(errfd, -r);

	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	const char *file = o->argv[0];
	if (strchr(file, '/'))
		execve(file, (char *const *)o->argv, envp);
	else
		execvpe(file, (char *const *)o->argv, envp);
	child_fail(errfd, errno);
}

/* ---- the parent ---- */

static int check_opts(const struct rv_proc_opts *o)
{
	if (!o || !o->argv || !o->argv[0] || !o->argv[0][0])
		return -EINVAL;
	if (o->nkeep < 0 || o->nkeep > RV_PROC_MAX_KEEP)
		return -EINVAL;
	for (int i = 0; i < o->nkeep; i++)
		if (o->keep_fds[i] < 3)
			return -EINVAL;
	if (o->ncgroup < 0 || o->ncgroup > RV_PROC_MAX_CGROUPS)
		return -EINVAL;
	for (int i = 0; i < o->ncgroup; i++)
		if (o->cgroup_fds[i] < 3)
			return -EINVAL;
	if (o->nrlimit < 0 || o->nrlimit > RV_PROC_MAX_RLIMITS)
		return -EINVAL;
	for (int i = 0; i < 3; i++) {
		enum rv_proc_io_mode m = o->io[i].mode;
		if (m == RV_PROC_FD && o->io[i].fd < 0)
			return -EINVAL;
		if (m == RV_PROC_STDOUT && i != 2)
			return -EINVAL;
		if (m > RV_PROC_STDOUT)
			return -EINVAL;
	}
	return 0;
}

int rv_proc_spawn(struct rv_proc *p, const struct rv_proc_opts *o)
{
	rv_proc_init(p);
	int r = check_opts(o);
	if (r < 0)
		return r;
	char **envbuf = NULL;
	r = env_build(o, &envbuf);
	if (r < 0)
		return r;
	char *const *envp = envbuf ? envbuf : o->envp ? (char *const *)o->envp : environ;

	int child_end[3] = { -1, -1, -1 }, src[3] = { -1, -1, -1 };
	int ep[2] = { -1, -1 };
	for (int i = 0; i < 3 && r == 0; i++) {
		int pf[2];
		switch (o->io[i].mode) {
		case RV_PROC_INHERIT:
			break;
		case RV_PROC_NULL:
			src[i] = -3;
			break;
		case RV_PROC_FD:
			src[i] = o->io[i].fd;
			break;
		case RV_PROC_STDOUT:
			src[i] = -2;
			break;
		case RV_PROC_PIPE:
			if (pipe2(pf, O_CLOEXEC) < 0) {
				r = -errno;
				break;
			}
			/* fd[0] is the child's stdin: it reads pf[0], we write pf[1]. */
			p->fd[i] = i == 0 ? pf[1] : pf[0];
			child_end[i] = src[i] = i == 0 ? pf[0] : pf[1];
			break;
		}
	}
	if (r == 0 && pipe2(ep, O_CLOEXEC) < 0)
		r = -errno;
	if (r < 0)
		goto fail;

	pid_t parent = getpid();
	/* readable once we exited: what the child looks at when its getppid()
	 * cannot name us (it is pid 1 of a new PID namespace) */
	int parent_fd = o->pdeathsig ? (int)syscall(SYS_pidfd_open, parent, 0) : -1;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = fork();
	if (pid == 0)
		child_run(o, src, ep[1], parent, parent_fd, envp);
	int fork_errno = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close_fd(&parent_fd);
	for (int i = 0; i < 3; i++)
		close_fd(&child_end[i]);
	close_fd(&ep[1]);
	if (pid < 0) {
		r = -fork_errno;
		goto fail;
	}
	p->pid = pid;
	p->pgid = o->group == RV_PROC_SAME_GROUP ? 0 : pid;
	/* The child is ours and unreaped, so pid names it: the pidfd is right. */
	p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (p->pidfd < 0)
		p->pidfd = -1; /* no pidfds here (close-on-exec when there are) */

	int child_errno = 0;
	ssize_t n;
	do
		n = read(ep[0], &child_errno, sizeof(child_errno));
	while (n < 0 && errno == EINTR);
	close_fd(&ep[0]);
	if (n == (ssize_t)sizeof(child_errno) && child_errno) {
		rv_proc_wait(p, -1, NULL);
		r = -child_errno;
		goto fail;
	}
	free(envbuf);
	return 0;

fail:
	for (int i = 0; i < 3; i++)
		close_fd(&child_end[i]);
	close_fd(&ep[0]);
	close_fd(&ep[1]);
	free(envbuf);
	rv_proc_release(p);
	return r;
}

int rv_proc_adopt(struct rv_proc *p, pid_t pid, pid_t pgid)
{
	rv_proc_init(p);
	if (pid <= 0 || pgid < 0)
		return -EINVAL;
	/* Ours and unreaped (a zombie at worst) means the number cannot have
	 * been reused: check that before trusting a pidfd for it. */
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno == ECHILD ? -ECHILD : -errno;
	p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (p->pidfd < 0) {
		if (errno != ENOSYS)
			return -errno;
		p->pidfd = -1; /* an old kernel: waits poll, as after a spawn */
	}
	p->pid = pid;
	p->pgid = pgid;
	return 0;
}

/* Reap pid if it is an exited child of ours not in keep: 1 when reaped. */
static int reap_stray(pid_t pid, const pid_t *keep, int nkeep)
{
	for (int i = 0; i < nkeep; i++)
		if (keep[i] == pid)
			return 0;
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG) < 0)
		if (errno != EINTR)
			return 0;
	return si.si_pid == pid;
}

/* Our children (every thread's), from /proc/self/task/<tid>/children, up
 * to max into out: the count, or a negative errno (-ENOSYS: no such list). */
static int children_list(pid_t *out, int max)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -errno;
	int n = 0, r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/task/%.20s/children", de->d_name);
		FILE *f = fopen(path, "re");
		if (!f) {
			r = errno == ENOENT ? -ENOSYS : -errno;
			continue;
		}
		char word[24];
		while (fscanf(f, "%23s", word) == 1) {
			int64_t pid;
			if (n < max && rv_parse_i64(word, 1, INT32_MAX, &pid) == 0)
				out[n++] = (pid_t)pid;
		}
		fclose(f);
	}
	closedir(d);
	return n > 0 || r == 0 ? n : r;
}

int rv_proc_reap_strays(const pid_t *keep, int nkeep)
{
	pid_t kids[512] = { 0 };
	int n = children_list(kids, 512), reaped = 0;
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		reaped += reap_stray(kids[i], keep, nkeep);
	return reaped;
}

int rv_proc_kill_strays(int timeout_ms)
{
	int64_t deadline = rv_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	for (;;) {
		pid_t kids[512] = { 0 };
		int n = children_list(kids, 512);
		if (n <= 0)
			return n;
		/* ours and unreaped (a zombie at worst): the pid is still theirs */
		for (int i = 0; i < n; i++)
			kill(kids[i], SIGKILL);
		for (int i = 0; i < n; i++)
			reap_stray(kids[i], NULL, 0);
		if (rv_mono_ms() >= deadline)
			return -ETIMEDOUT;
		struct timespec ts = { 0, 5 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

/* A wait status from waitid's siginfo, as waitpid would give it. */
static int status_of(const siginfo_t *si)
{
	switch (si->si_code) {
	case CLD_EXITED:
		return (si->si_status & 0xff) << 8;
	case CLD_DUMPED:
		return (si->si_status & 0x7f) | 0x80;
	default:
		return si->si_status & 0x7f;
	}
}

/* Reap if it exited: 1 reaped, 0 still running, negative errno. */
static int try_reap(struct rv_proc *p)
{
	for (;;) {
		if (p->pidfd >= 0) {
			siginfo_t si;
			memset(&si, 0, sizeof(si));
			int r = waitid((idtype_t)P_PIDFD, (id_t)p->pidfd, &si, WEXITED | WNOHANG);
			if (r == 0) {
				if (si.si_pid == 0)
					return 0;
				p->status = status_of(&si);
				break;
			}
		} else {
			int st;
			pid_t w = waitpid(p->pid, &st, WNOHANG);
			if (w == 0)
				return 0;
			if (w == p->pid) {
				p->status = st;
				break;
			}
		}
		/* Both failed: errno says why. */
		if (errno == EINTR)
			continue;
		if (errno == ECHILD) {
			/* Reaped behind our back: the number is no longer ours. */
			p->pid = 0;
			p->reaped = true;
			p->status = -1;
			close_fd(&p->pidfd);
			return -ECHILD;
		}
		return -errno;
	}
	p->pid = 0;
	p->reaped = true;
	close_fd(&p->pidfd);
	return 1;
}

int rv_proc_wait(struct rv_proc *p, int timeout_ms, int *status)
{
	if (!p->reaped && p->pid <= 0)
		return -ESRCH;
	int64_t deadline = timeout_ms >= 0 ? rv_mono_ms() + timeout_ms : INT64_MAX;
	while (!p->reaped) {
		int r = try_reap(p);
		if (r < 0)
			return r;
		if (r > 0)
			break;
		int64_t left = deadline == INT64_MAX ? -1 : deadline - rv_mono_ms();
		if (deadline != INT64_MAX && left <= 0)
			return -ETIMEDOUT;
		if (p->pidfd >= 0) {
			struct pollfd pf = { .fd = p->pidfd, .events = POLLIN };
			if (poll(&pf, 1, left > INT32_MAX ? INT32_MAX : (int)left) < 0 &&
			    errno != EINTR)
				return -errno;
		} else {
			struct timespec ts = { 0, 10 * 1000000L };
			if (left >= 0 && left < 10)
				ts.tv_nsec = left * 1000000L;
			nanosleep(&ts, NULL);
		}
	}
	if (p->status == -1)
		return -ECHILD; /* lost to someone else's wait, and stays so */
	if (status)
		*status = p->status;
	return 0;
}

int rv_proc_kill(struct rv_proc *p, int sig)
{
	if (p->reaped || p->pid <= 0)
		return -ESRCH;
	/* The unreaped leader (a zombie at worst) keeps both its pid and its
	 * group id from being reused, so both signals reach only ours. */
	int r = 0;
	if (p->pgid > 0 && kill(-p->pgid, sig) < 0 && errno != ESRCH)
		r = -errno;
	/* The leader once more only when it left the group (its own setsid):
	 * a handler must not run twice for one kill. */
	if (p->pgid > 0 && getpgid(p->pid) == p->pgid)
		return r;
	long k = p->pidfd >= 0 ? syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0)
			       : kill(p->pid, sig);
	if (k < 0 && errno != ESRCH && r == 0)
		r = -errno;
	return r;
}

int rv_proc_stop(struct rv_proc *p, int grace_ms, int *status)
{
	if (p->reaped)
		return rv_proc_wait(p, 0, status);
	int r = rv_proc_kill(p, SIGTERM);
	if (r < 0 && r != -ESRCH)
		return r;
	r = rv_proc_wait(p, grace_ms, status);
	if (r != -ETIMEDOUT)
		return r;
	rv_proc_kill(p, SIGKILL);
	r = rv_proc_wait(p, -1, status);
	return r < 0 ? r : -ETIMEDOUT;
}

void rv_proc_close_fd(struct rv_proc *p, int i)
{
	if (i >= 0 && i < 3)
		close_fd(&p->fd[i]);
}

void rv_proc_release(struct rv_proc *p)
{
	if (!p)
		return;
	close_fd(&p->pidfd);
	for (int i = 0; i < 3; i++)
		close_fd(&p->fd[i]);
}

/* Append what the pipe holds; returns 0 at EOF, 1 when more may come. */
static int run_read(int fd, struct rv_buf *out)
{
	char chunk[4096];
	ssize_t n = read(fd, chunk, sizeof(chunk));
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 1 : 0;
	if (n == 0)
		return 0;
	if (out->len < RUN_OUT_MAX)
		rv_buf_append(out, chunk,
			      out->len + (size_t)n > RUN_OUT_MAX ? RUN_OUT_MAX - out->len
								 : (size_t)n);
	return 1;
}

int rv_proc_run(const struct rv_proc_opts *opts, int timeout_ms, int *status, struct rv_buf *out)
{
	if (!opts)
		return -EINVAL;
	struct rv_proc_opts o = *opts;
	for (int i = 0; i < 3; i++)
		if (o.io[i].mode == RV_PROC_PIPE)
			return -EINVAL; /* nobody would read or close it */
	if (out) {
		o.io[1] = (struct rv_proc_io){ .mode = RV_PROC_PIPE };
		o.io[2] = (struct rv_proc_io){ .mode = RV_PROC_STDOUT };
	}
	struct rv_proc p;
	int r = rv_proc_spawn(&p, &o);
	if (r < 0)
		return r;
	int64_t deadline = timeout_ms >= 0 ? rv_mono_ms() + timeout_ms : INT64_MAX;
	/* Read until EOF; once the child itself exited, take what is buffered
	 * and stop, as something it left running may hold the pipe open. */
	while (out && p.fd[1] >= 0) {
		int64_t left = deadline == INT64_MAX ? -1 : deadline - rv_mono_ms();
		if (deadline != INT64_MAX && left <= 0)
			break;
		struct pollfd pf[2] = { { .fd = p.fd[1], .events = POLLIN },
					{ .fd = p.pidfd, .events = POLLIN } };
		int wait_ms = left > INT32_MAX ? INT32_MAX : (int)left;
		if (p.pidfd < 0 && (wait_ms < 0 || wait_ms > 10))
			wait_ms = 10;
		int k = poll(pf, p.pidfd >= 0 ? 2 : 1, wait_ms);
		if (k < 0 && errno != EINTR)
			break;
		if (k > 0 && pf[0].revents && !run_read(p.fd[1], out))
			rv_proc_close_fd(&p, 1);
		bool exited = p.pidfd >= 0 ? k > 0 && pf[1].revents
					   : rv_proc_wait(&p, 0, NULL) == 0;
		if (exited && p.fd[1] >= 0) {
			struct pollfd d = { .fd = p.fd[1], .events = POLLIN };
			while (poll(&d, 1, 0) > 0 && run_read(p.fd[1], out))
				;
			rv_proc_close_fd(&p, 1);
		}
	}
	int64_t left = deadline == INT64_MAX ? -1 : deadline - rv_mono_ms();
	r = rv_proc_wait(&p, deadline == INT64_MAX ? -1 : left > 0 ? (int)left : 0, status);
	if (r == -ETIMEDOUT) {
		rv_proc_kill(&p, SIGKILL);
		rv_proc_wait(&p, -1, status);
	}
	rv_proc_release(&p);
	return r;
}

int rv_proc_exe_relative(char *out, size_t size, const char *const *rel, int mode)
{
	char dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	if (n < 0)
		return -errno;
	dir[n] = 0;
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	for (size_t i = 0; rel[i]; i++) {
		char cand[PATH_MAX + 64], real[PATH_MAX];
		int k = snprintf(cand, sizeof(cand), "%s/%s", dir, rel[i]);
		if (k < 0 || (size_t)k >= sizeof(cand) || access(cand, mode) < 0 ||
		    !realpath(cand, real))
			continue;
		if (strlen(real) >= size)
			return -ENAMETOOLONG;
		memcpy(out, real, strlen(real) + 1);
		return 0;
	}
	return -ENOENT;
}
