/*
 * check_brain_limits.c: the real rover-brain binary holding up under
 * abusive clients.  Another client address (127.0.0.2 as the source)
 * holds idle, slowloris and long-poll connections beyond the limits the
 * test sets low, while a well-behaved client on 127.0.0.1 must still be
 * served within a second; long-polls beyond their caps get 429 with
 * Retry-After in JSON; a request head trickled byte by byte is cut at the
 * request deadline; bodies over the memory budget get 503; an over-size
 * chunked body gets 413; a body framed two ways gets 400.  Raw sockets,
 * so what goes on the wire is exactly what the test says.  And concurrent
 * small metrics batches share commits, each stored exactly once.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brainfix.h"
#include "cleanup.h"
#include "parse.h"
#include "testutil.h"

static char conninfo[1024];
static struct rv_test_brain brain;

/* Limits set low so the test can exceed them with few sockets. */
#define PER_IP_CONNS      24
#define MAX_WAITS         40
#define MAX_WAITS_PER_IP  8
#define REQUEST_TIMEOUT_S 2
#define STR_(x)           #x
#define STR(x)            STR_(x)

static void start_brain(const char *const *extra)
{
	const char *const args[] = { "--server-per-ip-conns",
				     STR(PER_IP_CONNS),
				     "--server-max-waits",
				     STR(MAX_WAITS),
				     "--server-max-waits-per-ip",
				     STR(MAX_WAITS_PER_IP),
				     "--server-request-timeout-s",
				     STR(REQUEST_TIMEOUT_S),
				     "--server-max-conns",
				     "64",
				     NULL };
	ck_assert_int_eq(rv_test_brain_start_fresh(&brain, 0, conninfo, sizeof(conninfo), args,
						   extra),
			 0);
}

static void teardown(void)
{
	rv_test_brain_stop(&brain, SIGTERM, 10);
}

/* A job to post to and long-poll on; its uid in a static buffer. */
static const char *register_job(const char *name)
{
	static char uid[64];
	char doc[1024];
	snprintf(doc, sizeof(doc),
		 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		 "\"metadata\":{\"name\":\"%s\",\"namespace\":\"t\",\"labels\":{\"user\":\"u\"}},"
		 "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
		 "\"replicaSpecs\":{\"worker\":{\"replicas\":2,\"minReplicas\":1,\"maxReplicas\":4}"
		 "},"
		 "\"model\":{\"parameters\":1000000,\"batchSize\":32}}}",
		 name);
	rv_test_brain_register(&brain, doc, uid, sizeof(uid));
	return uid;
}

/* A TCP connection to the brain from source address src; -1 when refused. */
static int dial(const char *src)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	inet_pton(AF_INET, src, &a.sin_addr);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)brain.port) };
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	if (connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void send_str(int fd, const char *s)
{
	size_t n = strlen(s);
	ck_assert_int_eq(send(fd, s, n, MSG_NOSIGNAL), (ssize_t)n);
}

/*
 * Read what the brain sends until it closes, a whole reply arrived (headers
 * plus Content-Length bytes), or timeout_ms passed.  Returns the bytes read
 * (into buf, NUL-terminated), 0 when the peer closed without a byte, -1 on a
 * reset, -ETIMEDOUT when nothing came in time.
 */
static int read_reply(int fd, char *buf, size_t size, int timeout_ms)
{
	size_t len = 0;
	int64_t until = rv_mono_ms() + timeout_ms;
	buf[0] = '\0';
	for (;;) {
		const char *eoh = strstr(buf, "\r\n\r\n");
		if (eoh) {
			const char *cl = strcasestr(buf, "\r\nContent-Length:");
			size_t want = cl ? (size_t)atol(cl + 17) : 0;
			if (len >= (size_t)(eoh + 4 - buf) + want)
				return (int)len;
		}
		int64_t left = until - rv_mono_ms();
		if (left <= 0)
			return len ? (int)len : -ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		ssize_t n = recv(fd, buf + len, size - 1 - len, 0);
		if (n < 0)
			return len ? (int)len : -1;
		if (n == 0)
			return (int)len;
		len += (size_t)n;
		buf[len] = '\0';
	}
}

static int status_of(const char *reply)
{
	int st = 0;
	return sscanf(reply, "HTTP/1.%*d %d", &st) == 1 ? st : 0;
}

/* The JSON body of a reply, parsed (caller deletes) or NULL. */
static cJSON *body_of(const char *reply)
{
	const char *b = strstr(reply, "\r\n\r\n");
	return b ? cJSON_Parse(b + 4) : NULL;
}

/* reply's body is JSON whose "error" is error. */
static void assert_error(const char *reply, const char *error)
{
	cJSON *doc = body_of(reply);
	ck_assert_msg(doc != NULL, "not JSON: %s", reply);
	const char *got = cJSON_GetStringValue(cJSON_GetObjectItem(doc, "error"));
	ck_assert_msg(got && !strcmp(got, error), "want error %s: %s", error, reply);
	cJSON_Delete(doc);
}

/* The head of a metrics POST for job uid (its framing, a Content-Length or
 * Transfer-Encoding line, with the blank line and what the body begins
 * with) into head. */
static void metrics_head(char *head, size_t size, const char *uid, const char *framing)
{
	snprintf(head, size,
		 "POST /v1/jobs/%s/metrics HTTP/1.1\r\nHost: x\r\nContent-Type: "
		 "application/json\r\n%s",
		 uid, framing);
}

/* A well-behaved client: a metrics batch and a plan read, each answered
 * correctly within a second. */
static void served_quickly(const char *uid, int k)
{
	char path[160], batch[256];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	snprintf(batch, sizeof(batch),
		 "{\"samples\":[{\"kind\":\"speed\",\"ts\":%d,\"step\":%d,\"speed\":10,"
		 "\"workers\":2}]}",
		 1000000 + k, k);
	int64_t t0 = rv_mono_ms();
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", path, batch, NULL, &r), 0);
	int64_t dt = rv_mono_ms() - t0;
	ck_assert_msg(r.status == 200, "metrics status %ld body %s", r.status, r.body);
	rv_test_reply_release(&r);
	ck_assert_msg(dt < 1000, "metrics answered after %lld ms", (long long)dt);

	snprintf(path, sizeof(path), "/v1/jobs/%s/plan?stage=create", uid);
	t0 = rv_mono_ms();
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	dt = rv_mono_ms() - t0;
	ck_assert_msg(r.status == 200, "plan status %ld body %s", r.status, r.body);
	rv_test_reply_release(&r);
	ck_assert_msg(dt < 1000, "plan answered after %lld ms", (long long)dt);
}

/* Another address holds idle, slowloris and long-poll connections, more
 * than every limit; the well-behaved client is served within a second the
 * whole time, and the slowloris ones are cut at the request deadline. */
START_TEST(test_good_client_served_under_abuse)
{
	start_brain(NULL);
	const char *uid = register_job("victim");
	enum { IDLE = 40, SLOW = 40, POLLS = 40, N = IDLE + SLOW + POLLS };
	int fds[N];
	int open = 0;
	char req[256];
	snprintf(req, sizeof(req),
		 "GET /v1/jobs/%s/plan?stage=running&after=0&wait=30 HTTP/1.1\r\n"
		 "Host: x\r\n\r\n",
		 uid);
	for (int i = 0; i < N; i++) {
		fds[i] = dial("127.0.0.2");
		if (fds[i] < 0)
			continue;
		open++;
		if (i >= IDLE && i < IDLE + SLOW)
			send(fds[i], "GET /healthz HTTP/1.1\r\n", 23, MSG_NOSIGNAL);
		else if (i >= IDLE + SLOW)
			send(fds[i], req, strlen(req), MSG_NOSIGNAL);
	}
	ck_assert_int_gt(open, PER_IP_CONNS);

	/* Over REQUEST_TIMEOUT_S plus a bit, with the slowloris ones sending a
	 * header line every 300 ms. */
	int64_t until = rv_mono_ms() + (REQUEST_TIMEOUT_S + 2) * 1000;
	for (int k = 0; rv_mono_ms() < until; k++) {
		for (int i = IDLE; i < IDLE + SLOW; i++)
			if (fds[i] >= 0)
				send(fds[i], "X-a: b\r\n", 8, MSG_NOSIGNAL);
		served_quickly(uid, k);
		usleep(300 * 1000);
	}

	/* What the brain kept of the other address: at most PER_IP_CONNS, and
	 * every trickling or idle one closed by now (the deadline). */
	int alive = 0;
	for (int i = 0; i < N; i++) {
		if (fds[i] < 0)
			continue;
		char buf[4096];
		int n = read_reply(fds[i], buf, sizeof(buf), 50);
		if (n == -ETIMEDOUT)
			alive++;
		if (i < IDLE + SLOW)
			ck_assert_msg(n != -ETIMEDOUT, "connection %d still open past the deadline",
				      i);
		close(fds[i]);
	}
	ck_assert_int_le(alive, PER_IP_CONNS);
	served_quickly(uid, 999);
}
END_TEST

/* Long-polls beyond the per-address cap and beyond the total cap get 429
 * with Retry-After and a JSON body; the ones inside are answered normally
 * when their wait ends. */
START_TEST(test_too_many_long_polls)
{
	start_brain((const char *const[]){ "--server-per-ip-conns", "0", NULL });
	const char *uid = register_job("polled");
	char req[256];
	snprintf(req, sizeof(req),
		 "GET /v1/jobs/%s/plan?stage=running&after=0&wait=8 HTTP/1.1\r\nHost: x\r\n\r\n",
		 uid);
	int fds[MAX_WAITS + 1];
	char buf[4096];
	/* From 127.0.0.2: MAX_WAITS_PER_IP wait, one more is refused (which
	 * one depends on the order the server's threads take them). */
	for (int i = 0; i <= MAX_WAITS_PER_IP; i++) {
		fds[i] = dial("127.0.0.2");
		ck_assert_int_ge(fds[i], 0);
		send_str(fds[i], req);
	}
	/* The refusal is the first answer (the others wait 8 s): however slow
	 * the machine, it comes within seconds. */
	struct pollfd pf[MAX_WAITS_PER_IP + 1];
	for (int i = 0; i <= MAX_WAITS_PER_IP; i++)
		pf[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	ck_assert_int_ge(poll(pf, MAX_WAITS_PER_IP + 1, 4000), 1);
	usleep(50 * 1000);
	int refused = -1, waiting = 0;
	for (int i = 0; i <= MAX_WAITS_PER_IP; i++) {
		int n = read_reply(fds[i], buf, sizeof(buf), 50);
		if (n == -ETIMEDOUT) {
			waiting++;
			continue;
		}
		ck_assert_msg(n > 0 && status_of(buf) == 429, "want 429, got: %s",
			      n > 0 ? buf : "");
		ck_assert_ptr_nonnull(strcasestr(buf, "\r\nRetry-After: "));
		ck_assert_ptr_nonnull(strcasestr(buf, "\r\nContent-Type: application/json"));
		assert_error(buf, "too_many_requests");
		refused = i;
	}
	ck_assert_int_eq(waiting, MAX_WAITS_PER_IP);
	ck_assert_int_ge(refused, 0);
	close(fds[refused]);
	fds[refused] = fds[MAX_WAITS_PER_IP];

	/* The total: many addresses (127.0.0.3..) each under their own cap. */
	int total = MAX_WAITS_PER_IP, extra = 0;
	int more[MAX_WAITS];
	for (int i = 0; total < MAX_WAITS; i++) {
		char src[32];
		snprintf(src, sizeof(src), "127.0.0.%d", 3 + i / MAX_WAITS_PER_IP);
		more[extra] = dial(src);
		ck_assert_int_ge(more[extra], 0);
		send_str(more[extra++], req);
		total++;
	}
	/* One more is refused once the server holds them all: asked again
	 * (a fresh connection) while it may still be taking them in. */
	int n = -ETIMEDOUT;
	for (int tries = 0; tries < 10 && n == -ETIMEDOUT; tries++) {
		int over = dial("127.0.0.200");
		send_str(over, req);
		n = read_reply(over, buf, sizeof(buf), 500);
		close(over);
	}
	ck_assert_msg(n > 0 && status_of(buf) == 429, "want 429 over the total, got: %s",
		      n > 0 ? buf : "");

	/* The waiting ones end with 204 when their wait is over. */
	n = read_reply(fds[0], buf, sizeof(buf), 10000);
	ck_assert_msg(n > 0 && status_of(buf) == 204, "want 204 at the end of the wait: %s",
		      n > 0 ? buf : "");
	for (int i = 0; i < MAX_WAITS_PER_IP; i++)
		close(fds[i]);
	for (int i = 0; i < extra; i++)
		close(more[i]);

	/* And once they are gone a new long-poll is accepted again. */
	usleep(200 * 1000);
	int again = dial("127.0.0.2");
	send_str(again, req);
	ck_assert_int_eq(read_reply(again, buf, sizeof(buf), 500), -ETIMEDOUT);
	close(again);
}
END_TEST

/* Bodies being received hold at most the budget: past it a request is
 * refused with 503 (JSON, Retry-After) before its body is read, and the
 * memory comes back when those bodies end. */
START_TEST(test_body_memory_budget)
{
	start_brain((const char *const[]){ "--server-body-budget-mb", "1", "--server-max-body-kb",
					   "512", NULL });
	const char *uid = register_job("bodies");
	char head[256], buf[4096];
	metrics_head(head, sizeof(head), uid, "Content-Length: 400000\r\n\r\n{\"samples\":[");
	int fds[3];
	for (int i = 0; i < 2; i++) {
		fds[i] = dial("127.0.0.1");
		send_str(fds[i], head);
		ck_assert_int_eq(read_reply(fds[i], buf, sizeof(buf), 300), -ETIMEDOUT);
	}
	fds[2] = dial("127.0.0.1");
	send_str(fds[2], head);
	int n = read_reply(fds[2], buf, sizeof(buf), 2000);
	ck_assert_msg(n > 0 && status_of(buf) == 503, "want 503 over the budget, got: %s",
		      n > 0 ? buf : "");
	ck_assert_ptr_nonnull(strcasestr(buf, "\r\nRetry-After: "));
	assert_error(buf, "unavailable");
	for (int i = 0; i < 3; i++)
		close(fds[i]);

	/* Those bodies gone, a small batch goes through. */
	usleep(300 * 1000);
	served_quickly(uid, 1);
}
END_TEST

/* A chunked body over max_body_kb gets a JSON 413, however much more of
 * it the client sends. */
START_TEST(test_chunked_too_large)
{
	start_brain((const char *const[]){ "--server-max-body-kb", "64", NULL });
	const char *uid = register_job("chunky");
	char head[256], buf[4096];
	metrics_head(head, sizeof(head), uid, "Transfer-Encoding: chunked\r\n\r\n");
	int fd = dial("127.0.0.1");
	send_str(fd, head);
	static char chunk[16384 + 16];
	int hl = snprintf(chunk, sizeof(chunk), "4000\r\n");
	memset(chunk + hl, ' ', 16384);
	memcpy(chunk + hl + 16384, "\r\n", 2);
	/* 4 MiB: sixty-four times the limit, and over the 1 MiB that used to be
	 * read and dropped before the connection was cut without an answer. */
	for (int i = 0; i < 256; i++)
		ck_assert_int_eq(send(fd, chunk, (size_t)hl + 16386, MSG_NOSIGNAL), hl + 16386);
	send_str(fd, "0\r\n\r\n");
	int n = read_reply(fd, buf, sizeof(buf), 5000);
	ck_assert_msg(n > 0 && status_of(buf) == 413, "want 413, got: %s", n > 0 ? buf : "");
	assert_error(buf, "too_large");
	close(fd);
}
END_TEST

/* Two Content-Lengths that differ, or Content-Length with
 * Transfer-Encoding, are refused (400, JSON) and the connection closed, so
 * no part of the body is read as a next request. */
START_TEST(test_body_framed_two_ways)
{
	start_brain(NULL);
	const char *uid = register_job("framed");
	static const char *const heads[] = {
		"Content-Length: 2\r\nContent-Length: 40\r\n",
		"Content-Length: 40\r\nTransfer-Encoding: chunked\r\n",
		"Transfer-Encoding: chunked\r\nContent-Length: 40\r\n",
	};
	for (size_t i = 0; i < RV_ARRAY_SIZE(heads); i++) {
		char req[512], buf[4096];
		snprintf(req, sizeof(req),
			 "POST /v1/jobs/%s/metrics HTTP/1.1\r\nHost: x\r\n%s\r\n"
			 "{}\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
			 uid, heads[i]);
		int fd = dial("127.0.0.1");
		send_str(fd, req);
		int n = read_reply(fd, buf, sizeof(buf), 2000);
		ck_assert_msg(n > 0 && status_of(buf) == 400, "%s: want 400, got: %s", heads[i],
			      n > 0 ? buf : "");
		cJSON *doc = body_of(buf);
		ck_assert_msg(doc != NULL, "not JSON: %s", buf);
		cJSON_Delete(doc);
		/* Closed: nothing more, in particular no reply to the smuggled GET. */
		char rest[4096];
		n = read_reply(fd, rest, sizeof(rest), 1000);
		ck_assert_msg(n <= 0, "more after the 400: %s", rest);
		close(fd);
	}
	/* The same header twice with one value is fine. */
	char req[512], buf[4096];
	snprintf(req, sizeof(req),
		 "POST /v1/jobs/%s/metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\n"
		 "Content-Length: 13\r\n\r\n{\"samples\":[]",
		 uid);
	int fd = dial("127.0.0.1");
	send_str(fd, req);
	int n = read_reply(fd, buf, sizeof(buf), 2000);
	ck_assert_msg(n > 0 && status_of(buf) != 0 && status_of(buf) != 500, "got: %s", buf);
	close(fd);
}
END_TEST

static long count_rows(const char *sql)
{
	char v[64];
	return atol(rv_test_sql_value(conninfo, sql, v, sizeof(v)));
}

#define POSTERS 16
#define BATCHES 25

struct poster {
	const char *uid;
	int id;
	int ok;      /* 200s with the right accepted count */
	int missing; /* 404s (posts to an unknown job) */
};

/* BATCHES two-sample batches, each with its own batch id; every fourth
 * poster also posts to an unknown job, into the same groups. */
static void *poster_main(void *arg)
{
	struct poster *p = arg;
	for (int k = 0; k < BATCHES; k++) {
		char path[160], batch[512];
		bool bad = p->id % 4 == 3 && k % 5 == 0;
		snprintf(path, sizeof(path), "/v1/jobs/%s/metrics",
			 bad ? "00000000-0000-0000-0000-000000000000" : p->uid);
		long ts = 2000000 + p->id * 1000 + k * 2;
		snprintf(batch, sizeof(batch),
			 "{\"batch_id\":\"p%d-b%d\",\"samples\":["
			 "{\"kind\":\"speed\",\"ts\":%ld,\"speed\":10,\"workers\":2},"
			 "{\"kind\":\"speed\",\"ts\":%ld,\"speed\":11,\"workers\":2}]}",
			 p->id, k, ts, ts + 1);
		struct rv_test_reply r;
		if (rv_test_http(&brain, "POST", path, batch, NULL, &r) == 0) {
			if (bad && r.status == 404)
				p->missing++;
			else if (!bad && r.status == 200 &&
				 rv_test_json_num(r.json, "accepted", 0) == 2)
				p->ok++;
			else
				fprintf(stderr, "poster %d batch %d: %ld %s\n", p->id, k, r.status,
					r.body ? r.body : "");
		} else {
			fprintf(stderr, "poster %d batch %d: no reply\n", p->id, k);
		}
		rv_test_reply_release(&r);
	}
	return NULL;
}

/* Small batches posted at once share transactions (fewer commits than
 * batches); every acknowledged batch is stored exactly once, a batch for
 * an unknown job in the same group gets its 404 without spoiling the
 * others, and a resend of a stored batch id stores nothing. */
START_TEST(test_concurrent_batches_share_commits)
{
	/* Each post is a new connection: no per-address limit here. */
	start_brain((const char *const[]){ "--server-per-ip-conns", "0", NULL });
	const char *uid = register_job("many");
	char uidc[64];
	snprintf(uidc, sizeof(uidc), "%s", uid);
	struct poster ps[POSTERS];
	pthread_t th[POSTERS];
	for (int i = 0; i < POSTERS; i++) {
		ps[i] = (struct poster){ .uid = uidc, .id = i };
		ck_assert_int_eq(pthread_create(&th[i], NULL, poster_main, &ps[i]), 0);
	}
	int ok = 0, missing = 0, want_missing = 0;
	for (int i = 0; i < POSTERS; i++) {
		pthread_join(th[i], NULL);
		ok += ps[i].ok;
		missing += ps[i].missing;
		if (i % 4 == 3)
			want_missing += (BATCHES + 4) / 5;
	}
	ck_assert_int_eq(missing, want_missing);
	ck_assert_int_eq(ok, POSTERS * BATCHES - want_missing);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM job_speed"), 2L * ok);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM metrics_batches"), ok);

	/* A resend: answered as the first time, nothing stored. */
	char path[160];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uidc);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", path,
				      "{\"batch_id\":\"p0-b0\",\"samples\":[{\"kind\":\"speed\","
				      "\"ts\":1,\"speed\":1}]}",
				      NULL, &r),
			 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "accepted", 0), 2);
	rv_test_reply_release(&r);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM job_speed"), 2L * ok);

	ck_assert_int_eq(rv_test_http(&brain, "GET", "/metrics", NULL, NULL, &r), 0);
	const char *m = strstr(r.body, "\nrover_brain_ingest_commits_total ");
	ck_assert_ptr_nonnull(m);
	long commits = atol(m + strlen("\nrover_brain_ingest_commits_total "));
	ck_assert_msg(commits > 0 && commits < ok, "%ld commits for %d batches", commits, ok);
	rv_test_reply_release(&r);
}
END_TEST

/* Every poster sends the same batches (same ids) to the same four jobs at
 * once, so a batch meets its twins in one group as well as in later
 * groups: each is stored once, every reply says how many samples it had,
 * and node samples of four jobs in one group keep their per-node peaks. */
#define TWIN_JOBS 4
struct twin_poster {
	char (*uids)[64];
	int ok;
};

static void *twin_main(void *arg)
{
	struct twin_poster *p = arg;
	for (int k = 0; k < 10; k++)
		for (int j = 0; j < TWIN_JOBS; j++) {
			char path[160], batch[512];
			snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", p->uids[j]);
			snprintf(batch, sizeof(batch),
				 "{\"batch_id\":\"t%d\",\"samples\":["
				 "{\"kind\":\"speed\",\"ts\":%d,\"speed\":10,\"workers\":2},"
				 "{\"kind\":\"node\",\"ts\":%d,\"node\":\"worker-0\",\"cpu\":%d,"
				 "\"memory_mb\":%d}]}",
				 k, 1000 + k, 1000 + k, 1 + k % 3, 100 + j * 10 + k);
			struct rv_test_reply r;
			if (rv_test_http(&brain, "POST", path, batch, NULL, &r) == 0 &&
			    r.status == 200 && rv_test_json_num(r.json, "accepted", 0) == 2)
				p->ok++;
			else
				fprintf(stderr, "twin %s t%d: %ld %s\n", p->uids[j], k, r.status,
					r.body ? r.body : "");
			rv_test_reply_release(&r);
		}
	return NULL;
}

START_TEST(test_twin_batches_of_many_jobs_stored_once)
{
	start_brain((const char *const[]){ "--server-per-ip-conns", "0", NULL });
	char uids[TWIN_JOBS][64];
	for (int j = 0; j < TWIN_JOBS; j++) {
		char name[16];
		snprintf(name, sizeof(name), "twin%d", j);
		snprintf(uids[j], sizeof(uids[j]), "%s", register_job(name));
	}
	struct twin_poster ps[POSTERS];
	pthread_t th[POSTERS];
	for (int i = 0; i < POSTERS; i++) {
		ps[i] = (struct twin_poster){ .uids = uids };
		ck_assert_int_eq(pthread_create(&th[i], NULL, twin_main, &ps[i]), 0);
	}
	for (int i = 0; i < POSTERS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(ps[i].ok, 10 * TWIN_JOBS);
	}
	ck_assert_int_eq(count_rows("SELECT count(*) FROM job_speed"), 10L * TWIN_JOBS);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM node_usage"), 10L * TWIN_JOBS);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM metrics_batches"), 10L * TWIN_JOBS);
	/* Per job: the newest sample time, the peak memory of its node. */
	ck_assert_int_eq(count_rows("SELECT count(*) FROM jobs WHERE last_sample_ms = 1009"),
			 TWIN_JOBS);
	ck_assert_int_eq(count_rows("SELECT sum(peak_memory_mb) FROM job_nodes"),
			 109 + 119 + 129 + 139);
	/* Deleting a job deletes its samples (the sample tables have no
	 * foreign key; a trigger does what ON DELETE CASCADE did). */
	ck_assert_int_eq(count_rows("WITH d AS (DELETE FROM jobs WHERE name = 'twin0' RETURNING 1)"
				    " SELECT count(*) FROM d"),
			 1);
	ck_assert_int_eq(count_rows("SELECT count(*) FROM job_speed"), 10L * (TWIN_JOBS - 1));
	ck_assert_int_eq(count_rows("SELECT count(*) FROM node_usage"), 10L * (TWIN_JOBS - 1));
}
END_TEST

RV_TEST_MAIN_PG_FIXTURE_TCASE("brain_limits", NULL, teardown, "limits", 60,
			      test_good_client_served_under_abuse, test_too_many_long_polls,
			      test_body_memory_budget, test_chunked_too_large,
			      test_body_framed_two_ways, test_concurrent_batches_share_commits,
			      test_twin_batches_of_many_jobs_stored_once)
