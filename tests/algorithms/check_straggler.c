/*
 * check_straggler.c: slow workers named by robust z and ratio to the median;
 * none in uniform (noisy) data; one slow step does not make a straggler;
 * in a synchronous job (equal step times) the compute times single one out.
 */
#include <errno.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "rover_alg.h"
#include "testutil.h"

static struct rv_alg_params P;

static void setup(void)
{
	rv_alg_params_default(&P);
}

/* 10 steps each for nw workers around base seconds, 5% noise */
static size_t steps(struct rv_alg_step *s, int nw, const double *base, gsl_rng *r)
{
	size_t n = 0;

	for (int t = 0; t < 10; t++)
		for (int w = 0; w < nw; w++)
			s[n++] = (struct rv_alg_step){
				.node = w, .t_ms = t * 1000,
				.step_s = base[w] * (1 + gsl_ran_gaussian(r, 0.05)),
			};
	return n;
}

START_TEST(test_named)
{
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	double base[8] = {1, 1, 1, 2.5, 1, 1, 1.9, 1};
	struct rv_alg_step s[80];
	int nodes[8];

	gsl_rng_set(r, 3);
	size_t n = steps(s, 8, base, r);
	int k = rv_alg_stragglers(s, n, &P, nodes, 8);

	ck_assert_int_eq(k, 2);
	ck_assert_int_eq(nodes[0], 3);
	ck_assert_int_eq(nodes[1], 6);
	/* more found than room: the count says so */
	ck_assert_int_eq(rv_alg_stragglers(s, n, &P, nodes, 1), 2);
	gsl_rng_free(r);
}
END_TEST

/* The ratio test gives a worker's median two of its standard errors: one
 * of four workers slowed by the ratio itself measures just under it by
 * noise (1.50 against 1.5 x 1.01) and is named; one at 1.45 is not. */
START_TEST(test_ratio_within_noise_named)
{
	static const double q[10] = { -1.5, -1, -0.6, -0.3, -0.1, 0.1, 0.3, 0.6, 1, 1.5 };
	double base[4] = { 0.98, 1.0, 1.02, 1.5 };
	struct rv_alg_step s[40];
	int nodes[4];

	for (int run = 0; run < 2; run++) {
		size_t n = 0;

		for (int t = 0; t < 10; t++)
			for (int w = 0; w < 4; w++)
				s[n++] = (struct rv_alg_step){
					.node = w,
					.t_ms = t * 1000,
					.step_s = base[w] * (1 + 0.02 * q[(t * 3 + w) % 10]),
				};
		int found = rv_alg_stragglers(s, n, &P, nodes, 4);

		ck_assert_int_eq(found, run == 0 ? 1 : 0);
		if (run == 0)
			ck_assert_int_eq(nodes[0], 3);
		base[3] = 1.45;
	}
}
END_TEST

START_TEST(test_uniform_none)
{
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	double base[16];
	struct rv_alg_step s[160];
	int nodes[16];

	for (int i = 0; i < 16; i++)
		base[i] = 0.8;
	for (unsigned long seed = 1; seed <= 20; seed++) {
		gsl_rng_set(r, seed);
		size_t n = steps(s, 16, base, r);

		ck_assert_int_eq(rv_alg_stragglers(s, n, &P, nodes, 16), 0);
	}
	gsl_rng_free(r);
}
END_TEST

START_TEST(test_single_slow_step_ignored)
{
	double base[4] = {1, 1, 1, 1};
	struct rv_alg_step s[41];
	int nodes[4];
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);

	gsl_rng_set(r, 4);
	size_t n = steps(s, 4, base, r);

	s[n++] = (struct rv_alg_step){.node = 2, .t_ms = 20000, .step_s = 30}; /* checkpoint */
	ck_assert_int_eq(rv_alg_stragglers(s, n, &P, nodes, 4), 0);
	gsl_rng_free(r);
}
END_TEST

START_TEST(test_ratio_required)
{
	/* tight peers: 1.2x the median is a large z but not 1.5x */
	struct rv_alg_step s[] = {
		{.node = 0, .step_s = 1.0}, {.node = 1, .step_s = 1.0}, {.node = 2, .step_s = 1.0},
		{.node = 3, .step_s = 1.2},
	};
	int nodes[4];

	ck_assert_int_eq(rv_alg_stragglers(s, 4, &P, nodes, 4), 0);
	s[3].step_s = 2.1; /* DLRover's 2x rule would also name it */
	ck_assert_int_eq(rv_alg_stragglers(s, 4, &P, nodes, 4), 1);
	ck_assert_int_eq(nodes[0], 3);
	/* two workers: no peers to compare */
	ck_assert_int_eq(rv_alg_stragglers(s + 2, 2, &P, nodes, 4), 0);
	ck_assert_int_eq(rv_alg_stragglers(NULL, 2, &P, nodes, 4), -EINVAL);
}
END_TEST

/* 10 steps each, no noise */
static size_t exact_steps(struct rv_alg_step *s, int nw, const double *base)
{
	size_t n = 0;

	for (int t = 0; t < 10; t++)
		for (int w = 0; w < nw; w++)
			s[n++] = (struct rv_alg_step){ .node = w,
						       .t_ms = t * 1000,
						       .step_s = base[w] };
	return n;
}

START_TEST(test_share)
{
	double base[4] = { 1, 1.1, 1, 4 };
	struct rv_alg_step s[40];
	size_t n = exact_steps(s, 4, base);
	double share = 0;

	/* all-reduce: every step waits for the slowest; without the straggler
	 * the slowest of the rest (1.1) sets the pace */
	ck_assert_int_eq(rv_alg_straggler_share(s, n, RV_ALG_ALLREDUCE, &P, &share), 1);
	ck_assert_double_eq_tol(share, 1.1 / 4, 1e-9);
	/* async PS: each worker adds its own rate; the replacement runs at the
	 * median pace (1.05) */
	ck_assert_int_eq(rv_alg_straggler_share(s, n, RV_ALG_PS, &P, &share), 1);
	double with = 1 + 1 / 1.1 + 1 + 0.25, without = 1 + 1 / 1.1 + 1 + 1 / 1.05;
	ck_assert_double_eq_tol(share, with / without, 1e-9);
	/* no straggler: nothing to correct */
	base[3] = 1;
	n = exact_steps(s, 4, base);
	ck_assert_int_eq(rv_alg_straggler_share(s, n, RV_ALG_ALLREDUCE, &P, &share), 0);
	ck_assert_double_eq_tol(share, 1, 1e-12);
	ck_assert_int_eq(rv_alg_straggler_share(NULL, 0, RV_ALG_PS, &P, &share), 0);
	ck_assert_int_eq(rv_alg_straggler_share(s, n, RV_ALG_PS, &P, NULL), -EINVAL);
}
END_TEST

/* A synchronous job: every worker's step waits for the slowest, so step
 * times are equal (5% noise); compute[w] is worker w's own work per step. */
static size_t sync_steps(struct rv_alg_step *s, int nw, const double *compute, gsl_rng *r)
{
	size_t n = 0;

	for (int t = 0; t < 10; t++) {
		double step = 0;

		for (int w = 0; w < nw; w++)
			step = compute[w] > step ? compute[w] : step;
		for (int w = 0; w < nw; w++)
			s[n++] = (struct rv_alg_step){
				.node = w,
				.t_ms = t * 1000,
				.step_s = (step + 0.05) * (1 + gsl_ran_gaussian(r, 0.01)),
				.compute_s = compute[w] * (1 + gsl_ran_gaussian(r, 0.05)),
			};
	}
	return n;
}

START_TEST(test_sync_compute_named)
{
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	double compute[3] = { 0.4, 0.8, 0.4 };
	struct rv_alg_step s[30];
	int nodes[3] = { -1, -1, -1 };
	double share = 0;

	gsl_rng_set(r, 5);
	size_t n = sync_steps(s, 3, compute, r);

	ck_assert_int_eq(rv_alg_stragglers(s, n, &P, nodes, 3), 1);
	ck_assert_int_eq(nodes[0], 1);
	ck_assert(rv_alg_stragglers_by_compute(s, n)); /* what a plan's reason names */
	/* the pace kept without it: the slowest compute of the rest */
	ck_assert_int_eq(rv_alg_straggler_share(s, n, RV_ALG_ALLREDUCE, &P, &share), 1);
	ck_assert(share > 0.4 && share < 0.65);
	/* one worker without a compute time: back to the step times, equal */
	for (size_t i = 0; i < n; i++)
		if (s[i].node == 2)
			s[i].compute_s = 0;
	ck_assert_int_eq(rv_alg_stragglers(s, n, &P, nodes, 3), 0);
	ck_assert(!rv_alg_stragglers_by_compute(s, n));
	/* a compute time in one of a worker's samples is enough */
	s[2].compute_s = 0.4;
	ck_assert_int_eq(rv_alg_stragglers(s, n, &P, nodes, 3), 1);
	ck_assert_int_eq(nodes[0], 1);
	gsl_rng_free(r);
}
END_TEST

START_TEST(test_sync_compute_equal_none)
{
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	double compute[4] = { 0.5, 0.5, 0.5, 0.5 };
	struct rv_alg_step s[40];
	int nodes[4];

	for (unsigned long seed = 1; seed <= 20; seed++) {
		gsl_rng_set(r, seed);
		size_t n = sync_steps(s, 4, compute, r);

		/* a worker whose step times read slow (a checkpoint) but whose
		 * compute is its peers': nobody */
		for (size_t i = 0; i < n; i++)
			if (s[i].node == 3)
				s[i].step_s *= 3;
		ck_assert_int_eq(rv_alg_stragglers(s, n, &P, nodes, 4), 0);
	}
	gsl_rng_free(r);
}
END_TEST

static Suite *straggler_suite(void)
{
	gsl_set_error_handler_off();
	TCase *tc = RV_TEST_TCASE("core", 10, test_named, test_uniform_none,
				  test_single_slow_step_ignored, test_ratio_required, test_share,
				  test_sync_compute_named, test_sync_compute_equal_none,
				  test_ratio_within_noise_named);
	tcase_add_checked_fixture(tc, setup, NULL);
	return RV_TEST_SUITE("straggler", tc);
}

RV_TEST_MAIN(straggler_suite)
