/*
 * check_operator.c: rover-operator against the Kubernetes stand-in
 * (tests/k8s), driven and judged with kubectl, every part a real process:
 *   - the digits example (examples/digits_rover.py, rover-run and real
 *     PyTorch in each worker pod) as an ElasticJob kubectl applies: the
 *     operator makes the master pod and its Service, the master makes two
 *     worker pods; a worker pod deleted mid-run comes back with its rank;
 *     the master killed -9 is made again and adopts the worker pods; the
 *     job reaches its accuracy with every sample trained exactly once;
 *     status Succeeded with one restart; `kubectl delete` takes the rest;
 *   - the operator killed -9 while its create of the master pod is in
 *     flight, and started again: one master pod, never two;
 *   - two operators: one leads (the Lease names it), the other takes over
 *     when the leader is killed -9 and carries the job on; a bad
 *     ElasticJob is refused naming the field; `roverctl submit
 *     --kubeconfig` creates one (a second time: exit 5);
 *   - the operator's watches cut mid-event, answered 410, the API server
 *     restarted: it carries on; spec.suspend stops the pods, a resume
 *     makes a new master;
 *   - each job's master under its own service account (bound to the
 *     master's ClusterRole), its state on a claim the job owns (the new
 *     master of the digits job replays its journal from it); a job made
 *     again under a deleted one's name: the old worker pods swept by uid;
 *     the table of polled masters back to empty once the jobs are gone;
 *   - a job made again while the deleted one's state claim is held (a
 *     finalizer): StateClaimBusy and no master pod until the claim is
 *     gone, then its own claim and a master with replayed=0;
 *   - with master.state_root, a job made again under a deleted one's name
 *     in a folder of its own (ROOT/NS/NAME-UID), starting fresh;
 *   - a master's newest plan in status.lastPlan and a PlanApplied Event;
 *     `kubectl get elasticjobs -o wide` printing the live status's columns.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "k8sfix.h"
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

#define MAX_OPS 2

static struct standin sti;
static struct rv_proc ops[MAX_OPS];
static int master_port;

static const char *bin_dir(void)
{
	return getenv("ROVER_BIN_DIR") ? getenv("ROVER_BIN_DIR") : "build/bin";
}

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(sa);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* The stand-in process on port (0: a free one, read back). */
static void standin_spawn(int port)
{
	char pstr[16];
	snprintf(pstr, sizeof(pstr), "%d", port);
	const char *const extra[] = { "--node-cpu", "4", "--node-memory", "16Gi", "--port",
				      pstr,         NULL };
	sti.api.port = rv_test_standin_spawn(&sti.proc, sti.dir, extra);
	ck_assert_msg(sti.api.port > 0, "the stand-in did not start");
}

static void standin_stop(void)
{
	if (sti.proc.pid <= 0)
		return;
	rv_proc_kill(&sti.proc, SIGTERM);
	int st;
	if (rv_proc_wait(&sti.proc, 10000, &st) == -ETIMEDOUT) {
		rv_proc_kill(&sti.proc, SIGKILL);
		rv_proc_wait(&sti.proc, -1, &st);
	}
	rv_proc_release(&sti.proc);
	memset(&sti.proc, 0, sizeof(sti.proc));
}

/* The stand-in, its port, a kubeconfig for it. */
static void standin_start(void)
{
	snprintf(sti.dir, sizeof(sti.dir), "/tmp/rover-op-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(sti.dir));
	standin_spawn(0);
	snprintf(sti.api.url, sizeof(sti.api.url), "http://127.0.0.1:%d", sti.api.port);
	snprintf(sti.kubeconfig, sizeof(sti.kubeconfig), "%s/kubeconfig", sti.dir);
	ck_assert_int_eq(rv_test_kubeconfig_write(sti.kubeconfig, sti.api.url, NULL, NULL), 0);
	master_port = free_port();
}

static void op_stop(int i, int sig)
{
	if (ops[i].pid <= 0)
		return;
	rv_proc_kill(&ops[i], sig);
	int st;
	if (rv_proc_wait(&ops[i], 10000, &st) == -ETIMEDOUT) {
		rv_proc_kill(&ops[i], SIGKILL);
		rv_proc_wait(&ops[i], -1, &st);
	}
	rv_proc_release(&ops[i]);
	memset(&ops[i], 0, sizeof(ops[i]));
}

static void teardown(void)
{
	for (int i = 0; i < MAX_OPS; i++)
		op_stop(i, SIGTERM);
	standin_stop();
	if (sti.dir[0] && !getenv("ROVER_TEST_KEEP")) {
		const char *argv[] = { "rm", "-rf", sti.dir, NULL };
		struct rv_proc_opts o = { .argv = argv };
		rv_proc_run(&o, 20000, NULL, NULL);
	}
	memset(&sti, 0, sizeof(sti));
}

/* kubectl ARGS against the stand-in: its exit status, stdout+stderr in *out
 * (malloc'd) when out is not NULL. */
static int kubectl(char **out, const char *const *args)
{
	return rv_test_kubectl(sti.kubeconfig, out, args);
}

/* kubectl's output (trimmed), malloc'd; "" on failure. */
static char *kget(const char *const *args)
{
	char *out = NULL;
	if (kubectl(&out, args) != 0)
		out[0] = 0;
	size_t n = strlen(out);
	while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
		out[--n] = 0;
	return out;
}

static char *job_field(const char *job, const char *jsonpath)
{
	char jp[200];
	snprintf(jp, sizeof(jp), "jsonpath={%s}", jsonpath);
	const char *args[] = { "get", "ej", job, "-o", jp, NULL };
	return kget(args);
}

/* Wait until the job's field is want (or timeout_ms passed): true when. */
static bool wait_job_field(const char *job, const char *jsonpath, const char *want, int timeout_ms)
{
	int64_t until = rv_mono_ms() + timeout_ms;
	do {
		char *v = job_field(job, jsonpath);
		bool eq = !strcmp(v, want);
		free(v);
		if (eq)
			return true;
		usleep(200 * 1000);
	} while (rv_mono_ms() < until);
	return false;
}

/* "NAME:PHASE:UID " of the pods matching selector; malloc'd. */
static char *pods(const char *selector)
{
	const char *args[] = { "get",
			       "pods",
			       "-l",
			       selector,
			       "-o",
			       "jsonpath={range .items[*]}{.metadata.name}:{.status.phase}:{"
			       ".metadata.uid}{\" \"}{end}",
			       NULL };
	return kget(args);
}

static int count_words(const char *s, const char *needle)
{
	int k = 0;
	for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
		k++;
	return k;
}

/* Wait until pods(selector) holds n entries containing needle. */
static char *wait_pods(const char *selector, const char *needle, int n, int timeout_ms)
{
	int64_t until = rv_mono_ms() + timeout_ms;
	for (;;) {
		char *p = pods(selector);
		if (count_words(p, needle) >= n || rv_mono_ms() > until)
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

static char *op_log_path(int i)
{
	static char p[2][400];
	snprintf(p[i], sizeof(p[i]), "%s/operator%d.log", sti.dir, i);
	return p[i];
}

/* Operator i (lease id op<i>) with the master pods running master_cmd
 * here (NULL: rover-master); each job's state on a claim of its own, each
 * master under a service account of its own (the defaults). */
static void op_start_with(int i, const char *master_cmd)
{
	char exe[PATH_MAX], bin[PATH_MAX], master[PATH_MAX + 20], port[16], id[16];
	snprintf(exe, sizeof(exe), "%s/rover-operator", bin_dir());
	ck_assert_ptr_nonnull(realpath(bin_dir(), bin));
	snprintf(master, sizeof(master), "%s", master_cmd ? master_cmd : "");
	if (!master_cmd)
		snprintf(master, sizeof(master), "%s/rover-master", bin);
	snprintf(port, sizeof(port), "%d", master_port);
	snprintf(id, sizeof(id), "op%d", i);
	const char *argv[] = { exe,
			       "--listen",
			       "127.0.0.1:0",
			       "--kubeconfig",
			       sti.kubeconfig,
			       "--lease-id",
			       id,
			       "--lease-duration-s",
			       "3",
			       "--lease-renew-ms",
			       "300",
			       "--master-command",
			       master,
			       "--master-kubeconfig",
			       sti.kubeconfig,
			       "--master-addr-host",
			       "127.0.0.1",
			       "--master-port",
			       port,
			       "--master-args",
			       "--linger-s 1 --rdzv-last-call-ms 1000",
			       NULL };
	int fd = open(op_log_path(i), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	struct rv_proc_opts o = { .argv = argv, .pdeathsig = SIGKILL };
	o.io[1] = (struct rv_proc_io){ RV_PROC_FD, fd };
	o.io[2] = (struct rv_proc_io){ RV_PROC_FD, fd };
	ck_assert_int_eq(rv_proc_spawn(&ops[i], &o), 0);
	close(fd);
}

static void op_start(int i)
{
	op_start_with(i, NULL);
}

static int log_count(const char *path, const char *a)
{
	char *log = rv_test_read_file(path);
	int k = log ? count_words(log, a) : 0;
	free(log);
	return k;
}

static void dump(void)
{
	char cmd[1400];
	snprintf(cmd, sizeof(cmd),
		 "for f in %s/operator*.log %s/standin.log; do echo \"== $f\"; tail -n 30 $f; "
		 "done >&2; find %s/pods -name '*.log' | while read f; do echo \"== $f\"; "
		 "tail -n 20 \"$f\"; done >&2",
		 sti.dir, sti.dir, sti.dir);
	if (system(cmd) != 0)
		fprintf(stderr, "diag: could not show the logs\n");
}

static void apply_file(const char *name, const char *text)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/%s", sti.dir, name);
	rv_test_write_file(path, text);
	const char *args[] = { "apply", "-f", path, NULL };
	char *out = NULL;
	int rc = kubectl(&out, args);
	ck_assert_msg(rc == 0, "kubectl apply %s: %s", name, out);
	free(out);
}

static void apply_crd(void)
{
	const char *args[] = { "apply", "-f", "docker/k8s/base/crd-elasticjob.yaml", NULL };
	char *out = NULL;
	int rc = kubectl(&out, args);
	ck_assert_msg(rc == 0, "the CRD: %s", out);
	free(out);
}

/* The digits job as an ElasticJob: two worker pods, each rover-run with one
 * PyTorch worker; command what each worker pod runs ("" the digits). */
static char *job_json(const char *name, const char *shard_log, int epochs, const char *command)
{
	char bin[PATH_MAX], script[PATH_MAX], cmd[2 * PATH_MAX + 600];
	ck_assert_ptr_nonnull(realpath(bin_dir(), bin));
	ck_assert_ptr_nonnull(realpath("examples/digits_rover.py", script));
	if (command[0])
		snprintf(cmd, sizeof(cmd), "\"%s\"", command);
	else
		snprintf(cmd, sizeof(cmd),
			 "\"%s/rover-run\",\"--nproc-per-node\",\"1\",\"--max-restarts\",\"2\","
			 "\"--ckpt-dir\",\"%s/"
			 "ckpt\",\"%s\",\"--batch-size\",\"16\",\"--step-sleep\","
			 "\"0.05\",\"--target\",\"0.9\",\"--shard-log\",\"%s\"",
			 bin, sti.dir, script, shard_log);
	char *spec = NULL;
	ck_assert_int_ge(
		asprintf(&spec,
			 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
			 "\"metadata\":{\"name\":\"%s\"},"
			 "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
			 "\"optimizeMode\":\"manual\",\"replicaSpecs\":{\"worker\":{"
			 "\"replicas\":2,\"minReplicas\":1,\"maxReplicas\":2,\"restartCount\":3,"
			 "\"template\":{\"metadata\":{\"labels\":{\"app\":\"digits\"}},\"spec\":{"
			 "\"containers\":[{\"name\":\"main\",\"image\":\"rover-worker:test\","
			 "\"command\":[%s],"
			 "\"env\":[{\"name\":\"PYTHON_EXEC\",\"value\":\"/usr/bin/python3\"},"
			 "{\"name\":\"PATH\",\"value\":\"/usr/bin:/bin\"}],"
			 "\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"1Gi\"}}}]}}}},"
			 "\"datasets\":[{\"name\":\"digits\",\"size\":1437,\"shardSize\":32,"
			 "\"epochs\":%d,\"shuffle\":true}]}}",
			 name, cmd, epochs),
		0);
	return spec;
}

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

/* kill -9 the master process of the job (its --k8s-master-addr names our
 * port): 0, or -ESRCH. */
static int kill_master(void)
{
	char cmd[200], line[32] = "";
	/* "[r]": the pattern does not match the shell that runs pgrep */
	snprintf(cmd, sizeof(cmd), "pgrep -f -- '[r]over-master --job .*--listen 0.0.0.0:%d '",
		 master_port);
	FILE *p = popen(cmd, "r");
	if (p && !fgets(line, sizeof(line), p))
		line[0] = 0;
	if (p)
		pclose(p);
	int pid = atoi(line);
	return pid > 0 && kill(pid, SIGKILL) == 0 ? 0 : -ESRCH;
}

START_TEST(test_digits_elasticjob)
{
	RV_TEST_NEED_KUBECTL();
	standin_start();
	apply_crd();
	op_start(0);
	char shards[400], name[64], sel[128], wsel[128];
	snprintf(shards, sizeof(shards), "%s/shards.log", sti.dir);
	snprintf(name, sizeof(name), "digits-%d", (int)getpid());
	snprintf(sel, sizeof(sel), "elastic.rover.dev/job=%s", name);
	snprintf(wsel, sizeof(wsel), "rover.dev/job=%s", name);
	char *spec = job_json(name, shards, 10, "");
	apply_file("job.json", spec);
	free(spec);
	/* the master pod, its Service, the two worker pods */
	free(wait_pods(sel, ":Running:", 1, 60000));
	char *workers = wait_pods(wsel, ":Running:", 2, 90000);
	if (count_words(workers, ":Running:") < 2)
		dump();
	ck_assert_msg(count_words(workers, ":Running:") == 2, "worker pods: %s", workers);
	free(workers);
	char svc_name[100];
	snprintf(svc_name, sizeof(svc_name), "%s-master", name);
	const char *svc[] = { "get", "svc", svc_name, "-o", "jsonpath={.spec.ports[0].port}", NULL };
	char *port = kget(svc);
	ck_assert_int_eq(atoi(port), master_port);
	free(port);
	ck_assert_msg(rv_test_wait_lines(shards, 10, 120000), "no 10 steps trained");
	/* a worker pod deleted with kubectl comes back with its rank */
	char rsel[160];
	snprintf(rsel, sizeof(rsel), "%s,rover.dev/rank=1", wsel);
	char *old = pods(rsel);
	old[strcspn(old, ":")] = 0;
	ck_assert_msg(old[0], "no pod of rank 1");
	const char *del[] = { "delete", "pod", old, "--wait=false", NULL };
	ck_assert_int_eq(kubectl(NULL, del), 0);
	int64_t until = rv_mono_ms() + 90000;
	char *now = NULL;
	bool back = false;
	do {
		free(now);
		usleep(200 * 1000);
		now = pods(rsel);
		/* "NAME:PHASE:UID ": a running pod other than the deleted one */
		char gone[120];
		snprintf(gone, sizeof(gone), "%s:", old);
		back = false;
		for (const char *t = now; *t; t += strcspn(t, " ") + (t[strcspn(t, " ")] != 0))
			back |= strncmp(t, gone, strlen(gone)) != 0 &&
				strstr(t, ":Running:") < t + strcspn(t, " ") &&
				strstr(t, ":Running:");
	} while (!back && rv_mono_ms() < until);
	if (!back)
		dump();
	ck_assert_msg(back, "rank 1 did not come back: %s", now);
	free(now);
	free(old);
	/* the master killed -9: a new master pod, which adopts the worker pods */
	char *before = pods(wsel);
	ck_assert_int_eq(kill_master(), 0);
	ck_assert_msg(wait_job_field(name, ".status.restarts", "1", 60000), "no master restart");
	char *masters = wait_pods(sel, ":Running:", 1, 60000);
	ck_assert_int_eq(count_words(masters, ":Running:"), 1);
	free(masters);
	bool ok = wait_job_field(name, ".status.phase", "Succeeded", 300000);
	if (!ok)
		dump();
	ck_assert_msg(ok, "the job did not succeed");
	char mpod[100];
	snprintf(mpod, sizeof(mpod), "%s-master", name);
	const char *logs[] = { "logs", mpod, NULL };
	char *mlog = kget(logs);
	ck_assert_msg(count_words(mlog, "node adopted after a master restart") == 2,
		      "the new master did not adopt both pods: %s", mlog);
	/* it went on from the journal on the job's claim, not from zero */
	const char *rs = strstr(mlog, "msg=\"state restored\"");
	const char *rp = rs ? strstr(rs, "replayed=") : NULL;
	ck_assert_msg(rp && atol(rp + strlen("replayed=")) > 0,
		      "the new master did not replay the journal: %s", mlog);
	free(mlog);
	const char *mp[] = { "get",
			     "pod",
			     mpod,
			     "-o",
			     "jsonpath={.spec.serviceAccountName} "
			     "{.spec.volumes[0].persistentVolumeClaim.claimName}",
			     NULL };
	char *mspec = kget(mp), want_spec[300];
	snprintf(want_spec, sizeof(want_spec), "rover-master-%s %s-master-state", name, name);
	ck_assert_str_eq(mspec, want_spec);
	free(mspec);
	/* no worker pod was made again by the new master */
	char *after_names = pods(wsel);
	free(after_names);
	free(before);
	long lost, twice;
	unsigned ranks;
	int loads;
	rv_test_shard_account(shards, 1437, 10, &lost, &twice, &ranks, &loads);
	ck_assert_msg(lost == 0 && twice == 0, "%ld samples lost, %ld trained twice", lost, twice);
	double acc = accuracy();
	ck_assert_msg(acc >= 0.9, "accuracy %.4f", acc);
	char *reason = job_field(name, ".status.conditions[?(@.type==\"Succeeded\")].reason");
	ck_assert_str_eq(reason, "JobSucceeded");
	free(reason);
	/* the Events tell the story */
	const char *desc[] = { "describe", "ej", name, NULL };
	char *d = kget(desc);
	ck_assert_msg(strstr(d, "MasterEnded") && strstr(d, "JobSucceeded"), "events: %s", d);
	free(d);
	/* kubectl delete takes the master pod and the Service with the job */
	const char *delj[] = { "delete", "ej", name, "--timeout=30s", NULL };
	ck_assert_int_eq(kubectl(NULL, delj), 0);
	char *left = NULL;
	until = rv_mono_ms() + 30000;
	do {
		free(left);
		usleep(200 * 1000);
		left = pods(sel);
	} while (left[0] && rv_mono_ms() < until);
	ck_assert_msg(!left[0], "left after delete: %s", left);
	free(left);
	const char *gs[] = { "get", "svc", svc_name, NULL };
	char *out = NULL;
	ck_assert_int_ne(kubectl(&out, gs), 0);
	ck_assert_msg(strstr(out, "not found"), "%s", out);
	free(out);
	/* and the state volume, the service account and its binding */
	char pvc[120], sa[120], rb[140];
	snprintf(pvc, sizeof(pvc), "%s-master-state", name);
	snprintf(sa, sizeof(sa), "sa/rover-master-%s", name);
	snprintf(rb, sizeof(rb), "rolebinding/rover-master-%s", name);
	const char *gp[] = { "get", "pvc", pvc, NULL };
	ck_assert_int_ne(kubectl(&out, gp), 0);
	ck_assert_msg(strstr(out, "not found"), "%s", out);
	free(out);
	const char *gsa[] = { "get", sa, rb, NULL };
	ck_assert_int_ne(kubectl(&out, gsa), 0);
	ck_assert_msg(count_words(out, "not found") == 2, "%s", out);
	free(out);
}
END_TEST

/* The operator killed -9 with its create of the master pod in flight (every
 * reply slowed down), then started again: one master pod, never two. */
START_TEST(test_kill9_during_create)
{
	RV_TEST_NEED_KUBECTL();
	standin_start();
	apply_crd();
	char name[64], sel[128], svc_name[100];
	snprintf(name, sizeof(name), "once-%d", (int)getpid());
	snprintf(sel, sizeof(sel), "elastic.rover.dev/job=%s", name);
	snprintf(svc_name, sizeof(svc_name), "%s-master", name);
	char *spec = job_json(name, "", 1, "/bin/sleep\",\"600");
	apply_file("job.json", spec);
	free(spec);
	/* every reply slowed: the operator's creates stay in flight 1.5 s */
	admin("/standin/delay?ms=1500");
	op_start(0);
	int64_t until;
	/* the state volume's create was answered (the operator logs it; the
	 * Service, service account and role binding went before), and the
	 * master pod's create goes out at once: kill -9 with it in flight */
	until = rv_mono_ms() + 60000;
	while (log_count(op_log_path(0), "what=state volume") == 0 && rv_mono_ms() < until)
		usleep(5 * 1000);
	ck_assert_msg(log_count(op_log_path(0), "what=state volume") == 1, "no state volume made");
	usleep(100 * 1000);
	op_stop(0, SIGKILL);
	ck_assert_int_eq(log_count(op_log_path(0), "what=master pod"), 0);
	usleep(2000 * 1000); /* the create it sent is carried out */
	admin("/standin/delay?ms=0");
	char *p0 = pods(sel);
	ck_assert_msg(count_words(p0, ":") == 2, "the create in flight made no pod: %s", p0);
	free(p0);
	op_start(1);
	char *m = wait_pods(sel, ":Running:", 1, 60000);
	ck_assert_msg(count_words(m, ":Running:") == 1, "master pods: %s", m);
	free(m);
	/* a while on, still one */
	for (int i = 0; i < 10; i++) {
		usleep(300 * 1000);
		char *p = pods(sel);
		ck_assert_msg(count_words(p, ":") == 2, "master pods: %s", p);
		free(p);
	}
	ck_assert_msg(wait_job_field(name, ".status.phase", "Running", 30000), "not Running");
	char *r = job_field(name, ".status.restarts");
	ck_assert_str_eq(r, "0");
	free(r);
}
END_TEST

/* roverctl submit --kubeconfig: the job created as an ElasticJob; the
 * exit code want (0, or 5 when it exists). */
static void submit(const char *spec, int want)
{
	char path[400], exe[PATH_MAX];
	snprintf(path, sizeof(path), "%s/submit.json", sti.dir);
	rv_test_write_file(path, spec);
	snprintf(exe, sizeof(exe), "%s/roverctl", bin_dir());
	const char *argv[] = { exe, "submit", path, "--kubeconfig", sti.kubeconfig, NULL };
	struct rv_buf b;
	rv_buf_init(&b);
	struct rv_proc_opts o = { .argv = argv };
	int st = -1;
	ck_assert_int_eq(rv_proc_run(&o, 30000, &st, &b), 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == want, "roverctl submit: %d %s",
		      WIFEXITED(st) ? WEXITSTATUS(st) : -1, b.data ? b.data : "");
	if (want == 0)
		ck_assert_msg(b.data && strstr(b.data, "created elasticjob"), "%s", b.data);
	rv_buf_release(&b);
}

/* Two operators: one leads; killed -9, the other takes over and carries the
 * job on.  A bad ElasticJob is refused at apply, naming the field. */
/* Operator i's /healthz or /metrics (the port its log says it listens on). */
static struct rv_test_reply op_get(int i, const char *path)
{
	struct rv_test_brain api = { 0 };
	char *log = rv_test_read_file(op_log_path(i));
	const char *l = log ? strstr(log, "listening on http://127.0.0.1:") : NULL;
	ck_assert_msg(l, "operator %d never said where it listens", i);
	api.port = atoi(l + strlen("listening on http://127.0.0.1:"));
	free(log);
	snprintf(api.url, sizeof(api.url), "http://127.0.0.1:%d", api.port);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&api, "GET", path, NULL, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body);
	return r;
}

START_TEST(test_two_operators_one_leader)
{
	RV_TEST_NEED_KUBECTL();
	standin_start();
	apply_crd();
	op_start(0);
	usleep(500 * 1000);
	op_start(1);
	int64_t until = rv_mono_ms() + 30000;
	int lead0 = 0, lead1 = 0;
	do {
		usleep(200 * 1000);
		lead0 = log_count(op_log_path(0), "msg=\"leading\"");
		lead1 = log_count(op_log_path(1), "msg=\"leading\"");
	} while (lead0 + lead1 == 0 && rv_mono_ms() < until);
	usleep(2000 * 1000); /* a follower that wrongly took over would show by now */
	lead0 = log_count(op_log_path(0), "msg=\"leading\"");
	lead1 = log_count(op_log_path(1), "msg=\"leading\"");
	ck_assert_msg(lead0 + lead1 == 1, "leaders: op0 %d op1 %d", lead0, lead1);
	int leader = lead0 ? 0 : 1, other = 1 - leader;
	const char *gl[] = {
		"get", "lease", "rover-operator", "-o", "jsonpath={.spec.holderIdentity}", NULL
	};
	char *holder = kget(gl);
	char want[8];
	snprintf(want, sizeof(want), "op%d", leader);
	ck_assert_str_eq(holder, want);
	free(holder);
	/* each says on /healthz and /metrics whether it leads */
	for (int i = 0; i < 2; i++) {
		struct rv_test_reply h = op_get(i, "/healthz");
		ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItem(h.json, "leader")) == (i == leader),
			      "operator %d: %s", i, h.body);
		rv_test_reply_release(&h);
		struct rv_test_reply m = op_get(i, "/metrics");
		ck_assert_msg(strstr(m.body, i == leader ? "rover_operator_leader 1"
							 : "rover_operator_leader 0"),
			      "operator %d: %s", i, m.body);
		ck_assert_msg(strstr(m.body, "rover_operator_passes_total "), "%s", m.body);
		rv_test_reply_release(&m);
	}
	/* a bad ElasticJob is refused naming the field */
	char path[400];
	snprintf(path, sizeof(path), "%s/bad.yaml", sti.dir);
	rv_test_write_file(
		path, "apiVersion: elastic.rover.dev/v1alpha1\nkind: ElasticJob\n"
		      "metadata: {name: bad}\nspec:\n  distributionStrategy: AllreduceStrategy\n"
		      "  replicaSpecs:\n    worker: {replicas: 2, maxReplicas: -3}\n");
	const char *ab[] = { "apply", "-f", path, NULL };
	char *out = NULL;
	ck_assert_int_ne(kubectl(&out, ab), 0);
	ck_assert_msg(strstr(out, "spec.replicaSpecs.worker.maxReplicas: Invalid value: -3"), "%s",
		      out);
	free(out);
	/* a job, its master; the leader killed -9; the other takes over */
	char name[64], sel[128];
	snprintf(name, sizeof(name), "lead-%d", (int)getpid());
	snprintf(sel, sizeof(sel), "elastic.rover.dev/job=%s", name);
	char *spec = job_json(name, "", 1, "/bin/sleep\",\"600");
	submit(spec, 0);
	submit(spec, 5); /* once: a second is a conflict */
	free(spec);
	free(wait_pods(sel, ":Running:", 1, 60000));
	op_stop(leader, SIGKILL);
	until = rv_mono_ms() + 20000;
	while (log_count(op_log_path(other), "msg=\"leading\"") == 0 && rv_mono_ms() < until)
		usleep(100 * 1000);
	ck_assert_msg(log_count(op_log_path(other), "msg=\"leading\"") == 1, "no takeover");
	holder = kget(gl);
	snprintf(want, sizeof(want), "op%d", other);
	ck_assert_str_eq(holder, want);
	free(holder);
	/* the new leader acts: a master that dies is made again */
	ck_assert_int_eq(kill_master(), 0);
	ck_assert_msg(wait_job_field(name, ".status.restarts", "1", 60000),
		      "the new leader did not make the master again");
	char *m = wait_pods(sel, ":Running:", 1, 60000);
	ck_assert_int_eq(count_words(m, ":Running:"), 1);
	free(m);
}
END_TEST

/* The operator's watches cut mid-event, then 410 Gone, then the API server
 * stopped and started again (empty, on the same port): each time it goes
 * on acting.  spec.suspend stops the job's pods and a resume makes a new
 * master. */
START_TEST(test_watch_faults_restart_suspend)
{
	RV_TEST_NEED_KUBECTL();
	standin_start();
	apply_crd();
	op_start(0);
	char name[64], sel[128], wsel[128], patch[200];
	snprintf(name, sizeof(name), "cut-%d", (int)getpid());
	snprintf(sel, sizeof(sel), "elastic.rover.dev/job=%s", name);
	snprintf(wsel, sizeof(wsel), "rover.dev/job=%s", name);
	char *spec = job_json(name, "", 1, "/bin/sleep\",\"600");
	apply_file("job.json", spec);
	free(spec);
	free(wait_pods(sel, ":Running:", 1, 60000));
	free(wait_pods(wsel, ":Running:", 2, 60000));
	admin("/standin/watches/cut?mid=true");
	admin("/standin/watches/expire?count=4");
	admin("/standin/watches/cut");
	usleep(1000 * 1000);
	/* it still sees and acts: a master killed is made again */
	ck_assert_int_eq(kill_master(), 0);
	ck_assert_msg(wait_job_field(name, ".status.restarts", "1", 60000),
		      "no new master after the watch faults");
	ck_assert_msg(log_count(op_log_path(0), "watch expired, listing again") >= 1,
		      "no re-list after 410");
	/* suspend: the master and the worker pods go; resume: a new master */
	snprintf(patch, sizeof(patch), "{\"spec\":{\"suspend\":true}}");
	const char *sus[] = { "patch", "ej", name, "--type", "merge", "-p", patch, NULL };
	ck_assert_int_eq(kubectl(NULL, sus), 0);
	ck_assert_msg(wait_job_field(name, ".status.phase", "Suspended", 30000), "not Suspended");
	int64_t until = rv_mono_ms() + 30000;
	char *left = NULL;
	do {
		free(left);
		usleep(200 * 1000);
		char *a = pods(sel), *b = pods(wsel);
		ck_assert_int_ge(asprintf(&left, "%s%s", a, b), 0);
		free(a);
		free(b);
	} while (left[0] && rv_mono_ms() < until);
	ck_assert_msg(!left[0], "pods left while suspended: %s", left);
	free(left);
	snprintf(patch, sizeof(patch), "{\"spec\":{\"suspend\":false}}");
	ck_assert_int_eq(kubectl(NULL, sus), 0);
	ck_assert_msg(wait_job_field(name, ".status.phase", "Running", 60000), "not resumed");
	free(wait_pods(wsel, ":Running:", 2, 60000));
	/* the API server restarted, empty: the operator lists again and acts */
	int port = sti.api.port;
	standin_stop();
	usleep(1500 * 1000);
	standin_spawn(port);
	apply_crd();
	char name2[64], sel2[128];
	snprintf(name2, sizeof(name2), "again-%d", (int)getpid());
	snprintf(sel2, sizeof(sel2), "elastic.rover.dev/job=%s", name2);
	spec = job_json(name2, "", 1, "/bin/sleep\",\"600");
	apply_file("job2.json", spec);
	free(spec);
	char *m = wait_pods(sel2, ":Running:", 1, 60000);
	if (count_words(m, ":Running:") != 1)
		dump();
	ck_assert_msg(count_words(m, ":Running:") == 1, "no master after the restart: %s", m);
	free(m);
	ck_assert_int_eq(rv_proc_wait(&ops[0], 0, NULL), -ETIMEDOUT); /* still running */
}
END_TEST

/* The metric rover_operator_polled_jobs of operator i. */
static int polled_jobs(int i)
{
	struct rv_test_reply m = op_get(i, "/metrics");
	const char *v = strstr(m.body, "\nrover_operator_polled_jobs ");
	int n = v ? atoi(v + strlen("\nrover_operator_polled_jobs ")) : -1;
	rv_test_reply_release(&m);
	return n;
}

static bool wait_polled_jobs(int i, int want, int timeout_ms)
{
	int64_t until = rv_mono_ms() + timeout_ms;
	while (polled_jobs(i) != want && rv_mono_ms() < until)
		usleep(200 * 1000);
	return polled_jobs(i) == want;
}

/* A job's own service account (owned by it, bound to the master's
 * ClusterRole) runs its master pod; its state claim is owned by it too.
 * Then, the job deleted while no operator ran and made again under the
 * same name: the old job's worker pods are swept (they name the old uid)
 * though a job of that name is there.  And the operator's table of masters
 * it polls grows with running jobs and shrinks back to nothing once they
 * are deleted. */
START_TEST(test_same_name_sweep_and_prune)
{
	RV_TEST_NEED_KUBECTL();
	standin_start();
	apply_crd();
	op_start(0);
	char name[64], sel[128], wsel[128], sa[120], path[400];
	snprintf(name, sizeof(name), "same-%d", (int)getpid());
	snprintf(sel, sizeof(sel), "elastic.rover.dev/job=%s", name);
	snprintf(wsel, sizeof(wsel), "rover.dev/job=%s", name);
	snprintf(sa, sizeof(sa), "rover-master-%s", name);
	char *spec = job_json(name, "", 1, "/bin/sleep\",\"600");
	/* a state volume of 2Gi, the spec's own (the operator's default: 1Gi) */
	char *ds = strstr(spec, "\"datasets\":"), *spec2 = NULL;
	ck_assert_ptr_nonnull(ds);
	ck_assert_int_ge(asprintf(&spec2, "%.*s\"masterState\":{\"size\":\"2Gi\"},%s",
				  (int)(ds - spec), spec, ds),
			 0);
	apply_file("job.json", spec2);
	free(spec2);
	free(spec);
	free(wait_pods(sel, ":Running:", 1, 60000));
	char *old = wait_pods(wsel, ":Running:", 2, 60000);
	ck_assert_msg(count_words(old, ":Running:") == 2, "worker pods: %s", old);
	char *uid = job_field(name, ".metadata.uid");
	const char *gsa[] = { "get", "sa", sa, "-o", "jsonpath={.metadata.ownerReferences[0].uid}",
			      NULL };
	char *sa_owner = kget(gsa);
	ck_assert_str_eq(sa_owner, uid);
	free(sa_owner);
	const char *grb[] = { "get",
			      "rolebinding",
			      sa,
			      "-o",
			      "jsonpath={.roleRef.kind}/{.roleRef.name} {.subjects[0].name} "
			      "{.metadata.ownerReferences[0].uid}",
			      NULL };
	char *rb = kget(grb), want[300];
	snprintf(want, sizeof(want), "ClusterRole/rover-master %s %s", sa, uid);
	ck_assert_str_eq(rb, want);
	free(rb);
	char mpod[100], pvc[100];
	snprintf(mpod, sizeof(mpod), "%s-master", name);
	snprintf(pvc, sizeof(pvc), "%s-master-state", name);
	const char *gm[] = { "get", "pod", mpod, "-o", "jsonpath={.spec.serviceAccountName}", NULL };
	char *msa = kget(gm);
	ck_assert_str_eq(msa, sa);
	free(msa);
	const char *gp[] = { "get",
			     "pvc",
			     pvc,
			     "-o",
			     "jsonpath={.status.phase} {.spec.resources.requests.storage} "
			     "{.metadata.ownerReferences[0].uid}",
			     NULL };
	char *pv = kget(gp);
	snprintf(want, sizeof(want), "Bound 2Gi %s", uid);
	ck_assert_str_eq(pv, want);
	free(pv);
	ck_assert_msg(wait_polled_jobs(0, 1, 30000), "polled jobs: %d", polled_jobs(0));
	/* no operator, the master killed -9 (a master stopped by SIGTERM
	 * deletes its pods itself): the job deleted, its master pod goes, its
	 * worker pods stay */
	op_stop(0, SIGKILL);
	ck_assert_int_eq(kill_master(), 0);
	const char *delj[] = { "delete", "ej", name, "--timeout=30s", NULL };
	ck_assert_int_eq(kubectl(NULL, delj), 0);
	int64_t until = rv_mono_ms() + 30000;
	char *left = NULL;
	do {
		free(left);
		usleep(200 * 1000);
		left = pods(sel);
	} while (left[0] && rv_mono_ms() < until);
	ck_assert_msg(!left[0], "master pod left: %s", left);
	free(left);
	left = pods(wsel);
	ck_assert_msg(count_words(left, ":") == 4, "the worker pods did not stay: %s", left);
	free(left);
	/* made again under the same name, and four more, with masters that
	 * only sleep (they touch no pod: whatever goes is the operator's doing) */
	snprintf(path, sizeof(path), "%s/idle-master", sti.dir);
	rv_test_write_file(path, "#!/bin/sh\nexec sleep 600\n");
	ck_assert_int_eq(chmod(path, 0755), 0);
	spec = job_json(name, "", 1, "/bin/sleep\",\"600");
	apply_file("job.json", spec);
	free(spec);
	for (int i = 0; i < 4; i++) {
		char n[64], f[32];
		snprintf(n, sizeof(n), "more%d-%d", i, (int)getpid());
		snprintf(f, sizeof(f), "more%d.json", i);
		spec = job_json(n, "", 1, "/bin/sleep\",\"600");
		apply_file(f, spec);
		free(spec);
	}
	char *uid2 = job_field(name, ".metadata.uid");
	ck_assert_str_ne(uid2, uid);
	op_start_with(1, path);
	until = rv_mono_ms() + 30000;
	char *now = NULL;
	do {
		free(now);
		usleep(200 * 1000);
		now = pods(wsel);
	} while (now[0] && rv_mono_ms() < until);
	if (now[0])
		dump();
	ck_assert_msg(!now[0], "the old job's worker pods are left: %s (were %s)", now, old);
	free(now);
	free(old);
	ck_assert_msg(wait_polled_jobs(1, 5, 60000), "polled jobs: %d", polled_jobs(1));
	/* every job deleted: the table is empty again */
	const char *dela[] = { "delete", "ej", "--all", "--timeout=60s", NULL };
	ck_assert_int_eq(kubectl(NULL, dela), 0);
	ck_assert_msg(wait_polled_jobs(1, 0, 30000), "polled jobs: %d", polled_jobs(1));
	free(uid);
	free(uid2);
}
END_TEST

/* The MasterReady condition's reason of job. */
static char *ready_reason(const char *job)
{
	return job_field(job, ".status.conditions[?(@.type==\"MasterReady\")].reason");
}

/* A job deleted while its state claim is held (a finalizer: on a cluster
 * the garbage collector and pvc-protection take it in their own time) and
 * made again under its name: the new job's master is not made on the old
 * claim (StateClaimBusy, in the status and an Event) until the claim is
 * gone; then a claim of its own, a master starting fresh (replayed=0). */
START_TEST(test_same_name_waits_for_old_claim)
{
	RV_TEST_NEED_KUBECTL();
	standin_start();
	apply_crd();
	op_start(0);
	char name[64], sel[128], mpod[100], pvc[100];
	snprintf(name, sizeof(name), "claim-%d", (int)getpid());
	snprintf(sel, sizeof(sel), "elastic.rover.dev/job=%s", name);
	snprintf(mpod, sizeof(mpod), "%s-master", name);
	snprintf(pvc, sizeof(pvc), "%s-master-state", name);
	char *spec = job_json(name, "", 1, "/bin/sleep\",\"600");
	apply_file("job.json", spec);
	ck_assert_msg(wait_job_field(name, ".status.phase", "Running", 60000), "not Running");
	char *uid = job_field(name, ".metadata.uid");
	const char *hold[] = { "patch",
			       "pvc",
			       pvc,
			       "--type",
			       "merge",
			       "-p",
			       "{\"metadata\":{\"finalizers\":[\"test.rover.dev/hold\"]}}",
			       NULL };
	ck_assert_int_eq(kubectl(NULL, hold), 0);
	const char *delj[] = { "delete", "ej", name, "--timeout=30s", NULL };
	ck_assert_int_eq(kubectl(NULL, delj), 0);
	apply_file("job.json", spec);
	free(spec);
	char *uid2 = job_field(name, ".metadata.uid");
	ck_assert_str_ne(uid2, uid);
	/* the old master pod goes (MasterPodBusy meanwhile); the claim stays */
	ck_assert_msg(wait_job_field(name, ".status.conditions[?(@.type==\"MasterReady\")].reason",
				     "StateClaimBusy", 60000),
		      "no StateClaimBusy: %s", ready_reason(name));
	sleep(3);
	char *left = pods(sel), *why = ready_reason(name);
	if (left[0])
		dump();
	ck_assert_msg(!left[0], "a master pod on another job's claim: %s", left);
	ck_assert_str_eq(why, "StateClaimBusy");
	free(left);
	free(why);
	const char *gp[] = { "get", "pvc", pvc, "-o", "jsonpath={.metadata.ownerReferences[0].uid}",
			     NULL };
	char *owner = kget(gp);
	ck_assert_str_eq(owner, uid); /* still the old job's */
	free(owner);
	const char *gev[] = { "get",
			      "events",
			      "--field-selector",
			      "reason=StateClaimBusy",
			      "-o",
			      "jsonpath={.items[*].involvedObject.uid}",
			      NULL };
	char *ev = kget(gev);
	ck_assert_msg(strstr(ev, uid2), "no StateClaimBusy Event for the new job: %s", ev);
	free(ev);
	/* the claim let go: the new job gets its own and a fresh master */
	const char *unhold[] = { "patch",
				 "pvc",
				 pvc,
				 "--type",
				 "merge",
				 "-p",
				 "{\"metadata\":{\"finalizers\":null}}",
				 NULL };
	ck_assert_int_eq(kubectl(NULL, unhold), 0);
	ck_assert_msg(wait_job_field(name, ".status.phase", "Running", 60000), "not Running: %s",
		      ready_reason(name));
	owner = kget(gp);
	ck_assert_str_eq(owner, uid2);
	free(owner);
	const char *logs[] = { "logs", mpod, NULL };
	char *log = kget(logs);
	ck_assert_msg(strstr(log, "state restored") && strstr(log, "replayed=0 "),
		      "the new master did not start fresh: %s", log);
	free(log);
	free(uid);
	free(uid2);
}
END_TEST

/* The job uid kept in root/NS/NAME-UID/job-uid ("" none); malloc'd. */
static char *kept_uid(const char *root, const char *ns, const char *name, const char *uid)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/%s/%s-%s/job-uid", root, ns, name, uid);
	char *t = rv_test_read_file(path);
	if (!t)
		return strdup("");
	t[strcspn(t, "\n")] = 0;
	return t;
}

/* master.state_root: each job's folder is ROOT/NS/NAME-UID, so a job made
 * again under a deleted one's name starts in a folder of its own
 * (replayed=0), the old one's left as it was. */
START_TEST(test_state_root_by_uid)
{
	RV_TEST_NEED_KUBECTL();
	standin_start();
	apply_crd();
	char root[400], name[64], sel[128], mpod[100];
	snprintf(root, sizeof(root), "%s/state-root", sti.dir);
	setenv("ROVER_MASTER_STATE_ROOT", root, 1);
	op_start(0);
	unsetenv("ROVER_MASTER_STATE_ROOT");
	snprintf(name, sizeof(name), "root-%d", (int)getpid());
	snprintf(sel, sizeof(sel), "elastic.rover.dev/job=%s", name);
	snprintf(mpod, sizeof(mpod), "%s-master", name);
	char *spec = job_json(name, "", 1, "/bin/sleep\",\"600");
	apply_file("job.json", spec);
	ck_assert_msg(wait_job_field(name, ".status.phase", "Running", 60000), "not Running");
	char *uid = job_field(name, ".metadata.uid"), *ns = job_field(name, ".metadata.namespace");
	const char *delj[] = { "delete", "ej", name, "--timeout=30s", NULL };
	ck_assert_int_eq(kubectl(NULL, delj), 0);
	int64_t until = rv_mono_ms() + 30000;
	char *left = pods(sel);
	while (left[0] && rv_mono_ms() < until) {
		free(left);
		usleep(200 * 1000);
		left = pods(sel);
	}
	ck_assert_msg(!left[0], "the old master pod is left: %s", left);
	free(left);
	apply_file("job.json", spec);
	free(spec);
	ck_assert_msg(wait_job_field(name, ".status.phase", "Running", 60000), "not Running again");
	char *uid2 = job_field(name, ".metadata.uid");
	ck_assert_str_ne(uid2, uid);
	char *k1 = kept_uid(root, ns, name, uid), *k2 = kept_uid(root, ns, name, uid2);
	ck_assert_str_eq(k1, uid);
	ck_assert_str_eq(k2, uid2);
	const char *logs[] = { "logs", mpod, NULL };
	char *log = kget(logs);
	ck_assert_msg(strstr(log, "replayed=0 "), "the new master did not start fresh: %s", log);
	free(log);
	free(k1);
	free(k2);
	free(uid);
	free(uid2);
	free(ns);
}
END_TEST

/* A master that only answers GET /v1/job with a plan (its --listen port). */
static const char fake_master_py[] =
	"import http.server, json, sys\n"
	"port = int(sys.argv[sys.argv.index('--listen') + 1].rsplit(':', 1)[1])\n"
	"body = json.dumps({'job': 'x', 'state': 'complete', 'round': 1, 'plan': {\n"
	"    'id': 7, 'stage': 'running', 'reason': 'speed-scales-with-workers',\n"
	"    'applied': True}}).encode()\n"
	"class H(http.server.BaseHTTPRequestHandler):\n"
	"    def do_GET(self):\n"
	"        self.send_response(200 if self.path.startswith('/v1/job') else 404)\n"
	"        self.send_header('Content-Type', 'application/json')\n"
	"        self.send_header('Content-Length', str(len(body)))\n"
	"        self.end_headers()\n"
	"        self.wfile.write(body)\n"
	"    def log_message(self, *a):\n"
	"        pass\n"
	"http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()\n";

/* The master's newest plan in the job's status (status.lastPlan) and one
 * PlanApplied Event saying why; `kubectl get elasticjobs` prints the
 * CRD's columns from the live status: phase, ready workers (per role in
 * status.replicas), restarts, and with -o wide the plan's reason. */
START_TEST(test_plan_status_events_columns)
{
	RV_TEST_NEED_KUBECTL();
	standin_start();
	apply_crd();
	char path[400], script[400], name[64], buf[1200];
	snprintf(script, sizeof(script), "%s/fake_master.py", sti.dir);
	rv_test_write_file(script, fake_master_py);
	snprintf(path, sizeof(path), "%s/fake-master", sti.dir);
	snprintf(buf, sizeof(buf), "#!/bin/sh\nexec /usr/bin/python3 %s \"$@\"\n", script);
	rv_test_write_file(path, buf);
	ck_assert_int_eq(chmod(path, 0755), 0);
	setenv("ROVER_MASTER_POLL_MS", "300", 1);
	op_start_with(0, path);
	unsetenv("ROVER_MASTER_POLL_MS");
	snprintf(name, sizeof(name), "plan-%d", (int)getpid());
	char *spec = job_json(name, "", 1, "/bin/sleep\",\"600");
	apply_file("job.json", spec);
	free(spec);
	/* a worker pod of the job, as its master would make it */
	snprintf(buf, sizeof(buf),
		 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s-worker-0\","
		 "\"labels\":{\"rover.dev/job\":\"%s\",\"rover.dev/role\":\"worker\"}},"
		 "\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"main\","
		 "\"image\":\"x\",\"command\":[\"sleep\",\"600\"]}]}}",
		 name, name);
	apply_file("worker.json", buf);
	ck_assert_msg(wait_job_field(name, ".status.lastPlan.reason", "speed-scales-with-workers",
				     60000),
		      "no lastPlan: %s", job_field(name, ".status"));
	char *lp = job_field(name, ".status.lastPlan.id} {.status.lastPlan.applied} "
				   "{.status.lastPlan.stage");
	ck_assert_str_eq(lp, "7 true running");
	free(lp);
	ck_assert_msg(wait_job_field(name, ".status.replicas.worker.ready", "1", 30000),
		      "replicas: %s", job_field(name, ".status.replicas"));
	const char *gev[] = { "get",
			      "events",
			      "--field-selector",
			      "reason=PlanApplied",
			      "-o",
			      "jsonpath={range .items[*]}{.involvedObject.name}:{.message} {end}",
			      NULL };
	char *ev = kget(gev), want[200];
	snprintf(want, sizeof(want), "%s:speed-scales-with-workers", name);
	ck_assert_msg(count_words(ev, want) == 1, "PlanApplied events: %s", ev);
	free(ev);
	const char *gej[] = { "get", "elasticjobs", name, "-o", "wide", NULL };
	char *tab = kget(gej);
	ck_assert_msg(strstr(tab, "PHASE") && strstr(tab, "WORKERS") && strstr(tab, "RESTARTS") &&
			      strstr(tab, "PLAN"),
		      "%s", tab);
	const char *row = strstr(tab, "\n");
	ck_assert_ptr_nonnull(row);
	char *toks[8] = { 0 }, *save = NULL;
	char *line = strdup(row + 1);
	int n = 0;
	for (char *t = strtok_r(line, " \t", &save); t && n < 8; t = strtok_r(NULL, " \t", &save))
		toks[n++] = t;
	ck_assert_msg(n >= 6 && !strcmp(toks[0], name) && !strcmp(toks[1], "Running") &&
			      !strcmp(toks[2], "1") && !strcmp(toks[3], "0") &&
			      !strcmp(toks[4], "speed-scales-with-workers"),
		      "kubectl get elasticjobs -o wide: %s", tab);
	free(line);
	free(tab);
}
END_TEST

static void add(Suite *s, const char *name, const TTest *t)
{
	TCase *tc = tcase_create(name);
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 420);
	tcase_add_test(tc, t);
	suite_add_tcase(s, tc);
}

static Suite *operator_suite(void)
{
	Suite *s = suite_create("operator");
	add(s, "digits", test_digits_elasticjob);
	add(s, "kill9_create", test_kill9_during_create);
	add(s, "leader", test_two_operators_one_leader);
	add(s, "faults", test_watch_faults_restart_suspend);
	add(s, "same_name", test_same_name_sweep_and_prune);
	add(s, "same_name_claim", test_same_name_waits_for_old_claim);
	add(s, "plan_columns", test_plan_status_events_columns);
	add(s, "state_root", test_state_root_by_uid);
	return s;
}

RV_TEST_MAIN(operator_suite)
