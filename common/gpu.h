/*
 * gpu.h: what GPUs this host has, asked of the CUDA runtime in a child
 * process (rover-gpuinfo), never in the caller.
 *
 * A supervisor must not load the CUDA runtime itself: a CUDA context does
 * not survive fork(), the driver starts threads, and a wedged driver hangs
 * the caller.  rv_gpu_probe() runs rover-gpuinfo (found beside our
 * executable, else on PATH) with a timeout and parses its lines.  Without a
 * GPU, without a driver, or in a build without the CUDA toolkit, the probe
 * succeeds with count 0 and the reason in why: "no GPU" is an answer, not an
 * error.  Thread-safe; each call runs its own child.
 *
 *   struct rv_gpu_info g;
 *   if (rv_gpu_probe(&g, 10000, NULL) == 0 && g.count > 0)
 *           ... one worker per g.dev[i] ...
 *
 * rover-gpuinfo's output, one record per line (the contract between the
 * two; rv_gpu_parse() reads it):
 *   count N
 *   gpu INDEX TOTAL_MB FREE_MB CC_MAJOR CC_MINOR NAME...
 *   util INDEX GPU_PCT MEM_PCT   (after its gpu line; only where the
 *                                 driver's NVML reads the device)
 *   why TEXT...            (only when N is 0)
 */
#ifndef RV_GPU_H
#define RV_GPU_H

#include <stdint.h>

#include "err.h"

#define RV_GPU_MAX 64

struct rv_gpu_dev {
	int index;        /* the CUDA runtime's device ordinal */
	int64_t total_mb; /* device memory */
	int64_t free_mb;  /* free when probed */
	int cc_major, cc_minor;
	char name[96];
	/* NVML's utilisation over its last sample period (about 1 s), percent:
	 * of the time a kernel ran, and of the time memory was read or
	 * written; -1 when not known (no NVML) */
	int util_pct, mem_util_pct;
};

struct rv_gpu_info {
	int count; /* devices found; dev[0..count-1] filled (at most RV_GPU_MAX) */
	struct rv_gpu_dev dev[RV_GPU_MAX];
	char why[160]; /* count 0: the runtime's reason ("no CUDA-capable device", "built without CUDA") */
};

/* Probe through rover-gpuinfo within timeout_ms.  0 with *out filled (count
 * may be 0, with why set); -ENOENT when rover-gpuinfo cannot be found,
 * -ETIMEDOUT (the child killed), -EPROTO for output that is not the
 * contract; detail in *err. */
int rv_gpu_probe(struct rv_gpu_info *out, int timeout_ms, struct rv_err *err);

/* Parse rover-gpuinfo's output (len bytes, need not be NUL-terminated).
 * 0, or -EPROTO naming the bad line in *err. */
int rv_gpu_parse(const char *text, size_t len, struct rv_gpu_info *out, struct rv_err *err);

#endif
