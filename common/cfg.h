/*
 * cfg.h: table-driven configuration.
 *
 * One table per daemon lists every key: section, name, type, offset into the
 * daemon's config struct, default, bounds, flags and help.  The same table
 * drives parsing, bounds checks, --help, the conf/ file and the effective
 * config the daemon logs at start.  Order: default < INI file (--config FILE) <
 * environment ROVER_<SECTION>_<KEY> < command line (--flag VALUE|--flag=VALUE).
 * Not thread-safe; call from main before threads start.
 */
#ifndef RV_CFG_H
#define RV_CFG_H

#include <stddef.h>
#include <stdio.h>

#include "err.h"

enum rv_cfg_type { RV_CFG_STR, RV_CFG_INT, RV_CFG_DOUBLE, RV_CFG_BOOL };
enum { RV_CFG_SECRET = 1 << 0 };

struct rv_cfg_opt {
	const char *section;   /* "server" */
	const char *key;       /* "listen" -> env ROVER_SERVER_LISTEN, flag --server-listen */
	const char *flag;      /* short alias flag without dashes ("listen"), or NULL */
	enum rv_cfg_type type;
	size_t offset;         /* into the config struct */
	size_t size;           /* RV_CFG_STR: buffer size (char[size]) */
	const char *def;       /* default as text */
	double min, max;       /* bounds for INT/DOUBLE */
	int flags;             /* RV_CFG_SECRET: masked in logs */
	const char *help;
};

/* One row of a table over the config struct st (a type, "struct brain_cfg"):
 * field is the member the key fills. */
#define RV_CFG_OPT(st, sec, key, flag, type, field, def, min, max, fl, help)                       \
	{                                                                                          \
		sec, key, flag, type, offsetof(st, field), sizeof(((st *)0)->field), def, min,     \
			max, fl, help                                                              \
	}

/* Storage types: RV_CFG_STR char[size], RV_CFG_INT long long, RV_CFG_DOUBLE double,
 * RV_CFG_BOOL int (0/1). */

enum { RV_CFG_LOADED = 0, RV_CFG_HELP = 1, RV_CFG_VERSION = 2 };

/* Fill base from the table and the sources above.  argv is scanned for
 * --config FILE, --help and --version too.  Returns RV_CFG_LOADED,
 * RV_CFG_HELP / RV_CFG_VERSION (caller prints and exits 0), or a negative errno
 * with err naming the file, line and key, the variable or the flag. */
int rv_cfg_load(const struct rv_cfg_opt *opts, int nopts, void *base, int argc,
		char *const *argv, struct rv_err *err);

/* Print --help text: usage line, summary, then every option with its flag,
 * env variable, default and help. */
void rv_cfg_print_help(const struct rv_cfg_opt *opts, int nopts, FILE *out, const char *usage,
		       const char *summary);

/* Print the conf file for the table: every key with its default, commented. */
void rv_cfg_print_conf(const struct rv_cfg_opt *opts, int nopts, FILE *out, const char *title);

/* The effective config as logfmt pairs for the caller to log once at start:
 * `section.key="value" ...` in table order, secrets set shown as "***".
 * Returns a malloc'd string (free()), NULL when out of memory. */
char *rv_cfg_effective(const struct rv_cfg_opt *opts, int nopts, const void *base);

#endif
