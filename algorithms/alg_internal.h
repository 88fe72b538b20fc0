/*
 * alg_internal.h: helpers shared by the algorithm sources, not part of the
 * public API (rover_alg.h).  Same rules: pure, reentrant, no allocation that
 * outlives a call.
 */
#ifndef ALG_INTERNAL_H
#define ALG_INTERNAL_H

#include <stddef.h>

#include "rover_alg.h"

/* 1.4826 * MAD estimates the standard deviation of normal data. */
#define ALG_MAD_SCALE 1.4826
/* The standard error of a median over m samples of spread sigma is this
 * times sigma / sqrt(m) (sqrt(pi/2), normal samples): a quarter more than
 * a mean's. */
#define ALG_MEDIAN_SE 1.2533

/*
 * Median and median absolute deviation of x[0..n) (n >= 1).  Sorts x in
 * place; tmp must hold n doubles.
 */
void rv_alg_median_mad(double *x, double *tmp, size_t n, double *median, double *mad);

/* Quantile q of x[0..n) (n >= 1); sorts x in place. */
double rv_alg_quantile(double *x, size_t n, double q);
/* Median share of throttled CPU quota periods over the samples of a role
 * (node < 0: every node) that carry throttling counters, into *share.
 * -ENODATA with fewer than min_samples such samples. */
int rv_alg_throttled_share(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role, int node,
			   size_t min_samples, double *share);
/* The CPU a starved role grows to from `cpu`: x p->starved_factor, or the
 * need its samples' throttled time shows (the median of the CPU used plus
 * the cores held back, x (1 + margin)) when that is further; the next plan
 * right-sizes a doubling that was more than the need. */
double rv_alg_starved_cpu(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role, double cpu,
			  double margin, const struct rv_alg_params *p);
/* Whether CPU use sits at `limit` (held back by it): from throttling when
 * the samples carry it (median throttled share >= p->throttle_starved), else
 * over the samples of `role` (one node, or all with node < 0; at least
 * min_samples), the usage quantile at p->cpu_pinned of it and the median at
 * median_share of it. */
bool rv_alg_cpu_pinned(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role, int node,
		       size_t min_samples, double limit, double median_share,
		       const struct rv_alg_params *p);

/* Robust z of v against (median, mad); a zero MAD falls back to a scale of
 * 5% of the median so that identical peers never look like outliers. */
double rv_alg_robust_z(double v, double median, double mad);

/* Round n down / up to a multiple of unit (unit >= 1). */
int rv_alg_align_down(int n, int unit);
int rv_alg_align_up(int n, int unit);

/* Clamp workers into [min, max] on node_unit multiples (max wins). */
int rv_alg_clamp_workers(int w, const struct rv_alg_limits *lim);

/* Reset a decision to "hold" at cfg with an empty reason. */
void rv_alg_decision_init(struct rv_alg_decision *d, const struct rv_alg_config *cfg);

/* Append "; "-separated text to d->reason (truncating, always terminated). */
void rv_alg_reason_add(struct rv_alg_decision *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Whether a and b are the same configuration (counts and resources). */
int rv_alg_config_equal(const struct rv_alg_config *a, const struct rv_alg_config *b);
int rv_alg_ps_edge_step(int pc, int lo, int hi, int cur_ps, double gain, double paid,
			double min_gain);

/* Round CPU up to tenths of a core and memory up to whole MiB, ignoring
 * float noise (6 * 1.1 must stay 6.6, not become 6.7). */
double rv_alg_cpu_up(double cpu);
double rv_alg_mb_up(double mb);

/* Memory for a role whose memory rises over its history h (NULL: u): where
 * it will be two usage windows ahead plus p->mem_margin, whole MiB; *at =
 * where it will be ahead_ms from its newest sample, without margin.  0 (and
 * *at 0) when it does not rise.  See rv_alg_rightsize_trend. */
/* Whether a role's memory over history h still rises (the rise test of
 * right-sizing, not ended). */
int rv_alg_mem_rises(const struct rv_alg_usage *h, size_t nh, enum rv_alg_role role);
double rv_alg_mem_rise_target(const struct rv_alg_usage *u, size_t n, const struct rv_alg_usage *h,
			      size_t nh, enum rv_alg_role role, const struct rv_alg_params *p,
			      double ahead_ms, double *at);
/* The OOM memory factor for a node's oom_count-th OOM (>= 1): oom_factor x
 * oom_growth^(oom_count - 1). */
double rv_alg_oom_step(const struct rv_alg_params *p, int oom_count);

/* Whether moving from cur to next fits the cluster's free capacity
 * (lim->free_cpu / free_memory_mb < 0: unknown, anything fits). */
int rv_alg_fits_free(const struct rv_alg_limits *lim, const struct rv_alg_config *cur,
		     const struct rv_alg_config *next);

/* rv_alg_choose_workers with observations: a measured configuration's mean
 * speed stands for the model's prediction of it. */
int rv_alg_choose_workers_obs(const struct rv_alg_fit *fit, const struct rv_alg_speed_obs *obs,
			      size_t nobs, const struct rv_alg_limits *lim,
			      const struct rv_alg_config *cur, const struct rv_alg_params *p,
			      struct rv_alg_decision *out);

/* rv_alg_explore without measuring anything new: no step to an unmeasured
 * count, no bisection; only the settle on the measured knee at cur's PS
 * count (or a hold).  For a job whose exploration budget is spent. */
int rv_alg_settle_measured(const struct rv_alg_speed_obs *obs, size_t n,
			   const struct rv_alg_limits *lim, const struct rv_alg_config *cur,
			   const struct rv_alg_params *p, struct rv_alg_decision *out);

/* The best measured configuration: among the counts measured at least
 * twice within the limits (and the free capacity), the cheapest whose mean
 * speed reaches target_frac of the best measured mean, within
 * knee_reach_se standard errors (ties: the faster); resources as in cur.
 * *share (may be NULL) gets its mean over the best mean.  Returns 0,
 * -ENODATA when nothing is measured twice, -EINVAL on bad arguments. */
int rv_alg_best_measured(const struct rv_alg_speed_obs *obs, size_t n,
			 const struct rv_alg_limits *lim, const struct rv_alg_config *cur,
			 const struct rv_alg_params *p, struct rv_alg_config *best_cfg,
			 double *share);

/* Observations of (w, ps) with a speed, counted up to at most (0: all). */
int rv_alg_obs_count(const struct rv_alg_speed_obs *obs, size_t n, int w, int ps, int at_most);

/* Mean observed speed at (w, ps); 0 when never observed. */
double rv_alg_mean_speed(const struct rv_alg_speed_obs *obs, size_t n, int w, int ps);

/* Relative spread of one speed observation, pooled over every measured
 * configuration (deviations from each one's mean); 0 without repeats. */
double rv_alg_speed_noise(const struct rv_alg_speed_obs *obs, size_t n);

/* Relative standard error of a fit's predicted speed at (workers, ps) for
 * observations of relative spread noise; 0 when it has none. */
double rv_alg_fit_predict_rse(const struct rv_alg_fit *fit, const struct rv_alg_speed_obs *obs,
			      size_t n, int workers, int ps, double noise);

/* The confidence of a count move (confidence.c). */
struct rv_alg_confidence {
	double gain;      /* predicted relative speed change, next over cur */
	double se;        /* its relative standard error */
	double evidence;  /* how far the fit beats a flat speed, in noise units
			  * (an F ratio; INFINITY with no noise measured) */
	bool explains;    /* evidence reaches p->fit_evidence_f */
	bool beyond_data; /* next lies outside the measured counts */
	bool confident;   /* the move may be taken */
};

/* Whether a fit explains the speeds obs[0..n) beyond their noise: it beats
 * a flat speed by p->fit_evidence_f times what noise alone would give
 * (always, when that is 0).  *evidence (may be NULL) gets the ratio. */
bool rv_alg_fit_explains(const struct rv_alg_fit *fit, const struct rv_alg_speed_obs *obs, size_t n,
			 const struct rv_alg_params *p, double *evidence);

/*
 * The confidence of moving from cur to next counts (resources are not
 * looked at): the speed at each is its measured mean where measured twice
 * or more, else the fit's prediction, each with its standard error.  A
 * move to more nodes is confident when its gain exceeds
 * p->move_confidence_z standard errors (one to fewer saves resources for
 * sure: the knee judges whether the fewer reach the line); and neither
 * unless the fit explains the speeds (rv_alg_fit_explains).  A move
 * beyond the measured counts needs only the latter (its prediction's error
 * measures the extrapolation, which exploration bounds).
 * Returns 0, -EINVAL on bad arguments, -ENODATA when either speed is
 * unknown.
 */
int rv_alg_move_confidence(const struct rv_alg_fit *fit, const struct rv_alg_speed_obs *obs,
			   size_t n, const struct rv_alg_config *cur,
			   const struct rv_alg_config *next, const struct rv_alg_params *p,
			   struct rv_alg_confidence *c);

/* Whether the measured mean speed of (w, ps) is within p->knee_hold_frac
 * of the line: at least target_frac - knee_hold_frac of the best measured
 * mean at ps (its mean alone, no noise slack). */
bool rv_alg_measured_near_line(const struct rv_alg_speed_obs *obs, size_t n, int w, int ps,
			       const struct rv_alg_params *p);

/* Largest measured worker count (at ps) whose mean speed is below
 * p->target_frac of the best measured mean; 0 when none. */
int rv_alg_measured_too_slow(const struct rv_alg_speed_obs *obs, size_t n, int ps,
			     const struct rv_alg_params *p);

/* rv_alg_run_settled_ms() and rv_alg_drop_warmup() with the runs split also
 * where an applied plan of h restarted the nodes at the same counts (a CPU
 * or memory resize, an OOM relaunch): each restart ramps up again.  h NULL:
 * split at count changes only. */
int64_t rv_alg_job_run_settled_ms(const struct rv_alg_job_history *h,
				  const struct rv_alg_speed_obs *o, size_t n, int64_t since_ms,
				  const struct rv_alg_params *p);
size_t rv_alg_drop_run_warmup(const struct rv_alg_job_history *h, struct rv_alg_speed_obs *o,
			      size_t n, const struct rv_alg_params *p);

#endif
