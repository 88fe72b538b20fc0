/*
 * check_tcpstore.c: rover-run's c10d store (agent/tcpstore.c) against the
 * real clients: Debian's torch 1.13 TCPStore (every query its Python
 * binding has, and PrefixStores over it), two gloo ranks through env://
 * with TORCHELASTIC_USE_AGENT_STORE=True and different restart counts (so
 * different 1.13 key prefixes), an explicit TCPStore client handed to
 * init_process_group; torch 2.x's protocol spoken by hand (VALIDATE, PING,
 * SET .. MULTI_SET, WAIT and CANCEL_WAIT by its numbers); and rounds: a new
 * round's keys start empty and the old round's port and connections close.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tcpstore.h"
#include "testutil.h"

static bool have_torch(void)
{
	return system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") == 0;
}

/* Run python code (with PORT in its environment) to its end; its exit
 * code, its output into out. */
static int py(const char *code, int port, const char *env, char *out, size_t size)
{
	char dir[] = "/tmp/rv-tcpstore-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char path[128], cmd[512];
	snprintf(path, sizeof(path), "%s/t.py", dir);
	rv_test_write_file(path, code);
	snprintf(cmd, sizeof(cmd), "cd %s && PORT=%d %s timeout 240 /usr/bin/python3 t.py 2>&1",
		 dir, port, env ? env : "");
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	size_t n = fread(out, 1, size - 1, p);
	out[n] = 0;
	int st = pclose(p);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* A new store listening for round 0 (the caller's, tcpstore_free); its
 * port into *port. */
static struct tcpstore *store_open(int *port)
{
	struct rv_err err = { 0 };
	struct tcpstore *s = tcpstore_new(&err);
	ck_assert_msg(s, "%s", err.msg);
	*port = tcpstore_round(s, 0, &err);
	ck_assert_msg(*port > 0, "%s", err.msg);
	return s;
}

/* store_open's store for test, which runs torch: NULL (test skipped)
 * when /usr/bin/python3 cannot import it. */
static struct tcpstore *torch_store_open(const char *test, int *port)
{
	if (!have_torch()) {
		rv_test_skip(test, true, "/usr/bin/python3 cannot import torch");
		return NULL;
	}
	return store_open(port);
}

START_TEST(test_torch113_queries)
{
	int port;
	struct tcpstore *s = torch_store_open(__func__, &port);
	if (!s)
		return;
	char out[8192];
	int rc = py("import os, datetime, torch.distributed as d\n"
		    "t = datetime.timedelta(seconds=5)\n"
		    "a = d.TCPStore('127.0.0.1', int(os.environ['PORT']), None, False, t)\n"
		    "b = d.TCPStore('localhost', int(os.environ['PORT']), None, False, t)\n"
		    "a.set('k', b'v1')\n"
		    "assert b.get('k') == b'v1'\n"
		    "assert a.add('n', 3) == 3 and b.add('n', 4) == 7 and a.get('n') == b'7'\n"
		    "assert a.compare_set('k', b'v1', b'v2') == b'v2'\n"
		    "assert a.compare_set('k', b'zz', b'v3') == b'v2'\n"
		    "assert a.compare_set('new', b'', b'x') == b'x'\n"
		    "assert a.num_keys() == 3, a.num_keys()\n"
		    "assert a.delete_key('new') and not a.delete_key('new')\n"
		    "a.wait(['k'])\n"
		    "try:\n"
		    "    a.wait(['never'], datetime.timedelta(milliseconds=200))\n"
		    "    raise SystemExit('waited for a missing key')\n"
		    "except RuntimeError as e:\n"
		    "    print('timeout ok', e)\n"
		    "p = d.PrefixStore('/worker/attempt_3', a)\n"
		    "q = d.PrefixStore('/worker/attempt_0', b)\n"
		    "p.set('x', b'same')\n"
		    "assert q.get('x') == b'same'\n"
		    "big = bytes(range(256)) * 4096\n"
		    "a.set('big', big)\n"
		    "assert b.get('big') == big\n"
		    "print('queries ok')\n",
		    port, NULL, out, sizeof(out));
	ck_assert_msg(rc == 0 && strstr(out, "queries ok"), "rc %d:\n%s", rc, out);
	tcpstore_free(s);
}
END_TEST

/* Two gloo ranks through env://, both clients of the store, with torch
 * 1.13's key prefixes from different restart counts. */
START_TEST(test_env_init_agent_store)
{
	int port;
	struct tcpstore *s = torch_store_open(__func__, &port);
	if (!s)
		return;
	char out[8192];
	/* both ranks through env://, then both through explicit client stores
	 * handed to init_process_group */
	int rc = py(
		"import os, sys, subprocess, torch, torch.distributed as d\n"
		"if len(sys.argv) > 1:\n"
		"    r = int(os.environ['RANK'])\n"
		"    if sys.argv[1] == 'explicit':\n"
		"        st = d.TCPStore(os.environ['MASTER_ADDR'], "
		"int(os.environ['MASTER_PORT']),\n"
		"                        2, False)\n"
		"        d.init_process_group('gloo', store=st, rank=r, world_size=2)\n"
		"    else:\n"
		"        d.init_process_group('gloo')\n"
		"    t = torch.tensor([float(r + 1)])\n"
		"    d.all_reduce(t)\n"
		"    os.write(1, ('%s sum %d\\n' % (sys.argv[1], int(t.item()))).encode())\n"
		"    sys.exit(0)\n"
		"env = dict(os.environ, MASTER_ADDR='127.0.0.1', MASTER_PORT=os.environ['PORT'],\n"
		"           WORLD_SIZE='2', TORCHELASTIC_USE_AGENT_STORE='True')\n"
		"for mode in ('env', 'explicit'):\n"
		"    ps = [subprocess.Popen([sys.executable, __file__, mode], env=dict(env,\n"
		"          RANK=str(r), TORCHELASTIC_RESTART_COUNT=str(r))) for r in (0, 1)]\n"
		"    if max(p.wait() for p in ps):\n"
		"        sys.exit(1)\n",
		port, NULL, out, sizeof(out));
	ck_assert_msg(rc == 0, "rc %d:\n%s", rc, out);
	const char *e1 = strstr(out, "env sum 3\n"), *x1 = strstr(out, "explicit sum 3\n");
	ck_assert_msg(e1 && strstr(e1 + 1, "env sum 3\n") && x1 &&
			      strstr(x1 + 1, "explicit sum 3\n"),
		      "%s", out);
	tcpstore_free(s);
}
END_TEST

static int dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { .tv_sec = 5 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static void put(int fd, const void *p, size_t n)
{
	ck_assert_int_eq(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void put_str(int fd, const char *s)
{
	uint64_t n = strlen(s);
	put(fd, &n, sizeof(n));
	put(fd, s, n);
}

static void get(int fd, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = recv(fd, (char *)p + got, n - got, 0);
		ck_assert_msg(k > 0, "recv: %zd %s", k, strerror(errno));
		got += (size_t)k;
	}
}

/* A vector answer: u64 length and bytes, compared with want. */
static void get_str(int fd, const char *want)
{
	uint64_t n;
	char buf[256];
	get(fd, &n, sizeof(n));
	ck_assert_uint_lt(n, sizeof(buf));
	get(fd, buf, n);
	buf[n] = 0;
	ck_assert_str_eq(buf, want);
}

static void q(int fd, uint8_t t)
{
	put(fd, &t, 1);
}

/* torch 2.x's protocol, by its query numbers. */
START_TEST(test_torch2_protocol)
{
	int port;
	struct tcpstore *s = store_open(&port);
	int a = dial(port), b = dial(port);
	ck_assert_int_ge(a, 0);
	ck_assert_int_ge(b, 0);
	uint32_t magic = 0x3C85F7CE, nonce = 0xdeadbeef, back = 0;
	for (int fd = a; fd >= 0; fd = fd == a ? b : -1) {
		q(fd, 0);
		put(fd, &magic, 4);
	}
	q(a, 13); /* PING */
	put(a, &nonce, 4);
	get(a, &back, 4);
	ck_assert_uint_eq(back, nonce);
	/* b waits for two keys; a sets them one by one */
	uint64_t two = 2;
	q(b, 6);
	put(b, &two, 8);
	put_str(b, "x");
	put_str(b, "y");
	q(a, 1); /* SET */
	put_str(a, "x");
	put_str(a, "1");
	struct pollfd pb = { .fd = b, .events = POLLIN };
	ck_assert_int_eq(poll(&pb, 1, 200), 0); /* y is not set yet */
	q(a, 11);                               /* MULTI_SET */
	uint64_t one = 1;
	put(a, &one, 8);
	put_str(a, "y");
	put_str(a, "22");
	uint8_t r = 9;
	get(b, &r, 1);
	ck_assert_uint_eq(r, 0); /* STOP_WAITING */
	q(b, 10);                /* MULTI_GET */
	put(b, &two, 8);
	put_str(b, "y");
	put_str(b, "x");
	get_str(b, "22");
	get_str(b, "1");
	q(a, 9); /* APPEND */
	put_str(a, "x");
	put_str(a, "23");
	q(a, 3); /* GET */
	put_str(a, "x");
	get_str(a, "123");
	int64_t v = 5, got = 0;
	q(a, 4); /* ADD */
	put_str(a, "x");
	put(a, &v, 8);
	get(a, &got, 8);
	ck_assert_int_eq(got, 128);
	q(b, 6); /* WAIT for a key never set, then CANCEL_WAIT */
	put(b, &one, 8);
	put_str(b, "never");
	q(b, 12);
	get(b, &r, 1);
	ck_assert_uint_eq(r, 1); /* WAIT_CANCELED */
	q(a, 7);                 /* GETNUMKEYS */
	get(a, &got, 8);
	ck_assert_int_eq(got, 2);
	close(a);
	close(b);
	tcpstore_free(s);
}
END_TEST

/* A new round: the old port refuses, its connections are closed, and the
 * keys start empty. */
START_TEST(test_rounds_do_not_share_keys)
{
	struct rv_err err = { 0 };
	struct tcpstore *s = tcpstore_new(&err);
	ck_assert_ptr_nonnull(s);
	int p1 = tcpstore_round(s, 0, &err);
	ck_assert_int_gt(p1, 0);
	int a = dial(p1);
	ck_assert_int_ge(a, 0);
	q(a, 0); /* a torch 1.13 SET */
	put_str(a, "k");
	put_str(a, "old");
	q(a, 6); /* 1.13's GETNUMKEYS */
	int64_t n = 0;
	get(a, &n, 8);
	ck_assert_int_eq(n, 1);
	int p2 = tcpstore_round(s, 0, &err);
	ck_assert_int_gt(p2, 0);
	ck_assert_int_ne(p1, p2);
	char c;
	ck_assert_int_le(recv(a, &c, 1, 0), 0); /* closed by the store */
	close(a);
	ck_assert_int_eq(dial(p1), -ECONNREFUSED);
	int b = dial(p2);
	ck_assert_int_ge(b, 0);
	q(b, 4); /* 1.13's CHECK */
	uint64_t one = 1;
	put(b, &one, 8);
	put_str(b, "k");
	uint8_t r = 0;
	get(b, &r, 1);
	ck_assert_uint_eq(r, 1); /* NOT_READY */
	close(b);
	tcpstore_free(s);
}
END_TEST

RV_TEST_MAIN_TCASE("tcpstore", "core", 600, test_torch113_queries, test_env_init_agent_store,
		   test_torch2_protocol, test_rounds_do_not_share_keys)
