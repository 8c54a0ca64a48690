/* Step-time statistics of the perf sweeps. Median and percentiles and the stable-step mean
 * are suites/engine/record.c's (rec_stat_*), so a figure in the table equals the one `vouch verify`
 * re-derives from the stored samples; this adds the coefficient of variation. */
#ifndef VOUCH_SUITES_ENGINE_STATS_H
#define VOUCH_SUITES_ENGINE_STATS_H

typedef struct {
  int n;              /* samples summarized (after warm-up) */
  double median;      /* of the timed samples */
  double p90, p99;    /* percentiles of the timed samples (linear interpolation) */
  double mean;        /* arithmetic mean of the timed samples */
  double stable_mean; /* mean after skipping `warmup` samples and dropping |x - median| > 5 MAD */
  int stable_kept;    /* samples the stable mean kept */
  double cv_pct;      /* 100 * stdev / mean of the samples the stable mean kept (sample stdev, n-1) */
  double min, max;
} vstats;

/* Summarizes x[n] whose first `warmup` samples are warm-up steps: the stable mean and CV use
 * x[warmup..n), median/percentiles/mean/min/max use x[warmup..n) too. Fields are NaN when
 * there is nothing left to summarize. */
void vstats_summarize(const double *x, int n, int warmup, vstats *out);
/* Coefficient of variation in percent of x[n] (sample stdev, n-1); NaN for n < 2 or mean 0. */
double vstats_cv_pct(const double *x, int n);

#endif
