/*
 * netprobe.c: see netprobe.h.
 *
 * The collective: each round runs rover_netcheck.py once on every member
 * of a group, rank = the node's place in the master's group, the store on
 * the first member's rendezvous address (nothing else listens there during
 * the check); its result comes back in a file.
 *
 * TCP, without the collective: a transfer is "RVNC", the round (1 byte),
 * the MiB that follow (4 bytes, big-endian), the data; the receiver answers
 * one byte 'k' once it has all of it.  The listener (a thread, on the
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
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "netprobe.h"
#include "parse.h"

#define NP_CHUNK      65536
#define NP_MIB        (1024 * 1024)
/* One connect attempt: a link that answers no SYN in this is broken (a
 * failure the master hears within its straggler wait, not a late node). */
#define NP_CONNECT_MS 500
#define NP_POLL_MS    100   /* asking the master again */

#define NP_CONNS 8 /* transfers served at once (a group has at most 2 peers) */
#define NP_START_MS 30000 /* a cold python's import of torch, on top of a round */
#define NP_MAX_ENV  512   /* our environment's entries passed on to the check */

#define NP_PROBE_TRIES 3 /* connect attempts before a peer is unreachable */

#define NP_BEAT_MS 1000 /* heartbeats while the check runs */
#define NP_CLOSED_MS 200  /* asking whether the round closed without us */

extern char **environ;

/* The master declares a node dead after rdzv.heartbeat_timeout_ms without a
 * heartbeat (5 s by default), and a check can take longer: beat every
 * NP_BEAT_MS while it runs.  The reply is not needed: a new world shows
 * as a newer check. */
static void beat(struct rv_master_client *mc, const char *node, int64_t *last)
{
	if (rv_mono_ms() - *last < NP_BEAT_MS)
		return;
	rv_master_heartbeat(mc, node, NULL, NULL);
	*last = rv_mono_ms();
}

struct listener {
	int fd;
	int io_ms; /* one transfer's socket timeout */
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

/* All n bytes of buf sent on socket fd (out), or received into it.  0, or
 * -EIO (the peer went, or the socket failed). */
static int xfer_full(int fd, void *buf, size_t n, bool out)
{
	char *p = buf;
	while (n > 0) {
		ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) : read(fd, p, n);
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
	set_timeouts(c, l->io_ms);
	if (xfer_full(c, h, sizeof(h), false) < 0 || memcmp(h, "RVNC", 4) != 0 || h[4] > 1)
		goto out;
	uint32_t mb = ((uint32_t)h[5] << 24) | ((uint32_t)h[6] << 16) | ((uint32_t)h[7] << 8) |
		      h[8];
	if (mb < 1 || mb > 1024)
		goto out;
	for (uint64_t left = (uint64_t)mb * NP_MIB; left > 0;) {
		size_t n = left < NP_CHUNK ? (size_t)left : NP_CHUNK;
		if (xfer_full(c, sink, n, false) < 0)
			goto out;
		left -= n;
	}
	char ok = 'k';
	if (xfer_full(c, &ok, 1, true) == 0)
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

static int listener_start(struct listener *l, int port, int io_ms, struct rv_err *err)
{
	memset(l, 0, sizeof(*l));
	l->io_ms = io_ms;
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
static int send_to(const char *addr, int round, int mb, int io_ms, int64_t until_ms)
{
	static char chunk[NP_CHUNK];
	int fd;
	while ((fd = dial(addr)) == -ECONNREFUSED && rv_mono_ms() < until_ms)
		usleep(NP_POLL_MS * 1000);
	if (fd < 0)
		return fd;
	set_timeouts(fd, io_ms);
	unsigned char h[9] = { 'R',
			       'V',
			       'N',
			       'C',
			       (unsigned char)round,
			       (unsigned char)(mb >> 24),
			       (unsigned char)(mb >> 16),
			       (unsigned char)(mb >> 8),
			       (unsigned char)mb };
	int rc = xfer_full(fd, h, sizeof(h), true);
	for (int i = 0; rc == 0 && i < mb * (NP_MIB / NP_CHUNK); i++)
		rc = xfer_full(fd, chunk, sizeof(chunk), true);
	char k = 0;
	if (rc == 0 && (xfer_full(fd, &k, 1, false) < 0 || k != 'k'))
		rc = -EIO;
	close(fd);
	return rc;
}

/* This round's group of o->node, once the master has opened the round. */
static int wait_group(struct rv_master_client *mc, const struct netprobe_opts *o, int64_t check,
		      int round, int64_t until, struct rv_netcheck_group_reply *g, int64_t *beat_ms,
		      struct rv_err *err)
{
	for (;;) {
		beat(mc, o->node, beat_ms);
		int rc = rv_master_netcheck_group(mc, o->node, round, g, err);
		if (rc < 0)
			return rc;
		if (g->check != check)
			return rv_err_set(err, -ESTALE, "", "network check %lld replaced by %lld",
					  (long long)check, (long long)g->check);
		if (g->status == RV_NETCHECK_READY)
			return 0;
		if (rv_mono_ms() >= until)
			return rv_err_set(err, -ETIMEDOUT, "",
					  "network check: round %d did not open in time", round);
		usleep(NP_POLL_MS * 1000);
	}
}

static bool round_closed(struct rv_master_client *mc, const char *node, int64_t check, int round,
			 struct netprobe_result *out);

/* TCP: our sends (timed), then our peers' transfers to us.  Whether every
 * transfer both ways completed; *secs the sends' time; *closed when the
 * master closed the round while we waited for our peers. */

static bool tcp_round(struct rv_master_client *mc, const struct netprobe_opts *o,
		      struct listener *l, int64_t check, const struct rv_netcheck_group_reply *g,
		      int round, struct netprobe_result *out, double *secs, bool *closed)
{
	int64_t t0 = rv_mono_ms(), io_until = t0 + o->round_timeout_ms;
	bool ok = true;
	int npeers = 0;
	char q[200];
	for (int i = 0; i < g->npeers; i++) {
		if (!strcmp(g->peers[i].node, o->node))
			continue;
		npeers++;
		int rc = send_to(g->peers[i].addr, round, o->mb, o->round_timeout_ms, io_until);
		if (rc < 0) {
			ok = false;
			snprintf(q, sizeof(q), "%s", strerror(-rc));
			rv_log_warn("network check: cannot reach a peer",
				    "round=%d peer=%s addr=%s reason=\"%s\"", round,
				    g->peers[i].node, g->peers[i].addr, q);
		}
	}
	*secs = (double)(rv_mono_ms() - t0) / 1000.0;
	for (int64_t asked = rv_mono_ms();
	     atomic_load(&l->served[round]) < npeers && rv_mono_ms() < io_until;) {
		usleep(10 * 1000);
		if (rv_mono_ms() - asked >= NP_CLOSED_MS) {
			asked = rv_mono_ms();
			if ((*closed = round_closed(mc, o->node, check, round, out)))
				return false; /* judged without us: nothing to report */
		}
	}
	if (atomic_load(&l->served[round]) < npeers) {
		ok = false;
		rv_log_warn("network check: peers did not reach this node", "round=%d got=%d of=%d",
			    round, atomic_load(&l->served[round]), npeers);
	}
	return ok;
}

int netprobe_script_path(char *buf, size_t size)
{
	const char *env = getenv("ROVER_NETCHECK_SCRIPT");
	if (!env || !*env) {
		static const char *const rel[] = { "../lib/rover/rover_netcheck.py", NULL };
		return rv_proc_exe_relative(buf, size, rel, R_OK);
	}
	int n = snprintf(buf, size, "%s", env);
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	return access(buf, R_OK) == 0 ? 0 : -ENOENT;
}

/* The check's environment: ours, less any ROVER_NETCHECK_*, plus kv[]
 * (NULL-terminated), into env (max entries with the NULL).  -ENOSPC. */
static int coll_env(const char **env, int max, const char *const *kv)
{
	int n = 0;
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, "ROVER_NETCHECK_", 15) != 0 && n < max - 1)
			env[n++] = *e;
	for (; *kv; kv++) {
		if (n >= max - 1)
			return -ENOSPC;
		env[n++] = *kv;
	}
	env[n] = NULL;
	return 0;
}

/* Start rover_netcheck.py with env: forked from the warm interpreter when
 * it is ready, else python.  *warm says which. */
static int coll_spawn(const struct netprobe_opts *o, const char *script, const char *const *env,
		      struct rv_proc *p, bool *warm, struct rv_err *err)
{
	const char *argv[] = { o->python, "-u", script, NULL };
	char why[sizeof(((struct rv_err *)0)->msg)] = "no warm interpreter";
	*warm = false;
	if (o->warm && o->warm->ready) {
		struct warm_req rq = { .argv = argv + 2,
				       .unbuffered = true,
				       .hold_standbys = true,
				       .envp = env,
				       .fd = { -1, STDERR_FILENO, STDERR_FILENO } };
		struct rv_err e = { 0 };
		if (warm_spawn(o->warm, &rq, p, &e) == 0) {
			*warm = true;
			return 0;
		}
		snprintf(why, sizeof(why), "%s", e.msg);
	}
	rv_log_debug("network check starts cold", "reason=\"%s\"", why);
	struct rv_proc_opts po = {
		.argv = argv,
		.envp = env,
		.io = { { RV_PROC_NULL, 0 }, { RV_PROC_FD, STDERR_FILENO }, { RV_PROC_INHERIT, 0 } },
		.pdeathsig = SIGKILL,
	};
	int rc = rv_proc_spawn(p, &po);
	if (rc < 0)
		return rv_err_set(err, rc, "", "network check: could not start %s: %s", o->python,
				  strerror(-rc));
	return 0;
}

/* The result file of a check that exited 0: compute_s, comm_s, backend. */
static int coll_result(const char *path, struct netprobe_result *out, int round)
{
	char buf[512];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	RV_CLEANUP_CJSON cJSON *root = rv_json_parse(buf, n, NULL);
	if (!root ||
	    rv_json_get_double(root, "compute_s", "", true, 0, 1e6, &out->compute_s[round], NULL) <
		    0 ||
	    rv_json_get_double(root, "comm_s", "", true, 0, 1e6, &out->comm_s[round], NULL) < 0 ||
	    rv_json_get_string(root, "backend", "", true, out->backend, sizeof(out->backend),
			       NULL) < 0)
		return -EPROTO;
	return 0;
}

static void take_verdicts(const struct rv_netcheck_status *st, const char *node,
			  struct netprobe_result *out);

/* Whether the master closed round of check (it judged this node late, or
 * failed), so its collective need not go on.  The verdicts, when that close
 * decided the check, go into out: a node short of CPU asks no more. */
static bool round_closed(struct rv_master_client *mc, const char *node, int64_t check, int round,
			 struct netprobe_result *out)
{
	struct rv_netcheck_status st = { 0 };
	if (rv_master_netcheck(mc, &st, NULL) < 0)
		return false;
	bool closed = st.check != check || st.state != RV_NETCHECK_RUNNING || st.round > round;
	if (st.check == check && st.state == RV_NETCHECK_DONE && !out->decided) {
		take_verdicts(&st, node, out);
		out->decided = true;
	}
	rv_netcheck_status_release(&st);
	return closed;
}

/* Set the collective p aside once the master judged its round without it:
 * stopped (SIGSTOP), not killed, into out->stopped (p is then empty),
 * since a process holding torch takes long to die on a node whose CPU is
 * short (its exit is charged to that CPU, ahead of this node's calls to
 * the master); netprobe_result_release ends it.  Killed and waited for
 * when out has no room. */
static void coll_abandon(struct rv_proc *p, struct netprobe_result *out)
{
	if (out->nstopped >= NETPROBE_STOPPED_MAX) {
		rv_proc_stop(p, 0, NULL);
		return;
	}
	rv_proc_kill(p, SIGSTOP);
	out->stopped[out->nstopped++] = *p;
	rv_proc_init(p);
}

/* Whether the peer at addr ("host:port") answers a TCP connect: accepted
 * or refused (its host is there, the port maybe not yet open) within
 * NP_PROBE_TRIES attempts; no answer (a dropped or blackholed link), an
 * unreachable host or net is no answer.  A slow peer's kernel still
 * answers, so this tells a cut link from a slow node. */
static bool peer_answers(const char *addr)
{
	for (int k = 0; k < NP_PROBE_TRIES; k++) {
		if (k)
			usleep(NP_POLL_MS * 1000);
		int fd = dial(addr);
		if (fd >= 0)
			close(fd);
		if (fd >= 0 || fd == -ECONNREFUSED)
			return true;
	}
	return false;
}

/* The first peer of g (not o->node) that does not answer, or NULL. */
static const struct rv_netcheck_peer *peer_cut(const struct netprobe_opts *o,
					       const struct rv_netcheck_group_reply *g)
{
	for (int i = 0; i < g->npeers; i++)
		if (strcmp(g->peers[i].node, o->node) != 0 && !peer_answers(g->peers[i].addr))
			return &g->peers[i];
	return NULL;
}

/* Wait for the collective p until end, beating, and asking the master every
 * NP_CLOSED_MS whether the round closed without us.  rv_proc_wait's
 * result, or -EHOSTUNREACH when a peer of g does not answer (the round
 * failed: a cut link hangs the collective, it does not slow it); *closed
 * when the master closed the round (p still runs). */
static int coll_wait(struct rv_master_client *mc, const struct netprobe_opts *o, int64_t check,
		     const struct rv_netcheck_group_reply *g, struct rv_proc *p, int64_t end,
		     struct netprobe_result *out, int *status, bool *closed)
{
	int64_t asked = rv_mono_ms();
	int rc, round = g->round;
	*closed = false;
	const struct rv_netcheck_peer *cut = peer_cut(o, g);
	if (cut) {
		rv_log_warn("network check: cannot reach a peer",
			    "round=%d peer=%s addr=%s reason=\"no answer to a connect\"", round,
			    cut->node, cut->addr);
		return -EHOSTUNREACH;
	}
	do {
		beat(mc, o->node, &out->beat_ms);
		if (rv_mono_ms() - asked >= NP_CLOSED_MS) {
			asked = rv_mono_ms();
			if ((*closed = round_closed(mc, o->node, check, round, out)))
				return -ETIMEDOUT;
		}
		int64_t left = end - rv_mono_ms();
		rc = rv_proc_wait(p,
				  (int)(left < NP_CLOSED_MS ? (left > 0 ? left : 0) : NP_CLOSED_MS),
				  status);
	} while (rc == -ETIMEDOUT && rv_mono_ms() < end);
	return rc;
}

/* The collective: rover_netcheck.py with the group; whether it completed,
 * *secs its compute and collective time; *closed when the master closed
 * the round before it did (nothing to report). */
static bool coll_round(struct rv_master_client *mc, const struct netprobe_opts *o, int64_t check,
		       const struct rv_netcheck_group_reply *g, int round, int64_t until,
		       struct netprobe_result *out, double *secs, bool *closed)
{
	int rank = -1;
	for (int i = 0; i < g->npeers; i++)
		if (!strcmp(g->peers[i].node, o->node))
			rank = i;
	char script[1024], file[64], kv[8][RV_ADDR_MAX + 40];
	struct rv_err err = { 0 };
	const char *dir = getenv("TMPDIR");
	snprintf(file, sizeof(file), "%s/rover-netcheck-XXXXXX", dir && *dir ? dir : "/tmp");
	int fd = rank < 0 ? -1 : mkstemp(file);
	if (fd < 0 || netprobe_script_path(script, sizeof(script)) < 0) {
		rv_log_warn("network check: cannot run the collective", "round=%d reason=\"%s\"",
			    round,
			    rank < 0 ? "not in its group"
			    : fd < 0 ? "no temp file"
				     : "no rover_netcheck.py");
		if (fd >= 0) {
			close(fd);
			unlink(file);
		}
		return false;
	}
	close(fd);
	snprintf(kv[0], sizeof(kv[0]), "ROVER_NETCHECK_RANK=%d", rank);
	snprintf(kv[1], sizeof(kv[1]), "ROVER_NETCHECK_SIZE=%d", g->npeers);
	snprintf(kv[2], sizeof(kv[2]), "ROVER_NETCHECK_STORE=%s", g->peers[0].addr);
	snprintf(kv[3], sizeof(kv[3]), "ROVER_NETCHECK_ADDR=%s", o->addr);
	snprintf(kv[4], sizeof(kv[4]), "ROVER_NETCHECK_MB=%d", o->mb);
	snprintf(kv[5], sizeof(kv[5]), "ROVER_NETCHECK_TIMEOUT_S=%.3f",
		 (double)o->round_timeout_ms / 1000.0);
	snprintf(kv[6], sizeof(kv[6]), "ROVER_NETCHECK_GPU=%d", o->gpu ? 1 : 0);
	snprintf(kv[7], sizeof(kv[7]), "ROVER_NETCHECK_OUT=%s", file);
	const char *const add[] = { kv[0], kv[1], kv[2], kv[3], kv[4], kv[5], kv[6], kv[7], NULL };
	const char *env[NP_MAX_ENV];
	struct rv_proc p;
	bool warm = false, ok = false;
	rv_proc_init(&p);
	if (rank == 0)
		netprobe_result_release(out); /* a stopped store on our port */
	if (coll_env(env, NP_MAX_ENV, add) == 0 &&
	    coll_spawn(o, script, env, &p, &warm, &err) == 0) {
		int64_t end = rv_mono_ms() + o->round_timeout_ms + NP_START_MS;
		if (end > until)
			end = until;
		int status = 0;
		int rc = coll_wait(mc, o, check, g, &p, end, out, &status, closed);
		if (rc == -ETIMEDOUT || rc == -EHOSTUNREACH)
			coll_abandon(&p, out);
		ok = rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
		     coll_result(file, out, round) == 0;
		if (*closed)
			rv_log_warn("network check: the round closed before this node finished",
				    "round=%d rank=%d size=%d", round, rank, g->npeers);
		else if (!ok)
			rv_log_warn("network check: the collective failed",
				    "round=%d rank=%d size=%d store=%s timed_out=%s", round, rank,
				    g->npeers, g->peers[0].addr,
				    rc == -ETIMEDOUT ? "true" : "false");
	} else {
		rv_log_warn("network check: cannot run the collective", "round=%d reason=\"%s\"",
			    round, err.msg[0] ? err.msg : "environment too large");
	}
	rv_proc_release(&p);
	unlink(file);
	*secs = ok ? out->compute_s[round] + out->comm_s[round] : 0;
	rv_log_info("network check collective",
		    "round=%d rank=%d size=%d start=%s ok=%s backend=%s compute_s=%.3f comm_s=%.3f",
		    round, rank, g->npeers, warm ? "warm" : "cold", ok ? "true" : "false",
		    ok ? out->backend : "none", out->compute_s[round], out->comm_s[round]);
	return ok;
}

void netprobe_result_release(struct netprobe_result *out)
{
	for (int i = 0; i < out->nstopped; i++) {
		rv_proc_stop(&out->stopped[i], 0, NULL);
		rv_proc_release(&out->stopped[i]);
	}
	out->nstopped = 0;
}

/* One round: wait for its group, run it, report it. */
static int one_round(struct rv_master_client *mc, const struct netprobe_opts *o, struct listener *l,
		     int64_t check, int round, int64_t until, struct netprobe_result *out,
		     struct rv_err *err)
{
	struct rv_netcheck_group_reply g;
	int rc = wait_group(mc, o, check, round, until, &g, &out->beat_ms, err);
	if (rc < 0)
		return rc;
	double secs = 0;
	bool closed = false;
	bool ok = o->collective ? coll_round(mc, o, check, &g, round, until, out, &secs, &closed)
				: tcp_round(mc, o, l, check, &g, round, out, &secs, &closed);
	out->ok[round] = ok;
	out->time_s[round] = secs;
	if (closed)
		return 0; /* the master judged this round without us */
	struct rv_netcheck_report rep = { .check = check,
					  .round = round,
					  .ok = ok,
					  .time_s = secs,
					  .compute_s = ok && o->collective ? out->compute_s[round]
									   : 0 };
	snprintf(rep.node, sizeof(rep.node), "%s", o->node);
	rv_log_info("network check round", "check=%lld round=%d ok=%s time_s=%.3f peers=%d",
		    (long long)check, round, ok ? "true" : "false", secs, g.npeers - 1);
	return rv_master_netcheck_report(mc, &rep, err);
}

/* A node's best time of the two rounds; -1 when it has none. */
static double best_time(const struct rv_netcheck_result *n)
{
	double b = -1;
	if (n->ok0)
		b = n->time0_s;
	if (n->ok1 && (b < 0 || n->time1_s < b))
		b = n->time1_s;
	return b;
}

static void append(char *list, size_t size, const struct rv_netcheck_result *n)
{
	size_t k = strlen(list);
	snprintf(list + k, size - k, "%s%s:%.3f", k ? "," : "", n->node, best_time(n));
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The verdicts of a finished check into out. */
static void take_verdicts(const struct rv_netcheck_status *st, const char *node,
			  struct netprobe_result *out)
{
	RV_CLEANUP_FREE double *t = calloc((size_t)st->nnodes + 1, sizeof(*t));
	int nt = 0;
	for (int i = 0; i < st->nnodes; i++) {
		const struct rv_netcheck_result *n = &st->nodes[i];
		if (!strcmp(n->node, node))
			out->verdict = n->verdict;
		if (t && best_time(n) >= 0)
			t[nt++] = best_time(n);
		if (n->verdict == RV_VERDICT_FAULTY) {
			out->nfaulty++;
			append(out->faulty, sizeof(out->faulty), n);
		} else if (n->verdict == RV_VERDICT_STRAGGLER) {
			out->nstragglers++;
			append(out->stragglers, sizeof(out->stragglers), n);
		}
	}
	if (nt > 0)
		qsort(t, (size_t)nt, sizeof(t[0]), cmp_double);
	out->median_s = nt == 0 ? 0 : nt % 2 ? t[nt / 2] : (t[nt / 2 - 1] + t[nt / 2]) / 2;
}

int netprobe_run(struct rv_master_client *mc, const struct netprobe_opts *o,
		 struct netprobe_result *out, struct rv_err *err)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->backend, sizeof(out->backend), "%s", o->collective ? "none" : "tcp");
	int64_t until = rv_mono_ms() + o->timeout_ms;
	struct listener l = { .fd = -1 };
	int rc = o->collective ? 0 : listener_start(&l, o->port, o->round_timeout_ms, err);
	if (rc < 0)
		return rc;
	struct rv_netcheck_joined j;
	rc = rv_master_netcheck_join(mc, o->node, &j, err);
	if (rc == 0 && j.world > o->world)
		rc = 1;
	else if (rc == 0 && j.world < o->world)
		rc = rv_err_set(err, -EPROTO, "", "network check of world %lld, not %lld",
				(long long)j.world, (long long)o->world);
	for (int round = 0; rc == 0 && round < NETPROBE_ROUNDS; round++)
		rc = one_round(mc, o, &l, j.check, round, until, out, err);
	listener_stop(&l);
	if (rc != 0)
		return rc;
	out->check = j.check;
	if (out->decided)
		return 0; /* the verdicts came with round 1's close */
	/* the verdicts come once every member reported round 1 or its deadline
	 * passed */
	for (;;) {
		beat(mc, o->node, &out->beat_ms);
		struct rv_netcheck_status st = { 0 };
		if ((rc = rv_master_netcheck(mc, &st, err)) < 0)
			return rc;
		if (st.check != j.check) {
			rv_netcheck_status_release(&st);
			return rv_err_set(err, -ESTALE, "", "network check %lld replaced",
					  (long long)j.check);
		}
		bool done = st.state == RV_NETCHECK_DONE;
		if (done)
			take_verdicts(&st, o->node, out);
		rv_netcheck_status_release(&st);
		if (done)
			return 0;
		if (rv_mono_ms() >= until)
			return rv_err_set(err, -ETIMEDOUT, "", "network check: no verdict in time");
		usleep(NP_POLL_MS * 1000);
	}
}
