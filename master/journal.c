/*
 * journal.c: the master's append-only journal (journal.h).  Used by the
 * daemon's handlers (append under the state lock, sync after it) and at start
 * (replay).
 *
 * Group commit is leader/follower, not a writer thread: the first thread that
 * needs its record durable while no write is in progress becomes the leader,
 * takes the whole buffer, and writes + fdatasyncs it with the lock released;
 * threads that arrive meanwhile append and wait, and when the leader is done
 * one of them leads the next batch with everything appended during the
 * fdatasync.  Why: no hand-off to a thread and back (two wake-ups per commit
 * on a 2-core box), a write error goes straight to a caller that waits on it,
 * and there is no thread to start, join or lose across fork() in tests.
 * Records are buffered until someone syncs; the daemon syncs after every
 * operation, so the buffer holds at most one record per handler in flight.
 *
 * Byte layout (little endian):
 *   file header (24): magic[8] "RVJRNL01" or "RVSNAP01", base seq u64,
 *                     crc32c of the first 16 bytes u32, zero u32
 *   record (20 + len): crc u32, len u32, seq u64, type u32, payload[len]
 *                     crc = crc32c of the payload, then of header bytes 4..19
 *   batch (28 + n):   a record of type 0xffffffff whose seq is the batch's
 *                     first and whose payload is n (u64), then n bytes of
 *                     records: what one commit wrote before its fdatasync
 * `snapshot` is a header (base = S) and one record (seq S, type 0); `journal`
 * is a header (base = the snapshot's S when it was started) and batches of
 * records with consecutive sequence numbers.  A record with seq <= S is
 * covered by the snapshot and skipped: that is how a journal left behind by a
 * crash between the snapshot's rename and the fresh journal's reads
 * correctly.
 *
 * Torn versus damaged: a commit writes its batch only after the previous
 * batch's fdatasync returned, so after a crash (even a power cut, which may
 * lose any page of an unsynced write) only the last batch can be incomplete.
 * Damage in the last batch is a torn tail: the whole batch is cut (none of it
 * was acknowledged).  Damage with a valid batch after it hit data that was
 * synced: -EUCLEAN, never a silent cut.
 *
 * Prewritten room: a commit that appends to a file makes its fdatasync commit
 * the file's new size and extents too (about 2 ms here, against 0.15 ms to
 * overwrite blocks already written), so the file is kept written with zeros
 * (real writes: fallocate's unwritten extents would need their conversion
 * committed) prewrite bytes ahead of good_off.  A leader that leaves less
 * than half of it extends it after its commit by at most JOURNAL_EXTEND_STEP
 * (`extending`: the zeros go past zero_end while later commits write below
 * it), then fsyncs: a step, not the whole room, because the leader answers
 * its waiters only after, and every fdatasync meanwhile flushes the zeros
 * too (16 MiB of them held every reply up to 0.1 s here, more on a busy
 * disk).
 * Zeros never parse as a record (their checksum is wrong), so the log ends
 * at them; a torn tail is overwritten with zeros at open, never left for a
 * later, shorter batch to land in front of.
 *
 * Ownership: the journal owns its fds and buffers; `writing` marks the one
 * thread (leader or snapshot) that owns fd, good_off and the file contents.
 */
#include "clock.h"
#include "journal.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"

#define JOURNAL_HDR          24
#define JOURNAL_REC_HDR      20
#define JOURNAL_BATCH        (JOURNAL_REC_HDR + 8)
#define JOURNAL_TYPE_BATCH   UINT32_MAX
#define JOURNAL_IO_WAIT_MS   60000
#define JOURNAL_LEAD_POLL_MS 20
#define JOURNAL_LEN_MAX      ((size_t)UINT32_MAX - 64)
#define JOURNAL_EXTEND_STEP  ((off_t)1 << 20)

static const char journal_magic[8] = { 'R', 'V', 'J', 'R', 'N', 'L', '0', '1' };
static const char journal_snap_magic[8] = { 'R', 'V', 'S', 'N', 'A', 'P', '0', '1' };
static const uint8_t journal_zeros16[16];

const double journal_sync_le_ms[JOURNAL_SYNC_BUCKETS] = { 1,   2,   5,    10,   50,
							  100, 500, 1000, 2500, 5000 };

/* ---- CRC32C (Castagnoli), reflected, table-driven ---- */

static uint32_t journal_crc_table[256];
static pthread_once_t journal_crc_once = PTHREAD_ONCE_INIT;

static void journal_crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		journal_crc_table[i] = c;
	}
}

/* Continue crc (start with 0) over n bytes of p. */
static uint32_t journal_crc(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;
	pthread_once(&journal_crc_once, journal_crc_init);
	crc = ~crc;
	while (n--)
		crc = journal_crc_table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static void journal_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void journal_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t journal_get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t journal_get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static void journal_hdr_format(uint8_t h[JOURNAL_HDR], const char magic[8], int64_t base)
{
	memcpy(h, magic, 8);
	journal_put64(h + 8, (uint64_t)base);
	journal_put32(h + 16, journal_crc(0, h, 16));
	journal_put32(h + 20, 0);
}

/* 0 and *base when h is a valid header with this magic, else -1. */
static int journal_hdr_parse(const uint8_t *h, size_t n, const char magic[8], int64_t *base)
{
	if (n < JOURNAL_HDR || memcmp(h, magic, 8) != 0 ||
	    journal_get32(h + 16) != journal_crc(0, h, 16) || journal_get64(h + 8) > INT64_MAX)
		return -1;
	*base = (int64_t)journal_get64(h + 8);
	return 0;
}

/* A record header followed by its payload, checksummed. */
static void journal_rec_format(uint8_t *h, int64_t seq, uint32_t type, const void *data, size_t len)
{
	journal_put32(h + 4, (uint32_t)len);
	journal_put64(h + 8, (uint64_t)seq);
	journal_put32(h + 16, type);
	uint32_t crc = journal_crc(0, data, len);
	journal_put32(h, journal_crc(crc, h + 4, JOURNAL_REC_HDR - 4));
}

struct journal_rec {
	int64_t seq;
	int type;
	bool batch; /* a batch header: seq is its first record's */
	uint64_t batch_len;
	size_t len;   /* payload */
	size_t total; /* header + payload */
	const uint8_t *data;
};

/* 1 and *r when a whole record with a good checksum starts at p (avail bytes
 * left in the file), 0 when not.  min_seq/max_seq filter out candidates
 * before the checksum is computed (the forward scan calls this at every
 * byte). */
static int journal_rec_parse(const uint8_t *p, size_t avail, int64_t min_seq, int64_t max_seq,
			     struct journal_rec *r)
{
	if (avail < JOURNAL_REC_HDR)
		return 0;
	size_t len = journal_get32(p + 4);
	uint64_t seq = journal_get64(p + 8);
	uint32_t type = journal_get32(p + 16);
	if (len > avail - JOURNAL_REC_HDR || seq < (uint64_t)min_seq || seq > (uint64_t)max_seq ||
	    (type > INT32_MAX && type != JOURNAL_TYPE_BATCH) ||
	    (type == JOURNAL_TYPE_BATCH && len != 8))
		return 0;
	uint32_t crc = journal_crc(0, p + JOURNAL_REC_HDR, len);
	if (journal_crc(crc, p + 4, JOURNAL_REC_HDR - 4) != journal_get32(p))
		return 0;
	*r = (struct journal_rec){ .seq = (int64_t)seq,
				   .len = len,
				   .total = JOURNAL_REC_HDR + len,
				   .data = p + JOURNAL_REC_HDR };
	if (type == JOURNAL_TYPE_BATCH) {
		r->batch = true;
		r->batch_len = journal_get64(r->data);
	} else {
		r->type = (int)type;
	}
	return 1;
}

/* ---- growable byte buffer of pending records ---- */

struct journal_buf {
	uint8_t *data;
	size_t len, cap;
};

static int journal_buf_reserve(struct journal_buf *b, size_t extra)
{
	if (b->len + extra <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + extra)
		cap *= 2;
	uint8_t *d = realloc(b->data, cap);
	if (!d)
		return -ENOMEM;
	b->data = d;
	b->cap = cap;
	return 0;
}

struct journal {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* durable_seq advanced or the writer slot freed */
	/* Followers of commit number g wait on done_cv[g & 1]: its end wakes
	 * just them (and one of the next commit's to lead it), not every
	 * thread waiting, most of which would go back to sleep. */
	pthread_cond_t done_cv[2];
	uint64_t commit_gen;   /* number of the last commit started */
	int64_t inflight_upto; /* the last seq it took */
	char *dir;
	int dirfd, fd, lockfd;
	size_t max_record, max_snapshot;
	int commit_delay_us;
	bool nosync;
	struct journal_buf buf;   /* room for a batch header, then the pending records:
				       seq durable+1.. (less what a writer took); len 0 when
				       there was never any */
	struct journal_buf spare; /* the leader's last buffer, kept for reuse */
	bool writing;             /* a leader or a snapshot owns fd, good_off, the files */
	bool extending;           /* a thread writes zeros in [zero_end, ...) of fd */
	size_t prewrite;          /* room kept ahead of good_off; 0 none */
	off_t zero_end;           /* [good_off, zero_end) of fd is written with zeros */
	uint64_t zero_gen;        /* bumped when fd changes or is cut: stale extensions */
	int failed;               /* 0, or -EIO once an fsync failed: nothing more goes in */
	off_t good_off;           /* end of the last record known written */
	int64_t journal_base;     /* the base seq in the journal file's header */
	/* A snapshot begun and not yet written covers up to snap_seq; the
	 * first batch made durable after it with a record past snap_seq starts
	 * at snap_tail of fd (-1: none yet): the fresh journal copies from it. */
	bool snap_active;
	int64_t snap_seq;
	off_t snap_tail;
	void (*snap_step)(void *ctx, int step);
	void *snap_step_ctx;
	struct journal_stats st;  /* st.seq, st.durable_seq are the live counters */
};

/* Wait on cv until deadline_ms (CLOCK_MONOTONIC); ETIMEDOUT once past it. */
static int journal_wait_on(struct journal *j, pthread_cond_t *cv, int64_t deadline_ms)
{
	if (rv_mono_ms() >= deadline_ms)
		return ETIMEDOUT;
	struct timespec ts;
	rv_mono_timespec(&ts, deadline_ms);
	return pthread_cond_timedwait(cv, &j->mu, &ts);
}

static int journal_wait(struct journal *j, int64_t deadline_ms)
{
	return journal_wait_on(j, &j->cv, deadline_ms);
}

static int64_t journal_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Wake every thread waiting in the journal. */
static void journal_wake_all(struct journal *j)
{
	pthread_cond_broadcast(&j->cv);
	pthread_cond_broadcast(&j->done_cv[0]);
	pthread_cond_broadcast(&j->done_cv[1]);
}

static int journal_fsync_dir(struct journal *j)
{
	if (j->nosync)
		return 0;
	return fsync(j->dirfd) < 0 ? -errno : 0;
}

/* Write n bytes at off; 0 or -errno (a short write then an error). */
static int journal_pwrite_all(int fd, const void *p, size_t n, off_t off)
{
	size_t done = 0;
	while (done < n) {
		ssize_t w = pwrite(fd, (const uint8_t *)p + done, n - done, off + (off_t)done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		done += (size_t)w;
	}
	return 0;
}

/* Write zeros in [from, to) of fd: 0 or -errno. */
static int journal_write_zeros(int fd, off_t from, off_t to)
{
	static const uint8_t zeros[1 << 16];
	struct iovec iov[64];
	for (size_t i = 0; i < RV_ARRAY_SIZE(iov); i++)
		iov[i] = (struct iovec){ .iov_base = (void *)zeros, .iov_len = sizeof(zeros) };
	while (from < to) {
		size_t left = (size_t)(to - from);
		int n = 0;
		while (n < (int)RV_ARRAY_SIZE(iov) && left) {
			iov[n].iov_len = left < sizeof(zeros) ? left : sizeof(zeros);
			left -= iov[n++].iov_len;
		}
		ssize_t w = pwritev(fd, iov, n, from);
		for (int i = 0; i < n; i++)
			iov[i].iov_len = sizeof(zeros);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		from += w;
	}
	return 0;
}

/* Write zeros in [from, to) of fd and fsync it (its size, once): the room a
 * commit overwrites.  0 or -errno; zeros half written are harmless. */
static int journal_extend(struct journal *j, int fd, off_t from, off_t to)
{
	int rc = journal_write_zeros(fd, from, to);
	if (rc == 0 && !j->nosync && fsync(fd) < 0)
		rc = -errno;
	return rc;
}

/* Write name.tmp whole (a, then b, then zeros bytes of zeros) and fsync it;
 * *fdout gets its O_RDWR fd.  -errno with err naming the step; on failure
 * the temp file is gone. */
static int journal_tmp_write(struct journal *j, const char *name, const uint8_t *a, size_t alen,
			     const uint8_t *b, size_t blen, size_t zeros, int *fdout,
			     struct rv_err *err)
{
	char tmp[64];
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	int fd = openat(j->dirfd, tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return rv_err_set(err, -errno, NULL, "could not create %s/%s: %s", j->dir, tmp,
				  strerror(errno));
	int rc = journal_pwrite_all(fd, a, alen, 0);
	if (rc == 0 && blen)
		rc = journal_pwrite_all(fd, b, blen, (off_t)alen);
	if (rc == 0 && zeros)
		rc = journal_write_zeros(fd, (off_t)(alen + blen), (off_t)(alen + blen + zeros));
	if (rc < 0) {
		rv_err_set(err, rc, NULL, "could not write %s/%s: %s", j->dir, tmp, strerror(-rc));
	} else if (!j->nosync && fsync(fd) < 0) {
		rc = rv_err_set(err, -errno, NULL, "could not fsync %s/%s: %s", j->dir, tmp,
				strerror(errno));
	}
	if (rc < 0) {
		close(fd);
		unlinkat(j->dirfd, tmp, 0);
		return rc;
	}
	*fdout = fd;
	return 0;
}

/* Rename name.tmp (written by journal_tmp_write, fd) over name and fsync the
 * folder.  *fdout (when not NULL) keeps fd, else it is closed.  -errno with
 * err naming the step: before the rename nothing replaced name (the temp
 * file is gone); a failed folder fsync comes after it. */
static int journal_tmp_commit(struct journal *j, const char *name, int fd, int *fdout,
			      struct rv_err *err)
{
	char tmp[64];
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	if (renameat(j->dirfd, tmp, j->dirfd, name) < 0) {
		int rc = rv_err_set(err, -errno, NULL, "could not rename %s/%s: %s", j->dir, tmp,
				    strerror(errno));
		close(fd);
		unlinkat(j->dirfd, tmp, 0);
		return rc;
	}
	if (fdout)
		*fdout = fd;
	else
		close(fd);
	int rc = journal_fsync_dir(j);
	if (rc < 0)
		return rv_err_set(err, rc, NULL, "could not fsync folder %s: %s", j->dir,
				  strerror(-rc));
	return 0;
}

/* Write a whole file atomically: name.tmp, fsync, rename over name, fsync
 * the folder.  *fdout (when not NULL) receives an O_RDWR fd of the new file.
 * -errno with err naming the step; on failure nothing replaced name, but for
 * a failed folder fsync after the rename (*fdout set). */
static int journal_file_replace(struct journal *j, const char *name, const uint8_t *a, size_t alen,
				const uint8_t *b, size_t blen, size_t zeros, int *fdout,
				struct rv_err *err)
{
	int fd = -1;
	int rc = journal_tmp_write(j, name, a, alen, b, blen, zeros, &fd, err);
	return rc < 0 ? rc : journal_tmp_commit(j, name, fd, fdout, err);
}

/* Start a journal file whose records follow base, holding n bytes of whole
 * batches (recs, may be NULL when n is 0): the journal writes after them
 * from now on.  Caller owns the writer slot (or is journal_open).  -errno:
 * before the rename nothing changed; -EIO after it (the folder's fsync
 * failed: the caller fails the journal). */
static int journal_start_fresh(struct journal *j, int64_t base, const uint8_t *recs, size_t n,
			       struct rv_err *err)
{
	uint8_t h[JOURNAL_HDR];
	journal_hdr_format(h, journal_magic, base);
	int fd = -1;
	int rc = journal_file_replace(j, "journal", h, sizeof(h), recs, n, j->prewrite, &fd, err);
	if (fd >= 0) { /* renamed: the new file is the journal whatever came after */
		if (j->fd >= 0)
			close(j->fd);
		j->fd = fd;
		j->good_off = JOURNAL_HDR + (off_t)n;
		j->zero_end = j->good_off + (off_t)j->prewrite;
		j->zero_gen++;
		j->journal_base = base;
	}
	if (rc < 0 && fd >= 0)
		return -EIO;
	return rc;
}

/* ---- open and replay ---- */

struct journal_map {
	uint8_t *p;
	size_t n;
};

static void journal_unmap(struct journal_map *m)
{
	if (m->p && m->n)
		munmap(m->p, m->n);
	m->p = NULL;
	m->n = 0;
}

static int journal_map_fd(int fd, struct journal_map *m)
{
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return -errno;
	m->n = (size_t)sb.st_size;
	m->p = NULL;
	if (m->n == 0)
		return 0;
	void *p = mmap(NULL, m->n, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		m->n = 0;
		return -errno;
	}
	m->p = p;
	return 0;
}

/* What the validating pass over the journal found. */
struct journal_scan {
	size_t good_end;  /* offset after the last whole batch */
	int64_t last_seq; /* seq of the last record before it (or the header's base) */
	int64_t nrecords; /* records after the snapshot */
};

/* The first offset at or after from (up to n) whose byte is not zero. */
static size_t journal_nonzero(const uint8_t *p, size_t from, size_t n)
{
	while (from < n && (from & 7))
		if (p[from++])
			return from - 1;
	for (; from + 8 <= n; from += 8) {
		uint64_t w;
		memcpy(&w, p + from, 8);
		if (w)
			break;
	}
	while (from < n && !p[from])
		from++;
	return from;
}

/* 1 and *at when a batch header starts anywhere in [from, n) with a seq
 * after `after`: a batch written after the damaged one.  Its seq is at most
 * the larger of after and snap_seq (records after a snapshot start at
 * snap_seq + 1) plus the number of records that fit. */
static int journal_later_batch(const struct journal_map *m, size_t from, int64_t after,
			       int64_t snap_seq, size_t *at)
{
	int64_t max_seq = (after > snap_seq ? after : snap_seq) +
			  (int64_t)((m->n - from) / JOURNAL_REC_HDR) + 1;
	for (size_t k = from; k + JOURNAL_BATCH <= m->n; k++) {
		/* The prewritten room is megabytes of zeros: a candidate's seq
		 * (>= 1) has a non-zero byte in [k + 8, k + 16). */
		if (!memcmp(m->p + k + 8, journal_zeros16, 8)) {
			size_t z = journal_nonzero(m->p, k + 16, m->n);
			if (z + JOURNAL_BATCH - 16 > m->n)
				return 0;
			k = z - 16; /* the loop adds 1: the first k whose seq holds z */
			continue;
		}
		struct journal_rec r;
		if (journal_rec_parse(m->p + k, m->n - k, after + 1, max_seq, &r) && r.batch) {
			*at = k;
			return 1;
		}
	}
	return 0;
}

/*
 * Check every batch and record of the mapped journal against snap_seq (0:
 * none) without applying anything.  0 and *sc (a torn tail starts at
 * sc->good_end); -EUCLEAN with err naming the offset when damage has a valid
 * batch after it, or the sequence numbers skip.
 */
static int journal_scan_file(struct journal *j, const struct journal_map *m, int64_t base,
			     int64_t snap_seq, struct journal_scan *sc, struct rv_err *err)
{
	size_t off = JOURNAL_HDR, batch_end = off;
	int64_t prev = base;
	*sc = (struct journal_scan){ .good_end = off, .last_seq = base };
	int64_t nrecords = 0; /* of the batches checked whole */
	while (off < m->n) {
		struct journal_rec r;
		bool in_batch = off < batch_end;
		if (!journal_rec_parse(m->p + off, m->n - off, 0, INT64_MAX, &r) ||
		    (in_batch && (r.batch || r.total > batch_end - off))) {
			size_t at;
			if (journal_later_batch(m, off + 1, prev, snap_seq, &at))
				return rv_err_set(err, -EUCLEAN, NULL,
						  "%s/journal: damaged record at offset %zu "
						  "(after seq %" PRId64
						  "), a later batch follows at "
						  "offset %zu",
						  j->dir, off, prev, at);
			break; /* torn: the last batch */
		}
		if (!in_batch && !r.batch)
			return rv_err_set(err, -EUCLEAN, NULL,
					  "%s/journal: record at offset %zu is outside any batch",
					  j->dir, off);
		if (r.len > j->max_record && !r.batch)
			return rv_err_set(err, -EMSGSIZE, NULL,
					  "%s/journal: record at offset %zu holds %zu bytes, above "
					  "max_record %zu",
					  j->dir, off, r.len, j->max_record);
		int64_t want = r.seq <= snap_seq ? prev + 1
						 : (prev > snap_seq ? prev : snap_seq) + 1;
		if (r.seq != want)
			return rv_err_set(err, -EUCLEAN, NULL,
					  "%s/journal: %s at offset %zu has seq %" PRId64
					  ", expected %" PRId64 " (records are missing)",
					  j->dir, r.batch ? "batch" : "record", off, r.seq, want);
		if (r.batch) {
			off += r.total;
			batch_end = r.batch_len <= m->n - off ? off + r.batch_len : m->n + 1;
		} else {
			prev = r.seq;
			if (r.seq > snap_seq)
				nrecords++;
			off += r.total;
		}
		if (off == batch_end) { /* a whole batch */
			sc->good_end = off;
			sc->last_seq = prev;
			sc->nrecords = nrecords;
		}
	}
	return 0;
}

static int journal_callback_failed(struct rv_err *err, int rc, const char *what, int64_t seq)
{
	if (err && err->code == 0)
		return rv_err_set(err, rc, NULL, "could not apply %s seq %" PRId64 ": %s", what,
				  seq, strerror(-rc));
	return rc;
}

/* Load and check the snapshot; *have 0 when there is none.  On success the
 * record's data stays valid while *m is mapped. */
static int journal_load_snapshot(struct journal *j, struct journal_map *m, bool *have,
				 struct journal_rec *rec, struct rv_err *err)
{
	*have = false;
	RV_CLEANUP_CLOSE int fd = openat(j->dirfd, "snapshot", O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return rv_err_set(err, -errno, NULL, "could not open %s/snapshot: %s", j->dir,
				  strerror(errno));
	int rc = journal_map_fd(fd, m);
	if (rc < 0)
		return rv_err_set(err, rc, NULL, "could not read %s/snapshot: %s", j->dir,
				  strerror(-rc));
	int64_t base;
	if (journal_hdr_parse(m->p, m->n, journal_snap_magic, &base) < 0)
		return rv_err_set(err, -EUCLEAN, NULL, "%s/snapshot: damaged header at offset 0",
				  j->dir);
	if (!journal_rec_parse(m->p + JOURNAL_HDR, m->n - JOURNAL_HDR, base, base, rec) ||
	    JOURNAL_HDR + rec->total != m->n)
		return rv_err_set(err, -EUCLEAN, NULL, "%s/snapshot: damaged record at offset %d",
				  j->dir, JOURNAL_HDR);
	if (rec->len > j->max_snapshot)
		return rv_err_set(err, -EMSGSIZE, NULL,
				  "%s/snapshot: %zu bytes, above max_snapshot %zu", j->dir,
				  rec->len, j->max_snapshot);
	*have = true;
	return 0;
}

/* Open and map the journal beside a snapshot of seq snap_seq and read its
 * header.  1 when there was none and a fresh one was started (nothing to
 * replay), 0 with *jm mapped, else a negative errno with err filled. */
static int journal_replay_open(struct journal *j, bool have_snap, int64_t snap_seq,
			       struct journal_map *jm, struct rv_err *err)
{
	j->fd = openat(j->dirfd, "journal", O_RDWR | O_CLOEXEC);
	if (j->fd < 0 && errno == ENOENT) {
		if (have_snap) /* never left by a crash: the journal is replaced by rename */
			return rv_err_set(err, -EUCLEAN, NULL,
					  "%s/journal is missing beside a snapshot of seq %" PRId64,
					  j->dir, snap_seq);
		int rc = journal_start_fresh(j, 0, NULL, 0, err);
		j->st.seq = j->st.durable_seq = 0;
		return rc < 0 ? rc : 1;
	}
	if (j->fd < 0)
		return rv_err_set(err, -errno, NULL, "could not open %s/journal: %s", j->dir,
				  strerror(errno));
	int rc = journal_map_fd(j->fd, jm);
	if (rc < 0)
		return rv_err_set(err, rc, NULL, "could not read %s/journal: %s", j->dir,
				  strerror(-rc));
	if (journal_hdr_parse(jm->p, jm->n, journal_magic, &j->journal_base) < 0)
		return rv_err_set(err, -EUCLEAN, NULL, "%s/journal: damaged header at offset 0",
				  j->dir);
	if (j->journal_base > snap_seq)
		return rv_err_set(err, -EUCLEAN, NULL,
				  "%s/journal: starts after seq %" PRId64
				  " but the snapshot covers "
				  "only up to seq %" PRId64 " (%s)",
				  j->dir, j->journal_base, snap_seq,
				  have_snap ? "snapshot too old" : "snapshot missing");
	return 0;
}

/* Hand the snapshot (srec, when there is one) and the records after it, up
 * to the scan's last whole batch, to the callbacks. */
static int journal_replay_apply(const struct journal_map *jm, const struct journal_scan *sc,
				const struct journal_rec *srec, journal_apply_fn on_snapshot,
				journal_apply_fn on_record, void *ctx, struct rv_err *err)
{
	int64_t snap_seq = srec ? srec->seq : 0;
	if (srec && on_snapshot) {
		rv_err_clear(err);
		int rc = on_snapshot(ctx, 0, srec->data, srec->len, err);
		if (rc < 0)
			return journal_callback_failed(err, rc, "snapshot", snap_seq);
	}
	for (size_t off = JOURNAL_HDR; off < sc->good_end;) {
		struct journal_rec r;
		journal_rec_parse(jm->p + off, jm->n - off, 0, INT64_MAX, &r);
		off += r.total;
		if (r.batch || r.seq <= snap_seq || !on_record)
			continue;
		rv_err_clear(err);
		int rc = on_record(ctx, r.type, r.data, r.len, err);
		if (rc < 0)
			return journal_callback_failed(err, rc, "record", r.seq);
	}
	return 0;
}

/* Past the log: zeros (prewritten room), or a torn batch then zeros.  Take
 * the scanned positions, unmap *jm and write zeros over a torn batch. */
static int journal_replay_tail(struct journal *j, struct journal_map *jm,
			       const struct journal_scan *sc, struct rv_err *err)
{
	j->good_off = (off_t)sc->good_end;
	j->zero_end = (off_t)jm->n;
	size_t dirty_end = sc->good_end;
	for (size_t z = journal_nonzero(jm->p, sc->good_end, jm->n); z < jm->n;
	     z = journal_nonzero(jm->p, z + 1, jm->n))
		dirty_end = z + 1;
	journal_unmap(jm);
	if (dirty_end <= sc->good_end)
		return 0;
	/* Zeros, not a cut: the room stays, and no piece of the torn batch
	 * can follow a later, shorter one. */
	int rc = journal_write_zeros(j->fd, (off_t)sc->good_end, (off_t)dirty_end);
	if (rc == 0 && !j->nosync && fdatasync(j->fd) < 0)
		rc = -errno;
	if (rc < 0)
		return rv_err_set(err, rc, NULL, "could not clear the torn tail of %s/journal: %s",
				  j->dir, strerror(-rc));
	j->st.torn_bytes_truncated = (int64_t)(dirty_end - sc->good_end);
	j->st.torn_records = 1;
	return 0;
}

static int journal_replay(struct journal *j, journal_apply_fn on_snapshot,
			  journal_apply_fn on_record, void *ctx, struct rv_err *err)
{
	struct journal_map snap = { 0 }, jm = { 0 };
	struct journal_rec srec = { 0 };
	struct journal_scan sc;
	bool have_snap;
	int rc = journal_load_snapshot(j, &snap, &have_snap, &srec, err);
	if (rc < 0)
		goto out;
	int64_t snap_seq = have_snap ? srec.seq : 0;
	rc = journal_replay_open(j, have_snap, snap_seq, &jm, err);
	if (rc != 0) {
		rc = rc < 0 ? rc : 0;
		goto out;
	}
	rc = journal_scan_file(j, &jm, j->journal_base, snap_seq, &sc, err);
	if (rc < 0)
		goto out;
	/* Everything checked: apply, then touch the files. */
	rc = journal_replay_apply(&jm, &sc, have_snap ? &srec : NULL, on_snapshot, on_record, ctx,
				  err);
	if (rc < 0)
		goto out;
	j->st.replayed = sc.nrecords;
	j->st.seq = j->st.durable_seq = sc.last_seq > snap_seq ? sc.last_seq : snap_seq;
	rc = journal_replay_tail(j, &jm, &sc, err);
	if (rc < 0)
		goto out;
	/* A crash between the snapshot's rename and the fresh journal left the
	 * old journal, all of it covered: finish that compaction. */
	if (have_snap && j->journal_base < snap_seq && sc.last_seq <= snap_seq)
		rc = journal_start_fresh(j, snap_seq, NULL, 0, err);
	/* A journal of an older version, or one cut by a failed write.  The
	 * room only makes commits cheaper: a full folder (what filled up while
	 * the last process ran) still opens, and its commits append. */
	if (rc == 0 && j->prewrite && j->zero_end - j->good_off < (off_t)j->prewrite / 2 &&
	    journal_extend(j, j->fd, j->zero_end, j->good_off + (off_t)j->prewrite) == 0)
		j->zero_end = j->good_off + (off_t)j->prewrite;
out:
	journal_unmap(&jm);
	journal_unmap(&snap);
	return rc;
}

struct journal *journal_open(const struct journal_opts *o, journal_apply_fn on_snapshot,
			     journal_apply_fn on_record, void *ctx, struct rv_err *err)
{
	if (!o || !o->dir || !*o->dir || o->commit_delay_us < 0 ||
	    o->commit_delay_us > JOURNAL_COMMIT_DELAY_MAX_US || o->max_record > JOURNAL_LEN_MAX ||
	    o->max_snapshot > JOURNAL_LEN_MAX || o->prewrite > JOURNAL_PREWRITE_MAX) {
		rv_err_set(err, -EINVAL, "journal", "invalid journal options");
		return NULL;
	}
	struct journal *j = calloc(1, sizeof(*j));
	char *dir = o->dir ? strdup(o->dir) : NULL;
	if (!j || !dir) {
		free(j);
		free(dir);
		rv_err_set(err, -ENOMEM, NULL, "could not open the journal: out of memory");
		return NULL;
	}
	j->dir = dir;
	j->dirfd = j->fd = j->lockfd = -1;
	j->max_record = o->max_record ? o->max_record : JOURNAL_MAX_RECORD_DEFAULT;
	j->max_snapshot = o->max_snapshot ? o->max_snapshot : JOURNAL_MAX_SNAPSHOT_DEFAULT;
	j->commit_delay_us = o->commit_delay_us;
	j->nosync = o->nosync;
	j->prewrite = o->nosync ? 0 : o->prewrite ? o->prewrite : JOURNAL_PREWRITE_DEFAULT;
	j->snap_step = o->snapshot_step;
	j->snap_step_ctx = o->snapshot_step_ctx;
	pthread_mutex_init(&j->mu, NULL);
	rv_cond_init_mono(&j->cv);
	rv_cond_init_mono(&j->done_cv[0]);
	rv_cond_init_mono(&j->done_cv[1]);

	if (mkdir(j->dir, 0700) < 0 && errno != EEXIST) {
		rv_err_set(err, -errno, NULL, "could not create %s: %s", j->dir, strerror(errno));
		goto fail;
	}
	j->dirfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j->dirfd < 0) {
		rv_err_set(err, -errno, NULL, "could not open %s: %s", j->dir, strerror(errno));
		goto fail;
	}
	j->lockfd = openat(j->dirfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (j->lockfd < 0) {
		rv_err_set(err, -errno, NULL, "could not open %s/lock: %s", j->dir,
			   strerror(errno));
		goto fail;
	}
	if (flock(j->lockfd, LOCK_EX | LOCK_NB) < 0) {
		int rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		rv_err_set(err, rc, NULL, "could not lock %s: %s", j->dir,
			   rc == -EBUSY ? "another process has the journal open" : strerror(errno));
		goto fail;
	}
	/* Half-written files of a crash: never read, the real ones are intact. */
	unlinkat(j->dirfd, "snapshot.tmp", 0);
	unlinkat(j->dirfd, "journal.tmp", 0);
	if (journal_replay(j, on_snapshot, on_record, ctx, err) < 0)
		goto fail;
	return j;
fail:
	journal_close(j);
	return NULL;
}

/* ---- append, commit, sync ---- */

int64_t journal_append(struct journal *j, int type, const void *data, size_t len)
{
	if (type < 0 || (!data && len))
		return -EINVAL;
	if (len > j->max_record)
		return -EMSGSIZE;
	/* The payload's checksum is taken outside the lock; the header's
	 * (which holds the seq) is chained to it inside. */
	uint32_t crc = journal_crc(0, data, len);
	pthread_mutex_lock(&j->mu);
	if (j->failed) {
		pthread_mutex_unlock(&j->mu);
		return j->failed;
	}
	if (journal_buf_reserve(&j->buf, JOURNAL_BATCH + JOURNAL_REC_HDR + len) < 0) {
		pthread_mutex_unlock(&j->mu);
		return -ENOMEM;
	}
	if (j->buf.len == 0)
		j->buf.len = JOURNAL_BATCH; /* the commit fills it in */
	int64_t seq = ++j->st.seq;
	uint8_t *h = j->buf.data + j->buf.len;
	journal_put32(h + 4, (uint32_t)len);
	journal_put64(h + 8, (uint64_t)seq);
	journal_put32(h + 16, (uint32_t)type);
	journal_put32(h, journal_crc(crc, h + 4, JOURNAL_REC_HDR - 4));
	if (len)
		memcpy(h + JOURNAL_REC_HDR, data, len);
	j->buf.len += JOURNAL_REC_HDR + len;
	j->st.records++;
	pthread_mutex_unlock(&j->mu);
	return seq;
}

/* Put the batch a writer took (records from durable+1) back in front of what
 * was appended since.  Caller holds mu.  -ENOMEM fails the journal. */
static int journal_untake(struct journal *j, struct journal_buf *taken)
{
	size_t more = j->buf.len > JOURNAL_BATCH ? j->buf.len - JOURNAL_BATCH : 0;
	if (taken->len == 0) { /* took nothing: j->buf is right as it is */
		free(taken->data);
		*taken = (struct journal_buf){ 0 };
		return 0;
	}
	if (journal_buf_reserve(taken, more) < 0)
		return -ENOMEM;
	if (more)
		memcpy(taken->data + taken->len, j->buf.data + JOURNAL_BATCH, more);
	taken->len += more;
	struct journal_buf t = j->buf;
	j->buf = *taken;
	t.len = 0;
	*taken = t;
	return 0;
}

/* Take the pending batch: j->buf moves to *taken, j->buf restarts from the
 * spare.  Caller holds mu. */
static void journal_take(struct journal *j, struct journal_buf *taken)
{
	*taken = j->buf;
	j->buf = j->spare;
	j->buf.len = 0;
	j->spare = (struct journal_buf){ 0 };
}

static void journal_recycle(struct journal *j, struct journal_buf *b)
{
	if (j->spare.data) {
		free(b->data);
	} else {
		j->spare = *b;
		j->spare.len = 0;
	}
	*b = (struct journal_buf){ 0 };
}

/* Add a step of zeros after zero_end while commits go on below it.
 * Caller holds mu and saw !extending; mu is released during the I/O. */
static void journal_extend_locked(struct journal *j)
{
	j->extending = true;
	int fd = j->fd;
	uint64_t gen = j->zero_gen;
	off_t step = (off_t)j->prewrite < JOURNAL_EXTEND_STEP ? (off_t)j->prewrite
							      : JOURNAL_EXTEND_STEP;
	off_t from = j->zero_end, to = from + step;
	pthread_mutex_unlock(&j->mu);
	int64_t t0 = journal_mono_us();
	int rc = journal_extend(j, fd, from, to);
	int64_t us = journal_mono_us() - t0;
	if (us >= JOURNAL_SLOW_MS * 1000)
		rv_log_warn("a journal prewrite was slow", "ms=%" PRId64 " bytes=%lld", us / 1000,
			    (long long)(to - from));
	pthread_mutex_lock(&j->mu);
	if (us > j->st.extend_us_max)
		j->st.extend_us_max = us;
	/* A failure leaves the room as it was: the next leader tries again. */
	if (rc == 0 && gen == j->zero_gen && to > j->zero_end)
		j->zero_end = to;
	j->extending = false;
	pthread_cond_broadcast(&j->cv);
}

/* Count a commit's I/O time (us) in the stats.  Caller holds mu. */
static void journal_time_sync(struct journal *j, int64_t us)
{
	int b = 0;
	while (b < JOURNAL_SYNC_BUCKETS && (double)us > journal_sync_le_ms[b] * 1000.0)
		b++;
	j->st.sync_hist[b]++;
	j->st.sync_us_sum += us;
	if (us > j->st.sync_us_max)
		j->st.sync_us_max = us;
}

/* One commit's batch and where it goes, fixed under mu before the I/O. */
struct journal_commit {
	struct journal_buf taken; /* the records from durable+1 */
	int64_t upto;             /* the seq it makes durable */
	uint64_t gen;             /* commit_gen of this commit */
	off_t off;                /* where the batch is written */
	int fd;
	off_t grow_from, grow_to; /* zeros to add first (grow_to 0: none) */
	bool fatal;               /* the disk's state is unknown: fail the journal */
	int64_t us;               /* the I/O's time */
};

/* Take what is buffered for one commit.  Caller holds mu and saw !writing;
 * mu is released during the commit delay and the wait for a prewrite. */
static void journal_commit_take(struct journal *j, struct journal_commit *c)
{
	j->writing = true;
	if (j->commit_delay_us > 0) {
		/* Let the records of threads about to append join this commit. */
		pthread_mutex_unlock(&j->mu);
		struct timespec d = { .tv_sec = 0, .tv_nsec = (long)j->commit_delay_us * 1000 };
		nanosleep(&d, NULL);
		pthread_mutex_lock(&j->mu);
	}
	*c = (struct journal_commit){ 0 };
	journal_take(j, &c->taken);
	c->upto = j->st.seq;
	c->gen = ++j->commit_gen;
	j->inflight_upto = c->upto;
	c->off = j->good_off;
	c->fd = j->fd;
	off_t end = c->off + (off_t)(c->taken.len > JOURNAL_BATCH ? c->taken.len : 0);
	/* Zeros being written at zero_end must not land on this batch. */
	while (j->extending && end > j->zero_end)
		pthread_cond_wait(&j->cv, &j->mu);
	/* No room left (a cut after a failed write, a batch above prewrite):
	 * make it now, else this fdatasync commits the size anyway. */
	c->grow_to = j->prewrite && end > j->zero_end ? end + (off_t)j->prewrite : 0;
	c->grow_from = j->zero_end;
}

/* Write the batch and fdatasync, without mu.  0, or -errno with c->fatal
 * set when what the disk holds is unknown. */
static int journal_commit_io(struct journal *j, struct journal_commit *c)
{
	struct journal_buf *t = &c->taken;
	int rc = 0;
	int64_t t0 = journal_mono_us(), t_write = t0;
	if (c->grow_to && journal_extend(j, c->fd, c->grow_from, c->grow_to) < 0)
		c->grow_to = 0; /* appending still works, slower */
	if (t->len > JOURNAL_BATCH) {
		uint8_t n[8];
		journal_put64(n, t->len - JOURNAL_BATCH);
		int64_t first = (int64_t)journal_get64(t->data + JOURNAL_BATCH + 8);
		journal_rec_format(t->data, first, JOURNAL_TYPE_BATCH, n, sizeof(n));
		memcpy(t->data + JOURNAL_REC_HDR, n, sizeof(n));
		rc = journal_pwrite_all(c->fd, t->data, t->len, c->off);
		t_write = journal_mono_us();
	} else {
		t->len = 0; /* nothing pending: just the fdatasync */
	}
	if (rc < 0) {
		/* Cut a partial record off so the next write starts clean; the
		 * records stay buffered for the next sync. */
		if (ftruncate(c->fd, c->off) < 0)
			c->fatal = true;
	} else if (!j->nosync && fdatasync(c->fd) < 0) {
		/* After a failed fsync the page cache may have dropped the
		 * pages: what the disk holds is unknown until a replay. */
		rc = -errno;
		c->fatal = true;
	}
	int64_t t1 = journal_mono_us();
	c->us = t1 - t0;
	if (c->us >= JOURNAL_SLOW_MS * 1000)
		rv_log_warn("a journal commit was slow: every reply waiting for it waited as long",
			    "ms=%" PRId64 " write_ms=%" PRId64 " sync_ms=%" PRId64
			    " bytes=%zu grew=%d",
			    c->us / 1000, (t_write - t0) / 1000, (t1 - t_write) / 1000, t->len,
			    c->grow_to != 0);
	return rc;
}

/* Account a commit that wrote rc and give its batch back.  Caller holds mu.
 * 0, or -EIO when the journal failed. */
static int journal_commit_settle(struct journal *j, struct journal_commit *c, int rc)
{
	journal_time_sync(j, c->us);
	if (c->grow_to > j->zero_end)
		j->zero_end = c->grow_to;
	if (rc < 0) { /* cut at off, or failed */
		j->zero_end = c->off;
		j->zero_gen++;
	}
	if (rc == 0) {
		j->good_off = c->off + (off_t)c->taken.len;
		if (j->zero_end < j->good_off)
			j->zero_end = j->good_off;
		if (c->upto > j->st.durable_seq)
			j->st.durable_seq = c->upto;
		j->st.bytes += (int64_t)c->taken.len;
		if (!j->nosync)
			j->st.fsyncs++;
		if (j->snap_active && j->snap_tail < 0 && c->taken.len && c->upto > j->snap_seq)
			j->snap_tail = c->off;
		journal_recycle(j, &c->taken);
	} else if (c->fatal || journal_untake(j, &c->taken) < 0) {
		j->failed = -EIO;
		rc = -EIO;
		free(c->taken.data);
	} else {
		journal_recycle(j, &c->taken);
	}
	return rc;
}

/* Lead one commit: write and fdatasync everything buffered.  Caller holds mu
 * and saw !writing; mu is released during the I/O. */
static int journal_commit_locked(struct journal *j)
{
	struct journal_commit c;
	journal_commit_take(j, &c);
	pthread_mutex_unlock(&j->mu);
	int rc = journal_commit_io(j, &c);
	pthread_mutex_lock(&j->mu);
	rc = journal_commit_settle(j, &c, rc);
	j->writing = false;
	pthread_cond_broadcast(&j->cv);
	if (rc == 0) {
		pthread_cond_broadcast(&j->done_cv[c.gen & 1]);
		if (j->buf.len > JOURNAL_BATCH) /* one of them leads the next */
			pthread_cond_signal(&j->done_cv[(c.gen + 1) & 1]);
	} else {
		journal_wake_all(j);
	}
	if (rc == 0 && j->prewrite && !j->extending && !j->failed &&
	    j->zero_end - j->good_off < (off_t)j->prewrite / 2)
		journal_extend_locked(j);
	return rc;
}

int journal_sync(struct journal *j, int64_t seq, int timeout_ms)
{
	int64_t deadline = rv_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	int rc = 0;
	pthread_mutex_lock(&j->mu);
	if (seq <= 0)
		seq = j->st.seq;
	if (seq > j->st.seq) {
		pthread_mutex_unlock(&j->mu);
		return -EINVAL;
	}
	while (j->st.durable_seq < seq) {
		if (j->failed) {
			rc = j->failed;
			break;
		}
		if (!j->writing) {
			rc = journal_commit_locked(j);
			if (rc < 0)
				break;
			continue;
		}
		/* Covered by the commit in flight, or by the next one: that
		 * one's waiters also look again every JOURNAL_LEAD_POLL_MS, in
		 * case the wake-up meant for its leader went to a thread that
		 * had just timed out. */
		bool next = seq > j->inflight_upto;
		uint64_t gen = j->commit_gen + (next ? 1 : 0);
		int64_t until = deadline;
		if (next && rv_mono_ms() + JOURNAL_LEAD_POLL_MS < until)
			until = rv_mono_ms() + JOURNAL_LEAD_POLL_MS;
		if (journal_wait_on(j, &j->done_cv[gen & 1], until) == ETIMEDOUT &&
		    rv_mono_ms() >= deadline && j->st.durable_seq < seq) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&j->mu);
	return rc;
}

/* ---- snapshot ---- */

int64_t journal_snapshot_begin(struct journal *j)
{
	pthread_mutex_lock(&j->mu);
	int64_t s = j->failed ? j->failed : j->snap_active ? -EBUSY : j->st.seq;
	if (s >= 0) {
		j->snap_active = true;
		j->snap_seq = s;
		j->snap_tail = -1;
	}
	pthread_mutex_unlock(&j->mu);
	return s;
}

void journal_snapshot_abort(struct journal *j)
{
	pthread_mutex_lock(&j->mu);
	j->snap_active = false;
	pthread_mutex_unlock(&j->mu);
}

static void journal_snap_step(struct journal *j, int step)
{
	if (j->snap_step)
		j->snap_step(j->snap_step_ctx, step);
}

/* Take the writer slot for a snapshot (mu held): 0, or -errno with err. */
static int journal_snap_slot(struct journal *j, struct rv_err *err)
{
	int64_t deadline = rv_mono_ms() + JOURNAL_IO_WAIT_MS;
	while ((j->writing || j->extending) && !j->failed) {
		if (journal_wait(j, deadline) == ETIMEDOUT && (j->writing || j->extending))
			return rv_err_set(
				err, -ETIMEDOUT, NULL,
				"could not take a snapshot: a journal write is still running");
	}
	if (j->failed)
		return rv_err_set(err, j->failed, NULL,
				  "could not take a snapshot: the journal failed");
	j->writing = true;
	return 0;
}

/* Drop the records up to s from the front of a taken batch: the snapshot
 * covers them. */
static void journal_drop_upto(struct journal_buf *b, int64_t s)
{
	if (b->len <= JOURNAL_BATCH)
		return;
	size_t off = JOURNAL_BATCH;
	while (off + JOURNAL_REC_HDR <= b->len && (int64_t)journal_get64(b->data + off + 8) <= s)
		off += JOURNAL_REC_HDR + journal_get32(b->data + off + 4);
	if (off > b->len)
		off = b->len;
	memmove(b->data + JOURNAL_BATCH, b->data + off, b->len - off);
	b->len = JOURNAL_BATCH + (b->len - off);
}

/* The fresh journal's records (after its header) in *out: the batches made
 * durable in the old journal from tail (-1: none) to good_off, then the
 * taken batch, formatted; *base its header's base.  Writer slot held.
 * 0 or -errno with err. */
static int journal_fresh_recs(struct journal *j, off_t tail, int64_t s, struct journal_buf *taken,
			      struct journal_buf *out, int64_t *base, struct rv_err *err)
{
	size_t n = tail >= 0 ? (size_t)(j->good_off - tail) : 0;
	size_t more = taken->len > JOURNAL_BATCH ? taken->len : 0;
	*out = (struct journal_buf){ .data = malloc(n + more + 1), .cap = n + more + 1 };
	if (!out->data)
		return rv_err_set(err, -ENOMEM, NULL, "could not take a snapshot: out of memory");
	int rc = 0;
	ssize_t r = n ? pread(j->fd, out->data, n, tail) : 0;
	if (r != (ssize_t)n)
		rc = r < 0 ? -errno : -EIO;
	if (rc < 0)
		return rv_err_set(err, rc, NULL, "could not read %s/journal: %s", j->dir,
				  strerror(-rc));
	/* The copied batches follow one another from the first's seq on; a
	 * replay skips their records up to the snapshot's. */
	*base = n ? (int64_t)journal_get64(out->data + 8) - 1 : s;
	if (more) {
		uint8_t c[8];
		journal_put64(c, taken->len - JOURNAL_BATCH);
		int64_t first = (int64_t)journal_get64(taken->data + JOURNAL_BATCH + 8);
		journal_rec_format(taken->data, first, JOURNAL_TYPE_BATCH, c, sizeof(c));
		memcpy(taken->data + JOURNAL_REC_HDR, c, sizeof(c));
		memcpy(out->data + n, taken->data, more);
	}
	out->len = n + more;
	return 0;
}

/* The snapshot's rename and the fresh journal, the writer slot held.
 * *renamed: the snapshot is in place.  0 or -errno with err. */
static int journal_snap_replace(struct journal *j, int tmpfd, int64_t s, off_t tail,
				struct journal_buf *taken, bool *renamed, struct rv_err *err)
{
	int rc = journal_tmp_commit(j, "snapshot", tmpfd, NULL, err);
	*renamed = rc == 0;
	if (rc < 0)
		return rc;
	journal_snap_step(j, JOURNAL_SNAP_RENAMED);
	/* Buffered records the snapshot covers are never written. */
	journal_drop_upto(taken, s);
	struct journal_buf recs;
	int64_t base = s;
	rc = journal_fresh_recs(j, tail, s, taken, &recs, &base, err);
	if (rc == 0)
		rc = journal_start_fresh(j, base, recs.data, recs.len, err);
	free(recs.data);
	if (rc == 0)
		journal_snap_step(j, JOURNAL_SNAP_DONE);
	/* Without a fresh journal the old one goes on: the records after s
	 * follow the ones it holds, and a replay skips those <= s. */
	return rc;
}

int journal_snapshot_write(struct journal *j, const void *state, size_t len, struct rv_err *err)
{
	int rc = 0;
	if (!state && len)
		rc = rv_err_set(err, -EINVAL, NULL, "could not take a snapshot: no state");
	else if (len > j->max_snapshot)
		rc = rv_err_set(err, -EMSGSIZE, NULL,
				"could not take a snapshot: %zu bytes, above max_snapshot %zu", len,
				j->max_snapshot);
	pthread_mutex_lock(&j->mu);
	int64_t s = j->snap_seq;
	if (rc == 0 && !j->snap_active)
		rc = rv_err_set(err, -EINVAL, NULL, "could not take a snapshot: none begun");
	pthread_mutex_unlock(&j->mu);
	uint8_t h[JOURNAL_HDR + JOURNAL_REC_HDR];
	journal_hdr_format(h, journal_snap_magic, s);
	journal_rec_format(h + JOURNAL_HDR, s, 0, state, len);
	int tmpfd = -1;
	/* The slow part, with commits going on in the old journal. */
	if (rc == 0)
		rc = journal_tmp_write(j, "snapshot", h, sizeof(h), state, len, 0, &tmpfd, err);
	if (rc == 0)
		journal_snap_step(j, JOURNAL_SNAP_WRITTEN);

	pthread_mutex_lock(&j->mu);
	if (rc == 0)
		rc = journal_snap_slot(j, err);
	if (rc < 0) {
		j->snap_active = false;
		pthread_mutex_unlock(&j->mu);
		if (tmpfd >= 0) {
			close(tmpfd);
			unlinkat(j->dirfd, "snapshot.tmp", 0);
		}
		return rc;
	}
	off_t tail = j->snap_tail;
	int64_t upto = j->st.seq;
	struct journal_buf taken;
	journal_take(j, &taken);
	pthread_mutex_unlock(&j->mu);

	bool renamed;
	rc = journal_snap_replace(j, tmpfd, s, tail, &taken, &renamed, err);

	pthread_mutex_lock(&j->mu);
	if (renamed) {
		if (s > j->st.durable_seq)
			j->st.durable_seq = s;
		j->st.snapshots++;
	}
	if (rc == 0) {
		if (upto > j->st.durable_seq)
			j->st.durable_seq = upto;
		journal_recycle(j, &taken);
	} else if (journal_untake(j, &taken) < 0) {
		free(taken.data);
		j->failed = -EIO;
	} else {
		journal_recycle(j, &taken);
	}
	if (rc == -EIO && renamed)
		j->failed = -EIO;
	j->snap_active = false;
	j->writing = false;
	journal_wake_all(j); /* durable_seq jumped; the waiters need a leader */
	pthread_mutex_unlock(&j->mu);
	return rc;
}

int journal_snapshot(struct journal *j, const void *state, size_t len, struct rv_err *err)
{
	int64_t s = journal_snapshot_begin(j);
	if (s < 0)
		return rv_err_set(err, (int)s, NULL, "could not take a snapshot: %s",
				  s == -EBUSY ? "one is being taken" : "the journal failed");
	return journal_snapshot_write(j, state, len, err);
}

void journal_stats(const struct journal *j, struct journal_stats *st)
{
	struct journal *mj = (struct journal *)j; /* the lock only */
	pthread_mutex_lock(&mj->mu);
	*st = j->st;
	pthread_mutex_unlock(&mj->mu);
}

int64_t journal_durable_seq(const struct journal *j)
{
	struct journal *mj = (struct journal *)j; /* the lock only */
	pthread_mutex_lock(&mj->mu);
	int64_t s = j->st.durable_seq;
	pthread_mutex_unlock(&mj->mu);
	return s;
}

void journal_close(struct journal *j)
{
	if (!j)
		return;
	if (j->fd >= 0)
		journal_sync(j, 0, JOURNAL_IO_WAIT_MS);
	/* A leader that timed out the sync above still owns the fd. */
	pthread_mutex_lock(&j->mu);
	int64_t deadline = rv_mono_ms() + JOURNAL_IO_WAIT_MS;
	while ((j->writing || j->extending) && journal_wait(j, deadline) != ETIMEDOUT)
		;
	bool busy = j->writing || j->extending;
	pthread_mutex_unlock(&j->mu);
	if (busy)
		return; /* leak rather than free what a stuck writer uses */
	if (j->fd >= 0)
		close(j->fd);
	if (j->lockfd >= 0)
		close(j->lockfd);
	if (j->dirfd >= 0)
		close(j->dirfd);
	free(j->buf.data);
	free(j->spare.data);
	free(j->dir);
	pthread_cond_destroy(&j->cv);
	pthread_cond_destroy(&j->done_cv[0]);
	pthread_cond_destroy(&j->done_cv[1]);
	pthread_mutex_destroy(&j->mu);
	free(j);
}
