/* Row-by-row comparison of two paths' logits, for the GPU tests (bf16 paths against each
 * other or against cpu-ref). Per row: max |dlogit| relative to the reference row's rms r;
 * rows within `tight` r are clean and pooled into an rms error; others are outliers (router
 * near-ties flip an expert and move that row by up to ~1 r). Top-1 must agree on clean rows
 * whose reference top1-top2 margin exceeds LC_MARGIN. */
#ifndef VOUCH_TESTS_LOGIT_COMPARE_H
#define VOUCH_TESTS_LOGIT_COMPARE_H

#define LC_LOOSE 4.0    /* max|d| / r for any row */
#define LC_POOLED 0.02  /* pooled rms(d) / rms(ref) over clean rows */
#define LC_MARGIN 0.05f /* top-1 is checked where the reference margin exceeds this */

typedef struct {
  const char *what;   /* printed name of the comparison */
  double tight;       /* max|d| / r for a clean row */
  int rows, outliers, nonfinite;
  int top1_checked, top1_agree, top1_clean_disagree;
  double max_rel, max_rel_clean, sum_d2, sum_r2;
} cmp_stats;

/* Index of the largest logit and its margin over the second. */
void cmp_top2(const float *l, int V, int *i1, float *margin);
/* Adds `rows` rows of V logits (ref vs got); `where` names them in outlier lines. */
void cmp_rows(cmp_stats *c, const float *ref, const float *got, int rows, int V, const char *where);
/* Prints the summary and CHECKs it: no NaN/Inf, outliers <= max_outliers of the rows, every
 * row within LC_LOOSE r, pooled error <= LC_POOLED, no clean top-1 disagreement. */
void cmp_finish(const cmp_stats *c, double max_outliers);

#endif
