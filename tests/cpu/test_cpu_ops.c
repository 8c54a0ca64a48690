/* The CPU reference ops against hand-written float64 computations on small random inputs:
 * rmsnorm, add+rmsnorm, linear (f32/bf16/f16 weights, batched == one row at a time,
 * threaded sizes, row slices), embed, rope (plain and interleaved vs the direct pair
 * formula, YaRN-style attn_factor), router (group-limited top-k incl. a case where HF's
 * 0.0 masking picks experts from dropped groups), softmax, swiglu MLP, attention. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/philox.h"
#include "reference/cpu/ops.h"
#include "tests/harness.h"

static uint64_t g_key = 0x5eedULL;
static uint64_t g_ctr;

static float rnd(void) { return philox_symmetric(g_key, g_ctr++); }

/* A [rows, cols] (or [cols] when rows == 0) tensor of dtype dt filled with values*scale
 * (rounded to dt); vals (if not NULL) receives the stored values widened to double. */
static vtensor make_tensor(vdtype dt, int rows, int cols, float scale, float offset) {
  vtensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.ndim = rows > 0 ? 2 : 1;
  t.shape[0] = rows > 0 ? rows : cols;
  t.shape[1] = rows > 0 ? cols : 0;
  int64_t n = (int64_t)(rows > 0 ? rows : 1) * cols;
  t.data = malloc((size_t)n * vdtype_size(dt));
  t.owned = true;
  for (int64_t i = 0; i < n; i++) {
    float v = offset + rnd() * scale;
    if (dt == DT_F32) ((float *)t.data)[i] = v;
    else if (dt == DT_BF16) ((uint16_t *)t.data)[i] = f32_to_bf16(v);
    else ((uint16_t *)t.data)[i] = f32_to_f16(v);
  }
  return t;
}

static double tget(const vtensor *t, int64_t i) { return (double)vtensor_get_f32(t, i); }

static void fill(float *x, int n, float scale) {
  for (int i = 0; i < n; i++) x[i] = rnd() * scale;
}

static double max_rel_err(const float *got, const double *want, int n) {
  double ref = 0.0, err = 0.0;
  for (int i = 0; i < n; i++) ref = fmax(ref, fabs(want[i]));
  for (int i = 0; i < n; i++) {
    if (!isfinite(got[i])) return INFINITY;
    err = fmax(err, fabs((double)got[i] - want[i]));
  }
  return err / (ref > 0 ? ref : 1.0);
}

static void test_rmsnorm(void) {
  const int R = 3, N = 37;
  float eps = 1e-6f;
  for (int dt = 0; dt < 3; dt++) {
    vdtype t = dt == 0 ? DT_F32 : dt == 1 ? DT_BF16 : DT_F16;
    vtensor w = make_tensor(t, 0, N, 0.2f, 1.0f);
    float x[3 * 37], out[3 * 37], res[3 * 37], x2[3 * 37];
    double want[3 * 37];
    fill(x, R * N, 3.0f);
    fill(res, R * N, 1.0f);
    cpu_rmsnorm(out, x, &w, R, N, eps);
    for (int r = 0; r < R; r++) {
      double ss = 0;
      for (int i = 0; i < N; i++) ss += (double)x[r * N + i] * x[r * N + i];
      double inv = 1.0 / sqrt(ss / N + eps);
      for (int i = 0; i < N; i++) want[r * N + i] = tget(&w, i) * x[r * N + i] * inv;
    }
    double e = max_rel_err(out, want, R * N);
    CHECK(e < 2e-6, "rmsnorm dtype %d: rel err %.3g", dt, e);

    memcpy(x2, x, sizeof x);
    cpu_add_rmsnorm(out, x2, res, &w, R, N, eps);
    int sum_ok = 1;
    for (int i = 0; i < R * N; i++) sum_ok &= x2[i] == x[i] + res[i];
    CHECK(sum_ok, "add_rmsnorm: x += res");
    for (int r = 0; r < R; r++) {
      double ss = 0;
      for (int i = 0; i < N; i++) ss += (double)x2[r * N + i] * x2[r * N + i];
      double inv = 1.0 / sqrt(ss / N + eps);
      for (int i = 0; i < N; i++) want[r * N + i] = tget(&w, i) * x2[r * N + i] * inv;
    }
    e = max_rel_err(out, want, R * N);
    CHECK(e < 2e-6, "add_rmsnorm dtype %d: rel err %.3g", dt, e);
    free(w.data);
  }
}

static void check_linear(vdtype dt, int n_out, int n_in, int rows) {
  vtensor w = make_tensor(dt, n_out, n_in, 0.5f, 0.0f);
  float *x = malloc(sizeof(float) * (size_t)rows * n_in);
  float *y = malloc(sizeof(float) * (size_t)rows * n_out);
  float *y1 = malloc(sizeof(float) * (size_t)n_out);
  fill(x, rows * n_in, 2.0f);
  for (int i = 0; i < rows * n_out; i++) y[i] = NAN; /* poison: every element must be written */
  cpu_linear(y, x, &w, rows);
  double worst = 0.0;
  int bitwise = 1;
  for (int r = 0; r < rows; r++) {
    for (int o = 0; o < n_out; o++) {
      double s = 0, mag = 0;
      for (int i = 0; i < n_in; i++) {
        double p = tget(&w, (int64_t)o * n_in + i) * x[r * n_in + i];
        s += p;
        mag += fabs(p);
      }
      double g = y[r * n_out + o];
      double e = isfinite(g) ? fabs(g - s) / (mag + 1e-30) : INFINITY;
      worst = fmax(worst, e);
    }
    cpu_linear(y1, x + r * n_in, &w, 1);
    bitwise &= memcmp(y1, y + r * n_out, sizeof(float) * (size_t)n_out) == 0;
  }
  CHECK(worst < 1e-6, "linear %s [%d,%d] x %d rows: err/sum|w*x| = %.3g", vdtype_name(dt), n_out, n_in, rows, worst);
  CHECK(bitwise, "linear %s [%d,%d]: batched rows differ from one row at a time", vdtype_name(dt), n_out, n_in);

  /* a slice of rows [o0, o0+k) */
  int o0 = n_out / 3, k = n_out / 2 > 0 ? n_out / 2 : 1;
  float *ys = malloc(sizeof(float) * (size_t)rows * k);
  cpu_linear_rows(ys, x, &w, o0, k, rows);
  int same = 1;
  for (int r = 0; r < rows; r++)
    for (int o = 0; o < k; o++) same &= ys[r * k + o] == y[r * n_out + o0 + o];
  CHECK(same, "linear_rows %s: slice [%d,+%d) differs from the full product", vdtype_name(dt), o0, k);
  free(ys);
  free(w.data);
  free(x);
  free(y);
  free(y1);
}

static void test_linear(void) {
  vdtype dts[3] = {DT_F32, DT_BF16, DT_F16};
  for (int d = 0; d < 3; d++) {
    check_linear(dts[d], 33, 70, 5);  /* tail lanes, single thread */
    check_linear(dts[d], 7, 8, 1);    /* exactly one lane block */
    check_linear(dts[d], 300, 301, 4); /* threaded */
  }
}

static void test_embed(void) {
  vtensor e = make_tensor(DT_BF16, 10, 12, 1.0f, 0.0f);
  int32_t tok[3] = {9, 0, 4};
  float out[36];
  cpu_embed(out, tok, &e, 3);
  int ok = 1;
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < 12; i++) ok &= out[r * 12 + i] == vtensor_get_f32(&e, (int64_t)tok[r] * 12 + i);
  CHECK(ok, "embed rows");
  free(e.data);
}

static void test_rope(void) {
  const int D = 64, half = D / 2;
  float inv_freq[32];
  for (int i = 0; i < half; i++) inv_freq[i] = (float)(1.0 / pow(10000.0, 2.0 * i / D));
  int positions[5] = {0, 1, 17, 4095, 131071};
  float factors[2] = {1.0f, 1.3f};
  for (int il = 0; il < 2; il++)
    for (int f = 0; f < 2; f++)
      for (int p = 0; p < 5; p++) {
        float v[64], orig[64];
        double want[64];
        fill(orig, D, 1.0f);
        memcpy(v, orig, sizeof v);
        int pos = positions[p];
        cpu_rope(v, D, pos, inv_freq, factors[f], il);
        for (int i = 0; i < half; i++) {
          /* the pair that rotates together, from the layout's definition */
          double a = il ? orig[2 * i] : orig[i];
          double b = il ? orig[2 * i + 1] : orig[half + i];
          float th = (float)pos * inv_freq[i];
          double c = cos((double)th) * factors[f], s = sin((double)th) * factors[f];
          want[i] = a * c - b * s;
          want[half + i] = b * c + a * s;
        }
        double e = max_rel_err(v, want, D);
        CHECK(e < 1e-6, "rope interleave=%d factor=%g pos=%d: rel err %.3g", il, factors[f], pos, e);
      }
  /* position 0 with factor 1 is the identity (after de-interleaving) */
  float v[64], o[64];
  fill(o, D, 1.0f);
  memcpy(v, o, sizeof v);
  cpu_rope(v, D, 0, inv_freq, 1.0f, 1);
  int ok = 1;
  for (int i = 0; i < half; i++) ok &= v[i] == o[2 * i] && v[half + i] == o[2 * i + 1];
  CHECK(ok, "rope interleave at pos 0 is the de-interleave permutation");
}

/* Oracle router in double, written from the HF description by sorting. */
typedef struct {
  double v;
  int i;
} vi;
static int cmp_vi(const void *a, const void *b) {
  const vi *x = a, *y = b;
  if (x->v != y->v) return x->v > y->v ? -1 : 1;
  return x->i - y->i;
}
static void oracle_router(const float *logit, const float *bias, const ds_config *c, int *idx, double *wt,
                          int mask_neg_inf) {
  int E = c->n_routed_experts, G = c->n_group, gs = E / G;
  double sc[256], ch[256];
  vi all[256], grp[64];
  for (int e = 0; e < E; e++) {
    sc[e] = 1.0 / (1.0 + exp(-(double)logit[e]));
    ch[e] = sc[e] + bias[e];
  }
  for (int g = 0; g < G; g++) {
    vi m[64];
    for (int i = 0; i < gs; i++) m[i] = (vi){ch[g * gs + i], i};
    qsort(m, (size_t)gs, sizeof(vi), cmp_vi);
    grp[g] = (vi){m[0].v + m[1].v, g};
  }
  qsort(grp, (size_t)G, sizeof(vi), cmp_vi);
  int keep[64] = {0};
  for (int k = 0; k < c->topk_group; k++) keep[grp[k].i] = 1;
  for (int e = 0; e < E; e++) all[e] = (vi){keep[e / gs] ? ch[e] : (mask_neg_inf ? -INFINITY : 0.0), e};
  qsort(all, (size_t)E, sizeof(vi), cmp_vi);
  double sum = 0;
  for (int k = 0; k < c->num_experts_per_tok; k++) {
    idx[k] = all[k].i;
    wt[k] = sc[all[k].i];
    sum += wt[k];
  }
  for (int k = 0; k < c->num_experts_per_tok; k++) {
    if (c->norm_topk_prob) wt[k] /= sum + 1e-20;
    wt[k] *= c->routed_scaling_factor;
  }
}

static void test_router(void) {
  ds_config c;
  memset(&c, 0, sizeof c);
  c.n_routed_experts = 32;
  c.num_experts_per_tok = 6;
  c.n_group = 8;
  c.topk_group = 3;
  c.routed_scaling_factor = 2.5;
  int mismatch = 0, werr = 0, masked_mattered = 0;
  for (int trial = 0; trial < 400; trial++) {
    c.norm_topk_prob = trial % 2 == 0;
    float logit[32], bias[32];
    fill(logit, 32, 4.0f);
    /* a third of the trials: strongly negative biases, so kept experts' choice < 0.0 */
    for (int e = 0; e < 32; e++) bias[e] = trial % 3 == 2 ? -1.5f + 0.1f * rnd() : 0.5f * rnd();
    int32_t idx[6];
    float wt[6];
    int oi[6], oi_inf[6];
    double ow[6], ow_inf[6];
    cpu_router_topk(logit, bias, &c, idx, wt);
    oracle_router(logit, bias, &c, oi, ow, 0);
    oracle_router(logit, bias, &c, oi_inf, ow_inf, 1);
    for (int k = 0; k < 6; k++) {
      if (idx[k] != oi[k]) mismatch++;
      if (!(fabs(wt[k] - ow[k]) <= 1e-6 * fabs(ow[k]) + 1e-7)) werr++;
    }
    if (memcmp(oi, oi_inf, sizeof oi) != 0) masked_mattered++;
  }
  CHECK(mismatch == 0, "router: %d chosen experts differ from the oracle", mismatch);
  CHECK(werr == 0, "router: %d weights differ from the oracle", werr);
  CHECK(masked_mattered > 50, "router: test never exercised 0.0 vs -inf masking (%d trials)", masked_mattered);

  /* a hand case: 4 experts, 2 groups, keep 1; group 1 wins but its biases push choice
   * below 0.0, so HF picks an expert of the dropped group 0 (masked to 0.0). */
  ds_config h = c;
  h.n_routed_experts = 4;
  h.n_group = 2;
  h.topk_group = 1;
  h.num_experts_per_tok = 2;
  h.norm_topk_prob = true;
  h.routed_scaling_factor = 1.0;
  float lg[4] = {0.0f, -1.0f, 3.0f, 2.0f};  /* sigmoid: .5 .269 .953 .881 */
  float bs[4] = {-2.0f, -2.0f, -0.9f, -1.2f}; /* choice: -1.5 -1.73 .053 -.319 -> groups -3.23, -.266 */
  int32_t id[2];
  float w[2];
  cpu_router_topk(lg, bs, &h, id, w);
  CHECK(id[0] == 2 && id[1] == 0, "router hand case: chose %d,%d, want 2,0 (masked expert 0 at 0.0 beats -0.319)",
        id[0], id[1]);
  double s2 = 1.0 / (1.0 + exp(-3.0)), s0 = 0.5;
  CHECK(fabs(w[0] - s2 / (s2 + s0)) < 1e-6 && fabs(w[1] - s0 / (s2 + s0)) < 1e-6, "router hand case weights %g %g",
        w[0], w[1]);
}

static void test_softmax(void) {
  int ns[4] = {1, 5, 64, 1000};
  for (int t = 0; t < 4; t++) {
    int n = ns[t];
    float *x = malloc(sizeof(float) * (size_t)n);
    double *want = malloc(sizeof(double) * (size_t)n);
    fill(x, n, 20.0f);
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < n; i++) mx = fmax(mx, x[i]);
    for (int i = 0; i < n; i++) s += exp(x[i] - mx);
    for (int i = 0; i < n; i++) want[i] = exp(x[i] - mx) / s;
    cpu_softmax(x, n);
    double e = 0;
    for (int i = 0; i < n; i++) e = fmax(e, fabs(x[i] - want[i]) / (want[i] + 1e-30));
    CHECK(e < 1e-5, "softmax n=%d: rel err %.3g", n, e);
    free(x);
    free(want);
  }
}

static void test_swiglu(void) {
  const int D = 40, I = 24, R = 3;
  vtensor g = make_tensor(DT_BF16, I, D, 0.4f, 0.0f), u = make_tensor(DT_BF16, I, D, 0.4f, 0.0f);
  vtensor d = make_tensor(DT_BF16, D, I, 0.4f, 0.0f);
  float x[3 * 40], out[3 * 40], tmp[2 * 24 * 3];
  double want[3 * 40];
  fill(x, R * D, 2.0f);
  cpu_swiglu_mlp(out, x, &g, &u, &d, R, tmp);
  for (int r = 0; r < R; r++) {
    double h[24];
    for (int j = 0; j < I; j++) {
      double a = 0, b = 0;
      for (int i = 0; i < D; i++) {
        a += tget(&g, j * D + i) * x[r * D + i];
        b += tget(&u, j * D + i) * x[r * D + i];
      }
      h[j] = a / (1.0 + exp(-a)) * b;
    }
    for (int o = 0; o < D; o++) {
      double s = 0;
      for (int j = 0; j < I; j++) s += tget(&d, o * I + j) * h[j];
      want[r * D + o] = s;
    }
  }
  double e = max_rel_err(out, want, R * D);
  CHECK(e < 1e-5, "swiglu: rel err %.3g", e);
  CHECK(fabs(cpu_silu(1.0f) - 1.0 / (1.0 + exp(-1.0))) < 1e-7, "silu(1)");
  free(g.data);
  free(u.data);
  free(d.data);
}

static void test_attend(void) {
  const int QK = 24, V = 16, H = 3, N = 19;
  float q[24], k[19 * 3 * 24], v[19 * 3 * 16], out[16], sc[19];
  fill(q, QK, 1.0f);
  fill(k, N * H * QK, 1.0f);
  fill(v, N * H * V, 1.0f);
  for (int h = 0; h < H; h++)
    for (int n = 1; n <= N; n += 6) {
      float scale = 0.37f;
      cpu_attend(out, q, k + h * QK, H * QK, v + h * V, H * V, n, QK, V, scale, sc);
      double s[19], mx = -INFINITY, z = 0, want[16] = {0};
      for (int j = 0; j < n; j++) {
        double d = 0;
        for (int i = 0; i < QK; i++) d += (double)q[i] * k[(j * H + h) * QK + i];
        s[j] = d * scale;
        mx = fmax(mx, s[j]);
      }
      for (int j = 0; j < n; j++) z += exp(s[j] - mx);
      for (int j = 0; j < n; j++)
        for (int i = 0; i < V; i++) want[i] += exp(s[j] - mx) / z * v[(j * H + h) * V + i];
      double e = max_rel_err(out, want, V);
      CHECK(e < 1e-5, "attend head %d n_ctx %d: rel err %.3g", h, n, e);
    }
}

int main(void) {
  test_rmsnorm();
  test_linear();
  test_embed();
  test_rope();
  test_router();
  test_softmax();
  test_swiglu();
  test_attend();
  cpu_ops_set_threads(1);
  check_linear(DT_BF16, 300, 301, 2); /* same results on one thread */
  cpu_ops_set_threads(0);
  return test_finish();
}
