/*
 * main.c: roverctl's entry point: the global options, the brain's url and
 * token (flags > environment > config file > default), one command, and the
 * exit code it returns (ctl.h).
 */
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cleanup.h"
#include "ctl.h"
#include "http.h"
#include "parse.h"
#include "version.h"

static const char help_text[] =
	"usage: roverctl [OPTIONS] COMMAND [ARGS]\n"
	"\n"
	"The command-line client of rover-brain.\n"
	"\n"
	"commands:\n"
	"  submit SPEC      register a job from an ElasticJob spec (JSON or YAML; - for stdin)\n"
	"  jobs             list jobs, newest first\n"
	"  status JOB       a job: nodes, speed, shards, its last plans\n"
	"  plans JOB        a job's plans with their reasons and outcomes\n"
	"  events JOB       a job's events\n"
	"  cluster          cluster nodes, capacity, use and what is free\n"
	"  watch JOB        follow a job's speed and plans live until it ends\n"
	"  help [COMMAND]   this text, or a command's\n"
	"JOB is a job's uid or its name (the running job of that name, else the newest).\n"
	"\n"
	"options (before the command):\n"
	"  --brain URL      rover-brain's url (env ROVER_BRAIN_URL; default "
	"http://127.0.0.1:8080)\n"
	"  --token T        bearer token for writes (env ROVER_TOKEN or ROVER_BRAIN_TOKEN)\n"
	"  --config FILE    config file (env ROVERCTL_CONFIG; default\n"
	"                   $XDG_CONFIG_HOME/rover/roverctl.conf, else "
	"~/.config/rover/roverctl.conf):\n"
	"                   [brain] url = ..., token = ..., timeout_ms = ...\n"
	"  --timeout-ms MS  timeout of each call to the brain (default 10000)\n"
	"  --json           print the brain's JSON documents (for scripts)\n"
	"  --no-color       no colour even on a terminal (also NO_COLOR=1)\n"
	"  --help, --version\n"
	"Order: default < config file < environment < flags.\n"
	"\n"
	"exit codes: 0 ok, 1 the brain failed or another error, 2 bad command line,\n"
	"3 brain unreachable, 4 no such job, 5 conflict (a running job has that name),\n"
	"6 invalid spec or request, 7 token refused, 8 watch: the job failed.\n";

static int ini_cb(void *user, const char *section, const char *key, const char *value)
{
	struct ctl *c = user;
	if (strcmp(section, "brain") != 0)
		return 1;
	if (!strcmp(key, "url"))
		snprintf(c->url, sizeof(c->url), "%s", value);
	else if (!strcmp(key, "token"))
		snprintf(c->token, sizeof(c->token), "%s", value);
	else if (!strcmp(key, "timeout_ms")) {
		int64_t v;
		if (rv_parse_i64(value, 100, 600000, &v) < 0)
			return 0;
		c->timeout_ms = (int)v;
	} else
		return 0;
	return 1;
}

/* The config file: explicit (must exist) or the default (may be absent). */
static int load_config(struct ctl *c, const char *path)
{
	char def[512];
	bool must = path != NULL;
	const char *env = getenv("ROVERCTL_CONFIG");
	if (!path && env && *env) {
		path = env;
		must = true;
	}
	if (!path) {
		const char *x = getenv("XDG_CONFIG_HOME"), *h = getenv("HOME");
		if (x && *x)
			snprintf(def, sizeof(def), "%s/rover/roverctl.conf", x);
		else if (h && *h)
			snprintf(def, sizeof(def), "%s/.config/rover/roverctl.conf", h);
		else
			return 0;
		path = def;
		if (access(path, R_OK) != 0)
			return 0;
	}
	int rc = ini_parse(path, ini_cb, c);
	if (rc == 0)
		return 0;
	if (rc < 0)
		fprintf(stderr, "roverctl: could not read config %s%s\n", path,
			must ? "" : " (the default)");
	else
		fprintf(stderr, "roverctl: config %s line %d: unknown key or bad line\n", path, rc);
	return -EINVAL;
}

int ctl_exit_code(long st)
{
	switch (st) {
	case 400:
	case 413:
	case 422:
		return CTL_INVALID;
	case 401:
	case 403:
		return CTL_DENIED;
	case 404:
		return CTL_NOT_FOUND;
	case 409:
		return CTL_CONFLICT;
	default:
		return CTL_FAIL;
	}
}

static int call(struct ctl *c, const char *method, const char *path, const char *body,
		int timeout_ms, cJSON **doc)
{
	char url[1024];
	*doc = NULL;
	snprintf(url, sizeof(url), "%s%s", c->url, path);
	struct rv_http_result r = { 0 };
	struct rv_err err = { 0 };
	int rc = rv_http_request(c->http, method, url, body, body ? strlen(body) : 0, timeout_ms,
				 &r, &err);
	if (rc < 0) {
		fprintf(stderr, "roverctl: could not reach the brain at %s: %s\n", c->url,
			err.msg[0] ? err.msg : strerror(-rc));
		return CTL_UNREACHABLE;
	}
	struct rv_err perr = { 0 };
	cJSON *j = r.body && r.body_len ? rv_json_parse(r.body, r.body_len, &perr) : NULL;
	if (r.status >= 200 && r.status < 300) {
		long ok_status = r.status; /* the release clears r */
		rv_http_result_release(&r);
		*doc = j;
		if (!j && ok_status != 204) {
			fprintf(stderr, "roverctl: the brain's reply is not JSON\n");
			return CTL_FAIL;
		}
		return CTL_OK;
	}
	const char *detail = j ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "detail")) : NULL;
	const char *field = j ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "field")) : NULL;
	fprintf(stderr, "roverctl: the brain answered %ld: %s%s%s%s\n", r.status,
		detail ? detail : (r.body ? r.body : ""), field && *field ? " (field " : "",
		field && *field ? field : "", field && *field ? ")" : "");
	long status = r.status;
	cJSON_Delete(j);
	rv_http_result_release(&r);
	return ctl_exit_code(status);
}

int ctl_call(struct ctl *c, const char *method, const char *path, const char *body, cJSON **doc)
{
	return call(c, method, path, body, 0, doc);
}

int ctl_call_wait(struct ctl *c, const char *path, int wait_s, cJSON **doc)
{
	return call(c, "GET", path, NULL, c->timeout_ms + wait_s * 1000, doc);
}

static int run(int argc, char **argv)
{
	struct ctl c = { .timeout_ms = 10000, .out = stdout };
	snprintf(c.url, sizeof(c.url), "http://127.0.0.1:8080");
	const char *config = NULL, *f_url = NULL, *f_token = NULL, *f_timeout = NULL;
	bool no_color = false;
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		const char *a = argv[i];
		const char **slot = NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(help_text, stdout);
			return CTL_OK;
		} else if (!strcmp(a, "--version")) {
			printf("roverctl %s\n", ROVER_VERSION);
			return CTL_OK;
		} else if (!strcmp(a, "--json")) {
			c.json = true;
		} else if (!strcmp(a, "--no-color")) {
			no_color = true;
		} else if (!strcmp(a, "--brain")) {
			slot = &f_url;
		} else if (!strcmp(a, "--token")) {
			slot = &f_token;
		} else if (!strcmp(a, "--config")) {
			slot = &config;
		} else if (!strcmp(a, "--timeout-ms")) {
			slot = &f_timeout;
		} else {
			fprintf(stderr, "roverctl: unknown option %s (see roverctl --help)\n", a);
			return CTL_USAGE;
		}
		if (slot) {
			if (i + 1 >= argc) {
				fprintf(stderr, "roverctl: option %s needs a value\n", a);
				return CTL_USAGE;
			}
			*slot = argv[++i];
		}
	}
	if (i >= argc) {
		fputs(help_text, stderr);
		return CTL_USAGE;
	}
	if (load_config(&c, config) < 0)
		return CTL_USAGE;
	const char *e;
	if ((e = getenv("ROVER_BRAIN_URL")) && *e)
		snprintf(c.url, sizeof(c.url), "%s", e);
	if ((e = getenv("ROVER_BRAIN_TOKEN")) && *e)
		snprintf(c.token, sizeof(c.token), "%s", e);
	if ((e = getenv("ROVER_TOKEN")) && *e)
		snprintf(c.token, sizeof(c.token), "%s", e);
	if (f_url)
		snprintf(c.url, sizeof(c.url), "%s", f_url);
	if (f_token)
		snprintf(c.token, sizeof(c.token), "%s", f_token);
	int64_t tmo = c.timeout_ms;
	if (f_timeout && rv_parse_i64(f_timeout, 100, 600000, &tmo) < 0)
		tmo = -1;
	c.timeout_ms = (int)tmo;
	if (c.timeout_ms < 100 || c.timeout_ms > 600000) {
		fprintf(stderr, "roverctl: timeout_ms must be between 100 and 600000\n");
		return CTL_USAGE;
	}
	size_t ul = strlen(c.url);
	while (ul > 0 && c.url[ul - 1] == '/')
		c.url[--ul] = '\0';
	if (strncmp(c.url, "http://", 7) != 0 && strncmp(c.url, "https://", 8) != 0) {
		fprintf(stderr,
			"roverctl: the brain's url must start with http:// or https://: %s\n",
			c.url);
		return CTL_USAGE;
	}
	c.tty = isatty(STDOUT_FILENO);
	const char *nc = getenv("NO_COLOR");
	c.color = c.tty && !c.json && !no_color && !(nc && *nc);
	struct winsize ws;
	if (c.tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
		c.width = ws.ws_col;

	const char *name = argv[i];
	if (!strcmp(name, "help")) {
		if (i + 1 < argc) {
			/* a command's help: run it with --help */
			static char help_flag[] = "--help";
			char *sub[] = { argv[i + 1], help_flag, NULL };
			if (cmd_exists(argv[i + 1]))
				return cmd_run(&c, 2, sub);
			fprintf(stderr, "roverctl: no command %s\n", argv[i + 1]);
			return CTL_USAGE;
		}
		fputs(help_text, stdout);
		return CTL_OK;
	}
	if (!cmd_exists(name)) {
		fprintf(stderr, "roverctl: no command %s (see roverctl --help)\n", name);
		return CTL_USAGE;
	}
	c.http = rv_http_client_new(c.token, c.timeout_ms < 3000 ? c.timeout_ms : 3000,
				    c.timeout_ms);
	if (!c.http) {
		fprintf(stderr, "roverctl: could not make an HTTP client\n");
		return CTL_FAIL;
	}
	int rc = cmd_run(&c, argc - i, argv + i);
	rv_http_client_free(c.http);
	return rc;
}

int main(int argc, char **argv)
{
	return run(argc, argv);
}
