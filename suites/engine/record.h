/* The result record model: one case of one suite, with its raw samples.
 *
 * A record carries metrics (each a derived figure plus the raw samples it came from),
 * an optional threshold on one metric, boolean checks (e.g. "the intended variant ran"),
 * and a status. rec_finalize() computes every derived value and the pass/fail status
 * from the samples, the threshold and the checks; `vouch verify` runs the same code on
 * the stored samples, so an edited figure is caught.
 *
 * Suites hand their records to the run being executed through suites/engine/sink.h; the result
 * directory that stores them (what `vouch run` writes) is runner/evidence/rundir.h.
 * Layout and JSON shapes: results-schema/README.md. */
#ifndef VOUCH_SUITES_ENGINE_RECORD_H
#define VOUCH_SUITES_ENGINE_RECORD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "common/vstatus.h"

#define REC_SCHEMA_VERSION 1

typedef enum {
  REC_PASS = 0,          /* measured, threshold and checks hold */
  REC_FAIL = 1,          /* measured, threshold or a check does not hold */
  REC_NOT_SUPPORTED = 2, /* the path cannot run this case (reason says why); never pass, never fail */
  REC_ERROR = 3,         /* the case could not be run because something broke */
  REC_NOT_RUN = 4,       /* skipped (interrupted, filtered out) */
  REC_UNDECIDED = 5,     /* the case ran and its check could decide nothing (e.g. no row the reference
                            decides): never a pass, never a fail; counted and shown (docs/verdicts.md) */
  REC_STATUS_N
} rec_status;

typedef enum {
  RD_VALUE = 0,       /* exactly one sample; value = samples[0] */
  RD_MEDIAN,          /* median of samples (mean of the two middle ones when even) */
  RD_MEAN,            /* arithmetic mean */
  RD_P90,             /* 90th percentile, linear interpolation between order statistics */
  RD_P99,             /* 99th percentile, same rule */
  RD_STABLE_MEAN,     /* mean after skipping `warmup` samples and dropping |x-median| > 5*MAD */
  RD_RATIO,           /* value(num) / value(den), two other metrics of the same record; no samples */
  RD_MAX,             /* largest sample */
  RD_MIN,             /* smallest sample */
  RD_N
} rec_derive;

typedef enum { RB_NONE = 0, RB_LOWER = 1, RB_HIGHER = 2 } rec_better;

typedef struct {
  char name[48];      /* metric name, snake_case ("step_us", "tokens_per_s", "max_rel_err") */
  char unit[24];      /* "us", "tok/s", "%", "" for dimensionless */
  rec_derive derive;  /* how value follows from samples */
  rec_better better;  /* which direction is an improvement (compare uses it) */
  double value;       /* the derived figure (NaN when there is nothing to derive from) */
  double *samples;    /* [n_samples] raw measurements, in the order taken (owned) */
  int n_samples;
  int warmup;         /* RD_STABLE_MEAN: leading samples skipped; 0 otherwise */
  char num[48];       /* RD_RATIO: numerator metric name */
  char den[48];       /* RD_RATIO: denominator metric name */
} rec_metric;

typedef struct {
  char name[64];      /* what was checked ("variant_ran:mla_decode/split_kv", "no_nan") */
  bool ok;
} rec_check;

typedef struct {
  char suite[32];         /* "kernels", "diverge", "evals", "features", "sweep", ... */
  char case_id[160];      /* unique within (suite, path) */
  char path[128];         /* decode path name ("cpu-ref", "latency:tp8@tp_rsag", ...) or "" */
  cJSON *params;          /* object: the case's parameters (batch, context, dtype, seed, ...) (owned) */
  rec_metric *metrics;    /* [n_metrics] */
  int n_metrics, cap_metrics;
  rec_check *checks;      /* [n_checks] */
  int n_checks, cap_checks;
  bool has_threshold;
  char th_metric[48];     /* metric the threshold applies to */
  char th_op[3];          /* "<=", "<", ">=", ">", "==" */
  double th_bound;        /* the bound, in the metric's unit */
  rec_status status;
  char reason[256];       /* why not pass (filled by rec_finalize for threshold/check failures) */
  char trace_ref[160];    /* relative path of the path trace ("traces/0007.json") or "" */
  /* Proof that the code under test ran (issue 37; rec_ran): NULL (not written) or, per path of the case
   * (its name as given), what that path's trace says ran in the case and every hand-over to another path */
  cJSON *ran;             /* object: {PATH: {"OP/VARIANT": count, ...}, ...}; an event another path recorded
                           * (the one handed over to, or code a plugin reuses) is "THAT:OP/VARIANT" (owned) */
  cJSON *fallbacks;       /* array: {"path", "op", "to", "reason" (the first), "count"} (owned) */
} vrecord;

/* --- names --- */
const char *rec_status_name(rec_status s);   /* "pass", "fail", "not_supported", "error", "not_run",
                                                "undecided" */
const char *rec_derive_name(rec_derive d);   /* "value", "median", ... */
const char *rec_better_name(rec_better b);   /* "none", "lower", "higher" */
int rec_status_parse(const char *s);          /* -1 when unknown */
int rec_derive_parse(const char *s);
int rec_better_parse(const char *s);

/* --- building a record --- */
/* New record, status REC_PASS (pending rec_finalize), empty params object. NULL on OOM (error set). */
vrecord *rec_new(const char *suite, const char *case_id, const char *path);
void rec_free(vrecord *r);
vstatus rec_param_int(vrecord *r, const char *key, int64_t v);
vstatus rec_param_num(vrecord *r, const char *key, double v);
vstatus rec_param_str(vrecord *r, const char *key, const char *v);
/* Adds a metric derived from n raw samples (copied). warmup is used by RD_STABLE_MEAN only. */
vstatus rec_metric_samples(vrecord *r, const char *name, const char *unit, rec_derive d,
                           rec_better b, const double *samples, int n, int warmup);
/* A single measured value (RD_VALUE with one sample). */
vstatus rec_metric_value(vrecord *r, const char *name, const char *unit, rec_better b, double v);
/* A ratio of two metrics of this record (added before or after; resolved by rec_finalize). */
vstatus rec_metric_ratio(vrecord *r, const char *name, const char *unit, rec_better b,
                         const char *num, const char *den);
/* Threshold: the record passes only if metric `op` bound holds (op: <=, <, >=, >, ==). */
vstatus rec_set_threshold(vrecord *r, const char *metric, const char *op, double bound);
vstatus rec_check_add(vrecord *r, const char *name, bool ok);
struct vtrace_s;
#define REC_RAN_KEY_MAX 128 /* a `ran` key's bytes: trace path 24 + op 32 + variant 48 + ':' '/' NUL */
/* The key in `ran` of an event (ev_path, op, variant) that path `path` (its name as given) recorded:
 * "OP/VARIANT", or "THAT:OP/VARIANT" when ev_path is another path's (not path's base name). Also the
 * `choice` parameter of a coverage record (suites/coverage/), so the report can join the two. */
void rec_ran_key(char *key, size_t cap, const char *path, const char *ev_path, const char *op, const char *variant);
/* The length of a model source's spec: without the " (seed S, N layers)" the loader appends (the
 * weights' seed does not change the shapes a path's choices depend on). */
int rec_model_spec_len(const char *model);
/* Adds what path `path` ran in the case to r->ran and its fallbacks to r->fallbacks, from its tally t
 * (common/trace.h; vpath_ran): each `ran` event as "OP/VARIANT" with its count, each fallback event;
 * notes are left out. t NULL: nothing (the path did not open). Error on out of memory, naming r. */
vstatus rec_ran(vrecord *r, const char *path, const struct vtrace_s *t);
/* Sets not_supported / error / not_run (with reason). REC_FAIL also records a failed check
 * named after the reason, so the failure survives re-derivation. */
void rec_set_status(vrecord *r, rec_status s, const char *reason);
/* Computes every metric value, then the status (when pass/fail) from threshold and checks. */
vstatus rec_finalize(vrecord *r);
const rec_metric *rec_metric_find(const vrecord *r, const char *name);

/* --- statistics (sorted copies; inputs untouched; NaN for empty input) --- */
double rec_stat_median(const double *x, int n);
double rec_stat_mean(const double *x, int n);
double rec_stat_percentile(const double *x, int n, double p);  /* p in [0,100] */
double rec_stat_stable_mean(const double *x, int n, int warmup);
double rec_stat_derive(rec_derive d, const double *x, int n, int warmup);
/* The 97.5th percentile of Student's t with df >= 1 degrees of freedom (exact table to 30,
 * Cornish-Fisher expansion above: within 1e-3): the half-width factor of a 95% interval. */
double rec_stat_t975(int df);
/* Deterministic 64-bit RNG (splitmix64) for bootstrap. */
uint64_t rec_rng_next(uint64_t *state);
/* 95% percentile-bootstrap CI of median(b_cand)/median(a_base), `iters` resamples,
 * fixed seed. Returns the point ratio; lo/hi get the interval. */
double rec_bootstrap_ratio(const double *a, int na, const double *b, int nb, int iters,
                           uint64_t seed, double *lo, double *hi);

/* --- JSON --- */
cJSON *rec_to_json(const vrecord *r);
/* Parses and type-checks one record; `where` names it in errors ("results.json: records[3]"). */
vstatus rec_from_json(const cJSON *j, const char *where, vrecord **out);
/* Compares a stored record with its re-derivation; appends one line per mismatch to `out`
 * (via the callback). Returns the number of mismatches. */
typedef void (*rec_mismatch_fn)(void *ctx, const char *line);
int rec_rederive_check(const vrecord *stored, const char *where, rec_mismatch_fn fn, void *ctx);
/* Overall verdict of a set of records: "fail" if any fail/error, else "pass"; "incomplete"
 * when !complete. */
const char *rec_verdict(vrecord *const *recs, int n, bool complete);

#endif
