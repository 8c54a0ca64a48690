/* A named, typed, shaped view of tensor data (owned or borrowed from an mmap). */
#ifndef VOUCH_COMMON_TENSOR_H
#define VOUCH_COMMON_TENSOR_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef enum { DT_F32 = 0, DT_F16 = 1, DT_BF16 = 2, DT_I32 = 3, DT_I64 = 4, DT_U8 = 5 } vdtype;

#define TENSOR_MAX_DIMS 4

typedef struct {
  char name[128];                 /* HF parameter name, e.g. "model.layers.0.self_attn.o_proj.weight" */
  vdtype dtype;
  int ndim;
  int64_t shape[TENSOR_MAX_DIMS]; /* row-major; shape[0] outermost (out_features for Linear) */
  void *data;                     /* ndim-dimensional array, shape[] elements of dtype */
  bool owned;                     /* data was malloc'ed by whoever built this tensor */
} vtensor;

size_t vdtype_size(vdtype t);
const char *vdtype_name(vdtype t);          /* safetensors spelling: "F32", "BF16", ... */
int vdtype_from_name(const char *s);         /* -1 when unknown */
int64_t vtensor_numel(const vtensor *t);
static inline size_t vtensor_nbytes(const vtensor *t) {
  return (size_t)vtensor_numel(t) * vdtype_size(t->dtype);
}

/* bf16 <-> f32: round-to-nearest-even on the way down, NaN kept NaN. */
static inline float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

/* Reads element i of t as float (any float dtype). */
float vtensor_get_f32(const vtensor *t, int64_t i);
/* Converts n elements of `src` (dtype) to float32 `dst`. */
void vconvert_to_f32(float *dst, const void *src, vdtype dtype, int64_t n);

#endif
