/*
 * netcheck.c: groups and verdicts of the two-round network check (see
 * netcheck.h).  Pure; O(n log n); allocates a scratch array per call.
 */
#include "netcheck.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

struct timed {
	double t;
	int i;
};

static int timed_cmp(const void *a, const void *b)
{
	const struct timed *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

/* Round-0 time used to order nodes: failed or nonsense times sort last. */
static double order_time(const struct netcheck_node *nd)
{
	return nd->ok[0] && isfinite(nd->time_s[0]) && nd->time_s[0] >= 0 ? nd->time_s[0]
									  : INFINITY;
}

int netcheck_groups(int round, const struct netcheck_node *nodes, int n, struct netcheck_group *g,
		    int max_groups)
{
	if ((round != 0 && round != 1) || n < 2 || (round == 1 && !nodes))
		return -EINVAL;
	int ng = n / 2;
	if (max_groups < ng)
		return -ENOSPC;

	struct timed *o = malloc((size_t)n * sizeof(*o));
	if (!o)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		o[i] = (struct timed){ round == 1 ? order_time(&nodes[i]) : 0, i };
	if (round == 1)
		qsort(o, (size_t)n, sizeof(*o), timed_cmp);
	for (int k = 0; k < ng; k++) {
		g[k].n = 2;
		if (round == 0) {
			g[k].nodes[0] = o[2 * k].i;
			g[k].nodes[1] = o[2 * k + 1].i;
		} else {
			g[k].nodes[0] = o[k].i;         /* k-th fastest */
			g[k].nodes[1] = o[n - 1 - k].i; /* k-th slowest */
		}
	}
	if (n % 2) {
		/* round 0: the last index; round 1: the median node */
		g[ng - 1].nodes[g[ng - 1].n++] = o[round == 0 ? n - 1 : ng].i;
	}
	free(o);
	return ng;
}

int netcheck_verdict(const struct netcheck_node *nodes, int n, double straggler_ratio, int *verdict)
{
	if (n < 1 || !(straggler_ratio > 1.0))
		return -EINVAL;

	struct timed *t = malloc((size_t)n * sizeof(*t));
	double *best = malloc((size_t)n * sizeof(*best));
	int nt = 0, bad = 0;
	if (!t || !best) {
		free(t);
		free(best);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		best[i] = INFINITY;
		for (int r = 0; r < 2; r++)
			if (nodes[i].ok[r] && isfinite(nodes[i].time_s[r]) &&
			    nodes[i].time_s[r] >= 0 && nodes[i].time_s[r] < best[i])
				best[i] = nodes[i].time_s[r];
		if (isfinite(best[i]))
			t[nt++] = (struct timed){ best[i], i };
	}
	double median = 0;
	if (nt >= 3) {
		qsort(t, (size_t)nt, sizeof(*t), timed_cmp);
		median = nt % 2 ? t[nt / 2].t : (t[nt / 2 - 1].t + t[nt / 2].t) / 2;
	}
	for (int i = 0; i < n; i++) {
		if (!nodes[i].ok[0] && !nodes[i].ok[1])
			verdict[i] = NETCHECK_FAULTY;
		else if (nt >= 3 && isfinite(best[i]) && best[i] > straggler_ratio * median)
			verdict[i] = NETCHECK_STRAGGLER;
		else
			verdict[i] = NETCHECK_OK;
		bad += verdict[i] != NETCHECK_OK;
	}
	free(t);
	free(best);
	return bad;
}
