/* The chain eval (see evals.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/philox.h"
#include "suites/evals/evals.h"
#include "suites/paths/paths.h"

vstatus chain_prompt(const construct_layout *L, int sample, uint64_t seed, int max_hop, int32_t *tokens,
                     int32_t *truth) {
  const int NK = L->o.n_keys;
  char name[48];
  snprintf(name, sizeof name, "chain.%d", sample);
  uint64_t key = philox_key(seed, name), ctr = 0;
  int cyc[256], next[256], order[256];
  for (int i = 0; i < NK; i++) cyc[i] = order[i] = i;
  for (int i = NK - 1; i > 0; i--) { int j = philox_below(key, &ctr, i + 1), t = cyc[i]; cyc[i] = cyc[j]; cyc[j] = t; }
  for (int i = 0; i < NK; i++) next[cyc[i]] = cyc[(i + 1) % NK]; /* one cycle through every key */
  for (int i = NK - 1; i > 0; i--) { int j = philox_below(key, &ctr, i + 1), t = order[i]; order[i] = order[j]; order[j] = t; }
  tokens[0] = L->bos;
  for (int i = 0; i < NK; i++) tokens[1 + i] = construct_pair(L, order[i], next[order[i]]);
  int k = philox_below(key, &ctr, NK);
  tokens[NK + 1] = construct_query(L, k);
  for (int h = 0; h <= max_hop; h++) {
    truth[h] = construct_query(L, k);
    k = next[k];
  }
  return V_OK;
}

void chain_result_free(chain_result *r) {
  for (int p = 0; p < r->n_paths && r->pr; p++) {
    free(r->pr[p].correct);
    free(r->pr[p].margin);
    free(r->pr[p].skipped);
    vtrace_free(&r->pr[p].ran);
    if (r->first_wrong) free(r->first_wrong[p]);
  }
  free(r->pr);
  free(r->first_wrong);
  memset(r, 0, sizeof *r);
}

static vstatus run_path(vpath *p, const construct_layout *L, const chain_opts *o, chain_result *r, int pi) {
  const int V = L->vocab, B = o->batch, NK = L->o.n_keys, plen = NK + 2;
  const int H = (int)o->hops[o->n_hops - 1];
  eval_path_result *pr = &r->pr[pi];
  int32_t *prompt = malloc((size_t)B * plen * sizeof *prompt), *truth = malloc((size_t)B * (H + 1) * sizeof *truth);
  int32_t *tok = malloc((size_t)B * plen * sizeof *tok);
  float *lg = malloc((size_t)B * V * sizeof *lg);
  void *work = malloc((size_t)V * 16 + 64);
  int *seq = malloc((size_t)B * sizeof *seq), *nt = malloc((size_t)B * sizeof *nt), *sp = malloc((size_t)B * sizeof *sp);
  int *on = malloc((size_t)B * sizeof *on);
  vstatus st = V_OK;
  if (!prompt || !truth || !tok || !lg || !work || !seq || !nt || !sp || !on) {
    st = VERR("chain: out of memory");
    goto out;
  }
  for (int s0 = 0; s0 < o->samples; s0 += B) {
    int nb = o->samples - s0 < B ? o->samples - s0 : B;
    for (int b = 0; b < nb; b++) {
      st = chain_prompt(L, s0 + b, o->seed, H, prompt + (size_t)b * plen, truth + (size_t)b * (H + 1));
      if (st == V_OK && p->ops->reset) st = p->ops->reset(p->state, b);
      if (st != V_OK) goto out;
      seq[b] = b;
      nt[b] = plen;
      sp[b] = 0;
      on[b] = 1;
      r->first_wrong[pi][s0 + b] = 0;
      for (int hi = 0; hi < o->n_hops; hi++) r->pr[pi].margin[(size_t)(s0 + b) * o->n_hops + hi] = INFINITY;
    }
    memcpy(tok, prompt, (size_t)nb * plen * sizeof *tok);
    int hi = 0;
    for (int h = 1; h <= H; h++) {
      vstep s = {.n_seq = nb, .seq = seq, .n_tokens = nt, .start_pos = sp, .tokens = tok};
      vstatus ss = p->ops->supports ? p->ops->supports(p->state, &s) : V_OK;
      double t0 = vclock_now();
      if (ss == V_OK) ss = p->ops->forward(p->state, &s, lg);
      pr->wall_s += vclock_now() - t0;
      if (ss != V_OK) { st = ss; goto out; }
      for (int b = 0; b < nb; b++) {
        const float *l = lg + (size_t)b * V;
        const int sample = s0 + b;
        int32_t want = truth[(size_t)b * (H + 1) + h];
        int got = vsample(l, V, &o->sampling, sample, h, work);
        if (on[b]) {
          float best = -INFINITY;
          for (int v = 0; v < V; v++)
            if (v != want && l[v] > best) best = l[v];
          float mg = l[want] - best;
          /* the margin of every hop count still ahead of this hop */
          for (int k = hi; k < o->n_hops; k++) {
            float *m = &pr->margin[(size_t)sample * o->n_hops + k];
            if (!(mg >= *m)) *m = mg;
          }
          if (got != want) {
            on[b] = 0;
            r->first_wrong[pi][sample] = h;
          }
        }
        if (h == o->hops[hi]) pr->correct[(size_t)sample * o->n_hops + hi] = got == want;
        sp[b] += nt[b];
        nt[b] = 1;
        tok[b] = got;
      }
      if (h == o->hops[hi]) hi++;
    }
  }
out:
  free(prompt);
  free(truth);
  free(tok);
  free(lg);
  free(work);
  free(seq);
  free(nt);
  free(sp);
  free(on);
  return st;
}

vstatus chain_begin(const ds_model *m, const construct_layout *L, const chain_opts *o, chain_result *r) {
  memset(r, 0, sizeof *r);
  if (o->n_paths < 1 || o->n_hops < 1) return VERR("chain: options 'paths' and 'hops' need at least one value each");
  if (o->samples < 1 || o->batch < 1) return VERR("chain: options 'samples' and 'batch' must be >= 1");
  for (int i = 0; i < o->n_hops; i++)
    if (o->hops[i] < 1 || (i > 0 && o->hops[i] <= o->hops[i - 1]))
      return VERR("chain: option 'hops': values must be >= 1 and ascending");
  if (L->vocab != m->cfg.vocab_size) return VERR("chain: model vocab %d does not match the layout's %d", m->cfg.vocab_size, L->vocab);
  const long H = o->hops[o->n_hops - 1];
  if (L->o.n_keys + 2 + H > m->cfg.max_position_embeddings)
    return VERR("chain: option 'hops': prompt %d + %ld hops exceeds max_position_embeddings %d", L->o.n_keys + 2, H,
                m->cfg.max_position_embeddings);
  r->samples = o->samples;
  r->n_hops = o->n_hops;
  r->n_paths = o->n_paths;
  r->pr = calloc((size_t)o->n_paths, sizeof *r->pr);
  r->first_wrong = calloc((size_t)o->n_paths, sizeof *r->first_wrong);
  if (!r->pr || !r->first_wrong) { chain_result_free(r); return VERR("chain: out of memory"); }
  for (int p = 0; p < o->n_paths; p++) {
    eval_path_result *pr = &r->pr[p];
    snprintf(pr->path, sizeof pr->path, "%s", o->paths[p].name);
    pr->supported = true;
    pr->correct = calloc((size_t)o->samples * o->n_hops, 1);
    pr->margin = calloc((size_t)o->samples * o->n_hops, sizeof(float));
    r->first_wrong[p] = calloc((size_t)o->samples, sizeof(int));
    if (!pr->correct || !pr->margin || !r->first_wrong[p]) { chain_result_free(r); return VERR("chain: out of memory"); }
  }
  return V_OK;
}

/* run_path's arguments, for eval_on_path. */
typedef struct {
  const construct_layout *L;
  const chain_opts *o;
  chain_result *r;
  int p;
} chain_on_path;
static vstatus chain_path_body(vpath *path, void *ctx) {
  chain_on_path *a = ctx;
  return run_path(path, a->L, a->o, a->r, a->p);
}

vstatus chain_run_path(const ds_model *m, const construct_layout *L, const chain_opts *o, chain_result *r, int p) {
  vpath_opts po = {.max_seq = o->batch, .max_ctx = L->o.n_keys + 2 + (int)o->hops[o->n_hops - 1], .n_threads = o->n_threads,
                   .expect_fallback = o->expect_fallback};
  chain_on_path a = {L, o, r, p};
  return eval_on_path("chain", &o->paths[p], m, &po, p, &r->pr[p], chain_path_body, &a);
}

vstatus chain_run(const ds_model *m, const construct_layout *L, const chain_opts *o, chain_result *r) {
  VTRY(chain_begin(m, L, o, r));
  for (int p = 0; p < o->n_paths; p++) {
    vstatus s = chain_run_path(m, L, o, r, p);
    if (s != V_OK) { chain_result_free(r); return s; }
  }
  return V_OK;
}
