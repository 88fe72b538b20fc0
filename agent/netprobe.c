/*
 * netprobe.c: see netprobe.h.
 *
 * The wire between nodes: a transfer is "RVNC", the round (1 byte), the
 * MiB that follow (4 bytes, big-endian), the data; the receiver answers one
 * byte 'k' once it has all of it.  The listener (a thread, on the
 * rendezvous port, for both rounds) counts complete transfers per round.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "netprobe.h"
#include "parse.h"

#define NP_CHUNK      65536
#define NP_MIB        (1024 * 1024)
#define NP_IO_MS      10000 /* one transfer's socket timeout */
#define NP_CONNECT_MS 3000  /* one connect attempt */
#define NP_POLL_MS    100   /* asking the master again */

#define NP_CONNS 8 /* transfers served at once (a group has at most 2 peers) */

struct listener {
	int fd;
	atomic_int served[2];
	atomic_bool stop;
	pthread_t th;
	bool started;
	struct conn {
		struct listener *l;
		int fd;
		pthread_t th;
		atomic_bool busy;
		bool joinable;
	} conns[NP_CONNS];
};

static void set_timeouts(int fd, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int read_full(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n > 0) {
		ssize_t k = read(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -EIO;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -EIO;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* One peer's transfer: the header, the data (discarded), the answer. */
static void serve_one(struct listener *l, int c)
{
	unsigned char h[9];
	char *sink = malloc(NP_CHUNK);
	if (!sink)
		return;
	set_timeouts(c, NP_IO_MS);
	if (read_full(c, h, sizeof(h)) < 0 || memcmp(h, "RVNC", 4) != 0 || h[4] > 1)
		goto out;
	uint32_t mb = ((uint32_t)h[5] << 24) | ((uint32_t)h[6] << 16) | ((uint32_t)h[7] << 8) |
		      h[8];
	if (mb < 1 || mb > 1024)
		goto out;
	for (uint64_t left = (uint64_t)mb * NP_MIB; left > 0;) {
		size_t n = left < NP_CHUNK ? (size_t)left : NP_CHUNK;
		if (read_full(c, sink, n) < 0)
			goto out;
		left -= n;
	}
	if (write_full(c, "k", 1) == 0)
		atomic_fetch_add(&l->served[h[4]], 1);
out:
	free(sink);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	serve_one(c->l, c->fd);
	close(c->fd);
	atomic_store(&c->busy, false);
	return NULL;
}

static void *listen_loop(void *arg)
{
	struct listener *l = arg;
	while (!atomic_load(&l->stop)) {
		struct pollfd p = { .fd = l->fd, .events = POLLIN };
		if (poll(&p, 1, NP_POLL_MS) <= 0)
			continue;
		int c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		/* each transfer on its own thread: one slow sender does not
		 * hold up (and slow down) the others' */
		struct conn *slot = NULL;
		for (int i = 0; !slot && i < NP_CONNS; i++)
			if (!atomic_load(&l->conns[i].busy))
				slot = &l->conns[i];
		if (!slot) {
			close(c);
			continue;
		}
		if (slot->joinable)
			pthread_join(slot->th, NULL);
		slot->joinable = false;
		slot->l = l;
		slot->fd = c;
		atomic_store(&slot->busy, true);
		if (pthread_create(&slot->th, NULL, conn_main, slot) != 0) {
			atomic_store(&slot->busy, false);
			close(c);
			continue;
		}
		slot->joinable = true;
	}
	for (int i = 0; i < NP_CONNS; i++)
		if (l->conns[i].joinable)
			pthread_join(l->conns[i].th, NULL);
	return NULL;
}

static int listener_start(struct listener *l, int port, struct rv_err *err)
{
	memset(l, 0, sizeof(*l));
	l->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l->fd < 0)
		return rv_err_set(err, -errno, "", "network check: socket: %s", strerror(errno));
	int one = 1;
	setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_ANY) };
	if (bind(l->fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l->fd, 16) < 0) {
		int e = errno;
		close(l->fd);
		l->fd = -1;
		return rv_err_set(err, -e, "", "network check: cannot listen on port %d: %s", port,
				  strerror(e));
	}
	if (pthread_create(&l->th, NULL, listen_loop, l) != 0) {
		close(l->fd);
		l->fd = -1;
		return rv_err_set(err, -EAGAIN, "", "network check: no thread");
	}
	l->started = true;
	return 0;
}

static void listener_stop(struct listener *l)
{
	if (l->started) {
		atomic_store(&l->stop, true);
		pthread_join(l->th, NULL);
	}
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	l->started = false;
}

/* A TCP connection to "host:port" within NP_CONNECT_MS; -errno. */
static int dial(const char *hostport)
{
	char host[RV_ADDR_MAX];
	const char *colon = strrchr(hostport, ':');
	if (!colon || (size_t)(colon - hostport) >= sizeof(host))
		return -EINVAL;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - hostport), hostport);
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
	if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
		return -EHOSTUNREACH;
	int rc = -ECONNREFUSED;
	for (struct addrinfo *p = ai; p; p = p->ai_next) {
		int fd = socket(p->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			continue;
		int c = connect(fd, p->ai_addr, p->ai_addrlen);
		if (c < 0 && errno == EINPROGRESS) {
			struct pollfd pf = { .fd = fd, .events = POLLOUT };
			int e = 0;
			socklen_t el = sizeof(e);
			if (poll(&pf, 1, NP_CONNECT_MS) == 1 &&
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0)
				c = 0;
			else
				errno = e ? e : ETIMEDOUT;
		}
		if (c == 0) {
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
			freeaddrinfo(ai);
			return fd;
		}
		rc = -errno;
		close(fd);
	}
	freeaddrinfo(ai);
	return rc;
}

/* Send mb MiB to the peer at addr for round; retried while it refuses (it
 * may not listen yet) until until_ms.  0 or -errno. */
static int send_to(const char *addr, int round, int mb, int64_t until_ms)
{
	static char chunk[NP_CHUNK];
	int fd;
	while ((fd = dial(addr)) == -ECONNREFUSED && rv_mono_ms() < until_ms)
		usleep(NP_POLL_MS * 1000);
	if (fd < 0)
		return fd;
	set_timeouts(fd, NP_IO_MS);
	unsigned char h[9] = { 'R',
			       'V',
			       'N',
			       'C',
			       (unsigned char)round,
			       (unsigned char)(mb >> 24),
			       (unsigned char)(mb >> 16),
			       (unsigned char)(mb >> 8),
			       (unsigned char)mb };
	int rc = write_full(fd, h, sizeof(h));
	for (int i = 0; rc == 0 && i < mb * (NP_MIB / NP_CHUNK); i++)
		rc = write_full(fd, chunk, sizeof(chunk));
	char k = 0;
	if (rc == 0 && (read_full(fd, &k, 1) < 0 || k != 'k'))
		rc = -EIO;
	close(fd);
	return rc;
}

/* One round: our sends (timed), then our peers' transfers to us. */
static int one_round(struct rv_master_client *mc, const struct netprobe_opts *o, struct listener *l,
		     int64_t check, int round, int64_t until, struct netprobe_result *out,
		     struct rv_err *err)
{
	struct rv_netcheck_group_reply g;
	for (;;) {
		int rc = rv_master_netcheck_group(mc, o->node, round, &g, err);
		if (rc < 0)
			return rc;
		if (g.check != check)
			return rv_err_set(err, -ESTALE, "", "network check %lld replaced by %lld",
					  (long long)check, (long long)g.check);
		if (g.status == RV_NETCHECK_READY)
			break;
		if (rv_mono_ms() >= until)
			return rv_err_set(err, -ETIMEDOUT, "",
					  "network check: round %d did not open in time", round);
		usleep(NP_POLL_MS * 1000);
	}
	int64_t t0 = rv_mono_ms(), io_until = t0 + NP_IO_MS;
	bool ok = true;
	int npeers = 0;
	char q[200];
	for (int i = 0; i < g.npeers; i++) {
		if (!strcmp(g.peers[i].node, o->node))
			continue;
		npeers++;
		int rc = send_to(g.peers[i].addr, round, o->mb, io_until);
		if (rc < 0) {
			ok = false;
			snprintf(q, sizeof(q), "%s", strerror(-rc));
			rv_log_warn("network check: cannot reach a peer",
				    "round=%d peer=%s addr=%s "
				    "reason=\"%s\"",
				    round, g.peers[i].node, g.peers[i].addr, q);
		}
	}
	double secs = (double)(rv_mono_ms() - t0) / 1000.0;
	while (atomic_load(&l->served[round]) < npeers && rv_mono_ms() < io_until)
		usleep(10 * 1000);
	if (atomic_load(&l->served[round]) < npeers) {
		ok = false;
		rv_log_warn("network check: peers did not reach this node", "round=%d got=%d of=%d",
			    round, atomic_load(&l->served[round]), npeers);
	}
	out->ok[round] = ok;
	out->time_s[round] = secs;
	struct rv_netcheck_report rep = { .check = check, .round = round, .ok = ok, .time_s = secs };
	snprintf(rep.node, sizeof(rep.node), "%s", o->node);
	rv_log_info("network check round", "check=%lld round=%d ok=%s time_s=%.3f peers=%d",
		    (long long)check, round, ok ? "true" : "false", secs, npeers);
	return rv_master_netcheck_report(mc, &rep, err);
}

static void append(char *list, size_t size, const char *name)
{
	size_t n = strlen(list);
	snprintf(list + n, size - n, "%s%s", n ? "," : "", name);
}

int netprobe_run(struct rv_master_client *mc, const struct netprobe_opts *o,
		 struct netprobe_result *out, struct rv_err *err)
{
	memset(out, 0, sizeof(*out));
	int64_t until = rv_mono_ms() + o->timeout_ms;
	struct listener l;
	int rc = listener_start(&l, o->port, err);
	if (rc < 0)
		return rc;
	struct rv_netcheck_joined j;
	rc = rv_master_netcheck_join(mc, o->node, &j, err);
	if (rc == 0 && j.world > o->world)
		rc = 1;
	else if (rc == 0 && j.world < o->world)
		rc = rv_err_set(err, -EPROTO, "", "network check of world %lld, not %lld",
				(long long)j.world, (long long)o->world);
	for (int round = 0; rc == 0 && round < 2; round++)
		rc = one_round(mc, o, &l, j.check, round, until, out, err);
	listener_stop(&l);
	if (rc != 0)
		return rc;
	out->check = j.check;
	/* the verdicts come once every member reported round 1 or its deadline
	 * passed */
	for (;;) {
		struct rv_netcheck_status st = { 0 };
		if ((rc = rv_master_netcheck(mc, &st, err)) < 0)
			return rc;
		if (st.check != j.check) {
			rv_netcheck_status_release(&st);
			return rv_err_set(err, -ESTALE, "", "network check %lld replaced",
					  (long long)j.check);
		}
		bool done = st.state == RV_NETCHECK_DONE;
		for (int i = 0; done && i < st.nnodes; i++) {
			const struct rv_netcheck_result *n = &st.nodes[i];
			if (!strcmp(n->node, o->node))
				out->verdict = n->verdict;
			if (n->verdict == RV_VERDICT_FAULTY) {
				out->nfaulty++;
				append(out->faulty, sizeof(out->faulty), n->node);
			} else if (n->verdict == RV_VERDICT_STRAGGLER) {
				out->nstragglers++;
				append(out->stragglers, sizeof(out->stragglers), n->node);
			}
		}
		rv_netcheck_status_release(&st);
		if (done)
			return 0;
		if (rv_mono_ms() >= until)
			return rv_err_set(err, -ETIMEDOUT, "", "network check: no verdict in time");
		usleep(NP_POLL_MS * 1000);
	}
}
