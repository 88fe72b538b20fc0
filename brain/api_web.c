/*
 * api_web.c: the status page rover-brain serves at / and the JSON it reads.
 *
 * The page is static files (brain/web/: index.html, app.js, app.css and the
 * vendored plotting library in vendor/, see scripts/vendor-web.sh) read once
 * at start from [server] web_dir, found next to the binary like sql/ when
 * empty, and served from memory: no build step, no file access per request,
 * nothing a request names outside the files read.  Vendor files carry their
 * version in their name and are cached as immutable; the page's own files
 * are revalidated (no-cache).
 *
 * The JSON: a job's speed and node usage over time with its plans
 * (/v1/jobs/{uid}/series), the cluster's use over time (/v1/cluster/usage)
 * and the dashboard views (/v1/dashboards/{view}).  Handlers run on
 * libmicrohttpd's connection threads; b->web is read-only after start.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brain.h"
#include "cleanup.h"
#include "log.h"
#include "proc.h"

#define WEB_MAX_FILES      32
#define WEB_MAX_FILE_BYTES (4 << 20)

struct api_web_file {
	char name[96]; /* "index.html", "vendor/uPlot-1.6.32.iife.min.js" */
	char *data;    /* NUL-terminated (the server sends text up to the NUL) */
	size_t len;
	const char *type;
	bool immutable; /* under vendor/: the name changes with the content */
};

static const char *content_type(const char *name)
{
	static const struct {
		const char *ext, *type;
	} types[] = {
		{ ".html", "text/html; charset=utf-8" },
		{ ".js", "text/javascript; charset=utf-8" },
		{ ".css", "text/css; charset=utf-8" },
		{ ".json", "application/json" },
		{ ".svg", "image/svg+xml" },
	};
	size_t n = strlen(name);
	for (size_t i = 0; i < RV_ARRAY_SIZE(types); i++) {
		size_t e = strlen(types[i].ext);
		if (n > e && strcmp(name + n - e, types[i].ext) == 0)
			return types[i].type;
	}
	return "text/plain; charset=utf-8"; /* LICENSE, VERSIONS */
}

/* A name a URL segment may carry: no slash, no leading dot, plain characters. */
static bool web_name_ok(const char *name)
{
	if (!name[0] || name[0] == '.' || strlen(name) > 64)
		return false;
	for (const char *c = name; *c; c++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
			    *c))
			return false;
	return true;
}

/* Read every plain file of dir/sub ("" or "vendor") into b->web. */
static int load_folder(struct brain *b, const char *dir, const char *sub, struct rv_err *err)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(d))) {
		if (!web_name_ok(de->d_name))
			continue;
		char file[1200];
		if (snprintf(file, sizeof(file), "%s/%s", path, de->d_name) >= (int)sizeof(file))
			continue;
		int fd = open(file, O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		if (b->nweb == WEB_MAX_FILES || st.st_size > WEB_MAX_FILE_BYTES) {
			close(fd);
			rc = rv_err_set(err, -EFBIG, "web_dir",
					"%s: more than %d files or one over %d bytes", path,
					WEB_MAX_FILES, WEB_MAX_FILE_BYTES);
			break;
		}
		struct api_web_file *f = &b->web[b->nweb];
		f->data = malloc((size_t)st.st_size + 1);
		ssize_t got = 0;
		while (f->data && got < st.st_size) {
			ssize_t r = read(fd, f->data + got, (size_t)(st.st_size - got));
			if (r <= 0)
				break;
			got += r;
		}
		close(fd);
		if (!f->data) {
			rc = rv_err_set(err, -ENOMEM, "", "out of memory");
			break;
		}
		if (got != st.st_size) {
			free(f->data);
			f->data = NULL;
			rc = rv_err_set(err, -EIO, "web_dir", "could not read %s", file);
			break;
		}
		f->data[got] = 0;
		f->len = (size_t)got;
		/* web_name_ok: d_name is at most 64 bytes, sub is "" or "vendor" */
		if (snprintf(f->name, sizeof(f->name), "%s%s%s", sub, sub[0] ? "/" : "",
			     de->d_name) >= (int)sizeof(f->name)) {
			free(f->data);
			f->data = NULL;
			continue;
		}
		f->type = content_type(de->d_name);
		f->immutable = sub[0] != 0;
		b->nweb++;
	}
	closedir(d);
	return rc;
}

int api_web_load(struct brain *b, struct rv_err *err)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s", b->cfg.web_dir);
	if (!dir[0]) {
		static const char *const rel[] = { "../../brain/web/index.html",
						   "../../../brain/web/index.html",
						   "../share/rover/web/index.html", NULL };
		char index[512];
		if (rv_proc_exe_relative(index, sizeof(index), rel, R_OK) == 0) {
			char *slash = strrchr(index, '/');
			*slash = 0;
			snprintf(dir, sizeof(dir), "%s", index);
		}
	}
	b->web = calloc(WEB_MAX_FILES, sizeof(*b->web));
	if (!b->web)
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	int rc = dir[0] ? load_folder(b, dir, "", err) : 0;
	if (rc == 0 && dir[0])
		rc = load_folder(b, dir, "vendor", err);
	if (rc < 0) {
		api_web_free(b);
		return rc;
	}
	bool have_index = false;
	for (int i = 0; i < b->nweb; i++)
		have_index |= strcmp(b->web[i].name, "index.html") == 0;
	if (!have_index)
		rv_log_warn("no status page", "web_dir=%s hint=\"set --web-dir to brain/web\"",
			    dir[0] ? dir : "(not found)");
	else
		rv_log_info("status page loaded", "web_dir=%s files=%d", dir, b->nweb);
	return 0;
}

void api_web_free(struct brain *b)
{
	for (int i = 0; b->web && i < b->nweb; i++)
		free(b->web[i].data);
	free(b->web);
	b->web = NULL;
	b->nweb = 0;
}

static int serve(struct brain *b, struct rv_http_resp *resp, const char *name)
{
	for (int i = 0; i < b->nweb; i++) {
		const struct api_web_file *f = &b->web[i];
		if (strcmp(f->name, name) != 0)
			continue;
		resp->body = strdup(f->data);
		if (!resp->body)
			return -ENOMEM;
		resp->status = 200;
		resp->content_type = f->type;
		resp->cache_control = f->immutable ? "public, max-age=31536000, immutable"
						   : "no-cache";
		return 0;
	}
	rv_http_resp_error_text(resp, 404, "not_found",
				b->nweb ? "no such file of the status page"
					: "the status page's files were not found (--web-dir)",
				"");
	return 0;
}

int api_web_page(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	return serve(ctx, resp, "index.html");
}

int api_web_asset(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	if (!web_name_ok(req->params[0]))
		return serve(ctx, resp, "");
	return serve(ctx, resp, req->params[0]);
}

int api_web_vendor(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	char name[96];
	if (!web_name_ok(req->params[0]))
		return serve(ctx, resp, "");
	snprintf(name, sizeof(name), "vendor/%s", req->params[0]);
	return serve(ctx, resp, name);
}

/* ---- JSON for the page (and anyone else) ---- */

int api_job_series(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	return api_job_listing(ctx, req, resp, "max_points", 2, 20000, 2000, store_job_series_json);
}

int api_cluster_usage(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	int64_t window_s = 3600, bucket_s = 60;
	if (api_query_int(req, resp, "window_s", 60, 90 * 86400, &window_s) < 0 ||
	    api_query_int(req, resp, "bucket_s", 1, 86400, &bucket_s) < 0)
		return 0;
	if (window_s / bucket_s > 10000) {
		rv_http_resp_error_text(resp, 400, "invalid_argument",
					"window_s / bucket_s must be at most 10000 buckets",
					"bucket_s");
		return 0;
	}
	PGconn *c = api_db(b, resp);
	if (!c)
		return 0;
	cJSON *doc = NULL;
	int rc = store_cluster_usage_json(c, window_s, bucket_s, &doc, &err);
	rv_db_release(b->db, c);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	return rv_rest_reply(resp, 200, doc);
}

int api_dashboard(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct brain *b = ctx;
	struct rv_err err = { 0 };
	int64_t limit = 100;
	if (api_query_int(req, resp, "limit", 1, 1000, &limit) < 0)
		return 0;
	PGconn *c = api_db(b, resp);
	if (!c)
		return 0;
	cJSON *rows = NULL;
	int rc = store_dashboard_json(c, req->params[0], (int)limit, &rows, &err);
	rv_db_release(b->db, c);
	if (rc < 0)
		return api_fail(b, resp, rc, &err);
	cJSON *doc = cJSON_CreateObject();
	if (!doc) {
		cJSON_Delete(rows);
		return -ENOMEM;
	}
	cJSON_AddStringToObject(doc, "view", req->params[0]);
	cJSON_AddItemToObject(doc, "rows", rows);
	return rv_rest_reply(resp, 200, doc);
}
