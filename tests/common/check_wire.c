/*
 * check_wire.c: the wire messages of common/wire.c: the DESIGN.md documents
 * parse to the right values, every message round-trips through JSON text, and
 * each kind of bad input is rejected naming the right field with the output
 * released; the field tables match the code key by key, both ways.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cleanup.h"
#include "json.h"
#include "brainfix.h"
#include "testutil.h"
#include "wire.h"
#include "wirefix.h"

/* The DESIGN.md "Job spec (ElasticJob)" example, verbatim. */
static const char design_job[] =
	"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\",\n"
	" \"metadata\":{\"name\":\"mnist-ddp\",\"namespace\":\"default\",\"labels\":{\"user\":\"ana\"}},\n"
	" \"spec\":{\"distributionStrategy\":\"AllreduceStrategy\",\"optimizeMode\":\"cluster\",\n"
	"         \"brainService\":\"http://127.0.0.1:8080\",\n"
	"         \"replicaSpecs\":{\"worker\":{\"replicas\":2,\"minReplicas\":1,\"maxReplicas\":4,\n"
	"            \"restartCount\":3,\"priority\":\"high\",\n"
	"            \"resources\":{\"cpu\":4,\"memory\":\"8Gi\",\"gpu\":0},\n"
	"            \"command\":[\"python3\",\"examples/pytorch/mnist_ddp.py\"]}},\n"
	"         \"datasets\":[{\"name\":\"train\",\"size\":60000,\"shardSize\":600,\"epochs\":2,\"shuffle\":true}],\n"
	"         \"model\":{\"parameters\":1200000,\"batchSize\":64}}}\n";

/* The DESIGN.md "ScalePlan" example, verbatim. */
static const char design_plan[] =
	"{\"job\":\"uid\",\"id\":42,\"stage\":\"running\",\"algorithm\":\"worker_count_model\",\n"
	" \"reason\":\"throughput model predicts +18% samples/s with 6 workers\",\n"
	" \"groups\":{\"worker\":{\"count\":6,\"resource\":{\"cpu\":4,\"memory_mb\":8192,\"gpu\":0}},\n"
	"           \"ps\":{\"count\":2,\"resource\":{\"cpu\":8,\"memory_mb\":16384}}},\n"
	" \"launch\":[], \"remove\":[], \"migrate\":[{\"node\":\"ps-1\",\"resource\":{\"cpu\":12}}]}\n";

/* Print, then parse the text back: what a peer would receive. */
static cJSON *through_text(cJSON *tree)
{
	ck_assert_ptr_nonnull(tree);
	char *s = rv_json_print(tree);
	ck_assert_ptr_nonnull(s);
	cJSON *back = rv_test_json_must_parse(s);
	free(s);
	cJSON_Delete(tree);
	return back;
}

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);
	ck_assert_ptr_nonnull(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* ---- enums ---- */

START_TEST(test_enum_names)
{
	for (int i = 0; i <= RV_STRATEGY_PS; i++)
		ck_assert_int_eq(rv_strategy_parse(rv_strategy_name((enum rv_strategy)i)), i);
	for (int i = 0; i <= RV_OPT_CLUSTER; i++)
		ck_assert_int_eq(rv_optimize_mode_parse(rv_optimize_mode_name((enum rv_optimize_mode)i)),
				 i);
	for (int i = 0; i < RV_ROLE_COUNT; i++)
		ck_assert_int_eq(rv_role_parse(rv_role_name((enum rv_role)i)), i);
	for (int i = 0; i <= RV_EVENT_PLAN_APPLIED; i++)
		ck_assert_int_eq(rv_event_type_parse(rv_event_type_name((enum rv_event_type)i)), i);

	ck_assert_str_eq(rv_strategy_name(RV_STRATEGY_PS), "ParameterServerStrategy");
	ck_assert_str_eq(rv_optimize_mode_name(RV_OPT_SINGLE_JOB), "single-job");
	ck_assert_str_eq(rv_role_name(RV_ROLE_EVALUATOR), "evaluator");
	ck_assert_str_eq(rv_event_type_name(RV_EVENT_NODE_OOM), "node_oom");
	ck_assert_str_eq(rv_role_name(RV_ROLE_COUNT), "unknown");

	ck_assert_int_eq(rv_role_parse("Worker"), -EINVAL);
	ck_assert_int_eq(rv_role_parse(""), -EINVAL);
	ck_assert_int_eq(rv_role_parse(NULL), -EINVAL);
	ck_assert_int_eq(rv_strategy_parse("allreduce"), -EINVAL);
	ck_assert_int_eq(rv_optimize_mode_parse("single_job"), -EINVAL);
	ck_assert_int_eq(rv_event_type_parse("node_exploded"), -EINVAL);
}
END_TEST

/* ---- job spec ---- */

/* Text to spec as a daemon reads a body: what the JSON reader refuses
 * (duplicate keys, ...) fails here too, with out left empty. */
static int spec_parse(const char *doc, struct rv_job_spec *out, struct rv_err *err)
{
	memset(out, 0, sizeof(*out));
	cJSON *root = rv_json_parse(doc, strlen(doc), err);
	if (!root)
		return err->code;
	int rc = rv_job_spec_from_json(root, out, err);
	cJSON_Delete(root);
	return rc;
}

static void assert_spec_eq(const struct rv_job_spec *a, const struct rv_job_spec *b)
{
	struct rv_job_spec x = *a, y = *b;
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		ck_assert_int_eq(a->replicas[r].ncommand, b->replicas[r].ncommand);
		for (int i = 0; i < a->replicas[r].ncommand; i++)
			ck_assert_str_eq(a->replicas[r].command[i], b->replicas[r].command[i]);
		x.replicas[r].command = y.replicas[r].command = NULL;
		ck_assert(!a->replicas[r].template_json == !b->replicas[r].template_json);
		if (a->replicas[r].template_json)
			ck_assert_str_eq(a->replicas[r].template_json,
					 b->replicas[r].template_json);
		x.replicas[r].template_json = y.replicas[r].template_json = NULL;
	}
	ck_assert_str_eq(a->name, b->name);
	ck_assert_int_eq(a->nlabels, b->nlabels);
	ck_assert(a->replicas[RV_ROLE_WORKER].resource.cpu ==
		  b->replicas[RV_ROLE_WORKER].resource.cpu);
	ck_assert_msg(memcmp(&x, &y, sizeof(x)) == 0, "job specs differ");
}

START_TEST(test_spec_design_example)
{
	struct rv_job_spec s;
	struct rv_err err = { 0 };
	ck_assert_int_eq(spec_parse(design_job, &s, &err), 0);
	ck_assert_str_eq(s.name, "mnist-ddp");
	ck_assert_str_eq(s.namespace_, "default");
	ck_assert_int_eq(s.nlabels, 1);
	ck_assert_str_eq(s.labels[0].key, "user");
	ck_assert_str_eq(s.labels[0].value, "ana");
	ck_assert_str_eq(s.user, "ana");
	ck_assert_int_eq(s.strategy, RV_STRATEGY_ALLREDUCE);
	ck_assert_int_eq(s.optimize_mode, RV_OPT_CLUSTER);
	ck_assert_str_eq(s.brain_service, "http://127.0.0.1:8080");

	const struct rv_replica_spec *w = &s.replicas[RV_ROLE_WORKER];
	ck_assert(w->present);
	ck_assert_int_eq(w->replicas, 2);
	ck_assert_int_eq(w->min_replicas, 1);
	ck_assert_int_eq(w->max_replicas, 4);
	ck_assert_int_eq(w->restart_count, 3);
	ck_assert_str_eq(w->priority, "high");
	ck_assert(w->has_resources);
	ck_assert(w->resource.cpu == 4.0);
	ck_assert_int_eq(w->resource.memory_mb, 8192);
	ck_assert_int_eq(w->resource.gpu, 0);
	ck_assert_int_eq(w->ncommand, 2);
	ck_assert_str_eq(w->command[0], "python3");
	ck_assert_str_eq(w->command[1], "examples/pytorch/mnist_ddp.py");
	ck_assert_ptr_null(w->command[2]);  /* ready for execvp */
	ck_assert(!s.replicas[RV_ROLE_PS].present);
	ck_assert(!s.replicas[RV_ROLE_CHIEF].present);

	ck_assert_int_eq(s.ndatasets, 1);
	ck_assert_str_eq(s.datasets[0].name, "train");
	ck_assert_int_eq(s.datasets[0].size, 60000);
	ck_assert_int_eq(s.datasets[0].shard_size, 600);
	ck_assert_int_eq(s.datasets[0].epochs, 2);
	ck_assert(s.datasets[0].shuffle);
	ck_assert_int_eq(s.model_parameters, 1200000);
	ck_assert_int_eq(s.batch_size, 64);
	rv_job_spec_release(&s);
	ck_assert_ptr_null(s.replicas[RV_ROLE_WORKER].command);
	rv_job_spec_release(&s);  /* twice is harmless */
}
END_TEST

START_TEST(test_spec_defaults)
{
	struct rv_job_spec s;
	struct rv_err err = { 0 };
	const char *doc = "{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"a\"},"
			  "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
			  "\"replicaSpecs\":{\"worker\":{}}}}";
	ck_assert_int_eq(spec_parse(doc, &s, &err), 0);
	ck_assert_str_eq(s.name, "a");
	ck_assert_str_eq(s.namespace_, "default");
	ck_assert_int_eq(s.nlabels, 0);
	ck_assert_str_eq(s.user, "");
	ck_assert_int_eq(s.optimize_mode, RV_OPT_CLUSTER);
	ck_assert_str_eq(s.brain_service, "");
	const struct rv_replica_spec *w = &s.replicas[RV_ROLE_WORKER];
	ck_assert_int_eq(w->replicas, 1);
	ck_assert_int_eq(w->min_replicas, 1);
	ck_assert_int_eq(w->max_replicas, 1);
	ck_assert(!w->has_resources);
	ck_assert_int_eq(w->ncommand, 0);
	ck_assert_str_eq(w->priority, "");
	ck_assert_int_eq(s.ndatasets, 0);
	ck_assert_int_eq(s.model_parameters, 0);
	rv_job_spec_release(&s);

	/* minReplicas and maxReplicas default to replicas; epochs to 1 */
	doc = "{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"b\",\"namespace\":\"team-1\"},"
	      "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\",\"optimizeMode\":\"manual\","
	      "\"replicaSpecs\":{\"worker\":{\"replicas\":5,\"maxReplicas\":8}},"
	      "\"datasets\":[{\"name\":\"d\",\"size\":0,\"shardSize\":1}]}}";
	ck_assert_int_eq(spec_parse(doc, &s, &err), 0);
	ck_assert_str_eq(s.namespace_, "team-1");
	ck_assert_int_eq(s.optimize_mode, RV_OPT_MANUAL);
	ck_assert_int_eq(s.replicas[RV_ROLE_WORKER].min_replicas, 5);
	ck_assert_int_eq(s.replicas[RV_ROLE_WORKER].max_replicas, 8);
	ck_assert_int_eq(s.datasets[0].epochs, 1);
	ck_assert(!s.datasets[0].shuffle);
	rv_job_spec_release(&s);
}
END_TEST

START_TEST(test_spec_resource_forms)
{
	static const struct {
		const char *cpu, *memory;
		double want_cpu;
		int64_t want_mb;
	} cases[] = {
		{ "\"500m\"", "\"512Mi\"", 0.5, 512 },
		{ "\"4\"", "\"1G\"", 4.0, 954 },
		{ "\"1.5\"", "1073741824", 1.5, 1024 },
		{ "0.25", "\"1Ti\"", 0.25, 1024 * 1024 },
		{ "1024", "1", 1024.0, 1 },  /* one byte rounds up to 1 MiB */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char doc[512];
		snprintf(doc, sizeof(doc),
			 "{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"r\"},\"spec\":{"
			 "\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{"
			 "\"worker\":{\"resources\":{\"cpu\":%s,\"memory\":%s}}}}}",
			 cases[i].cpu, cases[i].memory);
		struct rv_job_spec s;
		struct rv_err err = { 0 };
		ck_assert_msg(spec_parse(doc, &s, &err) == 0, "case %zu: %s", i, err.msg);
		const struct rv_resource *r = &s.replicas[RV_ROLE_WORKER].resource;
		ck_assert_msg(fabs(r->cpu - cases[i].want_cpu) < 1e-12, "case %zu cpu %g", i,
			      r->cpu);
		ck_assert_int_eq(r->memory_mb, cases[i].want_mb);
		ck_assert_int_eq(r->gpu, 0);
		rv_job_spec_release(&s);
	}
}
END_TEST

static void spec_round_trip(const char *doc)
{
	struct rv_job_spec a, b;
	struct rv_err err = { 0 };
	ck_assert_msg(spec_parse(doc, &a, &err) == 0, "%s: %s", err.field, err.msg);
	cJSON *back = through_text(rv_job_spec_to_json(&a));
	ck_assert_msg(rv_job_spec_from_json(back, &b, &err) == 0, "%s: %s", err.field, err.msg);
	cJSON_Delete(back);
	assert_spec_eq(&a, &b);
	rv_job_spec_release(&a);
	rv_job_spec_release(&b);
}

/* A replica sized in its pod template's containers, as Kubernetes users
 * write it: requests, else limits, summed over the containers; the
 * template kept whole and written back. */
START_TEST(test_spec_template_resources)
{
	static const struct {
		const char *containers;
		double want_cpu;
		int64_t want_mb;
	} cases[] = {
		{ "[{\"name\":\"main\",\"resources\":{\"requests\":{\"cpu\":\"2\","
		  "\"memory\":\"3Gi\"},\"limits\":{\"cpu\":\"4\",\"memory\":\"6Gi\"}}}]",
		  2.0, 3072 },
		{ "[{\"name\":\"main\",\"resources\":{\"limits\":{\"cpu\":\"500m\","
		  "\"memory\":\"1024Mi\"}}}]",
		  0.5, 1024 },
		{ "[{\"name\":\"main\",\"resources\":{\"requests\":{\"cpu\":1.5,"
		  "\"memory\":\"3G\"}}},{\"name\":\"side\",\"resources\":{\"requests\":{"
		  "\"cpu\":\"250m\"},\"limits\":{\"memory\":\"512Mi\"}}},{\"name\":\"x\"}]",
		  1.75, 2862 + 512 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char doc[1024];
		snprintf(doc, sizeof(doc),
			 "{\"apiVersion\":\"elastic.iml.github.io/v1alpha1\",\"kind\":"
			 "\"ElasticJob\",\"metadata\":{\"name\":\"t\"},\"spec\":{"
			 "\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{"
			 "\"worker\":{\"replicas\":5,\"template\":{\"metadata\":{\"labels\":"
			 "{\"a\":\"b\"}},\"spec\":{\"containers\":%s}}}}}}",
			 cases[i].containers);
		struct rv_job_spec s;
		struct rv_err err = { 0 };
		ck_assert_msg(spec_parse(doc, &s, &err) == 0, "case %zu: %s", i, err.msg);
		const struct rv_replica_spec *w = &s.replicas[RV_ROLE_WORKER];
		ck_assert_msg(w->has_resources, "case %zu", i);
		ck_assert_msg(fabs(w->resource.cpu - cases[i].want_cpu) < 1e-12, "case %zu cpu %g",
			      i, w->resource.cpu);
		ck_assert_int_eq(w->resource.memory_mb, cases[i].want_mb);
		ck_assert_ptr_nonnull(w->template_json);
		ck_assert_ptr_nonnull(strstr(w->template_json, "\"labels\":{\"a\":\"b\"}"));
		rv_job_spec_release(&s);
		spec_round_trip(doc);
	}
	/* the replica's own resources win over its template's */
	struct rv_job_spec s;
	struct rv_err err = { 0 };
	ck_assert_int_eq(
		spec_parse("{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"t\"},\"spec\":{"
			   "\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{"
			   "\"worker\":{\"resources\":{\"cpu\":1,\"memory\":\"1Gi\"},"
			   "\"template\":{\"spec\":{\"containers\":[{\"resources\":{\"requests\":{"
			   "\"cpu\":8,\"memory\":\"8Gi\"}}}]}}}}}}",
			   &s, &err),
		0);
	ck_assert_int_eq(s.replicas[RV_ROLE_WORKER].resource.memory_mb, 1024);
	rv_job_spec_release(&s);
	/* no resources in the template: the brain decides */
	ck_assert_int_eq(
		spec_parse("{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"t\"},\"spec\":{"
			   "\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{"
			   "\"worker\":{\"template\":{\"spec\":{\"containers\":[{\"name\":"
			   "\"m\"}]}}}}}}",
			   &s, &err),
		0);
	ck_assert(!s.replicas[RV_ROLE_WORKER].has_resources);
	rv_job_spec_release(&s);
}
END_TEST

/* A bad quantity in a template names its field; half a size is refused. */
START_TEST(test_spec_template_bad)
{
	static const struct {
		const char *containers, *field;
	} cases[] = {
		{ "[{\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"3Qi\"}}}]",
		  "spec.replicaSpecs.worker.template.spec.containers[0].resources.requests."
		  "memory" },
		{ "[{},{\"resources\":{\"limits\":{\"cpu\":\"-1\",\"memory\":\"3Gi\"}}}]",
		  "spec.replicaSpecs.worker.template.spec.containers[1].resources.limits.cpu" },
		{ "[{\"resources\":{\"requests\":{\"cpu\":\"2\"}}}]",
		  "spec.replicaSpecs.worker.template.spec.containers" },
		{ "[7]", "spec.replicaSpecs.worker.template.spec.containers[0]" },
		{ "{}", "spec.replicaSpecs.worker.template.spec.containers" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char doc[1024];
		snprintf(doc, sizeof(doc),
			 "{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"t\"},\"spec\":{"
			 "\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{"
			 "\"worker\":{\"template\":{\"spec\":{\"containers\":%s}}}}}}",
			 cases[i].containers);
		struct rv_job_spec s;
		struct rv_err err = { 0 };
		ck_assert_msg(spec_parse(doc, &s, &err) == -EINVAL, "case %zu parsed", i);
		ck_assert_msg(!strcmp(err.field, cases[i].field), "case %zu: field %s (%s)", i,
			      err.field, err.msg);
	}
	/* DLRover's apiVersion, and only it besides Rover's */
	struct rv_job_spec s;
	struct rv_err err = { 0 };
	ck_assert_int_eq(spec_parse("{\"apiVersion\":\"elastic.iml.github.io/v2\",\"kind\":"
				    "\"ElasticJob\",\"metadata\":{\"name\":\"t\"},\"spec\":{"
				    "\"distributionStrategy\":\"AllreduceStrategy\","
				    "\"replicaSpecs\":{\"worker\":{}}}}",
				    &s, &err),
			 -EINVAL);
	ck_assert_str_eq(err.field, "apiVersion");
}
END_TEST

START_TEST(test_spec_round_trip)
{
	spec_round_trip(design_job);
	/* a PS job with every role, odd resources and several datasets */
	spec_round_trip(
		"{\"apiVersion\":\"elastic.rover.dev/v1\",\"kind\":\"ElasticJob\","
		"\"metadata\":{\"name\":\"ps-job-7\",\"namespace\":\"ml\",\"labels\":{"
		"\"user\":\"bob\",\"team\":\"search\",\"app.kubernetes.io/name\":\"x\"}},"
		"\"spec\":{\"distributionStrategy\":\"ParameterServerStrategy\","
		"\"optimizeMode\":\"single-job\",\"replicaSpecs\":{"
		"\"worker\":{\"replicas\":0,\"minReplicas\":0,\"maxReplicas\":10000,"
		"\"restartCount\":0,\"priority\":\"low\"},"
		"\"ps\":{\"replicas\":3,\"stateHandover\":\"flashCheckpoint\","
		"\"resources\":{\"cpu\":\"1500m\",\"memory\":\"1536Mi\","
		"\"gpu\":64},\"command\":[\"\",\"--flag=\\\"quoted\\\" \\u00e9\"]},"
		"\"chief\":{\"resources\":{\"cpu\":0.1,\"memory\":1000000}},"
		"\"evaluator\":{\"replicas\":1}},"
		"\"datasets\":[{\"name\":\"a\",\"size\":9007199254740991,\"shardSize\":1},"
		"{\"name\":\"b.v2_x\",\"size\":5,\"shardSize\":2,\"epochs\":1000000,\"shuffle\":"
		"false}],"
		"\"model\":{\"parameters\":0,\"batchSize\":1073741824}}}");
	/* the minimal document */
	spec_round_trip("{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"a\"},\"spec\":{"
			"\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{"
			"\"worker\":{}}}}");
}
END_TEST

START_TEST(test_spec_to_json_shape)
{
	struct rv_job_spec s;
	struct rv_err err = { 0 };
	ck_assert_int_eq(spec_parse(design_job, &s, &err), 0);
	cJSON *j = rv_job_spec_to_json(&s);
	ck_assert_ptr_nonnull(j);
	char *txt = rv_json_print(j);
	/* memory goes out in the document's own units */
	ck_assert_msg(strstr(txt, "\"memory\":\"8Gi\"") != NULL, "%s", txt);
	ck_assert_msg(strstr(txt, "\"apiVersion\":\"elastic.rover.dev/v1alpha1\"") != NULL, "%s",
		      txt);
	ck_assert_msg(strstr(txt, "\"ps\"") == NULL, "absent roles are not emitted: %s", txt);
	free(txt);
	cJSON_Delete(j);

	/* user set without a label is kept as labels.user */
	s.nlabels = 0;
	cJSON *back = through_text(rv_job_spec_to_json(&s));
	rv_job_spec_release(&s);
	ck_assert_int_eq(rv_job_spec_from_json(back, &s, &err), 0);
	ck_assert_str_eq(s.user, "ana");
	cJSON_Delete(back);
	rv_job_spec_release(&s);
}
END_TEST

/* Document pieces for the bad-input table. */
#define META "\"metadata\":{\"name\":\"j\"}"
#define DOC(meta, spec) "{\"kind\":\"ElasticJob\"," meta ",\"spec\":{" spec "}}"
#define AR "\"distributionStrategy\":\"AllreduceStrategy\","
#define WORKER(w) DOC(META, AR "\"replicaSpecs\":{\"worker\":{" w "}}")
#define RES(r) WORKER("\"resources\":{" r "}")
#define CPU(c) RES("\"cpu\":" c ",\"memory\":\"1Gi\"")
#define MEM(m) RES("\"cpu\":1,\"memory\":" m)
#define DS(d) DOC(META, AR "\"replicaSpecs\":{\"worker\":{}},\"datasets\":[" d "]")
#define DS_OK "{\"name\":\"d\",\"size\":1,\"shardSize\":1}"

static const struct bad_case {
	const char *doc, *field, *msg;
} bad_specs[] = {
	{ "[]", "", "object" },
	{ "{\"kind\":\"ElasticJob\",\"spec\":{}}", "metadata", "required" },
	{ "{\"kind\":\"ElasticJob\"," META "}", "spec", "required" },
	{ "{" META ",\"spec\":{}}", "kind", "required" },
	{ "{\"kind\":\"Job\"," META ",\"spec\":{}}", "kind", "ElasticJob" },
	{ "{\"kind\":1," META ",\"spec\":{}}", "kind", "must be a string" },
	{ "{\"apiVersion\":\"v1\",\"kind\":\"ElasticJob\"," META ",\"spec\":{}}", "apiVersion",
	  "elastic.rover.dev/" },
	{ "{\"apiVersion\":\"elastic.rover.dev/\",\"kind\":\"ElasticJob\"," META ",\"spec\":{}}",
	  "apiVersion", "elastic.rover.dev/" },
	{ "{\"apiVersion\":7,\"kind\":\"ElasticJob\"," META ",\"spec\":{}}", "apiVersion",
	  "must be a string" },
	{ DOC("\"metadata\":{}", ""), "metadata.name", "required" },
	{ DOC("\"metadata\":[]", ""), "metadata", "must be an object" },
	{ DOC("\"metadata\":{\"name\":\"\"}", ""), "metadata.name", "1 to 63" },
	{ DOC("\"metadata\":{\"name\":\"Bad_Name\"}", ""), "metadata.name", "lowercase" },
	{ DOC("\"metadata\":{\"name\":\"-a\"}", ""), "metadata.name", "start and end" },
	{ DOC("\"metadata\":{\"name\":\"a-\"}", ""), "metadata.name", "start and end" },
	{ DOC("\"metadata\":{\"name\":\"a b\"}", ""), "metadata.name", "lowercase" },
	{ DOC("\"metadata\":{\"name\":\"a'; DROP TABLE jobs;--\"}", ""), "metadata.name",
	  "lowercase" },
	{ DOC("\"metadata\":{\"name\":"
	      "\"a123456789012345678901234567890123456789012345678901234567890123\"}",
	      ""),
	  "metadata.name", "1 to 63" },
	{ DOC("\"metadata\":{\"name\":42}", ""), "metadata.name", "must be a string" },
	{ DOC("\"metadata\":{\"name\":\"j\",\"namespace\":\"Prod\"}", ""), "metadata.namespace",
	  "lowercase" },
	{ DOC("\"metadata\":{\"name\":\"j\",\"labels\":[]}", ""), "metadata.labels",
	  "must be an object" },
	{ DOC("\"metadata\":{\"name\":\"j\",\"labels\":{\"team\":5}}", ""), "metadata.labels.team",
	  "must be a string" },
	{ DOC("\"metadata\":{\"name\":\"j\",\"labels\":{\"bad key\":\"v\"}}", ""),
	  "metadata.labels", "keys" },
	{ DOC("\"metadata\":{\"name\":\"j\",\"labels\":{\"\":\"v\"}}", ""), "metadata.labels",
	  "keys" },
	{ DOC("\"metadata\":{\"name\":\"j\",\"labels\":{\"a\":\"1\",\"a\":\"2\"}}", ""),
	  "metadata.labels.a", "duplicate key \"a\"" },
	{ DOC(META, ""), "spec.distributionStrategy", "required" },
	{ DOC(META, "\"distributionStrategy\":\"Horovod\""), "spec.distributionStrategy",
	  "AllreduceStrategy or ParameterServerStrategy" },
	{ DOC(META, "\"distributionStrategy\":1"), "spec.distributionStrategy",
	  "must be a string" },
	{ DOC(META, AR "\"optimizeMode\":\"fast\""), "spec.optimizeMode", "cluster" },
	{ DOC(META, AR "\"brainService\":\"ftp://x\""), "spec.brainService", "url" },
	{ DOC(META, AR "\"brainService\":\"http://a b\""), "spec.brainService", "url" },
	{ DOC(META, AR "\"brainService\":8080"), "spec.brainService", "must be a string" },
	{ DOC(META, "\"distributionStrategy\":\"AllreduceStrategy\""), "spec.replicaSpecs",
	  "required" },
	{ DOC(META, AR "\"replicaSpecs\":[]"), "spec.replicaSpecs", "must be an object" },
	{ DOC(META, AR "\"replicaSpecs\":{}"), "spec.replicaSpecs.worker", "required" },
	{ DOC(META, AR "\"replicaSpecs\":{\"chief\":{}}"), "spec.replicaSpecs.worker", "required" },
	{ DOC(META, AR "\"replicaSpecs\":{\"worker\":{},\"master\":{}}"),
	  "spec.replicaSpecs.master", "unknown replica type \"master\"" },
	{ DOC(META, AR "\"replicaSpecs\":{\"worker\":3}"), "spec.replicaSpecs.worker",
	  "must be an object" },
	{ DOC(META, "\"distributionStrategy\":\"ParameterServerStrategy\","
		    "\"replicaSpecs\":{\"worker\":{}}"),
	  "spec.replicaSpecs.ps", "required for ParameterServerStrategy" },
	{ DOC(META, AR "\"replicaSpecs\":{\"worker\":{},\"ps\":{}}"), "spec.replicaSpecs.ps",
	  "only allowed" },
	{ WORKER("\"replicas\":\"2\""), "spec.replicaSpecs.worker.replicas", "must be an integer" },
	{ WORKER("\"replicas\":1.5"), "spec.replicaSpecs.worker.replicas", "must be an integer" },
	{ WORKER("\"replicas\":-1"), "spec.replicaSpecs.worker.replicas",
	  "must be between 0 and 10000" },
	{ WORKER("\"replicas\":10001"), "spec.replicaSpecs.worker.replicas",
	  "must be between 0 and 10000" },
	{ WORKER("\"replicas\":1e400"), "spec.replicaSpecs.worker.replicas", "must be an integer" },
	{ WORKER("\"replicas\":2,\"minReplicas\":3,\"maxReplicas\":4"),
	  "spec.replicaSpecs.worker.minReplicas", "must not exceed replicas" },
	{ WORKER("\"minReplicas\":2"), "spec.replicaSpecs.worker.minReplicas",
	  "must not exceed replicas" },
	{ WORKER("\"replicas\":3,\"maxReplicas\":2"), "spec.replicaSpecs.worker.maxReplicas",
	  "must be at least replicas" },
	{ WORKER("\"restartCount\":-1"), "spec.replicaSpecs.worker.restartCount", "between" },
	{ WORKER("\"priority\":\"urgent\""), "spec.replicaSpecs.worker.priority", "high" },
	{ WORKER("\"stateHandover\":\"disk\""), "spec.replicaSpecs.worker.stateHandover",
	  "\"none\" or \"flashCheckpoint\"" },
	{ WORKER("\"priority\":\"a-very-long-priority\""), "spec.replicaSpecs.worker.priority",
	  "at most 15" },
	{ WORKER("\"resources\":\"big\""), "spec.replicaSpecs.worker.resources",
	  "must be an object" },
	{ RES("\"memory\":\"1Gi\""), "spec.replicaSpecs.worker.resources.cpu", "required" },
	{ RES("\"cpu\":1"), "spec.replicaSpecs.worker.resources.memory", "required" },
	{ CPU("-1"), "spec.replicaSpecs.worker.resources.cpu", "greater than 0 and at most 1024" },
	{ CPU("0"), "spec.replicaSpecs.worker.resources.cpu", "greater than 0" },
	{ CPU("1025"), "spec.replicaSpecs.worker.resources.cpu", "at most 1024" },
	{ CPU("1e308"), "spec.replicaSpecs.worker.resources.cpu", "at most 1024" },
	{ CPU("1e999"), "spec.replicaSpecs.worker.resources.cpu", "finite" },
	{ CPU("\"-500m\""), "spec.replicaSpecs.worker.resources.cpu", "500m" },
	{ CPU("\"0m\""), "spec.replicaSpecs.worker.resources.cpu", "greater than 0" },
	{ CPU("\"2000000m\""), "spec.replicaSpecs.worker.resources.cpu", "at most 1024" },
	{ CPU("\"abc\""), "spec.replicaSpecs.worker.resources.cpu", "500m" },
	{ CPU("\"\""), "spec.replicaSpecs.worker.resources.cpu", "500m" },
	{ CPU("\"m\""), "spec.replicaSpecs.worker.resources.cpu", "500m" },
	{ CPU("\"0x10\""), "spec.replicaSpecs.worker.resources.cpu", "500m" },
	{ CPU("\"nan\""), "spec.replicaSpecs.worker.resources.cpu", "500m" },
	{ CPU("true"), "spec.replicaSpecs.worker.resources.cpu", "number or a string" },
	{ MEM("\"-1Gi\""), "spec.replicaSpecs.worker.resources.memory", "quantity" },
	{ MEM("\"8 Gi\""), "spec.replicaSpecs.worker.resources.memory", "quantity" },
	{ MEM("\"lots\""), "spec.replicaSpecs.worker.resources.memory", "quantity" },
	{ MEM("\" 8Gi\""), "spec.replicaSpecs.worker.resources.memory", "quantity" },
	{ MEM("\"0x10Gi\""), "spec.replicaSpecs.worker.resources.memory", "quantity" },
	{ MEM("\"nanGi\""), "spec.replicaSpecs.worker.resources.memory", "quantity" },
	{ MEM("\"\""), "spec.replicaSpecs.worker.resources.memory", "quantity" },
	{ MEM("\"8GB\""), "spec.replicaSpecs.worker.resources.memory", "quantity" },
	{ MEM("\"0\""), "spec.replicaSpecs.worker.resources.memory", "greater than 0" },
	{ MEM("\"0Gi\""), "spec.replicaSpecs.worker.resources.memory", "greater than 0" },
	{ MEM("\"5Ti\""), "spec.replicaSpecs.worker.resources.memory", "at most 4194304 MiB" },
	{ MEM("\"1e30Gi\""), "spec.replicaSpecs.worker.resources.memory", "at most" },
	{ MEM("-5"), "spec.replicaSpecs.worker.resources.memory", "non-negative" },
	{ MEM("0"), "spec.replicaSpecs.worker.resources.memory", "greater than 0" },
	{ MEM("1e300"), "spec.replicaSpecs.worker.resources.memory", "at most" },
	{ MEM("true"), "spec.replicaSpecs.worker.resources.memory", "string or a number" },
	{ RES("\"cpu\":1,\"memory\":\"1Gi\",\"gpu\":65"), "spec.replicaSpecs.worker.resources.gpu",
	  "between 0 and 64" },
	{ RES("\"cpu\":1,\"memory\":\"1Gi\",\"gpu\":0.5"), "spec.replicaSpecs.worker.resources.gpu",
	  "integer" },
	{ WORKER("\"command\":\"python3 x.py\""), "spec.replicaSpecs.worker.command",
	  "must be an array" },
	{ WORKER("\"command\":[\"python3\",7]"), "spec.replicaSpecs.worker.command[1]",
	  "must be a string" },
	{ WORKER("\"command\":[\"a\",null]"), "spec.replicaSpecs.worker.command[1]",
	  "must be a string" },
	{ DOC(META, AR "\"replicaSpecs\":{\"worker\":{}},\"datasets\":{}"), "spec.datasets",
	  "must be an array" },
	{ DS("7"), "spec.datasets[0]", "must be an object" },
	{ DS(DS_OK ",{\"size\":1,\"shardSize\":1}"), "spec.datasets[1].name", "required" },
	{ DS("{\"name\":\"a b\",\"size\":1,\"shardSize\":1}"), "spec.datasets[0].name", "letters" },
	{ DS(DS_OK "," DS_OK), "spec.datasets[1].name", "twice" },
	{ DS("{\"name\":\"d\",\"size\":-1,\"shardSize\":1}"), "spec.datasets[0].size", "between" },
	{ DS("{\"name\":\"d\",\"shardSize\":1}"), "spec.datasets[0].size", "required" },
	{ DS("{\"name\":\"d\",\"size\":1,\"shardSize\":0}"), "spec.datasets[0].shardSize",
	  "between 1 and" },
	{ DS("{\"name\":\"d\",\"size\":1,\"shardSize\":1,\"epochs\":0}"), "spec.datasets[0].epochs",
	  "between 1 and" },
	{ DS("{\"name\":\"d\",\"size\":1,\"shardSize\":1,\"shuffle\":\"yes\"}"),
	  "spec.datasets[0].shuffle", "boolean" },
	{ DS("{\"name\":\"s\",\"streaming\":true,\"shardSize\":1}"), "spec.datasets[0].partitions",
	  "required" },
	{ DS("{\"name\":\"s\",\"streaming\":true,\"shardSize\":1,\"partitions\":[]}"),
	  "spec.datasets[0].partitions", "1 to 64" },
	{ DS("{\"name\":\"d\",\"size\":1,\"shardSize\":1,\"partitions\":[{\"name\":\"p\"}]}"),
	  "spec.datasets[0].partitions", "streaming" },
	{ DS("{\"name\":\"s\",\"streaming\":true,\"shardSize\":1,\"partitions\":[{\"name\":"
	     "\"p\"},{\"name\":\"q\",\"start_offset\":-3}]}"),
	  "spec.datasets[0].partitions[1].start_offset", "between" },
	{ DS("{\"name\":\"s\",\"streaming\":true,\"shardSize\":1,\"partitions\":[{\"name\":"
	     "\"p\",\"start_offset\":9,\"end_offset\":3}]}"),
	  "spec.datasets[0].partitions[0].end_offset", "below" },
	{ DS("{\"name\":\"s\",\"streaming\":true,\"shardSize\":1,\"partitions\":[{\"name\":"
	     "\"p\"},{\"name\":\"p\"}]}"),
	  "spec.datasets[0].partitions[1].name", "twice" },
	{ DS("{\"name\":\"s\",\"streaming\":true,\"shardSize\":1,\"shuffle\":true,"
	     "\"partitions\":[{\"name\":\"p\"}]}"),
	  "spec.datasets[0].shuffle", "offset order" },
	{ DOC(META, AR "\"replicaSpecs\":{\"worker\":{}},\"model\":[]"), "spec.model",
	  "must be an object" },
	{ DOC(META, AR "\"replicaSpecs\":{\"worker\":{}},\"model\":{\"parameters\":-1}"),
	  "spec.model.parameters", "between 0 and" },
	{ DOC(META, AR "\"replicaSpecs\":{\"worker\":{}},\"model\":{\"batchSize\":1.5}"),
	  "spec.model.batchSize", "integer" },
};

START_TEST(test_spec_bad)
{
	const struct bad_case *c = &bad_specs[_i];
	struct rv_job_spec s;
	struct rv_err err = { 0 };
	int rc = spec_parse(c->doc, &s, &err);
	ck_assert_msg(rc == -EINVAL, "case %d: rc %d for %s", _i, rc, c->doc);
	ck_assert_int_eq(err.code, -EINVAL);
	ck_assert_msg(strcmp(err.field, c->field) == 0, "case %d: field \"%s\", want \"%s\" (%s)",
		      _i, err.field, c->field, err.msg);
	ck_assert_msg(strstr(err.msg, c->msg) != NULL, "case %d: msg \"%s\" lacks \"%s\"", _i,
		      err.msg, c->msg);
	/* released: nothing left to free, nothing half-filled */
	ck_assert_str_eq(s.name, "");
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		ck_assert_ptr_null(s.replicas[r].command);
		ck_assert(!s.replicas[r].present);
	}
}
END_TEST

START_TEST(test_spec_duplicate_role)
{
	/* A role given twice never reaches the spec parser: the JSON reader
	 * refuses the duplicate key, naming it. */
	const char *doc = DOC(META, AR "\"replicaSpecs\":{\"worker\":{},\"worker\":{}}");
	struct rv_err err = { 0 };
	ck_assert_ptr_null(rv_json_parse(doc, strlen(doc), &err));
	ck_assert_str_eq(err.field, "spec.replicaSpecs.worker");
	ck_assert_msg(strstr(err.msg, "duplicate key \"worker\""), "msg: %s", err.msg);
}
END_TEST

START_TEST(test_spec_release_on_late_error)
{
	/* The worker's command is allocated before the bad dataset is seen. */
	struct rv_job_spec s;
	struct rv_err err = { 0 };
	const char *doc = DOC(META, AR "\"replicaSpecs\":{\"worker\":{\"command\":[\"a\",\"b\"]},"
				       "\"evaluator\":{\"command\":[\"c\"]}},"
				       "\"datasets\":[{\"name\":\"d\",\"size\":1,\"shardSize\":0}]");
	ck_assert_int_eq(spec_parse(doc, &s, &err), -EINVAL);
	ck_assert_str_eq(err.field, "spec.datasets[0].shardSize");
	ck_assert_ptr_null(s.replicas[RV_ROLE_WORKER].command);
	ck_assert_int_eq(s.replicas[RV_ROLE_WORKER].ncommand, 0);

	/* ... and a bad entry in the middle of a command */
	doc = WORKER("\"command\":[\"a\",\"b\",{},\"d\"]");
	ck_assert_int_eq(spec_parse(doc, &s, &err), -EINVAL);
	ck_assert_str_eq(err.field, "spec.replicaSpecs.worker.command[2]");
	ck_assert_ptr_null(s.replicas[RV_ROLE_WORKER].command);

	/* err is optional */
	cJSON *root = rv_test_json_must_parse(doc);
	ck_assert_int_eq(rv_job_spec_from_json(root, &s, NULL), -EINVAL);
	cJSON_Delete(root);
	rv_job_spec_release(NULL);
}
END_TEST

START_TEST(test_spec_labels_verbatim)
{
	/* Label values are data: quotes, SQL and control text kept byte for byte. */
	const char *doc = DOC("\"metadata\":{\"name\":\"j\",\"labels\":{"
			      "\"user\":\"ana'); DROP TABLE jobs;--\","
			      "\"note\":\"\\\" OR 1=1 --\","
			      "\"path\":\"..\\/..\\/etc\\/passwd\\n%s%n\"}}",
			      AR "\"replicaSpecs\":{\"worker\":{}}");
	struct rv_job_spec s, b;
	struct rv_err err = { 0 };
	ck_assert_int_eq(spec_parse(doc, &s, &err), 0);
	ck_assert_int_eq(s.nlabels, 3);
	ck_assert_str_eq(s.user, "ana'); DROP TABLE jobs;--");
	ck_assert_str_eq(s.labels[0].value, "ana'); DROP TABLE jobs;--");
	ck_assert_str_eq(s.labels[1].key, "note");
	ck_assert_str_eq(s.labels[1].value, "\" OR 1=1 --");
	ck_assert_str_eq(s.labels[2].value, "../../etc/passwd\n%s%n");

	cJSON *back = through_text(rv_job_spec_to_json(&s));
	ck_assert_int_eq(rv_job_spec_from_json(back, &b, &err), 0);
	cJSON_Delete(back);
	assert_spec_eq(&s, &b);
	rv_job_spec_release(&s);
	rv_job_spec_release(&b);
}
END_TEST

__attribute__((format(printf, 1, 2))) static char *fmt(const char *f, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, f);
	int n = vasprintf(&s, f, ap);
	va_end(ap);
	ck_assert_int_ge(n, 0);
	return s;
}

/* A one-worker document with the given metadata and worker members; frees them. */
static char *spec_with(char *meta, char *worker)
{
	char *doc = fmt("{\"kind\":\"ElasticJob\",\"metadata\":{%s},\"spec\":{" AR
			"\"replicaSpecs\":{\"worker\":{%s}}}}",
			meta, worker);
	free(meta);
	free(worker);
	return doc;
}

static void expect_spec_error(const char *doc, const char *field, const char *msg)
{
	struct rv_job_spec s;
	struct rv_err err = { 0 };
	ck_assert_int_eq(spec_parse(doc, &s, &err), -EINVAL);
	ck_assert_str_eq(err.field, field);
	ck_assert_msg(strstr(err.msg, msg) != NULL, "msg \"%s\" lacks \"%s\"", err.msg, msg);
}

START_TEST(test_spec_huge_strings)
{
	char *big = repeat('a', 100000);
	char *doc = spec_with(fmt("\"name\":\"%s\"", big), strdup(""));
	expect_spec_error(doc, "metadata.name", "at most 127");
	free(doc);

	doc = spec_with(fmt("\"name\":\"j\",\"labels\":{\"k\":\"%s\"}", big), strdup(""));
	expect_spec_error(doc, "metadata.labels.k", "at most 127");
	free(doc);

	doc = spec_with(fmt("\"name\":\"j\",\"labels\":{\"%s\":\"v\"}", big), strdup(""));
	expect_spec_error(doc, "metadata.labels", "keys");
	free(doc);

	doc = spec_with(strdup("\"name\":\"j\""), fmt("\"priority\":\"%s\"", big));
	expect_spec_error(doc, "spec.replicaSpecs.worker.priority", "at most 15");
	free(doc);

	/* 4096 characters is a fine argument; 4097 is not */
	big[4096] = '\0';
	doc = spec_with(strdup("\"name\":\"j\""), fmt("\"command\":[\"x\",\"%s\"]", big));
	struct rv_job_spec s;
	struct rv_err err = { 0 };
	ck_assert_int_eq(spec_parse(doc, &s, &err), 0);
	ck_assert_int_eq(strlen(s.replicas[RV_ROLE_WORKER].command[1]), 4096);
	rv_job_spec_release(&s);
	free(doc);
	big[4096] = 'a';
	big[4097] = '\0';
	doc = spec_with(strdup("\"name\":\"j\""), fmt("\"command\":[\"x\",\"%s\"]", big));
	expect_spec_error(doc, "spec.replicaSpecs.worker.command[1]", "at most 4096");
	free(doc);
	free(big);

	char url[400] = "http://";
	memset(url + 7, 'h', 300);
	url[307] = '\0';
	struct rv_buf b = { 0 };
	rv_buf_printf(&b, DOC(META, AR "\"brainService\":\"%s\",\"replicaSpecs\":{\"worker\":{}}"),
		      url);
	expect_spec_error(b.data, "spec.brainService", "at most 255");
	rv_buf_release(&b);
}
END_TEST

START_TEST(test_spec_limits)
{
	/* 16 labels fit, 17 do not */
	struct rv_buf b = { 0 };
	rv_buf_printf(&b, "{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"j\",\"labels\":{");
	for (int i = 0; i < 16; i++)
		rv_buf_printf(&b, "%s\"k%d\":\"v\"", i ? "," : "", i);
	size_t mark = b.len;
	rv_buf_printf(&b, "}},\"spec\":{" AR "\"replicaSpecs\":{\"worker\":{}}}}");
	struct rv_job_spec s;
	struct rv_err err = { 0 };
	ck_assert_int_eq(spec_parse(b.data, &s, &err), 0);
	ck_assert_int_eq(s.nlabels, 16);
	rv_job_spec_release(&s);
	rv_buf_truncate(&b, mark);
	rv_buf_printf(&b, ",\"k16\":\"v\"}},\"spec\":{" AR "\"replicaSpecs\":{\"worker\":{}}}}");
	expect_spec_error(b.data, "metadata.labels", "at most 16");
	rv_buf_release(&b);

	/* 64 command entries fit, 65 do not */
	rv_buf_printf(&b, "{\"kind\":\"ElasticJob\"," META ",\"spec\":{" AR
			  "\"replicaSpecs\":{\"worker\":{\"command\":[");
	for (int i = 0; i < 64; i++)
		rv_buf_printf(&b, "%s\"a%d\"", i ? "," : "", i);
	mark = b.len;
	rv_buf_printf(&b, "]}}}}");
	ck_assert_int_eq(spec_parse(b.data, &s, &err), 0);
	ck_assert_int_eq(s.replicas[RV_ROLE_WORKER].ncommand, 64);
	ck_assert_str_eq(s.replicas[RV_ROLE_WORKER].command[63], "a63");
	rv_job_spec_release(&s);
	rv_buf_truncate(&b, mark);
	rv_buf_printf(&b, ",\"x\"]}}}}");
	expect_spec_error(b.data, "spec.replicaSpecs.worker.command", "at most 64");
	rv_buf_release(&b);

	/* 8 datasets fit, 9 do not */
	rv_buf_printf(&b, "{\"kind\":\"ElasticJob\"," META ",\"spec\":{" AR
			  "\"replicaSpecs\":{\"worker\":{}},\"datasets\":[");
	for (int i = 0; i < 8; i++)
		rv_buf_printf(&b, "%s{\"name\":\"d%d\",\"size\":1,\"shardSize\":1}", i ? "," : "",
			      i);
	mark = b.len;
	rv_buf_printf(&b, "]}}");
	ck_assert_int_eq(spec_parse(b.data, &s, &err), 0);
	ck_assert_int_eq(s.ndatasets, 8);
	rv_job_spec_release(&s);
	rv_buf_truncate(&b, mark);
	rv_buf_printf(&b, ",{\"name\":\"d8\",\"size\":1,\"shardSize\":1}]}}");
	expect_spec_error(b.data, "spec.datasets", "at most 8");
	rv_buf_release(&b);
}
END_TEST

/* ---- metrics batch ---- */

static int batch_parse(const char *doc, struct rv_metrics_batch *out, struct rv_err *err)
{
	cJSON *root = rv_test_json_must_parse(doc);
	int rc = rv_metrics_batch_from_json(root, out, err);
	cJSON_Delete(root);
	return rc;
}

#define SPEED_OK "{\"kind\":\"speed\",\"ts\":1700000000000,\"speed\":120.5,\"step\":10,\"workers\":4,\"ps\":1}"
#define NODE_OK                                                                                    \
	"{\"kind\":\"node\",\"ts\":1700000000001,\"node\":\"worker-0\",\"role\":\"worker\","       \
	"\"rank\":0,\"cpu\":3.5,\"memory_mb\":4096,\"cpu_limit\":4,\"memory_limit_mb\":8192,"      \
	"\"step_time\":0.25,\"compute_time\":0.125}"
#define MODEL_OK "{\"kind\":\"model\",\"ts\":1700000000002,\"parameters\":1200000,\"batch_size\":64,\"flops\":1.5e9}"

START_TEST(test_metrics_valid)
{
	struct rv_metrics_batch b;
	struct rv_err err = { 0 };
	ck_assert_int_eq(batch_parse("{\"samples\":[" SPEED_OK "," NODE_OK "," MODEL_OK
				     ",{\"kind\":\"node\",\"ts\":5,\"node\":\"ps-1\","
				     "\"cpu\":0,\"memory_mb\":0}]}",
				     &b, &err),
			 0);
	ck_assert_int_eq(b.n, 4);
	const struct rv_sample *s = b.samples;
	ck_assert_int_eq(s[0].kind, RV_SAMPLE_SPEED);
	ck_assert(s[0].ts_ms == 1700000000000LL);
	ck_assert(s[0].speed == 120.5);
	ck_assert_int_eq(s[0].step, 10);
	ck_assert_int_eq(s[0].workers, 4);
	ck_assert_int_eq(s[0].ps, 1);

	ck_assert_int_eq(s[1].kind, RV_SAMPLE_NODE);
	ck_assert_str_eq(s[1].node, "worker-0");
	ck_assert_int_eq(s[1].role, RV_ROLE_WORKER);
	ck_assert_int_eq(s[1].rank, 0);
	ck_assert(s[1].cpu == 3.5);
	ck_assert_int_eq(s[1].memory_mb, 4096);
	ck_assert(s[1].cpu_limit == 4.0);
	ck_assert_int_eq(s[1].memory_limit_mb, 8192);
	ck_assert(s[1].step_time == 0.25);
	ck_assert(s[1].compute_time == 0.125);

	ck_assert_int_eq(s[2].kind, RV_SAMPLE_MODEL);
	ck_assert_int_eq(s[2].parameters, 1200000);
	ck_assert_int_eq(s[2].batch_size, 64);
	ck_assert(s[2].flops == 1.5e9);

	/* defaults: step_time -1 when absent, rank -1, role worker, no
	 * throttling counters */
	ck_assert(s[3].step_time == -1.0);
	ck_assert(s[3].compute_time == 0.0);
	ck_assert(s[3].nr_periods == 0 && s[3].nr_throttled == 0 && s[3].throttled_usec == 0);
	ck_assert_int_eq(s[3].rank, -1);
	ck_assert_int_eq(s[3].role, RV_ROLE_WORKER);
	rv_metrics_batch_release(&b);
	ck_assert_ptr_null(b.samples);
	ck_assert_int_eq(b.n, 0);
	rv_metrics_batch_release(&b);
	rv_metrics_batch_release(NULL);
}
END_TEST

START_TEST(test_metrics_round_trip)
{
	struct rv_metrics_batch a, b;
	struct rv_err err = { 0 };
	ck_assert_int_eq(
		batch_parse("{\"samples\":[" SPEED_OK "," NODE_OK "," MODEL_OK
			    ",{\"kind\":\"node\",\"ts\":5,\"node\":\"ps-1\",\"role\":\"ps\","
			    "\"cpu\":0.1,\"memory_mb\":1,\"step_time\":0}"
			    ",{\"kind\":\"node\",\"ts\":6,\"node\":\"e.1_x\",\"cpu\":1024,"
			    "\"memory_mb\":4194304}"
			    ",{\"kind\":\"speed\",\"ts\":9007199254740991,\"speed\":0}"
			    ",{\"kind\":\"node\",\"ts\":7,\"node\":\"worker-1\",\"cpu\":2,"
			    "\"memory_mb\":10,\"nr_periods\":1200,\"nr_throttled\":300,"
			    "\"throttled_usec\":4500000}]}",
			    &a, &err),
		0);
	ck_assert(a.samples[6].nr_periods == 1200 && a.samples[6].nr_throttled == 300 &&
		  a.samples[6].throttled_usec == 4500000);
	cJSON *back = through_text(rv_metrics_batch_to_json(&a));
	ck_assert_int_eq(rv_metrics_batch_from_json(back, &b, &err), 0);
	cJSON_Delete(back);
	ck_assert_int_eq(a.n, b.n);
	ck_assert_int_eq(memcmp(a.samples, b.samples, sizeof(*a.samples) * (size_t)a.n), 0);
	ck_assert(b.samples[3].step_time == 0.0);
	ck_assert(b.samples[4].step_time == -1.0);
	ck_assert(b.samples[1].compute_time == 0.125 && b.samples[4].compute_time == 0.0);
	rv_metrics_batch_release(&a);
	rv_metrics_batch_release(&b);
}
END_TEST

START_TEST(test_metrics_bad_sample_in_middle)
{
	struct rv_metrics_batch b;
	struct rv_err err = { 0 };
	int rc = batch_parse("{\"samples\":[" SPEED_OK "," NODE_OK ","
			     "{\"kind\":\"speed\",\"ts\":1700000000003,\"speed\":-3},"
			     MODEL_OK "]}",
			     &b, &err);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_str_eq(err.field, "samples[2].speed");
	ck_assert_msg(strstr(err.msg, "between 0 and"), "msg: %s", err.msg);
	ck_assert_ptr_null(b.samples);
	ck_assert_int_eq(b.n, 0);
}
END_TEST

static const struct bad_case bad_batches[] = {
	{ "[]", "", "object" },
	{ "{}", "samples", "required" },
	{ "{\"samples\":{}}", "samples", "must be an array" },
	{ "{\"samples\":[]}", "samples", "empty" },
	{ "{\"samples\":[7]}", "samples[0]", "must be an object" },
	{ "{\"samples\":[{\"ts\":1,\"speed\":1}]}", "samples[0].kind", "required" },
	{ "{\"samples\":[{\"kind\":\"gpu\",\"ts\":1}]}", "samples[0].kind", "speed, node, model" },
	{ "{\"samples\":[{\"kind\":3,\"ts\":1}]}", "samples[0].kind", "must be a string" },
	{ "{\"samples\":[{\"kind\":\"speed\",\"speed\":1}]}", "samples[0].ts", "required" },
	{ "{\"samples\":[{\"kind\":\"speed\",\"ts\":0,\"speed\":1}]}", "samples[0].ts",
	  "between 1" },
	{ "{\"samples\":[{\"kind\":\"speed\",\"ts\":1.5,\"speed\":1}]}", "samples[0].ts",
	  "integer" },
	{ "{\"samples\":[{\"kind\":\"speed\",\"ts\":\"1\",\"speed\":1}]}", "samples[0].ts",
	  "integer" },
	{ "{\"samples\":[{\"kind\":\"speed\",\"ts\":1}]}", "samples[0].speed", "required" },
	{ "{\"samples\":[{\"kind\":\"speed\",\"ts\":1,\"speed\":\"fast\"}]}", "samples[0].speed",
	  "finite number" },
	{ "{\"samples\":[{\"kind\":\"speed\",\"ts\":1,\"speed\":1e13}]}", "samples[0].speed",
	  "between 0 and 1e+12" },
	{ "{\"samples\":[{\"kind\":\"speed\",\"ts\":1,\"speed\":1e999}]}", "samples[0].speed",
	  "finite" },
	{ "{\"samples\":[{\"kind\":\"speed\",\"ts\":1,\"speed\":1,\"step\":-1}]}",
	  "samples[0].step", "between 0" },
	{ "{\"samples\":[{\"kind\":\"speed\",\"ts\":1,\"speed\":1,\"workers\":-1}]}",
	  "samples[0].workers", "between 0" },
	{ "{\"samples\":[" NODE_OK ",{\"kind\":\"node\",\"ts\":1,\"cpu\":1,\"memory_mb\":1}]}",
	  "samples[1].node", "required" },
	{ "{\"samples\":[{\"kind\":\"node\",\"ts\":1,\"node\":\"a b\",\"cpu\":1,\"memory_mb\":1}]}",
	  "samples[0].node", "letters" },
	{ "{\"samples\":[{\"kind\":\"node\",\"ts\":1,\"node\":\"n\",\"role\":\"master\",\"cpu\":1,"
	  "\"memory_mb\":1}]}",
	  "samples[0].role", "worker, ps, chief, evaluator" },
	{ "{\"samples\":[{\"kind\":\"node\",\"ts\":1,\"node\":\"n\",\"cpu\":-1,\"memory_mb\":1}]}",
	  "samples[0].cpu", "between 0 and 1024" },
	{ "{\"samples\":[{\"kind\":\"node\",\"ts\":1,\"node\":\"n\",\"cpu\":5000,\"memory_mb\":1}]"
	  "}",
	  "samples[0].cpu", "between 0 and 1024" },
	{ "{\"samples\":[{\"kind\":\"node\",\"ts\":1,\"node\":\"n\",\"memory_mb\":1}]}",
	  "samples[0].cpu", "required" },
	{ "{\"samples\":[{\"kind\":\"node\",\"ts\":1,\"node\":\"n\",\"cpu\":1,\"memory_mb\":-1}]}",
	  "samples[0].memory_mb", "between 0 and 4194304" },
	{ "{\"samples\":[{\"kind\":\"node\",\"ts\":1,\"node\":\"n\",\"cpu\":1,\"memory_mb\":5e12}]"
	  "}",
	  "samples[0].memory_mb", "between 0 and 4194304" },
	{ "{\"samples\":[{\"kind\":\"node\",\"ts\":1,\"node\":\"n\",\"cpu\":1,\"memory_mb\":1,"
	  "\"step_time\":-0.5}]}",
	  "samples[0].step_time", "between 0" },
	{ "{\"samples\":[{\"kind\":\"node\",\"ts\":1,\"node\":\"n\",\"cpu\":1,\"memory_mb\":1,"
	  "\"compute_time\":-0.5}]}",
	  "samples[0].compute_time", "between 0" },
	{ "{\"samples\":[{\"kind\":\"node\",\"ts\":1,\"node\":\"n\",\"cpu\":1,\"memory_mb\":1,"
	  "\"rank\":-2}]}",
	  "samples[0].rank", "between -1" },
	{ "{\"samples\":[{\"kind\":\"node\",\"ts\":1,\"node\":\"n\",\"cpu\":1,\"memory_mb\":1,"
	  "\"nr_periods\":10,\"nr_throttled\":11}]}",
	  "samples[0].nr_throttled", "between 0 and 10" },
	{ "{\"samples\":[{\"kind\":\"node\",\"ts\":1,\"node\":\"n\",\"cpu\":1,\"memory_mb\":1,"
	  "\"nr_throttled\":1}]}",
	  "samples[0].nr_throttled", "between 0 and 0" },
	{ "{\"samples\":[{\"kind\":\"node\",\"ts\":1,\"node\":\"n\",\"cpu\":1,\"memory_mb\":1,"
	  "\"nr_periods\":10,\"throttled_usec\":-1}]}",
	  "samples[0].throttled_usec", "between 0" },
	{ "{\"samples\":[{\"kind\":\"model\",\"ts\":1}]}", "samples[0].parameters", "required" },
	{ "{\"samples\":[{\"kind\":\"model\",\"ts\":1,\"parameters\":-5}]}",
	  "samples[0].parameters", "between 0" },
	{ "{\"samples\":[{\"kind\":\"model\",\"ts\":1,\"parameters\":5,\"flops\":-1}]}",
	  "samples[0].flops", "between 0" },
};

START_TEST(test_metrics_bad)
{
	const struct bad_case *c = &bad_batches[_i];
	struct rv_metrics_batch b;
	struct rv_err err = { 0 };
	int rc = batch_parse(c->doc, &b, &err);
	ck_assert_msg(rc == -EINVAL, "case %d: rc %d for %s", _i, rc, c->doc);
	ck_assert_msg(strcmp(err.field, c->field) == 0, "case %d: field \"%s\", want \"%s\" (%s)",
		      _i, err.field, c->field, err.msg);
	ck_assert_msg(strstr(err.msg, c->msg) != NULL, "case %d: msg \"%s\" lacks \"%s\"", _i,
		      err.msg, c->msg);
	ck_assert_ptr_null(b.samples);
	ck_assert_int_eq(b.n, 0);
}
END_TEST

static char *batch_of(int n, int bad_at)
{
	struct rv_buf b = { 0 };
	rv_buf_printf(&b, "{\"samples\":[");
	for (int i = 0; i < n; i++)
		rv_buf_printf(&b, "%s{\"kind\":\"speed\",\"ts\":%d,\"speed\":%s}", i ? "," : "",
			      i + 1, i == bad_at ? "null" : "1.5");
	rv_buf_printf(&b, "]}");
	ck_assert(!rv_buf_failed(&b));
	return rv_buf_steal(&b);
}

START_TEST(test_metrics_batch_size)
{
	struct rv_metrics_batch b;
	struct rv_err err = { 0 };
	char *doc = batch_of(RV_MAX_SAMPLES, -1);
	ck_assert_int_eq(batch_parse(doc, &b, &err), 0);
	ck_assert_int_eq(b.n, RV_MAX_SAMPLES);
	ck_assert(b.samples[RV_MAX_SAMPLES - 1].ts_ms == RV_MAX_SAMPLES);
	rv_metrics_batch_release(&b);
	free(doc);

	doc = batch_of(RV_MAX_SAMPLES + 1, -1);
	ck_assert_int_eq(batch_parse(doc, &b, &err), -E2BIG);
	ck_assert_int_eq(err.code, -E2BIG);
	ck_assert_str_eq(err.field, "samples");
	ck_assert_msg(strstr(err.msg, "at most 10000"), "msg: %s", err.msg);
	ck_assert_ptr_null(b.samples);
	free(doc);

	/* a large batch with one bad sample deep inside names its index */
	doc = batch_of(5000, 4321);
	ck_assert_int_eq(batch_parse(doc, &b, &err), -EINVAL);
	ck_assert_str_eq(err.field, "samples[4321].speed");
	ck_assert_ptr_null(b.samples);
	free(doc);
}
END_TEST

/* ---- events ---- */

static int event_parse(const char *doc, struct rv_event *out, struct rv_err *err)
{
	cJSON *root = rv_test_json_must_parse(doc);
	int rc = rv_event_from_json(root, out, err);
	cJSON_Delete(root);
	return rc;
}

static void event_round_trip(const struct rv_event *a)
{
	struct rv_event b;
	struct rv_err err = { 0 };
	cJSON *back = through_text(rv_event_to_json(a));
	ck_assert_msg(rv_event_from_json(back, &b, &err) == 0, "%s: %s", err.field, err.msg);
	cJSON_Delete(back);
	ck_assert_int_eq(memcmp(a, &b, sizeof(b)), 0);
}

START_TEST(test_event_valid)
{
	struct rv_event ev;
	struct rv_err err = { 0 };
	ck_assert_int_eq(event_parse("{\"type\":\"node_oom\",\"ts\":1700000000000,"
				     "\"node\":\"worker-3\",\"role\":\"worker\",\"rank\":3,"
				     "\"exit_code\":137,\"reason\":\"OOMKilled\","
				     "\"memory_mb\":8192,\"peak_memory_mb\":8190}",
				     &ev, &err),
			 0);
	ck_assert_int_eq(ev.type, RV_EVENT_NODE_OOM);
	ck_assert(ev.ts_ms == 1700000000000LL);
	ck_assert_str_eq(ev.node, "worker-3");
	ck_assert_int_eq(ev.rank, 3);
	ck_assert_int_eq(ev.exit_code, 137);
	ck_assert_str_eq(ev.reason, "OOMKilled");
	ck_assert_int_eq(ev.memory_mb, 8192);
	ck_assert_int_eq(ev.peak_memory_mb, 8190);
	ck_assert_int_eq(ev.plan_id, 0);
	event_round_trip(&ev);

	/* job events need no node; defaults */
	ck_assert_int_eq(event_parse("{\"type\":\"job_finished\",\"ts\":1}", &ev, &err), 0);
	ck_assert_int_eq(ev.type, RV_EVENT_JOB_FINISHED);
	ck_assert_str_eq(ev.node, "");
	ck_assert_int_eq(ev.role, RV_ROLE_WORKER);
	ck_assert_int_eq(ev.rank, -1);
	ck_assert_int_eq(ev.exit_code, -1);
	ck_assert_str_eq(ev.reason, "");
	event_round_trip(&ev);

	ck_assert_int_eq(event_parse("{\"type\":\"plan_applied\",\"ts\":2,\"plan_id\":42}", &ev,
				     &err),
			 0);
	ck_assert_int_eq(ev.plan_id, 42);
	event_round_trip(&ev);

	ck_assert_int_eq(event_parse("{\"type\":\"node_failed\",\"ts\":3,\"node\":\"ps-0\","
				     "\"role\":\"ps\",\"exit_code\":-9,"
				     "\"reason\":\"killed by signal 9; DROP TABLE events\"}",
				     &ev, &err),
			 0);
	ck_assert_int_eq(ev.role, RV_ROLE_PS);
	ck_assert_int_eq(ev.exit_code, -9);
	event_round_trip(&ev);
}
END_TEST

static const struct bad_case bad_events[] = {
	{ "7", "", "object" },
	{ "{\"ts\":1}", "type", "required" },
	{ "{\"type\":\"node_exploded\",\"ts\":1}", "type", "node_failed" },
	{ "{\"type\":[],\"ts\":1}", "type", "must be a string" },
	{ "{\"type\":\"job_failed\"}", "ts", "required" },
	{ "{\"type\":\"job_failed\",\"ts\":-1}", "ts", "between 1" },
	{ "{\"type\":\"node_failed\",\"ts\":1}", "node", "required" },
	{ "{\"type\":\"node_relaunched\",\"ts\":1,\"node\":\"\"}", "node", "1 to 63" },
	{ "{\"type\":\"node_finished\",\"ts\":1,\"node\":\"n\",\"role\":\"boss\"}", "role",
	  "worker, ps" },
	{ "{\"type\":\"node_failed\",\"ts\":1,\"node\":\"n\",\"rank\":-2}", "rank", "between -1" },
	{ "{\"type\":\"node_failed\",\"ts\":1,\"node\":\"n\",\"exit_code\":\"1\"}", "exit_code",
	  "integer" },
	{ "{\"type\":\"node_failed\",\"ts\":1,\"node\":\"n\",\"exit_code\":256}", "exit_code",
	  "between -255 and 255" },
	{ "{\"type\":\"node_oom\",\"ts\":1,\"node\":\"n\",\"memory_mb\":-1}", "memory_mb",
	  "between 0" },
	{ "{\"type\":\"node_oom\",\"ts\":1,\"node\":\"n\",\"peak_memory_mb\":1e20}",
	  "peak_memory_mb", "between 0" },
	{ "{\"type\":\"plan_applied\",\"ts\":1}", "plan_id", "required" },
	{ "{\"type\":\"plan_applied\",\"ts\":1,\"plan_id\":0}", "plan_id", "between 1" },
	{ "{\"type\":\"job_failed\",\"ts\":1,\"reason\":5}", "reason", "must be a string" },
};

START_TEST(test_event_bad)
{
	const struct bad_case *c = &bad_events[_i];
	struct rv_event ev;
	struct rv_err err = { 0 };
	int rc = event_parse(c->doc, &ev, &err);
	ck_assert_msg(rc == -EINVAL, "case %d: rc %d for %s", _i, rc, c->doc);
	ck_assert_msg(strcmp(err.field, c->field) == 0, "case %d: field \"%s\", want \"%s\" (%s)",
		      _i, err.field, c->field, err.msg);
	ck_assert_msg(strstr(err.msg, c->msg) != NULL, "case %d: msg \"%s\" lacks \"%s\"", _i,
		      err.msg, c->msg);
	ck_assert_int_eq(ev.ts_ms, 0);
}
END_TEST

START_TEST(test_event_long_reason)
{
	char *r = repeat('x', 256);
	struct rv_buf b = { 0 };
	rv_buf_printf(&b, "{\"type\":\"job_failed\",\"ts\":1,\"reason\":\"%s\"}", r);
	struct rv_event ev;
	struct rv_err err = { 0 };
	ck_assert_int_eq(event_parse(b.data, &ev, &err), -EINVAL);
	ck_assert_str_eq(err.field, "reason");
	ck_assert_msg(strstr(err.msg, "at most 255"), "msg: %s", err.msg);
	rv_buf_release(&b);
	r[255] = '\0';
	rv_buf_printf(&b, "{\"type\":\"job_failed\",\"ts\":1,\"reason\":\"%s\"}", r);
	ck_assert_int_eq(event_parse(b.data, &ev, &err), 0);
	ck_assert_int_eq(strlen(ev.reason), 255);
	rv_buf_release(&b);
	free(r);
}
END_TEST

/* ---- ScalePlan ---- */

static int plan_parse(const char *doc, struct rv_scale_plan *out, struct rv_err *err)
{
	cJSON *root = rv_test_json_must_parse(doc);
	int rc = rv_scale_plan_from_json(root, out, err);
	cJSON_Delete(root);
	return rc;
}

static void plan_round_trip(const struct rv_scale_plan *a)
{
	/* a plan is large: keep it off the check stack */
	struct rv_scale_plan *b = malloc(sizeof(*b));
	ck_assert_ptr_nonnull(b);
	struct rv_err err = { 0 };
	cJSON *back = through_text(rv_scale_plan_to_json(a));
	ck_assert_msg(rv_scale_plan_from_json(back, b, &err) == 0, "%s: %s", err.field, err.msg);
	cJSON_Delete(back);
	ck_assert_int_eq(memcmp(a, b, sizeof(*b)), 0);
	free(b);
}

START_TEST(test_plan_design_example)
{
	static struct rv_scale_plan p;
	struct rv_err err = { 0 };
	ck_assert_int_eq(plan_parse(design_plan, &p, &err), 0);
	ck_assert_str_eq(p.job, "uid");
	ck_assert_int_eq(p.id, 42);
	ck_assert_str_eq(p.stage, "running");
	ck_assert_str_eq(p.algorithm, "worker_count_model");
	ck_assert_str_eq(p.reason, "throughput model predicts +18% samples/s with 6 workers");
	ck_assert(p.predicted_speed == 0);

	const struct rv_plan_group *w = &p.groups[RV_ROLE_WORKER], *ps = &p.groups[RV_ROLE_PS];
	ck_assert(w->present);
	ck_assert_int_eq(w->count, 6);
	ck_assert(w->resource.cpu == 4);
	ck_assert_int_eq(w->resource.memory_mb, 8192);
	ck_assert_int_eq(w->resource.gpu, 0);
	ck_assert(ps->present);
	ck_assert_int_eq(ps->count, 2);
	ck_assert(ps->resource.cpu == 8);
	ck_assert_int_eq(ps->resource.memory_mb, 16384);
	ck_assert(!p.groups[RV_ROLE_CHIEF].present);

	ck_assert_int_eq(p.nlaunch, 0);
	ck_assert_int_eq(p.nremove, 0);
	ck_assert_int_eq(p.nmigrate, 1);
	ck_assert_str_eq(p.migrate[0].node, "ps-1");
	ck_assert(p.migrate[0].resource.cpu == 12);
	ck_assert_int_eq(p.migrate[0].resource.memory_mb, 0);
	plan_round_trip(&p);
}
END_TEST

START_TEST(test_plan_round_trip_and_shape)
{
	static struct rv_scale_plan p;
	memset(&p, 0, sizeof(p));
	snprintf(p.job, sizeof(p.job), "j-123");
	p.id = 7;
	snprintf(p.stage, sizeof(p.stage), "oom");
	snprintf(p.algorithm, sizeof(p.algorithm), "oom_bump");
	snprintf(p.reason, sizeof(p.reason), "worker-2 peaked at \"8190\" MiB of 8192");
	p.predicted_speed = 1234.5;
	p.based_on_ts_ms = 1700000000000LL;
	p.groups[RV_ROLE_EVALUATOR].present = true;
	p.groups[RV_ROLE_EVALUATOR].count = 1;
	p.groups[RV_ROLE_EVALUATOR].resource = (struct rv_resource){ 0.5, 512, 1 };
	for (int i = 0; i < RV_MAX_PLAN_NODES; i++) {
		snprintf(p.launch[i].node, sizeof(p.launch[i].node), "worker-%d", i);
		p.launch[i].role = (enum rv_role)(i % RV_ROLE_COUNT);
		p.launch[i].resource = (struct rv_resource){ 1 + i, 1024 * i, i % 2 };
	}
	p.nlaunch = RV_MAX_PLAN_NODES;
	snprintf(p.remove[0].node, sizeof(p.remove[0].node), "worker-9");
	p.nremove = 1;
	plan_round_trip(&p);

	/* a stable shape: predicted_speed always, only present groups */
	p.predicted_speed = 0;
	cJSON *j = rv_scale_plan_to_json(&p);
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(j, "predicted_speed"));
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(j, "migrate"));
	const cJSON *groups = cJSON_GetObjectItem(j, "groups");
	ck_assert_int_eq(cJSON_GetArraySize(groups), 1);
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(groups, "evaluator"));
	cJSON_Delete(j);
}
END_TEST

static const struct bad_case bad_plans[] = {
	{ "[1]", "", "object" },
	{ "{}", "stage", "required" },
	{ "{\"stage\":\"later\"}", "stage", "create, running, oom" },
	{ "{\"stage\":\"running\",\"id\":-1}", "id", "between 0" },
	{ "{\"stage\":\"running\",\"predicted_speed\":-1}", "predicted_speed", "between 0" },
	{ "{\"stage\":\"running\",\"groups\":[]}", "groups", "must be an object" },
	{ "{\"stage\":\"running\",\"groups\":{\"master\":{\"count\":1}}}", "groups.master",
	  "unknown group" },
	{ "{\"stage\":\"running\",\"groups\":{\"worker\":{}}}", "groups.worker.count", "required" },
	{ "{\"stage\":\"running\",\"groups\":{\"worker\":{\"count\":-1}}}", "groups.worker.count",
	  "between 0" },
	{ "{\"stage\":\"running\",\"groups\":{\"ps\":{\"count\":1,\"resource\":{\"cpu\":-1}}}}",
	  "groups.ps.resource.cpu", "between 0 and 1024" },
	{ "{\"stage\":\"running\",\"groups\":{\"ps\":{\"count\":1,"
	  "\"resource\":{\"memory_mb\":\"8Gi\"}}}}",
	  "groups.ps.resource.memory_mb", "integer" },
	{ "{\"stage\":\"running\",\"groups\":{\"ps\":{\"count\":1,\"resource\":{\"gpu\":100}}}}",
	  "groups.ps.resource.gpu", "between 0 and 64" },
	{ "{\"stage\":\"running\",\"launch\":{}}", "launch", "must be an array" },
	{ "{\"stage\":\"running\",\"launch\":[{\"node\":\"a\"},5]}", "launch[1]",
	  "must be an object" },
	{ "{\"stage\":\"running\",\"remove\":[{\"role\":\"ps\"}]}", "remove[0].node", "required" },
	{ "{\"stage\":\"running\",\"migrate\":[{\"node\":\"a/b\"}]}", "migrate[0].node",
	  "letters" },
	{ "{\"stage\":\"running\",\"migrate\":[{\"node\":\"a\",\"role\":\"x\"}]}",
	  "migrate[0].role", "worker" },
	{ "{\"stage\":\"running\",\"migrate\":[{\"node\":\"a\",\"resource\":{\"cpu\":1e9}}]}",
	  "migrate[0].resource.cpu", "between 0 and 1024" },
};

START_TEST(test_plan_bad)
{
	const struct bad_case *c = &bad_plans[_i];
	static struct rv_scale_plan p;
	struct rv_err err = { 0 };
	int rc = plan_parse(c->doc, &p, &err);
	ck_assert_msg(rc == -EINVAL, "case %d: rc %d for %s", _i, rc, c->doc);
	ck_assert_msg(strcmp(err.field, c->field) == 0, "case %d: field \"%s\", want \"%s\" (%s)",
		      _i, err.field, c->field, err.msg);
	ck_assert_msg(strstr(err.msg, c->msg) != NULL, "case %d: msg \"%s\" lacks \"%s\"", _i,
		      err.msg, c->msg);
	ck_assert_int_eq(p.nlaunch + p.nremove + p.nmigrate, 0);
}
END_TEST

START_TEST(test_plan_too_many_nodes)
{
	struct rv_buf b = { 0 };
	rv_buf_printf(&b, "{\"stage\":\"running\",\"remove\":[");
	for (int i = 0; i <= RV_MAX_PLAN_NODES; i++)
		rv_buf_printf(&b, "%s{\"node\":\"w-%d\"}", i ? "," : "", i);
	rv_buf_printf(&b, "]}");
	static struct rv_scale_plan p;
	struct rv_err err = { 0 };
	ck_assert_int_eq(plan_parse(b.data, &p, &err), -EINVAL);
	ck_assert_str_eq(err.field, "remove");
	ck_assert_msg(strstr(err.msg, "at most 64"), "msg: %s", err.msg);
	rv_buf_release(&b);
}
END_TEST

/* ---- cluster report ---- */

static int report_parse(const char *doc, struct rv_cluster_report *out, struct rv_err *err)
{
	cJSON *root = rv_test_json_must_parse(doc);
	int rc = rv_cluster_report_from_json(root, out, err);
	cJSON_Delete(root);
	return rc;
}

START_TEST(test_cluster_valid_round_trip)
{
	struct rv_cluster_report a, b;
	struct rv_err err = { 0 };
	ck_assert_int_eq(report_parse("{\"nodes\":[{\"name\":\"node-1.example.com\",\"ts\":17,"
				      "\"cpu\":64,\"memory_mb\":262144,\"gpu\":8,\"cpu_used\":12.5,"
				      "\"memory_used_mb\":1000,\"ready\":false},"
				      "{\"name\":\"ip-10-0-0-1_B\",\"ts\":18,\"cpu\":2,"
				      "\"memory_mb\":1024}]}",
				      &a, &err),
			 0);
	ck_assert_int_eq(a.n, 2);
	ck_assert_str_eq(a.nodes[0].name, "node-1.example.com");
	ck_assert_int_eq(a.nodes[0].ts_ms, 17);
	ck_assert(a.nodes[0].cpu == 64);
	ck_assert_int_eq(a.nodes[0].memory_mb, 262144);
	ck_assert_int_eq(a.nodes[0].gpu, 8);
	ck_assert(a.nodes[0].cpu_used == 12.5);
	ck_assert_int_eq(a.nodes[0].memory_used_mb, 1000);
	ck_assert(!a.nodes[0].ready);
	ck_assert(a.nodes[1].ready);  /* default */
	ck_assert_int_eq(a.nodes[1].gpu, 0);

	cJSON *back = through_text(rv_cluster_report_to_json(&a));
	ck_assert_int_eq(rv_cluster_report_from_json(back, &b, &err), 0);
	cJSON_Delete(back);
	ck_assert_int_eq(a.n, b.n);
	ck_assert_int_eq(memcmp(a.nodes, b.nodes, sizeof(*a.nodes) * (size_t)a.n), 0);
	rv_cluster_report_release(&a);
	rv_cluster_report_release(&b);
	ck_assert_ptr_null(a.nodes);
	rv_cluster_report_release(NULL);
}
END_TEST

static const struct bad_case bad_reports[] = {
	{ "\"nodes\"", "", "object" },
	{ "{}", "nodes", "required" },
	{ "{\"nodes\":[]}", "nodes", "empty" },
	{ "{\"nodes\":[{\"name\":\"a\",\"ts\":1,\"cpu\":1,\"memory_mb\":1},"
	  "{\"name\":\"b\",\"ts\":1,\"cpu\":-4,\"memory_mb\":1},"
	  "{\"name\":\"c\",\"ts\":1,\"cpu\":1,\"memory_mb\":1}]}",
	  "nodes[1].cpu", "between 0 and 1024" },
	{ "{\"nodes\":[{\"ts\":1,\"cpu\":1,\"memory_mb\":1}]}", "nodes[0].name", "required" },
	{ "{\"nodes\":[{\"name\":\"a b\",\"ts\":1,\"cpu\":1,\"memory_mb\":1}]}", "nodes[0].name",
	  "letters" },
	{ "{\"nodes\":[{\"name\":\"a;rm -rf\",\"ts\":1,\"cpu\":1,\"memory_mb\":1}]}",
	  "nodes[0].name", "letters" },
	{ "{\"nodes\":[{\"name\":\"\",\"ts\":1,\"cpu\":1,\"memory_mb\":1}]}", "nodes[0].name",
	  "1 to 127" },
	{ "{\"nodes\":[{\"name\":\"a\",\"cpu\":1,\"memory_mb\":1}]}", "nodes[0].ts", "required" },
	{ "{\"nodes\":[{\"name\":\"a\",\"ts\":1,\"cpu\":1,\"memory_mb\":1e13}]}",
	  "nodes[0].memory_mb", "between 0" },
	{ "{\"nodes\":[{\"name\":\"a\",\"ts\":1,\"cpu\":1,\"memory_mb\":1,\"gpu\":65}]}",
	  "nodes[0].gpu", "between 0 and 64" },
	{ "{\"nodes\":[{\"name\":\"a\",\"ts\":1,\"cpu\":1,\"memory_mb\":1,\"ready\":1}]}",
	  "nodes[0].ready", "boolean" },
	{ "{\"report_id\":\"a b\",\"nodes\":[{\"name\":\"a\",\"ts\":1,\"cpu\":1,\"memory_mb\":1}]}",
	  "report_id", "letters" },
	{ "{\"nodes\":[{\"name\":\"a\",\"ts\":1,\"cpu\":1,\"memory_mb\":1,\"cpu_pressure\":101}]}",
	  "nodes[0].cpu_pressure", "between 0 and 100" },
	{ "{\"nodes\":[{\"name\":\"a\",\"ts\":1,\"cpu\":1,\"memory_mb\":1,\"jobs\":[{\"procs\":1}]}"
	  "]}",
	  "nodes[0].jobs[0].name", "required" },
	{ "{\"nodes\":[{\"name\":\"a\",\"ts\":1,\"cpu\":1,\"memory_mb\":1,"
	  "\"jobs\":[{\"name\":\"j\",\"procs\":0}]}]}",
	  "nodes[0].jobs[0].procs", "between 1" },
	{ "{\"nodes\":[{\"name\":\"a\",\"ts\":1,\"cpu\":1,\"memory_mb\":1,"
	  "\"jobs\":[{\"name\":\"j;x\",\"procs\":1}]}]}",
	  "nodes[0].jobs[0].name", "letters" },
};

START_TEST(test_cluster_bad)
{
	const struct bad_case *c = &bad_reports[_i];
	struct rv_cluster_report r;
	struct rv_err err = { 0 };
	int rc = report_parse(c->doc, &r, &err);
	ck_assert_msg(rc == -EINVAL, "case %d: rc %d for %s", _i, rc, c->doc);
	ck_assert_msg(strcmp(err.field, c->field) == 0, "case %d: field \"%s\", want \"%s\" (%s)",
		      _i, err.field, c->field, err.msg);
	ck_assert_msg(strstr(err.msg, c->msg) != NULL, "case %d: msg \"%s\" lacks \"%s\"", _i,
		      err.msg, c->msg);
	ck_assert_ptr_null(r.nodes);
	ck_assert_int_eq(r.n, 0);
}
END_TEST

START_TEST(test_cluster_limits)
{
	/* a 127-character name fits, 128 does not */
	char *name = repeat('n', 128);
	struct rv_buf b = { 0 };
	name[127] = '\0';
	rv_buf_printf(&b, "{\"nodes\":[{\"name\":\"%s\",\"ts\":1,\"cpu\":1,\"memory_mb\":1}]}",
		      name);
	struct rv_cluster_report r;
	struct rv_err err = { 0 };
	ck_assert_int_eq(report_parse(b.data, &r, &err), 0);
	rv_cluster_report_release(&r);
	rv_buf_release(&b);
	name[127] = 'n';
	rv_buf_printf(&b, "{\"nodes\":[{\"name\":\"%s\",\"ts\":1,\"cpu\":1,\"memory_mb\":1}]}",
		      name);
	ck_assert_int_eq(report_parse(b.data, &r, &err), -EINVAL);
	ck_assert_str_eq(err.field, "nodes[0].name");
	rv_buf_release(&b);
	free(name);

	rv_buf_printf(&b, "{\"nodes\":[");
	for (int i = 0; i <= RV_MAX_CLUSTER_NODES; i++)
		rv_buf_printf(&b, "%s{\"name\":\"n%d\",\"ts\":1,\"cpu\":1,\"memory_mb\":1}",
			      i ? "," : "", i);
	rv_buf_printf(&b, "]}");
	ck_assert_int_eq(report_parse(b.data, &r, &err), -E2BIG);
	ck_assert_str_eq(err.field, "nodes");
	ck_assert_ptr_null(r.nodes);
	rv_buf_release(&b);
}
END_TEST

/* ---- hostile documents end to end ---- */

START_TEST(test_hostile_text)
{
	/* What a REST handler sees: text that never becomes a tree. */
	struct rv_err err = { 0 };
	size_t n = 10000;
	char *deep = repeat('[', n);
	ck_assert_ptr_null(rv_json_parse(deep, n, &err));
	ck_assert_int_eq(err.code, -EINVAL);
	free(deep);

	const char *malformed = "{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"j\"},}";
	ck_assert_ptr_null(rv_json_parse(malformed, strlen(malformed), &err));
	ck_assert_msg(strstr(err.msg, "at byte 45"), "msg: %s", err.msg);

	/* Deep nesting inside an ignored key of a valid spec is still refused. */
	struct rv_buf b = { 0 };
	rv_buf_printf(&b, "{\"kind\":\"ElasticJob\",\"x\":");
	for (int i = 0; i < 100; i++)
		rv_buf_printf(&b, "[");
	for (int i = 0; i < 100; i++)
		rv_buf_printf(&b, "]");
	rv_buf_printf(&b, "}");
	ck_assert_ptr_null(rv_json_parse(b.data, b.len, &err));
	ck_assert_msg(strstr(err.msg, "nesting"), "msg: %s", err.msg);
	rv_buf_release(&b);
}
END_TEST

/* ---- out of memory in to_json ---- */

static long alloc_budget;

static void *failing_malloc(size_t n)
{
	if (alloc_budget-- <= 0)
		return NULL;
	return malloc(n);
}

/* Run fn under a cJSON allocator that fails after k allocations, for every k
 * until it succeeds: each failure must give NULL and leak nothing. */
static void oom_sweep(cJSON *(*fn)(const void *), const void *arg)
{
	cJSON_Hooks hooks = { failing_malloc, free };
	bool done = false;
	for (long k = 0; !done && k < 100000; k++) {
		alloc_budget = k;
		cJSON_InitHooks(&hooks);
		cJSON *j = fn(arg);
		cJSON_InitHooks(NULL);
		done = j != NULL;
		cJSON_Delete(j);
	}
	ck_assert_msg(done, "to_json never succeeded");
}

static cJSON *spec_fn(const void *p)
{
	return rv_job_spec_to_json(p);
}

static cJSON *batch_fn(const void *p)
{
	return rv_metrics_batch_to_json(p);
}

static cJSON *event_fn(const void *p)
{
	return rv_event_to_json(p);
}

static cJSON *plan_fn(const void *p)
{
	return rv_scale_plan_to_json(p);
}

static cJSON *report_fn(const void *p)
{
	return rv_cluster_report_to_json(p);
}

START_TEST(test_to_json_out_of_memory)
{
	struct rv_err err = { 0 };
	struct rv_job_spec spec;
	ck_assert_int_eq(spec_parse(design_job, &spec, &err), 0);
	oom_sweep(spec_fn, &spec);
	rv_job_spec_release(&spec);

	struct rv_metrics_batch b;
	ck_assert_int_eq(batch_parse("{\"samples\":[" SPEED_OK "," NODE_OK "," MODEL_OK "]}", &b,
				     &err),
			 0);
	oom_sweep(batch_fn, &b);
	rv_metrics_batch_release(&b);

	struct rv_event ev;
	ck_assert_int_eq(event_parse("{\"type\":\"node_oom\",\"ts\":1,\"node\":\"w-1\"}", &ev,
				     &err),
			 0);
	oom_sweep(event_fn, &ev);

	static struct rv_scale_plan plan;
	ck_assert_int_eq(plan_parse(design_plan, &plan, &err), 0);
	oom_sweep(plan_fn, &plan);

	struct rv_cluster_report r;
	ck_assert_int_eq(report_parse("{\"nodes\":[{\"name\":\"a\",\"ts\":1,\"cpu\":1,"
				      "\"memory_mb\":1},{\"name\":\"b\",\"ts\":1,\"cpu\":1,"
				      "\"memory_mb\":1}]}",
				      &r, &err),
			 0);
	oom_sweep(report_fn, &r);
	rv_cluster_report_release(&r);
}
END_TEST

/* ---- field tables: rv_wire_messages() against the code, both ways ---- */

enum tkind { T_JOB, T_BATCH, T_EVENT, T_PLAN, T_CLUSTER };

static const char *const table_docs[] = {
	[T_JOB] = "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		  "\"metadata\":{\"name\":\"j\",\"namespace\":\"ns\",\"labels\":{\"user\":\"u\"}},"
		  "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\",\"optimizeMode\":"
		  "\"cluster\","
		  "\"brainService\":\"http://"
		  "brain:8080\",\"replicaSpecs\":{\"worker\":{\"replicas\":2,"
		  "\"minReplicas\":1,\"maxReplicas\":4,\"restartCount\":3,\"priority\":\"high\","
		  "\"stateHandover\":\"flashCheckpoint\","
		  "\"resources\":{\"cpu\":4,\"memory\":\"8Gi\",\"gpu\":0},\"command\":[\"python3\","
		  "\"x.py\"],\"template\":{\"spec\":{\"containers\":[{\"name\":\"main\"}]}}}},"
		  "\"datasets\":[{\"name\":\"train\",\"size\":100,\"shardSize\":10,\"epochs\":2,"
		  "\"shuffle\":true},{\"name\":\"clicks\",\"streaming\":true,\"shardSize\":50,"
		  "\"partitions\":[{\"name\":\"p0\",\"start_offset\":5,\"end_offset\":90}]}],"
		  "\"model\":{\"parameters\":1000,\"batchSize\":32}}}",
	[T_BATCH] = "{\"batch_id\":\"b-1\",\"samples\":[{\"kind\":\"speed\",\"ts\":1,\"speed\":1,"
		    "\"step\":1,"
		    "\"workers\":1,\"ps\":0},{\"kind\":\"node\",\"ts\":1,\"node\":\"w-0\",\"role\":"
		    "\"worker\","
		    "\"rank\":0,\"cpu\":1,\"memory_mb\":1,\"cpu_limit\":2,\"memory_limit_mb\":2,"
		    "\"step_time\":0.5,\"compute_time\":0.25,\"nr_periods\":4,\"nr_throttled\":0,"
		    "\"throttled_usec\":7},"
		    "{\"kind\":\"model\",\"ts\":1,\"parameters\":10,\"batch_"
		    "size\":2,"
		    "\"flops\":1e9},{\"kind\":\"progress\",\"ts\":1,\"dataset\":\"train\","
		    "\"epoch\":1,\"samples_total\":200,\"samples_done\":120,\"shards_total\":20,"
		    "\"shards_done\":12,\"shards_doing\":2,\"finished\":false}]}",
	[T_EVENT] = "{\"event_id\":\"e-1\",\"type\":\"node_oom\",\"ts\":1,\"node\":\"w-0\","
		    "\"role\":\"worker\","
		    "\"rank\":0,\"exit_code\":137,\"reason\":\"x\",\"memory_mb\":1,\"peak_memory_"
		    "mb\":2,"
		    "\"plan_id\":3,\"not_applied\":\"migrate ps-0: x\"}",
	[T_PLAN] = "{\"job\":\"j-1\",\"id\":3,\"stage\":\"running\",\"algorithm\":\"a\",\"reason\":"
		   "\"r\","
		   "\"predicted_speed\":1.5,\"based_on_ts\":10,\"groups\":{\"worker\":{\"count\":2,"
		   "\"resource\":{\"cpu\":1,\"memory_mb\":2,\"gpu\":0}}},\"launch\":[{\"node\":\"w-"
		   "0\","
		   "\"role\":\"worker\",\"resource\":{\"cpu\":1,\"memory_mb\":2,\"gpu\":0}}],"
		   "\"remove\":[{\"node\":\"w-1\",\"role\":\"worker\"}],\"migrate\":[{\"node\":"
		   "\"ps-0\","
		   "\"role\":\"ps\",\"resource\":{\"cpu\":3}}]}",
	[T_CLUSTER] =
		"{\"report_id\":\"r-1\",\"nodes\":[{\"name\":\"h\",\"ts\":1,\"cpu\":4,"
		"\"memory_mb\":8,\"gpu\":0,\"cpu_used\":1,\"memory_used_mb\":2,\"ready\":true,"
		"\"cpu_pressure\":1.5,\"memory_pressure\":0,\"io_pressure\":2,"
		"\"gpu_memory_used_mb\":0,\"gpu_util_pct\":55.5,\"jobs\":[{\"name\":\"train\","
		"\"procs\":2,"
		"\"cpu_used\":0.5,\"memory_used_mb\":100,\"throttled\":3}]}]}",
};

/* Where each message sits in its kind's document ("" the root). */
static const struct {
	const char *name;
	enum tkind kind;
	const char *at[4];
} table_cases[] = {
	{ "ElasticJob", T_JOB, { "" } },
	{ "JobMetadata", T_JOB, { "metadata" } },
	{ "JobSpec", T_JOB, { "spec" } },
	{ "ReplicaSpec", T_JOB, { "spec.replicaSpecs.worker" } },
	{ "Resources", T_JOB, { "spec.replicaSpecs.worker.resources" } },
	{ "Dataset", T_JOB, { "spec.datasets.0", "spec.datasets.1" } },
	{ "Partition", T_JOB, { "spec.datasets.1.partitions.0" } },
	{ "Model", T_JOB, { "spec.model" } },
	{ "MetricsBatch", T_BATCH, { "" } },
	{ "Sample", T_BATCH, { "samples.0", "samples.1", "samples.2", "samples.3" } },
	{ "Event", T_EVENT, { "" } },
	{ "ScalePlan", T_PLAN, { "" } },
	{ "PlanGroup", T_PLAN, { "groups.worker" } },
	{ "PlanNode", T_PLAN, { "launch.0", "remove.0", "migrate.0" } },
	{ "PlanResource", T_PLAN, { "groups.worker.resource", "launch.0.resource" } },
	{ "ClusterReport", T_CLUSTER, { "" } },
	{ "ClusterNode", T_CLUSTER, { "nodes.0" } },
	{ "ClusterJob", T_CLUSTER, { "nodes.0.jobs.0" } },
};

/* Parse a document of kind k; when back is not NULL, also its to_json. */
static int table_parse(enum tkind k, const cJSON *doc, cJSON **back, struct rv_err *err)
{
	int rc = -EINVAL;
	cJSON *out = NULL;
	switch (k) {
	case T_JOB: {
		struct rv_job_spec v;
		if ((rc = rv_job_spec_from_json(doc, &v, err)) == 0 && back)
			out = rv_job_spec_to_json(&v);
		rv_job_spec_release(&v);
		break;
	}
	case T_BATCH: {
		struct rv_metrics_batch v;
		if ((rc = rv_metrics_batch_from_json(doc, &v, err)) == 0 && back)
			out = rv_metrics_batch_to_json(&v);
		rv_metrics_batch_release(&v);
		break;
	}
	case T_EVENT: {
		struct rv_event v;
		if ((rc = rv_event_from_json(doc, &v, err)) == 0 && back)
			out = rv_event_to_json(&v);
		break;
	}
	case T_PLAN: {
		static struct rv_scale_plan v;
		if ((rc = rv_scale_plan_from_json(doc, &v, err)) == 0 && back)
			out = rv_scale_plan_to_json(&v);
		break;
	}
	case T_CLUSTER: {
		struct rv_cluster_report v;
		if ((rc = rv_cluster_report_from_json(doc, &v, err)) == 0 && back)
			out = rv_cluster_report_to_json(&v);
		rv_cluster_report_release(&v);
		break;
	}
	}
	if (back)
		*back = out;
	return rc;
}

/* The item at a dotted path of a document the test may change. */
static cJSON *table_at(cJSON *root, const char *path)
{
	return (cJSON *)rv_test_json_at(root, path);
}

static int parse_from(const void *kind, const cJSON *doc, struct rv_err *err)
{
	return table_parse(*(const enum tkind *)kind, doc, NULL, err);
}

/* Table -> code: every field is read (a wrong type is rejected naming it), a
 * required one is required and an optional one is not (unless the table says
 * when it is). */
START_TEST(test_table_fields_are_parsed)
{
	int n;
	(void)rv_wire_messages(&n);
	ck_assert_int_eq(n, (int)(sizeof(table_cases) / sizeof(table_cases[0])));
	for (size_t c = 0; c < sizeof(table_cases) / sizeof(table_cases[0]); c++) {
		const struct rv_wire_message *msg = rv_wire_message(table_cases[c].name);
		ck_assert_msg(msg, "no table for %s", table_cases[c].name);
		enum tkind k = table_cases[c].kind;
		for (int f = 0; f < msg->nfields; f++) {
			const struct rv_wire_field *fd = &msg->fields[f];
			const char *at = NULL;
			cJSON *doc = cJSON_Parse(table_docs[k]);
			for (int i = 0; i < 4 && table_cases[c].at[i] && !at; i++)
				if (cJSON_GetObjectItemCaseSensitive(table_at(doc,
									      table_cases[c].at[i]),
								     fd->name))
					at = table_cases[c].at[i];
			ck_assert_msg(at, "%s.%s: not in the test document", msg->name, fd->name);
			struct rv_err err = { 0 };
			ck_assert_msg(table_parse(k, doc, NULL, &err) == 0, "%s", err.msg);
			rv_test_wire_field_is_parsed(msg, fd, doc, table_at(doc, at), parse_from,
						     &k);
			cJSON_Delete(doc);
		}
	}
}
END_TEST

/* One descriptor per message: every row of every table, the brain's and
 * the master's, is what the codec reads and writes, none a description
 * beside code of its own. */
START_TEST(test_tables_are_the_codec)
{
	int n[2];
	const struct rv_wire_message *all[2] = { rv_wire_messages(&n[0]),
						 rv_wire_master_messages(&n[1]) };
	for (int a = 0; a < 2; a++)
		for (int i = 0; i < n[a]; i++)
			for (int f = 0; f < all[a][i].nfields; f++)
				ck_assert_msg(all[a][i].fields[f].kind != RV_WIRE_DOC,
					      "%s.%s is described only", all[a][i].name,
					      all[a][i].fields[f].name);
}
END_TEST

/* Code -> table: to_json writes every field of the table and none besides. */
START_TEST(test_table_fields_are_written)
{
	for (size_t c = 0; c < sizeof(table_cases) / sizeof(table_cases[0]); c++) {
		const struct rv_wire_message *msg = rv_wire_message(table_cases[c].name);
		ck_assert_ptr_nonnull(msg);
		cJSON *doc = cJSON_Parse(table_docs[table_cases[c].kind]);
		cJSON *back = NULL;
		struct rv_err err = { 0 };
		ck_assert_int_eq(table_parse(table_cases[c].kind, doc, &back, &err), 0);
		ck_assert_ptr_nonnull(back);
		bool seen[64] = { false };
		ck_assert_int_le(msg->nfields, 64);
		for (int i = 0; i < 4 && table_cases[c].at[i]; i++) {
			const cJSON *o = table_at(back, table_cases[c].at[i]);
			ck_assert_msg(cJSON_IsObject(o), "%s: no object at %s", msg->name,
				      table_cases[c].at[i]);
			rv_test_wire_keys_in_table(msg, o, seen);
		}
		rv_test_wire_all_written(msg, seen);
		cJSON_Delete(back);
		cJSON_Delete(doc);
	}
}
END_TEST

/* The client ids: optional, checked, written back. */
START_TEST(test_ids)
{
	struct rv_err err = { 0 };
	cJSON *doc = cJSON_Parse("{\"batch_id\":\"a.b_c-9\",\"samples\":[{\"kind\":\"speed\","
				 "\"ts\":1,\"speed\":1}]}");
	struct rv_metrics_batch b;
	ck_assert_int_eq(rv_metrics_batch_from_json(doc, &b, &err), 0);
	ck_assert_str_eq(b.batch_id, "a.b_c-9");
	rv_metrics_batch_release(&b);
	cJSON_ReplaceItemInObjectCaseSensitive(doc, "batch_id", cJSON_CreateString("a b"));
	ck_assert_int_eq(rv_metrics_batch_from_json(doc, &b, &err), -EINVAL);
	ck_assert_str_eq(err.field, "batch_id");
	char long_id[RV_ID_MAX + 1];
	memset(long_id, 'x', RV_ID_MAX);
	long_id[RV_ID_MAX] = '\0';
	cJSON_ReplaceItemInObjectCaseSensitive(doc, "batch_id", cJSON_CreateString(long_id));
	ck_assert_int_eq(rv_metrics_batch_from_json(doc, &b, &err), -EINVAL);
	ck_assert_str_eq(err.field, "batch_id");
	long_id[RV_ID_MAX - 1] = '\0'; /* 64 characters: the most allowed */
	cJSON_ReplaceItemInObjectCaseSensitive(doc, "batch_id", cJSON_CreateString(long_id));
	ck_assert_int_eq(rv_metrics_batch_from_json(doc, &b, &err), 0);
	rv_metrics_batch_release(&b);
	/* a failure later in the batch leaves the output released, id included */
	cJSON *samples = cJSON_DetachItemFromObjectCaseSensitive(doc, "samples");
	ck_assert_int_eq(rv_metrics_batch_from_json(doc, &b, &err), -EINVAL);
	ck_assert_str_eq(b.batch_id, "");
	cJSON_AddItemToObject(doc, "samples", samples);
	cJSON_DeleteItemFromObjectCaseSensitive(doc, "batch_id");
	ck_assert_int_eq(rv_metrics_batch_from_json(doc, &b, &err), 0);
	ck_assert_str_eq(b.batch_id, "");
	cJSON *back = rv_metrics_batch_to_json(&b);
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(back, "batch_id"));
	cJSON_Delete(back);
	rv_metrics_batch_release(&b);
	cJSON_Delete(doc);

	struct rv_event ev;
	doc = cJSON_Parse("{\"event_id\":\"\",\"type\":\"job_finished\",\"ts\":1}");
	ck_assert_int_eq(rv_event_from_json(doc, &ev, &err), -EINVAL);
	ck_assert_str_eq(err.field, "event_id");
	cJSON_Delete(doc);
}
END_TEST

static Suite *wire_suite(void)
{
	TCase *tc_spec = RV_TEST_TCASE("spec", 20, test_enum_names, test_spec_design_example,
				       test_spec_defaults, test_spec_resource_forms,
				       test_spec_round_trip, test_spec_template_resources,
				       test_spec_template_bad, test_spec_to_json_shape,
				       test_spec_release_on_late_error, test_spec_duplicate_role,
				       test_spec_labels_verbatim, test_spec_huge_strings,
				       test_spec_limits);
	tcase_add_loop_test(tc_spec, test_spec_bad, 0, (int)RV_ARRAY_SIZE(bad_specs));
	TCase *tc_metrics =
		RV_TEST_TCASE("metrics", 30, test_metrics_valid, test_metrics_round_trip,
			      test_metrics_bad_sample_in_middle, test_metrics_batch_size);
	tcase_add_loop_test(tc_metrics, test_metrics_bad, 0, (int)RV_ARRAY_SIZE(bad_batches));
	TCase *tc_event = RV_TEST_TCASE("event", 20, test_event_valid, test_event_long_reason);
	tcase_add_loop_test(tc_event, test_event_bad, 0, (int)RV_ARRAY_SIZE(bad_events));
	TCase *tc_plan = RV_TEST_TCASE("plan", 20, test_plan_design_example,
				       test_plan_round_trip_and_shape, test_plan_too_many_nodes);
	tcase_add_loop_test(tc_plan, test_plan_bad, 0, (int)RV_ARRAY_SIZE(bad_plans));
	TCase *tc_cluster = RV_TEST_TCASE("cluster", 30, test_cluster_valid_round_trip,
					  test_cluster_limits, test_hostile_text,
					  test_to_json_out_of_memory);
	tcase_add_loop_test(tc_cluster, test_cluster_bad, 0, (int)RV_ARRAY_SIZE(bad_reports));
	TCase *tc_tables = RV_TEST_TCASE("tables", 20, test_table_fields_are_parsed,
					 test_table_fields_are_written, test_tables_are_the_codec,
					 test_ids);
	return RV_TEST_SUITE("wire", tc_spec, tc_metrics, tc_event, tc_plan, tc_cluster, tc_tables);
}

RV_TEST_MAIN(wire_suite)
