/* Opening and closing the latency path (kernels/latency_state.h): device weights, the
 * workspace, the variant words; lt_open builds, lt_close frees. */
#include "kernels/latency_state.h"

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
void lt_alloc_gemm_attention(lstate *S) {
  memset(&S->ag, 0, sizeof S->ag);
  if (S->attn_mode == LT_ATTN_WANT_SPLIT) {
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
  S->wa_whole = !tp || !lt_split_wa(S);
  S->router_whole = !tp || !lt_split_router(S);
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
/* The variant words that set one choice each (the GEMM words, COLUMN=GEMM, shared=GEMM and the
 * tp_ reduce modes are parsed after them). */
typedef enum {
  W_TABLE, W_EAGER, W_ROUTER_GEMM, W_NO_PERSIST, W_SHARED_LATE, W_PDL, W_ATTN, W_TP_REPLICATED_IN
} word_sets;
static const struct {
  const char *word;
  word_sets sets; /* which choice */
  int value;      /* its value (a bool, or an lt_attn_mode for W_ATTN) */
} k_words[] = {
    {"table", W_TABLE, 0},
    {"eager", W_EAGER, 0},
    {"router_gemm", W_ROUTER_GEMM, 1},
    {"no_persist", W_NO_PERSIST, 1},
    {"shared_late", W_SHARED_LATE, 1},
    {"shared_early", W_SHARED_LATE, 0},
    {"pdl", W_PDL, 1},
    {"no_pdl", W_PDL, 0},
    {"attn_split", W_ATTN, LT_ATTN_WANT_SPLIT},
    {"attn_gemm", W_ATTN, LT_ATTN_WANT_GEMM},
    {"attn_mma", W_ATTN, LT_ATTN_WANT_MMA},
    {"tp_replicated_in", W_TP_REPLICATED_IN, 1},
    {"tp_split_in", W_TP_REPLICATED_IN, 0},
};

/* Sets the choice of k_words[w]. */
static void apply_word(lstate *S, size_t w) {
  const int v = k_words[w].value;
  switch (k_words[w].sets) {
    case W_TABLE: break;
    case W_EAGER: S->use_graphs = false; break;
    case W_ROUTER_GEMM: S->router_gemm = v; break;
    case W_NO_PERSIST: S->no_persist = v; break;
    case W_SHARED_LATE: S->shared_late = v; break;
    case W_PDL: S->pdl = v; break;
    case W_ATTN: S->attn_mode = (lt_attn_mode)v; break;
    case W_TP_REPLICATED_IN: S->tp_rep_in = v; break;
  }
}

vstatus lt_parse_variant(lstate *S, const char *variant) {
  S->force_variant = 0;
  memset(S->force_kind, 0, sizeof S->force_kind);
  S->attn_mode = LT_ATTN_TABLE;
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
    size_t w = 0;
    while (w < sizeof k_words / sizeof k_words[0] && strcmp(tok, k_words[w].word)) w++;
    if (w < sizeof k_words / sizeof k_words[0]) {
      apply_word(S, w);
      continue;
    }
    if (strncmp(tok, "shared=", 7) == 0) {
      S->shared_variant = lat_gemm_variant_from_name(tok + 7);
      if (!S->shared_variant) return VERR(PATH_NAME ": variant '%s': unknown GEMM variant for the shared expert", tok);
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
      while (k < N_KINDS && (strncmp(tok, lt_kind_names[k], (size_t)(eq - tok)) || lt_kind_names[k][eq - tok])) k++;
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
    if (!v) {
      char known[512] = "";
      size_t n = 0;
      for (size_t i = 0; i < sizeof k_words / sizeof k_words[0] && n < sizeof known; i++)
        n += (size_t)snprintf(known + n, sizeof known - n, "%s, ", k_words[i].word);
      for (int g = LAT_V1_MMA_N8; g <= LAT_V11_CP_M2 && n < sizeof known; g++)
        n += (size_t)snprintf(known + n, sizeof known - n, "%s, ", lat_gemm_variant_name(g));
      return VERR(PATH_NAME ": variant '%s' unknown (%sCOLUMN=GEMM, shared=GEMM, tp_MODE)", tok, known);
    }
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
  VTRY(lt_parse_variant(S, o->variant));
  if (S->dcp && S->attn_mode == LT_ATTN_WANT_GEMM)
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
  lt_alloc_gemm_attention(S);
  if (S->trace && S->dcp) {
    char note[320];
    const double mib = 1.0 / 1048576.0, row = (double)S->opt.max_seq * S->W * 2;
    snprintf(note, sizeof note,
             "dcp=%d rank %d over %s: latent cache positions p%%%d==%d, %d of %d rows per slot: %.1f MiB per layer "
             "(%.1f without dcp); mla_decode %s over all %d heads, per layer allgather q + o|lse partials (fp32), "
             "lse combine of heads %d-%d",
             S->dcp_n, S->dcp_rank, S->comm->name, S->dcp_n, S->dcp_rank, S->lctx, S->opt.max_ctx,
             row * S->lctx * mib, row * S->opt.max_ctx * mib,
             S->mma_ok && S->attn_mode != LT_ATTN_WANT_SPLIT ? "v3_mma" : "v1_split",
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
                 lt_split_wa(S) ? "q_a|kv_a split, this rank's rows all-gathered"
                 : S->ql > 0 ? "q_a|kv_a replicated"
                             : "q_proj|kv_a whole on every rank (q_proj is sharded by head: no q LoRA to split)",
                 S->n_moe == 0 ? "none" : lt_split_router(S) ? "split by experts, logits all-gathered" : "replicated");
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
           lat_gemm_variant_name(lt_pick_variant(S, 1, KIND_DENSE, 0)),
           lat_gemm_variant_name(lt_pick_variant(S, 16, KIND_DENSE, 0)),
           lat_gemm_variant_name(lt_pick_variant(S, 32, KIND_DENSE, 0)),
           lat_gemm_variant_name(lt_pick_variant(S, 64, KIND_DENSE, 0)),
           S->pdl && S->pdl_hw ? "programmatic dependent launch"
           : S->pdl            ? "no PDL (before sm_90)"
                               : "no PDL (no_pdl)",
           S->use_graphs ? "" : ", eager (no graphs)");
  if (S->trace) vtrace_note(S->trace, PATH_NAME, S->info);
  return V_OK;
}

vstatus lt_open(void **state, const ds_model *m, const vpath_opts *o) {
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

/* The free side of lt_open: everything it made, also from a half-opened state (every field
 * checked; lt_open calls it on its own failure). */
void lt_close(void *st) {
  lstate *S = (lstate *)st;
  if (!S) return;
  if (S->ref) cuda_ref_ops.close(S->ref);
  if (S->st) cudaStreamSynchronize(S->st);
  lat_tp_close(&S->tp);
  if (S->st2) cudaStreamSynchronize(S->st2);
  for (int i = 0; i < S->n_graphs; i++) lt_graph_free(&S->graphs[i]);
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
