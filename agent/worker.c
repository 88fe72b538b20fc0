/*
 * worker.c: start one worker (worker_launch, through common/proc) and pass
 * its output on (worker_pump).  See worker.h.
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "parse.h"
#include "warm.h"
#include "worker.h"

extern char **environ;

/* mkdir -p for the log folders; 0 or a negative errno. */
static int mkdirs(const char *path)
{
	char p[1024];
	if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int worker_env(const struct worker_group *g, int lr, const char **env, int max, char *store,
	       size_t size)
{
	int n = 0;
	size_t used = 0;
	int rank = g->rank_offset + lr;
#define PUT(...)                                                                                   \
	do {                                                                                       \
		if (n >= max - 1)                                                                  \
			return -ENOSPC;                                                            \
		int k_ = snprintf(store + used, size - used, __VA_ARGS__);                         \
		if (k_ < 0 || (size_t)k_ >= size - used)                                           \
			return -ENOSPC;                                                            \
		env[n++] = store + used;                                                           \
		used += (size_t)k_ + 1;                                                            \
	} while (0)
	PUT("RANK=%d", rank);
	PUT("LOCAL_RANK=%d", lr);
	PUT("WORLD_SIZE=%d", g->world_size);
	PUT("LOCAL_WORLD_SIZE=%d", g->local_world_size);
	PUT("GROUP_RANK=%d", g->group_rank);
	PUT("GROUP_WORLD_SIZE=%d", g->group_world_size);
	PUT("ROLE_RANK=%d", rank);
	PUT("ROLE_WORLD_SIZE=%d", g->world_size);
	PUT("ROLE_NAME=%s", g->flags->role);
	PUT("MASTER_ADDR=%s", g->master_addr);
	PUT("MASTER_PORT=%d", g->master_port);
	PUT("TORCHELASTIC_RESTART_COUNT=%d", g->restart_count);
	PUT("TORCHELASTIC_MAX_RESTARTS=%d", g->flags->max_restarts);
	PUT("TORCHELASTIC_RUN_ID=%s", g->run_id);
	/* who hosts the store: rover-run of group rank 0 (every rank is a
	 * client), else rank 0 (torch's env:// init) */
	PUT("TORCHELASTIC_USE_AGENT_STORE=%s", g->agent_store ? "True" : "False");
	/* where torch's @record writes the worker's exception, which the
	 * summary names (torchrun's place in its log folder) */
	if (g->attempt_dir)
		PUT("TORCHELASTIC_ERROR_FILE=%s/%d/error.json", g->attempt_dir, lr);
	/* torchrun's default: several workers sharing the cores */
	if (g->local_world_size > 1 && !getenv("OMP_NUM_THREADS"))
		PUT("OMP_NUM_THREADS=1");
	/* a hung Python worker gets SIGABRT, which then dumps every thread's
	 * stack on its stderr (run.c capture_stacks) */
	if (!g->flags->no_python && g->flags->hang_timeout_s > 0 && !getenv("PYTHONFAULTHANDLER"))
		PUT("PYTHONFAULTHANDLER=1");
	/* GPUs: the device is LOCAL_RANK's (torchrun's contract, the script
	 * calls torch.cuda.set_device(LOCAL_RANK)); a collective that failed
	 * ends the process instead of hanging it, as torchrun's agent sets */
	if (g->gpus > 0) {
		if (!getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING"))
			PUT("TORCH_NCCL_ASYNC_ERROR_HANDLING=1");
		if (!getenv("NCCL_ASYNC_ERROR_HANDLING"))
			PUT("NCCL_ASYNC_ERROR_HANDLING=1");
		PUT("ROVER_DEVICE=cuda:%d", lr % g->gpus);
	} else {
		PUT("ROVER_DEVICE=cpu");
	}
	if (g->flags->save_at_breakpoint)
		PUT("ROVER_SAVE_AT_BREAKPOINT=1");
	/* the collectives on the address the other nodes reach (gloo's own
	 * choice is the host name's address: loopback on many machines) */
	if (g->sock_ifname && *g->sock_ifname && !getenv("GLOO_SOCKET_IFNAME"))
		PUT("GLOO_SOCKET_IFNAME=%s", g->sock_ifname);
	if (g->sock_ifname && *g->sock_ifname && !getenv("NCCL_SOCKET_IFNAME"))
		PUT("NCCL_SOCKET_IFNAME=%s", g->sock_ifname);
	PUT("ROVER_MASTER_ADDR=%s", g->rover_master);
	PUT("ROVER_NODE_NAME=%s", g->node_name);
	PUT("ROVER_NODE_RANK=%d", g->group_rank);
#undef PUT
	env[n] = NULL;
	return n;
}

void worker_trainer_env(void)
{
	static const char *const lib_rel[] = { "../lib/librover-trainer.so", NULL };
	/* installed: <prefix>/lib/python; in the source tree: build/bin/../../python
	 * (build/<mode>/bin/../../../python for the debug and asan builds) */
	static const char *const pkg_rel[] = { "../lib/python/rover/__init__.py",
					       "../../python/rover/__init__.py",
					       "../../../python/rover/__init__.py", NULL };
	char path[PATH_MAX];
	const char *lib = getenv("ROVER_TRAINER_LIB");
	if ((!lib || !*lib) && rv_proc_exe_relative(path, sizeof(path), lib_rel, R_OK) == 0)
		setenv("ROVER_TRAINER_LIB", path, 1);
	if (rv_proc_exe_relative(path, sizeof(path), pkg_rel, R_OK) < 0)
		return;
	*strrchr(path, '/') = 0; /* .../rover */
	*strrchr(path, '/') = 0; /* the folder that holds the package */
	const char *old = getenv("PYTHONPATH");
	if (old && strstr(old, path))
		return;
	RV_CLEANUP_FREE char *v = NULL;
	if (asprintf(&v, "%s%s%s", path, old && *old ? ":" : "", old ? old : "") < 0)
		return;
	setenv("PYTHONPATH", v, 1);
}

static int open_log(const char *dir, const char *name, struct rv_err *err)
{
	char path[1100];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644);
	if (fd < 0)
		return rv_err_set(err, -errno, "--log-dir", "could not create \"%s\": %s", path,
				  strerror(errno));
	return fd;
}

/* Fork the worker from the warm interpreter: its environment is ours with
 * env over it (the last of a key wins), its stdout and stderr pipes made
 * here.  0 with w->proc and w->out[].fd set, or warm_spawn's error (why
 * says it) and nothing started. */
static int spawn_warm(struct worker *w, const struct worker_group *g, const char *const *uargv,
		      const char *const *env, struct rv_err *why)
{
	size_t n = 0, k = 0;
	while (environ[n])
		n++;
	while (env[k])
		k++;
	RV_CLEANUP_FREE const char **envp = calloc(n + k + 1, sizeof(*envp));
	if (!envp)
		return rv_err_set(why, -ENOMEM, "", "out of memory");
	memcpy(envp, environ, n * sizeof(*envp));
	memcpy(envp + n, env, k * sizeof(*envp));
	int p[2][2];
	if (pipe2(p[0], O_CLOEXEC) < 0)
		return rv_err_set(why, -errno, "", "could not create a pipe: %s", strerror(errno));
	if (pipe2(p[1], O_CLOEXEC) < 0) {
		int e = -errno;
		close(p[0][0]);
		close(p[0][1]);
		return rv_err_set(why, e, "", "could not create a pipe: %s", strerror(-e));
	}
	struct warm_req rq = {
		.argv = uargv,
		.module = g->flags->module,
		.unbuffered = true, /* python -u, as a cold worker runs */
		.envp = envp,
		/* stdin inherited as a cold worker's, /dev/null when we have none */
		.fd = { fcntl(STDIN_FILENO, F_GETFD) >= 0 ? STDIN_FILENO : -1, p[0][1], p[1][1] },
	};
	int rc = warm_spawn(g->warm, &rq, &w->proc, why);
	close(p[0][1]);
	close(p[1][1]);
	if (rc < 0) {
		close(p[0][0]);
		close(p[1][0]);
		return rc;
	}
	w->out[0].fd = p[0][0];
	w->out[1].fd = p[1][0];
	return 0;
}

int worker_launch(struct worker *w, const struct worker_group *g, int lr, struct rv_err *err)
{
	const struct flags *f = g->flags;
	memset(w, 0, sizeof(*w));
	w->proc.pidfd = -1;
	w->local_rank = lr;
	w->rank = g->rank_offset + lr;
	for (int i = 0; i < 2; i++) {
		w->out[i].fd = -1;
		w->out[i].log_fd = -1;
	}

	RV_CLEANUP_FREE const char **argv = calloc((size_t)f->nscript_args + 5, sizeof(*argv));
	if (!argv)
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	int argc = 0;
	if (!f->no_python) {
		argv[argc++] = g->python;
		argv[argc++] = "-u";
		if (f->module)
			argv[argc++] = "-m";
	}
	argv[argc++] = f->script;
	for (int i = 0; i < f->nscript_args; i++)
		argv[argc++] = f->script_args[i];
	argv[argc] = NULL;

	const char *env[32];
	char store[4096];
	if (worker_env(g, lr, env, (int)(sizeof(env) / sizeof(env[0])), store, sizeof(store)) < 0)
		return rv_err_set(err, -ENOSPC, "", "the worker environment does not fit");

	int rc;
	if (g->attempt_dir) {
		char dir[1024];
		snprintf(dir, sizeof(dir), "%s/%d", g->attempt_dir, lr);
		snprintf(w->error_file, sizeof(w->error_file), "%s/%d/error.json", g->attempt_dir,
			 lr);
		rc = mkdirs(dir);
		if (rc == 0)
			unlink(w->error_file); /* an earlier run's, in the same --log-dir */
		if (rc < 0)
			return rv_err_set(err, rc, "--log-dir", "could not create \"%s\": %s", dir,
					  strerror(-rc));
		static const char *const names[2] = { "stdout.log", "stderr.log" };
		for (int i = 0; i < 2; i++) {
			w->out[i].log_fd = open_log(dir, names[i], err);
			if (w->out[i].log_fd < 0) {
				rc = w->out[i].log_fd;
				worker_release(w);
				return rc;
			}
		}
	}
	/* a tee'd stream reaches the console even when also redirected, as
	 * torchrun adds the tee'd streams to the redirected ones */
	int redirect = flags_std_mask(&f->redirects, lr) & ~flags_std_mask(&f->tee, lr);
	/* --local-ranks-filter: the others' output reaches the log files only
	 * (or nowhere without --log-dir, as torchrun's /dev/null) */
	bool shown = !f->console_filter || (lr < FLAGS_MAX_NPROC && f->console_rank[lr]);
	w->out[0].console = shown && (!(redirect & FLAGS_STD_OUT) || !g->attempt_dir);
	w->out[1].console = shown && (!(redirect & FLAGS_STD_ERR) || !g->attempt_dir);

	int64_t t0 = rv_mono_ms();
	bool warm = false;
	char reason[sizeof(((struct rv_err *)0)->msg)] = "";
	if (g->warm && g->warm->started && !f->no_python) {
		struct rv_err why = { 0 };
		int off = f->module ? 3 : 2; /* past "python -u [-m]" */
		if (spawn_warm(w, g, argv + off, env, &why) == 0)
			warm = true;
		else
			snprintf(reason, sizeof(reason), "%s",
				 why.msg[0] ? why.msg : "warm start failed");
	}
	if (!warm) {
		struct rv_proc_opts o = {
			.argv = argv,
			.env = env,
			.io = { { RV_PROC_INHERIT, 0 }, { RV_PROC_PIPE, 0 }, { RV_PROC_PIPE, 0 } },
			.group = RV_PROC_NEW_GROUP,
			.pdeathsig = SIGKILL,
		};
		rc = rv_proc_spawn(&w->proc, &o);
		if (rc < 0) {
			worker_release(w);
			return rv_err_set(err, rc, "", "could not start \"%s\": %s", argv[0],
					  strerror(-rc));
		}
		for (int i = 0; i < 2; i++) {
			w->out[i].fd = w->proc.fd[i + 1];
			w->proc.fd[i + 1] = -1; /* ours now: closed at EOF */
		}
	}
	for (int i = 0; i < 2; i++)
		fcntl(w->out[i].fd, F_SETFL, fcntl(w->out[i].fd, F_GETFL) | O_NONBLOCK);
	char q[2 * sizeof(reason)];
	if (warm || !reason[0])
		rv_log_info("worker started", "rank=%d local_rank=%d pid=%d start=%s spawn_ms=%lld",
			    w->rank, lr, (int)w->proc.pid, warm ? "warm" : "cold",
			    (long long)(rv_mono_ms() - t0));
	else
		rv_log_info("worker started",
			    "rank=%d local_rank=%d pid=%d start=cold spawn_ms=%lld "
			    "reason=%s",
			    w->rank, lr, (int)w->proc.pid, (long long)(rv_mono_ms() - t0),
			    rv_log_q(q, sizeof(q), reason));
	w->running = true;
	w->warm = warm;
	w->started_ms = w->last_output_ms = rv_mono_ms();
	w->ck_step = INT64_MIN;
	return 0;
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return;
		p += k;
		n -= (size_t)k;
	}
}

/* One console line with its prefix, in one write. */
static void console_line(const struct worker *w, int i, const char *p, size_t n)
{
	char buf[WORKER_LINE + 32];
	int k = snprintf(buf, sizeof(buf), "[rank%d]:", w->rank);
	if (n > sizeof(buf) - (size_t)k - 1)
		n = sizeof(buf) - (size_t)k - 1;
	memcpy(buf + k, p, n);
	if (n == 0 || p[n - 1] != '\n')
		buf[k + n++] = '\n';
	write_all(i == 0 ? STDOUT_FILENO : STDERR_FILENO, buf, (size_t)k + n);
}

static void tail_add(struct worker *w, const char *p, size_t n)
{
	if (n >= WORKER_TAIL) {
		memcpy(w->tail, p + n - WORKER_TAIL, WORKER_TAIL);
		w->tail_len = WORKER_TAIL;
		return;
	}
	if (w->tail_len + n > WORKER_TAIL) {
		size_t drop = w->tail_len + n - WORKER_TAIL;
		memmove(w->tail, w->tail + drop, w->tail_len - drop);
		w->tail_len -= drop;
	}
	memcpy(w->tail + w->tail_len, p, n);
	w->tail_len += n;
}

static void console_feed(struct worker *w, int i, const char *p, size_t n)
{
	struct worker_stream *s = &w->out[i];
	while (n > 0) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) + 1 : n;
		if (s->len + take > sizeof(s->line)) {
			/* a line longer than the buffer goes out in pieces */
			console_line(w, i, s->line, s->len);
			s->len = 0;
			if (take > sizeof(s->line))
				take = sizeof(s->line);
		}
		memcpy(s->line + s->len, p, take);
		s->len += take;
		if (s->line[s->len - 1] == '\n') {
			console_line(w, i, s->line, s->len);
			s->len = 0;
		}
		p += take;
		n -= take;
	}
}

int worker_pump(struct worker *w, int i)
{
	struct worker_stream *s = &w->out[i];
	char buf[16384];
	while (s->fd >= 0) {
		ssize_t k = read(s->fd, buf, sizeof(buf));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return 0; /* EAGAIN: all read for now */
		if (k == 0) {
			close(s->fd);
			s->fd = -1;
			if (s->len) {
				console_line(w, i, s->line, s->len);
				s->len = 0;
			}
			return 1;
		}
		w->last_output_ms = rv_mono_ms();
		w->lived = true;
		if (s->log_fd >= 0)
			write_all(s->log_fd, buf, (size_t)k);
		if (i == 1)
			tail_add(w, buf, (size_t)k);
		if (s->console)
			console_feed(w, i, buf, (size_t)k);
	}
	return 1;
}

void worker_flush(struct worker *w)
{
	for (int i = 0; i < 2; i++)
		if (w->out[i].len) {
			if (w->out[i].console)
				console_line(w, i, w->out[i].line, w->out[i].len);
			w->out[i].len = 0;
		}
}

size_t worker_traceback(const struct worker *w, char *out, size_t size)
{
	static const char mark[] = "Traceback (most recent call last):";
	const char *last = NULL;
	const char *end = w->tail + w->tail_len;
	for (const char *p = w->tail; p + sizeof(mark) - 1 <= end; p++) {
		p = memchr(p, 'T', (size_t)(end - p));
		if (!p || p + sizeof(mark) - 1 > end)
			break;
		if (!memcmp(p, mark, sizeof(mark) - 1))
			last = p;
	}
	if (!last || size == 0) {
		if (size)
			out[0] = 0;
		return 0;
	}
	size_t n = (size_t)(end - last);
	if (n >= size)
		n = size - 1;
	memcpy(out, last, n);
	out[n] = 0;
	return n;
}

const char *worker_describe(int status, char *out, size_t size)
{
	if (status < 0)
		snprintf(out, size, "exit status lost");
	else if (WIFEXITED(status))
		snprintf(out, size, "exited with code %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(out, size, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(out, size, "wait status %d", status);
	return out;
}

void worker_release(struct worker *w)
{
	for (int i = 0; i < 2; i++) {
		if (w->out[i].fd >= 0)
			close(w->out[i].fd);
		if (w->out[i].log_fd >= 0)
			close(w->out[i].log_fd);
		w->out[i].fd = w->out[i].log_fd = -1;
	}
	rv_proc_release(&w->proc);
}
