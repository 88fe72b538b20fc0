/*
 * ckpt.c: rover-run's side of the flash checkpoint (ckpt.h): the persister
 * thread, the manifest, keep-K, the segments' removal.
 *
 * Durability order for a step S: each rank's file is written under a
 * temporary name, fsync'd and renamed; data.json the same; the step's
 * folder is fsync'd; only then the manifest (temporary, fsync, rename,
 * fsync of DIR) names S.  A crash at any point leaves the manifest naming
 * complete steps only; a step folder it does not name is removed by the
 * next round.  Slots are read without a lock against the workers: a copy
 * is kept only when the CRC of the bytes written matches the header taken
 * before the copy and the slot still holds that header after it.
 */
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckslot.h"
#include "flags.h"
#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "master_client.h"
#include "parse.h"

#define CKPT_POLL_MS 100
#define CKPT_DATA_WAIT_MS 5000 /* for the other ranks' reports of a step */

/* One local rank's slots mapped read-only. */
struct rank_slots {
	void *map[2];
	uint64_t size[2];
};

static void slots_unmap(struct rank_slots *rs)
{
	for (int s = 0; s < 2; s++)
		if (rs->map[s])
			munmap(rs->map[s], rs->size[s]);
	memset(rs, 0, sizeof(*rs));
}

static void slots_map(const struct ckpt *c, int rank, struct rank_slots *rs)
{
	memset(rs, 0, sizeof(*rs));
	for (int s = 0; s < 2; s++) {
		char name[200];
		rv_ckslot_name(name, sizeof(name), c->job, rank, s);
		int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
		if (fd < 0)
			continue;
		struct stat st;
		if (fstat(fd, &st) == 0 && st.st_size >= RV_CKSLOT_HEADER) {
			void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
			if (m != MAP_FAILED) {
				rs->map[s] = m;
				rs->size[s] = (uint64_t)st.st_size;
			}
		}
		close(fd);
	}
}

/* The slot of rs holding step (committed), or -1; with step < 0 the
 * newest step held into *newest (-1 none). */
static int slots_find(const struct rank_slots *rs, int64_t step, int64_t *newest)
{
	int found = -1;
	int64_t best = -1;
	for (int s = 0; s < 2; s++) {
		const struct rv_ckslot_hdr *h = rv_ckslot_committed(rs->map[s], rs->size[s]);
		if (!h)
			continue;
		if (h->step > best)
			best = h->step;
		if (step >= 0 && h->step == step)
			found = s;
	}
	if (newest)
		*newest = best;
	return found;
}

static int fsync_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

/* Write text to path durably: a temporary beside it, fsync, rename. */
static int write_file(const char *path, const char *text, size_t len)
{
	char tmp[1200];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	size_t off = 0;
	while (off < len) {
		ssize_t k = write(fd, text + off, len - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			int rc = k < 0 ? -errno : -EIO;
			close(fd);
			unlink(tmp);
			return rc;
		}
		off += (size_t)k;
	}
	int rc = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	return rc;
}

static void remove_tree(const char *path)
{
	DIR *d = opendir(path);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char sub[1400];
			snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
			unlink(sub);
		}
		closedir(d);
	}
	rmdir(path);
}

static int write_manifest(struct ckpt *c)
{
	RV_CLEANUP_CJSON cJSON *root = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(root, "steps");
	if (!root || !arr)
		return -ENOMEM;
	cJSON_AddNumberToObject(root, "version", 1);
	cJSON_AddStringToObject(root, "job", c->job);
	for (int i = 0; i < c->nkept; i++) {
		cJSON *e = cJSON_CreateObject();
		if (!e)
			return -ENOMEM;
		cJSON_AddItemToArray(arr, e);
		cJSON_AddNumberToObject(e, "step", (double)c->kept[i].step);
		cJSON *ranks = cJSON_AddArrayToObject(e, "ranks");
		for (int r = 0; ranks && r < c->kept[i].n; r++)
			cJSON_AddItemToArray(ranks, cJSON_CreateNumber(c->kept[i].rank0 + r));
		cJSON_AddBoolToObject(e, "data", c->kept[i].data);
	}
	RV_CLEANUP_FREE char *text = rv_json_print(root);
	if (!text)
		return -ENOMEM;
	char path[1100];
	snprintf(path, sizeof(path), "%s/%s", c->dir, RV_CKSLOT_MANIFEST);
	int rc = write_file(path, text, strlen(text));
	if (rc == 0)
		rc = fsync_path(c->dir);
	return rc;
}

/* Remove every step folder the manifest does not name (but the pending one). */
static void prune(struct ckpt *c)
{
	DIR *d = opendir(c->dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		int64_t step;
		if (strncmp(e->d_name, "step-", 5) != 0 ||
		    rv_parse_i64(e->d_name + 5, 0, INT64_MAX, &step) < 0)
			continue;
		bool keep = step == c->pending;
		for (int i = 0; i < c->nkept; i++)
			keep |= c->kept[i].step == step;
		if (!keep) {
			char path[1100];
			rv_ckslot_step_dir(path, sizeof(path), c->dir, step);
			remove_tree(path);
		}
	}
	closedir(d);
}

/* The master's data checkpoint of step into DIR/step-S/data.json.  0
 * written; -ENOENT the master keeps no report of S (not yet, or never);
 * -EEXIST not every rank of the world reported S yet; -ECANCELED not every
 * rank did and the others never will (the master's 410); another negative
 * errno: no data checkpoint to be had (no master, unreachable, storage). */
static int write_data(struct ckpt *c, int64_t step, const char *sdir)
{
	if (!c->mc)
		return -ENOTCONN;
	struct rv_data_ckpt ck = { 0 };
	struct rv_err err = { 0 };
	int rc = rv_master_ckpt_export(c->mc, step, &ck, &err);
	if (rc < 0) {
		rv_log_debug("no data checkpoint for the step", "step=%lld reason=\"%s\"",
			     (long long)step, err.msg);
		return rc;
	}
	ck.step = step;
	RV_CLEANUP_CJSON cJSON *j = rv_data_ckpt_to_json(&ck);
	rv_data_ckpt_release(&ck);
	RV_CLEANUP_FREE char *text = j ? rv_json_print(j) : NULL;
	if (!text)
		return -ENOMEM;
	char path[1200];
	snprintf(path, sizeof(path), "%s/data.json", sdir);
	return write_file(path, text, strlen(text));
}

/* Step (its rank files and data.json, if any, written) is complete: its
 * folder fsync'd, the manifest names it, the oldest beyond keep go.  1, or
 * a negative errno. */
static int commit_step(struct ckpt *c, int64_t step, int rank0, int n, bool data)
{
	char sdir[1100];
	rv_ckslot_step_dir(sdir, sizeof(sdir), c->dir, step);
	int rc = fsync_path(sdir);
	if (rc < 0)
		return rc;
	int keep = c->keep < (int)RV_ARRAY_SIZE(c->kept) ? c->keep : (int)RV_ARRAY_SIZE(c->kept);
	memmove(&c->kept[1], &c->kept[0], sizeof(c->kept[0]) * (size_t)(keep - 1));
	c->kept[0] = (struct ckpt_kept){ .step = step, .rank0 = rank0, .n = n, .data = data };
	c->nkept = c->nkept + 1 < keep ? c->nkept + 1 : keep;
	if ((rc = write_manifest(c)) < 0) {
		rv_log_warn("could not write the checkpoint manifest", "dir=%s reason=\"%s\"",
			    c->dir, strerror(-rc));
		return rc;
	}
	c->persisted = step;
	c->steps_written++;
	c->pending = -1;
	prune(c);
	return 1;
}

/*
 * The data of step, whose rank files are written: commit it with its
 * data.json once the master has every rank's report of it.  While some
 * report is missing the step waits (pending, at most CKPT_DATA_WAIT_MS):
 * its data checkpoint would count the samples of a rank that did not
 * report yet as still to train, and a restore would train them twice.
 * Other nodes' ranks report a moment after this node's, so the wait is
 * short; a step whose world lost a rank before its report, or whose
 * missing ranks reported a later step instead (ranks that save at
 * different steps), never completes and is dropped: at once when the
 * master says so (410), else after the wait.  A job whose workers never
 * report (no data checkpoint was ever had) gets its steps without data
 * after the wait; so does one whose master cannot be reached.  1
 * committed, 0 waiting or dropped, or a negative errno.
 */
static int settle_data(struct ckpt *c, int64_t step, int rank0, int n)
{
	char sdir[1100];
	rv_ckslot_step_dir(sdir, sizeof(sdir), c->dir, step);
	int rc = write_data(c, step, sdir);
	if (rc == 0) {
		c->data_seen = true;
		return commit_step(c, step, rank0, n, true);
	}
	if (rc != -ENOENT && rc != -EEXIST && rc != -ECANCELED)
		return commit_step(c, step, rank0, n, false);
	int64_t now = rv_mono_ms();
	if (rc == -ECANCELED) {
		rv_log_info("checkpoint step dropped: a rank of its world will not report it",
			    "step=%lld waited_ms=%lld", (long long)step,
			    (long long)(c->pending == step ? now - c->pending_since : 0));
		c->pending = -1;
		c->never = step; /* not copied again while this group's slots hold it */
		c->never_gen = c->group_gen_seen;
		c->steps_dropped++;
		remove_tree(sdir);
		return 0;
	}
	if (c->pending != step) {
		c->pending = step;
		c->pending_rank0 = rank0;
		c->pending_n = n;
		c->pending_since = now;
		c->pending_gen = c->group_gen_seen;
		return 0;
	}
	if (now - c->pending_since < CKPT_DATA_WAIT_MS)
		return 0;
	if (rc == -ENOENT && !c->data_seen)
		return commit_step(c, step, rank0, n, false);
	rv_log_info("checkpoint step dropped: not every rank reported it", "step=%lld",
		    (long long)step);
	c->pending = -1;
	c->steps_dropped++;
	remove_tree(sdir);
	return 0;
}

/* One round: the newest step every local rank holds, when newer than the
 * last persisted, to storage.  1 written, 0 nothing to do (or a slot moved
 * on during its copy: the next round tries again), or a negative errno. */
static int persist_round(struct ckpt *c)
{
	pthread_mutex_lock(&c->mu);
	int rank0 = c->rank0, n = c->nranks;
	int64_t gen = c->group_gen;
	pthread_mutex_unlock(&c->mu);
	if (!c->dir[0] || n <= 0)
		return 0;
	c->rounds++;
	struct rank_slots *rs = calloc((size_t)n, sizeof(*rs));
	if (!rs)
		return -ENOMEM;
	int64_t step = INT64_MAX;
	for (int i = 0; i < n; i++) {
		int64_t newest;
		slots_map(c, rank0 + i, &rs[i]);
		slots_find(&rs[i], -1, &newest);
		if (newest < step)
			step = newest;
	}
	int rc = 0;
	c->group_gen_seen = gen;
	if (c->pending >= 0 && c->pending_gen != gen) {
		/* another group since (its slots started again): the step's
		 * world is gone, its missing reports will not come */
		char sdir[1100];
		rv_ckslot_step_dir(sdir, sizeof(sdir), c->dir, c->pending);
		remove_tree(sdir);
		c->pending = -1;
	}
	if (c->never >= 0 && c->never_gen != gen)
		c->never = -1; /* a new group may save that step again, whole this time */
	if (c->pending >= 0) {
		rc = settle_data(c, c->pending, c->pending_rank0, c->pending_n);
		goto out;
	}
	if (step < 0 || step <= c->persisted || step == c->never)
		goto out;
	int64_t t0 = rv_mono_ms();
	char sdir[1100];
	rv_ckslot_step_dir(sdir, sizeof(sdir), c->dir, step);
	if (mkdir(sdir, 0755) < 0 && errno != EEXIST) {
		rc = -errno;
		rv_log_warn("could not create the checkpoint folder", "dir=%s reason=\"%s\"", sdir,
			    strerror(errno));
		goto out;
	}
	uint64_t bytes = 0;
	for (int i = 0; i < n; i++) {
		int s = slots_find(&rs[i], step, NULL);
		if (s < 0)
			goto out; /* that rank moved two steps on meanwhile */
		char path[1200], tmp[1300];
		rv_ckslot_file(path, sizeof(path), c->dir, step, rank0 + i);
		snprintf(tmp, sizeof(tmp), "%s.tmp", path);
		int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			rc = -errno;
			goto out;
		}
		int64_t got = -1;
		struct rv_err err = { 0 };
		int crc = rv_ckslot_copy(fd, rs[i].map[s], rs[i].size[s], &got, &err);
		if (crc == 0 && got != step)
			crc = -EAGAIN;
		if (crc == 0 && fsync(fd) < 0)
			crc = -errno;
		struct stat st;
		if (crc == 0 && fstat(fd, &st) == 0)
			bytes += (uint64_t)st.st_size;
		close(fd);
		if (crc == 0 && rename(tmp, path) < 0)
			crc = -errno;
		if (crc < 0) {
			unlink(tmp);
			if (crc != -EAGAIN) {
				rc = crc;
				rv_log_warn("could not persist a checkpoint",
					    "rank=%d step=%lld reason=\"%s\"", rank0 + i,
					    (long long)step, err.msg[0] ? err.msg : strerror(-crc));
			}
			goto out;
		}
	}
	rc = settle_data(c, step, rank0, n);
	rv_log_debug("checkpoint written", "step=%lld ranks=%d bytes=%llu committed=%d ms=%lld",
		     (long long)step, n, (unsigned long long)bytes, rc == 1,
		     (long long)(rv_mono_ms() - t0));
out:
	for (int i = 0; i < n; i++)
		slots_unmap(&rs[i]);
	free(rs);
	return rc;
}

static void *persister(void *arg)
{
	struct ckpt *c = arg;
	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		struct timespec ts;
		rv_mono_timespec(&ts, rv_mono_ms() + CKPT_POLL_MS);
		pthread_cond_timedwait(&c->cv, &c->mu, &ts);
		if (c->stop)
			break;
		pthread_mutex_unlock(&c->mu);
		pthread_mutex_lock(&c->run_mu);
		persist_round(c);
		pthread_mutex_unlock(&c->run_mu);
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

static int mkdirs(const char *dir)
{
	char p[512];
	snprintf(p, sizeof(p), "%s", dir);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			if (mkdir(p, 0755) < 0 && errno != EEXIST)
				return -errno;
			*s = '/';
		}
	return mkdir(p, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

int64_t ckpt_newest(const struct ckpt *c, int rank)
{
	if (!c->started)
		return -1;
	struct rank_slots rs;
	int64_t newest = -1;
	slots_map(c, rank, &rs);
	slots_find(&rs, -1, &newest);
	slots_unmap(&rs);
	return newest;
}

int ckpt_start(struct ckpt *c, const struct ckpt_opts *o, struct rv_err *err)
{
	snprintf(c->job, sizeof(c->job), "%s", o->job);
	snprintf(c->dir, sizeof(c->dir), "%s", o->dir ? o->dir : "");
	c->keep = o->keep > 0 ? o->keep : 1;
	c->persisted = -1;
	c->pending = -1;
	c->never = -1;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->run_mu, NULL);
	rv_cond_init_mono(&c->cv);
	c->started = true;
	if (!c->dir[0])
		return 0;
	int rc = mkdirs(c->dir);
	if (rc < 0)
		return rv_err_set(err, rc, "--ckpt-dir", "could not create \"%s\": %s", c->dir,
				  strerror(-rc));
	/* what an earlier run of this node left: carried on, never loaded
	 * beyond what its manifest names */
	int64_t steps[64];
	int k = rv_ckslot_manifest_read(c->dir, steps, (int)RV_ARRAY_SIZE(steps), err);
	if (k < 0)
		return k;
	for (int i = 0; i < k && i < c->keep; i++)
		c->kept[c->nkept++] = (struct ckpt_kept){ .step = steps[i], .rank0 = -1 };
	/* their ranks: from the files */
	for (int i = 0; i < c->nkept; i++) {
		for (int r = 0; r < CKPT_MAX_RANKS; r++) {
			char path[1100];
			rv_ckslot_file(path, sizeof(path), c->dir, c->kept[i].step, r);
			if (access(path, F_OK) == 0) {
				if (c->kept[i].rank0 < 0)
					c->kept[i].rank0 = r;
				c->kept[i].n = r - c->kept[i].rank0 + 1;
			} else if (c->kept[i].rank0 >= 0) {
				break;
			}
		}
		char path[1200];
		rv_ckslot_step_dir(path, sizeof(path), c->dir, c->kept[i].step);
		strncat(path, "/data.json", sizeof(path) - strlen(path) - 1);
		c->kept[i].data = access(path, F_OK) == 0;
	}
	if (c->nkept)
		c->persisted = c->kept[0].step;
	if (o->master_url && o->master_url[0]) {
		struct rv_master_opts mo = { .url = o->master_url,
					     .connect_timeout_ms = 1000,
					     .timeout_ms = 5000,
					     .max_attempts = 2,
					     .retry_budget_ms = 2000 };
		c->mc = rv_master_client_new(&mo, err);
		if (!c->mc)
			return err->code ? err->code : -ENOMEM;
	}
	/* the thread takes no signal: the supervisor's signalfd gets them all */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&c->th, NULL, persister, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return rv_err_set(err, -rc, "", "could not start the checkpoint thread: %s",
				  strerror(rc));
	c->th_running = true;
	return 0;
}

void ckpt_group(struct ckpt *c, int rank0, int n)
{
	if (!c->started)
		return;
	pthread_mutex_lock(&c->mu);
	c->rank0 = rank0;
	c->nranks = n;
	c->group_gen++;
	for (int i = 0; i < n; i++)
		if (rank0 + i >= 0 && rank0 + i < CKPT_MAX_RANKS)
			c->seen[rank0 + i] = 1;
	pthread_mutex_unlock(&c->mu);
}

/* ckpt_flush; with wait_pending also a step waiting for other ranks'
 * reports is waited for (within timeout_ms). */
static int flush(struct ckpt *c, int timeout_ms, bool wait_pending)
{
	if (!c->started || !c->dir[0])
		return 0;
	int64_t until = rv_mono_ms() + timeout_ms;
	int rc, wrote = 0;
	/* a slot being copied when its worker died is settled now: at most a
	 * few rounds (another rank's slot may move on meanwhile) */
	do {
		pthread_mutex_lock(&c->run_mu);
		int64_t before = c->persisted;
		rc = persist_round(c);
		bool newer = c->persisted > before, pending = c->pending >= 0;
		pthread_mutex_unlock(&c->run_mu);
		wrote |= rc > 0;
		if (rc < 0)
			break;
		if (!newer && !(wait_pending && pending))
			break;
		if (!newer)
			usleep(CKPT_POLL_MS * 1000 / 2);
	} while (rv_mono_ms() < until);
	return rc < 0 ? rc : wrote;
}

int ckpt_flush(struct ckpt *c, int timeout_ms)
{
	return flush(c, timeout_ms, false);
}

void ckpt_stop(struct ckpt *c, bool unlink_shm)
{
	if (!c->started)
		return;
	if (c->th_running) {
		pthread_mutex_lock(&c->mu);
		c->stop = true;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->th, NULL);
		c->th_running = false;
		flush(c, 10000, true);
	}
	if (unlink_shm)
		for (int r = 0; r < CKPT_MAX_RANKS; r++)
			for (int s = 0; r < CKPT_MAX_RANKS && c->seen[r] && s < 2; s++) {
				char name[200];
				rv_ckslot_name(name, sizeof(name), c->job, r, s);
				shm_unlink(name);
			}
	rv_master_client_free(c->mc);
	c->mc = NULL;
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->run_mu);
	pthread_cond_destroy(&c->cv);
	c->started = false;
}

int ckpt_begin(struct ckpt *c, const struct flags *f, bool private_master,
	       struct rv_master_client *mc, const char *master_addr, struct rv_err *err)
{
	char job[128] = "";
	const char *env = getenv("ROVER_JOB_NAME");
	if (env && env[0])
		snprintf(job, sizeof(job), "%s", env);
	else if (f->rdzv_id[0] && strcmp(f->rdzv_id, "none") != 0)
		snprintf(job, sizeof(job), "%s", f->rdzv_id);
	else if (private_master)
		snprintf(job, sizeof(job), "rover-run-%d", (int)f->pid);
	else {
		struct rv_job_status js;
		int rc = rv_master_job(mc, &js, err);
		if (rc < 0)
			return rc;
		snprintf(job, sizeof(job), "%s", js.job);
	}
	char url[400];
	snprintf(url, sizeof(url), "http://%s", master_addr);
	struct ckpt_opts o = {
		.job = job, .dir = f->ckpt_dir, .keep = f->ckpt_keep, .master_url = url
	};
	int rc = ckpt_start(c, &o, err);
	if (rc < 0)
		return rc;
	const char *bp = getenv("ROVER_SAVE_AT_BREAKPOINT");
	c->at_breakpoint = f->save_at_breakpoint || (bp && !strcmp(bp, "1"));
	setenv("ROVER_JOB_NAME", job, 1);
	if (f->ckpt_dir[0]) {
		char abs[PATH_MAX];
		setenv("ROVER_CKPT_DIR", realpath(f->ckpt_dir, abs) ? abs : f->ckpt_dir, 1);
	} else {
		unsetenv("ROVER_CKPT_DIR");
	}
	rv_log_info("flash checkpoints", "job=%s dir=%s keep=%d save_at_breakpoint=%d", job,
		    f->ckpt_dir[0] ? f->ckpt_dir : "(memory only)", c->keep, c->at_breakpoint);
	return 0;
}

void ckpt_breakpoint(struct ckpt *c)
{
	if (!c->at_breakpoint || !c->dir[0])
		return;
	int64_t t0 = rv_mono_ms();
	int rc = ckpt_flush(c, 10000);
	rv_log_info("saved at the breakpoint", "step=%lld wrote=%d ms=%lld",
		    (long long)c->persisted, rc > 0, (long long)(rv_mono_ms() - t0));
}
