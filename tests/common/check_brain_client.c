/*
 * check_brain_client.c: common/brain_client against the real rover-brain
 * binary on a private PostgreSQL: every call, errors that name their cause,
 * resends stored once (same batch twice, same OOM event twice), an OOM event
 * and its plan committed together, a retry across a brain restart and a
 * timeout against a socket that never answers.
 */
#include <check.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brain_client.h"
#include "brainfix.h"
#include "json.h"
#include "parse.h"
#include "testutil.h"

static char conninfo[1024];
static struct rv_test_brain brain;
static struct rv_brain_client *bc;

static const char job_json[] =
	"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
	"\"metadata\":{\"name\":\"bc-job\",\"namespace\":\"team-a\",\"labels\":{\"user\":\"bo\"}},"
	"\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
	"\"replicaSpecs\":{\"worker\":{\"replicas\":2,\"minReplicas\":1,\"maxReplicas\":8,"
	"\"resources\":{\"cpu\":4,\"memory\":\"8Gi\"}}},"
	"\"model\":{\"parameters\":50000000,\"batchSize\":32}}}";

static void start_brain(const char *const *extra)
{
	const char *const args[] = { "--plan-debounce-ms", "100", NULL };
	ck_assert_int_eq(rv_test_brain_start_fresh(&brain, 0, conninfo, sizeof(conninfo), args,
						   extra),
			 0);
}

static struct rv_brain_client *client(const char *url, const char *token)
{
	struct rv_brain_opts o = { .url = url,
				   .token = token,
				   .timeout_ms = 5000,
				   .backoff_ms = 20,
				   .backoff_max_ms = 200 };
	struct rv_err err = { 0 };
	struct rv_brain_client *c = rv_brain_client_new(&o, &err);
	ck_assert_msg(c != NULL, "%s", err.msg);
	return c;
}

static void setup(void)
{
	start_brain(NULL);
	bc = client(brain.url, NULL);
}

static void teardown(void)
{
	bc = rv_brain_client_free(bc);
	rv_test_brain_stop(&brain, SIGTERM, 10);
}

static long sql_count(const char *sql)
{
	char v[64];
	return atol(rv_test_sql_value(conninfo, sql, v, sizeof(v)));
}

static void spec_of(struct rv_job_spec *spec)
{
	struct rv_err err = { 0 };
	cJSON *doc = cJSON_Parse(job_json);
	ck_assert_int_eq(rv_job_spec_from_json(doc, spec, &err), 0);
	cJSON_Delete(doc);
}

static void register_job(char uid[RV_BRAIN_UID_MAX], struct rv_scale_plan *plan)
{
	struct rv_job_spec spec;
	spec_of(&spec);
	struct rv_err err = { 0 };
	int rc = rv_brain_register(bc, &spec, uid, plan, &err);
	rv_job_spec_release(&spec);
	ck_assert_msg(rc == 0, "register: %d %s", rc, err.msg);
}

/* n speed samples from ts0 on (the batch owns its array). */
static void speed_batch(struct rv_metrics_batch *b, int n, int64_t ts0)
{
	memset(b, 0, sizeof(*b));
	b->samples = calloc((size_t)n, sizeof(*b->samples));
	ck_assert_ptr_nonnull(b->samples);
	b->n = n;
	for (int i = 0; i < n; i++) {
		struct rv_sample *s = &b->samples[i];
		s->kind = RV_SAMPLE_SPEED;
		s->ts_ms = ts0 + i * 1000;
		s->speed = 100 + i;
		s->step = i;
		s->workers = 2;
	}
}

static void oom_event(struct rv_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->type = RV_EVENT_NODE_OOM;
	ev->ts_ms = 1700000100000;
	snprintf(ev->node, sizeof(ev->node), "worker-0");
	ev->role = RV_ROLE_WORKER;
	ev->rank = 0;
	ev->exit_code = 137;
	ev->memory_mb = 8192;
	ev->peak_memory_mb = 8100;
}

START_TEST(every_call_round_trips)
{
	char uid[RV_BRAIN_UID_MAX];
	struct rv_scale_plan create;
	register_job(uid, &create);
	ck_assert_str_eq(create.stage, "create");
	ck_assert_str_eq(create.job, uid);
	ck_assert_int_gt(create.id, 0);
	ck_assert_int_eq(create.groups[RV_ROLE_WORKER].count, 2);

	struct rv_err err = { 0 };
	struct rv_metrics_batch b;
	speed_batch(&b, 5, 1700000000000);
	int accepted = 0;
	ck_assert_int_eq(rv_brain_post_metrics(bc, uid, &b, &accepted, &err), 0);
	ck_assert_int_eq(accepted, 5);
	ck_assert_int_eq(rv_brain_last_status(bc), 200);
	ck_assert_int_eq(rv_brain_last_attempts(bc), 1);
	rv_metrics_batch_release(&b);

	struct rv_brain_job job;
	ck_assert_int_eq(rv_brain_job_get(bc, uid, &job, &err), 0);
	ck_assert_str_eq(job.uid, uid);
	ck_assert_str_eq(job.status, "running");
	ck_assert_int_eq(job.speed_samples, 5);
	ck_assert_int_eq(job.last_sample_ts_ms, 1700000004000);

	struct rv_scale_plan p;
	ck_assert_int_eq(rv_brain_plan_get(bc, uid, "create", 0, 0, &p, &err), 1);
	ck_assert_int_eq(p.id, create.id);
	ck_assert_int_eq(rv_brain_plan_get(bc, uid, "oom", 0, 0, &p, &err), 0);
	/* a long-poll with nothing newer comes back empty after its wait */
	int64_t t0 = rv_mono_ms();
	ck_assert_int_eq(rv_brain_plan_get(bc, uid, "oom", create.id, 1, &p, &err), 0);
	int64_t waited = rv_mono_ms() - t0;
	ck_assert_msg(waited >= 900 && waited < 4000, "long-poll took %lld ms", (long long)waited);

	struct rv_brain_plan_record *recs = NULL;
	int n = 0;
	ck_assert_int_eq(rv_brain_plan_history(bc, uid, 10, &recs, &n, &err), 0);
	ck_assert_int_ge(n, 1); /* the planner may have made a running plan since */
	ck_assert_int_eq(recs[0].plan.id, create.id);
	ck_assert_str_eq(recs[0].plan.stage, "create");
	ck_assert_str_eq(recs[0].outcome, "pending");
	free(recs);

	struct rv_cluster_node nodes[2] = {
		{ .name = "host-a",
		  .ts_ms = 1,
		  .cpu = 32,
		  .memory_mb = 65536,
		  .cpu_used = 8,
		  .memory_used_mb = 1024,
		  .ready = true },
		{ .name = "host-b", .ts_ms = 1, .cpu = 16, .memory_mb = 32768, .ready = true },
	};
	struct rv_cluster_report rep = { .nodes = nodes, .n = 2 };
	ck_assert_int_eq(rv_brain_cluster_report(bc, &rep, &err), 0);
	struct rv_brain_cluster cl;
	ck_assert_int_eq(rv_brain_cluster_get(bc, &cl, &err), 0);
	ck_assert_int_eq(cl.nodes.n, 2);
	ck_assert_str_eq(cl.nodes.nodes[1].name, "host-b");
	ck_assert_int_eq(cl.ready_nodes, 2);
	ck_assert_double_eq_tol(cl.cpu, 48, 1e-9);
	ck_assert_double_eq_tol(cl.cpu_free, 40, 1e-9);
	ck_assert_int_eq(cl.memory_free_mb, 65536 + 32768 - 1024);
	rv_cluster_report_release(&cl.nodes);

	/* the job finishes: the client's job_finished event lands */
	struct rv_event fin = {
		.type = RV_EVENT_JOB_FINISHED, .ts_ms = 1700000200000, .rank = -1, .exit_code = -1
	};
	ck_assert_int_eq(rv_brain_post_event(bc, uid, &fin, NULL, &err), 0);
	ck_assert_int_eq(rv_brain_job_get(bc, uid, &job, &err), 0);
	ck_assert_str_eq(job.status, "finished");
}
END_TEST

START_TEST(errors_name_status_and_brain_text)
{
	char uid[RV_BRAIN_UID_MAX];
	register_job(uid, NULL);
	struct rv_err err = { 0 };
	/* a second running job of that name */
	struct rv_job_spec spec;
	spec_of(&spec);
	char uid2[RV_BRAIN_UID_MAX];
	ck_assert_int_eq(rv_brain_register(bc, &spec, uid2, NULL, &err), -EEXIST);
	ck_assert_int_eq(rv_brain_last_status(bc), 409);
	ck_assert_int_eq(rv_brain_last_attempts(bc), 1);
	ck_assert_msg(strstr(err.msg, "409") && strstr(err.msg, "conflict"), "%s", err.msg);
	rv_job_spec_release(&spec);

	/* unknown job */
	struct rv_metrics_batch b;
	speed_batch(&b, 1, 1700000000000);
	ck_assert_int_eq(rv_brain_post_metrics(bc, "j-0000000000000000", &b, NULL, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "404") && strstr(err.msg, "j-0000000000000000"), "%s",
		      err.msg);
	ck_assert_str_eq(err.field, "uid");
	/* a sample the brain rejects: the field comes back */
	b.samples[0].speed = -1;
	b.batch_id[0] = '\0';
	ck_assert_int_eq(rv_brain_post_metrics(bc, uid, &b, NULL, &err), -EINVAL);
	ck_assert_str_eq(err.field, "samples[0].speed");
	ck_assert_msg(strstr(err.msg, "400"), "%s", err.msg);
	/* a uid that is not one never reaches the wire */
	ck_assert_int_eq(rv_brain_post_metrics(bc, "../jobs", &b, NULL, &err), -EINVAL);
	ck_assert_str_eq(err.field, "uid");
	rv_metrics_batch_release(&b);
}
END_TEST

START_TEST(token_sent_and_refusal_named)
{
	rv_test_brain_stop(&brain, SIGTERM, 10);
	const char *extra[] = { "--token", "s3cret", NULL };
	start_brain(extra);
	struct rv_job_spec spec;
	spec_of(&spec);
	struct rv_err err = { 0 };
	char uid[RV_BRAIN_UID_MAX];
	bc = rv_brain_client_free(bc);
	bc = client(brain.url, "wrong");
	ck_assert_int_eq(rv_brain_register(bc, &spec, uid, NULL, &err), -EACCES);
	ck_assert_msg(strstr(err.msg, "401"), "%s", err.msg);
	bc = rv_brain_client_free(bc);
	bc = client(brain.url, "s3cret");
	ck_assert_int_eq(rv_brain_register(bc, &spec, uid, NULL, &err), 0);
	rv_job_spec_release(&spec);
}
END_TEST

START_TEST(same_batch_twice_is_stored_once)
{
	char uid[RV_BRAIN_UID_MAX];
	register_job(uid, NULL);
	struct rv_err err = { 0 };
	struct rv_metrics_batch b;
	speed_batch(&b, 7, 1700000000000);
	int acc1 = 0, acc2 = 0;
	ck_assert_int_eq(rv_brain_post_metrics(bc, uid, &b, &acc1, &err), 0);
	/* the client chose an id and kept it in the batch for a resend */
	ck_assert_int_eq((int)strlen(b.batch_id), 32);
	ck_assert_int_eq(rv_brain_post_metrics(bc, uid, &b, &acc2, &err), 0);
	ck_assert_int_eq(acc1, 7);
	ck_assert_int_eq(acc2, 7);
	struct rv_brain_job job;
	ck_assert_int_eq(rv_brain_job_get(bc, uid, &job, &err), 0);
	ck_assert_int_eq(job.speed_samples, 7);
	ck_assert_int_eq(sql_count("SELECT count(*) FROM job_speed"), 7);
	/* a new id is a new batch */
	b.batch_id[0] = '\0';
	ck_assert_int_eq(rv_brain_post_metrics(bc, uid, &b, &acc2, &err), 0);
	ck_assert_int_eq(sql_count("SELECT count(*) FROM job_speed"), 14);
	/* senders that give no id are stored every time, as before */
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	const char *body = "{\"samples\":[{\"kind\":\"speed\",\"ts\":1700000050000,\"speed\":1}]}";
	for (int i = 0; i < 2; i++) {
		struct rv_test_reply r;
		ck_assert_int_eq(rv_test_http(&brain, "POST", path, body, NULL, &r), 0);
		ck_assert_int_eq(r.status, 200);
		rv_test_reply_release(&r);
	}
	ck_assert_int_eq(sql_count("SELECT count(*) FROM job_speed"), 16);
	rv_metrics_batch_release(&b);
}
END_TEST

START_TEST(same_oom_event_twice_counts_one_oom_and_one_plan)
{
	char uid[RV_BRAIN_UID_MAX];
	register_job(uid, NULL);
	struct rv_err err = { 0 };
	struct rv_event ev;
	oom_event(&ev);
	int64_t plan1 = 0, plan2 = 0;
	ck_assert_msg(rv_brain_post_event(bc, uid, &ev, &plan1, &err) == 0, "%s", err.msg);
	ck_assert_int_gt(plan1, 0);
	ck_assert_int_eq((int)strlen(ev.event_id), 32);
	ck_assert_msg(rv_brain_post_event(bc, uid, &ev, &plan2, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(plan2, plan1);

	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s", uid);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	ck_assert_str_eq(rv_test_json_str(r.json, "nodes.0.name"), "worker-0");
	ck_assert_int_eq((int)rv_test_json_num(r.json, "nodes.0.oom_count", -1), 1);
	rv_test_reply_release(&r);
	struct rv_brain_plan_record *recs = NULL;
	int n = 0;
	ck_assert_int_eq(rv_brain_plan_history(bc, uid, 10, &recs, &n, &err), 0);
	int ooms = 0;
	for (int i = 0; i < n; i++)
		ooms += !strcmp(recs[i].plan.stage, "oom");
	free(recs);
	ck_assert_int_eq(ooms, 1);
	ck_assert_int_eq(sql_count("SELECT count(*) FROM events WHERE type = 'node_oom'"), 1);
	/* a second OOM (a new event) is a second OOM */
	ev.event_id[0] = '\0';
	ck_assert_int_eq(rv_brain_post_event(bc, uid, &ev, &plan2, &err), 0);
	ck_assert_int_gt(plan2, plan1);
	ck_assert_int_eq(sql_count("SELECT max(oom_count) FROM job_nodes"), 2);
}
END_TEST

START_TEST(oom_event_and_its_plan_commit_together)
{
	char uid[RV_BRAIN_UID_MAX];
	register_job(uid, NULL);
	/* Make storing an oom plan fail: the event must not stay behind. */
	sql_count("CREATE FUNCTION no_oom_plans() RETURNS trigger LANGUAGE plpgsql AS"
		  " $$BEGIN IF NEW.stage = 'oom' THEN RAISE EXCEPTION 'oom plans refused'; END IF;"
		  " RETURN NEW; END$$");
	sql_count("CREATE TRIGGER no_oom_plans BEFORE INSERT ON scale_plans FOR EACH ROW"
		  " EXECUTE FUNCTION no_oom_plans()");
	struct rv_err err = { 0 };
	struct rv_event ev;
	oom_event(&ev);
	int rc = rv_brain_post_event(bc, uid, &ev, NULL, &err);
	ck_assert_msg(rc < 0 && rv_brain_last_status(bc) == 500, "rc %d status %ld: %s", rc,
		      rv_brain_last_status(bc), err.msg);
	ck_assert_msg(strstr(err.msg, "oom plans refused"), "cause not named: %s", err.msg);
	ck_assert_int_eq(sql_count("SELECT count(*) FROM events WHERE type = 'node_oom'"), 0);
	ck_assert_int_eq(sql_count("SELECT coalesce(max(oom_count), 0) FROM job_nodes"), 0);
	/* once plans can be stored again the resend goes through whole */
	sql_count("DROP TRIGGER no_oom_plans ON scale_plans");
	int64_t plan = 0;
	ck_assert_int_eq(rv_brain_post_event(bc, uid, &ev, &plan, &err), 0);
	ck_assert_int_gt(plan, 0);
	ck_assert_int_eq(sql_count("SELECT count(*) FROM events WHERE type = 'node_oom'"), 1);
	ck_assert_int_eq(sql_count("SELECT max(oom_count) FROM job_nodes"), 1);
}
END_TEST

/* A post that runs while the brain is down and comes back (a thread: the
 * brain is restarted by the test's own thread, as PR_SET_PDEATHSIG ties the
 * brain's life to the thread that started it). */
struct post_call {
	struct rv_brain_client *c;
	const char *uid;
	struct rv_metrics_batch *b;
	int accepted;
	int rc;
	struct rv_err err;
};

static void *post_in_thread(void *arg)
{
	struct post_call *p = arg;
	p->rc = rv_brain_post_metrics(p->c, p->uid, p->b, &p->accepted, &p->err);
	return NULL;
}

START_TEST(retry_across_a_brain_restart)
{
	char uid[RV_BRAIN_UID_MAX];
	register_job(uid, NULL);
	struct rv_err err = { 0 };
	char url[64];
	snprintf(url, sizeof(url), "%s", brain.url);
	int port = brain.port;
	struct rv_brain_opts o = { .url = url,
				   .timeout_ms = 3000,
				   .max_attempts = 50,
				   .backoff_ms = 50,
				   .backoff_max_ms = 300,
				   .retry_budget_ms = 20000 };
	struct rv_brain_client *c = rv_brain_client_new(&o, &err);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_ge(rv_test_brain_stop(&brain, SIGTERM, 10), 0);
	struct rv_metrics_batch b;
	speed_batch(&b, 3, 1700000000000);
	struct post_call p = { .c = c, .uid = uid, .b = &b };
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, post_in_thread, &p), 0);
	usleep(700000);
	char listen[64];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	const char *args[] = { "--db", conninfo, "--listen", listen, NULL };
	int started = rv_test_brain_start(&brain, args);
	pthread_join(t, NULL);
	ck_assert_int_eq(started, 0);
	ck_assert_msg(p.rc == 0, "post across restart: %d %s", p.rc, p.err.msg);
	ck_assert_int_eq(p.accepted, 3);
	ck_assert_msg(rv_brain_last_attempts(c) > 1, "the brain was down: attempts %d",
		      rv_brain_last_attempts(c));
	/* a resend of the acknowledged batch is not stored again */
	int accepted = 0;
	ck_assert_int_eq(rv_brain_post_metrics(c, uid, &b, &accepted, &err), 0);
	ck_assert_int_eq(accepted, 3);
	ck_assert_int_eq(sql_count("SELECT count(*) FROM job_speed"), 3);
	rv_metrics_batch_release(&b);
	rv_brain_client_free(c);
}
END_TEST

START_TEST(timeout_against_a_socket_that_never_answers)
{
	/* listens (so connects complete in the kernel) but never accepts */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 16), 0);
	socklen_t len = sizeof(a);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
	struct rv_brain_opts o = { .url = url,
				   .timeout_ms = 300,
				   .max_attempts = 3,
				   .backoff_ms = 50,
				   .backoff_max_ms = 100,
				   .retry_budget_ms = 5000 };
	struct rv_err err = { 0 };
	struct rv_brain_client *c = rv_brain_client_new(&o, &err);
	ck_assert_ptr_nonnull(c);
	struct rv_metrics_batch b;
	speed_batch(&b, 1, 1700000000000);
	int64_t t0 = rv_mono_ms();
	ck_assert_int_eq(rv_brain_post_metrics(c, "j-1", &b, NULL, &err), -ETIMEDOUT);
	int64_t took = rv_mono_ms() - t0;
	ck_assert_int_eq(rv_brain_last_attempts(c), 3);
	ck_assert_int_eq(rv_brain_last_status(c), 0);
	ck_assert_msg(took >= 900 && took < 3000, "3 attempts of 300 ms took %lld ms",
		      (long long)took);
	ck_assert_msg(strstr(err.msg, "post metrics") && strstr(err.msg, "3 attempts"), "%s",
		      err.msg);
	/* registering is not repeated after a timeout: it may have been stored */
	struct rv_job_spec spec;
	spec_of(&spec);
	char uid[RV_BRAIN_UID_MAX];
	ck_assert_int_eq(rv_brain_register(c, &spec, uid, NULL, &err), -ETIMEDOUT);
	ck_assert_int_eq(rv_brain_last_attempts(c), 1);
	rv_job_spec_release(&spec);
	/* the budget bounds the whole call whatever the attempt count */
	rv_brain_client_free(c);
	o.max_attempts = 100;
	o.retry_budget_ms = 800;
	c = rv_brain_client_new(&o, &err);
	t0 = rv_mono_ms();
	ck_assert_int_eq(rv_brain_post_metrics(c, "j-1", &b, NULL, &err), -ETIMEDOUT);
	took = rv_mono_ms() - t0;
	ck_assert_msg(took < 1500, "budget 800 ms, took %lld ms", (long long)took);
	rv_metrics_batch_release(&b);
	rv_brain_client_free(c);
	close(fd);
}
END_TEST

static Suite *brain_client_suite(void)
{
	TCase *tc = RV_TEST_TCASE("brain", 60, every_call_round_trips,
				  errors_name_status_and_brain_text, token_sent_and_refusal_named,
				  same_batch_twice_is_stored_once,
				  same_oom_event_twice_counts_one_oom_and_one_plan,
				  oom_event_and_its_plan_commit_together,
				  retry_across_a_brain_restart);
	tcase_add_checked_fixture(tc, setup, teardown);
	TCase *tn = RV_TEST_TCASE("silent", 30, timeout_against_a_socket_that_never_answers);
	return RV_TEST_SUITE("brain_client", tc, tn);
}

RV_TEST_MAIN_PG(brain_client_suite)
