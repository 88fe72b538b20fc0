/*
 * check_cgpod.c: pod cgroup folders (monitor/cgpod.c) without a kubelet:
 * the pod UID read from the paths kubelets make (cgroupfs and systemd
 * drivers, cgroup v1 and v2, every QoS class), containers and other
 * folders refused; a root resolved for each layout; a scan of a tree laid
 * out as a v2 systemd node and a v1 cgroupfs node finds each pod once and
 * reads its processes and memory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgpod.h"
#include "testutil.h"

#define UID1  "0b5e0c4e-6f7a-4d3c-9a51-3c2f1d0e9b7a"
#define UID1_ "0b5e0c4e_6f7a_4d3c_9a51_3c2f1d0e9b7a"
#define UID2  "7d1c2b3a-0000-4111-8222-933344445555"
#define UID2_ "7d1c2b3a_0000_4111_8222_933344445555"

static void uid_is(const char *path, const char *want)
{
	char uid[CGPOD_UID_MAX] = "";
	int rc = cgpod_uid(path, uid, sizeof(uid));
	if (!want) {
		ck_assert_msg(rc == 0, "%s: took %s for a pod", path, uid);
		return;
	}
	ck_assert_msg(rc == 1, "%s: no pod", path);
	ck_assert_str_eq(uid, want);
}

START_TEST(test_uid_from_paths)
{
	/* cgroupfs driver, v2 and (under a controller) v1, each QoS class */
	uid_is("/kubepods/pod" UID1, UID1);
	uid_is("/kubepods/burstable/pod" UID1, UID1);
	uid_is("/kubepods/besteffort/pod" UID1 "/", UID1);
	uid_is("/sys/fs/cgroup/memory/kubepods/burstable/pod" UID1, UID1);
	/* systemd driver */
	uid_is("/kubepods.slice/kubepods-pod" UID2_ ".slice", UID2);
	uid_is("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID2_ ".slice",
	       UID2);
	uid_is("/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/"
	       "kubepods-besteffort-pod" UID2_ ".slice",
	       UID2);
	/* a static pod's UID is 32 hex digits */
	uid_is("/kubepods/pod0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef");
	/* a container's folder is not its pod's */
	uid_is("/kubepods/burstable/pod" UID1
	       "/4f1c9a7e2b3d4c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6",
	       NULL);
	uid_is("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID2_
	       ".slice/cri-containerd-4f1c9a7e.scope",
	       NULL);
	/* not pods: the QoS folders, folders outside kubepods, bad UIDs */
	uid_is("/kubepods", NULL);
	uid_is("/kubepods/burstable", NULL);
	uid_is("/kubepods.slice/kubepods-burstable.slice", NULL);
	uid_is("/system.slice/pod" UID1, NULL);
	uid_is("/kubepods/pod" UID1_, NULL);
	uid_is("/kubepods/podXYZ", NULL);
	uid_is("/kubepods.slice/kubepods-pod" UID1 ".slice", NULL);
	uid_is("", NULL);
}
END_TEST

static char tmp[64];

static void mk(const char *rel)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	ck_assert_msg(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s", p);
}

static void put(const char *rel, const char *text)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	rv_test_write_file(p, text);
}

static void rm_tmp(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	ck_assert_int_eq(system(cmd), 0);
}

static const struct cgpod_dir *find(const struct cgpod_dir *d, int n, const char *uid)
{
	for (int i = 0; i < n; i++)
		if (strcmp(d[i].uid, uid) == 0)
			return &d[i];
	return NULL;
}

/* A v2 node with the systemd driver: a Guaranteed and a Burstable pod,
 * the second with two containers; a system service beside them. */
START_TEST(test_scan_v2_systemd)
{
	snprintf(tmp, sizeof(tmp), "/tmp/rover-cgpod-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	put("cgroup.controllers", "cpu memory\n");
	mk("system.slice");
	put("system.slice/cgroup.procs", "1\n");
	mk("kubepods.slice");
	mk("kubepods.slice/kubepods-pod" UID1_ ".slice");
	put("kubepods.slice/kubepods-pod" UID1_ ".slice/memory.current", "1048576\n");
	put("kubepods.slice/kubepods-pod" UID1_ ".slice/cpu.stat",
	    "usage_usec 2500000\nnr_periods 10\nnr_throttled 4\nthrottled_usec 100\n");
	mk("kubepods.slice/kubepods-burstable.slice");
	const char *pod2 = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID2_
			   ".slice";
	char p[256];
	mk(pod2);
	snprintf(p, sizeof(p), "%s/memory.current", pod2);
	put(p, "3145728\n");
	snprintf(p, sizeof(p), "%s/cri-containerd-a.scope", pod2);
	mk(p);
	snprintf(p, sizeof(p), "%s/cri-containerd-a.scope/cgroup.procs", pod2);
	put(p, "999999999\n");
	snprintf(p, sizeof(p), "%s/cri-containerd-b.scope", pod2);
	mk(p);
	snprintf(p, sizeof(p), "%s/cri-containerd-b.scope/cgroup.procs", pod2);
	put(p, "999999998\n999999997\n");

	struct cgpod_root r;
	struct rv_err err = { 0 };
	ck_assert_int_eq(cgpod_root_open(tmp, &r, &err), 0);
	ck_assert_int_eq(r.mode, RV_CGROUP_V2);
	struct cgpod_dir d[8];
	int n = cgpod_scan(&r, d, 8);
	ck_assert_int_eq(n, 2);
	const struct cgpod_dir *a = find(d, n, UID1), *b = find(d, n, UID2);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	struct cgpod_usage u;
	ck_assert_int_eq(cgpod_usage(&r, a->rel, &u), 0);
	ck_assert_int_eq(u.memory_b, 1048576);
	ck_assert(u.has_cpu);
	ck_assert_int_eq((long long)u.cpu_us, 2500000);
	ck_assert_int_eq(u.throttled, 4);
	ck_assert_int_eq(cgpod_usage(&r, b->rel, &u), 0);
	ck_assert_int_eq(u.memory_b, 3145728);
	ck_assert_int_eq(u.procs, 3); /* both containers' */
	ck_assert_int_eq(cgpod_usage(&r, "/kubepods.slice/gone", &u), -ENOENT);
	rm_tmp();
}
END_TEST

/* A v1 node with the cgroupfs driver: memory and cpu,cpuacct mounted
 * apart; the root given as the mount, then as the memory folder. */
START_TEST(test_scan_v1_cgroupfs)
{
	snprintf(tmp, sizeof(tmp), "/tmp/rover-cgpod-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	mk("memory");
	put("memory/memory.usage_in_bytes", "0\n");
	mk("memory/kubepods");
	mk("memory/kubepods/besteffort");
	mk("memory/kubepods/besteffort/pod" UID1);
	put("memory/kubepods/besteffort/pod" UID1 "/memory.usage_in_bytes", "2097152\n");
	put("memory/kubepods/besteffort/pod" UID1 "/cgroup.procs", "999999999\n");
	mk("cpu,cpuacct");
	mk("cpu,cpuacct/kubepods");
	mk("cpu,cpuacct/kubepods/besteffort");
	mk("cpu,cpuacct/kubepods/besteffort/pod" UID1);
	put("cpu,cpuacct/kubepods/besteffort/pod" UID1 "/cpuacct.usage", "7000000000\n");
	put("cpu,cpuacct/kubepods/besteffort/pod" UID1 "/cpu.stat",
	    "nr_periods 9\nnr_throttled 2\nthrottled_time 5\n");

	struct cgpod_root r;
	struct rv_err err = { 0 };
	ck_assert_int_eq(cgpod_root_open(tmp, &r, &err), 0);
	ck_assert_int_eq(r.mode, RV_CGROUP_V1);
	ck_assert_ptr_nonnull(strstr(r.cpu, "cpu,cpuacct"));
	struct cgpod_dir d[8];
	ck_assert_int_eq(cgpod_scan(&r, d, 8), 1);
	ck_assert_str_eq(d[0].uid, UID1);
	ck_assert_str_eq(d[0].rel, "/kubepods/besteffort/pod" UID1);
	struct cgpod_usage u;
	ck_assert_int_eq(cgpod_usage(&r, d[0].rel, &u), 0);
	ck_assert_int_eq(u.memory_b, 2097152);
	ck_assert_int_eq(u.procs, 1);
	ck_assert(u.has_cpu);
	ck_assert_int_eq((long long)u.cpu_us, 7000000);
	ck_assert_int_eq(u.throttled, 2);

	/* the memory controller's folder as the root: no cpu controller */
	char mem[128];
	snprintf(mem, sizeof(mem), "%s/memory", tmp);
	ck_assert_int_eq(cgpod_root_open(mem, &r, &err), 0);
	ck_assert_str_eq(r.cpu, "");
	ck_assert_int_eq(cgpod_scan(&r, d, 8), 1);
	ck_assert_int_eq(cgpod_usage(&r, d[0].rel, &u), 0);
	ck_assert(!u.has_cpu);
	ck_assert_int_eq(u.memory_b, 2097152);

	/* not a cgroup folder at all */
	snprintf(mem, sizeof(mem), "%s/memory/kubepods", tmp);
	ck_assert_int_eq(cgpod_root_open(mem, &r, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, mem));
	rm_tmp();
}
END_TEST

RV_TEST_MAIN_TCASE("cgpod", "cgpod", 10, test_uid_from_paths, test_scan_v2_systemd,
		   test_scan_v1_cgroupfs)
