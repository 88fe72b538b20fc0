/*
 * check_master_k8s.c: the real rover-master with its k8s scheduler backend
 * against the Kubernetes stand-in (tests/k8s: an API server whose kubelet
 * runs each pod as a local process), driven and judged with kubectl:
 *   - the digits example (examples/digits_rover.py, rover-run and real
 *     PyTorch in each pod) as two worker pods made from the job's pod
 *     template; mid-run the pod watch is cut mid-event, then answered 410
 *     Gone, then a worker pod is deleted with kubectl: it comes back as a
 *     new pod with its rank, each pod's start and end is seen once, the
 *     job reaches its accuracy with every sample trained exactly once;
 *   - the master killed -9 mid-run and restarted on its state folder
 *     adopts the running pods (no pod relaunched) and the job completes;
 *   - a pod OOM-killed under its limit comes back with more memory;
 *   - a gang that cannot be placed fails after k8s.max_pending_s, the
 *     master's reason naming the scheduler's;
 *   - a pod deleted by someone, or evicted, is a lost node: relaunched without a
 *     restart spent, the reason naming its node, the new pod on another.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "k8sfix.h"
#include "masterfix.h"
#include "parse.h"
#include "proc.h"
#include "runfix.h"
#include "testutil.h"

struct standin {
	struct rv_proc proc;
	char dir[256];
	char kubeconfig[320];
	struct rv_test_brain api; /* url and port, for rv_test_http */
};

static struct standin sti;
static struct rv_test_master master;

static const char *bin_dir(void)
{
	return getenv("ROVER_BIN_DIR") ? getenv("ROVER_BIN_DIR") : "build/bin";
}

/* The stand-in with extra args, its port, a kubeconfig for it. */
static void standin_start(const char *const *extra)
{
	snprintf(sti.dir, sizeof(sti.dir), "/tmp/rover-k8s-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(sti.dir));
	sti.api.port = rv_test_standin_spawn(&sti.proc, sti.dir, extra);
	ck_assert_msg(sti.api.port > 0, "the stand-in did not start");
	snprintf(sti.api.url, sizeof(sti.api.url), "http://127.0.0.1:%d", sti.api.port);
	snprintf(sti.kubeconfig, sizeof(sti.kubeconfig), "%s/kubeconfig", sti.dir);
	ck_assert_int_eq(rv_test_kubeconfig_write(sti.kubeconfig, sti.api.url, NULL, NULL), 0);
}

static void teardown(void)
{
	rv_test_master_cleanup(&master);
	memset(&master, 0, sizeof(master));
	rv_test_standin_stop(&sti.proc, sti.dir);
	memset(&sti, 0, sizeof(sti));
}

/* kubectl ARGS against the stand-in: its exit status, stdout+stderr in *out
 * (malloc'd) when out is not NULL. */
static int kubectl(char **out, const char *const *args)
{
	return rv_test_kubectl(sti.kubeconfig, out, args);
}

/* The names of the pods of rank (or all: rank < 0) in phase ("" any),
 * space-separated, from kubectl; malloc'd. */
static char *pods(int rank, const char *phase)
{
	char sel[64], jp[160];
	if (rank >= 0)
		snprintf(sel, sizeof(sel), "rover.dev/rank=%d", rank);
	else
		snprintf(sel, sizeof(sel), "rover.dev/job");
	snprintf(jp, sizeof(jp),
		 "jsonpath={range .items[*]}{.metadata.name}:{.status.phase}{\" \"}{end}");
	const char *args[] = { "get", "pods", "-l", sel, "-o", jp, NULL };
	char *out = NULL;
	int rc = kubectl(&out, args);
	ck_assert_msg(rc == 0, "kubectl get pods: %d %s", rc, out);
	if (phase[0]) {
		/* keep the names of that phase */
		char *keep = calloc(1, strlen(out) + 1);
		char *save = NULL;
		for (char *t = strtok_r(out, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
			char *colon = strrchr(t, ':');
			if (colon && !strcmp(colon + 1, phase)) {
				*colon = 0;
				strcat(strcat(keep, t), " ");
			}
		}
		free(out);
		return keep;
	}
	return out;
}

/* Wait up to timeout_ms until pods(rank, phase) holds at least n names. */
static char *wait_pods(int rank, const char *phase, int n, int timeout_ms)
{
	int64_t until = rv_mono_ms() + timeout_ms;
	for (;;) {
		char *p = pods(rank, phase);
		int k = 0;
		for (const char *c = p; (c = strchr(c, ' ')); c++)
			k++;
		if (k >= n || rv_mono_ms() > until)
			return p;
		free(p);
		usleep(200 * 1000);
	}
}

static void admin(const char *path)
{
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&sti.api, "POST", path, "", NULL, &r), 0);
	ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body);
	rv_test_reply_release(&r);
}

/* Start the master on spec with --scheduler k8s against the stand-in. */
static void master_start(const char *spec, const char *const *extra)
{
	ck_assert_int_eq(rv_test_master_init(&master, spec), 0);
	static const char *args[32];
	int n = 0;
	args[n++] = "--scheduler";
	args[n++] = "k8s";
	args[n++] = "--kubeconfig";
	args[n++] = sti.kubeconfig;
	args[n++] = "--linger-s";
	args[n++] = "1";
	args[n++] = "--rdzv-last-call-ms";
	args[n++] = "1000";
	for (int i = 0; extra && extra[i] && n < 31; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	ck_assert_int_eq(rv_test_master_start(&master, args), 0);
}

/* Wait for the master to exit by itself: its exit code; the log is
 * printed when it is not want. */
static int master_exit(int timeout_ms, int want)
{
	int st = 0;
	int rc = rv_proc_wait(&master.proc, timeout_ms, &st);
	int code = rc == 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (code != want) {
		char *log = rv_test_read_file(master.log);
		fprintf(stderr, "diag: master log:\n%s\n", log ? log : "");
		free(log);
	}
	ck_assert_msg(rc == 0, "the master did not exit: %d", rc);
	rv_proc_release(&master.proc);
	master.pid = 0;
	return code;
}

/* The master's log and the stand-in's, on stderr (a failure's diagnosis). */
static void dump(void)
{
	char path[320];
	snprintf(path, sizeof(path), "%s/standin.log", sti.dir);
	const char *const files[] = { master.log, path };
	for (int i = 0; i < 2; i++) {
		char *log = rv_test_read_file(files[i]);
		fprintf(stderr, "diag: %s:\n%s\n", files[i], log ? log : "");
		free(log);
	}
}

/* How many lines of the master's log hold every one of the needles. */
static int log_count(const char *a, const char *b)
{
	char *log = rv_test_read_file(master.log);
	int k = 0;
	for (char *line = log ? strtok(log, "\n") : NULL; line; line = strtok(NULL, "\n"))
		k += strstr(line, a) && (!b || strstr(line, b));
	free(log);
	return k;
}

/* The digits job: two worker pods, each rover-run with one PyTorch worker. */
static char *digits_spec(const char *name, const char *shard_log, int epochs)
{
	char bin[PATH_MAX], script[PATH_MAX];
	ck_assert_ptr_nonnull(realpath(bin_dir(), bin));
	ck_assert_ptr_nonnull(realpath("examples/digits_rover.py", script));
	char *spec = NULL;
	ck_assert_int_ge(
		asprintf(&spec,
			 "{\"apiVersion\":\"elastic.iml.github.io/"
			 "v1alpha1\",\"kind\":\"ElasticJob\","
			 "\"metadata\":{\"name\":\"%s\"},"
			 "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
			 "\"optimizeMode\":\"manual\",\"replicaSpecs\":{\"worker\":{"
			 "\"replicas\":2,\"minReplicas\":1,\"maxReplicas\":2,\"restartCount\":3,"
			 "\"template\":{\"metadata\":{\"labels\":{\"app\":\"digits\"}},\"spec\":{"
			 "\"containers\":[{\"name\":\"main\",\"image\":\"rover-worker:test\","
			 "\"command\":[\"%s/rover-run\",\"--nproc-per-node\",\"1\","
			 "\"--max-restarts\",\"2\",\"--ckpt-dir\",\"%s/"
			 "ckpt\",\"%s\",\"--batch-size\",\"16\",\"--step-sleep\","
			 "\"0.05\",\"--target\",\"0.9\",\"--shard-log\",\"%s\"],"
			 "\"env\":[{\"name\":\"PYTHON_EXEC\",\"value\":\"/usr/bin/python3\"},"
			 "{\"name\":\"PATH\",\"value\":\"/usr/bin:/bin\"}],"
			 "\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"2Gi\"}}}]}}}},"
			 "\"datasets\":[{\"name\":\"digits\",\"size\":1437,\"shardSize\":32,"
			 "\"epochs\":%d,\"shuffle\":true}]}}",
			 name, bin, sti.dir, script, shard_log, epochs),
		0);
	return spec;
}

/* The stand-in (nodes of 4 CPUs and 16Gi) and a master running the digits
 * job k8s-PID (its name into name) for epochs, its shard log at log. */
static void digits_start(int epochs, char *name, size_t nsize, char *log, size_t lsize)
{
	const char *sargs[] = { "--node-cpu", "4", "--node-memory", "16Gi", NULL };
	standin_start(sargs);
	snprintf(log, lsize, "%s/shards.log", sti.dir);
	snprintf(name, nsize, "k8s-%d", (int)getpid());
	char *spec = digits_spec(name, log, epochs);
	master_start(spec, NULL);
	free(spec);
}

/* Every sample of size x epochs in the shard log exactly once, counting
 * only the steps before each load (those after are trained again). */
static void assert_exactly_once(const char *path, long size, int epochs)
{
	long lost, twice;
	unsigned ranks;
	int loads;
	rv_test_shard_account(path, size, epochs, &lost, &twice, &ranks, &loads);
	if (lost || twice) {
		dump();
		char cmd[900];
		snprintf(cmd, sizeof(cmd),
			 "cp %s /tmp/rover-k8s-shards.log; find %s/pods -name '*.log' | "
			 "while read f; do echo \"== $f\"; tail -n 40 \"$f\"; done >&2",
			 path, sti.dir);
		if (system(cmd) != 0)
			fprintf(stderr, "diag: could not show the pod logs\n");
	}
	ck_assert_msg(lost == 0 && twice == 0, "%ld samples lost, %ld trained twice", lost, twice);
}

/* Rank 0's test accuracy from its pod logs: the last one printed. */
static double accuracy(void)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd),
		 "find %s/pods -name '*.log' -exec cat {} + 2>/dev/null | "
		 "grep -o 'test_accuracy=[0-9.]*' | tail -1",
		 sti.dir);
	FILE *p = popen(cmd, "r");
	char line[128] = "";
	if (p && !fgets(line, sizeof(line), p))
		line[0] = 0;
	if (p)
		pclose(p);
	const char *eq = strchr(line, '=');
	return eq ? strtod(eq + 1, NULL) : -1;
}

START_TEST(test_digits_pods_survive_watch_faults_and_a_delete)
{
	RV_TEST_NEED_KUBECTL();
	char log[400], name[64];
	digits_start(6, name, sizeof(name), log, sizeof(log));
	free(wait_pods(-1, "Running", 2, 60000));
	ck_assert_msg(rv_test_wait_lines(log, 10, 120000), "no 10 steps trained");
	/* the watch cut mid-event, then 410 Gone on the resumed watch */
	admin("/standin/watches/cut?mid=true");
	admin("/standin/watches/expire?count=1");
	admin("/standin/watches/cut");
	/* a worker pod deleted with kubectl comes back with its rank */
	char *old = pods(1, "Running");
	ck_assert_msg(strlen(old) > 1, "no running pod of rank 1");
	old[strcspn(old, " ")] = 0;
	const char *del[] = { "delete", "pod", old, "--wait=false", NULL };
	char *out = NULL;
	ck_assert_msg(kubectl(&out, del) == 0, "kubectl delete: %s", out);
	free(out);
	/* "NAME:PHASE NAME:PHASE ": another pod than the deleted one */
	char *now = NULL, gone[96];
	snprintf(gone, sizeof(gone), "%s:", old);
	int64_t until = rv_mono_ms() + 90000;
	bool back = false;
	do {
		free(now);
		usleep(100 * 1000);
		now = pods(1, "");
		back = false;
		for (const char *t = now; *t; t += strcspn(t, " ") + (t[strcspn(t, " ")] != 0))
			back |= *t != ' ' && strncmp(t, gone, strlen(gone)) != 0;
	} while (!back && rv_mono_ms() < until);
	if (!back)
		dump();
	ck_assert_msg(back, "rank 1 did not come back: %s", now);
	free(now);
	ck_assert_int_eq(master_exit(300000, 0), 0);
	/* each pod's start and end seen once through the cut and the 410 */
	char inst[80];
	snprintf(inst, sizeof(inst), "instance=%s ", old + strlen(name) + 1);
	if (log_count(inst, "event=started") != 1 || log_count(inst, "event=exited") != 1)
		dump();
	ck_assert_int_eq(log_count(inst, "event=started"), 1);
	ck_assert_int_eq(log_count(inst, "event=exited"), 1);
	ck_assert_int_eq(log_count("node relaunched", "node=worker-1"), 1);
	ck_assert_int_eq(log_count("node relaunched", "node=worker-0"), 0);
	free(old);
	assert_exactly_once(log, 1437, 6);
	double acc = accuracy();
	ck_assert_msg(acc >= 0.9, "accuracy %.4f", acc);
	/* the pods are gone with the job */
	char *left = wait_pods(-1, "", 0, 1);
	ck_assert_msg(!strstr(left, "Running"), "pods left: %s", left);
	free(left);
}
END_TEST

START_TEST(test_master_kill9_adopts_pods)
{
	RV_TEST_NEED_KUBECTL();
	char log[400], name[64];
	digits_start(2, name, sizeof(name), log, sizeof(log));
	char *before = wait_pods(-1, "Running", 2, 60000);
	ck_assert_msg(rv_test_wait_lines(log, 5, 120000), "no 5 steps trained");
	ck_assert_int_eq(rv_test_master_stop(&master, SIGKILL, 5000) >= 0, 1);
	ck_assert_int_eq(rv_test_master_restart(&master), 0);
	ck_assert_int_eq(master_exit(300000, 0), 0);
	ck_assert_int_eq(log_count("node adopted after a master restart", "rc=0"), 2);
	/* no pod relaunched: neither rank got a second instance */
	ck_assert_int_eq(log_count("instance=worker-0.1", NULL), 0);
	ck_assert_int_eq(log_count("instance=worker-1.1", NULL), 0);
	free(before);
	assert_exactly_once(log, 1437, 2);
}
END_TEST

START_TEST(test_oom_pod_comes_back_with_more_memory)
{
	const char *why = "";
	if (!rv_test_cgroup_memory_usable(&why)) {
		RV_TEST_SKIP(true, "no memory cgroup for the stand-in's kubelet: %s", why);
		return;
	}
	standin_start(NULL);
	char spec[2048];
	/* allocates 300 MiB while its limit is below 400 MiB */
	snprintf(spec, sizeof(spec),
		 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		 "\"metadata\":{\"name\":\"oom-%d\"},\"spec\":{\"distributionStrategy\":"
		 "\"AllreduceStrategy\",\"optimizeMode\":\"single-job\",\"replicaSpecs\":{"
		 "\"worker\":{"
		 "\"replicas\":1,\"restartCount\":0,\"template\":{\"spec\":{\"containers\":[{"
		 "\"name\":\"main\",\"command\":[\"/usr/bin/python3\",\"-c\",\"import os\\n"
		 "if int(os.environ['ROVER_NODE_MEMORY_MB']) < 400:\\n"
		 "    b = bytearray(300 << 20)\\n    for i in range(0, len(b), 4096): b[i] = 1\\n"
		 "    raise SystemExit(3)\\n\"],"
		 "\"resources\":{\"limits\":{\"cpu\":\"1\",\"memory\":\"200Mi\"}}}]}}}},"
		 "\"datasets\":[{\"name\":\"train\",\"size\":10,\"shardSize\":10}]}}",
		 (int)getpid());
	master_start(spec, NULL);
	ck_assert_int_eq(master_exit(120000, 0), 0);
	ck_assert_int_eq(log_count("event=oom", NULL), 1);
	ck_assert_int_ge(log_count("node launched", "node=worker-0 instance=worker-0.1"), 1);
	char *log = rv_test_read_file(master.log);
	const char *relaunch = strstr(log, "instance=worker-0.1 role=worker");
	ck_assert_msg(relaunch, "no relaunch");
	const char *mb = strstr(relaunch, "memory_mb=");
	ck_assert_msg(mb && atoi(mb + 10) > 200, "relaunched with %.20s", mb);
	free(log);
}
END_TEST

START_TEST(test_unplaceable_gang_fails_naming_the_reason)
{
	RV_TEST_NEED_KUBECTL();
	standin_start(NULL);
	char spec[1024];
	snprintf(spec, sizeof(spec),
		 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		 "\"metadata\":{\"name\":\"gang-%d\"},\"spec\":{\"distributionStrategy\":"
		 "\"AllreduceStrategy\",\"optimizeMode\":\"manual\",\"replicaSpecs\":{\"worker\":{"
		 "\"replicas\":2,\"restartCount\":0,\"resources\":{\"cpu\":64,\"memory\":\"1Gi\"},"
		 "\"command\":[\"/bin/sleep\",\"30\"]}},"
		 "\"datasets\":[{\"name\":\"train\",\"size\":10,\"shardSize\":10}]}}",
		 (int)getpid());
	setenv("ROVER_K8S_MAX_PENDING_S", "3", 1);
	int64_t t0 = rv_mono_ms();
	master_start(spec, NULL);
	unsetenv("ROVER_K8S_MAX_PENDING_S");
	free(wait_pods(-1, "Pending", 2, 20000));
	ck_assert_int_eq(master_exit(60000, 1), 1);
	int64_t took = rv_mono_ms() - t0;
	ck_assert_msg(took >= 3000, "failed after %lld ms", (long long)took);
	ck_assert_int_ge(log_count("job finished", "Unschedulable"), 1);
	ck_assert_int_ge(log_count("job finished", "Insufficient cpu"), 1);
}
END_TEST

/* The node a pod runs on, from kubectl ("" when none); malloc'd. */
static char *pod_node(const char *pod)
{
	const char *args[] = { "get", "pod", pod, "-o", "jsonpath={.spec.nodeName}", NULL };
	char *out = NULL;
	ck_assert_msg(kubectl(&out, args) == 0, "kubectl get pod %s: %s", pod, out);
	out[strcspn(out, " \n")] = 0;
	return out;
}

/* The one running pod of rank, waiting up to 60 s for it; malloc'd. */
static char *running_pod(int rank)
{
	char *p = wait_pods(rank, "Running", 1, 60000);
	p[strcspn(p, " ")] = 0;
	ck_assert_msg(p[0], "no running pod of rank %d", rank);
	return p;
}

/* A pod deleted by someone (kubectl delete), or evicted by its node's
 * kubelet (Failed, reason Evicted, killed: exit 137), is a lost node: its
 * relaunch spends no restart (restartCount 0 here, so a charged one would
 * fail the job), its reason names the pod's node, and the new pod keeps
 * off that node (three nodes: the stand-in's spreading would otherwise
 * put it back on the same, emptiest-first then by name). */
static void lost_pod_moves(bool evict)
{
	RV_TEST_NEED_KUBECTL();
	const char *sargs[] = { "--nodes", "3", NULL };
	standin_start(sargs);
	char spec[1024];
	snprintf(spec, sizeof(spec),
		 "{\"apiVersion\":\"elastic.iml.github.io/v1alpha1\",\"kind\":\"ElasticJob\","
		 "\"metadata\":{\"name\":\"del-%d\"},\"spec\":{\"distributionStrategy\":"
		 "\"AllreduceStrategy\",\"optimizeMode\":\"manual\",\"replicaSpecs\":{\"worker\":{"
		 "\"replicas\":2,\"restartCount\":0,\"resources\":{\"cpu\":1,\"memory\":\"64Mi\"},"
		 "\"command\":[\"/bin/sleep\",\"600\"]}}}}",
		 (int)getpid());
	master_start(spec, NULL);
	free(wait_pods(-1, "Running", 2, 60000));
	char *old = running_pod(1);
	char *was = pod_node(old);
	ck_assert_msg(was[0], "pod %s has no node", old);
	if (evict) {
		char path[300];
		snprintf(path, sizeof(path), "/standin/pods/default/%s/evict", old);
		admin(path);
	} else {
		const char *del[] = { "delete", "pod", old, "--wait=false", NULL };
		char *out = NULL;
		ck_assert_msg(kubectl(&out, del) == 0, "kubectl delete: %s", out);
		free(out);
	}
	char *now = NULL;
	int64_t until = rv_mono_ms() + 60000;
	do {
		free(now);
		usleep(200 * 1000);
		now = pods(1, "Running");
		now[strcspn(now, " ")] = 0;
	} while ((!now[0] || !strcmp(now, old)) && rv_mono_ms() < until);
	if (!now[0] || !strcmp(now, old))
		dump();
	ck_assert_msg(now[0] && strcmp(now, old) != 0, "rank 1 did not come back: %s", now);
	char *host = pod_node(now);
	ck_assert_msg(strcmp(host, was) != 0, "pod %s is back on %s, the node %s was deleted on",
		      now, host, old);
	char on[96];
	snprintf(on, sizeof(on), "on host %s", was);
	if (log_count("node relaunched", on) != 1 ||
	    log_count("node relaunched", "not counted as a restart") != 1)
		dump();
	ck_assert_int_eq(log_count("node relaunched", on), 1);
	ck_assert_int_eq(log_count("node relaunched", "not counted as a restart"), 1);
	if (evict)
		ck_assert_int_eq(log_count("node relaunched", "pod evicted"), 1);
	ck_assert_int_eq(log_count("node given up", NULL), 0);
	int st = rv_test_master_stop(&master, SIGTERM, 30000);
	ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "master status %d", st);
	free(old);
	free(was);
	free(now);
	free(host);
}

START_TEST(test_deleted_pod_is_lost_and_moves)
{
	lost_pod_moves(false);
}
END_TEST

START_TEST(test_evicted_pod_is_lost_and_moves)
{
	lost_pod_moves(true);
}
END_TEST

static void add_case(Suite *s, const char *name, const TTest *t)
{
	TCase *tc = tcase_create(name);
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 420);
	tcase_add_test(tc, t);
	suite_add_tcase(s, tc);
}

static Suite *master_k8s_suite(void)
{
	Suite *s = suite_create("master_k8s");
	add_case(s, "digits", test_digits_pods_survive_watch_faults_and_a_delete);
	add_case(s, "adopt", test_master_kill9_adopts_pods);
	add_case(s, "oom", test_oom_pod_comes_back_with_more_memory);
	add_case(s, "gang", test_unplaceable_gang_fails_naming_the_reason);
	add_case(s, "deleted", test_deleted_pod_is_lost_and_moves);
	add_case(s, "evicted", test_evicted_pod_is_lost_and_moves);
	return s;
}

RV_TEST_MAIN(master_k8s_suite)
