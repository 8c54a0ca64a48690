/* vouch model synth | info */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "model/construct.h"
#include "model/model.h"
#include "suites/engine/cli.h"
#include "runner/cli/cmd_llamacpp.h"
#include "runner/cli/cmd_model.h"

static const char SYNTH_USAGE[] =
    "usage: vouch model synth --preset NAME --out DIR [--layers N] [--seed S] [--shard-size SIZE]\n"
    "                         [--set KEY=JSON ...]\n"
    "  Writes config.json and safetensors (bf16; sharded with model.safetensors.index.json\n"
    "  above --shard-size, default 4096m) for a synthetic DeepSeek-V3-family checkpoint.\n"
    "  Weights come from a counter-based RNG keyed by (seed, tensor name, element index).\n"
    "  --set edits the preset's config.json before synthesis, e.g. --set q_lora_rank=null\n"
    "  --set rope_scaling.factor=8 (nested keys with dots).\n"
    "  presets: tiny small k2-slice k2-lite; constructed (the model provably solves a task, docs/evals.md):\n"
    "  recall-mrcr recall-chain\n";

typedef struct {
  const ds_tensor_spec *specs;
  uint64_t seed;
} synth_ctx;

static vstatus fill_tensor(void *ctx, int i, const vtensor *t, void *buf) {
  const synth_ctx *sc = ctx;
  const ds_tensor_spec *spec = &sc->specs[i];
  const int64_t numel = vtensor_numel(t), chunk = 1 << 16;
  const size_t esz = vdtype_size(t->dtype);
#pragma omp parallel for schedule(dynamic, 1) if (numel > 4 * chunk)
  for (int64_t c0 = 0; c0 < numel; c0 += chunk) {
    int64_t len = numel - c0 < chunk ? numel - c0 : chunk;
    ds_synth_fill((char *)buf + (size_t)c0 * esz, spec, sc->seed, c0, len);
  }
  return V_OK;
}

static int model_synth(int argc, char **argv) {
  const char *preset = NULL, *out = NULL, *v, *sets[32];
  int n_sets = 0;
  long layers = 0, shard_mb = 4096;
  uint64_t seed = 0;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { fputs(SYNTH_USAGE, stdout); return EXIT_OK; }
    if (cli_opt(argc, argv, &i, "--preset", &v, &err)) { if (v) preset = v; }
    else if (cli_opt(argc, argv, &i, "--out", &v, &err)) { if (v) out = v; }
    else if (cli_opt(argc, argv, &i, "--layers", &v, &err)) { if (v) err = cli_int("--layers", v, 1, 1000, &layers); }
    else if (cli_opt(argc, argv, &i, "--seed", &v, &err)) { if (v) err = cli_u64("--seed", v, &seed); }
    else if (cli_opt(argc, argv, &i, "--set", &v, &err)) {
      if (v && n_sets < 32) sets[n_sets++] = v;
      else if (v) err = VERR("too many --set options (max 32)");
    } else if (cli_opt(argc, argv, &i, "--shard-size", &v, &err)) {
      long bytes;
      if (v && !(err = cli_size("--shard-size", v, &bytes))) shard_mb = bytes / (1024 * 1024);
      if (!err && shard_mb < 1) err = VERR("option --shard-size: at least 1m");
    } else err = VERR("unknown option '%s' (see vouch model synth --help)", argv[i]);
    if (err) { cli_print_error("model synth"); return EXIT_USAGE; }
  }
  if (!preset || !out) { fputs(SYNTH_USAGE, stderr); return EXIT_USAGE; }
  if (construct_is_preset(preset)) { /* weights constructed to solve a task (docs/evals.md) */
    if (n_sets || layers) fprintf(stderr, "vouch model synth: --set and --layers do not apply to %s\n", preset);
    if (cli_mkdirs(out) || construct_write(out, preset, NULL, seed)) { cli_print_error("model synth"); return EXIT_CHECK_FAILED; }
    printf("wrote %s (constructed %s, seed %llu)\n", out, preset, (unsigned long long)seed);
    return EXIT_OK;
  }
  ds_config cfg;
  if (ds_preset_config(preset, (int)layers, &cfg)) { cli_print_error("model synth"); return EXIT_USAGE; }
  for (int i = 0; i < n_sets; i++)
    if (ds_config_override(&cfg, sets[i])) { cli_print_error("model synth"); return EXIT_USAGE; }
  if (cli_mkdirs(out)) { cli_print_error("model synth"); return EXIT_USAGE; }
  ds_tensor_spec *specs;
  int n;
  if (ds_tensor_specs(&cfg, &specs, &n)) { cli_print_error("model synth"); return EXIT_CHECK_FAILED; }
  vtensor *ts = calloc((size_t)n, sizeof *ts);
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    snprintf(ts[i].name, sizeof ts[i].name, "%s", specs[i].name);
    ts[i].dtype = specs[i].dtype;
    ts[i].ndim = specs[i].ndim;
    ts[i].shape[0] = specs[i].shape[0];
    ts[i].shape[1] = specs[i].shape[1];
    total += (int64_t)vtensor_nbytes(&ts[i]);
  }
  double t0 = vclock_now();
  synth_ctx sc = {specs, seed};
  char cfgpath[1024];
  snprintf(cfgpath, sizeof cfgpath, "%s/config.json", out);
  vstatus s = st_write(out, ts, n, (size_t)shard_mb * 1024 * 1024, fill_tensor, &sc);
  if (!s) s = ds_config_write(&cfg, cfgpath);
  free(ts);
  free(specs);
  if (s) { cli_print_error("model synth"); return EXIT_CHECK_FAILED; }
  printf("wrote %s: preset %s, seed %llu, %d layers, %d tensors, %.3f GB in %.1f s\n", out, preset,
         (unsigned long long)seed, cfg.num_hidden_layers, n, total / 1e9, vclock_now() - t0);
  return EXIT_OK;
}

static const char INFO_USAGE[] =
    "usage: vouch model info MODEL [--json] [--seed S] [--layers N]\n"
    "  MODEL is a checkpoint directory or synth:PRESET. Prints the architecture, parameter\n"
    "  counts, bytes per dtype and the bytes one decode step must read (the roofline numerator).\n";

static int model_info(int argc, char **argv) {
  const char *spec = NULL, *v;
  bool json = false;
  long layers = 0;
  uint64_t seed = 0;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { fputs(INFO_USAGE, stdout); return EXIT_OK; }
    if (!strcmp(argv[i], "--json")) json = true;
    else if (cli_opt(argc, argv, &i, "--layers", &v, &err)) { if (v) err = cli_int("--layers", v, 1, 1000, &layers); }
    else if (cli_opt(argc, argv, &i, "--seed", &v, &err)) { if (v) err = cli_u64("--seed", v, &seed); }
    else if (argv[i][0] == '-') err = VERR("unknown option '%s' (see vouch model info --help)", argv[i]);
    else if (!spec) spec = argv[i];
    else err = VERR("unexpected argument '%s'", argv[i]);
    if (err) { cli_print_error("model info"); return EXIT_USAGE; }
  }
  if (!spec) { fputs(INFO_USAGE, stderr); return EXIT_USAGE; }
  ds_model m;
  if (ds_model_open(&m, spec, seed, (int)layers, false)) { cli_print_error("model info"); return EXIT_CHECK_FAILED; }
  const ds_config *c = &m.cfg;
  ds_model_stats st;
  ds_model_count(&m, &st);
  const int ctxs[] = {0, 1024, 32768};
  double b1[3], b64[3], b1e[3];
  for (int k = 0; k < 3; k++) {
    b1[k] = ds_decode_bytes(c, 1, ctxs[k], -1, true);
    b64[k] = ds_decode_bytes(c, 64, ctxs[k], -1, true);
    b1e[k] = ds_decode_bytes(c, 1, ctxs[k], -1, false);
  }
  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "source", m.source);
    char *cj = ds_config_to_json(c);
    cJSON_AddItemToObject(o, "config", cJSON_Parse(cj));
    free(cj);
    cJSON *p = cJSON_AddObjectToObject(o, "params");
    cJSON_AddNumberToObject(p, "total", (double)st.params_total);
    cJSON_AddNumberToObject(p, "embed", (double)st.params_embed);
    cJSON_AddNumberToObject(p, "attention", (double)st.params_attn);
    cJSON_AddNumberToObject(p, "dense_mlp", (double)st.params_dense_mlp);
    cJSON_AddNumberToObject(p, "routed_experts", (double)st.params_experts);
    cJSON_AddNumberToObject(p, "shared_experts", (double)st.params_shared);
    cJSON_AddNumberToObject(p, "router", (double)st.params_router);
    cJSON_AddNumberToObject(p, "norms", (double)st.params_norm);
    cJSON_AddNumberToObject(p, "lm_head", (double)st.params_lm_head);
    cJSON *b = cJSON_AddObjectToObject(o, "bytes_by_dtype");
    for (int d = 0; d < 6; d++)
      if (st.bytes_by_dtype[d]) cJSON_AddNumberToObject(b, vdtype_name((vdtype)d), (double)st.bytes_by_dtype[d]);
    cJSON *r = cJSON_AddObjectToObject(o, "decode_step_bytes");
    cJSON_AddNumberToObject(r, "batch1_ctx0", b1[0]);
    cJSON_AddNumberToObject(r, "batch1_ctx1024_latent", b1[1]);
    cJSON_AddNumberToObject(r, "batch1_ctx1024_expanded", b1e[1]);
    cJSON_AddNumberToObject(r, "batch64_ctx1024_latent", b64[1]);
    char *txt = cJSON_Print(o);
    puts(txt);
    free(txt);
    cJSON_Delete(o);
  } else {
    printf("model       %s\n", m.source);
    printf("arch        %s (%s), %d layers (%d dense, %d MoE)\n", c->architecture, c->model_type, c->num_hidden_layers,
           c->first_k_dense_replace < c->num_hidden_layers ? c->first_k_dense_replace : c->num_hidden_layers,
           c->num_hidden_layers - (c->first_k_dense_replace < c->num_hidden_layers ? c->first_k_dense_replace : c->num_hidden_layers));
    printf("dims        hidden %d, vocab %d, heads %d, q_lora %d, kv_lora %d, nope %d, rope %d, v %d\n", c->hidden_size,
           c->vocab_size, c->num_attention_heads, c->q_lora_rank, c->kv_lora_rank, c->qk_nope_head_dim,
           c->qk_rope_head_dim, c->v_head_dim);
    printf("moe         %d experts top-%d, %d groups keep %d, %d shared, expert width %d, dense width %d, scale %.3f%s\n",
           c->n_routed_experts, c->num_experts_per_tok, c->n_group, c->topk_group, c->n_shared_experts,
           c->moe_intermediate_size, c->intermediate_size, c->routed_scaling_factor, c->norm_topk_prob ? ", normalized" : "");
    printf("rope        theta %g, interleave %s", c->rope_theta, c->rope_interleave ? "yes" : "no");
    if (c->yarn.enabled)
      printf(", YaRN factor %g from %d (beta %g/%g, mscale %g/%g)", c->yarn.factor,
             c->yarn.original_max_position_embeddings, c->yarn.beta_fast, c->yarn.beta_slow, c->yarn.mscale,
             c->yarn.mscale_all_dim);
    printf(", max positions %d\n", c->max_position_embeddings);
    printf("params      %.4f B total: embed %.4f, attention %.4f, dense MLP %.4f, routed experts %.4f, shared %.4f, "
           "router %.6f, norms %.6f, lm_head %.4f\n",
           st.params_total / 1e9, st.params_embed / 1e9, st.params_attn / 1e9, st.params_dense_mlp / 1e9,
           st.params_experts / 1e9, st.params_shared / 1e9, st.params_router / 1e9, st.params_norm / 1e9,
           st.params_lm_head / 1e9);
    printf("bytes       ");
    for (int d = 0; d < 6; d++)
      if (st.bytes_by_dtype[d]) printf("%s %.4f GB  ", vdtype_name((vdtype)d), st.bytes_by_dtype[d] / 1e9);
    printf("(total %.4f GB)\n", st.bytes_total / 1e9);
    printf("decode step bytes read (bf16 weights, experts touched by uniform routing, latent KV 2 B/elem):\n");
    for (int k = 0; k < 3; k++)
      printf("  ctx %-6d batch 1: %9.2f MB (expanded KV: %9.2f MB)   batch 64: %9.2f MB\n", ctxs[k], b1[k] / 1e6,
             b1e[k] / 1e6, b64[k] / 1e6);
  }
  ds_model_close(&m);
  return EXIT_OK;
}

int cmd_model(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs("usage: vouch model synth|info|export|peer-diverge ...   (vouch model synth --help)\n", argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : EXIT_OK;
  }
  if (!strcmp(argv[1], "synth")) return model_synth(argc - 1, argv + 1);
  if (!strcmp(argv[1], "info")) return model_info(argc - 1, argv + 1);
  if (!strcmp(argv[1], "export")) return cmd_model_export(argc - 1, argv + 1);
  if (!strcmp(argv[1], "peer-diverge")) return cmd_model_peer_diverge(argc - 1, argv + 1);
  VERR("unknown subcommand 'model %s' (synth, info, export, peer-diverge)", argv[1]);
  cli_print_error(NULL);
  return EXIT_USAGE;
}
