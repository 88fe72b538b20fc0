/*
 * check_run_netns.c: rover-run on two "hosts".  A bridge in the root
 * network namespace carries the rover-master's address (.1); each of two
 * nodes runs in its own network namespace behind a veth pair enslaved to
 * the bridge (.2 and .3), and rover-run there is started with `ip netns
 * exec NS rover-run --nnodes 2 --nproc-per-node 1 --rdzv-endpoint
 * MASTER:PORT --local-addr NODE_IP`.  The workers' gloo traffic goes from
 * one namespace to the other over the veths (MASTER_ADDR is node 0's
 * namespace address; no GLOO_SOCKET_IFNAME is given: rover-run names the
 * veth that holds --local-addr to its workers, and the host name resolves
 * to a loopback address here).
 *
 *   - a small DDP job finishes on both nodes and both ranks end with the
 *     same parameters;
 *   - one node's link goes down mid-run: the master declares it dead
 *     within rdzv.heartbeat_timeout_ms plus a little; the surviving node
 *     is told the world changed, stops its worker, waits for a new world
 *     and, the master failing the round short of two nodes after
 *     rdzv.max_wait_s, exits 1 saying so; the cut-off node, its heartbeats
 *     unanswered for --rdzv-conf master_timeout, stops its worker too and
 *     exits 1 once no world formed within join_timeout.  Nobody hangs.
 *
 * Needs root and iproute2 (ip netns); without them it says why and passes.
 * Names are unique per run (the test's pid); the parent process removes the
 * namespaces, the links and the bridge after the tests, whatever happened.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "masterfix.h"
#include "netnsfix.h"
#include "parse.h"
#include "runfix.h"
#include "testutil.h"

#define HB_TIMEOUT_MS 2000 /* the master's; rover-run heartbeats every 1 s */
#define SLACK_MS      1000

static struct rv_test_netns net;

#define RUN RV_TEST_CMD

/* Parent, before the tests fork: the bridge, the namespaces, the veths. */
static void netns_setup(void)
{
	rv_test_netns_up(&net, "rover-run", 2);
}

/* Parent, after the tests, whatever they did. */
static void netns_teardown(void)
{
	rv_test_netns_down(&net);
}

/* A small DDP job: a linear model on fixed data; every step prints its
 * loss, the end the parameters' sum, identical on every rank when the
 * all-reduces really happened. */
static const char ddp_script[] =
	"import os, sys, time, torch, torch.distributed as dist\n"
	"steps, pause = int(sys.argv[1]), float(sys.argv[2])\n"
	"dist.init_process_group('gloo')\n"
	"rank, world = dist.get_rank(), dist.get_world_size()\n"
	"print('start rank=%d world=%d master_addr=%s' % (rank, world,\n"
	"      os.environ['MASTER_ADDR']), flush=True)\n"
	"torch.manual_seed(0)\n"
	"model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))\n"
	"opt = torch.optim.SGD(model.parameters(), lr=0.05)\n"
	"g = torch.Generator().manual_seed(1 + rank)\n"
	"x = torch.randn(64, 8, generator=g)\n"
	"y = x.sum(dim=1, keepdim=True)\n"
	"for step in range(1, steps + 1):\n"
	"    opt.zero_grad()\n"
	"    loss = torch.nn.functional.mse_loss(model(x), y)\n"
	"    loss.backward()\n"
	"    opt.step()\n"
	"    print('step=%d loss=%.4f' % (step, loss.item()), flush=True)\n"
	"    time.sleep(pause)\n"
	"s = sum(p.detach().double().sum().item() for p in model.parameters())\n"
	"print('done rank=%d world=%d params=%.9f' % (rank, world, s), flush=True)\n"
	"dist.destroy_process_group()\n";

struct job {
	struct rv_test_master m;
	struct rv_test_run r[2];
	char ep[64];
	const char *env[2][2];
};

/* A master on the bridge's address for two nodes (extra master args
 * margs), and a rover-run per namespace with rargs (before the script)
 * running the script with steps and pause. */
static void start_job(struct job *j, const char *const *margs, const char *const *rargs,
		      const char *steps, const char *pause)
{
	char *spec = rv_test_master_spec(1000, 10, 1, 2, 2);
	ck_assert_int_eq(rv_test_master_init(&j->m, spec), 0);
	free(spec);
	char listen[48];
	snprintf(listen, sizeof(listen), "%s:%d", net.addr_root, j->m.port);
	snprintf(j->m.url, sizeof(j->m.url), "http://%s", listen);
	snprintf(j->ep, sizeof(j->ep), "%s", listen);
	const char *args[24] = { "--listen", listen, "--timer-tick-ms", "20" };
	int n = 4;
	for (const char *const *a = margs; a && *a && n < 23; a++)
		args[n++] = *a;
	args[n] = NULL;
	ck_assert_int_eq(rv_test_master_start(&j->m, args), 0);

	for (int i = 0; i < 2; i++) {
		struct rv_test_run *r = &j->r[i];
		ck_assert_int_eq(rv_test_run_init(r), 0);
		char script[400];
		ck_assert_int_eq(rv_test_run_file(r, "ddp.py", ddp_script, script, sizeof(script)),
				 0);
		r->wrap = net.wrap[i];
		j->env[i][0] = "GLOO_SOCKET_IFNAME"; /* unset: rover-run's to name */
		j->env[i][1] = NULL;
		const char *argv[40] = { "--nnodes",        "2",   "--nproc-per-node", "1",
					 "--rdzv-endpoint", j->ep, "--local-addr",     net.addr[i] };
		int k = 8;
		for (const char *const *a = rargs; a && *a && k < 36; a++)
			argv[k++] = *a;
		argv[k++] = script;
		argv[k++] = steps;
		argv[k++] = pause;
		argv[k] = NULL;
		ck_assert_int_eq(rv_test_run_start(r, argv, j->env[i]), 0);
		/* node 0 joins first: it is group rank 0, MASTER_ADDR its address */
		if (i == 0)
			ck_assert_msg(rv_test_run_wait_for(r, 2, "joined the rendezvous", 30000),
				      "node 0 never joined");
	}
}

static void end_job(struct job *j)
{
	for (int i = 0; i < 2; i++)
		rv_test_run_end(&j->r[i]);
	rv_test_master_cleanup(&j->m);
}

/* What follows key's first occurrence in s, or NULL. */
static const char *after(const char *s, const char *key)
{
	const char *p = strstr(s, key);
	return p ? p + strlen(key) : NULL;
}

START_TEST(test_ddp_across_namespaces)
{
	if (net.skip[0]) {
		RV_TEST_SKIP(true, "%s", net.skip);
		return;
	}
	struct job j;
	start_job(&j, NULL, NULL, "30", "0");
	char *out[2], master_addr[64];
	snprintf(master_addr, sizeof(master_addr), "world=2 master_addr=%s\n", net.addr[0]);
	for (int i = 0; i < 2; i++) {
		free(rv_test_run_expect_exit(&j.r[i], 0, 90000));
		out[i] = rv_test_run_output(&j.r[i], 1);
		/* the store and gloo ran on node 0's namespace address */
		ck_assert_msg(strstr(out[i], master_addr), "%s", out[i]);
		/* through the veth holding --local-addr, which rover-run named */
		char named[96];
		snprintf(named, sizeof(named), "interface=%s local_addr=%s\n", net.veth_ns[i],
			 net.addr[i]);
		char *log = rv_test_run_output(&j.r[i], 2);
		ck_assert_msg(strstr(log, named), "no \"%s\" in:\n%s", named, log);
		free(log);
	}
	ck_assert_msg(strstr(out[0], "[rank0]:done rank=0 world=2 params="), "%s", out[0]);
	ck_assert_msg(strstr(out[1], "[rank1]:done rank=1 world=2 params="), "%s", out[1]);
	/* DDP kept the replicas equal: the same parameters on both hosts */
	const char *p0 = after(out[0], "params="), *p1 = after(out[1], "params=");
	ck_assert_int_eq((int)strcspn(p0, "\n"), (int)strcspn(p1, "\n"));
	ck_assert_msg(!strncmp(p0, p1, strcspn(p0, "\n")), "rank 0 %.20s, rank 1 %.20s", p0, p1);
	/* and the ranks trained on different data, so it took the all-reduce */
	ck_assert_msg(strstr(out[0], "[rank0]:step=30 ") && strstr(out[1], "[rank1]:step=30 "),
		      "%s\n%s", out[0], out[1]);
	free(out[0]);
	free(out[1]);
	end_job(&j);
}
END_TEST

/* The node name rover-run joined under, from its log. */
static void node_name(const struct rv_test_run *r, char *out, size_t size)
{
	char *err = rv_test_run_output(r, 2);
	const char *p = strstr(err, "msg=\"joined the rendezvous\" node=");
	ck_assert_msg(p, "%s", err);
	p += strlen("msg=\"joined the rendezvous\" node=");
	snprintf(out, size, "%.*s", (int)strcspn(p, " \n"), p);
	free(err);
}

START_TEST(test_link_cut_mid_run)
{
	if (net.skip[0]) {
		RV_TEST_SKIP(true, "%s", net.skip);
		return;
	}
	char hb[16];
	snprintf(hb, sizeof(hb), "%d", HB_TIMEOUT_MS);
	const char *margs[] = { "--rdzv-heartbeat-timeout-ms", hb, "--rdzv-max-wait-s", "3", NULL };
	const char *rargs[] = { "--rdzv-conf", "join_timeout=4,master_timeout=3", NULL };
	struct job j;
	start_job(&j, margs, rargs, "100000", "0.02");
	/* mid-run: both ranks are stepping */
	ck_assert_msg(rv_test_run_wait_for(&j.r[0], 1, "[rank0]:step=20 ", 60000), "no step 20");
	ck_assert_msg(rv_test_run_wait_for(&j.r[1], 1, "[rank1]:step=20 ", 10000), "no step 20");
	char node1[64];
	node_name(&j.r[1], node1, sizeof(node1));
	struct rv_master_client *c = rv_test_master_client(&j.m);
	struct rv_job_status js;
	struct rv_err err = { 0 };
	ck_assert_msg(rv_master_job(c, &js, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(js.nnodes, 2);
	int64_t round = js.round;
	ck_assert_int_eq(rv_test_master_world_of(c, node1, round), RV_RDZV_COMPLETE);

	int64_t cut = rv_mono_ms();
	ck_assert_int_eq(RUN("ip", "link", "set", net.veth_host[1], "down"), 0);

	/* the master: node 1 dead within its heartbeat timeout */
	int64_t dead_ms =
		rv_test_master_wait_dead(c, node1, round, cut, HB_TIMEOUT_MS + SLACK_MS + 3000);
	printf("check_run_netns: cut-off node declared dead after %ld ms "
	       "(heartbeat_timeout_ms=%d)\n",
	       (long)dead_ms, HB_TIMEOUT_MS);
	ck_assert_msg(dead_ms >= 0, "the cut-off node was never declared dead");
	ck_assert_int_le(dead_ms, HB_TIMEOUT_MS + SLACK_MS);

	/* the survivor: told, stops its worker, waits, and gives up with the
	 * master's verdict (max_wait_s 3) */
	char *e0 = rv_test_run_expect_exit(&j.r[0], 1, 20000);
	int64_t survivor_ms = rv_mono_ms() - cut;
	ck_assert_msg(strstr(e0, "the world changes: rendezvous again"), "%s", e0);
	ck_assert_msg(strstr(e0, "the rendezvous failed: too few nodes within the wait"), "%s", e0);
	free(e0);
	/* the cut-off node: no master for 3 s, then no world within 4 s */
	char *e1 = rv_test_run_expect_exit(&j.r[1], 1, 40000);
	int64_t cutoff_ms = rv_mono_ms() - cut;
	ck_assert_msg(strstr(e1, "lost the master"), "%s", e1);
	ck_assert_msg(strstr(e1, "no world formed within 4 s"), "%s", e1);
	free(e1);
	printf("check_run_netns: after the cut the survivor exited in %ld ms, the cut-off node "
	       "in %ld ms\n",
	       (long)survivor_ms, (long)cutoff_ms);
	rv_master_client_free(c);
	end_job(&j);
}
END_TEST

static Suite *run_netns_suite(void)
{
	TCase *tc = RV_TEST_TCASE("core", 180, test_ddp_across_namespaces, test_link_cut_mid_run);
	tcase_add_unchecked_fixture(tc, netns_setup, netns_teardown);
	return RV_TEST_SUITE("run_netns", tc);
}

RV_TEST_MAIN(run_netns_suite)
