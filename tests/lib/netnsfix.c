/*
 * netnsfix.c: commands for network namespace tests (netnsfix.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "netnsfix.h"
#include "proc.h"

int rv_test_cmd(const char *const *argv, bool quiet)
{
	struct rv_buf out;
	rv_buf_init(&out);
	struct rv_proc_opts o = { .argv = argv };
	int st = 0, rc = rv_proc_run(&o, 10000, &st, &out);
	if (rc == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		rc = -EIO;
	if (rc < 0 && !quiet) {
		fprintf(stderr, "netns:");
		for (int i = 0; argv[i]; i++)
			fprintf(stderr, " %s", argv[i]);
		fprintf(stderr, ": %s\n", out.data ? out.data : strerror(-rc));
	}
	rv_buf_release(&out);
	return rc;
}

const char *rv_test_netns_skip(void)
{
	if (geteuid() != 0)
		return "not root";
	if (RV_TEST_CMD_QUIET("ip", "-V") < 0)
		return "no iproute2 (ip) on PATH";
	return NULL;
}

static int netns_fail(struct rv_test_netns *net, const char *why)
{
	snprintf(net->skip, sizeof(net->skip), "%s", why);
	return -EIO;
}

/* Namespace i's end of its link (veth_ns[i], just made) moved into it
 * with its address and MAC, the other end on the bridge, both up. */
static int netns_link_up(struct rv_test_netns *net, int i)
{
	const char *ns = net->ns[i], *vh = net->veth_host[i], *vn = net->veth_ns[i];
	char cidr[40];
	snprintf(cidr, sizeof(cidr), "%s/24", net->addr[i]);
	if (RV_TEST_CMD("ip", "link", "set", vn, "netns", ns) < 0 ||
	    RV_TEST_CMD("ip", "link", "set", vh, "master", net->bridge) < 0 ||
	    RV_TEST_CMD("ip", "link", "set", vh, "up") < 0 ||
	    RV_TEST_CMD("ip", "netns", "exec", ns, "ip", "link", "set", vn, "address",
			net->mac[i]) < 0 ||
	    RV_TEST_CMD("ip", "netns", "exec", ns, "ip", "addr", "add", cidr, "dev", vn) < 0 ||
	    RV_TEST_CMD("ip", "netns", "exec", ns, "ip", "link", "set", vn, "up") < 0)
		return -EIO;
	return 0;
}

/* Namespace i behind its veth pair on the bridge, its address in the /24
 * whose .1 the bridge has. */
static int netns_host_up(struct rv_test_netns *net, const char *prefix, int i, int a, int b)
{
	int pid = (int)getpid();
	char cidr[40];
	snprintf(net->addr[i], sizeof(net->addr[i]), "10.%d.%d.%d", a, b, 2 + i);
	snprintf(cidr, sizeof(cidr), "%s/24", net->addr[i]);
	snprintf(net->mac[i], sizeof(net->mac[i]), "02:52:0a:%02x:%02x:%02x", a & 0xff, b & 0xff,
		 2 + i);
	snprintf(net->ns[i], sizeof(net->ns[i]), "%s-%d-%d", prefix, pid, i);
	if (RV_TEST_CMD("ip", "netns", "add", net->ns[i]) < 0) {
		net->ns[i][0] = '\0';
		return netns_fail(net, "ip netns add failed");
	}
	const char *ns = net->ns[i], *vh = net->veth_host[i], *vn = net->veth_ns[i];
	snprintf(net->veth_host[i], sizeof(net->veth_host[i]), "rvh%c%d", 'a' + i, pid % 1000000);
	snprintf(net->veth_ns[i], sizeof(net->veth_ns[i]), "rvn%c%d", 'a' + i, pid % 1000000);
	if (RV_TEST_CMD("ip", "link", "add", vh, "type", "veth", "peer", "name", vn) < 0) {
		net->veth_host[i][0] = '\0';
		return netns_fail(net, "could not add a veth pair");
	}
	if (netns_link_up(net, i) < 0 ||
	    RV_TEST_CMD("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up") < 0)
		return netns_fail(net, "could not set up the veth pairs");
	net->wrap[i][0] = "ip";
	net->wrap[i][1] = "netns";
	net->wrap[i][2] = "exec";
	net->wrap[i][3] = net->ns[i];
	net->wrap[i][4] = NULL;
	return 0;
}

int rv_test_netns_up(struct rv_test_netns *net, const char *prefix, int n)
{
	memset(net, 0, sizeof(*net));
	if (n < 1 || n > RV_TEST_NETNS_MAX)
		return -EINVAL;
	const char *why = rv_test_netns_skip();
	if (why)
		return netns_fail(net, why);
	int pid = (int)getpid();
	int a = 200 + pid % 50, b = (pid / 50) % 250;
	char cidr[40];
	snprintf(net->bridge, sizeof(net->bridge), "rvb%d", pid % 1000000);
	snprintf(net->addr_root, sizeof(net->addr_root), "10.%d.%d.1", a, b);
	snprintf(cidr, sizeof(cidr), "%s/24", net->addr_root);
	if (RV_TEST_CMD("ip", "link", "add", net->bridge, "type", "bridge") < 0) {
		net->bridge[0] = '\0';
		return netns_fail(net, "could not add a bridge (no permission?)");
	}
	if (RV_TEST_CMD("ip", "addr", "add", cidr, "dev", net->bridge) < 0 ||
	    RV_TEST_CMD("ip", "link", "set", net->bridge, "up") < 0)
		return netns_fail(net, "could not set up the bridge");
	for (int i = 0; i < n; i++) {
		net->n = i + 1;
		int rc = netns_host_up(net, prefix, i, a, b);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void rv_test_netns_down(struct rv_test_netns *net)
{
	for (int i = 0; i < net->n; i++) {
		if (net->veth_host[i][0])
			RV_TEST_CMD_QUIET("ip", "link", "del", net->veth_host[i]);
		if (net->ns[i][0])
			RV_TEST_CMD_QUIET("ip", "netns", "del", net->ns[i]);
	}
	if (net->bridge[0])
		RV_TEST_CMD_QUIET("ip", "link", "del", net->bridge);
	net->n = 0;
	net->bridge[0] = '\0';
}

/* ---- a delaying link in user space, for kernels without sch_netem ----
 * Namespace i's veth pair gives way to two TAP devices of the same names
 * (veth_ns[i] inside the namespace with its address, veth_host[i] on the
 * bridge) and a thread of ours that copies each frame from one to the
 * other once it is ms old.  A TAP device offers no offloads, so the
 * kernel hands it whole, checksummed frames of at most the MTU. */

#define RELAY_FRAMES 4096
#define RELAY_FRAME  2048

struct relay_dir {
	int from, to;
	int head, count;
	int64_t due_us[RELAY_FRAMES];
	int len[RELAY_FRAMES];
	unsigned char (*frame)[RELAY_FRAME];
};

struct relay {
	struct relay_dir dir[2];
	atomic_llong delay_us;
	atomic_bool stop;
	pthread_t thread;
};

static struct relay *relays[RV_TEST_NETNS_MAX];

static int64_t relay_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A TAP device named name: its fd, or a negative errno. */
static int relay_tap(const char *name)
{
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI };
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

/* Take what d->from has into the queue; send what is due to d->to. */
static void relay_move(struct relay_dir *d, int64_t delay_us, bool readable)
{
	while (readable && d->count < RELAY_FRAMES) {
		int k = (d->head + d->count) % RELAY_FRAMES;
		ssize_t n = read(d->from, d->frame[k], RELAY_FRAME);
		if (n <= 0)
			break;
		d->len[k] = (int)n;
		d->due_us[k] = relay_now_us() + delay_us;
		d->count++;
	}
	int64_t now = relay_now_us();
	while (d->count > 0 && d->due_us[d->head] <= now) {
		if (write(d->to, d->frame[d->head], (size_t)d->len[d->head]) < 0 && errno == EAGAIN)
			break;
		d->head = (d->head + 1) % RELAY_FRAMES;
		d->count--;
	}
}

static void *relay_main(void *arg)
{
	struct relay *r = arg;
	while (!atomic_load(&r->stop)) {
		int64_t wait_us = 50000; /* to look at stop */
		for (int k = 0; k < 2; k++)
			if (r->dir[k].count > 0) {
				int64_t w = r->dir[k].due_us[r->dir[k].head] - relay_now_us();
				wait_us = w < wait_us ? (w > 0 ? w : 0) : wait_us;
			}
		struct pollfd pf[2] = { { .fd = r->dir[0].from, .events = POLLIN },
					{ .fd = r->dir[1].from, .events = POLLIN } };
		struct timespec ts = { .tv_sec = wait_us / 1000000,
				       .tv_nsec = (wait_us % 1000000) * 1000 };
		if (ppoll(pf, 2, &ts, NULL) < 0 && errno != EINTR)
			break;
		for (int k = 0; k < 2; k++)
			relay_move(&r->dir[k], atomic_load(&r->delay_us), pf[k].revents & POLLIN);
	}
	return NULL;
}

static struct relay *relay_free(struct relay *r)
{
	if (!r)
		return NULL;
	for (int k = 0; k < 2; k++) {
		if (r->dir[k].from >= 0)
			close(r->dir[k].from);
		free(r->dir[k].frame);
	}
	free(r);
	return NULL;
}

static int relay_start(struct rv_test_netns *net, int i, int ms)
{
	struct relay *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->delay_us = (int64_t)ms * 1000;
	r->dir[0].from = r->dir[1].from = -1;
	if (RV_TEST_CMD("ip", "link", "del", net->veth_host[i]) < 0) {
		relay_free(r);
		return -EIO;
	}
	int rc = 0;
	for (int k = 0; k < 2 && rc == 0; k++) {
		r->dir[k].frame = malloc((size_t)RELAY_FRAMES * RELAY_FRAME);
		rc = r->dir[k].frame ? relay_tap(k ? net->veth_host[i] : net->veth_ns[i]) : -ENOMEM;
		if (rc >= 0) {
			r->dir[k].from = rc;
			rc = 0;
		}
	}
	if (rc == 0) {
		r->dir[0].to = r->dir[1].from;
		r->dir[1].to = r->dir[0].from;
		rc = netns_link_up(net, i); /* the pair's names, address, MAC */
	}
	if (rc == 0)
		rc = -pthread_create(&r->thread, NULL, relay_main, r);
	if (rc < 0) {
		relay_free(r);
		return rc;
	}
	relays[i] = r;
	return 0;
}

int rv_test_netns_delay(struct rv_test_netns *net, int i, int ms)
{
	if (i < 0 || i >= net->n)
		return -EINVAL;
	char delay[16];
	snprintf(delay, sizeof(delay), "%dms", ms);
	const char *ns = net->ns[i], *vh = net->veth_host[i], *vn = net->veth_ns[i];
	if (ms <= 0) {
		if (relays[i]) {
			atomic_store(&relays[i]->stop, true);
			pthread_join(relays[i]->thread, NULL);
			relays[i] = relay_free(relays[i]);
			return 0;
		}
		int r1 = RV_TEST_CMD_QUIET("tc", "qdisc", "del", "dev", vh, "root");
		int r2 = RV_TEST_CMD_QUIET("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev",
					   vn, "root");
		return r1 < 0 ? r1 : r2;
	}
	if (relays[i]) {
		atomic_store(&relays[i]->delay_us, (long long)ms * 1000);
		return 0;
	}
	if (RV_TEST_CMD_QUIET("tc", "qdisc", "replace", "dev", vh, "root", "netem", "delay",
			      delay) < 0)
		return relay_start(net, i, ms); /* no sch_netem in this kernel */
	return RV_TEST_CMD("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", vn, "root",
			   "netem", "delay", delay);
}

int rv_test_netns_link(const struct rv_test_netns *net, int i, bool up)
{
	return RV_TEST_CMD("ip", "link", "set", net->veth_host[i], up ? "up" : "down");
}

int rv_test_netns_qdisc(const struct rv_test_netns *net, int i, bool inside,
			const char *const *words)
{
	const char *argv[40] = { "ip", "netns", "exec", net->ns[i] };
	int n = inside ? 4 : 0;
	const char *tc[] = { "tc",
			     "qdisc",
			     words ? "replace" : "del",
			     "dev",
			     inside ? net->veth_ns[i] : net->veth_host[i],
			     "root" };
	for (size_t k = 0; k < sizeof(tc) / sizeof(tc[0]); k++)
		argv[n++] = tc[k];
	for (; words && *words && n < 39; words++)
		argv[n++] = *words;
	argv[n] = NULL;
	return rv_test_cmd(argv, true);
}
