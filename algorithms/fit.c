/*
 * fit.c: Optimus-style throughput models fitted by non-negative least squares.
 *
 *   async PS:      f(p,w) = w / (t0 + t1 w/p + t2 w + t3 p)
 *   sync allreduce: f(w)  = 1 / (t0/w + t1 + t2 w)
 *
 * The inverse is linear in t: w/f = t0 + t1 w/p + t2 w + t3 p and
 * 1/f = t0/w + t1 + t2 w.  Each row is divided by its own target y, so the
 * fit minimises sum((x.t - y) / y)^2: relative error, which is also the
 * relative error on speed to first order, so a 1000 samples/s config does not
 * drown a 50 samples/s one.  Used by workers.c and plan.c; pure, reentrant.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_multifit.h>

#include "alg_internal.h"

#define FIT_MAX_THETA 4

static int model_theta(enum rv_alg_model m)
{
	return m == RV_ALG_MODEL_ASYNC ? 4 : 3;
}

/* Design row and target of one observation; 0 when it is unusable. */
static int fit_row(enum rv_alg_model m, const struct rv_alg_speed_obs *o, double *x, double *y)
{
	double w = o->workers, p = o->ps;

	if (!(o->speed > 0) || !isfinite(o->speed) || o->workers <= 0)
		return 0;
	if (m == RV_ALG_MODEL_ASYNC) {
		if (o->ps <= 0)
			return 0;
		x[0] = 1;
		x[1] = w / p;
		x[2] = w;
		x[3] = p;
		*y = w / o->speed;
	} else {
		x[0] = 1 / w;
		x[1] = 1;
		x[2] = w;
		*y = 1 / o->speed;
	}
	return 1;
}

/*
 * Exact NNLS for k <= 4 unknowns by enumerating the 2^k - 1 active sets: the
 * optimum is the unconstrained least-squares solution on its own support, so
 * the best feasible (all >= 0) subset solution is the global optimum of this
 * convex problem.  15 small SVD solves are cheaper to get right than a
 * Lawson-Hanson loop and have no iteration limit or tolerance to tune.
 * A is n x k (weighted rows), b has n entries.
 */
static int nnls_enumerate(const gsl_matrix *A, const gsl_vector *b, double *theta)
{
	size_t n = A->size1, k = A->size2;
	double best;

	memset(theta, 0, k * sizeof(*theta));
	/* theta = 0 is always feasible: residual |b|^2 */
	best = 0;
	for (size_t i = 0; i < n; i++)
		best += gsl_vector_get(b, i) * gsl_vector_get(b, i);

	for (unsigned mask = 1; mask < (1u << k); mask++) {
		size_t cols[FIT_MAX_THETA], nc = 0;

		for (size_t j = 0; j < k; j++)
			if (mask & (1u << j))
				cols[nc++] = j;
		if (nc > n)
			continue;

		gsl_matrix *X = gsl_matrix_alloc(n, nc);
		gsl_vector *c = gsl_vector_alloc(nc);
		gsl_matrix *cov = gsl_matrix_alloc(nc, nc);
		gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc(n, nc);
		double chisq = INFINITY;
		int rc = -ENOMEM;

		if (X && c && cov && ws) {
			for (size_t i = 0; i < n; i++)
				for (size_t j = 0; j < nc; j++)
					gsl_matrix_set(X, i, j, gsl_matrix_get(A, i, cols[j]));
			rc = gsl_multifit_linear(X, b, c, cov, &chisq, ws) == GSL_SUCCESS ? 0
											  : -EDOM;
		}
		if (rc == 0) {
			int feasible = 1;

			for (size_t j = 0; j < nc; j++)
				if (!(gsl_vector_get(c, j) >= 0) || !isfinite(gsl_vector_get(c, j)))
					feasible = 0;
			/* prefer the smaller residual; on a tie the sparser model */
			if (feasible && isfinite(chisq) && chisq < best * (1 - 1e-12)) {
				best = chisq;
				memset(theta, 0, k * sizeof(*theta));
				for (size_t j = 0; j < nc; j++)
					theta[cols[j]] = gsl_vector_get(c, j);
			}
		}
		gsl_multifit_linear_free(ws);
		gsl_matrix_free(cov);
		gsl_vector_free(c);
		gsl_matrix_free(X);
		if (rc == -ENOMEM)
			return rc;
	}
	return 0;
}

double rv_alg_fit_predict(const struct rv_alg_fit *fit, int workers, int ps)
{
	const double *t = fit->theta;
	double w = workers, p = ps, d;

	if (workers <= 0)
		return 0;
	if (fit->model == RV_ALG_MODEL_ASYNC) {
		if (ps <= 0)
			return 0;
		d = t[0] + t[1] * w / p + t[2] * w + t[3] * p;
		return d > 0 ? w / d : 0;
	}
	d = t[0] / w + t[1] + t[2] * w;
	return d > 0 ? 1 / d : 0;
}

static int config_seen(const struct rv_alg_speed_obs *obs, const size_t *idx, size_t m,
		       const struct rv_alg_speed_obs *o, enum rv_alg_model model)
{
	for (size_t i = 0; i < m; i++) {
		const struct rv_alg_speed_obs *q = &obs[idx[i]];

		if (q->workers == o->workers && (model != RV_ALG_MODEL_ASYNC || q->ps == o->ps))
			return 1;
	}
	return 0;
}

/* The range of worker counts and the distinct PS counts (at most 32) of
 * the rows the fit used. */
static void fit_seen(enum rv_alg_model model, const struct rv_alg_speed_obs *obs, size_t n,
		     struct rv_alg_fit *out)
{
	double x[FIT_MAX_THETA], y;
	int psv[32], k_ps = 0;

	out->n_ps_values = 0;
	out->max_workers_seen = 0;
	out->min_workers_seen = 0;
	for (size_t i = 0; i < n; i++) {
		if (!fit_row(model, &obs[i], x, &y))
			continue;
		if (obs[i].workers > out->max_workers_seen)
			out->max_workers_seen = obs[i].workers;
		if (!out->min_workers_seen || obs[i].workers < out->min_workers_seen)
			out->min_workers_seen = obs[i].workers;
		int j = 0;
		while (j < k_ps && psv[j] != obs[i].ps)
			j++;
		if (j == k_ps && k_ps < 32)
			psv[k_ps++] = obs[i].ps;
	}
	out->n_ps_values = k_ps;
}

/* Goodness on speed itself: r2, the relative RMS error against the
 * prediction, and the confidence, no better than the configs allow (one
 * config cannot show a curve) and falling to 0 at 20% relative error. */
static void fit_goodness(enum rv_alg_model model, const struct rv_alg_speed_obs *obs, size_t n,
			 size_t used, size_t nconf, struct rv_alg_fit *out)
{
	double x[FIT_MAX_THETA], y;
	double mean = 0, ss_tot = 0, ss_res = 0, rel = 0;

	for (size_t i = 0; i < n; i++)
		if (fit_row(model, &obs[i], x, &y))
			mean += obs[i].speed;
	mean /= (double)used;
	for (size_t i = 0; i < n; i++) {
		if (!fit_row(model, &obs[i], x, &y))
			continue;
		double f = obs[i].speed;
		double pr = rv_alg_fit_predict(out, obs[i].workers, obs[i].ps);

		ss_tot += (f - mean) * (f - mean);
		ss_res += (pr - f) * (pr - f);
		rel += pr > 0 ? (f - pr) * (f - pr) / (pr * pr) : 1;
	}
	out->rel_rmse = sqrt(rel / (double)used);
	if (ss_tot > 1e-12 * mean * mean)
		out->r2 = 1 - ss_res / ss_tot;
	else
		out->r2 = out->rel_rmse < 1e-6 ? 1 : 0;
	double cfg_part = (double)(nconf - 1) / (double)out->n_theta;
	double err_part = 1 - out->rel_rmse / 0.2;

	cfg_part = cfg_part > 1 ? 1 : cfg_part;
	err_part = err_part < 0 ? 0 : err_part;
	out->confidence = cfg_part * err_part;
}

int rv_alg_fit_speed(enum rv_alg_model model, const struct rv_alg_speed_obs *obs, size_t n,
		     struct rv_alg_fit *out)
{
	double x[FIT_MAX_THETA], y;
	size_t used = 0, k;
	int rc;

	if (!out || (n > 0 && !obs) || (model != RV_ALG_MODEL_SYNC && model != RV_ALG_MODEL_ASYNC))
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->model = model;
	out->n_theta = model_theta(model);
	k = (size_t)out->n_theta;

	for (size_t i = 0; i < n; i++)
		used += (size_t)fit_row(model, &obs[i], x, &y);
	if (used == 0)
		return -ENODATA;

	gsl_matrix *A = gsl_matrix_alloc(used, k);
	gsl_vector *b = gsl_vector_alloc(used);
	size_t *first = calloc(used, sizeof(*first));

	if (!A || !b || !first) {
		rc = -ENOMEM;
		goto out;
	}
	size_t r = 0, nconf = 0;

	for (size_t i = 0; i < n; i++) {
		if (!fit_row(model, &obs[i], x, &y))
			continue;
		for (size_t j = 0; j < k; j++)
			gsl_matrix_set(A, r, j, x[j] / y);
		gsl_vector_set(b, r, 1.0);
		r++;
		if (!config_seen(obs, first, nconf, &obs[i], model))
			first[nconf++] = i;
	}
	rc = nnls_enumerate(A, b, out->theta);
	if (rc < 0)
		goto out;
	out->n_points = (int)used;
	out->n_configs = (int)nconf;
	fit_seen(model, obs, n, out);
	fit_goodness(model, obs, n, used, nconf, out);
	rc = 0;
out:
	free(first);
	gsl_vector_free(b);
	gsl_matrix_free(A);
	return rc;
}

/*
 * Relative standard error of the predicted speed at (workers, ps): noise x
 * sqrt(x0' (A'A)^+ x0) / (x0 . theta), with A the weighted design rows of
 * every usable observation and all of the model's terms (not only those the
 * NNLS kept: which terms hold is itself uncertain, and a fit from three
 * configurations extrapolates with the full curve's freedom).  The
 * pseudo-inverse drops directions the data cannot see (collinear columns).
 * 0 when the model gives no prediction or the data is empty.
 */
double rv_alg_fit_predict_rse(const struct rv_alg_fit *fit, const struct rv_alg_speed_obs *obs,
			      size_t n, int workers, int ps, double noise)
{
	double x[FIT_MAX_THETA], y, m[FIT_MAX_THETA][FIT_MAX_THETA] = { { 0 } };
	size_t k = (size_t)model_theta(fit->model), used = 0;
	struct rv_alg_speed_obs o0 = { .workers = workers, .ps = ps, .speed = 1 };
	double rse = 0;

	if (!(noise > 0) || !fit_row(fit->model, &o0, x, &y))
		return 0;
	double x0[FIT_MAX_THETA], d0 = 0;

	for (size_t j = 0; j < k; j++) {
		x0[j] = x[j];
		d0 += x[j] * fit->theta[j];
	}
	if (!(d0 > 0))
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (!fit_row(fit->model, &obs[i], x, &y))
			continue;
		used++;
		for (size_t a = 0; a < k; a++)
			for (size_t b = 0; b < k; b++)
				m[a][b] += x[a] * x[b] / (y * y);
	}
	if (!used)
		return 0;
	gsl_matrix *M = gsl_matrix_alloc(k, k), *V = gsl_matrix_alloc(k, k);
	gsl_vector *S = gsl_vector_alloc(k), *work = gsl_vector_alloc(k);

	if (M && V && S && work) {
		for (size_t a = 0; a < k; a++)
			for (size_t b = 0; b < k; b++)
				gsl_matrix_set(M, a, b, m[a][b]);
		if (gsl_linalg_SV_decomp(M, V, S, work) == GSL_SUCCESS) {
			double smax = gsl_vector_get(S, 0), q = 0;

			for (size_t j = 0; j < k; j++) {
				double s = gsl_vector_get(S, j), v = 0;

				if (!(s > 1e-12 * smax))
					continue;
				for (size_t a = 0; a < k; a++)
					v += gsl_matrix_get(V, a, j) * x0[a];
				q += v * v / s;
			}
			rse = noise * sqrt(q) / d0;
		}
	}
	gsl_vector_free(work);
	gsl_vector_free(S);
	gsl_matrix_free(V);
	gsl_matrix_free(M);
	return rse;
}

bool rv_alg_fit_trusted(const struct rv_alg_fit *fit, const struct rv_alg_params *p)
{
	if (fit->n_configs < p->min_fit_configs)
		return false;
	return fit->r2 >= p->min_r2 || fit->rel_rmse <= p->max_fit_rel_err;
}
