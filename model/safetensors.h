/* safetensors: read (mmap, bf16/f16/f32/i32/i64, single file or sharded with
 * model.safetensors.index.json) and write. Every structural defect of a file is an
 * error naming the file and the tensor or header field: truncated files, header
 * length past the end, bad JSON, unknown dtype, shape/offset mismatch, offsets out
 * of range or overlapping. */
#ifndef VOUCH_MODEL_SAFETENSORS_H
#define VOUCH_MODEL_SAFETENSORS_H

#include <stddef.h>

#include "common/vstatus.h"
#include "common/tensor.h"

typedef struct st_file st_file;  /* one mmap'ed .safetensors file */

typedef struct {
  int n_files;
  st_file **files;     /* [n_files] */
  int n_tensors;
  vtensor *tensors;    /* [n_tensors], data points into the mmaps (not owned) */
  char dir[512];       /* directory the set was opened from */
} st_set;

/* Opens `path`: a .safetensors file, a model.safetensors.index.json, or a directory
 * holding either. On failure nothing stays open. */
vstatus st_open(st_set *set, const char *path);
void st_close(st_set *set);
/* Finds a tensor by name; NULL when absent. */
const vtensor *st_find(const st_set *set, const char *name);

/* Writes tensors into `dir` as model.safetensors, or as model-0000i-of-0000n.safetensors
 * plus model.safetensors.index.json when the total exceeds `shard_bytes` (0: never shard).
 * Files are written to a temporary name and renamed, so no partial file is left behind.
 * `get` is called for each tensor in order to produce its bytes into `buf`
 * (vtensor_nbytes(&tensors[i]) bytes), which lets callers stream data that is never
 * all in memory at once (NULL: copy tensors[i].data). */
typedef vstatus (*st_fill_fn)(void *ctx, int i, const vtensor *t, void *buf);
vstatus st_write(const char *dir, const vtensor *tensors, int n, size_t shard_bytes,
                 st_fill_fn get, void *ctx);

#endif
