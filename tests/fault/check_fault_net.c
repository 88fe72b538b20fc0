/*
 * check_fault_net.c: the whole stack under network faults.  A bridge in the
 * root network namespace carries the master's address; each rover-run (or
 * the brain) runs in a namespace of its own behind a veth pair
 * (tests/lib/netnsfix.h), so a link can be cut, or slowed with tc:
 *   - a node cut off (its link down) until the master declared it dead and
 *     the other node trains alone, then brought back: the old agent stops
 *     its worker before it joins again (no second copy of its rank), its
 *     late reports count nothing twice, and the world is two again;
 *   - a slow link (tc netem delay and loss; where the kernel has no netem,
 *     a tbf rate limit whose queue delays and drops) between a node and
 *     the rest: training goes on, nobody is declared dead, no restart; the
 *     step rate with and without it is printed;
 *   - the brain cut off from the master for a while (ROVER_FAULT_PARTITION_S,
 *     8 s under make test, 180 s under make fault): the master buffers its
 *     reports (bounded: none dropped at this rate) and, once healed, every
 *     step it acknowledged is in PostgreSQL exactly once.
 * Each ends with accounting (faultfix.h) and prints its recovery time.
 * Needs root and iproute2; without them each case says why and passes (a
 * failure under CI=true, where scripts/install-deps.sh installs iproute2).
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brainfix.h"
#include "faultfix.h"
#include "masterfix.h"
#include "netnsfix.h"
#include "parse.h"
#include "pgfix.h"
#include "runfix.h"
#include "testutil.h"

/* The dataset: 1200 samples in shards of 16, two epochs. */
#define SIZE   1200
#define EPOCHS 2

static struct rv_test_netns net;
static char skip_reason[256];

/* Parent, before the tests fork. */
static void net_setup(void)
{
	if (rv_test_netns_up(&net, "fn", 2) == 0)
		skip_reason[0] = '\0';
	else
		snprintf(skip_reason, sizeof(skip_reason), "%s", net.skip);
}

/* Parent, after the tests, whatever they did. */
static void net_teardown(void)
{
	rv_test_netns_down(&net);
}

/* Fail under CI=true (iproute2 is installed there), else pass saying why. */
#define NET_SKIP_UNLESS_READY()                                                                    \
	do {                                                                                       \
		if (skip_reason[0]) {                                                              \
			RV_TEST_SKIP(true, "%s", skip_reason);                                     \
			return;                                                                    \
		}                                                                                  \
	} while (0)

/* A master for the digits job of epochs epochs (two nodes at most, one at
 * least) listening on the bridge's address, with extra args margs
 * (NULL-terminated, at most 16). */
static void master_on_bridge(struct rv_test_master *m, int epochs, const char *const *margs)
{
	char *spec = rv_test_master_spec(SIZE, 16, epochs, 1, 2);
	ck_assert_int_eq(rv_test_master_init(m, spec), 0);
	free(spec);
	/* kept by pointer for a restart */
	static char listen[sizeof(m->addr)];
	snprintf(listen, sizeof(listen), "%.20s:%d", net.addr_root, m->port);
	snprintf(m->url, sizeof(m->url), "http://%s", listen);
	memcpy(m->addr, listen, sizeof(m->addr));
	const char *args[24] = { "--listen", listen };
	int n = 2;
	for (; margs && *margs && n < 23; margs++)
		args[n++] = *margs;
	args[n] = NULL;
	ck_assert_int_eq(rv_test_master_start(m, args), 0);
}

/* One rover-run per namespace running the digits job against m, each
 * joined before the next starts (node 0 is group rank 0). */
struct nodes {
	struct rv_test_run r[2];
	char log[400], job[96], gloo[2][48];
	const char *env[2][3];
	const char *argv[2][32];
};

static void nodes_start(struct nodes *x, const struct rv_test_master *m, const char *what)
{
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(rv_test_run_init(&x->r[i]), 0);
	snprintf(x->log, sizeof(x->log), "%s/shards.log", x->r[0].dir);
	rv_test_fault_job_env(x->job, sizeof(x->job), what);
	for (int i = 0; i < 2; i++) {
		snprintf(x->gloo[i], sizeof(x->gloo[i]), "GLOO_SOCKET_IFNAME=%s", net.veth_ns[i]);
		x->env[i][0] = x->job;
		x->env[i][1] = x->gloo[i];
		x->env[i][2] = NULL;
		x->argv[i][0] = "--local-addr";
		x->argv[i][1] = net.addr[i];
		rv_test_fault_node_args(x->argv[i] + 2, "1:2", "1", m->addr, "0", x->log);
		x->r[i].wrap = net.wrap[i];
		ck_assert_int_eq(rv_test_run_start_joined(&x->r[i], x->argv[i], x->env[i], 60000),
				 0);
	}
	if (!rv_test_wait_lines(x->log, 40, 120000))
		rv_test_run_dump(x->r, 2, m->log);
	ck_assert_msg(rv_test_wait_lines(x->log, 40, 0), "no 40 steps trained by the world of 2");
}

static void nodes_finish(struct nodes *x, struct rv_test_master *m, int epochs)
{
	for (int i = 0; i < 2; i++)
		free(rv_test_run_expect_exit(&x->r[i], 0, 300000));
	rv_test_fault_expect_trained(x->r, 2, x->log, SIZE, epochs, 3);
	for (int i = 0; i < 2; i++)
		rv_test_run_end(&x->r[i]);
	rv_test_master_cleanup(m);
}

/* Node 1's link down until the master declared it dead and node 0 trains
 * alone, 6 s in all (three heartbeat timeouts; under rover-run's master
 * timeout of 30 s, past which it would give up itself), then up again.
 * Node 1's rover-run hears "rejoin" on its next heartbeat: its old worker
 * (rank 1 of the old world, cut off mid-step) must be gone before it joins,
 * and its reports from the old world must count nothing twice. */
START_TEST(test_node_cut_and_back)
{
	NET_SKIP_UNLESS_READY();
	const char *margs[] = { "--rdzv-heartbeat-timeout-ms", "2000", NULL };
	struct rv_test_master m;
	master_on_bridge(&m, EPOCHS, margs);
	struct nodes x;
	nodes_start(&x, &m, "ncut");

	pid_t old[2];
	ck_assert_int_eq(rv_test_run_workers(&x.r[1], 0, -1, old, 2), 1);
	int at = rv_test_count_lines(x.log);
	int64_t t0 = rv_mono_ms();
	ck_assert_int_eq(rv_test_netns_link(&net, 1, false), 0);
	int64_t alone = rv_test_fault_wait_world(x.log, at, 1, 60000);
	if (alone < 0)
		rv_test_run_dump(x.r, 2, m.log);
	ck_assert_msg(alone >= 0, "node 0 never trained alone after node 1 was cut off");
	char *mlog = rv_test_read_file(m.log);
	ck_assert_msg(strstr(mlog, "node declared dead"), "node 1 not declared dead: %s", mlog);
	free(mlog);
	while (rv_mono_ms() - t0 < 6000)
		usleep(50 * 1000);
	at = rv_test_count_lines(x.log);
	ck_assert_int_eq(rv_test_netns_link(&net, 1, true), 0);
	int64_t t1 = rv_mono_ms();
	rv_test_fault_report("node_cut_world_of_one", alone - t0);
	int64_t back = rv_test_fault_wait_world(x.log, at, 2, 90000);
	if (back < 0)
		rv_test_run_dump(x.r, 2, m.log);
	ck_assert_msg(back >= 0, "node 1 never trained in a world of 2 again");
	rv_test_fault_report("node_cut_rejoin", back - t1);
	/* one copy of rank 1: the worker of the old world is gone */
	ck_assert_msg(kill(old[0], 0) < 0, "node 1's old worker %d still runs", (int)old[0]);
	nodes_finish(&x, &m, EPOCHS);
}
END_TEST

/* Steps per second rank 0 logged in the shard log between lines `from`
 * and the end, over ms. */
static double step_rate(const char *path, int from, int64_t ms)
{
	int steps = rv_test_fault_lines_after(path, from, "0 ");
	return ms > 0 ? steps * 1000.0 / (double)ms : 0;
}

/* The slow link on both ends of node 1's veth: netem's delay and loss, or
 * (a kernel without sch_netem) a tbf rate limit whose short queue delays
 * and drops.  Which one into kind. */
static void slow_link(bool on, const char **kind)
{
	const char *netem[] = { "netem", "delay", "100ms", "20ms", "loss", "1%", NULL };
	const char *tbf[] = { "tbf", "rate", "512kbit", "burst", "4kb", "latency", "30ms", NULL };
	const char *const *w = !on ? NULL : !strcmp(*kind, "tbf") ? tbf : netem;
	for (int inside = 0; inside < 2; inside++) {
		int rc = rv_test_netns_qdisc(&net, 1, inside, w);
		if (rc < 0 && on && w == netem) {
			*kind = "tbf"; /* no netem here: say so and slow it the other way */
			slow_link(on, kind);
			return;
		}
		ck_assert_msg(rc == 0 || !on, "could not set the slow link (%s)", *kind);
	}
}

/* A slow link to node 1 for 20 s under training (a job of 5 epochs, long
 * enough to go on after it): the job goes on, nobody declared dead (the
 * master's default heartbeat timeout), no restart; the step rate before
 * and during it printed; every sample once. */
START_TEST(test_slow_link)
{
	NET_SKIP_UNLESS_READY();
	struct rv_test_master m;
	master_on_bridge(&m, 5, NULL);
	struct nodes x;
	nodes_start(&x, &m, "slow");

	int at0 = rv_test_count_lines(x.log);
	int64_t t0 = rv_mono_ms();
	usleep(8000 * 1000);
	int at = rv_test_count_lines(x.log);
	int64_t t1 = rv_mono_ms();
	double before = step_rate(x.log, at0, t1 - t0);
	const char *kind = "netem";
	slow_link(true, &kind);
	usleep(20000 * 1000);
	int64_t t2 = rv_mono_ms();
	double during = step_rate(x.log, at, t2 - t1);
	slow_link(false, &kind);
	printf("diag: slow link (%s) steps_per_s before=%.2f during=%.2f\n", kind, before, during);
	printf("slow_link=%s steps_per_s_before=%.2f steps_per_s_during=%.2f\n", kind, before,
	       during);
	fflush(stdout);
	ck_assert_msg(during > 0, "no step trained over the slow link");
	int64_t back = rv_test_fault_wait_steps(x.log, rv_test_count_lines(x.log), 2, 60000);
	ck_assert_msg(back >= 0, "no step of both ranks after the link was fast again");
	rv_test_fault_report("slow_link_fast_again", back - t2);
	char *mlog = rv_test_read_file(m.log);
	ck_assert_msg(!strstr(mlog, "node declared dead"), "declared dead on a slow link: %s",
		      mlog);
	free(mlog);
	int loads = rv_test_fault_lines_after(x.log, at, "load ");
	if (loads)
		rv_test_run_dump(x.r, 2, m.log);
	ck_assert_msg(loads == 0, "the group restarted %d time(s) on a slow link", loads);
	nodes_finish(&x, &m, 5);
}
END_TEST

/* ---- the master and the brain apart ---- */

static int partition_s(void)
{
	const char *v = getenv("ROVER_FAULT_PARTITION_S");
	int64_t s;
	if (v && rv_parse_i64(v, 1, 3600, &s) == 0)
		return (int)s;
	return rv_test_fault_all() ? 180 : 8;
}

/* One query's single number on conninfo's database. */
static long long sql_num(const char *conninfo, const char *q)
{
	PGconn *c = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexec(c, q);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", q, PQerrorMessage(c));
	long long n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	PQfinish(c);
	return n;
}

static void report_step(struct rv_master_client *c, int64_t step)
{
	struct rv_step_report r = { .node = "node-0", .step = step, .speed = 100.0 };
	struct rv_err err = { 0 };
	ck_assert_msg(rv_master_step(c, &r, &err) == 0, "step %lld: %s", (long long)step, err.msg);
}

static struct rv_job_status job_status(struct rv_master_client *c)
{
	struct rv_job_status js;
	struct rv_err err = { 0 };
	ck_assert_msg(rv_master_job(c, &js, &err) == 0, "job: %s", err.msg);
	return js;
}

/* One unlabelled value of m's /metrics, -1 when absent. */
static long long master_metric(const struct rv_test_master *m, const char *name)
{
	struct rv_test_brain as = { .port = m->port };
	snprintf(as.url, sizeof(as.url), "%s", m->url);
	return (long long)rv_test_metric(&as, name);
}

/* The brain in namespace 0, the master in the root namespace reaching it
 * over the veth; steps reported all along (every 50 ms, each acknowledged
 * by the master).  First the brain's replies are lost for 2 s (a tbf
 * inside its namespace whose bucket no packet but a bare ACK fits: the
 * requests arrive and are stored, the answers never leave), then the
 * link goes down for partition_s() seconds.  Healed, the master resends
 * what was stored unanswered with the same ids and delivers what it
 * buffered: every acknowledged step is one row of job_speed, none twice,
 * none dropped. */
START_TEST(test_brain_partition)
{
	NET_SKIP_UNLESS_READY();
	char conninfo[1024], listen[64];
	ck_assert_int_eq(rv_test_pg_fresh_db(0, conninfo, sizeof(conninfo)), 0);
	snprintf(listen, sizeof(listen), "%s:0", net.addr[0]);
	const char *bargs[] = { "--db", conninfo, "--listen", listen, NULL };
	struct rv_test_brain b;
	ck_assert_int_eq(rv_test_brain_start_wrapped(&b, net.wrap[0], bargs), 0);
	struct rv_test_master m;
	char *spec = rv_test_master_spec(1000, 10, 1, 1, 1);
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	const char *margs[] = { "--brain",
				b.url,
				"--brain-batch-delay-ms",
				"20",
				"--brain-backoff-max-ms",
				"500",
				"--brain-timeout-ms",
				"1000",
				"--brain-connect-timeout-ms",
				"300",
				NULL };
	ck_assert_int_eq(rv_test_master_start(&m, margs), 0);
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_test_fault_node n = { .m = &m, .name = "node-0" };
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, rv_test_fault_node_main, &n), 0);
	while (!atomic_load(&n.round) && !n.rc)
		usleep(20 * 1000);
	ck_assert_int_eq(n.rc, 0);

	int64_t step = 0;
	for (int i = 0; i < 20; i++, usleep(50 * 1000))
		report_step(c, ++step);
	const char *mute[] = { "tbf", "rate", "1mbit", "burst", "100", "latency", "1s", NULL };
	ck_assert_int_eq(rv_test_netns_qdisc(&net, 0, true, mute), 0);
	for (int i = 0; i < 40; i++, usleep(50 * 1000))
		report_step(c, ++step);
	long long stored_unanswered = sql_num(conninfo, "SELECT count(*) FROM job_speed");
	ck_assert_int_eq(rv_test_netns_link(&net, 0, false), 0);
	int64_t cut = rv_mono_ms();
	bool seen_down = false;
	while (rv_mono_ms() - cut < partition_s() * 1000LL) {
		report_step(c, ++step);
		usleep(50 * 1000);
		struct rv_job_status js = job_status(c);
		seen_down |= !js.brain.reachable && js.brain.queued > 0;
		ck_assert_int_eq(js.brain.dropped, 0);
	}
	ck_assert_msg(seen_down, "the master never saw the brain unreachable");
	ck_assert_int_eq(rv_test_netns_qdisc(&net, 0, true, NULL), 0);
	ck_assert_int_eq(rv_test_netns_link(&net, 0, true), 0);
	int64_t healed = rv_mono_ms();
	for (int i = 0; i < 20; i++, usleep(50 * 1000))
		report_step(c, ++step);
	const char *q = "SELECT count(*) FROM job_speed";
	while (sql_num(conninfo, q) < step && rv_mono_ms() - healed < 60000)
		usleep(50 * 1000);
	rv_test_fault_report("brain_partition_delivered", rv_mono_ms() - healed);
	usleep(1000 * 1000); /* nothing more comes: none stored twice */
	struct rv_job_status js = job_status(c);
	long long resends = master_metric(&m, "rover_master_brain_resends_total");
	printf("diag: partition_s=%d steps=%lld rows=%lld queued=%lld dropped=%lld "
	       "stored_unanswered=%lld resends=%lld\n",
	       partition_s(), (long long)step, sql_num(conninfo, q), (long long)js.brain.queued,
	       (long long)js.brain.dropped, stored_unanswered, resends);
	fflush(stdout);
	ck_assert_msg(stored_unanswered > 20 && resends > 0,
		      "no batch stored with its reply lost (rows %lld, resends %lld)",
		      stored_unanswered, resends);
	ck_assert_int_eq(sql_num(conninfo, q), step);
	ck_assert_int_eq(sql_num(conninfo, "SELECT count(DISTINCT step) FROM job_speed"), step);
	ck_assert_int_eq(sql_num(conninfo, "SELECT count(*) FROM jobs"), 1);
	ck_assert_int_eq(js.brain.dropped, 0);
	atomic_store(&n.stop, 1);
	pthread_join(t, NULL);
	rv_master_client_free(c);
	rv_test_master_cleanup(&m);
	rv_test_brain_stop(&b, SIGTERM, 10);
}
END_TEST

static Suite *fault_net_suite(void)
{
	Suite *s = suite_create("fault_net");
	const struct {
		const char *name;
		const TTest *test;
		bool quick;
	} cases[] = { { "node_cut", test_node_cut_and_back, true },
		      { "brain_partition", test_brain_partition, true },
		      { "slow_link", test_slow_link, false } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!cases[i].quick && !rv_test_fault_all())
			continue;
		TCase *tc = tcase_create(cases[i].name);
		tcase_set_timeout(tc, 600);
		tcase_add_unchecked_fixture(tc, net_setup, net_teardown);
		tcase_add_test(tc, cases[i].test);
		suite_add_tcase(s, tc);
	}
	return s;
}

RV_TEST_MAIN_PG(fault_net_suite)
