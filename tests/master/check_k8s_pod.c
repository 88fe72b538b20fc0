/*
 * check_k8s_pod.c: the k8s backend's pure half (master/k8s_pod.c) and its
 * credentials (master/k8s_conf.c), without a server: a pod built from a
 * DLRover-style template keeps the template and carries Rover's labels,
 * env and the plan's resources, and keeps off the hosts it is told to
 * (a required node affinity merged into the template's); quantities; pod JSON as a kubelet reports
 * it mapped to node events, each once however often it is seen (a pod
 * deleted by someone else, or evicted, is a lost node, naming its node); an
 * Unschedulable pod fails after its wait naming the reason; a kubeconfig's
 * current context with base64 data and relative paths.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "k8s_conf.h"
#include "k8s_pod.h"
#include "testutil.h"

static const char tmpl[] =
	"{\"metadata\":{\"labels\":{\"app\":\"mnist\"},\"annotations\":{"
	"\"scheduling.k8s.io/group-name\":\"pg-1\"}},\"spec\":{\"schedulerName\":\"volcano\","
	"\"restartPolicy\":\"OnFailure\",\"containers\":[{\"name\":\"main\",\"image\":\"torch:1\","
	"\"command\":[\"/bin/bash\",\"-c\",\"rover-run train.py\"],\"env\":[{\"name\":"
	"\"ROVER_NODE_RANK\",\"value\":\"99\"},{\"name\":\"KEEP\",\"value\":\"1\"}],"
	"\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"3Gi\"}}}],"
	"\"volumes\":[{\"name\":\"data\",\"emptyDir\":{}}]}}";

/* The string at a dotted path; "\\." is a dot inside a key (label keys). */
static const char *str_at(const cJSON *j, const char *path)
{
	char key[128];
	const cJSON *cur = j;
	while (cur && *path) {
		size_t k = 0;
		for (; *path && *path != '.' && k < sizeof(key) - 1; path++)
			key[k++] = *path == '\\' && path[1] == '.' ? *++path : *path;
		key[k] = 0;
		if (*path == '.')
			path++;
		cur = cJSON_IsArray(cur) ? cJSON_GetArrayItem(cur, atoi(key))
					 : cJSON_GetObjectItemCaseSensitive(cur, key);
	}
	return cur ? cJSON_GetStringValue(cur) : NULL;
}

START_TEST(test_pod_from_template)
{
	const char *env[] = { "ROVER_NODE_RANK=1", "ROVER_MASTER_ADDR=10.0.0.5:7070", NULL };
	struct sched_node_spec sp = { .name = "worker-1.2",
				      .role = "worker",
				      .rank = 1,
				      .res = { .cpu = 1.5, .memory_mb = 4096 },
				      .env = env };
	struct k8s_pod_args a = { .job = "mnist",
				  .namespace_ = "team",
				  .template_json = tmpl,
				  .image = "rover-worker",
				  .scheduler_name = "default-scheduler",
				  .spec = &sp };
	struct rv_err err = { 0 };
	cJSON *pod = k8s_pod_build(&a, &err);
	ck_assert_msg(pod, "%s", err.msg);
	ck_assert_str_eq(str_at(pod, "kind"), "Pod");
	ck_assert_str_eq(str_at(pod, "metadata.name"), "mnist-worker-1.2");
	ck_assert_str_eq(str_at(pod, "metadata.namespace"), "team");
	ck_assert_str_eq(str_at(pod, "metadata.labels.app"), "mnist");
	ck_assert_str_eq(str_at(pod, "metadata.labels.rover\\.dev/rank"), "1");
	ck_assert_str_eq(str_at(pod, "metadata.labels.rover\\.dev/job"), "mnist");
	ck_assert_str_eq(str_at(pod, "metadata.labels.rover\\.dev/instance"), "worker-1.2");
	ck_assert_str_eq(str_at(pod, "metadata.annotations.scheduling\\.k8s\\.io/group-name"),
			 "pg-1");
	/* the template's scheduler wins over the master's default; Never: the
	 * master relaunches */
	ck_assert_str_eq(str_at(pod, "spec.schedulerName"), "volcano");
	ck_assert_str_eq(str_at(pod, "spec.restartPolicy"), "Never");
	ck_assert_str_eq(str_at(pod, "spec.volumes.0.name"), "data");
	ck_assert_str_eq(str_at(pod, "spec.containers.0.image"), "torch:1");
	ck_assert_str_eq(str_at(pod, "spec.containers.0.command.2"), "rover-run train.py");
	ck_assert_str_eq(str_at(pod, "spec.containers.0.resources.requests.cpu"), "1500m");
	ck_assert_str_eq(str_at(pod, "spec.containers.0.resources.limits.memory"), "4096Mi");
	/* Rover's env replaces the template's variable of the same name */
	const cJSON *envs = cJSON_GetObjectItem(
		cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"),
						       "containers"),
				   0),
		"env");
	int rank_vars = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, envs)
	{
		const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(it, "name"));
		const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(it, "value"));
		if (!strcmp(n, "ROVER_NODE_RANK")) {
			rank_vars++;
			ck_assert_str_eq(v, "1");
		}
	}
	ck_assert_int_eq(rank_vars, 1);
	ck_assert_int_eq(cJSON_GetArraySize((cJSON *)envs), 3);
	ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "affinity"));
	/* what the backend reads back of it */
	struct k8s_pod_state st;
	ck_assert_int_eq(k8s_pod_parse(pod, &st), 0);
	ck_assert_str_eq(st.instance, "worker-1.2");
	ck_assert_int_eq(st.rank, 1);
	ck_assert_str_eq(st.container, "main");
	ck_assert_int_eq(st.memory_limit_mb, 4096);
	ck_assert(!st.running && !st.ended);
	cJSON_Delete(pod);
}
END_TEST

/* The command form: no template, the node's argv in the configured image. */
START_TEST(test_pod_from_command)
{
	const char *argv[] = { "rover-run", "--nnodes", "2", "train.py", NULL };
	struct sched_node_spec sp = { .name = "ps-0",
				      .role = "ps",
				      .rank = 0,
				      .res = { .cpu = 2, .memory_mb = 1024, .gpu = 1 },
				      .argv = argv };
	struct k8s_pod_args a = { .job = "j",
				  .namespace_ = "default",
				  .image = "img:2",
				  .scheduler_name = "volcano",
				  .spec = &sp };
	struct rv_err err = { 0 };
	cJSON *pod = k8s_pod_build(&a, &err);
	ck_assert_msg(pod, "%s", err.msg);
	ck_assert_str_eq(str_at(pod, "spec.containers.0.image"), "img:2");
	ck_assert_str_eq(str_at(pod, "spec.containers.0.command.3"), "train.py");
	ck_assert_str_eq(str_at(pod, "spec.containers.0.resources.limits.cpu"), "2");
	ck_assert_str_eq(str_at(pod, "spec.containers.0.resources.limits.nvidia\\.com/gpu"), "1");
	ck_assert_str_eq(str_at(pod, "spec.schedulerName"), "volcano");
	cJSON_Delete(pod);
	/* a template that is no object, and a name too long for a pod */
	a.template_json = "[1]";
	ck_assert_ptr_null(k8s_pod_build(&a, &err));
	ck_assert_int_eq(err.code, -EINVAL);
	char longjob[300];
	memset(longjob, 'a', sizeof(longjob) - 1);
	longjob[sizeof(longjob) - 1] = 0;
	a.template_json = NULL;
	a.job = longjob;
	ck_assert_ptr_null(k8s_pod_build(&a, &err));
}
END_TEST

/* Hosts to keep off: a required "kubernetes.io/hostname NotIn" added to
 * each of the template's own node selector terms, which stay. */
START_TEST(test_pod_avoids_hosts)
{
	static const char aff[] =
		"{\"spec\":{\"affinity\":{\"nodeAffinity\":{"
		"\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":["
		"{\"matchExpressions\":[{\"key\":\"gpu\",\"operator\":\"In\",\"values\":[\"a100\"]}"
		"]},"
		"{\"matchExpressions\":[{\"key\":\"gpu\",\"operator\":\"In\",\"values\":[\"h100\"]}"
		"]}"
		"]}}},\"containers\":[{\"name\":\"main\",\"image\":\"x\"}]}}";
	const char *avoid[] = { "node-1", "node-4", NULL };
	struct sched_node_spec sp = { .name = "worker-0.1", .role = "worker", .avoid = avoid };
	struct k8s_pod_args a = { .job = "j", .namespace_ = "d", .template_json = aff, .spec = &sp };
	struct rv_err err = { 0 };
	cJSON *pod = k8s_pod_build(&a, &err);
	ck_assert_msg(pod, "%s", err.msg);
	const char *base =
		"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
		".nodeSelectorTerms";
	char p[300];
	for (int t = 0; t < 2; t++) {
		snprintf(p, sizeof(p), "%s.%d.matchExpressions.0.values.0", base, t);
		ck_assert_str_eq(str_at(pod, p), t ? "h100" : "a100");
		snprintf(p, sizeof(p), "%s.%d.matchExpressions.1.key", base, t);
		ck_assert_str_eq(str_at(pod, p), "kubernetes.io/hostname");
		snprintf(p, sizeof(p), "%s.%d.matchExpressions.1.operator", base, t);
		ck_assert_str_eq(str_at(pod, p), "NotIn");
		snprintf(p, sizeof(p), "%s.%d.matchExpressions.1.values.1", base, t);
		ck_assert_str_eq(str_at(pod, p), "node-4");
	}
	cJSON_Delete(pod);
	/* no affinity of its own: one term */
	a.template_json = NULL;
	pod = k8s_pod_build(&a, &err);
	ck_assert_msg(pod, "%s", err.msg);
	snprintf(p, sizeof(p), "%s.0.matchExpressions.0.values.0", base);
	ck_assert_str_eq(str_at(pod, p), "node-1");
	snprintf(p, sizeof(p), "%s.1.matchExpressions.0.key", base);
	ck_assert_ptr_null(str_at(pod, p));
	cJSON_Delete(pod);
}
END_TEST

START_TEST(test_quantities)
{
	char b[32];
	k8s_pod_cpu_quantity(b, sizeof(b), 2);
	ck_assert_str_eq(b, "2");
	k8s_pod_cpu_quantity(b, sizeof(b), 0.5);
	ck_assert_str_eq(b, "500m");
	k8s_pod_cpu_quantity(b, sizeof(b), 0.1 + 0.2);
	ck_assert_str_eq(b, "300m");
	k8s_pod_memory_quantity(b, sizeof(b), 3072);
	ck_assert_str_eq(b, "3072Mi");
}
END_TEST

/* A pod as a kubelet reports it, in phases. */
static struct k8s_pod_state pod_state(const char *phase, const char *cstate, const char *extra)
{
	char doc[2048];
	snprintf(doc, sizeof(doc),
		 "{\"metadata\":{\"name\":\"j-worker-0\",\"labels\":{\"rover.dev/instance\":"
		 "\"worker-0\",\"rover.dev/role\":\"worker\",\"rover.dev/rank\":\"0\"}%s},"
		 "\"spec\":{\"nodeName\":\"node-1\",\"containers\":[{\"name\":\"main\","
		 "\"resources\":{\"limits\":{\"memory\":\"512Mi\"}}}]},"
		 "\"status\":{\"phase\":\"%s\"%s%s%s}}",
		 extra, phase,
		 cstate ? ",\"containerStatuses\":[{\"name\":\"main\",\"state\":" : "",
		 cstate ? cstate : "", cstate ? "}]" : "");
	cJSON *j = cJSON_Parse(doc);
	ck_assert_msg(j, "bad test doc %s", doc);
	struct k8s_pod_state st;
	ck_assert_int_eq(k8s_pod_parse(j, &st), 0);
	cJSON_Delete(j);
	return st;
}

START_TEST(test_events_from_pods)
{
	struct k8s_pod_track t = { 0 };
	struct sched_event ev[2];
	struct k8s_pod_state pending = pod_state("Pending", NULL, "");
	ck_assert_int_eq(k8s_pod_events(&t, &pending, "worker-0", 1000, 0, ev), 0);
	struct k8s_pod_state run = pod_state("Running", "{\"running\":{}}", "");
	ck_assert_int_eq(k8s_pod_events(&t, &run, "worker-0", 2000, 0, ev), 1);
	ck_assert_int_eq(ev[0].type, SCHED_EV_STARTED);
	ck_assert_str_eq(ev[0].host, "node-1");
	ck_assert_int_eq(ev[0].rank, 0);
	/* the same state again (a re-list, a re-sent change): nothing */
	ck_assert_int_eq(k8s_pod_events(&t, &run, "worker-0", 3000, 0, ev), 0);
	struct k8s_pod_state done =
		pod_state("Failed", "{\"terminated\":{\"exitCode\":3,\"reason\":\"Error\"}}", "");
	ck_assert_int_eq(k8s_pod_events(&t, &done, "worker-0", 4000, 0, ev), 1);
	ck_assert_int_eq(ev[0].type, SCHED_EV_EXITED);
	ck_assert_int_eq(ev[0].exit_code, 3);
	ck_assert_int_eq(ev[0].signal, 0);
	ck_assert_int_eq(k8s_pod_events(&t, &done, "worker-0", 5000, 0, ev), 0);
	ck_assert_int_eq(k8s_pod_events(&t, NULL, "worker-0", 5000, 0, ev), 0);

	/* OOMKilled: OOM with the limit; seen first ended: STARTED first */
	memset(&t, 0, sizeof(t));
	struct k8s_pod_state oom =
		pod_state("Failed", "{\"terminated\":{\"exitCode\":137,\"reason\":\"OOMKilled\"}}",
			  "");
	ck_assert_int_eq(k8s_pod_events(&t, &oom, "worker-0", 1000, 0, ev), 2);
	ck_assert_int_eq(ev[0].type, SCHED_EV_STARTED);
	ck_assert_int_eq(ev[1].type, SCHED_EV_OOM);
	ck_assert_int_eq(ev[1].memory_limit_mb, 512);
	ck_assert_int_eq(ev[1].signal, SIGKILL);

	/* deleted under us (kubectl delete): SIGTERM's 143, then gone */
	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(k8s_pod_events(&t, &run, "worker-0", 1000, 0, ev), 1);
	struct k8s_pod_state term =
		pod_state("Running", "{\"terminated\":{\"exitCode\":143,\"reason\":\"Error\"}}",
			  ",\"deletionTimestamp\":\"2026-11-29T10:00:00Z\"");
	ck_assert(term.deleting);
	ck_assert_int_eq(k8s_pod_events(&t, &term, "worker-0", 2000, 0, ev), 1);
	ck_assert_int_eq(ev[0].type, SCHED_EV_EXITED);
	ck_assert_int_eq(ev[0].signal, SIGTERM);
	ck_assert(!ev[0].removed);
	/* not by the master: a lost node (no restart spent), naming its node */
	ck_assert(ev[0].lost);
	ck_assert_str_eq(ev[0].host, "node-1");
	/* gone at once, unseen terminating: lost too, on the node last seen */
	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(k8s_pod_events(&t, &run, "worker-0", 1000, 0, ev), 1);
	ck_assert_int_eq(k8s_pod_events(&t, NULL, "worker-0", 2000, 0, ev), 1);
	ck_assert(ev[0].lost && !ev[0].removed);
	ck_assert_str_eq(ev[0].host, "node-1");
	/* gone without a last word: killed; removed when the master asked */
	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(k8s_pod_events(&t, &run, "worker-0", 1000, 0, ev), 1);
	t.removing = true;
	ck_assert_int_eq(k8s_pod_events(&t, NULL, "worker-0", 2000, 0, ev), 1);
	ck_assert_int_eq(ev[0].type, SCHED_EV_EXITED);
	ck_assert(ev[0].removed && !ev[0].lost);
	ck_assert_int_eq(ev[0].signal, SIGKILL);
	/* never ran (an image that cannot be pulled, evicted while pending) */
	memset(&t, 0, sizeof(t));
	struct k8s_pod_state evicted = pod_state("Failed", NULL, "");
	ck_assert_int_eq(k8s_pod_events(&t, &evicted, "worker-0", 1000, 0, ev), 1);
	ck_assert_int_eq(ev[0].type, SCHED_EV_FAILED);
}
END_TEST

/* A pod whose status is status_json (the object after "status":). */
static struct k8s_pod_state pod_status(const char *status_json)
{
	char doc[2048];
	snprintf(doc, sizeof(doc),
		 "{\"metadata\":{\"name\":\"j-worker-0\",\"labels\":{\"rover.dev/instance\":"
		 "\"worker-0\",\"rover.dev/role\":\"worker\",\"rover.dev/rank\":\"0\"}},"
		 "\"spec\":{\"nodeName\":\"node-1\",\"containers\":[{\"name\":\"main\"}]},"
		 "\"status\":%s}",
		 status_json);
	cJSON *j = cJSON_Parse(doc);
	ck_assert_msg(j, "bad test doc %s", doc);
	struct k8s_pod_state st;
	ck_assert_int_eq(k8s_pod_parse(j, &st), 0);
	cJSON_Delete(j);
	return st;
}

/* Evicted pods are lost nodes, not crashes: no restart spent, the node
 * named (kept off), whatever exit code the kill left. */
START_TEST(test_evicted_is_lost)
{
	struct k8s_pod_track t = { 0 };
	struct sched_event ev[2];
	struct k8s_pod_state run = pod_state("Running", "{\"running\":{}}", "");
	/* the kubelet under memory pressure: Failed, reason Evicted, 137 */
	ck_assert_int_eq(k8s_pod_events(&t, &run, "worker-0", 1000, 0, ev), 1);
	struct k8s_pod_state ev1 = pod_status(
		"{\"phase\":\"Failed\",\"reason\":\"Evicted\",\"message\":\"The node was low "
		"on resource: memory.\",\"containerStatuses\":[{\"name\":\"main\",\"state\":{"
		"\"terminated\":{\"exitCode\":137,\"reason\":\"Error\"}}}]}");
	ck_assert(ev1.evicted);
	ck_assert_int_eq(k8s_pod_events(&t, &ev1, "worker-0", 2000, 0, ev), 1);
	ck_assert_int_eq(ev[0].type, SCHED_EV_EXITED);
	ck_assert(ev[0].lost && !ev[0].removed);
	ck_assert_str_eq(ev[0].host, "node-1");
	ck_assert_msg(strstr(ev[0].detail, "evicted") && strstr(ev[0].detail, "low on resource"),
		      "%s", ev[0].detail);
	/* a DisruptionTarget condition (preemption, the Eviction API, a
	 * taint) with the container ended by SIGTERM */
	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(k8s_pod_events(&t, &run, "worker-0", 1000, 0, ev), 1);
	struct k8s_pod_state ev2 =
		pod_status("{\"phase\":\"Failed\",\"conditions\":[{\"type\":\"DisruptionTarget\","
			   "\"status\":\"True\",\"reason\":\"PreemptionByScheduler\"}],"
			   "\"containerStatuses\":[{\"name\":\"main\",\"state\":{\"terminated\":{"
			   "\"exitCode\":143,\"reason\":\"Error\"}}}]}");
	ck_assert(ev2.evicted);
	ck_assert_int_eq(k8s_pod_events(&t, &ev2, "worker-0", 2000, 0, ev), 1);
	ck_assert_int_eq(ev[0].type, SCHED_EV_EXITED);
	ck_assert(ev[0].lost);
	/* evicted before it ever ran: relaunched as lost, not FAILED */
	memset(&t, 0, sizeof(t));
	struct k8s_pod_state ev3 = pod_status("{\"phase\":\"Failed\",\"reason\":\"Preempting\"}");
	ck_assert_int_eq(k8s_pod_events(&t, &ev3, "worker-0", 1000, 0, ev), 1);
	ck_assert_int_eq(ev[0].type, SCHED_EV_EXITED);
	ck_assert(ev[0].lost);
	/* a DisruptionTarget that is False is no eviction: a crash stays one */
	struct k8s_pod_state crash = pod_status(
		"{\"phase\":\"Failed\",\"conditions\":[{\"type\":\"DisruptionTarget\","
		"\"status\":\"False\"}],\"containerStatuses\":[{\"name\":\"main\",\"state\":"
		"{\"terminated\":{\"exitCode\":1,\"reason\":\"Error\"}}}]}");
	ck_assert(!crash.evicted);
	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(k8s_pod_events(&t, &run, "worker-0", 1000, 0, ev), 1);
	ck_assert_int_eq(k8s_pod_events(&t, &crash, "worker-0", 2000, 0, ev), 1);
	ck_assert(!ev[0].lost);
	ck_assert_int_eq(ev[0].exit_code, 1);
	/* evicted while the master removes it: removed, not lost */
	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(k8s_pod_events(&t, &run, "worker-0", 1000, 0, ev), 1);
	t.removing = true;
	ck_assert_int_eq(k8s_pod_events(&t, &ev1, "worker-0", 2000, 0, ev), 1);
	ck_assert(ev[0].removed && !ev[0].lost);
}
END_TEST

START_TEST(test_unschedulable_fails_after_wait)
{
	const char *cond = ",\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"False\","
			   "\"reason\":\"Unschedulable\",\"message\":\"0/2 nodes are available: 2 "
			   "Insufficient memory.\"}]";
	char doc[1024];
	snprintf(doc, sizeof(doc),
		 "{\"metadata\":{\"name\":\"j-worker-1\",\"labels\":{\"rover.dev/instance\":"
		 "\"worker-1\",\"rover.dev/rank\":\"1\"}},\"status\":{\"phase\":\"Pending\"%s}}",
		 cond);
	cJSON *j = cJSON_Parse(doc);
	struct k8s_pod_state st;
	ck_assert_int_eq(k8s_pod_parse(j, &st), 0);
	cJSON_Delete(j);
	ck_assert(st.unschedulable);
	struct k8s_pod_track t = { 0 };
	struct sched_event ev[2];
	ck_assert_int_eq(k8s_pod_events(&t, &st, "worker-1", 10000, 30000, ev), 0);
	ck_assert_int_eq(k8s_pod_events(&t, &st, "worker-1", 39999, 30000, ev), 0);
	ck_assert_int_eq(k8s_pod_events(&t, &st, "worker-1", 40000, 30000, ev), 1);
	ck_assert_int_eq(ev[0].type, SCHED_EV_FAILED);
	ck_assert_int_eq(ev[0].err, -ENOSPC);
	ck_assert_msg(strstr(ev[0].detail, "Unschedulable for 30 s") &&
			      strstr(ev[0].detail, "Insufficient memory"),
		      "%s", ev[0].detail);
	ck_assert_int_eq(k8s_pod_events(&t, &st, "worker-1", 50000, 30000, ev), 0);
	/* 0: wait forever */
	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(k8s_pod_events(&t, &st, "worker-1", 1, 0, ev), 0);
	ck_assert_int_eq(k8s_pod_events(&t, &st, "worker-1", 1 << 30, 0, ev), 0);
}
END_TEST

START_TEST(test_kubeconfig)
{
	char dir[] = "/tmp/rover-kcfg-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char path[256], tok[256];
	snprintf(path, sizeof(path), "%s/config", dir);
	snprintf(tok, sizeof(tok), "%s/token", dir);
	rv_test_write_file(tok, "tok-from-file\n");
	/* "UEVNIGRhdGE=" is "PEM data" */
	rv_test_write_file(
		path, "apiVersion: v1\nkind: Config\ncurrent-context: b\n"
		      "clusters:\n- name: one\n  cluster:\n    server: https://one:6443\n"
		      "- name: two\n  cluster:\n    server: http://127.0.0.1:8001/\n"
		      "    certificate-authority-data: UEVNIGRhdGE=\n"
		      "contexts:\n- name: a\n  context: {cluster: one, user: u1}\n"
		      "- name: b\n  context:\n    cluster: two\n    user: u2\n    namespace: team\n"
		      "users:\n- name: u1\n  user: {token: nope}\n"
		      "- name: u2\n  user:\n    tokenFile: token\n    client-key: keys/k.pem\n");
	struct rv_k8s_conf c;
	struct rv_err err = { 0 };
	ck_assert_msg(rv_k8s_conf_load(path, &c, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(c.server, "http://127.0.0.1:8001");
	ck_assert_str_eq(c.namespace_, "team");
	ck_assert_str_eq(c.token, "tok-from-file");
	ck_assert_int_eq(c.ca_len, 8);
	ck_assert_int_eq(memcmp(c.ca_pem, "PEM data", 8), 0);
	char want[300];
	snprintf(want, sizeof(want), "%s/keys/k.pem", dir);
	ck_assert_str_eq(c.key_file, want);
	rv_k8s_conf_release(&c);
	/* no current context: named */
	rv_test_write_file(path, "apiVersion: v1\nclusters: []\n");
	ck_assert_int_eq(rv_k8s_conf_load(path, &c, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "no current context"));
	unlink(tok);
	unlink(path);
	rmdir(dir);
}
END_TEST

RV_TEST_MAIN_TCASE("k8s_pod", "k8s_pod", 10, test_pod_from_template, test_pod_from_command,
		   test_pod_avoids_hosts, test_quantities, test_events_from_pods,
		   test_evicted_is_lost, test_unschedulable_fails_after_wait, test_kubeconfig)
