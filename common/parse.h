/*
 * parse.h: checked number parsing (never atoi) and small string helpers.
 * All return 0 or -EINVAL (garbage, leading blanks, trailing text) / -ERANGE
 * (out of bounds), and leave *out alone on failure.
 */
#ifndef RV_PARSE_H
#define RV_PARSE_H

#include <stdbool.h>
#include <stdint.h>

int rv_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
int rv_parse_double(const char *s, double min, double max, double *out);
int rv_parse_bool(const char *s, bool *out);
/* Kubernetes-style memory quantity ("512Mi", "8Gi", "1G", "1048576") -> MiB. */
int rv_parse_memory_mb(const char *s, int64_t *out_mb);
/* Most callers of these parsers need the clocks too: clock.h comes with
 * this header. */
#include "clock.h"

#endif
