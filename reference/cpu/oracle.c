/* Float64 oracles and the op descriptors of the kernel numerics suite.
 * Each op: its buffers (layout), input generation from (seed, distribution), the oracle
 * in double, the tolerance per output with its reason, and (router, sampling) a check
 * that knows about near-ties. Semantics follow HF transformers' DeepseekV3 (see
 * reference/cpu/ops.h), computed in double from the same float/bf16 inputs. */
#include "reference/cpu/oracle.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/philox.h"

#define U32 (5.9604644775390625e-08) /* float32 unit roundoff 2^-24 */

/* ---------------- generators ---------------- */

static inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static inline double unit01(uint64_t key, uint64_t i) { return (double)(mix64(key ^ mix64(i)) >> 11) * 0x1p-53; }
static inline double gauss(uint64_t key, uint64_t i) {
  double u1 = unit01(key, 2 * i) + 0x1p-54, u2 = unit01(key, 2 * i + 1);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
/* Outlier channels are a property of the channel index (not of the buffer), so q and k,
 * or x and the next layer's input, share them as real activations do: 1 in 16 channels,
 * and always the last one. */
static inline int is_outlier_channel(int c, int channels) {
  return c == channels - 1 || (mix64(0x6f75746cull + (uint64_t)c) & 15) == 0;
}

void oracle_fill_f32(float *x, int64_t n, int dist, uint64_t key, double scale, int channels) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; i++) {
    double g = gauss(key, (uint64_t)i), v;
    switch (dist) {
      case VD_HEAVY:
        v = g;
        if (unit01(key ^ 0x68656176ull, (uint64_t)i) < 1.0 / 32) v *= 1.0 / (unit01(key ^ 0x7461696cull, (uint64_t)i) + 0.02);
        if (channels > 0 && is_outlier_channel((int)(i % channels), channels)) v *= 100.0;
        v *= scale;
        break;
      case VD_NEARTIE: {
        float q = (float)(floor(g * 2.0 + 0.5) / 2.0 * scale);
        if (unit01(key ^ 0x74696573ull, (uint64_t)i) < 0.25) q = nextafterf(q, INFINITY);
        v = q;
        break;
      }
      case VD_SMALLINT: v = floor(unit01(key, (uint64_t)i) * 129.0) - 64.0; break;
      default: v = g * scale; break; /* VD_NORMAL, VD_LARGE, VD_SMALL (scale chosen by the op) */
    }
    if (v > 3.0e38) v = 3.0e38;
    if (v < -3.0e38) v = -3.0e38;
    x[i] = (float)v;
  }
}

void oracle_fill_bf16(uint16_t *w, int64_t n, uint64_t key, double scale) {
  /* Uniform in [-sqrt(3), sqrt(3)) * scale: variance scale^2, cheap enough for 1e9 elements. */
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; i++) {
    double u = unit01(key, (uint64_t)i) * 2.0 - 1.0;
    w[i] = f32_to_bf16((float)(u * 1.7320508075688772 * scale));
  }
}

static uint64_t key_of(const vop_case *c, const char *buf) {
  char name[96];
  snprintf(name, sizeof name, "kernels/%s/%s", c->op->name, buf);
  return philox_key(c->seed, name);
}

/* Activation scale for VD_LARGE per op family, chosen so the op's float32 math stays finite
 * (HF computes in float32 too): norms square their input, linear layers sum products. VD_SMALL is
 * the same for every op: rms 1e-2 (mean square 1e-4, the low end of real early-layer activations). */
#define SMALL_SCALE 1e-2
static double act_scale(const vop_case *c, double large) {
  return c->dist == VD_LARGE ? large : c->dist == VD_SMALL ? SMALL_SCALE : 1.0;
}

static void fill_act(const vop_case *c, float *x, int64_t n, const char *name, double large, int channels) {
  oracle_fill_f32(x, n, c->dist, key_of(c, name), act_scale(c, large), channels);
}

static double bf(uint16_t h) { return (double)bf16_to_f32(h); }

/* Row lengths for attention cases: b0 = max, b1 = lo, others uniform in [lo, max]. */
static void gen_lens(const vop_case *c, int32_t *lens, int B, int lo, int max) {
  uint64_t key = key_of(c, "lens");
  for (int b = 0; b < B; b++) {
    if (b == 0) lens[b] = max;
    else if (b == 1) lens[b] = lo;
    else lens[b] = lo + (int)(unit01(key, (uint64_t)b) * (double)(max - lo + 1));
    if (lens[b] > max) lens[b] = max;
  }
}

static void set_buf(vop_layout *l, const char *name, vdtype t, int64_t n, bool out, int metric) {
  vop_buf *b = &l->b[l->n++];
  snprintf(b->name, sizeof b->name, "%s", name);
  b->dtype = t;
  b->n = n;
  b->is_output = out;
  b->metric = metric;
}

static vop_tol tol(double bound, double atol_frac, const char *why) { return (vop_tol){bound, atol_frac, why}; }

#define BF16_WHY "bf16 activations: inputs/outputs rounded to 8 bits of mantissa (2^-9 relative each), x4 margin"

/* ---------------- embed ---------------- */

static vstatus embed_layout(const vop_case *c, vop_layout *l) {
  l->n = 0;
  set_buf(l, "tok", DT_I32, c->batch, false, 0);
  set_buf(l, "table", DT_BF16, (int64_t)c->d[0] * c->d[1], false, 0);
  set_buf(l, "out", DT_F32, (int64_t)c->batch * c->d[1], true, VM_EXACT);
  return V_OK;
}
static vstatus embed_gen(const vop_case *c, const vop_layout *l, void **h) {
  int32_t *tok = h[0];
  int V = c->d[0];
  uint64_t k = key_of(c, "tok");
  for (int b = 0; b < c->batch; b++)
    tok[b] = b == 0 ? V - 1 : b == 1 ? 0 : (int32_t)(unit01(k, (uint64_t)b) * V) % V;
  if (c->dist == VD_LARGE) { /* near the bf16 limit (3.39e38): values must survive the widening exactly */
    int64_t n = l->b[1].n;
    uint16_t *w = h[1];
    uint64_t kw = key_of(c, "table");
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; i++) {
      double v = (unit01(kw, (uint64_t)i) * 2 - 1) * 3.3e38;
      w[i] = f32_to_bf16((float)v);
    }
  } else {
    oracle_fill_bf16(h[1], l->b[1].n, key_of(c, "table"), 1.0);
  }
  return V_OK;
}
static vstatus embed_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  const int32_t *tok = h[0];
  const uint16_t *t = h[1];
  int64_t D = c->d[1];
  for (int b = 0; b < c->batch; b++)
    for (int64_t i = 0; i < D; i++) ref[2][b * D + i] = bf(t[(int64_t)tok[b] * D + i]);
  return V_OK;
}
static vop_tol embed_tol(const vop_case *c, int out, vdtype act) {
  return tol(0, 0, "a gather copies bf16 values and widening bf16 to f32 is exact: bitwise equal");
}

/* ---------------- rmsnorm / add_rmsnorm ---------------- */

/* Norm inputs for VD_LARGE: 2^40, so the float32 sum of squares (HF computes it in float32)
 * stays finite for n up to 18432; larger values overflow in HF as well. */
#define NORM_LARGE 1099511627776.0

static void rmsnorm_f64(double *out, const double *x, const uint16_t *w, int n, double eps) {
  double ss = 0;
  for (int i = 0; i < n; i++) ss += x[i] * x[i];
  double r = 1.0 / sqrt(ss / n + eps);
  for (int i = 0; i < n; i++) out[i] = bf(w[i]) * (x[i] * r);
}

static vstatus rmsnorm_layout(const vop_case *c, vop_layout *l) {
  int64_t n = (int64_t)c->batch * c->d[0];
  l->n = 0;
  set_buf(l, "x", DT_F32, n, false, 0);
  set_buf(l, "w", DT_BF16, c->d[0], false, 0);
  set_buf(l, "out", DT_F32, n, true, VM_MAX_REL);
  return V_OK;
}
static void gen_norm_weight(const vop_case *c, uint16_t *w, int n) {
  uint64_t k = key_of(c, "w");
  for (int i = 0; i < n; i++) w[i] = f32_to_bf16((float)(1.0 + 0.2 * gauss(k, (uint64_t)i)));
}
static vstatus rmsnorm_gen(const vop_case *c, const vop_layout *l, void **h) {
  fill_act(c, h[0], l->b[0].n, "x", NORM_LARGE, c->d[0]);
  gen_norm_weight(c, h[1], c->d[0]);
  return V_OK;
}
static vstatus rmsnorm_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  int n = c->d[0];
  double *x = malloc((size_t)n * sizeof *x);
  if (!x) return VERR("rmsnorm oracle: out of memory (n=%d)", n);
  for (int b = 0; b < c->batch; b++) {
    const float *xr = (const float *)h[0] + (int64_t)b * n;
    for (int i = 0; i < n; i++) x[i] = xr[i];
    rmsnorm_f64(ref[2] + (int64_t)b * n, x, h[1], n, c->f[0]);
  }
  free(x);
  return V_OK;
}
static vop_tol norm_tol(const vop_case *c, vdtype act) {
  if (act == DT_BF16) return tol(1.6e-2, 1e-6, BF16_WHY);
  /* float32: the sum of n squares has a random-walk rounding error ~u*sqrt(n) (x4 margin);
   * rsqrt, x*r and *w add a few ulp; the 1e-6 floor of rms(ref) covers exact zeros. */
  double b = 2e-6 + 4 * U32 * sqrt((double)c->d[0]);
  return tol(b, 1e-6, "f32 sum of squares: ~u*sqrt(n) (x4) + a few ulp for rsqrt and scaling");
}
static vop_tol rmsnorm_tol(const vop_case *c, int out, vdtype act) { return norm_tol(c, act); }

static vstatus add_rmsnorm_layout(const vop_case *c, vop_layout *l) {
  int64_t n = (int64_t)c->batch * c->d[0];
  l->n = 0;
  set_buf(l, "x", DT_F32, n, false, 0);
  set_buf(l, "res", DT_F32, n, false, 0);
  set_buf(l, "w", DT_BF16, c->d[0], false, 0);
  set_buf(l, "h", DT_F32, n, true, VM_MAX_REL);
  set_buf(l, "out", DT_F32, n, true, VM_MAX_REL);
  return V_OK;
}
static vstatus add_rmsnorm_gen(const vop_case *c, const vop_layout *l, void **h) {
  fill_act(c, h[0], l->b[0].n, "x", NORM_LARGE / 2, c->d[0]);
  fill_act(c, h[1], l->b[1].n, "res", NORM_LARGE / 2, c->d[0]);
  gen_norm_weight(c, h[2], c->d[0]);
  return V_OK;
}
static vstatus add_rmsnorm_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  int n = c->d[0];
  for (int b = 0; b < c->batch; b++) {
    const float *xr = (const float *)h[0] + (int64_t)b * n, *rr = (const float *)h[1] + (int64_t)b * n;
    double *hr = ref[3] + (int64_t)b * n;
    for (int i = 0; i < n; i++) hr[i] = (double)xr[i] + (double)rr[i];
    rmsnorm_f64(ref[4] + (int64_t)b * n, hr, h[2], n, c->f[0]);
  }
  return V_OK;
}
static vop_tol add_rmsnorm_tol(const vop_case *c, int out, vdtype act) {
  if (out == 3) {
    if (act == DT_BF16) return tol(8e-3, 1e-6, BF16_WHY);
    return tol(U32 * 1.0001, 0, "x + res in float32 is one correctly rounded add: <= u relative");
  }
  return norm_tol(c, act);
}

/* ---------------- linear ---------------- */

#define LINEAR_LARGE 1e15 /* products with |w| < 0.1 summed over 2e4 terms stay far below FLT_MAX */

static vstatus linear_layout(const vop_case *c, vop_layout *l) {
  l->n = 0;
  set_buf(l, "x", DT_F32, (int64_t)c->batch * c->d[1], false, 0);
  set_buf(l, "w", DT_BF16, (int64_t)c->d[0] * c->d[1], false, 0);
  set_buf(l, "y", DT_F32, (int64_t)c->batch * c->d[0], true, VM_REL_L2);
  return V_OK;
}
static vstatus linear_gen(const vop_case *c, const vop_layout *l, void **h) {
  fill_act(c, h[0], l->b[0].n, "x", LINEAR_LARGE, c->d[1]);
  oracle_fill_bf16(h[1], l->b[1].n, key_of(c, "w"), 1.0 / sqrt((double)c->d[1]));
  return V_OK;
}
static vstatus linear_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  const int64_t O = c->d[0], I = c->d[1];
  const float *x = h[0];
  const uint16_t *w = h[1];
  for (int b = 0; b < c->batch; b++) {
    const float *xr = x + b * I;
    double *y = ref[2] + b * O;
#pragma omp parallel for schedule(static) if (O * I > (1 << 18))
    for (int64_t o = 0; o < O; o++) {
      const uint16_t *wr = w + o * I;
      double s = 0;
      for (int64_t i = 0; i < I; i++) s += bf(wr[i]) * (double)xr[i];
      y[o] = s;
    }
  }
  return V_OK;
}
static vop_tol linear_tol(const vop_case *c, int out, vdtype act) {
  if (act == DT_BF16) return tol(1e-2, 0, BF16_WHY);
  /* float32 accumulation over `in` products: rounding errors of random sign grow ~u*sqrt(in);
   * x8 margin for blocked/partial-sum orders; bf16 weights are exact in f32. */
  return tol(2e-6 + 8 * U32 * sqrt((double)c->d[1]), 0, "f32 dot over in: ~u*sqrt(in) (x8 margin)");
}

/* ---------------- rope ---------------- */

static vstatus rope_layout(const vop_case *c, vop_layout *l) {
  int64_t n = (int64_t)c->batch * c->d[0] * c->d[1];
  l->n = 0;
  set_buf(l, "x", DT_F32, n, false, 0);
  set_buf(l, "pos", DT_I32, c->batch, false, 0);
  set_buf(l, "out", DT_F32, n, true, VM_REL_L2);
  return V_OK;
}
static vstatus rope_gen(const vop_case *c, const vop_layout *l, void **h) {
  fill_act(c, h[0], l->b[0].n, "x", 1e30, c->d[1]);
  int32_t *pos = h[1];
  int maxp = c->d[3] > 0 ? c->d[3] : 1;
  int orig = c->cfg.yarn.enabled ? c->cfg.yarn.original_max_position_embeddings : maxp / 2;
  /* 0, around the original window (YaRN's interesting edge), the last position, then random. */
  const int fixed[5] = {0, orig - 1, orig, orig + 1, maxp - 1};
  uint64_t k = key_of(c, "pos");
  for (int b = 0; b < c->batch; b++) {
    int p = b < 5 ? fixed[b] : (int)(unit01(k, (uint64_t)b) * maxp);
    if (p < 0) p = 0;
    if (p >= maxp) p = maxp - 1;
    pos[b] = p;
  }
  return V_OK;
}
static vstatus rope_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  const int H = c->d[0], r = c->d[1], half = r / 2, inter = c->d[2];
  float inv[512];
  if (half > 512) return VERR("rope oracle: case '%s': rope dim %d > 1024", c->shape, r);
  double attn = ds_rope_inv_freq(&c->cfg, inv);
  const float *x = h[0];
  const int32_t *pos = h[1];
  double tmp[1024];
  for (int b = 0; b < c->batch; b++)
    for (int hh = 0; hh < H; hh++) {
      const float *v = x + ((int64_t)b * H + hh) * r;
      double *o = ref[2] + ((int64_t)b * H + hh) * r;
      for (int i = 0; i < half; i++) {
        tmp[i] = inter ? v[2 * i] : v[i];
        tmp[half + i] = inter ? v[2 * i + 1] : v[half + i];
      }
      for (int i = 0; i < half; i++) {
        /* HF multiplies position by inv_freq in float32: one correctly rounded product,
         * reproduced exactly here; everything after it is double. */
        float ang = (float)pos[b] * inv[i];
        double cs = cos((double)ang) * attn, sn = sin((double)ang) * attn;
        o[i] = tmp[i] * cs - tmp[half + i] * sn;
        o[half + i] = tmp[half + i] * cs + tmp[i] * sn;
      }
    }
  return V_OK;
}
static vop_tol rope_tol(const vop_case *c, int out, vdtype act) {
  if (act == DT_BF16) return tol(1e-2, 0, BF16_WHY);
  return tol(1e-6, 0, "f32 cos/sin/attn_factor roundings and a 2-term sum: ~4u per element (x4 margin); angle is exact");
}

/* ---------------- attention (expanded MLA decode, split partials) ---------------- */

void oracle_attention_f64(double *out, const double *q, const double *k, int64_t k_stride, const double *v,
                          int64_t v_stride, int n, int qk, int vd, double scale, double *lse) {
  double *s = malloc((size_t)(n > 0 ? n : 1) * sizeof *s);
  double m = -INFINITY, z = 0;
  if (!s) { /* no memory: a NaN oracle makes the case fail visibly */
    for (int i = 0; i < vd; i++) out[i] = NAN;
    if (lse) *lse = NAN;
    return;
  }
  for (int j = 0; j < n; j++) {
    double d = 0;
    for (int i = 0; i < qk; i++) d += q[i] * k[(int64_t)j * k_stride + i];
    s[j] = d * scale;
    if (s[j] > m) m = s[j];
  }
  for (int j = 0; j < n; j++) z += (s[j] = exp(s[j] - m));
  for (int i = 0; i < vd; i++) out[i] = 0;
  for (int j = 0; j < n; j++)
    for (int i = 0; i < vd; i++) out[i] += s[j] / z * v[(int64_t)j * v_stride + i];
  if (lse) *lse = m + log(z);
  free(s);
}

/* Shared by mla_decode and attn_partial: q [B][H][qk], k [B][H][L][qk], v [B][H][L][vd], lens [B]. */
static void attn_bufs(const vop_case *c, vop_layout *l, int H, int qk, int vd, int L) {
  int64_t B = c->batch;
  l->n = 0;
  set_buf(l, "q", DT_F32, B * H * qk, false, 0);
  set_buf(l, "k", DT_F32, B * H * (int64_t)L * qk, false, 0);
  set_buf(l, "v", DT_F32, B * H * (int64_t)L * vd, false, 0);
  set_buf(l, "lens", DT_I32, B, false, 0);
}
static void attn_gen(const vop_case *c, const vop_layout *l, void **h, int qk, int L, int lo) {
  fill_act(c, h[0], l->b[0].n, "q", 1.0, qk);
  fill_act(c, h[1], l->b[1].n, "k", 1.0, qk);
  fill_act(c, h[2], l->b[2].n, "v", 1.0, 0);
  gen_lens(c, h[3], c->batch, lo, L);
}
/* Runs the double oracle for head (b, h) over positions [j0, j1). */
static void attn_head(const vop_case *c, void *const *h, int H, int qk, int vd, int L, int b, int hh, int j0, int j1,
                      double *out, double *lse) {
  const float *q = (const float *)h[0] + ((int64_t)b * H + hh) * qk;
  const float *k = (const float *)h[1] + (((int64_t)b * H + hh) * L + j0) * qk;
  const float *v = (const float *)h[2] + (((int64_t)b * H + hh) * L + j0) * vd;
  int n = j1 - j0;
  double *qd = malloc(sizeof(double) * (size_t)qk), *kd = malloc(sizeof(double) * ((size_t)n * qk + 1)),
         *vdd = malloc(sizeof(double) * ((size_t)n * vd + 1));
  if (!qd || !kd || !vdd) {
    for (int i = 0; i < vd; i++) out[i] = NAN;
    if (lse) *lse = NAN;
    free(qd), free(kd), free(vdd);
    return;
  }
  for (int i = 0; i < qk; i++) qd[i] = q[i];
  for (int64_t i = 0; i < (int64_t)n * qk; i++) kd[i] = k[i];
  for (int64_t i = 0; i < (int64_t)n * vd; i++) vdd[i] = v[i];
  oracle_attention_f64(out, qd, kd, qk, vdd, vd, n, qk, vd, c->f[0], lse);
  free(qd);
  free(kd);
  free(vdd);
}

static vstatus mla_decode_layout(const vop_case *c, vop_layout *l) {
  attn_bufs(c, l, c->d[0], c->d[1], c->d[2], c->d[3]);
  set_buf(l, "out", DT_F32, (int64_t)c->batch * c->d[0] * c->d[2], true, VM_REL_L2);
  return V_OK;
}
static vstatus mla_decode_gen(const vop_case *c, const vop_layout *l, void **h) {
  attn_gen(c, l, h, c->d[1], c->d[3], 1);
  return V_OK;
}
static vstatus mla_decode_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  const int H = c->d[0], qk = c->d[1], vd = c->d[2], L = c->d[3];
  const int32_t *lens = h[3];
  for (int b = 0; b < c->batch; b++)
#pragma omp parallel for schedule(dynamic)
    for (int hh = 0; hh < H; hh++)
      attn_head(c, h, H, qk, vd, L, b, hh, 0, lens[b], ref[4] + ((int64_t)b * H + hh) * vd, NULL);
  return V_OK;
}
static vop_tol attn_tol(const vop_case *c, vdtype act) {
  if (act == DT_BF16) return tol(2e-2, 0, BF16_WHY);
  if (c->dist == VD_HEAVY)
    return tol(2e-4, 0, "outlier channels (x100) make |q.k| ~1e3: f32 score error u*sum|q_i k_i| ~1e-4 absolute, "
                        "which softmax turns into the same relative error");
  return tol(2e-5, 0, "f32 dots over qk (~u*sqrt(qk)), exp of O(10) scores (~10u) and a sum over ctx: x10 margin");
}
static vop_tol mla_decode_tol(const vop_case *c, int out, vdtype act) { return attn_tol(c, act); }

/* ---- absorbed MLA ---- */

void oracle_mla_absorbed_f64(double *out, const float *q_nope, const float *q_pe, const float *ckv,
                             const float *kpe, const uint16_t *wkv_b, int H, int n, int r, int v, int kvl,
                             int len, double scale) {
  double *ql = malloc(sizeof(double) * (size_t)kvl), *ol = malloc(sizeof(double) * (size_t)kvl);
  double *s = malloc(sizeof(double) * (size_t)(len > 0 ? len : 1));
  if (!ql || !ol || !s) {
    for (int64_t i = 0; i < (int64_t)H * v; i++) out[i] = NAN;
    free(ql), free(ol), free(s);
    return;
  }
  for (int hh = 0; hh < H; hh++) {
    const uint16_t *wuk = wkv_b + (int64_t)hh * (n + v) * kvl; /* rows [h*(n+v), h*(n+v)+n) */
    const uint16_t *wuv = wuk + (int64_t)n * kvl;              /* rows [h*(n+v)+n, (h+1)*(n+v)) */
    const float *qn = q_nope + (int64_t)hh * n, *qp = q_pe + (int64_t)hh * r;
    for (int cc = 0; cc < kvl; cc++) ql[cc] = 0;
    for (int i = 0; i < n; i++)
      for (int cc = 0; cc < kvl; cc++) ql[cc] += (double)qn[i] * bf(wuk[(int64_t)i * kvl + cc]);
    double m = -INFINITY, z = 0;
    for (int t = 0; t < len; t++) {
      double d = 0;
      for (int cc = 0; cc < kvl; cc++) d += ql[cc] * ckv[(int64_t)t * kvl + cc];
      for (int i = 0; i < r; i++) d += (double)qp[i] * kpe[(int64_t)t * r + i];
      s[t] = d * scale;
      if (s[t] > m) m = s[t];
    }
    for (int t = 0; t < len; t++) z += (s[t] = exp(s[t] - m));
    for (int cc = 0; cc < kvl; cc++) ol[cc] = 0;
    for (int t = 0; t < len; t++)
      for (int cc = 0; cc < kvl; cc++) ol[cc] += s[t] / z * ckv[(int64_t)t * kvl + cc];
    for (int j = 0; j < v; j++) {
      double a = 0;
      for (int cc = 0; cc < kvl; cc++) a += bf(wuv[(int64_t)j * kvl + cc]) * ol[cc];
      out[(int64_t)hh * v + j] = a;
    }
  }
  free(ql);
  free(ol);
  free(s);
}

static vstatus mla_absorbed_layout(const vop_case *c, vop_layout *l) {
  const int64_t B = c->batch, H = c->d[0], n = c->d[1], r = c->d[2], v = c->d[3], kvl = c->d[4], L = c->d[5];
  l->n = 0;
  set_buf(l, "q_nope", DT_F32, B * H * n, false, 0);
  set_buf(l, "q_pe", DT_F32, B * H * r, false, 0);
  set_buf(l, "ckv", DT_F32, B * L * kvl, false, 0);
  set_buf(l, "kpe", DT_F32, B * L * r, false, 0);
  set_buf(l, "wkv_b", DT_BF16, H * (n + v) * kvl, false, 0);
  set_buf(l, "lens", DT_I32, B, false, 0);
  set_buf(l, "out", DT_F32, B * H * v, true, VM_REL_L2);
  return V_OK;
}
static vstatus mla_absorbed_gen(const vop_case *c, const vop_layout *l, void **h) {
  fill_act(c, h[0], l->b[0].n, "q_nope", 1.0, c->d[1]);
  fill_act(c, h[1], l->b[1].n, "q_pe", 1.0, c->d[2]);
  fill_act(c, h[2], l->b[2].n, "ckv", 1.0, c->d[4]);
  fill_act(c, h[3], l->b[3].n, "kpe", 1.0, c->d[2]);
  oracle_fill_bf16(h[4], l->b[4].n, key_of(c, "wkv_b"), 1.0 / sqrt((double)c->d[4]));
  gen_lens(c, h[5], c->batch, 1, c->d[5]);
  return V_OK;
}
/* Row b attends the cache of sequence slot[b] (slot NULL: its own, b) over its first lens[b] positions. */
static void mla_absorbed_rows(const vop_case *c, void *const *h, double **ref, const int32_t *slot) {
  const int H = c->d[0], n = c->d[1], r = c->d[2], v = c->d[3], kvl = c->d[4], L = c->d[5];
  const int32_t *lens = h[5];
#pragma omp parallel for schedule(dynamic)
  for (int b = 0; b < c->batch; b++) {
    const int64_t s = slot ? slot[b] : b;
    oracle_mla_absorbed_f64(ref[6] + (int64_t)b * H * v, (const float *)h[0] + (int64_t)b * H * n,
                            (const float *)h[1] + (int64_t)b * H * r, (const float *)h[2] + s * L * kvl,
                            (const float *)h[3] + s * L * r, h[4], H, n, r, v, kvl, lens[b], c->f[0]);
  }
}
static vstatus mla_absorbed_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  mla_absorbed_rows(c, h, ref, NULL);
  return V_OK;
}
static vop_tol mla_absorbed_tol(const vop_case *c, int out, vdtype act) {
  if (act == DT_BF16) return tol(2e-2, 0, BF16_WHY);
  /* Outlier channels make scores of ~1e3 (a score's f32 error ~u*sum|terms| moves the softmax by that much)
   * and outputs that cancel (rel_l2 is relative to ||out||, not to sum p|v|): measured on cpu-ref (f32)
   * over 2070 heavy cases (tiny and small, seeds 9000-9649) median 2e-7, max 8.8e-5, and 2.1e-4 at seed
   * 4301 (the old 5e-5 failed smoke, pr and h200 there); 1e-3 is 5x the worst seen. The right bound is
   * relative to sum p|v| (a second oracle output): not built yet. */
  if (c->dist == VD_HEAVY)
    return tol(1e-3, 0, "outlier channels (x100) in q_nope/ckv/kpe: scores ~1e3 and cancelling outputs; f32 rel_l2 "
                        "measured <= 2.1e-4 in 2071 cases, x5");
  /* float32 chains: q_nope through W_UK (n terms), scores over kv_lora (512) terms, W_UV over kv_lora. */
  return tol(3e-5, 0, "f32 products over n, kv_lora and ctx terms: ~u*sqrt(terms) each, x10 margin");
}

/* ---- absorbed MLA under decode context parallelism ---- */

/* mla_absorbed's buffers plus slot [B] after the output (row b attends the cache of sequence slot[b]:
 * the rows of a multi-token step share one) and d6 = N ranks. The oracle is the UNSPLIT attention
 * (oracle_mla_absorbed_f64 over the slot's first lens[b] positions), so the answer is known
 * independently of DCP: a variant that spreads the positions over N ranks must merge them back. */
static vstatus mla_absorbed_dcp_layout(const vop_case *c, vop_layout *l) {
  VTRY(mla_absorbed_layout(c, l));
  set_buf(l, "slot", DT_I32, c->batch, false, 0);
  return V_OK;
}
/* Rows as decode steps: sequence k (slot k) takes 1, 2, 3, 1, 2, 3, ... rows, cut at B (a causal step
 * of g tokens: its row j sees len - g + 1 + j keys). Sequence 0 ends at ctx keys; sequence 1 is a
 * 2-token step from position 0 (1 and 2 keys: fewer than the ranks from N = 3 on, and at 1 key every
 * rank but 0 owns none); the others end uniformly in [g, ctx]. Key counts are clamped to [1, ctx]. */
static vstatus mla_absorbed_dcp_gen(const vop_case *c, const vop_layout *l, void **h) {
  VTRY(mla_absorbed_gen(c, l, h));
  const int L = c->d[5];
  int32_t *lens = h[5], *slot = h[7];
  const uint64_t key = key_of(c, "rows");
  int b = 0;
  for (int k = 0; b < c->batch; k++) {
    const int g = k % 3 + 1;
    const int end = k == 0 ? L : k == 1 ? 2 : g + (int)(unit01(key, (uint64_t)k) * (double)(L - g + 1));
    for (int j = 0; j < g && b < c->batch; j++, b++) {
      const int len = end - g + 1 + j;
      slot[b] = k;
      lens[b] = len < 1 ? 1 : len > L ? L : len;
    }
  }
  return V_OK;
}
static vstatus mla_absorbed_dcp_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  mla_absorbed_rows(c, h, ref, h[7]);
  return V_OK;
}
/* mla_absorbed's bounds: DCP adds an fp32 merge per rank and an fp32 combine of N parts before the
 * same bf16 rounding of the output (no rounding the unsplit path does not have). */
static vop_tol mla_absorbed_dcp_tol(const vop_case *c, int out, vdtype act) { return mla_absorbed_tol(c, out, act); }

/* ---- split-KV partials ---- */

static vstatus attn_partial_layout(const vop_case *c, vop_layout *l) {
  const int64_t B = c->batch, H = c->d[0], vd = c->d[2], S = c->d[4];
  attn_bufs(c, l, c->d[0], c->d[1], c->d[2], c->d[3]);
  set_buf(l, "o_part", DT_F32, B * H * S * vd, true, VM_REL_L2);
  set_buf(l, "lse", DT_F32, B * H * S, true, VM_MAX_REL);
  return V_OK;
}
static vstatus attn_partial_gen(const vop_case *c, const vop_layout *l, void **h) {
  attn_gen(c, l, h, c->d[1], c->d[3], c->d[4]); /* every sequence has >= splits positions */
  return V_OK;
}
static vstatus attn_partial_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  const int H = c->d[0], qk = c->d[1], vd = c->d[2], L = c->d[3], S = c->d[4];
  const int32_t *lens = h[3];
  for (int b = 0; b < c->batch; b++)
#pragma omp parallel for schedule(dynamic)
    for (int hh = 0; hh < H; hh++)
      for (int s = 0; s < S; s++) {
        int64_t o = ((int64_t)b * H + hh) * S + s;
        attn_head(c, h, H, qk, vd, L, b, hh, oracle_split_begin(s, lens[b], S), oracle_split_begin(s + 1, lens[b], S),
                  ref[4] + o * vd, ref[5] + o);
      }
  return V_OK;
}
static vop_tol attn_partial_tol(const vop_case *c, int out, vdtype act) {
  if (out == 5) {
    /* The float32 score error is proportional to the score magnitude (u * sum|q_i k_i| * scale),
     * so lse is compared relative to |lse| + rms(lse) (atol_frac 1). */
    if (act == DT_BF16) return tol(2e-2, 1.0, "bf16 scores: lse error ~2^-9 relative to the score scale");
    if (c->dist == VD_HEAVY)
      return tol(1e-4, 1.0, "outlier channels: scores ~1e3-1e5, f32 dot error ~u*sqrt(qk)*|score|, x10 margin");
    return tol(1e-5, 1.0, "lse of O(10) f32 scores: error ~u*sqrt(qk) relative to the score scale, x10 margin");
  }
  return attn_tol(c, act);
}

/* ---------------- lse_combine ---------------- */

static vstatus lse_combine_layout(const vop_case *c, vop_layout *l) {
  const int64_t B = c->batch, H = c->d[0], vd = c->d[1], S = c->d[2];
  l->n = 0;
  set_buf(l, "o_part", DT_F32, B * H * S * vd, false, 0);
  set_buf(l, "lse", DT_F32, B * H * S, false, 0);
  set_buf(l, "out", DT_F32, B * H * vd, true, VM_REL_L2);
  return V_OK;
}
static vstatus lse_combine_gen(const vop_case *c, const vop_layout *l, void **h) {
  oracle_fill_f32(h[0], l->b[0].n, c->dist == VD_HEAVY ? VD_HEAVY : VD_NORMAL, key_of(c, "o_part"), 1.0, c->d[1]);
  float *lse = h[1];
  uint64_t k = key_of(c, "lse");
  for (int64_t i = 0; i < l->b[1].n; i++) {
    double g = gauss(k, (uint64_t)i);
    /* large: log-sum-exp values of long contexts with big scores; exp() of them overflows
     * float32 unless the combine subtracts the maximum first. */
    lse[i] = (float)(c->dist == VD_LARGE ? 200.0 + 50.0 * g : c->dist == VD_HEAVY ? 20.0 * g : 3.0 * g);
  }
  return V_OK;
}
static vstatus lse_combine_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  const int64_t H = c->d[0], vd = c->d[1], S = c->d[2];
  const float *o = h[0], *lse = h[1];
  for (int64_t bh = 0; bh < c->batch * H; bh++) {
    double m = -INFINITY, z = 0;
    for (int64_t s = 0; s < S; s++) m = fmax(m, lse[bh * S + s]);
    double *out = ref[2] + bh * vd;
    for (int64_t i = 0; i < vd; i++) out[i] = 0;
    for (int64_t s = 0; s < S; s++) {
      double w = exp((double)lse[bh * S + s] - m);
      z += w;
      for (int64_t i = 0; i < vd; i++) out[i] += w * o[(bh * S + s) * vd + i];
    }
    for (int64_t i = 0; i < vd; i++) out[i] /= z;
  }
  return V_OK;
}
static vop_tol lse_combine_tol(const vop_case *c, int out, vdtype act) {
  if (act == DT_BF16) return tol(1e-2, 0, BF16_WHY);
  return tol(2e-6, 0, "S weights exp(lse_s - max) (~2u each) and an S-term weighted sum: a few ulp, x4 margin");
}

/* ---------------- router ---------------- */

void oracle_router_f64(const float *logits, const float *bias, int E, int k, int G, int TG, int norm,
                       double scaling, int32_t *idx, double *wt, double *sel) {
  if (G < 1 || G > 1024 || E % G != 0) G = 1, TG = 1;
  int per = E / G;
  double *sig = malloc(sizeof(double) * (size_t)E), gs[1024];
  unsigned char *keep = calloc((size_t)G, 1), *taken = calloc((size_t)E, 1);
  if (!sig || !keep || !taken || k > E) {
    for (int j = 0; j < k; j++) idx[j] = -1, wt[j] = NAN;
    free(sig), free(keep), free(taken);
    return;
  }
  for (int e = 0; e < E; e++) {
    sig[e] = 1.0 / (1.0 + exp(-(double)logits[e]));
    sel[e] = sig[e] + (double)bias[e];
  }
  if (G > 1) {
    for (int g = 0; g < G && g < 1024; g++) { /* group score: sum of its top-2 biased scores */
      double a = -INFINITY, b2 = -INFINITY;
      for (int e = g * per; e < (g + 1) * per; e++) {
        if (sel[e] > a) b2 = a, a = sel[e];
        else if (sel[e] > b2) b2 = sel[e];
      }
      gs[g] = per >= 2 ? a + b2 : a;
    }
    for (int t = 0; t < TG; t++) {
      int best = -1;
      for (int g = 0; g < G; g++)
        if (!keep[g] && (best < 0 || gs[g] > gs[best])) best = g;
      keep[best] = 1;
    }
    for (int e = 0; e < E; e++)
      if (!keep[e / per]) sel[e] = 0.0; /* HF: masked_fill(~mask, 0.0) */
  }
  double sum = 0;
  for (int j = 0; j < k; j++) {
    int best = -1;
    for (int e = 0; e < E; e++)
      if (!taken[e] && (best < 0 || sel[e] > sel[best])) best = e;
    taken[best] = 1;
    idx[j] = best;
    wt[j] = sig[best];
    sum += sig[best];
  }
  for (int j = 0; j < k; j++) wt[j] = (norm ? wt[j] / (sum + 1e-20) : wt[j]) * scaling;
  free(sig);
  free(keep);
  free(taken);
}

static vstatus router_layout(const vop_case *c, vop_layout *l) {
  l->n = 0;
  set_buf(l, "logits", DT_F32, (int64_t)c->batch * c->d[0], false, 0);
  set_buf(l, "bias", DT_F32, c->d[0], false, 0);
  set_buf(l, "idx", DT_I32, (int64_t)c->batch * c->d[1], true, VM_TOPK_SET);
  set_buf(l, "wt", DT_F32, (int64_t)c->batch * c->d[1], true, VM_CUSTOM);
  return V_OK;
}
static vstatus router_gen(const vop_case *c, const vop_layout *l, void **h) {
  fill_act(c, h[0], l->b[0].n, "logits", 1e4, 0); /* large: sigmoid saturates to exactly 0 or 1 */
  if (c->dist == VD_NEARTIE) memset(h[1], 0, sizeof(float) * (size_t)c->d[0]); /* no bias: ties stay ties */
  else oracle_fill_f32(h[1], c->d[0], VD_NORMAL, key_of(c, "bias"), 0.05, 0);
  return V_OK;
}
static vstatus router_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  const int E = c->d[0], k = c->d[1];
  int32_t idx[1024];
  double *sel = malloc(sizeof(double) * (size_t)E);
  if (!sel || k > 1024) { free(sel); return VERR("router oracle: case '%s': bad sizes E=%d k=%d", c->shape, E, k); }
  for (int b = 0; b < c->batch; b++) {
    oracle_router_f64((const float *)h[0] + (int64_t)b * E, h[1], E, k, c->d[2], c->d[3], c->d[4], c->f[0], idx,
                      ref[3] + (int64_t)b * k, sel);
    for (int j = 0; j < k; j++) ref[2][(int64_t)b * k + j] = idx[j];
  }
  free(sel);
  return V_OK;
}
static vop_tol router_tol(const vop_case *c, int out, vdtype act) {
  if (out == 2) return tol(0, 0, "the chosen expert set must equal the oracle's; swaps within 1e-5 of the k-th "
                                 "selection score (or of the group cut) are near-ties and accepted");
  if (act == DT_BF16) return tol(1e-2, 0, BF16_WHY);
  return tol(1e-6, 0, "f32 sigmoid (a few ulp), a k-term sum, a division and the scaling: ~8u (x2 margin); "
                     "beyond the absolute error of f32 underflow (k*FLT_MIN*scale/sum, router_underflow)");
}

#define TIE_MARGIN 1e-5

/* The absolute error a correct float32 router may have in a weight from underflow alone: a sigmoid
 * below 1/FLT_MAX (a logit under -88.7) is exactly 0 in float32 (1 / (1 + inf), as HF's float32
 * sigmoid gives) and one below FLT_MIN keeps few bits, where the oracle's double keeps e.g. 7e-41.
 * Each of the k chosen sigmoids may be off by FLT_MIN; normalized, a weight is s * scaling / (sum +
 * 1e-20), so the error is k * FLT_MIN * |scaling| / (sum + 1e-20), which the 1e-20 can make ~1e-18:
 * a relative check of such a weight (6.7e-35 against 0) failed correct code (latency, seeds 8003
 * and 8231, edge/e1_k1 at large logits). lg: the row's logits; oidx: the oracle's k experts. */
static double router_underflow(const float *lg, const int32_t *oidx, int k, int norm, double scaling) {
  double sum = 0;
  for (int j = 0; j < k; j++) sum += 1.0 / (1.0 + exp(-(double)lg[oidx[j]]));
  return k * (double)FLT_MIN * fabs(scaling) / (norm ? sum + 1e-20 : 1.0);
}

/* Error of router outputs: idx -> rows with an unexplained set difference; wt -> max relative
 * error of the weight of each chosen expert, on rows whose set matches exactly. */
static double router_check(const vop_case *c, const vop_layout *l, void *const *h, double *const *ref, int out,
                           char *note) {
  const int E = c->d[0], k = c->d[1];
  int G = c->d[2], TG = c->d[3];
  if (G < 1 || G > 1024 || E % G) G = 1, TG = 1;
  const int per = E / G;
  if (k > 1024 || k > E) {
    snprintf(note, 160, "top-k %d outside 1..min(E, 1024)", k);
    return INFINITY;
  }
  double *sel = malloc(sizeof(double) * (size_t)E), wt[1024];
  unsigned char *in_o = malloc((size_t)E);
  int32_t oidx[1024];
  if (!sel || !in_o) {
    free(sel), free(in_o);
    snprintf(note, 160, "out of memory in the router check");
    return INFINITY;
  }
  double err = 0;
  int skipped = 0, accepted_ties = 0;
  for (int b = 0; b < c->batch; b++) {
    const float *lg = (const float *)h[0] + (int64_t)b * E;
    oracle_router_f64(lg, h[1], E, k, G, TG, c->d[4], c->f[0], oidx, wt, sel);
    /* group cut ambiguous? (the TG-th and next group scores within the margin) */
    bool group_tie = false;
    if (G > 1 && TG < G) {
      double gsc[1024];
      for (int g = 0; g < G; g++) {
        double a = -INFINITY, b2 = -INFINITY;
        for (int e = g * per; e < (g + 1) * per; e++) {
          double s = 1.0 / (1.0 + exp(-(double)lg[e])) + ((const float *)h[1])[e];
          if (s > a) b2 = a, a = s;
          else if (s > b2) b2 = s;
        }
        gsc[g] = per >= 2 ? a + b2 : a;
      }
      for (int i = 0; i < G; i++) /* sort descending (small G) */
        for (int j = i + 1; j < G; j++)
          if (gsc[j] > gsc[i]) { double t = gsc[i]; gsc[i] = gsc[j]; gsc[j] = t; }
      group_tie = fabs(gsc[TG - 1] - gsc[TG]) <= TIE_MARGIN;
    }
    const int32_t *grow = (const int32_t *)h[2] + (int64_t)b * k;
    memset(in_o, 0, (size_t)E);
    for (int j = 0; j < k; j++) in_o[oidx[j]] = 1;
    double kth = sel[oidx[k - 1]];
    bool bad = false, same = true;
    for (int j = 0; j < k; j++) {
      int e = grow[j];
      bool dup = false;
      for (int j2 = 0; j2 < j; j2++) dup |= grow[j2] == e;
      if (e < 0 || e >= E || dup) { bad = true; same = false; break; }
      if (!in_o[e]) {
        same = false;
        if (!group_tie && fabs(sel[e] - kth) > TIE_MARGIN) bad = true;
      }
    }
    if (!same && !bad) {
      /* every oracle expert missing from got must also sit at the boundary */
      for (int j = 0; j < k && !group_tie; j++) {
        bool found = false;
        for (int j2 = 0; j2 < k; j2++) found |= grow[j2] == oidx[j];
        if (!found && fabs(sel[oidx[j]] - kth) > TIE_MARGIN) bad = true;
      }
    }
    if (out == 2) {
      if (bad) err += 1;
      else if (!same) accepted_ties++;
    } else if (same) {
      const float *gw = (const float *)h[3] + (int64_t)b * k;
      const double under = router_underflow(lg, oidx, k, c->d[4], c->f[0]);
      for (int j = 0; j < k; j++) {
        int jo = 0;
        while (oidx[jo] != grow[j]) jo++;
        double diff = fabs((double)gw[j] - wt[jo]) - under;
        if (diff < 0) diff = 0; /* NaN stays NaN (fmax would drop it) */
        const double d = diff / fmax(fabs(wt[jo]), 1e-30);
        if (!isnan(err) && !(d <= err)) err = d; /* NaN propagates and stays */
      }
    } else {
      skipped++;
    }
  }
  if (out == 2 && accepted_ties) snprintf(note, 160, "%d near-tie rows accepted", accepted_ties);
  if (out == 3 && skipped) snprintf(note, 160, "%d rows with a different (near-tie or wrong) set not compared", skipped);
  free(sel);
  free(in_o);
  return err;
}

/* ---------------- swiglu ---------------- */

static vstatus swiglu_layout(const vop_case *c, vop_layout *l) {
  const int64_t B = c->batch, D = c->d[0], I = c->d[1];
  l->n = 0;
  set_buf(l, "x", DT_F32, B * D, false, 0);
  set_buf(l, "gate", DT_BF16, I * D, false, 0);
  set_buf(l, "up", DT_BF16, I * D, false, 0);
  set_buf(l, "down", DT_BF16, D * I, false, 0);
  set_buf(l, "out", DT_F32, B * D, true, VM_CUSTOM);
  return V_OK;
}
static vstatus swiglu_gen(const vop_case *c, const vop_layout *l, void **h) {
  fill_act(c, h[0], l->b[0].n, "x", 1.0, c->d[0]);
  oracle_fill_bf16(h[1], l->b[1].n, key_of(c, "gate"), 1.0 / sqrt((double)c->d[0]));
  oracle_fill_bf16(h[2], l->b[2].n, key_of(c, "up"), 1.0 / sqrt((double)c->d[0]));
  oracle_fill_bf16(h[3], l->b[3].n, key_of(c, "down"), 1.0 / sqrt((double)c->d[1]));
  return V_OK;
}
static vstatus swiglu_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  const int64_t D = c->d[0], I = c->d[1];
  const uint16_t *g = h[1], *u = h[2], *dn = h[3];
  double *a = malloc(sizeof(double) * (size_t)I);
  if (!a) return VERR("swiglu oracle: out of memory (inter=%lld)", (long long)I);
  for (int b = 0; b < c->batch; b++) {
    const float *x = (const float *)h[0] + b * D;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < I; i++) {
      double sg = 0, su = 0;
      for (int64_t j = 0; j < D; j++) {
        sg += bf(g[i * D + j]) * x[j];
        su += bf(u[i * D + j]) * x[j];
      }
      a[i] = sg / (1.0 + exp(-sg)) * su;
    }
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < D; o++) {
      double s = 0;
      for (int64_t i = 0; i < I; i++) s += bf(dn[o * I + i]) * a[i];
      ref[4][b * D + o] = s;
    }
  }
  free(a);
  return V_OK;
}
static vop_tol swiglu_tol(const vop_case *c, int out, vdtype act) {
  if (act == DT_BF16) return tol(2e-2, 0, BF16_WHY " (the intermediate is rounded too)");
  return tol(4e-6 + 8 * U32 * (sqrt((double)c->d[0]) + sqrt((double)c->d[1])), 0,
             "two f32 dot chains (hidden, then inter terms): ~u*sqrt(n) each, x8 margin; error relative to "
             "the output's conditioned magnitude");
}

/* Error of swiglu's output: the plain relative L2 error, with two allowances a float32 evaluation
 * needs and the bound's u sqrt(n) analysis does not cover:
 * - ill-conditioned silu: where k_i = |1 + g_i (1 - sigmoid(g_i))| > 2 (g_i below about -3.5) silu
 *   magnifies the rounding of g_i k_i times, so those terms' magnified size,
 *   e_o = sum_{k_i > 2} |down_oi| |a_i| k_i (a_i = silu(g_i) u_i), is added to the output's size:
 *   den = sum_o out_o^2 + e_o^2;
 * - below g = -88.72 float32's exp(-g) overflows and a float32 silu is 0 (the exact value is below
 *   1e-36 |g|): an output is also accepted when it equals the exact one with those terms left out.
 * Seen on a correct float32 evaluation: hidden 1, inter 1, heavy x, g = -90: out 0 for an exact
 * -9.7e-36, "9.7e-6 > 5e-6" against the old 1e-30 floor. Never larger than the plain relative L2
 * error; on well-conditioned cases (no g below -3.5) equal to it, so sensitivity is unchanged there. */
#define SILU_F32_ZERO (-88.72) /* log(FLT_MAX): exp(-g) is inf in float32 below this g */
static double swiglu_check(const vop_case *c, const vop_layout *l, void *const *h, double *const *ref, int out,
                           char *note) {
  const int64_t D = c->d[0], I = c->d[1];
  const uint16_t *g = h[1], *u = h[2], *dn = h[3];
  const float *y = h[out];
  /* per row: the terms that need an allowance (ill-conditioned or float32-zero silu), rarely any */
  int64_t *flag = malloc(sizeof(int64_t) * (size_t)I);
  double *m = malloc(sizeof(double) * (size_t)I), *az = malloc(sizeof(double) * (size_t)I);
  if (!flag || !m || !az) {
    free(flag), free(m), free(az);
    snprintf(note, 160, "out of memory in the swiglu check");
    return INFINITY;
  }
  double num = 0, den = 0;
  long n_zero = 0, accepted = 0;
  for (int b = 0; b < c->batch; b++) {
    const float *x = (const float *)h[0] + b * D;
    const double *rb = ref[out] + b * D;
    const float *yb = y + b * D;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < I; i++) { /* the gate alone decides which terms need an allowance */
      double sg = 0;
      for (int64_t j = 0; j < D; j++) sg += bf(g[i * D + j]) * x[j];
      const double sig = 1.0 / (1.0 + exp(-sg)), k = fabs(1.0 + sg * (1.0 - sig));
      m[i] = az[i] = 0;
      if (k <= 2) continue;
      double su = 0;
      for (int64_t j = 0; j < D; j++) su += bf(u[i * D + j]) * x[j];
      m[i] = fabs(sg * sig * su) * k;
      az[i] = sg < SILU_F32_ZERO ? sg * sig * su : 0; /* the term a float32 silu makes 0 */
    }
    int64_t nf = 0; /* compacted in place: m[f], az[f] belong to term flag[f] */
    for (int64_t i = 0; i < I; i++)
      if (m[i] != 0 || az[i] != 0) flag[nf] = i, m[nf] = m[i], az[nf] = az[i], n_zero += az[i] != 0, nf++;
    for (int64_t o = 0; o < D; o++) {
      double s = 0, z = 0;
      for (int64_t f = 0; f < nf; f++) {
        const double w = bf(dn[o * I + flag[f]]);
        s += fabs(w) * m[f];
        z += w * az[f];
      }
      den += rb[o] * rb[o] + s * s;
      const double e = (double)yb[o] - rb[o], e0 = e + z; /* e0: against the exact minus the float32-zero terms */
      const bool take0 = z != 0 && fabs(e0) < fabs(e);
      accepted += take0;
      num += take0 ? e0 * e0 : e * e;
    }
  }
  free(flag), free(m), free(az);
  if (accepted) snprintf(note, 160, "%ld outputs taken with the %ld terms below g = -88.72 as 0 (float32 silu)", accepted, n_zero);
  const double floor_den = (double)c->batch * (double)D * 1e-60; /* as rel_l2: underflowing outputs count as 0 */
  (void)l;
  return sqrt(num / (den > floor_den ? den : floor_den));
}

/* ---------------- moe_combine ---------------- */

static vstatus moe_combine_layout(const vop_case *c, vop_layout *l) {
  const int64_t B = c->batch, D = c->d[0], k = c->d[1];
  l->n = 0;
  set_buf(l, "y", DT_F32, B * k * D, false, 0);
  set_buf(l, "w", DT_F32, B * k, false, 0);
  set_buf(l, "shared", DT_F32, B * D, false, 0);
  set_buf(l, "resid", DT_F32, B * D, false, 0);
  set_buf(l, "out", DT_F32, B * D, true, VM_REL_L2);
  return V_OK;
}
static vstatus moe_combine_gen(const vop_case *c, const vop_layout *l, void **h) {
  fill_act(c, h[0], l->b[0].n, "y", 1e30, c->d[0]);
  float *w = h[1];
  uint64_t k = key_of(c, "w");
  for (int64_t i = 0; i < l->b[1].n; i++) w[i] = (float)(unit01(k, (uint64_t)i) * 2.8 / c->d[1]);
  fill_act(c, h[2], l->b[2].n, "shared", 1e30, c->d[0]);
  fill_act(c, h[3], l->b[3].n, "resid", 1e30, c->d[0]);
  return V_OK;
}
static vstatus moe_combine_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  const int64_t D = c->d[0], k = c->d[1];
  const float *y = h[0], *w = h[1], *sh = h[2], *res = h[3];
  for (int64_t b = 0; b < c->batch; b++)
    for (int64_t i = 0; i < D; i++) {
      double s = 0;
      for (int64_t j = 0; j < k; j++) s += (double)w[b * k + j] * y[(b * k + j) * D + i];
      ref[4][b * D + i] = (double)res[b * D + i] + (s + (double)sh[b * D + i]);
    }
  return V_OK;
}
static vop_tol moe_combine_tol(const vop_case *c, int out, vdtype act) {
  if (act == DT_BF16) return tol(1e-2, 0, BF16_WHY);
  return tol(2e-6, 0, "k products and k+2 f32 adds: ~(k+2)u/sqrt-ish per element, x4 margin");
}

/* ---------------- sample ---------------- */

typedef struct { double v; int i; } dv_pair;
static int cmp_dv(const void *a, const void *b) {
  const dv_pair *x = a, *y = b;
  if (x->v > y->v) return -1;
  if (x->v < y->v) return 1;
  return x->i - y->i;
}

static int cmp_dv_index(const void *a, const void *b) {
  const dv_pair *x = a, *y = b;
  return (x->i > y->i) - (x->i < y->i);
}

/* The token common/sampling.c's rule picks, in double: sort by logit/T descending (ties: lower
 * index), keep top_k, softmax, keep the smallest prefix with mass >= top_p, renormalize, and
 * take the first kept token in token-id order whose cumulative mass exceeds u. Fills the sorted order, the kept count,
 * the cumulative masses in id order (cum[i] after kept token pr[i]) and whether the kept set is near-ambiguous. */
static int sample_f64(const float *lg, int V, double T, int top_k, double top_p, double u, dv_pair *pr, double *cum,
                      int *n_keep, int *ambiguous) {
  int amb = 0;
  if (T <= 0) {
    int best = 0;
    for (int i = 1; i < V; i++)
      if (lg[i] > lg[best]) best = i;
    if (n_keep) *n_keep = 1;
    if (ambiguous) *ambiguous = 0;
    return best;
  }
  for (int i = 0; i < V; i++) pr[i] = (dv_pair){(double)lg[i] / T, i};
  qsort(pr, (size_t)V, sizeof *pr, cmp_dv);
  int n = V;
  if (top_k > 0 && top_k < n) {
    n = top_k;
    if (fabs(pr[n - 1].v - pr[n].v) <= 1e-6 * fmax(1.0, fabs(pr[n].v))) amb = 1;
  }
  double z = 0;
  for (int i = 0; i < n; i++) z += exp(pr[i].v - pr[0].v);
  double c = 0;
  int keep = n;
  for (int i = 0; i < n; i++) {
    c += exp(pr[i].v - pr[0].v) / z;
    cum[i] = c;
    if (top_p > 0 && top_p < 1 && c >= top_p && keep == n) {
      keep = i + 1;
      if (fabs(c - top_p) <= 1e-6 || (i > 0 && fabs(cum[i - 1] - top_p) <= 1e-6)) amb = 1;
    }
  }
  /* the inverse CDF walks the kept set in token-id order (pr and cum re-sorted to it) */
  const double zk = cum[keep - 1];
  const double v0 = pr[0].v;
  for (int i = 0; i < keep; i++) pr[i].v = exp(pr[i].v - v0) / z / zk;
  qsort(pr, (size_t)keep, sizeof *pr, cmp_dv_index);
  c = 0;
  for (int i = 0; i < keep; i++) cum[i] = (c += pr[i].v);
  int pick = pr[keep - 1].i;
  for (int i = 0; i < keep; i++)
    if (u < cum[i]) { pick = pr[i].i; break; }
  if (n_keep) *n_keep = keep;
  if (ambiguous) *ambiguous = amb;
  return pick;
}

static vstatus sample_layout(const vop_case *c, vop_layout *l) {
  l->n = 0;
  set_buf(l, "logits", DT_F32, (int64_t)c->batch * c->d[0], false, 0);
  set_buf(l, "u", DT_F32, c->batch, false, 0);
  set_buf(l, "tok", DT_I32, c->batch, true, VM_CUSTOM);
  return V_OK;
}
static vstatus sample_gen(const vop_case *c, const vop_layout *l, void **h) {
  fill_act(c, h[0], l->b[0].n, "logits", 1e4, 0); /* large: a few 1e4 logits, softmax is one-hot */
  float *u = h[1];
  uint64_t k = key_of(c, "u");
  for (int b = 0; b < c->batch; b++) u[b] = (float)ldexp(floor(unit01(k, (uint64_t)b) * 16777216.0), -24);
  return V_OK;
}
static vstatus sample_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  const int V = c->d[0];
  dv_pair *pr = malloc(sizeof *pr * (size_t)V);
  double *cum = malloc(sizeof *cum * (size_t)V);
  if (!pr || !cum) { free(pr); free(cum); return VERR("sample oracle: out of memory (vocab %d)", V); }
  for (int b = 0; b < c->batch; b++)
    ref[2][b] = sample_f64((const float *)h[0] + (int64_t)b * V, V, c->f[0], c->d[1], c->f[1],
                           ((const float *)h[1])[b], pr, cum, NULL, NULL);
  free(pr);
  free(cum);
  return V_OK;
}
static vop_tol sample_tol(const vop_case *c, int out, vdtype act) {
  return tol(0, 0, "token must equal the oracle's; accepted otherwise only when u lies within 1e-6 of the CDF "
                   "boundary between the two, or the kept set is a near-tie (top-k/top-p cut within 1e-6)");
}
static double sample_check(const vop_case *c, const vop_layout *l, void *const *h, double *const *ref, int out,
                           char *note) {
  const int V = c->d[0];
  const int32_t *tok = h[2];
  dv_pair *pr = malloc(sizeof *pr * (size_t)V);
  double *cum = malloc(sizeof *cum * (size_t)V);
  double err = 0;
  int loose = 0;
  if (!pr || !cum) {
    free(pr), free(cum);
    snprintf(note, 160, "out of memory in the sampling check");
    return INFINITY;
  }
  for (int b = 0; b < c->batch; b++) {
    int keep = 0, amb = 0;
    double u = ((const float *)h[1])[b];
    int pick = sample_f64((const float *)h[0] + (int64_t)b * V, V, c->f[0], c->d[1], c->f[1], u, pr, cum, &keep, &amb);
    int g = tok[b];
    if (g == pick) continue;
    bool ok = false;
    if (g >= 0 && g < V && c->f[0] > 0) {
      int pos = -1;
      for (int i = 0; i < V; i++)
        if (pr[i].i == g) { pos = i; break; }
      if (amb && pos >= 0 && pos <= keep) ok = true; /* near-tie kept set: one more or one less token */
      if (pos >= 0 && pos < keep) {
        double lo = pos ? cum[pos - 1] : 0, hi = cum[pos];
        if (u >= lo - 1e-6 && u < hi + 1e-6) ok = true;
      }
      /* equal scaled logits: the order among ties is by index in both, but float T-division can merge them */
      if (!ok && pos >= 0) {
        for (int i = 0; i < keep && !ok; i++)
          if (pr[i].i == pick && fabs(pr[i].v - pr[pos].v) <= 1e-6 * fmax(1.0, fabs(pr[pos].v))) ok = true;
      }
    }
    if (ok) loose++;
    else err += 1;
  }
  if (loose) snprintf(note, 160, "%d rows accepted at a CDF boundary or near-tie", loose);
  free(pr);
  free(cum);
  return err;
}

/* ---------------- allreduce ---------------- */

static vstatus allreduce_layout(const vop_case *c, vop_layout *l) {
  const int64_t R = c->d[0], n = c->d[1];
  l->n = 0;
  set_buf(l, "in", DT_F32, R * n, false, 0);
  set_buf(l, "out", DT_F32, R * n, true, VM_EXACT);
  return V_OK;
}
static vstatus allreduce_gen(const vop_case *c, const vop_layout *l, void **h) {
  oracle_fill_f32(h[0], l->b[0].n, VD_SMALLINT, key_of(c, "in"), 1.0, 0);
  return V_OK;
}
static vstatus allreduce_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  const int64_t R = c->d[0], n = c->d[1];
  const float *in = h[0];
  for (int64_t i = 0; i < n; i++) {
    double s = 0;
    for (int64_t r = 0; r < R; r++) s += in[r * n + i];
    for (int64_t r = 0; r < R; r++) ref[1][r * n + i] = s;
  }
  return V_OK;
}
static vop_tol allreduce_tol(const vop_case *c, int out, vdtype act) {
  return tol(0, 0, "inputs are integers in [-64,64]: every partial sum is exact in f32 and bf16-free, so any "
                   "reduction order gives bitwise the oracle's value on every rank");
}

/* ---------------- allreduce_add_rmsnorm ---------------- */
/* The TP reduce fused with the residual add and the next RMSNorm (kernels/latency_tp.h): rank r
 * of R holds part[r] [B, n]; every rank ends with x = res + sum_r part[r] and xn = rmsnorm(x) * w.
 * part and res are small integers, so x is exact whatever the summation order (bitwise check);
 * xn goes through rsqrt and bf16 (bound as rmsnorm), and must be bitwise the same on every rank
 * (the replicated router downstream reads it). d0 ranks, d1 n; f0 eps. Outputs are per rank. */

static vstatus arn_layout(const vop_case *c, vop_layout *l) {
  const int64_t R = c->d[0], n = (int64_t)c->batch * c->d[1];
  l->n = 0;
  set_buf(l, "part", DT_F32, R * n, false, 0);
  set_buf(l, "res", DT_F32, n, false, 0);
  set_buf(l, "w", DT_BF16, c->d[1], false, 0);
  set_buf(l, "x", DT_F32, R * n, true, VM_EXACT);
  set_buf(l, "xn", DT_F32, R * n, true, VM_CUSTOM);
  return V_OK;
}
static vstatus arn_gen(const vop_case *c, const vop_layout *l, void **h) {
  oracle_fill_f32(h[0], l->b[0].n, VD_SMALLINT, key_of(c, "part"), 1.0, 0);
  oracle_fill_f32(h[1], l->b[1].n, VD_SMALLINT, key_of(c, "res"), 1.0, 0);
  gen_norm_weight(c, h[2], c->d[1]);
  return V_OK;
}
static vstatus arn_oracle(const vop_case *c, const vop_layout *l, void *const *h, double **ref) {
  const int64_t R = c->d[0], n = c->d[1], rows = c->batch, rn = rows * n;
  const float *part = h[0], *res = h[1];
  for (int64_t b = 0; b < rows; b++) {
    double *x = ref[3] + b * n;
    for (int64_t i = 0; i < n; i++) {
      double s = res[b * n + i];
      for (int64_t r = 0; r < R; r++) s += part[r * rn + b * n + i];
      x[i] = s;
    }
    rmsnorm_f64(ref[4] + b * n, x, h[2], (int)n, c->f[0]);
  }
  for (int64_t r = 1; r < R; r++) {
    memcpy(ref[3] + r * rn, ref[3], sizeof(double) * (size_t)rn);
    memcpy(ref[4] + r * rn, ref[4], sizeof(double) * (size_t)rn);
  }
  return V_OK;
}
static double arn_check(const vop_case *c, const vop_layout *l, void *const *buf, double *const *ref, int out,
                        char *note) {
  (void)out;
  const int64_t R = c->d[0], rn = (int64_t)c->batch * c->d[1];
  const float *y = buf[4];
  int64_t differ = 0;
  for (int64_t r = 1; r < R; r++)
    for (int64_t i = 0; i < rn; i++)
      if (memcmp(&y[r * rn + i], &y[i], sizeof(float)) != 0) differ++;
  if (differ) {
    snprintf(note, 160, "ranks disagree on %lld normed elements (the replicated router would diverge)",
             (long long)differ);
    return INFINITY;
  }
  double ss = 0;
  for (int64_t i = 0; i < rn; i++) ss += ref[4][i] * ref[4][i];
  const double floor = 1e-6 * sqrt(ss / (double)(rn > 0 ? rn : 1));
  double err = 0;
  for (int64_t i = 0; i < R * rn; i++) {
    const double e = fabs((double)y[i] - ref[4][i]) / (fabs(ref[4][i]) + floor);
    if (!(e <= err)) err = e; /* NaN propagates */
  }
  (void)l;
  return err;
}
static vop_tol arn_tol(const vop_case *c, int out, vdtype act) {
  if (out == 3) return tol(0, 0, "x = res + sum of integer partials: exact in f32 in any order, on every rank");
  return norm_tol(c, act);
}

/* ---------------- the table ---------------- */

#define OP(nm, ds, dn, pfx, chk)                                                                  \
  static const vop op_##pfx = {.name = nm, .desc = ds, .dim_names = dn, .layout = pfx##_layout,   \
                               .gen_inputs = pfx##_gen, .oracle = pfx##_oracle, .tolerance = pfx##_tol, \
                               .check = chk}

#define DN(...) {__VA_ARGS__, NULL}
OP("embed", "embedding gather: out[b] = table[tok[b]] widened to f32", DN("vocab", "hidden"), embed, NULL);
OP("rmsnorm", "out = w * x / sqrt(mean(x^2) + eps) per row", DN("n"), rmsnorm, NULL);
OP("add_rmsnorm", "h = x + res; out = rmsnorm(h)", DN("n"), add_rmsnorm, NULL);
OP("linear", "y = W x, bf16 W [out, in], f32 x (a GEMV per row)", DN("out", "in"), linear, NULL);
OP("rope", "RoPE with YaRN inv_freq (HF), interleaved or not, positions past the original window",
   DN("heads", "dim", "interleave", "max_pos"), rope, NULL);
OP("mla_decode", "MLA decode, expanded form: per-head q.k softmax over the cached ctx, times v",
   DN("heads", "qk", "v", "ctx"), mla_decode, NULL);
OP("mla_absorbed", "MLA decode, absorbed form: q_nope through W_UK into the latent, scores over "
   "[latent, k_pe], W_UV after", DN("heads", "nope", "rope", "v", "kv_lora", "ctx"), mla_absorbed, NULL);
OP("mla_absorbed_dcp", "absorbed MLA decode with the latent cache split by position over N ranks (DCP): rows "
   "of a slot share its cache; out is the unsplit attention",
   DN("heads", "nope", "rope", "v", "kv_lora", "ctx", "ranks"), mla_absorbed_dcp, NULL);
OP("attn_partial", "split-KV partial attention: per split, normalized output and log-sum-exp",
   DN("heads", "qk", "v", "ctx", "splits"), attn_partial, NULL);
OP("lse_combine", "split-KV combine: out = sum_s exp(lse_s - max) o_s / sum_s exp(lse_s - max)",
   DN("heads", "v", "splits"), lse_combine, NULL);
OP("router", "MoE router: sigmoid, bias for selection, group-limited top-k, normalize, scale",
   DN("experts", "topk", "groups", "topk_groups", "norm"), router, router_check);
OP("swiglu", "expert MLP: down(silu(gate x) * up x), bf16 weights", DN("hidden", "inter"), swiglu, swiglu_check);
OP("moe_combine", "out = resid + (sum_k w_k y_k + shared)", DN("hidden", "topk"), moe_combine, NULL);
OP("sample", "token sampling given uniforms: greedy, temperature, top-k, top-p (common/sampling.c order)",
   DN("vocab", "top_k"), sample, sample_check);
OP("allreduce", "sum all-reduce over simulated ranks (exact on small integers)", DN("ranks", "n"), allreduce, NULL);
OP("allreduce_add_rmsnorm", "TP reduce fused with residual add + RMSNorm: x = res + sum_r part_r, xn = rmsnorm(x)",
   DN("ranks", "n"), arn, arn_check);

void oracle_register_ops(void) {
  static const vop *const all[] = {&op_embed, &op_rmsnorm, &op_add_rmsnorm, &op_linear, &op_rope,
                                   &op_mla_decode, &op_mla_absorbed, &op_mla_absorbed_dcp, &op_attn_partial,
                                   &op_lse_combine, &op_router, &op_swiglu, &op_moe_combine, &op_sample,
                                   &op_allreduce, &op_arn};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (vopreg_add_op(all[i]) != V_OK) fprintf(stderr, "vouch: %s\n", verr_msg());
}
