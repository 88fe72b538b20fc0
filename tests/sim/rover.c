/*
 * rover.c: play one simulated job against a live rover-brain over REST, the
 * way a master would: register, apply each plan, report speed and node
 * samples with simulated timestamps, raise node_oom when a plan gives less
 * memory than the truth needs, report plan_applied and job_finished.
 * Thread-safe: each call owns its HTTP client (one curl handle).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "json.h"
#include "sim.h"

#define SIM_T0_MS 1700000000000LL
#define MAX_OOM_PLANS 8
#define BATCH_SAMPLES 4000

struct run {
	const struct sim_job *j;
	const struct sim_opts *o;
	struct sim_result *r;
	struct rv_http_client *http;
	struct sim_rng rng;
	char uid[64];
	char base[512];
	int64_t ts_ms;           /* the job's clock */
	double since_change_s;   /* for warm-up */
	int64_t step;
	int64_t last_plan_id;
	struct sim_config c;
};

/* method + path; body may be NULL.  Returns the HTTP status or -errno; *json
 * (when asked) gets the parsed reply. */
static long call(struct run *s, const char *method, const char *path, const char *body,
		 cJSON **json)
{
	char url[1024];
	snprintf(url, sizeof(url), "%s%s", s->o->brain, path);
	struct rv_http_result res = { 0 };
	struct rv_err err = { 0 };
	int rc = -EIO;
	for (int attempt = 0; attempt < 3; attempt++) {
		rc = rv_http_request(s->http, method, url, body, body ? strlen(body) : 0, 0, &res, &err);
		if (rc == 0 && res.status != 503)
			break;
		if (rc == 0)
			rv_http_result_release(&res);
		usleep(100000);
	}
	if (rc < 0) {
		snprintf(s->r->error, sizeof(s->r->error), "%s %.60s: %.80s", method, path, err.msg);
		return rc;
	}
	long st = res.status;
	if (json)
		*json = res.body ? cJSON_Parse(res.body) : NULL;
	if (st >= 400)
		snprintf(s->r->error, sizeof(s->r->error), "%s %.50s: %ld %.80s", method, path, st,
			 res.body ? res.body : "");
	rv_http_result_release(&res);
	return st;
}

static long post_json(struct run *s, const char *path, cJSON *doc, cJSON **reply)
{
	char *body = rv_json_print(doc);
	cJSON_Delete(doc);
	if (!body)
		return -ENOMEM;
	long st = call(s, "POST", path, body, reply);
	free(body);
	return st;
}

static double jnum(const cJSON *o, const char *key, double dflt)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(it) ? it->valuedouble : dflt;
}

static cJSON *resources(double cpu, int64_t mem_mb)
{
	cJSON *r = cJSON_CreateObject();
	char m[32];
	snprintf(m, sizeof(m), "%" PRId64 "Mi", mem_mb);
	cJSON_AddNumberToObject(r, "cpu", cpu);
	cJSON_AddStringToObject(r, "memory", m);
	return r;
}

static cJSON *replica(int n, int min, int max, bool with_res, double cpu, int64_t mem)
{
	cJSON *r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "replicas", n);
	cJSON_AddNumberToObject(r, "minReplicas", min);
	cJSON_AddNumberToObject(r, "maxReplicas", max);
	if (with_res)
		cJSON_AddItemToObject(r, "resources", resources(cpu, mem));
	return r;
}

static cJSON *job_doc(const struct run *s)
{
	const struct sim_job *j = s->j;
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "apiVersion", "elastic.rover.dev/v1alpha1");
	cJSON_AddStringToObject(d, "kind", "ElasticJob");
	cJSON *md = cJSON_AddObjectToObject(d, "metadata");
	char name[96];
	snprintf(name, sizeof(name), "%s%s", j->name, s->o->run_tag);
	cJSON_AddStringToObject(md, "name", name);
	cJSON_AddStringToObject(md, "namespace", "sim");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(md, "labels"), "user", "sim");
	cJSON *spec = cJSON_AddObjectToObject(d, "spec");
	cJSON_AddStringToObject(spec, "distributionStrategy",
				j->strategy == SIM_PS ? "ParameterServerStrategy" : "AllreduceStrategy");
	cJSON_AddStringToObject(spec, "optimizeMode", "cluster");
	cJSON *rs = cJSON_AddObjectToObject(spec, "replicaSpecs");
	cJSON_AddItemToObject(rs, "worker",
			      replica(j->user.workers, j->min_workers, j->max_workers, !j->zero_config,
				      j->user.worker_cpu, j->user.worker_mem_mb));
	if (j->strategy == SIM_PS)
		cJSON_AddItemToObject(rs, "ps",
				      replica(j->user.ps, j->min_ps, j->max_ps, !j->zero_config,
					      j->user.ps_cpu, j->user.ps_mem_mb));
	cJSON *model = cJSON_AddObjectToObject(spec, "model");
	cJSON_AddNumberToObject(model, "parameters", (double)j->parameters);
	cJSON_AddNumberToObject(model, "batchSize", j->batch_size);
	cJSON *ds = cJSON_AddArrayToObject(spec, "datasets");
	cJSON *d0 = cJSON_CreateObject();
	cJSON_AddStringToObject(d0, "name", "train");
	cJSON_AddNumberToObject(d0, "size", j->work);
	cJSON_AddNumberToObject(d0, "shardSize", j->batch_size * 100);
	cJSON_AddNumberToObject(d0, "epochs", 1);
	cJSON_AddItemToArray(ds, d0);
	return d;
}

static bool config_same(const struct sim_config *a, const struct sim_config *b)
{
	return a->workers == b->workers && a->ps == b->ps &&
	       fabs(a->worker_cpu - b->worker_cpu) < 1e-6 && fabs(a->ps_cpu - b->ps_cpu) < 1e-6 &&
	       a->worker_mem_mb == b->worker_mem_mb && a->ps_mem_mb == b->ps_mem_mb;
}

/* Apply a plan's groups (and a migrate that moves every PS) to the config. */
static void apply_plan(struct run *s, const cJSON *plan)
{
	const cJSON *groups = cJSON_GetObjectItemCaseSensitive(plan, "groups");
	for (int role = 0; role < 2; role++) {
		const cJSON *g = cJSON_GetObjectItemCaseSensitive(groups, role ? "ps" : "worker");
		if (!cJSON_IsObject(g) || (role && s->j->strategy != SIM_PS))
			continue;
		const cJSON *res = cJSON_GetObjectItemCaseSensitive(g, "resource");
		int count = (int)jnum(g, "count", -1);
		double cpu = jnum(res, "cpu", 0);
		int64_t mem = (int64_t)jnum(res, "memory_mb", 0);
		if (role) {
			if (count > 0)
				s->c.ps = count;
			if (cpu > 0)
				s->c.ps_cpu = cpu;
			if (mem > 0)
				s->c.ps_mem_mb = mem;
		} else {
			if (count > 0)
				s->c.workers = count;
			if (cpu > 0)
				s->c.worker_cpu = cpu;
			if (mem > 0)
				s->c.worker_mem_mb = mem;
		}
	}
	/* The simulated PS share the load evenly, so only a migration of every PS
	 * moves the bottleneck; a partial one is recorded but changes nothing. */
	const cJSON *mig = cJSON_GetObjectItemCaseSensitive(plan, "migrate");
	if (cJSON_IsArray(mig) && cJSON_GetArraySize(mig) >= s->c.ps && s->c.ps > 0) {
		double lo = INFINITY;
		const cJSON *m;
		cJSON_ArrayForEach(m, mig)
		{
			double cpu = jnum(cJSON_GetObjectItemCaseSensitive(m, "resource"), "cpu", 0);
			if (cpu < lo)
				lo = cpu;
		}
		if (lo > 0 && isfinite(lo))
			s->c.ps_cpu = lo;
	}
	const cJSON *reason = cJSON_GetObjectItemCaseSensitive(plan, "reason");
	if (cJSON_IsString(reason))
		snprintf(s->r->last_reason, sizeof(s->r->last_reason), "%s", reason->valuestring);
}

static int post_event(struct run *s, const char *type, int64_t plan_id, cJSON **reply)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", type);
	cJSON_AddNumberToObject(ev, "ts", (double)s->ts_ms);
	if (plan_id)
		cJSON_AddNumberToObject(ev, "plan_id", (double)plan_id);
	char path[160];
	snprintf(path, sizeof(path), "/v1/jobs/%s/events", s->uid);
	long st = post_json(s, path, ev, reply);
	return st == 200 ? 0 : -EIO;
}

/* The job died of OOM on role's first node: report it, apply the oom plan. */
static int handle_oom(struct run *s, int role)
{
	struct sim_result *r = s->r;
	int64_t *mem = role ? &s->c.ps_mem_mb : &s->c.worker_mem_mb;
	int64_t need = role ? model_ps_mem_need(s->j, s->c.ps) : s->j->worker_mem_need_mb;
	struct sim_oom_event *ev = &r->oom[r->noom < SIM_MAX_EVENTS ? r->noom++ : r->noom - 1];
	ev->role = role;
	ev->from_mb = *mem;
	r->ooms++;
	if (r->ooms > MAX_OOM_PLANS) {
		r->oom_failed = true;
		return 0;
	}
	s->ts_ms += 5000;
	cJSON *e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "type", "node_oom");
	cJSON_AddNumberToObject(e, "ts", (double)s->ts_ms);
	cJSON_AddStringToObject(e, "node", role ? "ps-0" : "worker-0");
	cJSON_AddStringToObject(e, "role", role ? "ps" : "worker");
	cJSON_AddNumberToObject(e, "rank", 0);
	cJSON_AddNumberToObject(e, "exit_code", 137);
	cJSON_AddNumberToObject(e, "memory_mb", (double)*mem);
	cJSON_AddNumberToObject(e, "peak_memory_mb", (double)need);
	char path[200];
	snprintf(path, sizeof(path), "/v1/jobs/%s/events", s->uid);
	cJSON *reply = NULL;
	long st = post_json(s, path, e, &reply);
	int64_t plan_id = (int64_t)jnum(reply, "plan_id", 0);
	cJSON_Delete(reply);
	if (st != 200)
		return -EIO;
	if (!plan_id) {
		r->oom_failed = true;
		snprintf(r->last_reason, sizeof(r->last_reason), "no oom plan for the node_oom event");
		return 0;
	}
	snprintf(path, sizeof(path), "/v1/jobs/%s/plan?stage=oom", s->uid);
	cJSON *plan = NULL;
	st = call(s, "GET", path, NULL, &plan);
	const cJSON *launch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(plan, "launch"), 0);
	int64_t next = (int64_t)jnum(cJSON_GetObjectItemCaseSensitive(launch, "resource"),
				     "memory_mb", 0);
	const cJSON *reason = cJSON_GetObjectItemCaseSensitive(plan, "reason");
	if (cJSON_IsString(reason))
		snprintf(r->last_reason, sizeof(r->last_reason), "%s", reason->valuestring);
	cJSON_Delete(plan);
	if (st != 200)
		return -EIO;
	if (next <= *mem) {
		r->oom_failed = true;
		return 0;
	}
	/* Every node of the role runs the same program and would OOM alike:
	 * the relaunch memory applies to the role. */
	*mem = next;
	ev->to_mb = next;
	r->plans++;
	r->plans_to_converge = r->plans;
	s->since_change_s = 0;
	return post_event(s, "plan_applied", plan_id, NULL);
}

static void add_node_sample(cJSON *arr, int64_t ts, const char *role, int rank, double cpu,
			    int64_t mem, double cpu_limit, int64_t mem_limit, double step_time)
{
	cJSON *n = cJSON_CreateObject();
	char name[32];
	snprintf(name, sizeof(name), "%s-%d", role, rank);
	cJSON_AddStringToObject(n, "kind", "node");
	cJSON_AddNumberToObject(n, "ts", (double)ts);
	cJSON_AddStringToObject(n, "node", name);
	cJSON_AddStringToObject(n, "role", role);
	cJSON_AddNumberToObject(n, "rank", rank);
	cJSON_AddNumberToObject(n, "cpu", round(cpu * 100) / 100);
	cJSON_AddNumberToObject(n, "memory_mb", (double)mem);
	cJSON_AddNumberToObject(n, "cpu_limit", cpu_limit);
	cJSON_AddNumberToObject(n, "memory_limit_mb", (double)mem_limit);
	if (step_time > 0)
		cJSON_AddNumberToObject(n, "step_time", round(step_time * 1e4) / 1e4);
	cJSON_AddItemToArray(arr, n);
}

static double noisy(struct run *s, double x, double scale)
{
	double v = x * (1 + scale * s->j->noise * rng_normal(&s->rng));
	return v > 0 ? v : 0;
}

/* Simulate one round of job time and report its samples. */
static int report_round(struct run *s)
{
	const struct sim_job *j = s->j;
	const struct sim_config *c = &s->c;
	double steady = model_speed(j, c);
	double need_w = j->worker_cpu_need;
	double need_p = model_ps_cpu_need(j, c->workers, c->ps);
	int64_t mem_p = model_ps_mem_need(j, c->ps);
	cJSON *doc = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(doc, "samples");
	int n = 0;
	char path[160];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", s->uid);
	for (double t = s->o->sample_s; t <= s->o->round_s + 1e-9; t += s->o->sample_s) {
		s->ts_ms += (int64_t)(s->o->sample_s * 1000);
		s->since_change_s += s->o->sample_s;
		double warm = j->warmup_s > 0 ? 0.5 + 0.5 * s->since_change_s / j->warmup_s : 1;
		if (warm > 1)
			warm = 1;
		double speed = noisy(s, steady * warm, 1);
		s->step += (int64_t)(speed * s->o->sample_s / (j->batch_size > 0 ? j->batch_size : 1));
		cJSON *sp = cJSON_CreateObject();
		cJSON_AddStringToObject(sp, "kind", "speed");
		cJSON_AddNumberToObject(sp, "ts", (double)s->ts_ms);
		cJSON_AddNumberToObject(sp, "speed", round(speed * 1000) / 1000);
		cJSON_AddNumberToObject(sp, "step", (double)s->step);
		cJSON_AddNumberToObject(sp, "workers", c->workers);
		cJSON_AddNumberToObject(sp, "ps", c->ps);
		cJSON_AddItemToArray(arr, sp);
		n++;
		/* Usage follows the work actually done: the need scaled by the
		 * speed reached, capped by the limit. */
		double load = steady > 0 ? speed / model_speed_ideal(j, c->workers, c->ps) : 0;
		double step_time = speed > 0 ? j->batch_size * c->workers / speed : 0;
		for (int i = 0; i < c->workers; i++) {
			double cpu = fmin(c->worker_cpu, noisy(s, need_w * load, 0.5));
			int64_t mem = (int64_t)(j->worker_mem_need_mb * (0.9 + 0.1 * rng_uniform(&s->rng)));
			add_node_sample(arr, s->ts_ms, "worker", i, cpu, mem,
					c->worker_cpu, c->worker_mem_mb, noisy(s, step_time, 0.5));
			n++;
		}
		for (int i = 0; i < c->ps; i++) {
			double cpu = fmin(c->ps_cpu, noisy(s, need_p * load, 0.5));
			int64_t mem = (int64_t)(mem_p * (0.9 + 0.1 * rng_uniform(&s->rng)));
			add_node_sample(arr, s->ts_ms, "ps", i, cpu, mem, c->ps_cpu, c->ps_mem_mb, -1);
			n++;
		}
		if (n >= BATCH_SAMPLES) {
			if (post_json(s, path, doc, NULL) != 200)
				return -EIO;
			doc = cJSON_CreateObject();
			arr = cJSON_AddArrayToObject(doc, "samples");
			n = 0;
		}
	}
	if (n == 0) {
		cJSON_Delete(doc);
		return 0;
	}
	return post_json(s, path, doc, NULL) == 200 ? 0 : -EIO;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Wait until the planner has looked at our newest sample: "planned_ts" on
 * the job when the brain has it, else a short pause. */
static void wait_planned(struct run *s)
{
	char path[160];
	snprintf(path, sizeof(path), "/v1/jobs/%s", s->uid);
	for (int i = 0; i < 400; i++) {
		cJSON *job = NULL;
		long st = call(s, "GET", path, NULL, &job);
		const cJSON *pts = cJSON_GetObjectItemCaseSensitive(job, "planned_ts");
		if (st != 200 || !cJSON_IsNumber(pts)) {
			cJSON_Delete(job);
			sleep_ms(40);
			return;
		}
		bool done = (int64_t)pts->valuedouble >= s->ts_ms;
		cJSON_Delete(job);
		if (done)
			return;
		sleep_ms(5);
	}
}

static int play(struct run *s)
{
	struct sim_result *r = s->r;
	cJSON *reply = NULL;
	long st = post_json(s, "/v1/jobs", job_doc(s), &reply);
	const cJSON *uid = cJSON_GetObjectItemCaseSensitive(reply, "uid");
	if (st != 201 || !cJSON_IsString(uid)) {
		cJSON_Delete(reply);
		return -EIO;
	}
	snprintf(s->uid, sizeof(s->uid), "%s", uid->valuestring);
	/* The create plan sets everything; what it leaves out the user gave. */
	s->c = s->j->user;
	const cJSON *plan = cJSON_GetObjectItemCaseSensitive(reply, "plan");
	apply_plan(s, plan);
	s->last_plan_id = (int64_t)jnum(plan, "id", 0);
	cJSON_Delete(reply);
	if (s->last_plan_id && post_event(s, "plan_applied", s->last_plan_id, NULL) < 0)
		return -EIO;
	int quiet = 0;
	for (r->rounds = 0; r->rounds < s->o->max_rounds; r->rounds++) {
		int role = model_oom_role(s->j, &s->c);
		if (role >= 0) {
			if (handle_oom(s, role) < 0)
				return -EIO;
			if (r->oom_failed)
				return 0;
			quiet = 0;
			continue;
		}
		if (report_round(s) < 0)
			return -EIO;
		wait_planned(s);
		char path[200];
		snprintf(path, sizeof(path), "/v1/jobs/%s/plan?stage=running&after=%" PRId64, s->uid,
			 s->last_plan_id);
		cJSON *p = NULL;
		st = call(s, "GET", path, NULL, &p);
		if (st == 200 && p) {
			struct sim_config before = s->c;
			apply_plan(s, p);
			int64_t id = (int64_t)jnum(p, "id", 0);
			cJSON_Delete(p);
			if (id > s->last_plan_id)
				s->last_plan_id = id;
			r->plans++;
			if (!config_same(&before, &s->c)) {
				r->plans_to_converge = r->plans;
				s->since_change_s = 0;
			}
			if (post_event(s, "plan_applied", id, NULL) < 0)
				return -EIO;
			quiet = 0;
			continue;
		}
		cJSON_Delete(p);
		if (st != 204)
			return -EIO;
		if (++quiet >= s->o->settle_rounds) {
			r->rounds++;
			break;
		}
	}
	/* The last config must also survive: one more OOM check after the loop. */
	if (model_oom_role(s->j, &s->c) >= 0) {
		r->oom_failed = true;
		r->ooms++;
	}
	s->ts_ms += 1000;
	return post_event(s, "job_finished", 0, NULL);
}

void rover_run(const struct sim_job *j, const struct sim_opts *o, struct sim_result *r)
{
	memset(r, 0, sizeof(*r));
	struct run s = { .j = j, .o = o, .r = r, .ts_ms = SIM_T0_MS };
	rng_seed(&s.rng, j->name);
	s.http = rv_http_client_new(o->token, 3000, 30000);
	if (!s.http) {
		snprintf(r->error, sizeof(r->error), "could not create http client");
		return;
	}
	int rc = play(&s);
	rv_http_client_free(s.http);
	r->ran = rc == 0;
	r->final = s.c;
	r->speed = r->oom_failed ? 0 : model_speed(j, &s.c);
	r->cores = config_cores(j, &s.c);
}
