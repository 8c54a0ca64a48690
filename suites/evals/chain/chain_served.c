/* The chain on a server (suites/evals/evals_suite.h chain_run_server): the emitted token is the next
 * input, which is what a server's own greedy generation does, so a chain is one completion of H
 * tokens (suites/evals/evals_served.c: shared parts). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/interrupt.h"
#include "suites/evals/evals_suite.h"

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
  VTRY(eval_server_result(pr, S * nh));
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
    const char *why = eval_request_problem(q, buf, sizeof buf);
    if (why) {
      if (!q->error[0]) snprintf(q->error, sizeof q->error, "%s", why);
      snprintf(what, sizeof what, "chain %d)", i);
      eval_request_failed(pr, q, what);
      for (int hi = 0; hi < fit; hi++) pr->skipped[(size_t)i * nh + hi] = EVAL_FAILED;
      r->first_wrong[p][i] = -1;
      continue;
    }
    /* as suites/evals/chain/chain.c: the margin of every hop count ahead while on the chain, the first hop off it */
    bool on = true;
    for (int h = 1, hi = 0; h <= Hs; h++) {
      const int32_t want = truth[(size_t)i * (H + 1) + h], got = q->ids[h - 1];
      if (on) {
        const float mg = eval_top_margin(q, h - 1, want);
        for (int k = hi; k < fit; k++) {
          float *m = &pr->margin[(size_t)i * nh + k];
          if (!isnan(*m) && !(mg >= *m)) *m = mg; /* an unknown margin keeps the minimum unknown */
        }
        if (got != want) on = false, r->first_wrong[p][i] = h;
      }
      if (h == o->hops[hi]) pr->correct[(size_t)i * nh + hi++] = got == want;
    }
  }
  eval_failed_summary(pr, sv, S);
  for (int i = 0; reqs && i < S; i++) served_req_free(&reqs[i]);
  free(reqs);
  free(prompt);
  free(truth);
  free(smp);
  return st;
}
