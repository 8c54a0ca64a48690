/* vouch generate: prefill a batch of prompts of different lengths, then decode. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/sampling.h"
#include "model/model.h"
#include "model/shard.h"
#include "suites/engine/cli.h"
#include "runner/cli/cmd_generate.h"
#include "runner/evidence/rundir.h"
#include "suites/engine/record.h"
#include "suites/paths/paths.h"

static const char USAGE[] =
    "usage: vouch generate [--model DIR|synth:PRESET] [--path NAME] [--tokens 1,2,3] [-n N] [--batch B]\n"
    "                      [--temperature T] [--top-k K] [--top-p P] [--sample-seed S] [--stop ID,..]\n"
    "                      [--seed S] [--layers N] [--threads N] [--tp N] [--dcp] [--ep] [--path-lib FILE]\n"
    "                      [--trace] [--json]\n"
    "  Prefills --batch sequences in one step (sequence b is the prompt plus b extra tokens, so the\n"
    "  prompt lengths differ), then decodes N tokens per sequence, all sequences in each step.\n"
    "  Prints the tokens, per-step logit statistics and prefill/decode tokens per second.\n"
    "  --tp N runs the path tensor-parallel over N ranks (docs/tensor-parallel.md): cpu-ref as N\n"
    "  simulated ranks in threads, cuda-ref on N GPUs with NCCL; the model's heads and MLP widths\n"
    "  must divide by N. --tp 1 runs the TP code path with one rank.\n"
    "  --dcp adds decode context parallelism over the --tp ranks (cpu-ref and latency): each rank\n"
    "  caches the positions p with p % N == rank for all heads; partial attention is combined by\n"
    "  log-sum-exp (also as --path cpu-ref:tpN:dcp, latency:tpN:dcp).\n"
    "  --ep makes the routed experts expert-parallel over the --tp ranks (cpu-ref only): rank r owns\n"
    "  n_routed_experts/N whole experts and runs only those; the router, the shared expert and the\n"
    "  rest stay as under --tp (also as --path cpu-ref:tpN:ep; combines with --dcp).\n"
    "  defaults: --model synth:tiny --path cpu-ref --tokens 1,2,3,4 -n 32 --batch 1 (greedy)\n";

typedef struct {
  double min_margin;   /* smallest top1 - top2 logit gap seen */
  double max_abs;      /* largest |logit| */
  double sum_entropy;  /* of softmax(logits), summed over rows */
  long rows;
  long nonfinite;      /* NaN/Inf logits seen */
} logit_stats;

static void stats_add(logit_stats *s, const float *l, int vocab) {
  double mx = -INFINITY, second = -INFINITY;
  for (int i = 0; i < vocab; i++) {
    double v = l[i];
    if (!isfinite(v)) { s->nonfinite++; continue; }
    if (fabs(v) > s->max_abs) s->max_abs = fabs(v);
    if (v > mx) { second = mx; mx = v; } else if (v > second) second = v;
  }
  double z = 0, ez = 0;
  for (int i = 0; i < vocab; i++) if (isfinite(l[i])) z += exp(l[i] - mx);
  for (int i = 0; i < vocab; i++)
    if (isfinite(l[i])) { double p = exp(l[i] - mx) / z; if (p > 0) ez -= p * log(p); }
  s->sum_entropy += ez;
  if (mx - second < s->min_margin) s->min_margin = mx - second;
  s->rows++;
}

/* generate's options, parsed and checked (gen_parse). */
typedef struct {
  const char *model_spec, *path_name; /* --model, --path as given */
  vpath_spec path;                    /* --path parsed (a registered path) */
  long n_new, batch, layers, threads, top_k, tp; /* -n, --batch, --layers, --threads, --top-k, --tp (0: no TP) */
  double temperature, top_p;
  uint64_t seed, sample_seed;
  bool json, trace_on, dcp, ep;
  long *prompt, *stops;               /* [n_prompt] --tokens, [n_stops] --stop (malloc'ed; gen_free) */
  int n_prompt, n_stops;
} gen_opts;

static void gen_free(gen_opts *o) {
  free(o->prompt);
  free(o->stops);
  o->prompt = o->stops = NULL;
}

/* Parses argv into *o and checks what needs no model (the path registered, --dcp/--ep with TP,
 * the token lists). *help: --help given (nothing else parsed). Error: a usage error naming the
 * option; o holds nothing to free then. */
static vstatus gen_parse(int argc, char **argv, gen_opts *o, bool *help) {
  *o = (gen_opts){.model_spec = "synth:tiny", .path_name = "cpu-ref", .n_new = 32, .batch = 1, .top_p = 1};
  const char *tokens_s = "1,2,3,4", *stop_s = NULL, *v;
  vstatus err = V_OK;
  *help = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { *help = true; return V_OK; }
    if (!strcmp(a, "--json")) o->json = true;
    else if (!strcmp(a, "--trace")) o->trace_on = true;
    else if (!strcmp(a, "--dcp")) o->dcp = true;
    else if (!strcmp(a, "--ep")) o->ep = true;
    else if (cli_opt(argc, argv, &i, "--model", &v, &err)) { if (v) o->model_spec = v; }
    else if (cli_opt(argc, argv, &i, "--path", &v, &err)) { if (v) o->path_name = v; }
    else if (cli_opt(argc, argv, &i, "--path-lib", &v, &err)) { if (v) err = vpaths_load_lib(v); }
    else if (cli_opt(argc, argv, &i, "--tokens", &v, &err)) { if (v) tokens_s = v; }
    else if (cli_opt(argc, argv, &i, "--stop", &v, &err)) { if (v) stop_s = v; }
    else if (cli_opt(argc, argv, &i, "-n", &v, &err)) { if (v) err = cli_int("-n", v, 0, 1 << 24, &o->n_new); }
    else if (cli_opt(argc, argv, &i, "--batch", &v, &err)) { if (v) err = cli_int("--batch", v, 1, 4096, &o->batch); }
    else if (cli_opt(argc, argv, &i, "--layers", &v, &err)) { if (v) err = cli_int("--layers", v, 1, 1000, &o->layers); }
    else if (cli_opt(argc, argv, &i, "--threads", &v, &err)) { if (v) err = cli_int("--threads", v, 0, 4096, &o->threads); }
    else if (cli_opt(argc, argv, &i, "--tp", &v, &err)) { if (v) err = cli_int("--tp", v, 1, SHARD_MAX_TP, &o->tp); }
    else if (cli_opt(argc, argv, &i, "--top-k", &v, &err)) { if (v) err = cli_int("--top-k", v, 0, 1 << 30, &o->top_k); }
    else if (cli_opt(argc, argv, &i, "--temperature", &v, &err)) { if (v) err = cli_double("--temperature", v, &o->temperature); }
    else if (cli_opt(argc, argv, &i, "--top-p", &v, &err)) { if (v) err = cli_double("--top-p", v, &o->top_p); }
    else if (cli_opt(argc, argv, &i, "--seed", &v, &err)) { if (v) err = cli_u64("--seed", v, &o->seed); }
    else if (cli_opt(argc, argv, &i, "--sample-seed", &v, &err)) { if (v) err = cli_u64("--sample-seed", v, &o->sample_seed); }
    else err = VERR("unknown option '%s' (see vouch generate --help)", a);
    if (err) return err;
  }
  if (o->temperature < 0 || o->top_p <= 0 || o->top_p > 1)
    return VERR("--temperature must be >= 0 and --top-p in (0, 1]");
  /* the path's errors come after these, as they did (no option prefix: the message predates the spec) */
  const vstatus ps = vpath_spec_parse(o->path_name, NULL, &o->path);
  const bool named_tp = ps == V_OK && o->path.tp > 0;
  if (o->dcp && o->tp == 0 && !named_tp)
    return VERR("--dcp splits the KV cache over the tensor-parallel ranks: give --tp N too");
  if (o->ep && o->tp == 0 && !named_tp)
    return VERR("--ep splits the routed experts over the tensor-parallel ranks: give --tp N too");
  VTRY(ps);
  VTRY(cli_size_list("--tokens", tokens_s, &o->prompt, &o->n_prompt));
  if (stop_s && (err = cli_size_list("--stop", stop_s, &o->stops, &o->n_stops))) { gen_free(o); return err; }
  return V_OK;
}

vstatus generate_check_args(int argc, char **argv) {
  gen_opts o;
  bool help;
  VTRY(gen_parse(argc, argv, &o, &help));
  gen_free(&o);
  return V_OK;
}

int cmd_generate(int argc, char **argv) {
  gen_opts g;
  bool help;
  if (gen_parse(argc, argv, &g, &help)) { cli_print_error("generate"); return EXIT_USAGE; }
  if (help) { fputs(USAGE, stdout); return EXIT_OK; }
  /* the names the decode below uses */
  const char *model_spec = g.model_spec, *path_name = g.path_name;
  const long n_new = g.n_new, batch = g.batch, layers = g.layers, threads = g.threads, top_k = g.top_k, tp = g.tp;
  const double temperature = g.temperature, top_p = g.top_p;
  const uint64_t seed = g.seed, sample_seed = g.sample_seed;
  const bool json = g.json, trace_on = g.trace_on, dcp = g.dcp, ep = g.ep;
  long *prompt = g.prompt, *stops = g.stops;
  const int n_prompt = g.n_prompt, n_stops = g.n_stops;
  ds_model m;
  const vpath_spec *path = &g.path;
  const bool host = path->caps.host_weights;
  /* under TP each rank synthesizes only its shard: no full host copy */
  if (ds_model_open(&m, model_spec, seed, (int)layers, host && tp == 0)) { cli_print_error("generate"); gen_free(&g); return EXIT_CHECK_FAILED; }
  if (tp > 0 && ds_shard_check_ep(&m.cfg, (int)tp, ep) != V_OK) {
    verr_prefix("--tp%s: %s", ep ? " --ep" : "", m.source);
    cli_print_error("generate");
    ds_model_close(&m);
    gen_free(&g);
    return EXIT_USAGE;
  }
  const int vocab = m.cfg.vocab_size;
  int rc = EXIT_CHECK_FAILED;
  for (int i = 0; i < n_prompt; i++)
    if (prompt[i] < 0 || prompt[i] >= vocab) {
      VERR("--tokens: token %ld is outside the vocabulary [0, %d)", prompt[i], vocab);
      cli_print_error("generate");
      ds_model_close(&m);
      gen_free(&g);
      return EXIT_USAGE;
    }
  const int B = (int)batch;
  int max_prompt = n_prompt + B - 1;
  vtrace trace;
  vtrace_init(&trace, trace_on || json);
  vpath_opts po = {.max_seq = B, .max_ctx = max_prompt + (int)n_new + 1, .n_threads = (int)threads, .trace = &trace,
                     .tp = (int)tp, .dcp = dcp, .ep = ep};
  if (po.max_ctx > m.cfg.max_position_embeddings) {
    VERR("prompt + -n = %d positions exceeds max_position_embeddings %d", po.max_ctx, m.cfg.max_position_embeddings);
    cli_print_error("generate");
    ds_model_close(&m);
    gen_free(&g);
    return EXIT_USAGE;
  }
  vpath p;
  if (vpath_open(&p, path, &m, &po)) { cli_print_error("generate"); ds_model_close(&m); gen_free(&g); return EXIT_CHECK_FAILED; }

  int *seq = calloc((size_t)B, sizeof *seq), *ntok = calloc((size_t)B, sizeof *ntok), *pos = calloc((size_t)B, sizeof *pos);
  int32_t *tok = calloc((size_t)B * (size_t)max_prompt, sizeof *tok);
  float *logits = malloc((size_t)B * (size_t)vocab * sizeof *logits);
  int32_t *out = calloc((size_t)B * (size_t)(n_new + 1), sizeof *out);
  int *n_out = calloc((size_t)B, sizeof *n_out), *plen = calloc((size_t)B, sizeof *plen);
  bool *done = calloc((size_t)B, sizeof *done);
  void *work = malloc((size_t)vocab * 16);
  logit_stats ls = {.min_margin = INFINITY};
  vsampling smp = {.temperature = (float)temperature, .top_k = (int)top_k, .top_p = (float)top_p, .seed = sample_seed};
  double t_prefill = 0, t_decode = 0;
  long decoded = 0;
  vstatus s = V_OK;
  if (!seq || !ntok || !pos || !tok || !logits || !out || !n_out || !plen || !done || !work) { s = VERR("out of memory"); goto end; }

  /* prefill: sequence b = prompt + b extra tokens derived from it */
  int k = 0;
  for (int b = 0; b < B; b++) {
    seq[b] = b;
    plen[b] = n_prompt + b;
    ntok[b] = plen[b];
    pos[b] = 0;
    for (int j = 0; j < plen[b]; j++) tok[k++] = (int32_t)(j < n_prompt ? prompt[j] : (prompt[j % n_prompt] + 7 * b + j) % vocab);
  }
  vstep st = {.n_seq = B, .seq = seq, .n_tokens = ntok, .start_pos = pos, .tokens = tok, .all_logits = false};
  double t0 = vclock_now();
  if ((s = p.ops->forward(p.state, &st, logits))) goto end;
  t_prefill = vclock_now() - t0;
  vtrace_next_step(&trace);

  for (long step = 0; step <= n_new; step++) {
    /* choose the next token of every live sequence from the last logits */
    int live = 0;
    for (int b = 0; b < B; b++) {
      if (done[b]) continue;
      const float *l = logits + (size_t)live * vocab;
      stats_add(&ls, l, vocab);
      int t = vsample(l, vocab, &smp, b, step, work);
      live++;
      if (step == n_new) continue;
      out[(size_t)b * (n_new + 1) + n_out[b]++] = t;
      for (int q = 0; q < n_stops; q++) if (t == stops[q]) done[b] = true;
    }
    if (step == n_new) break;
    /* next step: one new token per live sequence */
    int ns = 0;
    for (int b = 0; b < B; b++) {
      if (done[b]) continue;
      seq[ns] = b;
      ntok[ns] = 1;
      pos[ns] = plen[b] + n_out[b] - 1;
      tok[ns] = out[(size_t)b * (n_new + 1) + n_out[b] - 1];
      ns++;
    }
    if (ns == 0) break;
    st.n_seq = ns;
    t0 = vclock_now();
    if ((s = p.ops->forward(p.state, &st, logits))) goto end;
    t_decode += vclock_now() - t0;
    decoded += ns;
    vtrace_next_step(&trace);
  }
  int total_prompt = 0;
  for (int b = 0; b < B; b++) total_prompt += plen[b];
  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", m.source);
    cJSON_AddStringToObject(o, "path", path_name);
    cJSON_AddNumberToObject(o, "tp", (double)tp);
    cJSON_AddBoolToObject(o, "dcp", dcp);
    cJSON_AddBoolToObject(o, "ep", ep || path->ep);
    cJSON *seqs = cJSON_AddArrayToObject(o, "sequences");
    for (int b = 0; b < B; b++) {
      cJSON *so = cJSON_CreateObject();
      cJSON_AddNumberToObject(so, "prompt_len", plen[b]);
      cJSON *ta = cJSON_AddArrayToObject(so, "tokens");
      for (int j = 0; j < n_out[b]; j++) cJSON_AddItemToArray(ta, cJSON_CreateNumber(out[(size_t)b * (n_new + 1) + j]));
      cJSON_AddItemToArray(seqs, so);
    }
    cJSON *lo = cJSON_AddObjectToObject(o, "logits");
    cJSON_AddNumberToObject(lo, "min_top1_margin", ls.min_margin);
    cJSON_AddNumberToObject(lo, "max_abs", ls.max_abs);
    cJSON_AddNumberToObject(lo, "mean_entropy", ls.rows ? ls.sum_entropy / ls.rows : 0);
    cJSON_AddNumberToObject(lo, "nonfinite", (double)ls.nonfinite);
    cJSON *pf = cJSON_AddObjectToObject(o, "timing");
    cJSON_AddNumberToObject(pf, "prefill_s", t_prefill);
    cJSON_AddNumberToObject(pf, "prefill_tok_s", t_prefill > 0 ? total_prompt / t_prefill : 0);
    cJSON_AddNumberToObject(pf, "decode_s", t_decode);
    cJSON_AddNumberToObject(pf, "decode_tok_s", t_decode > 0 ? decoded / t_decode : 0);
    char *tj = vtrace_to_json(&trace);
    cJSON_AddItemToObject(o, "trace", cJSON_Parse(tj));
    free(tj);
    char *txt = cJSON_Print(o);
    puts(txt);
    free(txt);
    cJSON_Delete(o);
  } else {
    printf("model %s, path %s%s, batch %d, %s\n", m.source, path_name, tp > 0 ? " (tensor parallel)" : "", B,
           temperature > 0 ? "sampling" : "greedy");
    if (tp > 0)
      printf("tp %ld%s%s\n", tp, ep ? ", expert parallel (ep)" : "", dcp ? ", decode context parallel (dcp)" : "");
    for (int b = 0; b < B; b++) {
      printf("seq %d (prompt %d):", b, plen[b]);
      for (int j = 0; j < n_out[b]; j++) printf(" %d", out[(size_t)b * (n_new + 1) + j]);
      printf("\n");
    }
    printf("logits: min top1-top2 margin %.4f, max |logit| %.3f, mean entropy %.3f nats, non-finite %ld\n",
           ls.min_margin, ls.max_abs, ls.rows ? ls.sum_entropy / ls.rows : 0, ls.nonfinite);
    printf("prefill: %d tokens in %.3f s (%.1f tok/s); decode: %ld tokens in %.3f s (%.1f tok/s at batch %d)\n",
           total_prompt, t_prefill, t_prefill > 0 ? total_prompt / t_prefill : 0, decoded, t_decode,
           t_decode > 0 ? decoded / t_decode : 0, B);
    if (trace_on) vtrace_print(&trace, stdout);
  }
  rc = ls.nonfinite ? EXIT_CHECK_FAILED : EXIT_OK;
  if (rec_current()) {
    /* under `vouch run`: one record for this decode */
    char id[96];
    snprintf(id, sizeof id, "b%d-n%ld-%s", B, n_new, temperature > 0 ? "sampled" : "greedy");
    vrecord *r = rec_new("generate", id, path_name);
    if (!r) { s = V_ERR; goto end; }
    rec_param_str(r, "model", m.source);
    rec_param_int(r, "batch", B);
    rec_param_int(r, "tp", tp);
    if (dcp) rec_param_int(r, "dcp", 1);
    if (ep || path->ep) rec_param_int(r, "ep", 1);
    rec_param_int(r, "new_tokens", n_new);
    rec_param_num(r, "temperature", temperature);
    rec_metric_value(r, "decode_tokens_per_s", "tok/s", RB_HIGHER, t_decode > 0 ? decoded / t_decode : 0);
    rec_metric_value(r, "prefill_tokens_per_s", "tok/s", RB_HIGHER, t_prefill > 0 ? total_prompt / t_prefill : 0);
    rec_metric_value(r, "min_top1_margin", "", RB_NONE, ls.min_margin);
    rec_check_add(r, "logits_finite", ls.nonfinite == 0);
    char *tj = vtrace_to_json(&trace);
    s = rec_emit(r, tj);
    free(tj);
    rec_free(r);
    if (s) goto end;
  }
end:
  if (s) cli_print_error("generate");
  free(seq); free(ntok); free(pos); free(tok); free(logits); free(out); free(n_out); free(plen); free(done);
  free(work);
  gen_free(&g);
  vpath_close(&p);
  vtrace_free(&trace);
  ds_model_close(&m);
  return s ? EXIT_CHECK_FAILED : rc;
}
