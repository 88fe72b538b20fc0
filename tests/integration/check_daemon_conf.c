/*
 * check_daemon_conf.c: every daemon's --help, its --print-conf and its
 * conf/rover-<daemon>.conf agree, for every daemon there is.  The daemons
 * are found, not listed: each conf/rover-*.conf names one, and each
 * rover-* binary in $ROVER_BIN_DIR must have a conf file unless it is one
 * of the programs below that take no config file.  For each: --print-conf
 * is the file byte for byte; every key of the file is in --help as a flag
 * and as its environment variable; and every environment variable --help
 * names is a key of the file (nothing documented that the file lacks).
 */
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "clifix.h"
#include "testutil.h"

/* Programs without a config file, and why. */
static const char *const no_conf[] = {
	"run",     /* torchrun's drop-in: its flags (tests/agent/check_flags.c) */
	"gpuinfo", /* a helper rover-run and the monitor run; no options */
	"sim",     /* the test simulator (tests/sim) */
};

static const char *bin_dir(void)
{
	const char *d = getenv("ROVER_BIN_DIR");
	return d && d[0] ? d : "build/bin";
}

/* "ROVER_SECTION_KEY" for each "# key = ..." line under each [section]. */
static int conf_env_names(const char *conf, char names[][96], int max)
{
	int n = 0;
	char section[48] = "";
	const char *line = conf;
	while (*line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char l[512], sec[48], key[48], eq[2];
		snprintf(l, sizeof(l), "%.*s", (int)len, line);
		line += len + (nl ? 1 : 0);
		if (sscanf(l, "[%47[^]]]", sec) == 1) {
			snprintf(section, sizeof(section), "%s", sec);
		} else if (sscanf(l, "# %47[a-z0-9_] %1[=]", key, eq) == 2 && section[0] &&
			   n < max) {
			/* 6 + 47 + 1 + 47 + 1 fits in 96 */
			if (snprintf(names[n], sizeof(names[n]), "ROVER_%s_%s", section, key) >= 96)
				continue;
			for (char *c = names[n]; *c; c++)
				*c = (char)toupper((unsigned char)*c);
			n++;
		}
	}
	return n;
}

static void check_daemon(const char *daemon)
{
	rv_test_cli_print_conf_matches(daemon);
	char path[256];
	snprintf(path, sizeof(path), "conf/rover-%s.conf", daemon);
	FILE *f = fopen(path, "r");
	ck_assert_msg(f, "could not read %s", path);
	static char conf[1 << 16];
	size_t len = fread(conf, 1, sizeof(conf) - 1, f);
	fclose(f);
	conf[len] = 0;

	char *out = NULL, *err = NULL;
	const char *a[] = { "--help", NULL };
	ck_assert_msg(rv_test_cli_run(daemon, a, &out, &err) == 0, "rover-%s --help failed",
		      daemon);
	int keys = rv_test_cli_help_has_keys(daemon, out);
	ck_assert_msg(keys > 0, "%s has no key", path);

	static char names[256][96];
	int n = conf_env_names(conf, names, 256);
	ck_assert_int_eq(n, keys);
	/* The other way: every "env ROVER_..." of --help is a key of the file. */
	for (const char *e = strstr(out, "env ROVER_"); e; e = strstr(e + 1, "env ROVER_")) {
		char env[96];
		ck_assert_int_eq(sscanf(e + 4, "%95[A-Z0-9_]", env), 1);
		bool found = false;
		for (int i = 0; i < n && !found; i++)
			found = strcmp(names[i], env) == 0;
		ck_assert_msg(found, "rover-%s --help names %s, which %s lacks", daemon, env, path);
	}
	free(out);
	free(err);
}

START_TEST(every_daemon_conf_help_agree)
{
	/* Every conf file's daemon. */
	DIR *d = opendir("conf");
	ck_assert_ptr_nonnull(d);
	int checked = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char daemon[64];
		size_t l = strlen(de->d_name);
		if (strncmp(de->d_name, "rover-", 6) != 0 || l < 12 ||
		    strcmp(de->d_name + l - 5, ".conf") != 0)
			continue;
		snprintf(daemon, sizeof(daemon), "%.*s", (int)(l - 11), de->d_name + 6);
		check_daemon(daemon);
		checked++;
	}
	closedir(d);
	ck_assert_int_ge(checked, 2); /* brain and master at least */

	/* Every daemon binary has a conf file (or takes none, said above). */
	d = opendir(bin_dir());
	ck_assert_msg(d, "no %s", bin_dir());
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "rover-", 6) != 0)
			continue;
		const char *name = de->d_name + 6;
		bool exempt = false;
		for (size_t i = 0; i < RV_ARRAY_SIZE(no_conf); i++)
			exempt |= strcmp(name, no_conf[i]) == 0;
		if (exempt)
			continue;
		char path[256];
		snprintf(path, sizeof(path), "conf/rover-%s.conf", name);
		FILE *f = fopen(path, "r");
		ck_assert_msg(f, "%s/%s has no %s (every daemon lists its keys there)", bin_dir(),
			      de->d_name, path);
		fclose(f);
	}
	closedir(d);
}
END_TEST

RV_TEST_MAIN_TCASE("daemon_conf", "conf", 60, every_daemon_conf_help_agree)
