/* core/plugin_err.c - the plugins' error channel (core/plugin_err.h). */
#include "plugin_err.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char msg[2048];
static int code, have_msg, have_code;

void bcg_plugin_err_set(int c, const char *fmt, ...) {
  pthread_mutex_lock(&mu);
  if (!have_msg) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++)
      if (*p == '\n' || *p == '\r') *p = ' ';
    code = c, have_msg = 1, have_code = 1;
  }
  pthread_mutex_unlock(&mu);
}

void bcg_plugin_err_context(const char *fmt, ...) {
  char ctx[1024], tmp[sizeof msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx, sizeof ctx, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&mu);
  if (have_msg) {
    snprintf(tmp, sizeof tmp, "%.1000s: %.1000s", ctx, msg);
    memcpy(msg, tmp, sizeof msg);
  } else {
    snprintf(msg, sizeof msg, "%s", ctx);
    have_msg = 1;
  }
  pthread_mutex_unlock(&mu);
}

int bcg_plugin_err_take(char *buf, size_t len) {
  pthread_mutex_lock(&mu);
  int r = have_msg;
  if (r && buf && len) {
    if (have_code) snprintf(buf, len, "%s (code %d)", msg, code);
    else snprintf(buf, len, "%s", msg);
  }
  have_msg = have_code = 0;
  msg[0] = 0;
  pthread_mutex_unlock(&mu);
  return r;
}

void bcg_plugin_err_clear(void) { bcg_plugin_err_take(NULL, 0); }
