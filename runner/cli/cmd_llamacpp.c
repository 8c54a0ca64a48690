/* vouch model export --gguf | model peer-diverge: llama.cpp as an independent engine
 * (docs/llama-cpp.md). The export writes a deepseek2 GGUF (model/gguf.h); peer-diverge scores a
 * peer's teacher-forced logits (scripts/peers/llamacpp/peer.mjs logits) against cpu-ref. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/clock.h"
#include "model/gguf.h"
#include "model/model.h"
#include "suites/engine/cli.h"
#include "runner/cli/cmd_llamacpp.h"
#include "suites/engine/record.h"
#include "suites/diverge/diverge.h"
#include "suites/paths/paths.h"
#include "suites/paths/spec.h"

static const char EXPORT_USAGE[] =
    "usage: vouch model export --gguf DIR|synth:PRESET -o FILE.gguf [--dtype f32|bf16|q8_0|q4_0]\n"
    "                          [--tokenizer DIR] [--seed S] [--layers N]\n"
    "  Writes the checkpoint as a llama.cpp GGUF (architecture deepseek2): every metadata key\n"
    "  llama.cpp reads for it and the split attn_k_b / attn_v_b tensors of its converter.\n"
    "  Matrices in --dtype (default bf16; q8_0 / q4_0: llama.cpp's 32-weight blocks, output.weight\n"
    "  Q8_0, rows not a multiple of 32 in f16), norms, the router and its bias in f32.\n"
    "  --tokenizer DIR (tokenizer.json + tokenizer_config.json, e.g. DeepSeek-V3's): llama.cpp's BPE\n"
    "  vocabulary and the chat template instead of the id-only one; the tokenizer's ids must fit\n"
    "  the model's vocab_size (the rest become unused [PAD] tokens). docs/llama-cpp.md\n";

int cmd_model_export(int argc, char **argv) {
  const char *spec = NULL, *out = NULL, *dt = "bf16", *tokdir = NULL, *v;
  long layers = 0;
  uint64_t seed = 0;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { fputs(EXPORT_USAGE, stdout); return EXIT_OK; }
    if (cli_opt(argc, argv, &i, "--gguf", &v, &err)) { if (v) spec = v; }
    else if (cli_opt(argc, argv, &i, "-o", &v, &err)) { if (v) out = v; }
    else if (cli_opt(argc, argv, &i, "--dtype", &v, &err)) { if (v) dt = v; }
    else if (cli_opt(argc, argv, &i, "--tokenizer", &v, &err)) { if (v) tokdir = v; }
    else if (cli_opt(argc, argv, &i, "--layers", &v, &err)) { if (v) err = cli_int("--layers", v, 1, 1000, &layers); }
    else if (cli_opt(argc, argv, &i, "--seed", &v, &err)) { if (v) err = cli_u64("--seed", v, &seed); }
    else err = VERR("unknown option '%s' (see vouch model export --help)", argv[i]);
    if (err) { cli_print_error("model export"); return EXIT_USAGE; }
  }
  if (!spec || !out) { fputs(EXPORT_USAGE, stderr); return EXIT_USAGE; }
  gguf_opts go = {0};
  if (gguf_wtype_parse(dt, &go.wtype)) {
    verr_prefix("option --dtype");
    cli_print_error("model export");
    return EXIT_USAGE;
  }
  ds_model m;
  if (ds_model_open(&m, spec, seed, (int)layers, true)) { cli_print_error("model export"); return EXIT_CHECK_FAILED; }
  double t0 = vclock_now();
  gguf_vocab voc;
  vstatus s = tokdir ? gguf_vocab_load(tokdir, m.cfg.vocab_size, &voc) : V_OK;
  if (tokdir && !s) go.vocab = &voc;
  if (!s) s = gguf_export(&m, out, &go);
  if (!s) printf("wrote %s: %s as deepseek2 GGUF (%s%s), %d layers, in %.1f s\n", out, m.source, dt,
                 tokdir ? ", with its tokenizer" : "", m.cfg.num_hidden_layers, vclock_now() - t0);
  if (go.vocab) gguf_vocab_free(&voc);
  ds_model_close(&m);
  if (s) { cli_print_error("model export"); return EXIT_CHECK_FAILED; }
  return EXIT_OK;
}

static const char PEER_USAGE[] =
    "usage: vouch model peer-diverge --model DIR|synth:PRESET --peer PREFIX [--json FILE] [--max-kld K]\n"
    "                                [--min-same-top PCT] [--seed S] [--layers N] [--threads N]\n"
    "  Reads a peer's teacher-forced logits (PREFIX.json: tokens, shape, engine; PREFIX.f32: float32\n"
    "  [tokens, vocab], e.g. from scripts/peers/llamacpp/peer.mjs logits), runs cpu-ref on the same\n"
    "  tokens and prints the divergence of the peer against it on the n-1 next-token rows (the row\n"
    "  after token i predicts token i+1), as vouch diverge does: mean KLD +/- se,\n"
    "  percentiles, same-top %, RMS dp, max |dlogit|. Passes when mean KLD <= --max-kld (default\n"
    "  0.01 nats), same-top >= --min-same-top (default 90) and every logit is finite.\n";

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *b = NULL;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)n + 1)) &&
      fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  if (b) b[n] = 0;
  if (len) *len = (size_t)n;
  return b;
}

/* The peer's PREFIX.json: tokens [n] and its engine line; checks the shape against the model. */
static vstatus read_peer_meta(const char *file, int vocab, int32_t **tok, int *n, char *engine, size_t elen) {
  char *txt = slurp(file, NULL);
  if (!txt) return VERR("%s: cannot read the peer's metadata", file);
  cJSON *j = cJSON_Parse(txt);
  free(txt);
  if (!j) return VERR("%s: not valid JSON", file);
  vstatus s = V_OK;
  const cJSON *t = cJSON_GetObjectItem(j, "tokens"), *sh = cJSON_GetObjectItem(j, "shape"),
              *e = cJSON_GetObjectItem(j, "engine");
  int nt = cJSON_IsArray(t) ? cJSON_GetArraySize(t) : 0;
  if (nt < 2) s = VERR("%s: field 'tokens': an array of at least 2 token ids is required", file);
  else if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) != 2 || cJSON_GetArrayItem(sh, 0)->valuedouble != nt ||
           cJSON_GetArrayItem(sh, 1)->valuedouble != vocab)
    s = VERR("%s: field 'shape': expected [%d, %d] (tokens, the model's vocab_size)", file, nt, vocab);
  snprintf(engine, elen, "%s", cJSON_IsString(e) ? e->valuestring : "peer");
  *tok = s ? NULL : malloc((size_t)nt * sizeof **tok);
  if (!s && !*tok) s = VERR("out of memory");
  for (int i = 0; !s && i < nt; i++) {
    const cJSON *x = cJSON_GetArrayItem(t, i);
    if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble >= vocab || x->valuedouble != (int)x->valuedouble)
      s = VERR("%s: field 'tokens[%d]': a token id in [0, %d) is required", file, i, vocab);
    else (*tok)[i] = (int32_t)x->valuedouble;
  }
  if (s) { free(*tok); *tok = NULL; }
  *n = nt;
  cJSON_Delete(j);
  return s;
}

/* cpu-ref's logits [n, V] for tokens [n] from position 0 (one prefill step, every row). */
static vstatus ref_logits(const ds_model *m, const int32_t *tok, int n, int threads, float *out) {
  vpath p;
  vpath_opts po = {.max_seq = 1, .max_ctx = n, .n_threads = threads};
  vpath_spec ref;
  VTRY(vpath_spec_parse("cpu-ref", NULL, &ref));
  VTRY(vpath_open(&p, &ref, m, &po));
  int seq = 0, pos = 0;
  vstep st = {.n_seq = 1, .seq = &seq, .n_tokens = &n, .start_pos = &pos, .tokens = tok, .all_logits = true};
  vstatus s = p.ops->forward(p.state, &st, out);
  vpath_close(&p);
  return s;
}

static vstatus peer_diverge(const char *model, const char *prefix, const char *json, double max_kld, double min_same,
                            uint64_t seed, int layers, int threads, bool *pass) {
  ds_model m;
  VTRY(ds_model_open(&m, model, seed, layers, true));
  const int V = m.cfg.vocab_size;
  char meta[1024], bin[1024], engine[120];
  snprintf(meta, sizeof meta, "%s.json", prefix);
  snprintf(bin, sizeof bin, "%s.f32", prefix);
  int32_t *tok = NULL;
  int n = 0;
  float *ref = NULL, *peer = NULL;
  double *scratch = NULL;
  diverge_result r = {0};
  vrecord *rec = NULL;
  size_t len = 0;
  vstatus s = read_peer_meta(meta, V, &tok, &n, engine, sizeof engine);
  if (!s && n > m.cfg.max_position_embeddings)
    s = VERR("%s: %d tokens exceed the model's max_position_embeddings %d", meta, n, m.cfg.max_position_embeddings);
  if (!s && !(peer = (float *)slurp(bin, &len))) s = VERR("%s: cannot read the peer's logits", bin);
  if (!s && len != (size_t)n * V * sizeof(float))
    s = VERR("%s: %zu bytes, expected %d x %d float32 (the shape in %s)", bin, len, n, V, meta);
  if (!s) {
    ref = malloc((size_t)n * V * sizeof *ref);
    scratch = malloc((size_t)2 * V * sizeof *scratch);
    r.kld = calloc((size_t)n, sizeof *r.kld);
    r.dp = calloc((size_t)n, sizeof *r.dp);
    r.margin = calloc((size_t)n, sizeof *r.margin);
    r.top_err = calloc((size_t)n, sizeof *r.top_err);
    r.same = calloc((size_t)n, 1);
    if (!ref || !scratch || !r.kld || !r.dp || !r.margin || !r.top_err || !r.same)
      s = VERR("out of memory for %d x %d logits", n, V);
  }
  if (!s) s = ref_logits(&m, tok, n, threads, ref);
  if (!s) {
    /* row i: the next-token distribution after tokens [0, i], the stream's next token tok[i+1] */
    snprintf(r.path, sizeof r.path, "%s", engine);
    r.rows = n - 1;
    for (int i = 0; i < n - 1; i++)
      diverge_row(&r, (size_t)i, ref + (size_t)i * V, peer + (size_t)i * V, V, tok[i + 1], scratch);
    s = diverge_summarize(&r);
  }
  if (!s) {
    const bool finite = r.nonfinite == 0 && r.ref_nonfinite == 0;
    *pass = finite && r.kld_mean <= max_kld && r.same_top_pct >= min_same;
    printf("peer-diverge: model %s, reference cpu-ref, peer %s, %d teacher-forced next-token rows\n", m.source, engine,
           r.rows);
    printf("%-22s %20s %10s %10s %10s %8s %9s %10s %6s %7s\n", "path", "mean KLD +/- se", "p99.9", "p99", "median",
           "same%", "RMS dp", "max|dl|", "nan", "status");
    printf("%-22s %10.3g +/- %-7.2g %10.3g %10.3g %10.3g %8.2f %9.3g %10.3g %6ld %7s\n", engine, r.kld_mean, r.kld_se,
           r.kld_p999, r.kld_p99, r.kld_median, r.same_top_pct, r.rms_dp, r.max_dlogit, r.nonfinite,
           *pass ? "pass" : "FAIL");
    char id[64];
    snprintf(id, sizeof id, "b1_c0_t%d_vs_cpu-ref", n);
    rec = json ? rec_new("diverge", id, engine) : NULL;
    if (json && !rec) s = VERR("out of memory");
  }
  if (rec) {
    rec_param_str(rec, "model", m.source);
    rec_param_str(rec, "reference", "cpu-ref");
    rec_param_str(rec, "peer_logits", bin);
    rec_param_int(rec, "tokens", n);
    int nk = 0; /* rows with non-finite logits carry NaN: left out, and counted in nonfinite_logits */
    for (int i = 0; i < r.rows; i++)
      if (!isnan(r.kld[i])) r.kld[nk++] = r.kld[i];
    rec_metric_samples(rec, "kld", "nats", RD_MEAN, RB_LOWER, r.kld, nk, 0);
    rec_metric_value(rec, "kld_se", "nats", RB_LOWER, r.kld_se);
    rec_metric_value(rec, "kld_p99", "nats", RB_LOWER, r.kld_p99);
    rec_metric_value(rec, "kld_median", "nats", RB_LOWER, r.kld_median);
    rec_metric_value(rec, "same_top_pct", "%", RB_HIGHER, r.same_top_pct);
    rec_metric_value(rec, "rms_dp", "", RB_LOWER, r.rms_dp);
    rec_metric_value(rec, "max_dlogit", "", RB_LOWER, isfinite(r.max_dlogit) ? r.max_dlogit : 1e300);
    rec_metric_value(rec, "nonfinite_logits", "", RB_LOWER, (double)r.nonfinite);
    rec_set_threshold(rec, "kld", "<=", max_kld);
    rec_check_add(rec, "same_top_pct >= bound", r.same_top_pct >= min_same);
    rec_check_add(rec, "finite logits", r.nonfinite == 0 && r.ref_nonfinite == 0);
    s = rec_finalize(rec);
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "records");
    cJSON_AddItemToArray(arr, rec_to_json(rec));
    if (!s) s = vfile_write_json(json, root, true);
    cJSON_Delete(root);
    rec_free(rec);
  }
  diverge_result_free(&r);
  free(tok);
  free(ref);
  free(peer);
  free(scratch);
  ds_model_close(&m);
  return s;
}

int cmd_model_peer_diverge(int argc, char **argv) {
  const char *model = NULL, *prefix = NULL, *json = NULL, *v;
  double max_kld = 0.01, min_same = 90;
  long layers = 0, threads = 0;
  uint64_t seed = 0;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { fputs(PEER_USAGE, stdout); return EXIT_OK; }
    if (cli_opt(argc, argv, &i, "--model", &v, &err)) { if (v) model = v; }
    else if (cli_opt(argc, argv, &i, "--peer", &v, &err)) { if (v) prefix = v; }
    else if (cli_opt(argc, argv, &i, "--json", &v, &err)) { if (v) json = v; }
    else if (cli_opt(argc, argv, &i, "--max-kld", &v, &err)) { if (v) err = cli_double("--max-kld", v, &max_kld); }
    else if (cli_opt(argc, argv, &i, "--min-same-top", &v, &err)) { if (v) err = cli_double("--min-same-top", v, &min_same); }
    else if (cli_opt(argc, argv, &i, "--layers", &v, &err)) { if (v) err = cli_int("--layers", v, 1, 1000, &layers); }
    else if (cli_opt(argc, argv, &i, "--threads", &v, &err)) { if (v) err = cli_int("--threads", v, 0, 4096, &threads); }
    else if (cli_opt(argc, argv, &i, "--seed", &v, &err)) { if (v) err = cli_u64("--seed", v, &seed); }
    else err = VERR("unknown option '%s' (see vouch model peer-diverge --help)", argv[i]);
    if (err) { cli_print_error("model peer-diverge"); return EXIT_USAGE; }
  }
  if (!model || !prefix) { fputs(PEER_USAGE, stderr); return EXIT_USAGE; }
  bool pass = false;
  if (peer_diverge(model, prefix, json, max_kld, min_same, seed, (int)layers, (int)threads, &pass)) {
    cli_print_error("model peer-diverge");
    return EXIT_CHECK_FAILED;
  }
  return pass ? EXIT_OK : EXIT_CHECK_FAILED;
}
