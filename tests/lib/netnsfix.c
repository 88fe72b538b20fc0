/*
 * netnsfix.c: commands for network namespace tests (netnsfix.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
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

/* Namespace i behind its veth pair on the bridge, its address in the /24
 * whose .1 the bridge has. */
static int netns_host_up(struct rv_test_netns *net, const char *prefix, int i, int a, int b)
{
	int pid = (int)getpid();
	char cidr[40];
	snprintf(net->addr[i], sizeof(net->addr[i]), "10.%d.%d.%d", a, b, 2 + i);
	snprintf(cidr, sizeof(cidr), "%s/24", net->addr[i]);
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
	if (RV_TEST_CMD("ip", "link", "set", vn, "netns", ns) < 0 ||
	    RV_TEST_CMD("ip", "link", "set", vh, "master", net->bridge) < 0 ||
	    RV_TEST_CMD("ip", "link", "set", vh, "up") < 0 ||
	    RV_TEST_CMD("ip", "netns", "exec", ns, "ip", "addr", "add", cidr, "dev", vn) < 0 ||
	    RV_TEST_CMD("ip", "netns", "exec", ns, "ip", "link", "set", vn, "up") < 0 ||
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

int rv_test_netns_delay(struct rv_test_netns *net, int i, int ms)
{
	if (i < 0 || i >= net->n)
		return -EINVAL;
	char delay[16];
	snprintf(delay, sizeof(delay), "%dms", ms);
	const char *ns = net->ns[i], *vh = net->veth_host[i], *vn = net->veth_ns[i];
	if (ms <= 0) {
		int r1 = RV_TEST_CMD_QUIET("tc", "qdisc", "del", "dev", vh, "root");
		int r2 = RV_TEST_CMD_QUIET("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev",
					   vn, "root");
		return r1 < 0 ? r1 : r2;
	}
	int rc = RV_TEST_CMD("tc", "qdisc", "replace", "dev", vh, "root", "netem", "delay", delay);
	if (rc == 0)
		rc = RV_TEST_CMD("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", vn,
				 "root", "netem", "delay", delay);
	return rc;
}
