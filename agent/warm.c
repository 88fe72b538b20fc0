/*
 * warm.c: the supervisor's side of the warm interpreter (see warm.h and
 * rover_warm.py, which holds the other side and the protocol).
 *
 * Messages are a native uint32 length and JSON, both ways, on one unix
 * stream socket; a spawn request carries the worker's three fds as
 * SCM_RIGHTS on its first byte.  The exchange is strictly request-reply, so
 * a timeout leaves the stream in an unknown state: the interpreter is then
 * stopped and the struct says -ENOTCONN from then on.
 */
#include "warm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "json.h"
#include "parse.h"

#define WARM_PYTHON  "/usr/bin/python3"
#define WARM_IMPORTS "torch,torch.distributed"
#define WARM_MAX_MSG (1u << 20)

extern char **environ;

int warm_script_path(char *buf, size_t size)
{
	const char *env = getenv("ROVER_WARM_SCRIPT");
	int n;
	if (env && *env) {
		n = snprintf(buf, size, "%s", env);
	} else {
		static const char *const rel[] = { "../lib/rover/rover_warm.py", NULL };
		return rv_proc_exe_relative(buf, size, rel, R_OK);
	}
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	return access(buf, R_OK) == 0 ? 0 : -ENOENT;
}

/* ---- framing ---- */

/* Wait until fd is ready for events, at most until deadline (ms, monotonic). */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - rv_mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pf = { .fd = fd, .events = events };
		int k = poll(&pf, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (k > 0)
			return 0;
		if (k < 0 && errno != EINTR)
			return -errno;
	}
}

static int read_full(int fd, void *buf, size_t n, int64_t deadline)
{
	size_t got = 0;
	while (got < n) {
		int r = wait_fd(fd, POLLIN, deadline);
		if (r < 0)
			return r;
		ssize_t k = read(fd, (char *)buf + got, n - got);
		if (k == 0)
			return -ECONNRESET;
		if (k < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		got += (size_t)k;
	}
	return 0;
}

/* One message; *out is a cJSON the caller deletes. */
static int msg_recv(int fd, int64_t deadline, cJSON **out, struct rv_err *err)
{
	*out = NULL;
	uint32_t len;
	int r = read_full(fd, &len, sizeof(len), deadline);
	if (r < 0)
		return r;
	if (len == 0 || len > WARM_MAX_MSG)
		return rv_err_set(err, -EPROTO, "", "message of %u bytes", len);
	char *body = malloc(len);
	if (!body)
		return -ENOMEM;
	r = read_full(fd, body, len, deadline);
	if (r == 0) {
		*out = rv_json_parse(body, len, err);
		r = *out && cJSON_IsObject(*out) ? 0 : -EPROTO;
	}
	free(body);
	return r;
}

/* Send len + body, with fds (may be 0 of them) on the first byte. */
static int msg_send(int sock, const char *body, const int *fds, int nfds, int64_t deadline)
{
	uint32_t len = (uint32_t)strlen(body);
	struct iovec iov[2] = { { &len, sizeof(len) }, { (void *)body, len } };
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
	if (nfds > 0) {
		m.msg_control = ctl.buf;
		m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	size_t total = sizeof(len) + len, sent = 0;
	while (sent < total) {
		int r = wait_fd(sock, POLLOUT, deadline);
		if (r < 0)
			return r;
		ssize_t k = sendmsg(sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == EPIPE ? -ECONNRESET : -errno;
		}
		sent += (size_t)k;
		/* Whatever went, the fds went with its first byte. */
		m.msg_control = NULL;
		m.msg_controllen = 0;
		while (m.msg_iovlen > 0 && (size_t)k >= m.msg_iov[0].iov_len) {
			k -= (ssize_t)m.msg_iov[0].iov_len;
			m.msg_iov++;
			m.msg_iovlen--;
		}
		if (m.msg_iovlen > 0) {
			m.msg_iov[0].iov_base = (char *)m.msg_iov[0].iov_base + k;
			m.msg_iov[0].iov_len -= (size_t)k;
		}
	}
	return 0;
}

/* The "error" of a reply, or "" */
static const char *reply_error(const cJSON *msg)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(msg, "error");
	return cJSON_IsString(e) ? e->valuestring : "";
}

/* ---- start and stop ---- */

static void warm_clear(struct warm *w)
{
	memset(w, 0, sizeof(*w));
	w->sock = -1;
	rv_proc_init(&w->proc);
}

/* Reap the standbys that died (the interpreter lost them, or it died). */
static void standby_prune(struct warm *w)
{
	int k = 0;
	for (int i = 0; i < w->nstandby; i++) {
		if (rv_proc_wait(&w->standby[i], 0, NULL) == -ETIMEDOUT)
			w->standby[k++] = w->standby[i];
		else
			rv_proc_release(&w->standby[i]);
	}
	w->nstandby = k;
}

static void standby_add(struct warm *w, pid_t pid)
{
	if (w->nstandby == (int)(sizeof(w->standby) / sizeof(w->standby[0])))
		standby_prune(w);
	if (w->nstandby == (int)(sizeof(w->standby) / sizeof(w->standby[0])))
		return; /* cannot happen with the interpreter's own limit */
	if (rv_proc_adopt(&w->standby[w->nstandby], pid, pid) == 0)
		w->nstandby++;
}

/* Take the standby pid out of the list into *out; false when not there. */
static bool standby_take(struct warm *w, pid_t pid, struct rv_proc *out)
{
	for (int i = 0; i < w->nstandby; i++) {
		if (w->standby[i].pid != pid)
			continue;
		*out = w->standby[i];
		w->standby[i] = w->standby[--w->nstandby];
		return true;
	}
	return false;
}

/* A notice ({"standby": pid} or {"notice": text}) is handled here and
 * returns true; a reply returns false. */
static bool notice(struct warm *w, const cJSON *msg)
{
	const cJSON *sb = cJSON_GetObjectItemCaseSensitive(msg, "standby");
	if (cJSON_IsNumber(sb) && sb->valuedouble >= 1 && sb->valuedouble <= INT_MAX) {
		standby_add(w, (pid_t)sb->valueint);
		return true;
	}
	return cJSON_IsString(cJSON_GetObjectItemCaseSensitive(msg, "notice"));
}

/* The next message that is not a notice. */
static int reply_recv(struct warm *w, int64_t deadline, cJSON **out, struct rv_err *err)
{
	for (;;) {
		int r = msg_recv(w->sock, deadline, out, err);
		if (r < 0 || !notice(w, *out))
			return r;
		cJSON_Delete(*out);
		*out = NULL;
	}
}

int warm_begin(struct warm *w, const struct warm_opts *o, struct rv_err *reterr)
{
	warm_clear(w);
	struct warm_opts def = { 0 };
	if (!o)
		o = &def;
	char script[PATH_MAX];
	int r;
	if (o->script) {
		if (snprintf(script, sizeof(script), "%s", o->script) >= (int)sizeof(script))
			return rv_err_set(reterr, -ENAMETOOLONG, "script", "script path too long");
		if (access(script, R_OK) < 0)
			return rv_err_set(reterr, -ENOENT, "script", "could not find \"%s\": %s",
					  script, strerror(errno));
	} else if ((r = warm_script_path(script, sizeof(script))) < 0) {
		return rv_err_set(reterr, r, "script", "could not find rover_warm.py (\"%s\"): %s",
				  script, strerror(-r));
	}
	/* Workers are reparented here when their intermediate exits. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		return rv_err_set(reterr, -errno, "", "could not become a child subreaper: %s",
				  strerror(errno));

	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return rv_err_set(reterr, -errno, "", "could not create a socketpair: %s",
				  strerror(errno));
	char fdarg[16];
	snprintf(fdarg, sizeof(fdarg), "%d", sv[1]);
	const char *python = o->python ? o->python : WARM_PYTHON;
	char standby[16];
	snprintf(standby, sizeof(standby), "%d",
		 o->standby < 0                  ? 0
		 : o->standby == 0               ? 1
		 : o->standby > WARM_MAX_STANDBY ? WARM_MAX_STANDBY
						 : o->standby);
	const char *argv[] = { python,      script,     "--fd",
			       fdarg,       "--import", o->imports ? o->imports : WARM_IMPORTS,
			       "--standby", standby,    NULL };
	struct rv_proc_opts po = {
		.argv = argv,
		.env = o->env,
		.io = { { RV_PROC_NULL, -1 },
			o->log_fd > 0 ? (struct rv_proc_io){ RV_PROC_FD, o->log_fd }
				      : (struct rv_proc_io){ RV_PROC_INHERIT, -1 },
			{ RV_PROC_STDOUT, -1 } },
		.keep_fds = { sv[1] },
		.nkeep = 1,
		.pdeathsig = SIGKILL,
	};
	r = rv_proc_spawn(&w->proc, &po);
	close(sv[1]);
	if (r < 0) {
		close(sv[0]);
		warm_clear(w);
		return rv_err_set(reterr, r, "python", "could not start %s: %s", python,
				  strerror(-r));
	}
	w->sock = sv[0];
	w->started = true;
	w->spawn_timeout_ms = o->spawn_timeout_ms > 0 ? o->spawn_timeout_ms : 10000;
	w->ready_by_ms = rv_mono_ms() + (o->start_timeout_ms > 0 ? o->start_timeout_ms : 120000);
	return 0;
}

int warm_ready(struct warm *w, int timeout_ms, struct rv_err *reterr)
{
	if (!w->started || w->sock < 0)
		return rv_err_set(reterr, -ENOTCONN, "", "warm interpreter is not running");
	if (w->ready)
		return 0;
	int64_t now = rv_mono_ms();
	int64_t deadline = timeout_ms < 0 ? w->ready_by_ms : now + timeout_ms;
	if (deadline > w->ready_by_ms)
		deadline = w->ready_by_ms;
	struct pollfd pf = { .fd = w->sock, .events = POLLIN };
	int k;
	do
		k = poll(&pf, 1, deadline > now ? (int)(deadline - now) : 0);
	while (k < 0 && errno == EINTR && (now = rv_mono_ms()) < deadline);
	const char *python = "the warm interpreter";
	int r;
	RV_CLEANUP_CJSON cJSON *msg = NULL;
	struct rv_err perr;
	if (k == 0 && rv_mono_ms() < w->ready_by_ms)
		return rv_err_set(reterr, -EAGAIN, "", "warm interpreter still importing");
	if (k == 0) {
		r = rv_err_set(reterr, -ETIMEDOUT, "", "%s did not import its modules in time",
			       python);
		goto fail;
	}
	/* Readable: the message (small, written at once) or end of file. */
	r = reply_recv(w, rv_mono_ms() + 2000, &msg, &perr);
	if (r == -ECONNRESET) {
		int st = -1;
		rv_proc_wait(&w->proc, 2000, &st);
		rv_err_set(reterr, r, "", "%s exited during start (status %d)", python, st);
	} else if (r < 0) {
		rv_err_set(reterr, r, "", "could not read the ready message: %s",
			   r == -EPROTO ? perr.msg : strerror(-r));
	} else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(msg, "ready"))) {
		const cJSON *ms = cJSON_GetObjectItemCaseSensitive(msg, "import_ms");
		w->import_ms = cJSON_IsNumber(ms) ? ms->valueint : 0;
		w->ready = true;
		return 0;
	} else {
		const char *e = reply_error(msg);
		r = strstr(e, "threads") ? -EBUSY : -ENOPKG;
		rv_err_set(reterr, r, "imports", "%s", *e ? e : "no ready message");
	}
fail:
	warm_stop(w);
	return r;
}

int warm_start(struct warm *w, const struct warm_opts *o, struct rv_err *reterr)
{
	int r = warm_begin(w, o, reterr);
	if (r < 0)
		return r;
	return warm_ready(w, -1, reterr);
}

bool warm_alive(struct warm *w)
{
	if (!w->started || w->sock < 0)
		return false;
	return !w->proc.reaped && rv_proc_wait(&w->proc, 0, NULL) == -ETIMEDOUT;
}

/* End the interpreter: end of file on its socket (it exits; its standbys
 * see end of file in turn and exit), or SIGKILL at once when kill; the
 * notices it sent meanwhile name standbys to reap too. */
static void stop(struct warm *w, bool kill)
{
	if (!w || !w->started)
		return;
	/* (The wait first: someone may have reaped it, then its pid is not ours.) */
	if (kill && w->proc.pid > 0 && rv_proc_wait(&w->proc, 0, NULL) == -ETIMEDOUT)
		rv_proc_kill(&w->proc, SIGKILL);
	if (w->sock >= 0) {
		shutdown(w->sock, SHUT_WR);
		int64_t deadline = rv_mono_ms() + 2000;
		cJSON *msg = NULL;
		while (msg_recv(w->sock, deadline, &msg, NULL) == 0) {
			notice(w, msg);
			cJSON_Delete(msg);
			msg = NULL;
		}
		close(w->sock);
		w->sock = -1;
	}
	if (w->proc.pid > 0 && !w->proc.reaped &&
	    rv_proc_wait(&w->proc, 2000, NULL) == -ETIMEDOUT) {
		rv_proc_kill(&w->proc, SIGKILL);
		rv_proc_wait(&w->proc, -1, NULL);
	}
	rv_proc_release(&w->proc);
	rv_proc_init(&w->proc);
	for (int i = 0; i < w->nstandby; i++) {
		if (rv_proc_wait(&w->standby[i], 2000, NULL) == -ETIMEDOUT)
			rv_proc_stop(&w->standby[i], 0, NULL);
		rv_proc_release(&w->standby[i]);
	}
	w->nstandby = 0;
	w->started = false;
}

void warm_stop(struct warm *w)
{
	stop(w, false);
}

/* ---- spawn ---- */

static int env_to_json(cJSON *obj, const char *const *envp)
{
	for (size_t i = 0; envp[i]; i++) {
		const char *eq = strchr(envp[i], '=');
		if (!eq || eq == envp[i])
			continue;
		char key[256];
		size_t n = (size_t)(eq - envp[i]);
		if (n >= sizeof(key))
			continue;
		memcpy(key, envp[i], n);
		key[n] = 0;
		cJSON_DeleteItemFromObjectCaseSensitive(obj, key); /* the last one wins */
		if (!cJSON_AddStringToObject(obj, key, eq + 1))
			return -ENOMEM;
	}
	return 0;
}

/* The request's JSON, malloc'd; NULL when out of memory. */
static char *request_json(const struct warm_req *rq, const char *cwd)
{
	RV_CLEANUP_CJSON cJSON *root = cJSON_CreateObject();
	cJSON *argv = cJSON_AddArrayToObject(root, "argv");
	cJSON *env = cJSON_AddObjectToObject(root, "env");
	if (!argv || !env || !cJSON_AddBoolToObject(root, "module", rq->module) ||
	    !cJSON_AddBoolToObject(root, "unbuffered", rq->unbuffered) ||
	    !cJSON_AddBoolToObject(root, "refill", !rq->hold_standbys) ||
	    !cJSON_AddStringToObject(root, "cwd", cwd))
		return NULL;
	for (size_t i = 0; rq->argv[i]; i++) {
		cJSON *s = cJSON_CreateString(rq->argv[i]);
		if (!s || !cJSON_AddItemToArray(argv, s)) {
			cJSON_Delete(s);
			return NULL;
		}
	}
	if (env_to_json(env, rq->envp ? rq->envp : (const char *const *)environ) < 0)
		return NULL;
	return rv_json_print(root);
}

/* The interpreter cannot be trusted any more: stop it, say why. */
static int gone(struct warm *w, int code, struct rv_err *reterr, const char *what)
{
	stop(w, true);
	return rv_err_set(reterr, code, "", "warm interpreter %s; restarts run cold", what);
}

int warm_spawn(struct warm *w, const struct warm_req *rq, struct rv_proc *out,
	       struct rv_err *reterr)
{
	rv_proc_init(out);
	if (!rq || !rq->argv || !rq->argv[0] || !rq->argv[0][0])
		return rv_err_set(reterr, -EINVAL, "argv", "no script to run");
	if (rq->no_python)
		return rv_err_set(reterr, -ENOTSUP, "no_python",
				  "--no-python: only a Python script can be forked warm");
	if (!w->started || w->sock < 0)
		return rv_err_set(reterr, -ENOTCONN, "", "warm interpreter is not running");
	int rr = warm_ready(w, 0, reterr);
	if (rr < 0)
		return rr;

	char cwdbuf[PATH_MAX];
	const char *cwd = rq->cwd;
	if (!cwd && !(cwd = getcwd(cwdbuf, sizeof(cwdbuf))))
		return rv_err_set(reterr, -errno, "cwd", "could not get the cwd: %s",
				  strerror(errno));
	RV_CLEANUP_FREE char *body = request_json(rq, cwd);
	if (!body)
		return -ENOMEM;

	/* /dev/null for the fds not given, closed again below. */
	int fds[3], opened[3] = { -1, -1, -1 };
	for (int i = 0; i < 3; i++) {
		fds[i] = rq->fd[i];
		if (fds[i] < 0) {
			opened[i] = fds[i] = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (fds[i] < 0) {
				int e = -errno;
				for (int j = 0; j < i; j++)
					if (opened[j] >= 0)
						close(opened[j]);
				return rv_err_set(reterr, e, "fd", "could not open /dev/null");
			}
		}
	}
	int64_t deadline = rv_mono_ms() + w->spawn_timeout_ms;
	int r = msg_send(w->sock, body, fds, 3, deadline);
	for (int i = 0; i < 3; i++)
		if (opened[i] >= 0)
			close(opened[i]);
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	struct rv_err perr;
	if (r == 0)
		r = reply_recv(w, deadline, &reply, &perr);
	if (r == -ETIMEDOUT)
		return gone(w, r, reterr, "did not answer in time: stopped");
	if (r == -ECONNRESET || r == -EPIPE)
		return gone(w, -ENOTCONN, reterr, "exited");
	if (r < 0)
		return gone(w, -ENOTCONN, reterr, "broke the protocol: stopped");

	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(reply, "pid");
	if (!cJSON_IsNumber(pid) || pid->valuedouble < 1 || pid->valuedouble > INT_MAX) {
		const char *e = reply_error(reply);
		bool refused = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "refused"));
		return rv_err_set(reterr, refused ? -ENOTSUP : -EIO, "", "%s",
				  *e ? e : "no pid in the reply");
	}
	if (standby_take(w, (pid_t)pid->valueint, out)) {
		w->spawns++;
		standby_prune(w);
		return 0;
	}
	r = rv_proc_adopt(out, (pid_t)pid->valueint, (pid_t)pid->valueint);
	if (r < 0) {
		/* Not our child (not reparented here): nobody could reap or
		 * watch it, so end it; its group was set up before the reply,
		 * and a group that young is not a stranger's. */
		kill(-(pid_t)pid->valueint, SIGKILL);
		return rv_err_set(reterr, r, "", "could not adopt worker %d: %s", pid->valueint,
				  strerror(-r));
	}
	w->spawns++;
	return 0;
}
