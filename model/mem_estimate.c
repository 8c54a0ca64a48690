/* Memory estimates of the decode paths at open (model/mem_estimate.h). */
#include "model/mem_estimate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

#define GIB 1073741824.0
#define LAT_ROWS 64          /* kernels/latency.cu TC: token rows of one graph step */
#define LAT_TP_ROWS 16       /* kernels/latency_tp.h LAT_TP_MAX: padding rows of the residual stream */
#define LAT_SCRATCH (32u << 20) /* kernels/latency.cu WS_BYTES: each split-K / cuBLAS scratch */
#define LAT_FILL_ROWS 256    /* kernels/latency.cu FILL_ROWS */
#define LAT_MAX_TPS 8        /* kernels/latency.cu MAX_TPS: tokens per sequence in the envelope */

static double align256(double b) { return (double)(((unsigned long long)b + 255ull) & ~255ull); }

/* Clears out, sets where the bytes live and the cache layout, and checks the options. */
static vstatus begin(const char *path, const ds_config *c, const ds_mem_opts *o, bool on_gpu, const char *layout,
                     ds_mem_estimate *out) {
  memset(out, 0, sizeof *out);
  out->on_gpu = on_gpu;
  out->ranks = 1;
  snprintf(out->kv_layout, sizeof out->kv_layout, "%s", layout);
  if (o->max_seq < 1) return VERR("%s: max_seq %d must be >= 1", path, o->max_seq);
  if (o->max_ctx < 1) return VERR("%s: max_ctx %d must be >= 1", path, o->max_ctx);
  if (c->num_hidden_layers < 1 || c->hidden_size < 1 || c->vocab_size < 1)
    return VERR("%s: config has no layers, hidden size or vocabulary", path);
  return V_OK;
}

/* The weights every path binds, elements x bytes each as the GPU paths store them (bf16; the router
 * bias fp32), each `align`ed (cuda-ref's arena: 256; 1 for a plain sum); lm_head holds lm_rows rows. */
static vstatus weight_bytes(const ds_config *c, int lm_rows, bool aligned, double *out) {
  ds_tensor_spec *sp;
  int n;
  VTRY(ds_tensor_specs(c, &sp, &n));
  double b = 0;
  for (int i = 0; i < n; i++) {
    double rows = (double)sp[i].shape[0], cols = sp[i].ndim > 1 ? (double)sp[i].shape[1] : 1.0;
    if (!strcmp(sp[i].name, "lm_head.weight") && lm_rows > 0) rows = lm_rows;
    const double e = rows * cols * (sp[i].dtype == DT_F32 ? 4.0 : 2.0);
    b += aligned ? align256(e) : e;
  }
  free(sp);
  *out = b;
  return V_OK;
}

vstatus ds_mem_cuda_ref(const ds_config *c, const ds_mem_opts *o, ds_mem_estimate *out) {
  VTRY(begin("cuda-ref", c, o, true, "bf16 expanded per head", out));
  VTRY(weight_bytes(c, o->lm_rows, true, &out->weight_bytes));
  const double H = c->num_attention_heads, dk = c->qk_nope_head_dim + c->qk_rope_head_dim, v = c->v_head_dim;
  const double slots = (double)o->max_seq * o->max_ctx;
  out->kv_bytes = c->num_hidden_layers * (align256(slots * H * dk * 2) + align256(slots * H * v * 2));
  out->work_bytes = DS_MEM_CUDA_REF_RESERVE;
  if (o->rows > 0) { /* ws_layout (reference/cuda/cuda_ref.cu), array by array, for the rows ensure_ws holds */
    const double n = (o->rows + 63) / 64 * 64, D = c->hidden_size, ql = c->q_lora_rank > 0 ? c->q_lora_rank : 1;
    const double nope = c->qk_nope_head_dim, r = c->qk_rope_head_dim, kl = c->kv_lora_rank;
    const double K = c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 1;
    const double Imax = ds_mem_cuda_ref_imax(c);
    const double per_row[] = {
        D * 4, D * 2,                                           /* x, xn */
        ql * 2, ql * 2, H * dk * 2, (kl + r) * 2, kl * 2,       /* qa, qan, q, ckv, latn */
        H * (nope + v) * 2, H * v * 2, D * 2,                   /* kv, attn, o */
        Imax * 2, Imax * 2, Imax * 2, D * 2, D * 2,             /* g, u, a, xg, y */
        K * 4, K * 4, K * 4, K * 4, 4, 4, 4, 4};                /* idx, wt, perm_tok, perm_w, tok, slot, pos, rows */
    for (size_t i = 0; i < sizeof per_row / sizeof *per_row; i++) out->work_bytes += align256(n * per_row[i]);
    if (o->tp > 1) out->work_bytes += align256(n * D * 4); /* ensure_tpo: fp32 partials */
  }
  if (o->logit_rows > 1) { /* ensure_logits [R, V] fp32; TP: tp_logits' gathered blocks and padding */
    const double R = o->logit_rows, V = c->vocab_size, blk = o->lm_rows > 0 ? o->lm_rows : V;
    out->work_bytes += align256(R * V * 4);
    if (o->tp > 1) out->work_bytes += align256(o->tp * R * blk * 4) + align256(R * blk * 4);
  }
  return V_OK;
}

vstatus ds_mem_latency(const ds_config *c, const ds_mem_opts *o, ds_mem_estimate *out) {
  VTRY(begin("latency", c, o, true, "bf16 latent", out));
  const double D = c->hidden_size, H = c->num_attention_heads, nope = c->qk_nope_head_dim, r = c->qk_rope_head_dim;
  const double kl = c->kv_lora_rank, v = c->v_head_dim, W = kl + r, dk = nope + r;
  const double ql = c->q_lora_rank > 0 ? c->q_lora_rank : 1, NA = (c->q_lora_rank > 0 ? c->q_lora_rank : H * dk) + W;
  const double E = c->n_routed_experts > 0 ? c->n_routed_experts : 1;
  const double K = c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 1;
  const double F = c->moe_intermediate_size > 0 ? c->moe_intermediate_size : 1;
  const double Fs = c->moe_intermediate_size * c->n_shared_experts > 0 ? c->moe_intermediate_size * c->n_shared_experts : 1;
  const double I = c->intermediate_size > 0 ? c->intermediate_size : 1;
  const int tp = o->tp > 1 ? o->tp : 1, dcp_n = o->dcp ? tp : 1;
  const double Ha = H * dcp_n, lctx = (o->max_ctx + dcp_n - 1) / dcp_n;
  int n_moe = 0;
  for (int l = 0; l < c->num_hidden_layers; l++) n_moe += ds_layer_is_moe(c, l) ? 1 : 0;
  const double L = c->num_hidden_layers, nm = n_moe > 0 ? n_moe : 1, n = LAT_ROWS;

  /* weights: the checkpoint's tensors, W_UK^T per layer, the gate/up staging, the expert tables */
  VTRY(weight_bytes(c, o->lm_rows, false, &out->weight_bytes));
  double rows_max = I > F ? I : F;
  if (Fs > rows_max) rows_max = Fs;
  out->weight_bytes += L * H * kl * nope * 2 + rows_max * D * 2 + n_moe * 2 * E * 8.0;
  out->kv_bytes = L * o->max_seq * lctx * W * 2;
  /* alloc_workspace: split-KV partials for at most 2 x SMs + 64 (row, split) pairs */
  const double sms = o->sms > 0 ? o->sms : 132, pr = 2 * sms + n, vblk = (c->vocab_size + tp - 1) / tp;
  double w = (n + LAT_TP_ROWS) * D * (4 + 2);                              /* x, xn */
  if (tp > 1) w += n * vblk * 4 * (1 + tp) + n * NA * 2 * (1 + tp) + n * E * 4 * (1 + tp); /* TP blocks */
  w += n * NA * 2 + n * ql * 2 + n * H * dk * 2 + n * H * kl * 4;          /* qkva, qan, q, qlat */
  w += pr * Ha * 4 * 2 + pr * Ha * kl * 4;                                 /* pm, pl, pacc */
  if (o->dcp) w += n * 4 + n * H * W * 4 * (1 + dcp_n) + n * Ha * (kl * 4 + r * 2) + n * Ha * (kl + 1) * 4 * (1 + dcp_n);
  w += n * H * kl * 2 + n * H * v * 2 + n * D * 2 + n * I * 2;             /* olat, attn, y, act */
  w += n * E * 4 + n * K * 8 + 3 * E * 4 + n * K * 8;                      /* router, buckets */
  w += n * K * F * 2 + n * K * D * 2 + n * Fs * 2 + n * D * 2;             /* hbuf, Ybuf, ash, ysh */
  w += 4 * n * 4 + nm * n * K * 4 + n * c->vocab_size * 4.0;               /* step inputs, logits */
  w += 4.0 * LAT_SCRATCH + LAT_FILL_ROWS * (W * 2 + 8);                    /* split-K, cuBLAS, fill */
  out->work_bytes = w;
  /* alloc_gemm_attention (optional): rows x 2H queries, scores fp32 and P bf16 over ncap keys */
  if (!o->dcp) {
    const double rows = o->max_seq * LAT_MAX_TPS < LAT_ROWS ? o->max_seq * LAT_MAX_TPS : LAT_ROWS;
    double ncap = 256;
    while (ncap < o->max_ctx && ncap < 4096) ncap *= 2;
    if (ncap < o->max_ctx) ncap = (double)((o->max_ctx + 4095) / 4096) * 4096;
    if (ncap > o->max_ctx) ncap = o->max_ctx;
    const double ne = rows * 2 * H * ncap;
    out->optional_bytes = rows * 2 * H * W * 2 + ne * 4 + ne + rows * 8;
  }
  return V_OK;
}

vstatus ds_mem_cpu_ref(const ds_config *c, const ds_mem_opts *o, ds_mem_estimate *out) {
  VTRY(begin("cpu-ref", c, o, false, "fp32 expanded per head", out));
  VTRY(weight_bytes(c, o->lm_rows, false, &out->weight_bytes));
  const double H = c->num_attention_heads, dk = c->qk_nope_head_dim + c->qk_rope_head_dim, v = c->v_head_dim;
  /* grown on demand up to max_ctx: the bound */
  out->kv_bytes = (double)c->num_hidden_layers * o->max_seq * (double)o->max_ctx * H * (dk + v) * 4;
  out->work_bytes = 64.0 * c->vocab_size * 4 + (double)o->max_ctx * 4 * 64; /* logits rows, attention scratch */
  out->host_bytes = ds_mem_total(out);
  return V_OK;
}

vstatus ds_mem_check(const char *path, const ds_mem_estimate *e, const ds_config *c, const ds_mem_opts *o,
                     double free_b, double total_b, const char *device) {
  if (ds_mem_total(e) <= free_b) return V_OK;
  return VERR("%s: needs %.2f GiB of weights + %.2f GiB of KV cache (%d layers x max_seq %d x max_ctx %d, %s) + %.2f "
              "GiB working space, but %s has %.2f GiB free of %.2f GiB: lower max_seq/max_ctx or use fewer layers",
              path, e->weight_bytes / GIB, e->kv_bytes / GIB, c->num_hidden_layers, o->max_seq, o->max_ctx,
              e->kv_layout, e->work_bytes / GIB, device, free_b / GIB, total_b / GIB);
}
