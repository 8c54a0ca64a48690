/* A server as the candidate of `vouch diverge` (suites/diverge/diverge_served.h): one completion per
 * teacher-forced row, its top-k logprobs against the reference's log-softmax of that row. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/interrupt.h"
#include "suites/diverge/diverge_served.h"
#include "suites/engine/stats_tests.h"

/* Why row q cannot be compared, or NULL: it failed, holds no token, no logprobs named by id, or a
 * field the server filled wrongly (an id outside the vocabulary of V, a logprob above 0); the message
 * names the field. buf holds a message made here. */
static const char *row_problem(const served_req *q, int V, char *buf, size_t cap) {
  if (!q->ok) return q->t_send == 0 ? "not sent (interrupted)" : q->error;
  if (q->n_tokens < 1 || q->ids[0] < 0) return "the server returned no token id";
  if (q->ids[0] >= V) {
    snprintf(buf, cap, "token_ids holds %d, outside the vocabulary of %d", q->ids[0], V);
    return buf;
  }
  const served_top *t = q->top ? &q->top[0] : NULL;
  if (!t || t->n == 0)
    return "the server gave no logprobs named by token id (it needs 'logprobs' and 'return_tokens_as_token_ids')";
  /* a mass above 1 would make the partition KLD below meaningless (even negative) */
  return served_top_problem(t, V, buf, cap);
}

/* Compares row `row` of r: the reference's logits lr[V] (log-softmax in lp[V]) with the server's
 * answer q; `next` the stream's next token. Adds to d's extremes. */
static void served_row(diverge_result *r, served_div *d, size_t row, const float *lr, double *lp, int V,
                       const served_req *q, int32_t next) {
  const int rbad = stat_log_softmax(lr, V, lp); /* its non-finite logits */
  r->ref_nonfinite += rbad;
  const served_top *t = &q->top[0];
  if (t->given < d->given_min) d->given_min = t->given;
  if (t->given > d->given_max) d->given_max = t->given;
  if (rbad) {
    r->kld[row] = r->dp[row] = r->margin[row] = r->top_err[row] = NAN;
    return;
  }
  /* KLD over the partition {the server's top-k tokens, the rest} */
  double kl = 0, mp = 0, mq = 0, dp = NAN;
  for (int k = 0; k < t->n; k++) {
    const int32_t id = t->id[k]; /* inside the vocabulary (row_problem) */
    const double p = exp(lp[id]), lq = t->lp[k];
    kl += p * (lp[id] - lq);
    mp += p, mq += exp(lq);
    const double dl = fabs(lq - lp[id]);
    if (dl > d->max_dlogprob) d->max_dlogprob = dl;
    if (id == next) dp = exp(lq) - p;
  }
  const double pt = fmax(0, 1 - mp), qt = fmax(0, 1 - mq);
  /* qt at 0 (the server's top-k hold all of its mass, within float rounding): the tail term is
   * pt (ln pt + 69), so a reference tail against none exceeds the default bound 0.01 from pt ~
   * 1.7e-4 on; below, renormalized logprobs are off by ~pt nats, under any numerics bound. A mass
   * above 1 is refused in row_problem. */
  if (pt > 1e-12) kl += pt * log(pt / fmax(qt, 1e-30));
  if (pt > d->tail_ref_max) d->tail_ref_max = pt;
  if (qt > d->tail_srv_max) d->tail_srv_max = qt;
  r->kld[row] = kl;
  r->dp[row] = dp; /* NaN where the next token is not among the server's top-k */
  int top; /* the reference's argmax (the first of equal maxima, as vsample_argmax) */
  r->margin[row] = stat_top2_margin(lr, V, &top, NULL);
  r->top_err[row] = NAN; /* logits are not known, only logprobs: the server is never the baseline */
  r->same[row] = top == q->ids[0];
  r->same_top_pct += r->same[row];
}

vstatus diverge_run_served(const served_target *t, int logprobs, int batch, int tokens, int V, const int32_t *stream,
                           const float *ref_rows, int concurrency, diverge_result *r, served_div *d) {
  const int B = batch, T = tokens, n = B * T;
  *d = (served_div){.asked = logprobs, .given_min = 1 << 30};
  r->supported = true;
  if (t->max_len && T + 1 > t->max_len) { /* the last row: T prompt tokens and 1 answer token */
    r->supported = false;
    snprintf(r->reason, sizeof r->reason, "the last row's prompt of %d tokens and its answer exceed the server's "
             "max_model_len %d", T, t->max_len);
    return V_OK;
  }
  served_req *reqs = calloc((size_t)n, sizeof *reqs);
  double *lp = malloc((size_t)V * sizeof *lp);
  r->kld = calloc((size_t)n, sizeof(double));
  r->dp = calloc((size_t)n, sizeof(double));
  r->margin = calloc((size_t)n, sizeof(double));
  r->top_err = calloc((size_t)n, sizeof(double));
  r->same = calloc((size_t)n, 1);
  vstatus st = reqs && lp && r->kld && r->dp && r->margin && r->top_err && r->same
                   ? V_OK : VERR("diverge: out of memory for %d served rows", n);
  /* row t * B + b: sequence b's inputs 0..t, one greedy token */
  for (int tt = 0; tt < T && !st; tt++)
    for (int b = 0; b < B; b++)
      reqs[tt * B + b] = (served_req){.prompt = stream + (size_t)b * (T + 1), .n_prompt = tt + 1, .max_tokens = 1,
                                      .keep_ids = true, .logprobs = logprobs};
  const double t0 = vclock_now();
  if (!st) st = served_run(&t->conn, t->model, reqs, n, concurrency, vinterrupted);
  r->wall_s = vclock_now() - t0;
  d->n_req = n;
  char first[400] = "";
  for (int i = 0; i < n && !st; i++) {
    const int tt = i / B, b = i % B;
    char buf[160];
    const char *why = row_problem(&reqs[i], V, buf, sizeof buf);
    if (why) {
      if (d->n_failed++ == 0) snprintf(first, sizeof first, "step %d, sequence %d): %.300s", tt, b, why);
      continue;
    }
    served_row(r, d, (size_t)i, ref_rows + (size_t)i * V, lp, V, &reqs[i], stream[(size_t)b * (T + 1) + tt + 1]);
  }
  if (!st && d->n_failed) {
    r->supported = false;
    r->errored = true;
    snprintf(r->reason, sizeof r->reason, "server %.100s: %d of %d requests failed (not retried), the first (%.300s",
             t->conn.shown, d->n_failed, n, first);
  }
  if (!st && r->supported) {
    r->rows = n;
    st = diverge_summarize(r);
  }
  for (int i = 0; reqs && i < n; i++) served_req_free(&reqs[i]);
  free(reqs);
  free(lp);
  return st;
}
