/*
 * warm.h: a warm Python interpreter that forks restarted workers in
 * milliseconds instead of re-importing torch for a second or more.
 *
 * The supervisor (rover-run) starts one with warm_start(): /usr/bin/python3
 * runs rover_warm.py, which imports torch and torch.distributed (never CUDA,
 * never a process group), stays single-threaded and then answers spawn
 * requests on a socketpair.  warm_spawn() sends a worker's argv, environment,
 * cwd and stdin/stdout/stderr fds; the interpreter forks the worker from its
 * warm state and the worker becomes a child of this process (see below),
 * returned as a struct rv_proc the caller waits for, kills and stops like any
 * rv_proc_spawn() child.  Every failure is a negative errno with the reason
 * in reterr: the caller then runs the worker cold (rv_proc_spawn of python3)
 * and logs the reason.
 *
 *   struct warm w;
 *   struct rv_err e;
 *   if (warm_start(&w, &(struct warm_opts){ 0 }, &e) < 0)
 *           log "warm interpreter unavailable, restarts run cold" reason=e.msg
 *   ...
 *   struct warm_req rq = { .argv = user_argv, .envp = worker_env,
 *                          .fd = { -1, out_fd, err_fd } };
 *   struct rv_proc worker;
 *   if (warm_spawn(&w, &rq, &worker, &e) < 0)
 *           log "worker started cold" reason=e.msg, then rv_proc_spawn(...)
 *   ...
 *   warm_stop(&w);
 *
 * Process tree.  warm_start() makes this process a child subreaper
 * (PR_SET_CHILD_SUBREAPER, process-wide, kept until exit): the interpreter
 * forks an intermediate that forks the worker and exits, so the worker is
 * reparented here.  Consequences for the caller: (1) the worker's exit
 * status is its real one, reaped through a pidfd like any child, and a
 * crash of the interpreter does not touch running workers; (2) the worker
 * has PR_SET_PDEATHSIG=SIGKILL towards this process, set after the
 * reparenting, so keep the thread that called warm_start() alive (the main
 * thread): the kernel sends the death signal when the thread the worker
 * hangs from exits; (3) any other orphan below this process (a worker's
 * daemonised grandchild, an interpreter's half-made standby when it died
 * mid-fork) is reparented here too: on each SIGCHLD call
 * rv_proc_reap_strays(pids of your workers, n), never waitpid(-1), which
 * would steal a worker's status (rv_proc_wait() would then say -ECHILD).
 * Reaping the interpreter or a standby that way is harmless: this module
 * then sees them as gone.
 *
 * Opting out: a worker whose environment has ROVER_WARM=0, or a script whose
 * first 4 KiB contain "rover: cold-start", is refused (-ENOTSUP) and run cold.
 * So is --no-python, and a worker whose environment sets one of the settings
 * Python reads once at start (PYTHONHASHSEED, PYTHONOPTIMIZE, ...) to another
 * value than the interpreter's.
 *
 * Threading: a struct warm has one owner; calls block up to their timeout.
 */
#ifndef WARM_H
#define WARM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "proc.h"

/* Everything borrowed for the call; zero means default. */
struct warm_opts {
	const char *python;  /* NULL: "/usr/bin/python3" */
	const char *script;  /* rover_warm.py; NULL: warm_script_path() */
	const char *imports; /* comma-separated modules; NULL: "torch,torch.distributed" */
	/* Applied over environ for the interpreter, NULL-terminated "K=V" or
	 * "K" (unset).  Workers get their own environment per request. */
	const char *const *env;
	/* Where the interpreter's own output goes (not the workers'); borrowed;
	 * 0: inherit ours (fd 0 is never a log). */
	int log_fd;
	/* Workers forked in advance, already children of this process, waiting
	 * for a request: a spawn then costs a message instead of two forks
	 * (~1 ms instead of ~18 ms).  0: 1; < 0: none; at most WARM_MAX_STANDBY.
	 * Set it to the number of workers that restart together (the local
	 * world size) to start them all at once. */
	int standby;
	int start_timeout_ms; /* 0: 120000 (a cold cache takes ~3 s for torch) */
	int spawn_timeout_ms; /* 0: 10000 */
};

#define WARM_MAX_STANDBY 16

/* A running warm interpreter.  Fields are read-only for the caller. */
struct warm {
	struct rv_proc proc; /* the interpreter */
	/* Standby workers (children of ours, told by the interpreter), owned;
	 * reaped by warm_stop() or when found dead. */
	struct rv_proc standby[2 * WARM_MAX_STANDBY];
	int nstandby;
	int sock;            /* owned; -1 once it is gone */
	int import_ms;       /* how long its imports took */
	int spawns;          /* workers forked so far */
	bool started;        /* set by a successful warm_begin() until warm_stop() */
	bool ready;          /* its imports are done: it serves spawns */
	int64_t ready_by_ms; /* monotonic: the start timeout's end */
	int spawn_timeout_ms;
};

/* Where rover_warm.py is: $ROVER_WARM_SCRIPT when set, else
 * <folder of this executable>/../lib/rover/rover_warm.py.  Writes it into
 * buf.  Returns 0, -ENOENT when that file does not exist, -ENAMETOOLONG. */
int warm_script_path(char *buf, size_t size);

/* Start an interpreter and wait until it has imported its modules.  Returns
 * 0 with *w ready; otherwise *w holds nothing and: -ENOENT (no python or no
 * script), -ENOPKG (an import failed, e.g. torch is not installed:
 * reterr->msg names the module and the error), -EBUSY (the imports left
 * threads running), -ETIMEDOUT, -ECONNRESET (it died during start), or a
 * spawn error. */
int warm_start(struct warm *w, const struct warm_opts *opts, struct rv_err *reterr);

/* warm_start() in two halves, for a caller that must not wait the seconds
 * the imports take (rover-run starts its first workers meanwhile):
 * warm_begin() starts the interpreter and returns at once (errors as
 * warm_start's, but no import error yet); warm_ready() waits up to
 * timeout_ms (0: just look; < 0: until the start timeout) for its ready
 * message: 0 once ready (and from then on), -EAGAIN while it still imports
 * within the start timeout, else warm_start's errors (the interpreter is
 * then stopped; later calls say -ENOTCONN).  warm_spawn() before it is
 * ready says -EAGAIN and spawns nothing. */
int warm_begin(struct warm *w, const struct warm_opts *opts, struct rv_err *reterr);
int warm_ready(struct warm *w, int timeout_ms, struct rv_err *reterr);

/* A worker to fork; everything borrowed for the call. */
struct warm_req {
	/* NULL-terminated, as the user gave it after the launcher's flags: the
	 * script and its arguments, or (module) the module name and its. */
	const char *const *argv;
	bool module;    /* python -m argv[0] */
	bool no_python; /* --no-python: not a Python script, always refused */
	/* python -u, as torchrun runs workers: stdout unbuffered; otherwise
	 * line-buffered (so a SIGKILL loses no whole line either way). */
	bool unbuffered;
	/* Fork no standby to replace the one this takes, until a request
	 * without it: the network check's collectives, on a node whose CPU may
	 * be short (each fork of an interpreter holding torch costs it tens of
	 * ms), take the standbys kept for them and leave that CPU to the check. */
	bool hold_standbys;
	/* The worker's complete environment, "K=V", NULL-terminated; NULL: ours. */
	const char *const *envp;
	const char *cwd; /* NULL: ours */
	/* stdin, stdout, stderr of the worker; borrowed (the caller closes its
	 * copies, even on failure); -1: /dev/null. */
	int fd[3];
};

/* Fork a worker from the warm interpreter.  Returns 0 with *out the worker,
 * a child of this process in its own process group with a pidfd (use
 * rv_proc_wait/kill/stop/release).  Otherwise *out holds nothing and no
 * worker runs: -EAGAIN (warm_begin()'s interpreter still imports), -ENOTSUP (refused: opted out, --no-python, a setting fixed at
 * start differs, the interpreter grew a thread; reterr says which) and the
 * interpreter stays usable; -EINVAL (bad req); -ENOTCONN (the interpreter is
 * gone, from before or now: every later call says so too), -ETIMEDOUT
 * (no answer in time: the interpreter is stopped), -EIO (its fork failed),
 * -ECHILD (the worker could not be adopted: not reparented here). */
int warm_spawn(struct warm *w, const struct warm_req *req, struct rv_proc *out,
	       struct rv_err *reterr);

/* Whether the interpreter still runs (reaps it when it exited). */
bool warm_alive(struct warm *w);

/* End the interpreter (end of file on its socket, SIGKILL after 2 s) and
 * its standby workers, reaping them, and free what *w holds.  Workers
 * already handed out keep running.  Accepts a zeroed or stopped struct;
 * idempotent. */
void warm_stop(struct warm *w);

#endif
