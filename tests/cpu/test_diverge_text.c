/* One text position of two servers' prompt logprobs (suites/diverge/diverge_text_score.h), on
 * positions whose answer is known by hand: identical lists (KLD 0, same top), a shift of the
 * candidate's logprobs (KLD of the coarsened distributions, computed here in closed form), tokens
 * only one side lists (they fall in "the rest"), a swapped top (same_top false, margin and top_err),
 * matching by id and by text, a tokenization mismatch and logprobs that are not logprobs refused,
 * and the data-processing bound: the coarsened KLD never exceeds the full KLD of the same two
 * distributions over random draws. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/diverge/diverge_text_score.h"
#include "tests/harness.h"

/* A position listing n alternatives (ids ids[i], names "t<id>", logprobs lp[i]); the token at the
 * position is alternative `at`. */
static served_pos pos(int n, const int *ids, const double *lp, int at) {
  served_pos p = {0};
  p.top = calloc((size_t)n, sizeof *p.top);
  p.n_top = n;
  for (int i = 0; i < n; i++) {
    char b[32];
    snprintf(b, sizeof b, "t%d", ids[i]);
    p.top[i].token = strdup(b);
    p.top[i].id = ids[i];
    p.top[i].logprob = lp[i];
  }
  p.token = strdup(p.top[at].token);
  p.id = ids[at];
  p.logprob = lp[at];
  return p;
}

static void pos_free(served_pos *p) {
  for (int i = 0; i < p->n_top; i++) free(p->top[i].token);
  free(p->top);
  free(p->token);
}

/* KL(p || q) of two distributions over n cells. */
static double kl(const double *p, const double *q, int n) {
  double s = 0;
  for (int i = 0; i < n; i++)
    if (p[i] > 0) s += p[i] * log(p[i] / q[i]);
  return s;
}

int main(void) {
  char why[300];
  dtext_pos d;
  { /* identical: 0, same top, margin log(0.5/0.3) */
    const int ids[3] = {7, 9, 11};
    const double lp[3] = {log(0.5), log(0.3), log(0.1)};
    served_pos r = pos(3, ids, lp, 1), c = pos(3, ids, lp, 1);
    CHECK(dtext_compare(&r, &c, &d, why, sizeof why), "identical: %s", why);
    CHECK(fabs(d.kld) < 1e-15 && d.same_top && d.shared == 3, "identical: kld %g same %d shared %d", d.kld, d.same_top, d.shared);
    CHECK(fabs(d.margin - log(0.5 / 0.3)) < 1e-12 && d.top_err == 0 && d.dp == 0, "identical: margin %g", d.margin);
    pos_free(&r), pos_free(&c);
  }
  { /* the candidate's mass moved: cells {7, 9, 11, rest} with known masses */
    const int ids[3] = {7, 9, 11};
    const double p[4] = {0.5, 0.3, 0.1, 0.1}, q[4] = {0.4, 0.35, 0.1, 0.15};
    const double lr[3] = {log(p[0]), log(p[1]), log(p[2])}, lc[3] = {log(q[0]), log(q[1]), log(q[2])};
    served_pos r = pos(3, ids, lr, 0), c = pos(3, ids, lc, 0);
    CHECK(dtext_compare(&r, &c, &d, why, sizeof why), "moved: %s", why);
    CHECK(fabs(d.kld - kl(p, q, 4)) < 1e-12, "moved: kld %.15g, want %.15g", d.kld, kl(p, q, 4));
    CHECK(d.same_top && fabs(d.top_err - log(0.5 / 0.4)) < 1e-12, "moved: top_err %g", d.top_err); /* token 7: 0.5 -> 0.4 */
    CHECK(fabs(d.dp - (0.4 - 0.5)) < 1e-12, "moved: dp %g", d.dp);
    pos_free(&r), pos_free(&c);
  }
  { /* a token only one side lists falls in the rest: cells {7, rest} */
    const int ir[2] = {7, 9}, ic[2] = {7, 13};
    const double lr[2] = {log(0.6), log(0.3)}, lc[2] = {log(0.5), log(0.2)};
    served_pos r = pos(2, ir, lr, 0), c = pos(2, ic, lc, 0);
    const double p[2] = {0.6, 0.4}, q[2] = {0.5, 0.5};
    CHECK(dtext_compare(&r, &c, &d, why, sizeof why), "one side: %s", why);
    CHECK(fabs(d.kld - kl(p, q, 2)) < 1e-12 && d.shared == 1, "one side: kld %g want %g, shared %d", d.kld, kl(p, q, 2), d.shared);
    pos_free(&r), pos_free(&c);
  }
  { /* the top swapped */
    const int ids[2] = {7, 9};
    const double lr[2] = {log(0.6), log(0.4)}, lc[2] = {log(0.4), log(0.6)};
    served_pos r = pos(2, ids, lr, 0), c = pos(2, ids, lc, 0);
    CHECK(dtext_compare(&r, &c, &d, why, sizeof why) && !d.same_top, "swapped: same_top %d", d.same_top);
    CHECK(fabs(d.top_err - log(0.6 / 0.4)) < 1e-12, "swapped: top_err %g", d.top_err);
    pos_free(&r), pos_free(&c);
  }
  { /* by text when a side has no ids (echo's {token: logprob} lists); a mismatch refused */
    const int ids[2] = {7, 9};
    const double lp[2] = {log(0.6), log(0.4)};
    served_pos r = pos(2, ids, lp, 0), c = pos(2, ids, lp, 0);
    for (int i = 0; i < 2; i++) c.top[i].id = -1;
    c.id = -1;
    CHECK(dtext_compare(&r, &c, &d, why, sizeof why) && d.shared == 2 && fabs(d.kld) < 1e-15, "by text: %s", why);
    free(c.token);
    c.token = strdup("t9");
    CHECK(!dtext_compare(&r, &c, &d, why, sizeof why) && strstr(why, "tokenized"), "mismatch refused: %s", why);
    c.logprob = NAN;
    free(c.token);
    c.token = strdup("t7");
    CHECK(!dtext_compare(&r, &c, &d, why, sizeof why) && strstr(why, "not a logprob"), "NaN refused: %s", why);
    c.logprob = log(0.6);
    c.top[1].logprob = 0.5;
    CHECK(!dtext_compare(&r, &c, &d, why, sizeof why) && strstr(why, "second alternative 1"), "lp > 0 refused: %s", why);
    pos_free(&r), pos_free(&c);
  }
  { /* data processing: over random full distributions of 40 tokens, each side listing its top 8,
     * the coarsened KLD <= the full KLD */
    unsigned seed = 12345;
    int bad = 0;
    for (int t = 0; t < 2000; t++) {
      double p[40], q[40], sp = 0, sq = 0;
      for (int i = 0; i < 40; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = exp(4.0 * (seed >> 8) / 16777216.0);
        seed = seed * 1103515245u + 12345u;
        q[i] = p[i] * exp(0.5 * ((seed >> 8) / 16777216.0 - 0.5));
        sp += p[i], sq += q[i];
      }
      for (int i = 0; i < 40; i++) p[i] /= sp, q[i] /= sq;
      int ir[8], ic[8];
      double lr[8], lc[8];
      for (int side = 0; side < 2; side++) { /* each side's top 8 by its own mass */
        const double *m = side ? q : p;
        int *ids = side ? ic : ir;
        double *lp = side ? lc : lr;
        bool used[40] = {0};
        for (int k = 0; k < 8; k++) {
          int b = -1;
          for (int i = 0; i < 40; i++)
            if (!used[i] && (b < 0 || m[i] > m[b])) b = i;
          used[b] = true, ids[k] = b, lp[k] = log(m[b]);
        }
      }
      served_pos r = pos(8, ir, lr, 0), c = pos(8, ic, lc, 0);
      c.id = ir[0], c.logprob = log(q[ir[0]]); /* the position's token is r's top token on both sides */
      free(c.token);
      c.token = strdup(r.token);
      if (!dtext_compare(&r, &c, &d, why, sizeof why) || d.kld > kl(p, q, 40) + 1e-12 || d.kld < -1e-12) bad++;
      pos_free(&r), pos_free(&c);
    }
    CHECK(bad == 0, "coarsened KLD above the full one (or negative) in %d of 2000 draws", bad);
  }
  return test_finish();
}
