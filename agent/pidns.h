/*
 * pidns.h: rover-run's job in a PID namespace of its own, so that nothing
 * the job starts outlives rover-run, however it dies.
 *
 * main() calls pidns_run() before run_job().  rover-run as started (the
 * outer stage) runs itself again as a small middle stage, which makes a
 * new PID and mount namespace (CLONE_NEWPID|CLONE_NEWNS as root, else with
 * CLONE_NEWUSER mapping our own uid and gid) and runs itself a third time:
 * that process is pid 1 of the namespace, mounts a /proc of its own (so
 * getpid(), /proc/PID and /proc/self agree for everything of the job) and
 * runs the job.  Each stage has PR_SET_PDEATHSIG SIGKILL, so a kill -9 of
 * the outer takes the middle, then pid 1, and the kernel kills every
 * process left in the namespace, a worker's setsid() child included.  The
 * outer and middle stages pass SIGINT and SIGTERM down and exit with the
 * job's code.  Where no namespace can be made, the outer runs the job
 * itself (a warning, once): workers still die with rover-run (PDEATHSIG),
 * what they started is reached only by rover-run's own stop.
 * Single-threaded callers only (unshare(CLONE_NEWUSER) requires it).
 */
#ifndef AGENT_PIDNS_H
#define AGENT_PIDNS_H

#include <sys/types.h>

/* Set to "0" in the environment: no namespace, the job runs in rover-run's
 * own process (the behaviour of a rover-run without this). */
#define PIDNS_ENV_OFF "ROVER_PIDNS"

/* Run the stage this process is.  Returns 1 when this process is to run
 * the job itself (pid 1 of the namespace, or the outer stage without one),
 * with *job_pid the pid of rover-run as its caller knows it (the outer
 * stage's, for names that must differ between rover-runs of one host);
 * 0 when the job ran below and ended, with *code rover-run's exit code
 * (the job's, or 128+N after signal N). */
int pidns_run(char **argv, pid_t *job_pid, int *code);

#endif
