/*
 * cgpod.h: pods found in a node's cgroup tree, for the Kubernetes source
 * (source_k8s.c).  The kubelet gives each pod a cgroup folder named after
 * the pod's UID, whatever the version and driver:
 *   cgroupfs  .../kubepods[/burstable|/besteffort]/pod<uid>[/<container>]
 *   systemd   .../kubepods[-burstable|-besteffort]-pod<uid, '-' as '_'>.slice
 *             [/cri-containerd-<id>.scope]
 * under the v2 mount, or under each controller's mount on v1.  cgpod_uid
 * reads the UID out of a path (pure); cgpod_scan walks a tree for pod
 * folders and cgpod_usage reads one's usage.  No state, no threads.
 */
#ifndef MONITOR_CGPOD_H
#define MONITOR_CGPOD_H

#include <stdint.h>

#include "err.h"
#include "usage.h"

#define CGPOD_UID_MAX  40 /* a UUID (36) or a static pod's 32 hex digits */
#define CGPOD_PATH_MAX 768
#define CGPOD_MAX      512 /* pod folders per scan; more are left out */
#define CGPOD_DEPTH    16  /* folders walked below the root at most */

/* The pod UID named by the last component of path that names one
 * ("pod<uid>", or "...-pod<uid>.slice" with '_' turned back into '-'),
 * provided a component before it starts with "kubepods".  1 with uid
 * filled (size bytes), 0 when path is no pod's folder or inside one.
 * A container's folder under a pod's is not the pod's: 0 (the walk stops
 * at the pod). */
int cgpod_uid(const char *path, char *uid, size_t size);

/* Where a node's pod cgroups are: the v2 mount (memory and cpu in one
 * folder), or v1's memory and cpu(acct) controllers. */
struct cgpod_root {
	enum rv_cgroup_mode mode; /* RV_CGROUP_V1 or RV_CGROUP_V2 */
	char mem[CGPOD_PATH_MAX]; /* where pods are looked for */
	char cpu[CGPOD_PATH_MAX]; /* v1: the cpu controller's mount, "" none */
};

/* Resolve root: a v2 mount (it has cgroup.controllers), a v1 mount (it has
 * a memory folder), or a folder inside v1's memory controller (it has
 * memory.usage_in_bytes; no cpu controller then).  0, or -ENOENT with err
 * naming root. */
int cgpod_root_open(const char *root, struct cgpod_root *out, struct rv_err *err);

struct cgpod_dir {
	char uid[CGPOD_UID_MAX];
	char rel[CGPOD_PATH_MAX]; /* below r->mem, starting with '/' */
};

/* The pod folders under r->mem, at most max (depth CGPOD_DEPTH; a pod's
 * own subfolders are not walked).  Returns how many, or a negative errno
 * when r->mem cannot be read. */
int cgpod_scan(const struct cgpod_root *r, struct cgpod_dir *out, int max);

struct cgpod_usage {
	int procs;         /* processes in the pod's folder and below */
	int64_t memory_b;  /* memory.current / memory.usage_in_bytes */
	bool has_cpu;      /* the cpu controller has the pod's folder */
	uint64_t cpu_us;   /* its CPU time (has_cpu) */
	int64_t throttled; /* its throttled periods so far (has_cpu) */
	uint64_t ticks;    /* without has_cpu: its processes' utime + stime */
};

/* The usage of the pod at rel.  0, or -ENOENT when the folder is gone. */
int cgpod_usage(const struct cgpod_root *r, const char *rel, struct cgpod_usage *out);

#endif
