/* libFuzzer target: model.safetensors.index.json of a sharded checkpoint (model/safetensors.c).
 * The checkpoint folder holds two real shards, a link into the folder, a link out of it, and
 * next to the folder a valid shard "outside.safetensors" holding tensor "secret". Property:
 * whatever the index says, no file outside the folder is opened (tensor "secret" never
 * appears), and errors are one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz/fuzz_util.h"
#include "model/safetensors.h"

static void shard(const char *rel, const char *tensor) {
  char hdr[256];
  int h = snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", tensor);
  while (h % 8) hdr[h++] = ' ';
  uint8_t buf[8 + 256 + 8] = {0};
  for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)h >> (8 * i));
  memcpy(buf + 8, hdr, (size_t)h);
  fz_write(rel, buf, 8 + (size_t)h + 8);
}

static void setup(void) {
  fz_mkdir("ckpt");
  shard("ckpt/model-00001-of-00002.safetensors", "a");
  shard("ckpt/model-00002-of-00002.safetensors", "b");
  shard("outside.safetensors", "secret");
  char target[4096];
  snprintf(target, sizeof target, "%s", fz_path("outside.safetensors"));
  if (symlink(target, fz_path("ckpt/out.safetensors")) != 0) abort();
  if (symlink("model-00001-of-00002.safetensors", fz_path("ckpt/in.safetensors")) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  static int ready;
  if (!ready) { setup(); ready = 1; }
  fz_write("ckpt/model.safetensors.index.json", data, n);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", fz_path("ckpt"));
  st_set set;
  if (st_open(&set, dir) != V_OK) {
    const char *m = verr_msg();
    fz_assert(m[0] && !strchr(m, '\n'), "st_open error is one non-empty line");
    return 0;
  }
  fz_assert(st_find(&set, "secret") == NULL, "a file outside the checkpoint folder was opened");
  for (int i = 0; i < set.n_files; i++) (void)st_find(&set, "a");
  st_close(&set);
  return 0;
}
