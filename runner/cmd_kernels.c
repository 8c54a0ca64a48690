/* vouch kernels [--op NAME] [--path P] [--variant V] [--batch 1,2,64] [--seeds N]
 *               [--preset tiny|small|k2-slice|edge|all] [--json FILE] [--quick|--full] [--list] */
#include "runner/cmd_kernels.h"
#include "runner/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/opreg.h"
#include "runner/cli.h"
#include "suites/kernels.h"

static const char USAGE[] =
    "usage: vouch kernels [--op NAME] [--path P] [--variant V] [--batch 1,2,64] [--seeds N] [--seed S]\n"
    "                     [--preset tiny|small|k2-slice|edge|all] [--json FILE] [--quick|--full]\n"
    "                     [--list] [--failures-only] [--tp N]\n"
    "  Runs every registered op x every variant that supports it x cases (preset shapes, edge\n"
    "  sizes, batches, seeds, input distributions) against a float64 CPU oracle, and prints a\n"
    "  table: op, path, variant, shape, batch, dtype, distribution, metric, error, bound, status.\n"
    "  Per case: outputs poisoned (0xFF) before each run, 4 KiB guard regions around every\n"
    "  output, NaN/Inf first, then the op's metric vs its stated bound, two runs compared\n"
    "  bitwise, and the trace must show the intended variant ran.\n"
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

/* kernels_opts.on_case under `vouch run`: the case's record in the run's store before the next
 * case starts (error <= bound is the threshold). */
static vstatus store_case(void *ctx, const kernels_record *k) {
  (void)ctx;
  if (!rec_current()) return V_OK;
  vrecord *r = rec_new("kernels", k->id, k->path);
  if (!r) return V_ERR;
  rec_param_str(r, "op", k->op);
  rec_param_str(r, "variant", k->variant);
  rec_param_str(r, "preset", k->preset);
  rec_param_str(r, "shape", k->shape);
  rec_param_int(r, "batch", k->batch);
  rec_param_str(r, "dims", k->dims);
  rec_param_str(r, "dtype", k->dtype);
  rec_param_int(r, "seed", (int64_t)k->seed);
  rec_param_str(r, "output", k->output);
  rec_param_str(r, "deterministic", k->deterministic ? "yes" : "no");
  if (k->status == KS_UNSUPPORTED) {
    rec_set_status(r, REC_NOT_SUPPORTED, k->reason);
  } else {
    rec_metric_value(r, k->metric[0] ? k->metric : "error", "", RB_LOWER, k->error);
    rec_set_threshold(r, k->metric[0] ? k->metric : "error", "<=", k->bound);
    if (k->status == KS_FAIL) rec_set_status(r, REC_FAIL, k->reason[0] ? k->reason : "failed");
  }
  vstatus s = rec_emit(r, k->trace_json);
  rec_free(r);
  return s;
}

/* kernels_opts.skip: a resumed run holds this case's record already. */
static bool case_kept(void *ctx, const kernels_record *k) {
  (void)ctx;
  return rec_stored("kernels", k->id, k->path);
}

int cmd_kernels(int argc, char **argv) {
  kernels_opts o;
  memset(&o, 0, sizeof o);
  o.quick = true;
  const char *json = NULL, *v;
  long *batches = NULL, seeds = 0;
  int n_batches = 0;
  bool list = false, failures_only = false;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { fputs(USAGE, stdout); free(batches); return EXIT_OK; }
    if (!strcmp(argv[i], "--quick")) o.quick = true;
    else if (!strcmp(argv[i], "--full")) o.quick = false;
    else if (!strcmp(argv[i], "--list")) list = true;
    else if (!strcmp(argv[i], "--failures-only")) failures_only = true;
    else if (cli_opt(argc, argv, &i, "--op", &v, &err)) { if (v) o.op = v; }
    else if (cli_opt(argc, argv, &i, "--path", &v, &err)) { if (v) o.path = v; }
    else if (cli_opt(argc, argv, &i, "--variant", &v, &err)) { if (v) o.variant = v; }
    else if (cli_opt(argc, argv, &i, "--preset", &v, &err)) { if (v) o.preset = v; }
    else if (cli_opt(argc, argv, &i, "--json", &v, &err)) { if (v) json = v; }
    else if (cli_opt(argc, argv, &i, "--seeds", &v, &err)) { if (v) err = cli_int("--seeds", v, 1, 1000, &seeds); }
    else if (cli_opt(argc, argv, &i, "--seed", &v, &err)) { if (v) err = cli_u64("--seed", v, &o.seed0); }
    else if (cli_opt(argc, argv, &i, "--tp", &v, &err)) {
      long tp = 0;
      if (v) err = cli_int("--tp", v, 1, 16, &tp);
      o.tp = (int)tp;
    }
    else if (cli_opt(argc, argv, &i, "--batch", &v, &err)) {
      if (v) {
        free(batches);
        batches = NULL;
        err = cli_size_list("--batch", v, &batches, &n_batches);
        for (int k = 0; k < n_batches && !err; k++)
          if (batches[k] < 1 || batches[k] > 4096) err = VERR("option --batch: %ld is outside 1..4096", batches[k]);
      }
    } else err = VERR("unknown option '%s' (see vouch kernels --help)", argv[i]);
    if (err) { cli_print_error("kernels"); free(batches); return EXIT_USAGE; }
  }
  int *bi = NULL;
  if (n_batches) {
    bi = malloc(sizeof(int) * (size_t)n_batches);
    if (!bi) { free(batches); return EXIT_USAGE; }
    for (int k = 0; k < n_batches; k++) bi[k] = (int)batches[k];
  }
  free(batches);
  o.batches = bi;
  o.n_batches = n_batches;
  o.seeds = (int)seeds;
  vopreg_init();
  if (list) { list_registry(); free(bi); return EXIT_OK; }

  o.table = failures_only ? NULL : stdout;
  o.progress = failures_only && cli_is_tty(2) ? stderr : NULL;
  o.on_case = store_case;
  o.skip = case_kept;
  kernels_result res;
  vstatus s = kernels_run(&o, &res);
  free(bi);
  if (s != V_OK) {
    cli_print_error("kernels");
    /* a store error after some cases were kept is a failed step, not a usage error */
    const int rc = res.n > 0 ? EXIT_CHECK_FAILED : EXIT_USAGE;
    kernels_result_free(&res);
    return rc;
  }
  if (failures_only)
    for (int i = 0; i < res.n; i++)
      if (res.r[i].status == KS_FAIL) printf("FAIL %s: %s\n", res.r[i].id, res.r[i].reason);
  printf("\nkernels: %d cases run, %d passed, %d FAILED, %d not supported; %d left out by --quick; %.1f s\n",
         res.run, res.passed, res.failed, res.unsupported, res.skipped_budget, res.wall_s);
  if (res.skipped_kept) printf("kernels: %d cases kept from the interrupted run (not run again)\n", res.skipped_kept);
  if (res.interrupted) { /* the cases that finished are stored; no --json: it would pass for the whole */
    fprintf(stderr, "kernels: interrupted after %d records (case x variant): the rest not run\n", res.n);
    kernels_result_free(&res);
    return EXIT_INTERRUPTED;
  }
  int rc = res.failed ? EXIT_CHECK_FAILED : EXIT_OK;
  if (json && kernels_write_json(&res, json) != V_OK) { cli_print_error("kernels"); rc = EXIT_CHECK_FAILED; }
  kernels_result_free(&res);
  return rc;
}
