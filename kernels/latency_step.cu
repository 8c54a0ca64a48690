/* One step of the latency path (kernels/latency_state.h): the GEMM table and variant choice,
 * the layer blocks (attention, MoE, TP reductions), the enqueued step and its CUDA graphs. */
#include "kernels/latency_state.h"

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

void lt_trace(lstate *S, const char *op, const char *variant, const char *fmt, ...) {
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
const char *const lt_kind_names[N_KINDS] = {"dense", "wide", "moe", "heads", "heads_o"};
static const struct {
  int lo, hi, v[N_KINDS]; /* by KIND_* */
} g_gemm_table[] = {
    {1, 2, {LAT_V6_CP_N8, LAT_V5_CUBLAS, LAT_V11_CP_M2, LAT_V10_CP_W8, LAT_V11_CP_M2}},
    {3, 8, {LAT_V6_CP_N8, LAT_V5_CUBLAS, LAT_V11_CP_M2, LAT_V10_CP_W8, LAT_V11_CP_M2}},
    {9, 16, {LAT_V7_CP_N16, LAT_V5_CUBLAS, LAT_V11_CP_M2, LAT_V7_CP_N16, LAT_V7_CP_N16}},
    {17, 32, {LAT_V5_CUBLAS, LAT_V5_CUBLAS, LAT_V11_CP_M2, LAT_V5_CUBLAS, LAT_V5_CUBLAS}},
    {33, 64, {LAT_V5_CUBLAS, LAT_V5_CUBLAS, LAT_V11_CP_M2, LAT_V5_CUBLAS, LAT_V5_CUBLAS}},
};

int lt_table_variant(int T, int kind) {
  for (size_t i = 0; i < sizeof g_gemm_table / sizeof g_gemm_table[0]; i++)
    if (T >= g_gemm_table[i].lo && T <= g_gemm_table[i].hi) return g_gemm_table[i].v[kind];
  return LAT_V5_CUBLAS;
}

/* The table's column (KIND_*): grouped experts; per-head batched (Z > 1: the MLA absorptions,
 * "heads" for N > K as W_UK's 512 x 128, "heads_o" for N <= K as W_UV's 128 x 512); "wide" (no
 * SwiGLU epilogue, N >= 4096 and N*K >= 32M: o_proj, dense down, lm_head); the other dense GEMMs. */
int lt_kind_of(bool grouped, int Z, int ep, int N, int K) {
  if (grouped) return KIND_MOE;
  if (Z > 1) return N > K ? KIND_HEADS : KIND_HEADS_O;
  return ep != LAT_EP_SWIGLU && N >= 4096 && (long long)N * K >= (32LL << 20) ? KIND_WIDE : KIND_DENSE;
}

static int gemm_kind(const lat_gemm_args *a) { return lt_kind_of(a->wptr != NULL, a->Z, a->ep, a->N, a->K); }

/* A forced variant where it takes T rows, else the table's: `first` (the shared expert's word on
 * stream 2, or 0), then the column's, then the one for all GEMMs (the more specific word wins).
 * MoE mode never takes cuBLAS; its cp.async variants take any T (token passes). */
int lt_pick_variant(const lstate *S, int T, int kind, int first) {
  const int f[3] = {first, S->force_kind[kind], S->force_variant};
  for (int i = 0; i < 3; i++)
    if (f[i] && (lat_gemm_variant_max_tokens(f[i]) >= T || (kind == KIND_MOE && f[i] >= LAT_V6_CP_N8)) &&
        !(kind == KIND_MOE && f[i] == LAT_V5_CUBLAS))
      return f[i];
  return lt_table_variant(T, kind);
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
  const int v = lt_pick_variant(S, a->T, gemm_kind(a), second_stream ? S->shared_variant : 0);
  int splits = 1, ran = v;
  VTRY(lat_gemm(a, v, S->sms, second_stream ? S->blas2 : S->blas, second_stream ? S->st2 : S->st, &splits, &ran));
  lt_trace(S, "linear", lat_gemm_variant_name(ran), "%s [%d x %d]%s rows=%d bucket %s splits=%d", what, a->N, a->K,
     a->Z > 1 ? (a->wptr ? " grouped" : " batched") : "", a->T, bucket_name(a->T), splits);
  return V_OK;
}

/* ---- the step ---- */

/* TP N > 1 splits the replicated input projections by rows across the ranks when the variant
 * tp_split_in asks for it (docs/tensor-parallel.md). wa only with q LoRA: without
 * it, wa's q rows are q_proj, which is sharded by head, so each rank's wa is its own. */
bool lt_split_wa(const lstate *S) { return S->comm && S->comm->size > 1 && S->ql > 0 && !S->tp_rep_in; }
bool lt_split_router(const lstate *S) { return S->comm && S->comm->size > 1 && !S->tp_rep_in; }

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
  lt_trace(S, "allgather", S->comm->name, "%s, tp=%d, %s blocks of %d x %d rows placed into [%d x %d]", what, N,
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
  lt_trace(S, "allgather", S->comm->name, "dcp=%d absorbed q|q_rot fp32 [%d x %d heads x %d] per rank -> all %d heads", N,
     T, H, w, Ha);
  if (mma) {
    VTRY(lat_mla_attn_mma(S->pm, S->pl, S->pacc, S->qlat_all, S->qrot_all, Ha * r, r, 0, d->cache, S->d_slot, S->d_lpos,
                          T, Ha, kl, r, S->lctx, S_att, hb, S->scale, NULL, S->st));
  } else {
    VTRY(lat_mla_attn(S->pm, S->pl, S->pacc, S->qlat_all, S->qrot_all, Ha * r, r, 0, d->cache, S->d_slot, S->d_lpos,
                      T, Ha, kl, r, S->lctx, S_att, S->scale, S->st));
  }
  lt_trace(S, "mla_decode", mma ? "v3_mma" : "v1_split", "dcp rank %d of %d: latent %d+%d all H=%d, own positions p%%%d==%d, "
     "splits=%d rows=%d", S->dcp_rank, N, kl, r, Ha, N, S->dcp_rank, S_att, T);
  VTRY(lat_dcp_merge_local(S->dpart, S->pm, S->pl, S->pacc, T, Ha, kl, S_att, S->st));
  lt_trace(S, "dcp_merge", "v1", "lse merge of %d splits -> o|lse fp32 H=%d rows=%d", S_att, Ha, T);
  VTRY(S->comm->allgather(S->comm, S->dpart, S->dpart_all, (int64_t)T * Ha * (kl + 1), DT_F32, S->st));
  lt_trace(S, "allgather", S->comm->name, "dcp=%d partial o|lse fp32 [%d x %d heads x %d] per rank", N, T, Ha, kl + 1);
  VTRY(lat_dcp_combine(S->olat, S->dpart_all, N, T, Ha, H, S->dcp_rank * H, kl, S->st));
  lt_trace(S, "dcp_combine", "v1", "lse combine of %d ranks, own heads %d-%d of %d, rows=%d", N, S->dcp_rank * H,
     S->dcp_rank * H + H, Ha, T);
  return V_OK;
}

static vstatus attention(lstate *S, llayer *d, const lt_step_key *k) {
  const int T = k->T, S_att = k->S_att;
  const int H = S->H, n = S->nope, r = S->rope, kl = S->kl, dk = S->dk;
  const int il = S->c.rope_interleave ? 1 : 0;
  const char *wa_name = S->ql > 0 ? "q_a_proj+kv_a_proj_with_mqa" : "q_proj+kv_a_proj_with_mqa";
  lat_gemm_args a;
  if (lt_split_wa(S)) {
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
  lt_trace(S, "mla_prep", "v1", "q_a_norm+kv_a_norm+rope(k_rot)+latent store kl=%d r=%d rows=%d%s", kl, r, T,
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
  const bool mma = k->attn == LT_ATTN_MMA || k->attn == LT_ATTN_MMA16;
  const int hb = k->attn == LT_ATTN_MMA16 ? 16 : 32;
  const bool rope_on_load = mma && !S->dcp;
  const lat_qrope rq = {S->inv_freq, S->attn_factor, il};
  if (!rope_on_load) {
    VTRY(curef_rope((uint16_t *)qsrc, T, H, q_ld, dk, n, r, S->d_pos, S->inv_freq, S->attn_factor, il, S->st));
    lt_trace(S, "rope", "ref", "q dim=%d heads=%d rows=%d interleave=%d", r, H, T, il);
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
  } else if (k->attn == LT_ATTN_GEMM) {
    VTRY(lat_mla_attn_gemm(&S->ag, S->olat, S->qlat, qsrc, q_ld, dk, n, d->cache, S->d_slot, S->d_pos, T, H, kl, r,
                           S->opt.max_ctx, k->gemm_keys, S->scale, S->blas, S->st));
    lt_trace(S, "mla_decode", "v2_gemm", "latent %d+%d H=%d keys<=%d rows=%d: cuBLAS QK^T, softmax, PV", kl, r, H,
             k->gemm_keys, T);
  } else if (mma) {
    VTRY(lat_mla_attn_mma(S->pm, S->pl, S->pacc, S->qlat, qsrc, q_ld, dk, n, d->cache, S->d_slot, S->d_pos, T, H, kl, r,
                          S->opt.max_ctx, S_att, hb, S->scale, &rq, S->st));
    lt_trace(S, "mla_decode", "v3_mma",
       "latent %d+%d H=%d splits=%d rows=%d: heads as the M side of mma.sync, %d per block, rope(q) dim=%d "
       "interleave=%d on load",
       kl, r, H, S_att, T, H > 16 ? hb : 16, r, il);
  } else {
    VTRY(lat_mla_attn(S->pm, S->pl, S->pacc, S->qlat, qsrc, q_ld, dk, n, d->cache, S->d_slot, S->d_pos, T, H, kl, r,
                      S->opt.max_ctx, S_att, S->scale, S->st));
    lt_trace(S, "mla_decode", "v1_split", "latent %d+%d H=%d head-group %d splits=%d rows=%d", kl, r, H,
       lat_mla_head_group(H), S_att, T);
  }
  if (k->attn != LT_ATTN_GEMM && !S->dcp) {
    VTRY(lat_mla_combine(S->olat, S->pm, S->pl, S->pacc, T, H, kl, S_att, S->st));
    lt_trace(S, "mla_combine", "v1", "lse merge of %d splits H=%d rows=%d", S_att, H, T);
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
  lt_trace(S, "allreduce_add_rmsnorm", lat_tp_mode_name(mode), "%s: tp=%d rank %d fp32 [%d x %d] + residual + rmsnorm", what,
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
    lt_trace(S, "router_topk", forced ? "v2_fused_forced" : "v2_fused",
       "router logits [%d x %d] + sigmoid+bias group-limited top-k E=%d k=%d groups=%d/%d + buckets, one grid, rows=%d",
       E, S->D, E, K, S->TG, S->G, T);
  } else if (lt_split_router(S)) {
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
    lt_trace(S, "router_topk", forced ? "v1_forced" : "v1", "sigmoid+bias group-limited E=%d k=%d groups=%d/%d rows=%d", E, K,
       S->TG, S->G, T);
    VTRY(lat_moe_bucket(S->idx, T, K, E, nact, S->act_e, S->act_off, S->act_cnt, S->perm_tok, S->perm_pair, S->st));
  }
  lt_trace(S, "moe_bucket", one_grid ? "v2_fused" : "v1", "device buckets pairs=%d E=%d", T * K, E);
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
    lt_trace(S, "moe_combine", "v1_partial", "weighted experts + shared -> fp32 partial D=%d k=%d rows=%d", S->D, K, T);
    return tp_reduce(S, 1, next_norm, T, "moe");
  }
  VTRY(lat_moe_combine_norm(S->x, S->xn, S->Ybuf, S->wt, sh ? S->ysh : NULL, next_norm, T, K, S->D, S->eps, S->st));
  lt_trace(S, "moe_combine", "v1", "weighted experts + shared + residual + rmsnorm D=%d k=%d rows=%d", S->D, K, T);
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
  lt_trace(S, "allgather", S->comm->name, "logits, tp=%d, vocab blocks of %d x %d rows", N, bk, R);
  return V_OK;
}

/* Enqueues a whole step for T rows already in d_tok/d_slot/d_pos, logits for R rows d_rows. */
static vstatus enqueue_step_body(lstate *S, const lt_step_key *k) {
  const int T = k->T, R = k->R;
  const int nl = S->c.num_hidden_layers;
  if (S->prof) {
    CUDA_CHECK(cudaEventRecord(S->oev[0], S->st));
    snprintf(S->olab[0], sizeof S->olab[0], "start");
    S->n_oev = 1;
  }
  VTRY(mark(S, LAT_PH_ATTN));
  VTRY(lat_embed_norm(S->x, S->xn, S->d_tok, S->embed, S->L[0].in_norm, T, S->D, S->eps, S->st));
  lt_trace(S, "embed_norm", "v1", "embed + input_layernorm D=%d rows=%d", S->D, T);
  if (S->dcp) { /* the rows' last visible local keys, for every layer of the step */
    VTRY(lat_dcp_lpos(S->d_lpos, S->d_pos, T, S->dcp_n, S->dcp_rank, S->st));
    lt_trace(S, "dcp", S->comm->name, "dcp=%d rank %d: latent p%%%d==%d, all %d heads; per layer allgather q fp32 [%d,%d,%d] "
       "+ o|lse fp32 [%d,%d,%d], lse combine", S->dcp_n, S->dcp_rank, S->dcp_n, S->dcp_rank, S->Ha, T, S->H,
       S->kl + S->rope, T, S->Ha, S->kl + 1);
  }
  for (int l = 0; l < nl; l++) {
    llayer *d = &S->L[l];
    const uint16_t *next_norm = l + 1 < nl ? S->L[l + 1].in_norm : S->final_norm;
    VTRY(attention(S, d, k));
    if (S->comm) {
      VTRY(tp_reduce(S, 0, d->post_norm, T, "attention o_proj"));
    } else {
      VTRY(lat_add_rmsnorm(S->x, S->xn, S->y, d->post_norm, T, S->D, S->eps, S->st));
      lt_trace(S, "add_rmsnorm", "v1", "residual + post_attention_layernorm D=%d rows=%d", S->D, T);
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
        lt_trace(S, "add_rmsnorm", "v1", "residual + %s D=%d rows=%d", l + 1 < nl ? "next input_layernorm" : "final norm",
           S->D, T);
      }
    } else {
      VTRY(moe(S, d, T, k->forced, next_norm));
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
static vstatus enqueue_step(lstate *S, const lt_step_key *k) {
  const bool was = pdl_set(S->pdl && S->pdl_hw);
  const vstatus s = enqueue_step_body(S, k);
  pdl_set(was);
  return s;
}

/* ---- graphs ---- */

void lt_graph_free(gentry *g) {
  if (g->exec) cudaGraphExecDestroy(g->exec);
  free(g->ev);
  memset(g, 0, sizeof *g);
}

/* Equal keys replay one graph: every field decides which kernels, with which launch shapes, run. */
static bool step_key_eq(const lt_step_key *a, const lt_step_key *b) {
  return a->T == b->T && a->R == b->R && a->S_att == b->S_att && a->forced == b->forced && a->attn == b->attn &&
         a->gemm_keys == b->gemm_keys;
}

static vstatus graph_get(lstate *S, const lt_step_key *k, gentry **out, bool *captured) {
  const int T = k->T;
  *captured = false;
  for (int i = 0; i < S->n_graphs; i++) {
    gentry *g = &S->graphs[i];
    if (step_key_eq(&g->key, k)) {
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
    lt_graph_free(g);
  }
  memset(g, 0, sizeof *g);
  g->key = *k;
  CUDA_CHECK(cudaStreamBeginCapture(S->st, cudaStreamCaptureModeThreadLocal));
  S->rec = g;
  vstatus s = enqueue_step(S, k);
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
    lt_graph_free(g);
    g->key.T = -1;
    return s;
  }
  *out = g;
  *captured = true;
  return V_OK;
}

/* The step key (lt_step_key) of T rows whose positions are in S->h_pos[0..T), over at most max_keys
 * keys, R logit rows: which attention kernel (the table, lt_attn_mode, and what the open could allocate),
 * its splits and key bucket. The one rule: lt_run_core runs what it picks, latency_selectable
 * (kernels/latency_selectable.cu) enumerates it. */
lt_step_key lt_choose_key(const lstate *S, int T, int R, int max_keys, bool forced) {
  /* DCP: v3_mma or v1_split over this rank's keys (at most ceil(max_keys / N)), all Ha heads */
  const int keys = S->dcp ? (max_keys + S->dcp_n - 1) / S->dcp_n : max_keys;
  const bool gemm_long = table_prefers_gemm(T, max_keys) && S->ag.rows >= T;
  const lt_attn_mode am = S->attn_mode;
  const bool mma = S->dcp ? am == LT_ATTN_WANT_MMA || (am != LT_ATTN_WANT_SPLIT && S->mma_ok)
                          : am == LT_ATTN_WANT_MMA || (am == LT_ATTN_TABLE && S->mma_ok && !gemm_long);
  const int hb = mma ? lat_mla_mma_heads(T, S->Ha, keys, S->sms) : 32;
  int S_att = mma ? lat_mla_mma_splits(T, S->Ha, keys, S->sms, hb) : lat_mla_splits(T, S->Ha, keys, S->sms);
  while (S_att > 1 && T * S_att > S->PR) S_att--;
  lt_attn_kind attn = !mma ? LT_ATTN_SPLIT : hb == 16 && S->Ha > 16 ? LT_ATTN_MMA16 : LT_ATTN_MMA;
  int gemm_keys = 0;
  if (!mma && !S->dcp && S->ag.rows >= T && am != LT_ATTN_WANT_SPLIT &&
      (am == LT_ATTN_WANT_GEMM || T >= GEMM_ATTN_MIN_ROWS)) {
    gemm_keys = lat_mla_gemm_ncap(max_keys, S->opt.max_ctx);
    if ((size_t)T * 2 * S->H * gemm_keys > S->ag.score_elems) gemm_keys = 0;
    /* v2_gemm computes every row over the longest row's keys; v1_split only over each row's own.
     * Measured per key-row, v1_split costs ~12x v2_gemm at batch 64: with lengths this uneven
     * (T x Ncap > 4 x the keys actually attended) the table keeps v1_split. */
    double keys = 0;
    for (int t = 0; t < T; t++) keys += S->h_pos[t] + 1.0;
    if (am == LT_ATTN_TABLE && (double)T * gemm_keys > 4.0 * keys) gemm_keys = 0;
    if (gemm_keys > 0) attn = LT_ATTN_GEMM;
  }
  if (attn == LT_ATTN_GEMM) S_att = 1;
  const lt_step_key key = {T, R, S_att, forced, attn, gemm_keys};
  return key;
}

/* The cuda_graph event's variant: the step's graph was captured now and replayed, or replayed. */
const char *lt_graph_event(bool captured) { return captured ? "capture+replay" : "replay"; }

vstatus lt_capture_events(lstate *S, const lt_step_key *k, gentry *g) {
  memset(g, 0, sizeof *g);
  g->key = *k;
  CUDA_CHECK(cudaStreamBeginCapture(S->st, cudaStreamCaptureModeThreadLocal));
  vtrace *keep = S->trace;
  const bool prof = S->prof;
  S->trace = NULL; /* the events are choices, not what ran: into g only */
  S->prof = false; /* no per-op timing events of a step that never runs */
  S->rec = g;
  vstatus s = enqueue_step(S, k);
  S->rec = NULL;
  S->trace = keep;
  S->prof = prof;
  cudaGraph_t graph = NULL;
  cudaError_t e = cudaStreamEndCapture(S->st, &graph);
  if (graph) cudaGraphDestroy(graph); /* never instantiated: none of its kernels ran */
  if (s == V_OK && e != cudaSuccess)
    s = VERR(PATH_NAME ": capture of the step for %d rows failed: %s", k->T, cudaGetErrorString(e));
  if (s != V_OK) (void)cudaGetLastError();
  return s;
}

/* Runs T rows whose host arrays are filled (h_tok, h_slot, h_pos, h_rows, h_forced). */
vstatus lt_run_core(lstate *S, int T, int R, int max_keys, bool forced, bool graph, float *ms) {
  const size_t ib = (size_t)T * sizeof(int32_t);
  CUDA_CHECK(cudaMemcpyAsync(S->d_tok, S->h_tok, ib, cudaMemcpyHostToDevice, S->st));
  CUDA_CHECK(cudaMemcpyAsync(S->d_slot, S->h_slot, ib, cudaMemcpyHostToDevice, S->st));
  CUDA_CHECK(cudaMemcpyAsync(S->d_pos, S->h_pos, ib, cudaMemcpyHostToDevice, S->st));
  CUDA_CHECK(cudaMemcpyAsync(S->d_rows, S->h_rows, (size_t)R * sizeof(int32_t), cudaMemcpyHostToDevice, S->st));
  if (forced)
    CUDA_CHECK(cudaMemcpyAsync(S->d_forced, S->h_forced, (size_t)S->n_moe * T * S->K * sizeof(int32_t),
                               cudaMemcpyHostToDevice, S->st));
  const lt_step_key key = lt_choose_key(S, T, R, max_keys, forced);
  if (graph) {
    gentry *g = NULL;
    bool captured = false;
    VTRY(graph_get(S, &key, &g, &captured));
    if (!captured && S->trace && S->trace->enabled)
      for (int i = 0; i < g->n_ev; i++) vtrace_ran(S->trace, PATH_NAME, g->ev[i].op, g->ev[i].variant, g->ev[i].detail);
    lt_trace(S, "cuda_graph", lt_graph_event(captured), "rows=%d logit rows=%d splits=%d%s", T, R, key.S_att, forced ? " forced experts" : "");
    CUDA_CHECK(cudaEventRecord(S->ev0, S->st));
    CUDA_CHECK(cudaGraphLaunch(g->exec, S->st));
    CUDA_CHECK(cudaEventRecord(S->ev1, S->st));
  } else {
    CUDA_CHECK(cudaEventRecord(S->ev0, S->st));
    VTRY(enqueue_step(S, &key));
    CUDA_CHECK(cudaEventRecord(S->ev1, S->st));
  }
  CUDA_CHECK(cudaEventSynchronize(S->ev1));
  float t = 0;
  CUDA_CHECK(cudaEventElapsedTime(&t, S->ev0, S->ev1));
  *ms += t;
  return V_OK;
}

/* ---- step checks ---- */

vstatus lt_check_step(lstate *S, const vstep *s) {
  const vstep_limits lim = {PATH_NAME, S->opt.max_seq, S->opt.max_ctx, S->len, S->V, S->n_moe, S->K, S->E};
  return vstep_validate(s, &lim);
}

/* Why a valid step is outside the graphs' envelope ("" when inside), and (*to) the mode latency's own
 * kernels then run it in ("prefill-chunked", "chunked": eagerly, in chunks of <= TC tokens). */
void lt_envelope_reason(const vstep *s, char *why, size_t n, const char **to) {
  const int T = vstep_total_tokens(s);
  int big = 0, small = 0;
  for (int i = 0; i < s->n_seq; i++) (s->n_tokens[i] > MAX_TPS ? big : small)++;
  why[0] = 0;
  if (big && small) {
    snprintf(why, n, "mixed prefill+decode (%d sequences with > %d tokens, %d decoding)", big, MAX_TPS, small);
    *to = "prefill-chunked";
  } else if (big) {
    snprintf(why, n, "prefill (n_tokens > K+1 = %d)", MAX_TPS);
    *to = "prefill-chunked";
  } else if (T > TC) {
    snprintf(why, n, "batch %d > %d tokens", T, TC);
    *to = "chunked";
  }
}
