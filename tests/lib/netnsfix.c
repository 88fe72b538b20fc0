/*
 * netnsfix.c: commands for network namespace tests (netnsfix.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "netnsfix.h"
#include "proc.h"

int rv_test_cmd(const char *const *argv, bool quiet)
{
	struct rv_buf out;
	rv_buf_init(&out);
	struct rv_proc_opts o = { .argv = argv };
	int st = 0, rc = rv_proc_run(&o, 10000, &st, &out);
	if (rc == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		rc = -EIO;
	if (rc < 0 && !quiet) {
		fprintf(stderr, "netns:");
		for (int i = 0; argv[i]; i++)
			fprintf(stderr, " %s", argv[i]);
		fprintf(stderr, ": %s\n", out.data ? out.data : strerror(-rc));
	}
	rv_buf_release(&out);
	return rc;
}

const char *rv_test_netns_skip(void)
{
	if (geteuid() != 0)
		return "not root";
	if (RV_TEST_CMD_QUIET("ip", "-V") < 0)
		return "no iproute2 (ip) on PATH";
	return NULL;
}
