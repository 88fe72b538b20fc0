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

/* One role's sizing (rv_alg_rightsize_trend): what its rules read and
 * what they want.  The rules that let a CPU change through the hysteresis
 * band are cpu_forces[]; why each exists: algorithms/DESIGN-LOG.md,
 * "Right-sizing". */
struct sizing {
	const struct rv_alg_usage *u, *h; /* the window; the memory history */
	size_t n, nh;
	enum rv_alg_role role;
	const struct rv_alg_resource *cur;
	const struct rv_alg_resize *last; /* never NULL (a zero resize) */
	const struct rv_alg_limits *lim;
	const struct rv_alg_params *p;
	double behind; /* the growth of the bottleneck this role follows */
	int recent;    /* the last resize is within the reversal window */
	double q_cpu, margin, want_cpu, want_mem, peak;
	double need_se; /* the relative standard error of q_cpu (0: none) */
	int starved, follows;
	bool rising, rise_hold, ended; /* the memory trend */
};

static size_t sizing_min_samples(const struct rv_alg_params *p)
{
	return (size_t)(p->min_usage_samples > 0 ? p->min_usage_samples : 1);
}

/* The CPU need from m samples cpu[] (sorted here): the usage quantile plus a margin that
 * follows the noise (0.6 robust spreads when larger than cpu_margin); with
 * throttling counters the median plus a margin from the measured
 * variability alone, two standard errors of the median (at least
 * cpu_margin_min; a median's error is ALG_MEDIAN_SE times a mean's:
 * taken as a mean's, the margin was 1.6 of them), since the kernel then tells a starved role from a tight
 * one: tight when usage is steady, wider when it varies.  A constant margin
 * stacked on it held small roles 5-10% over their need (4 cores sized 4.2
 * to 4.4).  DESIGN-LOG.md, "Right-sizing", CPU need. */
static void sizing_cpu_need(struct sizing *s, double *cpu, size_t m)
{
	const struct rv_alg_params *p = s->p;
	double thr_share;
	bool by_median = rv_alg_throttled_share(s->u, s->n, s->role, -1, sizing_min_samples(p),
						&thr_share) == 0;
	double *tmp = malloc(m * sizeof(*tmp)), *c2 = malloc(m * sizeof(*c2));

	s->q_cpu = rv_alg_quantile(cpu, m, p->usage_quantile);
	s->margin = p->cpu_margin;
	if (tmp && c2) {
		double med, mad;
		memcpy(c2, cpu, m * sizeof(*c2));
		rv_alg_median_mad(c2, tmp, m, &med, &mad);
		double spread = med > 0 ? 1.4826 * mad / med : 0;
		if (by_median && med > 0) {
			s->q_cpu = med;
			s->need_se = ALG_MEDIAN_SE * spread / sqrt((double)m);
			s->margin = 2 * s->need_se;
			if (s->margin < p->cpu_margin_min)
				s->margin = p->cpu_margin_min;
		} else if (0.6 * spread > s->margin) {
			s->margin = 0.6 * spread;
		}
	} /* out of memory: the quantile and margin as they are */
	free(tmp);
	free(c2);
}

/* The CPU wanted: the need, grown when the role is starved (use pinned at
 * the limit hides the need) or when it follows a bottleneck that grows;
 * then in tenths of a core (the nearest tenth, never under half the margin
 * above the need) within the node's limit. */
static void sizing_cpu_want(struct sizing *s)
{
	const struct rv_alg_params *p = s->p;
	const struct rv_alg_resource *cur = s->cur;

	s->want_cpu = s->q_cpu * (1 + s->margin);
	s->starved = rv_alg_role_starved(s->u, s->n, s->role, cur, p);
	if (s->starved)
		s->want_cpu = rv_alg_starved_cpu(s->u, s->n, s->role, cur->cpu, s->margin, p);
	if (!s->starved && s->behind > 1 &&
	    s->q_cpu * (1 + s->margin) * s->behind > cur->cpu * (1 + p->cpu_margin)) {
		s->want_cpu = s->q_cpu * (1 + s->margin) * s->behind;
		s->follows = 1;
	}
}

/* How far above the need the rounding to a tenth of a core may go down
 * to: half the margin, never into two standard errors of the median the
 * need was read from.  The rounding may take what the margin's floor
 * adds over the sampling error, not the sampling error itself: a 4-core
 * worker's median read 3.82 over 117 samples under 13% usage noise, the
 * margin's floor (3%) wanted 3.93, the nearest tenth gave 3.9, the
 * workers starved and doubled (h5-max-ps-noise-0, seed 7, a plan more).
 * DESIGN-LOG.md, "Right-sizing", Rounding. */
static double cpu_round_floor(const struct sizing *s)
{
	double se2 = 2 * s->need_se;

	return se2 > s->margin / 2 ? se2 : s->margin / 2;
}

static void sizing_cpu_round(struct sizing *s)
{
	if (!s->starved) {
		double floor_cpu = rv_alg_cpu_up(s->q_cpu * (1 + cpu_round_floor(s)));
		double nearest = round(s->want_cpu * 10) / 10;

		s->want_cpu = nearest > floor_cpu ? nearest : floor_cpu;
	}
	s->want_cpu = rv_alg_cpu_up(s->want_cpu);
	if (s->want_cpu < 0.1)
		s->want_cpu = 0.1;
	if (s->lim->max_cpu > 0 && s->want_cpu > s->lim->max_cpu)
		s->want_cpu = s->lim->max_cpu;
}

/*
 * The memory a role's usage needs from m samples mem[] (sorted here): its
 * peak plus what the samples say lies beyond it, never under the quantile
 * plus mem_margin_min.  Two things lie beyond it:
 * - How far usage wanders at the top: the spread of the top tenth of the
 *   samples (at least 4 of them).  Bounded usage (a working set sampled at
 *   90-100% of it) packs its top tightly under the bound, so the peak is
 *   nearly the need; a long tail spreads it, and the next windows reach
 *   beyond the peak by about as much again.  Twice that spread, at most
 *   twice the robust standard deviation of all the samples: a lone spike
 *   is its own peak, already covered, not a spread to add again.
 * - Where the usage goes: its trend over the window, at two standard
 *   errors above the fitted slope, carried as far again as the window
 *   spans.  A rise too slow for the window to show (20% over 30 minutes,
 *   1.3% in a 120 s round) is within it; a steady role's slope is zero
 *   within a small error.  Without it a 96 GiB worker rising so sized at
 *   its first 90 s OOMed in the next round, twice.  Not when the history
 *   reads a rise as ended (trend false): the window's slope is then the
 *   end of that rise, not where usage goes (with it the trim after a rise
 *   came in two plans, one more than the targets allow).
 * A constant margin instead (10% over the 80th percentile) held steady
 * roles at 1.08 of their need, and small jobs at 1.10-1.11 of the oracle's
 * resources with the CPU margin on top.
 */
static double sizing_mem_need(const struct sizing *s, double *mem, size_t m, bool trend)
{
	const struct rv_alg_params *p = s->p;
	double q = rv_alg_quantile(mem, m, p->usage_quantile); /* sorts mem */
	double peak = mem[m - 1], want = peak * (1 + p->mem_margin);
	size_t k = m / 10 > 4 ? m / 10 : 4;
	double *tmp = m >= 2 ? malloc(m * sizeof(*tmp)) : NULL;
	double b, se;
	int64_t span;

	if (k > m - 1)
		k = m - 1;
	if (tmp) { /* else (one sample, out of memory): the constant margin */
		double med, mad;

		rv_alg_median_mad(mem, tmp, m, &med, &mad);
		double top = mem[m - 1] - mem[m - 1 - k], sd = ALG_MAD_SCALE * mad;

		want = peak + 2 * (top < sd ? top : sd);
		if (trend &&
		    usage_slope(s->u, s->n, s->role, INT64_MIN, false, &b, &se, &span) == 0 &&
		    b + 2 * se > 0)
			want += (b + 2 * se) * (double)span;
	}
	free(tmp);
	if (want < q * (1 + p->mem_margin_min))
		want = q * (1 + p->mem_margin_min);
	return want;
}

/* The memory wanted: what the usage needs (sizing_mem_need), never under
 * the peak over the memory history (memory follows the job's progress, not
 * its configuration).  Memory that keeps rising across plans is sized for
 * where it will be (rv_alg_mem_rise_target) once it would reach the limit
 * soon, else held; a rise that ended is sized from the peak it stopped at. */
static void sizing_mem_want(struct sizing *s, double *mem, size_t m)
{
	const struct rv_alg_params *p = s->p;
	double soon, slope;
	double window = p->usage_window_ms > 0 ? (double)p->usage_window_ms : 600000;

	int rise = mem_rising(s->h, s->nh, s->role, &slope);

	s->want_mem = sizing_mem_need(s, mem, m, rise != 2);
	for (size_t i = 0; i < s->nh; i++)
		if (s->h[i].role == s->role && (double)s->h[i].memory_mb > s->peak)
			s->peak = (double)s->h[i].memory_mb;
	double target =
		rv_alg_mem_rise_target(s->u, s->n, s->h, s->nh, s->role, p, window / 4, &soon);
	s->rising = target > 0;
	if (s->rising) {
		if (soon <= (double)s->cur->memory_mb)
			s->rise_hold = true;
		else
			s->want_mem = target;
	} else if (rise == 2) {
		/* the margin the usage measures, over the peak the rise stopped
		 * at: the constant one (10%) trimmed a second time a plan later,
		 * once the rise had left the history's view */
		s->ended = true;
		if (s->peak * (1 + p->mem_margin_min) > s->want_mem)
			s->want_mem = s->peak * (1 + p->mem_margin_min);
	}
}

static void sizing_mem_round(struct sizing *s)
{
	if (s->want_mem < s->peak)
		s->want_mem = s->peak;
	s->want_mem = rv_alg_mb_up(s->want_mem);
	if (s->lim->max_memory_mb > 0 && s->want_mem > (double)s->lim->max_memory_mb)
		s->want_mem = (double)s->lim->max_memory_mb;
}

/* CPU_STARVED: a starved role grows whatever the band. */
static bool cpu_force_starved(const struct sizing *s)
{
	return s->starved;
}

/* CPU_NEAR_LIMIT: growth beyond the margin with use within 3% of the limit
 * skips the band (waiting would only let the role read as starved and
 * double); not right after the role's own recent shrink, back towards where
 * it started (the band or the starvation test decide that). */
static bool cpu_force_near_limit(const struct sizing *s)
{
	const struct rv_alg_resource *cur = s->cur;
	const struct rv_alg_resize *last = s->last;
	int near_limit = cur->cpu > 0 && s->want_cpu > cur->cpu * (1 + s->p->cpu_margin) + 1e-9 &&
			 s->q_cpu >= 0.97 * cur->cpu;

	if (near_limit && s->recent && last->to.cpu < last->from.cpu && cur->cpu == last->to.cpu &&
	    s->want_cpu < last->from.cpu)
		near_limit = 0;
	return near_limit;
}

/* CPU_FOLLOWS: a role behind a growing bottleneck grows with it. */
static bool cpu_force_follows(const struct sizing *s)
{
	return s->follows;
}

/* CPU_GUESSED: CPU the last resize set by a starvation growth was a guess,
 * not a measure: the first smaller size from usage replaces it. */
static bool cpu_force_guessed(const struct sizing *s)
{
	const struct rv_alg_resize *last = s->last;

	return last->t_ms > 0 && last->from.cpu > 0 && s->cur->cpu == last->to.cpu &&
	       fabs(last->to.cpu - rv_alg_cpu_up(last->from.cpu * s->p->starved_factor)) < 0.05 &&
	       s->want_cpu < s->cur->cpu;
}

/* What moves CPU past the hysteresis band, read before CPU_RAMP_HOLD; any
 * one that holds moves it. */
static const struct cpu_force {
	enum cpu_force_id { CPU_STARVED, CPU_NEAR_LIMIT, CPU_FOLLOWS, CPU_GUESSED } id;
	bool (*holds)(const struct sizing *s);
} cpu_forces[] = {
	{ CPU_STARVED, cpu_force_starved },
	{ CPU_NEAR_LIMIT, cpu_force_near_limit },
	{ CPU_FOLLOWS, cpu_force_follows },
	{ CPU_GUESSED, cpu_force_guessed },
};

/* The CPU to set: a force above, else the band (should_move).  CPU_RAMP_HOLD
 * first: use that still rises (a warm-up ramp longer than the speed could
 * show) is not the need, so no shrink from it. */
static double sizing_cpu_move(struct sizing *s)
{
	const struct rv_alg_params *p = s->p;
	bool forced = false;

	for (size_t i = 0; i < sizeof(cpu_forces) / sizeof(cpu_forces[0]) && !forced; i++)
		forced = cpu_forces[i].holds(s);
	if (s->want_cpu < s->cur->cpu &&
	    cpu_rise(s->u, s->n, s->role, p->usage_window_ms) > 2 * p->hysteresis * s->q_cpu)
		s->want_cpu = s->cur->cpu;
	if (forced || should_move(s->cur->cpu, s->want_cpu, s->last->from.cpu, s->last->to.cpu,
				  s->recent, p->hysteresis))
		return s->want_cpu;
	return s->cur->cpu;
}

/* The memory to set: below the peak is a certain OOM and memory rising past
 * the limit soon grows now, whatever the band; the trim of a rise that
 * ended is no reversal of the growth before it. */
static int64_t sizing_mem_move(const struct sizing *s)
{
	const struct rv_alg_resource *cur = s->cur;
	bool grow_now = (double)cur->memory_mb < s->peak || (s->rising && !s->rise_hold);

	if (grow_now ||
	    (!s->rising &&
	     should_move((double)cur->memory_mb, s->want_mem, (double)s->last->from.memory_mb,
			 (double)s->last->to.memory_mb, s->recent && !s->ended, s->p->hysteresis)))
		return (int64_t)s->want_mem;
	return cur->memory_mb;
}

/* The role's samples in the window: cpu[] and mem[] (m of them, the caller
 * frees both), and their memory peak. */
static int sizing_samples(struct sizing *s, double **cpu, double **mem, size_t *m)
{
	size_t k = 0;

	for (size_t i = 0; i < s->n; i++)
		k += s->u[i].role == s->role;
	if (k == 0 || k < sizing_min_samples(s->p))
		return -ENODATA;
	*cpu = malloc(k * sizeof(**cpu));
	*mem = malloc(k * sizeof(**mem));
	if (!*cpu || !*mem)
		return -ENOMEM;
	k = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (s->u[i].role != s->role)
			continue;
		(*cpu)[k] = s->u[i].cpu;
		(*mem)[k] = (double)s->u[i].memory_mb;
		if ((*mem)[k] > s->peak)
			s->peak = (*mem)[k];
		k++;
	}
	*m = k;
	return 0;
}

int rv_alg_rightsize_trend(const struct rv_alg_usage *u, size_t n, const struct rv_alg_usage *h,
			   size_t nh, enum rv_alg_role role, const struct rv_alg_resource *cur,
			   const struct rv_alg_resize *last, int64_t now_ms,
			   const struct rv_alg_limits *lim, const struct rv_alg_params *p,
			   double behind, struct rv_alg_resource *out)
{
	static const struct rv_alg_resize none = { 0 };

	if ((n > 0 && !u) || (nh > 0 && !h) || !cur || !lim || !p || !out ||
	    p->usage_quantile < 0 || p->usage_quantile > 1)
		return -EINVAL;
	*out = *cur;
	struct sizing s = {
		.u = u,
		.n = n,
		.h = h ? h : u,
		.nh = h ? nh : n,
		.role = role,
		.cur = cur,
		.last = last ? last : &none,
		.lim = lim,
		.p = p,
		.behind = behind,
		.recent = last && last->t_ms > 0 && now_ms - last->t_ms < p->reversal_window_ms,
	};
	double *cpu = NULL, *mem = NULL;
	size_t m = 0;
	int rc = sizing_samples(&s, &cpu, &mem, &m);

	if (rc == 0) {
		sizing_cpu_need(&s, cpu, m);
		sizing_cpu_want(&s);
		sizing_mem_want(&s, mem, m);
	}
	free(cpu);
	free(mem);
	if (rc < 0)
		return rc;
	sizing_cpu_round(&s);
	sizing_mem_round(&s);
	out->cpu = sizing_cpu_move(&s);
	out->memory_mb = sizing_mem_move(&s);
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
