/* The kernel numerics suite (`vouch kernels`): every registered op x every variant that
 * supports each case x cases (preset shapes, edge sizes, batches, seeds, distributions),
 * checked against the float64 oracle. Per case: poisoned outputs, guard regions, NaN/Inf
 * first, the op's metric vs its stated bound (per output: fp32 outputs at the fp32 bound),
 * two runs compared bitwise (a FAIL unless the variant declares itself non-deterministic),
 * and the trace must show the intended variant ran. Status: pass, FAIL, or not supported
 * (one record per op, path and variant). The rule: docs/verdicts.md. */
#ifndef VOUCH_SUITES_KERNELS_KERNELS_H
#define VOUCH_SUITES_KERNELS_KERNELS_H

#include <stdbool.h>
#include <stdio.h>

#include "reference/opreg.h"

typedef enum { KS_PASS = 0, KS_FAIL = 1, KS_UNSUPPORTED = 2 } kernels_status;
const char *kernels_status_name(int s); /* "pass", "FAIL", "not supported" */

/* Registers the built-in ops and variants into the op registry once (reference/opreg.h
 * vopreg_init; kernels_ops.c): the ops and cpu-ref's variants, and in CUDA builds cuda-ref's and
 * the latency path's. kernels_plan_make and `vouch kernels --list` call it; so do tests. */
void kernels_register_ops(void);

typedef struct {
  const char *op;        /* only this op (NULL: all) */
  const char *path;      /* only this path (NULL: all except "test") */
  const char *variant;   /* only this variant name (NULL: all) */
  const int *batches;    /* [n_batches] batch sizes (n_batches 0: defaults) */
  int n_batches;
  int seeds;             /* seeds per shape and distribution (0: defaults) */
  uint64_t seed0;        /* case seeds start at 1000 + 100 * seed0 */
  const char *preset;    /* "tiny", "small", "k2-slice", "edge", "all" (NULL: tiny,small,edge,k2-slice) */
  bool quick;            /* CPU-sized subset (the default for `vouch kernels`) */
  int tp;                /* > 0: only the communication ops (first dim "ranks"), cases of exactly tp ranks */
} kernels_opts;

typedef struct kernels_record {
  char id[200];          /* op/path/variant/preset/shape/B/dist/seed */
  const char *op, *path, *variant; /* registry strings (static) */
  char preset[16], shape[32];
  int batch;
  char dims[96];         /* "out=1536 in=7168" */
  char dtype[24];        /* "w:bf16 a:f32" */
  int dist;              /* vop_dist */
  uint64_t seed;
  char metric[24];       /* metric of the worst output ("rel_l2", ...) */
  char output[24];       /* name of the worst output */
  double error, bound;   /* worst output's error and its bound */
  const char *why;       /* the bound's reason (static) */
  int status;            /* kernels_status */
  bool deterministic;    /* two runs were bitwise identical */
  char reason[320];      /* why it failed / is unsupported, plus notes */
  int n_cases;           /* a variant's "not supported" record: the cases it stands for (one record per
                            op, path and variant; id "op/path/variant/not-supported"); 0 for every other */
  char first[200];       /* with n_cases: the first unsupported case's id (its key fields are that case's) */
  char *trace_json;      /* the case's trace events (JSON array, owned) */
  double seconds;        /* wall time of the two runs */
} kernels_record;

typedef struct {
  kernels_record *r;     /* [n] records */
  int n, cap;
  int run, passed, failed, unsupported; /* counts of records by status (run = passed + failed) */
  int unsupported_cases; /* the cases the unsupported records stand for */
  int skipped_budget;    /* cases left out by the --quick size budget */
  double wall_s;
} kernels_result;

/* The suite's cases, made up front so a driver can run, store and print them one at a time
 * (suites/kernels/kernels_suite.c): a planned case is one variant on one generated case, and makes one
 * record; a generated case's variants are consecutive (those whose supports() failed first), and
 * share its inputs and oracle outputs. The cases a variant does not support are one planned record
 * per op, path and variant (its count and the first reason), after that op's cases. */
typedef struct kernels_plan kernels_plan;
/* Checks the filters and generates the cases into *p (free with kernels_plan_free). V_ERR for
 * usage errors (unknown op, path, variant or preset) and a case generator's failure. */
vstatus kernels_plan_make(const kernels_opts *o, kernels_plan **p);
/* How many cases p holds; how many the --quick size budget left out. */
int kernels_plan_n(const kernels_plan *p);
int kernels_plan_skipped(const kernels_plan *p);
/* Case i's record as known before it runs (id, op, path, variant, preset, shape, batch, dims, dtype,
 * dist, seed; no result). */
void kernels_plan_key(const kernels_plan *p, int i, kernels_record *r);
/* Runs case i (in order: a case's inputs are made at its first variant that runs) into r (its
 * trace_json owned by the caller). A case that fails or is not supported is a record; V_ERR only
 * for a failure of the harness itself. */
vstatus kernels_plan_run(kernels_plan *p, int i, kernels_record *r);
void kernels_plan_free(kernels_plan *p);
/* Appends r to res and counts it (res takes r->trace_json; on out of memory it is freed). */
vstatus kernels_result_add(kernels_result *res, kernels_record *r);
/* The table: its header line, and the row of one record. */
void kernels_print_header(FILE *f);
void kernels_print_row(FILE *f, const kernels_record *r);

/* Runs every case of the suite; fills res (free with kernels_result_free). Errors as
 * kernels_plan_make's and kernels_plan_run's; failing cases are records, not errors. */
vstatus kernels_run(const kernels_opts *o, kernels_result *res);
void kernels_result_free(kernels_result *res);
/* Writes res as a JSON array of records (suite "kernels"). */
vstatus kernels_write_json(const kernels_result *res, const char *path);
/* Cases of one op for one preset ("tiny", "small", "k2-slice", "edge") appended to out
 * (suites/kernels/kernels_cases.c); adds the cases the --quick budget left out to *n_skipped.
 * V_ERR for an unknown preset and the op's own gen_cases failing or out of memory. */
vstatus kernels_gen_cases(const vop *op, const char *preset, const vop_gen_opts *g, vop_case_list *out,
                          int *n_skipped);

#endif
