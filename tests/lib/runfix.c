/*
 * runfix.c: the real rover-run in tests (runfix.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "brainfix.h"
#include "parse.h"
#include "runfix.h"

const char rv_test_orphans_script[] =
	"import os, subprocess, sys, time\n"
	"rank = int(os.environ['RANK'])\n"
	"subprocess.Popen(['sleep', '300'], start_new_session=rank == 0)\n"
	"if rank == 1:\n"
	"    from torch.utils.data import DataLoader\n"
	"    it = iter(DataLoader(list(range(64)), num_workers=2, persistent_workers=True))\n"
	"    next(it)\n"
	"print('ready', flush=True)\n"
	"time.sleep(300)\n";

int rv_test_run_init(struct rv_test_run *r)
{
	memset(r, 0, sizeof(*r));
	r->proc.pidfd = -1;
	r->status = -1;
	snprintf(r->dir, sizeof(r->dir), "/tmp/rover-test-run-XXXXXX");
	if (!mkdtemp(r->dir))
		return -errno;
	snprintf(r->out, sizeof(r->out), "%s/stdout", r->dir);
	snprintf(r->err, sizeof(r->err), "%s/stderr", r->dir);
	snprintf(r->tag, sizeof(r->tag), "%s", strrchr(r->dir, '-') + 1);
	return 0;
}

int rv_test_run_start(struct rv_test_run *r, const char *const *args, const char *const *env)
{
	const char *d = getenv("ROVER_BIN_DIR");
	char exe[300], tagenv[96];
	snprintf(exe, sizeof(exe), "%s/rover-run", d && *d ? d : "build/bin");
	snprintf(tagenv, sizeof(tagenv), "ROVER_TEST_TAG=%s", r->tag);
	const char *argv[64];
	int n = 0;
	for (const char *const *w = r->wrap; w && *w && n < 16; w++)
		argv[n++] = *w;
	argv[n++] = exe;
	while (args && *args && n < 63)
		argv[n++] = *args++;
	argv[n] = NULL;
	const char *envv[32] = { "PYTHON_EXEC=/usr/bin/python3", tagenv };
	int ne = 2;
	while (env && *env && ne < 31)
		envv[ne++] = *env++;
	envv[ne] = NULL;
	rv_proc_release(&r->proc); /* a run before, already waited for */
	int ofd = open(r->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int efd = open(r->err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	struct rv_proc_opts o = {
		.argv = argv,
		.env = envv,
		.io = { { RV_PROC_NULL, 0 }, { RV_PROC_FD, ofd }, { RV_PROC_FD, efd } },
		.pdeathsig = SIGKILL,
	};
	int rc = ofd < 0 || efd < 0 ? -EIO : rv_proc_spawn(&r->proc, &o);
	if (ofd >= 0)
		close(ofd);
	if (efd >= 0)
		close(efd);
	return rc;
}

int rv_test_run_wait(struct rv_test_run *r, int timeout_ms)
{
	int st;
	int rc = rv_proc_wait(&r->proc, timeout_ms, &st);
	if (rc < 0)
		return rc;
	r->status = st;
	return st;
}

int rv_test_run_signal(struct rv_test_run *r, int sig)
{
	if (r->proc.pid <= 0)
		return -ESRCH;
	return kill(r->proc.pid, sig) < 0 ? -errno : 0;
}

char *rv_test_run_output(const struct rv_test_run *r, int which)
{
	char *s = rv_test_read_file(which == 1 ? r->out : r->err);
	return s ? s : strdup("");
}

bool rv_test_run_wait_for(const struct rv_test_run *r, int which, const char *needle,
			  int timeout_ms)
{
	int64_t until = rv_mono_ms() + timeout_ms;
	do {
		char *s = rv_test_run_output(r, which);
		bool found = s && strstr(s, needle);
		free(s);
		if (found)
			return true;
		usleep(50 * 1000);
	} while (rv_mono_ms() < until);
	return false;
}

/* /proc/pid/environ as one buffer of NUL-separated entries; its length. */
static size_t read_environ(pid_t pid, char *buf, size_t size)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t len = 0;
	ssize_t k;
	while (len < size - 1 && (k = read(fd, buf + len, size - 1 - len)) > 0)
		len += (size_t)k;
	close(fd);
	buf[len] = 0;
	return len;
}

void rv_test_proc_env(pid_t pid, const char *key, char *out, size_t size)
{
	static char buf[1 << 17];
	size_t len = read_environ(pid, buf, sizeof(buf));
	size_t klen = strlen(key);
	out[0] = 0;
	for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
		if (!strncmp(buf + i, key, klen) && buf[i + klen] == '=') {
			snprintf(out, size, "%s", buf + i + klen + 1);
			return;
		}
}

/* /proc/pid/stat into buf (size bytes, NUL-ended); the ')' closing the
 * command name, or NULL when pid is gone. */
static char *proc_stat_read(pid_t pid, char *buf, size_t size)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t k = read(fd, buf, size - 1);
	close(fd);
	if (k <= 0)
		return NULL;
	buf[k] = 0;
	return strrchr(buf, ')');
}

/* State, parent and command name of pid from /proc/pid/stat; 0 or -1. */
static int proc_stat_comm(pid_t pid, char *state, pid_t *ppid, char *comm, size_t size)
{
	char buf[512];
	char *rp = proc_stat_read(pid, buf, sizeof(buf));
	char *lp = rp ? strchr(buf, '(') : NULL;
	int pp;
	if (!rp || !lp || lp > rp || sscanf(rp + 2, "%c %d", state, &pp) != 2)
		return -1;
	*ppid = pp;
	if (comm)
		snprintf(comm, size, "%.*s", (int)(rp - lp - 1), lp + 1);
	return 0;
}

static int proc_stat(pid_t pid, char *state, pid_t *ppid)
{
	return proc_stat_comm(pid, state, ppid, NULL, 0);
}

/* The child of parent named rover-run (the next stage down), else 0. */
static pid_t stage_below(pid_t parent)
{
	DIR *d = opendir("/proc");
	pid_t found = 0;
	for (struct dirent *e; d && !found && (e = readdir(d));) {
		int64_t pid;
		char state, comm[32];
		pid_t ppid;
		if (rv_parse_i64(e->d_name, 1, 1 << 30, &pid) == 0 &&
		    proc_stat_comm((pid_t)pid, &state, &ppid, comm, sizeof(comm)) == 0 &&
		    ppid == parent && state != 'Z' && !strcmp(comm, "rover-run"))
			found = (pid_t)pid;
	}
	if (d)
		closedir(d);
	return found;
}

pid_t rv_test_run_supervisor(const struct rv_test_run *r)
{
	pid_t p = r->proc.pid;
	for (int depth = 0; depth < 2 && p > 0; depth++) {
		pid_t below = stage_below(p);
		if (!below)
			break;
		p = below;
	}
	return p;
}

/* The last pid of the NSpid line of /proc/pid/status (the pid as its own
 * namespace knows it); 0 when unreadable. */
static pid_t ns_pid_of(pid_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (k <= 0)
		return 0;
	buf[k] = 0;
	char *line = strstr(buf, "NSpid:");
	if (!line)
		return pid;
	char *end = strchr(line, '\n');
	if (end)
		*end = 0;
	char *last = strrchr(line, '\t');
	char *sp = strrchr(line, ' ');
	if (!last || (sp && sp > last))
		last = sp;
	return last ? (pid_t)atoi(last + 1) : 0;
}

static int scan(const struct rv_test_run *r, pid_t parent, int rank, pid_t *pids, int max)
{
	if (parent > 0 && parent == r->proc.pid)
		parent = rv_test_run_supervisor(r);
	DIR *d = opendir("/proc");
	int n = 0;
	struct dirent *e;
	char want[96], v[64];
	snprintf(want, sizeof(want), "%s", r->tag);
	while (d && (e = readdir(d))) {
		int64_t pid;
		char state;
		pid_t ppid;
		if (rv_parse_i64(e->d_name, 1, 1 << 30, &pid) < 0 || pid == getpid() ||
		    pid == r->proc.pid)
			continue;
		if (proc_stat((pid_t)pid, &state, &ppid) < 0 || state == 'Z')
			continue;
		if (parent > 0 && ppid != parent)
			continue;
		rv_test_proc_env((pid_t)pid, "ROVER_TEST_TAG", v, sizeof(v));
		if (strcmp(v, want))
			continue;
		if (rank >= -1) {
			/* a worker: RANK set (not rover-run's warm interpreter or
			 * its standby workers, which carry the tag too) */
			rv_test_proc_env((pid_t)pid, "RANK", v, sizeof(v));
			int64_t rk;
			if (rv_parse_i64(v, 0, 1 << 30, &rk) < 0 || (rank >= 0 && rk != rank))
				continue;
		}
		if (pids && n < max)
			pids[n] = (pid_t)pid;
		n++;
	}
	if (d)
		closedir(d);
	return n;
}

int rv_test_run_workers(const struct rv_test_run *r, pid_t parent, int rank, pid_t *pids, int max)
{
	return scan(r, parent, rank, pids, max);
}

pid_t rv_test_run_last_worker(const struct rv_test_run *r)
{
	char *out = rv_test_run_output(r, 2);
	const char *p = out, *last = NULL;
	while (p && (p = strstr(p, "msg=\"worker started\""))) {
		last = p;
		p++;
	}
	const char *at = last ? strstr(last, " pid=") : NULL;
	long ns_pid = at ? strtol(at + 5, NULL, 10) : 0;
	free(out);
	/* the pid in rover-run's own PID namespace, as it logs it */
	pid_t pid = ns_pid > 0 ? rv_test_run_host_pid(r, (pid_t)ns_pid) : 0;
	return pid > 0 && kill(pid, 0) == 0 ? pid : 0;
}

/* Field 22 of /proc/pid/stat (start time, clock ticks after boot) and the
 * session (field 6); -1 when gone or a zombie. */
static int64_t proc_start(pid_t pid, pid_t *sid, pid_t *ppid)
{
	char buf[1024];
	char *rp = proc_stat_read(pid, buf, sizeof(buf));
	char state;
	int pp, pg, se;
	long long start;
	if (!rp ||
	    sscanf(rp + 2,
		   "%c %d %d %d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
		   "%*d %lld",
		   &state, &pp, &pg, &se, &start) != 5 ||
	    state == 'Z')
		return -1;
	if (sid)
		*sid = se;
	if (ppid)
		*ppid = pp;
	return start;
}

int rv_test_proc_tree(pid_t root, struct rv_test_pid *out, int max)
{
	int n = 0;
	if (max < 1 || (out[0].start = proc_start(root, &out[0].sid, NULL)) < 0)
		return 0;
	out[n++].pid = root;
	/* breadth first: each pass over /proc adds the children of the known */
	for (int added = 1; added && n < max;) {
		added = 0;
		DIR *d = opendir("/proc");
		for (struct dirent *e; d && n < max && (e = readdir(d));) {
			int64_t pid;
			pid_t sid, ppid;
			if (rv_parse_i64(e->d_name, 1, 1 << 30, &pid) < 0)
				continue;
			int64_t start = proc_start((pid_t)pid, &sid, &ppid);
			bool known = false, child = false;
			for (int i = 0; i < n; i++) {
				known = known || out[i].pid == (pid_t)pid;
				child = child || out[i].pid == ppid;
			}
			if (start < 0 || known || !child)
				continue;
			out[n++] = (struct rv_test_pid){ .pid = (pid_t)pid,
							 .sid = sid,
							 .start = start };
			added = 1;
		}
		if (d)
			closedir(d);
	}
	return n;
}

int rv_test_proc_alive(const struct rv_test_pid *p, int n)
{
	int alive = 0;
	for (int i = 0; i < n; i++)
		alive += proc_start(p[i].pid, NULL, NULL) == p[i].start;
	return alive;
}

pid_t rv_test_run_host_pid(const struct rv_test_run *r, pid_t ns_pid)
{
	pid_t pids[256];
	int n = scan(r, 0, -2, pids, 256);
	for (int i = 0; i < n && i < 256; i++)
		if (ns_pid_of(pids[i]) == ns_pid)
			return pids[i];
	return 0;
}

int rv_test_run_tagged(const struct rv_test_run *r)
{
	return scan(r, 0, -2, NULL, 0); /* every process, workers or not */
}

int rv_test_run_file(const struct rv_test_run *r, const char *name, const char *text, char *path,
		     size_t size)
{
	snprintf(path, size, "%s/%s", r->dir, name);
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	fputs(text, f);
	return fclose(f) == 0 ? 0 : -EIO;
}

void rv_test_run_cleanup(struct rv_test_run *r)
{
	if (r->proc.pid > 0) {
		rv_proc_kill(&r->proc, SIGKILL);
		rv_proc_wait(&r->proc, 5000, NULL);
	}
	rv_proc_release(&r->proc);
	if (r->dir[0]) {
		const char *argv[] = { "rm", "-rf", "--", r->dir, NULL };
		struct rv_proc_opts o = { .argv = argv };
		rv_proc_run(&o, 10000, NULL, NULL);
		r->dir[0] = 0;
	}
}

int rv_test_run_script(struct rv_test_run *r, const char *name, const char *text,
		       const char *const *args, const char *const *env)
{
	char path[400];
	const char *argv[64];
	int n = 0, rc = rv_test_run_init(r);
	if (rc < 0)
		return rc;
	rc = rv_test_run_file(r, name, text, path, sizeof(path));
	if (rc < 0)
		return rc;
	while (args && *args && n < 62)
		argv[n++] = *args++;
	argv[n++] = path;
	argv[n] = NULL;
	return rv_test_run_start(r, argv, env);
}

char *rv_test_run_expect_exit(struct rv_test_run *r, int code, int timeout_ms)
{
	int st = rv_test_run_wait(r, timeout_ms);
	char *err = rv_test_run_output(r, 2);
	if (!(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == code)) {
		char *out = rv_test_run_output(r, 1);
		/* the tails: check's message has a size limit */
		size_t lo = strlen(out), le = strlen(err);
		ck_abort_msg("rover-run: wait status %d, not exit %d\nstdout:\n%s\nstderr:\n%s", st,
			     code, out + (lo > 1500 ? lo - 1500 : 0),
			     err + (le > 2500 ? le - 2500 : 0));
	}
	return err;
}

void rv_test_run_end(struct rv_test_run *r)
{
	int left = rv_test_run_tagged(r);
	rv_test_run_cleanup(r);
	ck_assert_msg(left == 0, "%d process(es) of the job still run", left);
}

int rv_test_run_start_joined(struct rv_test_run *r, const char *const *args, const char *const *env,
			     int timeout_ms)
{
	int rc = rv_test_run_start(r, args, env);
	if (rc < 0)
		return rc;
	return rv_test_run_wait_for(r, 2, "joined the rendezvous", timeout_ms) ? 0 : -ETIMEDOUT;
}

void rv_test_run_kill(struct rv_test_run *r, int timeout_ms)
{
	ck_assert_int_eq(rv_test_run_signal(r, SIGKILL), 0);
	rv_test_run_wait(r, timeout_ms);
	int64_t until = rv_mono_ms() + timeout_ms;
	while (rv_test_run_tagged(r) > 0 && rv_mono_ms() < until)
		usleep(50 * 1000);
	ck_assert_msg(rv_test_run_tagged(r) == 0, "processes of a killed rover-run are left");
}

void rv_test_run_dump(const struct rv_test_run *r, int n, const char *master_log)
{
	for (int i = 0; i < n; i++) {
		char *o = rv_test_run_output(&r[i], 1), *e = rv_test_run_output(&r[i], 2);
		fprintf(stderr, "---- node %d stdout\n%s\n---- node %d stderr\n%s\n", i, o ? o : "",
			i, e ? e : "");
		free(o);
		free(e);
	}
	if (master_log) {
		char *log = rv_test_read_file(master_log);
		fprintf(stderr, "---- master log\n%s\n", log ? log : "(none)");
		free(log);
	}
}

int rv_test_count_lines(const char *path)
{
	char *s = rv_test_read_file(path);
	int n = 0;
	for (char *p = s; p && *p; p++)
		n += *p == '\n';
	free(s);
	return n;
}

bool rv_test_wait_lines(const char *path, int n, int timeout_ms)
{
	int64_t until = rv_mono_ms() + timeout_ms;
	while (rv_test_count_lines(path) < n) {
		if (rv_mono_ms() > until)
			return false;
		usleep(20 * 1000);
	}
	return true;
}

/*
 * The shard log: "RANK STEP I,I,..." per rank and step, "load S world=W"
 * at each start.  A load of S drops the lines of steps after S logged
 * before it, and the lines after it of ranks W and above; what is left
 * must hold each index of [0, size) exactly epochs times.  *lost and *twice: indices short of it and beyond it;
 * *ranks: a bit per rank seen training after the last load.
 */
void rv_test_shard_account(const char *path, long size, int epochs, long *lost, long *twice,
			   unsigned *ranks, int *loads)
{
	char *s = rv_test_read_file(path);
	ck_assert_msg(s, "no shard log %s", path);
	size_t cap = 1024, n = 0;
	struct entry {
		long step;
		char *idx;
	} *e = malloc(cap * sizeof(*e));
	*ranks = 0;
	*loads = 0;
	int world = INT_MAX;
	char *save = NULL;
	for (char *line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		long st;
		int rank;
		if (sscanf(line, "load %ld", &st) == 1) {
			size_t m = 0;
			for (size_t i = 0; i < n; i++)
				if (e[i].step <= st)
					e[m++] = e[i];
			n = m;
			*ranks = 0;
			(*loads)++;
			if (sscanf(line, "load %ld world=%d", &st, &world) != 2)
				world = INT_MAX;
			continue;
		}
		char *sp1 = strchr(line, ' ');
		ck_assert_msg(sp1 && sscanf(line, "%d %ld", &rank, &st) == 2, "bad line %s", line);
		/* a rank the world loaded last does not have: a worker of the
		 * world before, whose line landed after the new world's load */
		if (rank >= world)
			continue;
		char *sp2 = strchr(sp1 + 1, ' ');
		if (n == cap)
			e = realloc(e, (cap *= 2) * sizeof(*e));
		e[n++] = (struct entry){ st, sp2 ? sp2 + 1 : sp1 + strlen(sp1) };
		*ranks |= 1u << rank;
	}
	int *count = calloc((size_t)size, sizeof(int));
	for (size_t i = 0; i < n; i++)
		for (char *p = e[i].idx; *p;) {
			char *end;
			long v = strtol(p, &end, 10);
			ck_assert_msg(end != p && v >= 0 && v < size, "bad index in %s", e[i].idx);
			count[v]++;
			p = *end == ',' ? end + 1 : end;
		}
	*lost = *twice = 0;
	for (long i = 0; i < size; i++) {
		if (count[i] < epochs)
			*lost += epochs - count[i];
		if (count[i] > epochs)
			*twice += count[i] - epochs;
	}
	free(count);
	free(e);
	free(s);
}
