/* Whole files into memory (common/read_file.h). */
#include "common/read_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vstatus vfile_read(const char *path, char **data, size_t *len) {
  *data = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return VERR("%s: cannot open: %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0, r;
  char *b = malloc(cap);
  while (b && (r = fread(b + n, 1, cap - n - 1, f)) > 0) {
    n += r;
    if (n + 1 == cap) {
      char *b2 = realloc(b, cap * 2);
      if (!b2) { free(b); b = NULL; break; }
      b = b2;
      cap *= 2;
    }
  }
  int err = ferror(f);
  fclose(f);
  if (!b) return VERR("%s: out of memory reading", path);
  if (err) { free(b); return VERR("%s: read error", path); }
  b[n] = 0;
  *data = b;
  if (len) *len = n;
  return V_OK;
}
