/*
 * brainfix.h: run the real rover-brain binary for integration tests.
 *
 * rv_test_brain_start() spawns $ROVER_BIN_DIR/rover-brain (default
 * build/bin) listening on 127.0.0.1 port 0, waits for its "listening on"
 * line (timeout) and records the URL.  Extra flags (e.g. "--token", "t") are
 * appended.  Its stderr goes to a log file under the test's temp dir.
 * rv_test_brain_stop() sends SIGTERM (or the signal given) to its process
 * group and waits (SIGKILL after the timeout); it returns the exit status.
 * The brain gets SIGKILL when the test process dies.  Request helpers wrap rv_http_request with a
 * per-call client and parse JSON replies.
 */
#ifndef RV_BRAINFIX_H
#define RV_BRAINFIX_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc.h"

struct rv_test_brain {
	struct rv_proc proc;
	pid_t pid; /* proc.pid while running, 0 once stopped */
	int port;
	char url[64];
	char log[512];
};

/* args: NULL-terminated extra arguments.  Returns 0 or a negative errno
 * (and then prints the brain's log on stderr). */
int rv_test_brain_start(struct rv_test_brain *b, const char *const *args);
/* The same under a command that execs it (wrap, NULL-terminated: say
 * `ip netns exec NS`, so that the pid stays the brain's); the URL then
 * takes the host of its "listening on" line (give --listen ADDR:0 in
 * args), not loopback.  wrap borrowed for the call. */
int rv_test_brain_start_wrapped(struct rv_test_brain *b, const char *const *wrap,
				const char *const *args);
/* A fresh database (rv_test_pg_fresh_db(migrate, conninfo, size)) and a
 * brain on it: "--db" conninfo, then args, then extra (either may be NULL).
 * 0 or a negative errno. */
int rv_test_brain_start_fresh(struct rv_test_brain *b, int migrate, char *conninfo, size_t size,
			      const char *const *args, const char *const *extra);
/* SIGTERM (or sig) then wait up to timeout_s, then SIGKILL; returns the wait
 * status, -ETIMEDOUT when it had to be killed, or -ESRCH when not running. */
int rv_test_brain_stop(struct rv_test_brain *b, int sig, int timeout_s);
/* Read the stdout pipe (fd[1]) of p, a daemon just spawned, for at most
 * timeout_ms until its "listening on http://HOST:PORT" line: 0 with HOST:PORT
 * in addr (that pipe then closed), -ECHILD once p exited first (reaped,
 * *status its wait status; status may be NULL) or -ETIMEDOUT (p left
 * running).  The brain, the master and the monitor print that line. */
int rv_test_proc_listening(struct rv_proc *p, int timeout_ms, char *addr, size_t size, int *status);

struct rv_test_reply {
	long status;
	char *body;
	cJSON *json;   /* parsed body or NULL */
};

/* method, path ("/v1/jobs"), body (may be NULL), token (may be NULL). */
int rv_test_http(const struct rv_test_brain *b, const char *method, const char *path,
		 const char *body, const char *token, struct rv_test_reply *out);
void rv_test_reply_release(struct rv_test_reply *r);
/* POST the job document doc to /v1/jobs; its uid into uid.  Called from a
 * test: a status other than 201 fails it. */
void rv_test_brain_register(const struct rv_test_brain *b, const char *doc, char *uid, size_t size);
/* The number at the dotted path key of GET /v1/jobs/<uid> (-1 when none).
 * Called from a test: a status other than 200 fails it. */
double rv_test_brain_job_num(const struct rv_test_brain *b, const char *uid, const char *key);
struct rv_buf;
/* Close a metrics batch begun with {"samples":[ and post it to job uid;
 * batch is released.  The HTTP status (a body other than 200's is printed
 * on stderr) or a negative errno. */
long rv_test_brain_post_batch(const struct rv_test_brain *b, const char *uid, struct rv_buf *batch);
/* Read a file (e.g. examples/job.json) into a malloc'd string; NULL on error. */
char *rv_test_read_file(const char *path);
/* String at a dotted path ("plan.groups.worker.count" works for numbers via
 * rv_test_json_num); NULL when missing. */
const cJSON *rv_test_json_at(const cJSON *root, const char *dotted);
double rv_test_json_num(const cJSON *root, const char *dotted, double dflt);
const char *rv_test_json_str(const cJSON *root, const char *dotted);

/* Wait until the brain's planner has considered every sample of job uid up
 * to ts (its planned_ts, checked every 20 ms, at most tries times): 0, or
 * -ETIMEDOUT, or the request's negative errno. */
int rv_test_brain_wait_planned(const struct rv_test_brain *b, const char *uid, int64_t ts,
			       int tries);
/* The newest running plan of job uid after plan id `after`: returns the HTTP
 * status (200 with *plan set, owned by the caller: cJSON_Delete; 204 none)
 * or a negative errno. */
long rv_test_brain_running_plan(const struct rv_test_brain *b, const char *uid, int64_t after,
				cJSON **plan);
/* Fail the test unless rv_test_brain_wait_planned gets to ts. */
void rv_test_brain_expect_planned(const struct rv_test_brain *b, const char *uid, int64_t ts,
				  int tries);
/* rv_test_brain_running_plan failing the test on a status other than 200
 * and 204: the plan (the caller's, cJSON_Delete) or NULL. */
cJSON *rv_test_brain_expect_running_plan(const struct rv_test_brain *b, const char *uid,
					 int64_t after);
/* The value of one series of the brain's /metrics (its whole name with
 * labels, as printed: "rover_brain_plan_passes_failed_total{reason=
 * \"serialization\"}"): 0 or more, -ENOENT when /metrics has no such
 * series, or the request's negative errno. */
long long rv_test_brain_metric(const struct rv_test_brain *b, const char *series);
/* The same series as a double, -1 when absent, from any daemon's /metrics
 * at b's url (a master's too).  Called from a test: a failed request or a
 * status other than 200 fails it. */
double rv_test_metric(const struct rv_test_brain *b, const char *series);

#endif
