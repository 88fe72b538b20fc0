/*
 * check_cfg.c: table-driven configuration of common/cfg.c: the order
 * default < file < environment < flags, --config FILE and --config=FILE,
 * bounds, bad values, unknown keys and flags with where they are, a missing
 * file, --help/--version, and secrets masked in the effective config text.
 * Each test runs in its own fork (CK_FORK), so setenv stays local to it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfg.h"
#include "cleanup.h"
#include "log.h"
#include "testutil.h"

struct tcfg {
	char listen[64];
	char token[32];
	long long conns;
	double ratio;
	int verbose;
	char dir[128];
};

#define OPT(sec, key, flag, type, field, def, min, max, fl, help)                                  \
	{                                                                                          \
		sec, key, flag, type, offsetof(struct tcfg, field),                                \
			sizeof(((struct tcfg *)0)->field), def, min, max, fl, help                 \
	}

static const struct rv_cfg_opt opts[] = {
	OPT("server", "listen", "listen", RV_CFG_STR, listen, "127.0.0.1:8080", 0, 0, 0, "address"),
	OPT("server", "token", "token", RV_CFG_STR, token, "", 0, 0, RV_CFG_SECRET, "token"),
	OPT("server", "max_conns", NULL, RV_CFG_INT, conns, "512", 4, 65536, 0, "connections"),
	OPT("plan", "ratio", NULL, RV_CFG_DOUBLE, ratio, "0.85", 0, 1, 0, "a ratio"),
	OPT("log", "verbose", "verbose", RV_CFG_BOOL, verbose, "false", 0, 0, 0, "more output"),
	OPT("db", "data_dir", "data-dir", RV_CFG_STR, dir, "var/brain", 0, 0, 0, "folder"),
};
#define NOPTS ((int)RV_ARRAY_SIZE(opts))

static char conf_path[64];

static const char *write_conf(const char *text)
{
	snprintf(conf_path, sizeof(conf_path), "/tmp/rover-cfg-XXXXXX");
	int fd = mkstemp(conf_path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return conf_path;
}

static void teardown(void)
{
	if (conf_path[0])
		unlink(conf_path);
	conf_path[0] = 0;
}

/* Load with argv given as a NULL-terminated list after the program name. */
static int load(struct tcfg *c, struct rv_err *err, const char *const *args)
{
	const char *argv[32] = { "rover-test" };
	int argc = 1;
	for (; args && args[argc - 1]; argc++)
		argv[argc] = args[argc - 1];
	argv[argc] = NULL;
	memset(c, 0x7f, sizeof(*c));
	rv_err_clear(err);
	return rv_cfg_load(opts, NOPTS, c, argc, (char *const *)argv, err);
}

START_TEST(test_defaults)
{
	struct tcfg c;
	struct rv_err err;
	ck_assert_int_eq(load(&c, &err, NULL), RV_CFG_LOADED);
	ck_assert_str_eq(c.listen, "127.0.0.1:8080");
	ck_assert_str_eq(c.token, "");
	ck_assert_int_eq(c.conns, 512);
	ck_assert_double_eq_tol(c.ratio, 0.85, 1e-12);
	ck_assert_int_eq(c.verbose, 0);
	ck_assert_str_eq(c.dir, "var/brain");
}
END_TEST

START_TEST(test_precedence)
{
	struct tcfg c;
	struct rv_err err;
	const char *f = write_conf("# a comment\n[server]\nlisten = 127.0.0.1:1001\n"
				   "max_conns = 100\n\n[plan]\nratio = 0.5\n");
	/* File over default. */
	const char *a1[] = { "--config", f, NULL };
	ck_assert_int_eq(load(&c, &err, a1), RV_CFG_LOADED);
	ck_assert_str_eq(c.listen, "127.0.0.1:1001");
	ck_assert_int_eq(c.conns, 100);
	ck_assert_double_eq(c.ratio, 0.5);
	ck_assert_str_eq(c.dir, "var/brain");

	/* Environment over file. */
	setenv("ROVER_SERVER_LISTEN", "127.0.0.1:1002", 1);
	setenv("ROVER_DB_DATA_DIR", "/srv/rover", 1);
	ck_assert_int_eq(load(&c, &err, a1), RV_CFG_LOADED);
	ck_assert_str_eq(c.listen, "127.0.0.1:1002");
	ck_assert_int_eq(c.conns, 100);
	ck_assert_str_eq(c.dir, "/srv/rover");

	/* Flags over environment, wherever --config stands; both flag names. */
	const char *a2[] = { "--listen", "127.0.0.1:1003", "--server-max-conns=200", "--config", f,
			     NULL };
	ck_assert_int_eq(load(&c, &err, a2), RV_CFG_LOADED);
	ck_assert_str_eq(c.listen, "127.0.0.1:1003");
	ck_assert_int_eq(c.conns, 200);
	ck_assert_double_eq(c.ratio, 0.5);
	const char *a3[] = { "--server-listen=127.0.0.1:1004", "--data-dir", "d", NULL };
	ck_assert_int_eq(load(&c, &err, a3), RV_CFG_LOADED);
	ck_assert_str_eq(c.listen, "127.0.0.1:1004");
	ck_assert_str_eq(c.dir, "d");
}
END_TEST

START_TEST(test_config_equals_form)
{
	struct tcfg c;
	struct rv_err err;
	char arg[128];
	snprintf(arg, sizeof(arg), "--config=%s", write_conf("[log]\nverbose = yes\n"));
	const char *a[] = { arg, NULL };
	ck_assert_int_eq(load(&c, &err, a), RV_CFG_LOADED);
	ck_assert_int_eq(c.verbose, 1);
}
END_TEST

START_TEST(test_config_from_env)
{
	struct tcfg c;
	struct rv_err err;
	setenv("ROVER_CONFIG", write_conf("[server]\nmax_conns = 64\n"), 1);
	ck_assert_int_eq(load(&c, &err, NULL), RV_CFG_LOADED);
	ck_assert_int_eq(c.conns, 64);
}
END_TEST

START_TEST(test_bool_flag)
{
	struct tcfg c;
	struct rv_err err;
	/* A bool flag alone means true, also when another flag follows. */
	const char *a1[] = { "--verbose", NULL };
	ck_assert_int_eq(load(&c, &err, a1), RV_CFG_LOADED);
	ck_assert_int_eq(c.verbose, 1);
	const char *a2[] = { "--verbose", "--listen", "x:1", NULL };
	ck_assert_int_eq(load(&c, &err, a2), RV_CFG_LOADED);
	ck_assert_int_eq(c.verbose, 1);
	ck_assert_str_eq(c.listen, "x:1");
	const char *a3[] = { "--verbose", "off", NULL };
	ck_assert_int_eq(load(&c, &err, a3), RV_CFG_LOADED);
	ck_assert_int_eq(c.verbose, 0);
	const char *a4[] = { "--log-verbose=on", NULL };
	ck_assert_int_eq(load(&c, &err, a4), RV_CFG_LOADED);
	ck_assert_int_eq(c.verbose, 1);
}
END_TEST

START_TEST(test_bounds)
{
	struct tcfg c;
	struct rv_err err;
	const char *ok_lo[] = { "--server-max-conns", "4", NULL };
	ck_assert_int_eq(load(&c, &err, ok_lo), RV_CFG_LOADED);
	ck_assert_int_eq(c.conns, 4);
	const char *ok_hi[] = { "--server-max-conns", "65536", NULL };
	ck_assert_int_eq(load(&c, &err, ok_hi), RV_CFG_LOADED);
	const char *lo[] = { "--server-max-conns", "3", NULL };
	ck_assert_int_eq(load(&c, &err, lo), -EINVAL);
	ck_assert_str_eq(err.msg, "option --server-max-conns: must be between 4 and 65536");
	const char *hi[] = { "--server-max-conns=65537", NULL };
	ck_assert_int_eq(load(&c, &err, hi), -EINVAL);
	const char *dbl[] = { "--plan-ratio", "1.5", NULL };
	ck_assert_int_eq(load(&c, &err, dbl), -EINVAL);
	ck_assert_str_eq(err.msg, "option --plan-ratio: must be between 0 and 1");

	setenv("ROVER_SERVER_MAX_CONNS", "1000000", 1);
	ck_assert_int_eq(load(&c, &err, NULL), -EINVAL);
	ck_assert_str_eq(err.field, "ROVER_SERVER_MAX_CONNS");
	ck_assert_ptr_nonnull(strstr(err.msg, "environment ROVER_SERVER_MAX_CONNS"));
	unsetenv("ROVER_SERVER_MAX_CONNS");

	/* A string longer than its buffer is refused, not cut. */
	char longs[100];
	memset(longs, 'x', 99);
	longs[99] = 0;
	const char *l[] = { "--listen", longs, NULL };
	ck_assert_int_eq(load(&c, &err, l), -EINVAL);
	ck_assert_str_eq(err.msg, "option --listen: longer than 63 characters");
}
END_TEST

START_TEST(test_bad_values)
{
	struct tcfg c;
	struct rv_err err;
	const char *b1[] = { "--verbose=maybe", NULL };
	ck_assert_int_eq(load(&c, &err, b1), -EINVAL);
	ck_assert_str_eq(err.msg, "option --verbose: not a boolean (true/false): \"maybe\"");
	const char *b2[] = { "--server-max-conns", "12x", NULL };
	ck_assert_int_eq(load(&c, &err, b2), -EINVAL);
	ck_assert_str_eq(err.msg, "option --server-max-conns: not an integer: \"12x\"");
	const char *b3[] = { "--plan-ratio", "half", NULL };
	ck_assert_int_eq(load(&c, &err, b3), -EINVAL);
	ck_assert_str_eq(err.msg, "option --plan-ratio: not a number: \"half\"");

	const char *f = write_conf("[server]\nlisten = a:1\n[log]\nverbose = sometimes\n");
	const char *a[] = { "--config", f, NULL };
	ck_assert_int_eq(load(&c, &err, a), -EINVAL);
	char want[256];
	snprintf(want, sizeof(want), "%s:4: log.verbose: not a boolean (true/false): \"sometimes\"",
		 f);
	ck_assert_str_eq(err.msg, want);
	ck_assert_str_eq(err.field, "log.verbose");
}
END_TEST

START_TEST(test_unknown_key_line)
{
	struct tcfg c;
	struct rv_err err;
	char want[256];
	/* The bad key and its line, even with good keys after it. */
	const char *f = write_conf("[server]\nlisten = a:1\n\n# note\nlisen = b:2\nmax_conns = 8\n"
				   "[plan]\nratio = 0.1\n");
	const char *a[] = { "--config", f, NULL };
	ck_assert_int_eq(load(&c, &err, a), -EINVAL);
	snprintf(want, sizeof(want), "%s:5: server.lisen: unknown key", f);
	ck_assert_str_eq(err.msg, want);
	ck_assert_str_eq(err.field, "server.lisen");

	/* A known key in the wrong section is unknown there. */
	teardown();
	f = write_conf("[plan]\nlisten = a:1\n");
	const char *a2[] = { "--config", f, NULL };
	ck_assert_int_eq(load(&c, &err, a2), -EINVAL);
	snprintf(want, sizeof(want), "%s:2: plan.listen: unknown key", f);
	ck_assert_str_eq(err.msg, want);

	/* Only the first of two errors is reported. */
	teardown();
	f = write_conf("[server]\nmax_conns = 1\nbogus = 2\n");
	const char *a3[] = { "--config", f, NULL };
	ck_assert_int_eq(load(&c, &err, a3), -EINVAL);
	snprintf(want, sizeof(want), "%s:2: server.max_conns: must be between 4 and 65536", f);
	ck_assert_str_eq(err.msg, want);
}
END_TEST

START_TEST(test_syntax_error_line)
{
	struct tcfg c;
	struct rv_err err;
	char want[256];
	const char *f = write_conf("[server]\nlisten = a:1\nthis line has no equals sign\n"
				   "max_conns = 8\n");
	const char *a[] = { "--config", f, NULL };
	ck_assert_int_eq(load(&c, &err, a), -EINVAL);
	/* Names the line, not a key from another line. */
	snprintf(want, sizeof(want), "%s:3: syntax error", f);
	ck_assert_str_eq(err.msg, want);
}
END_TEST

START_TEST(test_missing_file)
{
	struct tcfg c;
	struct rv_err err;
	const char *a[] = { "--config", "/nonexistent/rover.conf", NULL };
	ck_assert_int_eq(load(&c, &err, a), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "\"/nonexistent/rover.conf\""));
	const char *b[] = { "--config", NULL };
	ck_assert_int_eq(load(&c, &err, b), -EINVAL);
	ck_assert_str_eq(err.msg, "option --config needs a value");
}
END_TEST

START_TEST(test_unknown_flag)
{
	struct tcfg c;
	struct rv_err err;
	const char *a[] = { "--listen", "a:1", "--lisen", "b:2", NULL };
	ck_assert_int_eq(load(&c, &err, a), -EINVAL);
	ck_assert_str_eq(err.msg, "unknown option --lisen (see --help)");
	const char *b[] = { "stray", NULL };
	ck_assert_int_eq(load(&c, &err, b), -EINVAL);
	ck_assert_str_eq(err.msg, "unexpected argument \"stray\" (see --help)");
	const char *d[] = { "--listen", NULL };
	ck_assert_int_eq(load(&c, &err, d), -EINVAL);
	ck_assert_str_eq(err.msg, "option --listen needs a value");
}
END_TEST

START_TEST(test_help_version)
{
	struct tcfg c;
	struct rv_err err;
	const char *h[] = { "--listen", "a:1", "--help", NULL };
	ck_assert_int_eq(load(&c, &err, h), RV_CFG_HELP);
	const char *h2[] = { "-h", NULL };
	ck_assert_int_eq(load(&c, &err, h2), RV_CFG_HELP);
	const char *v[] = { "--version", NULL };
	ck_assert_int_eq(load(&c, &err, v), RV_CFG_VERSION);
	/* --help wins over a bad flag, so a user can always read the help. */
	const char *h3[] = { "--bogus", "--help", NULL };
	ck_assert_int_eq(load(&c, &err, h3), RV_CFG_HELP);
}
END_TEST

START_TEST(test_help_and_conf_text)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	rv_cfg_print_help(opts, NOPTS, f, "rover-test [--listen HOST:PORT]", "A test.");
	fclose(f);
	ck_assert_ptr_nonnull(strstr(text, "usage: rover-test [--listen HOST:PORT]\n"));
	ck_assert_ptr_nonnull(strstr(text, "  --listen, --server-listen\n"));
	ck_assert_ptr_nonnull(strstr(text, "  --server-max-conns\n"));
	ck_assert_ptr_nonnull(strstr(text, "env ROVER_SERVER_MAX_CONNS   range 4..65536\n"));
	ck_assert_ptr_nonnull(strstr(text, "[db] data_dir = var/brain   env ROVER_DB_DATA_DIR"));
	free(text);

	f = open_memstream(&text, &len);
	rv_cfg_print_conf(opts, NOPTS, f, "test.conf");
	fclose(f);
	ck_assert_ptr_nonnull(strstr(text, "\n[server]\n# address\n# listen = 127.0.0.1:8080\n"));
	ck_assert_ptr_nonnull(strstr(text, "# token =\n"));
	ck_assert_ptr_nonnull(strstr(text, "# connections (4..65536)\n# max_conns = 512\n"));
	ck_assert_ptr_nonnull(strstr(text, "\n[plan]\n# a ratio (0..1)\n# ratio = 0.85\n"));
	ck_assert_ptr_null(strstr(text, " \n"));
	free(text);

	/* The conf text, uncommented, loads back to the defaults. */
	f = open_memstream(&text, &len);
	rv_cfg_print_conf(opts, NOPTS, f, "test.conf");
	fclose(f);
	for (char *p = strstr(text, "\n# listen"); p; p = strstr(p + 1, "\n# "))
		if (strchr(p + 3, '=') && strchr(p + 3, '=') < strchr(p + 1, '\n'))
			p[1] = ' ';
	struct tcfg c;
	struct rv_err err;
	const char *a[] = { "--config", write_conf(text), NULL };
	ck_assert_msg(load(&c, &err, a) == RV_CFG_LOADED, "%s", err.msg);
	ck_assert_int_eq(c.conns, 512);
	ck_assert_str_eq(c.dir, "var/brain");
	free(text);
}
END_TEST

START_TEST(test_effective_masks_secret)
{
	struct tcfg c;
	struct rv_err err;
	const char *a[] = { "--token", "hunter2", "--listen", "h:9", NULL };
	ck_assert_int_eq(load(&c, &err, a), RV_CFG_LOADED);
	char *out = rv_cfg_effective(opts, NOPTS, &c);
	ck_assert_ptr_nonnull(out);
	ck_assert_ptr_null(strstr(out, "hunter2"));
	ck_assert_ptr_nonnull(strstr(out, " server.token=\"***\""));
	ck_assert_ptr_nonnull(strstr(out, "server.listen=\"h:9\""));
	ck_assert_ptr_nonnull(strstr(out, " server.max_conns=\"512\""));
	ck_assert_ptr_nonnull(strstr(out, " log.verbose=\"false\""));
	ck_assert_ptr_null(strchr(out, '\n'));
	free(out);
}
END_TEST

START_TEST(test_effective_empty_secret_shown_empty)
{
	/* An unset secret shows as empty, so "no auth" is visible. */
	struct tcfg c;
	struct rv_err err;
	ck_assert_int_eq(load(&c, &err, NULL), RV_CFG_LOADED);
	char *out = rv_cfg_effective(opts, NOPTS, &c);
	ck_assert_ptr_nonnull(out);
	ck_assert_ptr_nonnull(strstr(out, " server.token=\"\""));
	free(out);
}
END_TEST

START_TEST(test_effective_logs_nothing)
{
	/* common/ logs nothing above debug: the daemon logs the string. */
	struct tcfg c;
	struct rv_err err;
	ck_assert_int_eq(load(&c, &err, NULL), RV_CFG_LOADED);
	rv_log_setup("test", RV_LOG_DEBUG);
	int p[2];
	ck_assert_int_eq(pipe2(p, O_NONBLOCK), 0);
	int saved = dup(STDERR_FILENO);
	dup2(p[1], STDERR_FILENO);
	close(p[1]);
	free(rv_cfg_effective(opts, NOPTS, &c));
	dup2(saved, STDERR_FILENO);
	close(saved);
	char out[64];
	ck_assert_int_le(read(p[0], out, sizeof(out)), 0);
	close(p[0]);
}
END_TEST

static Suite *cfg_suite(void)
{
	TCase *tc_load = RV_TEST_TCASE("load", 10, test_defaults, test_precedence,
				       test_config_equals_form, test_config_from_env,
				       test_bool_flag, test_bounds, test_bad_values,
				       test_unknown_key_line, test_syntax_error_line,
				       test_missing_file, test_unknown_flag, test_help_version);
	tcase_add_checked_fixture(tc_load, NULL, teardown);
	TCase *tc_output =
		RV_TEST_TCASE("output", 10, test_help_and_conf_text, test_effective_masks_secret,
			      test_effective_empty_secret_shown_empty, test_effective_logs_nothing);
	tcase_add_checked_fixture(tc_output, NULL, teardown);
	return RV_TEST_SUITE("cfg", tc_load, tc_output);
}

RV_TEST_MAIN(cfg_suite)
