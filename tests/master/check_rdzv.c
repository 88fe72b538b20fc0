/*
 * check_rdzv.c: the rendezvous as its agents see it: when a round completes
 * (last call, at once at max, never stuck above min), node_unit and spares,
 * late nodes, the gang wait, rounds opened by leaves and rejoins, a lost
 * member's round that completes without the last call, stable
 * ranks and rank offsets, heartbeat deaths, snapshots that behave as the
 * original, random interleavings checked against the invariants, and scale.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "rdzv.h"
#include "testutil.h"

static struct rdzv_world W; /* large: one per suite, not on the stack */

static struct rdzv *mk(int min, int max, int unit, int64_t last_call, int64_t max_wait, int64_t hb)
{
	struct rdzv_conf c = { min, max, unit, last_call, max_wait, hb };
	struct rv_err err = { 0 };
	struct rdzv *r = rdzv_new(&c, &err);

	ck_assert_msg(r, "rdzv_new: %s", err.msg);
	return r;
}

static int64_t join_lws(struct rdzv *r, const char *name, int lws, int64_t now)
{
	struct rdzv_node n = { .local_world_size = lws };

	snprintf(n.name, sizeof(n.name), "%s", name);
	snprintf(n.addr, sizeof(n.addr), "10.0.0.1:%d", 29500 + (int)strlen(name));
	return rdzv_join(r, &n, now);
}

static int64_t join(struct rdzv *r, const char *name, int64_t now)
{
	return join_lws(r, name, 1, now);
}

static int world(struct rdzv *r, const char *name, int64_t round)
{
	return rdzv_world(r, name, round, &W, NULL);
}

static int rank_of(struct rdzv *r, const char *name, int64_t round)
{
	int rank = -1;

	ck_assert_int_eq(rdzv_world(r, name, round, &W, &rank), 1);
	return rank;
}

static int tick(struct rdzv *r, int64_t now)
{
	char dead[8][64];
	int nd = 0;
	int rc = rdzv_tick(r, now, dead, 8, &nd);

	ck_assert_int_eq(nd, 0);
	return rc;
}

static int state(struct rdzv *r, int64_t *round, int *nnodes)
{
	return rdzv_state(r, round, nnodes);
}

START_TEST(test_config_errors)
{
	struct rdzv_conf bad[] = {
		{ 0, 2, 1, 0, 0, 0 },  /* min < 1 */
		{ 3, 2, 1, 0, 0, 0 },  /* max < min */
		{ 3, 3, 2, 0, 0, 0 },  /* no multiple of 2 in 3..3 */
		{ 1, 2, 0, 0, 0, 0 },  /* unit 0 */
		{ 1, 2, 1, -1, 0, 0 }, /* negative last call */
		{ 1, RDZV_MAX_NODES + 1, 1, 0, 0, 0 },
	};
	const char *field[] = { "min_nodes", "max_nodes",    "node_unit",
				"node_unit", "last_call_ms", "max_nodes" };

	for (size_t i = 0; i < RV_ARRAY_SIZE(bad); i++) {
		struct rv_err err = { 0 };
		ck_assert_ptr_null(rdzv_new(&bad[i], &err));
		ck_assert_int_eq(err.code, -EINVAL);
		ck_assert_str_eq(err.field, field[i]);
	}
	rdzv_free(NULL);
}
END_TEST

START_TEST(test_bad_nodes)
{
	struct rdzv *r = mk(1, 2, 1, 0, 0, 0);
	struct rdzv_node n = { .name = "", .local_world_size = 1 };

	ck_assert_int_eq(rdzv_join(r, &n, 0), -EINVAL);
	snprintf(n.name, sizeof(n.name), "a\"b");
	ck_assert_int_eq(rdzv_join(r, &n, 0), -EINVAL);
	snprintf(n.name, sizeof(n.name), "a b");
	ck_assert_int_eq(rdzv_join(r, &n, 0), -EINVAL);
	snprintf(n.name, sizeof(n.name), "ok");
	n.local_world_size = 0;
	ck_assert_int_eq(rdzv_join(r, &n, 0), -EINVAL);
	ck_assert_int_eq(rdzv_heartbeat(r, "ok", 0), -ENOENT);
	ck_assert_int_eq(rdzv_leave(r, "ok", 0), -ENOENT);
	ck_assert_int_eq(world(r, "ok", 1), -ENOENT);
	/* nothing joined: nothing opened */
	int64_t round = -1;
	ck_assert_int_eq(state(r, &round, NULL), RDZV_GATHERING);
	ck_assert_int_eq(round, 0);
	ck_assert_int_eq(join(r, "ok", 0), 1);
	ck_assert_int_eq(world(r, "ok", 2), -EINVAL);
	rdzv_free(r);
}
END_TEST

START_TEST(test_last_call)
{
	struct rdzv *r = mk(2, 4, 1, 1000, 0, 0);
	int n;

	ck_assert_int_eq(join(r, "a", 0), 1);
	ck_assert_int_eq(rdzv_next_deadline(r), INT64_MAX);
	ck_assert_int_eq(join(r, "b", 100), 1); /* min reached: last call until 1100 */
	ck_assert_int_eq(rdzv_next_deadline(r), 1100);
	ck_assert_int_eq(join(r, "c", 600), 1); /* does not push the deadline back */
	ck_assert_int_eq(rdzv_next_deadline(r), 1100);
	ck_assert_int_eq(rdzv_waiting(r), 3);
	ck_assert_int_eq(tick(r, 1099), 0);
	ck_assert_int_eq(world(r, "a", 1), 0);
	ck_assert_int_eq(tick(r, 1100), 1);
	ck_assert_int_eq(state(r, NULL, &n), RDZV_COMPLETE);
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(rdzv_waiting(r), 0);
	ck_assert_int_eq(rank_of(r, "a", 1), 0);
	ck_assert_int_eq(rank_of(r, "b", 1), 1);
	ck_assert_int_eq(rank_of(r, "c", 1), 2);
	ck_assert_int_eq(W.nnodes, 3);
	ck_assert_int_eq(W.world_size, 3);
	ck_assert_int_eq(W.round, 1);
	ck_assert_str_eq(W.members[2].node.name, "c");
	ck_assert_str_eq(W.members[2].node.addr, "10.0.0.1:29501");
	rdzv_free(r);
}
END_TEST

START_TEST(test_at_once_at_max)
{
	struct rdzv *r = mk(2, 3, 1, 60000, 0, 0);

	join(r, "a", 0);
	join(r, "b", 0);
	ck_assert_int_eq(world(r, "a", 1), 0);
	join(r, "c", 5); /* max: no last call */
	ck_assert_int_eq(state(r, NULL, NULL), RDZV_COMPLETE);
	ck_assert_int_eq(world(r, "c", 1), 1);
	ck_assert_int_eq(W.nnodes, 3);
	rdzv_free(r);
}
END_TEST

START_TEST(test_never_stuck_above_min)
{
	/* min 2 max 4, 3 waiting: completes with 3 after the last call */
	struct rdzv *r = mk(2, 4, 1, 1000, 0, 0);
	int n;

	join(r, "a", 0);
	join(r, "b", 0);
	join(r, "c", 0);
	tick(r, 1000);
	ck_assert_int_eq(state(r, NULL, &n), RDZV_COMPLETE);
	ck_assert_int_eq(n, 3);
	rdzv_free(r);

	/* unit 2: completes with 2, the third waits as a spare */
	r = mk(2, 4, 2, 1000, 0, 0);
	join(r, "a", 0);
	join(r, "b", 0);
	join(r, "c", 0);
	tick(r, 1000);
	ck_assert_int_eq(state(r, NULL, &n), RDZV_COMPLETE);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(world(r, "a", 1), 1);
	ck_assert_int_eq(world(r, "b", 1), 1);
	ck_assert_int_eq(world(r, "c", 1), -EAGAIN);
	ck_assert_int_eq(rdzv_waiting(r), 0); /* one spare cannot grow the world */
	rdzv_free(r);

	/* a steady trickle of joins never holds the round back */
	r = mk(2, 100, 1, 1000, 0, 0);
	char name[32];
	int64_t t, done = -1;
	for (t = 0; t < 10000; t += 300) {
		snprintf(name, sizeof(name), "n%" PRId64, t);
		join(r, name, t);
		if (state(r, NULL, NULL) == RDZV_COMPLETE) {
			done = t;
			break;
		}
	}
	/* min at 300, last call until 1300: the join at 1500 completes it */
	ck_assert_int_eq(done, 1500);
	ck_assert_int_eq(state(r, NULL, &n), RDZV_COMPLETE);
	ck_assert_int_eq(n, 6);
	rdzv_free(r);
}
END_TEST

START_TEST(test_node_unit_and_spares)
{
	/* min 3 max 7 unit 2: worlds of 4 or 6 nodes */
	struct rdzv *r = mk(3, 7, 2, 1000, 0, 0);
	int n;
	int64_t round;

	join(r, "a", 0);
	join(r, "b", 0);
	join(r, "c", 0);
	ck_assert_int_eq(rdzv_next_deadline(r), INT64_MAX); /* 3 < 4: min not reached */
	tick(r, 50000);
	ck_assert_int_eq(state(r, NULL, NULL), RDZV_GATHERING);
	join(r, "d", 50000);
	join(r, "e", 50100);
	tick(r, 51000);
	ck_assert_int_eq(state(r, &round, &n), RDZV_COMPLETE);
	ck_assert_int_eq(n, 4);
	ck_assert_int_eq(world(r, "e", 1), -EAGAIN); /* the latest joiner is the spare */
	/* a second spare makes a unit: the world can grow to 6 */
	ck_assert_int_eq(join(r, "f", 52000), 2);
	ck_assert_int_eq(state(r, &round, NULL), RDZV_GATHERING);
	ck_assert_int_eq(round, 2);
	ck_assert_int_eq(world(r, "a", 1), -ESTALE);
	ck_assert_int_eq(world(r, "e", 1), -ESTALE);
	ck_assert_int_eq(world(r, "e", 2), 0); /* spares carried over */
	ck_assert_int_eq(rdzv_waiting(r), 2);
	const char *old[] = { "d", "c", "b", "a" };
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(join(r, old[i], 52100), 2);
	ck_assert_int_eq(state(r, NULL, &n), RDZV_COMPLETE); /* 6 = max: at once */
	ck_assert_int_eq(n, 6);
	ck_assert_int_eq(rank_of(r, "a", 2), 0);
	ck_assert_int_eq(rank_of(r, "d", 2), 3);
	ck_assert_int_eq(rank_of(r, "e", 2), 4);
	ck_assert_int_eq(rank_of(r, "f", 2), 5);
	rdzv_free(r);
}
END_TEST

START_TEST(test_late_node_next_round)
{
	struct rdzv *r = mk(2, 4, 1, 1000, 5000, 0);
	int64_t round;
	int n;

	join(r, "a", 0);
	join(r, "b", 0);
	tick(r, 1000);
	ck_assert_int_eq(state(r, NULL, NULL), RDZV_COMPLETE);
	/* c is late: a new round, nobody fails */
	ck_assert_int_eq(join(r, "c", 1500), 2);
	ck_assert_int_eq(world(r, "a", 1), -ESTALE);
	ck_assert_int_eq(join(r, "a", 1600), 2);
	ck_assert_int_eq(join(r, "b", 1600), 2);
	tick(r, 2599);
	ck_assert_int_eq(world(r, "a", 2), 0); /* min since 1600 */
	tick(r, 2600);
	ck_assert_int_eq(world(r, "a", 2), 1);
	ck_assert_int_eq(world(r, "c", 2), 1);
	ck_assert_int_eq(state(r, &round, &n), RDZV_COMPLETE);
	ck_assert_int_eq(round, 2);
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(rank_of(r, "a", 2), 0);
	ck_assert_int_eq(rank_of(r, "b", 2), 1);
	ck_assert_int_eq(rank_of(r, "c", 2), 2);
	/* long after the gang wait: still fine */
	tick(r, 100000);
	ck_assert_int_eq(state(r, NULL, NULL), RDZV_COMPLETE);
	rdzv_free(r);
}
END_TEST

/* With no last call (0) a late node must not form a world alone: the
 * round it opens waits for the previous world's members to join again
 * (they hear of it by their heartbeat), else the one left out would open
 * the next round alone in turn, and the world would be re-formed at every
 * heartbeat, each time without the other.  A member that does not come
 * back within the heartbeat timeout is not waited for. */
START_TEST(test_no_last_call_waits_for_members)
{
	struct rdzv *r = mk(1, 3, 1, 0, 0, 5000);
	int64_t round;
	int n;

	ck_assert_int_eq(join(r, "a", 0), 1);
	ck_assert_int_eq(world(r, "a", 1), 1);
	ck_assert_int_eq(join(r, "b", 1000), 2);
	ck_assert_int_eq(world(r, "b", 2), 0); /* not alone: a was a member */
	ck_assert_int_eq(world(r, "a", 1), -ESTALE);
	tick(r, 1500);
	ck_assert_int_eq(world(r, "b", 2), 0);
	ck_assert_int_eq(rdzv_heartbeat(r, "a", 1900), 0);
	ck_assert_int_eq(join(r, "a", 2000), 2);
	ck_assert_int_eq(state(r, &round, &n), RDZV_COMPLETE);
	ck_assert_int_eq(round, 2);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(rank_of(r, "a", 2), 0);
	ck_assert_int_eq(rank_of(r, "b", 2), 1);
	/* settled: heartbeats and ticks change nothing */
	for (int64_t t = 3000; t < 10000; t += 1000) {
		ck_assert_int_eq(rdzv_heartbeat(r, "a", t), 0);
		ck_assert_int_eq(rdzv_heartbeat(r, "b", t), 0);
		ck_assert_int_eq(tick(r, t), 0);
	}
	ck_assert_int_eq(state(r, &round, NULL), RDZV_COMPLETE);
	ck_assert_int_eq(round, 2);
	/* c joins; a heartbeats but never joins again: c and b go on without
	 * it once the heartbeat timeout passed since the round opened */
	ck_assert_int_eq(join(r, "c", 10000), 3);
	ck_assert_int_eq(join(r, "b", 10100), 3);
	ck_assert_int_eq(rdzv_heartbeat(r, "a", 12000), 0);
	ck_assert_int_eq(rdzv_heartbeat(r, "b", 14000), 0);
	ck_assert_int_eq(rdzv_heartbeat(r, "c", 14000), 0);
	ck_assert_int_eq(rdzv_next_deadline(r), 15000);
	tick(r, 14999);
	ck_assert_int_eq(world(r, "c", 3), 0);
	tick(r, 15000);
	ck_assert_int_eq(world(r, "c", 3), 1);
	ck_assert_int_eq(rank_of(r, "b", 3), 1);
	ck_assert_int_eq(rank_of(r, "c", 3), 0);
	rdzv_free(r);
}
END_TEST

START_TEST(test_gang_wait_fails)
{
	struct rdzv *r = mk(3, 4, 1, 1000, 5000, 0);

	join(r, "a", 0);
	join(r, "b", 100);
	ck_assert_int_eq(rdzv_next_deadline(r), 5000);
	ck_assert_int_eq(tick(r, 4999), 0);
	ck_assert_int_eq(world(r, "a", 1), 0);
	ck_assert_str_eq(rdzv_reason(r), "");
	ck_assert_int_eq(tick(r, 5000), 1);
	ck_assert_int_eq(state(r, NULL, NULL), RDZV_FAILED);
	ck_assert_int_eq(world(r, "a", 1), -ECANCELED);
	ck_assert_int_eq(join(r, "c", 5001), -ECANCELED);
	ck_assert_ptr_nonnull(strstr(rdzv_reason(r), "gathered 2 of at least 3 nodes in 5000 ms"));
	ck_assert_int_eq(rdzv_waiting(r), 0);
	ck_assert_int_eq(rdzv_next_deadline(r), INT64_MAX);
	rdzv_free(r);
}
END_TEST

START_TEST(test_gang_wait_met)
{
	struct rdzv *r = mk(3, 4, 1, 1000, 5000, 0);

	join(r, "a", 0);
	join(r, "b", 100);
	join(r, "c", 4900);
	ck_assert_int_eq(rdzv_next_deadline(r), 5900);
	ck_assert_int_eq(tick(r, 5000), 0);
	ck_assert_int_eq(state(r, NULL, NULL), RDZV_GATHERING);
	ck_assert_int_eq(tick(r, 5900), 1);
	ck_assert_int_eq(state(r, NULL, NULL), RDZV_COMPLETE);
	/* a later round has its own gang clock: opened at 10000 by a leave */
	ck_assert_int_eq(rdzv_leave(r, "c", 10000), 1);
	join(r, "a", 10100);
	join(r, "b", 10100);
	ck_assert_int_eq(tick(r, 14999), 0);
	join(r, "d", 14999);
	ck_assert_int_eq(tick(r, 15000), 0);
	ck_assert_int_eq(state(r, NULL, NULL), RDZV_GATHERING);
	tick(r, 15999);
	ck_assert_int_eq(state(r, NULL, NULL), RDZV_COMPLETE);
	rdzv_free(r);
}
END_TEST

START_TEST(test_leave_and_rejoin_open_rounds)
{
	struct rdzv *r = mk(2, 3, 1, 1000, 0, 0);
	int64_t round;
	int n;

	join(r, "a", 0);
	join(r, "b", 0);
	join(r, "c", 0);
	ck_assert_int_eq(state(r, &round, NULL), RDZV_COMPLETE);
	ck_assert_int_eq(round, 1);
	/* c dies: round 2, the others learn it and join again */
	ck_assert_int_eq(rdzv_leave(r, "c", 100), 1);
	ck_assert_int_eq(world(r, "c", 1), -ENOENT);
	ck_assert_int_eq(world(r, "a", 1), -ESTALE);
	ck_assert_int_eq(world(r, "a", 2), -ESTALE); /* not joined to round 2 yet */
	ck_assert_int_eq(state(r, &round, &n), RDZV_GATHERING);
	ck_assert_int_eq(round, 2);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(join(r, "a", 200), 2);
	ck_assert_int_eq(join(r, "b", 300), 2);
	ck_assert_int_eq(world(r, "a", 2), 0);
	tick(r, 1300);
	ck_assert_int_eq(world(r, "b", 2), 1);
	ck_assert_int_eq(W.nnodes, 2);
	/* b's workers restart: it joins again, a new round for everyone */
	ck_assert_int_eq(join(r, "b", 2000), 3);
	ck_assert_int_eq(world(r, "a", 2), -ESTALE);
	ck_assert_int_eq(world(r, "b", 3), 0);
	ck_assert_int_eq(join(r, "a", 2100), 3);
	tick(r, 3100);
	ck_assert_int_eq(world(r, "a", 3), 1);
	ck_assert_int_eq(rank_of(r, "a", 3), 0);
	ck_assert_int_eq(rank_of(r, "b", 3), 1);
	/* joining twice while gathering is one join */
	ck_assert_int_eq(rdzv_leave(r, "a", 4000), 1);
	ck_assert_int_eq(join(r, "b", 4001), 4);
	ck_assert_int_eq(join(r, "b", 4002), 4);
	ck_assert_int_eq(rdzv_waiting(r), 1);
	/* a leave while gathering changes who waits, not the round */
	ck_assert_int_eq(rdzv_leave(r, "b", 4003), 0);
	ck_assert_int_eq(state(r, &round, &n), RDZV_GATHERING);
	ck_assert_int_eq(round, 4);
	ck_assert_int_eq(n, 0);
	rdzv_free(r);
}
END_TEST

START_TEST(test_ranks_stable)
{
	struct rdzv *r = mk(2, 4, 1, 1000, 0, 0);
	const char *names[] = { "a", "b", "c", "d" };

	for (int i = 0; i < 4; i++)
		join(r, names[i], 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(rank_of(r, names[i], 1), i);
	/* b leaves; the rest join again in another order */
	rdzv_leave(r, "b", 10);
	join(r, "d", 20);
	join(r, "c", 30);
	join(r, "a", 40);
	tick(r, 1040);
	ck_assert_int_eq(rank_of(r, "a", 2), 0);
	ck_assert_int_eq(rank_of(r, "c", 2), 2);
	ck_assert_int_eq(rank_of(r, "d", 2), 1); /* 3 is gone: the free rank */
	/* rounds later, in reverse order, same ranks; b comes back at the end */
	for (int round = 3; round < 6; round++) {
		int64_t t = round * 10000;
		ck_assert_int_eq(join(r, "d", t), round); /* restart of d opens it */
		join(r, "c", t + 1);
		join(r, "a", t + 2);
		tick(r, t + 1002);
		ck_assert_int_eq(rank_of(r, "a", round), 0);
		ck_assert_int_eq(rank_of(r, "d", round), 1);
		ck_assert_int_eq(rank_of(r, "c", round), 2);
	}
	ck_assert_int_eq(join(r, "b", 70000), 6);
	join(r, "c", 70001);
	join(r, "a", 70002);
	join(r, "d", 70003);
	ck_assert_int_eq(rank_of(r, "a", 6), 0);
	ck_assert_int_eq(rank_of(r, "d", 6), 1);
	ck_assert_int_eq(rank_of(r, "c", 6), 2);
	ck_assert_int_eq(rank_of(r, "b", 6), 3);
	rdzv_free(r);
}
END_TEST

START_TEST(test_rank_offsets)
{
	struct rdzv *r = mk(3, 3, 1, 0, 0, 0);

	join_lws(r, "a", 4, 0);
	join_lws(r, "b", 2, 0);
	join_lws(r, "c", 8, 0);
	ck_assert_int_eq(world(r, "b", 1), 1);
	ck_assert_int_eq(W.world_size, 14);
	ck_assert_int_eq(W.members[0].rank_offset, 0);
	ck_assert_int_eq(W.members[1].rank_offset, 4);
	ck_assert_int_eq(W.members[2].rank_offset, 6);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(W.members[i].group_rank, i);
	ck_assert_int_eq(W.members[2].node.local_world_size, 8);
	/* a restarts with fewer processes: offsets follow */
	join_lws(r, "a", 1, 10);
	join_lws(r, "b", 2, 10);
	join_lws(r, "c", 8, 10);
	ck_assert_int_eq(world(r, "c", 2), 1);
	ck_assert_int_eq(W.world_size, 11);
	ck_assert_int_eq(W.members[1].rank_offset, 1);
	ck_assert_int_eq(W.members[2].rank_offset, 3);
	rdzv_free(r);
}
END_TEST

START_TEST(test_heartbeat_timeout)
{
	struct rdzv *r = mk(2, 3, 1, 1000, 0, 5000);
	char dead[2][64];
	int nd = -1;
	int64_t round;

	join(r, "a", 0);
	join(r, "b", 0);
	join(r, "c", 0);
	for (int64_t t = 1000; t <= 4000; t += 1000)
		ck_assert_int_eq(rdzv_heartbeat(r, "a", t), 0);
	ck_assert_int_eq(rdzv_next_deadline(r), 5000);
	ck_assert_int_eq(rdzv_tick(r, 4999, dead, 2, &nd), 0);
	ck_assert_int_eq(nd, 0);
	ck_assert_int_eq(state(r, &round, NULL), RDZV_COMPLETE);
	/* b and c silent since 0: dead at 5000, not before */
	ck_assert_int_eq(rdzv_tick(r, 5000, dead, 2, &nd), 1);
	ck_assert_int_eq(nd, 2);
	ck_assert_str_eq(dead[0], "b");
	ck_assert_str_eq(dead[1], "c");
	ck_assert_int_eq(world(r, "b", 1), -ENOENT);
	ck_assert_int_eq(rdzv_heartbeat(r, "b", 5001), -ENOENT);
	ck_assert_int_eq(state(r, &round, NULL), RDZV_GATHERING);
	ck_assert_int_eq(round, 2);
	ck_assert_int_eq(rdzv_next_deadline(r), 9000); /* a's last heartbeat + 5000 */
	/* a keeps beating: never dead */
	for (int64_t t = 5000; t <= 20000; t += 1000) {
		rdzv_heartbeat(r, "a", t);
		ck_assert_int_eq(rdzv_tick(r, t, dead, 2, &nd), 0);
		ck_assert_int_eq(nd, 0);
	}
	/* a node declared dead may join again */
	ck_assert_int_eq(join(r, "b", 20000), 2);
	rdzv_free(r);
}
END_TEST

START_TEST(test_dead_more_than_room)
{
	struct rdzv *r = mk(1, 4, 1, 0, 0, 1000);
	char dead[1][64];
	int nd;

	join(r, "x", 10);
	join(r, "y", 5);
	join(r, "z", 0);
	/* one name per call: the next silent node waits for the next tick */
	rdzv_tick(r, 2000, dead, 1, &nd);
	ck_assert_int_eq(nd, 1);
	ck_assert_str_eq(dead[0], "z");
	ck_assert_int_le(rdzv_next_deadline(r), 2000);
	rdzv_tick(r, 2000, dead, 1, &nd);
	ck_assert_str_eq(dead[0], "y");
	rdzv_tick(r, 2000, dead, 1, &nd);
	ck_assert_str_eq(dead[0], "x");
	rdzv_tick(r, 2000, dead, 1, &nd);
	ck_assert_int_eq(nd, 0);
	rdzv_free(r);
}
END_TEST

START_TEST(test_grace_after_restart)
{
	struct rdzv *r = mk(2, 2, 1, 0, 0, 5000);
	char dead[2][64];
	int nd;

	join(r, "a", 0);
	join(r, "b", 0);
	/* the master was down from 1000 to 60000 */
	ck_assert_int_eq(rdzv_grace(r, 60000), 2);
	rdzv_tick(r, 60000, dead, 2, &nd);
	ck_assert_int_eq(nd, 0);
	ck_assert_int_eq(world(r, "a", 1), 1);
	rdzv_tick(r, 65000, dead, 2, &nd);
	ck_assert_int_eq(nd, 2);
	rdzv_free(r);
}
END_TEST

START_TEST(test_spares_at_max)
{
	struct rdzv *r = mk(2, 2, 1, 1000, 0, 0);
	int64_t round;

	join(r, "a", 0);
	join(r, "b", 0);
	ck_assert_int_eq(join(r, "c", 10), 1);
	ck_assert_int_eq(join(r, "d", 20), 1);
	ck_assert_int_eq(world(r, "c", 1), -EAGAIN);
	ck_assert_int_eq(world(r, "a", 1), 1);
	ck_assert_int_eq(state(r, &round, NULL), RDZV_COMPLETE);
	ck_assert_int_eq(round, 1);
	ck_assert_int_eq(rdzv_waiting(r), 0);
	/* a member dies: the spares fill in at once, the old member keeps its rank */
	ck_assert_int_eq(rdzv_leave(r, "a", 30), 1);
	ck_assert_int_eq(world(r, "c", 1), -ESTALE);
	ck_assert_int_eq(join(r, "b", 40), 2);
	ck_assert_int_eq(state(r, NULL, NULL), RDZV_COMPLETE);
	ck_assert_int_eq(rank_of(r, "b", 2), 1);
	ck_assert_int_eq(rank_of(r, "c", 2), 0);
	ck_assert_int_eq(world(r, "d", 2), -EAGAIN);
	rdzv_free(r);
}
END_TEST

/* ---- snapshots ---- */

static void snap(const struct rdzv *r, struct rv_buf *b)
{
	rv_buf_truncate(b, 0);
	ck_assert_int_eq(rdzv_snapshot_save(r, b), 0);
}

static struct rdzv *clone(const struct rdzv *r, int min, int max, int unit, int64_t lc, int64_t mw,
			  int64_t hb)
{
	struct rv_buf b = { 0 };
	struct rv_err err = { 0 };
	struct rdzv *t = mk(min, max, unit, lc, mw, hb);

	snap(r, &b);
	ck_assert_msg(rdzv_snapshot_load(t, b.data, b.len, &err) == 0, "load: %s (%s)", err.msg,
		      err.field);
	rv_buf_release(&b);
	return t;
}

/* Same results and the same saved state after the same operation. */
static void same(struct rdzv *x, struct rdzv *y)
{
	struct rv_buf bx = { 0 }, by = { 0 };

	snap(x, &bx);
	snap(y, &by);
	ck_assert_str_eq(bx.data, by.data);
	ck_assert_int_eq(rdzv_next_deadline(x), rdzv_next_deadline(y));
	rv_buf_release(&bx);
	rv_buf_release(&by);
}

/* A node whose agent finished (exited with success) stops heartbeating
 * while its peers finish their last steps: its silence kills no one and
 * opens no round, across a snapshot too; a join makes it a node like any. */
START_TEST(test_done_node_silence)
{
	struct rdzv *r = mk(2, 2, 1, 0, 0, 5000);
	char dead[2][64];
	int nd = -1;
	int64_t round;

	join(r, "a", 0);
	join(r, "b", 0);
	ck_assert_int_eq(state(r, &round, NULL), RDZV_COMPLETE);
	ck_assert_int_eq(rdzv_done(r, "a"), 0);
	ck_assert_int_eq(rdzv_done(r, "x"), -ENOENT);
	for (int64_t t = 1000; t <= 20000; t += 1000)
		rdzv_heartbeat(r, "b", t);
	ck_assert_int_eq(rdzv_next_deadline(r), 25000); /* b's, not a's 5000 */
	struct rdzv *t = clone(r, 2, 2, 1, 0, 0, 5000);
	same(r, t);
	struct rdzv *rs[] = { r, t };
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(rdzv_tick(rs[i], 20000, dead, 2, &nd), 0);
		ck_assert_int_eq(nd, 0);
		ck_assert_int_eq(state(rs[i], &round, NULL), RDZV_COMPLETE);
		ck_assert_int_eq(round, 1);
		ck_assert_int_eq(world(rs[i], "b", 1), 1);
	}
	rdzv_free(t);
	/* a node that comes back is watched again */
	ck_assert_int_eq(join(r, "a", 21000), 2);
	rdzv_tick(r, 30000, dead, 2, &nd);
	ck_assert_int_eq(nd, 2);
	ck_assert_str_eq(dead[1], "a");
	rdzv_free(r);
}
END_TEST

/* Alive (its workers keep their shards): joined, heard from within the
 * heartbeat timeout, not done; not after a leave, a death or a done. */
START_TEST(test_alive)
{
	struct rdzv *r = mk(1, 3, 1, 0, 0, 5000);
	char dead[2][64];
	int nd = -1;

	ck_assert(!rdzv_alive(r, "a", 0));
	join(r, "a", 0);
	join(r, "b", 0);
	join(r, "c", 0);
	ck_assert(rdzv_alive(r, "a", 4999));
	ck_assert(!rdzv_alive(r, "a", 5000));
	ck_assert_int_eq(rdzv_heartbeat(r, "a", 4000), 0);
	ck_assert(rdzv_alive(r, "a", 8999));
	ck_assert_int_eq(rdzv_done(r, "b"), 0);
	ck_assert(!rdzv_alive(r, "b", 1));
	ck_assert_int_eq(rdzv_leave(r, "a", 5000) >= 0, 1);
	ck_assert(!rdzv_alive(r, "a", 5000));
	rdzv_tick(r, 5000, dead, 2, &nd);
	ck_assert_int_eq(nd, 1);
	ck_assert_str_eq(dead[0], "c");
	ck_assert(!rdzv_alive(r, "c", 5000));
	ck_assert(!rdzv_alive(r, NULL, 0));
	rdzv_free(r);
}
END_TEST

/* A member whose agent is gone (rdzv_lost: killed, declared dead): the
 * others' round completes as soon as they are back, the world shrinks at
 * once; a member that reported its workers' failure (rdzv_leave) joins
 * again in ms, so its round waits the last call instead.  The lost node,
 * back, grows the world again; a snapshot keeps the lost round. */
START_TEST(test_lost_shrinks_at_once)
{
	struct rdzv *r = mk(1, 3, 1, 1000, 0, 0);
	int64_t round;
	int n;

	join(r, "a", 0);
	join(r, "b", 0);
	tick(r, 1000);
	ck_assert_int_eq(rank_of(r, "b", 1), 1);
	ck_assert_int_eq(rdzv_lost(r, "b", 2000), 1);
	struct rdzv *t = clone(r, 1, 3, 1, 1000, 0, 0);
	same(r, t);
	struct rdzv *rs[] = { r, t };
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(join(rs[i], "a", 2010), 2);
		ck_assert_int_eq(state(rs[i], &round, &n), RDZV_COMPLETE);
		ck_assert_int_eq(round, 2);
		ck_assert_int_eq(n, 1);
		ck_assert_int_eq(rank_of(rs[i], "a", 2), 0);
	}
	rdzv_free(t);
	/* b back: a unit of spares below max grows the world */
	ck_assert_int_eq(join(r, "b", 5000), 3);
	ck_assert_int_eq(join(r, "a", 5010), 3);
	tick(r, 6000);
	ck_assert_int_eq(state(r, &round, &n), RDZV_COMPLETE);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(rank_of(r, "a", 3), 0);
	/* a reported failure: no shrink, the last call waits for b's rejoin */
	ck_assert_int_eq(rdzv_leave(r, "b", 7000), 1);
	ck_assert_int_eq(join(r, "a", 7010), 4);
	ck_assert_int_eq(state(r, &round, NULL), RDZV_GATHERING);
	ck_assert_int_eq(join(r, "b", 7100), 4);
	tick(r, 8010);
	ck_assert_int_eq(state(r, &round, &n), RDZV_COMPLETE);
	ck_assert_int_eq(n, 2);
	/* declared dead by the heartbeat timeout: lost too */
	struct rdzv *h = mk(1, 3, 1, 1000, 0, 3000);
	join(h, "a", 0);
	join(h, "b", 0);
	tick(h, 1000);
	rdzv_heartbeat(h, "a", 3500);
	char dead[4][64];
	int nd;
	rdzv_tick(h, 3600, dead, 4, &nd);
	ck_assert_int_eq(nd, 1);
	ck_assert_int_eq(join(h, "a", 3610), 2);
	ck_assert_int_eq(state(h, &round, &n), RDZV_COMPLETE);
	ck_assert_int_eq(n, 1);
	rdzv_free(h);
	rdzv_free(r);
}
END_TEST

START_TEST(test_snapshot_round_trip)
{
	struct rdzv *r = mk(2, 4, 2, 1000, 8000, 3000);

	/* mid-gathering, min reached, last call running */
	join(r, "a", 0);
	join(r, "b", 100);
	join(r, "c", 200);
	struct rdzv *t = clone(r, 2, 4, 2, 1000, 8000, 3000);
	same(r, t);
	ck_assert_int_eq(world(t, "a", 1), 0);
	ck_assert_int_eq(tick(r, 1100), 1);
	ck_assert_int_eq(tick(t, 1100), 1);
	same(r, t);
	ck_assert_int_eq(world(t, "c", 1), -EAGAIN);
	ck_assert_int_eq(rank_of(t, "b", 1), 1);
	rdzv_free(t);

	/* mid-complete with a spare and previous ranks: the same next rounds */
	t = clone(r, 2, 4, 2, 1000, 8000, 3000);
	struct rdzv *rs[] = { r, t };
	for (int i = 0; i < 2; i++) {
		rdzv_heartbeat(rs[i], "a", 2000);
		ck_assert_int_eq(join(rs[i], "d", 2100), 2); /* a unit of spares: grow */
		join(rs[i], "b", 2200);
		char dead[4][64];
		int nd;
		rdzv_tick(rs[i], 4200, dead, 4, &nd); /* c silent since 200: dead */
		ck_assert_int_eq(nd, 1);
		ck_assert_str_eq(dead[0], "c");
	}
	same(r, t);
	rdzv_free(t);

	/* failed: the reason survives */
	struct rdzv *f = mk(3, 3, 1, 0, 100, 0);
	join(f, "a", 0);
	tick(f, 100);
	t = clone(f, 3, 3, 1, 0, 100, 0);
	ck_assert_int_eq(state(t, NULL, NULL), RDZV_FAILED);
	ck_assert_str_eq(rdzv_reason(t), rdzv_reason(f));
	rdzv_free(f);
	rdzv_free(t);
	rdzv_free(r);
}
END_TEST

START_TEST(test_snapshot_bad)
{
	struct rdzv *r = mk(1, 4, 1, 0, 0, 0);
	struct rv_buf before = { 0 }, after = { 0 };
	struct rv_err err;
	const char *docs[][2] = {
		{ "[]", "" },
		{ "{\"version\":2}", "version" },
		{ "{\"version\":1,\"state\":\"done\"}", "state" },
		{ "{\"version\":1,\"state\":\"complete\",\"round\":1,\"open_ms\":0,\"min_at_ms\":-"
		  "1,"
		  "\"seq\":2,\"rounds_completed\":1,\"reason\":\"\",\"nodes\":["
		  "{\"name\":\"a\",\"addr\":\"\",\"local_world_size\":1,\"status\":\"member\","
		  "\"rank\":0,\"prev_rank\":-1,\"seq\":1,\"last_seen\":0},"
		  "{\"name\":\"a\",\"addr\":\"\",\"local_world_size\":1,\"status\":\"waiting\","
		  "\"rank\":-1,\"prev_rank\":-1,\"seq\":2,\"last_seen\":0}]}",
		  "nodes[1].name" },
		{ "{\"version\":1,\"state\":\"complete\",\"round\":1,\"open_ms\":0,\"min_at_ms\":-"
		  "1,"
		  "\"seq\":2,\"rounds_completed\":1,\"reason\":\"\",\"nodes\":["
		  "{\"name\":\"a\",\"addr\":\"\",\"local_world_size\":1,\"status\":\"member\","
		  "\"rank\":1,\"prev_rank\":-1,\"seq\":1,\"last_seen\":0}]}",
		  "nodes" },
		{ "{\"version\":1,\"state\":\"gathering\",\"round\":1,\"open_ms\":0,\"min_at_ms\":-"
		  "1,"
		  "\"seq\":2,\"rounds_completed\":1,\"reason\":\"\",\"nodes\":["
		  "{\"name\":\"a\",\"addr\":\"\",\"local_world_size\":0,\"status\":\"waiting\","
		  "\"rank\":-1,\"prev_rank\":-1,\"seq\":1,\"last_seen\":0}]}",
		  "nodes[0].local_world_size" },
	};

	join(r, "keep", 0);
	snap(r, &before);
	for (size_t i = 0; i < RV_ARRAY_SIZE(docs); i++) {
		memset(&err, 0, sizeof(err));
		ck_assert_int_eq(rdzv_snapshot_load(r, docs[i][0], strlen(docs[i][0]), &err),
				 -EINVAL);
		ck_assert_msg(strcmp(err.field, docs[i][1]) == 0, "doc %zu: field %s, msg %s", i,
			      err.field, err.msg);
	}
	snap(r, &after);
	ck_assert_str_eq(before.data, after.data); /* unchanged */
	rv_buf_release(&before);
	rv_buf_release(&after);
	rdzv_free(r);
}
END_TEST

/* ---- random interleavings ---- */

static uint64_t rng_next(uint64_t *s)
{
	/* splitmix64: seeded, reproducible */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void check_invariants(struct rdzv *r, int eff_min, int eff_max, int unit,
			     int64_t *last_round, int seed)
{
	int64_t round;
	int n;
	int st = rdzv_state(r, &round, &n);
	struct rdzv_stats s;

	ck_assert_msg(round >= *last_round, "seed %d: round went back", seed);
	*last_round = round;
	rdzv_stats(r, &s);
	ck_assert_int_eq(s.members + s.waiting + s.idle, s.known);
	rdzv_current(r, &W);
	if (st != RDZV_COMPLETE) {
		ck_assert_int_eq(W.nnodes, 0);
		if (st == RDZV_GATHERING)
			ck_assert_int_eq(n, s.waiting);
		return;
	}
	ck_assert_msg(W.nnodes >= eff_min && W.nnodes <= eff_max && W.nnodes % unit == 0,
		      "seed %d: world of %d nodes", seed, W.nnodes);
	ck_assert_int_eq(W.nnodes, s.members);
	ck_assert_int_eq(W.round, round);
	int off = 0;
	for (int i = 0; i < W.nnodes; i++) {
		struct rdzv_member *m = &W.members[i];
		int rank = -1;
		ck_assert_int_eq(m->group_rank, i);
		ck_assert_int_eq(m->rank_offset, off);
		off += m->node.local_world_size;
		/* a member is in the world, not waiting */
		ck_assert_int_eq(rdzv_world(r, m->node.name, round, NULL, &rank), 1);
		ck_assert_int_eq(rank, i);
		for (int j = 0; j < i; j++)
			ck_assert_str_ne(W.members[j].node.name, m->node.name);
	}
	ck_assert_int_eq(off, W.world_size);
	/* spares exist only when they cannot grow the world */
	if (W.nnodes < eff_max)
		ck_assert_int_lt(s.waiting, unit);
}

static void property_run(int seed)
{
	uint64_t rs = (uint64_t)seed;
	int min = 1 + (int)(rng_next(&rs) % 6);
	int max = min + (int)(rng_next(&rs) % 8);
	int unit = 1 + (int)(rng_next(&rs) % 3);
	while ((min + unit - 1) / unit * unit > max / unit * unit)
		max++;
	int eff_min = (min + unit - 1) / unit * unit, eff_max = max / unit * unit;
	int64_t lc = (int64_t)(rng_next(&rs) % 3) * 500;
	int64_t mw = rng_next(&rs) % 4 == 0 ? 0 : 20000;
	int64_t hb = 3000;
	struct rdzv *r = mk(min, max, unit, lc, mw, hb);
	struct rdzv *twin = NULL;
	int64_t now = 0, last_round = 0;
	int64_t my_round[2][16] = { { 0 } };
	char dead[16][64];
	int nd;

	for (int step = 0; step < 400 && rdzv_state(r, NULL, NULL) != RDZV_FAILED; step++) {
		int who = (int)(rng_next(&rs) % 16);
		char name[16];
		snprintf(name, sizeof(name), "n%d", who);
		now += (int64_t)(rng_next(&rs) % 400);
		int op = (int)(rng_next(&rs) % 10);
		struct rdzv *both[] = { r, twin };
		for (int k = 0; k < 2 && both[k]; k++) {
			struct rdzv *x = both[k];
			if (op < 3) {
				int64_t got = join_lws(x, name, 1 + who % 3, now);
				ck_assert_int_gt(got, 0);
				my_round[k][who] = got;
			} else if (op < 4) {
				rdzv_leave(x, name, now);
			} else if (op < 8) {
				/* agents heartbeat; a member whose round is old joins again */
				if (rdzv_heartbeat(x, name, now) == 0) {
					int rc = rdzv_world(x, name, my_round[k][who], NULL, NULL);
					if (rc == -ESTALE)
						my_round[k][who] =
							join_lws(x, name, 1 + who % 3, now);
				}
			} else {
				rdzv_tick(x, now, dead, 16, &nd);
			}
		}
		check_invariants(r, eff_min, eff_max, unit, &last_round, seed);
		if (twin) {
			same(r, twin);
		} else if (rng_next(&rs) % 50 == 0) {
			twin = clone(r, min, max, unit, lc, mw, hb);
			memcpy(my_round[1], my_round[0], sizeof(my_round[0]));
		}
	}
	rdzv_free(twin);
	rdzv_free(r);
}

START_TEST(test_property)
{
	for (int seed = 1; seed <= 300; seed++)
		property_run(seed);
}
END_TEST

/* ---- scale ---- */

static double secs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(test_256_one_world)
{
	struct rdzv *r = mk(1, 256, 1, 3000, 0, 5000);
	char name[32];
	int n;

	for (int i = 0; i < 256; i++) {
		snprintf(name, sizeof(name), "node-%03d", i);
		ck_assert_int_eq(join_lws(r, name, 8, i), 1);
	}
	ck_assert_int_eq(state(r, NULL, &n), RDZV_COMPLETE);
	ck_assert_int_eq(n, 256);
	ck_assert_int_eq(world(r, "node-255", 1), 1);
	ck_assert_int_eq(W.world_size, 2048);
	ck_assert_int_eq(W.members[255].rank_offset, 2040);
	rdzv_free(r);
}
END_TEST

START_TEST(test_1024_cost)
{
	/* every node joins, polls its world and heartbeats; then one leaves and
	 * all join again: a linear cost per call keeps this well under a second */
	struct rdzv *r = mk(1, RDZV_MAX_NODES, 1, 60000, 0, 100000);
	char name[32];
	double t0 = secs();

	for (int i = 0; i < RDZV_MAX_NODES; i++) {
		snprintf(name, sizeof(name), "host%d", i);
		ck_assert_int_eq(join(r, name, i), 1);
	}
	for (int i = 0; i < RDZV_MAX_NODES; i++) {
		snprintf(name, sizeof(name), "host%d", i);
		ck_assert_int_eq(world(r, name, 1), 1);
		rdzv_heartbeat(r, name, 2000);
		tick(r, 2000);
	}
	rdzv_leave(r, "host0", 3000);
	for (int i = 1; i < RDZV_MAX_NODES; i++) {
		snprintf(name, sizeof(name), "host%d", i);
		ck_assert_int_eq(join(r, name, 3000), 2);
	}
	ck_assert_int_eq(state(r, NULL, NULL), RDZV_GATHERING); /* 1023 < max */
	tick(r, 63000);
	ck_assert_int_eq(rank_of(r, "host1022", 2), 1022); /* kept */
	ck_assert_int_eq(rank_of(r, "host1023", 2), 0);    /* 1023 is gone: the free rank */
	ck_assert_int_eq(rank_of(r, "host1", 2), 1);
	double dt = secs() - t0;
	ck_assert_msg(dt < 1.0, "1024 nodes took %.3f s", dt);
	ck_assert_int_eq(join(r, "host0", 5000), 3); /* back: the world can grow */
	ck_assert_int_eq(join(r, "one-more", 5000), -ENOSPC);
	rdzv_free(r);
}
END_TEST

static Suite *rdzv_suite(void)
{
	TCase *tc = RV_TEST_TCASE("core", 20, test_config_errors, test_alive, test_bad_nodes,
				  test_last_call, test_at_once_at_max, test_never_stuck_above_min,
				  test_node_unit_and_spares, test_late_node_next_round,
				  test_no_last_call_waits_for_members, test_gang_wait_fails,
				  test_gang_wait_met, test_leave_and_rejoin_open_rounds,
				  test_lost_shrinks_at_once, test_ranks_stable, test_rank_offsets,
				  test_heartbeat_timeout, test_done_node_silence,
				  test_dead_more_than_room, test_grace_after_restart,
				  test_spares_at_max, test_snapshot_round_trip, test_snapshot_bad,
				  test_256_one_world, test_1024_cost);
	TCase *tp = RV_TEST_TCASE("property", 120, test_property);
	return RV_TEST_SUITE("rdzv", tc, tp);
}

RV_TEST_MAIN(rdzv_suite)
