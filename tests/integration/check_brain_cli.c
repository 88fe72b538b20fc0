/*
 * check_brain_cli.c: the rover-brain command line, run as a real process:
 * --help lists every option, --print-conf equals conf/rover-brain.conf byte
 * for byte (so the file never goes stale), --version, an unknown flag and a
 * bad config key fail with a message naming them, and the listen address
 * follows file < environment < flag (seen on the "listening on" line).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "cleanup.h"
#include "clifix.h"
#include "parse.h"
#include "testutil.h"

START_TEST(test_help)
{
	char *out = rv_test_cli_stdout("brain", "--help");
	ck_assert_ptr_nonnull(strstr(out, "usage: rover-brain "));
	static const char *const flags[] = { "--listen",  "--data-dir",   "--db",
					     "--token",   "--token-file", "--config",
					     "--version", "--log-level" };
	for (size_t i = 0; i < RV_ARRAY_SIZE(flags); i++)
		ck_assert_msg(strstr(out, flags[i]), "--help lacks %s", flags[i]);
	/* Every key of the conf file, as a flag and as an environment variable. */
	ck_assert_int_ge(rv_test_cli_help_has_keys("brain", out), 10);
	free(out);
}
END_TEST

START_TEST(test_print_conf_matches_file)
{
	rv_test_cli_print_conf_matches("brain");
}
END_TEST

/* brain/README.md's configuration table names every key of the conf file
 * (`section.key`) with its default, so the documented limits cannot drift
 * from the option table. */
START_TEST(test_readme_lists_every_key)
{
	char *conf = rv_test_read_file("conf/rover-brain.conf");
	char *readme = rv_test_read_file("brain/README.md");
	ck_assert_ptr_nonnull(conf);
	ck_assert_ptr_nonnull(readme);
	char section[64] = "";
	int keys = 0;
	char *save = NULL;
	for (char *l = strtok_r(conf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char key[64], dflt[256] = "";
		if (sscanf(l, "[%63[^]]]", section) == 1)
			continue;
		if (sscanf(l, "# %63[a-z_] = %255[^\n]", key, dflt) < 1 || !strstr(l, " ="))
			continue;
		char row[512];
		if (dflt[0])
			snprintf(row, sizeof(row), "| `%s.%s` | `%s` |", section, key, dflt);
		else
			snprintf(row, sizeof(row), "| `%s.%s` | (empty) |", section, key);
		ck_assert_msg(strstr(readme, row), "brain/README.md lacks the row %s", row);
		keys++;
	}
	ck_assert_int_ge(keys, 25);
	free(conf);
	free(readme);
}
END_TEST

START_TEST(test_version)
{
	char *out = rv_test_cli_stdout("brain", "--version");
	unsigned x, y, z;
	char nl = 0;
	ck_assert_int_eq(sscanf(out, "rover-brain %u.%u.%u%c", &x, &y, &z, &nl), 4);
	ck_assert_int_eq(nl, '\n');
	free(out);
}
END_TEST

/* brain/README.md's table of limits names every [server] and [ingest] key
 * the brain has, so the documentation cannot lose one. */
START_TEST(test_readme_names_server_keys)
{
	char *out = rv_test_cli_stdout("brain", "--print-conf");
	char *readme = rv_test_read_file("brain/README.md");
	ck_assert_ptr_nonnull(readme);
	char section[64] = "";
	int keys = 0;
	char *save = NULL;
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char key[64];
		int end = 0;
		if (sscanf(line, "[%63[^]]]", section) == 1)
			continue;
		if (sscanf(line, "# %63[a-z_] =%n", key, &end) != 1 || !end ||
		    (strcmp(section, "server") != 0 && strcmp(section, "ingest") != 0))
			continue;
		char want[160];
		snprintf(want, sizeof(want), "`%s.%s`", section, key);
		ck_assert_msg(strstr(readme, want), "brain/README.md does not name %s", want);
		keys++;
	}
	ck_assert_int_ge(keys, 10);
	free(readme);
	free(out);
}
END_TEST

START_TEST(test_unknown_flag)
{
	char *out, *err;
	const char *a[] = { "--listen", "127.0.0.1:0", "--lisen", "x", NULL };
	ck_assert_int_ne(rv_test_cli_run("brain", a, &out, &err), 0);
	ck_assert_msg(strstr(err, "--lisen"), "stderr does not name the flag: %s", err);
	ck_assert_str_eq(out, "");
	free(out);
	free(err);

	const char *b[] = { "--server-max-conns", "1", NULL };
	ck_assert_int_ne(rv_test_cli_run("brain", b, &out, &err), 0);
	ck_assert_ptr_nonnull(strstr(err, "--server-max-conns: must be between 4 and 1048576"));
	free(out);
	free(err);
}
END_TEST

START_TEST(test_logs_effective_config)
{
	/* Logged once at start by the brain, the token masked, before anything
	 * can fail (here the database). */
	char *out, *err;
	const char *a[] = { "--token",   "hunter2",         "--db", "host=/nonexistent dbname=x",
			    "--sql-dir", rv_test_sql_dir(), NULL };
	ck_assert_int_ne(rv_test_cli_run("brain", a, &out, &err), 0);
	const char *l = strstr(err, "level=info comp=brain msg=\"effective config\"");
	ck_assert_msg(l, "stderr: %s", err);
	ck_assert_ptr_nonnull(strstr(l, " server.token=\"***\""));
	ck_assert_ptr_null(strstr(err, "hunter2"));
	ck_assert_ptr_nonnull(strstr(err, "could not open the database"));
	free(out);
	free(err);
}
END_TEST

static char tmpdir[64];

static void mk_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rover-cli-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void rm_tmpdir(void)
{
	const char *argv[] = { "rm", "-rf", tmpdir, NULL };
	struct rv_proc_opts o = { .argv = argv };
	int st;
	if (tmpdir[0] && (rv_proc_run(&o, 30000, &st, NULL) < 0 || st != 0))
		fprintf(stderr, "could not remove %s\n", tmpdir);
}

START_TEST(test_bad_config_key)
{
	char path[128], want[256];
	snprintf(path, sizeof(path), "%s/brain.conf", tmpdir);
	rv_test_write_file(path,
			   "[server]\nlisten = 127.0.0.1:0\n\n[db]\npool = 4\npool_size = 4\n");
	char *out, *err;
	const char *a[] = { "--config", path, NULL };
	ck_assert_int_ne(rv_test_cli_run("brain", a, &out, &err), 0);
	snprintf(want, sizeof(want), "%s:5: db.pool: unknown key", path);
	ck_assert_msg(strstr(err, want), "stderr: %s", err);
	free(out);
	free(err);

	rv_test_write_file(path, "[server]\nmax_body_kb = lots\n");
	ck_assert_int_ne(rv_test_cli_run("brain", a, &out, &err), 0);
	snprintf(want, sizeof(want), "%s:2: server.max_body_kb: not an integer", path);
	ck_assert_msg(strstr(err, want), "stderr: %s", err);
	free(out);
	free(err);
}
END_TEST

/* A port that was free a moment ago. */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	socklen_t len = sizeof(sa);
	getsockname(fd, (struct sockaddr *)&sa, &len);
	close(fd);
	return ntohs(sa.sin_port);
}

/* Start the brain, return the port of its "listening on" line, stop it. */
static int listening_port(const char *const *args)
{
	struct rv_proc p;
	rv_test_cli_start(&p, "brain", args);
	char addr[256];
	int port = -1, st = -1;
	int rc = rv_test_proc_listening(&p, 30000, addr, sizeof(addr), &st);
	if (rc == 0 && !strncmp(addr, "127.0.0.1:", 10))
		port = atoi(addr + 10);
	if (rc != -ECHILD) {
		rv_proc_kill(&p, SIGTERM);
		ck_assert_int_eq(rv_proc_wait(&p, 20000, &st), 0);
	}
	if (port < 0) {
		char *e = rv_test_read_fd(p.fd[2]);
		fprintf(stderr, "brain stderr:\n%s\n", e);
		free(e);
	}
	rv_proc_release(&p);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "brain did not stop cleanly");
	return port;
}

START_TEST(test_listen_precedence)
{
	char db[512], path[128], listen[64];
	ck_assert_int_eq(rv_test_pg_fresh_db(0, db, sizeof(db)), 0);
	int p_file = free_port(), p_env = free_port(), p_flag = free_port();
	snprintf(path, sizeof(path), "%s/brain.conf", tmpdir);
	char text[256];
	snprintf(text, sizeof(text), "[server]\nlisten = 127.0.0.1:%d\n", p_file);
	rv_test_write_file(path, text);
	const char *a[] = { "--config", path, "--db", db, "--sql-dir", rv_test_sql_dir(), NULL };

	ck_assert_int_eq(listening_port(a), p_file);

	snprintf(listen, sizeof(listen), "127.0.0.1:%d", p_env);
	setenv("ROVER_SERVER_LISTEN", listen, 1);
	ck_assert_int_eq(listening_port(a), p_env);

	char flag[64];
	snprintf(flag, sizeof(flag), "127.0.0.1:%d", p_flag);
	const char *b[] = { "--config",        path,       "--db", db,  "--sql-dir",
			    rv_test_sql_dir(), "--listen", flag,   NULL };
	ck_assert_int_eq(listening_port(b), p_flag);
	unsetenv("ROVER_SERVER_LISTEN");
}
END_TEST

static Suite *brain_cli_suite(void)
{
	TCase *tc_cli = RV_TEST_TCASE("cli", 30, test_help, test_print_conf_matches_file,
				      test_readme_lists_every_key, test_readme_names_server_keys,
				      test_version, test_unknown_flag, test_bad_config_key,
				      test_logs_effective_config);
	tcase_add_checked_fixture(tc_cli, mk_tmpdir, rm_tmpdir);
	TCase *tc_precedence = RV_TEST_TCASE("precedence", 90, test_listen_precedence);
	tcase_add_checked_fixture(tc_precedence, mk_tmpdir, rm_tmpdir);
	return RV_TEST_SUITE("brain_cli", tc_cli, tc_precedence);
}

RV_TEST_MAIN_PG(brain_cli_suite)
