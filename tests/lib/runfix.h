/*
 * runfix.h: run the real rover-run binary in integration tests.
 *
 * rv_test_run_start() spawns $ROVER_BIN_DIR/rover-run (default build/bin)
 * with the given arguments, PYTHON_EXEC=/usr/bin/python3 (Debian's Python
 * with torch) and ROVER_TEST_TAG=<a unique tag> in its environment, its
 * stdout and stderr in files of a private temp folder.  Every process of
 * the job inherits the tag, so rv_test_run_tagged() finds whatever of the
 * job is still in the process table.  rover-run gets SIGKILL when the test
 * process dies.
 */
#ifndef RV_RUNFIX_H
#define RV_RUNFIX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc.h"

struct rv_test_run {
	struct rv_proc proc;
	char dir[256]; /* private temp folder */
	char out[320]; /* dir/stdout */
	char err[320]; /* dir/stderr */
	char tag[64];  /* ROVER_TEST_TAG of this run */
	int status;    /* wait status once it exited, else -1 */
	/* a command rover-run starts under, NULL-terminated (say ip netns
	 * exec NS, which execs it: the pid stays rover-run's); NULL: none.
	 * Set it after rv_test_run_init; borrowed. */
	const char *const *wrap;
};

/* A worker script whose workers start processes of their own: each a
 * `sleep 300` (rank 0's in a new session: setsid), rank 1 two torch
 * DataLoader workers; then each prints "ready" and sleeps. */
extern const char rv_test_orphans_script[];

/* A fresh temp folder (no process yet). */
int rv_test_run_init(struct rv_test_run *r);
/* Start rover-run with args (NULL-terminated, after argv[0]) and extra
 * environment entries env ("K=V", NULL-terminated, may be NULL). */
int rv_test_run_start(struct rv_test_run *r, const char *const *args, const char *const *env);
/* Wait up to timeout_ms for it to exit: its wait status, or -ETIMEDOUT. */
int rv_test_run_wait(struct rv_test_run *r, int timeout_ms);
/* Send sig to rover-run itself (not its group). */
int rv_test_run_signal(struct rv_test_run *r, int sig);
/* What it wrote so far on stdout (which 1) or stderr (2); malloc'd. */
char *rv_test_run_output(const struct rv_test_run *r, int which);
/* Wait up to timeout_ms until stdout or stderr holds needle. */
bool rv_test_run_wait_for(const struct rv_test_run *r, int which, const char *needle,
			  int timeout_ms);
/* Start as rv_test_run_start, then wait up to timeout_ms until it joined
 * the rendezvous: nodes started so take group ranks in that order.  0,
 * -ETIMEDOUT, or a negative errno. */
int rv_test_run_start_joined(struct rv_test_run *r, const char *const *args, const char *const *env,
			     int timeout_ms);
/* SIGKILL rover-run, wait for it, then up to timeout_ms until no process
 * of the job is left (its workers die with it); fails the test (check)
 * when some are. */
void rv_test_run_kill(struct rv_test_run *r, int timeout_ms);
/* What n runs wrote on stdout and stderr, and the file master_log (may be
 * NULL), on our stderr: for a test about to fail. */
void rv_test_run_dump(const struct rv_test_run *r, int n, const char *master_log);
/* Lines in the file at path (0 when there is none). */
int rv_test_count_lines(const char *path);
/* Wait up to timeout_ms until the file at path has at least n lines. */
bool rv_test_wait_lines(const char *path, int n, int timeout_ms);
/* rover-run's process that runs the job: the pid started, or the stage
 * below it that is pid 1 of the job's PID namespace (agent/pidns.h). */
pid_t rv_test_run_supervisor(const struct rv_test_run *r);
/* The pid (as this process sees it) of the process of the job whose pid in
 * its own PID namespace is ns_pid (the pids rover-run logs); 0: none. */
pid_t rv_test_run_host_pid(const struct rv_test_run *r, pid_t ns_pid);
/* Pids of processes (children of parent when parent > 0; parent r's own
 * pid means rv_test_run_supervisor's children) that carry r's
 * tag and have RANK=rank in their environment (rank < 0: any RANK; not
 * the warm interpreter and its standby workers, which have none), up to max;
 * the count. */
int rv_test_run_workers(const struct rv_test_run *r, pid_t parent, int rank, pid_t *pids, int max);
/* The pid (as this process sees it) of the worker rover-run said it
 * started last ("worker started" on its stderr), while it lives; else 0.
 * Finds a worker forked from the warm interpreter, whose /proc environ is
 * the interpreter's (no RANK). */
pid_t rv_test_run_last_worker(const struct rv_test_run *r);
/* A process by its pid and start time (a reused pid is another one). */
struct rv_test_pid {
	pid_t pid;
	pid_t sid;     /* its session: its own pid after setsid() */
	int64_t start; /* /proc/pid/stat starttime */
};
/* root and every process below it (by parent pid, at the time of the
 * call; setsid() does not take a process out), up to max; the count. */
int rv_test_proc_tree(pid_t root, struct rv_test_pid *out, int max);
/* How many of p[0..n) still run (not zombies). */
int rv_test_proc_alive(const struct rv_test_pid *p, int n);
/* Processes still alive (not zombies) carrying r's tag. */
int rv_test_run_tagged(const struct rv_test_run *r);
/* The value of key in pid's environment into out ("" when absent). */
void rv_test_proc_env(pid_t pid, const char *key, char *out, size_t size);
/* Write a file (a script for the job) into r->dir; the path into path. */
int rv_test_run_file(const struct rv_test_run *r, const char *name, const char *text, char *path,
		     size_t size);
/* init, the script text written to dir/name, then start with args (flags,
 * NULL-terminated) followed by the script's path, and env as in
 * rv_test_run_start.  0 or a negative errno. */
int rv_test_run_script(struct rv_test_run *r, const char *name, const char *text,
		       const char *const *args, const char *const *env);
/* Wait up to timeout_ms and fail the test (check) unless rover-run exited
 * with code; returns its stderr (malloc'd). */
char *rv_test_run_expect_exit(struct rv_test_run *r, int code, int timeout_ms);
/* Fail the test (check) if a process of the job is still in the process
 * table, then clean up as rv_test_run_cleanup. */
void rv_test_run_end(struct rv_test_run *r);
/* Kill what is left (SIGKILL) and remove the folder. */
void rv_test_run_cleanup(struct rv_test_run *r);

/* The shard log of examples/digits_rover.py --shard-log: "RANK STEP I,I,..."
 * per rank and step, "load S world=W" at each start.  A load of S drops the
 * lines of steps after S logged before it, and the lines after it of ranks
 * W and above (a worker of the world before, stopped late); what is left
 * must hold each index of [0, size) exactly epochs times.  *lost and *twice: indices short
 * of it and beyond it; *ranks: a bit per rank seen training after the last
 * load; *loads: the starts. */
void rv_test_shard_account(const char *path, long size, int epochs, long *lost, long *twice,
			   unsigned *ranks, int *loads);

#endif
