/* The "cpu" variants of every registered op (path "cpu-ref"): thin adapters that call the
 * CPU reference ops (reference/cpu/ops.h) on the suite's buffers, and plain float32 C for
 * the ops the cpu-ref path has no function for (absorbed MLA, split-KV partials and combine,
 * MoE combine, all-reduce over simulated ranks).
 *
 * Also the "test" variants (path "test", run only when asked for): planted bugs the suite
 * must report as FAIL (split-KV combine without the max rescale, rmsnorm that drops the last
 * element from its sum of squares, an unwritten element, a write past the end, a variant
 * that never records itself in the trace) and one that is honestly unsupported for batch > 4. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference/opreg.h"
#include "common/sampling.h"
#include "reference/cpu/ops.h"
#include "reference/cpu/oracle.h"
#include "reference/cpu/variants.h"

static vtensor vt(vdtype t, int64_t d0, int64_t d1, void *data) {
  vtensor w;
  memset(&w, 0, sizeof w);
  w.dtype = t;
  w.ndim = d1 > 0 ? 2 : 1;
  w.shape[0] = d0;
  w.shape[1] = d1 > 0 ? d1 : 0;
  w.data = data;
  return w;
}

static void ran(vtrace *t, const vop_case *c, const char *path, const char *variant) {
  char detail[96];
  snprintf(detail, sizeof detail, "%s/%s B=%d", c->preset, c->shape, c->batch);
  vtrace_ran(t, path, c->op->name, variant, detail);
}

static vstatus any_case(const vop_case *c) { return V_OK; }

/* ---------------- adapters over reference/cpu/ops.h ---------------- */

static vstatus embed_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  vtensor tab = vt(DT_BF16, c->d[0], c->d[1], b[1]);
  cpu_embed(b[2], b[0], &tab, c->batch);
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}

static vstatus rmsnorm_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  vtensor w = vt(DT_BF16, c->d[0], 0, b[1]);
  cpu_rmsnorm(b[2], b[0], &w, c->batch, c->d[0], (float)c->f[0]);
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}

static vstatus add_rmsnorm_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  vtensor w = vt(DT_BF16, c->d[0], 0, b[2]);
  memcpy(b[3], b[0], sizeof(float) * (size_t)l->b[0].n); /* h = x, then added in place */
  cpu_add_rmsnorm(b[4], b[3], b[1], &w, c->batch, c->d[0], (float)c->f[0]);
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}

static vstatus linear_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  vtensor w = vt(DT_BF16, c->d[0], c->d[1], b[1]);
  cpu_linear(b[2], b[0], &w, c->batch);
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}

static vstatus rope_supports(const vop_case *c) {
  if (c->d[1] % 2 || c->d[1] > 1024) return VUNSUPPORTED("rope dim %d must be even and <= 1024", c->d[1]);
  return V_OK;
}
static vstatus rope_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  float inv[512];
  float attn = (float)ds_rope_inv_freq(&c->cfg, inv);
  const int H = c->d[0], r = c->d[1];
  const int32_t *pos = b[1];
  float *out = b[2];
  memcpy(out, b[0], sizeof(float) * (size_t)l->b[0].n);
  for (int i = 0; i < c->batch; i++)
    for (int h = 0; h < H; h++) cpu_rope(out + ((int64_t)i * H + h) * r, r, pos[i], inv, attn, c->d[2]);
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}

static vstatus mla_decode_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  const int H = c->d[0], qk = c->d[1], vd = c->d[2], L = c->d[3];
  const int32_t *lens = b[3];
  float *scores = malloc(sizeof(float) * (size_t)L);
  if (!scores) return VERR("mla_decode cpu: out of memory (ctx %d)", L);
  for (int i = 0; i < c->batch; i++)
    for (int h = 0; h < H; h++) {
      int64_t bh = (int64_t)i * H + h;
      cpu_attend((float *)b[4] + bh * vd, (const float *)b[0] + bh * qk, (const float *)b[1] + bh * L * qk, qk,
                 (const float *)b[2] + bh * L * vd, vd, lens[i], qk, vd, (float)c->f[0], scores);
    }
  free(scores);
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}

static vstatus router_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  const int E = c->d[0], k = c->d[1];
  for (int i = 0; i < c->batch; i++)
    cpu_router_topk((const float *)b[0] + (int64_t)i * E, b[1], &c->cfg, (int32_t *)b[2] + (int64_t)i * k,
                    (float *)b[3] + (int64_t)i * k);
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}
static vstatus router_supports(const vop_case *c) {
  if (c->cfg.n_routed_experts != c->d[0] || c->cfg.num_experts_per_tok != c->d[1])
    return VUNSUPPORTED("case config does not match its dims (experts %d/%d, top-k %d/%d)", c->cfg.n_routed_experts,
                        c->d[0], c->cfg.num_experts_per_tok, c->d[1]);
  return V_OK;
}

/* cpu_swiglu_mlp on the case's buffers; out of memory is an error. */
static vstatus swiglu_compute(const vop_case *c, void *const *b) {
  const int64_t D = c->d[0], I = c->d[1];
  vtensor g = vt(DT_BF16, I, D, b[1]), u = vt(DT_BF16, I, D, b[2]), d = vt(DT_BF16, D, I, b[3]);
  float *tmp = malloc(sizeof(float) * 2 * (size_t)I * (size_t)c->batch);
  if (!tmp) return VERR("swiglu cpu: out of memory (inter %lld)", (long long)I);
  cpu_swiglu_mlp(b[4], b[0], &g, &u, &d, c->batch, tmp);
  free(tmp);
  return V_OK;
}
static vstatus swiglu_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  VTRY(swiglu_compute(c, b));
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}

static vstatus sample_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  const int V = c->d[0];
  vsampling s = {.temperature = (float)c->f[0], .top_k = c->d[1], .top_p = (float)c->f[1], .seed = 0};
  void *work = malloc((size_t)V * 16);
  if (!work) return VERR("sample cpu: out of memory (vocab %d)", V);
  for (int i = 0; i < c->batch; i++)
    ((int32_t *)b[2])[i] = vsample_with_u((const float *)b[0] + (int64_t)i * V, V, &s, ((const float *)b[1])[i], work);
  free(work);
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}

/* ---------------- plain float32 C variants ---------------- */

/* How the test variants of mla_absorbed_dcp merge the ranks (DCP_NONE: the unsplit softmax). */
enum { DCP_NONE = -1, DCP_OK = 0, DCP_NOMAX = 1, DCP_FLOOR = 2 };
#define DCP_MAX_RANKS 64

/* o_lat [kvl] of one head from its scores s [len] over the values ckv [len][kvl] as
 * kernels/latency_dcp.cu merges N ranks: rank k owns the positions p % N == k (count
 * (len - 1 - k) / N + 1; DCP_FLOOR: (len - k) / N, defects/32); its part is o_k = sum e^(s_p - m_k)
 * v_p / l_k with lse_k = m_k + log l_k (DCP_NOMAX: log l_k, defects/31), lse -inf when it owns none;
 * o = sum_k e^(lse_k - M) o_k / sum_k e^(lse_k - M). ok [kvl] is scratch. */
static void dcp_pv(float *ol, float *ok, const float *s, const float *ckv, int len, int kvl, int N, int bug) {
  float lse[DCP_MAX_RANKS], M = -INFINITY, W = 0;
  int cnt[DCP_MAX_RANKS];
  for (int k = 0; k < N; k++) {
    cnt[k] = len > k ? (bug == DCP_FLOOR ? (len - k) / N : (len - 1 - k) / N + 1) : 0;
    float m = -INFINITY, l = 0;
    for (int j = 0; j < cnt[k]; j++) m = fmaxf(m, s[j * N + k]);
    for (int j = 0; j < cnt[k]; j++) l += expf(s[j * N + k] - m);
    lse[k] = cnt[k] == 0 ? -INFINITY : bug == DCP_NOMAX ? logf(l) : m + logf(l);
    M = fmaxf(M, lse[k]);
  }
  for (int cc = 0; cc < kvl; cc++) ol[cc] = 0;
  for (int k = 0; k < N; k++) {
    if (lse[k] == -INFINITY) continue; /* a rank without keys weighs 0 */
    float m = -INFINITY, l = 0;
    for (int j = 0; j < cnt[k]; j++) m = fmaxf(m, s[j * N + k]);
    for (int cc = 0; cc < kvl; cc++) ok[cc] = 0;
    for (int j = 0; j < cnt[k]; j++) {
      const float e = expf(s[j * N + k] - m);
      l += e;
      for (int cc = 0; cc < kvl; cc++) ok[cc] += e * ckv[(int64_t)(j * N + k) * kvl + cc];
    }
    const float w = expf(lse[k] - M);
    W += w;
    for (int cc = 0; cc < kvl; cc++) ol[cc] += w * ok[cc] / l;
  }
  for (int cc = 0; cc < kvl; cc++) ol[cc] = W > 0 ? ol[cc] / W : 0.0f;
}

/* Absorbed MLA per row: q_lat = W_UK^T q_nope per head, scores over [ckv, kpe] of the row's sequence
 * (slot[i]; slot NULL: row i's own), o_lat = p . ckv (dcp DCP_NONE; else dcp_pv over c->d[6] ranks),
 * out = W_UV o_lat. Fails only out of memory. */
static vstatus mla_absorbed_rows(const vop_case *c, void *const *b, const int32_t *slot, int dcp) {
  const int H = c->d[0], n = c->d[1], r = c->d[2], v = c->d[3], kvl = c->d[4], L = c->d[5];
  const int32_t *lens = b[5];
  const uint16_t *w = b[4];
  float *ql = malloc(sizeof(float) * (size_t)kvl * 3), *s = malloc(sizeof(float) * (size_t)L);
  if (!ql || !s) { free(ql); free(s); return VERR("%s cpu: out of memory (ctx %d)", c->op->name, L); }
  float *ol = ql + kvl;
  for (int i = 0; i < c->batch; i++) {
    const int64_t sq = slot ? slot[i] : i;
    const float *ckv = (const float *)b[2] + sq * L * kvl, *kpe = (const float *)b[3] + sq * L * r;
    for (int h = 0; h < H; h++) {
      const uint16_t *wuk = w + (int64_t)h * (n + v) * kvl, *wuv = wuk + (int64_t)n * kvl;
      const float *qn = (const float *)b[0] + ((int64_t)i * H + h) * n;
      const float *qp = (const float *)b[1] + ((int64_t)i * H + h) * r;
      for (int cc = 0; cc < kvl; cc++) ql[cc] = 0;
      for (int j = 0; j < n; j++)
        for (int cc = 0; cc < kvl; cc++) ql[cc] += qn[j] * bf16_to_f32(wuk[(int64_t)j * kvl + cc]);
      float m = -INFINITY, z = 0;
      for (int tt = 0; tt < lens[i]; tt++) {
        float d = 0;
        for (int cc = 0; cc < kvl; cc++) d += ql[cc] * ckv[(int64_t)tt * kvl + cc];
        for (int j = 0; j < r; j++) d += qp[j] * kpe[(int64_t)tt * r + j];
        s[tt] = d * (float)c->f[0];
        if (s[tt] > m) m = s[tt];
      }
      if (dcp != DCP_NONE) {
        dcp_pv(ol, ol + kvl, s, ckv, lens[i], kvl, c->d[6], dcp);
      } else {
        for (int tt = 0; tt < lens[i]; tt++) z += (s[tt] = expf(s[tt] - m));
        for (int cc = 0; cc < kvl; cc++) ol[cc] = 0;
        for (int tt = 0; tt < lens[i]; tt++) {
          float p = s[tt] / z;
          for (int cc = 0; cc < kvl; cc++) ol[cc] += p * ckv[(int64_t)tt * kvl + cc];
        }
      }
      float *out = (float *)b[6] + ((int64_t)i * H + h) * v;
      for (int j = 0; j < v; j++) {
        float a = 0;
        for (int cc = 0; cc < kvl; cc++) a += bf16_to_f32(wuv[(int64_t)j * kvl + cc]) * ol[cc];
        out[j] = a;
      }
    }
  }
  free(ql);
  free(s);
  return V_OK;
}
static vstatus mla_absorbed_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  VTRY(mla_absorbed_rows(c, b, NULL, DCP_NONE));
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}
/* DCP: the unsplit attention (cpu-ref has one cache, no ranks), rows through their slot (b[7]). */
static vstatus mla_absorbed_dcp_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  VTRY(mla_absorbed_rows(c, b, b[7], DCP_NONE));
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}
/* Test variants: the DCP merge in f32 over c->d[6] ranks, correct and with the latency defects. */
static vstatus dcp_ranks_supports(const vop_case *c) {
  if (c->d[6] < 1 || c->d[6] > DCP_MAX_RANKS) return VUNSUPPORTED("dcp test: %d ranks (1..%d)", c->d[6], DCP_MAX_RANKS);
  return V_OK;
}
#define DCP_TEST(fn, mode, vname)                                                          \
  static vstatus fn(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) { \
    VTRY(mla_absorbed_rows(c, b, b[7], mode));                                             \
    ran(t, c, "test", vname);                                                              \
    return V_OK;                                                                           \
  }
DCP_TEST(dcp_split_run, DCP_OK, "dcp_split")
DCP_TEST(dcp_nomax_run, DCP_NOMAX, "dcp_nomax")
DCP_TEST(dcp_floor_run, DCP_FLOOR, "dcp_floor")

/* Split-KV partials: per split, softmax-normalized output and lse = max + log(sum). */
static vstatus attn_partial_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  const int H = c->d[0], qk = c->d[1], vd = c->d[2], L = c->d[3], S = c->d[4];
  const int32_t *lens = b[3];
  float *s = malloc(sizeof(float) * (size_t)L);
  if (!s) return VERR("attn_partial cpu: out of memory (ctx %d)", L);
  for (int i = 0; i < c->batch; i++)
    for (int h = 0; h < H; h++) {
      int64_t bh = (int64_t)i * H + h;
      const float *q = (const float *)b[0] + bh * qk, *k = (const float *)b[1] + bh * L * qk,
                  *v = (const float *)b[2] + bh * L * vd;
      for (int sp = 0; sp < S; sp++) {
        int j0 = oracle_split_begin(sp, lens[i], S), j1 = oracle_split_begin(sp + 1, lens[i], S);
        float m = -INFINITY, z = 0;
        for (int j = j0; j < j1; j++) {
          float d = 0;
          for (int e = 0; e < qk; e++) d += q[e] * k[(int64_t)j * qk + e];
          s[j] = d * (float)c->f[0];
          if (s[j] > m) m = s[j];
        }
        for (int j = j0; j < j1; j++) z += (s[j] = expf(s[j] - m));
        float *o = (float *)b[4] + (bh * S + sp) * vd;
        for (int e = 0; e < vd; e++) o[e] = 0;
        for (int j = j0; j < j1; j++)
          for (int e = 0; e < vd; e++) o[e] += s[j] * v[(int64_t)j * vd + e];
        for (int e = 0; e < vd; e++) o[e] /= z;
        ((float *)b[5])[bh * S + sp] = m + logf(z);
      }
    }
  free(s);
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}

static void combine(const vop_case *c, void *const *b, bool rescale) {
  const int64_t H = c->d[0], vd = c->d[1], S = c->d[2];
  const float *o = b[0], *lse = b[1];
  for (int64_t bh = 0; bh < c->batch * H; bh++) {
    float m = -INFINITY, z = 0;
    if (rescale)
      for (int64_t s = 0; s < S; s++) m = fmaxf(m, lse[bh * S + s]);
    else
      m = 0; /* planted bug: weights exp(lse) overflow for large lse */
    float *out = (float *)b[2] + bh * vd;
    for (int64_t e = 0; e < vd; e++) out[e] = 0;
    for (int64_t s = 0; s < S; s++) {
      float w = expf(lse[bh * S + s] - m);
      z += w;
      for (int64_t e = 0; e < vd; e++) out[e] += w * o[(bh * S + s) * vd + e];
    }
    for (int64_t e = 0; e < vd; e++) out[e] /= z;
  }
}
static vstatus lse_combine_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  combine(c, b, true);
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}

static float bf16_round(float x) { return bf16_to_f32(f32_to_bf16(x)); }

/* out = resid + (sum_j w_j y_j + shared) in float32 (HF: routed + shared, then the residual).
 * bf16_in: y and shared rounded to bf16 first, as the latency path holds them; bf16_sum (a planted
 * bug, defects/16): the running sum and the output rounded to bf16 after every add. */
static void moe_combine_sum(const vop_case *c, void *const *b, bool bf16_in, bool bf16_sum) {
  const int64_t D = c->d[0], k = c->d[1];
  const float *y = b[0], *w = b[1], *sh = b[2], *res = b[3];
  float *out = b[4];
  for (int64_t i = 0; i < c->batch; i++)
    for (int64_t e = 0; e < D; e++) {
      float s = 0;
      for (int64_t j = 0; j < k; j++) {
        const float yv = y[(i * k + j) * D + e];
        s += w[i * k + j] * (bf16_in ? bf16_round(yv) : yv);
        if (bf16_sum) s = bf16_round(s);
      }
      const float shv = bf16_in ? bf16_round(sh[i * D + e]) : sh[i * D + e];
      out[i * D + e] = res[i * D + e] + (s + shv);
      if (bf16_sum) out[i * D + e] = bf16_round(out[i * D + e]);
    }
}
static vstatus moe_combine_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  moe_combine_sum(c, b, false, false);
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}

/* Ring all-reduce over R simulated ranks: R-1 reduce-scatter steps, R-1 all-gather steps,
 * chunk r of n owned by rank r; each rank only reads its left neighbour's buffer. */
static vstatus allreduce_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  const int R = c->d[0];
  const int64_t n = c->d[1];
  float *out = b[1];
  memcpy(out, b[0], sizeof(float) * (size_t)(R * n));
  /* reduce-scatter: at step s rank r adds chunk (left - s) mod R from its left neighbour's
   * buffer as it was after step s-1; afterwards rank r holds the full sum of chunk (r+1) mod R. */
  float *snap = malloc(sizeof(float) * (size_t)(R * n));
  if (!snap) return VERR("allreduce cpu: out of memory (%d ranks x %lld)", R, (long long)n);
  for (int step = 0; step < R - 1; step++) {
    memcpy(snap, out, sizeof(float) * (size_t)(R * n));
    for (int r = 0; r < R; r++) {
      int left = (r + R - 1) % R, ch = ((left - step) % R + R) % R;
      int64_t c0 = ch * n / R, c1 = (ch + 1) * n / R;
      for (int64_t i = c0; i < c1; i++) out[(int64_t)r * n + i] += snap[(int64_t)left * n + i];
    }
  }
  /* all-gather: each step passes one complete chunk to the right neighbour. */
  for (int step = 0; step < R - 1; step++) {
    memcpy(snap, out, sizeof(float) * (size_t)(R * n));
    for (int r = 0; r < R; r++) {
      int left = (r + R - 1) % R, ch = ((left + 1 - step) % R + R) % R;
      int64_t c0 = ch * n / R, c1 = (ch + 1) * n / R;
      for (int64_t i = c0; i < c1; i++) out[(int64_t)r * n + i] = snap[(int64_t)left * n + i];
    }
  }
  free(snap);
  ran(t, c, "cpu-ref", "cpu");
  return V_OK;
}

/* ---------------- planted bugs (path "test") ---------------- */

static vstatus combine_nomax_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  combine(c, b, false);
  ran(t, c, "test", "nomax");
  return V_OK;
}

/* mode 0: drops the last element from the sum of squares; 1: leaves the last output element
 * of each row unwritten; 2: writes one element past the end of out; 3: correct, no trace. */
static void rmsnorm_buggy(const vop_case *c, void *const *b, int mode) {
  const int n = c->d[0];
  const uint16_t *w = b[1];
  for (int i = 0; i < c->batch; i++) {
    const float *x = (const float *)b[0] + (int64_t)i * n;
    float *o = (float *)b[2] + (int64_t)i * n;
    double ss = 0;
    for (int j = 0; j < (mode == 0 ? n - 1 : n); j++) ss += (double)x[j] * x[j];
    float r = (float)(1.0 / sqrt(ss / n + c->f[0]));
    for (int j = 0; j < (mode == 1 ? n - 1 : n); j++) o[j] = bf16_to_f32(w[j]) * (x[j] * r);
  }
  if (mode == 2) ((float *)b[2])[(int64_t)c->batch * n] = 0.0f;
}
static vstatus rms_skiplast_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  rmsnorm_buggy(c, b, 0);
  ran(t, c, "test", "skiplast");
  return V_OK;
}
static vstatus rms_unwritten_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  rmsnorm_buggy(c, b, 1);
  ran(t, c, "test", "unwritten");
  return V_OK;
}
static vstatus rms_oob_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  rmsnorm_buggy(c, b, 2);
  ran(t, c, "test", "oob");
  return V_OK;
}
static vstatus rms_notrace_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  rmsnorm_buggy(c, b, 3);
  ran(t, c, "test", "cpu"); /* records a different variant's name: the intended one did not run */
  return V_OK;
}
static vstatus b4only_supports(const vop_case *c) {
  if (c->batch > 4) return VUNSUPPORTED("batch %d > 4 (this variant handles batch 1-4)", c->batch);
  return V_OK;
}
static vstatus rms_b4only_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  rmsnorm_buggy(c, b, 3);
  ran(t, c, "test", "b4only");
  return V_OK;
}

static vstatus moe_bf16in_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  moe_combine_sum(c, b, true, false);
  ran(t, c, "test", "bf16_in");
  return V_OK;
}
static vstatus moe_bf16sum_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  moe_combine_sum(c, b, true, true);
  ran(t, c, "test", "bf16_sum");
  return V_OK;
}

/* PLANTED BUG: the correct swiglu, then every output scaled by 1 + 2^-10 (a bf16-sized relative
 * error in an fp32 op): swiglu's check, with its float32 allowances, must still see it. */
static vstatus swiglu_scaled_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  VTRY(swiglu_compute(c, b));
  for (int64_t i = 0; i < (int64_t)c->batch * c->d[0]; i++) ((float *)b[4])[i] *= 1.0f + 1.0f / 1024;
  ran(t, c, "test", "scaled");
  return V_OK;
}

/* ---------------- registration ---------------- */

typedef struct {
  const char *op, *path, *name, *desc;
  vstatus (*supports)(const vop_case *);
  vstatus (*run)(const vop_case *, const vop_layout *, void *const *, vtrace *);
} entry;

static const entry k_entries[] = {
    {"embed", "cpu-ref", "cpu", "cpu_embed", any_case, embed_run},
    {"rmsnorm", "cpu-ref", "cpu", "cpu_rmsnorm", any_case, rmsnorm_run},
    {"add_rmsnorm", "cpu-ref", "cpu", "cpu_add_rmsnorm", any_case, add_rmsnorm_run},
    {"linear", "cpu-ref", "cpu", "cpu_linear (OpenMP over rows of W)", any_case, linear_run},
    {"rope", "cpu-ref", "cpu", "cpu_rope per head", rope_supports, rope_run},
    {"mla_decode", "cpu-ref", "cpu", "cpu_attend per head", any_case, mla_decode_run},
    {"mla_absorbed", "cpu-ref", "cpu", "plain f32 absorbed MLA", any_case, mla_absorbed_run},
    {"mla_absorbed_dcp", "cpu-ref", "cpu", "plain f32 absorbed MLA over the whole cache (no ranks)", any_case,
     mla_absorbed_dcp_run},
    {"attn_partial", "cpu-ref", "cpu", "plain f32 split-KV partials", any_case, attn_partial_run},
    {"lse_combine", "cpu-ref", "cpu", "plain f32 log-sum-exp combine", any_case, lse_combine_run},
    {"router", "cpu-ref", "cpu", "cpu_router_topk", router_supports, router_run},
    {"swiglu", "cpu-ref", "cpu", "cpu_swiglu_mlp", any_case, swiglu_run},
    {"moe_combine", "cpu-ref", "cpu", "plain f32 weighted sum + shared + residual", any_case, moe_combine_run},
    {"sample", "cpu-ref", "cpu", "vsample_with_u (common/sampling.c)", any_case, sample_run},
    {"allreduce", "cpu-ref", "cpu", "simulated ring: reduce-scatter + all-gather", any_case, allreduce_run},
    {"lse_combine", "test", "nomax", "PLANTED BUG: no max subtraction before exp", any_case, combine_nomax_run},
    {"mla_absorbed_dcp", "test", "dcp_split", "f32 DCP merge over the ranks as kernels/latency_dcp.cu (must pass)",
     dcp_ranks_supports, dcp_split_run},
    {"mla_absorbed_dcp", "test", "dcp_nomax", "PLANTED BUG (defects/31): a rank's lse without its local max",
     dcp_ranks_supports, dcp_nomax_run},
    {"mla_absorbed_dcp", "test", "dcp_floor", "PLANTED BUG (defects/32): owned positions counted (len - rank) / N",
     dcp_ranks_supports, dcp_floor_run},
    {"rmsnorm", "test", "skiplast", "PLANTED BUG: last element missing from the sum of squares", any_case,
     rms_skiplast_run},
    {"rmsnorm", "test", "unwritten", "PLANTED BUG: last output element of each row not written", any_case,
     rms_unwritten_run},
    {"rmsnorm", "test", "oob", "PLANTED BUG: writes one element past the end of out", any_case, rms_oob_run},
    {"rmsnorm", "test", "notrace", "PLANTED BUG: correct, but the trace names another variant", any_case,
     rms_notrace_run},
    {"rmsnorm", "test", "b4only", "correct for batch <= 4, unsupported above", b4only_supports, rms_b4only_run},
    {"swiglu", "test", "scaled", "PLANTED BUG: every output 2^-10 too large", any_case, swiglu_scaled_run},
};

/* Float32 variants that round some inputs to bf16 themselves (vop_variant.bf16_inputs): the
 * moe_combine ones take y (buffer 0) and shared (2) in bf16, as the latency path does. */
#define MOE_BF16_IN (1u << 0 | 1u << 2)
static const struct {
  entry e;
  uint32_t bf16_inputs;
} k_bf16_in_entries[] = {
    {{"moe_combine", "test", "bf16_in", "correct: bf16 y and shared (declared), fp32 sum", any_case, moe_bf16in_run},
     MOE_BF16_IN},
    {{"moe_combine", "test", "bf16_sum", "PLANTED BUG: bf16 y and shared, the sum rounded to bf16 at every add",
      any_case, moe_bf16sum_run},
     MOE_BF16_IN},
};

#define N_ENTRIES (sizeof k_entries / sizeof k_entries[0])
#define N_BF16_IN (sizeof k_bf16_in_entries / sizeof k_bf16_in_entries[0])

/* Registers e as the float32 variant *v of the cpu backend (v lives for the process). */
static void register_entry(vop_variant *v, const entry *e, uint32_t bf16_inputs) {
  const vop *op = vopreg_find_op(e->op);
  if (!op) {
    fprintf(stderr, "vouch: cpu variants: op '%s' is not registered\n", e->op);
    return;
  }
  *v = (vop_variant){.op = op, .path = e->path, .name = e->name, .desc = e->desc, .backend = vop_backend_cpu(),
                     .act_dtype = DT_F32, .bf16_inputs = bf16_inputs, .supports = e->supports, .run = e->run};
  if (vopreg_add_variant(v) != V_OK) fprintf(stderr, "vouch: %s\n", verr_msg());
}

void cpu_variants_register(void) {
  static vop_variant vars[N_ENTRIES + N_BF16_IN];
  for (size_t i = 0; i < N_ENTRIES; i++) register_entry(&vars[i], &k_entries[i], 0);
  for (size_t i = 0; i < N_BF16_IN; i++)
    register_entry(&vars[N_ENTRIES + i], &k_bf16_in_entries[i].e, k_bf16_in_entries[i].bf16_inputs);
}
