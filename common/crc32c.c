/*
 * crc32c.c: CRC32C (crc32c.h), moved here from the trainer library so that
 * rover-run checks the checkpoint slots it persists with the same code.
 */
#include "crc32c.h"

#include <stdatomic.h>
#include <string.h>

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

#if defined(__x86_64__)
#define LANE 4096u
static _Atomic uint32_t lane_shift; /* gf2_shift_const(LANE), set once */

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
#endif

int rv_crc32c_hw(void)
{
#if defined(__x86_64__)
	return __builtin_cpu_supports("sse4.2");
#else
	return 0;
#endif
}

static uint32_t lane(void)
{
#if defined(__x86_64__)
	uint32_t k = atomic_load_explicit(&lane_shift, memory_order_relaxed);
	if (!k) {
		k = gf2_shift_const(LANE);
		atomic_store_explicit(&lane_shift, k, memory_order_relaxed);
	}
	return k;
#else
	return 0;
#endif
}

uint32_t rv_crc32c_hw_raw(uint32_t c, const unsigned char *p, size_t n)
{
#if defined(__x86_64__)
	lane();
	return crc_hw(c, p, n);
#else
	crc_init();
	return crc_soft(c, p, n);
#endif
}

uint32_t rv_crc32c_shift_const(size_t n)
{
	return gf2_shift_const(n);
}

uint32_t rv_crc32c_shift(uint32_t crc, uint32_t k)
{
	return gf2_mul(crc, k);
}

uint32_t rv_crc32c(uint32_t crc, const void *data, size_t n)
{
	crc_init();
	crc = ~crc;
	if (rv_crc32c_hw())
		return ~rv_crc32c_hw_raw(crc, data, n);
	return ~crc_soft(crc, data, n);
}
