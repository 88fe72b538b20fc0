/*
 * check_sched_k8s.c: the k8s backend (master/sched_k8s.c) on its own
 * against the Kubernetes stand-in (tests/k8s/k8s-standin, started per
 * test): launch makes a pod with the role's template and Rover's labels,
 * its start and exit come back as events; remove deletes it (EXITED with
 * removed); resize changes a live pod's limits through pods/resize, or
 * answers -EOPNOTSUPP where the server has none; a second backend on the
 * same job (a restarted master) adopts a pod by name, gets ESRCH for one
 * that is gone and deletes the pod no node claimed; a server that is not
 * there is named in the error.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brainfix.h"
#include "k8sfix.h"
#include "parse.h"
#include "proc.h"
#include "sched_k8s.h"
#include "testutil.h"

static struct rv_proc standin;
static struct rv_test_brain api;
static char dir[64], kubeconfig[128];

static void standin_start(const char *extra)
{
	snprintf(dir, sizeof(dir), "/tmp/rover-schedk8s-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	const char *const args[] = { "--no-cgroups", extra, NULL };
	api.port = rv_test_standin_spawn(&standin, dir, args);
	ck_assert_msg(api.port > 0, "the stand-in did not start");
	snprintf(api.url, sizeof(api.url), "http://127.0.0.1:%d", api.port);
	snprintf(kubeconfig, sizeof(kubeconfig), "%s/kubeconfig", dir);
	ck_assert_int_eq(rv_test_kubeconfig_write(kubeconfig, api.url, "team", "t0k"), 0);
	/* the kubeconfig's namespace, as an administrator would have made it */
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&api, "POST", "/api/v1/namespaces",
				      "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\","
				      "\"metadata\":{\"name\":\"team\"}}",
				      NULL, &r),
			 0);
	ck_assert_msg(r.status == 201, "namespace: %ld %s", r.status, r.body);
	rv_test_reply_release(&r);
}

static void teardown(void)
{
	if (standin.pid > 0) {
		rv_proc_kill(&standin, SIGTERM);
		int st;
		if (rv_proc_wait(&standin, 10000, &st) == -ETIMEDOUT) {
			rv_proc_kill(&standin, SIGKILL);
			rv_proc_wait(&standin, -1, &st);
		}
		rv_proc_release(&standin);
	}
	memset(&standin, 0, sizeof(standin));
	if (dir[0]) {
		const char *argv[] = { "rm", "-rf", dir, NULL };
		struct rv_proc_opts o = { .argv = argv };
		rv_proc_run(&o, 10000, NULL, NULL);
	}
	dir[0] = 0;
}

static const char tmpl[] = "{\"metadata\":{\"labels\":{\"app\":\"t\"}},\"spec\":{\"containers\":"
			   "[{\"name\":\"main\",\"image\":\"x\"}]}}";

static struct sched *backend(const char *job)
{
	struct sched_k8s_opts o = { .job = job,
				    .kubeconfig = kubeconfig,
				    .image = "img",
				    .max_pending_ms = 0,
				    .timeout_ms = 5000,
				    .ntemplates = 1 };
	o.templates[0].role = "worker";
	o.templates[0].template_json = tmpl;
	struct rv_err err = { 0 };
	struct sched *s = sched_k8s_new(&o, &err);
	ck_assert_msg(s, "%s", err.msg);
	return s;
}

/* The next event within timeout_ms (fails the test when none came). */
static struct sched_event next(struct sched *s, int timeout_ms)
{
	struct sched_event ev;
	int64_t until = rv_mono_ms() + timeout_ms;
	for (;;) {
		if (sched_next_event(s, &ev) == 1)
			return ev;
		int left = (int)(until - rv_mono_ms());
		ck_assert_msg(left > 0, "no event in %d ms", timeout_ms);
		struct pollfd p = { .fd = sched_fd(s), .events = POLLIN };
		poll(&p, 1, left);
	}
}

/* The next event, which must be of type t. */
static struct sched_event expect(struct sched *s, enum sched_event_type t)
{
	struct sched_event ev = next(s, 20000);
	ck_assert_msg(ev.type == t, "%s: %s, not %s: %s", ev.name, sched_event_name(ev.type),
		      sched_event_name(t), ev.detail);
	return ev;
}

static int launch(struct sched *s, const char *name, int rank, const char *const *argv)
{
	const char *env[] = { "ROVER_NODE_RANK=0", NULL };
	struct sched_node_spec sp = { .name = name,
				      .role = "worker",
				      .rank = rank,
				      .res = { .cpu = 0.5, .memory_mb = 64 },
				      .argv = argv,
				      .env = env };
	struct rv_err err = { 0 };
	return sched_launch(s, &sp, &err);
}

/* The pod as the server has it (NULL when it has none). */
static cJSON *pod(const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), "/api/v1/namespaces/team/pods/%s", name);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&api, "GET", path, NULL, NULL, &r), 0);
	cJSON *j = r.status == 200 ? r.json : NULL;
	if (j)
		r.json = NULL;
	rv_test_reply_release(&r);
	return j;
}

START_TEST(test_launch_exit_remove)
{
	standin_start("--history=1000");
	struct sched *s = backend("j");
	ck_assert_str_eq(sched_k8s_namespace(s), "team");
	/* the command form goes through the template's container */
	const char *quick[] = { "/bin/sh", "-c", "exit 7", NULL };
	ck_assert_int_eq(launch(s, "worker-0", 0, quick), 0);
	ck_assert_int_eq(launch(s, "worker-0", 0, quick), -EEXIST);
	struct sched_event ev = expect(s, SCHED_EV_STARTED);
	ck_assert_str_eq(ev.name, "worker-0");
	ev = expect(s, SCHED_EV_EXITED);
	ck_assert_int_eq(ev.exit_code, 7);
	ck_assert_int_eq(ev.rank, 0);
	/* a long one, with its labels; removed on request */
	const char *sleeper[] = { "/bin/sleep", "300", NULL };
	ck_assert_int_eq(launch(s, "worker-1", 1, sleeper), 0);
	ev = expect(s, SCHED_EV_STARTED);
	cJSON *p = pod("j-worker-1");
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(rv_test_json_str(p, "metadata.labels.app"), "t");
	ck_assert_str_eq(rv_test_json_str(p, "spec.containers.0.resources.limits.memory"), "64Mi");
	cJSON_Delete(p);
	ck_assert_int_eq(sched_remove(s, "worker-1", 1000), 0);
	ck_assert_int_eq(sched_remove(s, "nobody", 1000), -ENOENT);
	ev = expect(s, SCHED_EV_EXITED);
	ck_assert(ev.removed);
	/* the ended pods are deleted */
	for (int i = 0; i < 100 && (p = pod("j-worker-0")); i++) {
		cJSON_Delete(p);
		usleep(100 * 1000);
	}
	ck_assert_ptr_null(p);
	sched_free(s);
}
END_TEST

START_TEST(test_resize)
{
	standin_start("--history=1000");
	struct sched *s = backend("r");
	ck_assert(sched_k8s_can_resize(s));
	const char *sleeper[] = { "/bin/sleep", "300", NULL };
	ck_assert_int_eq(launch(s, "worker-0", 0, sleeper), 0);
	expect(s, SCHED_EV_STARTED);
	struct sched_resources res = { .cpu = 1, .memory_mb = 128 };
	struct rv_err err = { 0 };
	ck_assert_msg(sched_resize(s, "worker-0", &res, &err) == 0, "%s", err.msg);
	cJSON *p = pod("r-worker-0");
	ck_assert_str_eq(rv_test_json_str(p, "spec.containers.0.resources.limits.memory"), "128Mi");
	cJSON_Delete(p);
	ck_assert_int_eq(sched_resize(s, "nobody", &res, &err), -ENOENT);
	sched_free(s);
	teardown();
	/* a server without pods/resize: relaunch instead */
	standin_start("--no-resize");
	s = backend("r");
	ck_assert(!sched_k8s_can_resize(s));
	ck_assert_int_eq(sched_resize(s, "worker-0", &res, &err), -EOPNOTSUPP);
	sched_free(s);
}
END_TEST

START_TEST(test_adopt_after_restart)
{
	standin_start("--history=1000");
	struct sched *s = backend("a");
	const char *sleeper[] = { "/bin/sleep", "300", NULL };
	ck_assert_int_eq(launch(s, "worker-0", 0, sleeper), 0);
	ck_assert_int_eq(launch(s, "worker-1", 1, sleeper), 0);
	for (int i = 0; i < 2; i++)
		expect(s, SCHED_EV_STARTED);
	sched_free(s); /* the master is gone; its pods run on */
	s = backend("a");
	struct sched_node_spec sp = { .name = "worker-0", .role = "worker", .rank = 0 };
	struct rv_err err = { 0 };
	ck_assert_msg(sched_adopt(s, &sp, 0, 0, &err) == 0, "%s", err.msg);
	struct sched_node_spec gone = { .name = "worker-7", .role = "worker", .rank = 7 };
	ck_assert_int_eq(sched_adopt(s, &gone, 0, 0, &err), -ESRCH);
	struct sched_event ev = expect(s, SCHED_EV_STARTED);
	ck_assert_str_eq(ev.name, "worker-0");
	/* worker-1 was not claimed: deleted once adoption is over */
	cJSON *p = NULL;
	for (int i = 0; i < 100 && (p = pod("a-worker-1")); i++) {
		cJSON_Delete(p);
		usleep(100 * 1000);
	}
	ck_assert_ptr_null(p);
	p = pod("a-worker-0");
	ck_assert_ptr_nonnull(p);
	cJSON_Delete(p);
	ck_assert_int_eq(sched_remove(s, "worker-0", 0), 0);
	ev = expect(s, SCHED_EV_EXITED);
	ck_assert(ev.removed);
	sched_free(s);
}
END_TEST

START_TEST(test_no_server)
{
	snprintf(dir, sizeof(dir), "/tmp/rover-schedk8s-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(kubeconfig, sizeof(kubeconfig), "%s/kubeconfig", dir);
	rv_test_write_file(
		kubeconfig,
		"current-context: s\nclusters: [{name: s, cluster: {server: "
		"'http://127.0.0.1:1'}}]\n"
		"contexts: [{name: s, context: {cluster: s, user: u}}]\nusers: [{name: u, user: "
		"{}}]\n");
	struct sched_k8s_opts o = { .job = "j", .kubeconfig = kubeconfig, .timeout_ms = 2000 };
	struct rv_err err = { 0 };
	ck_assert_ptr_null(sched_k8s_new(&o, &err));
	ck_assert_int_eq(err.code, -ECONNREFUSED);
	ck_assert_msg(strstr(err.msg, "http://127.0.0.1:1"), "%s", err.msg);
}
END_TEST

RV_TEST_MAIN_FIXTURE_TCASE("sched_k8s", NULL, teardown, "sched_k8s", 90, test_launch_exit_remove,
			   test_resize, test_adopt_after_restart, test_no_server)
