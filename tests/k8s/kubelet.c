/*
 * kubelet.c: runs each placed pod's first container as a local process.
 *
 * The container's command and args (with $(VAR) references expanded), its
 * env (value and valueFrom.fieldRef), its workingDir (else the pod's own
 * folder); stdout and stderr go to the pod's log file.  With cgroups the
 * process starts inside a memory cgroup of its own holding the container's
 * memory limit (cgroup v1 memory.limit_in_bytes and memsw, or v2
 * memory.max and memory.swap.max 0), and a kill by the kernel's OOM killer
 * there is reported as OOMKilled.  Pod status moves as a kubelet's does:
 * Pending -> Running -> Succeeded/Failed with containerStatuses; graceful
 * deletion sends SIGTERM, then SIGKILL once the grace period is over.
 * Called from the main loop with s->mu held.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "standin.h"
#include "usage.h"

#define KUBELET_MAX_ENV  256
#define KUBELET_MAX_ARGS 256

static int kubelet_cg_write(const char *dir, const char *file, const char *val)
{
	char path[640];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, val, strlen(val));
	int r = n < 0 ? -errno : 0;
	close(fd);
	return r;
}

static bool kubelet_v2(const struct standin *s)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/cgroup.controllers", s->cg_base);
	return access(p, F_OK) == 0;
}

int kubelet_init(struct standin *s, char *why, size_t wsize)
{
	char own[400];
	s->cg_base[0] = 0;
	if (!s->o.cgroups)
		return 0;
	bool v1 = access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) == 0;
	int r = rv_usage_pid_cgroup(getpid(), v1 ? RV_CGROUP_V1 : RV_CGROUP_V2,
				    v1 ? "" : "/sys/fs/cgroup", "memory", own, sizeof(own));
	if (r < 0) {
		snprintf(why, wsize, "could not find our memory cgroup: %s", strerror(-r));
		return r;
	}
	if (!v1) /* v2: the pods' folder must get the memory controller */
		kubelet_cg_write(own, "cgroup.subtree_control", "+memory");
	snprintf(s->cg_base, sizeof(s->cg_base), "%.360s/k8s-standin-%d", own, (int)getpid());
	if (mkdir(s->cg_base, 0755) < 0 && errno != EEXIST) {
		snprintf(why, wsize, "could not make cgroup %s: %s", s->cg_base, strerror(errno));
		s->cg_base[0] = 0;
		return -errno;
	}
	if (!v1 && kubelet_cg_write(s->cg_base, "cgroup.subtree_control", "+memory") < 0) {
		snprintf(why, wsize, "cgroup v2: no memory controller for %s", s->cg_base);
		rmdir(s->cg_base);
		s->cg_base[0] = 0;
		return -EOPNOTSUPP;
	}
	/* the pods go one level down, in the kubelet's kubepods folder */
	snprintf(s->cg_pods, sizeof(s->cg_pods), "%s/%s", s->cg_base,
		 s->o.cgroup_systemd ? "kubepods.slice" : "kubepods");
	if ((mkdir(s->cg_pods, 0755) < 0 && errno != EEXIST) ||
	    (!v1 && kubelet_cg_write(s->cg_pods, "cgroup.subtree_control", "+memory") < 0)) {
		snprintf(why, wsize, "could not make cgroup %s: %s", s->cg_pods, strerror(errno));
		rmdir(s->cg_pods);
		rmdir(s->cg_base);
		s->cg_base[0] = 0;
		return -EOPNOTSUPP;
	}
	return 0;
}

void kubelet_release(struct standin *s)
{
	if (s->cg_base[0]) {
		rmdir(s->cg_pods);
		rmdir(s->cg_base);
	}
}

/* The pod's cgroup folder as the kubelet names it: cgroupfs
 * "kubepods/pod<uid>", systemd "kubepods.slice/kubepods-pod<uid with
 * underscores for dashes>.slice" (a Guaranteed pod's; Burstable and
 * BestEffort pods sit one level further down on a real node). */
static void kubelet_cg_name(const struct standin *s, const struct obj *pod, char *out, size_t size)
{
	char uid[sizeof(pod->uid)];
	snprintf(uid, sizeof(uid), "%s", pod->uid);
	if (!s->o.cgroup_systemd) {
		snprintf(out, size, "%.420s/pod%s", s->cg_pods, uid);
		return;
	}
	for (char *p = uid; *p; p++)
		if (*p == '-')
			*p = '_';
	snprintf(out, size, "%.420s/kubepods-pod%s.slice", s->cg_pods, uid);
}

static const char *kubelet_str(const cJSON *j, const char *a, const char *b)
{
	const cJSON *x = cJSON_GetObjectItem(j, a);
	return cJSON_GetStringValue(b ? cJSON_GetObjectItem(x, b) : x);
}

static cJSON *kubelet_container(const struct obj *pod)
{
	return cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pod->j, "spec"),
						      "containers"),
				  0);
}

static void kubelet_pod_dir(const struct standin *s, const struct obj *pod, char *out, size_t size)
{
	snprintf(out, size, "%s/pods/%s_%s_%s", s->o.dir, pod->ns, pod->name, pod->uid);
}

int kubelet_log_path(struct standin *s, const struct obj *pod, const char *container, char *out,
		     size_t size)
{
	char dir[600];
	const char *c = kubelet_str(kubelet_container(pod), "name", NULL);
	if (container && *container && c && strcmp(container, c) != 0)
		return -ENOENT;
	kubelet_pod_dir(s, pod, dir, sizeof(dir));
	snprintf(out, size, "%s/%s.log", dir, c ? c : "main");
	return access(out, R_OK) == 0 ? 0 : -ENOENT;
}

/* A fieldRef's value: metadata.name, .namespace, .uid, labels['k'], ... */
static const char *kubelet_field(const struct obj *pod, const char *path, char *buf, size_t size)
{
	const cJSON *md = cJSON_GetObjectItem(pod->j, "metadata");
	const char *v = NULL;
	char key[256];
	if (sscanf(path, "metadata.labels['%255[^']']", key) == 1)
		v = kubelet_str(md, "labels", key);
	else if (sscanf(path, "metadata.annotations['%255[^']']", key) == 1)
		v = kubelet_str(md, "annotations", key);
	else if (strncmp(path, "metadata.", 9) == 0)
		v = kubelet_str(md, path + 9, NULL);
	else if (strcmp(path, "spec.nodeName") == 0 || strcmp(path, "spec.serviceAccountName") == 0)
		v = kubelet_str(pod->j, "spec", path + 5);
	else if (strcmp(path, "status.podIP") == 0 || strcmp(path, "status.hostIP") == 0)
		v = "127.0.0.1";
	snprintf(buf, size, "%s", v ? v : "");
	return buf;
}

struct kubelet_env {
	char *kv[KUBELET_MAX_ENV + 1];
	int n;
};

static void kubelet_env_set(struct kubelet_env *e, const char *k, const char *v)
{
	size_t kl = strlen(k);
	char *item;
	if (asprintf(&item, "%s=%s", k, v) < 0)
		return;
	for (int i = 0; i < e->n; i++)
		if (strncmp(e->kv[i], k, kl) == 0 && e->kv[i][kl] == '=') {
			free(e->kv[i]);
			e->kv[i] = item;
			return;
		}
	if (e->n < KUBELET_MAX_ENV)
		e->kv[e->n++] = item;
	else
		free(item);
}

static const char *kubelet_env_get(const struct kubelet_env *e, const char *k, size_t kl)
{
	for (int i = 0; i < e->n; i++)
		if (strncmp(e->kv[i], k, kl) == 0 && e->kv[i][kl] == '=')
			return e->kv[i] + kl + 1;
	return NULL;
}

/* $(VAR) from the container's env; $$(VAR) stays $(VAR); unknown stays. */
static char *kubelet_expand(const struct kubelet_env *e, const char *in)
{
	size_t cap = strlen(in) * 2 + 64, o = 0;
	char *out = malloc(cap);
	for (const char *p = in; *p;) {
		const char *close = p[0] == '$' && p[1] == '(' ? strchr(p, ')') : NULL;
		const char *v = close ? kubelet_env_get(e, p + 2, (size_t)(close - p - 2)) : NULL;
		size_t need = v ? strlen(v) : 2;
		if (o + need + 1 >= cap) {
			cap = (o + need) * 2 + 64;
			char *nb = realloc(out, cap);
			if (!nb)
				break;
			out = nb;
		}
		if (p[0] == '$' && p[1] == '$' && p[2] == '(') {
			out[o++] = '$';
			p += 2;
		} else if (v) {
			memcpy(out + o, v, strlen(v));
			o += strlen(v);
			p = close + 1;
		} else {
			out[o++] = *p++;
		}
	}
	out[o] = 0;
	return out;
}

static void kubelet_build_env(struct standin *s, const struct obj *pod, struct kubelet_env *e)
{
	char buf[512], port[16];
	const char *keep[] = { "PATH", "HOME", "LANG", "TMPDIR" };
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		if (getenv(keep[i]))
			kubelet_env_set(e, keep[i], getenv(keep[i]));
	snprintf(port, sizeof(port), "%d", s->o.port);
	kubelet_env_set(e, "HOSTNAME", pod->name);
	kubelet_env_set(e, "KUBERNETES_SERVICE_HOST", "127.0.0.1");
	kubelet_env_set(e, "KUBERNETES_SERVICE_PORT", port);
	const cJSON *ev;
	cJSON_ArrayForEach(ev, cJSON_GetObjectItem(kubelet_container(pod), "env"))
	{
		const char *name = kubelet_str(ev, "name", NULL);
		const char *val = kubelet_str(ev, "value", NULL);
		const cJSON *from = cJSON_GetObjectItem(ev, "valueFrom");
		const char *fp =
			kubelet_str(cJSON_GetObjectItem(from, "fieldRef"), "fieldPath", NULL);
		if (!name)
			continue;
		if (fp)
			val = kubelet_field(pod, fp, buf, sizeof(buf));
		char *x = kubelet_expand(e, val ? val : "");
		kubelet_env_set(e, name, x);
		free(x);
	}
}

static void kubelet_env_free(struct kubelet_env *e)
{
	for (int i = 0; i < e->n; i++)
		free(e->kv[i]);
	e->n = 0;
}

/* ---- status ---- */

static void kubelet_set(cJSON *obj, const char *key, cJSON *val)
{
	if (cJSON_GetObjectItem(obj, key))
		cJSON_ReplaceItemInObject(obj, key, val);
	else
		cJSON_AddItemToObject(obj, key, val);
}

static cJSON *kubelet_status(struct obj *pod)
{
	cJSON *st = cJSON_GetObjectItem(pod->j, "status");
	if (!cJSON_IsObject(st)) {
		st = cJSON_CreateObject();
		kubelet_set(pod->j, "status", st);
	}
	return st;
}

/* Set condition type to status (with reason and message when given). */
void kubelet_condition(struct obj *pod, const char *type, const char *status, const char *reason,
		       const char *msg)
{
	cJSON *st = kubelet_status(pod);
	cJSON *conds = cJSON_GetObjectItem(st, "conditions");
	if (!conds)
		conds = cJSON_AddArrayToObject(st, "conditions");
	cJSON *c, *have = NULL;
	cJSON_ArrayForEach(c, conds)
	{
		if (strcmp(kubelet_str(c, "type", NULL) ?: "", type) == 0)
			have = c;
	}
	char ts[32];
	store_now_rfc3339(ts, sizeof(ts));
	c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "type", type);
	cJSON_AddStringToObject(c, "status", status);
	cJSON_AddNullToObject(c, "lastProbeTime");
	cJSON_AddStringToObject(c, "lastTransitionTime", ts);
	if (reason)
		cJSON_AddStringToObject(c, "reason", reason);
	if (msg)
		cJSON_AddStringToObject(c, "message", msg);
	if (have && strcmp(kubelet_str(have, "status", NULL) ?: "", status) == 0)
		kubelet_set(c, "lastTransitionTime",
			    cJSON_Duplicate(cJSON_GetObjectItem(have, "lastTransitionTime"), true));
	if (have)
		cJSON_ReplaceItemViaPointer(conds, have, c);
	else
		cJSON_AddItemToArray(conds, c);
}

static cJSON *kubelet_cstatus(struct obj *pod, const char *state_key, cJSON *state, bool ready)
{
	const cJSON *ct = kubelet_container(pod);
	cJSON *st = kubelet_status(pod);
	cJSON *old = cJSON_GetArrayItem(cJSON_GetObjectItem(st, "containerStatuses"), 0);
	cJSON *cs = cJSON_CreateObject();
	cJSON_AddStringToObject(cs, "name", kubelet_str(ct, "name", NULL) ?: "main");
	cJSON *s = cJSON_AddObjectToObject(cs, "state");
	cJSON_AddItemToObject(s, state_key, state);
	cJSON *last = cJSON_GetObjectItem(old, "lastState");
	cJSON_AddItemToObject(cs, "lastState",
			      last ? cJSON_Duplicate(last, true) : cJSON_CreateObject());
	cJSON_AddBoolToObject(cs, "ready", ready);
	const cJSON *rc = cJSON_GetObjectItem(old, "restartCount");
	cJSON_AddNumberToObject(cs, "restartCount", cJSON_IsNumber(rc) ? rc->valuedouble : 0);
	cJSON_AddStringToObject(cs, "image", kubelet_str(ct, "image", NULL) ?: "");
	cJSON_AddStringToObject(cs, "imageID", "");
	cJSON_AddStringToObject(cs, "containerID", pod->cid);
	cJSON_AddBoolToObject(cs, "started", ready);
	const cJSON *res = cJSON_GetObjectItem(ct, "resources");
	if (res)
		cJSON_AddItemToObject(cs, "resources", cJSON_Duplicate(res, true));
	cJSON *arr = cJSON_CreateArray();
	cJSON_AddItemToArray(arr, cs);
	kubelet_set(st, "containerStatuses", arr);
	return cs;
}

static void kubelet_running(struct obj *pod)
{
	char ts[32];
	store_now_rfc3339(ts, sizeof(ts));
	cJSON *st = kubelet_status(pod);
	kubelet_set(st, "phase", cJSON_CreateString("Running"));
	kubelet_set(st, "hostIP", cJSON_CreateString("127.0.0.1"));
	kubelet_set(st, "podIP", cJSON_CreateString("127.0.0.1"));
	cJSON *ips = cJSON_CreateArray(), *ip = cJSON_CreateObject();
	cJSON_AddStringToObject(ip, "ip", "127.0.0.1");
	cJSON_AddItemToArray(ips, ip);
	kubelet_set(st, "podIPs", ips);
	if (!cJSON_GetObjectItem(st, "startTime"))
		cJSON_AddStringToObject(st, "startTime", ts);
	cJSON *run = cJSON_CreateObject();
	cJSON_AddStringToObject(run, "startedAt", ts);
	kubelet_cstatus(pod, "running", run, true);
	kubelet_condition(pod, "Initialized", "True", NULL, NULL);
	kubelet_condition(pod, "Ready", "True", NULL, NULL);
	kubelet_condition(pod, "ContainersReady", "True", NULL, NULL);
}

/* ---- processes ---- */

/* The pod's memory cgroup with its limit; fd open on its cgroup.procs. */
static int kubelet_cgroup(struct standin *s, struct obj *pod, int *fd)
{
	char val[32], path[600];
	*fd = -1;
	if (!s->cg_base[0])
		return 0;
	kubelet_cg_name(s, pod, pod->cg, sizeof(pod->cg));
	if (mkdir(pod->cg, 0755) < 0 && errno != EEXIST)
		return -errno;
	int64_t lim = quantity_pod_mem_limit(pod->j);
	bool v2 = kubelet_v2(s);
	pod->mem_limit = lim;
	if (v2)
		kubelet_cg_write(pod->cg, "memory.oom.group", "1");
	if (lim > 0) {
		snprintf(val, sizeof(val), "%lld", (long long)lim);
		int r = kubelet_cg_write(pod->cg, v2 ? "memory.max" : "memory.limit_in_bytes", val);
		if (r < 0)
			return r;
		kubelet_cg_write(pod->cg, v2 ? "memory.swap.max" : "memory.memsw.limit_in_bytes",
				 v2 ? "0" : val);
	}
	snprintf(path, sizeof(path), "%s/cgroup.procs", pod->cg);
	*fd = open(path, O_WRONLY | O_CLOEXEC);
	return *fd < 0 ? -errno : 0;
}

/* SIGKILL the pid on a line of cgroup.procs (never 0 or below: kill(0)
 * would hit our own group). */
static void kubelet_kill_pid(const char *line)
{
	char *end;
	long pid = strtol(line, &end, 10);
	if (end != line && pid > 0)
		kill((pid_t)pid, SIGKILL);
}

/* The OOM kills in the pod's cgroup so far. */
static long kubelet_oom_kills(const struct obj *pod)
{
	char path[640], line[128];
	long n = 0, v;
	if (!pod->cg[0])
		return 0;
	snprintf(path, sizeof(path), "%s/memory.oom_control", pod->cg);
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(path, sizeof(path), "%s/memory.events", pod->cg);
		f = fopen(path, "re");
	}
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "oom_kill ", 9) == 0 && (v = strtol(line + 9, NULL, 10)) > 0)
			n = v;
	fclose(f);
	return n;
}

static void kubelet_cgroup_remove(struct obj *pod)
{
	char buf[4096], path[640];
	if (!pod->cg[0])
		return;
	snprintf(path, sizeof(path), "%s/cgroup.procs", pod->cg);
	for (int tries = 0; tries < 50 && rmdir(pod->cg) < 0 && errno == EBUSY; tries++) {
		FILE *f = fopen(path, "re");
		while (f && fgets(buf, sizeof(buf), f))
			kubelet_kill_pid(buf);
		if (f)
			fclose(f);
		usleep(10000);
	}
	pod->cg[0] = 0;
}

static int kubelet_argv(const struct obj *pod, const struct kubelet_env *e, char **argv)
{
	const cJSON *ct = kubelet_container(pod);
	const char *keys[] = { "command", "args" };
	int n = 0;
	for (int k = 0; k < 2; k++) {
		const cJSON *a;
		cJSON_ArrayForEach(a, cJSON_GetObjectItem(ct, keys[k]))
		{
			if (cJSON_IsString(a) && n < KUBELET_MAX_ARGS)
				argv[n++] = kubelet_expand(e, a->valuestring);
		}
	}
	argv[n] = NULL;
	return n;
}

static void kubelet_free_argv(char **argv)
{
	for (int i = 0; argv[i]; i++)
		free(argv[i]);
}

/* A container that could not start: terminated StartError, exit 128. */
static void kubelet_start_failed(struct standin *s, struct obj *pod, const char *why)
{
	char ts[32];
	store_now_rfc3339(ts, sizeof(ts));
	cJSON *t = cJSON_CreateObject();
	cJSON_AddNumberToObject(t, "exitCode", 128);
	cJSON_AddStringToObject(t, "reason", "StartError");
	cJSON_AddStringToObject(t, "message", why);
	cJSON_AddStringToObject(t, "startedAt", ts);
	cJSON_AddStringToObject(t, "finishedAt", ts);
	kubelet_cstatus(pod, "terminated", t, false);
	kubelet_set(kubelet_status(pod), "phase", cJSON_CreateString("Failed"));
	store_event(s, pod, "Warning", "Failed", "kubelet", "Error: %s", why);
}

static int kubelet_spawn(struct standin *s, struct obj *pod, int logfd, int cgfd, char *why,
			 size_t wsize)
{
	struct kubelet_env e = { .n = 0 };
	char *argv[KUBELET_MAX_ARGS + 1], dir[600];
	kubelet_build_env(s, pod, &e);
	e.kv[e.n] = NULL;
	int argc = kubelet_argv(pod, &e, argv);
	volume_map(s, pod, kubelet_container(pod), e.kv, argv);
	kubelet_pod_dir(s, pod, dir, sizeof(dir));
	const char *wd = kubelet_str(kubelet_container(pod), "workingDir", NULL);
	struct rv_proc_opts o = {
		.argv = (const char *const *)argv,
		.envp = (const char *const *)e.kv,
		.cwd = wd && *wd ? wd : dir,
		.io = { { RV_PROC_NULL, -1 }, { RV_PROC_FD, logfd }, { RV_PROC_STDOUT, -1 } },
		.group = RV_PROC_NEW_SESSION,
		.pdeathsig = SIGKILL,
	};
	if (cgfd >= 0)
		o.cgroup_fds[o.ncgroup++] = cgfd;
	int r = argc ? rv_proc_spawn(&pod->proc, &o) : -ENOEXEC;
	if (r < 0)
		snprintf(why, wsize, "failed to create containerd task: exec: \"%s\": %s",
			 argc ? argv[0] : "", argc ? strerror(-r) : "no command given");
	kubelet_free_argv(argv);
	kubelet_env_free(&e);
	return r;
}

static void kubelet_start(struct standin *s, struct obj *pod)
{
	char dir[600], logp[700], why[512] = "";
	int cgfd = -1;
	pod->started = true;
	kubelet_pod_dir(s, pod, dir, sizeof(dir));
	mkdir(s->o.dir, 0755);
	snprintf(logp, sizeof(logp), "%s/pods", s->o.dir);
	mkdir(logp, 0755);
	mkdir(dir, 0755);
	kubelet_log_path(s, pod, NULL, logp, sizeof(logp));
	int logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	int r = logfd < 0 ? -errno : kubelet_cgroup(s, pod, &cgfd);
	if (r < 0)
		snprintf(why, sizeof(why), "could not set up the container: %s", strerror(-r));
	else
		r = kubelet_spawn(s, pod, logfd, cgfd, why, sizeof(why));
	if (logfd >= 0)
		close(logfd);
	if (cgfd >= 0)
		close(cgfd);
	const char *image = kubelet_str(kubelet_container(pod), "image", NULL) ?: "";
	const char *cname = kubelet_str(kubelet_container(pod), "name", NULL) ?: "main";
	store_event(s, pod, "Normal", "Pulled", "kubelet",
		    "Container image \"%s\" already present on machine", image);
	if (r < 0) {
		kubelet_start_failed(s, pod, why);
		kubelet_cgroup_remove(pod);
		store_touch(s, pod, "MODIFIED");
		return;
	}
	pod->running = true;
	snprintf(pod->cid, sizeof(pod->cid), "standin://%d", (int)pod->proc.pid);
	store_event(s, pod, "Normal", "Created", "kubelet", "Created container %s", cname);
	store_event(s, pod, "Normal", "Started", "kubelet", "Started container %s", cname);
	kubelet_running(pod);
	store_touch(s, pod, "MODIFIED");
}

/* The terminated state of a container that exited with wait status ws. */
static cJSON *kubelet_terminated(struct obj *pod, int ws, bool oom)
{
	char ts[32];
	int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
	const cJSON *run = cJSON_GetObjectItem(
		cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(kubelet_status(pod),
									   "containerStatuses"),
						       0),
				    "state"),
		"running");
	store_now_rfc3339(ts, sizeof(ts));
	cJSON *t = cJSON_CreateObject();
	cJSON_AddNumberToObject(t, "exitCode", code);
	if (WIFSIGNALED(ws))
		cJSON_AddNumberToObject(t, "signal", WTERMSIG(ws));
	cJSON_AddStringToObject(t, "reason", oom ? "OOMKilled" : code == 0 ? "Completed" : "Error");
	cJSON_AddStringToObject(t, "startedAt", kubelet_str(run, "startedAt", NULL) ?: ts);
	cJSON_AddStringToObject(t, "finishedAt", ts);
	cJSON_AddStringToObject(t, "containerID", pod->cid);
	return t;
}

/* restartPolicy: the phase after an exit, or NULL to start again. */
static const char *kubelet_after_exit(const struct obj *pod, int code)
{
	const char *rp = kubelet_str(pod->j, "spec", "restartPolicy") ?: "Always";
	bool deleting = cJSON_GetObjectItem(cJSON_GetObjectItem(pod->j, "metadata"),
					    "deletionTimestamp") != NULL;
	if (strcmp(rp, "Never") == 0 || deleting)
		return code == 0 ? "Succeeded" : "Failed";
	if (strcmp(rp, "OnFailure") == 0 && code == 0)
		return "Succeeded";
	return NULL;
}

static void kubelet_exited(struct standin *s, struct obj *pod, int ws)
{
	bool oom = kubelet_oom_kills(pod) > 0;
	kubelet_cgroup_remove(pod);
	pod->running = false;
	int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
	cJSON *term = kubelet_terminated(pod, ws, oom);
	const char *phase = kubelet_after_exit(pod, oom ? 137 : code);
	cJSON *cs = kubelet_cstatus(pod, "terminated", term, false);
	kubelet_condition(pod, "Ready", "False", "PodCompleted", NULL);
	kubelet_condition(pod, "ContainersReady", "False", "PodCompleted", NULL);
	if (phase) {
		kubelet_set(kubelet_status(pod), "phase", cJSON_CreateString(phase));
	} else { /* restart: this run becomes lastState */
		const cJSON *rc = cJSON_GetObjectItem(cs, "restartCount");
		kubelet_set(cs, "lastState",
			    cJSON_Duplicate(cJSON_GetObjectItem(cs, "state"), true));
		kubelet_set(cs, "restartCount", cJSON_CreateNumber(rc->valuedouble + 1));
		cJSON *w = cJSON_CreateObject();
		cJSON_AddStringToObject(w, "reason", "CrashLoopBackOff");
		cJSON *state = cJSON_CreateObject();
		cJSON_AddItemToObject(state, "waiting", w);
		kubelet_set(cs, "state", state);
		pod->restart_at = store_mono_s() + 1.0;
		if (oom)
			store_event(s, pod, "Warning", "BackOff", "kubelet",
				    "Back-off restarting failed container");
	}
	rv_proc_release(&pod->proc);
	rv_proc_init(&pod->proc);
	store_touch(s, pod, "MODIFIED");
}

void kubelet_kill_now(struct standin *s, struct obj *pod)
{
	(void)s;
	if (!pod->running)
		return;
	rv_proc_kill(&pod->proc, SIGKILL);
	rv_proc_wait(&pod->proc, 2000, NULL);
	kubelet_cgroup_remove(pod);
	pod->running = false;
}

void kubelet_mark_deleting(struct standin *s, struct obj *pod, int64_t grace_s)
{
	cJSON *md = cJSON_GetObjectItem(pod->j, "metadata");
	if (grace_s < 0) {
		const cJSON *g = cJSON_GetObjectItem(cJSON_GetObjectItem(pod->j, "spec"),
						     "terminationGracePeriodSeconds");
		grace_s = cJSON_IsNumber(g) ? (int64_t)g->valuedouble : 30;
	}
	double due = store_mono_s() + (double)grace_s;
	if (cJSON_GetObjectItem(md, "deletionTimestamp") && due >= pod->kill_at)
		return; /* already going, sooner */
	char ts[32];
	time_t t = time(NULL) + grace_s;
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	kubelet_set(md, "deletionTimestamp", cJSON_CreateString(ts));
	kubelet_set(md, "deletionGracePeriodSeconds", cJSON_CreateNumber((double)grace_s));
	pod->kill_at = due;
	store_touch(s, pod, "MODIFIED");
}

static bool kubelet_node_ready(struct standin *s, const char *name)
{
	struct obj *n = name ? store_find(s, KIND_NODE, "", name) : NULL;
	const cJSON *c;
	if (!n)
		return false;
	const cJSON *conds = cJSON_GetObjectItem(cJSON_GetObjectItem(n->j, "status"), "conditions");
	cJSON_ArrayForEach(c, conds)
	{
		if (strcmp(kubelet_str(c, "type", NULL) ?: "", "Ready") == 0)
			return strcmp(kubelet_str(c, "status", NULL) ?: "", "True") == 0;
	}
	return false;
}

/* The OOM killer took a process of the container: the whole container
 * goes, as the kubelet has it on cgroup v2 (memory.oom.group), so a
 * supervisor whose child was killed does not outlive it. */
static void kubelet_oom_group(struct obj *pod)
{
	char path[640], buf[64];
	snprintf(path, sizeof(path), "%s/cgroup.procs", pod->cg);
	rv_proc_kill(&pod->proc, SIGKILL);
	FILE *f = fopen(path, "re");
	while (f && fgets(buf, sizeof(buf), f))
		kubelet_kill_pid(buf);
	if (f)
		fclose(f);
}

/* Graceful termination of a deleted pod: 1 when the pod object is gone. */
static int kubelet_terminate(struct standin *s, struct obj *pod, double now)
{
	if (!pod->running) {
		store_remove(s, pod);
		return 1;
	}
	if (pod->term_at == 0) {
		pod->term_at = now;
		store_event(s, pod, "Normal", "Killing", "kubelet", "Stopping container %s",
			    kubelet_str(kubelet_container(pod), "name", NULL) ?: "main");
		rv_proc_kill(&pod->proc, SIGTERM);
	} else if (now >= pod->kill_at) {
		rv_proc_kill(&pod->proc, SIGKILL);
		pod->kill_at = now + 3600;
	}
	return 0;
}

/* One pod's turn: 1 when its object was removed. */
static int kubelet_step(struct standin *s, struct obj *pod, double now)
{
	bool deleting = cJSON_GetObjectItem(cJSON_GetObjectItem(pod->j, "metadata"),
					    "deletionTimestamp") != NULL;
	int ws;
	if (pod->running && pod->cg[0] && pod->mem_limit && kubelet_oom_kills(pod) > 0)
		kubelet_oom_group(pod);
	if (pod->running && rv_proc_wait(&pod->proc, 0, &ws) == 0)
		kubelet_exited(s, pod, ws);
	if (deleting)
		return kubelet_terminate(s, pod, now);
	if (pod->running)
		return 0;
	const char *node = kubelet_str(pod->j, "spec", "nodeName");
	const char *phase = kubelet_str(pod->j, "status", "phase") ?: "";
	if (!pod->started && node && *node && strcmp(phase, "Pending") == 0 &&
	    kubelet_node_ready(s, node))
		kubelet_start(s, pod);
	else if (pod->restart_at > 0 && now >= pod->restart_at && kubelet_node_ready(s, node)) {
		pod->restart_at = 0;
		kubelet_start(s, pod);
	}
	return 0;
}

void kubelet_run(struct standin *s)
{
	double now = store_mono_s();
	for (int guard = 0; guard < 100000; guard++) {
		bool removed = false;
		for (struct obj *o = s->objs; o; o = o->next)
			if (o->kind == KIND_POD && kubelet_step(s, o, now)) {
				removed = true;
				break;
			}
		if (!removed)
			return;
	}
}

static void kubelet_lost(struct standin *s, struct obj *pod, const char *node)
{
	char msg[400];
	kubelet_kill_now(s, pod);
	pod->restart_at = 0;
	pod->started = true;
	cJSON *st = kubelet_status(pod);
	snprintf(msg, sizeof(msg), "Node %s which was running pod %s is unresponsive", node,
		 pod->name);
	kubelet_set(st, "phase", cJSON_CreateString("Failed"));
	kubelet_set(st, "reason", cJSON_CreateString("NodeLost"));
	kubelet_set(st, "message", cJSON_CreateString(msg));
	kubelet_condition(pod, "Ready", "False", "NodeLost", NULL);
	cJSON *t = kubelet_terminated(pod, SIGKILL, false);
	kubelet_cstatus(pod, "terminated", t, false);
	store_event(s, pod, "Warning", "NodeNotReady", "node-controller", "%s", msg);
	store_touch(s, pod, "MODIFIED");
}

void kubelet_evict(struct standin *s, struct obj *pod, const char *msg)
{
	kubelet_kill_now(s, pod);
	pod->restart_at = 0;
	pod->started = true;
	cJSON *st = kubelet_status(pod);
	kubelet_set(st, "phase", cJSON_CreateString("Failed"));
	kubelet_set(st, "reason", cJSON_CreateString("Evicted"));
	kubelet_set(st, "message", cJSON_CreateString(msg));
	kubelet_condition(pod, "DisruptionTarget", "True", "TerminationByKubelet", msg);
	kubelet_condition(pod, "Ready", "False", "PodFailed", NULL);
	cJSON *t = kubelet_terminated(pod, SIGKILL, false);
	kubelet_cstatus(pod, "terminated", t, false);
	store_event(s, pod, "Warning", "Evicted", "kubelet", "%s", msg);
	store_touch(s, pod, "MODIFIED");
}

void kubelet_node_down(struct standin *s, const char *node)
{
	for (struct obj *o = s->objs; o; o = o->next) {
		const char *n = kubelet_str(o->j, "spec", "nodeName");
		const char *phase = kubelet_str(o->j, "status", "phase") ?: "";
		if (o->kind == KIND_POD && n && strcmp(n, node) == 0 &&
		    (strcmp(phase, "Pending") == 0 || strcmp(phase, "Running") == 0))
			kubelet_lost(s, o, node);
	}
}

void kubelet_resize(struct standin *s, struct obj *pod)
{
	struct node_load load;
	const char *node = kubelet_str(pod->j, "spec", "nodeName");
	struct obj *n = node ? store_find(s, KIND_NODE, "", node) : NULL;
	if (n) {
		int64_t cpu = 0, mem = 0;
		const cJSON *alloc =
			cJSON_GetObjectItem(cJSON_GetObjectItem(n->j, "status"), "allocatable");
		quantity_parse(kubelet_str(alloc, "cpu", NULL), true, &cpu);
		quantity_parse(kubelet_str(alloc, "memory", NULL), false, &mem);
		sched_node_load(s, node, &load);
		if (load.cpu_m > cpu || load.mem_b > mem) {
			kubelet_condition(pod, "PodResizePending", "True", "Infeasible",
					  "Node didn't have enough capacity");
			return;
		}
	}
	int64_t lim = quantity_pod_mem_limit(pod->j);
	if (pod->cg[0] && lim > 0) {
		char val[32];
		snprintf(val, sizeof(val), "%lld", (long long)lim);
		bool v2 = kubelet_v2(s);
		if (!v2) /* v1 keeps memsw >= limit: raise it first when growing */
			kubelet_cg_write(pod->cg, "memory.memsw.limit_in_bytes", val);
		kubelet_cg_write(pod->cg, v2 ? "memory.max" : "memory.limit_in_bytes", val);
		if (!v2)
			kubelet_cg_write(pod->cg, "memory.memsw.limit_in_bytes", val);
	}
	cJSON *cs =
		cJSON_GetArrayItem(cJSON_GetObjectItem(kubelet_status(pod), "containerStatuses"),
				   0);
	const cJSON *res = cJSON_GetObjectItem(kubelet_container(pod), "resources");
	if (cs && res)
		kubelet_set(cs, "resources", cJSON_Duplicate(res, true));
	cJSON *conds = cJSON_GetObjectItem(kubelet_status(pod), "conditions");
	for (int i = cJSON_GetArraySize(conds) - 1; i >= 0; i--)
		if (strcmp(kubelet_str(cJSON_GetArrayItem(conds, i), "type", NULL) ?: "",
			   "PodResizePending") == 0)
			cJSON_DeleteItemFromArray(conds, i);
}

void kubelet_stop_all(struct standin *s)
{
	for (struct obj *o = s->objs; o; o = o->next)
		if (o->kind == KIND_POD && o->running)
			rv_proc_kill(&o->proc, SIGTERM);
	for (struct obj *o = s->objs; o; o = o->next)
		if (o->kind == KIND_POD && o->running && rv_proc_wait(&o->proc, 2000, NULL) < 0)
			kubelet_kill_now(s, o);
	for (struct obj *o = s->objs; o; o = o->next)
		if (o->kind == KIND_POD)
			kubelet_cgroup_remove(o);
}
