/*
 * hotps.c: hot parameter servers.  A PS whose recent CPU stands far above
 * its peers (robust z over median and MAD, so one hot PS cannot hide itself
 * by inflating a standard deviation) and near its own limit is migrated to a
 * bigger CPU allocation; when every PS is near its limit the PS count grows
 * instead, since migration would only move the bottleneck.  Used by plan.c.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "alg_internal.h"

/* Mean CPU of the latest k samples of one PS; NAN when it has none. */
static double recent_cpu(const struct rv_alg_usage *u, size_t n, int node, int k)
{
	double sum = 0;
	int got = 0;
	int64_t after = INT64_MAX;

	/* walk back in time k times without sorting the caller's array */
	while (got < k) {
		int64_t best = INT64_MIN;
		size_t bi = n;

		for (size_t i = 0; i < n; i++)
			if (u[i].role == RV_ALG_PS_ROLE && u[i].node == node && u[i].t_ms < after &&
			    u[i].t_ms > best) {
				best = u[i].t_ms;
				bi = i;
			}
		if (bi == n)
			break;
		sum += u[bi].cpu;
		got++;
		after = best;
	}
	return got ? sum / got : NAN;
}

/* Migrate hot PS i (CPU use x, robust z over the median) to hot_cpu_factor
 * times its use, within the node's CPU and what *budget (free CPU, < 0
 * unknown) has left: 1 when migrated, 0 when no CPU is left to give it. */
static int hot_ps_migrate(size_t i, double x, double z, double median,
			  const struct rv_alg_group *ps, const struct rv_alg_limits *lim,
			  const struct rv_alg_params *p, double *budget,
			  struct rv_alg_decision *out)
{
	double limit = ps->res.cpu;
	double want = rv_alg_cpu_up(x * p->hot_cpu_factor);

	if (lim->max_cpu > 0 && want > lim->max_cpu)
		want = lim->max_cpu;
	if (*budget >= 0 && want - limit > *budget)
		want = limit + floor(*budget * 10) / 10;
	if (want <= limit) {
		rv_alg_reason_add(out,
				  "PS %zu is hot (%.1f of %.1f CPU, z=%.1f) but no CPU is left to "
				  "give it",
				  i, x, limit, z);
		return 0;
	}
	if (*budget >= 0)
		*budget -= want - limit;
	if (out->n_migrate < RV_ALG_MAX_NODES) {
		struct rv_alg_migration *mg = &out->migrate[out->n_migrate++];

		mg->node = (int)i;
		mg->res.cpu = want;
		mg->res.memory_mb = ps->res.memory_mb;
	}
	rv_alg_reason_add(out,
			  "PS %zu is hot: %.1f of %.1f CPU (z=%.1f over median %.1f); migrate to "
			  "%.1f CPU",
			  i, x, limit, z, median, want);
	return 1;
}

int rv_alg_hot_ps(const struct rv_alg_usage *u, size_t n, const struct rv_alg_group *ps,
		  const struct rv_alg_limits *lim, const struct rv_alg_params *p, int *grow_ps,
		  struct rv_alg_decision *out)
{
	if ((n > 0 && !u) || !ps || !lim || !p || !grow_ps || !out || ps->count < 0)
		return -EINVAL;
	*grow_ps = 0;
	if (ps->count == 0 || !(ps->res.cpu > 0))
		return 0;

	size_t np = (size_t)ps->count;
	double *x = malloc(np * sizeof(*x));
	double *sorted = malloc(np * sizeof(*sorted));
	double *tmp = malloc(np * sizeof(*tmp));
	double limit = ps->res.cpu, budget = lim->free_cpu;
	size_t m = 0, saturated = 0;
	int hot = 0;

	if (!x || !sorted || !tmp) {
		hot = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < np; i++) {
		x[i] = recent_cpu(u, n, (int)i, p->hot_samples > 0 ? p->hot_samples : 1);
		if (isnan(x[i]))
			continue;
		sorted[m++] = x[i];
		/* pinned over the window: the role starvation test on this PS */
		saturated += rv_alg_cpu_pinned(u, n, RV_ALG_PS_ROLE, (int)i, 3, limit,
					       p->ps_saturated, p);
	}
	if (m == 0)
		goto out;
	if (saturated == np) {
		*grow_ps = 1;
		rv_alg_reason_add(out, "all %zu PS pinned at their %.1f CPU", np, limit);
		goto out;
	}
	/* fewer than three PS with data: no peers to stand out from */
	if (m < 3)
		goto out;

	double median, mad;

	rv_alg_median_mad(sorted, tmp, m, &median, &mad);
	for (size_t i = 0; i < np; i++) {
		if (isnan(x[i]))
			continue;
		double z = rv_alg_robust_z(x[i], median, mad);

		if (z <= p->hot_z || x[i] < p->hot_util * limit)
			continue;
		hot += hot_ps_migrate(i, x[i], z, median, ps, lim, p, &budget, out);
	}
out:
	free(tmp);
	free(sorted);
	free(x);
	return hot;
}
