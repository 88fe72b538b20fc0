/*
 * check_run_node.c: rover-run (the real binary) and its node: GPUs found
 * through rover-gpuinfo (for real: none here; and a stand-in rover-gpuinfo
 * beside a copy of rover-run that describes two GPUs) and what the workers
 * get from them; the node's usage reported to the master (GET /v1/usage);
 * torchrun's static flags (--node-rank, --master-addr/--master-port);
 * --auto-config and --save-at-breakpoint; --network-check with a node its
 * peers cannot reach (it leaves, the others train without it) and a slow
 * one with --exclude-straggler.  Workers are /bin/sh programs
 * (--no-python) printing their environment.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brainfix.h"
#include "masterfix.h"
#include "parse.h"
#include "runfix.h"
#include "testutil.h"

static void write_exec(const char *path, const char *text)
{
	rv_test_write_file(path, text);
	ck_assert_int_eq(chmod(path, 0755), 0);
}

static long ncpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n;
}

/* A folder bin/ in r's temp folder holding a copy of rover-run (so that
 * "beside our executable" is there), rover-master linked, and the stand-in
 * rover-gpuinfo: two GPUs in common/gpu.h's line format.  Its path into
 * bin. */
static void stand_in_bin(const struct rv_test_run *r, char *bin, size_t size)
{
	const char *d = getenv("ROVER_BIN_DIR");
	char src[512], cmd[2048], dst[600];
	snprintf(src, sizeof(src), "%s", d && *d ? d : "build/bin");
	snprintf(bin, size, "%s/bin", r->dir);
	ck_assert_int_eq(mkdir(bin, 0755), 0);
	snprintf(cmd, sizeof(cmd),
		 "cp '%s/rover-run' '%s/' && ln -s \"$(cd '%s' && pwd)/rover-master\" '%s/'", src,
		 bin, src, bin);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(dst, sizeof(dst), "%s/rover-gpuinfo", bin);
	write_exec(dst, "#!/bin/sh\n"
			"# stand-in for rover-gpuinfo: no GPU can be had here\n"
			"echo 'count 2'\n"
			"echo 'gpu 0 81559 80000 9 0 Stand-in H100'\n"
			"echo 'gpu 1 81559 60000 9 0 Stand-in H100'\n");
}

/* A shell worker that writes its environment to DIR/env.LOCAL_RANK. */
static const char *env_worker(const struct rv_test_run *r, char *cmd, size_t size)
{
	snprintf(cmd, size, "env > '%s'/env.$LOCAL_RANK", r->dir);
	return cmd;
}

static char *worker_env(const struct rv_test_run *r, int lr)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/env.%d", r->dir, lr);
	char *s = rv_test_read_file(path);
	ck_assert_msg(s != NULL, "local rank %d left no environment", lr);
	return s;
}

/* --nproc-per-node gpu with the stand-in's two GPUs: two workers, each its
 * own device, NCCL's error handling on; --accelerator cpu asks for none. */
START_TEST(test_gpus_through_stand_in_gpuinfo)
{
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char bin[400], cmd[600];
	stand_in_bin(&r, bin, sizeof(bin));
	const char *old = getenv("ROVER_BIN_DIR");
	char *keep = old ? strdup(old) : NULL;
	setenv("ROVER_BIN_DIR", bin, 1);
	const char *args[] = { "--standalone",
			       "--nproc-per-node",
			       "gpu",
			       "--no-python",
			       "/bin/sh",
			       "-c",
			       env_worker(&r, cmd, sizeof(cmd)),
			       NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, NULL), 0);
	char *err = rv_test_run_expect_exit(&r, 0, 30000);
	ck_assert_msg(strstr(err, "GPUs found") && strstr(err, "count=2"), "%s", err);
	free(err);
	for (int lr = 0; lr < 2; lr++) {
		char *env = worker_env(&r, lr), want[64];
		snprintf(want, sizeof(want), "ROVER_DEVICE=cuda:%d\n", lr);
		ck_assert_msg(strstr(env, want), "%s", env);
		ck_assert_msg(strstr(env, "LOCAL_WORLD_SIZE=2\n"), "%s", env);
		ck_assert_msg(strstr(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING=1\n"), "%s", env);
		free(env);
	}
	const char *cpu_args[] = { "--standalone", "--nproc-per-node", "gpu",       "--accelerator",
				   "cpu",          "--no-python",      "/bin/true", NULL };
	ck_assert_int_eq(rv_test_run_start(&r, cpu_args, NULL), 0);
	err = rv_test_run_expect_exit(&r, 2, 30000);
	ck_assert_msg(strstr(err, "no GPU on this node (--accelerator cpu)"), "%s", err);
	free(err);
	if (keep)
		setenv("ROVER_BIN_DIR", keep, 1);
	else
		unsetenv("ROVER_BIN_DIR");
	free(keep);
	rv_test_run_cleanup(&r);
}
END_TEST

/* The real rover-gpuinfo finds no GPU here: auto is one worker per CPU,
 * on the CPU, with no NCCL settings. */
START_TEST(test_no_gpu_auto_is_cpus)
{
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char cmd[600];
	const char *args[] = { "--standalone",
			       "--nproc-per-node",
			       "auto",
			       "--no-python",
			       "/bin/sh",
			       "-c",
			       env_worker(&r, cmd, sizeof(cmd)),
			       NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, NULL), 0);
	char *err = rv_test_run_expect_exit(&r, 0, 30000);
	ck_assert_msg(strstr(err, "no GPU: workers run on the CPU"), "%s", err);
	free(err);
	char want[64];
	snprintf(want, sizeof(want), "LOCAL_WORLD_SIZE=%ld\n", ncpus());
	for (int lr = 0; lr < ncpus(); lr++) {
		char *env = worker_env(&r, lr);
		ck_assert_msg(strstr(env, want), "%s", env);
		ck_assert_msg(strstr(env, "ROVER_DEVICE=cpu\n"), "%s", env);
		ck_assert_msg(!strstr(env, "NCCL_ASYNC_ERROR_HANDLING"), "%s", env);
		free(env);
	}
	rv_test_run_cleanup(&r);
}
END_TEST

/* Two busy workers: the master hears the node's CPU and memory. */
START_TEST(test_usage_reaches_the_master)
{
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_start_job(&m, 1000, 10, 1, 1, 1, NULL), 0);
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	const char *args[] = { "--rdzv-endpoint",
			       m.addr,
			       "--nproc-per-node",
			       "2",
			       "--monitor-interval",
			       "1",
			       "--no-python",
			       "/bin/sh",
			       "-c",
			       "end=$(($(date +%s) + 6)); while [ $(date +%s) -lt $end ]; do :; "
			       "done",
			       NULL };
	const char *env[] = { "ROVER_NODE_NAME=busy-node", NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, env), 0);
	struct rv_master_client *c = rv_test_master_client(&m);
	ck_assert_ptr_nonnull(c);
	struct rv_node_usage u[4];
	int n = 0;
	bool seen = false;
	int64_t until = rv_mono_ms() + 20000;
	while (!seen && rv_mono_ms() < until) {
		usleep(300 * 1000);
		struct rv_err e = { 0 };
		if (rv_master_usage_list(c, u, 4, &n, &e) < 0)
			continue;
		/* two shell loops on this shared machine: a part of a core at least */
		seen = n == 1 && !strcmp(u[0].node, "busy-node") && u[0].cpu > 0.2 &&
		       u[0].memory_mb >= 1;
	}
	ck_assert_msg(seen, "n=%d node=%s cpu=%.2f memory_mb=%lld", n, n ? u[0].node : "",
		      n ? u[0].cpu : 0, n ? (long long)u[0].memory_mb : 0);
	ck_assert_int_eq(u[0].rank, 0);
	ck_assert_int_eq(u[0].gpus, 0);
	free(rv_test_run_expect_exit(&r, 0, 30000));
	rv_master_client_free(c);
	rv_test_run_cleanup(&r);
	rv_test_master_cleanup(&m);
}
END_TEST

/* --node-rank: the node that joins first asks for group rank 1 and gets
 * it; the store is at --master-addr:--master-port for both; workers hear
 * --save-at-breakpoint.  A rank outside the world is exit 2. */
START_TEST(test_static_node_rank_and_store)
{
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_start_job(&m, 1000, 10, 1, 2, 2, NULL), 0);
	struct rv_test_run r[2];
	const char *ranks[2] = { "1", "0" };
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(rv_test_run_init(&r[i]), 0);
		const char *args[] = { "--nnodes",
				       "2",
				       "--rdzv-endpoint",
				       m.addr,
				       "--node-rank",
				       ranks[i],
				       "--master-addr",
				       "localhost",
				       "--master-port",
				       "29611",
				       "--save-at-breakpoint",
				       "--no-python",
				       "/bin/sh",
				       "-c",
				       "echo \"R=$RANK G=$GROUP_RANK W=$WORLD_SIZE "
				       "S=$MASTER_ADDR:$MASTER_PORT B=$ROVER_SAVE_AT_BREAKPOINT\"",
				       NULL };
		/* the first to join would be the master's rank 0 */
		ck_assert_int_eq(rv_test_run_start_joined(&r[i], args, NULL, 10000), 0);
	}
	const char *want[2] = { "R=1 G=1 W=2 S=localhost:29611 B=1",
				"R=0 G=0 W=2 S=localhost:29611 B=1" };
	for (int i = 0; i < 2; i++) {
		free(rv_test_run_expect_exit(&r[i], 0, 30000));
		char *out = rv_test_run_output(&r[i], 1);
		ck_assert_msg(strstr(out, want[i]), "node %d: %s", i, out);
		free(out);
		rv_test_run_cleanup(&r[i]);
	}
	rv_test_master_cleanup(&m);

	struct rv_test_run one;
	ck_assert_int_eq(rv_test_run_init(&one), 0);
	const char *bad[] = { "--standalone", "--node-rank", "1", "--no-python", "/bin/true", NULL };
	ck_assert_int_eq(rv_test_run_start(&one, bad, NULL), 0);
	char *err = rv_test_run_expect_exit(&one, 2, 30000);
	ck_assert_msg(strstr(err, "--node-rank 1 is outside the world of 1 node(s)"), "%s", err);
	free(err);
	/* without the static flags the store is node 0's, on a port of its own */
	const char *plain[] = { "--standalone",
				"--no-python",
				"/bin/sh",
				"-c",
				"echo \"S=$MASTER_ADDR:$MASTER_PORT\"",
				NULL };
	ck_assert_int_eq(rv_test_run_start(&one, plain, NULL), 0);
	free(rv_test_run_expect_exit(&one, 0, 30000));
	char *out = rv_test_run_output(&one, 1);
	ck_assert_msg(strstr(out, "S=127.0.0.1:") && !strstr(out, ":29500"), "%s", out);
	free(out);
	rv_test_run_cleanup(&one);
}
END_TEST

/* --auto-config without --nproc-per-node: one worker per CPU here (no
 * GPU, the standalone spec asks for none); given, the flag wins. */
START_TEST(test_auto_config)
{
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	const char *args[] = { "--standalone",
			       "--auto-config",
			       "--no-python",
			       "/bin/sh",
			       "-c",
			       "echo \"L=$LOCAL_WORLD_SIZE\"",
			       NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, NULL), 0);
	char *err = rv_test_run_expect_exit(&r, 0, 30000);
	ck_assert_msg(strstr(err, "msg=\"auto-config\" nnodes=1"), "%s", err);
	free(err);
	char want[32];
	snprintf(want, sizeof(want), "L=%ld\n", ncpus());
	char *out = rv_test_run_output(&r, 1);
	ck_assert_msg(strstr(out, want), "%s", out);
	free(out);
	const char *given[] = { "--standalone",
				"--auto-config",
				"--nproc-per-node",
				"3",
				"--no-python",
				"/bin/sh",
				"-c",
				"echo \"L=$LOCAL_WORLD_SIZE\"",
				NULL };
	ck_assert_int_eq(rv_test_run_start(&r, given, NULL), 0);
	free(rv_test_run_expect_exit(&r, 0, 30000));
	out = rv_test_run_output(&r, 1);
	ck_assert_msg(strstr(out, "L=3\n"), "%s", out);
	free(out);
	rv_test_run_cleanup(&r);
}
END_TEST

#define NODE_SCRIPT "sleep 3; echo \"W=$WORLD_SIZE\""

/* n nodes of one worker against m (min..max), each with --network-check
 * and extra[i] flags (NULL-terminated, may be NULL). */
static void start_checked_nodes(struct rv_test_master *m, int min, int max, struct rv_test_run *r,
				int n, const char *const *const *extra)
{
	ck_assert_int_eq(rv_test_master_start_job(m, 1000, 10, 1, min, max, NULL), 0);
	static char nn[16];
	snprintf(nn, sizeof(nn), "%d:%d", min, max);
	for (int i = 0; i < n; i++) {
		const char *argv[32] = { "--nnodes", nn, "--rdzv-endpoint", m->addr,
					 "--network-check" };
		int k = 5;
		for (const char *const *a = extra[i]; a && *a; a++)
			argv[k++] = *a;
		argv[k++] = "--no-python";
		argv[k++] = "/bin/sh";
		argv[k++] = "-c";
		argv[k++] = NODE_SCRIPT;
		argv[k] = NULL;
		ck_assert_int_eq(rv_test_run_init(&r[i]), 0);
		ck_assert_int_eq(rv_test_run_start(&r[i], argv, NULL), 0);
	}
}

/* Four nodes; the last gives an address nobody can reach (TEST-NET-1):
 * its peers cannot send to it in either round, so the check calls it
 * faulty; it reports itself and exits 1, and the three others train in a
 * world of three. */
START_TEST(test_network_check_excludes_a_faulty_node)
{
	struct rv_test_master m;
	struct rv_test_run r[4];
	const char *const bad[] = { "--local-addr", "192.0.2.1", NULL };
	const char *const *extra[4] = { NULL, NULL, NULL, bad };
	start_checked_nodes(&m, 3, 4, r, 4, extra);
	char *err = rv_test_run_expect_exit(&r[3], 1, 90000);
	ck_assert_msg(strstr(err, "this node is faulty: leaving the job"), "%s", err);
	free(err);
	for (int i = 0; i < 3; i++) {
		free(rv_test_run_expect_exit(&r[i], 0, 60000));
		char *out = rv_test_run_output(&r[i], 1);
		ck_assert_msg(strstr(out, "W=3\n") && !strstr(out, "W=4"), "node %d: %s", i, out);
		free(out);
		rv_test_run_cleanup(&r[i]);
	}
	rv_test_run_cleanup(&r[3]);
	rv_test_master_cleanup(&m);
}
END_TEST

/* Three nodes; one sends 64 times the others' data in the check, so its
 * time is far above the median: with --exclude-straggler it leaves, the
 * other two train in a world of two. */
START_TEST(test_exclude_straggler)
{
	struct rv_test_master m;
	struct rv_test_run r[3];
	const char *const fast[] = { "--exclude-straggler", NULL };
	const char *const slow[] = { "--exclude-straggler", "--rdzv-conf", "netcheck_mb=256",
				     NULL };
	const char *const *extra[3] = { fast, fast, slow };
	start_checked_nodes(&m, 2, 3, r, 3, extra);
	char *err = rv_test_run_expect_exit(&r[2], 1, 90000);
	ck_assert_msg(strstr(err, "this node is a straggler: leaving the job"), "%s", err);
	free(err);
	for (int i = 0; i < 2; i++) {
		free(rv_test_run_expect_exit(&r[i], 0, 60000));
		char *out = rv_test_run_output(&r[i], 1);
		ck_assert_msg(strstr(out, "W=2\n") && !strstr(out, "W=3"), "node %d: %s", i, out);
		free(out);
		rv_test_run_cleanup(&r[i]);
	}
	rv_test_run_cleanup(&r[2]);
	rv_test_master_cleanup(&m);
}
END_TEST

/* --warm-import: the warm interpreter imports the named module once, and a
 * restarted worker forked from it does not import it again.  The module
 * logs the pid of every process that imports it; the first worker starts
 * cold (the interpreter still imports torch), fails once the interpreter
 * has imported the module too (a loaded machine imports torch slowly), and
 * the restarted one starts warm. */
START_TEST(test_warm_import)
{
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char mod[600], script[600], pp[700], log[600];
	snprintf(log, sizeof(log), "%s/imports.log", r.dir);
	ck_assert_int_eq(rv_test_run_file(&r, "rvslowmod.py",
					  "import os\n"
					  "with open(os.path.join(os.path.dirname(__file__), "
					  "'imports.log'), 'a') as f:\n"
					  "    f.write('%d\\n' % os.getpid())\n",
					  mod, sizeof(mod)),
			 0);
	ck_assert_int_eq(rv_test_run_file(&r, "train.py",
					  "import os, sys, time\n"
					  "import rvslowmod\n"
					  "n = os.environ['TORCHELASTIC_RESTART_COUNT']\n"
					  "print('worker', os.getpid(), n, flush=True)\n"
					  "log = os.path.join(os.path.dirname(rvslowmod.__file__), "
					  "'imports.log')\n"
					  "end = time.time() + 80\n"
					  "while n == '0' and time.time() < end:\n"
					  "    if len(open(log).read().split()) >= 2:\n"
					  "        time.sleep(2)\n"
					  "        break\n"
					  "    time.sleep(0.2)\n"
					  "if n == '0':\n"
					  "    sys.exit(1)\n",
					  script, sizeof(script)),
			 0);
	snprintf(pp, sizeof(pp), "PYTHONPATH=%s", r.dir);
	const char *env[] = { pp, NULL };
	const char *args[] = { "--standalone", "--max-restarts", "1", "--warm-import",
			       "rvslowmod",    script,           NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, env), 0);
	char *err = rv_test_run_expect_exit(&r, 0, 90000);
	char *out = rv_test_run_output(&r, 1);
	int first = 0, second = 0;
	const char *w0 = strstr(out, "worker ");
	ck_assert_msg(w0 && sscanf(w0, "worker %d 0", &first) == 1, "%s", out);
	const char *w1 = strstr(w0 + 1, "worker ");
	ck_assert_msg(w1 && sscanf(w1, "worker %d 1", &second) == 1, "%s", out);
	ck_assert_msg(strstr(err, "start=warm"), "the restarted worker did not start warm: %s",
		      err);
	char *imports = rv_test_read_file(log);
	ck_assert_ptr_nonnull(imports);
	char want[32];
	snprintf(want, sizeof(want), "%d\n", second);
	/* imported by the cold first worker and the interpreter, not again */
	ck_assert_msg(!strstr(imports, want), "the warm worker imported it again: %s", imports);
	int lines = 0;
	for (const char *c = imports; *c; c++)
		lines += *c == '\n';
	ck_assert_int_eq(lines, 2);
	free(imports);
	free(out);
	free(err);
	rv_test_run_cleanup(&r);
}
END_TEST

RV_TEST_MAIN_TCASE("run_node", "core", 180, test_gpus_through_stand_in_gpuinfo,
		   test_no_gpu_auto_is_cpus, test_usage_reaches_the_master,
		   test_static_node_rank_and_store, test_auto_config,
		   test_network_check_excludes_a_faulty_node, test_exclude_straggler,
		   test_warm_import)
