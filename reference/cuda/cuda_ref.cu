/* The cuda-ref decode path: HF transformers' DeepseekV3 forward on one GPU, the way an
 * unoptimized engine runs it (see cuda_ref.h). Per step:
 *   embed -> for each layer: h = x + o_proj(MLA(rmsnorm(x))); x = h + mlp(rmsnorm(h))
 *   -> final rmsnorm -> lm_head (fp32 logits, copied to the host).
 * Residual stream: float32 (x, [T, D]); every other activation is stored in bf16
 * between ops; all reductions and GEMMs accumulate in fp32. MoE: the router's top-k is
 * copied to the host, tokens are bucketed per expert there, and each expert runs as
 * gather -> 3 GEMMs -> weighted scatter-add into the residual stream. */
#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_ref.h"
#include "reference/cuda/cuda_ref_kernels.h"
extern "C" {
#include "common/comm.h"
#include "model/mem_estimate.h"
#include "model/shard.h"
}

#define PATH_NAME "cuda-ref"

/* Device weights and cache of one decoder layer (device pointers; bf16 unless noted). */
typedef struct {
  const uint16_t *in_norm;                  /* [D] */
  const uint16_t *q_a, *q_a_norm, *q_b;     /* [ql, D], [ql], [H*dk, ql]; NULL without q LoRA */
  const uint16_t *q_proj;                   /* [H*dk, D]; only without q LoRA */
  const uint16_t *kv_a;                     /* [kl + r, D] */
  const uint16_t *kv_a_norm;                /* [kl] */
  const uint16_t *kv_b;                     /* [H*(n+v), kl] */
  const uint16_t *o_proj;                   /* [D, H*v] */
  const uint16_t *post_norm;                /* [D] */
  bool is_moe;
  const uint16_t *gate, *up, *down;         /* dense: [I, D], [I, D], [D, I] */
  const uint16_t *router;                   /* [E, D] */
  const float *router_bias;                 /* [E] float32; NULL when the model has none */
  const uint16_t **exp_gate, **exp_up;      /* host arrays [E] of device pointers to [F, D] */
  const uint16_t **exp_down;                /* host array [E] of device pointers to [D, F] */
  const uint16_t *sh_gate, *sh_up;          /* [S, D], S = F * n_shared; NULL without shared experts */
  const uint16_t *sh_down;                  /* [D, S] */
  uint16_t *kc;                             /* K cache [max_seq, max_ctx, H, n+r] */
  uint16_t *vc;                             /* V cache [max_seq, max_ctx, H, v] */
} dlayer;

/* One distinct weight to place in the device arena (open only). */
typedef struct {
  const vtensor *t;  /* host tensor (data may be NULL for a lazy synthetic model) */
  int storage;       /* index in m->synth / m->st.tensors, -1 when unknown */
  vdtype dt;         /* device dtype: DT_BF16, or DT_F32 for the router bias */
  size_t off;        /* byte offset in the arena */
  size_t bytes;      /* numel * sizeof(dt) */
} wentry;

/* A device-pointer field to point at an entry once the arena exists (open only). */
typedef struct {
  const uint16_t **dst16; /* bf16 field, or NULL */
  const float **dst32;    /* f32 field, or NULL */
  int entry;              /* index into the entry list */
} wbind;

typedef struct {
  const ds_model *m;
  ds_config c;
  vpath_opts opt;            /* options the path was opened with */
  vtrace *trace;
  int64_t steps;             /* forward() calls so far */
  char info[320];            /* device name, memory use */
  /* dimensions */
  int D, H, nope, rope, v, dk, ql, kl, E, K, F, Fs, I, Imax, V; /* model sizes; Fs = shared-expert width */
  float eps, attn_scale, attn_factor;
  /* CUDA */
  cudaStream_t stream;
  cublasHandle_t blas;
  cudaEvent_t ev_start, ev_end; /* recorded around the device work of each forward() */
  float last_ms;             /* device time of the last forward() (ms); NaN before the first */
  /* step being run */
  const int32_t *forced;     /* vstep.forced_experts of the current step, or NULL */
  int moe_j;                 /* index of the MoE layer being run (rows of `forced`) */
  int step_T;                /* tokens of the current step */
  double experts_sum;        /* distinct routed experts summed over the MoE layers of the last forward() */
  int experts_layers;        /* MoE layers counted in experts_sum (0: unknown) */
  /* weights */
  void *warena;              /* one allocation holding every weight */
  size_t wbytes;
  const uint16_t *embed;     /* [V, D] */
  const uint16_t *final_norm;/* [D] */
  const uint16_t *lm_head;   /* [V, D] (the embed buffer when tied) */
  dlayer *L;                 /* [num_hidden_layers] */
  float *inv_freq;           /* device [r/2] */
  /* KV cache */
  void *kvarena;
  size_t kvbytes;
  int *len;                  /* host [max_seq] cached positions per slot */
  /* workspace: capacity `cap` token rows (device) */
  int cap;
  void *ws;
  float *x;                  /* [cap, D] residual stream, float32 */
  uint16_t *xn;              /* [cap, D] normed activations */
  uint16_t *qa, *qan;        /* [cap, ql] */
  uint16_t *q;               /* [cap, H*dk] */
  uint16_t *ckv;             /* [cap, kl + r] */
  uint16_t *latn;            /* [cap, kl] */
  uint16_t *kv;              /* [cap, H*(n+v)] */
  uint16_t *attn;            /* [cap, H*v] */
  uint16_t *o;               /* [cap, D] */
  uint16_t *g, *u, *a;       /* [cap, Imax] */
  uint16_t *xg, *y;          /* [cap, D] gathered rows, expert outputs */
  int32_t *idx;              /* [cap, K] router choice */
  float *wt;                 /* [cap, K] router weights */
  int32_t *perm_tok;         /* [cap * K] token rows bucketed by expert */
  float *perm_w;             /* [cap * K] their weights */
  int32_t *tok, *slot, *pos; /* [cap] per token row */
  int32_t *rows;             /* [cap] rows whose logits are returned */
  /* host mirrors */
  int32_t *h_idx, *h_perm_tok, *h_tok, *h_slot, *h_pos, *h_rows; /* sized like the device ones */
  float *h_wt, *h_perm_w;
  int *h_off;                /* [E + 1] bucket offsets */
  int *h_cur;                /* [E] bucket cursors */
  /* logits */
  float *logits;             /* device [logits_cap, V] float32 */
  int logits_cap;
  /* tensor parallelism (model/shard.h); comm NULL = unsharded */
  const vcomm *comm;         /* this rank's communicator (vpath_opts.comm) */
  int v0, v1, vblk;          /* lm_head rows cover vocab [v0, v1); gather blocks of vblk = ceil(V/N) rows */
  float *tpo;                /* device [tpo_cap, D] float32: this rank's partial block output, all-reduced */
  int tpo_cap;
  float *lg_all;             /* device [N, lg_cap, vblk] gathered logit blocks */
  float *lg_pad;             /* device [lg_cap, vblk] the last (short) block padded, when v1 - v0 < vblk */
  int lg_cap;
  /* open-time plan */
  wentry *we;
  int n_we, cap_we;
  wbind *wb;
  int n_wb, cap_wb;
  int *entry_of;             /* [n_storage] entry index per storage tensor, -1 */
  int n_storage;
} cstate;

static void trace_ran(cstate *S, const char *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void trace_ran(cstate *S, const char *op, const char *fmt, ...) {
  if (!S->trace || !S->trace->enabled) return;
  char detail[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  vtrace_ran(S->trace, PATH_NAME, op, "ref", detail);
}

/* ---- weights ---- */

static int storage_index(const ds_model *m, const vtensor *t) {
  if (m->is_synthetic && m->synth && t >= m->synth && t < m->synth + m->n_synth) return (int)(t - m->synth);
  if (!m->is_synthetic && m->st.tensors && t >= m->st.tensors && t < m->st.tensors + m->st.n_tensors)
    return (int)(t - m->st.tensors);
  return -1;
}

static vstatus bind(cstate *S, const vtensor *t, vdtype dt, const uint16_t **dst16, const float **dst32,
                    const char *what) {
  if (!t) return VERR("%s: tensor '%s' is missing from the model", S->m->source, what);
  const int si = storage_index(S->m, t);
  int e = si >= 0 ? S->entry_of[si] : -1;
  if (e >= 0 && S->we[e].dt != dt)
    return VERR("%s: tensor '%s' is used both as %s and %s", S->m->source, t->name, vdtype_name(S->we[e].dt),
                vdtype_name(dt));
  if (e < 0) {
    if (S->n_we == S->cap_we) {
      int cap = S->cap_we ? 2 * S->cap_we : 256;
      wentry *nv = (wentry *)realloc(S->we, (size_t)cap * sizeof *nv);
      if (!nv) return VERR("out of memory listing weights");
      S->we = nv;
      S->cap_we = cap;
    }
    e = S->n_we++;
    wentry *w = &S->we[e];
    w->t = t;
    w->storage = si;
    w->dt = dt;
    w->off = 0;
    w->bytes = (size_t)vtensor_numel(t) * vdtype_size(dt);
    if (si >= 0) S->entry_of[si] = e;
  }
  if (S->n_wb == S->cap_wb) {
    int cap = S->cap_wb ? 2 * S->cap_wb : 256;
    wbind *nv = (wbind *)realloc(S->wb, (size_t)cap * sizeof *nv);
    if (!nv) return VERR("out of memory listing weights");
    S->wb = nv;
    S->cap_wb = cap;
  }
  S->wb[S->n_wb].dst16 = dst16;
  S->wb[S->n_wb].dst32 = dst32;
  S->wb[S->n_wb].entry = e;
  S->n_wb++;
  return V_OK;
}

#define BIND16(t, field, what) VTRY(bind(S, (t), DT_BF16, &(field), NULL, (what)))

/* Lists every weight the forward reads (deduplicated: a tied lm_head is the embedding). */
static vstatus plan_weights(cstate *S) {
  const ds_model *m = S->m;
  BIND16(m->embed, S->embed, "model.embed_tokens.weight");
  BIND16(m->final_norm, S->final_norm, "model.norm.weight");
  BIND16(m->lm_head, S->lm_head, "lm_head.weight");
  char w[96];
  for (int l = 0; l < S->c.num_hidden_layers; l++) {
    const ds_layer *ly = &m->layers[l];
    dlayer *d = &S->L[l];
#define LB(t, field, name)                                       \
  do {                                                           \
    snprintf(w, sizeof w, "model.layers.%d.%s", l, name);        \
    BIND16(t, field, w);                                         \
  } while (0)
    LB(ly->input_layernorm, d->in_norm, "input_layernorm.weight");
    if (S->ql > 0) {
      LB(ly->q_a_proj, d->q_a, "self_attn.q_a_proj.weight");
      LB(ly->q_a_layernorm, d->q_a_norm, "self_attn.q_a_layernorm.weight");
      LB(ly->q_b_proj, d->q_b, "self_attn.q_b_proj.weight");
    } else {
      LB(ly->q_proj, d->q_proj, "self_attn.q_proj.weight");
    }
    LB(ly->kv_a_proj_with_mqa, d->kv_a, "self_attn.kv_a_proj_with_mqa.weight");
    LB(ly->kv_a_layernorm, d->kv_a_norm, "self_attn.kv_a_layernorm.weight");
    LB(ly->kv_b_proj, d->kv_b, "self_attn.kv_b_proj.weight");
    LB(ly->o_proj, d->o_proj, "self_attn.o_proj.weight");
    LB(ly->post_attention_layernorm, d->post_norm, "post_attention_layernorm.weight");
    d->is_moe = ly->is_moe;
    if (!ly->is_moe) {
      LB(ly->gate_proj, d->gate, "mlp.gate_proj.weight");
      LB(ly->up_proj, d->up, "mlp.up_proj.weight");
      LB(ly->down_proj, d->down, "mlp.down_proj.weight");
      continue;
    }
    LB(ly->router, d->router, "mlp.gate.weight");
    if (ly->router_bias)
      VTRY(bind(S, ly->router_bias, DT_F32, NULL, &d->router_bias, "mlp.gate.e_score_correction_bias"));
    if (!ly->exp_gate || !ly->exp_up || !ly->exp_down)
      return VERR("%s: layer %d: expert tensors are not bound", m->source, l);
    d->exp_gate = (const uint16_t **)calloc((size_t)S->E, sizeof(uint16_t *));
    d->exp_up = (const uint16_t **)calloc((size_t)S->E, sizeof(uint16_t *));
    d->exp_down = (const uint16_t **)calloc((size_t)S->E, sizeof(uint16_t *));
    if (!d->exp_gate || !d->exp_up || !d->exp_down) return VERR("out of memory binding experts");
    for (int e = 0; e < S->E; e++) {
      char nm[64];
      snprintf(nm, sizeof nm, "mlp.experts.%d.gate_proj.weight", e);
      LB(ly->exp_gate[e], d->exp_gate[e], nm);
      snprintf(nm, sizeof nm, "mlp.experts.%d.up_proj.weight", e);
      LB(ly->exp_up[e], d->exp_up[e], nm);
      snprintf(nm, sizeof nm, "mlp.experts.%d.down_proj.weight", e);
      LB(ly->exp_down[e], d->exp_down[e], nm);
    }
    if (S->c.n_shared_experts > 0) {
      LB(ly->sh_gate, d->sh_gate, "mlp.shared_experts.gate_proj.weight");
      LB(ly->sh_up, d->sh_up, "mlp.shared_experts.up_proj.weight");
      LB(ly->sh_down, d->sh_down, "mlp.shared_experts.down_proj.weight");
    }
#undef LB
  }
  return V_OK;
}

/* Copies host tensor t into device memory dev as dt (bf16 or f32), converting in chunks. */
static vstatus upload(void *dev, const vtensor *t, vdtype dt) {
  const int64_t n = vtensor_numel(t);
  if (t->dtype != DT_BF16 && t->dtype != DT_F16 && t->dtype != DT_F32)
    return VERR("tensor '%s': dtype %s is not a float type", t->name, vdtype_name(t->dtype));
  if (t->dtype == dt) {
    CUDA_CHECK(cudaMemcpy(dev, t->data, (size_t)n * vdtype_size(dt), cudaMemcpyHostToDevice));
    return V_OK;
  }
  const int64_t chunk = 1 << 22;
  float *f = (float *)malloc((size_t)chunk * sizeof(float));
  uint16_t *h = (uint16_t *)malloc((size_t)chunk * sizeof(uint16_t));
  if (!f || !h) {
    free(f);
    free(h);
    return VERR("out of memory converting tensor '%s'", t->name);
  }
  const size_t esz = vdtype_size(t->dtype), osz = vdtype_size(dt);
  vstatus s = V_OK;
  for (int64_t i0 = 0; i0 < n && s == V_OK; i0 += chunk) {
    const int64_t c = n - i0 < chunk ? n - i0 : chunk;
    vconvert_to_f32(f, (const char *)t->data + (size_t)i0 * esz, t->dtype, c);
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
  return s;
}

/* Fills one arena entry: upload host data, or generate a lazy synthetic tensor (whole, or a
 * TP shard's slice) on the GPU. */
static vstatus fill_entry(cstate *S, const wentry *w) {
  void *dev = (char *)S->warena + w->off;
  if (w->t->data) return upload(dev, w->t, w->dt);
  return cuda_synth_model_tensor(dev, w->dt, S->m, w->t, S->stream);
}

/* ---- workspace ---- */

static size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

/* Lays out the workspace for `cap` rows at base (NULL: only measure). Returns bytes. */
static size_t ws_layout(cstate *S, int cap, char *base) {
  size_t off = 0;
  const size_t n = (size_t)cap;
#define CARVE(ptr, type, count)                                   \
  do {                                                            \
    if (base) S->ptr = (type *)(base + off);                      \
    off += align256((size_t)(count) * sizeof(type));              \
  } while (0)
  CARVE(x, float, n * S->D);
  CARVE(xn, uint16_t, n * S->D);
  CARVE(qa, uint16_t, n * (S->ql > 0 ? S->ql : 1));
  CARVE(qan, uint16_t, n * (S->ql > 0 ? S->ql : 1));
  CARVE(q, uint16_t, n * S->H * S->dk);
  CARVE(ckv, uint16_t, n * (S->kl + S->rope));
  CARVE(latn, uint16_t, n * S->kl);
  CARVE(kv, uint16_t, n * S->H * (S->nope + S->v));
  CARVE(attn, uint16_t, n * S->H * S->v);
  CARVE(o, uint16_t, n * S->D);
  CARVE(g, uint16_t, n * S->Imax);
  CARVE(u, uint16_t, n * S->Imax);
  CARVE(a, uint16_t, n * S->Imax);
  CARVE(xg, uint16_t, n * S->D);
  CARVE(y, uint16_t, n * S->D);
  CARVE(idx, int32_t, n * S->K);
  CARVE(wt, float, n * S->K);
  CARVE(perm_tok, int32_t, n * S->K);
  CARVE(perm_w, float, n * S->K);
  CARVE(tok, int32_t, n);
  CARVE(slot, int32_t, n);
  CARVE(pos, int32_t, n);
  CARVE(rows, int32_t, n);
#undef CARVE
  return off;
}

static void free_ws(cstate *S) {
  if (S->ws) cudaFree(S->ws);
  S->ws = NULL;
  S->cap = 0;
  free(S->h_idx), free(S->h_perm_tok), free(S->h_tok), free(S->h_slot), free(S->h_pos), free(S->h_rows);
  free(S->h_wt), free(S->h_perm_w);
  S->h_idx = S->h_perm_tok = S->h_tok = S->h_slot = S->h_pos = S->h_rows = NULL;
  S->h_wt = S->h_perm_w = NULL;
}

/* Makes room for `rows` token rows. */
static vstatus ensure_ws(cstate *S, int rows) {
  if (rows <= S->cap) return V_OK;
  CUDA_CHECK(cudaStreamSynchronize(S->stream));
  free_ws(S);
  const int cap = (rows + 63) / 64 * 64;
  const size_t bytes = ws_layout(S, cap, NULL);
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return VERR(PATH_NAME ": workspace for %d token rows needs %.1f MiB of GPU memory: %s (use smaller steps)", rows,
                (double)bytes / 1048576.0, cudaGetErrorString(e));
  }
  S->ws = p;
  ws_layout(S, cap, (char *)p);
  const size_t nk = (size_t)cap * (size_t)S->K;
  S->h_idx = (int32_t *)malloc(nk * sizeof(int32_t));
  S->h_perm_tok = (int32_t *)malloc(nk * sizeof(int32_t));
  S->h_wt = (float *)malloc(nk * sizeof(float));
  S->h_perm_w = (float *)malloc(nk * sizeof(float));
  S->h_tok = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
  S->h_slot = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
  S->h_pos = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
  S->h_rows = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
  if (!S->h_idx || !S->h_perm_tok || !S->h_wt || !S->h_perm_w || !S->h_tok || !S->h_slot || !S->h_pos ||
      !S->h_rows) {
    free_ws(S);
    return VERR("out of memory for %d token rows of host scratch", rows);
  }
  S->cap = cap;
  return V_OK;
}

static vstatus ensure_logits(cstate *S, int rows) {
  if (rows <= S->logits_cap) return V_OK;
  CUDA_CHECK(cudaStreamSynchronize(S->stream));
  if (S->logits) cudaFree(S->logits);
  S->logits = NULL;
  S->logits_cap = 0;
  const size_t bytes = (size_t)rows * (size_t)S->V * sizeof(float);
  cudaError_t e = cudaMalloc((void **)&S->logits, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    S->logits = NULL;
    return VERR(PATH_NAME ": logits for %d rows need %.1f MiB of GPU memory: %s", rows, (double)bytes / 1048576.0,
                cudaGetErrorString(e));
  }
  S->logits_cap = rows;
  return V_OK;
}

/* ---- forward pieces ---- */

/* y[rows, out] (bf16) = x . W^T. Expert GEMMs leave the row count out of the trace detail
 * (it differs per expert; the trace would grow by one event per expert per step). */
static vstatus linear(cstate *S, void *y, const uint16_t *x, const uint16_t *w, int rows, int in, int out,
                      const char *what) {
  if (strcmp(what, "expert") == 0)
    trace_ran(S, "linear", "%s [%d x %d] cublasGemmEx bf16 fp32-acc", what, out, in);
  else
    trace_ran(S, "linear", "%s [%d x %d] rows=%d cublasGemmEx bf16 fp32-acc", what, out, in, rows);
  return curef_linear(S->blas, y, 0, x, w, rows, in, out);
}

/* MLA attention for T rows: xn (normed) -> S->o = o_proj(attn). Writes the layer's cache. */
static vstatus attention_block(cstate *S, dlayer *d, int T) {
  const int H = S->H, n = S->nope, r = S->rope, kl = S->kl;
  if (S->ql > 0) {
    VTRY(linear(S, S->qa, S->xn, d->q_a, T, S->D, S->ql, "q_a_proj"));
    VTRY(curef_rmsnorm_bf16(S->qan, S->qa, S->ql, d->q_a_norm, T, S->ql, S->eps, S->stream));
    trace_ran(S, "rmsnorm", "q_a_layernorm n=%d rows=%d", S->ql, T);
    VTRY(linear(S, S->q, S->qan, d->q_b, T, S->ql, H * S->dk, "q_b_proj"));
  } else {
    VTRY(linear(S, S->q, S->xn, d->q_proj, T, S->D, H * S->dk, "q_proj"));
  }
  VTRY(linear(S, S->ckv, S->xn, d->kv_a, T, S->D, kl + r, "kv_a_proj_with_mqa"));
  VTRY(curef_rmsnorm_bf16(S->latn, S->ckv, kl + r, d->kv_a_norm, T, kl, S->eps, S->stream));
  trace_ran(S, "rmsnorm", "kv_a_layernorm n=%d rows=%d", kl, T);
  VTRY(linear(S, S->kv, S->latn, d->kv_b, T, kl, H * (n + S->v), "kv_b_proj"));
  const int il = S->c.rope_interleave ? 1 : 0;
  VTRY(curef_rope(S->q, T, H, H * S->dk, S->dk, n, r, S->pos, S->inv_freq, S->attn_factor, il, S->stream));
  trace_ran(S, "rope", "q dim=%d heads=%d rows=%d interleave=%d", r, H, T, il);
  VTRY(curef_rope(S->ckv, T, 1, kl + r, 0, kl, r, S->pos, S->inv_freq, S->attn_factor, il, S->stream));
  trace_ran(S, "rope", "k_rot dim=%d rows=%d interleave=%d", r, T, il);
  VTRY(curef_kv_store(d->kc, d->vc, S->kv, S->ckv, S->slot, S->pos, T, H, n, r, S->v, kl, S->opt.max_ctx,
                      S->stream));
  trace_ran(S, "kv_cache_store", "expanded bf16 H=%d dk=%d dv=%d rows=%d", H, S->dk, S->v, T);
  VTRY(curef_attention(S->attn, S->q, d->kc, d->vc, S->slot, S->pos, T, H, S->dk, S->v, S->opt.max_ctx,
                       S->attn_scale, S->stream));
  trace_ran(S, "attention", "causal fp32-softmax H=%d dk=%d dv=%d rows=%d", H, S->dk, S->v, T);
  VTRY(linear(S, S->o, S->attn, d->o_proj, T, H * S->v, S->D, "o_proj"));
  return V_OK;
}

/* out = down(silu(gate(x)) * up(x)) for `rows` rows of x; result in `out` [rows, D]. */
static vstatus swiglu(cstate *S, uint16_t *out, const uint16_t *x, const uint16_t *gate, const uint16_t *up,
                      const uint16_t *down, int rows, int inter, const char *what) {
  VTRY(linear(S, S->g, x, gate, rows, S->D, inter, what));
  VTRY(linear(S, S->u, x, up, rows, S->D, inter, what));
  VTRY(curef_silu_mul(S->a, S->g, S->u, (size_t)rows * (size_t)inter, S->stream));
  trace_ran(S, "silu_mul", "%s inter=%d", what, inter);
  VTRY(linear(S, out, S->a, down, rows, inter, S->D, what));
  return V_OK;
}

static __device__ __forceinline__ float fw_bf2f(uint16_t h) { return __uint_as_float((unsigned)h << 16); }

/* Router weights of forced experts (vstep.forced_experts), one block per token row, one warp
 * per chosen expert: logit = x . w[e] with the same lane-strided fp32 sum and warp reduction
 * as the router kernel, score = sigmoid(logit); then the scores are normalized (+1e-20) if
 * norm and scaled by rsf, in the router kernel's order, so forcing the router's own choice
 * gives the same weights bit for bit. */
static __global__ void forced_weights_kernel(float *wt, const int32_t *idx, const uint16_t *x, const uint16_t *w,
                                             int D, int K, int norm, float rsf) {
  extern __shared__ float fw_sm[]; /* [K] scores */
  const int r = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  const uint16_t *xr = x + (size_t)r * (size_t)D;
  for (int k = warp; k < K; k += nw) {
    const uint16_t *we = w + (size_t)idx[(size_t)r * K + k] * (size_t)D;
    float s = 0.0f;
    for (int i = lane; i < D; i += 32) s += fw_bf2f(xr[i]) * fw_bf2f(we[i]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) fw_sm[k] = 1.0f / (1.0f + expf(-s));
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  float *wr = wt + (size_t)r * K;
  float sum = 0.0f;
  for (int k = 0; k < K; k++) {
    wr[k] = fw_sm[k];
    sum += wr[k];
  }
  if (norm) {
    const float den = sum + 1e-20f;
    for (int k = 0; k < K; k++) wr[k] /= den;
  }
  for (int k = 0; k < K; k++) wr[k] *= rsf;
}

/* MoE block: adds sum_k w_k expert_k(xn) + shared(xn) into acc (the residual stream x, or
 * under TP the zeroed partial buffer tpo that is all-reduced before the residual add). */
static vstatus moe_block(cstate *S, dlayer *d, int T, float *acc) {
  const int E = S->E, K = S->K;
  const size_t nk = (size_t)T * (size_t)K;
  if (S->forced) {
    /* benchmark routing: the step's expert ids replace the router's choice */
    memcpy(S->h_idx, S->forced + (size_t)S->moe_j * nk, nk * sizeof(int32_t));
    CUDA_CHECK(cudaMemcpyAsync(S->idx, S->h_idx, nk * sizeof(int32_t), cudaMemcpyHostToDevice, S->stream));
    const int threads = 32 * (K < 8 ? K : 8);
    forced_weights_kernel<<<T, threads, (size_t)K * sizeof(float), S->stream>>>(
        S->wt, S->idx, S->xn, d->router, S->D, K, S->c.norm_topk_prob ? 1 : 0, (float)S->c.routed_scaling_factor);
    CUDA_CHECK_LAUNCH();
    trace_ran(S, "router_forced", "forced experts, sigmoid weights E=%d k=%d rows=%d", E, K, T);
  } else {
    VTRY(curef_router(S->idx, S->wt, S->xn, d->router, d->router_bias, T, S->D, E, K, S->c.n_group,
                      S->c.topk_group, S->c.norm_topk_prob ? 1 : 0, (float)S->c.routed_scaling_factor, S->stream));
    trace_ran(S, "router_topk", "sigmoid group-limited E=%d k=%d groups=%d/%d rows=%d", E, K, S->c.topk_group,
              S->c.n_group, T);
    CUDA_CHECK(cudaMemcpyAsync(S->h_idx, S->idx, nk * sizeof(int32_t), cudaMemcpyDeviceToHost, S->stream));
  }
  CUDA_CHECK(cudaMemcpyAsync(S->h_wt, S->wt, nk * sizeof(float), cudaMemcpyDeviceToHost, S->stream));
  CUDA_CHECK(cudaStreamSynchronize(S->stream));
  /* bucket (token, weight) pairs by expert on the host, tokens in row order */
  for (int e = 0; e <= E; e++) S->h_off[e] = 0;
  for (size_t i = 0; i < nk; i++) {
    const int e = S->h_idx[i];
    if (e < 0 || e >= E) return VERR(PATH_NAME ": router chose expert %d (of %d) for row %zu", e, E, i / K);
    S->h_off[e + 1]++;
  }
  /* distinct experts of this layer (vpath_ops.last_experts): the ids are on the host already for
   * the bucketing, so counting them adds no device work to the timed step */
  for (int e = 0; e < E; e++) S->experts_sum += S->h_off[e + 1] > 0;
  S->experts_layers++;
  for (int e = 0; e < E; e++) S->h_off[e + 1] += S->h_off[e];
  for (int e = 0; e < E; e++) S->h_cur[e] = S->h_off[e];
  for (int t = 0; t < T; t++)
    for (int k = 0; k < K; k++) {
      const size_t i = (size_t)t * K + k;
      const int p = S->h_cur[S->h_idx[i]]++;
      S->h_perm_tok[p] = t;
      S->h_perm_w[p] = S->h_wt[i];
    }
  CUDA_CHECK(cudaMemcpyAsync(S->perm_tok, S->h_perm_tok, nk * sizeof(int32_t), cudaMemcpyHostToDevice, S->stream));
  CUDA_CHECK(cudaMemcpyAsync(S->perm_w, S->h_perm_w, nk * sizeof(float), cudaMemcpyHostToDevice, S->stream));
  for (int e = 0; e < E; e++) {
    const int c = S->h_off[e + 1] - S->h_off[e];
    if (c == 0) continue;
    VTRY(curef_gather_rows(S->xg, S->xn, S->perm_tok + S->h_off[e], c, S->D, S->stream));
    trace_ran(S, "moe_gather", "D=%d", S->D);
    VTRY(swiglu(S, S->y, S->xg, d->exp_gate[e], d->exp_up[e], d->exp_down[e], c, S->F, "expert"));
    VTRY(curef_scatter_add(acc, S->y, S->perm_tok + S->h_off[e], S->perm_w + S->h_off[e], c, S->D, S->stream));
    trace_ran(S, "moe_scatter_add", "weighted into fp32 residual D=%d", S->D);
  }
  trace_ran(S, "moe_experts", "per-expert GEMMs rows=%d", T);
  if (d->sh_gate) {
    VTRY(swiglu(S, S->o, S->xn, d->sh_gate, d->sh_up, d->sh_down, T, S->Fs, "shared_expert"));
    VTRY(curef_add_bf16(acc, S->o, (size_t)T * S->D, S->stream));
    trace_ran(S, "residual_add", "fp32 += bf16 D=%d", S->D);
  }
  return V_OK;
}

/* TP: tpo (zeroed) += bf16 block output, all-reduced over the ranks in fp32. */
static vstatus tp_reduce_begin(cstate *S, size_t nd) {
  CUDA_CHECK(cudaMemsetAsync(S->tpo, 0, nd * sizeof(float), S->stream));
  return V_OK;
}
/* TP: x += all-reduce(tpo). */
static vstatus tp_reduce_end(cstate *S, size_t nd, const char *what) {
  VTRY(S->comm->allreduce_sum(S->comm, S->tpo, (int64_t)nd, DT_F32, S->stream));
  if (S->trace && S->trace->enabled) {
    char det[160];
    snprintf(det, sizeof det, "%s, tp=%d rank %d, fp32 [%zu]", what, S->comm->size, S->comm->rank, nd);
    vtrace_ran(S->trace, PATH_NAME, "allreduce", S->comm->name, det);
  }
  const float one = 1.0f;
  CUBLAS_CHECK(cublasSaxpy(S->blas, (int)nd, &one, S->tpo, 1, S->x, 1));
  trace_ran(S, "residual_add", "fp32 += fp32 (all-reduced) D=%d", S->D);
  return V_OK;
}

static vstatus ensure_tpo(cstate *S, int rows) {
  if (rows <= S->tpo_cap) return V_OK;
  CUDA_CHECK(cudaStreamSynchronize(S->stream));
  if (S->tpo) cudaFree(S->tpo);
  S->tpo = NULL;
  S->tpo_cap = 0;
  const int cap = (rows + 63) / 64 * 64;
  cudaError_t e = cudaMalloc((void **)&S->tpo, (size_t)cap * (size_t)S->D * sizeof(float));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    S->tpo = NULL;
    return VERR(PATH_NAME ": TP partial buffer for %d rows: %s", rows, cudaGetErrorString(e));
  }
  S->tpo_cap = cap;
  return V_OK;
}

static vstatus layer_forward(cstate *S, dlayer *d, int T) {
  const size_t nd = (size_t)T * (size_t)S->D;
  float *acc = S->comm ? S->tpo : S->x; /* under TP block outputs are partial sums: reduce, then add */
  VTRY(curef_rmsnorm_f32(S->xn, S->x, S->D, d->in_norm, T, S->D, S->eps, S->stream));
  trace_ran(S, "rmsnorm", "input_layernorm n=%d rows=%d", S->D, T);
  VTRY(attention_block(S, d, T));
  if (S->comm) VTRY(tp_reduce_begin(S, nd));
  VTRY(curef_add_bf16(acc, S->o, nd, S->stream));
  if (S->comm) VTRY(tp_reduce_end(S, nd, "attention o_proj"));
  else trace_ran(S, "residual_add", "fp32 += bf16 D=%d", S->D);
  VTRY(curef_rmsnorm_f32(S->xn, S->x, S->D, d->post_norm, T, S->D, S->eps, S->stream));
  trace_ran(S, "rmsnorm", "post_attention_layernorm n=%d rows=%d", S->D, T);
  if (S->comm) VTRY(tp_reduce_begin(S, nd));
  if (!d->is_moe) {
    VTRY(swiglu(S, S->o, S->xn, d->gate, d->up, d->down, T, S->I, "dense_mlp"));
    VTRY(curef_add_bf16(acc, S->o, nd, S->stream));
    if (S->comm) return tp_reduce_end(S, nd, "dense mlp");
    trace_ran(S, "residual_add", "fp32 += bf16 D=%d", S->D);
    return V_OK;
  }
  VTRY(moe_block(S, d, T, acc));
  S->moe_j++;
  if (S->comm) VTRY(tp_reduce_end(S, nd, "moe"));
  return V_OK;
}

/* TP: this rank's logits for vocab [v0, v1) of the R rows in hx, gathered over the ranks and
 * copied into the host rows logits [R, V] (blocks of vblk columns per rank). */
static vstatus tp_logits(cstate *S, const uint16_t *hx, int R, float *logits) {
  const int N = S->comm->size, nl = S->v1 - S->v0, bk = S->vblk;
  if (R > S->lg_cap) {
    CUDA_CHECK(cudaStreamSynchronize(S->stream));
    if (S->lg_all) cudaFree(S->lg_all);
    if (S->lg_pad) cudaFree(S->lg_pad);
    S->lg_all = S->lg_pad = NULL;
    S->lg_cap = 0;
    cudaError_t e = cudaMalloc((void **)&S->lg_all, (size_t)N * R * bk * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc((void **)&S->lg_pad, (size_t)R * bk * sizeof(float));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return VERR(PATH_NAME ": TP logit gather buffers for %d rows: %s", R, cudaGetErrorString(e));
    }
    S->lg_cap = R;
  }
  trace_ran(S, "lm_head", "[%d x %d] vocab [%d, %d) rows=%d cublasGemmEx bf16 -> fp32", nl, S->D, S->v0, S->v1, R);
  VTRY(curef_linear(S->blas, S->logits, 1, hx, S->lm_head, R, S->D, nl));
  const float *send = S->logits;
  if (nl != bk) { /* pad the short block to vblk columns */
    CUDA_CHECK(cudaMemsetAsync(S->lg_pad, 0, (size_t)R * bk * sizeof(float), S->stream));
    CUDA_CHECK(cudaMemcpy2DAsync(S->lg_pad, (size_t)bk * sizeof(float), S->logits, (size_t)nl * sizeof(float),
                                 (size_t)nl * sizeof(float), (size_t)R, cudaMemcpyDeviceToDevice, S->stream));
    send = S->lg_pad;
  }
  VTRY(S->comm->allgather(S->comm, send, S->lg_all, (int64_t)R * bk, DT_F32, S->stream));
  if (S->trace && S->trace->enabled) {
    char det[160];
    snprintf(det, sizeof det, "logits, tp=%d, vocab blocks of %d rows x %d", N, bk, R);
    vtrace_ran(S->trace, PATH_NAME, "allgather", S->comm->name, det);
  }
  for (int r = 0; r < N; r++) {
    int a, b;
    ds_shard_vocab(S->V, N, r, &a, &b);
    if (b <= a) continue;
    CUDA_CHECK(cudaMemcpy2DAsync(logits + a, (size_t)S->V * sizeof(float), S->lg_all + (size_t)r * R * bk,
                                 (size_t)bk * sizeof(float), (size_t)(b - a) * sizeof(float), (size_t)R,
                                 cudaMemcpyDeviceToHost, S->stream));
  }
  return V_OK;
}

/* ---- vpath ops ---- */

/* Checks a step (common/path.h vstep_validate): V_ERR when malformed, V_UNSUPPORTED past capacity. */
static vstatus check_step(cstate *S, const vstep *s) {
  int n_moe = 0;
  for (int l = 0; l < S->c.num_hidden_layers; l++) n_moe += S->L[l].is_moe ? 1 : 0;
  const vstep_limits lim = {PATH_NAME, S->opt.max_seq, S->opt.max_ctx, S->len, S->V, n_moe, S->K, S->E};
  return vstep_validate(s, &lim);
}

static vstatus cr_supports(void *st, const vstep *s) { return check_step((cstate *)st, s); }

static vstatus cr_forward(void *st, const vstep *s, float *logits) {
  cstate *S = (cstate *)st;
  VTRY(check_step(S, s));
  if (!logits) return VERR("forward: logits buffer is NULL");
  const int T = vstep_total_tokens(s), R = vstep_logit_rows(s);
  VTRY(ensure_ws(S, T));
  VTRY(ensure_logits(S, R));
  if (S->comm) VTRY(ensure_tpo(S, T));
  int t = 0;
  for (int i = 0; i < s->n_seq; i++) {
    for (int j = 0; j < s->n_tokens[i]; j++, t++) {
      S->h_tok[t] = s->tokens[t];
      S->h_slot[t] = s->seq[i];
      S->h_pos[t] = s->start_pos[i] + j;
      if (s->all_logits) S->h_rows[t] = t;
    }
    if (!s->all_logits) S->h_rows[i] = t - 1;
  }
  S->forced = s->forced_experts;
  S->moe_j = 0;
  S->step_T = T;
  S->experts_sum = 0;
  S->experts_layers = 0;
  CUDA_CHECK(cudaEventRecord(S->ev_start, S->stream));
  const size_t ib = (size_t)T * sizeof(int32_t);
  CUDA_CHECK(cudaMemcpyAsync(S->tok, S->h_tok, ib, cudaMemcpyHostToDevice, S->stream));
  CUDA_CHECK(cudaMemcpyAsync(S->slot, S->h_slot, ib, cudaMemcpyHostToDevice, S->stream));
  CUDA_CHECK(cudaMemcpyAsync(S->pos, S->h_pos, ib, cudaMemcpyHostToDevice, S->stream));
  CUDA_CHECK(cudaMemcpyAsync(S->rows, S->h_rows, (size_t)R * sizeof(int32_t), cudaMemcpyHostToDevice, S->stream));

  VTRY(curef_embed(S->x, S->tok, S->embed, T, S->D, S->stream));
  trace_ran(S, "embed", "D=%d rows=%d", S->D, T);
  for (int l = 0; l < S->c.num_hidden_layers; l++) VTRY(layer_forward(S, &S->L[l], T));
  VTRY(curef_rmsnorm_f32(S->xn, S->x, S->D, S->final_norm, T, S->D, S->eps, S->stream));
  trace_ran(S, "rmsnorm", "final norm n=%d rows=%d", S->D, T);
  const uint16_t *hx = S->xn;
  if (!s->all_logits) {
    VTRY(curef_gather_rows(S->xg, S->xn, S->rows, R, S->D, S->stream));
    trace_ran(S, "logit_rows_gather", "rows=%d of %d", R, T);
    hx = S->xg;
  }
  if (S->comm) {
    VTRY(tp_logits(S, hx, R, logits));
  } else {
    trace_ran(S, "lm_head", "[%d x %d] rows=%d cublasGemmEx bf16 -> fp32", S->V, S->D, R);
    VTRY(curef_linear(S->blas, S->logits, 1, hx, S->lm_head, R, S->D, S->V));
    CUDA_CHECK(cudaMemcpyAsync(logits, S->logits, (size_t)R * (size_t)S->V * sizeof(float), cudaMemcpyDeviceToHost,
                               S->stream));
  }
  CUDA_CHECK(cudaEventRecord(S->ev_end, S->stream));
  CUDA_CHECK(cudaStreamSynchronize(S->stream));
  S->forced = NULL;
  CUDA_CHECK(cudaEventElapsedTime(&S->last_ms, S->ev_start, S->ev_end));
  for (int i = 0; i < s->n_seq; i++) S->len[s->seq[i]] = s->start_pos[i] + s->n_tokens[i];
  S->steps++;
  return V_OK;
}

/* Device time of the last forward(), from the events recorded around its device work. */
static double cr_last_step_ms(void *st) {
  const cstate *S = (const cstate *)st;
  return S ? (double)S->last_ms : NAN;
}

/* Distinct routed experts of the last forward(), mean over MoE layers (vpath_ops.last_experts). */
static double cr_last_experts(void *st) {
  const cstate *S = (const cstate *)st;
  return S && S->experts_layers > 0 ? S->experts_sum / S->experts_layers : -1.0;
}

static vstatus cr_reset(void *st, int seq) {
  cstate *S = (cstate *)st;
  if (seq < 0 || seq >= S->opt.max_seq) return VERR("reset: slot %d outside [0, %d)", seq, S->opt.max_seq);
  S->len[seq] = 0;
  return V_OK;
}

static vstatus cr_fill_cache(void *st, int seq, int len, uint64_t seed) {
  cstate *S = (cstate *)st;
  if (seq < 0 || seq >= S->opt.max_seq) return VERR("fill_cache: slot %d outside [0, %d)", seq, S->opt.max_seq);
  if (len < 0) return VERR("fill_cache: length %d is negative", len);
  if (len > S->opt.max_ctx)
    return VUNSUPPORTED(PATH_NAME ": fill_cache of %d positions exceeds max_ctx %d", len, S->opt.max_ctx);
  const int chunk = len < 1024 ? (len > 0 ? len : 1) : 1024;
  VTRY(ensure_ws(S, chunk));
  const int kl = S->kl, r = S->rope, w = kl + r, H = S->H;
  const int il = S->c.rope_interleave ? 1 : 0;
  for (int p0 = 0; p0 < len; p0 += chunk) {
    const int c = len - p0 < chunk ? len - p0 : chunk;
    for (int i = 0; i < c; i++) {
      S->h_slot[i] = seq;
      S->h_pos[i] = p0 + i;
    }
    CUDA_CHECK(cudaMemcpyAsync(S->slot, S->h_slot, (size_t)c * sizeof(int32_t), cudaMemcpyHostToDevice, S->stream));
    CUDA_CHECK(cudaMemcpyAsync(S->pos, S->h_pos, (size_t)c * sizeof(int32_t), cudaMemcpyHostToDevice, S->stream));
    for (int l = 0; l < S->c.num_hidden_layers; l++) {
      dlayer *d = &S->L[l];
      char name[48];
      snprintf(name, sizeof name, "kvfill.L%d", l);
      VTRY(curef_synth_fill(S->ckv, DT_BF16, (uint64_t)c * (uint64_t)w, SYN_EMBED, 0.0f, philox_key(seed, name),
                            (uint64_t)p0 * (uint64_t)w, S->stream));
      VTRY(curef_rmsnorm_bf16(S->latn, S->ckv, w, d->kv_a_norm, c, kl, S->eps, S->stream));
      VTRY(curef_linear(S->blas, S->kv, 0, S->latn, d->kv_b, c, kl, H * (S->nope + S->v)));
      VTRY(curef_rope(S->ckv, c, 1, w, 0, kl, r, S->pos, S->inv_freq, S->attn_factor, il, S->stream));
      VTRY(curef_kv_store(d->kc, d->vc, S->kv, S->ckv, S->slot, S->pos, c, H, S->nope, r, S->v, kl, S->opt.max_ctx,
                          S->stream));
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(S->stream));
  trace_ran(S, "fill_cache", "latent philox -> kv_b_proj -> rope -> store, slot %d len %d", seq, len);
  S->len[seq] = len;
  return V_OK;
}

static void cr_close(void *st) {
  cstate *S = (cstate *)st;
  if (!S) return;
  if (S->stream) cudaStreamSynchronize(S->stream);
  free_ws(S);
  if (S->logits) cudaFree(S->logits);
  if (S->tpo) cudaFree(S->tpo);
  if (S->lg_all) cudaFree(S->lg_all);
  if (S->lg_pad) cudaFree(S->lg_pad);
  if (S->warena) cudaFree(S->warena);
  if (S->kvarena) cudaFree(S->kvarena);
  if (S->inv_freq) cudaFree(S->inv_freq);
  if (S->L) {
    for (int l = 0; l < S->c.num_hidden_layers; l++) {
      free(S->L[l].exp_gate);
      free(S->L[l].exp_up);
      free(S->L[l].exp_down);
    }
    free(S->L);
  }
  if (S->blas) cublasDestroy(S->blas);
  if (S->ev_start) cudaEventDestroy(S->ev_start);
  if (S->ev_end) cudaEventDestroy(S->ev_end);
  if (S->stream) cudaStreamDestroy(S->stream);
  free(S->len);
  free(S->h_off);
  free(S->h_cur);
  free(S->we);
  free(S->wb);
  free(S->entry_of);
  free(S);
}

static vstatus open_impl(cstate *S, const ds_model *m, const vpath_opts *o) {
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
  S->E = c->n_routed_experts;
  S->K = c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 1;
  S->F = c->moe_intermediate_size;
  S->Fs = c->moe_intermediate_size * c->n_shared_experts;
  S->I = c->intermediate_size;
  S->V = c->vocab_size;
  ds_model_vocab_range(m, &S->v0, &S->v1);
  if (o->comm) {
    if (o->comm->size != ds_model_tp_size(m) || o->comm->rank != (m->tp_size > 1 ? m->tp_rank : 0))
      return VERR(PATH_NAME ": communicator rank %d of %d does not match the model's TP shard %d of %d",
                  o->comm->rank, o->comm->size, m->tp_rank, ds_model_tp_size(m));
  } else if (ds_model_tp_size(m) > 1) {
    return VERR(PATH_NAME ": %s is TP shard %d of %d but no communicator was given (open it with vpath_opts.tp)",
                m->source, m->tp_rank, m->tp_size);
  }
  if (!m->lm_head || m->lm_head->shape[0] != S->v1 - S->v0)
    return VERR(PATH_NAME ": tensor 'lm_head.weight': %lld rows, expected the vocabulary block [%d, %d)",
                m->lm_head ? (long long)m->lm_head->shape[0] : -1ll, S->v0, S->v1);
  S->comm = o->comm;
  S->vblk = o->comm ? ds_shard_vocab_block(S->V, o->comm->size) : S->V;
  S->eps = (float)c->rms_norm_eps;
  S->attn_scale = (float)ds_attention_scale(c);
  S->Imax = ds_mem_cuda_ref_imax(c);
  if ((size_t)(S->dk + 128 + S->v + 32) * sizeof(float) > 48 * 1024)
    return VUNSUPPORTED(PATH_NAME ": head dims %d + %d too large for the attention kernel", S->dk, S->v);

  int ndev = cuda_device_count();
  if (ndev == 0) return VUNSUPPORTED(PATH_NAME ": no CUDA device visible");
  if (o->device < 0 || o->device >= ndev)
    return VERR(PATH_NAME ": device %d outside the %d visible CUDA devices", o->device, ndev);
  CUDA_CHECK(cudaSetDevice(o->device));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, o->device));
  CUDA_CHECK(cudaStreamCreate(&S->stream));
  CUBLAS_CHECK(cublasCreate(&S->blas));
  CUBLAS_CHECK(cublasSetStream(S->blas, S->stream));
  CUDA_CHECK(cudaEventCreate(&S->ev_start));
  CUDA_CHECK(cudaEventCreate(&S->ev_end));
  S->last_ms = NAN;

  S->L = (dlayer *)calloc((size_t)c->num_hidden_layers, sizeof(dlayer));
  S->len = (int *)calloc((size_t)o->max_seq, sizeof(int));
  S->h_off = (int *)calloc((size_t)S->E + 1, sizeof(int));
  S->h_cur = (int *)calloc((size_t)S->E + 1, sizeof(int));
  S->n_storage = m->is_synthetic ? m->n_synth : m->st.n_tensors;
  S->entry_of = (int *)malloc((size_t)(S->n_storage > 0 ? S->n_storage : 1) * sizeof(int));
  if (!S->L || !S->len || !S->h_off || !S->h_cur || !S->entry_of) return VERR("out of memory");
  for (int i = 0; i < S->n_storage; i++) S->entry_of[i] = -1;

  /* plan and size everything before allocating anything large */
  VTRY(plan_weights(S));
  size_t wb = 0;
  for (int i = 0; i < S->n_we; i++) {
    S->we[i].off = wb;
    wb += align256(S->we[i].bytes);
  }
  S->wbytes = wb;
  /* the refusal uses the estimate `vouch run --dry-run` prints (model/mem_estimate.h) */
  const double kv_d = (double)c->num_hidden_layers * o->max_seq * (double)o->max_ctx * S->H * (S->dk + S->v) * 2.0;
  if (kv_d > 1e18) return VERR(PATH_NAME ": KV cache size overflows (max_seq %d x max_ctx %d)", o->max_seq, o->max_ctx);
  const size_t per_slot_k = (size_t)o->max_ctx * S->H * S->dk, per_slot_v = (size_t)o->max_ctx * S->H * S->v;
  const size_t layer_k = (size_t)o->max_seq * per_slot_k * 2, layer_v = (size_t)o->max_seq * per_slot_v * 2;
  ds_mem_opts mo = {o->max_seq, o->max_ctx, S->v1 - S->v0, o->comm ? o->comm->size : 1, false, 0};
  ds_mem_estimate est;
  VTRY(ds_mem_cuda_ref(c, &mo, &est));
  if ((double)S->wbytes > est.weight_bytes) est.weight_bytes = (double)S->wbytes; /* never below the real arena */
  S->kvbytes = (size_t)est.kv_bytes;
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  VTRY(ds_mem_check(PATH_NAME, &est, c, &mo, (double)free_b, (double)total_b, prop.name));

  /* weights */
  CUDA_CHECK(cudaMalloc(&S->warena, S->wbytes > 0 ? S->wbytes : 256));
  int generated = 0;
  for (int i = 0; i < S->n_we; i++) {
    VTRY(fill_entry(S, &S->we[i]));
    if (!S->we[i].t->data) generated++;
  }
  for (int i = 0; i < S->n_wb; i++) {
    void *p = (char *)S->warena + S->we[S->wb[i].entry].off;
    if (S->wb[i].dst16) *S->wb[i].dst16 = (const uint16_t *)p;
    if (S->wb[i].dst32) *S->wb[i].dst32 = (const float *)p;
  }
  CUDA_CHECK(cudaStreamSynchronize(S->stream));

  /* KV cache */
  CUDA_CHECK(cudaMalloc(&S->kvarena, S->kvbytes > 0 ? S->kvbytes : 256));
  CUDA_CHECK(cudaMemset(S->kvarena, 0, S->kvbytes));
  char *kp = (char *)S->kvarena;
  for (int l = 0; l < c->num_hidden_layers; l++) {
    S->L[l].kc = (uint16_t *)kp;
    kp += align256(layer_k);
    S->L[l].vc = (uint16_t *)kp;
    kp += align256(layer_v);
  }

  /* RoPE tables (host computes HF's float32 inv_freq and the YaRN attention factor) */
  const int nhalf = S->rope / 2;
  float *inv = (float *)malloc((size_t)(nhalf > 0 ? nhalf : 1) * sizeof(float));
  if (!inv) return VERR("out of memory");
  S->attn_factor = (float)ds_rope_inv_freq(c, inv);
  cudaError_t e = cudaMalloc((void **)&S->inv_freq, (size_t)(nhalf > 0 ? nhalf : 1) * sizeof(float));
  if (e == cudaSuccess) e = cudaMemcpy(S->inv_freq, inv, (size_t)nhalf * sizeof(float), cudaMemcpyHostToDevice);
  free(inv);
  if (e != cudaSuccess) return VERR(PATH_NAME ": inv_freq upload: %s", cudaGetErrorString(e));

  VTRY(ensure_ws(S, 16));
  VTRY(ensure_logits(S, 1));

  /* the plan is no longer needed */
  free(S->we), S->we = NULL, S->n_we = S->cap_we = 0;
  free(S->wb), S->wb = NULL, S->n_wb = S->cap_wb = 0;
  free(S->entry_of), S->entry_of = NULL;

  snprintf(S->info, sizeof S->info,
           "device %d: %.200s (sm_%d%d), weights %.1f MiB (%d tensors generated on the GPU), KV cache %.1f MiB",
           o->device, prop.name, prop.major, prop.minor, (double)S->wbytes / 1048576.0, generated,
           (double)S->kvbytes / 1048576.0);
  if (S->trace) vtrace_note(S->trace, PATH_NAME, S->info);
  if (o->variant && o->variant[0] && strcmp(o->variant, "ref") != 0 && S->trace) {
    char note[160];
    snprintf(note, sizeof note, "variant '%s' requested; cuda-ref has one variant, 'ref'", o->variant);
    vtrace_note(S->trace, PATH_NAME, note);
  }
  return V_OK;
}

static vstatus cr_open(void **state, const ds_model *m, const vpath_opts *o) {
  *state = NULL;
  if (!m || !o) return VERR(PATH_NAME ": open: NULL model or options");
  cstate *S = (cstate *)calloc(1, sizeof(cstate));
  if (!S) return VERR("out of memory");
  vstatus s = open_impl(S, m, o);
  if (s != V_OK) {
    cr_close(S);
    return s;
  }
  *state = S;
  return V_OK;
}

extern "C" const vpath_ops cuda_ref_ops = {
    PATH_NAME,
    "plain CUDA kernels + cuBLAS, bf16 weights/activations, fp32 accumulation (unoptimized engine)",
    cr_open,
    cr_supports,
    cr_forward,
    cr_reset,
    cr_fill_cache,
    cr_last_step_ms,
    cr_close,
    false, /* latent_kv: K/V expanded per head */
    cr_last_experts,
    /* caps: device weights, TP over NCCL, no dcp, no ep */
    {false, VPATH_TP_NCCL, false, false,
     ": its expanded per-head K/V cache is already split by head under TP, so dcp would save no memory",
     ": the GPU paths split every routed expert along its intermediate dimension under TP", NULL},
};
