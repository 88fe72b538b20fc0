/*
 * usage.h: what a host and its processes use, read from procfs and the
 * cgroup file systems (v2, or v1 where that is what is mounted).
 * rover-monitor samples a node with it, rover-run its process tree and the
 * CPU quota of its cgroup, rover-master's local scheduler its nodes (their
 * cgroups, or their process trees without cgroups).
 *
 * Readers take the text of one file each; every reader has a pure parser
 * beside it (rv_usage_parse_*) that the tests feed with kernel output.
 * Counters are returned raw (ticks, microseconds, bytes): the caller keeps
 * the previous sample and takes differences.  A file the kernel does not
 * have (no PSI, no cgroup controller) is -ENOENT, never a guess.
 *
 * The job scanner finds the processes of Rover jobs: those whose
 * environment carries ROVER_JOB_NAME, and those in a cgroup below a
 * "rover" folder (rover-master's local scheduler makes
 * rover/<job>-<pid>/<node>).  It caches what it learnt of each pid (keyed by
 * pid and start time) so a scan reads /proc/<pid>/environ once per process,
 * not once per scan.  One scanner belongs to one thread; everything else is
 * reentrant.  Never logs.
 */
#ifndef RV_USAGE_H
#define RV_USAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- host CPU: the "cpu" lines of /proc/stat ---- */
struct rv_cpu_times {
	uint64_t total; /* all fields of the "cpu " line, clock ticks */
	uint64_t idle;  /* idle + iowait */
	int ncpu;       /* "cpuN" lines: online CPUs */
};
int rv_usage_parse_cpu_times(const char *text, struct rv_cpu_times *out);
/* Reads /proc/stat.  0 or a negative errno. */
int rv_usage_cpu_times(struct rv_cpu_times *out);
/* Cores busy between two samples of ncpu CPUs (0 when no time passed). */
double rv_usage_cpu_busy(const struct rv_cpu_times *prev, const struct rv_cpu_times *cur);

/* ---- host memory: /proc/meminfo ---- */
struct rv_meminfo {
	int64_t total_kb;
	int64_t available_kb; /* MemAvailable */
};
int rv_usage_parse_meminfo(const char *text, struct rv_meminfo *out);
int rv_usage_meminfo(struct rv_meminfo *out);

/* ---- pressure stall information ---- */
struct rv_psi {
	double some_avg10, some_avg60; /* percent of time some task stalled */
	uint64_t some_total_us;
	bool has_full; /* the "full" line (not for host cpu on older kernels) */
	double full_avg10, full_avg60;
	uint64_t full_total_us;
};
int rv_usage_parse_psi(const char *text, struct rv_psi *out);
/* path: "/proc/pressure/cpu" or a cgroup's "cpu.pressure".  -ENOENT
 * (or -EOPNOTSUPP, as the kernel says) when PSI is not there. */
int rv_usage_psi(const char *path, struct rv_psi *out);

/* ---- cgroups ---- */
enum rv_cgroup_mode { RV_CGROUP_NONE, RV_CGROUP_V1, RV_CGROUP_V2 };
const char *rv_cgroup_mode_name(enum rv_cgroup_mode m); /* "none", "v1", "v2" */

/* Which hierarchy holds the cpu controller: v2 when /proc/self/mountinfo has
 * a cgroup2 mount whose cgroup.controllers lists cpu, else v1 when a v1 cpu
 * hierarchy is mounted, else none.  mnt (size bytes) gets the v2 mount point
 * ("" for v1). */
enum rv_cgroup_mode rv_usage_cgroup_mode(char *mnt, size_t size);

/* The cgroup folder of pid for controller ctl ("cpu", "memory") in mode:
 * v2 mnt + the "0::" path of /proc/<pid>/cgroup; v1 the controller's mount
 * + its line's path.  0, -ENOENT (no such line or process), -ENAMETOOLONG. */
int rv_usage_pid_cgroup(pid_t pid, enum rv_cgroup_mode mode, const char *mnt, const char *ctl,
			char *out, size_t size);
/* The same from the text of /proc/<pid>/cgroup: the path part only ("/" at
 * the root). */
int rv_usage_parse_pid_cgroup(const char *text, enum rv_cgroup_mode mode, const char *ctl,
			      char *out, size_t size);

struct rv_cgroup_cpu {
	uint64_t usage_us;     /* CPU time of the group */
	bool has_periods;      /* cpu.stat has the throttling counters below */
	int64_t nr_periods;    /* enforcement periods that had a quota */
	int64_t nr_throttled;  /* of those, periods where the group was throttled */
	uint64_t throttled_us; /* time throttled */
	double quota_cores;    /* cpu.max / cfs_quota over period; -1: no limit */
};
/* v2: cpu.stat and cpu.max; v1: cpuacct.usage, cpu.stat and
 * cpu.cfs_quota_us/cpu.cfs_period_us of dir (where cpu and cpuacct are
 * mounted apart, call it for each folder and take what each has).  Fields
 * the kernel lacks stay 0 (-1 for the quota).  0, or -ENOENT when dir has
 * neither cpu.stat nor (v1) cpuacct.usage. */
int rv_usage_cgroup_cpu(enum rv_cgroup_mode mode, const char *dir, struct rv_cgroup_cpu *out);
/* The nearest folder with a CPU quota from mnt + rel up to mnt (rel as
 * /proc/<pid>/cgroup gives it; when mnt + rel does not exist, as in a
 * container that sees its own cgroup as the mount, mnt itself): its
 * rv_usage_cgroup_cpu into *out, and the folder into dir (size bytes, may
 * be NULL).  0, or -ENOENT when no folder up to mnt has a quota. */
int rv_usage_cgroup_quota(enum rv_cgroup_mode mode, const char *mnt, const char *rel,
			  struct rv_cgroup_cpu *out, char *dir, size_t size);
int rv_usage_parse_cgroup_cpu_stat(const char *text, enum rv_cgroup_mode mode,
				   struct rv_cgroup_cpu *out);

struct rv_cgroup_mem {
	int64_t current_bytes;
	int64_t limit_bytes; /* -1: no limit ("max", or v1's huge number) */
	int64_t peak_bytes;  /* the high-water mark; -1: the kernel keeps none */
};
/* v2: memory.current, memory.max and memory.peak; v1:
 * memory.usage_in_bytes, memory.limit_in_bytes and
 * memory.max_usage_in_bytes.  0 or -ENOENT. */
int rv_usage_cgroup_mem(enum rv_cgroup_mode mode, const char *dir, struct rv_cgroup_mem *out);

/* ---- processes ---- */
struct rv_proc_sample {
	pid_t pid;
	pid_t ppid;
	uint64_t ticks;       /* utime + stime, clock ticks */
	uint64_t child_ticks; /* cutime + cstime: of the children it reaped */
	uint64_t starttime;   /* ticks after boot: with pid, names the process */
	int64_t rss_kb;
};
/* Parse the text of /proc/<pid>/stat (the command name may hold spaces and
 * parentheses). */
int rv_usage_parse_proc_stat(const char *text, struct rv_proc_sample *out);
/* /proc/<pid>/stat.  -ENOENT when the process is gone. */
int rv_usage_proc_sample(pid_t pid, struct rv_proc_sample *out);

/* A process tree: root and its live descendants, less skip and its
 * descendants.  A process that died counts once its parent reaped it (in
 * the parent's child_ticks), so the CPU time never goes back. */
struct rv_proc_tree {
	uint64_t ticks; /* ticks + child_ticks over the tree */
	int64_t rss_kb; /* sum over the tree (shared pages counted each time) */
	int nprocs;
};
/* Walk proc_root ("/proc" when NULL) for root's tree, leaving out skip's
 * (skip <= 0: none).  0, -ESRCH when root is not there, -ENOMEM, or a
 * negative errno when proc_root cannot be read.  One pass over the process
 * table and O(n log n). */
int rv_usage_proc_tree(const char *proc_root, pid_t root, pid_t skip, struct rv_proc_tree *out);
/* Clock ticks per second (sysconf(_SC_CLK_TCK), 100 when it fails). */
long rv_usage_clk_tck(void);

/* The value of key in /proc/<pid>/environ into out (size bytes, truncated).
 * 1 found, 0 not there, -EACCES (another user's process), -ENOENT (gone). */
int rv_usage_proc_env(pid_t pid, const char *key, char *out, size_t size);

/* The job a cgroup path belongs to: the folder after a "rover" component,
 * less a trailing "-<pid>" (rover/train-4242/worker-0 -> "train").  1 found
 * (out filled), 0 not a rover cgroup. */
int rv_usage_job_of_cgroup(const char *path, char *out, size_t size);

/* ---- the job scanner ---- */
#define RV_USAGE_JOB_NAME_MAX 64
#define RV_USAGE_MAX_PIDS     65536 /* pids remembered; more are scanned uncached */

struct rv_usage_job {
	char name[RV_USAGE_JOB_NAME_MAX];
	int nprocs;
	uint64_t ticks;       /* utime + stime of its live processes, total */
	uint64_t ticks_delta; /* since the previous scan (0 for processes new to it) */
	int64_t rss_kb;       /* sum over processes (shared pages counted each time) */
	pid_t first_pid;      /* lowest pid: to find its cgroup */
};

struct rv_usage_scanner;
/* proc_root: "/proc" (NULL for that); copied.  NULL on out of memory.  Free
 * with rv_usage_scanner_free. */
struct rv_usage_scanner *rv_usage_scanner_new(const char *proc_root);
/* Accepts NULL; returns NULL. */
struct rv_usage_scanner *rv_usage_scanner_free(struct rv_usage_scanner *s);
/* Walk proc_root: jobs[0..max-1] get one entry per job found (sorted by
 * name); returns how many (at most max; later jobs dropped) or a negative
 * errno when proc_root cannot be read.  *nprocs (may be NULL) gets how many
 * processes were looked at. */
int rv_usage_scan_jobs(struct rv_usage_scanner *s, struct rv_usage_job *jobs, int max, int *nprocs);

#endif
