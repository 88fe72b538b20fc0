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

static int net_host(struct rv_test_net *net, int i, int a, int b, const char *tag, int pid)
{
	char cidr[48];
	snprintf(net->addr[i], sizeof(net->addr[i]), "10.%d.%d.%d", a, b, 2 + i);
	snprintf(cidr, sizeof(cidr), "%s/24", net->addr[i]);
	snprintf(net->ns[i], sizeof(net->ns[i]), "rover-%s-%d-%d", tag, pid, i);
	if (RV_TEST_CMD("ip", "netns", "add", net->ns[i]) < 0) {
		net->ns[i][0] = '\0';
		return -EIO;
	}
	snprintf(net->veth_host[i], sizeof(net->veth_host[i]), "rv%sh%d%d", tag, i, pid % 100000);
	snprintf(net->veth_ns[i], sizeof(net->veth_ns[i]), "rv%sn%d%d", tag, i, pid % 100000);
	if (RV_TEST_CMD("ip", "link", "add", net->veth_host[i], "type", "veth", "peer", "name",
			net->veth_ns[i]) < 0) {
		net->veth_host[i][0] = '\0';
		return -EIO;
	}
	const char *ns = net->ns[i];
	if (RV_TEST_CMD("ip", "link", "set", net->veth_ns[i], "netns", ns) < 0 ||
	    RV_TEST_CMD("ip", "link", "set", net->veth_host[i], "master", net->bridge) < 0 ||
	    RV_TEST_CMD("ip", "link", "set", net->veth_host[i], "up") < 0 ||
	    RV_TEST_CMD("ip", "netns", "exec", ns, "ip", "addr", "add", cidr, "dev",
			net->veth_ns[i]) < 0 ||
	    RV_TEST_CMD("ip", "netns", "exec", ns, "ip", "link", "set", net->veth_ns[i], "up") <
		    0 ||
	    RV_TEST_CMD("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up") < 0)
		return -EIO;
	const char *w[] = { "ip", "netns", "exec", net->ns[i], NULL };
	memcpy(net->wrap[i], w, sizeof(w));
	return 0;
}

int rv_test_net_setup(struct rv_test_net *net, int n, const char *tag, char *why, size_t size)
{
	memset(net, 0, sizeof(*net));
	const char *skip = rv_test_netns_skip();
	if (skip || n < 1 || n > RV_TEST_NET_MAX) {
		snprintf(why, size, "%s", skip ? skip : "too many hosts");
		return skip ? -EPERM : -EINVAL;
	}
	int pid = (int)getpid();
	/* 10.a.b.0/24 from the pid and the tag: two suites at once differ */
	int a = 200 + (pid + tag[0]) % 50, b = (pid / 50) % 250;
	snprintf(net->bridge, sizeof(net->bridge), "rv%sb%d", tag, pid % 1000000);
	snprintf(net->addr_root, sizeof(net->addr_root), "10.%d.%d.1", a, b);
	char cidr[48];
	snprintf(cidr, sizeof(cidr), "%s/24", net->addr_root);
	if (RV_TEST_CMD("ip", "link", "add", net->bridge, "type", "bridge") < 0) {
		net->bridge[0] = '\0';
		snprintf(why, size, "could not add a bridge (no permission?)");
		return -EPERM;
	}
	if (RV_TEST_CMD("ip", "addr", "add", cidr, "dev", net->bridge) < 0 ||
	    RV_TEST_CMD("ip", "link", "set", net->bridge, "up") < 0) {
		snprintf(why, size, "could not set up the bridge");
		return -EIO;
	}
	for (int i = 0; i < n; i++) {
		net->n = i + 1;
		if (net_host(net, i, a, b, tag, pid) < 0) {
			snprintf(why, size, "could not set up namespace %d and its veth pair", i);
			return -EIO;
		}
	}
	return 0;
}

void rv_test_net_teardown(struct rv_test_net *net)
{
	for (int i = 0; i < net->n; i++) {
		if (net->veth_host[i][0])
			RV_TEST_CMD_QUIET("ip", "link", "del", net->veth_host[i]);
		if (net->ns[i][0])
			RV_TEST_CMD_QUIET("ip", "netns", "del", net->ns[i]);
	}
	if (net->bridge[0])
		RV_TEST_CMD_QUIET("ip", "link", "del", net->bridge);
	memset(net, 0, sizeof(*net));
}

int rv_test_net_link(const struct rv_test_net *net, int i, bool up)
{
	return RV_TEST_CMD("ip", "link", "set", net->veth_host[i], up ? "up" : "down");
}

int rv_test_net_qdisc(const struct rv_test_net *net, int i, bool inside, const char *const *words)
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
