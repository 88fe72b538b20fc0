/* usage.c: see usage.h. */
#include "usage.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_MAX_ 512

/* Read path into buf (NUL-terminated, truncated to size - 1): bytes read or
 * -errno. */
static ssize_t read_text(const char *path, char *buf, size_t size)
{
	buf[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t at = 0;
	while (at + 1 < size) {
		ssize_t n = read(fd, buf + at, size - 1 - at);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			close(fd);
			return e;
		}
		if (n == 0)
			break;
		at += (size_t)n;
	}
	close(fd);
	buf[at] = '\0';
	return (ssize_t)at;
}

static ssize_t read_at(const char *dir, const char *file, char *buf, size_t size)
{
	char path[PATH_MAX_ + 64];
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
		return -ENAMETOOLONG;
	return read_text(path, buf, size);
}

static const char *next_line(const char *l)
{
	const char *nl = strchr(l, '\n');
	return nl ? nl + 1 : NULL;
}

/* The number after "key " on a line of text; -ENOENT when absent. */
static int key_u64(const char *text, const char *key, uint64_t *out)
{
	size_t kl = strlen(key);
	for (const char *l = text; l && *l; l = next_line(l))
		if (!strncmp(l, key, kl) && (l[kl] == ' ' || l[kl] == ':')) {
			const char *v = l + kl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			char *end;
			errno = 0;
			unsigned long long x = strtoull(v, &end, 10);
			if (end == v || errno)
				return -EINVAL;
			*out = x;
			return 0;
		}
	return -ENOENT;
}

/* ---- host CPU ---- */

int rv_usage_parse_cpu_times(const char *text, struct rv_cpu_times *out)
{
	memset(out, 0, sizeof(*out));
	bool seen = false;
	for (const char *l = text; l && *l; l = next_line(l)) {
		if (strncmp(l, "cpu", 3) != 0)
			break; /* the cpu lines come first */
		if (isdigit((unsigned char)l[3])) {
			out->ncpu++;
			continue;
		}
		unsigned long long v[10] = { 0 };
		int n = 0;
		const char *q = l + 3;
		while (n < 10) {
			char *end;
			errno = 0;
			unsigned long long x = strtoull(q, &end, 10);
			if (end == q || errno)
				break;
			v[n++] = x;
			q = end;
			if (*q == '\n' || !*q)
				break;
		}
		if (n < 4)
			return -EINVAL;
		/* guest and guest_nice (8, 9) are already in user and nice */
		for (int i = 0; i < n && i < 8; i++)
			out->total += v[i];
		out->idle = v[3] + (n > 4 ? v[4] : 0);
		seen = true;
	}
	return seen && out->ncpu > 0 ? 0 : -EINVAL;
}

int rv_usage_cpu_times(struct rv_cpu_times *out)
{
	char buf[16384];
	ssize_t n = read_text("/proc/stat", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	return rv_usage_parse_cpu_times(buf, out);
}

double rv_usage_cpu_busy(const struct rv_cpu_times *prev, const struct rv_cpu_times *cur)
{
	if (cur->total <= prev->total || cur->ncpu <= 0)
		return 0;
	uint64_t dt = cur->total - prev->total;
	uint64_t di = cur->idle >= prev->idle ? cur->idle - prev->idle : 0;
	if (di > dt)
		di = dt;
	return (double)(dt - di) / (double)dt * cur->ncpu;
}

/* ---- memory ---- */

int rv_usage_parse_meminfo(const char *text, struct rv_meminfo *out)
{
	uint64_t t, a;
	if (key_u64(text, "MemTotal", &t) < 0)
		return -EINVAL;
	if (key_u64(text, "MemAvailable", &a) < 0) {
		/* kernels before 3.14: free + buffers + cached */
		uint64_t f = 0, b = 0, c = 0;
		if (key_u64(text, "MemFree", &f) < 0)
			return -EINVAL;
		key_u64(text, "Buffers", &b);
		key_u64(text, "Cached", &c);
		a = f + b + c;
	}
	out->total_kb = (int64_t)t;
	out->available_kb = (int64_t)(a > t ? t : a);
	return 0;
}

int rv_usage_meminfo(struct rv_meminfo *out)
{
	char buf[8192];
	ssize_t n = read_text("/proc/meminfo", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	return rv_usage_parse_meminfo(buf, out);
}

/* ---- PSI ---- */

int rv_usage_parse_psi(const char *text, struct rv_psi *out)
{
	memset(out, 0, sizeof(*out));
	bool some = false;
	for (const char *l = text; l && *l; l = next_line(l)) {
		/* "some avg10=0.12 avg60=0.05 avg300=0.00 total=1234" */
		bool is_some = !strncmp(l, "some ", 5), is_full = !strncmp(l, "full ", 5);
		const char *a = strstr(l, "avg10="), *b = strstr(l, "avg60="),
			   *t = strstr(l, "total=");
		const char *nl = strchr(l, '\n');
		if ((!is_some && !is_full) || !a || !b || !t ||
		    (nl && (a > nl || b > nl || t > nl)))
			return -EINVAL;
		char *end;
		double a10 = strtod(a + 6, &end);
		if (end == a + 6)
			return -EINVAL;
		double a60 = strtod(b + 6, &end);
		if (end == b + 6)
			return -EINVAL;
		errno = 0;
		unsigned long long total = strtoull(t + 6, &end, 10);
		if (end == t + 6 || errno)
			return -EINVAL;
		if (is_some) {
			out->some_avg10 = a10;
			out->some_avg60 = a60;
			out->some_total_us = total;
			some = true;
		} else {
			out->has_full = true;
			out->full_avg10 = a10;
			out->full_avg60 = a60;
			out->full_total_us = total;
		}
	}
	return some ? 0 : -EINVAL;
}

int rv_usage_psi(const char *path, struct rv_psi *out)
{
	char buf[512];
	ssize_t n = read_text(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	return rv_usage_parse_psi(buf, out);
}

/* ---- cgroups ---- */

const char *rv_cgroup_mode_name(enum rv_cgroup_mode m)
{
	return m == RV_CGROUP_V2 ? "v2" : m == RV_CGROUP_V1 ? "v1" : "none";
}

/* Mount point of a cgroup file system from /proc/self/mountinfo: fstype
 * "cgroup2", or "cgroup" with super options holding ctl. */
static int find_mount(const char *fstype, const char *ctl, char *out, size_t size)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	char line[1024];
	int rc = -ENOENT;
	size_t fl = strlen(fstype);
	while (rc < 0 && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");
		if (!sep || strncmp(sep + 3, fstype, fl) != 0 || sep[3 + fl] != ' ')
			continue;
		if (ctl) {
			/* "cgroup cgroup rw,cpu,cpuacct": the last field lists controllers */
			char *opts = strrchr(sep, ' ');
			bool has = false;
			size_t cl = strlen(ctl);
			for (char *o = opts ? opts + 1 : sep; o && *o;) {
				if (!strncmp(o, ctl, cl) &&
				    (o[cl] == ',' || o[cl] == '\n' || !o[cl]))
					has = true;
				o = strchr(o, ',');
				o = o ? o + 1 : NULL;
			}
			if (!has)
				continue;
		}
		char mnt[PATH_MAX_];
		/* id parent major:minor root mountpoint ... */
		if (sscanf(line, "%*s %*s %*s %*s %511s", mnt) != 1)
			continue;
		if ((size_t)snprintf(out, size, "%s", mnt) >= size)
			rc = -ENAMETOOLONG;
		else
			rc = 0;
	}
	fclose(f);
	return rc;
}

enum rv_cgroup_mode rv_usage_cgroup_mode(char *mnt, size_t size)
{
	char m[PATH_MAX_], buf[512];
	mnt[0] = '\0';
	if (find_mount("cgroup2", NULL, m, sizeof(m)) == 0 &&
	    read_at(m, "cgroup.controllers", buf, sizeof(buf)) >= 0) {
		for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n"))
			if (!strcmp(t, "cpu")) {
				snprintf(mnt, size, "%s", m);
				return RV_CGROUP_V2;
			}
	}
	if (find_mount("cgroup", "cpu", m, sizeof(m)) == 0)
		return RV_CGROUP_V1;
	return RV_CGROUP_NONE;
}

int rv_usage_parse_pid_cgroup(const char *text, enum rv_cgroup_mode mode, const char *ctl,
			      char *out, size_t size)
{
	for (const char *l = text; l && *l; l = next_line(l)) {
		/* hierarchy-id:controller-list:path */
		const char *c1 = strchr(l, ':');
		const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		const char *nl = strchr(c2, '\n');
		size_t plen = nl ? (size_t)(nl - c2 - 1) : strlen(c2 + 1);
		bool match;
		if (mode == RV_CGROUP_V2) {
			match = c2 == c1 + 1 && !strncmp(l, "0:", 2);
		} else {
			match = false;
			size_t cl = strlen(ctl);
			for (const char *o = c1 + 1; o < c2;) {
				const char *e = memchr(o, ',', (size_t)(c2 - o));
				size_t ol = e ? (size_t)(e - o) : (size_t)(c2 - o);
				if (ol == cl && !strncmp(o, ctl, cl))
					match = true;
				o = e ? e + 1 : c2;
			}
		}
		if (!match)
			continue;
		if (plen + 1 > size)
			return -ENAMETOOLONG;
		memcpy(out, c2 + 1, plen);
		out[plen] = '\0';
		return 0;
	}
	return -ENOENT;
}

int rv_usage_pid_cgroup(pid_t pid, enum rv_cgroup_mode mode, const char *mnt, const char *ctl,
			char *out, size_t size)
{
	char path[64], buf[4096], rel[PATH_MAX_], base[PATH_MAX_];
	if (mode == RV_CGROUP_NONE)
		return -ENOENT;
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	ssize_t n = read_text(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	int rc = rv_usage_parse_pid_cgroup(buf, mode, ctl, rel, sizeof(rel));
	if (rc < 0)
		return rc;
	if (mode == RV_CGROUP_V2)
		snprintf(base, sizeof(base), "%s", mnt);
	else if ((rc = find_mount("cgroup", ctl, base, sizeof(base))) < 0)
		return rc;
	if ((size_t)snprintf(out, size, "%s%s", base, strcmp(rel, "/") ? rel : "") >= size)
		return -ENAMETOOLONG;
	return 0;
}

int rv_usage_parse_cgroup_cpu_stat(const char *text, enum rv_cgroup_mode mode,
				   struct rv_cgroup_cpu *out)
{
	uint64_t v;
	if (key_u64(text, "nr_periods", &v) == 0) {
		out->nr_periods = (int64_t)v;
		out->has_periods = true;
	}
	if (key_u64(text, "nr_throttled", &v) == 0)
		out->nr_throttled = (int64_t)v;
	if (mode == RV_CGROUP_V2) {
		if (key_u64(text, "usage_usec", &v) == 0)
			out->usage_us = v;
		if (key_u64(text, "throttled_usec", &v) == 0)
			out->throttled_us = v;
	} else if (key_u64(text, "throttled_time", &v) == 0) {
		out->throttled_us = v / 1000; /* v1: nanoseconds */
	}
	return 0;
}

int rv_usage_cgroup_cpu(enum rv_cgroup_mode mode, const char *dir, struct rv_cgroup_cpu *out)
{
	char buf[2048];
	memset(out, 0, sizeof(*out));
	out->quota_cores = -1;
	if (mode == RV_CGROUP_NONE)
		return -ENOENT;
	ssize_t n = read_at(dir, "cpu.stat", buf, sizeof(buf));
	if (n < 0 && (mode == RV_CGROUP_V2 || n != -ENOENT))
		return (int)n;
	bool stat = n >= 0;
	if (stat)
		rv_usage_parse_cgroup_cpu_stat(buf, mode, out);
	if (mode == RV_CGROUP_V2) {
		/* "max 100000" or "50000 100000" */
		if (read_at(dir, "cpu.max", buf, sizeof(buf)) > 0 && strncmp(buf, "max", 3) != 0) {
			char *end;
			long long quota = strtoll(buf, &end, 10);
			long long period = end != buf ? strtoll(end, NULL, 10) : 0;
			if (quota > 0 && period > 0)
				out->quota_cores = (double)quota / (double)period;
		}
		return 0;
	}
	if (read_at(dir, "cpuacct.usage", buf, sizeof(buf)) > 0)
		out->usage_us = strtoull(buf, NULL, 10) / 1000;
	else if (!stat)
		return -ENOENT;
	char qb[32], pb[32];
	if (read_at(dir, "cpu.cfs_quota_us", qb, sizeof(qb)) > 0 &&
	    read_at(dir, "cpu.cfs_period_us", pb, sizeof(pb)) > 0) {
		long long q = strtoll(qb, NULL, 10), p = strtoll(pb, NULL, 10);
		if (q > 0 && p > 0)
			out->quota_cores = (double)q / (double)p;
	}
	return 0;
}

int rv_usage_cgroup_quota(enum rv_cgroup_mode mode, const char *mnt, const char *rel,
			  struct rv_cgroup_cpu *out, char *dir, size_t size)
{
	char d[PATH_MAX_];
	struct stat st;
	if ((size_t)snprintf(d, sizeof(d), "%s%s", mnt, strcmp(rel, "/") ? rel : "") >= sizeof(d))
		return -ENAMETOOLONG;
	if (stat(d, &st) < 0)
		snprintf(d, sizeof(d), "%s", mnt);
	size_t mlen = strlen(mnt);
	for (;;) {
		if (rv_usage_cgroup_cpu(mode, d, out) == 0 && out->quota_cores > 0)
			break;
		char *slash = strrchr(d, '/');
		if (strlen(d) <= mlen || !slash || (size_t)(slash - d) < mlen)
			return -ENOENT;
		*slash = '\0';
	}
	if (dir && (size_t)snprintf(dir, size, "%s", d) >= size)
		return -ENAMETOOLONG;
	return 0;
}

/* A number file of dir; -1 when absent or not a number. */
static int64_t num_at(const char *dir, const char *file)
{
	char buf[64];
	if (read_at(dir, file, buf, sizeof(buf)) <= 0 || !isdigit((unsigned char)buf[0]))
		return -1;
	return strtoll(buf, NULL, 10);
}

int rv_usage_cgroup_mem(enum rv_cgroup_mode mode, const char *dir, struct rv_cgroup_mem *out)
{
	char buf[64];
	out->current_bytes = 0;
	out->limit_bytes = -1;
	out->peak_bytes = -1;
	if (mode == RV_CGROUP_NONE)
		return -ENOENT;
	bool v2 = mode == RV_CGROUP_V2;
	ssize_t n = read_at(dir, v2 ? "memory.current" : "memory.usage_in_bytes", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	out->current_bytes = strtoll(buf, NULL, 10);
	if (read_at(dir, v2 ? "memory.max" : "memory.limit_in_bytes", buf, sizeof(buf)) > 0 &&
	    isdigit((unsigned char)buf[0])) {
		long long l = strtoll(buf, NULL, 10);
		/* v1 says "no limit" with a page-rounded LLONG_MAX */
		if (l > 0 && l < (1LL << 60))
			out->limit_bytes = l;
	}
	out->peak_bytes = num_at(dir, v2 ? "memory.peak" : "memory.max_usage_in_bytes");
	return 0;
}

/* ---- processes ---- */

int rv_usage_parse_proc_stat(const char *text, struct rv_proc_sample *out)
{
	memset(out, 0, sizeof(*out));
	out->pid = (pid_t)strtol(text, NULL, 10);
	/* the command sits in parentheses and may hold both: take the last ')' */
	const char *p = strrchr(text, ')');
	if (!p || p[1] != ' ')
		return -EINVAL;
	p += 2;
	/* fields from 3 (state): ppid 4, utime 14, stime 15, cutime 16,
	 * cstime 17, starttime 22, rss 24 */
	unsigned long long f[25] = { 0 };
	int field = 3;
	const char *q = p;
	while (*q == ' ')
		q++;
	q += strcspn(q, " "); /* the state letter */
	while (field < 24) {
		char *end;
		field++;
		errno = 0;
		long long x = strtoll(q, &end, 10);
		if (end == q)
			return -EINVAL;
		f[field] = x < 0 ? 0 : (unsigned long long)x;
		q = end;
	}
	unsigned long long utime = f[14], stime = f[15], start = f[22];
	long long rss = (long long)f[24];
	out->ppid = (pid_t)f[4];
	out->ticks = utime + stime;
	out->child_ticks = f[16] + f[17];
	out->starttime = start;
	static long page_kb;
	if (!page_kb)
		page_kb = sysconf(_SC_PAGESIZE) / 1024;
	out->rss_kb = rss > 0 ? rss * page_kb : 0;
	return 0;
}

static int proc_sample_at(const char *root, pid_t pid, struct rv_proc_sample *out)
{
	char path[PATH_MAX_], buf[1024];
	snprintf(path, sizeof(path), "%s/%d/stat", root, (int)pid);
	ssize_t n = read_text(path, buf, sizeof(buf));
	if (n < 0)
		return n == -ESRCH ? -ENOENT : (int)n;
	return rv_usage_parse_proc_stat(buf, out);
}

int rv_usage_proc_sample(pid_t pid, struct rv_proc_sample *out)
{
	return proc_sample_at("/proc", pid, out);
}

long rv_usage_clk_tck(void)
{
	long hz = sysconf(_SC_CLK_TCK);
	return hz > 0 ? hz : 100;
}

/* A process of a tree walk: in 1 counted, -1 left out, 0 not known yet. */
struct tree_proc {
	struct rv_proc_sample s;
	int in;
};

static int tree_cmp(const void *a, const void *b)
{
	pid_t x = ((const struct tree_proc *)a)->s.pid, y = ((const struct tree_proc *)b)->s.pid;
	return (x > y) - (x < y);
}

int rv_usage_proc_tree(const char *proc_root, pid_t root, pid_t skip, struct rv_proc_tree *out)
{
	const char *pr = proc_root ? proc_root : "/proc";
	memset(out, 0, sizeof(*out));
	DIR *d = opendir(pr);
	if (!d)
		return -errno;
	struct tree_proc *v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	for (struct dirent *e; (e = readdir(d));) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (pid <= 0 || *end)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 256;
			struct tree_proc *nv = realloc(v, nc * sizeof(*nv));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
			cap = nc;
		}
		if (proc_sample_at(pr, (pid_t)pid, &v[n].s) == 0) {
			v[n].s.pid = (pid_t)pid;
			v[n].in = 0;
			n++;
		}
	}
	closedir(d);
	if (rc < 0) {
		free(v);
		return rc;
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), tree_cmp);
	bool found = false;
	for (size_t i = 0; i < n; i++) {
		if (v[i].s.pid == root)
			found = true, v[i].in = 1;
		else if (skip > 0 && v[i].s.pid == skip)
			v[i].in = -1;
	}
	/* a process takes its parent's mark; a pass per level of the tree */
	for (bool more = found; more;) {
		more = false;
		for (size_t i = 0; i < n; i++) {
			if (v[i].in)
				continue;
			struct tree_proc key = { .s.pid = v[i].s.ppid };
			const struct tree_proc *pp = bsearch(&key, v, n, sizeof(*v), tree_cmp);
			if (pp && pp->in) {
				v[i].in = pp->in;
				more = true;
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		if (v[i].in == 1) {
			out->ticks += v[i].s.ticks + v[i].s.child_ticks;
			out->rss_kb += v[i].s.rss_kb;
			out->nprocs++;
		}
	free(v);
	return found ? 0 : -ESRCH;
}

static int proc_env_at(const char *root, pid_t pid, const char *key, char *out, size_t size)
{
	char path[PATH_MAX_];
	snprintf(path, sizeof(path), "%s/%d/environ", root, (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ESRCH ? -ENOENT : -errno;
	/* The environment is one block of NUL-terminated strings; read it in
	 * pieces, keeping a partial entry across reads. */
	char buf[8192];
	size_t have = 0, kl = strlen(key);
	int rc = 0;
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = errno == ESRCH ? -ENOENT : -errno;
			break;
		}
		size_t len = have + (size_t)n, at = 0;
		for (;;) {
			char *z = memchr(buf + at, '\0', len - at);
			if (!z && n > 0)
				break;
			size_t el = z ? (size_t)(z - (buf + at)) : len - at;
			if (el > kl && !strncmp(buf + at, key, kl) && buf[at + kl] == '=') {
				snprintf(out, size, "%.*s", (int)(el - kl - 1), buf + at + kl + 1);
				rc = 1;
				break;
			}
			at += el + 1;
			if (at >= len)
				break;
		}
		if (rc || n == 0)
			break;
		if (at < len) {
			have = len - at;
			if (have == sizeof(buf)) /* one entry longer than buf: skip it */
				have = 0;
			else
				memmove(buf, buf + at, have);
		} else {
			have = 0;
		}
	}
	close(fd);
	return rc;
}

int rv_usage_proc_env(pid_t pid, const char *key, char *out, size_t size)
{
	return proc_env_at("/proc", pid, key, out, size);
}

int rv_usage_job_of_cgroup(const char *path, char *out, size_t size)
{
	for (const char *p = path; (p = strstr(p, "rover/"));) {
		if (p != path && p[-1] != '/') {
			p += 6;
			continue;
		}
		const char *job = p + 6;
		size_t len = strcspn(job, "/\n");
		if (len == 0)
			return 0;
		/* strip "-<pid>" */
		size_t end = len;
		while (end > 0 && isdigit((unsigned char)job[end - 1]))
			end--;
		if (end < len && end > 1 && job[end - 1] == '-')
			len = end - 1;
		if (len + 1 > size)
			len = size - 1;
		memcpy(out, job, len);
		out[len] = '\0';
		return 1;
	}
	return 0;
}

/* ---- job scanner ---- */

/* What the scanner knows of one process; the array is sorted by pid (as
 * readdir of /proc returns them, ascending, on Linux). */
struct pid_entry {
	pid_t pid;
	uint64_t starttime;
	uint64_t ticks;
	char name[RV_USAGE_JOB_NAME_MAX];
};

struct rv_usage_scanner {
	char root[PATH_MAX_ - 64];
	struct pid_entry *prev, *cur;
	size_t nprev, ncap;
};

struct rv_usage_scanner *rv_usage_scanner_new(const char *proc_root)
{
	struct rv_usage_scanner *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	snprintf(s->root, sizeof(s->root), "%s", proc_root ? proc_root : "/proc");
	return s;
}

struct rv_usage_scanner *rv_usage_scanner_free(struct rv_usage_scanner *s)
{
	if (s) {
		free(s->prev);
		free(s->cur);
		free(s);
	}
	return NULL;
}

static int pid_cmp(const void *a, const void *b)
{
	pid_t x = ((const struct pid_entry *)a)->pid, y = ((const struct pid_entry *)b)->pid;
	return (x > y) - (x < y);
}

static const struct pid_entry *prev_find(const struct rv_usage_scanner *s, pid_t pid)
{
	struct pid_entry key = { .pid = pid };
	if (s->nprev == 0)
		return NULL; /* the first scan: nothing known (s->prev may be NULL) */
	return bsearch(&key, s->prev, s->nprev, sizeof(key), pid_cmp);
}

/* Which job pid belongs to: its environment, else its cgroup. */
static void classify(const struct rv_usage_scanner *s, pid_t pid, char *name, size_t size)
{
	name[0] = '\0';
	if (proc_env_at(s->root, pid, "ROVER_JOB_NAME", name, size) == 1 && name[0])
		return;
	name[0] = '\0';
	char path[PATH_MAX_], buf[2048];
	snprintf(path, sizeof(path), "%s/%d/cgroup", s->root, (int)pid);
	if (read_text(path, buf, sizeof(buf)) > 0)
		rv_usage_job_of_cgroup(buf, name, size);
}

static int job_cmp(const void *a, const void *b)
{
	return strcmp(((const struct rv_usage_job *)a)->name,
		      ((const struct rv_usage_job *)b)->name);
}

int rv_usage_scan_jobs(struct rv_usage_scanner *s, struct rv_usage_job *jobs, int max, int *nprocs)
{
	DIR *d = opendir(s->root);
	if (!d)
		return -errno;
	size_t ncur = 0;
	int njobs = 0, seen = 0;
	for (struct dirent *e; (e = readdir(d));) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (pid <= 0 || *end)
			continue;
		seen++;
		struct rv_proc_sample ps;
		if (proc_sample_at(s->root, (pid_t)pid, &ps) < 0)
			continue; /* gone meanwhile */
		struct pid_entry ent = { .pid = (pid_t)pid,
					 .starttime = ps.starttime,
					 .ticks = ps.ticks };
		const struct pid_entry *old = prev_find(s, (pid_t)pid);
		uint64_t delta = 0;
		if (old && old->starttime == ps.starttime) {
			memcpy(ent.name, old->name, sizeof(ent.name));
			delta = ps.ticks >= old->ticks ? ps.ticks - old->ticks : 0;
		} else {
			classify(s, (pid_t)pid, ent.name, sizeof(ent.name));
		}
		if (ent.name[0]) {
			int j = 0;
			while (j < njobs && strcmp(jobs[j].name, ent.name) != 0)
				j++;
			if (j == njobs && njobs < max) {
				memset(&jobs[j], 0, sizeof(jobs[j]));
				memcpy(jobs[j].name, ent.name, sizeof(jobs[j].name));
				jobs[j].first_pid = (pid_t)pid;
				njobs++;
			}
			if (j < njobs) {
				jobs[j].nprocs++;
				jobs[j].ticks += ps.ticks;
				jobs[j].ticks_delta += delta;
				jobs[j].rss_kb += ps.rss_kb;
				if ((pid_t)pid < jobs[j].first_pid)
					jobs[j].first_pid = (pid_t)pid;
			}
		}
		if (ncur == s->ncap) {
			if (s->ncap >= RV_USAGE_MAX_PIDS)
				continue; /* remember no more; the rest are read each time */
			size_t cap = s->ncap ? s->ncap * 2 : 256;
			struct pid_entry *a = realloc(s->cur, cap * sizeof(*a));
			struct pid_entry *b = a ? realloc(s->prev, cap * sizeof(*b)) : NULL;
			if (a)
				s->cur = a;
			if (!b) {
				closedir(d);
				return -ENOMEM;
			}
			s->prev = b;
			s->ncap = cap;
		}
		s->cur[ncur++] = ent;
	}
	closedir(d);
	/* readdir order is ascending on Linux but not promised: keep the
	 * lookup table sorted for bsearch */
	if (ncur > 1)
		qsort(s->cur, ncur, sizeof(*s->cur), pid_cmp);
	struct pid_entry *t = s->prev;
	s->prev = s->cur;
	s->cur = t;
	s->nprev = ncur;
	if (njobs > 1)
		qsort(jobs, (size_t)njobs, sizeof(*jobs), job_cmp);
	if (nprocs)
		*nprocs = seen;
	return njobs;
}
