/*
 * util.c: parameter defaults and the small helpers every algorithm shares:
 * robust statistics (median, MAD, quantiles over GSL), count alignment to
 * node_unit, and the decision/reason helpers.  Pure and reentrant.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "alg_internal.h"

void rv_alg_params_default(struct rv_alg_params *p)
{
	*p = (struct rv_alg_params){
		.min_gain = 0.05,
		.min_fit_configs = 3,
		.min_r2 = 0.8,
		.max_fit_rel_err = 0.08,
		.explore_factor = 1.5,
		.target_frac = 0.9,
		.max_jump = 3.0,
		.grow_factor = 2.0,
		.usage_quantile = 0.8,
		.cpu_margin = 0.03,
		.cpu_margin_min = 0.03,
		.cpu_pinned = 0.99,
		.starved_factor = 2.0,
		.throttle_starved = 0.6,
		.mem_margin = 0.1,
		.mem_margin_min = 0.02,
		.hysteresis = 0.07,
		.min_saving = 0.03,
		.ps_mem_fixed = 0.1,
		.reversal_window_ms = 30 * 60 * 1000,
		.min_usage_samples = 5,
		.oom_factor = 2.0,
		.oom_growth = 2.0,
		.oom_cap_mb = 65536,
		.oom_peak_margin = 0.2,
		.hot_z = 3.0,
		.hot_util = 0.8,
		.hot_cpu_factor = 1.5,
		.ps_saturated = 0.97,
		.hot_samples = 3,
		.straggler_z = 3.0,
		.straggler_ratio = 1.5,
		.knn_k = 5,
		.knn_max_dist = 3.0,
		.create_margin = 0.1,
		.knee_hold_frac = 0.02,
		.knee_hold_cost = 1.05,
		.knee_hold_se = 2.0,
		.knee_hold_share = 0.95,
		.knee_reach_se = 1.0,
		.max_pred_rse = 0.25,
		.knee_tie_gain = 0.025,
		.explore_budget = 4,
		.fit_evidence_f = 0.0,
		.move_confidence_z = 1.0,
		.create_history_max = 200,
		.node_cpu_default = 64.0,
		.node_memory_mb_default = 512LL * 1024,
		.warmup_ms = 30000,
		.batch_mean = 4,
		.starved_growth = 1.6,
		.outcome_better = 1.02,
		.outcome_worse = 0.90,
		.outcome_se = 2.0,
		.min_outcome_samples = 3,
		.outcome_noise_se = 0.05,
		.outcome_samples_max = 20,
		.outcome_before_n = 20,
		.applied_max = 32,
		.speed_obs_max = 4000,
		.usage_max = 8000,
		.usage_window_ms = 600000,
	};
}

void rv_alg_median_mad(double *x, double *tmp, size_t n, double *median, double *mad)
{
	gsl_sort(x, 1, n);
	*median = gsl_stats_median_from_sorted_data(x, 1, n);
	for (size_t i = 0; i < n; i++)
		tmp[i] = fabs(x[i] - *median);
	gsl_sort(tmp, 1, n);
	*mad = gsl_stats_median_from_sorted_data(tmp, 1, n);
}

double rv_alg_quantile(double *x, size_t n, double q)
{
	gsl_sort(x, 1, n);
	return gsl_stats_quantile_from_sorted_data(x, 1, n, q);
}

double rv_alg_robust_z(double v, double median, double mad)
{
	double scale = ALG_MAD_SCALE * mad;
	/* With half the peers identical the MAD is 0; 5% of the median keeps
	 * tiny jitter from reading as an infinite z. */
	double floor = 0.05 * fabs(median);

	if (scale < floor)
		scale = floor;
	if (scale <= 0)
		return v > median ? INFINITY : 0;
	return (v - median) / scale;
}

int rv_alg_align_down(int n, int unit)
{
	return unit > 1 ? n / unit * unit : n;
}

int rv_alg_align_up(int n, int unit)
{
	return unit > 1 ? (n + unit - 1) / unit * unit : n;
}

int rv_alg_clamp_workers(int w, const struct rv_alg_limits *lim)
{
	int unit = lim->node_unit > 0 ? lim->node_unit : 1;
	int lo = rv_alg_align_up(lim->min_workers > 0 ? lim->min_workers : 1, unit);
	int hi = lim->max_workers > 0 ? rv_alg_align_down(lim->max_workers, unit) : w;

	w = rv_alg_align_up(w, unit);
	if (w < lo)
		w = lo;
	if (hi >= unit && w > hi)
		w = hi;
	return w;
}

static const char *const alg_id_names[] = {
	[RV_ALG_ID_UNKNOWN] = "",
	[RV_ALG_ID_HOLD] = "hold",
	[RV_ALG_ID_WORKER_COUNT_MODEL] = "worker_count_model",
	[RV_ALG_ID_EXPLORE] = "explore",
	[RV_ALG_ID_RIGHTSIZE] = "rightsize",
	[RV_ALG_ID_HOT_PS] = "hot_ps",
	[RV_ALG_ID_STRAGGLER] = "straggler",
	[RV_ALG_ID_REVERT] = "revert",
	[RV_ALG_ID_CREATE_KNN] = "create_knn",
	[RV_ALG_ID_CREATE_DEFAULT] = "create_default",
	[RV_ALG_ID_USER_SPEC] = "user_spec",
	[RV_ALG_ID_OOM] = "oom",
	[RV_ALG_ID_OOM_MEMORY_STEP] = "oom_memory_step",
};

const char *rv_alg_id_name(enum rv_alg_id id)
{
	if ((unsigned)id >= sizeof(alg_id_names) / sizeof(alg_id_names[0]))
		return "";
	return alg_id_names[id];
}

enum rv_alg_id rv_alg_id_parse(const char *name)
{
	for (size_t i = 1; name && i < sizeof(alg_id_names) / sizeof(alg_id_names[0]); i++)
		if (!strcmp(name, alg_id_names[i]))
			return (enum rv_alg_id)i;
	return RV_ALG_ID_UNKNOWN;
}

void rv_alg_decision_init(struct rv_alg_decision *d, const struct rv_alg_config *cfg)
{
	memset(d, 0, sizeof(*d));
	d->cfg = *cfg;
	d->algorithm = RV_ALG_ID_HOLD;
}

void rv_alg_reason_add(struct rv_alg_decision *d, const char *fmt, ...)
{
	size_t len = strlen(d->reason);
	va_list ap;

	if (len + 3 >= sizeof(d->reason))
		return;
	if (len > 0) {
		memcpy(d->reason + len, "; ", 3);
		len += 2;
	}
	va_start(ap, fmt);
	vsnprintf(d->reason + len, sizeof(d->reason) - len, fmt, ap);
	va_end(ap);
}

int rv_alg_config_equal(const struct rv_alg_config *a, const struct rv_alg_config *b)
{
	return a->worker.count == b->worker.count && a->ps.count == b->ps.count &&
	       a->worker.res.cpu == b->worker.res.cpu &&
	       a->worker.res.memory_mb == b->worker.res.memory_mb &&
	       a->ps.res.cpu == b->ps.res.cpu && a->ps.res.memory_mb == b->ps.res.memory_mb;
}

static double config_cpu(const struct rv_alg_config *c)
{
	return c->worker.count * c->worker.res.cpu + c->ps.count * c->ps.res.cpu;
}

static double config_mem(const struct rv_alg_config *c)
{
	return (double)c->worker.count * (double)c->worker.res.memory_mb +
	       (double)c->ps.count * (double)c->ps.res.memory_mb;
}

int rv_alg_fits_free(const struct rv_alg_limits *lim, const struct rv_alg_config *cur,
		     const struct rv_alg_config *next)
{
	/* small tolerance: CPU values are sums of doubles */
	if (lim->free_cpu >= 0 && config_cpu(next) - config_cpu(cur) > lim->free_cpu + 1e-9)
		return 0;
	if (lim->free_memory_mb >= 0 &&
	    config_mem(next) - config_mem(cur) > (double)lim->free_memory_mb)
		return 0;
	return 1;
}

double rv_alg_cpu_up(double cpu)
{
	return ceil(cpu * 10 - 1e-6) / 10;
}

double rv_alg_mb_up(double mb)
{
	return ceil(mb - 1e-6);
}
