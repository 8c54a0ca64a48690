/* safetensors read (mmap, single file or sharded index) and write (tmp + fsync + rename).
 *
 * File layout: u64 little-endian header length N, N bytes of JSON header (an object of
 * name -> {"dtype", "shape", "data_offsets": [begin, end]} plus an optional
 * "__metadata__" string map), then the data section; offsets are relative to it.
 * Every structural defect is reported as one line naming the file and the tensor or
 * header field. Opened tensors are kept sorted by name (st_find is a binary search). */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif
#ifndef _FILE_OFFSET_BITS
#define _FILE_OFFSET_BITS 64
#endif

#include "model/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_HEADER_BYTES (100ull * 1000 * 1000) /* larger header lengths are corrupt */
#define MAX_NAME_LEN 127                        /* fits vtensor.name */
#define MAX_JSON_INT 9007199254740992.0         /* 2^53: exact in a double */
#define WRITE_CHUNK ((size_t)64 << 20)          /* bytes per write() call */
#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"

struct st_file {
  char path[1024];   /* as opened */
  unsigned char *map; /* [size] read-only mapping of the whole file */
  size_t size;       /* file size in bytes */
};

/* A tensor while a set is being built: which file it came from (for error messages). */
typedef struct {
  vtensor t;  /* the tensor, data pointing into its file's mapping */
  int file;   /* index into st_set.files */
} entry;

typedef struct {
  entry *v;   /* [n] */
  int n, cap; /* used, allocated */
} entry_list;

/* ---------------------------------------------------------------- small helpers */

static vstatus join_path(char *out, size_t cap, const char *dir, const char *name) {
  int w = snprintf(out, cap, "%s/%s", dir, name);
  if (w < 0 || (size_t)w >= cap) return VERR("%s/%s: path too long (max %zu bytes)", dir, name, cap - 1);
  return V_OK;
}

static void dir_of(char *out, size_t cap, const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) {
    snprintf(out, cap, ".");
  } else if (slash == path) {
    snprintf(out, cap, "/");
  } else {
    snprintf(out, cap, "%.*s", (int)(slash - path), path);
  }
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A JSON number that is a non-negative integer exactly representable in a double. */
static bool json_uint(const cJSON *j, int64_t *out) {
  if (!cJSON_IsNumber(j)) return false;
  double d = j->valuedouble;
  if (!(d >= 0.0) || d > MAX_JSON_INT || d != floor(d)) return false;
  *out = (int64_t)d;
  return true;
}

static vstatus entries_push(entry_list *l, const entry *e, const char *path) {
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 64;
    entry *v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) return VERR("%s: out of memory for %d tensor entries", path, cap);
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = *e;
  return V_OK;
}

/* ---------------------------------------------------------------- reading one file */

typedef struct {
  int64_t begin, end; /* byte range in the data section */
  const char *name;   /* tensor name (points into the cJSON tree) */
} range;

static int range_cmp(const void *a, const void *b) {
  const range *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* Validates one header entry `j` named `name` and fills `t`. data_size: bytes in the
 * data section. */
static vstatus parse_entry(const char *path, const char *name, const cJSON *j, int64_t data_size,
                           const unsigned char *data, vtensor *t, range *r) {
  if (strlen(name) == 0) return VERR("%s: tensor '': empty tensor name in header", path);
  if (strlen(name) > MAX_NAME_LEN)
    return VERR("%s: tensor '%.40s...': name is %zu characters, at most %d supported", path, name,
                strlen(name), MAX_NAME_LEN);
  if (!cJSON_IsObject(j)) return VERR("%s: tensor '%s': header entry is not a JSON object", path, name);
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);

  const cJSON *jd = cJSON_GetObjectItemCaseSensitive(j, "dtype");
  if (!jd) return VERR("%s: tensor '%s': field 'dtype' is missing", path, name);
  if (!cJSON_IsString(jd)) return VERR("%s: tensor '%s': field 'dtype' is not a string", path, name);
  int dt = vdtype_from_name(jd->valuestring);
  if (dt < 0)
    return VERR("%s: tensor '%s': field 'dtype': unknown or unsupported dtype \"%s\" "
                "(supported: F32 F16 BF16 I32 I64 U8)", path, name, jd->valuestring);
  t->dtype = (vdtype)dt;

  const cJSON *js = cJSON_GetObjectItemCaseSensitive(j, "shape");
  if (!js) return VERR("%s: tensor '%s': field 'shape' is missing", path, name);
  if (!cJSON_IsArray(js)) return VERR("%s: tensor '%s': field 'shape' is not an array", path, name);
  int ndim = cJSON_GetArraySize(js);
  if (ndim > TENSOR_MAX_DIMS)
    return VERR("%s: tensor '%s': field 'shape' has %d dimensions, at most %d supported", path, name,
                ndim, TENSOR_MAX_DIMS);
  t->ndim = ndim;
  int64_t numel = 1;
  bool overflow = false;
  for (int d = 0; d < ndim; d++) {
    int64_t v;
    if (!json_uint(cJSON_GetArrayItem(js, d), &v))
      return VERR("%s: tensor '%s': field 'shape'[%d] is not a non-negative integer", path, name, d);
    t->shape[d] = v;
    if (v != 0 && numel > INT64_MAX / 8 / v) overflow = true;
    else numel *= v;
  }
  if (overflow)
    return VERR("%s: tensor '%s': field 'shape' has too many elements (overflows 64 bits)", path, name);

  const cJSON *jo = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
  if (!jo) return VERR("%s: tensor '%s': field 'data_offsets' is missing", path, name);
  if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2)
    return VERR("%s: tensor '%s': field 'data_offsets' is not an array of 2 integers", path, name);
  int64_t begin, end;
  if (!json_uint(cJSON_GetArrayItem(jo, 0), &begin) || !json_uint(cJSON_GetArrayItem(jo, 1), &end))
    return VERR("%s: tensor '%s': field 'data_offsets' is not an array of 2 non-negative integers",
                path, name);
  if (end < begin)
    return VERR("%s: tensor '%s': field 'data_offsets' [%lld, %lld]: end is before begin", path, name,
                (long long)begin, (long long)end);
  if (end > data_size)
    return VERR("%s: tensor '%s': field 'data_offsets' [%lld, %lld]: end is past the data section "
                "(%lld bytes; file truncated?)", path, name, (long long)begin, (long long)end,
                (long long)data_size);
  int64_t need = numel * (int64_t)vdtype_size(t->dtype);
  if (end - begin != need)
    return VERR("%s: tensor '%s': field 'data_offsets' spans %lld bytes but 'shape' of %lld %s "
                "elements needs %lld bytes", path, name, (long long)(end - begin),
                (long long)numel, vdtype_name(t->dtype), (long long)need);
  t->data = (void *)(data + begin);
  t->owned = false;
  r->begin = begin;
  r->end = end;
  r->name = name;
  return V_OK;
}

static vstatus check_metadata(const char *path, const cJSON *j) {
  if (!cJSON_IsObject(j)) return VERR("%s: field '__metadata__' is not a JSON object", path);
  const cJSON *c;
  cJSON_ArrayForEach(c, j) {
    if (!cJSON_IsString(c))
      return VERR("%s: field '__metadata__'.'%s': value is not a string", path, c->string);
  }
  return V_OK;
}

/* Parses the header of mapped file f (index fi of the set) and appends its tensors. */
static vstatus parse_header(const st_file *f, int fi, entry_list *out) {
  const char *path = f->path;
  uint64_t hlen = 0;
  for (int b = 7; b >= 0; b--) hlen = (hlen << 8) | f->map[b];
  /* the value is not printed: for a file that is not safetensors it is 8 bytes of its content */
  if (hlen > MAX_HEADER_BYTES)
    return VERR("%s: field 'header length': over the limit of %llu bytes (not a safetensors file?)",
                path, (unsigned long long)MAX_HEADER_BYTES);
  if (hlen > f->size - 8)
    return VERR("%s: field 'header length': runs past the end of the file (%zu bytes; truncated?)", path,
                f->size);
  if (hlen == 0) return VERR("%s: field 'header': empty header (length 0)", path);
  const char *hdr = (const char *)f->map + 8;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)hlen, &end, 0);
  if (!root) {
    long off = (end && end >= hdr && end <= hdr + hlen) ? (long)(end - hdr) : -1;
    return VERR("%s: field 'header': not valid JSON (error near header byte %ld)", path, off);
  }
  vstatus s = V_OK;
  range *ranges = NULL;
  for (const char *p = end; p && p < hdr + hlen; p++) {
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
      s = VERR("%s: field 'header': unexpected data after the JSON object at header byte %ld", path,
               (long)(p - hdr));
      goto done;
    }
  }
  if (!cJSON_IsObject(root)) {
    s = VERR("%s: field 'header': JSON is not an object", path);
    goto done;
  }
  int64_t data_size = (int64_t)(f->size - 8 - hlen);
  const unsigned char *data = f->map + 8 + hlen;
  int n = cJSON_GetArraySize(root);
  ranges = calloc((size_t)(n ? n : 1), sizeof *ranges);
  if (!ranges) {
    s = VERR("%s: out of memory for %d header entries", path, n);
    goto done;
  }
  int nr = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, root) {
    if (strcmp(c->string, "__metadata__") == 0) {
      if ((s = check_metadata(path, c)) != V_OK) goto done;
      continue;
    }
    entry e = {.file = fi};
    if ((s = parse_entry(path, c->string, c, data_size, data, &e.t, &ranges[nr])) != V_OK) goto done;
    nr++;
    if ((s = entries_push(out, &e, path)) != V_OK) goto done;
  }
  qsort(ranges, (size_t)nr, sizeof *ranges, range_cmp);
  for (int i = 1; i < nr; i++) {
    if (ranges[i].begin < ranges[i - 1].end) {
      s = VERR("%s: tensor '%s': field 'data_offsets' [%lld, %lld] overlaps tensor '%s' [%lld, %lld]",
               path, ranges[i].name, (long long)ranges[i].begin, (long long)ranges[i].end,
               ranges[i - 1].name, (long long)ranges[i - 1].begin, (long long)ranges[i - 1].end);
      goto done;
    }
  }
done:
  free(ranges);
  cJSON_Delete(root);
  return s;
}

/* Maps `path` as file number fi of the set and appends its tensors to `out`. */
static vstatus open_file(st_set *set, const char *path, entry_list *out) {
  st_file *f = calloc(1, sizeof *f);
  if (!f) return VERR("%s: out of memory", path);
  st_file **files = realloc(set->files, (size_t)(set->n_files + 1) * sizeof *files);
  if (!files) {
    free(f);
    return VERR("%s: out of memory", path);
  }
  set->files = files;
  set->files[set->n_files++] = f; /* owned by the set from here: st_close frees it */
  if (snprintf(f->path, sizeof f->path, "%s", path) >= (int)sizeof f->path)
    return VERR("%.200s...: path too long", path);

  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return VERR("%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return VERR("%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return VERR("%s: not a regular file", path);
  }
  if (st.st_size < 8) {
    close(fd);
    return VERR("%s: field 'header length': file is %lld bytes, shorter than the 8-byte header length "
                "(truncated?)", path, (long long)st.st_size);
  }
  f->size = (size_t)st.st_size;
  void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED) return VERR("%s: cannot mmap %zu bytes: %s", path, f->size, strerror(e));
  f->map = m;
  return parse_header(f, set->n_files - 1, out);
}

/* ---------------------------------------------------------------- confinement */

/* A shard name an index may give: a plain file name in the index's folder. */
static bool plain_file_name(const char *n) {
  size_t len = strlen(n);
  if (len == 0 || len > 255 || !strcmp(n, ".") || !strcmp(n, "..")) return false;
  for (const unsigned char *p = (const unsigned char *)n; *p; p++)
    if (*p == '/' || *p == '\\' || *p < 0x20 || *p == 0x7f) return false;
  return true;
}

/* True when real path `p` is `dir` itself or lies below it. */
static bool path_below(const char *p, const char *dir) {
  size_t n = strlen(dir);
  if (n == 1 && dir[0] == '/') return true;
  return strncmp(p, dir, n) == 0 && (p[n] == '/' || p[n] == 0);
}

/* A file of the checkpoint folder `dir` (named `shown` in errors, as field `field`) may be a
 * symbolic link only into the folder itself or into an HF cache's blobs (the folder is
 * <cache>/models--ORG--NAME/snapshots/REV, its files link to ../../blobs/HASH). */
static vstatus check_confined(const char *dir, const char *file, const char *where, const char *field) {
  struct stat st;
  if (lstat(file, &st) != 0 || !S_ISLNK(st.st_mode)) return V_OK;
  char real[PATH_MAX], rdir[PATH_MAX], blobs[PATH_MAX + 16], rblobs[PATH_MAX];
  if (!realpath(file, real)) return VERR("%s: %s: %s is a broken symbolic link", where, field, file);
  if (!realpath(dir, rdir)) return VERR("%s: %s: cannot resolve the folder %s: %s", where, field, dir, strerror(errno));
  if (path_below(real, rdir)) return V_OK;
  snprintf(blobs, sizeof blobs, "%s/../../blobs", rdir);
  if (realpath(blobs, rblobs) && path_below(real, rblobs)) {
    /* only a cache layout: the folder is .../snapshots/REV */
    const char *slash = strrchr(rdir, '/');
    if (slash && slash - rdir >= 10 && !strncmp(slash - 10, "/snapshots", 10)) return V_OK;
  }
  return VERR("%s: %s: %s is a symbolic link to a file outside the checkpoint folder (only links into "
              "the folder or an HF cache's blobs are followed)", where, field, file);
}

/* ---------------------------------------------------------------- index files */

static char *read_small_file(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    VERR("%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 65536;
      if (cap > MAX_HEADER_BYTES) {
        VERR("%s: file is larger than %llu bytes: not an index", path,
             (unsigned long long)MAX_HEADER_BYTES);
        goto fail;
      }
      char *nb = realloc(buf, cap);
      if (!nb) {
        VERR("%s: out of memory reading the file", path);
        goto fail;
      }
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n - 1, fp);
    n += r;
    if (r == 0) break;
  }
  if (ferror(fp)) {
    VERR("%s: read error", path);
    goto fail;
  }
  fclose(fp);
  buf[n] = 0;
  *len = n;
  return buf;
fail:
  fclose(fp);
  free(buf);
  return NULL;
}

/* Index of the open file `path`, -1 if none. *hint: the last hit (consecutive index
 * entries usually name the same shard), updated on a hit. */
static int file_index(const st_set *set, const char *path, int *hint) {
  if (*hint >= 0 && *hint < set->n_files && strcmp(set->files[*hint]->path, path) == 0) return *hint;
  for (int i = 0; i < set->n_files; i++)
    if (strcmp(set->files[i]->path, path) == 0) return *hint = i;
  return -1;
}

static int entry_cmp(const void *a, const void *b) {
  return strcmp(((const entry *)a)->t.name, ((const entry *)b)->t.name);
}

static const entry *find_entry(const entry_list *l, const char *name) {
  entry key;
  snprintf(key.t.name, sizeof key.t.name, "%s", name);
  return bsearch(&key, l->v, (size_t)l->n, sizeof *l->v, entry_cmp);
}

/* Opens every shard named in the index at `path`; checks each listed tensor is in
 * its shard. Leaves `out` sorted by name. */
static vstatus open_index(st_set *set, const char *path, entry_list *out) {
  size_t len = 0;
  char *text = read_small_file(path, &len);
  if (!text) return V_ERR;
  cJSON *root = cJSON_ParseWithLength(text, len);
  free(text);
  vstatus s = V_OK;
  if (!root) {
    s = VERR("%s: not valid JSON", path);
    goto done;
  }
  const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
  if (!cJSON_IsObject(root) || !wm) {
    s = VERR("%s: field 'weight_map' is missing", path);
    goto done;
  }
  if (!cJSON_IsObject(wm)) {
    s = VERR("%s: field 'weight_map' is not a JSON object", path);
    goto done;
  }
  const cJSON *c;
  char shard[1024];
  int hint = -1;
  /* pass 1: validate entries, open each distinct shard once (first-mention order) */
  cJSON_ArrayForEach(c, wm) {
    if (!cJSON_IsString(c)) {
      s = VERR("%s: field 'weight_map'.'%s': value is not a file name string", path, c->string);
      goto done;
    }
    if (!plain_file_name(c->valuestring)) {
      s = VERR("%s: field 'weight_map'.'%.200s': shard name is not a plain file name in the index's "
               "folder (no '/', '..' or control characters)", path, c->string);
      goto done;
    }
    if ((s = join_path(shard, sizeof shard, set->dir, c->valuestring)) != V_OK) goto done;
    if (file_index(set, shard, &hint) >= 0) continue;
    if (!is_file(shard)) {
      s = VERR("%s: field 'weight_map'.'%s': shard file %s does not exist", path, c->string, shard);
      goto done;
    }
    char field[300];
    snprintf(field, sizeof field, "field 'weight_map'.'%.200s'", c->string);
    if ((s = check_confined(set->dir, shard, path, field)) != V_OK) goto done;
    if ((s = open_file(set, shard, out)) != V_OK) goto done;
  }
  if (set->n_files == 0) {
    s = VERR("%s: field 'weight_map' is empty", path);
    goto done;
  }
  qsort(out->v, (size_t)out->n, sizeof *out->v, entry_cmp);
  /* pass 2: every listed tensor is in the shard the index names */
  cJSON_ArrayForEach(c, wm) {
    if ((s = join_path(shard, sizeof shard, set->dir, c->valuestring)) != V_OK) goto done;
    int fi = file_index(set, shard, &hint);
    const entry *e = strlen(c->string) <= MAX_NAME_LEN ? find_entry(out, c->string) : NULL;
    if (!e) {
      s = VERR("%s: field 'weight_map': tensor '%s' is absent from its shard %s", path, c->string, shard);
      goto done;
    }
    if (e->file != fi) {
      /* duplicates are reported by the caller; here the tensor lives in another shard */
      const entry *lo = e, *hi = e;
      while (lo > out->v && strcmp(lo[-1].t.name, e->t.name) == 0) lo--;
      while (hi + 1 < out->v + out->n && strcmp(hi[1].t.name, e->t.name) == 0) hi++;
      bool found = false;
      for (const entry *p = lo; p <= hi; p++) found = found || p->file == fi;
      if (!found) {
        s = VERR("%s: field 'weight_map': tensor '%s' is absent from its shard %s (it is in %s)", path,
                 c->string, shard, set->files[e->file]->path);
        goto done;
      }
    }
  }
done:
  cJSON_Delete(root);
  return s;
}

/* ---------------------------------------------------------------- open / close / find */

static vstatus open_any(st_set *set, const char *path, entry_list *l) {
  struct stat st;
  if (stat(path, &st) != 0) return VERR("%s: cannot open: %s", path, strerror(errno));
  char target[1024];
  if (S_ISDIR(st.st_mode)) {
    if (snprintf(set->dir, sizeof set->dir, "%s", path) >= (int)sizeof set->dir)
      return VERR("%.200s...: directory path too long", path);
    VTRY(join_path(target, sizeof target, path, INDEX_NAME));
    if (is_file(target)) return open_index(set, target, l);
    VTRY(join_path(target, sizeof target, path, SINGLE_NAME));
    if (is_file(target)) {
      VTRY(check_confined(path, target, path, "file " SINGLE_NAME));
      return open_file(set, target, l);
    }
    return VERR("%s: directory holds neither %s nor %s", path, INDEX_NAME, SINGLE_NAME);
  }
  dir_of(set->dir, sizeof set->dir, path);
  if (ends_with(path, ".json")) return open_index(set, path, l);
  return open_file(set, path, l);
}

vstatus st_open(st_set *set, const char *path) {
  memset(set, 0, sizeof *set);
  entry_list l = {0};
  vstatus s = open_any(set, path, &l);
  if (s == V_OK) {
    qsort(l.v, (size_t)l.n, sizeof *l.v, entry_cmp);
    for (int i = 1; i < l.n; i++) {
      if (strcmp(l.v[i].t.name, l.v[i - 1].t.name) == 0) {
        const char *a = set->files[l.v[i - 1].file]->path, *b = set->files[l.v[i].file]->path;
        s = VERR("%s: tensor '%s': duplicate name (also in %s)", b, l.v[i].t.name, a);
        break;
      }
    }
  }
  if (s == V_OK) {
    set->tensors = calloc((size_t)(l.n ? l.n : 1), sizeof *set->tensors);
    if (!set->tensors) s = VERR("%s: out of memory for %d tensors", path, l.n);
  }
  if (s != V_OK) {
    free(l.v);
    st_close(set);
    return s;
  }
  for (int i = 0; i < l.n; i++) set->tensors[i] = l.v[i].t;
  set->n_tensors = l.n;
  free(l.v);
  return V_OK;
}

void st_close(st_set *set) {
  if (!set) return;
  for (int i = 0; i < set->n_files; i++) {
    st_file *f = set->files[i];
    if (f->map) munmap(f->map, f->size);
    free(f);
  }
  free(set->files);
  free(set->tensors);
  memset(set, 0, sizeof *set);
}

static int name_cmp(const void *key, const void *t) {
  return strcmp((const char *)key, ((const vtensor *)t)->name);
}

const vtensor *st_find(const st_set *set, const char *name) {
  if (!set->tensors || set->n_tensors == 0) return NULL;
  return bsearch(name, set->tensors, (size_t)set->n_tensors, sizeof *set->tensors, name_cmp);
}

/* ---------------------------------------------------------------- writing */

/* A growable string for JSON text. */
typedef struct {
  char *s;       /* [cap] NUL-terminated */
  size_t n, cap; /* used (without NUL), allocated */
  bool oom;      /* an append failed */
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n + 1) cap *= 2;
    char *ns = realloc(b->s, cap);
    if (!ns) {
      b->oom = true;
      return;
    }
    b->s = ns;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_i64(sbuf *b, int64_t v) {
  char tmp[32];
  int w = snprintf(tmp, sizeof tmp, "%lld", (long long)v);
  sb_put(b, tmp, (size_t)w);
}

/* A JSON string literal with escapes. */
static void sb_json_str(sbuf *b, const char *s) {
  sb_put(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') {
      char e[2] = {'\\', (char)*p};
      sb_put(b, e, 2);
    } else if (*p < 0x20) {
      char e[8];
      snprintf(e, sizeof e, "\\u%04x", *p);
      sb_put(b, e, 6);
    } else {
      sb_put(b, (const char *)p, 1);
    }
  }
  sb_put(b, "\"", 1);
}

static vstatus write_all(int fd, const void *buf, size_t n, const char *path) {
  const unsigned char *p = buf;
  while (n > 0) {
    size_t chunk = n < WRITE_CHUNK ? n : WRITE_CHUNK;
    ssize_t w = write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      return VERR("%s: write failed: %s", path, strerror(errno));
    }
    if (w == 0) return VERR("%s: write returned 0 bytes (disk full?)", path);
    p += w;
    n -= (size_t)w;
  }
  return V_OK;
}

static void fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
}

/* Writes `text` (n bytes) or, when text is NULL, the callback's data, to final path via
 * "<final>.tmp", fsync and rename. */
typedef struct {
  const vtensor *t; /* [n] tensors of this shard */
  int first, n;     /* global index of t[0], count */
  st_fill_fn get;   /* producer (NULL: copy t[i].data) */
  void *ctx;        /* for get */
  void *buf;        /* scratch of the largest tensor size (when get != NULL) */
} shard_src;

static vstatus write_shard_data(int fd, const char *tmp, const sbuf *hdr, const shard_src *src) {
  unsigned char len8[8];
  uint64_t hl = (uint64_t)hdr->n;
  for (int b = 0; b < 8; b++) len8[b] = (unsigned char)(hl >> (8 * b));
  VTRY(write_all(fd, len8, 8, tmp));
  VTRY(write_all(fd, hdr->s, hdr->n, tmp));
  for (int i = 0; i < src->n; i++) {
    const vtensor *t = &src->t[i];
    size_t nb = vtensor_nbytes(t);
    const void *p = t->data;
    if (src->get) {
      vstatus s = src->get(src->ctx, src->first + i, t, src->buf);
      if (s != V_OK) {
        verr_prefix("%s: tensor '%s': producing data", tmp, t->name);
        return s;
      }
      p = src->buf;
    } else if (nb > 0 && !p) {
      return VERR("%s: tensor '%s': data is NULL and no fill callback was given", tmp, t->name);
    }
    VTRY(write_all(fd, p, nb, tmp));
  }
  return V_OK;
}

static vstatus commit_file(const char *final, const sbuf *hdr, const shard_src *src) {
  char tmp[1100];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", final) >= (int)sizeof tmp)
    return VERR("%s: path too long", final);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return VERR("%s: cannot create: %s", tmp, strerror(errno));
  vstatus s;
  if (src) {
    s = write_shard_data(fd, tmp, hdr, src);
  } else {
    s = write_all(fd, hdr->s, hdr->n, tmp);
  }
  if (s == V_OK && fsync(fd) != 0) s = VERR("%s: fsync failed: %s", tmp, strerror(errno));
  if (close(fd) != 0 && s == V_OK) s = VERR("%s: close failed: %s", tmp, strerror(errno));
  if (s == V_OK && rename(tmp, final) != 0)
    s = VERR("%s: cannot rename to %s: %s", tmp, final, strerror(errno));
  if (s != V_OK) unlink(tmp);
  return s;
}

/* Builds the header of tensors [first, first+n): keys in tensor order, padded with
 * spaces so the data section starts 8-byte aligned. */
static vstatus build_header(sbuf *b, const vtensor *t, int n, const char *path) {
  b->n = 0;
  sb_str(b, "{\"__metadata__\":{\"format\":\"pt\"}");
  int64_t off = 0;
  for (int i = 0; i < n; i++) {
    sb_put(b, ",", 1);
    sb_json_str(b, t[i].name);
    sb_str(b, ":{\"dtype\":\"");
    sb_str(b, vdtype_name(t[i].dtype));
    sb_str(b, "\",\"shape\":[");
    for (int d = 0; d < t[i].ndim; d++) {
      if (d) sb_put(b, ",", 1);
      sb_i64(b, t[i].shape[d]);
    }
    int64_t nb = (int64_t)vtensor_nbytes(&t[i]);
    sb_str(b, "],\"data_offsets\":[");
    sb_i64(b, off);
    sb_put(b, ",", 1);
    sb_i64(b, off + nb);
    sb_str(b, "]}");
    off += nb;
  }
  sb_put(b, "}", 1);
  while (!b->oom && b->n % 8 != 0) sb_put(b, " ", 1);
  if (b->oom) return VERR("%s: out of memory building the header", path);
  return V_OK;
}

static vstatus check_tensor(const char *dir, const vtensor *t, int i) {
  size_t len = strnlen(t->name, sizeof t->name);
  if (len == 0) return VERR("%s: tensor #%d: empty name", dir, i);
  if (len > MAX_NAME_LEN) return VERR("%s: tensor #%d: name is not NUL-terminated within %d characters", dir, i, MAX_NAME_LEN);
  if (vdtype_size(t->dtype) == 0) return VERR("%s: tensor '%s': field 'dtype': invalid dtype %d", dir, t->name, (int)t->dtype);
  if (t->ndim < 0 || t->ndim > TENSOR_MAX_DIMS)
    return VERR("%s: tensor '%s': field 'shape': ndim %d out of range [0, %d]", dir, t->name, t->ndim, TENSOR_MAX_DIMS);
  int64_t numel = 1;
  for (int d = 0; d < t->ndim; d++) {
    int64_t v = t->shape[d];
    if (v < 0 || (double)v > MAX_JSON_INT)
      return VERR("%s: tensor '%s': field 'shape'[%d] = %lld is out of range", dir, t->name, d, (long long)v);
    if (v != 0 && numel > INT64_MAX / 8 / v)
      return VERR("%s: tensor '%s': field 'shape' has too many elements", dir, t->name);
    numel *= v;
  }
  return V_OK;
}

static int ptr_name_cmp(const void *a, const void *b) {
  return strcmp((*(const vtensor *const *)a)->name, (*(const vtensor *const *)b)->name);
}

static vstatus check_unique(const char *dir, const vtensor *t, int n) {
  const vtensor **p = calloc((size_t)(n ? n : 1), sizeof *p);
  if (!p) return VERR("%s: out of memory", dir);
  for (int i = 0; i < n; i++) p[i] = &t[i];
  qsort(p, (size_t)n, sizeof *p, ptr_name_cmp);
  vstatus s = V_OK;
  for (int i = 1; i < n && s == V_OK; i++)
    if (strcmp(p[i]->name, p[i - 1]->name) == 0)
      s = VERR("%s: tensor '%s': duplicate name (#%d and #%d)", dir, p[i]->name,
               (int)(p[i - 1] - t), (int)(p[i] - t));
  free(p);
  return s;
}

vstatus st_write(const char *dir, const vtensor *tensors, int n, size_t shard_bytes, st_fill_fn get,
                 void *ctx) {
  if (n < 0 || (n > 0 && !tensors)) return VERR("%s: st_write: no tensors given", dir);
  struct stat st;
  if (stat(dir, &st) != 0) {
    if (mkdir(dir, 0755) != 0) return VERR("%s: cannot create directory: %s", dir, strerror(errno));
  } else if (!S_ISDIR(st.st_mode)) {
    return VERR("%s: not a directory", dir);
  }
  uint64_t total = 0;
  size_t max_nb = 0;
  for (int i = 0; i < n; i++) {
    VTRY(check_tensor(dir, &tensors[i], i));
    size_t nb = vtensor_nbytes(&tensors[i]);
    total += nb;
    if (nb > max_nb) max_nb = nb;
  }
  VTRY(check_unique(dir, tensors, n));
  /* shard boundaries: greedy, a new shard when the next tensor would exceed shard_bytes */
  int *shard_of = calloc((size_t)(n ? n : 1), sizeof *shard_of);
  if (!shard_of) return VERR("%s: out of memory", dir);
  int n_shards = 1;
  if (shard_bytes > 0 && total > shard_bytes) {
    uint64_t cur = 0;
    for (int i = 0; i < n; i++) {
      size_t nb = vtensor_nbytes(&tensors[i]);
      if (cur > 0 && cur + nb > shard_bytes) {
        n_shards++;
        cur = 0;
      }
      cur += nb;
      shard_of[i] = n_shards - 1;
    }
  }
  vstatus s = V_OK;
  sbuf hdr = {0}, idx = {0};
  void *buf = NULL;
  if (get) {
    buf = malloc(max_nb ? max_nb : 1);
    if (!buf) {
      s = VERR("%s: out of memory for a %zu-byte tensor buffer", dir, max_nb);
      goto done;
    }
  }
  bool sharded = n_shards > 1;
  char name[64], final[1100];
  if (sharded) {
    sb_str(&idx, "{\"metadata\":{\"total_size\":");
    sb_i64(&idx, (int64_t)total);
    sb_str(&idx, "},\"weight_map\":{");
  }
  for (int sh = 0, i0 = 0; sh < n_shards; sh++) {
    int i1 = i0;
    while (i1 < n && shard_of[i1] == sh) i1++;
    if (sharded) snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", sh + 1, n_shards);
    else snprintf(name, sizeof name, "%s", SINGLE_NAME);
    if ((s = join_path(final, sizeof final, dir, name)) != V_OK) goto done;
    if ((s = build_header(&hdr, tensors + i0, i1 - i0, final)) != V_OK) goto done;
    shard_src src = {.t = tensors + i0, .first = i0, .n = i1 - i0, .get = get, .ctx = ctx, .buf = buf};
    if ((s = commit_file(final, &hdr, &src)) != V_OK) goto done;
    for (int i = i0; sharded && i < i1; i++) {
      if (i) sb_put(&idx, ",", 1);
      sb_json_str(&idx, tensors[i].name);
      sb_put(&idx, ":", 1);
      sb_json_str(&idx, name);
    }
    i0 = i1;
  }
  if ((s = join_path(final, sizeof final, dir, INDEX_NAME)) != V_OK) goto done;
  if (sharded) {
    sb_str(&idx, "}}\n");
    if (idx.oom) {
      s = VERR("%s: out of memory building the index", final);
      goto done;
    }
    if ((s = commit_file(final, &idx, NULL)) != V_OK) goto done;
  } else if (unlink(final) != 0 && errno != ENOENT) {
    /* a stale index would shadow the single file on the next st_open(dir) */
    s = VERR("%s: cannot remove the stale index: %s", final, strerror(errno));
    goto done;
  }
  fsync_dir(dir);
done:
  free(buf);
  free(hdr.s);
  free(idx.s);
  free(shard_of);
  return s;
}
