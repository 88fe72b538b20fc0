/*
 * check_pgfix.c: the PostgreSQL fixture's watchdog (rv_test_pg_reaper,
 * tests/lib/pgfix.h), which stops a test's cluster and removes its folder
 * once the test process is gone, even killed with kill -9.  It must hold
 * no descriptor of the test but its own pipe: one it kept would keep a
 * pipe of the test open (a reader waiting for EOF would hang until the
 * watchdog ends).  No PostgreSQL is started: the watchdog is given a
 * folder without a postmaster.pid.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "parse.h"
#include "pgfix.h"
#include "testutil.h"

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

START_TEST(test_reaper_removes_the_folder_of_a_killed_test)
{
	char dir[] = "/tmp/rover-reaper-test-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	int leak[2], ready[2];
	/* not close-on-exec: a fork-and-exec that closes nothing keeps it */
	ck_assert_int_eq(pipe(leak), 0);
	ck_assert_int_eq(pipe(ready), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int rc = rv_test_pg_reaper(dir, dir);
		close(leak[1]);
		char c = rc == 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(leak[1]);
	close(ready[1]);
	char c = 0;
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	ck_assert_msg(c == 'y', "rv_test_pg_reaper failed");
	/* The test process (the child) lives: its folder stays, and no one
	 * holds the other end of leak any more. */
	struct pollfd pf = { .fd = leak[0], .events = POLLIN };
	ck_assert_int_eq(poll(&pf, 1, 2000), 1);
	ck_assert_msg(pf.revents & POLLHUP, "the watchdog holds a descriptor of the test");
	ck_assert(exists(dir));
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	int64_t until = rv_mono_ms() + 10000;
	while (exists(dir) && rv_mono_ms() < until)
		usleep(20000);
	ck_assert_msg(!exists(dir), "%s not removed after its test was killed", dir);
	close(leak[0]);
	close(ready[0]);
}
END_TEST

RV_TEST_MAIN_TCASE("pgfix", "reaper", 30, test_reaper_removes_the_folder_of_a_killed_test)
