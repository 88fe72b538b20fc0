/*
 * confidence.c: the one rule every count move of the running stage passes.
 * A move rests on a fitted throughput model and on measured means, and both
 * carry the job's speed noise.  It is taken only when the fit explains the
 * speeds beyond their noise (it beats "speed is flat" by more than noise
 * alone would) and its predicted gain exceeds its uncertainty (the standard
 * errors of the current mean and of the prediction at the new counts).
 * Used by plan.c; pure and reentrant.
 */
#include <errno.h>
#include <math.h>

#include "alg_internal.h"

/*
 * The terms of the fit the data can tell apart: no more than its distinct
 * configurations, and at one PS count the PS model w/f = t0 + t3 p +
 * (t1/p + t2) w is a line in w: two.  Noise lets a fit win only by the
 * terms it can move independently.  Counted as n_theta (four) a PS job at
 * one PS count needed three times the evidence of an all-reduce job: fits
 * the data showed clearly (F 6-7 per term) read as 2.1-2.5, the job went
 * back to bisecting workers at that PS count instead of measuring another,
 * and stayed at two PS where one was best (h8-ps-few-noise-0, 0.84 of the
 * oracle's speed) or settled low on noisy means (h9-ps-many-noise, 0.89).
 */
static int fit_terms(const struct rv_alg_fit *fit)
{
	int k = fit->n_theta;

	if (fit->n_configs < k)
		k = fit->n_configs;
	if (fit->model == RV_ALG_MODEL_ASYNC && fit->n_ps_values == 1 && k > 2)
		k = 2;
	return k;
}

/*
 * How far the fit beats a flat speed, in units of the noise: the F ratio
 * (SS_flat - SS_fit) / (terms - 1) / noise^2 over relative errors, where
 * SS_flat is the spread of the observations around their mean, SS_fit
 * around the fit, and terms those the data can tell apart (fit_terms).
 * Noise alone lets a fit with terms - 1 more than a constant win by about
 * noise^2 per term; a curve the data shows wins by many times that.
 * INFINITY when no noise is measured (a quiet job, one observation per
 * configuration).
 */
static double fit_evidence(const struct rv_alg_fit *fit, const struct rv_alg_speed_obs *obs,
			   size_t n, double noise)
{
	double sum = 0, ss_flat = 0, ss_fit = 0;
	int k = 0;

	if (!(noise > 0))
		return INFINITY;
	for (size_t i = 0; i < n; i++)
		if (obs[i].speed > 0 && rv_alg_fit_predict(fit, obs[i].workers, obs[i].ps) > 0) {
			sum += obs[i].speed;
			k++;
		}
	if (k < 2 || fit_terms(fit) < 2)
		return 0;
	double mean = sum / k;

	for (size_t i = 0; i < n; i++) {
		double f = obs[i].speed > 0 ? rv_alg_fit_predict(fit, obs[i].workers, obs[i].ps)
					    : 0;

		if (!(f > 0))
			continue;
		ss_flat += (obs[i].speed / mean - 1) * (obs[i].speed / mean - 1);
		ss_fit += (obs[i].speed / f - 1) * (obs[i].speed / f - 1);
	}
	return (ss_flat - ss_fit) / (fit_terms(fit) - 1) / (noise * noise);
}

/* Relative standard error of the speed at (w, ps): of its measured mean
 * where measured at least twice, else of the fit's prediction. */
static double speed_rse(const struct rv_alg_fit *fit, const struct rv_alg_speed_obs *obs, size_t n,
			int w, int ps, double noise)
{
	int k = rv_alg_obs_count(obs, n, w, ps, 0);

	if (k >= 2)
		return noise / sqrt((double)k);
	return rv_alg_fit_predict_rse(fit, obs, n, w, ps, noise);
}

/* Speed at (w, ps): the measured mean where measured at least twice, else
 * the fit's prediction. */
static double speed_at(const struct rv_alg_fit *fit, const struct rv_alg_speed_obs *obs, size_t n,
		       int w, int ps)
{
	if (rv_alg_obs_count(obs, n, w, ps, 2) >= 2)
		return rv_alg_mean_speed(obs, n, w, ps);
	return rv_alg_fit_predict(fit, w, ps);
}

/* Whether next's worker or PS count lies outside the range of the
 * measured ones. */
static bool beyond_data(const struct rv_alg_speed_obs *obs, size_t n,
			const struct rv_alg_config *next)
{
	int wlo = 0, whi = 0, plo = 0, phi = 0;

	for (size_t i = 0; i < n; i++) {
		if (!(obs[i].speed > 0))
			continue;
		if (!wlo || obs[i].workers < wlo)
			wlo = obs[i].workers;
		if (obs[i].workers > whi)
			whi = obs[i].workers;
		if (!plo || obs[i].ps < plo)
			plo = obs[i].ps;
		if (obs[i].ps > phi)
			phi = obs[i].ps;
	}
	return next->worker.count < wlo || next->worker.count > whi ||
	       (next->ps.count > 0 && (next->ps.count < plo || next->ps.count > phi));
}

bool rv_alg_fit_explains(const struct rv_alg_fit *fit, const struct rv_alg_speed_obs *obs, size_t n,
			 const struct rv_alg_params *p, double *evidence)
{
	double f = fit_evidence(fit, obs, n, rv_alg_speed_noise(obs, n));

	if (evidence)
		*evidence = f;
	return !(p->fit_evidence_f > 0) || f >= p->fit_evidence_f;
}

int rv_alg_move_confidence(const struct rv_alg_fit *fit, const struct rv_alg_speed_obs *obs,
			   size_t n, const struct rv_alg_config *cur,
			   const struct rv_alg_config *next, const struct rv_alg_params *p,
			   struct rv_alg_confidence *c)
{
	if (!fit || (n && !obs) || !cur || !next || !p || !c)
		return -EINVAL;
	*c = (struct rv_alg_confidence){ 0 };
	double noise = rv_alg_speed_noise(obs, n);
	double s0 = speed_at(fit, obs, n, cur->worker.count, cur->ps.count);
	double s1 = speed_at(fit, obs, n, next->worker.count, next->ps.count);

	if (!(s0 > 0) || !(s1 > 0))
		return -ENODATA;
	double se0 = speed_rse(fit, obs, n, cur->worker.count, cur->ps.count, noise);
	double se1 = speed_rse(fit, obs, n, next->worker.count, next->ps.count, noise);

	c->gain = s1 / s0 - 1;
	c->se = sqrt(se0 * se0 + se1 * se1);
	c->explains = rv_alg_fit_explains(fit, obs, n, p, &c->evidence);
	/* A move to more nodes must buy more speed than its uncertainty.  A
	 * move to fewer saves resources for sure; whether the fewer still
	 * reach the line is the knee's question (its reach slack and hold
	 * band carry the noise), and a model that comes back down from an
	 * exploration step above the knee must not be held there. */
	int n0 = cur->worker.count + cur->ps.count, n1 = next->worker.count + next->ps.count;
	bool up = n1 > n0 || (n1 == n0 && c->gain >= 0);

	/* Beyond the measured counts the prediction's error says how far the
	 * model extrapolates, not how sure the move is: such a move measures
	 * new counts (the extrapolation guards bound it), and the rule asks
	 * only that the fit explain the data. */
	c->beyond_data = beyond_data(obs, n, next);
	c->confident = c->explains &&
		       (c->beyond_data || !up || c->gain > p->move_confidence_z * c->se);
	return 0;
}
