/*
 * check_sim.c: rover-sim (tests/sim) against the real rover-brain on a
 * private PostgreSQL, on the three small jobs of tests/sim/traces/small.trace:
 * the sim plays every job, its oracle is consistent, the baseline follows
 * DLRover's rules (OOM doubles memory, at most +8 GiB; an all-reduce job is
 * not relaunched after OOM), and Rover's plans meet a loose bound.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "testutil.h"

#define TRACE "tests/sim/traces/small.trace"

static char conninfo[1024];
static struct rv_test_brain brain;

static void start_brain(void)
{
	ck_assert_int_eq(rv_test_brain_start_fresh(&brain, 0, conninfo, sizeof(conninfo),
						   (const char *const[]){ "--plan-debounce-ms", "0",
									  NULL },
						   NULL),
			 0);
}

static void teardown(void)
{
	rv_test_brain_stop(&brain, SIGTERM, 10);
}

/* Run rover-sim with args; stdout into out (may be NULL).  Returns the exit
 * status, or -1 when it did not exit normally. */
static int run_sim(const char *const *args, char *out, size_t size)
{
	const char *dir = getenv("ROVER_BIN_DIR");
	char bin[1024];
	snprintf(bin, sizeof(bin), "%s/rover-sim", dir ? dir : "build/bin");
	const char *argv[32] = { bin };
	int n = 1;
	for (int i = 0; args[i] && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	/* stdout captured, stderr to ours (the test log) */
	struct rv_proc_opts o = { .argv = argv, .io[1] = { RV_PROC_PIPE } };
	struct rv_proc p;
	int rc = rv_proc_spawn(&p, &o);
	ck_assert_msg(rc == 0, "could not run %s: %s", bin, strerror(-rc));
	size_t len = 0;
	ssize_t r;
	char sink[4096];
	while ((r = read(p.fd[1], out && len + 1 < size ? out + len : sink,
			 out && len + 1 < size ? size - len - 1 : sizeof(sink))) > 0)
		if (out && len + 1 < size)
			len += (size_t)r;
	if (out)
		out[len] = 0;
	int st;
	ck_assert_int_eq(rv_proc_wait(&p, -1, &st), 0);
	rv_proc_release(&p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const cJSON *job_named(const cJSON *root, const char *name)
{
	const cJSON *j;
	cJSON_ArrayForEach(j, cJSON_GetObjectItem(root, "jobs"))
	{
		if (!strcmp(rv_test_json_str(j, "name"), name))
			return j;
	}
	ck_abort_msg("job %s missing from the sim's JSON", name);
	return NULL;
}

/* The JSON document rover-sim wrote at path, which is removed: the
 * caller's (cJSON_Delete). */
static cJSON *take_json(const char *path)
{
	char *txt = rv_test_read_file(path);
	unlink(path);
	ck_assert_ptr_nonnull(txt);
	cJSON *root = cJSON_Parse(txt);
	free(txt);
	ck_assert_ptr_nonnull(root);
	return root;
}

START_TEST(sim_plays_small_trace)
{
	start_brain();
	char json[] = "/tmp/check_sim_XXXXXX";
	int fd = mkstemp(json);
	ck_assert_int_ge(fd, 0);
	close(fd);
	char line[4096];
	const char *args[] = { "--trace", TRACE, "--brain", brain.url, "--json", json,
			       "--cluster", "--nodes", "4", NULL };
	int rc = run_sim(args, line, sizeof(line));
	ck_assert_msg(rc == 0, "rover-sim exit %d: %s", rc, line);
	ck_assert_msg(strstr(line, "sim jobs=3 ") == line, "summary line: %s", line);
	ck_assert_ptr_nonnull(strstr(line, "util_user="));
	cJSON *root = take_json(json);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "jobs")), 3);

	/* The oracle: within the 90% band of the best, never above it, and no
	 * dearer than the user's own request, which reaches at most the best. */
	const cJSON *j;
	cJSON_ArrayForEach(j, cJSON_GetObjectItem(root, "jobs"))
	{
		double best = rv_test_json_num(j, "oracle.best_speed", -1);
		double sp = rv_test_json_num(j, "oracle.speed", -1);
		double cores = rv_test_json_num(j, "oracle.cores", -1);
		ck_assert_double_gt(best, 0);
		ck_assert_double_ge(sp, 0.9 * best - 1e-9);
		ck_assert_double_le(sp, best + 1e-9);
		ck_assert_double_gt(cores, 0);
		ck_assert_double_le(rv_test_json_num(j, "user_speed", -1), best * (1 + 1e-9));
		ck_assert_msg(rv_test_json_num(j, "user_cores", 0) >= cores,
			      "%s: the oracle uses more cores than the user asked",
			      rv_test_json_str(j, "name"));
		ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "rover"), "ran")),
			      "%s: rover run failed", rv_test_json_str(j, "name"));
	}

	/* The oracle's replay: every job at a config that fits a node, so
	 * none is replaced by the user's request. */
	double ou = rv_test_json_num(root, "cluster.oracle.util", -1);
	ck_assert_msg(ou > 0 && ou <= 100, "oracle util %g", ou);
	ck_assert_double_eq(rv_test_json_num(root, "cluster.oracle.unplaced", -1), 0);

	/* Baseline, PS job with an under-sized memory request: each OOM doubles
	 * the memory, at most +8 GiB, until it fits; the job then runs. */
	const cJSON *ps = job_named(root, "small-ps-oom");
	const cJSON *bev = cJSON_GetObjectItem(cJSON_GetObjectItem(ps, "baseline"), "oom_events");
	ck_assert_int_ge(cJSON_GetArraySize(bev), 1);
	const cJSON *e;
	cJSON_ArrayForEach(e, bev)
	{
		double from = rv_test_json_num(e, "from_mb", 0), to = rv_test_json_num(e, "to_mb", 0);
		ck_assert_double_eq(to, fmin(2 * from, from + 8192));
	}
	ck_assert(!cJSON_IsTrue(rv_test_json_at(ps, "baseline.oom_failed")));
	ck_assert_double_gt(rv_test_json_num(ps, "baseline.speed", 0), 0);
	/* Baseline, all-reduce job short of memory: never relaunched, it fails. */
	const cJSON *ar = job_named(root, "small-ar-oom");
	ck_assert(cJSON_IsTrue(rv_test_json_at(ar, "baseline.oom_failed")));
	ck_assert_double_eq(rv_test_json_num(ar, "baseline.speed", -1), 0);

	/* Rover, loosely: every OOM recovered (all-reduce included), every job
	 * at least half the oracle's throughput. */
	cJSON_ArrayForEach(j, cJSON_GetObjectItem(root, "jobs"))
	{
		const char *name = rv_test_json_str(j, "name");
		ck_assert_msg(!cJSON_IsTrue(rv_test_json_at(j, "rover.oom_failed")),
			      "%s: an OOM was not recovered under Rover", name);
		double tr = rv_test_json_num(j, "rover.throughput_ratio", 0);
		ck_assert_msg(tr >= 0.5, "%s: Rover reaches %.2f of the oracle's throughput", name, tr);
	}
	/* the all-reduce job the baseline loses to OOM runs under Rover */
	ck_assert_double_gt(rv_test_json_num(ar, "rover.speed", 0), 0);
	ck_assert_int_eq(rv_test_json_num(root, "rover.oom_recovered", -1),
			 rv_test_json_num(root, "rover.oom_jobs", -2));
	cJSON_Delete(root);
}
END_TEST

/* The simulator tells the truth: the same traces and seed give the same
 * line; a request larger than any node is infeasible (the oracle never picks
 * one, Rover never asks for one once the brain knows the nodes); memory that
 * rises during the run kills the job late (within its first round, before a
 * plan could see the trend), and that OOM, reported as a killed container
 * shows it (the limit and the last sampled RSS), is recovered. */
START_TEST(sim_is_deterministic_and_honest)
{
	start_brain();
	char trace[] = "/tmp/check_sim_trace_XXXXXX";
	int fd = mkstemp(trace);
	ck_assert_int_ge(fd, 0);
	const char *doc =
		"{\"cluster\":{\"nodes\":4,\"node_cpu\":16,\"node_mem_gb\":64}}\n"
		"{\"name\":\"big-ask\",\"strategy\":\"allreduce\",\"t\":[0.02,0.001,0.0002],"
		"\"worker_cpu\":4,\"worker_mem_mb\":4096,\"max_workers\":8,\"noise\":0.02,"
		"\"user\":{\"workers\":4,\"cpu\":24,\"memory_mb\":8192}}\n"
		"{\"name\":\"late-oom\",\"strategy\":\"allreduce\",\"t\":[0.02,0.001,0.0005],"
		"\"worker_cpu\":2,\"worker_mem_mb\":8192,\"mem_rise\":0.4,\"mem_rise_s\":100,"
		"\"max_workers\":8,\"noise\":0.02,\"user\":{\"workers\":4,\"cpu\":3,"
		"\"memory_mb\":6144}}\n";
	ck_assert_int_eq(write(fd, doc, strlen(doc)), (ssize_t)strlen(doc));
	close(fd);
	char json[] = "/tmp/check_sim_XXXXXX";
	fd = mkstemp(json);
	ck_assert_int_ge(fd, 0);
	close(fd);
	char line1[4096], line2[4096];
	const char *a1[] = { "--trace", trace, "--brain", brain.url, "--seed", "3",
			     "--tag",   "a",   "--json",  json,      NULL };
	ck_assert_int_eq(run_sim(a1, line1, sizeof(line1)), 0);
	const char *a2[] = { "--trace", trace,   "--brain", brain.url, "--seed",
			     "3",       "--tag", "b",       NULL };
	ck_assert_int_eq(run_sim(a2, line2, sizeof(line2)), 0);
	unlink(trace);
	ck_assert_str_eq(line1, line2);
	ck_assert_ptr_nonnull(strstr(line1, " jobs_meeting_all="));
	cJSON *root = take_json(json);
	const cJSON *big = job_named(root, "big-ask");
	ck_assert(cJSON_IsTrue(rv_test_json_at(big, "baseline.infeasible")));
	ck_assert(!cJSON_IsTrue(rv_test_json_at(big, "baseline.meets_targets")));
	ck_assert(!cJSON_IsTrue(rv_test_json_at(big, "rover.infeasible")));
	ck_assert_double_le(rv_test_json_num(big, "oracle.config.worker_cpu", 99), 16);
	ck_assert_double_le(rv_test_json_num(big, "rover.final.worker_cpu", 99), 16);
	const cJSON *late = job_named(root, "late-oom");
	ck_assert_int_ge(rv_test_json_num(late, "rover.ooms", 0), 1);
	ck_assert(!cJSON_IsTrue(rv_test_json_at(late, "rover.oom_failed")));
	/* the baseline never relaunches an all-reduce job: it dies late */
	ck_assert(cJSON_IsTrue(rv_test_json_at(late, "baseline.oom_failed")));
	cJSON_Delete(root);
}
END_TEST

START_TEST(sim_fails_without_brain)
{
	/* Nothing listens on port 1: every job fails to play, the exit says so. */
	const char *args[] = { "--trace", TRACE, "--brain", "http://127.0.0.1:1", NULL };
	ck_assert_int_eq(run_sim(args, NULL, 0), 1);
	/* A bad trace is a usage error. */
	const char *bad[] = { "--trace", "/nonexistent.trace", "--policy", "baseline", NULL };
	ck_assert_int_eq(run_sim(bad, NULL, 0), 2);
}
END_TEST

RV_TEST_MAIN_PG_FIXTURE_TCASE("sim", NULL, teardown, "sim", 120, sim_plays_small_trace,
			      sim_is_deterministic_and_honest, sim_fails_without_brain)
