/* What the eval suites share (suites/evals/evals_suite.h). */
#include "suites/evals/evals_suite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/atomic_file.h"
#include "suites/engine/cli.h"
#include "suites/engine/record.h"
#include "suites/engine/stats_tests.h"

bool eval_option(eval_opts *o, int argc, char **argv, int *i, vstatus *err) {
  const char *v;
  if (cli_opt(argc, argv, i, "--samples", &v, err)) { if (v) *err = cli_int("--samples", v, 1, 1 << 20, &o->samples); }
  else if (cli_opt(argc, argv, i, "--batch", &v, err)) { if (v) *err = cli_int("--batch", v, 1, 4096, &o->batch); }
  else if (cli_opt(argc, argv, i, "--min-score", &v, err)) { if (v) *err = cli_double("--min-score", v, &o->min_score); }
  else if (cli_opt(argc, argv, i, "--alpha", &v, err)) { if (v) *err = cli_double("--alpha", v, &o->alpha); }
  else if (cli_opt(argc, argv, i, "--export-prompts", &v, err)) { if (v) o->export_f = v; }
  else if (cli_opt(argc, argv, i, "--server", &v, err)) { if (v) o->server = v; }
  else if (cli_opt(argc, argv, i, "--server-model", &v, err)) { if (v) o->server_model = v; }
  else return false;
  return true;
}

vstatus eval_options_done(const eval_opts *o) {
  if (o->server_model && !o->server) return VERR("option --server-model needs --server URL");
  return served_url_check("--server", o->server);
}

/* Query i is in the mask and pr ran it. */
static bool ran(const eval_path_result *pr, const unsigned char *mask, int i) {
  return (!mask || mask[i]) && !(pr->skipped && pr->skipped[i]);
}

double eval_score(const eval_path_result *pr, const unsigned char *mask, int n, int *count) {
  long ok = 0, c = 0;
  for (int i = 0; i < n; i++)
    if (ran(pr, mask, i)) { ok += pr->correct[i]; c++; }
  if (count) *count = (int)c;
  return c ? (double)ok / c : NAN;
}

int eval_margins(const eval_path_result *pr, const unsigned char *mask, int n, double *out) {
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (!ran(pr, mask, i)) continue;
    if (isfinite(pr->margin[i])) out[k++] = pr->margin[i];
    else if (!(pr->margin_unknown && isnan(pr->margin[i]))) out[k++] = -1e30;
  }
  return k;
}

/* Pairwise: discordant counts of path b vs reference a over the mask. */
static void discordant(const eval_path_result *a, const eval_path_result *b, const unsigned char *mask, int n, long *ab,
                       long *ba) {
  *ab = *ba = 0;
  for (int i = 0; i < n; i++) {
    if (!ran(a, mask, i) || !ran(b, mask, i)) continue; /* paired: the queries both ran */
    if (a->correct[i] && !b->correct[i]) (*ab)++;
    if (!a->correct[i] && b->correct[i]) (*ba)++;
  }
}

bool eval_record(veng *recs, const char *suite, const char *id, const eval_path_result *ref, const eval_path_result *pr,
                 bool is_ref, const unsigned char *mask, int n, double min_score, double alpha, const cJSON *params) {
  vrecord *rec = eng_new(recs, suite, id, pr->path);
  if (rec && params) {
    cJSON_Delete(rec->params);
    rec->params = cJSON_Duplicate(params, 1);
  }
  /* what the compared paths ran (out of memory: the record errors) */
  vstatus ran_st = V_OK;
  if (rec && !is_ref && ref->opened) ran_st = rec_ran(rec, ref->path, &ref->ran);
  if (rec && pr->opened && ran_st == V_OK) ran_st = rec_ran(rec, pr->path, &pr->ran);
  if (ran_st != V_OK) {
    rec_set_status(rec, REC_ERROR, verr_msg());
    rec_finalize(rec);
    return false;
  }
  if (!pr->supported) {
    if (rec) rec_set_status(rec, pr->errored ? REC_ERROR : REC_NOT_SUPPORTED, pr->reason);
    if (rec) rec_finalize(rec);
    return !pr->errored;
  }
  int cnt = 0, limited = 0, failed = 0;
  for (int i = 0; pr->skipped && i < n; i++)
    if (!mask || mask[i]) { limited += pr->skipped[i] == EVAL_PAST_LIMIT; failed += pr->skipped[i] == EVAL_FAILED; }
  if (limited) { /* the cell needs more context than the path takes: a limit, not a failure */
    if (rec) rec_set_status(rec, REC_NOT_SUPPORTED, pr->limit_reason);
    if (rec) rec_finalize(rec);
    return true;
  }
  double s = eval_score(pr, mask, n, &cnt);
  double *bits = malloc((size_t)(cnt > 0 ? cnt : 1) * sizeof *bits), *mg = malloc((size_t)(cnt > 0 ? cnt : 1) * sizeof *mg);
  int k = 0, nm = mg ? eval_margins(pr, mask, n, mg) : 0;
  for (int i = 0; bits && i < n; i++)
    if (ran(pr, mask, i)) bits[k++] = pr->correct[i];
  bool pass = s >= min_score && !failed;
  if (rec) {
    rec_metric_samples(rec, "score", "", RD_MEAN, RB_HIGHER, bits, k, 0);
    if (nm) { /* absent where no margin is known (a server without logprobs) */
      rec_metric_samples(rec, "margin_min", "logit", RD_MIN, RB_HIGHER, mg, nm, 0);
      rec_metric_samples(rec, "margin_median", "logit", RD_MEDIAN, RB_HIGHER, mg, nm, 0);
    }
    rec_set_threshold(rec, "score", ">=", min_score);
    /* failed requests: the answered queries stay, the record says it is incomplete */
    if (failed) rec_set_status(rec, REC_ERROR, pr->reason);
  }
  if (!is_ref && ref->supported) {
    long ab, ba;
    discordant(ref, pr, mask, n, &ab, &ba);
    double p = stat_mcnemar_p(ab, ba), rs = eval_score(ref, mask, n, NULL);
    bool worse = ab > ba && p < alpha;
    if (worse) pass = false;
    if (rec) {
      rec_metric_value(rec, "reference_score", "", RB_HIGHER, rs);
      rec_metric_value(rec, "paired_diff", "", RB_HIGHER, s - rs);
      rec_metric_value(rec, "ref_only_right", "", RB_LOWER, (double)ab);
      rec_metric_value(rec, "path_only_right", "", RB_HIGHER, (double)ba);
      rec_metric_value(rec, "mcnemar_p", "", RB_HIGHER, p);
      rec_check_add(rec, "not_worse_than_reference", !worse);
    }
  }
  if (rec) rec_finalize(rec);
  free(bits);
  free(mg);
  return pass;
}

void eval_print_pairwise(const char *label, const eval_path_result *ref, const eval_path_result *pr,
                         const unsigned char *mask, int n, double alpha) {
  if (!pr->supported || !ref->supported) return;
  long ab, ba;
  discordant(ref, pr, mask, n, &ab, &ba);
  double rs = eval_score(ref, mask, n, NULL), s = eval_score(pr, mask, n, NULL), p = stat_mcnemar_p(ab, ba);
  printf("  %-22s %s %.4f vs %s %.4f  diff %+.4f  discordant %ld/%ld  McNemar p %.3g%s\n", label, ref->path, rs, pr->path,
         s, s - rs, ab, ba, p, ab > ba && p < alpha ? "  (significantly worse)" : "");
}

cJSON *eval_export_root(const char *kind, const vsuite_ctx *x) {
  const construct_layout *L = x->layout;
  cJSON *root = cJSON_CreateObject(), *o = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "kind", kind);
  cJSON_AddStringToObject(root, "model", x->model->source);
  cJSON_AddNumberToObject(o, "n_keys", L->o.n_keys);
  cJSON_AddNumberToObject(o, "family", L->o.family);
  cJSON_AddNumberToObject(o, "cos", L->o.cos);
  cJSON_AddNumberToObject(o, "gap", L->o.gap);
  cJSON_AddNumberToObject(o, "vocab", L->vocab);
  cJSON_AddNumberToObject(o, "pair0", L->pair0);
  cJSON_AddNumberToObject(o, "query0", L->query0);
  cJSON_AddItemToObject(root, "layout", o);
  return root;
}

cJSON *eval_ints_json(const int32_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
  return a;
}

vstatus eval_export_write(const char *file, const cJSON *root) { return vfile_write_json(file, root, false); }
