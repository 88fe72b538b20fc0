/*
 * rover_alg.h: resource estimation for elastic jobs (librover-alg.a).
 *
 * Pure functions over GSL and libc: no I/O, no logging, no globals, no wall
 * clock (time comes only from the inputs).  Used by the brain (cluster mode)
 * and by a job master in-process (single-job mode).  Every function is
 * reentrant; inputs are borrowed (only the in-place filters of policy.c,
 * which say so, rewrite an array they are given), outputs are written into
 * caller memory and nothing is allocated that outlives a call.  Callers run
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
	/* A job still climbing (growth to its largest measured count paid)
	 * whose model chose more workers goes towards the count the model
	 * predicts fastest, at most this times the largest measured count
	 * (and where the prediction keeps within max_pred_rse): 2.0; 0: the
	 * model's knee as it is. */
	double grow_factor;
	/* Hysteresis at the knee (workers.c): a current configuration stays
	 * when its speed is within knee_hold_frac (points of the best speed)
	 * of the knee and it costs at most knee_hold_cost times the knee's
	 * configuration, so refits do not flip counts by one; a measured
	 * current speed gets knee_hold_se standard errors of its mean on top,
	 * so noisy jobs do not creep by one worker per plan on noise alone. */
	double knee_hold_frac; /* 0.02 */
	double knee_hold_cost; /* 1.05 */
	double knee_hold_se;   /* 2.0 */
	/* ...but never a count the model predicts under this share of the
	 * speed of a larger, unmeasured knee: whatever the noise of its own
	 * mean, it is then predicted to miss the knee's speed by more than a
	 * user would accept.  0.95; 0: no such bound. */
	double knee_hold_share;
	/* A measured configuration reaches the knee when its mean speed is
	 * within knee_reach_se standard errors (of the difference with the
	 * best measured mean) of target_frac of the best: two counts the noise
	 * cannot tell apart go to the cheaper one.  1.0; 0: means only. */
	double knee_reach_se;
	/* A configuration the data has not measured counts in the knee only
	 * where the fit predicts it to within this relative standard error
	 * (the pooled noise of the observations carried through the design):
	 * beyond it the model is not trusted there, as beyond max_jump.
	 * 0.25; 0: no such bound. */
	double max_pred_rse;
	/* A model's move to an unmeasured count whose last worker buys less
	 * than this relative speed goes one worker lower when that count is
	 * predicted within the fit's uncertainty of the line: 0.025; 0: off. */
	double knee_tie_gain;
	/* Exploration budget: once this many running plans have changed a
	 * job's counts, no further exploration step (a bisection middle, a
	 * move between measured counts, a PS-count probe) is taken, since each
	 * costs a restart that rarely pays by then: the counts go to the
	 * throughput model's choice when its fit is trusted, else stay.
	 * 4; 0: no budget. */
	int explore_budget;
	/* The confidence rule (confidence.c): the throughput model moves the
	 * counts only when its fit beats a flat speed by fit_evidence_f times
	 * what the measured noise alone would give (an F ratio; 0, the
	 * default: no such test, since at 3.0 jobs sent back to exploring
	 * lost more than the test won), and only when the move's
	 * predicted gain exceeds
	 * move_confidence_z standard errors of the current mean and of the
	 * prediction (1.0; a move to fewer nodes saves for sure and needs
	 * only the fit's evidence). */
	double fit_evidence_f;
	double move_confidence_z;
	/* right-sizing */
	double usage_quantile;  /* quantile of usage samples: 0.8 */
	double cpu_margin;      /* added to the CPU quantile: 0.03 (3%) */
	/* With throttling counters the CPU is the usage median plus two
	 * standard errors of it (its measured variability), never less than
	 * this: 0.03 (at 0.01 a PS sized for 21 workers from its use at 10,
	 * scaled by the load, sat at its need, throttled in half its periods
	 * beside the workers, and both roles doubled). */
	double cpu_margin_min;
	double cpu_pinned;      /* usage at this share of the limit means starved: 0.99 */
	double starved_factor;  /* a starved role's CPU grows by this factor: 2.0 */
	/* When usage samples carry cgroup throttling (has_throttled), a role
	 * (or a PS) is starved when the median share of its CPU quota periods
	 * that were throttled is at least this, whatever its usage: 0.6 (a
	 * limit that is tight but enough throttles bursts only, in fewer than
	 * half of the periods; a need above the limit in most).  0: usage only. */
	double throttle_starved;
	/* Added to the level a rising memory reaches a usage window ahead: 0.1. */
	double mem_margin;
	/* Memory of a role whose usage is not rising: its peak in the window
	 * plus twice how far its usage wanders at the top (the spread of the
	 * window's top tenth, at most its robust standard deviation), never
	 * under its quantile plus this: 0.02 (steady usage sits tight). */
	double mem_margin_min;
	double hysteresis;      /* relative change needed to resize: 0.07 */
	/* A plan that only shrinks resources (counts kept, nothing migrated or
	 * replaced) is made only when it saves at least this share of the
	 * job's resources (cores + memory at the node's memory per core):
	 * 0.03; a restart for less is not worth it. */
	double min_saving;
	/* When the PS count grows, the share of a PS's memory that does not
	 * divide among more PS (runtime, buffers): 0.1. */
	double ps_mem_fixed;
	int64_t reversal_window_ms; /* no reversal of a resize within: 1800000 */
	int min_usage_samples;  /* per role, before right-sizing: 5 */
	/* OOM */
	double oom_factor;      /* memory factor on the first OOM: 2 */
	double oom_growth;      /* the factor is multiplied by this per further OOM: 2 */
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
	int create_history_max; /* finished jobs the create stage compares with: 200
				 * (the most recent; older ones describe an older
				 * cluster and cost time for little) */
	/* Default per-node ceilings for a job's limits while the cluster has not
	 * reported its nodes (a spec carries no node size): 64 cores, 512 GiB,
	 * larger than any node we run on, so only real reports bound plans. */
	double node_cpu_default;
	int64_t node_memory_mb_default;
	/* job history (policy.c) */
	/* Speed and step samples within this much job time after a
	 * configuration change are warm-up (start-up, rendezvous, cold
	 * caches): 30000. */
	int64_t warmup_ms;
	/* Consecutive speed samples averaged into one observation: 4 (halves
	 * the noise the fit sees without hiding the curve). */
	int batch_mean;
	/* A plan that raised a role's CPU by more than this factor (beyond PS
	 * load scaling) and measured better fixed a starvation: the speeds
	 * before it were CPU-bound and are dropped: 1.6 (a starved_factor
	 * doubling, less rounding and margins). */
	double starved_growth;
	/* A plan measured at or above outcome_better times the speed before it
	 * is "better": 1.02.  Below outcome_worse times it (and below that
	 * share of its own prediction) it may be "worse": 0.90; only beyond
	 * outcome_se standard errors of the difference, so noise alone never
	 * undoes a plan: 2.0. */
	double outcome_better;
	double outcome_worse;
	double outcome_se;
	/* Settled samples after a plan before it is judged: 3. */
	int min_outcome_samples;
	/* A noisy job measures longer: a plan is judged once the standard
	 * error of the new configuration's mean speed is at most
	 * outcome_noise_se (0.05) of it, at most outcome_samples_max (20)
	 * samples (25-30% speed noise read from 3 samples chose counts on
	 * noise alone). */
	double outcome_noise_se;
	int outcome_samples_max;
	/* Newest samples of the replaced configuration its speed is taken
	 * from: 20. */
	int outcome_before_n;
	/* How much history is read: applied plans looked back on (no repeat of
	 * one measured worse; last resizes): 32; newest speed samples: 4000;
	 * newest usage samples: 8000, from at most usage_window_ms of job time
	 * back (and never from before the current configuration): 600000. */
	int applied_max;
	int speed_obs_max;
	int usage_max;
	int64_t usage_window_ms;
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
	double rel_rmse;  /* root mean square of observed / predicted - 1 */
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
int rv_alg_fit_speed(enum rv_alg_model model, const struct rv_alg_speed_obs *obs, size_t n,
		     struct rv_alg_fit *out);

/* Predicted samples/s of a fit for a config; 0 when the model gives none. */
double rv_alg_fit_predict(const struct rv_alg_fit *fit, int workers, int ps);

/* Whether a fit is good enough to plan from under *p (configs and error). */
bool rv_alg_fit_trusted(const struct rv_alg_fit *fit, const struct rv_alg_params *p);

/* ---- decisions ---- */

struct rv_alg_migration {
	int node;                   /* PS index */
	struct rv_alg_resource res; /* its new resources */
};

/* What made a decision: the rules branch on these ids; their names
 * ("worker_count_model", ...) are what plans store and show, turned into
 * ids and back only by rv_alg_id_parse and rv_alg_id_name. */
enum rv_alg_id {
	RV_ALG_ID_UNKNOWN = 0, /* no name, or one this library does not know */
	RV_ALG_ID_HOLD,
	RV_ALG_ID_WORKER_COUNT_MODEL,
	RV_ALG_ID_EXPLORE,
	RV_ALG_ID_RIGHTSIZE,
	RV_ALG_ID_HOT_PS,
	RV_ALG_ID_STRAGGLER,
	RV_ALG_ID_REVERT,
	RV_ALG_ID_CREATE_KNN,
	RV_ALG_ID_CREATE_DEFAULT,
	RV_ALG_ID_USER_SPEC,
	RV_ALG_ID_OOM,
	RV_ALG_ID_OOM_MEMORY_STEP,
};

/* The name of id: a static string; "" for RV_ALG_ID_UNKNOWN or an id out
 * of range. */
const char *rv_alg_id_name(enum rv_alg_id id);

/* The id of name; RV_ALG_ID_UNKNOWN for NULL or a name not known. */
enum rv_alg_id rv_alg_id_parse(const char *name);

/* What a plan function decided.  Self-contained: holds no pointers to inputs. */
struct rv_alg_decision {
	struct rv_alg_config cfg;   /* new counts and per-node resources per role */
	enum rv_alg_id algorithm;   /* the leading rule (rv_alg_id_name names it) */
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
	/* cgroup CPU throttling: the share of CPU quota periods in which the
	 * node was throttled since its previous sample, 0..1 (cpu.stat's
	 * nr_throttled / nr_periods over the interval); has_throttled false
	 * when unknown (no quota, a sender without counters, a first sample). */
	bool has_throttled;
	double throttled;
	/* The cores the node wanted beyond its limit over the same interval:
	 * cpu.stat's throttled time since its previous sample over the wall
	 * time between them (the kernel adds each CPU's throttled time, so
	 * this is the CPU held back); has_held false when unknown (no
	 * counters, or throttled periods without throttled time). */
	bool has_held;
	double held;
};

/*
 * Fill a usage sample's throttling fields from the change of a node's
 * cumulative cpu.stat counters since its previous sample: periods,
 * throttled periods and throttled microseconds over ms of wall time.  The
 * share needs periods > 0 and throttled >= 0; the cores held back also
 * need ms > 0 and throttled time for throttled periods (a sender without
 * throttled time leaves it unknown).  Anything else (a counter reset: a
 * relaunched node) leaves both unknown.
 */
void rv_alg_usage_throttling(struct rv_alg_usage *u, int64_t periods, int64_t throttled,
			     int64_t throttled_us, int64_t ms);

/* The last resize of a role (t_ms = 0: none), for hysteresis. */
struct rv_alg_resize {
	int64_t t_ms;
	struct rv_alg_resource from, to;
};

/*
 * Right-size one role from its usage samples: CPU = quantile * (1 + cpu_margin),
 * memory = the window's peak plus what its top spread says lies beyond it
 * (see mem_margin_min), never under the observed peak, each bounded by
 * the per-node limits.  A value changes only when it differs from cur by more
 * than p->hysteresis and does not reverse `last` within the reversal window
 * (now_ms - last->t_ms; last may be NULL).  Memory never drops below the
 * observed peak, hysteresis or not (only the per-node limit bounds it).
 * Returns 1 when *out differs from *cur, 0 when not (out = cur), -ENODATA with
 * too few samples (out = cur), -EINVAL on bad arguments.
 */
int rv_alg_rightsize(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role,
		     const struct rv_alg_resource *cur, const struct rv_alg_resize *last,
		     int64_t now_ms, const struct rv_alg_limits *lim, const struct rv_alg_params *p,
		     struct rv_alg_resource *out);

/*
 * rv_alg_rightsize for a role whose usage was measured behind another
 * role's CPU bottleneck that this plan grows by `behind` (> 1): the job
 * can run up to that much faster, so this role's demand follows; its CPU
 * grows to its usage times `behind` (plus the margin) when that is above
 * its limit, in the same plan (a role starved behind the bottleneck shows
 * no throttling until the bottleneck is gone, one plan later).  behind <=
 * 1: the same as rv_alg_rightsize.
 */
int rv_alg_rightsize_behind(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role,
			    const struct rv_alg_resource *cur, const struct rv_alg_resize *last,
			    int64_t now_ms, const struct rv_alg_limits *lim,
			    const struct rv_alg_params *p, double behind,
			    struct rv_alg_resource *out);

/*
 * rv_alg_rightsize_behind with a memory history h[0..nh) besides u (NULL:
 * u): the role's usage samples across plans, as far back as its per-node
 * memory is comparable (memory follows the job's progress, restored from
 * checkpoints, not its configuration).  Memory that rises over h (a
 * least-squares slope beyond 3 standard errors, unless the newer half of h
 * rises significantly slower: the rise ended) is never trimmed; it grows
 * only when it would pass the limit within a quarter of p->usage_window_ms
 * (before a later plan could act), then to where
 * it will be two windows ahead plus p->mem_margin.  Memory never drops
 * below the peak of u or h.
 */
int rv_alg_rightsize_trend(const struct rv_alg_usage *u, size_t n, const struct rv_alg_usage *h,
			   size_t nh, enum rv_alg_role role, const struct rv_alg_resource *cur,
			   const struct rv_alg_resize *last, int64_t now_ms,
			   const struct rv_alg_limits *lim, const struct rv_alg_params *p,
			   double behind, struct rv_alg_resource *out);

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
		  const struct rv_alg_limits *lim, const struct rv_alg_params *p, int *grow_ps,
		  struct rv_alg_decision *out);

/* Whether a role's CPU use sits at its limit (p->cpu_pinned of cur->cpu at
 * the usage quantile): the need is hidden and the role is starved. */
bool rv_alg_role_starved(const struct rv_alg_usage *u, size_t n, enum rv_alg_role role,
			 const struct rv_alg_resource *cur, const struct rv_alg_params *p);

/* ---- stragglers (straggler.c) ---- */

/* One step-time sample of one worker.  compute_s: the part of a step that
 * is the worker's own work, not waiting on its peers (<= 0: unknown); in a
 * synchronous job every worker's step_s is the slowest's, compute_s is not. */
struct rv_alg_step {
	int node;
	int64_t t_ms;
	double step_s;
	double compute_s;
};

/*
 * Stragglers: per worker the median step time (the median compute time
 * instead when every worker measured reports one); a worker whose robust z
 * exceeds p->straggler_z and whose time is at least p->straggler_ratio times
 * the median over workers is named.  Writes up to max node ids into nodes.
 * Returns how many were found (may exceed max), or a negative errno.
 */
int rv_alg_stragglers(const struct rv_alg_step *s, size_t n, const struct rv_alg_params *p,
		      int *nodes, size_t max);
/* Whether rv_alg_stragglers judges s[0..n) by compute time (every worker
 * measured reports one) rather than step time; false also when out of
 * memory. */
bool rv_alg_stragglers_by_compute(const struct rv_alg_step *s, size_t n);

/*
 * The share of its speed a job kept with the stragglers rv_alg_stragglers
 * names in s[0..n), against the same job with them replaced by workers at
 * the median step time: all-reduce runs at the slowest worker's pace
 * (slowest of the rest / slowest), async PS adds each worker's rate.  *share
 * gets it (1 when none straggles).  Returns how many straggle, or a
 * negative errno.
 */
int rv_alg_straggler_share(const struct rv_alg_step *s, size_t n, enum rv_alg_strategy strategy,
			   const struct rv_alg_params *p, double *share);

/* ---- OOM (oom.c) ---- */

/*
 * Memory for a node relaunched after its oom_count-th OOM (>= 1):
 * max(prev * oom_factor * oom_growth^(oom_count - 1),
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
int rv_alg_plan_create(const struct rv_alg_job_features *job, const struct rv_alg_history_job *hist,
		       size_t n, const struct rv_alg_limits *lim, const struct rv_alg_params *p,
		       struct rv_alg_decision *out);

/* The create-stage default from model size alone (no history). */
void rv_alg_create_default(const struct rv_alg_job_features *job, const struct rv_alg_limits *lim,
			   struct rv_alg_config *out);

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
	/* memory history for rv_alg_rightsize_trend (NULL: usage only) */
	const struct rv_alg_usage *mem_usage;
	size_t n_mem_usage;
	/* no running plan has changed the counts yet: the first exploration
	 * step (which the speeds do not steer) does not wait for a starved
	 * role, it moves with the role's growth (false: counts wait) */
	bool first_counts;
	/* the counts running now were chosen by the throughput model (the
	 * newest plan that changed them was a worker_count_model plan): a
	 * refit the planner does not trust keeps them instead of exploring
	 * again */
	bool model_counts;
	/* how many running plans have changed the counts (worker or PS) so
	 * far; against explore_budget */
	int count_changes;
	/* a PS's memory as a function of the PS count, ps_mem_a / count +
	 * ps_mem_b MiB, fitted from the peaks measured at two PS counts
	 * (rv_alg_ps_mem_fit); ps_mem_fit false: not known */
	bool ps_mem_fit;
	double ps_mem_a, ps_mem_b;
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

/* ---- a job's history and the running-stage policy (policy.c) ---- */

/*
 * The running stage, step by step, for a caller that keeps a job's history
 * (the brain, from PostgreSQL; a master in single-job mode, in memory):
 *   1. rv_alg_pending_stands(): an unapplied plan stands; nothing to do.
 *   2. rv_alg_outcome_window() + summaries of those samples +
 *      rv_alg_judge_outcome(): the outcome of the newest applied plan; store
 *      it in applied[0].outcome; a revert (or "still measuring") ends here.
 *   3. rv_alg_plan_job(): the next plan, or none.
 * rv_alg_plan_step() runs all three from samples held in memory.
 */

enum rv_alg_stage {
	RV_ALG_STAGE_CREATE = 0,
	RV_ALG_STAGE_RUNNING = 1,
	RV_ALG_STAGE_OOM = 2,
};

enum rv_alg_outcome {
	RV_ALG_OUTCOME_PENDING = 0, /* not judged yet */
	RV_ALG_OUTCOME_UNKNOWN,     /* judged with no speed before it to compare with */
	RV_ALG_OUTCOME_BETTER,
	RV_ALG_OUTCOME_NEUTRAL,
	RV_ALG_OUTCOME_WORSE,
	RV_ALG_OUTCOME_UNJUDGED, /* its job ended before it could be judged */
};

/* "pending", "unknown", "better", "neutral", "worse", "unjudged"; NULL for a
 * bad value. */
const char *rv_alg_outcome_name(enum rv_alg_outcome o);
/* The outcome named s (as above); -EINVAL for anything else. */
int rv_alg_outcome_parse(const char *s);

/* One plan of a job as the policy sees it.  Strings are borrowed.
 * applied_ts_ms: job time it took effect; 0: not applied (the create plan
 * counts as applied from the start).  based_on_ts_ms: newest sample time it
 * was made from.  predicted_speed: samples/s it predicted (0: none).  cfg:
 * the configuration it asked for; n_migrate, n_replace: PS it migrated and
 * workers it replaced. */
struct rv_alg_applied {
	int64_t id; /* cited in reasons */
	enum rv_alg_stage stage;
	const char *algorithm; /* "explore", "rightsize", ... */
	enum rv_alg_outcome outcome;
	int64_t applied_ts_ms;
	int64_t based_on_ts_ms;
	double predicted_speed;
	struct rv_alg_config cfg;
	int n_migrate, n_replace;
};

/*
 * Everything the policy knows of a running job.  All arrays are borrowed.
 * applied: applied plans, newest application first (applied[0] is the
 * configuration running now), at most p->applied_max.  pending: the newest
 * running-stage plan when it is not applied yet, else NULL.  speed: the
 * newest p->speed_obs_max speed samples, oldest first.  usage: the newest
 * p->usage_max samples since rv_alg_usage_since(); steps: those since
 * rv_alg_steps_since(); any order.
 */
struct rv_alg_job_history {
	enum rv_alg_strategy strategy;
	struct rv_alg_limits lim;
	int64_t now_ms; /* newest sample time */
	const struct rv_alg_applied *applied;
	size_t n_applied;
	const struct rv_alg_applied *pending;
	const struct rv_alg_speed_obs *speed;
	size_t n_speed;
	const struct rv_alg_usage *usage;
	size_t n_usage;
	const struct rv_alg_step *steps;
	size_t n_steps;
	/* usage samples from rv_alg_mem_usage_since() on, across plans, for the
	 * memory trend (NULL: none, usage only) */
	const struct rv_alg_usage *mem_usage;
	size_t n_mem_usage;
};

/* Whether an unapplied running plan stands: no sample came after the data
 * it was made from, so a second pass over the same data must not replace
 * it (a revert in particular). */
bool rv_alg_pending_stands(const struct rv_alg_job_history *h);

/* Whether an oom plan not applied yet, for an OOM at oom_ts_ms, holds the
 * running stage back: no sample came a warm-up (p->warmup_ms) past the
 * OOM, so the node is still relaunching with the oom plan's memory, and a
 * running plan made from the configuration before it would undo that.  A
 * job that reports on past that did not take the oom plan. */
bool rv_alg_oom_plan_waits(int64_t oom_ts_ms, int64_t now_ms, const struct rv_alg_params *p);

/* Mean, sample standard deviation (0 with fewer than 2) and count of
 * speed samples. */
struct rv_alg_speed_summary {
	double mean, sd;
	int n;
};

/*
 * The samples the outcome of applied[0] is measured over.  After: samples
 * of its configuration (workers, ps) in [after_from_ms, now].  Before: the
 * newest before_last_n samples (any configuration) in
 * [before_from_ms, before_to_ms), or, when those are fewer than
 * p->min_outcome_samples and before_all_from_ms >= 0, in
 * [before_all_from_ms, before_to_ms).
 */
struct rv_alg_outcome_window {
	int workers, ps;
	int64_t after_from_ms;
	int64_t before_from_ms, before_all_from_ms, before_to_ms;
	int before_last_n;
};

/* 1 when applied[0] is an applied running plan whose outcome is pending
 * (and *w says which samples measure it), 0 when nothing is to be judged,
 * -EINVAL on NULL arguments. */
int rv_alg_outcome_window(const struct rv_alg_job_history *h, const struct rv_alg_params *p,
			  struct rv_alg_outcome_window *w);

/*
 * Summary of the speed samples o[0..n) (oldest first) with from_ms <= t_ms <
 * to_ms and the configuration (workers, ps) (< 0: any), over the newest
 * last_n of them (<= 0: all).  Returns 0 or -EINVAL.
 */
int rv_alg_speed_summarize(const struct rv_alg_speed_obs *o, size_t n, int64_t from_ms,
			   int64_t to_ms, int workers, int ps, int last_n,
			   struct rv_alg_speed_summary *out);

/* The summaries of an outcome window (before_all may be zero when the
 * window has no fallback or before has enough samples). */
struct rv_alg_outcome_speeds {
	struct rv_alg_speed_summary after, before, before_all;
};

struct rv_alg_verdict {
	enum rv_alg_outcome outcome;
	double before, after; /* mean samples/s before and after; 0: unknown */
};

/*
 * Judge applied[0] from its window's summaries: "better" at
 * p->outcome_better times the speed before or more; "worse" below
 * p->outcome_worse times it, below p->outcome_worse times its own
 * prediction (when it made one) and beyond p->outcome_se standard errors
 * of the difference (from the speed before, or from the prediction when
 * the plan predicted less than that); else "neutral"; "unknown" with no speed before.
 * A worse plan is reverted to applied[1]'s configuration, but not an
 * exploration (it measures a configuration on purpose: a slower result is
 * data for the model, and the configuration is not proposed again).
 * Returns 1 when *revert holds a revert decision (algorithm "revert"), 0
 * when judged without one (*v set either way), -EAGAIN while fewer than
 * p->min_outcome_samples settled samples came (still measuring: no new plan
 * until it is judged), -EINVAL when nothing is to be judged.
 */
int rv_alg_judge_outcome(const struct rv_alg_job_history *h, const struct rv_alg_outcome_speeds *s,
			 const struct rv_alg_params *p, struct rv_alg_verdict *v,
			 struct rv_alg_decision *revert);

/* Job time from which the running stage reads usage and step samples: the
 * current configuration's start, at most p->usage_window_ms back. */
/*
 * Warm-up after a change: where a run's speed stops rising.  Over o[start,
 * end) (one run, time order) past p->warmup_ms, the first index from which
 * the rest shows no rising trend (least-squares slope beyond 2.5 standard
 * errors and a rise of 5% or more); *settled false when too few samples are
 * left past the ramp to tell, or while a ramp fitted over the whole run
 * with a change point (the run's first samples give it power under noise)
 * ends later and the samples after its end are not measurably flatter.
 */
size_t rv_alg_settle_index(const struct rv_alg_speed_obs *o, size_t start, size_t end,
			   const struct rv_alg_params *p, bool *settled);
/* The time the run started at since_ms settled, over o[0..n) (time order):
 * since_ms + p->warmup_ms with too few samples to test, INT64_MAX while its
 * speed still rises. */
int64_t rv_alg_run_settled_ms(const struct rv_alg_speed_obs *o, size_t n, int64_t since_ms,
			      const struct rv_alg_params *p);
/* The same over the nodes' CPU use (cores used plus cores held back by the
 * limit) since since_ms, each role's samples averaged per sampling period
 * of one node: the later of the roles' settle times, INT64_MAX while a
 * role's use still rises. */
int64_t rv_alg_usage_settled_ms(const struct rv_alg_usage *u, size_t n, int64_t since_ms,
				const struct rv_alg_params *p);
int64_t rv_alg_usage_since(const struct rv_alg_job_history *h, const struct rv_alg_params *p);
/* Job time from which the step times (steps) are read: rv_alg_usage_since(),
 * or earlier, from the start of the oldest configuration an applied plan
 * that replaced stragglers ended (its speeds are corrected from them). */
int64_t rv_alg_steps_since(const struct rv_alg_job_history *h, const struct rv_alg_params *p);
/*
 * Speeds measured while stragglers ran are of a slower job: those of the
 * configuration before each applied plan in h that replaced workers are
 * divided by the share rv_alg_straggler_share reads from that
 * configuration's settled step times in h->steps.  When no step time says
 * it, they are dropped (with everything older) once the replacement
 * measured better.  o[0..n) oldest first; returns how many are left.
 */
size_t rv_alg_correct_straggler_speeds(const struct rv_alg_job_history *h,
				       const struct rv_alg_params *p, struct rv_alg_speed_obs *o,
				       size_t n);
/* Job time from which the memory history (mem_usage) is read:
 * p->usage_window_ms back, across plans. */
int64_t rv_alg_mem_usage_since(const struct rv_alg_job_history *h, const struct rv_alg_params *p);

/*
 * Drop the warm-up of every run of one configuration in o[0..n) (oldest
 * first): samples within p->warmup_ms of the run's first, but at most half
 * of the run; then average the rest in batches of p->batch_mean consecutive
 * samples.  Rewrites o in place; returns how many observations are left.
 */
size_t rv_alg_drop_warmup(struct rv_alg_speed_obs *o, size_t n, const struct rv_alg_params *p);

/*
 * A PS holds its share of the model plus a part that does not divide
 * (runtime, buffers): per-PS memory = a / count + b.  From the PS memory
 * samples in use[0..n) and the applied plans (newest first), the peak at
 * each PS count the job ran; with two counts measured (at least min_samples
 * each, the newest two) a and b follow.  Returns 1 with *a > 0 and *b >= 0,
 * else 0 (one count only, too few samples, or peaks that do not fall as the
 * count grows: rising memory, say).
 */
int rv_alg_ps_mem_fit(const struct rv_alg_usage *use, size_t n,
		      const struct rv_alg_applied *applied, size_t n_applied, int min_samples,
		      double *a, double *b);

/*
 * Speeds measured before the newest starvation growth are CPU-bound: they
 * would teach the model a curve the job does not have.  A starvation growth
 * is an applied plan that raised worker CPU by more than p->starved_growth,
 * or PS CPU by more than that beyond the workers-per-PS load scaling, and
 * either measured "better" or also changed the counts (the first
 * exploration step carries the growth).  For one that changed the counts
 * the speeds of the configuration before it are multiplied by how far short
 * of its need a role ran there (need / CPU given, the larger over the roles,
 * at least 1), the need read from the median use past the warm-up of the
 * configuration it set (a PS's scaled by the workers per PS), from
 * h->mem_usage (h->usage when NULL).  When that use does not say the need
 * (too few samples, a role at its limit), those speeds and all older ones
 * are dropped, as they are for a growth at the same counts (kept only from
 * its application on).  o[0..n) oldest first; returns how many are left.
 */
size_t rv_alg_correct_starved_speeds(const struct rv_alg_job_history *h,
				     const struct rv_alg_params *p, struct rv_alg_speed_obs *o,
				     size_t n);

/* Keep the step times of s[0..n) taken p->warmup_ms or more after since_ms
 * (warm-up steps would look like stragglers); returns how many are left. */
size_t rv_alg_settled_steps(struct rv_alg_step *s, size_t n, int64_t since_ms,
			    const struct rv_alg_params *p);

/* The newest right-sizing of each role among the applied plans (from what
 * the plan before it ran to what it set), for hysteresis; t_ms = 0: none. */
void rv_alg_last_resizes(const struct rv_alg_applied *a, size_t na, struct rv_alg_resize last[2]);

/* Whether plan a asks for exactly cfg with n_migrate migrations and
 * n_replace replacements (so proposing it again would repeat it). */
bool rv_alg_same_plan(const struct rv_alg_applied *a, const struct rv_alg_config *cfg,
		      size_t n_migrate, size_t n_replace);

/*
 * Whether decision d, a throughput-model move, sends the job back to the
 * counts (workers and PS) of applied[1], left by applied[0], itself a
 * model move to counts the job had run at before (an older applied plan):
 * a flip between two measured counts on noise.
 */
bool rv_alg_model_flips(const struct rv_alg_job_history *h, const struct rv_alg_decision *d);

/*
 * The next running-stage plan from a job's history, with applied[0]'s
 * outcome already judged: filters the speeds (rv_alg_correct_starved_speeds,
 * rv_alg_drop_warmup) and steps (rv_alg_settled_steps), derives the last
 * resizes, runs rv_alg_plan_running (again with the counts kept when the
 * model flips: rv_alg_model_flips), then holds (out->changed false,
 * algorithm "hold") when the result repeats an applied plan measured worse
 * (that is how plans thrash) or the pending plan with the same algorithm.
 * Returns 0, -EINVAL on bad arguments, -ENOMEM.
 */
int rv_alg_plan_job(const struct rv_alg_job_history *h, const struct rv_alg_params *p,
		    struct rv_alg_decision *out);

/*
 * All of the running stage for a caller holding the samples in memory
 * (h->speed must reach back to applied[1]'s application): steps 1-3 above,
 * the outcome summaries taken from h->speed.  v->outcome is
 * RV_ALG_OUTCOME_PENDING when nothing was judged, else the outcome to
 * record for applied[0].  Returns 1 when *out is a plan to make (a revert
 * included), 0 when none, a negative errno on failure.
 */
int rv_alg_plan_step(const struct rv_alg_job_history *h, const struct rv_alg_params *p,
		     struct rv_alg_verdict *v, struct rv_alg_decision *out);

/* Name of the index-th node of a role in plans: "worker-3", "ps-0".
 * Returns the length written (snprintf's) or -EINVAL. */
int rv_alg_node_name(enum rv_alg_role role, int index, char *buf, size_t size);

/* What a job's spec asked for itself.  A role that gave resources keeps its
 * count and resources at creation (the running stage right-sizes them). */
struct rv_alg_ask {
	bool has_ps;                 /* the job has a PS role */
	bool worker_given, ps_given; /* the role gave resources */
	struct rv_alg_config cfg;    /* counts, and resources where given */
};

/*
 * Create stage for a submitted job: rv_alg_plan_create for what the job
 * left open, explicit asks win.  out->algorithm is "user_spec" when every
 * role gave resources.  Returns as rv_alg_plan_create.
 */
int rv_alg_plan_create_job(const struct rv_alg_job_features *job, const struct rv_alg_ask *ask,
			   const struct rv_alg_history_job *hist, size_t n,
			   const struct rv_alg_limits *lim, const struct rv_alg_params *p,
			   struct rv_alg_decision *out);

#endif
