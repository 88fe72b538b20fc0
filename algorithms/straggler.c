/*
 * straggler.c: workers whose step time stands far above their peers'.  Each
 * worker is summarised by its median step time (robust to a single slow step
 * such as a checkpoint); a straggler has a robust z over the workers above
 * p->straggler_z and is at least p->straggler_ratio times the median.
 * Used by plan.c; pure.
 */
#include <errno.h>
#include <stdlib.h>

#include "alg_internal.h"

static int cmp_step(const void *a, const void *b)
{
	const struct rv_alg_step *x = a, *y = b;

	if (x->node != y->node)
		return (x->node > y->node) - (x->node < y->node);
	return (x->step_s > y->step_s) - (x->step_s < y->step_s);
}

int rv_alg_stragglers(const struct rv_alg_step *s, size_t n, const struct rv_alg_params *p,
		      int *nodes, size_t max)
{
	if ((n > 0 && !s) || !p || (max > 0 && !nodes))
		return -EINVAL;
	if (n == 0)
		return 0;

	struct rv_alg_step *c = malloc(n * sizeof(*c));
	double *med = malloc(n * sizeof(*med));
	double *sorted = malloc(n * sizeof(*sorted));
	double *tmp = malloc(n * sizeof(*tmp));
	int *ids = malloc(n * sizeof(*ids));
	size_t m = 0;
	int found = 0;

	if (!c || !med || !sorted || !tmp || !ids) {
		found = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (s[i].step_s > 0)
			c[m++] = s[i];
	n = m;
	qsort(c, n, sizeof(*c), cmp_step);
	/* per node: the median of its (sorted) step times */
	m = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j < n && c[j].node == c[i].node)
			j++;
		size_t k = j - i;

		med[m] = k % 2 ? c[i + k / 2].step_s
			       : (c[i + k / 2 - 1].step_s + c[i + k / 2].step_s) / 2;
		ids[m++] = c[i].node;
		i = j;
	}
	/* fewer than three workers: no majority to call anyone slow */
	if (m < 3)
		goto out;

	double median, mad;

	for (size_t i = 0; i < m; i++)
		sorted[i] = med[i];
	rv_alg_median_mad(sorted, tmp, m, &median, &mad);
	for (size_t i = 0; i < m; i++) {
		if (rv_alg_robust_z(med[i], median, mad) <= p->straggler_z ||
		    med[i] < p->straggler_ratio * median)
			continue;
		if ((size_t)found < max)
			nodes[found] = ids[i];
		found++;
	}
out:
	free(ids);
	free(tmp);
	free(sorted);
	free(med);
	free(c);
	return found;
}
