/* The cpu-ref decode path (see cpu_ref.h). One forward() runs every new token of every
 * sequence of the step as rows of one batch: each linear layer reads its weights once per
 * step, MoE experts run on the rows routed to them, attention runs per (token, head)
 * over the slot's cache up to the token's own position. Every row's arithmetic is
 * independent of the batch it is in, so a prefill equals the same tokens decoded one by
 * one bit for bit. */
#include "reference/cpu/cpu_ref.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/comm.h"
#include "model/model.h"
#include "common/philox.h"
#include "model/shard.h"
#include "reference/cpu/cpu_dcp.h"
#include "reference/cpu/ops.h"

#define PATH_NAME "cpu-ref"

typedef struct {
  const ds_model *m;
  ds_config c;           /* copy of m->cfg */
  vpath_opts o;          /* options given at open */
  int L, D, H, nope, rope, qk, vd, kvl, ql; /* layers, hidden, heads, head dims, lora ranks */
  int E, K;              /* routed experts, experts per token */
  float *inv_freq;       /* [rope/2] RoPE inverse frequencies (float32, as HF) */
  float attn_factor;     /* RoPE cos/sin factor (YaRN mscale ratio) */
  float scale;           /* softmax scale qk_head_dim^-0.5 * mscale^2 */
  float **router_bias;   /* [L] -> [E] e_score_correction_bias as float32 (NULL for dense layers) */
  /* KV cache */
  float **kc;            /* [max_seq * L] -> [cap[slot], H, qk] post-RoPE keys */
  float **vc;            /* [max_seq * L] -> [cap[slot], H, vd] values */
  int *cap;              /* [max_seq] positions allocated per slot */
  int *len;              /* [max_seq] cached positions per slot */
  size_t kv_limit;       /* bytes the whole cache may use */
  /* step scratch, grown to the largest step seen */
  int rows;              /* tokens the row buffers hold */
  float *x, *xn, *qa, *q, *ckv, *lat, *kv, *att, *o2, *mo, *rl, *xe, *ye, *tmp;
  int32_t *eidx;         /* [rows, K] chosen experts */
  float *ewt;            /* [rows, K] their weights */
  int *elist;            /* [rows * K] token of each (expert, slot) pair, grouped by expert */
  float *elw;            /* [rows * K] weight of each pair */
  int *ecount;           /* [E] rows routed to each expert in this step */
  int *tok_slot, *tok_pos; /* [rows] cache slot and position of each new token */
  int *out_row;          /* [rows] rows that get logits */
  int nthr;              /* threads for attention */
  float *scores;         /* [nthr, max_ctx] attention scratch */
  int64_t step;          /* forward() calls so far */
  double experts_sum;    /* distinct routed experts summed over the MoE layers of the last forward() */
  int experts_layers;    /* MoE layers counted in experts_sum (0: unknown) */
  /* tensor parallelism (model/shard.h): NULL comm = unsharded */
  const vcomm *comm;     /* this rank's communicator (vpath_opts.comm) */
  int v0, v1, vblk;      /* lm_head rows cover vocab [v0, v1); gather blocks of vblk = ceil(V/N) rows */
  float *lg_local;       /* [rows, vblk] this rank's logit block */
  float *lg_all;         /* [N, rows, vblk] the gathered blocks */
  int lg_rows;           /* rows the two logit buffers hold */
  cpu_dcp *dcp;          /* decode context parallelism (cpu_dcp.h): the KV cache lives there; NULL: off */
  bool ep;               /* expert parallelism (model/shard.h): the MoE loop runs only the owned experts */
  int e0, e1;            /* routed experts this rank holds: [e0, e1) (all, [0, E), unless ep) */
  int ep_ran;            /* selected (expert, layer) pairs this rank computed in the last forward() */
} cpu_ref;

static size_t kv_bytes_per_pos(const cpu_ref *r) {
  return (size_t)r->L * (size_t)r->H * (size_t)(r->qk + r->vd) * sizeof(float);
}

static vstatus need(const vtensor *t, const char *what, int layer) {
  if (!t) return VERR(PATH_NAME ": layer %d: tensor '%s' is missing from the model", layer, what);
  if (!t->data)
    return VERR(PATH_NAME " needs host weights: tensor '%s' has no host data (open the model with "
                          "materialize=true)", t->name);
  if (t->dtype != DT_F32 && t->dtype != DT_BF16 && t->dtype != DT_F16)
    return VERR(PATH_NAME ": tensor '%s': dtype %s is not a float type", t->name, vdtype_name(t->dtype));
  return V_OK;
}

static vstatus check_weights(const ds_model *m) {
  const ds_config *c = &m->cfg;
  int e0, e1; /* an expert-parallel shard holds only these experts (model/shard.h) */
  ds_model_expert_range(m, &e0, &e1);
  VTRY(need(m->embed, "model.embed_tokens.weight", -1));
  VTRY(need(m->final_norm, "model.norm.weight", -1));
  VTRY(need(m->lm_head, "lm_head.weight", -1));
  for (int l = 0; l < c->num_hidden_layers; l++) {
    const ds_layer *y = &m->layers[l];
    VTRY(need(y->input_layernorm, "input_layernorm", l));
    if (c->q_lora_rank > 0) {
      VTRY(need(y->q_a_proj, "q_a_proj", l));
      VTRY(need(y->q_a_layernorm, "q_a_layernorm", l));
      VTRY(need(y->q_b_proj, "q_b_proj", l));
    } else {
      VTRY(need(y->q_proj, "q_proj", l));
    }
    VTRY(need(y->kv_a_proj_with_mqa, "kv_a_proj_with_mqa", l));
    VTRY(need(y->kv_a_layernorm, "kv_a_layernorm", l));
    VTRY(need(y->kv_b_proj, "kv_b_proj", l));
    VTRY(need(y->o_proj, "o_proj", l));
    VTRY(need(y->post_attention_layernorm, "post_attention_layernorm", l));
    if (y->is_moe) {
      VTRY(need(y->router, "mlp.gate.weight", l));
      VTRY(need(y->router_bias, "mlp.gate.e_score_correction_bias", l));
      if (!y->exp_gate || !y->exp_up || !y->exp_down)
        return VERR(PATH_NAME ": layer %d: expert weights are not bound", l);
      for (int e = e0; e < e1; e++) {
        VTRY(need(y->exp_gate[e], "experts.gate_proj", l));
        VTRY(need(y->exp_up[e], "experts.up_proj", l));
        VTRY(need(y->exp_down[e], "experts.down_proj", l));
      }
      if (c->n_shared_experts > 0) {
        VTRY(need(y->sh_gate, "shared_experts.gate_proj", l));
        VTRY(need(y->sh_up, "shared_experts.up_proj", l));
        VTRY(need(y->sh_down, "shared_experts.down_proj", l));
      }
    } else {
      VTRY(need(y->gate_proj, "mlp.gate_proj", l));
      VTRY(need(y->up_proj, "mlp.up_proj", l));
      VTRY(need(y->down_proj, "mlp.down_proj", l));
    }
  }
  return V_OK;
}

static void ref_close(void *state) {
  cpu_ref *r = state;
  if (!r) return;
  if (r->kc)
    for (int i = 0; i < r->o.max_seq * r->L; i++) free(r->kc[i]);
  if (r->vc)
    for (int i = 0; i < r->o.max_seq * r->L; i++) free(r->vc[i]);
  if (r->router_bias)
    for (int l = 0; l < r->L; l++) free(r->router_bias[l]);
  free(r->router_bias);
  free(r->kc);
  free(r->vc);
  free(r->cap);
  free(r->len);
  free(r->inv_freq);
  float *bufs[] = {r->x, r->xn, r->qa, r->q, r->ckv, r->lat, r->kv, r->att, r->o2, r->mo, r->rl, r->xe, r->ye,
                   r->tmp, r->ewt, r->elw, r->scores};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
  free(r->eidx);
  free(r->elist);
  free(r->ecount);
  free(r->tok_slot);
  free(r->tok_pos);
  free(r->out_row);
  free(r->lg_local);
  free(r->lg_all);
  cpu_dcp_close(r->dcp);
  free(r);
}

static vstatus ref_open(void **state, const ds_model *m, const vpath_opts *o) {
  *state = NULL;
  if (!m || !o) return VERR(PATH_NAME ": open: model and options are required");
  const ds_config *c = &m->cfg;
  if (o->max_seq < 1) return VERR(PATH_NAME ": option 'max_seq' must be >= 1 (got %d)", o->max_seq);
  if (o->max_ctx < 1) return VERR(PATH_NAME ": option 'max_ctx' must be >= 1 (got %d)", o->max_ctx);
  if (o->max_ctx > c->max_position_embeddings)
    return VERR(PATH_NAME ": option 'max_ctx' %d exceeds the model's max_position_embeddings %d", o->max_ctx,
                c->max_position_embeddings);
  if (o->n_threads < 0) return VERR(PATH_NAME ": option 'n_threads' must be >= 0 (got %d)", o->n_threads);
  if (c->qk_rope_head_dim % 2 != 0 || c->qk_rope_head_dim > 1024)
    return VERR(PATH_NAME ": config field 'qk_rope_head_dim' must be even and <= 1024 (got %d)", c->qk_rope_head_dim);
  if (c->attention_bias) return VERR(PATH_NAME ": config field 'attention_bias': projection biases are not supported");
  if (!m->layers) return VERR(PATH_NAME ": model has no layers bound");
  VTRY(check_weights(m));
  int v0, v1;
  ds_model_vocab_range(m, &v0, &v1);
  if (o->comm) {
    if (o->comm->size != ds_model_tp_size(m) || o->comm->rank != (m->tp_size > 1 ? m->tp_rank : 0))
      return VERR(PATH_NAME ": communicator rank %d of %d does not match the model's TP shard %d of %d", o->comm->rank,
                  o->comm->size, m->tp_rank, ds_model_tp_size(m));
  } else if (ds_model_tp_size(m) > 1) {
    return VERR(PATH_NAME ": %s is TP shard %d of %d but no communicator was given (open it with vpath_opts.tp)",
                m->source, m->tp_rank, m->tp_size);
  }
  bool any_moe = false;
  for (int l = 0; l < c->num_hidden_layers; l++) any_moe = any_moe || m->layers[l].is_moe;
  if (o->ep && !o->comm)
    return VERR(PATH_NAME ": expert parallelism splits the routed experts over the TP ranks: open it with "
                          "vpath_opts.tp (NAME:tpN:ep, --tp N --ep)");
  if (any_moe && o->ep != ds_model_is_ep(m))
    return VERR(PATH_NAME ": %s: vpath_opts.ep is %s but the model %s an expert-parallel shard", m->source,
                o->ep ? "set" : "not set", ds_model_is_ep(m) ? "is" : "is not");
  if (m->lm_head->shape[0] != v1 - v0)
    return VERR(PATH_NAME ": tensor '%s': %lld rows, expected the vocabulary block [%d, %d)", m->lm_head->name,
                (long long)m->lm_head->shape[0], v0, v1);

  cpu_ref *r = vcalloc(1, sizeof *r, PATH_NAME " state");
  if (!r) return V_ERR;
  r->m = m;
  r->c = *c;
  r->o = *o;
  r->L = c->num_hidden_layers;
  r->D = c->hidden_size;
  r->H = c->num_attention_heads;
  r->nope = c->qk_nope_head_dim;
  r->rope = c->qk_rope_head_dim;
  r->qk = c->qk_nope_head_dim + c->qk_rope_head_dim;
  r->vd = c->v_head_dim;
  r->kvl = c->kv_lora_rank;
  r->ql = c->q_lora_rank;
  r->E = c->n_routed_experts;
  r->K = c->num_experts_per_tok;
  r->comm = o->comm;
  r->v0 = v0;
  r->v1 = v1;
  r->vblk = o->comm ? ds_shard_vocab_block(c->vocab_size, o->comm->size) : c->vocab_size;
  r->ep = o->ep && any_moe;
  ds_model_expert_range(m, &r->e0, &r->e1);

  /* KV cache bound: the worst case (every slot full) must fit in half the host memory */
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  double phys = pages > 0 && psz > 0 ? (double)pages * (double)psz : 64e9;
  r->kv_limit = (size_t)(phys / 2);
  double worst = (double)kv_bytes_per_pos(r) * o->max_seq * o->max_ctx;
  if (worst > (double)r->kv_limit) {
    vstatus e = VERR(PATH_NAME ": KV cache for max_seq %d x max_ctx %d needs %.2f GiB (float32, %d layers x %d heads "
                     "x (%d+%d) dims), more than the %.2f GiB limit (half the host memory): lower max_seq or max_ctx",
                     o->max_seq, o->max_ctx, worst / 1073741824.0, r->L, r->H, r->qk, r->vd,
                     (double)r->kv_limit / 1073741824.0);
    ref_close(r);
    return e;
  }

  r->inv_freq = vcalloc((size_t)r->rope / 2 + 1, sizeof(float), PATH_NAME " inv_freq");
  r->kc = vcalloc((size_t)o->max_seq * r->L, sizeof(float *), PATH_NAME " key cache table");
  r->vc = vcalloc((size_t)o->max_seq * r->L, sizeof(float *), PATH_NAME " value cache table");
  r->cap = vcalloc((size_t)o->max_seq, sizeof(int), PATH_NAME " cache capacities");
  r->len = vcalloc((size_t)o->max_seq, sizeof(int), PATH_NAME " cache lengths");
  r->router_bias = vcalloc((size_t)r->L, sizeof(float *), PATH_NAME " router bias table");
  r->ecount = vcalloc((size_t)(r->E > 0 ? r->E : 1), sizeof(int), PATH_NAME " expert counts");
  r->nthr = o->n_threads > 0 ? o->n_threads : omp_get_max_threads();
  r->scores = vcalloc((size_t)r->nthr * (size_t)o->max_ctx, sizeof(float), PATH_NAME " attention scratch");
  if (!r->inv_freq || !r->kc || !r->vc || !r->cap || !r->len || !r->router_bias || !r->ecount || !r->scores) {
    ref_close(r);
    return V_ERR;
  }
  r->attn_factor = (float)ds_rope_inv_freq(c, r->inv_freq);
  r->scale = (float)ds_attention_scale(c);
  if (o->dcp) { /* the KV cache is cpu_dcp's: positions p % N == rank, all heads */
    const cpu_dcp_dims dd = {.max_seq = o->max_seq, .max_ctx = o->max_ctx, .layers = r->L, .local_heads = r->H,
                             .nope = r->nope, .rope = r->rope, .vd = r->vd, .scale = r->scale,
                             .n_threads = r->nthr, .kv_limit = r->kv_limit};
    vstatus e = cpu_dcp_open(&r->dcp, o->comm, &dd);
    if (e != V_OK) {
      ref_close(r);
      return e;
    }
  }
  for (int l = 0; l < r->L; l++) {
    const ds_layer *y = &m->layers[l];
    if (!y->is_moe) continue;
    if (vtensor_numel(y->router_bias) != r->E) {
      ref_close(r);
      return VERR(PATH_NAME ": tensor '%s': %lld elements, expected n_routed_experts = %d", y->router_bias->name,
                  (long long)vtensor_numel(y->router_bias), c->n_routed_experts);
    }
    r->router_bias[l] = vmalloc((size_t)r->E * sizeof(float), PATH_NAME " router bias");
    if (!r->router_bias[l]) {
      ref_close(r);
      return V_ERR;
    }
    vconvert_to_f32(r->router_bias[l], y->router_bias->data, y->router_bias->dtype, r->E);
  }
  if (r->ep && o->trace) {
    char d[200];
    snprintf(d, sizeof d, "ep: rank %d of %d owns routed experts [%d, %d) of %d (whole, width %d); shared expert "
             "split by %d", o->comm->rank, o->comm->size, r->e0, r->e1, r->E, c->moe_intermediate_size, o->comm->size);
    vtrace_note(o->trace, PATH_NAME, d);
  }
  *state = r;
  return V_OK;
}

/* Makes slot `s` hold at least `need_pos` positions in every layer. */
static vstatus ensure_cap(cpu_ref *r, int s, int need_pos) {
  if (r->cap[s] >= need_pos) return V_OK;
  int nc = r->cap[s] ? r->cap[s] : 64;
  while (nc < need_pos) nc *= 2;
  if (nc > r->o.max_ctx) nc = r->o.max_ctx;
  if (nc < need_pos) nc = need_pos;
  size_t used = 0;
  for (int i = 0; i < r->o.max_seq; i++) used += (size_t)r->cap[i] * kv_bytes_per_pos(r);
  size_t add = (size_t)(nc - r->cap[s]) * kv_bytes_per_pos(r);
  if (used + add > r->kv_limit)
    return VERR(PATH_NAME ": KV cache slot %d: growing to %d positions would use %.2f GiB, past the %.2f GiB limit", s,
                nc, (double)(used + add) / 1073741824.0, (double)r->kv_limit / 1073741824.0);
  for (int l = 0; l < r->L; l++) {
    float **kp = &r->kc[s * r->L + l], **vp = &r->vc[s * r->L + l];
    float *nk = realloc(*kp, (size_t)nc * r->H * r->qk * sizeof(float));
    if (!nk) return VERR(PATH_NAME ": out of memory growing the key cache of slot %d to %d positions", s, nc);
    *kp = nk;
    float *nv = realloc(*vp, (size_t)nc * r->H * r->vd * sizeof(float));
    if (!nv) return VERR(PATH_NAME ": out of memory growing the value cache of slot %d to %d positions", s, nc);
    *vp = nv;
  }
  r->cap[s] = nc;
  return V_OK;
}

static vstatus grow(void **p, size_t n, size_t esz, const char *what) {
  size_t bytes = n * esz;
  void *q = realloc(*p, bytes > 0 ? bytes : 1);
  if (!q) return VERR(PATH_NAME ": out of memory for %s (%zu bytes)", what, n * esz);
  *p = q;
  return V_OK;
}

/* Sizes the step buffers for T rows. */
static vstatus ensure_rows(cpu_ref *r, int T) {
  if (r->rows >= T) return V_OK;
  size_t t = (size_t)T;
  int inter = r->c.intermediate_size;
  int sh = r->c.moe_intermediate_size * (r->c.n_shared_experts > 0 ? r->c.n_shared_experts : 1);
  int mw = inter > sh ? inter : sh;
  if (r->c.moe_intermediate_size > mw) mw = r->c.moe_intermediate_size;
  VTRY(grow((void **)&r->x, t * r->D, sizeof(float), "hidden states"));
  VTRY(grow((void **)&r->xn, t * r->D, sizeof(float), "normed hidden states"));
  VTRY(grow((void **)&r->qa, t * (r->ql > 0 ? r->ql : 1), sizeof(float), "q latent"));
  VTRY(grow((void **)&r->q, t * r->H * r->qk, sizeof(float), "queries"));
  VTRY(grow((void **)&r->ckv, t * (r->kvl + r->rope), sizeof(float), "compressed kv"));
  VTRY(grow((void **)&r->lat, t * r->kvl, sizeof(float), "kv latent"));
  VTRY(grow((void **)&r->kv, t * r->H * (r->nope + r->vd), sizeof(float), "expanded kv"));
  VTRY(grow((void **)&r->att, t * r->H * r->vd, sizeof(float), "attention output"));
  VTRY(grow((void **)&r->o2, t * r->D, sizeof(float), "o_proj output"));
  VTRY(grow((void **)&r->mo, t * r->D, sizeof(float), "mlp output"));
  VTRY(grow((void **)&r->xe, t * r->D, sizeof(float), "expert inputs"));
  VTRY(grow((void **)&r->ye, t * r->D, sizeof(float), "expert outputs"));
  VTRY(grow((void **)&r->tmp, t * 2 * mw, sizeof(float), "mlp scratch"));
  VTRY(grow((void **)&r->rl, t * (r->E > 0 ? r->E : 1), sizeof(float), "router logits"));
  VTRY(grow((void **)&r->eidx, t * (r->K > 0 ? r->K : 1), sizeof(int32_t), "expert choices"));
  VTRY(grow((void **)&r->ewt, t * (r->K > 0 ? r->K : 1), sizeof(float), "expert weights"));
  VTRY(grow((void **)&r->elist, t * (r->K > 0 ? r->K : 1), sizeof(int), "expert token lists"));
  VTRY(grow((void **)&r->elw, t * (r->K > 0 ? r->K : 1), sizeof(float), "expert token weights"));
  VTRY(grow((void **)&r->tok_slot, t, sizeof(int), "token slots"));
  VTRY(grow((void **)&r->tok_pos, t, sizeof(int), "token positions"));
  VTRY(grow((void **)&r->out_row, t, sizeof(int), "logit rows"));
  r->rows = T;
  return V_OK;
}

/* Shape checks shared by supports() and forward(). V_UNSUPPORTED with the reason. */
/* Checks a step (common/path.h vstep_validate): V_ERR when malformed, V_UNSUPPORTED past capacity. */
static vstatus check_step(const cpu_ref *r, const vstep *s) {
  int n_moe = 0;
  for (int l = 0; l < r->L; l++) n_moe += r->m->layers[l].is_moe ? 1 : 0;
  const vstep_limits lim = {PATH_NAME, r->o.max_seq, r->o.max_ctx, r->len, r->c.vocab_size, n_moe, r->K, r->E};
  return vstep_validate(s, &lim);
}

static vstatus ref_supports(void *state, const vstep *s) { return check_step(state, s); }

/* invalid input to forward() is an error, whatever supports() would have said */
static vstatus validate(const cpu_ref *r, const vstep *s) {
  vstatus st = check_step(r, s);
  if (st == V_UNSUPPORTED) {
    char why[512];
    snprintf(why, sizeof why, "%s", verr_msg());
    return VERR("%s", why);
  }
  return st;
}

/* The cache-write ops of layer l for T rows whose compressed vectors r->ckv [T, kv_lora + rope]
 * (kv_a_proj_with_mqa's output) are given: kv_a_layernorm, kv_b_proj, RoPE on k_rot at the
 * row's position, then keys and values stored at (tok_slot, tok_pos). Shared by forward()
 * and fill_cache(). */
static void cache_write(cpu_ref *r, int l, int T) {
  const ds_layer *y = &r->m->layers[l];
  const int H = r->H, qk = r->qk, vd = r->vd, nope = r->nope, rope = r->rope, kvl = r->kvl;
  for (int t = 0; t < T; t++) memcpy(r->lat + (size_t)t * kvl, r->ckv + (size_t)t * (kvl + rope), sizeof(float) * kvl);
  cpu_rmsnorm(r->lat, r->lat, y->kv_a_layernorm, T, kvl, (float)r->c.rms_norm_eps);
  cpu_linear(r->kv, r->lat, y->kv_b_proj, T);
  for (int t = 0; t < T; t++) {
    int s = r->tok_slot[t], p = r->tok_pos[t];
    float *krot = r->ckv + (size_t)t * (kvl + rope) + kvl;
    cpu_rope(krot, rope, p, r->inv_freq, r->attn_factor, r->c.rope_interleave);
    if (r->dcp) continue; /* DCP: the owner rank stores after the exchange (cpu_dcp.c) */
    float *kd = r->kc[s * r->L + l] + (size_t)p * H * qk;
    float *vdst = r->vc[s * r->L + l] + (size_t)p * H * vd;
    for (int h = 0; h < H; h++) {
      const float *kvh = r->kv + ((size_t)t * H + h) * (nope + vd);
      memcpy(kd + (size_t)h * qk, kvh, sizeof(float) * nope);
      memcpy(kd + (size_t)h * qk + nope, krot, sizeof(float) * rope);
      memcpy(vdst + (size_t)h * vd, kvh + nope, sizeof(float) * vd);
    }
  }
}

/* Attention block for all T rows of layer l: xn -> r->o2 (after o_proj). Writes the cache. */
static vstatus attention(cpu_ref *r, int l, int T) {
  const ds_layer *y = &r->m->layers[l];
  const int H = r->H, qk = r->qk, vd = r->vd, nope = r->nope, rope = r->rope;
  const int il = r->c.rope_interleave;
  const float eps = (float)r->c.rms_norm_eps;
  if (r->ql > 0) {
    cpu_linear(r->qa, r->xn, y->q_a_proj, T);
    cpu_rmsnorm(r->qa, r->qa, y->q_a_layernorm, T, r->ql, eps);
    cpu_linear(r->q, r->qa, y->q_b_proj, T);
  } else {
    cpu_linear(r->q, r->xn, y->q_proj, T);
  }
  cpu_linear(r->ckv, r->xn, y->kv_a_proj_with_mqa, T);
  cache_write(r, l, T);
  for (int t = 0; t < T; t++)
    for (int h = 0; h < H; h++)
      cpu_rope(r->q + ((size_t)t * H + h) * qk + nope, rope, r->tok_pos[t], r->inv_freq, r->attn_factor, il);
  if (r->dcp) { /* DCP: exchange q/k/v, partial attention over this rank's positions, lse combine */
    VTRY(cpu_dcp_attention(r->dcp, l, T, r->tok_slot, r->tok_pos, r->q, r->kv, r->ckv + r->kvl, r->kvl + rope, r->att));
    cpu_linear(r->o2, r->att, y->o_proj, T);
    return V_OK;
  }
  /* each (token, head) attends to positions [0, pos] of its slot */
  int64_t work = 0;
  for (int t = 0; t < T; t++) work += (int64_t)(r->tok_pos[t] + 1) * H * (qk + vd);
  int nt = work >= 65536 ? r->nthr : 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
  for (int th = 0; th < T * H; th++) {
    int t = th / H, h = th % H;
    int s = r->tok_slot[t], p = r->tok_pos[t];
    float *sc = r->scores + (size_t)omp_get_thread_num() * r->o.max_ctx;
    cpu_attend(r->att + ((size_t)t * H + h) * vd, r->q + ((size_t)t * H + h) * qk, r->kc[s * r->L + l] + (size_t)h * qk,
               (int64_t)H * qk, r->vc[s * r->L + l] + (size_t)h * vd, (int64_t)H * vd, p + 1, qk, vd, r->scale, sc);
  }
  cpu_linear(r->o2, r->att, y->o_proj, T);
  return V_OK;
}

/* Router weights of forced experts idx[K] from one token's router logits: sigmoid scores,
 * normalized (+1e-20) if norm_topk_prob, times routed_scaling_factor; the same float
 * operations in the same order as cpu_router_topk, so forcing the router's own choice
 * gives identical weights. */
static void forced_weights(const cpu_ref *r, const float *logits, const int32_t *idx, float *wt) {
  float sum = 0.0f;
  for (int k = 0; k < r->K; k++) {
    wt[k] = 1.0f / (1.0f + expf(-logits[idx[k]]));
    sum += wt[k];
  }
  if (r->c.norm_topk_prob) {
    float den = sum + 1e-20f;
    for (int k = 0; k < r->K; k++) wt[k] /= den;
  }
  float rs = (float)r->c.routed_scaling_factor;
  for (int k = 0; k < r->K; k++) wt[k] *= rs;
}

/* MoE block for all T rows: xn -> r->mo. forced: NULL (the router chooses) or [T, K] expert ids
 * of this layer (vstep.forced_experts). */
static vstatus moe(cpu_ref *r, int l, int T, const int32_t *forced) {
  const ds_layer *y = &r->m->layers[l];
  const int D = r->D, E = r->E, K = r->K;
  cpu_linear(r->rl, r->xn, y->router, T);
  memset(r->ecount, 0, sizeof(int) * (size_t)E);
  for (int t = 0; t < T; t++) {
    if (forced) {
      memcpy(r->eidx + (size_t)t * K, forced + (size_t)t * K, sizeof(int32_t) * (size_t)K);
      forced_weights(r, r->rl + (size_t)t * E, r->eidx + (size_t)t * K, r->ewt + (size_t)t * K);
    } else {
      cpu_router_topk(r->rl + (size_t)t * E, r->router_bias[l], &r->c, r->eidx + (size_t)t * K,
                      r->ewt + (size_t)t * K);
    }
    for (int k = 0; k < K; k++) {
      int e = r->eidx[(size_t)t * K + k];
      if (e < 0 || e >= E) return VERR(PATH_NAME ": layer %d token %d: router chose invalid expert %d", l, t, e);
      r->ecount[e]++;
    }
  }
  for (int e = 0; e < E; e++) r->experts_sum += r->ecount[e] > 0;
  r->experts_layers++;
  /* group (token, weight) pairs by expert, tokens ascending within an expert */
  int off = 0;
  for (int e = 0; e < E; e++) {
    int c = r->ecount[e];
    r->ecount[e] = off;
    off += c;
  }
  for (int t = 0; t < T; t++)
    for (int k = 0; k < K; k++) {
      int e = r->eidx[(size_t)t * K + k];
      int at = r->ecount[e]++;
      r->elist[at] = t;
      r->elw[at] = r->ewt[(size_t)t * K + k];
    }
  /* ecount[e] is now the end of expert e's pairs; experts in ascending order as HF's loop.
   * Under EP only the experts this rank owns, [e0, e1): the all-reduce adds the others'. */
  memset(r->mo, 0, sizeof(float) * (size_t)T * D);
  int start = 0;
  for (int e = 0; e < E; e++) {
    int end = r->ecount[e], n = end - start;
    if (n > 0 && e >= r->e0 && e < r->e1) {
      r->ep_ran++;
      for (int j = 0; j < n; j++)
        memcpy(r->xe + (size_t)j * D, r->xn + (size_t)r->elist[start + j] * D, sizeof(float) * D);
      cpu_swiglu_mlp(r->ye, r->xe, y->exp_gate[e], y->exp_up[e], y->exp_down[e], n, r->tmp);
      for (int j = 0; j < n; j++) {
        float w = r->elw[start + j];
        float *dst = r->mo + (size_t)r->elist[start + j] * D;
        const float *src = r->ye + (size_t)j * D;
        for (int i = 0; i < D; i++) dst[i] += src[i] * w;
      }
    }
    start = end;
  }
  if (r->c.n_shared_experts > 0) {
    cpu_swiglu_mlp(r->ye, r->xn, y->sh_gate, y->sh_up, y->sh_down, T, r->tmp);
    for (size_t i = 0; i < (size_t)T * D; i++) r->mo[i] += r->ye[i];
  }
  return V_OK;
}

static void trace_step(cpu_ref *r, const vstep *s, int T, int R) {
  vtrace *tr = r->o.trace;
  if (!tr) return;
  char d[160];
  snprintf(d, sizeof d, "seqs=%d tokens=%d logit_rows=%d", s->n_seq, T, R);
  vtrace_ran(tr, PATH_NAME, "embed", "cpu", d);
  vtrace_ran(tr, PATH_NAME, "rmsnorm", "cpu", d);
  vtrace_ran(tr, PATH_NAME, "linear", "cpu", d);
  vtrace_ran(tr, PATH_NAME, "rope", "cpu", d);
  snprintf(d, sizeof d, "expanded kv cache f32, tokens=%d heads=%d", T, r->H);
  vtrace_ran(tr, PATH_NAME, "attention", "cpu", d);
  cpu_dcp_trace(r->dcp, tr, PATH_NAME, T);
  if (r->c.first_k_dense_replace > 0 || r->E == 0) vtrace_ran(tr, PATH_NAME, "mlp", "cpu", "dense swiglu");
  if (r->E > 0 && r->c.first_k_dense_replace < r->L) {
    snprintf(d, sizeof d, "E=%d top%d groups %d/%d", r->E, r->K, r->c.topk_group, r->c.n_group);
    vtrace_ran(tr, PATH_NAME, "router", "cpu", d);
    vtrace_ran(tr, PATH_NAME, "moe", "cpu", "grouped by expert");
    if (r->ep) {
      snprintf(d, sizeof d, "rank %d owns experts [%d, %d) of %d: ran %d selected (expert, layer) pairs", r->comm->rank,
               r->e0, r->e1, r->E, r->ep_ran);
      vtrace_ran(tr, PATH_NAME, "ep", "owned_experts", d);
    }
  }
  snprintf(d, sizeof d, "rows=%d vocab=%d", R, r->c.vocab_size);
  vtrace_ran(tr, PATH_NAME, "lm_head", "cpu", d);
  if (r->comm) {
    snprintf(d, sizeof d, "tp=%d rank %d: after o_proj and after mlp/moe, %d layers, f32 [%d, %d]", r->comm->size,
             r->comm->rank, r->L, T, r->D);
    vtrace_ran(tr, PATH_NAME, "allreduce", r->comm->name, d);
    snprintf(d, sizeof d, "tp=%d: logits, vocab blocks of %d rows", r->comm->size, r->vblk);
    vtrace_ran(tr, PATH_NAME, "allgather", r->comm->name, d);
  }
}

/* TP: this rank's logits for vocab [v0, v1) of the R normed rows in r->xn, gathered over the
 * ranks into logits [R, vocab] (blocks of vblk rows per rank, common/comm.h). */
static vstatus tp_logits(cpu_ref *r, int R, float *logits) {
  const int N = r->comm->size, nl = r->v1 - r->v0, bk = r->vblk;
  if (r->lg_rows < R) {
    VTRY(grow((void **)&r->lg_local, (size_t)R * bk, sizeof(float), "TP logit block"));
    VTRY(grow((void **)&r->lg_all, (size_t)N * R * bk, sizeof(float), "TP gathered logits"));
    r->lg_rows = R;
  }
  float *mine = nl == bk ? r->lg_local : r->lg_all; /* the last block may be short: compute, then pad */
  cpu_linear(mine, r->xn, r->m->lm_head, R);
  if (nl != bk)
    for (int i = 0; i < R; i++) {
      memcpy(r->lg_local + (size_t)i * bk, mine + (size_t)i * nl, sizeof(float) * (size_t)nl);
      memset(r->lg_local + (size_t)i * bk + nl, 0, sizeof(float) * (size_t)(bk - nl));
    }
  VTRY(r->comm->allgather(r->comm, r->lg_local, r->lg_all, (int64_t)R * bk, DT_F32, NULL));
  vcomm_place_vocab_blocks(logits, r->lg_all, R, r->c.vocab_size, N);
  return V_OK;
}

static vstatus ref_forward(void *state, const vstep *s, float *logits) {
  cpu_ref *r = state;
  if (!r) return VERR(PATH_NAME ": forward on a path that is not open");
  if (!logits) return VERR(PATH_NAME ": forward: logits buffer is NULL");
  VTRY(validate(r, s));
  const int T = vstep_total_tokens(s), D = r->D;
  const float eps = (float)r->c.rms_norm_eps;
  VTRY(ensure_rows(r, T));
  for (int i = 0; i < s->n_seq; i++)
    VTRY(r->dcp ? cpu_dcp_reserve(r->dcp, s->seq[i], s->start_pos[i] + s->n_tokens[i])
                : ensure_cap(r, s->seq[i], s->start_pos[i] + s->n_tokens[i]));
  cpu_ops_set_threads(r->o.n_threads);

  int R = 0;
  for (int i = 0, t = 0; i < s->n_seq; i++)
    for (int j = 0; j < s->n_tokens[i]; j++, t++) {
      r->tok_slot[t] = s->seq[i];
      r->tok_pos[t] = s->start_pos[i] + j;
      if (s->all_logits || j == s->n_tokens[i] - 1) r->out_row[R++] = t;
    }

  cpu_embed(r->x, s->tokens, r->m->embed, T);
  r->experts_sum = 0;
  r->experts_layers = 0;
  r->ep_ran = 0;
  int moe_j = 0; /* index of the next MoE layer (forced_experts is [n_moe_layers][T][K]) */
  for (int l = 0; l < r->L; l++) {
    const ds_layer *y = &r->m->layers[l];
    cpu_rmsnorm(r->xn, r->x, y->input_layernorm, T, D, eps);
    VTRY(attention(r, l, T));
    if (r->comm) VTRY(r->comm->allreduce_sum(r->comm, r->o2, (int64_t)T * D, DT_F32, NULL)); /* TP: sum heads */
    cpu_add_rmsnorm(r->xn, r->x, r->o2, y->post_attention_layernorm, T, D, eps);
    if (y->is_moe) {
      const int32_t *f = s->forced_experts ? s->forced_experts + (size_t)moe_j * T * r->K : NULL;
      VTRY(moe(r, l, T, f));
      moe_j++;
    } else {
      cpu_swiglu_mlp(r->mo, r->xn, y->gate_proj, y->up_proj, y->down_proj, T, r->tmp);
    }
    if (r->comm) VTRY(r->comm->allreduce_sum(r->comm, r->mo, (int64_t)T * D, DT_F32, NULL)); /* TP: sum slices */
    for (size_t i = 0; i < (size_t)T * D; i++) r->x[i] += r->mo[i];
  }
  /* the new tokens are cached in every layer now */
  for (int i = 0; i < s->n_seq; i++) r->len[s->seq[i]] = s->start_pos[i] + s->n_tokens[i];
  for (int k = 0; k < R; k++) memcpy(r->xe + (size_t)k * D, r->x + (size_t)r->out_row[k] * D, sizeof(float) * D);
  cpu_rmsnorm(r->xn, r->xe, r->m->final_norm, R, D, eps);
  if (r->comm) VTRY(tp_logits(r, R, logits));
  else cpu_linear(logits, r->xn, r->m->lm_head, R);
  trace_step(r, s, T, R);
  r->step++;
  return V_OK;
}

static vstatus ref_reset(void *state, int seq) {
  cpu_ref *r = state;
  if (!r) return VERR(PATH_NAME ": reset on a path that is not open");
  if (seq < 0 || seq >= r->o.max_seq)
    return VERR(PATH_NAME ": reset: slot %d out of range [0, %d)", seq, r->o.max_seq);
  r->len[seq] = 0;
  return V_OK;
}

static vstatus ref_fill_cache(void *state, int seq, int len, uint64_t seed) {
  cpu_ref *r = state;
  if (!r) return VERR(PATH_NAME ": fill_cache on a path that is not open");
  if (seq < 0 || seq >= r->o.max_seq)
    return VERR(PATH_NAME ": fill_cache: slot %d out of range [0, %d)", seq, r->o.max_seq);
  if (len < 0 || len > r->o.max_ctx)
    return VERR(PATH_NAME ": fill_cache: length %d out of range [0, %d] (max_ctx)", len, r->o.max_ctx);
  if (len > 0) VTRY(r->dcp ? cpu_dcp_reserve(r->dcp, seq, len) : ensure_cap(r, seq, len));
  /* the shared rule (common/path.h): the compressed vector of each position is synthetic,
   * then the normal cache-write ops run on it, in chunks of positions */
  const int w = r->kvl + r->rope, chunk = len < 256 ? (len > 0 ? len : 1) : 256;
  VTRY(ensure_rows(r, chunk));
  cpu_ops_set_threads(r->o.n_threads);
  for (int p0 = 0; p0 < len; p0 += chunk) {
    const int c = len - p0 < chunk ? len - p0 : chunk;
    for (int t = 0; t < c; t++) {
      r->tok_slot[t] = seq;
      r->tok_pos[t] = p0 + t;
    }
    for (int l = 0; l < r->L; l++) {
      char name[48];
      snprintf(name, sizeof name, "kvfill.L%d", l);
      const uint64_t key = philox_key(seed, name);
      for (int64_t i = 0; i < (int64_t)c * w; i++)
        r->ckv[i] = bf16_to_f32(f32_to_bf16(philox_symmetric(key, (uint64_t)p0 * (uint64_t)w + (uint64_t)i)));
      cache_write(r, l, c);
      if (r->dcp) /* DCP: exchange k/v over the ranks, the owners store */
        VTRY(cpu_dcp_fill(r->dcp, l, c, r->tok_slot, r->tok_pos, r->kv, r->ckv + r->kvl, w));
    }
  }
  if (r->o.trace) {
    char d[160];
    snprintf(d, sizeof d, "latent philox -> kv_a_layernorm -> kv_b_proj -> rope -> store, slot %d len %d", seq, len);
    vtrace_ran(r->o.trace, PATH_NAME, "fill_cache", "cpu", d);
  }
  r->len[seq] = len;
  return V_OK;
}

/* Distinct routed experts of the last forward(), mean over MoE layers (vpath_ops.last_experts). */
static double ref_last_experts(void *state) {
  const cpu_ref *r = state;
  return r && r->experts_layers > 0 ? r->experts_sum / r->experts_layers : -1.0;
}

/* cpu-ref runs one variant of each op whatever the step's shape: its choices are what trace_step records
 * of any step (batch 1, one token), recorded into out by trace_step itself (no second list). */
static vstatus ref_selectable(void *state, const vpath_envelope *env, vtrace *out) {
  cpu_ref *r = state;
  if (!r || !env || !out) return VERR(PATH_NAME ": selectable: NULL state, envelope or trace");
  const int seq = 0, one = 1, pos = 0;
  const int32_t tok = 0;
  const vstep s = {.n_seq = 1, .seq = &seq, .n_tokens = &one, .start_pos = &pos, .tokens = &tok};
  vtrace *keep = r->o.trace;
  r->o.trace = out;
  trace_step(r, &s, 1, 1);
  r->o.trace = keep;
  return V_OK;
}

const vpath_ops cpu_ref_ops = {
    .name = PATH_NAME,
    .desc = "CPU reference: plain C, float32, HF DeepseekV3 semantics, expanded per-head KV cache",
    .open = ref_open,
    .supports = ref_supports,
    .forward = ref_forward,
    .reset = ref_reset,
    .fill_cache = ref_fill_cache,
    .close = ref_close,
    .last_experts = ref_last_experts,
    /* host weights; simulated TP ranks (threads), with dcp (reference/cpu/cpu_dcp.c) and ep */
    .caps = {.host_weights = true, .tp = VPATH_TP_THREADS, .dcp = true, .ep = true},
    .selectable = ref_selectable,
};
