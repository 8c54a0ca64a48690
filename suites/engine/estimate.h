/* What one plan step will need before it runs (`vouch run --dry-run`, and the check `vouch run`
 * makes first): the machine it is checked against (dry_env), the step's figures (dry_step), and the
 * cost model a suite's estimate function (vsuite.estimate, suites/engine/suite.h) prices its own
 * parsed options with: the peak memory per GPU and on the host from each path's own estimate
 * (suites/paths/paths.h vpath_estimate, the arithmetic the paths refuse an open with) and an
 * expected time from the constants in suites/engine/estimate_cost.h.
 *
 * Path names are not checked against the registry here: a dry run plans for a GPU the build may
 * lack (--gpu-mem on a CPU build), so a path counts as a GPU path unless it declares host weights,
 * and the KV layout and op costs of latency and cuda-ref are told by name. */
#ifndef VOUCH_SUITES_ENGINE_ESTIMATE_H
#define VOUCH_SUITES_ENGINE_ESTIMATE_H

#include <stdbool.h>

#include "common/vstatus.h"
#include "model/model.h"

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

/* Starts a step's estimate: out zeroed, fitting until an open shows otherwise. */
void vest_clear(dry_step *out);

/* Most paths one open_set takes (a step naming more is not estimated). */
#define VEST_MAX_PATHS 16

/* A step's estimate in the making, handed to the suite's estimate function by the driver. */
typedef struct {
  const ds_config *cfg;             /* the model's config (ds_spec_config of --model and --layers);
                                       NULL for a suite with no model (kernels) */
  const dry_env *env;               /* the machine */
  dry_step *out;                    /* the step's figures: open_set raises its peaks, the suite adds
                                       its seconds */
  double wbytes[VEST_MAX_PATHS];    /* weight bytes of each path of the last open_set, for vest_open_s */
  int rows, logit_rows;             /* token rows and logit rows of the largest forward at the point being
                                     * estimated (vpath_estimate's; 0: none beyond what open allocates);
                                     * the suite sets them before open_set */
} vest;

/* ---- the time model ---- */

/* True when path `name` runs on a GPU: it does not declare host weights (unknown names count as GPU paths). */
bool vest_on_gpu(const char *name);
/* True when `name` is cuda-ref in any TP / @variant spelling (told by name, as the build may lack it). */
bool vest_cuda_ref(const char *name);
/* Seconds of one decode step of `rows` token rows (batch x tokens per sequence) at context ctx. */
double vest_step_s(const vest *X, const char *path, int rows, double ctx);
/* Seconds to run `tokens` prompt rows that end at context ctx (the mean key count is ctx/2). */
double vest_prefill_s(const vest *X, const char *path, double tokens, double ctx);
/* Seconds to open a path whose weights are `wbytes` (X->wbytes[i] of its open_set). */
double vest_open_s(const vest *X, const char *path, double wbytes);
/* Seconds to fill `seqs` slots with `ctx` positions (fill_cache: the cache-write ops per position). */
double vest_fill_s(const vest *X, const char *path, double seqs, double ctx);

/* ---- opening paths ---- */

/* The largest of v[n] (n >= 1): a list option's largest value (a bin, a hop count). */
long vest_list_max(const long *v, int n);
/* A row count for X->rows, saturated (an estimate past INT_MAX rows refuses either way). */
int vest_rows(double r);
/* Paths[n] (n <= VEST_MAX_PATHS) opened together with (max_seq, max_ctx) at X->rows / X->logit_rows:
 * adds their memory to the step's peak and their weight bytes to X->wbytes; false when they do not
 * fit this machine, and then with record_failure the step does not fit and says why (as it does
 * when a path's estimate fails: a TP degree the model cannot split). */
bool vest_open_set(vest *X, const char *const *paths, int n, int max_seq, int max_ctx, bool record_failure);
/* True when `path` alone at (max_seq, max_ctx) fits this machine by open_set's rules (the sweep
 * spends no steps on a point that does not). The step's figures are not touched. */
bool vest_fits_alone(const vest *X, const char *path, int max_seq, int max_ctx);
/* The step's paths column: paths[n] joined by "+" (together) or ", " (one after the other). */
void vest_name_paths(vest *X, const char *const *paths, int n, bool together);

#endif
