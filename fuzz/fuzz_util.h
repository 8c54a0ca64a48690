/* Helpers shared by the libFuzzer targets: a scratch folder per process (removed at exit),
 * writing an input to a file there (most parsers read files), NUL-terminated copies. */
#ifndef VOUCH_FUZZ_UTIL_H
#define VOUCH_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* The scratch folder (created on the first call; aborts if it cannot be). */
const char *fz_dir(void);
/* fz_dir()/rel in a static buffer (the same buffer on every call). */
const char *fz_path(const char *rel);
/* Writes n bytes to fz_dir()/rel (parents must exist); returns its path (static buffer). */
const char *fz_write(const char *rel, const uint8_t *data, size_t n);
/* Creates fz_dir()/rel as a folder (and its parents). */
void fz_mkdir(const char *rel);
/* Path of a file of the source tree (FZ_SRC_DIR, set by CMake; env VOUCH_SRC overrides). */
const char *fz_source(const char *rel);
/* Copies the file at `src` to fz_dir()/rel (aborts when it cannot be read). */
void fz_copy(const char *rel, const char *src);
/* A NUL-terminated copy of the input (caller frees). */
char *fz_cstr(const uint8_t *data, size_t n);
/* Aborts (a finding) with a message when cond is false: the target's own property checks. */
void fz_assert(int cond, const char *what);

#endif
