/* The kernel suite's case generation: each op's preset shapes (from the model config of the
 * preset: tiny, small, k2-slice; "edge" is odd sizes on tiny's config) expanded over batches,
 * input distributions and seeds. One generator per op, found by name in k_op_gens. */
#include "suites/kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"

typedef struct {
  vop_case_list *out;
  const vop_gen_opts *g;
  const char *preset;
  const ds_config *cfg;
  const vop *op;
  bool edge;       /* preset "edge": odd sizes on tiny's config, not the config's shapes */
  bool k2;         /* preset "k2-slice": big shapes, so fewer distributions */
  int ctx;         /* attention context length of the preset's decode shapes */
  int long_ctx;    /* a second, long attention context (keys past 4096, not a multiple of it); 0: none */
  int n_skipped;   /* cases over the quick budget */
} gen_ctx;

static const int k_batches_default[] = {1, 2, 3, 8, 17, 64};
static const int k_batches_quick[] = {1, 3, 8, 64};
static const int k_batches_edge[] = {1, 3, 17};

/* Per-case work budget in multiply-adds (the oracle runs in double on the CPU). Batch 1 is
 * always kept so every shape is covered once. */
#define QUICK_BUDGET 3e7
#define FULL_BUDGET 8e9
/* Shapes whose inputs exceed this many bytes run once (batch 1, first seed, normal) in quick mode. */
#define QUICK_BIG_BYTES ((double)(256 << 20))

static double macs_of(const vop_case *c) {
  const int *d = c->d;
  double B = c->batch;
  if (!strcmp(c->op->name, "linear")) return B * d[0] * (double)d[1];
  if (!strcmp(c->op->name, "swiglu")) return B * 3.0 * d[0] * (double)d[1];
  if (!strcmp(c->op->name, "mla_decode") || !strcmp(c->op->name, "attn_partial"))
    return B * d[0] * (double)d[3] * (d[1] + d[2]);
  if (!strcmp(c->op->name, "mla_absorbed") || !strcmp(c->op->name, "mla_absorbed_dcp"))
    return B * d[0] * ((double)d[4] * (d[1] + d[3]) + (double)d[5] * (2.0 * d[4] + d[2]));
  if (!strcmp(c->op->name, "sample")) return B * d[0] * 4.0 * log2(d[0] + 2.0); /* sorts, 3x */
  if (!strcmp(c->op->name, "embed")) return B * d[1];
  return B * 1e4;
}
static double bytes_of(const vop_case *c) {
  vop_layout l;
  if (c->op->layout(c, &l) != V_OK) return 0;
  double b = 0;
  for (int i = 0; i < l.n; i++) b += (double)l.b[i].n * (double)vdtype_size(l.b[i].dtype);
  return b;
}

/* Expands one shape over batches x distributions x seeds. */
static vstatus emit(gen_ctx *x, const char *shape, const int *d, int nd, const double *f, int nf, const int *dists,
                    int n_dists, bool batch_free, const ds_config *cfg) {
  vop_case c;
  memset(&c, 0, sizeof c);
  c.op = x->op;
  snprintf(c.preset, sizeof c.preset, "%s", x->preset);
  snprintf(c.shape, sizeof c.shape, "%s", shape);
  for (int i = 0; i < nd && i < VOP_MAX_DIMS; i++) c.d[i] = d[i];
  for (int i = 0; i < nf && i < 4; i++) c.f[i] = f[i];
  c.wdtype = DT_BF16;
  c.cfg = cfg ? *cfg : *x->cfg;
  const int *bs;
  int nb;
  const bool edge = !strcmp(x->preset, "edge");
  if (x->g->n_batches > 0) bs = x->g->batches, nb = x->g->n_batches;
  else if (edge) bs = k_batches_edge, nb = 3;
  else if (x->g->quick) bs = k_batches_quick, nb = 4;
  else bs = k_batches_default, nb = 6;
  if (batch_free) nb = 1; /* the op has no batch dimension */
  int seeds = x->g->seeds > 0 ? x->g->seeds
                              : (x->g->quick && (!strcmp(x->preset, "k2-slice") || !strcmp(x->preset, "small")) ? 1 : 2);
  c.batch = 1;
  bool big = x->g->quick && bytes_of(&c) > QUICK_BIG_BYTES;
  for (int bi = 0; bi < nb; bi++) {
    c.batch = batch_free ? 1 : bs[bi];
    if (c.batch < 1) continue;
    double budget = x->g->quick ? QUICK_BUDGET : FULL_BUDGET;
    if ((c.batch > 1 && macs_of(&c) > budget) || (big && c.batch > 1)) { x->n_skipped += n_dists * seeds; continue; }
    for (int di = 0; di < n_dists; di++) {
      if (big && di > 0) { x->n_skipped += seeds; continue; }
      for (int s = 0; s < seeds; s++) {
        if (big && s > 0) { x->n_skipped++; continue; }
        c.dist = dists[di];
        c.seed = 1000 + 100 * x->g->seed0 + (uint64_t)s;
        VTRY(vop_case_push(x->out, &c));
      }
    }
  }
  return V_OK;
}

#define ARR(...) ((const int[]){__VA_ARGS__}), (int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int))
#define FARR(...) ((const double[]){__VA_ARGS__}), (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double))
#define NOF NULL, 0

static double attn_scale(const ds_config *cfg, int qk) {
  ds_config c = *cfg;
  c.qk_head_dim = qk;
  return ds_attention_scale(&c);
}


/* Input distributions the generators share. */
static const int d_std[] = {VD_NORMAL, VD_HEAVY}, d_big[] = {VD_NORMAL, VD_HEAVY, VD_LARGE};
static const int d_tie[] = {VD_NORMAL, VD_HEAVY, VD_NEARTIE, VD_LARGE};
/* ops whose math is not scale-free (a norm's eps, silu) also run at real early-layer activation
 * scale (VD_SMALL, mean square 1e-4), where such constants show */
static const int d_norm[] = {VD_NORMAL, VD_HEAVY, VD_LARGE, VD_SMALL}, d_act[] = {VD_NORMAL, VD_HEAVY, VD_SMALL};
/* Integer inputs: the communication ops' sums are exact, whatever the order of the adds. */
static const int d_int[] = {VD_SMALLINT};

/* Each op's generator appends its cases for x->preset to x->out; fails only as emit does. */

static vstatus gen_embed(gen_ctx *x) {
  if (x->edge) {
    VTRY(emit(x, "1x1", ARR(1, 1), NOF, ARR(VD_NORMAL), false, NULL));
    return emit(x, "3x13", ARR(3, 13), NOF, ARR(VD_NORMAL, VD_LARGE), false, NULL);
  }
  return emit(x, "embed_tokens", ARR(x->cfg->vocab_size, x->cfg->hidden_size), NOF, ARR(VD_NORMAL, VD_LARGE), false,
              NULL);
}

static vstatus gen_rmsnorm(gen_ctx *x) {
  const ds_config *c = x->cfg;
  double eps = c->rms_norm_eps;
  if (x->edge) {
    const int ns[] = {1, 7, 33, 4097};
    for (int i = 0; i < 4; i++) {
      char nm[16];
      snprintf(nm, sizeof nm, "n%d", ns[i]);
      VTRY(emit(x, nm, &ns[i], 1, &eps, 1, d_norm, 4, false, NULL));
    }
    return V_OK;
  }
  VTRY(emit(x, "hidden", &c->hidden_size, 1, &eps, 1, d_norm, 4, false, NULL));
  if (c->q_lora_rank) VTRY(emit(x, "q_a_layernorm", &c->q_lora_rank, 1, &eps, 1, d_norm, 4, false, NULL));
  return emit(x, "kv_a_layernorm", &c->kv_lora_rank, 1, &eps, 1, d_norm, 4, false, NULL);
}

static vstatus gen_add_rmsnorm(gen_ctx *x) {
  double eps = x->cfg->rms_norm_eps;
  if (x->edge) {
    VTRY(emit(x, "n1", ARR(1), &eps, 1, d_norm, 4, false, NULL));
    return emit(x, "n13", ARR(13), &eps, 1, d_norm, 4, false, NULL);
  }
  return emit(x, "hidden", &x->cfg->hidden_size, 1, &eps, 1, d_norm, 4, false, NULL);
}

static vstatus gen_linear(gen_ctx *x) {
  if (x->edge) {
    VTRY(emit(x, "1x1", ARR(1, 1), NOF, d_big, 3, false, NULL));
    VTRY(emit(x, "3x5", ARR(3, 5), NOF, d_big, 3, false, NULL));
    VTRY(emit(x, "17x33", ARR(17, 33), NOF, d_big, 3, false, NULL));
    VTRY(emit(x, "129x1031", ARR(129, 1031), NOF, d_std, 2, false, NULL));
    return emit(x, "1x4099", ARR(1, 4099), NOF, d_std, 2, false, NULL);
  }
  const ds_config *c = x->cfg;
  const int D = c->hidden_size, H = c->num_attention_heads, n = c->qk_nope_head_dim, r = c->qk_rope_head_dim,
            v = c->v_head_dim, kvl = c->kv_lora_rank, E = c->n_routed_experts;
  const int mi = c->moe_intermediate_size, si = c->moe_intermediate_size * c->n_shared_experts;
  struct { const char *nm; int o, i; } sh[] = {
      {"q_a_proj", c->q_lora_rank, D},       {"q_b_proj", H * (n + r), c->q_lora_rank},
      {"q_proj", c->q_lora_rank ? 0 : H * (n + r), D},
      {"kv_a_proj", kvl + r, D},             {"kv_b_proj", H * (n + v), kvl},
      {"o_proj", D, H * v},                  {"router_gate", E, D},
      {"expert_gate_up", mi, D},             {"expert_down", D, mi},
      {"shared_gate_up", si != mi ? si : 0, D}, {"shared_down", si != mi ? D : 0, si},
      {"dense_gate_up", c->intermediate_size, D}, {"dense_down", D, c->intermediate_size},
      {"lm_head", c->vocab_size, D},
  };
  for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
    if (sh[i].o <= 0 || sh[i].i <= 0) continue;
    const int dd[2] = {sh[i].o, sh[i].i};
    VTRY(emit(x, sh[i].nm, dd, 2, NULL, 0, x->k2 ? d_std : d_big, x->k2 ? 2 : 3, false, NULL));
  }
  return V_OK;
}

static vstatus gen_rope(gen_ctx *x) {
  const ds_config *c = x->cfg;
  const int H = c->num_attention_heads, r = c->qk_rope_head_dim, mp = c->max_position_embeddings;
  if (x->edge) {
    ds_config e2 = *c, e6 = *c;
    e2.qk_rope_head_dim = 2;
    e6.qk_rope_head_dim = 6;
    VTRY(emit(x, "dim2", ARR(1, 2, 1, mp), NOF, d_std, 2, false, &e2));
    return emit(x, "h3_dim6", ARR(3, 6, 0, mp), NOF, d_std, 2, false, &e6);
  }
  VTRY(emit(x, "q_pe_interleaved", ARR(H, r, 1, mp), NOF, d_big, 3, false, NULL));
  VTRY(emit(x, "q_pe_half", ARR(H, r, 0, mp), NOF, d_std, 2, false, NULL));
  return emit(x, "k_pe_interleaved", ARR(1, r, 1, mp), NOF, d_std, 2, false, NULL);
}

static vstatus gen_mla_decode(gen_ctx *x) {
  const ds_config *c = x->cfg;
  if (x->edge) {
    double s1 = attn_scale(c, 3), s2 = attn_scale(c, 13);
    VTRY(emit(x, "h1_ctx1", ARR(1, 3, 5, 1), &s1, 1, d_std, 2, false, NULL));
    return emit(x, "h3_ctx19", ARR(3, 13, 7, 19), &s2, 1, d_std, 2, false, NULL);
  }
  double s = ds_attention_scale(c);
  return emit(x, "decode", ARR(c->num_attention_heads, c->qk_nope_head_dim + c->qk_rope_head_dim, c->v_head_dim, x->ctx),
              &s, 1, d_std, 2, false, NULL);
}

static vstatus gen_mla_absorbed(gen_ctx *x) {
  const ds_config *c = x->cfg;
  if (x->edge) {
    double s1 = attn_scale(c, 5), s2 = attn_scale(c, 9);
    VTRY(emit(x, "h1_ctx1", ARR(1, 3, 2, 5, 7, 1), &s1, 1, d_std, 2, false, NULL));
    return emit(x, "h3_ctx13", ARR(3, 5, 4, 3, 9, 13), &s2, 1, d_std, 2, false, NULL);
  }
  double s = ds_attention_scale(c);
  VTRY(emit(x, "latent",
            ARR(c->num_attention_heads, c->qk_nope_head_dim, c->qk_rope_head_dim, c->v_head_dim, c->kv_lora_rank,
                x->ctx),
            &s, 1, d_std, 2, false, NULL));
  if (!x->long_ctx) return V_OK;
  /* Past 4096 keys the tensor-core attention (v2_gemm) rounds its key bucket to multiples of 4096: a ctx
   * of 4096 + 2055 is in the second bucket (8192 keys) with 2055 real ones, so a bucket rounded the wrong
   * way drops a third of row 0's keys, and the generator's 1-key row sits far below its bucket (the mask
   * past a row's position). Two heads keep batch 3 under the quick budget (the kernels, not the heads,
   * are what a long ctx tests). */
  return emit(x, "latent_long",
              ARR(2, c->qk_nope_head_dim, c->qk_rope_head_dim, c->v_head_dim, c->kv_lora_rank, x->long_ctx), &s, 1,
              d_std, 2, false, NULL);
}

/* Decode context parallelism: mla_absorbed's latent shape with its positions over N = 1, 2, 3, 4, 8
 * simulated ranks (the CUDA path's DCP sizes, N = 1 the degenerate split), heads rounded up to a
 * multiple of N (each rank owns ceil(H / N) query heads, as TP N shards them). The rows (key counts
 * not multiples of N, a slot with fewer positions than ranks, 2-3 token causal steps) are the op's
 * input generator's (reference/cpu/oracle.c). */
static vstatus gen_mla_absorbed_dcp(gen_ctx *x) {
  const ds_config *c = x->cfg;
  if (x->edge) {
    double s1 = attn_scale(c, 9), s2 = attn_scale(c, 7);
    VTRY(emit(x, "h3_ctx13_dcp3", ARR(3, 5, 4, 3, 9, 13, 3), &s1, 1, d_std, 2, false, NULL));
    return emit(x, "h2_ctx2_dcp2", ARR(2, 3, 4, 5, 7, 2, 2), &s2, 1, d_std, 2, false, NULL);
  }
  static const int ranks[] = {1, 2, 3, 4, 8};
  const double s = ds_attention_scale(c);
  for (int i = 0; i < 5; i++) {
    const int N = ranks[i], H = (c->num_attention_heads + N - 1) / N * N;
    char nm[16];
    snprintf(nm, sizeof nm, "dcp%d", N);
    VTRY(emit(x, nm, ARR(H, c->qk_nope_head_dim, c->qk_rope_head_dim, c->v_head_dim, c->kv_lora_rank, x->ctx, N), &s,
              1, d_std, 2, false, NULL));
  }
  return V_OK;
}

static vstatus gen_attn_partial(gen_ctx *x) {
  const ds_config *c = x->cfg;
  if (x->edge) {
    double s1 = attn_scale(c, 3), s2 = attn_scale(c, 5);
    VTRY(emit(x, "ctx7_s7", ARR(1, 3, 5, 7, 7), &s1, 1, d_std, 2, false, NULL));
    return emit(x, "ctx13_s5", ARR(2, 5, 3, 13, 5), &s2, 1, d_std, 2, false, NULL);
  }
  const int H = c->num_attention_heads, qk = c->qk_nope_head_dim + c->qk_rope_head_dim, v = c->v_head_dim;
  double s = ds_attention_scale(c);
  VTRY(emit(x, "splits4", ARR(H, qk, v, x->ctx, 4), &s, 1, d_std, 2, false, NULL));
  return emit(x, "splits7", ARR(H, qk, v, x->ctx, 7), &s, 1, ARR(VD_NORMAL), false, NULL);
}

static vstatus gen_lse_combine(gen_ctx *x) {
  if (x->edge) {
    VTRY(emit(x, "s1", ARR(1, 5, 1), NOF, d_big, 3, false, NULL));
    return emit(x, "h3_v7_s5", ARR(3, 7, 5), NOF, d_big, 3, false, NULL);
  }
  const int H = x->cfg->num_attention_heads, v = x->cfg->v_head_dim;
  VTRY(emit(x, "splits4", ARR(H, v, 4), NOF, d_big, 3, false, NULL));
  return emit(x, "splits16", ARR(H, v, 16), NOF, d_big, 3, false, NULL);
}

static vstatus gen_router(gen_ctx *x) {
  const ds_config *c = x->cfg;
  const int E = c->n_routed_experts, K = c->num_experts_per_tok;
  typedef struct { const char *nm; int e, k, g, tg, norm; double sc; } rshape;
  rshape sh[4];
  int ns = 0;
  if (x->edge) {
    sh[ns++] = (rshape){"e1_k1", 1, 1, 1, 1, 1, 1.0};
    sh[ns++] = (rshape){"e7_k3", 7, 3, 1, 1, 1, 2.5};
    sh[ns++] = (rshape){"e12_k5_g3", 12, 5, 3, 2, 0, 1.0};
  } else {
    sh[ns++] = (rshape){"gate", E, K, c->n_group, c->topk_group, c->norm_topk_prob, c->routed_scaling_factor};
    /* DeepSeek-V3 style group-limited routing at this preset's expert count. */
    if (c->n_group <= 1 && E % 8 == 0)
      sh[ns++] = (rshape){"grouped_8x4", E, K, 8, 4, 1, c->routed_scaling_factor};
  }
  for (int i = 0; i < ns; i++) {
    ds_config rc = *c;
    rc.n_routed_experts = sh[i].e;
    rc.num_experts_per_tok = sh[i].k;
    rc.n_group = sh[i].g;
    rc.topk_group = sh[i].tg;
    rc.norm_topk_prob = sh[i].norm;
    rc.routed_scaling_factor = sh[i].sc;
    const int dd[5] = {sh[i].e, sh[i].k, sh[i].g, sh[i].tg, sh[i].norm};
    VTRY(emit(x, sh[i].nm, dd, 5, &sh[i].sc, 1, d_tie, 4, false, &rc));
  }
  return V_OK;
}

static vstatus gen_swiglu(gen_ctx *x) {
  const ds_config *c = x->cfg;
  const int D = c->hidden_size;
  if (x->edge) {
    VTRY(emit(x, "d1_i1", ARR(1, 1), NOF, d_act, 3, false, NULL));
    return emit(x, "d13_i7", ARR(13, 7), NOF, d_act, 3, false, NULL);
  }
  VTRY(emit(x, "expert", ARR(D, c->moe_intermediate_size), NOF, d_act, 3, false, NULL));
  if (c->n_shared_experts > 1)
    VTRY(emit(x, "shared", ARR(D, c->moe_intermediate_size * c->n_shared_experts), NOF, d_act, 3, false, NULL));
  return emit(x, "dense", ARR(D, c->intermediate_size), NOF, d_act, 3, false, NULL);
}

static vstatus gen_moe_combine(gen_ctx *x) {
  if (x->edge) {
    VTRY(emit(x, "d13_k1", ARR(13, 1), NOF, d_big, 3, false, NULL));
    return emit(x, "d7_k3", ARR(7, 3), NOF, d_big, 3, false, NULL);
  }
  return emit(x, "combine", ARR(x->cfg->hidden_size, x->cfg->num_experts_per_tok), NOF, d_big, 3, false, NULL);
}

static vstatus gen_sample(gen_ctx *x) {
  const int V = x->edge ? 7 : x->cfg->vocab_size;
  const int d_s[] = {VD_NORMAL, VD_NEARTIE, VD_LARGE};
  if (x->edge) VTRY(emit(x, "v1_greedy", ARR(1, 0), FARR(0.0, 1.0), d_s, 3, false, NULL));
  VTRY(emit(x, "greedy", ARR(V, 0), FARR(0.0, 1.0), d_s, 3, false, NULL));
  VTRY(emit(x, "t0.7", ARR(V, 0), FARR(0.7, 1.0), d_s, 3, false, NULL));
  VTRY(emit(x, "t1_k40", ARR(V, 40), FARR(1.0, 1.0), d_s, 3, false, NULL));
  VTRY(emit(x, "t0.8_p0.9", ARR(V, 0), FARR(0.8, 0.9), d_s, 3, false, NULL));
  return emit(x, "t1_k50_p0.95", ARR(V, 50), FARR(1.0, 0.95), d_s, 3, false, NULL);
}

/* --tp N: N ranks and an odd row length; otherwise 2, 4, 8 and 16 ranks (batch-free). */
static vstatus gen_allreduce(gen_ctx *x) {
  const int D = x->cfg->hidden_size, tp = x->g->tp;
  if (x->edge) {
    VTRY(emit(x, "r3_n1", ARR(3, 1), NOF, d_int, 1, true, NULL));
    return emit(x, "r5_n17", ARR(5, 17), NOF, d_int, 1, true, NULL);
  }
  if (tp > 0) {
    char nm[32];
    snprintf(nm, sizeof nm, "tp%d", tp);
    VTRY(emit(x, nm, ARR(tp, D), NOF, d_int, 1, true, NULL));
    return emit(x, "odd", ARR(tp, D + 3), NOF, d_int, 1, true, NULL);
  }
  VTRY(emit(x, "tp2", ARR(2, D), NOF, d_int, 1, true, NULL));
  VTRY(emit(x, "tp4", ARR(4, D), NOF, d_int, 1, true, NULL));
  VTRY(emit(x, "tp8", ARR(8, D), NOF, d_int, 1, true, NULL));
  return emit(x, "tp16_odd", ARR(16, D + 3), NOF, d_int, 1, true, NULL);
}

/* --tp N: N ranks only (none on edge); otherwise 2, 4, 8 and 16 ranks. */
static vstatus gen_allreduce_add_rmsnorm(gen_ctx *x) {
  const int D = x->cfg->hidden_size, tp = x->g->tp;
  const double eps = x->cfg->rms_norm_eps;
  if (x->edge) {
    if (tp > 0) return V_OK;
    VTRY(emit(x, "r3_n8", ARR(3, 8), &eps, 1, d_int, 1, false, NULL));
    return emit(x, "r5_n4", ARR(5, 4), &eps, 1, d_int, 1, false, NULL);
  }
  const int ranks[] = {2, 4, 8, 16};
  for (int i = 0; i < 4; i++) {
    if (tp > 0 && ranks[i] != tp) continue;
    char nm[32];
    snprintf(nm, sizeof nm, "tp%d", ranks[i]);
    VTRY(emit(x, nm, ARR(ranks[i], D), &eps, 1, d_int, 1, false, NULL));
  }
  if (tp > 0 && tp != 2 && tp != 4 && tp != 8 && tp != 16) {
    char nm[32];
    snprintf(nm, sizeof nm, "tp%d", tp);
    VTRY(emit(x, nm, ARR(tp, D), &eps, 1, d_int, 1, false, NULL));
  }
  return V_OK;
}

/* The ops this file generates cases for, by registered name (reference/cpu/oracle.c registers
 * them); an op not listed here has no preset cases unless its descriptor's gen_cases gives some. */
static const struct {
  const char *op;
  vstatus (*gen)(gen_ctx *x);
} k_op_gens[] = {
    {"embed", gen_embed},
    {"rmsnorm", gen_rmsnorm},
    {"add_rmsnorm", gen_add_rmsnorm},
    {"linear", gen_linear},
    {"rope", gen_rope},
    {"mla_decode", gen_mla_decode},
    {"mla_absorbed", gen_mla_absorbed},
    {"mla_absorbed_dcp", gen_mla_absorbed_dcp},
    {"attn_partial", gen_attn_partial},
    {"lse_combine", gen_lse_combine},
    {"router", gen_router},
    {"swiglu", gen_swiglu},
    {"moe_combine", gen_moe_combine},
    {"sample", gen_sample},
    {"allreduce", gen_allreduce},
    {"allreduce_add_rmsnorm", gen_allreduce_add_rmsnorm},
};

vstatus kernels_gen_cases(const vop *op, const char *preset, const vop_gen_opts *g, vop_case_list *out,
                          int *n_skipped) {
  if (op->gen_cases) return op->gen_cases(out, preset, g);
  ds_config cfg;
  /* "edge" uses tiny's config (YaRN, eps) with its own odd sizes */
  VTRY(ds_preset_config(!strcmp(preset, "edge") ? "tiny" : preset, 0, &cfg));
  gen_ctx x = {.out = out, .g = g, .preset = preset, .cfg = &cfg, .op = op};
  x.edge = !strcmp(preset, "edge");
  x.k2 = !strcmp(preset, "k2-slice");
  x.ctx = !strcmp(preset, "tiny") ? 67 : !strcmp(preset, "small") ? 300 : 1024;
  x.long_ctx = !strcmp(preset, "small") || x.k2 ? 6151 : 0; /* the GPU presets: the long-context kernels' */
  vstatus s = V_OK;
  for (size_t i = 0; i < sizeof k_op_gens / sizeof k_op_gens[0]; i++)
    if (!strcmp(op->name, k_op_gens[i].op)) { s = k_op_gens[i].gen(&x); break; }
  *n_skipped += x.n_skipped;
  return s;
}
