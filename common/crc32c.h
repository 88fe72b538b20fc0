/*
 * crc32c.h: CRC32C (Castagnoli), the checksum of the flash checkpoint's
 * slots and of their copies on storage (common/ckslot.h).  With the SSE 4.2
 * instruction where the CPU has it (three streams joined), else a table
 * slice-by-8.  Pure and reentrant; the tables are built once, thread-safe.
 */
#ifndef RV_CRC32C_H
#define RV_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC32C of n bytes continuing crc (0 to start). */
uint32_t rv_crc32c(uint32_t crc, const void *data, size_t n);

/* Raw (not inverted) CRC32C state c advanced over n bytes with the
 * hardware instruction; only when rv_crc32c_hw() is true. */
uint32_t rv_crc32c_hw_raw(uint32_t c, const unsigned char *p, size_t n);
/* Whether the CPU has the CRC32 instruction (x86-64 SSE 4.2). */
int rv_crc32c_hw(void);

/* The constant that shifts a raw CRC over n zero bytes, and the shift:
 * crc(A B) = rv_crc32c_shift(crc(A), rv_crc32c_shift_const(|B|)) ^ crc0(B)
 * with crc0(B) started at 0. */
uint32_t rv_crc32c_shift_const(size_t n);
uint32_t rv_crc32c_shift(uint32_t crc, uint32_t k);

#endif
