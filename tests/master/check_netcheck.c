/*
 * check_netcheck.c: the network check's groups (neighbours, then fastest
 * with slowest, odd counts), and its verdicts: faulty only after failing
 * with two partners, stragglers above the ratio to the median.
 */
#include <errno.h>
#include <math.h>

#include "netcheck.h"
#include "testutil.h"

static void assert_group(const struct netcheck_group *g, int n, int a, int b, int c)
{
	ck_assert_int_eq(g->n, n);
	ck_assert_int_eq(g->nodes[0], a);
	ck_assert_int_eq(g->nodes[1], b);
	if (n == 3)
		ck_assert_int_eq(g->nodes[2], c);
}

START_TEST(test_round0_neighbours)
{
	struct netcheck_group g[4];

	ck_assert_int_eq(netcheck_groups(0, NULL, 4, g, 4), 2);
	assert_group(&g[0], 2, 0, 1, -1);
	assert_group(&g[1], 2, 2, 3, -1);
	ck_assert_int_eq(netcheck_groups(0, NULL, 5, g, 4), 2);
	assert_group(&g[1], 3, 2, 3, 4); /* the odd one joins the last pair */
	ck_assert_int_eq(netcheck_groups(0, NULL, 2, g, 1), 1);
	ck_assert_int_eq(netcheck_groups(0, NULL, 1, g, 4), -EINVAL);
	ck_assert_int_eq(netcheck_groups(2, NULL, 4, g, 4), -EINVAL);
	ck_assert_int_eq(netcheck_groups(0, NULL, 8, g, 3), -ENOSPC);
	ck_assert_int_eq(netcheck_groups(1, NULL, 4, g, 4), -EINVAL);
}
END_TEST

START_TEST(test_round1_fastest_with_slowest)
{
	struct netcheck_node nd[5] = {
		{ { true }, { 3.0 } }, { { true }, { 1.0 } }, { { false }, { 0.1 } },
		{ { true }, { 2.0 } }, { { true }, { 1.5 } },
	};
	struct netcheck_group g[2];

	/* order: 1 (1.0), 4 (1.5), 3 (2.0), 0 (3.0), 2 (failed: last) */
	ck_assert_int_eq(netcheck_groups(1, nd, 4, g, 2), 2);
	assert_group(&g[0], 2, 1, 2, -1); /* of nodes 0..3: 1, 3, 0, then 2 failed */
	assert_group(&g[1], 2, 3, 0, -1);
	ck_assert_int_eq(netcheck_groups(1, nd, 5, g, 2), 2);
	assert_group(&g[0], 2, 1, 2, -1); /* the failed node beside the fastest */
	assert_group(&g[1], 3, 4, 0, 3);  /* the median node joins the last pair */
}
END_TEST

START_TEST(test_faulty_needs_two_failures)
{
	/* node 2 is broken: round 0 fails it and its neighbour 3; round 1
	 * pairs 3 with a healthy node and it passes */
	struct netcheck_node nd[4] = {
		{ { true, true }, { 1.0, 1.0 } },
		{ { true, true }, { 1.1, 1.0 } },
		{ { false, false }, { 0, 0 } },
		{ { false, true }, { 0, 1.2 } },
	};
	int v[4];

	ck_assert_int_eq(netcheck_verdict(nd, 4, 2.0, v), 1);
	ck_assert_int_eq(v[0], NETCHECK_OK);
	ck_assert_int_eq(v[2], NETCHECK_FAULTY);
	ck_assert_int_eq(v[3], NETCHECK_OK);
	ck_assert_int_eq(netcheck_verdict(nd, 0, 2.0, v), -EINVAL);
	ck_assert_int_eq(netcheck_verdict(nd, 4, 1.0, v), -EINVAL);
	ck_assert_int_eq(netcheck_verdict(nd, 4, NAN, v), -EINVAL);
}
END_TEST

START_TEST(test_straggler_ratio)
{
	/* best time of each node counts: node 1 was slow only beside node 4 */
	struct netcheck_node nd[5] = {
		{ { true, true }, { 1.0, 1.1 } }, { { true, true }, { 5.0, 1.0 } },
		{ { true, true }, { 1.2, 0.9 } }, { { true, true }, { 1.0, 1.9 } },
		{ { true, true }, { 5.0, 4.8 } },
	};
	int v[5];

	ck_assert_int_eq(netcheck_verdict(nd, 5, 2.0, v), 1);
	ck_assert_int_eq(v[4], NETCHECK_STRAGGLER); /* 4.8 > 2 x 1.0 */
	ck_assert_int_eq(v[1], NETCHECK_OK);
	ck_assert_int_eq(v[3], NETCHECK_OK);
	/* configurable: at 5x nobody is */
	ck_assert_int_eq(netcheck_verdict(nd, 5, 5.0, v), 0);
	/* just above / at the ratio */
	nd[4].time_s[1] = 2.0;
	ck_assert_int_eq(netcheck_verdict(nd, 5, 2.0, v), 0);
	nd[4].time_s[1] = 2.01;
	ck_assert_int_eq(netcheck_verdict(nd, 5, 2.0, v), 1);
	/* two timed nodes: no majority to compare with */
	ck_assert_int_eq(netcheck_verdict(nd + 3, 2, 2.0, v), 0);
}
END_TEST

static Suite *netcheck_suite(void)
{
	Suite *s = suite_create("netcheck");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_round0_neighbours);
	tcase_add_test(tc, test_round1_fastest_with_slowest);
	tcase_add_test(tc, test_faulty_needs_two_failures);
	tcase_add_test(tc, test_straggler_ratio);
	suite_add_tcase(s, tc);
	return s;
}

RV_TEST_MAIN(netcheck_suite)
