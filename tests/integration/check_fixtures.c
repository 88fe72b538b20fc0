/*
 * check_fixtures.c: the test fixtures clean up after a test process that
 * dies before its teardown.  The test runs this binary again as a stand-in
 * for a suite (ROVER_FIXTURE_CHILD=1): it starts the private cluster
 * (pgfix) and a brain with its own embedded PostgreSQL (brainfix), says
 * where both keep their data, and waits to be killed.  Killed with -9, no
 * PostgreSQL of it may remain, nor the private cluster's folder.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brainfix.h"
#include "parse.h"
#include "proc.h"
#include "testutil.h"

/* The stand-in suite: never returns. */
static int child_main(void)
{
	if (rv_test_pg_global_start() < 0)
		return 1;
	char dir[] = "/tmp/rover-fixture-brain-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	struct rv_test_brain b;
	const char *args[] = { "--data-dir", dir, NULL };
	if (rv_test_brain_start(&b, args) < 0)
		return 1;
	printf("%s %s/pgdata\n", rv_test_pg_datadir(), dir);
	fflush(stdout);
	for (;;)
		pause();
}

/* The postmaster of pgdata, 0 when none runs there. */
static pid_t postmaster_of(const char *pgdata)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/postmaster.pid", pgdata);
	char *text = rv_test_read_file(path);
	pid_t pid = text ? (pid_t)atol(text) : 0;
	free(text);
	return pid > 0 && kill(pid, 0) == 0 ? pid : 0;
}

/* pid gone (or a zombie nobody waited for) within timeout_ms. */
static bool gone_within(pid_t pid, int timeout_ms)
{
	for (int waited = 0; waited <= timeout_ms; waited += 100) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		char *st = rv_test_read_file(path);
		const char *paren = st ? strrchr(st, ')') : NULL;
		bool alive = paren && paren[1] == ' ' && paren[2] != 'Z';
		free(st);
		if (!alive)
			return true;
		usleep(100000);
	}
	return false;
}

START_TEST(test_killed_suite_leaves_no_postgres)
{
	char self[512];
	rv_test_self_exe(self, sizeof(self));
	const char *argv[] = { self, NULL };
	const char *env[] = { "ROVER_FIXTURE_CHILD=1", "CK_FORK=no", NULL };
	struct rv_proc_opts o = { .argv = argv,
				  .env = env,
				  .io = { { RV_PROC_NULL }, { RV_PROC_PIPE }, { RV_PROC_INHERIT } },
				  .pdeathsig = SIGKILL };
	struct rv_proc p;
	ck_assert_int_eq(rv_proc_spawn(&p, &o), 0);
	char line[1400] = "";
	size_t len = 0;
	while (!strchr(line, '\n') && len < sizeof(line) - 1) {
		struct pollfd pfd = { .fd = p.fd[1], .events = POLLIN };
		ck_assert_msg(poll(&pfd, 1, 60000) == 1, "the stand-in suite said nothing");
		ssize_t k = read(p.fd[1], line + len, sizeof(line) - 1 - len);
		ck_assert_msg(k > 0, "the stand-in suite exited");
		len += (size_t)k;
		line[len] = '\0';
	}
	char cluster[700], embedded[700];
	ck_assert_int_eq(sscanf(line, "%699s %699s", cluster, embedded), 2);
	pid_t pm_cluster = postmaster_of(cluster), pm_embedded = postmaster_of(embedded);
	ck_assert_msg(pm_cluster > 0, "no postmaster in %s", cluster);
	ck_assert_msg(pm_embedded > 0, "no postmaster in %s", embedded);

	ck_assert_int_eq(rv_proc_kill(&p, SIGKILL), 0);
	ck_assert_int_eq(rv_proc_wait(&p, 10000, NULL), 0);
	rv_proc_release(&p);
	ck_assert_msg(gone_within(pm_cluster, 15000), "the private cluster's postmaster %d remains",
		      (int)pm_cluster);
	ck_assert_msg(gone_within(pm_embedded, 15000), "the brain's postmaster %d remains",
		      (int)pm_embedded);
	/* The private cluster's folder goes with it. */
	struct stat st;
	for (int i = 0; i < 50 && stat(cluster, &st) == 0; i++)
		usleep(100000);
	ck_assert_msg(stat(cluster, &st) < 0 && errno == ENOENT, "%s remains", cluster);
}
END_TEST

static Suite *fixtures_suite(void)
{
	TCase *tc = RV_TEST_TCASE("fixtures", 120, test_killed_suite_leaves_no_postgres);
	return RV_TEST_SUITE("fixtures", tc);
}

int main(void)
{
	if (getenv("ROVER_FIXTURE_CHILD"))
		return child_main();
	return rv_test_run_suite(fixtures_suite());
}
