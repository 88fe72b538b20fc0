/*
 * check_master_nodereport.c: what the node manager sees reaches the brain.
 * A real rover-brain (its own fresh database), a rover-master in cluster
 * mode against it with the local scheduler, two nodes whose command is
 * this binary with --simulated-agent (join the rendezvous under
 * ROVER_NODE_NAME, heartbeat, keep 48 MiB touched, burn one core, exit 0
 * after --burn-s seconds), the nodes' usage read every 200 ms:
 *
 *   - the brain stores node samples under the nodes' stable names
 *     worker-0 and worker-1 (GET /v1/jobs/{uid}: node_samples, and per
 *     node peak CPU in cores > 0, peak memory around what the node
 *     touched, and the spec's limits), read from cgroups and, with
 *     --node-limits none, from the node's process tree in /proc;
 *   - nodes killed for memory (64 MiB, touching 160) reach it as node_oom
 *     then node_relaunched, with the memory of the brain's oom plan;
 *   - a node killed with SIGKILL reaches the brain as node_failed naming
 *     the signal, then node_relaunched (the node's status and relaunches
 *     over the REST API, the events' order in the brain's table).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libpq-fe.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brain_client.h"
#include "brainfix.h"
#include "masterfix.h"
#include "parse.h"
#include "testutil.h"

#define TOUCH_MB 48

/* ---- the simulated agent ---- */

static int simulated_agent_main(int burn_s, int64_t oom_below)
{
	const char *addr = getenv("ROVER_MASTER_ADDR"), *name = getenv("ROVER_NODE_NAME");
	if (!addr || !name) {
		fprintf(stderr, "simulated agent: ROVER_MASTER_ADDR and ROVER_NODE_NAME are "
				"required\n");
		return 2;
	}
	int oom = rv_test_sim_oom(oom_below);
	if (oom)
		return oom;
	struct rv_master_client *c = rv_test_agent_client(addr, 100, 20000);
	if (!c)
		return 2;
	struct rv_rdzv_join j = { .local_world_size = 1 };
	snprintf(j.node, sizeof(j.node), "%s", name);
	struct rv_rdzv_world_reply w;
	int rc = -ETIMEDOUT;
	for (int i = 0; i < 30 && rc == -ETIMEDOUT; i++)
		rc = rv_master_rendezvous(c, &j, 2000, &w, NULL);
	if (rc < 0) {
		rv_master_client_free(c);
		return 6;
	}
	rv_rdzv_world_reply_release(&w);
	/* memory the node manager must see */
	size_t sz = (size_t)TOUCH_MB << 20;
	volatile char *touched = malloc(sz);
	for (size_t i = 0; touched && i < sz; i += 4096)
		touched[i] = 1;
	int64_t until = rv_mono_ms() + (int64_t)burn_s * 1000, last_hb = 0;
	volatile uint64_t x = 0;
	while (rv_mono_ms() < until) {
		if (rv_mono_ms() - last_hb >= 100) {
			rv_master_heartbeat(c, name, NULL, NULL);
			last_hb = rv_mono_ms();
		}
		for (int i = 0; i < 1000000; i++)
			x += (uint64_t)i * 2654435761u;
	}
	free((void *)touched);
	rv_master_client_free(c);
	return 0;
}

/* ---- the test ---- */

static char conninfo[1024];
static struct rv_test_brain brain;
static struct rv_test_master master;

static void setup(void)
{
	ck_assert_int_eq(rv_test_pg_fresh_db(0, conninfo, sizeof(conninfo)), 0);
	const char *args[] = { "--db", conninfo, "--plan-debounce-ms", "0", NULL };
	ck_assert_int_eq(rv_test_brain_start(&brain, args), 0);
	memset(&master, 0, sizeof(master));
}

static void teardown(void)
{
	if (master.dir[0])
		rv_test_master_cleanup(&master);
	rv_test_brain_stop(&brain, SIGTERM, 10);
}

/* The master for two nodes of this binary (burning burn_s seconds; the
 * spec's memory, memory; agent options extra, ",\"--k\",\"v\"" or "") in
 * cluster mode against the brain, --node-limits limits; a client of it. */
static struct rv_master_client *start_master(int burn_s, const char *memory, const char *extra,
					     const char *limits)
{
	char exe[PATH_MAX];
	rv_test_self_exe(exe, sizeof(exe));
	char *spec = NULL;
	ck_assert_int_ge(
		asprintf(&spec,
			 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
			 "\"metadata\":{\"name\":\"nodereport\"},"
			 "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
			 "\"optimizeMode\":\"cluster\",\"replicaSpecs\":{\"worker\":{"
			 "\"replicas\":2,\"minReplicas\":2,\"maxReplicas\":2,\"restartCount\":3,"
			 "\"resources\":{\"cpu\":1.5,\"memory\":\"%s\"},"
			 "\"command\":[\"%s\",\"--simulated-agent\",\"--burn-s\",\"%d\"%s]}},"
			 "\"datasets\":[{\"name\":\"train\",\"size\":1000,\"shardSize\":10,"
			 "\"epochs\":1}]}}",
			 memory, exe, burn_s, extra),
		0);
	ck_assert_int_eq(rv_test_master_init(&master, spec), 0);
	free(spec);
	static const char *args[24];
	const char *a[] = { "--brain",
			    brain.url,
			    "--scheduler",
			    "local",
			    "--node-limits",
			    limits,
			    "--node-usage-interval-ms",
			    "200",
			    "--node-stop-grace-ms",
			    "1000",
			    "--rdzv-last-call-ms",
			    "0",
			    RV_TEST_MASTER_BRAIN_SOON,
			    NULL };
	for (int i = 0; a[i]; i++)
		args[i] = a[i];
	ck_assert_int_eq(rv_test_master_start(&master, args), 0);
	struct rv_master_client *c = rv_test_master_client(&master);
	ck_assert_ptr_nonnull(c);
	return c;
}

/* The job's uid at the brain and worker-<rank>'s pid once both run (pid
 * NULL: only the uid). */
static void wait_running(struct rv_master_client *c, char uid[RV_BRAIN_UID_MAX], int *pid)
{
	static struct rv_job_status js;
	int64_t until = rv_mono_ms() + 30000;
	for (;;) {
		int running = 0;
		if (rv_master_job(c, &js, NULL) == 0 && js.has_brain && js.brain.uid[0])
			for (int i = 0; i < js.nnode_list; i++)
				if (!strcmp(js.node_list[i].state, "running") &&
				    js.node_list[i].pid > 0 && js.node_list[i].rank >= 0 &&
				    js.node_list[i].rank < 2) {
					if (pid)
						pid[js.node_list[i].rank] = js.node_list[i].pid;
					running++;
				}
		if (running == 2 || (!pid && js.brain.uid[0]))
			break;
		ck_assert_msg(rv_mono_ms() < until, "the nodes never ran (uid \"%s\")",
			      js.brain.uid);
		usleep(50 * 1000);
	}
	snprintf(uid, RV_BRAIN_UID_MAX, "%s", js.brain.uid);
}

/* GET /v1/jobs/{uid} (the caller releases). */
static void brain_job(const char *uid, struct rv_test_reply *r)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s", uid);
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, r), 0);
	ck_assert_msg(r->status == 200 && r->json, "%ld %s", r->status, r->body);
}

/* The brain's row of node name in job doc, or NULL. */
static const cJSON *brain_node(const cJSON *doc, const char *name)
{
	const cJSON *n;
	cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(doc, "nodes"))
	{
		const char *s = rv_test_json_str(n, "name");
		if (s && !strcmp(s, name))
			return n;
	}
	return NULL;
}

/* A node's usage is there: burning CPU, the memory it touched, the limits. */
static bool usage_seen(const cJSON *n)
{
	return n && rv_test_json_num(n, "peak_cpu", 0) > 0.05 &&
	       rv_test_json_num(n, "peak_memory_mb", 0) >= TOUCH_MB / 2;
}

/* The types of the brain's events about node, oldest first (SQL: the API
 * has no event list), as "a,b,c". */
static void node_events(const char *node, char *out, size_t size)
{
	PGconn *db = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(db) == CONNECTION_OK, "%s", PQerrorMessage(db));
	const char *p[] = { node };
	PGresult *res = PQexecParams(db, "SELECT type FROM events WHERE node = $1 ORDER BY id", 1,
				     NULL, p, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(res) == PGRES_TUPLES_OK, "%s", PQerrorMessage(db));
	size_t used = 0;
	out[0] = 0;
	for (int i = 0; i < PQntuples(res); i++) {
		int k = snprintf(out + used, size - used, "%s%s", i ? "," : "",
				 PQgetvalue(res, i, 0));
		if (k < 0 || (size_t)k >= size - used)
			break;
		used += (size_t)k;
	}
	PQclear(res);
	PQfinish(db);
}

/* Both nodes' usage at the brain under their stable names. */
static void check_usage(const char *limits)
{
	struct rv_master_client *c = start_master(60, "512Mi", "", limits);
	char uid[RV_BRAIN_UID_MAX];
	int pid[2];
	wait_running(c, uid, pid);
	struct rv_test_reply r = { 0 };
	int64_t until = rv_mono_ms() + 20000;
	for (;;) {
		brain_job(uid, &r);
		if (usage_seen(brain_node(r.json, "worker-0")) &&
		    usage_seen(brain_node(r.json, "worker-1")))
			break;
		ck_assert_msg(rv_mono_ms() < until, "no usage of both nodes at the brain: %s",
			      r.body);
		rv_test_reply_release(&r);
		usleep(100 * 1000);
	}
	ck_assert_int_ge(rv_test_json_num(r.json, "node_samples", 0), 2);
	for (int i = 0; i < 2; i++) {
		char name[24];
		snprintf(name, sizeof(name), "worker-%d", i);
		const cJSON *n = brain_node(r.json, name);
		printf("check_master_nodereport: limits=%s %s peak_cpu=%.2f peak_memory_mb=%.0f\n",
		       limits, name, rv_test_json_num(n, "peak_cpu", 0),
		       rv_test_json_num(n, "peak_memory_mb", 0));
		ck_assert_str_eq(rv_test_json_str(n, "role"), "worker");
		ck_assert_int_eq((int)rv_test_json_num(n, "rank", -1), i);
		/* the spec's limits */
		ck_assert_double_eq_tol(rv_test_json_num(n, "cpu", 0), 1.5, 1e-9);
		ck_assert_int_eq((int)rv_test_json_num(n, "memory_mb", 0), 512);
		/* one core at most, whatever the share the machine gives */
		ck_assert_double_le(rv_test_json_num(n, "peak_cpu", 0), 1.3);
		ck_assert_double_lt(rv_test_json_num(n, "peak_memory_mb", 0), 512);
	}
	/* no other names: the nodes' instances are not the brain's nodes */
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r.json, "nodes")), 2);
	rv_test_reply_release(&r);
	rv_master_client_free(c);
}

/* cgroups where the machine has them (CPU from cpu.stat or cpuacct) */
START_TEST(test_usage_reaches_the_brain)
{
	check_usage("auto");
}
END_TEST

/* No cgroups: CPU and memory of the node's process tree from /proc (none,
 * not rlimit: an ASan build of the node reserves more address space than
 * RLIMIT_AS lets it) */
START_TEST(test_usage_without_cgroups)
{
	check_usage("none");
}
END_TEST

START_TEST(test_kill9_reaches_the_brain)
{
	struct rv_master_client *c = start_master(60, "512Mi", "", "auto");
	char uid[RV_BRAIN_UID_MAX];
	int pid[2];
	wait_running(c, uid, pid);
	ck_assert_int_eq(kill(pid[1], SIGKILL), 0);
	struct rv_test_reply r = { 0 };
	const cJSON *n = NULL;
	int64_t until = rv_mono_ms() + 20000;
	for (;;) {
		brain_job(uid, &r);
		n = brain_node(r.json, "worker-1");
		const char *st = n ? rv_test_json_str(n, "status") : NULL;
		if (n && rv_test_json_num(n, "relaunches", 0) >= 1 && st && !strcmp(st, "running"))
			break;
		if (rv_mono_ms() >= until) {
			char ev[512];
			node_events("worker-1", ev, sizeof(ev));
			ck_abort_msg("worker-1 never relaunched at the brain (events %s): %s", ev,
				     r.body);
		}
		rv_test_reply_release(&r);
		usleep(100 * 1000);
	}
	ck_assert_int_eq((int)rv_test_json_num(n, "relaunches", 0), 1);
	ck_assert_int_eq((int)rv_test_json_num(n, "rank", -1), 1);
	rv_test_reply_release(&r);
	char ev[512];
	node_events("worker-1", ev, sizeof(ev));
	ck_assert_str_eq(ev, "node_failed,node_relaunched");
	node_events("worker-0", ev, sizeof(ev));
	ck_assert_str_eq(ev, "");
	/* the failure says what happened */
	PGconn *db = PQconnectdb(conninfo);
	ck_assert_int_eq(PQstatus(db), CONNECTION_OK);
	PGresult *res = PQexec(db, "SELECT reason, exit_code FROM events WHERE node = 'worker-1'"
				   " AND type = 'node_failed'");
	ck_assert_int_eq(PQntuples(res), 1);
	printf("check_master_nodereport: node_failed reason=\"%s\" exit_code=%s\n",
	       PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
	ck_assert_msg(strstr(PQgetvalue(res, 0, 0), "9"), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	PQfinish(db);
	rv_master_client_free(c);
}
END_TEST

/* Both nodes start under 64 MiB and touch 160: killed for memory, each
 * reaches the brain as node_oom, the brain's oom plan gives it more, and
 * it is relaunched with that (node_relaunched), no node_failed. */
START_TEST(test_oom_reaches_the_brain)
{
	const char *why = "";
	if (!rv_test_cgroup_memory_usable(&why)) {
		RV_TEST_SKIP(true, "no memory cgroup to OOM-kill a node in: %s", why);
		return;
	}
	struct rv_master_client *c = start_master(60, "64Mi", ",\"--oom-below\",\"100\"", "auto");
	char uid[RV_BRAIN_UID_MAX];
	wait_running(c, uid, NULL);
	struct rv_test_reply r = { 0 };
	int64_t until = rv_mono_ms() + 20000;
	for (;;) {
		brain_job(uid, &r);
		int done = 0;
		for (int i = 0; i < 2; i++) {
			char name[24];
			snprintf(name, sizeof(name), "worker-%d", i);
			const cJSON *n = brain_node(r.json, name);
			const char *st = n ? rv_test_json_str(n, "status") : NULL;
			done += n && st && !strcmp(st, "running") &&
				rv_test_json_num(n, "oom_count", 0) >= 1 &&
				rv_test_json_num(n, "relaunches", 0) >= 1 &&
				rv_test_json_num(n, "memory_mb", 0) >= 100;
		}
		if (done == 2)
			break;
		ck_assert_msg(rv_mono_ms() < until, "no OOM relaunch of both at the brain: %s",
			      r.body);
		rv_test_reply_release(&r);
		usleep(100 * 1000);
	}
	for (int i = 0; i < 2; i++) {
		char name[24], ev[512];
		snprintf(name, sizeof(name), "worker-%d", i);
		const cJSON *n = brain_node(r.json, name);
		printf("check_master_nodereport: %s relaunched after an OOM with memory_mb=%.0f\n",
		       name, rv_test_json_num(n, "memory_mb", 0));
		/* each OOM (the plan may need two steps past 100 MiB) then its
		 * relaunch; never a failure */
		node_events(name, ev, sizeof(ev));
		const char *pair = "node_oom,node_relaunched";
		size_t len = strlen(pair);
		const char *p = ev;
		while (!strncmp(p, pair, len) && p[len] == ',')
			p += len + 1;
		ck_assert_msg(!strcmp(p, pair), "%s: %s", name, ev);
	}
	rv_test_reply_release(&r);
	/* and the master says the memory came from the brain */
	char *log = rv_test_read_file(master.log);
	ck_assert_msg(log && strstr(log, "the planner's oom plan gives worker-"), "%s", log);
	free(log);
	rv_master_client_free(c);
}
END_TEST

static Suite *master_nodereport_suite(void)
{
	TCase *tc = RV_TEST_TCASE("core", 90, test_usage_reaches_the_brain,
				  test_usage_without_cgroups, test_kill9_reaches_the_brain,
				  test_oom_reaches_the_brain);
	tcase_add_checked_fixture(tc, setup, teardown);
	return RV_TEST_SUITE("master_nodereport", tc);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--simulated-agent")) {
		int64_t burn = 10, oom_below = 0;
		for (int i = 2; i + 1 < argc; i += 2)
			if (!strcmp(argv[i], "--burn-s")) {
				if (rv_parse_i64(argv[i + 1], 1, 3600, &burn) < 0)
					return 2;
			} else if (!strcmp(argv[i], "--oom-below")) {
				if (rv_parse_i64(argv[i + 1], 1, INT32_MAX, &oom_below) < 0)
					return 2;
			} else
				return 2;
		return simulated_agent_main((int)burn, oom_below);
	}
	if (rv_test_pg_global_start() < 0)
		return EXIT_FAILURE;
	int rc = rv_test_run_suite(master_nodereport_suite());
	rv_test_pg_global_stop();
	return rc;
}
