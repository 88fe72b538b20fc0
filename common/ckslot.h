/*
 * ckslot.h: the flash checkpoint's slot format and its storage layout,
 * shared by the trainer library (which writes slots in /dev/shm and loads
 * them, or their copies on storage) and rover-run (which copies committed
 * slots to storage).
 *
 * A slot is RV_CKSLOT_HEADER bytes of header, then the buffers one after the
 * other, each at a 64-byte boundary.  It is loadable when its committed
 * word is set, its header's CRC32C matches and its buffers' CRC32C matches.
 * A copy on storage is the same bytes, header included, so one check serves
 * both.  Storage, under a checkpoint folder DIR:
 *   DIR/step-<S>/rank-<R>.ckpt  rank R's part of step S
 *   DIR/step-<S>/data.json      the master's data checkpoint of step S
 *                               ({"step","checkpoint"}), when it had one
 *   DIR/manifest.json           {"version":1,"steps":[{"step":S,"ranks":[..],
 *                               "data":true},...]}: the complete steps,
 *                               newest first; nothing else is loaded
 * Pure but for the file reads and writes each function names; reentrant.
 */
#ifndef RV_CKSLOT_H
#define RV_CKSLOT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define RV_CKSLOT_MAX_BUFS  8192
#define RV_CKSLOT_HEADER    69632
#define RV_CKSLOT_ALIGN     64u
#define RV_CKSLOT_MAGIC     0x31544b4352564f52ULL /* "ROVRCKT1" */
#define RV_CKSLOT_VERSION   1u
#define RV_CKSLOT_COMMITTED 0x54494d43u /* "CMIT" */
#define RV_CKSLOT_MANIFEST  "manifest.json"
#define RV_CKSLOT_MAX_STEPS 1024 /* steps a manifest lists at most */

struct rv_ckslot_hdr {
	uint64_t magic;
	uint32_t version, nbufs;
	uint64_t seq; /* higher: newer */
	int64_t step;
	uint64_t payload; /* bytes after the header, padding included */
	int64_t task_id, consumed;
	uint32_t crc; /* CRC32C of the buffers' bytes, in order, no padding */
	uint32_t pad;
	uint64_t sizes[RV_CKSLOT_MAX_BUFS];
	uint32_t hcrc;              /* CRC32C of the header up to here */
	_Atomic uint32_t committed; /* RV_CKSLOT_COMMITTED, stored last */
};
_Static_assert(sizeof(struct rv_ckslot_hdr) <= RV_CKSLOT_HEADER, "slot header fits its page");

/* n rounded up to RV_CKSLOT_ALIGN. */
uint64_t rv_ckslot_align(uint64_t n);

/* The POSIX shared-memory name of slot s (0 or 1) of rank in job:
 * "/rover-<job>-<rank>-<s>", the job's characters outside [A-Za-z0-9._-]
 * turned into '_' (rv_ckslot_job_name). */
void rv_ckslot_name(char *out, size_t size, const char *job, int rank, int s);
/* job made safe for a name ([A-Za-z0-9._-], else '_'), into out. */
void rv_ckslot_job_name(char *out, size_t size, const char *job);

/* The CRC32C of h's bytes before hcrc. */
uint32_t rv_ckslot_hdr_crc(const struct rv_ckslot_hdr *h);

/* The header of the slot image at map (size bytes mapped) when it is
 * committed, its header consistent and its payload inside size; else NULL.
 * The buffers are not checked (rv_ckslot_payload_ok). */
const struct rv_ckslot_hdr *rv_ckslot_committed(const void *map, uint64_t size);
/* Whether the buffers after h (a header rv_ckslot_committed returned) match
 * its CRC. */
bool rv_ckslot_payload_ok(const struct rv_ckslot_hdr *h);

/*
 * Copy the committed slot image at map (size bytes, another process may be
 * writing it) to fd from offset 0 and check the copy: its header as it was
 * when the copy began, the buffers' CRC32C computed over the bytes written.
 * 0 with *step set; -EAGAIN when the slot is not committed, changed during
 * the copy or its CRC does not match (a torn write: not a checkpoint); the
 * write's errno.  fd is not synced.
 */
int rv_ckslot_copy(int fd, const void *map, uint64_t size, int64_t *step, struct rv_err *err);

/* DIR/step-<S> and DIR/step-<S>/rank-<R>.ckpt into out. */
void rv_ckslot_step_dir(char *out, size_t size, const char *dir, int64_t step);
void rv_ckslot_file(char *out, size_t size, const char *dir, int64_t step, int rank);

/* The complete steps the manifest of dir lists, newest first, up to max
 * into steps: the count (0 when there is no manifest), -EINVAL with *err
 * naming what is wrong with it. */
int rv_ckslot_manifest_read(const char *dir, int64_t *steps, int max, struct rv_err *err);

#endif
