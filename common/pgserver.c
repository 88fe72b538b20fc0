/*
 * pgserver.c: run a private PostgreSQL cluster in a folder of ours.
 *
 * Used by rover-brain (no --db given) and by the test fixture, from the main
 * thread only.  initdb and pg_ctl run through rv_proc_run (no shell, no
 * system()), each with a timeout; as root they run as the postgres user
 * (the child drops to its uid/gid) because both refuse to run as root.  The server
 * listens only on a unix socket in the folder (listen_addresses = ''), so two
 * clusters never fight over a TCP port.  Errors carry the command's output or
 * the tail of the server log in err->msg.
 */
#include "clock.h"
#include "pgserver.h"

#include <dirent.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "proc.h"

#define PGSERVER_PORT      5432
#define PGSERVER_USER_ROOT "postgres"
#define OUT_TAIL           1024

/* Everything a command run needs; filled once per start/stop. */
struct pgctx {
	char bindir[PATH_MAX];
	bool drop;     /* root: commands run as postgres (pg_uid, pg_gid) */
	char user[64]; /* database superuser name (= OS user running the server) */
	char home[PATH_MAX];
	uid_t pg_uid;
	gid_t pg_gid;
};

/* Make text fit for err->msg: newlines become "; ", trailing space dropped. */
static void flatten(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\r'))
		s[--n] = '\0';
	for (char *p = s; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
}

/* Append one `key='value'` pair, quoted as libpq's conninfo wants. */
static void conninfo_add(char *buf, size_t size, const char *key, const char *value)
{
	size_t n = strlen(buf);
	n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s%s='", n ? " " : "", key);
	for (const char *p = value; *p && n + 3 < size; p++) {
		if (*p == '\'' || *p == '\\')
			buf[n++] = '\\';
		buf[n++] = *p;
	}
	if (n + 2 <= size) {
		buf[n++] = '\'';
		buf[n] = '\0';
	}
}

static void build_conninfo(const struct rv_pgserver *srv, const char *user, const char *dbname,
			   char *buf, size_t size)
{
	char port[16];
	snprintf(port, sizeof(port), "%d", srv->port);
	buf[0] = '\0';
	conninfo_add(buf, size, "host", srv->sockdir);
	conninfo_add(buf, size, "port", port);
	conninfo_add(buf, size, "dbname", dbname);
	conninfo_add(buf, size, "user", user);
}

/* The newest /usr/lib/postgresql/<N>/bin, or ROVER_PG_BINDIR. */
static int find_bindir(char *out, size_t size, struct rv_err *err)
{
	const char *env = getenv("ROVER_PG_BINDIR");
	char path[PATH_MAX];
	if (env && *env) {
		snprintf(path, sizeof(path), "%s/pg_ctl", env);
		if (access(path, X_OK) < 0)
			return rv_err_set(err, -ENOENT, "ROVER_PG_BINDIR",
					  "could not find pg_ctl in \"%s\": %s", env,
					  strerror(errno));
		snprintf(out, size, "%s", env);
		return 0;
	}
	DIR *d = opendir("/usr/lib/postgresql");
	long best = -1;
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			char *end;
			errno = 0;
			long v = strtol(de->d_name, &end, 10);
			if (errno || end == de->d_name || *end || v <= best)
				continue;
			snprintf(path, sizeof(path), "/usr/lib/postgresql/%s/bin/pg_ctl",
				 de->d_name);
			if (access(path, X_OK) == 0)
				best = v;
		}
		closedir(d);
	}
	if (best < 0)
		return rv_err_set(
			err, -ENOENT, NULL,
			"could not find postgresql: no /usr/lib/postgresql/<version>/bin/pg_ctl "
			"(install postgresql or set ROVER_PG_BINDIR)");
	snprintf(out, size, "/usr/lib/postgresql/%ld/bin", best);
	return 0;
}

static int ctx_init(struct pgctx *ctx, struct rv_err *err)
{
	memset(ctx, 0, sizeof(*ctx));
	int r = find_bindir(ctx->bindir, sizeof(ctx->bindir), err);
	if (r < 0)
		return r;
	if (geteuid() == 0) {
		struct passwd *pw = getpwnam(PGSERVER_USER_ROOT);
		if (!pw)
			return rv_err_set(
				err, -ENOENT, NULL,
				"could not find user \"postgres\": running as root needs it");
		ctx->drop = true;
		ctx->pg_uid = pw->pw_uid;
		ctx->pg_gid = pw->pw_gid;
		snprintf(ctx->user, sizeof(ctx->user), "%s", PGSERVER_USER_ROOT);
		snprintf(ctx->home, sizeof(ctx->home), "%s", pw->pw_dir ? pw->pw_dir : "/");
	} else {
		struct passwd *pw = getpwuid(geteuid());
		if (!pw)
			return rv_err_set(err, -ENOENT, NULL,
					  "could not find the current user's name");
		ctx->pg_uid = pw->pw_uid;
		ctx->pg_gid = pw->pw_gid;
		snprintf(ctx->user, sizeof(ctx->user), "%s", pw->pw_name);
	}
	return 0;
}

/* The last OUT_TAIL bytes of out, flattened, for err->msg. */
static const char *out_tail(struct rv_buf *out)
{
	if (!out->data)
		return "";
	char *s = out->data;
	if (out->len > OUT_TAIL)
		s += out->len - OUT_TAIL;
	flatten(s);
	return s;
}

/*
 * Run <bindir>/<prog> args... (NULL-terminated), as postgres when root,
 * from "/" (postgres cannot read our cwd), stdin on /dev/null.  On failure
 * err->msg says what failed with the command's output.
 */
static int pg_run(const struct pgctx *ctx, const char *prog, const char *const *args, int timeout_s,
		  struct rv_err *err)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", ctx->bindir, prog);
	const char *argv[32];
	size_t n = 0;
	argv[n++] = path;
	for (size_t i = 0; args[i] && n < RV_ARRAY_SIZE(argv) - 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	char home[PATH_MAX + 8], user[80], logname[80];
	snprintf(home, sizeof(home), "HOME=%s", ctx->home);
	snprintf(user, sizeof(user), "USER=%s", ctx->user);
	snprintf(logname, sizeof(logname), "LOGNAME=%s", ctx->user);
	const char *env[] = { home, user, logname, NULL };
	struct rv_proc_opts o = {
		.argv = argv,
		.env = ctx->drop ? env : NULL,
		.cwd = "/",
		.io[0] = { RV_PROC_NULL },
		.set_ids = ctx->drop,
		.uid = ctx->pg_uid,
		.gid = ctx->pg_gid,
	};
	struct rv_buf out;
	rv_buf_init(&out);
	int status = 0;
	int r = rv_proc_run(&o, timeout_s * 1000, &status, &out);
	if (r == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		rv_buf_release(&out);
		return 0;
	}
	if (r == -ETIMEDOUT)
		r = rv_err_set(err, r, NULL, "could not run %s: timed out after %d s: %s", prog,
			       timeout_s, out_tail(&out));
	else if (r < 0)
		r = rv_err_set(err, r, NULL, "could not run %s: %s", path, strerror(-r));
	else
		r = rv_err_set(err, -EIO, NULL, "could not run %s: %s", prog, out_tail(&out));
	rv_buf_release(&out);
	return r;
}

/* Read the last lines of the server log into buf (for error messages). */
static void log_tail(const struct rv_pgserver *srv, char *buf, size_t size)
{
	buf[0] = '\0';
	int fd = open(srv->logfile, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	off_t end = lseek(fd, 0, SEEK_END);
	off_t from = end > (off_t)size - 1 ? end - (off_t)size + 1 : 0;
	ssize_t n = pread(fd, buf, size - 1, from);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	/* Start at a line boundary when the tail cut a line. */
	char *nl = from > 0 ? strchr(buf, '\n') : NULL;
	if (nl && nl[1])
		memmove(buf, nl + 1, strlen(nl + 1) + 1);
	flatten(buf);
}

static int mkdir_p(const char *dir, mode_t mode)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s", dir) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* As root: the postgres user must be able to walk down to dir, so every
 * ancestor gets o+x (search only, never read), and dir itself becomes postgres's. */
static int prepare_dir_root(const struct pgctx *ctx, const char *dir, struct rv_err *err)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s", dir);
	for (char *slash = strrchr(tmp, '/'); slash; slash = strrchr(tmp, '/')) {
		*slash = '\0';
		const char *anc = tmp[0] ? tmp : "/";
		struct stat st;
		if (stat(anc, &st) < 0)
			return rv_err_set(err, -errno, NULL, "could not stat \"%s\": %s", anc,
					  strerror(errno));
		if (!(st.st_mode & S_IXOTH) && chmod(anc, (st.st_mode & 07777) | S_IXOTH) < 0)
			return rv_err_set(err, -errno, NULL, "could not chmod \"%s\": %s", anc,
					  strerror(errno));
		if (!tmp[0])
			break;
	}
	if (chown(dir, ctx->pg_uid, ctx->pg_gid) < 0)
		return rv_err_set(err, -errno, NULL, "could not chown \"%s\" to postgres: %s", dir,
				  strerror(errno));
	return 0;
}

/* A process that exited but was not reaped yet (kill(pid, 0) still works on
 * it): a postmaster killed a moment ago, before init reaped it. */
static bool is_zombie(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "pid (comm) S ...": the state follows the last ')' (comm may hold one). */
	const char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* The live postmaster's pid from datadir/postmaster.pid, or 0; *port from line 4. */
static pid_t running_pid(const struct rv_pgserver *srv, int *port)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/postmaster.pid", srv->datadir);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	char line[PATH_MAX];
	long pid = 0;
	for (int i = 1; i <= 4 && fgets(line, sizeof(line), f); i++) {
		if (i == 1)
			pid = strtol(line, NULL, 10);
		else if (i == 4 && port) {
			long p = strtol(line, NULL, 10);
			if (p > 0 && p < 65536)
				*port = (int)p;
		}
	}
	fclose(f);
	if (pid <= 0 || (kill((pid_t)pid, 0) < 0 && errno != EPERM) || is_zombie((pid_t)pid))
		return 0;
	return (pid_t)pid;
}

static int write_conf(const struct rv_pgserver *srv, int nosync, struct rv_err *err)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/postgresql.conf", srv->datadir);
	FILE *f = fopen(path, "ae");
	if (!f)
		return rv_err_set(err, -errno, NULL, "could not open \"%s\": %s", path,
				  strerror(errno));
	fprintf(f, "\n# rover: private cluster, unix socket only (no TCP)\n"
		   "listen_addresses = ''\nunix_socket_directories = '");
	for (const char *p = srv->sockdir; *p; p++)
		fprintf(f, *p == '\'' ? "''" : "%c", *p);
	fprintf(f,
		"'\nport = %d\nmax_connections = 100\nshared_buffers = 128MB\n"
		"fsync = %s\n",
		srv->port, nosync ? "off" : "on");
	if (fclose(f) != 0)
		return rv_err_set(err, -EIO, NULL, "could not write \"%s\"", path);
	return 0;
}

static int nosync_requested(void)
{
	const char *e = getenv("ROVER_PG_NOSYNC");
	return e && strcmp(e, "1") == 0;
}

static int wait_ready(const struct rv_pgserver *srv, const char *user, int timeout_s,
		      struct rv_err *err)
{
	char ci[1024];
	build_conninfo(srv, user, "postgres", ci, sizeof(ci));
	int64_t deadline = rv_mono_ms() + (int64_t)timeout_s * 1000;
	for (;;) {
		if (PQping(ci) == PQPING_OK)
			return 0;
		if (rv_mono_ms() >= deadline) {
			char tail[400];
			log_tail(srv, tail, sizeof(tail));
			return rv_err_set(
				err, -ETIMEDOUT, NULL,
				"could not connect to postgresql in \"%s\" within %d s: %s",
				srv->dir, timeout_s, tail);
		}
		usleep(50000);
	}
}

static int create_rover_db(const struct rv_pgserver *srv, const char *user, struct rv_err *err)
{
	char ci[1024];
	build_conninfo(srv, user, "postgres", ci, sizeof(ci));
	PGconn *c = PQconnectdb(ci);
	int r = 0;
	if (PQstatus(c) != CONNECTION_OK) {
		char msg[400];
		snprintf(msg, sizeof(msg), "%s", PQerrorMessage(c));
		flatten(msg);
		r = rv_err_set(err, -ECONNREFUSED, NULL, "could not connect to postgresql: %s",
			       msg);
		goto out;
	}
	const char *params[] = { "rover" };
	PGresult *res = PQexecParams(c, "SELECT 1 FROM pg_database WHERE datname = $1", 1, NULL,
				     params, NULL, NULL, 0);
	int exists = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0;
	PQclear(res);
	if (exists)
		goto out;
	/* Constant SQL: CREATE DATABASE cannot take parameters. */
	res = PQexecParams(c, "CREATE DATABASE rover", 0, NULL, NULL, NULL, NULL, 0);
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	if (PQresultStatus(res) != PGRES_COMMAND_OK && !(state && !strcmp(state, "42P04"))) {
		char msg[400];
		snprintf(msg, sizeof(msg), "%s", PQerrorMessage(c));
		flatten(msg);
		r = rv_err_set(err, -EIO, NULL, "could not create database \"rover\": %s", msg);
	}
	PQclear(res);
out:
	PQfinish(c);
	return r;
}

static int srv_paths(struct rv_pgserver *srv, const char *dir, struct rv_err *err)
{
	char abs[PATH_MAX];
	if (!realpath(dir, abs))
		return rv_err_set(err, -errno, NULL, "could not resolve \"%s\": %s", dir,
				  strerror(errno));
	if (strlen(abs) >= sizeof(srv->dir))
		return rv_err_set(err, -ENAMETOOLONG, NULL, "folder name too long: \"%s\"", abs);
	/* The socket path "<dir>/.s.PGSQL.<port>" must fit in sun_path. */
	struct sockaddr_un sun;
	if (strlen(abs) + sizeof("/.s.PGSQL.65535") > sizeof(sun.sun_path))
		return rv_err_set(err, -ENAMETOOLONG, NULL,
				  "folder name too long for a unix socket: \"%s\"", abs);
	/* Lengths checked above: abs is shorter than sun_path (108), so all fit. */
	strcpy(srv->dir, abs);
	strcpy(srv->sockdir, abs);
	stpcpy(stpcpy(srv->datadir, abs), "/pgdata");
	stpcpy(stpcpy(srv->logfile, abs), "/postgres.log");
	return 0;
}

int rv_pgserver_start(struct rv_pgserver *srv, const char *dir, int timeout_s, struct rv_err *err)
{
	struct pgctx ctx;
	memset(srv, 0, sizeof(*srv));
	srv->port = PGSERVER_PORT;
	if (timeout_s <= 0)
		timeout_s = 30;
	int r = ctx_init(&ctx, err);
	if (r < 0)
		return r;
	r = mkdir_p(dir, 0700);
	if (r < 0)
		return rv_err_set(err, r, NULL, "could not create \"%s\": %s", dir, strerror(-r));
	r = srv_paths(srv, dir, err);
	if (r < 0)
		return r;
	if (ctx.drop) {
		r = prepare_dir_root(&ctx, srv->dir, err);
		if (r < 0)
			return r;
	}
	if (chmod(srv->dir, 0700) < 0)
		return rv_err_set(err, -errno, NULL, "could not chmod \"%s\": %s", srv->dir,
				  strerror(errno));

	char ver[700];
	snprintf(ver, sizeof(ver), "%s/PG_VERSION", srv->datadir);
	int nosync = nosync_requested();
	if (access(ver, F_OK) < 0) {
		const char *args[] = { "-D",         srv->datadir,
				       "-A",         "trust",
				       "-E",         "UTF8",
				       "--locale=C", nosync ? "--no-sync" : NULL,
				       NULL };
		r = pg_run(&ctx, "initdb", args, timeout_s, err);
		if (r < 0)
			return r;
		r = write_conf(srv, nosync, err);
		if (r < 0)
			return r;
	}

	if (running_pid(srv, &srv->port) == 0) {
		char tout[16];
		snprintf(tout, sizeof(tout), "%d", timeout_s);
		/* Constant option text: pg_ctl hands -o to a shell.  The socket folder
		 * (any characters) lives in postgresql.conf instead. */
		const char *args[] = {
			"-D",         srv->datadir, "-l",
			srv->logfile, "-w",         "-t",
			tout,         "-o",         nosync ? "-c fsync=off" : "-c fsync=on",
			"start",      NULL
		};
		r = pg_run(&ctx, "pg_ctl", args, timeout_s + 5, err);
		if (r < 0) {
			/* pg_ctl only says "examine the log": the reason is in the log. */
			char tail[400];
			log_tail(srv, tail, sizeof(tail));
			if (tail[0])
				return rv_err_set(err, r, NULL,
						  "could not start postgresql in \"%s\": %s",
						  srv->dir, tail);
			return r;
		}
		srv->started = 1;
		running_pid(srv, &srv->port);
	}
	r = wait_ready(srv, ctx.user, timeout_s, err);
	if (r == 0)
		r = create_rover_db(srv, ctx.user, err);
	if (r < 0) {
		if (srv->started)
			rv_pgserver_stop(srv);
		return r;
	}
	build_conninfo(srv, ctx.user, "rover", srv->conninfo, sizeof(srv->conninfo));
	return 0;
}

pid_t rv_pgserver_pid(const struct rv_pgserver *srv)
{
	return srv && srv->datadir[0] ? running_pid(srv, NULL) : 0;
}

int rv_pgserver_restart(struct rv_pgserver *srv, int timeout_s, struct rv_err *err)
{
	char dir[sizeof(srv->dir)];
	memcpy(dir, srv->dir, sizeof(dir)); /* rv_pgserver_start clears *srv */
	if (!dir[0])
		return rv_err_set(err, -EINVAL, NULL,
				  "could not restart postgresql: never started");
	return rv_pgserver_start(srv, dir, timeout_s, err);
}

static int pg_ctl_stop(struct rv_pgserver *srv, const char *mode)
{
	struct pgctx ctx;
	if (!srv->datadir[0] || ctx_init(&ctx, NULL) < 0)
		return -EINVAL;
	if (running_pid(srv, NULL) == 0)
		return 0;
	const char *args[] = { "-D", srv->datadir, "-m", mode, "-w", "-t", "60", "stop", NULL };
	return pg_run(&ctx, "pg_ctl", args, 65, NULL);
}

int rv_pgserver_stop(struct rv_pgserver *srv)
{
	if (!srv || !srv->started)
		return 0;
	int r = pg_ctl_stop(srv, "fast");
	if (r == 0)
		srv->started = 0;
	return r;
}

int rv_pgserver_kill(struct rv_pgserver *srv)
{
	if (!srv)
		return -EINVAL;
	int r = pg_ctl_stop(srv, "immediate");
	if (r == 0)
		srv->started = 0;
	return r;
}
