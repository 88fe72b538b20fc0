/*
 * main.c: rover-run's entry point: parse torchrun's command line
 * (flags.c; exit 2 on a bad one), set up logging (ROVER_LOG_LEVEL), put
 * the job in a PID namespace of its own (pidns.c), and run the job (run.c),
 * whose result is the exit code.
 */
#include <stdio.h>
#include <stdlib.h>

#include "flags.h"
#include "log.h"
#include "pidns.h"
#include "run.h"
#include "version.h"

int main(int argc, char **argv)
{
	struct flags f;
	struct rv_err err = { 0 };
	flags_init(&f);
	int rc = flags_parse(&f, argc, argv, &err);
	if (rc == 1) {
		flags_print_help(stdout);
		return 0;
	}
	if (rc == 2) {
		printf("rover-run %s\n", ROVER_VERSION);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, "rover-run: %s\n", err.msg);
		return RUN_EXIT_USAGE;
	}
	enum rv_log_level level = RV_LOG_INFO;
	const char *lv = getenv("ROVER_LOG_LEVEL");
	if (lv && rv_log_level_parse(lv, &level) < 0) {
		fprintf(stderr,
			"rover-run: ROVER_LOG_LEVEL \"%s\" must be debug, info, warn or "
			"error\n",
			lv);
		return RUN_EXIT_USAGE;
	}
	rv_log_setup("run", level);
	/* the job runs in a PID namespace, below this process when one could
	 * be made (pidns.h) */
	int code;
	if (pidns_run(argv, &f.pid, &code) == 0)
		return code;
	if (f.standalone_dropped_endpoint)
		rv_log_warn("--standalone starts its own master: --rdzv-endpoint ignored",
			    "flag=%s", "--rdzv-endpoint");
	return run_job(&f);
}
