/*
 * check_gpu.c: the GPU probe.  The real rover-gpuinfo is run through
 * rv_gpu_probe (this host has no GPU, so it must say so with count 0 and a
 * reason, and exit 0); the line parser takes what a GPU host prints and
 * refuses what is not the contract; a probe that hangs is killed in time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpu.h"
#include "testutil.h"

static void path_with_bin_dir(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s:%s", dir,
		 getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	setenv("PATH", path, 1);
}

START_TEST(test_probe_real_binary)
{
	const char *bin = getenv("ROVER_BIN_DIR") ? getenv("ROVER_BIN_DIR") : "build/bin";
	path_with_bin_dir(bin);
	struct rv_gpu_info g;
	struct rv_err e = { 0 };
	int rc = rv_gpu_probe(&g, 20000, &e);
	ck_assert_msg(rc == 0, "probe: %d %s", rc, e.msg);
	ck_assert_int_ge(g.count, 0);
	if (access("/dev/nvidia0", F_OK) != 0) {
		/* no GPU on this host: count 0 with the runtime's reason */
		ck_assert_int_eq(g.count, 0);
		ck_assert_msg(g.why[0] != '\0', "no reason given");
	}
	for (int i = 0; i < g.count; i++)
		ck_assert_int_gt(g.dev[i].total_mb, 0);
}
END_TEST

START_TEST(test_parse_gpu_host)
{
	const char *text = "count 2\n"
			   "gpu 0 81559 80940 9 0 NVIDIA H100 80GB HBM3\n"
			   "util 0 87 41\n"
			   "gpu 1 81559 1024 9 0 NVIDIA H100 80GB HBM3\n";
	struct rv_gpu_info g;
	ck_assert_int_eq(rv_gpu_parse(text, strlen(text), &g, NULL), 0);
	ck_assert_int_eq(g.count, 2);
	ck_assert_int_eq(g.dev[1].index, 1);
	ck_assert_int_eq(g.dev[0].total_mb, 81559);
	ck_assert_int_eq(g.dev[1].free_mb, 1024);
	ck_assert_int_eq(g.dev[0].cc_major, 9);
	ck_assert_str_eq(g.dev[0].name, "NVIDIA H100 80GB HBM3");
	ck_assert_str_eq(g.why, "");
	/* utilisation where NVML read it, unknown (-1) where it did not */
	ck_assert_int_eq(g.dev[0].util_pct, 87);
	ck_assert_int_eq(g.dev[0].mem_util_pct, 41);
	ck_assert_int_eq(g.dev[1].util_pct, -1);
	ck_assert_int_eq(g.dev[1].mem_util_pct, -1);
}
END_TEST

START_TEST(test_parse_refuses_garbage)
{
	static const char *const bad[] = {
		"",                                         /* no count */
		"count 1\n",                                /* a device missing */
		"count 1\ngpu x 1 1 1 1 a\n",               /* not a number */
		"count 0\nhello\n",                         /* unknown record */
		"count -1\n",                               /* negative */
		"count 1\ngpu 0 -5 1 8 0 name\n",           /* negative memory */
		"count 1\ngpu 0 5 1 8 0 a\nutil 0 101 1\n", /* over 100% */
		"count 1\ngpu 0 5 1 8 0 a\nutil 1 50 1\n",  /* a device not described */
		"count 1\nutil 0 50 1\ngpu 0 5 1 8 0 a\n",  /* before its device */
		"count 1\ngpu 0 5 1 8 0 a\nutil 0 50\n",    /* a field missing */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct rv_gpu_info g;
		struct rv_err e = { 0 };
		ck_assert_msg(rv_gpu_parse(bad[i], strlen(bad[i]), &g, &e) == -EPROTO, "case %zu",
			      i);
		ck_assert_msg(strstr(e.msg, "rover-gpuinfo") != NULL, "case %zu: %s", i, e.msg);
	}
	struct rv_gpu_info g;
	const char *none = "count 0\nwhy no CUDA-capable device is detected\n";
	ck_assert_int_eq(rv_gpu_parse(none, strlen(none), &g, NULL), 0);
	ck_assert_int_eq(g.count, 0);
	ck_assert_str_eq(g.why, "no CUDA-capable device is detected");
}
END_TEST

/* A rover-gpuinfo that hangs (a wedged driver) is killed at the timeout. */
START_TEST(test_probe_hang_times_out)
{
	char dir[] = "/tmp/rv-gpu-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char script[256];
	snprintf(script, sizeof(script), "%s/rover-gpuinfo", dir);
	rv_test_write_file(script, "#!/bin/sh\nexec /bin/sleep 30\n");
	chmod(script, 0755);
	setenv("PATH", dir, 1);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	struct rv_gpu_info g;
	struct rv_err e = { 0 };
	ck_assert_int_eq(rv_gpu_probe(&g, 300, &e), -ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ck_assert_msg(b.tv_sec - a.tv_sec < 5, "probe took %ld s", (long)(b.tv_sec - a.tv_sec));
	ck_assert_ptr_nonnull(strstr(e.msg, "did not answer"));
	unlink(script);
	rmdir(dir);
}
END_TEST

static Suite *gpu_suite(void)
{
	TCase *tc = RV_TEST_TCASE("probe", 30, test_probe_real_binary, test_parse_gpu_host,
				  test_parse_refuses_garbage, test_probe_hang_times_out);
	return RV_TEST_SUITE("gpu", tc);
}

RV_TEST_MAIN(gpu_suite)
