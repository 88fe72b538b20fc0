/*
 * log.h: one logfmt line per event on stderr, written with one write(2).
 *
 *   rv_log_warn("worker exited", "rank=%d exit=%d", rank, code);
 *   -> ts=2026-11-21T15:29:03.412Z level=warn comp=brain msg="worker exited" rank=3 exit=1
 *
 * msg is a constant string; variables go in the key=value format.  Values that
 * may hold spaces or quotes are passed through rv_log_q() (quotes and escapes).
 * The level and component are process-wide (the only globals besides signal flags).
 * common/ and algorithms/ never log above debug.
 */
#ifndef RV_LOG_H
#define RV_LOG_H

#include <stddef.h>

enum rv_log_level { RV_LOG_DEBUG, RV_LOG_INFO, RV_LOG_WARN, RV_LOG_ERROR };

void rv_log_setup(const char *comp, enum rv_log_level level);
/* "debug", "info", "warn", "error" -> level; -EINVAL if unknown. */
int rv_log_level_parse(const char *s, enum rv_log_level *out);
enum rv_log_level rv_log_get_level(void);

void rv_log(enum rv_log_level level, const char *msg, const char *kvfmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Quote a value for logfmt into buf (always quoted, \" and \\ escaped, control
 * characters dropped); returns buf. */
const char *rv_log_q(char *buf, size_t size, const char *value);

#define rv_log_debug(msg, ...) rv_log(RV_LOG_DEBUG, msg, __VA_ARGS__)
#define rv_log_info(msg, ...) rv_log(RV_LOG_INFO, msg, __VA_ARGS__)
#define rv_log_warn(msg, ...) rv_log(RV_LOG_WARN, msg, __VA_ARGS__)
#define rv_log_error(msg, ...) rv_log(RV_LOG_ERROR, msg, __VA_ARGS__)

#endif
