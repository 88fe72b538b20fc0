/*
 * sim.h: rover-sim, a job simulator with an oracle (see tests/sim/README.md).
 *
 * trace.c reads trace files into struct sim_job (hidden truth + the user's
 * request); model.c is the truth (speed, CPU and memory need of a config),
 * the oracle and the baseline policy (DLRover's published rules); rover.c
 * plays one job against a live rover-brain over REST; cluster.c replays a
 * stream of jobs on simulated nodes; main.c wires it and scores.
 * Jobs are independent: each worker thread owns its job and its HTTP client.
 */
#ifndef SIM_H
#define SIM_H

#include <stdbool.h>
#include <stdint.h>

struct rv_brain_client;
struct rv_err;

#define SIM_NAME_MAX 48
#define SIM_MAX_EVENTS 64

enum sim_strategy { SIM_ALLREDUCE, SIM_PS };

/* A configuration: what a plan gives the job. */
struct sim_config {
	int workers, ps;
	double worker_cpu, ps_cpu;          /* cores per node */
	int64_t worker_mem_mb, ps_mem_mb;   /* MiB per node */
};

/* One job of a trace: hidden truth, limits, the user's request. */
struct sim_job {
	char name[SIM_NAME_MAX];
	enum sim_strategy strategy;
	/* truth: all-reduce speed 1/(t0/w + t1 + t2 w); PS w/(t0 + t1 w/p + t2 w + t3 p) */
	double t[4];
	double worker_cpu_need;       /* cores per worker at full speed */
	double ps_cpu_per_worker;     /* PS cores needed per worker it serves (PS: need = c w / p) */
	int64_t worker_mem_need_mb;
	int64_t ps_mem_total_mb;      /* model state split over the PS: need = total/p + 512 */
	double noise;                 /* relative sd of speed samples (usage: half of it) */
	double warmup_s;              /* after a reconfiguration speed ramps up over this time */
	double warmup_start;          /* ... from this share of the steady speed */
	/* memory that rises during the run: the need starts at (1 - mem_rise) of
	 * its peak and reaches the peak mem_rise_s of job time after the start */
	double mem_rise, mem_rise_s;
	/* stragglers: the first `stragglers` workers are `straggler_slowdown`
	 * times slower until a plan replaces them */
	int stragglers;
	double straggler_slowdown;
	int min_workers, max_workers, min_ps, max_ps;
	int64_t parameters;
	int batch_size;
	bool zero_config;             /* register with Rover without resources */
	struct sim_config user;       /* the user's request */
	/* cluster run */
	double arrival_s;
	double work;                  /* samples to process */
};

/* The cluster the jobs run on: N identical nodes. */
struct sim_cluster_shape {
	int nodes;
	double node_cpu;
	int64_t node_mem_mb;
};

struct sim_trace {
	struct sim_job *jobs;
	int n;
	bool has_cluster; /* a {"cluster":{...}} line gave the shape */
	struct sim_cluster_shape cluster;
};

/* Load FILE or every *.trace in DIR (sorted).  0 or -errno with msg. */
int trace_load(const char *path, struct sim_trace *t, char *msg, size_t msize);
void trace_release(struct sim_trace *t);

/* ---- truth (model.c) ---- */
/* Speed of a config with enough CPU (samples/s). */
double model_speed_ideal(const struct sim_job *j, int w, int p);
/* Per-PS CPU need at full speed. */
double model_ps_cpu_need(const struct sim_job *j, int w, int p);
int64_t model_ps_mem_need(const struct sim_job *j, int p);
/* Memory need t_s seconds of job time after the start (rises to the peak). */
int64_t model_worker_mem_at(const struct sim_job *j, double t_s);
int64_t model_ps_mem_at(const struct sim_job *j, int p, double t_s);
/* Role short of memory at job time t_s: 0 worker, 1 ps, -1 none. */
int model_oom_role_at(const struct sim_job *j, const struct sim_config *c, double t_s);
/* Every node of the config fits on one node of the cluster. */
bool config_fits_node(const struct sim_job *j, const struct sim_config *c,
		      const struct sim_cluster_shape *k);
/* Resources of a config in cores, memory counted at the cluster's ratio of
 * memory to cores (a node's memory per core costs as much as a core). */
double config_cost(const struct sim_job *j, const struct sim_config *c,
		   const struct sim_cluster_shape *k);
double config_mem_gb(const struct sim_job *j, const struct sim_config *c);
/* Steady speed of a config: ideal x min(1, cpu given / need) over roles;
 * 0 when a node lacks memory (it OOMs). */
double model_speed(const struct sim_job *j, const struct sim_config *c);
/* The same while it runs, before memory rising to its peak would kill it. */
double model_speed_running(const struct sim_job *j, const struct sim_config *c);
double config_cores(const struct sim_job *j, const struct sim_config *c);
/* Per-node CPU demand of each role under c at full speed of the rest: a
 * role short of CPU slows the job, so the other uses its need times that. */
void model_role_demand(const struct sim_job *j, const struct sim_config *c, double *dw, double *dp);
/* Speed share left with `slow` stragglers among `workers`. */
double model_straggler_factor(const struct sim_job *j, int workers, int slow);
/* Role short of memory: 0 worker, 1 ps, -1 none. */
int model_oom_role(const struct sim_job *j, const struct sim_config *c);

struct sim_oracle {
	double best_speed;         /* best speed within the limits */
	double speed;              /* speed of the chosen config */
	double cores;              /* its total cores */
	double cost;               /* cores + memory at the cluster's ratio */
	struct sim_config config;  /* least cost reaching 90% of best, fitting a node */
};
void oracle_compute(const struct sim_job *j, const struct sim_cluster_shape *k,
		    struct sim_oracle *o);

/* ---- a policy's run of one job ---- */
struct sim_oom_event {
	int role;                  /* 0 worker, 1 ps */
	int64_t from_mb, to_mb;    /* to_mb 0 = not relaunched */
};

struct sim_result {
	bool ran;                  /* false when the run failed (brain unreachable ...) */
	char error[160];
	struct sim_config final;
	double speed;              /* steady true speed of the final config */
	double cores;
	double cost;               /* config_cost of the final config */
	bool infeasible;           /* a plan asked for a node larger than any node */
	int plans;                 /* running + oom plans applied */
	int plans_to_converge;     /* plans until the final config stayed */
	int rounds;
	int ooms;
	bool oom_failed;           /* an OOM was not recovered: the job died */
	struct sim_oom_event oom[SIM_MAX_EVENTS];
	int noom;
	char last_reason[256];     /* reason of the last plan applied */
};

/* Measurement rounds: each simulates round_s of job time. */
struct sim_opts {
	const char *brain;
	const char *token;
	int max_rounds;            /* default 20 */
	int settle_rounds;         /* stop after this many rounds with no plan */
	double round_s;            /* job time per round */
	double sample_s;           /* interval of samples */
	int threads;
	char run_tag[16];          /* suffix for job names: several runs on one brain */
	uint64_t seed;             /* mixed into every job's noise */
	struct sim_cluster_shape cluster;
	bool tell_cluster; /* report the cluster's nodes to the brain first */
};

/* DLRover's rules (model.c). */
void baseline_run(const struct sim_job *j, const struct sim_opts *o, struct sim_result *r);
/* Against the brain (rover.c).  Thread-safe; creates its own HTTP client. */
void rover_run(const struct sim_job *j, const struct sim_opts *o, struct sim_result *r);
/* A brain client for o->brain: three tries 100 ms apart when the brain is
 * busy.  NULL (err says why) on a bad url; free with rv_brain_client_free. */
struct rv_brain_client *rover_brain_client_new(const struct sim_opts *o, struct rv_err *err);

/* ---- cluster (cluster.c) ---- */
struct sim_cluster_result {
	double util;               /* used CPU / capacity over the makespan, percent */
	double alloc;              /* allocated CPU / capacity, percent */
	double mean_jct_s;
	double makespan_s;
	int unplaced; /* jobs whose config never fits: run as the user asked */
};
/* configs[i]: the config job i runs with.  A config that cannot fit an empty
 * cluster (or runs at speed 0) is replaced by the user's request sized to
 * fit and counted in unplaced: every job is in utilisation and JCT. */
void cluster_run(const struct sim_trace *t, const struct sim_config *configs,
		 const struct sim_cluster_shape *k, struct sim_cluster_result *out);

/* ---- small helpers (model.c) ---- */
struct sim_rng {
	uint64_t s;
};
void rng_seed(struct sim_rng *r, const char *name, uint64_t seed);
double rng_uniform(struct sim_rng *r);
double rng_normal(struct sim_rng *r);

#endif
