/* usage.c: see usage.h. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parse.h"
#include "usage.h"

/* One process of /proc: its parent, CPU ticks (its own and its reaped
 * children's) and resident pages; in: 1 counted, -1 left out, 0 unknown. */
struct pstat {
	int pid, ppid;
	int64_t ticks, rss;
	int in;
};

static bool pstat_read(int pid, struct pstat *ps)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (k <= 0)
		return false;
	buf[k] = 0;
	const char *p = strrchr(buf, ')'); /* the command may hold spaces and parens */
	int64_t f[25] = { 0 };
	/* after the command: state 3, ppid 4, ..., utime 14, stime 15, cutime
	 * 16, cstime 17, ..., rss 24 */
	for (int field = 3; p && field <= 24; field++) {
		p = strchr(p + 1, ' ');
		if (p && field >= 4)
			f[field] = strtoll(p + 1, NULL, 10);
	}
	if (!p)
		return false;
	*ps = (struct pstat){
		.pid = pid, .ppid = (int)f[4], .ticks = f[14] + f[15] + f[16] + f[17], .rss = f[24]
	};
	return true;
}

static int by_pid(const void *a, const void *b)
{
	const struct pstat *x = a, *y = b;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

int usage_tree(pid_t root, pid_t skip, struct usage_sample *out)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	struct pstat *v = NULL;
	int n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		if (n == cap) {
			int nc = cap ? cap * 2 : 256;
			struct pstat *nv = realloc(v, (size_t)nc * sizeof(*nv));
			if (!nv)
				break;
			v = nv;
			cap = nc;
		}
		int64_t pid = 0;
		if (rv_parse_i64(e->d_name, 1, INT32_MAX, &pid) == 0 && pstat_read((int)pid, &v[n]))
			n++;
	}
	closedir(d);
	qsort(v, (size_t)n, sizeof(*v), by_pid);
	bool found = false;
	for (int i = 0; i < n; i++) {
		if (v[i].pid == root)
			found = true, v[i].in = 1;
		else if (skip > 0 && v[i].pid == skip)
			v[i].in = -1;
	}
	/* a process takes its parent's mark; a pass per level of the tree */
	for (bool more = found; more;) {
		more = false;
		for (int i = 0; i < n; i++) {
			if (v[i].in)
				continue;
			struct pstat key = { .pid = v[i].ppid };
			const struct pstat *pp = bsearch(&key, v, (size_t)n, sizeof(*v), by_pid);
			if (pp && pp->in) {
				v[i].in = pp->in;
				more = true;
			}
		}
	}
	int64_t ticks = 0, pages = 0;
	int count = 0;
	for (int i = 0; i < n; i++)
		if (v[i].in == 1) {
			ticks += v[i].ticks;
			pages += v[i].rss;
			count++;
		}
	free(v);
	if (!found)
		return -ESRCH;
	long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	out->cpu_seconds = (double)ticks / (double)(hz > 0 ? hz : 100);
	out->rss_bytes = pages * (page > 0 ? page : 4096);
	out->nprocs = count;
	return 0;
}

/* The first line of dir/name into buf; 0 or -errno. */
static int read_small(const char *dir, const char *name, char *buf, size_t size)
{
	char path[1200];
	buf[0] = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t k = read(fd, buf, size - 1);
	int rc = k < 0 ? -errno : 0;
	close(fd);
	buf[k > 0 ? k : 0] = 0;
	return rc;
}

/* "key N" of a flat-keyed file like cpu.stat; -1 when absent. */
static int64_t stat_key(const char *text, const char *key)
{
	size_t n = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, n) && p[n] == ' ')
			return strtoll(p + n + 1, NULL, 10);
	return -1;
}

/* Does dir have a CPU quota?  Its cores into *cores. */
static bool has_quota(const char *dir, bool v2, double *cores)
{
	char buf[128];
	if (v2) {
		int64_t quota, period;
		char *save = NULL, *q, *per;
		if (read_small(dir, "cpu.max", buf, sizeof(buf)) < 0 ||
		    !(q = strtok_r(buf, " \n", &save)) || !(per = strtok_r(NULL, " \n", &save)) ||
		    rv_parse_i64(q, 1, INT64_MAX, &quota) < 0 ||
		    rv_parse_i64(per, 1, INT64_MAX, &period) < 0)
			return false; /* "max 100000": none */
		*cores = (double)quota / (double)period;
		return quota > 0;
	}
	char pbuf[64];
	if (read_small(dir, "cpu.cfs_quota_us", buf, sizeof(buf)) < 0 ||
	    read_small(dir, "cpu.cfs_period_us", pbuf, sizeof(pbuf)) < 0)
		return false;
	long long quota = strtoll(buf, NULL, 10), period = strtoll(pbuf, NULL, 10);
	if (quota <= 0 || period <= 0)
		return false; /* -1: none */
	*cores = (double)quota / (double)period;
	return true;
}

int usage_cgroup(const char *cg_root, const char *proc_cgroup, struct usage_sample *out)
{
	char mount[600] = "", rel[600] = "", v2rel[600] = "";
	bool v2 = false, have_v2 = false;
	/* "0::/path" (v2), or v1's "N:cpu,cpuacct:/path", which wins: the cpu
	 * controller is then mounted apart */
	for (const char *p = proc_cgroup; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		char line[700], *c1, *c2;
		size_t n = strcspn(p, "\n");
		if (n >= sizeof(line))
			continue;
		memcpy(line, p, n);
		line[n] = 0;
		if (!(c1 = strchr(line, ':')) || !(c2 = strchr(c1 + 1, ':')))
			continue;
		*c2 = 0;
		if (c1[1] == 0) {
			snprintf(v2rel, sizeof(v2rel), "%s", c2 + 1);
			have_v2 = true;
			continue;
		}
		char ctl[200];
		snprintf(ctl, sizeof(ctl), "%s", c1 + 1);
		bool cpu = false;
		char *save = NULL;
		for (char *t = strtok_r(ctl, ",", &save); t; t = strtok_r(NULL, ",", &save))
			cpu |= !strcmp(t, "cpu");
		if (!cpu)
			continue;
		struct stat st;
		snprintf(mount, sizeof(mount), "%s/%s", cg_root, c1 + 1);
		if (stat(mount, &st) < 0)
			snprintf(mount, sizeof(mount), "%s/cpu", cg_root);
		snprintf(rel, sizeof(rel), "%s", c2 + 1);
		break;
	}
	if (!mount[0] && have_v2) {
		v2 = true;
		snprintf(mount, sizeof(mount), "%s", cg_root);
		snprintf(rel, sizeof(rel), "%s", v2rel);
	}
	if (!mount[0])
		return -ENOENT;
	/* our folder, else (a container's namespace) the mount itself; then
	 * up to the mount for the nearest quota */
	char dir[1200];
	struct stat st;
	snprintf(dir, sizeof(dir), "%s%s", mount, strcmp(rel, "/") ? rel : "");
	if (stat(dir, &st) < 0)
		snprintf(dir, sizeof(dir), "%s", mount);
	size_t mlen = strlen(mount);
	double cores = 0;
	for (;;) {
		if (has_quota(dir, v2, &cores))
			break;
		char *slash = strrchr(dir, '/');
		if (strlen(dir) <= mlen || !slash || (size_t)(slash - dir) < mlen)
			return -ENOENT;
		*slash = 0;
	}
	char text[1024] = "";
	if (read_small(dir, "cpu.stat", text, sizeof(text)) < 0)
		return -ENOENT;
	out->has_quota = true;
	out->quota_cores = cores;
	out->nr_periods = stat_key(text, "nr_periods");
	out->nr_throttled = stat_key(text, "nr_throttled");
	int64_t t = v2 ? stat_key(text, "throttled_usec") : stat_key(text, "throttled_time");
	out->throttled_us = t < 0 ? -1 : v2 ? t : t / 1000;
	return 0;
}
