/* Helpers of the libFuzzer targets (fuzz/fuzz_util.h). */
#define _GNU_SOURCE
#include "fuzz/fuzz_util.h"

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[PATH_MAX];
static char g_path[PATH_MAX + 256];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb; (void)flag; (void)ftw;
  return remove(p);
}

static void cleanup(void) {
  if (g_dir[0]) nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fz_dir(void) {
  if (!g_dir[0]) {
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/vouch-fuzz-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_dir)) {
      perror("fuzz: mkdtemp");
      abort();
    }
    atexit(cleanup);
  }
  return g_dir;
}

const char *fz_path(const char *rel) {
  snprintf(g_path, sizeof g_path, "%s/%s", fz_dir(), rel);
  return g_path;
}

const char *fz_write(const char *rel, const uint8_t *data, size_t n) {
  const char *p = fz_path(rel);
  FILE *f = fopen(p, "wb");
  if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
    perror(p);
    abort();
  }
  return p;
}

void fz_mkdir(const char *rel) {
  char p[PATH_MAX + 256];
  snprintf(p, sizeof p, "%s/%s", fz_dir(), rel);
  for (char *s = p + strlen(fz_dir()) + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    mkdir(p, 0755);
    *s = '/';
  }
  mkdir(p, 0755);
}

const char *fz_source(const char *rel) {
  static char p[PATH_MAX + 256];
  const char *src = getenv("VOUCH_SRC");
#ifndef FZ_SRC_DIR
#define FZ_SRC_DIR "."
#endif
  snprintf(p, sizeof p, "%s/%s", src && *src ? src : FZ_SRC_DIR, rel);
  return p;
}

void fz_copy(const char *rel, const char *src) {
  FILE *f = fopen(src, "rb");
  if (!f) {
    perror(src);
    abort();
  }
  static uint8_t buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  fz_write(rel, buf, n);
}

char *fz_cstr(const uint8_t *data, size_t n) {
  char *s = malloc(n + 1);
  if (!s) abort();
  if (n) memcpy(s, data, n);
  s[n] = 0;
  return s;
}

void fz_assert(int cond, const char *what) {
  if (cond) return;
  fprintf(stderr, "fuzz: property violated: %s\n", what);
  abort();
}
