/*
 * k8s_relaunch: the real rover-master with --scheduler k8s runs 100 worker
 * pods (each a `sleep`) on the Kubernetes stand-in (tests/k8s, 8 fake
 * nodes); 30 of them are deleted at once (30 DELETEs in flight together).  seconds is the
 * time from the delete until each of the 30 ranks runs again as a new pod.
 * standin_start_s is the stand-in's own part, measured in the same run the
 * same way: 30 fresh pods created at once (30 POSTs), until all run.
 * Rover's own time is the difference.  Ends with:
 *   bench=k8s_relaunch pods=100 deleted=30 seconds=N standin_start_s=N rover_s=N
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
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

#define PODS    100
#define DELETED 30

static struct rv_proc standin;
static struct rv_test_brain api;
static char dir[64] = "/tmp/rover-k8s-bench-XXXXXX", kubeconfig[128];

static int standin_start(void)
{
	if (!mkdtemp(dir))
		return -errno;
	static const char *const extra[] = { "--nodes",      "8",         "--node-cpu", "32",
					     "--no-cgroups", "--history", "10000",      NULL };
	api.port = rv_test_standin_spawn(&standin, dir, extra);
	if (api.port < 0)
		return api.port;
	snprintf(api.url, sizeof(api.url), "http://127.0.0.1:%d", api.port);
	snprintf(kubeconfig, sizeof(kubeconfig), "%s/kubeconfig", dir);
	return rv_test_kubeconfig_write(kubeconfig, api.url, NULL, NULL);
}

/* One request of a burst sent at once, each from its own thread. */
struct call {
	pthread_t t;
	const char *method;
	char path[256];
	char body[1024];
	long status;
};

static void *call_main(void *arg)
{
	struct call *c = arg;
	struct rv_test_reply r;
	c->status = rv_test_http(&api, c->method, c->path, c->body[0] ? c->body : NULL, NULL, &r) <
				    0
			    ? -1
			    : r.status;
	rv_test_reply_release(&r);
	return NULL;
}

/* n calls at once; 0 when each got a 2xx. */
static int burst(struct call *c, int n)
{
	for (int i = 0; i < n; i++)
		pthread_create(&c[i].t, NULL, call_main, &c[i]);
	int bad = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(c[i].t, NULL);
		bad += c[i].status < 200 || c[i].status > 299;
	}
	return bad ? -EIO : 0;
}

/* Pods with selector sel: how many run, and (when names) whether any of
 * them is named in names (the pods deleted). */
static int running(const char *sel, char names[][64], int nnames)
{
	char path[256];
	snprintf(path, sizeof(path), "/api/v1/namespaces/default/pods?labelSelector=%s", sel);
	struct rv_test_reply r;
	if (rv_test_http(&api, "GET", path, NULL, NULL, &r) < 0)
		return -1;
	int k = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(r.json, "items"))
	{
		const char *phase = rv_test_json_str(it, "status.phase");
		const char *name = rv_test_json_str(it, "metadata.name");
		bool old = false;
		for (int i = 0; name && i < nnames; i++)
			old |= !strcmp(names[i], name);
		k += phase && !strcmp(phase, "Running") && !old;
	}
	rv_test_reply_release(&r);
	return k;
}

static double wait_running(const char *sel, char names[][64], int nnames, int want, int64_t since)
{
	while (running(sel, names, nnames) < want) {
		if (rv_mono_ms() - since > 300000)
			return -1;
		usleep(20 * 1000);
	}
	return (double)(rv_mono_ms() - since) / 1000.0;
}

/* 30 fresh pods created at once, until all run. */
static double standin_start_s(void)
{
	static struct call c[DELETED];
	for (int i = 0; i < DELETED; i++) {
		c[i].method = "POST";
		snprintf(c[i].path, sizeof(c[i].path), "/api/v1/namespaces/default/pods");
		snprintf(c[i].body, sizeof(c[i].body),
			 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
			 "\"plain-%d\",\"labels\":{\"bench\":\"plain\"}},\"spec\":{"
			 "\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"main\","
			 "\"image\":\"x\",\"command\":[\"/bin/sleep\",\"3600\"],\"resources\":{"
			 "\"limits\":{\"cpu\":\"100m\",\"memory\":\"16Mi\"}}}]}}",
			 i);
	}
	int64_t t0 = rv_mono_ms();
	if (burst(c, DELETED) < 0)
		return -1;
	return wait_running("bench%3Dplain", NULL, 0, DELETED, t0);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	int rc = standin_start();
	if (rc < 0) {
		fprintf(stderr, "k8s_relaunch: could not start the stand-in: %s\n", strerror(-rc));
		return 1;
	}
	char spec[1024];
	snprintf(spec, sizeof(spec),
		 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		 "\"metadata\":{\"name\":\"relaunch\"},\"spec\":{\"distributionStrategy\":"
		 "\"AllreduceStrategy\",\"optimizeMode\":\"manual\",\"replicaSpecs\":{\"worker\":{"
		 "\"replicas\":%d,\"restartCount\":5,\"resources\":{\"cpu\":\"100m\",\"memory\":"
		 "\"16Mi\"},\"command\":[\"/bin/sleep\",\"3600\"]}},"
		 "\"datasets\":[{\"name\":\"train\",\"size\":10,\"shardSize\":10}]}}",
		 PODS);
	struct rv_test_master m;
	const char *args[] = { "--scheduler", "k8s", "--kubeconfig", kubeconfig, "--log-level",
			       "warn",        NULL };
	rc = rv_test_master_init(&m, spec);
	if (rc == 0)
		rc = rv_test_master_start(&m, args);
	double all =
		rc == 0 ? wait_running("rover.dev%2Fjob%3Drelaunch", NULL, 0, PODS, rv_mono_ms())
			: -1;
	fprintf(stderr, "k8s_relaunch: %d pods running after %.2f s\n", PODS, all);
	/* the names of ranks 0..29, then delete them at once */
	static char names[DELETED][64];
	for (int i = 0; i < DELETED; i++)
		snprintf(names[i], sizeof(names[i]), "relaunch-worker-%d", i);
	static struct call c[DELETED];
	for (int i = 0; i < DELETED; i++) {
		c[i].method = "DELETE";
		snprintf(c[i].path, sizeof(c[i].path),
			 "/api/v1/namespaces/default/pods/%.63s?gracePeriodSeconds=1", names[i]);
	}
	int64_t t0 = rv_mono_ms();
	double secs = all >= 0 && burst(c, DELETED) == 0
			      ? wait_running("rover.dev%2Fjob%3Drelaunch", names, DELETED, PODS, t0)
			      : -1;
	double base = secs >= 0 ? standin_start_s() : -1;
	if (getenv("K8S_BENCH_LOG")) {
		char cp[1200];
		snprintf(cp, sizeof(cp), "cp %s %.800s", m.log, getenv("K8S_BENCH_LOG"));
		if (system(cp) != 0)
			fprintf(stderr, "k8s_relaunch: could not copy the log\n");
	}
	rv_test_master_cleanup(&m);
	rv_test_standin_stop(&standin, dir);
	printf("bench=k8s_relaunch pods=%d deleted=%d seconds=%.2f standin_start_s=%.2f "
	       "rover_s=%.2f\n",
	       PODS, DELETED, secs, base, secs >= 0 && base >= 0 ? secs - base : -1);
	return secs >= 0 && base >= 0 ? 0 : 1;
}
