/*
 * check_master_replace.c: a plan's `remove` carried out by the real
 * rover-master against the real rover-brain.  The master runs 4 worker
 * nodes with its local scheduler in cgroup v1; each node is this binary with
 * --step-agent (step_agent_main below): it joins the rendezvous, heartbeats
 * and reports a step after each fixed piece of CPU work.  The test gives
 * worker-2's cgroup a CPU quota of 1% of a core, so its steps take many
 * times longer; the brain names it a straggler in a plan's `remove`, and
 * the master, applying that plan, replaces it: worker-2 runs again as
 * worker-2.1 (same rank, a fresh cgroup without the quota, no restart
 * charged) while the other nodes keep running, and the brain records the
 * plan applied in full.  Needs root and a writable cgroup v1 cpu hierarchy
 * (a failure under CI=true, a skip otherwise).
 */
#include <check.h>
#include <inttypes.h>
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
#include "pgfix.h"
#include "testutil.h"

#define WORKERS 4
#define SLOW    "worker-2"

/* ---- the node: rendezvous, heartbeats, a step per piece of work ---- */

/* About 12 ms of one core here; under a quota of 1% of a core (1 ms per
 * 100 ms period) over a second, against the 100 ms or so a step report
 * can take on a busy machine (it waits for the master's fsync). */
static void work(void)
{
	volatile double x = 1;
	for (long i = 0; i < 2500000; i++)
		x = x * 1.0000001 + 1e-9;
}

static int64_t step_join(struct rv_master_client *c, const char *name)
{
	struct rv_rdzv_join j = { .local_world_size = 1 };
	snprintf(j.node, sizeof(j.node), "%s", name);
	struct rv_rdzv_world_reply w;
	int rc = -ETIMEDOUT;
	for (int i = 0; i < 60 && rc == -ETIMEDOUT; i++)
		rc = rv_master_rendezvous(c, &j, 2000, &w, NULL);
	if (rc < 0)
		return -1;
	rv_rdzv_world_reply_release(&w);
	return 0;
}

static int step_agent_main(void)
{
	const char *addr = getenv("ROVER_MASTER_ADDR"), *name = getenv("ROVER_NODE_NAME");
	if (!addr || !name)
		return 2;
	struct rv_master_client *c = rv_test_agent_client(addr, 400, 60000);
	if (!c || step_join(c, name) < 0)
		return 3;
	/* some memory in use, so a right-sized limit leaves room for the rest */
	char *held = malloc(16 << 20);
	if (held)
		memset(held, 1, 16 << 20);
	int64_t last_hb = 0, step = 0;
	for (;;) {
		if (rv_mono_ms() - last_hb >= 100) {
			struct rv_heartbeat_reply hb = { 0 };
			last_hb = rv_mono_ms();
			if ((rv_master_heartbeat(c, name, &hb, NULL) == -ENOENT || hb.rejoin) &&
			    step_join(c, name) < 0)
				return 4;
		}
		int64_t t0 = rv_mono_ms();
		work();
		struct rv_step_report s = { .step = ++step };
		snprintf(s.node, sizeof(s.node), "%s", name);
		int64_t dt = rv_mono_ms() - t0;
		s.speed = dt > 0 ? 1000.0 / (double)dt : 1000;
		rv_master_step(c, &s, NULL);
		/* a tenth of a core or so: the machine is shared, and a busy
		 * machine must not make the healthy nodes slow too */
		usleep(20 * 1000);
	}
}

/* ---- the test ---- */

static char conninfo[1024];
static struct rv_test_brain brain;
static struct rv_test_master master;

/* Whether the local scheduler's cgroup v1 cpu hierarchy can be written. */
static bool cgroup_cpu_usable(const char **why)
{
	if (geteuid() != 0) {
		*why = "not root";
		return false;
	}
	if (access("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", W_OK) != 0) {
		*why = "no writable cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu";
		return false;
	}
	return true;
}

/* The cpu cgroup folder of pid (v1), into out; false when not found.
 * (procfs and cgroupfs files have no size: read them line by line.) */
static bool cpu_cgroup_of(int pid, char *out, size_t size)
{
	char path[64], line[PATH_MAX];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	FILE *f = fopen(path, "r");
	bool found = false;
	while (f && !found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *ctl = strchr(line, ':');
		char *p = ctl ? strchr(ctl + 1, ':') : NULL;
		if (!p)
			continue;
		*p = '\0';
		/* "cpu" alone or "cpu,cpuacct" */
		if (!strcmp(ctl + 1, "cpu") || !strncmp(ctl + 1, "cpu,", 4)) {
			snprintf(out, size, "/sys/fs/cgroup/cpu%s", p + 1);
			found = true;
		}
	}
	if (f)
		fclose(f);
	return found;
}

/* The first number in dir/file, or -1. */
static long read_long(const char *dir, const char *file)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	FILE *f = fopen(path, "r");
	long v = -1;
	if (f && fscanf(f, "%ld", &v) != 1)
		v = -1;
	if (f)
		fclose(f);
	return v;
}

/* The slow host's quota on node cgroup cg (again: a plan that resizes the
 * node in place rewrites it, and a slow host stays slow); false when the
 * cgroup is gone. */
static bool make_slow(const char *cg)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", cg);
	FILE *f = fopen(path, "w");
	if (!f)
		return false;
	bool ok = fputs("1000", f) >= 0;
	return fclose(f) == 0 && ok;
}

static void write_file(const char *dir, const char *file, const char *text)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	rv_test_write_file(path, text);
}

static const struct rv_node_status *node_of(const struct rv_job_status *js, const char *name)
{
	for (int i = 0; i < js->nnode_list; i++)
		if (!strcmp(js->node_list[i].name, name))
			return &js->node_list[i];
	return NULL;
}

static int running(const struct rv_job_status *js)
{
	int n = 0;
	for (int i = 0; i < js->nnode_list; i++)
		n += !strcmp(js->node_list[i].state, "running") && js->node_list[i].pid > 0;
	return n;
}

static void job_start(void)
{
	char exe[PATH_MAX];
	rv_test_self_exe(exe, sizeof(exe));
	char *spec = NULL;
	ck_assert_int_ge(
		asprintf(&spec,
			 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
			 "\"metadata\":{\"name\":\"replace-job\"},"
			 "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
			 "\"optimizeMode\":\"cluster\",\"brainService\":\"%s\","
			 "\"replicaSpecs\":{\"worker\":{\"replicas\":%d,\"minReplicas\":%d,"
			 "\"maxReplicas\":%d,\"restartCount\":1,"
			 "\"resources\":{\"cpu\":1,\"memory\":\"256Mi\"},"
			 "\"command\":[\"%s\",\"--step-agent\"]}},"
			 "\"datasets\":[{\"name\":\"train\",\"size\":1000000,\"shardSize\":10,"
			 "\"epochs\":1}]}}",
			 brain.url, WORKERS, WORKERS, WORKERS, exe),
		0);
	ck_assert_int_eq(rv_test_master_init(&master, spec), 0);
	free(spec);
	static const char *args[] = { "--scheduler",
				      "local",
				      "--node-limits",
				      "cgroup1",
				      "--rdzv-last-call-ms",
				      "0",
				      "--node-stop-grace-ms",
				      "1000",
				      "--node-usage-interval-ms",
				      "300",
				      "--brain-batch-delay-ms",
				      "50",
				      "--brain-poll-wait-s",
				      "1",
				      "--brain-backoff-max-ms",
				      "200",
				      NULL };
	ck_assert_int_eq(rv_test_master_start(&master, args), 0);
}

static void setup(void)
{
	memset(&master, 0, sizeof(master));
	ck_assert_int_eq(rv_test_pg_fresh_db(0, conninfo, sizeof(conninfo)), 0);
	const char *args[] = { "--db", conninfo, "--plan-debounce-ms", "0", NULL };
	ck_assert_int_eq(rv_test_brain_start(&brain, args), 0);
}

static void teardown(void)
{
	if (master.dir[0])
		rv_test_master_cleanup(&master);
	rv_test_brain_stop(&brain, SIGTERM, 10);
}

/* The newest plan of the brain's history naming node in `remove`: its id,
 * whether the brain holds it applied, and what was not applied. */
static int64_t removing_plan(const char *uid, const char *node, bool *applied, char *na,
			     size_t size, double *cpu)
{
	struct rv_brain_opts o = { .url = brain.url, .max_attempts = 1, .timeout_ms = 5000 };
	struct rv_brain_client *c = rv_brain_client_new(&o, NULL);
	ck_assert_ptr_nonnull(c);
	struct rv_brain_plan_record *rec = NULL;
	int n = 0;
	int64_t id = 0;
	if (rv_brain_plan_history(c, uid, 100, &rec, &n, NULL) == 0)
		for (int i = 0; i < n; i++)
			for (int k = 0; k < rec[i].plan.nremove; k++)
				if (!strcmp(rec[i].plan.remove[k].node, node)) {
					id = rec[i].plan.id;
					*applied = rec[i].applied;
					snprintf(na, size, "%s", rec[i].not_applied);
					*cpu = rec[i].plan.groups[RV_ROLE_WORKER].resource.cpu;
				}
	free(rec);
	rv_brain_client_free(c);
	return id;
}

START_TEST(test_slow_node_replaced_within_the_plan)
{
	const char *why = "";
	if (!cgroup_cpu_usable(&why)) {
		RV_TEST_SKIP(true, "%s", why);
		return;
	}
	job_start();
	struct rv_master_client *mc = rv_test_master_client(&master);
	ck_assert_ptr_nonnull(mc);
	struct rv_job_status js;
	memset(&js, 0, sizeof(js));
	for (int i = 0; i < 600 && !(rv_master_job(mc, &js, NULL) == 0 && running(&js) == WORKERS &&
				     js.brain.uid[0]);
	     i++)
		usleep(50 * 1000);
	ck_assert_int_eq(running(&js), WORKERS);
	char uid[RV_BRAIN_UID_MAX];
	snprintf(uid, sizeof(uid), "%s", js.brain.uid);
	int pids[WORKERS];
	for (int r = 0; r < WORKERS; r++) {
		char name[32];
		snprintf(name, sizeof(name), "worker-%d", r);
		const struct rv_node_status *n = node_of(&js, name);
		ck_assert_ptr_nonnull(n);
		pids[r] = n->pid;
	}
	/* worker-2 made slow: 1% of a core */
	char cg[PATH_MAX];
	ck_assert(cpu_cgroup_of(pids[2], cg, sizeof(cg)));
	write_file(cg, "cpu.cfs_period_us", "100000");
	ck_assert(make_slow(cg));

	const struct rv_node_status *slow = NULL;
	/* the brain plans every plan.interval_s (30 s) and may first hold for
	 * a right-sizing plan's samples */
	int64_t t0 = rv_mono_ms();
	for (int64_t until = t0 + 180000; rv_mono_ms() < until;) {
		if (rv_master_job(mc, &js, NULL) == 0 && (slow = node_of(&js, SLOW)) &&
		    !strcmp(slow->instance, SLOW ".1") && !strcmp(slow->state, "running"))
			break;
		slow = NULL;
		make_slow(cg);
		usleep(50 * 1000);
	}
	bool applied = false;
	char na[RV_NOT_APPLIED_MAX] = "";
	double cpu = 0;
	int64_t plan = removing_plan(uid, SLOW, &applied, na, sizeof(na), &cpu);
	if (plan <= 0 || !slow) {
		char cmd[PATH_MAX];
		snprintf(cmd, sizeof(cmd),
			 "grep -E 'plan|node (re|launch|to be|replaced)|given up|dead' %s | tail "
			 "-40 "
			 ">&2",
			 master.log);
		if (system(cmd) != 0)
			fprintf(stderr, "check_master_replace: no master log to show\n");
		snprintf(cmd, sizeof(cmd),
			 "psql '%s' -c \"SELECT node, count(*), count(step_time) AS steps,"
			 " percentile_cont(0.5) WITHIN GROUP (ORDER BY step_time) AS median,"
			 " min(ts_ms), max(ts_ms) FROM node_usage GROUP BY node\" >&2",
			 conninfo);
		if (system(cmd) != 0)
			fprintf(stderr, "check_master_replace: no node usage to show\n");
	}
	ck_assert_msg(plan > 0, "the brain never named %s in a plan's remove", SLOW);
	ck_assert_msg(slow, "%s was not replaced by the master after plan %" PRId64, SLOW, plan);
	fprintf(stderr,
		"check_master_replace: %s replaced %.1f s after it was made slow, plan %" PRId64
		"\n",
		SLOW, (double)(rv_mono_ms() - t0) / 1000, plan);
	/* the same rank, not charged as a crash; the others kept running */
	ck_assert_int_eq(slow->rank, 2);
	ck_assert_int_eq(slow->restarts, 0);
	for (int r = 0; r < WORKERS; r++) {
		if (r == 2)
			continue;
		char name[16];
		snprintf(name, sizeof(name), "worker-%d", r);
		const struct rv_node_status *n = node_of(&js, name);
		ck_assert_ptr_nonnull(n);
		ck_assert_str_eq(n->instance, name);
		ck_assert_int_eq(n->pid, pids[r]);
	}
	/* the replacement runs in a fresh cgroup: the plan's CPU, not the 1% */
	char cg2[PATH_MAX];
	ck_assert(cpu_cgroup_of(slow->pid, cg2, sizeof(cg2)));
	ck_assert_str_ne(cg2, cg);
	ck_assert(cpu > 0);
	ck_assert_int_eq(read_long(cg2, "cpu.cfs_quota_us"),
			 (long)(cpu * (double)read_long(cg2, "cpu.cfs_period_us") + 0.5));
	/* the brain holds the plan applied, in full */
	for (int i = 0; i < 200 && !applied; i++) {
		usleep(50 * 1000);
		removing_plan(uid, SLOW, &applied, na, sizeof(na), &cpu);
	}
	ck_assert_msg(applied, "the brain never heard plan %" PRId64 " applied", plan);
	ck_assert_msg(!na[0], "plan %" PRId64 " applied in part: %s", plan, na);
	rv_master_client_free(mc);
}
END_TEST

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--step-agent"))
		return step_agent_main();
	if (rv_test_pg_global_start() < 0)
		return EXIT_FAILURE;
	Suite *s = suite_create("master_replace");
	TCase *tc = tcase_create("replace");
	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_slow_node_replaced_within_the_plan);
	suite_add_tcase(s, tc);
	int rc = rv_test_run_suite(s);
	rv_test_pg_global_stop();
	return rc;
}
