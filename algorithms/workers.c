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
#define WORKERS_HARD_MAX  4096
/* Upper bound on PS when the job gives none. */
#define PS_HARD_MAX       256
/* Share of the linear speedup a growth step must buy to pay however many
 * workers it starts from: the added workers still do half their share. */
#define LINEAR_SHARE_PAID 0.5

static int unit_of(const struct rv_alg_limits *lim)
{
	return lim->node_unit > 0 ? lim->node_unit : 1;
}

static int max_workers_of(const struct rv_alg_limits *lim)
{
	int hi = lim->max_workers > 0 ? lim->max_workers : WORKERS_HARD_MAX;

	return rv_alg_align_down(hi, unit_of(lim));
}

static double pct(double a, double b)
{
	return b > 0 ? 100.0 * (a / b - 1) : 0;
}

/*
 * Whether growing from lo to hi workers paid, from the speeds measured at
 * each: at least min_gain relative speed per added worker, or at least half
 * of the linear speedup the step could buy (hi / lo).  Linear scaling from w
 * workers gains only 1/w per added worker, so above 1/min_gain workers the
 * first test alone never reads growth as paying, even on a job whose added
 * workers still do most of their share; the second keeps such a job growing.
 * Under 1/(2 min_gain) workers the first test is the looser one and decides,
 * as before.
 */
static bool growth_paid(double s_lo, int lo, double s_hi, int hi, const struct rv_alg_params *p)
{
	if (!(s_lo > 0) || !(s_hi > 0) || lo <= 0 || hi <= lo)
		return false;
	double gain = s_hi / s_lo - 1;

	return gain / (hi - lo) >= p->min_gain || gain >= LINEAR_SHARE_PAID * (hi - lo) / lo;
}

/* Cores a configuration would hold, from the current one: workers keep their
 * per-node CPU; the PS together serve every worker, so their total CPU follows
 * the worker count whatever the PS count (nodes when CPU is not known). */
static double config_cost(const struct rv_alg_config *c, const struct rv_alg_config *cur)
{
	double w = cur->worker.res.cpu > 0 ? cur->worker.res.cpu : 1;
	double ps_total = cur->ps.count * (cur->ps.res.cpu > 0 ? cur->ps.res.cpu : 1);

	if (c->ps.count <= 0 || cur->ps.count <= 0)
		return c->worker.count * w;
	if (cur->worker.count > 0)
		ps_total *= (double)c->worker.count / cur->worker.count;
	/* per-PS rounding and overhead: a small cost per PS breaks ties */
	return c->worker.count * w + ps_total + 0.1 * c->ps.count;
}

/*
 * The knee: among the configurations within the limits (and the cluster's
 * free capacity), the one with the fewest cores whose predicted speed
 * reaches target_frac of the best predicted speed.  Growth per plan is
 * capped at max_jump times the largest measured worker count, so a fit is
 * never trusted far beyond its data; the next plan refits and goes on.
 * PS counts vary only when the data holds more than one PS count.
 */
static double mean_speed(const struct rv_alg_speed_obs *obs, size_t n, int w, int ps);
static double mean_se(const struct rv_alg_speed_obs *obs, size_t n, int w, int ps);

/* How far a measured (w, ps) may fall short of target_frac of the best and
 * still count as reaching it: knee_reach_se standard errors of the
 * difference between its mean and target_frac of the best measured mean at
 * (bw, bps) (0 for configurations measured fewer than twice).  Under noise
 * the larger of two counts that cannot be told apart is chosen only when
 * the data says so. */
static double reach_slack(const struct rv_alg_speed_obs *obs, size_t n, int w, int ps, int bw,
			  int bps, const struct rv_alg_params *p)
{
	double a = mean_se(obs, n, w, ps), b = p->target_frac * mean_se(obs, n, bw, bps);

	if (!(a > 0) || p->knee_reach_se <= 0)
		return 0;
	return p->knee_reach_se * sqrt(a * a + b * b);
}

int rv_alg_obs_count(const struct rv_alg_speed_obs *obs, size_t n, int w, int ps, int at_most)
{
	int k = 0;

	for (size_t i = 0; i < n && (at_most <= 0 || k < at_most); i++)
		k += obs[i].workers == w && obs[i].ps == ps && obs[i].speed > 0;
	return k;
}

/* How far short of the line a prediction may fall within what the data can
 * tell: the fit's relative error or the noise of the observations, the
 * larger. */
static double fit_tolerance(const struct rv_alg_fit *fit, const struct rv_alg_speed_obs *obs,
			    size_t n)
{
	double tol = rv_alg_speed_noise(obs, n);

	return fit->rel_rmse > tol ? fit->rel_rmse : tol;
}

/* Speed of a configuration: its measured mean where it was measured (at
 * least two observations), else the model's prediction. */
static double speed_of(const struct rv_alg_fit *fit, const struct rv_alg_speed_obs *obs, size_t n,
		       int w, int ps)
{
	if (rv_alg_obs_count(obs, n, w, ps, 2) >= 2)
		return mean_speed(obs, n, w, ps);
	return rv_alg_fit_predict(fit, w, ps);
}

int rv_alg_choose_workers(const struct rv_alg_fit *fit, const struct rv_alg_limits *lim,
			  const struct rv_alg_config *cur, const struct rv_alg_params *p,
			  struct rv_alg_decision *out)
{
	return rv_alg_choose_workers_obs(fit, NULL, 0, lim, cur, p, out);
}

/*
 * The model's choice of counts (rv_alg_choose_workers_obs) is a search and
 * an ordered list of rules over its candidate, each a function below, run
 * in the order of knee_rules[].  Why each rule exists, with the jobs that
 * showed it: algorithms/DESIGN-LOG.md, "Worker count".
 */
struct knee {
	const struct rv_alg_fit *fit;
	const struct rv_alg_speed_obs *obs;
	size_t nobs;
	const struct rv_alg_limits *lim;
	const struct rv_alg_config *cur;
	const struct rv_alg_params *p;
	int unit, wmin, wmax;
	int pmin, pmax; /* the PS counts searched */
	int async;
	double best;            /* best speed within the limits */
	int bw, bp;             /* where */
	int wcap, wfloor;       /* how far one plan may move */
	struct rv_alg_config c; /* the candidate */
	double c_cost;          /* its cores; INFINITY before the search found one */
	int capped, tie;        /* what the reason says about the move */
	int grown;              /* KNEE_GROW set the candidate */
};

/* Speed of (w, ps) for the knee: PS count 0 for all-reduce fits. */
static double knee_speed(const struct knee *k, int w, int ps)
{
	return speed_of(k->fit, k->obs, k->nobs, w, k->async ? ps : 0);
}

static double knee_predict(const struct knee *k, int w, int ps)
{
	return rv_alg_fit_predict(k->fit, w, k->async ? ps : 0);
}

/* The PS count stays unless the data holds more than one; then the model
 * is trusted from half the fewest to twice the most measured. */
static void knee_ps_range(struct knee *k)
{
	k->pmin = k->pmax = k->cur->ps.count;
	if (!k->async || k->fit->n_ps_values <= 1)
		return;
	k->pmin = k->lim->min_ps > 0 ? k->lim->min_ps : 1;
	k->pmax = k->lim->max_ps > 0 ? k->lim->max_ps : PS_HARD_MAX;
	int lo = 0, hi = 0;

	for (size_t i = 0; i < k->nobs; i++)
		if (k->obs[i].ps > 0 && k->obs[i].speed > 0) {
			if (!lo || k->obs[i].ps < lo)
				lo = k->obs[i].ps;
			if (k->obs[i].ps > hi)
				hi = k->obs[i].ps;
		}
	if (lo && (lo + 1) / 2 > k->pmin)
		k->pmin = (lo + 1) / 2;
	if (hi && 2 * hi < k->pmax)
		k->pmax = 2 * hi;
}

/* The best speed within the limits; false when the model predicts none. */
static bool knee_best(struct knee *k)
{
	k->best = 0;
	k->bw = k->cur->worker.count;
	k->bp = k->cur->ps.count;
	for (int w = k->wmin; w <= k->wmax; w += k->unit)
		for (int ps = k->pmin; ps <= k->pmax; ps++) {
			double f = knee_speed(k, w, ps);

			if (f > k->best) {
				k->best = f;
				k->bw = w;
				k->bp = ps;
			}
		}
	return k->best > 0;
}

/* One plan moves at most max_jump times beyond the measured counts. */
static void knee_jump_range(struct knee *k)
{
	const struct rv_alg_fit *fit = k->fit;
	int wcap = fit->max_workers_seen > 0 ? (int)(fit->max_workers_seen * k->p->max_jump)
					     : k->wmax;

	k->wcap = rv_alg_align_down(wcap < k->wmin ? k->wmin : wcap, k->unit);
	k->wfloor = fit->min_workers_seen > 0 ? (int)ceil(fit->min_workers_seen / k->p->max_jump)
					      : k->wmin;
}

/* KNEE_CHEAPEST: the configuration with the fewest cores whose speed
 * (measured mean with its reach slack, else predicted) reaches
 * target_frac of the best, within the jump range and free capacity. */
static bool knee_cheapest(struct knee *k, struct rv_alg_decision *out)
{
	(void)out;
	for (int w = k->wmin; w <= k->wmax; w += k->unit)
		for (int ps = k->pmin; ps <= k->pmax; ps++) {
			struct rv_alg_config t = *k->cur;

			t.worker.count = w;
			t.ps.count = ps;
			double f = knee_speed(k, w, ps) + reach_slack(k->obs, k->nobs, w,
								      k->async ? ps : 0, k->bw,
								      k->bp, k->p);
			if (f < k->p->target_frac * k->best ||
			    !rv_alg_fits_free(k->lim, k->cur, &t))
				continue;
			if (w > k->wcap || w < k->wfloor) {
				k->capped = 1;
				continue;
			}
			double cost = config_cost(&t, k->cur);
			if (cost < k->c_cost - 1e-9) {
				k->c = t;
				k->c_cost = cost;
			}
		}
	return false;
}

/* KNEE_TOWARDS: a knee beyond the jump range (or free capacity): as far as
 * allowed towards it, down to the floor when the best count lies below
 * the data, else up to the cap. */
static bool knee_towards(struct knee *k, struct rv_alg_decision *out)
{
	(void)out;
	if (isfinite(k->c_cost))
		return false;
	if (k->bw < k->wfloor) {
		int w = rv_alg_align_up(k->wfloor, k->unit);

		if (w > k->wmax)
			w = k->wmax;
		k->c.worker.count = w;
	} else {
		for (int w = k->wcap < k->wmax ? k->wcap : k->wmax; w >= k->wmin; w -= k->unit) {
			struct rv_alg_config t = *k->cur;

			t.worker.count = w;
			if (rv_alg_fits_free(k->lim, k->cur, &t)) {
				k->c = t;
				break;
			}
		}
	}
	k->c_cost = config_cost(&k->c, k->cur);
	return false;
}

/* KNEE_HOLD: the current configuration stays when it is within
 * knee_hold_frac of the line (its measured mean with knee_hold_se standard
 * errors of slack), at most knee_hold_cost times the knee's cores, no more
 * than two bands under the knee's own speed, and not predicted under
 * knee_hold_share of an unmeasured larger knee: refits do not flip counts
 * by one on noise. */
static bool knee_hold(struct knee *k, struct rv_alg_decision *out)
{
	const struct rv_alg_config *cur = k->cur;
	const struct rv_alg_params *p = k->p;
	(void)out;
	double fcur = speed_of(k->fit, k->obs, k->nobs, cur->worker.count, cur->ps.count);
	double fcur_hold =
		fcur + p->knee_hold_se * mean_se(k->obs, k->nobs, cur->worker.count, cur->ps.count);
	double bar = (p->target_frac - p->knee_hold_frac) * k->best;
	double fc_knee = knee_speed(k, k->c.worker.count, k->c.ps.count);

	if (isfinite(k->c_cost) && fc_knee - 2 * p->knee_hold_frac * k->best > bar)
		bar = fc_knee - 2 * p->knee_hold_frac * k->best;
	double pc = knee_predict(k, k->c.worker.count, k->c.ps.count);
	double pcur = knee_predict(k, cur->worker.count, cur->ps.count);
	bool short_of_knee =
		k->c.worker.count > cur->worker.count && pc > 0 && pcur < p->knee_hold_share * pc &&
		rv_alg_obs_count(k->obs, k->nobs, k->c.worker.count, k->c.ps.count, 2) < 2;

	if (isfinite(k->c_cost) && cur->worker.count >= k->wmin && cur->worker.count <= k->wmax &&
	    fcur_hold >= bar && config_cost(cur, cur) <= p->knee_hold_cost * k->c_cost &&
	    !short_of_knee && rv_alg_fits_free(k->lim, cur, cur))
		k->c = *cur;
	return false;
}

/* KNEE_TIE_WORKERS: of two unmeasured neighbours near the line, the
 * cheaper: when the last worker of the move buys less than knee_tie_gain
 * and the count below is short of the line by no more than the fit's
 * uncertainty, the model cannot tell which reaches it. */
static bool knee_tie_workers(struct knee *k, struct rv_alg_decision *out)
{
	const struct rv_alg_params *p = k->p;
	int w = k->c.worker.count, ps = k->c.ps.count;
	(void)out;
	if (w == k->cur->worker.count || !(p->knee_tie_gain > 0) || w - k->unit < k->wmin ||
	    w - k->unit < k->wfloor || rv_alg_obs_count(k->obs, k->nobs, w, ps, 2) >= 2 ||
	    rv_alg_obs_count(k->obs, k->nobs, w - k->unit, ps, 2) >= 2)
		return false;
	struct rv_alg_config t = k->c;
	double tol = fit_tolerance(k->fit, k->obs, k->nobs);
	t.worker.count -= k->unit;
	double fc = knee_predict(k, w, ps);
	double fl = knee_predict(k, t.worker.count, t.ps.count);

	if (fl > 0 && fl >= (p->target_frac - tol) * k->best &&
	    (fc / fl - 1) / k->unit < p->knee_tie_gain && rv_alg_fits_free(k->lim, k->cur, &t)) {
		k->c = t;
		k->c_cost = config_cost(&k->c, k->cur);
		k->tie = 1;
	}
	return false;
}

/* KNEE_TIE_PS: likewise fewer PS above every measured PS count, where the
 * PS term is extrapolated: the smallest PS count within the fit's
 * uncertainty of the line whose PS beyond buy less than knee_tie_gain each. */
static bool knee_tie_ps(struct knee *k, struct rv_alg_decision *out)
{
	const struct rv_alg_params *p = k->p;
	int ps_hi = 0;
	(void)out;
	for (size_t i = 0; i < k->nobs; i++)
		if (k->obs[i].speed > 0 && k->obs[i].ps > ps_hi)
			ps_hi = k->obs[i].ps;
	if (!k->async || k->c.ps.count == k->cur->ps.count || k->c.ps.count <= ps_hi ||
	    k->c.ps.count <= k->pmin || !(p->knee_tie_gain > 0) ||
	    rv_alg_obs_count(k->obs, k->nobs, k->c.worker.count, k->c.ps.count, 2) >= 2)
		return false;
	double tol = fit_tolerance(k->fit, k->obs, k->nobs);
	double fc = rv_alg_fit_predict(k->fit, k->c.worker.count, k->c.ps.count);

	for (int ps = k->pmin; ps < k->c.ps.count; ps++) {
		struct rv_alg_config t = k->c;

		t.ps.count = ps;
		double fl = rv_alg_fit_predict(k->fit, k->c.worker.count, ps);

		if (rv_alg_obs_count(k->obs, k->nobs, k->c.worker.count, ps, 2) < 2 && fl > 0 &&
		    fl >= (p->target_frac - tol) * k->best &&
		    (fc / fl - 1) / (k->c.ps.count - ps) < p->knee_tie_gain &&
		    rv_alg_fits_free(k->lim, k->cur, &t)) {
			k->c = t;
			k->c_cost = config_cost(&k->c, k->cur);
			k->tie = 2;
			break;
		}
	}
	return false;
}

/* The largest free worker count in (w, up], aligned; w when none. */
static int knee_free_up(const struct knee *k, int w, int up)
{
	if (up > k->wmax)
		up = k->wmax;
	for (; up > w; up -= k->unit) {
		struct rv_alg_config t = *k->cur;

		t.worker.count = up;
		if (rv_alg_fits_free(k->lim, k->cur, &t))
			break;
	}
	return up;
}

/* KNEE_BRACKET: the data must bracket the knee.  A knee held at the
 * largest measured count, with growth to it still paying and a better
 * configuration predicted beyond it, rests on extrapolation: measure one
 * geometric step above first (decides: explore). */
static bool knee_bracket(struct knee *k, struct rv_alg_decision *out)
{
	const struct rv_alg_config *cur = k->cur;
	int w = cur->worker.count, ps = cur->ps.count, lower = 0;

	if (k->c.worker.count != w || k->c.ps.count != ps || w != k->fit->max_workers_seen ||
	    k->bw <= w || w >= k->wmax)
		return false;
	for (size_t i = 0; i < k->nobs; i++)
		if (k->obs[i].ps == ps && k->obs[i].speed > 0 && k->obs[i].workers < w &&
		    k->obs[i].workers > lower)
			lower = k->obs[i].workers;
	double s_lo = lower ? mean_speed(k->obs, k->nobs, lower, ps) : 0;
	double s_w = mean_speed(k->obs, k->nobs, w, ps);

	if (!(s_lo > 0 && s_w > 0 && (s_w / s_lo - 1) / (w - lower) >= k->p->min_gain))
		return false;
	int up = knee_free_up(k, w,
			      rv_alg_align_up((int)ceil(w * k->p->explore_factor - 1e-9), k->unit));
	if (up <= w)
		return false;
	out->cfg = *cur;
	out->cfg.worker.count = up;
	out->predicted_speed = speed_of(k->fit, k->obs, k->nobs, up, ps);
	out->fit_r2 = k->fit->r2;
	out->fit_configs = k->fit->n_configs;
	out->changed = true;
	out->algorithm = RV_ALG_ID_EXPLORE;
	rv_alg_reason_add(out,
			  "the knee is at the largest measured count (%d workers) and growth "
			  "to it paid; measuring %d before trusting the model beyond its data",
			  w, up);
	return true;
}

/* Whether the job climbs at PS count ps: w is the largest measured count
 * there and growth to it from the next measured count below paid. */
static bool knee_climbing(const struct knee *k, int w, int ps)
{
	int lower = 0;

	if (w != k->fit->max_workers_seen)
		return false;
	for (size_t i = 0; i < k->nobs; i++)
		if (k->obs[i].ps == ps && k->obs[i].speed > 0 && k->obs[i].workers < w &&
		    k->obs[i].workers > lower)
			lower = k->obs[i].workers;
	return lower && growth_paid(mean_speed(k->obs, k->nobs, lower, ps), lower,
				    mean_speed(k->obs, k->nobs, w, ps), w, k->p);
}

/* The worker count the model predicts fastest at PS count ps. */
static int knee_best_at(const struct knee *k, int ps)
{
	int bw = k->wmin;
	double best = 0;

	for (int w = k->wmin; w <= k->wmax; w += k->unit) {
		double f = knee_predict(k, w, ps);

		if (f > best) {
			best = f;
			bw = w;
		}
	}
	return bw;
}

/* KNEE_GROW: growth by the model.  A climbing job whose model chose more
 * workers, but cannot tell the speed it predicts beyond them from the
 * knee's (its relative standard error there exceeds the knee's band,
 * 1 - target_frac), goes to the count the model predicts fastest, past the
 * knee, so that the next fit interpolates the knee instead of
 * extrapolating it: a curve fitted from small counts flattens too early.
 * No further than grow_factor times the largest measured count (the range
 * the fit supports), the free capacity, and the farthest count whose
 * prediction keeps within max_pred_rse; never short of the geometric step
 * or of the model's own knee.  All-reduce jobs only: a PS job's knee moves
 * with its PS count, and near-linear PS jobs grown to their bound stayed
 * there.  DESIGN-LOG.md, "Worker count", KNEE_GROW. */
static bool knee_grow(struct knee *k, struct rv_alg_decision *out)
{
	const struct rv_alg_params *p = k->p;
	int w = k->cur->worker.count, ps = k->cur->ps.count;
	(void)out;
	if (!(p->grow_factor > 0) || k->async || k->c.worker.count <= w || !knee_climbing(k, w, ps))
		return false;
	int cap = rv_alg_align_down((int)floor(w * p->grow_factor + 1e-9), k->unit);
	int best = knee_best_at(k, ps);
	int target = knee_free_up(k, w, best < cap ? best : cap);
	int geo = rv_alg_align_up((int)ceil(w * p->explore_factor - 1e-9), k->unit);
	int lo = k->c.worker.count > geo ? k->c.worker.count : geo;
	double noise = rv_alg_speed_noise(k->obs, k->nobs);

	if (target <= lo || rv_alg_fit_predict_rse(k->fit, k->obs, k->nobs, target,
						   k->async ? ps : 0, noise) <= 1 - p->target_frac)
		return false;
	while (target > lo && p->max_pred_rse > 0 &&
	       rv_alg_fit_predict_rse(k->fit, k->obs, k->nobs, target, k->async ? ps : 0, noise) >
		       p->max_pred_rse)
		target -= k->unit;
	if (target == k->c.worker.count)
		return false;
	k->c.worker.count = target;
	k->c_cost = config_cost(&k->c, k->cur);
	k->grown = 1;
	k->capped = 0;
	return false;
}

/* The rules of the model's choice, in the order they refine the candidate;
 * one that returns true has decided. */
static const struct knee_rule {
	enum knee_rule_id {
		KNEE_CHEAPEST,
		KNEE_TOWARDS,
		KNEE_HOLD,
		KNEE_TIE_WORKERS,
		KNEE_TIE_PS,
		KNEE_GROW,
		KNEE_BRACKET,
	} id;
	bool (*apply)(struct knee *k, struct rv_alg_decision *out);
} knee_rules[] = {
	{ KNEE_CHEAPEST, knee_cheapest }, { KNEE_TOWARDS, knee_towards },
	{ KNEE_HOLD, knee_hold },         { KNEE_TIE_WORKERS, knee_tie_workers },
	{ KNEE_TIE_PS, knee_tie_ps },     { KNEE_GROW, knee_grow },
	{ KNEE_BRACKET, knee_bracket },
};

/* The decision from the candidate the rules left, and its reason. */
static void knee_decide(const struct knee *k, struct rv_alg_decision *out)
{
	const struct rv_alg_config *cur = k->cur, *c = &k->c;
	const struct rv_alg_fit *fit = k->fit;

	out->cfg = *c;
	out->predicted_speed = speed_of(fit, k->obs, k->nobs, c->worker.count, c->ps.count);
	out->fit_r2 = fit->r2;
	out->fit_configs = fit->n_configs;
	if (c->worker.count == cur->worker.count && c->ps.count == cur->ps.count) {
		rv_alg_reason_add(out,
				  "throughput model: %d workers%s reach %.0f%% of the best "
				  "predicted speed (%d workers) at the least CPU; fit r2=%.2f from "
				  "%d configs",
				  c->worker.count, k->async ? " and current PS" : "",
				  100 * out->predicted_speed / k->best, k->bw, fit->r2,
				  fit->n_configs);
		return;
	}
	out->changed = true;
	out->algorithm = RV_ALG_ID_WORKER_COUNT_MODEL;
	double fcur = speed_of(fit, k->obs, k->nobs, cur->worker.count, cur->ps.count);
	struct rv_alg_config bc = *cur;

	bc.worker.count = k->bw;
	bc.ps.count = k->bp;
	double best_cost = config_cost(&bc, cur);
	const char *note = k->grown      ? "; growing towards the best predicted count, within "
					   "the fit's range"
			   : k->capped   ? "; step capped at the measured range"
			   : k->tie == 1 ? "; one worker fewer: within the fit's uncertainty of "
					   "the line, the next buys little"
			   : k->tie == 2 ? "; fewer PS: within the fit's uncertainty of the "
					   "line, the PS beyond buy little"
					 : "";
	if (k->async)
		rv_alg_reason_add(out,
				  "throughput model predicts %+.0f%% samples/s with %d workers "
				  "and %d PS (%.0f%% of the best predicted, %d workers and %d PS, "
				  "at %.0f%% of its CPU)%s; fit r2=%.2f from %d configs",
				  pct(out->predicted_speed, fcur), c->worker.count, c->ps.count,
				  100 * out->predicted_speed / k->best, k->bw, k->bp,
				  100 * k->c_cost / best_cost, note, fit->r2, fit->n_configs);
	else
		rv_alg_reason_add(out,
				  "throughput model predicts %+.0f%% samples/s with %d workers "
				  "(%.0f%% of the best predicted, %d workers)%s; fit r2=%.2f from "
				  "%d configs",
				  pct(out->predicted_speed, fcur), c->worker.count,
				  100 * out->predicted_speed / k->best, k->bw, note, fit->r2,
				  fit->n_configs);
}

int rv_alg_choose_workers_obs(const struct rv_alg_fit *fit, const struct rv_alg_speed_obs *obs,
			      size_t nobs, const struct rv_alg_limits *lim,
			      const struct rv_alg_config *cur, const struct rv_alg_params *p,
			      struct rv_alg_decision *out)
{
	if (!fit || !lim || !cur || !p || !out || (nobs && !obs))
		return -EINVAL;
	rv_alg_decision_init(out, cur);
	struct knee k = {
		.fit = fit,
		.obs = obs,
		.nobs = nobs,
		.lim = lim,
		.cur = cur,
		.p = p,
		.unit = unit_of(lim),
		.wmax = max_workers_of(lim),
		.wmin = rv_alg_clamp_workers(lim->min_workers, lim),
		.async = fit->model == RV_ALG_MODEL_ASYNC,
		.c = *cur,
		.c_cost = INFINITY,
	};

	knee_ps_range(&k);
	if (!knee_best(&k)) {
		rv_alg_reason_add(out, "throughput model gives no usable prediction");
		return 0;
	}
	knee_jump_range(&k);
	for (size_t i = 0; i < sizeof(knee_rules) / sizeof(knee_rules[0]); i++)
		if (knee_rules[i].apply(&k, out))
			return 0;
	knee_decide(&k, out);
	return 0;
}

/* Standard error of the mean observed speed at (w, ps); 0 with fewer than
 * two observations.  The spread per observation is pooled over every
 * measured configuration (relative deviations from each one's mean): two or
 * three observations of one configuration say little about their own
 * spread, the job's noise is the same everywhere. */
double rv_alg_speed_noise(const struct rv_alg_speed_obs *obs, size_t n)
{
	double ss = 0;
	int dof = 0;

	for (size_t i = 0; i < n; i++) {
		if (!(obs[i].speed > 0))
			continue;
		double m = mean_speed(obs, n, obs[i].workers, obs[i].ps);

		ss += (obs[i].speed / m - 1) * (obs[i].speed / m - 1);
		dof++;
	}
	/* one degree of freedom per configuration goes to its mean */
	for (size_t i = 0; i < n; i++) {
		int first = obs[i].speed > 0;

		for (size_t j = 0; j < i && first; j++)
			if (obs[j].speed > 0 && obs[j].workers == obs[i].workers &&
			    obs[j].ps == obs[i].ps)
				first = 0;
		dof -= first;
	}
	return dof >= 1 ? sqrt(ss / dof) : 0;
}

static double mean_se(const struct rv_alg_speed_obs *obs, size_t n, int w, int ps)
{
	int k = rv_alg_obs_count(obs, n, w, ps, 0);

	if (k < 2)
		return 0;
	return mean_speed(obs, n, w, ps) * rv_alg_speed_noise(obs, n) / sqrt(k);
}

double rv_alg_mean_speed(const struct rv_alg_speed_obs *obs, size_t n, int w, int ps)
{
	return mean_speed(obs, n, w, ps);
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

int rv_alg_measured_too_slow(const struct rv_alg_speed_obs *obs, size_t n, int ps,
			     const struct rv_alg_params *p)
{
	double best = 0;
	int slow = 0;

	for (size_t i = 0; i < n; i++)
		if (obs[i].ps == ps) {
			double m = mean_speed(obs, n, obs[i].workers, ps);
			if (m > best)
				best = m;
		}
	/* too slow beyond noise: by more than two standard errors */
	for (size_t i = 0; i < n; i++)
		if (obs[i].ps == ps && obs[i].workers > slow &&
		    mean_speed(obs, n, obs[i].workers, ps) +
				    2 * mean_se(obs, n, obs[i].workers, ps) <
			    p->target_frac * best)
			slow = obs[i].workers;
	/* only counts below the best measured one can be "too slow" */
	for (size_t i = 0; i < n; i++)
		if (obs[i].ps == ps && mean_speed(obs, n, obs[i].workers, ps) >= best &&
		    slow > obs[i].workers)
			return 0;
	return slow;
}

bool rv_alg_measured_near_line(const struct rv_alg_speed_obs *obs, size_t n, int w, int ps,
			       const struct rv_alg_params *p)
{
	double best = 0, m = mean_speed(obs, n, w, ps);

	for (size_t i = 0; i < n; i++)
		if (obs[i].ps == ps && obs[i].speed > 0) {
			double b = mean_speed(obs, n, obs[i].workers, ps);
			if (b > best)
				best = b;
		}
	return best > 0 && m >= (p->target_frac - p->knee_hold_frac) * best;
}

/* Whether any count below w was measured at this PS count. */
static int measured_below(const struct rv_alg_speed_obs *obs, size_t n, int ps, int w)
{
	for (size_t i = 0; i < n; i++)
		if (obs[i].ps == ps && obs[i].speed > 0 && obs[i].workers < w)
			return 1;
	return 0;
}

/*
 * Whether measuring mid, between a too-slow count lo and the knee hi, can
 * tell whether it reaches the line (target_frac of best): its expected
 * speed, interpolated between the two measured means, must lie farther
 * from the line than knee_hold_se standard errors of one visit's mean
 * there (as many samples as lo got).  Nearer, one visit cannot settle it
 * under the noise, the bisection costs a plan (or two, when the middle
 * measured too slow by chance and the job goes back), and the knee stays.
 * Speed is concave in workers, so the interpolation is a floor: a middle
 * expected on or above the line is measured.  All-reduce jobs only: a PS
 * job's worker counts at one PS count are the data its model later chooses
 * over both PS counts from, and without the middle one settled above its
 * knee (16 workers for 14).
 */
static bool mid_resolvable(const struct rv_alg_speed_obs *obs, size_t n, int lo, int mid, int hi,
			   int ps, double best, const struct rv_alg_params *p)
{
	double s_lo = mean_speed(obs, n, lo, ps), s_hi = mean_speed(obs, n, hi, ps);
	double noise = rv_alg_speed_noise(obs, n);
	int k = rv_alg_obs_count(obs, n, lo, ps, 0);

	if (ps > 0 || !(noise > 0) || k < 2 || p->knee_hold_se <= 0 || hi <= lo)
		return true;
	double expect = s_lo + (s_hi - s_lo) * (mid - lo) / (hi - lo);

	return expect >= p->target_frac * best ||
	       p->target_frac * best - expect > p->knee_hold_se * expect * noise / sqrt(k);
}

/* One exploration step: what its rules read, and the target they choose.
 * The rules are the functions below, in the order of explore_moves[] (which
 * new count to measure) and explore_settles[] (where to settle when none);
 * why each exists: algorithms/DESIGN-LOG.md, "Exploration". */
struct explo {
	const struct rv_alg_speed_obs *obs;
	size_t n;
	const struct rv_alg_limits *lim;
	const struct rv_alg_config *cur;
	const struct rv_alg_params *p;
	bool measure; /* false: only settle on counts measured already */
	int unit, wmin, wmax;
	int w, ps;         /* the counts running now */
	double s_cur;      /* their mean speed */
	int below, above;  /* the nearest measured counts at this PS count; 0 none */
	bool paid_below;   /* growth from below to w paid (or nothing below) */
	double gain_above; /* per added worker from w to above */
	int up, down;      /* the geometric steps, free and within the limits */
	int upper_half;    /* a first measurement in the upper half of the range */
	int target;        /* the count a move rule chose */
	const char *why;
	double best; /* settling: the best measured mean, at bw */
	int bw, knee;
};

/* MOVE_UP: up while growth pays, from a first measurement in the lower half
 * too. */
static bool explore_up(struct explo *e)
{
	if (e->above || e->up <= e->w || !e->paid_below || e->upper_half)
		return false;
	e->target = e->up;
	e->why = e->below ? "growth paid" : "first measurement";
	return true;
}

/* MOVE_DOWN: down when nothing was measured below and growth to the count
 * above did not pay (or from a first measurement in the upper half: a
 * request is more often too large); twice as far when the step down lost
 * nothing at all. */
static bool explore_down(struct explo *e)
{
	const struct rv_alg_params *p = e->p;

	if (e->below || e->down >= e->w || !(e->gain_above < p->min_gain))
		return false;
	e->target = e->down;
	if (e->above && e->gain_above <= 0) {
		int d2 = rv_alg_align_down(
			(int)floor(e->w / (p->explore_factor * p->explore_factor) + 1e-9), e->unit);
		if (d2 < e->wmin)
			d2 = e->wmin;
		if (d2 < e->down)
			e->target = d2;
	}
	e->why = e->above        ? "growth did not pay"
		 : e->upper_half ? "start in the upper half"
				 : "cannot grow";
	return true;
}

/* MOVE_UNDER: two counts measured and growth from the smaller did not pay:
 * the knee is at or below it, so measure under it directly. */
static bool explore_under(struct explo *e)
{
	if (!e->below || e->above || e->paid_below || measured_below(e->obs, e->n, e->ps, e->below))
		return false;
	int d2 = rv_alg_align_down((int)floor(e->below / e->p->explore_factor + 1e-9), e->unit);

	if (d2 >= e->below)
		d2 = e->below - e->unit;
	if (d2 < e->wmin)
		d2 = e->wmin;
	if (d2 < e->below) {
		e->target = d2;
		e->why = "growth did not pay";
	}
	return true;
}

/* Which new count to measure, in order: the first rule that applies ends
 * the list. */
static const struct explore_move {
	enum explore_move_id { MOVE_UP, MOVE_DOWN, MOVE_UNDER } id;
	bool (*apply)(struct explo *e);
} explore_moves[] = {
	{ MOVE_UP, explore_up },
	{ MOVE_DOWN, explore_down },
	{ MOVE_UNDER, explore_under },
};

/* The measured neighbours of the current count and the geometric steps. */
static void explore_read(struct explo *e)
{
	const struct rv_alg_params *p = e->p;

	for (size_t i = 0; i < e->n; i++) {
		int wi = e->obs[i].workers;

		if (e->obs[i].ps != e->ps || !(e->obs[i].speed > 0))
			continue;
		if (wi < e->w && wi > e->below)
			e->below = wi;
		if (wi > e->w && (e->above == 0 || wi < e->above))
			e->above = wi;
	}
	e->paid_below = !e->below || growth_paid(mean_speed(e->obs, e->n, e->below, e->ps),
						 e->below, e->s_cur, e->w, p);
	e->gain_above = e->above ? (mean_speed(e->obs, e->n, e->above, e->ps) / e->s_cur - 1) /
					   (e->above - e->w)
				 : 0;
	int up = (int)ceil(e->w * p->explore_factor - 1e-9);

	if (up < e->w + e->unit)
		up = e->w + e->unit;
	e->up = rv_alg_align_up(up, e->unit);
	if (e->up > e->wmax)
		e->up = e->wmax;
	for (; e->up > e->w; e->up -= e->unit) {
		struct rv_alg_config next = *e->cur;

		next.worker.count = e->up;
		if (rv_alg_fits_free(e->lim, e->cur, &next))
			break;
	}
	e->down = rv_alg_align_down((int)floor(e->w / p->explore_factor + 1e-9), e->unit);
	if (e->down >= e->w)
		e->down = e->w - e->unit;
	if (e->down < e->wmin)
		e->down = e->wmin;
	e->upper_half = !e->above && !e->below && e->down < e->w && 2 * e->w > e->wmin + e->wmax;
}

/* The measured knee: the fewest workers at this PS count whose mean (with
 * its reach slack) reaches target_frac of the best measured mean. */
static void explore_knee(struct explo *e)
{
	e->best = 0;
	e->bw = e->w;
	for (size_t i = 0; i < e->n; i++)
		if (e->obs[i].ps == e->ps && e->obs[i].workers >= e->wmin &&
		    e->obs[i].workers <= e->wmax) {
			double m = mean_speed(e->obs, e->n, e->obs[i].workers, e->ps);
			if (m > e->best) {
				e->best = m;
				e->bw = e->obs[i].workers;
			}
		}
	e->knee = 0;
	for (size_t i = 0; i < e->n; i++) {
		int wi = e->obs[i].workers;

		if (e->obs[i].ps != e->ps || wi < e->wmin || wi > e->wmax ||
		    (e->knee && wi >= e->knee))
			continue;
		if (mean_speed(e->obs, e->n, wi, e->ps) +
			    reach_slack(e->obs, e->n, wi, e->ps, e->bw, e->ps, e->p) >=
		    e->p->target_frac * e->best)
			e->knee = wi;
	}
	if (!e->knee)
		e->knee = e->w;
}

/* SETTLE_BISECT: the knee lies between the largest measured count below it
 * (too slow) and it: measure the middle while the gap is wide and one visit
 * can tell (mid_resolvable).  A middle equal to the current count notes
 * itself in the reason and the next rule decides. */
static bool settle_bisect(struct explo *e, struct rv_alg_decision *out)
{
	int lower = 0;

	for (size_t i = 0; i < e->n; i++)
		if (e->obs[i].ps == e->ps && e->obs[i].workers < e->knee &&
		    e->obs[i].workers > lower && e->obs[i].speed > 0)
			lower = e->obs[i].workers;
	if (!e->measure || !lower || e->knee - lower <= e->unit)
		return false;
	int mid = rv_alg_align_down((lower + e->knee + 1) / 2, e->unit);

	if (mid <= lower || mid >= e->knee || mean_speed(e->obs, e->n, mid, e->ps) > 0 ||
	    !mid_resolvable(e->obs, e->n, lower, mid, e->knee, e->ps, e->best, e->p))
		return false;
	out->cfg.worker.count = mid;
	out->changed = mid != e->w;
	out->algorithm = RV_ALG_ID_EXPLORE;
	out->predicted_speed = 0;
	rv_alg_reason_add(out,
			  "the knee (%.0f%% of the best measured speed) lies between %d and %d "
			  "workers; measuring %d",
			  100 * e->p->target_frac, lower, e->knee, mid);
	return out->changed;
}

/* SETTLE_NOISE_HOLD: up from the current count only when it is clearly too
 * slow, beyond knee_hold_se standard errors of its mean below the line. */
static bool settle_noise_hold(struct explo *e, struct rv_alg_decision *out)
{
	double cur_mean = mean_speed(e->obs, e->n, e->w, e->ps);

	if (!(e->knee > e->w && cur_mean > 0 &&
	      cur_mean + e->p->knee_hold_se * mean_se(e->obs, e->n, e->w, e->ps) >=
		      e->p->target_frac * e->best))
		return false;
	rv_alg_reason_add(out,
			  "exploration holds at %d workers: within the noise of the knee (%.0f%% "
			  "of the best measured speed)",
			  e->w, 100 * e->p->target_frac);
	return true;
}

/* SETTLE_KNEE: move to the measured knee. */
static bool settle_knee(struct explo *e, struct rv_alg_decision *out)
{
	if (e->knee == e->w)
		return false;
	out->cfg.worker.count = e->knee;
	out->predicted_speed = mean_speed(e->obs, e->n, e->knee, e->ps);
	out->changed = true;
	out->algorithm = RV_ALG_ID_EXPLORE;
	rv_alg_reason_add(out,
			  "%d workers measured %.0f%% of the best measured speed, the fewest "
			  "that reach %.0f%%; settling there (from %d)",
			  e->knee, 100 * out->predicted_speed / e->best, 100 * e->p->target_frac,
			  e->w);
	return true;
}

/* SETTLE_HOLD: the current count is the measured knee. */
static bool settle_hold(struct explo *e, struct rv_alg_decision *out)
{
	rv_alg_reason_add(out,
			  "exploration holds at %d workers: the measured knee (>= %.0f%% of the "
			  "best measured speed)",
			  e->w, 100 * e->p->target_frac);
	return true;
}

/* Where to settle when there is no new count to measure, in order: the
 * first rule that returns true has decided. */
static const struct explore_settle {
	enum explore_settle_id {
		SETTLE_BISECT,
		SETTLE_NOISE_HOLD,
		SETTLE_KNEE,
		SETTLE_HOLD,
	} id;
	bool (*apply)(struct explo *e, struct rv_alg_decision *out);
} explore_settles[] = {
	{ SETTLE_BISECT, settle_bisect },
	{ SETTLE_NOISE_HOLD, settle_noise_hold },
	{ SETTLE_KNEE, settle_knee },
	{ SETTLE_HOLD, settle_hold },
};

/*
 * Exploration before a model can be trusted: measure distinct worker counts,
 * geometrically.  Up first while growth pays (at least min_gain relative
 * speed per added worker), else down (an over-sized request, a flat curve),
 * so three configs are measured in few steps.  When neither direction has
 * anything new to measure, settle on the measured knee: the fewest workers
 * whose mean speed reaches target_frac of the best measured.
 */
static int explore(const struct rv_alg_speed_obs *obs, size_t n, const struct rv_alg_limits *lim,
		   const struct rv_alg_config *cur, const struct rv_alg_params *p, bool measure,
		   struct rv_alg_decision *out)
{
	if ((n > 0 && !obs) || !lim || !cur || !p || !out)
		return -EINVAL;
	rv_alg_decision_init(out, cur);
	struct explo e = {
		.obs = obs,
		.n = n,
		.lim = lim,
		.cur = cur,
		.p = p,
		.measure = measure,
		.unit = unit_of(lim),
		.wmax = max_workers_of(lim),
		.wmin = rv_alg_clamp_workers(lim->min_workers, lim),
		.w = cur->worker.count,
		.ps = cur->ps.count,
	};

	e.s_cur = mean_speed(obs, n, e.w, e.ps);
	if (!(e.s_cur > 0)) {
		rv_alg_reason_add(out, "no speed observed yet with %d workers", e.w);
		return 0;
	}
	out->predicted_speed = e.s_cur;
	explore_read(&e);
	e.target = e.w;
	for (size_t i = 0; i < sizeof(explore_moves) / sizeof(explore_moves[0]); i++)
		if (explore_moves[i].apply(&e))
			break;
	if (e.target != e.w && measure) {
		out->cfg.worker.count = e.target;
		out->changed = true;
		out->algorithm = RV_ALG_ID_EXPLORE;
		rv_alg_reason_add(out,
				  "exploring: %d -> %d workers to measure scaling (%s); not enough "
				  "distinct configs for a trusted throughput model yet",
				  e.w, e.target, e.why);
		return 0;
	}
	explore_knee(&e);
	for (size_t i = 0; i < sizeof(explore_settles) / sizeof(explore_settles[0]); i++)
		if (explore_settles[i].apply(&e, out))
			break;
	return 0;
}

int rv_alg_best_measured(const struct rv_alg_speed_obs *obs, size_t n,
			 const struct rv_alg_limits *lim, const struct rv_alg_config *cur,
			 const struct rv_alg_params *p, struct rv_alg_config *best_cfg,
			 double *share)
{
	if ((n && !obs) || !lim || !cur || !p || !best_cfg)
		return -EINVAL;
	int wmin = rv_alg_clamp_workers(lim->min_workers, lim), wmax = max_workers_of(lim);
	int pmin = lim->min_ps > 0 ? lim->min_ps : 1;
	int pmax = lim->max_ps > 0 ? lim->max_ps : PS_HARD_MAX;
	double best = 0;
	int bw = 0, bp = 0;

	for (size_t i = 0; i < n; i++) {
		int w = obs[i].workers, ps = obs[i].ps;
		double m = mean_speed(obs, n, w, ps);

		if (w < wmin || w > wmax || (cur->ps.count > 0 && (ps < pmin || ps > pmax)) ||
		    rv_alg_obs_count(obs, n, w, ps, 2) < 2 || !(m > best))
			continue;
		best = m;
		bw = w;
		bp = ps;
	}
	if (!(best > 0))
		return -ENODATA;
	double c_cost = INFINITY, c_speed = 0;

	for (size_t i = 0; i < n; i++) {
		struct rv_alg_config t = *cur;
		int w = obs[i].workers, ps = obs[i].ps;

		t.worker.count = w;
		t.ps.count = ps;
		if (w < wmin || w > wmax || (cur->ps.count > 0 && (ps < pmin || ps > pmax)) ||
		    rv_alg_obs_count(obs, n, w, ps, 2) < 2 || !rv_alg_fits_free(lim, cur, &t))
			continue;
		double m = mean_speed(obs, n, w, ps);
		double cost = config_cost(&t, cur);

		if (m + reach_slack(obs, n, w, ps, bw, bp, p) < p->target_frac * best)
			continue;
		if (cost < c_cost - 1e-9 || (cost < c_cost + 1e-9 && m > c_speed)) {
			*best_cfg = t;
			c_cost = cost;
			c_speed = m;
		}
	}
	if (!isfinite(c_cost))
		return -ENODATA;
	if (share)
		*share = c_speed / best;
	return 0;
}

int rv_alg_explore(const struct rv_alg_speed_obs *obs, size_t n, const struct rv_alg_limits *lim,
		   const struct rv_alg_config *cur, const struct rv_alg_params *p,
		   struct rv_alg_decision *out)
{
	return explore(obs, n, lim, cur, p, true, out);
}

int rv_alg_settle_measured(const struct rv_alg_speed_obs *obs, size_t n,
			   const struct rv_alg_limits *lim, const struct rv_alg_config *cur,
			   const struct rv_alg_params *p, struct rv_alg_decision *out)
{
	return explore(obs, n, lim, cur, p, false, out);
}
