/*
 * flags.h: rover-run's command line, torchrun's and DLRover's flags.
 *
 * One table (flags.c flags_table[]) drives parsing and --help.  Both
 * spellings are accepted (--nproc-per-node and --nproc_per_node), as are
 * --flag=value and --flag value (and -rVALUE for the short ones), and, as
 * torchrun's argparse does, a long flag cut to a prefix only it has
 * (--nproc).  torchrun's flags also come from PET_<NAME> in the
 * environment (PET_NPROC_PER_NODE=4), below the command line.  The
 * first argument that is not a flag (or the one after "--") is the training
 * script; everything after it belongs to the script.  Pure: no I/O but
 * flags_print_help; not thread-safe (one struct flags per caller).
 */
#ifndef FLAGS_H
#define FLAGS_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "err.h"

#define FLAGS_MAX_NPROC     1024
#define FLAGS_MAX_STD_RANKS 64

/* How --nproc-per-node was given. */
enum flags_nproc {
	FLAGS_NPROC_N = 0, /* a number: flags.nproc */
	FLAGS_NPROC_AUTO,  /* one per GPU when there are GPUs, else one per CPU */
	FLAGS_NPROC_CPU,   /* one per CPU */
	FLAGS_NPROC_GPU,   /* one per GPU (an error without GPUs) */
};

/* torchrun's Std mask: 0 none, 1 stdout, 2 stderr, 3 both. */
enum { FLAGS_STD_OUT = 1, FLAGS_STD_ERR = 2 };

/* -r/--redirects or -t/--tee: one mask for every local rank, or one per
 * local rank ("0:1,1:2": the ranks not named get 0). */
struct flags_std {
	int all;  /* the mask of ranks not in per[] */
	int nper; /* 0: all applies to every rank */
	int per_rank[FLAGS_MAX_STD_RANKS];
	int per_mask[FLAGS_MAX_STD_RANKS];
};

struct flags {
	int nnodes_min, nnodes_max;  /* --nnodes N or MIN:MAX; default 1:1 */
	enum flags_nproc nproc_kind; /* --nproc-per-node */
	int nproc;                   /* when FLAGS_NPROC_N; default 1 */
	bool nproc_given;            /* --nproc-per-node was on the command line */
	char rdzv_backend[32];       /* default "static" */
	char rdzv_endpoint[256];     /* host:port of a rover-master; "" none */
	char rdzv_id[128];           /* default "none" */
	char rdzv_conf[512];         /* k=v,k=v as given */
	int rdzv_join_timeout_s;     /* join_timeout of --rdzv-conf; default 600 */
	int rdzv_master_timeout_s;   /* master_timeout of --rdzv-conf; default 30 */
	int netcheck_mb;             /* netcheck_mb of --rdzv-conf; default 4 */
	int netcheck_timeout_s;      /* netcheck_timeout of --rdzv-conf; default 120 */
	int netcheck_round_timeout_s; /* netcheck_round_timeout; default 30 */
	bool standalone;
	bool standalone_dropped_endpoint; /* --standalone ignored --rdzv-endpoint */
	/* not a flag: rover-run's pid as its caller knows it (main sets it; in
	 * the job's PID namespace getpid() is 1), for names unique per host */
	pid_t pid;
	int max_restarts;        /* default 0 */
	double monitor_interval; /* seconds between usage reports; default 5 */
	char start_method[16];   /* spawn, fork or forkserver (accepted) */
	char role[64];           /* default "default" */
	bool module;             /* -m: the script is a module (python -m) */
	bool no_python;          /* the script is a program, not Python */
	bool no_warm;            /* never fork workers from a warm interpreter */
	char warm_import[512];   /* more modules for the warm interpreter: "a,b.c" ("" none) */
	bool run_path;           /* accepted: the script runs as with python */
	char log_dir[512];       /* "" none */
	/* --local-ranks-filter: only these local ranks' output reaches the
	 * console (all of it still reaches --log-dir); off: every rank's */
	bool console_filter;
	unsigned char console_rank[FLAGS_MAX_NPROC];
	struct flags_std redirects, tee;
	int node_rank;         /* -1 unless given: a fixed GROUP_RANK (static) */
	char master_addr[256]; /* "" unless given: the workers' store host */
	int master_port;       /* 0 unless given: the workers' store port */
	char local_addr[256];  /* "" none: this node's address as others see it */
	/* DLRover's */
	bool network_check, auto_config, exclude_straggler, save_at_breakpoint;
	int node_unit;         /* default 1 */
	char accelerator[32];  /* default "nvidia.com/gpu" */
	double hang_timeout_s; /* no output this long is a hang; default 300; 0: off */
	char ckpt_dir[512];    /* flash checkpoints persisted here; "" memory only */
	int ckpt_keep;         /* complete steps kept there; default 3 */
	/* the script and its arguments: borrowed from argv */
	const char *script;
	char *const *script_args;
	int nscript_args;
};

/* Fill *f with the defaults. */
void flags_init(struct flags *f);

/* Parse PET_<NAME> from the environment for torchrun's flags, then
 * argv[1..argc-1], into *f (flags_init first).  Returns 0, 1 when
 * --help was asked (print flags_print_help, exit 0), 2 when --version was, or -EINVAL with err
 * naming the flag (err->field "--nnodes") and what is wrong with its value,
 * an unknown flag, or a missing script. */
int flags_parse(struct flags *f, int argc, char *const *argv, struct rv_err *err);

/* The mask of local rank lr in s. */
int flags_std_mask(const struct flags_std *s, int local_rank);
/* Whether s sends any stream of any local rank to the log files. */
bool flags_std_any(const struct flags_std *s);

/* The value of key in f->rdzv_conf ("k=v,k=v") copied into out, or NULL
 * when absent. */
const char *flags_rdzv_conf_get(const struct flags *f, const char *key, char *out, size_t size);

/* --help: usage, then every flag with its spellings and what it does. */
void flags_print_help(FILE *out);

#endif
