/*
 * check_oom.c: memory for nodes relaunched after OOM: steps grow with the
 * OOM count, the observed peak is honoured, caps and free capacity hold.
 */
#include <gsl/gsl_errno.h>

#include "rover_alg.h"
#include "testutil.h"

static struct rv_alg_params P;
static const struct rv_alg_limits LIM = {
	.min_workers = 1, .max_workers = 8, .node_unit = 1, .free_cpu = -1, .free_memory_mb = -1,
};

static void setup(void)
{
	rv_alg_params_default(&P);
}

START_TEST(test_steps_grow)
{
	int64_t mem = 4096, next, prev_step = 0;

	for (int k = 1; k <= 3; k++) {
		ck_assert_int_eq(rv_alg_oom_memory(mem, 0, k, &LIM, &P, &next), 1);
		double factor = (double)next / (double)mem;

		/* x2, x4, then the 64 GiB cap: geometric, the report never
		 * shows the need */
		if (k < 3)
			ck_assert_double_eq_tol(factor, k == 1 ? 2 : 4, 1e-3);
		ck_assert_int_gt(next - mem, prev_step);
		prev_step = next - mem;
		mem = next;
	}
	ck_assert_int_eq(mem, 65536); /* 4096 * 2 * 4, then capped */
}
END_TEST

START_TEST(test_peak_and_cap)
{
	int64_t next;

	/* the peak (with margin) wins over a small step */
	ck_assert_int_eq(rv_alg_oom_memory(4096, 8000, 1, &LIM, &P, &next), 1);
	ck_assert_int_eq(next, 9600);
	/* the cap */
	ck_assert_int_eq(rv_alg_oom_memory(60000, 0, 2, &LIM, &P, &next), 1);
	ck_assert_int_eq(next, 65536);
	ck_assert_int_eq(rv_alg_oom_memory(65536, 0, 3, &LIM, &P, &next), 0);
	ck_assert_int_eq(next, 65536);
	/* a node given more than the cap (a large model) still grows, up to
	 * the node's size: the cap would end the job at its first OOM */
	struct rv_alg_limits big = LIM;

	big.max_memory_mb = 262144;
	ck_assert_int_eq(rv_alg_oom_memory(98304, 0, 1, &big, &P, &next), 1);
	ck_assert_int_eq(next, 196608);
	ck_assert_int_eq(rv_alg_oom_memory(196608, 0, 2, &big, &P, &next), 1);
	ck_assert_int_eq(next, 262144);
	/* a tighter per-node limit */
	struct rv_alg_limits lim = LIM;

	lim.max_memory_mb = 10000;
	ck_assert_int_eq(rv_alg_oom_memory(8000, 0, 1, &lim, &P, &next), 1);
	ck_assert_int_eq(next, 10000);
	/* free cluster memory bounds the increase */
	lim = LIM;
	lim.free_memory_mb = 1000;
	ck_assert_int_eq(rv_alg_oom_memory(8000, 0, 1, &lim, &P, &next), 1);
	ck_assert_int_eq(next, 9000);
	ck_assert_int_eq(rv_alg_oom_memory(0, 0, 1, &LIM, &P, &next), -EINVAL);
	ck_assert_int_eq(rv_alg_oom_memory(100, 0, 0, &LIM, &P, &next), -EINVAL);
}
END_TEST

START_TEST(test_plan_oom)
{
	struct rv_alg_config cur = {
		.worker = {.count = 4, .res = {.cpu = 4, .memory_mb = 8192}},
		.ps = {.count = 2, .res = {.cpu = 8, .memory_mb = 16384}},
	};
	struct rv_alg_decision d;

	ck_assert_int_eq(rv_alg_plan_oom(&cur, RV_ALG_PS_ROLE, 0, 1, &LIM, &P, &d), 0);
	ck_assert(d.changed);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "oom");
	ck_assert_int_eq(d.cfg.ps.res.memory_mb, 32768);
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 8192);
	ck_assert_msg(strstr(d.reason, "16384 -> 32768") != NULL, "%s", d.reason);
	cur.worker.res.memory_mb = 65536;
	ck_assert_int_eq(rv_alg_plan_oom(&cur, RV_ALG_WORKER, 0, 1, &LIM, &P, &d), 0);
	ck_assert(!d.changed);
	ck_assert_msg(strstr(d.reason, "cap") != NULL, "%s", d.reason);
}
END_TEST

static Suite *oom_suite(void)
{
	gsl_set_error_handler_off();
	TCase *tc = RV_TEST_TCASE("core", 10, test_steps_grow, test_peak_and_cap, test_plan_oom);
	tcase_add_checked_fixture(tc, setup, NULL);
	return RV_TEST_SUITE("oom", tc);
}

RV_TEST_MAIN(oom_suite)
