#include "suites/engine/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val, vstatus *err) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0) return false;
  if (a[n] == '=') { *val = a + n + 1; return true; }
  if (a[n] != 0) return false;
  if (*i + 1 >= argc) {
    *err = VERR("option %s needs a value", name);
    *val = NULL;
    return true;
  }
  *val = argv[++*i];
  return true;
}

vstatus cli_int(const char *opt, const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end) return VERR("option %s: '%s' is not an integer", opt, s);
  if (v < lo || v > hi) return VERR("option %s: %ld is out of range [%ld, %ld]", opt, v, lo, hi);
  *out = v;
  return V_OK;
}

vstatus cli_double(const char *opt, const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end) return VERR("option %s: '%s' is not a number", opt, s);
  *out = v;
  return V_OK;
}

vstatus cli_u64(const char *opt, const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s || *end || s[0] == '-') return VERR("option %s: '%s' is not a non-negative integer", opt, s);
  *out = v;
  return V_OK;
}

vstatus cli_size(const char *opt, const char *s, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s) return VERR("option %s: '%s' is not a size", opt, s);
  long mul = 1;
  if (*end == 'k' || *end == 'K') { mul = 1024; end++; }
  else if (*end == 'm' || *end == 'M') { mul = 1024 * 1024; end++; }
  if (*end || v < 0) return VERR("option %s: '%s' is not a size (e.g. 64, 4k, 1m)", opt, s);
  *out = v * mul;
  return V_OK;
}

vstatus cli_size_list(const char *opt, const char *s, long **out, int *n) {
  int cap = 1;
  for (const char *p = s; *p; p++) cap += *p == ',';
  long *v = calloc((size_t)cap, sizeof *v);
  if (!v) return VERR("out of memory");
  char *copy = strdup(s), *save = NULL;
  int k = 0;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    vstatus st = cli_size(opt, tok, &v[k]);
    if (st) { free(v); free(copy); return st; }
    k++;
  }
  free(copy);
  if (k == 0) { free(v); return VERR("option %s: empty list", opt); }
  *out = v;
  *n = k;
  return V_OK;
}

void cli_print_error(const char *cmd) {
  fprintf(stderr, "vouch%s%s: error: %s", cmd ? " " : "", cmd ? cmd : "", verr_msg());
  if (getenv("VOUCH_DEBUG")) fprintf(stderr, " [%s]", verr_where());
  fputc('\n', stderr);
}

bool cli_is_tty(int fd) { return isatty(fd) != 0; }


vstatus cli_mkdirs(const char *dir) {
  char buf[1024];
  if (strlen(dir) >= sizeof buf) return VERR("%s: path too long", dir);
  snprintf(buf, sizeof buf, "%s", dir);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return VERR("%s: cannot create directory: %s", buf, strerror(errno));
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST) return VERR("%s: cannot create directory: %s", buf, strerror(errno));
  return V_OK;
}
