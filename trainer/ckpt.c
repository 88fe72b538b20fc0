/*
 * ckpt.c: the flash checkpoint, two POSIX shared-memory slots per rank
 * (/dev/shm/rover-<job>-<rank>-{0,1}).
 *
 * A slot is a 68 KiB header and the payload (the buffers one after the
 * other, each at a 64-byte boundary).  A save picks the slot that does not
 * hold the newest committed checkpoint, clears its committed word, copies
 * the buffers and checksums them in the same pass (copy.c: CRC32C, with the
 * SSE 4.2 instruction where the CPU has it), writes the header with a
 * CRC32C of its own and, after a release fence, the committed word.  A load
 * reads the committed word with acquire, checks both CRCs and takes the
 * highest sequence number: a slot whose writer died before the last store,
 * or whose bytes changed since, is never loaded.
 *
 * Pages are faulted in once (MAP_POPULATE when a slot is sized), so a save
 * is one pass over warm pages.  The handle's thread calls everything here;
 * rv_trainer_save copies with one more thread, and rv_trainer_save_start
 * reports the position and leaves the copy and the commit to a thread of
 * the save's own (struct trainer_save) until rv_trainer_save_wait: every
 * other call on the slots waits for it first.
 */
#include "trainer.h"

#include "ckslot.h"
#include "crc32c.h"
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SLOT_HDR  ((uint64_t)RV_CKSLOT_HEADER)
#define SLOT_GROW (2u << 20)  /* segments grow in 2 MiB steps */
#define SPLIT_MIN (16u << 20) /* a save of this many bytes is copied by two threads */
#define VIEW      2           /* t->slot[VIEW]: a checkpoint loaded from elsewhere */

_Static_assert(RV_CKSLOT_HEADER == RV_TRAINER_SLOT_HEADER, "one slot header size");
_Static_assert(RV_CKSLOT_MAX_BUFS == RV_TRAINER_MAX_BUFS, "one buffer limit");

uint32_t rv_trainer_crc32c(uint32_t crc, const void *data, size_t n)
{
	return rv_crc32c(crc, data, n);
}

/* ---- slots ---- */
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
	rv_trainer_save_wait(t, NULL);
	for (int s = 0; s <= VIEW; s++)
		slot_unmap(&t->slot[s]);
	t->loaded_slot = -1;
}

/* Own slot s's committed header h: does its payload check?  Computed once
 * per committed save (see trainer_slot.ok_seq). */
static bool slot_payload_ok(struct rv_trainer *t, int s, const struct rv_ckslot_hdr *h)
{
	struct trainer_slot *sl = &t->slot[s];
	if (h->seq && sl->ok_seq == h->seq && sl->ok_crc == h->crc)
		return true;
	if (!rv_ckslot_payload_ok(h))
		return false;
	sl->ok_seq = h->seq;
	sl->ok_crc = h->crc;
	return true;
}

/* Map slot s as it is; 0, -ENOENT when it does not exist (create false). */
static int slot_open(struct rv_trainer *t, int s, bool create, struct rv_err *err)
{
	struct trainer_slot *sl = &t->slot[s];
	if (sl->fd >= 0)
		return 0;
	char name[200];
	rv_ckslot_name(name, sizeof(name), t->job, t->rank, s);
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

/* The header of slot s when it is committed and consistent, else NULL. */
static const struct rv_ckslot_hdr *slot_committed(const struct rv_trainer *t, int s)
{
	const struct trainer_slot *sl = &t->slot[s];
	return rv_ckslot_committed(sl->map, sl->mapped);
}

int rv_trainer_reserve(struct rv_trainer *t, uint64_t bytes, struct rv_err *err)
{
	rv_trainer_save_wait(t, NULL);
	uint64_t payload = bytes + (uint64_t)RV_TRAINER_MAX_BUFS * RV_CKSLOT_ALIGN;
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

void rv_trainer_position(const struct rv_trainer *t, int64_t *task_id, int64_t *consumed)
{
	/* between shards: the last one done, whole ("the last task it finished,
	 * with its full length", as the master's checkpoint report takes it) */
	*task_id = t->cur.id ? t->cur.id : t->last_id;
	*consumed = t->cur.id ? t->consumed : t->last_id ? t->last_len : 0;
}

/*
 * A save from the choice of its slot to its commit.  The thread of an
 * overlapped save touches only this (the slot through h, the master through
 * mc), so the loop's thread goes on with the handle meanwhile.
 */
struct trainer_save {
	struct trainer_copy copy;
	struct rv_ckslot_hdr *h;     /* the slot's header, in its mapping */
	struct rv_master_client *mc; /* reports the position; NULL: no master */
	struct rv_trainer *t;        /* whose courier queues the report */
	int slot, rank;
	uint64_t seq, payload;
	int64_t step, task_id, consumed;
	pthread_t thread;
	bool threaded; /* thread runs the copy (else it was done in start) */
	pid_t pid;     /* the process whose thread it is */
	int64_t stall_ns;
	double copy_s;
	bool reported;
	struct rv_err rerr; /* the report's error, when it failed */
};

static struct trainer_save *save_free(struct trainer_save *sv)
{
	if (sv) {
		trainer_copy_release(&sv->copy);
		free(sv);
	}
	return NULL;
}

/* The payload of n buffers (their sizes checked), or a negative errno. */
static int64_t save_payload(struct rv_trainer *t, const void *const *bufs, const uint64_t *sizes,
			    int n, struct rv_err *err)
{
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
		payload += rv_ckslot_align(sizes[i]);
	}
	return (int64_t)payload;
}

/* Choose the slot a save writes (the one not holding the newest committed
 * checkpoint), with the sequence number it gets, clear its committed word
 * and size it for payload.  The slot, or a negative errno. */
static int save_slot(struct rv_trainer *t, uint64_t payload, uint64_t *seq, struct rv_err *err)
{
	/* both slots as they are now (another process may have saved before) */
	int rc;
	for (int s = 0; s < 2; s++)
		if ((rc = slot_open(t, s, false, err)) < 0 && rc != -ENOENT)
			return trainer_fail(t, err, rc);
	const struct rv_ckslot_hdr *h0 = slot_committed(t, 0), *h1 = slot_committed(t, 1);
	int s = !h0 ? 0 : !h1 ? 1 : h0->seq <= h1->seq ? 0 : 1;
	*seq = 1 + (h0 ? h0->seq : 0);
	if (h1 && h1->seq + 1 > *seq)
		*seq = h1->seq + 1;
	if (t->loaded_slot == s)
		t->loaded_slot = -1; /* its view is about to be overwritten */
	struct trainer_slot *sl = &t->slot[s];
	if (sl->map)
		atomic_store_explicit(&((struct rv_ckslot_hdr *)sl->map)->committed, 0,
				      memory_order_release);
	if ((rc = slot_size(t, s, payload, err)) < 0)
		return trainer_fail(t, err, rc);
	if (!sl->map) /* mmap gave address 0: not ours to use */
		return trainer_fail(t, err,
				    rv_err_set(err, -EIO, "shm", "no checkpoint slot mapped"));
	atomic_store_explicit(&((struct rv_ckslot_hdr *)sl->map)->committed, 0,
			      memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	return s;
}

/* Everything a save does before its copy: the save (free with save_free),
 * or NULL with *rc the negative errno. */
static struct trainer_save *save_prepare(struct rv_trainer *t, int64_t step, int64_t task_id,
					 int64_t consumed, const void *const *bufs,
					 const uint64_t *sizes, int n, int *rc, struct rv_err *err)
{
	int64_t payload = save_payload(t, bufs, sizes, n, err);
	if (payload < 0) {
		*rc = (int)payload;
		return NULL;
	}
	struct trainer_save *sv = calloc(1, sizeof(*sv));
	if (!sv) {
		*rc = trainer_fail(t, err, rv_err_set(err, -ENOMEM, "", "out of memory"));
		return NULL;
	}
	int s = save_slot(t, (uint64_t)payload, &sv->seq, err);
	if (s < 0) {
		*rc = s;
		return save_free(sv);
	}
	if (trainer_copy_init(&sv->copy, t->slot[s].map + SLOT_HDR, bufs, sizes, n) < 0) {
		*rc = trainer_fail(t, err, rv_err_set(err, -ENOMEM, "", "out of memory"));
		return save_free(sv);
	}
	sv->h = (struct rv_ckslot_hdr *)t->slot[s].map;
	sv->mc = t->mc_report;
	sv->t = t;
	sv->slot = s;
	sv->rank = t->rank;
	sv->payload = (uint64_t)payload;
	sv->step = step;
	sv->task_id = task_id;
	sv->consumed = task_id ? consumed : 0;
	return sv;
}

/* Report the data position of the step, for a restore on other ranks or
 * after the world changed (the slot's copy is safe without it). */
static void save_report(struct trainer_save *sv)
{
	if (!sv->mc)
		return;
	struct rv_ckpt_report r = {
		.step = sv->step,
		.worker = sv->rank,
		.task_id = sv->task_id,
		.consumed = sv->consumed,
	};
	/* queued behind the dones before it, ahead of the done of the task it
	 * names (which the master would otherwise find finished) */
	int rc = trainer_courier_ckpt(sv->t, &r, &sv->rerr);
	if (rc == -ENOSYS)
		rc = rv_master_ckpt_report(sv->mc, &r, &sv->rerr);
	sv->reported = rc == 0;
}

/* Copy, write the header, commit. */
static void save_copy(struct trainer_save *sv, int threads)
{
	int64_t c0 = trainer_now_ns();
	trainer_copy_run(&sv->copy, threads);
	sv->copy_s = secs_since(c0);

	struct rv_ckslot_hdr *h = sv->h;
	h->magic = RV_CKSLOT_MAGIC;
	h->version = RV_CKSLOT_VERSION;
	h->nbufs = (uint32_t)sv->copy.n;
	h->seq = sv->seq;
	h->step = sv->step;
	h->payload = sv->payload;
	h->task_id = sv->task_id;
	h->consumed = sv->consumed;
	h->crc = sv->copy.crc;
	h->pad = 0;
	memset(h->sizes, 0, sizeof(h->sizes));
	for (int i = 0; i < sv->copy.n; i++)
		h->sizes[i] = sv->copy.sizes[i];
	h->hcrc = rv_ckslot_hdr_crc(h);
	atomic_store_explicit(&h->committed, RV_CKSLOT_COMMITTED, memory_order_release);
}

static void *save_thread(void *arg)
{
	save_copy(arg, 1);
	return NULL;
}

/* The stats of a save that is done (a failed report becomes t's last
 * error, not the save's), and its memory freed. */
static void save_done(struct rv_trainer *t, struct trainer_save *sv, int64_t stall_ns,
		      struct rv_trainer_save_stats *stats)
{
	if (sv->mc && !sv->reported)
		trainer_fail(t, &sv->rerr, sv->rerr.code);
	if (stats)
		*stats = (struct rv_trainer_save_stats){
			.stall_s = (double)stall_ns / 1e9,
			.copy_s = sv->copy_s,
			.bytes = sv->copy.bytes,
			.slot = sv->slot,
			.reported = sv->reported,
			.report_failed = sv->mc && !sv->reported,
		};
	save_free(sv);
}

int rv_trainer_save(struct rv_trainer *t, int64_t step, const void *const *bufs,
		    const uint64_t *sizes, int n, struct rv_trainer_save_stats *stats,
		    struct rv_err *err)
{
	int64_t task, consumed;
	rv_trainer_position(t, &task, &consumed);
	return rv_trainer_save_at(t, step, task, consumed, bufs, sizes, n, stats, err);
}

int rv_trainer_save_at(struct rv_trainer *t, int64_t step, int64_t task_id, int64_t consumed,
		       const void *const *bufs, const uint64_t *sizes, int n,
		       struct rv_trainer_save_stats *stats, struct rv_err *err)
{
	int64_t t0 = trainer_now_ns();
	rv_trainer_save_wait(t, NULL); /* one save at a time */
	int rc = 0;
	struct trainer_save *sv =
		save_prepare(t, step, task_id, consumed, bufs, sizes, n, &rc, err);
	if (!sv)
		return rc;
	/* the caller waits anyway: a second thread shares the copy */
	save_copy(sv, sv->copy.bytes >= SPLIT_MIN ? 2 : 1);
	save_report(sv);
	save_done(t, sv, trainer_now_ns() - t0, stats);
	return 0;
}

int rv_trainer_save_start(struct rv_trainer *t, int64_t step, const void *const *bufs,
			  const uint64_t *sizes, int n, struct rv_err *err)
{
	int64_t t0 = trainer_now_ns();
	rv_trainer_save_wait(t, NULL);
	int64_t task, consumed;
	rv_trainer_position(t, &task, &consumed);
	int rc = 0;
	struct trainer_save *sv = save_prepare(t, step, task, consumed, bufs, sizes, n, &rc, err);
	if (!sv)
		return rc;
	sv->pid = getpid();
	sv->threaded = pthread_create(&sv->thread, NULL, save_thread, sv) == 0;
	if (!sv->threaded)
		save_copy(sv, 1); /* no thread to be had: copied here, as a save */
	/* The position is reported here, before the loop goes on: the next
	 * step finishes the task it names (reporting it done), and a report
	 * that came after that would be refused as inexact.  A step reported
	 * but not yet committed is harmless: a restore takes the newest step
	 * every rank committed, whose report the master still holds. */
	save_report(sv);
	sv->stall_ns = trainer_now_ns() - t0;
	t->pending = sv;
	return 0;
}

int rv_trainer_save_wait(struct rv_trainer *t, struct rv_trainer_save_stats *stats)
{
	struct trainer_save *sv = t->pending;
	if (stats)
		*stats = (struct rv_trainer_save_stats){ .slot = -1 };
	if (!sv)
		return 0;
	t->pending = NULL;
	if (sv->threaded && sv->pid != getpid()) {
		/* a child forked while the save ran: the thread is its parent's */
		save_free(sv);
		return 0;
	}
	int64_t t0 = trainer_now_ns();
	if (sv->threaded)
		pthread_join(sv->thread, NULL);
	save_done(t, sv, sv->stall_ns + (trainer_now_ns() - t0), stats);
	return 1;
}

/* ROVER_CKPT_DIR, where rover-run persists the checkpoints; NULL: none. */
static const char *ckpt_dir(void)
{
	const char *d = getenv("ROVER_CKPT_DIR");
	return d && *d ? d : NULL;
}

static bool file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* Whether rank has a part anywhere: a slot in memory or a file of a step
 * the manifest lists. */
static bool has_part(const struct rv_trainer *t, int rank, const int64_t *steps, int nsteps)
{
	for (int s = 0; s < 2; s++) {
		char name[200], path[300];
		rv_ckslot_name(name, sizeof(name), t->job, rank, s);
		snprintf(path, sizeof(path), "/dev/shm%s", name);
		if (file_exists(path))
			return true;
	}
	const char *dir = ckpt_dir();
	for (int i = 0; dir && i < nsteps; i++) {
		char path[1100];
		rv_ckslot_file(path, sizeof(path), dir, steps[i], rank);
		if (file_exists(path))
			return true;
	}
	return false;
}

/* The steps the manifest lists (0 without a folder or a manifest; a bad
 * manifest counts as none: memory may still hold a checkpoint). */
static int manifest_steps(int64_t *steps, int max)
{
	const char *dir = ckpt_dir();
	if (!dir)
		return 0;
	int n = rv_ckslot_manifest_read(dir, steps, max, NULL);
	return n < 0 ? 0 : n;
}

/* Whose parts this rank loads: its own, or rank 0's when it has none (a
 * rank that did not exist when they were saved, the world having grown:
 * the state is taken to be replicated, as data parallel training keeps
 * it). */
static int source_rank(const struct rv_trainer *t, const int64_t *steps, int nsteps)
{
	if (t->rank == 0 || has_part(t, t->rank, steps, nsteps))
		return t->rank;
	return 0;
}

/* Map a slot image read-only into t->slot[VIEW]: a file (shm false) or a
 * shared-memory segment.  1 when it is a loadable checkpoint (*h set), 0
 * when absent or not loadable, or a negative errno. */
static int view_open(struct rv_trainer *t, const char *name, bool shm,
		     const struct rv_ckslot_hdr **h, struct rv_err *err)
{
	struct trainer_slot *v = &t->slot[VIEW];
	if (t->loaded_slot == VIEW)
		t->loaded_slot = -1;
	slot_unmap(v);
	int fd = shm ? shm_open(name, O_RDONLY | O_CLOEXEC, 0) : open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0
				       : rv_err_set(err, -errno, "ckpt", "could not open %s: %s",
						    name, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size < (off_t)SLOT_HDR) {
		close(fd);
		return 0;
	}
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		int rc = -errno;
		close(fd);
		return rv_err_set(err, rc, "ckpt", "could not map %s: %s", name, strerror(-rc));
	}
	v->fd = fd;
	v->map = m;
	v->mapped = (uint64_t)st.st_size;
	const struct rv_ckslot_hdr *hh = rv_ckslot_committed(m, v->mapped);
	if (!hh || !rv_ckslot_payload_ok(hh)) {
		slot_unmap(v);
		return 0;
	}
	*h = hh;
	return 1;
}

/* The steps of this rank's own committed slots into found: the newest
 * only once its CRC matches (a restart loads it, so that read is not
 * wasted), the older one as its header says (checked when it is loaded:
 * reading the whole of a slot nobody loads would cost a restart its time).
 * The count, or a negative errno. */
static int own_steps(struct rv_trainer *t, int64_t *found, struct rv_err *err)
{
	const struct rv_ckslot_hdr *h[2] = { NULL, NULL };
	for (int s = 0; s < 2; s++) {
		int rc = slot_open(t, s, false, err);
		if (rc < 0 && rc != -ENOENT)
			return rc;
		h[s] = rc < 0 ? NULL : slot_committed(t, s);
	}
	int newest = h[0] && (!h[1] || h[0]->seq > h[1]->seq) ? 0 : h[1] ? 1 : -1;
	if (newest >= 0 && !slot_payload_ok(t, newest, h[newest])) {
		h[newest] = NULL; /* torn or corrupted: never listed */
		newest = 1 - newest;
		if (h[newest] && !slot_payload_ok(t, newest, h[newest]))
			h[newest] = NULL;
	}
	int n = 0;
	for (int s = 0; s < 2; s++)
		if (h[s])
			found[n++] = h[s]->step;
	return n;
}

/* The steps of rank src's committed slots (read through the view), which
 * is then unmapped.  The count, or a negative errno. */
static int peer_steps(struct rv_trainer *t, int src, int64_t *found, struct rv_err *err)
{
	int n = 0;
	for (int s = 0; s < 2; s++) {
		const struct rv_ckslot_hdr *h = NULL;
		char name[200];
		rv_ckslot_name(name, sizeof(name), t->job, src, s);
		int rc = view_open(t, name, true, &h, err);
		if (rc < 0)
			return rc;
		if (h)
			found[n++] = h->step;
	}
	if (t->loaded_slot == VIEW)
		t->loaded_slot = -1;
	slot_unmap(&t->slot[VIEW]);
	return n;
}

int rv_trainer_steps(struct rv_trainer *t, int64_t *steps, int max, struct rv_err *err)
{
	rv_trainer_save_wait(t, NULL);
	int64_t man[RV_CKSLOT_MAX_STEPS];
	int nman = manifest_steps(man, RV_CKSLOT_MAX_STEPS);
	int src = source_rank(t, man, nman);
	int64_t found[2 + RV_CKSLOT_MAX_STEPS];
	int n = src == t->rank ? own_steps(t, found, err) : peer_steps(t, src, found, err);
	if (n < 0)
		return trainer_fail(t, err, n);
	const char *dir = ckpt_dir();
	for (int i = 0; dir && i < nman; i++) {
		char path[1100];
		rv_ckslot_file(path, sizeof(path), dir, man[i], src);
		if (file_exists(path))
			found[n++] = man[i];
	}
	/* newest first, each once */
	int k = 0;
	while (n > 0) {
		int best = 0;
		for (int i = 1; i < n; i++)
			if (found[i] > found[best])
				best = i;
		int64_t v = found[best];
		if (k < max)
			steps[k] = v;
		k++;
		int m = 0;
		for (int i = 0; i < n; i++)
			if (found[i] != v)
				found[m++] = found[i];
		n = m;
	}
	return k < max ? k : max;
}

static int loaded(struct rv_trainer *t, int slot, int from, int rank, int64_t *step, int *nbufs)
{
	const struct rv_ckslot_hdr *h = (const struct rv_ckslot_hdr *)t->slot[slot].map;
	if (!h)
		return 0;
	t->loaded_slot = slot;
	t->loaded_from = from;
	t->loaded_rank = rank;
	if (step)
		*step = h->step;
	if (nbufs)
		*nbufs = (int)h->nbufs;
	return 1;
}

int rv_trainer_load_step(struct rv_trainer *t, int64_t want, int64_t *step, int *nbufs,
			 struct rv_err *err)
{
	rv_trainer_save_wait(t, NULL);
	t->loaded_slot = -1;
	int64_t man[RV_CKSLOT_MAX_STEPS];
	int nman = manifest_steps(man, RV_CKSLOT_MAX_STEPS);
	int src = source_rank(t, man, nman);
	/* memory first: the newest committed slot whose CRC matches */
	int best = -1;
	uint64_t best_seq = 0;
	for (int s = 0; s < 2; s++) {
		const struct rv_ckslot_hdr *h = NULL;
		if (src == t->rank) {
			int rc = slot_open(t, s, false, err);
			if (rc == -ENOENT)
				continue;
			if (rc < 0)
				return trainer_fail(t, err, rc);
			h = slot_committed(t, s);
			if (!h || (want >= 0 && h->step != want))
				continue; /* read no slot that is not wanted */
			if (!slot_payload_ok(t, s, h))
				continue; /* torn or corrupted: never loaded */
		} else {
			char name[200];
			rv_ckslot_name(name, sizeof(name), t->job, src, s);
			int rc = view_open(t, name, true, &h, err);
			if (rc < 0)
				return trainer_fail(t, err, rc);
			if (!rc)
				continue;
		}
		if (!h || (want >= 0 && h->step != want))
			continue;
		if (best < 0 || h->seq > best_seq) {
			best = s;
			best_seq = h->seq;
		}
	}
	if (best >= 0 && src == t->rank)
		return loaded(t, best, 0, src, step, nbufs);
	if (best >= 0) {
		/* the view holds the last one opened: open the best again */
		const struct rv_ckslot_hdr *h = NULL;
		char name[200];
		rv_ckslot_name(name, sizeof(name), t->job, src, best);
		int rc = view_open(t, name, true, &h, err);
		if (rc < 0)
			return trainer_fail(t, err, rc);
		if (rc == 1 && (want < 0 || h->step == want))
			return loaded(t, VIEW, 0, src, step, nbufs);
	}
	/* then storage: the newest complete step (of the manifest) that checks */
	const char *dir = ckpt_dir();
	for (int i = 0; dir && i < nman; i++) {
		if (want >= 0 && man[i] != want)
			continue;
		char path[1100];
		rv_ckslot_file(path, sizeof(path), dir, man[i], src);
		const struct rv_ckslot_hdr *h = NULL;
		int rc = view_open(t, path, false, &h, err);
		if (rc < 0)
			return trainer_fail(t, err, rc);
		if (rc == 1 && h->step == man[i])
			return loaded(t, VIEW, 1, src, step, nbufs);
	}
	return 0;
}

int rv_trainer_load(struct rv_trainer *t, int64_t *step, int *nbufs, struct rv_err *err)
{
	return rv_trainer_load_step(t, -1, step, nbufs, err);
}

int rv_trainer_loaded_from(const struct rv_trainer *t, int *rank)
{
	if (t->loaded_slot < 0)
		return -ENOENT;
	if (rank)
		*rank = t->loaded_rank;
	return t->loaded_from;
}

int rv_trainer_loaded(const struct rv_trainer *t, int i, const void **data, uint64_t *size)
{
	if (t->loaded_slot < 0)
		return -ENOENT;
	const unsigned char *base = t->slot[t->loaded_slot].map;
	const struct rv_ckslot_hdr *h = (const struct rv_ckslot_hdr *)base;
	if (i < 0 || (uint32_t)i >= h->nbufs)
		return -ERANGE;
	const unsigned char *p = base + SLOT_HDR;
	for (int k = 0; k < i; k++)
		p += rv_ckslot_align(h->sizes[k]);
	*data = p;
	*size = h->sizes[i];
	return 0;
}

int rv_trainer_loaded_position(const struct rv_trainer *t, int64_t *task_id, int64_t *consumed)
{
	if (t->loaded_slot < 0)
		return -ENOENT;
	const struct rv_ckslot_hdr *h = (const struct rv_ckslot_hdr *)t->slot[t->loaded_slot].map;
	*task_id = h->task_id;
	*consumed = h->consumed;
	return 0;
}

/* The data checkpoint of step from ROVER_CKPT_DIR/step-S/data.json. */
static int data_from_storage(int64_t step, struct rv_data_ckpt *out, struct rv_err *err)
{
	const char *dir = ckpt_dir();
	if (!dir)
		return rv_err_set(err, -ENOENT, "step", "no data checkpoint of step %lld",
				  (long long)step);
	char path[1100];
	rv_ckslot_step_dir(path, sizeof(path), dir, step);
	strncat(path, "/data.json", sizeof(path) - strlen(path) - 1);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rv_err_set(err, -ENOENT, "step", "no data checkpoint of step %lld",
				  (long long)step);
	struct stat st;
	char *text = NULL;
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && st.st_size < (64 << 20) &&
	    (text = malloc((size_t)st.st_size + 1)))
		n = read(fd, text, (size_t)st.st_size);
	close(fd);
	if (n != st.st_size) {
		free(text);
		return rv_err_set(err, -EIO, "step", "could not read %s", path);
	}
	cJSON *root = rv_json_parse(text, (size_t)n, err);
	free(text);
	if (!root)
		return -EINVAL;
	int rc = rv_data_ckpt_from_json(root, out, err);
	cJSON_Delete(root);
	return rc;
}

int rv_trainer_restore_data(struct rv_trainer *t, int64_t step, struct rv_err *err)
{
	if (!t->mc)
		return trainer_fail(t, err,
				    rv_err_set(err, -ENOTCONN, "master", "no master to ask"));
	/* this rank's queued reports delivered, its window of shards dropped:
	 * the import replaces every task the master handed out */
	int rc = trainer_courier_forget(t);
	if (rc < 0)
		return trainer_fail(t, err,
				    rv_err_set(err, rc, "master",
					       "could not deliver the reports before the restore"));
	struct rv_data_ckpt ck = { 0 };
	/* the master composes it while it keeps the step's reports; storage
	 * has the copy rover-run took when it persisted the step.  A step not
	 * every rank reported (409: one died before its report) is no
	 * checkpoint of the data: the caller tries an older step. */
	rc = rv_master_ckpt_export(t->mc, step, &ck, err);
	if (rc == -ENOENT || rc == -EEXIST) {
		struct rv_err serr = { 0 };
		int src = data_from_storage(step, &ck, &serr);
		if (src == 0 || rc == -ENOENT) {
			rc = src;
			if (err && src < 0)
				*err = serr;
		}
	}
	if (rc < 0)
		return trainer_fail(t, err, rc);
	ck.step = step;
	rc = rv_master_ckpt_import(t->mc, &ck, err);
	rv_data_ckpt_release(&ck);
	if (rc < 0)
		return trainer_fail(t, err, rc);
	memset(&t->cur, 0, sizeof(t->cur));
	t->consumed = 0;
	t->last_id = t->last_len = 0;
	return 0;
}

int rv_trainer_unlink(const char *job, int rank)
{
	int rc = 0;
	for (int s = 0; s < 2; s++) {
		char name[200];
		rv_ckslot_name(name, sizeof(name), job, rank, s);
		if (shm_unlink(name) < 0 && errno != ENOENT)
			rc = -errno;
	}
	return rc;
}
