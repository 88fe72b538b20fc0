/*
 * cfg.c: table-driven INI/env/flag configuration (see cfg.h).  INI files are
 * read with libinih, which (as Debian builds it) keeps parsing after an error
 * and returns the first bad line; our reader counts lines so the handler can
 * record the first bad key with its own line, and errors name file, line and
 * key.  Called from main only, before threads start.
 */
#include "cfg.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "log.h"
#include "parse.h"

static void *opt_ptr(const struct rv_cfg_opt *o, void *base)
{
	return (char *)base + o->offset;
}

static int opt_set(const struct rv_cfg_opt *o, void *base, const char *value, char *why,
		   size_t whysz)
{
	void *p = opt_ptr(o, base);
	switch (o->type) {
	case RV_CFG_STR:
		if (strlen(value) >= o->size) {
			snprintf(why, whysz, "longer than %zu characters", o->size - 1);
			return -EINVAL;
		}
		memcpy(p, value, strlen(value) + 1);
		return 0;
	case RV_CFG_INT: {
		int64_t v;
		int r = rv_parse_i64(value, (int64_t)o->min, (int64_t)o->max, &v);
		if (r == -ERANGE) {
			snprintf(why, whysz, "must be between %.0f and %.0f", o->min, o->max);
			return -EINVAL;
		}
		if (r < 0) {
			snprintf(why, whysz, "not an integer: \"%s\"", value);
			return -EINVAL;
		}
		*(long long *)p = v;
		return 0;
	}
	case RV_CFG_DOUBLE: {
		double v;
		int r = rv_parse_double(value, o->min, o->max, &v);
		if (r == -ERANGE) {
			snprintf(why, whysz, "must be between %g and %g", o->min, o->max);
			return -EINVAL;
		}
		if (r < 0) {
			snprintf(why, whysz, "not a number: \"%s\"", value);
			return -EINVAL;
		}
		*(double *)p = v;
		return 0;
	}
	case RV_CFG_BOOL: {
		bool v;
		if (rv_parse_bool(value, &v) < 0) {
			snprintf(why, whysz, "not a boolean (true/false): \"%s\"", value);
			return -EINVAL;
		}
		*(int *)p = v;
		return 0;
	}
	}
	return -EINVAL;
}

static const struct rv_cfg_opt *find_opt(const struct rv_cfg_opt *opts, int n, const char *section,
					 const char *key)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(opts[i].section, section) && !strcmp(opts[i].key, key))
			return &opts[i];
	return NULL;
}

struct ini_ctx {
	const struct rv_cfg_opt *opts;
	int n;
	void *base;
	FILE *f;
	int line;     /* lines read so far */
	int err_line; /* line of the first bad key, 0 when none */
	char key[128];
	char why[256];
};

/* ini_reader: fgets that counts lines, so the handler knows where it is. */
static char *cfg_ini_reader(char *str, int num, void *stream)
{
	struct ini_ctx *c = stream;
	char *r = fgets(str, num, c->f);
	if (r)
		c->line++;
	return r;
}

static int cfg_ini_handler(void *user, const char *section, const char *name, const char *value)
{
	struct ini_ctx *c = user;
	/* libinih goes on after an error: keep the first one only. */
	if (c->err_line)
		return 1;
	const struct rv_cfg_opt *o = find_opt(c->opts, c->n, section, name);
	int ok;
	if (!o) {
		snprintf(c->why, sizeof(c->why), "unknown key");
		ok = 0;
	} else {
		ok = opt_set(o, c->base, value, c->why, sizeof(c->why)) == 0;
	}
	if (!ok) {
		c->err_line = c->line;
		snprintf(c->key, sizeof(c->key), "%s.%s", section, name);
	}
	return ok;
}

static void env_name(const struct rv_cfg_opt *o, char *buf, size_t size)
{
	snprintf(buf, size, "ROVER_%s_%s", o->section, o->key);
	for (char *p = buf; *p; p++)
		*p = (char)(*p == '-' || *p == '.' ? '_' : toupper((unsigned char)*p));
}

static void flag_name(const struct rv_cfg_opt *o, char *buf, size_t size)
{
	snprintf(buf, size, "%s-%s", o->section, o->key);
	for (char *p = buf; *p; p++)
		if (*p == '_')
			*p = '-';
}

static const struct rv_cfg_opt *match_flag(const struct rv_cfg_opt *opts, int n, const char *name)
{
	char buf[128];
	for (int i = 0; i < n; i++) {
		if (opts[i].flag && !strcmp(opts[i].flag, name))
			return &opts[i];
		flag_name(&opts[i], buf, sizeof(buf));
		if (!strcmp(buf, name))
			return &opts[i];
	}
	return NULL;
}

int rv_cfg_load(const struct rv_cfg_opt *opts, int nopts, void *base, int argc,
		char *const *argv, struct rv_err *err)
{
	char why[256];
	const char *conf = NULL;

	for (int i = 0; i < nopts; i++) {
		if (opt_set(&opts[i], base, opts[i].def, why, sizeof(why)) < 0)
			return rv_err_set(err, -EINVAL, opts[i].key, "bad default for %s.%s: %s",
					  opts[i].section, opts[i].key, why);
	}

	/* First pass over argv: help, version, config file. */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return RV_CFG_HELP;
		if (!strcmp(argv[i], "--version"))
			return RV_CFG_VERSION;
		if (!strcmp(argv[i], "--config")) {
			if (i + 1 >= argc)
				return rv_err_set(err, -EINVAL, "--config", "option --config needs a value");
			conf = argv[++i];
		} else if (!strncmp(argv[i], "--config=", 9)) {
			conf = argv[i] + 9;
		}
	}
	if (!conf)
		conf = getenv("ROVER_CONFIG");

	if (conf && *conf) {
		struct ini_ctx c = { .opts = opts, .n = nopts, .base = base };
		c.f = fopen(conf, "re");
		if (!c.f)
			return rv_err_set(err, -errno, "--config",
					  "could not open config file \"%s\": %s", conf,
					  strerror(errno));
		int line = ini_parse_stream(cfg_ini_reader, &c, cfg_ini_handler, &c);
		fclose(c.f);
		if (line < 0)
			return rv_err_set(err, -ENOMEM, "--config", "could not read config file \"%s\"", conf);
		if (line > 0) {
			/* The first error is a bad key when the handler saw it on that
			 * line, else a line libinih could not parse. */
			if (c.err_line == line)
				return rv_err_set(err, -EINVAL, c.key, "%s:%d: %s: %s", conf, line,
						  c.key, c.why);
			return rv_err_set(err, -EINVAL, "--config", "%s:%d: syntax error", conf,
					  line);
		}
	}

	for (int i = 0; i < nopts; i++) {
		char name[128];
		env_name(&opts[i], name, sizeof(name));
		const char *v = getenv(name);
		if (v && opt_set(&opts[i], base, v, why, sizeof(why)) < 0)
			return rv_err_set(err, -EINVAL, name, "environment %s: %s", name, why);
	}

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strncmp(a, "--", 2) != 0)
			return rv_err_set(err, -EINVAL, a, "unexpected argument \"%s\" (see --help)", a);
		char name[128];
		const char *value = NULL;
		const char *eq = strchr(a + 2, '=');
		if (eq) {
			snprintf(name, sizeof(name), "%.*s", (int)(eq - a - 2), a + 2);
			value = eq + 1;
		} else {
			snprintf(name, sizeof(name), "%s", a + 2);
		}
		if (!strcmp(name, "config")) {
			if (!value)
				i++;
			continue;
		}
		const struct rv_cfg_opt *o = match_flag(opts, nopts, name);
		if (!o)
			return rv_err_set(err, -EINVAL, a, "unknown option --%s (see --help)", name);
		if (!value) {
			if (o->type == RV_CFG_BOOL && (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))) {
				value = "true";
			} else {
				if (i + 1 >= argc)
					return rv_err_set(err, -EINVAL, a, "option --%s needs a value", name);
				value = argv[++i];
			}
		}
		if (opt_set(o, base, value, why, sizeof(why)) < 0)
			return rv_err_set(err, -EINVAL, a, "option --%s: %s", name, why);
	}
	return RV_CFG_LOADED;
}

static void format_default(const struct rv_cfg_opt *o, char *buf, size_t size)
{
	snprintf(buf, size, "%s", o->def[0] ? o->def : "(empty)");
}

void rv_cfg_print_help(const struct rv_cfg_opt *opts, int nopts, FILE *out, const char *usage,
		       const char *summary)
{
	fprintf(out, "usage: %s\n\n%s\n\noptions (default < --config FILE < environment < flags):\n",
		usage, summary);
	fprintf(out, "  --config FILE    INI file ([section] key = value)\n");
	fprintf(out, "  --help           this text;  --version  print the version\n");
	for (int i = 0; i < nopts; i++) {
		const struct rv_cfg_opt *o = &opts[i];
		char flag[128], env[128], def[128];
		flag_name(o, flag, sizeof(flag));
		env_name(o, env, sizeof(env));
		format_default(o, def, sizeof(def));
		if (o->flag && strcmp(o->flag, flag) != 0)
			fprintf(out, "  --%s, --%s\n", o->flag, flag);
		else
			fprintf(out, "  --%s\n", flag);
		fprintf(out, "      %s\n      [%s] %s = %s   env %s", o->help, o->section, o->key, def, env);
		if (o->type == RV_CFG_INT)
			fprintf(out, "   range %.0f..%.0f", o->min, o->max);
		else if (o->type == RV_CFG_DOUBLE)
			fprintf(out, "   range %g..%g", o->min, o->max);
		fputc('\n', out);
	}
}

void rv_cfg_print_conf(const struct rv_cfg_opt *opts, int nopts, FILE *out, const char *title)
{
	fprintf(out, "# %s\n# Every key with its default.  Environment ROVER_<SECTION>_<KEY> and\n"
		     "# command-line flags override this file.\n", title);
	const char *section = NULL;
	for (int i = 0; i < nopts; i++) {
		const struct rv_cfg_opt *o = &opts[i];
		if (!section || strcmp(section, o->section) != 0) {
			fprintf(out, "\n[%s]\n", o->section);
			section = o->section;
		}
		fprintf(out, "# %s", o->help);
		/* %g would print 1048576 as 1.04858e+06. */
		if (o->type == RV_CFG_INT)
			fprintf(out, " (%.0f..%.0f)", o->min, o->max);
		else if (o->type == RV_CFG_DOUBLE)
			fprintf(out, " (%g..%g)", o->min, o->max);
		/* No trailing blank after an empty default. */
		fprintf(out, "\n# %s =%s%s\n", o->key, o->def[0] ? " " : "", o->def);
	}
}

char *rv_cfg_effective(const struct rv_cfg_opt *opts, int nopts, const void *base)
{
	struct rv_buf b;
	rv_buf_init(&b);
	for (int i = 0; i < nopts; i++) {
		const struct rv_cfg_opt *o = &opts[i];
		const void *p = (const char *)base + o->offset;
		char val[300], q[620];
		switch (o->type) {
		case RV_CFG_STR:
			snprintf(val, sizeof(val), "%s",
				 (o->flags & RV_CFG_SECRET) && *(const char *)p ? "***" : (const char *)p);
			break;
		case RV_CFG_INT:
			snprintf(val, sizeof(val), "%lld", *(const long long *)p);
			break;
		case RV_CFG_DOUBLE:
			snprintf(val, sizeof(val), "%g", *(const double *)p);
			break;
		case RV_CFG_BOOL:
			snprintf(val, sizeof(val), "%s", *(const int *)p ? "true" : "false");
			break;
		}
		rv_buf_printf(&b, "%s%s.%s=%s", i ? " " : "", o->section, o->key,
			      rv_log_q(q, sizeof(q), val));
	}
	return rv_buf_steal(&b);
}
