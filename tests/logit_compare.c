#include "tests/logit_compare.h"

#include <math.h>
#include <stdio.h>

#include "tests/harness.h"

void cmp_top2(const float *l, int V, int *i1, float *margin) {
  int a = 0, b = -1;
  for (int i = 1; i < V; i++) {
    if (l[i] > l[a]) b = a, a = i;
    else if (b < 0 || l[i] > l[b]) b = i;
  }
  *i1 = a;
  *margin = b >= 0 ? l[a] - l[b] : INFINITY;
}

void cmp_rows(cmp_stats *c, const float *ref, const float *got, int rows, int V, const char *where) {
  for (int r = 0; r < rows; r++) {
    const float *a = ref + (size_t)r * V, *b = got + (size_t)r * V;
    double s2 = 0, maxd = 0, d2 = 0;
    int finite = 1;
    for (int i = 0; i < V; i++) {
      if (!isfinite(b[i])) finite = 0;
      double d = fabs((double)a[i] - (double)b[i]);
      s2 += (double)a[i] * a[i];
      d2 += d * d;
      if (d > maxd) maxd = d;
    }
    const double rms = sqrt(s2 / V) > 1e-6 ? sqrt(s2 / V) : 1e-6;
    const double rel = finite ? maxd / rms : INFINITY;
    c->rows++;
    if (!finite) c->nonfinite++;
    if (rel > c->max_rel) c->max_rel = rel;
    const int clean = rel <= c->tight;
    if (clean) {
      c->sum_d2 += d2;
      c->sum_r2 += s2;
      if (rel > c->max_rel_clean) c->max_rel_clean = rel;
    } else {
      c->outliers++;
      fprintf(stderr, "  %s: %s row %d: max|dlogit| = %.4f = %.3f x row rms (outlier)\n", c->what, where, r, maxd, rel);
    }
    int t_ref, t_got;
    float m_ref, m_got;
    cmp_top2(a, V, &t_ref, &m_ref);
    cmp_top2(b, V, &t_got, &m_got);
    if (m_ref > LC_MARGIN) {
      c->top1_checked++;
      if (t_ref == t_got) c->top1_agree++;
      else if (clean) c->top1_clean_disagree++;
    }
  }
}

void cmp_finish(const cmp_stats *c, double max_outliers) {
  const double pooled = c->sum_r2 > 0 ? sqrt(c->sum_d2 / c->sum_r2) : 0;
  printf("%s: %d rows, %d outliers (> %.2f r), max rel %.4f (clean %.4f), pooled rms rel %.5f, top-1 %d/%d "
         "(margin > %.2f)\n",
         c->what, c->rows, c->outliers, c->tight, c->max_rel, c->max_rel_clean, pooled, c->top1_agree,
         c->top1_checked, LC_MARGIN);
  CHECK(c->rows > 0, "%s: nothing compared", c->what);
  CHECK(c->nonfinite == 0, "%s: %d rows with NaN/Inf logits", c->what, c->nonfinite);
  CHECK(c->outliers <= (int)(max_outliers * c->rows), "%s: %d of %d rows exceed %.2f r", c->what, c->outliers, c->rows,
        c->tight);
  CHECK(c->max_rel <= LC_LOOSE, "%s: max|dlogit| %.3f r exceeds %.1f r", c->what, c->max_rel, LC_LOOSE);
  CHECK(pooled <= LC_POOLED, "%s: pooled rms error %.5f r exceeds %.3f r", c->what, pooled, LC_POOLED);
  CHECK(c->top1_clean_disagree == 0, "%s: %d clean rows with margin > %.2f disagree on top-1", c->what,
        c->top1_clean_disagree, LC_MARGIN);
}
