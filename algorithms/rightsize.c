/*
 * rightsize.c: CPU and memory per role from observed usage: a high quantile
 * plus a margin, memory never below the observed peak.  Hysteresis keeps
 * plans from flapping: a value moves only when the change is larger than
 * p->hysteresis and does not reverse the role's last resize within the
 * reversal window.  Used by plan.c; pure.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alg_internal.h"

static int sign_of(double x)
{
	return (x > 0) - (x < 0);
}

/*
 * Whether to move from cur to want given the last resize (from -> to) and
 * whether it is recent: beyond the hysteresis band and not a reversal.
 */
static int should_move(double cur, double want, double last_from, double last_to, int recent,
		       double hysteresis)
{
	if (!(cur > 0))
		return want > 0;
	if (fabs(want - cur) / cur <= hysteresis)
		return 0;
	/* A recent resize may be corrected but not undone: going back to (or
	 * past) where it started is what flapping looks like. */
	if (recent && sign_of(last_to - last_from) * sign_of(want - cur) < 0 &&
	    sign_of(want - last_from) * sign_of(last_to - last_from) <= 0)
		return 0;
	return 1;
}

void rv_alg_usage_throttling(struct rv_alg_usage *u, int64_t periods, int64_t throttled,
			     int64_t throttled_us, int64_t ms)
{
	u->has_throttled = u->has_held = false;
	if (periods <= 0 || throttled < 0 || throttled > periods)
		return;
	u->has_throttled = true;
	u->throttled = (double)throttled / (double)periods;
	if (ms > 0 && throttled_us >= 0 && (throttled_us > 0 || throttled == 0)) {
		u->has_held = true;
		u->held = (double)throttled_us / ((double)ms * 1000);
	}
}

/* What the kernel's throttling counters say of one sample: its throttled
 * share, or (need) the CPU it used plus the cores held back; false when the
 * sample does not carry it. */
static bool throttling_of(const struct rv_alg_usage *u, bool need, double *x)
{
	if (need ? !u->has_held : !u->has_throttled)
		return false;
	*x = need ? u->cpu + u->held : u->throttled;
	return true;
}

/* The median of throttling_of over a role's samples (node < 0: all nodes)
 * that carry it; -ENODATA with fewer than min_samples. */
static int throttling_median(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role,
			     int node, size_t min_samples, bool need, double *out)
{
	double v;
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		m += u[i].role == role && (node < 0 || u[i].node == node) &&
		     throttling_of(&u[i], need, &v);
	if (m == 0 || m < min_samples)
		return -ENODATA;
	double *x = malloc(m * sizeof(*x));
	if (!x)
		return -ENOMEM;
	m = 0;
	for (size_t i = 0; i < n; i++)
		if (u[i].role == role && (node < 0 || u[i].node == node) &&
		    throttling_of(&u[i], need, &v))
			x[m++] = v;
	*out = rv_alg_quantile(x, m, 0.5);
	free(x);
	return 0;
}

int rv_alg_throttled_share(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role, int node,
			   size_t min_samples, double *share)
{
	return throttling_median(u, n, role, node, min_samples, false, share);
}

double rv_alg_starved_cpu(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role, double cpu,
			  double margin, const struct rv_alg_params *p)
{
	/* The kernel adds each CPU's throttled time: over wall time it is
	 * the CPU the node wanted and did not get.  A doubling short of the
	 * need starved again, one plan more. */
	double need, grown = cpu * p->starved_factor;
	size_t ms = (size_t)(p->min_usage_samples > 0 ? p->min_usage_samples : 1);
	if (throttling_median(u, n, role, -1, ms, true, &need) == 0 && need * (1 + margin) > grown)
		grown = need * (1 + margin);
	return grown;
}

bool rv_alg_cpu_pinned(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role, int node,
		       size_t min_samples, double limit, double median_share,
		       const struct rv_alg_params *p)
{
	/* With cgroup throttling counters the kernel says it: a node held back
	 * by its limit is throttled in most of its quota periods; one whose
	 * limit is tight but enough is throttled in fewer than half (bursts
	 * only).  Usage alone cannot tell the two apart under noise. */
	double share;
	if (p->throttle_starved > 0 &&
	    rv_alg_throttled_share(u, n, role, node, min_samples ? min_samples : 1, &share) == 0)
		return share >= p->throttle_starved;
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		m += u[i].role == role && (node < 0 || u[i].node == node);
	if (m == 0 || m < min_samples)
		return false;
	double *cpu = malloc(m * sizeof(*cpu));
	if (!cpu)
		return false;
	m = 0;
	for (size_t i = 0; i < n; i++)
		if (u[i].role == role && (node < 0 || u[i].node == node))
			cpu[m++] = u[i].cpu;
	double q = rv_alg_quantile(cpu, m, p->usage_quantile);
	double med = rv_alg_quantile(cpu, m, 0.5);
	free(cpu);
	return q >= p->cpu_pinned * limit && med >= median_share * limit;
}

static double usage_of(const struct rv_alg_usage *u, bool cpu)
{
	return cpu ? u->cpu : (double)u->memory_mb;
}

/* Least-squares slope of a role's memory (MiB per ms) or CPU use (cores per
 * ms) over time and its standard error, over the samples at or after
 * from_ms; their time span in *span_ms.  -ENODATA with fewer than 6 samples
 * or no span. */
static int usage_slope(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role,
		       int64_t from_ms, bool cpu, double *slope, double *se, int64_t *span_ms)
{
	double st = 0, sm = 0, k = 0;
	int64_t t0 = INT64_MAX, t1 = INT64_MIN;
	for (size_t i = 0; i < n; i++)
		if (u[i].role == role && u[i].t_ms >= from_ms) {
			if (u[i].t_ms < t0)
				t0 = u[i].t_ms;
			if (u[i].t_ms > t1)
				t1 = u[i].t_ms;
			st += (double)u[i].t_ms;
			sm += usage_of(&u[i], cpu);
			k++;
		}
	if (k < 6 || t1 <= t0)
		return -ENODATA;
	st /= k;
	sm /= k;
	double sxx = 0, sxy = 0;
	for (size_t i = 0; i < n; i++)
		if (u[i].role == role && u[i].t_ms >= from_ms) {
			double x = (double)u[i].t_ms - st;
			sxx += x * x;
			sxy += x * (usage_of(&u[i], cpu) - sm);
		}
	if (!(sxx > 0))
		return -ENODATA;
	double b = sxy / sxx, sse = 0;
	for (size_t i = 0; i < n; i++)
		if (u[i].role == role && u[i].t_ms >= from_ms) {
			double r = usage_of(&u[i], cpu) - sm - b * ((double)u[i].t_ms - st);
			sse += r * r;
		}
	*slope = b;
	*se = sqrt(sse / (k - 2) / sxx);
	*span_ms = t1 - t0;
	return 0;
}

/* How much a role's CPU use rises at its trend over as much time again as
 * its samples span (at most horizon_ms), 0 unless it rises beyond 4
 * standard errors. */
static double cpu_rise(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role,
		       int64_t horizon_ms)
{
	double b, se;
	int64_t span;
	if (usage_slope(u, n, role, INT64_MIN, true, &b, &se, &span) < 0 || !(b > 4 * se))
		return 0;
	return b * (double)(span < horizon_ms ? span : horizon_ms);
}

/* Whether the samples of a role from from_ms on rise significantly slower
 * than slope b (more than 2 of their standard errors below) and at less
 * than half its rate.  *flat: they do not rise significantly themselves
 * (their slope is within 2 standard errors of 0); *seen (may be NULL): they would have
 * shown a rise at rate b (beyond 3 of their standard errors, as the rise
 * itself was read). */
static bool mem_slower(const struct rv_alg_usage *h, size_t nh, enum rv_alg_role role,
		       int64_t from_ms, double b, bool *flat, bool *seen)
{
	double br, ser;
	int64_t span;
	*flat = false;
	if (seen)
		*seen = false;
	if (usage_slope(h, nh, role, from_ms, false, &br, &ser, &span) < 0)
		return false;
	*flat = br < 2 * ser;
	if (seen)
		*seen = b > 3 * ser;
	return br + 2 * ser < b && br < b / 2;
}

/* Whether a role's memory rises over its history h: 1 with a slope beyond 3
 * standard errors (*slope in MiB per ms); 2 when it rose so but has ended:
 * the newer half of the span rises significantly slower (more than 2 of its
 * standard errors below) and at less than half the rate (over a long
 * history a rise 10% slower is significant, yet still a rise), and the rise
 * is over in it: the newer half no longer rises significantly, or its newer
 * half (the newest quarter) is slower so too (the rise ended within the
 * newer half); 0 otherwise.  A newer half still rising beyond 2 of its
 * standard errors is a rise that noise made look slower, not one that
 * ended.  Errs towards "rising": a trim too early is an OOM, a trim too
 * late a little memory for a while. */
static int mem_rising(const struct rv_alg_usage *h, size_t nh, enum rv_alg_role role, double *slope)
{
	double b, se;
	int64_t span;
	bool flat, flat_q, seen;
	*slope = 0;
	if (usage_slope(h, nh, role, INT64_MIN, false, &b, &se, &span) < 0 || !(b > 3 * se))
		return 0;
	int64_t t1 = INT64_MIN;
	for (size_t i = 0; i < nh; i++)
		if (h[i].role == role && h[i].t_ms > t1)
			t1 = h[i].t_ms;
	/* The newer half must be long enough to have shown the rise: the
	 * newer 55 s of a 110 s history read flat on noise, the rise passed
	 * for ended and the job OOMed 200 s later. */
	if (mem_slower(h, nh, role, t1 - span / 2, b, &flat, &seen) && seen &&
	    (flat || mem_slower(h, nh, role, t1 - span / 4, b, &flat_q, NULL)))
		return 2;
	*slope = b;
	return 1;
}

/* The peak of a role's memory over u and h. */
static double mem_peak(const struct rv_alg_usage *u, size_t n, const struct rv_alg_usage *h,
		       size_t nh, enum rv_alg_role role)
{
	double peak = 0;
	for (size_t i = 0; i < n; i++)
		if (u[i].role == role && (double)u[i].memory_mb > peak)
			peak = (double)u[i].memory_mb;
	for (size_t i = 0; i < nh; i++)
		if (h[i].role == role && (double)h[i].memory_mb > peak)
			peak = (double)h[i].memory_mb;
	return peak;
}

int rv_alg_mem_rises(const struct rv_alg_usage *h, size_t nh, enum rv_alg_role role)
{
	double slope;
	return mem_rising(h, nh, role, &slope) == 1;
}

double rv_alg_mem_rise_target(const struct rv_alg_usage *u, size_t n, const struct rv_alg_usage *h,
			      size_t nh, enum rv_alg_role role, const struct rv_alg_params *p,
			      double ahead_ms, double *at)
{
	double slope;
	if (!h) {
		h = u;
		nh = n;
	}
	*at = 0;
	if (mem_rising(h, nh, role, &slope) != 1)
		return 0;
	double peak = mem_peak(u, n, h, nh, role);
	double window = p->usage_window_ms > 0 ? (double)p->usage_window_ms : 600000;
	*at = peak + slope * ahead_ms;
	return rv_alg_mb_up((peak + slope * 2 * window) * (1 + p->mem_margin));
}

bool rv_alg_role_starved(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role,
			 const struct rv_alg_resource *cur, const struct rv_alg_params *p)
{
	if (!u || !cur || !p || !(cur->cpu > 0))
		return false;
	/* Use at the limit cannot tell "needs exactly this" from "needs more"
	 * (throttling hides the rest): for throughput's sake it counts as
	 * starved; the next plan right-sizes down if the need was smaller.
	 * The median too: noise alone lifts a right-sized role's upper
	 * quantile to its limit now and then; starvation holds the middle
	 * there. */
	return rv_alg_cpu_pinned(u, n, role, -1,
				 (size_t)(p->min_usage_samples > 0 ? p->min_usage_samples : 1),
				 cur->cpu, 0.97, p);
}

int rv_alg_rightsize_trend(const struct rv_alg_usage *u, size_t n, const struct rv_alg_usage *h,
			   size_t nh, enum rv_alg_role role, const struct rv_alg_resource *cur,
			   const struct rv_alg_resize *last, int64_t now_ms,
			   const struct rv_alg_limits *lim, const struct rv_alg_params *p,
			   double behind, struct rv_alg_resource *out)
{
	if ((n > 0 && !u) || (nh > 0 && !h) || !cur || !lim || !p || !out ||
	    p->usage_quantile < 0 || p->usage_quantile > 1)
		return -EINVAL;
	if (!h) {
		h = u;
		nh = n;
	}
	*out = *cur;

	size_t m = 0;

	for (size_t i = 0; i < n; i++)
		m += u[i].role == role;
	if (m == 0 || m < (size_t)(p->min_usage_samples > 0 ? p->min_usage_samples : 1))
		return -ENODATA;

	double *cpu = malloc(m * sizeof(*cpu));
	double *mem = malloc(m * sizeof(*mem));
	double peak = 0;

	if (!cpu || !mem) {
		free(cpu);
		free(mem);
		return -ENOMEM;
	}
	m = 0;
	for (size_t i = 0; i < n; i++) {
		if (u[i].role != role)
			continue;
		cpu[m] = u[i].cpu;
		mem[m] = (double)u[i].memory_mb;
		if (mem[m] > peak)
			peak = mem[m];
		m++;
	}
	double q_cpu = rv_alg_quantile(cpu, m, p->usage_quantile);
	/* The margin follows the noise: a steady role gets cpu_margin, a noisy
	 * one 0.6 robust spreads (on top of the quantile) (1.4826 MAD / median) so its samples stay clear
	 * of the limit, where they would read as starvation. */
	double margin = p->cpu_margin;
	/* With cgroup throttling counters the kernel tells a starved role
	 * from a tight one, so the limit need not keep noisy samples clear of
	 * it: the need is the middle of the samples (the median, with two
	 * standard errors of it on top of the margin).  A high quantile plus a
	 * noise margin gave a role with 14% usage noise 1.25x its need. */
	double thr_share;
	bool by_median =
		rv_alg_throttled_share(u, n, role, -1,
				       (size_t)(p->min_usage_samples > 0 ? p->min_usage_samples
									 : 1),
				       &thr_share) == 0;
	{
		double *tmp = malloc(m * sizeof(*tmp)), *c2 = malloc(m * sizeof(*c2));
		if (tmp && c2) {
			double med, mad;
			memcpy(c2, cpu, m * sizeof(*c2));
			rv_alg_median_mad(c2, tmp, m, &med, &mad);
			double spread = med > 0 ? 1.4826 * mad / med : 0;
			if (by_median && med > 0) {
				q_cpu = med;
				margin = p->cpu_margin + 2 * spread / sqrt((double)m);
			} else if (0.6 * spread > margin) {
				margin = 0.6 * spread;
			}
		} /* out of memory: the quantile and margin as they are */
		free(tmp);
		free(c2);
	}
	double want_cpu = q_cpu * (1 + margin);
	/* Use pinned at the limit hides the need: the role is starved, grow it. */
	int starved = rv_alg_role_starved(u, n, role, cur, p);

	if (starved)
		want_cpu = rv_alg_starved_cpu(u, n, role, cur->cpu, margin, p);
	/* behind a bottleneck that grows: the demand follows the speed */
	int follows = 0;
	if (!starved && behind > 1 &&
	    q_cpu * (1 + margin) * behind > cur->cpu * (1 + p->cpu_margin)) {
		want_cpu = q_cpu * (1 + margin) * behind;
		follows = 1;
	}
	double want_mem = rv_alg_quantile(mem, m, p->usage_quantile) * (1 + p->mem_margin);
	/* The peak over the memory history too: memory follows the job's
	 * progress (restored from checkpoints), not its configuration. */
	for (size_t i = 0; i < nh; i++)
		if (h[i].role == role && (double)h[i].memory_mb > peak)
			peak = (double)h[i].memory_mb;
	/* Memory that keeps rising (caches, embedding tables that grow with
	 * the data): the trend over the history, across plans (the window of
	 * one configuration after its warm-up is too short to see it).  While
	 * it rises it is never trimmed, and grown only when it would reach the
	 * limit within a quarter of a usage window (before a later plan could
	 * act), then for where it will be two windows from now: sized for
	 * where it was, or a window ahead at every plan, each plan chased it
	 * (a plan each, and late OOMs). */
	double soon, slope;
	double window = p->usage_window_ms > 0 ? (double)p->usage_window_ms : 600000;
	double target = rv_alg_mem_rise_target(u, n, h, nh, role, p, window / 4, &soon);
	bool rising = target > 0, rise_hold = false, ended = false;
	if (rising) {
		if (soon <= (double)cur->memory_mb)
			rise_hold = true;
		else
			want_mem = target;
	} else if (mem_rising(h, nh, role, &slope) == 2) {
		ended = true;
		/* the rise ended: the quantile of a window that saw it rise
		 * is below where it stopped; the peak and the margin */
		if (peak * (1 + p->mem_margin) > want_mem)
			want_mem = peak * (1 + p->mem_margin);
	}

	free(cpu);
	free(mem);

	/* CPU in tenths of a core, at least one tenth: the nearest tenth, but
	 * never less than half the margin above the quantile (rounding up
	 * always would add up to another 5% at 2 cores) */
	if (!starved) {
		double floor_cpu = rv_alg_cpu_up(q_cpu * (1 + margin / 2));
		double nearest = round(want_cpu * 10) / 10;

		want_cpu = nearest > floor_cpu ? nearest : floor_cpu;
	}
	want_cpu = rv_alg_cpu_up(want_cpu);
	if (want_cpu < 0.1)
		want_cpu = 0.1;
	if (lim->max_cpu > 0 && want_cpu > lim->max_cpu)
		want_cpu = lim->max_cpu;
	if (want_mem < peak)
		want_mem = peak;
	want_mem = rv_alg_mb_up(want_mem);
	if (lim->max_memory_mb > 0 && want_mem > (double)lim->max_memory_mb)
		want_mem = (double)lim->max_memory_mb;

	int recent = last && last->t_ms > 0 && now_ms - last->t_ms < p->reversal_window_ms;
	struct rv_alg_resize none = {0};

	if (!last)
		last = &none;
	/* Growth near the limit (within 3%) skips the hysteresis band: waiting
	 * would only let the role read as starved next time (and double).  A
	 * right-sized role sits within 5% on noise alone, and growth within
	 * the margin is rounding (a tenth of a core per plan): those wait for
	 * the band. */
	int near_limit = cur->cpu > 0 && want_cpu > cur->cpu * (1 + p->cpu_margin) + 1e-9 &&
			 q_cpu >= 0.97 * cur->cpu;

	/* Except right after the role's own recent shrink, back towards where
	 * it started: a shrink sets the limit just above the quantile, so the
	 * quantile sits within 3% of it on noise alone; growing back is the
	 * band's (or the starvation test's) to decide, not a plan of its own. */
	if (near_limit && recent && last->to.cpu < last->from.cpu && cur->cpu == last->to.cpu &&
	    want_cpu < last->from.cpu)
		near_limit = 0;

	/* CPU the last resize set by a starvation growth (x starved_factor)
	 * was a guess, not a measure: the first size from usage after it
	 * replaces it whatever the band (a doubling from 4.4 to 8.8 cores for
	 * a need of 8 stayed 10% above it: the trim to 8.3 was within 7%). */
	int guessed = last->t_ms > 0 && last->from.cpu > 0 && cur->cpu == last->to.cpu &&
		      fabs(last->to.cpu - rv_alg_cpu_up(last->from.cpu * p->starved_factor)) <
			      0.05 &&
		      want_cpu < cur->cpu;

	/* CPU use that still rises (a warm-up ramp longer than the speed test
	 * could see under noise) is not the need: no shrink from it (13.5
	 * cores cut to 3.1 for a need of 6, from the first 120 s of a 300 s
	 * ramp; the role then starved, and every starvation growth restarted
	 * the exploration). */
	if (want_cpu < cur->cpu &&
	    cpu_rise(u, n, role, p->usage_window_ms) > 2 * p->hysteresis * q_cpu)
		want_cpu = cur->cpu;

	if (starved || near_limit || follows || guessed ||
	    should_move(cur->cpu, want_cpu, last->from.cpu, last->to.cpu, recent, p->hysteresis))
		out->cpu = want_cpu;
	/* below the peak is a certain OOM: no hysteresis for that; memory that
	 * rises past the limit within a window grows now, whatever the band.
	 * The trim of a rise that ended is no reversal of the growth before
	 * it: that growth was sized for a rise that went on, the trim for the
	 * peak it stopped at (held back as a reversal, a restart's growth to
	 * two windows ahead stayed half again above the need to the end). */
	bool grow_now = (double)cur->memory_mb < peak || (rising && !rise_hold);
	if (grow_now ||
	    (!rising && should_move((double)cur->memory_mb, want_mem, (double)last->from.memory_mb,
				    (double)last->to.memory_mb, recent && !ended, p->hysteresis)))
		out->memory_mb = (int64_t)want_mem;
	return out->cpu != cur->cpu || out->memory_mb != cur->memory_mb;
}

int rv_alg_rightsize_behind(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role,
			    const struct rv_alg_resource *cur, const struct rv_alg_resize *last,
			    int64_t now_ms, const struct rv_alg_limits *lim,
			    const struct rv_alg_params *p, double behind,
			    struct rv_alg_resource *out)
{
	return rv_alg_rightsize_trend(u, n, u, n, role, cur, last, now_ms, lim, p, behind, out);
}

int rv_alg_rightsize(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role,
		     const struct rv_alg_resource *cur, const struct rv_alg_resize *last,
		     int64_t now_ms, const struct rv_alg_limits *lim, const struct rv_alg_params *p,
		     struct rv_alg_resource *out)
{
	return rv_alg_rightsize_behind(u, n, role, cur, last, now_ms, lim, p, 1, out);
}
