/*
 * k8sfix.c: start the Kubernetes stand-in, write kubeconfigs for it.
 */
#include "k8sfix.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "buf.h"
#include "parse.h"

#define STANDIN_START_MS 10000

static int standin_port(const char *port_file)
{
	for (int waited = 0; waited < STANDIN_START_MS; waited += 50) {
		char *p = rv_test_read_file(port_file);
		int64_t port = 0;
		if (p)
			p[strcspn(p, "\n")] = 0; /* the file ends with a newline */
		bool ok = p && rv_parse_i64(p, 1, 65535, &port) == 0;
		free(p);
		if (ok)
			return (int)port;
		usleep(50 * 1000);
	}
	return -ETIMEDOUT;
}

int rv_test_standin_spawn(struct rv_proc *p, const char *dir, const char *const *extra)
{
	const char *bin = getenv("ROVER_BIN_DIR") ? getenv("ROVER_BIN_DIR") : "build/bin";
	char exe[1024], port_file[512], pods[512], log[512];
	snprintf(exe, sizeof(exe), "%s/../tests/k8s/k8s-standin", bin);
	snprintf(port_file, sizeof(port_file), "%s/port", dir);
	snprintf(pods, sizeof(pods), "%s/pods", dir);
	snprintf(log, sizeof(log), "%s/standin.log", dir);
	unlink(port_file);
	const char *argv[32] = { exe, "--port-file", port_file, "--dir", pods };
	int n = 5;
	for (int i = 0; extra && extra[i] && n < 31; i++)
		argv[n++] = extra[i];
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	struct rv_proc_opts o = { .argv = argv, .pdeathsig = SIGKILL };
	o.io[1] = (struct rv_proc_io){ RV_PROC_FD, fd };
	o.io[2] = (struct rv_proc_io){ RV_PROC_FD, fd };
	int rc = rv_proc_spawn(p, &o);
	close(fd);
	if (rc < 0)
		return rc;
	int port = standin_port(port_file);
	if (port < 0) {
		fprintf(stderr, "k8sfix: the stand-in did not start (see %s)\n", log);
		rv_proc_kill(p, SIGKILL);
		rv_proc_wait(p, -1, NULL);
		rv_proc_release(p);
	}
	return port;
}

void rv_test_standin_stop(struct rv_proc *p, const char *dir)
{
	if (p->pid > 0) {
		rv_proc_kill(p, SIGTERM);
		if (rv_proc_wait(p, 10000, NULL) == -ETIMEDOUT) {
			rv_proc_kill(p, SIGKILL);
			rv_proc_wait(p, -1, NULL);
		}
		rv_proc_release(p);
	}
	if (dir[0]) {
		const char *argv[] = { "rm", "-rf", dir, NULL };
		struct rv_proc_opts o = { .argv = argv };
		rv_proc_run(&o, 20000, NULL, NULL);
	}
}

int rv_test_kubeconfig_write(const char *path, const char *url, const char *ns, const char *token)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f,
		"apiVersion: v1\nkind: Config\ncurrent-context: standin\n"
		"clusters:\n- name: standin\n  cluster:\n    server: \"%s\"\n"
		"contexts:\n- name: standin\n  context:\n    cluster: standin\n    user: tester\n",
		url);
	if (ns)
		fprintf(f, "    namespace: %s\n", ns);
	fprintf(f, "users:\n- name: tester\n  user:%s%s\n", token ? "\n    token: " : " {}",
		token ? token : "");
	return fclose(f) == 0 ? 0 : -EIO;
}

int rv_test_kubectl(const char *kubeconfig, char **out, const char *const *args)
{
	const char *argv[32] = { "kubectl", "--kubeconfig", kubeconfig, "--request-timeout",
				 "20s" };
	int n = 5;
	for (int i = 0; args[i] && n < 31; i++)
		argv[n++] = args[i];
	struct rv_buf b;
	rv_buf_init(&b);
	struct rv_proc_opts o = { .argv = argv };
	int st = -1;
	int rc = rv_proc_run(&o, 30000, &st, &b);
	if (out)
		*out = strdup(b.data ? b.data : "");
	rv_buf_release(&b);
	return rc < 0 ? rc : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool rv_test_no_kubectl(void)
{
	const char *argv[] = { "sh", "-c", "command -v kubectl >/dev/null", NULL };
	struct rv_proc_opts o = { .argv = argv };
	int st = -1;
	return rv_proc_run(&o, 10000, &st, NULL) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}
