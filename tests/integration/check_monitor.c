/*
 * check_monitor.c: the real rover-monitor against the real rover-brain on a
 * private PostgreSQL.  The command line keeps its promises (--help and the
 * conf file agree, --k8s without a cluster says why and exits 1); samples of this
 * host reach GET /v1/cluster with the processes of a job found by
 * ROVER_JOB_NAME; a brain stopped and started again loses nothing the buffer
 * held and stores nothing twice; a full buffer drops the oldest and says
 * so; a resent report_id is stored once; a node whose monitor went silent
 * stops counting as free capacity; a monitor killed with -9 mid-report and
 * started again stores nothing twice and its node is fresh again.
 * With --k8s against the Kubernetes stand-in (its kubelet runs each pod in
 * a memory cgroup named as a real kubelet names it, with the cgroupfs or
 * the systemd driver): the node's capacity is its Node object's, each pod
 * of a Rover job is reported under the job's name from its cgroup, a pod
 * without the job label is not, and a pod deleted stops being reported.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "clifix.h"
#include "k8sfix.h"
#include "masterfix.h"
#include "parse.h"
#include "testutil.h"
#include "usage.h"

static char conninfo[512];
static struct rv_test_brain brain;

struct mon {
	struct rv_proc proc;
	struct rv_test_brain http; /* only url: for rv_test_http */
	char log[256];
};
static struct mon mon;

/* Where mon_start runs rover-monitor from (a test may put a copy beside a
 * stand-in rover-gpuinfo); NULL: the build's. */
static const char *mon_dir;

static const char *bin_dir(void)
{
	if (mon_dir)
		return mon_dir;
	return getenv("ROVER_BIN_DIR") ? getenv("ROVER_BIN_DIR") : "build/bin";
}

/* Start rover-monitor with args; its log goes to mon.log. */
static void mon_start(const char *const *args)
{
	memset(&mon, 0, sizeof(mon));
	snprintf(mon.log, sizeof(mon.log), "/tmp/rover-monitor-log-XXXXXX");
	int lfd = mkstemp(mon.log);
	ck_assert_int_ge(lfd, 0);
	char exe[512];
	snprintf(exe, sizeof(exe), "%s/rover-monitor", bin_dir());
	const char *argv[48] = { exe, "--listen", "127.0.0.1:0", "--sample-gpu-interval-s", "0" };
	int n = 5;
	for (int i = 0; args[i] && n < 46; i++)
		argv[n++] = args[i];
	struct rv_proc_opts o = {
		.argv = argv,
		.io = { { RV_PROC_NULL }, { RV_PROC_PIPE }, { RV_PROC_FD, lfd } },
		.pdeathsig = SIGKILL,
	};
	ck_assert_int_eq(rv_proc_spawn(&mon.proc, &o), 0);
	close(lfd);
	char addr[256];
	ck_assert_msg(rv_test_proc_listening(&mon.proc, 20000, addr, sizeof(addr), NULL) == 0,
		      "rover-monitor did not start: %s", rv_test_read_file(mon.log));
	snprintf(mon.http.url, sizeof(mon.http.url), "http://%.56s", addr);
}

/* SIGTERM and wait: the exit status; *log (may be NULL) gets its log. */
static int mon_stop(char **log)
{
	int st = -1;
	rv_proc_kill(&mon.proc, SIGTERM);
	ck_assert_int_eq(rv_proc_wait(&mon.proc, 20000, &st), 0);
	rv_proc_release(&mon.proc);
	if (log)
		*log = rv_test_read_file(mon.log);
	unlink(mon.log);
	return st;
}

static cJSON *get_json(const struct rv_test_brain *b, const char *path)
{
	struct rv_test_reply r;
	if (rv_test_http(b, "GET", path, NULL, NULL, &r) < 0 || r.status != 200) {
		rv_test_reply_release(&r);
		return NULL;
	}
	cJSON *j = r.json;
	r.json = NULL;
	rv_test_reply_release(&r);
	return j;
}

/* The monitor's /healthz until pred holds (20 s at most). */
static cJSON *health_until(bool (*pred)(const cJSON *), const char *what)
{
	for (int i = 0; i < 200; i++) {
		cJSON *h = get_json(&mon.http, "/healthz");
		if (h && pred(h))
			return h;
		cJSON_Delete(h);
		usleep(100 * 1000);
	}
	ck_abort_msg("monitor never got %s", what);
	return NULL;
}

static bool brain_ok(const cJSON *h)
{
	const char *b = rv_test_json_str(h, "brain");
	return b && !strcmp(b, "ok") && rv_test_json_num(h, "samples", 0) >= 3;
}

static bool brain_ok_drained(const cJSON *h)
{
	return brain_ok(h) && rv_test_json_num(h, "buffered", -1) <= 2;
}

static bool brain_down(const cJSON *h)
{
	const char *b = rv_test_json_str(h, "brain");
	return b && !strcmp(b, "unreachable") && rv_test_json_num(h, "buffered", 0) >= 10;
}

static long long sql_num(const char *sql)
{
	PGconn *c = PQconnectdb(conninfo);
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	PGresult *r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK,
		      "%s: %s", sql, PQerrorMessage(c));
	long long v = PQresultStatus(r) == PGRES_TUPLES_OK ? strtoll(PQgetvalue(r, 0, 0), NULL, 10)
							   : atoll(PQcmdTuples(r));
	PQclear(r);
	PQfinish(c);
	return v;
}

static void start_brain(void)
{
	ck_assert_int_eq(rv_test_brain_start_fresh(&brain, 1, conninfo, sizeof(conninfo), NULL,
						   NULL),
			 0);
}

static void standin_stop(void);

static void teardown(void)
{
	if (mon.proc.pid > 0) {
		rv_proc_kill(&mon.proc, SIGKILL);
		rv_proc_wait(&mon.proc, 5000, NULL);
		rv_proc_release(&mon.proc);
	}
	if (brain.pid > 0)
		rv_test_brain_stop(&brain, SIGTERM, 20);
	standin_stop();
}

START_TEST(test_cli)
{
	char *out = NULL, *err = NULL;
	const char *help[] = { "--help", NULL };
	ck_assert_int_eq(rv_test_cli_run("monitor", help, &out, &err), 0);
	ck_assert_int_ge(rv_test_cli_help_has_keys("monitor", out), 10);
	ck_assert_ptr_nonnull(strstr(out, "--k8s"));
	free(out);
	free(err);
	rv_test_cli_print_conf_matches("monitor");

	const char *k8s[] = { "--k8s", "--kubeconfig", "/nonexistent/kubeconfig", NULL };
	ck_assert_int_eq(rv_test_cli_run("monitor", k8s, &out, &err), 1);
	ck_assert_msg(strstr(err, "/nonexistent/kubeconfig") != NULL, "stderr: %s", err);
	free(out);
	free(err);
	const char *bad[] = { "--interval-ms", "5", NULL };
	ck_assert_int_eq(rv_test_cli_run("monitor", bad, &out, &err), 1);
	ck_assert_msg(strstr(err, "--interval-ms") && strstr(err, "between 100"), "stderr: %s",
		      err);
	free(out);
	free(err);
}
END_TEST

/* The item of the array at key in parent whose "name" is name, or NULL. */
static const cJSON *find_named(const cJSON *parent, const char *key, const char *name)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(parent, key))
	{
		const char *n = rv_test_json_str(it, "name");
		if (n && !strcmp(n, name))
			return it;
	}
	return NULL;
}

static const cJSON *find_node(const cJSON *cluster, const char *name)
{
	return find_named(cluster, "nodes", name);
}

static const cJSON *find_job(const cJSON *node, const char *name)
{
	return find_named(node, "jobs", name);
}

START_TEST(test_reports_this_host)
{
	start_brain();
	char job[64];
	snprintf(job, sizeof(job), "mon-job-%d", (int)getpid());
	pid_t child = fork();
	if (child == 0) {
		setenv("ROVER_JOB_NAME", job, 1);
		execl("/bin/sleep", "sleep", "60", (char *)NULL);
		_exit(127);
	}
	const char *args[] = { "--brain",
			       brain.url,
			       "--node",
			       "node-a",
			       "--interval-ms",
			       "200",
			       "--report-interval-ms",
			       "200",
			       NULL };
	mon_start(args);

	cJSON *cl = NULL;
	const cJSON *node = NULL;
	for (int i = 0; i < 100 && !(node && find_job(node, job)); i++) {
		usleep(100 * 1000);
		cJSON_Delete(cl);
		cl = get_json(&brain, "/v1/cluster");
		node = cl ? find_node(cl, "node-a") : NULL;
	}
	ck_assert_msg(node && find_job(node, job), "the job never showed in /v1/cluster");
	struct rv_meminfo mi;
	ck_assert_int_eq(rv_usage_meminfo(&mi), 0);
	ck_assert_int_eq((int)rv_test_json_num(node, "cpu", 0), (int)sysconf(_SC_NPROCESSORS_ONLN));
	ck_assert_int_eq((long long)rv_test_json_num(node, "memory_mb", 0), mi.total_kb / 1024);
	double used = rv_test_json_num(node, "cpu_used", -1);
	ck_assert(used >= 0 && used <= rv_test_json_num(node, "cpu", 0));
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(node, "stale")));
	ck_assert_int_eq((int)rv_test_json_num(find_job(node, job), "procs", 0), 1);
	ck_assert_int_gt((int)rv_test_json_num(find_job(node, job), "memory_used_mb", -1), -1);
	ck_assert_int_ge((int)rv_test_json_num(cl, "capacity.nodes", 0), 1);
	if (access("/proc/pressure/cpu", R_OK) == 0)
		ck_assert(rv_test_json_num(node, "cpu_pressure", -1) >= 0);
	cJSON_Delete(cl);

	cJSON *h = health_until(brain_ok, "the brain");
	ck_assert_str_eq(rv_test_json_str(h, "node"), "node-a");
	cJSON_Delete(h);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&mon.http, "GET", "/metrics", NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "rover_monitor_samples_total "));
	ck_assert_ptr_nonnull(strstr(r.body, "rover_node_cpu_cores{node=\"node-a\"}"));
	ck_assert_ptr_nonnull(strstr(r.body, "rover_monitor_brain_up{node=\"node-a\"} 1"));
	rv_test_reply_release(&r);

	/* the monitor falls silent: after a while its node no longer counts */
	char *log = NULL;
	ck_assert_int_eq(mon_stop(&log), 0);
	free(log);
	/* silent for longer than the stale limit (120 s): shown stale */
	sql_num("UPDATE cluster_nodes SET updated_at = now() - interval '200 seconds'");
	cl = get_json(&brain, "/v1/cluster");
	node = find_node(cl, "node-a");
	ck_assert_ptr_nonnull(node);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(node, "stale")));
	cJSON_Delete(cl);
	/* silent past cluster.node_ttl_s (300 s): the expiry deletes it and it
	 * no longer counts as capacity (the expiry looks at least every 10 s) */
	sql_num("UPDATE cluster_nodes SET updated_at = now() - interval '10 minutes'");
	cl = NULL;
	for (int i = 0; i < 300; i++) {
		cJSON_Delete(cl);
		cl = get_json(&brain, "/v1/cluster");
		if (cl && !find_node(cl, "node-a"))
			break;
		usleep(100 * 1000);
	}
	ck_assert_msg(cl && !find_node(cl, "node-a"), "the silent node was never expired");
	ck_assert_int_eq((int)rv_test_json_num(cl, "capacity.nodes", -1), 0);
	ck_assert_double_eq(rv_test_json_num(cl, "free.cpu", -1), 0);
	cJSON_Delete(cl);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}
END_TEST

/* GPUs come from rover-gpuinfo, the one program that loads the CUDA runtime
 * and NVML: here a stand-in (no GPU on this machine) describing two GPUs,
 * NVML having read both.  The monitor reports their count, memory in use and
 * mean utilisation; the brain keeps them; /metrics shows them. */
START_TEST(test_gpus_from_gpuinfo)
{
	start_brain();
	char dir[] = "/tmp/rover-mon-gpu-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char cmd[1024], path[600];
	snprintf(cmd, sizeof(cmd), "cp '%s/rover-monitor' '%s/'", bin_dir(), dir);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/rover-gpuinfo", dir);
	rv_test_write_file(
		path, "#!/bin/sh\n"
		      "# stand-in rover-gpuinfo: two GPUs, as on a machine with a driver\n"
		      "printf 'count 2\\n'\n"
		      "printf 'gpu 0 81559 61559 9 0 NVIDIA H100 80GB HBM3\\nutil 0 90 40\\n'\n"
		      "printf 'gpu 1 81559 71559 9 0 NVIDIA H100 80GB HBM3\\nutil 1 30 10\\n'\n");
	ck_assert_int_eq(chmod(path, 0755), 0);
	mon_dir = dir;
	const char *args[] = { "--brain",
			       brain.url,
			       "--node",
			       "gpu-node",
			       "--interval-ms",
			       "200",
			       "--report-interval-ms",
			       "200",
			       "--sample-gpu-interval-s",
			       "1",
			       NULL };
	mon_start(args);
	mon_dir = NULL;

	cJSON *cl = NULL;
	const cJSON *node = NULL;
	for (int i = 0; i < 100 && !(node && cJSON_GetObjectItem(node, "gpu_util_pct")); i++) {
		usleep(100 * 1000);
		cJSON_Delete(cl);
		cl = get_json(&brain, "/v1/cluster");
		node = cl ? find_node(cl, "gpu-node") : NULL;
	}
	ck_assert_msg(node != NULL, "the node never showed in /v1/cluster");
	ck_assert_int_eq((int)rv_test_json_num(node, "gpu", -1), 2);
	ck_assert_int_eq((long long)rv_test_json_num(node, "gpu_memory_used_mb", -1), 30000);
	ck_assert_double_eq_tol(rv_test_json_num(node, "gpu_util_pct", -1), 60, 1e-9);
	ck_assert_int_eq((int)rv_test_json_num(cl, "capacity.gpu", -1), 2);
	cJSON_Delete(cl);
	ck_assert_int_eq(
		sql_num("SELECT count(*) FROM cluster_node_samples"
			" WHERE name = 'gpu-node' AND gpu_util_pct = 60"),
		sql_num("SELECT count(*) FROM cluster_node_samples WHERE name = 'gpu-node'"));
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&mon.http, "GET", "/metrics", NULL, NULL, &r), 0);
	ck_assert_ptr_nonnull(strstr(r.body, "rover_node_gpu_util_pct{node=\"gpu-node\"} 60"));
	ck_assert_ptr_nonnull(strstr(r.body, "rover_node_gpus{node=\"gpu-node\"} 2"));
	rv_test_reply_release(&r);
	ck_assert_int_eq(mon_stop(NULL), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* Stop the monitor, which must have dropped nothing and left nothing
 * unsent: samples and sent from its stop line ("samples=N sent=N dropped=N
 * unsent=N"). */
static void stop_drained(long long *samples, long long *sent)
{
	char *log = NULL;
	ck_assert_int_eq(mon_stop(&log), 0);
	long long dropped, unsent;
	const char *l = strstr(log, "msg=\"stopped\"");
	ck_assert_msg(l != NULL, "no stop line in: %s", log);
	ck_assert_int_eq(sscanf(strstr(l, "samples="),
				"samples=%lld sent=%lld dropped=%lld unsent=%lld", samples, sent,
				&dropped, &unsent),
			 4);
	free(log);
	ck_assert_int_eq(dropped, 0);
	ck_assert_int_eq(unsent, 0);
}

START_TEST(test_brain_down_then_up)
{
	start_brain();
	char port[16];
	snprintf(port, sizeof(port), "%d", brain.port);
	const char *args[] = { "--brain",
			       brain.url,
			       "--node",
			       "node-b",
			       "--interval-ms",
			       "100",
			       "--report-interval-ms",
			       "200",
			       "--report-batch-max",
			       "8",
			       "--buffer-max",
			       "1000",
			       "--brain-timeout-ms",
			       "1000",
			       NULL };
	mon_start(args);
	cJSON_Delete(health_until(brain_ok, "the brain"));

	ck_assert_int_ge(rv_test_brain_stop(&brain, SIGTERM, 20), 0);
	cJSON *h = health_until(brain_down, "the brain down with a backlog");
	ck_assert_int_eq((int)rv_test_json_num(h, "dropped", -1), 0);
	cJSON_Delete(h);
	usleep(1000 * 1000);

	char listen[64];
	snprintf(listen, sizeof(listen), "127.0.0.1:%s", port);
	const char *again[] = { "--db", conninfo, "--listen", listen, NULL };
	ck_assert_int_eq(rv_test_brain_start(&brain, again), 0);
	cJSON_Delete(health_until(brain_ok_drained, "the backlog sent"));

	long long samples, sent;
	stop_drained(&samples, &sent);
	ck_assert_int_eq(sent, samples);
	ck_assert_int_ge(samples, 30);
	/* every sample stored, each once */
	long long rows = sql_num("SELECT count(*) FROM cluster_node_samples WHERE name = 'node-b'");
	ck_assert_int_eq(rows, samples);
	ck_assert_int_eq(sql_num("SELECT count(DISTINCT ts_ms) FROM cluster_node_samples"
				 " WHERE name = 'node-b'"),
			 samples);
	/* and each report once: the reports' node counts add up to the rows */
	ck_assert_int_eq(sql_num("SELECT COALESCE(sum(nodes), 0) FROM cluster_reports"), rows);
}
END_TEST

static bool stale_of(const char *name)
{
	cJSON *cl = get_json(&brain, "/v1/cluster");
	const cJSON *n = cl ? find_node(cl, name) : NULL;
	ck_assert_msg(n, "%s not in /v1/cluster", name);
	bool stale = cJSON_IsTrue(cJSON_GetObjectItem(n, "stale"));
	cJSON_Delete(cl);
	return stale;
}

/* kill -9 in the middle of reporting, then a restart: the samples the
 * killed monitor still held are lost (its buffer is memory), but nothing
 * reaches the database twice or in part, the node is fresh again, and the
 * rows are the killed run's plus what the new run says it sent. */
START_TEST(test_kill9_mid_report_and_restart)
{
	start_brain();
	const char *args[] = { "--brain",
			       brain.url,
			       "--node",
			       "node-k",
			       "--interval-ms",
			       "100",
			       "--report-interval-ms",
			       "200",
			       "--report-batch-max",
			       "3",
			       NULL };
	mon_start(args);
	cJSON_Delete(health_until(brain_ok, "the brain"));
	usleep(700 * 1000); /* a few reports in, one likely on the wire */
	rv_proc_kill(&mon.proc, SIGKILL);
	int st = 0;
	ck_assert_int_eq(rv_proc_wait(&mon.proc, 5000, &st), 0);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	rv_proc_release(&mon.proc);
	unlink(mon.log);
	usleep(300 * 1000); /* a request the kill cut short is answered or dropped by now */
	long long rows1 =
		sql_num("SELECT count(*) FROM cluster_node_samples WHERE name = 'node-k'");
	ck_assert_int_ge(rows1, 3);
	ck_assert_int_eq(sql_num("SELECT COALESCE(sum(nodes), 0) FROM cluster_reports"), rows1);
	/* silent past the stale limit: the brain shows it stale */
	sql_num("UPDATE cluster_nodes SET updated_at = now() - interval '200 seconds'");
	ck_assert(stale_of("node-k"));

	mon_start(args);
	cJSON_Delete(health_until(brain_ok_drained, "the brain again"));
	ck_assert(!stale_of("node-k"));
	long long samples, sent;
	stop_drained(&samples, &sent);
	long long rows = sql_num("SELECT count(*) FROM cluster_node_samples WHERE name = 'node-k'");
	ck_assert_int_eq(rows, rows1 + sent);
	ck_assert_int_eq(sql_num("SELECT count(DISTINCT ts_ms) FROM cluster_node_samples"
				 " WHERE name = 'node-k'"),
			 rows);
	/* every report stored once and whole: their node counts add up */
	ck_assert_int_eq(sql_num("SELECT COALESCE(sum(nodes), 0) FROM cluster_reports"), rows);
	/* the node's row is the newest sample */
	ck_assert_int_eq(sql_num("SELECT count(*) FROM cluster_nodes n WHERE n.name = 'node-k'"
				 " AND n.ts_ms = (SELECT max(ts_ms) FROM cluster_node_samples"
				 " WHERE name = 'node-k')"),
			 1);
}
END_TEST

static bool overflowing(const cJSON *h)
{
	return rv_test_json_num(h, "dropped", 0) >= 5;
}

START_TEST(test_buffer_is_bounded)
{
	/* a brain that is not there: a port nobody listens on */
	const char *args[] = { "--brain",
			       "http://127.0.0.1:9",
			       "--node",
			       "node-c",
			       "--interval-ms",
			       "100",
			       "--buffer-max",
			       "5",
			       "--report-batch-max",
			       "2",
			       NULL };
	mon_start(args);
	cJSON *h = health_until(overflowing, "a full buffer");
	ck_assert_str_eq(rv_test_json_str(h, "brain"), "unreachable");
	ck_assert_int_le((int)rv_test_json_num(h, "buffered", 99), 5);
	ck_assert_ptr_nonnull(rv_test_json_str(h, "last_error"));
	cJSON_Delete(h);
	char *log = NULL;
	ck_assert_int_eq(mon_stop(&log), 0);
	ck_assert_msg(strstr(log, "could not report to the brain") != NULL, "log: %s", log);
	/* said once, not once per attempt */
	ck_assert_ptr_null(strstr(strstr(log, "could not report to the brain") + 1,
				  "could not report to the brain"));
	free(log);
}
END_TEST

START_TEST(test_resent_report_stored_once)
{
	start_brain();
	const char *doc = "{\"report_id\":\"r-42\",\"nodes\":[{\"name\":\"n9\",\"ts\":1000,"
			  "\"cpu\":8,\"memory_mb\":4096,\"cpu_used\":1,\"memory_used_mb\":100,"
			  "\"jobs\":[{\"name\":\"j\",\"procs\":3,\"cpu_used\":0.5}]}]}";
	for (int i = 0; i < 2; i++) {
		struct rv_test_reply r;
		ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/cluster/nodes", doc, NULL, &r),
				 0);
		ck_assert_int_eq(r.status, 200);
		ck_assert_int_eq((int)rv_test_json_num(r.json, "accepted", 0), 1);
		ck_assert(cJSON_IsBool(cJSON_GetObjectItem(r.json, "duplicate")));
		ck_assert_int_eq(cJSON_IsTrue(cJSON_GetObjectItem(r.json, "duplicate")), i == 1);
		rv_test_reply_release(&r);
	}
	ck_assert_int_eq(sql_num("SELECT count(*) FROM cluster_node_samples"), 1);
	ck_assert_int_eq(sql_num("SELECT count(*) FROM cluster_reports"), 1);
	ck_assert_int_eq(sql_num("SELECT (jobs->0->>'procs')::int FROM cluster_node_samples"), 3);
}
END_TEST

/* ---- --k8s against the Kubernetes stand-in ---- */

static struct {
	struct rv_proc proc;
	char dir[64];
	char kubeconfig[128];
	struct rv_test_brain api; /* url, for rv_test_http */
} sti;

static void standin_stop(void)
{
	rv_test_standin_stop(&sti.proc, sti.dir);
	memset(&sti, 0, sizeof(sti));
}

/* One node of 3 CPUs and 5 GiB (not this host's), pod cgroups named as
 * the given driver names them; a kubeconfig for it. */
static void standin_start(const char *driver)
{
	snprintf(sti.dir, sizeof(sti.dir), "/tmp/rover-monk8s-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(sti.dir));
	const char *const extra[] = {
		"--nodes",         "1",    "--node-cpu", "3", "--node-memory", "5Gi",
		"--cgroup-driver", driver, NULL
	};
	int port = rv_test_standin_spawn(&sti.proc, sti.dir, extra);
	ck_assert_msg(port > 0, "the stand-in did not start");
	snprintf(sti.api.url, sizeof(sti.api.url), "http://127.0.0.1:%d", port);
	snprintf(sti.kubeconfig, sizeof(sti.kubeconfig), "%s/kubeconfig", sti.dir);
	ck_assert_int_eq(rv_test_kubeconfig_write(sti.kubeconfig, sti.api.url, NULL, NULL), 0);
}

/* A pod running sh -c script, of job (NULL: no Rover labels). */
static void pod_create(const char *name, const char *job, const char *script)
{
	char labels[256] = "{}", body[1024];
	if (job)
		snprintf(labels, sizeof(labels),
			 "{\"rover.dev/job\":\"%s\",\"rover.dev/role\":\"worker\","
			 "\"rover.dev/rank\":\"0\"}",
			 job);
	snprintf(body, sizeof(body),
		 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
		 "\"labels\":%s},\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{"
		 "\"name\":\"main\",\"image\":\"x\",\"command\":[\"sh\",\"-c\",\"%s\"],"
		 "\"resources\":{\"limits\":{\"memory\":\"256Mi\"}}}]}}",
		 name, labels, script);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&sti.api, "POST", "/api/v1/namespaces/default/pods", body,
				      NULL, &r),
			 0);
	ck_assert_msg(r.status == 201, "create %s: %ld %s", name, r.status, r.body);
	rv_test_reply_release(&r);
}

/* The cgroup root the monitor is pointed at: 0 the stand-in's own folder
 * (where its kubepods folder is), 1 the mount itself (the whole tree). */
static void cgroup_root_of_standin(int which, char *out, size_t size)
{
	char mnt[256], own[512];
	enum rv_cgroup_mode mode = rv_usage_cgroup_mode(mnt, sizeof(mnt));
	if (mode == RV_CGROUP_V1 ||
	    access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) == 0) {
		if (which == 1) {
			snprintf(out, size, "/sys/fs/cgroup");
			return;
		}
		ck_assert_int_eq(rv_usage_pid_cgroup(sti.proc.pid, RV_CGROUP_V1, "", "memory", own,
						     sizeof(own)),
				 0);
	} else {
		if (which == 1) {
			snprintf(out, size, "%s", mnt);
			return;
		}
		ck_assert_int_eq(rv_usage_pid_cgroup(sti.proc.pid, RV_CGROUP_V2, mnt, "memory", own,
						     sizeof(own)),
				 0);
	}
	snprintf(out, size, "%s/k8s-standin-%d", own, (int)sti.proc.pid);
}

/* node-0 in the brain's /v1/cluster once pred holds (20 s at most). */
static cJSON *cluster_until(bool (*pred)(const cJSON *node), const char *what)
{
	for (int i = 0; i < 200; i++) {
		cJSON *cl = get_json(&brain, "/v1/cluster");
		const cJSON *node = cl ? find_node(cl, "node-0") : NULL;
		if (node && pred(node))
			return cl;
		cJSON_Delete(cl);
		usleep(100 * 1000);
	}
	cJSON *cl = get_json(&brain, "/v1/cluster");
	char *txt = cl ? cJSON_PrintUnformatted(cl) : NULL;
	ck_abort_msg("the brain never had %s: %s; monitor log: %s", what, txt ? txt : "none",
		     rv_test_read_file(mon.log));
	return NULL;
}

static bool both_jobs(const cJSON *node)
{
	const cJSON *a = find_job(node, "kjob-a");
	return a && find_job(node, "kjob-b") && rv_test_json_num(a, "cpu_used", 0) > 0.1;
}

static bool b_gone(const cJSON *node)
{
	return find_job(node, "kjob-a") && !find_job(node, "kjob-b");
}

/* The loop's i: 0 the cgroupfs driver and the stand-in's own folder as the
 * root, 1 the systemd driver and the whole cgroup mount. */
START_TEST(test_k8s_jobs_from_pod_cgroups)
{
	const char *why = NULL;
	if (!rv_test_cgroup_memory_usable(&why)) {
		RV_TEST_SKIP(true, "no memory cgroup for the stand-in's kubelet: %s", why);
		return;
	}
	start_brain();
	standin_start(_i == 0 ? "cgroupfs" : "systemd");
	pod_create("other", NULL, "sleep 300");
	char root[640];
	cgroup_root_of_standin(_i, root, sizeof(root));
	const char *args[] = { "--k8s",        "--kubeconfig",
			       sti.kubeconfig, "--node",
			       "node-0",       "--cgroup-root",
			       root,           "--brain",
			       brain.url,      "--interval-ms",
			       "200",          "--report-interval-ms",
			       "200",          NULL };
	mon_start(args);
	/* created after the monitor's first list: seen through its watch */
	pod_create("busy", "kjob-a", "while :; do :; done");
	pod_create("idle", "kjob-b", "exec sleep 300");

	cJSON *cl = cluster_until(both_jobs, "jobs kjob-a (busy) and kjob-b");
	const cJSON *node = find_node(cl, "node-0");
	ck_assert_int_eq((int)rv_test_json_num(node, "cpu", 0), 3);
	ck_assert_int_eq((long long)rv_test_json_num(node, "memory_mb", 0), 5120);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(node, "jobs")), 2);
	ck_assert_int_eq((int)rv_test_json_num(find_job(node, "kjob-b"), "procs", 0), 1);
	ck_assert_int_ge((int)rv_test_json_num(find_job(node, "kjob-a"), "procs", 0), 1);
	ck_assert(rv_test_json_num(find_job(node, "kjob-b"), "cpu_used", -1) < 0.1);
	cJSON_Delete(cl);

	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&sti.api, "DELETE",
				      "/api/v1/namespaces/default/pods/idle?gracePeriodSeconds=0",
				      NULL, NULL, &r),
			 0);
	ck_assert_msg(r.status == 200, "delete: %ld %s", r.status, r.body);
	rv_test_reply_release(&r);
	cJSON_Delete(cluster_until(b_gone, "kjob-a without kjob-b after its pod was deleted"));
	ck_assert_int_eq(mon_stop(NULL), 0);
}
END_TEST

static Suite *monitor_suite(void)
{
	TCase *tc = RV_TEST_TCASE("monitor", 90, test_cli, test_reports_this_host,
				  test_gpus_from_gpuinfo, test_brain_down_then_up,
				  test_buffer_is_bounded, test_resent_report_stored_once,
				  test_kill9_mid_report_and_restart);
	tcase_add_loop_test(tc, test_k8s_jobs_from_pod_cgroups, 0, 2);
	tcase_add_checked_fixture(tc, NULL, teardown);
	return RV_TEST_SUITE("monitor", tc);
}

RV_TEST_MAIN_PG(monitor_suite)
