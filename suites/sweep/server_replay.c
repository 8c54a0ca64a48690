/* Multi-turn session replay (suites/sweep/server_replay.h). */
#include "suites/sweep/server_replay.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool has_next(const replay_ctx *c, int i) { return i + 1 < c->n && c->tr[i + 1].session == c->tr[i].session; }

vstatus replay_init(replay_ctx *c, const trace_line *tr, int32_t *const *fresh, int n, int vocab, double speed,
                    served_req *reqs) {
  assert(n >= 1 && speed > 0 && vocab >= 1);
  *c = (replay_ctx){.tr = tr, .fresh = fresh, .n = n, .vocab = vocab, .speed = speed};
  c->composed = calloc((size_t)n, sizeof *c->composed);
  if (!c->composed) return VERR("out of memory for %d turns", n);
  double t_min = INFINITY;
  for (int i = 0; i < n; i++)
    if (tr[i].turn == 0) t_min = fmin(t_min, tr[i].t_ms);
  for (int i = 0; i < n; i++) {
    served_req *q = &reqs[i];
    q->max_tokens = tr[i].out;
    q->keep_ids = has_next(c, i);
    if (tr[i].turn == 0) {
      q->prompt = fresh[i], q->n_prompt = tr[i].in;
      q->arrival_s = (tr[i].t_ms - t_min) / 1e3 / speed;
    } else {
      q->held = true; /* replay_done gives it its prompt and arrival */
    }
  }
  return V_OK;
}

/* Marks the turns after i in its session as not sent, naming why. */
static void skip_rest(replay_ctx *c, served_req *reqs, int i, const char *why) {
  for (int k = i + 1; k < c->n && c->tr[k].session == c->tr[i].session; k++) {
    served_req *q = &reqs[k];
    q->held = false, q->skip = true, q->ok = false;
    q->t_send = q->t_end = reqs[i].t_end; /* counted among the failed requests */
    snprintf(q->error, sizeof q->error, "not sent: turn %d of session %d %s", c->tr[i].turn + 1, c->tr[i].session, why);
  }
}

void replay_done(void *ctx, served_req *reqs, int i, double t0) {
  replay_ctx *c = ctx;
  assert(i >= 0 && i < c->n);
  if (!has_next(c, i)) return;
  const served_req *r = &reqs[i];
  if (!r->ok) { skip_rest(c, reqs, i, "failed"); return; }
  for (int k = 0; k < r->n_tokens; k++)
    if (!r->ids || r->ids[k] < 0 || r->ids[k] >= c->vocab) {
      skip_rest(c, reqs, i, "returned a token id outside the vocabulary");
      return;
    }
  const int in = c->tr[i + 1].in;
  const long n = (long)r->n_prompt + r->n_tokens + in;
  int32_t *p = n < (1L << 28) ? malloc((size_t)n * sizeof *p) : NULL;
  if (!p) { skip_rest(c, reqs, i, "left no memory for the next prompt"); return; }
  memcpy(p, r->prompt, (size_t)r->n_prompt * sizeof *p);
  memcpy(p + r->n_prompt, r->ids, (size_t)r->n_tokens * sizeof *p);
  memcpy(p + r->n_prompt + r->n_tokens, c->fresh[i + 1], (size_t)in * sizeof *p);
  free(c->composed[i + 1]);
  c->composed[i + 1] = p;
  served_req *q = &reqs[i + 1];
  q->prompt = p, q->n_prompt = (int)n;
  q->arrival_s = (r->t_end - t0) + c->tr[i + 1].pause_ms / 1e3 / c->speed;
  q->held = false;
}

void replay_free(replay_ctx *c) {
  if (c->composed)
    for (int i = 0; i < c->n; i++) free(c->composed[i]);
  free(c->composed);
  c->composed = NULL;
}

#define MAX_TURN_METRICS 16

vstatus replay_metrics(vrecord *r, const replay_ctx *c, const served_req *reqs) {
  const int n = c->n;
  double *ttft = malloc((size_t)n * sizeof *ttft), *tpot = malloc((size_t)n * sizeof *tpot);
  double *sess = malloc((size_t)n * sizeof *sess);
  if (!ttft || !tpot || !sess) { free(ttft); free(tpot); free(sess); return VERR("out of memory"); }
  vstatus s = V_OK;
  int max_turn = 0;
  for (int i = 0; i < n; i++) max_turn = c->tr[i].turn + 1 > max_turn ? c->tr[i].turn + 1 : max_turn;
  if (max_turn > MAX_TURN_METRICS) max_turn = MAX_TURN_METRICS;
  for (int k = 0; k < max_turn && s == V_OK; k++) {
    int na = 0, nb = 0;
    double prompt = 0;
    for (int i = 0; i < n; i++) {
      const served_req *q = &reqs[i];
      if (c->tr[i].turn != k || !q->ok) continue;
      ttft[na++] = (q->t_first - q->t_send) * 1e3;
      prompt += q->n_prompt;
      if (q->n_tokens > 1) tpot[nb++] = (q->t_end - q->t_first) * 1e3 / (q->n_tokens - 1);
    }
    char nm[48];
    snprintf(nm, sizeof nm, "turn%d_ttft_ms", k + 1);
    if (na) s = rec_metric_samples(r, nm, "ms", RD_MEDIAN, RB_LOWER, ttft, na, 0);
    snprintf(nm, sizeof nm, "turn%d_tpot_ms", k + 1);
    if (nb && s == V_OK) s = rec_metric_samples(r, nm, "ms", RD_MEDIAN, RB_LOWER, tpot, nb, 0);
    snprintf(nm, sizeof nm, "turn%d_prompt_tokens", k + 1);
    if (na && s == V_OK) s = rec_metric_value(r, nm, "tok", RB_NONE, prompt / na);
  }
  /* sessions: first send to the last token of the last turn, for sessions whose every turn succeeded */
  int ns = 0, n_sess = 0;
  for (int i = 0; i < n;) {
    int j = i;
    bool ok = true;
    while (j < n && c->tr[j].session == c->tr[i].session) ok &= reqs[j].ok, j++;
    n_sess++;
    if (ok) sess[ns++] = (reqs[j - 1].t_end - reqs[i].t_send) * 1e3;
    i = j;
  }
  if (ns && s == V_OK) s = rec_metric_samples(r, "session_ms", "ms", RD_MEDIAN, RB_LOWER, sess, ns, 0);
  if (ns && s == V_OK) s = rec_metric_samples(r, "session_ms_p90", "ms", RD_P90, RB_LOWER, sess, ns, 0);
  if (s == V_OK) s = rec_metric_value(r, "sessions", "", RB_NONE, n_sess);
  if (s == V_OK) s = rec_metric_value(r, "sessions_ok", "", RB_HIGHER, ns);
  free(ttft);
  free(tpot);
  free(sess);
  return s;
}
