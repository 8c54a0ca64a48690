/* safetensors read/write round trips (single file and sharded), every malformed-file
 * case st_open must reject with a message naming the file and the field/tensor, and
 * f16/bf16 conversions on known values. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "tests/harness.h"

static char g_path[1024];

/* tmpdir/rel in a static buffer */
static const char *tmp(const char *rel) {
  snprintf(g_path, sizeof g_path, "%s/%s", test_tmpdir(), rel);
  return g_path;
}

static uint16_t f16(float f) { return f32_to_f16(f); }

static void test_dtypes(void) {
  const char *names[] = {"F32", "F16", "BF16", "I32", "I64", "U8"};
  const size_t sizes[] = {4, 2, 2, 4, 8, 1};
  for (int i = 0; i < 6; i++) {
    CHECK(vdtype_from_name(names[i]) == i, "from_name(%s) = %d", names[i], vdtype_from_name(names[i]));
    CHECK(strcmp(vdtype_name((vdtype)i), names[i]) == 0, "name(%d) = %s", i, vdtype_name((vdtype)i));
    CHECK(vdtype_size((vdtype)i) == sizes[i], "size(%s)", names[i]);
  }
  CHECK(vdtype_from_name("F8_E4M3") == -1, "unknown dtype -> -1");
  CHECK(vdtype_from_name("f32") == -1, "dtype names are case-sensitive");
  vtensor t = {.ndim = 3, .shape = {2, 3, 5}, .dtype = DT_BF16};
  CHECK(vtensor_numel(&t) == 30 && vtensor_nbytes(&t) == 60, "numel/nbytes");
  vtensor s = {.ndim = 0, .dtype = DT_F32};
  CHECK(vtensor_numel(&s) == 1, "scalar numel is 1");
}

static void test_half(void) {
  CHECK(f16(1.0f) == 0x3c00, "f16(1.0) = %04x", f16(1.0f));
  CHECK(f16(-2.5f) == 0xc100, "f16(-2.5) = %04x", f16(-2.5f));
  CHECK(f16(65504.0f) == 0x7bff, "f16(65504) = %04x", f16(65504.0f));
  CHECK(f16(65519.0f) == 0x7bff, "f16(65519) rounds down = %04x", f16(65519.0f));
  CHECK(f16(65520.0f) == 0x7c00, "f16(65520) tie rounds to inf = %04x", f16(65520.0f));
  CHECK(f16(1e10f) == 0x7c00 && f16(-1e10f) == 0xfc00, "overflow -> inf");
  CHECK(f16(INFINITY) == 0x7c00 && f16(-INFINITY) == 0xfc00, "inf");
  uint16_t hn = f16(NAN);
  CHECK((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0, "nan -> nan (%04x)", hn);
  CHECK(isnan(f16_to_f32(hn)), "nan round trip");
  CHECK(isnan(f16_to_f32(0x7e00)) && isnan(f16_to_f32(0xfc01)), "f16 nan -> f32 nan");
  CHECK(f16_to_f32(0x7c00) == INFINITY && f16_to_f32(0xfc00) == -INFINITY, "f16 inf -> f32 inf");
  CHECK(f16(0.0f) == 0 && f16(-0.0f) == 0x8000, "signed zeros");
  CHECK(signbit(f16_to_f32(0x8000)) && f16_to_f32(0x8000) == 0.0f, "-0 decodes to -0");
  /* subnormals */
  float tiny = ldexpf(1.0f, -24);
  CHECK(f16(tiny) == 0x0001, "f16(2^-24) = %04x", f16(tiny));
  CHECK(f16_to_f32(0x0001) == tiny, "f16 0x0001 = 2^-24");
  CHECK(f16_to_f32(0x03ff) == ldexpf(1023.0f, -24), "largest subnormal");
  CHECK(f16(ldexpf(1023.0f, -24)) == 0x03ff, "f16(largest subnormal)");
  CHECK(f16_to_f32(0x0400) == ldexpf(1.0f, -14), "smallest normal");
  CHECK(f16(ldexpf(1.0f, -25)) == 0x0000, "2^-25 ties to even -> 0 (%04x)", f16(ldexpf(1.0f, -25)));
  CHECK(f16(ldexpf(1.0f, -25) * 1.0001f) == 0x0001, "just above 2^-25 -> 1 ulp");
  CHECK(f16(ldexpf(1.5f, -24)) == 0x0002, "1.5 ulp ties to even -> 2 (%04x)", f16(ldexpf(1.5f, -24)));
  CHECK(f16(ldexpf(2.5f, -24)) == 0x0002, "2.5 ulp ties to even -> 2 (%04x)", f16(ldexpf(2.5f, -24)));
  CHECK(f16(ldexpf(1023.5f, -24)) == 0x0400, "subnormal rounding carries into normal");
  CHECK(f16(-ldexpf(3.0f, -24)) == 0x8003, "negative subnormal");
  /* normal ties to even: 1 + 2^-11 lies between 1 (even) and 1 + 2^-10 (odd) */
  CHECK(f16(1.0f + ldexpf(1.0f, -11)) == 0x3c00, "tie to even down (%04x)", f16(1.0f + ldexpf(1.0f, -11)));
  CHECK(f16(1.0f + ldexpf(3.0f, -11)) == 0x3c02, "tie to even up (%04x)", f16(1.0f + ldexpf(3.0f, -11)));
  CHECK(f16(1.0f + ldexpf(1.0f, -11) + ldexpf(1.0f, -20)) == 0x3c01, "above tie rounds up");
  /* every non-NaN half survives f16 -> f32 -> f16 */
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;
    if (f16((f16_to_f32((uint16_t)h))) != h) bad++;
  }
  CHECK(bad == 0, "%d halves do not round-trip", bad);

  /* bf16 */
  CHECK(f32_to_bf16(1.0f) == 0x3f80, "bf16(1.0)");
  CHECK(f32_to_bf16(-2.5f) == 0xc020, "bf16(-2.5) = %04x", f32_to_bf16(-2.5f));
  CHECK(f32_to_bf16(1.0f + ldexpf(1.0f, -8)) == 0x3f80, "bf16 tie to even down");
  CHECK(f32_to_bf16(1.0f + ldexpf(3.0f, -8)) == 0x3f82, "bf16 tie to even up");
  CHECK(f32_to_bf16(INFINITY) == 0x7f80 && f32_to_bf16(-INFINITY) == 0xff80, "bf16 inf");
  CHECK(isnan(bf16_to_f32(f32_to_bf16(NAN))), "bf16 nan");
  CHECK(bf16_to_f32(0xc020) == -2.5f, "bf16 decode -2.5");

  /* conversions of arrays and single elements */
  uint16_t hs[4] = {0x3c00, 0xc100, 0x7bff, 0x0001};
  uint16_t bs[3] = {0x3f80, 0xc020, 0x4000};
  int32_t is[2] = {-7, 12};
  float out[4];
  vconvert_to_f32(out, hs, DT_F16, 4);
  CHECK(out[0] == 1.0f && out[1] == -2.5f && out[2] == 65504.0f && out[3] == tiny, "convert f16");
  vconvert_to_f32(out, bs, DT_BF16, 3);
  CHECK(out[0] == 1.0f && out[1] == -2.5f && out[2] == 2.0f, "convert bf16");
  vconvert_to_f32(out, is, DT_I32, 2);
  CHECK(out[0] == -7.0f && out[1] == 12.0f, "convert i32");
  vtensor t = {.dtype = DT_F16, .ndim = 1, .shape = {4}, .data = hs};
  CHECK(vtensor_get_f32(&t, 1) == -2.5f, "get_f32 f16");
  t.dtype = DT_BF16;
  t.data = bs;
  CHECK(vtensor_get_f32(&t, 2) == 2.0f, "get_f32 bf16");
  float fs[2] = {3.25f, -1.0f};
  t.dtype = DT_F32;
  t.data = fs;
  CHECK(vtensor_get_f32(&t, 0) == 3.25f, "get_f32 f32");
}

/* ------------------------------------------------------------------ round trips */

#define NT 7
static float g_f32[15];
static uint16_t g_bf16[7], g_f16[8];
static int32_t g_i32[4];
static int64_t g_i64[3];
static uint8_t g_u8[5];
static float g_scalar[1] = {42.5f};

static void make_tensors(vtensor *t) {
  for (int i = 0; i < 15; i++) g_f32[i] = (float)i * 0.5f - 3.0f;
  for (int i = 0; i < 7; i++) g_bf16[i] = f32_to_bf16((float)i * 1.25f);
  for (int i = 0; i < 8; i++) g_f16[i] = f32_to_f16((float)i / 3.0f);
  for (int i = 0; i < 4; i++) g_i32[i] = -100 + 37 * i;
  for (int i = 0; i < 3; i++) g_i64[i] = (int64_t)1 << (40 + i);
  for (int i = 0; i < 5; i++) g_u8[i] = (uint8_t)(250 + i);
  vtensor v[NT] = {
      {.name = "model.embed_tokens.weight", .dtype = DT_F32, .ndim = 2, .shape = {3, 5}, .data = g_f32},
      {.name = "b.bf16", .dtype = DT_BF16, .ndim = 1, .shape = {7}, .data = g_bf16},
      {.name = "c.f16", .dtype = DT_F16, .ndim = 3, .shape = {2, 2, 2}, .data = g_f16},
      {.name = "a.i32", .dtype = DT_I32, .ndim = 2, .shape = {4, 1}, .data = g_i32},
      {.name = "e.i64", .dtype = DT_I64, .ndim = 1, .shape = {3}, .data = g_i64},
      {.name = "name with \"quote\" and \\", .dtype = DT_U8, .ndim = 1, .shape = {5}, .data = g_u8},
      {.name = "scalar", .dtype = DT_F32, .ndim = 0, .data = g_scalar},
  };
  memcpy(t, v, sizeof v);
}

static void check_same(const st_set *set, const vtensor *want, int n, const char *what) {
  CHECK(set->n_tensors == n, "%s: %d tensors, want %d", what, set->n_tensors, n);
  for (int i = 0; i < n; i++) {
    const vtensor *g = st_find(set, want[i].name);
    CHECK(g != NULL, "%s: tensor %s not found", what, want[i].name);
    if (!g) continue;
    CHECK(strcmp(g->name, want[i].name) == 0, "%s: name", what);
    CHECK(g->dtype == want[i].dtype && g->ndim == want[i].ndim, "%s: %s dtype/ndim", what, want[i].name);
    for (int d = 0; d < want[i].ndim; d++)
      CHECK(g->shape[d] == want[i].shape[d], "%s: %s shape[%d]", what, want[i].name, d);
    CHECK(!g->owned, "%s: mmap data is not owned", what);
    CHECK(memcmp(g->data, want[i].data, vtensor_nbytes(&want[i])) == 0, "%s: %s bytes differ", what,
          want[i].name);
  }
  CHECK(st_find(set, "no.such.tensor") == NULL, "%s: absent tensor -> NULL", what);
}

static int count_files(const char *dir, const char *suffix) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int c = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name), m = strlen(suffix);
    if (n >= m && strcmp(e->d_name + n - m, suffix) == 0) c++;
  }
  closedir(d);
  return c;
}

typedef struct {
  const vtensor *src; /* tensors whose data to copy */
  int calls;          /* how many times fill was called */
  int next;           /* index expected next */
  int fail_at;        /* fail on this index (-1: never) */
} fill_ctx;

static vstatus fill(void *vctx, int i, const vtensor *t, void *buf) {
  fill_ctx *c = vctx;
  c->calls++;
  if (i != c->next) return VERR("fill: called with %d, expected %d", i, c->next);
  c->next++;
  if (i == c->fail_at) return VERR("fill: injected failure at %d", i);
  memcpy(buf, c->src[i].data, vtensor_nbytes(t));
  return V_OK;
}

static void test_roundtrip(void) {
  vtensor t[NT];
  make_tensors(t);
  char dir[600];
  snprintf(dir, sizeof dir, "%s", tmp("single"));
  CHECK_OK(st_write(dir, t, NT, 0, NULL, NULL));
  CHECK(count_files(dir, ".tmp") == 0, "no .tmp file left");
  st_set set;
  CHECK_OK(st_open(&set, dir));
  check_same(&set, t, NT, "single via dir");
  CHECK(set.n_files == 1, "one file");
  st_close(&set);
  CHECK(set.n_files == 0 && set.tensors == NULL, "close zeroes the set");

  char file[700];
  snprintf(file, sizeof file, "%s/model.safetensors", dir);
  CHECK_OK(st_open(&set, file));
  check_same(&set, t, NT, "single via file");
  CHECK(strcmp(set.dir, dir) == 0, "dir of a file path = %s", set.dir);
  st_close(&set);

  /* header: 8-byte aligned, keys in tensor order, parseable by cJSON */
  FILE *fp = fopen(file, "rb");
  unsigned char len8[8] = {0};
  CHECK(fp && fread(len8, 1, 8, fp) == 8, "read header length");
  uint64_t hl = 0;
  for (int b = 7; b >= 0; b--) hl = (hl << 8) | len8[b];
  CHECK(hl % 8 == 0 && hl < 4096, "header length %llu is a multiple of 8", (unsigned long long)hl);
  char hdr[4096] = {0};
  CHECK(fp && fread(hdr, 1, (size_t)hl, fp) == hl, "read header");
  if (fp) fclose(fp);
  cJSON *h = cJSON_Parse(hdr);
  CHECK(h && cJSON_IsObject(h), "header is a JSON object");
  if (h) {
    int k = 0;
    bool order = true;
    const cJSON *c;
    cJSON_ArrayForEach(c, h) {
      if (strcmp(c->string, "__metadata__") == 0) continue;
      order = order && k < NT && strcmp(c->string, t[k].name) == 0;
      k++;
    }
    CHECK(order && k == NT, "header keys are in tensor order");
    cJSON_Delete(h);
  }

  /* the same through the fill callback, into another dir */
  fill_ctx fc = {.src = t, .fail_at = -1};
  vtensor nodata[NT];
  memcpy(nodata, t, sizeof nodata);
  for (int i = 0; i < NT; i++) nodata[i].data = NULL;
  snprintf(dir, sizeof dir, "%s", tmp("streamed"));
  CHECK_OK(st_write(dir, nodata, NT, 0, fill, &fc));
  CHECK(fc.calls == NT, "fill called %d times", fc.calls);
  CHECK_OK(st_open(&set, dir));
  check_same(&set, t, NT, "streamed");
  st_close(&set);

  /* a failing producer leaves neither the final nor the tmp file */
  fill_ctx bad = {.src = t, .fail_at = 3};
  snprintf(dir, sizeof dir, "%s", tmp("failed"));
  vstatus s = st_write(dir, nodata, NT, 0, fill, &bad);
  CHECK(s == V_ERR, "failing fill -> V_ERR");
  CHECK(strstr(verr_msg(), "injected failure") && strstr(verr_msg(), "a.i32"), "msg: %s", verr_msg());
  CHECK(count_files(dir, ".tmp") == 0 && count_files(dir, ".safetensors") == 0, "nothing left behind");

  /* duplicate names are refused at write time */
  vtensor dup[2] = {t[0], t[0]};
  s = st_write(tmp("dup"), dup, 2, 0, NULL, NULL);
  CHECK(s == V_ERR && strstr(verr_msg(), "duplicate") && strstr(verr_msg(), t[0].name), "dup: %s", verr_msg());
}

static void test_sharded(void) {
  enum { N = 10, E = 100 }; /* 10 f32 tensors of 400 bytes */
  static float data[N][E];
  vtensor t[N];
  memset(t, 0, sizeof t);
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < E; j++) data[i][j] = (float)(i * 1000 + j);
    snprintf(t[i].name, sizeof t[i].name, "model.layers.%d.mlp.weight", i);
    t[i].dtype = DT_F32;
    t[i].ndim = 2;
    t[i].shape[0] = 10;
    t[i].shape[1] = 10;
    t[i].data = data[i];
  }
  char dir[600];
  snprintf(dir, sizeof dir, "%s", tmp("sharded"));
  /* a stale single file in the directory must not shadow the index */
  CHECK_OK(st_write(dir, t, 1, 0, NULL, NULL));
  CHECK_OK(st_write(dir, t, N, 1000, NULL, NULL)); /* 2 tensors per shard -> 5 shards */
  CHECK(count_files(dir, ".tmp") == 0, "no .tmp left");
  char p[800];
  for (int i = 1; i <= 5; i++) {
    snprintf(p, sizeof p, "%s/model-%05d-of-00005.safetensors", dir, i);
    struct stat st;
    CHECK(stat(p, &st) == 0, "shard %s exists", p);
  }
  st_set set;
  CHECK_OK(st_open(&set, dir));
  CHECK(set.n_files == 5, "5 shards opened, got %d", set.n_files);
  check_same(&set, t, N, "sharded via dir");
  st_close(&set);
  snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
  CHECK_OK(st_open(&set, p));
  check_same(&set, t, N, "sharded via index");
  st_close(&set);

  FILE *fp = fopen(p, "rb");
  char buf[8192] = {0};
  size_t n = fp ? fread(buf, 1, sizeof buf - 1, fp) : 0;
  if (fp) fclose(fp);
  cJSON *j = cJSON_ParseWithLength(buf, n);
  const cJSON *ts = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "total_size");
  CHECK(cJSON_IsNumber(ts) && ts->valuedouble == N * E * 4.0, "total_size");
  const cJSON *wm = cJSON_GetObjectItem(j, "weight_map");
  CHECK(cJSON_GetArraySize(wm) == N, "weight_map has %d entries", cJSON_GetArraySize(wm));
  const cJSON *w9 = cJSON_GetObjectItem(wm, t[9].name);
  CHECK(cJSON_IsString(w9) && strcmp(w9->valuestring, "model-00005-of-00005.safetensors") == 0,
        "last tensor in last shard");
  cJSON_Delete(j);

  /* writing a single file afterwards removes the index so the dir means the new set */
  CHECK_OK(st_write(dir, t, 3, 0, NULL, NULL));
  CHECK_OK(st_open(&set, dir));
  CHECK(set.n_tensors == 3 && set.n_files == 1, "single after sharded: %d tensors", set.n_tensors);
  st_close(&set);
}

/* ------------------------------------------------------------------ malformed files */

static void write_bytes(const char *path, const void *b, size_t n) {
  FILE *fp = fopen(path, "wb");
  if (!fp || fwrite(b, 1, n, fp) != n) {
    perror(path);
    exit(2);
  }
  fclose(fp);
}

/* tmpdir/name: u64 header length `hl`, header text, then `data_len` bytes of data. */
static const char *craft_len(const char *name, uint64_t hl, const char *hdr, size_t data_len) {
  size_t hn = strlen(hdr);
  size_t n = 8 + hn + data_len;
  unsigned char *b = calloc(1, n);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(hl >> (8 * i));
  memcpy(b + 8, hdr, hn);
  for (size_t i = 0; i < data_len; i++) b[8 + hn + i] = (unsigned char)i;
  const char *p = tmp(name);
  write_bytes(p, b, n);
  free(b);
  return p;
}

static const char *craft(const char *name, const char *hdr, size_t data_len) {
  return craft_len(name, strlen(hdr), hdr, data_len);
}

/* st_open(path) fails and its message contains `a` and `b` (and the file name). */
static void expect_fail(const char *path, const char *file_in_msg, const char *a, const char *b) {
  char p[1024];
  snprintf(p, sizeof p, "%s", path);
  st_set set;
  memset(&set, 0xab, sizeof set);
  verr_clear();
  vstatus s = st_open(&set, p);
  const char *m = verr_msg();
  CHECK(s == V_ERR, "%s: st_open -> %d, want V_ERR", file_in_msg, (int)s);
  CHECK(strstr(m, file_in_msg) != NULL, "message does not name %s: %s", file_in_msg, m);
  CHECK(!a || strstr(m, a), "message does not mention '%s': %s", a, m);
  CHECK(!b || strstr(m, b), "message does not mention '%s': %s", b, m);
  CHECK(set.n_files == 0 && set.files == NULL && set.tensors == NULL, "%s: set left open", file_in_msg);
  CHECK(strchr(m, '\n') == NULL, "message is one line: %s", m);
  if (getenv("VOUCH_TEST_VERBOSE")) fprintf(stderr, "  ok: %s\n", m);
  if (s == V_OK) st_close(&set);
}

static void test_malformed(void) {
  const char *p;
  p = tmp("trunc.safetensors");
  write_bytes(p, "\x10\0\0", 3);
  expect_fail(p, "trunc.safetensors", "header length", "shorter");

  p = craft_len("pastend.safetensors", 1000, "{}", 0);
  expect_fail(p, "pastend.safetensors", "header length", "past the end");

  p = craft_len("absurd.safetensors", (uint64_t)1 << 40, "{}", 0);
  expect_fail(p, "absurd.safetensors", "header length", "over the limit");
  CHECK(!strstr(verr_msg(), "1099511627776"), "the header length read is not printed: %s", verr_msg());
  /* a text file: the message must not carry its first bytes as a number */
  p = tmp("passwd.safetensors");
  write_bytes(p, "root:x:0:0:root:/root:/bin/bash\n", 32);
  expect_fail(p, "passwd.safetensors", "header length", NULL);
  CHECK(!strstr(verr_msg(), "3475222254926655346"), "no file bytes in the message: %s", verr_msg());

  p = craft("badjson.safetensors", "{\"w\": {\"dtype\": \"F32\", ", 0);
  expect_fail(p, "badjson.safetensors", "header", "JSON");

  p = craft("notobj.safetensors", "[1, 2, 3]", 0);
  expect_fail(p, "notobj.safetensors", "header", "not an object");

  p = craft("garbage.safetensors", "{}  xyz", 0);
  expect_fail(p, "garbage.safetensors", "header", "unexpected");

  p = craft("nodtype.safetensors", "{\"w.x\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  expect_fail(p, "nodtype.safetensors", "'w.x'", "'dtype' is missing");

  p = craft("dtypenum.safetensors", "{\"w.x\":{\"dtype\":5,\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  expect_fail(p, "dtypenum.safetensors", "'w.x'", "'dtype' is not a string");

  p = craft("unkdtype.safetensors", "{\"w.x\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  expect_fail(p, "unkdtype.safetensors", "'w.x'", "Q7");

  p = craft("noshape.safetensors", "{\"w.x\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8);
  expect_fail(p, "noshape.safetensors", "'w.x'", "'shape' is missing");

  p = craft("shapestr.safetensors", "{\"w.x\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", 8);
  expect_fail(p, "shapestr.safetensors", "'w.x'", "'shape' is not an array");

  p = craft("negshape.safetensors", "{\"w.x\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8);
  expect_fail(p, "negshape.safetensors", "'w.x'", "'shape'[0]");

  p = craft("fracshape.safetensors", "{\"w.x\":{\"dtype\":\"F32\",\"shape\":[1,1.5],\"data_offsets\":[0,8]}}", 8);
  expect_fail(p, "fracshape.safetensors", "'w.x'", "'shape'[1]");

  p = craft("fivedims.safetensors", "{\"w.x\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,1]}}", 1);
  expect_fail(p, "fivedims.safetensors", "'w.x'", "'shape'");

  p = craft("nooffs.safetensors", "{\"w.x\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8);
  expect_fail(p, "nooffs.safetensors", "'w.x'", "'data_offsets' is missing");

  p = craft("offs3.safetensors", "{\"w.x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4,8]}}", 8);
  expect_fail(p, "offs3.safetensors", "'w.x'", "'data_offsets'");

  p = craft("offsstr.safetensors", "{\"w.x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[\"0\",8]}}", 8);
  expect_fail(p, "offsstr.safetensors", "'w.x'", "'data_offsets'");

  p = craft("offsrev.safetensors", "{\"w.x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8);
  expect_fail(p, "offsrev.safetensors", "'w.x'", "end is before begin");

  p = craft("offsend.safetensors", "{\"w.x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 7);
  expect_fail(p, "offsend.safetensors", "'w.x'", "past the data section");

  p = craft("mismatch.safetensors", "{\"w.x\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 12);
  expect_fail(p, "mismatch.safetensors", "'w.x'", "needs 12 bytes");

  p = craft("overlap.safetensors",
            "{\"a.w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
            "\"b.w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 24);
  expect_fail(p, "overlap.safetensors", "'b.w'", "overlaps tensor 'a.w'");

  p = craft("dupkey.safetensors",
            "{\"a.w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
            "\"a.w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16);
  expect_fail(p, "dupkey.safetensors", "'a.w'", "duplicate");

  char hdr[512];
  char longname[201];
  memset(longname, 'n', 200);
  longname[200] = 0;
  snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", longname);
  p = craft("longname.safetensors", hdr, 1);
  expect_fail(p, "longname.safetensors", "nnnnnnnn", "name is 200 characters");

  p = craft("metabad.safetensors", "{\"__metadata__\":{\"format\":1}}", 0);
  expect_fail(p, "metabad.safetensors", "__metadata__", "format");

  p = craft("metaarr.safetensors", "{\"__metadata__\":[]}", 0);
  expect_fail(p, "metaarr.safetensors", "__metadata__", "not a JSON object");

  expect_fail(tmp("does-not-exist.safetensors"), "does-not-exist.safetensors", "cannot open", NULL);
  mkdir(tmp("emptydir"), 0755);
  expect_fail(tmp("emptydir"), "emptydir", "model.safetensors", NULL);

  /* well-formed hand-made files still open: metadata map, zero-size tensor, space padding */
  st_set set;
  p = craft("ok.safetensors",
            "{\"__metadata__\":{\"format\":\"pt\"},\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[8,8]},"
            "\"w\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}   ", 8);
  CHECK_OK(st_open(&set, p));
  const vtensor *w = st_find(&set, "w");
  CHECK(set.n_tensors == 2 && w && w->dtype == DT_I32 && ((const unsigned char *)w->data)[5] == 5,
        "hand-made file reads");
  st_close(&set);
}

static void test_malformed_index(void) {
  char dir[600], p[800];
  snprintf(dir, sizeof dir, "%s", tmp("idx"));
  mkdir(dir, 0755);
  craft("idx/s1.safetensors",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16);
  craft("idx/s2.safetensors", "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  craft("idx/s3.safetensors", "{\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);

  snprintf(p, sizeof p, "%s/good.index.json", dir);
  const char *good = "{\"metadata\":{},\"weight_map\":{\"a\":\"s1.safetensors\",\"c\":\"s3.safetensors\"}}";
  write_bytes(p, good, strlen(good));
  st_set set;
  /* s1 also holds b, which the index does not list: it is kept */
  CHECK_OK(st_open(&set, p));
  CHECK(set.n_files == 2 && set.n_tensors == 3 && st_find(&set, "c"), "good index opens");
  st_close(&set);

  snprintf(p, sizeof p, "%s/missing-shard.index.json", dir);
  const char *m1 = "{\"weight_map\":{\"a\":\"s1.safetensors\",\"z.w\":\"gone.safetensors\"}}";
  write_bytes(p, m1, strlen(m1));
  expect_fail(p, "missing-shard.index.json", "'z.w'", "gone.safetensors");

  snprintf(p, sizeof p, "%s/missing-tensor.index.json", dir);
  const char *m2 = "{\"weight_map\":{\"a\":\"s1.safetensors\",\"q.w\":\"s1.safetensors\"}}";
  write_bytes(p, m2, strlen(m2));
  expect_fail(p, "missing-tensor.index.json", "'q.w'", "s1.safetensors");

  snprintf(p, sizeof p, "%s/wrong-shard.index.json", dir);
  const char *m3 = "{\"weight_map\":{\"a\":\"s1.safetensors\",\"c\":\"s1.safetensors\",\"x\":\"s3.safetensors\"}}";
  write_bytes(p, m3, strlen(m3));
  expect_fail(p, "wrong-shard.index.json", "'c'", "s1.safetensors");

  snprintf(p, sizeof p, "%s/dup.index.json", dir);
  const char *m4 = "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\"}}";
  write_bytes(p, m4, strlen(m4));
  expect_fail(p, "s1.safetensors", "'b'", "duplicate");
  CHECK(strstr(verr_msg(), "s2.safetensors") != NULL, "duplicate names both shards: %s", verr_msg());

  snprintf(p, sizeof p, "%s/nomap.index.json", dir);
  write_bytes(p, "{\"metadata\":{}}", 15);
  expect_fail(p, "nomap.index.json", "weight_map", NULL);

  snprintf(p, sizeof p, "%s/badjson.index.json", dir);
  write_bytes(p, "{\"weight_map\":", 14);
  expect_fail(p, "badjson.index.json", "JSON", NULL);

  snprintf(p, sizeof p, "%s/badval.index.json", dir);
  const char *m5 = "{\"weight_map\":{\"a\":7}}";
  write_bytes(p, m5, strlen(m5));
  expect_fail(p, "badval.index.json", "'a'", "weight_map");

  /* a broken shard is reported under the shard's name */
  craft("idx/bad.safetensors", "{\"k\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  snprintf(p, sizeof p, "%s/badshard.index.json", dir);
  const char *m6 = "{\"weight_map\":{\"a\":\"s1.safetensors\",\"k\":\"bad.safetensors\"}}";
  write_bytes(p, m6, strlen(m6));
  expect_fail(p, "bad.safetensors", "'k'", "Q7");
}

/* An index may name only plain files of its own folder; symbolic links only into the folder or,
 * in an HF cache (snapshots/REV linking to ../../blobs), into its blobs. */
static void test_index_confinement(void) {
  char root[600], dir[700], p[900], q[900];
  snprintf(root, sizeof root, "%s", tmp("cage"));
  mkdir(root, 0755);
  snprintf(dir, sizeof dir, "%s/ckpt", root);
  mkdir(dir, 0755);
  craft("cage/outside.safetensors", "{\"o\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  craft("cage/ckpt/in.safetensors", "{\"i\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  const char *bad_names[] = {"../outside.safetensors", "../../../../etc/passwd", "/etc/passwd", "sub/in.safetensors",
                             "..", "", "in\\u0001.safetensors"};
  for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    char text[300];
    snprintf(text, sizeof text, "{\"weight_map\":{\"i\":\"in.safetensors\",\"o\":\"%s\"}}", bad_names[i]);
    write_bytes(p, text, strlen(text));
    expect_fail(dir, "model.safetensors.index.json", "'weight_map'.'o'", "plain file name");
  }
  /* a link to a file outside the folder is refused, naming the entry */
  snprintf(p, sizeof p, "%s/link.safetensors", dir);
  snprintf(q, sizeof q, "%s/outside.safetensors", root);
  CHECK(symlink(q, p) == 0, "symlink");
  snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
  const char *li = "{\"weight_map\":{\"i\":\"in.safetensors\",\"o\":\"link.safetensors\"}}";
  write_bytes(p, li, strlen(li));
  expect_fail(dir, "model.safetensors.index.json", "'weight_map'.'o'", "outside the checkpoint folder");
  /* so is a directory's model.safetensors that links out */
  char single[700];
  snprintf(single, sizeof single, "%s/single", root);
  mkdir(single, 0755);
  snprintf(p, sizeof p, "%s/model.safetensors", single);
  CHECK(symlink(q, p) == 0, "symlink single");
  expect_fail(single, "single", "model.safetensors", "outside the checkpoint folder");

  /* a link inside the folder is followed */
  snprintf(p, sizeof p, "%s/alias.safetensors", dir);
  CHECK(symlink("in.safetensors", p) == 0, "symlink alias");
  snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
  const char *al = "{\"weight_map\":{\"i\":\"alias.safetensors\"}}";
  write_bytes(p, al, strlen(al));
  st_set set;
  CHECK_OK(st_open(&set, dir));
  CHECK(set.n_tensors == 1 && st_find(&set, "i"), "link inside the folder opens");
  st_close(&set);

  /* the HF cache layout: models--o--m/snapshots/REV/x.safetensors -> ../../blobs/HASH */
  char hf[700];
  snprintf(hf, sizeof hf, "%s/models--o--m", root);
  mkdir(hf, 0755);
  snprintf(p, sizeof p, "%s/blobs", hf);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/snapshots", hf);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/snapshots/abc123", hf);
  mkdir(p, 0755);
  craft("cage/models--o--m/blobs/5f1e", "{\"h\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  snprintf(p, sizeof p, "%s/snapshots/abc123/model-00001-of-00001.safetensors", hf);
  CHECK(symlink("../../blobs/5f1e", p) == 0, "symlink blob");
  snprintf(p, sizeof p, "%s/snapshots/abc123/model.safetensors.index.json", hf);
  const char *hi = "{\"weight_map\":{\"h\":\"model-00001-of-00001.safetensors\"}}";
  write_bytes(p, hi, strlen(hi));
  snprintf(p, sizeof p, "%s/snapshots/abc123", hf);
  CHECK_OK(st_open(&set, p));
  CHECK(set.n_tensors == 1 && st_find(&set, "h"), "HF cache blob link opens");
  st_close(&set);
}

int main(void) {
  test_dtypes();
  test_half();
  test_roundtrip();
  test_sharded();
  test_malformed();
  test_malformed_index();
  test_index_confinement();
  return test_finish();
}
