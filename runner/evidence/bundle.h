/* Result bundles: NAME.vouch.tar.gz made deterministically from a result directory
 * (same directory -> same bytes), and the reverse: materializing a bundle or a
 * directory for verify/compare/report/publish.
 *
 * Archive: pax-restricted tar (plain ustar unless a name is too long), gzip without a
 * timestamp or name; every member under NAME/; SHA256SUMS first, then the files in
 * byte order of their paths; mtime 0, uid/gid 0, no owner names, mode 0644 or 0755. */
#ifndef VOUCH_RUNNER_EVIDENCE_BUNDLE_H
#define VOUCH_RUNNER_EVIDENCE_BUNDLE_H

#include <limits.h>
#include <stdbool.h>

#include <cjson/cJSON.h>

#include "common/vstatus.h"
#include "suites/engine/record.h"

/* Sorted list of the regular files under dir, relative paths (e.g. "traces/0001.json"),
 * leaving out SHA256SUMS. Fails on symlinks, special files or leftovers of an open store
 * (results.sqlite-journal/-wal). Caller frees each and the array. */
vstatus bundle_list_files(const char *dir, char ***files, int *n);
/* "HASH  path\n" lines for the files, in list order (caller frees). */
vstatus bundle_sha256sums(const char *dir, char **files, int n, char **text);
/* Writes the bundle of dir to out_path (NULL: "<dir>.vouch.tar.gz" next to dir; the
 * chosen path goes to out_used when not NULL). */
vstatus bundle_write(const char *dir, const char *out_path, char *out_used, size_t cap);
/* What `vouch bundle DIR [--out FILE]` does, for it and for `vouch run`: bundle_write(dir, out_path),
 * the bundle's path into used[cap] and its sha256 into hex, then the bundle noted in this machine's
 * history store (history_note_bundle; a store that cannot be written is ignored). Error: the
 * bundle could not be written or hashed. */
vstatus bundle_pack(const char *dir, const char *out_path, char *used, size_t cap, char hex[65]);

/* A bundle or directory opened for reading. */
typedef struct {
  char dir[PATH_MAX + 512]; /* directory with manifest.json etc. (inside tmp for a bundle) */
  char tmp[PATH_MAX];   /* extraction root to remove, "" when the input was a directory */
  bool is_bundle;       /* the input was a .tar.gz */
} vbundle;

/* A directory is used in place; a file is extracted (safely: one top directory, no
 * absolute or ".." names, regular files only) into a temporary directory. */
vstatus bundle_materialize(const char *path, vbundle *b);
void bundle_release(vbundle *b);

/* Loaded results: manifest.json, results.json and its records, parsed. */
typedef struct {
  vbundle src;          /* where the files are */
  cJSON *manifest;      /* manifest.json */
  cJSON *results;       /* results.json */
  vrecord **recs;       /* [n] records of results.json */
  int n;
} vresults;

vstatus bundle_load(const char *path, vresults *r);
void bundle_unload(vresults *r);

#endif
