/*
 * volume.c: PersistentVolumeClaims in the stand-in.  A claim is Bound at
 * once (a provisioner that never fails) to a host folder of its own,
 * DIR/volumes/<claim uid>, which outlives every pod that mounts it and goes
 * with the claim (reclaim policy Delete).  A pod's processes run on this
 * host without a mount namespace, so a volumeMount of a claim is played by
 * rewriting paths: every env value and argument that starts with the
 * mountPath gets the claim's folder instead.  A program that builds the
 * path itself (a constant in its code) would not see the volume: what only
 * a real kubelet does.  Called with s->mu held.
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "standin.h"

static const char *volume_str(const cJSON *j, const char *a, const char *b)
{
	const cJSON *o = cJSON_GetObjectItem(j, a);
	return cJSON_GetStringValue(b ? cJSON_GetObjectItem(o, b) : o);
}

static void volume_dir(const struct standin *s, const struct obj *pvc, char *out, size_t size)
{
	char abs[PATH_MAX];
	const char *d = realpath(s->o.dir, abs) ? abs : s->o.dir;
	snprintf(out, size, "%s/volumes/%s", d, pvc->uid);
}

void volume_claim_defaults(cJSON *pvc)
{
	cJSON *spec = cJSON_GetObjectItem(pvc, "spec");
	if (!cJSON_IsObject(spec))
		spec = cJSON_AddObjectToObject(pvc, "spec");
	if (!cJSON_GetObjectItem(spec, "volumeMode"))
		cJSON_AddStringToObject(spec, "volumeMode", "Filesystem");
	const char *size =
		volume_str(cJSON_GetObjectItem(spec, "resources"), "requests", "storage");
	cJSON *st = cJSON_CreateObject();
	cJSON_AddStringToObject(st, "phase", "Bound");
	cJSON *am = cJSON_GetObjectItem(spec, "accessModes");
	cJSON_AddItemToObject(st, "accessModes",
			      am ? cJSON_Duplicate(am, true) : cJSON_CreateArray());
	cJSON_AddStringToObject(cJSON_AddObjectToObject(st, "capacity"), "storage",
				size ? size : "1Gi");
	cJSON_DeleteItemFromObjectCaseSensitive(pvc, "status");
	cJSON_AddItemToObject(pvc, "status", st);
}

void volume_claim_bound(struct standin *s, struct obj *pvc)
{
	char dir[PATH_MAX + 100], parent[PATH_MAX + 100];
	volume_dir(s, pvc, dir, sizeof(dir));
	snprintf(parent, sizeof(parent), "%s/volumes", s->o.dir);
	mkdir(s->o.dir, 0755);
	mkdir(parent, 0755);
	mkdir(dir, 0777);
}

static int volume_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

void volume_claim_release(struct standin *s, const struct obj *pvc)
{
	char dir[PATH_MAX + 100];
	volume_dir(s, pvc, dir, sizeof(dir));
	nftw(dir, volume_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* The claim a pod volume names, NULL: none or missing. */
static struct obj *volume_claim_of(struct standin *s, const struct obj *pod, const char *vol,
				   const char **claim)
{
	const cJSON *v;
	cJSON_ArrayForEach(v, cJSON_GetObjectItem(cJSON_GetObjectItem(pod->j, "spec"), "volumes"))
	{
		const char *n = volume_str(v, "name", NULL);
		const char *c = volume_str(v, "persistentVolumeClaim", "claimName");
		if (n && c && (!vol || strcmp(n, vol) == 0)) {
			*claim = c;
			return store_find(s, KIND_PVC, pod->ns, c);
		}
	}
	*claim = NULL;
	return NULL;
}

int volume_missing_claim(struct standin *s, const struct obj *pod, char *why, size_t wsize)
{
	const cJSON *v;
	cJSON_ArrayForEach(v, cJSON_GetObjectItem(cJSON_GetObjectItem(pod->j, "spec"), "volumes"))
	{
		const char *c = volume_str(v, "persistentVolumeClaim", "claimName");
		if (c && !store_find(s, KIND_PVC, pod->ns, c)) {
			snprintf(why, wsize, "persistentvolumeclaim \"%s\" not found", c);
			return -ENOENT;
		}
	}
	return 0;
}

/* in with a leading from replaced by to; NULL when in does not start so. */
static char *volume_swap(const char *in, const char *from, const char *to)
{
	size_t fl = strlen(from);
	if (strncmp(in, from, fl) != 0 || (in[fl] && in[fl] != '/'))
		return NULL;
	char *out;
	return asprintf(&out, "%s%s", to, in + fl) < 0 ? NULL : out;
}

void volume_map(struct standin *s, const struct obj *pod, const cJSON *container, char **env,
		char **argv)
{
	const cJSON *m;
	cJSON_ArrayForEach(m, cJSON_GetObjectItem(container, "volumeMounts"))
	{
		const char *path = volume_str(m, "mountPath", NULL), *claim;
		struct obj *pvc = volume_claim_of(s, pod, volume_str(m, "name", NULL), &claim);
		if (!path || !pvc)
			continue;
		char dir[PATH_MAX + 100];
		volume_dir(s, pvc, dir, sizeof(dir));
		for (int i = 0; argv[i]; i++) {
			char *x = volume_swap(argv[i], path, dir);
			if (x) {
				free(argv[i]);
				argv[i] = x;
			}
		}
		for (int i = 0; env[i]; i++) {
			char *eq = strchr(env[i], '='), *x;
			if (!eq || !(x = volume_swap(eq + 1, path, dir)))
				continue;
			char *kv;
			if (asprintf(&kv, "%.*s=%s", (int)(eq - env[i]), env[i], x) >= 0) {
				free(env[i]);
				env[i] = kv;
			}
			free(x);
		}
	}
}
