/*
 * flash_ckpt: what a flash checkpoint of 1 GiB of tensors costs the
 * training loop, against the bound (memcpy between two pre-faulted buffers)
 * and against the usual way (torch.save of the same bytes to local disk,
 * then fsync), in the same run.  The state is 8 buffers of 128 MiB; the
 * save stall is the time rv_trainer_save blocks its caller (no master: the
 * data position report is not in it), mean of 3 saves after a warm-up.
 * ROVER_BENCH_MIB picks another size.  Ends with:
 *   bench=flash_ckpt size_mib=N memcpy_gibps=N save_s=N save_gibps=N
 *         torch_save_s=N speedup=N
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rover_trainer.h"

#define NBUF 8

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

int main(void)
{
	long mib = 1024;
	const char *e = getenv("ROVER_BENCH_MIB");
	if (e && atol(e) >= NBUF)
		mib = atol(e);
	uint64_t each = (uint64_t)mib * (1 << 20) / NBUF, total = each * NBUF;
	unsigned char *src[NBUF];
	unsigned char *dst = malloc(total);
	if (!dst)
		return 1;
	for (int i = 0; i < NBUF; i++) {
		if (!(src[i] = malloc(each)))
			return 1;
		for (uint64_t k = 0; k < each; k += 4096)
			src[i][k] = (unsigned char)(k >> 12 ^ (uint64_t)i);
	}
	memset(dst, 1, total); /* fault every page in */

	/* the bound: memcpy between two pre-faulted buffers, best of 3 */
	double mc = 1e9;
	for (int r = 0; r < 3; r++) {
		double t0 = now_s();
		for (int i = 0; i < NBUF; i++)
			memcpy(dst + i * each, src[i], each);
		double t = now_s() - t0;
		mc = t < mc ? t : mc;
	}
	free(dst);
	double memcpy_gibps = (double)total / (1 << 30) / mc;
	fprintf(stderr, "memcpy: %.3f s for %ld MiB\n", mc, mib);

	char job[64];
	snprintf(job, sizeof(job), "bench-%d", (int)getpid());
	struct rv_trainer_opts o = { .job = job, .node = "bench", .world_size = 1 };
	struct rv_err err = { 0 };
	struct rv_trainer *t = rv_trainer_open_opts(&o, &err);
	if (!t) {
		fprintf(stderr, "error: %s\n", err.msg);
		return 1;
	}
	const void *bufs[NBUF];
	uint64_t sizes[NBUF];
	for (int i = 0; i < NBUF; i++) {
		bufs[i] = src[i];
		sizes[i] = each;
	}
	int rc = rv_trainer_reserve(t, total, &err);
	struct rv_trainer_save_stats st;
	double stall = 0, copy = 0;
	enum { SAVES = 3 };
	for (int r = 0; rc == 0 && r <= SAVES; r++) {
		rc = rv_trainer_save(t, r, bufs, sizes, NBUF, &st, &err);
		if (r > 0) { /* the first one is the warm-up */
			stall += st.stall_s;
			copy += st.copy_s;
		}
	}
	if (rc < 0) {
		fprintf(stderr, "error: could not save: %s\n", err.msg);
		rv_trainer_unlink(job, 0);
		return 1;
	}
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
	double save_s = stall / SAVES;
	fprintf(stderr, "save: stall %.3f s, copy+crc %.3f s\n", save_s, copy / SAVES);

	double ts = torch_save_s(mib);
	if (ts < 0)
		fprintf(stderr, "torch.save failed (no /usr/bin/python3 with torch?)\n");
	printf("bench=flash_ckpt size_mib=%ld memcpy_gibps=%.2f save_s=%.4f save_gibps=%.2f "
	       "torch_save_s=%.3f speedup=%.1f\n",
	       mib, memcpy_gibps, save_s, (double)total / (1 << 30) / save_s, ts,
	       ts > 0 ? ts / save_s : 0);
	return 0;
}
