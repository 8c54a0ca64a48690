/* The decode-path interface: a struct of function pointers, as ggml backends and
 * nccl-tests' test engines are. Paths: "cpu-ref" (plain C, fp32), "cuda-ref" (plain
 * kernels + cuBLAS, bf16), "latency" (the optimized path). A user's own path can be
 * loaded from a shared library that exports `vouch_path_ops`.
 *
 * One forward() call is one engine step over a batch of sequences. Each sequence brings
 * 1..N new tokens at consecutive positions starting at start_pos (its cached length):
 * prefill (N = prompt), decode (N = 1), speculative verification (N = K+1, causal within
 * the draft). Steps may mix sequences at different positions. */
#ifndef VOUCH_COMMON_PATH_H
#define VOUCH_COMMON_PATH_H

#include <stdbool.h>
#include <stdint.h>

#include "common/trace.h"
#include "common/vstatus.h"

struct ds_model_s;

typedef struct {
  int n_seq;              /* sequences in the step */
  const int *seq;         /* [n_seq] cache slot of each sequence, 0 <= seq < max_seq, distinct */
  const int *n_tokens;    /* [n_seq] new tokens of each sequence, >= 1 */
  const int *start_pos;   /* [n_seq] position of each sequence's first new token (its cached length) */
  const int32_t *tokens;  /* [sum n_tokens] new token ids, sequence after sequence */
  bool all_logits;        /* true: logits for every new token; false: for each sequence's last only */
  /* Routing override for benchmarks (uniform / zipf / recorded expert choices): NULL means the
   * checkpoint's router decides. Otherwise [n_moe_layers][sum n_tokens][top_k] expert ids that
   * replace the router's selection; the combine weights are still the router's sigmoid scores of
   * those experts (normalized and scaled as usual), so the compute stays realistic. */
  const int32_t *forced_experts;
} vstep;

static inline int vstep_total_tokens(const vstep *s) {
  int t = 0;
  for (int i = 0; i < s->n_seq; i++) t += s->n_tokens[i];
  return t;
}
static inline int vstep_logit_rows(const vstep *s) {
  return s->all_logits ? vstep_total_tokens(s) : s->n_seq;
}

typedef struct {
  int max_seq;            /* KV cache slots */
  int max_ctx;            /* positions per slot (<= max_position_embeddings) */
  int n_threads;          /* CPU threads (0: all cores) */
  int device;             /* GPU ordinal for CUDA paths */
  const char *variant;    /* force a kernel variant by name (NULL: the path chooses) */
  vtrace *trace;          /* events go here; may be NULL. vpath_open (suites/paths/paths.h) gives the path its own
                           * tally (common/trace.h) and tees the events here */
  bool expect_fallback;   /* the caller declares a hand-over of this path to another one expected
                           * (--expect-fallback): vpath_open and its steps then do not fail on one (the
                           * records still name it); false: a path under test that falls back is an error */
  int tp;                 /* tensor-parallel degree for vpath_open (0 or 1: none; docs/tensor-parallel.md) */
  const struct vcomm *comm; /* set by the TP wrapper: this rank's communicator (common/comm.h); the model
                           * is then the rank's shard (model/shard.h). NULL: the path runs unsharded */
  bool dcp;               /* decode context parallelism over the TP ranks: the KV cache split by position
                           * (p % tp == rank), partial attention per rank combined by log-sum-exp
                           * (docs/tensor-parallel.md); needs tp >= 1; cpu-ref and latency (its latent
                           * cache: each rank holds ceil(max_ctx / tp) positions per slot) */
  bool ep;                /* expert parallelism over the TP ranks: rank r owns the routed experts
                           * [r*E/tp, (r+1)*E/tp) whole (E divisible by tp) and computes only those; the
                           * router stays replicated, the shared expert and the rest split as under TP; the
                           * MoE all-reduce sums the ranks (model/shard.h, docs/tensor-parallel.md); needs
                           * tp >= 1; cpu-ref only. Combines with dcp */
} vpath_opts;

/* How a path runs under tensor parallelism (vpath_caps.tp; docs/tensor-parallel.md). */
typedef enum {
  VPATH_TP_NONE = 0, /* none: --tp N and NAME:tpN are refused with the reason */
  VPATH_TP_THREADS,  /* simulated ranks: threads of this process with in-memory communicators (cpu-ref) */
  VPATH_TP_NCCL,     /* one GPU per rank with NCCL: all ranks in one process, or one process per GPU
                      * started by a launcher (common/comm.h) */
  VPATH_TP_KINDS     /* the number of kinds (for validating a loaded path's declaration) */
} vpath_tp_kind;

/* The step shapes a path enumerates its choices over (vpath_ops.selectable): every step of 1..max_batch
 * sequences, each bringing 1 token (decode) or, when max_tokens > 1, max_tokens tokens (speculative
 * verification, logits for every token), at cached lengths 0..max_context (uniform, and ragged: one
 * sequence at the length, the others at the start), with the checkpoint's router and, for a model with
 * MoE layers, with forced experts. */
typedef struct vpath_envelope {
  int max_batch;    /* sequences per step, >= 1 */
  int max_context;  /* cached positions before the step, >= 0 (the open's max_ctx bounds it) */
  int max_tokens;   /* tokens per sequence of a verification step (K+1); 1: decode steps only */
} vpath_envelope;

/* What a path can do, declared by the path in its ops (`caps`): the runner and the suites decide by
 * these fields and never by a path's name or its ops pointer (docs/plugins.md). All zero: the path
 * places its weights itself, runs unsharded only, and has the plain byte model. Other
 * capabilities are declared by the presence of an optional function: fill_cache (pure-decode
 * workloads), last_step_ms (a device timer), last_experts (routed experts for the roofline); and per
 * step by supports() (multi-token steps, batch and context envelopes). */
typedef struct {
  bool host_weights;      /* open() reads the weights from host memory, so callers open the model with a
                           * host copy (ds_model_open's `host`: synthetic tensors materialized), and its steps
                           * read them there: a host path (the sweep's roofline takes the host's bandwidth, the
                           * dry run prices it on the host); false: the path generates or uploads each tensor
                           * itself (the GPU paths) */
  vpath_tp_kind tp;       /* tensor parallelism through the TP wrapper (reference/cpu/cpu_tp.h): each rank's
                           * open() gets its shard and vpath_opts.comm */
  bool dcp;               /* honours vpath_opts.dcp (KV cache split by position over the TP ranks); needs tp */
  bool ep;                /* honours vpath_opts.ep (whole routed experts per TP rank); needs tp */
  const char *no_dcp_why; /* when dcp is false: why, appended to the refusal (": its ... cache is ..."); NULL:
                           * no reason given */
  const char *no_ep_why;  /* when ep is false: why, appended to the refusal (": ..."); NULL: none given */
  /* Byte model under TP (the sweep's roofline): true when `variant` (the text after '@' in the path's
   * name; never NULL) makes each rank read only ceil(rows / tp) of the input projections q_a|kv_a (with
   * q LoRA) and of the router, their outputs all-gathered. NULL: every rank reads those whole. */
  bool (*tp_splits_inputs)(const char *variant);
} vpath_caps;

typedef struct vpath_ops {
  const char *name;       /* "cpu-ref", "cuda-ref", "latency" */
  const char *desc;       /* one line for --help */
  /* Builds the path's state for model m (weights uploaded/generated, caches sized). */
  vstatus (*open)(void **state, const struct ds_model_s *m, const vpath_opts *o);
  /* V_OK when the path can run this step itself; V_UNSUPPORTED with the reason otherwise. */
  vstatus (*supports)(void *state, const vstep *s);
  /* Runs the step; writes logits [vstep_logit_rows(s), vocab] float32 (host memory). */
  vstatus (*forward)(void *state, const vstep *s, float *logits);
  /* Forgets sequence slot `seq` (its cache is reused from position 0). */
  vstatus (*reset)(void *state, int seq);
  /* Fills the KV cache of slot `seq` positions [0, len) with synthetic values (pure-decode
   * benchmarks, long-context divergence): deterministic from `seed`, no prefill compute. Every
   * path uses the same rule, so their caches hold the same state: for layer l and position p
   * the compressed vector ckv[p] (kv_lora latent | rope k_rot, pre-norm, pre-RoPE) is
   *   ckv[p][i] = bf16(philox_symmetric(philox_key(seed, "kvfill.L<l>"), p*(kv_lora+rope) + i))
   * and the path then runs its normal cache-write ops on it (kv_a_layernorm, kv_b_proj for
   * expanded caches, RoPE on k_rot at position p). NULL when unsupported. */
  vstatus (*fill_cache)(void *state, int seq, int len, uint64_t seed);
  /* Device time of the last forward() in milliseconds, measured with events around its device
   * work (GPU paths); NULL for host paths (callers then use the wall clock). */
  double (*last_step_ms)(void *state);
  void (*close)(void *state);
  /* KV layout hint for roofline byte counts (suites/sweep): true when the path caches the MLA
   * latent (kv_lora + rope per position per layer), false for HF's expanded per-head K/V. */
  bool latent_kv;
  /* Experts the last forward() really selected, for roofline byte counts under the checkpoint's
   * own router (suites/sweep): the mean over MoE layers of the number of distinct routed experts
   * chosen in that step (all token rows of the step together; forced ids count too). Negative when
   * unknown (no step run yet, no MoE layer). Must not add to last_step_ms (read the ids outside the
   * timed work). NULL when the path cannot tell. */
  double (*last_experts)(void *state);
  /* What the path can do (above). The CUDA paths' positional initializers end here: a member added
   * below is zero in them and must be optional (NULL: not provided). */
  vpath_caps caps;
  /* ---- VOUCH_PATH_ABI 2 (suites/paths/plugin.h; a library of ABI 1 has none of these: NULL) ---- */
  /* The (op, variant) pairs the path's own selection rules can pick for steps within env on this open
   * path (its model shape, TP degree, dcp, variant words): one TR_RAN event per pair in `out` (a tally,
   * common/trace.h) in the path's own trace names (those its forward() records), path the path's name,
   * detail the condition of the first step shape that selects it ("batch 8 x 1 token, context 64k").
   * Computed by the same rule functions the step runs, never a second list (issue 37: the coverage
   * table joins this set with what the plan's records say ran). A path that hands every step to
   * another records that fallback event (TR_FALLBACK) instead. Error: the path cannot enumerate on
   * this open (out holds what was found before). NULL: the path does not enumerate its choices. */
  vstatus (*selectable)(void *state, const struct vpath_envelope *env, vtrace *out);
} vpath_ops;

/* True when the comma-separated `variant` has the word w ("tp_nccl,tp_split_in" has "tp_split_in").
 * For a path's own parser of its variant words (tp_splits_inputs). */
bool vpath_variant_has_word(const char *variant, const char *w);

/* What a path can accept, for vstep_validate. */
typedef struct {
  const char *path;   /* path name, for messages */
  int max_seq;        /* cache slots opened */
  int max_ctx;        /* positions per slot opened */
  const int *cached;  /* [max_seq] cached positions per slot */
  int vocab;          /* token ids must be in [0, vocab) */
  int n_moe;          /* MoE layers: forced_experts is [n_moe][tokens][top_k] (0: not checked) */
  int top_k;          /* experts per token */
  int n_experts;      /* forced ids must be in [0, n_experts), distinct per token */
} vstep_limits;

/* Checks a step against a path's limits, the same way for every path: V_UNSUPPORTED (with the
 * reason) when it exceeds what was opened (slot >= max_seq, positions past max_ctx), V_ERR when
 * it is malformed (no sequences, NULL arrays, n_tokens < 1, a negative slot or position, a gap
 * after the cached length, a slot used twice, a token or forced expert out of range). */
vstatus vstep_validate(const vstep *s, const vstep_limits *lim);

/* An open path. */
typedef struct {
  const vpath_ops *ops;
  void *state;
  vpath_opts opts;
} vpath;

#endif
