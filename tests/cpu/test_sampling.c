/* Sampling (common/sampling.c) against a plain reference written here: every candidate sorted by
 * (value descending, index ascending), the first top_k kept, top-p, the inverse CDF walked in
 * token-id order. The library selects top-k with a heap and sorts the whole vocabulary with a
 * radix sort instead of qsort; picks and distributions must be the same bit for bit, on logits
 * full of ties (values on a coarse grid, -0 beside +0, subnormals), for every top-k from 0 past
 * the vocabulary, several top-p and temperatures. Then the seeded draws (vsample) against the
 * distribution they claim (vsample_distribution), a chi-square fit at fixed seeds: the features
 * suite reports this fit on a path's logits but does not gate on it (the sampler is shared code,
 * so it is gated here, where a fixed seed cannot make correct code fail by chance). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/sampling.h"
#include "common/philox.h"
#include "suites/engine/stats_tests.h"
#include "tests/harness.h"

typedef struct { float v; int i; } cand;

static int by_value(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->v != y->v) return x->v > y->v ? -1 : 1;
  return x->i - y->i;
}
static int by_index(const void *a, const void *b) { return ((const cand *)a)->i - ((const cand *)b)->i; }

/* The reference: kept candidates c[0..n) in token-id order with their probabilities p[c[j].i]. */
static int ref_kept(const float *l, int V, const vsampling *s, cand *c, double *p) {
  for (int i = 0; i < V; i++) c[i] = (cand){l[i] / s->temperature, i};
  qsort(c, (size_t)V, sizeof *c, by_value);
  int n = s->top_k > 0 && s->top_k < V ? s->top_k : V;
  double mx = c[0].v, z = 0, q[4096];
  for (int j = 0; j < n; j++) z += (q[j] = exp((double)c[j].v - mx));
  for (int j = 0; j < n; j++) q[j] /= z;
  if (s->top_p > 0 && s->top_p < 1) {
    double cum = 0;
    int keep = n;
    for (int j = 0; j < n; j++)
      if ((cum += q[j]) >= s->top_p) { keep = j + 1; break; }
    n = keep;
    z = 0;
    for (int j = 0; j < n; j++) z += q[j];
    for (int j = 0; j < n; j++) q[j] /= z;
  }
  for (int i = 0; i < V; i++) p[i] = 0;
  for (int j = 0; j < n; j++) p[c[j].i] = q[j];
  qsort(c, (size_t)n, sizeof *c, by_index);
  return n;
}

static int ref_pick(const cand *c, int n, const double *p, double u) {
  double cum = 0;
  for (int j = 0; j < n; j++)
    if (u < (cum += p[c[j].i])) return c[j].i;
  return c[n - 1].i;
}

/* p of 20000 seeded draws (sequence 1000, steps 0..19999) of s on l[0..V) against `claimed`. */
static double draws_fit(const float *l, int V, const vsampling *s, const double *claimed, void *work) {
  static long cnt[4096];
  memset(cnt, 0, sizeof cnt);
  for (long k = 0; k < 20000; k++) cnt[vsample(l, V, s, 1000, k, work)]++;
  double chi2, p;
  int dof;
  stat_chi2_gof(cnt, claimed, V, &chi2, &dof, &p);
  return p;
}

/* The seeded draws fit vsample_distribution on logits of several scales (peaked to flat), with
 * features' setting (T=1, top-k 40, top-p 0.95) and without truncation; and the fit rejects a
 * distribution the draws do not come from (the most and least likely kept tokens' probabilities
 * swapped, as a sampler that maps u to the wrong token would draw), so it can fail. */
static void check_draws_fit(float *l, double *d, void *work) {
  const int V = 4096;
  const uint64_t key = philox_key(11, "test_sampling.fit");
  const float scales[] = {0.5f, 1.0f, 3.0f};
  double worst = 1;
  for (int si = 0; si < 3; si++)
    for (int cfg = 0; cfg < 2; cfg++) {
      for (int i = 0; i < V; i++)
        l[i] = scales[si] * (float)(philox_unit(key, (uint64_t)(si * V + i)) + philox_unit(key ^ 1, (uint64_t)i) - 1.0);
      const vsampling s = cfg ? (vsampling){.temperature = 1.0f, .top_k = 40, .top_p = 0.95f, .seed = 5u + si}
                              : (vsampling){.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 5u + si};
      vsample_distribution(l, V, &s, d);
      const double p = draws_fit(l, V, &s, d, work);
      if (p < worst) worst = p;
    }
  /* 6 fits at fixed seeds; 1e-4 is far below what any of them should reach by chance (6e-4 together) */
  CHECK(worst >= 1e-4, "20000 seeded draws fit vsample_distribution at 3 scales x 2 settings: smallest p %.3g", worst);
  const vsampling s = {.temperature = 1.0f, .top_k = 40, .top_p = 0.95f, .seed = 9};
  vsample_distribution(l, V, &s, d);
  int hi = -1, lo = -1;
  for (int i = 0; i < V; i++) {
    if (d[i] <= 0) continue;
    if (hi < 0 || d[i] > d[hi]) hi = i;
    if (lo < 0 || d[i] < d[lo]) lo = i;
  }
  const double t = d[hi];
  d[hi] = d[lo];
  d[lo] = t;
  const double p = draws_fit(l, V, &s, d, work);
  CHECK(p < 1e-6, "the fit rejects a claimed distribution with two kept tokens' probabilities swapped (%.3g, %.3g): p %.3g",
        d[lo], d[hi], p);
}

int main(void) {
  enum { VMAX = 4096 };
  static float l[VMAX];
  static cand c[VMAX];
  static double p[VMAX], d[VMAX];
  void *work = malloc(VSAMPLE_WORK_BYTES(VMAX));
  const int vocabs[] = {1, 2, 7, 100, 4096};
  const float temps[] = {1.0f, 0.7f, 3.0f};
  const float tops_p[] = {1.0f, 0.95f, 0.5f, 0.01f};
  long cases = 0, picks = 0, wrong_picks = 0, wrong_dist = 0;
  const uint64_t key = philox_key(7, "test_sampling");
  for (size_t vi = 0; vi < sizeof vocabs / sizeof *vocabs; vi++) {
    const int V = vocabs[vi];
    /* logits on a grid of 1/8 in [-4, 4): many exact ties, so the index tie-break decides */
    for (int i = 0; i < V; i++) l[i] = (float)((int)(philox_unit(key, (uint64_t)(vi * VMAX + i)) * 64) - 32) / 8.0f;
    for (int i = 0; i < V; i += 5) if (l[i] == 0) l[i] = -0.0f; /* -0 ties +0 (and sorts as it) */
    if (V > 50) l[V / 2] = 1e-40f, l[V / 3] = -1e-40f;   /* subnormals */
    const int ks[] = {0, 1, 2, 3, 40, V - 1, V, V + 5};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
      for (size_t ti = 0; ti < sizeof temps / sizeof *temps; ti++)
        for (size_t pi = 0; pi < sizeof tops_p / sizeof *tops_p; pi++) {
          const vsampling s = {.temperature = temps[ti], .top_k = ks[ki], .top_p = tops_p[pi], .seed = 3};
          const int n = ref_kept(l, V, &s, c, p);
          vsample_distribution(l, V, &s, d);
          wrong_dist += memcmp(p, d, (size_t)V * sizeof *p) != 0;
          for (int k = 0; k < 64; k++, picks++) {
            const double u = k < 2 ? (double)k * 0.999999 : philox_unit(key ^ 0x5eed, (uint64_t)(cases * 64 + k));
            wrong_picks += vsample_with_u(l, V, &s, u, work) != ref_pick(c, n, p, u);
          }
          cases++;
        }
  }
  CHECK(wrong_dist == 0, "vsample_distribution equals the full-sort reference bit for bit: %ld of %ld cases differ",
        wrong_dist, cases);
  CHECK(wrong_picks == 0, "vsample_with_u picks the reference's token: %ld of %ld picks differ", wrong_picks, picks);
  /* the heap's answer is the sort's even when the vocabulary is all one value */
  for (int i = 0; i < 100; i++) l[i] = 1.5f;
  const vsampling s = {.temperature = 1.0f, .top_k = 5, .top_p = 1.0f};
  CHECK(vsample_with_u(l, 100, &s, 0.99, work) == 4 && vsample_with_u(l, 100, &s, 0.0, work) == 0,
        "all-tied logits: top-5 keeps tokens 0..4");
  /* -0 and +0 tie, in the heap (top-k) and in the full sort (top-p 0.045 of 100 equal tokens keeps 5):
   * the kept set is tokens 0..4 by index, as the reference's */
  for (int i = 0; i < 100; i++) l[i] = i % 2 ? -0.0f : 0.0f;
  const vsampling sp = {.temperature = 1.0f, .top_k = 0, .top_p = 0.045f};
  const int nk = ref_kept(l, 100, &s, c, p), np = ref_kept(l, 100, &sp, c, p);
  vsample_distribution(l, 100, &sp, d);
  CHECK(!memcmp(p, d, 100 * sizeof *p), "signed zeros tie: the top-p distribution is the reference's");
  CHECK(nk == 5 && np == 5 && c[4].i == 4 && vsample_with_u(l, 100, &s, 0.99, work) == 4 &&
            vsample_with_u(l, 100, &sp, 0.99, work) == 4,
        "signed zeros tie: top-5 and top-p keep 0..4 (%d, %d)", vsample_with_u(l, 100, &s, 0.99, work),
        vsample_with_u(l, 100, &sp, 0.99, work));
  check_draws_fit(l, d, work);
  free(work);
  return test_finish();
}
