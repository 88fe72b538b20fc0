/*
 * check_run_elastic.c: rover-run nodes coming and going with real PyTorch
 * (gloo on CPU) and a real rover-master.
 *
 * --nnodes 1:3: a node alone trains in a world of one, a second and a
 * third joining grow it to two and three, the third killed with -9 (its
 * rover-run and workers gone) shrinks it back to two, and the two that are
 * left finish.  Then rover-run as the node program of the master's local
 * scheduler: its rover-run killed with -9, the node manager relaunches the
 * node with the same rank and the job succeeds; and killed with -9 while
 * its workers run processes of their own, none of those left 2 s later.
 * Needs /usr/bin/python3 with torch.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "masterfix.h"
#include "parse.h"
#include "runfix.h"
#include "testutil.h"

/* Every worker: report the world, then all_reduce until told to stop.
 * World 3 leaves a flag file; a world smaller than 3 ends (20 steps) only
 * once the flag is there, so the nodes finish after the third left. */
static const char elastic_script[] =
	"import datetime, os, sys, time\n"
	"import torch, torch.distributed as dist\n"
	"dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=20))\n"
	"w, r = dist.get_world_size(), dist.get_rank()\n"
	"print('world=%d rank=%d' % (w, r), flush=True)\n"
	"flag = os.path.join(os.environ['ELASTIC_DIR'], 'saw3')\n"
	"if w == 3:\n"
	"    open(flag, 'w').close()\n"
	"t, steps = torch.ones(1), 0\n"
	"while True:\n"
	"    dist.all_reduce(t)\n"
	"    steps += 1\n"
	"    time.sleep(0.05)\n"
	"    if w < 3 and os.path.exists(flag) and steps >= 20:\n"
	"        break\n"
	"dist.destroy_process_group()\n"
	"print('done world=%d' % w, flush=True)\n";

START_TEST(test_nnodes_1_3_join_late_and_leave)
{
	struct rv_test_master m;
	/* no last call: a joining node must still wait for the members (it
	 * once formed a world without them, and the world was re-formed at
	 * every heartbeat) */
	const char *margs[] = { "--rdzv-last-call-ms", "0", NULL };
	ck_assert_int_eq(rv_test_master_start_job(&m, 1000, 10, 1, 1, 3, margs), 0);
	const char *ep = m.addr;
	char direnv[300];
	snprintf(direnv, sizeof(direnv), "ELASTIC_DIR=%s", m.dir);
	const char *env[] = { direnv, NULL };
	const char *args[] = {
		"--nnodes", "1:3", "--rdzv-endpoint", ep, "--max-restarts", "3", NULL
	};
	struct rv_test_run r[3];
	ck_assert_int_eq(rv_test_run_script(&r[0], "elastic.py", elastic_script, args, env), 0);
	ck_assert(rv_test_run_wait_for(&r[0], 1, "[rank0]:world=1 rank=0", 60000));
	ck_assert_int_eq(rv_test_run_script(&r[1], "elastic.py", elastic_script, args, env), 0);
	if (!rv_test_run_wait_for(&r[1], 1, "world=2 rank=", 60000))
		rv_test_run_dump(r, 2, m.log);
	ck_assert_msg(rv_test_run_wait_for(&r[1], 1, "world=2 rank=", 0), "no world of 2");
	ck_assert_int_eq(rv_test_run_script(&r[2], "elastic.py", elastic_script, args, env), 0);
	if (!rv_test_run_wait_for(&r[2], 1, "world=3 rank=", 60000))
		rv_test_run_dump(r, 3, m.log);
	ck_assert_msg(rv_test_run_wait_for(&r[2], 1, "world=3 rank=", 0), "no world of 3");
	ck_assert(rv_test_run_wait_for(&r[0], 1, "world=3 rank=", 10000));
	usleep(500 * 1000); /* a few steps in the world of three */

	/* the third node goes: its rover-run killed, its worker dies with it */
	rv_test_run_kill(&r[2], 10000);
	ck_assert_int_eq(r[2].status, SIGKILL);

	for (int i = 0; i < 2; i++) {
		char *err = rv_test_run_expect_exit(&r[i], 0, 120000);
		free(err);
		char *out = rv_test_run_output(&r[i], 1);
		ck_assert_msg(strstr(out, "world=3 rank=") && strstr(out, "done world=2"), "%s",
			      out);
		ck_assert_msg(!strstr(out, "done world=3"), "%s", out);
		free(out);
	}
	char *out0 = rv_test_run_output(&r[0], 1);
	ck_assert_msg(strstr(out0, "world=1 rank=0") && strstr(out0, "world=2 rank="), "%s", out0);
	free(out0);
	for (int i = 0; i < 2; i++)
		rv_test_run_end(&r[i]);
	rv_test_run_cleanup(&r[2]);
	rv_test_master_cleanup(&m);
}
END_TEST

/* Rank 0 saves for 7 s after training; the other rank's node is done at
 * once.  Each start of a worker prints its world. */
static const char late_save_script[] =
	"import datetime, time\n"
	"import torch, torch.distributed as dist\n"
	"dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=20))\n"
	"w, r = dist.get_world_size(), dist.get_rank()\n"
	"print('start world=%d rank=%d' % (w, r), flush=True)\n"
	"t = torch.ones(1)\n"
	"for _ in range(10):\n"
	"    dist.all_reduce(t)\n"
	"dist.destroy_process_group()\n"
	"if r == 0:\n"
	"    time.sleep(7)\n"
	"    print('saved', flush=True)\n";

/* A node whose workers all finished says so before it exits: its silence
 * afterwards is no death, so the rank still saving (7 s, more than two
 * heartbeat timeouts of 3 s; heartbeats go every second) is not stopped
 * for a new round and the job ends with both. */
START_TEST(test_finished_node_silence_keeps_the_world)
{
	struct rv_test_master m;
	const char *margs[] = { "--rdzv-heartbeat-timeout-ms", "3000", "--rdzv-last-call-ms", "0",
				NULL };
	ck_assert_int_eq(rv_test_master_start_job(&m, 1000, 10, 1, 2, 2, margs), 0);
	const char *args[] = { "--nnodes", "2", "--rdzv-endpoint", m.addr, "--max-restarts",
			       "3",        NULL };
	struct rv_test_run r[2];
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(rv_test_run_script(&r[i], "save.py", late_save_script, args, NULL),
				 0);
	int saver = -1;
	for (int i = 0; i < 2; i++) {
		char *err = rv_test_run_expect_exit(&r[i], 0, 60000);
		free(err);
		char *out = rv_test_run_output(&r[i], 1);
		/* one start per node: no worker was stopped for a new round */
		ck_assert_msg(strstr(out, "start world=2") &&
				      !strstr(strstr(out, "start world=") + 1, "start world="),
			      "%s", out);
		if (strstr(out, "saved"))
			saver = i;
		free(out);
	}
	ck_assert_msg(saver >= 0, "rank 0 never finished saving");
	for (int i = 0; i < 2; i++)
		rv_test_run_end(&r[i]);
	rv_test_master_cleanup(&m);
}
END_TEST

/* /v1/job's node <name>, or NULL. */
static const struct rv_node_status *node_named(const struct rv_job_status *js, const char *name)
{
	for (int i = 0; i < js->nnode_list; i++)
		if (!strcmp(js->node_list[i].name, name))
			return &js->node_list[i];
	return NULL;
}

START_TEST(test_agent_kill9_relaunched_same_rank)
{
	char bin[PATH_MAX], script[PATH_MAX], run[PATH_MAX + 16];
	const char *dir = getenv("ROVER_BIN_DIR") ? getenv("ROVER_BIN_DIR") : "build/bin";
	ck_assert_ptr_nonnull(realpath(dir, bin));
	ck_assert_ptr_nonnull(realpath("examples/digits_ddp.py", script));
	snprintf(run, sizeof(run), "%s/rover-run", bin);
	char *spec = NULL;
	ck_assert_int_ge(
		asprintf(&spec,
			 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
			 "\"metadata\":{\"name\":\"agent-kill\"},"
			 "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
			 "\"optimizeMode\":\"manual\","
			 "\"replicaSpecs\":{\"worker\":{\"replicas\":2,\"minReplicas\":2,"
			 "\"maxReplicas\":2,\"restartCount\":2,\"command\":[\"%s\","
			 "\"--nproc-per-node\",\"1\",\"--max-restarts\",\"2\",\"%s\","
			 "\"--steps\",\"200\",\"--step-sleep\",\"0.02\",\"--log-every\",\"10\"]}},"
			 /* a dataset the master requires; the script reads its own data */
			 "\"datasets\":[{\"name\":\"digits\",\"size\":1437,\"shardSize\":64}]}}",
			 run, script),
		0);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	setenv("PYTHON_EXEC", "/usr/bin/python3", 1); /* the nodes inherit it */
	const char *margs[] = {
		"--scheduler",          "local", "--linger-s", "1", "--rdzv-last-call-ms", "0",
		"--node-stop-grace-ms", "2000",  NULL
	};
	ck_assert_int_eq(rv_test_master_start(&m, margs), 0);
	struct rv_master_client *c = rv_test_master_client(&m);
	ck_assert_ptr_nonnull(c);

	/* both nodes training: a step logged by rank 0, on the node that
	 * joined the rendezvous first (either) */
	static struct rv_job_status js;
	char logs[2][600];
	for (int i = 0; i < 2; i++)
		snprintf(logs[i], sizeof(logs[i]), "%s/nodes/worker-%d.log", m.state, i);
	int64_t until = rv_mono_ms() + 150000;
	bool training = false;
	while (!training && rv_mono_ms() < until) {
		for (int i = 0; i < 2 && !training; i++) {
			char *t = rv_test_read_file(logs[i]);
			training = t && strstr(t, "step=20 ");
			free(t);
		}
		if (!training)
			usleep(100 * 1000);
	}
	if (!training) {
		char *log = rv_test_read_file(m.log);
		fprintf(stderr, "---- master log\n%s\n", log ? log : "(none)");
		free(log);
		char cmd[700];
		snprintf(cmd, sizeof(cmd), "ls -la %s/nodes; tail -n 30 %s/nodes/*.log >&2",
			 m.state, m.state);
		if (system(cmd) != 0)
			fprintf(stderr, "no node logs\n");
	}
	ck_assert_msg(training, "the job never trained");
	ck_assert_int_eq(rv_master_job(c, &js, NULL), 0);
	const struct rv_node_status *n1 = node_named(&js, "worker-1");
	ck_assert_ptr_nonnull(n1);
	ck_assert_int_gt(n1->pid, 0);
	pid_t agent = n1->pid;
	int rank = n1->rank;

	/* kill -9 the node's rover-run: its worker dies with it (PDEATHSIG) */
	ck_assert_int_eq(kill(agent, SIGKILL), 0);

	until = rv_mono_ms() + 150000;
	bool ended = false;
	while (!ended && rv_mono_ms() < until) {
		if (rv_master_job(c, &js, NULL) == 0 && js.job_state[0] &&
		    strcmp(js.job_state, "running") != 0)
			ended = true;
		else
			usleep(200 * 1000);
	}
	ck_assert_msg(ended, "the job never ended (see %s)", m.log);
	ck_assert_msg(!strcmp(js.job_state, "succeeded"), "job %s: %s", js.job_state,
		      js.job_reason);
	n1 = node_named(&js, "worker-1");
	ck_assert_ptr_nonnull(n1);
	ck_assert_int_eq(n1->rank, rank);  /* the same rank */
	ck_assert_int_eq(n1->restarts, 1); /* relaunched once */
	ck_assert_int_ne(n1->pid, agent);  /* by a new rover-run */
	ck_assert_int_eq(node_named(&js, "worker-0")->restarts, 0);
	/* rank 0 is on whichever node joined the last rendezvous first: the
	 * relaunched instance of worker-1 writes its own log (the master's
	 * node.log_dir holds one <instance>.log per launch) */
	ck_assert_str_eq(n1->instance, "worker-1.1");
	char relaunched[700];
	snprintf(relaunched, sizeof(relaunched), "%s/nodes/%s.log", m.state, n1->instance);
	const char *ends[] = { logs[0], relaunched };
	bool finished = false;
	for (int i = 0; i < 2 && !finished; i++) {
		char *t = rv_test_read_file(ends[i]);
		finished = t && strstr(t, "test_accuracy=");
		free(t);
	}
	if (!finished) {
		char cmd[700];
		snprintf(cmd, sizeof(cmd), "tail -n 25 %s/nodes/*.log >&2", m.state);
		if (system(cmd) != 0)
			fprintf(stderr, "no node logs\n");
	}
	ck_assert_msg(finished, "rank 0 never finished training");
	rv_master_client_free(c);
	rv_test_master_cleanup(&m);
}
END_TEST

/* rover-run as the master's node program (local scheduler, no cgroups),
 * its workers starting processes of their own (one in a session of its
 * own, DataLoader workers): a kill -9 of that rover-run leaves none of them
 * 2 s later. */
START_TEST(test_agent_kill9_leaves_no_process)
{
	char bin[PATH_MAX], run[PATH_MAX + 16], script[400];
	const char *dir = getenv("ROVER_BIN_DIR") ? getenv("ROVER_BIN_DIR") : "build/bin";
	ck_assert_ptr_nonnull(realpath(dir, bin));
	snprintf(run, sizeof(run), "%s/rover-run", bin);
	struct rv_test_run tmp; /* a temp folder for the script */
	ck_assert_int_eq(rv_test_run_init(&tmp), 0);
	ck_assert_int_eq(rv_test_run_file(&tmp, "orphans.py", rv_test_orphans_script, script,
					  sizeof(script)),
			 0);
	char *spec = NULL;
	ck_assert_int_ge(
		asprintf(&spec,
			 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
			 "\"metadata\":{\"name\":\"agent-orphans\"},"
			 "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
			 "\"optimizeMode\":\"manual\","
			 "\"replicaSpecs\":{\"worker\":{\"replicas\":1,\"minReplicas\":1,"
			 "\"maxReplicas\":1,\"restartCount\":0,\"command\":[\"%s\","
			 "\"--nproc-per-node\",\"2\",\"%s\"]}},"
			 "\"datasets\":[{\"name\":\"d\",\"size\":64,\"shardSize\":64}]}}",
			 run, script),
		0);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	setenv("PYTHON_EXEC", "/usr/bin/python3", 1); /* the node inherits it */
	/* no cgroups: in one the scheduler kills what a dead node left (what
	 * a master without a writable cgroup tree cannot), and this is about
	 * rover-run's own guarantee */
	const char *margs[] = { "--scheduler",   "local",  "--linger-s", "1",
				"--node-limits", "rlimit", NULL };
	ck_assert_int_eq(rv_test_master_start(&m, margs), 0);
	struct rv_master_client *c = rv_test_master_client(&m);
	ck_assert_ptr_nonnull(c);
	char log[600];
	snprintf(log, sizeof(log), "%s/nodes/worker-0.log", m.state);
	bool ready = false;
	for (int64_t until = rv_mono_ms() + 120000; !ready && rv_mono_ms() < until;) {
		char *t = rv_test_read_file(log);
		ready = t && strstr(t, "[rank0]:ready") && strstr(t, "[rank1]:ready");
		free(t);
		if (!ready)
			usleep(100 * 1000);
	}
	ck_assert_msg(ready, "the workers never got ready (see %s)", log);
	static struct rv_job_status js;
	ck_assert_int_eq(rv_master_job(c, &js, NULL), 0);
	const struct rv_node_status *n0 = node_named(&js, "worker-0");
	ck_assert_ptr_nonnull(n0);
	ck_assert_int_gt(n0->pid, 0);
	struct rv_test_pid tree[64];
	int n = rv_test_proc_tree(n0->pid, tree, 64), setsid = 0;
	for (int i = 1; i < n; i++)
		setsid += tree[i].sid == tree[i].pid;
	ck_assert_int_ge(n, 7); /* rover-run, 2 workers, 2 sleeps, 2 DataLoader workers */
	ck_assert_int_ge(setsid, 1);

	ck_assert_int_eq(kill(n0->pid, SIGKILL), 0);
	usleep(2000 * 1000);
	int left = rv_test_proc_alive(tree, n);
	for (int i = 0; i < n; i++)
		if (rv_test_proc_alive(&tree[i], 1))
			kill(tree[i].pid, SIGKILL); /* a failing run's */
	ck_assert_msg(left == 0, "%d of %d process(es) of the node left 2 s after kill -9", left,
		      n);
	rv_master_client_free(c);
	rv_test_master_cleanup(&m);
	rv_test_run_cleanup(&tmp);
}
END_TEST

RV_TEST_MAIN_TCASE("run_elastic", "elastic", 360, test_nnodes_1_3_join_late_and_leave,
		   test_agent_kill9_relaunched_same_rank, test_agent_kill9_leaves_no_process,
		   test_finished_node_silence_keeps_the_world)
