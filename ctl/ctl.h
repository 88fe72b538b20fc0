/*
 * ctl.h: roverctl, the command-line client of rover-brain's REST API for
 * people and scripts.  main.c reads the options (flags > environment >
 * config file > defaults) and runs one command of cmd.c; out.c prints
 * tables (colour only on a terminal) and JSON; yaml.c turns a YAML spec
 * into the JSON the brain takes.  Single-threaded; every call to the brain
 * has a timeout.
 */
#ifndef CTL_H
#define CTL_H

#include <stdbool.h>
#include <stdio.h>

#include "err.h"
#include "json.h"

/* Exit codes: what a script may branch on. */
enum {
	CTL_OK = 0,
	CTL_FAIL = 1,        /* the brain failed (5xx) or another error */
	CTL_USAGE = 2,       /* bad command line */
	CTL_UNREACHABLE = 3, /* no answer from the brain (refused, timeout) */
	CTL_NOT_FOUND = 4,   /* no such job */
	CTL_CONFLICT = 5,    /* submit: a running job has that name */
	CTL_INVALID = 6,     /* the spec or request is invalid (local check or 400/413/422) */
	CTL_DENIED = 7,      /* the token was refused (401/403) */
	CTL_JOB_FAILED = 8,  /* watch: the job ended failed */
};

struct ctl {
	char url[256];
	char token[256];
	int timeout_ms;
	bool json;  /* --json: the brain's documents, for scripts */
	bool color; /* on a terminal, unless --no-color or NO_COLOR */
	bool tty;
	int width; /* terminal columns (0: not a terminal, no truncation) */
	struct rv_http_client *http;
	FILE *out;
};

/* The CTL_* exit code of an HTTP status that was not 2xx (the brain's or
 * the Kubernetes API server's). */
int ctl_exit_code(long status);
/* GET or POST path (body may be NULL) on the brain: 0 with *doc (the reply,
 * the caller's) when the status was 2xx (*doc NULL for 204), else a CTL_*
 * exit code with the reason printed on stderr. */
int ctl_call(struct ctl *c, const char *method, const char *path, const char *body, cJSON **doc);
/* ctl_call for a GET the brain may hold up to wait_s seconds (a long-poll):
 * the request's timeout is the client's plus that wait. */
int ctl_call_wait(struct ctl *c, const char *path, int wait_s, cJSON **doc);

/* k8s.c: doc (a checked ElasticJob spec, changed in place) created as an
 * ElasticJob through kubeconfig in ns (NULL: the spec's, the kubeconfig's,
 * default); prints what was created.  A CTL_* code (409 CTL_CONFLICT, 422
 * CTL_INVALID, ...), the API server's message on stderr. */
int k8s_submit(struct ctl *c, cJSON *doc, const char *kubeconfig, const char *ns);

/* cmd.c: the commands, one table: whether name is one of them; run the
 * one argv[0] names with its options and arguments (argv[1..]), --help
 * printing its usage.  A CTL_* code. */
bool cmd_exists(const char *name);
int cmd_run(struct ctl *c, int argc, char **argv);

/* out.c: a table of ncols columns, rows added as strings, printed aligned
 * with a header; the last column is cut to the terminal's width. */
struct out_table;
struct out_table *out_table_new(int ncols, const char *const *headers);
/* cells: ncols strings (copied); color: per cell ANSI code or NULL. */
void out_table_row(struct out_table *t, const char *const *cells, const char *const *colors);
void out_table_print(struct ctl *c, struct out_table *t);
void out_table_free(struct out_table *t);
/* The colour of a state word (running, finished, failed, better, worse, ...)
 * or NULL. */
const char *out_state_color(const char *state);
/* s in bold (or as is without colour). */
void out_heading(struct ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A progress bar of width cells for done of total. */
void out_bar(struct ctl *c, double done, double total, int width);
/* The document as pretty JSON on c->out. */
void out_json(struct ctl *c, const cJSON *doc);
/* "12.3k", "512", "-" for < 0 */
void out_num(char *buf, size_t size, double v);
/* ms since the epoch as "2026-11-23 05:12:03" (local time), "-" for <= 0. */
void out_time_ms(char *buf, size_t size, double ms);

/* yaml.c: YAML text (len bytes) as a cJSON tree (the caller's), or NULL with
 * *err set (the line and column).  At most 64 levels and 100000 nodes. */
cJSON *ctl_yaml_to_json(const char *text, size_t len, struct rv_err *err);

#endif
