#define _GNU_SOURCE
#include "runner/evidence/bundle.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "common/read_file.h"
#include "runner/evidence/history.h"
#include "runner/evidence/rundir.h"
#include "runner/evidence/sha256.h"
#include "runner/evidence/store.h"

typedef struct {
  char **v;   /* [n] relative paths */
  int n, cap;
} strlist;

static vstatus sl_push(strlist *l, const char *s) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 32;
    char **v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) return VERR("bundle: out of memory listing files");
    l->v = v;
    l->cap = cap;
  }
  if (!(l->v[l->n] = strdup(s))) return VERR("bundle: out of memory listing files");
  l->n++;
  return V_OK;
}

static void sl_free(char **v, int n) {
  for (int i = 0; i < n; i++) free(v[i]);
  free(v);
}

static bool ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

static vstatus walk(const char *root, const char *rel, strlist *out, int depth) {
  if (depth > 16) return VERR("%s/%s: directories nested too deep", root, rel);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s%s%s", root, rel[0] ? "/" : "", rel);
  DIR *d = opendir(path);
  if (!d) return VERR("%s: cannot list: %s", path, strerror(errno));
  struct dirent *e;
  vstatus s = V_OK;
  while (s == V_OK && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char r2[PATH_MAX], full[PATH_MAX * 2];
    snprintf(r2, sizeof r2, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
    snprintf(full, sizeof full, "%s/%s", root, r2);
    struct stat st;
    if (lstat(full, &st) != 0) { s = VERR("%s: cannot stat: %s", full, strerror(errno)); break; }
    if (S_ISDIR(st.st_mode)) {
      s = walk(root, r2, out, depth + 1);
    } else if (S_ISREG(st.st_mode)) {
      if (!strcmp(r2, "SHA256SUMS")) continue;
      if (ends_with(r2, "-journal") || ends_with(r2, "-wal") || ends_with(r2, "-shm"))
        s = VERR("%s: the run's store is still open (a run in progress?); bundle after it ends", full);
      else
        s = sl_push(out, r2);
    } else {
      s = VERR("%s: not a regular file or directory (symlinks are not bundled)", full);
    }
  }
  closedir(d);
  return s;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

vstatus bundle_list_files(const char *dir, char ***files, int *n) {
  strlist l = {0};
  vstatus s = walk(dir, "", &l, 0);
  if (s) { sl_free(l.v, l.n); return s; }
  if (l.n > 1) qsort(l.v, (size_t)l.n, sizeof *l.v, cmp_str); /* l.v is NULL when the folder is empty */
  *files = l.v;
  *n = l.n;
  return V_OK;
}

vstatus bundle_sha256sums(const char *dir, char **files, int n, char **text) {
  size_t cap = 256, len = 0;
  char *t = malloc(cap);
  if (!t) return VERR("bundle: out of memory");
  t[0] = 0;
  for (int i = 0; i < n; i++) {
    char path[PATH_MAX * 2], hex[65];
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    vstatus s = sha256_file_hex(path, hex);
    if (s) { free(t); return s; }
    size_t need = len + 64 + 2 + strlen(files[i]) + 2;
    if (need > cap) {
      cap = need * 2;
      char *t2 = realloc(t, cap);
      if (!t2) { free(t); return VERR("bundle: out of memory"); }
      t = t2;
    }
    len += (size_t)sprintf(t + len, "%s  %s\n", hex, files[i]);
  }
  *text = t;
  return V_OK;
}

#define ARCHERR(a, what) VERR("%s: %s: %s", out, what, archive_error_string(a) ? archive_error_string(a) : "?")

static vstatus add_entry(struct archive *a, const char *out, const char *name, const void *data, size_t len, int mode) {
  struct archive_entry *e = archive_entry_new();
  if (!e) return VERR("%s: out of memory", out);
  archive_entry_set_pathname(e, name);
  archive_entry_set_size(e, (la_int64_t)len);
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, (mode_t)mode);
  archive_entry_set_mtime(e, 0, 0);
  archive_entry_set_uid(e, 0);
  archive_entry_set_gid(e, 0);
  archive_entry_set_uname(e, "");
  archive_entry_set_gname(e, "");
  vstatus s = V_OK;
  if (archive_write_header(a, e) != ARCHIVE_OK) s = ARCHERR(a, name);
  else if (len && archive_write_data(a, data, len) != (la_ssize_t)len) s = ARCHERR(a, name);
  archive_entry_free(e);
  return s;
}

static void base_name(const char *dir, char *out, size_t cap) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", dir);
  size_t n = strlen(tmp);
  while (n > 1 && tmp[n - 1] == '/') tmp[--n] = 0;
  const char *b = strrchr(tmp, '/');
  /* one path component (at most NAME_MAX bytes): a longer one is cut, still terminated */
  int w = snprintf(out, cap, "%s", b ? b + 1 : tmp);
  if (w < 0 || (size_t)w >= cap) out[cap - 1] = 0;
}

vstatus bundle_write(const char *dir, const char *out_path, char *out_used, size_t cap) {
  char dirn[PATH_MAX];
  snprintf(dirn, sizeof dirn, "%s", dir);
  size_t dl = strlen(dirn);
  while (dl > 1 && dirn[dl - 1] == '/') dirn[--dl] = 0;
  char mpath[PATH_MAX + 32];
  snprintf(mpath, sizeof mpath, "%s/manifest.json", dirn);
  if (access(mpath, R_OK) != 0) return VERR("%s: not a result directory (no manifest.json)", dirn);
  /* a crashed run is closed as incomplete before it is packed */
  snprintf(mpath, sizeof mpath, "%s/results.sqlite", dirn);
  if (access(mpath, R_OK) == 0) {
    vstore st;
    VTRY(store_open(&st, mpath, true));
    char *state = NULL;
    vstatus s = store_meta_get(&st, "state", &state);
    store_close(&st);
    if (s) return s;
    bool running = state && !strcmp(state, "running");
    free(state);
    if (running) {
      fprintf(stderr, "vouch: %s: the run did not finish; marking it incomplete\n", dirn);
      VTRY(rec_repair_dir(dirn));
    }
  }
  char name[256], outp[PATH_MAX + 300];
  base_name(dirn, name, sizeof name);
  if (out_path) snprintf(outp, sizeof outp, "%s", out_path);
  else snprintf(outp, sizeof outp, "%s.vouch.tar.gz", dirn);
  const char *out = outp;

  char **files = NULL;
  int n = 0;
  VTRY(bundle_list_files(dirn, &files, &n));
  char *sums = NULL;
  vstatus s = bundle_sha256sums(dirn, files, n, &sums);
  if (s) { sl_free(files, n); return s; }

  char tmp[PATH_MAX + 400];
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", outp, (long)getpid());
  struct archive *a = archive_write_new();
  if (!a) { free(sums); sl_free(files, n); return VERR("%s: out of memory", out); }
  if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK || archive_write_add_filter_gzip(a) != ARCHIVE_OK ||
      archive_write_set_filter_option(a, "gzip", "timestamp", NULL) != ARCHIVE_OK ||
      archive_write_open_filename(a, tmp) != ARCHIVE_OK) {
    s = ARCHERR(a, "cannot create archive");
    goto done;
  }
  char ename[PATH_MAX + 300];
  snprintf(ename, sizeof ename, "%s/SHA256SUMS", name);
  if ((s = add_entry(a, out, ename, sums, strlen(sums), 0644))) goto done;
  for (int i = 0; i < n; i++) {
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/%s", dirn, files[i]);
    struct stat st;
    char *data = NULL;
    size_t len = 0;
    if (stat(path, &st) != 0) { s = VERR("%s: cannot stat: %s", path, strerror(errno)); goto done; }
    if ((s = vfile_read(path, &data, &len))) goto done;
    snprintf(ename, sizeof ename, "%s/%s", name, files[i]);
    s = add_entry(a, out, ename, data, len, (st.st_mode & S_IXUSR) ? 0755 : 0644);
    free(data);
    if (s) goto done;
  }
  if (archive_write_close(a) != ARCHIVE_OK) { s = ARCHERR(a, "cannot finish archive"); goto done; }
done:
  archive_write_free(a);
  free(sums);
  sl_free(files, n);
  if (s) { unlink(tmp); return s; }
  if (rename(tmp, outp) != 0) {
    unlink(tmp);
    return VERR("%s: cannot rename into place: %s", outp, strerror(errno));
  }
  if (out_used) snprintf(out_used, cap, "%s", outp);
  return V_OK;
}

vstatus bundle_pack(const char *dir, const char *out_path, char *used, size_t cap, char hex[65]) {
  VTRY(bundle_write(dir, out_path, used, cap));
  VTRY(sha256_file_hex(used, hex));
  char absdir[PATH_MAX], absout[PATH_MAX];
  if (realpath(dir, absdir) && realpath(used, absout)) history_note_bundle(NULL, absdir, absout), verr_clear();
  return V_OK;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb; (void)flag; (void)ftw;
  return remove(p);
}

void bundle_release(vbundle *b) {
  if (b->tmp[0]) nftw(b->tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  b->tmp[0] = 0;
}

/* Accepts "TOP/rel/path" with a single top directory; rejects anything else. */
static vstatus safe_name(const char *bundle, const char *name, char *top, size_t topcap) {
  if (!name[0] || name[0] == '/') return VERR("%s: member '%s': absolute or empty name", bundle, name);
  const char *slash = strchr(name, '/');
  if (!slash || !slash[1]) return VERR("%s: member '%s': outside the bundle's top directory", bundle, name);
  if (!top[0]) snprintf(top, topcap, "%.*s", (int)(slash - name), name);
  else if (strncmp(name, top, strlen(top)) || name[strlen(top)] != '/')
    return VERR("%s: member '%s': not under the top directory '%s'", bundle, name, top);
  for (const char *p = name; *p;) {
    const char *q = strchr(p, '/');
    size_t l = q ? (size_t)(q - p) : strlen(p);
    if ((l == 2 && !strncmp(p, "..", 2)) || (l == 1 && p[0] == '.') || l == 0)
      return VERR("%s: member '%s': '.', '..' or empty path component", bundle, name);
    p = q ? q + 1 : p + l;
  }
  return V_OK;
}

static vstatus mkparents(const char *path) {
  char tmp[PATH_MAX * 2];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return VERR("%s: cannot create: %s", tmp, strerror(errno));
    *p = '/';
  }
  return V_OK;
}

vstatus bundle_materialize(const char *path, vbundle *b) {
  memset(b, 0, sizeof *b);
  struct stat st;
  if (stat(path, &st) != 0) return VERR("%s: cannot open: %s", path, strerror(errno));
  if (S_ISDIR(st.st_mode)) {
    snprintf(b->dir, sizeof b->dir, "%s", path);
    return V_OK;
  }
  const char *tbase = getenv("TMPDIR");
  snprintf(b->tmp, sizeof b->tmp, "%s/vouch-bundle-XXXXXX", tbase && *tbase ? tbase : "/tmp");
  if (!mkdtemp(b->tmp)) { b->tmp[0] = 0; return VERR("%s: cannot create a temporary directory: %s", path, strerror(errno)); }
  b->is_bundle = true;
  struct archive *a = archive_read_new();
  archive_read_support_filter_all(a);
  archive_read_support_format_tar(a);
  vstatus s = V_OK;
  char top[256] = "";
  if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
    s = VERR("%s: not a readable bundle: %s", path, archive_error_string(a));
    goto done;
  }
  struct archive_entry *e;
  int rc, members = 0;
  while ((rc = archive_read_next_header(a, &e)) == ARCHIVE_OK || rc == ARCHIVE_WARN) {
    /* a warning (a name that is not valid in the locale's charset, ...) stops the read: an
     * error naming the member, not a silent end of the archive */
    if (rc == ARCHIVE_WARN) {
      s = VERR("%s: member %d: %s", path, members + 1, archive_error_string(a) ? archive_error_string(a) : "unreadable header");
      goto done;
    }
    const char *name = archive_entry_pathname(e);
    if (!name) { s = VERR("%s: member without a name", path); goto done; }
    if (archive_entry_filetype(e) == AE_IFDIR) continue;
    if (archive_entry_filetype(e) != AE_IFREG) { s = VERR("%s: member '%s': not a regular file", path, name); goto done; }
    if ((s = safe_name(path, name, top, sizeof top))) goto done;
    char dst[PATH_MAX * 2];
    snprintf(dst, sizeof dst, "%s/%s", b->tmp, name);
    if ((s = mkparents(dst))) goto done;
    if (access(dst, F_OK) == 0) { s = VERR("%s: member '%s': appears twice", path, name); goto done; }
    FILE *f = fopen(dst, "wb");
    if (!f) { s = VERR("%s: cannot write: %s", dst, strerror(errno)); goto done; }
    const void *buf;
    size_t size;
    la_int64_t off;
    int r;
    while ((r = archive_read_data_block(a, &buf, &size, &off)) == ARCHIVE_OK)
      if (fwrite(buf, 1, size, f) != size) { r = ARCHIVE_FATAL; break; }
    fclose(f);
    if (r != ARCHIVE_EOF) { s = VERR("%s: member '%s': corrupt data: %s", path, name, archive_error_string(a)); goto done; }
    chmod(dst, (archive_entry_perm(e) & 0100) ? 0755 : 0644);
    members++;
  }
  if (rc != ARCHIVE_EOF) { s = VERR("%s: corrupt archive: %s", path, archive_error_string(a)); goto done; }
  if (!members) { s = VERR("%s: empty bundle", path); goto done; }
  snprintf(b->dir, sizeof b->dir, "%s/%s", b->tmp, top);
done:
  archive_read_free(a);
  if (s) bundle_release(b);
  return s;
}

static vstatus load_json(const char *dir, const char *name, cJSON **out) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *txt;
  VTRY(vfile_read(path, &txt, NULL));
  *out = cJSON_Parse(txt);
  free(txt);
  if (!*out) return VERR("%s: not valid JSON", name);
  return V_OK;
}

vstatus bundle_load(const char *path, vresults *r) {
  memset(r, 0, sizeof *r);
  VTRY(bundle_materialize(path, &r->src));
  vstatus s = load_json(r->src.dir, "manifest.json", &r->manifest);
  if (s == V_OK) s = load_json(r->src.dir, "results.json", &r->results);
  if (s) { verr_prefix("%s", path); bundle_unload(r); return s; }
  const cJSON *recs = cJSON_GetObjectItemCaseSensitive(r->results, "records");
  if (!cJSON_IsArray(recs)) { bundle_unload(r); return VERR("%s: results.json: field 'records': missing or not an array", path); }
  int n = cJSON_GetArraySize(recs);
  r->recs = vcalloc((size_t)(n ? n : 1), sizeof *r->recs, "records");
  if (!r->recs) { bundle_unload(r); return V_ERR; }
  const cJSON *e;
  cJSON_ArrayForEach(e, recs) {
    char where[128];
    snprintf(where, sizeof where, "results.json: records[%d]", r->n);
    if ((s = rec_from_json(e, where, &r->recs[r->n]))) { verr_prefix("%s", path); bundle_unload(r); return s; }
    r->n++;
  }
  return V_OK;
}

void bundle_unload(vresults *r) {
  for (int i = 0; i < r->n; i++) rec_free(r->recs[i]);
  free(r->recs);
  cJSON_Delete(r->manifest);
  cJSON_Delete(r->results);
  bundle_release(&r->src);
  memset(r, 0, sizeof *r);
}
