/*
 * check_policy.c: the running-stage policy over a job's history: outcome
 * judging (better, worse and reverted, not significant, below or above its
 * prediction, explorations kept, still measuring), warm-up dropping, the
 * starvation filter, repeat suppression, the one-shot step, node names and
 * the create stage's explicit asks.
 */
#include <gsl/gsl_errno.h>
#include <string.h>

#include "rover_alg.h"
#include "testutil.h"

static struct rv_alg_params P;
static const struct rv_alg_limits LIM = {
	.min_workers = 1,
	.max_workers = 16,
	.node_unit = 1,
	.max_cpu = 64,
	.max_memory_mb = 524288,
	.free_cpu = -1,
	.free_memory_mb = -1,
};

static void setup(void)
{
	rv_alg_params_default(&P);
}

static struct rv_alg_applied plan_of(int64_t id, enum rv_alg_stage stage, const char *alg,
				     enum rv_alg_outcome outcome, int64_t ts, int w, double cpu)
{
	return (struct rv_alg_applied){
		.id = id,
		.stage = stage,
		.algorithm = alg,
		.outcome = outcome,
		.applied_ts_ms = ts,
		.based_on_ts_ms = ts,
		.cfg = { .worker = { .count = w, .res = { .cpu = cpu, .memory_mb = 8192 } } },
	};
}

static struct rv_alg_job_history history(const struct rv_alg_applied *a, size_t n)
{
	return (struct rv_alg_job_history){
		.strategy = RV_ALG_ALLREDUCE,
		.lim = LIM,
		.now_ms = 400000,
		.applied = a,
		.n_applied = n,
	};
}

static struct rv_alg_speed_summary sum(double mean, double sd, int n)
{
	return (struct rv_alg_speed_summary){ .mean = mean, .sd = sd, .n = n };
}

START_TEST(test_outcome_window)
{
	struct rv_alg_applied a[2] = {
		plan_of(7, RV_ALG_STAGE_RUNNING, "worker_count_model", RV_ALG_OUTCOME_PENDING,
			100000, 6, 4),
		plan_of(1, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_PENDING, 0, 4, 4),
	};
	struct rv_alg_job_history h = history(a, 2);
	struct rv_alg_outcome_window w;

	ck_assert_int_eq(rv_alg_outcome_window(&h, &P, &w), 1);
	ck_assert_int_eq(w.workers, 6);
	ck_assert_int_eq(w.ps, 0);
	ck_assert_int_eq(w.after_from_ms, 100000 + P.warmup_ms);
	ck_assert_int_eq(w.before_from_ms, P.warmup_ms);
	ck_assert_int_eq(w.before_all_from_ms, -1); /* the create plan ran from the start */
	ck_assert_int_eq(w.before_to_ms, 100000);
	ck_assert_int_eq(w.before_last_n, P.outcome_before_n);
	/* judged already, or not a running plan: nothing to judge */
	a[0].outcome = RV_ALG_OUTCOME_BETTER;
	ck_assert_int_eq(rv_alg_outcome_window(&h, &P, &w), 0);
	a[0].outcome = RV_ALG_OUTCOME_PENDING;
	a[0].stage = RV_ALG_STAGE_OOM;
	ck_assert_int_eq(rv_alg_outcome_window(&h, &P, &w), 0);
	struct rv_alg_verdict v;
	struct rv_alg_decision d;
	struct rv_alg_outcome_speeds s = { .after = sum(1, 0, 10), .before = sum(1, 0, 10) };
	ck_assert_int_eq(rv_alg_judge_outcome(&h, &s, &P, &v, &d), -EINVAL);
}
END_TEST

/* The model went 9 -> 10 workers, counts the job had run at: sending it
 * back to 9 is a flip on noise.  A return from counts first run by that
 * move (the model learning from them), or a move that is not the model's,
 * is not. */
START_TEST(test_model_flips)
{
	struct rv_alg_applied a[4] = {
		plan_of(9, RV_ALG_STAGE_RUNNING, "worker_count_model", RV_ALG_OUTCOME_NEUTRAL,
			300000, 10, 4),
		plan_of(8, RV_ALG_STAGE_RUNNING, "worker_count_model", RV_ALG_OUTCOME_NEUTRAL,
			200000, 9, 4),
		plan_of(7, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_NEUTRAL, 100000, 10, 4),
		plan_of(1, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_PENDING, 0, 6, 4),
	};
	struct rv_alg_job_history h = history(a, 4);
	struct rv_alg_decision d = { .cfg = a[0].cfg };
	d.cfg.worker.count = 9;
	d.algorithm = RV_ALG_ID_WORKER_COUNT_MODEL;
	d.changed = true;
	ck_assert(rv_alg_model_flips(&h, &d));
	/* 10 first run by the model's own move: a return is learning */
	a[2].cfg.worker.count = 12;
	ck_assert(!rv_alg_model_flips(&h, &d));
	a[2].cfg.worker.count = 10;
	/* another target, or not the model's */
	d.cfg.worker.count = 8;
	ck_assert(!rv_alg_model_flips(&h, &d));
	d.cfg.worker.count = 9;
	d.algorithm = RV_ALG_ID_EXPLORE;
	ck_assert(!rv_alg_model_flips(&h, &d));
	d.algorithm = RV_ALG_ID_WORKER_COUNT_MODEL;
	a[0].algorithm = "explore";
	ck_assert(!rv_alg_model_flips(&h, &d));
	a[0].algorithm = "worker_count_model";
	/* a PS count that differs is other counts */
	d.cfg.ps.count = 3;
	ck_assert(!rv_alg_model_flips(&h, &d));
}
END_TEST

/* A model plan 4 -> 6 workers that predicted 200 samples/s. */
static int judge(double after, double sd_after, int n_after, double before, double sd_before,
		 int n_before, const char *alg, double predicted, struct rv_alg_verdict *v,
		 struct rv_alg_decision *d)
{
	static struct rv_alg_applied a[2];

	a[0] = plan_of(7, RV_ALG_STAGE_RUNNING, alg, RV_ALG_OUTCOME_PENDING, 100000, 6, 4);
	a[0].predicted_speed = predicted;
	a[1] = plan_of(1, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_PENDING, 0, 4, 4);
	struct rv_alg_job_history h = history(a, 2);
	struct rv_alg_outcome_speeds s = {
		.after = sum(after, sd_after, n_after),
		.before = sum(before, sd_before, n_before),
	};
	return rv_alg_judge_outcome(&h, &s, &P, v, d);
}

START_TEST(test_outcome_better_neutral_worse)
{
	struct rv_alg_verdict v;
	struct rv_alg_decision d;

	ck_assert_int_eq(judge(150, 2, 10, 100, 2, 10, "worker_count_model", 200, &v, &d), 0);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_BETTER);
	ck_assert_double_eq_tol(v.after, 150, 1e-9);
	ck_assert_double_eq_tol(v.before, 100, 1e-9);
	/* +1%: neither */
	ck_assert_int_eq(judge(101, 2, 10, 100, 2, 10, "worker_count_model", 200, &v, &d), 0);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_NEUTRAL);
	/* -20%, clearly: worse, and the model plan is reverted to 4 workers */
	ck_assert_int_eq(judge(80, 2, 10, 100, 2, 10, "worker_count_model", 200, &v, &d), 1);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_WORSE);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "revert");
	ck_assert(d.changed);
	ck_assert_int_eq(d.cfg.worker.count, 4);
	ck_assert_double_eq_tol(d.predicted_speed, 100, 1e-9);
}
END_TEST

START_TEST(test_outcome_not_significant)
{
	struct rv_alg_verdict v;
	struct rv_alg_decision d;

	/* noisy samples (35%): four say too little, still measuring */
	ck_assert_int_eq(judge(85, 30, 4, 100, 30, 4, "worker_count_model", 200, &v, &d), -EAGAIN);
	/* -15% but within two standard errors of very noisy samples: neutral, kept */
	ck_assert_int_eq(judge(85, 60, 20, 100, 60, 20, "worker_count_model", 200, &v, &d), 0);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_NEUTRAL);
	/* the same drop with quiet samples is worse */
	ck_assert_int_eq(judge(85, 1, 4, 100, 1, 4, "worker_count_model", 200, &v, &d), 1);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_WORSE);
	/* -20% but no worse than 90% of what it predicted: the plan delivered */
	ck_assert_int_eq(judge(80, 1, 10, 100, 1, 10, "worker_count_model", 85, &v, &d), 0);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_NEUTRAL);
}
END_TEST

/* A move down that expected 4% less speed (75.4 -> 72.4) measured 18% less
 * under 27% noise: 1.8 standard errors of the difference below the speed
 * before, but 1.6 below what the plan expected: kept.  The same drop from a
 * plan that expected to run faster is worse and reverted. */
START_TEST(test_outcome_expected_drop)
{
	struct rv_alg_verdict v;
	struct rv_alg_decision d;

	ck_assert_int_eq(judge(62.0, 16.7, 20, 75.4, 20.4, 20, "worker_count_model", 72.4, &v, &d),
			 0);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_NEUTRAL);
	ck_assert_int_eq(judge(62.0, 16.7, 20, 75.4, 20.4, 20, "worker_count_model", 80, &v, &d),
			 1);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_WORSE);
	/* a drop far beyond the expected one is still worse */
	ck_assert_int_eq(judge(55.0, 14.9, 20, 75.4, 20.4, 20, "worker_count_model", 72.4, &v, &d),
			 1);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_WORSE);
}
END_TEST

START_TEST(test_outcome_exploration_kept)
{
	struct rv_alg_verdict v;
	struct rv_alg_decision d;

	ck_assert_int_eq(judge(80, 1, 10, 100, 1, 10, "explore", 100, &v, &d), 0);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_WORSE);
}
END_TEST

/* A plan that replaced a straggler and cut the workers 6 -> 4, measured 20%
 * slower than before: the job before ran with the straggler, the drop comes
 * from the counts; the plan is not undone. */
START_TEST(test_outcome_straggler_replacement_kept)
{
	static struct rv_alg_applied a[2];
	struct rv_alg_verdict v;
	struct rv_alg_decision d;

	a[0] = plan_of(7, RV_ALG_STAGE_RUNNING, "straggler", RV_ALG_OUTCOME_PENDING, 100000, 4, 4);
	a[0].n_replace = 1;
	a[1] = plan_of(1, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_PENDING, 0, 6, 4);
	struct rv_alg_job_history h = history(a, 2);
	struct rv_alg_outcome_speeds s = { .after = sum(80, 1, 10), .before = sum(100, 1, 10) };

	ck_assert_int_eq(rv_alg_judge_outcome(&h, &s, &P, &v, &d), 0);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_NEUTRAL);
	/* the same plan without a replacement is reverted */
	a[0].n_replace = 0;
	ck_assert_int_eq(rv_alg_judge_outcome(&h, &s, &P, &v, &d), 1);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "revert");
}
END_TEST

START_TEST(test_outcome_measuring_and_unknown)
{
	struct rv_alg_verdict v;
	struct rv_alg_decision d;

	ck_assert_int_eq(judge(80, 1, P.min_outcome_samples - 1, 100, 1, 10, "worker_count_model",
			       200, &v, &d),
			 -EAGAIN);
	ck_assert_int_eq(judge(80, 1, 10, 0, 0, 0, "worker_count_model", 200, &v, &d), 0);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_UNKNOWN);
}
END_TEST

START_TEST(test_outcome_before_fallback)
{
	/* the replaced configuration ran 20 s only: all of its samples count */
	struct rv_alg_applied a[2] = {
		plan_of(8, RV_ALG_STAGE_RUNNING, "worker_count_model", RV_ALG_OUTCOME_PENDING,
			100000, 6, 4),
		plan_of(7, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_BETTER, 80000, 4, 4),
	};
	struct rv_alg_job_history h = history(a, 2);
	struct rv_alg_outcome_window w;

	ck_assert_int_eq(rv_alg_outcome_window(&h, &P, &w), 1);
	ck_assert_int_eq(w.before_all_from_ms, 80000);
	struct rv_alg_outcome_speeds s = {
		.after = sum(80, 1, 10),
		.before = sum(0, 0, 0),
		.before_all = sum(100, 1, 2),
	};
	struct rv_alg_verdict v;
	struct rv_alg_decision d;

	ck_assert_int_eq(rv_alg_judge_outcome(&h, &s, &P, &v, &d), 1);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_WORSE);
	ck_assert_double_eq_tol(v.before, 100, 1e-9);
}
END_TEST

START_TEST(test_speed_summarize)
{
	struct rv_alg_speed_obs o[6];

	for (int i = 0; i < 6; i++)
		o[i] = (struct rv_alg_speed_obs){ .workers = i < 3 ? 2 : 3,
						  .speed = 10 * (i + 1),
						  .t_ms = 1000 * i };
	struct rv_alg_speed_summary s;

	ck_assert_int_eq(rv_alg_speed_summarize(o, 6, 0, INT64_MAX, 3, 0, 0, &s), 0);
	ck_assert_int_eq(s.n, 3);
	ck_assert_double_eq_tol(s.mean, 50, 1e-9);
	ck_assert_double_eq_tol(s.sd, 10, 1e-9);
	/* the newest 2 of any configuration before t=5000 */
	ck_assert_int_eq(rv_alg_speed_summarize(o, 6, 0, 5000, -1, -1, 2, &s), 0);
	ck_assert_int_eq(s.n, 2);
	ck_assert_double_eq_tol(s.mean, 45, 1e-9);
	ck_assert_int_eq(rv_alg_speed_summarize(o, 6, 9000, INT64_MAX, -1, -1, 0, &s), 0);
	ck_assert_int_eq(s.n, 0);
}
END_TEST

/* Warm-up ends where the speed stops rising: a ramp longer than the
 * samples so far holds (INT64_MAX), a ramp that ended settles near its end,
 * a flat run settles after the fixed warm-up. */
START_TEST(test_settle_detection)
{
	struct rv_alg_speed_obs o[48];
	for (int i = 0; i < 48; i++) {
		double t = (i + 1) * 10.0;
		double w = t < 300 ? 0.3 + 0.7 * t / 300 : 1;
		o[i] = (struct rv_alg_speed_obs){ .workers = 4,
						  .t_ms = (int64_t)(t * 1000),
						  .speed = 100 * w * (1 + 0.03 * ((i % 3) - 1)) };
	}
	/* 12 samples (120 s) into a 300 s ramp: still rising */
	ck_assert(rv_alg_run_settled_ms(o, 12, 0, &P) == INT64_MAX);
	ck_assert(rv_alg_run_settled_ms(o, 24, 0, &P) == INT64_MAX);
	/* 480 s: settled, not before the ramp's last stretch */
	int64_t s = rv_alg_run_settled_ms(o, 48, 0, &P);
	ck_assert_msg(s >= 240000 && s <= 360000, "settled at %lld", (long long)s);
	/* flat: the fixed warm-up only */
	for (int i = 0; i < 12; i++)
		o[i].speed = 100 * (1 + 0.03 * ((i % 3) - 1));
	ck_assert_int_eq(rv_alg_run_settled_ms(o, 12, 0, &P), 40000);
}
END_TEST

/* A noisy plateau: up to 20% either side of the mean, no trend. */
static const double flat_noise[12] = { 0.10,  -0.15, 0.05, 0.20,  -0.10, 0.00,
				       -0.20, 0.15,  0.05, -0.05, -0.15, 0.10 };

/* Under 15% noise the trend test on the samples past the fixed warm-up
 * has no power: nine samples 30-120 s into a 300 s ramp from 30% pass for
 * flat.  The fit of a ramp and a plateau over the whole run sees the ramp
 * go on; the same noise on a flat run still settles. */
START_TEST(test_settle_noisy_ramp)
{
	const double *e = flat_noise;
	struct rv_alg_speed_obs o[36];

	for (int i = 0; i < 12; i++) {
		double t = (i + 1) * 10.0;
		o[i] = (struct rv_alg_speed_obs){ .workers = 3,
						  .t_ms = (int64_t)(t * 1000),
						  .speed = 100 * (0.3 + 0.7 * t / 300) *
							   (1 + e[i]) };
	}
	ck_assert(rv_alg_run_settled_ms(o, 12, 0, &P) == INT64_MAX);
	/* flat, the same noise: settled after the fixed warm-up */
	for (int i = 0; i < 36; i++)
		o[i] = (struct rv_alg_speed_obs){ .workers = 3,
						  .t_ms = (int64_t)(i + 1) * 10000,
						  .speed = 100 * (1 + e[i % 12]) };
	ck_assert_int_eq(rv_alg_run_settled_ms(o, 12, 0, &P), 40000);
	ck_assert_int_eq(rv_alg_run_settled_ms(o, 36, 0, &P), 40000);
}
END_TEST

/* A warm-up repeats after every change of the same job: once two earlier
 * runs showed a ramp of 190 s past their first sample, a run whose first
 * 120 s read as flat (a long ramp under noise) is not settled before it;
 * one run's ramp alone does not decide. */
/* Two runs of 300 s, each a 200 s ramp from 40% and a plateau, at 4 and
 * second_workers workers, then 120 s at 8 workers that read as flat under
 * noise: 72 samples into o. */
static size_t two_ramps_then_flat(struct rv_alg_speed_obs *o, int second_workers)
{
	size_t n = 0;

	for (int r = 0; r < 2; r++)
		for (int i = 0; i < 30; i++) {
			double t = (i + 1) * 10.0;
			double w = t < 200 ? 0.4 + 0.6 * t / 200 : 1;
			o[n++] = (struct rv_alg_speed_obs){ .workers = r ? second_workers : 4,
							    .t_ms = (int64_t)(r * 300 + t) * 1000,
							    .speed = 100 * w };
		}
	for (int i = 0; i < 12; i++)
		o[n++] = (struct rv_alg_speed_obs){ .workers = 8,
						    .t_ms = (int64_t)(600 + (i + 1) * 10) * 1000,
						    .speed = 100 * (1 + flat_noise[i]) };
	return n;
}

START_TEST(test_settle_job_warmup)
{
	const double *e = flat_noise;
	struct rv_alg_speed_obs o[84];
	size_t n = two_ramps_then_flat(o, 6);

	ck_assert_int_eq(rv_alg_run_settled_ms(o + 60, 12, 600000, &P), 640000);
	ck_assert(rv_alg_run_settled_ms(o, n, 600000, &P) == INT64_MAX);
	/* 120 s more: settled where the earlier ramps ended */
	for (int i = 12; i < 24; i++)
		o[n++] = (struct rv_alg_speed_obs){ .workers = 8,
						    .t_ms = (int64_t)(600 + (i + 1) * 10) * 1000,
						    .speed = 100 * (1 + e[i % 12]) };
	ck_assert_int_eq(rv_alg_run_settled_ms(o, n, 600000, &P), 610000 + 190000);
	/* one earlier run only: the run's own test decides */
	ck_assert_int_eq(rv_alg_run_settled_ms(o + 30, 42, 600000, &P), 640000);
}
END_TEST

/* A plan that resizes only CPU or memory relaunches the nodes, and the job
 * ramps up again at the same counts: the two earlier ramps at 4 workers
 * (a CPU resize at 300 s between them) are two runs, so a run whose first
 * 120 s read as flat is not settled before their warm-up.  A plan that
 * changed nothing restarted nothing: no run starts at it. */
START_TEST(test_settle_restart_same_counts)
{
	struct rv_alg_speed_obs o[72];
	size_t n = two_ramps_then_flat(o, 4);
	struct rv_alg_applied a[3] = {
		plan_of(9, RV_ALG_STAGE_RUNNING, "worker_count_model", RV_ALG_OUTCOME_PENDING,
			600000, 8, 8),
		plan_of(8, RV_ALG_STAGE_RUNNING, "rightsize", RV_ALG_OUTCOME_NEUTRAL, 300000, 4, 8),
		plan_of(1, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_PENDING, 0, 4, 4),
	};
	struct rv_alg_job_history h = history(a, 3);
	struct rv_alg_outcome_window w;

	h.speed = o;
	h.n_speed = n;
	h.now_ms = o[n - 1].t_ms;
	ck_assert_int_eq(rv_alg_outcome_window(&h, &P, &w), 1);
	ck_assert(w.after_from_ms == INT64_MAX);
	/* the resize changed nothing: one run at 4 workers, one ramp */
	a[1].cfg = a[2].cfg;
	ck_assert_int_eq(rv_alg_outcome_window(&h, &P, &w), 1);
	ck_assert_int_eq(w.after_from_ms, 640000);
}
END_TEST

START_TEST(test_drop_warmup)
{
	struct rv_alg_speed_obs o[12];
	size_t n = 0;

	/* 10 samples at 2 workers, 10 s apart; the first 3 are warm-up (slow) */
	for (int i = 0; i < 10; i++)
		o[n++] = (struct rv_alg_speed_obs){ .workers = 2,
						    .t_ms = 10000 * i,
						    .speed = i < 3 ? 10 : 100 + 0.1 * i };
	/* 2 samples at 3 workers: at most half of a short run is dropped */
	o[n++] = (struct rv_alg_speed_obs){ .workers = 3, .t_ms = 100000, .speed = 5 };
	o[n++] = (struct rv_alg_speed_obs){ .workers = 3, .t_ms = 110000, .speed = 150 };
	n = rv_alg_drop_warmup(o, n, &P);
	ck_assert_int_eq(n, 3);
	/* samples 3..6 and 7..9 averaged, each stamped with its last sample */
	ck_assert_double_eq_tol(o[0].speed, (100.3 + 100.4 + 100.5 + 100.6) / 4.0, 1e-9);
	ck_assert_int_eq(o[0].t_ms, 60000);
	ck_assert_double_eq_tol(o[1].speed, (100.7 + 100.8 + 100.9) / 3.0, 1e-9);
	ck_assert_int_eq(o[2].workers, 3);
	ck_assert_double_eq_tol(o[2].speed, 150, 1e-9);
}
END_TEST

static size_t speeds(struct rv_alg_speed_obs *o)
{
	for (int i = 0; i < 10; i++)
		o[i] = (struct rv_alg_speed_obs){ .workers = 3, .speed = 100, .t_ms = 50000 * i };
	return 10; /* t = 0 .. 450000 */
}

START_TEST(test_starvation_filter)
{
	struct rv_alg_speed_obs o[10];
	struct rv_alg_applied a[2] = {
		plan_of(8, RV_ALG_STAGE_RUNNING, "rightsize", RV_ALG_OUTCOME_BETTER, 200000, 3, 8),
		plan_of(7, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_BETTER, 100000, 3, 4),
	};
	struct rv_alg_job_history h = history(a, 2);

	/* worker CPU doubled and it measured faster: the speeds before were
	 * CPU-bound (the one at the plan's own time, too: the old config's) */
	ck_assert_int_eq(rv_alg_correct_starved_speeds(&h, &P, o, speeds(o)), 5);
	ck_assert_int_eq(o[0].t_ms, 250000);
	/* doubled but no faster: the role only read as starved; data stands */
	a[0].outcome = RV_ALG_OUTCOME_NEUTRAL;
	ck_assert_int_eq(rv_alg_correct_starved_speeds(&h, &P, o, speeds(o)), 10);
	/* faster, but a growth within starved_growth is no starvation fix */
	a[0].outcome = RV_ALG_OUTCOME_BETTER;
	a[0].cfg.worker.res.cpu = 6;
	ck_assert_int_eq(rv_alg_correct_starved_speeds(&h, &P, o, speeds(o)), 10);
	/* PS CPU that only followed the workers per PS (4 -> 8 workers on 2 PS)
	 * is load scaling, not starvation */
	a[0].cfg.worker =
		(struct rv_alg_group){ .count = 8, .res = { .cpu = 4, .memory_mb = 8192 } };
	a[1].cfg.worker =
		(struct rv_alg_group){ .count = 4, .res = { .cpu = 4, .memory_mb = 8192 } };
	a[0].cfg.ps = (struct rv_alg_group){ .count = 2, .res = { .cpu = 8, .memory_mb = 8192 } };
	a[1].cfg.ps = (struct rv_alg_group){ .count = 2, .res = { .cpu = 4, .memory_mb = 8192 } };
	ck_assert_int_eq(rv_alg_correct_starved_speeds(&h, &P, o, speeds(o)), 10);
	/* the same PS growth at the same load is */
	a[0].cfg.worker.count = 4;
	ck_assert_int_eq(rv_alg_correct_starved_speeds(&h, &P, o, speeds(o)), 5);
}
END_TEST

/* 200 s at 4 workers (50 samples/s), then 200 s at 3 workers (90) whose
 * nodes each use cpu cores: the run before and after a first exploration
 * step that carried a starved role's growth. */
static void starved_step_run(struct rv_alg_speed_obs *o, size_t *n, struct rv_alg_usage *u,
			     size_t *nu, double cpu)
{
	for (int t = 1; t <= 20; t++)
		o[(*n)++] =
			(struct rv_alg_speed_obs){ .workers = 4, .t_ms = 10000 * t, .speed = 50 };
	for (int t = 21; t <= 40; t++) {
		o[(*n)++] =
			(struct rv_alg_speed_obs){ .workers = 3, .t_ms = 10000 * t, .speed = 90 };
		for (int i = 0; i < 3; i++)
			u[(*nu)++] = (struct rv_alg_usage){ .role = RV_ALG_WORKER,
							    .node = i,
							    .t_ms = 10000 * t,
							    .cpu = cpu,
							    .memory_mb = 4096,
							    .has_throttled = true,
							    .throttled = 0.1 };
	}
}

/* A plan at t=200 s doubled the CPU of 4 starved workers (4 -> 8 cores)
 * and moved to 3 of them (the first exploration step): the workers then used
 * 6 cores each, so at 4 cores the job ran at 4/6 of its speed.  The speeds
 * of 4 workers are corrected by that, not dropped (the model would lose
 * the only measure at 4 workers). */
START_TEST(test_starved_speeds_corrected)
{
	struct rv_alg_applied a[3] = {
		plan_of(9, RV_ALG_STAGE_RUNNING, "rightsize", RV_ALG_OUTCOME_NEUTRAL, 400000, 3,
			6.2),
		plan_of(8, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_BETTER, 200000, 3, 8),
		plan_of(7, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_UNKNOWN, 0, 4, 4),
	};
	struct rv_alg_speed_obs o[40];
	struct rv_alg_usage u[60];
	size_t n = 0, nu = 0;
	starved_step_run(o, &n, u, &nu, 6);
	struct rv_alg_job_history h = history(a + 1, 2);
	h.speed = o;
	h.n_speed = n;
	h.mem_usage = u;
	h.n_mem_usage = nu;

	struct rv_alg_speed_obs c[40];
	memcpy(c, o, sizeof(c));
	ck_assert_int_eq(rv_alg_correct_starved_speeds(&h, &P, c, n), 40);
	ck_assert_double_eq_tol(c[0].speed, 75, 1e-9);
	ck_assert_double_eq_tol(c[19].speed, 75, 1e-9);
	ck_assert_double_eq_tol(c[20].speed, 90, 1e-9);
	/* still pinned at 8 cores: the use does not say the need, the
	 * starved speeds go */
	for (size_t i = 0; i < nu; i++) {
		u[i].cpu = 8;
		u[i].throttled = 0.9;
	}
	memcpy(c, o, sizeof(c));
	ck_assert_int_eq(rv_alg_correct_starved_speeds(&h, &P, c, n), 20);
	ck_assert_int_eq(c[0].workers, 3);
	/* the use out of the window: the CPU the next plan sized from it
	 * (6.2 cores, 6.2 / 1.03 needed) */
	h = history(a, 3);
	h.speed = o;
	h.n_speed = n;
	memcpy(c, o, sizeof(c));
	ck_assert_int_eq(rv_alg_correct_starved_speeds(&h, &P, c, n), 40);
	ck_assert_double_eq_tol(c[0].speed, 50 * 6.2 / 1.03 / 4, 1e-9);
	/* a growth that kept the counts measured its speeds anew: dropped as
	 * before once it measured better */
	a[1].cfg.worker.count = 4;
	for (int i = 20; i < 40; i++)
		o[i].workers = 4;
	h = history(a + 1, 2);
	h.speed = o;
	h.n_speed = n;
	memcpy(c, o, sizeof(c));
	ck_assert_int_eq(rv_alg_correct_starved_speeds(&h, &P, c, n), 20);
}
END_TEST

/* 4 PS pinned at 1.0 core under 6 workers; the first exploration step
 * went to 4 workers and gave the PS 1.4 cores, under the starved_growth
 * doubling, and they then used 1.2 each: with their load a third lighter,
 * each needed 1.8 at 6 workers and the speeds there ran at 1/1.8 of the
 * job's. */
START_TEST(test_starved_ps_lighter_load)
{
	struct rv_alg_applied a[2] = {
		plan_of(8, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_NEUTRAL, 200000, 4, 7),
		plan_of(7, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_UNKNOWN, 0, 6, 7),
	};
	a[0].cfg.ps = (struct rv_alg_group){ .count = 4, .res = { .cpu = 1.4, .memory_mb = 4096 } };
	a[1].cfg.ps = (struct rv_alg_group){ .count = 4, .res = { .cpu = 1.0, .memory_mb = 4096 } };
	struct rv_alg_speed_obs o[40], c[40];
	struct rv_alg_usage u[320];
	size_t n = 0, nu = 0;
	for (int t = 1; t <= 40; t++) {
		bool before = t <= 20;
		o[n++] = (struct rv_alg_speed_obs){ .workers = before ? 6 : 4,
						    .ps = 4,
						    .t_ms = 10000 * t,
						    .speed = before ? 10 : 14 };
		for (int i = 0; i < 4; i++) {
			u[nu++] = (struct rv_alg_usage){ .role = RV_ALG_PS_ROLE,
							 .node = i,
							 .t_ms = 10000 * t,
							 .cpu = before ? 1.0 : 1.2,
							 .memory_mb = 2048 };
			u[nu++] = (struct rv_alg_usage){ .role = RV_ALG_WORKER,
							 .node = i,
							 .t_ms = 10000 * t,
							 .cpu = 4,
							 .memory_mb = 4096 };
		}
	}
	struct rv_alg_job_history h = history(a, 2);
	h.strategy = RV_ALG_PS;
	h.speed = o;
	h.n_speed = n;
	h.mem_usage = u;
	h.n_mem_usage = nu;
	memcpy(c, o, sizeof(c));
	ck_assert_int_eq(rv_alg_correct_starved_speeds(&h, &P, c, n), 40);
	ck_assert_double_eq_tol(c[0].speed, 10 * 1.2 / (2.0 / 3.0), 1e-9);
	ck_assert_double_eq_tol(c[20].speed, 14, 1e-9);
	/* PS that were not pinned before: the limit only followed the load */
	for (size_t i = 0; i < nu; i++)
		if (u[i].t_ms <= 200000 && u[i].role == RV_ALG_PS_ROLE)
			u[i].cpu = 0.7;
	memcpy(c, o, sizeof(c));
	ck_assert_int_eq(rv_alg_correct_starved_speeds(&h, &P, c, n), 40);
	ck_assert_double_eq_tol(c[0].speed, 10, 1e-9);
}
END_TEST

/* 8 workers sampled every 10 s from t=0 to t_end s, their CPU use ramping
 * from 45% to 4 cores over 600 s, staggered by node (nodes report at their
 * own times) and spread +-5% about the ramp. */
static size_t ramp_usage(struct rv_alg_usage *u, int t_end)
{
	size_t n = 0;
	for (int t = 10; t <= t_end; t += 10)
		for (int i = 0; i < 8; i++) {
			double warm = t < 600 ? 0.45 + 0.55 * t / 600.0 : 1;
			u[n++] = (struct rv_alg_usage){ .role = RV_ALG_WORKER,
							.node = i,
							.t_ms = 1000 * t + 100 * i,
							.cpu = 4 * warm * (i % 2 ? 1.05 : 0.95),
							.memory_mb = 4096 };
		}
	return n;
}

/* The nodes' CPU use shows a ramp the job's speed does not (speed noise
 * hides it): the run is warming up until the use stops rising. */
START_TEST(test_usage_ramp_holds)
{
	struct rv_alg_usage u[8 * 90];
	size_t nu = ramp_usage(u, 300);
	ck_assert_int_eq(rv_alg_usage_settled_ms(u, nu, 0, &P), INT64_MAX);
	nu = ramp_usage(u, 900);
	int64_t at = rv_alg_usage_settled_ms(u, nu, 0, &P);
	ck_assert_msg(at >= 500000 && at <= 700000, "settled at %lld ms", (long long)at);
	/* flat use: settled after the fixed warm-up past its first sample */
	for (size_t i = 0; i < nu; i++)
		u[i].cpu = 4;
	at = rv_alg_usage_settled_ms(u, nu, 0, &P);
	ck_assert_msg(at >= P.warmup_ms && at <= 10000 + P.warmup_ms + 1000, "settled at %lld ms",
		      (long long)at);

	/* the running stage holds while the use rises, though the speeds
	 * (flat) would let it trim the workers' 16 cores to the ramp's use */
	struct rv_alg_applied a[1] = {
		plan_of(7, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_UNKNOWN, 0, 8, 16),
	};
	struct rv_alg_speed_obs o[30];
	for (int i = 0; i < 30; i++)
		o[i] = (struct rv_alg_speed_obs){ .workers = 8,
						  .t_ms = 10000 * (i + 1),
						  .speed = i % 2 ? 105 : 95 };
	nu = ramp_usage(u, 300);
	struct rv_alg_job_history h = history(a, 1);
	h.now_ms = 300000;
	h.speed = o;
	h.n_speed = 30;
	h.usage = u;
	h.n_usage = nu;
	struct rv_alg_decision d;
	ck_assert_int_eq(rv_alg_plan_job(&h, &P, &d), 0);
	ck_assert_msg(!d.changed && strstr(d.reason, "CPU use since plan 7 still rises"), "%s",
		      d.reason);
}
END_TEST

/* A job a few seconds past its create plan (its framework still loading,
 * no step yet, three usage samples of a fraction of what it will use) is
 * not planned: the warm-up has not passed. */
START_TEST(test_early_usage_holds)
{
	struct rv_alg_applied a[1] = {
		plan_of(3, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_UNKNOWN, 0, 2, 4),
	};
	struct rv_alg_usage u[6];
	for (int i = 0; i < 6; i++)
		u[i] = (struct rv_alg_usage){ .role = RV_ALG_WORKER,
					      .node = i % 2,
					      .t_ms = 1000 + 1000 * (i / 2),
					      .cpu = 0.2,
					      .memory_mb = 60 };
	struct rv_alg_job_history h = history(a, 1);
	h.now_ms = 4000;
	h.usage = u;
	h.n_usage = 6;
	struct rv_alg_decision d;
	ck_assert_int_eq(rv_alg_plan_job(&h, &P, &d), 0);
	ck_assert_msg(!d.changed && strstr(d.reason, "warming up"), "%s", d.reason);
	/* past the warm-up, the same use is a need to plan from */
	for (int i = 0; i < 6; i++)
		u[i].t_ms += P.warmup_ms;
	h.now_ms = 4000 + P.warmup_ms;
	ck_assert_int_eq(rv_alg_plan_job(&h, &P, &d), 0);
	ck_assert_msg(!strstr(d.reason, "warming up"), "%s", d.reason);
}
END_TEST

/* The doubling a first exploration step carried (4 -> 8 cores, 4 -> 3
 * workers) was a guess: the workers then used 7.6 cores, and the next plan
 * sizes them from that (7.9 cores), though within the hysteresis band. */
START_TEST(test_starved_step_resize_guess)
{
	struct rv_alg_applied a[2] = {
		plan_of(8, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_NEUTRAL, 200000, 3, 8),
		plan_of(7, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_UNKNOWN, 0, 4, 4),
	};
	struct rv_alg_speed_obs o[40];
	struct rv_alg_usage u[60];
	size_t n = 0, nu = 0;
	starved_step_run(o, &n, u, &nu, 7.6);
	struct rv_alg_job_history h = history(a, 2);
	h.speed = o;
	h.n_speed = n;
	h.usage = u;
	h.n_usage = nu;
	h.mem_usage = u;
	h.n_mem_usage = nu;
	struct rv_alg_decision d;
	ck_assert_int_eq(rv_alg_plan_job(&h, &P, &d), 0);
	ck_assert_msg(d.cfg.worker.res.cpu < 8 && d.cfg.worker.res.cpu > 7.6, "%s", d.reason);
}
END_TEST

/* A plan at t=200 s replaced worker 0 of 4, twice as slow as the others:
 * the all-reduce job ran at half its pace before, and its speeds say so once
 * corrected; the speeds after stand. */
START_TEST(test_straggler_speeds_corrected)
{
	struct rv_alg_applied a[2] = {
		plan_of(8, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_NEUTRAL, 200000, 3, 4),
		plan_of(7, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_UNKNOWN, 0, 4, 4),
	};
	a[0].n_replace = 1;
	struct rv_alg_step st[80];
	size_t ns = 0;
	for (int t = 1; t <= 20; t++)
		for (int w = 0; w < 4; w++)
			st[ns++] = (struct rv_alg_step){ .node = w,
							 .t_ms = t * 10000,
							 .step_s = w == 0 ? 2.0 : 1.0 };
	struct rv_alg_speed_obs o[10];
	for (int i = 0; i < 10; i++)
		o[i] = (struct rv_alg_speed_obs){ .workers = i <= 4 ? 4 : 3,
						  .speed = 100,
						  .t_ms = 50000 * i };
	struct rv_alg_job_history h = history(a, 2);
	h.now_ms = 900000;
	h.steps = st;
	h.n_steps = ns;
	/* the step times reach back to the configuration the plan ended */
	ck_assert_int_eq(rv_alg_steps_since(&h, &P), 0);
	ck_assert_int_eq(rv_alg_usage_since(&h, &P), 300000);
	ck_assert_int_eq(rv_alg_correct_straggler_speeds(&h, &P, o, 10), 10);
	for (int i = 0; i < 10; i++)
		ck_assert_double_eq_tol(o[i].speed, i >= 1 && i <= 4 ? 200 : 100, 1e-9);
	/* without step times a replacement that measured faster leaves only
	 * the speeds after it (a "straggler" plan), and nothing else changes */
	for (int i = 0; i < 10; i++)
		o[i].speed = 100;
	h.n_steps = 0;
	ck_assert_int_eq(rv_alg_correct_straggler_speeds(&h, &P, o, 10), 10);
	a[0].algorithm = "straggler";
	a[0].outcome = RV_ALG_OUTCOME_BETTER;
	ck_assert_int_eq(rv_alg_correct_straggler_speeds(&h, &P, o, 10), 5);
	ck_assert_int_eq(o[0].t_ms, 250000);
	/* no plan replaced anyone: the usage window alone */
	a[0].n_replace = 0;
	ck_assert_int_eq(rv_alg_steps_since(&h, &P), 300000);
}
END_TEST

START_TEST(test_settled_steps_and_resizes)
{
	struct rv_alg_step s[4];

	for (int i = 0; i < 4; i++)
		s[i] = (struct rv_alg_step){ .node = i, .t_ms = 100000 + 15000 * i, .step_s = 1 };
	/* steps within the warm-up after the change at 100000 would look like
	 * stragglers */
	ck_assert_int_eq(rv_alg_settled_steps(s, 4, 100000, &P), 2);
	ck_assert_int_eq(s[0].node, 2);

	struct rv_alg_applied a[3] = {
		plan_of(9, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_BETTER, 300000, 4, 3),
		plan_of(8, RV_ALG_STAGE_RUNNING, "rightsize", RV_ALG_OUTCOME_NEUTRAL, 200000, 3, 3),
		plan_of(1, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_PENDING, 0, 3, 4),
	};
	struct rv_alg_resize last[2];

	rv_alg_last_resizes(a, 3, last);
	ck_assert_int_eq(last[RV_ALG_WORKER].t_ms, 200000);
	ck_assert_double_eq_tol(last[RV_ALG_WORKER].from.cpu, 4, 1e-9);
	ck_assert_double_eq_tol(last[RV_ALG_WORKER].to.cpu, 3, 1e-9);
	rv_alg_last_resizes(a, 1, last);
	ck_assert_int_eq(last[RV_ALG_WORKER].t_ms, 0);

	/* a PS cut 2.8 -> 2.6, then a plan that resized the workers only: the
	 * PS's last resize is still the cut (not "2.6 -> 2.6") */
	struct rv_alg_applied b[3] = {
		plan_of(9, RV_ALG_STAGE_RUNNING, "rightsize", RV_ALG_OUTCOME_NEUTRAL, 300000, 4, 3),
		plan_of(8, RV_ALG_STAGE_RUNNING, "rightsize", RV_ALG_OUTCOME_NEUTRAL, 200000, 4, 4),
		plan_of(1, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_PENDING, 0, 4, 4),
	};

	for (int i = 0; i < 3; i++)
		b[i].cfg.ps = (struct rv_alg_group){ .count = 2,
						     .res = { .cpu = 2.6, .memory_mb = 4096 } };
	b[2].cfg.ps.res.cpu = 2.8;
	rv_alg_last_resizes(b, 3, last);
	ck_assert_int_eq(last[RV_ALG_WORKER].t_ms, 300000);
	ck_assert_int_eq(last[RV_ALG_PS_ROLE].t_ms, 200000);
	ck_assert_double_eq_tol(last[RV_ALG_PS_ROLE].from.cpu, 2.8, 1e-9);
	ck_assert_double_eq_tol(last[RV_ALG_PS_ROLE].to.cpu, 2.6, 1e-9);
}
END_TEST

/* Two workers measured at one speed since creation: the next plan explores
 * to 3 workers. */
static struct rv_alg_job_history explore_history(struct rv_alg_applied *a, size_t na,
						 struct rv_alg_speed_obs *o)
{
	for (int i = 0; i < 12; i++)
		o[i] = (struct rv_alg_speed_obs){ .workers = 2,
						  .speed = 100,
						  .t_ms = 10000 * (i + 1) };
	struct rv_alg_job_history h = history(a, na);
	h.now_ms = 120000;
	h.speed = o;
	h.n_speed = 12;
	return h;
}

/* Explored 16 -> 10 workers (measured worse than 16: kept, data) and on to
 * 6; the model, from all three, chooses 10: not held as "measured worse",
 * the job would stay at 6, far below the knee. */
START_TEST(test_model_may_return_to_explored_worse)
{
	struct rv_alg_applied a[3] = {
		plan_of(9, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_NEUTRAL, 300000, 6, 4),
		plan_of(8, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_WORSE, 150000, 10, 4),
		plan_of(1, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_PENDING, 0, 16, 4),
	};
	static const int ws[] = { 16, 10, 6 };
	static const double speed[] = { 100, 91, 70 };
	struct rv_alg_speed_obs o[36];
	size_t n = 0;

	for (int c = 0; c < 3; c++)
		for (int i = 0; i < 12; i++)
			o[n++] = (struct rv_alg_speed_obs){ .workers = ws[c],
							    .speed = speed[c],
							    .t_ms = 150000 * c + 10000 * (i + 1) };
	struct rv_alg_job_history h = history(a, 3);
	struct rv_alg_decision d;

	h.now_ms = 440000;
	h.speed = o;
	h.n_speed = n;
	ck_assert_int_eq(rv_alg_plan_job(&h, &P, &d), 0);
	ck_assert_msg(d.changed && d.cfg.worker.count == 10, "%s %d: %s",
		      rv_alg_id_name(d.algorithm), d.cfg.worker.count, d.reason);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "worker_count_model");
}
END_TEST

START_TEST(test_repeat_suppression)
{
	struct rv_alg_speed_obs o[12];
	struct rv_alg_applied a[2] = {
		plan_of(1, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_PENDING, 0, 2, 4),
		plan_of(5, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_WORSE, 0, 3, 4),
	};
	struct rv_alg_job_history h = explore_history(a, 1, o);
	struct rv_alg_decision d;

	ck_assert_int_eq(rv_alg_plan_job(&h, &P, &d), 0);
	ck_assert(d.changed);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "explore");
	ck_assert_int_eq(d.cfg.worker.count, 3);
	/* 3 workers were measured worse before: not proposed again */
	h.n_applied = 2;
	ck_assert_int_eq(rv_alg_plan_job(&h, &P, &d), 0);
	ck_assert(!d.changed);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "hold");
	ck_assert_int_eq(d.cfg.worker.count, 2);
	/* the same advice waiting to be applied is not repeated ... */
	h.n_applied = 1;
	struct rv_alg_applied pending =
		plan_of(6, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_PENDING, 0, 3, 4);
	pending.based_on_ts_ms = 60000;
	h.pending = &pending;
	ck_assert(!rv_alg_pending_stands(&h)); /* newer samples came */
	ck_assert_int_eq(rv_alg_plan_job(&h, &P, &d), 0);
	ck_assert(!d.changed);
	/* ... but other advice is: the same configuration from another
	 * algorithm, or another configuration */
	pending.algorithm = "worker_count_model";
	ck_assert_int_eq(rv_alg_plan_job(&h, &P, &d), 0);
	ck_assert(d.changed);
	pending.algorithm = "explore";
	pending.cfg.worker.count = 4;
	ck_assert_int_eq(rv_alg_plan_job(&h, &P, &d), 0);
	ck_assert(d.changed);
	ck_assert_int_eq(d.cfg.worker.count, 3);
	/* a pending plan made from the newest samples stands */
	pending.based_on_ts_ms = h.now_ms;
	ck_assert(rv_alg_pending_stands(&h));
	struct rv_alg_verdict v;
	ck_assert_int_eq(rv_alg_plan_step(&h, &P, &v, &d), 0);
	ck_assert(!d.changed);
}
END_TEST

/* The memory history reaches across plans, but a PS's share of the model
 * follows the PS count: PS samples from before the plan that changed it
 * (7000 MiB each at 2 PS) do not hold the PS memory up at 4 PS (3600). */
START_TEST(test_memory_history_from_ps_count_change)
{
	struct rv_alg_applied a[2] = {
		plan_of(5, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_NEUTRAL, 300000, 4, 2),
		plan_of(1, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_PENDING, 0, 4, 2),
	};
	a[0].cfg.ps = (struct rv_alg_group){ .count = 4, .res = { .cpu = 2, .memory_mb = 8000 } };
	a[1].cfg.ps = (struct rv_alg_group){ .count = 2, .res = { .cpu = 4, .memory_mb = 8000 } };
	struct rv_alg_speed_obs o[42];
	struct rv_alg_usage mem[42 * 8];
	size_t no = 0, nm = 0;
	for (int t = 10; t <= 420; t += 10) {
		bool now4 = t > 300;
		o[no++] = (struct rv_alg_speed_obs){ .workers = 4,
						     .ps = now4 ? 4 : 2,
						     .speed = 100 + (t / 10) % 2,
						     .t_ms = (int64_t)t * 1000 };
		for (int n = 0; n < (now4 ? 4 : 2); n++)
			mem[nm++] = (struct rv_alg_usage){ .role = RV_ALG_PS_ROLE,
							   .node = n,
							   .t_ms = (int64_t)t * 1000,
							   .cpu = 1.0,
							   .memory_mb = now4 ? 3600 : 7000 };
		for (int n = 0; n < 4; n++)
			mem[nm++] = (struct rv_alg_usage){ .role = RV_ALG_WORKER,
							   .node = n,
							   .t_ms = (int64_t)t * 1000,
							   .cpu = 1.9,
							   .memory_mb = 8000 };
	}
	/* the current configuration's window: from its plan on */
	size_t first = 0;
	while (mem[first].t_ms <= 300000)
		first++;
	struct rv_alg_job_history h = history(a, 2);
	h.strategy = RV_ALG_PS;
	h.now_ms = 420000;
	h.speed = o;
	h.n_speed = no;
	h.usage = mem + first;
	h.n_usage = nm - first;
	h.mem_usage = mem;
	h.n_mem_usage = nm;
	struct rv_alg_decision d;

	ck_assert_int_eq(rv_alg_plan_job(&h, &P, &d), 0);
	ck_assert_msg(d.cfg.ps.res.memory_mb >= 3600 && d.cfg.ps.res.memory_mb <= 4200, "%lld: %s",
		      (long long)d.cfg.ps.res.memory_mb, d.reason);
	/* the workers' memory is not tied to the counts: their whole history
	 * counts (the peak of 8000 MiB), and 8192 is within the band */
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 8192);
}
END_TEST

/* Per-PS memory a / count + b from the peaks at the newest two PS counts:
 * 7000 MiB at 2 PS, 3600 at 4 give a = 13600, b = 200. */
START_TEST(test_ps_mem_fit)
{
	struct rv_alg_applied a[3] = {
		plan_of(7, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_NEUTRAL, 300000, 4, 2),
		plan_of(5, RV_ALG_STAGE_RUNNING, "explore", RV_ALG_OUTCOME_NEUTRAL, 100000, 4, 2),
		plan_of(1, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_PENDING, 0, 4, 2),
	};
	a[0].cfg.ps.count = 4;
	a[1].cfg.ps.count = 2;
	a[2].cfg.ps.count = 8; /* older than the newest two counts: not used */
	struct rv_alg_usage u[64];
	size_t n = 0;
	for (int t = 10; t <= 420; t += 10) {
		int ps = t > 300 ? 4 : t > 100 ? 2 : 8;
		u[n++] = (struct rv_alg_usage){ .role = RV_ALG_PS_ROLE,
						.t_ms = (int64_t)t * 1000,
						.memory_mb = ps == 4   ? 3600 - t % 20
							     : ps == 2 ? 7000
								       : 900 };
	}
	double fa = 0, fb = 0;
	ck_assert_int_eq(rv_alg_ps_mem_fit(u, n, a, 3, 5, &fa, &fb), 1);
	ck_assert_double_eq_tol(fa, 13600, 1);
	ck_assert_double_eq_tol(fb, 200, 1);
	/* too few samples at the newest count */
	ck_assert_int_eq(rv_alg_ps_mem_fit(u, n, a, 3, 20, &fa, &fb), 0);
	/* one PS count only */
	ck_assert_int_eq(rv_alg_ps_mem_fit(u, n, a, 1, 5, &fa, &fb), 0);
	/* peaks that do not fall as the count grows (a rise, say) */
	for (size_t i = 0; i < n; i++)
		if (u[i].t_ms > 300000)
			u[i].memory_mb = 7200;
	ck_assert_int_eq(rv_alg_ps_mem_fit(u, n, a, 3, 5, &fa, &fb), 0);
}
END_TEST

START_TEST(test_plan_step_judges_then_plans)
{
	/* a model plan 2 -> 4 workers that made the job slower */
	struct rv_alg_applied a[2] = {
		plan_of(5, RV_ALG_STAGE_RUNNING, "worker_count_model", RV_ALG_OUTCOME_PENDING,
			130000, 4, 4),
		plan_of(1, RV_ALG_STAGE_CREATE, "user_spec", RV_ALG_OUTCOME_PENDING, 0, 2, 4),
	};
	struct rv_alg_speed_obs o[24];
	struct rv_alg_job_history h = explore_history(a, 2, o);

	for (int i = 0; i < 12; i++)
		o[12 + i] = (struct rv_alg_speed_obs){ .workers = 4,
						       .speed = 60 + (i % 2),
						       .t_ms = 130000 + 10000 * (i + 1) };
	h.n_speed = 24;
	h.now_ms = o[23].t_ms;
	struct rv_alg_verdict v;
	struct rv_alg_decision d;

	ck_assert_int_eq(rv_alg_plan_step(&h, &P, &v, &d), 1);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_WORSE);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "revert");
	ck_assert_int_eq(d.cfg.worker.count, 2);
	/* too few settled samples yet: still measuring, nothing judged */
	h.n_speed = 14;
	h.now_ms = o[13].t_ms;
	ck_assert_int_eq(rv_alg_plan_step(&h, &P, &v, &d), 0);
	ck_assert_int_eq(v.outcome, RV_ALG_OUTCOME_PENDING);
	ck_assert(!d.changed);
}
END_TEST

START_TEST(test_names)
{
	char buf[32];

	ck_assert_int_eq(rv_alg_node_name(RV_ALG_WORKER, 3, buf, sizeof(buf)), 8);
	ck_assert_str_eq(buf, "worker-3");
	ck_assert_int_gt(rv_alg_node_name(RV_ALG_PS_ROLE, 0, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "ps-0");
	ck_assert_int_eq(rv_alg_node_name(RV_ALG_WORKER, -1, buf, sizeof(buf)), -EINVAL);
	for (int o = RV_ALG_OUTCOME_PENDING; o <= RV_ALG_OUTCOME_WORSE; o++)
		ck_assert_int_eq(rv_alg_outcome_parse(rv_alg_outcome_name(o)), o);
	ck_assert_int_eq(rv_alg_outcome_parse("great"), -EINVAL);
	ck_assert_ptr_null(rv_alg_outcome_name(99));
}
END_TEST

/* The names plans are stored and shown under are the ids' names, and read
 * back to the same ids; a name this library does not know is no rule. */
START_TEST(test_algorithm_ids)
{
	static const char *const stored[] = {
		"hold",           "worker_count_model", "explore", "rightsize",
		"hot_ps",         "straggler",          "revert",  "create_knn",
		"create_default", "user_spec",          "oom",     "oom_memory_step",
	};

	for (size_t i = 0; i < sizeof(stored) / sizeof(stored[0]); i++) {
		enum rv_alg_id id = rv_alg_id_parse(stored[i]);

		ck_assert_int_ne(id, RV_ALG_ID_UNKNOWN);
		ck_assert_str_eq(rv_alg_id_name(id), stored[i]);
	}
	ck_assert_int_eq(rv_alg_id_parse("oom_bump"), RV_ALG_ID_UNKNOWN);
	ck_assert_int_eq(rv_alg_id_parse(""), RV_ALG_ID_UNKNOWN);
	ck_assert_int_eq(rv_alg_id_parse(NULL), RV_ALG_ID_UNKNOWN);
	ck_assert_str_eq(rv_alg_id_name(RV_ALG_ID_UNKNOWN), "");
	ck_assert_str_eq(rv_alg_id_name((enum rv_alg_id)99), "");
	/* with nothing applied yet the policy holds */
	struct rv_alg_params p;
	struct rv_alg_job_history h = { .strategy = RV_ALG_ALLREDUCE };
	struct rv_alg_decision d;
	rv_alg_params_default(&p);
	ck_assert_int_eq(rv_alg_plan_job(&h, &p, &d), 0);
	ck_assert_int_eq(d.algorithm, RV_ALG_ID_HOLD);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "hold");
}
END_TEST

START_TEST(test_create_explicit_asks_win)
{
	struct rv_alg_job_features f = { .strategy = RV_ALG_PS,
					 .parameters = 1e8,
					 .batch_size = 64 };
	struct rv_alg_limits lim = LIM;
	lim.min_ps = 1;
	lim.max_ps = 8;
	struct rv_alg_ask ask = {
		.has_ps = true,
		.worker_given = true,
		.cfg = { .worker = { .count = 3, .res = { .cpu = 2.5, .memory_mb = 3000 } },
			 .ps = { .count = 1 } },
	};
	struct rv_alg_decision d;

	ck_assert_int_eq(rv_alg_plan_create_job(&f, &ask, NULL, 0, &lim, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "create_default");
	ck_assert_int_eq(d.cfg.worker.count, 3);
	ck_assert_double_eq_tol(d.cfg.worker.res.cpu, 2.5, 1e-9);
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 3000);
	ck_assert_double_gt(d.cfg.ps.res.cpu, 0); /* the PS gave none: estimated */
	ck_assert_int_gt(d.cfg.ps.res.memory_mb, 0);
	ask.ps_given = true;
	ask.cfg.ps = (struct rv_alg_group){ .count = 2, .res = { .cpu = 6, .memory_mb = 9000 } };
	ck_assert_int_eq(rv_alg_plan_create_job(&f, &ask, NULL, 0, &lim, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "user_spec");
	ck_assert_int_eq(d.cfg.ps.count, 2);
	ck_assert_int_eq(d.cfg.ps.res.memory_mb, 9000);
}
END_TEST

static Suite *policy_suite(void)
{
	gsl_set_error_handler_off();
	TCase *tc = RV_TEST_TCASE(
		"core", 10, test_outcome_window, test_outcome_better_neutral_worse,
		test_outcome_not_significant, test_outcome_expected_drop,
		test_outcome_exploration_kept, test_outcome_straggler_replacement_kept,
		test_outcome_measuring_and_unknown, test_outcome_before_fallback,
		test_speed_summarize, test_settle_noisy_ramp, test_drop_warmup,
		test_settle_detection, test_settle_job_warmup, test_settle_restart_same_counts,
		test_starvation_filter, test_starved_speeds_corrected, test_starved_ps_lighter_load,
		test_usage_ramp_holds, test_early_usage_holds, test_starved_step_resize_guess,
		test_straggler_speeds_corrected, test_settled_steps_and_resizes,
		test_repeat_suppression, test_model_may_return_to_explored_worse,
		test_plan_step_judges_then_plans, test_memory_history_from_ps_count_change,
		test_ps_mem_fit, test_names, test_algorithm_ids, test_model_flips,
		test_create_explicit_asks_win);
	tcase_add_checked_fixture(tc, setup, NULL);
	return RV_TEST_SUITE("policy", tc);
}

RV_TEST_MAIN(policy_suite)
