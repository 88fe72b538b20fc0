/*
 * workers.c: worker (and PS) count from a fitted throughput model, and the
 * exploration that gathers distinct configs before a model can be trusted.
 * The rule in both: a node is worth adding while it buys at least min_gain
 * relative speed; a flat curve therefore never grows.  Used by plan.c; pure.
 */
#include <errno.h>
#include <math.h>

#include "alg_internal.h"

/* Upper bound on workers when the job gives none. */
#define WORKERS_HARD_MAX 4096
/* Upper bound on PS when the job gives none. */
#define PS_HARD_MAX 256

static int unit_of(const struct rv_alg_limits *lim)
{
	return lim->node_unit > 0 ? lim->node_unit : 1;
}

static int max_workers_of(const struct rv_alg_limits *lim)
{
	int hi = lim->max_workers > 0 ? lim->max_workers : WORKERS_HARD_MAX;

	return alg_align_down(hi, unit_of(lim));
}

static double pct(double a, double b)
{
	return b > 0 ? 100.0 * (a / b - 1) : 0;
}

int rv_alg_choose_workers(const struct rv_alg_fit *fit, const struct rv_alg_limits *lim,
			  const struct rv_alg_config *cur, const struct rv_alg_params *p,
			  struct rv_alg_decision *out)
{
	if (!fit || !lim || !cur || !p || !out)
		return -EINVAL;
	alg_decision_init(out, cur);

	int unit = unit_of(lim), wmax = max_workers_of(lim);
	int async = fit->model == RV_ALG_MODEL_ASYNC;
	struct rv_alg_config c = *cur;

	c.worker.count = alg_clamp_workers(lim->min_workers, lim);
	if (async) {
		int pmin = lim->min_ps > 0 ? lim->min_ps : 1;

		c.ps.count = pmin;
	}
	for (int guard = 0; guard < 2 * WORKERS_HARD_MAX; guard++) {
		double f = rv_alg_fit_predict(fit, c.worker.count, c.ps.count);
		double gw = -INFINITY, gp = -INFINITY;
		struct rv_alg_config cw = c, cp = c;

		if (!(f > 0))
			break;
		cw.worker.count += unit;
		if (cw.worker.count <= wmax && alg_fits_free(lim, cur, &cw))
			gw = (rv_alg_fit_predict(fit, cw.worker.count, cw.ps.count) / f - 1) / unit;
		cp.ps.count += 1;
		if (async && cp.ps.count <= (lim->max_ps > 0 ? lim->max_ps : PS_HARD_MAX) &&
		    alg_fits_free(lim, cur, &cp))
			gp = rv_alg_fit_predict(fit, cp.worker.count, cp.ps.count) / f - 1;
		if (gw < p->min_gain && gp < p->min_gain)
			break;
		c = gw >= gp ? cw : cp;
	}

	double fcur = rv_alg_fit_predict(fit, cur->worker.count, cur->ps.count);

	out->cfg = c;
	out->predicted_speed = rv_alg_fit_predict(fit, c.worker.count, c.ps.count);
	out->fit_r2 = fit->r2;
	out->fit_configs = fit->n_configs;
	if (c.worker.count == cur->worker.count && c.ps.count == cur->ps.count) {
		alg_reason_add(out, "throughput model: %d workers%s is the point of diminishing "
			       "returns (< %.0f%% per added node); fit r2=%.2f from %d configs",
			       c.worker.count, async ? " and current PS" : "", 100 * p->min_gain,
			       fit->r2, fit->n_configs);
		return 0;
	}
	out->changed = true;
	out->algorithm = "worker_count_model";
	if (async)
		alg_reason_add(out, "throughput model predicts %+.0f%% samples/s with %d workers "
			       "and %d PS; fit r2=%.2f from %d configs",
			       pct(out->predicted_speed, fcur), c.worker.count, c.ps.count, fit->r2,
			       fit->n_configs);
	else
		alg_reason_add(out, "throughput model predicts %+.0f%% samples/s with %d workers; "
			       "fit r2=%.2f from %d configs",
			       pct(out->predicted_speed, fcur), c.worker.count, fit->r2,
			       fit->n_configs);
	return 0;
}

/* Mean observed speed at (w, ps); 0 when never observed. */
static double mean_speed(const struct rv_alg_speed_obs *obs, size_t n, int w, int ps)
{
	double sum = 0;
	int k = 0;

	for (size_t i = 0; i < n; i++)
		if (obs[i].workers == w && obs[i].ps == ps && obs[i].speed > 0) {
			sum += obs[i].speed;
			k++;
		}
	return k ? sum / k : 0;
}

int rv_alg_explore(const struct rv_alg_speed_obs *obs, size_t n, const struct rv_alg_limits *lim,
		   const struct rv_alg_config *cur, const struct rv_alg_params *p,
		   struct rv_alg_decision *out)
{
	if ((n > 0 && !obs) || !lim || !cur || !p || !out)
		return -EINVAL;
	alg_decision_init(out, cur);

	int unit = unit_of(lim), wmax = max_workers_of(lim);
	int w = cur->worker.count, ps = cur->ps.count;
	double s_cur = mean_speed(obs, n, w, ps);

	if (!(s_cur > 0)) {
		alg_reason_add(out, "no speed observed yet with %d workers", w);
		return 0;
	}
	out->predicted_speed = s_cur;

	/* the last growth: the largest measured smaller config */
	int prev = 0;

	for (size_t i = 0; i < n; i++)
		if (obs[i].ps == ps && obs[i].workers < w && obs[i].workers > prev &&
		    obs[i].speed > 0)
			prev = obs[i].workers;
	if (prev > 0) {
		double s_prev = mean_speed(obs, n, prev, ps);
		double gain = (s_cur / s_prev - 1) / (w - prev);

		if (gain < p->min_gain) {
			if (s_prev >= s_cur && prev >= alg_clamp_workers(lim->min_workers, lim)) {
				out->cfg.worker.count = prev;
				out->predicted_speed = s_prev;
				out->changed = true;
				out->algorithm = "explore";
				alg_reason_add(out, "growth from %d to %d workers changed samples/s "
					       "by %+.0f%%; returning to %d workers",
					       prev, w, pct(s_cur, s_prev), prev);
			} else {
				alg_reason_add(out, "exploration stopped: growth from %d to %d "
					       "workers gained %+.1f%% per added worker (< %.0f%%)",
					       prev, w, 100 * gain, 100 * p->min_gain);
			}
			return 0;
		}
	}

	int target = (int)ceil(w * p->explore_factor - 1e-9);

	if (target < w + unit)
		target = w + unit;
	target = alg_align_up(target, unit);
	if (target > wmax)
		target = wmax;
	for (; target > w; target -= unit) {
		struct rv_alg_config next = *cur;

		next.worker.count = target;
		if (alg_fits_free(lim, cur, &next))
			break;
	}
	if (target <= w) {
		alg_reason_add(out, "exploration holds at %d workers: %s", w,
			       w >= wmax ? "maximum replicas reached" : "no free cluster capacity");
		return 0;
	}
	/* never go (back) to a larger config already measured not worth it */
	for (size_t i = 0; i < n; i++) {
		int wi = obs[i].workers;

		if (obs[i].ps != ps || wi <= w || wi > target || !(obs[i].speed > 0))
			continue;
		double gain = (mean_speed(obs, n, wi, ps) / s_cur - 1) / (wi - w);

		if (gain < p->min_gain) {
			alg_reason_add(out, "exploration holds at %d workers: %d workers measured "
				       "%+.1f%% per added worker (< %.0f%%)",
				       w, wi, 100 * gain, 100 * p->min_gain);
			return 0;
		}
	}
	out->cfg.worker.count = target;
	out->changed = true;
	out->algorithm = "explore";
	alg_reason_add(out, "exploring: %d -> %d workers to measure scaling; not enough "
		       "distinct configs for a trusted throughput model yet", w, target);
	return 0;
}
