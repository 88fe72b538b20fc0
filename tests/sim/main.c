/*
 * main.c: rover-sim.  Loads a trace, plays every job against rover-brain
 * (worker threads, one job and one HTTP client each) and under the
 * baseline policy, scores both against the oracle, optionally replays the
 * stream on a simulated cluster, prints a table on stderr, one summary line
 * on stdout and optionally every figure as JSON.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <gsl/gsl_errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brain_client.h"
#include "parse.h"
#include "wire.h"
#include "sim.h"

static const char usage[] =
	"usage: rover-sim --trace FILE|DIR [--brain URL] [--token T] [--policy "
	"rover|baseline|both]\n"
	"                 [--cluster] [--nodes N] [--node-cpu C] [--node-mem-gb G]\n"
	"                 [--rounds N] [--settle N] [--threads N] [--tag SUFFIX] [--seed N]\n"
	"                 [--json OUT] [--bench NAME]\n"
	"\n"
	"Plays simulated training jobs with hidden true throughput curves, CPU and\n"
	"memory needs against a live rover-brain (register, apply each plan, report\n"
	"metrics and OOMs as a master would, with simulated timestamps) and under a\n"
	"baseline built from DLRover's published rules, then scores each final\n"
	"configuration against the oracle: the config with the fewest CPU cores\n"
	"reaching 90% of the best throughput within the job's limits.\n"
	"\n"
	"  --trace      a trace file (JSON Lines, one job a line) or a folder of *.trace\n"
	"  --brain      rover-brain base URL (needed unless --policy baseline)\n"
	"  --policy     which policies to play (default both)\n"
	"  --cluster    also replay the jobs as a stream on a simulated cluster:\n"
	"               user-sized vs Rover vs baseline; utilisation and mean JCT\n"
	"  --nodes, --node-cpu, --node-mem-gb   cluster shape (default: the trace's\n"
	"               {\"cluster\":...} line, else 32 x 32 cores x 128 GiB); the brain is\n"
	"               told the nodes before the jobs, no node may be larger than one\n"
	"  --rounds     plan rounds per job, each 120 s of job time (default 20)\n"
	"  --settle     stop a job after this many rounds without a plan (default 3)\n"
	"  --threads    jobs played at once (default 8)\n"
	"  --tag        suffix for job names, so runs can share one brain\n"
	"  --seed       mixed into every job's noise (default 0): same traces and seed,\n"
	"               same figures\n"
	"  --json       write every figure, per job and in total, to OUT\n"
	"  --bench      print the summary line as \"bench=NAME ...\"\n"
	"Exit status: 0 when every job ran, 1 when a job could not be played, 2 on usage.\n"
	"See tests/sim/README.md for the trace format, the scoring and the simplifications.\n";

struct sim {
	struct sim_opts o;
	const char *trace_path, *json_path, *bench;
	bool rover, baseline, cluster;
	int nodes;
	double node_cpu;
	int64_t node_mem_mb;
	bool shape_given[3];
	struct sim_trace t;
	struct sim_oracle *oracle;
	struct sim_result *rov, *base;
	atomic_int next;
};

/* Jobs that give their resources are played at once on the threads; a
 * zero-config job's create plan comes from the jobs finished before it, so
 * those run afterwards one at a time in trace order (the same history every
 * run). */
static void *rover_thread(void *arg)
{
	struct sim *s = arg;
	for (;;) {
		int i = atomic_fetch_add(&s->next, 1);
		if (i >= s->t.n)
			return NULL;
		if (!s->t.jobs[i].zero_config)
			rover_run(&s->t.jobs[i], &s->o, &s->rov[i]);
	}
}

/* Tell the brain the cluster's nodes (all free), so plans know the node size. */
static int report_cluster(const struct sim *s)
{
	struct rv_err err = { 0 };
	struct rv_brain_client *bc = rover_brain_client_new(&s->o, &err);
	if (!bc)
		return -EIO;
	int n = s->o.cluster.nodes < RV_MAX_CLUSTER_NODES ? s->o.cluster.nodes
							  : RV_MAX_CLUSTER_NODES;
	struct rv_cluster_report r = { .nodes = calloc((size_t)n, sizeof(*r.nodes)), .n = n };
	int rc = r.nodes ? 0 : -ENOMEM;
	for (int i = 0; rc == 0 && i < n; i++) {
		struct rv_cluster_node *x = &r.nodes[i];
		snprintf(x->name, sizeof(x->name), "sim-node-%d", i);
		x->ts_ms = 1700000000000LL;
		x->cpu = s->o.cluster.node_cpu;
		x->memory_mb = s->o.cluster.node_mem_mb;
		x->ready = true;
	}
	if (rc == 0 && (rc = rv_brain_cluster_report(bc, &r, &err)) < 0)
		fprintf(stderr, "rover-sim: could not report the cluster: %s\n", err.msg);
	free(r.nodes);
	rv_brain_client_free(bc);
	return rc < 0 ? rc : 0;
}

static int parse_args(struct sim *s, int argc, char **argv)
{
	s->o.max_rounds = 20;
	s->o.settle_rounds = 3;
	s->o.round_s = 120;
	s->o.sample_s = 10;
	s->o.threads = 8;
	s->rover = s->baseline = true;
	s->nodes = 32;
	s->node_cpu = 32;
	s->node_mem_mb = 128 * 1024;
	s->o.seed = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int64_t n;
		double d;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			exit(0);
		} else if (!strcmp(a, "--cluster")) {
			s->cluster = true;
			continue;
		}
		if (!v) {
			fprintf(stderr, "rover-sim: unknown option or missing value: %s\n%s", a, usage);
			return -EINVAL;
		}
		i++;
		if (!strcmp(a, "--trace")) {
			s->trace_path = v;
		} else if (!strcmp(a, "--brain")) {
			s->o.brain = v;
		} else if (!strcmp(a, "--token")) {
			s->o.token = v;
		} else if (!strcmp(a, "--json")) {
			s->json_path = v;
		} else if (!strcmp(a, "--bench")) {
			s->bench = v;
		} else if (!strcmp(a, "--tag")) {
			snprintf(s->o.run_tag, sizeof(s->o.run_tag), "-%.14s", v);
		} else if (!strcmp(a, "--policy")) {
			s->rover = !strcmp(v, "rover") || !strcmp(v, "both");
			s->baseline = !strcmp(v, "baseline") || !strcmp(v, "both");
			if (!s->rover && !s->baseline) {
				fprintf(stderr, "rover-sim: --policy must be rover, baseline or both\n");
				return -EINVAL;
			}
		} else if (!strcmp(a, "--nodes") && rv_parse_i64(v, 1, 4096, &n) == 0) {
			s->nodes = (int)n;
			s->shape_given[0] = true;
		} else if (!strcmp(a, "--node-cpu") && rv_parse_double(v, 1, 1024, &d) == 0) {
			s->node_cpu = d;
			s->shape_given[1] = true;
		} else if (!strcmp(a, "--node-mem-gb") && rv_parse_i64(v, 1, 4096, &n) == 0) {
			s->node_mem_mb = n * 1024;
			s->shape_given[2] = true;
		} else if (!strcmp(a, "--seed") && rv_parse_i64(v, 0, INT64_MAX, &n) == 0) {
			s->o.seed = (uint64_t)n;
		} else if (!strcmp(a, "--rounds") && rv_parse_i64(v, 1, 1000, &n) == 0) {
			s->o.max_rounds = (int)n;
		} else if (!strcmp(a, "--settle") && rv_parse_i64(v, 1, 1000, &n) == 0) {
			s->o.settle_rounds = (int)n;
		} else if (!strcmp(a, "--threads") && rv_parse_i64(v, 1, 256, &n) == 0) {
			s->o.threads = (int)n;
		} else {
			fprintf(stderr, "rover-sim: bad option or value: %s %s\n", a, v);
			return -EINVAL;
		}
	}
	if (!s->trace_path) {
		fprintf(stderr, "rover-sim: --trace is required\n%s", usage);
		return -EINVAL;
	}
	if (s->rover && !s->o.brain) {
		fprintf(stderr, "rover-sim: --brain is required unless --policy baseline\n");
		return -EINVAL;
	}
	return 0;
}

/* Summary of one policy's results against the oracle. */
struct agg {
	int n, ran, infeasible;
	double tr_min, tr_med, rr_max;
	int ptc_max;
	int oom_jobs, oom_ok;
	int pass;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static bool job_pass(const struct sim_result *r, const struct sim_oracle *o)
{
	return r->ran && !r->oom_failed && !r->infeasible && r->speed >= 0.95 * o->speed &&
	       r->cost <= 1.10 * o->cost + 1e-9 && r->plans_to_converge <= 5;
}

static void aggregate(const struct sim *s, const struct sim_result *res, struct agg *a)
{
	memset(a, 0, sizeof(*a));
	double *tr = calloc((size_t)s->t.n, sizeof(double));
	a->tr_min = INFINITY;
	for (int i = 0; i < s->t.n; i++) {
		const struct sim_result *r = &res[i];
		const struct sim_oracle *o = &s->oracle[i];
		a->n++;
		if (!r->ran)
			continue;
		a->ran++;
		double x = r->speed / o->speed, y = r->cost / o->cost;
		a->infeasible += r->infeasible;
		tr[a->ran - 1] = x;
		if (x < a->tr_min)
			a->tr_min = x;
		if (y > a->rr_max)
			a->rr_max = y;
		if (r->plans_to_converge > a->ptc_max)
			a->ptc_max = r->plans_to_converge;
		if (r->ooms) {
			a->oom_jobs++;
			a->oom_ok += !r->oom_failed;
		}
		a->pass += job_pass(r, o);
	}
	if (tr && a->ran) {
		qsort(tr, (size_t)a->ran, sizeof(double), cmp_double);
		a->tr_med = a->ran % 2 ? tr[a->ran / 2] : (tr[a->ran / 2 - 1] + tr[a->ran / 2]) / 2;
	}
	if (!a->ran)
		a->tr_min = 0;
	free(tr);
}

static cJSON *config_json(const struct sim_config *c)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "workers", c->workers);
	cJSON_AddNumberToObject(o, "worker_cpu", c->worker_cpu);
	cJSON_AddNumberToObject(o, "worker_memory_mb", (double)c->worker_mem_mb);
	cJSON_AddNumberToObject(o, "ps", c->ps);
	cJSON_AddNumberToObject(o, "ps_cpu", c->ps_cpu);
	cJSON_AddNumberToObject(o, "ps_memory_mb", (double)c->ps_mem_mb);
	return o;
}

static cJSON *result_json(const struct sim_result *r, const struct sim_oracle *o)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddBoolToObject(j, "ran", r->ran);
	if (r->error[0] && !r->ran)
		cJSON_AddStringToObject(j, "error", r->error);
	cJSON_AddItemToObject(j, "final", config_json(&r->final));
	cJSON_AddNumberToObject(j, "speed", r->speed);
	cJSON_AddNumberToObject(j, "cores", r->cores);
	cJSON_AddNumberToObject(j, "throughput_ratio", o->speed > 0 ? r->speed / o->speed : 0);
	cJSON_AddNumberToObject(j, "resource_ratio", o->cost > 0 ? r->cost / o->cost : 0);
	cJSON_AddNumberToObject(j, "cpu_ratio", o->cores > 0 ? r->cores / o->cores : 0);
	cJSON_AddBoolToObject(j, "infeasible", r->infeasible);
	cJSON_AddNumberToObject(j, "plans", r->plans);
	cJSON_AddNumberToObject(j, "plans_to_converge", r->plans_to_converge);
	cJSON_AddNumberToObject(j, "rounds", r->rounds);
	cJSON_AddNumberToObject(j, "ooms", r->ooms);
	cJSON_AddBoolToObject(j, "oom_failed", r->oom_failed);
	cJSON *ev = cJSON_AddArrayToObject(j, "oom_events");
	for (int k = 0; k < r->noom; k++) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "role", r->oom[k].role ? "ps" : "worker");
		cJSON_AddNumberToObject(e, "from_mb", (double)r->oom[k].from_mb);
		cJSON_AddNumberToObject(e, "to_mb", (double)r->oom[k].to_mb);
		cJSON_AddItemToArray(ev, e);
	}
	cJSON_AddBoolToObject(j, "meets_targets", job_pass(r, o));
	cJSON_AddStringToObject(j, "last_reason", r->last_reason);
	return j;
}

static cJSON *agg_json(const struct agg *a)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "jobs", a->n);
	cJSON_AddNumberToObject(j, "ran", a->ran);
	cJSON_AddNumberToObject(j, "throughput_ratio_min", a->tr_min);
	cJSON_AddNumberToObject(j, "throughput_ratio_median", a->tr_med);
	cJSON_AddNumberToObject(j, "resource_ratio_max", a->rr_max);
	cJSON_AddNumberToObject(j, "plans_to_converge_max", a->ptc_max);
	cJSON_AddNumberToObject(j, "oom_jobs", a->oom_jobs);
	cJSON_AddNumberToObject(j, "oom_recovered", a->oom_ok);
	cJSON_AddNumberToObject(j, "meet_targets", a->pass);
	cJSON_AddNumberToObject(j, "infeasible", a->infeasible);
	return j;
}

static cJSON *cluster_json(const struct sim_cluster_result *c)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "util", c->util);
	cJSON_AddNumberToObject(j, "alloc", c->alloc);
	cJSON_AddNumberToObject(j, "mean_jct_s", c->mean_jct_s);
	cJSON_AddNumberToObject(j, "makespan_s", c->makespan_s);
	cJSON_AddNumberToObject(j, "unplaced", c->unplaced);
	return j;
}

static void print_row(const char *who, const struct sim_result *r, const struct sim_oracle *o)
{
	if (!r->ran) {
		fprintf(stderr, "  %-8s did not run: %s\n", who, r->error);
		return;
	}
	fprintf(stderr,
		"  %-8s w=%-3d ps=%-2d wcpu=%-5.1f pscpu=%-5.1f wmem=%-6lld psmem=%-6lld "
		"cores=%-7.1f "
		"thr=%.3f res=%.3f plans=%d conv=%d oom=%d%s%s%s\n",
		who, r->final.workers, r->final.ps, r->final.worker_cpu, r->final.ps_cpu,
		(long long)r->final.worker_mem_mb, (long long)r->final.ps_mem_mb, r->cores,
		r->speed / o->speed, r->cost / o->cost, r->plans, r->plans_to_converge, r->ooms,
		r->oom_failed ? " OOM-FAILED" : "", r->infeasible ? " INFEASIBLE" : "",
		job_pass(r, o) ? "" : " (misses targets)");
}

/* The config each job runs with in the cluster: a policy's final config;
 * a job that died of OOM is resubmitted as the user asked, with the memory
 * its owner then sets by hand (the need). */
static void cluster_configs(const struct sim *s, const struct sim_result *res,
			    struct sim_config *out)
{
	for (int i = 0; i < s->t.n; i++) {
		const struct sim_job *j = &s->t.jobs[i];
		if (res && res[i].ran && !res[i].oom_failed) {
			out[i] = res[i].final;
			continue;
		}
		out[i] = j->user;
		if (out[i].worker_mem_mb < j->worker_mem_need_mb)
			out[i].worker_mem_mb = j->worker_mem_need_mb;
		if (j->strategy == SIM_PS && out[i].ps_mem_mb < model_ps_mem_need(j, out[i].ps))
			out[i].ps_mem_mb = model_ps_mem_need(j, out[i].ps);
	}
}

static void fmt_ratio(char *buf, size_t size, double x, bool have)
{
	if (have)
		snprintf(buf, size, "%.3f", x);
	else
		snprintf(buf, size, "na");
}

static int run(int argc, char **argv)
{
	struct sim s;
	memset(&s, 0, sizeof(s));
	if (parse_args(&s, argc, argv) < 0)
		return 2;
	char msg[1024];
	if (trace_load(s.trace_path, &s.t, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "rover-sim: could not load trace: %s\n", msg);
		return 2;
	}
	if (s.t.has_cluster) {
		if (!s.shape_given[0])
			s.nodes = s.t.cluster.nodes;
		if (!s.shape_given[1])
			s.node_cpu = s.t.cluster.node_cpu;
		if (!s.shape_given[2])
			s.node_mem_mb = s.t.cluster.node_mem_mb;
	}
	s.o.cluster = (struct sim_cluster_shape){ s.nodes, s.node_cpu, s.node_mem_mb };
	int n = s.t.n;
	s.oracle = calloc((size_t)n, sizeof(*s.oracle));
	s.rov = calloc((size_t)n, sizeof(*s.rov));
	s.base = calloc((size_t)n, sizeof(*s.base));
	if (!s.oracle || !s.rov || !s.base)
		return 1;
	for (int i = 0; i < n; i++) {
		oracle_compute(&s.t.jobs[i], &s.o.cluster, &s.oracle[i]);
		if (s.baseline)
			baseline_run(&s.t.jobs[i], &s.o, &s.base[i]);
	}
	if (s.rover) {
		if (report_cluster(&s) < 0)
			return 1;
		int nt = s.o.threads < n ? s.o.threads : n;
		pthread_t th[256];
		for (int k = 0; k < nt; k++)
			pthread_create(&th[k], NULL, rover_thread, &s);
		for (int k = 0; k < nt; k++)
			pthread_join(th[k], NULL);
		for (int i = 0; i < n; i++)
			if (s.t.jobs[i].zero_config)
				rover_run(&s.t.jobs[i], &s.o, &s.rov[i]);
	}
	int failed = 0;
	for (int i = 0; i < n; i++) {
		const struct sim_job *j = &s.t.jobs[i];
		const struct sim_oracle *o = &s.oracle[i];
		fprintf(stderr, "%s (%s): oracle w=%d ps=%d cores=%.1f speed=%.1f best=%.1f\n", j->name,
			j->strategy == SIM_PS ? "ps" : "allreduce", o->config.workers, o->config.ps,
			o->cores, o->speed, o->best_speed);
		if (s.rover) {
			print_row("rover", &s.rov[i], o);
			failed += !s.rov[i].ran;
			if (!job_pass(&s.rov[i], o) && s.rov[i].last_reason[0])
				fprintf(stderr, "           last plan: %s\n", s.rov[i].last_reason);
		}
		if (s.baseline)
			print_row("baseline", &s.base[i], o);
	}
	struct agg ar, ab;
	aggregate(&s, s.rov, &ar);
	aggregate(&s, s.base, &ab);
	struct sim_cluster_result cu = { 0 }, co = { 0 }, cr = { 0 }, cb = { 0 };
	if (s.cluster) {
		struct sim_config *cfg = calloc((size_t)n, sizeof(*cfg));
		if (!cfg)
			return 1;
		cluster_configs(&s, NULL, cfg);
		cluster_run(&s.t, cfg, &s.o.cluster, &cu);
		/* The ceiling: every job at its oracle config (what the targets
		 * allow), the user's where no config fits. */
		for (int i = 0; i < n; i++)
			if (isfinite(s.oracle[i].cost))
				cfg[i] = s.oracle[i].config;
		cluster_run(&s.t, cfg, &s.o.cluster, &co);
		if (s.rover) {
			cluster_configs(&s, s.rov, cfg);
			cluster_run(&s.t, cfg, &s.o.cluster, &cr);
		}
		if (s.baseline) {
			cluster_configs(&s, s.base, cfg);
			cluster_run(&s.t, cfg, &s.o.cluster, &cb);
		}
		free(cfg);
		fprintf(stderr,
			"cluster %dx%.0f cores: util user=%.1f%% oracle=%.1f%% rover=%.1f%% "
			"baseline=%.1f%%; mean jct user=%.0fs oracle=%.0fs rover=%.0fs "
			"baseline=%.0fs; configs that could not run (run as the user asked) "
			"user=%d rover=%d baseline=%d\n",
			s.nodes, s.node_cpu, cu.util, co.util, cr.util, cb.util, cu.mean_jct_s,
			co.mean_jct_s, cr.mean_jct_s, cb.mean_jct_s, cu.unplaced, cr.unplaced,
			cb.unplaced);
	}
	if (s.json_path) {
		cJSON *root = cJSON_CreateObject();
		cJSON *jobs = cJSON_AddArrayToObject(root, "jobs");
		for (int i = 0; i < n; i++) {
			const struct sim_oracle *o = &s.oracle[i];
			cJSON *jj = cJSON_CreateObject();
			cJSON_AddStringToObject(jj, "name", s.t.jobs[i].name);
			cJSON_AddStringToObject(jj, "strategy",
						s.t.jobs[i].strategy == SIM_PS ? "ps" : "allreduce");
			cJSON *oj = cJSON_AddObjectToObject(jj, "oracle");
			cJSON_AddNumberToObject(oj, "best_speed", o->best_speed);
			cJSON_AddNumberToObject(oj, "speed", o->speed);
			cJSON_AddNumberToObject(oj, "cores", o->cores);
			cJSON_AddNumberToObject(oj, "cost", o->cost);
			cJSON_AddItemToObject(oj, "config", config_json(&o->config));
			cJSON_AddItemToObject(jj, "user", config_json(&s.t.jobs[i].user));
			cJSON_AddNumberToObject(jj, "user_speed", model_speed(&s.t.jobs[i], &s.t.jobs[i].user));
			cJSON_AddNumberToObject(jj, "user_cores", config_cores(&s.t.jobs[i], &s.t.jobs[i].user));
			if (s.rover)
				cJSON_AddItemToObject(jj, "rover", result_json(&s.rov[i], o));
			if (s.baseline)
				cJSON_AddItemToObject(jj, "baseline", result_json(&s.base[i], o));
			cJSON_AddItemToArray(jobs, jj);
		}
		if (s.rover)
			cJSON_AddItemToObject(root, "rover", agg_json(&ar));
		if (s.baseline)
			cJSON_AddItemToObject(root, "baseline", agg_json(&ab));
		if (s.cluster) {
			cJSON *c = cJSON_AddObjectToObject(root, "cluster");
			cJSON_AddItemToObject(c, "user", cluster_json(&cu));
			cJSON_AddItemToObject(c, "oracle", cluster_json(&co));
			if (s.rover)
				cJSON_AddItemToObject(c, "rover", cluster_json(&cr));
			if (s.baseline)
				cJSON_AddItemToObject(c, "baseline", cluster_json(&cb));
		}
		char *txt = cJSON_Print(root);
		cJSON_Delete(root);
		FILE *f = fopen(s.json_path, "w");
		if (!f || !txt || fputs(txt, f) < 0 || fclose(f) != 0) {
			fprintf(stderr, "rover-sim: could not write \"%s\": %s\n", s.json_path,
				strerror(errno));
			free(txt);
			return 1;
		}
		free(txt);
	}
	char trmin[16], trmed[16], rrmax[16], btr[16], brr[16], ur[16], ub[16], uu[16], jr[16];
	fmt_ratio(trmin, sizeof(trmin), ar.tr_min, s.rover);
	fmt_ratio(trmed, sizeof(trmed), ar.tr_med, s.rover);
	fmt_ratio(rrmax, sizeof(rrmax), ar.rr_max, s.rover);
	fmt_ratio(btr, sizeof(btr), ab.tr_min, s.baseline);
	fmt_ratio(brr, sizeof(brr), ab.rr_max, s.baseline);
	char bpass[24];
	if (s.baseline)
		snprintf(bpass, sizeof(bpass), "%d/%d", ab.pass, n);
	else
		snprintf(bpass, sizeof(bpass), "na");
	if (s.cluster) {
		snprintf(uu, sizeof(uu), "%.1f", cu.util);
		fmt_ratio(ur, sizeof(ur), cr.util, s.rover);
		fmt_ratio(ub, sizeof(ub), cb.util, s.baseline);
		if (s.rover) {
			snprintf(ur, sizeof(ur), "%.1f", cr.util);
			fmt_ratio(jr, sizeof(jr), cu.mean_jct_s > 0 ? cr.mean_jct_s / cu.mean_jct_s : 0,
				  true);
		} else {
			snprintf(jr, sizeof(jr), "na");
		}
		if (s.baseline)
			snprintf(ub, sizeof(ub), "%.1f", cb.util);
	} else {
		snprintf(uu, sizeof(uu), "na");
		snprintf(ur, sizeof(ur), "na");
		snprintf(ub, sizeof(ub), "na");
		snprintf(jr, sizeof(jr), "na");
	}
	const struct agg *main_agg = s.rover ? &ar : &ab;
	printf("%s%s jobs=%d throughput_ratio_min=%s throughput_ratio_median=%s "
	       "resource_ratio_max=%s plans_to_converge_max=%d oom_recovered=%d/%d util_rover=%s "
	       "util_user=%s util_baseline=%s jct_ratio=%s baseline_throughput_ratio_min=%s "
	       "baseline_resource_ratio_max=%s jobs_meeting_all=%d/%d "
	       "baseline_jobs_meeting_all=%s\n",
	       s.bench ? "bench=" : "sim", s.bench ? s.bench : "", n, trmin, trmed, rrmax,
	       main_agg->ptc_max, main_agg->oom_ok, main_agg->oom_jobs, ur, uu, ub, jr, btr, brr,
	       main_agg->pass, n, bpass);
	trace_release(&s.t);
	free(s.oracle);
	free(s.rov);
	free(s.base);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	gsl_set_error_handler_off();
	return run(argc, argv);
}
