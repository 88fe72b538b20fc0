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
/* SIGTERM (or sig) then wait up to timeout_s, then SIGKILL; returns the wait
 * status, -ETIMEDOUT when it had to be killed, or -ESRCH when not running. */
int rv_test_brain_stop(struct rv_test_brain *b, int sig, int timeout_s);

struct rv_test_reply {
	long status;
	char *body;
	cJSON *json;   /* parsed body or NULL */
};

/* method, path ("/v1/jobs"), body (may be NULL), token (may be NULL). */
int rv_test_http(const struct rv_test_brain *b, const char *method, const char *path,
		 const char *body, const char *token, struct rv_test_reply *out);
void rv_test_reply_release(struct rv_test_reply *r);
/* Read a file (e.g. examples/job.json) into a malloc'd string; NULL on error. */
char *rv_test_read_file(const char *path);
/* String at a dotted path ("plan.groups.worker.count" works for numbers via
 * rv_test_json_num); NULL when missing. */
const cJSON *rv_test_json_at(const cJSON *root, const char *dotted);
double rv_test_json_num(const cJSON *root, const char *dotted, double dflt);
const char *rv_test_json_str(const cJSON *root, const char *dotted);

#endif
