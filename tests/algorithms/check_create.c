/*
 * check_create.c: the create stage picks its neighbours' config (same
 * strategy, nearest in log features, name stem and user), falls back to the
 * model-size default with no history, and respects limits and free capacity.
 */
#include <gsl/gsl_errno.h>

#include "rover_alg.h"
#include "testutil.h"

static struct rv_alg_params P;
static const struct rv_alg_limits LIM = {
	.min_workers = 1, .max_workers = 16, .node_unit = 1, .min_ps = 1, .max_ps = 8,
	.max_cpu = 32, .max_memory_mb = 131072, .free_cpu = -1, .free_memory_mb = -1,
};

static void setup(void)
{
	rv_alg_params_default(&P);
}

static struct rv_alg_history_job hjob(const char *id, const char *name, double params,
				      enum rv_alg_strategy s, int w, double cpu, int64_t mem)
{
	return (struct rv_alg_history_job){
		.id = id,
		.f = {.strategy = s, .parameters = params, .batch_size = 64,
		      .dataset_size = 1e6, .user = "ana", .name = name},
		.cfg = {.worker = {.count = w, .res = {.cpu = cpu, .memory_mb = mem}},
			.ps = {.count = s == RV_ALG_PS ? 2 : 0, .res = {.cpu = 8, .memory_mb = 20000}}},
	};
}

START_TEST(test_name_stem)
{
	char b[64];

	ck_assert_int_eq(rv_alg_name_stem("ctr-train-v2-20261120", b, sizeof(b)), 9);
	ck_assert_str_eq(b, "ctr-train");
	rv_alg_name_stem("bert_v12", b, sizeof(b));
	ck_assert_str_eq(b, "bert");
	rv_alg_name_stem("mnist2", b, sizeof(b));
	ck_assert_str_eq(b, "mnist");
	rv_alg_name_stem("dev", b, sizeof(b));
	ck_assert_str_eq(b, "dev");
	rv_alg_name_stem("12345", b, sizeof(b));
	ck_assert_str_eq(b, "12345");
	rv_alg_name_stem("resnet50-run7", b, 4);
	ck_assert_str_eq(b, "res");
}
END_TEST

START_TEST(test_neighbours_picked)
{
	struct rv_alg_history_job h[] = {
		hjob("j-small", "tiny-7", 1e5, RV_ALG_ALLREDUCE, 1, 1, 1024),
		hjob("j-a", "bert-v1", 1.1e8, RV_ALG_ALLREDUCE, 8, 6, 30000),
		hjob("j-b", "bert-v2", 0.9e8, RV_ALG_ALLREDUCE, 8, 6, 30000),
		hjob("j-ps", "bert-v3", 1e8, RV_ALG_PS, 2, 2, 2000),
	};
	struct rv_alg_job_features job = {
		.strategy = RV_ALG_ALLREDUCE, .parameters = 1e8, .batch_size = 64,
		.dataset_size = 1e6, .user = "ana", .name = "bert-v4",
	};
	struct rv_alg_decision d;

	ck_assert_int_eq(rv_alg_plan_create(&job, h, 4, &LIM, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "create_knn");
	ck_assert(d.changed);
	ck_assert_int_eq(d.cfg.worker.count, 8);
	ck_assert_double_eq_tol(d.cfg.worker.res.cpu, 6.6, 1e-9); /* +10% */
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 33000);
	ck_assert_int_eq(d.cfg.ps.count, 0);
	ck_assert_msg(strstr(d.reason, "j-a") && strstr(d.reason, "j-b"), "%s", d.reason);
	ck_assert_msg(!strstr(d.reason, "j-ps"), "%s", d.reason);
	/* the tiny job is far (1000x the parameters) and weighs almost nothing */
}
END_TEST

/* Memory from the largest neighbour, not their mean: a neighbour that
 * needed more says the job may too, and too little is an OOM and a
 * relaunch where too much is trimmed by the first running plan. */
START_TEST(test_memory_from_largest_neighbour)
{
	struct rv_alg_history_job h[] = {
		hjob("near", "ctr-20261101", 5e6, RV_ALG_PS, 4, 4, 8000),
		hjob("near2", "ctr-20261102", 6e6, RV_ALG_PS, 4, 4, 16000),
	};
	h[1].cfg.ps.res.memory_mb = 30000;
	struct rv_alg_job_features job = {
		.strategy = RV_ALG_PS,
		.parameters = 5e6,
		.batch_size = 64,
		.dataset_size = 1e6,
		.user = "ana",
		.name = "ctr-20261120",
	};
	struct rv_alg_decision d;

	ck_assert_int_eq(rv_alg_plan_create(&job, h, 2, &LIM, &P, &d), 0);
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 17600); /* 16000 + 10% */
	ck_assert_int_eq(d.cfg.ps.res.memory_mb, 33000);
	/* within the node size */
	struct rv_alg_limits small = LIM;

	small.max_memory_mb = 16384;
	ck_assert_int_eq(rv_alg_plan_create(&job, h, 2, &small, &P, &d), 0);
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 16384);
}
END_TEST

/* An all-reduce worker holds the whole model and its optimizer state: a
 * neighbour with a quarter of the parameters used a quarter of it, and the
 * job would OOM twice (x2, x4) before reaching its own need. */
START_TEST(test_allreduce_memory_at_least_state)
{
	struct rv_alg_history_job h[] = {
		hjob("small-model", "lm-1", 3e8, RV_ALG_ALLREDUCE, 16, 4, 8192),
	};
	struct rv_alg_job_features job = {
		.strategy = RV_ALG_ALLREDUCE,
		.parameters = 1.2e9,
		.batch_size = 64,
		.dataset_size = 1e6,
		.user = "ana",
		.name = "lm-2",
	};
	struct rv_alg_decision d;

	ck_assert_int_eq(rv_alg_plan_create(&job, h, 1, &LIM, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "create_knn");
	/* 1.2e9 x 4 bytes x 4 copies = 18311 MiB, above 8192 + 10% */
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 18311);
	ck_assert_msg(strstr(d.reason, "optimizer state"), "%s", d.reason);
	/* within the node size */
	struct rv_alg_limits small = LIM;

	small.max_memory_mb = 16384;
	ck_assert_int_eq(rv_alg_plan_create(&job, h, 1, &small, &P, &d), 0);
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 16384);
	/* a neighbour that used more keeps its memory */
	h[0].cfg.worker.res.memory_mb = 20480;
	ck_assert_int_eq(rv_alg_plan_create(&job, h, 1, &LIM, &P, &d), 0);
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 22528);
	ck_assert_msg(!strstr(d.reason, "optimizer state"), "%s", d.reason);
	/* PS workers hold one copy of the weights, not the state */
	struct rv_alg_history_job hp[] = {
		hjob("small-ps", "lm-1", 3e8, RV_ALG_PS, 16, 4, 8192),
	};
	job.strategy = RV_ALG_PS;
	ck_assert_int_eq(rv_alg_plan_create(&job, hp, 1, &LIM, &P, &d), 0);
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 9012);
}
END_TEST

START_TEST(test_nearest_dominates)
{
	/* one job with the same stem and size, one 30x bigger */
	struct rv_alg_history_job h[] = {
		hjob("same", "ctr-20261101", 5e6, RV_ALG_PS, 4, 4, 8000),
		hjob("bigger", "other", 1.5e8, RV_ALG_PS, 16, 8, 16000),
	};
	struct rv_alg_job_features job = {
		.strategy = RV_ALG_PS, .parameters = 5e6, .batch_size = 64,
		.dataset_size = 1e6, .user = "ana", .name = "ctr-20261120",
	};
	struct rv_alg_decision d;

	ck_assert_int_eq(rv_alg_plan_create(&job, h, 2, &LIM, &P, &d), 0);
	ck_assert_int_eq(d.cfg.worker.count, 4);
	/* the neighbours' PS CPU in all (2 x 8, +10%) over the widest tier
	 * the job allows, 8 PS */
	ck_assert_int_eq(d.cfg.ps.count, 8);
	ck_assert_double_eq_tol(d.cfg.ps.res.cpu, 2.2, 1e-9);
	ck_assert_msg(strstr(d.reason, "same d=0.00") != NULL, "%s", d.reason);

	/* no PS maximum given: the neighbours' PS count and size */
	struct rv_alg_limits open = LIM;

	open.max_ps = 0;
	ck_assert_int_eq(rv_alg_plan_create(&job, h, 2, &open, &P, &d), 0);
	ck_assert_int_eq(d.cfg.ps.count, 2);
	ck_assert_double_eq_tol(d.cfg.ps.res.cpu, 8.8, 1e-9);
}
END_TEST

START_TEST(test_default_without_history)
{
	struct rv_alg_job_features job = {.strategy = RV_ALG_ALLREDUCE, .parameters = 1.2e6};
	struct rv_alg_decision d;

	ck_assert_int_eq(rv_alg_plan_create(&job, NULL, 0, &LIM, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "create_default");
	ck_assert_int_eq(d.cfg.worker.count, 2);
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 16384); /* floor */
	ck_assert_int_eq(d.cfg.ps.count, 0);
	ck_assert_msg(strstr(d.reason, "no similar finished job") != NULL, "%s", d.reason);

	/* a 2e9-parameter PS model: 32 GB of state over 8 GiB PS -> 4 PS when
	 * the job sets no PS maximum; as wide as it allows (8) when it does */
	struct rv_alg_job_features big = {.strategy = RV_ALG_PS, .parameters = 2e9};
	struct rv_alg_limits open = LIM;

	open.max_ps = 0;
	ck_assert_int_eq(rv_alg_plan_create(&big, NULL, 0, &open, &P, &d), 0);
	ck_assert_int_eq(d.cfg.ps.count, 4);
	ck_assert_int_gt(d.cfg.ps.res.memory_mb, 8192);
	ck_assert_int_eq(rv_alg_plan_create(&big, NULL, 0, &LIM, &P, &d), 0);
	ck_assert_int_eq(d.cfg.ps.count, 8);
	ck_assert_int_gt(d.cfg.ps.res.memory_mb, 8192);
	ck_assert_int_ge(d.cfg.worker.res.memory_mb, 16384);

	/* a 1.5e10-parameter model wants 30 PS; capped at 16, each PS holds
	 * its larger share (memory follows the capped count) */
	struct rv_alg_job_features huge = { .strategy = RV_ALG_PS, .parameters = 1.5e10 };
	struct rv_alg_limits wide = LIM;

	wide.max_ps = 16;
	wide.max_memory_mb = 0;
	ck_assert_int_eq(rv_alg_plan_create(&huge, NULL, 0, &wide, &P, &d), 0);
	ck_assert_int_eq(d.cfg.ps.count, 16);
	/* 1.5 x its share of 16 bytes of state per parameter, as uncapped */
	ck_assert_int_ge(d.cfg.ps.res.memory_mb, (int64_t)(1.5e10 * 16 / 1048576 / 16 * 1.5));

	/* history of the other strategy only: still the default */
	struct rv_alg_history_job h[] = {hjob("ps", "x", 1.2e6, RV_ALG_PS, 9, 9, 9000)};

	ck_assert_int_eq(rv_alg_plan_create(&job, h, 1, &LIM, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "create_default");
}
END_TEST

START_TEST(test_limits_and_free_capacity)
{
	struct rv_alg_history_job h[] = {
		hjob("a", "bert", 1e8, RV_ALG_ALLREDUCE, 12, 40, 300000),
	};
	struct rv_alg_job_features job = {
		.strategy = RV_ALG_ALLREDUCE, .parameters = 1e8, .batch_size = 64,
		.dataset_size = 1e6, .user = "ana", .name = "bert",
	};
	struct rv_alg_limits lim = LIM;
	struct rv_alg_decision d;

	lim.max_workers = 10;
	lim.node_unit = 4;
	lim.free_cpu = 70; /* two nodes of 32 CPU */
	ck_assert_int_eq(rv_alg_plan_create(&job, h, 1, &lim, &P, &d), 0);
	ck_assert_double_eq(d.cfg.worker.res.cpu, 32);
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 131072);
	/* 12 -> 8 by max and unit; 8 x 32 CPU > 70 free -> down to the minimum 4 */
	ck_assert_int_eq(d.cfg.worker.count, 4);
}
END_TEST

static Suite *create_suite(void)
{
	gsl_set_error_handler_off();
	TCase *tc = RV_TEST_TCASE("core", 10, test_name_stem, test_neighbours_picked,
				  test_nearest_dominates, test_memory_from_largest_neighbour,
				  test_allreduce_memory_at_least_state,
				  test_default_without_history, test_limits_and_free_capacity);
	tcase_add_checked_fixture(tc, setup, NULL);
	return RV_TEST_SUITE("create", tc);
}

RV_TEST_MAIN(create_suite)
