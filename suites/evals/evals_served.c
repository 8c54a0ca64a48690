/* A server as one more path of the evals (suites/evals/evals_suite.h): the constructed prompts sent to an
 * OpenAI-compatible /v1/completions through the served client (suites/served/served.h), the returned
 * token ids scored as suites/eval_*.c score an in-process path's logits.
 *
 * Equal to the in-process scoring under greedy decoding: mrcr asks query q of a prompt after the
 * queries before it (never their answers), so each query is its own completion of one token whose
 * prompt is the prompt and queries 0..q (N prefills per prompt where in-process runs one; a server
 * with a prefix cache shares them). In the chain the emitted token is the next input, which is what
 * a server's own greedy generation does, so a chain is one completion of H tokens. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/interrupt.h"
#include "suites/evals/evals_suite.h"

vstatus eval_paths_open(eval_paths *ep, const eval_opts *e, const vsuite_ctx *x) {
  memset(ep, 0, sizeof *ep);
  ep->server = -1;
  /* with --server alone the driver's default --paths are not run: the server is scored against the truth */
  const int n_in = e->server && !x->paths_given ? 0 : x->n_paths;
  ep->names = calloc((size_t)n_in + 1, sizeof *ep->names);
  if (!ep->names) return VERR("out of memory");
  for (int i = 0; i < n_in; i++) ep->names[i] = x->paths[i];
  ep->n = n_in;
  if (!e->server) return V_OK;
  eval_server *sv = &ep->sv;
  VTRY(served_target_open(sv, e->server, e->server_model, 600, x->layout->vocab, x->model));
  ep->server = ep->n;
  ep->names[ep->n++] = sv->path;
  return V_OK;
}

void eval_paths_free(eval_paths *ep) {
  free(ep->names);
  ep->names = NULL;
  ep->n = 0;
}

void eval_server_params(const eval_paths *ep, int p, cJSON *params) {
  if (p != ep->server) return;
  cJSON_AddStringToObject(params, "server", ep->sv.conn.shown);
  cJSON_AddStringToObject(params, "server_model", ep->sv.model);
}

void eval_server_warn(const char *name, const eval_path_result *pr) {
  if (pr->n_failed) fprintf(stderr, "vouch %s: error: %s\n", name, pr->reason);
}

/* Counts a failed request of pr; the first failure's message is kept, with what the request was. */
static void request_failed(eval_path_result *pr, const served_req *q, const char *what) {
  if (pr->n_failed++ == 0) snprintf(pr->reason, sizeof pr->reason, "%.100s: %.320s", what, q->error);
}

/* The reason a finished request cannot be scored, or NULL: it failed, or it holds fewer tokens than
 * asked (ignore_eos was sent, so a server that stops early did not do what was asked). */
static const char *request_problem(served_req *q, char *buf, size_t cap) {
  if (!q->ok) return q->t_send == 0 ? "not sent (interrupted)" : q->error;
  if (q->n_tokens < q->max_tokens) {
    snprintf(buf, cap, "the server returned %d of the %d tokens asked (with ignore_eos)", q->n_tokens, q->max_tokens);
    return buf;
  }
  return NULL;
}

/* logprob(want) - the best other logprob at position pos of q: the logit margin. NaN when q's
 * logprobs do not hold both (none given, or want not among the top ones). */
static float top_margin(const served_req *q, int pos, int32_t want) {
  if (!q->top || pos >= q->n_tokens) return NAN;
  const served_top *t = &q->top[pos];
  int k = 0;
  while (k < t->n && t->id[k] != want) k++;
  const int other = k == 0 ? 1 : 0;
  return k < t->n && other < t->n ? t->lp[k] - t->lp[other] : NAN;
}

/* Allocates pr's per-query marks; margins from logprobs may be unknown. */
static vstatus server_result(eval_path_result *pr, int n) {
  pr->skipped = calloc((size_t)(n > 0 ? n : 1), 1);
  pr->margin_unknown = true;
  pr->n_failed = 0;
  return pr->skipped ? V_OK : VERR("out of memory");
}

/* Puts the server and the count in front of the first failure's message. */
static void failed_summary(eval_path_result *pr, const eval_server *sv, int n_req) {
  if (!pr->n_failed) return;
  char first[sizeof pr->reason];
  snprintf(first, sizeof first, "%s", pr->reason);
  snprintf(pr->reason, sizeof pr->reason, "server %.120s: %d of %d requests failed (not retried), the first (%.280s",
           sv->conn.shown, pr->n_failed, n_req, first);
}

vstatus mrcr_run_server(const eval_server *sv, const construct_layout *L, const mrcr_opts *o, mrcr_result *r, int p) {
  eval_path_result *pr = &r->pr[p];
  const int nq = r->n_queries;
  const int n_prompts = o->n_bins * o->n_needles * o->samples;
  VTRY(server_result(pr, nq));
  served_req *reqs = calloc((size_t)nq, sizeof *reqs);
  int32_t **bufs = calloc((size_t)n_prompts, sizeof *bufs); /* per prompt: its tokens, then its queries */
  vstatus st = reqs && bufs ? V_OK : VERR("out of memory for %d requests", nq);
  int qi = 0, pi = 0;
  for (int bi = 0; bi < o->n_bins && !st; bi++)
    for (int ni = 0; ni < o->n_needles && !st; ni++) {
      const int bin = (int)o->bins[bi], N = (int)o->needles[ni], plen = bin - N;
      /* the last query's prompt is bin tokens, and one token is generated after it */
      const bool fits = !sv->max_len || bin + 1 <= sv->max_len;
      if (!fits)
        snprintf(pr->limit_reason, sizeof pr->limit_reason,
                 "a context of %d tokens or more and its answer exceed the server's max_model_len", sv->max_len);
      for (int sm = 0; sm < o->samples && !st; sm++, pi++) {
        int32_t q[128], an[128];
        double dp[128];
        bufs[pi] = malloc((size_t)bin * sizeof **bufs);
        st = bufs[pi] ? mrcr_prompt(L, bin, N, sm, o->seed, bufs[pi], q, an, dp) : VERR("out of memory");
        if (st) break;
        memcpy(bufs[pi] + plen, q, (size_t)N * sizeof *q);
        for (int k = 0; k < N; k++) {
          const int idx = qi + sm * N + k;
          r->q[idx] = (mrcr_query){bin, N, sm, k, dp[k], q[k], an[k]};
          reqs[idx] = (served_req){.prompt = bufs[pi], .n_prompt = plen + k + 1, .max_tokens = 1, .keep_ids = true,
                                   .logprobs = SERVED_TOP, .skip = !fits};
          pr->skipped[idx] = fits ? EVAL_RAN : EVAL_PAST_LIMIT;
          pr->margin[idx] = NAN;
        }
      }
      qi += o->samples * N;
    }
  const double t0 = vclock_now();
  if (!st) st = served_run(&sv->conn, sv->model, reqs, nq, o->batch, vinterrupted);
  pr->wall_s = vclock_now() - t0;
  int n_sent = 0;
  for (int idx = 0; idx < nq && !st; idx++) {
    served_req *q = &reqs[idx];
    if (q->skip) continue;
    n_sent++;
    char buf[96], what[96];
    const char *why = request_problem(q, buf, sizeof buf);
    if (why) {
      if (!q->error[0]) snprintf(q->error, sizeof q->error, "%s", why);
      const mrcr_query *mq = &r->q[idx];
      snprintf(what, sizeof what, "bin %d, %d needles, sample %d, query %d)", mq->bin, mq->needles, mq->sample,
               mq->needle);
      request_failed(pr, q, what);
      pr->skipped[idx] = EVAL_FAILED;
      continue;
    }
    const int32_t ans = r->q[idx].answer;
    pr->correct[idx] = q->ids[0] == ans;
    pr->margin[idx] = top_margin(q, 0, ans);
  }
  failed_summary(pr, sv, n_sent);
  for (int i = 0; reqs && i < nq; i++) served_req_free(&reqs[i]);
  for (int i = 0; bufs && i < n_prompts; i++) free(bufs[i]);
  free(reqs);
  free(bufs);
  return st;
}

vstatus chain_run_server(const eval_server *sv, const construct_layout *L, const chain_opts *o, chain_result *r, int p) {
  eval_path_result *pr = &r->pr[p];
  const int S = o->samples, nh = o->n_hops, plen = L->o.n_keys + 2, H = (int)o->hops[nh - 1];
  /* the hop counts that fit the server's context: the rest are not supported */
  const int room = sv->max_len ? sv->max_len - plen : H;
  int fit = 0;
  while (fit < nh && o->hops[fit] <= room) fit++;
  const int Hs = fit ? (int)o->hops[fit - 1] : 0; /* tokens asked per chain */
  if (fit < nh)
    snprintf(pr->limit_reason, sizeof pr->limit_reason,
             "a %d-token prompt and more than %d hops exceed the server's max_model_len %d", plen, room, sv->max_len);
  VTRY(server_result(pr, S * nh));
  served_req *reqs = calloc((size_t)S, sizeof *reqs);
  int32_t *prompt = malloc((size_t)S * plen * sizeof *prompt), *truth = malloc((size_t)S * (H + 1) * sizeof *truth);
  vsampling *smp = calloc((size_t)S, sizeof *smp);
  vstatus st = reqs && prompt && truth && smp ? V_OK : VERR("out of memory for %d chains", S);
  const bool sampled = o->sampling.temperature > 0;
  for (int i = 0; i < S && !st; i++) {
    st = chain_prompt(L, i, o->seed, H, prompt + (size_t)i * plen, truth + (size_t)i * (H + 1));
    smp[i] = o->sampling;
    smp[i].seed = o->sampling.seed + (uint64_t)i;
    reqs[i] = (served_req){.prompt = prompt + (size_t)i * plen, .n_prompt = plen, .max_tokens = Hs, .keep_ids = true,
                           .logprobs = SERVED_TOP, .sampling = sampled ? &smp[i] : NULL, .skip = Hs == 0};
    r->first_wrong[p][i] = 0;
    for (int hi = 0; hi < nh; hi++) {
      pr->skipped[(size_t)i * nh + hi] = hi < fit ? EVAL_RAN : EVAL_PAST_LIMIT;
      pr->margin[(size_t)i * nh + hi] = hi < fit ? INFINITY : NAN;
    }
  }
  const double t0 = vclock_now();
  if (!st && Hs > 0) st = served_run(&sv->conn, sv->model, reqs, S, o->batch, vinterrupted);
  pr->wall_s = vclock_now() - t0;
  for (int i = 0; i < S && !st && Hs > 0; i++) {
    served_req *q = &reqs[i];
    char buf[96], what[32];
    const char *why = request_problem(q, buf, sizeof buf);
    if (why) {
      if (!q->error[0]) snprintf(q->error, sizeof q->error, "%s", why);
      snprintf(what, sizeof what, "chain %d)", i);
      request_failed(pr, q, what);
      for (int hi = 0; hi < fit; hi++) pr->skipped[(size_t)i * nh + hi] = EVAL_FAILED;
      r->first_wrong[p][i] = -1;
      continue;
    }
    /* as suites/evals/chain/chain.c: the margin of every hop count ahead while on the chain, the first hop off it */
    bool on = true;
    for (int h = 1, hi = 0; h <= Hs; h++) {
      const int32_t want = truth[(size_t)i * (H + 1) + h], got = q->ids[h - 1];
      if (on) {
        const float mg = top_margin(q, h - 1, want);
        for (int k = hi; k < fit; k++) {
          float *m = &pr->margin[(size_t)i * nh + k];
          if (!isnan(*m) && !(mg >= *m)) *m = mg; /* an unknown margin keeps the minimum unknown */
        }
        if (got != want) on = false, r->first_wrong[p][i] = h;
      }
      if (h == o->hops[hi]) pr->correct[(size_t)i * nh + hi++] = got == want;
    }
  }
  failed_summary(pr, sv, S);
  for (int i = 0; reqs && i < S; i++) served_req_free(&reqs[i]);
  free(reqs);
  free(prompt);
  free(truth);
  free(smp);
  return st;
}
