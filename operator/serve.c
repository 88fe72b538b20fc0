/*
 * serve.c: rover-operator's HTTP face: /healthz (alive, whether this
 * replica leads, the API server it watches) and /metrics (Prometheus: the
 * passes, creates and conflicts, leadership).  Handlers run on the HTTP
 * server's threads and read only atomics and the configuration.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>

#include "cleanup.h"
#include "operator.h"
#include "rest_server.h"

static int serve_healthz(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	struct operator_state *op = ctx;
	cJSON *doc = cJSON_CreateObject();
	cJSON_AddStringToObject(doc, "status", "ok");
	cJSON_AddBoolToObject(doc, "leader", atomic_load(&op->leader));
	cJSON_AddStringToObject(doc, "id", op->cfg.lease_id);
	cJSON_AddStringToObject(doc, "server", op->k.conf.server);
	cJSON_AddNumberToObject(doc, "passes", (double)atomic_load(&op->passes));
	return rv_rest_reply(resp, 200, doc);
}

static const struct rv_rest_counter serve_counters[] = {
	{ "rover_operator_passes_total", "Reconcile passes made as the leader",
	  offsetof(struct operator_state, passes) },
	{ "rover_operator_creates_total",
	  "Objects created: master pods, Services, service accounts, role bindings, state "
	  "claims",
	  offsetof(struct operator_state, creates) },
	{ "rover_operator_conflicts_total",
	  "Creates answered 409 (the object was there: never a second master)",
	  offsetof(struct operator_state, conflicts) },
};

static void serve_gauges(struct rv_buf *out, void *base)
{
	struct operator_state *op = base;
	rv_buf_printf(out,
		      "# HELP rover_operator_leader 1 while this replica holds the Lease\n"
		      "# TYPE rover_operator_leader gauge\nrover_operator_leader %d\n",
		      atomic_load(&op->leader) ? 1 : 0);
	rv_buf_printf(out,
		      "# HELP rover_operator_polled_jobs Jobs whose master's plan is being polled\n"
		      "# TYPE rover_operator_polled_jobs gauge\nrover_operator_polled_jobs %d\n",
		      atomic_load(&op->polled_n));
}

static const struct rv_rest_metrics_page serve_page = {
	.counters = serve_counters,
	.ncounters = RV_ARRAY_SIZE(serve_counters),
	.more = serve_gauges,
};

static int serve_metrics(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	struct operator_state *op = ctx;
	return rv_rest_metrics_reply(resp, op->http, op, &serve_page);
}

static const struct rv_http_route routes[] = {
	{ "GET", "/healthz", serve_healthz, 0, "Liveness and whether this replica leads" },
	{ "GET", "/metrics", serve_metrics, 0, "Prometheus metrics" },
};

int operator_serve_start(struct operator_state *op, struct rv_err *err)
{
	return rv_rest_small_server_start(&op->http, op->cfg.listen, NULL, routes,
					  (int)RV_ARRAY_SIZE(routes), op, err);
}

void operator_serve_stop(struct operator_state *op)
{
	rv_http_server_stop(op->http);
	op->http = NULL;
}
