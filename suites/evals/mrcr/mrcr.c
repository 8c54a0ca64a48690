/* The mrcr eval (see evals.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/philox.h"
#include "suites/evals/evals.h"
#include "suites/paths/paths.h"

vstatus mrcr_prompt(const construct_layout *L, int bin, int needles, int sample, uint64_t seed, int32_t *tokens,
                    int32_t *queries, int32_t *answers, double *depths) {
  const int NK = L->o.n_keys, FAM = L->o.family;
  if (needles < 1 || needles > FAM)
    return VERR("mrcr: option 'needles' %d outside [1, %d] (the model's near-duplicate family size)", needles, FAM);
  if (bin < 3 * needles + 2) return VERR("mrcr: option 'bins': context %d too short for %d needles", bin, needles);
  bin -= needles; /* the queries take the last `needles` positions of the context */
  char name[64];
  snprintf(name, sizeof name, "mrcr.%d.%d.%d", bin, needles, sample);
  uint64_t key = philox_key(seed, name), ctr = 0;
  tokens[0] = L->bos;
  for (int i = 1; i < bin; i++) tokens[i] = L->filler0 + philox_below(key, &ctr, L->n_filler);
  int fam = philox_below(key, &ctr, NK / FAM);
  int members[128], vals[128], pos[128];
  for (int i = 0; i < FAM; i++) members[i] = fam * FAM + i;
  for (int i = FAM - 1; i > 0; i--) { int j = philox_below(key, &ctr, i + 1), t = members[i]; members[i] = members[j]; members[j] = t; }
  int pool[256];
  for (int i = 0; i < NK; i++) pool[i] = i;
  for (int i = NK - 1; i > 0; i--) { int j = philox_below(key, &ctr, i + 1), t = pool[i]; pool[i] = pool[j]; pool[j] = t; }
  for (int i = 0; i < needles; i++) {
    vals[i] = pool[i];
    double u = 0.15 + 0.7 * philox_unit(key, ctr++);
    int p = 1 + (int)((bin - 1) * (i + u) / needles);
    if (p >= bin) p = bin - 1;
    if (i > 0 && p <= pos[i - 1]) p = pos[i - 1] + 1;
    pos[i] = p;
    tokens[p] = construct_pair(L, members[i], vals[i]);
  }
  /* ask in random order */
  int order[128];
  for (int i = 0; i < needles; i++) order[i] = i;
  for (int i = needles - 1; i > 0; i--) { int j = philox_below(key, &ctr, i + 1), t = order[i]; order[i] = order[j]; order[j] = t; }
  for (int q = 0; q < needles; q++) {
    int i = order[q];
    queries[q] = construct_query(L, members[i]);
    answers[q] = construct_query(L, vals[i]);
    depths[q] = (double)pos[i] / bin;
  }
  return V_OK;
}

void mrcr_result_free(mrcr_result *r) {
  for (int p = 0; p < r->n_paths && r->pr; p++) {
    free(r->pr[p].correct);
    free(r->pr[p].margin);
    free(r->pr[p].skipped);
    vtrace_free(&r->pr[p].ran);
  }
  free(r->pr);
  free(r->q);
  memset(r, 0, sizeof *r);
}

/* Runs every prompt on one open path. */
static vstatus run_path(vpath *p, const construct_layout *L, const mrcr_opts *o, mrcr_result *r, eval_path_result *pr) {
  const int V = L->vocab, B = o->batch;
  long maxbin = 0, maxn = 0;
  for (int i = 0; i < o->n_bins; i++) if (o->bins[i] > maxbin) maxbin = o->bins[i];
  for (int i = 0; i < o->n_needles; i++) if (o->needles[i] > maxn) maxn = o->needles[i];
  int32_t *prompts = malloc((size_t)B * maxbin * sizeof *prompts);
  int32_t *qs = malloc((size_t)B * maxn * sizeof *qs), *as = malloc((size_t)B * maxn * sizeof *as);
  double *ds = malloc((size_t)B * maxn * sizeof *ds);
  int32_t *step_tok = malloc((size_t)B * (o->chunk > 1 ? o->chunk : 1) * sizeof *step_tok);
  float *lg = malloc((size_t)B * V * sizeof *lg);
  int *seq = malloc((size_t)B * sizeof *seq), *nt = malloc((size_t)B * sizeof *nt), *sp = malloc((size_t)B * sizeof *sp);
  vstatus st = V_OK;
  if (!prompts || !qs || !as || !ds || !step_tok || !lg || !seq || !nt || !sp) {
    st = VERR("mrcr: out of memory for %d prompts of %ld tokens", B, maxbin);
    goto out;
  }
  int qi = 0;
  for (int bi = 0; bi < o->n_bins; bi++)
    for (int ni = 0; ni < o->n_needles; ni++) {
      const int bin = (int)o->bins[bi], N = (int)o->needles[ni];
      for (int s0 = 0; s0 < o->samples; s0 += B) {
        int nb = o->samples - s0 < B ? o->samples - s0 : B;
        for (int b = 0; b < nb; b++) {
          st = mrcr_prompt(L, bin, N, s0 + b, o->seed, prompts + (size_t)b * bin, qs + (size_t)b * N,
                           as + (size_t)b * N, ds + (size_t)b * N);
          seq[b] = b;
          if (st == V_OK && p->ops->reset) st = p->ops->reset(p->state, b);
          if (st != V_OK) goto out;
        }
        const int plen = bin - N;
        for (int pos0 = 0; pos0 < plen; pos0 += o->chunk) {
          int n = plen - pos0 < o->chunk ? plen - pos0 : o->chunk;
          for (int b = 0; b < nb; b++) {
            nt[b] = n;
            sp[b] = pos0;
            memcpy(step_tok + (size_t)b * n, prompts + (size_t)b * bin + pos0, (size_t)n * sizeof *step_tok);
          }
          vstep s = {.n_seq = nb, .seq = seq, .n_tokens = nt, .start_pos = sp, .tokens = step_tok};
          vstatus ss = p->ops->supports ? p->ops->supports(p->state, &s) : V_OK;
          double t0 = vclock_now();
          if (ss == V_OK) ss = p->ops->forward(p->state, &s, lg);
          pr->wall_s += vclock_now() - t0;
          if (ss != V_OK) { st = ss; goto out; }
        }
        for (int q = 0; q < N; q++) {
          for (int b = 0; b < nb; b++) {
            nt[b] = 1;
            sp[b] = plen + q;
            step_tok[b] = qs[(size_t)b * N + q];
          }
          vstep s = {.n_seq = nb, .seq = seq, .n_tokens = nt, .start_pos = sp, .tokens = step_tok};
          vstatus ss = p->ops->supports ? p->ops->supports(p->state, &s) : V_OK;
          double t0 = vclock_now();
          if (ss == V_OK) ss = p->ops->forward(p->state, &s, lg);
          pr->wall_s += vclock_now() - t0;
          if (ss != V_OK) { st = ss; goto out; }
          for (int b = 0; b < nb; b++) {
            const float *l = lg + (size_t)b * V;
            int ans = as[(size_t)b * N + q];
            float best = -INFINITY;
            for (int v = 0; v < V; v++)
              if (v != ans && l[v] > best) best = l[v];
            /* query index: prompts in (bin, needles, sample) order, queries in asked order */
            int idx = qi + (s0 + b) * N + q;
            float mg = l[ans] - best;
            pr->correct[idx] = isfinite(mg) && mg > 0;
            pr->margin[idx] = mg;
            r->q[idx] = (mrcr_query){bin, N, s0 + b, q, ds[(size_t)b * N + q], qs[(size_t)b * N + q], ans};
          }
        }
      }
      qi += o->samples * N;
    }
out:
  free(prompts);
  free(qs);
  free(as);
  free(ds);
  free(step_tok);
  free(lg);
  free(seq);
  free(nt);
  free(sp);
  return st;
}

vstatus mrcr_begin(const ds_model *m, const construct_layout *L, const mrcr_opts *o, mrcr_result *r) {
  memset(r, 0, sizeof *r);
  if (o->n_paths < 1 || o->n_bins < 1 || o->n_needles < 1)
    return VERR("mrcr: options 'paths', 'bins' and 'needles' need at least one value each");
  if (o->samples < 1 || o->batch < 1 || o->chunk < 1)
    return VERR("mrcr: options 'samples', 'batch' and 'chunk' must be >= 1");
  if (L->vocab != m->cfg.vocab_size) return VERR("mrcr: model vocab %d does not match the layout's %d", m->cfg.vocab_size, L->vocab);
  long maxbin = 0;
  for (int i = 0; i < o->n_bins; i++) if (o->bins[i] > maxbin) maxbin = o->bins[i];
  for (int i = 0; i < o->n_needles; i++) {
    if (o->needles[i] < 1 || o->needles[i] > L->o.family)
      return VERR("mrcr: option 'needles': %ld outside [1, %d] (the model's family size)", o->needles[i], L->o.family);
    r->n_queries += (int)(o->needles[i] * o->samples * o->n_bins);
  }
  if (maxbin > m->cfg.max_position_embeddings)
    return VERR("mrcr: option 'bins': %ld exceeds max_position_embeddings %d", maxbin, m->cfg.max_position_embeddings);
  r->n_paths = o->n_paths;
  r->q = calloc((size_t)r->n_queries, sizeof *r->q);
  r->pr = calloc((size_t)o->n_paths, sizeof *r->pr);
  if (!r->q || !r->pr) { mrcr_result_free(r); return VERR("mrcr: out of memory"); }
  for (int p = 0; p < o->n_paths; p++) {
    eval_path_result *pr = &r->pr[p];
    snprintf(pr->path, sizeof pr->path, "%s", o->paths[p].name);
    pr->supported = true;
    pr->correct = calloc((size_t)r->n_queries, 1);
    pr->margin = calloc((size_t)r->n_queries, sizeof(float));
    if (!pr->correct || !pr->margin) { mrcr_result_free(r); return VERR("mrcr: out of memory"); }
  }
  return V_OK;
}

/* run_path's arguments, for eval_on_path. */
typedef struct {
  const construct_layout *L;
  const mrcr_opts *o;
  mrcr_result *r;
  eval_path_result *pr;
} mrcr_on_path;
static vstatus mrcr_path_body(vpath *path, void *ctx) {
  mrcr_on_path *a = ctx;
  return run_path(path, a->L, a->o, a->r, a->pr);
}

vstatus mrcr_run_path(const ds_model *m, const construct_layout *L, const mrcr_opts *o, mrcr_result *r, int p) {
  long maxbin = 0;
  for (int i = 0; i < o->n_bins; i++) if (o->bins[i] > maxbin) maxbin = o->bins[i];
  vpath_opts po = {.max_seq = o->batch, .max_ctx = (int)maxbin, .n_threads = o->n_threads, .expect_fallback = o->expect_fallback};
  mrcr_on_path a = {L, o, r, &r->pr[p]};
  return eval_on_path("mrcr", &o->paths[p], m, &po, p, &r->pr[p], mrcr_path_body, &a);
}

vstatus mrcr_run(const ds_model *m, const construct_layout *L, const mrcr_opts *o, mrcr_result *r) {
  VTRY(mrcr_begin(m, L, o, r));
  for (int p = 0; p < o->n_paths; p++) {
    vstatus s = mrcr_run_path(m, L, o, r, p);
    if (s != V_OK) { mrcr_result_free(r); return s; }
  }
  return V_OK;
}
