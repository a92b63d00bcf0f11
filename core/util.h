/* core/util.h - private: small helpers of libbcg's sources and the bcg
 * command (app/). */
#ifndef BCG_CORE_UTIL_H
#define BCG_CORE_UTIL_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* printf into a caller's message buffer (nothing when err is NULL or empty) */
static inline void bcg_setf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline void bcg_setf(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* qsort comparator of C strings (an array of char *) */
static inline int bcg_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

#endif
