/*
 * serve.c: rover-monitor's HTTP face: /healthz (alive, the brain link and the
 * backlog) and /metrics (Prometheus: counters, the newest sample of this
 * node, the buffer).  Handlers run on libmicrohttpd's threads and read the
 * state under m->lock.
 */
#include <stddef.h>
#include <stdio.h>

#include "cleanup.h"
#include "log.h"
#include "monitor.h"
#include "rest_server.h"
#include "usage.h"

static int serve_healthz(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	struct monitor *m = ctx;
	cJSON *doc = cJSON_CreateObject();
	pthread_mutex_lock(&m->lock);
	cJSON_AddStringToObject(doc, "status", "ok");
	cJSON_AddStringToObject(doc, "node", m->cfg.node);
	cJSON_AddStringToObject(doc, "source", m->src->name);
	cJSON_AddStringToObject(doc, "brain",
				m->last_report_ms == 0 && !m->last_error[0] ? "unknown"
				: m->brain_ok                               ? "ok"
									    : "unreachable");
	cJSON_AddNumberToObject(doc, "buffered", (double)m->count);
	cJSON_AddNumberToObject(doc, "buffer_max", (double)m->cfg.buffer_max);
	cJSON_AddNumberToObject(doc, "samples", (double)atomic_load(&m->samples));
	cJSON_AddNumberToObject(doc, "dropped", (double)atomic_load(&m->dropped));
	cJSON_AddNumberToObject(doc, "last_report_ms", (double)m->last_report_ms);
	cJSON_AddStringToObject(doc, "cgroup", rv_cgroup_mode_name(m->stats.cgroup_mode));
	cJSON_AddNumberToObject(doc, "gpus", m->stats.gpus);
	if (m->last_error[0] && !m->brain_ok)
		cJSON_AddStringToObject(doc, "last_error", m->last_error);
	pthread_mutex_unlock(&m->lock);
	return rv_rest_reply(resp, 200, doc);
}

static void gauge(struct rv_buf *out, const char *name, const char *help, const char *node,
		  double v)
{
	rv_buf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n%s{node=\"%s\"} %.6g\n", name, help,
		      name, name, node, v);
}

static const struct rv_rest_counter serve_counters[] = {
	{ "rover_monitor_samples_total", "Node samples taken", offsetof(struct monitor, samples) },
	{ "rover_monitor_sample_errors_total", "Ticks whose sampling failed",
	  offsetof(struct monitor, sample_errors) },
	{ "rover_monitor_samples_dropped_total",
	  "Samples dropped: the buffer was full, or the brain refused their report",
	  offsetof(struct monitor, dropped) },
	{ "rover_monitor_reports_sent_total", "Reports the brain acknowledged",
	  offsetof(struct monitor, reports_sent) },
	{ "rover_monitor_reports_failed_total", "Report attempts that failed",
	  offsetof(struct monitor, reports_failed) },
	{ "rover_monitor_samples_sent_total", "Samples in acknowledged reports",
	  offsetof(struct monitor, samples_sent) },
};

/* The gauges of this node's newest sample and the buffer, under m->lock. */
static void serve_gauges(struct rv_buf *out, void *base)
{
	struct monitor *m = base;
	pthread_mutex_lock(&m->lock);
	const char *node = m->cfg.node;
	const struct rv_cluster_node *l = &m->last;
	gauge(out, "rover_monitor_buffered_samples", "Samples waiting for the brain", node,
	      (double)m->count);
	gauge(out, "rover_monitor_brain_up", "1 when the last report reached the brain", node,
	      m->brain_ok ? 1 : 0);
	if (l->ts_ms) {
		gauge(out, "rover_node_cpu_cores", "CPU capacity, cores", node, l->cpu);
		gauge(out, "rover_node_cpu_used_cores", "CPU in use, cores", node, l->cpu_used);
		gauge(out, "rover_node_memory_mb", "Memory capacity, MiB", node,
		      (double)l->memory_mb);
		gauge(out, "rover_node_memory_used_mb", "Memory in use, MiB", node,
		      (double)l->memory_used_mb);
		gauge(out, "rover_node_gpus", "GPUs", node, l->gpu);
		if (l->cpu_pressure >= 0)
			gauge(out, "rover_node_cpu_pressure_pct", "PSI cpu some avg10", node,
			      l->cpu_pressure);
		if (l->memory_pressure >= 0)
			gauge(out, "rover_node_memory_pressure_pct", "PSI memory some avg10", node,
			      l->memory_pressure);
		if (l->io_pressure >= 0)
			gauge(out, "rover_node_io_pressure_pct", "PSI io some avg10", node,
			      l->io_pressure);
		if (l->gpu_util_pct >= 0)
			gauge(out, "rover_node_gpu_util_pct",
			      "Mean share of time a kernel ran on the GPUs (NVML)", node,
			      l->gpu_util_pct);
		gauge(out, "rover_node_jobs", "Rover jobs with processes on the node", node,
		      l->njobs);
	}
	pthread_mutex_unlock(&m->lock);
}

static const struct rv_rest_metrics_page serve_page = {
	.counters = serve_counters,
	.ncounters = RV_ARRAY_SIZE(serve_counters),
	.more = serve_gauges,
};

static int serve_metrics(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	struct monitor *m = ctx;
	return rv_rest_metrics_reply(resp, m->http, m, &serve_page);
}

static const struct rv_http_route routes[] = {
	{ "GET", "/healthz", serve_healthz, 0, "Liveness, the brain link and the backlog" },
	{ "GET", "/metrics", serve_metrics, 0, "Prometheus metrics" },
};

int serve_start(struct monitor *m, struct rv_err *err)
{
	return rv_rest_small_server_start(&m->http, m->cfg.listen, m->cfg.token, routes,
					  (int)RV_ARRAY_SIZE(routes), m, err);
}

void serve_stop(struct monitor *m)
{
	rv_http_server_stop(m->http);
	m->http = NULL;
}
