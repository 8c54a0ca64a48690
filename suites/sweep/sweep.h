/* Throughput sweeps (`vouch sweep`): decode step time of one or more paths over a grid of
 * batch x context (x TP), pure decode (synthetic KV fill) or prefill+decode, optional
 * speculative verification (K+1 tokens per sequence per step, AL kept), with the routing
 * of MoE experts natural or forced (uniform, zipf, replayed trace).
 *
 * Method (DESIGN.md "Performance method"):
 * - All paths of a grid point are open at once and stepped interleaved (A B A B, the order
 *   reversed every other step) so drift on a shared machine cancels. Paths are (re)opened
 *   per context with max_ctx for that context and max_seq for the largest batch that fits;
 *   when the paths do not fit together, each runs alone (records say interleaved=false);
 *   what fits nowhere is a "not run" point with the reason (never dropped).
 * - Pure decode: fill_cache(ctx) per sequence, then single-token (or K+1-token) steps at
 *   positions ctx, ctx+AL, ...; with --spec the cache is rewound by K+1-AL after each step
 *   (the next step starts at start_pos + AL). Prefill+decode: a real chunked prefill of ctx
 *   tokens (timed separately), then the same decode steps.
 * - Step time: the path's last_step_ms (device events) when it has one, else the wall clock.
 * - Roofline: ds_decode_bytes() with the experts actually touched (distinct ids per MoE layer
 *   under forced routing; under natural routing the experts the path reports it selected
 *   (vpath_ops.last_experts, read after each timed step), or, for a path that cannot tell, the
 *   expected number for uniform choice, and the point says which) and the KV layout of the path
 *   (vpath_ops.latent_kv), over the copy bandwidth measured in the same run of the memory the
 *   path's steps read: a host memcpy for a path that declares host weights (vpath_caps.host_weights),
 *   else cuda_membw on the GPU.
 *
 * The routing option (natural, uniform, zipf:S, trace:FILE) is suites/engine/routing.h, shared with
 * `vouch diverge`. */
#ifndef VOUCH_SUITES_SWEEP_SWEEP_H
#define VOUCH_SUITES_SWEEP_SWEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/path.h"
#include "suites/paths/spec.h"
#include "model/model.h"
#include "suites/engine/routing.h"
#include "suites/engine/stats.h"

typedef enum { SWEEP_DECODE = 0, SWEEP_PREFILL_DECODE = 1 } sweep_workload;
/* prefill+decode: token rows of one prefill chunk step, all sequences together; at batch b each
 * sequence gets sweep_prefill_chunk(b) tokens a step (cuda-ref's workspace grows to them, the dry
 * run counts it) */
#define SWEEP_PREFILL_ROWS 8192
static inline int sweep_prefill_chunk(long b) { return SWEEP_PREFILL_ROWS / b > 0 ? (int)(SWEEP_PREFILL_ROWS / b) : 1; }
const char *sweep_workload_name(sweep_workload w); /* "decode", "prefill+decode" */

/* Mean over MoE layers of the distinct experts in ids [n_moe][T][K] (ids in [0, E)). */
double sweep_distinct_experts(const int32_t *ids, int n_moe, int T, int K, int E);

typedef struct {
  const vpath_spec *paths;  /* [n_paths] the paths (suites/paths/spec.h); the first is the baseline */
  int n_paths;
  const int *batches;       /* [n_batches] sequences per step */
  int n_batches;
  const int *contexts;      /* [n_contexts] cached positions per sequence before decoding */
  int n_contexts;
  const int *tps;           /* [n_tps] tensor-parallel degrees (> 1: not built, listed as not run) */
  int n_tps;
  int spec_k;               /* draft tokens per step (0: plain decode, 1 token per sequence) */
  int spec_al;              /* tokens kept per sequence per step (1 without spec), 1..spec_k+1 */
  sweep_workload workload;
  vrouting *routing;   /* prepared by sweep_run */
  int steps, warmup;        /* timed steps, warm-up steps (per path per point) */
  uint64_t seed;            /* KV fill, tokens, routing */
  int device;               /* GPU ordinal for GPU paths */
  int n_threads;            /* host paths (0: all cores) */
  bool expect_fallback;    /* --expect-fallback: a path that hands over to another path is accepted (vpath_opts) */
  size_t membw_bytes;       /* copy size for the bandwidth measurement (0: 4 GiB GPU, 1 GiB host) */
  bool progress;            /* progress bar on stderr */
  double deadline;          /* vclock_now() time after which no point starts (not run, with the reason); 0: none */
} sweep_opts;

/* Where a point's experts_touched comes from. */
typedef enum {
  EXPERTS_FORCED = 0,   /* forced routing: distinct forced ids of the timed steps (exact) */
  EXPERTS_REPORTED,     /* natural routing: the path's last_experts() after each timed step (exact) */
  EXPERTS_EXPECTED,     /* natural routing, path cannot tell: expected distinct under uniform choice */
} sweep_experts_from;

typedef struct {
  char path[128];
  int tp, batch, ctx;       /* grid coordinates (ctx as asked) */
  bool ran;                 /* false: reason says why not */
  bool unsupported;         /* not run because the path's supports()/fill_cache refused the point */
  char reason[400];
  bool interleaved;         /* stepped alternately with the other paths of the same point */
  vtrace what_ran;          /* what the path's trace says ran at this point, fill included (vpath_ran; the
                             * record's ran and fallbacks, issue 37); owned, freed by sweep_result_free */
  bool device_timer;        /* step times from last_step_ms (device events), else wall clock */
  int fill_len;             /* positions filled / prefilled before decoding (< ctx only when
                               ctx + decode positions would pass max_position_embeddings) */
  double *ms;               /* [n_warmup + n_steps] step times in ms, warm-up steps first (owned) */
  int n_warmup, n_steps;
  double prefill_ms;        /* prefill+decode: time of the whole prefill; NaN for pure decode */
  int tokens_kept;          /* tokens counted per step: batch * AL */
  int tokens_verified;      /* tokens run per step: batch * (K+1) */
  double mean_ctx;          /* mean cached length attended in the timed steps */
  double experts_touched;   /* distinct routed experts per MoE layer per timed step (mean) */
  sweep_experts_from experts_from; /* how experts_touched was obtained */
  bool experts_measured;    /* experts_from != EXPERTS_EXPECTED: counted, not estimated */
  bool latent_kv;           /* the path's KV layout used in the byte count */
  double bytes_per_step;    /* ds_decode_bytes for this point */
  double membw_gbs;         /* copy bandwidth (read + write) of the path's memory, GB/s */
  char membw_how[80];       /* how it was measured */
  vstats st;                /* summary of ms (after warm-up) */
  double tok_s;             /* tokens_kept / median step time */
  double roofline_pct;      /* 100 * (bytes_per_step / membw) / median step time */
} sweep_point;

typedef struct sweep_result {
  sweep_point *p;           /* [n] points, grid order (context, TP, batch, path) */
  int n, cap;
  double wall_s;            /* wall time of the whole sweep */
  double membw_host_gbs, membw_gpu_gbs; /* NaN when not measured */
} sweep_result;

/* Bytes one rank of TP `tp` must read per decode step of path `path` (NULL: a plain path): the
 * shard's weights (heads and MLP widths divided, latent projections, router and norms replicated,
 * its vocabulary block of lm_head) and its KV cache (the MLA latent is replicated on every rank;
 * under path->dcp a rank holds and reads ceil(ctx / tp) positions of it; an expanded per-head cache
 * is already split by head). path->splits_inputs (latency's "@tp_split_in"): a rank reads ceil(rows / tp)
 * of q_a|kv_a and of the router. tp <= 1: the whole model. A config that does not shard counts whole. */
double sweep_rank_bytes(const ds_config *c, int tp, const vpath_spec *path, int b, int ctx, double experts, bool latent_kv);
/* V_ERR naming the option when o cannot be swept: no path or more than 64, a path listed twice, no batch or context, more than 64 batches, a batch < 1, a context < 0, steps < 1, warmup < 0,
 * or spec K/AL out of range. */
vstatus sweep_check(const sweep_opts *o);
/* The batches of a point's grid: o's, ascending and distinct, into bs[o->n_batches]; returns how many. */
int sweep_batches(const sweep_opts *o, int *bs);
/* How many (context, TP) pairs the grid has: n_contexts x n_tps (at least one TP degree). Pair i is
 * context i / n_tps, TP i % n_tps. */
int sweep_n_pairs(const sweep_opts *o);

/* One round of the grid, run a (context, TP) pair at a time, so a driver stores the points of each
 * pair before the next starts: sweep_begin, sweep_pair for every pair in order, sweep_end. */
typedef struct sweep_round sweep_round;
/* Checks o (sweep_check) and prepares o->routing for m; res is the round's result (its points
 * appended by sweep_pair). V_ERR for a bad option or the routing, or out of memory. */
vstatus sweep_begin(const sweep_opts *o, const ds_model *m, sweep_result *res, sweep_round **w);
/* Runs pair `pair` (in order) on every path and batch: its points are res->p[*first .. res->n), in
 * grid order (batch, then path); a point that cannot run is a point with the reason. V_ERR only for a
 * failure of the harness itself. */
vstatus sweep_pair(sweep_round *w, int pair, int *first);
/* Closes the paths, frees w and sets res->wall_s (the round's wall time). */
void sweep_end(sweep_round *w);
/* Runs a whole round: sweep_begin, every pair, sweep_end. Errors as theirs. */
vstatus sweep_run(const sweep_opts *o, const ds_model *m, sweep_result *res);
void sweep_result_free(sweep_result *res);

#endif
