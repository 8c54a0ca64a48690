/* GGUF v3 writer for llama.cpp's deepseek2 architecture (see gguf.h). */
#include "model/gguf.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_ALIGN 32
/* GGUF metadata value types and ggml tensor types (gguf.h / ggml.h of llama.cpp) */
enum { GV_U32 = 4, GV_I32 = 5, GV_F32 = 6, GV_BOOL = 7, GV_STRING = 8, GV_ARRAY = 9 };
enum { GT_F32 = 0, GT_F16 = 1, GT_Q4_0 = 2, GT_Q8_0 = 8, GT_BF16 = 30 };
#define QK 32 /* weights per Q8_0 / Q4_0 block */
/* llama_ftype of a quantized file (general.file_type) */
enum { FTYPE_Q4_0 = 2, FTYPE_Q8_0 = 7 };

/* How a GGUF tensor's elements come from the checkpoint. */
typedef enum {
  SRC_PLAIN,  /* src as is (row-major HF layout = GGUF's ne reversed) */
  SRC_Q,      /* q_b_proj / q_proj: the rope rows of every head permuted (non-interleaved HF) */
  SRC_KV_A,   /* kv_a_proj_with_mqa: its rope rows permuted likewise */
  SRC_K_B,    /* kv_b_proj's k_nope rows, per head transposed: [H][kv_lora][nope] */
  SRC_V_B,    /* kv_b_proj's value rows: [H][v][kv_lora] */
  SRC_EXPS,   /* stacked routed experts: exps[0..E) one after another */
} src_kind;

typedef struct {
  char name[96];
  int ndim;
  uint64_t ne[3];             /* GGUF dims, innermost first */
  int type;                   /* GT_*: the element (or block) type written */
  uint64_t offset;            /* bytes from the start of the data section */
  src_kind kind;
  const vtensor *src;         /* SRC_EXPS: NULL (exps used) */
  const vtensor *const *exps; /* [E] for SRC_EXPS */
} gtensor;

typedef struct {
  char *buf; /* the header being built */
  size_t len, cap;
  uint64_t n_kv;
  vstatus err;
} hdr;

static void put(hdr *h, const void *p, size_t n) {
  if (h->err) return;
  if (h->len + n > h->cap) {
    size_t cap = h->cap ? h->cap : 4096;
    while (cap < h->len + n) cap *= 2;
    char *nb = realloc(h->buf, cap);
    if (!nb) { h->err = VERR("gguf: out of memory for the header"); return; }
    h->buf = nb;
    h->cap = cap;
  }
  memcpy(h->buf + h->len, p, n);
  h->len += n;
}
static void put_u32(hdr *h, uint32_t v) { put(h, &v, 4); }
static void put_u64(hdr *h, uint64_t v) { put(h, &v, 8); }
static void put_str(hdr *h, const char *s) {
  put_u64(h, strlen(s));
  put(h, s, strlen(s));
}
static void kv_key(hdr *h, const char *key, uint32_t type) {
  char k[160];
  if (strchr(key, '.') == key) snprintf(k, sizeof k, "deepseek2%s", key); /* ".x" = architecture key */
  else snprintf(k, sizeof k, "%s", key);
  put_str(h, k);
  put_u32(h, type);
  h->n_kv++;
}
static void kv_u32(hdr *h, const char *key, uint32_t v) { kv_key(h, key, GV_U32); put_u32(h, v); }
static void kv_f32(hdr *h, const char *key, float v) { kv_key(h, key, GV_F32); put(h, &v, 4); }
static void kv_bool(hdr *h, const char *key, int v) { uint8_t b = v != 0; kv_key(h, key, GV_BOOL); put(h, &b, 1); }
static void kv_str(hdr *h, const char *key, const char *v) { kv_key(h, key, GV_STRING); put_str(h, v); }

/* An array of n strings. */
static void kv_strs(hdr *h, const char *key, char *const *v, int n) {
  kv_key(h, key, GV_ARRAY);
  put_u32(h, GV_STRING);
  put_u64(h, (uint64_t)n);
  for (int i = 0; i < n; i++) put_str(h, v[i]);
}

/* llama.cpp's BPE tokenizer keys (as its converter writes them for a gpt2-style vocabulary). */
static void write_vocab(hdr *h, const gguf_vocab *v) {
  kv_str(h, "tokenizer.ggml.model", "gpt2");
  kv_str(h, "tokenizer.ggml.pre", v->pre);
  kv_strs(h, "tokenizer.ggml.tokens", v->tokens, v->n);
  kv_key(h, "tokenizer.ggml.token_type", GV_ARRAY);
  put_u32(h, GV_I32);
  put_u64(h, (uint64_t)v->n);
  put(h, v->types, (size_t)v->n * sizeof *v->types);
  kv_strs(h, "tokenizer.ggml.merges", v->merges, v->n_merges);
  if (v->bos >= 0) kv_u32(h, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos);
  if (v->eos >= 0) kv_u32(h, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos);
  if (v->unk >= 0) kv_u32(h, "tokenizer.ggml.unknown_token_id", (uint32_t)v->unk);
  if (v->pad >= 0) kv_u32(h, "tokenizer.ggml.padding_token_id", (uint32_t)v->pad);
  if (v->add_bos >= 0) kv_bool(h, "tokenizer.ggml.add_bos_token", v->add_bos);
  if (v->add_eos >= 0) kv_bool(h, "tokenizer.ggml.add_eos_token", v->add_eos);
  if (v->chat_template) kv_str(h, "tokenizer.chat_template", v->chat_template);
}

/* The metadata llama.cpp's deepseek2 loader reads, from the HF config. */
static void write_metadata(hdr *h, const ds_model *m, const gguf_opts *o) {
  const ds_config *c = &m->cfg;
  kv_str(h, "general.architecture", "deepseek2");
  kv_str(h, "general.name", m->source);
  kv_u32(h, "general.alignment", GGUF_ALIGN);
  if (o->wtype == GGUF_W_Q8_0 || o->wtype == GGUF_W_Q4_0) /* only quantized files: f32/bf16 stay as before */
    kv_u32(h, "general.file_type", o->wtype == GGUF_W_Q8_0 ? FTYPE_Q8_0 : FTYPE_Q4_0);
  kv_u32(h, ".block_count", (uint32_t)c->num_hidden_layers);
  kv_u32(h, ".context_length", (uint32_t)c->max_position_embeddings);
  kv_u32(h, ".embedding_length", (uint32_t)c->hidden_size);
  kv_u32(h, ".feed_forward_length", (uint32_t)c->intermediate_size);
  kv_u32(h, ".attention.head_count", (uint32_t)c->num_attention_heads);
  kv_u32(h, ".attention.head_count_kv", 1); /* MLA as MQA over the latent */
  kv_f32(h, ".rope.freq_base", (float)c->rope_theta);
  kv_f32(h, ".attention.layer_norm_rms_epsilon", (float)c->rms_norm_eps);
  kv_u32(h, ".vocab_size", (uint32_t)c->vocab_size);
  const int dense = c->n_routed_experts > 0 ? c->first_k_dense_replace : c->num_hidden_layers;
  kv_u32(h, ".leading_dense_block_count", (uint32_t)(dense < c->num_hidden_layers ? dense : c->num_hidden_layers));
  kv_u32(h, ".attention.q_lora_rank", (uint32_t)c->q_lora_rank);
  kv_u32(h, ".attention.kv_lora_rank", (uint32_t)c->kv_lora_rank);
  kv_u32(h, ".attention.key_length", (uint32_t)(c->kv_lora_rank + c->qk_rope_head_dim));
  kv_u32(h, ".attention.value_length", (uint32_t)c->kv_lora_rank);
  kv_u32(h, ".attention.key_length_mla", (uint32_t)(c->qk_nope_head_dim + c->qk_rope_head_dim));
  kv_u32(h, ".attention.value_length_mla", (uint32_t)c->v_head_dim);
  kv_u32(h, ".expert_feed_forward_length", (uint32_t)c->moe_intermediate_size);
  kv_u32(h, ".expert_count", (uint32_t)c->n_routed_experts);
  kv_u32(h, ".expert_used_count", (uint32_t)c->num_experts_per_tok);
  kv_u32(h, ".expert_shared_count", (uint32_t)c->n_shared_experts);
  kv_f32(h, ".expert_weights_scale", (float)c->routed_scaling_factor);
  if (c->norm_topk_prob) kv_bool(h, ".expert_weights_norm", 1); /* the converter writes it only when true */
  kv_u32(h, ".expert_gating_func", 2);                         /* LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID */
  kv_u32(h, ".expert_group_count", (uint32_t)c->n_group);
  kv_u32(h, ".expert_group_used_count", (uint32_t)c->topk_group);
  kv_u32(h, ".rope.dimension_count", (uint32_t)c->qk_rope_head_dim);
  if (c->yarn.enabled) {
    kv_str(h, ".rope.scaling.type", "yarn");
    kv_f32(h, ".rope.scaling.factor", (float)c->yarn.factor);
    kv_u32(h, ".rope.scaling.original_context_length", (uint32_t)c->yarn.original_max_position_embeddings);
    kv_f32(h, ".rope.scaling.yarn_beta_fast", (float)c->yarn.beta_fast);
    kv_f32(h, ".rope.scaling.yarn_beta_slow", (float)c->yarn.beta_slow);
    if (c->yarn.mscale_all_dim != 0) kv_f32(h, ".rope.scaling.yarn_log_multiplier", (float)(0.1 * c->yarn.mscale_all_dim));
  }
  if (o->vocab) {
    write_vocab(h, o->vocab);
    return;
  }
  /* llama.cpp's id-only "test" vocabulary (a token's text is its id in hex): vouch's checkpoints
   * have no tokenizer, and the "none" vocabulary cannot be loaded by node-llama-cpp (it tokenizes) */
  kv_str(h, "tokenizer.ggml.model", "test");
  kv_key(h, "tokenizer.ggml.tokens", GV_ARRAY);
  put_u32(h, GV_STRING);
  put_u64(h, (uint64_t)c->vocab_size);
  for (int i = 0; i < c->vocab_size; i++) {
    char t[16];
    snprintf(t, sizeof t, "%x", i);
    put_str(h, t);
  }
}

typedef struct {
  gtensor *v;
  int n, cap;
} glist;

static gtensor *add(glist *l, const char *name, src_kind kind, const vtensor *src, int type) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    gtensor *nv = realloc(l->v, (size_t)cap * sizeof *nv);
    if (!nv) return NULL;
    l->v = nv;
    l->cap = cap;
  }
  gtensor *g = &l->v[l->n++];
  memset(g, 0, sizeof *g);
  snprintf(g->name, sizeof g->name, "%s", name);
  g->kind = kind;
  g->src = src;
  g->type = type;
  if (src) { /* GGUF dims: HF's shape reversed */
    g->ndim = src->ndim;
    for (int d = 0; d < src->ndim; d++) g->ne[d] = (uint64_t)src->shape[src->ndim - 1 - d];
    if (src->ndim == 1) g->type = GT_F32;
  }
  return g;
}

static uint64_t numel(const gtensor *g) {
  uint64_t n = 1;
  for (int d = 0; d < g->ndim; d++) n *= g->ne[d];
  return n;
}

/* Bytes of one row of `cols` elements in type t (cols a multiple of QK for the block types). */
static uint64_t row_bytes(int t, uint64_t cols) {
  switch (t) {
    case GT_F32: return 4 * cols;
    case GT_Q8_0: return cols / QK * (2 + QK);
    case GT_Q4_0: return cols / QK * (2 + QK / 2);
    default: return 2 * cols; /* F16, BF16 */
  }
}

static uint64_t tensor_bytes(const gtensor *g) { return numel(g) / g->ne[0] * row_bytes(g->type, g->ne[0]); }

/* The quantized export's types, as llama-quantize picks them by default for Q8_0 / Q4_0 (see
 * gguf.h): the matrices build_list put in `q` stay q, the output matrix (token_embd when tied)
 * is Q8_0, and a row length that is not a multiple of QK falls back to F16. */
static void quant_types(glist *l, int q, bool tied) {
  for (int i = 0; i < l->n; i++) {
    gtensor *g = &l->v[i];
    if (g->type != q) continue;
    if (!strcmp(g->name, "output.weight") || (tied && !strcmp(g->name, "token_embd.weight"))) g->type = GT_Q8_0;
    if (g->ne[0] % QK) g->type = GT_F16;
  }
}

/* Q8_0 of x[n] (n a multiple of QK) into o: per block the scale d = max|x| / 127 (stored fp16,
 * rounded to nearest even) and q = round-half-away(x / d) as int8, computed with the f32 d (not
 * its fp16 rounding), which is llama.cpp's reference rule. */
static void q8_0_row(const float *x, int64_t n, uint8_t *o) {
  for (int64_t b = 0; b < n / QK; b++, x += QK, o += 2 + QK) {
    float amax = 0;
    for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    memcpy(o, &h, 2);
    for (int j = 0; j < QK; j++) o[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
  }
}

/* Q4_0 of x[n] into o: per block the element of largest magnitude m (the first of equals) gives
 * d = m / -8 (stored fp16), each weight becomes min(15, trunc(x / d + 8.5)) in 0..15 (value (q - 8) d);
 * byte j holds weight j in its low nibble and weight j + 16 in its high one. */
static void q4_0_row(const float *x, int64_t n, uint8_t *o) {
  for (int64_t b = 0; b < n / QK; b++, x += QK, o += 2 + QK / 2) {
    float amax = 0, m = 0;
    for (int j = 0; j < QK; j++)
      if (fabsf(x[j]) > amax) amax = fabsf(x[j]), m = x[j];
    const float d = m / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    memcpy(o, &h, 2);
    for (int j = 0; j < QK / 2; j++) {
      const int lo = (int)(int8_t)(x[j] * id + 8.5f), hi = (int)(int8_t)(x[j + QK / 2] * id + 8.5f);
      o[2 + j] = (uint8_t)((lo < 15 ? lo : 15) | (hi < 15 ? hi : 15) << 4);
    }
  }
}

/* The GGUF tensor list, in the converter's naming. */
static vstatus build_list(const ds_model *m, int mtype, glist *l) {
  const ds_config *c = &m->cfg;
  const int H = c->num_attention_heads, E = c->n_routed_experts;
  char nm[96];
#define ADD(kind, src, type, ...) \
  do { snprintf(nm, sizeof nm, __VA_ARGS__); if (!add(l, nm, kind, src, type)) return VERR("gguf: out of memory"); } while (0)
  ADD(SRC_PLAIN, m->embed, mtype, "token_embd.weight");
  ADD(SRC_PLAIN, m->final_norm, GT_F32, "output_norm.weight");
  if (!c->tie_word_embeddings) ADD(SRC_PLAIN, m->lm_head, mtype, "output.weight");
  for (int i = 0; i < c->num_hidden_layers; i++) {
    const ds_layer *L = &m->layers[i];
    ADD(SRC_PLAIN, L->input_layernorm, GT_F32, "blk.%d.attn_norm.weight", i);
    if (L->q_a_proj) {
      ADD(SRC_PLAIN, L->q_a_proj, mtype, "blk.%d.attn_q_a.weight", i);
      ADD(SRC_PLAIN, L->q_a_layernorm, GT_F32, "blk.%d.attn_q_a_norm.weight", i);
      ADD(SRC_Q, L->q_b_proj, mtype, "blk.%d.attn_q_b.weight", i);
    } else {
      ADD(SRC_Q, L->q_proj, mtype, "blk.%d.attn_q.weight", i);
    }
    ADD(SRC_KV_A, L->kv_a_proj_with_mqa, mtype, "blk.%d.attn_kv_a_mqa.weight", i);
    ADD(SRC_PLAIN, L->kv_a_layernorm, GT_F32, "blk.%d.attn_kv_a_norm.weight", i);
    ADD(SRC_K_B, L->kv_b_proj, mtype, "blk.%d.attn_k_b.weight", i);
    l->v[l->n - 1].ndim = 3;
    l->v[l->n - 1].ne[0] = (uint64_t)c->qk_nope_head_dim;
    l->v[l->n - 1].ne[1] = (uint64_t)c->kv_lora_rank;
    l->v[l->n - 1].ne[2] = (uint64_t)H;
    ADD(SRC_V_B, L->kv_b_proj, mtype, "blk.%d.attn_v_b.weight", i);
    l->v[l->n - 1].ndim = 3;
    l->v[l->n - 1].ne[0] = (uint64_t)c->kv_lora_rank;
    l->v[l->n - 1].ne[1] = (uint64_t)c->v_head_dim;
    l->v[l->n - 1].ne[2] = (uint64_t)H;
    ADD(SRC_PLAIN, L->o_proj, mtype, "blk.%d.attn_output.weight", i);
    ADD(SRC_PLAIN, L->post_attention_layernorm, GT_F32, "blk.%d.ffn_norm.weight", i);
    if (!L->is_moe) {
      ADD(SRC_PLAIN, L->gate_proj, mtype, "blk.%d.ffn_gate.weight", i);
      ADD(SRC_PLAIN, L->up_proj, mtype, "blk.%d.ffn_up.weight", i);
      ADD(SRC_PLAIN, L->down_proj, mtype, "blk.%d.ffn_down.weight", i);
      continue;
    }
    ADD(SRC_PLAIN, L->router, GT_F32, "blk.%d.ffn_gate_inp.weight", i);
    if (L->router_bias) ADD(SRC_PLAIN, L->router_bias, GT_F32, "blk.%d.exp_probs_b.bias", i);
    const vtensor *const *ex[3] = {L->exp_gate, L->exp_up, L->exp_down};
    const char *exn[3] = {"gate", "up", "down"};
    for (int k = 0; k < 3; k++) {
      for (int e = 0; e < E; e++)
        if (!ex[k] || !ex[k][e]) return VERR("gguf: layer %d: routed expert %d is not in this model (an EP shard?)", i, e);
      ADD(SRC_EXPS, NULL, mtype, "blk.%d.ffn_%s_exps.weight", i, exn[k]);
      gtensor *g = &l->v[l->n - 1];
      g->exps = ex[k];
      g->ndim = 3;
      g->ne[0] = (uint64_t)ex[k][0]->shape[1];
      g->ne[1] = (uint64_t)ex[k][0]->shape[0];
      g->ne[2] = (uint64_t)E;
    }
    if (c->n_shared_experts > 0) {
      ADD(SRC_PLAIN, L->sh_gate, mtype, "blk.%d.ffn_gate_shexp.weight", i);
      ADD(SRC_PLAIN, L->sh_up, mtype, "blk.%d.ffn_up_shexp.weight", i);
      ADD(SRC_PLAIN, L->sh_down, mtype, "blk.%d.ffn_down_shexp.weight", i);
    }
  }
#undef ADD
  for (int i = 0; i < l->n; i++)
    if (l->v[i].kind != SRC_EXPS && !l->v[i].src) return VERR("gguf: tensor for %s is missing from the model", l->v[i].name);
  return V_OK;
}

/* Row `r` of HF's row-major matrix `t` as f32 into dst[cols]. */
static void row_f32(const vtensor *t, int64_t r, float *dst) {
  const int64_t cols = t->ndim == 1 ? t->shape[0] : t->shape[1];
  vconvert_to_f32(dst, (const char *)t->data + (size_t)(r * cols) * vdtype_size(t->dtype), t->dtype, cols);
}

/* Source row of output row `r` for a rope-permuted projection: within each block of `blk` rows,
 * the last `rope` rows (HF's half-split pairs (j, j + rope/2)) become adjacent pairs. */
static int64_t rope_row(int64_t r, int blk, int rope, bool permute) {
  if (!permute) return r;
  const int64_t b = r / blk, k = r % blk, first = blk - rope;
  if (k < first) return r;
  const int64_t j = k - first; /* output position in the rope part */
  return b * blk + first + (j % 2 ? rope / 2 + j / 2 : j / 2);
}

/* Writes tensor g's elements (GGUF order) to f, converted to g->type; buf holds a converted row. */
static vstatus write_tensor(FILE *f, const ds_config *c, const gtensor *g, float *row, uint8_t *buf,
                            const char *path) {
  const bool perm = !c->rope_interleave;
  const int n = c->qk_nope_head_dim, r = c->qk_rope_head_dim, v = c->v_head_dim, R = c->kv_lora_rank;
  const int64_t cols = (int64_t)g->ne[0];
  const int64_t rows = (int64_t)(numel(g) / g->ne[0]);
  float *kvb = NULL; /* SRC_K_B: one head's k_nope rows [n][R] */
  if (g->kind == SRC_K_B && !(kvb = malloc((size_t)n * R * sizeof *kvb))) return VERR("gguf: out of memory");
  for (int64_t i = 0; i < rows; i++) {
    switch (g->kind) {
      case SRC_PLAIN: row_f32(g->src, i, row); break;
      case SRC_Q: row_f32(g->src, rope_row(i, n + r, r, perm), row); break;
      case SRC_KV_A: row_f32(g->src, i < R ? i : R + rope_row(i - R, r, r, perm), row); break;
      case SRC_V_B: { /* output row (head h, value j) = kv_b row h*(n+v) + n + j */
        const int64_t h = i / v, j = i % v;
        row_f32(g->src, h * (n + v) + n + j, row);
        break;
      }
      case SRC_K_B: { /* output row (head h, latent c): element k = kv_b[h*(n+v) + k][c] */
        const int64_t h = i / R, cc = i % R;
        if (cc == 0)
          for (int k = 0; k < n; k++) row_f32(g->src, h * (n + v) + k, kvb + (size_t)k * R);
        for (int k = 0; k < n; k++) row[k] = kvb[(size_t)k * R + cc];
        break;
      }
      case SRC_EXPS: {
        const int64_t per = (int64_t)g->ne[1];
        row_f32(g->exps[i / per], i % per, row);
        break;
      }
    }
    const size_t nb = (size_t)row_bytes(g->type, (uint64_t)cols);
    uint16_t h;
    switch (g->type) {
      case GT_F32: memcpy(buf, row, nb); break;
      case GT_Q8_0: q8_0_row(row, cols, buf); break;
      case GT_Q4_0: q4_0_row(row, cols, buf); break;
      default:
        for (int64_t k = 0; k < cols; k++) {
          h = g->type == GT_BF16 ? f32_to_bf16(row[k]) : f32_to_f16(row[k]);
          memcpy(buf + 2 * k, &h, 2);
        }
    }
    if (fwrite(buf, 1, nb, f) != nb) { free(kvb); return VERR("%s: write failed in tensor %s: %s", path, g->name, strerror(errno)); }
  }
  free(kvb);
  return V_OK;
}

static vstatus pad(FILE *f, uint64_t at, const char *path) {
  static const char zero[GGUF_ALIGN];
  const size_t k = (size_t)((GGUF_ALIGN - at % GGUF_ALIGN) % GGUF_ALIGN);
  if (k && fwrite(zero, 1, k, f) != k) return VERR("%s: write failed: %s", path, strerror(errno));
  return V_OK;
}

static const char *const WTYPE_NAMES[] = {"f32", "bf16", "q8_0", "q4_0"};

const char *gguf_wtype_name(gguf_wtype w) { return (unsigned)w < 4 ? WTYPE_NAMES[w] : "?"; }

vstatus gguf_wtype_parse(const char *s, gguf_wtype *w) {
  for (int i = 0; i < 4; i++)
    if (!strcmp(s, WTYPE_NAMES[i])) {
      *w = (gguf_wtype)i;
      return V_OK;
    }
  return VERR("expected f32, bf16, q8_0 or q4_0, got '%s'", s);
}

vstatus gguf_export(const ds_model *m, const char *path, const gguf_opts *o) {
  static const int GT_OF[] = {GT_F32, GT_BF16, GT_Q8_0, GT_Q4_0};
  if ((unsigned)o->wtype >= 4) return VERR("gguf: unknown weight type %d", (int)o->wtype);
  if (m->tp_size > 1) return VERR("gguf: %s is a tensor-parallel shard; export the full model", m->source);
  const ds_config *c = &m->cfg;
  if (o->vocab && o->vocab->n != c->vocab_size)
    return VERR("gguf: the tokenizer holds %d tokens, the model's vocab_size is %d", o->vocab->n, c->vocab_size);
  if (c->n_routed_experts > 0 && c->first_k_dense_replace < c->num_hidden_layers && c->n_shared_experts == 0)
    fprintf(stderr, "gguf: note: n_shared_experts = 0: llama.cpp's deepseek2 requires shared-expert tensors "
                    "(docs/llama-cpp.md); the file follows HF and has none\n");
  glist l = {0};
  const int mtype = GT_OF[o->wtype];
  vstatus s = build_list(m, mtype, &l);
  if (!s && (mtype == GT_Q8_0 || mtype == GT_Q4_0)) quant_types(&l, mtype, c->tie_word_embeddings);
  hdr h = {0};
  if (!s) {
    write_metadata(&h, m, o);
    uint64_t off = 0;
    for (int i = 0; i < l.n; i++) {
      gtensor *g = &l.v[i];
      g->offset = off;
      off += tensor_bytes(g);
      off += (GGUF_ALIGN - off % GGUF_ALIGN) % GGUF_ALIGN;
    }
    s = h.err;
  }
  FILE *f = NULL;
  if (!s && !(f = fopen(path, "wb"))) s = VERR("%s: cannot create: %s", path, strerror(errno));
  if (!s) { /* magic, version, counts, metadata, tensor infos */
    hdr top = {0};
    put(&top, "GGUF", 4);
    put_u32(&top, 3);
    put_u64(&top, (uint64_t)l.n);
    put_u64(&top, h.n_kv);
    put(&top, h.buf, h.len);
    for (int i = 0; i < l.n; i++) {
      const gtensor *g = &l.v[i];
      put_str(&top, g->name);
      put_u32(&top, (uint32_t)g->ndim);
      for (int d = 0; d < g->ndim; d++) put_u64(&top, g->ne[d]);
      put_u32(&top, (uint32_t)g->type);
      put_u64(&top, g->offset);
    }
    s = top.err;
    if (!s && fwrite(top.buf, 1, top.len, f) != top.len) s = VERR("%s: write failed: %s", path, strerror(errno));
    if (!s) s = pad(f, top.len, path);
    free(top.buf);
  }
  int64_t maxcols = 1;
  for (int i = 0; i < l.n; i++)
    if ((int64_t)l.v[i].ne[0] > maxcols) maxcols = (int64_t)l.v[i].ne[0];
  if (c->kv_lora_rank > maxcols) maxcols = c->kv_lora_rank;
  float *row = s ? NULL : malloc((size_t)maxcols * sizeof *row);
  uint8_t *buf = s ? NULL : malloc((size_t)maxcols * sizeof(float)); /* a row in any type fits */
  if (!s && (!row || !buf)) s = VERR("gguf: out of memory");
  for (int i = 0; !s && i < l.n; i++) {
    const gtensor *g = &l.v[i];
    s = write_tensor(f, c, g, row, buf, path);
    if (!s) s = pad(f, g->offset + tensor_bytes(g), path);
  }
  if (f && fclose(f) != 0 && !s) s = VERR("%s: write failed: %s", path, strerror(errno));
  if (s && f) remove(path);
  free(row);
  free(buf);
  free(h.buf);
  free(l.v);
  return s;
}
