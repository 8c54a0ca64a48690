/* mrcr on a server (suites/evals/evals_suite.h mrcr_run_server): each query is its own completion of
 * one token whose prompt is the prompt and the queries before it (never their answers), scored as
 * the in-process run scores greedy next-token prediction (suites/evals/evals_served.c: shared parts). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/interrupt.h"
#include "suites/evals/evals_suite.h"

vstatus mrcr_run_server(const eval_server *sv, const construct_layout *L, const mrcr_opts *o, mrcr_result *r, int p) {
  eval_path_result *pr = &r->pr[p];
  const int nq = r->n_queries;
  const int n_prompts = o->n_bins * o->n_needles * o->samples;
  VTRY(eval_server_result(pr, nq));
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
    const char *why = eval_request_problem(q, buf, sizeof buf);
    if (why) {
      if (!q->error[0]) snprintf(q->error, sizeof q->error, "%s", why);
      const mrcr_query *mq = &r->q[idx];
      snprintf(what, sizeof what, "bin %d, %d needles, sample %d, query %d)", mq->bin, mq->needles, mq->sample,
               mq->needle);
      eval_request_failed(pr, q, what);
      pr->skipped[idx] = EVAL_FAILED;
      continue;
    }
    const int32_t ans = r->q[idx].answer;
    pr->correct[idx] = q->ids[0] == ans;
    pr->margin[idx] = eval_top_margin(q, 0, ans);
  }
  eval_failed_summary(pr, sv, n_sent);
  for (int i = 0; reqs && i < nq; i++) served_req_free(&reqs[i]);
  for (int i = 0; bufs && i < n_prompts; i++) free(bufs[i]);
  free(reqs);
  free(bufs);
  return st;
}
