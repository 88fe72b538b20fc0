/*
 * check_master_nodes.c: the real rover-master running the job's nodes with
 * its local scheduler.  Each node is this very binary run with
 * --simulated-agent (simulated_agent_main below): it joins the rendezvous
 * under ROVER_NODE_NAME through common/master_client, heartbeats, takes
 * shards, notes every counted one in a file and exits 0 once the data is
 * finished.  Cases: kill -9 of a node (relaunched with the same rank, the
 * world re-forms with the same group ranks, every sample exactly once, the
 * master exits 0), a node that always exits 1 (FAILED naming it after
 * restartCount relaunches, the master exits 1), an OOM kill under a cgroup
 * memory limit (relaunched with more memory), and kill -9 of the master
 * (a restart relaunches the nodes that died with it, not counted as
 * crashes).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "masterfix.h"
#include "parse.h"
#include "testutil.h"

/* ---- the simulated agent (a node's command) ---- */

struct sim_opts {
	int exit_code;     /* >= 0: exit with it at once */
	int fail_rank;     /* that rank only (-1: every rank) */
	int64_t oom_below; /* allocate 160 MiB while ROVER_NODE_MEMORY_MB is below it */
	const char *out;   /* folder for <name>.done and <name>.ranks */
	int task_ms;
};

static void note(const char *out, const char *name, const char *ext, const char *line)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s.%s", out, name, ext);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	ssize_t w = write(fd, line, strlen(line));
	(void)w;
	close(fd);
}

/* Whether every dataset is finished (a peer that finished left for good). */
static bool sim_finished(struct rv_master_client *c)
{
	static struct rv_job_status js;
	return rv_master_job(c, &js, NULL) == 0 && js.finished;
}

/* Rendezvous; returns this node's worker id (its rank offset), -2 when the
 * data is finished meanwhile, or -1. */
static int64_t sim_join(struct rv_master_client *c, const char *name, const struct sim_opts *o)
{
	struct rv_rdzv_join j = { .local_world_size = 1 };
	snprintf(j.node, sizeof(j.node), "%s", name);
	struct rv_rdzv_world_reply w;
	int rc = -ETIMEDOUT;
	for (int i = 0; i < 30 && rc == -ETIMEDOUT; i++) {
		if (sim_finished(c))
			return -2;
		rc = rv_master_rendezvous(c, &j, 2000, &w, NULL);
	}
	if (rc < 0)
		return -1;
	int64_t id = -1;
	for (int i = 0; i < w.nmembers; i++)
		if (!strcmp(w.members[i].node, name)) {
			char line[64];
			snprintf(line, sizeof(line), "%lld %d\n", (long long)w.round,
				 w.members[i].group_rank);
			note(o->out, name, "ranks", line);
			id = w.members[i].rank_offset;
		}
	rv_rdzv_world_reply_release(&w);
	return id;
}

static int simulated_agent_main(const struct sim_opts *o)
{
	const char *addr = getenv("ROVER_MASTER_ADDR"), *name = getenv("ROVER_NODE_NAME");
	const char *rank_s = getenv("ROVER_NODE_RANK");
	if (!addr || !name || !rank_s) {
		fprintf(stderr, "simulated agent: ROVER_MASTER_ADDR, ROVER_NODE_NAME and "
				"ROVER_NODE_RANK are required\n");
		return 2;
	}
	int64_t rank = -1;
	if (rv_parse_i64(rank_s, 0, INT32_MAX, &rank) < 0)
		return 2;
	if (o->exit_code >= 0 && (o->fail_rank < 0 || o->fail_rank == rank)) {
		usleep(50 * 1000);
		return o->exit_code;
	}
	int oom = rv_test_sim_oom(o->oom_below);
	if (oom)
		return oom;
	struct rv_master_client *c = rv_test_agent_client(addr, 400, 60000);
	if (!c)
		return 2;
	int64_t worker = sim_join(c, name, o);
	int64_t last_hb = rv_mono_ms();
	int rc = 0;
	while (worker >= 0) {
		if (rv_mono_ms() - last_hb >= 100) {
			struct rv_heartbeat_reply hb = { 0 };
			last_hb = rv_mono_ms();
			if (rv_master_heartbeat(c, name, &hb, NULL) == -ENOENT || hb.rejoin) {
				worker = sim_join(c, name, o);
				continue;
			}
		}
		struct rv_shard_next req = { .worker = worker };
		snprintf(req.node, sizeof(req.node), "%s", name);
		struct rv_shard_task t;
		if (rv_master_shard_next(c, &req, &t, NULL) < 0) {
			rc = 4;
			break;
		}
		if (t.status == RV_SHARD_FINISHED)
			break;
		if (t.status == RV_SHARD_WAIT) {
			usleep(20 * 1000);
			continue;
		}
		usleep((useconds_t)o->task_ms * 1000);
		struct rv_shard_done d = { .worker = worker, .id = t.id };
		snprintf(d.node, sizeof(d.node), "%s", name);
		bool counted = false;
		if (rv_master_shard_done(c, &d, &counted, NULL) < 0) {
			rc = 5;
			break;
		}
		if (counted) {
			char line[96];
			snprintf(line, sizeof(line), "%d %lld %lld\n", t.epoch, (long long)t.start,
				 (long long)t.end);
			note(o->out, name, "done", line);
		}
	}
	if (worker == -1)
		rc = 6;
	rv_master_client_free(c);
	return rc;
}

/* ---- the tests ---- */

struct job {
	struct rv_test_master m;
	char out[320];
	long size;
	int epochs;
};

/* A job of 2 workers (min = max = 2) whose command is this binary as a
 * simulated agent with extra (", "-separated JSON strings, may be ""). */
static void job_init(struct job *j, long size, int epochs, int restarts, const char *resources,
		     const char *extra)
{
	char exe[PATH_MAX];
	rv_test_self_exe(exe, sizeof(exe));
	j->size = size;
	j->epochs = epochs;
	char *spec = NULL;
	ck_assert_int_ge(
		asprintf(&spec,
			 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
			 "\"metadata\":{\"name\":\"nodes-test\"},"
			 "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
			 "\"replicaSpecs\":{\"worker\":{\"replicas\":2,\"minReplicas\":2,"
			 "\"maxReplicas\":2,\"restartCount\":%d%s,\"command\":[\"%s\","
			 "\"--simulated-agent\"%s]}},"
			 "\"datasets\":[{\"name\":\"train\",\"size\":%ld,\"shardSize\":10,"
			 "\"epochs\":%d,\"shuffle\":true}]}}",
			 restarts, resources, exe, extra, size, epochs),
		0);
	ck_assert_int_eq(rv_test_master_init(&j->m, spec), 0);
	free(spec);
	snprintf(j->out, sizeof(j->out), "%s/out", j->m.dir);
	ck_assert_int_eq(mkdir(j->out, 0755), 0);
}

/* The spec's command gets --out DIR: rewrite the spec with it. */
static void job_start(struct job *j, const char *limits)
{
	static char lim[32];
	snprintf(lim, sizeof(lim), "%s", limits);
	char *spec = rv_test_read_file(j->m.spec);
	ck_assert_ptr_nonnull(spec);
	char *at = strstr(spec, "\"--simulated-agent\"");
	ck_assert_ptr_nonnull(at);
	char *fixed = NULL;
	ck_assert_int_ge(asprintf(&fixed, "%.*s\"--simulated-agent\",\"--out\",\"%s\"%s",
				  (int)(at - spec), spec, j->out,
				  at + strlen("\"--simulated-agent\"")),
			 0);
	FILE *f = fopen(j->m.spec, "w");
	ck_assert_ptr_nonnull(f);
	fputs(fixed, f);
	fclose(f);
	free(fixed);
	free(spec);
	const char *args[] = { "--scheduler",
			       "local",
			       "--node-limits",
			       lim,
			       "--linger-s",
			       "2",
			       "--rdzv-last-call-ms",
			       "0",
			       "--node-stop-grace-ms",
			       "2000",
			       "--journal-snapshot-every",
			       "40",
			       "--node-usage-interval-ms",
			       "200",
			       NULL };
	ck_assert_int_eq(rv_test_master_start(&j->m, args), 0);
}

/* job_init + job_start; a client of the master (free it). */
static struct rv_master_client *job_run(struct job *j, long size, int epochs, int restarts,
					const char *resources, const char *extra,
					const char *limits)
{
	job_init(j, size, epochs, restarts, resources, extra);
	job_start(j, limits);
	struct rv_master_client *c = rv_test_master_client(&j->m);
	ck_assert_ptr_nonnull(c);
	return c;
}

/* /v1/job until pred says yes or timeout_ms passes; 1 when it did. */
static int job_wait(struct rv_master_client *c, struct rv_job_status *js, int timeout_ms,
		    bool (*pred)(const struct rv_job_status *js, void *ctx), void *ctx)
{
	int64_t until = rv_mono_ms() + timeout_ms;
	while (rv_mono_ms() < until) {
		if (rv_master_job(c, js, NULL) == 0 && pred(js, ctx))
			return 1;
		usleep(50 * 1000);
	}
	return 0;
}

static bool all_running_and_busy(const struct rv_job_status *js, void *ctx)
{
	(void)ctx;
	int running = 0;
	for (int i = 0; i < js->nnode_list; i++)
		running += !strcmp(js->node_list[i].state, "running") && js->node_list[i].pid > 0;
	return running == 2 && js->ndatasets == 1 && js->datasets[0].samples_done >= 100 &&
	       js->state == RV_RDZV_COMPLETE;
}

static bool job_ended(const struct rv_job_status *js, void *ctx)
{
	(void)ctx;
	return strcmp(js->job_state, "running") != 0;
}

static const struct rv_node_status *node_of(const struct rv_job_status *js, const char *name)
{
	for (int i = 0; i < js->nnode_list; i++)
		if (!strcmp(js->node_list[i].name, name))
			return &js->node_list[i];
	return NULL;
}

/* worker-<rank> of the status; it must be there. */
static const struct rv_node_status *worker_of(const struct rv_job_status *js, int rank)
{
	char name[32];
	snprintf(name, sizeof(name), "worker-%d", rank);
	const struct rv_node_status *n = node_of(js, name);
	ck_assert_msg(n, "%s is not in the status", name);
	return n;
}

/* For a failure: the master's log and the nodes' logs. */
static void dump_logs(const struct job *j)
{
	char *log = rv_test_read_file(j->m.log);
	fprintf(stderr, "---- master log\n%s\n", log ? log : "(none)");
	free(log);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "tail -n 20 %s/state/nodes/*.log >&2", j->m.dir);
	if (system(cmd) != 0)
		fprintf(stderr, "no node logs\n");
}

/* The master exits by itself: its exit status. */
static int master_exit(struct job *j, int timeout_ms)
{
	int st = -1;
	ck_assert_int_eq(rv_proc_wait(&j->m.proc, timeout_ms, &st), 0);
	rv_proc_release(&j->m.proc);
	j->m.pid = 0;
	ck_assert_msg(WIFEXITED(st), "master ended by signal %d", WTERMSIG(st));
	return WEXITSTATUS(st);
}

/* No sample of any epoch was counted twice by the nodes' notes, and every
 * one was counted, but for at most `killed` shards: a node killed while its
 * done was in flight may have been counted by the master without noting it
 * (the master's own count, checked by the caller, has them). */
static void assert_exactly_once(const struct job *j, int killed)
{
	long missing = 0;
	long total = j->size * j->epochs;
	int *seen = calloc((size_t)total, sizeof(int));
	ck_assert_ptr_nonnull(seen);
	for (int r = 0; r < 2; r++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/worker-%d.done", j->out, r);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		int ep;
		long a, b;
		while (fscanf(f, "%d %ld %ld", &ep, &a, &b) == 3)
			for (long i = a; i < b; i++)
				seen[(long)ep * j->size + i]++;
		fclose(f);
	}
	for (long i = 0; i < total; i++) {
		ck_assert_msg(seen[i] <= 1, "sample %ld of epoch %ld counted %d times", i % j->size,
			      i / j->size, seen[i]);
		missing += seen[i] == 0;
	}
	ck_assert_msg(missing <= killed * 10L, "%ld samples never counted", missing);
	free(seen);
}

/* Every rendezvous a node took part in gave it the same group rank. */
static void assert_same_ranks(const struct job *j, int *rounds)
{
	*rounds = 0;
	for (int r = 0; r < 2; r++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/worker-%d.ranks", j->out, r);
		FILE *f = fopen(path, "r");
		ck_assert_ptr_nonnull(f);
		long round;
		int rank, first = -1, n = 0;
		while (fscanf(f, "%ld %d", &round, &rank) == 2) {
			if (first < 0)
				first = rank;
			ck_assert_msg(rank == first, "worker-%d had group rank %d, then %d", r,
				      first, rank);
			n++;
		}
		fclose(f);
		if (n > *rounds)
			*rounds = n;
	}
}

/* Wait for the job's end and check it is want (the logs when it never
 * ends). */
static void wait_end(const struct job *j, struct rv_master_client *c, struct rv_job_status *js,
		     const char *want)
{
	if (!job_wait(c, js, 60000, job_ended, NULL))
		dump_logs(j);
	ck_assert_msg(js->job_state[0] && strcmp(js->job_state, "running"), "the job never ended");
	ck_assert_msg(!strcmp(js->job_state, want), "job %s, want %s: %s", js->job_state, want,
		      js->job_reason);
}

/* A succeeded job: every sample counted by the master, the master exits
 * 0, no sample counted twice by the nodes (c is freed). */
static void check_succeeded(struct job *j, struct rv_master_client *c,
			    const struct rv_job_status *js, int killed)
{
	ck_assert_int_eq(js->datasets[0].samples_done, js->datasets[0].samples_total);
	rv_master_client_free(c);
	ck_assert_int_eq(master_exit(j, 15000), 0);
	assert_exactly_once(j, killed);
}

START_TEST(test_node_kill9_relaunched_same_rank)
{
	struct job j;
	struct rv_master_client *c = job_run(&j, 2000, 2, 3, "", ",\"--task-ms\",\"5\"", "none");
	static struct rv_job_status js;
	ck_assert_msg(job_wait(c, &js, 30000, all_running_and_busy, NULL),
		      "the nodes never ran together");
	const struct rv_node_status *n = node_of(&js, "worker-1");
	ck_assert_ptr_nonnull(n);
	int pid = n->pid;
	ck_assert_int_eq(kill(pid, SIGKILL), 0);

	wait_end(&j, c, &js, "succeeded");
	n = node_of(&js, "worker-1");
	ck_assert_ptr_nonnull(n);
	ck_assert_int_eq(n->restarts, 1);
	ck_assert_int_eq(n->rank, 1);
	ck_assert_str_eq(n->instance, "worker-1.1");
	ck_assert_int_ne(n->pid, pid);
	ck_assert_int_eq(node_of(&js, "worker-0")->restarts, 0);
	check_succeeded(&j, c, &js, 1);
	int rounds;
	assert_same_ranks(&j, &rounds);
	ck_assert_int_ge(rounds, 2); /* the world re-formed after the kill */
	rv_test_master_cleanup(&j.m);
}
END_TEST

START_TEST(test_node_always_fails)
{
	struct job j;
	struct rv_master_client *c =
		job_run(&j, 200, 1, 2, "", ",\"--exit\",\"1\",\"--fail-rank\",\"1\"", "none");
	static struct rv_job_status js;
	wait_end(&j, c, &js, "failed");
	ck_assert_msg(strstr(js.job_reason, "worker-1") &&
			      strstr(js.job_reason, "exited with code 1"),
		      "reason: %s", js.job_reason);
	const struct rv_node_status *n = node_of(&js, "worker-1");
	ck_assert_ptr_nonnull(n);
	ck_assert_int_eq(n->restarts, 2); /* restartCount */
	ck_assert_str_eq(n->state, "failed");
	rv_master_client_free(c);
	ck_assert_int_eq(master_exit(&j, 20000), 1);
	char *log = rv_test_read_file(j.m.log);
	ck_assert_ptr_nonnull(strstr(log, "msg=\"job finished\" state=failed"));
	free(log);
	rv_test_master_cleanup(&j.m);
}
END_TEST

START_TEST(test_node_oom_relaunched_with_more_memory)
{
	const char *why = "";
	if (!rv_test_cgroup_memory_usable(&why)) {
		RV_TEST_SKIP(true, "no memory cgroup to OOM-kill a node in: %s", why);
		return;
	}
	struct job j;
	struct rv_master_client *c = job_run(&j, 200, 1, 0,
					     ",\"resources\":{\"cpu\":1,\"memory\":\"64Mi\"}",
					     ",\"--oom-below\",\"100\"", "auto");
	static struct rv_job_status js;
	wait_end(&j, c, &js, "succeeded");
	/* The first OOM raises the role's memory: a node that had not run out
	 * yet may get it in place instead of being killed. */
	int ooms = 0;
	for (int r = 0; r < 2; r++) {
		const struct rv_node_status *n = worker_of(&js, r);
		ooms += n->oom_relaunches;
		ck_assert_int_eq(n->restarts, 0); /* an OOM is not a crash */
		ck_assert_int_ge(n->memory_limit_mb, 100);
	}
	ck_assert_int_ge(ooms, 1);
	check_succeeded(&j, c, &js, 0);
	rv_test_master_cleanup(&j.m);
}
END_TEST

/* kill -9 of the master mid-epoch, then a restart on the same state
 * folder.  survive: the nodes outlive it and are adopted (same instance,
 * same pid); else they die with it and come back as their next instance.
 * Either way nothing counts as a crash (restartCount is 0) and the job
 * succeeds. */
static void master_kill9(bool survive)
{
	setenv("ROVER_NODE_SURVIVE_MASTER", survive ? "true" : "false", 1);
	struct job j;
	struct rv_master_client *c = job_run(&j, 2000, 2, 0, "", ",\"--task-ms\",\"5\"", "none");
	static struct rv_job_status js;
	ck_assert_msg(job_wait(c, &js, 30000, all_running_and_busy, NULL),
		      "the nodes never ran together");
	int pid[2] = { node_of(&js, "worker-0")->pid, node_of(&js, "worker-1")->pid };
	ck_assert_int_ge(rv_test_master_stop(&j.m, SIGKILL, 5000), 0);
	usleep(300 * 1000);
	for (int i = 0; i < 100 && !survive && (kill(pid[0], 0) == 0 || kill(pid[1], 0) == 0); i++)
		usleep(20 * 1000);
	for (int r = 0; r < 2; r++) /* alive, or gone with the master (PDEATHSIG) */
		ck_assert_int_eq(kill(pid[r], 0) == 0, survive);
	ck_assert_int_eq(rv_test_master_restart(&j.m), 0);
	if (survive) { /* adopted: the same processes carry on */
		ck_assert(job_wait(c, &js, 10000, all_running_and_busy, NULL));
		for (int r = 0; r < 2; r++)
			ck_assert_int_eq(js.node_list[r].pid, pid[js.node_list[r].rank]);
	}
	wait_end(&j, c, &js, "succeeded");
	for (int r = 0; r < 2; r++) {
		const struct rv_node_status *n = worker_of(&js, r);
		ck_assert_int_eq(n->rank, r);
		ck_assert_int_eq(n->restarts, 0); /* restartCount 0: a crash would fail the job */
		ck_assert_msg((strcmp(n->instance, n->name) == 0) == survive, "%s is now %s",
			      n->name, n->instance);
	}
	char *log = rv_test_read_file(j.m.log);
	ck_assert_int_eq(strstr(log, "msg=\"node adopted after a master restart\"") != NULL,
			 survive);
	free(log);
	check_succeeded(&j, c, &js, 2);
	rv_test_master_cleanup(&j.m);
}

START_TEST(test_master_kill9_nodes_relaunched)
{
	master_kill9(false);
}
END_TEST

START_TEST(test_master_kill9_nodes_adopted)
{
	master_kill9(true);
}
END_TEST

static Suite *master_nodes_suite(void)
{
	TCase *tc = RV_TEST_TCASE("nodes", 120, test_node_kill9_relaunched_same_rank,
				  test_node_always_fails, test_node_oom_relaunched_with_more_memory,
				  test_master_kill9_nodes_relaunched,
				  test_master_kill9_nodes_adopted);
	return RV_TEST_SUITE("master_nodes", tc);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--simulated-agent")) {
		struct sim_opts o = { .exit_code = -1, .fail_rank = -1, .out = "." };
		for (int i = 2; i + 1 < argc; i += 2) {
			int64_t v = 0;
			if (!strcmp(argv[i], "--out")) {
				o.out = argv[i + 1];
				continue;
			}
			if (rv_parse_i64(argv[i + 1], -1, INT32_MAX, &v) < 0)
				return 2;
			if (!strcmp(argv[i], "--exit"))
				o.exit_code = (int)v;
			else if (!strcmp(argv[i], "--fail-rank"))
				o.fail_rank = (int)v;
			else if (!strcmp(argv[i], "--oom-below"))
				o.oom_below = v;
			else if (!strcmp(argv[i], "--task-ms"))
				o.task_ms = (int)v;
		}
		return simulated_agent_main(&o);
	}
	return rv_test_run_suite(master_nodes_suite());
}
