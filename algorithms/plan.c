/*
 * plan.c: the composition the brain (cluster mode) and a job master
 * (single-job mode) call: running stage (counts, hot PS, right-sizing,
 * stragglers) and OOM stage.  Each part writes its own line of the reason;
 * the decision's algorithm names the leading change.  Pure and reentrant.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alg_internal.h"

/* Leading algorithm: lower rank wins. */
enum lead_rank { LEAD_HOT_PS, LEAD_STRAGGLER, LEAD_COUNT, LEAD_RIGHTSIZE, LEAD_NONE };

static void take_lead(enum lead_rank *rank, enum rv_alg_id *name, enum lead_rank r,
		      enum rv_alg_id n)
{
	if (r < *rank) {
		*rank = r;
		*name = n;
	}
}

static const char *role_name(enum rv_alg_role r)
{
	return r == RV_ALG_PS_ROLE ? "PS" : "worker";
}

/* Whether the model's choice moves to a configuration the data has not
 * measured (fewer than two observations) whose predicted speed has a
 * relative standard error beyond p->max_pred_rse, the pooled noise of the
 * observations carried through the fit: the model cannot say, and
 * exploration's step costs no more plans.  All-reduce jobs only (a PS job's
 * exploration restarts at each PS count).  DESIGN-LOG.md, "Counts",
 * GUARD_MODEL_GUESS. */
static bool model_guess(const struct rv_alg_fit *fit, const struct rv_alg_job_state *st,
			const struct rv_alg_decision *d, const struct rv_alg_params *p)
{
	int w = d->cfg.worker.count, ps = d->cfg.ps.count;

	if (!(p->max_pred_rse > 0) || st->strategy == RV_ALG_PS || !d->changed ||
	    d->algorithm != RV_ALG_ID_WORKER_COUNT_MODEL ||
	    rv_alg_obs_count(st->speed, st->n_speed, w, ps, 2) >= 2)
		return false;
	double noise = rv_alg_speed_noise(st->speed, st->n_speed);

	return rv_alg_fit_predict_rse(fit, st->speed, st->n_speed, w, ps, noise) > p->max_pred_rse;
}

/* Whether the model's move is one step down (node_unit workers) that
 * saves at least the share of the workers the knee gives up in speed
 * (1 - target_frac), to a count not measured yet within the measured
 * counts (one under it was measured at that PS count): there the model
 * interpolates, and the move measures the cheaper neighbour.  A worker
 * over the knee of a small job holds more resources than the speed noise
 * hides (6 workers for 5: 1.26x), while a move that measures short of its
 * own prediction is judged against it and reverted.  Of many workers one
 * is within the resources a knee may hold, and one short may miss the
 * speed (17 -> 16 workers for 18).  Below the data the model extrapolates:
 * such moves walked down a worker a plan.  DESIGN-LOG.md, "Counts",
 * GUARD_NOISE_LEVEL. */
static bool step_down_within_data(const struct rv_alg_job_state *st,
				  const struct rv_alg_decision *d, const struct rv_alg_params *p)
{
	int w = d->cfg.worker.count, ps = d->cfg.ps.count, cur = st->cur.worker.count;
	int unit = st->lim.node_unit > 1 ? st->lim.node_unit : 1;

	if (w != cur - unit || (double)unit / cur < 1 - p->target_frac - 1e-9 ||
	    rv_alg_obs_count(st->speed, st->n_speed, w, ps, 1) > 0)
		return false;
	for (size_t i = 0; i < st->n_speed; i++)
		if (st->speed[i].ps == ps && st->speed[i].workers < w && st->speed[i].speed > 0)
			return true;
	return false;
}

/* Whether the model's move away from measured counts rests on a fit
 * trusted only because its error is no larger than the noise (r2 below
 * min_r2), with a predicted change smaller than two standard errors of the
 * prediction and of the current mean: the data cannot tell the two apart.
 * Not a move up while the exploration budget lasts: the model then puts
 * the count running now short of the line.  DESIGN-LOG.md, "Counts",
 * GUARD_NOISE_LEVEL. */
static bool noise_level_move(const struct rv_alg_fit *fit, const struct rv_alg_job_state *st,
			     const struct rv_alg_decision *d, const struct rv_alg_params *p)
{
	int w = st->cur.worker.count, ps = st->cur.ps.count;
	if (!st->model_counts || !d->changed || d->algorithm != RV_ALG_ID_WORKER_COUNT_MODEL ||
	    rv_alg_fit_trusted(fit, p) ||
	    (d->cfg.worker.count > w &&
	     !(p->explore_budget > 0 && st->count_changes >= p->explore_budget)) ||
	    rv_alg_obs_count(st->speed, st->n_speed, w, ps, 2) < 2 ||
	    step_down_within_data(st, d, p))
		return false;
	double cur = rv_alg_mean_speed(st->speed, st->n_speed, w, ps);
	if (!(cur > 0) || !(d->predicted_speed > 0))
		return false;
	double noise = rv_alg_speed_noise(st->speed, st->n_speed);
	int k = rv_alg_obs_count(st->speed, st->n_speed, w, ps, 0);
	double se_cur = noise / sqrt((double)k);
	double se_new = rv_alg_fit_predict_rse(fit, st->speed, st->n_speed, d->cfg.worker.count,
					       d->cfg.ps.count, noise);
	return fabs(d->predicted_speed / cur - 1) < 2 * sqrt(se_cur * se_cur + se_new * se_new);
}

/* The confidence rule (rv_alg_move_confidence) on a throughput-model move
 * in *d: false, with the reason in *out, when the move is not confident
 * (the counts stay and are measured longer); true otherwise, with the
 * confidence added to d's reason. */
static bool move_confident(const struct rv_alg_fit *fit, const struct rv_alg_job_state *st,
			   struct rv_alg_decision *d, const struct rv_alg_params *p,
			   struct rv_alg_decision *out)
{
	struct rv_alg_confidence c;

	if (!d->changed || d->algorithm != RV_ALG_ID_WORKER_COUNT_MODEL ||
	    rv_alg_move_confidence(fit, st->speed, st->n_speed, &st->cur, &d->cfg, p, &c) < 0)
		return true;
	if (c.confident && c.beyond_data) {
		rv_alg_reason_add(d, "confidence: %+.0f%% +- %.0f%%, beyond the measured counts",
				  100 * c.gain, 100 * c.se);
		return true;
	}
	if (c.confident) {
		rv_alg_reason_add(d, "confidence: %+.0f%% +- %.0f%% (%.1f standard errors)",
				  100 * c.gain, 100 * c.se, c.se > 0 ? fabs(c.gain) / c.se : 0);
		return true;
	}
	rv_alg_reason_add(out,
			  "counts kept, measuring them longer: the model's %+.0f%% for %d workers "
			  "and %d PS is within its uncertainty (+- %.0f%%)",
			  100 * c.gain, d->cfg.worker.count, d->cfg.ps.count, 100 * c.se);
	return false;
}

/* Where a count move is not taken (its fit explains nothing, or it is not
 * confident), exploration ends: the job goes back to the best measured
 * configuration (rv_alg_best_measured) when it runs another one, so an
 * exploration step it measured is never where it stays by default; else
 * the counts stay and are measured longer. */
static void return_to_best(const struct rv_alg_job_state *st, const struct rv_alg_params *p,
			   struct rv_alg_config *cfg, struct rv_alg_decision *out,
			   enum lead_rank *rank, enum rv_alg_id *lead)
{
	struct rv_alg_config b;
	double share = 0;

	if (rv_alg_best_measured(st->speed, st->n_speed, &st->lim, &st->cur, p, &b, &share) < 0 ||
	    (b.worker.count == st->cur.worker.count && b.ps.count == st->cur.ps.count)) {
		rv_alg_reason_add(out, "counts kept at the best measured");
		return;
	}
	cfg->worker.count = b.worker.count;
	cfg->ps.count = b.ps.count;
	out->predicted_speed =
		rv_alg_mean_speed(st->speed, st->n_speed, b.worker.count, b.ps.count);
	if (st->cur.ps.count > 0)
		rv_alg_reason_add(
			out,
			"returning to the best measured: %d workers and %d PS (%.0f%% of "
			"the best measured speed, the cheapest within its noise of %.0f%%)",
			b.worker.count, b.ps.count, 100 * share, 100 * p->target_frac);
	else
		rv_alg_reason_add(out,
				  "returning to the best measured: %d workers (%.0f%% of the best "
				  "measured speed, the cheapest within its noise of %.0f%%)",
				  b.worker.count, 100 * share, 100 * p->target_frac);
	take_lead(rank, lead, LEAD_COUNT, RV_ALG_ID_EXPLORE);
}

/* Distinct worker counts measured at PS count ps. */
static int workers_measured_at(const struct rv_alg_job_state *st, int ps)
{
	int k = 0;

	for (size_t i = 0; i < st->n_speed; i++) {
		bool seen = false;

		if (st->speed[i].ps != ps || !(st->speed[i].speed > 0))
			continue;
		for (size_t j = 0; j < i && !seen; j++)
			seen = st->speed[j].ps == ps && st->speed[j].speed > 0 &&
			       st->speed[j].workers == st->speed[i].workers;
		k += !seen;
	}
	return k;
}

/* Whether a PS job's model moves to fewer workers at the PS count running
 * now, when that PS count was measured at one worker count only, and the
 * predicted speed there is on the line (target_frac of the best predicted)
 * by less than two standard errors of the prediction.  At one PS count one
 * worker count gives the curve's level, its slope comes from the other PS
 * counts: the data cannot say whether the cheaper count reaches the line,
 * and the measured count stays.  Only for speeds noisier than min_gain per
 * observation.  DESIGN-LOG.md, "Counts", GUARD_SINGLE_COUNT. */
static bool single_count_move(const struct rv_alg_fit *fit, const struct rv_alg_job_state *st,
			      const struct rv_alg_decision *d, const struct rv_alg_params *p)
{
	int w = st->cur.worker.count, ps = st->cur.ps.count;

	if (st->strategy != RV_ALG_PS || !d->changed ||
	    d->algorithm != RV_ALG_ID_WORKER_COUNT_MODEL || d->cfg.ps.count != ps ||
	    d->cfg.worker.count >= w || rv_alg_obs_count(st->speed, st->n_speed, w, ps, 2) < 2 ||
	    !(d->predicted_speed > 0) || workers_measured_at(st, ps) != 1)
		return false;
	/* the best predicted over the allowed workers and the measured PS counts */
	double best = 0;
	int wmin = st->lim.min_workers > 0 ? st->lim.min_workers : 1;
	int wmax = st->lim.max_workers > 0 ? st->lim.max_workers : w;

	for (size_t i = 0; i < st->n_speed; i++)
		for (int x = wmin; st->speed[i].ps > 0 && x <= wmax; x++) {
			double f = rv_alg_fit_predict(fit, x, st->speed[i].ps);

			if (f > best)
				best = f;
		}
	double noise = rv_alg_speed_noise(st->speed, st->n_speed);
	double se_new = rv_alg_fit_predict_rse(fit, st->speed, st->n_speed, d->cfg.worker.count,
					       d->cfg.ps.count, noise);

	return noise > p->min_gain && d->predicted_speed * (1 - 2 * se_new) < p->target_frac * best;
}

/* The change the model predicts for decision d against the speed measured
 * at the current counts, in percent. */
static double move_pct(const struct rv_alg_job_state *st, const struct rv_alg_decision *d)
{
	return 100 *
	       (d->predicted_speed / rv_alg_mean_speed(st->speed, st->n_speed, st->cur.worker.count,
						       st->cur.ps.count) -
		1);
}

/* The PS count a PS exploration measures: half as many (cheaper), or
 * twice as many at the minimum; the current count when neither is allowed. */
static int ps_step(const struct rv_alg_job_state *st)
{
	int p0 = st->cur.ps.count;
	int pmin = st->lim.min_ps > 0 ? st->lim.min_ps : 1;
	int pmax = st->lim.max_ps > 0 ? st->lim.max_ps : p0;

	if (p0 > pmin)
		return (p0 + 1) / 2 > pmin ? (p0 + 1) / 2 : pmin;
	if (p0 < pmax)
		return 2 * p0 < pmax ? 2 * p0 : pmax;
	return p0;
}

/* Distinct worker counts measured, when every speed was measured at the
 * current PS count; 0 when one was measured at another. */
static int ps_measured_workers(const struct rv_alg_job_state *st)
{
	for (size_t i = 0; i < st->n_speed; i++)
		if (st->speed[i].speed > 0 && st->speed[i].ps != st->cur.ps.count)
			return 0;
	return workers_measured_at(st, st->cur.ps.count);
}

/* Whether a PS job's model-chosen PS count pc at or beyond the edge of the
 * measured ones [lo, hi] is measured a step further (1), replaced by the
 * current count (-1), or taken as it is (0); gain is what the model predicts
 * for that step, paid what the last measured step towards the edge
 * brought.  At the edge itself (pc measured), a step that paid under
 * min_gain argues against a step further, whatever the model extrapolates.
 * Beyond the edge the model extrapolates already: measured a step further
 * when not predicted clearly worse, unless the current count lies inside
 * the measured range and the step towards the edge paid under min_gain;
 * the current (measured) count then stays.  DESIGN-LOG.md, "Counts",
 * COUNT_PS_EDGE. */
int rv_alg_ps_edge_step(int pc, int lo, int hi, int cur_ps, double gain, double paid,
			double min_gain)
{
	bool beyond = pc < lo || pc > hi;
	bool inside = cur_ps > lo && cur_ps < hi;

	if (!beyond)
		return paid >= min_gain;
	if (inside && paid < min_gain)
		return pc != cur_ps ? -1 : 0;
	return gain >= -min_gain / 2 || paid >= min_gain;
}

/* The standard error, relative, of the speed ratio between PS counts a and
 * b: noise per observation over the observations at each. */
static double ps_step_se(const struct rv_alg_job_state *st, int a, int b, double noise)
{
	int ka = 0, kb = 0;

	for (size_t i = 0; i < st->n_speed; i++) {
		ka += st->speed[i].ps == a && st->speed[i].speed > 0;
		kb += st->speed[i].ps == b && st->speed[i].speed > 0;
	}
	if (!ka || !kb)
		return INFINITY;
	return noise * sqrt(1.0 / ka + 1.0 / kb);
}

/* Whether the job has spent its exploration budget (explore_budget): that
 * many running plans have changed its counts already, and another
 * exploration step would rarely pay for its restart.  DESIGN-LOG.md,
 * "Counts", GUARD_SPENT. */
static bool explore_spent(const struct rv_alg_job_state *st, const struct rv_alg_params *p)
{
	return p->explore_budget > 0 && st->count_changes >= p->explore_budget;
}

static void keep_spent(const struct rv_alg_job_state *st, const struct rv_alg_params *p,
		       struct rv_alg_decision *out)
{
	rv_alg_reason_add(out,
			  "counts kept: %d plans have changed them (exploration budget %d); "
			  "another exploration step would not pay for its restart",
			  st->count_changes, p->explore_budget);
}

/* Spent, and the model's choice lies beyond the data: what exploration
 * settles on over the measured counts at this PS count, when that is a
 * count measured already (the last exploration step may have measured a
 * count well under the knee).  Not counts the model chose.  DESIGN-LOG.md,
 * "Counts", GUARD_SPENT. */
static bool settle_measured(const struct rv_alg_job_state *st, const struct rv_alg_params *p,
			    struct rv_alg_decision *part)
{
	struct rv_alg_decision d;

	if (rv_alg_settle_measured(st->speed, st->n_speed, &st->lim, &st->cur, p, &d) < 0 ||
	    !d.changed)
		return false;
	*part = d;
	return true;
}

/*
 * The worker and PS counts of a running plan (plan_counts): a fit, the
 * model's choice or exploration, then the guards and the PS-count rules,
 * each a function below, in the order of count_guards[] and count_rules[].
 * Why each exists, with the jobs that showed it: algorithms/DESIGN-LOG.md,
 * "Counts".
 */
struct counts {
	const struct rv_alg_job_state *st;
	const struct rv_alg_params *p;
	struct rv_alg_config *cfg; /* the plan's counts, written when one is taken */
	struct rv_alg_decision *out;
	enum lead_rank *rank;
	enum rv_alg_id *lead;
	struct rv_alg_fit fit;
	struct rv_alg_decision part; /* the model's choice or exploration's */
	int rc;                      /* of the fit, then of the choice */
	bool spent, trusted;
};

/* What a rule says: not mine (next), taken (the guards end), or the counts
 * are decided (done). */
enum count_step { COUNT_NEXT, COUNT_TAKEN, COUNT_DONE };

static bool part_explores(const struct counts *c)
{
	return c->part.changed && c->part.algorithm == RV_ALG_ID_EXPLORE;
}

/* COUNT_TRUST: fit, and whether the fit is trusted: by its own measures, or
 * with an error no larger than 1.5 x the noise of the observations (as good
 * as the data allows); not when it explains the speeds no better than their
 * noise (rv_alg_fit_explains), where a PS job measured at two PS counts
 * returns to the best measured instead of exploring again. */
static enum count_step count_trust(struct counts *c)
{
	const struct rv_alg_job_state *st = c->st;
	const struct rv_alg_params *p = c->p;
	enum rv_alg_model model = st->strategy == RV_ALG_PS ? RV_ALG_MODEL_ASYNC
							    : RV_ALG_MODEL_SYNC;

	c->rc = rv_alg_fit_speed(model, st->speed, st->n_speed, &c->fit);
	c->spent = explore_spent(st, p);
	c->trusted = c->rc == 0 &&
		     (rv_alg_fit_trusted(&c->fit, p) ||
		      (c->fit.n_configs >= p->min_fit_configs &&
		       c->fit.rel_rmse <= 1.5 * rv_alg_speed_noise(st->speed, st->n_speed)));
	double evidence = 0;

	if (!c->trusted || rv_alg_fit_explains(&c->fit, st->speed, st->n_speed, p, &evidence))
		return COUNT_NEXT;
	rv_alg_reason_add(c->out,
			  "the fit (r2=%.2f from %d configs) does not explain the speeds "
			  "beyond their noise (F=%.1f < %.1f)",
			  c->fit.r2, c->fit.n_configs, evidence, p->fit_evidence_f);
	if (st->strategy == RV_ALG_PS && c->fit.n_ps_values > 1) {
		return_to_best(st, p, c->cfg, c->out, c->rank, c->lead);
		return COUNT_DONE;
	}
	c->trusted = false;
	return COUNT_NEXT;
}

/* GUARD_MODEL_GUESS: a move the model cannot predict (model_guess) is
 * exploration's step while the budget lasts. */
static enum count_step guard_model_guess(struct counts *c)
{
	if (!model_guess(&c->fit, c->st, &c->part, c->p) || c->spent)
		return COUNT_NEXT;
	c->rc = rv_alg_explore(c->st->speed, c->st->n_speed, &c->st->lim, &c->st->cur, c->p,
			       &c->part);
	return COUNT_TAKEN;
}

/* GUARD_SPENT: with the budget spent, an exploration step beyond the data
 * only settles on counts measured already, and never from counts the
 * model chose. */
static enum count_step guard_spent(struct counts *c)
{
	if (!c->spent || !part_explores(c))
		return COUNT_NEXT;
	if (c->st->model_counts || !settle_measured(c->st, c->p, &c->part)) {
		keep_spent(c->st, c->p, c->out);
		return COUNT_DONE;
	}
	return COUNT_TAKEN;
}

/* GUARD_MODEL_EDGE: counts the model chose are not measured a step beyond:
 * the model already went beyond its data to them. */
static enum count_step guard_model_edge(struct counts *c)
{
	if (!c->st->model_counts || !part_explores(c))
		return COUNT_NEXT;
	rv_alg_reason_add(c->out,
			  "counts kept: the throughput model chose them; not measuring %d "
			  "beyond them",
			  c->part.cfg.worker.count);
	return COUNT_DONE;
}

/* GUARD_SINGLE_COUNT: see single_count_move. */
static enum count_step guard_single_count(struct counts *c)
{
	const struct rv_alg_job_state *st = c->st;

	if (!single_count_move(&c->fit, st, &c->part, c->p))
		return COUNT_NEXT;
	rv_alg_reason_add(c->out,
			  "counts kept: %d PS measured at %d workers only, and the model's "
			  "%+.0f%% for %d workers may not reach the line within its uncertainty",
			  st->cur.ps.count, st->cur.worker.count, move_pct(st, &c->part),
			  c->part.cfg.worker.count);
	return COUNT_DONE;
}

/* GUARD_NOISE_LEVEL: see noise_level_move. */
static enum count_step guard_noise_level(struct counts *c)
{
	if (!noise_level_move(&c->fit, c->st, &c->part, c->p))
		return COUNT_NEXT;
	rv_alg_reason_add(c->out,
			  "counts kept: the fit (r2=%.2f from %d configs) is no better than the "
			  "noise, and its %+.0f%% for %d workers is within its uncertainty",
			  c->fit.r2, c->fit.n_configs, move_pct(c->st, &c->part),
			  c->part.cfg.worker.count);
	return COUNT_DONE;
}

/* GUARD_CONFIDENCE: a move that is not confident (move_confident) ends
 * exploration at the best measured. */
static enum count_step guard_confidence(struct counts *c)
{
	if (move_confident(&c->fit, c->st, &c->part, c->p, c->out))
		return COUNT_NEXT;
	return_to_best(c->st, c->p, c->cfg, c->out, c->rank, c->lead);
	return COUNT_DONE;
}

/* The guards over the model's choice, in order: the first that is not
 * COUNT_NEXT ends them. */
static const struct count_guard {
	enum count_guard_id {
		GUARD_MODEL_GUESS,
		GUARD_SPENT,
		GUARD_MODEL_EDGE,
		GUARD_SINGLE_COUNT,
		GUARD_NOISE_LEVEL,
		GUARD_CONFIDENCE,
	} id;
	enum count_step (*apply)(struct counts *c);
} count_guards[] = {
	{ GUARD_MODEL_GUESS, guard_model_guess }, { GUARD_SPENT, guard_spent },
	{ GUARD_MODEL_EDGE, guard_model_edge },   { GUARD_SINGLE_COUNT, guard_single_count },
	{ GUARD_NOISE_LEVEL, guard_noise_level }, { GUARD_CONFIDENCE, guard_confidence },
};

/* The model's choice from a trusted fit.  The data overrules the model:
 * never below the largest measured count too slow against the best
 * measured, except the count running now when its mean is within the hold
 * band of the line (the hold judges it then). */
static enum count_step count_model(struct counts *c)
{
	const struct rv_alg_job_state *st = c->st;
	struct rv_alg_limits lim = st->lim;
	int too_slow = rv_alg_measured_too_slow(st->speed, st->n_speed, st->cur.ps.count, c->p);

	if (too_slow == st->cur.worker.count &&
	    rv_alg_measured_near_line(st->speed, st->n_speed, too_slow, st->cur.ps.count, c->p))
		too_slow = 0;
	if (too_slow + 1 > lim.min_workers)
		lim.min_workers = too_slow + 1;
	if (lim.max_workers > 0 && lim.min_workers > lim.max_workers)
		lim.min_workers = lim.max_workers;
	c->rc = rv_alg_choose_workers_obs(&c->fit, st->speed, st->n_speed, &lim, &st->cur, c->p,
					  &c->part);
	for (size_t i = 0; c->rc == 0 && i < sizeof(count_guards) / sizeof(count_guards[0]); i++) {
		enum count_step s = count_guards[i].apply(c);

		if (s != COUNT_NEXT)
			return s == COUNT_DONE ? COUNT_DONE : COUNT_NEXT;
	}
	return COUNT_NEXT;
}

/* COUNT_CHOOSE: the model's choice from a trusted fit; counts the model
 * chose stay when a refit lost its trust (noise); else exploration, or
 * once the budget is spent only a settle on counts measured already. */
static enum count_step count_choose(struct counts *c)
{
	const struct rv_alg_job_state *st = c->st;

	if (c->trusted)
		return count_model(c);
	if (st->model_counts && c->rc == 0) {
		rv_alg_reason_add(c->out,
				  "counts kept: the throughput model chose them, and its refit "
				  "(r2=%.2f from %d configs) is not trusted to move them",
				  c->fit.r2, c->fit.n_configs);
		return COUNT_DONE;
	}
	c->rc = c->spent ? rv_alg_settle_measured(st->speed, st->n_speed, &st->lim, &st->cur, c->p,
						  &c->part)
			 : rv_alg_explore(st->speed, st->n_speed, &st->lim, &st->cur, c->p,
					  &c->part);
	if (c->rc == 0 && c->spent && !c->part.changed) {
		keep_spent(st, c->p, c->out);
		return COUNT_DONE;
	}
	return COUNT_NEXT;
}

/* COUNT_FAILED: no choice could be made (an error): the counts stay. */
static enum count_step count_failed(struct counts *c)
{
	return c->rc < 0 ? COUNT_DONE : COUNT_NEXT;
}

/* Takes workers w and PS pn for the plan, as an exploration (no predicted
 * speed) with the fit's figures. */
static void counts_explore_ps(struct counts *c, int w, int pn)
{
	c->cfg->worker.count = w;
	c->cfg->ps.count = pn;
	c->out->predicted_speed = 0;
	c->out->fit_r2 = c->fit.r2;
	c->out->fit_configs = c->fit.n_configs;
}

/* COUNT_THIRD_PS: the exploration step that would measure a third worker
 * count of a quiet PS job (noise within min_gain) at one PS count moves
 * the PS count too: at one PS count w/f is linear in w, and a third count
 * there adds no term the model can separate, one at another PS count does. */
static enum count_step count_third_ps(struct counts *c)
{
	const struct rv_alg_job_state *st = c->st;

	if (c->spent || c->trusted || !c->part.changed || st->strategy != RV_ALG_PS ||
	    st->cur.ps.count <= 0 || c->part.cfg.worker.count == st->cur.worker.count ||
	    ps_measured_workers(st) != 2 ||
	    !(rv_alg_speed_noise(st->speed, st->n_speed) <= c->p->min_gain))
		return COUNT_NEXT;
	int pn = ps_step(st);
	struct rv_alg_config trial = st->cur;

	trial.worker.count = c->part.cfg.worker.count;
	trial.ps.count = pn;
	if (pn == st->cur.ps.count || !rv_alg_fits_free(&st->lim, &st->cur, &trial))
		return COUNT_NEXT;
	counts_explore_ps(c, trial.worker.count, pn);
	rv_alg_reason_add(c->out, "%s", c->part.reason);
	rv_alg_reason_add(c->out,
			  "with %d -> %d PS: a third worker count at one PS count cannot tell "
			  "transfer from per-PS overhead",
			  st->cur.ps.count, pn);
	take_lead(c->rank, c->lead, LEAD_COUNT, RV_ALG_ID_EXPLORE);
	return COUNT_DONE;
}

/* COUNT_PS_ONE: a PS job measured at one PS count only cannot tell the
 * transfer term (many PS pay) from the per-PS overhead (few pay): measure
 * another PS count (fewer first, more at the minimum) with the workers the
 * model chose, one plan for both. */
static enum count_step count_ps_one(struct counts *c)
{
	const struct rv_alg_job_state *st = c->st;

	if (c->spent || !c->trusted || st->strategy != RV_ALG_PS || c->fit.n_ps_values != 1 ||
	    st->cur.ps.count <= 0)
		return COUNT_NEXT;
	int p0 = st->cur.ps.count, pn = ps_step(st);
	struct rv_alg_config trial = st->cur;

	trial.worker.count = c->part.cfg.worker.count;
	trial.ps.count = pn;
	if (pn == p0 || !rv_alg_fits_free(&st->lim, &st->cur, &trial))
		return COUNT_NEXT;
	counts_explore_ps(c, trial.worker.count, pn);
	if (c->part.changed)
		rv_alg_reason_add(c->out, "%s", c->part.reason);
	rv_alg_reason_add(c->out,
			  "exploring the PS count: %d -> %d PS (measured at one PS count only, "
			  "the model cannot tell transfer from per-PS overhead)",
			  p0, pn);
	take_lead(c->rank, c->lead, LEAD_COUNT, RV_ALG_ID_EXPLORE);
	return COUNT_DONE;
}

/* The model's PS count against the measured ones, for COUNT_PS_EDGE. */
struct ps_edge {
	int lo, hi;     /* the measured PS counts' range */
	int pc, wc, pn; /* the model's PS and workers; the step beyond pc */
	int edge, from; /* the edge measured PS count, and its nearest measured */
	double gain;    /* predicted for pc -> pn */
	double paid;    /* predicted for from -> edge; 0 within the noise */
};

static void ps_edge_read(const struct counts *c, struct ps_edge *e)
{
	const struct rv_alg_job_state *st = c->st;

	e->lo = INT32_MAX;
	e->hi = 0;
	for (size_t i = 0; i < st->n_speed; i++) {
		if (st->speed[i].ps > 0 && st->speed[i].ps < e->lo)
			e->lo = st->speed[i].ps;
		if (st->speed[i].ps > e->hi)
			e->hi = st->speed[i].ps;
	}
	e->pc = c->part.cfg.ps.count;
	e->wc = c->part.cfg.worker.count;
	e->pn = e->pc;
	int pmin = st->lim.min_ps > 0 ? st->lim.min_ps : 1;
	int pmax = st->lim.max_ps > 0 ? st->lim.max_ps : e->pc;
	if (e->pc <= e->lo && e->pc > pmin)
		e->pn = e->pc / 2 > pmin ? e->pc / 2 : pmin;
	else if (e->pc >= e->hi && e->pc < pmax)
		e->pn = 2 * e->pc < pmax ? 2 * e->pc : pmax;
	e->gain = e->pn != e->pc ? rv_alg_fit_predict(&c->fit, e->wc, e->pn) /
						   rv_alg_fit_predict(&c->fit, e->wc, e->pc) -
					   1
				 : 0;
	e->edge = e->pc <= e->lo ? e->lo : e->hi;
	e->from = e->edge;
	for (size_t i = 0; i < st->n_speed; i++) {
		int q = st->speed[i].ps;
		if (q > 0 && q != e->edge &&
		    (e->from == e->edge || abs(q - e->edge) < abs(e->from - e->edge)))
			e->from = q;
	}
	e->paid = e->from != e->edge ? rv_alg_fit_predict(&c->fit, e->wc, e->edge) /
						       rv_alg_fit_predict(&c->fit, e->wc, e->from) -
					       1
				     : 0;
	if (e->from != e->edge && e->paid > 0 &&
	    e->paid < 2 * ps_step_se(st, e->from, e->edge,
				     rv_alg_speed_noise(st->speed, st->n_speed)))
		e->paid = 0;
}

static bool ps_measured(const struct rv_alg_job_state *st, int ps)
{
	bool measured = false;

	for (size_t i = 0; i < st->n_speed && !measured; i++)
		measured = st->speed[i].ps == ps;
	return measured;
}

/* The PS count running now kept against the model's beyond the data: the
 * workers are chosen again at the kept count, where the hold judges the
 * current workers (the model's workers go with its PS count). */
static void ps_edge_keep(struct counts *c, const struct ps_edge *e)
{
	const struct rv_alg_job_state *st = c->st;

	if (!ps_measured(st, st->cur.ps.count))
		return;
	rv_alg_reason_add(c->out,
			  "PS count kept at %d: the model's %d lies beyond the measured ones, "
			  "and %d -> %d PS measured %+.0f%%",
			  st->cur.ps.count, e->pc, e->from, e->edge, 100 * e->paid);
	struct rv_alg_limits klim = st->lim;
	struct rv_alg_decision kept;

	klim.min_ps = klim.max_ps = st->cur.ps.count;
	if (rv_alg_choose_workers_obs(&c->fit, st->speed, st->n_speed, &klim, &st->cur, c->p,
				      &kept) == 0) {
		c->part.cfg.worker.count = kept.cfg.worker.count;
		c->part.predicted_speed = kept.predicted_speed;
	}
	c->part.cfg.ps.count = st->cur.ps.count;
	c->part.changed = c->part.cfg.worker.count != st->cur.worker.count;
}

/* COUNT_PS_EDGE: the model's PS count at or beyond the edge of the measured
 * ones is measured a step further, kept, or taken (rv_alg_ps_edge_step):
 * the model is not trusted beyond its data, and a direction whose last
 * measured step paid beyond the noise is followed one step further. */
static enum count_step count_ps_edge(struct counts *c)
{
	const struct rv_alg_job_state *st = c->st;
	struct ps_edge e;

	if (!c->trusted || st->strategy != RV_ALG_PS || c->fit.n_ps_values < 2 ||
	    c->part.cfg.ps.count <= 0)
		return COUNT_NEXT;
	ps_edge_read(c, &e);
	bool measured = ps_measured(st, e.pn);
	struct rv_alg_config trial = st->cur;
	trial.worker.count = e.wc;
	trial.ps.count = e.pn;
	int edge_step = rv_alg_ps_edge_step(e.pc, e.lo, e.hi, st->cur.ps.count, e.gain, e.paid,
					    c->p->min_gain);
	if (!c->spent && e.pn != e.pc && !measured && edge_step > 0 &&
	    rv_alg_fits_free(&st->lim, &st->cur, &trial)) {
		counts_explore_ps(c, e.wc, e.pn);
		rv_alg_reason_add(c->out,
				  "exploring the PS count beyond the measured ones: %d -> %d PS "
				  "with %d workers (the model predicts %+.0f%%, but not from data "
				  "at %d PS; %d -> %d PS measured %+.0f%%)",
				  st->cur.ps.count, e.pn, e.wc, 100 * e.gain, e.pn, e.from, e.edge,
				  100 * e.paid);
		take_lead(c->rank, c->lead, LEAD_COUNT, RV_ALG_ID_EXPLORE);
		return COUNT_DONE;
	}
	if (edge_step < 0)
		ps_edge_keep(c, &e);
	return COUNT_NEXT;
}

/* The stages of plan_counts, in order; the first that says COUNT_DONE has
 * decided the counts (or kept them). */
static const struct count_rule {
	enum count_rule_id {
		COUNT_TRUST,
		COUNT_CHOOSE,
		COUNT_FAILED,
		COUNT_THIRD_PS,
		COUNT_PS_ONE,
		COUNT_PS_EDGE,
	} id;
	enum count_step (*apply)(struct counts *c);
} count_rules[] = {
	{ COUNT_TRUST, count_trust },   { COUNT_CHOOSE, count_choose },
	{ COUNT_FAILED, count_failed }, { COUNT_THIRD_PS, count_third_ps },
	{ COUNT_PS_ONE, count_ps_one }, { COUNT_PS_EDGE, count_ps_edge },
};

static void plan_counts(const struct rv_alg_job_state *st, const struct rv_alg_params *p,
			struct rv_alg_config *cfg, struct rv_alg_decision *out,
			enum lead_rank *rank, enum rv_alg_id *lead)
{
	struct counts c = {
		.st = st,
		.p = p,
		.cfg = cfg,
		.out = out,
		.rank = rank,
		.lead = lead,
	};

	for (size_t i = 0; i < sizeof(count_rules) / sizeof(count_rules[0]); i++)
		if (count_rules[i].apply(&c) == COUNT_DONE)
			return;
	cfg->worker.count = c.part.cfg.worker.count;
	cfg->ps.count = c.part.cfg.ps.count;
	out->predicted_speed = c.part.predicted_speed;
	out->fit_r2 = c.fit.r2;
	out->fit_configs = c.fit.n_configs;
	rv_alg_reason_add(out, "%s", c.part.reason);
	if (c.part.changed)
		take_lead(rank, lead, LEAD_COUNT, c.part.algorithm);
}

/* How much a starved role's CPU grows (rv_alg_starved_cpu, with the base
 * margin): the role behind it follows by as much. */
static double starved_growth(const struct rv_alg_job_state *st, const struct rv_alg_params *p,
			     enum rv_alg_role role)
{
	double cpu = role == RV_ALG_PS_ROLE ? st->cur.ps.res.cpu : st->cur.worker.res.cpu;
	return cpu > 0 ? rv_alg_starved_cpu(st->usage, st->n_usage, role, cpu, p->cpu_margin, p) /
				 cpu
		       : p->starved_factor;
}

/* The factor over the fitted peak a PS's memory at a new PS count gets:
 * the one its usage at the current count asks over the fitted peak there
 * (the window's peak plus its measured spread and trend, as right-sizing
 * reads it, free of the hysteresis band), at least mem_margin_min; a flat
 * mem_margin when usage says nothing.  A flat 10% held steady PS memory a
 * tenth over its need and was trimmed a plan later.  DESIGN-LOG.md,
 * "Right-sizing", PS memory at a new count. */
static double ps_mem_margin(const struct rv_alg_job_state *st, const struct rv_alg_params *p)
{
	struct rv_alg_resource from = st->cur.ps.res, want;
	double at_cur = st->ps_mem_a / st->cur.ps.count + st->ps_mem_b;

	from.memory_mb = 0; /* below the peak: raised to the need at once */
	if (!(at_cur > 0) ||
	    rv_alg_rightsize_trend(st->usage, st->n_usage, st->mem_usage, st->n_mem_usage,
				   RV_ALG_PS_ROLE, &from, NULL, st->now_ms, &st->lim, p, 0,
				   &want) < 0 ||
	    want.memory_mb <= 0)
		return 1 + p->mem_margin;
	double f = (double)want.memory_mb / at_cur;

	return f > 1 + p->mem_margin_min ? f : 1 + p->mem_margin_min;
}

static void plan_rightsize(const struct rv_alg_job_state *st, const struct rv_alg_params *p,
			   enum rv_alg_role role, int keep_cpu, int no_shrink, double behind,
			   struct rv_alg_config *cfg, struct rv_alg_decision *out,
			   enum lead_rank *rank, enum rv_alg_id *lead)
{
	struct rv_alg_group *g = role == RV_ALG_PS_ROLE ? &cfg->ps : &cfg->worker;
	struct rv_alg_resource next;

	if (g->count <= 0)
		return;
	int rc = rv_alg_rightsize_trend(st->usage, st->n_usage, st->mem_usage, st->n_mem_usage,
					role, &g->res, &st->last_resize[role], st->now_ms, &st->lim,
					p, behind, &next);

	if (rc < 0)
		return;
	if (keep_cpu)
		next.cpu = g->res.cpu;
	/* Usage measured behind a bottleneck elsewhere understates the need. */
	if (no_shrink && next.cpu < g->res.cpu)
		next.cpu = g->res.cpu;
	/* Usage was measured at the current counts; a PS serves workers/PS of
	 * the load, so its CPU (and the model share in its memory) follow the
	 * new ratio. */
	if (role == RV_ALG_PS_ROLE && st->cur.ps.count > 0 && cfg->ps.count > 0 &&
	    st->cur.worker.count > 0) {
		double load = ((double)cfg->worker.count / cfg->ps.count) /
			      ((double)st->cur.worker.count / st->cur.ps.count);
		double share = (double)st->cur.ps.count / cfg->ps.count;

		if (fabs(load - 1) > 1e-9 && !keep_cpu)
			next.cpu = rv_alg_cpu_up(next.cpu * load);
		/* measured at two PS counts: the need at the new one follows */
		if (st->ps_mem_fit && fabs(share - 1) > 1e-9)
			next.memory_mb = (int64_t)rv_alg_mb_up(
				(st->ps_mem_a / cfg->ps.count + st->ps_mem_b) *
				ps_mem_margin(st, p));
		else if (share > 1 + 1e-9)
			next.memory_mb = (int64_t)rv_alg_mb_up((double)next.memory_mb * share);
		/* more PS: each holds less of the model, but a fixed part of a
		 * PS's memory (runtime, buffers) does not divide: assume
		 * ps_mem_fixed (0.1) of it does not (with the 10% memory margin on
		 * top: up to a fifth), so a return to a PS count
		 * measured before needs no trim plan, and no OOM. */
		else if (share < 1 - 1e-9 && next.memory_mb >= g->res.memory_mb * share)
			next.memory_mb = (int64_t)rv_alg_mb_up(
				(double)g->res.memory_mb * (share + (1 - share) * p->ps_mem_fixed));
	}

	struct rv_alg_config trial = *cfg;
	struct rv_alg_group *tg = role == RV_ALG_PS_ROLE ? &trial.ps : &trial.worker;

	tg->res = next;
	if (!rv_alg_fits_free(&st->lim, &st->cur, &trial)) {
		rv_alg_reason_add(out,
				  "right-sizing %s to %.1f CPU %" PRId64 " MiB does not fit "
				  "the cluster's free capacity",
				  role_name(role), next.cpu, next.memory_mb);
		return;
	}
	if (next.cpu == g->res.cpu && next.memory_mb == g->res.memory_mb)
		return;
	rv_alg_reason_add(out,
			  "right-size %s: CPU %.1f -> %.1f, memory %" PRId64 " -> %" PRId64
			  " MiB (p%.0f of usage + margin)",
			  role_name(role), g->res.cpu, next.cpu, g->res.memory_mb, next.memory_mb,
			  100 * p->usage_quantile);
	g->res = next;
	take_lead(rank, lead, LEAD_RIGHTSIZE, RV_ALG_ID_RIGHTSIZE);
}

/* Fewer PS each hold more of the model: a PS count whose PS would need
 * more memory than a node has is no configuration at all.  The count is
 * raised to the fewest whose PS fit (the need at a count from the fit of
 * a / count + b when there is one, else the memory given now scaled by the
 * share, as if all of it divided). */
static void fit_ps_on_node(const struct rv_alg_job_state *st, const struct rv_alg_params *p,
			   struct rv_alg_config *cfg, struct rv_alg_decision *out)
{
	int from = cfg->ps.count, cur = st->cur.ps.count;

	if (st->lim.max_memory_mb <= 0 || from <= 0 || cur <= 0 || from >= cur)
		return;
	int c = from;
	for (; c < cur; c++) {
		double need = st->ps_mem_fit
				      ? (st->ps_mem_a / c + st->ps_mem_b) * (1 + p->mem_margin)
				      : (double)st->cur.ps.res.memory_mb * cur / c;
		if (need <= (double)st->lim.max_memory_mb)
			break;
	}
	if (c == from)
		return;
	cfg->ps.count = c;
	rv_alg_reason_add(out, "%d PS, not %d: fewer would each need more memory than a node has",
			  c, from);
}

/* A plan that changes the counts restarts the job anyway: memory that
 * rises and would pass its limit within the two usage windows a growth is
 * sized for grows in it to where it will be two windows ahead, rather than
 * in a plan of its own when it nears the limit (a PS only at an unchanged
 * PS count: its share of the model follows the count).  Folded only when
 * it would pass the limit within one window, a limit sized at an earlier
 * restart that the rise passed a window later took a growth plan of its
 * own near the end of the rise (and, the rise then ending, a trim). */
static void fold_rising_memory(const struct rv_alg_job_state *st, const struct rv_alg_params *p,
			       struct rv_alg_config *cfg, struct rv_alg_decision *out)
{
	for (int r = 0; r < 2; r++) {
		enum rv_alg_role role = r ? RV_ALG_PS_ROLE : RV_ALG_WORKER;
		struct rv_alg_group *g = r ? &cfg->ps : &cfg->worker;
		double in_two;

		if (g->count <= 0 || (r && cfg->ps.count != st->cur.ps.count))
			continue;
		double target = rv_alg_mem_rise_target(st->usage, st->n_usage, st->mem_usage,
						       st->n_mem_usage, role, p,
						       2 * (double)p->usage_window_ms, &in_two);
		if (in_two <= (double)g->res.memory_mb)
			continue;
		if (st->lim.max_memory_mb > 0 && target > (double)st->lim.max_memory_mb)
			target = (double)st->lim.max_memory_mb;
		if (!(target > (double)g->res.memory_mb * (1 + p->hysteresis)))
			continue;
		struct rv_alg_config trial = *cfg;
		(r ? &trial.ps : &trial.worker)->res.memory_mb = (int64_t)target;
		if (!rv_alg_fits_free(&st->lim, &st->cur, &trial))
			continue;
		rv_alg_reason_add(out,
				  "%s memory rises: %" PRId64 " -> %.0f MiB with this restart "
				  "(where it will be two usage windows ahead)",
				  role_name(role), g->res.memory_mb, target);
		g->res.memory_mb = (int64_t)target;
	}
}

/* A job's resources in cores, memory counted at the node's memory per core
 * (a documented 4 GiB per core when no node size is known). */
static double config_cost(const struct rv_alg_config *c, const struct rv_alg_limits *lim)
{
	double mb_per_core = lim->max_cpu > 0 && lim->max_memory_mb > 0
				     ? (double)lim->max_memory_mb / lim->max_cpu
				     : 4096.0;
	double cost = 0;
	const struct rv_alg_group *g[2] = { &c->worker, &c->ps };

	for (int i = 0; i < 2; i++)
		if (g[i]->count > 0)
			cost += g[i]->count *
				(g[i]->res.cpu + (double)g[i]->res.memory_mb / mb_per_core);
	return cost;
}

/* Whether next only shrinks resources of cur (same counts, no role grows). */
static bool shrink_only(const struct rv_alg_config *cur, const struct rv_alg_config *next)
{
	const struct rv_alg_group *a[2] = { &cur->worker, &cur->ps };
	const struct rv_alg_group *b[2] = { &next->worker, &next->ps };

	for (int i = 0; i < 2; i++)
		if (a[i]->count != b[i]->count || b[i]->res.cpu > a[i]->res.cpu ||
		    b[i]->res.memory_mb > a[i]->res.memory_mb)
			return false;
	return true;
}

/* Whether every speed measured is of the current configuration. */
static bool one_config(const struct rv_alg_job_state *st)
{
	size_t k = 0;

	for (size_t i = 0; i < st->n_speed; i++) {
		if (!(st->speed[i].speed > 0))
			continue;
		if (st->speed[i].workers != st->cur.worker.count ||
		    st->speed[i].ps != st->cur.ps.count)
			return false;
		k++;
	}
	return k > 0;
}

/* One running plan (rv_alg_plan_running): the parts in running_parts[]
 * each read and refine it in turn; why each exists:
 * algorithms/DESIGN-LOG.md, "The running plan". */
struct running {
	const struct rv_alg_job_state *st;
	const struct rv_alg_params *p;
	struct rv_alg_decision *out;
	struct rv_alg_config cfg; /* the plan's configuration */
	enum lead_rank rank;      /* the leading part so far, and its name */
	enum rv_alg_id lead;
	bool starved_w, starved_ps;
	int hot, grow; /* rv_alg_hot_ps: hot PS to migrate; PS saturated */
	struct rv_alg_decision hot_part;
	int ns; /* stragglers found */
};

/* Whether a role is starved and could grow (not at the per-node CPU
 * ceiling: nothing would change by waiting for it). */
static bool run_role_starved(const struct running *r, enum rv_alg_role role,
			     const struct rv_alg_resource *res)
{
	const struct rv_alg_job_state *st = r->st;

	return rv_alg_role_starved(st->usage, st->n_usage, role, res, r->p) &&
	       !(st->lim.max_cpu > 0 && res->cpu >= st->lim.max_cpu);
}

/* RUN_STARVED: which roles are starved.  Two roles that hold each other
 * back share the throttling: both at two thirds of throttle_starved or
 * more, one in at least half its periods, both count as starved. */
static void run_starved(struct running *r)
{
	const struct rv_alg_job_state *st = r->st;
	const struct rv_alg_params *p = r->p;

	r->starved_w = run_role_starved(r, RV_ALG_WORKER, &st->cur.worker.res);
	r->starved_ps = st->cur.ps.count > 0 &&
			run_role_starved(r, RV_ALG_PS_ROLE, &st->cur.ps.res);
	if (st->strategy != RV_ALG_PS || st->cur.ps.count <= 0 || r->starved_w || r->starved_ps ||
	    !(p->throttle_starved > 0) ||
	    (st->lim.max_cpu > 0 &&
	     (st->cur.worker.res.cpu >= st->lim.max_cpu || st->cur.ps.res.cpu >= st->lim.max_cpu)))
		return;
	size_t ms = (size_t)(p->min_usage_samples > 0 ? p->min_usage_samples : 1);
	double sw, sp;

	if (rv_alg_throttled_share(st->usage, st->n_usage, RV_ALG_WORKER, -1, ms, &sw) == 0 &&
	    rv_alg_throttled_share(st->usage, st->n_usage, RV_ALG_PS_ROLE, -1, ms, &sp) == 0 &&
	    sw >= p->throttle_starved * 2 / 3 && sp >= p->throttle_starved * 2 / 3 &&
	    (sw >= 0.5 || sp >= 0.5)) {
		r->starved_w = r->starved_ps = true;
		rv_alg_reason_add(r->out,
				  "workers and PS both throttled (%.0f%%, %.0f%% of periods)",
				  100 * sw, 100 * sp);
	}
}

/* RUN_HOT_PS: hot PS to migrate and saturated PS (rv_alg_hot_ps); PS that
 * cannot be added to (max PS, free capacity) are no reason to wait. */
static void run_hot_ps(struct running *r)
{
	const struct rv_alg_job_state *st = r->st;

	rv_alg_decision_init(&r->hot_part, &st->cur);
	if (st->strategy == RV_ALG_PS && st->cur.ps.count > 0)
		r->hot = rv_alg_hot_ps(st->usage, st->n_usage, &st->cur.ps, &st->lim, r->p,
				       &r->grow, &r->hot_part);
	if (!r->grow || r->hot != 0)
		return;
	struct rv_alg_config trial = st->cur;

	trial.ps.count += 1;
	if ((st->lim.max_ps > 0 && trial.ps.count > st->lim.max_ps) ||
	    !rv_alg_fits_free(&st->lim, &st->cur, &trial)) {
		r->grow = 0;
		rv_alg_reason_add(r->out, "%s; the PS count is at its limit", r->hot_part.reason);
	}
}

/* RUN_COUNTS: one cause per plan: a starved role or a hot PS distorts every
 * speed, so the counts wait for it; except the first exploration step of a
 * quiet job (noise within min_gain) measured at one configuration, which
 * carries the starved role's growth. */
static void run_counts(struct running *r)
{
	const struct rv_alg_job_state *st = r->st;
	double noise = rv_alg_speed_noise(st->speed, st->n_speed);
	bool starved = r->starved_w || r->starved_ps;

	if (starved && r->hot <= 0 && !r->grow && st->first_counts && one_config(st) && noise > 0 &&
	    noise <= r->p->min_gain) {
		rv_alg_reason_add(r->out, "CPU at its limit: the role grows with the first "
					  "exploration step");
		plan_counts(st, r->p, &r->cfg, r->out, &r->rank, &r->lead);
	} else if (starved || r->hot > 0 || r->grow)
		rv_alg_reason_add(r->out, "%s first: worker and PS counts wait",
				  starved ? "CPU at its limit" : "hot PS");
	else
		plan_counts(st, r->p, &r->cfg, r->out, &r->rank, &r->lead);
}

/* RUN_PS_SIDE: migrate hot PS; grow saturated PS by half (at least one) at
 * an unchanged PS count, up to max PS and free capacity. */
static void run_ps_side(struct running *r)
{
	const struct rv_alg_job_state *st = r->st;

	if (st->strategy != RV_ALG_PS || st->cur.ps.count <= 0)
		return;
	if (r->hot > 0) {
		r->out->n_migrate = r->hot_part.n_migrate;
		memcpy(r->out->migrate, r->hot_part.migrate, sizeof(r->out->migrate));
		rv_alg_reason_add(r->out, "%s", r->hot_part.reason);
		take_lead(&r->rank, &r->lead, LEAD_HOT_PS, RV_ALG_ID_HOT_PS);
	}
	if (!r->grow || r->cfg.ps.count != st->cur.ps.count)
		return;
	struct rv_alg_config trial = r->cfg;

	trial.ps.count += trial.ps.count / 2 > 1 ? trial.ps.count / 2 : 1;
	if (st->lim.max_ps > 0 && trial.ps.count > st->lim.max_ps &&
	    st->cur.ps.count < st->lim.max_ps)
		trial.ps.count = st->lim.max_ps;
	if ((st->lim.max_ps <= 0 || trial.ps.count <= st->lim.max_ps) &&
	    rv_alg_fits_free(&st->lim, &st->cur, &trial)) {
		r->cfg = trial;
		rv_alg_reason_add(r->out, "add a PS: %d -> %d", st->cur.ps.count, r->cfg.ps.count);
		take_lead(&r->rank, &r->lead, LEAD_HOT_PS, RV_ALG_ID_HOT_PS);
	} else {
		rv_alg_reason_add(r->out, "cannot add a PS: limit or free capacity");
	}
}

/* RUN_PS_ON_NODE: see fit_ps_on_node. */
static void run_ps_on_node(struct running *r)
{
	fit_ps_on_node(r->st, r->p, &r->cfg, r->out);
}

/* RUN_RIGHTSIZE: both roles; every starved role in one plan: a role behind
 * the bottleneck follows its growth.  A migrated hot PS keeps the CPU its
 * migration gave it. */
static void run_rightsize(struct running *r)
{
	const struct rv_alg_job_state *st = r->st;
	double behind_w = r->starved_ps ? starved_growth(st, r->p, RV_ALG_PS_ROLE) : 1;
	double behind_ps = r->starved_w ? starved_growth(st, r->p, RV_ALG_WORKER) : 1;

	plan_rightsize(st, r->p, RV_ALG_WORKER, 0, r->starved_ps, behind_w, &r->cfg, r->out,
		       &r->rank, &r->lead);
	plan_rightsize(st, r->p, RV_ALG_PS_ROLE, r->hot > 0, r->starved_w, behind_ps, &r->cfg,
		       r->out, &r->rank, &r->lead);
}

/* RUN_RISING_MEMORY: see fold_rising_memory; only with a restart for the
 * counts. */
static void run_rising_memory(struct running *r)
{
	if (r->cfg.worker.count != r->st->cur.worker.count ||
	    r->cfg.ps.count != r->st->cur.ps.count)
		fold_rising_memory(r->st, r->p, &r->cfg, r->out);
}

/* RUN_STRAGGLERS: slow workers to replace (rv_alg_stragglers). */
static void run_stragglers(struct running *r)
{
	const struct rv_alg_params *p = r->p;
	struct rv_alg_decision *out = r->out;

	r->ns = rv_alg_stragglers(r->st->steps, r->st->n_steps, p, out->replace, RV_ALG_MAX_NODES);
	if (r->ns <= 0)
		return;
	out->n_replace = (size_t)r->ns < RV_ALG_MAX_NODES ? (size_t)r->ns : RV_ALG_MAX_NODES;
	take_lead(&r->rank, &r->lead, LEAD_STRAGGLER, RV_ALG_ID_STRAGGLER);
	rv_alg_reason_add(out,
			  "%d straggler%s to replace (%s time >= %.1fx median, robust z > "
			  "%.0f), first: worker %d",
			  r->ns, r->ns > 1 ? "s" : "",
			  rv_alg_stragglers_by_compute(r->st->steps, r->st->n_steps) ? "compute"
										     : "step",
			  p->straggler_ratio, p->straggler_z, out->replace[0]);
}

/* RUN_MIN_SAVING: a restart that only shrinks resources and saves under
 * min_saving of the job's resources is not worth a plan. */
static void run_min_saving(struct running *r)
{
	const struct rv_alg_job_state *st = r->st;
	const struct rv_alg_params *p = r->p;

	if (r->ns > 0 || r->hot > 0 || !(p->min_saving > 0) ||
	    rv_alg_config_equal(&r->cfg, &st->cur) || !shrink_only(&st->cur, &r->cfg))
		return;
	double before = config_cost(&st->cur, &st->lim);
	double saving = before > 0 ? 1 - config_cost(&r->cfg, &st->lim) / before : 0;

	if (saving < p->min_saving) {
		rv_alg_reason_add(r->out,
				  "held: right-sizing would save %.1f%% of the job's resources "
				  "(< %.0f%%), not worth a restart",
				  100 * saving, 100 * p->min_saving);
		r->cfg = st->cur;
		r->lead = RV_ALG_ID_HOLD;
	}
}

/* The parts of a running plan, in order. */
static const struct running_part {
	enum running_part_id {
		RUN_STARVED,
		RUN_HOT_PS,
		RUN_COUNTS,
		RUN_PS_SIDE,
		RUN_PS_ON_NODE,
		RUN_RIGHTSIZE,
		RUN_RISING_MEMORY,
		RUN_STRAGGLERS,
		RUN_MIN_SAVING,
	} id;
	void (*apply)(struct running *r);
} running_parts[] = {
	{ RUN_STARVED, run_starved },
	{ RUN_HOT_PS, run_hot_ps },
	{ RUN_COUNTS, run_counts },
	{ RUN_PS_SIDE, run_ps_side },
	{ RUN_PS_ON_NODE, run_ps_on_node },
	{ RUN_RIGHTSIZE, run_rightsize },
	{ RUN_RISING_MEMORY, run_rising_memory },
	{ RUN_STRAGGLERS, run_stragglers },
	{ RUN_MIN_SAVING, run_min_saving },
};

int rv_alg_plan_running(const struct rv_alg_job_state *st, const struct rv_alg_params *p,
			struct rv_alg_decision *out)
{
	if (!st || !p || !out || (st->n_speed && !st->speed) || (st->n_usage && !st->usage) ||
	    (st->n_steps && !st->steps) || st->cur.worker.count < 0 || st->cur.ps.count < 0)
		return -EINVAL;
	rv_alg_decision_init(out, &st->cur);
	struct running r = {
		.st = st,
		.p = p,
		.out = out,
		.cfg = st->cur,
		.rank = LEAD_NONE,
		.lead = RV_ALG_ID_HOLD,
	};

	for (size_t i = 0; i < sizeof(running_parts) / sizeof(running_parts[0]); i++)
		running_parts[i].apply(&r);
	out->cfg = r.cfg;
	out->algorithm = r.lead;
	out->changed = !rv_alg_config_equal(&r.cfg, &st->cur) || out->n_migrate > 0 ||
		       out->n_replace > 0;
	if (!out->changed && out->reason[0] == '\0')
		rv_alg_reason_add(out, "no change");
	return 0;
}

int rv_alg_plan_oom(const struct rv_alg_config *cur, enum rv_alg_role role, int64_t peak_mb,
		    int oom_count, const struct rv_alg_limits *lim, const struct rv_alg_params *p,
		    struct rv_alg_decision *out)
{
	if (!cur || !lim || !p || !out || (role != RV_ALG_WORKER && role != RV_ALG_PS_ROLE))
		return -EINVAL;
	rv_alg_decision_init(out, cur);

	struct rv_alg_group *g = role == RV_ALG_PS_ROLE ? &out->cfg.ps : &out->cfg.worker;
	int64_t prev = g->res.memory_mb, next;
	int rc = rv_alg_oom_memory(prev, peak_mb, oom_count, lim, p, &next);

	if (rc < 0)
		return rc;
	out->algorithm = RV_ALG_ID_OOM;
	if (rc == 0) {
		rv_alg_reason_add(out,
				  "OOM #%d of a %s: memory %" PRId64 " MiB is already at the "
				  "cap",
				  oom_count, role_name(role), prev);
		return 0;
	}
	g->res.memory_mb = next;
	out->changed = true;
	rv_alg_reason_add(out,
			  "OOM #%d of a %s: memory %" PRId64 " -> %" PRId64 " MiB (x%.1f step"
			  "%s)",
			  oom_count, role_name(role), prev, next, rv_alg_oom_step(p, oom_count),
			  peak_mb > 0 ? ", above the observed peak" : "");
	return 0;
}
