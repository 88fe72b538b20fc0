/*
 * testutil.c: what the check suites share beyond RV_TEST_MAIN (testutil.h):
 * a Suite built from a list of tests, a test that cannot run here saying
 * so in one line tests/run.sh counts, and the small tools of tests and
 * benchmarks alike (rm -rf, a median).
 *
 * Called from a test (check's forked child), never from a suite's parent
 * before the tests fork: under CI=true it fails the test.
 */
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

void rv_test_skip(const char *fn, bool ci_installs, const char *fmt, ...)
{
	char why[512], line[700];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	/* START_TEST(name) defines name_fn */
	size_t n = strlen(fn);
	if (n > 3 && !strcmp(fn + n - 3, "_fn"))
		n -= 3;
	const char *ci = getenv("CI");
	if (ci_installs && ci && !strcmp(ci, "true"))
		ck_abort_msg("CI=true installs what %.*s needs, but: %s", (int)n, fn, why);
	int len = snprintf(line, sizeof(line), "SKIP: %.*s: %s\n", (int)n, fn, why);
	if (len >= (int)sizeof(line)) {
		len = (int)sizeof(line) - 1;
		line[len - 1] = '\n';
	}
	/* One write, after what the test printed before, so that the line is
	 * whole in the log whatever else writes to it. */
	fflush(stdout);
	fflush(stderr);
	if (write(STDOUT_FILENO, line, (size_t)len) < 0)
		perror("rv_test_skip");
}

TCase *rv_test_tcase_new(const char *name, double timeout_s, const TTest *const *tests, size_t n)
{
	TCase *tc = tcase_create(name);
	if (timeout_s > 0)
		tcase_set_timeout(tc, timeout_s);
	for (size_t i = 0; i < n; i++)
		tcase_add_test(tc, tests[i]);
	return tc;
}

Suite *rv_test_suite_new(const char *name, TCase *const *tcs, size_t n)
{
	Suite *s = suite_create(name);
	for (size_t i = 0; i < n; i++)
		suite_add_tcase(s, tcs[i]);
	return s;
}

static int testutil_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void rv_test_rm_rf(const char *dir)
{
	nftw(dir, testutil_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int testutil_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

void rv_test_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_msg(f, "could not write %s", path);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

void rv_test_self_exe(char *out, size_t size)
{
	ssize_t k = readlink("/proc/self/exe", out, size - 1);
	ck_assert_int_gt(k, 0);
	out[k] = 0;
}

int rv_test_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}

void rv_test_put(const char *dir, const char *name, const char *text)
{
	char cmd[1200];
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
	ck_assert_msg(system(cmd) == 0, "could not make %s", dir);
	char path[1100];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	rv_test_write_file(path, text);
}

void rv_test_cgtree_make(struct rv_test_cgtree *t)
{
	snprintf(t->root, sizeof(t->root), "/tmp/rv-cgroup-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(t->root));
	snprintf(t->parent, sizeof(t->parent), "%s/job", t->root);
	snprintf(t->node, sizeof(t->node), "%s/job/node", t->root);
	ck_assert_int_eq(mkdir(t->parent, 0755), 0);
	ck_assert_int_eq(mkdir(t->node, 0755), 0);
	rv_test_put(t->parent, "cpu.max", "150000 100000\n");
	rv_test_put(t->node, "cpu.max", "max 100000\n");
}

TCase *rv_test_tcase_fixture(TCase *tc, void (*setup)(void), void (*teardown)(void))
{
	if (setup || teardown)
		tcase_add_checked_fixture(tc, setup, teardown);
	return tc;
}

double rv_test_median(const double *v, int n)
{
	double *s = n > 0 ? malloc((size_t)n * sizeof(*s)) : NULL;
	if (!s)
		return 0;
	memcpy(s, v, (size_t)n * sizeof(*s));
	qsort(s, (size_t)n, sizeof(*s), testutil_cmp_double);
	double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	free(s);
	return m;
}
