/*
 * check_run_ckpt.c: flash checkpoints under the real rover-run with real
 * PyTorch workers (examples/digits_rover.py: rover.ShardSampler,
 * rover.report_step, rover.Checkpointer; /usr/bin/python3):
 *   - a worker killed with SIGKILL after a save: the restarted one loads
 *     that step from memory, the same weights bit for bit (digests);
 *   - a worker killed with SIGKILL during a save (its slot uncommitted):
 *     the previous step is what the restart loads;
 *   - rover-run itself killed with SIGKILL, the node's shared memory gone:
 *     a new rover-run loads the newest complete step from --ckpt-dir and
 *     puts the data back from the step's stored data checkpoint;
 *   - a world of 2 workers grown to 3 by a second node: every rank loads
 *     the step all hold, the master's shards resume there;
 *   - two nodes, the second's rank saving (and reporting its data
 *     position) 0.3 s after the first's each step; both rover-runs and the
 *     master killed with -9, the memory gone: a new master and two new
 *     rover-runs load the newest step a node stored (node 1 receives it
 *     from node 0 when it did not store it) and the data position node 0
 *     stored with it, which must hold node 1's reports too;
 *   - a node of two sent SIGTERM (a spot reclaim, an eviction): it
 *     persists its newest step and goes, the other trains on alone from
 *     the step both held, the node returns and the world is two again;
 * and in each, the shard log accounts for every sample exactly once: the
 * steps after the one a restart loaded are dropped (they are trained
 * again), what is left holds each index once per epoch.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brainfix.h"
#include "ckslot.h"
#include "masterfix.h"
#include "parse.h"
#include "runfix.h"
#include "testutil.h"

#define EXAMPLE "examples/digits_rover.py"

/* The digest the saving worker recorded for step, into out. */
static bool digest_of(const char *path, int64_t step, char *out, size_t size)
{
	char *s = rv_test_read_file(path);
	bool found = false;
	for (char *line = s ? strtok(s, "\n") : NULL; line; line = strtok(NULL, "\n")) {
		long long st;
		char d[64];
		if (sscanf(line, "%lld %63s", &st, d) == 2 && st == step) {
			snprintf(out, size, "%s", d);
			found = true;
		}
	}
	free(s);
	return found;
}

/* The last step of the digest log (-1 none). */
static int64_t last_digest_step(const char *path)
{
	char *s = rv_test_read_file(path);
	int64_t last = -1;
	for (char *line = s ? strtok(s, "\n") : NULL; line; line = strtok(NULL, "\n")) {
		long long st;
		if (sscanf(line, "%lld", &st) == 1)
			last = st;
	}
	free(s);
	return last;
}

/* "[rank0]:loaded step=S from=F world=W data=D digest=X": S, and F, D, X
 * into from, data, digest (the n-th such line, 0 first); false when none. */
static bool loaded_line(const char *out, int n, int64_t *step, char *from, char *data, char *digest)
{
	const char *p = out;
	for (int i = 0; (p = strstr(p, "[rank0]:loaded step=")); i++, p++)
		if (i == n) {
			long long s;
			int w;
			return sscanf(p,
				      "[rank0]:loaded step=%lld from=%15s world=%d data=%15s "
				      "digest=%63s",
				      &s, from, &w, data, digest) == 5 &&
			       (*step = s, true);
		}
	return false;
}

/* Under make asan, the workers' Python loads the asan build's
 * librover-trainer.so: its runtime must come first (LD_PRELOAD), and
 * Python's own allocations are no leaks of ours.  Otherwise a variable
 * that changes nothing. */
static const char *asan_env(int which)
{
	static char preload[1100];
	if (!getenv("MODE") || strcmp(getenv("MODE"), "asan") != 0)
		return "ROVER_TEST_ASAN=0";
	if (which == 1)
		return "ASAN_OPTIONS=detect_leaks=0";
	if (!preload[0]) {
		char path[1024] = "";
		FILE *p = popen("${CC:-cc} -print-file-name=libasan.so", "r");
		if (p && fgets(path, sizeof(path), p))
			path[strcspn(path, "\n")] = '\0';
		if (p)
			pclose(p);
		/* and libstdc++ at once: torch's threads throw C++ exceptions
		 * (gloo at shutdown), which the runtime's interceptor can pass
		 * on only when it found the real __cxa_throw at start */
		snprintf(preload, sizeof(preload), "LD_PRELOAD=%s libstdc++.so.6", path);
	}
	return preload;
}

static void job_env(char *out, size_t size, const char *what)
{
	snprintf(out, size, "ROVER_JOB_NAME=ck-%d-%s", (int)getpid(), what);
}

/* Segments of the job left in /dev/shm. */
static int segments(const char *job_env_entry)
{
	const char *job = strchr(job_env_entry, '=') + 1;
	char prefix[128];
	int n = snprintf(prefix, sizeof(prefix), "rover-%s-", job);
	DIR *d = opendir("/dev/shm");
	int k = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		k += !strncmp(e->d_name, prefix, (size_t)n);
	if (d)
		closedir(d);
	return k;
}

static void remove_segments(const char *job_env_entry)
{
	const char *job = strchr(job_env_entry, '=') + 1;
	for (int r = 0; r < 8; r++)
		for (int s = 0; s < 2; s++) {
			char name[200];
			rv_ckslot_name(name, sizeof(name), job, r, s);
			shm_unlink(name);
		}
}

static void paths(const struct rv_test_run *r, char *log, char *dig, size_t size)
{
	snprintf(log, size, "%s/shards.log", r->dir);
	snprintf(dig, size, "%s/digest.log", r->dir);
}

/* The loaded step's digest is the one recorded when it was saved. */
static int64_t expect_loaded(const char *out, int n, const char *dig, const char *from_want)
{
	int64_t step;
	char from[16], data[16], digest[64], want[64];
	ck_assert_msg(loaded_line(out, n, &step, from, data, digest), "no load %d in %s", n, out);
	ck_assert_str_eq(from, from_want);
	ck_assert_msg(digest_of(dig, step, want, sizeof(want)), "step %lld was never saved",
		      (long long)step);
	ck_assert_msg(!strcmp(digest, want), "step %lld loaded %s, saved %s", (long long)step,
		      digest, want);
	ck_assert_msg(!strcmp(data, "restored"), "the data of step %lld was not put back",
		      (long long)step);
	return step;
}

START_TEST(test_kill_after_save_loads_memory)
{
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char log[400], dig[400], job[96];
	paths(&r, log, dig, sizeof(log));
	job_env(job, sizeof(job), "after");
	char dir[400];
	snprintf(dir, sizeof(dir), "%s/ckpt", r.dir);
	const char *env[] = { job,
			      asan_env(0),
			      asan_env(1),
			      "ROVER_STANDALONE_DATASET=600:16:2",
			      "ROVER_SAVE_AT_BREAKPOINT=1",
			      NULL };
	const char *args[] = { "--standalone",
			       "--nproc-per-node",
			       "1",
			       "--max-restarts",
			       "2",
			       "--ckpt-dir",
			       dir,
			       EXAMPLE,
			       "--batch-size",
			       "8",
			       "--step-sleep",
			       "0.03",
			       "--shard-log",
			       log,
			       "--digest-log",
			       dig,
			       NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, env), 0);
	ck_assert_msg(rv_test_wait_lines(dig, 20, 90000), "no 20 steps saved");
	pid_t w[2];
	ck_assert_int_eq(rv_test_run_workers(&r, r.proc.pid, 0, w, 2), 1);
	int64_t before = last_digest_step(dig);
	ck_assert_int_eq(kill(w[0], SIGKILL), 0);
	char *err = rv_test_run_expect_exit(&r, 0, 120000);
	char *out = rv_test_run_output(&r, 1);
	int64_t step = expect_loaded(out, 0, dig, "memory");
	ck_assert_msg(step >= before, "loaded step %lld, %lld was saved before the kill",
		      (long long)step, (long long)before);
	free(out);
	/* armed by ROVER_SAVE_AT_BREAKPOINT: the step in memory went to storage
	 * before the restart */
	const char *bp = strstr(err, "msg=\"saved at the breakpoint\" step=");
	ck_assert_msg(bp, "%s", err);
	ck_assert_int_ge(strtoll(bp + strlen("msg=\"saved at the breakpoint\" step="), NULL, 10),
			 step);
	free(err);
	long lost, twice;
	unsigned ranks;
	int loads;
	rv_test_shard_account(log, 600, 2, &lost, &twice, &ranks, &loads);
	ck_assert_int_eq(loads, 2);
	ck_assert_msg(lost == 0 && twice == 0, "%ld samples lost, %ld twice", lost, twice);
	ck_assert_int_eq(segments(job), 0); /* the job ended: its memory is freed */
	rv_test_run_end(&r);
}
END_TEST

START_TEST(test_kill_during_save_loads_previous)
{
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char log[400], dig[400], job[96];
	paths(&r, log, dig, sizeof(log));
	job_env(job, sizeof(job), "during");
	const char *env[] = { job, asan_env(0), asan_env(1), "ROVER_STANDALONE_DATASET=400:16:1",
			      NULL };
	const char *args[] = { "--standalone",
			       "--nproc-per-node",
			       "1",
			       "--max-restarts",
			       "2",
			       EXAMPLE,
			       "--batch-size",
			       "8",
			       "--pad-mib",
			       "192",
			       "--shard-log",
			       log,
			       "--digest-log",
			       dig,
			       NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, env), 0);
	ck_assert_msg(rv_test_wait_lines(dig, 3, 120000), "no 3 steps saved");
	/* both slots hold a step; kill the worker while it writes one */
	const char *name = strchr(job, '=') + 1;
	const struct rv_ckslot_hdr *h[2] = { 0 };
	size_t len[2] = { 0 };
	for (int s = 0; s < 2; s++) {
		char path[300];
		rv_ckslot_name(path, sizeof(path), name, 0, s);
		int fd = shm_open(path, O_RDONLY, 0);
		ck_assert_int_ge(fd, 0);
		struct stat st;
		ck_assert_int_eq(fstat(fd, &st), 0);
		len[s] = (size_t)st.st_size;
		void *m = mmap(NULL, len[s], PROT_READ, MAP_SHARED, fd, 0);
		ck_assert(m != MAP_FAILED);
		close(fd);
		h[s] = m;
	}
	pid_t w[2];
	ck_assert_int_eq(rv_test_run_workers(&r, r.proc.pid, 0, w, 2), 1);
	int torn = -1;
	int64_t until = rv_mono_ms() + 60000;
	while (torn < 0 && rv_mono_ms() < until) {
		for (int s = 0; s < 2 && torn < 0; s++)
			if (atomic_load(&h[s]->committed) != RV_CKSLOT_COMMITTED &&
			    atomic_load(&h[!s]->committed) == RV_CKSLOT_COMMITTED) {
				kill(w[0], SIGKILL);
				torn = s;
			}
		usleep(100);
	}
	ck_assert_msg(torn >= 0, "never saw a save in progress");
	usleep(200 * 1000);
	/* the copy was cut: the slot stays uncommitted, the other one is whole */
	ck_assert_msg(atomic_load(&h[torn]->committed) != RV_CKSLOT_COMMITTED,
		      "the save finished before the kill");
	int64_t previous = h[!torn]->step;
	free(rv_test_run_expect_exit(&r, 0, 180000));
	char *out = rv_test_run_output(&r, 1);
	int64_t step = expect_loaded(out, 0, dig, "memory");
	ck_assert_int_eq(step, previous);
	free(out);
	for (int s = 0; s < 2; s++)
		munmap((void *)h[s], len[s]);
	long lost, twice;
	unsigned ranks;
	int loads;
	rv_test_shard_account(log, 400, 1, &lost, &twice, &ranks, &loads);
	ck_assert_msg(lost == 0 && twice == 0, "%ld samples lost, %ld twice", lost, twice);
	rv_test_run_end(&r);
}
END_TEST

START_TEST(test_run_killed_loads_storage)
{
	struct rv_test_run r, r2;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char log[400], dig[400], job[96], dir[400];
	paths(&r, log, dig, sizeof(log));
	snprintf(dir, sizeof(dir), "%s/ckpt", r.dir);
	job_env(job, sizeof(job), "storage");
	const char *env[] = { job, asan_env(0), asan_env(1), "ROVER_STANDALONE_DATASET=900:16:1",
			      NULL };
	const char *args[] = { "--standalone",
			       "--nproc-per-node",
			       "2",
			       "--max-restarts",
			       "1",
			       "--ckpt-dir",
			       dir,
			       "--ckpt-keep",
			       "2",
			       EXAMPLE,
			       "--batch-size",
			       "8",
			       "--step-sleep",
			       "0.03",
			       "--shard-log",
			       log,
			       "--digest-log",
			       dig,
			       NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, env), 0);
	ck_assert_msg(rv_test_wait_lines(dig, 15, 90000), "no 15 steps saved");
	rv_test_run_kill(&r, 20000);
	/* the node's memory is gone with it (a new host): storage is all left */
	ck_assert_int_gt(segments(job), 0);
	remove_segments(job);
	int64_t man[8];
	int nman = rv_ckslot_manifest_read(dir, man, 8, NULL);
	ck_assert_msg(nman >= 1 && nman <= 2, "manifest of %d steps (keep 2)", nman);
	int steps_on_disk = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while ((e = readdir(d)))
		steps_on_disk += !strncmp(e->d_name, "step-", 5);
	closedir(d);
	ck_assert_int_le(steps_on_disk, 3); /* kept ones, and one being written */

	ck_assert_int_eq(rv_test_run_init(&r2), 0);
	ck_assert_int_eq(rv_test_run_start(&r2, args, env), 0);
	free(rv_test_run_expect_exit(&r2, 0, 120000));
	char *out = rv_test_run_output(&r2, 1);
	int64_t step = expect_loaded(out, 0, dig, "storage");
	ck_assert_int_eq(step, man[0]);
	free(out);
	long lost, twice;
	unsigned ranks;
	int loads;
	rv_test_shard_account(log, 900, 1, &lost, &twice, &ranks, &loads);
	ck_assert_int_eq(loads, 2);
	ck_assert_msg(lost == 0 && twice == 0, "%ld samples lost, %ld twice", lost, twice);
	ck_assert_int_eq(segments(job), 0);
	rv_test_run_end(&r2);
	rv_test_run_cleanup(&r);
}
END_TEST

START_TEST(test_world_two_to_three)
{
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_start_job(&m, 1200, 10, 1, 1, 2, NULL), 0);
	const char *ep = m.addr;
	struct rv_test_run r[2];
	ck_assert_int_eq(rv_test_run_init(&r[0]), 0);
	char log[400], dig[400], job[96];
	paths(&r[0], log, dig, sizeof(log));
	job_env(job, sizeof(job), "grow");
	const char *env[] = { job, asan_env(0), asan_env(1), NULL };
	const char *a0[] = { "--nnodes",
			     "1:2",
			     "--nproc-per-node",
			     "2",
			     "--rdzv-endpoint",
			     ep,
			     EXAMPLE,
			     "--batch-size",
			     "8",
			     "--step-sleep",
			     "0.05",
			     "--shard-log",
			     log,
			     "--digest-log",
			     dig,
			     NULL };
	const char *a1[] = { "--nnodes",
			     "1:2",
			     "--nproc-per-node",
			     "1",
			     "--rdzv-endpoint",
			     ep,
			     EXAMPLE,
			     "--batch-size",
			     "8",
			     "--step-sleep",
			     "0.05",
			     "--shard-log",
			     log,
			     "--digest-log",
			     dig,
			     NULL };
	ck_assert_int_eq(rv_test_run_start(&r[0], a0, env), 0);
	ck_assert_msg(rv_test_wait_lines(dig, 10, 90000), "no 10 steps saved by the world of 2");
	ck_assert_int_eq(rv_test_run_init(&r[1]), 0);
	ck_assert_int_eq(rv_test_run_start(&r[1], a1, env), 0);
	for (int i = 0; i < 2; i++)
		free(rv_test_run_expect_exit(&r[i], 0, 150000));
	char *out = NULL;
	for (int i = 0; i < 2 && !(out && strstr(out, "world=3")); i++) {
		free(out);
		out = rv_test_run_output(&r[i], 1);
	}
	ck_assert_msg(strstr(out, "[rank0]:loaded step="), "%s", out);
	const char *p = strstr(out, "[rank0]:loaded step=");
	ck_assert_msg(strstr(p, "world=3 data=restored"), "%s", out);
	free(out);
	long lost, twice;
	unsigned ranks;
	int loads;
	rv_test_shard_account(log, 1200, 1, &lost, &twice, &ranks, &loads);
	ck_assert_int_ge(loads, 2);
	ck_assert_msg(ranks == 7, "ranks that trained in the world of 3: %#x", ranks);
	ck_assert_msg(lost == 0 && twice == 0, "%ld samples lost, %ld twice", lost, twice);
	for (int i = 0; i < 2; i++)
		rv_test_run_end(&r[i]);
	ck_assert_int_eq(segments(job), 0);
	rv_test_master_cleanup(&m);
}
END_TEST

START_TEST(test_two_nodes_restore_storage)
{
	struct rv_test_master m, m2;
	ck_assert_int_eq(rv_test_master_start_job(&m, 1200, 16, 1, 2, 2, NULL), 0);
	struct rv_test_run r[2], r2[2];
	ck_assert_int_eq(rv_test_run_init(&r[0]), 0);
	ck_assert_int_eq(rv_test_run_init(&r[1]), 0);
	char log[400], dig[400], job[96], dir[2][400], ep[64];
	paths(&r[0], log, dig, sizeof(log));
	for (int i = 0; i < 2; i++)
		snprintf(dir[i], sizeof(dir[i]), "%s/ckpt", r[i].dir);
	job_env(job, sizeof(job), "nodes");
	const char *env[] = { job, asan_env(0), asan_env(1), NULL };
	const char *args[2][24];
	for (int i = 0; i < 2; i++) {
		const char *a[] = { "--nnodes",
				    "2",
				    "--nproc-per-node",
				    "1",
				    "--rdzv-endpoint",
				    ep,
				    "--ckpt-dir",
				    dir[i],
				    "--ckpt-keep",
				    "3",
				    EXAMPLE,
				    "--batch-size",
				    "8",
				    "--step-sleep",
				    "0.05",
				    "--save-delay",
				    "1:0.3",
				    "--shard-log",
				    log,
				    "--digest-log",
				    dig,
				    NULL };
		memcpy(args[i], a, sizeof(a));
	}
	snprintf(ep, sizeof(ep), "%s", m.addr);
	/* node 0 joins first: it is group rank 0, its rank restores the data
	 * from its own storage; node 1's rank is the late one */
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(rv_test_run_start_joined(&r[i], args[i], env, 60000), 0);
	if (!rv_test_wait_lines(dig, 12, 120000))
		rv_test_run_dump(r, 2, m.log);
	ck_assert_msg(rv_test_wait_lines(dig, 12, 0), "no 12 steps saved");
	/* everything gone at once: both nodes (their memory too) and the master */
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(rv_test_run_signal(&r[i], SIGKILL), 0);
	ck_assert_int_ge(rv_test_master_stop(&m, SIGKILL, 10000), 0);
	for (int i = 0; i < 2; i++)
		rv_test_run_kill(&r[i], 20000);
	remove_segments(job);
	int64_t man[2][8];
	int nman[2];
	for (int i = 0; i < 2; i++) {
		nman[i] = rv_ckslot_manifest_read(dir[i], man[i], 8, NULL);
		ck_assert_int_ge(nman[i], 1);
	}

	ck_assert_int_eq(rv_test_master_start_job(&m2, 1200, 16, 1, 2, 2, NULL), 0);
	snprintf(ep, sizeof(ep), "%s", m2.addr);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(rv_test_run_init(&r2[i]), 0);
		ck_assert_int_eq(rv_test_run_start_joined(&r2[i], args[i], env, 60000), 0);
	}
	for (int i = 0; i < 2; i++)
		free(rv_test_run_expect_exit(&r2[i], 0, 150000));
	char *out = rv_test_run_output(&r2[0], 1);
	int64_t step = expect_loaded(out, 0, dig, "storage");
	free(out);
	/* a step a node stored, no older than the newest both stored (node 1,
	 * saving later, may not hold node 0's newest: it receives it) */
	bool on[2] = { false, false };
	int64_t common = -1;
	for (int k = 0; k < nman[0]; k++)
		for (int j = 0; j < nman[1]; j++)
			if (man[0][k] == man[1][j] && man[0][k] > common)
				common = man[0][k];
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < nman[i]; k++)
			on[i] |= man[i][k] == step;
	ck_assert_msg((on[0] || on[1]) && step >= common,
		      "loaded step %lld: on node 0 %d, on node 1 %d, newest on both %lld",
		      (long long)step, on[0], on[1], (long long)common);
	long lost, twice;
	unsigned ranks;
	int loads;
	rv_test_shard_account(log, 1200, 1, &lost, &twice, &ranks, &loads);
	ck_assert_int_eq(loads, 2);
	ck_assert_msg(ranks == 3, "ranks that trained after the restore: %#x", ranks);
	ck_assert_msg(lost == 0 && twice == 0, "%ld samples lost, %ld twice", lost, twice);
	for (int i = 0; i < 2; i++) {
		rv_test_run_end(&r2[i]);
		rv_test_run_cleanup(&r[i]);
	}
	ck_assert_int_eq(segments(job), 0);
	rv_test_master_cleanup(&m2);
	rv_test_master_cleanup(&m);
}
END_TEST

/* Node args for the preemption test: --nnodes 1:2, one worker, the
 * node's own --ckpt-dir. */
static void preempt_args(const char **a, const char *ep, const char *dir, const char *log,
			 const char *dig)
{
	const char *v[] = { "--nnodes",
			    "1:2",
			    "--nproc-per-node",
			    "1",
			    "--rdzv-endpoint",
			    ep,
			    "--ckpt-dir",
			    dir,
			    EXAMPLE,
			    "--batch-size",
			    "8",
			    "--step-sleep",
			    "0.05",
			    "--shard-log",
			    log,
			    "--digest-log",
			    dig,
			    NULL };
	memcpy(a, v, sizeof(v));
}

/* A spot reclaim or a pod eviction: SIGTERM to one node's rover-run in a
 * world of two.  It persists the newest step its ranks hold and exits
 * (128 + 15); the other node trains on in a world of one from the step
 * both held; the node comes back and the world grows to two again.  Every
 * sample trained exactly once. */
START_TEST(test_preempted_node_leaves_and_returns)
{
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_start_job(&m, 1200, 10, 1, 1, 2, NULL), 0);
	struct rv_test_run r[3];
	char log[400], dig[400], job[96], dir[2][400];
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(rv_test_run_init(&r[i]), 0);
	paths(&r[0], log, dig, sizeof(log));
	for (int i = 0; i < 2; i++)
		snprintf(dir[i], sizeof(dir[i]), "%s/ckpt", r[i].dir);
	job_env(job, sizeof(job), "preempt");
	const char *env[] = { job, asan_env(0), asan_env(1), NULL };
	const char *a[2][18];
	for (int i = 0; i < 2; i++)
		preempt_args(a[i], m.addr, dir[i], log, dig);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(rv_test_run_start_joined(&r[i], a[i], env, 60000), 0);
	if (!rv_test_wait_lines(dig, 10, 120000))
		rv_test_run_dump(r, 2, m.log);
	ck_assert_msg(rv_test_wait_lines(dig, 10, 0), "no 10 steps saved by the world of 2");

	ck_assert_int_eq(rv_test_run_signal(&r[1], SIGTERM), 0);
	char *err1 = rv_test_run_expect_exit(&r[1], 128 + SIGTERM, 60000);
	ck_assert_msg(strstr(err1, "stopping on a signal"), "%s", err1);
	free(err1);
	int64_t man[8];
	int nman = rv_ckslot_manifest_read(dir[1], man, 8, NULL);
	ck_assert_msg(nman >= 1, "the preempted node persisted no step");
	/* the world of one trains on */
	int before = rv_test_count_lines(dig);
	if (!rv_test_wait_lines(dig, before + 10, 90000))
		rv_test_run_dump(r, 2, m.log);
	ck_assert_msg(rv_test_wait_lines(dig, before + 10, 0), "the world of 1 never trained");
	char *out = rv_test_run_output(&r[0], 1);
	int64_t step;
	char from[16], data[16], digest[64];
	ck_assert_msg(loaded_line(out, 0, &step, from, data, digest) &&
			      strstr(out, " world=1 data=restored"),
		      "%s", out);
	/* the step the world of one resumed from is on the preempted node's
	 * storage too (it persisted its newest before it went) */
	ck_assert_msg(man[0] >= step, "persisted %lld, resumed from %lld", (long long)man[0],
		      (long long)step);
	free(out);

	/* the node returns */
	ck_assert_int_eq(rv_test_run_start(&r[2], a[1], env), 0);
	free(rv_test_run_expect_exit(&r[0], 0, 150000));
	free(rv_test_run_expect_exit(&r[2], 0, 150000));
	long lost, twice;
	unsigned ranks;
	int loads;
	rv_test_shard_account(log, 1200, 1, &lost, &twice, &ranks, &loads);
	if (lost || twice) {
		rv_test_run_dump(&r[0], 1, m.log);
		rv_test_run_dump(&r[2], 1, NULL);
		char *sl = rv_test_read_file(log);
		for (char *p = sl; p && (p = strstr(p, "load ")); p++)
			fprintf(stderr, "shard log: %.*s\n", (int)strcspn(p, "\n"), p);
		free(sl);
	}
	ck_assert_int_ge(loads, 3);
	ck_assert_msg(ranks == 3, "ranks that trained after the node returned: %#x", ranks);
	ck_assert_msg(lost == 0 && twice == 0, "%ld samples lost, %ld twice", lost, twice);
	for (int i = 0; i < 3; i++)
		rv_test_run_end(&r[i]);
	ck_assert_int_eq(segments(job), 0);
	rv_test_master_cleanup(&m);
}
END_TEST

static Suite *run_ckpt_suite(void)
{
	TCase *tc = RV_TEST_TCASE("core", 300, test_kill_after_save_loads_memory,
				  test_kill_during_save_loads_previous,
				  test_run_killed_loads_storage, test_world_two_to_three);
	TCase *tn = RV_TEST_TCASE("nodes", 300, test_two_nodes_restore_storage);
	TCase *tp = RV_TEST_TCASE("preempt", 300, test_preempted_node_leaves_and_returns);
	return RV_TEST_SUITE("run_ckpt", tc, tn, tp);
}

RV_TEST_MAIN(run_ckpt_suite)
