/*
 * check_ckpt.c: rover-run's checkpoint persister (agent/ckpt.c) against a
 * real rover-master whose world has two ranks, one on this node.  A step
 * held for the other rank's data report is let go as soon as the master
 * knows that report will never come (the other rank reported a later
 * step: ranks that save at different steps), not after the 5 s bound;
 * while the other rank may still report, the step is held.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "ckslot.h"
#include "crc32c.h"
#include "masterfix.h"
#include "parse.h"
#include "testutil.h"

/* A committed slot 0 of rank in shared memory holding step, as the
 * trainer library writes one (8 bytes of payload). */
static void slot_write(const char *job, int rank, int64_t step)
{
	char name[200];
	rv_ckslot_name(name, sizeof(name), job, rank, 0);
	int fd = shm_open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	size_t size = RV_CKSLOT_HEADER + RV_CKSLOT_ALIGN;
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	unsigned char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	ck_assert_ptr_ne(p, MAP_FAILED);
	memset(p, 0, size);
	struct rv_ckslot_hdr *h = (struct rv_ckslot_hdr *)p;
	memcpy(p + RV_CKSLOT_HEADER, "weights!", 8);
	h->magic = RV_CKSLOT_MAGIC;
	h->version = RV_CKSLOT_VERSION;
	h->nbufs = 1;
	h->seq = 1;
	h->step = step;
	h->payload = rv_ckslot_align(8);
	h->sizes[0] = 8;
	h->crc = rv_crc32c(0, p + RV_CKSLOT_HEADER, 8);
	h->hcrc = rv_ckslot_hdr_crc(h);
	atomic_store(&h->committed, RV_CKSLOT_COMMITTED);
	munmap(p, size);
}

struct joiner {
	const struct rv_test_master *m;
	const char *node;
	int rc;
};

static void *join_main(void *arg)
{
	struct joiner *j = arg;
	struct rv_master_client *c = rv_test_master_client(j->m);
	struct rv_rdzv_join req = { .local_world_size = 1 };
	snprintf(req.node, sizeof(req.node), "%s", j->node);
	struct rv_rdzv_world_reply w;
	j->rc = c ? rv_master_rendezvous(c, &req, 20000, &w, NULL) : -ENOMEM;
	if (j->rc == 0)
		rv_rdzv_world_reply_release(&w);
	rv_master_client_free(c);
	return NULL;
}

static void report(struct rv_master_client *c, int64_t step, int64_t worker)
{
	struct rv_ckpt_report r = { .step = step, .worker = worker };
	struct rv_err err = { 0 };
	ck_assert_msg(rv_master_ckpt_report(c, &r, &err) == 0, "report: %s", err.msg);
}

static int64_t dropped(struct ckpt *c, int64_t *pending)
{
	pthread_mutex_lock(&c->run_mu);
	int64_t n = c->steps_dropped;
	*pending = c->pending;
	pthread_mutex_unlock(&c->run_mu);
	return n;
}

START_TEST(test_step_let_go_once_the_missing_rank_moved_on)
{
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_start_job(&m, 1000, 100, 1, 2, 2, NULL), 0);
	struct joiner j[2] = { { &m, "node-a", -1 }, { &m, "node-b", -1 } };
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, join_main, &j[i]), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(j[i].rc, 0);
	}
	struct rv_master_client *mc = rv_test_master_client(&m);
	ck_assert_ptr_nonnull(mc);

	char job[64], dir[300];
	snprintf(job, sizeof(job), "ck-test-%d", (int)getpid());
	snprintf(dir, sizeof(dir), "%s/ckpt", m.dir);
	slot_write(job, 0, 10);
	report(mc, 10, 0); /* rank 0, here, saved step 10 */

	static struct ckpt c;
	memset(&c, 0, sizeof(c));
	struct ckpt_opts o = { .job = job, .dir = dir, .keep = 3, .master_url = m.url };
	struct rv_err err = { 0 };
	ck_assert_msg(ckpt_start(&c, &o, &err) == 0, "ckpt_start: %s", err.msg);
	ckpt_group(&c, 0, 1);

	/* rank 1 may still report step 10: the step is held */
	int64_t pending = -1;
	int64_t until = rv_mono_ms() + 5000;
	while (rv_mono_ms() < until && (dropped(&c, &pending), pending != 10))
		usleep(20 * 1000);
	ck_assert_int_eq(pending, 10);
	usleep(800 * 1000);
	ck_assert_int_eq(dropped(&c, &pending), 0);
	ck_assert_int_eq(pending, 10);

	/* rank 1 saved step 11 instead: its report of 10 will never come */
	report(mc, 11, 1);
	int64_t t0 = rv_mono_ms();
	while (rv_mono_ms() - t0 < 6000 && dropped(&c, &pending) == 0)
		usleep(10 * 1000);
	int64_t held = rv_mono_ms() - t0;
	ck_assert_int_eq(dropped(&c, &pending), 1);
	ck_assert_int_eq(pending, -1);
	ck_assert_msg(held < 2000, "the step was held %lld ms after the master knew",
		      (long long)held);
	fprintf(stderr, "step let go %lld ms after the other rank moved on\n", (long long)held);
	char sdir[400];
	rv_ckslot_step_dir(sdir, sizeof(sdir), dir, 10);
	struct stat st;
	ck_assert_int_ne(stat(sdir, &st), 0); /* no half step left on storage */

	ckpt_stop(&c, true);
	rv_master_client_free(mc);
	rv_test_master_cleanup(&m);
}
END_TEST

RV_TEST_MAIN_TCASE("ckpt", "persister", 60, test_step_let_go_once_the_missing_rank_moved_on)
