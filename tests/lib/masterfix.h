/*
 * masterfix.h: run the real rover-master binary for integration tests and
 * benchmarks.
 *
 * rv_test_master_start() spawns $ROVER_BIN_DIR/rover-master (default
 * build/bin) with --job SPEC --state-dir DIR --listen 127.0.0.1:PORT and the
 * extra arguments, waits for its "listening on" line and records the URL.
 * PORT is picked free on the first start and kept, so a restart on the same
 * struct (rv_test_master_restart) serves the URL clients already hold.  Its
 * stderr goes to a log file; the exit status of a master that would not
 * start is kept in exit_status.  The master gets SIGKILL when the test
 * process dies.
 */
#ifndef RV_MASTERFIX_H
#define RV_MASTERFIX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "master_client.h"
#include "proc.h"

struct rv_test_master {
	struct rv_proc proc;
	pid_t pid; /* while running, 0 once stopped */
	int port;
	char url[64];
	char addr[32];   /* "127.0.0.1:PORT", as rover-run's --rdzv-endpoint takes it */
	char dir[256];   /* a private temp folder: the spec, the state folder, the log */
	char spec[320];  /* dir/job.json */
	char state[320]; /* dir/state */
	char log[320];   /* dir/master.log */
	const char *args[32];
	int nargs;
	int exit_status; /* wait status when it exited before listening, else -1 */
};

/* A fresh temp folder with the spec (JSON text) written to dir/job.json. */
int rv_test_master_init(struct rv_test_master *m, const char *spec_json);
/* A job spec for tests: one dataset (name "train") of size samples in shards
 * of shard_size, epochs epochs, shuffled; workers min..max; optimizeMode
 * manual (no brain: plans are only shown).  malloc'd. */
char *rv_test_master_spec(long size, long shard_size, int epochs, int min, int max);

/* Start with extra args (NULL-terminated, copied by pointer: keep them
 * alive).  0, or a negative errno (the log is printed on stderr). */
int rv_test_master_start(struct rv_test_master *m, const char *const *args);
/* Extra args for a master whose test waits on what reaches the brain: a
 * batch after 20 ms, back-off up to 200 ms, plan polls of 1 s and a plan
 * every 200 ms (string literals, for inside an argument list). */
#define RV_TEST_MASTER_BRAIN_SOON                                                                  \
	"--brain-batch-delay-ms", "20", "--brain-backoff-max-ms", "200", "--brain-poll-wait-s",    \
		"1", "--plan-interval-ms", "200"
/* init with rv_test_master_spec(size, shard_size, epochs, min, max), then
 * start with args (may be NULL).  0, or a negative errno. */
int rv_test_master_start_job(struct rv_test_master *m, long size, long shard_size, int epochs,
			     int min, int max, const char *const *args);
/* What each benchmark starts with: SIGPIPE ignored, then a master for
 * spec_json (NULL, say an rv_test_master_spec out of memory, fails with
 * -ENOMEM) started with --log-level warn.  0, or a negative errno. */
int rv_test_master_bench_start(struct rv_test_master *m, const char *spec_json);
/* Start again with the same args, port and state folder. */
int rv_test_master_restart(struct rv_test_master *m);
/* sig (SIGTERM, SIGKILL, ...) then wait up to timeout_ms; returns the wait
 * status or a negative errno. */
int rv_test_master_stop(struct rv_test_master *m, int sig, int timeout_ms);
/* Stop if running and remove the temp folder. */
void rv_test_master_cleanup(struct rv_test_master *m);

/* A client of m's URL with short retries suited to tests (NULL on error). */
struct rv_master_client *rv_test_master_client(const struct rv_test_master *m);
/* A simulated agent's client of the master at addr (ROVER_MASTER_ADDR,
 * HOST:PORT): max_attempts tries 10 to 200 ms apart within budget_ms
 * (NULL on error). */
struct rv_master_client *rv_test_agent_client(const char *addr, int max_attempts, int budget_ms);
/* Where node stands in round (0: not asked) at c's master.  Called from a
 * test: a failed call fails it. */
enum rv_rdzv_status rv_test_master_world_of(struct rv_master_client *c, const char *node,
					    int64_t round);
/* The ms from since (rv_mono_ms) until node is out of round (its status
 * unknown: declared dead), asked every 10 ms up to within_ms after since;
 * -1 when it never was. */
int64_t rv_test_master_wait_dead(struct rv_master_client *c, const char *node, int64_t round,
				 int64_t since, int64_t within_ms);

/*
 * A simulated worker: takes shards of dataset "train" until the master says
 * finished (or *stop is set, or max_tasks tasks were done), "processes" each
 * by counting its samples into counts[epoch * size + i] once its done call
 * succeeded, and reports done.  Run it as a thread (rv_test_shard_worker_main)
 * or call it.  rc: 0, or the failing call's errno.
 */
struct rv_test_shard_worker {
	const char *url;
	char node[64];
	int64_t worker;
	atomic_int *counts;
	long size;
	int max_tasks;          /* 0: no bound */
	atomic_int *stop;       /* may be NULL */
	int64_t tasks, samples; /* out */
	int rc;                 /* out */
	char err[512];          /* out */
};
void *rv_test_shard_worker_main(void *arg);

/* Of the n counts (one per sample processed), how many are 0 (lost) and
 * above 1 (processed twice). */
void rv_test_count_once(const atomic_int *counts, long n, long *lost, long *twice);
/* Fails the test unless each of the n counts is 1, naming how many of the
 * what (samples, offsets) were lost and how many processed twice. */
void rv_test_assert_once(const atomic_int *counts, long n, const char *what);

/* Whether the local scheduler can put a node under a memory limit here (a
 * cgroup v1 memory hierarchy or a v2 memory controller, as root); why not
 * into *why. */
bool rv_test_cgroup_memory_usable(const char **why);

/* A simulated node of the local scheduler asked to be OOM-killed: when
 * $ROVER_NODE_MEMORY_MB is below oom_below (MiB; 0: never) it touches
 * 160 MiB, which its cgroup kills; 3 should it survive that, 0 when not
 * asked. */
int rv_test_sim_oom(int64_t oom_below);

#endif
