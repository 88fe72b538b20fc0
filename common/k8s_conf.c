/*
 * k8s_conf.c: the API server's address and credentials from a kubeconfig
 * (read with libyaml's document loader) or from inside a pod (k8s_conf.h).
 */
#include "k8s_conf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "cleanup.h"

#define FILE_MAX (4 << 20)

/* A whole small file, NUL-terminated, malloc'd; NULL with errno set. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = malloc(FILE_MAX + 1);
	size_t n = buf ? fread(buf, 1, FILE_MAX + 1, f) : 0;
	fclose(f);
	if (!buf || n > FILE_MAX) {
		free(buf);
		errno = buf ? EFBIG : ENOMEM;
		return NULL;
	}
	buf[n] = 0;
	if (len)
		*len = n;
	return buf;
}

char *rv_k8s_base64(const char *in, size_t *out_len)
{
	size_t n = strlen(in);
	unsigned char *out = malloc(n / 4 * 3 + 4);
	if (!out)
		return NULL;
	uint32_t acc = 0;
	int bits = 0;
	size_t k = 0;
	for (const char *p = in; *p && *p != '='; p++) {
		const char *set =
			"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
		if (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
			continue;
		const char *c = strchr(set, *p);
		if (!c) {
			free(out);
			return NULL;
		}
		acc = acc << 6 | (uint32_t)(c - set);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[k++] = (unsigned char)(acc >> bits);
		}
	}
	out[k] = 0;
	*out_len = k;
	return (char *)out;
}

/* ---- the YAML document: mappings looked up by key ---- */

static yaml_node_t *get(yaml_document_t *d, yaml_node_t *map, const char *key)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(d, p->key);
		if (k && k->type == YAML_SCALAR_NODE && !strcmp((char *)k->data.scalar.value, key))
			return yaml_document_get_node(d, p->value);
	}
	return NULL;
}

static const char *str(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The entry of list (clusters, users, contexts) whose name is name: its
 * inner object (entry.<inner>). */
static yaml_node_t *named(yaml_document_t *d, yaml_node_t *root, const char *list, const char *name,
			  const char *inner)
{
	yaml_node_t *seq = get(d, root, list);
	if (!seq || seq->type != YAML_SEQUENCE_NODE || !name)
		return NULL;
	for (yaml_node_item_t *i = seq->data.sequence.items.start; i < seq->data.sequence.items.top;
	     i++) {
		yaml_node_t *e = yaml_document_get_node(d, *i);
		const char *n = str(get(d, e, "name"));
		if (n && !strcmp(n, name))
			return get(d, e, inner);
	}
	return NULL;
}

/* A path in a kubeconfig is relative to the file's folder. */
static void path_from(char *out, size_t size, const char *file, const char *p)
{
	const char *slash = strrchr(file, '/');
	if (p[0] == '/' || !slash)
		snprintf(out, size, "%s", p);
	else
		snprintf(out, size, "%.*s/%s", (int)(slash - file), file, p);
}

static int data_field(const char *v, char **out, size_t *len, const char *what, const char *file,
		      struct rv_err *err)
{
	if (!v)
		return 0;
	*out = rv_k8s_base64(v, len);
	return *out ? 0
		    : rv_err_set(err, -EINVAL, "k8s.kubeconfig", "%s: %s is not base64", file,
				 what);
}

static int from_doc(yaml_document_t *d, const char *file, struct rv_k8s_conf *c, struct rv_err *err)
{
	yaml_node_t *root = yaml_document_get_root_node(d);
	const char *ctx_name = str(get(d, root, "current-context"));
	yaml_node_t *ctx = named(d, root, "contexts", ctx_name, "context");
	if (!ctx)
		return rv_err_set(err, -EINVAL, "k8s.kubeconfig", "%s: no current context", file);
	yaml_node_t *cl = named(d, root, "clusters", str(get(d, ctx, "cluster")), "cluster");
	yaml_node_t *us = named(d, root, "users", str(get(d, ctx, "user")), "user");
	const char *server = str(get(d, cl, "server"));
	if (!server)
		return rv_err_set(err, -EINVAL, "k8s.kubeconfig",
				  "%s: the current context's cluster has no server", file);
	snprintf(c->server, sizeof(c->server), "%s", server);
	const char *v;
	if ((v = str(get(d, ctx, "namespace"))))
		snprintf(c->namespace_, sizeof(c->namespace_), "%s", v);
	if ((v = str(get(d, cl, "certificate-authority"))))
		path_from(c->ca_file, sizeof(c->ca_file), file, v);
	v = str(get(d, cl, "insecure-skip-tls-verify"));
	c->insecure = v && !strcmp(v, "true");
	if ((v = str(get(d, us, "token"))))
		snprintf(c->token, sizeof(c->token), "%s", v);
	if ((v = str(get(d, us, "tokenFile"))))
		path_from(c->token_file, sizeof(c->token_file), file, v);
	if ((v = str(get(d, us, "client-certificate"))))
		path_from(c->cert_file, sizeof(c->cert_file), file, v);
	if ((v = str(get(d, us, "client-key"))))
		path_from(c->key_file, sizeof(c->key_file), file, v);
	int rc = data_field(str(get(d, cl, "certificate-authority-data")), &c->ca_pem, &c->ca_len,
			    "certificate-authority-data", file, err);
	if (rc == 0)
		rc = data_field(str(get(d, us, "client-certificate-data")), &c->cert_pem,
				&c->cert_len, "client-certificate-data", file, err);
	if (rc == 0)
		rc = data_field(str(get(d, us, "client-key-data")), &c->key_pem, &c->key_len,
				"client-key-data", file, err);
	if (rc == 0 && c->token_file[0] && rv_k8s_conf_token_reload(c) < 0)
		rc = rv_err_set(err, -errno ? -errno : -EIO, "k8s.kubeconfig",
				"%s: could not read tokenFile %s", file, c->token_file);
	return rc;
}

static int kubeconfig(const char *file, struct rv_k8s_conf *c, struct rv_err *err)
{
	size_t len = 0;
	RV_CLEANUP_FREE char *text = slurp(file, &len);
	if (!text)
		return rv_err_set(err, -errno, "k8s.kubeconfig", "could not read %s: %s", file,
				  strerror(errno));
	yaml_parser_t p;
	yaml_document_t d;
	if (!yaml_parser_initialize(&p))
		return rv_err_set(err, -ENOMEM, "k8s.kubeconfig", "out of memory");
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	int rc;
	if (!yaml_parser_load(&p, &d)) {
		rc = rv_err_set(err, -EINVAL, "k8s.kubeconfig", "%s: line %zu: %s", file,
				p.problem_mark.line + 1, p.problem ? p.problem : "bad YAML");
	} else {
		rc = from_doc(&d, file, c, err);
		yaml_document_delete(&d);
	}
	yaml_parser_delete(&p);
	return rc;
}

static int in_cluster(const char *host, struct rv_k8s_conf *c, struct rv_err *err)
{
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	bool v6 = strchr(host, ':') != NULL;
	snprintf(c->server, sizeof(c->server), "https://%s%s%s:%s", v6 ? "[" : "", host,
		 v6 ? "]" : "", port && port[0] ? port : "443");
	snprintf(c->token_file, sizeof(c->token_file), "%s/token", RV_K8S_SA_DIR);
	snprintf(c->ca_file, sizeof(c->ca_file), "%s/ca.crt", RV_K8S_SA_DIR);
	if (rv_k8s_conf_token_reload(c) < 0)
		return rv_err_set(err, -errno ? -errno : -EIO, "k8s.kubeconfig",
				  "in a cluster but could not read %s", c->token_file);
	RV_CLEANUP_FREE char *ns = slurp(RV_K8S_SA_DIR "/namespace", NULL);
	if (ns)
		snprintf(c->namespace_, sizeof(c->namespace_), "%.*s", (int)strcspn(ns, "\r\n"),
			 ns);
	return 0;
}

int rv_k8s_conf_load(const char *path, struct rv_k8s_conf *c, struct rv_err *err)
{
	memset(c, 0, sizeof(*c));
	int rc;
	char home[PATH_MAX];
	const char *env = getenv("KUBECONFIG"), *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *h = getenv("HOME");
	snprintf(home, sizeof(home), "%s/.kube/config", h ? h : "");
	if (path && path[0])
		rc = kubeconfig(path, c, err);
	else if (env && env[0])
		rc = kubeconfig(env, c, err);
	else if (host && host[0])
		rc = in_cluster(host, c, err);
	else
		rc = kubeconfig(home, c, err);
	size_t n = strlen(c->server);
	while (n > 0 && c->server[n - 1] == '/')
		c->server[--n] = 0;
	if (rc == 0 && strncmp(c->server, "http://", 7) != 0 &&
	    strncmp(c->server, "https://", 8) != 0)
		rc = rv_err_set(err, -EINVAL, "k8s.kubeconfig",
				"server \"%.200s\" must be an http:// or https:// url", c->server);
	if (rc < 0)
		rv_k8s_conf_release(c);
	return rc;
}

int rv_k8s_conf_token_reload(struct rv_k8s_conf *c)
{
	if (!c->token_file[0])
		return 0;
	RV_CLEANUP_FREE char *t = slurp(c->token_file, NULL);
	if (!t)
		return -errno;
	snprintf(c->token, sizeof(c->token), "%.*s", (int)strcspn(t, "\r\n"), t);
	return 0;
}

void rv_k8s_conf_release(struct rv_k8s_conf *c)
{
	if (!c)
		return;
	free(c->ca_pem);
	free(c->cert_pem);
	free(c->key_pem);
	memset(c, 0, sizeof(*c));
}
