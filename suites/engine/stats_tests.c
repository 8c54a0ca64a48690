/* Statistics shared by the diverge / eval / feature suites (see stats_tests.h). */
#include "suites/engine/stats_tests.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

double stat_mcnemar_p(long b, long c) {
  long n = b + c, k = b < c ? b : c;
  if (n <= 0) return 1.0;
  /* sum_{i<=k} C(n,i) / 2^n, in logs to stay finite for large n */
  double lsum = -INFINITY;
  for (long i = 0; i <= k; i++) {
    double lt = lgamma((double)n + 1) - lgamma((double)i + 1) - lgamma((double)(n - i) + 1) - n * log(2.0);
    double hi = lsum > lt ? lsum : lt, lo = lsum > lt ? lt : lsum;
    lsum = hi + log1p(exp(lo - hi));
  }
  double p = 2.0 * exp(lsum);
  return p > 1.0 ? 1.0 : p;
}

/* Regularized lower incomplete gamma P(a, x) by its series (x < a + 1) and the upper one
 * Q(a, x) by a continued fraction (Lentz), as Numerical Recipes describes the method. */
static double gamma_p_series(double a, double x) {
  double sum = 1.0 / a, term = sum;
  for (int n = 1; n < 10000; n++) {
    term *= x / (a + n);
    sum += term;
    if (fabs(term) < fabs(sum) * 1e-15) break;
  }
  return sum * exp(-x + a * log(x) - lgamma(a));
}

static double gamma_q_cf(double a, double x) {
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 10000; i++) {
    double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    double del = d * c;
    h *= del;
    if (fabs(del - 1.0) < 1e-15) break;
  }
  return exp(-x + a * log(x) - lgamma(a)) * h;
}

double stat_chi2_sf(double x, int dof) {
  if (dof <= 0) return 1.0;
  if (!(x > 0)) return isnan(x) ? NAN : 1.0;
  if (isinf(x)) return 0.0;
  double a = dof / 2.0, hx = x / 2.0;
  if (hx < a + 1.0) return 1.0 - gamma_p_series(a, hx);
  return gamma_q_cf(a, hx);
}

/* Continued fraction of the regularized incomplete beta I_x(a, b) (modified Lentz), valid for
 * x < (a + 1) / (a + b + 2); the caller uses the symmetry I_x(a,b) = 1 - I_{1-x}(b,a) otherwise. */
static double beta_cf(double a, double b, double x) {
  const double tiny = 1e-300;
  double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
  d = fabs(d) < tiny ? 1.0 / tiny : 1.0 / d;
  double h = d;
  for (int m = 1; m <= 500; m++) {
    const double m2 = 2.0 * m;
    double num = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)); /* even step */
    d = 1.0 + num * d, c = 1.0 + num / c;
    d = fabs(d) < tiny ? 1.0 / tiny : 1.0 / d, c = fabs(c) < tiny ? tiny : c;
    h *= d * c;
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0)); /* odd step */
    d = 1.0 + num * d, c = 1.0 + num / c;
    d = fabs(d) < tiny ? 1.0 / tiny : 1.0 / d, c = fabs(c) < tiny ? tiny : c;
    const double del = d * c;
    h *= del;
    if (fabs(del - 1.0) < 1e-15) break;
  }
  return h;
}

/* Regularized incomplete beta I_x(a, b), a, b > 0, x in [0, 1]. */
static double beta_inc(double a, double b, double x) {
  if (x <= 0) return 0.0;
  if (x >= 1) return 1.0;
  const double front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
  if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_cf(a, b, x) / a;
  return 1.0 - front * beta_cf(b, a, 1.0 - x) / b;
}

double stat_t_sf2(double t, double df) {
  if (isnan(t) || !(df > 0)) return NAN;
  if (isinf(t)) return 0.0;
  return beta_inc(df / 2.0, 0.5, df / (df + t * t));
}

double stat_t_quantile(double q, double df) {
  if (!(q > 0.5 && q < 1.0) || !(df >= 1)) return NAN;
  const double tail = 2.0 * (1.0 - q); /* two-sided tail the quantile leaves */
  double lo = 0.0, hi = 1.0;
  while (stat_t_sf2(hi, df) > tail && hi < 1e12) hi *= 2.0;
  for (int i = 0; i < 200 && hi - lo > 1e-10 * hi; i++) {
    const double mid = 0.5 * (lo + hi);
    if (stat_t_sf2(mid, df) > tail) lo = mid;
    else hi = mid;
  }
  return 0.5 * (lo + hi);
}

void stat_chi2_gof(const long *counts, const double *probs, int n, double *chi2, int *dof, double *p) {
  long total = 0;
  for (int i = 0; i < n; i++) total += counts[i];
  double stat = 0, pool_e = 0, pool_o = 0;
  int cells = 0, largest = -1;
  double largest_e = -1;
  bool impossible = false;
  for (int i = 0; i < n; i++) {
    double e = probs[i] * (double)total;
    if (probs[i] <= 0) {
      if (counts[i] > 0) impossible = true;
      continue;
    }
    if (e < 5.0) {
      pool_e += e;
      pool_o += (double)counts[i];
      continue;
    }
    if (e > largest_e) { largest_e = e; largest = i; }
    cells++;
  }
  /* pooled cell: its own cell when its expectation is >= 5, else merged into the largest */
  double merged_e = 0, merged_o = 0;
  if (pool_e >= 5.0) {
    stat += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
    cells++;
  } else if (pool_e > 0 || pool_o > 0) {
    merged_e = pool_e;
    merged_o = pool_o;
  }
  for (int i = 0; i < n; i++) {
    double e = probs[i] * (double)total;
    if (probs[i] <= 0 || e < 5.0) continue;
    double o = (double)counts[i];
    if (i == largest) { e += merged_e; o += merged_o; }
    stat += (o - e) * (o - e) / e;
  }
  if (largest < 0 && pool_e < 5.0) cells = 1; /* everything in one cell: no test possible */
  if (impossible) stat = INFINITY;
  *chi2 = stat;
  *dof = cells - 1;
  *p = *dof > 0 ? stat_chi2_sf(stat, *dof) : (impossible ? 0.0 : 1.0);
}

int stat_log_softmax(const float *logits, int n, double *out) {
  int bad = 0;
  double mx = -INFINITY;
  for (int i = 0; i < n; i++) {
    if (!isfinite(logits[i])) { bad++; continue; }
    if (logits[i] > mx) mx = logits[i];
  }
  double z = 0;
  for (int i = 0; i < n; i++)
    if (isfinite(logits[i])) z += exp((double)logits[i] - mx);
  double lz = mx + log(z);
  for (int i = 0; i < n; i++) out[i] = isfinite(logits[i]) ? (double)logits[i] - lz : NAN;
  return bad;
}

double stat_top2_margin(const float *l, int n, int *i1, int *i2) {
  int a = 0, b = -1;
  for (int i = 1; i < n; i++) {
    if (l[i] > l[a]) { b = a; a = i; }
    else if (b < 0 || l[i] > l[b]) b = i;
  }
  if (b < 0) b = a;
  if (i1) *i1 = a;
  if (i2) *i2 = b;
  return (double)l[a] - l[b];
}

double stat_top2_error(const float *ref, const float *other, int n) {
  int a, b;
  stat_top2_margin(ref, n, &a, &b);
  const double da = fabs((double)other[a] - ref[a]), db = fabs((double)other[b] - ref[b]);
  return da > db ? da : db;
}

double stat_kld(const float *ref, const float *test, int n, double *scratch) {
  double *lp = scratch, *lq = scratch + n;
  if (stat_log_softmax(ref, n, lp) || stat_log_softmax(test, n, lq)) return NAN;
  double k = 0;
  for (int i = 0; i < n; i++) {
    double p = exp(lp[i]);
    if (p > 0) k += p * (lp[i] - lq[i]);
  }
  return k < 0 ? 0 : k;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double stat_percentile(const double *x, int n, double p) {
  if (n <= 0) return NAN;
  double *s = malloc((size_t)n * sizeof *s);
  if (!s) return NAN;
  memcpy(s, x, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_d);
  double r = p / 100.0 * (n - 1);
  int lo = (int)floor(r), hi = lo + 1 < n ? lo + 1 : lo;
  double v = s[lo] + (s[hi] - s[lo]) * (r - lo);
  free(s);
  return v;
}

void stat_mean_se(const double *x, int n, double *mean, double *se) {
  double m = 0;
  for (int i = 0; i < n; i++) m += x[i];
  m = n > 0 ? m / n : NAN;
  double v = 0;
  for (int i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
  *mean = m;
  *se = n > 1 ? sqrt(v / (n - 1) / n) : 0.0;
}

void stat_trimmed_mean_se(double *x, int n, double trim, double *mean, double *se) {
  assert(trim >= 0 && trim < 0.5);
  *mean = NAN;
  *se = 0;
  if (n <= 0) return;
  qsort(x, (size_t)n, sizeof *x, cmp_d);
  const int g = (int)(trim * n), h = n - 2 * g; /* cut from each end, kept */
  double kept = 0;
  for (int i = g; i < n - g; i++) kept += x[i];
  /* the winsorized sample: x[g] stands for the g values below it, x[n-g-1] for the g above */
  const double m = kept / h, w = (kept + g * (x[g] + x[n - g - 1])) / n;
  double v = 0;
  for (int i = 0; i < n; i++) {
    const double e = x[i < g ? g : i >= n - g ? n - g - 1 : i] - w;
    v += e * e;
  }
  *mean = m;
  *se = h > 1 ? sqrt(v / ((double)h * (h - 1))) : 0.0; /* (n - 1) s_w^2 = v */
}

double stat_auc_normalized(const double *xs, const double *ys, int n) {
  if (n <= 0) return NAN;
  if (n == 1 || xs[n - 1] <= xs[0]) return ys[0];
  double a = 0;
  for (int i = 1; i < n; i++) a += (xs[i] - xs[i - 1]) * (ys[i] + ys[i - 1]) / 2;
  return a / (xs[n - 1] - xs[0]);
}
