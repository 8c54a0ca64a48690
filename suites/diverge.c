/* Teacher-forced divergence between decode paths (see diverge.h). */
#include "common/clock.h"
#include "suites/diverge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sampling.h"
#include "model/philox.h"
#include "suites/paths.h"
#include "suites/stats_tests.h"

void diverge_result_free(diverge_result *r) {
  free(r->kld);
  free(r->dp);
  r->kld = r->dp = NULL;
}

static void unsupported(diverge_result *r, const char *why) {
  r->supported = false;
  snprintf(r->reason, sizeof r->reason, "%s", why);
}

vstatus diverge_run(const ds_model *m, const diverge_opts *o, diverge_result *res) {
  if (!m || !o || !res) return VERR("diverge: model, options and results are required");
  if (o->n_paths < 2) return VERR("diverge: option 'paths': at least two paths (the first is the reference)");
  if (o->batch < 1) return VERR("diverge: option 'batch' must be >= 1 (got %d)", o->batch);
  if (o->tokens < 1) return VERR("diverge: option 'tokens' must be >= 1 (got %d)", o->tokens);
  if (o->context < 0) return VERR("diverge: option 'context' must be >= 0 (got %d)", o->context);
  const int V = m->cfg.vocab_size, B = o->batch, T = o->tokens, P = o->n_paths;
  if ((long)o->context + T > m->cfg.max_position_embeddings)
    return VERR("diverge: context %d + tokens %d exceeds the model's max_position_embeddings %d", o->context, T,
                m->cfg.max_position_embeddings);
  for (int p = 1; p < P; p++) {
    memset(&res[p - 1], 0, sizeof res[p - 1]);
    snprintf(res[p - 1].path, sizeof res[p - 1].path, "%s", o->paths[p]);
    res[p - 1].supported = true;
  }
  vpath *paths = calloc((size_t)P, sizeof *paths);
  bool *live = calloc((size_t)P, sizeof *live);
  float *logits = malloc((size_t)P * B * V * sizeof(float));
  double *scratch = malloc((size_t)2 * V * sizeof(double));
  int32_t *tok = malloc((size_t)B * sizeof(int32_t));
  int *seq = malloc((size_t)B * sizeof(int)), *ntok = malloc((size_t)B * sizeof(int)), *pos = malloc((size_t)B * sizeof(int));
  for (int p = 1; p < P && logits; p++) {
    res[p - 1].kld = calloc((size_t)B * T, sizeof(double));
    res[p - 1].dp = calloc((size_t)B * T, sizeof(double));
    if (!res[p - 1].kld || !res[p - 1].dp) { free(logits); logits = NULL; }
  }
  vstatus st = V_OK;
  if (!paths || !live || !logits || !scratch || !tok || !seq || !ntok || !pos) {
    st = VERR("diverge: out of memory for %d paths x %d rows x %d vocab logits", P, B, V);
    goto done;
  }
  vpath_opts po = {.max_seq = B, .max_ctx = o->context + T, .n_threads = o->n_threads};
  for (int p = 0; p < P; p++) {
    vstatus s = vpath_open(&paths[p], o->paths[p], m, &po);
    if (s == V_OK) { live[p] = true; continue; }
    if (p == 0) { st = s; verr_prefix("diverge: reference path"); goto done; }
    unsupported(&res[p - 1], verr_msg());
  }
  /* the same synthetic context in every path */
  if (o->context > 0) {
    for (int p = 0; p < P; p++) {
      if (!live[p]) continue;
      if (!paths[p].ops->fill_cache) {
        if (p == 0) { st = VERR("diverge: reference path %s has no fill_cache (needed for --context)", o->paths[0]); goto done; }
        unsupported(&res[p - 1], "path has no fill_cache (needed for a synthetic context)");
        live[p] = false;
        continue;
      }
      for (int b = 0; b < B && live[p]; b++) {
        vstatus s = paths[p].ops->fill_cache(paths[p].state, b, o->context, o->seed);
        if (s == V_OK) continue;
        if (p == 0) { st = s; verr_prefix("diverge: reference fill_cache"); goto done; }
        unsupported(&res[p - 1], verr_msg());
        live[p] = false;
      }
    }
  }
  const uint64_t key = philox_key(o->seed, "diverge.stream");
  for (int b = 0; b < B; b++) {
    seq[b] = b;
    ntok[b] = 1;
    tok[b] = (int32_t)(philox_unit(key, (uint64_t)b) * V) % V;
  }
  vsampling samp = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = o->seed};
  for (int t = 0; t < T; t++) {
    for (int b = 0; b < B; b++) pos[b] = o->context + t;
    vstep s = {.n_seq = B, .seq = seq, .n_tokens = ntok, .start_pos = pos, .tokens = tok, .all_logits = false};
    for (int p = 0; p < P; p++) {
      if (!live[p]) continue;
      vstatus ss = paths[p].ops->supports ? paths[p].ops->supports(paths[p].state, &s) : V_OK;
      double t0 = vclock_now();
      if (ss == V_OK) ss = paths[p].ops->forward(paths[p].state, &s, logits + (size_t)p * B * V);
      if (p > 0) res[p - 1].wall_s += vclock_now() - t0;
      if (ss == V_OK) continue;
      if (p == 0) { st = ss; verr_prefix("diverge: reference path %s at step %d", o->paths[0], t); goto done; }
      unsupported(&res[p - 1], verr_msg());
      live[p] = false;
    }
    /* the stream's next tokens, from the reference */
    int32_t next[4096];
    int32_t *nx = B <= 4096 ? next : NULL;
    if (!nx) { st = VERR("diverge: batch %d above 4096", B); goto done; }
    for (int b = 0; b < B; b++) nx[b] = (int32_t)vsample(logits + (size_t)b * V, V, &samp, b, t, NULL);
    for (int p = 1; p < P; p++) {
      if (!live[p]) continue;
      diverge_result *r = &res[p - 1];
      for (int b = 0; b < B; b++) {
        const float *lr = logits + (size_t)b * V, *lt = logits + ((size_t)p * B + b) * V;
        int row = t * B + b;
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
          r->kld[row] = NAN;
          r->dp[row] = NAN;
          if (bad) r->max_dlogit = INFINITY;
          continue;
        }
        r->kld[row] = stat_kld(lr, lt, V, scratch);
        double *lp = scratch, *lq = scratch + V;
        stat_log_softmax(lr, V, lp);
        stat_log_softmax(lt, V, lq);
        r->dp[row] = exp(lq[nx[b]]) - exp(lp[nx[b]]);
        if (vsample_argmax(lr, V) == vsample_argmax(lt, V)) r->same_top_pct += 1;
      }
    }
    memcpy(tok, nx, (size_t)B * sizeof *tok);
  }
  for (int p = 1; p < P; p++) {
    diverge_result *r = &res[p - 1];
    if (!r->supported) continue;
    r->rows = B * T;
    double *k = malloc((size_t)r->rows * sizeof *k);
    if (!k) { st = VERR("diverge: out of memory"); goto done; }
    int n = 0;
    double sdp = 0;
    for (int i = 0; i < r->rows; i++)
      if (!isnan(r->kld[i])) { k[n++] = r->kld[i]; sdp += r->dp[i] * r->dp[i]; }
    stat_mean_se(k, n, &r->kld_mean, &r->kld_se);
    r->kld_p999 = stat_percentile(k, n, 99.9);
    r->kld_p99 = stat_percentile(k, n, 99);
    r->kld_p95 = stat_percentile(k, n, 95);
    r->kld_median = stat_percentile(k, n, 50);
    r->rms_dp = n ? sqrt(sdp / n) : NAN;
    r->same_top_pct = 100.0 * r->same_top_pct / r->rows;
    free(k);
  }
done:
  for (int p = 0; p < P && paths; p++)
    if (paths[p].ops) vpath_close(&paths[p]);
  free(paths);
  free(live);
  free(logits);
  free(scratch);
  free(tok);
  free(seq);
  free(ntok);
  free(pos);
  return st;
}
