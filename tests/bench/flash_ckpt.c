/*
 * flash_ckpt: what a flash checkpoint of 1 GiB of tensors costs the
 * training loop, against the bound (memcpy between two pre-faulted buffers)
 * and against the usual way (torch.save of the same bytes to local disk,
 * then fsync), in the same run.  The state is 8 buffers of 128 MiB.
 *   - memcpy and the synchronous save (rv_trainer_save, the time it blocks
 *     its caller; no master: the data position report is not in it) run in
 *     turn, ROUNDS times each after a warm-up save, and the median of each
 *     is taken: a machine shared with other work slows both alike.
 *   - the overlapped save: rv_trainer_save_start, then the next step's
 *     forward and backward, simulated by a sleep of STEP_S on the loop's
 *     thread (the core is left to the copy, as while a step waits on
 *     communication or a GPU), then rv_trainer_save_wait before the update;
 *     the stall is the time the two calls block, mean of ROUNDS steps.  The
 *     same with a busy loop in place of the sleep (a step that keeps its
 *     core, arithmetic in registers) is printed as stall_busy_ms_per_gib;
 *     copy_1thread_gibps is the rate of the overlapped save's one thread
 *     (the synchronous save copies with two).
 * ROVER_BENCH_MIB picks another size.  Ends with:
 *   bench=flash_ckpt size_mib=N memcpy_gibps=N save_s=N save_gibps=N
 *         save_vs_memcpy=N torch_save_s=N speedup=N step_s=0.5
 *         stall_ms_per_gib=N stall_busy_ms_per_gib=N copy_1thread_gibps=N
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rover_trainer.h"

#define NBUF   8
#define ROUNDS 5
#define STEP_S 0.5 /* a step's forward and backward */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* torch.save of mib MiB of float32 tensors in NBUF tensors, then fsync:
 * the seconds the script prints, or -1. */
static double torch_save_s(long mib)
{
	char dir[] = "/var/tmp/rover-flash-XXXXXX";
	if (!mkdtemp(dir))
		return -1;
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 -c '\n"
		 "import os, time, torch\n"
		 "n = %ld * (1 << 20) // 4 // %d\n"
		 "state = {\"t%%d\" %% i: torch.rand(n) for i in range(%d)}\n"
		 "path = \"%s/ckpt.pt\"\n"
		 "t0 = time.perf_counter()\n"
		 "with open(path, \"wb\") as f:\n"
		 "    torch.save(state, f)\n"
		 "    f.flush()\n"
		 "    os.fsync(f.fileno())\n"
		 "print(time.perf_counter() - t0)\n"
		 "os.unlink(path)\n'",
		 mib, NBUF, NBUF, dir);
	FILE *p = popen(cmd, "r");
	double s = -1;
	if (p) {
		if (fscanf(p, "%lf", &s) != 1)
			s = -1;
		if (pclose(p) != 0)
			s = -1;
	}
	rmdir(dir);
	return s;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The next step's forward and backward: a sleep, or busy arithmetic in
 * registers (no memory traffic) for as long. */
static void step_work(bool busy)
{
	if (!busy) {
		struct timespec ts = { 0, (long)(STEP_S * 1e9) };
		while (nanosleep(&ts, &ts) < 0)
			;
		return;
	}
	volatile uint64_t sink = 0;
	uint64_t x = 1;
	for (double t0 = now_s(); now_s() - t0 < STEP_S;) {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		sink = x;
	}
	(void)sink;
}

/* ROUNDS overlapped saves from step first on, each followed by a step: the
 * mean seconds rv_trainer_save_start and rv_trainer_save_wait blocked, or
 * -1; *copy_s the mean seconds the save's thread copied. */
static double overlapped(struct rv_trainer *t, int64_t first, const void *const *bufs,
			 const uint64_t *sizes, bool busy, double *copy_s)
{
	double stall = 0;
	*copy_s = 0;
	for (int r = 0; r < ROUNDS; r++) {
		struct rv_err err = { 0 };
		double t0 = now_s();
		if (rv_trainer_save_start(t, first + r, bufs, sizes, NBUF, &err) < 0) {
			fprintf(stderr, "error: could not start a save: %s\n", err.msg);
			return -1;
		}
		stall += now_s() - t0;
		step_work(busy);
		t0 = now_s();
		struct rv_trainer_save_stats st;
		rv_trainer_save_wait(t, &st); /* then the update may write the buffers */
		stall += now_s() - t0;
		*copy_s += st.copy_s / ROUNDS;
	}
	return stall / ROUNDS;
}

/* memcpy into dst and rv_trainer_save in turn, ROUNDS times: the median
 * seconds of each into *mc and *save; 0 or -1. */
static int synchronous(struct rv_trainer *t, unsigned char *dst, const void *const *bufs,
		       const uint64_t *sizes, double *mc, double *save)
{
	double m[ROUNDS], s[ROUNDS];
	for (int r = 0; r < ROUNDS; r++) {
		double t0 = now_s();
		for (int i = 0; i < NBUF; i++)
			memcpy(dst + i * sizes[0], bufs[i], sizes[i]);
		m[r] = now_s() - t0;
		struct rv_err err = { 0 };
		t0 = now_s();
		if (rv_trainer_save(t, 1 + r, bufs, sizes, NBUF, NULL, &err) < 0) {
			fprintf(stderr, "error: could not save: %s\n", err.msg);
			return -1;
		}
		s[r] = now_s() - t0;
		fprintf(stderr, "round %d: memcpy %.3f s, save %.3f s\n", r, m[r], s[r]);
	}
	*mc = median(m, ROUNDS);
	*save = median(s, ROUNDS);
	return 0;
}

int main(void)
{
	long mib = 1024;
	const char *e = getenv("ROVER_BENCH_MIB");
	if (e && atol(e) >= NBUF)
		mib = atol(e);
	uint64_t each = (uint64_t)mib * (1 << 20) / NBUF, total = each * NBUF;
	double gib = (double)total / (1 << 30);
	unsigned char *src[NBUF];
	unsigned char *dst = malloc(total);
	if (!dst)
		return 1;
	const void *bufs[NBUF];
	uint64_t sizes[NBUF];
	for (int i = 0; i < NBUF; i++) {
		if (!(src[i] = malloc(each)))
			return 1;
		for (uint64_t k = 0; k < each; k += 4096)
			src[i][k] = (unsigned char)(k >> 12 ^ (uint64_t)i);
		bufs[i] = src[i];
		sizes[i] = each;
	}
	memset(dst, 1, total); /* fault every page in */

	char job[64];
	snprintf(job, sizeof(job), "bench-%d", (int)getpid());
	struct rv_trainer_opts o = { .job = job, .node = "bench", .world_size = 1 };
	struct rv_err err = { 0 };
	struct rv_trainer *t = rv_trainer_open_opts(&o, &err);
	if (!t) {
		fprintf(stderr, "error: %s\n", err.msg);
		return 1;
	}
	double mc = 0, save_s = 0, stall = -1, busy = -1, copy1 = 0, copy2 = 0;
	int rc = rv_trainer_reserve(t, total, &err);
	if (rc == 0) /* the warm-up */
		rc = rv_trainer_save(t, 0, bufs, sizes, NBUF, NULL, &err);
	if (rc == 0)
		rc = synchronous(t, dst, bufs, sizes, &mc, &save_s);
	free(dst);
	if (rc == 0 && (stall = overlapped(t, 100, bufs, sizes, false, &copy1)) < 0)
		rc = -1;
	if (rc == 0 && (busy = overlapped(t, 200, bufs, sizes, true, &copy2)) < 0)
		rc = -1;
	if (rc < 0) {
		fprintf(stderr, "error: could not save: %s\n", err.msg);
		rv_trainer_unlink(job, 0);
		return 1;
	}
	fprintf(stderr,
		"memcpy %.3f s, save %.3f s (medians); overlapped: stall %.4f s (sleep), "
		"%.4f s (busy)\n",
		mc, save_s, stall, busy);
	int64_t step;
	double l0 = now_s();
	int nb;
	rc = rv_trainer_load(t, &step, &nb, &err);
	fprintf(stderr, "load (both slots' CRCs checked): %.3f s, step %lld\n", now_s() - l0,
		(long long)step);
	rv_trainer_close(t);
	rv_trainer_unlink(job, 0);
	for (int i = 0; i < NBUF; i++)
		free(src[i]);

	double ts = torch_save_s(mib);
	if (ts < 0)
		fprintf(stderr, "torch.save failed (no /usr/bin/python3 with torch?)\n");
	printf("bench=flash_ckpt size_mib=%ld memcpy_gibps=%.2f save_s=%.4f save_gibps=%.2f "
	       "save_vs_memcpy=%.2f torch_save_s=%.3f speedup=%.1f step_s=%.1f "
	       "stall_ms_per_gib=%.1f stall_busy_ms_per_gib=%.1f copy_1thread_gibps=%.2f\n",
	       mib, gib / mc, save_s, gib / save_s, mc / save_s, ts, ts > 0 ? ts / save_s : 0,
	       STEP_S, stall * 1e3 / gib, busy * 1e3 / gib, gib / copy1);
	return 0;
}
