/*
 * monitor.h: rover-monitor's state, shared by its files.
 *
 * Threads: main (signals), the sampler (report.c: source ticks into the
 * buffer), the sender (report.c: batches from the buffer to the brain) and
 * libmicrohttpd's for /metrics and /healthz (serve.c).  The buffer and the
 * counters are guarded by m->lock; the source is the sampler's alone, the
 * brain client the sender's alone.
 */
#ifndef MONITOR_H
#define MONITOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "http.h"
#include "parse.h"
#include "source.h"
#include "wire.h"

struct monitor_cfg {
	char listen[128];
	char brain[256];
	char token[256];
	char node[RV_NAME_MAX * 2];
	long long interval_ms;
	long long report_interval_ms;
	long long batch_max;
	long long buffer_max;
	long long timeout_ms;
	long long gpu_interval_s;
	int k8s;
	char kubeconfig[4096];
	char cgroup_root[512];
	char log_level[16];
};

/* One report being sent: its id stays the same until the brain acked it. */
struct monitor_batch {
	struct rv_cluster_report r;
	int64_t first_try_ms;
};

struct monitor {
	struct monitor_cfg cfg;
	const struct source_ops *src;
	void *src_state;
	struct rv_http_server *http;

	pthread_mutex_t lock;
	pthread_cond_t wake; /* the sender: samples came, or stop */
	bool stopping;
	/* the buffer: a ring of buffer_max node samples, oldest at head */
	struct rv_cluster_node *ring;
	long head, count;
	struct source_stats stats;
	struct rv_cluster_node last; /* newest sample of this node (jobs not kept) */
	bool brain_ok;
	int64_t last_report_ms; /* wall time of the last acked report, 0: none */
	char last_error[512];
	long unsent; /* at exit: samples never acknowledged */

	atomic_uint_least64_t samples, sample_errors, dropped, reports_sent, reports_duplicate,
		reports_failed, samples_sent;

	pthread_t sampler, sender;
	bool sampler_started, sender_started;
};

/* report.c */
int report_start(struct monitor *m);
/* Stop both threads; the sender makes one last attempt at what is buffered
 * within the report timeout. */
void report_stop(struct monitor *m);
/* rv_now_ms(): wall clock, ms since the epoch. */
#define report_now_ms rv_now_ms

/* serve.c */
int serve_start(struct monitor *m, struct rv_err *err);
void serve_stop(struct monitor *m);

#endif
