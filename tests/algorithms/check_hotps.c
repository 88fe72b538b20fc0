/*
 * check_hotps.c: a hot PS stands out from its peers by robust z and is near
 * its limit; equal PS are never flagged; all saturated PS grow the count.
 */
#include <gsl/gsl_errno.h>

#include <string.h>

#include "rover_alg.h"
#include "testutil.h"

static struct rv_alg_params P;
static const struct rv_alg_limits LIM = {
	.min_workers = 1, .max_workers = 8, .node_unit = 1, .min_ps = 1, .max_ps = 8,
	.max_cpu = 32, .free_cpu = -1, .free_memory_mb = -1,
};
static const struct rv_alg_group PS4 = {.count = 4, .res = {.cpu = 8, .memory_mb = 16384}};

static void setup(void)
{
	rv_alg_params_default(&P);
}

/* three samples per PS at the given CPU levels */
static size_t fill(struct rv_alg_usage *u, const double *cpu, int nps)
{
	size_t n = 0;

	for (int t = 0; t < 3; t++)
		for (int i = 0; i < nps; i++)
			u[n++] = (struct rv_alg_usage){
				.role = RV_ALG_PS_ROLE, .node = i, .t_ms = 1000 * t,
				.cpu = cpu[i] + 0.05 * t, .memory_mb = 8000,
			};
	return n;
}

START_TEST(test_hot_found)
{
	static const double cpu[] = {3.0, 7.6, 3.2, 2.9};
	struct rv_alg_usage u[12];
	struct rv_alg_decision d = {0};
	int grow = -1;
	size_t n = fill(u, cpu, 4);

	ck_assert_int_eq(rv_alg_hot_ps(u, n, &PS4, &LIM, &P, &grow, &d), 1);
	ck_assert_int_eq(grow, 0);
	ck_assert_uint_eq(d.n_migrate, 1);
	ck_assert_int_eq(d.migrate[0].node, 1);
	/* 7.65 * 1.5 = 11.475 -> 11.5 */
	ck_assert_double_eq_tol(d.migrate[0].res.cpu, 11.5, 1e-9);
	ck_assert_msg(strstr(d.reason, "PS 1 is hot") != NULL, "%s", d.reason);
}
END_TEST

START_TEST(test_equal_not_flagged)
{
	static const double cpu[] = {5.0, 5.0, 5.0, 5.0};
	struct rv_alg_usage u[12];
	struct rv_alg_decision d = {0};
	int grow = -1;
	size_t n = fill(u, cpu, 4);

	ck_assert_int_eq(rv_alg_hot_ps(u, n, &PS4, &LIM, &P, &grow, &d), 0);
	ck_assert_uint_eq(d.n_migrate, 0);
	ck_assert_int_eq(grow, 0);
}
END_TEST

START_TEST(test_outlier_below_util_not_hot)
{
	/* far above peers but only 50% of its limit: not worth a migration */
	static const double cpu[] = {1.0, 4.0, 1.1, 0.9};
	struct rv_alg_usage u[12];
	struct rv_alg_decision d = {0};
	int grow = -1;
	size_t n = fill(u, cpu, 4);

	ck_assert_int_eq(rv_alg_hot_ps(u, n, &PS4, &LIM, &P, &grow, &d), 0);
}
END_TEST

START_TEST(test_all_saturated_grow)
{
	/* every PS pinned at its 8 CPU: the PS count grows */
	static const double cpu[] = {7.9, 7.85, 7.9, 7.88};
	struct rv_alg_usage u[12];
	struct rv_alg_decision d = {0};
	int grow = 0;
	size_t n = fill(u, cpu, 4);

	ck_assert_int_eq(rv_alg_hot_ps(u, n, &PS4, &LIM, &P, &grow, &d), 0);
	ck_assert_int_eq(grow, 1);
	ck_assert_msg(strstr(d.reason, "pinned") != NULL, "%s", d.reason);

	/* right-sized PS run at 92-98% of their limit by design (the usage
	 * quantile plus a small margin): that is no saturation */
	static const double sized[] = {7.5, 7.6, 7.4, 7.7};
	struct rv_alg_decision d2 = {0};

	n = fill(u, sized, 4);
	grow = -1;
	ck_assert_int_eq(rv_alg_hot_ps(u, n, &PS4, &LIM, &P, &grow, &d2), 0);
	ck_assert_int_eq(grow, 0);
}
END_TEST

START_TEST(test_uses_latest_samples)
{
	/* PS 2 was hot long ago and has cooled down */
	static const double cpu[] = {3.0, 3.1, 3.0, 2.9};
	struct rv_alg_usage u[16];
	struct rv_alg_decision d = {0};
	int grow = 0;
	size_t n = fill(u, cpu, 4);

	u[n++] = (struct rv_alg_usage){.role = RV_ALG_PS_ROLE, .node = 2, .t_ms = -5000,
				       .cpu = 8.0};
	u[n++] = (struct rv_alg_usage){.role = RV_ALG_PS_ROLE, .node = 2, .t_ms = -4000,
				       .cpu = 8.0};
	ck_assert_int_eq(rv_alg_hot_ps(u, n, &PS4, &LIM, &P, &grow, &d), 0);
}
END_TEST

START_TEST(test_free_capacity_bounds_migration)
{
	static const double cpu[] = {3.0, 7.6, 3.2, 2.9};
	struct rv_alg_usage u[12];
	struct rv_alg_decision d = {0};
	struct rv_alg_limits lim = LIM;
	int grow = 0;
	size_t n = fill(u, cpu, 4);

	lim.free_cpu = 2;
	ck_assert_int_eq(rv_alg_hot_ps(u, n, &PS4, &lim, &P, &grow, &d), 1);
	ck_assert_double_eq_tol(d.migrate[0].res.cpu, 10, 1e-9);
	lim.free_cpu = 0;
	memset(&d, 0, sizeof(d));
	ck_assert_int_eq(rv_alg_hot_ps(u, n, &PS4, &lim, &P, &grow, &d), 0);
	ck_assert_uint_eq(d.n_migrate, 0);
}
END_TEST

static Suite *hotps_suite(void)
{
	gsl_set_error_handler_off();
	TCase *tc = RV_TEST_TCASE("core", 10, test_hot_found, test_equal_not_flagged,
				  test_outlier_below_util_not_hot, test_all_saturated_grow,
				  test_uses_latest_samples, test_free_capacity_bounds_migration);
	tcase_add_checked_fixture(tc, setup, NULL);
	return RV_TEST_SUITE("hotps", tc);
}

RV_TEST_MAIN(hotps_suite)
