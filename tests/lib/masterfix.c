/*
 * masterfix.c: start/stop the real rover-master for integration tests and
 * benchmarks (see masterfix.h).  The master runs through common/proc in its
 * own process group.
 */
#include "masterfix.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brainfix.h"
#include "clock.h"
#include "parse.h"

static const char *bin_dir(void)
{
	const char *d = getenv("ROVER_BIN_DIR");
	return d && *d ? d : "build/bin";
}

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int port = -EADDRNOTAVAIL;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

char *rv_test_master_spec(long size, long shard_size, int epochs, int min, int max)
{
	char *s = NULL;
	if (asprintf(&s,
		     "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		     "\"metadata\":{\"name\":\"test-job\"},"
		     "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
		     "\"optimizeMode\":\"manual\","
		     "\"replicaSpecs\":{\"worker\":{\"replicas\":%d,\"minReplicas\":%d,"
		     "\"maxReplicas\":%d}},"
		     "\"datasets\":[{\"name\":\"train\",\"size\":%ld,\"shardSize\":%ld,"
		     "\"epochs\":%d,\"shuffle\":true}]}}",
		     min, min, max, size, shard_size, epochs) < 0)
		return NULL;
	return s;
}

int rv_test_master_start_job(struct rv_test_master *m, long size, long shard_size, int epochs,
			     int min, int max, const char *const *args)
{
	char *spec = rv_test_master_spec(size, shard_size, epochs, min, max);
	if (!spec)
		return -ENOMEM;
	int rc = rv_test_master_init(m, spec);
	free(spec);
	return rc < 0 ? rc : rv_test_master_start(m, args);
}

int rv_test_master_init(struct rv_test_master *m, const char *spec_json)
{
	memset(m, 0, sizeof(*m));
	m->proc.pidfd = -1;
	m->exit_status = -1;
	snprintf(m->dir, sizeof(m->dir), "/tmp/rover-master-test-XXXXXX");
	if (!mkdtemp(m->dir))
		return -errno;
	snprintf(m->spec, sizeof(m->spec), "%s/job.json", m->dir);
	snprintf(m->state, sizeof(m->state), "%s/state", m->dir);
	snprintf(m->log, sizeof(m->log), "%s/master.log", m->dir);
	FILE *f = fopen(m->spec, "w");
	if (!f)
		return -errno;
	fputs(spec_json, f);
	fclose(f);
	int port = free_port();
	if (port < 0)
		return port;
	m->port = port;
	snprintf(m->addr, sizeof(m->addr), "127.0.0.1:%d", port);
	snprintf(m->url, sizeof(m->url), "http://127.0.0.1:%d", port);
	return 0;
}

static int start(struct rv_test_master *m)
{
	int lfd = open(m->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (lfd < 0)
		return -errno;
	char exe[512], listen[64];
	snprintf(exe, sizeof(exe), "%s/rover-master", bin_dir());
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", m->port);
	const char *argv[48] = {
		exe, "--job", m->spec, "--state-dir", m->state, "--listen", listen
	};
	int n = 7;
	for (int i = 0; i < m->nargs && n < 46; i++)
		argv[n++] = m->args[i];
	argv[n] = NULL;
	struct rv_proc_opts o = {
		.argv = argv,
		.io = { { RV_PROC_NULL }, { RV_PROC_PIPE }, { RV_PROC_FD, lfd } },
		.pdeathsig = SIGKILL,
	};
	int rc = rv_proc_spawn(&m->proc, &o);
	if (rc < 0)
		dprintf(lfd, "could not run %s: %s\n", exe, strerror(-rc));
	close(lfd);
	if (rc < 0)
		return rc;
	m->pid = m->proc.pid;
	char addr[256];
	int st = -1;
	rc = rv_test_proc_listening(&m->proc, 30000, addr, sizeof(addr), &st);
	if (rc == 0)
		return 0;
	if (rc == -ECHILD) {
		m->exit_status = st;
		m->pid = 0;
		rv_proc_release(&m->proc);
		return -ECHILD;
	}
	rv_proc_kill(&m->proc, SIGKILL);
	rv_proc_wait(&m->proc, -1, NULL);
	rv_proc_release(&m->proc);
	m->pid = 0;
	return -ETIMEDOUT;
}

int rv_test_master_restart(struct rv_test_master *m)
{
	m->exit_status = -1;
	int rc = start(m);
	if (rc < 0 && rc != -ECHILD) {
		char *log = rv_test_read_file(m->log);
		fprintf(stderr, "rover-master did not start (%s); its log:\n%s\n", strerror(-rc),
			log ? log : "(none)");
		free(log);
	}
	return rc;
}

int rv_test_master_start(struct rv_test_master *m, const char *const *args)
{
	m->nargs = 0;
	for (int i = 0; args && args[i] && m->nargs < 31; i++)
		m->args[m->nargs++] = args[i];
	return rv_test_master_restart(m);
}

int rv_test_master_bench_start(struct rv_test_master *m, const char *spec_json)
{
	static const char *const args[] = { "--log-level", "warn", NULL };
	signal(SIGPIPE, SIG_IGN);
	if (!spec_json)
		return -ENOMEM;
	int rc = rv_test_master_init(m, spec_json);
	return rc < 0 ? rc : rv_test_master_start(m, args);
}

int rv_test_master_stop(struct rv_test_master *m, int sig, int timeout_ms)
{
	if (m->pid <= 0)
		return -ESRCH;
	int st = 0;
	int r = rv_proc_kill(&m->proc, sig ? sig : SIGTERM);
	if (r == 0 || r == -ESRCH)
		r = rv_proc_wait(&m->proc, timeout_ms, &st);
	if (r == -ETIMEDOUT) {
		rv_proc_kill(&m->proc, SIGKILL);
		rv_proc_wait(&m->proc, -1, &st);
	}
	rv_proc_release(&m->proc);
	m->pid = 0;
	return r < 0 ? r : st;
}

void rv_test_master_cleanup(struct rv_test_master *m)
{
	rv_test_master_stop(m, SIGKILL, 5000);
	if (m->dir[0]) {
		const char *argv[] = { "rm", "-rf", m->dir, NULL };
		struct rv_proc_opts o = { .argv = argv };
		rv_proc_run(&o, 10000, NULL, NULL);
	}
}

struct rv_master_client *rv_test_master_client(const struct rv_test_master *m)
{
	struct rv_master_opts o = {
		.url = m->url,
		.timeout_ms = 10000,
		.max_attempts = 200,
		.backoff_ms = 10,
		.backoff_max_ms = 200,
		.retry_budget_ms = 30000,
	};
	return rv_master_client_new(&o, NULL);
}

enum rv_rdzv_status rv_test_master_world_of(struct rv_master_client *c, const char *node,
					    int64_t round)
{
	struct rv_rdzv_world_reply w;
	struct rv_err err = { 0 };
	ck_assert_msg(rv_master_world(c, node, round, 0, &w, &err) == 0, "%s", err.msg);
	enum rv_rdzv_status s = w.status;
	rv_rdzv_world_reply_release(&w);
	return s;
}

int64_t rv_test_master_wait_dead(struct rv_master_client *c, const char *node, int64_t round,
				 int64_t since, int64_t within_ms)
{
	while (rv_mono_ms() < since + within_ms) {
		if (rv_test_master_world_of(c, node, round) == RV_RDZV_UNKNOWN)
			return rv_mono_ms() - since;
		usleep(10000);
	}
	return -1;
}

struct rv_master_client *rv_test_agent_client(const char *addr, int max_attempts, int budget_ms)
{
	char url[200];
	snprintf(url, sizeof(url), "http://%s", addr);
	struct rv_master_opts o = { .url = url,
				    .max_attempts = max_attempts,
				    .backoff_ms = 10,
				    .backoff_max_ms = 200,
				    .retry_budget_ms = budget_ms };
	return rv_master_client_new(&o, NULL);
}

void *rv_test_shard_worker_main(void *arg)
{
	struct rv_test_shard_worker *w = arg;
	struct rv_err err = { 0 };
	struct rv_master_opts o = {
		.url = w->url,
		.max_attempts = 200,
		.backoff_ms = 10,
		.backoff_max_ms = 200,
	};
	struct rv_master_client *c = rv_master_client_new(&o, &err);
	if (!c) {
		w->rc = err.code;
		snprintf(w->err, sizeof(w->err), "%s", err.msg);
		return NULL;
	}
	struct rv_shard_next req = { .worker = w->worker };
	snprintf(req.node, sizeof(req.node), "%s", w->node);
	w->rc = 0;
	while (!(w->stop && atomic_load(w->stop)) && !(w->max_tasks && w->tasks >= w->max_tasks)) {
		struct rv_shard_task t;
		int rc = rv_master_shard_next(c, &req, &t, &err);
		if (rc < 0) {
			w->rc = rc;
			snprintf(w->err, sizeof(w->err), "%s", err.msg);
			break;
		}
		if (t.status == RV_SHARD_FINISHED)
			break;
		if (t.status == RV_SHARD_WAIT) {
			usleep(2000);
			continue;
		}
		struct rv_shard_done d = { .worker = w->worker, .id = t.id };
		snprintf(d.node, sizeof(d.node), "%s", w->node);
		if ((rc = rv_master_shard_done(c, &d, NULL, &err)) < 0) {
			w->rc = rc;
			snprintf(w->err, sizeof(w->err), "%s", err.msg);
			break;
		}
		for (int64_t i = t.start; i < t.end; i++)
			atomic_fetch_add(&w->counts[(int64_t)t.epoch * w->size + i], 1);
		w->tasks++;
		w->samples += t.end - t.start;
	}
	rv_master_client_free(c);
	return NULL;
}

void rv_test_count_once(const atomic_int *counts, long n, long *lost, long *twice)
{
	*lost = *twice = 0;
	for (long i = 0; i < n; i++) {
		int v = atomic_load(&counts[i]);
		*lost += v == 0;
		*twice += v > 1;
	}
}

void rv_test_assert_once(const atomic_int *counts, long n, const char *what)
{
	long lost, twice;
	rv_test_count_once(counts, n, &lost, &twice);
	ck_assert_msg(lost == 0 && twice == 0, "%ld %s lost, %ld processed twice", lost, what,
		      twice);
}

bool rv_test_cgroup_memory_usable(const char **why)
{
	if (geteuid() != 0) {
		*why = "not root";
		return false;
	}
	if (access("/sys/fs/cgroup/memory/memory.limit_in_bytes", W_OK) == 0 ||
	    access("/sys/fs/cgroup/memory", W_OK) == 0)
		return true;
	char *ctl = rv_test_read_file("/sys/fs/cgroup/cgroup.controllers");
	bool ok = ctl && strstr(ctl, "memory");
	free(ctl);
	*why = "no cgroup v1 memory hierarchy nor a v2 memory controller";
	return ok;
}

/* This process's memory limit in MiB from its cgroup (v1 memory hierarchy,
 * else v2), or -1 when none is readable.  A limit raised in place after
 * the launch (the role's memory grew) is seen here, not in the env. */
static int64_t own_memory_limit_mb(void)
{
	char *cg = rv_test_read_file("/proc/self/cgroup");
	int64_t mb = -1;
	for (char *line = cg ? strtok(cg, "\n") : NULL; line && mb < 0; line = strtok(NULL, "\n")) {
		char *path = strchr(line, ':') ? strchr(strchr(line, ':') + 1, ':') : NULL;
		if (!path)
			continue;
		bool v1 = strstr(line, ":memory:") != NULL;
		bool v2 = strncmp(line, "0::", 3) == 0;
		if (!v1 && !v2)
			continue;
		char file[4200];
		snprintf(file, sizeof(file), "/sys/fs/cgroup%s%s/%s", v1 ? "/memory" : "", path + 1,
			 v1 ? "memory.limit_in_bytes" : "memory.max");
		char *v = rv_test_read_file(file);
		int64_t bytes = 0;
		if (v && rv_parse_i64(strtok(v, "\n"), 0, INT64_MAX, &bytes) == 0 && bytes > 0 &&
		    bytes < ((int64_t)1 << 50))
			mb = bytes >> 20;
		free(v);
	}
	free(cg);
	return mb;
}

int rv_test_sim_oom(int64_t oom_below)
{
	const char *mem_s = getenv("ROVER_NODE_MEMORY_MB");
	int64_t mem = 0;
	if (oom_below <= 0 || !mem_s || rv_parse_i64(mem_s, 0, INT64_MAX, &mem) < 0 || mem <= 0 ||
	    mem >= oom_below)
		return 0;
	int64_t now = own_memory_limit_mb();
	if (now >= oom_below)
		return 0; /* the limit grew in place since the launch */
	size_t sz = (size_t)160 << 20;
	char *p = malloc(sz);
	for (size_t i = 0; p && i < sz; i += 4096)
		p[i] = 1;
	fprintf(stderr, "simulated agent: %zu bytes touched under %lld MiB, not killed\n", sz,
		(long long)mem);
	free(p);
	/* The master may have raised this node's limit in place while we
	 * touched the memory (another node's OOM grows the whole role). */
	if (own_memory_limit_mb() >= oom_below)
		return 0;
	sleep(2);
	return 3;
}
