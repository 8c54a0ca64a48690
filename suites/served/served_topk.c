/* Two top-K lists compared on their shared partition (suites/served/served_topk.h). */
#include "suites/served/served_topk.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define LP_MAX 1e-3     /* a logprob a server may give: finite and not above 0 beyond its rounding */
#define MASS_EPS 1e-12  /* the least mass a cell of c is held at: a cell c gives no mass costs a large
                           finite KLD, not +inf */

bool served_same_token(const char *rt, int rid, const char *ct, int cid) {
  if (rid >= 0 && cid >= 0) return rid == cid;
  return rt && ct && !strcmp(rt, ct);
}

/* The first alternative of p whose logprob is not a logprob, -1 when none. */
static int bad_alt(const served_pos *p) {
  for (int i = 0; i < p->n_top; i++)
    if (!(isfinite(p->top[i].logprob) && p->top[i].logprob <= LP_MAX)) return i;
  return -1;
}

bool served_topk_kld(const served_pos *r, const served_pos *c, double *kld, int *shared, char *why, size_t cap) {
  const served_pos *side[2] = {r, c};
  for (int s = 0; s < 2; s++) {
    const int i = bad_alt(side[s]);
    if (i >= 0) {
      snprintf(why, cap, "%s alternative %d: logprob %g is not a logprob", s ? "second" : "first", i,
               side[s]->top[i].logprob);
      return false;
    }
  }
  double P = 0, Q = 0, kl = 0;
  int n = 0;
  for (int i = 0; i < r->n_top; i++) {
    bool seen = false; /* a token listed twice is one cell */
    for (int k = 0; k < i && !seen; k++)
      seen = served_same_token(r->top[k].token, r->top[k].id, r->top[i].token, r->top[i].id);
    int j = -1;
    for (int k = 0; k < c->n_top && j < 0 && !seen; k++)
      if (served_same_token(r->top[i].token, r->top[i].id, c->top[k].token, c->top[k].id)) j = k;
    if (j < 0) continue;
    const double p = exp(r->top[i].logprob), q = exp(c->top[j].logprob);
    P += p, Q += q, n++;
    if (p > MASS_EPS) kl += p * log(p / (q > MASS_EPS ? q : MASS_EPS));
  }
  if (shared) *shared = n;
  const double pr = P < 1 ? 1 - P : 0, qr = Q < 1 ? 1 - Q : 0; /* the rest (rounding may pass 1) */
  if (pr > MASS_EPS) kl += pr * log(pr / (qr > MASS_EPS ? qr : MASS_EPS));
  *kld = kl;
  return true;
}
