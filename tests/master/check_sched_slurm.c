/*
 * check_sched_slurm.c: the slurm backend (master/sched_slurm.c) against a
 * stand-in slurmrestd on loopback (common/http_server) that speaks one REST
 * API version, v0.0.38 (Slurm 22.05) or v0.0.42 (24.11), in that version's
 * JSON shapes: what the backend submits (script, environment, resources),
 * how it reads job states and exit codes into events (RUNNING, FAILED,
 * NODE_FAIL, OUT_OF_MEMORY, a requeue), a job left pending past its wait
 * (cancelled, FAILED with Slurm's reason), a failed Slurm node and the
 * hosts the node manager names excluded from later jobs (never every node
 * of the partition), a removal (SIGTERM, then SIGKILL after the grace), a
 * server offering no known version, and never a list of every job on the
 * cluster (each job is asked for by its id).  The real
 * slurmrestd runs in tests/scripts/check_slurm.sh.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "http.h"
#include "json.h"
#include "sched_slurm.h"
#include "testutil.h"

/* The stand-in's state, under mu. */
struct fake {
	pthread_mutex_t mu;
	const char *version; /* "v0.0.38", "v0.0.42", or one not known */
	char *submitted;     /* the last submit body */
	char state[32];      /* the job's state */
	char reason[32];
	int exit_status; /* v0.0.38: a wait status; v0.0.42: the return code */
	int restarts;
	char signals[128]; /* the DELETEs' signals, space-separated */
	int64_t job_id;
	int lists; /* GETs of every job on the cluster */
	int nodes; /* the cluster's nodes (n1..nN) GET /nodes lists */
};

static struct fake fk = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void fake_set(const char *state, int exit_status)
{
	pthread_mutex_lock(&fk.mu);
	snprintf(fk.state, sizeof(fk.state), "%s", state);
	fk.exit_status = exit_status;
	pthread_mutex_unlock(&fk.mu);
}

static int h_openapi(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	(void)ctx;
	char *b = NULL;
	ck_assert_int_gt(asprintf(&b, "{\"paths\":{\"/slurm/%s/job/submit\":{}}}", fk.version), 0);
	rv_http_resp_json(resp, 200, b);
	return 0;
}

static int h_submit(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)ctx;
	pthread_mutex_lock(&fk.mu);
	free(fk.submitted);
	fk.submitted = strdup(req->body);
	fk.job_id++;
	snprintf(fk.state, sizeof(fk.state), "PENDING");
	char *b = NULL;
	ck_assert_int_gt(asprintf(&b, "{\"errors\":[],\"job_id\":%lld}", (long long)fk.job_id), 0);
	pthread_mutex_unlock(&fk.mu);
	rv_http_resp_json(resp, 200, b);
	return 0;
}

/* One job in the version's shape. */
static char *job_json(void)
{
	bool v38 = !strcmp(fk.version, "v0.0.38");
	char *b = NULL;
	if (v38)
		ck_assert_int_gt(
			asprintf(&b,
				 "{\"jobs\":[{\"job_id\":%lld,\"job_state\":\"%s\","
				 "\"state_reason\":\"%s\",\"exit_code\":%d,\"nodes\":\"n7\","
				 "\"start_time\":1700000000,\"restart_cnt\":%d}]}",
				 (long long)fk.job_id, fk.state, fk.reason, fk.exit_status,
				 fk.restarts),
			0);
	else
		ck_assert_int_gt(
			asprintf(&b,
				 "{\"jobs\":[{\"job_id\":%lld,\"job_state\":[\"%s\"],"
				 "\"state_reason\":\"%s\",\"exit_code\":{\"status\":[\"EXITED\"],"
				 "\"return_code\":{\"set\":true,\"infinite\":false,\"number\":%d},"
				 "\"signal\":{\"id\":{\"set\":false,\"number\":0},\"name\":\"\"}},"
				 "\"nodes\":\"n7\",\"start_time\":{\"set\":true,\"number\":"
				 "1700000000},"
				 "\"restart_cnt\":%d}]}",
				 (long long)fk.job_id, fk.state, fk.reason, fk.exit_status,
				 fk.restarts),
			0);
	return b;
}

static int h_jobs(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	(void)ctx;
	pthread_mutex_lock(&fk.mu);
	fk.lists++;
	char *b = job_json();
	pthread_mutex_unlock(&fk.mu);
	rv_http_resp_json(resp, 200, b);
	return 0;
}

/* One job by its id; another id is Slurm's 500 "Invalid job id specified". */
static int h_job(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)ctx;
	pthread_mutex_lock(&fk.mu);
	bool ours = req->nparams == 2 && atoll(req->params[1]) == fk.job_id;
	char *b = ours ? job_json()
		       : strdup("{\"errors\":[{\"error_number\":2017,\"error\":"
				"\"Invalid job id specified\"}],\"jobs\":[]}");
	pthread_mutex_unlock(&fk.mu);
	rv_http_resp_json(resp, ours ? 200 : 500, b);
	return 0;
}

/* The cluster's nodes n1..n<fk.nodes>, all in partition "p"; node i has i
 * CPUs and 1000 x i MiB. */
static int h_nodes(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	(void)ctx;
	struct rv_buf b = { 0 };
	rv_buf_printf(&b, "{\"nodes\":[");
	pthread_mutex_lock(&fk.mu);
	for (int i = 1; i <= fk.nodes; i++)
		rv_buf_printf(&b,
			      "%s{\"name\":\"n%d\",\"partitions\":[\"p\"],\"cpus\":%d,"
			      "\"real_memory\":%d}",
			      i > 1 ? "," : "", i, i, 1000 * i);
	pthread_mutex_unlock(&fk.mu);
	rv_buf_printf(&b, "]}");
	rv_http_resp_json(resp, 200, b.data);
	return 0;
}

static int h_delete(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)ctx;
	const char *sig = rv_http_query(req, "signal");
	pthread_mutex_lock(&fk.mu);
	size_t n = strlen(fk.signals);
	snprintf(fk.signals + n, sizeof(fk.signals) - n, "%s ", sig ? sig : "?");
	if (sig && !strcmp(sig, "SIGKILL"))
		snprintf(fk.state, sizeof(fk.state), "CANCELLED");
	pthread_mutex_unlock(&fk.mu);
	rv_http_resp_json(resp, 200, strdup("{\"errors\":[]}"));
	return 0;
}

static const struct rv_http_route routes[] = {
	{ "GET", "/openapi/v3", h_openapi, 0, "" },
	{ "POST", "/slurm/{v}/job/submit", h_submit, RV_HTTP_WRITE, "" },
	{ "GET", "/slurm/{v}/jobs", h_jobs, 0, "" },
	{ "GET", "/slurm/{v}/job/{id}", h_job, 0, "" },
	{ "GET", "/slurm/{v}/nodes", h_nodes, 0, "" },
	{ "DELETE", "/slurm/{v}/job/{id}", h_delete, RV_HTTP_WRITE, "" },
};

static struct rv_http_server *srv;

/* The stand-in for version v, and a backend on it. */
static struct sched *start(const char *v, int64_t pend_max_ms, struct rv_err *err)
{
	fk.version = v;
	fk.signals[0] = 0;
	fk.reason[0] = 0;
	fk.restarts = 0;
	fk.lists = 0;
	fk.nodes = 8;
	struct rv_http_server_opts o = { .host = "127.0.0.1",
					 .max_body = 1 << 20,
					 .conn_timeout_s = 10,
					 .max_conns = 16,
					 .routes = routes,
					 .nroutes = (int)RV_ARRAY_SIZE(routes) };
	srv = rv_http_server_start(&o, err);
	ck_assert_ptr_nonnull(srv);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", rv_http_server_port(srv));
	struct sched_slurm_opts so = { .url = url,
				       .job = "t",
				       .workdir = "/tmp",
				       .log_dir = "/tmp",
				       .poll_ms = 100,
				       .timeout_ms = 2000,
				       .pend_max_ms = pend_max_ms };
	return sched_slurm_new(&so, err);
}

/* The next event within ms, else type 0. */
static struct sched_event next(struct sched *s, int ms)
{
	struct sched_event ev = { .type = 0 };
	struct pollfd p = { .fd = sched_fd(s), .events = POLLIN };
	if (poll(&p, 1, ms) > 0)
		ck_assert_int_ge(sched_next_event(s, &ev), 0);
	return ev;
}

static void launch_avoiding(struct sched *s, const char *name, const char *const *avoid)
{
	static const char *const argv[] = { "/bin/prog", "a b", "it's", NULL };
	static const char *const env[] = { "ROVER_NODE_RANK=3", NULL };
	char log[128];
	snprintf(log, sizeof(log), "/tmp/rover-check-slurm-%d.log", (int)getpid());
	struct sched_node_spec sp = { .name = name,
				      .role = "worker",
				      .rank = 3,
				      .res = { .cpu = 1.5, .memory_mb = 512, .gpu = 1 },
				      .argv = argv,
				      .env = env,
				      .log_path = log,
				      .avoid = avoid };
	struct rv_err err = { 0 };
	pthread_mutex_lock(&fk.mu);
	int64_t was = fk.job_id;
	pthread_mutex_unlock(&fk.mu);
	ck_assert_int_eq(sched_launch(s, &sp, &err), 0);
	/* submitted: the job's state is the stand-in's to change from here */
	bool in = false;
	for (int i = 0; i < 100 && !in; i++) {
		pthread_mutex_lock(&fk.mu);
		in = fk.job_id > was;
		pthread_mutex_unlock(&fk.mu);
		if (!in)
			usleep(20000);
	}
	ck_assert_msg(in, "%s was not submitted", name);
	unlink(log);
}

static void launch(struct sched *s, const char *name)
{
	launch_avoiding(s, name, NULL);
}

/* The submitted body, parsed (the caller frees it). */
static cJSON *submitted(void)
{
	for (int i = 0; i < 50; i++) {
		pthread_mutex_lock(&fk.mu);
		cJSON *doc = fk.submitted ? cJSON_Parse(fk.submitted) : NULL;
		free(fk.submitted);
		fk.submitted = NULL;
		pthread_mutex_unlock(&fk.mu);
		if (doc)
			return doc;
		usleep(20000);
	}
	ck_abort_msg("nothing was submitted");
	return NULL;
}

/* Stop; the backend asked for its own jobs only, never for the list of
 * every job on the cluster. */
static void stop(struct sched *s)
{
	sched_free(s);
	rv_http_server_stop(srv);
	ck_assert_int_eq(fk.lists, 0);
}

START_TEST(test_v42_shapes)
{
	struct rv_err err = { 0 };
	setenv("SLURM_JOB_ID", "99", 1); /* a master inside an allocation */
	struct sched *s = start("v0.0.42", 0, &err);
	ck_assert_msg(s, "%s", err.msg);
	ck_assert_str_eq(sched_slurm_version(s), "v0.0.42");
	launch(s, "worker-3");
	cJSON *doc = submitted();
	const cJSON *job = cJSON_GetObjectItem(doc, "job");
	const cJSON *script = cJSON_GetObjectItem(job, "script");
	ck_assert_msg(cJSON_IsString(script) &&
			      strstr(script->valuestring, "exec '/bin/prog' 'a b' 'it'\\''s'"),
		      "%s", cJSON_PrintUnformatted(doc));
	ck_assert_ptr_null(cJSON_GetObjectItem(doc, "script"));
	ck_assert_str_eq(cJSON_GetObjectItem(job, "name")->valuestring, "rover-t-worker-3");
	ck_assert_int_eq(cJSON_GetObjectItem(job, "cpus_per_task")->valueint, 2);
	const cJSON *mem = cJSON_GetObjectItem(job, "memory_per_node");
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(mem, "set")));
	ck_assert_int_eq(cJSON_GetObjectItem(mem, "number")->valueint, 512);
	ck_assert_str_eq(cJSON_GetObjectItem(job, "tres_per_node")->valuestring, "gres/gpu:1");
	const cJSON *env = cJSON_GetObjectItem(job, "environment"), *e;
	ck_assert(cJSON_IsArray(env));
	bool rank = false, slurm = false;
	cJSON_ArrayForEach(e, env)
	{
		rank |= !strcmp(e->valuestring, "ROVER_NODE_RANK=3");
		slurm |= !strncmp(e->valuestring, "SLURM_", 6);
	}
	ck_assert(rank && !slurm);
	cJSON_Delete(doc);

	fake_set("RUNNING", 0);
	struct sched_event ev = next(s, 3000);
	ck_assert_int_eq(ev.type, SCHED_EV_STARTED);
	ck_assert_int_eq(ev.pid, (int)sched_slurm_job_id(s, "worker-3"));
	ck_assert_str_eq(ev.host, "n7");
	ck_assert_int_eq(ev.rank, 3);
	fake_set("FAILED", 3);
	ev = next(s, 3000);
	ck_assert_int_eq(ev.type, SCHED_EV_EXITED);
	ck_assert_int_eq(ev.exit_code, 3);
	ck_assert_int_eq(ev.signal, 0);
	ck_assert(!ev.lost && !ev.removed);
	ck_assert_int_eq(sched_slurm_job_id(s, "worker-3"), -1);

	/* its Slurm node fails: the next job keeps off it */
	launch(s, "worker-3.1");
	doc = submitted();
	ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "job"), "excluded_nodes"));
	cJSON_Delete(doc);
	fake_set("RUNNING", 0);
	ck_assert_int_eq(next(s, 3000).type, SCHED_EV_STARTED);
	fake_set("NODE_FAIL", 0);
	ev = next(s, 3000);
	ck_assert(ev.lost);
	launch(s, "worker-3.2");
	doc = submitted();
	const cJSON *x = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "job"), "excluded_nodes");
	ck_assert_int_eq(cJSON_GetArraySize(x), 1);
	ck_assert_str_eq(cJSON_GetArrayItem(x, 0)->valuestring, "n7");
	cJSON_Delete(doc);
	stop(s);
	unsetenv("SLURM_JOB_ID");
}
END_TEST

START_TEST(test_v38_shapes_and_lost_nodes)
{
	struct rv_err err = { 0 };
	struct sched *s = start("v0.0.38", 0, &err);
	ck_assert_msg(s, "%s", err.msg);
	/* the largest node, as the node manager caps a plan's resources */
	struct sched_resources shape;
	ck_assert_int_eq(sched_shape(s, &shape), 0);
	ck_assert_int_eq(shape.memory_mb, 8000);
	ck_assert(shape.cpu == 8);
	launch(s, "w0");
	cJSON *doc = submitted();
	const cJSON *job = cJSON_GetObjectItem(doc, "job");
	ck_assert(cJSON_IsString(cJSON_GetObjectItem(doc, "script")));
	ck_assert_int_eq(cJSON_GetObjectItem(job, "memory_per_node")->valueint, 512);
	ck_assert_str_eq(cJSON_GetObjectItem(job, "gpus_per_node")->valuestring, "1");
	const cJSON *env = cJSON_GetObjectItem(job, "environment");
	ck_assert(cJSON_IsObject(env));
	ck_assert_str_eq(cJSON_GetObjectItem(env, "ROVER_NODE_RANK")->valuestring, "3");
	cJSON_Delete(doc);
	fake_set("RUNNING", 0);
	ck_assert_int_eq(next(s, 3000).type, SCHED_EV_STARTED);
	fake_set("FAILED", 3 << 8); /* a wait status */
	struct sched_event ev = next(s, 3000);
	ck_assert_int_eq(ev.type, SCHED_EV_EXITED);
	ck_assert_int_eq(ev.exit_code, 3);

	/* its machine failed */
	launch(s, "w0.1");
	fake_set("RUNNING", 0);
	ck_assert_int_eq(next(s, 3000).type, SCHED_EV_STARTED);
	fake_set("NODE_FAIL", 0);
	ev = next(s, 3000);
	ck_assert_int_eq(ev.type, SCHED_EV_EXITED);
	ck_assert_msg(ev.lost && strstr(ev.detail, "NODE_FAIL on n7"), "%s", ev.detail);
	/* v0.0.38 excludes too (exclude_nodes "a,b"): the lost Slurm node and
	 * the hosts the node manager names (a straggler's, a crash's) */
	const char *avoid[] = { "n2", "n7", NULL };
	launch_avoiding(s, "w0.x", avoid);
	doc = submitted();
	const cJSON *x = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "job"), "exclude_nodes");
	ck_assert_msg(cJSON_IsString(x) && !strcmp(x->valuestring, "n7,n2"), "%s",
		      cJSON_PrintUnformatted(doc));
	cJSON_Delete(doc);
	sched_remove(s, "w0.x", 0);
	ck_assert_int_eq(next(s, 3000).type, SCHED_EV_EXITED);
	/* never every node of the partition: then no exclusion at all */
	pthread_mutex_lock(&fk.mu);
	fk.nodes = 2;
	pthread_mutex_unlock(&fk.mu);
	const char *all[] = { "n1", "n2", NULL };
	launch_avoiding(s, "w0.y", all);
	doc = submitted();
	x = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "job"), "exclude_nodes");
	ck_assert_msg(!x, "%s", cJSON_PrintUnformatted(doc));
	cJSON_Delete(doc);
	sched_remove(s, "w0.y", 0);
	ck_assert_int_eq(next(s, 3000).type, SCHED_EV_EXITED);
	pthread_mutex_lock(&fk.mu);
	fk.signals[0] = 0;
	pthread_mutex_unlock(&fk.mu);

	/* requeued by Slurm (22.05 ignores requeue:false): lost, and killed */
	launch(s, "w0.2");
	fake_set("RUNNING", 0);
	ck_assert_int_eq(next(s, 3000).type, SCHED_EV_STARTED);
	pthread_mutex_lock(&fk.mu);
	fk.restarts = 1;
	pthread_mutex_unlock(&fk.mu);
	ev = next(s, 3000);
	ck_assert_int_eq(ev.type, SCHED_EV_EXITED);
	ck_assert_msg(ev.lost && strstr(ev.detail, "requeued"), "%s", ev.detail);
	for (int i = 0; i < 50 && !strstr(fk.signals, "SIGKILL"); i++)
		usleep(20000);
	ck_assert_str_eq(fk.signals, "SIGKILL ");
	ck_assert_int_eq(next(s, 500).type, 0); /* its end is not told again */

	/* killed for memory */
	fk.restarts = 0;
	launch(s, "w0.3");
	fake_set("OUT_OF_MEMORY", 0);
	ev = next(s, 3000);
	ck_assert_int_eq(ev.type, SCHED_EV_OOM);
	ck_assert_int_eq(ev.memory_limit_mb, 512);
	stop(s);
}
END_TEST

START_TEST(test_pending_past_wait_fails_with_reason)
{
	struct rv_err err = { 0 };
	struct sched *s = start("v0.0.42", 600, &err);
	ck_assert_msg(s, "%s", err.msg);
	snprintf(fk.reason, sizeof(fk.reason), "Resources");
	launch(s, "w0");
	struct sched_event ev = next(s, 3000);
	ck_assert_int_eq(ev.type, SCHED_EV_FAILED);
	ck_assert_int_eq(ev.err, -ETIMEDOUT);
	ck_assert_msg(strstr(ev.detail, "still pending after 0 s: reason Resources"), "%s",
		      ev.detail);
	for (int i = 0; i < 50 && !strstr(fk.signals, "SIGKILL"); i++)
		usleep(20000);
	ck_assert_str_eq(fk.signals, "SIGKILL ");
	ck_assert_int_eq(next(s, 500).type, 0);
	stop(s);
}
END_TEST

START_TEST(test_remove_term_then_kill)
{
	struct rv_err err = { 0 };
	struct sched *s = start("v0.0.42", 0, &err);
	ck_assert_msg(s, "%s", err.msg);
	launch(s, "w0");
	fake_set("RUNNING", 0);
	ck_assert_int_eq(next(s, 3000).type, SCHED_EV_STARTED);
	ck_assert_int_eq(sched_remove(s, "nope", 100), -ENOENT);
	ck_assert_int_eq(sched_remove(s, "w0", 400), 0);
	/* SIGTERM at once; the job goes on (the stand-in ignores it) until
	 * SIGKILL after the grace cancels it */
	struct sched_event ev = next(s, 3000);
	ck_assert_int_eq(ev.type, SCHED_EV_EXITED);
	ck_assert(ev.removed);
	ck_assert_str_eq(fk.signals, "SIGTERM SIGKILL ");
	struct sched_resources r = { 1, 64, 0 };
	ck_assert_int_eq(sched_resize(s, "w0", &r, &err), -ENOENT);
	stop(s);
}
END_TEST

START_TEST(test_unknown_version_refused)
{
	struct rv_err err = { 0 };
	struct sched *s = start("v0.0.39", 0, &err);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(err.code, -EPROTONOSUPPORT);
	ck_assert_msg(strstr(err.msg, "v0.0.38"), "%s", err.msg);
	rv_http_server_stop(srv);
	struct sched_slurm_opts so = { .url = "unix:/nonexistent/slurmrestd.socket",
				       .timeout_ms = 500 };
	ck_assert_ptr_null(sched_slurm_new(&so, &err));
	ck_assert_int_eq(err.code, -ECONNREFUSED);
	so.url = "ftp://x";
	ck_assert_ptr_null(sched_slurm_new(&so, &err));
	ck_assert_int_eq(err.code, -EINVAL);
}
END_TEST

RV_TEST_MAIN_TCASE("sched_slurm", "sched_slurm", 30, test_v42_shapes,
		   test_v38_shapes_and_lost_nodes, test_pending_past_wait_fails_with_reason,
		   test_remove_term_then_kill, test_unknown_version_refused)
