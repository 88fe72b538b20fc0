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
	double noise;                 /* relative sd of speed and usage samples */
	double warmup_s;              /* after a reconfiguration speed ramps up over this time */
	int min_workers, max_workers, min_ps, max_ps;
	int64_t parameters;
	int batch_size;
	bool zero_config;             /* register with Rover without resources */
	struct sim_config user;       /* the user's request */
	/* cluster run */
	double arrival_s;
	double work;                  /* samples to process */
};

struct sim_trace {
	struct sim_job *jobs;
	int n;
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
/* Steady speed of a config: ideal x min(1, cpu given / need) over roles;
 * 0 when a node lacks memory (it OOMs). */
double model_speed(const struct sim_job *j, const struct sim_config *c);
double config_cores(const struct sim_job *j, const struct sim_config *c);
/* Role short of memory: 0 worker, 1 ps, -1 none. */
int model_oom_role(const struct sim_job *j, const struct sim_config *c);

struct sim_oracle {
	double best_speed;         /* best speed within the limits */
	double speed;              /* speed of the chosen config */
	double cores;              /* its total cores */
	struct sim_config config;  /* fewest cores reaching 90% of best */
};
void oracle_compute(const struct sim_job *j, struct sim_oracle *o);

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
};

/* DLRover's rules (model.c). */
void baseline_run(const struct sim_job *j, const struct sim_opts *o, struct sim_result *r);
/* Against the brain (rover.c).  Thread-safe; creates its own HTTP client. */
void rover_run(const struct sim_job *j, const struct sim_opts *o, struct sim_result *r);

/* ---- cluster (cluster.c) ---- */
struct sim_cluster_result {
	double util;               /* used CPU / capacity over the makespan, percent */
	double alloc;              /* allocated CPU / capacity, percent */
	double mean_jct_s;
	double makespan_s;
	int unplaced;              /* jobs that never fit */
};
/* configs[i]: the config job i runs with (NULL entry or speed 0: job skipped). */
void cluster_run(const struct sim_trace *t, const struct sim_config *configs, int nodes,
		 double node_cpu, int64_t node_mem_mb, struct sim_cluster_result *out);

/* ---- small helpers (model.c) ---- */
struct sim_rng {
	uint64_t s;
};
void rng_seed(struct sim_rng *r, const char *name);
double rng_uniform(struct sim_rng *r);
double rng_normal(struct sim_rng *r);

#endif
