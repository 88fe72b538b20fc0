/*
 * check_master_cli.c: the rover-master command line, run as a real process:
 * --help lists every key of conf/rover-master.conf (as a flag and as an
 * environment variable), --print-conf equals that file byte for byte (so it
 * never goes stale), a bad job spec exits 2 with a message naming the field,
 * a missing --job and a bad --nnodes are refused naming them, SIGTERM
 * stops a running master cleanly (exit 0), and a DLRover spec without
 * datasets runs its job to the end.
 */
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "cleanup.h"
#include "clifix.h"
#include "masterfix.h"
#include "testutil.h"

START_TEST(test_help_lists_every_key)
{
	char *out = rv_test_cli_stdout("master", "--help");
	ck_assert_ptr_nonnull(strstr(out, "usage: rover-master "));
	static const char *const flags[] = { "--job",       "--listen", "--state-dir", "--nnodes",
					     "--node-unit", "--token",  "--config" };
	for (size_t i = 0; i < RV_ARRAY_SIZE(flags); i++)
		ck_assert_msg(strstr(out, flags[i]), "--help lacks %s", flags[i]);
	int keys = rv_test_cli_help_has_keys("master", out);
	/* every timeout is a documented key */
	static const char *const timeouts[] = { "last_call_ms",         "max_wait_s",
						"heartbeat_timeout_ms", "doing_timeout_ms",
						"commit_delay_us",      "snapshot_every",
						"sync_timeout_ms" };
	for (size_t i = 0; i < RV_ARRAY_SIZE(timeouts); i++)
		ck_assert_msg(strstr(out, timeouts[i]), "--help lacks %s", timeouts[i]);
	ck_assert_int_ge(keys, 20);
	free(out);
}
END_TEST

START_TEST(test_print_conf_matches_file)
{
	rv_test_cli_print_conf_matches("master");
}
END_TEST

/* A spec with a bad field: exit 2, the message names the field. */
START_TEST(test_bad_spec_names_field)
{
	static const struct {
		const char *spec, *field;
	} bad[] = {
		{ "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		  "\"metadata\":{\"name\":\"j\"},\"spec\":{\"distributionStrategy\":"
		  "\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{\"replicas\":1}},"
		  "\"datasets\":[{\"name\":\"train\",\"size\":100,\"shardSize\":0}]}}",
		  "spec.datasets[0].shardSize" },
		{ "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		  "\"metadata\":{\"name\":\"Bad_Name\"},\"spec\":{\"distributionStrategy\":"
		  "\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{\"replicas\":1}},"
		  "\"datasets\":[{\"name\":\"train\",\"size\":100,\"shardSize\":10}]}}",
		  "metadata.name" },
		{ "{\"kind\":", "" },
	};
	for (size_t i = 0; i < RV_ARRAY_SIZE(bad); i++) {
		struct rv_test_master m;
		ck_assert_int_eq(rv_test_master_init(&m, bad[i].spec), 0);
		const char *a[] = { "--job", m.spec, "--state-dir", m.state, NULL };
		char *out, *err;
		int code = rv_test_cli_run("master", a, &out, &err);
		ck_assert_msg(code == 2, "spec %zu: exit %d, want 2 (%s)", i, code, err);
		ck_assert_msg(strstr(err, "invalid job spec"), "spec %zu: %s", i, err);
		if (bad[i].field[0])
			ck_assert_msg(strstr(err, bad[i].field),
				      "spec %zu: \"%s\" does not name %s", i, err, bad[i].field);
		free(out);
		free(err);
		rv_test_master_cleanup(&m);
	}
}
END_TEST

START_TEST(test_bad_command_line)
{
	char *spec = rv_test_master_spec(100, 10, 1, 1, 1);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	char *out, *err;
	const char *none[] = { "--state-dir", m.state, NULL };
	ck_assert_int_ne(rv_test_cli_run("master", none, &out, &err), 0);
	ck_assert_msg(strstr(err, "--job"), "%s", err);
	free(out);
	free(err);
	const char *nn[] = { "--job", m.spec, "--state-dir", m.state, "--nnodes", "3:2", NULL };
	ck_assert_int_ne(rv_test_cli_run("master", nn, &out, &err), 0);
	ck_assert_msg(strstr(err, "nnodes"), "%s", err);
	free(out);
	free(err);
	const char *unit[] = { "--job", m.spec,        "--state-dir", m.state, "--nnodes",
			       "3:3",   "--node-unit", "2",           NULL };
	ck_assert_int_ne(rv_test_cli_run("master", unit, &out, &err), 0);
	ck_assert_msg(strstr(err, "node_unit") || strstr(err, "unit"), "%s", err);
	free(out);
	free(err);
	rv_test_master_cleanup(&m);
	free(spec);
}
END_TEST

/* Every "$ref" under node names a schema of root's components. */
static int refs_resolve(const cJSON *root, const cJSON *node, char *bad, size_t size)
{
	int n = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, node)
	{
		if (it->string && !strcmp(it->string, "$ref") && cJSON_IsString(it)) {
			const char *pre = "#/components/schemas/";
			char path[160];
			snprintf(path, sizeof(path), "components.schemas.%s",
				 it->valuestring + strlen(pre));
			if (strncmp(it->valuestring, pre, strlen(pre)) ||
			    !rv_test_json_at(root, path)) {
				snprintf(bad, size, "%s", it->valuestring);
				return -1;
			}
			n++;
		} else if (cJSON_IsObject(it) || cJSON_IsArray(it)) {
			int k = refs_resolve(root, it, bad, size);
			if (k < 0)
				return k;
			n += k;
		}
	}
	return n;
}

START_TEST(test_sigterm_stops_cleanly)
{
	char *spec = rv_test_master_spec(100, 10, 1, 1, 1);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	ck_assert_int_eq(rv_test_master_start(&m, NULL), 0);
	struct rv_test_reply r;
	struct rv_test_brain b = { .port = m.port };
	snprintf(b.url, sizeof(b.url), "%s", m.url);
	ck_assert_int_eq(rv_test_http(&b, "GET", "/healthz", NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	rv_test_reply_release(&r);
	ck_assert_int_eq(rv_test_http(&b, "GET", "/v1/openapi.json", NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(rv_test_json_at(r.json, "paths./v1/shards/next.post"));
	ck_assert_ptr_nonnull(
		rv_test_json_at(r.json, "components.schemas.ShardTask.properties.status.enum"));
	ck_assert_ptr_nonnull(rv_test_json_at(r.json, "paths./v1/rdzv/join.post.responses.410"));
	ck_assert_ptr_nonnull(rv_test_json_at(r.json, "paths./v1/rdzv/world.get.parameters.2"));
	ck_assert_ptr_nonnull(
		rv_test_json_at(r.json,
				"paths./v1/streams/{dataset}/partitions.post.parameters.0"));
	ck_assert_ptr_nonnull(
		rv_test_json_at(r.json, "paths./v1/netcheck/report.post.responses.409"));
	ck_assert_ptr_nonnull(
		rv_test_json_at(r.json,
				"components.schemas.NetcheckResult.properties.verdict.enum"));
	ck_assert_ptr_nonnull(rv_test_json_at(r.json, "components.schemas.StreamStatus"));
	/* every schema a route names is in components */
	static const char *const named[] = { "RdzvJoin",      "RdzvWorld",      "RdzvMember",
					     "ShardNext",     "ShardTask",      "ShardDone",
					     "CkptReport",    "DataCheckpoint", "StepReport",
					     "JobStatus",     "DatasetStatus",  "Heartbeat",
					     "FailureReport", "Accepted",       "Health",
					     "Error" };
	for (size_t i = 0; i < RV_ARRAY_SIZE(named); i++) {
		char path[128];
		snprintf(path, sizeof(path), "components.schemas.%s", named[i]);
		ck_assert_msg(rv_test_json_at(r.json, path), "no schema %s", named[i]);
	}
	char bad[256] = "";
	int nrefs = refs_resolve(r.json, r.json, bad, sizeof(bad));
	ck_assert_msg(nrefs > 20, "a $ref to nothing: %s (%d refs)", bad, nrefs);
	rv_test_reply_release(&r);
	ck_assert_int_eq(rv_test_http(&b, "GET", "/metrics", NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "rover_master_shards_handed_total"));
	rv_test_reply_release(&r);
	int st = rv_test_master_stop(&m, SIGTERM, 10000);
	ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	rv_test_master_cleanup(&m);
	free(spec);
}
END_TEST

/* A DLRover ElasticJob without spec.datasets, which roverctl and the brain
 * take: the master runs it too (it shards nothing) and the job ends when its
 * node does. */
START_TEST(test_spec_without_datasets_runs)
{
	static const char spec[] =
		"{\"apiVersion\":\"elastic.iml.github.io/v1alpha1\",\"kind\":\"ElasticJob\","
		"\"metadata\":{\"name\":\"nodata\"},\"spec\":{\"distributionStrategy\":"
		"\"AllreduceStrategy\",\"optimizeMode\":\"manual\",\"replicaSpecs\":{\"worker\":"
		"{\"replicas\":1,\"command\":[\"/bin/sh\",\"-c\",\"sleep 1\"]}}}}";
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	const char *a[] = {
		"--scheduler", "local", "--node-limits", "none", "--linger-s", "1", NULL
	};
	ck_assert_int_eq(rv_test_master_start(&m, a), 0);
	struct rv_test_brain b = { .port = m.port };
	snprintf(b.url, sizeof(b.url), "%s", m.url);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&b, "GET", "/v1/job", NULL, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	rv_test_reply_release(&r);
	int st = -1;
	int rc = rv_proc_wait(&m.proc, 30000, &st);
	ck_assert_msg(rc == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "the job of one node that exits 0 did not end with exit 0: rc %d status %d",
		      rc, st);
	rv_proc_release(&m.proc);
	m.pid = 0;
	rv_test_master_cleanup(&m);
}
END_TEST

RV_TEST_MAIN_TCASE("master_cli", "cli", 60, test_help_lists_every_key, test_print_conf_matches_file,
		   test_bad_spec_names_field, test_bad_command_line, test_sigterm_stops_cleanly,
		   test_spec_without_datasets_runs)
