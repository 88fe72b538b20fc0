/*
 * k8s_conf.h: where the Kubernetes API server is and how to prove who we
 * are, for whoever talks to it (k8s_client.h): a kubeconfig file (its
 * current context: server, certificate-authority(-data),
 * insecure-skip-tls-verify, token, tokenFile, client-certificate(-data),
 * client-key(-data), namespace), or
 * in-cluster (KUBERNETES_SERVICE_HOST/PORT, the service account's token,
 * CA and namespace under /var/run/secrets/kubernetes.io/serviceaccount).
 * A plain http:// server (the tests' stand-in) is allowed.  Read once at
 * start; a token that the cluster rotates is read again by
 * rv_k8s_conf_token_reload.  Not thread-safe: one owner.
 */
#ifndef RV_K8S_CONF_H
#define RV_K8S_CONF_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#define RV_K8S_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct rv_k8s_conf {
	char server[512];    /* "https://10.0.0.1:443", no trailing slash */
	char namespace_[64]; /* the context's (or the service account's), "" none */
	char token[8192];    /* bearer token, "" none */
	char token_file[PATH_MAX];
	char ca_file[PATH_MAX];   /* "" none */
	char cert_file[PATH_MAX]; /* client certificate (PEM), "" none */
	char key_file[PATH_MAX];
	char *ca_pem, *cert_pem, *key_pem; /* the *-data fields decoded, malloc'd */
	size_t ca_len, cert_len, key_len;
	bool insecure; /* insecure-skip-tls-verify */
};

/* Load from kubeconfig (a path; NULL or "": $KUBECONFIG, else in-cluster,
 * else ~/.kube/config).  Returns 0, or a negative errno with err naming
 * the file and what is wrong.  Release with rv_k8s_conf_release. */
int rv_k8s_conf_load(const char *kubeconfig, struct rv_k8s_conf *c, struct rv_err *err);

/* Read token_file again (a projected token is rotated); 0 or -errno. */
int rv_k8s_conf_token_reload(struct rv_k8s_conf *c);

void rv_k8s_conf_release(struct rv_k8s_conf *c);

/* Standard base64 (RFC 4648, padding optional, whitespace skipped) into a
 * malloc'd buffer; NULL on a bad character or no memory. */
char *rv_k8s_base64(const char *in, size_t *out_len);

#endif
