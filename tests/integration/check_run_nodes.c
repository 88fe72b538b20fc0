/*
 * check_run_nodes.c: recovery across nodes under rover-run (the real
 * binary, real PyTorch DDP on gloo, one rover-master): two and three nodes
 * on this machine, one worker each, a worker killed with SIGKILL on a node
 * other than 0 and on node 0 (whose rover-run hosts the workers' store).
 * Each time the job ends with the model a run without failures reaches
 * (its checkpoint taken every step and each step's data drawn from its
 * number: no step lost or trained twice), the new workers are clients of
 * rover-run's store (TORCHELASTIC_USE_AGENT_STORE=True), none waited
 * torch's connect retry (torch's own trace, TORCH_DISTRIBUTED_DEBUG=DETAIL,
 * says "is not yet listening" when one does), and the nodes whose worker
 * lived stopped it on the master's word (by=watch), not on a failed
 * collective.  A spare (a rover-run beyond the world's size) takes the
 * place of a node whose rover-run was killed, forked from its warm
 * interpreter; with --network-check the other nodes' workers wait for node
 * 0's store.  The netns cases run the same with each node in its own
 * network namespace and address, the master on a bridge (netnsfix.h), so
 * the store, the world watch and the spare's join cross a link; netns_delay
 * delays node 1's link by 20 ms each way and prints the recovery time.
 * hang: a node whose rank prints nothing is not called hung.  Needs
 * /usr/bin/python3 with torch (and for the netns cases root and iproute2).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brainfix.h"
#include "masterfix.h"
#include "netnsfix.h"
#include "parse.h"
#include "runfix.h"
#include "testutil.h"

#define STEPS 60

/* argv: CKPT STEPS, or CKPT STEPS ref WORLD for the run without failures */
static const char script[] =
	"import os, sys, time, torch, torch.distributed as dist\n"
	"ckpt, steps = sys.argv[1], int(sys.argv[2])\n"
	"def batch(step, rank):\n"
	"    g = torch.Generator().manual_seed(step * 1000 + rank)\n"
	"    return torch.randn(16, 8, generator=g), torch.randn(16, 4, generator=g)\n"
	"def final(m):\n"
	"    v = torch.cat([p.detach().flatten() for p in m.parameters()]).tolist()\n"
	"    print('final ' + ' '.join('%.7e' % x for x in v), flush=True)\n"
	"torch.manual_seed(0)\n"
	"model = torch.nn.Linear(8, 4)\n"
	"opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)\n"
	"mse = torch.nn.functional.mse_loss\n"
	"if len(sys.argv) > 3:\n"
	"    world = int(sys.argv[4])\n"
	"    for step in range(steps):\n"
	"        opt.zero_grad()\n"
	"        sum(mse(model(x), y) for x, y in (batch(step, r) for r in range(world)))\\\n"
	"            .div(world).backward()\n"
	"        opt.step()\n"
	"    final(model)\n"
	"    sys.exit(0)\n"
	"print('start rank=%s agent_store=%s t=%.6f' % (os.environ['RANK'],\n"
	"      os.environ.get('TORCHELASTIC_USE_AGENT_STORE'), time.time()), flush=True)\n"
	"dist.init_process_group('gloo')\n"
	"rank = dist.get_rank()\n"
	"start = 0\n"
	"if os.path.exists(ckpt):\n"
	"    st = torch.load(ckpt)\n"
	"    model.load_state_dict(st['model'])\n"
	"    opt.load_state_dict(st['opt'])\n"
	"    start = st['step'] + 1\n"
	"print('pg rank=%d from=%d t=%.6f' % (rank, start, time.time()), flush=True)\n"
	"ddp = torch.nn.parallel.DistributedDataParallel(model)\n"
	"for step in range(start, steps):\n"
	"    x, y = batch(step, rank)\n"
	"    opt.zero_grad()\n"
	"    mse(ddp(x), y).backward()\n"
	"    opt.step()\n"
	"    if rank == 0:\n"
	"        torch.save({'step': step, 'model': model.state_dict(),\n"
	"                    'opt': opt.state_dict()}, ckpt + '.tmp')\n"
	"        os.replace(ckpt + '.tmp', ckpt)\n"
	"    print('step=%d rank=%d t=%.6f' % (step, rank, time.time()), flush=True)\n"
	"    while step == 25 and not os.path.exists(ckpt + '.go'):\n"
	"        time.sleep(0.02)\n"
	"    time.sleep(0.05)\n"
	"if rank == 0:\n"
	"    final(model)\n"
	"dist.destroy_process_group()\n";

/* The parameters a "final" line lists, into v (at most max); the count. */
static int parse_final(const char *text, double *v, int max)
{
	const char *p = strstr(text, "final ");
	int n = 0;
	if (!p)
		return 0;
	p += 6;
	while (n < max && *p && *p != '\n') {
		char *end;
		v[n] = strtod(p, &end);
		if (end == p)
			break;
		n++;
		p = end;
	}
	return n;
}

/* Whether a worker started from the checkpoint ("pg ... from=N", N > 0). */
static int resumed(const char *out)
{
	for (const char *p = strstr(out, " from="); p; p = strstr(p + 1, " from="))
		if (atoi(p + 6) > 0)
			return 1;
	return 0;
}

/* The run without failures, in one process: its parameters. */
static int reference(const char *path, int world, int steps, double *v, int max)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s /nonexistent %d ref %d", path, steps,
		 world);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	char out[8192];
	size_t k = fread(out, 1, sizeof(out) - 1, p);
	out[k] = 0;
	ck_assert_int_eq(pclose(p), 0);
	return parse_final(out, v, max);
}

/* One recovery: agents rover-runs of one worker against one master whose
 * world takes min..max nodes, started in order (node i is group rank i,
 * those past max wait as spares); once step 20 is logged and every node's
 * warm interpreter is ready, kill node victim's worker, or with agent its
 * rover-run itself (its workers die with it). */
struct rec {
	int agents, min, max, victim, steps;
	bool agent;    /* kill -9 of the victim's rover-run, not its worker */
	bool netcheck; /* --network-check on every node */
	bool relaunch; /* start a new rover-run in the victim's place */
	bool netns;    /* node i in namespace i of net, the master on its bridge */
	int delay_ms;  /* with netns: the victim's link delays each packet so long */
};

struct rec_run {
	struct rv_test_master m;
	struct rv_test_run r[4];
	char dir[32], path[128], ckpt[128];
	const char *margs[4];
	double kill_t; /* wall-clock seconds */
};

static struct rv_test_netns net; /* the netns cases' hosts */

static void rec_start(const struct rec *c, struct rec_run *x, int i)
{
	char nn[16], steps[16], gloo_if[48];
	snprintf(nn, sizeof(nn), "%d:%d", c->min, c->max);
	snprintf(steps, sizeof(steps), "%d", c->steps);
	snprintf(gloo_if, sizeof(gloo_if), "GLOO_SOCKET_IFNAME=%s", net.veth_ns[i]);
	const char *env[] = { "TORCH_CPP_LOG_LEVEL=INFO", "TORCH_DISTRIBUTED_DEBUG=DETAIL",
			      c->netns ? gloo_if : NULL, NULL };
	const char *args[24] = { "--nnodes",           nn,  "--nproc-per-node", "1",
				 "--max-restarts",     "2", "--rdzv-endpoint",  x->m.addr,
				 "--monitor-interval", "5" };
	int n = 10;
	if (c->netcheck)
		args[n++] = "--network-check";
	if (c->netns) {
		args[n++] = "--local-addr";
		args[n++] = net.addr[i];
	}
	args[n++] = x->path;
	args[n++] = x->ckpt;
	args[n++] = steps;
	args[n] = NULL;
	ck_assert_int_eq(rv_test_run_init(&x->r[i]), 0);
	if (c->netns)
		x->r[i].wrap = net.wrap[i];
	int rc = rv_test_run_start_joined(&x->r[i], args, env, 60000);
	if (rc < 0)
		rv_test_run_dump(x->r, i + 1, x->m.log);
	ck_assert_msg(rc == 0, "node %d did not join: %s", i, strerror(-rc));
}

/* The master: on loopback, or for the netns cases on the bridge, where
 * every node's namespace reaches it. */
static void rec_master(const struct rec *c, struct rec_run *x)
{
	if (!c->netns) {
		ck_assert_int_eq(rv_test_master_start(&x->m, NULL), 0);
		return;
	}
	int k = snprintf(x->m.addr, sizeof(x->m.addr), "%s:%d", net.addr_root, x->m.port);
	ck_assert_int_lt(k, (int)sizeof(x->m.addr));
	snprintf(x->m.url, sizeof(x->m.url), "http://%s", x->m.addr);
	x->margs[0] = "--listen";
	x->margs[1] = x->m.addr;
	x->margs[2] = NULL;
	ck_assert_int_eq(rv_test_master_start(&x->m, x->margs), 0);
}

/* Start the job and kill the victim mid-run, warm: false when skipped. */
static bool rec_begin(const struct rec *c, struct rec_run *x)
{
	if (system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") != 0) {
		RV_TEST_SKIP(true, "/usr/bin/python3 cannot import torch");
		return false;
	}
	if (c->netns && net.skip[0]) {
		RV_TEST_SKIP(true, "%s", net.skip);
		return false;
	}
	/* sch_netem and /dev/net/tun are the kernel's, not packages CI installs */
	if (c->delay_ms > 0 && rv_test_netns_delay(&net, c->victim, c->delay_ms) < 0) {
		RV_TEST_SKIP(false, "could not delay a link here (no sch_netem, no TAP devices)");
		return false;
	}
	snprintf(x->dir, sizeof(x->dir), "/tmp/rv-nodes-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(x->dir));
	snprintf(x->path, sizeof(x->path), "%s/ddp.py", x->dir);
	snprintf(x->ckpt, sizeof(x->ckpt), "%s/model.pt", x->dir);
	FILE *f = fopen(x->path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(script, f);
	fclose(f);
	/* a world below max: both nodes in the first round however slowly the
	 * second starts; the rounds this test is about need no last call */
	if (c->min < c->max)
		setenv("ROVER_RDZV_LAST_CALL_MS", "30000", 1);
	char *spec = rv_test_master_spec(1000, 10, 1, c->min, c->max);
	ck_assert_int_eq(rv_test_master_init(&x->m, spec), 0);
	free(spec);
	rec_master(c, x);
	for (int i = 0; i < c->agents; i++)
		rec_start(c, x, i);
	/* mid-run, warm: the restarted workers fork from the warm interpreter */
	int64_t until = rv_mono_ms() + 120000;
	while (!rv_test_run_wait_for(&x->r[0], 1, "[rank0]:step=20 ", 0) && rv_mono_ms() < until)
		usleep(20 * 1000);
	for (int i = 0; i < c->agents; i++)
		ck_assert(rv_test_run_wait_for(&x->r[i], 2, "warm interpreter ready", 60000));
	/* the workers hold at step 25 until then, however slow the imports */
	char go[160];
	snprintf(go, sizeof(go), "%s.go", x->ckpt);
	FILE *g = fopen(go, "w");
	ck_assert_ptr_nonnull(g);
	fclose(g);
	x->kill_t = (double)rv_now_ms() / 1000.0;
	if (c->agent) {
		ck_assert_int_eq(kill(x->r[c->victim].proc.pid, SIGKILL), 0);
		return true;
	}
	pid_t w[2];
	int nw = rv_test_run_workers(&x->r[c->victim], x->r[c->victim].proc.pid, -1, w, 2);
	if (nw == 0) /* its first worker forked warm (after a network check) */
		nw = (w[0] = rv_test_run_last_worker(&x->r[c->victim])) > 0;
	ck_assert_int_eq(nw, 1);
	ck_assert_int_eq(kill(w[0], SIGKILL), 0);
	return true;
}

static void rec_end(const struct rec *c, struct rec_run *x)
{
	for (int i = 0; i < c->agents + c->relaunch; i++)
		rv_test_run_cleanup(&x->r[i]);
	rv_test_master_cleanup(&x->m);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", x->dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* The wall-clock time of the first "step=" line of rank in out logged
 * after t, or 0. */
static double step_after(const char *out, int rank, double t)
{
	char key[32];
	snprintf(key, sizeof(key), "step=");
	for (const char *p = strstr(out, key); p; p = strstr(p + 1, key)) {
		int step, rk;
		double ts;
		if (sscanf(p, "step=%d rank=%d t=%lf", &step, &rk, &ts) == 3 && rk == rank &&
		    ts > t)
			return ts;
	}
	return 0;
}

/* Seconds from the kill to the first step of the new world: the first
 * step rank 0 logs after the last "pg" line (a process group of the new
 * world) of the nodes' outputs outs[0..n); -1 when there is none. */
static double next_step_s(char *const *outs, int n, double kill_t)
{
	double pg = 0;
	for (int i = 0; i < n; i++)
		for (const char *p = strstr(outs[i], "pg rank="); p;
		     p = strstr(p + 1, "pg rank=")) {
			const char *t = strstr(p, " t=");
			double ts = t ? strtod(t + 3, NULL) : 0;
			if (ts > kill_t && ts > pg)
				pg = ts;
		}
	for (int i = 0; pg > 0 && i < n; i++) {
		double t = step_after(outs[i], 0, pg);
		if (t > 0)
			return t - kill_t;
	}
	return -1;
}

/* A worker killed: the job ends with the model a run without failures
 * reaches, as the file's header says. */
static void recover(const struct rec *c)
{
	struct rec_run x;
	if (!rec_begin(c, &x))
		return;
	int n = c->max;
	for (int i = 0; i < c->agents; i++)
		if (!(c->agent && i == c->victim))
			free(rv_test_run_expect_exit(&x.r[i], 0, 120000));
	double want[64], got[64];
	int nw = reference(x.path, n, c->steps, want, 64);
	ck_assert_int_eq(nw, 36); /* Linear(8, 4): 32 weights, 4 biases */
	int ng = 0, watched = 0, restarted = 0, nouts = 0;
	char *outs[4];
	for (int i = 0; i < c->agents; i++) {
		if (c->agent && i == c->victim)
			continue;
		char *out = rv_test_run_output(&x.r[i], 1), *err = rv_test_run_output(&x.r[i], 2);
		if (i == 0)
			ng = parse_final(out, got, 64);
		ck_assert_msg(!strstr(out, "is not yet listening") &&
				      !strstr(err, "is not yet listening"),
			      "node %d waited torch's connect retry:\n%s", i, err);
		ck_assert_msg(!strstr(out, "agent_store=False") && strstr(out, "agent_store=True"),
			      "%s", out);
		restarted += resumed(out);
		if (i != c->victim && !(c->agent && i == c->agents - 1))
			watched += strstr(err,
					  "msg=\"the world changes: rendezvous again\" round=1 "
					  "by=watch") != NULL;
		if (c->agent && i == c->agents - 1) {
			/* the spare: forked from its warm interpreter, never cold,
			 * training in the time the heartbeat timeout alone (5 s)
			 * takes to tell (a relaunch would import torch first) */
			ck_assert_msg(strstr(err, "start=warm") && !strstr(err, "start=cold"), "%s",
				      err);
			double t = step_after(out, c->victim, x.kill_t);
			ck_assert_msg(t > 0, "the spare never trained as rank %d", c->victim);
			ck_assert_msg(t - x.kill_t < 5.0,
				      "the spare's first step %.3f s after the kill", t - x.kill_t);
		}
		if (c->netcheck && i > 0)
			ck_assert_msg(strstr(err, "msg=\"node 0's store answers\""),
				      "node %d started its workers without node 0's store", i);
		outs[nouts++] = out;
		free(err);
	}
	double next = next_step_s(outs, nouts, x.kill_t);
	printf("check_run_nodes: %s nodes=%d victim=%d%s delay_ms=%d: kill -9 to the next "
	       "step %.3f s\n",
	       c->netns ? "netns" : "loopback", n, c->victim, c->agent ? " (rover-run)" : "",
	       c->delay_ms, next);
	ck_assert_msg(next > 0, "no step of the new world");
	for (int i = 0; i < nouts; i++)
		free(outs[i]);
	ck_assert_int_eq(ng, nw);
	for (int i = 0; i < nw; i++)
		ck_assert_msg(got[i] - want[i] < 1e-4 && want[i] - got[i] < 1e-4,
			      "parameter %d: %.7e, a run without failures %.7e", i, got[i],
			      want[i]);
	/* every node of the new world resumed from the checkpoint */
	ck_assert_int_eq(restarted, n);
	ck_assert_int_eq(watched, n - 1);
	if (c->agent) {
		char *log = rv_test_read_file(x.m.log);
		ck_assert_msg(log && strstr(log, "msg=\"node lost: its world watch closed\""), "%s",
			      log ? log : "");
		free(log);
	}
	rec_end(c, &x);
}

START_TEST(test_two_nodes_kill_on_node1)
{
	recover(&(struct rec){ .agents = 2, .min = 2, .max = 2, .victim = 1, .steps = STEPS });
}
END_TEST

START_TEST(test_two_nodes_kill_on_store_host)
{
	recover(&(struct rec){ .agents = 2, .min = 2, .max = 2, .victim = 0, .steps = STEPS });
}
END_TEST

START_TEST(test_three_nodes_kill_on_node2)
{
	recover(&(struct rec){ .agents = 3, .min = 3, .max = 3, .victim = 2, .steps = STEPS });
}
END_TEST

START_TEST(test_three_nodes_kill_on_store_host)
{
	recover(&(struct rec){ .agents = 3, .min = 3, .max = 3, .victim = 0, .steps = STEPS });
}
END_TEST

/* kill -9 of node 1's rover-run with a spare (a third rover-run, the world
 * taking two): the spare takes rank 1 at once, from its warm interpreter. */
START_TEST(test_spare_replaces_lost_node)
{
	recover(&(struct rec){
		.agents = 3, .min = 2, .max = 2, .victim = 1, .steps = 200, .agent = true });
}
END_TEST

/* No spare, the world 1..2 nodes: kill -9 of node 1's rover-run shrinks
 * the world to node 0 at once (no heartbeat timeout, no last call), and a
 * new rover-run in its place joins once its warm interpreter is ready,
 * growing the world back; every start resumes from the checkpoint. */
START_TEST(test_no_spare_shrinks_and_grows)
{
	struct rec c = { .agents = 2,
			 .min = 1,
			 .max = 2,
			 .victim = 1,
			 .steps = 400,
			 .agent = true,
			 .relaunch = true };
	struct rec_run x;
	if (!rec_begin(&c, &x))
		return;
	ck_assert(rv_test_run_wait_for(&x.r[0], 2, "nnodes=1 world_size=1", 60000));
	char *out = NULL;
	double t = 0;
	for (int64_t until = rv_mono_ms() + 30000; t == 0 && rv_mono_ms() < until;) {
		usleep(20 * 1000);
		free(out);
		out = rv_test_run_output(&x.r[0], 1);
		t = step_after(out, 0, x.kill_t);
	}
	free(out);
	double after = t > 0 ? t - x.kill_t : -1.0;
	ck_assert_msg(t > 0 && after < 5.0, "node 0 alone trained %.3f s after the kill", after);
	rec_start(&c, &x, 2);
	for (int i = 0; i < 3; i += 2)
		free(rv_test_run_expect_exit(&x.r[i], 0, 180000));
	char *err = rv_test_run_output(&x.r[2], 2);
	const char *wait =
		strstr(err, "a world trains: joining once the warm interpreter is ready");
	const char *ready = wait ? strstr(wait, "msg=\"warm interpreter ready\"") : NULL;
	const char *joined = ready ? strstr(ready, "msg=\"joined the rendezvous\"") : NULL;
	ck_assert_msg(joined && strstr(joined, "start=warm") && !strstr(err, "start=cold"), "%s",
		      err);
	free(err);
	err = rv_test_run_output(&x.r[0], 2);
	const char *shrunk = strstr(err, "nnodes=1 world_size=1");
	ck_assert_msg(shrunk && strstr(shrunk, "nnodes=2 world_size=2"), "%s", err);
	free(err);
	out = rv_test_run_output(&x.r[0], 1);
	int from = 0;
	for (const char *p = strstr(out, " from="); p; p = strstr(p + 1, " from="))
		from += atoi(p + 6) > 0;
	ck_assert_msg(from >= 2, "%s", out); /* shrunk, then grown: both from the checkpoint */
	free(out);
	out = rv_test_run_output(&x.r[2], 1);
	ck_assert_int_eq(resumed(out), 1);
	free(out);
	rec_end(&c, &x);
}
END_TEST

/* --network-check: node 0's store listens once its check is over, and the
 * other node's workers start once it answers: none waits torch's retry. */
START_TEST(test_network_check_store_ready)
{
	recover(&(struct rec){
		.agents = 2, .min = 2, .max = 2, .victim = 1, .steps = STEPS, .netcheck = true });
}
END_TEST

/* Rank 0 prints all along (from before it imports torch), rank 1 only
 * once: a script that logs on rank 0 alone.  argv: STEPS. */
static const char quiet_script[] =
	"import os, subprocess, sys, time\n"
	"rank = int(os.environ['RANK'])\n"
	"if rank == 0:  # a process of its own: not held by the import's GIL\n"
	"    ticker = subprocess.Popen(['sh', '-c', 'while :; do echo alive; sleep 0.2; done'])\n"
	"else:\n"
	"    print('rank 1 up', flush=True)\n"
	"import torch, torch.distributed as dist\n"
	"dist.init_process_group('gloo')\n"
	"t = torch.ones(1)\n"
	"for step in range(int(sys.argv[1])):\n"
	"    dist.all_reduce(t)\n"
	"    time.sleep(0.1)\n"
	"dist.destroy_process_group()\n"
	"if rank == 0:\n"
	"    ticker.kill()\n";

/* --hang-timeout 4 on both nodes, rank 1 silent past it while the world
 * trains: no node calls that a hang (node 1's did, and stopped the job). */
START_TEST(test_hang_check_quiet_node)
{
	if (system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") != 0) {
		RV_TEST_SKIP(true, "/usr/bin/python3 cannot import torch");
		return;
	}
	struct rv_test_master m;
	struct rv_test_run r[2];
	char *spec = rv_test_master_spec(1000, 10, 1, 2, 2);
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	ck_assert_int_eq(rv_test_master_start(&m, NULL), 0);
	for (int i = 0; i < 2; i++) {
		char path[400];
		ck_assert_int_eq(rv_test_run_init(&r[i]), 0);
		ck_assert_int_eq(rv_test_run_file(&r[i], "quiet.py", quiet_script, path,
						  sizeof(path)),
				 0);
		const char *args[] = { "--nnodes",
				       "2",
				       "--nproc-per-node",
				       "1",
				       "--max-restarts",
				       "0",
				       "--hang-timeout",
				       "4",
				       "--rdzv-endpoint",
				       m.addr,
				       path,
				       "100",
				       NULL };
		ck_assert_int_eq(rv_test_run_start_joined(&r[i], args, NULL, 60000), 0);
	}
	for (int i = 1; i >= 0; i--) { /* node 1 first: it is the one that stopped */
		char *err = rv_test_run_expect_exit(&r[i], 0, 180000);
		ck_assert_msg(!strstr(err, "worker hangs"), "node %d:\n%s", i, err);
		free(err);
	}
	char *out = rv_test_run_output(&r[1], 1);
	ck_assert_msg(!strstr(out, "alive"), "%s", out); /* rank 1 said nothing more */
	free(out);
	for (int i = 0; i < 2; i++)
		rv_test_run_end(&r[i]);
	rv_test_master_cleanup(&m);
}
END_TEST

/* ---- the same across network namespaces: node i in namespace i of net,
 * its own address (--local-addr), the master on the bridge: the store,
 * the world watch and the spare's join cross the veths. ---- */

START_TEST(test_netns_two_nodes_kill_on_node1)
{
	recover(&(struct rec){
		.agents = 2, .min = 2, .max = 2, .victim = 1, .steps = STEPS, .netns = true });
}
END_TEST

START_TEST(test_netns_two_nodes_kill_on_store_host)
{
	recover(&(struct rec){
		.agents = 2, .min = 2, .max = 2, .victim = 0, .steps = STEPS, .netns = true });
}
END_TEST

START_TEST(test_netns_three_nodes_kill_on_store_host)
{
	recover(&(struct rec){
		.agents = 3, .min = 3, .max = 3, .victim = 0, .steps = STEPS, .netns = true });
}
END_TEST

START_TEST(test_netns_spare_replaces_lost_node)
{
	recover(&(struct rec){ .agents = 3,
			       .min = 2,
			       .max = 2,
			       .victim = 1,
			       .steps = 200,
			       .agent = true,
			       .netns = true });
}
END_TEST

/* node 1's link delays every packet 20 ms each way (tc netem): the
 * recovery still needs no connect retry, and its time is printed */
START_TEST(test_netns_delay_kill_on_node1)
{
	recover(&(struct rec){ .agents = 2,
			       .min = 2,
			       .max = 2,
			       .victim = 1,
			       .steps = STEPS,
			       .netns = true,
			       .delay_ms = 20 });
}
END_TEST

/* Parent, before the netns cases fork: three hosts on a bridge. */
static void nodes_netns_up(void)
{
	rv_test_netns_up(&net, "rover-nodes", 3);
}

/* Parent, after them, whatever they did. */
static void nodes_netns_down(void)
{
	rv_test_netns_down(&net);
}

static Suite *run_nodes_suite(void)
{
	TCase *tc = RV_TEST_TCASE("core", 300, test_two_nodes_kill_on_node1,
				  test_two_nodes_kill_on_store_host, test_three_nodes_kill_on_node2,
				  test_three_nodes_kill_on_store_host);
	TCase *ts = RV_TEST_TCASE("spares", 300, test_spare_replaces_lost_node,
				  test_network_check_store_ready, test_no_spare_shrinks_and_grows);
	TCase *th = RV_TEST_TCASE("hang", 300, test_hang_check_quiet_node);
	TCase *tn = RV_TEST_TCASE("netns", 300, test_netns_two_nodes_kill_on_node1,
				  test_netns_two_nodes_kill_on_store_host,
				  test_netns_three_nodes_kill_on_store_host,
				  test_netns_spare_replaces_lost_node);
	tcase_add_unchecked_fixture(tn, nodes_netns_up, nodes_netns_down);
	/* its own case: a relayed link (no sch_netem) goes with the test */
	TCase *td = RV_TEST_TCASE("netns_delay", 300, test_netns_delay_kill_on_node1);
	tcase_add_unchecked_fixture(td, nodes_netns_up, nodes_netns_down);
	return RV_TEST_SUITE("run_nodes", tc, ts, th, tn, td);
}

RV_TEST_MAIN(run_nodes_suite)
