/* The "latency" decode path (see latency.h): weights, latent cache, the step plan, CUDA
 * graphs per step shape, fallbacks. Per step (T token rows, R logit rows):
 *   embed + rmsnorm -> per layer:
 *     [q_a | kv_a] GEMM -> prep (q_a norm, kv norm, RoPE k_rot, latent cache store) -> q_b GEMM
 *     -> RoPE(q_rot) (v3_mma: as it loads q) -> absorbed q (batched GEMM over heads, W_UK^T)
 *     -> split-KV attention over the latent cache -> LSE combine -> W_UV (batched GEMM)
 *     -> o_proj GEMM -> add + rmsnorm
 *     dense: [gate|up] GEMM with SwiGLU epilogue -> down GEMM -> add + rmsnorm (next norm)
 *     MoE:   shared expert on stream 2 || router GEMM -> top-k -> buckets (T <= 4: one grid)
 *            -> grouped gate/up (SwiGLU) -> grouped down -> join -> combine + residual + next norm
 *   -> lm_head GEMM on the logit rows (fp32).
 * Every kernel of the path is launched with programmatic dependent launch while a step is
 * enqueued (reference/cuda/cuda_pdl.h; variant word no_pdl turns it off).
 * Under TP N > 1 (kernels/latency_tp.h) block outputs are fp32 partials reduced with the residual
 * + next norm, lm_head runs on the rank's vocabulary block; the replicated [q_a | kv_a] and router
 * GEMMs run whole on every rank, or with variant tp_split_in split by rows: each rank multiplies
 * its block, the blocks are all-gathered and placed.
 * Under DCP (vpath_opts.dcp, kernels/latency_dcp.cu) the latent cache is split by position over
 * the TP ranks: each rank stores the positions p % N == rank, all-gathers the absorbed queries,
 * attends all heads over its own positions, all-gathers the merged (o | lse) partials and combines
 * its own heads by log-sum-exp before W_UV. */
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
 * key is read once per token row and head block, scores stay on chip. In the step functions
 * the attention choice travels as `ncap` (part of the graph key): ATTN_MMA selects it. */
#define ATTN_MMA (-1)
#define ATTN_MMA16 (-2) /* v3_mma with 16-head blocks (lat_mla_mma_heads) */
/* ... except from GEMM_ATTN_MIN_ROWS rows at more than this many keys, where v2_gemm measured
 * faster (H200, k2-slice 2 layers: batch 8 at 128k 5.4 vs 8.7 ms, batch 64 23.7 vs 31.7 ms). */
#define ATTN_MMA_MAX_KEYS_MANY_ROWS 65536
/* The table's one exception to v3_mma: v2_gemm for T rows over at most max_keys keys. */
static bool table_prefers_gemm(int T, int max_keys) {
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

/* One captured step shape. */
typedef struct {
  int T, R, S_att, forced, ncap;            /* the key (ncap > 0: v2_gemm attention over ncap keys) */
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
  int attn_mode;                            /* 0: table (v3_mma where supported, else v2_gemm from
                                               GEMM_ATTN_MIN_ROWS rows), 1: v1_split, 2: v2_gemm, 3: v3_mma */
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

/* ---- trace ---- */

static void tr_add(lstate *S, const char *op, const char *variant, const char *detail) {
  if (S->prof && S->n_oev < MAX_OPEV && strcmp(op, "cuda_graph") != 0) {
    /* per-op timing: an event after each traced launch on the main stream */
    if (cudaEventRecord(S->oev[S->n_oev], S->st) == cudaSuccess) {
      int n = 0;
      while (detail[n] && n < 40 && !(detail[n] == ' ' && (detail[n + 1] == '[' || detail[n + 1] == '('))) n++;
      snprintf(S->olab[S->n_oev], sizeof S->olab[0], "%s %.*s", op, n, detail);
      S->n_oev++;
    }
  }
  if (S->rec) {
    gentry *g = S->rec;
    if (g->n_ev == g->cap_ev) {
      const int cap = g->cap_ev ? 2 * g->cap_ev : 64;
      vtrace_event *nv = (vtrace_event *)realloc(g->ev, (size_t)cap * sizeof *nv);
      if (nv) g->ev = nv, g->cap_ev = cap;
    }
    if (g->n_ev < g->cap_ev) {
      vtrace_event *e = &g->ev[g->n_ev++];
      memset(e, 0, sizeof *e);
      snprintf(e->op, sizeof e->op, "%s", op);
      snprintf(e->variant, sizeof e->variant, "%s", variant);
      snprintf(e->detail, sizeof e->detail, "%s", detail);
    }
  }
  if (S->trace && S->trace->enabled) vtrace_ran(S->trace, PATH_NAME, op, variant, detail);
}

static void tr(lstate *S, const char *op, const char *variant, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void tr(lstate *S, const char *op, const char *variant, const char *fmt, ...) {
  if (!S->rec && !S->prof && !(S->trace && S->trace->enabled)) return;
  char d[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d, sizeof d, fmt, ap);
  va_end(ap);
  tr_add(S, op, variant, d);
}

static const char *bucket_name(int T) {
  return T <= 2 ? "1-2" : T <= 8 ? "3-8" : T <= 16 ? "9-16" : T <= 32 ? "17-32" : "33-64";
}

/* GEMM variant per batch bucket: `dense` for the dense GEMMs, `wide` for the large dense ones
 * without a SwiGLU epilogue (N >= 4096 and N*K >= 32M: o_proj, the dense down_proj, lm_head),
 * `moe` for the grouped expert GEMMs (MoE mode never runs cuBLAS), `heads` for the per-head
 * batched ones (heads: W_UK-shaped, heads_o: W_UV-shaped). Variant words dense=, wide=, moe=,
 * heads= (both per-head columns), heads_o= override a column.
 * Based on H200 per-op timings at batch 1, 8 and 64 (k2-slice, docs/perf-notes.md, "v2"):
 *   1-2, 3-8: v6 beat v1 on the narrow dense GEMMs (q_a 59 vs 65 us, q_b 52 vs 56); cuBLAS won
 *             the wide ones (lm_head 529 vs 574 us with v6, 805 with v1; o_proj, down); experts:
 *             v6 at batch 1 (414 vs 479 us with v1; v9 419), v9 at batch 8 (2248 vs 2303 v6, 2710 v1).
 *   33-64:    cuBLAS won every dense GEMM but q_a (lm_head 582 vs 2622 us with v4) and won the sum;
 *             experts v9 (6619 vs 8868 us with v4).
 *   9-16, 17-32 were not measured: interpolated (v7 / cuBLAS dense, v9 experts).
 *   fourth session (PDL, graph replay, k2-slice ctx 1k): o_proj on v6 at batch 1 ran 131 vs 197 us
 *             in the eager per-op profile but the graph step was 1.609 vs 1.593 ms with cuBLAS
 *             (the eager profile charges cuBLAS its host-side launch): wide stays cuBLAS.
 *   heads (fourth session): the per-head batched GEMMs of the MLA absorption (W_UK: K 128, W_UV:
 *             K 512): v10 (a warp per 16 rows) at 1-8: step 1.606 vs 1.616 ms at batch 1, 3.591
 *             vs 3.620 at batch 8 with v6, which left 6 of its 8 warps without a chunk at K 128.
 *   moe 1-8 (fourth session): v11 (32 rows per CTA, 3 stages): step 1.570 vs 1.580 ms at batch 1
 *             (v6), 3.409 vs 3.570 at batch 8 (v9; the grouped down GEMM 750 vs 854 us).
 *   moe 9-64 (fifth session): v11 too, since the cp.async variants take an expert's tokens in
 *             passes of their tile (an expert with more than 8 tokens reads its weights again):
 *             batch 64 step 7.687 vs 9.531 ms with v9 (v9 itself 8.314 before the persistent
 *             kernel; k2-slice has ~4 tokens per active expert at batch 64); 9-32 interpolated.
 *   heads_o 1-8 (fifth session): W_UV on v11 (32 rows per CTA, no split at K 512): 3.75 vs 6.18 us
 *             with v10 (bench_gemm), step 1.478 vs 1.490 ms at batch 1, 3.297 vs 3.320 at batch 8.
 *             W_UK stays v10: 4.84 us unsplit (cuBLAS 4.54, but a cuBLAS kernel ends the PDL chain;
 *             heads=v5_cublas step 1.482). */
static const char *const g_kind_names[N_KINDS] = {"dense", "wide", "moe", "heads", "heads_o"};
static const struct {
  int lo, hi, v[N_KINDS]; /* by KIND_* */
} g_gemm_table[] = {
    {1, 2, {LAT_V6_CP_N8, LAT_V5_CUBLAS, LAT_V11_CP_M2, LAT_V10_CP_W8, LAT_V11_CP_M2}},
    {3, 8, {LAT_V6_CP_N8, LAT_V5_CUBLAS, LAT_V11_CP_M2, LAT_V10_CP_W8, LAT_V11_CP_M2}},
    {9, 16, {LAT_V7_CP_N16, LAT_V5_CUBLAS, LAT_V11_CP_M2, LAT_V7_CP_N16, LAT_V7_CP_N16}},
    {17, 32, {LAT_V5_CUBLAS, LAT_V5_CUBLAS, LAT_V11_CP_M2, LAT_V5_CUBLAS, LAT_V5_CUBLAS}},
    {33, 64, {LAT_V5_CUBLAS, LAT_V5_CUBLAS, LAT_V11_CP_M2, LAT_V5_CUBLAS, LAT_V5_CUBLAS}},
};

static int table_variant(int T, int kind) {
  for (size_t i = 0; i < sizeof g_gemm_table / sizeof g_gemm_table[0]; i++)
    if (T >= g_gemm_table[i].lo && T <= g_gemm_table[i].hi) return g_gemm_table[i].v[kind];
  return LAT_V5_CUBLAS;
}

/* The table's column (KIND_*): grouped experts; per-head batched (Z > 1: the MLA absorptions,
 * "heads" for N > K as W_UK's 512 x 128, "heads_o" for N <= K as W_UV's 128 x 512); "wide" (no
 * SwiGLU epilogue, N >= 4096 and N*K >= 32M: o_proj, dense down, lm_head); the other dense GEMMs. */
static int kind_of(bool grouped, int Z, int ep, int N, int K) {
  if (grouped) return KIND_MOE;
  if (Z > 1) return N > K ? KIND_HEADS : KIND_HEADS_O;
  return ep != LAT_EP_SWIGLU && N >= 4096 && (long long)N * K >= (32LL << 20) ? KIND_WIDE : KIND_DENSE;
}

static int gemm_kind(const lat_gemm_args *a) { return kind_of(a->wptr != NULL, a->Z, a->ep, a->N, a->K); }

/* A forced variant where it takes T rows, else the table's: `first` (the shared expert's word on
 * stream 2, or 0), then the column's, then the one for all GEMMs (the more specific word wins).
 * MoE mode never takes cuBLAS; its cp.async variants take any T (token passes). */
static int pick_variant(const lstate *S, int T, int kind, int first) {
  const int f[3] = {first, S->force_kind[kind], S->force_variant};
  for (int i = 0; i < 3; i++)
    if (f[i] && (lat_gemm_variant_max_tokens(f[i]) >= T || (kind == KIND_MOE && f[i] >= LAT_V6_CP_N8)) &&
        !(kind == KIND_MOE && f[i] == LAT_V5_CUBLAS))
      return f[i];
  return table_variant(T, kind);
}

/* ---- profiling marks ---- */

static vstatus mark(lstate *S, int phase) {
  if (!S->prof || S->n_pev >= 64) return V_OK;
  CUDA_CHECK(cudaEventRecord(S->pev[S->n_pev], S->st));
  S->pphase[S->n_pev] = phase;
  S->n_pev++;
  return V_OK;
}

/* ---- GEMM wrapper ---- */

static vstatus gemm(lstate *S, lat_gemm_args *a, bool second_stream, const char *what) {
  a->ws = second_stream ? S->ws2 : S->ws1;
  a->ws_bytes = WS_BYTES;
  /* the shared expert on the second stream runs beside the routed experts: one CTA per item, so
   * the hardware scheduler shares the SMs between the two grids (a persistent grid would hold
   * them all) */
  a->max_ctas = S->no_persist || second_stream ? -1 : 0;
  const int v = pick_variant(S, a->T, gemm_kind(a), second_stream ? S->shared_variant : 0);
  int splits = 1, ran = v;
  VTRY(lat_gemm(a, v, S->sms, second_stream ? S->blas2 : S->blas, second_stream ? S->st2 : S->st, &splits, &ran));
  tr(S, "linear", lat_gemm_variant_name(ran), "%s [%d x %d]%s rows=%d bucket %s splits=%d", what, a->N, a->K,
     a->Z > 1 ? (a->wptr ? " grouped" : " batched") : "", a->T, bucket_name(a->T), splits);
  return V_OK;
}

/* ---- the step ---- */

/* TP N > 1 splits the replicated input projections by rows across the ranks when the variant
 * tp_split_in asks for it (docs/tensor-parallel.md). wa only with q LoRA: without
 * it, wa's q rows are q_proj, which is sharded by head, so each rank's wa is its own. */
static bool split_wa(const lstate *S) { return S->comm && S->comm->size > 1 && S->ql > 0 && !S->tp_rep_in; }
static bool split_router(const lstate *S) { return S->comm && S->comm->size > 1 && !S->tp_rep_in; }

/* TP, split input projection: this rank's block W ([n, D], rows [r0, r0 + n) of an n_total-row
 * weight) times xn into loc [T, blk] (columns >= n are never written: zero since open), the
 * all-gather of every rank's loc into all [N, T, blk], placed into out [T, n_total] (row stride
 * ld). f32: fp32 output (router logits), else bf16. unit names the rows in the trace. */
static vstatus tp_split_gemm(lstate *S, const uint16_t *W, int r0, int n, int blk, int n_total, void *loc, void *all,
                             void *out, int ld, bool f32, int T, const char *what, const char *unit) {
  const int N = S->comm->size;
  char d[112];
  snprintf(d, sizeof d, "%s block (%s %d-%d of %d, rank %d of %d)", what, unit, r0, r0 + n, n_total, S->comm->rank, N);
  lat_gemm_args a = lat_dense_args(W, S->xn, S->D, loc, blk, n, S->D, T, f32 ? LAT_EP_F32 : LAT_EP_BF16);
  VTRY(gemm(S, &a, false, d));
  VTRY(S->comm->allgather(S->comm, loc, all, (int64_t)T * blk, f32 ? DT_F32 : DT_BF16, S->st));
  VTRY(lat_tp_place_blocks(out, ld, all, N, T, blk, n_total, f32 ? 4 : 2, S->st));
  tr(S, "allgather", S->comm->name, "%s, tp=%d, %s blocks of %d x %d rows placed into [%d x %d]", what, N,
     f32 ? "fp32" : "bf16", blk, T, T, n_total);
  return V_OK;
}

/* DCP attention of one layer (kernels/latency_dcp.cu): all-gather of the absorbed queries, the
 * split-KV attention of all Ha heads over this rank's positions (local keys [0, d_lpos[t]]), the
 * local merge to (o | lse), all-gather of the merged partials, the log-sum-exp combine of this
 * rank's H heads into olat. mma: v3_mma, else v1_split (v2_gemm has no partials to combine). */
static vstatus dcp_attention(lstate *S, llayer *d, int T, int S_att, bool mma, int hb, const uint16_t *qsrc, int q_ld) {
  const int N = S->dcp_n, H = S->H, Ha = S->Ha, kl = S->kl, r = S->rope, w = kl + r;
  VTRY(lat_dcp_pack_q(S->dq_loc, S->qlat, qsrc, q_ld, S->dk, S->nope, T, H, kl, r, S->st));
  VTRY(S->comm->allgather(S->comm, S->dq_loc, S->dq_all, (int64_t)T * H * w, DT_F32, S->st));
  VTRY(lat_dcp_place_q(S->qlat_all, S->qrot_all, S->dq_all, N, T, H, kl, r, S->st));
  tr(S, "allgather", S->comm->name, "dcp=%d absorbed q|q_rot fp32 [%d x %d heads x %d] per rank -> all %d heads", N,
     T, H, w, Ha);
  if (mma) {
    VTRY(lat_mla_attn_mma(S->pm, S->pl, S->pacc, S->qlat_all, S->qrot_all, Ha * r, r, 0, d->cache, S->d_slot, S->d_lpos,
                          T, Ha, kl, r, S->lctx, S_att, hb, S->scale, NULL, S->st));
  } else {
    VTRY(lat_mla_attn(S->pm, S->pl, S->pacc, S->qlat_all, S->qrot_all, Ha * r, r, 0, d->cache, S->d_slot, S->d_lpos,
                      T, Ha, kl, r, S->lctx, S_att, S->scale, S->st));
  }
  tr(S, "mla_decode", mma ? "v3_mma" : "v1_split", "dcp rank %d of %d: latent %d+%d all H=%d, own positions p%%%d==%d, "
     "splits=%d rows=%d", S->dcp_rank, N, kl, r, Ha, N, S->dcp_rank, S_att, T);
  VTRY(lat_dcp_merge_local(S->dpart, S->pm, S->pl, S->pacc, T, Ha, kl, S_att, S->st));
  tr(S, "dcp_merge", "v1", "lse merge of %d splits -> o|lse fp32 H=%d rows=%d", S_att, Ha, T);
  VTRY(S->comm->allgather(S->comm, S->dpart, S->dpart_all, (int64_t)T * Ha * (kl + 1), DT_F32, S->st));
  tr(S, "allgather", S->comm->name, "dcp=%d partial o|lse fp32 [%d x %d heads x %d] per rank", N, T, Ha, kl + 1);
  VTRY(lat_dcp_combine(S->olat, S->dpart_all, N, T, Ha, H, S->dcp_rank * H, kl, S->st));
  tr(S, "dcp_combine", "v1", "lse combine of %d ranks, own heads %d-%d of %d, rows=%d", N, S->dcp_rank * H,
     S->dcp_rank * H + H, Ha, T);
  return V_OK;
}

static vstatus attention(lstate *S, llayer *d, int T, int S_att, int ncap) {
  const int H = S->H, n = S->nope, r = S->rope, kl = S->kl, dk = S->dk;
  const int il = S->c.rope_interleave ? 1 : 0;
  const char *wa_name = S->ql > 0 ? "q_a_proj+kv_a_proj_with_mqa" : "q_proj+kv_a_proj_with_mqa";
  lat_gemm_args a;
  if (split_wa(S)) {
    VTRY(tp_split_gemm(S, d->wa_blk, S->na_r0, S->na_n, S->na_blk, S->NA, S->qkva_loc, S->qkva_all, S->qkva, S->NA,
                       false, T, wa_name, "rows"));
  } else {
    if (!d->wa)
      return VERR(PATH_NAME ": %s: only this rank's row block was uploaded (opened with tp_split_in)", wa_name);
    a = lat_dense_args(d->wa, S->xn, S->D, S->qkva, S->NA, S->NA, S->D, T, LAT_EP_BF16);
    char what[64];
    snprintf(what, sizeof what, "%s%s", wa_name, S->comm && S->comm->size > 1 ? " (replicated)" : "");
    VTRY(gemm(S, &a, false, what));
  }
  const int kv_off = S->ql > 0 ? S->ql : H * dk;
  VTRY(lat_mla_prep_dcp(S->qkva, S->NA, S->ql > 0 ? 0 : -1, S->ql, d->q_a_norm, S->qan, kv_off, kl, r, d->kv_a_norm,
                        d->cache, S->d_slot, S->d_pos, S->lctx, S->inv_freq, S->attn_factor, il, S->eps, T, S->dcp_n,
                        S->dcp_rank, S->st));
  tr(S, "mla_prep", "v1", "q_a_norm+kv_a_norm+rope(k_rot)+latent store kl=%d r=%d rows=%d%s", kl, r, T,
     S->dcp ? " (dcp: owner rank stores)" : "");
  const uint16_t *qsrc = S->qkva;
  int q_ld = S->NA;
  if (S->ql > 0) {
    a = lat_dense_args(d->q_b, S->qan, S->ql, S->q, H * dk, H * dk, S->ql, T, LAT_EP_BF16);
    VTRY(gemm(S, &a, false, "q_b_proj"));
    qsrc = S->q;
    q_ld = H * dk;
  }
  /* v3_mma rotates q's rope part as it loads it (one launch less per layer); the others read it rotated */
  const bool mma = ncap == ATTN_MMA || ncap == ATTN_MMA16;
  const int hb = ncap == ATTN_MMA16 ? 16 : 32;
  const bool rope_on_load = mma && !S->dcp;
  const lat_qrope rq = {S->inv_freq, S->attn_factor, il};
  if (!rope_on_load) {
    VTRY(curef_rope((uint16_t *)qsrc, T, H, q_ld, dk, n, r, S->d_pos, S->inv_freq, S->attn_factor, il, S->st));
    tr(S, "rope", "ref", "q dim=%d heads=%d rows=%d interleave=%d", r, H, T, il);
  }
  /* q_lat[t][h] = W_UK_h^T q_nope[t][h] (fp32) */
  a = lat_dense_args(d->wukt, qsrc, q_ld, S->qlat, H * kl, kl, n, T, LAT_EP_F32);
  a.Z = H;
  a.w_bstride = (long long)kl * n;
  a.x_bstride = dk;
  a.o_bstride = kl;
  VTRY(gemm(S, &a, false, "mla_absorb_q W_UK"));
  if (S->dcp) {
    VTRY(dcp_attention(S, d, T, S_att, mma, hb, qsrc, q_ld));
  } else if (ncap > 0) { /* ncap: > 0 v2_gemm over ncap keys, ATTN_MMA v3_mma, 0 v1_split */
    VTRY(lat_mla_attn_gemm(&S->ag, S->olat, S->qlat, qsrc, q_ld, dk, n, d->cache, S->d_slot, S->d_pos, T, H, kl, r,
                           S->opt.max_ctx, ncap, S->scale, S->blas, S->st));
    tr(S, "mla_decode", "v2_gemm", "latent %d+%d H=%d keys<=%d rows=%d: cuBLAS QK^T, softmax, PV", kl, r, H, ncap, T);
  } else if (mma) {
    VTRY(lat_mla_attn_mma(S->pm, S->pl, S->pacc, S->qlat, qsrc, q_ld, dk, n, d->cache, S->d_slot, S->d_pos, T, H, kl, r,
                          S->opt.max_ctx, S_att, hb, S->scale, &rq, S->st));
    tr(S, "mla_decode", "v3_mma",
       "latent %d+%d H=%d splits=%d rows=%d: heads as the M side of mma.sync, %d per block, rope(q) dim=%d "
       "interleave=%d on load",
       kl, r, H, S_att, T, H > 16 ? hb : 16, r, il);
  } else {
    VTRY(lat_mla_attn(S->pm, S->pl, S->pacc, S->qlat, qsrc, q_ld, dk, n, d->cache, S->d_slot, S->d_pos, T, H, kl, r,
                      S->opt.max_ctx, S_att, S->scale, S->st));
    tr(S, "mla_decode", "v1_split", "latent %d+%d H=%d head-group %d splits=%d rows=%d", kl, r, H,
       lat_mla_head_group(H), S_att, T);
  }
  if (ncap <= 0 && !S->dcp) {
    VTRY(lat_mla_combine(S->olat, S->pm, S->pl, S->pacc, T, H, kl, S_att, S->st));
    tr(S, "mla_combine", "v1", "lse merge of %d splits H=%d rows=%d", S_att, H, T);
  }
  a = lat_dense_args(d->kv_b + (size_t)n * kl, S->olat, H * kl, S->attn, H * S->v, S->v, kl, T, LAT_EP_BF16);
  a.Z = H;
  a.w_bstride = (long long)(n + S->v) * kl;
  a.x_bstride = kl;
  a.o_bstride = S->v;
  VTRY(gemm(S, &a, false, "mla_out W_UV"));
  if (S->comm) { /* this rank's heads: an fp32 partial sum, reduced by tp_reduce */
    a = lat_dense_args(d->o_proj, S->attn, H * S->v, S->tp.part[0], S->D, S->D, H * S->v, T, LAT_EP_F32);
    VTRY(gemm(S, &a, false, "o_proj (partial, fp32)"));
    return V_OK;
  }
  a = lat_dense_args(d->o_proj, S->attn, H * S->v, S->y, S->D, S->D, H * S->v, T, LAT_EP_BF16);
  VTRY(gemm(S, &a, false, "o_proj"));
  return V_OK;
}

/* TP: x += sum over ranks of tp.part[which]; xn = rmsnorm(x) * w (kernels/latency_tp.h). */
static vstatus tp_reduce(lstate *S, int which, const uint16_t *w, int T, const char *what) {
  const int mode = S->tp_mode != LAT_TP_AUTO ? S->tp_mode : lat_tp_auto_mode(&S->tp, T);
  VTRY(lat_tp_reduce_add_norm(&S->tp, mode, which, S->x, S->xn, w, T, S->eps, S->st));
  tr(S, "allreduce_add_rmsnorm", lat_tp_mode_name(mode), "%s: tp=%d rank %d fp32 [%d x %d] + residual + rmsnorm", what,
     S->tp.size, S->tp.rank, T, S->D);
  return V_OK;
}

/* The shared expert on stream 2, forked from the main stream's current point (the input norm is
 * done); the main stream joins ev_join before the combine. */
static vstatus shared_expert(lstate *S, llayer *d, int T) {
  CUDA_CHECK(cudaEventRecord(S->ev_fork, S->st));
  CUDA_CHECK(cudaStreamWaitEvent(S->st2, S->ev_fork, 0));
  lat_gemm_args a = lat_dense_args(d->sh_gu, S->xn, S->D, S->ash, S->Fs, 2 * S->Fs, S->D, T, LAT_EP_SWIGLU);
  VTRY(gemm(S, &a, true, "shared_expert gate|up+silu (stream 2)"));
  a = lat_dense_args(d->sh_down, S->ash, S->Fs, S->ysh, S->D, S->D, S->Fs, T, LAT_EP_BF16);
  VTRY(gemm(S, &a, true, "shared_expert down (stream 2)"));
  CUDA_CHECK(cudaEventRecord(S->ev_join, S->st2));
  return V_OK;
}

static vstatus moe(lstate *S, llayer *d, int T, bool forced, const uint16_t *next_norm) {
  const int E = S->E, K = S->K;
  const bool sh = d->sh_gu != NULL;
  if (sh && !S->shared_late) VTRY(shared_expert(S, d, T));
  lat_gemm_args a;
  const int32_t *fx = forced ? S->d_forced + (size_t)d->moe_index * T * K : NULL;
  int32_t *nact = S->n_act + d->moe_index;
  /* unsharded, at most 4 rows: logits, top-k and buckets in one grid (no split-K reduce, no
   * separate routing launch); variant word router_gemm keeps the GEMM + routing kernels */
  const bool one_grid = !S->comm && !S->router_gemm && d->router && lat_router_fused_ok(T, E, K, S->D);
  if (one_grid) {
    VTRY(lat_router_fused(S->rl, d->router, S->xn, S->D, S->D, S->rctr, S->idx, S->wt, d->router_bias, fx, T, E, K,
                          S->G, S->TG, S->c.norm_topk_prob ? 1 : 0, (float)S->c.routed_scaling_factor, nact, S->act_e,
                          S->act_off, S->act_cnt, S->perm_tok, S->perm_pair, S->st));
    tr(S, "router_topk", forced ? "v2_fused_forced" : "v2_fused",
       "router logits [%d x %d] + sigmoid+bias group-limited top-k E=%d k=%d groups=%d/%d + buckets, one grid, rows=%d",
       E, S->D, E, K, S->TG, S->G, T);
  } else if (split_router(S)) {
    VTRY(tp_split_gemm(S, d->router_blk, S->e_r0, S->e_n, S->e_blk, E, S->rl_loc, S->rl_all, S->rl, E, true, T,
                       "router logits", "experts"));
  } else {
    if (!d->router)
      return VERR(PATH_NAME ": router: only this rank's expert block was uploaded (opened with tp_split_in)");
    a = lat_dense_args(d->router, S->xn, S->D, S->rl, E, E, S->D, T, LAT_EP_F32);
    VTRY(gemm(S, &a, false, S->comm && S->comm->size > 1 ? "router logits (replicated)" : "router logits"));
  }
  if (!one_grid) {
    VTRY(lat_router_topk(S->idx, S->wt, S->rl, d->router_bias, fx, T, E, K, S->G, S->TG, S->c.norm_topk_prob ? 1 : 0,
                         (float)S->c.routed_scaling_factor, S->st));
    tr(S, "router_topk", forced ? "v1_forced" : "v1", "sigmoid+bias group-limited E=%d k=%d groups=%d/%d rows=%d", E, K,
       S->TG, S->G, T);
    VTRY(lat_moe_bucket(S->idx, T, K, E, nact, S->act_e, S->act_off, S->act_cnt, S->perm_tok, S->perm_pair, S->st));
  }
  tr(S, "moe_bucket", one_grid ? "v2_fused" : "v1", "device buckets pairs=%d E=%d", T * K, E);
  if (sh && S->shared_late) VTRY(shared_expert(S, d, T));
  const int zmax = E < T * K ? E : T * K;
  a = lat_grouped_args(d->d_egu, S->xn, S->D, S->hbuf, S->F, 2 * S->F, S->D, T, LAT_EP_SWIGLU, zmax, nact, S->act_e,
                       S->act_off, S->act_cnt);
  a.xmap = S->perm_tok;
  VTRY(gemm(S, &a, false, "moe_experts gate|up+silu"));
  a = lat_grouped_args(d->d_edown, S->hbuf, S->F, S->Ybuf, S->D, S->D, S->F, T, LAT_EP_BF16, zmax, nact, S->act_e,
                       S->act_off, S->act_cnt);
  a.omap = S->perm_pair;
  VTRY(gemm(S, &a, false, "moe_experts down"));
  if (sh) CUDA_CHECK(cudaStreamWaitEvent(S->st, S->ev_join, 0));
  if (S->comm) { /* this rank's expert slices: partial sums, reduced with the residual + next norm */
    VTRY(lat_moe_combine_partial(S->tp.part[1], S->Ybuf, S->wt, sh ? S->ysh : NULL, T, K, S->D, S->st));
    tr(S, "moe_combine", "v1_partial", "weighted experts + shared -> fp32 partial D=%d k=%d rows=%d", S->D, K, T);
    return tp_reduce(S, 1, next_norm, T, "moe");
  }
  VTRY(lat_moe_combine_norm(S->x, S->xn, S->Ybuf, S->wt, sh ? S->ysh : NULL, next_norm, T, K, S->D, S->eps, S->st));
  tr(S, "moe_combine", "v1", "weighted experts + shared + residual + rmsnorm D=%d k=%d rows=%d", S->D, K, T);
  return V_OK;
}

/* TP: this rank's vocabulary block of the R logit rows, all-gathered over the ranks and placed
 * into logits [R, V] (blocks of vblk columns; the short last block's pad columns are never written). */
static vstatus tp_logits(lstate *S, int R) {
  const int N = S->tp.size, nl = S->v1 - S->v0, bk = S->vblk;
  lat_gemm_args a = lat_dense_args(S->lm_head, S->xn, S->D, S->lg_local, bk, nl, S->D, R, LAT_EP_F32);
  a.xmap = S->d_rows;
  VTRY(gemm(S, &a, false, "lm_head (vocab block)"));
  VTRY(S->comm->allgather(S->comm, S->lg_local, S->lg_all, (int64_t)R * bk, DT_F32, S->st));
  for (int r = 0; r < N; r++) {
    int v0, v1;
    ds_shard_vocab(S->V, N, r, &v0, &v1);
    if (v1 <= v0) continue;
    CUDA_CHECK(cudaMemcpy2DAsync(S->logits + v0, (size_t)S->V * sizeof(float), S->lg_all + (size_t)r * R * bk,
                                 (size_t)bk * sizeof(float), (size_t)(v1 - v0) * sizeof(float), (size_t)R,
                                 cudaMemcpyDeviceToDevice, S->st));
  }
  tr(S, "allgather", S->comm->name, "logits, tp=%d, vocab blocks of %d x %d rows", N, bk, R);
  return V_OK;
}

/* Enqueues a whole step for T rows already in d_tok/d_slot/d_pos, logits for R rows d_rows. */
static vstatus enqueue_step_body(lstate *S, int T, int R, int S_att, bool forced, int ncap) {
  const int nl = S->c.num_hidden_layers;
  if (S->prof) {
    CUDA_CHECK(cudaEventRecord(S->oev[0], S->st));
    snprintf(S->olab[0], sizeof S->olab[0], "start");
    S->n_oev = 1;
  }
  VTRY(mark(S, LAT_PH_ATTN));
  VTRY(lat_embed_norm(S->x, S->xn, S->d_tok, S->embed, S->L[0].in_norm, T, S->D, S->eps, S->st));
  tr(S, "embed_norm", "v1", "embed + input_layernorm D=%d rows=%d", S->D, T);
  if (S->dcp) { /* the rows' last visible local keys, for every layer of the step */
    VTRY(lat_dcp_lpos(S->d_lpos, S->d_pos, T, S->dcp_n, S->dcp_rank, S->st));
    tr(S, "dcp", S->comm->name, "dcp=%d rank %d: latent p%%%d==%d, all %d heads; per layer allgather q fp32 [%d,%d,%d] "
       "+ o|lse fp32 [%d,%d,%d], lse combine", S->dcp_n, S->dcp_rank, S->dcp_n, S->dcp_rank, S->Ha, T, S->H,
       S->kl + S->rope, T, S->Ha, S->kl + 1);
  }
  for (int l = 0; l < nl; l++) {
    llayer *d = &S->L[l];
    const uint16_t *next_norm = l + 1 < nl ? S->L[l + 1].in_norm : S->final_norm;
    VTRY(attention(S, d, T, S_att, ncap));
    if (S->comm) {
      VTRY(tp_reduce(S, 0, d->post_norm, T, "attention o_proj"));
    } else {
      VTRY(lat_add_rmsnorm(S->x, S->xn, S->y, d->post_norm, T, S->D, S->eps, S->st));
      tr(S, "add_rmsnorm", "v1", "residual + post_attention_layernorm D=%d rows=%d", S->D, T);
    }
    VTRY(mark(S, d->is_moe ? LAT_PH_MOE : LAT_PH_DENSE));
    if (!d->is_moe) {
      lat_gemm_args a = lat_dense_args(d->gu, S->xn, S->D, S->act, S->I, 2 * S->I, S->D, T, LAT_EP_SWIGLU);
      VTRY(gemm(S, &a, false, "dense_mlp gate|up+silu"));
      /* under TP this rank's slice of the MLP is an fp32 partial, reduced with the residual + norm */
      a = S->comm ? lat_dense_args(d->down, S->act, S->I, S->tp.part[1], S->D, S->D, S->I, T, LAT_EP_F32)
                  : lat_dense_args(d->down, S->act, S->I, S->y, S->D, S->D, S->I, T, LAT_EP_BF16);
      VTRY(gemm(S, &a, false, S->comm ? "dense_mlp down (partial, fp32)" : "dense_mlp down"));
      if (S->comm) {
        VTRY(tp_reduce(S, 1, next_norm, T, "dense mlp"));
      } else {
        VTRY(lat_add_rmsnorm(S->x, S->xn, S->y, next_norm, T, S->D, S->eps, S->st));
        tr(S, "add_rmsnorm", "v1", "residual + %s D=%d rows=%d", l + 1 < nl ? "next input_layernorm" : "final norm",
           S->D, T);
      }
    } else {
      VTRY(moe(S, d, T, forced, next_norm));
    }
    VTRY(mark(S, l + 1 < nl ? LAT_PH_ATTN : LAT_PH_LMHEAD));
  }
  if (S->comm) {
    VTRY(tp_logits(S, R));
  } else {
    lat_gemm_args a = lat_dense_args(S->lm_head, S->xn, S->D, S->logits, S->V, S->V, S->D, R, LAT_EP_F32);
    a.xmap = S->d_rows;
    VTRY(gemm(S, &a, false, "lm_head"));
  }
  VTRY(mark(S, LAT_PH_LMHEAD));
  return V_OK;
}

/* enqueue_step_body with this thread's launches carrying PDL while it runs (when on). */
static vstatus enqueue_step(lstate *S, int T, int R, int S_att, bool forced, int ncap) {
  const bool was = pdl_set(S->pdl && S->pdl_hw);
  const vstatus s = enqueue_step_body(S, T, R, S_att, forced, ncap);
  pdl_set(was);
  return s;
}

/* ---- graphs ---- */

static void graph_free(gentry *g) {
  if (g->exec) cudaGraphExecDestroy(g->exec);
  free(g->ev);
  memset(g, 0, sizeof *g);
}

static vstatus graph_get(lstate *S, int T, int R, int S_att, bool forced, int ncap, gentry **out, bool *captured) {
  *captured = false;
  for (int i = 0; i < S->n_graphs; i++) {
    gentry *g = &S->graphs[i];
    if (g->T == T && g->R == R && g->S_att == S_att && g->forced == (int)forced && g->ncap == ncap) {
      *out = g;
      return V_OK;
    }
  }
  gentry *g;
  if (S->n_graphs < MAX_GRAPHS) {
    g = &S->graphs[S->n_graphs++];
  } else {
    g = &S->graphs[S->next_evict];
    S->next_evict = (S->next_evict + 1) % MAX_GRAPHS;
    graph_free(g);
  }
  memset(g, 0, sizeof *g);
  g->T = T, g->R = R, g->S_att = S_att, g->forced = forced, g->ncap = ncap;
  CUDA_CHECK(cudaStreamBeginCapture(S->st, cudaStreamCaptureModeThreadLocal));
  S->rec = g;
  vstatus s = enqueue_step(S, T, R, S_att, forced, ncap);
  S->rec = NULL;
  cudaGraph_t graph = NULL;
  cudaError_t e = cudaStreamEndCapture(S->st, &graph);
  if (s == V_OK && e != cudaSuccess)
    s = VERR(PATH_NAME ": graph capture for %d rows failed: %s", T, cudaGetErrorString(e));
  if (s == V_OK) {
    e = cudaGraphInstantiate(&g->exec, graph, 0);
    if (e != cudaSuccess) s = VERR(PATH_NAME ": graph instantiate for %d rows: %s", T, cudaGetErrorString(e));
  }
  if (graph) cudaGraphDestroy(graph);
  if (s != V_OK) {
    (void)cudaGetLastError();
    graph_free(g);
    g->T = -1;
    return s;
  }
  *out = g;
  *captured = true;
  return V_OK;
}

/* Runs T rows whose host arrays are filled (h_tok, h_slot, h_pos, h_rows, h_forced). */
static vstatus run_core(lstate *S, int T, int R, int max_keys, bool forced, bool graph, float *ms) {
  const size_t ib = (size_t)T * sizeof(int32_t);
  CUDA_CHECK(cudaMemcpyAsync(S->d_tok, S->h_tok, ib, cudaMemcpyHostToDevice, S->st));
  CUDA_CHECK(cudaMemcpyAsync(S->d_slot, S->h_slot, ib, cudaMemcpyHostToDevice, S->st));
  CUDA_CHECK(cudaMemcpyAsync(S->d_pos, S->h_pos, ib, cudaMemcpyHostToDevice, S->st));
  CUDA_CHECK(cudaMemcpyAsync(S->d_rows, S->h_rows, (size_t)R * sizeof(int32_t), cudaMemcpyHostToDevice, S->st));
  if (forced)
    CUDA_CHECK(cudaMemcpyAsync(S->d_forced, S->h_forced, (size_t)S->n_moe * T * S->K * sizeof(int32_t),
                               cudaMemcpyHostToDevice, S->st));
  /* DCP: v3_mma or v1_split over this rank's keys (at most ceil(max_keys / N)), all Ha heads */
  const int keys = S->dcp ? (max_keys + S->dcp_n - 1) / S->dcp_n : max_keys;
  const bool gemm_long = table_prefers_gemm(T, max_keys) && S->ag.rows >= T;
  const bool mma = S->dcp ? S->attn_mode == 3 || (S->attn_mode != 1 && S->mma_ok)
                          : S->attn_mode == 3 || (S->attn_mode == 0 && S->mma_ok && !gemm_long);
  const int hb = mma ? lat_mla_mma_heads(T, S->Ha, keys, S->sms) : 32;
  int S_att = mma ? lat_mla_mma_splits(T, S->Ha, keys, S->sms, hb) : lat_mla_splits(T, S->Ha, keys, S->sms);
  while (S_att > 1 && T * S_att > S->PR) S_att--;
  /* > 0: v2_gemm attention over ncap keys, ATTN_MMA / ATTN_MMA16: v3_mma, 0: v1_split */
  int ncap = !mma ? 0 : hb == 16 && S->Ha > 16 ? ATTN_MMA16 : ATTN_MMA;
  if (!mma && !S->dcp && S->ag.rows >= T && S->attn_mode != 1 && (S->attn_mode == 2 || T >= GEMM_ATTN_MIN_ROWS)) {
    ncap = lat_mla_gemm_ncap(max_keys, S->opt.max_ctx);
    if ((size_t)T * 2 * S->H * ncap > S->ag.score_elems) ncap = 0;
    /* v2_gemm computes every row over the longest row's keys; v1_split only over each row's own.
     * Measured per key-row, v1_split costs ~12x v2_gemm at batch 64: with lengths this uneven
     * (T x Ncap > 4 x the keys actually attended) the table keeps v1_split. */
    double keys = 0;
    for (int t = 0; t < T; t++) keys += S->h_pos[t] + 1.0;
    if (S->attn_mode == 0 && (double)T * ncap > 4.0 * keys) ncap = 0;
  }
  if (ncap > 0) S_att = 1;
  if (graph) {
    gentry *g = NULL;
    bool captured = false;
    VTRY(graph_get(S, T, R, S_att, forced, ncap, &g, &captured));
    if (!captured && S->trace && S->trace->enabled)
      for (int i = 0; i < g->n_ev; i++) vtrace_ran(S->trace, PATH_NAME, g->ev[i].op, g->ev[i].variant, g->ev[i].detail);
    tr(S, "cuda_graph", captured ? "capture+replay" : "replay", "rows=%d logit rows=%d splits=%d%s", T, R, S_att, forced ? " forced experts" : "");
    CUDA_CHECK(cudaEventRecord(S->ev0, S->st));
    CUDA_CHECK(cudaGraphLaunch(g->exec, S->st));
    CUDA_CHECK(cudaEventRecord(S->ev1, S->st));
  } else {
    CUDA_CHECK(cudaEventRecord(S->ev0, S->st));
    VTRY(enqueue_step(S, T, R, S_att, forced, ncap));
    CUDA_CHECK(cudaEventRecord(S->ev1, S->st));
  }
  CUDA_CHECK(cudaEventSynchronize(S->ev1));
  float t = 0;
  CUDA_CHECK(cudaEventElapsedTime(&t, S->ev0, S->ev1));
  *ms += t;
  return V_OK;
}

/* ---- step checks ---- */

static vstatus check_step(lstate *S, const vstep *s) {
  const vstep_limits lim = {PATH_NAME, S->opt.max_seq, S->opt.max_ctx, S->len, S->V, S->n_moe, S->K, S->E};
  return vstep_validate(s, &lim);
}

/* Why a valid step is outside the envelope ("" when inside). */
static void envelope_reason(const vstep *s, char *why, size_t n, const char **to) {
  const int T = vstep_total_tokens(s);
  int big = 0, small = 0;
  for (int i = 0; i < s->n_seq; i++) (s->n_tokens[i] > MAX_TPS ? big : small)++;
  why[0] = 0;
  if (big && small) {
    snprintf(why, n, "mixed prefill+decode (%d sequences with > %d tokens, %d decoding)", big, MAX_TPS, small);
    *to = "prefill-ref";
  } else if (big) {
    snprintf(why, n, "prefill (n_tokens > K+1 = %d)", MAX_TPS);
    *to = "prefill-ref";
  } else if (T > TC) {
    snprintf(why, n, "batch %d > %d tokens", T, TC);
    *to = "batch-chunked";
  }
}

/* ---- vpath ops ---- */

static vstatus lt_supports(void *st, const vstep *s) {
  lstate *S = (lstate *)st;
  if (S->ref) return cuda_ref_ops.supports(S->ref, s);
  return check_step(S, s); /* forward() runs every valid step (outside the envelope as a traced fallback) */
}

static vstatus lt_forward_impl(lstate *S, const vstep *s, float *logits) {
  VTRY(check_step(S, s));
  if (!logits) return VERR("forward: logits buffer is NULL");
  const int T = vstep_total_tokens(s);
  const bool forced = s->forced_experts != NULL && S->n_moe > 0;
  char why[160];
  const char *to = "";
  envelope_reason(s, why, sizeof why, &to);
  float ms = 0;
  if (!why[0] && !S->prof) {
    int t = 0, max_keys = 1;
    for (int i = 0; i < s->n_seq; i++) {
      for (int j = 0; j < s->n_tokens[i]; j++, t++) {
        S->h_tok[t] = s->tokens[t];
        S->h_slot[t] = s->seq[i];
        S->h_pos[t] = s->start_pos[i] + j;
        if (s->all_logits) S->h_rows[t] = t;
      }
      if (!s->all_logits) S->h_rows[i] = t - 1;
      if (s->start_pos[i] + s->n_tokens[i] > max_keys) max_keys = s->start_pos[i] + s->n_tokens[i];
    }
    if (forced) memcpy(S->h_forced, s->forced_experts, (size_t)S->n_moe * T * S->K * sizeof(int32_t));
    const int R = vstep_logit_rows(s);
    S->last_whole = false;
    VTRY(run_core(S, T, R, max_keys, forced, S->use_graphs, &ms));
    S->last_whole = true;
    CUDA_CHECK(cudaMemcpy(logits, S->logits, (size_t)R * S->V * sizeof(float), cudaMemcpyDeviceToHost));
  } else {
    if (why[0] && S->trace) vtrace_fallback(S->trace, PATH_NAME, "decode_step", to, why);
    S->last_whole = false; /* n_act will hold the last chunk's counts only */
    /* chunks of <= TC consecutive tokens (flat order); each chunk is a valid sub-step */
    int seq_of[TC], j_of[TC];
    int t0 = 0, i = 0, j = 0;
    while (t0 < T) {
      int c = 0, max_keys = 1, R = 0;
      while (c < TC && t0 + c < T) {
        S->h_tok[c] = s->tokens[t0 + c];
        S->h_slot[c] = s->seq[i];
        S->h_pos[c] = s->start_pos[i] + j;
        if (S->h_pos[c] + 1 > max_keys) max_keys = S->h_pos[c] + 1;
        seq_of[c] = i, j_of[c] = j;
        const bool last = j == s->n_tokens[i] - 1;
        if (s->all_logits || last) S->h_rows[R++] = c;
        c++;
        if (++j == s->n_tokens[i]) i++, j = 0;
      }
      if (forced)
        for (int mi = 0; mi < S->n_moe; mi++)
          memcpy(S->h_forced + (size_t)mi * c * S->K, s->forced_experts + ((size_t)mi * T + t0) * S->K,
                 (size_t)c * S->K * sizeof(int32_t));
      if (R > 0 || c > 0) {
        if (R == 0) S->h_rows[R++] = c - 1; /* lm_head needs a row; its logits are dropped */
        VTRY(run_core(S, c, R, max_keys, forced, false, &ms));
        {
          int r = 0;
          for (int cc = 0; cc < c && r < R; cc++) {
            if (S->h_rows[r] != cc) continue;
            const int dst = s->all_logits ? t0 + cc : (j_of[cc] == s->n_tokens[seq_of[cc]] - 1 ? seq_of[cc] : -1);
            if (dst >= 0)
              CUDA_CHECK(cudaMemcpy(logits + (size_t)dst * S->V, S->logits + (size_t)r * S->V, (size_t)S->V * sizeof(float),
                                    cudaMemcpyDeviceToHost));
            r++;
          }
        }
      }
      t0 += c;
    }
  }
  S->last_ms = ms;
  for (int k = 0; k < s->n_seq; k++) S->len[s->seq[k]] = s->start_pos[k] + s->n_tokens[k];
  return V_OK;
}

static vstatus lt_forward(void *st, const vstep *s, float *logits) {
  lstate *S = (lstate *)st;
  if (S->ref) {
    if (S->trace) vtrace_fallback(S->trace, PATH_NAME, "decode_step", "cuda-ref", S->ref_reason);
    return cuda_ref_ops.forward(S->ref, s, logits);
  }
  const vstatus r = lt_forward_impl(S, s, logits);
  S->steps++;
  return r;
}

static vstatus lt_reset(void *st, int seq) {
  lstate *S = (lstate *)st;
  if (S->ref) return cuda_ref_ops.reset(S->ref, seq);
  if (seq < 0 || seq >= S->opt.max_seq) return VERR("reset: slot %d outside [0, %d)", seq, S->opt.max_seq);
  S->len[seq] = 0;
  return V_OK;
}

static vstatus lt_fill_cache(void *st, int seq, int len, uint64_t seed) {
  lstate *S = (lstate *)st;
  if (S->ref) return cuda_ref_ops.fill_cache(S->ref, seq, len, seed);
  if (seq < 0 || seq >= S->opt.max_seq) return VERR("fill_cache: slot %d outside [0, %d)", seq, S->opt.max_seq);
  if (len < 0) return VERR("fill_cache: length %d is negative", len);
  if (len > S->opt.max_ctx)
    return VUNSUPPORTED(PATH_NAME ": fill_cache of %d positions exceeds max_ctx %d", len, S->opt.max_ctx);
  const int W = S->W, il = S->c.rope_interleave ? 1 : 0;
  for (int p0 = 0; p0 < len; p0 += FILL_ROWS) {
    const int c = len - p0 < FILL_ROWS ? len - p0 : FILL_ROWS;
    int32_t hs[FILL_ROWS], hp[FILL_ROWS];
    for (int i = 0; i < c; i++) hs[i] = seq, hp[i] = p0 + i;
    CUDA_CHECK(cudaMemcpyAsync(S->fill_slot, hs, (size_t)c * sizeof(int32_t), cudaMemcpyHostToDevice, S->st));
    CUDA_CHECK(cudaMemcpyAsync(S->fill_pos, hp, (size_t)c * sizeof(int32_t), cudaMemcpyHostToDevice, S->st));
    for (int l = 0; l < S->c.num_hidden_layers; l++) {
      char name[48];
      snprintf(name, sizeof name, "kvfill.L%d", l);
      VTRY(curef_synth_fill(S->fill_ckv, DT_BF16, (uint64_t)c * W, SYN_EMBED, 0.0f, philox_key(seed, name),
                            (uint64_t)p0 * W, S->st));
      /* DCP: every rank synthesizes the chunk (the latent is replicated), the owners store */
      VTRY(lat_mla_prep_dcp(S->fill_ckv, W, -1, 0, NULL, NULL, 0, S->kl, S->rope, S->L[l].kv_a_norm, S->L[l].cache,
                            S->fill_slot, S->fill_pos, S->lctx, S->inv_freq, S->attn_factor, il, S->eps, c, S->dcp_n,
                            S->dcp_rank, S->st));
    }
    CUDA_CHECK(cudaStreamSynchronize(S->st)); /* hs/hp are on the stack */
  }
  tr(S, "fill_cache", "v1", "latent philox -> kv_a_layernorm + rope -> latent store, slot %d len %d%s", seq, len,
     S->dcp ? " (dcp: owner rank stores)" : "");
  S->len[seq] = len;
  return V_OK;
}

static double lt_last_step_ms(void *st) {
  lstate *S = (lstate *)st;
  if (S->ref) return cuda_ref_ops.last_step_ms ? cuda_ref_ops.last_step_ms(S->ref) : 0.0;
  return (double)S->last_ms;
}

/* Mean over MoE layers of the distinct routed experts the last step selected (the device-side
 * bucket counts); -1 when unknown: no MoE, delegated to cuda-ref, no step yet, or the last step
 * ran in chunks (a fallback: the counts cover the last chunk only). */
static double lt_last_experts(void *st) {
  lstate *S = (lstate *)st;
  if (S->ref || S->n_moe == 0 || !S->last_whole) return -1.0;
  int32_t h[64];
  const int n = S->n_moe < 64 ? S->n_moe : 64;
  if (cudaMemcpy(h, S->n_act, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToHost) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1.0;
  }
  double sum = 0;
  for (int i = 0; i < n; i++) sum += h[i];
  return sum / n;
}

static void lt_close(void *st) {
  lstate *S = (lstate *)st;
  if (!S) return;
  if (S->ref) cuda_ref_ops.close(S->ref);
  if (S->st) cudaStreamSynchronize(S->st);
  lat_tp_close(&S->tp);
  if (S->st2) cudaStreamSynchronize(S->st2);
  for (int i = 0; i < S->n_graphs; i++) graph_free(&S->graphs[i]);
  for (int i = 0; i < S->n_allocs; i++) cudaFree(S->allocs[i]);
  free(S->allocs);
  if (S->L) {
    free(S->L);
  }
  if (S->h_tok) cudaFreeHost(S->h_tok);
  if (S->h_slot) cudaFreeHost(S->h_slot);
  if (S->h_pos) cudaFreeHost(S->h_pos);
  if (S->h_rows) cudaFreeHost(S->h_rows);
  if (S->h_forced) cudaFreeHost(S->h_forced);
  for (int i = 0; i < 64; i++)
    if (S->pev[i]) cudaEventDestroy(S->pev[i]);
  for (int i = 0; i <= MAX_OPEV; i++)
    if (S->oev[i]) cudaEventDestroy(S->oev[i]);
  if (S->ev_fork) cudaEventDestroy(S->ev_fork);
  if (S->ev_join) cudaEventDestroy(S->ev_join);
  if (S->ev0) cudaEventDestroy(S->ev0);
  if (S->ev1) cudaEventDestroy(S->ev1);
  if (S->blas) cublasDestroy(S->blas);
  if (S->blas2) cublasDestroy(S->blas2);
  if (S->st) cudaStreamDestroy(S->st);
  if (S->st2) cudaStreamDestroy(S->st2);
  free(S->len);
  free(S);
}

/* ---- open: weights ---- */

static vstatus dalloc(lstate *S, void **p, size_t bytes, const char *what) {
  *p = NULL;
  if (S->n_allocs == S->cap_allocs) {
    const int cap = S->cap_allocs ? 2 * S->cap_allocs : 256;
    void **nv = (void **)realloc(S->allocs, (size_t)cap * sizeof *nv);
    if (!nv) return VERR("out of memory");
    S->allocs = nv;
    S->cap_allocs = cap;
  }
  cudaError_t e = cudaMalloc(p, bytes > 0 ? bytes : 256);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    return VERR(PATH_NAME ": %s: cannot allocate %.1f MiB of GPU memory (%.1f GiB free of %.1f GiB): %s "
                "(lower max_seq/max_ctx or use fewer layers)",
                what, (double)bytes / 1048576.0, (double)fr / 1073741824.0, (double)tot / 1073741824.0,
                cudaGetErrorString(e));
  }
  S->allocs[S->n_allocs++] = *p;
  return V_OK;
}

#define DALLOC(ptr, type, count, what) VTRY(dalloc(S, (void **)&(ptr), (size_t)(count) * sizeof(type), (what)))

/* Uploads elements [first, first + n) of host tensor t as dt into dev. */
static vstatus upload(void *dev, const vtensor *t, vdtype dt, int64_t first, int64_t n, cudaStream_t st) {
  if (t->dtype != DT_BF16 && t->dtype != DT_F16 && t->dtype != DT_F32)
    return VERR("tensor '%s': dtype %s is not a float type", t->name, vdtype_name(t->dtype));
  const char *src0 = (const char *)t->data + (size_t)first * vdtype_size(t->dtype);
  CUDA_CHECK(cudaStreamSynchronize(st));
  if (t->dtype == dt) {
    CUDA_CHECK(cudaMemcpy(dev, src0, (size_t)n * vdtype_size(dt), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize()); /* later work runs on a non-blocking stream */
    return V_OK;
  }
  const int64_t chunk = 1 << 22;
  float *f = (float *)malloc((size_t)chunk * sizeof(float));
  uint16_t *h = (uint16_t *)malloc((size_t)chunk * sizeof(uint16_t));
  vstatus s = (f && h) ? V_OK : VERR("out of memory converting tensor '%s'", t->name);
  const size_t esz = vdtype_size(t->dtype), osz = vdtype_size(dt);
  for (int64_t i0 = 0; i0 < n && s == V_OK; i0 += chunk) {
    const int64_t c = n - i0 < chunk ? n - i0 : chunk;
    vconvert_to_f32(f, src0 + (size_t)i0 * esz, t->dtype, c);
    const void *src = f;
    if (dt == DT_BF16) {
      for (int64_t i = 0; i < c; i++) h[i] = f32_to_bf16(f[i]);
      src = h;
    }
    cudaError_t e = cudaMemcpy((char *)dev + (size_t)i0 * osz, src, (size_t)c * osz, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) s = VERR("tensor '%s': upload: %s", t->name, cudaGetErrorString(e));
  }
  free(f);
  free(h);
  if (s == V_OK) CUDA_CHECK(cudaDeviceSynchronize());
  return s;
}

/* Writes rows [r0, r0 + n) of tensor t (shape[0] rows; the rest of the shape is one row) as dt
 * into device memory dst: upload or GPU synthesis (a row block is one contiguous element range
 * of the tensor, synthesized from its first element index). */
static vstatus load_rows(lstate *S, void *dst, const vtensor *t, vdtype dt, int64_t r0, int64_t n, const char *what) {
  if (!t) return VERR("%s: tensor '%s' is missing from the model", S->m->source, what);
  const int64_t rows = t->ndim > 0 ? t->shape[0] : 1, cols = rows > 0 ? vtensor_numel(t) / rows : 0;
  if (r0 < 0 || n < 0 || r0 + n > rows)
    return VERR("%s: tensor '%s': rows [%lld, %lld) outside its %lld rows", S->m->source, t->name, (long long)r0,
                (long long)(r0 + n), (long long)rows);
  if (n == 0 || cols == 0) return V_OK;
  if (t->data) return upload(dst, t, dt, r0 * cols, n * cols, S->st);
  return cuda_synth_model_rows(dst, dt, S->m, t, r0, n, S->st); /* its rule: a whole tensor or a TP block of one */
}

/* Writes tensor t (numel elements) as dt into device memory dst: upload or GPU synthesis. */
static vstatus load_tensor(lstate *S, void *dst, const vtensor *t, vdtype dt, const char *what) {
  if (!t) return VERR("%s: tensor '%s' is missing from the model", S->m->source, what);
  return load_rows(S, dst, t, dt, 0, t->ndim > 0 ? t->shape[0] : 1, what);
}

static vstatus new_tensor(lstate *S, const uint16_t **out, const vtensor *t, const char *what) {
  if (!t) return VERR("%s: tensor '%s' is missing from the model", S->m->source, what);
  void *p;
  VTRY(dalloc(S, &p, (size_t)vtensor_numel(t) * 2, what));
  VTRY(load_tensor(S, p, t, DT_BF16, what));
  *out = (const uint16_t *)p;
  return V_OK;
}

/* dst [n, D]: rows [r0, r0 + n) of layer l's wa, the NA stacked rows q_a (or q_proj), then
 * kv_a_proj_with_mqa: a block may take rows from either tensor or both. */
static vstatus load_wa_rows(lstate *S, uint16_t *dst, const ds_layer *ly, int l, int r0, int n) {
  const int qrows = S->NA - S->W, end = r0 + n;
  char w[160];
  if (r0 < qrows) {
    const int e = end < qrows ? end : qrows;
    snprintf(w, sizeof w, "model.layers.%d.self_attn.%s.weight", l, S->ql > 0 ? "q_a_proj" : "q_proj");
    VTRY(load_rows(S, dst, S->ql > 0 ? ly->q_a_proj : ly->q_proj, DT_BF16, r0, e - r0, w));
  }
  if (end > qrows) {
    const int b = r0 > qrows ? r0 : qrows;
    snprintf(w, sizeof w, "model.layers.%d.self_attn.kv_a_proj_with_mqa.weight", l);
    VTRY(load_rows(S, dst + (size_t)(b - r0) * S->D, ly->kv_a_proj_with_mqa, DT_BF16, b - qrows, end - b, w));
  }
  return V_OK;
}

/* dst [2*rows, D]: blocks of 8 gate rows followed by the 8 matching up rows. */
static vstatus load_interleaved(lstate *S, uint16_t *dst, const vtensor *gate, const vtensor *up, int rows,
                                const char *what) {
  if (!gate || !up) return VERR("%s: %s gate/up tensor missing", S->m->source, what);
  if (vtensor_numel(gate) != (int64_t)rows * S->D || vtensor_numel(up) != (int64_t)rows * S->D)
    return VERR("%s: %s: gate/up shape is not [%d, %d]", S->m->source, what, rows, S->D);
  const size_t rb = (size_t)S->D * 2;
  VTRY(load_tensor(S, S->tmp, gate, DT_BF16, what));
  CUDA_CHECK(cudaMemcpy2DAsync(dst, 16 * rb, S->tmp, 8 * rb, 8 * rb, (size_t)rows / 8, cudaMemcpyDeviceToDevice, S->st));
  VTRY(load_tensor(S, S->tmp, up, DT_BF16, what));
  CUDA_CHECK(cudaMemcpy2DAsync(dst + 8 * (size_t)S->D, 16 * rb, S->tmp, 8 * rb, 8 * rb, (size_t)rows / 8,
                               cudaMemcpyDeviceToDevice, S->st));
  return V_OK;
}

static vstatus load_weights(lstate *S) {
  const ds_model *m = S->m;
  const int D = S->D;
  char w[160];
  VTRY(new_tensor(S, &S->embed, m->embed, "model.embed_tokens.weight"));
  VTRY(new_tensor(S, &S->final_norm, m->final_norm, "model.norm.weight"));
  if (m->lm_head == m->embed) S->lm_head = S->embed;
  else VTRY(new_tensor(S, &S->lm_head, m->lm_head, "lm_head.weight"));
  int rows_max = S->I;
  if (S->F > rows_max) rows_max = S->F;
  if (S->Fs > rows_max) rows_max = S->Fs;
  DALLOC(S->tmp, uint16_t, (size_t)rows_max * D, "gate/up staging");
  int mi = 0;
  for (int l = 0; l < S->c.num_hidden_layers; l++) {
    const ds_layer *ly = &m->layers[l];
    llayer *d = &S->L[l];
#define NAME(s) (snprintf(w, sizeof w, "model.layers.%d.%s", l, s), w)
    VTRY(new_tensor(S, &d->in_norm, ly->input_layernorm, NAME("input_layernorm.weight")));
    VTRY(new_tensor(S, &d->post_norm, ly->post_attention_layernorm, NAME("post_attention_layernorm.weight")));
    uint16_t *wa = NULL;
    if (S->wa_whole) { /* TP: this rank's block is a view into the whole */
      DALLOC(wa, uint16_t, (size_t)S->NA * D, NAME("self_attn [q_a|kv_a]"));
      VTRY(load_wa_rows(S, wa, ly, l, 0, S->NA));
      d->wa = wa;
      d->wa_blk = wa + (size_t)S->na_r0 * D;
    } else if (S->na_n > 0) { /* TP, split: only the rows this rank multiplies */
      DALLOC(wa, uint16_t, (size_t)S->na_n * D, NAME("self_attn [q_a|kv_a] row block"));
      VTRY(load_wa_rows(S, wa, ly, l, S->na_r0, S->na_n));
      d->wa_blk = wa;
    }
    if (S->ql > 0) {
      VTRY(new_tensor(S, &d->q_a_norm, ly->q_a_layernorm, NAME("self_attn.q_a_layernorm.weight")));
      VTRY(new_tensor(S, &d->q_b, ly->q_b_proj, NAME("self_attn.q_b_proj.weight")));
    }
    VTRY(new_tensor(S, &d->kv_a_norm, ly->kv_a_layernorm, NAME("self_attn.kv_a_layernorm.weight")));
    VTRY(new_tensor(S, &d->kv_b, ly->kv_b_proj, NAME("self_attn.kv_b_proj.weight")));
    DALLOC(d->wukt, uint16_t, (size_t)S->H * S->kl * S->nope, NAME("W_UK^T"));
    VTRY(lat_transpose_wuk(d->wukt, d->kv_b, S->H, S->nope, S->v, S->kl, S->st));
    VTRY(new_tensor(S, &d->o_proj, ly->o_proj, NAME("self_attn.o_proj.weight")));
    DALLOC(d->cache, uint16_t, (size_t)S->opt.max_seq * S->lctx * S->W, NAME("latent cache"));
    CUDA_CHECK(cudaMemsetAsync(d->cache, 0, (size_t)S->opt.max_seq * S->lctx * S->W * 2, S->st));
    d->is_moe = ly->is_moe;
    d->moe_index = -1;
    if (!ly->is_moe) {
      uint16_t *gu;
      DALLOC(gu, uint16_t, (size_t)2 * S->I * D, NAME("mlp [gate|up]"));
      VTRY(load_interleaved(S, gu, ly->gate_proj, ly->up_proj, S->I, NAME("mlp")));
      d->gu = gu;
      VTRY(new_tensor(S, &d->down, ly->down_proj, NAME("mlp.down_proj.weight")));
      continue;
    }
    d->moe_index = mi++;
    if (S->router_whole) {
      VTRY(new_tensor(S, &d->router, ly->router, NAME("mlp.gate.weight")));
      d->router_blk = d->router + (size_t)S->e_r0 * D;
    } else if (S->e_n > 0) {
      uint16_t *rb;
      DALLOC(rb, uint16_t, (size_t)S->e_n * D, NAME("mlp.gate.weight row block"));
      VTRY(load_rows(S, rb, ly->router, DT_BF16, S->e_r0, S->e_n, NAME("mlp.gate.weight")));
      d->router_blk = rb;
    }
    if (ly->router_bias) {
      void *b;
      VTRY(dalloc(S, &b, (size_t)S->E * sizeof(float), "router bias"));
      VTRY(load_tensor(S, b, ly->router_bias, DT_F32, NAME("mlp.gate.e_score_correction_bias")));
      d->router_bias = (const float *)b;
    }
    if (!ly->exp_gate || !ly->exp_up || !ly->exp_down)
      return VERR("%s: layer %d: expert tensors are not bound", m->source, l);
    uint16_t *egu, *edn;
    const size_t gu_el = (size_t)2 * S->F * D, dn_el = (size_t)D * S->F;
    DALLOC(egu, uint16_t, gu_el * S->E, NAME("experts [gate|up]"));
    DALLOC(edn, uint16_t, dn_el * S->E, NAME("experts down"));
    const uint16_t **hp = (const uint16_t **)malloc((size_t)S->E * 2 * sizeof(uint16_t *));
    if (!hp) return VERR("out of memory");
    vstatus s = V_OK;
    for (int e = 0; e < S->E && s == V_OK; e++) {
      char nm[96];
      snprintf(nm, sizeof nm, "model.layers.%d.mlp.experts.%d", l, e);
      s = load_interleaved(S, egu + gu_el * e, ly->exp_gate[e], ly->exp_up[e], S->F, nm);
      if (s == V_OK) s = load_tensor(S, edn + dn_el * e, ly->exp_down[e], DT_BF16, nm);
      hp[e] = egu + gu_el * e;
      hp[S->E + e] = edn + dn_el * e;
    }
    if (s == V_OK) s = dalloc(S, (void **)&d->d_egu, (size_t)S->E * sizeof(uint16_t *), "expert table");
    if (s == V_OK) s = dalloc(S, (void **)&d->d_edown, (size_t)S->E * sizeof(uint16_t *), "expert table");
    if (s == V_OK) {
      cudaError_t e1 = cudaMemcpy((void *)d->d_egu, hp, (size_t)S->E * sizeof(uint16_t *), cudaMemcpyHostToDevice);
      cudaError_t e2 =
          cudaMemcpy((void *)d->d_edown, hp + S->E, (size_t)S->E * sizeof(uint16_t *), cudaMemcpyHostToDevice);
      if (e1 != cudaSuccess || e2 != cudaSuccess) s = VERR(PATH_NAME ": expert table upload failed");
    }
    free(hp);
    VTRY(s);
    if (S->c.n_shared_experts > 0) {
      uint16_t *sg;
      DALLOC(sg, uint16_t, (size_t)2 * S->Fs * D, NAME("shared expert [gate|up]"));
      VTRY(load_interleaved(S, sg, ly->sh_gate, ly->sh_up, S->Fs, NAME("mlp.shared_experts")));
      d->sh_gu = sg;
      VTRY(new_tensor(S, &d->sh_down, ly->sh_down, NAME("mlp.shared_experts.down_proj.weight")));
    }
#undef NAME
  }
  CUDA_CHECK(cudaStreamSynchronize(S->st));
  return V_OK;
}

static vstatus alloc_workspace(lstate *S) {
  const size_t n = TC, H = (size_t)S->H, Ha = (size_t)S->Ha, kl = (size_t)S->kl;
  int pr = 0;
  for (int T = 1; T <= TC; T++) {
    const int a = lat_mla_splits(T, S->Ha, S->lctx, S->sms), b = lat_mla_mma_splits(T, S->Ha, S->lctx, S->sms, 32);
    const int v = T * (a > b ? a : b);
    if (v > pr) pr = v;
  }
  S->PR = pr;
  const size_t E = S->E > 0 ? (size_t)S->E : 1, K = (size_t)S->K;
  const size_t F = S->F > 0 ? (size_t)S->F : 1, Fs = S->Fs > 0 ? (size_t)S->Fs : 1, I = S->I > 0 ? (size_t)S->I : 1;
  const size_t nm = S->n_moe > 0 ? (size_t)S->n_moe : 1;
  DALLOC(S->x, float, (n + LAT_TP_MAX) * S->D, "workspace");
  DALLOC(S->xn, uint16_t, (n + LAT_TP_MAX) * S->D, "workspace");
  if (S->comm) {
    DALLOC(S->lg_local, float, n * S->vblk, "TP logit block");
    DALLOC(S->lg_all, float, n * S->vblk * S->comm->size, "TP gathered logits");
    CUDA_CHECK(cudaMemsetAsync(S->lg_local, 0, n * S->vblk * sizeof(float), S->st));
  }
  DALLOC(S->qkva, uint16_t, n * S->NA, "workspace");
  DALLOC(S->qan, uint16_t, n * (S->ql > 0 ? S->ql : 1), "workspace");
  DALLOC(S->q, uint16_t, n * H * S->dk, "workspace");
  DALLOC(S->qlat, float, n * H * kl, "workspace");
  DALLOC(S->pm, float, (size_t)pr * Ha, "attention partials");
  DALLOC(S->pl, float, (size_t)pr * Ha, "attention partials");
  DALLOC(S->pacc, float, (size_t)pr * Ha * kl, "attention partials");
  if (S->dcp) {
    const size_t N = (size_t)S->dcp_n, w = kl + (size_t)S->rope;
    DALLOC(S->d_lpos, int32_t, n, "DCP local positions");
    DALLOC(S->dq_loc, float, n * H * w, "DCP query send buffer");
    DALLOC(S->dq_all, float, N * n * H * w, "DCP gathered queries");
    DALLOC(S->qlat_all, float, n * Ha * kl, "DCP all heads' q_lat");
    DALLOC(S->qrot_all, uint16_t, n * Ha * (size_t)(S->rope > 0 ? S->rope : 1), "DCP all heads' q_rot");
    DALLOC(S->dpart, float, n * Ha * (kl + 1), "DCP merged partials");
    DALLOC(S->dpart_all, float, N * n * Ha * (kl + 1), "DCP gathered partials");
  }
  DALLOC(S->olat, uint16_t, n * H * kl, "workspace");
  DALLOC(S->attn, uint16_t, n * H * S->v, "workspace");
  DALLOC(S->y, uint16_t, n * S->D, "workspace");
  DALLOC(S->act, uint16_t, n * I, "workspace");
  DALLOC(S->rl, float, n * E, "workspace");
  DALLOC(S->idx, int32_t, n * K, "workspace");
  DALLOC(S->wt, float, n * K, "workspace");
  DALLOC(S->n_act, int32_t, nm, "workspace");
  DALLOC(S->rctr, int32_t, 1, "workspace");
  CUDA_CHECK(cudaMemset(S->rctr, 0, sizeof(int32_t)));
  DALLOC(S->act_e, int32_t, E, "workspace");
  DALLOC(S->act_off, int32_t, E, "workspace");
  DALLOC(S->act_cnt, int32_t, E, "workspace");
  DALLOC(S->perm_tok, int32_t, n * K, "workspace");
  DALLOC(S->perm_pair, int32_t, n * K, "workspace");
  DALLOC(S->hbuf, uint16_t, n * K * F, "workspace");
  DALLOC(S->Ybuf, uint16_t, n * K * S->D, "workspace");
  DALLOC(S->ash, uint16_t, n * Fs, "workspace");
  DALLOC(S->ysh, uint16_t, n * S->D, "workspace");
  DALLOC(S->d_tok, int32_t, n, "workspace");
  DALLOC(S->d_slot, int32_t, n, "workspace");
  DALLOC(S->d_pos, int32_t, n, "workspace");
  DALLOC(S->d_rows, int32_t, n, "workspace");
  DALLOC(S->d_forced, int32_t, nm * n * K, "workspace");
  DALLOC(S->logits, float, n * S->V, "logits");
  DALLOC(S->ws1, unsigned char, WS_BYTES, "split-K scratch");
  DALLOC(S->ws2, unsigned char, WS_BYTES, "split-K scratch");
  DALLOC(S->fill_ckv, uint16_t, (size_t)FILL_ROWS * S->W, "fill scratch");
  DALLOC(S->fill_slot, int32_t, FILL_ROWS, "fill scratch");
  DALLOC(S->fill_pos, int32_t, FILL_ROWS, "fill scratch");
  void *cw1, *cw2;
  VTRY(dalloc(S, &cw1, WS_BYTES, "cuBLAS workspace"));
  VTRY(dalloc(S, &cw2, WS_BYTES, "cuBLAS workspace"));
  CUBLAS_CHECK(cublasSetWorkspace(S->blas, cw1, WS_BYTES));
  CUBLAS_CHECK(cublasSetWorkspace(S->blas2, cw2, WS_BYTES));
  CUDA_CHECK(cudaMallocHost((void **)&S->h_tok, n * sizeof(int32_t)));
  CUDA_CHECK(cudaMallocHost((void **)&S->h_slot, n * sizeof(int32_t)));
  CUDA_CHECK(cudaMallocHost((void **)&S->h_pos, n * sizeof(int32_t)));
  CUDA_CHECK(cudaMallocHost((void **)&S->h_rows, n * sizeof(int32_t)));
  CUDA_CHECK(cudaMallocHost((void **)&S->h_forced, nm * n * K * sizeof(int32_t)));
  return V_OK;
}

/* The v2_gemm attention workspace: rows = min(TC, max_seq x MAX_TPS) token rows over max_ctx
 * keys. Optional: when it does not fit in memory (or attn_split is forced) the path keeps
 * v1_split for every context and says why in the trace note. */
static void alloc_gemm_attention(lstate *S) {
  memset(&S->ag, 0, sizeof S->ag);
  if (S->attn_mode == 1) {
    snprintf(S->ag_why, sizeof S->ag_why, "attn_split forced");
    return;
  }
  if (S->dcp) {
    snprintf(S->ag_why, sizeof S->ag_why, "dcp: the rank combine needs split partials (v3_mma or v1_split)");
    return;
  }
  const int rows = S->opt.max_seq * MAX_TPS < TC ? S->opt.max_seq * MAX_TPS : TC;
  const size_t ne = (size_t)rows * 2 * S->H * lat_mla_gemm_ncap(S->opt.max_ctx, S->opt.max_ctx);
  lat_mla_gemm_ws w;
  memset(&w, 0, sizeof w);
  vstatus s = dalloc(S, (void **)&w.qb, (size_t)rows * 2 * S->H * S->W * sizeof(uint16_t), "v2_gemm queries");
  if (s == V_OK) s = dalloc(S, (void **)&w.scores, ne * sizeof(float), "v2_gemm scores");
  if (s == V_OK) s = dalloc(S, (void **)&w.P, ne / 2 * sizeof(uint16_t), "v2_gemm probabilities");
  if (s == V_OK) s = dalloc(S, (void **)&w.kp, (size_t)rows * sizeof(void *), "v2_gemm pointers");
  if (s == V_OK) s = dalloc(S, (void **)&w.qp, (size_t)rows * sizeof(void *), "v2_gemm pointers");
  if (s == V_OK) s = dalloc(S, (void **)&w.pp, (size_t)rows * sizeof(void *), "v2_gemm pointers");
  if (s == V_OK) s = dalloc(S, (void **)&w.sp, (size_t)rows * sizeof(void *), "v2_gemm pointers");
  if (s == V_OK) s = dalloc(S, (void **)&w.op, (size_t)rows * sizeof(void *), "v2_gemm pointers");
  if (s != V_OK) {
    snprintf(S->ag_why, sizeof S->ag_why, "%s", verr_msg());
    return; /* what was allocated is freed at close */
  }
  w.rows = rows;
  w.score_elems = ne;
  S->ag = w;
}

/* Why the kernels cannot run this config ("" when they can). */
static void config_reason(const lstate *S, char *why, size_t n) {
  why[0] = 0;
  const ds_config *c = &S->c;
  if (S->D % 8 || (S->ql > 0 && S->ql % 8) || S->kl % 8 || S->nope % 8 || (S->H * S->v) % 8)
    snprintf(why, n, "sizes not multiples of 8 (hidden %d, q_lora %d, kv_lora %d, nope %d, H*v %d)", S->D, S->ql, S->kl,
             S->nope, S->H * S->v);
  else if (S->D > LAT_ROW_MAX)
    snprintf(why, n, "hidden size %d above the row kernels' %d", S->D, LAT_ROW_MAX);
  else if (!lat_mla_supported(S->kl, S->rope))
    snprintf(why, n, "latent %d + rope %d outside the MLA kernel (kv_lora <= 512, kv_lora+rope <= 768, multiples of 8)",
             S->kl, S->rope);
  else if (S->I % 8 || S->F % 8 || S->Fs % 8)
    snprintf(why, n, "MLP widths not multiples of 8 (dense %d, expert %d, shared %d)", S->I, S->F, S->Fs);
  else if (S->n_moe > 0 && (S->K > 64 || S->E > 1536 || S->G > 32 || (size_t)(TC * S->K + 2 * S->E) * 4 > 48 * 1024))
    snprintf(why, n, "router shape (E %d, top-k %d, groups %d) outside the router kernel", S->E, S->K, S->G);
  else if (c->num_hidden_layers < 1)
    snprintf(why, n, "no layers");
}

/* TP N > 1: the row blocks of wa and the router this rank multiplies (kernels/latency_tp.h), and
 * whether the whole tensors go to the device as well (the default tp_replicated_in, or wa without
 * q LoRA, which cannot be split): then the blocks are views into them. Before load_weights. */
static void tp_in_plan(lstate *S) {
  const bool tp = S->comm && S->comm->size > 1;
  S->wa_whole = !tp || !split_wa(S);
  S->router_whole = !tp || !split_router(S);
  S->na_blk = S->e_blk = 0;
  S->na_r0 = S->na_n = S->e_r0 = S->e_n = 0;
  if (!tp) return;
  S->na_blk = lat_tp_row_block(S->NA, S->comm->size, S->comm->rank, &S->na_r0, &S->na_n);
  if (S->E > 0) S->e_blk = lat_tp_row_block(S->E, S->comm->size, S->comm->rank, &S->e_r0, &S->e_n);
}

/* TP N > 1: the buffers of the split input projections (the block outputs start zeroed: their
 * columns past a short block are gathered and dropped, never written). */
static vstatus tp_in_alloc(lstate *S) {
  const size_t n = TC, N = (size_t)S->comm->size;
  if (N < 2) return V_OK;
  DALLOC(S->qkva_loc, uint16_t, n * S->na_blk, "TP [q_a|kv_a] block");
  DALLOC(S->qkva_all, uint16_t, N * n * S->na_blk, "TP gathered [q_a|kv_a] blocks");
  CUDA_CHECK(cudaMemsetAsync(S->qkva_loc, 0, n * S->na_blk * sizeof(uint16_t), S->st));
  if (S->e_blk > 0) {
    DALLOC(S->rl_loc, float, n * S->e_blk, "TP router logit block");
    DALLOC(S->rl_all, float, N * n * S->e_blk, "TP gathered router logits");
    CUDA_CHECK(cudaMemsetAsync(S->rl_loc, 0, n * S->e_blk * sizeof(float), S->st));
  }
  return V_OK;
}

/* opts->variant: comma-separated words: "eager", "table", one GEMM variant name forced everywhere,
 * COLUMN=GEMM (one table column), "no_persist" (the cp.async GEMMs one CTA per work item, the older
 * split-K rule), "shared_early" / "shared_late" (where the shared expert forks to stream 2),
 * "shared=GEMM" (the shared expert's GEMMs), "attn_split" / "attn_gemm" (MLA decode variant for
 * every step), "tp_oneshot" / "tp_nccl" / "tp_rsag" / "tp_auto" (the TP reduce), "tp_split_in" (TP: q_a|kv_a and the
 * router split by rows across the ranks and all-gathered) / "tp_replicated_in" (computed whole on every rank: the
 * default, measured faster at TP 2 on the H200 while the exchange is an NCCL all-gather, see
 * docs/tensor-parallel.md). Words not given return to the table. */
static vstatus parse_variant(lstate *S, const char *variant) {
  S->force_variant = 0;
  memset(S->force_kind, 0, sizeof S->force_kind);
  S->attn_mode = 0;
  S->tp_mode = LAT_TP_AUTO;
  S->tp_rep_in = true;
  S->pdl = true;
  S->router_gemm = false;
  S->no_persist = false;
  S->shared_late = true; /* batch 8: 3.299 vs 3.356 ms beside the router (whose 192 CTAs then wait
                            for SMs behind the shared expert's); batch 1 and 64 equal within 0.5 % */
  S->shared_variant = 0;
  if (!variant || !variant[0]) return V_OK;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", variant);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (strcmp(tok, "eager") == 0) {
      S->use_graphs = false;
      continue;
    }
    if (strcmp(tok, "table") == 0) continue;
    if (strcmp(tok, "router_gemm") == 0) {
      S->router_gemm = true;
      continue;
    }
    if (strcmp(tok, "no_persist") == 0) {
      S->no_persist = true;
      continue;
    }
    if (strcmp(tok, "shared_late") == 0 || strcmp(tok, "shared_early") == 0) {
      S->shared_late = tok[7] == 'l';
      continue;
    }
    if (strncmp(tok, "shared=", 7) == 0) {
      S->shared_variant = lat_gemm_variant_from_name(tok + 7);
      if (!S->shared_variant) return VERR(PATH_NAME ": variant '%s': unknown GEMM variant for the shared expert", tok);
      continue;
    }
    if (strcmp(tok, "pdl") == 0 || strcmp(tok, "no_pdl") == 0) {
      S->pdl = tok[0] == 'p';
      continue;
    }
    if (strcmp(tok, "attn_split") == 0 || strcmp(tok, "attn_gemm") == 0 || strcmp(tok, "attn_mma") == 0) {
      S->attn_mode = tok[5] == 's' ? 1 : tok[6] == 'e' ? 2 : 3;
      continue;
    }
    if (strcmp(tok, "tp_replicated_in") == 0 || strcmp(tok, "tp_split_in") == 0) {
      S->tp_rep_in = tok[3] == 'r';
      continue;
    }
    if (strncmp(tok, "tp_", 3) == 0) {
      const int m = lat_tp_mode_from_name(tok + 3);
      if (m < 0)
        return VERR(PATH_NAME ": variant '%s' unknown (tp_auto, tp_oneshot, tp_nccl, tp_rsag, tp_split_in, "
                    "tp_replicated_in)", tok);
      S->tp_mode = m;
      continue;
    }
    const char *eq = strchr(tok, '=');
    if (eq) { /* column=variant */
      int k = 0;
      while (k < N_KINDS && (strncmp(tok, g_kind_names[k], (size_t)(eq - tok)) || g_kind_names[k][eq - tok])) k++;
      const int v = lat_gemm_variant_from_name(eq + 1);
      if (k == N_KINDS || !v)
        return VERR(PATH_NAME
                    ": variant '%s': want COLUMN=GEMM with COLUMN dense, wide, moe, heads (both per-head GEMMs) or "
                    "heads_o (W_UV only) and GEMM a "
                    "variant name (v1_mma_n8 .. v11_cp_m2, v5_cublas)",
                    tok);
      S->force_kind[k] = v;
      if (k == KIND_HEADS) S->force_kind[KIND_HEADS_O] = v; /* heads= sets both per-head columns */
      continue;
    }
    const int v = lat_gemm_variant_from_name(tok);
    if (!v)
      return VERR(PATH_NAME
                  ": variant '%s' unknown (eager, table, pdl, no_pdl, no_persist, router_gemm, v1_mma_n8, "
                  "v2_mma_n16, v3_mma_n32, v4_mma_n64, "
                  "v5_cublas, v6_cp_n8, v7_cp_n16, v8_cp_n32, v9_cp_n64, v10_cp_w8, v11_cp_m2)",
                  tok);
    S->force_variant = v;
  }
  return V_OK;
}

static vstatus open_impl(lstate *S, const ds_model *m, const vpath_opts *o) {
  const ds_config *c = &m->cfg;
  if (o->max_seq < 1) return VERR(PATH_NAME ": max_seq %d must be >= 1", o->max_seq);
  if (o->max_ctx < 1) return VERR(PATH_NAME ": max_ctx %d must be >= 1", o->max_ctx);
  if (o->max_ctx > c->max_position_embeddings)
    return VERR(PATH_NAME ": max_ctx %d exceeds the model's max_position_embeddings %d", o->max_ctx,
                c->max_position_embeddings);
  if (c->attention_bias) return VUNSUPPORTED(PATH_NAME ": attention_bias=true is not implemented");
  if (strcmp(c->hidden_act, "silu") != 0)
    return VUNSUPPORTED(PATH_NAME ": hidden_act '%s' is not implemented (silu only)", c->hidden_act);
  if (c->qk_rope_head_dim % 2) return VERR("config: qk_rope_head_dim %d must be even", c->qk_rope_head_dim);
  if (o->comm) {
    if (o->comm->size != ds_model_tp_size(m) || o->comm->rank != (m->tp_size > 1 ? m->tp_rank : 0))
      return VERR(PATH_NAME ": communicator rank %d of %d does not match the model's TP shard %d of %d",
                  o->comm->rank, o->comm->size, m->tp_rank, ds_model_tp_size(m));
    if (o->comm->size > LAT_TP_MAX) return VUNSUPPORTED(PATH_NAME ": TP %d (at most %d)", o->comm->size, LAT_TP_MAX);
  } else if (ds_model_tp_size(m) > 1) {
    return VERR(PATH_NAME ": %s is TP shard %d of %d but no communicator was given (open it with vpath_opts.tp)",
                m->source, m->tp_rank, m->tp_size);
  }
  S->comm = o->comm;
  ds_model_vocab_range(m, &S->v0, &S->v1);
  S->vblk = o->comm ? ds_shard_vocab_block(c->vocab_size, o->comm->size) : c->vocab_size;
  S->m = m;
  S->c = *c;
  S->opt = *o;
  S->trace = o->trace;
  S->D = c->hidden_size;
  S->H = c->num_attention_heads;
  S->nope = c->qk_nope_head_dim;
  S->rope = c->qk_rope_head_dim;
  S->v = c->v_head_dim;
  S->dk = S->nope + S->rope;
  S->ql = c->q_lora_rank;
  S->kl = c->kv_lora_rank;
  S->W = S->kl + S->rope;
  S->NA = (S->ql > 0 ? S->ql : S->H * S->dk) + S->W;
  S->E = c->n_routed_experts;
  S->K = c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 1;
  S->F = c->moe_intermediate_size;
  S->Fs = c->moe_intermediate_size * c->n_shared_experts;
  S->I = c->intermediate_size;
  S->V = c->vocab_size;
  S->eps = (float)c->rms_norm_eps;
  S->scale = (float)ds_attention_scale(c);
  S->G = c->n_group > 0 && c->n_group <= S->E ? c->n_group : 1;
  S->TG = c->topk_group > 0 && c->topk_group <= S->G ? c->topk_group : S->G;
  S->n_moe = 0;
  for (int l = 0; l < c->num_hidden_layers; l++) S->n_moe += ds_layer_is_moe(c, l) ? 1 : 0;
  /* DCP over the TP ranks: rank r caches positions p % N == r; the attention runs all heads */
  S->dcp = o->dcp;
  S->dcp_n = 1;
  S->dcp_rank = 0;
  if (S->dcp) {
    if (!o->comm)
      return VERR(PATH_NAME ": dcp splits the latent cache over the TP ranks: open it as latency:tpN:dcp (or --tp N "
                  "--dcp), which gives each rank its communicator");
    S->dcp_n = o->comm->size;
    S->dcp_rank = o->comm->rank;
  }
  S->Ha = S->H * S->dcp_n;
  S->lctx = (o->max_ctx + S->dcp_n - 1) / S->dcp_n;
  S->use_graphs = true;
  VTRY(parse_variant(S, o->variant));
  if (S->dcp && S->attn_mode == 2)
    return VUNSUPPORTED(PATH_NAME ": dcp: attn_gemm (v2_gemm) writes o_lat without split partials; the DCP combine "
                        "needs attn_mma or attn_split");

  const int ndev = cuda_device_count();
  if (ndev == 0) return VUNSUPPORTED(PATH_NAME ": no CUDA device visible");
  if (o->device < 0 || o->device >= ndev)
    return VERR(PATH_NAME ": device %d outside the %d visible CUDA devices", o->device, ndev);

  char why[160];
  config_reason(S, why, sizeof why);
  if (why[0]) {
    if (S->dcp) /* the fallback would run plain TP and still be called dcp */
      return VUNSUPPORTED(PATH_NAME ": dcp: unsupported config (%s); cuda-ref, the fallback, has no dcp", why);
    snprintf(S->ref_reason, sizeof S->ref_reason, "unsupported config: %s", why);
    if (S->trace) vtrace_fallback(S->trace, PATH_NAME, "open", "cuda-ref", S->ref_reason);
    return cuda_ref_ops.open(&S->ref, m, o);
  }

  CUDA_CHECK(cudaSetDevice(o->device));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, o->device));
  S->sms = prop.multiProcessorCount;
  S->pdl_hw = prop.major >= 9;
  CUDA_CHECK(cudaStreamCreateWithFlags(&S->st, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&S->st2, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasCreate(&S->blas));
  CUBLAS_CHECK(cublasCreate(&S->blas2));
  CUBLAS_CHECK(cublasSetStream(S->blas, S->st));
  CUBLAS_CHECK(cublasSetStream(S->blas2, S->st2));
  CUDA_CHECK(cudaEventCreateWithFlags(&S->ev_fork, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&S->ev_join, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreate(&S->ev0));
  CUDA_CHECK(cudaEventCreate(&S->ev1));
  for (int i = 0; i < 64; i++) CUDA_CHECK(cudaEventCreate(&S->pev[i]));
  for (int i = 0; i <= MAX_OPEV; i++) CUDA_CHECK(cudaEventCreate(&S->oev[i]));
  VTRY(lat_kernels_init());
  VTRY(lat_mla_init(S->kl, S->rope));
  S->mma_ok = lat_mla_mma_supported(S->Ha, S->kl, S->rope); /* DCP: all heads */
  if (S->mma_ok) VTRY(lat_mla_mma_init(S->Ha, S->kl, S->rope));

  S->L = (llayer *)calloc((size_t)c->num_hidden_layers, sizeof(llayer));
  S->len = (int *)calloc((size_t)o->max_seq, sizeof(int));
  if (!S->L || !S->len) return VERR("out of memory");
  tp_in_plan(S);
  { /* refuse up front with the estimate `vouch run --dry-run` prints (model/mem_estimate.h) */
    ds_mem_opts mo = {o->max_seq, o->max_ctx, S->v1 - S->v0, o->comm ? o->comm->size : 1, S->dcp, S->sms};
    ds_mem_estimate est;
    size_t fr = 0, tot = 0;
    VTRY(ds_mem_latency(c, &mo, &est));
    CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    VTRY(ds_mem_check(PATH_NAME, &est, c, &mo, (double)fr, (double)tot, prop.name));
  }
  VTRY(load_weights(S));

  const int nhalf = S->rope / 2;
  float inv[512];
  if (nhalf > 512) return VERR("config: qk_rope_head_dim %d too large", S->rope);
  S->attn_factor = (float)ds_rope_inv_freq(c, inv);
  DALLOC(S->inv_freq, float, nhalf > 0 ? nhalf : 1, "rope table");
  CUDA_CHECK(cudaMemcpy(S->inv_freq, inv, (size_t)nhalf * sizeof(float), cudaMemcpyHostToDevice));
  VTRY(alloc_workspace(S));
  alloc_gemm_attention(S);
  if (S->trace && S->dcp) {
    char note[320];
    const double mib = 1.0 / 1048576.0, row = (double)S->opt.max_seq * S->W * 2;
    snprintf(note, sizeof note,
             "dcp=%d rank %d over %s: latent cache positions p%%%d==%d, %d of %d rows per slot: %.1f MiB per layer "
             "(%.1f without dcp); mla_decode %s over all %d heads, per layer allgather q + o|lse partials (fp32), "
             "lse combine of heads %d-%d",
             S->dcp_n, S->dcp_rank, S->comm->name, S->dcp_n, S->dcp_rank, S->lctx, S->opt.max_ctx,
             row * S->lctx * mib, row * S->opt.max_ctx * mib, S->mma_ok && S->attn_mode != 1 ? "v3_mma" : "v1_split",
             S->Ha, S->dcp_rank * S->H, S->dcp_rank * S->H + S->H);
    vtrace_note(S->trace, PATH_NAME, note);
  } else if (S->trace) {
    char note[300];
    snprintf(note, sizeof note, "mla_decode: v1_split below %d token rows, v2_gemm (tensor cores) from there%s%s",
             GEMM_ATTN_MIN_ROWS, S->ag.rows ? "" : "; v2_gemm unavailable: ", S->ag.rows ? "" : S->ag_why);
    vtrace_note(S->trace, PATH_NAME, note);
  }
  if (S->comm) {
    if (!m->lm_head || m->lm_head->shape[0] != S->v1 - S->v0)
      return VERR(PATH_NAME ": tensor 'lm_head.weight': %lld rows, expected the vocabulary block [%d, %d)",
                  m->lm_head ? (long long)m->lm_head->shape[0] : -1ll, S->v0, S->v1);
    VTRY(lat_tp_open(&S->tp, S->comm, o->device, S->D, TC, S->st)); /* collective: every rank opens */
    VTRY(tp_in_alloc(S));
    if (S->tp_mode == LAT_TP_ONESHOT && !S->tp.p2p)
      return VUNSUPPORTED(PATH_NAME ": variant tp_oneshot: %s", S->tp.no_p2p);
    if (S->trace) {
      char note[320];
      snprintf(note, sizeof note, "tp=%d rank %d over %s: reduce %s%s%s", S->tp.size, S->tp.rank, S->comm->name,
               S->tp_mode ? lat_tp_mode_name(S->tp_mode) : "auto", S->tp.p2p ? " (peer access: oneshot available)" : ", no oneshot: ",
               S->tp.p2p ? "" : S->tp.no_p2p);
      vtrace_note(S->trace, PATH_NAME, note);
      if (S->tp.size > 1) {
        snprintf(note, sizeof note,
                 "tp=%d rank %d inputs: %s; router: %s (variant tp_split_in: both split by rows)",
                 S->tp.size, S->tp.rank,
                 split_wa(S) ? "q_a|kv_a split, this rank's rows all-gathered"
                 : S->ql > 0 ? "q_a|kv_a replicated"
                             : "q_proj|kv_a whole on every rank (q_proj is sharded by head: no q LoRA to split)",
                 S->n_moe == 0 ? "none" : split_router(S) ? "split by experts, logits all-gathered" : "replicated");
        vtrace_note(S->trace, PATH_NAME, note);
      }
    }
  }
  CUDA_CHECK(cudaDeviceSynchronize());

  size_t fr = 0, tot = 0;
  CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
  snprintf(S->info, sizeof S->info,
           "device %d: %.200s (sm_%d%d, %d SMs), %.1f GiB used after open, GEMM table 1-2/3-8:%s 9-16:%s 17-32:%s "
           "33-64:%s, %s%s",
           o->device, prop.name, prop.major, prop.minor, S->sms, (double)(tot - fr) / 1073741824.0,
           lat_gemm_variant_name(pick_variant(S, 1, KIND_DENSE, 0)),
           lat_gemm_variant_name(pick_variant(S, 16, KIND_DENSE, 0)),
           lat_gemm_variant_name(pick_variant(S, 32, KIND_DENSE, 0)),
           lat_gemm_variant_name(pick_variant(S, 64, KIND_DENSE, 0)),
           S->pdl && S->pdl_hw ? "programmatic dependent launch"
           : S->pdl            ? "no PDL (before sm_90)"
                               : "no PDL (no_pdl)",
           S->use_graphs ? "" : ", eager (no graphs)");
  if (S->trace) vtrace_note(S->trace, PATH_NAME, S->info);
  return V_OK;
}

static vstatus lt_open(void **state, const ds_model *m, const vpath_opts *o) {
  *state = NULL;
  if (!m || !o) return VERR(PATH_NAME ": open: NULL model or options");
  lstate *S = (lstate *)calloc(1, sizeof(lstate));
  if (!S) return VERR("out of memory");
  vstatus s = open_impl(S, m, o);
  if (s != V_OK) {
    lt_close(S);
    return s;
  }
  *state = S;
  return V_OK;
}

/* ---- extras (latency.h) ---- */

extern "C" void latency_set_graphs(void *state, bool on) {
  lstate *S = (lstate *)state;
  if (S && !S->ref) S->use_graphs = on;
}

extern "C" vstatus latency_set_variant(void *state, const char *variant) {
  lstate *S = (lstate *)state;
  if (!S || S->ref) return VUNSUPPORTED(PATH_NAME ": no latency kernels to choose (config fell back)");
  CUDA_CHECK(cudaStreamSynchronize(S->st));
  CUDA_CHECK(cudaStreamSynchronize(S->st2));
  for (int i = 0; i < S->n_graphs; i++) graph_free(&S->graphs[i]);
  S->n_graphs = 0;
  S->next_evict = 0;
  const bool g = S->use_graphs;
  vstatus r = parse_variant(S, variant);
  S->use_graphs = g && !(variant && strstr(variant, "eager"));
  if (r == V_OK && S->attn_mode != 1 && !S->ag.rows) alloc_gemm_attention(S); /* opened with attn_split */
  if (r == V_OK && S->attn_mode == 2 && !S->ag.rows) {
    if (S->dcp) S->attn_mode = 0; /* the table (v3_mma / v1_split) stays */
    r = VUNSUPPORTED(PATH_NAME ": attn_gemm: %s", S->ag_why);
  }
  if (r == V_OK && S->attn_mode == 3 && !S->mma_ok) {
    S->attn_mode = 0;
    r = VUNSUPPORTED(PATH_NAME ": attn_mma: %d heads, latent %d + rope %d outside lat_mla_attn_mma", S->Ha, S->kl,
                     S->rope);
  }
  if (r == V_OK && S->comm && S->tp_mode == LAT_TP_ONESHOT && !S->tp.p2p)
    r = VUNSUPPORTED(PATH_NAME ": tp_oneshot: %s", S->tp.no_p2p);
  if (r == V_OK && S->tp_rep_in && (!S->wa_whole || !S->router_whole)) {
    S->tp_rep_in = false; /* the step would need weights that are not on the device */
    r = VUNSUPPORTED(PATH_NAME ": tp_replicated_in: opened with tp_split_in (only this rank's rows of q_a|kv_a "
                     "and the router were uploaded): open the path without @tp_split_in");
  }
  return r;
}

extern "C" const char *latency_table_attention(int T, int max_keys, int H, int kl, int r) {
  if (lat_mla_mma_supported(H, kl, r) && !table_prefers_gemm(T, max_keys)) return "v3_mma";
  return T >= GEMM_ATTN_MIN_ROWS ? "v2_gemm" : "v1_split";
}

extern "C" int latency_table_gemm(int T, int N, int K, int ep, bool grouped) {
  return table_variant(T, kind_of(grouped, 1, ep, N, K));
}

extern "C" const char *latency_table_variant(int T, bool grouped) {
  return lat_gemm_variant_name(table_variant(T, grouped ? KIND_MOE : KIND_DENSE));
}

extern "C" int latency_profile_ops(void *state, const char **labels, double *ms, int max) {
  lstate *S = (lstate *)state;
  if (!S || S->ref) return 0;
  int n = 0;
  for (int i = 1; i < S->n_oev && n < max; i++, n++) {
    float t = 0;
    if (cudaEventElapsedTime(&t, S->oev[i - 1], S->oev[i]) != cudaSuccess) t = 0;
    labels[n] = S->olab[i];
    ms[n] = t;
  }
  return n;
}

extern "C" vstatus latency_profile_step(void *state, const vstep *s, float *logits, double *phase_ms,
                                        double *experts) {
  lstate *S = (lstate *)state;
  if (!S || S->ref) return VUNSUPPORTED(PATH_NAME ": profiling needs the latency kernels (config fell back)");
  char why[160];
  const char *to = "";
  VTRY(check_step(S, s));
  envelope_reason(s, why, sizeof why, &to);
  if (why[0]) return VUNSUPPORTED(PATH_NAME ": profile step outside the envelope: %s", why);
  S->prof = true;
  S->n_pev = 0;
  vstatus r = lt_forward_impl(S, s, logits);
  S->steps++;
  S->prof = false;
  VTRY(r);
  for (int p = 0; p < LAT_NPHASE; p++) phase_ms[p] = 0;
  for (int i = 0; i + 1 < S->n_pev; i++) {
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, S->pev[i], S->pev[i + 1]));
    phase_ms[S->pphase[i]] += t;
  }
  *experts = 0;
  if (S->n_moe > 0) {
    int32_t na[64];
    const int nm = S->n_moe < 64 ? S->n_moe : 64;
    CUDA_CHECK(cudaMemcpy(na, S->n_act, (size_t)nm * sizeof(int32_t), cudaMemcpyDeviceToHost));
    double sum = 0;
    for (int i = 0; i < nm; i++) sum += na[i];
    *experts = sum / nm;
  }
  return V_OK;
}

/* Byte model (vpath_caps.tp_splits_inputs): the variant word tp_split_in splits q_a|kv_a and the router by rows. */
static bool lt_tp_splits_inputs(const char *variant) { return vpath_variant_has_word(variant, "tp_split_in"); }

extern "C" const vpath_ops latency_ops = {
    PATH_NAME,
    "optimized decode for batch 1-64 on Hopper: mma skinny GEMMs, absorbed MLA on a latent cache, CUDA graphs",
    lt_open,
    lt_supports,
    lt_forward,
    lt_reset,
    lt_fill_cache,
    lt_last_step_ms,
    lt_close,
    true, /* latent_kv: kv_lora + rope per position per layer */
    lt_last_experts,
    /* caps: device weights, TP over NCCL, dcp on the latent cache, no ep */
    {false, VPATH_TP_NCCL, true, false, NULL,
     ": the GPU paths split every routed expert along its intermediate dimension under TP", lt_tp_splits_inputs},
};
