/*
 * daemon.c: start and stop steps the daemons' main.c share (see daemon.h).
 */
#include "daemon.h"

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* The log level string of cfg: the table's "log" "level" key, or NULL. */
static const char *log_level_of(const struct rv_daemon *d, const void *cfg)
{
	for (int i = 0; i < d->nopts; i++)
		if (d->opts[i].type == RV_CFG_STR && !strcmp(d->opts[i].section, "log") &&
		    !strcmp(d->opts[i].key, "level"))
			return (const char *)cfg + d->opts[i].offset;
	return NULL;
}

int rv_daemon_configure(const struct rv_daemon *d, void *cfg, int argc, char **argv)
{
	struct rv_err err = { 0 };
	int rc = rv_cfg_load(d->opts, d->nopts, cfg, argc, argv, &err);
	if (rc == RV_CFG_HELP) {
		rv_cfg_print_help(d->opts, d->nopts, stdout, d->usage, d->summary);
		return 0;
	}
	if (rc == RV_CFG_VERSION) {
		printf("%s %s\n", d->name, d->version);
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--print-conf")) {
			char title[128];
			snprintf(title, sizeof(title), "%s.conf", d->name);
			rv_cfg_print_conf(d->opts, d->nopts, stdout, title);
			return 0;
		}
	}
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", d->name, err.msg);
		return rc;
	}
	const char *s = log_level_of(d, cfg);
	enum rv_log_level level = RV_LOG_INFO;
	if (s && rv_log_level_parse(s, &level) < 0) {
		fprintf(stderr, "%s: log.level: must be debug, info, warn or error\n", d->name);
		return -EINVAL;
	}
	rv_log_setup(d->comp, level);
	return 1;
}

void *rv_daemon_new(const struct rv_daemon *d, size_t size, size_t cfg_off, int argc, char **argv,
		    int *rc)
{
	char *state = calloc(1, size);
	if (!state) {
		*rc = -ENOMEM;
		return NULL;
	}
	*rc = rv_daemon_configure(d, state + cfg_off, argc, argv);
	if (*rc <= 0) {
		free(state);
		return NULL;
	}
	return state;
}

void rv_daemon_log_config(const struct rv_daemon *d, const void *cfg)
{
	char *effective = rv_cfg_effective(d->opts, d->nopts, cfg);
	rv_log_info("effective config", "%s", effective ? effective : "");
	free(effective);
}

void rv_daemon_block_signals(sigset_t *sigs)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int rv_daemon_wait(const sigset_t *sigs)
{
	int sig;
	do {
		sig = sigwaitinfo(sigs, NULL);
	} while (sig < 0);
	return sig;
}

void rv_daemon_print_listening(const char *listen, int port)
{
	const char *colon = strrchr(listen, ':');
	int hlen = colon ? (int)(colon - listen) : (int)strlen(listen);
	printf("listening on http://%.*s:%d\n", hlen, listen, port);
	fflush(stdout);
}

int rv_daemon_read_token(const char *path, const char *key, char *out, size_t size,
			 struct rv_err *err)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return rv_err_set(err, -errno, key, "could not open \"%s\": %s", path,
				  strerror(errno));
	char line[4096];
	bool got = fgets(line, sizeof(line), f) != NULL;
	fclose(f);
	size_t n = got ? strcspn(line, "\r\n") : 0;
	while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t'))
		n--;
	if (n >= size || (got && n == strlen(line) && n == sizeof(line) - 1))
		return rv_err_set(err, -EINVAL, key, "token in \"%s\" is longer than %zu bytes",
				  path, size - 1);
	if (n == 0)
		return rv_err_set(err, -EINVAL, key, "no token in \"%s\"", path);
	memcpy(out, line, n);
	out[n] = '\0';
	return 0;
}
