/*
 * main.c: k8s-standin, the Kubernetes stand-in API server for tests.
 *
 *   k8s-standin [--port N] [--port-file F] [--dir D] [--nodes N]
 *               [--node-cpu Q] [--node-memory Q] ...   (--help lists all)
 *
 * Serves plain HTTP on 127.0.0.1 (port 0: any free one, written to
 * --port-file), runs the scheduler and the kubelet on this thread every
 * 50 ms, and stops on SIGTERM/SIGINT, killing its pods' processes.
 * SIGUSR1 cuts every open watch, SIGUSR2 makes the next watch get 410.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "standin.h"

static volatile sig_atomic_t main_stop, main_usr1, main_usr2;

static void main_on_signal(int sig)
{
	if (sig == SIGUSR1)
		main_usr1 = 1;
	else if (sig == SIGUSR2)
		main_usr2 = 1;
	else
		main_stop = 1;
}

static const char main_usage[] =
	"usage: k8s-standin [options]\n"
	"  --port N            port on 127.0.0.1 (default 0: a free one)\n"
	"  --port-file F       write the port there once listening\n"
	"  --dir D             pod logs and working folders (default /tmp/k8s-standin-PID)\n"
	"  --nodes N           fake nodes node-0..node-N-1 (default 2)\n"
	"  --node-cpu Q        each node's allocatable CPU (default 4)\n"
	"  --node-memory Q     each node's allocatable memory (default 8Gi)\n"
	"  --node-pods N       pods per node (default 110)\n"
	"  --history N         changes kept for watches; older ones get 410 (default 1000)\n"
	"  --bookmark-ms N     BOOKMARK interval for watches that allow them (default 1000)\n"
	"  --max-events N      Event objects kept (default 1000)\n"
	"  --scheduler-name S  the schedulerName placed here (default default-scheduler)\n"
	"  --no-resize         serve no pods/resize subresource (as servers before 1.33)\n"
	"  --no-cgroups        run pods without memory cgroups\n"
	"  --audit-log F       append \"USER VERB GROUP RESOURCE NAMESPACE\" for each API\n"
	"                      request (USER: the bearer token; default\n"
	"                      $K8S_STANDIN_AUDIT_LOG)\n"
	"  --cgroup-driver D   name pod cgroups as the kubelet's cgroupfs driver does\n"
	"                      (kubepods/pod<uid>, the default) or systemd's\n"
	"                      (kubepods.slice/kubepods-pod<uid_with_underscores>.slice)\n";

static const struct option main_longopts[] = {
	{ "port", required_argument, NULL, 'p' },
	{ "port-file", required_argument, NULL, 'f' },
	{ "dir", required_argument, NULL, 'd' },
	{ "nodes", required_argument, NULL, 'n' },
	{ "node-cpu", required_argument, NULL, 'c' },
	{ "node-memory", required_argument, NULL, 'm' },
	{ "node-pods", required_argument, NULL, 'P' },
	{ "history", required_argument, NULL, 'H' },
	{ "bookmark-ms", required_argument, NULL, 'b' },
	{ "max-events", required_argument, NULL, 'e' },
	{ "scheduler-name", required_argument, NULL, 's' },
	{ "no-resize", no_argument, NULL, 'R' },
	{ "no-cgroups", no_argument, NULL, 'C' },
	{ "cgroup-driver", required_argument, NULL, 'D' },
	{ "audit-log", required_argument, NULL, 'A' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int main_int(const char *v, int min, int max, int *out)
{
	char *end;
	long x = strtol(v, &end, 10);
	if (*end || x < min || x > max)
		return -EINVAL;
	*out = (int)x;
	return 0;
}

static int main_opt(struct standin_opts *o, int c, const char *v)
{
	switch (c) {
	case 'p':
		return main_int(v, 0, 65535, &o->port);
	case 'f':
		o->port_file = v;
		return 0;
	case 'd':
		o->dir = v;
		return 0;
	case 'n':
		return main_int(v, 0, 1000, &o->nodes);
	case 'c':
		return quantity_parse(v, true, &o->node_cpu_m);
	case 'm':
		return quantity_parse(v, false, &o->node_mem_b);
	case 'P':
		return main_int(v, 1, 100000, &o->node_pods);
	case 'H':
		return main_int(v, 1, 10000000, &o->history);
	case 'b':
		return main_int(v, 10, 3600000, &o->bookmark_ms);
	case 'e':
		return main_int(v, 1, 1000000, &o->max_events);
	case 's':
		o->scheduler = v;
		return 0;
	case 'R':
		o->resize = false;
		return 0;
	case 'C':
		o->cgroups = false;
		return 0;
	case 'A':
		o->audit_log = v;
		return 0;
	case 'D':
		if (strcmp(v, "systemd") != 0 && strcmp(v, "cgroupfs") != 0)
			return -EINVAL;
		o->cgroup_systemd = strcmp(v, "systemd") == 0;
		return 0;
	default:
		return -EINVAL;
	}
}

static int main_parse(int argc, char **argv, struct standin_opts *o)
{
	static char dir[64];
	*o = (struct standin_opts){ .nodes = 2,
				    .node_cpu_m = 4000,
				    .node_mem_b = 8LL << 30,
				    .node_pods = 110,
				    .history = 1000,
				    .bookmark_ms = 1000,
				    .resize = true,
				    .cgroups = true,
				    .scheduler = "default-scheduler",
				    .max_events = 1000 };
	int c;
	while ((c = getopt_long(argc, argv, "h", main_longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(main_usage, stdout);
			exit(0);
		}
		if (main_opt(o, c, optarg) < 0) {
			const char *name = "?";
			for (const struct option *lo = main_longopts; lo->name; lo++)
				if (lo->val == c)
					name = lo->name;
			fprintf(stderr, "k8s-standin: bad value for --%s\n%s", name, main_usage);
			return -EINVAL;
		}
	}
	if (!o->dir) {
		snprintf(dir, sizeof(dir), "/tmp/k8s-standin-%d", (int)getpid());
		o->dir = dir;
	}
	return 0;
}

static void main_add_str(cJSON *o, const char *k, const char *v)
{
	cJSON_AddStringToObject(o, k, v);
}

static cJSON *main_node_status(const struct standin_opts *o, const char *name)
{
	char cpu[32], mem[32], pods[16];
	snprintf(cpu, sizeof(cpu), "%lldm", (long long)o->node_cpu_m);
	snprintf(mem, sizeof(mem), "%lldKi", (long long)(o->node_mem_b / 1024));
	snprintf(pods, sizeof(pods), "%d", o->node_pods);
	cJSON *st = cJSON_CreateObject();
	const char *res[] = { "capacity", "allocatable" };
	for (int i = 0; i < 2; i++) {
		cJSON *r = cJSON_AddObjectToObject(st, res[i]);
		main_add_str(r, "cpu", cpu);
		main_add_str(r, "memory", mem);
		main_add_str(r, "pods", pods);
	}
	cJSON *addrs = cJSON_AddArrayToObject(st, "addresses");
	cJSON *a = cJSON_CreateObject(), *h = cJSON_CreateObject();
	main_add_str(a, "type", "InternalIP");
	main_add_str(a, "address", "127.0.0.1");
	main_add_str(h, "type", "Hostname");
	main_add_str(h, "address", name);
	cJSON_AddItemToArray(addrs, a);
	cJSON_AddItemToArray(addrs, h);
	cJSON *info = cJSON_AddObjectToObject(st, "nodeInfo");
	main_add_str(info, "kubeletVersion", "v1.32.0-standin");
	main_add_str(info, "containerRuntimeVersion", "standin://1.0");
	main_add_str(info, "operatingSystem", "linux");
	main_add_str(info, "architecture", "amd64");
	main_add_str(info, "osImage", "Rover k8s stand-in");
	main_add_str(info, "kernelVersion", "");
	return st;
}

static void main_add_nodes(struct standin *s)
{
	for (int i = 0; i < s->o.nodes; i++) {
		char name[32];
		snprintf(name, sizeof(name), "node-%d", i);
		cJSON *j = cJSON_CreateObject();
		cJSON *md = cJSON_AddObjectToObject(j, "metadata");
		cJSON *l = cJSON_AddObjectToObject(md, "labels");
		main_add_str(l, "kubernetes.io/hostname", name);
		main_add_str(l, "kubernetes.io/os", "linux");
		main_add_str(l, "kubernetes.io/arch", "amd64");
		cJSON_AddObjectToObject(j, "spec");
		cJSON_AddItemToObject(j, "status", main_node_status(&s->o, name));
		struct obj *n = store_add(s, KIND_NODE, "", name, j);
		kubelet_condition(n, "Ready", "True", "KubeletReady",
				  "kubelet is posting ready status");
		store_touch(s, n, "MODIFIED");
	}
	const char *nss[] = { "default", "kube-system", "kube-public", "kube-node-lease" };
	for (size_t i = 0; i < sizeof(nss) / sizeof(nss[0]); i++) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddObjectToObject(j, "metadata");
		cJSON *spec = cJSON_AddObjectToObject(j, "spec");
		cJSON *fin = cJSON_AddArrayToObject(spec, "finalizers");
		cJSON_AddItemToArray(fin, cJSON_CreateString("kubernetes"));
		main_add_str(cJSON_AddObjectToObject(j, "status"), "phase", "Active");
		store_add(s, KIND_NAMESPACE, "", nss[i], j);
	}
}

static int main_write_port(const char *file, int port)
{
	char tmp[1024];
	snprintf(tmp, sizeof(tmp), "%s.tmp", file);
	FILE *f = fopen(tmp, "we");
	if (!f)
		return -errno;
	fprintf(f, "%d\n", port);
	if (fclose(f) != 0 || rename(tmp, file) < 0)
		return -errno;
	return 0;
}

static void main_loop(struct standin *s)
{
	while (!main_stop) {
		pthread_mutex_lock(&s->mu);
		if (main_usr1) {
			main_usr1 = 0;
			s->fault_cut_mid = false;
			s->fault_cut++;
			pthread_cond_broadcast(&s->changed);
		}
		if (main_usr2) {
			main_usr2 = 0;
			s->fault_expire++;
		}
		sched_run(s);
		kubelet_run(s);
		store_prune_events(s);
		pthread_mutex_unlock(&s->mu);
		usleep(50 * 1000);
	}
}

static void main_signals(void)
{
	struct sigaction sa = { .sa_handler = main_on_signal };
	sigemptyset(&sa.sa_mask);
	const int sigs[] = { SIGTERM, SIGINT, SIGUSR1, SIGUSR2 };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static int run(int argc, char **argv)
{
	static struct standin s;
	char why[512] = "";
	if (main_parse(argc, argv, &s.o) < 0)
		return -EINVAL;
	store_init(&s);
	if (!s.o.audit_log)
		s.o.audit_log = getenv("K8S_STANDIN_AUDIT_LOG");
	s.audit_fd = s.o.audit_log && *s.o.audit_log
			     ? open(s.o.audit_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)
			     : -1;
	if (kubelet_init(&s, why, sizeof(why)) < 0)
		fprintf(stderr,
			"level=warn comp=k8s-standin msg=\"pods run without memory cgroups\" "
			"why=\"%s\"\n",
			why);
	main_add_nodes(&s);
	main_signals();
	int port = s.o.port;
	struct MHD_Daemon *d = api_start(&s, &port);
	if (!d) {
		fprintf(stderr, "level=error comp=k8s-standin msg=\"could not listen\" port=%d\n",
			port);
		return -EADDRINUSE;
	}
	s.o.port = port;
	if (s.o.port_file && main_write_port(s.o.port_file, port) < 0)
		fprintf(stderr,
			"level=error comp=k8s-standin msg=\"could not write the port file\"\n");
	fprintf(stderr,
		"level=info comp=k8s-standin msg=\"listening\" addr=127.0.0.1:%d cgroups=%s "
		"dir=%s\n",
		port, s.cg_base[0] ? s.cg_base : "none", s.o.dir);
	main_loop(&s);
	pthread_mutex_lock(&s.mu);
	s.stop = 1;
	pthread_cond_broadcast(&s.changed);
	kubelet_stop_all(&s);
	pthread_mutex_unlock(&s.mu);
	api_stop(d);
	kubelet_release(&s);
	store_release(&s);
	return 0;
}

int main(int argc, char **argv)
{
	return run(argc, argv) < 0 ? 1 : 0;
}
