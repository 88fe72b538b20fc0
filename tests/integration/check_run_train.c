/*
 * check_run_train.c: rover-run (the real binary) training the real example
 * (examples/digits_ddp.py, PyTorch DDP on gloo) end to end: --standalone
 * with two workers reaches the accuracy; a worker killed with SIGKILL
 * mid-run is restarted (TORCHELASTIC_RESTART_COUNT 1 in the new workers)
 * and the job still reaches it; an unmodified torchrun-style script sees
 * torchrun's whole environment; two rover-run nodes form one world with
 * one rover-master (one of them told where it is by ROVER_MASTER_ADDR and
 * its name by ROVER_NODE_NAME, as the node manager does), and re-form it
 * when a worker of one is killed; a late node grows a 1:2 world; a
 * worker stopped (SIGSTOP) past the master's shard doing timeout and
 * resumed keeps its shard, so every sample is trained once.  Needs
 * /usr/bin/python3 with torch and sklearn.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "masterfix.h"
#include "parse.h"
#include "runfix.h"
#include "testutil.h"

#define EXAMPLE "examples/digits_ddp.py"

static void assert_exit0(struct rv_test_run *r, int timeout_ms)
{
	free(rv_test_run_expect_exit(r, 0, timeout_ms));
}

START_TEST(test_standalone_reaches_accuracy)
{
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	const char *args[] = { "--standalone", "--nproc-per-node", "2",   EXAMPLE, "--steps",
			       "100",          "--target",         "0.9", NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, NULL), 0);
	assert_exit0(&r, 90000);
	char *out = rv_test_run_output(&r, 1);
	/* rank 0's progress lines, prefixed, and the accuracy it reached */
	ck_assert_msg(strstr(out, "[rank0]:step=100 "), "%s", out);
	ck_assert_msg(strstr(out, "samples_per_s="), "%s", out);
	const char *acc = strstr(out, "[rank0]:test_accuracy=");
	ck_assert_msg(acc, "%s", out);
	double a = strtod(acc + strlen("[rank0]:test_accuracy="), NULL);
	ck_assert_msg(a >= 0.9, "accuracy %.4f", a);
	free(out);
	rv_test_run_end(&r);
}
END_TEST

/* Cold workers (ROVER_WARM=0): exec'ed, so /proc/PID/environ shows the
 * variables rover-run gave them (a warm worker's shows the interpreter's). */
START_TEST(test_kill9_worker_restarts)
{
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	const char *args[] = {
		"--standalone", "--nproc_per_node=2", "--max-restarts", "3", EXAMPLE, "--steps",
		"120",          "--step-sleep",       "0.02",           NULL
	};
	const char *cold[] = { "ROVER_WARM=0", NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, cold), 0);
	/* mid-run: rank 0 has logged steps */
	ck_assert_msg(rv_test_run_wait_for(&r, 1, "[rank0]:step=20 ", 60000), "no step 20");
	pid_t victim[4], before[4];
	ck_assert_int_eq(rv_test_run_workers(&r, r.proc.pid, 1, victim, 4), 1);
	ck_assert_int_eq(rv_test_run_workers(&r, r.proc.pid, 0, before, 4), 1);
	char v[32];
	rv_test_proc_env(victim[0], "TORCHELASTIC_RESTART_COUNT", v, sizeof(v));
	ck_assert_str_eq(v, "0");
	ck_assert_int_eq(kill(victim[0], SIGKILL), 0);
	/* the new group: two new workers told it is the first restart */
	pid_t now0[4], now1[4];
	int64_t until = rv_mono_ms() + 30000;
	int n0 = 0, n1 = 0;
	while (rv_mono_ms() < until) {
		/* RANK in the environment: past the exec */
		n0 = rv_test_run_workers(&r, r.proc.pid, 0, now0, 4);
		n1 = rv_test_run_workers(&r, r.proc.pid, 1, now1, 4);
		if (n0 == 1 && n1 == 1 && now0[0] != before[0] && now1[0] != victim[0])
			break;
		usleep(20 * 1000);
	}
	ck_assert_int_eq(n0, 1);
	ck_assert_int_eq(n1, 1);
	rv_test_proc_env(now0[0], "TORCHELASTIC_RESTART_COUNT", v, sizeof(v));
	ck_assert_str_eq(v, "1");
	rv_test_proc_env(now1[0], "TORCHELASTIC_RESTART_COUNT", v, sizeof(v));
	ck_assert_str_eq(v, "1");
	assert_exit0(&r, 90000);
	char *out = rv_test_run_output(&r, 1);
	char *err = rv_test_run_output(&r, 2);
	ck_assert_msg(strstr(out, "[rank0]:test_accuracy="), "%s", out);
	ck_assert_msg(strstr(err, "rank=1") && strstr(err, "killed by signal 9"), "%s", err);
	/* every start cold, none tried warm */
	ck_assert_msg(strstr(err, "warm interpreter off") && !strstr(err, "start=warm") &&
			      !strstr(err, "warm interpreter starting"),
		      "%s", err);
	free(out);
	free(err);
	rv_test_run_cleanup(&r);
}
END_TEST

/* The pid of the last "worker started" line of rank in rover-run's log. */
static pid_t started_pid(const struct rv_test_run *r, int rank)
{
	char *err = rv_test_run_output(r, 2);
	char want[64];
	snprintf(want, sizeof(want), "\"worker started\" rank=%d local_rank=%d pid=", rank, rank);
	pid_t pid = 0;
	for (const char *p = err; (p = strstr(p, want)); p += strlen(want))
		pid = (pid_t)atoi(p + strlen(want));
	free(err);
	return pid;
}

/* A worker killed with SIGKILL once the warm interpreter is ready: the
 * restarted group is forked from it (the log says start=warm for both
 * ranks), gets torchrun's variables (TORCHELASTIC_RESTART_COUNT 1), its
 * output comes through with [rankN]: prefixes, the job ends 0 and nothing
 * (interpreter, standby workers) is left behind. */
START_TEST(test_kill9_worker_restarts_warm)
{
	static const char script[] =
		"import os, sys, time, torch, torch.distributed as dist\n"
		"dist.init_process_group('gloo')\n"
		"restart = int(os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
		"print('start rank=%d restart=%d world=%s' % (dist.get_rank(), restart,\n"
		"      os.environ['WORLD_SIZE']), flush=True)\n"
		"for s in range(20 if restart else 100000):\n"
		"    t = torch.ones(4)\n"
		"    dist.all_reduce(t)\n"
		"    print('step=%d sum=%d' % (s, t[0].item()), flush=True)\n"
		"    time.sleep(0.05)\n"
		"dist.destroy_process_group()\n";
	struct rv_test_run r;
	const char *args[] = {
		"--standalone", "--nproc-per-node", "2", "--max-restarts", "3", NULL
	};
	ck_assert_int_eq(rv_test_run_script(&r, "steps.py", script, args, NULL), 0);
	ck_assert_msg(rv_test_run_wait_for(&r, 2, "warm interpreter ready", 60000),
		      "the warm interpreter never got ready");
	ck_assert_msg(rv_test_run_wait_for(&r, 1, "[rank1]:step=5 ", 60000), "no step 5");
	/* the log names the pid in the job's PID namespace */
	pid_t victim = rv_test_run_host_pid(&r, started_pid(&r, 1));
	ck_assert_int_gt(victim, 0);
	ck_assert_int_eq(kill(victim, SIGKILL), 0);
	char *err = rv_test_run_expect_exit(&r, 0, 60000);
	char *out = rv_test_run_output(&r, 1);
	const char *fail = strstr(err, "killed by signal 9");
	ck_assert_msg(fail, "%s", err);
	for (int rank = 0; rank < 2; rank++) {
		char want[96];
		snprintf(want, sizeof(want), "rank=%d local_rank=%d pid=%d", rank, rank,
			 (int)started_pid(&r, rank));
		/* the restarted worker's line, after the failure */
		const char *line = strstr(fail, want);
		const char *warm = line ? strstr(line, " start=warm ") : NULL;
		ck_assert_msg(warm && warm < strchr(line, '\n'), "rank %d not restarted warm:\n%s",
			      rank, err);
		snprintf(want, sizeof(want), "[rank%d]:start rank=%d restart=1 world=2\n", rank,
			 rank);
		ck_assert_msg(strstr(out, want), "%s", out);
		snprintf(want, sizeof(want), "[rank%d]:step=19 sum=2\n", rank);
		ck_assert_msg(strstr(out, want), "%s", out);
	}
	free(out);
	free(err);
	rv_test_run_end(&r);
}
END_TEST

/* What a plain torchrun script does: env:// init, an all-reduce, and the
 * variables torchrun documents. */
static const char torchrun_script[] =
	"import os, torch, torch.distributed as dist\n"
	"keys = ['RANK','LOCAL_RANK','WORLD_SIZE','LOCAL_WORLD_SIZE','GROUP_RANK',\n"
	"        'GROUP_WORLD_SIZE','ROLE_RANK','ROLE_WORLD_SIZE','ROLE_NAME','MASTER_ADDR',\n"
	"        'MASTER_PORT','TORCHELASTIC_RESTART_COUNT','TORCHELASTIC_MAX_RESTARTS',\n"
	"        'TORCHELASTIC_RUN_ID']\n"
	"missing = [k for k in keys if k not in os.environ]\n"
	"dist.init_process_group('gloo')\n"
	"t = torch.tensor([dist.get_rank() + 1.0])\n"
	"dist.all_reduce(t)\n"
	"print('rank=%s local=%s world=%s lws=%s group=%s/%s role=%s restarts=%s/%s run=%s "
	"omp=%s sum=%d missing=%s' % (os.environ['RANK'], os.environ['LOCAL_RANK'],\n"
	"      os.environ['WORLD_SIZE'], os.environ['LOCAL_WORLD_SIZE'], "
	"os.environ['GROUP_RANK'],\n"
	"      os.environ['GROUP_WORLD_SIZE'], os.environ['ROLE_NAME'],\n"
	"      os.environ['TORCHELASTIC_RESTART_COUNT'], os.environ['TORCHELASTIC_MAX_RESTARTS'],\n"
	"      os.environ['TORCHELASTIC_RUN_ID'], os.environ.get('OMP_NUM_THREADS'), t.item(),\n"
	"      ','.join(missing) or '-'), flush=True)\n"
	"dist.destroy_process_group()\n";

START_TEST(test_torchrun_script_unmodified)
{
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char script[400];
	ck_assert_int_eq(rv_test_run_file(&r, "plain.py", torchrun_script, script, sizeof(script)),
			 0);
	const char *args[] = { "--standalone",
			       "--nproc_per_node",
			       "2",
			       "--rdzv_id=job42",
			       "--max_restarts=2",
			       "--role",
			       "trainer",
			       "--monitor-interval",
			       "0.1",
			       script,
			       NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, NULL), 0);
	assert_exit0(&r, 60000);
	char *out = rv_test_run_output(&r, 1);
	ck_assert_msg(strstr(out, "[rank0]:rank=0 local=0 world=2 lws=2 group=0/1 role=trainer "
				  "restarts=0/2 run=job42 omp=1 sum=3 missing=-"),
		      "%s", out);
	ck_assert_msg(strstr(out, "[rank1]:rank=1 local=1 world=2 lws=2 group=0/1 role=trainer "
				  "restarts=0/2 run=job42 omp=1 sum=3 missing=-"),
		      "%s", out);
	free(out);
	rv_test_run_end(&r);
}
END_TEST

/* The trainer library is reachable from a worker with no setup: rover-run
 * puts the `rover` package on PYTHONPATH and names librover-trainer.so. */
START_TEST(test_trainer_package_reachable)
{
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char script[400];
	ck_assert_int_eq(
		rv_test_run_file(
			&r, "t.py",
			"import os, rover\n"
			"lib = os.environ.get('ROVER_TRAINER_LIB', '')\n"
			"print('trainer lib=%s pkg=%s' % (os.path.exists(lib),\n"
			"      rover.__file__.endswith('rover/__init__.py')), flush=True)\n",
			script, sizeof(script)),
		0);
	const char *args[] = { "--standalone", "--nproc-per-node", "1", script, NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, NULL), 0);
	assert_exit0(&r, 60000);
	char *out = rv_test_run_output(&r, 1);
	ck_assert_msg(strstr(out, "[rank0]:trainer lib=True pkg=True"), "%s", out);
	free(out);
	rv_test_run_end(&r);
}
END_TEST

/* A rover-master for min..max nodes; its HOST:PORT into ep. */
static void start_master(struct rv_test_master *m, int min, int max, char *ep, size_t size)
{
	char *spec = rv_test_master_spec(1000, 10, 1, min, max);
	ck_assert_int_eq(rv_test_master_init(m, spec), 0);
	free(spec);
	ck_assert_int_eq(rv_test_master_start(m, NULL), 0);
	snprintf(ep, size, "127.0.0.1:%d", m->port);
}

/* A rover-master for two nodes, and two rover-run nodes of one worker
 * against it running args (after the node flags) then the script text
 * (NULL: args name it).  Node 0 is given the master with --rdzv-endpoint,
 * node 1 the way the master's node manager gives it: ROVER_MASTER_ADDR and
 * ROVER_NODE_NAME=node-b in its environment. */
static void start_two_nodes(struct rv_test_master *m, struct rv_test_run r[2],
			    const char *const *args, const char *text)
{
	char ep[64], env_addr[96];
	start_master(m, 2, 2, ep, sizeof(ep));
	snprintf(env_addr, sizeof(env_addr), "ROVER_MASTER_ADDR=%s", ep);
	const char *env[] = { env_addr, "ROVER_NODE_NAME=node-b", NULL };
	for (int i = 0; i < 2; i++) {
		const char *argv[32] = { "--nnodes",       "2", "--nproc-per-node", "1",
					 "--max-restarts", "2" };
		int n = 6;
		if (i == 0) {
			argv[n++] = "--rdzv-endpoint";
			argv[n++] = ep;
		}
		for (const char *const *a = args; *a && n < 31; a++)
			argv[n++] = *a;
		argv[n] = NULL;
		const char *const *e = i == 1 ? env : NULL;
		if (text)
			ck_assert_int_eq(rv_test_run_script(&r[i], "plain.py", text, argv, e), 0);
		else {
			ck_assert_int_eq(rv_test_run_init(&r[i]), 0);
			ck_assert_int_eq(rv_test_run_start(&r[i], argv, e), 0);
		}
	}
}

START_TEST(test_two_nodes_one_master)
{
	struct rv_test_master m;
	struct rv_test_run r[2];
	const char *none[] = { NULL };
	start_two_nodes(&m, r, none, torchrun_script);
	for (int i = 0; i < 2; i++)
		assert_exit0(&r[i], 60000);
	/* one world of two nodes: global ranks 0 and 1, group ranks 0 and 1 */
	int seen = 0;
	for (int i = 0; i < 2; i++) {
		char *out = rv_test_run_output(&r[i], 1);
		if (strstr(out, "[rank0]:rank=0 local=0 world=2 lws=1 group=0/2 "))
			seen |= 1;
		if (strstr(out, "[rank1]:rank=1 local=0 world=2 lws=1 group=1/2 "))
			seen |= 2;
		ck_assert_msg(strstr(out, "sum=3 missing=-"), "%s", out);
		/* one worker: torchrun leaves OMP_NUM_THREADS alone */
		ck_assert_msg(strstr(out, "omp=None"), "%s", out);
		free(out);
		/* node 1 joined under the name its environment gave */
		char *err = rv_test_run_output(&r[i], 2);
		if (i == 1)
			ck_assert_msg(strstr(err, "msg=\"joined the rendezvous\" node=node-b "),
				      "%s", err);
		free(err);
		rv_test_run_cleanup(&r[i]);
	}
	ck_assert_int_eq(seen, 3);
	rv_test_master_cleanup(&m);
}
END_TEST

/* A worker of one node killed: that node restarts its group (spending a
 * restart), the healthy node only re-forms the world (spending none), and
 * the job still reaches the accuracy. */
START_TEST(test_two_nodes_worker_killed)
{
	struct rv_test_master m;
	struct rv_test_run r[2];
	const char *args[] = { EXAMPLE, "--steps", "100", "--step-sleep", "0.02", NULL };
	start_two_nodes(&m, r, args, NULL);
	/* mid-run: rank 0, on either node, has logged steps */
	int64_t until = rv_mono_ms() + 60000;
	while (!rv_test_run_wait_for(&r[0], 1, "[rank0]:step=20 ", 0) &&
	       !rv_test_run_wait_for(&r[1], 1, "[rank0]:step=20 ", 0) && rv_mono_ms() < until)
		usleep(20 * 1000);
	pid_t victim[2];
	ck_assert_int_eq(rv_test_run_workers(&r[1], r[1].proc.pid, -1, victim, 2), 1);
	ck_assert_int_eq(kill(victim[0], SIGKILL), 0);
	for (int i = 0; i < 2; i++)
		assert_exit0(&r[i], 90000);
	char *err0 = rv_test_run_output(&r[0], 2);
	char *err1 = rv_test_run_output(&r[1], 2);
	ck_assert_msg(strstr(err1, "killed by signal 9") &&
			      strstr(err1, "msg=\"every worker finished\" restarts=1"),
		      "%s", err1);
	ck_assert_msg(strstr(err0, "msg=\"every worker finished\" restarts=0"), "%s", err0);
	ck_assert_msg(strstr(err0, "round=2"), "%s", err0);
	free(err0);
	free(err1);
	int acc = 0;
	for (int i = 0; i < 2; i++) {
		char *out = rv_test_run_output(&r[i], 1);
		acc += strstr(out, "[rank0]:test_accuracy=") != NULL;
		free(out);
		rv_test_run_cleanup(&r[i]);
	}
	ck_assert_int_eq(acc, 1);
	rv_test_master_cleanup(&m);
}
END_TEST

/* --nnodes 1:2: a node alone trains in a world of one; a second node
 * joining makes the master announce a new round, and the first node
 * restarts its group into the world of two (no restart spent). */
START_TEST(test_late_node_grows_the_world)
{
	struct rv_test_master m;
	char ep[64];
	start_master(&m, 1, 2, ep, sizeof(ep));
	const char *args[] = { "--nnodes", "1:2", "--rdzv-endpoint", ep, NULL };
	static const char script[] =
		"import os, time, torch.distributed as dist\n"
		"dist.init_process_group('gloo')\n"
		"print('world=%s rank=%s' % (os.environ['WORLD_SIZE'], os.environ['RANK']),\n"
		"      flush=True)\n"
		"if int(os.environ['WORLD_SIZE']) < 2:\n"
		"    time.sleep(120)\n"
		"dist.barrier()\n"
		"dist.destroy_process_group()\n";
	struct rv_test_run r[2];
	ck_assert_int_eq(rv_test_run_script(&r[0], "grow.py", script, args, NULL), 0);
	ck_assert(rv_test_run_wait_for(&r[0], 1, "[rank0]:world=1 rank=0", 60000));
	ck_assert_int_eq(rv_test_run_script(&r[1], "grow.py", script, args, NULL), 0);
	for (int i = 0; i < 2; i++)
		assert_exit0(&r[i], 60000);
	char *out0 = rv_test_run_output(&r[0], 1);
	char *out1 = rv_test_run_output(&r[1], 1);
	char *err0 = rv_test_run_output(&r[0], 2);
	ck_assert_msg(strstr(out0, "world=2") && strstr(out1, "world=2"), "%s\n%s", out0, out1);
	ck_assert_msg(strstr(err0, "the world changes: rendezvous again"), "%s", err0);
	ck_assert_msg(strstr(err0, "msg=\"every worker finished\" restarts=0"), "%s", err0);
	free(out0);
	free(out1);
	free(err0);
	for (int i = 0; i < 2; i++)
		rv_test_run_end(&r[i]);
	rv_test_master_cleanup(&m);
}
END_TEST

/* Each worker trains its own small model on the master's shards (no
 * collective: a stopped peer must not hold the other back), one sample at
 * a time, and logs every sample once its step is taken. */
static const char slow_script[] = "import time, torch, rover\n"
				  "torch.manual_seed(0)\n"
				  "model = torch.nn.Linear(4, 1)\n"
				  "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
				  "for i in rover.ShardSampler():\n"
				  "    time.sleep(0.08)\n"
				  "    x = torch.full((1, 4), float(i % 13))\n"
				  "    loss = (model(x) - 1.0).pow(2).sum()\n"
				  "    opt.zero_grad()\n"
				  "    loss.backward()\n"
				  "    opt.step()\n"
				  "    print('trained idx=%d' % i, flush=True)\n";

enum { SLOW_SIZE = 120, SLOW_SHARD = 10 };

/* The index of rank's newest "trained" line in out, -1 when none. */
static long last_trained(const char *out, int rank)
{
	char want[48];
	snprintf(want, sizeof(want), "[rank%d]:trained idx=", rank);
	long idx = -1;
	for (const char *p = out; (p = strstr(p, want)); p += strlen(want))
		idx = strtol(p + strlen(want), NULL, 10);
	return idx;
}

/*
 * One node of two workers; the master takes a shard back after 1 s in
 * DOING.  Rank 1 is stopped with SIGSTOP in the middle of a shard for 3.5 s
 * (its rover-run goes on heartbeating), then resumed.  Its shard must not
 * go to rank 0 meanwhile: the training log has every sample exactly once.
 */
START_TEST(test_stopped_worker_keeps_its_shard)
{
	struct rv_test_master m;
	char *spec = rv_test_master_spec(SLOW_SIZE, SLOW_SHARD, 1, 1, 1);
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	const char *margs[] = { "--shard-doing-timeout-ms", "1000", NULL };
	ck_assert_int_eq(rv_test_master_start(&m, margs), 0);
	/* cold workers: the warm interpreter's imports would only slow the start */
	const char *args[] = { "--nnodes", "1",         "--nproc-per-node",
			       "2",        "--no-warm", "--rdzv-endpoint",
			       m.addr,     NULL };
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_script(&r, "slow.py", slow_script, args, NULL), 0);
	/* rank 1 in a shard with samples still to train after the one in flight */
	long at = -1;
	int64_t until = rv_mono_ms() + 60000;
	while (rv_mono_ms() < until) {
		char *out = rv_test_run_output(&r, 1);
		at = last_trained(out, 1);
		free(out);
		if (at >= 0 && at % SLOW_SHARD <= 5)
			break;
		usleep(10 * 1000);
	}
	ck_assert_msg(at >= 0 && at % SLOW_SHARD <= 5, "rank 1 trained nothing");
	pid_t pid[2];
	ck_assert_int_eq(rv_test_run_workers(&r, 0, 1, pid, 2), 1);
	ck_assert_int_eq(kill(pid[0], SIGSTOP), 0);
	usleep(3500 * 1000); /* 3.5 doing timeouts; rank 0 goes on meanwhile */
	ck_assert_int_eq(kill(pid[0], SIGCONT), 0);
	assert_exit0(&r, 60000);
	char *out = rv_test_run_output(&r, 1);
	int count[SLOW_SIZE] = { 0 };
	const char *want = "]:trained idx=";
	for (const char *p = out; (p = strstr(p, want)); p += strlen(want)) {
		long i = strtol(p + strlen(want), NULL, 10);
		ck_assert_msg(i >= 0 && i < SLOW_SIZE, "sample %ld out of the dataset", i);
		count[i]++;
	}
	for (int i = 0; i < SLOW_SIZE; i++)
		ck_assert_msg(count[i] == 1,
			      "sample %d trained %d times (rank 1 stopped at %ld)\n%s", i, count[i],
			      at, out);
	free(out);
	rv_test_run_end(&r);
	rv_test_master_cleanup(&m);
}
END_TEST

static Suite *run_train_suite(void)
{
	TCase *tc = RV_TEST_TCASE("core", 180, test_standalone_reaches_accuracy,
				  test_kill9_worker_restarts, test_kill9_worker_restarts_warm,
				  test_torchrun_script_unmodified, test_trainer_package_reachable,
				  test_two_nodes_one_master, test_two_nodes_worker_killed,
				  test_late_node_grows_the_world);
	TCase *shards = RV_TEST_TCASE("shards", 120, test_stopped_worker_keeps_its_shard);
	return RV_TEST_SUITE("run_train", tc, shards);
}

RV_TEST_MAIN(run_train_suite)
