/*
 * cgpod.c: pod folders in a node's cgroup tree and their usage (cgpod.h),
 * for source_k8s.c on the sampler thread.  Reads cgroupfs and /proc only.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgpod.h"

/* A UID as the kubelet writes it in a folder name: 32 to 36 hex digits and
 * separators (sep: '-' for cgroupfs, '_' for systemd), n characters of s. */
static bool cgpod_uid_ok(const char *s, size_t n, char sep)
{
	if (n < 32 || n > 36)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || s[i] == sep))
			return false;
	return true;
}

/* The UID a folder name holds: 1 (uid filled), 0 none. */
static int cgpod_name_uid(const char *name, size_t len, char *uid, size_t size)
{
	static const char slice[] = ".slice";
	const size_t sl = sizeof(slice) - 1;
	if (len > 3 && strncmp(name, "pod", 3) == 0 && cgpod_uid_ok(name + 3, len - 3, '-')) {
		snprintf(uid, size, "%.*s", (int)(len - 3), name + 3);
		return 1;
	}
	if (len <= sl || strncmp(name + len - sl, slice, sl) != 0)
		return 0;
	const char *p = NULL;
	for (const char *q = name; q + 4 <= name + len - sl; q++)
		if (strncmp(q, "-pod", 4) == 0)
			p = q + 4;
	if (!p || !cgpod_uid_ok(p, (size_t)(name + len - sl - p), '_'))
		return 0;
	snprintf(uid, size, "%.*s", (int)(name + len - sl - p), p);
	for (char *c = uid; *c; c++)
		if (*c == '_')
			*c = '-';
	return 1;
}

int cgpod_uid(const char *path, char *uid, size_t size)
{
	bool kubepods = false;
	const char *p = path;
	while (*p) {
		while (*p == '/')
			p++;
		const char *end = strchr(p, '/');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len == 0)
			break;
		bool last = !end || !end[strspn(end, "/")];
		if (last)
			return kubepods && cgpod_name_uid(p, len, uid, size) == 1 ? 1 : 0;
		if (strncmp(p, "kubepods", 8) == 0)
			kubepods = true;
		else if (kubepods && cgpod_name_uid(p, len, uid, size) == 1)
			return 0; /* inside a pod's folder: its container */
		p += len;
	}
	return 0;
}

static bool cgpod_exists(const char *dir, const char *file)
{
	char p[CGPOD_PATH_MAX + 64];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	return access(p, F_OK) == 0;
}

int cgpod_root_open(const char *root, struct cgpod_root *out, struct rv_err *err)
{
	memset(out, 0, sizeof(*out));
	if (cgpod_exists(root, "cgroup.controllers")) {
		out->mode = RV_CGROUP_V2;
		snprintf(out->mem, sizeof(out->mem), "%s", root);
		return 0;
	}
	out->mode = RV_CGROUP_V1;
	if (cgpod_exists(root, "memory/memory.usage_in_bytes")) {
		snprintf(out->mem, sizeof(out->mem), "%s/memory", root);
		static const char *const cpu[] = { "cpu,cpuacct", "cpuacct,cpu", "cpuacct" };
		for (size_t i = 0; i < sizeof(cpu) / sizeof(cpu[0]) && !out->cpu[0]; i++)
			if (cgpod_exists(root, cpu[i]))
				snprintf(out->cpu, sizeof(out->cpu), "%s/%s", root, cpu[i]);
		return 0;
	}
	if (cgpod_exists(root, "memory.usage_in_bytes")) {
		snprintf(out->mem, sizeof(out->mem), "%s", root);
		return 0;
	}
	return rv_err_set(err, -ENOENT, "cgroup_root",
			  "%s is no cgroup v2 mount, v1 mount or v1 memory folder", root);
}

static void cgpod_walk(const struct cgpod_root *r, const char *rel, int depth,
		       struct cgpod_dir *out, int max, int *n)
{
	char path[CGPOD_PATH_MAX * 2];
	snprintf(path, sizeof(path), "%s%s", r->mem, rel);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *e;
	while (*n < max && (e = readdir(d))) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		char sub[CGPOD_PATH_MAX];
		if (snprintf(sub, sizeof(sub), "%s/%s", rel, e->d_name) >= (int)sizeof(sub))
			continue;
		if (cgpod_uid(sub, out[*n].uid, sizeof(out[*n].uid)) == 1) {
			snprintf(out[*n].rel, sizeof(out[*n].rel), "%s", sub);
			(*n)++;
		} else if (depth < CGPOD_DEPTH) {
			cgpod_walk(r, sub, depth + 1, out, max, n);
		}
	}
	closedir(d);
}

int cgpod_scan(const struct cgpod_root *r, struct cgpod_dir *out, int max)
{
	if (access(r->mem, R_OK | X_OK) < 0)
		return -errno;
	int n = 0;
	cgpod_walk(r, "", 0, out, max, &n);
	return n;
}

/* The processes of dir and its subfolders into u (procs, ticks). */
static void cgpod_procs(const char *dir, int depth, struct cgpod_usage *u)
{
	char path[CGPOD_PATH_MAX * 2], line[32];
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		long pid = strtol(line, NULL, 10);
		struct rv_proc_sample ps;
		if (pid <= 0)
			continue;
		u->procs++;
		if (rv_usage_proc_sample((pid_t)pid, &ps) == 0)
			u->ticks += ps.ticks + ps.child_ticks;
	}
	if (f)
		fclose(f);
	DIR *d = depth < 4 ? opendir(dir) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_type == DT_DIR && e->d_name[0] != '.' &&
		    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path))
			cgpod_procs(path, depth + 1, u);
	if (d)
		closedir(d);
}

int cgpod_usage(const struct cgpod_root *r, const char *rel, struct cgpod_usage *out)
{
	char dir[CGPOD_PATH_MAX * 2];
	struct rv_cgroup_mem m;
	struct rv_cgroup_cpu c;
	memset(out, 0, sizeof(*out));
	snprintf(dir, sizeof(dir), "%s%s", r->mem, rel);
	if (rv_usage_cgroup_mem(r->mode, dir, &m) < 0)
		return -ENOENT;
	out->memory_b = m.current_bytes;
	cgpod_procs(dir, 0, out);
	if (r->mode == RV_CGROUP_V1) {
		if (!r->cpu[0])
			return 0;
		snprintf(dir, sizeof(dir), "%s%s", r->cpu, rel);
	}
	if (access(dir, F_OK) == 0 && rv_usage_cgroup_cpu(r->mode, dir, &c) == 0) {
		out->has_cpu = true;
		out->cpu_us = c.usage_us;
		out->throttled = c.nr_throttled;
	}
	return 0;
}
