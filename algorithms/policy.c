/*
 * policy.c: the running-stage policy over a job's history: which speed
 * samples the model may learn from (warm-up, CPU-bound runs), how a plan's
 * outcome is judged and when a plan is reverted, which plans are never
 * proposed again, and the create stage's "explicit asks win".  The brain
 * (history from PostgreSQL) and a master in single-job mode (history in
 * memory) call the same functions.  Pure and reentrant; scratch copies are
 * freed before returning.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alg_internal.h"

static const char *const outcome_names[] = {
	[RV_ALG_OUTCOME_PENDING] = "pending", [RV_ALG_OUTCOME_UNKNOWN] = "unknown",
	[RV_ALG_OUTCOME_BETTER] = "better",   [RV_ALG_OUTCOME_NEUTRAL] = "neutral",
	[RV_ALG_OUTCOME_WORSE] = "worse",     [RV_ALG_OUTCOME_UNJUDGED] = "unjudged",
};

const char *rv_alg_outcome_name(enum rv_alg_outcome o)
{
	if ((unsigned)o >= sizeof(outcome_names) / sizeof(outcome_names[0]))
		return NULL;
	return outcome_names[o];
}

int rv_alg_outcome_parse(const char *s)
{
	for (size_t i = 0; s && i < sizeof(outcome_names) / sizeof(outcome_names[0]); i++)
		if (!strcmp(s, outcome_names[i]))
			return (int)i;
	return -EINVAL;
}

/* Whether an applied plan was made by rule id: the name it was stored
 * under, parsed (rv_alg_id_parse). */
static bool algorithm_is(const struct rv_alg_applied *a, enum rv_alg_id id)
{
	return rv_alg_id_parse(a->algorithm) == id;
}

bool rv_alg_pending_stands(const struct rv_alg_job_history *h)
{
	return h && h->pending && h->pending->applied_ts_ms == 0 &&
	       h->pending->based_on_ts_ms >= h->now_ms;
}

bool rv_alg_oom_plan_waits(int64_t oom_ts_ms, int64_t now_ms, const struct rv_alg_params *p)
{
	return p && now_ms < oom_ts_ms + p->warmup_ms;
}

/* Samples a trend test needs, and the least rise over them it reports. */
#define SETTLE_MIN_SAMPLES 6
#define SETTLE_MIN_RISE    0.05
#define SETTLE_T           2.5
#define SETTLE_RAMP_T      3.0
#define SETTLE_END_T       2.0

/* Least-squares line of speed over time through o[k..end) (time order,
 * at least one sample): its slope (0 when the times do not spread), the
 * centred sum of squares of time *sxx, the mean time *mt (from o[k]) and
 * the mean speed *ms. */
static double speed_slope(const struct rv_alg_speed_obs *o, size_t k, size_t end, double *sxx,
			  double *mt, double *ms)
{
	size_t m = end - k;
	double sxy = 0;

	*mt = *ms = *sxx = 0;
	for (size_t i = k; i < end; i++) {
		*mt += (double)(o[i].t_ms - o[k].t_ms);
		*ms += o[i].speed;
	}
	*mt /= (double)m;
	*ms /= (double)m;
	for (size_t i = k; i < end; i++) {
		double x = (double)(o[i].t_ms - o[k].t_ms) - *mt;
		*sxx += x * x;
		sxy += x * (o[i].speed - *ms);
	}
	return *sxx > 0 ? sxy / *sxx : 0;
}

/* Whether o[k..end) (time order) still rises: the least-squares slope of
 * speed over time beyond SETTLE_T standard errors and a rise of at least
 * SETTLE_MIN_RISE of the mean across the span. */
static bool still_rising(const struct rv_alg_speed_obs *o, size_t k, size_t end)
{
	size_t m = end - k;
	double sxx, mt, ms;
	double slope = speed_slope(o, k, end, &sxx, &mt, &ms), sse = 0;

	if (!(sxx > 0) || !(ms > 0))
		return false;
	for (size_t i = k; i < end; i++) {
		double x = (double)(o[i].t_ms - o[k].t_ms) - mt;
		double r = o[i].speed - ms - slope * x;
		sse += r * r;
	}
	double se = sqrt(sse / (double)(m - 2) / sxx);
	double rise = slope * (double)(o[end - 1].t_ms - o[k].t_ms) / ms;
	return slope > SETTLE_T * se && rise >= SETTLE_MIN_RISE;
}

/* Where a ramp over o[start..end) (time order) ends: the change point c of
 * the best least-squares fit of a line that rises until o[c] and stays flat
 * after it (speed = a + b min(t, t_c)), over every c that leaves the ramp
 * three samples.  Returns end when no such fit rises significantly
 * (slope beyond SETTLE_RAMP_T standard errors and a rise of SETTLE_MIN_RISE
 * of the plateau). */
static size_t ramp_end(const struct rv_alg_speed_obs *o, size_t start, size_t end, double *slope,
		       double *sd)
{
	size_t best = end, m = end - start;
	double best_sse = INFINITY;
	bool rises = false;
	for (size_t c = start + 2; c < end && m >= 4; c++) {
		double mz = 0, ms = 0;
		for (size_t i = start; i < end; i++) {
			mz += (double)(o[i < c ? i : c].t_ms - o[start].t_ms);
			ms += o[i].speed;
		}
		mz /= (double)m;
		ms /= (double)m;
		double szz = 0, szy = 0, syy = 0;
		for (size_t i = start; i < end; i++) {
			double z = (double)(o[i < c ? i : c].t_ms - o[start].t_ms) - mz;
			szz += z * z;
			szy += z * (o[i].speed - ms);
			syy += (o[i].speed - ms) * (o[i].speed - ms);
		}
		if (!(szz > 0))
			continue;
		double b = szy / szz, sse = syy - b * szy;
		if (sse < 0)
			sse = 0;
		if (!(sse < best_sse))
			continue;
		best_sse = sse;
		double se = sqrt(sse / (double)(m - 2) / szz);
		double a = ms - b * mz;
		double top = a + b * (double)(o[c].t_ms - o[start].t_ms);
		double rise = b * (double)(o[c].t_ms - o[start].t_ms);
		rises = b > SETTLE_RAMP_T * se && top > 0 && rise >= SETTLE_MIN_RISE * top;
		best = c;
		*slope = b;
		*sd = sqrt(sse / (double)(m - 2));
	}
	return rises ? best : end;
}

/* Whether the ramp of slope b (speed per ms) that the fit put before o[c]
 * has ended: enough samples after it, and their own slope below b by more
 * than SETTLE_END_T standard errors (sd: the spread of a sample about the
 * fit).  A ramp's middle fits a change point as well as its end does under
 * noise; what comes after a real end is flat, what comes after a false one
 * rises as the ramp did. */
static bool ramp_ended(const struct rv_alg_speed_obs *o, size_t c, size_t end, double b, double sd)
{
	if (end - c < SETTLE_MIN_SAMPLES)
		return false;
	double sxx, mt, ms;
	double slope = speed_slope(o, c, end, &sxx, &mt, &ms);

	if (!(sxx > 0))
		return false;
	return slope + SETTLE_END_T * sd / sqrt(sxx) < b;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Whether applied[i] restarted the job's nodes: every applied plan whose
 * configuration differs from the one before it relaunches them (a CPU or
 * memory resize at the same counts, an OOM relaunch), and the job ramps up
 * again after it; one that changed nothing restarted nothing.  The oldest
 * plan read has nothing to compare with and counts as a restart. */
static bool plan_restarted(const struct rv_alg_job_history *h, size_t i)
{
	return i + 1 >= h->n_applied ||
	       !rv_alg_config_equal(&h->applied[i].cfg, &h->applied[i + 1].cfg);
}

/* Whether the job's nodes restarted between samples a and b (a sample at a
 * plan's own time is of the configuration before it). */
static bool restarted_between(const struct rv_alg_job_history *h, const struct rv_alg_speed_obs *a,
			      const struct rv_alg_speed_obs *b)
{
	for (size_t i = 0; h && h->applied && i < h->n_applied; i++) {
		int64_t t = h->applied[i].applied_ts_ms;
		if (t > 0 && a->t_ms <= t && t < b->t_ms && plan_restarted(h, i))
			return true;
	}
	return false;
}

/* The end of the run that starts at o[start]: the samples of one worker and
 * PS count with no restart of the nodes among them (h: the applied plans;
 * NULL: split at count changes only). */
static size_t run_end(const struct rv_alg_speed_obs *o, size_t start, size_t n,
		      const struct rv_alg_job_history *h)
{
	size_t end = start + 1;
	while (end < n && o[end].workers == o[start].workers && o[end].ps == o[start].ps &&
	       !restarted_between(h, &o[end - 1], &o[end]))
		end++;
	return end;
}

/* The job's own warm-up, read from its earlier runs (a run: the samples of
 * one worker and PS count between two restarts of the nodes): the median time from a run's first sample to
 * the end of its ramp, over the runs whose ramp the fit found and whose
 * samples after it are measurably flatter (ramp_ended).  A warm-up repeats
 * after every change of the same job; one noisy run's fit is not enough
 * (a run of 28% noise fitted a 70 s ramp to a 30 s one): 0 unless two
 * runs agree on having one. */
static int64_t job_warmup_ms(const struct rv_alg_speed_obs *o, size_t n,
			     const struct rv_alg_job_history *h)
{
	int64_t d[64];
	size_t nd = 0;
	for (size_t start = 0; start < n;) {
		size_t end = run_end(o, start, n, h);
		double b = 0, sd = 0;
		size_t c = ramp_end(o, start, end, &b, &sd);
		if (c < end && ramp_ended(o, c, end, b, sd) && nd < sizeof(d) / sizeof(d[0]))
			d[nd++] = o[c].t_ms - o[start].t_ms;
		start = end;
	}
	if (nd < 2)
		return 0;
	qsort(d, nd, sizeof(*d), cmp_i64);
	return nd % 2 ? d[nd / 2] : (d[nd / 2 - 1] + d[nd / 2]) / 2;
}

size_t rv_alg_settle_index(const struct rv_alg_speed_obs *o, size_t start, size_t end,
			   const struct rv_alg_params *p, bool *settled)
{
	size_t k = start;
	while (k < end && o[k].t_ms < o[start].t_ms + p->warmup_ms)
		k++;
	size_t k0 = k;
	/* Move past the ramp while what is left still trends up: a quarter of
	 * it at a time (the test needs enough samples to see a trend).  Once a
	 * rise was seen, the rest must be long enough to show the ramp went
	 * on if it did: six noisy samples of a slow ramp (a 300 s one rises
	 * 2-3% per 10 s) pass for flat, and CPU sized from them starved the
	 * job a plan later. */
	size_t need = SETTLE_MIN_SAMPLES;
	while (end - k >= need && still_rising(o, k, end)) {
		size_t step = (end - k) / 4;
		k += step > 0 ? step : 1;
		need = 2 * SETTLE_MIN_SAMPLES;
	}
	*settled = end - k >= need;
	/* A short run (a few samples past the fixed warm-up): settled when the
	 * whole run, its first samples included, shows no rise. */
	if (!*settled && k == k0 && k < end && end - start >= 4 && !still_rising(o, start, end))
		*settled = true;
	/* A ramp the whole run shows (its first samples included: the fit
	 * has the power the trend test on the rest alone lacks under noise)
	 * is not over until the samples after the end the fit of a ramp and a
	 * plateau puts it at are measurably flatter than the ramp.  The trend
	 * test alone passed nine samples 90 s into a 300 s ramp under 15%
	 * noise for flat (3 workers measured at 47% of 4, 96% in truth).
	 * Once that plateau is long (twelve samples and half the ramp) the
	 * trend test above has the power and decides alone: under 26% noise a
	 * change point near the end of a settled run can fit best, with a
	 * shallow slope no plateau is measurably flatter than. */
	double b = 0, sd = 0;
	size_t c = ramp_end(o, start, end, &b, &sd);
	if (c < end && c > k && *settled && !ramp_ended(o, c, end, b, sd) &&
	    (end - c < 2 * SETTLE_MIN_SAMPLES || 2 * (end - c) < c - start))
		*settled = false;
	return k;
}

int64_t rv_alg_run_settled_ms(const struct rv_alg_speed_obs *o, size_t n, int64_t since_ms,
			      const struct rv_alg_params *p)
{
	return rv_alg_job_run_settled_ms(NULL, o, n, since_ms, p);
}

int64_t rv_alg_job_run_settled_ms(const struct rv_alg_job_history *h,
				  const struct rv_alg_speed_obs *o, size_t n, int64_t since_ms,
				  const struct rv_alg_params *p)
{
	size_t start = 0;
	while (start < n && o[start].t_ms <= since_ms)
		start++;
	if (n - start < 4)
		return since_ms + p->warmup_ms;
	bool settled;
	size_t k = rv_alg_settle_index(o, start, n, p, &settled);
	if (!settled)
		return INT64_MAX;
	/* Not before the warm-up the job's earlier runs showed: under noise
	 * the first 120 s of a 200-300 s ramp pass the trend test for flat. */
	int64_t d = job_warmup_ms(o, start, h);
	if (d > 0 && o[n - 1].t_ms < o[start].t_ms + d)
		return INT64_MAX;
	if (d > 0 && o[k].t_ms < o[start].t_ms + d)
		return o[start].t_ms + d;
	return o[k].t_ms;
}

static int cmp_usage_t(const void *a, const void *b)
{
	const struct rv_alg_usage *x = a, *y = b;
	return x->t_ms < y->t_ms ? -1 : x->t_ms > y->t_ms;
}

int64_t rv_alg_usage_settled_ms(const struct rv_alg_usage *u, size_t n, int64_t since_ms,
				const struct rv_alg_params *p)
{
	struct rv_alg_usage *x = malloc((n ? n : 1) * sizeof(*x));
	struct rv_alg_speed_obs *o = malloc((n ? n : 1) * sizeof(*o));
	int64_t settled_ms = since_ms + p->warmup_ms;
	if (!x || !o)
		goto out;
	for (int r = 0; r < 2; r++) {
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			if (u[i].role == (enum rv_alg_role)r && u[i].t_ms > since_ms)
				x[m++] = u[i];
		if (m < 2)
			continue;
		qsort(x, m, sizeof(*x), cmp_usage_t);
		/* One node's sampling period (the shortest gap between two of
		 * its samples) buckets the nodes' samples into one mean each:
		 * nodes report at their own times. */
		int64_t period = INT64_MAX;
		for (size_t i = 0; i < m; i++)
			for (size_t j = i + 1; j < m; j++)
				if (x[j].node == x[i].node) {
					if (x[j].t_ms - x[i].t_ms > 0 &&
					    x[j].t_ms - x[i].t_ms < period)
						period = x[j].t_ms - x[i].t_ms;
					break;
				}
		if (period == INT64_MAX)
			continue;
		size_t k = 0;
		for (size_t i = 0; i < m;) {
			double sum = 0;
			size_t j = i;
			for (; j < m && x[j].t_ms < x[i].t_ms + period; j++)
				sum += x[j].cpu + (x[j].has_held ? x[j].held : 0);
			o[k++] = (struct rv_alg_speed_obs){ .t_ms = x[j - 1].t_ms,
							    .speed = sum / (double)(j - i) };
			i = j;
		}
		if (k < 4)
			continue;
		bool settled;
		size_t at = rv_alg_settle_index(o, 0, k, p, &settled);
		if (!settled) {
			settled_ms = INT64_MAX;
			break;
		}
		if (o[at].t_ms > settled_ms)
			settled_ms = o[at].t_ms;
	}
out:
	free(x);
	free(o);
	return settled_ms;
}

int rv_alg_outcome_window(const struct rv_alg_job_history *h, const struct rv_alg_params *p,
			  struct rv_alg_outcome_window *w)
{
	if (!h || !p || !w || (h->n_applied && !h->applied))
		return -EINVAL;
	if (h->n_applied == 0)
		return 0;
	const struct rv_alg_applied *cur = &h->applied[0];
	if (cur->stage != RV_ALG_STAGE_RUNNING || cur->outcome != RV_ALG_OUTCOME_PENDING ||
	    cur->applied_ts_ms <= 0)
		return 0;
	int64_t prev_ts = h->n_applied > 1 ? h->applied[1].applied_ts_ms : 0;
	memset(w, 0, sizeof(*w));
	w->workers = cur->cfg.worker.count;
	w->ps = cur->cfg.ps.count;
	/* Past the warm-up of the new configuration: where its speed stops
	 * rising when the caller gave the speeds (INT64_MAX while it still
	 * rises: not judged yet), else a fixed warm-up. */
	w->after_from_ms = cur->applied_ts_ms + p->warmup_ms;
	if (h->n_speed && h->speed) {
		int64_t settled =
			rv_alg_job_run_settled_ms(h, h->speed, h->n_speed, cur->applied_ts_ms, p);
		if (settled > w->after_from_ms)
			w->after_from_ms = settled;
	}
	/* Before: the configuration the plan replaced, past its own warm-up
	 * (samples of older configurations would blur the comparison); all of
	 * its samples when too few are settled. */
	w->before_from_ms = prev_ts + p->warmup_ms;
	w->before_all_from_ms = prev_ts > 0 ? prev_ts : -1;
	w->before_to_ms = cur->applied_ts_ms;
	w->before_last_n = p->outcome_before_n;
	return 1;
}

int rv_alg_speed_summarize(const struct rv_alg_speed_obs *o, size_t n, int64_t from_ms,
			   int64_t to_ms, int workers, int ps, int last_n,
			   struct rv_alg_speed_summary *out)
{
	if ((n && !o) || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	double sum = 0, sum2 = 0;
	int k = 0;
	/* newest first, so last_n takes the newest */
	for (size_t i = n; i-- > 0 && (last_n <= 0 || k < last_n);) {
		if (o[i].t_ms < from_ms || o[i].t_ms >= to_ms)
			continue;
		if ((workers >= 0 && o[i].workers != workers) || (ps >= 0 && o[i].ps != ps))
			continue;
		sum += o[i].speed;
		k++;
	}
	if (k == 0)
		return 0;
	double mean = sum / k;
	int m = 0;
	for (size_t i = n; i-- > 0 && m < k;) {
		if (o[i].t_ms < from_ms || o[i].t_ms >= to_ms)
			continue;
		if ((workers >= 0 && o[i].workers != workers) || (ps >= 0 && o[i].ps != ps))
			continue;
		sum2 += (o[i].speed - mean) * (o[i].speed - mean);
		m++;
	}
	out->n = k;
	out->mean = mean;
	out->sd = k > 1 ? sqrt(sum2 / (k - 1)) : 0;
	return 0;
}

/* The outcome of plan cur from the speeds after it (a) and before it (b):
 * better at outcome_better times the speed before; worse below
 * outcome_worse times it, below outcome_worse times its own prediction,
 * and beyond outcome_se standard errors of the difference (noise alone
 * never undoes a plan), where a plan that expected to run slower is
 * measured against what it expected; else neutral.  A plan that replaced
 * stragglers is never worse: the speed before it was held back by them.
 * DESIGN-LOG.md, "Judging". */
static enum rv_alg_outcome judge_compare(const struct rv_alg_applied *cur,
					 const struct rv_alg_speed_summary *a,
					 const struct rv_alg_speed_summary *b,
					 const struct rv_alg_params *p)
{
	double after = a->mean, before = b->mean;
	double ratio = before > 0 ? after / before : 0;
	enum rv_alg_outcome outcome;

	if (!(b->n > 0 && before > 0))
		return RV_ALG_OUTCOME_UNKNOWN;
	bool below_prediction = cur->predicted_speed <= 0 ||
				after < p->outcome_worse * cur->predicted_speed;
	double se = sqrt(a->sd * a->sd / a->n + (b->n > 0 ? b->sd * b->sd / b->n : 0));
	double expected = before;
	if (cur->predicted_speed > 0 && cur->predicted_speed < expected)
		expected = cur->predicted_speed;
	bool significant = expected - after > p->outcome_se * se;
	if (ratio >= p->outcome_better)
		outcome = RV_ALG_OUTCOME_BETTER;
	else if (ratio < p->outcome_worse && below_prediction && significant)
		outcome = RV_ALG_OUTCOME_WORSE;
	else
		outcome = RV_ALG_OUTCOME_NEUTRAL;
	if (outcome == RV_ALG_OUTCOME_WORSE && cur->n_replace > 0)
		outcome = RV_ALG_OUTCOME_NEUTRAL;
	return outcome;
}

int rv_alg_judge_outcome(const struct rv_alg_job_history *h, const struct rv_alg_outcome_speeds *s,
			 const struct rv_alg_params *p, struct rv_alg_verdict *v,
			 struct rv_alg_decision *revert)
{
	struct rv_alg_outcome_window w;
	if (!s || !v || !revert || rv_alg_outcome_window(h, p, &w) != 1)
		return -EINVAL;
	const struct rv_alg_applied *cur = &h->applied[0];
	if (s->after.n < p->min_outcome_samples || s->after.n <= 0)
		return -EAGAIN;
	/* noisy speeds: enough samples for the mean to say something */
	if (p->outcome_noise_se > 0 && s->after.mean > 0 && s->after.n < p->outcome_samples_max) {
		double rel = s->after.sd / s->after.mean / p->outcome_noise_se;
		if ((double)s->after.n < rel * rel)
			return -EAGAIN;
	}
	const struct rv_alg_speed_summary *b = &s->before;
	if (b->n < p->min_outcome_samples && w.before_all_from_ms >= 0)
		b = &s->before_all;
	double after = s->after.mean, before = b->mean;
	double ratio = before > 0 ? after / before : 0;
	enum rv_alg_outcome outcome = judge_compare(cur, &s->after, b, p);
	v->outcome = outcome;
	v->before = before;
	v->after = after;
	/* An exploration measures a configuration on purpose: a slower result
	 * is data for the model (and the configuration is not proposed again),
	 * not a mistake to undo. */
	if (outcome != RV_ALG_OUTCOME_WORSE || h->n_applied < 2 ||
	    algorithm_is(cur, RV_ALG_ID_EXPLORE))
		return 0;
	const struct rv_alg_applied *prev = &h->applied[1];
	rv_alg_decision_init(revert, &prev->cfg);
	revert->algorithm = RV_ALG_ID_REVERT;
	revert->changed = true;
	revert->predicted_speed = before;
	rv_alg_reason_add(revert,
			  "plan %" PRId64 " (%s) measured %.1f samples/s after vs %.1f before "
			  "(%+.0f%%); reverting to %d workers",
			  cur->id, cur->algorithm ? cur->algorithm : "", after, before,
			  (ratio - 1) * 100, prev->cfg.worker.count);
	return 1;
}

int64_t rv_alg_usage_since(const struct rv_alg_job_history *h, const struct rv_alg_params *p)
{
	int64_t floor_ms = h->now_ms - p->usage_window_ms;
	int64_t since = h->n_applied ? h->applied[0].applied_ts_ms : floor_ms;
	return since < floor_ms ? floor_ms : since;
}

int64_t rv_alg_mem_usage_since(const struct rv_alg_job_history *h, const struct rv_alg_params *p)
{
	return h->now_ms - p->usage_window_ms;
}

/* The memory history as the right-sizing reads it: a PS's share of the
 * model follows the PS count, so PS samples count from the newest plan that
 * changed it; a worker's memory does not depend on the counts.  Into out
 * (room for h->n_mem_usage); returns how many. */
static size_t mem_history(const struct rv_alg_job_history *h, struct rv_alg_usage *out)
{
	int64_t ps_from = INT64_MIN;
	for (size_t i = 0; i + 1 < h->n_applied; i++)
		if (h->applied[i].cfg.ps.count != h->applied[i + 1].cfg.ps.count) {
			ps_from = h->applied[i].applied_ts_ms;
			break;
		}
	size_t m = 0;
	for (size_t i = 0; i < h->n_mem_usage; i++)
		if (h->mem_usage[i].role != RV_ALG_PS_ROLE || h->mem_usage[i].t_ms > ps_from)
			out[m++] = h->mem_usage[i];
	return m;
}

int rv_alg_ps_mem_fit(const struct rv_alg_usage *use, size_t n,
		      const struct rv_alg_applied *applied, size_t n_applied, int min_samples,
		      double *a, double *b)
{
	int cnt[2] = { 0, 0 }, seen[2] = { 0, 0 }, k = 0;
	double peak[2] = { 0, 0 };

	/* applied is newest first: the newest two PS counts (one may recur) */
	for (size_t i = 0; i < n_applied; i++) {
		int c = applied[i].cfg.ps.count;
		if (c <= 0)
			continue;
		int slot = k > 0 && c == cnt[0] ? 0 : k > 1 && c == cnt[1] ? 1 : -1;
		if (slot < 0) {
			if (k == 2)
				break;
			slot = k;
			cnt[k++] = c;
		}
		/* a sample at a plan's own time is the configuration before */
		int64_t from = applied[i].applied_ts_ms;
		int64_t to = i > 0 ? applied[i - 1].applied_ts_ms : INT64_MAX;
		for (size_t j = 0; j < n; j++)
			if (use[j].role == RV_ALG_PS_ROLE && use[j].t_ms > from &&
			    use[j].t_ms <= to) {
				seen[slot]++;
				if ((double)use[j].memory_mb > peak[slot])
					peak[slot] = (double)use[j].memory_mb;
			}
	}
	if (k < 2 || seen[0] < min_samples || seen[1] < min_samples)
		return 0;
	double slope = (peak[0] - peak[1]) / (1.0 / cnt[0] - 1.0 / cnt[1]);
	double icpt = peak[0] - slope / cnt[0];
	if (!(slope > 0) || icpt < 0)
		return 0;
	*a = slope;
	*b = icpt;
	return 1;
}

size_t rv_alg_drop_warmup(struct rv_alg_speed_obs *o, size_t n, const struct rv_alg_params *p)
{
	return rv_alg_drop_run_warmup(NULL, o, n, p);
}

size_t rv_alg_drop_run_warmup(const struct rv_alg_job_history *h, struct rv_alg_speed_obs *o,
			      size_t n, const struct rv_alg_params *p)
{
	size_t batch = p->batch_mean > 0 ? (size_t)p->batch_mean : 1;
	size_t out = 0;
	for (size_t start = 0; start < n;) {
		size_t end = run_end(o, start, n, h);
		/* Each run's warm-up: until its speed stops rising; a run that
		 * never settled keeps its last third (the nearest to steady). */
		bool settled;
		size_t skip = rv_alg_settle_index(o, start, end, p, &settled);
		size_t keep_from = end - (end - start + 2) / 3;
		if (!settled && skip > keep_from)
			skip = keep_from;

		for (size_t i = skip; i < end; i += batch) {
			size_t k = end - i < batch ? end - i : batch;
			double sum = 0;
			for (size_t j = 0; j < k; j++)
				sum += o[i + j].speed;
			o[out] = o[i + k - 1];
			o[out++].speed = sum / (double)k;
		}
		start = end;
	}
	return out;
}

/* How much more load each PS carries in configuration to than in from
 * (workers per PS); 1 when either has no PS or no workers. */
static double ps_load_ratio(const struct rv_alg_config *to, const struct rv_alg_config *from)
{
	if (to->ps.count <= 0 || from->ps.count <= 0 || to->worker.count <= 0 ||
	    from->worker.count <= 0)
		return 1;
	return ((double)to->worker.count / to->ps.count) /
	       ((double)from->worker.count / from->ps.count);
}

/* Keeps in o[0..n) the speeds after t_ms (a sample at a plan's own time is
 * the configuration before it); returns how many. */
static size_t keep_after(struct rv_alg_speed_obs *o, size_t n, int64_t t_ms)
{
	size_t k = 0;
	for (size_t j = 0; j < n; j++)
		if (o[j].t_ms > t_ms)
			o[k++] = o[j];
	return k;
}

/* The CPU a node of each role needed in the configuration applied[i] set,
 * from its usage past where its speed settled (until the next plan): the
 * median, into need[role]; false when too few samples say it or a role sat
 * at its limit there (its use then hides the need). */
/* The end of the run applied[i] set: the next plan's time (INT64_MAX for
 * the newest). */
static int64_t run_to(const struct rv_alg_job_history *h, size_t i)
{
	return i > 0 ? h->applied[i - 1].applied_ts_ms : INT64_MAX;
}

/* A malloc'd copy of the usage history (the longer memory history when
 * there is one) from from_ms to to_ms, both included, and its length in *m;
 * NULL without usage or memory (*m 0). */
static struct rv_alg_usage *usage_between(const struct rv_alg_job_history *h, int64_t from_ms,
					  int64_t to_ms, size_t *m)
{
	const struct rv_alg_usage *u = h->mem_usage ? h->mem_usage : h->usage;
	size_t nu = h->mem_usage ? h->n_mem_usage : h->n_usage;
	struct rv_alg_usage *x = u ? malloc((nu ? nu : 1) * sizeof(*x)) : NULL;

	*m = 0;
	for (size_t j = 0; x && j < nu; j++)
		if (u[j].t_ms >= from_ms && u[j].t_ms <= to_ms)
			x[(*m)++] = u[j];
	return x;
}

static bool run_cpu_need(const struct rv_alg_job_history *h, const struct rv_alg_params *p,
			 size_t i, double need[2])
{
	const struct rv_alg_applied *a = &h->applied[i];
	int64_t to = run_to(h, i);
	size_t min = (size_t)(p->min_usage_samples > 0 ? p->min_usage_samples : 1);

	/* past the run's warm-up (its last third when it never settled) */
	size_t s = 0, e;
	while (s < h->n_speed && h->speed[s].t_ms <= a->applied_ts_ms)
		s++;
	for (e = s; e < h->n_speed && h->speed[e].t_ms <= to &&
		    h->speed[e].workers == a->cfg.worker.count && h->speed[e].ps == a->cfg.ps.count;
	     e++)
		;
	if (e - s < 4 || !(h->mem_usage || h->usage))
		return false;
	bool settled;
	size_t k = rv_alg_settle_index(h->speed, s, e, p, &settled);
	size_t keep_from = e - (e - s + 2) / 3;
	if (!settled && k > keep_from)
		k = keep_from;
	int64_t from = h->speed[k].t_ms;

	size_t m;
	struct rv_alg_usage *x = usage_between(h, from, to, &m);
	double *c = malloc((m ? m : 1) * sizeof(*c));
	bool ok = x && c;
	for (int r = 0; ok && r < 2; r++) {
		const struct rv_alg_group *g = r ? &a->cfg.ps : &a->cfg.worker;
		size_t mc = 0;
		need[r] = 0;
		if (g->count <= 0)
			continue;
		for (size_t j = 0; j < m; j++)
			if (x[j].role == (enum rv_alg_role)r)
				c[mc++] = x[j].cpu;
		ok = mc >= min &&
		     !rv_alg_cpu_pinned(x, m, (enum rv_alg_role)r, -1, min, g->res.cpu, 0.97, p);
		if (ok)
			need[r] = rv_alg_quantile(c, mc, 0.5);
	}
	free(x);
	free(c);
	return ok;
}

/* The CPU a node of each role needed in configuration to, from the CPU the
 * plan after it (next) sized from its use: a role grown from `from` beyond
 * p->starved_growth that next trimmed (a PS's scaled back by the workers per
 * PS) needed that trim less its margin; a role not grown adds nothing.
 * False when a grown role was not trimmed (its need is not known). */
static bool sized_need(const struct rv_alg_config *to, const struct rv_alg_config *next,
		       const struct rv_alg_config *from, const struct rv_alg_params *p,
		       double need[2])
{
	for (int r = 0; r < 2; r++) {
		const struct rv_alg_group *g = r ? &to->ps : &to->worker;
		const struct rv_alg_group *nx = r ? &next->ps : &next->worker;
		const struct rv_alg_group *fr = r ? &from->ps : &from->worker;
		double scale = 1;
		need[r] = 0;
		if (r && g->count > 0 && nx->count > 0 && to->worker.count > 0 &&
		    next->worker.count > 0)
			scale = ((double)to->worker.count / g->count) /
				((double)next->worker.count / nx->count);
		if (g->count <= 0 || fr->count <= 0 ||
		    !(g->res.cpu > p->starved_growth * fr->res.cpu))
			continue;
		if (nx->count <= 0 || !(nx->res.cpu * scale < g->res.cpu))
			return false;
		need[r] = nx->res.cpu * scale / (1 + p->cpu_margin);
	}
	return true;
}

/* Whether a role sat at its CPU limit in the run applied[i] set (its usage
 * until the next plan), as the running stage judges a pinned role. */
static bool run_pinned(const struct rv_alg_job_history *h, const struct rv_alg_params *p, size_t i,
		       enum rv_alg_role role)
{
	const struct rv_alg_applied *a = &h->applied[i];
	const struct rv_alg_group *g = role == RV_ALG_PS_ROLE ? &a->cfg.ps : &a->cfg.worker;
	size_t min = (size_t)(p->min_usage_samples > 0 ? p->min_usage_samples : 1);

	if (g->count <= 0 || !(g->res.cpu > 0))
		return false;
	size_t m;
	struct rv_alg_usage *x = usage_between(h, a->applied_ts_ms + 1, run_to(h, i), &m);
	if (!x)
		return false;
	bool pinned = rv_alg_cpu_pinned(x, m, role, -1, min, g->res.cpu, 0.97, p);
	free(x);
	return pinned;
}

size_t rv_alg_correct_starved_speeds(const struct rv_alg_job_history *h,
				     const struct rv_alg_params *p, struct rv_alg_speed_obs *o,
				     size_t n)
{
	const struct rv_alg_applied *a = h->applied;
	for (size_t i = 0; i + 1 < h->n_applied; i++) {
		const struct rv_alg_config *to = &a[i].cfg, *from = &a[i + 1].cfg;
		double load = ps_load_ratio(to, from);
		bool grew = to->worker.res.cpu > p->starved_growth * from->worker.res.cpu ||
			    to->ps.res.cpu >
				    p->starved_growth * (load > 1 ? load : 1) * from->ps.res.cpu;
		bool moved = to->worker.count != from->worker.count ||
			     to->ps.count != from->ps.count;
		/* A pinned PS given more CPU per worker it serves while the
		 * counts lightened its load grew too, though its limit rose
		 * less than starved_growth: 4 PS pinned at 1.0 core under 6
		 * workers went to 1.4 under 4 (their need there 1.2), and the
		 * speed starved at 6 made 4 the measured knee (0.74 of the
		 * oracle's speed). */
		if (!grew && moved && load > 0 && load < 1 &&
		    to->ps.res.cpu > p->starved_growth * load * from->ps.res.cpu &&
		    run_pinned(h, p, i + 1, RV_ALG_PS_ROLE))
			grew = true;
		if (!grew || (!moved && a[i].outcome != RV_ALG_OUTCOME_BETTER))
			continue;
		/* A growth that also moved the counts measured no other speed at
		 * the old ones: correct them by how far short of its need each
		 * role ran there (a node short of CPU slows the job in
		 * proportion), the need read from the use at the new counts (a
		 * PS's following its share of the workers). */
		double need[2];
		bool known = moved && run_cpu_need(h, p, i, need);
		if (moved && !known && i > 0)
			known = sized_need(to, &a[i - 1].cfg, from, p, need);
		if (known) {
			double f = 1;
			if (from->worker.count > 0 && from->worker.res.cpu > 0 &&
			    need[0] / from->worker.res.cpu > f)
				f = need[0] / from->worker.res.cpu;
			if (from->ps.count > 0 && from->ps.res.cpu > 0 && load > 0 &&
			    need[1] / load / from->ps.res.cpu > f)
				f = need[1] / load / from->ps.res.cpu;
			for (size_t j = 0; j < n; j++)
				if (o[j].t_ms > a[i + 1].applied_ts_ms &&
				    o[j].t_ms <= a[i].applied_ts_ms &&
				    o[j].workers == from->worker.count && o[j].ps == from->ps.count)
					o[j].speed *= f;
			continue;
		}
		return keep_after(o, n, a[i].applied_ts_ms);
	}
	return n;
}

int64_t rv_alg_steps_since(const struct rv_alg_job_history *h, const struct rv_alg_params *p)
{
	int64_t since = rv_alg_usage_since(h, p);
	for (size_t i = 0; i + 1 < h->n_applied; i++)
		if (h->applied[i].n_replace > 0 && h->applied[i + 1].applied_ts_ms < since)
			since = h->applied[i + 1].applied_ts_ms;
	return since;
}

size_t rv_alg_correct_straggler_speeds(const struct rv_alg_job_history *h,
				       const struct rv_alg_params *p, struct rv_alg_speed_obs *o,
				       size_t n)
{
	struct rv_alg_step *s = malloc((h->n_steps ? h->n_steps : 1) * sizeof(*s));
	if (!s)
		return n;
	for (size_t i = 0; i + 1 < h->n_applied; i++) {
		const struct rv_alg_applied *a = &h->applied[i], *before = &h->applied[i + 1];
		if (a->n_replace <= 0)
			continue;
		/* the settled step times of the configuration it ended */
		size_t k = 0;
		for (size_t j = 0; j < h->n_steps; j++)
			if (h->steps[j].t_ms >= before->applied_ts_ms + p->warmup_ms &&
			    h->steps[j].t_ms <= a->applied_ts_ms)
				s[k++] = h->steps[j];
		double share = 1;
		if (rv_alg_straggler_share(s, k, h->strategy, p, &share) > 0 && share > 0 &&
		    share < 1) {
			/* a sample at the plan's own time is the old config's */
			for (size_t j = 0; j < n; j++)
				if (o[j].t_ms > before->applied_ts_ms &&
				    o[j].t_ms <= a->applied_ts_ms &&
				    o[j].workers == before->cfg.worker.count &&
				    o[j].ps == before->cfg.ps.count)
					o[j].speed /= share;
			continue;
		}
		/* no step time says how slow: a replacement that measured
		 * faster leaves only the speeds after it */
		if (algorithm_is(a, RV_ALG_ID_STRAGGLER) && a->outcome == RV_ALG_OUTCOME_BETTER) {
			size_t m = 0;
			for (size_t j = 0; j < n; j++)
				if (o[j].t_ms > a->applied_ts_ms)
					o[m++] = o[j];
			n = m;
			break;
		}
	}
	free(s);
	return n;
}

size_t rv_alg_settled_steps(struct rv_alg_step *s, size_t n, int64_t since_ms,
			    const struct rv_alg_params *p)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (s[i].t_ms >= since_ms + p->warmup_ms)
			s[k++] = s[i];
	return k;
}

void rv_alg_last_resizes(const struct rv_alg_applied *a, size_t na, struct rv_alg_resize last[2])
{
	memset(last, 0, 2 * sizeof(*last));
	for (size_t i = 0; i + 1 < na; i++) {
		if (!algorithm_is(&a[i], RV_ALG_ID_RIGHTSIZE))
			continue;
		/* A role's last resize is the last plan that resized it: one
		 * that resized only the other role does not erase it (a PS cut
		 * 2.8 -> 2.6, then a worker memory trim, read as "2.6 -> 2.6",
		 * and the PS grew back to 2.7 a plan later). */
		for (int r = 0; r < 2; r++) {
			const struct rv_alg_resource *to = r == RV_ALG_WORKER ? &a[i].cfg.worker.res
									      : &a[i].cfg.ps.res;
			const struct rv_alg_resource *from = r == RV_ALG_WORKER
								     ? &a[i + 1].cfg.worker.res
								     : &a[i + 1].cfg.ps.res;

			if (last[r].t_ms ||
			    (fabs(to->cpu - from->cpu) <= 1e-6 && to->memory_mb == from->memory_mb))
				continue;
			last[r].t_ms = a[i].applied_ts_ms;
			last[r].to = *to;
			last[r].from = *from;
		}
	}
}

/* A starvation growth that rode on a count change (the first exploration
 * step carries it) is its role's last resize too, though the plan's
 * algorithm names the counts: the CPU it set was a guess the first size
 * from usage replaces whatever the band (a doubling from 4.4 to 8.8 cores
 * for a need of 8 otherwise stayed, 1.10x the oracle's resources). */
static void starved_resizes(const struct rv_alg_applied *a, size_t na,
			    const struct rv_alg_params *p, struct rv_alg_resize last[2])
{
	for (size_t i = 0; i + 1 < na; i++) {
		if (algorithm_is(&a[i], RV_ALG_ID_RIGHTSIZE))
			continue;
		const struct rv_alg_config *tc = &a[i].cfg, *fc = &a[i + 1].cfg;
		/* PS CPU follows the workers/PS ratio: only growth beyond it */
		double load = ps_load_ratio(tc, fc);
		for (int r = 0; r < 2; r++) {
			const struct rv_alg_group *to = r ? &tc->ps : &tc->worker;
			const struct rv_alg_group *from = r ? &fc->ps : &fc->worker;
			double grew = p->starved_growth * (r && load > 1 ? load : 1);
			if (a[i].applied_ts_ms <= last[r].t_ms || to->count <= 0 ||
			    from->count <= 0 || !(to->res.cpu > grew * from->res.cpu))
				continue;
			last[r].t_ms = a[i].applied_ts_ms;
			last[r].from = from->res;
			last[r].to = to->res;
		}
	}
}

static bool same_group(const struct rv_alg_group *x, const struct rv_alg_group *y)
{
	return x->count == y->count && fabs(x->res.cpu - y->res.cpu) <= 1e-6 &&
	       x->res.memory_mb == y->res.memory_mb;
}

bool rv_alg_same_plan(const struct rv_alg_applied *a, const struct rv_alg_config *cfg,
		      size_t n_migrate, size_t n_replace)
{
	return same_group(&a->cfg.worker, &cfg->worker) && same_group(&a->cfg.ps, &cfg->ps) &&
	       a->n_migrate == (int)n_migrate && a->n_replace == (int)n_replace;
}

/* Turn a decision into "keep the configuration", saying why. */
static void hold(struct rv_alg_decision *d, const struct rv_alg_config *cur, const char *why,
		 int64_t plan_id)
{
	d->cfg = *cur;
	d->changed = false;
	d->algorithm = RV_ALG_ID_HOLD;
	d->n_migrate = 0;
	d->n_replace = 0;
	rv_alg_reason_add(d, "%s (plan %" PRId64 "): not proposed again", why, plan_id);
}

bool rv_alg_model_flips(const struct rv_alg_job_history *h, const struct rv_alg_decision *d)
{
	if (!h || !d || h->n_applied < 2 || d->algorithm != RV_ALG_ID_WORKER_COUNT_MODEL ||
	    !algorithm_is(&h->applied[0], RV_ALG_ID_WORKER_COUNT_MODEL))
		return false;
	const struct rv_alg_config *cur = &h->applied[0].cfg, *before = &h->applied[1].cfg;
	bool moved = cur->worker.count != before->worker.count || cur->ps.count != before->ps.count;
	if (!moved || d->cfg.worker.count != before->worker.count ||
	    d->cfg.ps.count != before->ps.count)
		return false;
	/* A return from counts the job had not run before is the model
	 * learning from them (6 workers measured short of the prediction, back
	 * to 4); a return from counts it had run at is a flip. */
	for (size_t i = 2; i < h->n_applied; i++)
		if (h->applied[i].cfg.worker.count == cur->worker.count &&
		    h->applied[i].cfg.ps.count == cur->ps.count)
			return true;
	return false;
}

/* Whether the newest configuration is still warming up (its speed or its
 * nodes' CPU use still rises, or its warm-up has not passed): then *out
 * holds and true.  Else *settled_ms is where the run settled. */
static bool job_warming(const struct rv_alg_job_history *h, const struct rv_alg_params *p,
			struct rv_alg_decision *out, int64_t *settled_ms)
{
	const struct rv_alg_applied *cur = &h->applied[0];
	int64_t use_ms = rv_alg_usage_settled_ms(h->usage, h->n_usage, cur->applied_ts_ms, p);
	int64_t settled = h->n_speed ? rv_alg_job_run_settled_ms(h, h->speed, h->n_speed,
								 cur->applied_ts_ms, p)
				     : cur->applied_ts_ms;

	if (use_ms == INT64_MAX || settled == INT64_MAX) {
		rv_alg_decision_init(out, &cur->cfg);
		out->algorithm = RV_ALG_ID_HOLD;
		rv_alg_reason_add(out, "warming up: the %s since plan %" PRId64 " still rises",
				  use_ms == INT64_MAX ? "CPU use" : "speed", cur->id);
		return true;
	}
	if (use_ms > settled)
		settled = use_ms;
	*settled_ms = settled;
	if (h->now_ms >= settled)
		return false;
	rv_alg_decision_init(out, &cur->cfg);
	out->algorithm = RV_ALG_ID_HOLD;
	rv_alg_reason_add(out,
			  "warming up: %" PRId64 " ms of the warm-up since plan %" PRId64
			  " still to go",
			  settled - h->now_ms, cur->id);
	return true;
}

/* Scratch copies of a history's windows, each at least one element. */
struct job_scratch {
	struct rv_alg_speed_obs *obs;
	struct rv_alg_step *steps;
	struct rv_alg_usage *use, *mem;
};

static void job_scratch_release(struct job_scratch *s)
{
	free(s->obs);
	free(s->steps);
	free(s->use);
	free(s->mem);
}

/* The counts' history: whether any running plan changed them, how many
 * did, and whether the newest that did was the model's. */
static void job_state_counts(const struct rv_alg_job_history *h, struct rv_alg_job_state *st)
{
	bool newest = true;

	st->first_counts = true;
	for (size_t i = 0; i + 1 < h->n_applied; i++)
		if (h->applied[i].stage == RV_ALG_STAGE_RUNNING &&
		    (h->applied[i].cfg.worker.count != h->applied[i + 1].cfg.worker.count ||
		     h->applied[i].cfg.ps.count != h->applied[i + 1].cfg.ps.count)) {
			st->first_counts = false;
			st->count_changes++;
			if (newest)
				st->model_counts =
					algorithm_is(&h->applied[i], RV_ALG_ID_WORKER_COUNT_MODEL);
			newest = false;
		}
}

/* The state the composition sees: speeds corrected for stragglers and
 * starvation with each run's warm-up dropped, settled step times, usage
 * from where the run settled (usage of the ramp is not the need), the
 * memory history, the last resizes, and the counts' history. */
static int job_state_build(const struct rv_alg_job_history *h, const struct rv_alg_params *p,
			   int64_t settled_ms, struct job_scratch *s, struct rv_alg_job_state *st)
{
	const struct rv_alg_applied *cur = &h->applied[0];

	s->obs = malloc((h->n_speed ? h->n_speed : 1) * sizeof(*s->obs));
	s->steps = malloc((h->n_steps ? h->n_steps : 1) * sizeof(*s->steps));
	s->use = malloc((h->n_usage ? h->n_usage : 1) * sizeof(*s->use));
	s->mem = malloc((h->n_mem_usage ? h->n_mem_usage : 1) * sizeof(*s->mem));
	if (!s->obs || !s->steps || !s->use || !s->mem)
		return -ENOMEM;
	if (h->n_speed)
		memcpy(s->obs, h->speed, h->n_speed * sizeof(*s->obs));
	if (h->n_steps)
		memcpy(s->steps, h->steps, h->n_steps * sizeof(*s->steps));
	size_t nobs = rv_alg_correct_straggler_speeds(h, p, s->obs, h->n_speed);
	nobs = rv_alg_correct_starved_speeds(h, p, s->obs, nobs);
	nobs = rv_alg_drop_run_warmup(h, s->obs, nobs, p);
	*st = (struct rv_alg_job_state){ .strategy = h->strategy,
					 .lim = h->lim,
					 .cur = cur->cfg,
					 .now_ms = h->now_ms,
					 .speed = s->obs,
					 .n_speed = nobs };
	st->steps = s->steps;
	st->n_steps = rv_alg_settled_steps(s->steps, h->n_steps, cur->applied_ts_ms, p);
	for (size_t i = 0; i < h->n_usage; i++)
		if (h->usage[i].t_ms >= settled_ms ||
		    settled_ms <= cur->applied_ts_ms + p->warmup_ms)
			s->use[st->n_usage++] = h->usage[i];
	st->usage = s->use;
	if (h->mem_usage) {
		st->mem_usage = s->mem;
		st->n_mem_usage = mem_history(h, s->mem);
	}
	rv_alg_last_resizes(h->applied, h->n_applied, st->last_resize);
	starved_resizes(h->applied, h->n_applied, p, st->last_resize);
	/* memory that still rises says nothing of the need at another PS count */
	st->ps_mem_fit = h->mem_usage &&
			 !rv_alg_mem_rises(s->mem, st->n_mem_usage, RV_ALG_WORKER) &&
			 !rv_alg_mem_rises(s->mem, st->n_mem_usage, RV_ALG_PS_ROLE) &&
			 rv_alg_ps_mem_fit(h->mem_usage, h->n_mem_usage, h->applied, h->n_applied,
					   p->min_usage_samples, &st->ps_mem_a, &st->ps_mem_b);
	job_state_counts(h, st);
	return 0;
}

/* JOB_WORSE: a configuration measured worse (and reverted) is not proposed
 * again; the model may return to an exploration's (its speed is data). */
static bool job_hold_worse(const struct rv_alg_job_history *h, struct rv_alg_decision *out)
{
	bool model = out->algorithm == RV_ALG_ID_WORKER_COUNT_MODEL;

	for (size_t i = 0; i < h->n_applied; i++) {
		if (h->applied[i].outcome == RV_ALG_OUTCOME_WORSE &&
		    !(model && algorithm_is(&h->applied[i], RV_ALG_ID_EXPLORE)) &&
		    rv_alg_same_plan(&h->applied[i], &out->cfg, out->n_migrate, out->n_replace)) {
			hold(out, &h->applied[0].cfg, "this configuration measured worse",
			     h->applied[i].id);
			return true;
		}
	}
	return false;
}

/* JOB_PENDING: the same advice not yet applied is not repeated. */
static bool job_hold_pending(const struct rv_alg_job_history *h, struct rv_alg_decision *out)
{
	if (!h->pending || h->pending->applied_ts_ms != 0 ||
	    !rv_alg_same_plan(h->pending, &out->cfg, out->n_migrate, out->n_replace) ||
	    !algorithm_is(h->pending, out->algorithm))
		return false;
	hold(out, &h->applied[0].cfg, "the same advice is not applied yet", h->pending->id);
	return true;
}

/* What holds a changing plan back, in order; the first that holds ends it. */
static const struct job_hold {
	enum job_hold_id { JOB_WORSE, JOB_PENDING } id;
	bool (*apply)(const struct rv_alg_job_history *h, struct rv_alg_decision *out);
} job_holds[] = {
	{ JOB_WORSE, job_hold_worse },
	{ JOB_PENDING, job_hold_pending },
};

int rv_alg_plan_job(const struct rv_alg_job_history *h, const struct rv_alg_params *p,
		    struct rv_alg_decision *out)
{
	if (!h || !p || !out || (h->n_applied && !h->applied) || (h->n_speed && !h->speed) ||
	    (h->n_usage && !h->usage) || (h->n_steps && !h->steps) ||
	    (h->n_mem_usage && !h->mem_usage))
		return -EINVAL;
	if (h->n_applied == 0) {
		struct rv_alg_config none = { 0 };
		rv_alg_decision_init(out, &none);
		rv_alg_reason_add(out, "no applied plan yet");
		return 0;
	}
	const struct rv_alg_applied *cur = &h->applied[0];
	int64_t settled_ms = 0;
	struct job_scratch s = { 0 };
	struct rv_alg_job_state st;

	if (job_warming(h, p, out, &settled_ms))
		return 0;
	int rc = job_state_build(h, p, settled_ms, &s, &st);
	if (rc == 0)
		rc = rv_alg_plan_running(&st, p, out);
	/* JOB_FLIP: see rv_alg_model_flips: the counts stay, and the rest of
	 * the plan is made for them. */
	if (rc == 0 && out->changed && rv_alg_model_flips(h, out)) {
		st.lim.min_workers = st.lim.max_workers = cur->cfg.worker.count;
		st.lim.min_ps = st.lim.max_ps = cur->cfg.ps.count;
		rc = rv_alg_plan_running(&st, p, out);
		if (rc == 0)
			rv_alg_reason_add(out,
					  "counts kept at %d workers and %d PS: the model would go "
					  "back to the counts its last move (plan %" PRId64
					  ") left",
					  cur->cfg.worker.count, cur->cfg.ps.count, cur->id);
	}
	job_scratch_release(&s);
	if (rc < 0 || !out->changed)
		return rc;
	for (size_t i = 0; i < sizeof(job_holds) / sizeof(job_holds[0]); i++)
		if (job_holds[i].apply(h, out))
			break;
	return 0;
}

int rv_alg_plan_step(const struct rv_alg_job_history *h, const struct rv_alg_params *p,
		     struct rv_alg_verdict *v, struct rv_alg_decision *out)
{
	if (!h || !p || !v || !out || (h->n_applied && !h->applied) || (h->n_speed && !h->speed))
		return -EINVAL;
	memset(v, 0, sizeof(*v));
	struct rv_alg_config none = { 0 };
	rv_alg_decision_init(out, h->n_applied ? &h->applied[0].cfg : &none);
	if (rv_alg_pending_stands(h)) {
		rv_alg_reason_add(out, "the pending plan stands until newer samples arrive");
		return 0;
	}
	if (h->n_applied == 0)
		return rv_alg_plan_job(h, p, out);
	struct rv_alg_outcome_window w;
	int rc = rv_alg_outcome_window(h, p, &w);
	if (rc < 0)
		return rc;
	struct rv_alg_applied *a = malloc(h->n_applied * sizeof(*a));
	if (!a)
		return -ENOMEM;
	memcpy(a, h->applied, h->n_applied * sizeof(*a));
	if (rc == 1) {
		struct rv_alg_outcome_speeds s;
		memset(&s, 0, sizeof(s));
		rv_alg_speed_summarize(h->speed, h->n_speed, w.after_from_ms, INT64_MAX, w.workers,
				       w.ps, 0, &s.after);
		rv_alg_speed_summarize(h->speed, h->n_speed, w.before_from_ms, w.before_to_ms, -1,
				       -1, w.before_last_n, &s.before);
		if (w.before_all_from_ms >= 0)
			rv_alg_speed_summarize(h->speed, h->n_speed, w.before_all_from_ms,
					       w.before_to_ms, -1, -1, w.before_last_n,
					       &s.before_all);
		rc = rv_alg_judge_outcome(h, &s, p, v, out);
		if (rc != 0) {
			free(a);
			if (rc == -EAGAIN) {
				rv_alg_reason_add(out, "measuring plan %" PRId64, h->applied[0].id);
				return 0;
			}
			return rc;
		}
		/* the rest of this step sees the outcome too */
		a[0].outcome = v->outcome;
	}
	struct rv_alg_job_history judged = *h;
	judged.applied = a;
	rc = rv_alg_plan_job(&judged, p, out);
	free(a);
	return rc < 0 ? rc : out->changed ? 1 : 0;
}

int rv_alg_node_name(enum rv_alg_role role, int index, char *buf, size_t size)
{
	if (!buf || size == 0 || index < 0 || (role != RV_ALG_WORKER && role != RV_ALG_PS_ROLE))
		return -EINVAL;
	return snprintf(buf, size, "%s-%d", role == RV_ALG_PS_ROLE ? "ps" : "worker", index);
}

int rv_alg_plan_create_job(const struct rv_alg_job_features *job, const struct rv_alg_ask *ask,
			   const struct rv_alg_history_job *hist, size_t n,
			   const struct rv_alg_limits *lim, const struct rv_alg_params *p,
			   struct rv_alg_decision *out)
{
	if (!ask)
		return -EINVAL;
	int rc = rv_alg_plan_create(job, hist, n, lim, p, out);
	if (rc < 0)
		return rc;
	/* Explicit asks win: a role that gave resources keeps its count and
	 * resources (the running stage right-sizes them from real usage). */
	bool kept = false;
	if (ask->worker_given) {
		out->cfg.worker = ask->cfg.worker;
		kept = true;
	}
	if (ask->has_ps && ask->ps_given) {
		out->cfg.ps = ask->cfg.ps;
		kept = true;
	}
	/* ... but no node larger than the largest node: it could never run */
	bool cut = false;
	struct rv_alg_group *g[2] = { &out->cfg.worker, &out->cfg.ps };
	for (int i = 0; i < 2; i++) {
		if (lim && lim->max_cpu > 0 && g[i]->res.cpu > lim->max_cpu) {
			g[i]->res.cpu = lim->max_cpu;
			cut = true;
		}
		if (lim && lim->max_memory_mb > 0 && g[i]->res.memory_mb > lim->max_memory_mb) {
			g[i]->res.memory_mb = lim->max_memory_mb;
			cut = true;
		}
	}
	if (ask->worker_given && (!ask->has_ps || ask->ps_given)) {
		out->algorithm = RV_ALG_ID_USER_SPEC;
		out->reason[0] = '\0';
		rv_alg_reason_add(out, "the job gave resources for every role; kept as asked (the "
				       "running stage right-sizes them from observed usage)");
	} else if (kept) {
		rv_alg_reason_add(out, "roles that gave resources keep them");
	}
	if (cut)
		rv_alg_reason_add(out, "cut to the largest node (%.1f CPU, %lld MiB)", lim->max_cpu,
				  (long long)lim->max_memory_mb);
	return 0;
}
