/* config.json of the DeepSeek-V3 family: parse (cJSON), validate, write. */
#include "model/config.h"

#include "common/atomic_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading helpers: each names the file and the field on failure ---- */

static vstatus get_int(const cJSON *o, const char *origin, const char *key, bool required, int def, int *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v || cJSON_IsNull(v)) {
    if (required) return VERR("%s: field '%s' is missing", origin, key);
    *out = def;
    return V_OK;
  }
  if (!cJSON_IsNumber(v)) return VERR("%s: field '%s' must be an integer", origin, key);
  double d = v->valuedouble;
  if (d != floor(d) || d < -2147483648.0 || d > 2147483647.0)
    return VERR("%s: field '%s' must be an integer (got %g)", origin, key, d);
  *out = (int)d;
  return V_OK;
}

static vstatus get_num(const cJSON *o, const char *origin, const char *key, bool required, double def, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v || cJSON_IsNull(v)) {
    if (required) return VERR("%s: field '%s' is missing", origin, key);
    *out = def;
    return V_OK;
  }
  if (!cJSON_IsNumber(v)) return VERR("%s: field '%s' must be a number", origin, key);
  if (!isfinite(v->valuedouble)) return VERR("%s: field '%s' must be a finite number", origin, key);
  *out = v->valuedouble;
  return V_OK;
}

static vstatus get_bool(const cJSON *o, const char *origin, const char *key, bool def, bool *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v || cJSON_IsNull(v)) { *out = def; return V_OK; }
  if (!cJSON_IsBool(v)) return VERR("%s: field '%s' must be true or false", origin, key);
  *out = cJSON_IsTrue(v);
  return V_OK;
}

static vstatus get_str(const cJSON *o, const char *origin, const char *key, const char *def, char *out, size_t n) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v || cJSON_IsNull(v)) {
    if (!def) return VERR("%s: field '%s' is missing", origin, key);
    snprintf(out, n, "%s", def);
    return V_OK;
  }
  if (!cJSON_IsString(v)) return VERR("%s: field '%s' must be a string", origin, key);
  if (strlen(v->valuestring) >= n) return VERR("%s: field '%s' is too long", origin, key);
  snprintf(out, n, "%s", v->valuestring);
  return V_OK;
}

/* Token ids may be an int or a list of ints (HF allows both); vouch keeps the first. */
static vstatus get_token_id(const cJSON *o, const char *origin, const char *key, int *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  *out = -1;
  if (!v || cJSON_IsNull(v)) return V_OK;
  if (cJSON_IsArray(v)) v = cJSON_GetArrayItem(v, 0);
  if (!v) return V_OK;
  double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
  if (!(d >= 0 && d <= 2147483647.0 && d == floor(d)))
    return VERR("%s: field '%s' must be a non-negative integer token id", origin, key);
  *out = (int)d;
  return V_OK;
}

static vstatus parse_rope_scaling(ds_config *c, const cJSON *root, const char *origin) {
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
  memset(&c->yarn, 0, sizeof c->yarn);
  if (!rs || cJSON_IsNull(rs)) return V_OK;
  if (!cJSON_IsObject(rs)) return VERR("%s: field 'rope_scaling' must be an object or null", origin);
  char type[32];
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
  VTRY(get_str(rs, origin, t ? "rope_type" : "type", "", type, sizeof type));
  if (strcmp(type, "yarn") != 0)
    return VERR("%s: field 'rope_scaling.rope_type' is '%s'; vouch supports 'yarn' (or no rope_scaling)", origin, type);
  c->yarn.enabled = true;
  VTRY(get_num(rs, origin, "factor", true, 0, &c->yarn.factor));
  VTRY(get_int(rs, origin, "original_max_position_embeddings", true, 0, &c->yarn.original_max_position_embeddings));
  VTRY(get_num(rs, origin, "beta_fast", false, 32, &c->yarn.beta_fast));
  VTRY(get_num(rs, origin, "beta_slow", false, 1, &c->yarn.beta_slow));
  VTRY(get_num(rs, origin, "mscale", false, 0, &c->yarn.mscale));
  VTRY(get_num(rs, origin, "mscale_all_dim", false, 0, &c->yarn.mscale_all_dim));
  VTRY(get_bool(rs, origin, "truncate", true, &c->yarn.truncate));
  if (cJSON_GetObjectItemCaseSensitive(rs, "attention_factor"))
    return VERR("%s: field 'rope_scaling.attention_factor' is not supported by vouch", origin);
  if (c->yarn.beta_fast == 0) c->yarn.beta_fast = 32; /* HF: `or 32` */
  if (c->yarn.beta_slow == 0) c->yarn.beta_slow = 1;
  return V_OK;
}

vstatus ds_config_parse(ds_config *c, const char *json, const char *origin) {
  memset(c, 0, sizeof *c);
  cJSON *root = cJSON_Parse(json);
  if (!root) {
    const char *at = cJSON_GetErrorPtr();
    long off = at ? (long)(at - json) : -1;
    return VERR("%s: not valid JSON (near byte %ld)", origin, off);
  }
  vstatus s = V_OK;
  if (!cJSON_IsObject(root)) { s = VERR("%s: top level must be a JSON object", origin); goto done; }

  const cJSON *arch = cJSON_GetObjectItemCaseSensitive(root, "architectures");
  if (!arch || !cJSON_IsArray(arch) || !cJSON_IsString(cJSON_GetArrayItem(arch, 0))) {
    s = VERR("%s: field 'architectures' must be a list naming DeepseekV3ForCausalLM", origin);
    goto done;
  }
  snprintf(c->architecture, sizeof c->architecture, "%s", cJSON_GetArrayItem(arch, 0)->valuestring);
  if (strcmp(c->architecture, "DeepseekV3ForCausalLM") != 0) {
    s = VERR("%s: field 'architectures' is '%s'; vouch supports DeepseekV3ForCausalLM", origin, c->architecture);
    goto done;
  }
  if ((s = get_str(root, origin, "model_type", NULL, c->model_type, sizeof c->model_type))) goto done;
  if (strcmp(c->model_type, "deepseek_v3") != 0 && strcmp(c->model_type, "kimi_k2") != 0) {
    s = VERR("%s: field 'model_type' is '%s'; vouch supports deepseek_v3 and kimi_k2", origin, c->model_type);
    goto done;
  }

#define REQ_INT(k) if ((s = get_int(root, origin, #k, true, 0, &c->k))) goto done
#define OPT_INT(k, d) if ((s = get_int(root, origin, #k, false, d, &c->k))) goto done
  REQ_INT(vocab_size);
  REQ_INT(hidden_size);
  REQ_INT(intermediate_size);
  REQ_INT(num_hidden_layers);
  REQ_INT(num_attention_heads);
  OPT_INT(num_key_value_heads, c->num_attention_heads);
  REQ_INT(kv_lora_rank);
  REQ_INT(qk_nope_head_dim);
  REQ_INT(qk_rope_head_dim);
  REQ_INT(v_head_dim);
  REQ_INT(max_position_embeddings);
  OPT_INT(moe_intermediate_size, 0);
  OPT_INT(n_shared_experts, 0);
  OPT_INT(n_routed_experts, 0);
  OPT_INT(num_experts_per_tok, 0);
  OPT_INT(n_group, 1);
  OPT_INT(topk_group, 1);
  OPT_INT(first_k_dense_replace, 0);
  OPT_INT(moe_layer_freq, 1);
  OPT_INT(q_lora_rank, 0); /* null -> 0: no q LoRA */
#undef REQ_INT
#undef OPT_INT
  if ((s = get_num(root, origin, "routed_scaling_factor", false, 1.0, &c->routed_scaling_factor))) goto done;
  if ((s = get_num(root, origin, "rope_theta", false, 10000.0, &c->rope_theta))) goto done;
  if ((s = get_num(root, origin, "rms_norm_eps", false, 1e-6, &c->rms_norm_eps))) goto done;
  if ((s = get_bool(root, origin, "norm_topk_prob", false, &c->norm_topk_prob))) goto done;
  if ((s = get_bool(root, origin, "rope_interleave", true, &c->rope_interleave))) goto done;
  if ((s = get_bool(root, origin, "tie_word_embeddings", false, &c->tie_word_embeddings))) goto done;
  if ((s = get_bool(root, origin, "attention_bias", false, &c->attention_bias))) goto done;
  if ((s = get_str(root, origin, "hidden_act", "silu", c->hidden_act, sizeof c->hidden_act))) goto done;
  if ((s = get_str(root, origin, "torch_dtype", "bfloat16", c->torch_dtype, sizeof c->torch_dtype))) goto done;
  if ((s = get_token_id(root, origin, "bos_token_id", &c->bos_token_id))) goto done;
  if ((s = get_token_id(root, origin, "eos_token_id", &c->eos_token_id))) goto done;
  /* transformers v5 may write rope_parameters {rope_theta, rope_type, ...} instead. */
  const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
  if (rp && cJSON_IsObject(rp) && !cJSON_GetObjectItemCaseSensitive(root, "rope_scaling")) {
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(rp, "rope_theta");
    if (th && cJSON_IsNumber(th)) c->rope_theta = th->valuedouble;
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rp, "rope_type");
    if (ty && cJSON_IsString(ty) && strcmp(ty->valuestring, "default") != 0) {
      cJSON *copy = cJSON_Duplicate(rp, 1);
      cJSON *wrap = cJSON_CreateObject();
      cJSON_AddItemToObject(wrap, "rope_scaling", copy);
      s = parse_rope_scaling(c, wrap, origin);
      cJSON_Delete(wrap);
      if (s) goto done;
    }
  } else if ((s = parse_rope_scaling(c, root, origin))) {
    goto done;
  }
  c->qk_head_dim = c->qk_nope_head_dim + c->qk_rope_head_dim;
  s = ds_config_validate(c, origin);
done:
  cJSON_Delete(root);
  return s;
}

vstatus ds_config_validate(const ds_config *c, const char *origin) {
#define POS(k) if (c->k <= 0) return VERR("%s: field '" #k "' must be > 0 (got %d)", origin, c->k)
  POS(vocab_size); POS(hidden_size); POS(num_hidden_layers); POS(num_attention_heads);
  POS(kv_lora_rank); POS(qk_nope_head_dim); POS(qk_rope_head_dim); POS(v_head_dim); POS(max_position_embeddings);
#undef POS
  if (c->q_lora_rank < 0) return VERR("%s: field 'q_lora_rank' must be null or > 0", origin);
  if (c->qk_rope_head_dim % 2) return VERR("%s: field 'qk_rope_head_dim' must be even (got %d)", origin, c->qk_rope_head_dim);
  if (c->qk_rope_head_dim > DS_MAX_ROPE_DIM)
    return VERR("%s: field 'qk_rope_head_dim' must be <= %d (got %d)", origin, DS_MAX_ROPE_DIM, c->qk_rope_head_dim);
  if (c->num_key_value_heads != c->num_attention_heads)
    return VERR("%s: field 'num_key_value_heads' (%d) must equal num_attention_heads (%d) for MLA", origin,
                c->num_key_value_heads, c->num_attention_heads);
  if (c->first_k_dense_replace < 0) return VERR("%s: field 'first_k_dense_replace' must be >= 0", origin);
  if (c->first_k_dense_replace > 0 && c->intermediate_size <= 0)
    return VERR("%s: field 'intermediate_size' must be > 0 when dense layers exist", origin);
  bool has_moe = c->n_routed_experts > 0 && c->first_k_dense_replace < c->num_hidden_layers;
  if (has_moe) {
    if (c->moe_intermediate_size <= 0) return VERR("%s: field 'moe_intermediate_size' must be > 0", origin);
    if (c->num_experts_per_tok <= 0 || c->num_experts_per_tok > c->n_routed_experts)
      return VERR("%s: field 'num_experts_per_tok' must be in 1..n_routed_experts (got %d)", origin, c->num_experts_per_tok);
    if (c->n_group <= 0 || c->n_routed_experts % c->n_group)
      return VERR("%s: field 'n_group' (%d) must divide n_routed_experts (%d)", origin, c->n_group, c->n_routed_experts);
    if (c->n_routed_experts / c->n_group < 2)
      return VERR("%s: field 'n_group': each group needs >= 2 experts (group score = sum of top-2)", origin);
    if (c->topk_group <= 0 || c->topk_group > c->n_group)
      return VERR("%s: field 'topk_group' must be in 1..n_group (got %d)", origin, c->topk_group);
    if (c->topk_group * (c->n_routed_experts / c->n_group) < c->num_experts_per_tok)
      return VERR("%s: field 'topk_group': %d groups hold fewer experts than num_experts_per_tok (%d)", origin,
                  c->topk_group, c->num_experts_per_tok);
    if (c->n_shared_experts < 0) return VERR("%s: field 'n_shared_experts' must be >= 0", origin);
  }
  if (c->attention_bias) return VERR("%s: field 'attention_bias' is true; vouch supports only bias-free projections", origin);
  if (strcmp(c->hidden_act, "silu") != 0) return VERR("%s: field 'hidden_act' is '%s'; vouch supports 'silu'", origin, c->hidden_act);
  if (c->rms_norm_eps <= 0) return VERR("%s: field 'rms_norm_eps' must be > 0", origin);
  if (c->rope_theta <= 1) return VERR("%s: field 'rope_theta' must be > 1", origin);
  if (c->yarn.enabled) {
    if (c->yarn.factor <= 0) return VERR("%s: field 'rope_scaling.factor' must be > 0", origin);
    if (c->yarn.original_max_position_embeddings <= 0)
      return VERR("%s: field 'rope_scaling.original_max_position_embeddings' must be > 0", origin);
  }
  return V_OK;
}

vstatus ds_config_load(ds_config *cfg, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return VERR("%s: cannot open: %s", path, strerror(errno));
  if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return VERR("%s: cannot seek", path); }
  long n = ftell(f);
  if (n < 0 || n > (64l << 20)) { fclose(f); return VERR("%s: unreasonable size (%ld bytes)", path, n); }
  rewind(f);
  char *buf = vmalloc((size_t)n + 1, "config.json");
  if (!buf) { fclose(f); return V_ERR; }
  size_t got = fread(buf, 1, (size_t)n, f);
  fclose(f);
  if (got != (size_t)n) { free(buf); return VERR("%s: short read", path); }
  buf[n] = 0;
  vstatus s = ds_config_parse(cfg, buf, path);
  free(buf);
  return s;
}

char *ds_config_to_json(const ds_config *c) {
  cJSON *o = cJSON_CreateObject();
  cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
  cJSON_AddItemToArray(arch, cJSON_CreateString("DeepseekV3ForCausalLM"));
  cJSON_AddStringToObject(o, "model_type", c->model_type[0] ? c->model_type : "deepseek_v3");
#define NUM(k) cJSON_AddNumberToObject(o, #k, c->k)
  NUM(vocab_size); NUM(hidden_size); NUM(intermediate_size); NUM(moe_intermediate_size);
  NUM(num_hidden_layers); NUM(num_attention_heads); NUM(num_key_value_heads);
  NUM(n_shared_experts); NUM(n_routed_experts); NUM(num_experts_per_tok); NUM(n_group); NUM(topk_group);
  NUM(routed_scaling_factor); NUM(first_k_dense_replace); NUM(moe_layer_freq);
  if (c->q_lora_rank > 0) NUM(q_lora_rank); else cJSON_AddNullToObject(o, "q_lora_rank");
  NUM(kv_lora_rank); NUM(qk_nope_head_dim); NUM(qk_rope_head_dim); NUM(v_head_dim);
  NUM(max_position_embeddings); NUM(rope_theta); NUM(rms_norm_eps);
#undef NUM
  cJSON_AddBoolToObject(o, "norm_topk_prob", c->norm_topk_prob);
  cJSON_AddBoolToObject(o, "rope_interleave", c->rope_interleave);
  cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_word_embeddings);
  cJSON_AddBoolToObject(o, "attention_bias", false);
  cJSON_AddNumberToObject(o, "attention_dropout", 0.0);
  cJSON_AddStringToObject(o, "hidden_act", "silu");
  cJSON_AddNumberToObject(o, "initializer_range", 0.02);
  cJSON_AddStringToObject(o, "torch_dtype", c->torch_dtype[0] ? c->torch_dtype : "bfloat16");
  cJSON_AddBoolToObject(o, "use_cache", true);
  if (c->bos_token_id >= 0) cJSON_AddNumberToObject(o, "bos_token_id", c->bos_token_id);
  if (c->eos_token_id >= 0) cJSON_AddNumberToObject(o, "eos_token_id", c->eos_token_id);
  if (c->yarn.enabled) {
    cJSON *rs = cJSON_AddObjectToObject(o, "rope_scaling");
    cJSON_AddStringToObject(rs, "type", "yarn");
    cJSON_AddStringToObject(rs, "rope_type", "yarn");
    cJSON_AddNumberToObject(rs, "factor", c->yarn.factor);
    cJSON_AddNumberToObject(rs, "original_max_position_embeddings", c->yarn.original_max_position_embeddings);
    cJSON_AddNumberToObject(rs, "beta_fast", c->yarn.beta_fast);
    cJSON_AddNumberToObject(rs, "beta_slow", c->yarn.beta_slow);
    if (c->yarn.mscale) cJSON_AddNumberToObject(rs, "mscale", c->yarn.mscale);
    if (c->yarn.mscale_all_dim) cJSON_AddNumberToObject(rs, "mscale_all_dim", c->yarn.mscale_all_dim);
  } else {
    cJSON_AddNullToObject(o, "rope_scaling");
  }
  char *txt = cJSON_Print(o);
  cJSON_Delete(o);
  return txt;
}

vstatus ds_config_write(const ds_config *c, const char *path) {
  char *txt = ds_config_to_json(c);
  if (!txt) return VERR("%s: cannot serialize config", path);
  vstatus s = vfile_write_text(path, txt, true, 0644);
  free(txt);
  return s;
}

/* ---- RoPE / YaRN, as HF's _compute_yarn_parameters and DeepseekV3Attention ---- */

double ds_yarn_get_mscale(double scale, double mscale) {
  if (scale <= 1) return 1.0;
  return 0.1 * mscale * log(scale) + 1.0;
}

double ds_attention_scale(const ds_config *c) {
  double s = 1.0 / sqrt((double)c->qk_head_dim);
  if (c->yarn.enabled && c->yarn.mscale_all_dim != 0) {
    double m = ds_yarn_get_mscale(c->yarn.factor, c->yarn.mscale_all_dim);
    s = s * m * m;
  }
  return s;
}

static double correction_dim(double rotations, int dim, double base, double max_pos) {
  return (dim * log(max_pos / (rotations * 2 * M_PI))) / (2 * log(base));
}

/* HF computes base ** (arange(0, dim, 2).float() / dim) in float32: element i. */
static float pos_freq(float base, int i, int dim) { return powf(base, (float)(2 * i) / (float)dim); }

double ds_rope_inv_freq(const ds_config *c, float *inv_freq) {
  const int dim = c->qk_rope_head_dim, half = dim / 2;
  const float base = (float)c->rope_theta;
  if (!c->yarn.enabled) {
    for (int i = 0; i < half; i++) inv_freq[i] = 1.0f / pos_freq(base, i, dim);
    return 1.0;
  }
  const double factor = c->yarn.factor;
  double attn;
  if (c->yarn.mscale != 0 && c->yarn.mscale_all_dim != 0)
    attn = ds_yarn_get_mscale(factor, c->yarn.mscale) / ds_yarn_get_mscale(factor, c->yarn.mscale_all_dim);
  else
    attn = ds_yarn_get_mscale(factor, 1.0);
  double low = correction_dim(c->yarn.beta_fast, dim, c->rope_theta, c->yarn.original_max_position_embeddings);
  double high = correction_dim(c->yarn.beta_slow, dim, c->rope_theta, c->yarn.original_max_position_embeddings);
  if (c->yarn.truncate) { low = floor(low); high = ceil(high); }
  if (low < 0) low = 0;
  if (high > dim - 1) high = dim - 1;
  if (low == high) high += 0.001;
  const float flow = (float)low, fspan = (float)(high - low), ffac = (float)factor;
  for (int i = 0; i < half; i++) {
    float ramp = ((float)i - flow) / fspan;
    ramp = ramp < 0 ? 0 : (ramp > 1 ? 1 : ramp);
    float extra_factor = 1.0f - ramp;
    const float pf = pos_freq(base, i, dim);
    float interp = 1.0f / (ffac * pf);
    float extra = 1.0f / pf;
    inv_freq[i] = interp * (1.0f - extra_factor) + extra * extra_factor;
  }
  return attn;
}

vstatus ds_config_override(ds_config *cfg, const char *kv) {
  const char *eq = strchr(kv, '=');
  if (!eq || eq == kv) return VERR("--set '%s': expected key=value", kv);
  char key[128];
  snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
  cJSON *val = cJSON_Parse(eq + 1);
  if (!val) val = cJSON_CreateString(eq + 1); /* bare words are strings */
  char *txt = ds_config_to_json(cfg);
  cJSON *root = cJSON_Parse(txt);
  free(txt);
  cJSON *obj = root;
  char *save = NULL, *part = strtok_r(key, ".", &save), *next;
  while ((next = strtok_r(NULL, ".", &save))) {
    cJSON *child = cJSON_GetObjectItemCaseSensitive(obj, part);
    if (!child || !cJSON_IsObject(child)) {
      cJSON_Delete(val);
      cJSON_Delete(root);
      return VERR("--set '%s': '%s' is not an object in the config", kv, part);
    }
    obj = child;
    part = next;
  }
  if (cJSON_GetObjectItemCaseSensitive(obj, part)) cJSON_ReplaceItemInObjectCaseSensitive(obj, part, val);
  else cJSON_AddItemToObject(obj, part, val);
  txt = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  ds_config out;
  vstatus s = ds_config_parse(&out, txt, "--set");
  free(txt);
  if (s == V_OK) *cfg = out;
  return s;
}
