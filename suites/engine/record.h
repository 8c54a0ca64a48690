/* The result record model: one case of one suite, with its raw samples.
 *
 * A record carries metrics (each a derived figure plus the raw samples it came from),
 * an optional threshold on one metric, boolean checks (e.g. "the intended variant ran"),
 * and a status. rec_finalize() computes every derived value and the pass/fail status
 * from the samples, the threshold and the checks; `vouch verify` runs the same code on
 * the stored samples, so an edited figure is caught.
 *
 * A result directory (what `vouch run` writes) is opened with rec_open_dir(); each
 * record goes to SQLite as soon as rec_add() is called, so a crash keeps what finished.
 * rec_close() marks the run complete and regenerates results.json from SQLite.
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

/* --- result directory --- */
struct manifest_opts;
typedef struct vrundir vrundir;
/* Creates DIR (and traces/, logs/), writes manifest.json (verdict "incomplete"), plan.json,
 * replay.sh and an empty results.sqlite + results.json. Fails if DIR already holds a run. */
vstatus rec_open_dir(vrundir **out, const char *dir, const struct manifest_opts *mo);
/* Reopens DIR, a run that crashed (state "running") or was interrupted ("incomplete"), to add
 * the cases it did not finish: state back to "running", traces numbered on, and from now on a
 * record whose (suite, case_id, path) is stored already is not stored again (rec_stored). Fails,
 * naming the file and field, on a directory that is not a run, a finished run or a bad store. */
vstatus rec_resume_dir(vrundir **out, const char *dir);
/* Plan progress, kept in the store's meta table: step `step` (0-based) has finished, so a resumed
 * run starts after it (rec_resume_check gives the number of finished steps). */
vstatus rec_dir_step_done(vrundir *rd, int step);
/* Before a resume changes anything: DIR's store (read-only) holds a run of this build (the
 * manifest's commit and CMake options, as rec_resume_dir checks them); *steps_done its finished
 * steps and *run_args its meta 'run_args' (malloc'ed, the caller frees it). Fails naming the file
 * and the field (*run_args NULL). */
vstatus rec_resume_check(const char *dir, int *steps_done, char **run_args);
/* Sets another key of the store's meta table (cmd_run.c keeps the run's variables there). */
vstatus rec_dir_meta_set(vrundir *rd, const char *key, const char *value);
/* Deletes record (suite, case_id, path) when it is stored with status not_run (a crashed run's
 * record of a step that a resumed run now runs); any other record stays. */
vstatus rec_dir_forget_not_run(vrundir *rd, const char *suite, const char *case_id, const char *path);
/* Finalizes r and stores it in SQLite (committed before returning). r stays the caller's. */
vstatus rec_add(vrundir *rd, vrecord *r);
/* Writes a path trace (JSON text) to traces/NNNN.json and sets r->trace_ref; call before rec_add. */
vstatus rec_attach_trace(vrundir *rd, vrecord *r, const char *json_text);
/* Opens logs/<name>.log for appending (caller fcloses). NULL on failure (error set). */
FILE *rec_log_open(vrundir *rd, const char *name);
/* Marks the run complete: final manifest (end time, verdict), results.json from SQLite,
 * and a row in the history store. Frees rd. */
vstatus rec_close(vrundir *rd);
/* Ends an interrupted run: results.json and manifest say "incomplete". Frees rd. */
vstatus rec_abandon(vrundir *rd);
/* For a directory whose run crashed (state still "running" in SQLite, or results.json
 * missing): a not_run record for every plan step it did not finish (plan.json from meta
 * 'steps_done' on), then results.json and the manifest verdict ("incomplete"). No-op on a
 * finished run. */
vstatus rec_repair_dir(const char *dir);
/* The result directory suites add records to while `vouch run` executes a plan (NULL when
 * a suite runs on its own). */
void rec_set_current(vrundir *rd);
vrundir *rec_current(void);
/* True when the current run was resumed and already holds record (suite, case_id, path) with a
 * result (not the not_run of a planned case, rec_plan): a suite may skip that case before running it. */
bool rec_stored(const char *suite, const char *case_id, const char *path);
/* For suites, before their cases run: sets records r[0..n) (a case's records as they will be made:
 * ids and the parameters known up front, no metrics) to not_run with `reason` and, if a run is
 * current, stores each whose (suite, case_id, path) the run holds no record of, in one transaction.
 * An interrupted run so shows every case it did not finish; each is replaced when its record is
 * stored (rec_emit). The caller still owns r. Error names the store and the record. */
vstatus rec_plan(vrecord *const *r, int n, const char *reason);
/* For suites: if a run is current, attaches `trace_json` (may be NULL) and stores r there,
 * in place of its not_run copy (rec_plan) in the same transaction; otherwise only finalizes r. A
 * record a resumed run already holds with a result is only finalized. The caller still owns and
 * frees r. */
vstatus rec_emit(vrecord *r, const char *trace_json);
/* For suites that judge servers: adds `entry` (a server's identity, suites/served/served_pair.h) to the
 * current run's manifest under "servers" and saves the manifest at once (manifest.json and the store's
 * meta 'manifest', so a crashed or resumed run keeps it); an entry with the same role, url and model is
 * kept once (the first). Nothing when no run is current. Error: the store's or the file's, naming it. */
vstatus rec_note_server(const cJSON *entry);
/* Number of records stored (a planned case's not_run copy counts until its record replaces it). */
int rec_dir_count(const vrundir *rd);
/* Records added that failed or errored (a step that exited non-zero without one needs one); in a
 * resumed run a suite's record that is kept from before counts when the kept copy failed. */
int rec_dir_count_bad(const vrundir *rd);
const char *rec_dir_path(const vrundir *rd);

#endif
