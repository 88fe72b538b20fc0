/*
 * oom.c: memory for a node relaunched after running out of memory.  The step
 * grows with the node's OOM count (a second OOM means the first step was too
 * small) and the result is capped; unlike DLRover, all-reduce jobs get the
 * same treatment.  Used by plan.c (rv_alg_plan_oom); pure.
 */
#include <errno.h>
#include <math.h>

#include "alg_internal.h"

/* Geometric: the report shows only the limit it hit (and the last RSS below
 * it), never the need, so each further OOM doubles the step; the per-node
 * limit bounds it, and right-sizing trims the excess once usage is measured.
 * An additive step (x1.5, x2, x2.5) took three or four relaunches to reach a
 * need 3-4x the request, each a plan. */
double rv_alg_oom_step(const struct rv_alg_params *p, int oom_count)
{
	double f = p->oom_factor;
	for (int i = 1; i < oom_count && i < 16; i++)
		f *= p->oom_growth >= 1 ? p->oom_growth : 1;
	return f;
}

int rv_alg_oom_memory(int64_t prev_mb, int64_t peak_mb, int oom_count,
		      const struct rv_alg_limits *lim, const struct rv_alg_params *p,
		      int64_t *out_mb)
{
	if (prev_mb <= 0 || peak_mb < 0 || oom_count < 1 || !lim || !p || !out_mb ||
	    p->oom_factor < 1)
		return -EINVAL;
	*out_mb = prev_mb;

	double factor = rv_alg_oom_step(p, oom_count);
	double want = (double)prev_mb * factor;
	double from_peak = (double)peak_mb * (1 + p->oom_peak_margin);
	double cap = p->oom_cap_mb > 0 ? (double)p->oom_cap_mb : INFINITY;
	/* A node given more than the cap already was sized so on purpose (a
	 * large model): only the node's size bounds it, else its first OOM
	 * would end the job. */
	if ((double)prev_mb > cap)
		cap = INFINITY;

	if (from_peak > want)
		want = from_peak;
	if (lim->max_memory_mb > 0 && (double)lim->max_memory_mb < cap)
		cap = (double)lim->max_memory_mb;
	/* the old node's memory is released, so only the increase must be free */
	if (lim->free_memory_mb >= 0 && (double)(prev_mb + lim->free_memory_mb) < cap)
		cap = (double)(prev_mb + lim->free_memory_mb);
	if (want > cap)
		want = cap;
	want = rv_alg_mb_up(want);
	if (want <= (double)prev_mb)
		return 0;
	*out_mb = (int64_t)want;
	return 1;
}
