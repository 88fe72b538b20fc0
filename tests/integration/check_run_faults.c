/*
 * check_run_faults.c: rover-run (the real binary) when things go wrong:
 * a script that raises at start stops after two identical tracebacks and
 * shows it, instead of spending every restart; a script that keeps failing
 * ends with a summary naming each failed rank, its exit code and its
 * stderr; a group silent past --hang-timeout is restarted; SIGINT (Ctrl-C) or SIGTERM to rover-run, and a kill -9 of it,
 * leave no process of the job in the process table (/proc), the workers'
 * own children included (one in a session of its own, DataLoader workers);
 * --log-dir and
 * -r put each rank's streams in files; a bad flag is exit 2.
 */
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brainfix.h"
#include "parse.h"
#include "runfix.h"
#include "testutil.h"

static int count(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

START_TEST(test_user_error_stops_after_two_tracebacks)
{
	struct rv_test_run r;
	const char *args[] = {
		"--standalone", "--nproc-per-node", "2", "--max-restarts", "5", NULL
	};
	ck_assert_int_eq(rv_test_run_script(&r, "bad.py",
					    "import os\n"
					    "def load(path):\n"
					    "    raise ValueError('no such config: ' + path)\n"
					    "load('/etc/train.yaml')\n",
					    args, NULL),
			 0);
	char *err = rv_test_run_expect_exit(&r, 1, 60000);
	/* two starts, not six */
	ck_assert_msg(count(err, "msg=\"starting workers\"") == 2, "%s", err);
	/* the traceback itself, shown once more at the end */
	const char *tail = strstr(err, "same Python traceback");
	ck_assert_msg(tail, "%s", err);
	ck_assert_msg(strstr(tail, "Traceback (most recent call last):") &&
			      strstr(tail, "ValueError: no such config: /etc/train.yaml"),
		      "%s", err);
	free(err);
	rv_test_run_end(&r);
}
END_TEST

START_TEST(test_final_failure_summary)
{
	struct rv_test_run r;
	const char *args[] = {
		"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", NULL
	};
	/* rank 1 fails without a traceback (so it is not taken for a script
	 * error); rank 0 would train on */
	ck_assert_int_eq(
		rv_test_run_script(&r, "flaky.py",
				   "import os, sys, time\n"
				   "if os.environ['RANK'] == '1':\n"
				   "    print('disk on fire', file=sys.stderr, flush=True)\n"
				   "    sys.exit(3)\n"
				   "time.sleep(60)\n",
				   args, NULL),
		0);
	char *err = rv_test_run_expect_exit(&r, 1, 60000);
	ck_assert_msg(count(err, "msg=\"starting workers\"") == 2, "%s", err);
	const char *sum = strstr(err, "rover-run: the job failed:");
	ck_assert_msg(sum, "%s", err);
	ck_assert_msg(strstr(sum, "rank 1 (local rank 1, node ") &&
			      strstr(sum, "exited with code 3") && strstr(sum, "disk on fire"),
		      "%s", sum);
	/* rank 0 was stopped by rover-run, not failed: not in the summary */
	ck_assert_msg(!strstr(sum, "rank 0 ("), "%s", sum);
	free(err);
	rv_test_run_cleanup(&r);
}
END_TEST

/* Start script with two workers (env: more of rover-run's environment, may
 * be NULL) and wait until both printed "ready". */
static void start_ready(struct rv_test_run *r, const char *script, const char *const *env)
{
	const char *args[] = { "--standalone", "--nproc-per-node", "2", NULL };
	ck_assert_int_eq(rv_test_run_script(r, "ready.py", script, args, env), 0);
	ck_assert(rv_test_run_wait_for(r, 1, "[rank1]:ready", 60000));
	ck_assert(rv_test_run_wait_for(r, 1, "[rank0]:ready", 60000));
}

/* The processes of the job, with the ones its workers started themselves:
 * a child in a session of its own among them. */
static int job_tree(const struct rv_test_run *r, struct rv_test_pid *tree, int max)
{
	int n = rv_test_proc_tree(r->proc.pid, tree, max), setsid = 0;
	for (int i = 1; i < n; i++)
		setsid += tree[i].sid == tree[i].pid;
	/* rover-run, 2 workers, their 2 sleeps, 2 DataLoader workers */
	ck_assert_int_ge(n, 7);
	ck_assert_int_ge(setsid, 1);
	return n;
}

/* SIGKILL what of tree is left (a failing run's), and say how many. */
static int kill_left(const struct rv_test_pid *tree, int n)
{
	int left = rv_test_proc_alive(tree, n);
	for (int i = 0; i < n && left; i++)
		if (rv_test_proc_alive(&tree[i], 1))
			kill(tree[i].pid, SIGKILL);
	return left;
}

static void stop_leaves_nothing(int sig, const char *const *env)
{
	struct rv_test_run r;
	struct rv_test_pid tree[64];
	start_ready(&r, rv_test_orphans_script, env);
	int n = job_tree(&r, tree, 64);
	ck_assert_int_eq(rv_test_run_signal(&r, sig), 0);
	free(rv_test_run_expect_exit(&r, 128 + sig, 30000));
	int left = kill_left(tree, n);
	ck_assert_msg(left == 0, "%d process(es) of the job left after signal %d", left, sig);
	rv_test_run_end(&r);
}

START_TEST(test_sigint_leaves_no_process)
{
	stop_leaves_nothing(SIGINT, NULL);
}
END_TEST

START_TEST(test_sigterm_leaves_no_process)
{
	stop_leaves_nothing(SIGTERM, NULL);
}
END_TEST

/* Without the PID namespace (where none can be made) a child that left its
 * worker's process group is still stopped: rover-run is a child subreaper
 * and kills what was reparented to it before it exits. */
START_TEST(test_sigterm_without_pid_namespace_leaves_no_process)
{
	const char *off[] = { "ROVER_PIDNS=0", NULL };
	stop_leaves_nothing(SIGTERM, off);
}
END_TEST

/* kill -9 of rover-run: 2 s later nothing of the job runs, not even what a
 * worker started in a session of its own or a DataLoader's workers (the
 * kernel ends the job's PID namespace with rover-run). */
START_TEST(test_kill9_of_rover_run_leaves_no_process)
{
	struct rv_test_run r;
	struct rv_test_pid tree[64];
	start_ready(&r, rv_test_orphans_script, NULL);
	int n = job_tree(&r, tree, 64);
	ck_assert_int_eq(rv_test_run_signal(&r, SIGKILL), 0);
	rv_test_run_wait(&r, 10000);
	usleep(2000 * 1000);
	int left = kill_left(tree, n);
	ck_assert_msg(left == 0, "%d of %d process(es) of the job left 2 s after kill -9", left, n);
	rv_test_run_end(&r);
}
END_TEST

/* Silent past --hang-timeout: a failure naming the ranks with their Python
 * stacks, restarted, and the job's end once the restarts are spent. */
START_TEST(test_hang_restarts_then_fails)
{
	struct rv_test_run r;
	const char *args[] = { "--standalone",
			       "--nproc-per-node",
			       "2",
			       "--max-restarts",
			       "1",
			       "--hang-timeout",
			       "1",
			       NULL };
	int64_t t0 = rv_mono_ms();
	ck_assert_int_eq(rv_test_run_script(&r, "hang.py",
					    "import time\nprint('started', flush=True)\n"
					    "time.sleep(300)\n",
					    args, NULL),
			 0);
	char *err = rv_test_run_expect_exit(&r, 1, 60000);
	ck_assert_msg(count(err, "msg=\"starting workers\"") == 2, "%s", err);
	ck_assert_msg(count(err, "msg=\"worker hangs: no output\" rank=1") == 2, "%s", err);
	ck_assert_msg(strstr(err, "rover-run: the job failed: ranks 0,1 hung: no output for 1 s"),
		      "%s", err);
	/* each hung rank's Python stack, on the console and in the log */
	ck_assert_msg(strstr(err, "[rank1]:Fatal Python error: Aborted"), "%s", err);
	ck_assert_msg(strstr(err, "msg=\"hung worker's stack\" rank=0 stack=\"Fatal Python error"),
		      "%s", err);
	ck_assert_msg(strstr(err, "hang.py\\\", line 3 in <module>"), "%s", err);
	/* detected within about the timeout, not minutes */
	ck_assert_int_lt(rv_mono_ms() - t0, 15000);
	free(err);
	rv_test_run_end(&r);
}
END_TEST

/* --log-dir: each rank's streams in DIR/attempt_N/LOCAL_RANK/; -r 1 keeps
 * stdout off the console, stderr still comes with its [rankN]: prefix; -t
 * brings a redirected stream back to the console. */
START_TEST(test_log_dir_and_redirects)
{
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char logs[400], script[400];
	snprintf(logs, sizeof(logs), "%s/logs", r.dir);
	ck_assert_int_eq(rv_test_run_file(&r, "talk.py",
					  "import os, sys\n"
					  "print('out-' + os.environ['RANK'])\n"
					  "print('err-' + os.environ['RANK'], file=sys.stderr)\n",
					  script, sizeof(script)),
			 0);
	const char *args[] = {
		"--standalone", "--nproc-per-node", "2", "--log-dir", logs, "-r", "1", script, NULL
	};
	ck_assert_int_eq(rv_test_run_start(&r, args, NULL), 0);
	char *err = rv_test_run_expect_exit(&r, 0, 30000);
	char *out = rv_test_run_output(&r, 1);
	ck_assert_msg(!strstr(out, "out-"), "%s", out);
	ck_assert_msg(strstr(err, "[rank0]:err-0\n") && strstr(err, "[rank1]:err-1\n"), "%s", err);
	for (int rank = 0; rank < 2; rank++) {
		char path[600], want[32];
		const char *stream[2] = { "stdout", "stderr" };
		for (int i = 0; i < 2; i++) {
			snprintf(path, sizeof(path), "%s/attempt_0/%d/%s.log", logs, rank,
				 stream[i]);
			snprintf(want, sizeof(want), "%s-%d\n", i ? "err" : "out", rank);
			char *text = rv_test_read_file(path);
			ck_assert_msg(text && !strcmp(text, want), "%s: \"%s\"", path,
				      text ? text : "(none)");
			free(text);
		}
	}
	free(out);
	free(err);
	/* tee wins over a redirect of the same stream (torchrun adds the tee'd
	 * streams to the redirected ones): rank 0's stdout reaches the console
	 * too, nothing else does */
	snprintf(logs, sizeof(logs), "%s/logs2", r.dir);
	const char *args2[] = { "--standalone",
				"--nproc-per-node",
				"2",
				"--log-dir",
				logs,
				"-r",
				"3",
				"-t",
				"0:1",
				script,
				NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args2, NULL), 0);
	err = rv_test_run_expect_exit(&r, 0, 30000);
	out = rv_test_run_output(&r, 1);
	ck_assert_msg(strstr(out, "[rank0]:out-0\n") && !strstr(out, "out-1"), "%s", out);
	ck_assert_msg(!strstr(err, "err-"), "%s", err);
	free(out);
	free(err);
	/* no --log-dir: -r still keeps stdout off the console, as under
	 * torchrun, in a new folder in $TMPDIR */
	char tmpenv[420];
	snprintf(tmpenv, sizeof(tmpenv), "TMPDIR=%s", r.dir);
	const char *env3[] = { tmpenv, NULL };
	const char *args3[] = { "--standalone", "--nproc-per-node", "2", "-r", "1", script, NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args3, env3), 0);
	err = rv_test_run_expect_exit(&r, 0, 30000);
	out = rv_test_run_output(&r, 1);
	ck_assert_msg(!strstr(out, "out-"), "%s", out);
	ck_assert_msg(strstr(err, "[rank1]:err-1\n") && strstr(err, "msg=\"log directory set\""),
		      "%s", err);
	char pattern[500];
	snprintf(pattern, sizeof(pattern), "%s/rover-run_*/attempt_0/1/stdout.log", r.dir);
	glob_t gl;
	ck_assert_int_eq(glob(pattern, 0, NULL, &gl), 0);
	ck_assert_int_eq((int)gl.gl_pathc, 1);
	char *text = rv_test_read_file(gl.gl_pathv[0]);
	ck_assert_msg(text && !strcmp(text, "out-1\n"), "%s", text ? text : "(none)");
	free(text);
	globfree(&gl);
	free(out);
	free(err);
	rv_test_run_end(&r);
}
END_TEST

/* A torchrun command line as Kubeflow's PyTorchJob runs it: the flags in
 * PET_* variables, --local-ranks-filter (torch >= 2.2), the environment
 * torchrun's workers see (the store rover-run's:
 * TORCHELASTIC_USE_AGENT_STORE=True), and its warning about
 * OMP_NUM_THREADS. */
START_TEST(test_torchrun_environment_and_filter)
{
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char script[400];
	ck_assert_int_eq(rv_test_run_file(&r, "env.py",
					  "import os, sys\n"
					  "e = os.environ\n"
					  "print('rank=%s omp=%s agent_store=%s role=%s args=%s' % "
					  "(e['RANK'], e.get('OMP_NUM_THREADS'), "
					  "e.get('TORCHELASTIC_USE_AGENT_STORE'), e['ROLE_NAME'], "
					  "' '.join(sys.argv[1:])))\n"
					  "print('err-' + e['RANK'], file=sys.stderr)\n",
					  script, sizeof(script)),
			 0);
	const char *args[] = { "--max_r=0", "--local_ranks_filter=1", script, "--nproc", "5", "-m",
			       NULL };
	const char *env[] = { "PET_NPROC_PER_NODE=2", "PET_STANDALONE=1", "PET_ROLE=trainer",
			      NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, env), 0);
	char *err = rv_test_run_expect_exit(&r, 0, 30000);
	char *out = rv_test_run_output(&r, 1);
	ck_assert_msg(strstr(out, "[rank1]:rank=1 omp=1 agent_store=True role=trainer "
				  "args=--nproc 5 -m\n"),
		      "%s", out);
	ck_assert_msg(!strstr(out, "rank=0"), "%s", out);
	ck_assert_msg(strstr(err, "[rank1]:err-1\n") && !strstr(err, "err-0"), "%s", err);
	ck_assert_msg(strstr(err, "level=warn") && strstr(err, "OMP_NUM_THREADS set to 1"), "%s",
		      err);
	free(out);
	free(err);
	rv_test_run_end(&r);
}
END_TEST

/* With --log-dir, each worker's TORCHELASTIC_ERROR_FILE is torchrun's
 * DIR/.../attempt_N/LOCAL_RANK/error.json: torch's @record writes the
 * exception there and the summary names it; an earlier run's is removed. */
START_TEST(test_error_file)
{
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char logs[400], script[400], stale[600], path[600];
	snprintf(logs, sizeof(logs), "%s/logs", r.dir);
	ck_assert_int_eq(mkdir(logs, 0755), 0);
	snprintf(stale, sizeof(stale), "%s/attempt_0", logs);
	ck_assert_int_eq(mkdir(stale, 0755), 0);
	snprintf(stale, sizeof(stale), "%s/attempt_0/0", logs);
	ck_assert_int_eq(mkdir(stale, 0755), 0);
	snprintf(stale, sizeof(stale), "%s/attempt_0/0/error.json", logs);
	FILE *fp = fopen(stale, "w");
	ck_assert_ptr_nonnull(fp);
	fputs("{}", fp);
	fclose(fp);
	ck_assert_int_eq(
		rv_test_run_file(
			&r, "record.py",
			"import os\n"
			"from torch.distributed.elastic.multiprocessing.errors import record\n"
			"@record\n"
			"def main():\n"
			"    print('file=' + os.environ['TORCHELASTIC_ERROR_FILE'])\n"
			"    if os.environ['LOCAL_RANK'] == '1':\n"
			"        raise ValueError('boom')\n"
			"main()\n",
			script, sizeof(script)),
		0);
	const char *args[] = {
		"--standalone", "--nproc-per-node", "2", "--log-dir", logs, script, NULL
	};
	ck_assert_int_eq(rv_test_run_start(&r, args, NULL), 0);
	char *err = rv_test_run_expect_exit(&r, 1, 60000);
	char *out = rv_test_run_output(&r, 1);
	snprintf(path, sizeof(path), "[rank1]:file=%s/attempt_0/1/error.json\n", logs);
	ck_assert_msg(strstr(out, path), "%s", out);
	snprintf(path, sizeof(path), "error_file: %s/attempt_0/1/error.json\n", logs);
	ck_assert_msg(strstr(err, path), "%s", err);
	snprintf(path, sizeof(path), "%s/attempt_0/1/error.json", logs);
	char *text = rv_test_read_file(path);
	ck_assert_msg(text && strstr(text, "ValueError: boom"), "%s", text ? text : "(none)");
	ck_assert_int_eq(access(stale, F_OK), -1);
	free(text);
	free(out);
	free(err);
	rv_test_run_end(&r);
}
END_TEST

/* In the job's PID namespace the worker's parent, rover-run, is pid 1, and
 * /proc names it under that pid (a /proc of the namespace); with
 * ROVER_PIDNS=0, which rover-run logs, it has its pid on the host. */
START_TEST(test_pid_namespace_and_its_opt_out)
{
	const char *args[] = { "--standalone",
			       "--no-python",
			       "/bin/sh",
			       "-c",
			       "echo ppid=$PPID; cat /proc/$PPID/comm",
			       NULL };
	for (int off = 0; off < 2; off++) {
		struct rv_test_run r;
		ck_assert_int_eq(rv_test_run_init(&r), 0);
		const char *env[] = { off ? "ROVER_PIDNS=0" : "ROVER_PIDNS=1", NULL };
		ck_assert_int_eq(rv_test_run_start(&r, args, env), 0);
		char *err = rv_test_run_expect_exit(&r, 0, 30000);
		char *out = rv_test_run_output(&r, 1);
		ck_assert_msg(strstr(out, "[rank0]:rover-run\n"), "%s", out);
		bool one = strstr(out, "[rank0]:ppid=1\n") != NULL;
		if (off)
			ck_assert_msg(!one && strstr(err, "PID namespace off"), "%s\n%s", out, err);
		else
			ck_assert_msg(one && !strstr(err, "no PID namespace"), "%s\n%s", out, err);
		free(out);
		free(err);
		rv_test_run_end(&r);
	}
}
END_TEST

START_TEST(test_bad_flag_exit_2)
{
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	const char *args[] = { "--nproc-per-node", "many", "x.py", NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, NULL), 0);
	char *err = rv_test_run_expect_exit(&r, 2, 10000);
	ck_assert_msg(strstr(err, "--nproc-per-node \"many\": must be auto, cpu, gpu or a number"),
		      "%s", err);
	free(err);
	/* several nodes need a master to meet at */
	const char *args2[] = { "--nnodes", "2", "x.py", NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args2, NULL), 0);
	err = rv_test_run_expect_exit(&r, 2, 10000);
	ck_assert_msg(strstr(err, "--rdzv-endpoint"), "%s", err);
	free(err);
	/* one worker per GPU on a node without one */
	const char *args3[] = { "--nproc-per-node", "gpu", "x.py", NULL };
	const char *nogpu[] = { "CUDA_VISIBLE_DEVICES=", NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args3, nogpu), 0);
	err = rv_test_run_expect_exit(&r, 2, 10000);
	ck_assert_msg(strstr(err, "no GPU"), "%s", err);
	free(err);
	rv_test_run_cleanup(&r);
}
END_TEST

RV_TEST_MAIN_TCASE("run_faults", "core", 120, test_user_error_stops_after_two_tracebacks,
		   test_final_failure_summary, test_sigint_leaves_no_process,
		   test_sigterm_leaves_no_process,
		   test_sigterm_without_pid_namespace_leaves_no_process,
		   test_kill9_of_rover_run_leaves_no_process, test_hang_restarts_then_fails,
		   test_log_dir_and_redirects, test_torchrun_environment_and_filter,
		   test_error_file, test_bad_flag_exit_2, test_pid_namespace_and_its_opt_out)
