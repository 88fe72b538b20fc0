/*
 * worker.h: one worker process of rover-run's local group: how it is
 * started (worker_launch: the one place a worker process comes from), its
 * environment (torchrun's variables plus Rover's), and its output (read
 * from pipes by the supervisor, written to the console with a [rankN]:
 * prefix and to per-rank log files, the tail of stderr kept for the
 * failure summary and the traceback check).
 *
 * Used by run.c's supervisor loop only; one thread.  A struct worker owns
 * its process (common/proc), its pipe ends and its log files until
 * worker_release.
 */
#ifndef WORKER_H
#define WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "flags.h"
#include "proc.h"
#include "warm.h"

#define WORKER_TAIL 8192 /* bytes of stderr kept */
#define WORKER_LINE 4096 /* a console line longer than this is cut */

/* What every worker of one group shares; borrowed by worker_launch. */
struct worker_group {
	const struct flags *flags;
	int local_world_size;
	int world_size;
	int group_rank, group_world_size;
	int rank_offset;          /* global rank of local rank 0 */
	const char *master_addr;  /* MASTER_ADDR: node 0's address */
	int master_port;          /* MASTER_PORT: node 0's free port of this round */
	int restart_count;        /* TORCHELASTIC_RESTART_COUNT */
	const char *run_id;       /* TORCHELASTIC_RUN_ID */
	const char *rover_master; /* ROVER_MASTER_ADDR: host:port of the rover-master */
	const char *node_name;    /* ROVER_NODE_NAME */
	const char *python;       /* the interpreter (with_python) */
	const char *attempt_dir;  /* DIR/attempt_N for the log files, or NULL */
	/* The warm interpreter to fork Python workers from, or NULL: cold. */
	struct warm *warm;
	/* GPUs on this node (0: none): local rank lr uses cuda:LOCAL_RANK as
	 * under torchrun (CUDA_VISIBLE_DEVICES is left as it is); with GPUs the
	 * workers get NCCL's error handling on unless set */
	int gpus;
	/* rover-run hosts the c10d store at MASTER_ADDR:MASTER_PORT
	 * (TORCHELASTIC_USE_AGENT_STORE=True: every rank is a client) */
	bool agent_store;
	/* the interface of --local-addr ("" or NULL: none): the workers'
	 * GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME, each unless set */
	const char *sock_ifname;
};

struct worker_stream {
	int fd;                 /* the pipe's read end (non-blocking), -1 at EOF */
	int log_fd;             /* the log file, or -1 */
	bool console;           /* lines go to our own fd 1 or 2 */
	char line[WORKER_LINE]; /* a partial line waiting for its newline */
	size_t len;
};

struct worker {
	int local_rank, rank;
	struct rv_proc proc;
	bool running;       /* started and not reaped */
	bool warm;          /* forked from the warm interpreter */
	bool stopped;       /* we asked it to stop: its exit is no failure */
	int status;         /* wait status once reaped */
	int64_t started_ms; /* monotonic */
	int64_t last_output_ms;      /* or its last new checkpoint step (run.c) */
	bool lived;                  /* has written output or saved a new step */
	int64_t ck_step;             /* the newest step in its slots; INT64_MIN: not read yet */
	struct worker_stream out[2]; /* stdout, stderr */
	char tail[WORKER_TAIL];      /* the last bytes of stderr */
	size_t tail_len;
	/* its TORCHELASTIC_ERROR_FILE (DIR/attempt_N/LOCAL_RANK/error.json,
	 * with --log-dir), or "" */
	char error_file[1024];
};

/*
 * Start local rank lr of group g as *w (zeroed by the call).  The worker is
 * a new process group with PR_SET_PDEATHSIG SIGKILL, its stdout and stderr
 * are pipes, its environment ours plus torchrun's variables.  A Python
 * worker is forked from g->warm when there is one that runs (warm.h);
 * when that fails (not ready yet, refused, gone) it is exec'ed cold as
 * "python -u SCRIPT" instead.  Either way one log line "worker started"
 * says start=warm|cold, its pid and spawn_ms, and for a failed warm start
 * the reason.  Returns 0, or a negative errno with err set (the program
 * could not be run, a log file could not be created); *w then holds
 * nothing.
 */
int worker_launch(struct worker *w, const struct worker_group *g, int lr, struct rv_err *err);

/* The torchrun variables of local rank lr (and PYTHONFAULTHANDLER=1 for
 * Python workers while the hang check is on, unless set; with GPUs
 * TORCH_NCCL_ASYNC_ERROR_HANDLING=1 and NCCL_ASYNC_ERROR_HANDLING=1 unless
 * set, ROVER_DEVICE=cuda:N; ROVER_SAVE_AT_BREAKPOINT=1 with
 * --save-at-breakpoint; GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME, each
 * unless set, naming the interface of --local-addr) as "K=V" strings into env
 * (NULL-terminated, at most max - 1 entries) with their text in store
 * (size bytes).  Returns the count, or -ENOSPC. */
int worker_env(const struct worker_group *g, int lr, const char **env, int max, char *store,
	       size_t size);

/* Read what stream i (0 stdout, 1 stderr) has now, passing it on.  Returns 0,
 * or 1 once the stream reached EOF (its fd is closed). */
int worker_pump(struct worker *w, int i);

/* Flush a partial line of each stream to the console (after a death). */
void worker_flush(struct worker *w);

/* The last Python traceback in the stderr tail ("Traceback (most recent
 * call last):" to the end) into out; "" when there is none.  Returns its
 * length. */
size_t worker_traceback(const struct worker *w, char *out, size_t size);

/* "exited with code 3", "killed by signal 9 (Killed)" into out. */
const char *worker_describe(int status, char *out, size_t size);

/* Close the pipes, the log files and the pidfd.  Does not stop the process. */
void worker_release(struct worker *w);

/* Make the trainer library reachable from the workers (called once at
 * start, before any thread or worker): ROVER_TRAINER_LIB set to the
 * librover-trainer.so beside our executable's ../lib unless already set,
 * and the Python package `rover` (<exe>/../lib/python installed, or the
 * source tree's python/) put first on PYTHONPATH.  Only what exists is set. */
void worker_trainer_env(void);

#endif
