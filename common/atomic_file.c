#define _GNU_SOURCE
/* Files written whole or not at all (common/atomic_file.h). */
#include "common/atomic_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* All n bytes of data to fd (write may take fewer, or be interrupted); false with errno set. */
static bool write_all(int fd, const char *data, size_t n) {
  while (n) {
    const ssize_t k = write(fd, data, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      if (k == 0) errno = EIO;
      return false;
    }
    data += k;
    n -= (size_t)k;
  }
  return true;
}

/* A target that is not a regular file (a terminal, /dev/stdout, a pipe) is a stream: written through
 * in place, since a rename would replace the device node or FIFO with a file. */
static vstatus write_stream(const char *path, const void *a, size_t na, const void *b, size_t nb) {
  const int fd = open(path, O_WRONLY);
  if (fd < 0) return VERR("%s: cannot open: %s", path, strerror(errno));
  bool ok = write_all(fd, a, na) && write_all(fd, b, nb);
  int err = errno;
  if (close(fd) != 0 && ok) ok = false, err = errno;
  return ok ? V_OK : VERR("%s: cannot write: %s", path, strerror(err));
}

/* The umask, read once: reading it means setting it, and another thread creating a file in
 * between would get umask 0. */
static mode_t process_umask(void) {
  static mode_t um;
  static bool read;
  if (!read) {
    um = umask(0);
    umask(um);
    read = true;
  }
  return um;
}

/* vfile_write_atomic of the bytes a[0..na) followed by b[0..nb). */
static vstatus write_parts(const char *path_in, const void *a, size_t na, const void *b, size_t nb, mode_t mode) {
  struct stat sb;
  if (stat(path_in, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) return write_stream(path_in, a, na, b, nb);
  /* through a symbolic link: the file it names is replaced (beside it), the link stays */
  char *real = lstat(path_in, &sb) == 0 && S_ISLNK(sb.st_mode) ? realpath(path_in, NULL) : NULL;
  const char *path = real ? real : path_in;
  mode &= ~process_umask(); /* the permissions a plain open(2) would give */
  const size_t len = strlen(path);
  char *tmp = malloc(len + 16);
  if (!tmp) { free(real); return VERR("%s: out of memory", path_in); }
  /* mkstemp: a name no other writer (another process, an earlier crash's leftover) holds */
  snprintf(tmp, len + 16, "%s.tmpXXXXXX", path);
  const int fd = mkstemp(tmp);
  if (fd < 0) {
    vstatus s = VERR("%s: cannot create a temporary file beside it: %s", path_in, strerror(errno));
    free(tmp);
    free(real);
    return s;
  }
  const char *what = "cannot write";
  bool ok = write_all(fd, a, na) && write_all(fd, b, nb);
  if (ok && fchmod(fd, mode) != 0) {
    ok = false;
    what = "cannot set its permissions";
  }
  int err = errno;
  if (close(fd) != 0 && ok) { /* close reports a write the file system deferred (NFS, quota) */
    ok = false;
    err = errno;
  }
  if (ok && rename(tmp, path) != 0) {
    ok = false;
    what = "cannot rename into place";
    err = errno;
  }
  vstatus s = ok ? V_OK : VERR("%s: %s: %s", path_in, what, strerror(err));
  if (!ok) unlink(tmp);
  free(tmp);
  free(real);
  return s;
}

vstatus vfile_write_atomic(const char *path, const void *data, size_t n, mode_t mode) {
  return write_parts(path, data, n, "", 0, mode);
}

vstatus vfile_write_text(const char *path, const char *text, bool newline, mode_t mode) {
  return write_parts(path, text, strlen(text), "\n", newline ? 1 : 0, mode);
}

vstatus vfile_write_json(const char *path, const cJSON *j, bool pretty) {
  char *txt = pretty ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
  if (!txt) return VERR("%s: out of memory serializing JSON", path);
  vstatus s = vfile_write_text(path, txt, true, 0644);
  free(txt);
  return s;
}
