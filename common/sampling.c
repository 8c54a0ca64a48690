/* Sampling: temperature -> top-k -> top-p -> inverse CDF, as HF's logits processors order them.
 * The inverse CDF walks the kept set in token-id order, not in probability order: two paths whose
 * logits differ by rounding then draw the same token for the same uniform except where u falls
 * between their two CDFs at some token boundary (probability at most sum_i |F_a(i) - F_b(i)|,
 * small when the distributions are close), while a probability-ordered walk lets two
 * near-tied tokens swap places and remaps every draw above them (seen: 70 % agreement at
 * max |dlogit| 0.04 on a near-flat model). */
#include "common/sampling.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/philox.h"

int vsample_argmax(const float *logits, int vocab) {
  int best = 0;
  for (int i = 1; i < vocab; i++)
    if (logits[i] > logits[best]) best = i;
  return best;
}

typedef struct { float v; int i; } vi_pair;
_Static_assert(sizeof(vi_pair) <= sizeof(double), "kept_set sorts through its vocab doubles of p as scratch pairs");

/* Descending by value, ascending index on ties: a total order, so results are reproducible. */
static int cmp_desc(const void *a, const void *b) {
  const vi_pair *x = a, *y = b;
  if (x->v > y->v) return -1;
  if (x->v < y->v) return 1;
  return x->i - y->i;
}

/* h[0..n) is a heap whose root is the candidate cmp_desc puts last: moves h[i] down to its place. */
static void sift_down(vi_pair *h, int n, int i) {
  for (;;) {
    int c = 2 * i + 1;
    if (c >= n) return;
    if (c + 1 < n && cmp_desc(&h[c + 1], &h[c]) > 0) c++;
    if (cmp_desc(&h[c], &h[i]) <= 0) return;
    const vi_pair t = h[i];
    h[i] = h[c];
    h[c] = t;
    i = c;
  }
}

/* pairs[0..k) = the first k of all vocab candidates in cmp_desc order, sorted: a heap of k
 * (O(vocab log k)) instead of sorting the whole vocabulary per draw (16 ms at vocab 163840).
 * cmp_desc is a total order on (value, index) for NaN-free values, so these are exactly the full
 * sort's first k (with a NaN, qsort's order was unspecified already; so is this one). */
static void top_k_sorted(const float *logits, int vocab, float temperature, int k, vi_pair *pairs) {
  for (int i = 0; i < k; i++) pairs[i] = (vi_pair){logits[i] / temperature, i};
  for (int i = k / 2 - 1; i >= 0; i--) sift_down(pairs, k, i);
  for (int i = k; i < vocab; i++) {
    const vi_pair c = {logits[i] / temperature, i};
    if (cmp_desc(&c, &pairs[0]) < 0) { pairs[0] = c; sift_down(pairs, k, 0); }
  }
  qsort(pairs, (size_t)k, sizeof *pairs, cmp_desc);
}

/* Sort key of v: ascending keys are descending values; -0 and +0 share one key (cmp_desc ties them). */
static uint32_t desc_key(float v) {
  uint32_t u;
  if (v == 0) v = 0; /* -0 -> +0 */
  memcpy(&u, &v, sizeof u);
  u = (u & 0x80000000u) ? ~u : u ^ 0x80000000u; /* ascending in v */
  return ~u;
}

/* Sorts a[0..n) (in index order on entry) into cmp_desc order by a stable LSD radix sort on the
 * value, so ties keep ascending indices, with tmp[n] as scratch: 4 passes instead of qsort's
 * n log n comparator calls (16 ms at vocab 163840). False (a unchanged in order) when a value is
 * NaN, which cmp_desc does not order totally: the caller keeps qsort's behaviour there. */
static bool radix_desc(vi_pair *a, vi_pair *tmp, int n) {
  uint32_t cnt[4][256];
  memset(cnt, 0, sizeof cnt);
  for (int i = 0; i < n; i++) {
    if (isnan(a[i].v)) return false;
    const uint32_t k = desc_key(a[i].v);
    for (int b = 0; b < 4; b++) cnt[b][(k >> (8 * b)) & 0xFF]++;
  }
  for (int b = 0; b < 4; b++) {
    if (cnt[b][(desc_key(a[0].v) >> (8 * b)) & 0xFF] == (uint32_t)n) continue; /* one bucket: order kept */
    uint32_t off = 0;
    for (int d = 0; d < 256; d++) {
      const uint32_t c = cnt[b][d];
      cnt[b][d] = off;
      off += c;
    }
    for (int i = 0; i < n; i++) tmp[cnt[b][(desc_key(a[i].v) >> (8 * b)) & 0xFF]++] = a[i];
    memcpy(a, tmp, (size_t)n * sizeof *a);
  }
  return true;
}

/* What kept_set found: the normalizers its probabilities were divided by and the last kept
 * candidate, so a caller can recompute any kept token's probability bit for bit in any order. */
typedef struct {
  double mx;    /* the largest scaled logit */
  double z;     /* sum of exp(v - mx) over the top-k set, in descending order */
  double z2;    /* with top-p: the kept probabilities' sum they were divided by again (0: no top-p) */
  vi_pair last; /* the last kept candidate in cmp_desc order: (v, i) is kept iff it is not after it */
} kept_info;

/* Sorted candidates after temperature and top-k; returns the count kept and fills probs
 * (normalized over the kept set after top-p) and *info. */
static int kept_set(const float *logits, int vocab, const vsampling *s, vi_pair *pairs, double *p, kept_info *info) {
  int n = vocab;
  if (s->top_k > 0 && s->top_k < vocab) {
    n = s->top_k;
    top_k_sorted(logits, vocab, s->temperature, n, pairs);
  } else {
    for (int i = 0; i < vocab; i++) pairs[i] = (vi_pair){logits[i] / s->temperature, i};
    /* p (vocab doubles, filled below) is the radix sort's scratch of vocab pairs */
    if (!radix_desc(pairs, (vi_pair *)p, vocab)) qsort(pairs, (size_t)vocab, sizeof *pairs, cmp_desc);
  }
  double mx = pairs[0].v, z = 0;
  for (int i = 0; i < n; i++) z += (p[i] = exp((double)pairs[i].v - mx));
  for (int i = 0; i < n; i++) p[i] /= z;
  *info = (kept_info){.mx = mx, .z = z};
  if (s->top_p > 0 && s->top_p < 1) {
    double cum = 0;
    int keep = n;
    for (int i = 0; i < n; i++) {
      cum += p[i];
      if (cum >= s->top_p) { keep = i + 1; break; }
    }
    n = keep;
    z = 0;
    for (int i = 0; i < n; i++) z += p[i];
    for (int i = 0; i < n; i++) p[i] /= z;
    info->z2 = z;
  }
  info->last = pairs[n - 1];
  return n;
}

int vsample_with_u(const float *logits, int vocab, const vsampling *s, double u, void *work) {
  if (s->temperature <= 0) return vsample_argmax(logits, vocab);
  void *buf = work ? work : malloc((size_t)vocab * (sizeof(vi_pair) + sizeof(double)));
  if (!buf) return vsample_argmax(logits, vocab);
  vi_pair *pairs = buf;
  double *p = (double *)(pairs + vocab);
  kept_info k;
  const int n = kept_set(logits, vocab, s, pairs, p, &k);
  /* the inverse CDF in token-id order: each kept token's probability recomputed as kept_set
   * computed it (the same operations on the same values), so no second sort by index */
  int pick = -1, seen = 0;
  double cum = 0;
  for (int i = 0; i < vocab && seen < n; i++) {
    const vi_pair c = {logits[i] / s->temperature, i};
    if (cmp_desc(&c, &k.last) > 0) continue; /* after the last kept candidate: not kept */
    double q = exp((double)c.v - k.mx);
    q /= k.z;
    if (k.z2 > 0) q /= k.z2;
    cum += q;
    pick = i;
    seen++;
    if (u < cum) break;
  }
  if (pick < 0) pick = k.last.i; /* unreachable with an ordered comparison; NaN logits */
  if (!work) free(buf);
  return pick;
}

int vsample(const float *logits, int vocab, const vsampling *s, int seq, int64_t step, void *work) {
  uint64_t key = philox_key(s->seed, "vouch.sampling");
  double u = philox_unit(key ^ ((uint64_t)(uint32_t)seq << 32), (uint64_t)step);
  return vsample_with_u(logits, vocab, s, u, work);
}

void vsample_distribution(const float *logits, int vocab, const vsampling *s, double *probs) {
  for (int i = 0; i < vocab; i++) probs[i] = 0;
  if (s->temperature <= 0) { probs[vsample_argmax(logits, vocab)] = 1; return; }
  vi_pair *pairs = malloc((size_t)vocab * sizeof *pairs);
  double *p = malloc((size_t)vocab * sizeof *p);
  if (!pairs || !p) { free(pairs); free(p); probs[vsample_argmax(logits, vocab)] = 1; return; }
  kept_info k;
  const int n = kept_set(logits, vocab, s, pairs, p, &k);
  for (int i = 0; i < n; i++) probs[pairs[i].i] = p[i];
  free(pairs);
  free(p);
}
