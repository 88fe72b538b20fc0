/*
 * check_brain_bounds.c: rover-brain's limits and input checks, against the
 * real binary on its embedded PostgreSQL: cluster reports over the size
 * limit (413) or past the node limit (403), the paginated cluster listing
 * with totals, nodes expiring after cluster.node_ttl_s, namespace quotas
 * (403 quota_exceeded), bodies with a key twice, an integer beyond 2^53 - 1
 * or bytes that are not UTF-8 (400 naming the field, nothing stored), and
 * the token read from --token-file with the Bearer scheme in any case.
 */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brainfix.h"
#include "buf.h"
#include "clifix.h"
#include "testutil.h"

static char suite_dir[64]; /* made in the parent: its teardown runs even when a test fails */
static char dir[128];      /* this test's folder inside it */
static struct rv_test_brain brain;

static void suite_setup(void)
{
	/* Nothing here is about durability: a cluster without fsync starts
	 * (initdb) in a fraction of the time. */
	setenv("ROVER_PG_NOSYNC", "1", 1);
	snprintf(suite_dir, sizeof(suite_dir), "/tmp/rover-bounds-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(suite_dir));
	chmod(suite_dir, 0755);
}

/* A test that failed exited at once: its brain died with it (SIGKILL) and
 * left its PostgreSQL running.  Stop each cluster under the suite's folder
 * by the pid in its postmaster.pid, as PostgreSQL's immediate shutdown does
 * (SIGQUIT), then remove the folder. */
static void suite_teardown(void)
{
	DIR *d = opendir(suite_dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char path[400];
		snprintf(path, sizeof(path), "%s/%.64s/data/pgdata/postmaster.pid", suite_dir,
			 de->d_name);
		FILE *f = fopen(path, "re");
		long pid = 0;
		if (!f)
			continue;
		if (fscanf(f, "%ld", &pid) != 1)
			pid = 0;
		fclose(f);
		if (pid <= 0 || kill((pid_t)pid, SIGQUIT) < 0)
			continue;
		for (int i = 0; i < 300 && kill((pid_t)pid, 0) == 0; i++)
			usleep(20000);
	}
	if (d)
		closedir(d);
	const char *rm[] = { "rm", "-rf", suite_dir, NULL };
	struct rv_proc_opts r = { .argv = rm };
	int st;
	rv_proc_run(&r, 30000, &st, NULL);
}

static void setup(void)
{
	static int n;
	snprintf(dir, sizeof(dir), "%s/t%d-%d", suite_dir, n++, (int)getpid());
	ck_assert_int_eq(mkdir(dir, 0755), 0);
}

static void teardown(void)
{
	if (brain.pid > 0)
		rv_test_brain_stop(&brain, SIGTERM, 30);
}

/* Start with the data dir in ours and the extra flags (NULL-terminated). */
static void start(const char *const *extra)
{
	char data[300];
	snprintf(data, sizeof(data), "%s/data", dir);
	const char *args[32] = { "--data-dir", data };
	int n = 2;
	for (int i = 0; extra && extra[i] && n < 31; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	ck_assert_int_eq(rv_test_brain_start(&brain, args), 0);
}

/* POST/GET and check the status; the reply is the caller's. */
static void call(const char *method, const char *path, const char *body, long want,
		 struct rv_test_reply *r)
{
	ck_assert_int_eq(rv_test_http(&brain, method, path, body, NULL, r), 0);
	ck_assert_msg(r->status == want, "%s %s: status %ld, want %ld: %s", method, path, r->status,
		      want, r->body ? r->body : "");
}

/* A refusal: the status, the error name and the field it names. */
static void refused(const char *method, const char *path, const char *body, long status,
		    const char *error, const char *field, const char *detail)
{
	struct rv_test_reply r;
	call(method, path, body, status, &r);
	ck_assert_ptr_nonnull(r.json);
	ck_assert_str_eq(rv_test_json_str(r.json, "error"), error);
	ck_assert_str_eq(rv_test_json_str(r.json, "field"), field);
	const char *d = rv_test_json_str(r.json, "detail");
	ck_assert_msg(d && strstr(d, detail), "detail \"%s\" lacks \"%s\"", d ? d : "", detail);
	ck_assert_msg(!strstr(d, "sqlstate"), "PostgreSQL's raw error: %s", d);
	rv_test_reply_release(&r);
}

/* A report of nodes prefix-<from>..prefix-<to-1>, 4 cpus and 1000 MiB each,
 * cpu_used given. */
static char *report(const char *prefix, int from, int to, double cpu_used)
{
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_puts(&b, "{\"nodes\":[");
	for (int i = from; i < to; i++)
		rv_buf_printf(&b,
			      "%s{\"name\":\"%s-%03d\",\"ts\":%d,\"cpu\":4,\"memory_mb\":1000,"
			      "\"cpu_used\":%g,\"memory_used_mb\":100}",
			      i > from ? "," : "", prefix, i, 1000 + i, cpu_used);
	rv_buf_puts(&b, "]}");
	return rv_buf_steal(&b);
}

static void post_report(const char *prefix, int from, int to, double cpu_used, long want)
{
	char *body = report(prefix, from, to, cpu_used);
	struct rv_test_reply r;
	call("POST", "/v1/cluster/nodes", body, want, &r);
	rv_test_reply_release(&r);
	free(body);
}

static cJSON *cluster(const char *query)
{
	char path[256];
	snprintf(path, sizeof(path), "/v1/cluster%s", query);
	struct rv_test_reply r;
	call("GET", path, NULL, 200, &r);
	cJSON *doc = r.json;
	r.json = NULL;
	rv_test_reply_release(&r);
	ck_assert_ptr_nonnull(doc);
	return doc;
}

static const char *const cluster_flags[] = {
	"--cluster-node-ttl-s",
	"2",
	"--cluster-max-nodes",
	"50",
	"--cluster-max-report-nodes",
	"20",
	"--cluster-max-page",
	"10",
	NULL,
};

START_TEST(cluster_reports_are_bounded_and_listed_in_pages)
{
	start(cluster_flags);
	/* Over the report limit: 413 naming the field, nothing stored. */
	char *big = report("n", 0, 21, 0);
	refused("POST", "/v1/cluster/nodes", big, 413, "too_large", "nodes",
		"cluster.max_report_nodes");
	free(big);
	post_report("n", 0, 20, 1, 200);
	post_report("n", 20, 40, 1, 200);
	/* A report naming stored nodes again adds none: accepted. */
	post_report("n", 30, 40, 1, 200);
	/* Past cluster.max_nodes (40 + 20 > 50): 403, nothing of it stored. */
	char *more = report("m", 0, 20, 0);
	refused("POST", "/v1/cluster/nodes", more, 403, "quota_exceeded", "nodes",
		"cluster.max_nodes");
	free(more);

	/* Pages of 10 by cursor: every node once, in name order, with totals. */
	char query[128] = "?limit=10";
	int seen = 0, pages = 0;
	for (;;) {
		cJSON *doc = cluster(query);
		ck_assert_int_eq((int)rv_test_json_num(doc, "total_nodes", -1), 40);
		ck_assert_int_eq((int)rv_test_json_num(doc, "capacity.nodes", -1), 40);
		ck_assert(rv_test_json_num(doc, "capacity.cpu", -1) == 160);
		ck_assert(rv_test_json_num(doc, "used.cpu", -1) == 40);
		ck_assert(rv_test_json_num(doc, "free.cpu", -1) == 120);
		ck_assert_int_eq((int)rv_test_json_num(doc, "free.memory_mb", -1), 40 * 900);
		const cJSON *nodes = cJSON_GetObjectItem(doc, "nodes");
		ck_assert_int_le(cJSON_GetArraySize(nodes), 10);
		const cJSON *n;
		cJSON_ArrayForEach(n, nodes)
		{
			char want[16];
			snprintf(want, sizeof(want), "n-%03d", seen++);
			ck_assert_str_eq(rv_test_json_str(n, "name"), want);
		}
		pages++;
		const cJSON *next = cJSON_GetObjectItem(doc, "next_cursor");
		if (!cJSON_IsString(next)) {
			ck_assert(cJSON_IsNull(next));
			cJSON_Delete(doc);
			break;
		}
		snprintf(query, sizeof(query), "?limit=10&cursor=%s", next->valuestring);
		cJSON_Delete(doc);
		ck_assert_int_lt(pages, 10);
	}
	ck_assert_int_eq(seen, 40);
	ck_assert_int_eq(pages, 4);
	/* A page larger than cluster.max_page, or a cursor that is not UTF-8. */
	refused("GET", "/v1/cluster?limit=11", NULL, 400, "invalid_argument", "limit", "limit");
	refused("GET", "/v1/cluster?cursor=%ff", NULL, 400, "invalid_argument", "cursor", "UTF-8");
}
END_TEST

START_TEST(cluster_nodes_expire_and_totals_follow)
{
	start(cluster_flags);
	post_report("n", 0, 20, 1, 200);
	usleep(1200 * 1000);
	/* Five nodes report again (with more load), the other fifteen fall silent. */
	post_report("n", 0, 5, 3, 200);
	cJSON *doc = NULL;
	for (int i = 0; i < 100; i++) {
		cJSON_Delete(doc);
		doc = cluster("");
		if (rv_test_json_num(doc, "total_nodes", -1) == 5)
			break;
		usleep(100 * 1000);
	}
	ck_assert_int_eq((int)rv_test_json_num(doc, "total_nodes", -1), 5);
	ck_assert(rv_test_json_num(doc, "capacity.cpu", -1) == 20);
	ck_assert(rv_test_json_num(doc, "free.cpu", -1) == 5);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "nodes")), 5);
	cJSON_Delete(doc);
	/* Counted on /metrics. */
	struct rv_test_reply r;
	call("GET", "/metrics", NULL, 200, &r);
	ck_assert_msg(strstr(r.body, "\nrover_brain_cluster_nodes_expired_total 15\n"), "%s",
		      r.body);
	rv_test_reply_release(&r);
	/* With room again, new nodes are accepted. */
	post_report("m", 0, 20, 0, 200);
}
END_TEST

static char *job_doc(const char *ns, const char *name, int max_replicas)
{
	char *s = malloc(1024);
	snprintf(s, 1024,
		 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		 "\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"},"
		 "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
		 "\"replicaSpecs\":{\"worker\":{\"replicas\":1,\"minReplicas\":1,"
		 "\"maxReplicas\":%d,\"command\":[\"true\"]}}}}",
		 name, ns, max_replicas);
	return s;
}

static void register_job(const char *ns, const char *name, int max_replicas, long want)
{
	char *doc = job_doc(ns, name, max_replicas);
	struct rv_test_reply r;
	call("POST", "/v1/jobs", doc, want, &r);
	rv_test_reply_release(&r);
	free(doc);
}

static int jobs_in(const char *ns)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs?namespace=%s", ns);
	struct rv_test_reply r;
	call("GET", path, NULL, 200, &r);
	int n = cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "jobs"));
	rv_test_reply_release(&r);
	return n;
}

START_TEST(namespace_quotas)
{
	const char *flags[] = { "--quota-jobs-per-namespace", "2", "--quota-nodes-per-namespace",
				"10", NULL };
	start(flags);
	register_job("team-a", "one", 4, 201);
	register_job("team-a", "two", 4, 201);
	char *doc = job_doc("team-a", "three", 1);
	refused("POST", "/v1/jobs", doc, 403, "quota_exceeded", "metadata.namespace",
		"quota.jobs_per_namespace");
	free(doc);
	/* Another namespace has its own count; 8 + 4 nodes would pass 10 there too. */
	register_job("team-b", "big", 8, 201);
	doc = job_doc("team-b", "more", 4);
	refused("POST", "/v1/jobs", doc, 403, "quota_exceeded", "spec.replicaSpecs",
		"quota.nodes_per_namespace");
	free(doc);
	register_job("team-b", "small", 2, 201);
	ck_assert_int_eq(jobs_in("team-a"), 2);
	ck_assert_int_eq(jobs_in("team-b"), 2);
	/* A finished job frees its place. */
	struct rv_test_reply r;
	call("GET", "/v1/jobs?namespace=team-a", NULL, 200, &r);
	const char *uid =
		rv_test_json_str(cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "jobs"), 0), "uid");
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/events", uid);
	struct rv_test_reply e;
	call("POST", path, "{\"type\":\"job_finished\",\"ts\":1}", 200, &e);
	rv_test_reply_release(&e);
	rv_test_reply_release(&r);
	register_job("team-a", "three", 1, 201);
}
END_TEST

START_TEST(bodies_with_duplicate_keys_big_integers_or_bad_utf8_are_refused)
{
	start(NULL);
	/* The first name was validated, the last stored: now refused. */
	refused("POST", "/v1/jobs",
		"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		"\"metadata\":{\"name\":\"a\",\"name\":\"b\"},\"spec\":{\"distributionStrategy\":"
		"\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{\"replicas\":1}}}}",
		400, "invalid_argument", "metadata.name", "duplicate key \"name\"");
	/* 2^53 + 1 would be stored as 2^53. */
	refused("POST", "/v1/jobs",
		"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		"\"metadata\":{\"name\":\"a\"},\"spec\":{\"distributionStrategy\":"
		"\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{\"replicas\":1}},"
		"\"model\":{\"parameters\":9007199254740993}}}",
		400, "invalid_argument", "spec.model.parameters", "2^53");
	/* Not UTF-8: named, not PostgreSQL's "invalid byte sequence". */
	refused("POST", "/v1/jobs",
		"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		"\"metadata\":{\"name\":\"a\",\"labels\":{\"user\":\"ana\xff\"}},\"spec\":{"
		"\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{"
		"\"replicas\":1}}}}",
		400, "invalid_argument", "metadata.labels.user", "UTF-8");
	refused("POST", "/v1/cluster/nodes",
		"{\"nodes\":[{\"name\":\"a\",\"ts\":1,\"cpu\":1,\"memory_mb\":1,\"ts\":2}]}", 400,
		"invalid_argument", "nodes[0].ts", "duplicate key");
	refused("GET", "/v1/jobs?namespace=%ff", NULL, 400, "invalid_argument", "namespace",
		"UTF-8");
	refused("GET", "/v1/jobs/j-%ff%fe", NULL, 400, "invalid_argument", "uid", "UTF-8");
	ck_assert_int_eq(jobs_in("default"), 0);
}
END_TEST

/* Status of a POST /v1/jobs with this Authorization header, through curl
 * (the fixture's client always writes "Bearer"). */
static long post_with_auth(const char *auth)
{
	char url[128], hdr[256];
	snprintf(url, sizeof(url), "%s/v1/jobs", brain.url);
	snprintf(hdr, sizeof(hdr), "Authorization: %s", auth);
	const char *argv[] = { "curl",
			       "-s",
			       "-o",
			       "/dev/null",
			       "-w",
			       "%{http_code}",
			       "-H",
			       hdr,
			       "--data-binary",
			       "@examples/job.json",
			       url,
			       NULL };
	struct rv_proc_opts o = { .argv = argv };
	struct rv_buf out;
	rv_buf_init(&out);
	int st = 0;
	ck_assert_int_eq(rv_proc_run(&o, 30000, &st, &out), 0);
	long code = out.data ? strtol(out.data, NULL, 10) : -1;
	rv_buf_release(&out);
	return code;
}

START_TEST(token_from_file_and_bearer_in_any_case)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/token", dir);
	rv_test_write_file(path, "s3cret-from-file\n");
	const char *flags[] = { "--token-file", path, NULL };
	start(flags);
	ck_assert_int_eq(post_with_auth("Bearer wrong"), 401);
	ck_assert_int_eq(post_with_auth("bearer s3cret-from-file"), 201);
	/* Same name again: past auth (409), in yet another spelling. */
	ck_assert_int_eq(post_with_auth("BEARER s3cret-from-file"), 409);
	/* The token is not on the brain's command line. */
	char cmdline[4096] = "";
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)brain.pid);
	FILE *f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	size_t n = fread(cmdline, 1, sizeof(cmdline) - 1, f);
	fclose(f);
	ck_assert(memmem(cmdline, n, "s3cret", 6) == NULL);
	ck_assert(memmem(cmdline, n, "--token-file", 12) != NULL);
}
END_TEST

START_TEST(token_file_missing_or_empty_fails_start)
{
	char path[300], data[300];
	snprintf(path, sizeof(path), "%s/empty", dir);
	snprintf(data, sizeof(data), "%s/data", dir);
	FILE *f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	for (int missing = 0; missing < 2; missing++) {
		if (missing)
			snprintf(path, sizeof(path), "%s/none", dir);
		const char *args[] = { "--data-dir", data, "--token-file", path, NULL };
		char *out, *err;
		ck_assert_int_ne(rv_test_cli_run("brain", args, &out, &err), 0);
		ck_assert_msg(strstr(err, "could not read the token file") &&
				      strstr(err, missing ? "could not open" : "no token in"),
			      "%s", err);
		free(out);
		free(err);
	}
}
END_TEST

static Suite *brain_bounds_suite(void)
{
	TCase *tc = RV_TEST_TCASE("bounds", 120, cluster_reports_are_bounded_and_listed_in_pages,
				  cluster_nodes_expire_and_totals_follow, namespace_quotas,
				  bodies_with_duplicate_keys_big_integers_or_bad_utf8_are_refused,
				  token_from_file_and_bearer_in_any_case,
				  token_file_missing_or_empty_fails_start);
	tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
	tcase_add_checked_fixture(tc, setup, teardown);
	return RV_TEST_SUITE("brain_bounds", tc);
}

RV_TEST_MAIN(brain_bounds_suite)
