/*
 * ckpt.c: the flash checkpoint, two POSIX shared-memory slots per rank
 * (/dev/shm/rover-<job>-<rank>-{0,1}).
 *
 * A slot is a 68 KiB header and the payload (the buffers one after the
 * other, each at a 64-byte boundary).  A save picks the slot that does not
 * hold the newest committed checkpoint, clears its committed word, copies
 * the buffers in cache-sized chunks while it checksums each chunk (CRC32C,
 * with the SSE 4.2 instruction where the CPU has it), writes the header
 * with a CRC32C of its own and, after a release fence, the committed word.
 * A load reads the committed word with acquire, checks both CRCs and takes
 * the highest sequence number: a slot whose writer died before the last
 * store, or whose bytes changed since, is never loaded.
 *
 * Pages are faulted in once (MAP_POPULATE when a slot is sized), so a save
 * is one pass of memcpy over warm pages.  Single-threaded: the handle's.
 */
#include "trainer.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define SLOT_MAGIC     0x31544b4352564f52ULL /* "ROVRCKT1" */
#define SLOT_VERSION   1u
#define SLOT_COMMITTED 0x54494d43u /* "CMIT" */
#define SLOT_HDR       ((uint64_t)RV_TRAINER_SLOT_HEADER)
#define SLOT_ALIGN     64u
#define SLOT_GROW      (2u << 20)    /* segments grow in 2 MiB steps */
#define CHUNK          (1024u << 10) /* without AVX2: copied, then checksummed from cache */

struct slot_hdr {
	uint64_t magic;
	uint32_t version, nbufs;
	uint64_t seq; /* higher: newer */
	int64_t step;
	uint64_t payload; /* bytes after the header, padding included */
	int64_t task_id, consumed;
	uint32_t crc; /* CRC32C of the buffers' bytes, in order, no padding */
	uint32_t pad;
	uint64_t sizes[RV_TRAINER_MAX_BUFS];
	uint32_t hcrc;              /* CRC32C of the header up to here */
	_Atomic uint32_t committed; /* SLOT_COMMITTED, stored last */
};
_Static_assert(sizeof(struct slot_hdr) <= SLOT_HDR, "slot header fits its page");

/* ---- CRC32C ---- */
static uint32_t crc_table[8][256];
static atomic_int crc_ready;

static void crc_init(void)
{
	if (atomic_load_explicit(&crc_ready, memory_order_acquire))
		return;
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int k = 1; k < 8; k++)
			crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^
					  crc_table[0][crc_table[k - 1][i] & 0xff];
	atomic_store_explicit(&crc_ready, 1, memory_order_release);
}

static uint32_t crc_soft(uint32_t c, const unsigned char *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
		n--;
	}
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= c;
		c = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
		    crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
		    crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
		    crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

#if defined(__x86_64__)
/* Multiply a and b in GF(2)[x] modulo the CRC32C polynomial, reflected. */
static uint32_t gf2_mul(uint32_t a, uint32_t b)
{
	uint32_t r = 0;
	for (int i = 0; i < 32; i++) {
		if (b & 0x80000000u)
			r ^= a;
		b <<= 1;
		a = a & 1 ? (a >> 1) ^ 0x82f63b78u : a >> 1;
	}
	return r;
}

/* x^(8n) mod P (reflected): what shifts a CRC over n zero bytes. */
static uint32_t gf2_shift_const(size_t n)
{
	uint32_t r = 0x80000000u, base = 0x00800000u; /* x^0, x^8 */
	for (uint64_t bits = n; bits; bits >>= 1) {
		if (bits & 1)
			r = gf2_mul(r, base);
		base = gf2_mul(base, base);
	}
	return r;
}

#define LANE 4096u
static uint32_t lane_shift; /* gf2_shift_const(LANE), set once */

/* Three independent crc32 streams over consecutive LANE-byte blocks, then
 * joined: the instruction's latency is 3 cycles, its throughput 1. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p,
							 size_t n)
{
	uint64_t c0 = c;
	while (n && ((uintptr_t)p & 7)) {
		c0 = __builtin_ia32_crc32qi((uint32_t)c0, *p++);
		n--;
	}
	while (n >= 3 * LANE) {
		uint64_t c1 = 0, c2 = 0;
		const unsigned char *q = p;
		for (size_t i = 0; i < LANE; i += 8) {
			uint64_t w0, w1, w2;
			memcpy(&w0, q + i, 8);
			memcpy(&w1, q + LANE + i, 8);
			memcpy(&w2, q + 2 * LANE + i, 8);
			c0 = __builtin_ia32_crc32di(c0, w0);
			c1 = __builtin_ia32_crc32di(c1, w1);
			c2 = __builtin_ia32_crc32di(c2, w2);
		}
		/* crc(A B) = shift(crc(A), |B|) ^ crc(B) with crc(B) started at 0 */
		c0 = gf2_mul((uint32_t)c0, lane_shift) ^ c1;
		c0 = gf2_mul((uint32_t)c0, lane_shift) ^ c2;
		p += 3 * LANE;
		n -= 3 * LANE;
	}
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c0 = __builtin_ia32_crc32di(c0, w);
		p += 8;
		n -= 8;
	}
	while (n--)
		c0 = __builtin_ia32_crc32qi((uint32_t)c0, *p++);
	return (uint32_t)c0;
}

/* Copy n bytes to dst (32-byte aligned) and return the CRC32C of them
 * continuing c (inverted form): one pass that reads the source once, feeds
 * three crc32 streams and writes with non-temporal stores, so the copy runs
 * at memory bandwidth and the destination's lines are never read. */
__attribute__((target("sse4.2,avx2"))) static uint32_t copy_crc_avx2(unsigned char *dst,
								     const unsigned char *src,
								     size_t n, uint32_t c)
{
	uint64_t c0 = c;
	while (n >= 3 * LANE) {
		uint64_t c1 = 0, c2 = 0;
		for (size_t i = 0; i < LANE; i += 32) {
			__m256i v0 = _mm256_loadu_si256((const __m256i *)(src + i));
			__m256i v1 = _mm256_loadu_si256((const __m256i *)(src + LANE + i));
			__m256i v2 = _mm256_loadu_si256((const __m256i *)(src + 2 * LANE + i));
			_mm256_stream_si256((__m256i *)(dst + i), v0);
			_mm256_stream_si256((__m256i *)(dst + LANE + i), v1);
			_mm256_stream_si256((__m256i *)(dst + 2 * LANE + i), v2);
			for (int k = 0; k < 4; k++) {
				c0 = __builtin_ia32_crc32di(c0,
							    (uint64_t)_mm256_extract_epi64(v0, 0));
				c1 = __builtin_ia32_crc32di(c1,
							    (uint64_t)_mm256_extract_epi64(v1, 0));
				c2 = __builtin_ia32_crc32di(c2,
							    (uint64_t)_mm256_extract_epi64(v2, 0));
				v0 = _mm256_permute4x64_epi64(v0, 0x39);
				v1 = _mm256_permute4x64_epi64(v1, 0x39);
				v2 = _mm256_permute4x64_epi64(v2, 0x39);
			}
		}
		c0 = gf2_mul((uint32_t)c0, lane_shift) ^ c1;
		c0 = gf2_mul((uint32_t)c0, lane_shift) ^ c2;
		src += 3 * LANE;
		dst += 3 * LANE;
		n -= 3 * LANE;
	}
	_mm_sfence();
	memcpy(dst, src, n);
	return crc_hw((uint32_t)c0, src, n);
}
#endif

/* Copy n bytes from src to dst (32-byte aligned) and CRC32C them,
 * continuing crc. */
static uint32_t copy_crc(unsigned char *dst, const unsigned char *src, size_t n, uint32_t crc)
{
#if defined(__x86_64__)
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("sse4.2")) {
		crc_init();
		if (!lane_shift)
			lane_shift = gf2_shift_const(LANE);
		return ~copy_crc_avx2(dst, src, n, ~crc);
	}
#endif
	for (size_t off = 0; off < n; off += CHUNK) {
		size_t len = n - off < CHUNK ? n - off : CHUNK;
		memcpy(dst + off, src + off, len);
		/* the source chunk is in cache now; the destination may not be */
		crc = rv_trainer_crc32c(crc, src + off, len);
	}
	return crc;
}

uint32_t rv_trainer_crc32c(uint32_t crc, const void *data, size_t n)
{
	crc_init();
	crc = ~crc;
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2")) {
		if (!lane_shift)
			lane_shift = gf2_shift_const(LANE);
		return ~crc_hw(crc, data, n);
	}
#endif
	return ~crc_soft(crc, data, n);
}

/* ---- slots ---- */
static void slot_name(char *out, size_t size, const char *job, int rank, int s)
{
	snprintf(out, size, "/rover-%s-%d-%d", job, rank, s);
}

static void slot_unmap(struct trainer_slot *sl)
{
	if (sl->map)
		munmap(sl->map, sl->mapped);
	if (sl->fd >= 0)
		close(sl->fd);
	sl->map = NULL;
	sl->mapped = 0;
	sl->fd = -1;
}

void trainer_ckpt_close(struct rv_trainer *t)
{
	slot_unmap(&t->slot[0]);
	slot_unmap(&t->slot[1]);
	t->loaded_slot = -1;
}

/* Map slot s as it is; 0, -ENOENT when it does not exist (create false). */
static int slot_open(struct rv_trainer *t, int s, bool create, struct rv_err *err)
{
	struct trainer_slot *sl = &t->slot[s];
	if (sl->fd >= 0)
		return 0;
	char name[160];
	slot_name(name, sizeof(name), t->job, t->rank, s);
	int fd = shm_open(name, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
	if (fd < 0) {
		if (errno == ENOENT && !create)
			return -ENOENT;
		return rv_err_set(err, -errno, "shm", "could not open shared memory %s: %s", name,
				  strerror(errno));
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int rc = -errno;
		close(fd);
		return rv_err_set(err, rc, "shm", "could not stat %s: %s", name, strerror(-rc));
	}
	sl->fd = fd;
	if (st.st_size >= (off_t)SLOT_HDR) {
		void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			int rc = -errno;
			slot_unmap(sl);
			return rv_err_set(err, rc, "shm", "could not map %s: %s", name,
					  strerror(-rc));
		}
		sl->map = m;
		sl->mapped = (uint64_t)st.st_size;
	}
	return 0;
}

/* Make slot s hold at least payload bytes, its pages faulted in.  The slot
 * must not be committed (its content is lost). */
static int slot_size(struct rv_trainer *t, int s, uint64_t payload, struct rv_err *err)
{
	int rc = slot_open(t, s, true, err);
	if (rc < 0)
		return rc;
	struct trainer_slot *sl = &t->slot[s];
	uint64_t need = SLOT_HDR + payload;
	if (sl->map && sl->mapped >= need)
		return 0;
	need = (need + SLOT_GROW - 1) / SLOT_GROW * SLOT_GROW;
	if (sl->map) {
		munmap(sl->map, sl->mapped);
		sl->map = NULL;
		sl->mapped = 0;
	}
	/* fallocate reserves the pages (ENOSPC now, not SIGBUS in memcpy) */
	if (ftruncate(sl->fd, (off_t)need) < 0 || (rc = posix_fallocate(sl->fd, 0, (off_t)need)))
		return rv_err_set(err, rc > 0 ? -rc : -errno, "shm",
				  "could not size the checkpoint slot to %llu bytes: %s",
				  (unsigned long long)need, strerror(rc > 0 ? rc : errno));
	void *m = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, sl->fd, 0);
	if (m == MAP_FAILED)
		return rv_err_set(err, -errno, "shm", "could not map the checkpoint slot: %s",
				  strerror(errno));
	sl->map = m;
	sl->mapped = need;
	return 0;
}

static uint32_t hdr_crc(const struct slot_hdr *h)
{
	return rv_trainer_crc32c(0, h, offsetof(struct slot_hdr, hcrc));
}

/* The header of slot s when it is committed and consistent, else NULL. */
static const struct slot_hdr *slot_committed(const struct rv_trainer *t, int s)
{
	const struct trainer_slot *sl = &t->slot[s];
	if (!sl->map)
		return NULL;
	const struct slot_hdr *h = (const struct slot_hdr *)sl->map;
	if (atomic_load_explicit(&h->committed, memory_order_acquire) != SLOT_COMMITTED)
		return NULL;
	if (h->magic != SLOT_MAGIC || h->version != SLOT_VERSION ||
	    h->nbufs > RV_TRAINER_MAX_BUFS || h->payload > sl->mapped - SLOT_HDR ||
	    hdr_crc(h) != h->hcrc)
		return NULL;
	return h;
}

static uint64_t align_up(uint64_t n)
{
	return (n + SLOT_ALIGN - 1) & ~(uint64_t)(SLOT_ALIGN - 1);
}

int rv_trainer_reserve(struct rv_trainer *t, uint64_t bytes, struct rv_err *err)
{
	uint64_t payload = bytes + (uint64_t)RV_TRAINER_MAX_BUFS * SLOT_ALIGN;
	for (int s = 0; s < 2; s++) {
		int rc = slot_open(t, s, true, err);
		if (rc < 0)
			return trainer_fail(t, err, rc);
		/* a committed slot is kept as it is: it may be the checkpoint to
		 * load (a later save into it grows it) */
		if (slot_committed(t, s))
			continue;
		if ((rc = slot_size(t, s, payload, err)) < 0)
			return trainer_fail(t, err, rc);
	}
	return 0;
}

static double secs_since(int64_t t0)
{
	return (double)(trainer_now_ns() - t0) / 1e9;
}

int rv_trainer_save(struct rv_trainer *t, int64_t step, const void *const *bufs,
		    const uint64_t *sizes, int n, struct rv_trainer_save_stats *stats,
		    struct rv_err *err)
{
	int64_t t0 = trainer_now_ns();
	struct rv_trainer_save_stats st = { .slot = -1 };
	if (n < 0 || n > RV_TRAINER_MAX_BUFS)
		return trainer_fail(t, err,
				    rv_err_set(err, -E2BIG, "n", "%d buffers, at most %d", n,
					       RV_TRAINER_MAX_BUFS));
	uint64_t payload = 0;
	for (int i = 0; i < n; i++) {
		if (sizes[i] && !bufs[i])
			return trainer_fail(t, err,
					    rv_err_set(err, -EINVAL, "bufs", "buffer %d is NULL",
						       i));
		payload += align_up(sizes[i]);
		st.bytes += sizes[i];
	}
	/* both slots as they are now (another process may have saved before) */
	int rc;
	for (int s = 0; s < 2; s++)
		if ((rc = slot_open(t, s, false, err)) < 0 && rc != -ENOENT)
			return trainer_fail(t, err, rc);
	const struct slot_hdr *h0 = slot_committed(t, 0), *h1 = slot_committed(t, 1);
	int s = !h0 ? 0 : !h1 ? 1 : h0->seq <= h1->seq ? 0 : 1;
	uint64_t seq = 1 + (h0 ? h0->seq : 0);
	if (h1 && h1->seq + 1 > seq)
		seq = h1->seq + 1;
	if (t->loaded_slot == s)
		t->loaded_slot = -1; /* its view is about to be overwritten */

	struct trainer_slot *sl = &t->slot[s];
	if (sl->map)
		atomic_store_explicit(&((struct slot_hdr *)sl->map)->committed, 0,
				      memory_order_release);
	if ((rc = slot_size(t, s, payload, err)) < 0)
		return trainer_fail(t, err, rc);
	if (!sl->map) /* mmap gave address 0: not ours to use */
		return trainer_fail(t, err,
				    rv_err_set(err, -EIO, "shm", "no checkpoint slot mapped"));
	struct slot_hdr *h = (struct slot_hdr *)sl->map;
	atomic_store_explicit(&h->committed, 0, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);

	int64_t c0 = trainer_now_ns();
	unsigned char *dst = sl->map + SLOT_HDR;
	uint32_t crc = 0;
	for (int i = 0; i < n; i++) {
		crc = copy_crc(dst, bufs[i], sizes[i], crc);
		dst += align_up(sizes[i]);
	}
	st.copy_s = secs_since(c0);

	h->magic = SLOT_MAGIC;
	h->version = SLOT_VERSION;
	h->nbufs = (uint32_t)n;
	h->seq = seq;
	h->step = step;
	h->payload = payload;
	h->task_id = t->cur.id;
	h->consumed = t->cur.id ? t->consumed : 0;
	h->crc = crc;
	h->pad = 0;
	memset(h->sizes, 0, sizeof(h->sizes));
	for (int i = 0; i < n; i++)
		h->sizes[i] = sizes[i];
	h->hcrc = hdr_crc(h);
	atomic_store_explicit(&h->committed, SLOT_COMMITTED, memory_order_release);
	st.slot = s;

	/* the data position of this step, for a restore on other ranks or after
	 * the world changed; the copy above is already safe without it */
	if (t->mc_report) {
		struct rv_ckpt_report r = {
			.step = step,
			.worker = t->rank,
			.task_id = t->cur.id,
			.consumed = t->cur.id ? t->consumed : 0,
		};
		struct rv_err rerr = { 0 };
		st.reported = rv_master_ckpt_report(t->mc_report, &r, &rerr) == 0;
		if (!st.reported)
			trainer_fail(t, &rerr, rerr.code);
	}
	st.stall_s = secs_since(t0);
	if (stats)
		*stats = st;
	return 0;
}

int rv_trainer_load(struct rv_trainer *t, int64_t *step, int *nbufs, struct rv_err *err)
{
	t->loaded_slot = -1;
	int best = -1;
	uint64_t best_seq = 0;
	for (int s = 0; s < 2; s++) {
		int rc = slot_open(t, s, false, err);
		if (rc == -ENOENT)
			continue;
		if (rc < 0)
			return trainer_fail(t, err, rc);
		const struct slot_hdr *h = slot_committed(t, s);
		if (!h)
			continue;
		const unsigned char *p = t->slot[s].map + SLOT_HDR;
		uint32_t crc = 0;
		for (uint32_t i = 0; i < h->nbufs; i++) {
			crc = rv_trainer_crc32c(crc, p, h->sizes[i]);
			p += align_up(h->sizes[i]);
		}
		if (crc != h->crc)
			continue; /* corrupted: never loaded */
		if (best < 0 || h->seq > best_seq) {
			best = s;
			best_seq = h->seq;
		}
	}
	if (best < 0)
		return 0;
	const struct slot_hdr *h = (const struct slot_hdr *)t->slot[best].map;
	t->loaded_slot = best;
	if (step)
		*step = h->step;
	if (nbufs)
		*nbufs = (int)h->nbufs;
	return 1;
}

int rv_trainer_loaded(const struct rv_trainer *t, int i, const void **data, uint64_t *size)
{
	if (t->loaded_slot < 0)
		return -ENOENT;
	const unsigned char *base = t->slot[t->loaded_slot].map;
	const struct slot_hdr *h = (const struct slot_hdr *)base;
	if (i < 0 || (uint32_t)i >= h->nbufs)
		return -ERANGE;
	const unsigned char *p = base + SLOT_HDR;
	for (int k = 0; k < i; k++)
		p += align_up(h->sizes[k]);
	*data = p;
	*size = h->sizes[i];
	return 0;
}

int rv_trainer_loaded_position(const struct rv_trainer *t, int64_t *task_id, int64_t *consumed)
{
	if (t->loaded_slot < 0)
		return -ENOENT;
	const struct slot_hdr *h = (const struct slot_hdr *)t->slot[t->loaded_slot].map;
	*task_id = h->task_id;
	*consumed = h->consumed;
	return 0;
}

int rv_trainer_unlink(const char *job, int rank)
{
	int rc = 0;
	for (int s = 0; s < 2; s++) {
		char name[160];
		slot_name(name, sizeof(name), job, rank, s);
		if (shm_unlink(name) < 0 && errno != ENOENT)
			rc = -errno;
	}
	return rc;
}
