/* The records of a served sweep A/B under `vouch run` (sweep_ab_records.h). */
#include "runner/cli/sweep_ab_records.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runner/evidence/compare.h"
#include "suites/engine/record.h"

static const char *str(const cJSON *o, const char *k) {
  const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
  return v ? v : "";
}
static double num(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The parameters every record of the A/B carries. */
static void common_params(vrecord *r, const cJSON *cmp, const char *sub) {
  const cJSON *ab = cJSON_GetObjectItemCaseSensitive(cmp, "sweep_ab");
  rec_param_str(r, "sweep_ab", sub); /* the rounds' folder in the run directory: base-K/ head-K/ compare.* */
  rec_param_str(r, "head_server", str(ab, "head_server"));
  rec_param_str(r, "base_server", str(ab, "base_server"));
  rec_param_int(r, "rounds", (int64_t)num(ab, "rounds"));
  rec_param_str(r, "order", str(ab, "order"));
  rec_param_num(r, "threshold", num(cmp, "threshold"));
  rec_param_num(r, "interval_confidence", num(cmp, "interval_confidence"));
  rec_param_int(r, "gated_family", (int64_t)num(cmp, "gated_family"));
}

/* One gated figure e of compare's "metrics" as a record (see the header). */
static vstatus figure_record(const vrec_sink *sink, const cJSON *cmp, const cJSON *e, const char *head_path,
                             const char *sub) {
  char id[sizeof ((vrecord *)0)->case_id];
  snprintf(id, sizeof id, "%s/%s/%s", sub, str(e, "case_id"), str(e, "metric"));
  vrecord *r = rec_new("sweep", id, head_path);
  if (!r) return VERR("sweep: out of memory for record %s", id);
  common_params(r, cmp, sub);
  const char *unit = str(e, "unit"), *verdict = str(e, "verdict");
  const int better = rec_better_parse(str(e, "better"));
  const rec_better b = better < 0 ? RB_NONE : (rec_better)better;
  rec_param_str(r, "figure", str(e, "metric"));
  rec_param_str(r, "level", str(e, "case_id"));
  rec_param_str(r, "derive", str(e, "derive"));
  rec_param_str(r, "verdict", verdict);
  const cJSON *ci = cJSON_GetObjectItemCaseSensitive(e, "ci95");
  const double lo = cJSON_IsNumber(cJSON_GetArrayItem(ci, 0)) ? cJSON_GetArrayItem(ci, 0)->valuedouble : NAN;
  const double hi = cJSON_IsNumber(cJSON_GetArrayItem(ci, 1)) ? cJSON_GetArrayItem(ci, 1)->valuedouble : NAN;
  const double thr = num(cmp, "threshold");
  rec_metric_value(r, "base", unit, b, num(e, "base"));
  rec_metric_value(r, "head", unit, b, num(e, "cand"));
  rec_metric_value(r, "ratio", "", RB_NONE, num(e, "ratio"));
  rec_metric_value(r, "ci_low", "", RB_NONE, lo);
  rec_metric_value(r, "ci_high", "", RB_NONE, hi);
  rec_metric_value(r, "n_base", "", RB_NONE, num(e, "n_base"));
  rec_metric_value(r, "n_head", "", RB_NONE, num(e, "n_cand"));
  /* the gate (compare.c): a regression when the whole interval lies beyond 1 +- threshold on the worse
   * side; as a threshold on the interval's near end, so verify recomputes the status from the record */
  const bool has_ci = isfinite(lo) && isfinite(hi);
  if (has_ci && b == RB_LOWER) rec_set_threshold(r, "ci_low", "<=", 1 + thr);
  if (has_ci && b == RB_HIGHER) rec_set_threshold(r, "ci_high", ">=", 1 - thr);
  char why[256];
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "regression"))) {
    snprintf(why, sizeof why, "regression: head / base x%.4g, interval [%.4g, %.4g] wholly beyond %.4g (%s)",
             num(e, "ratio"), lo, hi, b == RB_LOWER ? 1 + thr : 1 - thr, verdict);
    rec_set_status(r, REC_FAIL, why);
  } else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "too_noisy"))) {
    snprintf(why, sizeof why, "too noisy to judge: interval [%.4g, %.4g] spans both %.4g and %.4g (more rounds, "
             "--relaunch, a quieter machine)", lo, hi, 1 - thr, 1 + thr);
    rec_set_status(r, REC_UNDECIDED, why);
  } else if (!has_ci && strcmp(verdict, "same") != 0) { /* "same": equal values (1, or 0 and 0), nothing to decide */
    snprintf(why, sizeof why, "%s: no interval from %g base and %g head samples (per-request timings need %d rounds "
             "a side, a figure read once per run, a p90 / p99 or output tok/s, 8)", verdict[0] ? verdict : "n/a",
             num(e, "n_base"), num(e, "n_cand"), COMPARE_MIN_TIMING_RUNS);
    rec_set_status(r, REC_UNDECIDED, why);
  }
  return rec_emit(sink, r, NULL) ? (rec_free(r), V_ERR) : (rec_free(r), V_OK);
}

/* The spec-decode acceptance of level L (its "spec": per side null or the figures), when a side counted
 * drafts. */
static vstatus spec_record(const vrec_sink *sink, const cJSON *cmp, const cJSON *L, const char *head_path, const char *sub) {
  static const char *const SIDE[2] = {"base", "head"};
  const cJSON *spec = cJSON_GetObjectItemCaseSensitive(L, "spec");
  if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(spec, "base")) &&
      !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(spec, "head")))
    return V_OK;
  char id[sizeof ((vrecord *)0)->case_id];
  snprintf(id, sizeof id, "%s/%s/spec_decode", sub, str(L, "case_id"));
  vrecord *r = rec_new("sweep", id, head_path);
  if (!r) return VERR("sweep: out of memory for record %s", id);
  common_params(r, cmp, sub);
  rec_param_str(r, "level", str(L, "case_id"));
  for (int s = 0; s < 2; s++) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(spec, SIDE[s]), *p;
    char nm[48];
    if (!cJSON_IsObject(e)) {
      snprintf(nm, sizeof nm, "%s_spec_decode", SIDE[s]);
      rec_param_str(r, nm, "no drafts counted");
      continue;
    }
    snprintf(nm, sizeof nm, "%s_mean_acceptance_length", SIDE[s]);
    rec_metric_value(r, nm, "tok", RB_HIGHER, num(e, "mean_acceptance_length"));
    snprintf(nm, sizeof nm, "%s_acceptance_rate", SIDE[s]);
    if (isfinite(num(e, "acceptance_rate"))) rec_metric_value(r, nm, "", RB_HIGHER, num(e, "acceptance_rate"));
    snprintf(nm, sizeof nm, "%s_draft_length", SIDE[s]);
    rec_metric_value(r, nm, "tok", RB_NONE, num(e, "draft_length"));
    int k = 0;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(e, "per_position")) {
      snprintf(nm, sizeof nm, "%s_acceptance_pos%d", SIDE[s], k++);
      rec_metric_value(r, nm, "", RB_HIGHER, p->valuedouble);
    }
  }
  rec_param_str(r, "spec_source", "each side's /metrics counters, median over its rounds (evidence; not gated)");
  return rec_emit(sink, r, NULL) ? (rec_free(r), V_ERR) : (rec_free(r), V_OK);
}

/* The comparison as a whole: compare_failed, headline and problems. */
static vstatus whole_record(const vrec_sink *sink, const cJSON *cmp, const char *head_path, const char *sub) {
  vrecord *r = rec_new("sweep", sub, head_path);
  if (!r) return VERR("sweep: out of memory for record %s", sub);
  common_params(r, cmp, sub);
  rec_param_str(r, "headline", str(cmp, "headline"));
  rec_metric_value(r, "regressions", "", RB_LOWER, num(cmp, "regressions"));
  rec_metric_value(r, "problems", "", RB_LOWER, cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cmp, "problems")));
  rec_metric_value(r, "too_noisy", "", RB_LOWER, num(cmp, "too_noisy"));
  rec_set_threshold(r, "problems", "==", 0);
  rec_check_add(r, "no_regression", !(num(cmp, "regressions") > 0));
  if (compare_failed(cmp)) {
    const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cmp, "problems"), 0);
    char why[256];
    snprintf(why, sizeof why, "%s%s%s", str(cmp, "headline"), cJSON_IsString(p) ? "; " : "", cJSON_IsString(p) ? p->valuestring : "");
    rec_set_status(r, REC_FAIL, why);
  }
  return rec_emit(sink, r, NULL) ? (rec_free(r), V_ERR) : (rec_free(r), V_OK);
}

vstatus sab_emit_records(const vrec_sink *sink, const cJSON *cmp, const char *head_path, const char *sub) {
  const cJSON *e, *L;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cmp, "metrics"))
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "gated"))) VTRY(figure_record(sink, cmp, e, head_path, sub));
  cJSON_ArrayForEach(L, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cmp, "sweep_ab"), "levels"))
    VTRY(spec_record(sink, cmp, L, head_path, sub));
  return whole_record(sink, cmp, head_path, sub);
}
