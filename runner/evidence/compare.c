#define _GNU_SOURCE /* open_memstream */
#include "runner/evidence/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/engine/stats_tests.h"

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

static int severity(rec_status s) { return s == REC_ERROR ? 2 : s == REC_FAIL ? 1 : 0; }

static bool ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

/* A statistic of another metric of the record (an interval bound, a coefficient of
 * variation): listed, never gated, since its own change is not a change of speed. */
static bool statistic_of_metric(const char *name) {
  return ends_with(name, "_ci95_lo") || ends_with(name, "_ci95_hi") || ends_with(name, "_cv_pct");
}

int compare_min_samples(rec_derive d) {
  switch (d) {
  case RD_MEDIAN: case RD_MEAN: case RD_STABLE_MEAN: case RD_VALUE: return 8;
  case RD_P90: return 40;   /* >= 4 samples above the 90th percentile */
  case RD_P99: return 400;  /* >= 4 samples above the 99th percentile */
  default: return 0;        /* min, max, in-record ratios: no interval */
  }
}

/* One side's samples of one figure: a group per round (warm-up samples dropped). */
typedef struct {
  const double *x[64]; /* [ng] samples of round g */
  int n[64];           /* [ng] their counts */
  int ng;              /* rounds that have the metric */
  int total;           /* sum of n */
} groups;

static void gather(const vresults *side, int nr, const vrecord *key, const char *metric, groups *g) {
  memset(g, 0, sizeof *g);
  for (int k = 0; k < nr && g->ng < 64; k++) {
    const vrecord *x = find_rec(&side[k], key);
    const rec_metric *m = x ? rec_metric_find(x, metric) : NULL;
    if (!m || m->derive == RD_RATIO || m->n_samples <= 0) continue;
    int skip = m->derive == RD_STABLE_MEAN ? m->warmup : 0;
    if (skip < 0) skip = 0;
    if (skip >= m->n_samples) continue;
    g->x[g->ng] = m->samples + skip;
    g->n[g->ng] = m->n_samples - skip;
    g->total += g->n[g->ng++];
  }
}

/* The statistic a figure of derive d is, over samples already stripped of warm-up (a value
 * recorded once per run becomes the median over runs). */
static rec_derive pooled_derive(rec_derive d) { return d == RD_VALUE ? RD_MEDIAN : d; }

static double pooled_stat(rec_derive d, const groups *g, double *buf) {
  int k = 0;
  for (int i = 0; i < g->ng; i++) {
    memcpy(buf + k, g->x[i], (size_t)g->n[i] * sizeof *buf);
    k += g->n[i];
  }
  return rec_stat_derive(pooled_derive(d), buf, k, 0);
}

/* One bootstrap resample of a side: rounds drawn with replacement (when there are several),
 * then each drawn round's samples drawn with replacement; returns the statistic. */
static double resample_stat(rec_derive d, const groups *g, double *buf, uint64_t *rng) {
  int k = 0;
  for (int i = 0; i < g->ng; i++) {
    int r = g->ng > 1 ? (int)(rec_rng_next(rng) % (uint64_t)g->ng) : i;
    for (int j = 0; j < g->n[r]; j++) buf[k++] = g->x[r][rec_rng_next(rng) % (uint64_t)g->n[r]];
  }
  return rec_stat_derive(pooled_derive(d), buf, k, 0);
}

/* Resamples may hold more samples than the pool when rounds differ in size. */
static int resample_cap(const groups *g) {
  int mx = 0;
  for (int i = 0; i < g->ng; i++) mx = g->n[i] > mx ? g->n[i] : mx;
  return mx * g->ng > g->total ? mx * g->ng : g->total;
}

/* Resamples for a two-sided interval of error rate alpha: COMPARE_BOOT_ITERS at 5 %, more for a
 * family-wise interval (about 20 resamples beyond each end), at most COMPARE_BOOT_ITERS_MAX. */
static int boot_iters(double alpha) {
  if (alpha >= 0.05) return COMPARE_BOOT_ITERS;
  const double want = ceil(40.0 / alpha);
  return want > COMPARE_BOOT_ITERS_MAX ? COMPARE_BOOT_ITERS_MAX : (int)want;
}

/* Percentile-bootstrap interval of stat(cand)/stat(base) at two-sided error rate alpha (0.05: 95 %). */
static void boot_ratio(rec_derive d, const groups *ga, const groups *gb, double alpha, double *lo, double *hi) {
  const int iters = boot_iters(alpha);
  double *ba = malloc((size_t)resample_cap(ga) * sizeof *ba), *bb = malloc((size_t)resample_cap(gb) * sizeof *bb);
  double *rs = malloc((size_t)iters * sizeof *rs);
  if (ba && bb && rs) {
    uint64_t rng = COMPARE_SEED;
    for (int it = 0; it < iters; it++) {
      double a = resample_stat(d, ga, ba, &rng);
      rs[it] = resample_stat(d, gb, bb, &rng) / a;
    }
    *lo = rec_stat_percentile(rs, iters, 50.0 * alpha);
    *hi = rec_stat_percentile(rs, iters, 100.0 - 50.0 * alpha);
  }
  free(ba);
  free(bb);
  free(rs);
}

/* The figure's statistic over round r of one side alone (buf: room for its samples). */
static double round_stat(rec_derive d, const groups *g, int r, double *buf) {
  memcpy(buf, g->x[r], (size_t)g->n[r] * sizeof *buf);
  return rec_stat_derive(pooled_derive(d), buf, g->n[r], 0);
}

/* Round k of each side ran next to the other's (vouch ab: base, head, head, base, ...), so the
 * round's ratio stat(cand_k)/stat(base_k) carries the machine's drift between rounds, which the
 * step samples of a round cannot show, and which resampling 3 rounds with replacement
 * underestimates (the CI of 763a39c read a 1.45x drift under ASan as a regression). Sets the
 * Student-t interval (two-sided error rate alpha; 0.05: 95 %) of the geometric mean of those
 * ratios (log ratios, n-1 degrees of freedom); false (lo, hi untouched) when fewer than 2 rounds pair up (each of the n rounds
 * of both sides must have the figure: ga and gb as gather made them), a ratio is not finite and
 * positive, or memory runs out. */
static bool paired_ratio(rec_derive d, const groups *ga, const groups *gb, int n, double alpha, double *lo, double *hi) {
  if (n < 2 || ga->ng != n || gb->ng != n) return false;
  int mx = 0, paired = 0;
  for (int r = 0; r < n; r++) {
    if (ga->n[r] > mx) mx = ga->n[r];
    if (gb->n[r] > mx) mx = gb->n[r];
  }
  double *buf = malloc((size_t)mx * sizeof *buf), sum = 0, sum2 = 0;
  for (; buf && paired < n; paired++) {
    double q = round_stat(d, gb, paired, buf) / round_stat(d, ga, paired, buf);
    if (!isfinite(q) || q <= 0) break;
    sum += log(q);
    sum2 += log(q) * log(q);
  }
  free(buf);
  if (paired < n) return false;
  double mean = sum / n, var = (sum2 - n * mean * mean) / (n - 1);
  const double tq = alpha == 0.05 ? rec_stat_t975(n - 1) : stat_t_quantile(1.0 - alpha / 2.0, n - 1);
  double half = tq * sqrt(var > 0 ? var : 0) / sqrt(n);
  *lo = exp(mean - half);
  *hi = exp(mean + half);
  return true;
}

typedef struct {
  int n_perf, n_short; /* perf regressions; figures with too few samples to test */
  int n_noisy;         /* gated figures whose interval reaches past both 1 - thr and 1 + thr: a
                          change of the threshold's size could not have been seen */
} tally;

/* What a figure is judged by: the threshold, and the two-sided error rate of each figure's interval
 * (0.05, or 0.05 over the number of gated figures for a family-wise comparison). */
typedef struct {
  double thr;
  double alpha;
} cmp_rule;

/* True when figure ma of record a is gated: it has a direction, is not itself a test statistic, and
 * its derive can be tested. */
static bool gated_metric(const rec_metric *ma) {
  return ma->better != RB_NONE && !statistic_of_metric(ma->name) && compare_min_samples(ma->derive) > 0;
}

/* True when the figure (ma in base, mb in cand, their samples gathered in ga, gb) has enough samples
 * and rounds on both sides to be tested at all. */
static bool testable(const rec_metric *ma, const rec_metric *mb, const groups *ga, const groups *gb) {
  const int need = compare_min_samples(ma->derive);
  /* timings of separate runs differ by the machine's drift between them, which steps of one
   * run cannot show: such figures need rounds (vouch ab) on both sides to be tested */
  const int need_runs = perf_unit(ma->unit) ? COMPARE_MIN_TIMING_RUNS : 1;
  return need > 0 && ma->derive == mb->derive && ga->total >= need && gb->total >= need && ga->ng >= need_runs &&
         gb->ng >= need_runs;
}

/* True when a timing of paired rounds (rounds_paired) is read once per run (output tok/s, req/s: derive
 * "value", one sample a round, every round holding it). Such a figure never reaches
 * compare_min_samples' 8 samples short of 8 rounds, yet its rounds' ratios give a Student-t interval
 * from COMPARE_MIN_TIMING_RUNS rounds on. */
static bool per_run_figure(const rec_metric *ma, const rec_metric *mb, int n, const groups *ga, const groups *gb) {
  return ma->derive == RD_VALUE && mb->derive == RD_VALUE && ga->ng == n && gb->ng == n && ga->total == n && gb->total == n;
}

static void compare_metric(const vresults *base, int nb, const vresults *cand, int nc, const vrecord *a,
                           const rec_metric *ma, const cmp_rule *rule, cJSON *mets, tally *t) {
  const double thr = rule->thr;
  groups ga, gb;
  gather(base, nb, a, ma->name, &ga);
  gather(cand, nc, a, ma->name, &gb);
  const vrecord *b = find_rec(&cand[0], a);
  const rec_metric *mb = rec_metric_find(b, ma->name);
  double va = ma->value, vb = mb->value;
  double *buf = malloc((size_t)(ga.total > gb.total ? ga.total : gb.total) * sizeof *buf + sizeof *buf);
  if (buf && ma->derive != RD_RATIO && ga.total > 1) va = pooled_stat(ma->derive, &ga, buf);
  if (buf && mb->derive != RD_RATIO && gb.total > 1) vb = pooled_stat(ma->derive, &gb, buf);
  free(buf);
  double ratio = vb / va, lo = NAN, hi = NAN;
  int need = compare_min_samples(ma->derive);
  bool gated = gated_metric(ma);
  bool enough = testable(ma, mb, &ga, &gb);
  /* a timing of rounds that ran next to each other (vouch ab, the served sweep A/B: nb == nc) */
  const bool rounds_paired = perf_unit(ma->unit) && nb == nc && nb >= COMPARE_MIN_TIMING_RUNS;
  double plo, phi;
  bool paired = false;
  if (rounds_paired && per_run_figure(ma, mb, nb, &ga, &gb)) {
    /* one value per round: the paired rounds' ratios are the figure's only samples, so their t interval
     * is its interval (a bootstrap of 3 values is no interval at all) */
    paired = isfinite(ratio) && paired_ratio(ma->derive, &ga, &gb, nb, rule->alpha, &lo, &hi);
  } else {
    if (enough && isfinite(ratio)) boot_ratio(ma->derive, &ga, &gb, rule->alpha, &lo, &hi);
    /* a timing of paired rounds: the interval covers both the steps' sampling noise (bootstrap)
     * and the drift between rounds (paired t), so a change must stand out of both to count */
    paired = enough && rounds_paired && isfinite(lo) && isfinite(hi) &&
             paired_ratio(ma->derive, &ga, &gb, nb, rule->alpha, &plo, &phi);
    if (paired) {
      lo = fmin(lo, plo);
      hi = fmax(hi, phi);
    }
  }
  bool has_ci = isfinite(lo) && isfinite(hi);
  const char *verdict;
  bool regression = false, perf = perf_unit(ma->unit);
  if (!isfinite(ratio)) verdict = va == vb ? "same" : "n/a"; /* 0 and 0 (failed requests): no ratio, no change */
  else if (!has_ci) {
    verdict = ratio == 1 ? "same" : need == 0 || statistic_of_metric(ma->name) ? "no interval" : "not enough samples";
    if (gated && ratio != 1 && need > 0) t->n_short++;
  } else if (lo <= 1 && hi >= 1) verdict = ma->better == RB_NONE ? "same" : "same-within-noise";
  else if (ma->better == RB_NONE) verdict = "changed";
  else {
    bool improved = ma->better == RB_LOWER ? hi < 1 : lo > 1;
    verdict = improved ? (perf ? "faster" : "better") : (perf ? "slower" : "worse");
    if (!improved && gated) regression = ma->better == RB_LOWER ? lo > 1 + thr : hi < 1 - thr;
  }
  if (regression) t->n_perf++;
  bool too_noisy = gated && has_ci && lo < 1 - thr && hi > 1 + thr;
  t->n_noisy += too_noisy;
  cJSON *m = case_json(a);
  cJSON_AddStringToObject(m, "metric", ma->name);
  cJSON_AddStringToObject(m, "unit", ma->unit);
  cJSON_AddStringToObject(m, "derive", rec_derive_name(ma->derive));
  cJSON_AddStringToObject(m, "better", rec_better_name(ma->better));
  cJSON_AddItemToObject(m, "base", num(va));
  cJSON_AddItemToObject(m, "cand", num(vb));
  cJSON_AddItemToObject(m, "ratio", num(ratio));
  cJSON *ci = cJSON_AddArrayToObject(m, "ci95");
  cJSON_AddItemToArray(ci, num(lo));
  cJSON_AddItemToArray(ci, num(hi));
  cJSON_AddNumberToObject(m, "n_base", ga.total);
  cJSON_AddNumberToObject(m, "n_cand", gb.total);
  cJSON_AddBoolToObject(m, "bootstrap", has_ci);
  cJSON_AddBoolToObject(m, "paired_rounds", paired);
  cJSON_AddBoolToObject(m, "too_noisy", too_noisy);
  cJSON_AddBoolToObject(m, "gated", gated);
  cJSON_AddStringToObject(m, "verdict", verdict);
  cJSON_AddBoolToObject(m, "regression", regression);
  cJSON_AddItemToArray(mets, m);
}

/* Worst status of a case over a side's rounds; a round without it counts as an error. */
static rec_status worst_status(const vresults *side, int nr, const vrecord *key, const char **why, char *buf, size_t cap) {
  const vrecord *r0 = find_rec(&side[0], key);
  rec_status w = r0 ? r0->status : REC_ERROR;
  *why = r0 ? r0->reason : "";
  for (int k = 1; k < nr; k++) {
    const vrecord *x = find_rec(&side[k], key);
    rec_status s = x ? x->status : REC_ERROR;
    if (severity(s) <= severity(w)) continue;
    w = s;
    snprintf(buf, cap, "round %d: %.200s", k + 1, x ? x->reason : "case missing from this round");
    *why = buf;
  }
  return w;
}

static bool results_complete(const vresults *r) {
  const cJSON *c = r->results ? cJSON_GetObjectItemCaseSensitive(r->results, "complete") : NULL;
  return !cJSON_IsFalse(c); /* no results.json object (an in-memory set): complete */
}

/* Manifest m's path_libs entry of path `name` (NULL: none). Untrusted input: fields type-checked. */
static const cJSON *lib_entry(const cJSON *m, const char *name) {
  const cJSON *e, *libs = m ? cJSON_GetObjectItemCaseSensitive(m, "path_libs") : NULL;
  cJSON_ArrayForEach(e, libs) {
    const char *p = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "path"));
    if (p && !strcmp(p, name)) return e;
  }
  return NULL;
}

/* The sha256 of entry e (NULL: no entry, or the file could not be read: sha256 null). */
static const char *lib_sha(const cJSON *e) {
  return e ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "sha256")) : NULL;
}

/* A note per plugin path whose library differs between the sides (another build, or none on one
 * side): expected in an A/B of the library, a warning in a replay that should run the same code. */
static void note_path_libs(const vresults *base, const vresults *cand, cJSON *notes) {
  const cJSON *sides[2] = {base->manifest ? cJSON_GetObjectItemCaseSensitive(base->manifest, "path_libs") : NULL,
                           cand->manifest ? cJSON_GetObjectItemCaseSensitive(cand->manifest, "path_libs") : NULL};
  for (int k = 0; k < 2; k++) {
    const cJSON *e;
    cJSON_ArrayForEach(e, sides[k]) {
      const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "path"));
      const cJSON *ea = name ? lib_entry(base->manifest, name) : NULL, *eb = name ? lib_entry(cand->manifest, name) : NULL;
      if (!name || (k == 1 && ea)) continue; /* on both sides: judged once, from base */
      const char *a = lib_sha(ea), *b = lib_sha(eb);
      if ((a && b && !strcmp(a, b)) || (ea && eb && !a && !b)) continue; /* the same, or unknown on both sides */
      char line[256];
      snprintf(line, sizeof line, "path %.60s: the sides ran different libraries (sha256 %.12s vs %.12s)", name,
               a ? a : "none", b ? b : "none");
      cJSON_AddItemToArray(notes, cJSON_CreateString(line));
    }
  }
}

/* The gated figures both sides hold with enough samples to be tested: the hypotheses a family-wise
 * comparison tests (a figure with too few samples is never a regression, so it is not in the family). */
static int count_gated(const vresults *base, int nb, const vresults *cand, int nc) {
  int m = 0;
  for (int i = 0; i < base[0].n; i++) {
    const vrecord *a = base[0].recs[i], *b = find_rec(&cand[0], a);
    if (!b || (b->status == REC_NOT_RUN && a->status != REC_NOT_RUN)) continue;
    for (int k = 0; k < a->n_metrics; k++) {
      const rec_metric *ma = &a->metrics[k], *mb = rec_metric_find(b, ma->name);
      if (!mb || !gated_metric(ma)) continue;
      groups ga, gb;
      gather(base, nb, a, ma->name, &ga);
      gather(cand, nc, a, ma->name, &gb);
      m += testable(ma, mb, &ga, &gb);
    }
  }
  return m;
}

static cJSON *compare_with(const vresults *base, int nb, const vresults *cand, int nc, double thr, bool family_wise) {
  cmp_rule rule = {.thr = thr, .alpha = 0.05};
  const int family = family_wise ? count_gated(base, nb, cand, nc) : 1;
  if (family > 1) rule.alpha = 0.05 / family;
  cJSON *out = cJSON_CreateObject();
  cJSON_AddNumberToObject(out, "threshold", thr);
  /* each figure's interval: 95 %, or family-wise (Bonferroni: 1 - 0.05 / the number of gated figures) */
  cJSON_AddNumberToObject(out, "interval_confidence", 1.0 - rule.alpha);
  cJSON_AddNumberToObject(out, "gated_family", family_wise ? family : 0);
  cJSON *rounds = cJSON_AddObjectToObject(out, "rounds");
  cJSON_AddNumberToObject(rounds, "base", nb);
  cJSON_AddNumberToObject(rounds, "cand", nc);
  cJSON *problems = cJSON_AddArrayToObject(out, "problems");
  cJSON *notes = cJSON_AddArrayToObject(out, "notes");
  cJSON *corr = cJSON_AddArrayToObject(out, "correctness");
  cJSON *missing = cJSON_AddArrayToObject(out, "missing");
  cJSON *added = cJSON_AddArrayToObject(out, "added");
  cJSON *mets = cJSON_AddArrayToObject(out, "metrics");
  int n_corr = 0, n_err = 0;
  tally t = {0};
  char why_buf[256];
  for (int i = 0; i < base[0].n; i++) {
    const vrecord *a = base[0].recs[i], *b = find_rec(&cand[0], a);
    /* a case the candidate planned and did not run (an interrupted step) is missing there too */
    if (!b || (b->status == REC_NOT_RUN && a->status != REC_NOT_RUN)) { cJSON_AddItemToArray(missing, case_json(a)); continue; }
    const char *wa, *wb;
    char why_a[256];
    rec_status sa = worst_status(base, nb, a, &wa, why_a, sizeof why_a);
    rec_status sb = worst_status(cand, nc, a, &wb, why_buf, sizeof why_buf);
    if (sa != sb) {
      cJSON *c = case_json(a);
      cJSON_AddStringToObject(c, "base", rec_status_name(sa));
      cJSON_AddStringToObject(c, "cand", rec_status_name(sb));
      const char *kind = is_bad(sb) && !is_bad(sa) ? "regression" : is_bad(sa) && sb == REC_PASS ? "fixed" : "changed";
      cJSON_AddStringToObject(c, "kind", kind);
      cJSON_AddStringToObject(c, "reason", wb);
      if (!strcmp(kind, "regression")) n_corr++;
      cJSON_AddItemToArray(corr, c);
    }
    n_err += sb == REC_ERROR;
    for (int k = 0; k < a->n_metrics; k++)
      if (rec_metric_find(b, a->metrics[k].name)) compare_metric(base, nb, cand, nc, a, &a->metrics[k], &rule, mets, &t);
  }
  for (int i = 0; i < cand[0].n; i++) {
    const vrecord *b = cand[0].recs[i];
    if (find_rec(&base[0], b)) continue;
    cJSON_AddItemToArray(added, case_json(b));
    n_err += b->status == REC_ERROR;
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
  int inc_c = 0, inc_b = 0;
  for (int k = 0; k < nc; k++) inc_c += !results_complete(&cand[k]);
  for (int k = 0; k < nb; k++) inc_b += !results_complete(&base[k]);
  int nm = cJSON_GetArraySize(missing);
  char line[256];
  if (inc_c) {
    snprintf(line, sizeof line, "candidate incomplete: %d of %d run(s) did not finish (interrupted or crashed)", inc_c, nc);
    cJSON_AddItemToArray(problems, cJSON_CreateString(line));
  }
  if (n_err) {
    snprintf(line, sizeof line, "candidate errored: %d case(s) could not run (status error)", n_err);
    cJSON_AddItemToArray(problems, cJSON_CreateString(line));
  }
  if (nm) {
    snprintf(line, sizeof line, "candidate lacks %d of the baseline's %d cases", nm, base[0].n);
    cJSON_AddItemToArray(problems, cJSON_CreateString(line));
  }
  note_path_libs(&base[0], &cand[0], notes);
  if (inc_b) {
    snprintf(line, sizeof line, "baseline incomplete: %d of %d run(s) did not finish", inc_b, nb);
    cJSON_AddItemToArray(notes, cJSON_CreateString(line));
  }
  if (t.n_short) {
    snprintf(line, sizeof line, "%d gated figure(s) differ but have too few samples to test (not enough samples, not a "
             "regression; timings need %d rounds a side: vouch ab)", t.n_short, COMPARE_MIN_TIMING_RUNS);
    cJSON_AddItemToArray(notes, cJSON_CreateString(line));
  }
  if (t.n_noisy) {
    snprintf(line, sizeof line, "%d gated figure(s) too noisy to judge a %.1f%% change (their interval reaches past "
             "both 1 - threshold and 1 + threshold): more rounds, or a quieter machine", t.n_noisy, 100 * thr);
    cJSON_AddItemToArray(notes, cJSON_CreateString(line));
  }
  cJSON_AddNumberToObject(out, "correctness_regressions", n_corr);
  cJSON_AddNumberToObject(out, "perf_regressions", t.n_perf);
  cJSON_AddNumberToObject(out, "regressions", n_corr + t.n_perf);
  cJSON_AddNumberToObject(out, "not_enough_samples", t.n_short);
  cJSON_AddNumberToObject(out, "too_noisy", t.n_noisy);
  int np = cJSON_GetArraySize(problems), reg = n_corr + t.n_perf;
  char head[512];
  if (np)
    snprintf(head, sizeof head, "%s%s%s", inc_c ? "INCOMPLETE: " : n_err ? "ERRORED: " : "MISSING CASES: ",
             cJSON_GetArrayItem(problems, 0)->valuestring, reg ? " (and regressions below)" : "");
  else if (reg)
    snprintf(head, sizeof head, "REGRESSION: %d correctness, %d performance beyond %.1f%%", n_corr, t.n_perf, 100 * thr);
  else
    snprintf(head, sizeof head, "No regression: %d case(s) compared, threshold %.1f%%", base[0].n, 100 * thr);
  cJSON_AddStringToObject(out, "headline", head);
  cJSON_AddBoolToObject(out, "failed", np > 0 || reg > 0);
  return out;
}

cJSON *compare_rounds(const vresults *base, int nb, const vresults *cand, int nc, double thr) {
  return compare_with(base, nb, cand, nc, thr, false);
}

cJSON *compare_rounds_family(const vresults *base, int nb, const vresults *cand, int nc, double thr) {
  return compare_with(base, nb, cand, nc, thr, true);
}

cJSON *compare_results(const vresults *base, const vresults *cand, double thr) {
  return compare_rounds(base, 1, cand, 1, thr);
}

bool compare_failed(const cJSON *cmp) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cmp, "failed")); }

static const char *s(const cJSON *o, const char *k) {
  const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
  return v ? v : "";
}
static double d(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}
static double ci_at(const cJSON *e, int i) {
  const cJSON *v = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(e, "ci95"), i);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void metric_line(const cJSON *e, FILE *out, const char *pre) {
  double lo = ci_at(e, 0), hi = ci_at(e, 1);
  char ci[64] = "(no interval)";
  if (isfinite(lo)) snprintf(ci, sizeof ci, "[%.4f, %.4f]", lo, hi);
  fprintf(out, "%s%s/%s [%s] %s (%s): %.6g -> %.6g %s  x%.4f %s  %s%s\n", pre, s(e, "suite"), s(e, "case_id"),
          s(e, "path"), s(e, "metric"), s(e, "derive"), d(e, "base"), d(e, "cand"), s(e, "unit"), d(e, "ratio"), ci,
          s(e, "verdict"), cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "regression")) ? "  REGRESSION" : "");
}

/* An "equal" figure: the same value on both sides (or nothing to compare). */
static bool metric_equal(const cJSON *e) { return !strcmp(s(e, "verdict"), "same") || !strcmp(s(e, "verdict"), "n/a"); }

/* Every status change, missing or added case and figure; with changed_only the equal figures are
 * counted in the metrics header, not listed. */
static void listing(const cJSON *cmp, FILE *out, bool changed_only) {
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
  int equal = 0;
  if (changed_only) cJSON_ArrayForEach(e, mets) equal += metric_equal(e);
  const cJSON *conf = cJSON_GetObjectItemCaseSensitive(cmp, "interval_confidence");
  const double level = cJSON_IsNumber(conf) ? 100 * conf->valuedouble : 95;
  fprintf(out, "== metrics (%d), ratio = candidate / base, %.4g%% bootstrap interval of that figure's ratio%s\n",
          cJSON_GetArraySize(mets), level, level > 95.0001 ? " (family-wise 95 % over the gated figures)" : "");
  if (equal) fprintf(out, "  (%d equal on both sides, not listed: `vouch compare` lists them)\n", equal);
  cJSON_ArrayForEach(e, mets)
    if (!changed_only || !metric_equal(e)) metric_line(e, out, "  ");
}

static void problems_and_notes(const cJSON *cmp, FILE *out, const char *bullet) {
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cmp, "problems")) fprintf(out, "%sproblem: %s\n", bullet, e->valuestring);
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cmp, "notes")) fprintf(out, "%snote: %s\n", bullet, e->valuestring);
}

void compare_print(const cJSON *cmp, FILE *out) {
  fprintf(out, "%s\n", s(cmp, "headline"));
  problems_and_notes(cmp, out, "  ");
  listing(cmp, out, false);
  fprintf(out, "== %d correctness regression(s), %d performance regression(s) beyond %.1f%%, %d problem(s)\n",
          (int)d(cmp, "correctness_regressions"), (int)d(cmp, "perf_regressions"), 100 * d(cmp, "threshold"),
          cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cmp, "problems")));
}

/* Writes text[0..n) to out, cut at the last line end within `budget` characters; returns the
 * number of lines left out. */
static int write_lines_within(const char *text, size_t n, size_t budget, FILE *out) {
  size_t keep = n;
  if (n > budget) {
    keep = budget;
    while (keep > 0 && text[keep - 1] != '\n') keep--;
  }
  fwrite(text, 1, keep, out);
  int cut = 0;
  for (size_t i = keep; i < n; i++) cut += text[i] == '\n';
  return cut;
}

void compare_markdown(const cJSON *cmp, FILE *out, size_t limit) {
  char *head = NULL, *body = NULL;
  size_t nh = 0, nb = 0;
  FILE *h = open_memstream(&head, &nh), *b = open_memstream(&body, &nb);
  if (!h || !b) { /* out of memory: the headline alone still says the verdict */
    if (h) fclose(h);
    if (b) fclose(b);
    free(head);
    free(body);
    fprintf(out, "**%s**\n", s(cmp, "headline"));
    return;
  }
  fprintf(h, "**%s**\n\n", s(cmp, "headline"));
  problems_and_notes(cmp, h, "- ");
  const cJSON *e;
  int shown = 0;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cmp, "correctness"))
    if (!strcmp(s(e, "kind"), "regression") && shown++ < 50)
      fprintf(h, "- correctness regression: `%s/%s` [%s]: %s -> %s: %s\n", s(e, "suite"), s(e, "case_id"), s(e, "path"),
              s(e, "base"), s(e, "cand"), s(e, "reason"));
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cmp, "metrics"))
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "regression")) && shown++ < 100) {
      fprintf(h, "- performance regression: ");
      metric_line(e, h, "");
    }
  fprintf(h, "\n%d correctness regression(s), %d performance regression(s) beyond %.1f%%; %d figure(s) with too few "
          "samples to test.\n\n<details><summary>what changed (candidate / base)</summary>\n\n```text\n",
          (int)d(cmp, "correctness_regressions"), (int)d(cmp, "perf_regressions"), 100 * d(cmp, "threshold"),
          (int)d(cmp, "not_enough_samples"));
  listing(cmp, b, true);
  fclose(h);
  fclose(b);
  static const char foot[] = "```\n\n</details>\n";
  /* room for the footer and the line that says what was cut */
  size_t reserve = sizeof foot + 200, budget = limit > reserve ? limit - reserve : 0;
  if (!limit) budget = nh + nb;
  int cut_head = write_lines_within(head, nh, budget, out);
  if (cut_head) fprintf(out, "... %d more line(s) of regressions not shown\n\n<details><summary>what changed</summary>\n\n```text\n", cut_head);
  size_t used = nh < budget ? nh : budget;
  int cut = write_lines_within(body, nb, budget > used ? budget - used : 0, out);
  if (cut)
    fprintf(out, "... %d more line(s) not shown: a comment holds %zu characters; `vouch compare --json` lists every figure\n",
            cut, limit);
  fputs(foot, out);
  free(head);
  free(body);
}
