#include "runner/compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const vrecord *find_rec(const vresults *r, const vrecord *k) {
  for (int i = 0; i < r->n; i++) {
    const vrecord *x = r->recs[i];
    if (!strcmp(x->suite, k->suite) && !strcmp(x->case_id, k->case_id) && !strcmp(x->path, k->path)) return x;
  }
  return NULL;
}

static cJSON *case_json(const vrecord *r) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "suite", r->suite);
  cJSON_AddStringToObject(o, "case_id", r->case_id);
  cJSON_AddStringToObject(o, "path", r->path);
  return o;
}

static cJSON *num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static bool perf_unit(const char *u) {
  return !strcmp(u, "s") || !strcmp(u, "ms") || !strcmp(u, "us") || !strcmp(u, "ns") || strstr(u, "/s") != NULL;
}

static bool is_bad(rec_status s) { return s == REC_FAIL || s == REC_ERROR; }

cJSON *compare_results(const vresults *base, const vresults *cand, double thr) {
  cJSON *out = cJSON_CreateObject();
  cJSON_AddNumberToObject(out, "threshold", thr);
  cJSON *corr = cJSON_AddArrayToObject(out, "correctness");
  cJSON *missing = cJSON_AddArrayToObject(out, "missing");
  cJSON *added = cJSON_AddArrayToObject(out, "added");
  cJSON *mets = cJSON_AddArrayToObject(out, "metrics");
  int n_corr = 0, n_perf = 0;
  for (int i = 0; i < base->n; i++) {
    const vrecord *a = base->recs[i], *b = find_rec(cand, a);
    if (!b) { cJSON_AddItemToArray(missing, case_json(a)); continue; }
    if (a->status != b->status) {
      cJSON *c = case_json(a);
      cJSON_AddStringToObject(c, "base", rec_status_name(a->status));
      cJSON_AddStringToObject(c, "cand", rec_status_name(b->status));
      const char *kind = is_bad(b->status) && !is_bad(a->status) ? "regression"
                         : is_bad(a->status) && b->status == REC_PASS ? "fixed" : "changed";
      cJSON_AddStringToObject(c, "kind", kind);
      cJSON_AddStringToObject(c, "reason", b->reason);
      if (!strcmp(kind, "regression")) n_corr++;
      cJSON_AddItemToArray(corr, c);
    }
    for (int k = 0; k < a->n_metrics; k++) {
      const rec_metric *ma = &a->metrics[k], *mb = rec_metric_find(b, ma->name);
      if (!mb) continue;
      double ratio = mb->value / ma->value, lo = ratio, hi = ratio;
      bool stat = ma->derive != RD_RATIO && mb->derive != RD_RATIO && ma->derive != RD_VALUE &&
                  mb->derive != RD_VALUE && ma->n_samples >= 2 && mb->n_samples >= 2;
      if (stat) rec_bootstrap_ratio(ma->samples, ma->n_samples, mb->samples, mb->n_samples, COMPARE_BOOT_ITERS,
                                    COMPARE_SEED, &lo, &hi);
      const char *verdict;
      bool regression = false;
      bool perf = perf_unit(ma->unit);
      if (!isfinite(ratio)) {
        verdict = "n/a";
      } else if (ma->better == RB_NONE) {
        verdict = (lo <= 1 && hi >= 1) ? "same" : "changed";
      } else if (lo <= 1 && hi >= 1) {
        verdict = "same-within-noise";
      } else {
        bool improved = ma->better == RB_LOWER ? hi < 1 : lo > 1;
        verdict = improved ? (perf ? "faster" : "better") : (perf ? "slower" : "worse");
        if (!improved && stat)
          regression = ma->better == RB_LOWER ? lo > 1 + thr : hi < 1 - thr;
      }
      if (regression) n_perf++;
      cJSON *m = case_json(a);
      cJSON_AddStringToObject(m, "metric", ma->name);
      cJSON_AddStringToObject(m, "unit", ma->unit);
      cJSON_AddStringToObject(m, "better", rec_better_name(ma->better));
      cJSON_AddItemToObject(m, "base", num(ma->value));
      cJSON_AddItemToObject(m, "cand", num(mb->value));
      cJSON_AddItemToObject(m, "ratio", num(ratio));
      cJSON *ci = cJSON_AddArrayToObject(m, "ci95");
      cJSON_AddItemToArray(ci, num(lo));
      cJSON_AddItemToArray(ci, num(hi));
      cJSON_AddBoolToObject(m, "bootstrap", stat);
      cJSON_AddStringToObject(m, "verdict", verdict);
      cJSON_AddBoolToObject(m, "regression", regression);
      cJSON_AddItemToArray(mets, m);
    }
  }
  for (int i = 0; i < cand->n; i++) {
    const vrecord *b = cand->recs[i];
    if (find_rec(base, b)) continue;
    cJSON_AddItemToArray(added, case_json(b));
    if (is_bad(b->status)) { /* a case that fails and did not exist before (e.g. a step that now errors) */
      cJSON *c = case_json(b);
      cJSON_AddStringToObject(c, "base", "absent");
      cJSON_AddStringToObject(c, "cand", rec_status_name(b->status));
      cJSON_AddStringToObject(c, "kind", "regression");
      cJSON_AddStringToObject(c, "reason", b->reason);
      cJSON_AddItemToArray(corr, c);
      n_corr++;
    }
  }
  cJSON_AddNumberToObject(out, "correctness_regressions", n_corr);
  cJSON_AddNumberToObject(out, "perf_regressions", n_perf);
  cJSON_AddNumberToObject(out, "regressions", n_corr + n_perf);
  return out;
}

static const char *s(const cJSON *o, const char *k) {
  const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
  return v ? v : "";
}
static double d(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

void compare_print(const cJSON *cmp, FILE *out) {
  const cJSON *e;
  const cJSON *corr = cJSON_GetObjectItemCaseSensitive(cmp, "correctness");
  fprintf(out, "== correctness changes (%d)\n", cJSON_GetArraySize(corr));
  cJSON_ArrayForEach(e, corr)
    fprintf(out, "  %-10s %s/%s [%s]: %s -> %s%s%s\n", s(e, "kind"), s(e, "suite"), s(e, "case_id"), s(e, "path"),
            s(e, "base"), s(e, "cand"), s(e, "reason")[0] ? " : " : "", s(e, "reason"));
  const cJSON *miss = cJSON_GetObjectItemCaseSensitive(cmp, "missing"), *add = cJSON_GetObjectItemCaseSensitive(cmp, "added");
  if (cJSON_GetArraySize(miss) || cJSON_GetArraySize(add)) {
    fprintf(out, "== cases only in base: %d, only in candidate: %d\n", cJSON_GetArraySize(miss), cJSON_GetArraySize(add));
    cJSON_ArrayForEach(e, miss) fprintf(out, "  missing    %s/%s [%s]\n", s(e, "suite"), s(e, "case_id"), s(e, "path"));
    cJSON_ArrayForEach(e, add) fprintf(out, "  added      %s/%s [%s]\n", s(e, "suite"), s(e, "case_id"), s(e, "path"));
  }
  const cJSON *mets = cJSON_GetObjectItemCaseSensitive(cmp, "metrics");
  fprintf(out, "== metrics (%d), ratio = candidate / base, 95%% bootstrap CI of the ratio of medians\n", cJSON_GetArraySize(mets));
  cJSON_ArrayForEach(e, mets) {
    const cJSON *ci = cJSON_GetObjectItemCaseSensitive(e, "ci95");
    double lo = cJSON_IsNumber(cJSON_GetArrayItem(ci, 0)) ? cJSON_GetArrayItem(ci, 0)->valuedouble : NAN;
    double hi = cJSON_IsNumber(cJSON_GetArrayItem(ci, 1)) ? cJSON_GetArrayItem(ci, 1)->valuedouble : NAN;
    fprintf(out, "  %s/%s [%s] %s: %.6g -> %.6g %s  x%.4f [%.4f, %.4f]  %s%s\n", s(e, "suite"), s(e, "case_id"),
            s(e, "path"), s(e, "metric"), d(e, "base"), d(e, "cand"), s(e, "unit"), d(e, "ratio"), lo, hi,
            s(e, "verdict"), cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "regression")) ? "  REGRESSION" : "");
  }
  fprintf(out, "== %d correctness regression(s), %d performance regression(s) beyond %.1f%%\n",
          (int)d(cmp, "correctness_regressions"), (int)d(cmp, "perf_regressions"), 100 * d(cmp, "threshold"));
}
