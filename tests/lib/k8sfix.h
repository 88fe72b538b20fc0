/*
 * k8sfix.h: the Kubernetes stand-in (tests/k8s, k8s-standin) for
 * integration tests, and kubeconfigs that point at it.
 *
 * rv_test_standin_spawn() starts the stand-in found beside ROVER_BIN_DIR
 * (default build/bin) with "--port-file DIR/port --dir DIR/pods" and the
 * extra arguments, its output appended to DIR/standin.log, killed when the
 * test process dies, and waits up to 10 s for the port it listens on;
 * rv_test_standin_stop() stops it and removes DIR.
 * rv_test_kubeconfig_write() writes a kubeconfig for an API server;
 * rv_test_kubectl() runs kubectl with one.  A test that needs kubectl
 * starts with RV_TEST_NEED_KUBECTL(): without it the test is a skip (a
 * failure under CI=true: install-deps.sh installs it).
 */
#ifndef RV_K8SFIX_H
#define RV_K8SFIX_H

#include <stdbool.h>

#include "proc.h"

/* dir: an existing folder of the test's; extra: NULL-terminated or NULL.
 * The port, or a negative errno (the stand-in then stopped). */
int rv_test_standin_spawn(struct rv_proc *p, const char *dir, const char *const *extra);
/* SIGTERM to the stand-in p (SIGKILL after 10 s) and its reaping, when it
 * runs; then dir removed, when not empty.  p is released. */
void rv_test_standin_stop(struct rv_proc *p, const char *dir);

/* A kubeconfig at path for the server at url (http://HOST:PORT), whose
 * context names namespace ns and whose user sends bearer token (either
 * may be NULL).  0 or a negative errno. */
int rv_test_kubeconfig_write(const char *path, const char *url, const char *ns, const char *token);

/* kubectl --kubeconfig kubeconfig ARGS (20 s per request, 30 s in all): its
 * exit status or a negative errno; its stdout and stderr in *out
 * (malloc'd) when out is not NULL. */
int rv_test_kubectl(const char *kubeconfig, char **out, const char *const *args);

/* Whether no kubectl is on PATH. */
bool rv_test_no_kubectl(void);

#define RV_TEST_NEED_KUBECTL()                                                                     \
	do {                                                                                       \
		if (rv_test_no_kubectl()) {                                                        \
			RV_TEST_SKIP(true, "kubectl is not installed");                            \
			return;                                                                    \
		}                                                                                  \
	} while (0)

#endif
