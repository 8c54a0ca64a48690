/* The tensor-parallel shard plan (see shard.h): the split of each tensor, the local config,
 * and building one rank's model from a full one (views, copies, or lazy slices to generate),
 * optionally expert-parallel (whole routed experts per rank). */
#include "model/shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

shard_split ds_shard_rule(const char *name) {
  if (strcmp(name, "lm_head.weight") == 0) return SHARD_VOCAB;
  /* attention: per-head projections (q_a_proj / kv_a_proj_with_mqa stay whole) */
  if (ends_with(name, ".self_attn.q_b_proj.weight") || ends_with(name, ".self_attn.q_proj.weight") ||
      ends_with(name, ".self_attn.kv_b_proj.weight"))
    return SHARD_ROWS;
  if (ends_with(name, ".self_attn.o_proj.weight")) return SHARD_COLS;
  /* dense MLP, routed experts, shared experts: split along their intermediate dimension */
  if (ends_with(name, ".gate_proj.weight") || ends_with(name, ".up_proj.weight")) return SHARD_ROWS;
  if (ends_with(name, ".down_proj.weight")) return SHARD_COLS;
  return SHARD_REPLICATE;
}

int ds_shard_expert_of(const char *name) {
  const char *p = strstr(name, ".mlp.experts.");
  if (!p) return -1;
  p += strlen(".mlp.experts.");
  char *end;
  long e = strtol(p, &end, 10);
  return end != p && *end == '.' && e >= 0 && e < (1L << 30) ? (int)e : -1;
}

shard_split ds_shard_rule_ep(const char *name, bool ep) {
  return ep && ds_shard_expert_of(name) >= 0 ? SHARD_REPLICATE : ds_shard_rule(name);
}

void ds_shard_experts(int n_experts, int size, int rank, int *e0, int *e1) {
  *e0 = (int)((int64_t)rank * n_experts / size);
  *e1 = (int)((int64_t)(rank + 1) * n_experts / size);
}

const char *ds_shard_split_name(shard_split s) {
  switch (s) {
    case SHARD_REPLICATE: return "replicate";
    case SHARD_ROWS: return "rows";
    case SHARD_COLS: return "cols";
    case SHARD_VOCAB: return "vocab";
  }
  return "?";
}

static bool has_dense(const ds_config *c) {
  for (int l = 0; l < c->num_hidden_layers; l++)
    if (!ds_layer_is_moe(c, l)) return true;
  return false;
}
static bool has_moe(const ds_config *c) {
  for (int l = 0; l < c->num_hidden_layers; l++)
    if (ds_layer_is_moe(c, l)) return true;
  return false;
}

vstatus ds_shard_check(const ds_config *c, int size) {
  if (size < 1 || size > SHARD_MAX_TP) return VERR("TP %d: the TP degree must be in 1..%d", size, SHARD_MAX_TP);
  if (c->num_attention_heads % size)
    return VERR("TP %d needs num_attention_heads (%d) divisible by %d", size, c->num_attention_heads, size);
  if (c->num_key_value_heads % size)
    return VERR("TP %d needs num_key_value_heads (%d) divisible by %d", size, c->num_key_value_heads, size);
  if (has_dense(c) && c->intermediate_size % size)
    return VERR("TP %d needs intermediate_size (%d) divisible by %d", size, c->intermediate_size, size);
  if (has_moe(c) && c->moe_intermediate_size % size)
    return VERR("TP %d needs moe_intermediate_size (%d) divisible by %d", size, c->moe_intermediate_size, size);
  if (c->vocab_size < size) return VERR("TP %d needs vocab_size (%d) >= %d", size, c->vocab_size, size);
  return V_OK;
}

vstatus ds_shard_check_ep(const ds_config *c, int size, bool ep) {
  VTRY(ds_shard_check(c, size));
  if (ep && has_moe(c) && c->n_routed_experts % size)
    return VERR("EP %d needs n_routed_experts (%d) divisible by %d (expert parallelism gives each rank "
                "n_routed_experts / %d whole experts)", size, c->n_routed_experts, size, size);
  return V_OK;
}

vstatus ds_shard_config_ep(const ds_config *full, int size, bool ep, ds_config *local) {
  VTRY(ds_shard_check_ep(full, size, ep));
  VTRY(ds_shard_config(full, size, local));
  if (ep) local->moe_intermediate_size = full->moe_intermediate_size; /* whole routed experts */
  return V_OK;
}

vstatus ds_shard_config(const ds_config *full, int size, ds_config *local) {
  VTRY(ds_shard_check(full, size));
  *local = *full;
  local->num_attention_heads /= size;
  local->num_key_value_heads /= size;
  if (has_dense(full)) local->intermediate_size /= size;
  if (has_moe(full)) local->moe_intermediate_size /= size;
  if (size > 1) local->tie_word_embeddings = false; /* each rank holds its own lm_head block */
  return V_OK;
}

void ds_shard_vocab(int vocab, int size, int rank, int *v0, int *v1) {
  const int b = ds_shard_vocab_block(vocab, size);
  int a = rank * b, e = a + b;
  if (a > vocab) a = vocab;
  if (e > vocab) e = vocab;
  *v0 = a;
  *v1 = e;
}

/* ---- building a rank's model ---- */

/* Places local tensor t (shape already local) as the rows [off, off + t->shape[0]) or, for
 * SHARD_COLS, the columns [off, off + t->shape[1]) of full tensor ft: a view or a copy of
 * ft's host data, or, when ft has none, no data and the rule *sl (the slice of ft's own
 * rule `frule`, NULL when ft has none) for generating it later. */
static vstatus place_tensor(vtensor *t, ds_synth_slice *sl, const vtensor *ft, const ds_synth_slice *frule,
                            shard_split sp, int64_t off) {
  const int64_t rows = t->shape[0], cols = t->ndim > 1 ? t->shape[1] : 1;
  const int64_t fcols = ft->ndim > 1 ? ft->shape[1] : 1;
  t->dtype = ft->dtype;
  if (frule) {
    *sl = *frule;
    sl->start += sp == SHARD_COLS ? off : off * frule->stride;
    sl->rows = rows;
    sl->cols = cols;
  } else {
    memset(sl, 0, sizeof *sl);
  }
  if (!ft->data) {
    if (!frule) return VERR("%s: tensor has no host data and no synthesis rule (open the full model with weights)",
                            t->name);
    t->data = NULL; /* lazy: generated from *sl where it is used (GPU) or by ds_model_materialize (host) */
    t->owned = false;
    return V_OK;
  }
  const size_t esz = vdtype_size(ft->dtype);
  if (sp != SHARD_COLS) { /* a contiguous block of rows (or everything): a view */
    t->data = (char *)ft->data + (size_t)(off * fcols) * esz;
    t->owned = false;
    return V_OK;
  }
  t->data = vmalloc((size_t)(rows * cols) * esz + 1, "shard column block");
  if (!t->data) return VERR("%s: out of memory for the column block [%lld, %lld)", t->name, (long long)off,
                            (long long)(off + cols));
  t->owned = true;
  for (int64_t i = 0; i < rows; i++)
    memcpy((char *)t->data + (size_t)(i * cols) * esz, (const char *)ft->data + (size_t)(i * fcols + off) * esz,
           (size_t)cols * esz);
  return V_OK;
}

/* The generation rule of full tensor ft (NULL when the full model has none for it). */
static const ds_synth_slice *full_rule(const ds_model *full, const vtensor *ft) {
  if (!full->is_synthetic || !full->lazy || ft < full->synth || ft >= full->synth + full->n_synth) return NULL;
  const ds_synth_slice *r = &full->lazy[ft - full->synth];
  return r->spec.name[0] ? r : NULL;
}

/* The full-model tensor named `name` (lm_head: the tied embedding when the full model ties). */
static const vtensor *full_tensor(const ds_model *full, const char *name) {
  if (strcmp(name, "lm_head.weight") == 0) return full->lm_head;
  if (full->is_synthetic) {
    for (int i = 0; i < full->n_synth; i++)
      if (strcmp(full->synth[i].name, name) == 0) return &full->synth[i];
    return NULL;
  }
  return st_find(&full->st, name);
}

/* The local tensor list of a shard with config lc: every tensor of lc, except under EP the routed
 * experts rank `rank` does not own (dropped) and the shared expert (cut to its 1/size block). */
static vstatus local_specs(const ds_config *lc, int rank, int size, bool ep, ds_tensor_spec **out, int *n) {
  VTRY(ds_tensor_specs(lc, out, n));
  if (!ep) return V_OK;
  int e0, e1, k = 0;
  ds_shard_experts(lc->n_routed_experts, size, rank, &e0, &e1);
  for (int i = 0; i < *n; i++) {
    ds_tensor_spec sp = (*out)[i];
    const int e = ds_shard_expert_of(sp.name);
    if (e >= 0 && (e < e0 || e >= e1)) continue; /* another rank's expert: absent here */
    if (strstr(sp.name, ".mlp.shared_experts.")) {
      if (ds_shard_rule(sp.name) == SHARD_COLS) sp.shape[1] /= size;
      else sp.shape[0] /= size;
    }
    (*out)[k++] = sp;
  }
  *n = k;
  return V_OK;
}

vstatus ds_shard_model(ds_model *local, const ds_model *full, int rank, int size) {
  return ds_shard_model_ep(local, full, rank, size, false);
}

vstatus ds_shard_model_ep(ds_model *local, const ds_model *full, int rank, int size, bool ep) {
  memset(local, 0, sizeof *local);
  if (!full || !full->layers) return VERR("shard: the full model is not open");
  if (full->tp_size > 1) return VERR("shard: %s is already a TP shard (rank %d of %d)", full->source, full->tp_rank,
                                     full->tp_size);
  if (rank < 0 || rank >= size) return VERR("shard: rank %d out of range [0, %d)", rank, size);
  ds_config lc;
  VTRY(ds_shard_config_ep(&full->cfg, size, ep, &lc));
  /* the local model's tensor table, names and local shapes, bound to layers, no data yet */
  ds_tensor_spec *specs;
  int n;
  VTRY(local_specs(&lc, rank, size, ep, &specs, &n));
  vstatus s = ds_model_synth_specs(local, &lc, full->preset[0] ? full->preset : "shard", full->seed, specs, n, false);
  free(specs);
  if (s != V_OK) return s;
  int v0, v1;
  ds_shard_vocab(lc.vocab_size, size, rank, &v0, &v1);
  for (int i = 0; i < local->n_synth && s == V_OK; i++) {
    vtensor *t = &local->synth[i];
    const vtensor *ft = full_tensor(full, t->name);
    if (!ft) {
      s = VERR("%s: tensor '%s' is missing (the shard plan needs it)", full->source, t->name);
      break;
    }
    shard_split sp = ds_shard_rule_ep(t->name, ep);
    const int64_t fr = ft->shape[0], fc = ft->ndim > 1 ? ft->shape[1] : 1;
    const int64_t lr = t->shape[0], lcn = t->ndim > 1 ? t->shape[1] : 1;
    int64_t off = 0;
    bool ok = ft->ndim == t->ndim;
    switch (sp) {
      case SHARD_REPLICATE: ok = ok && fr == lr && fc == lcn; break;
      case SHARD_ROWS: ok = ok && lr * size == fr && fc == lcn; off = rank * lr; break;
      case SHARD_COLS: ok = ok && lcn * size == fc && fr == lr; off = rank * lcn; break;
      case SHARD_VOCAB:
        ok = ok && fr == lc.vocab_size && fc == lcn;
        t->shape[0] = v1 - v0;
        off = v0;
        break;
    }
    if (!ok) {
      s = VERR("%s: tensor '%s': shape [%lld, %lld] does not split by the plan (%s, %s %d) into [%lld, %lld]",
               full->source, t->name, (long long)fr, (long long)fc, ds_shard_split_name(sp), ep ? "EP" : "TP", size,
               (long long)lr, (long long)lcn);
      break;
    }
    /* the rule is the full tensor's own (lm_head tied: the embedding's) */
    s = place_tensor(t, &local->lazy[i], ft, full_rule(full, ft), sp, off);
  }
  if (s != V_OK) {
    ds_model_close(local);
    return s;
  }
  local->is_synthetic = true; /* tensors live in local->synth (owned copies, views, or lazy: local->lazy) */
  local->seed = full->seed;
  local->tp_rank = rank;
  local->tp_size = size;
  local->vocab_begin = v0;
  local->vocab_end = v1;
  if (ep && has_moe(&lc)) ds_shard_experts(lc.n_routed_experts, size, rank, &local->expert_begin, &local->expert_end);
  snprintf(local->source, sizeof local->source, "%.560s [%s rank %d/%d]", full->source, ep ? "TP+EP" : "TP", rank,
           size);
  return V_OK;
}
