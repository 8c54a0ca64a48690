/* A server as one more path of the evals (suites/evals/evals_suite.h): the constructed prompts sent to an
 * OpenAI-compatible /v1/completions through the served client (suites/served/served.h), the returned
 * token ids scored as an in-process path's logits are. This file holds what both evals share; each
 * eval's requests are its own folder's (mrcr/mrcr_served.c, chain/chain_served.c).
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
#include "suites/served/served_pair.h"

vstatus eval_paths_open(eval_paths *ep, const eval_opts *e, const vsuite_ctx *x) {
  memset(ep, 0, sizeof *ep);
  ep->server = -1;
  /* with --server alone the driver's default --paths are not run: the server is scored against the truth */
  const int n_in = e->server && !x->paths_given ? 0 : x->n_paths;
  ep->paths = calloc((size_t)n_in + 1, sizeof *ep->paths);
  if (!ep->paths) return VERR("out of memory");
  for (int i = 0; i < n_in; i++) ep->paths[i] = x->paths[i];
  ep->n = n_in;
  if (!e->server) return V_OK;
  eval_server *sv = &ep->sv;
  VTRY(served_target_open(sv, e->server, e->server_model, 600, x->layout->vocab, x->model));
  VTRY(served_conn_note(x->sink, &sv->conn, sv->model, "server")); /* its identity in the manifest */
  ep->server = ep->n;
  /* the server's spec is its name only (no ops: not opened), cut where the results' path field cuts it */
  vpath_spec *sp = &ep->paths[ep->n++];
  const size_t len = strlen(sv->path) < sizeof sp->name ? strlen(sv->path) : sizeof sp->name - 1;
  memcpy(sp->name, sv->path, len); /* calloc'ed: NUL-terminated */
  return V_OK;
}

void eval_paths_free(eval_paths *ep) {
  free(ep->paths);
  ep->paths = NULL;
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
void eval_request_failed(eval_path_result *pr, const served_req *q, const char *what) {
  if (pr->n_failed++ == 0) snprintf(pr->reason, sizeof pr->reason, "%.100s: %.320s", what, q->error);
}

/* The reason a finished request cannot be scored, or NULL: it failed, or it holds fewer tokens than
 * asked (ignore_eos was sent, so a server that stops early did not do what was asked). */
const char *eval_request_problem(served_req *q, char *buf, size_t cap) {
  if (!q->ok) return q->t_send == 0 ? "not sent (interrupted)" : q->error;
  if (q->n_tokens < q->max_tokens) {
    snprintf(buf, cap, "the server returned %d of the %d tokens asked (with ignore_eos)", q->n_tokens, q->max_tokens);
    return buf;
  }
  return NULL;
}

/* logprob(want) - the best other logprob at position pos of q: the logit margin. NaN when q's
 * logprobs do not hold both (none given, or want not among the top ones). */
float eval_top_margin(const served_req *q, int pos, int32_t want) {
  if (!q->top || pos >= q->n_tokens) return NAN;
  const served_top *t = &q->top[pos];
  int k = 0;
  while (k < t->n && t->id[k] != want) k++;
  const int other = k == 0 ? 1 : 0;
  return k < t->n && other < t->n ? t->lp[k] - t->lp[other] : NAN;
}

/* Allocates pr's per-query marks; margins from logprobs may be unknown. */
vstatus eval_server_result(eval_path_result *pr, int n) {
  pr->skipped = calloc((size_t)(n > 0 ? n : 1), 1);
  pr->margin_unknown = true;
  pr->n_failed = 0;
  return pr->skipped ? V_OK : VERR("out of memory");
}

/* Puts the server and the count in front of the first failure's message. */
void eval_failed_summary(eval_path_result *pr, const eval_server *sv, int n_req) {
  if (!pr->n_failed) return;
  char first[sizeof pr->reason];
  snprintf(first, sizeof first, "%s", pr->reason);
  snprintf(pr->reason, sizeof pr->reason, "server %.120s: %d of %d requests failed (not retried), the first (%.280s",
           sv->conn.shown, pr->n_failed, n_req, first);
}
