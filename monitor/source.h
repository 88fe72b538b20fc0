/*
 * source.h: where rover-monitor's samples come from.  A source fills node
 * samples (the wire's struct rv_cluster_node) on each tick; the monitor
 * buffers and reports them.  source_host.c samples the host the monitor runs
 * on (procfs, cgroups, GPUs through rover-gpuinfo); source_k8s.c samples
 * the node a DaemonSet pod runs on, its pods' cgroups mapped to jobs
 * through the API server.  main.c chooses (--k8s).
 *
 * A source belongs to the sampler thread: open, sample and close are called
 * from it only.  sample() may be slow (a GPU probe) but must return within
 * its own timeouts.
 */
#ifndef MONITOR_SOURCE_H
#define MONITOR_SOURCE_H

#include "err.h"
#include "wire.h"

struct monitor_cfg;

/* What a source says of itself for /metrics and /healthz. */
struct source_stats {
	int cgroup_mode;   /* enum rv_cgroup_mode, host source only */
	int gpus;          /* GPUs seen at the last probe */
	int procs_scanned; /* processes looked at by the last job scan */
	int jobs;          /* jobs found by the last scan */
	char gpu_why[160]; /* why no GPU ("" when some) */
};

struct source_ops {
	const char *name; /* "host", "k8s" */
	/* A new source state in *out (the source's own struct), or a negative
	 * errno with *err set.  cfg is borrowed for the source's life. */
	int (*open)(const struct monitor_cfg *cfg, void **out, struct rv_err *err);
	/* Fill up to max node samples at nodes (each zeroed by the caller; jobs
	 * malloc'd, freed by the caller with the node); returns how many, or a
	 * negative errno with *err set.  ts_ms is the sample's time. */
	int (*sample)(void *state, int64_t ts_ms, struct rv_cluster_node *nodes, int max,
		      struct rv_err *err);
	void (*stats)(void *state, struct source_stats *out);
	/* Accepts NULL. */
	void (*close)(void *state);
};

extern const struct source_ops source_host;
extern const struct source_ops source_k8s;

#endif
