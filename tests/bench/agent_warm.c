/*
 * agent_warm: how long a restarted worker takes to print its first line,
 * started cold (fork + exec of /usr/bin/python3, as torchrun does) and
 * forked from a warm interpreter (agent/warm.c), in the same run.  The
 * worker runs `import torch, torch.distributed` and prints; the figure is
 * from the spawn request to the first line read, median of 5 each,
 * alternating.  Also shown on stderr: how long warm_spawn() itself takes,
 * the same without standby workers (each forked on request), and two
 * workers started back to back from one interpreter against one interpreter
 * per rank (the choice between a shared one and one per rank), with an
 * interpreter's memory.  Ends with:
 *   bench=agent_warm cold_ms=N warm_ms=N ratio=R
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/warm.h"
#include "parse.h"
#include "proc.h"

#define RUNS 5

static const char *script_path;

/* Read from fd until a newline; returns the time it arrived (-1: none). */
static int64_t first_line(int fd)
{
	int64_t until = rv_mono_ms() + 60000;
	char c;
	while (rv_mono_ms() < until) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, 1000) <= 0)
			continue;
		ssize_t n = read(fd, &c, 1);
		if (n <= 0)
			return -1;
		if (c == '\n')
			return rv_mono_ms();
	}
	return -1;
}

static int64_t cold_once(void)
{
	const char *argv[] = { "/usr/bin/python3", script_path, NULL };
	struct rv_proc_opts o = { .argv = argv,
				  .io = { { RV_PROC_NULL, -1 }, { RV_PROC_PIPE, -1 } },
				  .pdeathsig = 9 };
	struct rv_proc p;
	int64_t t0 = rv_mono_ms();
	if (rv_proc_spawn(&p, &o) < 0)
		return -1;
	int64_t t1 = first_line(p.fd[1]);
	rv_proc_wait(&p, 30000, NULL);
	rv_proc_release(&p);
	return t1 < 0 ? -1 : t1 - t0;
}

/* Fork one worker whose stdout is *fd (read end returned). */
static int warm_go(struct warm *w, struct rv_proc *p, int *fd)
{
	int pp[2];
	if (pipe2(pp, O_CLOEXEC) < 0)
		return -errno;
	const char *argv[] = { script_path, NULL };
	struct warm_req rq = { .argv = argv, .fd = { -1, pp[1], -1 } };
	struct rv_err e = { 0 };
	int r = warm_spawn(w, &rq, p, &e);
	close(pp[1]);
	if (r < 0) {
		fprintf(stderr, "agent_warm: warm_spawn: %s\n", e.msg);
		close(pp[0]);
		return r;
	}
	*fd = pp[0];
	return 0;
}

static int64_t warm_once(struct warm *w, int64_t *spawn_ms)
{
	struct rv_proc p;
	int fd;
	int64_t t0 = rv_mono_ms();
	if (warm_go(w, &p, &fd) < 0)
		return -1;
	*spawn_ms = rv_mono_ms() - t0;
	int64_t t1 = first_line(fd);
	close(fd);
	rv_proc_wait(&p, 30000, NULL);
	rv_proc_release(&p);
	return t1 < 0 ? -1 : t1 - t0;
}

/* Two workers, from w1 then w2 (the same or not); ms until both printed. */
static int64_t pair_once(struct warm *w1, struct warm *w2)
{
	struct rv_proc p[2];
	int fd[2];
	int64_t t0 = rv_mono_ms();
	if (warm_go(w1, &p[0], &fd[0]) < 0)
		return -1;
	if (warm_go(w2, &p[1], &fd[1]) < 0) {
		rv_proc_stop(&p[0], 1000, NULL);
		rv_proc_release(&p[0]);
		close(fd[0]);
		return -1;
	}
	int64_t a = first_line(fd[0]), b = first_line(fd[1]);
	for (int i = 0; i < 2; i++) {
		close(fd[i]);
		rv_proc_wait(&p[i], 30000, NULL);
		rv_proc_release(&p[i]);
	}
	return a < 0 || b < 0 ? -1 : (a > b ? a : b) - t0;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int64_t median(int64_t *v)
{
	qsort(v, RUNS, sizeof(*v), cmp64);
	return v[RUNS / 2];
}

/* Resident set of pid, MiB. */
static long rss_mib(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	FILE *f = fopen(path, "r");
	long kb = -1;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = strtol(line + 6, NULL, 10);
	if (f)
		fclose(f);
	return kb < 0 ? -1 : kb / 1024;
}

int main(void)
{
	char dir[] = "/tmp/rover-bench-warm-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	static char path[128];
	snprintf(path, sizeof(path), "%s/first.py", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return 1;
	fputs("import torch, torch.distributed\nprint('up', flush=True)\n", f);
	fclose(f);
	script_path = path;

	/* w: shared by 2 ranks, 2 standbys (the default set-up); w1, w2: one
	 * per rank, 1 standby each; wd: no standby, each worker forked on
	 * request (through the intermediate). */
	struct warm w, w1, w2, wd;
	struct rv_err e = { 0 };
	if (warm_start(&w, &(struct warm_opts){ .standby = 2 }, &e) < 0 ||
	    warm_start(&w1, NULL, &e) < 0 || warm_start(&w2, NULL, &e) < 0 ||
	    warm_start(&wd, &(struct warm_opts){ .standby = -1 }, &e) < 0) {
		fprintf(stderr, "agent_warm: could not start the warm interpreter: %s\n", e.msg);
		return 1;
	}
	fprintf(stderr, "agent_warm: warm interpreters up (imports %d ms, RSS %ld MiB each)\n",
		w.import_ms, rss_mib(w.proc.pid));
	int64_t cold[RUNS], warm[RUNS], spawn[RUNS], direct[RUNS], dspawn[RUNS], shared[RUNS],
		per_rank[RUNS];
	cold_once(); /* page cache warm for both */
	for (int i = 0; i < RUNS; i++) {
		cold[i] = cold_once();
		usleep(100000); /* standbys refilled: a restart comes long after the last */
		warm[i] = warm_once(&w, &spawn[i]);
		direct[i] = warm_once(&wd, &dspawn[i]);
		usleep(100000);
		shared[i] = pair_once(&w, &w);
		usleep(100000);
		per_rank[i] = pair_once(&w1, &w2);
		fprintf(stderr,
			"agent_warm: run %d cold=%lld warm=%lld (warm_spawn %lld) "
			"no-standby=%lld (warm_spawn %lld); 2 workers: shared=%lld per-rank=%lld "
			"ms\n",
			i, (long long)cold[i], (long long)warm[i], (long long)spawn[i],
			(long long)direct[i], (long long)dspawn[i], (long long)shared[i],
			(long long)per_rank[i]);
		if (cold[i] < 0 || warm[i] < 0 || direct[i] < 0 || shared[i] < 0 || per_rank[i] < 0)
			return 1;
	}
	int64_t c = median(cold), wm = median(warm);
	fprintf(stderr,
		"agent_warm: medians: warm_spawn %lld ms; without standby %lld ms (warm_spawn "
		"%lld ms); 2 workers from one interpreter %lld ms, from one each %lld ms\n",
		(long long)median(spawn), (long long)median(direct), (long long)median(dspawn),
		(long long)median(shared), (long long)median(per_rank));
	warm_stop(&w);
	warm_stop(&w1);
	warm_stop(&w2);
	warm_stop(&wd);
	unlink(path);
	rmdir(dir);
	printf("bench=agent_warm cold_ms=%lld warm_ms=%lld ratio=%.3f\n", (long long)c,
	       (long long)wm, c > 0 ? (double)wm / (double)c : 0.0);
	return 0;
}
