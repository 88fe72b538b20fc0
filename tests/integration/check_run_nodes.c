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
 * collective.  Needs /usr/bin/python3 with torch.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "masterfix.h"
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
static int reference(const char *path, int world, double *v, int max)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s /nonexistent %d ref %d", path, STEPS,
		 world);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	char out[8192];
	size_t k = fread(out, 1, sizeof(out) - 1, p);
	out[k] = 0;
	ck_assert_int_eq(pclose(p), 0);
	return parse_final(out, v, max);
}

/* n nodes of one worker against one master, started in order (node i is
 * group rank i); kill the worker of node victim once step 20 is logged,
 * then check the recovery as the file's header says. */
static void recover(int n, int victim)
{
	if (system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") != 0) {
		RV_TEST_SKIP(true, "/usr/bin/python3 cannot import torch");
		return;
	}
	char dir[] = "/tmp/rv-nodes-XXXXXX", path[128], ckpt[128], ep[64], steps[16];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/ddp.py", dir);
	snprintf(ckpt, sizeof(ckpt), "%s/model.pt", dir);
	snprintf(steps, sizeof(steps), "%d", STEPS);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(script, f);
	fclose(f);
	struct rv_test_master m;
	char *spec = rv_test_master_spec(1000, 10, 1, n, n);
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	ck_assert_int_eq(rv_test_master_start(&m, NULL), 0);
	snprintf(ep, sizeof(ep), "127.0.0.1:%d", m.port);
	struct rv_test_run r[3];
	const char *env[] = { "TORCH_CPP_LOG_LEVEL=INFO", "TORCH_DISTRIBUTED_DEBUG=DETAIL", NULL };
	char nn[8];
	snprintf(nn, sizeof(nn), "%d", n);
	for (int i = 0; i < n; i++) {
		const char *args[] = { "--nnodes",
				       nn,
				       "--nproc-per-node",
				       "1",
				       "--max-restarts",
				       "2",
				       "--rdzv-endpoint",
				       ep,
				       path,
				       ckpt,
				       steps,
				       NULL };
		ck_assert_int_eq(rv_test_run_init(&r[i]), 0);
		ck_assert_int_eq(rv_test_run_start_joined(&r[i], args, env, 60000), 0);
	}
	/* mid-run, warm: the restarted workers fork from the warm interpreter */
	int64_t until = rv_mono_ms() + 120000;
	while (!rv_test_run_wait_for(&r[0], 1, "[rank0]:step=20 ", 0) && rv_mono_ms() < until)
		usleep(20 * 1000);
	for (int i = 0; i < n; i++)
		ck_assert(rv_test_run_wait_for(&r[i], 2, "warm interpreter ready", 60000));
	pid_t w[2];
	ck_assert_int_eq(rv_test_run_workers(&r[victim], r[victim].proc.pid, -1, w, 2), 1);
	ck_assert_int_eq(kill(w[0], SIGKILL), 0);
	for (int i = 0; i < n; i++)
		free(rv_test_run_expect_exit(&r[i], 0, 120000));
	double want[64], got[64];
	int nw = reference(path, n, want, 64);
	ck_assert_int_eq(nw, 36); /* Linear(8, 4): 32 weights, 4 biases */
	int ng = 0, watched = 0, restarted = 0;
	for (int i = 0; i < n; i++) {
		char *out = rv_test_run_output(&r[i], 1), *err = rv_test_run_output(&r[i], 2);
		if (i == 0)
			ng = parse_final(out, got, 64);
		ck_assert_msg(!strstr(out, "is not yet listening") &&
				      !strstr(err, "is not yet listening"),
			      "node %d waited torch's connect retry:\n%s", i, err);
		ck_assert_msg(!strstr(out, "agent_store=False") && strstr(out, "agent_store=True"),
			      "%s", out);
		restarted += resumed(out);
		if (i != victim)
			watched += strstr(err,
					  "msg=\"the world changes: rendezvous again\" round=1 "
					  "by=watch") != NULL;
		free(out);
		free(err);
	}
	ck_assert_int_eq(ng, nw);
	for (int i = 0; i < nw; i++)
		ck_assert_msg(got[i] - want[i] < 1e-4 && want[i] - got[i] < 1e-4,
			      "parameter %d: %.7e, a run without failures %.7e", i, got[i],
			      want[i]);
	ck_assert_int_eq(restarted, n); /* every node resumed from the checkpoint */
	ck_assert_int_eq(watched, n - 1);
	for (int i = 0; i < n; i++)
		rv_test_run_cleanup(&r[i]);
	rv_test_master_cleanup(&m);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	ck_assert_int_eq(system(path), 0);
}

START_TEST(test_two_nodes_kill_on_node1)
{
	recover(2, 1);
}
END_TEST

START_TEST(test_two_nodes_kill_on_store_host)
{
	recover(2, 0);
}
END_TEST

START_TEST(test_three_nodes_kill_on_node2)
{
	recover(3, 2);
}
END_TEST

START_TEST(test_three_nodes_kill_on_store_host)
{
	recover(3, 0);
}
END_TEST

static Suite *run_nodes_suite(void)
{
	Suite *s = suite_create("run_nodes");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_two_nodes_kill_on_node1);
	tcase_add_test(tc, test_two_nodes_kill_on_store_host);
	tcase_add_test(tc, test_three_nodes_kill_on_node2);
	tcase_add_test(tc, test_three_nodes_kill_on_store_host);
	suite_add_tcase(s, tc);
	return s;
}

RV_TEST_MAIN(run_nodes_suite)
