#include "common/vstatus.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char g_msg[1024];
static _Thread_local char g_where[160];

/* Messages quote names and values from untrusted files: control characters (a newline, a
 * terminal escape) become '?', so a message stays one printable line. */
void vtext_one_line(char *m) {
  for (unsigned char *p = (unsigned char *)m; *p; p++)
    if (*p < 0x20 || *p == 0x7f) *p = '?';
}

static vstatus record(vstatus s, const char *file, int line, const char *fmt, va_list ap) {
  vsnprintf(g_msg, sizeof g_msg, fmt, ap);
  vtext_one_line(g_msg);
  const char *base = strrchr(file, '/');
  snprintf(g_where, sizeof g_where, "%s:%d", base ? base + 1 : file, line);
  return s;
}

vstatus verr_set(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vstatus s = record(V_ERR, file, line, fmt, ap);
  va_end(ap);
  return s;
}

vstatus vunsupported_set(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vstatus s = record(V_UNSUPPORTED, file, line, fmt, ap);
  va_end(ap);
  return s;
}

void verr_prefix(const char *fmt, ...) {
  char pre[512], old[sizeof g_msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pre, sizeof pre, fmt, ap);
  va_end(ap);
  memcpy(old, g_msg, sizeof old);
  size_t n = strlen(pre);
  if (n > sizeof g_msg - 3) n = sizeof g_msg - 3;
  memcpy(g_msg, pre, n);
  g_msg[n] = ':';
  g_msg[n + 1] = ' ';
  size_t rest = sizeof g_msg - n - 3;
  size_t m = strlen(old);
  if (m > rest) m = rest;
  memcpy(g_msg + n + 2, old, m);
  g_msg[n + 2 + m] = 0;
  vtext_one_line(g_msg);
}

const char *verr_msg(void) { return g_msg; }
const char *verr_where(void) { return g_where; }
void verr_clear(void) { g_msg[0] = 0; g_where[0] = 0; }

void *vmalloc(size_t n, const char *what) {
  void *p = malloc(n ? n : 1);
  if (!p) VERR("out of memory allocating %zu bytes for %s", n, what);
  return p;
}

void *vcalloc(size_t count, size_t size, const char *what) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) VERR("out of memory allocating %zu x %zu bytes for %s", count, size, what);
  return p;
}
