/*
 * copy.c: a save's copy of its buffers into a slot, checksummed (CRC32C)
 * in the same pass (trainer.h, trainer_copy_*; ckpt.c's saves).
 *
 * The bytes are cut into pieces of about PIECE bytes (a piece boundary
 * inside a buffer falls on a 4 KiB offset, so every destination stays
 * 32-byte aligned).  Threads take pieces in turn from an atomic counter,
 * each piece's CRC is taken from zero, and the pieces' CRCs are joined in
 * order at the end (crc(A B) = shift(crc(A), |B|) ^ crc(B)): two threads
 * share a synchronous save and a thread that was descheduled only leaves
 * its share to the other.  The copy owns its arrays; the buffers' bytes
 * are borrowed until trainer_copy_run returns.
 */
#include "trainer.h"

#include "ckslot.h"
#include "crc32c.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define PIECE (4u << 20)   /* bytes a thread takes at a time */
#define ALIGN 4096u        /* a piece starts at this offset of its buffer */
#define CHUNK (256u << 10) /* without AVX2: copied, then checksummed from cache */
#define LANE  (32u << 10)  /* AVX2: three crc32 streams over 3 x LANE bytes */

/* The raw (not inverted) CRC32C state c advanced over n bytes at p. */
static uint32_t crc_raw(uint32_t c, const unsigned char *p, size_t n)
{
	if (rv_crc32c_hw())
		return rv_crc32c_hw_raw(c, p, n);
	return ~rv_crc32c(~c, p, n);
}

#if defined(__x86_64__)
/*
 * Copy n bytes to dst (32-byte aligned) and advance the raw CRC c over
 * them, in one pass: each 32 bytes of three LANE-apart streams are loaded
 * once, their words fed to three crc32 chains from the same cache lines
 * (loaded before the stores: a load behind a store to an address 4 KiB
 * apart would wait for it), and written with non-temporal stores, so the
 * copy runs at memory bandwidth and the slot's lines are never read.
 */
__attribute__((target("sse4.2,avx2"))) static uint32_t copy_crc_avx2(unsigned char *dst,
								     const unsigned char *src,
								     size_t n, uint32_t c)
{
	uint64_t c0 = c;
	uint32_t lane_k = n >= 3 * LANE ? rv_crc32c_shift_const(LANE) : 0;
	while (n >= 3 * LANE) {
		uint64_t c1 = 0, c2 = 0;
		for (size_t i = 0; i < LANE; i += 32) {
			const unsigned char *s = src + i;
			__m256i v0 = _mm256_loadu_si256((const __m256i *)s);
			__m256i v1 = _mm256_loadu_si256((const __m256i *)(s + LANE));
			__m256i v2 = _mm256_loadu_si256((const __m256i *)(s + 2 * LANE));
			for (int k = 0; k < 32; k += 8) {
				uint64_t w0, w1, w2;
				memcpy(&w0, s + k, 8);
				memcpy(&w1, s + LANE + k, 8);
				memcpy(&w2, s + 2 * LANE + k, 8);
				c0 = __builtin_ia32_crc32di(c0, w0);
				c1 = __builtin_ia32_crc32di(c1, w1);
				c2 = __builtin_ia32_crc32di(c2, w2);
			}
			_mm256_stream_si256((__m256i *)(dst + i), v0);
			_mm256_stream_si256((__m256i *)(dst + LANE + i), v1);
			_mm256_stream_si256((__m256i *)(dst + 2 * LANE + i), v2);
		}
		c0 = rv_crc32c_shift((uint32_t)c0, lane_k) ^ (uint32_t)c1;
		c0 = rv_crc32c_shift((uint32_t)c0, lane_k) ^ (uint32_t)c2;
		src += 3 * LANE;
		dst += 3 * LANE;
		n -= 3 * LANE;
	}
	/* the streamed lines reach memory before anything stored after this
	 * (the slot's header, its committed word) */
	_mm_sfence();
	memcpy(dst, src, n);
	return rv_crc32c_hw_raw((uint32_t)c0, src, n);
}
#endif

/* Copy n bytes from src to dst (32-byte aligned), advancing the raw CRC c. */
static uint32_t copy_crc(unsigned char *dst, const unsigned char *src, size_t n, uint32_t c)
{
#if defined(__x86_64__)
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("sse4.2"))
		return copy_crc_avx2(dst, src, n, c);
#endif
	for (size_t off = 0; off < n; off += CHUNK) {
		size_t len = n - off < CHUNK ? n - off : CHUNK;
		memcpy(dst + off, src + off, len);
		/* the source chunk is in cache now; the destination may not be */
		c = crc_raw(c, src + off, len);
	}
	return c;
}

/* Cut the buffers into pieces; into c->pieces when it is not NULL.  The
 * count. */
static size_t cut(struct trainer_copy *c)
{
	size_t k = 0;
	int i = 0;
	uint64_t o = 0;
	while (i < c->n) {
		struct trainer_copy_piece p = { .buf = i, .off = o };
		while (i < c->n && p.len < PIECE) {
			uint64_t left = c->sizes[i] - o, room = PIECE - p.len;
			if (left <= room) {
				p.len += left;
				i++;
				o = 0;
				continue;
			}
			uint64_t take = room & ~(uint64_t)(ALIGN - 1);
			o += take;
			p.len += take;
			break;
		}
		if (c->pieces)
			c->pieces[k] = p;
		k++;
	}
	return k;
}

int trainer_copy_init(struct trainer_copy *c, unsigned char *payload, const void *const *bufs,
		      const uint64_t *sizes, int n)
{
	memset(c, 0, sizeof(*c));
	c->payload = payload;
	c->n = n;
	c->src = calloc((size_t)n + 1, sizeof(*c->src));
	c->sizes = calloc((size_t)n + 1, sizeof(*c->sizes));
	c->dsto = calloc((size_t)n + 1, sizeof(*c->dsto));
	if (!c->src || !c->sizes || !c->dsto) {
		trainer_copy_release(c);
		return -ENOMEM;
	}
	uint64_t off = 0;
	for (int i = 0; i < n; i++) {
		c->src[i] = bufs[i];
		c->sizes[i] = sizes[i];
		c->dsto[i] = off;
		off += rv_ckslot_align(sizes[i]);
		c->bytes += sizes[i];
	}
	c->npieces = cut(c);
	c->pieces = calloc(c->npieces + 1, sizeof(*c->pieces));
	c->crcs = calloc(c->npieces + 1, sizeof(*c->crcs));
	if (!c->pieces || !c->crcs) {
		trainer_copy_release(c);
		return -ENOMEM;
	}
	cut(c);
	atomic_init(&c->next, 0);
	return 0;
}

void trainer_copy_release(struct trainer_copy *c)
{
	free(c->src);
	free(c->sizes);
	free(c->dsto);
	free(c->pieces);
	free(c->crcs);
	c->src = NULL;
	c->sizes = NULL;
	c->dsto = NULL;
	c->pieces = NULL;
	c->crcs = NULL;
}

/* Copy piece k and store its CRC (from zero). */
static void copy_piece(struct trainer_copy *c, size_t k)
{
	const struct trainer_copy_piece *p = &c->pieces[k];
	uint32_t crc = 0;
	int i = p->buf;
	uint64_t o = p->off, left = p->len;
	while (left) {
		uint64_t len = c->sizes[i] - o < left ? c->sizes[i] - o : left;
		if (len)
			crc = copy_crc(c->payload + c->dsto[i] + o, c->src[i] + o, (size_t)len,
				       crc);
		left -= len;
		i++;
		o = 0;
	}
	c->crcs[k] = crc;
}

/* Take pieces until none is left. */
static void *copy_worker(void *arg)
{
	struct trainer_copy *c = arg;
	size_t k;
	while ((k = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed)) < c->npieces)
		copy_piece(c, k);
	return NULL;
}

void trainer_copy_run(struct trainer_copy *c, int threads)
{
	pthread_t helper;
	bool helped = threads > 1 && c->npieces > 1 &&
		      pthread_create(&helper, NULL, copy_worker, c) == 0;
	copy_worker(c);
	if (helped)
		pthread_join(helper, NULL);
	/* join the pieces' CRCs in order, from the inverted start state */
	uint32_t crc = 0xffffffffu, k_len = 0;
	uint64_t last = 0;
	for (size_t k = 0; k < c->npieces; k++) {
		if (c->pieces[k].len != last || !k_len) {
			last = c->pieces[k].len;
			k_len = rv_crc32c_shift_const(last);
		}
		crc = rv_crc32c_shift(crc, k_len) ^ c->crcs[k];
	}
	c->crc = ~crc;
}
