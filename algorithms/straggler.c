/*
 * straggler.c: workers whose step time stands far above their peers'.  Each
 * worker is summarised by its median step time (robust to a single slow step
 * such as a checkpoint); a straggler has a robust z over the workers above
 * p->straggler_z and is at least p->straggler_ratio times the median.  When
 * every worker reports its compute time (its own work per step, without the
 * wait for its peers), that is the measure instead: in a synchronous job
 * every worker's step time is the slowest's and singles no one out.
 * Used by plan.c; pure.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "alg_internal.h"

/* By node, then by the measure kept in step_s (straggler_measure). */
static int cmp_step(const void *a, const void *b)
{
	const struct rv_alg_step *x = a, *y = b;

	if (x->node != y->node)
		return (x->node > y->node) - (x->node < y->node);
	return (x->step_s > y->step_s) - (x->step_s < y->step_s);
}

/* Copy into c the samples of s[0..n) with a measure, sorted by node.
 * Returns how many were copied. */
static size_t measured_copy(const struct rv_alg_step *s, size_t n, struct rv_alg_step *c)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++)
		if (s[i].step_s > 0 || s[i].compute_s > 0)
			c[m++] = s[i];
	qsort(c, m, sizeof(*c), cmp_step);
	return m;
}

/* Whether every worker of c[0..m) (sorted by node) has some sample with a
 * compute time. */
static bool all_computed(const struct rv_alg_step *c, size_t m)
{
	bool compute = true;

	for (size_t i = 0; i < m && compute;) {
		bool has = false;
		size_t j = i;

		for (; j < m && c[j].node == c[i].node; j++)
			has = has || c[j].compute_s > 0;
		compute = has;
		i = j;
	}
	return compute;
}

bool rv_alg_stragglers_by_compute(const struct rv_alg_step *s, size_t n)
{
	struct rv_alg_step *c = n ? malloc(n * sizeof(*c)) : NULL;
	if (!c)
		return false;
	size_t m = measured_copy(s, n, c);
	bool compute = m > 0 && all_computed(c, m);
	free(c);
	return compute;
}

/* Copy into c the samples of s[0..n) with a measure, that measure in
 * step_s: the compute time when every worker with a sample has one, else
 * the step time.  Returns how many were copied. */
static size_t straggler_measure(const struct rv_alg_step *s, size_t n, struct rv_alg_step *c)
{
	size_t m = measured_copy(s, n, c);
	bool compute = all_computed(c, m);

	n = m;
	m = 0;
	for (size_t i = 0; i < n; i++) {
		double v = compute ? c[i].compute_s : c[i].step_s;

		if (v > 0) {
			c[m] = c[i];
			c[m++].step_s = v;
		}
	}
	qsort(c, m, sizeof(*c), cmp_step);
	return m;
}

/* Per worker (m of them) its median step time, its node and whether it
 * straggles; the median over the workers.  Freed by medians_free. */
struct medians {
	double *med;
	int *ids;
	bool *slow;
	size_t m;
	double median;
};

static void medians_free(struct medians *w)
{
	free(w->slow);
	free(w->ids);
	free(w->med);
}

/* The standard error of the median of one worker's k step times c[0..k)
 * (sqrt(pi/2) robust spreads over the root of k; x and tmp: scratch of
 * k).  The ratio test gives a worker two of them: a worker slowed by
 * exactly straggler_ratio measures above it or below it by noise alone,
 * and one of four workers 1.5x slow in an async PS job was replaced on
 * one noise seed of three (h9-small-ps-straggler, 0.92 of the oracle's
 * speed on the others).  DESIGN-LOG.md, "Stragglers". */
static double median_se(const struct rv_alg_step *c, size_t k, double *x, double *tmp)
{
	double med, mad;

	if (k < 2)
		return 0;
	for (size_t i = 0; i < k; i++)
		x[i] = c[i].step_s;
	rv_alg_median_mad(x, tmp, k, &med, &mad);
	return ALG_MEDIAN_SE * ALG_MAD_SCALE * mad / sqrt((double)k);
}

/* Fill *w from n step samples (n > 0).  Returns how many workers straggle,
 * or -ENOMEM; *w is to be freed either way. */
static int straggler_medians(const struct rv_alg_step *s, size_t n, const struct rv_alg_params *p,
			     struct medians *w)
{
	*w = (struct medians){ .med = malloc(n * sizeof(*w->med)),
			       .ids = malloc(n * sizeof(*w->ids)),
			       .slow = malloc(n * sizeof(*w->slow)) };
	double *med = w->med;
	int *ids = w->ids;
	bool *slow = w->slow;
	struct rv_alg_step *c = malloc(n * sizeof(*c));
	double *sorted = malloc(n * sizeof(*sorted));
	double *tmp = malloc(n * sizeof(*tmp));
	double *se = malloc(n * sizeof(*se));
	size_t m = 0;
	int found = 0;

	if (!med || !ids || !slow || !c || !sorted || !tmp || !se) {
		found = -ENOMEM;
		goto out;
	}
	n = straggler_measure(s, n, c);
	/* per node: the median of its (sorted) step times */
	m = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j < n && c[j].node == c[i].node)
			j++;
		size_t k = j - i;

		med[m] = k % 2 ? c[i + k / 2].step_s
			       : (c[i + k / 2 - 1].step_s + c[i + k / 2].step_s) / 2;
		se[m] = median_se(c + i, k, sorted, tmp);
		ids[m++] = c[i].node;
		i = j;
	}
	w->m = m;
	for (size_t i = 0; i < m; i++)
		slow[i] = false;
	/* fewer than three workers: no majority to call anyone slow */
	if (m < 3)
		goto out;

	double median, mad;

	for (size_t i = 0; i < m; i++)
		sorted[i] = med[i];
	rv_alg_median_mad(sorted, tmp, m, &median, &mad);
	w->median = median;
	for (size_t i = 0; i < m; i++) {
		if (rv_alg_robust_z(med[i], median, mad) <= p->straggler_z ||
		    med[i] + 2 * se[i] < p->straggler_ratio * median)
			continue;
		slow[i] = true;
		found++;
	}
out:
	free(se);
	free(tmp);
	free(sorted);
	free(c);
	return found;
}

int rv_alg_stragglers(const struct rv_alg_step *s, size_t n, const struct rv_alg_params *p,
		      int *nodes, size_t max)
{
	if ((n > 0 && !s) || !p || (max > 0 && !nodes))
		return -EINVAL;
	if (n == 0)
		return 0;

	struct medians w;
	int found = straggler_medians(s, n, p, &w);

	for (size_t i = 0, k = 0; found > 0 && i < w.m; i++)
		if (w.slow[i] && k < max)
			nodes[k++] = w.ids[i];
	medians_free(&w);
	return found;
}

int rv_alg_straggler_share(const struct rv_alg_step *s, size_t n, enum rv_alg_strategy strategy,
			   const struct rv_alg_params *p, double *share)
{
	if ((n > 0 && !s) || !p || !share)
		return -EINVAL;
	*share = 1;
	if (n == 0)
		return 0;

	struct medians w;
	int found = straggler_medians(s, n, p, &w);
	const double *med = w.med;

	if (found > 0 && w.median > 0) {
		if (strategy == RV_ALG_ALLREDUCE) {
			/* every step waits for the slowest worker */
			double all = 0, kept = 0;

			for (size_t i = 0; i < w.m; i++) {
				all = med[i] > all ? med[i] : all;
				if (!w.slow[i])
					kept = med[i] > kept ? med[i] : kept;
			}
			if (all > 0 && kept > 0)
				*share = kept / all;
		} else {
			/* async PS: each worker adds its own rate; a
			 * replacement runs at the median worker's */
			double with = 0, without = 0;

			for (size_t i = 0; i < w.m; i++) {
				with += 1 / med[i];
				without += w.slow[i] ? 1 / w.median : 1 / med[i];
			}
			if (without > 0)
				*share = with / without;
		}
	}
	medians_free(&w);
	return found;
}
