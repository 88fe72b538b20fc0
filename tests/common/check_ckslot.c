/*
 * check_ckslot.c: the flash checkpoint's slot format (common/ckslot.h) as
 * rover-run uses it to persist: a committed slot is copied and checked, a
 * slot that is not committed, whose header or buffers changed, or that is
 * overwritten during the copy (another thread writing it) is refused; the
 * manifest is read newest first; CRC32C matches its check value.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckslot.h"
#include "crc32c.h"
#include "testutil.h"

/* A committed slot image of step with two buffers (n and 100 bytes). */
static unsigned char *image(int64_t step, size_t n, size_t *size)
{
	uint64_t payload = rv_ckslot_align(n) + rv_ckslot_align(100);
	*size = RV_CKSLOT_HEADER + payload;
	unsigned char *m = calloc(1, *size);
	ck_assert_ptr_nonnull(m);
	struct rv_ckslot_hdr *h = (struct rv_ckslot_hdr *)m;
	unsigned char *p = m + RV_CKSLOT_HEADER;
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 7 + (size_t)step);
	memset(p + rv_ckslot_align(n), 0x5a, 100);
	h->magic = RV_CKSLOT_MAGIC;
	h->version = RV_CKSLOT_VERSION;
	h->nbufs = 2;
	h->seq = (uint64_t)step;
	h->step = step;
	h->payload = payload;
	h->sizes[0] = n;
	h->sizes[1] = 100;
	h->crc = rv_crc32c(rv_crc32c(0, p, n), p + rv_ckslot_align(n), 100);
	h->hcrc = rv_ckslot_hdr_crc(h);
	atomic_store(&h->committed, RV_CKSLOT_COMMITTED);
	return m;
}

static int tmpfile_fd(char *path)
{
	strcpy(path, "/tmp/check_ckslot-XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	return fd;
}

START_TEST(test_crc32c_check_value)
{
	ck_assert_uint_eq(rv_crc32c(0, "123456789", 9), 0xe3069283u);
	/* in pieces, as the copy computes it */
	uint32_t c = rv_crc32c(rv_crc32c(0, "1234", 4), "56789", 5);
	ck_assert_uint_eq(c, 0xe3069283u);
	/* long enough for the three streams */
	size_t n = 100000;
	unsigned char *b = malloc(n);
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 13);
	uint32_t whole = rv_crc32c(0, b, n), parts = 0;
	for (size_t off = 0; off < n; off += 777)
		parts = rv_crc32c(parts, b + off, n - off < 777 ? n - off : 777);
	ck_assert_uint_eq(whole, parts);
	free(b);
}
END_TEST

START_TEST(test_copy_committed)
{
	size_t size;
	unsigned char *m = image(42, 5000, &size);
	char path[64];
	int fd = tmpfile_fd(path);
	int64_t step = -1;
	struct rv_err err = { 0 };
	ck_assert_int_eq(rv_ckslot_copy(fd, m, size, &step, &err), 0);
	ck_assert_int_eq(step, 42);
	/* the file is the same image, loadable as it is */
	unsigned char *back = malloc(size);
	ck_assert_int_eq(pread(fd, back, size, 0), (ssize_t)size);
	ck_assert_int_eq(memcmp(back, m, size), 0);
	const struct rv_ckslot_hdr *h = rv_ckslot_committed(back, size);
	ck_assert_ptr_nonnull(h);
	ck_assert(rv_ckslot_payload_ok(h));
	free(back);
	close(fd);
	unlink(path);
	free(m);
}
END_TEST

START_TEST(test_refused)
{
	size_t size;
	char path[64];
	int fd = tmpfile_fd(path);
	int64_t step;
	struct rv_err err = { 0 };
	/* not committed (a writer died before its last store) */
	unsigned char *m = image(1, 3000, &size);
	struct rv_ckslot_hdr *h = (struct rv_ckslot_hdr *)m;
	atomic_store(&h->committed, 0);
	ck_assert_int_eq(rv_ckslot_copy(fd, m, size, &step, &err), -EAGAIN);
	ck_assert_ptr_null(rv_ckslot_committed(m, size));
	/* a payload byte changed after the commit */
	atomic_store(&h->committed, RV_CKSLOT_COMMITTED);
	m[RV_CKSLOT_HEADER + 10] ^= 1;
	ck_assert_int_eq(rv_ckslot_copy(fd, m, size, &step, &err), -EAGAIN);
	ck_assert(!rv_ckslot_payload_ok(h));
	m[RV_CKSLOT_HEADER + 10] ^= 1;
	/* a header field changed: its CRC */
	h->step = 2;
	ck_assert_int_eq(rv_ckslot_copy(fd, m, size, &step, &err), -EAGAIN);
	h->step = 1;
	/* a payload larger than the image */
	ck_assert_ptr_null(rv_ckslot_committed(m, RV_CKSLOT_HEADER + 64));
	ck_assert_int_eq(rv_ckslot_copy(fd, m, size, &step, &err), 0);
	close(fd);
	unlink(path);
	free(m);
}
END_TEST

/* A writer that starts a new save over the slot while it is copied. */
struct rewriter {
	unsigned char *m;
	size_t size;
	atomic_int stop;
};

static void *rewrite(void *arg)
{
	struct rewriter *w = arg;
	struct rv_ckslot_hdr *h = (struct rv_ckslot_hdr *)w->m;
	unsigned v = 0;
	while (!atomic_load(&w->stop)) {
		atomic_store(&h->committed, 0);
		memset(w->m + RV_CKSLOT_HEADER, (int)(++v & 0xff), w->size - RV_CKSLOT_HEADER);
	}
	return NULL;
}

START_TEST(test_overwritten_during_copy)
{
	size_t size;
	unsigned char *m = image(5, 64 << 20, &size);
	char path[64];
	int fd = tmpfile_fd(path);
	struct rewriter w = { .m = m, .size = size };
	/* the copy begins on a committed slot; the writer starts over it at
	 * once: what was written is not the checkpoint and is refused */
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, rewrite, &w), 0);
	int64_t step;
	struct rv_err err = { 0 };
	int rc = rv_ckslot_copy(fd, m, size, &step, &err);
	atomic_store(&w.stop, 1);
	pthread_join(th, NULL);
	ck_assert_int_eq(rc, -EAGAIN);
	close(fd);
	unlink(path);
	free(m);
}
END_TEST

START_TEST(test_manifest)
{
	char dir[] = "/tmp/check_ckslot-dir-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	int64_t steps[4];
	ck_assert_int_eq(rv_ckslot_manifest_read(dir, steps, 4, NULL), 0); /* none yet */
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, RV_CKSLOT_MANIFEST);
	rv_test_write_file(path,
			   "{\"version\":1,\"steps\":[{\"step\":30,\"ranks\":[0,1]},{\"step\":29},"
			   "{\"step\":28}]}");
	ck_assert_int_eq(rv_ckslot_manifest_read(dir, steps, 2, NULL), 2);
	ck_assert_int_eq(steps[0], 30);
	ck_assert_int_eq(steps[1], 29);
	rv_test_write_file(path, "{\"steps\":[{\"step\":\"x\"}]}");
	struct rv_err err = { 0 };
	ck_assert_int_eq(rv_ckslot_manifest_read(dir, steps, 2, &err), -EINVAL);
	unlink(path);
	rmdir(dir);
	char name[64];
	rv_ckslot_name(name, sizeof(name), "a b/c", 3, 1);
	ck_assert_str_eq(name, "/rover-a_b_c-3-1");
	rv_ckslot_file(path, sizeof(path), "/d", 12, 3);
	ck_assert_str_eq(path, "/d/step-12/rank-3.ckpt");
}
END_TEST

RV_TEST_MAIN_TCASE("ckslot", "core", 0, test_crc32c_check_value, test_copy_committed, test_refused,
		   test_overwritten_during_copy, test_manifest)
