/*
 * rover_alg.h: resource estimation for elastic jobs (librover-alg.a).
 *
 * Pure functions over GSL and libc: no I/O, no logging, no globals, no wall
 * clock (time comes only from the inputs).  Used by the brain (cluster mode)
 * and by a job master in-process (single-job mode).  Every function is
 * reentrant; inputs are borrowed, outputs are written into caller memory and
 * nothing is allocated that outlives a call.  Callers run
 * gsl_set_error_handler_off() once at start; GSL return codes are checked here.
 * Functions return 0 on success and a negative errno on bad input.
 */
#ifndef ROVER_ALG_H
#define ROVER_ALG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest list of migrated or replaced nodes a decision carries. */
#define RV_ALG_MAX_NODES 128
/* Size of the human reason buffer in a decision (always NUL-terminated). */
#define RV_ALG_REASON_LEN 512

enum rv_alg_strategy {
	RV_ALG_ALLREDUCE = 0, /* synchronous data parallel, workers only */
	RV_ALG_PS = 1,        /* asynchronous parameter server */
};

enum rv_alg_role {
	RV_ALG_WORKER = 0,
	RV_ALG_PS_ROLE = 1,
};

/* Resources of one node: CPU cores and memory in MiB. */
struct rv_alg_resource {
	double cpu;
	int64_t memory_mb;
};

/* Count and per-node resources of one role. */
struct rv_alg_group {
	int count;
	struct rv_alg_resource res;
};

/* A job's configuration: workers and (PS jobs only) parameter servers. */
struct rv_alg_config {
	struct rv_alg_group worker;
	struct rv_alg_group ps;
};

/*
 * Limits of a job.  Counts move in multiples of node_unit (workers only);
 * max_workers and max_ps <= 0 mean no bound.
 * max_cpu/max_memory_mb bound one node (<= 0: no bound).  free_cpu and
 * free_memory_mb are the cluster's free capacity in cluster mode; a plan never
 * asks for more than that on top of what the job holds (< 0: unknown).
 */
struct rv_alg_limits {
	int min_workers, max_workers, node_unit;
	int min_ps, max_ps;
	double max_cpu;
	int64_t max_memory_mb;
	double free_cpu;
	int64_t free_memory_mb;
};

/* Tunables.  Fill with rv_alg_params_default() and change what you need. */
struct rv_alg_params {
	/* throughput model and worker count */
	double min_gain;        /* relative speed gain per added node to keep growing: 0.05 */
	int min_fit_configs;    /* distinct configs before the model is trusted: 3 */
	double min_r2;          /* fit r2 (on speed) to trust the model: 0.8 */
	double max_fit_rel_err; /* ...or a relative RMS error at most this: 0.08 */
	double explore_factor;  /* geometric growth while exploring: 1.5 */
	double target_frac;     /* knee: the fewest cores reaching this share of the best
				 * speed achievable within the limits: 0.9 */
	double max_jump;        /* never more than this times the largest measured
				 * worker count in one plan, nor less than the smallest
				 * measured divided by it (extrapolation guard): 3.0 */
	/* right-sizing */
	double usage_quantile;  /* quantile of usage samples: 0.8 */
	double cpu_margin;      /* added to the CPU quantile: 0.03 (3%) */
	double cpu_pinned;      /* usage at this share of the limit means starved: 0.99 */
	double starved_factor;  /* a starved role's CPU grows by this factor: 2.0 */
	double mem_margin;      /* added to the memory quantile: 0.2 */
	double hysteresis;      /* relative change needed to resize: 0.07 */
	int64_t reversal_window_ms; /* no reversal of a resize within: 1800000 */
	int min_usage_samples;  /* per role, before right-sizing: 5 */
	/* OOM */
	double oom_factor;      /* memory factor on the first OOM: 1.5 */
	double oom_factor_step; /* added to the factor per further OOM: 0.5 */
	int64_t oom_cap_mb;     /* never more memory than this: 65536 */
	double oom_peak_margin; /* at least the peak times (1 + this): 0.2 */
	/* hot PS */
	double hot_z;           /* robust z of a hot PS: 3.0 */
	double hot_util;        /* ...and CPU use of at least this share of its limit: 0.8 */
	double hot_cpu_factor;  /* migrated PS CPU = use * this: 1.5 */
	double ps_saturated;    /* all PS pinned (median at this share of the limit, the
				 * quantile at cpu_pinned) -> add PS: 0.97 */
	int hot_samples;        /* latest samples per PS averaged: 3 */
	/* stragglers */
	double straggler_z;     /* robust z of a straggler: 3.0 */
	double straggler_ratio; /* ...and at least this times the median: 1.5 */
	/* create stage */
	int knn_k;              /* neighbours used: 5 */
	double knn_max_dist;    /* neighbours farther than this are ignored: 3.0 */
	double create_margin;   /* added to neighbours' CPU and memory: 0.1 */
};

/* Fill *p with the defaults listed in struct rv_alg_params. */
void rv_alg_params_default(struct rv_alg_params *p);

/* ---- throughput model (fit.c) ---- */

enum rv_alg_model {
	RV_ALG_MODEL_SYNC = 0,  /* f(w) = 1 / (t0/w + t1 + t2*w) */
	RV_ALG_MODEL_ASYNC = 1, /* f(p,w) = w / (t0 + t1*w/p + t2*w + t3*p) */
};

/* One observation of job speed (samples/s) in a configuration. */
struct rv_alg_speed_obs {
	int workers;
	int ps;      /* ignored by the sync model */
	double speed;
	int64_t t_ms;
};

struct rv_alg_fit {
	enum rv_alg_model model;
	double theta[4];  /* t0..t3 (t3 = 0 for the sync model), all >= 0 */
	int n_theta;      /* 3 (sync) or 4 (async) */
	double r2;        /* coefficient of determination on speed */
	double rel_rmse;  /* root mean square of (predicted - observed) / observed */
	int n_configs;    /* distinct (workers, ps) configs observed */
	int n_ps_values;  /* distinct PS counts observed */
	int max_workers_seen; /* largest worker count observed */
	int min_workers_seen; /* smallest worker count observed */
	int n_points;     /* observations used */
	double confidence; /* 0..1: grows with configs, falls with relative error */
};

/*
 * Fit the model to n observations by weighted non-negative least squares on
 * the inverse speed (relative errors).  Observations with speed <= 0 or
 * workers <= 0 (or ps <= 0 for the async model) are skipped.  Returns 0,
 * -EINVAL on NULL arguments, -ENODATA when no usable observation is left.
 */
int rv_alg_fit_speed(enum rv_alg_model model, const struct rv_alg_speed_obs *obs,
		     size_t n, struct rv_alg_fit *out);

/* Predicted samples/s of a fit for a config; 0 when the model gives none. */
double rv_alg_fit_predict(const struct rv_alg_fit *fit, int workers, int ps);

/* Whether a fit is good enough to plan from under *p (configs and error). */
bool rv_alg_fit_trusted(const struct rv_alg_fit *fit, const struct rv_alg_params *p);

/* ---- decisions ---- */

struct rv_alg_migration {
	int node;                   /* PS index */
	struct rv_alg_resource res; /* its new resources */
};

/* What a plan function decided.  Self-contained: holds no pointers to inputs. */
struct rv_alg_decision {
	struct rv_alg_config cfg;   /* new counts and per-node resources per role */
	const char *algorithm;      /* static string: "worker_count_model", "explore",
				     * "rightsize", "hot_ps", "straggler", "create_knn",
				     * "create_default", "oom", "hold" */
	bool changed;               /* cfg differs from the current config, or
				     * nodes are migrated or replaced */
	double predicted_speed;     /* samples/s for cfg; 0 when unknown */
	double fit_r2;              /* r2 of the fit used; 0 when none */
	int fit_configs;            /* distinct configs behind the fit */
	size_t n_migrate;
	struct rv_alg_migration migrate[RV_ALG_MAX_NODES];
	size_t n_replace;
	int replace[RV_ALG_MAX_NODES]; /* worker nodes to replace (stragglers) */
	char reason[RV_ALG_REASON_LEN];
};

/* ---- worker count (workers.c) ---- */

/*
 * Choose counts from a trusted fit: starting at the minimum, add node_unit
 * workers (or, for the async model, one PS when that gains more) while the
 * relative speed gain per added node is at least p->min_gain, within the
 * limits and the cluster's free capacity for the per-node resources in *cur.
 * Writes the counts and predicted speed to *out (its reason too).
 */
int rv_alg_choose_workers(const struct rv_alg_fit *fit, const struct rv_alg_limits *lim,
			  const struct rv_alg_config *cur, const struct rv_alg_params *p,
			  struct rv_alg_decision *out);

/*
 * Exploration before a model can be trusted: grow the workers geometrically
 * (x p->explore_factor, at least +node_unit) within the limits; stop when the
 * last growth gained less than p->min_gain per added node (returning to the
 * smaller config when it was at least as fast) and never move to a config
 * that was measured slower than the current one.
 */
int rv_alg_explore(const struct rv_alg_speed_obs *obs, size_t n, const struct rv_alg_limits *lim,
		   const struct rv_alg_config *cur, const struct rv_alg_params *p,
		   struct rv_alg_decision *out);

/* ---- usage, right-sizing, hot PS (rightsize.c, hotps.c) ---- */

/* One usage sample of one node. */
struct rv_alg_usage {
	enum rv_alg_role role;
	int node;
	int64_t t_ms;
	double cpu;        /* cores used */
	int64_t memory_mb; /* resident memory used */
};

/* The last resize of a role (t_ms = 0: none), for hysteresis. */
struct rv_alg_resize {
	int64_t t_ms;
	struct rv_alg_resource from, to;
};

/*
 * Right-size one role from its usage samples: CPU = quantile * (1 + cpu_margin),
 * memory = max(quantile * (1 + mem_margin), observed peak), each bounded by
 * the per-node limits.  A value changes only when it differs from cur by more
 * than p->hysteresis and does not reverse `last` within the reversal window
 * (now_ms - last->t_ms; last may be NULL).  Memory never drops below the
 * observed peak, hysteresis or not (only the per-node limit bounds it).
 * Returns 1 when *out differs from *cur, 0 when not (out = cur), -ENODATA with
 * too few samples (out = cur), -EINVAL on bad arguments.
 */
int rv_alg_rightsize(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role,
		     const struct rv_alg_resource *cur, const struct rv_alg_resize *last,
		     int64_t now_ms, const struct rv_alg_limits *lim,
		     const struct rv_alg_params *p, struct rv_alg_resource *out);

/*
 * Hot PS: the mean CPU of each PS over its latest p->hot_samples samples; a PS
 * whose robust z ((x - median) / (1.4826 MAD)) exceeds p->hot_z and whose use
 * is at least p->hot_util of its limit is migrated to use * p->hot_cpu_factor
 * (bounded by lim->max_cpu and the free cluster CPU).  When every PS is pinned
 * at its limit over the window (its usage quantile at p->cpu_pinned and its
 * median at p->ps_saturated of it), *grow_ps is set to 1.  Needs 3 PS with samples
 * to call one hot.  Appends migrations to out->migrate and a line per finding
 * to out->reason.  Returns the number of hot PS, or a negative errno.
 */
int rv_alg_hot_ps(const struct rv_alg_usage *u, size_t n, const struct rv_alg_group *ps,
		  const struct rv_alg_limits *lim, const struct rv_alg_params *p,
		  int *grow_ps, struct rv_alg_decision *out);

/* Whether a role's CPU use sits at its limit (p->cpu_pinned of cur->cpu at
 * the usage quantile): the need is hidden and the role is starved. */
bool rv_alg_role_starved(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role,
			 const struct rv_alg_resource *cur, const struct rv_alg_params *p);

/* ---- stragglers (straggler.c) ---- */

/* One step-time sample of one worker. */
struct rv_alg_step {
	int node;
	int64_t t_ms;
	double step_s;
};

/*
 * Stragglers: per worker the median step time; a worker whose robust z
 * exceeds p->straggler_z and whose time is at least p->straggler_ratio times
 * the median over workers is named.  Writes up to max node ids into nodes.
 * Returns how many were found (may exceed max), or a negative errno.
 */
int rv_alg_stragglers(const struct rv_alg_step *s, size_t n, const struct rv_alg_params *p,
		      int *nodes, size_t max);

/* ---- OOM (oom.c) ---- */

/*
 * Memory for a node relaunched after its oom_count-th OOM (>= 1):
 * max(prev * (oom_factor + oom_factor_step * (oom_count - 1)),
 *     peak * (1 + oom_peak_margin)), capped at min(p->oom_cap_mb, lim->max_memory_mb)
 * and, when known, at prev + lim->free_memory_mb.  Returns 1 when it grew,
 * 0 when already at the cap (out = prev), -EINVAL on bad arguments.
 */
int rv_alg_oom_memory(int64_t prev_mb, int64_t peak_mb, int oom_count,
		      const struct rv_alg_limits *lim, const struct rv_alg_params *p,
		      int64_t *out_mb);

/* ---- create stage (create.c) ---- */

/* Features of a job, as submitted. */
struct rv_alg_job_features {
	enum rv_alg_strategy strategy;
	double parameters;   /* model parameters */
	double batch_size;
	double dataset_size; /* samples */
	const char *user;    /* may be NULL */
	const char *name;    /* may be NULL */
};

/* A finished job: its features and the configuration it ran well with. */
struct rv_alg_history_job {
	const char *id;      /* cited in the reason; may be NULL */
	struct rv_alg_job_features f;
	struct rv_alg_config cfg;
};

/*
 * Strip trailing digits, version suffixes ("-v3", "_v12") and separators from
 * a job name: "ctr-train-v2-20261120" -> "ctr-train".  Writes at most size
 * bytes (NUL included) into buf.  Returns the stem length or -EINVAL.
 */
int rv_alg_name_stem(const char *name, char *buf, size_t size);

/*
 * Create stage for a job that gives no resources: a weighted nearest-neighbour
 * estimate from finished jobs of the same strategy (log-scaled model size,
 * batch size, dataset size; same user and name stem count as closer), or a
 * safe default from the model size when none is near.  Result within *lim.
 */
int rv_alg_plan_create(const struct rv_alg_job_features *job,
		       const struct rv_alg_history_job *hist, size_t n,
		       const struct rv_alg_limits *lim, const struct rv_alg_params *p,
		       struct rv_alg_decision *out);

/* The create-stage default from model size alone (no history). */
void rv_alg_create_default(const struct rv_alg_job_features *job,
			   const struct rv_alg_limits *lim, struct rv_alg_config *out);

/* ---- composition (plan.c) ---- */

/* Everything the running-stage planner looks at.  All arrays are borrowed. */
struct rv_alg_job_state {
	enum rv_alg_strategy strategy;
	struct rv_alg_limits lim;
	struct rv_alg_config cur;
	int64_t now_ms;                    /* time of the latest input */
	const struct rv_alg_speed_obs *speed;
	size_t n_speed;
	const struct rv_alg_usage *usage;
	size_t n_usage;
	const struct rv_alg_step *steps;
	size_t n_steps;
	struct rv_alg_resize last_resize[2]; /* indexed by enum rv_alg_role */
};

/*
 * Running stage: worker (and PS) count from the throughput model or by
 * exploration, hot PS migration and PS growth, right-sizing of each role,
 * stragglers to replace.  out->algorithm names the leading change (hot_ps,
 * straggler, worker_count_model, explore, rightsize) or "hold"; out->reason
 * lists each part, e.g. "throughput model predicts +18% samples/s with 6
 * workers; fit r2=0.97 from 5 configs".
 */
int rv_alg_plan_running(const struct rv_alg_job_state *st, const struct rv_alg_params *p,
			struct rv_alg_decision *out);

/*
 * OOM stage: the config with more memory for the role of the node that ran
 * out (see rv_alg_oom_memory); peak_mb may be 0 when unknown.
 */
int rv_alg_plan_oom(const struct rv_alg_config *cur, enum rv_alg_role role, int64_t peak_mb,
		    int oom_count, const struct rv_alg_limits *lim, const struct rv_alg_params *p,
		    struct rv_alg_decision *out);

#endif
