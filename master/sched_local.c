/*
 * sched_local.c: the "local" scheduler backend (see sched_local.h).
 *
 * The poll-able fd is an epoll set holding an eventfd (events queued by
 * launch), a timerfd (grace periods of removals running out) and each live
 * node's pidfd (readable once it exited).  next_event() does the work those
 * wake-ups ask for: it kills what outlived its grace, reaps what exited,
 * reads the node's OOM counter and peak before removing its cgroup, and
 * hands out queued events in order.  Nothing blocks but the short wait for a
 * killed cgroup to empty before rmdir.
 *
 * Hierarchies: hier[0] is the memory one (v1) or the unified one (v2),
 * hier[1] cpu and hier[2] cpuacct (v1 only, each "" when absent).
 */
#include "sched_local.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "parse.h"
#include "proc.h"
#include "usage.h"

#define NHIER         3
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define CG_PATH          512
#define POLL_NO_PIDFD_MS 100
#define CPU_PERIOD_US    100000
#define EP_EVENTFD       0
#define EP_TIMERFD       1
#define EP_NODE0         2

struct lnode {
	bool used;
	char name[SCHED_NAME_MAX], role[SCHED_ROLE_MAX], host[SCHED_NAME_MAX];
	int rank;
	struct sched_resources res;
	struct rv_proc p;
	char cg[NHIER][CG_PATH]; /* "" where none */
	bool removing;
	bool adopted;       /* started by a previous master: not our child */
	int64_t ticks;      /* adopted: its start time, against pid reuse */
	int64_t kill_at_ms; /* removing: SIGKILL from then on */
	bool killed;
};

struct local {
	struct sched base;
	enum sched_local_mode mode;
	char why[1024];
	bool detach;
	char parent[NHIER][CG_PATH]; /* rover/<job>-<pid> per hierarchy, or "" */
	char rover[NHIER][CG_PATH];  /* its rover/ folder, removed when empty */
	char log_dir[CG_PATH];
	int epfd, evfd, tfd;
	struct lnode *nodes;
	int max;
	struct sched_event *q; /* queued events, q[qhead..qlen) */
	size_t qhead, qlen, qcap;
};

static const char *const hier_v1[NHIER] = { "memory", "cpu", "cpuacct" };

const char *sched_local_mode_name(enum sched_local_mode m)
{
	switch (m) {
	case SCHED_LOCAL_AUTO:
		return "auto";
	case SCHED_LOCAL_CGROUP2:
		return "cgroup2";
	case SCHED_LOCAL_CGROUP1:
		return "cgroup1";
	case SCHED_LOCAL_RLIMIT:
		return "rlimit";
	case SCHED_LOCAL_NONE:
		return "none";
	}
	return "?";
}

/* ---- cgroup files ---- */

static int cg_write(const char *dir, const char *file, const char *val)
{
	char path[CG_PATH + 64];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, val, strlen(val));
	int e = n < 0 ? -errno : 0;
	close(fd);
	return e;
}

/* Read dir/file into buf (NUL-terminated); bytes read or -errno. */
static ssize_t cg_read(const char *dir, const char *file, char *buf, size_t size)
{
	char path[CG_PATH + 64];
	buf[0] = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, size - 1);
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	buf[n] = 0;
	return n;
}

/* The number on the line "key N" of dir/file; -1 when absent. */
static int64_t cg_key(const char *dir, const char *file, const char *key)
{
	char buf[4096];
	if (!dir[0] || cg_read(dir, file, buf, sizeof(buf)) < 0)
		return -1;
	size_t kl = strlen(key);
	for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, key, kl) && l[kl] == ' ')
			return strtoll(l + kl + 1, NULL, 10);
	return -1;
}

/* The single number in dir/file; -1 when absent. */
static int64_t cg_num(const char *dir, const char *file)
{
	char buf[64];
	if (!dir[0] || cg_read(dir, file, buf, sizeof(buf)) < 0)
		return -1;
	return strtoll(buf, NULL, 10);
}

static bool cg_has(const char *dir, const char *file)
{
	char path[CG_PATH + 64];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	return access(path, F_OK) == 0;
}

/* Our own cgroup in the hierarchy of controller ctl ("" for v2's "0::"):
 * the path part of /proc/self/cgroup, "/" at the root. */
static int own_cgroup(const char *ctl, char *out, size_t size)
{
	char buf[4096];
	int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	int e = errno;
	close(fd);
	if (k < 0)
		return -e;
	buf[k] = 0;
	return rv_usage_parse_pid_cgroup(buf, ctl[0] ? RV_CGROUP_V1 : RV_CGROUP_V2, ctl, out, size);
}

/* The mount point of the cgroup2 hierarchy, from /proc/self/mountinfo. */
static int cgroup2_mount(char *out, size_t size)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	char line[2048];
	int r = -ENOENT;
	while (r < 0 && fgets(line, sizeof(line), f)) {
		/* id parent maj:min root mountpoint opts... - fstype source superopts */
		char *sep = strstr(line, " - ");
		if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0)
			continue;
		char mp[1024];
		if (sscanf(line, "%*s %*s %*s %*s %1023s", mp) == 1 && strlen(mp) < size) {
			memcpy(out, mp, strlen(mp) + 1);
			r = 0;
		}
	}
	fclose(f);
	return r;
}

static void join_path(char *out, size_t size, const char *a, const char *b)
{
	size_t n = strlen(a);
	while (n > 1 && a[n - 1] == '/')
		n--;
	snprintf(out, size, "%.*s%s%s", (int)n, a, b[0] == '/' ? "" : "/", b);
	size_t m = strlen(out);
	while (m > 1 && out[m - 1] == '/')
		out[--m] = 0;
}

static int make_dir(const char *path)
{
	if (mkdir(path, 0755) == 0 || errno == EEXIST)
		return 0;
	return -errno;
}

/* Does the v2 list in dir/file ("cpu io memory") name every one of want? */
static bool v2_lists(const char *dir, const char *file, const char *missing_out[1])
{
	char buf[512];
	static const char *const want[] = { "memory", "cpu" };
	if (cg_read(dir, file, buf, sizeof(buf)) < 0)
		buf[0] = 0;
	for (size_t i = 0; i < RV_ARRAY_SIZE(want); i++) {
		bool found = false;
		for (char *t = buf; *t && !found;) {
			t += strspn(t, " \n");
			size_t n = strcspn(t, " \n");
			found = n == strlen(want[i]) && !strncmp(t, want[i], n);
			t += n;
		}
		if (!found) {
			*missing_out = want[i];
			return false;
		}
	}
	return true;
}

/* Remove what a master of this job killed earlier left in rover/: folders
 * <job>-<pid> whose pid is gone, with their node cgroups (the nodes died
 * with it: PR_SET_PDEATHSIG).  Only empty cgroups can go, so a live tree is
 * never harmed. */
static void sweep(const char *rover, const char *job)
{
	DIR *d = opendir(rover);
	size_t jl = strlen(job);
	for (struct dirent *e; d && (e = readdir(d));) {
		char *end = NULL;
		if (strncmp(e->d_name, job, jl) != 0 || e->d_name[jl] != '-')
			continue;
		long pid = strtol(e->d_name + jl + 1, &end, 10);
		if (pid <= 0 || *end || pid == getpid() || kill((pid_t)pid, 0) == 0 ||
		    errno != ESRCH)
			continue;
		char dir[CG_PATH];
		join_path(dir, sizeof(dir), rover, e->d_name);
		DIR *nd = opendir(dir);
		for (struct dirent *n; nd && (n = readdir(nd));) {
			char sub[CG_PATH + 256];
			if (n->d_type == DT_DIR && n->d_name[0] != '.') {
				snprintf(sub, sizeof(sub), "%s/%s", dir, n->d_name);
				rmdir(sub);
			}
		}
		if (nd)
			closedir(nd);
		rmdir(dir);
	}
	if (d)
		closedir(d);
}

/* Set up rover/<leaf> with memory and cpu below our own v2 cgroup. */
static int setup_v2(struct local *s, const char *job, const char *leaf, char *why, size_t wsize)
{
	char mnt[CG_PATH], own[CG_PATH], base[CG_PATH];
	int r = cgroup2_mount(mnt, sizeof(mnt));
	if (r < 0) {
		snprintf(why, wsize, "cgroup v2: no cgroup2 mount");
		return -EOPNOTSUPP;
	}
	if (own_cgroup("", own, sizeof(own)) < 0)
		snprintf(own, sizeof(own), "/");
	join_path(base, sizeof(base), mnt, own);
	const char *missing = NULL;
	if (!v2_lists(base, "cgroup.controllers", &missing)) {
		snprintf(why, wsize, "cgroup v2: no %s controller in %s", missing, base);
		return -EOPNOTSUPP;
	}
	join_path(s->rover[0], CG_PATH, base, "rover");
	join_path(s->parent[0], CG_PATH, s->rover[0], leaf);
	const char *step = "enable controllers in";
	const char *where = base;
	if ((r = cg_write(base, "cgroup.subtree_control", "+memory +cpu")) == 0) {
		step = "make";
		where = s->rover[0];
		r = make_dir(s->rover[0]);
	}
	if (r == 0) {
		step = "enable controllers in";
		r = cg_write(s->rover[0], "cgroup.subtree_control", "+memory +cpu");
		sweep(s->rover[0], job);
	}
	if (r == 0) {
		step = "make";
		where = s->parent[0];
		r = make_dir(s->parent[0]);
	}
	if (r == 0) {
		step = "enable controllers in";
		r = cg_write(s->parent[0], "cgroup.subtree_control", "+memory +cpu");
	}
	if (r < 0) {
		snprintf(why, wsize, "cgroup v2: could not %s %s: %s", step, where, strerror(-r));
		rmdir(s->parent[0]);
		rmdir(s->rover[0]);
		s->parent[0][0] = s->rover[0][0] = 0;
		return -EOPNOTSUPP;
	}
	return 0;
}

/* Set up rover/<leaf> in the v1 memory hierarchy (required) and the cpu and
 * cpuacct ones (when they work; notes in why otherwise). */
static int setup_v1(struct local *s, const char *job, const char *leaf, char *why, size_t wsize)
{
	size_t wl = strlen(why);
	for (int h = 0; h < NHIER; h++) {
		char mnt[CG_PATH], own[CG_PATH], base[CG_PATH];
		join_path(mnt, sizeof(mnt), "/sys/fs/cgroup", hier_v1[h]);
		const char *probe = h == 0   ? "memory.limit_in_bytes"
				    : h == 1 ? "cpu.cfs_quota_us"
					     : "cpuacct.usage";
		int r = -ENOENT;
		if (cg_has(mnt, probe)) {
			if (own_cgroup(hier_v1[h], own, sizeof(own)) < 0)
				snprintf(own, sizeof(own), "/");
			join_path(base, sizeof(base), mnt, own);
			join_path(s->rover[h], CG_PATH, base, "rover");
			join_path(s->parent[h], CG_PATH, s->rover[h], leaf);
			r = make_dir(s->rover[h]);
			if (r == 0) {
				sweep(s->rover[h], job);
				r = make_dir(s->parent[h]);
			}
			if (r < 0)
				rmdir(s->rover[h]);
		}
		if (r < 0) {
			snprintf(why + wl, wsize - wl, "%scgroup v1 %s: %s", wl ? "; " : "",
				 hier_v1[h],
				 r == -ENOENT && !s->rover[h][0] ? "not mounted at /sys/fs/cgroup"
								 : strerror(-r));
			wl = strlen(why);
			s->parent[h][0] = s->rover[h][0] = 0;
			if (h == 0)
				return -EOPNOTSUPP;
		}
	}
	return 0;
}

static void teardown_parent(struct local *s)
{
	for (int h = 0; h < NHIER; h++) {
		if (s->parent[h][0])
			rmdir(s->parent[h]);
		if (s->rover[h][0])
			rmdir(s->rover[h]); /* only when no other master uses it */
	}
}

/* ---- nodes ---- */

static bool name_ok(const char *n, size_t max)
{
	if (!n || !n[0] || n[0] == '.' || strlen(n) >= max)
		return false;
	for (const char *c = n; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_' && *c != '.')
			return false;
	return true;
}

static struct lnode *find(struct local *s, const char *name)
{
	for (int i = 0; i < s->max; i++)
		if (s->nodes[i].used && !strcmp(s->nodes[i].name, name))
			return &s->nodes[i];
	return NULL;
}

static int queue(struct local *s, const struct sched_event *ev)
{
	if (s->qhead > 0 && s->qhead == s->qlen)
		s->qhead = s->qlen = 0;
	if (s->qlen == s->qcap) {
		size_t cap = s->qcap ? s->qcap * 2 : 16;
		struct sched_event *q = realloc(s->q, cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		s->q = q;
		s->qcap = cap;
	}
	s->q[s->qlen++] = *ev;
	uint64_t one = 1;
	ssize_t w = write(s->evfd, &one, sizeof(one));
	(void)w; /* a full counter is still readable */
	return 0;
}

static void event_of(const struct lnode *n, enum sched_event_type t, struct sched_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->type = t;
	snprintf(ev->name, sizeof(ev->name), "%s", n->name);
	snprintf(ev->role, sizeof(ev->role), "%s", n->role);
	snprintf(ev->host, sizeof(ev->host), "%s", n->host);
	ev->rank = n->rank;
	ev->memory_limit_mb = n->res.memory_mb;
}

/* Write the limits of res into the node's cgroups. */
static int apply_limits(struct local *s, struct lnode *n, const struct sched_resources *res)
{
	char v[64];
	int r = 0;
	int64_t bytes = res->memory_mb > 0 ? res->memory_mb << 20 : -1;
	int64_t quota = res->cpu > 0 ? (int64_t)(res->cpu * CPU_PERIOD_US + 0.5) : -1;
	if (quota > 0 && quota < 1000)
		quota = 1000; /* the kernel's minimum */
	if (s->mode == SCHED_LOCAL_CGROUP2) {
		if (bytes > 0)
			snprintf(v, sizeof(v), "%lld", (long long)bytes);
		else
			snprintf(v, sizeof(v), "max");
		r = cg_write(n->cg[0], "memory.max", v);
		/* Swap would hide an overrun from the limit. */
		if (r == 0 && cg_has(n->cg[0], "memory.swap.max"))
			cg_write(n->cg[0], "memory.swap.max", bytes > 0 ? "0" : "max");
		if (quota > 0)
			snprintf(v, sizeof(v), "%lld %d", (long long)quota, CPU_PERIOD_US);
		else
			snprintf(v, sizeof(v), "max %d", CPU_PERIOD_US);
		if (r == 0)
			r = cg_write(n->cg[0], "cpu.max", v);
		return r;
	}
	if (s->mode != SCHED_LOCAL_CGROUP1)
		return 0;
	snprintf(v, sizeof(v), "%lld", (long long)bytes);
	/* memsw >= limit at every instant: when the limit grows, memsw first. */
	bool sw = cg_has(n->cg[0], "memory.memsw.limit_in_bytes");
	int64_t cur = cg_num(n->cg[0], "memory.limit_in_bytes");
	bool grow_mem = bytes < 0 || (cur >= 0 && bytes >= cur);
	if (sw && grow_mem)
		r = cg_write(n->cg[0], "memory.memsw.limit_in_bytes", v);
	if (r == 0)
		r = cg_write(n->cg[0], "memory.limit_in_bytes", v);
	if (r == 0 && sw && !grow_mem)
		r = cg_write(n->cg[0], "memory.memsw.limit_in_bytes", v);
	if (r == 0 && n->cg[1][0]) {
		snprintf(v, sizeof(v), "%d", CPU_PERIOD_US);
		r = cg_write(n->cg[1], "cpu.cfs_period_us", v);
		snprintf(v, sizeof(v), "%lld", (long long)quota);
		if (r == 0)
			r = cg_write(n->cg[1], "cpu.cfs_quota_us", v);
	}
	return r;
}

/* SIGKILL whatever is left in the node's cgroup (processes that left its
 * group); v2 has cgroup.kill, v1 gets each pid of cgroup.procs. */
static void cg_kill_all(struct local *s, const struct lnode *n)
{
	if (!n->cg[0][0])
		return;
	if (s->mode == SCHED_LOCAL_CGROUP2 && cg_write(n->cg[0], "cgroup.kill", "1") == 0)
		return;
	char buf[8192];
	if (cg_read(n->cg[0], "cgroup.procs", buf, sizeof(buf)) <= 0)
		return;
	char *save = NULL;
	for (char *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
		long pid = strtol(t, NULL, 10);
		if (pid > 0)
			kill((pid_t)pid, SIGKILL);
	}
}

/* Remove the node's cgroups once empty (killed processes take a moment). */
static void cg_remove(struct local *s, struct lnode *n)
{
	for (int h = 0; h < NHIER; h++) {
		if (!n->cg[h][0])
			continue;
		for (int i = 0; i < 100 && rmdir(n->cg[h]) < 0 && errno == EBUSY; i++) {
			cg_kill_all(s, n);
			usleep(10000);
		}
		n->cg[h][0] = 0;
	}
}

/* A slot never used holds zeroes, not closed fds: release only a used one
 * (releasing zeroes would close fd 0, which a socket may hold by then). */
static void node_clear(struct lnode *n)
{
	if (n->used)
		rv_proc_release(&n->p);
	memset(n, 0, sizeof(*n));
	n->p.pidfd = -1;
	for (int i = 0; i < 3; i++)
		n->p.fd[i] = -1;
}

/* Check sp and take a free slot for it: *out, *slot its index.  0, or
 * -EINVAL (a bad spec), -EEXIST, -ENOSPC with err. */
static int slot_take(struct local *s, const struct sched_node_spec *sp, struct lnode **out,
		     int *slot, struct rv_err *err)
{
	if (!sp || !name_ok(sp->name, SCHED_NAME_MAX))
		return rv_err_set(
			err, -EINVAL, "name",
			"a node name is 1 to 63 of [A-Za-z0-9._-], not starting with '.'");
	if (!sp->role || strlen(sp->role) >= SCHED_ROLE_MAX)
		return rv_err_set(err, -EINVAL, "role", "a role of 1 to 31 bytes is needed");
	if (sp->host && strlen(sp->host) >= SCHED_NAME_MAX)
		return rv_err_set(err, -EINVAL, "host", "host longer than 63 bytes");
	if (!sp->argv || !sp->argv[0])
		return rv_err_set(err, -EINVAL, "argv", "no command for node %s", sp->name);
	if (sp->res.cpu < 0 || sp->res.memory_mb < 0 || sp->res.gpu < 0)
		return rv_err_set(err, -EINVAL, "res", "negative resources for node %s", sp->name);
	if (find(s, sp->name))
		return rv_err_set(err, -EEXIST, "name", "node %s is already running", sp->name);
	struct lnode *n = NULL;
	int i = 0;
	for (; i < s->max && !n; i++)
		if (!s->nodes[i].used)
			n = &s->nodes[i];
	if (!n)
		return rv_err_set(err, -ENOSPC, "", "%d nodes already run here", s->max);
	*slot = i - 1;
	node_clear(n);
	n->used = true;
	snprintf(n->name, sizeof(n->name), "%s", sp->name);
	snprintf(n->role, sizeof(n->role), "%s", sp->role);
	snprintf(n->host, sizeof(n->host), "%s", sp->host ? sp->host : "");
	n->rank = sp->rank;
	n->res = sp->res;
	*out = n;
	return 0;
}

/* A process's start time in clock ticks after boot (field 22 of
 * /proc/<pid>/stat), or -1 when it is gone. */
static int64_t start_ticks(int pid)
{
	struct rv_proc_sample ps;
	return rv_usage_proc_sample(pid, &ps) == 0 ? (int64_t)ps.starttime : -1;
}

/* The node's cgroup in each hierarchy we have, and an fd on its
 * cgroup.procs (>= 3) in cgfd[] for the spawn; detail says why on failure. */
static int launch_cgroups(const struct local *s, struct lnode *n, int cgfd[NHIER], char *detail,
			  size_t size)
{
	for (int h = 0; h < NHIER; h++) {
		if (!s->parent[h][0])
			continue;
		join_path(n->cg[h], CG_PATH, s->parent[h], n->name);
		int r = make_dir(n->cg[h]);
		if (r < 0) {
			snprintf(detail, size, "could not make cgroup %.180s: %s", n->cg[h],
				 strerror(-r));
			n->cg[h][0] = 0;
			return r;
		}
		char procs[CG_PATH + 16];
		join_path(procs, sizeof(procs), n->cg[h], "cgroup.procs");
		cgfd[h] = open(procs, O_WRONLY | O_CLOEXEC);
		if (cgfd[h] >= 0 && cgfd[h] < 3) { /* our 0..2 may be closed: proc wants >= 3 */
			int hi = fcntl(cgfd[h], F_DUPFD_CLOEXEC, 3);
			close(cgfd[h]);
			cgfd[h] = hi;
		}
		if (cgfd[h] < 0) {
			r = -errno;
			snprintf(detail, size, "could not open %.200s: %s", procs, strerror(errno));
			return r;
		}
	}
	return 0;
}

/* The node's log (the spec's, else <log_dir>/<name>.log, else none) open
 * for appending into *logfd. */
static int launch_log(const struct local *s, const struct sched_node_spec *sp,
		      const struct lnode *n, int *logfd, char *detail, size_t size)
{
	char logp[CG_PATH + SCHED_NAME_MAX + 8];
	const char *log = sp->log_path;
	if (!log && s->log_dir[0]) {
		snprintf(logp, sizeof(logp), "%s/%s.log", s->log_dir, n->name);
		log = logp;
	}
	if (!log)
		return 0;
	*logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (*logfd >= 0)
		return 0;
	int r = -errno;
	snprintf(detail, size, "could not open log %.160s: %s", log, strerror(-r));
	return r;
}

/* Start the node's command in its cgroups, its output to logfd. */
static int launch_spawn(const struct local *s, const struct sched_node_spec *sp, struct lnode *n,
			const int cgfd[NHIER], int logfd, char *detail, size_t size)
{
	/* Who the node is, then the spec's env, which may say otherwise (the
	 * node manager names a relaunched instance by its stable base name). */
	char e_name[SCHED_NAME_MAX + 16], e_rank[32], e_role[SCHED_ROLE_MAX + 16], e_gpu[32];
	snprintf(e_name, sizeof(e_name), "ROVER_NODE_NAME=%s", n->name);
	snprintf(e_rank, sizeof(e_rank), "ROVER_NODE_RANK=%d", n->rank);
	snprintf(e_role, sizeof(e_role), "ROVER_NODE_ROLE=%s", n->role);
	snprintf(e_gpu, sizeof(e_gpu), "ROVER_NODE_GPUS=%d", sp->res.gpu);
	size_t ne = 0;
	while (sp->env && sp->env[ne])
		ne++;
	RV_CLEANUP_FREE const char **env = calloc(ne + 5, sizeof(*env));
	if (!env)
		return -ENOMEM;
	env[0] = e_name;
	env[1] = e_rank;
	env[2] = e_role;
	env[3] = e_gpu;
	for (size_t i = 0; i < ne; i++)
		env[4 + i] = sp->env[i];
	struct rv_proc_opts o = {
		.argv = sp->argv,
		.env = env,
		.io = { { RV_PROC_NULL, -1 } },
		.group = s->detach ? RV_PROC_NEW_SESSION : RV_PROC_NEW_GROUP,
		.pdeathsig = s->detach ? 0 : SIGKILL,
	};
	if (logfd >= 0) {
		o.io[1] = (struct rv_proc_io){ RV_PROC_FD, logfd };
		o.io[2] = (struct rv_proc_io){ RV_PROC_STDOUT, -1 };
	}
	for (int h = 0; h < NHIER; h++)
		if (cgfd[h] >= 0)
			o.cgroup_fds[o.ncgroup++] = cgfd[h];
	if (s->mode == SCHED_LOCAL_RLIMIT && sp->res.memory_mb > 0) {
		rlim_t b = (rlim_t)sp->res.memory_mb << 20;
		o.rlimits[o.nrlimit++] = (struct rv_proc_rlimit){ RLIMIT_AS, { b, b } };
	}
	int r = rv_proc_spawn(&n->p, &o);
	if (r < 0)
		snprintf(detail, size, "could not start %s: %s", sp->argv[0], strerror(-r));
	return r;
}

/* The node's pidfd on the scheduler's epoll, or the node stopped again. */
static int launch_watch(const struct local *s, struct lnode *n, int slot, char *detail, size_t size)
{
	if (n->p.pidfd < 0)
		return 0;
	struct epoll_event ee = { .events = EPOLLIN, .data.u64 = (uint64_t)slot + EP_NODE0 };
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, n->p.pidfd, &ee) == 0)
		return 0;
	int r = -errno;
	snprintf(detail, size, "could not watch node %s: %s", n->name, strerror(errno));
	rv_proc_stop(&n->p, 0, NULL);
	return r;
}

static int local_launch(struct sched *base, const struct sched_node_spec *sp, struct rv_err *err)
{
	struct local *s = (struct local *)base;
	int slot = 0;
	struct lnode *n = NULL;
	int rc = slot_take(s, sp, &n, &slot, err);
	if (rc < 0)
		return rc;

	struct sched_event ev;
	char detail[SCHED_DETAIL_MAX] = "";
	int cgfd[NHIER] = { -1, -1, -1 }, logfd = -1;
	int r = launch_cgroups(s, n, cgfd, detail, sizeof(detail));
	if (r == 0 && (r = apply_limits(s, n, &sp->res)) < 0)
		snprintf(detail, sizeof(detail), "could not set the limits of cgroup %.160s: %s",
			 n->cg[0], strerror(-r));
	if (r == 0)
		r = launch_log(s, sp, n, &logfd, detail, sizeof(detail));
	if (r == 0)
		r = launch_spawn(s, sp, n, cgfd, logfd, detail, sizeof(detail));
	for (int h = 0; h < NHIER; h++)
		if (cgfd[h] >= 0)
			close(cgfd[h]);
	if (logfd >= 0)
		close(logfd);
	if (r == 0)
		r = launch_watch(s, n, slot, detail, sizeof(detail));
	event_of(n, r == 0 ? SCHED_EV_STARTED : SCHED_EV_FAILED, &ev);
	if (r < 0) {
		ev.err = r;
		snprintf(ev.detail, sizeof(ev.detail), "%s", detail);
		cg_remove(s, n);
		node_clear(n);
	} else {
		ev.pid = (int)n->p.pid;
		ev.start_ticks = start_ticks(ev.pid);
		snprintf(ev.detail, sizeof(ev.detail), "pid %d limits %s", (int)n->p.pid,
			 sched_local_mode_name(s->mode));
	}
	return queue(s, &ev);
}

/* The cgroups of an adopted node, from /proc/<pid>/cgroup: the part from
 * "/rover/" on (rover/<job>-<old pid>/<name>) below our own rover/ folder
 * of each hierarchy.  A hierarchy where it cannot be found stays "". */
static void adopt_cgroups(struct local *s, struct lnode *n, int pid)
{
	char path[64], line[CG_PATH + 64];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		char *at = c2 ? strstr(c2 + 1, "/rover/") : NULL;
		if (!at)
			continue;
		*c2 = 0;
		for (int h = 0; h < NHIER; h++) {
			bool match =
				s->mode == SCHED_LOCAL_CGROUP2
					? h == 0 && !c1[1]
					: (!strcmp(c1 + 1, hier_v1[h]) ||
					   (strstr(c1 + 1, hier_v1[h]) && strchr(c1 + 1, ',')));
			if (!match || !s->rover[h][0])
				continue;
			snprintf(n->cg[h], CG_PATH, "%.300s%.200s", s->rover[h],
				 at + strlen("/rover"));
			if (access(n->cg[h], F_OK) < 0)
				n->cg[h][0] = 0;
		}
	}
	if (f)
		fclose(f);
}

static int local_adopt(struct sched *base, const struct sched_node_spec *sp, int pid, int64_t ticks,
		       struct rv_err *err)
{
	struct local *s = (struct local *)base;
	if (pid <= 0 || ticks <= 0 || start_ticks(pid) != ticks)
		return rv_err_set(err, -ESRCH, "pid", "node %s (pid %d) is gone",
				  sp && sp->name ? sp->name : "?", pid);
	int slot = 0;
	struct lnode *n = NULL;
	int rc = slot_take(s, sp, &n, &slot, err);
	if (rc < 0 || !n)
		return rc < 0 ? rc : -ENOSPC;
	n->adopted = true;
	n->ticks = ticks;
	n->p.pid = pid;
	n->p.pgid = pid; /* its own session */
	n->p.pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	/* Opened on the right process? The start time says the pid was not
	 * reused between the check above and the open. */
	if (start_ticks(pid) != ticks) {
		node_clear(n);
		return rv_err_set(err, -ESRCH, "pid", "node %s (pid %d) is gone", sp->name, pid);
	}
	if (n->p.pidfd >= 0) {
		struct epoll_event ee = { .events = EPOLLIN,
					  .data.u64 = (uint64_t)slot + EP_NODE0 };
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, n->p.pidfd, &ee) < 0) {
			int e = -errno;
			node_clear(n);
			return rv_err_set(err, e, "", "could not watch node %s: %s", sp->name,
					  strerror(-e));
		}
	}
	adopt_cgroups(s, n, pid);
	struct sched_event ev;
	event_of(n, SCHED_EV_STARTED, &ev);
	ev.pid = pid;
	ev.start_ticks = ticks;
	snprintf(ev.detail, sizeof(ev.detail), "adopted pid %d cgroup %.200s", pid,
		 n->cg[0][0] ? n->cg[0] : "none");
	return queue(s, &ev);
}

/* The timer fires at the earliest grace end of a removal still running. */
static void arm_timer(struct local *s)
{
	int64_t first = INT64_MAX;
	for (int i = 0; i < s->max; i++) {
		if (s->nodes[i].used && s->nodes[i].removing && !s->nodes[i].killed &&
		    s->nodes[i].kill_at_ms < first)
			first = s->nodes[i].kill_at_ms;
		/* Without a pidfd (old kernels, valgrind) nothing tells us of an
		 * exit: look every POLL_NO_PIDFD_MS. */
		if (s->nodes[i].used && s->nodes[i].p.pidfd < 0 &&
		    rv_mono_ms() + POLL_NO_PIDFD_MS < first)
			first = rv_mono_ms() + POLL_NO_PIDFD_MS;
	}
	struct itimerspec it = { { 0, 0 }, { 0, 0 } };
	if (first != INT64_MAX) {
		int64_t left = first - rv_mono_ms();
		if (left < 1)
			left = 1;
		it.it_value.tv_sec = left / 1000;
		it.it_value.tv_nsec = (left % 1000) * 1000000L;
	}
	timerfd_settime(s->tfd, 0, &it, NULL);
}

static int local_remove(struct sched *base, const char *name, int grace_ms)
{
	struct local *s = (struct local *)base;
	struct lnode *n = name ? find(s, name) : NULL;
	if (!n)
		return -ENOENT;
	if (n->removing)
		return 0;
	n->removing = true;
	n->kill_at_ms = rv_mono_ms() + (grace_ms > 0 ? grace_ms : 0);
	rv_proc_kill(&n->p, grace_ms > 0 ? SIGTERM : SIGKILL);
	n->killed = grace_ms <= 0;
	arm_timer(s);
	return 0;
}

static int local_resize(struct sched *base, const char *name, const struct sched_resources *res,
			struct rv_err *err)
{
	struct local *s = (struct local *)base;
	struct lnode *n = name ? find(s, name) : NULL;
	if (!n || n->p.reaped)
		return rv_err_set(err, -ENOENT, "name", "no live node %s", name ? name : "");
	if (s->mode == SCHED_LOCAL_NONE) { /* nothing enforced: nothing to relaunch for */
		n->res.cpu = res->cpu;
		n->res.memory_mb = res->memory_mb;
		return 0;
	}
	if (s->mode != SCHED_LOCAL_CGROUP1 && s->mode != SCHED_LOCAL_CGROUP2)
		return rv_err_set(err, -EOPNOTSUPP, "", "limits set by %s cannot change live",
				  sched_local_mode_name(s->mode));
	int r = apply_limits(s, n, res);
	if (r < 0)
		return rv_err_set(err, r, "", "could not resize node %s in %s: %s", n->name,
				  n->cg[0], strerror(-r));
	n->res.cpu = res->cpu;
	n->res.memory_mb = res->memory_mb;
	return 0;
}

static int local_fd(struct sched *base)
{
	return ((struct local *)base)->epfd;
}

/* The node exited (its pidfd is readable, or we polled): kill what it left
 * behind, reap it, classify the death, remove its cgroups, queue the event. */
static void node_exited(struct local *s, struct lnode *n)
{
	int st = -1;
	if (!n->adopted) {
		rv_proc_kill(&n->p, SIGKILL); /* its group; the zombie leader holds the id */
		rv_proc_wait(&n->p, -1, &st);
	}
	cg_kill_all(s, n);
	int64_t ooms = 0, peak = -1;
	if (s->mode == SCHED_LOCAL_CGROUP2) {
		ooms = cg_key(n->cg[0], "memory.events", "oom_kill");
		peak = cg_num(n->cg[0], "memory.peak");
	} else if (s->mode == SCHED_LOCAL_CGROUP1) {
		ooms = cg_key(n->cg[0], "memory.oom_control", "oom_kill");
		peak = cg_num(n->cg[0], "memory.max_usage_in_bytes");
	}
	bool ok = st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	struct sched_event ev;
	/* A process of the node killed by the OOM killer, and the node did
	 * not end well: the memory limit ended it (a shell running the
	 * command reports it as exit 137, hence not only SIGKILL). */
	event_of(n, ooms > 0 && !ok && !n->removing ? SCHED_EV_OOM : SCHED_EV_EXITED, &ev);
	ev.removed = n->removing;
	ev.status_unknown = n->adopted;
	ev.exit_code = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	ev.signal = st >= 0 && WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	ev.peak_memory_mb = peak > 0 ? (peak + (1 << 20) - 1) >> 20 : 0;
	if (ev.type == SCHED_EV_OOM)
		snprintf(ev.detail, sizeof(ev.detail),
			 "oom-killed under a %lld MiB limit (%lld kill(s), peak %lld MiB)",
			 (long long)n->res.memory_mb, (long long)ooms,
			 (long long)ev.peak_memory_mb);
	else if (ev.signal)
		snprintf(ev.detail, sizeof(ev.detail), "killed by signal %d", ev.signal);
	else
		snprintf(ev.detail, sizeof(ev.detail), "exited with code %d", ev.exit_code);
	cg_remove(s, n);
	node_clear(n);
	queue(s, &ev);
}

static int local_next_event(struct sched *base, struct sched_event *ev)
{
	struct local *s = (struct local *)base;
	uint64_t v;
	while (read(s->evfd, &v, sizeof(v)) > 0)
		;
	while (read(s->tfd, &v, sizeof(v)) > 0)
		;
	int64_t now = rv_mono_ms();
	for (int i = 0; i < s->max; i++) {
		struct lnode *n = &s->nodes[i];
		if (!n->used)
			continue;
		if (n->removing && !n->killed && n->kill_at_ms <= now) {
			rv_proc_kill(&n->p, SIGKILL);
			cg_kill_all(s, n);
			n->killed = true;
		}
		bool gone;
		if (n->p.pidfd >= 0) {
			struct pollfd pf = { .fd = n->p.pidfd, .events = POLLIN };
			gone = poll(&pf, 1, 0) > 0;
		} else if (n->adopted) {
			gone = start_ticks(n->p.pid) != n->ticks; /* not ours to wait for */
		} else {
			/* WNOHANG answers 0 also while it runs: si_pid says which. */
			siginfo_t si = { 0 };
			gone = waitid(P_PID, (id_t)n->p.pid, &si, WEXITED | WNOHANG | WNOWAIT) ==
				       0 &&
			       si.si_pid != 0;
		}
		if (gone)
			node_exited(s, n);
	}
	arm_timer(s);
	if (s->qhead == s->qlen)
		return 0;
	*ev = s->q[s->qhead++];
	if (s->qhead < s->qlen) { /* more to read: stay readable */
		uint64_t one = 1;
		ssize_t w = write(s->evfd, &one, sizeof(one));
		(void)w;
	}
	return 1;
}

/* Without cgroups: the CPU and resident memory of the node's process and
 * its live descendants, from /proc (a dead descendant's CPU counts once its
 * parent reaped it).  No throttling: nothing enforces a quota here. */
static int proc_tree_usage(int root, struct sched_usage *u)
{
	struct rv_proc_tree t;
	int rc = rv_usage_proc_tree(NULL, root, 0, &t);
	if (rc < 0)
		return rc;
	u->cpu_seconds = (double)t.ticks / (double)rv_usage_clk_tck();
	u->memory_bytes = t.rss_kb * 1024;
	return 0;
}

static int local_usage(struct sched *base, const char *name, struct sched_usage *u)
{
	struct local *s = (struct local *)base;
	struct lnode *n = name ? find(s, name) : NULL;
	if (!n)
		return -ENOENT;
	*u = (struct sched_usage){ -1, -1, -1, -1, -1, -1 };
	if (s->mode == SCHED_LOCAL_CGROUP2 || s->mode == SCHED_LOCAL_CGROUP1) {
		/* v1: memory, cpu and cpuacct are hierarchies of their own
		 * (cg[0], cg[1], cg[2]; cpu and cpuacct may be one folder) */
		bool v2 = s->mode == SCHED_LOCAL_CGROUP2;
		enum rv_cgroup_mode mode = v2 ? RV_CGROUP_V2 : RV_CGROUP_V1;
		struct rv_cgroup_cpu c, acct;
		struct rv_cgroup_mem mem;
		if (n->cg[v2 ? 0 : 1][0] && rv_usage_cgroup_cpu(mode, n->cg[v2 ? 0 : 1], &c) == 0 &&
		    c.has_periods) {
			u->nr_periods = c.nr_periods;
			u->nr_throttled = c.nr_throttled;
			u->throttled_usec = (int64_t)c.throttled_us;
		}
		const char *cpu_dir = n->cg[v2 ? 0 : 2];
		if (cpu_dir[0] && rv_usage_cgroup_cpu(mode, cpu_dir, &acct) == 0)
			u->cpu_seconds = (double)acct.usage_us / 1e6;
		if (n->cg[0][0] && rv_usage_cgroup_mem(mode, n->cg[0], &mem) == 0) {
			u->memory_bytes = mem.current_bytes;
			u->memory_peak_bytes = mem.peak_bytes;
		}
		return 0;
	}
	return n->p.pid > 0 ? proc_tree_usage(n->p.pid, u) : -ESRCH;
}

static void local_free(struct sched *base)
{
	struct local *s = (struct local *)base;
	for (int i = 0; s->nodes && i < s->max; i++) {
		struct lnode *n = &s->nodes[i];
		if (!n->used)
			continue;
		rv_proc_kill(&n->p, SIGKILL);
		cg_kill_all(s, n);
		rv_proc_wait(&n->p, -1, NULL);
		cg_remove(s, n);
		node_clear(n);
	}
	teardown_parent(s);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->evfd >= 0)
		close(s->evfd);
	if (s->tfd >= 0)
		close(s->tfd);
	free(s->nodes);
	free(s->q);
	free(s);
}

/* This machine: its online CPUs and its memory. */
static int local_shape(struct sched *base, struct sched_resources *out)
{
	(void)base;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
	if (cpus <= 0 || pages <= 0 || size <= 0)
		return -EOPNOTSUPP;
	out->cpu = (double)cpus;
	out->memory_mb = (int64_t)pages * size / (1024 * 1024);
	return 0;
}

static const struct sched_ops local_ops = {
	.name = "local",
	.launch = local_launch,
	.remove = local_remove,
	.resize = local_resize,
	.fd = local_fd,
	.next_event = local_next_event,
	.usage = local_usage,
	.adopt = local_adopt,
	.free = local_free,
	.shape = local_shape,
};

static void why_add(char *why, size_t size, const char *a)
{
	size_t l = strlen(why);
	snprintf(why + l, size - l, "%s%s", l ? "; " : "", a);
}

struct sched *sched_local_new(const struct sched_local_opts *o, struct rv_err *err)
{
	const char *job = o && o->job ? o->job : "job";
	if (!name_ok(job, 48)) {
		rv_err_set(err, -EINVAL, "job", "a job name is 1 to 47 of [A-Za-z0-9._-]");
		return NULL;
	}
	if (o && o->log_dir && strlen(o->log_dir) >= CG_PATH) {
		rv_err_set(err, -EINVAL, "log_dir", "log_dir longer than %d bytes", CG_PATH - 1);
		return NULL;
	}
	struct local *s = calloc(1, sizeof(*s));
	if (!s) {
		rv_err_set(err, -ENOMEM, "", "out of memory");
		return NULL;
	}
	s->base.ops = &local_ops;
	s->epfd = s->evfd = s->tfd = -1;
	s->max = o && o->max_nodes > 0 ? o->max_nodes : 1024;
	if (o && o->log_dir)
		snprintf(s->log_dir, sizeof(s->log_dir), "%s", o->log_dir);
	s->detach = o && o->detach;
	s->nodes = calloc((size_t)s->max, sizeof(*s->nodes));
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	struct epoll_event e1 = { .events = EPOLLIN, .data.u64 = EP_EVENTFD };
	struct epoll_event e2 = { .events = EPOLLIN, .data.u64 = EP_TIMERFD };
	if (!s->nodes || s->epfd < 0 || s->evfd < 0 || s->tfd < 0 ||
	    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &e1) < 0 ||
	    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->tfd, &e2) < 0) {
		rv_err_set(err, errno ? -errno : -ENOMEM, "",
			   "could not set up the local backend: %s",
			   strerror(errno ? errno : ENOMEM));
		local_free(&s->base);
		return NULL;
	}
	for (int i = 0; i < s->max; i++)
		s->nodes[i].p.pidfd = -1;

	char leaf[64];
	snprintf(leaf, sizeof(leaf), "%s-%d", job, (int)getpid());
	enum sched_local_mode want = o ? o->mode : SCHED_LOCAL_AUTO;
	char why[sizeof(s->why)] = "";
	int r = -EOPNOTSUPP;
	if (want == SCHED_LOCAL_AUTO || want == SCHED_LOCAL_CGROUP2) {
		r = setup_v2(s, job, leaf, why, sizeof(why));
		if (r == 0)
			s->mode = SCHED_LOCAL_CGROUP2;
	}
	if (r < 0 && (want == SCHED_LOCAL_AUTO || want == SCHED_LOCAL_CGROUP1)) {
		r = setup_v1(s, job, leaf, why, sizeof(why));
		if (r == 0)
			s->mode = SCHED_LOCAL_CGROUP1;
	}
	if (r < 0 && (want == SCHED_LOCAL_AUTO || want == SCHED_LOCAL_RLIMIT)) {
		s->mode = SCHED_LOCAL_RLIMIT;
		why_add(why, sizeof(why),
			"rlimits: memory as RLIMIT_AS, no CPU limit, no OOM detection");
		r = 0;
	}
	if (r < 0 && want == SCHED_LOCAL_NONE) {
		s->mode = SCHED_LOCAL_NONE;
		r = 0;
	}
	if (r < 0) {
		rv_err_set(err, -EOPNOTSUPP, "mode", "could not use %s limits: %s",
			   sched_local_mode_name(want), why);
		local_free(&s->base);
		return NULL;
	}
	snprintf(s->why, sizeof(s->why), "%s", why);
	return &s->base;
}

enum sched_local_mode sched_local_mode(struct sched *base, const char **why)
{
	struct local *s = (struct local *)base;
	if (why)
		*why = s->why;
	return s->mode;
}

const char *sched_local_cgroup(struct sched *base)
{
	return ((struct local *)base)->parent[0];
}

const char *sched_local_node_cgroup(struct sched *base, const char *name)
{
	struct lnode *n = find((struct local *)base, name);
	return n && n->cg[0][0] ? n->cg[0] : NULL;
}
