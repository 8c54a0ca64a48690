#include "suites/engine/stats.h"

#include <math.h>
#include <stdlib.h>

#include "suites/engine/record.h"

double vstats_cv_pct(const double *x, int n) {
  if (n < 2) return NAN;
  double mean = 0;
  for (int i = 0; i < n; i++) mean += x[i];
  mean /= n;
  if (mean == 0) return NAN;
  double ss = 0;
  for (int i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
  return 100.0 * sqrt(ss / (n - 1)) / fabs(mean);
}

void vstats_summarize(const double *x, int n, int warmup, vstats *o) {
  if (warmup < 0) warmup = 0;
  if (warmup > n) warmup = n;
  const double *y = x + warmup;
  const int m = n - warmup;
  o->n = m;
  o->median = rec_stat_median(y, m);
  o->p90 = rec_stat_percentile(y, m, 90);
  o->p99 = rec_stat_percentile(y, m, 99);
  o->mean = rec_stat_mean(y, m);
  o->min = m > 0 ? rec_stat_percentile(y, m, 0) : NAN;
  o->max = m > 0 ? rec_stat_percentile(y, m, 100) : NAN;
  o->stable_mean = rec_stat_stable_mean(x, n, warmup);
  o->stable_kept = 0;
  o->cv_pct = NAN;
  if (m <= 0 || isnan(o->median)) return;
  /* the samples the stable mean keeps: |y - median| <= 5 MAD (same rule as rec_stat_stable_mean) */
  double *dev = malloc((size_t)m * sizeof *dev), *kept = malloc((size_t)m * sizeof *kept);
  if (!dev || !kept) {
    free(dev);
    free(kept);
    return;
  }
  for (int i = 0; i < m; i++) dev[i] = fabs(y[i] - o->median);
  const double mad = rec_stat_median(dev, m);
  int k = 0;
  for (int i = 0; i < m; i++)
    if (dev[i] <= 5.0 * mad) kept[k++] = y[i];
  o->stable_kept = k;
  o->cv_pct = vstats_cv_pct(kept, k);
  free(dev);
  free(kept);
}
