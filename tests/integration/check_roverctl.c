/*
 * check_roverctl.c: roverctl against the real rover-brain, as scripts use it
 * (exit codes, --json documents, no colour in a pipe) and as a person does,
 * typing into a shell in a real terminal (tmux send-keys, capture-pane): the
 * tables line up with colour, status draws the shards' progress bar, and
 * watch redraws as speed samples come and at once when a plan is made (the
 * brain's plan long-poll), then ends with the job.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "buf.h"
#include "parse.h"
#include "proc.h"
#include "testutil.h"

static char conninfo[512];
static struct rv_test_brain brain;
static char tmux_sock[64];

static const char *bin_dir(void)
{
	return getenv("ROVER_BIN_DIR") ? getenv("ROVER_BIN_DIR") : "build/bin";
}

struct run {
	int code;
	char *out, *err;
	cJSON *json;
};

/* roverctl ARGS... against the test brain (through ROVER_BRAIN_URL), stdin
 * and stdout pipes: the exit code, its stdout (parsed when JSON) and stderr. */
static struct run ctl(const char *stdin_text, const char *const *args)
{
	char exe[512];
	snprintf(exe, sizeof(exe), "%s/roverctl", bin_dir());
	const char *argv[32] = { exe };
	int n = 1;
	for (int i = 0; args[i] && n < 31; i++)
		argv[n++] = args[i];
	char in_path[] = "/tmp/rover-ctl-in-XXXXXX", err_path[] = "/tmp/rover-ctl-err-XXXXXX",
	     out_path[] = "/tmp/rover-ctl-out-XXXXXX";
	int in = mkstemp(in_path), er = mkstemp(err_path), ou = mkstemp(out_path);
	ck_assert(in >= 0 && er >= 0 && ou >= 0);
	if (stdin_text)
		ck_assert_int_eq(write(in, stdin_text, strlen(stdin_text)),
				 (ssize_t)strlen(stdin_text));
	lseek(in, 0, SEEK_SET);
	setenv("ROVER_BRAIN_URL", brain.url, 1);
	struct rv_proc_opts o = {
		.argv = argv,
		.io = { { RV_PROC_FD, in }, { RV_PROC_FD, ou }, { RV_PROC_FD, er } },
	};
	int st = -1;
	ck_assert_int_eq(rv_proc_run(&o, 30000, &st, NULL), 0);
	close(in);
	close(er);
	close(ou);
	struct run r = { .code = WIFEXITED(st) ? WEXITSTATUS(st) : -1 };
	r.out = rv_test_read_file(out_path);
	r.err = rv_test_read_file(err_path);
	unlink(in_path);
	unlink(err_path);
	unlink(out_path);
	r.json = cJSON_Parse(r.out);
	return r;
}

/* roverctl with args (NULL-terminated) and nothing on stdin, which must
 * exit code (the failure names the command and its stderr). */
static struct run ctl_expect(int code, const char *const *args)
{
	struct run r = ctl(NULL, args);
	ck_assert_msg(r.code == code, "roverctl %s %s: exit %d, want %d: %.1000s", args[0],
		      args[1] ? args[1] : "", r.code, code, r.err);
	return r;
}

static void run_release(struct run *r)
{
	free(r->out);
	free(r->err);
	cJSON_Delete(r->json);
}

static void start_brain(void)
{
	ck_assert_int_eq(
		rv_test_brain_start_fresh(&brain, 1, conninfo, sizeof(conninfo),
					  (const char *const[]){ "--token", "sesame", NULL }, NULL),
		0);
}

static void teardown(void)
{
	if (tmux_sock[0]) {
		const char *argv[] = { "tmux", "-L", tmux_sock, "kill-server", NULL };
		struct rv_proc_opts o = { .argv = argv };
		int st;
		rv_proc_run(&o, 10000, &st, NULL);
		tmux_sock[0] = 0;
	}
	if (brain.pid > 0)
		rv_test_brain_stop(&brain, SIGTERM, 20);
}

/* Register examples/job.json under name through roverctl; returns the uid
 * (static storage). */
static const char *submit(const char *name)
{
	static char uid[64];
	char *spec = rv_test_read_file("examples/job.json");
	ck_assert_ptr_nonnull(spec);
	cJSON *j = cJSON_Parse(spec);
	free(spec);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "metadata"), "name",
				  cJSON_CreateString(name));
	char *text = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	const char *args[] = { "--token", "sesame", "--json", "submit", "-", NULL };
	struct run r = ctl(text, args);
	free(text);
	ck_assert_msg(r.code == 0, "submit: %d %s", r.code, r.err);
	snprintf(uid, sizeof(uid), "%s", rv_test_json_str(r.json, "uid"));
	run_release(&r);
	return uid;
}

static void post(const char *path, const char *body)
{
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", path, body, "sesame", &r), 0);
	ck_assert_msg(r.status == 200 || r.status == 201, "%s: %ld %s", path, r.status, r.body);
	rv_test_reply_release(&r);
}

static void post_speed(const char *uid, double speed, int step)
{
	char path[128], body[256];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	snprintf(body, sizeof(body),
		 "{\"samples\":[{\"kind\":\"speed\",\"ts\":%lld,\"speed\":%g,\"step\":%d,"
		 "\"workers\":2,\"ps\":0}]}",
		 (long long)rv_now_ms(), speed, step);
	post(path, body);
}

START_TEST(test_exit_codes_and_json)
{
	start_brain();
	struct run r;
	/* help everywhere, and a bad command line is 2 */
	const char *help[] = { "--help", NULL };
	r = ctl(NULL, help);
	ck_assert_int_eq(r.code, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "exit codes"));
	run_release(&r);
	static const char *const cmds[] = { "submit", "jobs",    "status", "plans",
					    "events", "cluster", "watch" };
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		const char *a[] = { cmds[i], "--help", NULL };
		r = ctl(NULL, a);
		ck_assert_msg(r.code == 0 && strstr(r.out, "usage: roverctl "), "%s --help",
			      cmds[i]);
		run_release(&r);
	}
	r = ctl_expect(2, (const char *const[]){ "frobnicate", NULL });
	run_release(&r);
	r = ctl_expect(2, (const char *const[]){ "jobs", "--status", "sleeping", NULL });
	run_release(&r);

	/* a write without the token is refused: 7 */
	const char *notoken[] = { "submit", "examples/job.json", NULL };
	r = ctl(NULL, notoken);
	ck_assert_msg(r.code == 7, "code %d: %s", r.code, r.err);
	run_release(&r);

	/* submit JSON, then YAML of the same shape; the same name again is 5 */
	const char *uid = submit("ctl-json");
	ck_assert_int_eq(strncmp(uid, "j-", 2), 0);
	const char *yaml = "apiVersion: elastic.rover.dev/v1alpha1\n"
			   "kind: ElasticJob\n"
			   "metadata:\n  name: ctl-yaml\n  namespace: default\n"
			   "spec:\n  distributionStrategy: AllreduceStrategy\n"
			   "  optimizeMode: cluster\n"
			   "  replicaSpecs:\n    worker:\n      replicas: 2\n      minReplicas: 1\n"
			   "      maxReplicas: 4\n      command: [python3, train.py]\n"
			   "  model:\n    parameters: 1200000\n    batchSize: 64\n";
	const char *sub[] = { "--token", "sesame", "--json", "submit", "-", NULL };
	r = ctl(yaml, sub);
	ck_assert_msg(r.code == 0, "yaml submit: %d %s", r.code, r.err);
	ck_assert_str_eq(rv_test_json_str(r.json, "job.name"), "ctl-yaml");
	ck_assert_str_eq(rv_test_json_str(r.json, "plan.stage"), "create");
	run_release(&r);
	r = ctl(yaml, sub);
	ck_assert_int_eq(r.code, 5);
	ck_assert_ptr_nonnull(strstr(r.err, "already exists"));
	run_release(&r);
	/* an invalid spec never reaches the brain: 6, naming the field */
	r = ctl("apiVersion: elastic.rover.dev/v1alpha1\nkind: ElasticJob\n"
		"metadata:\n  name: Bad_Name\nspec: {}\n",
		sub);
	ck_assert_int_eq(r.code, 6);
	ck_assert_msg(strstr(r.err, "metadata.name"), "stderr: %s", r.err);
	run_release(&r);
	r = ctl("key: [unclosed\n", sub);
	ck_assert_int_eq(r.code, 6);
	ck_assert_ptr_nonnull(strstr(r.err, "line"));
	run_release(&r);

	/* jobs --json is the brain's list; a pipe gets no colour */
	r = ctl_expect(0, (const char *const[]){ "--json", "jobs", NULL });
	ck_assert_int_eq((int)rv_test_json_num(r.json, "total", 0), 2);
	run_release(&r);
	r = ctl_expect(0, (const char *const[]){ "jobs", "--status", "running", NULL });
	ck_assert_ptr_nonnull(strstr(r.out, "ctl-json"));
	ck_assert_ptr_null(strchr(r.out, '\033'));
	run_release(&r);

	/* status by name and by uid; speed after a sample */
	post_speed(uid, 321.5, 40);
	r = ctl_expect(0, (const char *const[]){ "status", "ctl-json", "--json", NULL });
	ck_assert_str_eq(rv_test_json_str(r.json, "job.uid"), uid);
	ck_assert_double_eq_tol(rv_test_json_num(r.json, "job.latest_speed.speed", 0), 321.5, 1e-9);
	ck_assert_int_ge(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "plans")), 1);
	run_release(&r);
	r = ctl_expect(0, (const char *const[]){ "status", uid, NULL });
	ck_assert_ptr_nonnull(strstr(r.out, "321.5 samples/s at step 40"));
	ck_assert_ptr_nonnull(strstr(r.out, "create_default"));
	run_release(&r);
	r = ctl_expect(4, (const char *const[]){ "status", "no-such-job", NULL });
	run_release(&r);

	/* events and plans */
	char path[128], body[256];
	snprintf(path, sizeof(path), "/v1/jobs/%s/events", uid);
	snprintf(body, sizeof(body),
		 "{\"type\":\"node_failed\",\"ts\":%lld,\"node\":\"worker-1\",\"role\":\"worker\","
		 "\"rank\":1,\"exit_code\":1,\"reason\":\"segfault in the loader\"}",
		 (long long)rv_now_ms());
	post(path, body);
	r = ctl_expect(0, (const char *const[]){ "--json", "events", "ctl-json", NULL });
	ck_assert_str_eq(rv_test_json_str(r.json, "events.0.type"), "node_failed");
	ck_assert_str_eq(rv_test_json_str(r.json, "events.0.reason"), "segfault in the loader");
	run_release(&r);
	const char *ev_t[] = { "events", "ctl-json", NULL };
	r = ctl(NULL, ev_t);
	ck_assert_ptr_nonnull(strstr(r.out, "segfault in the loader"));
	run_release(&r);
	r = ctl_expect(0, (const char *const[]){ "--json", "plans", uid, "--limit", "5", NULL });
	ck_assert_str_eq(rv_test_json_str(r.json, "plans.0.stage"), "create");
	run_release(&r);

	/* watch in a pipe: a line per plan and speed sample; a failed job is 8 */
	snprintf(body, sizeof(body), "{\"type\":\"job_failed\",\"ts\":%lld,\"reason\":\"x\"}",
		 (long long)rv_now_ms());
	post(path, body);
	r = ctl_expect(8, (const char *const[]){ "watch", "ctl-json", "--interval", "0.2", NULL });
	ck_assert_msg(strstr(r.out, "plan 1 create create_default"), "watch: %s", r.out);
	ck_assert_ptr_nonnull(strstr(r.out, "speed 321.5 samples/s  step 40"));
	ck_assert_ptr_nonnull(strstr(r.out, "failed"));
	run_release(&r);
	r = ctl_expect(8, (const char *const[]){ "--json", "watch", "ctl-json", NULL });
	ck_assert_ptr_nonnull(strstr(r.out, "{\"kind\":\"speed\""));
	ck_assert_ptr_nonnull(strstr(r.out, "{\"kind\":\"plan\""));
	/* JSON lines: one object per line, each parses alone */
	int lines = 0;
	for (char *l = strtok(r.out, "\n"); l; l = strtok(NULL, "\n"), lines++) {
		cJSON *o = cJSON_Parse(l);
		ck_assert_msg(o != NULL, "not JSON: %s", l);
		cJSON_Delete(o);
	}
	ck_assert_int_ge(lines, 2);
	run_release(&r);

	/* cluster, with a node a monitor reported */
	snprintf(body, sizeof(body),
		 "{\"nodes\":[{\"name\":\"gpu-7\",\"ts\":%lld,\"cpu\":32,\"memory_mb\":65536,"
		 "\"gpu\":4,\"cpu_used\":8,\"memory_used_mb\":1024,\"cpu_pressure\":12.5,"
		 "\"jobs\":[{\"name\":\"ctl-json\",\"procs\":3}]}]}",
		 (long long)rv_now_ms());
	post("/v1/cluster/nodes", body);
	r = ctl_expect(0, (const char *const[]){ "cluster", NULL });
	ck_assert_ptr_nonnull(strstr(r.out, "gpu-7"));
	ck_assert_ptr_nonnull(strstr(r.out, "ctl-json(3)"));
	ck_assert_ptr_nonnull(strstr(r.out, "free      24.0 cores"));
	run_release(&r);

	/* conf/roverctl.conf reads as a config file, and --help names its keys */
	const char *shipped[] = { "--config", "conf/roverctl.conf", "jobs", NULL };
	r = ctl(NULL, shipped);
	ck_assert_msg(r.code == 0, "conf/roverctl.conf: %s", r.err);
	run_release(&r);
	char *cf = rv_test_read_file("conf/roverctl.conf");
	ck_assert_ptr_nonnull(cf);
	r = ctl(NULL, help);
	int keys = 0;
	for (char *l = strtok(cf, "\n"); l; l = strtok(NULL, "\n")) {
		char key[64], want[80];
		if (sscanf(l, "# %63[a-z_] =", key) != 1 || !strstr(l, " ="))
			continue;
		snprintf(want, sizeof(want), "%s = ", key);
		ck_assert_msg(strstr(r.out, want), "--help lacks the config key %s", key);
		keys++;
	}
	ck_assert_int_eq(keys, 3);
	free(cf);
	run_release(&r);

	/* config file < environment < flag */
	char conf[] = "/tmp/rover-ctl-conf-XXXXXX";
	int fd = mkstemp(conf);
	dprintf(fd, "[brain]\nurl = http://127.0.0.1:9\n");
	close(fd);
	/* the environment's url wins over the file */
	r = ctl_expect(0, (const char *const[]){ "--config", conf, "jobs", NULL });
	run_release(&r);
	/* the flag wins over the environment: nobody there */
	r = ctl_expect(3, (const char *const[]){ "--config", conf, "--brain", "http://127.0.0.1:9",
						 "jobs", NULL });
	ck_assert_ptr_nonnull(strstr(r.err, "could not reach the brain"));
	run_release(&r);
	unlink(conf);
}
END_TEST

/* ---- through a real terminal ---- */

static int tmux(const char *const *args, char **out)
{
	const char *argv[24] = { "tmux", "-L", tmux_sock };
	int n = 3;
	for (int i = 0; args[i] && n < 23; i++)
		argv[n++] = args[i];
	struct rv_proc_opts o = { .argv = argv };
	struct rv_buf b;
	rv_buf_init(&b);
	int st = -1;
	int rc = rv_proc_run(&o, 10000, &st, out ? &b : NULL);
	if (out)
		*out = rv_buf_steal(&b);
	else
		rv_buf_release(&b);
	return rc < 0 ? rc : st;
}

/* A shell in a 160x48 terminal, with roverctl on its PATH. */
static void term_start(void)
{
	snprintf(tmux_sock, sizeof(tmux_sock), "rover-ctl-%d", (int)getpid());
	unsetenv("TMUX");
	char bin[1024], cmd[2048];
	ck_assert_ptr_nonnull(realpath(bin_dir(), bin));
	snprintf(cmd, sizeof(cmd),
		 "env PATH=%s:/usr/bin:/bin ROVER_BRAIN_URL=%s TERM=xterm-256color PS1='$ ' "
		 "bash --norc --noprofile",
		 bin, brain.url);
	const char *a[] = { "new-session", "-d", "-s", "t", "-x", "160", "-y", "48", cmd, NULL };
	ck_assert_int_eq(tmux(a, NULL), 0);
}

static void type(const char *line)
{
	const char *a[] = { "send-keys", "-t", "t", "-l", line, NULL };
	ck_assert_int_eq(tmux(a, NULL), 0);
	const char *e[] = { "send-keys", "-t", "t", "Enter", NULL };
	ck_assert_int_eq(tmux(e, NULL), 0);
}

/* The screen (with its colour escapes when escapes), malloc'd. */
static char *screen(bool escapes)
{
	const char *a[] = { "capture-pane", "-p", "-t", "t", escapes ? "-e" : "-J", NULL };
	char *out = NULL;
	ck_assert_int_eq(tmux(a, &out), 0);
	return out;
}

/* Wait until the screen shows want (15 s at most); returns the screen. */
static char *screen_until(const char *want)
{
	char *s = NULL;
	for (int i = 0; i < 150; i++) {
		free(s);
		s = screen(false);
		if (strstr(s, want))
			return s;
		usleep(100 * 1000);
	}
	ck_abort_msg("the terminal never showed \"%s\"; it shows:\n%s", want, s);
	return s;
}

/* The status of job name as roverctl --json prints it (run_release it). */
static struct run status_json(const char *name)
{
	const char *st[] = { "status", name, "--json", NULL };
	struct run r = ctl(NULL, st);
	ck_assert_msg(r.code == 0 && r.json, "status %s: %d %s", name, r.code, r.err);
	return r;
}

/* The status of the node named name in a status document. */
static const char *node_status(const cJSON *doc, const char *name)
{
	const cJSON *n;
	cJSON_ArrayForEach(n, rv_test_json_at(doc, "job.nodes"))
	{
		if (!strcmp(rv_test_json_str(n, "name"), name))
			return rv_test_json_str(n, "status");
	}
	ck_abort_msg("no node %s", name);
	return NULL;
}

/* An ended job's status says what is true at the end: its nodes are no
 * longer running, and a plan whose outcome was never judged says so. */
START_TEST(test_ended_job_status)
{
	start_brain();
	static const char *const ends[] = { "job_finished", "job_failed" };
	static const char *const left[] = { "finished", "stopped" };
	for (int i = 0; i < 2; i++) {
		char name[32], path[128], body[512];
		snprintf(name, sizeof(name), "ended-%d", i);
		const char *uid = submit(name);
		snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
		long long now = (long long)rv_now_ms();
		snprintf(body, sizeof(body),
			 "{\"samples\":[{\"kind\":\"node\",\"ts\":%lld,\"node\":\"worker-0\","
			 "\"rank\":0,\"cpu\":1,\"memory_mb\":100,\"cpu_limit\":2,"
			 "\"memory_limit_mb\":1024},{\"kind\":\"node\",\"ts\":%lld,"
			 "\"node\":\"worker-1\",\"rank\":1,\"cpu\":1,\"memory_mb\":100,"
			 "\"cpu_limit\":2,\"memory_limit_mb\":1024}]}",
			 now, now);
		post(path, body);
		snprintf(path, sizeof(path), "/v1/jobs/%s/events", uid);
		snprintf(body, sizeof(body),
			 "{\"type\":\"node_failed\",\"ts\":%lld,\"node\":\"worker-1\","
			 "\"role\":\"worker\",\"rank\":1,\"exit_code\":3}",
			 now + 1);
		post(path, body);
		struct run r = status_json(name);
		ck_assert_str_eq(node_status(r.json, "worker-0"), "running");
		run_release(&r);
		snprintf(body, sizeof(body), "{\"type\":\"%s\",\"ts\":%lld}", ends[i], now + 2);
		post(path, body);

		r = status_json(name);
		ck_assert_str_eq(node_status(r.json, "worker-0"), left[i]);
		ck_assert_str_eq(node_status(r.json, "worker-1"), "failed");
		const cJSON *plans = rv_test_json_at(r.json, "plans");
		ck_assert_int_ge(cJSON_GetArraySize(plans), 1);
		const cJSON *p;
		cJSON_ArrayForEach(p, plans)
		{
			ck_assert_str_eq(rv_test_json_str(p, "outcome"), "unjudged");
		}
		run_release(&r);
		r = ctl_expect(0, (const char *const[]){ "status", name, NULL });
		ck_assert_msg(strstr(r.out, "unjudged") && !strstr(r.out, "pending") &&
				      !strstr(r.out, "running"),
			      "status of an ended job:\n%s", r.out);
		run_release(&r);
	}
}
END_TEST

START_TEST(test_terminal_tables)
{
	start_brain();
	const char *uid = submit("term-job");
	post_speed(uid, 812.25, 7);
	term_start();
	type("roverctl jobs; echo EXIT=$?");
	char *s = screen_until("EXIT=0");
	/* the header and the row line up: NAME starts in the same column */
	char *hdr = strstr(s, "UID"), *row = strstr(s, uid);
	ck_assert_ptr_nonnull(hdr);
	ck_assert_ptr_nonnull(row);
	char *hl = hdr, *rl = row;
	while (hl > s && hl[-1] != '\n')
		hl--;
	while (rl > s && rl[-1] != '\n')
		rl--;
	ck_assert_int_eq(strstr(hdr, "NAME") - hl, strstr(row, "term-job") - rl);
	ck_assert_ptr_nonnull(strstr(row, "812.2"));
	free(s);
	/* on a terminal the status is coloured (green for running) */
	s = screen(true);
	ck_assert_msg(strstr(s, "\033[32mrunning") != NULL, "no colour on the terminal:\n%s", s);
	free(s);

	/* the master's progress report: a bar of shards on the terminal */
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	char body[512];
	snprintf(body, sizeof(body),
		 "{\"samples\":[{\"kind\":\"progress\",\"ts\":%lld,\"dataset\":\"train\","
		 "\"epoch\":0,\"samples_total\":120000,\"samples_done\":30000,"
		 "\"shards_total\":200,\"shards_done\":50,\"shards_doing\":4}]}",
		 (long long)rv_now_ms());
	post(path, body);
	type("clear; roverctl status term-job; echo STATUS_EXIT=$?");
	s = screen_until("STATUS_EXIT=0");
	ck_assert_msg(strstr(s, "shards     [########......................]  25%  50 done, 4 "
				"doing, 146 left of 200"),
		      "no progress bar:\n%s", s);
	free(s);
	s = screen(true);
	ck_assert_msg(strstr(s, "[\033[32m########\033[39m"), "the bar is not green:\n%s", s);
	free(s);
	s = screen(false);
	ck_assert_ptr_nonnull(strstr(s, "812.2 samples/s at step 7"));
	ck_assert_ptr_nonnull(strstr(s, "last plans"));
	ck_assert_ptr_nonnull(strstr(s, "create_default"));
	free(s);
	type("clear; roverctl status nope; echo NOPE_EXIT=$?");
	s = screen_until("NOPE_EXIT=4");
	ck_assert_ptr_nonnull(strstr(s, "no job nope"));
	free(s);
}
END_TEST

START_TEST(test_terminal_watch)
{
	start_brain();
	const char *uid = submit("watch-job");
	term_start();
	type("roverctl watch watch-job --interval 0.2; echo EXIT=$?");
	char *s = screen_until("Ctrl-C to stop");
	ck_assert_ptr_nonnull(strstr(s, "no samples yet"));
	free(s);
	/* speed samples show as they come, and the planner's plan follows */
	for (int i = 1; i <= 4; i++) {
		post_speed(uid, 100.0 * i, 10 * i);
		usleep(300 * 1000);
	}
	s = screen_until("400.0 samples/s at step 40");
	ck_assert_ptr_nonnull(strstr(s, "last 4 samples"));
	ck_assert_ptr_nonnull(strstr(s, "max 400.0"));
	free(s);
	char path[128], body[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/events", uid);
	snprintf(body, sizeof(body), "{\"type\":\"job_finished\",\"ts\":%lld}",
		 (long long)rv_now_ms());
	post(path, body);
	s = screen_until("EXIT=0");
	ck_assert_ptr_nonnull(strstr(s, "finished"));
	free(s);

	/* a plan shows the moment the brain makes it, not at the next refresh:
	 * watch every 60 s, then an OOM makes an oom plan */
	snprintf(path, sizeof(path), "/v1/jobs/%s/events", submit("watch-oom"));
	type("clear; roverctl watch watch-oom --interval 60; echo OOM_EXIT=$?");
	free(screen_until("watching"));
	usleep(300 * 1000); /* its first long-poll is waiting */
	int64_t t0 = rv_mono_ms();
	post(path, "{\"type\":\"node_oom\",\"ts\":7000,\"node\":\"worker-1\","
		   "\"role\":\"worker\",\"rank\":1,\"exit_code\":137,"
		   "\"memory_mb\":4096,\"peak_memory_mb\":4090}");
	s = screen_until(" oom ");
	int64_t took = rv_mono_ms() - t0;
	ck_assert_msg(took < 5000, "the oom plan took %lld ms to show (refresh every 60 s)",
		      (long long)took);
	free(s);
	const char *cc0[] = { "send-keys", "-t", "t", "C-c", NULL };
	ck_assert_int_eq(tmux(cc0, NULL), 0);
	free(screen_until("OOM_EXIT=0"));

	/* a second job: Ctrl-C stops watching, exit 0 */
	char want[128];
	snprintf(want, sizeof(want), "watching %s", submit("watch-two"));
	type("clear; roverctl watch watch-two --interval 0.2; echo TWO_EXIT=$?");
	free(screen_until(want));
	const char *cc[] = { "send-keys", "-t", "t", "C-c", NULL };
	ck_assert_int_eq(tmux(cc, NULL), 0);
	free(screen_until("TWO_EXIT=0"));
}
END_TEST

/* DLRover's own example ElasticJob, as its users write it: each worker's
 * container asks for cpu 2 and memory 3Gi.  The brain's create plan gives
 * five such workers (the template was ignored once: 8 CPU x 16384 MiB). */
START_TEST(test_submit_dlrover_elasticjob)
{
	start_brain();
	const char *sub[] = {
		"--token", "sesame", "--json", "submit", "examples/dlrover-elasticjob.yaml", NULL
	};
	struct run r = ctl(NULL, sub);
	ck_assert_msg(r.code == 0, "submit: %d %s", r.code, r.err);
	ck_assert_str_eq(rv_test_json_str(r.json, "job.name"), "torch-mnist");
	ck_assert_str_eq(rv_test_json_str(r.json, "plan.stage"), "create");
	ck_assert_int_eq((int)rv_test_json_num(r.json, "plan.groups.worker.count", -1), 5);
	ck_assert_double_eq_tol(rv_test_json_num(r.json, "plan.groups.worker.resource.cpu", -1),
				2.0, 1e-9);
	ck_assert_int_eq((int)rv_test_json_num(r.json, "plan.groups.worker.resource.memory_mb", -1),
			 3072);
	run_release(&r);
	/* the brain keeps the pod template as given */
	r = ctl_expect(0, (const char *const[]){ "status", "torch-mnist", "--json", NULL });
	ck_assert_msg(strstr(r.out, "pvc-nas") && strstr(r.out, "dlrover-run"), "status: %s",
		      r.out);
	run_release(&r);
}
END_TEST

RV_TEST_MAIN_PG_FIXTURE_TCASE("roverctl", NULL, teardown, "roverctl", 120, test_exit_codes_and_json,
			      test_submit_dlrover_elasticjob, test_ended_job_status,
			      test_terminal_tables, test_terminal_watch)
