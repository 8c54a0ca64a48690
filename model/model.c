/* The checkpoint as the forward pass sees it: tensor specs from the config, loading from
 * safetensors (checked against the specs), synthesis from the counter-based RNG, counts. */
#include "model/model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- tensor specs: the single list of what the architecture needs ---- */

typedef struct {
  ds_tensor_spec *v;
  int n, cap;
} spec_list;

static vstatus push(spec_list *l, int layer, synth_kind kind, vdtype dt, int64_t d0, int64_t d1, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
#include <stdarg.h>
static vstatus push(spec_list *l, int layer, synth_kind kind, vdtype dt, int64_t d0, int64_t d1, const char *fmt, ...) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 256;
    ds_tensor_spec *nv = realloc(l->v, (size_t)cap * sizeof *nv);
    if (!nv) return VERR("out of memory listing tensors");
    l->v = nv;
    l->cap = cap;
  }
  ds_tensor_spec *s = &l->v[l->n++];
  memset(s, 0, sizeof *s);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->name, sizeof s->name, fmt, ap);
  va_end(ap);
  s->dtype = dt;
  s->layer = layer;
  s->kind = kind;
  s->ndim = d1 > 0 ? 2 : 1;
  s->shape[0] = d0;
  s->shape[1] = d1 > 0 ? d1 : 0;
  s->fan_in = kind == SYN_LINEAR ? (int)d1 : 0;
  return V_OK;
}

vstatus ds_tensor_specs(const ds_config *c, ds_tensor_spec **out, int *n) {
  spec_list l = {0};
  const int D = c->hidden_size, H = c->num_attention_heads;
  const vdtype W = DT_BF16;
#define P(...) do { vstatus ps_ = push(&l, __VA_ARGS__); if (ps_) { free(l.v); return ps_; } } while (0)
  P(-1, SYN_EMBED, W, c->vocab_size, D, "model.embed_tokens.weight");
  for (int i = 0; i < c->num_hidden_layers; i++) {
    const char *pre = "model.layers";
    P(i, SYN_NORM, W, D, 0, "%s.%d.input_layernorm.weight", pre, i);
    if (c->q_lora_rank > 0) {
      P(i, SYN_LINEAR, W, c->q_lora_rank, D, "%s.%d.self_attn.q_a_proj.weight", pre, i);
      P(i, SYN_NORM, W, c->q_lora_rank, 0, "%s.%d.self_attn.q_a_layernorm.weight", pre, i);
      P(i, SYN_LINEAR, W, (int64_t)H * c->qk_head_dim, c->q_lora_rank, "%s.%d.self_attn.q_b_proj.weight", pre, i);
    } else {
      P(i, SYN_LINEAR, W, (int64_t)H * c->qk_head_dim, D, "%s.%d.self_attn.q_proj.weight", pre, i);
    }
    P(i, SYN_LINEAR, W, c->kv_lora_rank + c->qk_rope_head_dim, D, "%s.%d.self_attn.kv_a_proj_with_mqa.weight", pre, i);
    P(i, SYN_NORM, W, c->kv_lora_rank, 0, "%s.%d.self_attn.kv_a_layernorm.weight", pre, i);
    P(i, SYN_LINEAR, W, (int64_t)H * (c->qk_nope_head_dim + c->v_head_dim), c->kv_lora_rank,
      "%s.%d.self_attn.kv_b_proj.weight", pre, i);
    P(i, SYN_LINEAR, W, D, (int64_t)H * c->v_head_dim, "%s.%d.self_attn.o_proj.weight", pre, i);
    P(i, SYN_NORM, W, D, 0, "%s.%d.post_attention_layernorm.weight", pre, i);
    if (!ds_layer_is_moe(c, i)) {
      P(i, SYN_LINEAR, W, c->intermediate_size, D, "%s.%d.mlp.gate_proj.weight", pre, i);
      P(i, SYN_LINEAR, W, c->intermediate_size, D, "%s.%d.mlp.up_proj.weight", pre, i);
      P(i, SYN_LINEAR, W, D, c->intermediate_size, "%s.%d.mlp.down_proj.weight", pre, i);
    } else {
      const int E = c->n_routed_experts, F = c->moe_intermediate_size;
      P(i, SYN_LINEAR, W, E, D, "%s.%d.mlp.gate.weight", pre, i);
      P(i, SYN_BIAS, DT_F32, E, 0, "%s.%d.mlp.gate.e_score_correction_bias", pre, i);
      for (int e = 0; e < E; e++) {
        P(i, SYN_LINEAR, W, F, D, "%s.%d.mlp.experts.%d.gate_proj.weight", pre, i, e);
        P(i, SYN_LINEAR, W, F, D, "%s.%d.mlp.experts.%d.up_proj.weight", pre, i, e);
        P(i, SYN_LINEAR, W, D, F, "%s.%d.mlp.experts.%d.down_proj.weight", pre, i, e);
      }
      if (c->n_shared_experts > 0) {
        const int S = F * c->n_shared_experts;
        P(i, SYN_LINEAR, W, S, D, "%s.%d.mlp.shared_experts.gate_proj.weight", pre, i);
        P(i, SYN_LINEAR, W, S, D, "%s.%d.mlp.shared_experts.up_proj.weight", pre, i);
        P(i, SYN_LINEAR, W, D, S, "%s.%d.mlp.shared_experts.down_proj.weight", pre, i);
      }
    }
  }
  P(-1, SYN_NORM, W, D, 0, "model.norm.weight");
  if (!c->tie_word_embeddings) P(-1, SYN_LINEAR, W, c->vocab_size, D, "lm_head.weight");
#undef P
  *out = l.v;
  *n = l.n;
  return V_OK;
}

/* ---- synthesis ---- */

void ds_synth_fill(void *dst, const ds_tensor_spec *spec, uint64_t seed, int64_t start, int64_t numel) {
  const uint64_t key = philox_key(seed, spec->name);
  const float scale = spec->kind == SYN_LINEAR ? synth_linear_scale(spec->fan_in) : 0.0f;
  if (spec->dtype == DT_F32) {
    float *o = dst;
    for (int64_t i = 0; i < numel; i++) o[i] = synth_value(spec->kind, scale, key, (uint64_t)(start + i));
  } else {
    uint16_t *o = dst;
    for (int64_t i = 0; i < numel; i++) o[i] = f32_to_bf16(synth_value(spec->kind, scale, key, (uint64_t)(start + i)));
  }
}

static int64_t spec_numel(const ds_tensor_spec *s) { return s->shape[0] * (s->ndim > 1 ? s->shape[1] : 1); }

void ds_synth_slice_fill(void *dst, const ds_synth_slice *sl, uint64_t seed) {
  const size_t esz = vdtype_size(sl->spec.dtype);
  const int64_t numel = sl->rows * sl->cols, chunk = 1 << 16;
  /* chunks of the block, each walked as runs along its rows (a run is contiguous in the full tensor) */
#pragma omp parallel for schedule(dynamic, 1) if (numel > 4 * chunk)
  for (int64_t c0 = 0; c0 < numel; c0 += chunk) {
    const int64_t end = numel - c0 < chunk ? numel : c0 + chunk;
    for (int64_t k = c0; k < end;) {
      const int64_t i = k / sl->cols, j = k % sl->cols;
      const int64_t len = sl->cols - j < end - k ? sl->cols - j : end - k;
      ds_synth_fill((char *)dst + (size_t)k * esz, &sl->spec, seed, sl->start + i * sl->stride + j, len);
      k += len;
    }
  }
}

vstatus ds_model_materialize(ds_model *m) {
  if (!m->is_synthetic) return V_OK;
  for (int i = 0; i < m->n_synth; i++) {
    vtensor *t = &m->synth[i];
    if (t->data) continue;
    const ds_synth_slice *sl = m->lazy ? &m->lazy[i] : NULL;
    if (!sl || !sl->spec.name[0] || sl->rows * sl->cols != vtensor_numel(t) || sl->spec.dtype != t->dtype)
      return VERR("%s: tensor '%s' has no host data and no synthesis rule matching its shape", m->source, t->name);
    size_t bytes = vtensor_nbytes(t);
    t->data = malloc(bytes ? bytes : 1);
    if (!t->data) {
      ds_model_stats st;
      ds_model_count(m, &st);
      return VERR("out of memory synthesizing %s (%zu bytes): %s needs %.1f GB of host memory for host weights",
                  t->name, bytes, m->source, st.bytes_total / 1e9);
    }
    t->owned = true;
    ds_synth_slice_fill(t->data, sl, m->seed);
  }
  return V_OK;
}

/* ---- binding tensors to layers ---- */

static const vtensor *lookup(const ds_model *m, const char *name) {
  if (m->is_synthetic) {
    /* synth tensors are in spec order; callers bind in that order too, but search to be safe */
    for (int i = 0; i < m->n_synth; i++)
      if (strcmp(m->synth[i].name, name) == 0) return &m->synth[i];
    return NULL;
  }
  return st_find(&m->st, name);
}

static bool is_float_dtype(vdtype d) { return d == DT_F32 || d == DT_BF16 || d == DT_F16; }

/* Checks every spec against what was loaded (presence, float dtype, shape). */
static vstatus check_tensors(const ds_model *m, const ds_tensor_spec *specs, int n) {
  for (int i = 0; i < n; i++) {
    const ds_tensor_spec *s = &specs[i];
    const vtensor *t = lookup(m, s->name);
    if (!t) return VERR("%s: tensor '%s' is missing (the config needs it)", m->source, s->name);
    if (!is_float_dtype(t->dtype))
      return VERR("%s: tensor '%s' has dtype %s; expected BF16, F16 or F32", m->source, s->name, vdtype_name(t->dtype));
    bool ok = t->ndim == s->ndim && t->shape[0] == s->shape[0] && (s->ndim == 1 || t->shape[1] == s->shape[1]);
    if (!ok) {
      char got[64] = "", *p = got;
      for (int d = 0; d < t->ndim; d++) p += snprintf(p, (size_t)(got + sizeof got - p), d ? ",%lld" : "%lld", (long long)t->shape[d]);
      return VERR("%s: tensor '%s' has shape [%s]; the config implies [%lld%s%lld]", m->source, s->name, got,
                  (long long)s->shape[0], s->ndim > 1 ? "," : "", s->ndim > 1 ? (long long)s->shape[1] : 0ll);
    }
  }
  return V_OK;
}

static vstatus bind_layers(ds_model *m) {
  const ds_config *c = &m->cfg;
  char name[160];
  m->layers = calloc((size_t)c->num_hidden_layers, sizeof *m->layers);
  if (!m->layers) return VERR("out of memory");
#define GET(dst, ...) do { snprintf(name, sizeof name, __VA_ARGS__); (dst) = lookup(m, name); } while (0)
  GET(m->embed, "model.embed_tokens.weight");
  GET(m->final_norm, "model.norm.weight");
  if (c->tie_word_embeddings) m->lm_head = m->embed;
  else GET(m->lm_head, "lm_head.weight");
  for (int i = 0; i < c->num_hidden_layers; i++) {
    ds_layer *L = &m->layers[i];
    const char *p = "model.layers";
    GET(L->input_layernorm, "%s.%d.input_layernorm.weight", p, i);
    GET(L->post_attention_layernorm, "%s.%d.post_attention_layernorm.weight", p, i);
    if (c->q_lora_rank > 0) {
      GET(L->q_a_proj, "%s.%d.self_attn.q_a_proj.weight", p, i);
      GET(L->q_a_layernorm, "%s.%d.self_attn.q_a_layernorm.weight", p, i);
      GET(L->q_b_proj, "%s.%d.self_attn.q_b_proj.weight", p, i);
    } else {
      GET(L->q_proj, "%s.%d.self_attn.q_proj.weight", p, i);
    }
    GET(L->kv_a_proj_with_mqa, "%s.%d.self_attn.kv_a_proj_with_mqa.weight", p, i);
    GET(L->kv_a_layernorm, "%s.%d.self_attn.kv_a_layernorm.weight", p, i);
    GET(L->kv_b_proj, "%s.%d.self_attn.kv_b_proj.weight", p, i);
    GET(L->o_proj, "%s.%d.self_attn.o_proj.weight", p, i);
    L->is_moe = ds_layer_is_moe(c, i);
    if (!L->is_moe) {
      GET(L->gate_proj, "%s.%d.mlp.gate_proj.weight", p, i);
      GET(L->up_proj, "%s.%d.mlp.up_proj.weight", p, i);
      GET(L->down_proj, "%s.%d.mlp.down_proj.weight", p, i);
      continue;
    }
    const int E = c->n_routed_experts;
    GET(L->router, "%s.%d.mlp.gate.weight", p, i);
    GET(L->router_bias, "%s.%d.mlp.gate.e_score_correction_bias", p, i);
    L->exp_gate = calloc((size_t)E, sizeof *L->exp_gate);
    L->exp_up = calloc((size_t)E, sizeof *L->exp_up);
    L->exp_down = calloc((size_t)E, sizeof *L->exp_down);
    if (!L->exp_gate || !L->exp_up || !L->exp_down) return VERR("out of memory");
    for (int e = 0; e < E; e++) {
      GET(L->exp_gate[e], "%s.%d.mlp.experts.%d.gate_proj.weight", p, i, e);
      GET(L->exp_up[e], "%s.%d.mlp.experts.%d.up_proj.weight", p, i, e);
      GET(L->exp_down[e], "%s.%d.mlp.experts.%d.down_proj.weight", p, i, e);
    }
    if (c->n_shared_experts > 0) {
      GET(L->sh_gate, "%s.%d.mlp.shared_experts.gate_proj.weight", p, i);
      GET(L->sh_up, "%s.%d.mlp.shared_experts.up_proj.weight", p, i);
      GET(L->sh_down, "%s.%d.mlp.shared_experts.down_proj.weight", p, i);
    }
  }
#undef GET
  return V_OK;
}

/* ---- open / close ---- */

vstatus ds_model_synth(ds_model *m, const ds_config *cfg, const char *preset, uint64_t seed, bool materialize) {
  ds_tensor_spec *specs;
  int n;
  const ds_config c = *cfg; /* cfg may be m's own */
  memset(m, 0, sizeof *m);
  VTRY(ds_tensor_specs(&c, &specs, &n));
  vstatus s = ds_model_synth_specs(m, &c, preset, seed, specs, n, materialize);
  free(specs);
  return s;
}

vstatus ds_model_synth_specs(ds_model *m, const ds_config *cfg, const char *preset, uint64_t seed,
                             const ds_tensor_spec *specs, int n, bool materialize) {
  memset(m, 0, sizeof *m);
  m->cfg = *cfg;
  m->is_synthetic = true;
  m->seed = seed;
  snprintf(m->preset, sizeof m->preset, "%s", preset);
  snprintf(m->source, sizeof m->source, "synth:%s (seed %llu, %d layers)", preset, (unsigned long long)seed,
           m->cfg.num_hidden_layers);
  if (n < 1) return VERR("%s: no tensors to synthesize", m->source);
  m->synth = calloc((size_t)n, sizeof *m->synth);
  m->lazy = calloc((size_t)n, sizeof *m->lazy);
  if (!m->synth || !m->lazy) {
    ds_model_close(m);
    return VERR("out of memory");
  }
  m->n_synth = n;
  for (int i = 0; i < n; i++) {
    vtensor *t = &m->synth[i];
    snprintf(t->name, sizeof t->name, "%s", specs[i].name);
    t->dtype = specs[i].dtype;
    t->ndim = specs[i].ndim;
    t->shape[0] = specs[i].shape[0];
    t->shape[1] = specs[i].shape[1];
    const int64_t cols = specs[i].ndim > 1 ? specs[i].shape[1] : 1;
    m->lazy[i] = (ds_synth_slice){.spec = specs[i], .start = 0, .rows = specs[i].shape[0], .cols = cols, .stride = cols};
  }
  vstatus s = materialize ? ds_model_materialize(m) : V_OK;
  if (s == V_OK) s = bind_layers(m);
  if (s != V_OK) ds_model_close(m);
  return s;
}

static vstatus open_dir(ds_model *m, const char *path) {
  char dir[512], cfgpath[600];
  struct stat sb;
  if (stat(path, &sb) != 0) return VERR("%s: cannot open model: %s", path, strerror(errno));
  if (S_ISDIR(sb.st_mode)) {
    snprintf(dir, sizeof dir, "%s", path);
  } else {
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0; else snprintf(dir, sizeof dir, ".");
  }
  snprintf(cfgpath, sizeof cfgpath, "%s/config.json", dir);
  VTRY(ds_config_load(&m->cfg, cfgpath));
  snprintf(m->source, sizeof m->source, "%s", dir);
  VTRY(st_open(&m->st, dir));
  ds_tensor_spec *specs;
  int n;
  VTRY(ds_tensor_specs(&m->cfg, &specs, &n));
  vstatus s = check_tensors(m, specs, n);
  free(specs);
  VTRY(s);
  return bind_layers(m);
}

vstatus ds_model_open_dir(ds_model *m, const char *path) {
  memset(m, 0, sizeof *m);
  vstatus s = open_dir(m, path);
  if (s != V_OK) ds_model_close(m);
  return s;
}

void ds_model_close(ds_model *m) {
  if (m->layers) {
    for (int i = 0; i < m->cfg.num_hidden_layers; i++) {
      free(m->layers[i].exp_gate);
      free(m->layers[i].exp_up);
      free(m->layers[i].exp_down);
    }
    free(m->layers);
  }
  for (int i = 0; i < m->n_synth; i++)
    if (m->synth[i].owned) free(m->synth[i].data);
  free(m->synth);
  free(m->lazy);
  if (m->st.n_files) st_close(&m->st);
  memset(m, 0, sizeof *m);
}

/* ---- counts ---- */

void ds_model_count(const ds_model *m, ds_model_stats *s) {
  memset(s, 0, sizeof *s);
  ds_tensor_spec *specs;
  int n;
  if (ds_tensor_specs(&m->cfg, &specs, &n) != V_OK) return;
  for (int i = 0; i < n; i++) {
    const vtensor *t = lookup(m, specs[i].name);
    int64_t numel = spec_numel(&specs[i]);
    vdtype dt = t ? t->dtype : specs[i].dtype;
    s->params_total += numel;
    s->bytes_by_dtype[dt] += numel * (int64_t)vdtype_size(dt);
    s->bytes_total += numel * (int64_t)vdtype_size(dt);
    const char *nm = specs[i].name;
    if (strstr(nm, "embed_tokens")) s->params_embed += numel;
    else if (strstr(nm, "lm_head")) s->params_lm_head += numel;
    else if (strstr(nm, "self_attn.") && !strstr(nm, "layernorm")) s->params_attn += numel;
    else if (strstr(nm, ".experts.")) s->params_experts += numel;
    else if (strstr(nm, "shared_experts")) s->params_shared += numel;
    else if (strstr(nm, "mlp.gate.")) s->params_router += numel;
    else if (strstr(nm, "layernorm") || strstr(nm, "model.norm")) s->params_norm += numel;
    else s->params_dense_mlp += numel;
  }
  free(specs);
}

double ds_expected_experts(int E, int k, int tokens) {
  /* each token picks k distinct of E: P(expert untouched by one token) = 1 - k/E */
  if (E <= 0) return 0;
  return E * (1.0 - pow(1.0 - (double)k / E, tokens));
}

double ds_decode_bytes(const ds_config *c, int batch, int ctx, double experts_touched, bool latent_kv) {
  const double D = c->hidden_size, H = c->num_attention_heads, bf = 2.0;
  double attn = 0;
  if (c->q_lora_rank > 0) attn += (double)c->q_lora_rank * D + c->q_lora_rank + (double)H * c->qk_head_dim * c->q_lora_rank;
  else attn += H * c->qk_head_dim * D;
  attn += (double)(c->kv_lora_rank + c->qk_rope_head_dim) * D + c->kv_lora_rank;
  attn += H * (c->qk_nope_head_dim + c->v_head_dim) * (double)c->kv_lora_rank;
  attn += D * H * c->v_head_dim + 2 * D;
  double per_expert = 3.0 * D * c->moe_intermediate_size;
  if (experts_touched < 0) experts_touched = ds_expected_experts(c->n_routed_experts, c->num_experts_per_tok, batch);
  double bytes = 0;
  for (int l = 0; l < c->num_hidden_layers; l++) {
    bytes += attn * bf;
    if (ds_layer_is_moe(c, l)) {
      bytes += ((double)c->n_routed_experts * D + experts_touched * per_expert +
                per_expert * c->n_shared_experts) * bf + 4.0 * c->n_routed_experts;
    } else {
      bytes += 3.0 * D * c->intermediate_size * bf;
    }
    /* KV cache read for every sequence */
    double per_tok = latent_kv ? (c->kv_lora_rank + c->qk_rope_head_dim)
                               : H * (c->qk_head_dim + c->v_head_dim);
    bytes += (double)batch * ctx * per_tok * bf;
  }
  bytes += ((double)c->vocab_size * D + D) * bf; /* lm_head + final norm */
  bytes += (double)batch * D * bf;              /* embedding rows */
  return bytes;
}
