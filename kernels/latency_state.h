/* The latency path's state and what its files share (internal to kernels/latency*.cu; the
 * path's interface is kernels/latency.h). The path is split by responsibility:
 *   kernels/latency.cu       the vpath ops (supports, forward with its fallbacks, reset, fill)
 *                            and the extras of latency.h
 *   kernels/latency_step.cu  one step: the GEMM table and variant choice, attention, MoE, TP
 *                            reductions, the enqueued step, its CUDA graphs (keyed by shape)
 *   kernels/latency_open.cu  open and close: weights, workspace, the variant words
 * and the kernels themselves in kernels/latency_*.cu (latency_kernels.h). */
#ifndef VOUCH_KERNELS_LATENCY_STATE_H
#define VOUCH_KERNELS_LATENCY_STATE_H

#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_ref.h"
#include "reference/cuda/cuda_ref_kernels.h"
#include "reference/cuda/cuda_pdl.h"
#include "kernels/latency.h"
#include "kernels/latency_kernels.h"
#include "kernels/latency_tp.h"
extern "C" {
#include "model/mem_estimate.h"
#include "model/shard.h"
}

#define PATH_NAME "latency"
#define TC 64       /* most token rows of one graph step (and of one fallback chunk) */
#define MAX_TPS 8   /* most tokens per sequence inside the envelope (K+1) */
#define MAX_GRAPHS 48
#define WS_BYTES ((size_t)32 << 20)
#define FILL_ROWS 256
#define MAX_OPEV 200 /* per-op profile events of one step */
/* The table for MLA decode (measured on the H200, k2-slice 2 layers, docs/perf-notes.md): v2_gemm
 * (tensor cores via cuBLAS) from 8 token rows at every context (1.08x at 1k .. 14x at 128k for
 * batch 64), v1_split below (v2_gemm is 0.2x-1.0x at batch 1: cuBLAS's choice for one row). */
#define GEMM_ATTN_MIN_ROWS 8
/* v3_mma (kernels/latency_mla_mma.cu) replaces both wherever its dimensions are supported: the
 * key is read once per token row and head block, scores stay on chip. */
/* ... except from GEMM_ATTN_MIN_ROWS rows at more than this many keys, where v2_gemm measured
 * faster (H200, k2-slice 2 layers: batch 8 at 128k 5.4 vs 8.7 ms, batch 64 23.7 vs 31.7 ms). */
#define ATTN_MMA_MAX_KEYS_MANY_ROWS 65536
/* The table's one exception to v3_mma: v2_gemm for T rows over at most max_keys keys. */
static inline bool table_prefers_gemm(int T, int max_keys) {
  return T >= GEMM_ATTN_MIN_ROWS && max_keys > ATTN_MMA_MAX_KEYS_MANY_ROWS;
}

/* The GEMM table's columns (g_gemm_table, kind_of). */
enum { KIND_DENSE, KIND_WIDE, KIND_MOE, KIND_HEADS, KIND_HEADS_O, N_KINDS };

/* Device weights and cache of one decoder layer (bf16 unless noted). */
typedef struct {
  const uint16_t *in_norm, *post_norm;      /* [D] */
  const uint16_t *wa;                       /* [NA, D]: q_a (or q_proj) rows, then kv_a_proj_with_mqa rows; NULL
                                               when only this rank's block was uploaded (TP, split inputs) */
  const uint16_t *wa_blk;                   /* TP: [na_n, D] rows [na_r0, na_r0 + na_n) of wa (own copy or into wa) */
  const uint16_t *q_a_norm;                 /* [ql]; NULL without q LoRA */
  const uint16_t *q_b;                      /* [H*dk, ql]; NULL without q LoRA */
  const uint16_t *kv_a_norm;                /* [kl] */
  const uint16_t *kv_b;                     /* [H*(n+v), kl] */
  uint16_t *wukt;                           /* [H, kl, n] W_UK transposed per head */
  const uint16_t *o_proj;                   /* [D, H*v] */
  bool is_moe;
  int moe_index;                            /* index among the MoE layers, -1 for dense */
  const uint16_t *gu, *down;                /* dense: [2I, D] gate/up interleaved by 8 rows, [D, I] */
  const uint16_t *router;                   /* [E, D]; NULL when only this rank's block was uploaded */
  const uint16_t *router_blk;               /* TP: [e_n, D] experts [e_r0, e_r0 + e_n) of router */
  const float *router_bias;                 /* [E] float32 or NULL */
  const uint16_t **d_egu, **d_edown;        /* device arrays [E]: expert [2F, D] interleaved, [D, F] */
  const uint16_t *sh_gu, *sh_down;          /* shared expert [2Fs, D] interleaved, [D, Fs]; NULL without */
  uint16_t *cache;                          /* latent cache [max_seq, lctx, kl + r] (DCP: this rank's positions) */
} llayer;

/* How a step's MLA attention runs (chosen per step by lt_run_core; part of the graph key). */
typedef enum {
  LT_ATTN_SPLIT, /* v1_split: split-KV partials over the latent cache, then an LSE combine */
  LT_ATTN_GEMM,  /* v2_gemm: cuBLAS QK^T, softmax, PV over a bucket of lt_step_key.gemm_keys keys */
  LT_ATTN_MMA,   /* v3_mma: a token's heads as the M side of mma.sync, 32-head blocks */
  LT_ATTN_MMA16, /* v3_mma with 16-head blocks (lat_mla_mma_heads) */
} lt_attn_kind;

/* What one enqueued step's kernels depend on beyond the device buffers' contents: its CUDA-graph
 * key. Two steps with equal keys replay one graph, so every choice made per step is in here. */
typedef struct {
  int T;              /* token rows */
  int R;              /* logit rows (R <= T) */
  int S_att;          /* KV splits of v1_split / v3_mma (1 for v2_gemm) */
  bool forced;        /* routing from vstep.forced_experts (the router kernels differ) */
  lt_attn_kind attn;  /* the attention kernel */
  int gemm_keys;      /* LT_ATTN_GEMM: keys of its bucket (lat_mla_gemm_ncap), else 0 */
} lt_step_key;

/* The attention kernel a path instance was asked for (variant words attn_split, attn_gemm, attn_mma). */
typedef enum {
  LT_ATTN_TABLE,      /* the table: v3_mma where supported, v2_gemm from GEMM_ATTN_MIN_ROWS rows (and above
                         ATTN_MMA_MAX_KEYS_MANY_ROWS keys), else v1_split */
  LT_ATTN_WANT_SPLIT, /* v1_split everywhere */
  LT_ATTN_WANT_GEMM,  /* v2_gemm everywhere it fits */
  LT_ATTN_WANT_MMA,   /* v3_mma everywhere */
} lt_attn_mode;

/* One captured step shape. */
typedef struct {
  lt_step_key key;                          /* key.T < 0: a failed capture, never matched */
  cudaGraphExec_t exec;
  vtrace_event *ev;                         /* [n_ev] trace events recorded at capture, replayed */
  int n_ev, cap_ev;
} gentry;

typedef struct {
  const ds_model *m;
  ds_config c;
  vpath_opts opt;
  vtrace *trace;
  int64_t steps;
  bool last_whole;                          /* the last forward() ran as one in-envelope step (n_act covers it) */
  char info[384];
  /* delegate: unsupported config -> cuda-ref does everything */
  void *ref;                                /* cuda-ref state, or NULL */
  char ref_reason[160];
  /* sizes */
  int D, H, nope, rope, v, dk, ql, kl, E, K, F, Fs, I, V, NA, W, n_moe, G, TG;
  float eps, scale, attn_factor;
  int sms;
  /* choices */
  bool use_graphs;
  bool pdl;                                 /* kernels launched with programmatic dependent launch (default;
                                               variant word no_pdl turns it off; reference/cuda/cuda_pdl.h) */
  bool pdl_hw;                              /* the device has it (sm_90 and newer) */
  bool router_gemm;                         /* variant word router_gemm: router logits as a GEMM, not one grid */
  bool no_persist;                          /* variant word no_persist: the cp.async GEMMs one CTA per work item */
  bool shared_late;                         /* the shared expert forks to stream 2 after the router (default,
                                               word shared_late), or beside it (word shared_early) */
  int shared_variant;                       /* GEMM variant of the shared expert (word shared=NAME), 0: table */
  int force_variant;                        /* 0: table */
  int force_kind[N_KINDS];                  /* per table column (KIND_*): 0 table, else the variant */
  int tp_mode;                              /* LAT_TP_*: how block outputs are reduced under TP (AUTO: per step) */
  lt_attn_mode attn_mode;                   /* the attention kernel asked for (the table by default) */
  bool mma_ok;                              /* lat_mla_mma_supported for this model's (local) heads and dims */
  lat_mla_gemm_ws ag;                       /* v2_gemm workspace (ag.rows 0: not allocated, v1_split only) */
  char ag_why[160];                         /* why v2_gemm is unavailable */
  /* tensor parallelism (model/shard.h, kernels/latency_tp.h); comm NULL = unsharded */
  const vcomm *comm;                        /* this rank's communicator */
  lat_tp tp;                                /* reduce buffers and peer pointers (comm != NULL) */
  int v0, v1, vblk;                         /* lm_head rows cover vocab [v0, v1); gather blocks of vblk */
  float *lg_local;                          /* [TC, vblk] this rank's logit block (pad columns stay 0) */
  float *lg_all;                            /* [N, TC, vblk] gathered blocks */
  /* TP split input projections: each rank multiplies a row block of wa / the router, all-gathers */
  bool tp_rep_in;                           /* wa and router whole on every rank (the default; variant
                                               tp_split_in: row blocks per rank, all-gathered) */
  bool wa_whole, router_whole;              /* the whole wa / router is on the device (else blocks only) */
  int na_blk, na_r0, na_n;                  /* wa rows [na_r0, na_r0 + na_n) of NA; blocks of na_blk rows */
  int e_blk, e_r0, e_n;                     /* router rows (experts) [e_r0, e_r0 + e_n) of E; blocks of e_blk */
  uint16_t *qkva_loc;                       /* [TC, na_blk] this rank's block of qkva (pad columns stay 0) */
  uint16_t *qkva_all;                       /* [N, TC, na_blk] gathered blocks */
  float *rl_loc;                            /* [TC, e_blk] this rank's router logits (pad columns stay 0) */
  float *rl_all;                            /* [N, TC, e_blk] gathered blocks */
  /* decode context parallelism (kernels/latency_dcp.cu): the latent cache split by position */
  bool dcp;                                 /* opened with vpath_opts.dcp: over comm's ranks */
  int dcp_n, dcp_rank;                      /* DCP ranks and this rank (1, 0 without DCP) */
  int Ha;                                   /* heads the attention kernels run: all H * dcp_n under DCP, else H */
  int lctx;                                 /* cache rows per slot: ceil(max_ctx / dcp_n) */
  int32_t *d_lpos;                          /* [TC] DCP: last visible local key index per row (-1: none) */
  float *dq_loc, *dq_all;                   /* [TC, H, kl + r], [N, TC, H, kl + r] absorbed queries sent / gathered */
  float *qlat_all;                          /* [TC, Ha, kl] every head's q_lat, unsharded head order */
  uint16_t *qrot_all;                       /* [TC, Ha, r] every head's rotated q_rot */
  float *dpart, *dpart_all;                 /* [TC, Ha, kl + 1], [N, TC, Ha, kl + 1] merged partials (o | lse) */
  /* CUDA */
  cudaStream_t st, st2;
  cublasHandle_t blas, blas2;
  cudaEvent_t ev_fork, ev_join, ev0, ev1;
  float last_ms;
  /* allocations */
  void **allocs;
  int n_allocs, cap_allocs;
  /* weights */
  const uint16_t *embed, *final_norm, *lm_head;
  llayer *L;
  float *inv_freq;                          /* [r/2] */
  uint16_t *tmp;                            /* staging for interleaved gate/up, [max rows, D] */
  /* workspace (TC rows) */
  float *x;                                 /* [TC + LAT_TP_MAX, D] residual stream (rows past TC: TP padding) */
  uint16_t *xn;                             /* [TC + LAT_TP_MAX, D] */
  uint16_t *qkva;                           /* [TC, NA] */
  uint16_t *qan;                            /* [TC, ql] */
  uint16_t *q;                              /* [TC, H*dk] */
  float *qlat;                              /* [TC, H, kl] */
  float *pm, *pl, *pacc;                    /* [PR, Ha], [PR, Ha], [PR, Ha, kl] attention partials */
  int PR;                                   /* rows x splits the partials hold */
  uint16_t *olat;                           /* [TC, H, kl] */
  uint16_t *attn;                           /* [TC, H*v] */
  uint16_t *y;                              /* [TC, D] */
  uint16_t *act;                            /* [TC, I] */
  float *rl;                                /* [TC, E] router logits */
  int32_t *idx;                             /* [TC, K] */
  float *wt;                                /* [TC, K] */
  int32_t *n_act;                           /* [n_moe] */
  int32_t *rctr;                            /* [1] lat_router_fused's block counter (zero between kernels) */
  int32_t *act_e, *act_off, *act_cnt;       /* [E] */
  int32_t *perm_tok, *perm_pair;            /* [TC*K] */
  uint16_t *hbuf;                           /* [TC*K, F] */
  uint16_t *Ybuf;                           /* [TC*K, D] */
  uint16_t *ash, *ysh;                      /* [TC, Fs], [TC, D] */
  int32_t *d_tok, *d_slot, *d_pos, *d_rows; /* [TC] */
  int32_t *d_forced;                        /* [n_moe, TC, K] */
  float *logits;                            /* [TC, V] */
  float *ws1, *ws2;                         /* split-K scratch per stream */
  uint16_t *fill_ckv;                       /* [FILL_ROWS, W] */
  int32_t *fill_slot, *fill_pos;            /* [FILL_ROWS] */
  /* host (pinned) */
  int32_t *h_tok, *h_slot, *h_pos, *h_rows, *h_forced;
  int *len;                                 /* [max_seq] cached positions per slot */
  /* graphs */
  gentry graphs[MAX_GRAPHS];
  int n_graphs, next_evict;
  gentry *rec;                              /* capture in progress: trace events go here too */
  /* profiling */
  bool prof;
  cudaEvent_t pev[64];
  int pphase[64];
  int n_pev;
  cudaEvent_t oev[MAX_OPEV + 1];            /* [0]: step start, then one after each traced op */
  char olab[MAX_OPEV + 1][64];              /* op label of oev[i] */
  int n_oev;
} lstate;

/* ---- shared by the path's files ---- */

/* kernels/latency_step.cu: the step, its kernels' choice and its graphs */
extern const char *const lt_kind_names[N_KINDS]; /* the variant words of the GEMM table's columns, by KIND_* */
/* Adds one trace event (op, variant, printf detail) to the open trace and the graph being captured. */
void lt_trace(lstate *S, const char *op, const char *variant, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The GEMM table's variant for T rows in column `kind` (KIND_*). */
int lt_table_variant(int T, int kind);
/* The GEMM table's column of a GEMM (grouped experts, per-head batched, wide or dense). */
int lt_kind_of(bool grouped, int Z, int ep, int N, int K);
/* The GEMM variant for T rows of column `kind`: a forced word where it takes T rows, else the table's. */
int lt_pick_variant(const lstate *S, int T, int kind, int first);
/* Under TP with split inputs: wa / the router are multiplied by row blocks and all-gathered. */
bool lt_split_wa(const lstate *S);
bool lt_split_router(const lstate *S);
/* Frees one captured graph and its replayed trace events. */
void lt_graph_free(gentry *g);
/* Runs one in-envelope step of T token rows and R logit rows over at most max_keys keys, from a
 * captured graph when `graph` (capturing it first), else enqueued directly; *ms: its device time. */
vstatus lt_run_core(lstate *S, int T, int R, int max_keys, bool forced, bool graph, float *ms);
/* The step key lt_run_core runs T rows under (positions in S->h_pos[0..T), at most max_keys keys, R logit
 * rows): the attention kernel, its splits, its key bucket. */
lt_step_key lt_choose_key(const lstate *S, int T, int R, int max_keys, bool forced);
/* The cuda_graph event's variant for a step whose graph was captured now (or replayed). */
const char *lt_graph_event(bool captured);
/* The trace events the step of key k records, without running it: the step is enqueued into a stream
 * capture that is discarded (no kernel runs, the caller's trace gets nothing). g (overwritten) holds them;
 * lt_graph_free frees them, also on error (the capture failed: named). */
vstatus lt_capture_events(lstate *S, const lt_step_key *k, gentry *g);
/* The next chunk of step s into the host arrays (h_tok, h_slot, h_pos, h_rows; seq_of, j_of [TC] when not
 * NULL: each row's sequence and token in it): at most TC consecutive tokens (flat order) from token t0,
 * which is token *j of sequence *i (both advanced past the chunk). *R: its logit rows (each sequence's
 * last token, or every row with all_logits; at least one: lm_head needs a row, its logits dropped),
 * *max_keys: its longest row's keys. Returns the chunk's tokens (t0 < total tokens). */
int lt_fill_chunk(lstate *S, const vstep *s, int t0, int *i, int *j, int *R, int *max_keys, int *seq_of, int *j_of);
/* kernels/latency_selectable.cu: vpath_ops.selectable (common/path.h), over lt_fill_chunk, lt_choose_key
 * and lt_capture_events: the choices lt_forward makes for every step shape of env. */
extern "C" vstatus latency_selectable(void *st, const vpath_envelope *env, vtrace *out);
/* Error unless step s fits the opened model and cache (slots, positions, token ids). */
vstatus lt_check_step(lstate *S, const vstep *s);
/* Why step s is outside the graphs' envelope, and (*to) the mode latency's own kernels run it in instead
 * ("prefill-chunked", "chunked": eager chunks of <= TC tokens; not a hand-over to another path). */
void lt_envelope_reason(const vstep *s, char *why, size_t n, const char **to);

/* kernels/latency_open.cu: weights, workspace, variant words; lt_open and lt_close are the
 * build / free pair (vpath_ops.open and .close) */
/* Allocates v2_gemm's attention workspace where it fits (else S->ag_why says why not). */
void lt_alloc_gemm_attention(lstate *S);
/* Applies the variant words to S's choices. Error names the word. */
vstatus lt_parse_variant(lstate *S, const char *variant);
/* vpath_ops.open: the path's state for model m, or cuda-ref's delegate where m is unsupported. */
vstatus lt_open(void **state, const ds_model *m, const vpath_opts *o);
/* vpath_ops.close: frees everything lt_open made (also a half-opened state). */
void lt_close(void *st);

#endif
