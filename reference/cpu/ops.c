/* The CPU reference ops (see ops.h): float32 math as HF transformers' DeepseekV3 does it
 * in eager float32. Dot products use eight fixed accumulation lanes so that the result
 * for one (row, output) pair never depends on how many rows were batched together:
 * prefill and one-token decode give bit-identical rows. Linear layers thread over output
 * rows with OpenMP when the work is large enough to pay for the fork. */
#include "reference/cpu/ops.h"

#include "model/router_rule.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

#define PAR_MIN_WORK 65536 /* multiply-adds below which a linear runs on one thread */
#define ROPE_STACK_DIM 1024 /* rope dims handled with a stack copy (more: heap) */
#define ROUTER_STACK_E 1024 /* experts handled with stack scratch (more: heap) */

static _Thread_local int g_threads; /* 0: OpenMP default; per thread, since TP ranks are threads */

void cpu_ops_set_threads(int n) { g_threads = n > 0 ? n : 0; }

static int n_threads(void) { return g_threads > 0 ? g_threads : omp_get_max_threads(); }

/* Dot products with 8 lanes (lane j sums i = j mod 8), combined in a fixed tree, then
 * the tail. Blocks of NR input rows share each weight load; every row's sums are formed
 * in the same order whatever NR is, so results do not depend on the batch. LOAD(i)
 * yields weight element i as float. x rows are ldx apart; out[r] gets row r's dot. */
#define DOT_BODY(LOAD, NR)                                                                \
  float a[NR][8];                                                                         \
  for (int r = 0; r < NR; r++)                                                            \
    for (int j = 0; j < 8; j++) a[r][j] = 0.0f;                                           \
  int64_t i = 0;                                                                          \
  for (; i + 8 <= n; i += 8) {                                                            \
    float wv[8];                                                                          \
    for (int j = 0; j < 8; j++) wv[j] = LOAD(i + j);                                      \
    _Pragma("GCC unroll 4")                                                               \
    for (int r = 0; r < NR; r++)                                                          \
      for (int j = 0; j < 8; j++) a[r][j] += wv[j] * x[r * ldx + i + j];                  \
  }                                                                                       \
  for (int r = 0; r < NR; r++) {                                                          \
    float tail = 0.0f;                                                                    \
    for (int64_t k = i; k < n; k++) tail += LOAD(k) * x[r * ldx + k];                     \
    out[r] = (((a[r][0] + a[r][1]) + (a[r][2] + a[r][3])) + ((a[r][4] + a[r][5]) + (a[r][6] + a[r][7]))) + tail; \
  }

#define LOAD_F32(k) w[k]
#define LOAD_BF16(k) bf16_to_f32(w[k])
#define LOAD_F16(k) f16_to_f32(w[k])
static void dot1_f32(const float *w, const float *x, int64_t ldx, int64_t n, float *out) { DOT_BODY(LOAD_F32, 1) }
static void dot4_f32(const float *w, const float *x, int64_t ldx, int64_t n, float *out) { DOT_BODY(LOAD_F32, 4) }
static void dot1_bf16(const uint16_t *w, const float *x, int64_t ldx, int64_t n, float *out) { DOT_BODY(LOAD_BF16, 1) }
static void dot4_bf16(const uint16_t *w, const float *x, int64_t ldx, int64_t n, float *out) { DOT_BODY(LOAD_BF16, 4) }
static void dot1_f16(const uint16_t *w, const float *x, int64_t ldx, int64_t n, float *out) { DOT_BODY(LOAD_F16, 1) }
static void dot4_f16(const uint16_t *w, const float *x, int64_t ldx, int64_t n, float *out) { DOT_BODY(LOAD_F16, 4) }
#undef LOAD_F32
#undef LOAD_BF16
#undef LOAD_F16

static float dot_f32(const float *w, const float *x, int64_t n) {
  float r;
  dot1_f32(w, x, 0, n, &r);
  return r;
}

/* Row o of w (n_in wide) dotted with nr (1..4) rows of x (ldx apart) -> out[nr]. */
static void dot_rows(const vtensor *w, int64_t o, const float *x, int64_t ldx, int64_t n_in, int nr, float *out) {
  switch (w->dtype) {
    case DT_BF16: {
      const uint16_t *wr = (const uint16_t *)w->data + o * n_in;
      if (nr == 4) dot4_bf16(wr, x, ldx, n_in, out);
      else for (int r = 0; r < nr; r++) dot1_bf16(wr, x + r * ldx, ldx, n_in, out + r);
      return;
    }
    case DT_F16: {
      const uint16_t *wr = (const uint16_t *)w->data + o * n_in;
      if (nr == 4) dot4_f16(wr, x, ldx, n_in, out);
      else for (int r = 0; r < nr; r++) dot1_f16(wr, x + r * ldx, ldx, n_in, out + r);
      return;
    }
    case DT_F32: {
      const float *wr = (const float *)w->data + o * n_in;
      if (nr == 4) dot4_f32(wr, x, ldx, n_in, out);
      else for (int r = 0; r < nr; r++) dot1_f32(wr, x + r * ldx, ldx, n_in, out + r);
      return;
    }
    default: break;
  }
  /* integer dtypes never hold weights (the model loader rejects them); be total anyway */
  for (int r = 0; r < nr; r++) {
    float s = 0.0f;
    for (int64_t i = 0; i < n_in; i++) s += vtensor_get_f32(w, o * n_in + i) * x[r * ldx + i];
    out[r] = s;
  }
}

void cpu_linear_rows(float *y, const float *x, const vtensor *w, int64_t o0, int64_t n_out, int n_rows) {
  int64_t n_in = w->ndim >= 2 ? w->shape[1] : 1;
  int64_t work = n_out * n_in * (int64_t)n_rows;
  int nt = work >= PAR_MIN_WORK ? n_threads() : 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (int64_t o = 0; o < n_out; o++)
    for (int r = 0; r < n_rows; r += 4) {
      int nr = n_rows - r < 4 ? n_rows - r : 4;
      float out[4];
      dot_rows(w, o0 + o, x + (int64_t)r * n_in, n_in, n_in, nr, out);
      for (int k = 0; k < nr; k++) y[(int64_t)(r + k) * n_out + o] = out[k];
    }
}

void cpu_linear(float *y, const float *x, const vtensor *w, int n_rows) {
  cpu_linear_rows(y, x, w, 0, w->shape[0], n_rows);
}

static void rmsnorm_row(float *out, const float *x, const vtensor *w, int n, float eps) {
  double ss = 0.0;
  for (int i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
  float var = (float)(ss / n);
  float r = 1.0f / sqrtf(var + eps); /* torch.rsqrt(variance + eps) in float32 */
  for (int i = 0; i < n; i++) {
    float h = x[i] * r;
    out[i] = vtensor_get_f32(w, i) * h;
  }
}

void cpu_rmsnorm(float *out, const float *x, const vtensor *w, int n_rows, int n, float eps) {
  for (int r = 0; r < n_rows; r++) rmsnorm_row(out + (int64_t)r * n, x + (int64_t)r * n, w, n, eps);
}

void cpu_add_rmsnorm(float *out, float *x, const float *res, const vtensor *w, int n_rows, int n, float eps) {
  for (int r = 0; r < n_rows; r++) {
    float *xr = x + (int64_t)r * n;
    const float *rr = res + (int64_t)r * n;
    for (int i = 0; i < n; i++) xr[i] += rr[i];
    rmsnorm_row(out + (int64_t)r * n, xr, w, n, eps);
  }
}

void cpu_embed(float *out, const int32_t *tok, const vtensor *emb, int n_rows) {
  int64_t d = emb->shape[1];
  size_t es = vdtype_size(emb->dtype);
  for (int r = 0; r < n_rows; r++)
    vconvert_to_f32(out + (int64_t)r * d, (const char *)emb->data + (size_t)tok[r] * (size_t)d * es, emb->dtype, d);
}

static void rope_apply(float *vec, float *tmp, int dim, int pos, const float *inv_freq, float attn_factor,
                       int interleave) {
  int half = dim / 2;
  if (interleave) { /* HF apply_rotary_pos_emb_interleave: pairs (2i, 2i+1) -> (i, half+i) */
    for (int i = 0; i < half; i++) {
      tmp[i] = vec[2 * i];
      tmp[half + i] = vec[2 * i + 1];
    }
  } else {
    for (int i = 0; i < dim; i++) tmp[i] = vec[i];
  }
  float p = (float)pos;
  for (int i = 0; i < half; i++) {
    float f = p * inv_freq[i]; /* float32 product, as HF's inv_freq @ position_ids */
    float c = (float)cos((double)f) * attn_factor;
    float s = (float)sin((double)f) * attn_factor;
    float x1 = tmp[i], x2 = tmp[half + i];
    vec[i] = x1 * c - x2 * s;        /* q*cos + (-x2)*sin */
    vec[half + i] = x2 * c + x1 * s; /* q*cos + x1*sin */
  }
}

void cpu_rope(float *vec, int dim, int pos, const float *inv_freq, float attn_factor, int interleave) {
  if (dim <= ROPE_STACK_DIM) {
    float tmp[ROPE_STACK_DIM];
    rope_apply(vec, tmp, dim, pos, inv_freq, attn_factor, interleave);
    return;
  }
  float *tmp = malloc((size_t)dim * sizeof(float));
  if (!tmp) { /* no memory: make the failure visible instead of returning unrotated values */
    for (int i = 0; i < dim; i++) vec[i] = NAN;
    return;
  }
  rope_apply(vec, tmp, dim, pos, inv_freq, attn_factor, interleave);
  free(tmp);
}

/* Index of the largest of v[0..n) not yet taken (ties: lowest index); -1 if none left. */
static int argmax_free(const float *v, const unsigned char *taken, int n) {
  int best = -1;
  for (int i = 0; i < n; i++)
    if (!taken[i] && (best < 0 || v[i] > v[best])) best = i;
  return best;
}

/* scratch: 3*E floats; flags: 2*E bytes. */
static void router_impl(const float *logits, const float *bias, const ds_config *c, int32_t *idx, float *wt,
                        float *scratch, unsigned char *flags) {
  int E = c->n_routed_experts, K = c->num_experts_per_tok;
  int G = c->n_group > 0 && c->n_group <= E ? c->n_group : 1;
  int TG = c->topk_group > 0 && c->topk_group <= G ? c->topk_group : G;
  int gs = E / G;
  float *scores = scratch, *choice = scratch + E, *gsc = scratch + 2 * (int64_t)E;
  unsigned char *taken = flags, *gkeep = flags + E;
  for (int e = 0; e < E; e++) {
    scores[e] = 1.0f / (1.0f + expf(-logits[e]));
    choice[e] = scores[e] + (bias ? bias[e] : 0.0f);
  }
  if (TG < G) {
    /* group score = sum of the group's top-2 choice values */
    for (int g = 0; g < G; g++) {
      gsc[g] = router_group_score(choice + (int64_t)g * gs, gs);
      gkeep[g] = 0;
      taken[g] = 0;
    }
    for (int k = 0; k < TG; k++) {
      int b = argmax_free(gsc, taken, G);
      taken[b] = 1;
      gkeep[b] = 1;
    }
    for (int e = 0; e < G * gs; e++)
      if (!gkeep[e / gs]) choice[e] = 0.0f; /* HF masked_fill(..., 0.0), not -inf */
  }
  for (int e = 0; e < E; e++) taken[e] = 0;
  float sum = 0.0f;
  for (int k = 0; k < K; k++) {
    int b = argmax_free(choice, taken, E);
    if (b < 0) { /* top_k > E: the config validator rejects this; mark it visibly */
      idx[k] = -1;
      wt[k] = NAN;
      continue;
    }
    taken[b] = 1;
    idx[k] = b;
    wt[k] = scores[b];
    sum += wt[k];
  }
  if (c->norm_topk_prob) {
    float den = sum + 1e-20f;
    for (int k = 0; k < K; k++) wt[k] /= den;
  }
  float rs = (float)c->routed_scaling_factor;
  for (int k = 0; k < K; k++) wt[k] *= rs;
}

void cpu_router_topk(const float *router_logits, const float *bias, const ds_config *c, int32_t *idx, float *wt) {
  int E = c->n_routed_experts;
  if (E <= ROUTER_STACK_E) {
    float scratch[3 * ROUTER_STACK_E];
    unsigned char flags[2 * ROUTER_STACK_E];
    router_impl(router_logits, bias, c, idx, wt, scratch, flags);
    return;
  }
  float *buf = malloc((size_t)E * 3 * sizeof(float) + 2 * (size_t)E);
  if (!buf) { /* no memory: an invalid index the caller's checks reject */
    for (int k = 0; k < c->num_experts_per_tok; k++) idx[k] = -1, wt[k] = NAN;
    return;
  }
  router_impl(router_logits, bias, c, idx, wt, buf, (unsigned char *)(buf + 3 * (size_t)E));
  free(buf);
}

float cpu_silu(float z) { return z / (1.0f + expf(-z)); }

void cpu_swiglu_mlp(float *out, const float *x, const vtensor *gate, const vtensor *up, const vtensor *down,
                    int n_rows, float *tmp) {
  int64_t inter = gate->shape[0];
  float *g = tmp, *u = tmp + inter * n_rows;
  cpu_linear(g, x, gate, n_rows);
  cpu_linear(u, x, up, n_rows);
  for (int64_t i = 0; i < inter * n_rows; i++) g[i] = cpu_silu(g[i]) * u[i];
  cpu_linear(out, g, down, n_rows);
}

void cpu_softmax(float *x, int n) {
  if (n <= 0) return;
  float mx = x[0];
  for (int i = 1; i < n; i++)
    if (x[i] > mx) mx = x[i];
  double sum = 0.0;
  for (int i = 0; i < n; i++) {
    x[i] = expf(x[i] - mx);
    sum += x[i];
  }
  for (int i = 0; i < n; i++) x[i] = (float)((double)x[i] / sum);
}

void cpu_attend(float *out, const float *q, const float *k, int64_t k_stride, const float *v,
                int64_t v_stride, int n_ctx, int qk_dim, int v_dim, float scale, float *scores) {
  for (int j = 0; j < n_ctx; j++) scores[j] = dot_f32(k + (int64_t)j * k_stride, q, qk_dim) * scale;
  cpu_softmax(scores, n_ctx);
  for (int d = 0; d < v_dim; d++) out[d] = 0.0f;
  for (int j = 0; j < n_ctx; j++) {
    const float *vj = v + (int64_t)j * v_stride;
    float p = scores[j];
    for (int d = 0; d < v_dim; d++) out[d] += p * vj[d];
  }
}
