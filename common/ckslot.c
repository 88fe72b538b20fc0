/*
 * ckslot.c: the flash checkpoint's slot format and storage layout
 * (ckslot.h).
 */
#include "ckslot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "crc32c.h"
#include "json.h"

#define COPY_CHUNK (4u << 20) /* written and checksummed per write() */

uint64_t rv_ckslot_align(uint64_t n)
{
	return (n + RV_CKSLOT_ALIGN - 1) & ~(uint64_t)(RV_CKSLOT_ALIGN - 1);
}

void rv_ckslot_job_name(char *out, size_t size, const char *job)
{
	size_t i = 0;
	for (; job[i] && i + 1 < size; i++) {
		char c = job[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
		out[i] = ok ? c : '_';
	}
	out[i] = '\0';
}

void rv_ckslot_name(char *out, size_t size, const char *job, int rank, int s)
{
	char safe[128];
	rv_ckslot_job_name(safe, sizeof(safe), job);
	snprintf(out, size, "/rover-%s-%d-%d", safe, rank, s);
}

uint32_t rv_ckslot_hdr_crc(const struct rv_ckslot_hdr *h)
{
	return rv_crc32c(0, h, offsetof(struct rv_ckslot_hdr, hcrc));
}

const struct rv_ckslot_hdr *rv_ckslot_committed(const void *map, uint64_t size)
{
	if (!map || size < RV_CKSLOT_HEADER)
		return NULL;
	const struct rv_ckslot_hdr *h = map;
	if (atomic_load_explicit(&h->committed, memory_order_acquire) != RV_CKSLOT_COMMITTED)
		return NULL;
	if (h->magic != RV_CKSLOT_MAGIC || h->version != RV_CKSLOT_VERSION ||
	    h->nbufs > RV_CKSLOT_MAX_BUFS || h->payload > size - RV_CKSLOT_HEADER ||
	    rv_ckslot_hdr_crc(h) != h->hcrc)
		return NULL;
	return h;
}

bool rv_ckslot_payload_ok(const struct rv_ckslot_hdr *h)
{
	const unsigned char *p = (const unsigned char *)h + RV_CKSLOT_HEADER;
	uint64_t left = h->payload;
	uint32_t crc = 0;
	for (uint32_t i = 0; i < h->nbufs; i++) {
		if (rv_ckslot_align(h->sizes[i]) > left)
			return false;
		crc = rv_crc32c(crc, p, h->sizes[i]);
		p += rv_ckslot_align(h->sizes[i]);
		left -= rv_ckslot_align(h->sizes[i]);
	}
	return crc == h->crc;
}

static int write_all(int fd, const void *p, size_t n, off_t off)
{
	const unsigned char *b = p;
	while (n) {
		ssize_t k = pwrite(fd, b, n, off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		b += k;
		n -= (size_t)k;
		off += k;
	}
	return 0;
}

/* rv_ckslot_copy with h (a header's room) and chunk (COPY_CHUNK bytes)
 * the caller's. */
static int copy_with(int fd, const void *map, uint64_t size, struct rv_ckslot_hdr *h,
		     unsigned char *chunk, int64_t *step, struct rv_err *err)
{
	/* the header as it is now: the writer may start over this slot at any
	 * time, so everything is checked against this copy */
	if (!rv_ckslot_committed(map, size))
		return rv_err_set(err, -EAGAIN, "", "the slot is not committed");
	memcpy(h, map, RV_CKSLOT_HEADER);
	uint32_t hcrc0 = h->hcrc;
	if (atomic_load_explicit(&h->committed, memory_order_relaxed) != RV_CKSLOT_COMMITTED ||
	    rv_ckslot_hdr_crc(h) != h->hcrc || h->payload > size - RV_CKSLOT_HEADER ||
	    h->nbufs > RV_CKSLOT_MAX_BUFS)
		return rv_err_set(err, -EAGAIN, "", "the slot changed while it was read");
	int rc = write_all(fd, h, RV_CKSLOT_HEADER, 0);
	if (rc < 0)
		return rv_err_set(err, rc, "", "could not write the checkpoint: %s", strerror(-rc));
	/* the payload, buffer by buffer (the CRC skips the padding), through a
	 * private copy so what is checked is what was written */
	const unsigned char *src = (const unsigned char *)map + RV_CKSLOT_HEADER;
	off_t off = RV_CKSLOT_HEADER;
	uint32_t crc = 0;
	for (uint32_t i = 0; i < h->nbufs; i++) {
		uint64_t n = rv_ckslot_align(h->sizes[i]);
		if (off - RV_CKSLOT_HEADER + n > h->payload)
			return rv_err_set(err, -EAGAIN, "", "the slot's sizes exceed its payload");
		for (uint64_t done = 0; done < n;) {
			size_t len = n - done < COPY_CHUNK ? (size_t)(n - done) : COPY_CHUNK;
			memcpy(chunk, src + done, len);
			uint64_t data = h->sizes[i] > done ? h->sizes[i] - done : 0;
			crc = rv_crc32c(crc, chunk, data < len ? (size_t)data : len);
			if ((rc = write_all(fd, chunk, len, off)) < 0)
				return rv_err_set(err, rc, "", "could not write the checkpoint: %s",
						  strerror(-rc));
			done += len;
			off += (off_t)len;
		}
		src += n;
	}
	const struct rv_ckslot_hdr *live = map;
	if (crc != h->crc ||
	    atomic_load_explicit(&live->committed, memory_order_acquire) != RV_CKSLOT_COMMITTED ||
	    live->hcrc != hcrc0 || live->seq != h->seq)
		return rv_err_set(err, -EAGAIN, "", "the slot was overwritten during the copy");
	*step = h->step;
	return 0;
}

int rv_ckslot_copy(int fd, const void *map, uint64_t size, int64_t *step, struct rv_err *err)
{
	struct rv_ckslot_hdr *h = malloc(RV_CKSLOT_HEADER);
	unsigned char *chunk = malloc(COPY_CHUNK);
	int rc = h && chunk ? copy_with(fd, map, size, h, chunk, step, err)
			    : rv_err_set(err, -ENOMEM, "", "out of memory");
	free(h);
	free(chunk);
	return rc;
}

void rv_ckslot_step_dir(char *out, size_t size, const char *dir, int64_t step)
{
	snprintf(out, size, "%s/step-%lld", dir, (long long)step);
}

void rv_ckslot_file(char *out, size_t size, const char *dir, int64_t step, int rank)
{
	snprintf(out, size, "%s/step-%lld/rank-%d.ckpt", dir, (long long)step, rank);
}

int rv_ckslot_manifest_read(const char *dir, int64_t *steps, int max, struct rv_err *err)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, RV_CKSLOT_MANIFEST);
	RV_CLEANUP_CLOSE int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0
				       : rv_err_set(err, -errno, path, "could not open %s: %s",
						    path, strerror(errno));
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof(buf));
	if (n < 0 || n == (ssize_t)sizeof(buf))
		return rv_err_set(err, n < 0 ? -errno : -EFBIG, path, "could not read %s", path);
	RV_CLEANUP_CJSON cJSON *root = rv_json_parse(buf, (size_t)n, err);
	if (!root)
		return -EINVAL;
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "steps");
	if (!cJSON_IsArray(arr))
		return rv_err_set(err, -EINVAL, "steps", "%s has no \"steps\" array", path);
	int k = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, arr)
	{
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(e, "step");
		if (!cJSON_IsNumber(s) || s->valuedouble < 0)
			return rv_err_set(err, -EINVAL, "steps", "%s: a step is not a number",
					  path);
		if (k < max)
			steps[k++] = (int64_t)s->valuedouble;
	}
	return k;
}
