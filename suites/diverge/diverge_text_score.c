/* One text position of two servers' prompt logprobs, compared (suites/diverge/diverge_text_score.h). */
#include "suites/diverge/diverge_text_score.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "suites/served/served_topk.h"

/* A logprob a server may give: finite and not above 0 beyond its rounding (as served_topk_kld's). */
#define LP_MAX 1e-3

bool dtext_same_token(const char *rt, int rid, const char *ct, int cid) { return served_same_token(rt, rid, ct, cid); }

static bool lp_ok(double lp) { return isfinite(lp) && lp <= LP_MAX; }

/* The index of the most likely alternative of p, -1 when it lists none. */
static int top1(const served_pos *p) {
  int b = -1;
  for (int i = 0; i < p->n_top; i++)
    if (b < 0 || p->top[i].logprob > p->top[b].logprob) b = i;
  return b;
}

/* The index of c's alternative that is r's alternative a, -1 when c does not list it. */
static int find_alt(const served_pos *c, const served_alt *a) {
  for (int j = 0; j < c->n_top; j++)
    if (dtext_same_token(a->token, a->id, c->top[j].token, c->top[j].id)) return j;
  return -1;
}

bool dtext_compare(const served_pos *r, const served_pos *c, dtext_pos *out, char *why, size_t cap) {
  memset(out, 0, sizeof *out);
  if (!dtext_same_token(r->token, r->id, c->token, c->id)) {
    snprintf(why, cap, "the token differs (reference '%.40s' id %d, candidate '%.40s' id %d): the servers tokenized "
             "the text differently", r->token ? r->token : "?", r->id, c->token ? c->token : "?", c->id);
    return false;
  }
  if (!lp_ok(r->logprob) || !lp_ok(c->logprob)) {
    snprintf(why, cap, "the token's logprob is not a logprob (reference %g, candidate %g)", r->logprob, c->logprob);
    return false;
  }
  if (!dtext_compare_dist(r, c, out, why, cap)) return false;
  out->dp = exp(c->logprob) - exp(r->logprob);
  return true;
}

bool dtext_compare_dist(const served_pos *r, const served_pos *c, dtext_pos *out, char *why, size_t cap) {
  memset(out, 0, sizeof *out);
  out->dp = NAN;
  /* the KLD on the shared partition (each alternative's logprob checked there) */
  if (!served_topk_kld(r, c, &out->kld, &out->shared, why, cap)) return false;
  const int rt = top1(r), ct = top1(c);
  out->same_top = rt >= 0 && ct >= 0 &&
                  dtext_same_token(r->top[rt].token, r->top[rt].id, c->top[ct].token, c->top[ct].id);
  /* the reference's margin and its top two tokens' error */
  int r2 = -1;
  for (int i = 0; i < r->n_top; i++)
    if (i != rt && !dtext_same_token(r->top[i].token, r->top[i].id, r->top[rt].token, r->top[rt].id) &&
        (r2 < 0 || r->top[i].logprob > r->top[r2].logprob))
      r2 = i;
  out->margin = rt < 0 ? 0 : r2 < 0 ? INFINITY : r->top[rt].logprob - r->top[r2].logprob;
  const int tops[2] = {rt, r2};
  for (int k = 0; k < 2; k++) {
    if (tops[k] < 0) continue;
    const int j = find_alt(c, &r->top[tops[k]]);
    if (j >= 0 && fabs(c->top[j].logprob - r->top[tops[k]].logprob) > out->top_err)
      out->top_err = fabs(c->top[j].logprob - r->top[tops[k]].logprob);
  }
  return true;
}
