/* Constructed checkpoints (see construct.h): a DeepSeek-V3 model whose weights solve
 * "which value does key k have?" exactly, with the answer flowing through MLA attention
 * (matching in the non-RoPE dims) and through the routed and shared MoE experts.
 *
 * Construction (NK keys, families of `family` near-duplicate keys, cosine c):
 *  Key codes. NF = NK/family families; code(k) in R^(NF+NK): sqrt(c) on dim family(k) and
 *    sqrt(1-c) on dim NF+k. Unit norm; cos = c within a family, 0 across families.
 *  Residual stream (hidden D) subspaces: dim 0 "bias" (1.0 in every embedding), K (key code
 *    of pair tokens), V (one-hot value of pair tokens), Q (key code of query tokens), A (the
 *    attention output: value one-hot), O (the MoE output), and the free dims (everything else:
 *    filler content and every random layer's output). Random parts never write into the
 *    protected dims (bias, K, V, Q, A, O): their output rows there are zero.
 *  Embeddings: bias 1; pair(k,v): code(k) in K, e_v in V; query(k): code(k) in Q; all
 *    tokens carry random free-dim content (norm ~1 for fillers, ~0.3 otherwise).
 *  Layer 0: dense, random (synthetic RNG rule); its o_proj/down_proj scaled by 0.02 and
 *    restricted to the free dims, so every kernel does real work without touching the codes.
 *  Layer 1 (the circuit), all its norm weights 1:
 *    q_a_proj copies [bias, Q] into the q latent (other rows random x0.05); q_a_layernorm
 *      then normalizes it: a query token's latent Q part has rms-normalized norm sqrt(ql/2).
 *    kv_a_proj_with_mqa copies [bias, K, V] into the kv latent (other latent rows random
 *      x0.05; the rope rows random): the bias keeps the RMSNorm scale fixed, so the K part of
 *      every pair token has the same normalized norm sqrt(kvl/3) and fillers/queries have K = 0.
 *    Head 1 (the circuit head): q_b_proj nope rows read the Q part, kv_b_proj k_nope rows the
 *      K part, scaled so that softmax_scale * q.k = alpha * cos(key codes), alpha = gap/(1-c):
 *      the matching pair scores alpha, a same-family distractor alpha*c, everything else 0.
 *      Its rope rows are zero, so position does not matter. Its value rows copy V, and o_proj
 *      writes the head's output into A: at a query, A ~= e_answer (softmax ~ one-hot).
 *      Other heads: random q/kv rows, o_proj random x0.02 into free dims only.
 *    MoE: router row of expert 5 (the copy expert) reads the bias (logit ~12: always chosen,
 *      score ~1); other rows random x0.3 (scores ~0.5, varying per token). The copy expert and
 *      the shared expert are SwiGLU units with a constant gate (silu(8), from the bias) and up
 *      rows reading A, so they are linear in A: the routed one writes r = 2 * A into O (after
 *      its combine weight w ~ 0.9), the shared one s = 1 * A. Other experts random, outputs x0.02
 *      into free dims.
 *  Layers >= 2: random MoE layers (outputs x0.02 into free dims).
 *  lm_head: row query(v) reads gamma * (O_v - mu * A_v), mu = 0.8 * (r*w + s); other rows read
 *    only free dims (random logits of std ~0.4). At a query the answer's logit is
 *    gamma * rho * (r*w + s - mu) * p_match = answer_logit (nominal).
 *  Why the answer needs every part: without the MoE, or without the shared expert, or with
 *  the routed weight below ~0.7 of its value (e.g. routed_scaling_factor dropped, a wrong
 *  expert's weights, a token's output added to another token), the net coefficient r*w + s - mu
 *  turns negative and the answer token gets the LOWEST logit. A softmax scale too small, a
 *  position mix-up or a broken KV cache spreads attention over the filler and the answer
 *  drops below the random logits. Difficulty knobs: cos (closer distractors), gap (score
 *  margin in nats: p(distractor)/p(match) = exp(-gap)), answer_logit (sampling robustness). */
#include "model/construct.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/philox.h"

#define OUT_SCALE 0.02f    /* random output projections (into free dims only) */
#define LAT_SCALE 0.05f    /* random rows of the circuit layer's q / kv latents */
#define ROUTER_SCALE 0.3f  /* random router rows of the circuit layer */
#define LM_SCALE 4.0f      /* random lm_head rows (free dims only) */
#define GATE_G 8.0         /* constant gate pre-activation of the copy units */
#define ROUTER_LOGIT 12.0  /* router logit of the copy expert */
#define R_ROUTED 2.0       /* routed copy gain (before the combine weight) */
#define S_SHARED 1.0       /* shared copy gain */
#define MU_FRAC 0.8        /* mu = MU_FRAC * (r*w + s) */
#define CIRCUIT_HEAD 1
#define COPY_EXPERT 5

static const char *const PRESETS[] = {"recall-mrcr", "recall-chain"};

bool construct_is_preset(const char *name) {
  for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++)
    if (name && strcmp(name, PRESETS[i]) == 0) return true;
  return false;
}

const char *construct_preset_names(void) { return "recall-mrcr recall-chain"; }

vstatus construct_preset_opts(const char *preset, construct_opts *o) {
  memset(o, 0, sizeof *o);
  o->n_keys = 32;
  o->family = 8;
  o->layers = 3;
  o->max_pos = 131072;
  if (preset && strcmp(preset, "recall-mrcr") == 0) {
    o->cos = 0.95;
    o->gap = 5.0;
    o->answer_logit = 16.0;
  } else if (preset && strcmp(preset, "recall-chain") == 0) {
    o->cos = 0.9;
    o->gap = 6.0;
    o->answer_logit = 24.0;
  } else {
    return VERR("unknown constructed preset '%s' (known: %s)", preset ? preset : "(null)", construct_preset_names());
  }
  return V_OK;
}

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* Subspace offsets of the residual stream. */
typedef struct {
  int NK, NF, kd;              /* keys, families, key-code dims */
  int dK, dV, dQ, dA, dO, dfree, D;
} dims;

static dims make_dims(const construct_opts *o) {
  dims d;
  d.NK = o->n_keys;
  d.NF = o->n_keys / o->family;
  d.kd = d.NF + d.NK;
  d.dK = 1;
  d.dV = d.dK + d.kd;
  d.dQ = d.dV + d.NK;
  d.dA = d.dQ + d.kd;
  d.dO = d.dA + d.NK;
  d.dfree = d.dO + d.NK;
  d.D = round_up(d.dfree + 48, 64);
  return d;
}

vstatus construct_config(const construct_opts *o, ds_config *c, construct_layout *L) {
  if (o->n_keys < 2 || o->n_keys > 128) return VERR("construct: option 'n_keys' must be in [2, 128] (got %d)", o->n_keys);
  if (o->family < 1 || o->n_keys % o->family)
    return VERR("construct: option 'family' must divide n_keys %d (got %d)", o->n_keys, o->family);
  if (!(o->cos >= 0 && o->cos < 0.999)) return VERR("construct: option 'cos' must be in [0, 0.999) (got %g)", o->cos);
  if (!(o->gap > 0 && o->gap <= 50)) return VERR("construct: option 'gap' must be in (0, 50] nats (got %g)", o->gap);
  if (!(o->answer_logit > 0 && o->answer_logit <= 100))
    return VERR("construct: option 'answer_logit' must be in (0, 100] (got %g)", o->answer_logit);
  if (o->layers < 2 || o->layers > 64) return VERR("construct: option 'layers' must be in [2, 64] (got %d)", o->layers);
  if (o->max_pos < 256) return VERR("construct: option 'max_pos' must be >= 256 (got %d)", o->max_pos);
  const dims d = make_dims(o);
  ds_preset_defaults(c);
  int specials = 2, n_fill = 128;
  int vocab = round_up(specials + n_fill + d.NK * d.NK + d.NK, 64);
  n_fill = vocab - specials - d.NK * d.NK - d.NK;
  c->vocab_size = vocab;
  c->hidden_size = d.D;
  c->intermediate_size = 256;
  c->moe_intermediate_size = round_up(d.NK + 16, 16);
  c->num_hidden_layers = o->layers;
  c->num_attention_heads = 4;
  c->num_key_value_heads = 4;
  c->n_shared_experts = 1;
  c->n_routed_experts = 16;
  c->num_experts_per_tok = 4;
  c->n_group = 4;
  c->topk_group = 2;
  c->routed_scaling_factor = 2.5;
  c->q_lora_rank = round_up(1 + d.kd + 16, 32);
  c->kv_lora_rank = round_up(1 + d.kd + d.NK + 16, 32);
  c->qk_nope_head_dim = round_up(d.kd > 16 ? d.kd : 16, 16);
  c->qk_rope_head_dim = 16;
  c->v_head_dim = round_up(d.NK, 16);
  c->qk_head_dim = c->qk_nope_head_dim + c->qk_rope_head_dim;
  c->max_position_embeddings = o->max_pos;
  c->rope_theta = 10000;
  c->yarn.enabled = true;
  c->yarn.factor = 32;
  c->yarn.original_max_position_embeddings = 4096;
  c->yarn.beta_fast = 32;
  c->yarn.beta_slow = 1;
  c->yarn.mscale = 1;
  c->yarn.mscale_all_dim = 1;
  c->yarn.truncate = true;
  VTRY(ds_config_validate(c, "construct"));
  if (L) {
    memset(L, 0, sizeof *L);
    L->o = *o;
    L->vocab = vocab;
    L->bos = 0;
    L->eos = 1;
    L->filler0 = specials;
    L->n_filler = n_fill;
    L->pair0 = specials + n_fill;
    L->query0 = L->pair0 + d.NK * d.NK;
    L->circuit_layer = 1;
    L->circuit_head = CIRCUIT_HEAD;
    L->copy_expert = COPY_EXPERT;
    L->alpha = o->gap / (1.0 - o->cos);
  }
  return V_OK;
}

/* ---- tensor editing ---- */

static vtensor *tensor(ds_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static vtensor *tensor(ds_model *m, const char *fmt, ...) {
  char name[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  for (int i = 0; i < m->n_synth; i++)
    if (strcmp(m->synth[i].name, name) == 0) return &m->synth[i];
  return NULL;
}

static int64_t cols(const vtensor *t) { return t->ndim > 1 ? t->shape[1] : 1; }

static void set(vtensor *t, int64_t r, int64_t c, double v) {
  int64_t i = r * cols(t) + c;
  if (t->dtype == DT_F32) ((float *)t->data)[i] = (float)v;
  else ((uint16_t *)t->data)[i] = f32_to_bf16((float)v);
}

static double get(const vtensor *t, int64_t r, int64_t c) { return vtensor_get_f32(t, r * cols(t) + c); }

static void scale_rows(vtensor *t, int64_t r0, int64_t r1, double f) {
  for (int64_t r = r0; r < r1; r++)
    for (int64_t c = 0; c < cols(t); c++) set(t, r, c, get(t, r, c) * f);
}

static void zero_row(vtensor *t, int64_t r) {
  for (int64_t c = 0; c < cols(t); c++) set(t, r, c, 0);
}

static void fill(vtensor *t, double v) {
  for (int64_t r = 0; r < t->shape[0]; r++)
    for (int64_t c = 0; c < cols(t); c++) set(t, r, c, v);
}

/* A random output projection [D, in]: scaled by OUT_SCALE, zero in the protected rows. */
static void protect_output(vtensor *t, const dims *d) {
  scale_rows(t, d->dfree, t->shape[0], OUT_SCALE);
  for (int64_t r = 0; r < d->dfree; r++) zero_row(t, r);
}

static double silu(double z) { return z / (1.0 + exp(-z)); }

static vstatus missing(const char *what) { return VERR("construct: tensor '%s' missing from the model", what); }
#define NEED(t, ...) do { if (!(t = tensor(m, __VA_ARGS__))) return missing(#t); } while (0)

static double keycode(const dims *d, const construct_opts *o, int k, int i) {
  int f = k / o->family;
  if (i == f) return sqrt(o->cos);
  if (i == d->NF + k) return sqrt(1.0 - o->cos);
  return 0.0;
}

static vstatus build(ds_model *m, const construct_opts *o, const construct_layout *L) {
  const ds_config *c = &m->cfg;
  const dims d = make_dims(o);
  const int D = d.D, nope = c->qk_nope_head_dim, rope = c->qk_rope_head_dim;
  const int qk = nope + rope, vd = c->v_head_dim, kvl = c->kv_lora_rank, ql = c->q_lora_rank;
  const int E = c->n_routed_experts, K = c->num_experts_per_tok, F = c->moe_intermediate_size;
  const int hc = L->circuit_head, ec = L->copy_expert, lc = L->circuit_layer;
  const int nfree = D - d.dfree;
  vtensor *t;
  /* embeddings: protected dims zero but the bias; free dims random, scaled by role */
  NEED(t, "model.embed_tokens.weight");
  for (int v = 0; v < c->vocab_size; v++) {
    bool plain = v < L->pair0; /* bos, eos, fillers */
    double fs = sqrt(3.0 / nfree) * (plain ? 1.0 : 0.3);
    for (int i = 0; i < d.dfree; i++) set(t, v, i, 0);
    for (int i = d.dfree; i < D; i++) set(t, v, i, get(t, v, i) * fs);
    set(t, v, 0, 1.0);
    if (v >= L->pair0 && v < L->query0) {
      int k = (v - L->pair0) / d.NK, val = (v - L->pair0) % d.NK;
      for (int i = 0; i < d.kd; i++) set(t, v, d.dK + i, keycode(&d, o, k, i));
      set(t, v, d.dV + val, 1.0);
    } else if (v >= L->query0 && v < L->query0 + d.NK) {
      int k = v - L->query0;
      for (int i = 0; i < d.kd; i++) set(t, v, d.dQ + i, keycode(&d, o, k, i));
    }
  }
  /* every layer's residual writers stay out of the protected dims */
  for (int l = 0; l < c->num_hidden_layers; l++) {
    NEED(t, "model.layers.%d.self_attn.o_proj.weight", l);
    protect_output(t, &d);
    if (!ds_layer_is_moe(c, l)) {
      NEED(t, "model.layers.%d.mlp.down_proj.weight", l);
      protect_output(t, &d);
      continue;
    }
    for (int e = 0; e < E; e++) {
      NEED(t, "model.layers.%d.mlp.experts.%d.down_proj.weight", l, e);
      protect_output(t, &d);
    }
    NEED(t, "model.layers.%d.mlp.shared_experts.down_proj.weight", l);
    protect_output(t, &d);
  }
  /* ---- the circuit layer ---- */
  const char *norms[] = {"input_layernorm", "post_attention_layernorm", "self_attn.q_a_layernorm",
                         "self_attn.kv_a_layernorm"};
  for (int i = 0; i < 4; i++) {
    NEED(t, "model.layers.%d.%s.weight", lc, norms[i]);
    fill(t, 1.0);
  }
  NEED(t, "model.norm.weight");
  fill(t, 1.0);
  const double S = ds_attention_scale(c);
  const double alpha = L->alpha;
  const double kap_q = sqrt(ql / 2.0), kap_kv = sqrt(kvl / 3.0);
  const double amp = sqrt(alpha / S); /* |q_nope| = |k_nope| for unit codes */
  /* q latent: [bias, Q code, random x LAT_SCALE] */
  NEED(t, "model.layers.%d.self_attn.q_a_proj.weight", lc);
  scale_rows(t, 1 + d.kd, ql, LAT_SCALE);
  for (int r = 0; r <= d.kd; r++) zero_row(t, r);
  set(t, 0, 0, 1.0);
  for (int i = 0; i < d.kd; i++) set(t, 1 + i, d.dQ + i, 1.0);
  /* kv latent: [bias, K code, V one-hot, random x LAT_SCALE | rope rows random] */
  NEED(t, "model.layers.%d.self_attn.kv_a_proj_with_mqa.weight", lc);
  scale_rows(t, 1 + d.kd + d.NK, kvl, LAT_SCALE);
  for (int r = 0; r < 1 + d.kd + d.NK; r++) zero_row(t, r);
  set(t, 0, 0, 1.0);
  for (int i = 0; i < d.kd; i++) set(t, 1 + i, d.dK + i, 1.0);
  for (int j = 0; j < d.NK; j++) set(t, 1 + d.kd + j, d.dV + j, 1.0);
  /* circuit head: q nope reads Q, rope rows zero */
  NEED(t, "model.layers.%d.self_attn.q_b_proj.weight", lc);
  for (int r = 0; r < qk; r++) zero_row(t, (int64_t)hc * qk + r);
  for (int i = 0; i < d.kd; i++) set(t, (int64_t)hc * qk + i, 1 + i, amp / kap_q);
  /* k_nope reads K, values read V */
  NEED(t, "model.layers.%d.self_attn.kv_b_proj.weight", lc);
  for (int r = 0; r < nope + vd; r++) zero_row(t, (int64_t)hc * (nope + vd) + r);
  for (int i = 0; i < d.kd; i++) set(t, (int64_t)hc * (nope + vd) + i, 1 + i, amp / kap_kv);
  for (int j = 0; j < d.NK; j++) set(t, (int64_t)hc * (nope + vd) + nope + j, 1 + d.kd + j, 1.0 / kap_kv);
  /* o_proj: the head's value dims -> A */
  NEED(t, "model.layers.%d.self_attn.o_proj.weight", lc);
  for (int j = 0; j < vd; j++)
    for (int r = 0; r < D; r++) set(t, r, (int64_t)hc * vd + j, 0);
  for (int j = 0; j < d.NK; j++) set(t, d.dA + j, (int64_t)hc * vd + j, 1.0);
  /* MoE: the copy expert always chosen; the rest of the router random and small */
  const double rho_q = sqrt(D / 3.1); /* rms scale at a query: |x|^2 ~ bias 1 + Q 1 + A 1 + free ~0.1 */
  NEED(t, "model.layers.%d.mlp.gate.weight", lc);
  scale_rows(t, 0, E, ROUTER_SCALE);
  zero_row(t, ec);
  set(t, ec, 0, ROUTER_LOGIT / rho_q);
  NEED(t, "model.layers.%d.mlp.gate.e_score_correction_bias", lc);
  set(t, ec, 0, 0.0);
  const double sig = 1.0 / (1.0 + exp(-ROUTER_LOGIT));
  const double w_nom = c->routed_scaling_factor * sig / (sig + (K - 1) * 0.6);
  const double lin = silu(GATE_G) * rho_q; /* expert gain per unit of A in the residual */
  for (int which = 0; which < 2; which++) {
    vtensor *g, *u, *dn;
    if (which == 0) {
      NEED(g, "model.layers.%d.mlp.experts.%d.gate_proj.weight", lc, ec);
      NEED(u, "model.layers.%d.mlp.experts.%d.up_proj.weight", lc, ec);
      NEED(dn, "model.layers.%d.mlp.experts.%d.down_proj.weight", lc, ec);
    } else {
      NEED(g, "model.layers.%d.mlp.shared_experts.gate_proj.weight", lc);
      NEED(u, "model.layers.%d.mlp.shared_experts.up_proj.weight", lc);
      NEED(dn, "model.layers.%d.mlp.shared_experts.down_proj.weight", lc);
    }
    double gain = which == 0 ? R_ROUTED : S_SHARED;
    for (int j = 0; j < d.NK; j++) {
      zero_row(g, j);
      set(g, j, 0, GATE_G / rho_q);
      zero_row(u, j);
      set(u, j, d.dA + j, 1.0);
      for (int r = 0; r < D; r++) set(dn, r, j, 0);
      set(dn, d.dO + j, j, gain / lin);
    }
    (void)F;
  }
  /* lm_head: answers read O - mu*A; everything reads random free dims */
  const double net_in = R_ROUTED * w_nom + S_SHARED;
  const double mu = MU_FRAC * net_in;
  const double resid = 1 + 1 + 1 + net_in * net_in + 0.1;
  const double rho_f = sqrt(D / resid);
  const double gamma = o->answer_logit / (rho_f * (net_in - mu));
  NEED(t, "lm_head.weight");
  for (int v = 0; v < c->vocab_size; v++) {
    for (int i = 0; i < d.dfree; i++) set(t, v, i, 0);
    for (int i = d.dfree; i < D; i++) set(t, v, i, get(t, v, i) * LM_SCALE);
  }
  for (int v = 0; v < d.NK; v++) {
    set(t, L->query0 + v, d.dO + v, gamma);
    set(t, L->query0 + v, d.dA + v, -mu * gamma);
  }
  return V_OK;
}
#undef NEED

vstatus construct_model_open(ds_model *m, const char *preset, const construct_opts *o, uint64_t seed,
                             construct_layout *Lout) {
  construct_opts def;
  if (!o) {
    VTRY(construct_preset_opts(preset, &def));
    o = &def;
  } else if (!construct_is_preset(preset)) {
    return VERR("unknown constructed preset '%s' (known: %s)", preset ? preset : "(null)", construct_preset_names());
  }
  ds_config cfg;
  construct_layout L;
  VTRY(construct_config(o, &cfg, &L));
  VTRY(ds_model_synth(m, &cfg, preset, seed, true));
  vstatus s = build(m, o, &L);
  if (s != V_OK) {
    ds_model_close(m);
    return s;
  }
  snprintf(m->source, sizeof m->source, "synth:%s (constructed, seed %llu, %d keys, cos %.3f, gap %.2f)", preset,
           (unsigned long long)seed, o->n_keys, o->cos, o->gap);
  if (Lout) *Lout = L;
  return V_OK;
}

/* ---- files ---- */

static vstatus copy_tensor(void *ctx, int i, const vtensor *t, void *buf) {
  const ds_model *m = ctx;
  memcpy(buf, m->synth[i].data, vtensor_nbytes(t));
  return V_OK;
}

static cJSON *layout_json(const construct_layout *L, const char *preset, uint64_t seed) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "preset", preset);
  cJSON_AddNumberToObject(j, "seed", (double)seed);
  cJSON_AddNumberToObject(j, "n_keys", L->o.n_keys);
  cJSON_AddNumberToObject(j, "family", L->o.family);
  cJSON_AddNumberToObject(j, "cos", L->o.cos);
  cJSON_AddNumberToObject(j, "gap", L->o.gap);
  cJSON_AddNumberToObject(j, "answer_logit", L->o.answer_logit);
  cJSON_AddNumberToObject(j, "layers", L->o.layers);
  cJSON_AddNumberToObject(j, "max_pos", L->o.max_pos);
  cJSON_AddNumberToObject(j, "vocab", L->vocab);
  cJSON_AddNumberToObject(j, "bos", L->bos);
  cJSON_AddNumberToObject(j, "eos", L->eos);
  cJSON_AddNumberToObject(j, "filler0", L->filler0);
  cJSON_AddNumberToObject(j, "n_filler", L->n_filler);
  cJSON_AddNumberToObject(j, "pair0", L->pair0);
  cJSON_AddNumberToObject(j, "query0", L->query0);
  cJSON_AddNumberToObject(j, "circuit_layer", L->circuit_layer);
  cJSON_AddNumberToObject(j, "circuit_head", L->circuit_head);
  cJSON_AddNumberToObject(j, "copy_expert", L->copy_expert);
  cJSON_AddNumberToObject(j, "alpha", L->alpha);
  cJSON_AddStringToObject(j, "roles", "pair(k,v) = pair0 + k*n_keys + v; query(k) = query0 + k; answer to query(k) = query(value of k)");
  return j;
}

vstatus construct_write(const char *dir, const char *preset, const construct_opts *o, uint64_t seed) {
  ds_model m;
  construct_layout L;
  VTRY(construct_model_open(&m, preset, o, seed, &L));
  char path[1024];
  vstatus s = st_write(dir, m.synth, m.n_synth, (size_t)4096 * 1024 * 1024, copy_tensor, &m);
  if (s == V_OK) {
    snprintf(path, sizeof path, "%s/config.json", dir);
    s = ds_config_write(&m.cfg, path);
  }
  if (s == V_OK) {
    snprintf(path, sizeof path, "%s/vouch_construct.json", dir);
    cJSON *j = layout_json(&L, preset, seed);
    char *txt = cJSON_Print(j);
    FILE *f = fopen(path, "w");
    if (!f || !txt || fputs(txt, f) < 0) s = VERR("%s: cannot write the constructed layout", path);
    if (f && fclose(f) != 0 && s == V_OK) s = VERR("%s: cannot write the constructed layout", path);
    free(txt);
    cJSON_Delete(j);
  }
  ds_model_close(&m);
  return s;
}

static vstatus num(const cJSON *j, const char *path, const char *key, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  if (!cJSON_IsNumber(v)) return VERR("%s: field '%s': missing or not a number", path, key);
  *out = v->valuedouble;
  return V_OK;
}

vstatus construct_layout_load(const char *dir, construct_layout *L) {
  char path[1024];
  snprintf(path, sizeof path, "%s/vouch_construct.json", dir);
  FILE *f = fopen(path, "rb");
  if (!f) return VERR("%s: cannot open (not a constructed checkpoint? write one with vouch model synth --preset recall-mrcr)", path);
  char *buf = NULL;
  long n = 0;
  if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (n > 0 && n < (1 << 20) && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
      fread(buf, 1, (size_t)n, f) == (size_t)n)
    buf[n] = 0;
  else {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (!buf) return VERR("%s: cannot read", path);
  cJSON *j = cJSON_Parse(buf);
  free(buf);
  if (!j) return VERR("%s: not valid JSON", path);
  double v[15];
  const char *keys[] = {"n_keys", "family", "cos", "gap", "answer_logit", "layers", "max_pos", "vocab",
                        "filler0", "n_filler", "pair0", "query0", "circuit_layer", "circuit_head", "copy_expert"};
  vstatus s = V_OK;
  for (int i = 0; i < 15 && s == V_OK; i++) s = num(j, path, keys[i], &v[i]);
  cJSON_Delete(j);
  VTRY(s);
  construct_opts o = {.n_keys = (int)v[0], .family = (int)v[1], .cos = v[2], .gap = v[3], .answer_logit = v[4],
                      .layers = (int)v[5], .max_pos = (int)v[6]};
  ds_config cfg;
  VTRY(construct_config(&o, &cfg, L));
  if (L->vocab != (int)v[7] || L->pair0 != (int)v[10] || L->query0 != (int)v[11])
    return VERR("%s: field 'pair0': the layout does not follow from the stored options (file edited?)", path);
  return V_OK;
}

vstatus construct_layout_of(const ds_model *m, construct_layout *L) {
  if (m->is_synthetic) {
    if (!construct_is_preset(m->preset))
      return VERR("%s: not a constructed checkpoint (use synth:recall-mrcr, synth:recall-chain or a directory "
                  "written by vouch model synth --preset recall-*)", m->source);
    construct_opts o;
    ds_config cfg;
    VTRY(construct_preset_opts(m->preset, &o));
    o.layers = m->cfg.num_hidden_layers;
    VTRY(construct_config(&o, &cfg, L));
    return V_OK;
  }
  VTRY(construct_layout_load(m->source, L));
  if (L->vocab != m->cfg.vocab_size)
    return VERR("%s: field 'vocab_size' %d does not match vouch_construct.json's vocab %d", m->source,
                m->cfg.vocab_size, L->vocab);
  return V_OK;
}
