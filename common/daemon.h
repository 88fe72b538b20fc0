/*
 * daemon.h: the start and stop steps every Rover daemon's main.c takes the
 * same way: the command line and config (--help, --version, --print-conf,
 * a bad flag said on stderr), logging set up from the log.level key,
 * SIGINT/SIGTERM blocked in every thread and taken with sigwaitinfo (no
 * handler runs in a library call), SIGPIPE ignored, and the "listening on"
 * line scripts read the port from.  rover-brain and rover-master use it;
 * call from main before any thread starts.  Writes to stdout/stderr (the
 * command line's answers), never logs.
 */
#ifndef RV_DAEMON_H
#define RV_DAEMON_H

#include <signal.h>
#include <stddef.h>

#include "cfg.h"
#include "cleanup.h"
#include "err.h"
#include "version.h"

struct rv_daemon {
	const char *name;    /* "rover-brain": --version, messages, NAME.conf */
	const char *comp;    /* "brain": comp= of every log line */
	const char *version; /* "0.1.0" */
	const struct rv_cfg_opt *opts;
	int nopts;
	const char *usage, *summary; /* --help */
};

/*
 * Load cfg (the struct d->opts describes) from argv, the environment and
 * the conf file, then set logging up from the "log" "level" key of the
 * table.  1: go on; 0: --help, --version or --print-conf answered on
 * stdout (exit 0); a negative errno: a bad command line or config, said on
 * stderr.
 */
int rv_daemon_configure(const struct rv_daemon *d, void *cfg, int argc, char **argv);

/* Rows every daemon's table carries alike (st: its config struct).  The
 * log level rv_daemon_configure sets logging from, in char log_level[]: */
#define RV_DAEMON_OPT_LOG_LEVEL(st)                                                                \
	RV_CFG_OPT(st, "log", "level", "log-level", RV_CFG_STR, log_level, "info", 0, 0, 0,        \
		   "debug, info, warn or error")
/* The bearer token of the daemon's API, in char token[], and the file
 * (char token_file[]) rv_daemon_read_token reads it from: */
#define RV_DAEMON_OPTS_SERVER_TOKEN(st)                                                            \
	RV_CFG_OPT(st, "server", "token", "token", RV_CFG_STR, token, "", 0, 0, RV_CFG_SECRET,     \
		   "bearer token every write must carry (empty: no auth)"),                        \
		RV_CFG_OPT(st, "server", "token_file", "token-file", RV_CFG_STR, token_file, "",   \
			   0, 0, 0,                                                                \
			   "file holding the bearer token (keeps it off the command line; wins "   \
			   "over token)")

/* The rv_daemon of the program name ("rover-brain") that logs as comp
 * ("brain"), its options the array opts; the version is ROVER_VERSION
 * (version.h, included here). */
#define RV_DAEMON_INIT(name_, comp_, opts_, usage_, summary_)                                      \
	{                                                                                          \
		.name = (name_), .comp = (comp_), .version = ROVER_VERSION, .opts = (opts_),       \
		.nopts = (int)RV_ARRAY_SIZE(opts_), .usage = (usage_), .summary = (summary_)       \
	}

/*
 * A daemon's state: size zeroed bytes holding at cfg_off the config struct
 * rv_daemon_configure fills.  The caller frees it.  NULL with *rc set when
 * the daemon is not to run: -ENOMEM, 0 (--help, --version or --print-conf
 * answered) or the negative errno of a bad command line or config.
 */
void *rv_daemon_new(const struct rv_daemon *d, size_t size, size_t cfg_off, int argc, char **argv,
		    int *rc);

/* Log the effective config (every key of d->opts in cfg, secrets masked)
 * once, at info. */
void rv_daemon_log_config(const struct rv_daemon *d, const void *cfg);

/* Block SIGINT and SIGTERM (into *sigs, for rv_daemon_wait) in this thread
 * and the threads it starts after; ignore SIGPIPE. */
void rv_daemon_block_signals(sigset_t *sigs);

/* Wait for one of sigs; returns its number. */
int rv_daemon_wait(const sigset_t *sigs);

/* "listening on http://HOST:PORT" on stdout, flushed; listen is the
 * configured "HOST:PORT", port the one bound. */
void rv_daemon_print_listening(const char *listen, int port);

/* A bearer token kept in a file (so it stays off the command line and out
 * of the environment): the file's first line, a trailing newline, spaces
 * and tabs dropped, into out (size bytes with the NUL).  0, or -errno
 * (could not open) / -EINVAL (empty, or too long) with *err naming key
 * ("server.token_file"). */
int rv_daemon_read_token(const char *path, const char *key, char *out, size_t size,
			 struct rv_err *err);

#endif
