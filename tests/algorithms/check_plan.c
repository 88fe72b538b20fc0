/*
 * check_plan.c: the running-stage composition: which algorithm leads, the
 * reason a user reads, and the cluster's free capacity as a hard cap.
 */
#include <gsl/gsl_errno.h>

#include "alg_internal.h" /* rv_alg_ps_edge_step */
#include "rover_alg.h"
#include "testutil.h"

static struct rv_alg_params P;

static void setup(void)
{
	rv_alg_params_default(&P);
}

static struct rv_alg_job_state state(enum rv_alg_strategy s, int w, int ps)
{
	return (struct rv_alg_job_state){
		.strategy = s,
		.lim = { .min_workers = 2,
			 .max_workers = 32,
			 .node_unit = 1,
			 .min_ps = 1,
			 .max_ps = 8,
			 .max_cpu = 32,
			 .max_memory_mb = 131072,
			 .free_cpu = -1,
			 .free_memory_mb = -1 },
		.cur = { .worker = { .count = w, .res = { .cpu = 4, .memory_mb = 8192 } },
			 .ps = { .count = ps, .res = { .cpu = 8, .memory_mb = 16384 } } },
		.now_ms = 3600000,
	};
}

static double scaling(int w)
{
	return 1 / (1.0 / w + 0.01 + 0.004 * w);
}

static size_t sync_obs(struct rv_alg_speed_obs *o, double (*f)(int))
{
	static const int ws[] = {2, 3, 4, 6};
	size_t n = 0;

	for (int i = 0; i < 4; i++)
		o[n++] = (struct rv_alg_speed_obs){.workers = ws[i], .speed = 100 * f(ws[i])};
	return n;
}

/* usage that matches a config exactly (no right-sizing) */
static size_t steady_usage(struct rv_alg_usage *u, enum rv_alg_role role, int nodes, double cpu,
			   int64_t mem)
{
	size_t n = 0;

	for (int t = 0; t < 5; t++)
		for (int i = 0; i < nodes; i++)
			u[n++] = (struct rv_alg_usage){ .role = role,
							.node = i,
							.t_ms = t * 1000,
							.cpu = cpu,
							.memory_mb = mem };
	return n;
}

START_TEST(test_model_grows_with_reason)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 6, 0);
	struct rv_alg_speed_obs o[8];
	struct rv_alg_usage u[64];
	struct rv_alg_decision d;

	st.n_speed = sync_obs(o, scaling);
	st.speed = o;
	st.n_usage = steady_usage(u, RV_ALG_WORKER, 6, 3.4, 8031); /* ~4 CPU, 8192 MiB */
	st.usage = u;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "worker_count_model");
	ck_assert(d.changed);
	/* the knee: fewest workers reaching 90% of the best within 1..32 */
	ck_assert_int_eq(d.cfg.worker.count, 10);
	/* and right-sized in the same plan: p80 3.4 cores + 3% = 3.502, the
	 * nearest tenth 3.5 (not below 3.4 + 1.5% rounded up, 3.5; it was 3.6
	 * when every value was rounded up) */
	ck_assert_double_eq_tol(d.cfg.worker.res.cpu, 3.5, 1e-9);
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 8192);
	ck_assert_double_eq_tol(d.predicted_speed, 100 * scaling(10), 1e-6);
	ck_assert_double_eq_tol(d.fit_r2, 1, 1e-9);
	ck_assert_int_eq(d.fit_configs, 4);
	ck_assert_msg(strstr(d.reason,
			     "throughput model predicts +34% samples/s with 10 workers") &&
			      strstr(d.reason, "fit r2=1.00 from 4 configs"),
		      "%s", d.reason);
}
END_TEST

START_TEST(test_cluster_cap)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 6, 0);
	struct rv_alg_speed_obs o[8];
	struct rv_alg_decision d;

	st.n_speed = sync_obs(o, scaling);
	st.speed = o;
	st.lim.free_cpu = 8.5;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_int_eq(d.cfg.worker.count, 8);
	st.lim.free_cpu = 0;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_int_eq(d.cfg.worker.count, 6);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "hold");
	ck_assert(!d.changed);
}
END_TEST

START_TEST(test_cluster_cap_blocks_rightsize_growth)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 4, 0);
	struct rv_alg_usage u[64];
	struct rv_alg_decision d;

	/* workers need 16 GiB; 4 x 8 GiB more is not free */
	st.n_usage = steady_usage(u, RV_ALG_WORKER, 4, 3.4, 14000);
	st.usage = u;
	st.lim.free_memory_mb = 10000;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 8192);
	ck_assert_msg(strstr(d.reason, "free capacity") != NULL, "%s", d.reason);
	st.lim.free_memory_mb = -1;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "rightsize");
	/* steady usage: 14000 + mem_margin_min (2%) */
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 14280);
}
END_TEST

START_TEST(test_explore_before_model)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 4, 0);
	struct rv_alg_speed_obs o[] = { { .workers = 2, .speed = 50 },
					{ .workers = 4, .speed = 98 } };
	struct rv_alg_decision d;

	st.speed = o;
	st.n_speed = 2;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "explore");
	ck_assert_int_eq(d.cfg.worker.count, 6);
}
END_TEST

/* The exploration budget: once explore_budget running plans have changed
 * the counts, a step that measures new counts is not taken; the counts stay
 * (right-sizing goes on).  Before it, or with the budget off, the same job
 * explores. */
START_TEST(test_explore_budget_spent_keeps_counts)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 4, 0);
	struct rv_alg_speed_obs o[] = { { .workers = 2, .speed = 50 },
					{ .workers = 4, .speed = 98 } };
	struct rv_alg_params q = P;
	struct rv_alg_decision d;

	st.speed = o;
	st.n_speed = 2;
	st.count_changes = P.explore_budget - 1;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "explore");
	ck_assert_int_eq(d.cfg.worker.count, 6);
	st.count_changes = P.explore_budget;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(!d.changed, "%s: %s", rv_alg_id_name(d.algorithm), d.reason);
	ck_assert_int_eq(d.cfg.worker.count, 4);
	ck_assert_msg(strstr(d.reason, "exploration budget"), "%s", d.reason);
	q.explore_budget = 0;
	ck_assert_int_eq(rv_alg_plan_running(&st, &q, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "explore");
	ck_assert_int_eq(d.cfg.worker.count, 6);
}
END_TEST

/* Spent on a count well under the measured knee: the job goes back to the
 * knee, a count measured already, instead of keeping the slowest config it
 * measured; the bisection between them (18, never measured) is not taken. */
START_TEST(test_explore_budget_spent_settles_on_measured_knee)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 14, 0);
	struct rv_alg_speed_obs o[] = { { .workers = 21, .speed = 100 },
					{ .workers = 21, .speed = 101 },
					{ .workers = 14, .speed = 73 },
					{ .workers = 14, .speed = 74 } };
	struct rv_alg_decision d;

	st.speed = o;
	st.n_speed = 4;
	st.count_changes = P.explore_budget - 1;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_int_eq(d.cfg.worker.count, 18); /* bisects while it may explore */
	st.count_changes = P.explore_budget;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(d.changed, "%s: %s", rv_alg_id_name(d.algorithm), d.reason);
	ck_assert_int_eq(d.cfg.worker.count, 21);
	ck_assert_msg(strstr(d.reason, "21 workers measured 100% of the best measured speed"), "%s",
		      d.reason);
}
END_TEST

/* Speeds the fit cannot follow (noise): a job whose counts the model chose
 * keeps them; one still exploring explores on. */
START_TEST(test_model_counts_kept_on_untrusted_refit)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 8, 0);
	struct rv_alg_speed_obs o[] = { { .workers = 4, .speed = 100 },
					{ .workers = 6, .speed = 55 },
					{ .workers = 8, .speed = 130 },
					{ .workers = 12, .speed = 70 } };
	struct rv_alg_decision d;

	st.speed = o;
	st.n_speed = 4;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(d.changed && d.algorithm == RV_ALG_ID_EXPLORE, "%s: %s",
		      rv_alg_id_name(d.algorithm), d.reason);
	st.model_counts = true;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(!d.changed, "%s", d.reason);
	ck_assert_int_eq(d.cfg.worker.count, 8);
	ck_assert_msg(strstr(d.reason, "counts kept"), "%s", d.reason);
}
END_TEST

/* Six speeds each at 4, 8, 12 and 16 workers of a scaling all-reduce job
 * under 30% noise (fixed draws), into o[24]; returns 24. */
static size_t noisy_scaling_obs(struct rv_alg_speed_obs *o)
{
	static const int ws[] = { 4, 8, 12, 16 };
	static const double z[] = { 0.9, -1.1, 0.3, -0.4, 1.2, -0.9 };
	size_t n = 0;
	for (int i = 0; i < 4; i++)
		for (int k = 0; k < 6; k++, n++)
			o[n] = (struct rv_alg_speed_obs){ .workers = ws[i],
							  .speed = 100 * scaling(ws[i]) *
								   (1 + 0.3 * z[(k + i) % 6]),
							  .t_ms = (int64_t)n * 10000 };
	return n;
}

/* A model-chosen count under 30% speed noise: the refit (trusted only for
 * being no worse than the noise) would move by less than the uncertainty of
 * its own prediction; the counts stay.  The same data for counts that the
 * model did not choose moves them. */
START_TEST(test_noise_level_move_held)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 12, 0);
	struct rv_alg_speed_obs o[24];
	size_t n = noisy_scaling_obs(o);
	struct rv_alg_decision d;
	st.speed = o;
	st.n_speed = n;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(d.changed && d.cfg.worker.count != 12, "%s", d.reason);
	st.model_counts = true;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(!d.changed && strstr(d.reason, "no better than the noise"), "%s", d.reason);
}
END_TEST

/* The same noisy data for a model-chosen count the refit puts short of
 * the line: its move up is taken, within the uncertainty or not (held,
 * the count is a predicted throughput miss; a job at 16 of 19 oracle
 * workers ran at 0.93 of the oracle's speed on every seed). */
START_TEST(test_noise_level_move_up_taken)
{
	struct rv_alg_speed_obs o[24];
	size_t n = noisy_scaling_obs(o);
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 8, 0);
	struct rv_alg_decision d;
	st.speed = o;
	st.n_speed = n;
	st.model_counts = true;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(d.changed && d.cfg.worker.count > 8, "%s", d.reason);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "worker_count_model");
	/* not once the exploration budget is spent: moves up within the
	 * noise then crept 14 -> 21 -> 23 -> 28 workers, a plan each */
	st.count_changes = P.explore_budget;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(!d.changed && strstr(d.reason, "no better than the noise"), "%s", d.reason);
	st.count_changes = 0;
	/* from above, the same move down stays held */
	st.cur.worker.count = 12;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(!d.changed && strstr(d.reason, "no better than the noise"), "%s", d.reason);
}
END_TEST

/* An all-reduce job whose knee is 5 workers (91% of the best, at 8), eight
 * speeds each at the counts in ws[] under 24% noise (fixed draws), into o;
 * returns how many. */
static size_t noisy_knee5_obs(struct rv_alg_speed_obs *o, const int *ws, int nw)
{
	static const double z[] = { 0.9, -1.1, 0.3, -0.4, 1.2, -0.9, 0.1, -0.2 };
	size_t n = 0;
	for (int i = 0; i < nw; i++)
		for (int k = 0; k < 8; k++) {
			double f = 1 / (0.03688 / ws[i] + 0.001803 + 0.00057626 * ws[i]);
			o[n] = (struct rv_alg_speed_obs){ .workers = ws[i],
							  .speed = f * (1 + 0.24 * z[(k + i) % 8]),
							  .t_ms = (int64_t)n * 10000 };
			n++;
		}
	return n;
}

/* A model-chosen count one worker over the knee of a small job under 24%
 * speed noise, measured at 3, 6 and 8 workers: the refit's move down to 5,
 * a count between measured ones, is taken though its predicted loss is
 * within the noise (held, 6 workers for 5 held 1.26x the oracle's
 * resources, h6-min3-noise-ar-0).  Below every measured count the model
 * extrapolates: the same move from counts measured at 5 and up is held. */
START_TEST(test_noise_level_step_down_within_data)
{
	static const int within[] = { 3, 6, 8 }, above[] = { 6, 8, 11 };
	struct rv_alg_speed_obs o[24];
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 6, 0);
	struct rv_alg_decision d;

	st.lim.min_workers = 3;
	st.speed = o;
	st.n_speed = noisy_knee5_obs(o, within, 3);
	st.model_counts = true;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(d.changed && d.cfg.worker.count == 5, "%d: %s", d.cfg.worker.count, d.reason);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "worker_count_model");
	st.n_speed = noisy_knee5_obs(o, above, 3);
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(!d.changed && strstr(d.reason, "no better than the noise"), "%d: %s",
		      d.cfg.worker.count, d.reason);
}
END_TEST

/* A PS job under 28% speed noise, just moved to one PS and measured there
 * at 18 workers only: the model's move to 15 workers for a predicted -4%
 * rests on a slope in workers taken from the other PS counts, within the
 * uncertainty of the prediction and of the current mean; the counts stay.
 * (The truth: 15 workers run 14% slower.) */
START_TEST(test_single_count_move_held)
{
	struct rv_alg_job_state st = state(RV_ALG_PS, 18, 1);
	static const struct {
		int w, ps;
		double s[6];
	} runs[] = {
		{ 20, 6, { 38.1, 35.0, 34.2 } },
		{ 13, 6, { 24.3, 24.3, 25.2, 29.7, 27.9, 26.3 } },
		{ 17, 6, { 39.1, 36.7, 26.7, 36.3, 28.0, 45.8 } },
		{ 17, 3, { 61.9, 50.0, 55.0, 61.5, 60.9, 44.7 } },
		{ 18, 1, { 63.3, 78.0, 79.2, 65.5, 81.3, 93.4 } },
	};
	struct rv_alg_speed_obs o[40]; /* 27 measured, 6 more below */
	size_t n = 0;
	for (size_t r = 0; r < 5; r++)
		for (int k = 0; k < 6 && runs[r].s[k] > 0; k++, n++)
			o[n] = (struct rv_alg_speed_obs){ .workers = runs[r].w,
							  .ps = runs[r].ps,
							  .speed = runs[r].s[k],
							  .t_ms = (int64_t)n * 10000 };
	struct rv_alg_decision d;
	st.lim.max_workers = 20;
	st.speed = o;
	st.n_speed = n;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(!d.changed && strstr(d.reason, "measured at 18 workers only"), "%s",
		      d.reason);
	/* measured at a second worker count there, the model moves */
	for (int k = 0; k < 6; k++, n++)
		o[n] = (struct rv_alg_speed_obs){ .workers = 12,
						  .ps = 1,
						  .speed = 12 / (0.17308 + 0.0026 * 12),
						  .t_ms = (int64_t)n * 10000 };
	st.n_speed = n;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(!strstr(d.reason, "measured at 18 workers only"), "%s", d.reason);
}
END_TEST

static double edge_curve(int w)
{
	return 1 / (1.0 / w + 0.5 + 0.01 * w);
}

/* The fit's knee is the current count, the largest measured, and growth to
 * it paid: exploration's counts measure a step above first; counts the
 * model chose stay (the model already went beyond its data to them, and
 * the step above came back). */
START_TEST(test_model_counts_not_bracketed)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 5, 0);
	static const int ws[] = { 2, 3, 5 };
	struct rv_alg_speed_obs o[6];
	for (int i = 0; i < 6; i++)
		o[i] = (struct rv_alg_speed_obs){ .workers = ws[i / 2],
						  .speed = 100 * edge_curve(ws[i / 2]),
						  .t_ms = (int64_t)i * 10000 };
	struct rv_alg_decision d;
	st.speed = o;
	st.n_speed = 6;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(d.changed && d.cfg.worker.count == 8, "%s", d.reason);
	st.model_counts = true;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(!d.changed && d.cfg.worker.count == 5, "%s", d.reason);
}
END_TEST

/* Worker memory rising 6000 -> 7600 MiB over 600 s on 6 nodes (the
 * history, across plans), and the current window: its last 60 s. */
static void rising_memory(struct rv_alg_usage *h, size_t *nh, struct rv_alg_usage *u, size_t *n)
{
	*nh = *n = 0;
	for (int t = 0; t <= 600; t += 10)
		for (int i = 0; i < 6; i++) {
			struct rv_alg_usage x = { .role = RV_ALG_WORKER,
						  .node = i,
						  .t_ms = 3000000 + t * 1000,
						  .cpu = 3.4,
						  .memory_mb = 6000 + t * 8 / 3 + (i % 3) * 20 };
			h[(*nh)++] = x;
			if (t >= 540)
				u[(*n)++] = x;
		}
}

/* Memory that rises and would pass the limit within a usage window grows in
 * a plan that restarts the job anyway (here the counts change) to where it
 * will be two windows ahead; without such a plan it waits until it nears
 * the limit, a plan of its own. */
/* A 6-worker job of the scaling curve whose memory rises (rising_memory),
 * its memory limit mem_mb (0: the state's): the plan moves to 10 workers
 * and takes the memory to where it will be two windows ahead. */
static void plan_rising_with_count_change(struct rv_alg_job_state *st, struct rv_alg_speed_obs *o,
					  struct rv_alg_usage *h, struct rv_alg_usage *u,
					  int64_t mem_mb, struct rv_alg_decision *d)
{
	st->n_speed = sync_obs(o, scaling);
	st->speed = o;
	rising_memory(h, &st->n_mem_usage, u, &st->n_usage);
	st->mem_usage = h;
	st->usage = u;
	if (mem_mb > 0)
		st->cur.worker.res.memory_mb = mem_mb;
	ck_assert_int_eq(rv_alg_plan_running(st, &P, d), 0);
	ck_assert_int_eq(d->cfg.worker.count, 10);
	/* 7640 + 2.67 MiB/s x 1200 s, + 10% */
	ck_assert_msg(d->cfg.worker.res.memory_mb >= 11500 && d->cfg.worker.res.memory_mb <= 12500,
		      "%lld: %s", (long long)d->cfg.worker.res.memory_mb, d->reason);
	ck_assert_msg(strstr(d->reason, "memory rises") != NULL, "%s", d->reason);
}

START_TEST(test_rising_memory_folded_into_count_change)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 6, 0);
	struct rv_alg_speed_obs o[8];
	struct rv_alg_usage h[400], u[64];
	struct rv_alg_decision d;

	plan_rising_with_count_change(&st, o, h, u, 0, &d);
	/* counts that hold: 150 s ahead it needs ~8040 MiB, under 8192 */
	st.cur.worker.count = 10;
	st.speed = NULL;
	st.n_speed = 0;
	st.cur.worker.res.cpu = 3.5;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 8192);
	ck_assert(!d.changed);
}
END_TEST

/* Memory that passes its limit only in the second of the two windows a
 * growth is sized for still grows with a restart: left for later, it takes
 * a growth plan of its own (10000 MiB: one window ahead ~9240 MiB, two
 * ~10840 MiB). */
START_TEST(test_rising_memory_folded_within_two_windows)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 6, 0);
	struct rv_alg_speed_obs o[8];
	struct rv_alg_usage h[400], u[64];
	struct rv_alg_decision d;

	plan_rising_with_count_change(&st, o, h, u, 10000, &d);
}
END_TEST

START_TEST(test_hold_on_flat)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 2, 0);
	struct rv_alg_speed_obs o[] = {
		{ .workers = 2, .speed = 100 },
		{ .workers = 3, .speed = 101 },
		{ .workers = 4, .speed = 99 },
		{ .workers = 2, .speed = 100 },
	};
	struct rv_alg_decision d;

	st.speed = o;
	st.n_speed = 4;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "hold");
	ck_assert_int_eq(d.cfg.worker.count, 2);
	ck_assert(!d.changed);
	ck_assert_msg(strstr(d.reason, "least CPU") != NULL, "%s", d.reason);
}
END_TEST

START_TEST(test_hot_ps_leads)
{
	struct rv_alg_job_state st = state(RV_ALG_PS, 4, 4);
	struct rv_alg_usage u[64];
	struct rv_alg_decision d;
	size_t n = steady_usage(u, RV_ALG_PS_ROLE, 4, 3.0, 13653);

	for (size_t i = 0; i < n; i++)
		if (u[i].node == 2)
			u[i].cpu = 7.8;
	st.usage = u;
	st.n_usage = n;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "hot_ps");
	ck_assert(d.changed);
	ck_assert_uint_eq(d.n_migrate, 1);
	ck_assert_int_eq(d.migrate[0].node, 2);
	/* the pooled PS CPU must not undo the migration */
	ck_assert_double_eq(d.cfg.ps.res.cpu, 8);

	/* all PS pinned at their limit: half as many PS again (4 -> 6) */
	for (size_t i = 0; i < n; i++)
		u[i].cpu = 8.0;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "hot_ps");
	ck_assert_int_eq(d.cfg.ps.count, 6);
	ck_assert_uint_eq(d.n_migrate, 0);

	/* saturated at max PS: nothing on the PS side can change, so the
	 * worker count does not wait (first measurement: 4 -> 6) */
	struct rv_alg_speed_obs o[] = {{.workers = 4, .ps = 4, .speed = 40},
				       {.workers = 4, .ps = 4, .speed = 40}};

	st.lim.max_ps = 4;
	st.speed = o;
	st.n_speed = 2;
	/* pinned at max PS but below the per-node CPU ceiling: the PS CPU
	 * grows first and the counts wait */
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "rightsize");
	ck_assert_int_eq(d.cfg.ps.count, 4);
	ck_assert_double_eq(d.cfg.ps.res.cpu, 16);
	ck_assert_msg(strstr(d.reason, "counts wait") != NULL, "%s", d.reason);
	/* and at the CPU ceiling too: nothing on the PS side can change */
	st.lim.max_cpu = 8;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "explore");
	ck_assert_int_eq(d.cfg.worker.count, 6);
	ck_assert_int_eq(d.cfg.ps.count, 4);
	ck_assert_msg(strstr(d.reason, "counts wait") == NULL &&
			      strstr(d.reason, "PS count is at its limit") != NULL,
		      "%s", d.reason);
}
END_TEST

START_TEST(test_straggler_leads)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 4, 0);
	struct rv_alg_step s[] = {
		{ .node = 0, .step_s = 1.0 },
		{ .node = 1, .step_s = 1.02 },
		{ .node = 2, .step_s = 0.98 },
		{ .node = 3, .step_s = 2.6 },
	};
	struct rv_alg_decision d;

	st.steps = s;
	st.n_steps = 4;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "straggler");
	ck_assert(d.changed);
	ck_assert_uint_eq(d.n_replace, 1);
	ck_assert_int_eq(d.replace[0], 3);
	ck_assert_int_eq(d.cfg.worker.count, 4);
}
END_TEST

START_TEST(test_ps_job_model)
{
	/* transfer-bound PS job: the model adds PS and workers together */
	struct rv_alg_job_state st = state(RV_ALG_PS, 4, 1);
	struct rv_alg_speed_obs o[32];
	struct rv_alg_decision d;
	size_t n = 0;

	for (int p = 1; p <= 2; p++)
		for (int w = 2; w <= 6; w += 2)
			o[n++] = (struct rv_alg_speed_obs){
				.workers = w,
				.ps = p,
				.speed = w / (0.2 + 1.0 * w / p + 0.01 * w + 0.02 * p),
			};
	st.speed = o;
	st.n_speed = n;
	st.lim.max_ps = 4;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "worker_count_model");
	ck_assert_int_gt(d.cfg.ps.count, 1);
	ck_assert_int_le(d.cfg.ps.count, 4);
	ck_assert_double_eq_tol(d.predicted_speed,
				d.cfg.worker.count /
					(0.2 + 1.0 * d.cfg.worker.count / d.cfg.ps.count +
					 0.01 * d.cfg.worker.count + 0.02 * d.cfg.ps.count),
				1e-6);
	ck_assert_msg(strstr(d.reason, "PS (") != NULL &&
			      strstr(d.reason, "fit r2=1.00 from 6 configs"),
		      "%s", d.reason);
}
END_TEST

START_TEST(test_noisy_fit_trusted_within_noise)
{
	/* a flat curve measured with 10% noise: r2 is near 0 and the relative
	 * error 10%, no larger than the spread of the repeated measurements,
	 * but the fit does not beat a flat speed beyond that noise: no
	 * evidence for the model; the measured means decide, and with nothing
	 * lost from 6 workers down to 2 the job goes to 2 */
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 6, 0);
	static const int ws[] = {2, 3, 4, 6};
	struct rv_alg_speed_obs o[8];
	struct rv_alg_decision d;
	size_t n = 0;

	for (int i = 0; i < 4; i++) {
		o[n++] = (struct rv_alg_speed_obs){.workers = ws[i], .speed = 110};
		o[n++] = (struct rv_alg_speed_obs){.workers = ws[i], .speed = 90};
	}
	st.speed = o;
	st.n_speed = n;
	P.fit_evidence_f = 3.0;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "explore");
	ck_assert_int_eq(d.cfg.worker.count, 2);
	ck_assert_msg(strstr(d.reason, "does not explain the speeds beyond their noise"), "%s",
		      d.reason);
	/* without the evidence test the model decides, as before */
	P.fit_evidence_f = 0;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "worker_count_model");
	ck_assert_int_eq(d.cfg.worker.count, 2);
}
END_TEST

START_TEST(test_no_jump_on_an_uncertain_prediction)
{
	/* three counts measured with 25% noise, the speed nearly flat: the
	 * fit's prediction a few counts below the data has a standard error
	 * far beyond max_pred_rse, so an exploration step is measured instead
	 * of the model's jump to the floor of its range (two geometric steps:
	 * the step from 12 to 8 lost nothing) */
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 8, 0);
	static const int ws[] = { 18, 12, 8 };
	static const double lo[] = { 45, 50, 51 }, hi[] = { 75, 82, 85 };
	struct rv_alg_speed_obs o[6];
	struct rv_alg_decision d;
	size_t n = 0;

	st.lim.min_workers = 1;
	for (int i = 0; i < 3; i++) {
		o[n++] = (struct rv_alg_speed_obs){ .workers = ws[i], .speed = lo[i] };
		o[n++] = (struct rv_alg_speed_obs){ .workers = ws[i], .speed = hi[i] };
	}
	st.speed = o;
	st.n_speed = n;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "explore");
	ck_assert_int_eq(d.cfg.worker.count, 3);
	/* without the bound (and the evidence test, which this fit fails
	 * too) the model jumps */
	P.max_pred_rse = 0;
	P.fit_evidence_f = 0;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "worker_count_model");
	ck_assert_int_ne(d.cfg.worker.count, 3);
}
END_TEST

/* A PS job under 20% noise whose last exploration step (12 workers, 4 ->
 * 2 PS) measured slower: a fit over three configurations that does not
 * beat a flat speed beyond that noise is no evidence for a move, and the
 * job goes back to the best measured configuration (12 workers, 4 PS: the
 * cheapest on the line) instead of staying on the probe or following the
 * fit. */
START_TEST(test_unexplained_fit_returns_to_best_measured)
{
	struct rv_alg_job_state st = state(RV_ALG_PS, 12, 2);
	static const int ws[] = { 16, 12, 12 }, pss[] = { 4, 4, 2 };
	static const double sp[3][4] = { { 75, 125, 90, 110 },
					 { 70, 120, 85, 105 },
					 { 52, 88, 60, 80 } };
	struct rv_alg_speed_obs o[12];
	struct rv_alg_decision d;
	size_t n = 0;

	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 4; k++)
			o[n++] = (struct rv_alg_speed_obs){ .workers = ws[i],
							    .ps = pss[i],
							    .speed = sp[i][k] };
	st.speed = o;
	st.n_speed = n;
	st.count_changes = 2;
	P.fit_evidence_f = 3.0;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(d.changed, "%s: %s", rv_alg_id_name(d.algorithm), d.reason);
	ck_assert_int_eq(d.cfg.worker.count, 12);
	ck_assert_int_eq(d.cfg.ps.count, 4);
	ck_assert_msg(strstr(d.reason, "returning to the best measured: 12 workers and 4 PS"), "%s",
		      d.reason);
}
END_TEST

/* The same noise on a PS job, measured at two PS counts: its exploration
 * would start over at whatever PS count it is on, so the model's move
 * stands however uncertain (a new PS count then bisected for 13 plans). */
START_TEST(test_uncertain_ps_move_kept)
{
	struct rv_alg_job_state st = state(RV_ALG_PS, 8, 4);
	static const int ws[] = { 16, 12, 8, 12 }, pss[] = { 4, 4, 4, 2 };
	static const double lo[] = { 45, 50, 51, 40 }, hi[] = { 75, 82, 85, 70 };
	struct rv_alg_speed_obs o[8];
	struct rv_alg_decision d;
	size_t n = 0;

	st.lim.min_workers = 1;
	for (int i = 0; i < 4; i++) {
		o[n++] =
			(struct rv_alg_speed_obs){ .workers = ws[i], .ps = pss[i], .speed = lo[i] };
		o[n++] =
			(struct rv_alg_speed_obs){ .workers = ws[i], .ps = pss[i], .speed = hi[i] };
	}
	st.speed = o;
	st.n_speed = n;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_ptr_null(strstr(d.reason, "to measure scaling"));
	/* the bound changes nothing here: the same plan without it */
	struct rv_alg_params q = P;
	struct rv_alg_decision e;

	q.max_pred_rse = 0;
	ck_assert_int_eq(rv_alg_plan_running(&st, &q, &e), 0);
	ck_assert_int_eq(d.cfg.worker.count, e.cfg.worker.count);
	ck_assert_int_eq(d.cfg.ps.count, e.cfg.ps.count);
	ck_assert_str_eq(d.reason, e.reason);
}
END_TEST

/* The count running now measured just short of the line (0.89 of the
 * best measured mean, within the hold band of knee_hold_frac) but beyond
 * its noise: the data does not force one more worker; the hold judges it,
 * as for a count the model picked, and it stays. */
START_TEST(test_measured_near_line_holds)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 9, 0);
	struct rv_alg_speed_obs o[] = {
		{ .workers = 4, .speed = 60.1 },   { .workers = 4, .speed = 59.9 },
		{ .workers = 16, .speed = 99.8 },  { .workers = 16, .speed = 100.2 },
		{ .workers = 12, .speed = 95.1 },  { .workers = 12, .speed = 94.9 },
		{ .workers = 9, .speed = 88.9 },   { .workers = 9, .speed = 89.1 },
		{ .workers = 20, .speed = 100.4 }, { .workers = 20, .speed = 100.6 },
	};
	struct rv_alg_decision d;

	st.speed = o;
	st.n_speed = 10;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(d.cfg.worker.count == 9 && !d.changed, "%d: %s", d.cfg.worker.count,
		      d.reason);
	/* short of the band (0.85 of the best): one more worker */
	o[6].speed = 84.9;
	o[7].speed = 85.1;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(d.cfg.worker.count > 9, "%d: %s", d.cfg.worker.count, d.reason);
}
END_TEST

START_TEST(test_bad_input)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 4, 0);
	struct rv_alg_decision d;

	st.n_speed = 3; /* with a NULL array */
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), -EINVAL);
	ck_assert_int_eq(rv_alg_plan_running(NULL, &P, &d), -EINVAL);
}
END_TEST

/* A plan that would only trim a little (1.4% of the job's resources: the
 * memory of two 16-core workers) is not worth a restart: held. */
START_TEST(test_small_trim_held)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 2, 0);
	struct rv_alg_speed_obs o[] = {
		{ .workers = 2, .speed = 100 },
		{ .workers = 3, .speed = 101 },
		{ .workers = 4, .speed = 99 },
		{ .workers = 2, .speed = 100 },
	};
	struct rv_alg_usage u[10];
	struct rv_alg_decision d;

	st.cur.worker.res.cpu = 16;
	st.speed = o;
	st.n_speed = 4;
	st.usage = u;
	st.n_usage = steady_usage(u, RV_ALG_WORKER, 2, 15.5, 6500);
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert(!d.changed);
	ck_assert_int_eq(d.cfg.worker.res.memory_mb, 8192);
	ck_assert_msg(strstr(d.reason, "not worth a restart") != NULL, "%s", d.reason);
	/* at 4 cores a node the same trim saves 4.2%: made */
	st.cur.worker.res.cpu = 4;
	st.n_usage = steady_usage(u, RV_ALG_WORKER, 2, 3.9, 6500);
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert(d.changed);
	ck_assert_int_lt(d.cfg.worker.res.memory_mb, 8192);
}
END_TEST

/* Workers starved (throttled in 90% of periods) at the only configuration
 * measured: the first exploration step does not depend on the speed, so it
 * carries the growth instead of waiting a plan for it; once another count
 * was measured (or a plan moved the counts) the counts wait as before. */
START_TEST(test_starved_first_step)
{
	struct rv_alg_job_state st = state(RV_ALG_ALLREDUCE, 4, 0);
	struct rv_alg_usage u[20];
	size_t n = steady_usage(u, RV_ALG_WORKER, 4, 4, 8192);
	for (size_t i = 0; i < n; i++) {
		u[i].has_throttled = true;
		u[i].throttled = 0.9;
	}
	struct rv_alg_speed_obs o[] = { { .workers = 4, .speed = 40 },
					{ .workers = 4, .speed = 41 },
					{ .workers = 2, .speed = 30 } };
	struct rv_alg_decision d;

	st.usage = u;
	st.n_usage = n;
	st.speed = o;
	st.n_speed = 2;
	st.first_counts = true;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "explore");
	ck_assert_int_eq(d.cfg.worker.count, 6);
	ck_assert_double_eq(d.cfg.worker.res.cpu, 8);
	ck_assert_msg(strstr(d.reason, "first exploration step") != NULL, "%s", d.reason);
	/* a plan moved the counts already */
	st.first_counts = false;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "rightsize");
	ck_assert_int_eq(d.cfg.worker.count, 4);
	ck_assert_double_eq(d.cfg.worker.res.cpu, 8);
	ck_assert_msg(strstr(d.reason, "counts wait") != NULL, "%s", d.reason);
	/* another count measured: the next step would read the starved speed */
	st.first_counts = true;
	st.n_speed = 3;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_int_eq(d.cfg.worker.count, 4);
	ck_assert_msg(strstr(d.reason, "counts wait") != NULL, "%s", d.reason);
	/* speeds noisier than min_gain: the growth is measured alone first */
	struct rv_alg_speed_obs noisy[] = { { .workers = 4, .speed = 32 },
					    { .workers = 4, .speed = 48 },
					    { .workers = 4, .speed = 40 } };
	st.speed = noisy;
	st.n_speed = 3;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_int_eq(d.cfg.worker.count, 4);
	ck_assert_double_eq(d.cfg.worker.res.cpu, 8);
	ck_assert_msg(strstr(d.reason, "counts wait") != NULL, "%s", d.reason);
}
END_TEST

/* Workers starved (throttled in 90% of periods) and the PS using 6 of its 8
 * cores behind them: the plan that doubles the workers' CPU grows the PS
 * too (its demand follows the job's speed), not one plan later. */
START_TEST(test_every_starved_role_in_one_plan)
{
	struct rv_alg_job_state st = state(RV_ALG_PS, 6, 1);
	struct rv_alg_usage u[40];
	struct rv_alg_decision d;
	size_t n = steady_usage(u, RV_ALG_WORKER, 6, 3.9, 7000);

	for (size_t i = 0; i < n; i++) {
		u[i].has_throttled = true;
		u[i].throttled = 0.9;
	}
	size_t k = steady_usage(u + n, RV_ALG_PS_ROLE, 1, 6.0, 15000);
	for (size_t i = n; i < n + k; i++) {
		u[i].has_throttled = true;
		u[i].throttled = 0.05;
	}
	st.usage = u;
	st.n_usage = n + k;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert(d.changed);
	ck_assert_double_eq_tol(d.cfg.worker.res.cpu, 8, 1e-9);
	ck_assert_msg(d.cfg.ps.res.cpu > 11.5, "PS CPU %.1f: %s", d.cfg.ps.res.cpu, d.reason);
	/* the counts wait for the roles */
	ck_assert_int_eq(d.cfg.worker.count, 6);
	ck_assert_int_eq(d.cfg.ps.count, 1);
	/* throttled time says the workers need three times their 4 cores:
	 * they grow there, and the PS behind them follows by as much */
	for (size_t i = 0; i < n; i++) {
		u[i].has_held = true;
		u[i].held = 8.1;
	}
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(d.cfg.worker.res.cpu >= 12 && d.cfg.worker.res.cpu <= 13, "worker CPU %.1f",
		      d.cfg.worker.res.cpu);
	ck_assert_msg(d.cfg.ps.res.cpu > 17.5, "PS CPU %.1f: %s", d.cfg.ps.res.cpu, d.reason);
}
END_TEST

/* Workers and PS each at their CPU limit and holding each other back: each
 * is throttled in about half its periods, under the line for one role
 * alone.  Both grow in one plan; at a third of the periods (bursts of a
 * tight but enough limit) neither does. */
static size_t throttled_pair(struct rv_alg_usage *u, double tw, double tp)
{
	size_t n = steady_usage(u, RV_ALG_WORKER, 6, 3.9, 7000);

	for (size_t i = 0; i < n; i++) {
		u[i].has_throttled = true;
		u[i].throttled = tw;
	}
	size_t k = steady_usage(u + n, RV_ALG_PS_ROLE, 2, 7.8, 15000);
	for (size_t i = n; i < n + k; i++) {
		u[i].has_throttled = true;
		u[i].throttled = tp;
	}
	return n + k;
}

START_TEST(test_roles_holding_each_other_back_grow_together)
{
	struct rv_alg_job_state st = state(RV_ALG_PS, 6, 2);
	struct rv_alg_usage u[40];
	struct rv_alg_decision d;

	st.usage = u;
	st.n_usage = throttled_pair(u, 0.5, 0.45);
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert(d.changed);
	ck_assert_msg(d.cfg.worker.res.cpu > 5, "worker CPU %.1f: %s", d.cfg.worker.res.cpu,
		      d.reason);
	ck_assert_msg(d.cfg.ps.res.cpu > 10, "PS CPU %.1f: %s", d.cfg.ps.res.cpu, d.reason);
	ck_assert_int_eq(d.cfg.worker.count, 6);
	ck_assert_int_eq(d.cfg.ps.count, 2);

	st.n_usage = throttled_pair(u, 0.3, 0.3);
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(d.cfg.worker.res.cpu < 5, "worker CPU %.1f: %s", d.cfg.worker.res.cpu,
		      d.reason);
	ck_assert_msg(d.cfg.ps.res.cpu < 10, "PS CPU %.1f: %s", d.cfg.ps.res.cpu, d.reason);

	/* both right-sized to their need: bursts throttle about 40% of the
	 * periods each, neither role's demand reaches its limit */
	st.n_usage = throttled_pair(u, 0.42, 0.42);
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(d.cfg.worker.res.cpu < 5, "worker CPU %.1f: %s", d.cfg.worker.res.cpu,
		      d.reason);
	ck_assert_msg(d.cfg.ps.res.cpu < 10, "PS CPU %.1f: %s", d.cfg.ps.res.cpu, d.reason);
}
END_TEST

/* PS job whose per-PS overhead makes one PS best: measured at 8 PS (10, 13
 * and 16 workers) and once at 4 PS (15 workers), 44% faster.  With one
 * config at the second PS count the model cannot separate transfer from
 * overhead and extrapolates fewer PS as slower; the step that paid is
 * followed: the next plan measures fewer PS still. */
static double few_ps_speed(int w, int p)
{
	return w / (0.09153 + 0.003 * w / p + 0.0008 * w + 0.02141 * p);
}

/* Three measurements (-1%, 0, +1%) of scale * f(w, p) at each of the
 * ncfg (workers, PS) configurations; returns how many. */
static size_t ps_obs3(struct rv_alg_speed_obs *o, const int (*cfgs)[2], int ncfg,
		      double (*f)(int, int), double scale)
{
	size_t n = 0;

	for (int i = 0; i < ncfg; i++)
		for (int r = 0; r < 3; r++)
			o[n++] = (struct rv_alg_speed_obs){
				.workers = cfgs[i][0],
				.ps = cfgs[i][1],
				.speed = scale * f(cfgs[i][0], cfgs[i][1]) * (0.99 + 0.01 * r)
			};
	return n;
}

START_TEST(test_ps_step_that_paid_is_followed)
{
	struct rv_alg_job_state st = state(RV_ALG_PS, 15, 4);
	static const int cfgs[][2] = { { 10, 8 }, { 13, 8 }, { 16, 8 }, { 15, 4 } };
	struct rv_alg_speed_obs o[16];
	struct rv_alg_decision d;
	size_t n = ps_obs3(o, cfgs, 4, few_ps_speed, 1);
	st.lim.max_workers = 16;
	st.speed = o;
	st.n_speed = n;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "explore");
	ck_assert_int_lt(d.cfg.ps.count, 3);
	ck_assert_msg(strstr(d.reason, "8 -> 4 PS measured +") != NULL, "%s", d.reason);
	/* the same means under 30% noise: the gain lies within two standard
	 * errors of the difference, so it did not pay for sure, and no step
	 * beyond the data is measured for it */
	for (size_t i = 0; i < n; i++)
		o[i].speed *= 0.7 + 0.3 * (double)(i % 3);
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(strstr(d.reason, "beyond the measured ones") == NULL, "%s", d.reason);
	n = ps_obs3(o, cfgs, 4, few_ps_speed, 1);
	/* the same data where going to 4 PS did not pay: no step further */
	for (size_t i = 0; i < n; i++)
		if (o[i].ps == 4)
			o[i].speed = 0.9 * few_ps_speed(15, 8);
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(d.cfg.ps.count >= 4, "%d PS: %s", d.cfg.ps.count, d.reason);
}
END_TEST

/* A PS job measured at 24 and 16 workers, both at 8 PS, running at 16. */
static struct rv_alg_job_state two_ps_counts_measured(struct rv_alg_speed_obs *o, size_t *n)
{
	struct rv_alg_job_state st = state(RV_ALG_PS, 16, 8);

	for (int r = 0; r < 3; r++) {
		o[(*n)++] = (struct rv_alg_speed_obs){ .workers = 24, .ps = 8, .speed = 100 };
		o[(*n)++] = (struct rv_alg_speed_obs){ .workers = 16, .ps = 8, .speed = 99 };
	}
	st.lim.max_workers = 24;
	st.cur.worker.count = 16;
	st.speed = o;
	st.n_speed = *n;
	return st;
}

/* PS job measured at 24 and 16 workers, both at 8 PS: the exploration step
 * that measures the third config moves the PS count too (a third worker
 * count at one PS count cannot separate transfer from per-PS overhead), and
 * the PS memory follows the share each PS then holds. */
START_TEST(test_third_config_moves_ps)
{
	struct rv_alg_speed_obs o[8];
	size_t n = 0;
	struct rv_alg_job_state st = two_ps_counts_measured(o, &n);
	struct rv_alg_decision d;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "explore");
	ck_assert_int_lt(d.cfg.worker.count, 16);
	ck_assert_int_eq(d.cfg.ps.count, 4);
	ck_assert_msg(strstr(d.reason, "8 -> 4 PS") != NULL, "%s", d.reason);

	/* the same means under 15% noise: a fit with no spare degree of
	 * freedom would rest on noise, so the third config stays at 8 PS */
	for (size_t i = 0; i < n; i++)
		o[i].speed *= i / 2 == 1 ? 1 : i / 2 == 0 ? 0.85 : 1.15;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "explore");
	ck_assert_int_eq(d.cfg.ps.count, 8);

	/* one worker count measured: the exploration goes on at 8 PS */
	st.n_speed = 1;
	st.cur.worker.count = 24;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_str_eq(rv_alg_id_name(d.algorithm), "explore");
	ck_assert_int_eq(d.cfg.ps.count, 8);
}
END_TEST

/* A PS count change sizes the PS memory from the fit of a / count + b the
 * peaks at two measured counts give, not from the share alone. */
START_TEST(test_ps_mem_follows_fit)
{
	struct rv_alg_speed_obs o[8];
	struct rv_alg_usage u[64];
	size_t n = 0;
	struct rv_alg_job_state st = two_ps_counts_measured(o, &n);
	struct rv_alg_decision d;

	st.cur.ps.res.memory_mb = 4096;
	st.n_usage = steady_usage(u, RV_ALG_PS_ROLE, 8, 1.0, 2500);
	st.usage = u;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_int_eq(d.cfg.ps.count, 4);
	int64_t by_share = d.cfg.ps.res.memory_mb;
	/* 16000 / 4 + 500 MiB, with the margin the usage at 8 PS asks over
	 * the fitted peak there (16000 / 8 + 500 = 2500): steady at the peak,
	 * mem_margin_min (2%), not a flat 10% (4950) */
	st.ps_mem_fit = true;
	st.ps_mem_a = 16000;
	st.ps_mem_b = 500;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_int_eq(d.cfg.ps.count, 4);
	ck_assert_msg(d.cfg.ps.res.memory_mb >= 4500 && d.cfg.ps.res.memory_mb <= 4700,
		      "%lld (by share %lld): %s", (long long)d.cfg.ps.res.memory_mb,
		      (long long)by_share, d.reason);
	ck_assert_int_ne(d.cfg.ps.res.memory_mb, by_share);
	int64_t steady = d.cfg.ps.res.memory_mb;
	/* usage that wanders under its peak asks more: the same share of the
	 * fitted need at 4 PS */
	for (size_t i = 0; i < st.n_usage; i++)
		u[i].memory_mb = 2500 - (int64_t)(i % 10) * 25;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(d.cfg.ps.res.memory_mb > steady && d.cfg.ps.res.memory_mb < 4950,
		      "wandering: %lld: %s", (long long)d.cfg.ps.res.memory_mb, d.reason);
}
END_TEST

/* Fewer PS each hold more of the model: the step 8 -> 4 PS stops at 5,
 * the fewest whose PS fit a node's memory (40000 MiB x 8 / 4 = 80000 would
 * not fit 65536). */
START_TEST(test_fewer_ps_fit_a_node)
{
	struct rv_alg_speed_obs o[8];
	size_t n = 0;
	struct rv_alg_job_state st = two_ps_counts_measured(o, &n);
	struct rv_alg_decision d;
	st.cur.ps.res.memory_mb = 40000;
	st.lim.max_memory_mb = 65536;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_int_eq(d.cfg.ps.count, 5);
	ck_assert_msg(strstr(d.reason, "more memory than a node has") != NULL, "%s", d.reason);
	/* a node large enough: the step goes to 4 */
	st.lim.max_memory_mb = 131072;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_int_eq(d.cfg.ps.count, 4);
}
END_TEST

/* The PS count at or beyond the edge of the measured ones: a step further
 * only where the data does not argue against it. */
START_TEST(test_ps_edge_step)
{
	/* the model keeps 4 PS, measured, and 8 -> 4 paid +1%: no probe of
	 * 2 PS though the model predicts +1% there */
	ck_assert_int_eq(rv_alg_ps_edge_step(4, 4, 8, 4, 0.01, 0.01, 0.05), 0);
	/* 8 -> 4 paid +19%: measured a step further */
	ck_assert_int_eq(rv_alg_ps_edge_step(4, 4, 8, 4, -0.10, 0.19, 0.05), 1);
	/* the model's 2 PS lies beyond 4..8 while the job runs at 7 (inside):
	 * 7 -> 4 paid +3%, so 7 stays */
	ck_assert_int_eq(rv_alg_ps_edge_step(2, 4, 8, 7, 0.01, 0.03, 0.05), -1);
	/* the same at +8%: the direction paid, measured further */
	ck_assert_int_eq(rv_alg_ps_edge_step(2, 4, 8, 7, 0.01, 0.08, 0.05), 1);
	/* beyond the edge with the job at the edge: the model is the only
	 * guide there, measured unless predicted clearly worse */
	ck_assert_int_eq(rv_alg_ps_edge_step(4, 8, 16, 8, 0.01, 0.03, 0.05), 1);
	ck_assert_int_eq(rv_alg_ps_edge_step(4, 8, 16, 8, -0.10, 0.03, 0.05), 0);
	/* more PS: the same both ways */
	ck_assert_int_eq(rv_alg_ps_edge_step(8, 2, 8, 8, 0.02, 0.02, 0.05), 0);
	ck_assert_int_eq(rv_alg_ps_edge_step(12, 2, 8, 4, 0.02, 0.02, 0.05), -1);
}
END_TEST

/* A PS job measured at 8, 4 and 6 PS, running at 26 workers and 6 PS: the
 * model's 2 PS lies beyond the measured ones and 6 -> 4 PS paid under
 * min_gain, so the PS count stays at 6.  The workers are then chosen at 6
 * PS, where 26 holds, not at the 2 PS that stays unmeasured (27 there: a
 * plan for one worker). */
static double edge_ps_speed(int w, int p)
{
	return w / (2 + 0.1 * p + (0.05 / p + 0.05) * w);
}

START_TEST(test_kept_ps_count_keeps_its_workers)
{
	struct rv_alg_job_state st = state(RV_ALG_PS, 26, 6);
	static const int cfgs[][2] = { { 23, 8 }, { 15, 8 }, { 10, 4 }, { 26, 6 } };
	struct rv_alg_speed_obs o[16];
	struct rv_alg_decision d;
	size_t n = ps_obs3(o, cfgs, 4, edge_ps_speed, 100);
	st.cur.ps.res.cpu = 2;
	st.cur.ps.res.memory_mb = 4096;
	st.speed = o;
	st.n_speed = n;
	ck_assert_int_eq(rv_alg_plan_running(&st, &P, &d), 0);
	ck_assert_msg(strstr(d.reason, "PS count kept at 6") != NULL, "%s", d.reason);
	ck_assert_int_eq(d.cfg.ps.count, 6);
	ck_assert_int_eq(d.cfg.worker.count, 26);
}
END_TEST

static Suite *plan_suite(void)
{
	gsl_set_error_handler_off();
	TCase *tc = RV_TEST_TCASE(
		"core", 10, test_model_grows_with_reason, test_ps_edge_step,
		test_kept_ps_count_keeps_its_workers, test_cluster_cap,
		test_cluster_cap_blocks_rightsize_growth, test_explore_before_model,
		test_model_counts_kept_on_untrusted_refit, test_explore_budget_spent_keeps_counts,
		test_explore_budget_spent_settles_on_measured_knee, test_noise_level_move_held,
		test_noise_level_move_up_taken, test_noise_level_step_down_within_data,
		test_single_count_move_held, test_model_counts_not_bracketed, test_hold_on_flat,
		test_measured_near_line_holds, test_rising_memory_folded_into_count_change,
		test_rising_memory_folded_within_two_windows, test_hot_ps_leads,
		test_straggler_leads, test_ps_job_model, test_noisy_fit_trusted_within_noise,
		test_bad_input, test_small_trim_held, test_every_starved_role_in_one_plan,
		test_starved_first_step, test_roles_holding_each_other_back_grow_together,
		test_ps_step_that_paid_is_followed, test_no_jump_on_an_uncertain_prediction,
		test_uncertain_ps_move_kept, test_unexplained_fit_returns_to_best_measured,
		test_third_config_moves_ps, test_ps_mem_follows_fit, test_fewer_ps_fit_a_node);
	tcase_add_checked_fixture(tc, setup, NULL);
	return RV_TEST_SUITE("plan", tc);
}

RV_TEST_MAIN(plan_suite)
