/* Statistics the divergence, eval and feature suites share: paired tests (McNemar's exact
 * test), goodness of fit (chi-square with its p-value), KL divergence between two logit
 * rows, percentiles and mean +/- standard error. All double precision, no allocation
 * unless stated. */
#ifndef VOUCH_SUITES_ENGINE_STATS_TESTS_H
#define VOUCH_SUITES_ENGINE_STATS_TESTS_H

#include <stdint.h>

/* Two-sided exact McNemar p-value for b and c discordant pairs (b: first right, second
 * wrong; c: the reverse): 2 * P(X <= min(b,c)), X ~ Binomial(b+c, 1/2), capped at 1.
 * 1.0 when b + c == 0. */
double stat_mcnemar_p(long b, long c);
/* Upper tail P(X >= x) of the chi-square distribution with `dof` degrees of freedom
 * (regularized upper incomplete gamma Q(dof/2, x/2)). */
double stat_chi2_sf(double x, int dof);
/* Two-sided tail P(|T| >= t) of Student's t with `df` > 0 degrees of freedom (the regularized
 * incomplete beta I_{df/(df+t^2)}(df/2, 1/2)); 1 at t = 0, NaN for NaN. */
double stat_t_sf2(double t, double df);
/* The q-quantile of Student's t with df >= 1 degrees of freedom, for q in (0.5, 1): the t whose
 * upper tail is 1 - q (bisection on stat_t_sf2 to 1e-10 relative). NaN outside that range. */
double stat_t_quantile(double q, double df);
/* Pearson chi-square goodness of fit of `counts[n]` (total draws = sum) against the
 * probabilities `probs[n]` (sum 1). Cells with expected count < 5 are pooled into one
 * cell (expected < 5 after pooling: merged into the largest cell). Observed counts in
 * cells of probability 0 make the statistic +inf (p = 0). Writes the statistic, the degrees
 * of freedom (cells - 1) and the p-value. */
void stat_chi2_gof(const long *counts, const double *probs, int n, double *chi2, int *dof, double *p);
/* log-softmax of logits[n] in double into out[n]. Returns the number of non-finite logits. */
int stat_log_softmax(const float *logits, int n, double *out);
/* KL(P || Q) in nats where P = softmax(ref), Q = softmax(test), both [n] logits;
 * scratch holds 2n doubles. NaN when either row has a non-finite logit. */
double stat_kld(const float *ref, const float *test, int n, double *scratch);
/* Top-2 margin of a logit row (largest - second largest, 0 for n < 2); the two indices in *i1,
 * *i2 (lowest index on ties), either may be NULL. The margin rule's input (docs/verdicts.md). */
double stat_top2_margin(const float *logits, int n, int *i1, int *i2);
/* Largest |other - ref| over ref's top two tokens: how far a second computation moved the logits
 * the argmax is decided by. */
double stat_top2_error(const float *ref, const float *other, int n);
/* p-th percentile (p in [0,100]) with linear interpolation between order statistics of a
 * sorted copy; NaN for n == 0. */
double stat_percentile(const double *x, int n, double p);
/* Mean and standard error of the mean (sample std / sqrt(n)); se = 0 for n < 2. */
void stat_mean_se(const double *x, int n, double *mean, double *se);
/* Yuen's trimmed mean of x[n]: floor(trim x n) values cut from each end of the sorted values
 * (trim in [0, 0.5)), and its standard error from the winsorized variance s_w^2 (the cut values
 * replaced by the nearest kept one): se = sqrt((n - 1) s_w^2 / (h (h - 1))), h = the values kept.
 * A few outliers move neither, where they move the plain mean's se without bound; trim 0 gives the
 * plain mean and its se. x must be finite (the caller pairs finite rows). Sorts x in place (no
 * allocation). mean NaN for n == 0, se 0 for h < 2. */
void stat_trimmed_mean_se(double *x, int n, double trim, double *mean, double *se);
/* Trapezoid area under score(x) over x in [x0, x_last], divided by the x range, so a
 * constant score s gives s; one point gives its score. xs ascending. */
double stat_auc_normalized(const double *xs, const double *ys, int n);

#endif
