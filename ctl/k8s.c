/*
 * k8s.c: `roverctl submit --kubeconfig FILE`: the spec (already checked)
 * created as an ElasticJob in the cluster, for rover-operator to run,
 * through common/k8s_client.h.  The namespace: --namespace, else the
 * spec's metadata.namespace, else the kubeconfig context's, else default.
 */
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "ctl.h"
#include "json.h"
#include "k8s_client.h"

static const char *k8s_str(const cJSON *o, const char *a, const char *b)
{
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(o, a), b));
	return v && *v ? v : NULL;
}

int k8s_submit(struct ctl *c, cJSON *doc, const char *kubeconfig, const char *ns)
{
	struct rv_k8s_conf conf;
	struct rv_err err = { 0 };
	if (rv_k8s_conf_load(kubeconfig, &conf, &err) < 0) {
		fprintf(stderr, "roverctl submit: %s\n", err.msg);
		return CTL_USAGE;
	}
	if (!ns)
		ns = k8s_str(doc, "metadata", "namespace");
	char nsbuf[64];
	snprintf(nsbuf, sizeof(nsbuf), "%s",
		 ns                   ? ns
		 : conf.namespace_[0] ? conf.namespace_
				      : "default");
	cJSON *md = cJSON_GetObjectItem(doc, "metadata");
	cJSON_DeleteItemFromObjectCaseSensitive(md, "namespace");
	cJSON_AddStringToObject(md, "namespace", nsbuf);
	/* DLRover's group is read by the master as ours: the resource is ours */
	cJSON_DeleteItemFromObjectCaseSensitive(doc, "apiVersion");
	cJSON_AddStringToObject(doc, "apiVersion", "elastic.rover.dev/v1alpha1");
	RV_CLEANUP_FREE char *body = cJSON_PrintUnformatted(doc);
	char path[200];
	snprintf(path, sizeof(path), "/apis/elastic.rover.dev/v1alpha1/namespaces/%s/elasticjobs",
		 nsbuf);
	struct rv_buf out;
	rv_buf_init(&out);
	long code = 0;
	int rc = rv_k8s_call(&conf, NULL, "POST", path, body, NULL, c->timeout_ms, &code, &out,
			     &err);
	char msg[300];
	if (rc < 0) {
		fprintf(stderr, "roverctl submit: %s\n", err.msg);
		rc = CTL_UNREACHABLE;
	} else if (code == 201 || code == 200) {
		fprintf(c->out, "created elasticjob %s in namespace %s\n",
			k8s_str(doc, "metadata", "name"), nsbuf);
		rc = CTL_OK;
	} else {
		rv_k8s_status_message(out.data, code, msg, sizeof(msg));
		fprintf(stderr, "roverctl submit: the API server refused the ElasticJob: %s\n",
			msg);
		rc = ctl_exit_code(code);
	}
	rv_buf_release(&out);
	rv_k8s_conf_release(&conf);
	return rc;
}
