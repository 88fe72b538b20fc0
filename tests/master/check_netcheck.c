/*
 * check_netcheck.c: the network check's groups (neighbours, then fastest
 * with slowest, odd counts with one node alone), and its verdicts: faulty
 * only after failing with two partners, stragglers above the ratio to the
 * median or late in every round; and the run the master serves: rounds
 * that close when everyone reported, at their deadline (the silent count as
 * failed) or after the straggler wait (the others count as late), bad and
 * late reports, save/load; a slow, broken or healthy world of 2, 3, 4, 5
 * and 8 nodes, every placement: only the bad node is named.
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
	(void)c;
}

static const struct netcheck_limits lim500 = { 500, 2.0, 4.0, 100 };

START_TEST(test_round0_neighbours)
{
	struct netcheck_group g[4];

	ck_assert_int_eq(netcheck_groups(0, NULL, 4, g, 4), 2);
	assert_group(&g[0], 2, 0, 1, -1);
	assert_group(&g[1], 2, 2, 3, -1);
	ck_assert_int_eq(netcheck_groups(0, NULL, 5, g, 4), 3);
	assert_group(&g[1], 2, 2, 3, -1);
	ck_assert_int_eq(g[2].n, 1); /* the odd one alone */
	ck_assert_int_eq(g[2].nodes[0], 4);
	ck_assert_int_eq(netcheck_groups(0, NULL, 3, g, 4), 2);
	assert_group(&g[0], 2, 0, 1, -1);
	ck_assert_int_eq(g[1].n, 1);
	ck_assert_int_eq(g[1].nodes[0], 2);
	ck_assert_int_eq(netcheck_groups(0, NULL, 3, g, 1), -ENOSPC);
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
		{ { true }, { 3.0 }, { false }, { 0, 0 } },
		{ { true }, { 1.0 }, { false }, { 0, 0 } },
		{ { false }, { 0.1 }, { false }, { 0, 0 } },
		{ { true }, { 2.0 }, { false }, { 0, 0 } },
		{ { true }, { 1.5 }, { false }, { 0, 0 } },
	};
	struct netcheck_group g[3];

	/* order: 1 (1.0), 4 (1.5), 3 (2.0), 0 (3.0), 2 (failed: last) */
	ck_assert_int_eq(netcheck_groups(1, nd, 4, g, 2), 2);
	assert_group(&g[0], 2, 1, 2, -1); /* of nodes 0..3: 1, 3, 0, then 2 failed */
	assert_group(&g[1], 2, 3, 0, -1);
	/* five: node 4 was alone in round 0, so it sorts after the timed ones;
	 * the fastest (1) sits out, the others fastest with slowest */
	ck_assert_int_eq(netcheck_groups(1, nd, 5, g, 2), -ENOSPC);
	ck_assert_int_eq(netcheck_groups(1, nd, 5, g, 3), 3);
	assert_group(&g[0], 2, 3, 2, -1); /* 3, 0, 4, then 2 failed */
	assert_group(&g[1], 2, 0, 4, -1);
	ck_assert_int_eq(g[2].n, 1);
	ck_assert_int_eq(g[2].nodes[0], 1);
	/* the late sort after the one alone, before the failed */
	nd[0].late[0] = true;
	nd[0].time_s[0] = 0.5;
	ck_assert_int_eq(netcheck_groups(1, nd, 5, g, 3), 3);
	assert_group(&g[0], 2, 3, 2, -1); /* 3, 4, 0 (late), 2 (failed) */
	assert_group(&g[1], 2, 4, 0, -1);
	/* three: never alone twice; node 2 was alone in round 0 */
	struct netcheck_node three[3] = {
		{ { true }, { 0.1 }, { true }, { 0, 0 } },
		{ { true }, { 0.1 }, { true }, { 0, 0 } },
		{ { true }, { 0.02 }, { false }, { 0, 0 } },
	};
	ck_assert_int_eq(netcheck_groups(1, three, 3, g, 2), 2);
	assert_group(&g[0], 2, 2, 1, -1); /* 2 (alone) with 1, 0 (late) sits out */
	ck_assert_int_eq(g[1].n, 1);
	ck_assert_int_eq(g[1].nodes[0], 0);
}
END_TEST

START_TEST(test_faulty_needs_two_failures)
{
	/* node 2 is broken: round 0 fails it and its neighbour 3; round 1
	 * pairs 3 with a healthy node and it passes */
	struct netcheck_node nd[4] = {
		{ { true, true }, { 1.0, 1.0 }, { false }, { 0, 0 } },
		{ { true, true }, { 1.1, 1.0 }, { false }, { 0, 0 } },
		{ { false, false }, { 0, 0 }, { false }, { 0, 0 } },
		{ { false, true }, { 0, 1.2 }, { false }, { 0, 0 } },
	};
	int v[4];

	ck_assert_int_eq(netcheck_verdict(nd, 4, NULL, NULL, 2.0, v), 1);
	ck_assert_int_eq(v[0], NETCHECK_OK);
	ck_assert_int_eq(v[2], NETCHECK_FAULTY);
	ck_assert_int_eq(v[3], NETCHECK_OK);
	ck_assert_int_eq(netcheck_verdict(nd, 0, NULL, NULL, 2.0, v), -EINVAL);
	ck_assert_int_eq(netcheck_verdict(nd, 4, NULL, NULL, 1.0, v), -EINVAL);
	ck_assert_int_eq(netcheck_verdict(nd, 4, NULL, NULL, NAN, v), -EINVAL);
}
END_TEST

START_TEST(test_straggler_ratio)
{
	/* best time of each node counts: node 1 was slow only beside node 4 */
	struct netcheck_node nd[5] = {
		{ { true, true }, { 1.0, 1.1 }, { false }, { 0, 0 } },
		{ { true, true }, { 5.0, 1.0 }, { false }, { 0, 0 } },
		{ { true, true }, { 1.2, 0.9 }, { false }, { 0, 0 } },
		{ { true, true }, { 1.0, 1.9 }, { false }, { 0, 0 } },
		{ { true, true }, { 5.0, 4.8 }, { false }, { 0, 0 } },
	};
	int v[5];

	ck_assert_int_eq(netcheck_verdict(nd, 5, NULL, NULL, 2.0, v), 1);
	ck_assert_int_eq(v[4], NETCHECK_STRAGGLER); /* 4.8 > 2 x 1.0 */
	ck_assert_int_eq(v[1], NETCHECK_OK);
	ck_assert_int_eq(v[3], NETCHECK_OK);
	/* configurable: at 5x nobody is */
	ck_assert_int_eq(netcheck_verdict(nd, 5, NULL, NULL, 5.0, v), 0);
	/* just above / at the ratio */
	nd[4].time_s[1] = 2.0;
	ck_assert_int_eq(netcheck_verdict(nd, 5, NULL, NULL, 2.0, v), 0);
	nd[4].time_s[1] = 2.01;
	ck_assert_int_eq(netcheck_verdict(nd, 5, NULL, NULL, 2.0, v), 1);
	/* two timed nodes: no majority to compare with */
	ck_assert_int_eq(netcheck_verdict(nd + 3, 2, NULL, NULL, 2.0, v), 0);
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
		ck_assert_int_ge(netcheck_run_report(r, names4[i], round, ok, t, t / 2, now), 0);
	}
}

START_TEST(test_run_verdicts)
{
	struct netcheck_run r = { 0 };
	ck_assert_int_eq(netcheck_run_start(&r, 7, names4, addrs4, 4, 1000, &lim500), 0);
	ck_assert_int_eq(r.id, 1);
	struct netcheck_group g;
	ck_assert_int_eq(netcheck_run_group(&r, "a", 1, &g), 0); /* round 1 not open */
	ck_assert_int_eq(netcheck_run_report(&r, "a", 1, true, 0.1, 0, 1000), -EAGAIN);
	ck_assert_int_eq(netcheck_run_report(&r, "zz", 0, true, 0.1, 0, 1000), -ENOENT);
	ck_assert_int_eq(netcheck_run_report(&r, "a", 0, true, -1, 0, 1000), -EINVAL);
	ck_assert_int_eq(netcheck_run_deadline(&r), 1500);
	report_round(&r, 0, 0, 2, -1, 1100);
	ck_assert_int_eq(r.state, NETCHECK_RUNNING);
	ck_assert_int_eq(r.round, 1); /* everyone reported: round 1 opened at once */
	ck_assert_int_eq(netcheck_run_deadline(&r), 1600);
	ck_assert_int_eq(netcheck_run_report(&r, "a", 0, false, 0, 0, 1100), 0); /* the same */
	ck_assert_int_eq(netcheck_run_report(&r, "a", 0, true, 0.1, 0, 1100), -EEXIST);
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
	ck_assert_int_eq(netcheck_run_start(&r, 3, names4, addrs4, 4, 0, &lim500), 0);
	report_round(&r, 0, -1, -1, 3, 100);
	ck_assert_int_eq(r.round, 0); /* d has not reported */
	ck_assert_int_eq(netcheck_run_tick(&r, 499), 0);
	ck_assert_int_eq(netcheck_run_tick(&r, 500), 1);
	ck_assert_int_eq(r.round, 1);
	ck_assert(r.m[3].silent);
	/* its late report changes nothing */
	ck_assert_int_eq(netcheck_run_report(&r, "d", 0, true, 0.1, 0, 600), 0);
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
	ck_assert(r.m[0].res.compute_s[0] > 0); /* the compute part too */
	ck_assert(r2.m[0].res.compute_s[0] == r.m[0].res.compute_s[0]);
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

/* ---- a whole world through the run: every size, every placement ---- */

enum world_fault { W_NONE, W_SLOW, W_BROKEN, W_CUT };

static const char names8[8][64] = { "n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7" };
static const char addrs8[8][64] = { "a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7" };

/* One round as the agents would play it: a group with the slow node never
 * finishes in time (its members do not report; with two nodes there is
 * nobody to compare with: they report 5 s), a group with the broken node
 * fails (a broken node alone still passes: it has no link to use), a
 * group with the cut node hears only its failure (its partner's
 * collective hangs: it does not report), the others report 0.10 s (0.02 s
 * alone).  Then the straggler wait. */
static void world_round(struct netcheck_run *r, int n, int round, enum world_fault f, int bad,
			int64_t *now)
{
	for (int i = 0; i < n; i++) {
		struct netcheck_group g;
		ck_assert_int_eq(netcheck_run_group(r, names8[i], round, &g), 1);
		bool with_bad = false;
		for (int k = 0; k < g.n; k++)
			with_bad |= g.nodes[k] == bad;
		if ((f == W_SLOW && with_bad && n > 2) || (f == W_CUT && with_bad && i != bad))
			continue;
		bool ok = !((f == W_BROKEN || f == W_CUT) && with_bad && g.n > 1);
		double t = f == W_SLOW && with_bad ? 5.0 : g.n > 1 ? 0.10 : 0.02;
		*now += 10;
		ck_assert_int_ge(netcheck_run_report(r, names8[i], round, ok, t, 0, *now), 0);
	}
	if (r->state == NETCHECK_RUNNING && r->round == round) {
		int64_t dl = netcheck_run_deadline(r);
		ck_assert_int_lt(dl, *now + 500); /* the straggler wait, not the timeout */
		*now = dl;
		ck_assert_int_eq(netcheck_run_tick(r, *now), 1);
	}
}

static void check_world(int n, enum world_fault f, int bad)
{
	struct netcheck_run r = { 0 };
	const struct netcheck_limits lim = { 30000, 2.0, 4.0, 100 };
	int64_t now = 1000;
	ck_assert_int_eq(netcheck_run_start(&r, 1, names8, addrs8, n, now, &lim), 0);
	for (int i = 0; i < n; i++)
		ck_assert_int_ge(netcheck_run_join(&r, names8[i], now), 0);
	world_round(&r, n, 0, f, bad, &now);
	world_round(&r, n, 1, f, bad, &now);
	ck_assert_int_eq(r.state, NETCHECK_DONE);
	for (int i = 0; i < n; i++) {
		int want = NETCHECK_OK;
		if ((f == W_BROKEN || f == W_CUT) && (i == bad || n == 2))
			want = NETCHECK_FAULTY; /* two nodes: both fail both rounds */
		else if (f == W_SLOW && i == bad && n >= 3)
			want = NETCHECK_STRAGGLER;
		ck_assert_msg(r.m[i].verdict == want, "n=%d fault=%d bad=%d: node %d is %d, not %d",
			      n, (int)f, bad, i, r.m[i].verdict, want);
	}
	netcheck_run_release(&r);
}

START_TEST(test_worlds_name_only_the_bad_node)
{
	static const int sizes[] = { 2, 3, 4, 5, 8 };
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		int n = sizes[k];
		check_world(n, W_NONE, -1);
		for (int bad = 0; bad < n; bad++) {
			check_world(n, W_SLOW, bad);
			check_world(n, W_BROKEN, bad);
			check_world(n, W_CUT, bad);
		}
	}
}
END_TEST

/* The verdicts v of three nodes nd placed in a pair and one alone in each
 * round (g0, g1), at a straggler ratio of 2: how many are not OK. */
static int verdict3(const struct netcheck_node nd[3], const struct netcheck_group g0[2],
		    const struct netcheck_group g1[2], int v[3])
{
	const struct netcheck_group *const gs[2] = { g0, g1 };
	const int ng[2] = { 2, 2 };
	return netcheck_verdict(nd, 3, gs, ng, 2.0, v);
}

/* Three nodes, the slow one in round 0's pair and then with the node that
 * was alone: every timed round of all three was late, and only the slow
 * node's partner in both explains the others'. */
START_TEST(test_three_nodes_cleared_by_a_worse_partner)
{
	struct netcheck_node nd[3] = {
		{ { true, true }, { 1.0, 1.2 }, { true, true }, { 0, 0 } },
		{ { true, true }, { 1.0, 0.02 }, { true, false }, { 0, 0 } },
		{ { true, true }, { 0.02, 1.2 }, { false, true }, { 0, 0 } },
	};
	const struct netcheck_group g0[2] = { { 2, { 0, 1 } }, { 1, { 2, -1 } } };
	const struct netcheck_group g1[2] = { { 2, { 2, 0 } }, { 1, { 1, -1 } } };
	int v[3];

	ck_assert_int_eq(verdict3(nd, g0, g1, v), 1);
	ck_assert_int_eq(v[0], NETCHECK_STRAGGLER);
	ck_assert_int_eq(v[1], NETCHECK_OK);
	ck_assert_int_eq(v[2], NETCHECK_OK);
	/* the partner with more bad rounds is the one that explains: the
	 * same late rounds with node 0 on time in round 1 name nobody */
	nd[0].late[1] = false;
	nd[0].time_s[1] = 0.1;
	nd[2].late[1] = false;
	nd[2].time_s[1] = 0.1;
	ck_assert_int_eq(verdict3(nd, g0, g1, v), 0); /* late once: no one */
}
END_TEST

/* Three nodes on a loaded machine: node 0's only paired round was slow
 * (its partner was fast beside node 2 after), but alone in round 1 it was
 * as fast as the others: one slow round against a fast one names nobody;
 * as slow alone as paired, it is named. */
START_TEST(test_three_nodes_one_slow_pair_fast_alone)
{
	/* node 0's paired round 0 was slow, its round 1 alone fast */
	struct netcheck_node nd[3] = {
		{ { true, true }, { 0.245, 0.085 }, { false, false }, { 0.194, 0.08 } },
		{ { true, true }, { 0.245, 0.09 }, { false, false }, { 0.08, 0.08 } },
		{ { true, true }, { 0.09, 0.09 }, { false, false }, { 0.08, 0.08 } },
	};
	const struct netcheck_group g0[2] = { { 2, { 0, 1 } }, { 1, { 2, -1 } } };
	const struct netcheck_group g1[2] = { { 2, { 1, 2 } }, { 1, { 0, -1 } } };
	int v[3];

	/* its own compute was slow then (noise): without it the round is fast */
	ck_assert_int_eq(verdict3(nd, g0, g1, v), 0);
	/* slower than that noise explains */
	nd[0].time_s[0] = nd[1].time_s[0] = 0.3;
	ck_assert_int_eq(verdict3(nd, g0, g1, v), 1);
	ck_assert_int_eq(v[0], NETCHECK_STRAGGLER);
	/* its compute as fast as alone: the link was slow, which a round alone
	 * does not measure */
	nd[0].time_s[0] = nd[1].time_s[0] = 0.245;
	nd[0].compute_s[0] = 0.08;
	ck_assert_int_eq(verdict3(nd, g0, g1, v), 1);
	ck_assert_int_eq(v[0], NETCHECK_STRAGGLER);
	/* no compute measured (the TCP check): a round alone sent nothing */
	nd[0].compute_s[0] = nd[0].compute_s[1] = 0;
	ck_assert_int_eq(verdict3(nd, g0, g1, v), 1);
	ck_assert_int_eq(v[0], NETCHECK_STRAGGLER);
}
END_TEST

/* Four nodes on a loaded machine, node 3 cut off (both rounds failed):
 * node 2's only timed round was beside node 0, slow for both, and node 0's
 * own compute then was three times its compute in its other round, so
 * the round was slow for the pair, not for node 2; slow beside a partner
 * whose compute was as in its other round, node 2 is named. */
START_TEST(test_shared_slow_round_names_nobody)
{
	struct netcheck_node nd[4] = {
		{ { true, true }, { 1.275, 0.46 }, { false, false }, { 0.764, 0.235 } },
		{ { false, true }, { 0, 0.46 }, { false, false }, { 0, 0.22 } },
		{ { true, false }, { 1.278, 0 }, { false, false }, { 0.70, 0 } },
		{ { false, false }, { 0, 0 }, { false, false }, { 0, 0 } },
	};
	const struct netcheck_group g0[2] = { { 2, { 0, 2 } }, { 2, { 1, 3 } } };
	const struct netcheck_group g1[2] = { { 2, { 0, 1 } }, { 2, { 2, 3 } } };
	const struct netcheck_group *const gs[2] = { g0, g1 };
	const int ng[2] = { 2, 2 };
	int v[4];

	ck_assert_int_eq(netcheck_verdict(nd, 4, gs, ng, 2.0, v), 1);
	ck_assert_int_eq(v[2], NETCHECK_OK);
	ck_assert_int_eq(v[3], NETCHECK_FAULTY);
	/* node 0's compute as in round 1: the slow round was node 2's */
	nd[0].compute_s[0] = 0.24;
	ck_assert_int_eq(netcheck_verdict(nd, 4, gs, ng, 2.0, v), 2);
	ck_assert_int_eq(v[2], NETCHECK_STRAGGLER);
	/* slower than the pair's noise explains */
	nd[0].compute_s[0] = 0.764;
	nd[0].time_s[0] = nd[2].time_s[0] = 2.5;
	ck_assert_int_eq(netcheck_verdict(nd, 4, gs, ng, 2.0, v), 2);
	ck_assert_int_eq(v[2], NETCHECK_STRAGGLER);
}
END_TEST

/* The straggler wait: it starts once every member joined and half of the
 * others reported; a member not reported by then is late, with the time
 * the round was open since the last join; a restarted master keeps it
 * all. */
START_TEST(test_run_straggler_wait)
{
	struct netcheck_run r = { 0 };
	const struct netcheck_limits lim = { 30000, 2.0, 4.0, 100 };
	ck_assert_int_eq(netcheck_run_start(&r, 1, names4, addrs4, 4, 0, &lim), 0);
	ck_assert_int_eq(netcheck_run_join(&r, "a", 0), 1);
	ck_assert_int_eq(netcheck_run_join(&r, "a", 0), 0);
	ck_assert_int_eq(netcheck_run_join(&r, "zz", 0), -ENOENT);
	ck_assert_int_eq(netcheck_run_report(&r, "a", 0, true, 0.1, 0, 200), 1);
	ck_assert_int_eq(netcheck_run_report(&r, "b", 0, true, 0.1, 0, 200), 1);
	/* c has not joined yet (its interpreter imports): no wait */
	ck_assert_int_eq(netcheck_run_deadline(&r), 30000);
	ck_assert_int_eq(netcheck_run_join(&r, "d", 250), 1);
	/* a member slow to import has its full round from its join */
	ck_assert_int_eq(netcheck_run_deadline(&r), 30250);
	ck_assert_int_eq(netcheck_run_join(&r, "c", 300), 1);
	/* 4 x 0.1 s = 400 ms from when half had reported and all joined */
	ck_assert_int_eq(netcheck_run_deadline(&r), 700);
	ck_assert_int_eq(netcheck_run_tick(&r, 699), 0);
	ck_assert_int_eq(netcheck_run_tick(&r, 700), 1);
	ck_assert_int_eq(r.round, 1);
	ck_assert(r.m[2].res.late[0] && r.m[2].res.ok[0] && !r.m[2].silent);
	ck_assert(r.m[2].res.time_s[0] == 0.4); /* open since the last join */
	ck_assert_int_eq(netcheck_run_report(&r, "c", 0, true, 5.0, 0, 800), 0); /* too late */

	/* round 1: b fails with its partner, which is failed then, not late */
	struct netcheck_group g;
	ck_assert_int_eq(netcheck_run_group(&r, "b", 1, &g), 1);
	int partner = g.nodes[0] == 1 ? g.nodes[1] : g.nodes[0];
	ck_assert_int_eq(netcheck_run_report(&r, "b", 1, false, 0, 0, 800), 1);
	for (int i = 0; i < 4; i++)
		if (i != 1 && i != partner)
			ck_assert_int_eq(netcheck_run_report(&r, names4[i], 1, true, 0.1, 0, 810),
					 1);
	ck_assert_int_eq(netcheck_run_deadline(&r), 810 + 400);

	struct rv_buf b;
	rv_buf_init(&b);
	ck_assert_int_eq(netcheck_run_save(&r, &b), 0);
	struct netcheck_run r2 = { 0 };
	struct rv_err err = { 0 };
	ck_assert_msg(netcheck_run_load(&r2, b.data, b.len, &err) == 0, "%s", err.msg);
	ck_assert(r2.m[2].res.late[0] && r2.m[3].joined);
	ck_assert_int_eq(netcheck_run_deadline(&r2), 1210);
	ck_assert_int_eq(netcheck_run_tick(&r2, 1210), 1);
	ck_assert_int_eq(r2.state, NETCHECK_DONE);
	ck_assert(!r2.m[partner].res.ok[1] && !r2.m[partner].res.late[1]);
	netcheck_run_release(&r);
	netcheck_run_release(&r2);
	rv_buf_release(&b);
}
END_TEST

RV_TEST_MAIN_TCASE("netcheck", "core", 10, test_round0_neighbours, test_round1_fastest_with_slowest,
		   test_faulty_needs_two_failures, test_straggler_ratio, test_run_verdicts,
		   test_run_silent_node_times_out, test_worlds_name_only_the_bad_node,
		   test_three_nodes_cleared_by_a_worse_partner,
		   test_three_nodes_one_slow_pair_fast_alone, test_shared_slow_round_names_nobody,
		   test_run_straggler_wait)
