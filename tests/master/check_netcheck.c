/*
 * check_netcheck.c: the network check's groups (neighbours, then fastest
 * with slowest, odd counts), and its verdicts: faulty only after failing
 * with two partners, stragglers above the ratio to the median; and the run
 * the master serves: rounds that close when everyone reported or at their
 * deadline (the silent count as failed), bad and late reports, save/load.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

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

static const char names4[4][64] = { "a", "b", "c", "d" };
/* an address is the agent's own text: a snapshot must keep it as it is */
static const char addrs4[4][64] = { "a:1", "b:1", "c\"1\\", "d:1" };

/* Each member reports round as its agent would: a group with the faulty
 * (or silent) node fails; the slow node measures 1.0 s, the others 0.1 s. */
static void report_round(struct netcheck_run *r, int round, int faulty, int slow, int silent,
			 int64_t now)
{
	for (int i = 0; i < 4; i++) {
		if (i == silent)
			continue;
		struct netcheck_group g;
		ck_assert_int_eq(netcheck_run_group(r, names4[i], round, &g), 1);
		bool ok = true;
		double t = i == slow ? 1.0 : 0.1;
		for (int k = 0; k < g.n; k++)
			ok = ok && g.nodes[k] != faulty && g.nodes[k] != silent;
		ck_assert_int_ge(netcheck_run_report(r, names4[i], round, ok, t, now), 0);
	}
}

START_TEST(test_run_verdicts)
{
	struct netcheck_run r = { 0 };
	ck_assert_int_eq(netcheck_run_start(&r, 7, names4, addrs4, 4, 1000, 500, 2.0), 0);
	ck_assert_int_eq(r.id, 1);
	struct netcheck_group g;
	ck_assert_int_eq(netcheck_run_group(&r, "a", 1, &g), 0); /* round 1 not open */
	ck_assert_int_eq(netcheck_run_report(&r, "a", 1, true, 0.1, 1000), -EAGAIN);
	ck_assert_int_eq(netcheck_run_report(&r, "zz", 0, true, 0.1, 1000), -ENOENT);
	ck_assert_int_eq(netcheck_run_report(&r, "a", 0, true, -1, 1000), -EINVAL);
	ck_assert_int_eq(netcheck_run_deadline(&r), 1500);
	report_round(&r, 0, 0, 2, -1, 1100);
	ck_assert_int_eq(r.state, NETCHECK_RUNNING);
	ck_assert_int_eq(r.round, 1); /* everyone reported: round 1 opened at once */
	ck_assert_int_eq(netcheck_run_deadline(&r), 1600);
	ck_assert_int_eq(netcheck_run_report(&r, "a", 0, false, 0, 1100), 0); /* the same */
	ck_assert_int_eq(netcheck_run_report(&r, "a", 0, true, 0.1, 1100), -EEXIST);
	report_round(&r, 1, 0, 2, -1, 1200);
	ck_assert_int_eq(r.state, NETCHECK_DONE);
	ck_assert_int_eq(r.m[0].verdict, NETCHECK_FAULTY);
	ck_assert_int_eq(r.m[2].verdict, NETCHECK_STRAGGLER);
	ck_assert_int_eq(r.m[1].verdict, NETCHECK_OK);
	ck_assert_int_eq(netcheck_run_deadline(&r), INT64_MAX);
	netcheck_run_release(&r);
}
END_TEST

START_TEST(test_run_silent_node_times_out)
{
	struct netcheck_run r = { 0 };
	ck_assert_int_eq(netcheck_run_start(&r, 3, names4, addrs4, 4, 0, 500, 2.0), 0);
	report_round(&r, 0, -1, -1, 3, 100);
	ck_assert_int_eq(r.round, 0); /* d has not reported */
	ck_assert_int_eq(netcheck_run_tick(&r, 499), 0);
	ck_assert_int_eq(netcheck_run_tick(&r, 500), 1);
	ck_assert_int_eq(r.round, 1);
	ck_assert(r.m[3].silent);
	/* its late report changes nothing */
	ck_assert_int_eq(netcheck_run_report(&r, "d", 0, true, 0.1, 600), 0);
	ck_assert(!r.m[3].res.ok[0]);

	/* a restarted master: save, load, same answers */
	struct rv_buf b;
	rv_buf_init(&b);
	ck_assert_int_eq(netcheck_run_save(&r, &b), 0);
	struct netcheck_run r2 = { 0 };
	struct rv_err err = { 0 };
	ck_assert_msg(netcheck_run_load(&r2, b.data, b.len, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(netcheck_run_deadline(&r2), 1000);
	ck_assert_str_eq(r2.m[2].addr, addrs4[2]);
	/* a master back after downtime gives the round its timeout again */
	ck_assert_int_eq(netcheck_run_grace(&r2, 400), 0);
	ck_assert_int_eq(netcheck_run_grace(&r2, 900), 1);
	ck_assert_int_eq(netcheck_run_deadline(&r2), 1400);
	ck_assert_int_eq(netcheck_run_tick(&r2, 1000), 0);
	struct netcheck_group g1, g2;
	ck_assert_int_eq(netcheck_run_group(&r, "d", 1, &g1), 1);
	ck_assert_int_eq(netcheck_run_group(&r2, "d", 1, &g2), 1);
	ck_assert_int_eq(g1.n, g2.n);
	ck_assert_int_eq(memcmp(g1.nodes, g2.nodes, (size_t)g1.n * sizeof(int)), 0);
	netcheck_run_release(&r);

	report_round(&r2, 1, -1, -1, 3, 700);
	ck_assert_int_eq(netcheck_run_tick(&r2, 1400), 1);
	ck_assert_int_eq(r2.state, NETCHECK_DONE);
	ck_assert_int_eq(r2.m[3].verdict, NETCHECK_FAULTY); /* silent both rounds */
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(r2.m[i].verdict, NETCHECK_OK);
	ck_assert_int_eq(netcheck_run_load(&r2, "{\"id\":1}", 8, &err), -EINVAL);
	ck_assert_int_eq(r2.state, NETCHECK_DONE); /* unchanged */
	netcheck_run_release(&r2);
	rv_buf_release(&b);
}
END_TEST

static Suite *netcheck_suite(void)
{
	TCase *tc = RV_TEST_TCASE("core", 10, test_round0_neighbours,
				  test_round1_fastest_with_slowest, test_faulty_needs_two_failures,
				  test_straggler_ratio, test_run_verdicts,
				  test_run_silent_node_times_out);
	return RV_TEST_SUITE("netcheck", tc);
}

RV_TEST_MAIN(netcheck_suite)
