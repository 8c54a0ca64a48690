/* Teacher-forced divergence between decode paths (see diverge.h). */
#include "common/clock.h"
#include "suites/diverge/diverge.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sampling.h"
#include "common/philox.h"
#include "suites/paths/paths.h"
#include "suites/engine/stats_tests.h"

void diverge_result_free(diverge_result *r) {
  free(r->kld);
  free(r->dp);
  free(r->margin);
  free(r->top_err);
  free(r->same);
  r->kld = r->dp = r->margin = r->top_err = NULL;
  r->same = NULL;
  vtrace_free(&r->ran);
  r->opened = false;
}

/* Marks r as not run, for the reason `why`; s is the status that stopped it (V_UNSUPPORTED: the path
 * declines the case; any other error: the path broke, and the case counts as an error). */
static void unsupported(diverge_result *r, vstatus s, const char *why) {
  r->supported = false;
  r->errored = s != V_UNSUPPORTED;
  snprintf(r->reason, sizeof r->reason, "%s", why);
}

int diverge_context_of(const diverge_opts *o, int b) {
  assert(b >= 0 && b < o->batch);
  switch (o->ragged) {
    case DIVERGE_CTX_RAGGED: return (int)((long)o->context * (o->batch - b) / o->batch);
    case DIVERGE_CTX_SKEW: return b == 0 ? o->context : 0;
    default: return o->context;
  }
}

void diverge_row(diverge_result *r, size_t row, const float *lr, const float *lt, int V, int32_t next, double *scratch) {
  long bad = 0, rbad = 0;
  double mx = 0;
  for (int i = 0; i < V; i++) {
    if (!isfinite(lt[i])) bad++;
    if (!isfinite(lr[i])) rbad++;
    double d = fabs((double)lt[i] - lr[i]);
    if (isfinite(d) && d > mx) mx = d;
  }
  r->nonfinite += bad;
  r->ref_nonfinite += rbad;
  if (mx > r->max_dlogit) r->max_dlogit = mx;
  if (bad || rbad) {
    r->kld[row] = r->dp[row] = r->margin[row] = r->top_err[row] = NAN;
    if (bad) r->max_dlogit = INFINITY;
    return;
  }
  r->kld[row] = stat_kld(lr, lt, V, scratch);
  double *lp = scratch, *lq = scratch + V;
  stat_log_softmax(lr, V, lp);
  stat_log_softmax(lt, V, lq);
  r->dp[row] = exp(lq[next]) - exp(lp[next]);
  r->margin[row] = stat_top2_margin(lr, V, NULL, NULL);
  r->top_err[row] = stat_top2_error(lr, lt, V);
  r->same[row] = vsample_argmax(lr, V) == vsample_argmax(lt, V);
  r->same_top_pct += r->same[row];
}

vstatus diverge_floor_judge(const diverge_result *path, const diverge_result *base, double k, diverge_floor *f) {
  assert(path && base && k > 0 && f);
  const int n = path->rows < base->rows ? path->rows : base->rows;
  double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d); /* [paired] d_i, sorted by the bulk arm */
  if (!d) return VERR("diverge: out of memory for %d paired rows", n);
  int m = 0;
  double sb = 0;
  for (int i = 0; i < n; i++)
    if (isfinite(path->kld[i]) && isfinite(base->kld[i])) {
      sb += base->kld[i];
      d[m++] = path->kld[i] - k * k * base->kld[i];
    }
  double md;
  *f = (diverge_floor){.paired = m, .base_mean = m ? sb / m : NAN};
  stat_mean_se(d, m, &md, &f->diff_se); /* before the bulk arm sorts d */
  stat_trimmed_mean_se(d, m, DIVERGE_BULK_TRIM, &f->bulk, &f->bulk_se);
  if (!m) f->diff_se = f->bulk_se = NAN;
  f->bound = k * k * f->base_mean + 3 * f->diff_se;
  free(d);
  return V_OK;
}

vstatus diverge_summarize(diverge_result *r) {
  double *k = calloc((size_t)(r->rows > 0 ? r->rows : 1), sizeof *k);
  if (!k) return VERR("diverge: out of memory");
  int n = 0, ndp = 0;
  double sdp = 0;
  for (int i = 0; i < r->rows; i++)
    if (!isnan(r->kld[i])) {
      k[n++] = r->kld[i];
      if (!isnan(r->dp[i])) sdp += r->dp[i] * r->dp[i], ndp++; /* a served row may not know dp */
    }
  stat_mean_se(k, n, &r->kld_mean, &r->kld_se);
  r->kld_p999 = stat_percentile(k, n, 99.9);
  r->kld_p99 = stat_percentile(k, n, 99);
  r->kld_p95 = stat_percentile(k, n, 95);
  r->kld_median = stat_percentile(k, n, 50);
  r->rms_dp = ndp ? sqrt(sdp / ndp) : NAN;
  r->same_top_pct = r->rows ? 100.0 * r->same_top_pct / r->rows : NAN;
  free(k);
  return V_OK;
}

vstatus diverge_run(const ds_model *m, const diverge_opts *o, diverge_result *res) {
  if (!m || !o || !res) return VERR("diverge: model, options and results are required");
  if (o->n_paths < (o->stream_out ? 1 : 2))
    return VERR("diverge: option 'paths': at least two paths (the first is the reference)");
  if ((o->stream_out || o->ref_rows_out) && o->spec_k)
    return VERR("diverge: the stream and the reference's rows are kept only without 'spec'");
  if (o->batch < 1 || o->batch > 4096) return VERR("diverge: option 'batch' must be in [1, 4096] (got %d)", o->batch);
  if (o->tokens < 1) return VERR("diverge: option 'tokens' must be >= 1 (got %d)", o->tokens);
  if (o->context < 0) return VERR("diverge: option 'context' must be >= 0 (got %d)", o->context);
  if (o->spec_k < 0 || o->spec_k > 15) return VERR("diverge: option 'spec' must be in [0, 15] (got %d)", o->spec_k);
  const int V = m->cfg.vocab_size, B = o->batch, T = o->tokens, P = o->n_paths, K1 = o->spec_k + 1;
  const int R = B * K1; /* logit rows per step */
  if ((long)o->context + (long)T * K1 > m->cfg.max_position_embeddings)
    return VERR("diverge: context %d + tokens %d x %d per step exceeds the model's max_position_embeddings %d",
                o->context, T, K1, m->cfg.max_position_embeddings);
  const bool forced = o->routing && o->routing->kind != ROUTE_NATURAL;
  for (int p = 1; p < P; p++) {
    memset(&res[p - 1], 0, sizeof res[p - 1]);
    snprintf(res[p - 1].path, sizeof res[p - 1].path, "%s", o->paths[p].name);
    res[p - 1].supported = true;
  }
  const size_t nrows = (size_t)T * R;
  vpath *paths = calloc((size_t)P, sizeof *paths);
  bool *live = calloc((size_t)P, sizeof *live);
  float *logits = malloc((size_t)P * R * V * sizeof(float));
  double *scratch = malloc((size_t)2 * V * sizeof(double));
  int32_t *tok = malloc((size_t)R * sizeof(int32_t)), *next = malloc((size_t)B * sizeof(int32_t));
  int *seq = malloc((size_t)B * sizeof(int)), *ntok = malloc((size_t)B * sizeof(int)), *pos = malloc((size_t)B * sizeof(int));
  int32_t *fexp = forced ? malloc((size_t)o->routing->n_moe * R * o->routing->K * sizeof(int32_t)) : NULL;
  for (int p = 1; p < P && logits; p++) {
    diverge_result *r = &res[p - 1];
    r->kld = calloc(nrows, sizeof(double));
    r->dp = calloc(nrows, sizeof(double));
    r->margin = calloc(nrows, sizeof(double));
    r->top_err = calloc(nrows, sizeof(double));
    r->same = calloc(nrows, 1);
    if (!r->kld || !r->dp || !r->margin || !r->top_err || !r->same) { free(logits); logits = NULL; }
  }
  vstatus st = V_OK;
  if (!paths || !live || !logits || !scratch || !tok || !next || !seq || !ntok || !pos || (forced && !fexp)) {
    st = VERR("diverge: out of memory for %d paths x %d rows x %d vocab logits", P, R, V);
    goto done;
  }
  vpath_opts po = {.max_seq = B, .max_ctx = o->context + T * K1, .n_threads = o->n_threads,
                   .expect_fallback = o->expect_fallback};
  for (int p = 0; p < P; p++) {
    vstatus s = vpath_open(&paths[p], &o->paths[p], m, &po);
    if (s == V_OK) { live[p] = true; continue; }
    if (p == 0) { st = s; verr_prefix("diverge: reference path"); goto done; }
    unsupported(&res[p - 1], s, verr_msg());
  }
  /* the same synthetic context in every path */
  if (o->context > 0) {
    for (int p = 0; p < P; p++) {
      if (!live[p]) continue;
      if (!paths[p].ops->fill_cache) {
        if (p == 0) { st = VERR("diverge: reference path %s has no fill_cache (needed for --context)", o->paths[0].name); goto done; }
        unsupported(&res[p - 1], V_UNSUPPORTED, "path has no fill_cache (needed for a synthetic context)");
        live[p] = false;
        continue;
      }
      for (int b = 0; b < B && live[p]; b++) {
        if (diverge_context_of(o, b) == 0) continue;
        vstatus s = paths[p].ops->fill_cache(paths[p].state, b, diverge_context_of(o, b), o->seed);
        if (s == V_OK) continue;
        if (p == 0) { st = s; verr_prefix("diverge: reference fill_cache"); goto done; }
        unsupported(&res[p - 1], s, verr_msg());
        live[p] = false;
      }
    }
  }
  const uint64_t key = philox_key(o->seed, "diverge.stream"), dkey = philox_key(o->seed, "diverge.drafts");
  for (int b = 0; b < B; b++) {
    seq[b] = b;
    ntok[b] = K1;
    next[b] = (int32_t)(philox_unit(key, (uint64_t)b) * V) % V;
  }
  vsampling samp = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = o->seed};
  for (int t = 0; t < T; t++) {
    for (int b = 0; b < B; b++) {
      pos[b] = diverge_context_of(o, b) + t * K1;
      tok[b * K1] = next[b];
      for (int k = 1; k < K1; k++)
        tok[b * K1 + k] = (int32_t)(philox_unit(dkey, ((uint64_t)t * B + b) * 16 + k) * V) % V;
    }
    const bool force_t = forced && !(o->alternate_natural && t % 2 == 1);
    if (force_t) vrouting_fill(o->routing, o->seed, t, R, fexp);
    vstep s = {.n_seq = B, .seq = seq, .n_tokens = ntok, .start_pos = pos, .tokens = tok, .all_logits = K1 > 1,
               .forced_experts = force_t ? fexp : NULL};
    for (int p = 0; p < P; p++) {
      if (!live[p]) continue;
      vstatus ss = paths[p].ops->supports ? paths[p].ops->supports(paths[p].state, &s) : V_OK;
      double t0 = vclock_now();
      if (ss == V_OK) ss = paths[p].ops->forward(paths[p].state, &s, logits + (size_t)p * R * V);
      if (p > 0) res[p - 1].wall_s += vclock_now() - t0;
      if (ss == V_OK) continue;
      if (p == 0) { st = ss; verr_prefix("diverge: reference path %s at step %d", o->paths[0].name, t); goto done; }
      unsupported(&res[p - 1], ss, verr_msg());
      live[p] = false;
    }
    /* the stream's next tokens, from the reference's last row of each sequence */
    for (int b = 0; b < B; b++) next[b] = (int32_t)vsample(logits + ((size_t)b * K1 + K1 - 1) * V, V, &samp, b, t, NULL);
    if (o->ref_rows_out) memcpy(o->ref_rows_out + (size_t)t * R * V, logits, (size_t)R * V * sizeof(float));
    for (int b = 0; o->stream_out && b < B; b++) {
      o->stream_out[(size_t)b * (T + 1) + t] = tok[b];
      if (t == T - 1) o->stream_out[(size_t)b * (T + 1) + T] = next[b];
    }
    for (int p = 1; p < P; p++) {
      if (!live[p]) continue;
      diverge_result *r = &res[p - 1];
      for (int i = 0; i < R; i++) {
        /* dp of the row's next stream token: the following row's input, or the sampled next token */
        const int32_t nx = i % K1 < K1 - 1 ? tok[i + 1] : next[i / K1];
        diverge_row(r, (size_t)t * R + i, logits + (size_t)i * V, logits + ((size_t)p * R + i) * V, V, nx, scratch);
      }
    }
  }
  for (int p = 1; p < P && !st; p++) {
    diverge_result *r = &res[p - 1];
    if (!r->supported) continue;
    r->rows = (int)nrows;
    st = diverge_summarize(r);
  }
done:
  /* what each path ran (the records' proof, issue 37), kept past its close */
  for (int p = 0; p < P && paths; p++) {
    if (!paths[p].ops) continue;
    vtrace dropped = {0}, *keep = p == 0 ? (o->ref_ran_out ? o->ref_ran_out : &dropped) : &res[p - 1].ran;
    vstatus ks = vpath_close_keep(&paths[p], keep);
    vtrace_free(&dropped);
    if (ks != V_OK && st == V_OK) { st = ks; verr_prefix("diverge: path %s", o->paths[p].name); }
    if (p > 0) res[p - 1].opened = true;
  }
  free(paths);
  free(live);
  free(logits);
  free(scratch);
  free(tok);
  free(next);
  free(seq);
  free(ntok);
  free(pos);
  free(fexp);
  return st;
}
