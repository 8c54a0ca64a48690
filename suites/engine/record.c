/* The record model: building, deriving, JSON in and out, re-derivation checks. */
#include "suites/engine/record.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"

static const char *k_status[] = {"pass", "fail", "not_supported", "error", "not_run", "undecided"};
static const char *k_derive[] = {"value", "median", "mean", "p90", "p99",
                                 "stable_mean", "ratio", "max", "min"};
static const char *k_better[] = {"none", "lower", "higher"};

const char *rec_status_name(rec_status s) { return (unsigned)s < REC_STATUS_N ? k_status[s] : "?"; }
const char *rec_derive_name(rec_derive d) { return (unsigned)d < RD_N ? k_derive[d] : "?"; }
const char *rec_better_name(rec_better b) { return (unsigned)b <= RB_HIGHER ? k_better[b] : "?"; }

static int parse_in(const char *s, const char *const *names, int n) {
  if (!s) return -1;
  for (int i = 0; i < n; i++)
    if (!strcmp(s, names[i])) return i;
  return -1;
}
int rec_status_parse(const char *s) { return parse_in(s, k_status, REC_STATUS_N); }
int rec_derive_parse(const char *s) { return parse_in(s, k_derive, RD_N); }
int rec_better_parse(const char *s) { return parse_in(s, k_better, 3); }

/* Copies src into a fixed field; fails when it does not fit. */
static vstatus set_field(char *dst, size_t cap, const char *src, const char *what) {
  if (!src) src = "";
  size_t n = strlen(src);
  if (n >= cap) return VERR("record: field '%s': '%.40s...' longer than %zu bytes", what, src, cap - 1);
  memcpy(dst, src, n + 1);
  return V_OK;
}

vrecord *rec_new(const char *suite, const char *case_id, const char *path) {
  vrecord *r = vcalloc(1, sizeof *r, "record");
  if (!r) return NULL;
  r->params = cJSON_CreateObject();
  if (!r->params || set_field(r->suite, sizeof r->suite, suite, "suite") ||
      set_field(r->case_id, sizeof r->case_id, case_id, "case_id") ||
      set_field(r->path, sizeof r->path, path, "path")) {
    if (!r->params) VERR("record: out of memory for params");
    rec_free(r);
    return NULL;
  }
  r->status = REC_PASS;
  return r;
}

void rec_free(vrecord *r) {
  if (!r) return;
  for (int i = 0; i < r->n_metrics; i++) free(r->metrics[i].samples);
  free(r->metrics);
  free(r->checks);
  cJSON_Delete(r->params);
  cJSON_Delete(r->ran);
  cJSON_Delete(r->fallbacks);
  free(r);
}

static vstatus param_set(vrecord *r, const char *key, cJSON *v) {
  if (!v) return VERR("record %s/%s: param '%s': out of memory", r->suite, r->case_id, key);
  cJSON_DeleteItemFromObjectCaseSensitive(r->params, key);
  if (!cJSON_AddItemToObject(r->params, key, v)) {
    cJSON_Delete(v);
    return VERR("record %s/%s: param '%s': cannot add", r->suite, r->case_id, key);
  }
  return V_OK;
}
vstatus rec_param_int(vrecord *r, const char *key, int64_t v) { return param_set(r, key, cJSON_CreateNumber((double)v)); }
vstatus rec_param_num(vrecord *r, const char *key, double v) { return param_set(r, key, cJSON_CreateNumber(v)); }
vstatus rec_param_str(vrecord *r, const char *key, const char *v) { return param_set(r, key, cJSON_CreateString(v ? v : "")); }

static vstatus metric_new(vrecord *r, const char *name, const char *unit, rec_metric **out) {
  if (rec_metric_find(r, name))
    return VERR("record %s/%s: metric '%s': added twice", r->suite, r->case_id, name);
  if (r->n_metrics == r->cap_metrics) {
    int cap = r->cap_metrics ? 2 * r->cap_metrics : 4;
    rec_metric *m = realloc(r->metrics, (size_t)cap * sizeof *m);
    if (!m) return VERR("record %s/%s: out of memory for metrics", r->suite, r->case_id);
    r->metrics = m;
    r->cap_metrics = cap;
  }
  rec_metric *m = &r->metrics[r->n_metrics];
  memset(m, 0, sizeof *m);
  VTRY(set_field(m->name, sizeof m->name, name, "metrics.name"));
  VTRY(set_field(m->unit, sizeof m->unit, unit, "metrics.unit"));
  m->value = NAN;
  r->n_metrics++;
  *out = m;
  return V_OK;
}

vstatus rec_metric_samples(vrecord *r, const char *name, const char *unit, rec_derive d,
                           rec_better b, const double *samples, int n, int warmup) {
  if ((unsigned)d >= RD_N || d == RD_RATIO)
    return VERR("record %s/%s: metric '%s': derive must be a sample statistic", r->suite, r->case_id, name);
  if (n < 0 || (d == RD_VALUE && n != 1))
    return VERR("record %s/%s: metric '%s': derive 'value' needs exactly 1 sample, got %d", r->suite, r->case_id, name, n);
  if (warmup < 0) return VERR("record %s/%s: metric '%s': negative warmup", r->suite, r->case_id, name);
  rec_metric *m = NULL; /* set by metric_new on success (gcc -O3 cannot see it) */
  VTRY(metric_new(r, name, unit, &m));
  m->derive = d;
  m->better = b;
  m->warmup = d == RD_STABLE_MEAN ? warmup : 0;
  if (n > 0) {
    m->samples = vmalloc((size_t)n * sizeof(double), "metric samples");
    if (!m->samples) { r->n_metrics--; return V_ERR; }
    memcpy(m->samples, samples, (size_t)n * sizeof(double));
  }
  m->n_samples = n;
  m->value = rec_stat_derive(d, m->samples, n, m->warmup);
  return V_OK;
}

vstatus rec_metric_value(vrecord *r, const char *name, const char *unit, rec_better b, double v) {
  return rec_metric_samples(r, name, unit, RD_VALUE, b, &v, 1, 0);
}

vstatus rec_metric_ratio(vrecord *r, const char *name, const char *unit, rec_better b,
                         const char *num, const char *den) {
  rec_metric *m = NULL;
  VTRY(metric_new(r, name, unit, &m));
  m->derive = RD_RATIO;
  m->better = b;
  VTRY(set_field(m->num, sizeof m->num, num, "metrics.of[0]"));
  VTRY(set_field(m->den, sizeof m->den, den, "metrics.of[1]"));
  return V_OK;
}

static bool op_valid(const char *op) {
  return op && (!strcmp(op, "<=") || !strcmp(op, "<") || !strcmp(op, ">=") || !strcmp(op, ">") || !strcmp(op, "=="));
}

vstatus rec_set_threshold(vrecord *r, const char *metric, const char *op, double bound) {
  if (!op_valid(op)) return VERR("record %s/%s: threshold.op: '%s' is not one of <= < >= > ==", r->suite, r->case_id, op ? op : "(null)");
  VTRY(set_field(r->th_metric, sizeof r->th_metric, metric, "threshold.metric"));
  strcpy(r->th_op, op);
  r->th_bound = bound;
  r->has_threshold = true;
  return V_OK;
}

vstatus rec_check_add(vrecord *r, const char *name, bool ok) {
  if (r->n_checks == r->cap_checks) {
    int cap = r->cap_checks ? 2 * r->cap_checks : 4;
    rec_check *c = realloc(r->checks, (size_t)cap * sizeof *c);
    if (!c) return VERR("record %s/%s: out of memory for checks", r->suite, r->case_id);
    r->checks = c;
    r->cap_checks = cap;
  }
  rec_check *c = &r->checks[r->n_checks];
  VTRY(set_field(c->name, sizeof c->name, name, "checks.name"));
  c->ok = ok;
  r->n_checks++;
  return V_OK;
}

void rec_set_status(vrecord *r, rec_status s, const char *reason) {
  r->status = s;
  snprintf(r->reason, sizeof r->reason, "%s", reason ? reason : "");
  /* a failure the suite decided itself is kept as a failed check, so that
   * rec_finalize and verify re-derive the same status */
  if (s == REC_FAIL) {
    char name[64];
    snprintf(name, sizeof name, "%s", reason && reason[0] ? reason : "suite check");
    if (rec_check_add(r, name, false)) verr_clear();
  }
}

const rec_metric *rec_metric_find(const vrecord *r, const char *name) {
  for (int i = 0; i < r->n_metrics; i++)
    if (!strcmp(r->metrics[i].name, name)) return &r->metrics[i];
  return NULL;
}

/* ---------------- statistics ---------------- */

/* Puts the k-th smallest of s[0..n-1] (no NaN) at s[k], the smaller ones before it and the larger
 * after it (Hoare's selection, median-of-three pivot): O(n) on average where a sort is O(n log n). A
 * bootstrap takes a median or percentile of each of up to 20,000 resamples of ~10^4 inter-token
 * latencies, so this is the cost of a served A/B's comparison. */
static void select_kth(double *s, int n, int k) {
  int lo = 0, hi = n - 1;
  while (hi > lo) {
    int mid = lo + (hi - lo) / 2;
    if (s[mid] < s[lo]) { double t = s[mid]; s[mid] = s[lo]; s[lo] = t; }
    if (s[hi] < s[lo]) { double t = s[hi]; s[hi] = s[lo]; s[lo] = t; }
    if (s[hi] < s[mid]) { double t = s[hi]; s[hi] = s[mid]; s[mid] = t; }
    const double pivot = s[mid];
    int i = lo, j = hi;
    while (i <= j) {
      while (s[i] < pivot) i++;
      while (s[j] > pivot) j--;
      if (i <= j) { double t = s[i]; s[i] = s[j]; s[j] = t; i++; j--; }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return; /* j < k < i: s[k] equals the pivot and sits in place */
  }
}

/* The order statistics k and k + 1 (k + 1 clamped to n - 1) of s[0..n-1] (no NaN, n >= 1), exactly
 * as a sorted copy would hold them; s is reordered (scratch the caller owns). */
static void order_pair_in(double *s, int n, int k, double *vk, double *vk1) {
  select_kth(s, n, k);
  *vk = s[k];
  double next = s[k];
  if (k + 1 < n) {
    next = s[k + 1];
    for (int i = k + 2; i < n; i++) next = s[i] < next ? s[i] : next; /* all after k are >= s[k] */
  }
  *vk1 = next;
}

/* order_pair_in on a copy of x; false when memory runs out. */
static bool order_pair(const double *x, int n, int k, double *vk, double *vk1) {
  double *s = malloc((size_t)n * sizeof *s);
  if (!s) return false;
  memcpy(s, x, (size_t)n * sizeof *s);
  order_pair_in(s, n, k, vk, vk1);
  free(s);
  return true;
}

static bool any_nan(const double *x, int n) {
  for (int i = 0; i < n; i++)
    if (isnan(x[i])) return true;
  return false;
}

double rec_stat_t975(int df) {
  static const double t[31] = {NAN,   12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                               2.201, 2.179,  2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080,
                               2.074, 2.069,  2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  assert(df >= 1);
  if (df <= 30) return t[df];
  const double z = 1.959964, z3 = z * z * z, z5 = z3 * z * z, v = df;
  return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v);
}

double rec_stat_percentile(const double *x, int n, double p) {
  if (n <= 0 || any_nan(x, n)) return NAN;
  double pos = p / 100.0 * (n - 1);
  int lo = (int)floor(pos);
  if (lo < 0) lo = 0;
  if (lo > n - 1) lo = n - 1;
  double a, b;
  if (!order_pair(x, n, lo, &a, &b)) return NAN;
  return a + (b - a) * (pos - lo);
}

double rec_stat_median(const double *x, int n) {
  if (n <= 0 || any_nan(x, n)) return NAN;
  double a, b;
  if (!order_pair(x, n, n % 2 ? n / 2 : n / 2 - 1, &a, &b)) return NAN;
  return n % 2 ? a : 0.5 * (a + b);
}

double rec_stat_mean(const double *x, int n) {
  if (n <= 0) return NAN;
  double sum = 0;
  for (int i = 0; i < n; i++) sum += x[i];
  return sum / n;
}

double rec_stat_stable_mean(const double *x, int n, int warmup) {
  if (warmup < 0) warmup = 0;
  if (n - warmup <= 0) return NAN;
  const double *y = x + warmup;
  int m = n - warmup;
  double med = rec_stat_median(y, m);
  if (isnan(med)) return NAN;
  double *dev = malloc((size_t)m * sizeof *dev);
  if (!dev) return NAN;
  for (int i = 0; i < m; i++) dev[i] = fabs(y[i] - med);
  double mad = rec_stat_median(dev, m);
  double sum = 0;
  int kept = 0;
  for (int i = 0; i < m; i++)
    if (dev[i] <= 5.0 * mad) { sum += y[i]; kept++; }
  free(dev);
  return kept ? sum / kept : NAN;
}

double rec_stat_derive(rec_derive d, const double *x, int n, int warmup) {
  switch (d) {
  case RD_VALUE: return n == 1 ? x[0] : NAN;
  case RD_MEDIAN: return rec_stat_median(x, n);
  case RD_MEAN: return rec_stat_mean(x, n);
  case RD_P90: return rec_stat_percentile(x, n, 90);
  case RD_P99: return rec_stat_percentile(x, n, 99);
  case RD_STABLE_MEAN: return rec_stat_stable_mean(x, n, warmup);
  case RD_MAX: return n > 0 ? rec_stat_percentile(x, n, 100) : NAN;
  case RD_MIN: return n > 0 ? rec_stat_percentile(x, n, 0) : NAN;
  default: return NAN;
  }
}

uint64_t rec_rng_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* The median of n draws with replacement from x (no NaN) into buf[n], by selection (the value a
 * sort gives, in O(n)). */
static double resample_median(const double *x, int n, double *buf, uint64_t *rng) {
  for (int i = 0; i < n; i++) buf[i] = x[rec_rng_next(rng) % (uint64_t)n];
  double a, b;
  order_pair_in(buf, n, n % 2 ? n / 2 : n / 2 - 1, &a, &b);
  return n % 2 ? a : 0.5 * (a + b);
}

double rec_bootstrap_ratio(const double *a, int na, const double *b, int nb, int iters,
                           uint64_t seed, double *lo, double *hi) {
  double ma = rec_stat_median(a, na), mb = rec_stat_median(b, nb);
  double point = mb / ma;
  *lo = *hi = point;
  if (na < 2 || nb < 2 || iters < 10 || isnan(point)) return point;
  double *ba = malloc((size_t)na * sizeof *ba), *bb = malloc((size_t)nb * sizeof *bb);
  double *rs = malloc((size_t)iters * sizeof *rs);
  if (!ba || !bb || !rs) { free(ba); free(bb); free(rs); return point; }
  uint64_t rng = seed;
  for (int it = 0; it < iters; it++) {
    double ra = resample_median(a, na, ba, &rng);
    double rb = resample_median(b, nb, bb, &rng);
    rs[it] = rb / ra;
  }
  *lo = rec_stat_percentile(rs, iters, 2.5);
  *hi = rec_stat_percentile(rs, iters, 97.5);
  free(ba); free(bb); free(rs);
  return point;
}

/* ---------------- finalize ---------------- */

static bool threshold_holds(double v, const char *op, double bound) {
  if (isnan(v)) return false;
  if (!strcmp(op, "<=")) return v <= bound;
  if (!strcmp(op, "<")) return v < bound;
  if (!strcmp(op, ">=")) return v >= bound;
  if (!strcmp(op, ">")) return v > bound;
  return v == bound;
}

/* Derived value of metric i, given samples (ratios use the others' derived values). */
static vstatus derive_all(const vrecord *r, double *vals) {
  for (int i = 0; i < r->n_metrics; i++) {
    const rec_metric *m = &r->metrics[i];
    vals[i] = m->derive == RD_RATIO ? NAN : rec_stat_derive(m->derive, m->samples, m->n_samples, m->warmup);
  }
  for (int i = 0; i < r->n_metrics; i++) {
    const rec_metric *m = &r->metrics[i];
    if (m->derive != RD_RATIO) continue;
    const rec_metric *n = rec_metric_find(r, m->num), *d = rec_metric_find(r, m->den);
    if (!n || !d || n->derive == RD_RATIO || d->derive == RD_RATIO)
      return VERR("record %s/%s: metric '%s': ratio of '%s'/'%s' needs two sample metrics of the same record",
                  r->suite, r->case_id, m->name, m->num, m->den);
    vals[i] = vals[n - r->metrics] / vals[d - r->metrics];
  }
  return V_OK;
}

/* Status implied by threshold + checks; writes a reason for a failure. */
static rec_status derive_status(const vrecord *r, const double *vals, char *reason, size_t cap) {
  if (r->status != REC_PASS && r->status != REC_FAIL) return r->status;
  if (r->has_threshold) {
    const rec_metric *m = rec_metric_find(r, r->th_metric);
    if (!m) {
      snprintf(reason, cap, "threshold metric '%s' missing", r->th_metric);
      return REC_FAIL;
    }
    double v = vals[m - r->metrics];
    if (!threshold_holds(v, r->th_op, r->th_bound)) {
      snprintf(reason, cap, "%s = %.6g %s, bound %s %.6g", m->name, v, m->unit, r->th_op, r->th_bound);
      return REC_FAIL;
    }
  }
  for (int i = 0; i < r->n_checks; i++)
    if (!r->checks[i].ok) {
      snprintf(reason, cap, "check '%s' failed", r->checks[i].name);
      return REC_FAIL;
    }
  return REC_PASS;
}

vstatus rec_finalize(vrecord *r) {
  double *vals = vmalloc((size_t)(r->n_metrics ? r->n_metrics : 1) * sizeof *vals, "metric values");
  if (!vals) return V_ERR;
  vstatus s = derive_all(r, vals);
  if (s == V_OK) {
    for (int i = 0; i < r->n_metrics; i++) r->metrics[i].value = vals[i];
    char reason[256] = "";
    rec_status st = derive_status(r, vals, reason, sizeof reason);
    if (r->status == REC_PASS || r->status == REC_FAIL) {
      if (st == REC_FAIL && (r->status == REC_PASS || !r->reason[0])) snprintf(r->reason, sizeof r->reason, "%s", reason);
      if (st == REC_PASS) r->reason[0] = 0;
      r->status = st;
    }
  }
  free(vals);
  return s;
}

/* ---------------- JSON ---------------- */

static cJSON *num_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

cJSON *rec_to_json(const vrecord *r) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return NULL;
  cJSON_AddStringToObject(j, "suite", r->suite);
  cJSON_AddStringToObject(j, "case_id", r->case_id);
  cJSON_AddStringToObject(j, "path", r->path);
  cJSON_AddItemToObject(j, "params", r->params ? cJSON_Duplicate(r->params, 1) : cJSON_CreateObject());
  cJSON *ms = cJSON_AddArrayToObject(j, "metrics");
  for (int i = 0; i < r->n_metrics; i++) {
    const rec_metric *m = &r->metrics[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", m->name);
    cJSON_AddStringToObject(o, "unit", m->unit);
    cJSON_AddItemToObject(o, "value", num_or_null(m->value));
    cJSON_AddStringToObject(o, "derive", rec_derive_name(m->derive));
    cJSON_AddStringToObject(o, "better", rec_better_name(m->better));
    if (m->derive == RD_STABLE_MEAN) cJSON_AddNumberToObject(o, "warmup", m->warmup);
    if (m->derive == RD_RATIO) {
      cJSON *of = cJSON_AddArrayToObject(o, "of");
      cJSON_AddItemToArray(of, cJSON_CreateString(m->num));
      cJSON_AddItemToArray(of, cJSON_CreateString(m->den));
    }
    cJSON *s = cJSON_AddArrayToObject(o, "samples");
    for (int k = 0; k < m->n_samples; k++) cJSON_AddItemToArray(s, num_or_null(m->samples[k]));
    cJSON_AddItemToArray(ms, o);
  }
  if (r->has_threshold) {
    cJSON *t = cJSON_AddObjectToObject(j, "threshold");
    cJSON_AddStringToObject(t, "metric", r->th_metric);
    cJSON_AddStringToObject(t, "op", r->th_op);
    cJSON_AddItemToObject(t, "bound", num_or_null(r->th_bound));
  } else {
    cJSON_AddNullToObject(j, "threshold");
  }
  cJSON *cs = cJSON_AddArrayToObject(j, "checks");
  for (int i = 0; i < r->n_checks; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->checks[i].name);
    cJSON_AddBoolToObject(o, "ok", r->checks[i].ok);
    cJSON_AddItemToArray(cs, o);
  }
  cJSON_AddStringToObject(j, "status", rec_status_name(r->status));
  cJSON_AddStringToObject(j, "reason", r->reason);
  if (r->trace_ref[0]) cJSON_AddStringToObject(j, "trace_ref", r->trace_ref);
  else cJSON_AddNullToObject(j, "trace_ref");
  if (r->ran) cJSON_AddItemToObject(j, "ran", cJSON_Duplicate(r->ran, 1));
  if (r->fallbacks) cJSON_AddItemToObject(j, "fallbacks", cJSON_Duplicate(r->fallbacks, 1));
  return j;
}

static vstatus get_str(const cJSON *j, const char *key, const char *where, bool nullable, const char **out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  if (nullable && (!v || cJSON_IsNull(v))) { *out = ""; return V_OK; }
  if (!cJSON_IsString(v)) return VERR("%s: field '%s': missing or not a string", where, key);
  *out = v->valuestring;
  return V_OK;
}

static vstatus get_num(const cJSON *v, const char *where, const char *key, double *out) {
  if (cJSON_IsNull(v)) { *out = NAN; return V_OK; }
  if (!cJSON_IsNumber(v)) return VERR("%s: field '%s': not a number or null", where, key);
  *out = v->valuedouble;
  return V_OK;
}

static vstatus metric_from_json(vrecord *r, const cJSON *o, const char *where) {
  if (!cJSON_IsObject(o)) return VERR("%s: not an object", where);
  const char *name = NULL, *unit = NULL, *ds = NULL, *bs = NULL; /* set by get_str on success */
  VTRY(get_str(o, "name", where, false, &name));
  VTRY(get_str(o, "unit", where, false, &unit));
  VTRY(get_str(o, "derive", where, false, &ds));
  VTRY(get_str(o, "better", where, false, &bs));
  int d = rec_derive_parse(ds), b = rec_better_parse(bs);
  if (d < 0) return VERR("%s: field 'derive': unknown '%s'", where, ds);
  if (b < 0) return VERR("%s: field 'better': unknown '%s'", where, bs);
  double value = 0;
  const cJSON *vj = cJSON_GetObjectItemCaseSensitive(o, "value");
  if (!vj) return VERR("%s: field 'value': missing", where);
  VTRY(get_num(vj, where, "value", &value));
  const cJSON *sj = cJSON_GetObjectItemCaseSensitive(o, "samples");
  if (!cJSON_IsArray(sj)) return VERR("%s: field 'samples': missing or not an array", where);
  rec_metric *m;
  if (d == RD_RATIO) {
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(o, "of");
    if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 || !cJSON_IsString(cJSON_GetArrayItem(of, 0)) ||
        !cJSON_IsString(cJSON_GetArrayItem(of, 1)))
      return VERR("%s: field 'of': a ratio needs [numerator, denominator] metric names", where);
    if (cJSON_GetArraySize(sj) != 0) return VERR("%s: field 'samples': a ratio has no samples", where);
    VTRY(rec_metric_ratio(r, name, unit, (rec_better)b, cJSON_GetArrayItem(of, 0)->valuestring,
                          cJSON_GetArrayItem(of, 1)->valuestring));
    m = &r->metrics[r->n_metrics - 1];
  } else {
    int n = cJSON_GetArraySize(sj);
    double *s = vmalloc((size_t)(n ? n : 1) * sizeof *s, "samples");
    if (!s) return V_ERR;
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, sj) {
      if (get_num(e, where, "samples[]", &s[k])) { free(s); return V_ERR; }
      k++;
    }
    int warmup = 0;
    const cJSON *wj = cJSON_GetObjectItemCaseSensitive(o, "warmup");
    if (d == RD_STABLE_MEAN) {
      /* range first: (int) of a double outside int's range is undefined */
      if (!cJSON_IsNumber(wj) || !(wj->valuedouble >= 0 && wj->valuedouble <= 2147483647.0) ||
          wj->valuedouble != floor(wj->valuedouble)) {
        free(s);
        return VERR("%s: field 'warmup': stable_mean needs a non-negative integer below 2^31", where);
      }
      warmup = (int)wj->valuedouble;
    }
    vstatus st = rec_metric_samples(r, name, unit, (rec_derive)d, (rec_better)b, s, n, warmup);
    free(s);
    if (st) { verr_prefix("%s", where); return st; }
    m = &r->metrics[r->n_metrics - 1];
  }
  m->value = value; /* keep the stored figure; rec_rederive_check compares */
  return V_OK;
}

vstatus rec_from_json(const cJSON *j, const char *where, vrecord **out) {
  *out = NULL;
  if (!cJSON_IsObject(j)) return VERR("%s: not an object", where);
  const char *suite = NULL, *case_id = NULL, *path = NULL, *status = NULL, *reason = NULL, *trace = NULL;
  VTRY(get_str(j, "suite", where, false, &suite));
  VTRY(get_str(j, "case_id", where, false, &case_id));
  VTRY(get_str(j, "path", where, false, &path));
  VTRY(get_str(j, "status", where, false, &status));
  VTRY(get_str(j, "reason", where, false, &reason));
  VTRY(get_str(j, "trace_ref", where, true, &trace));
  int st = rec_status_parse(status);
  if (st < 0) return VERR("%s: field 'status': unknown '%s'", where, status);
  const cJSON *params = cJSON_GetObjectItemCaseSensitive(j, "params");
  if (!cJSON_IsObject(params)) return VERR("%s: field 'params': missing or not an object", where);
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(j, "metrics");
  if (!cJSON_IsArray(ms)) return VERR("%s: field 'metrics': missing or not an array", where);
  const cJSON *cs = cJSON_GetObjectItemCaseSensitive(j, "checks");
  if (!cJSON_IsArray(cs)) return VERR("%s: field 'checks': missing or not an array", where);
  vrecord *r = rec_new(suite, case_id, path);
  if (!r) { verr_prefix("%s", where); return V_ERR; }
  cJSON_Delete(r->params);
  r->params = cJSON_Duplicate(params, 1);
  vstatus s = V_OK;
  char w[256];
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, ms) {
    snprintf(w, sizeof w, "%s: metrics[%d]", where, i++);
    if ((s = metric_from_json(r, e, w))) goto fail;
  }
  i = 0;
  cJSON_ArrayForEach(e, cs) {
    snprintf(w, sizeof w, "%s: checks[%d]", where, i++);
    const char *cn = NULL;
    const cJSON *ok = cJSON_GetObjectItemCaseSensitive(e, "ok");
    if ((s = get_str(e, "name", w, false, &cn))) goto fail;
    if (!cJSON_IsBool(ok)) { s = VERR("%s: field 'ok': missing or not a boolean", w); goto fail; }
    if ((s = rec_check_add(r, cn, cJSON_IsTrue(ok)))) goto fail;
  }
  const cJSON *th = cJSON_GetObjectItemCaseSensitive(j, "threshold");
  if (th && !cJSON_IsNull(th)) {
    snprintf(w, sizeof w, "%s: threshold", where);
    const char *tm, *op;
    double bound = 0;
    if (!cJSON_IsObject(th)) { s = VERR("%s: not an object or null", w); goto fail; }
    if ((s = get_str(th, "metric", w, false, &tm)) || (s = get_str(th, "op", w, false, &op))) goto fail;
    const cJSON *bj = cJSON_GetObjectItemCaseSensitive(th, "bound");
    if (!bj) { s = VERR("%s: field 'bound': missing", w); goto fail; }
    if ((s = get_num(bj, w, "bound", &bound))) goto fail;
    if ((s = rec_set_threshold(r, tm, op, bound))) { verr_prefix("%s", where); goto fail; }
  }
  const cJSON *ran = cJSON_GetObjectItemCaseSensitive(j, "ran"), *fb = cJSON_GetObjectItemCaseSensitive(j, "fallbacks");
  if (ran && !cJSON_IsObject(ran)) { s = VERR("%s: field 'ran': not an object", where); goto fail; }
  if (fb && !cJSON_IsArray(fb)) { s = VERR("%s: field 'fallbacks': not an array", where); goto fail; }
  if ((ran && !(r->ran = cJSON_Duplicate(ran, 1))) || (fb && !(r->fallbacks = cJSON_Duplicate(fb, 1)))) {
    s = VERR("%s: out of memory", where);
    goto fail;
  }
  r->status = (rec_status)st;
  if ((s = set_field(r->reason, sizeof r->reason, reason, "reason")) ||
      (s = set_field(r->trace_ref, sizeof r->trace_ref, trace, "trace_ref"))) {
    verr_prefix("%s", where);
    goto fail;
  }
  *out = r;
  return V_OK;
fail:
  rec_free(r);
  return s;
}

static bool same_value(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (a == b) return true;
  return fabs(a - b) <= 1e-12 * fmax(fabs(a), fabs(b));
}

int rec_rederive_check(const vrecord *r, const char *where, rec_mismatch_fn fn, void *ctx) {
  char line[512];
  int bad = 0;
  double *vals = malloc((size_t)(r->n_metrics ? r->n_metrics : 1) * sizeof *vals);
  if (!vals) { fn(ctx, "out of memory"); return 1; }
  if (derive_all(r, vals)) {
    snprintf(line, sizeof line, "%s: %s", where, verr_msg());
    fn(ctx, line);
    free(vals);
    return 1;
  }
  for (int i = 0; i < r->n_metrics; i++) {
    const rec_metric *m = &r->metrics[i];
    if (!same_value(m->value, vals[i])) {
      snprintf(line, sizeof line, "%s: metric '%s': stored %s = %.17g, recomputed from %d samples = %.17g",
               where, m->name, rec_derive_name(m->derive), m->value, m->n_samples, vals[i]);
      fn(ctx, line);
      bad++;
    }
  }
  char reason[256] = "";
  rec_status st = derive_status(r, vals, reason, sizeof reason);
  if (st != r->status) {
    snprintf(line, sizeof line, "%s: status: stored '%s', recomputed '%s'%s%s", where,
             rec_status_name(r->status), rec_status_name(st), reason[0] ? " : " : "", reason);
    fn(ctx, line);
    bad++;
  }
  free(vals);
  return bad;
}

const char *rec_verdict(vrecord *const *recs, int n, bool complete) {
  if (!complete) return "incomplete";
  for (int i = 0; i < n; i++)
    if (recs[i]->status == REC_FAIL || recs[i]->status == REC_ERROR) return "fail";
  return "pass";
}

int rec_model_spec_len(const char *model) {
  const char *p = strstr(model, " (");
  return p ? (int)(p - model) : (int)strlen(model);
}

void rec_ran_key(char *key, size_t cap, const char *path, const char *ev_path, const char *op, const char *variant) {
  /* an event another path recorded (the one handed over to, or code a plugin reuses) names it */
  const size_t base = strcspn(path, ":@");
  const bool own = strlen(ev_path) == base && !strncmp(ev_path, path, base);
  snprintf(key, cap, "%s%s%s/%s", own ? "" : ev_path, own ? "" : ":", op, variant);
}

vstatus rec_ran(vrecord *r, const char *path, const vtrace *t) {
  if (!t) return V_OK;
  if (!r->ran) r->ran = cJSON_CreateObject();
  if (!r->fallbacks) r->fallbacks = cJSON_CreateArray();
  cJSON *ops = r->ran ? cJSON_CreateObject() : NULL;
  if (!ops || !r->fallbacks) {
    cJSON_Delete(ops);
    return VERR("record %s/%s: out of memory for what ran", r->suite, r->case_id);
  }
  cJSON_DeleteItemFromObjectCaseSensitive(r->ran, path); /* a path named twice: its last tally */
  cJSON_AddItemToObject(r->ran, path, ops);
  for (int i = 0; i < t->n; i++) {
    const vtrace_event *e = &t->ev[i];
    if (e->kind == TR_RAN) {
      char key[REC_RAN_KEY_MAX];
      rec_ran_key(key, sizeof key, path, e->path, e->op, e->variant);
      cJSON *have = cJSON_GetObjectItemCaseSensitive(ops, key); /* the same op/variant from two path names */
      if (have) cJSON_SetNumberValue(have, have->valuedouble + (double)e->count);
      else cJSON_AddNumberToObject(ops, key, (double)e->count);
    } else if (e->kind == TR_FALLBACK) {
      cJSON *f = cJSON_CreateObject();
      if (!f) return VERR("record %s/%s: out of memory for what ran", r->suite, r->case_id);
      cJSON_AddStringToObject(f, "path", path);
      cJSON_AddStringToObject(f, "op", e->op);
      cJSON_AddStringToObject(f, "to", e->variant);
      cJSON_AddStringToObject(f, "reason", e->detail);
      cJSON_AddNumberToObject(f, "count", (double)e->count);
      cJSON_AddItemToArray(r->fallbacks, f);
    }
  }
  return V_OK;
}
