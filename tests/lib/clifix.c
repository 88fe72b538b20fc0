/*
 * clifix.c: a daemon's binary as a command (clifix.h).
 */
#include "clifix.h"

#include <check.h>
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "buf.h"

void rv_test_cli_start(struct rv_proc *p, const char *daemon, const char *const *args)
{
	char exe[512];
	const char *d = getenv("ROVER_BIN_DIR");
	snprintf(exe, sizeof(exe), "%s/rover-%s", d && *d ? d : "build/bin", daemon);
	const char *argv[32] = { exe };
	int n = 1;
	for (int i = 0; args && args[i] && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	struct rv_proc_opts o = {
		.argv = argv,
		.io = { { RV_PROC_NULL }, { RV_PROC_PIPE }, { RV_PROC_PIPE } },
		.pdeathsig = SIGKILL,
	};
	int rc = rv_proc_spawn(p, &o);
	ck_assert_msg(rc == 0, "could not run %s: %s", exe, strerror(-rc));
}

char *rv_test_read_fd(int fd)
{
	struct rv_buf b;
	rv_buf_init(&b);
	char chunk[4096];
	ssize_t k;
	while ((k = read(fd, chunk, sizeof(chunk))) > 0)
		rv_buf_append(&b, chunk, (size_t)k);
	char *s = rv_buf_steal(&b);
	ck_assert_ptr_nonnull(s);
	return s;
}

int rv_test_cli_run(const char *daemon, const char *const *args, char **out, char **err)
{
	struct rv_proc p;
	rv_test_cli_start(&p, daemon, args);
	*out = rv_test_read_fd(p.fd[1]);
	*err = rv_test_read_fd(p.fd[2]);
	int st;
	ck_assert_int_eq(rv_proc_wait(&p, 20000, &st), 0);
	rv_proc_release(&p);
	ck_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

char *rv_test_cli_stdout(const char *daemon, const char *arg)
{
	char *out, *err;
	const char *a[] = { arg, NULL };
	int rc = rv_test_cli_run(daemon, a, &out, &err);
	ck_assert_msg(rc == 0, "rover-%s %s exited %d: %.1000s", daemon, arg, rc, err);
	free(err);
	return out;
}

void rv_test_cli_print_conf_matches(const char *daemon)
{
	char *out = rv_test_cli_stdout(daemon, "--print-conf");
	char path[128];
	snprintf(path, sizeof(path), "conf/rover-%s.conf", daemon);
	char *conf = rv_test_read_file(path);
	ck_assert_msg(conf, "could not read %s", path);
	ck_assert_msg(strcmp(out, conf) == 0,
		      "%s is stale: regenerate it with build/bin/rover-%s --print-conf > %s", path,
		      daemon, path);
	free(conf);
	free(out);
}

int rv_test_cli_help_has_keys(const char *daemon, const char *help)
{
	char path[128];
	snprintf(path, sizeof(path), "conf/rover-%s.conf", daemon);
	char *conf = rv_test_read_file(path);
	ck_assert_msg(conf, "could not read %s", path);
	char section[64] = "";
	int keys = 0;
	char *save = NULL;
	for (char *l = strtok_r(conf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char key[64];
		if (sscanf(l, "[%63[^]]]", section) == 1)
			continue;
		if (sscanf(l, "# %63[a-z_] =", key) != 1 || !strstr(l, " ="))
			continue;
		char flag[160], var[160];
		snprintf(flag, sizeof(flag), "--%s-%s\n", section, key);
		for (char *c = flag; *c; c++)
			*c = *c == '_' ? '-' : *c;
		ck_assert_msg(strstr(help, flag), "--help lacks %.*s", (int)strlen(flag) - 1, flag);
		snprintf(var, sizeof(var), "env ROVER_%s_%s", section, key);
		for (char *c = var + 4; *c; c++)
			*c = *c == '-' ? '_' : (char)toupper((unsigned char)*c);
		ck_assert_msg(strstr(help, var), "--help lacks %s", var);
		keys++;
	}
	free(conf);
	return keys;
}
