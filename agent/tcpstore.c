/*
 * tcpstore.c: the workers' c10d store held by rover-run (tcpstore.h).
 *
 * One thread, one epoll loop over: a pipe from the supervisor (each message
 * a new round's listening fd, or -1 to stop), the round's listener, and its
 * connections.  Each connection reads into a buffer; a query is served once
 * it is whole (tcpstore_query parses from the buffer and answers 0 when
 * more bytes are needed), so a slow client holds nobody up.  Answers go to
 * an output buffer flushed at once, the rest on EPOLLOUT.
 * Invariant: everything here (keys, connections, the listener) belongs to
 * the current round; a new round frees all of it first.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"
#include "parse.h"
#include "tcpstore.h"

#define TS_MAX_KEY    (1u << 20)
#define TS_MAX_VALUE  (64u << 20)
#define TS_MAX_BYTES  (256u << 20)
#define TS_MAX_KEYS   (1u << 20)
#define TS_MAX_CONNS  4096
#define TS_MAX_NKEYS  (1u << 16)  /* keys in one CHECK/WAIT/MULTI_* query */
#define TS_MAGIC      0x3C85F7CEu /* 2.x's VALIDATE */
#define TS_TAG_PIPE   0
#define TS_TAG_LISTEN 1

/* Queries by torch 2.x's numbers; 1.13's are mapped onto them. */
enum ts_query {
	TS_VALIDATE,
	TS_SET,
	TS_COMPARE_SET,
	TS_GET,
	TS_ADD,
	TS_CHECK,
	TS_WAIT,
	TS_GETNUMKEYS,
	TS_DELETE_KEY,
	TS_APPEND,
	TS_MULTI_GET,
	TS_MULTI_SET,
	TS_CANCEL_WAIT,
	TS_PING,
};

struct ts_kv {
	char *key;
	size_t klen;
	uint8_t *val;
	size_t vlen;
};

struct ts_conn {
	int fd;
	int proto;          /* 0 not known yet, 1 torch 1.13, 2 torch 2.x */
	struct rv_buf in;   /* bytes read, not yet a whole query */
	struct rv_buf out;  /* answers not yet written */
	struct rv_buf wait; /* a WAIT's keys (each u64 length + bytes), or empty */
	bool waiting;
	bool want_out; /* EPOLLOUT asked for */
};

struct tcpstore {
	pthread_t th;
	bool started;
	int pipe_w, pipe_r;
	int epfd;
	int listen_fd;
	struct ts_kv *kv;
	size_t nkv, capkv, bytes;
	struct ts_conn *conns[TS_MAX_CONNS];
	int nconns;
	char ktmp[TS_MAX_KEY]; /* a key without 1.13's attempt prefix */
};

/* ---- buffers ---- */

static int buf_put(struct rv_buf *b, const void *p, size_t n)
{
	rv_buf_append(b, p, n);
	return rv_buf_failed(b) ? -ENOMEM : 0;
}

/* A cursor over a connection's input: each take fails (returns false) when
 * the query is not whole yet; cur->bad marks a query to refuse. */
struct ts_cur {
	const uint8_t *p;
	size_t len, at;
	bool bad;
};

static bool take(struct ts_cur *c, void *out, size_t n)
{
	if (c->len - c->at < n)
		return false;
	memcpy(out, c->p + c->at, n);
	c->at += n;
	return true;
}

/* A length-prefixed byte string (u64 length, torch's size_t): borrowed. */
static bool take_bytes(struct ts_cur *c, const uint8_t **p, size_t *n, size_t max)
{
	uint64_t len;
	if (!take(c, &len, sizeof(len)))
		return false;
	if (len > max) {
		c->bad = true;
		return false;
	}
	if (c->len - c->at < len)
		return false;
	*p = c->p + c->at;
	*n = (size_t)len;
	c->at += (size_t)len;
	return true;
}

/* torch 1.13's env:// puts the restart count in every key
 * ("/" + "/worker/attempt_N/" + key), which differs between nodes that
 * spent different restarts: dropped, one round being one key space. */
static void key_norm(const uint8_t **p, size_t *n, char *tmp, size_t size)
{
	static const char pre[] = "/worker/attempt_";
	size_t pl = sizeof(pre) - 1;
	for (size_t o = 0; o <= 1 && o + pl < *n; o++) {
		if (memcmp(*p + o, pre, pl) != 0)
			continue;
		size_t i = o + pl;
		while (i < *n && (*p)[i] >= '0' && (*p)[i] <= '9')
			i++;
		if (i == o + pl || i >= *n || (*p)[i] != '/' || *n - i + o > size)
			return;
		/* PrefixStore's "/worker/attempt_N" + "/" + key: the key, as
		 * an explicit TCPStore client (and torch >= 2.5) names it */
		memcpy(tmp, *p, o);
		memcpy(tmp + o, *p + i + 1, *n - i - 1);
		*n = *n - i - 1 + o;
		*p = (const uint8_t *)tmp;
		return;
	}
}

/* A key, borrowed until the next take_key (it may live in s->ktmp). */
static bool take_key(struct tcpstore *s, struct ts_cur *c, const uint8_t **p, size_t *n)
{
	if (!take_bytes(c, p, n, TS_MAX_KEY))
		return false;
	key_norm(p, n, s->ktmp, sizeof(s->ktmp));
	return true;
}

/* ---- keys ---- */

static struct ts_kv *kv_find(struct tcpstore *s, const uint8_t *k, size_t n)
{
	for (size_t i = 0; i < s->nkv; i++)
		if (s->kv[i].klen == n && !memcmp(s->kv[i].key, k, n))
			return &s->kv[i];
	return NULL;
}

static void kv_clear(struct tcpstore *s)
{
	for (size_t i = 0; i < s->nkv; i++) {
		free(s->kv[i].key);
		free(s->kv[i].val);
	}
	s->nkv = 0;
	s->bytes = 0;
}

/* Set key k to v (n bytes), appended to the old value with append.
 * -ENOSPC past the limits, -ENOMEM. */
static int kv_set(struct tcpstore *s, const uint8_t *k, size_t kn, const uint8_t *v, size_t n,
		  bool append)
{
	struct ts_kv *e = kv_find(s, k, kn);
	size_t old = e ? e->vlen : 0;
	size_t len = append ? old + n : n;
	if (len > TS_MAX_VALUE || s->bytes - old + len + kn > TS_MAX_BYTES ||
	    (!e && s->nkv >= TS_MAX_KEYS))
		return -ENOSPC;
	if (!e) {
		if (s->nkv == s->capkv) {
			size_t cap = s->capkv ? 2 * s->capkv : 64;
			struct ts_kv *q = realloc(s->kv, cap * sizeof(*q));
			if (!q)
				return -ENOMEM;
			s->kv = q;
			s->capkv = cap;
		}
		char *key = malloc(kn ? kn : 1);
		if (!key)
			return -ENOMEM;
		memcpy(key, k, kn);
		e = &s->kv[s->nkv++];
		*e = (struct ts_kv){ .key = key, .klen = kn };
		s->bytes += kn;
	}
	uint8_t *val = malloc(len ? len : 1);
	if (!val)
		return -ENOMEM;
	if (append && old)
		memcpy(val, e->val, old);
	memcpy(val + (append ? old : 0), v, n);
	free(e->val);
	e->val = val;
	s->bytes = s->bytes - old + len;
	e->vlen = len;
	return 0;
}

static bool kv_del(struct tcpstore *s, const uint8_t *k, size_t n)
{
	struct ts_kv *e = kv_find(s, k, n);
	if (!e)
		return false;
	s->bytes -= e->klen + e->vlen;
	free(e->key);
	free(e->val);
	*e = s->kv[--s->nkv];
	return true;
}

/* Whether every key of a list (u64 length + bytes each, count n) is set. */
static bool keys_all_set(struct tcpstore *s, const uint8_t *p, size_t len)
{
	struct ts_cur c = { .p = p, .len = len };
	while (c.at < c.len) {
		const uint8_t *k;
		size_t kn;
		if (!take_key(s, &c, &k, &kn))
			return false;
		if (!kv_find(s, k, kn))
			return false;
	}
	return true;
}

/* ---- connections ---- */

static int conn_flush(struct tcpstore *s, struct ts_conn *c)
{
	size_t done = 0;
	while (done < c->out.len) {
		ssize_t k = send(c->fd, c->out.data + done, c->out.len - done,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (k < 0)
			return -errno;
		done += (size_t)k;
	}
	rv_buf_consume(&c->out, done);
	bool want = c->out.len > 0;
	if (want != c->want_out) {
		struct epoll_event ev = { .events = EPOLLIN | (want ? EPOLLOUT : 0),
					  .data.ptr = c };
		epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev);
		c->want_out = want;
	}
	return 0;
}

static int put_u8(struct ts_conn *c, uint8_t v)
{
	return buf_put(&c->out, &v, 1);
}

static int put_i64(struct ts_conn *c, int64_t v)
{
	return buf_put(&c->out, &v, sizeof(v));
}

static int put_vec(struct ts_conn *c, const uint8_t *p, size_t n)
{
	uint64_t len = n;
	int rc = buf_put(&c->out, &len, sizeof(len));
	return rc < 0 ? rc : buf_put(&c->out, p, n);
}

/* A key changed: answer every WAIT whose keys are all set now. */
static void wake_waiters(struct tcpstore *s)
{
	for (int i = 0; i < s->nconns; i++) {
		struct ts_conn *c = s->conns[i];
		if (!c->waiting || !keys_all_set(s, (const uint8_t *)c->wait.data, c->wait.len))
			continue;
		c->waiting = false;
		c->wait.len = 0;
		if (put_u8(c, 0) == 0) /* STOP_WAITING */
			conn_flush(s, c);
	}
}

/* The keys of a CHECK/WAIT/MULTI_GET (u64 count, then each key): copied
 * to *list as they came (u64 length + bytes each).  false: not whole. */
static bool take_key_list(struct tcpstore *s, struct ts_cur *cur, struct rv_buf *list)
{
	uint64_t n;
	if (!take(cur, &n, sizeof(n)))
		return false;
	if (n > TS_MAX_NKEYS) {
		cur->bad = true;
		return false;
	}
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *k;
		size_t kn;
		if (!take_key(s, cur, &k, &kn))
			return false;
		uint64_t len = kn;
		if (buf_put(list, &len, sizeof(len)) < 0 || buf_put(list, k, kn) < 0) {
			cur->bad = true;
			return false;
		}
	}
	return true;
}

/* SET, COMPARE_SET, GET, ADD, DELETE_KEY, APPEND.  1 served, 0 not whole,
 * negative: refuse (close). */
static int query_key(struct tcpstore *s, struct ts_conn *c, int q, struct ts_cur *cur)
{
	const uint8_t *k, *v = NULL, *v2 = NULL;
	size_t kn, vn = 0, vn2 = 0;
	int64_t delta = 0;
	if (!take_key(s, cur, &k, &kn))
		return cur->bad ? -EPROTO : 0;
	if ((q == TS_SET || q == TS_APPEND || q == TS_COMPARE_SET) &&
	    !take_bytes(cur, &v, &vn, TS_MAX_VALUE))
		return cur->bad ? -EPROTO : 0;
	if (q == TS_COMPARE_SET && !take_bytes(cur, &v2, &vn2, TS_MAX_VALUE))
		return cur->bad ? -EPROTO : 0;
	if (q == TS_ADD && !take(cur, &delta, sizeof(delta)))
		return 0;
	struct ts_kv *e = kv_find(s, k, kn);
	int rc = 0;
	switch (q) {
	case TS_SET:
	case TS_APPEND:
		rc = kv_set(s, k, kn, v, vn, q == TS_APPEND);
		break;
	case TS_COMPARE_SET:
		/* torch's: a missing key is set only when "expected" is empty,
		 * and the answer is the value now (or "expected" when missing) */
		if ((!e && vn == 0) || (e && e->vlen == vn && !memcmp(e->val, v, vn)))
			rc = kv_set(s, k, kn, v2, vn2, false);
		if (rc == 0)
			e = kv_find(s, k, kn);
		return rc < 0 ? rc : put_vec(c, e ? e->val : v, e ? e->vlen : vn) < 0 ? -ENOMEM : 1;
	case TS_GET:
		if (!e) /* torch's server fails the same way (its client waits first) */
			return -ENOENT;
		return put_vec(c, e->val, e->vlen) < 0 ? -ENOMEM : 1;
	case TS_ADD: {
		char num[32];
		if (e) {
			char old[32];
			char *end;
			if (e->vlen == 0 || e->vlen >= sizeof(old))
				return -EPROTO;
			memcpy(old, e->val, e->vlen);
			old[e->vlen] = 0;
			errno = 0;
			long long cur_v = strtoll(old, &end, 10);
			if (errno || *end)
				return -EPROTO;
			delta += cur_v;
		}
		int n = snprintf(num, sizeof(num), "%" PRId64, delta);
		rc = kv_set(s, k, kn, (const uint8_t *)num, (size_t)n, false);
		if (rc == 0)
			rc = put_i64(c, delta);
		break;
	}
	case TS_DELETE_KEY:
		return put_i64(c, kv_del(s, k, kn) ? 1 : 0) < 0 ? -ENOMEM : 1;
	}
	if (rc < 0)
		return rc;
	wake_waiters(s);
	return 1;
}

/* CHECK, WAIT, MULTI_GET, MULTI_SET, GETNUMKEYS, CANCEL_WAIT, PING. */
static int query_list(struct tcpstore *s, struct ts_conn *c, int q, struct ts_cur *cur)
{
	struct rv_buf list = { 0 };
	int rc = 1;
	uint32_t nonce;
	uint64_t n;
	switch (q) {
	case TS_GETNUMKEYS:
		return put_i64(c, (int64_t)s->nkv) < 0 ? -ENOMEM : 1;
	case TS_CANCEL_WAIT:
		c->waiting = false;
		c->wait.len = 0;
		return put_u8(c, 1) < 0 ? -ENOMEM : 1; /* WAIT_CANCELED */
	case TS_PING:
		if (!take(cur, &nonce, sizeof(nonce)))
			return 0;
		return buf_put(&c->out, &nonce, sizeof(nonce)) < 0 ? -ENOMEM : 1;
	case TS_MULTI_SET: {
		if (!take(cur, &n, sizeof(n)))
			return 0;
		if (n > TS_MAX_NKEYS)
			return -EPROTO;
		/* whole before any is set: a query is served once */
		struct ts_cur probe = *cur;
		for (uint64_t i = 0; i < n; i++) {
			const uint8_t *k, *v;
			size_t kn, vn;
			if (!take_bytes(&probe, &k, &kn, TS_MAX_KEY) ||
			    !take_bytes(&probe, &v, &vn, TS_MAX_VALUE))
				return probe.bad ? -EPROTO : 0;
		}
		for (uint64_t i = 0; i < n && rc > 0; i++) {
			const uint8_t *k, *v;
			size_t kn, vn;
			take_key(s, cur, &k, &kn);
			take_bytes(cur, &v, &vn, TS_MAX_VALUE);
			if (kv_set(s, k, kn, v, vn, false) < 0)
				rc = -ENOSPC;
		}
		wake_waiters(s);
		return rc;
	}
	}
	if (!take_key_list(s, cur, &list)) {
		rv_buf_release(&list);
		return cur->bad ? -EPROTO : 0;
	}
	bool all = keys_all_set(s, (const uint8_t *)list.data, list.len);
	if (q == TS_CHECK) {
		rc = put_u8(c, all ? 0 : 1) < 0 ? -ENOMEM : 1; /* READY, NOT_READY */
	} else if (q == TS_WAIT && all) {
		rc = put_u8(c, 0) < 0 ? -ENOMEM : 1;
	} else if (q == TS_WAIT) {
		rv_buf_release(&c->wait);
		c->wait = list; /* answered by wake_waiters */
		c->waiting = true;
		return 1;
	} else { /* MULTI_GET */
		struct ts_cur lc = { .p = (const uint8_t *)list.data, .len = list.len };
		const uint8_t *k;
		size_t kn;
		while (rc > 0 && lc.at < lc.len && take_bytes(&lc, &k, &kn, TS_MAX_KEY)) {
			struct ts_kv *e = kv_find(s, k, kn);
			rc = !e ? -ENOENT : put_vec(c, e->val, e->vlen) < 0 ? -ENOMEM : 1;
		}
	}
	rv_buf_release(&list);
	return rc;
}

/* The query type at the head of the input, by 2.x's numbers, after telling
 * the protocol apart on a connection's first bytes.  1 and *q set, 0 not
 * whole, negative: refuse. */
static int query_type(struct ts_conn *c, struct ts_cur *cur, int *q)
{
	uint8_t t;
	if (!take(cur, &t, 1))
		return 0;
	if (c->proto == 0) {
		/* 2.x opens with VALIDATE (0) and its magic; 1.13's 0 is a SET,
		 * whose key length would read as 1 GiB */
		uint32_t magic = 0;
		if (t == 0 && !take(cur, &magic, sizeof(magic)))
			return 0;
		c->proto = t == 0 && magic == TS_MAGIC ? 2 : 1;
		cur->at = 0;
		take(cur, &t, 1);
	}
	if (c->proto == 2) {
		*q = t;
		return t <= TS_PING ? 1 : -EPROTONOSUPPORT;
	}
	if (t <= 6) /* SET .. GETNUMKEYS */
		*q = t + 1;
	else if (t == 8)
		*q = TS_DELETE_KEY;
	else /* WATCH_KEY */
		return -EPROTONOSUPPORT;
	return 1;
}

/* Whether query q names one key first (query_key), else query_list. */
static bool query_by_key(int q)
{
	return q == TS_SET || q == TS_COMPARE_SET || q == TS_GET || q == TS_ADD ||
	       q == TS_DELETE_KEY || q == TS_APPEND;
}

/* Serve every whole query in c's input.  0, or negative: close it. */
static int conn_serve(struct tcpstore *s, struct ts_conn *c)
{
	size_t used = 0;
	int rc = 0;
	while (used < c->in.len) {
		struct ts_cur cur = { .p = (const uint8_t *)c->in.data + used,
				      .len = c->in.len - used };
		int q = -1;
		rc = query_type(c, &cur, &q);
		if (rc == 1 && q == TS_VALIDATE) {
			uint32_t magic;
			rc = !take(&cur, &magic, sizeof(magic)) ? 0
			     : magic == TS_MAGIC                ? 1
								: -EPROTO;
		} else if (rc == 1) {
			rc = query_by_key(q) ? query_key(s, c, q, &cur) : query_list(s, c, q, &cur);
		}
		if (rc <= 0)
			break;
		used += cur.at;
	}
	rv_buf_consume(&c->in, used);
	if (rc < 0) {
		rv_log_debug("store client refused", "fd=%d proto=%d reason=\"%s\"", c->fd,
			     c->proto, strerror(-rc));
		return rc;
	}
	return conn_flush(s, c);
}

/* ---- the thread ---- */

static void conn_close(struct tcpstore *s, int i)
{
	struct ts_conn *c = s->conns[i];
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	rv_buf_release(&c->in);
	rv_buf_release(&c->out);
	rv_buf_release(&c->wait);
	free(c);
	s->conns[i] = s->conns[--s->nconns];
}

static void conn_accept(struct tcpstore *s)
{
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct ts_conn *c = s->nconns < TS_MAX_CONNS ? calloc(1, sizeof(*c)) : NULL;
		if (!c) {
			rv_log_warn("store connection refused: too many", "conns=%d", s->nconns);
			close(fd);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->fd = fd;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
		s->conns[s->nconns++] = c;
	}
}

/* Read what c has; 0, or negative: close it (EOF included). */
static int conn_read(struct tcpstore *s, struct ts_conn *c)
{
	uint8_t buf[65536];
	for (;;) {
		ssize_t k = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (k <= 0)
			return k == 0 ? -ECONNRESET : -errno;
		/* a query's input is bounded by the key and value limits */
		if (c->in.len + (size_t)k > 3 * (size_t)TS_MAX_VALUE)
			return -EMSGSIZE;
		if (buf_put(&c->in, buf, (size_t)k) < 0)
			return -ENOMEM;
	}
	return conn_serve(s, c);
}

/* Drop the current round: its connections, listener and keys. */
static void round_drop(struct tcpstore *s)
{
	/* the listener first: once a client of the old round sees its
	 * connection closed, the old port refuses too */
	if (s->listen_fd >= 0) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->listen_fd, NULL);
		close(s->listen_fd);
		s->listen_fd = -1;
	}
	while (s->nconns > 0)
		conn_close(s, s->nconns - 1);
	kv_clear(s);
}

/* A message on the pipe: 0 go on, 1 stop. */
static int take_pipe(struct tcpstore *s)
{
	int fd;
	ssize_t k = read(s->pipe_r, &fd, sizeof(fd));
	if (k < 0 && errno == EINTR)
		return 0;
	round_drop(s);
	if (k == (ssize_t)sizeof(fd) && fd == -2)
		return 0; /* a round that could not listen: nothing served */
	if (k != (ssize_t)sizeof(fd) || fd < 0)
		return 1;
	s->listen_fd = fd;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->listen_fd };
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
	return 0;
}

/* One event of the loop.  1: stop the thread. */
static int store_event(struct tcpstore *s, struct epoll_event *evs, int n, int i)
{
	void *p = evs[i].data.ptr;
	if (!p)
		return 0; /* a connection closed earlier in this batch */
	if (p == &s->pipe_r) {
		int rc = take_pipe(s);
		for (int j = i + 1; j < n; j++) /* every connection is gone */
			evs[j].data.ptr = NULL;
		return rc;
	}
	if (p == &s->listen_fd) {
		conn_accept(s);
		return 0;
	}
	struct ts_conn *c = p;
	int rc = 0;
	if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		rc = conn_read(s, c);
	if (rc == 0 && (evs[i].events & EPOLLOUT))
		rc = conn_flush(s, c);
	if (rc < 0) {
		for (int k = 0; k < s->nconns; k++)
			if (s->conns[k] == c) {
				conn_close(s, k);
				break;
			}
		for (int j = i + 1; j < n; j++)
			if (evs[j].data.ptr == c)
				evs[j].data.ptr = NULL;
	}
	return 0;
}

static void *store_main(void *arg)
{
	struct tcpstore *s = arg;
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(s->epfd, evs, 64, -1);
		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++)
			if (store_event(s, evs, n, i))
				return NULL;
	}
	round_drop(s);
	return NULL;
}

struct tcpstore *tcpstore_new(struct rv_err *err)
{
	struct tcpstore *s = calloc(1, sizeof(*s));
	int p[2];
	if (!s) {
		rv_err_set(err, -ENOMEM, "", "could not start the store: out of memory");
		return NULL;
	}
	s->listen_fd = -1;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0 || pipe2(p, O_CLOEXEC) < 0) {
		rv_err_set(err, -errno, "", "could not start the store: %s", strerror(errno));
		if (s->epfd >= 0)
			close(s->epfd);
		free(s);
		return NULL;
	}
	s->pipe_r = p[0];
	s->pipe_w = p[1];
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->pipe_r };
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->pipe_r, &ev);
	if (pthread_create(&s->th, NULL, store_main, s) != 0) {
		rv_err_set(err, -EAGAIN, "", "could not start the store: no thread");
		tcpstore_free(s);
		return NULL;
	}
	s->started = true;
	return s;
}

/* A listening socket on port, IPv6 dual-stack, else IPv4.  fd or -errno. */
static int listen_on(int port)
{
	int one = 1, zero = 0;
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		struct sockaddr_in6 a6 = { .sin6_family = AF_INET6,
					   .sin6_port = htons((uint16_t)port),
					   .sin6_addr = in6addr_any };
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (bind(fd, (struct sockaddr *)&a6, sizeof(a6)) == 0 && listen(fd, 1024) == 0)
			return fd;
		close(fd);
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_ANY) };
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1024) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

int tcpstore_round(struct tcpstore *s, int port, struct rv_err *err)
{
	int fd = listen_on(port);
	if (fd < 0) {
		int none = -2; /* drop the previous round all the same */
		if (write(s->pipe_w, &none, sizeof(none)) < 0)
			rv_log_debug("could not drop the store's round", "reason=\"%s\"",
				     strerror(errno));
		return rv_err_set(err, fd, "", "could not listen for the store on port %d: %s",
				  port, strerror(-fd));
	}
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);
	if (getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		close(fd);
		return rv_err_set(err, -errno, "", "could not read the store's port: %s",
				  strerror(errno));
	}
	int got = a.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&a)->sin6_port)
					  : ntohs(((struct sockaddr_in *)&a)->sin_port);
	if (write(s->pipe_w, &fd, sizeof(fd)) != (ssize_t)sizeof(fd)) {
		close(fd);
		return rv_err_set(err, -EPIPE, "", "the store's thread is gone");
	}
	return got;
}

/* One try of tcpstore_ready on a resolved address: 1 answered, else 0. */
static int ready_once(const struct addrinfo *ai)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	struct timeval tv = { .tv_sec = 0, .tv_usec = 200 * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	uint8_t q = 6; /* 1.13's GETNUMKEYS: answered with an int64 */
	int64_t n;
	int ok = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 && write(fd, &q, 1) == 1 &&
		 recv(fd, &n, sizeof(n), MSG_WAITALL) == (ssize_t)sizeof(n);
	close(fd);
	return ok;
}

int tcpstore_ready(const char *host, int port, int timeout_ms)
{
	char svc[16];
	snprintf(svc, sizeof(svc), "%d", port);
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
	int64_t until = rv_mono_ms() + timeout_ms;
	do {
		if (!res && getaddrinfo(host, svc, &hints, &res) != 0)
			res = NULL;
		for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
			if (ready_once(ai)) {
				freeaddrinfo(res);
				return 0;
			}
		usleep(5000);
	} while (rv_mono_ms() < until);
	if (res)
		freeaddrinfo(res);
	return -ETIMEDOUT;
}

struct tcpstore *tcpstore_free(struct tcpstore *s)
{
	if (!s)
		return NULL;
	if (s->started) {
		int stop = -1;
		if (write(s->pipe_w, &stop, sizeof(stop)) == (ssize_t)sizeof(stop))
			pthread_join(s->th, NULL);
		else
			pthread_cancel(s->th);
	}
	round_drop(s);
	free(s->kv);
	close(s->pipe_r);
	close(s->pipe_w);
	close(s->epfd);
	free(s);
	return NULL;
}
