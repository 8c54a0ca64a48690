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
#include "kernels/latency_state.h"

/* ---- vpath ops ---- */

static vstatus lt_supports(void *st, const vstep *s) {
  lstate *S = (lstate *)st;
  if (S->ref) return cuda_ref_ops.supports(S->ref, s);
  return lt_check_step(S, s); /* forward() runs every valid step (outside the envelope as a traced fallback) */
}

int lt_fill_chunk(lstate *S, const vstep *s, int t0, int *i, int *j, int *R, int *max_keys, int *seq_of, int *j_of) {
  const int T = vstep_total_tokens(s);
  int c = 0;
  *R = 0;
  *max_keys = 1;
  while (c < TC && t0 + c < T) {
    S->h_tok[c] = s->tokens[t0 + c];
    S->h_slot[c] = s->seq[*i];
    S->h_pos[c] = s->start_pos[*i] + *j;
    if (S->h_pos[c] + 1 > *max_keys) *max_keys = S->h_pos[c] + 1;
    if (seq_of) seq_of[c] = *i, j_of[c] = *j;
    const bool last = *j == s->n_tokens[*i] - 1;
    if (s->all_logits || last) S->h_rows[(*R)++] = c;
    c++;
    if (++*j == s->n_tokens[*i]) ++*i, *j = 0;
  }
  if (*R == 0 && c > 0) S->h_rows[(*R)++] = c - 1; /* lm_head needs a row; its logits are dropped */
  return c;
}

static vstatus lt_forward_impl(lstate *S, const vstep *s, float *logits) {
  VTRY(lt_check_step(S, s));
  if (!logits) return VERR("forward: logits buffer is NULL");
  const int T = vstep_total_tokens(s);
  const bool forced = s->forced_experts != NULL && S->n_moe > 0;
  char why[160];
  const char *to = "";
  lt_envelope_reason(s, why, sizeof why, &to);
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
    VTRY(lt_run_core(S, T, R, max_keys, forced, S->use_graphs, &ms));
    S->last_whole = true;
    CUDA_CHECK(cudaMemcpy(logits, S->logits, (size_t)R * S->V * sizeof(float), cudaMemcpyDeviceToHost));
  } else {
    /* A step outside the graphs' envelope (prefill, mixed, > TC tokens) still runs on latency's own
     * kernels, eagerly in chunks: the code under test ran, so it is a `ran` event of decode_step in
     * mode "prefill-chunked" / "chunked", not a fallback (a fallback is a hand-over to another path,
     * which fails a step that did not expect it: suites/paths/ran.h). Every diverge context fill and
     * every batch of > 64 tokens takes this branch. */
    if (why[0] && S->trace) vtrace_ran(S->trace, PATH_NAME, "decode_step", to, why);
    S->last_whole = false; /* n_act will hold the last chunk's counts only */
    /* chunks of <= TC consecutive tokens (flat order); each chunk is a valid sub-step */
    int seq_of[TC], j_of[TC];
    int t0 = 0, i = 0, j = 0;
    while (t0 < T) {
      int max_keys = 1, R = 0;
      const int c = lt_fill_chunk(S, s, t0, &i, &j, &R, &max_keys, seq_of, j_of);
      if (forced)
        for (int mi = 0; mi < S->n_moe; mi++)
          memcpy(S->h_forced + (size_t)mi * c * S->K, s->forced_experts + ((size_t)mi * T + t0) * S->K,
                 (size_t)c * S->K * sizeof(int32_t));
      if (R > 0 || c > 0) {
        VTRY(lt_run_core(S, c, R, max_keys, forced, false, &ms));
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
  lt_trace(S, "fill_cache", "v1", "latent philox -> kv_a_layernorm + rope -> latent store, slot %d len %d%s", seq, len,
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
  for (int i = 0; i < S->n_graphs; i++) lt_graph_free(&S->graphs[i]);
  S->n_graphs = 0;
  S->next_evict = 0;
  const bool g = S->use_graphs;
  vstatus r = lt_parse_variant(S, variant);
  S->use_graphs = g && !(variant && strstr(variant, "eager"));
  if (r == V_OK && S->attn_mode != LT_ATTN_WANT_SPLIT && !S->ag.rows)
    lt_alloc_gemm_attention(S); /* opened with attn_split */
  if (r == V_OK && S->attn_mode == LT_ATTN_WANT_GEMM && !S->ag.rows) {
    if (S->dcp) S->attn_mode = LT_ATTN_TABLE; /* the table (v3_mma / v1_split) stays */
    r = VUNSUPPORTED(PATH_NAME ": attn_gemm: %s", S->ag_why);
  }
  if (r == V_OK && S->attn_mode == LT_ATTN_WANT_MMA && !S->mma_ok) {
    S->attn_mode = LT_ATTN_TABLE;
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
  return lt_table_variant(T, lt_kind_of(grouped, 1, ep, N, K));
}

extern "C" const char *latency_table_variant(int T, bool grouped) {
  return lat_gemm_variant_name(lt_table_variant(T, grouped ? KIND_MOE : KIND_DENSE));
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
  VTRY(lt_check_step(S, s));
  lt_envelope_reason(s, why, sizeof why, &to);
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
    latency_selectable, /* kernels/latency_selectable.cu */
};
