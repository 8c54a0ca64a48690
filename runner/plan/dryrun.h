/* What one plan step will need before it runs (`vouch run --dry-run`, and the check `vouch run`
 * makes first): the paths it opens and how (all at once or one at a time), the peak memory per GPU
 * and on the host from each path's own estimate (suites/paths/paths.h vpath_estimate, the arithmetic the
 * paths refuse an open with), and an expected time from the cost model in runner/plan/dryrun_cost.h. */
#ifndef VOUCH_RUNNER_PLAN_DRYRUN_H
#define VOUCH_RUNNER_PLAN_DRYRUN_H

#include <stdbool.h>

#include "common/vstatus.h"

/* The machine the plan is checked against. */
typedef struct {
  bool gpu;          /* the plan's GPU variant (a GPU is visible, or --gpu-mem names one) */
  double gpu_free;   /* bytes free per GPU (cudaMemGetInfo, or --gpu-mem); 0: no GPU to check against */
  double gpu_total;  /* bytes per GPU (for messages) */
  int gpus;          /* GPUs available */
  int sms;           /* SMs per GPU (0: an H200's 132) */
  double host_total; /* bytes of host memory (0: unknown, not checked) */
  int cpu_threads;   /* cores the CPU paths use */
  char device[128];  /* GPU name for messages ("NVIDIA H200", "a 141 GiB GPU (--gpu-mem)") */
} dry_env;

/* One step's estimate. */
typedef struct {
  char paths[400];    /* the paths it opens: "a+b" open together, "a, b" one after the other */
  char peak_at[120];  /* the open that sets the peak, e.g. "batch 64 x ctx 32784" */
  double gpu_bytes;   /* peak bytes per GPU of the paths open at once */
  double host_bytes;  /* peak host bytes */
  int gpus_needed;    /* most GPUs one open spans (TP degree) */
  double seconds;     /* expected wall time */
  bool uses_gpu;      /* some path of the step runs on a GPU */
  bool degrades;      /* the suite shrinks what does not fit (sweep: smaller batches, one path at a
                       * time) instead of failing: only a step where nothing fits is refused */
  bool fits;          /* false: the step cannot run here; why says why */
  char why[600];      /* one line: what does not fit, needs vs has */
} dry_step;

/* Estimates the step `argv` (argv[0] the suite, "eval" then "mrcr"/"chain"; variables expanded) on
 * env. V_ERR when its options cannot be read the way the suite reads them (the suite would reject
 * them too), naming the option. */
vstatus dry_estimate(int argc, char **argv, const dry_env *env, dry_step *out);

#endif
