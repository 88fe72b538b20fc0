/*
 * clifix.h: run a daemon's binary as a command (rover-<daemon> from
 * $ROVER_BIN_DIR, default build/bin) and check what every daemon's command
 * line promises: --help names each key of conf/rover-<daemon>.conf, and
 * --print-conf is that file byte for byte.  Checks fail the calling test.
 */
#ifndef RV_TEST_CLIFIX_H
#define RV_TEST_CLIFIX_H

#include "proc.h"

/* Start rover-<daemon> with args (NULL-terminated, may be NULL): stdin
 * /dev/null, stdout and stderr piped (p->fd[1], p->fd[2]), SIGKILL when the
 * test dies.  The caller waits and releases p. */
void rv_test_cli_start(struct rv_proc *p, const char *daemon, const char *const *args);

/* Read fd to EOF into a malloc'd string (the fd stays open). */
char *rv_test_read_fd(int fd);

/* Run rover-<daemon> to completion (20 s at most): returns its exit code;
 * *out and *err are malloc'd (the caller frees them). */
int rv_test_cli_run(const char *daemon, const char *const *args, char **out, char **err);

/* Run rover-<daemon> with the one argument arg, which must exit 0: its
 * stdout (malloc'd; the caller frees it). */
char *rv_test_cli_stdout(const char *daemon, const char *arg);

/* rover-<daemon> --print-conf exits 0 and prints conf/rover-<daemon>.conf. */
void rv_test_cli_print_conf_matches(const char *daemon);

/* Every key of conf/rover-<daemon>.conf stands in help as a flag
 * --<section>-<key> ending its line and as "env ROVER_<SECTION>_<KEY>".
 * Returns how many keys the file has. */
int rv_test_cli_help_has_keys(const char *daemon, const char *help);

#endif
