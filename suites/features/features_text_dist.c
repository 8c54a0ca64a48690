/* The checks of `vouch features --ref-server` on numbers (suites/features/features_text_checks.h):
 * the first token's distribution at temperature 1 (KLD of the two servers' top-K lists, against the
 * reference against itself), sampled first tokens inside the reference's top-p set, and the
 * generated tokens' logprobs (sane, and the reference's within its own repeat). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/engine/bounds.h"
#include "suites/engine/stats_tests.h"
#include "suites/features/features_text_dist.h"
#include "suites/served/served_topk.h"

#define TOP_K 20            /* alternatives asked per position (vLLM's default max_logprobs) */
#define KLD_MIN 1e-3        /* nats: the least KLD bound of the temperature check: a feature check (are
                               the logprobs of the distribution asked), not an accuracy check (diverge
                               --ref-server judges the numbers) */
#define SAMPLE_T 0.7        /* the top_p check's temperature */
#define SAMPLE_TOP_P 0.9    /* its top_p, at most: half the mass the reference's top-K list holds when that
                               is less (a model whose top K hold little mass would leave the set unknown) */
#define DRAWS 16            /* first tokens drawn per server (one request, n = DRAWS) */
#define CHI2_ALPHA 0.001    /* the chi-square homogeneity test's false-alarm rate */
#define LP_TOL 1e-6         /* nats: the rounding a logprob comparison allows */

/* One server's first-token alternatives at temperature 1 (greedy asked: logprobs are the model's). */
static served_gen first_token_gen(const ft_ctx *c) {
  served_gen q = ft_greedy_gen(c);
  q.max_tokens = 1, q.logprobs = TOP_K, q.return_token_ids = false;
  return q;
}

/* Position 0 of an answer when it lists at least two alternatives, else NULL. */
static const served_pos *first_pos(const served_call *call) {
  const served_choice *ch = ft_first(call);
  return ch && ch->n_lp > 0 && ch->lp[0].n_top >= 2 ? &ch->lp[0] : NULL;
}

vstatus ft_check_temperature(ft_ctx *c, ft_result *r) {
  const served_gen q = first_token_gen(c);
  served_call a[3]; /* the reference twice, the candidate */
  VTRY(ft_ask(c, 1, q, &a[0]));
  VTRY(ft_ask(c, 1, q, &a[1]));
  VTRY(ft_ask(c, 0, q, &a[2]));
  const served_pos *r0 = first_pos(&a[0]), *r1 = first_pos(&a[1]), *cp = first_pos(&a[2]);
  char why[300];
  double fl, kc;
  const double k = VOUCH_ACCURACY_RATIO;
  if (!a[0].ok || !a[1].ok) ft_ref_failed(r, a[0].ok ? &a[1] : &a[0], "top logprobs");
  else if (!r0 || !r1) ft_set(r, FT_NOT_SUPPORTED, "the reference lists no top logprobs (logprobs %d)", TOP_K);
  else if (!served_topk_kld(r0, r1, &fl, NULL, why, sizeof why)) ft_set(r, FT_UNDECIDED, "the reference against itself: %s", why);
  else if (!cp) ft_set(r, FT_FAIL, "logprobs %d: the reference lists %d alternatives, the candidate %s", TOP_K, r0->n_top,
                       a[2].ok ? "none" : a[2].error);
  else if (!served_topk_kld(r0, cp, &kc, NULL, why, sizeof why)) ft_set(r, FT_FAIL, "the candidate's alternatives: %s", why);
  else {
    r->cand = kc, r->ref = fl, r->unit = "nats";
    r->bound = fmax(k * k * fl, KLD_MIN);
    r->bound_source = "max(k^2 x the KLD of the reference against itself, 1e-3 nats), k = VOUCH_ACCURACY_RATIO; KLD over "
                      "the tokens both list + the rest (a lower bound of the full KLD)";
    ft_set(r, kc <= r->bound ? FT_PASS : FT_FAIL, "first token of the prompt, top %d logprobs: KLD(reference || candidate) "
           "%.3g nats, reference against itself %.3g, bound %.3g", TOP_K, kc, fl, r->bound);
  }
  served_calls_free(a, 3);
  return V_OK;
}

/* p's alternatives most likely first, into a new position *out (its top array malloc'ed; free(out->top)):
 * a completions answer lists them as a JSON object, whose order carries no meaning (node's encoder puts
 * integer-like names such as "249" first). Error: out of memory. */
static int by_logprob_desc(const void *a, const void *b) {
  const double x = ((const served_alt *)a)->logprob, y = ((const served_alt *)b)->logprob;
  return x < y ? 1 : x > y ? -1 : 0;
}
static vstatus sorted_alts(const served_pos *p, served_pos *out) {
  *out = *p;
  out->top = malloc((size_t)p->n_top * sizeof *out->top);
  if (!out->top) return VERR("features: out of memory for %d alternatives", p->n_top);
  memcpy(out->top, p->top, (size_t)p->n_top * sizeof *out->top);
  qsort(out->top, (size_t)p->n_top, sizeof *out->top, by_logprob_desc);
  return V_OK;
}

/* The length of the shortest prefix of p's alternatives (sorted, most likely first) that holds the
 * top-p set whichever order a server applies temperature t and top-p in; 0 when the listed ones may
 * not hold it. p's logprobs are of temperature 1 (normalized). At temperature t < 1 an unlisted token j
 * has p_j <= p_K (the last listed), so its share p_j^(1/t) <= p_j p_K^(1/t - 1): the unlisted mass at t
 * is at most (1 - listed mass) p_K^(1/t - 1), an upper bound of the normalizer. */
static int top_p_prefix(const served_pos *p, double t, double top_p) {
  double listed = 0, listed_t = 0;
  for (int i = 0; i < p->n_top; i++) listed += exp(p->top[i].logprob), listed_t += exp(p->top[i].logprob / t);
  const double pk = exp(p->top[p->n_top - 1].logprob);
  const double z_up = listed_t + fmax(0, 1 - listed) * pow(pk, 1 / t - 1);
  int n1 = 0, nt = 0;
  double cum = 0, cum_t = 0;
  for (int i = 0; i < p->n_top && (!n1 || !nt); i++) {
    cum += exp(p->top[i].logprob), cum_t += exp(p->top[i].logprob / t);
    if (!n1 && cum >= top_p * (1 + 1e-6)) n1 = i + 1;
    if (!nt && cum_t / z_up >= top_p * (1 + 1e-6)) nt = i + 1;
  }
  if (!n1 || !nt) return 0;
  int n = n1 > nt ? n1 : nt;
  while (n < p->n_top && p->top[n].logprob >= p->top[n - 1].logprob - LP_TOL) n++; /* ties at the edge */
  return n;
}

/* The index among set[0..n) of a drawn token, -1 outside. */
static int in_set(const served_pos *set, int n, const served_pos *drawn) {
  for (int i = 0; i < n; i++)
    if (served_same_token(set->top[i].token, set->top[i].id, drawn->token, drawn->id)) return i;
  return -1;
}

/* Counts an answer's draws per cell of the set into cnt[n] (cleared first); *out gets the draws
 * outside it, *total the draws read. */
static void count_draws(const served_call *call, const served_pos *set, int n, long *cnt, int *out, int *total) {
  memset(cnt, 0, (size_t)n * sizeof *cnt);
  *out = *total = 0;
  for (int i = 0; call->ok && i < call->reply.n_choices; i++) {
    const served_choice *ch = &call->reply.choices[i];
    if (ch->n_lp < 1) continue;
    const int k = in_set(set, n, &ch->lp[0]);
    ++*total;
    if (k < 0) ++*out;
    else cnt[k]++;
  }
}

/* Chi-square test of homogeneity of two rows of counts over n cells (cells of fewer than 5 draws in
 * all merged into one): its p-value, 1 when fewer than two cells are left. */
static double homogeneity_p(const long *a, const long *b, int n) {
  double ra = 0, rb = 0;
  for (int i = 0; i < n; i++) ra += a[i], rb += b[i];
  if (ra <= 0 || rb <= 0) return 1;
  double ca[SERVED_MAX_TOP + 1], cb[SERVED_MAX_TOP + 1];
  int m = 0;
  double sa = 0, sb = 0; /* the merged cell */
  for (int i = 0; i < n; i++) {
    if (a[i] + b[i] >= 5) ca[m] = (double)a[i], cb[m] = (double)b[i], m++;
    else sa += a[i], sb += b[i];
  }
  if (sa + sb > 0) ca[m] = sa, cb[m] = sb, m++;
  if (m < 2) return 1;
  double chi2 = 0;
  const double N = ra + rb;
  for (int i = 0; i < m; i++) {
    const double col = ca[i] + cb[i], ea = ra * col / N, eb = rb * col / N;
    chi2 += (ca[i] - ea) * (ca[i] - ea) / ea + (cb[i] - eb) * (cb[i] - eb) / eb;
  }
  return stat_chi2_sf(chi2, m - 1);
}

/* top_p for a distribution whose listed alternatives hold `listed` of the mass. */
static double pick_top_p(const served_pos *p) {
  double listed = 0;
  for (int i = 0; p && i < p->n_top; i++) listed += exp(p->top[i].logprob);
  return fmin(SAMPLE_TOP_P, listed / 2);
}

vstatus ft_check_top_p(ft_ctx *c, ft_result *r) {
  served_call lp, d[2]; /* the reference's distribution; the draws of the candidate and the reference */
  VTRY(ft_ask(c, 1, first_token_gen(c), &lp));
  const double top_p = pick_top_p(first_pos(&lp));
  served_gen q = ft_greedy_gen(c);
  q.max_tokens = 1, q.return_token_ids = false, q.logprobs = 0, q.n = DRAWS;
  q.temperature = SAMPLE_T, q.top_p = top_p > 0 ? top_p : SAMPLE_TOP_P, q.has_seed = true, q.seed = c->seed % (1ull << 53);
  for (int side = 1; side >= 0; side--) VTRY(ft_ask(c, side, q, &d[side]));
  served_pos sorted = {0};
  const served_pos *p = first_pos(&lp);
  if (p) {
    VTRY(sorted_alts(p, &sorted));
    p = &sorted;
  }
  const int n = p ? top_p_prefix(p, SAMPLE_T, top_p) : 0;
  long cr[SERVED_MAX_TOP], cc[SERVED_MAX_TOP];
  int out_r = 0, tot_r = 0, out_c = 0, tot_c = 0;
  if (n) count_draws(&d[1], p, n, cr, &out_r, &tot_r), count_draws(&d[0], p, n, cc, &out_c, &tot_c);
  char what[120];
  snprintf(what, sizeof what, "temperature %g, top_p %.3g, %d first tokens drawn", SAMPLE_T, q.top_p, DRAWS);
  if (!lp.ok) ft_ref_failed(r, &lp, "top logprobs");
  else if (!p) ft_set(r, FT_NOT_SUPPORTED, "the reference lists no top logprobs (logprobs %d)", TOP_K);
  else if (!n) ft_set(r, FT_UNDECIDED, "%s: the reference's top %d tokens may not hold its top-p set", what, p->n_top);
  else if (!d[1].ok) ft_ref_failed(r, &d[1], "the draws");
  else if (!tot_r || out_r) ft_set(r, FT_UNDECIDED, "%s: the reference itself draws %d of %d outside its top-p set of %d "
                                   "tokens (another order of temperature and top-p?)", what, out_r, tot_r, n);
  else if (!d[0].ok || !tot_c) ft_set(r, FT_FAIL, "%s: the reference draws, the candidate gives no draw with logprobs: %s",
                                      what, d[0].ok ? "no logprobs" : d[0].error);
  else {
    const double pv = homogeneity_p(cc, cr, n);
    r->cand = out_c, r->ref = out_r, r->unit = "draws outside the top-p set";
    r->bound = 0;
    r->bound_source = "none outside the reference's top-p set (computed from its logprobs for either order of temperature "
                      "and top-p); chi-square homogeneity of the draws over the set, alpha 0.001";
    ft_set(r, out_c == 0 && pv >= CHI2_ALPHA ? FT_PASS : FT_FAIL, "%s: the candidate %d of %d outside the reference's "
           "top-p set of %d tokens, the reference %d of %d; chi-square homogeneity p %.3g (fail below %g)", what, out_c,
           tot_c, n, out_r, tot_r, pv, CHI2_ALPHA);
  }
  free(sorted.top);
  served_calls_free(&lp, 1);
  served_calls_free(d, 2);
  return V_OK;
}

/* The first problem of a choice's logprobs into why (false when none): a logprob above 0, alternatives
 * whose mass passes 1, the chosen token missing from its alternatives although its logprob is at least
 * the least listed one. (Their order is not judged: completions list them as a JSON object.) */
static bool lp_problem(const served_choice *ch, char *why, size_t cap) {
  for (int i = 0; i < ch->n_lp; i++) {
    const served_pos *p = &ch->lp[i];
    if (!(p->logprob <= LP_TOL)) { snprintf(why, cap, "token %d: logprob %g is not <= 0", i + 1, p->logprob); return true; }
    double mass = 0, least = 0;
    for (int k = 0; k < p->n_top; k++) {
      if (!(p->top[k].logprob <= LP_TOL)) {
        snprintf(why, cap, "token %d: alternative '%.20s' has logprob %g, not <= 0", i + 1, p->top[k].token, p->top[k].logprob);
        return true;
      }
      mass += exp(p->top[k].logprob);
      if (k == 0 || p->top[k].logprob < least) least = p->top[k].logprob;
    }
    if (mass > 1 + 1e-4) { snprintf(why, cap, "token %d: the alternatives hold mass %.6g > 1", i + 1, mass); return true; }
    if (p->n_top && p->logprob >= least + LP_TOL) {
      bool found = false;
      for (int k = 0; k < p->n_top && !found; k++) found = served_same_token(p->token, p->id, p->top[k].token, p->top[k].id);
      if (!found) {
        snprintf(why, cap, "token %d: the chosen token (logprob %g) is missing from its alternatives (least %g)", i + 1,
                 p->logprob, least);
        return true;
      }
    }
  }
  return false;
}

/* The largest |a - b| chosen-token logprob over the leading positions where a and b chose the same
 * token; *n gets how many. */
static double lp_diff(const served_choice *a, const served_choice *b, int *n) {
  double m = 0;
  *n = 0;
  for (int i = 0; i < a->n_lp && i < b->n_lp; i++) {
    if (!served_same_token(a->lp[i].token, a->lp[i].id, b->lp[i].token, b->lp[i].id)) break;
    const double d = fabs(a->lp[i].logprob - b->lp[i].logprob);
    if (!(d <= m)) m = d; /* NaN counts as the largest */
    ++*n;
  }
  return m;
}

vstatus ft_check_logprobs(ft_ctx *c, ft_result *r) {
  served_gen q = ft_greedy_gen(c);
  q.logprobs = 5, q.return_token_ids = false;
  served_call a[3]; /* the reference twice, the candidate */
  VTRY(ft_ask(c, 1, q, &a[0]));
  VTRY(ft_ask(c, 1, q, &a[1]));
  VTRY(ft_ask(c, 0, q, &a[2]));
  const served_choice *r0 = ft_first(&a[0]), *r1 = ft_first(&a[1]), *cc = ft_first(&a[2]);
  char why[300];
  int nf = 0, nc = 0;
  if (!r0 || !r1) ft_ref_failed(r, r0 ? &a[1] : &a[0], "logprobs");
  else if (!r0->n_lp) ft_set(r, FT_NOT_SUPPORTED, "the reference gives no logprobs of its tokens");
  else if (!cc) ft_set(r, FT_FAIL, "logprobs 5: the reference answers, the candidate fails: %s", a[2].error);
  else if (cc->n_lp != (int)ft_ntokens(&a[2]) || !cc->n_lp)
    ft_set(r, FT_FAIL, "logprobs 5: the candidate gives %d positions for %ld tokens", cc->n_lp, ft_ntokens(&a[2]));
  else if (lp_problem(cc, why, sizeof why)) ft_set(r, FT_FAIL, "the candidate's logprobs: %s", why);
  else if (lp_problem(r0, why, sizeof why)) ft_set(r, FT_UNDECIDED, "the reference's own logprobs: %s", why);
  else {
    const double fl = lp_diff(r0, r1, &nf), dc = lp_diff(r0, cc, &nc);
    r->cand = dc, r->ref = fl, r->unit = "nats";
    r->bound = fmax(VOUCH_ACCURACY_RATIO * fl, FT_ABS_LP);
    r->bound_source = "max(k x the reference's largest difference from itself on a repeat, 1e-4 nats), k = "
                      "VOUCH_ACCURACY_RATIO";
    if (!nc) ft_set(r, FT_UNDECIDED, "the candidate's logprobs are sane, but its first greedy token differs from the "
                                     "reference's: no logprob compared");
    else ft_set(r, dc <= r->bound ? FT_PASS : FT_FAIL, "greedy, logprobs 5: sane on %d tokens; chosen-token logprobs on "
                "the %d tokens both chose differ by at most %.3g nats from the reference's, which differs from itself by "
                "%.3g on %d (bound %.3g)", cc->n_lp, nc, dc, fl, nf, r->bound);
  }
  served_calls_free(a, 3);
  return V_OK;
}
