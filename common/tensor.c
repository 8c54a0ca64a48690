/* Tensor dtypes (safetensors spellings), element counts, and half-precision
 * conversions (IEEE binary16 with round-to-nearest-even, subnormals, inf, NaN). */
#include "common/tensor.h"

static const struct {
  const char *name; /* safetensors spelling */
  size_t size;      /* bytes per element */
} g_dtypes[] = {
    [DT_F32] = {"F32", 4}, [DT_F16] = {"F16", 2}, [DT_BF16] = {"BF16", 2},
    [DT_I32] = {"I32", 4}, [DT_I64] = {"I64", 8}, [DT_U8] = {"U8", 1},
};
#define N_DTYPES ((int)(sizeof g_dtypes / sizeof g_dtypes[0]))

size_t vdtype_size(vdtype t) {
  return ((int)t >= 0 && (int)t < N_DTYPES) ? g_dtypes[t].size : 0;
}

const char *vdtype_name(vdtype t) {
  return ((int)t >= 0 && (int)t < N_DTYPES) ? g_dtypes[t].name : "?";
}

int vdtype_from_name(const char *s) {
  if (!s) return -1;
  for (int i = 0; i < N_DTYPES; i++)
    if (strcmp(s, g_dtypes[i].name) == 0) return i;
  return -1;
}

int64_t vtensor_numel(const vtensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13); /* inf, or NaN with its payload */
  } else if (exp != 0) {
    u = sign | ((exp + 112u) << 23) | (man << 13); /* rebias 15 -> 127 */
  } else if (man == 0) {
    u = sign; /* signed zero */
  } else {
    /* subnormal: man * 2^-24; normalize so the leading 1 is at bit 10 */
    int e = -1;
    do {
      man <<= 1;
      e++;
    } while (!(man & 0x400u));
    u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Rounds v >> shift to nearest, ties to even. shift in [1, 31]. */
static uint32_t shift_rne(uint32_t v, int shift) {
  uint32_t q = v >> shift;
  uint32_t rem = v & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) q++;
  return q;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) /* NaN: keep it NaN (quiet bit set), keep top payload bits */
    return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) /* >= 65520 (halfway past 65504, ties to even = up): inf */
    return (uint16_t)(sign | 0x7c00u);
  if (a >= 0x38800000u) /* normal half (>= 2^-14): rebias, round the 13 dropped bits */
    return (uint16_t)(sign | shift_rne(a - 0x38000000u, 13));
  if (a <= 0x33000000u) /* <= 2^-25 (half the smallest subnormal; tie goes to 0) */
    return sign;
  /* subnormal half: value = m * 2^(E-150); in units of 2^-24 that is m >> (126 - E) */
  uint32_t m = (a & 0x7fffffu) | 0x800000u;
  int e = (int)(a >> 23);
  return (uint16_t)(sign | shift_rne(m, 126 - e)); /* 0x400 on carry = smallest normal */
}

static float elem_f32(const void *src, vdtype dtype, int64_t i) {
  const unsigned char *p = (const unsigned char *)src;
  switch (dtype) {
    case DT_F32: {
      float v;
      memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DT_F16: {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      return f16_to_f32(h);
    }
    case DT_BF16: {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      return bf16_to_f32(h);
    }
    case DT_I32: {
      int32_t v;
      memcpy(&v, p + 4 * i, 4);
      return (float)v;
    }
    case DT_I64: {
      int64_t v;
      memcpy(&v, p + 8 * i, 8);
      return (float)v;
    }
    case DT_U8:
      return (float)p[i];
  }
  return 0.0f;
}

float vtensor_get_f32(const vtensor *t, int64_t i) { return elem_f32(t->data, t->dtype, i); }

void vconvert_to_f32(float *dst, const void *src, vdtype dtype, int64_t n) {
  switch (dtype) {
    case DT_F32:
      memcpy(dst, src, (size_t)n * 4);
      return;
    case DT_BF16: {
      const unsigned char *p = (const unsigned char *)src;
      for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    }
    default:
      for (int64_t i = 0; i < n; i++) dst[i] = elem_f32(src, dtype, i);
      return;
  }
}
