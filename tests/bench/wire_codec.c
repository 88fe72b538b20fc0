/*
 * wire_codec: what the wire codec costs on the brain's busiest message, a
 * metrics batch: BATCHES batches of 10000 samples (speed, node, model and
 * progress in turn, every field given) read from one parsed cJSON tree with
 * rv_metrics_batch_from_json and written back with rv_metrics_batch_to_json.
 * JSON text parsing and printing are left out: both sides of a comparison
 * share them.  Usage:
 *   wire_codec [batches]                     (default 3: 30000 samples)
 * Ends with:
 *   bench=wire_codec samples=N decode_ns_per_sample=D encode_ns_per_sample=E
 * Instructions, the steadier figure on a shared machine, under callgrind:
 *   valgrind --tool=callgrind --toggle-collect=rv_metrics_batch_from_json \
 *     build/bench/wire_codec          (then _to_json for the encoder)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "json.h"
#include "parse.h"
#include "wire.h"

#define PER_BATCH 10000

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sample i of a batch as JSON text, every field of its kind given. */
static int sample_text(char *b, size_t n, int i)
{
	long ts = 1700000000000L + i;
	switch (i % 4) {
	case 0:
		return snprintf(b, n,
				"{\"kind\":\"speed\",\"ts\":%ld,\"speed\":%d.5,\"step\":%d,"
				"\"workers\":8,\"ps\":2}",
				ts, 100 + i % 50, i);
	case 1:
		return snprintf(b, n,
				"{\"kind\":\"node\",\"ts\":%ld,\"node\":\"worker-%d\",\"role\":"
				"\"worker\",\"rank\":%d,\"cpu\":3.25,\"memory_mb\":%d,"
				"\"cpu_limit\":4,\"memory_limit_mb\":16384,\"step_time\":0.5,"
				"\"nr_periods\":%d,\"nr_throttled\":%d,\"throttled_usec\":%d}",
				ts, i % 64, i % 64, 1000 + i % 100, 1000 + i, i % 1000, 5 * i);
	case 2:
		return snprintf(b, n,
				"{\"kind\":\"model\",\"ts\":%ld,\"parameters\":%d,"
				"\"batch_size\":64,\"flops\":1e12}",
				ts, 1000000 + i);
	default:
		return snprintf(b, n,
				"{\"kind\":\"progress\",\"ts\":%ld,\"dataset\":\"train\","
				"\"epoch\":1,\"samples_total\":1000000,\"samples_done\":%d,"
				"\"shards_total\":100,\"shards_done\":%d,\"shards_doing\":4,"
				"\"finished\":false}",
				ts, i * 10, i % 100);
	}
}

static cJSON *batch_tree(void)
{
	size_t cap = (size_t)PER_BATCH * 400 + 64, at = 0;
	char *text = malloc(cap);
	if (!text)
		return NULL;
	at += (size_t)snprintf(text, cap, "{\"batch_id\":\"b1\",\"samples\":[");
	for (int i = 0; i < PER_BATCH; i++) {
		if (i)
			text[at++] = ',';
		at += (size_t)sample_text(text + at, cap - at, i);
	}
	snprintf(text + at, cap - at, "]}");
	cJSON *root = cJSON_Parse(text);
	free(text);
	return root;
}

int main(int argc, char **argv)
{
	int64_t batches = 3;
	if (argc > 1 && rv_parse_i64(argv[1], 1, 1000, &batches) < 0) {
		fprintf(stderr, "usage: wire_codec [batches 1..1000]\n");
		return 2;
	}
	cJSON *root = batch_tree();
	if (!root) {
		fprintf(stderr, "error: could not build the batch\n");
		return 1;
	}
	double dec = 0, enc = 0;
	for (int64_t k = 0; k < batches; k++) {
		struct rv_metrics_batch b;
		struct rv_err err = { 0 };
		double t0 = now_s();
		if (rv_metrics_batch_from_json(root, &b, &err) < 0) {
			fprintf(stderr, "error: could not decode the batch: %s\n", err.msg);
			return 1;
		}
		double t1 = now_s();
		cJSON *o = rv_metrics_batch_to_json(&b);
		double t2 = now_s();
		if (!o) {
			fprintf(stderr, "error: could not encode the batch\n");
			return 1;
		}
		dec += t1 - t0;
		enc += t2 - t1;
		cJSON_Delete(o);
		rv_metrics_batch_release(&b);
	}
	cJSON_Delete(root);
	double n = (double)batches * PER_BATCH;
	printf("bench=wire_codec samples=%.0f decode_ns_per_sample=%.0f "
	       "encode_ns_per_sample=%.0f\n",
	       n, dec / n * 1e9, enc / n * 1e9);
	return 0;
}
