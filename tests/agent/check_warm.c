/*
 * check_warm.c: the warm interpreter (agent/warm.c, agent/rover_warm.py)
 * with the real /usr/bin/python3 and Debian's torch: a forked worker sees
 * its own argv, environment, cwd and sys.path[0]; every output line arrives
 * once, also when the worker is SIGKILLed right after printing; exit codes,
 * signals and tracebacks are python's; random state differs per worker; one
 * interpreter serves 20 workers and keeps one thread; workers are children
 * of this process and die with it; a dead interpreter makes spawns fail
 * cleanly; two warm workers run a gloo all_reduce.
 *
 * Without an importable torch the suite runs no test and says why.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>

#include "parse.h"
#include "proc.h"
#include "testutil.h"
#include "warm.h"

static char tmpdir[64];

static void setup(void)
{
	/* The copy the build installs, as rover-run would find it. */
	if (!getenv("ROVER_WARM_SCRIPT")) {
		const char *b = getenv("B");
		char path[512];
		snprintf(path, sizeof(path), "%s/lib/rover/rover_warm.py", b ? b : "build");
		setenv("ROVER_WARM_SCRIPT", path, 1);
	}
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rover-warm-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
	const char *argv[] = { "rm", "-rf", tmpdir, NULL };
	struct rv_proc_opts o = { .argv = argv };
	rv_proc_run(&o, 10000, NULL, NULL);
}

/* Write tmpdir/name (folders made as needed); returns the path (static). */
static const char *put(const char *name, const char *text)
{
	static char path[512];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	for (char *s = strchr(path + strlen(tmpdir) + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = 0;
		mkdir(path, 0755);
		*s = '/';
	}
	rv_test_write_file(path, text);
	return path;
}

static void start_with(struct warm *w, int standby)
{
	struct rv_err e = { 0 };
	int r = warm_start(w, &(struct warm_opts){ .log_fd = 2, .standby = standby }, &e);
	ck_assert_msg(r == 0, "warm_start: %d %s", r, e.msg);
	ck_assert_int_eq(w->proc.pid > 0, 1);
}

/* A worker environment of extra plus what the interpreter fixed at its
 * start (the locale, bytecode writing) taken from ours, as rover-run passes
 * its own environment on: into env (room for 32), returned. */
static const char *const *mkenv(const char **env, const char *const *extra)
{
	static char kept[4][256]; /* the same values for every call */
	const char *keys[] = { "LANG", "LC_ALL", "LC_CTYPE", "PYTHONDONTWRITEBYTECODE" };
	size_t n = 0;
	for (size_t i = 0; extra[i] && n < 24; i++)
		env[n++] = extra[i];
	for (size_t i = 0; i < 4; i++) {
		const char *v = getenv(keys[i]);
		for (size_t j = 0; extra[j] && v; j++)
			if (!strncmp(extra[j], keys[i], strlen(keys[i])) &&
			    extra[j][strlen(keys[i])] == '=')
				v = NULL; /* extra sets it */
		if (!v)
			continue;
		snprintf(kept[i], sizeof(kept[i]), "%s=%s", keys[i], v);
		env[n++] = kept[i];
	}
	env[n] = NULL;
	return env;
}

/* One standby worker (the default). */
static void start(struct warm *w)
{
	start_with(w, 0);
}

/* How many children this process has (standbys, workers, interpreters). */
static int children(void)
{
	DIR *d = opendir("/proc/self/task");
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char path[300], buf[4096];
		snprintf(path, sizeof(path), "/proc/self/task/%s/children", de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		while (fscanf(f, "%4095s", buf) == 1)
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* A worker's result: wait status and what it printed on stdout/stderr. */
struct run {
	int status;
	struct rv_buf out, err;
};

/* Read both pipes until EOF (20 s at most). */
static void drain(int ofd, int efd, struct run *res)
{
	int64_t until = rv_mono_ms() + 20000;
	struct pollfd pf[2] = { { .fd = ofd, .events = POLLIN }, { .fd = efd, .events = POLLIN } };
	struct rv_buf *dst[2] = { &res->out, &res->err };
	while ((pf[0].fd >= 0 || pf[1].fd >= 0) && rv_mono_ms() < until) {
		if (poll(pf, 2, 200) <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			if (pf[i].fd < 0 || !pf[i].revents)
				continue;
			char buf[4096];
			ssize_t n = read(pf[i].fd, buf, sizeof(buf));
			if (n > 0) {
				rv_buf_append(dst[i], buf, (size_t)n);
			} else {
				close(pf[i].fd);
				pf[i].fd = -1;
			}
		}
	}
	ck_assert_msg(pf[0].fd < 0 && pf[1].fd < 0, "worker output did not end");
}

/* Spawn one worker and leave its output pipes with the caller. */
static int spawn_pipes(struct warm *w, const struct warm_req *base, struct rv_proc *p, int *ofd,
		       int *efd, struct rv_err *e)
{
	int po[2], pe[2];
	ck_assert_int_eq(pipe2(po, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(pe, O_CLOEXEC), 0);
	struct warm_req rq = *base;
	rq.fd[0] = -1;
	rq.fd[1] = po[1];
	rq.fd[2] = pe[1];
	int r = warm_spawn(w, &rq, p, e);
	close(po[1]);
	close(pe[1]);
	*ofd = po[0];
	*efd = pe[0];
	return r;
}

/* Spawn, collect the output, reap. */
static void run_warm(struct warm *w, const struct warm_req *rq, struct run *res)
{
	memset(res, 0, sizeof(*res));
	struct rv_proc p;
	struct rv_err e = { 0 };
	int ofd, efd;
	int r = spawn_pipes(w, rq, &p, &ofd, &efd, &e);
	ck_assert_msg(r == 0, "warm_spawn: %d %s", r, e.msg);
	drain(ofd, efd, res);
	ck_assert_int_eq(rv_proc_wait(&p, 20000, &res->status), 0);
	rv_proc_release(&p);
}

static void run_release(struct run *res)
{
	rv_buf_release(&res->out);
	rv_buf_release(&res->err);
}

static const char *text(struct rv_buf *b)
{
	return b->data ? b->data : "";
}

/* Run script alone in a worker of w, env added to the kept environment: it
 * exits 0 and prints want. */
static void run_script_ok(struct warm *w, const char *script, const char *const *env,
			  const char *want)
{
	const char *argv[] = { script, NULL };
	const char *buf[32];
	struct warm_req rq = { .argv = argv, .envp = mkenv(buf, env) };
	struct run res;
	run_warm(w, &rq, &res);
	ck_assert_msg(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "status %d %s",
		      res.status, text(&res.err));
	ck_assert_str_eq(text(&res.out), want);
	run_release(&res);
}

static int count_of(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle))
		n++;
	return n;
}

static int threads_of(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

START_TEST(test_worker_sees_its_argv_env_cwd_path)
{
	setenv("ROVER_TEST_AGENT_ONLY", "1", 1); /* the interpreter has it, workers must not */
	struct warm w;
	start_with(&w, -1); /* every worker forked on request */
	put("scripts/w.py", "import os, sys, json, ctypes\n"
			    "g = ctypes.CDLL(None).getenv\n"
			    "g.restype = ctypes.c_char_p\n"
			    "print(json.dumps({'argv': sys.argv, 'foo': os.environ.get('FOO'),\n"
			    "  'agent_only': os.environ.get('ROVER_TEST_AGENT_ONLY'),\n"
			    "  'cwd': os.getcwd(), 'path0': sys.path[0], 'name': __name__,\n"
			    "  'ppid': os.getppid(), 'pgid': os.getpgid(0), 'pid': os.getpid(),\n"
			    "  'getenv': g(b'FOO') == b'bar baz'}))\n");
	put("work/mod_w.py", "import sys, os\nprint('MOD', sys.argv[1:], sys.path[0], __name__)\n");
	char cwd[300], env_pp[300];
	snprintf(cwd, sizeof(cwd), "%s/work", tmpdir);
	snprintf(env_pp, sizeof(env_pp), "PATH=%s", getenv("PATH") ? getenv("PATH") : "/usr/bin");
	const char *extra[] = { "FOO=bar baz", env_pp, NULL };
	const char *env_buf[32];
	const char *const *env = mkenv(env_buf, extra);
	const char *argv[] = { "../scripts/w.py", "--lr", "0.1", "x y", NULL };
	struct warm_req rq = { .argv = argv, .envp = env, .cwd = cwd };
	struct run res;
	run_warm(&w, &rq, &res);
	ck_assert_msg(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "status %d: %s",
		      res.status, text(&res.err));
	char want[1024], scripts[300];
	snprintf(scripts, sizeof(scripts), "%s/scripts", tmpdir);
	char real[300];
	ck_assert_ptr_nonnull(realpath(scripts, real));
	const char *o = text(&res.out);
	ck_assert_msg(strstr(o, "\"argv\": [\"../scripts/w.py\", \"--lr\", \"0.1\", \"x y\"]"),
		      "%s", o);
	ck_assert_msg(strstr(o, "\"foo\": \"bar baz\""), "%s", o);
	ck_assert_msg(strstr(o, "\"agent_only\": null"), "%s", o);
	snprintf(want, sizeof(want), "\"cwd\": \"%s\"", cwd);
	ck_assert_msg(strstr(o, want), "%s lacks %s", o, want);
	snprintf(want, sizeof(want), "\"path0\": \"%s\"", real);
	ck_assert_msg(strstr(o, want), "%s lacks %s", o, want);
	ck_assert_msg(strstr(o, "\"name\": \"__main__\""), "%s", o);
	ck_assert_msg(strstr(o, "\"getenv\": true"), "C getenv does not see FOO: %s", o);
	/* A child of ours, in a group of its own. */
	snprintf(want, sizeof(want), "\"ppid\": %d", getpid());
	ck_assert_msg(strstr(o, want), "%s lacks %s", o, want);
	const char *pid = strstr(o, "\"pid\": ");
	ck_assert_ptr_nonnull(pid);
	snprintf(want, sizeof(want), "\"pgid\": %ld", strtol(pid + 7, NULL, 10));
	ck_assert_msg(strstr(o, want), "%s lacks %s", o, want);
	run_release(&res);

	/* python -m: the module's file is argv[0], the cwd is sys.path[0]. */
	const char *margv[] = { "mod_w", "a", NULL };
	struct warm_req mrq = { .argv = margv, .module = true, .envp = env, .cwd = cwd };
	run_warm(&w, &mrq, &res);
	ck_assert_int_eq(WEXITSTATUS(res.status), 0);
	snprintf(want, sizeof(want), "MOD ['a'] %s __main__", cwd);
	ck_assert_msg(strstr(text(&res.out), want), "%s lacks %s", text(&res.out), want);
	run_release(&res);
	warm_stop(&w);
}
END_TEST

/* What a script can see of how it was started, the same warm and cold. */
START_TEST(test_same_as_a_fresh_python)
{
	struct warm w;
	start(&w);
	put("s/p.py",
	    "import json, os, sys\n"
	    "def sig():\n"
	    "    return [l.strip() for l in open('/proc/self/status')\n"
	    "            if l.startswith('Sig') and not l.startswith('SigQ')]\n"
	    "print(json.dumps({'argv': sys.argv, 'orig': sys.orig_argv, 'path': sys.path,\n"
	    "  'flags': str(sys.flags), 'file': __file__, 'spec': str(__spec__),\n"
	    "  'loader': type(__loader__).__name__, 'package': __package__,\n"
	    "  'globals': sorted(globals()), 'main': sys.modules['__main__'] is\n"
	    "  sys.modules[__name__], 'sig': sig(), 'cwd': os.getcwd(),\n"
	    "  'env': {k: v for k, v in os.environ.items() if k.startswith('RV')},\n"
	    "  'umask': os.umask(0), 'pgid': os.getpgid(0) == os.getpid(),\n"
	    "  'stdin': os.path.realpath('/proc/self/fd/0')}, sort_keys=True))\n");
	/* (SigQ, the queued signals of this user, is left out: it is not ours.) */
	char cwd[300];
	snprintf(cwd, sizeof(cwd), "%s/s", tmpdir);
	const char *extra[] = { "RV_A=1", "RV_B=two words", "PATH=/usr/bin:/bin", NULL };
	const char *env_buf[32];
	const char *const *env = mkenv(env_buf, extra);
	const char *argv[] = { "p.py", "x", NULL };
	struct warm_req rq = { .argv = argv, .envp = env, .cwd = cwd };
	struct run res;
	run_warm(&w, &rq, &res);
	ck_assert_msg(WEXITSTATUS(res.status) == 0, "%s", text(&res.err));

	const char *cold_argv[] = { "/usr/bin/python3", "p.py", "x", NULL };
	struct rv_proc_opts o = {
		.argv = cold_argv, .envp = env, .cwd = cwd, .io = { { RV_PROC_NULL, -1 } }
	};
	struct rv_buf out = { 0 };
	int st = -1;
	ck_assert_int_eq(rv_proc_run(&o, 30000, &st, &out), 0);
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	ck_assert_str_eq(text(&res.out), text(&out));
	rv_buf_release(&out);
	run_release(&res);
	warm_stop(&w);
}
END_TEST

START_TEST(test_output_whole_even_when_killed)
{
	struct warm w;
	start(&w);
	/* Lines, then SIGKILL at once: no flush at exit helps here. */
	const char *s = put("out.py", "import os, signal, sys\n"
				      "for i in range(2000): print('line', i)\n"
				      "print('err line', file=sys.stderr)\n"
				      "print('last')\n"
				      "os.kill(os.getpid(), signal.SIGKILL)\n");
	const char *argv[] = { s, NULL };
	struct warm_req rq = { .argv = argv };
	for (int round = 0; round < 2; round++) {
		struct run res;
		run_warm(&w, &rq, &res);
		ck_assert(WIFSIGNALED(res.status));
		ck_assert_int_eq(WTERMSIG(res.status), SIGKILL);
		const char *o = text(&res.out);
		ck_assert_int_eq(count_of(o, "\n"), 2001);
		ck_assert_int_eq(count_of(o, "line 0\n"), 1);
		ck_assert_int_eq(count_of(o, "line 1999\n"), 1);
		ck_assert_int_eq(count_of(o, "last\n"), 1);
		ck_assert_str_eq(text(&res.err), "err line\n");
		run_release(&res);
	}
	/* python -u (torchrun's way): even a partial line is out before the kill. */
	const char *p = put("partial.py", "import os, signal, sys\n"
					  "print(sys.orig_argv[1], end=' ')\n"
					  "os.kill(os.getpid(), signal.SIGKILL)\n");
	const char *pargv[] = { p, NULL };
	struct warm_req prq = { .argv = pargv, .unbuffered = true };
	struct run res;
	run_warm(&w, &prq, &res);
	ck_assert_int_eq(WTERMSIG(res.status), SIGKILL);
	ck_assert_str_eq(text(&res.out), "-u ");
	run_release(&res);
	warm_stop(&w);
}
END_TEST

START_TEST(test_exit_codes_signals_tracebacks)
{
	struct warm w;
	start(&w);
	struct {
		const char *code;
		int exit, sig;
		const char *err;
	} cases[] = {
		{ "import sys\nsys.exit(7)\n", 7, 0, "" },
		{ "print('fine')\n", 0, 0, "" },
		{ "import sys\nsys.exit('no data')\n", 1, 0, "no data\n" },
		{ "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n", -1, SIGTERM, "" },
		{ "import atexit\natexit.register(lambda: print('bye'))\n", 0, 0, "" },
		{ "def f():\n    raise ValueError('boom')\nf()\n", 1, 0, "ValueError: boom\n" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char name[32];
		snprintf(name, sizeof(name), "c%zu.py", i);
		char path[512];
		snprintf(path, sizeof(path), "%s", put(name, cases[i].code));
		const char *argv[] = { path, NULL };
		struct warm_req rq = { .argv = argv };
		struct run res;
		run_warm(&w, &rq, &res);
		const char *e = text(&res.err);
		if (cases[i].sig) {
			ck_assert_msg(WIFSIGNALED(res.status) &&
					      WTERMSIG(res.status) == cases[i].sig,
				      "case %zu: status %d", i, res.status);
		} else {
			ck_assert_msg(WIFEXITED(res.status) &&
					      WEXITSTATUS(res.status) == cases[i].exit,
				      "case %zu: status %d, stderr %s", i, res.status, e);
		}
		ck_assert_msg(strstr(e, cases[i].err), "case %zu: stderr %s", i, e);
		if (i == 4)
			ck_assert_str_eq(text(&res.out), "bye\n");
		if (i == 5) {
			/* python's own traceback: from the script's frame on. */
			char want[600];
			snprintf(want, sizeof(want),
				 "Traceback (most recent call last):\n  File \"%s\", line 3, in "
				 "<module>\n",
				 path);
			ck_assert_msg(!strncmp(e, want, strlen(want)), "stderr %s", e);
			ck_assert_msg(!strstr(e, "runpy") && !strstr(e, "rover_warm"), "%s", e);
		}
		run_release(&res);
	}
	/* A missing script: python's message and exit code 2. */
	const char *argv[] = { "/nonexistent/train.py", NULL };
	struct warm_req rq = { .argv = argv };
	struct run res;
	run_warm(&w, &rq, &res);
	ck_assert_int_eq(WEXITSTATUS(res.status), 2);
	ck_assert_msg(strstr(text(&res.err), "can't open file"), "%s", text(&res.err));
	run_release(&res);
	warm_stop(&w);
}
END_TEST

START_TEST(test_random_state_differs)
{
	struct warm w;
	start(&w);
	const char *s = put("rnd.py",
			    "import numpy, torch, random\n"
			    "print(numpy.random.rand(), torch.rand(1).item(), random.random())\n");
	const char *argv[] = { s, NULL };
	struct warm_req rq = { .argv = argv };
	struct run a, b;
	run_warm(&w, &rq, &a);
	run_warm(&w, &rq, &b);
	ck_assert_int_eq(WEXITSTATUS(a.status), 0);
	ck_assert_int_eq(WEXITSTATUS(b.status), 0);
	double a1, a2, a3, b1, b2, b3;
	ck_assert_int_eq(sscanf(text(&a.out), "%lf %lf %lf", &a1, &a2, &a3), 3);
	ck_assert_int_eq(sscanf(text(&b.out), "%lf %lf %lf", &b1, &b2, &b3), 3);
	ck_assert_msg(a1 != b1, "numpy drew %f twice", a1);
	ck_assert_msg(a2 != b2, "torch drew %f twice", a2);
	ck_assert_msg(a3 != b3, "random drew %f twice", a3);
	run_release(&a);
	run_release(&b);
	warm_stop(&w);
}
END_TEST

START_TEST(test_twenty_spawns_one_thread)
{
	struct warm w;
	start_with(&w, 2);
	/* A threaded torch op in each worker: it must not hang (no OpenMP pool
	 * inherited) and must not leave a thread in the interpreter.  Every
	 * other worker asks for one thread with OMP_NUM_THREADS, which torch
	 * read when the interpreter loaded it (and would default to the cores,
	 * 2 or more). */
	const char *s = put("mm.py",
			    "import os, torch\n"
			    "if 'OMP_NUM_THREADS' not in os.environ:\n"
			    "    torch.set_num_threads(2)\n"
			    "x = torch.ones(256, 256)\n"
			    "print('sum', int((x @ x).sum().item()), torch.get_num_threads())\n");
	const char *argv[] = { s, NULL };
	const char *extra[] = { "OMP_NUM_THREADS=1", NULL };
	const char *none[] = { NULL };
	const char *one_buf[32], *two_buf[32];
	const char *const *one = mkenv(one_buf, extra), *const *two = mkenv(two_buf, none);
	for (int i = 0; i < 20; i++) {
		struct warm_req rq = { .argv = argv, .envp = i % 2 ? one : two };
		struct run res;
		run_warm(&w, &rq, &res);
		ck_assert_msg(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0,
			      "spawn %d: status %d %s", i, res.status, text(&res.err));
		ck_assert_str_eq(text(&res.out), i % 2 ? "sum 16777216 1\n" : "sum 16777216 2\n");
		run_release(&res);
		ck_assert_int_eq(threads_of(w.proc.pid), 1);
	}
	ck_assert_int_eq(w.spawns, 20);
	ck_assert(warm_alive(&w));
	/* The interpreter and its standbys, nothing else; none after a stop. */
	ck_assert_int_le(children(), 3);
	warm_stop(&w);
	ck_assert(!warm_alive(&w));
	ck_assert_int_eq(children(), 0);
}
END_TEST

/* children() once it is n, or what it is after ms. */
static int children_reach(int n, int ms)
{
	int c = children();
	for (int64_t end = rv_mono_ms() + ms; c != n && rv_mono_ms() < end; c = children())
		usleep(20 * 1000);
	return c;
}

START_TEST(test_held_standbys_are_not_replaced)
{
	struct warm w;
	start_with(&w, 2);
	ck_assert_int_eq(children_reach(3, 20000), 3); /* it and its 2 standbys */
	const char *s = put("hi.py", "print('hi')\n");
	const char *argv[] = { s, NULL };
	struct run res;
	/* As the network check asks: each takes a standby and, for as long as
	 * requests say so, none is forked in its place (a fork costs a node
	 * short of CPU the time its check is judged by). */
	for (int i = 0; i < 2; i++) {
		struct warm_req held = { .argv = argv, .hold_standbys = true };
		run_warm(&w, &held, &res);
		ck_assert_str_eq(text(&res.out), "hi\n");
		run_release(&res);
		usleep(1000 * 1000); /* a refill starts 50 ms after a request */
		ck_assert_int_eq(children(), 2 - i);
	}
	/* The next request without it is forked (no standby left) and the
	 * standbys are forked again. */
	struct warm_req rq = { .argv = argv };
	run_warm(&w, &rq, &res);
	ck_assert_str_eq(text(&res.out), "hi\n");
	run_release(&res);
	ck_assert_int_eq(children_reach(3, 20000), 3);
	ck_assert_int_eq(w.spawns, 3);
	warm_stop(&w);
}
END_TEST

START_TEST(test_refusals_keep_it_usable)
{
	struct warm w;
	start(&w);
	char marked[512], plain[512];
	snprintf(marked, sizeof(marked), "%s", put("cold.py", "# rover: cold-start\nprint('x')\n"));
	snprintf(plain, sizeof(plain), "%s", put("ok.py", "print('ok')\n"));
	struct rv_proc p;
	struct rv_err e = { 0 };
	const char *argv[] = { marked, NULL };
	struct warm_req rq = { .argv = argv };
	ck_assert_int_eq(warm_spawn(&w, &rq, &p, &e), -ENOTSUP);
	ck_assert_msg(strstr(e.msg, "cold-start"), "%s", e.msg);
	ck_assert_int_eq(p.pid, 0);

	/* Opted out, or a setting python fixed at start (the locale picks the
	 * encodings) differs from the interpreter's. */
	const char *pargv[] = { plain, NULL };
	const char *lang = getenv("LANG") && !strcmp(getenv("LANG"), "C") ? "LANG=POSIX" : "LANG=C";
	struct {
		const char *set, *why;
	} cases[] = { { "ROVER_WARM=0", "ROVER_WARM=0" },
		      { "PYTHONHASHSEED=123", "PYTHONHASHSEED" },
		      { lang, "LANG" } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *extra[] = { cases[i].set, NULL };
		const char *buf[32];
		struct warm_req rqi = { .argv = pargv, .envp = mkenv(buf, extra) };
		ck_assert_int_eq(warm_spawn(&w, &rqi, &p, &e), -ENOTSUP);
		ck_assert_msg(strstr(e.msg, cases[i].why), "%s", e.msg);
	}

	struct warm_req rq4 = { .argv = pargv, .no_python = true };
	ck_assert_int_eq(warm_spawn(&w, &rq4, &p, &e), -ENOTSUP);

	struct warm_req plain_rq = { .argv = pargv };
	struct run res;
	run_warm(&w, &plain_rq, &res);
	ck_assert_str_eq(text(&res.out), "ok\n");
	run_release(&res);
	warm_stop(&w);
}
END_TEST

START_TEST(test_dead_interpreter_fails_cleanly)
{
	struct warm w;
	start(&w);
	const char *s = put("ok.py", "print('ok')\n");
	const char *argv[] = { s, NULL };
	struct warm_req rq = { .argv = argv };
	struct run res;
	run_warm(&w, &rq, &res);
	run_release(&res);
	/* Its standby forked (the interpreter and it are our children). */
	for (int i = 0; i < 500 && children() < 2; i++)
		usleep(10000);
	ck_assert_int_eq(children(), 2);
	usleep(200000); /* and announced: the notice follows the fork at once */
	ck_assert_int_eq(rv_proc_kill(&w.proc, SIGKILL), 0);
	struct rv_proc p;
	struct rv_err e = { 0 };
	int64_t t0 = rv_mono_ms();
	int r = warm_spawn(&w, &rq, &p, &e);
	ck_assert_msg(r == -ENOTCONN, "%d %s", r, e.msg);
	ck_assert_msg(rv_mono_ms() - t0 < 3000, "failing took %lld ms",
		      (long long)(rv_mono_ms() - t0));
	ck_assert_msg(strstr(e.msg, "exited"), "%s", e.msg);
	ck_assert_int_eq(p.pid, 0);
	ck_assert_int_eq(p.pidfd, -1);
	ck_assert(!warm_alive(&w));
	ck_assert_int_eq(warm_spawn(&w, &rq, &p, &e), -ENOTCONN);
	ck_assert_int_eq(children(), 0); /* its standby went with it, reaped */
	warm_stop(&w);
	warm_stop(&w);
	struct warm zero = { 0 };
	warm_stop(&zero); /* a zeroed struct: nothing to do, fd 0 untouched */
	ck_assert_int_ge(fcntl(0, F_GETFD), 0);
}
END_TEST

START_TEST(test_silent_interpreter_times_out)
{
	struct warm w;
	struct rv_err e = { 0 };
	struct warm_opts o = { .standby = -1, .spawn_timeout_ms = 500 };
	ck_assert_int_eq(warm_start(&w, &o, &e), 0);
	ck_assert_int_eq(rv_proc_kill(&w.proc, SIGSTOP), 0);
	const char *s = put("ok.py", "print('ok')\n");
	const char *argv[] = { s, NULL };
	struct warm_req rq = { .argv = argv };
	struct rv_proc p;
	int64_t t0 = rv_mono_ms();
	ck_assert_int_eq(warm_spawn(&w, &rq, &p, &e), -ETIMEDOUT);
	ck_assert_int_lt(rv_mono_ms() - t0, 4000);
	ck_assert_int_eq(p.pid, 0);
	/* It was stopped for good: no half-answered stream is reused. */
	ck_assert(!warm_alive(&w));
	ck_assert_int_eq(warm_spawn(&w, &rq, &p, &e), -ENOTCONN);
	ck_assert_int_eq(children(), 0);
	warm_stop(&w);
}
END_TEST

START_TEST(test_start_failures_say_why)
{
	struct warm w;
	struct rv_err e = { 0 };
	int r = warm_start(&w, &(struct warm_opts){ .imports = "json,rover_no_such_module" }, &e);
	ck_assert_int_eq(r, -ENOPKG);
	ck_assert_msg(strstr(e.msg, "rover_no_such_module"), "%s", e.msg);
	ck_assert_int_eq(w.sock, -1);
	ck_assert(!warm_alive(&w));
	warm_stop(&w);

	r = warm_start(&w, &(struct warm_opts){ .python = "/nonexistent/python3" }, &e);
	ck_assert_int_eq(r, -ENOENT);
	r = warm_start(&w, &(struct warm_opts){ .script = "/nonexistent/rover_warm.py" }, &e);
	ck_assert_int_eq(r, -ENOENT);

	/* An import that starts a thread: a fork would hang, so no start. */
	put("threader.py",
	    "import threading, time\n"
	    "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n");
	char pp[300];
	snprintf(pp, sizeof(pp), "PYTHONPATH=%s", tmpdir);
	const char *env[] = { pp, NULL };
	r = warm_start(&w, &(struct warm_opts){ .imports = "threader", .env = env }, &e);
	ck_assert_int_eq(r, -EBUSY);
	ck_assert_msg(strstr(e.msg, "2 threads"), "%s", e.msg);
}
END_TEST

/* A library that starts a pool of threads when it loads and stops it in a
 * fork handler, as OpenBLAS does (numpy's wheels start one thread per core
 * at import): a stand-in module in Python with the same behaviour.  The
 * interpreter lets the handler run once and starts; its worker gets the pool
 * back at its first call, as in a fresh interpreter. */
START_TEST(test_pool_stopped_by_fork_handler)
{
	put("forkpool.py", "import os, threading\n"
			   "_stop, _pool = threading.Event(), []\n"
			   "def busy():\n"
			   "    if not _pool:\n"
			   "        _stop.clear()\n"
			   "        for _ in range(3):\n"
			   "            t = threading.Thread(target=_stop.wait, daemon=True)\n"
			   "            t.start()\n"
			   "            _pool.append(t)\n"
			   "    return len(_pool)\n"
			   "def _shutdown():\n"
			   "    _stop.set()\n"
			   "    while _pool:\n"
			   "        _pool.pop().join()\n"
			   "os.register_at_fork(before=_shutdown)\n"
			   "busy()\n");
	const char *s = put("usepool.py",
			    "import forkpool, threading\n"
			    "print('pool', forkpool.busy(), threading.active_count())\n");
	char pp[300];
	snprintf(pp, sizeof(pp), "PYTHONPATH=%s", tmpdir);
	const char *env[] = { pp, NULL };
	struct warm w;
	struct rv_err e = { 0 };
	int r = warm_start(&w,
			   &(struct warm_opts){ .imports = "forkpool", .env = env, .log_fd = 2 },
			   &e);
	ck_assert_msg(r == 0, "warm_start: %d %s", r, e.msg);
	ck_assert_int_eq(threads_of(w.proc.pid), 1);
	run_script_ok(&w, s, env, "pool 3 4\n");
	ck_assert_int_eq(w.spawns, 1);
	ck_assert_int_eq(threads_of(w.proc.pid), 1);
	warm_stop(&w);
}
END_TEST

/* jemalloc (bundled by some Python wheels, or preloaded) runs a background
 * purging thread; jemalloc makes fork() safe by itself, so that thread does
 * not stop the warm start, and a worker allocates freely after the fork. */
START_TEST(test_jemalloc_background_thread)
{
	static const char lib[] = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
	ck_assert_msg(access(lib, R_OK) == 0, "%s missing: install libjemalloc2", lib);
	const char *env[] = { "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
			      "MALLOC_CONF=background_thread:true", NULL };
	struct warm w;
	struct rv_err e = { 0 };
	int r = warm_start(&w, &(struct warm_opts){ .imports = "json", .env = env, .log_fd = 2 },
			   &e);
	ck_assert_msg(r == 0, "warm_start: %d %s", r, e.msg);
	const char *s = put("alloc.py",
			    "import os\n"
			    "x = [bytes(1 << 16) for _ in range(4096)]\n"
			    "print('ok', len(x), 'jemalloc' in open('/proc/self/maps').read())\n");
	run_script_ok(&w, s, env, "ok 4096 True\n");
	ck_assert_int_eq(w.spawns, 1);
	warm_stop(&w);
}
END_TEST

/* The agent's death takes its warm workers with it: child process "agent"
 * starts an interpreter and a worker, reports the worker's pid and dies. */
START_TEST(test_workers_die_with_the_agent)
{
	int pp[2];
	ck_assert_int_eq(pipe(pp), 0);
	const char *s = put("sleep.py", "import time\nprint('up', flush=True)\ntime.sleep(60)\n");
	pid_t agent = fork();
	ck_assert_int_ge(agent, 0);
	if (agent == 0) {
		close(pp[0]);
		struct warm w;
		struct rv_err e;
		if (warm_start(&w, NULL, &e) < 0)
			_exit(3);
		const char *argv[] = { s, NULL };
		struct warm_req rq = { .argv = argv };
		struct rv_proc p;
		int ofd, efd;
		if (spawn_pipes(&w, &rq, &p, &ofd, &efd, &e) < 0)
			_exit(4);
		char line[16];
		if (read(ofd, line, sizeof(line)) <= 0)
			_exit(5);
		if (write(pp[1], &p.pid, sizeof(p.pid)) != sizeof(p.pid))
			_exit(6);
		_exit(0); /* neither stops the worker nor the interpreter */
	}
	close(pp[1]);
	pid_t worker = 0;
	ck_assert_int_eq(read(pp[0], &worker, sizeof(worker)), (ssize_t)sizeof(worker));
	int fd = (int)syscall(SYS_pidfd_open, worker, 0);
	int st;
	ck_assert_int_eq(waitpid(agent, &st, 0), agent);
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	if (fd >= 0) { /* else it is already gone */
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ck_assert_msg(poll(&pf, 1, 5000) == 1, "worker %d outlived its agent", worker);
		close(fd);
	}
	close(pp[0]);
}
END_TEST

static int free_port(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	socklen_t n = sizeof(a);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &n), 0);
	close(s);
	return ntohs(a.sin_port);
}

START_TEST(test_gloo_all_reduce_between_warm_workers)
{
	struct warm w;
	start(&w);
	const char *s = put("ar.py", "import torch, torch.distributed as dist\n"
				     "dist.init_process_group('gloo')\n"
				     "t = torch.tensor([float(dist.get_rank() + 1)])\n"
				     "dist.all_reduce(t)\n"
				     "print('rank', dist.get_rank(), 'sum', t.item())\n"
				     "dist.destroy_process_group()\n");
	char port[32];
	snprintf(port, sizeof(port), "MASTER_PORT=%d", free_port());
	const char *x0[] = { "RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", port, NULL };
	const char *x1[] = { "RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", port, NULL };
	const char *b0[32], *b1[32];
	const char *const *env0 = mkenv(b0, x0), *const *env1 = mkenv(b1, x1);
	const char *argv[] = { s, NULL };
	struct warm_req r0 = { .argv = argv, .envp = env0 }, r1 = { .argv = argv, .envp = env1 };
	struct rv_proc p0, p1;
	struct rv_err e = { 0 };
	int o0, e0, o1, e1;
	ck_assert_int_eq(spawn_pipes(&w, &r0, &p0, &o0, &e0, &e), 0);
	ck_assert_int_eq(spawn_pipes(&w, &r1, &p1, &o1, &e1, &e), 0);
	struct run a = { 0 }, b = { 0 };
	drain(o0, e0, &a);
	drain(o1, e1, &b);
	ck_assert_int_eq(rv_proc_wait(&p0, 20000, &a.status), 0);
	ck_assert_int_eq(rv_proc_wait(&p1, 20000, &b.status), 0);
	ck_assert_msg(WEXITSTATUS(a.status) == 0, "%s", text(&a.err));
	ck_assert_msg(WEXITSTATUS(b.status) == 0, "%s", text(&b.err));
	ck_assert_str_eq(text(&a.out), "rank 0 sum 3.0\n");
	ck_assert_str_eq(text(&b.out), "rank 1 sum 3.0\n");
	rv_proc_release(&p0);
	rv_proc_release(&p1);
	run_release(&a);
	run_release(&b);
	warm_stop(&w);
}
END_TEST

/* Why the suite cannot run here, or NULL. */
static const char *no_torch(void)
{
	const char *argv[] = { "/usr/bin/python3", "-c", "import torch, torch.distributed", NULL };
	struct rv_proc_opts o = { .argv = argv, .io = { { RV_PROC_NULL, -1 } } };
	int st = -1;
	struct rv_buf out = { 0 };
	int r = rv_proc_run(&o, 60000, &st, &out);
	rv_buf_release(&out);
	if (r < 0)
		return "/usr/bin/python3 could not be run";
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return "/usr/bin/python3 cannot import torch (install python3-torch)";
	return NULL;
}

static const char *torch_missing;

/* What stands in for the suite where torch is missing: a counted skip (a
 * failure under CI=true, which installs python3-torch). */
START_TEST(test_warm_needs_torch)
{
	RV_TEST_SKIP(true, "%s: the warm interpreter NOT TESTED", torch_missing);
}
END_TEST

static Suite *warm_suite(void)
{
	/* As rover-run starts it for several workers: a threaded BLAS build
	 * (OpenBLAS's pthread one) would otherwise start a pool at import. */
	setenv("OMP_NUM_THREADS", "1", 1);
	torch_missing = no_torch();
	if (torch_missing)
		return RV_TEST_SUITE("warm", RV_TEST_TCASE("warm", 120, test_warm_needs_torch));
	TCase *tc =
		RV_TEST_TCASE("warm", 120, test_start_failures_say_why,
			      test_pool_stopped_by_fork_handler, test_jemalloc_background_thread,
			      test_worker_sees_its_argv_env_cwd_path, test_same_as_a_fresh_python,
			      test_output_whole_even_when_killed,
			      test_exit_codes_signals_tracebacks, test_random_state_differs,
			      test_twenty_spawns_one_thread, test_held_standbys_are_not_replaced,
			      test_refusals_keep_it_usable, test_dead_interpreter_fails_cleanly,
			      test_silent_interpreter_times_out, test_workers_die_with_the_agent,
			      test_gloo_all_reduce_between_warm_workers);
	tcase_add_checked_fixture(tc, setup, teardown);
	return RV_TEST_SUITE("warm", tc);
}

RV_TEST_MAIN(warm_suite)
