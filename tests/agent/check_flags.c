/*
 * check_flags.c: rover-run's command line (agent/flags.c): torchrun's
 * spellings (dashes and underscores, --flag=value and --flag value, short
 * flags), the script and its arguments, and every bad value refused with
 * the flag named.
 */
#include <stdlib.h>
#include <string.h>

#include "flags.h"
#include "testutil.h"

/* Parse the NULL-terminated args after "rover-run" into *f. */
static int parse_v(struct flags *f, struct rv_err *err, const char *const *args)
{
	static char *argv[64];
	int argc = 0;
	argv[argc++] = (char *)"rover-run";
	while (*args)
		argv[argc++] = (char *)*args++;
	argv[argc] = NULL;
	flags_init(f);
	rv_err_clear(err);
	return flags_parse(f, argc, argv, err);
}
#define PARSE(f, err, ...) parse_v(f, err, (const char *const[]){ __VA_ARGS__, NULL })

START_TEST(test_defaults)
{
	struct flags f;
	struct rv_err err;
	ck_assert_int_eq(PARSE(&f, &err, "train.py"), 0);
	ck_assert_int_eq(f.nnodes_min, 1);
	ck_assert_int_eq(f.nnodes_max, 1);
	ck_assert_int_eq(f.nproc_kind, FLAGS_NPROC_N);
	ck_assert_int_eq(f.nproc, 1);
	ck_assert_int_eq(f.max_restarts, 0);
	ck_assert_str_eq(f.rdzv_id, "none");
	ck_assert_str_eq(f.role, "default");
	ck_assert_str_eq(f.script, "train.py");
	ck_assert_int_eq(f.nscript_args, 0);
	ck_assert(!f.standalone && !f.module && !f.no_python && !f.no_warm);
	ck_assert(f.hang_timeout_s > 60);
	ck_assert_int_eq(f.rdzv_join_timeout_s, 600);
	ck_assert_int_eq(f.rdzv_master_timeout_s, 30);
	/* not given: the store is node 0's, on a port picked each round */
	ck_assert_int_eq(f.node_rank, -1);
	ck_assert_str_eq(f.master_addr, "");
	ck_assert_int_eq(f.master_port, 0);
	ck_assert(!f.nproc_given);
	ck_assert(f.monitor_interval > 4.9 && f.monitor_interval < 5.1);
}
END_TEST

START_TEST(test_both_spellings)
{
	struct flags f;
	struct rv_err err;
	ck_assert_int_eq(PARSE(&f, &err, "--nproc-per-node", "4", "x.py"), 0);
	ck_assert_int_eq(f.nproc, 4);
	ck_assert_int_eq(PARSE(&f, &err, "--nproc_per_node=3", "x.py"), 0);
	ck_assert_int_eq(f.nproc, 3);
	ck_assert_int_eq(PARSE(&f, &err, "--nproc_per_node", "auto", "x.py"), 0);
	ck_assert_int_eq(f.nproc_kind, FLAGS_NPROC_AUTO);
	ck_assert_int_eq(PARSE(&f, &err, "--nproc-per-node=cpu", "x.py"), 0);
	ck_assert_int_eq(f.nproc_kind, FLAGS_NPROC_CPU);
	ck_assert_int_eq(PARSE(&f, &err, "--nproc-per-node=gpu", "x.py"), 0);
	ck_assert_int_eq(f.nproc_kind, FLAGS_NPROC_GPU);
	ck_assert_int_eq(PARSE(&f, &err, "--max_restarts=7", "--max-restarts", "8", "x.py"), 0);
	ck_assert_int_eq(f.max_restarts, 8);
	ck_assert_int_eq(PARSE(&f, &err, "--rdzv_endpoint", "10.0.0.1:7070", "--rdzv-id=j1",
			       "--rdzv_backend=c10d", "x.py"),
			 0);
	ck_assert_str_eq(f.rdzv_endpoint, "10.0.0.1:7070");
	ck_assert_str_eq(f.rdzv_id, "j1");
	ck_assert_str_eq(f.rdzv_backend, "c10d");
}
END_TEST

START_TEST(test_every_flag)
{
	struct flags f;
	struct rv_err err;
	int rc = PARSE(&f, &err, "--nnodes=2:4", "--nproc-per-node", "2", "--rdzv-backend",
		       "dlrover-master", "--rdzv-endpoint", "h:1", "--rdzv-id", "job7",
		       "--rdzv-conf",
		       "join_timeout=30,last_call_timeout=1,master_timeout=7,netcheck_mb=64",
		       "--max-restarts", "3", "--monitor-interval", "0.1", "--start-method", "fork",
		       "--role", "trainer", "--log-dir", "/tmp/l", "-r", "3", "-t", "0:1,1:2",
		       "--node-rank", "1", "--master-addr", "h2", "--master-port", "1234",
		       "--local-addr", "h3", "--network-check", "--node-unit", "2", "--auto-config",
		       "--exclude-straggler", "--save-at-breakpoint", "--accelerator", "ascend-npu",
		       "--hang-timeout", "5", "--ckpt-dir", "/tmp/ck", "--ckpt-keep", "5",
		       "--no-python", "--no-warm", "--run-path", "prog", "--lr", "0.1");
	ck_assert_msg(rc == 0, "%s", err.msg);
	ck_assert_int_eq(f.nnodes_min, 2);
	ck_assert_int_eq(f.nnodes_max, 4);
	ck_assert_int_eq(f.rdzv_join_timeout_s, 30);
	ck_assert_int_eq(f.rdzv_master_timeout_s, 7);
	ck_assert_int_eq(f.netcheck_mb, 64);
	char v[16];
	ck_assert_str_eq(flags_rdzv_conf_get(&f, "last_call_timeout", v, sizeof(v)), "1");
	ck_assert_ptr_null(flags_rdzv_conf_get(&f, "nope", v, sizeof(v)));
	ck_assert_int_eq(f.max_restarts, 3);
	ck_assert(f.monitor_interval > 0.09 && f.monitor_interval < 0.11);
	ck_assert_str_eq(f.start_method, "fork");
	ck_assert_str_eq(f.role, "trainer");
	ck_assert_str_eq(f.log_dir, "/tmp/l");
	ck_assert_int_eq(flags_std_mask(&f.redirects, 5), 3);
	ck_assert_int_eq(flags_std_mask(&f.tee, 0), 1);
	ck_assert_int_eq(flags_std_mask(&f.tee, 1), 2);
	ck_assert_int_eq(flags_std_mask(&f.tee, 2), 0);
	ck_assert_int_eq(f.node_rank, 1);
	ck_assert_str_eq(f.master_addr, "h2");
	ck_assert_int_eq(f.master_port, 1234);
	ck_assert_str_eq(f.local_addr, "h3");
	ck_assert(f.network_check && f.auto_config && f.exclude_straggler && f.save_at_breakpoint);
	ck_assert_int_eq(f.node_unit, 2);
	ck_assert_str_eq(f.accelerator, "ascend-npu");
	ck_assert(f.hang_timeout_s > 4.9 && f.hang_timeout_s < 5.1);
	ck_assert(f.no_python && f.no_warm && f.run_path);
	ck_assert_str_eq(f.ckpt_dir, "/tmp/ck");
	ck_assert_int_eq(f.ckpt_keep, 5);
	/* the script's own flags are its own */
	ck_assert_str_eq(f.script, "prog");
	ck_assert_int_eq(f.nscript_args, 2);
	ck_assert_str_eq(f.script_args[0], "--lr");
	ck_assert_str_eq(f.script_args[1], "0.1");
}
END_TEST

START_TEST(test_script_and_module)
{
	struct flags f;
	struct rv_err err;
	ck_assert_int_eq(PARSE(&f, &err, "--standalone", "-m", "pkg.train", "--epochs", "2"), 0);
	ck_assert(f.standalone && f.module);
	ck_assert_str_eq(f.script, "pkg.train");
	ck_assert_int_eq(f.nscript_args, 2);
	/* "--" ends the flags: what follows is the script even if it looks like one */
	ck_assert_int_eq(PARSE(&f, &err, "--nnodes", "1", "--", "--weird.py", "-m"), 0);
	ck_assert_str_eq(f.script, "--weird.py");
	ck_assert_int_eq(f.nscript_args, 1);
	/* short flags glued to their value, and a switch given =false */
	ck_assert_int_eq(PARSE(&f, &err, "-r2", "-t=1", "--standalone=false", "x.py"), 0);
	ck_assert_int_eq(flags_std_mask(&f.redirects, 0), 2);
	ck_assert_int_eq(flags_std_mask(&f.tee, 0), 1);
	ck_assert(!f.standalone);
	ck_assert_int_eq(PARSE(&f, &err, "--help"), 1);
	ck_assert_int_eq(PARSE(&f, &err, "--nnodes", "2", "-h"), 1);
	ck_assert_int_eq(PARSE(&f, &err, "--version"), 2);
}
END_TEST

/* Each bad command line is refused with -EINVAL and a message naming the
 * flag (or the problem). */
static void refused(const char *want, const char *const *args)
{
	struct flags f;
	struct rv_err err;
	int rc = parse_v(&f, &err, args);
	ck_assert_msg(rc == -EINVAL, "accepted: %s ... (rc %d)", args[0], rc);
	ck_assert_msg(strstr(err.msg, want), "message \"%s\" does not name \"%s\"", err.msg, want);
}
#define REFUSED(want, ...) refused(want, (const char *const[]){ __VA_ARGS__, NULL })

/* Bad values, per flag as the user spelled it; the message names the flag. */
static const struct {
	const char *flag, *want;
	const char *values[12];
} bad_values[] = {
	{ "--nnodes", "--nnodes", { "0", "x", "2:1", ":3", "3:", "1:2:3", "1025", "-1", "", " 1" } },
	{ "--nproc_per_node", "--nproc-per-node", { "0", "1025", "GPU", "two", "", "-2", "1.5" } },
	{ "--rdzv-backend", "--rdzv-backend", { "zookeeper", "" } },
	{ "--rdzv-endpoint",
	  "--rdzv-endpoint",
	  { "host", "host:", ":80", "h:0", "h:65536", "h:x" } },
	{ "--rdzv-id", "--rdzv-id", { "a b", "", "k=v" } },
	{ "--rdzv-conf",
	  "--rdzv-conf",
	  { "k", "=v", "k=", "a=1,", "a=1,,b=2", "join_timeout=0", "join_timeout=x",
	    "master_timeout=0", "master_timeout=86401", "netcheck_mb=0", "netcheck_mb=1025",
	    "netcheck_mb=x" } },
	{ "--max-restarts", "--max-restarts", { "-1", "many", "1000001" } },
	{ "--monitor-interval", "--monitor-interval", { "-0.5", "fast", "3601" } },
	{ "--start-method", "--start-method", { "thread", "" } },
	{ "--role", "--role", { "" } },
	{ "--log-dir", "--log-dir", { "" } },
	{ "--ckpt-dir", "--ckpt-dir", { "" } },
	{ "--ckpt-keep", "--ckpt-keep", { "0", "65", "x", "-1" } },
	{ "-r", "--redirects", { "4", "-1", "x", "0:", ":1", "0:4", "0:1,", "0:1,0:2", "a:1" } },
	{ "--tee", "--tee", { "4", "-1", "x", "0:", ":1", "0:4", "0:1,", "0:1,0:2", "a:1" } },
	{ "--node-rank", "--node-rank", { "-1", "1024", "x" } },
	{ "--master-port", "--master-port", { "0", "70000" } },
	{ "--master_port", "--master-port", { "-5" } },
	{ "--master-addr", "--master-addr", { "" } },
	{ "--local-addr", "--local-addr", { "" } },
	{ "--node-unit", "--node-unit", { "0", "1025" } },
	{ "--accelerator", "--accelerator", { "tpu", "" } },
	{ "--hang-timeout", "--hang-timeout", { "0.5", "-3", "soon" } },
	{ "--local_ranks_filter",
	  "--local-ranks-filter",
	  { "", "x", "1,", ",1", "1,,2", "-1", "1024", "0:1" } },
};

START_TEST(test_bad_values)
{
	for (size_t i = 0; i < sizeof(bad_values) / sizeof(bad_values[0]); i++)
		for (const char *const *v = bad_values[i].values; *v; v++)
			REFUSED(bad_values[i].want, bad_values[i].flag, *v, "x.py");
}
END_TEST

/* Command lines wrong as a whole. */
START_TEST(test_bad_command_lines)
{
	REFUSED("unknown flag \"--nprocs\"", "--nprocs", "2", "x.py");
	REFUSED("ambiguous flag \"--n\": could be --nnodes, --nproc-per-node", "--n", "2", "x.py");
	REFUSED("ambiguous flag \"--ma\"", "--ma=1", "x.py");
	REFUSED("unknown flag \"--bogus\"", "--bogus=1", "x.py");
	REFUSED("unknown flag \"-x\"", "-x", "x.py");
	REFUSED("unknown flag \"-mfoo\"", "-mfoo", "x.py");
	REFUSED("no training script", "--nnodes", "1");
	REFUSED("no training script", "--standalone", "--");
	REFUSED("--nnodes needs a value", "--nnodes");
	REFUSED("--standalone", "--standalone=maybe", "x.py");
	REFUSED("--standalone", "--standalone", "--nnodes", "2", "x.py");
	REFUSED("--no-python", "-m", "--no-python", "x.py");
	/* stragglers are what the network check finds */
	REFUSED("--exclude-straggler needs --network-check", "--exclude-straggler", "x.py");
}
END_TEST

/* argparse, under torchrun, takes a long flag cut to a prefix only it has. */
START_TEST(test_unique_prefixes)
{
	struct flags f;
	struct rv_err err;
	ck_assert_int_eq(PARSE(&f, &err, "--nproc", "2", "--max_r=3", "--stand", "x.py"), 0);
	ck_assert_int_eq(f.nproc, 2);
	ck_assert_int_eq(f.max_restarts, 3);
	ck_assert(f.standalone);
	/* an exact name wins over the longer names it begins */
	ck_assert_int_eq(PARSE(&f, &err, "--role", "r", "x.py"), 0);
	ck_assert_str_eq(f.role, "r");
}
END_TEST

/* torchrun reads each of its flags from PET_<NAME> too (Kubeflow's
 * PyTorchJob sets them), below the command line; rover-run's own flags
 * are not read so. */
START_TEST(test_pet_environment)
{
	struct flags f;
	struct rv_err err;
	setenv("PET_NPROC_PER_NODE", "4", 1);
	setenv("PET_MAX_RESTARTS", "2", 1);
	setenv("PET_STANDALONE", "1", 1);
	setenv("PET_TEE", "3", 1);
	setenv("PET_MODULE", "0", 1);
	setenv("PET_ROLE", "", 1); /* empty: the default, as torchrun */
	setenv("PET_HANG_TIMEOUT", "7", 1);
	ck_assert_int_eq(PARSE(&f, &err, "x.py"), 0);
	ck_assert_int_eq(f.nproc, 4);
	ck_assert(f.nproc_given);
	ck_assert_int_eq(f.max_restarts, 2);
	ck_assert(f.standalone && !f.module);
	ck_assert_int_eq(f.tee.all, 3);
	ck_assert_str_eq(f.role, "default");
	ck_assert(f.hang_timeout_s > 60);
	ck_assert_int_eq(PARSE(&f, &err, "--nproc_per_node=2", "--standalone=false", "x.py"), 0);
	ck_assert_int_eq(f.nproc, 2);
	ck_assert(!f.standalone);
	setenv("PET_NNODES", "0", 1);
	REFUSED("PET_NNODES=\"0\" in the environment: --nnodes", "x.py");
	unsetenv("PET_NNODES");
	unsetenv("PET_NPROC_PER_NODE");
	unsetenv("PET_MAX_RESTARTS");
	unsetenv("PET_STANDALONE");
	unsetenv("PET_TEE");
	unsetenv("PET_MODULE");
	unsetenv("PET_ROLE");
	unsetenv("PET_HANG_TIMEOUT");
}
END_TEST

/* torchrun's --standalone replaces a --rdzv-endpoint given with it. */
START_TEST(test_standalone_drops_endpoint)
{
	struct flags f;
	struct rv_err err;
	ck_assert_int_eq(PARSE(&f, &err, "--standalone", "--rdzv_endpoint=h:1", "x.py"), 0);
	ck_assert(f.standalone && f.standalone_dropped_endpoint);
	ck_assert_str_eq(f.rdzv_endpoint, "");
}
END_TEST

START_TEST(test_local_ranks_filter)
{
	struct flags f;
	struct rv_err err;
	ck_assert_int_eq(PARSE(&f, &err, "x.py"), 0);
	ck_assert(!f.console_filter);
	ck_assert_int_eq(PARSE(&f, &err, "--local-ranks-filter", "0,2", "x.py"), 0);
	ck_assert(f.console_filter);
	ck_assert(f.console_rank[0] && !f.console_rank[1] && f.console_rank[2]);
	ck_assert_int_eq(PARSE(&f, &err, "--local_ranks_filter=1023", "x.py"), 0);
	ck_assert(f.console_rank[1023] && !f.console_rank[0]);
}
END_TEST

START_TEST(test_help_names_every_flag)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(out);
	flags_print_help(out);
	fclose(out);
	static const char *const names[] = {
		"--nnodes",
		"--nproc-per-node",
		"--rdzv-backend",
		"--rdzv-endpoint",
		"--rdzv-id",
		"--rdzv-conf",
		"--standalone",
		"--max-restarts",
		"--monitor-interval",
		"--start-method",
		"--role",
		"-m, --module",
		"--no-python",
		"--no-warm",
		"--run-path",
		"--log-dir",
		"-r, --redirects",
		"-t, --tee",
		"--node-rank",
		"--master-addr",
		"--master-port",
		"--local-addr",
		"--network-check",
		"--node-unit",
		"--auto-config",
		"--exclude-straggler",
		"--save-at-breakpoint",
		"--accelerator",
		"--hang-timeout",
		"--ckpt-dir",
		"--ckpt-keep",
		"--local-ranks-filter",
		"--version",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ck_assert_msg(strstr(text, names[i]), "--help does not explain %s", names[i]);
	free(text);
}
END_TEST

RV_TEST_MAIN_TCASE("flags", "core", 10, test_defaults, test_both_spellings, test_every_flag,
		   test_script_and_module, test_bad_values, test_bad_command_lines,
		   test_unique_prefixes, test_pet_environment, test_standalone_drops_endpoint,
		   test_local_ranks_filter, test_help_names_every_flag)
