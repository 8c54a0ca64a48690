/* vouch kernels: the kernel numerics suite (suites/kernels/kernels.h) as a suite on the driver
 * (suites/engine/suite.h). A case is one variant on one generated case (kernels_plan) and makes one
 * record, "op/path/variant/preset/shape/B<batch>/dist/s<seed>" on the variant's path; its path trace
 * goes with it. The cases a variant does not support are one record, "op/path/variant/not-supported"
 * (params cases and first_case). No model opens: the driver takes --seed (default 0: case seeds start at
 * 1000 + 100 x S) and --json (the suite's own format, kernels_write_json). */
#include "suites/kernels/kernels_suite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference/opreg.h"
#include "suites/engine/cli.h"
#include "suites/engine/estimate_cost.h"
#include "suites/engine/record.h"
#include "suites/kernels/kernels.h"

static const char KERNELS_USAGE[] =
    "usage: vouch kernels [--op NAME] [--path P] [--variant V] [--batch 1,2,64] [--seeds N] [--seed S]\n"
    "                     [--preset tiny|small|k2-slice|edge|all] [--json FILE] [--quick|--full]\n"
    "                     [--list] [--failures-only] [--tp N]\n"
    "  Runs every registered op x every variant that supports it x cases (preset shapes, edge\n"
    "  sizes, batches, seeds, input distributions) against a float64 CPU oracle, and prints a\n"
    "  table: op, path, variant, shape, batch, dtype, distribution, metric, error, bound, status.\n"
    "  Per case: outputs poisoned (0xFF) before each run, 4 KiB guard regions around every\n"
    "  output, NaN/Inf first, then the op's metric vs its stated bound (fp32 outputs at the fp32\n"
    "  bound), two runs compared bitwise (a FAIL unless the variant declares itself\n"
    "  non-deterministic), and the trace must show the intended variant ran. The cases a variant\n"
    "  does not support are one record per op, path and variant (their count, the first reason).\n"
    "  --path      cpu-ref, cuda-ref, latency, or test (planted-bug variants, never run by default)\n"
    "  --quick     a CPU-sized subset (default): big shapes once at batch 1, size budget per case\n"
    "  --full      every shape x batch x seed x distribution (slow on a CPU)\n"
    "  --seed S    case seeds start at 1000 + 100 x S (default 0), so a plan's seed moves every input\n"
    "  --list      list ops and variants and exit\n"
    "  --tp N      only the communication ops (allreduce, allreduce_add_rmsnorm) with N ranks: the\n"
    "              GPU variants run one rank per GPU on GPUs 0..N-1 (not supported with fewer GPUs)\n"
    "  Exit code: 0 all pass (not supported is neither pass nor fail), 1 a case failed, 2 usage.\n";

static void list_registry(void) {
  printf("ops:\n");
  for (int i = 0; i < vopreg_n_ops(); i++) printf("  %-13s %s\n", vopreg_op(i)->name, vopreg_op(i)->desc);
  printf("variants (op, path, name, backend, activations):\n");
  for (int i = 0; i < vopreg_n_variants(); i++) {
    const vop_variant *v = vopreg_variant(i);
    printf("  %-13s %-9s %-10s %-5s %-5s %s\n", v->op->name, v->path, v->name, v->backend->name,
           v->act_dtype == DT_BF16 ? "bf16" : "f32", v->desc ? v->desc : "");
  }
}

/* The suite's state: its options, the plan, and the finished cases. */
typedef struct {
  kernels_opts o;         /* the options for suites/kernels (seed0 from the driver's --seed, check) */
  long *batches_l;        /* [n_batches] --batch as parsed */
  int *batches;           /* [n_batches] the same as ints (options_done; o.batches) */
  int n_batches;
  long seeds, tp;         /* --seeds, --tp (0: the defaults) */
  bool list;              /* --list: print the registry, run nothing */
  bool failures_only;     /* --failures-only: no table, the failures after the last case */
  FILE *progress;         /* progress lines (--failures-only on a terminal), else NULL */
  kernels_plan *plan;     /* the cases (check) */
  kernels_record cur;     /* the case just run (run, then record) */
  kernels_result res;     /* every finished case (record), for the report and --json */
  int kept;               /* cases a resumed run holds, not run again */
} kernels_state;

static void kernels_init(void *st) {
  kernels_state *s = st;
  s->o.quick = true;
}

static bool kernels_option(void *st, int argc, char **argv, int *i, vstatus *err) {
  kernels_state *s = st;
  const char *a = argv[*i], *v;
  if (!strcmp(a, "--quick")) s->o.quick = true;
  else if (!strcmp(a, "--full")) s->o.quick = false;
  else if (!strcmp(a, "--list")) s->list = true;
  else if (!strcmp(a, "--failures-only")) s->failures_only = true;
  else if (cli_opt(argc, argv, i, "--op", &v, err)) { if (v) s->o.op = v; }
  else if (cli_opt(argc, argv, i, "--path", &v, err)) { if (v) s->o.path = v; }
  else if (cli_opt(argc, argv, i, "--variant", &v, err)) { if (v) s->o.variant = v; }
  else if (cli_opt(argc, argv, i, "--preset", &v, err)) { if (v) s->o.preset = v; }
  else if (cli_opt(argc, argv, i, "--seeds", &v, err)) { if (v) *err = cli_int("--seeds", v, 1, 1000, &s->seeds); }
  else if (cli_opt(argc, argv, i, "--tp", &v, err)) { if (v) *err = cli_int("--tp", v, 1, 16, &s->tp); }
  else if (cli_opt(argc, argv, i, "--batch", &v, err)) {
    if (v) {
      free(s->batches_l);
      s->batches_l = NULL;
      *err = cli_size_list("--batch", v, &s->batches_l, &s->n_batches);
      for (int k = 0; k < s->n_batches && !*err; k++)
        if (s->batches_l[k] < 1 || s->batches_l[k] > 4096)
          *err = VERR("option --batch: %ld is outside 1..4096", s->batches_l[k]);
    }
  } else return false;
  return true;
}

static vstatus kernels_options_done(void *st) {
  kernels_state *s = st;
  if (s->n_batches) {
    s->batches = malloc(sizeof(int) * (size_t)s->n_batches);
    if (!s->batches) return VERR("option --batch: out of memory");
    for (int k = 0; k < s->n_batches; k++) s->batches[k] = (int)s->batches_l[k];
  }
  s->o.batches = s->batches;
  s->o.n_batches = s->n_batches;
  s->o.seeds = (int)s->seeds;
  s->o.tp = (int)s->tp;
  return V_OK;
}

/* The dry run: no path opens (op-sized buffers only); the time is a measured run of the default
 * presets (the GPU's with a GPU path, cpu-ref's otherwise), scaled by --full, --preset, every path's
 * variants (no --path, on a GPU) and --seeds. */
static vstatus kernels_estimate(const void *st, const vsuite_est_ctx *x, vest *X) {
  const kernels_state *s = st;
  const char *path = s->o.path, *preset = s->o.preset;
  const bool gpu = X->env->gpu && (!path || vest_on_gpu(path));
  snprintf(X->out->paths, sizeof X->out->paths, "(op variants of %s)", path ? path : gpu ? "every path" : "cpu-ref");
  X->out->uses_gpu = gpu;
  double t = !gpu ? COST_KERNELS_CPU_S : path && vest_cuda_ref(path) ? COST_KERNELS_CUDAREF_GPU_S : COST_KERNELS_GPU_S;
  if (!s->o.quick) t *= COST_KERNELS_FULL;
  if (preset && !strcmp(preset, "all")) t *= COST_KERNELS_ALL;
  else if (preset && !strcmp(preset, "tiny")) t = gpu ? COST_KERNELS_TINY_GPU_S : COST_KERNELS_TINY_CPU_S;
  if (!path && gpu) t *= COST_KERNELS_EVERY_PATH;
  X->out->seconds = t * (s->seeds > 0 ? s->seeds : 1);
  snprintf(X->out->peak_at, sizeof X->out->peak_at, "op-sized buffers");
  return V_OK;
}

/* The filters (unknown op, path, variant, preset: usage errors), by making the plan. */
static vstatus kernels_check(void *st, const vsuite_ctx *x) {
  kernels_state *s = st;
  if (s->list) return V_OK;
  s->o.seed0 = x->seed;
  return kernels_plan_make(&s->o, &s->plan);
}

/* --list: the registry, and nothing runs; else the table's header. */
static vstatus kernels_prepare(void *st, const vsuite_ctx *x, bool *done) {
  kernels_state *s = st;
  (void)x;
  if (s->list) {
    kernels_register_ops();
    list_registry();
    *done = true;
    return V_OK;
  }
  if (!s->failures_only) kernels_print_header(stdout);
  s->progress = s->failures_only && cli_is_tty(2) ? stderr : NULL;
  return V_OK;
}

static int kernels_n_cases(const void *st, const vsuite_ctx *x) {
  (void)x;
  return kernels_plan_n(((const kernels_state *)st)->plan);
}

/* The record of k in recs: its key and parameters; with `result`, its figure against the bound
 * (error <= bound is the threshold) or why it is not supported. */
static vstatus make_record(const kernels_record *k, bool result, veng *recs) {
  vrecord *r = eng_new(recs, "kernels", k->id, k->path);
  if (!r) return V_ERR;
  rec_param_str(r, "op", k->op);
  rec_param_str(r, "variant", k->variant);
  if (k->n_cases) { /* a variant's unsupported cases, one record: how many, and the first one */
    rec_param_str(r, "dtype", k->dtype);
    rec_param_int(r, "cases", k->n_cases);
    rec_param_str(r, "first_case", k->first);
  } else {
    rec_param_str(r, "preset", k->preset);
    rec_param_str(r, "shape", k->shape);
    rec_param_int(r, "batch", k->batch);
    rec_param_str(r, "dims", k->dims);
    rec_param_str(r, "dtype", k->dtype);
    rec_param_int(r, "seed", (int64_t)k->seed);
  }
  if (!result) return V_OK;
  rec_param_str(r, "output", k->output);
  rec_param_str(r, "deterministic", k->deterministic ? "yes" : "no");
  if (k->status == KS_UNSUPPORTED) {
    rec_set_status(r, REC_NOT_SUPPORTED, k->reason);
  } else {
    rec_metric_value(r, k->metric[0] ? k->metric : "error", "", RB_LOWER, k->error);
    rec_set_threshold(r, k->metric[0] ? k->metric : "error", "<=", k->bound);
    if (k->status == KS_FAIL) rec_set_status(r, REC_FAIL, k->reason[0] ? k->reason : "failed");
  }
  return k->trace_json ? eng_trace(recs, k->trace_json) : V_OK;
}

static vstatus kernels_plan_case(void *st, const vsuite_ctx *x, int c, veng *recs) {
  const kernels_state *s = st;
  (void)x;
  kernels_record k;
  kernels_plan_key(s->plan, c, &k);
  return make_record(&k, false, recs);
}

static vstatus kernels_run_case(void *st, const vsuite_ctx *x, int c) {
  kernels_state *s = st;
  (void)x;
  return kernels_plan_run(s->plan, c, &s->cur);
}

/* The case's record (with its trace) in recs; the case itself goes to res (which takes its trace). */
static vstatus kernels_record_case(void *st, const vsuite_ctx *x, int c, veng *recs) {
  kernels_state *s = st;
  (void)x, (void)c;
  vstatus e = make_record(&s->cur, true, recs);
  if (e) {
    free(s->cur.trace_json);
    return e;
  }
  return kernels_result_add(&s->res, &s->cur);
}

static void kernels_print_case(void *st, const vsuite_ctx *x, int c) {
  const kernels_state *s = st;
  (void)x, (void)c;
  if (!s->failures_only) kernels_print_row(stdout, &s->res.r[s->res.n - 1]);
  if (s->progress) fprintf(s->progress, "\r%d cases, %d failed  ", s->res.n, s->res.failed);
}

static void kernels_kept(void *st, const vsuite_ctx *x, int c) {
  (void)x, (void)c;
  ((kernels_state *)st)->kept++;
}

static void kernels_print(const void *st, const vsuite_ctx *x, const veng *recs) {
  (void)recs; /* the report is made of the suite's own results */
  const kernels_state *s = st;
  const kernels_result *res = &s->res;
  if (s->progress) fprintf(s->progress, "\n");
  if (s->failures_only)
    for (int i = 0; i < res->n; i++)
      if (res->r[i].status == KS_FAIL) printf("FAIL %s: %s\n", res->r[i].id, res->r[i].reason);
  char nrec[48] = ""; /* the not-supported cases are one record per variant */
  if (res->unsupported != res->unsupported_cases)
    snprintf(nrec, sizeof nrec, " (%d record%s)", res->unsupported, res->unsupported == 1 ? "" : "s");
  printf("\nkernels: %d cases run, %d passed, %d FAILED, %d not supported%s; %d left out by --quick; %.1f s\n", res->run,
         res->passed, res->failed, res->unsupported_cases, nrec, kernels_plan_skipped(s->plan), x->wall_s);
  if (s->kept) printf("kernels: %d cases kept from the interrupted run (not run again)\n", s->kept);
}

static vstatus kernels_json(const void *st, const vsuite_ctx *x, const veng *recs, const char *file) {
  (void)x, (void)recs;
  return kernels_write_json(&((const kernels_state *)st)->res, file);
}

static void kernels_free(void *st) {
  kernels_state *s = st;
  kernels_plan_free(s->plan);
  kernels_result_free(&s->res);
  free(s->batches_l);
  free(s->batches);
}

const vsuite vsuite_kernels = {
    .name = "kernels",
    .usage = KERNELS_USAGE,
    .state_size = sizeof(kernels_state),
    .init = kernels_init,
    .option = kernels_option,
    .options_done = kernels_options_done,
    .check = kernels_check,
    .prepare = kernels_prepare,
    .n_cases = kernels_n_cases,
    .run = kernels_run_case,
    .record = kernels_record_case,
    .print = kernels_print,
    .free = kernels_free,
    .quiet_verdict = true,
    .skip_stored = true,
    .case_noun = "records (case x variant)",
    .plan = kernels_plan_case,
    .kept = kernels_kept,
    .print_case = kernels_print_case,
    .no_model = true,
    .seed_zero = true,
    .write_json = kernels_json,
    .estimate = kernels_estimate,
};
