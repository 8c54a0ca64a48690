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
#include "model/spec_config.h"
#include "suites/engine/cli.h"
#include "runner/cli/cmd_generate.h"
#include "suites/engine/record.h"
#include "suites/engine/sink.h"
#include "suites/paths/paths.h"
#include "suites/paths/spec.h"

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

/* Parses argv into *o and checks what needs no model (with `registry` the path registered; --dcp/--ep
 * with TP, the token lists). *help: --help given (nothing else parsed). Error: a usage error naming
 * the option; o holds nothing to free then. */
static vstatus gen_parse(int argc, char **argv, bool registry, gen_opts *o, bool *help) {
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
  /* the path's errors come after these, as they did (no option prefix: the message predates the spec);
   * without `registry` (a dry run prices paths a build may lack) only its syntax */
  const vstatus ps = registry ? vpath_spec_parse(o->path_name, NULL, &o->path)
                     : vpath_spec_split(o->path_name, &o->path) ? V_OK
                                                                : VERR("unknown path '%s'", o->path_name);
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
  VTRY(gen_parse(argc, argv, true, &o, &help));
  gen_free(&o);
  return V_OK;
}

/* The dry run: one path, max_seq = --batch, max_ctx = the longest prompt position + the new tokens
 * (prompt + batch - 1 + n + 1); the prompts prefilled, then n decode steps at half that context.
 * The path is not checked against the registry (a dry run plans for a GPU the build may lack). */
vstatus generate_estimate_args(int argc, char **argv, const dry_env *env, dry_step *out) {
  gen_opts g;
  bool help;
  ds_config cfg;
  vest_clear(out);
  VTRY(gen_parse(argc, argv, false, &g, &help));
  if (help) return VUNSUPPORTED("generate: --help runs nothing to estimate");
  if (ds_spec_config(g.model_spec, (int)g.layers, &cfg)) {
    verr_prefix("generate: --model %s", g.model_spec);
    gen_free(&g);
    return V_ERR;
  }
  vest X = {.cfg = &cfg, .env = env, .out = out};
  const char *path = g.path_name;
  const long B = g.batch, np = g.n_prompt;
  const int max_ctx = (int)np + (int)B - 1 + (int)g.n_new + 1;
  vest_open_set(&X, &path, 1, (int)B, max_ctx, true);
  vest_name_paths(&X, &path, 1, true);
  out->seconds = vest_open_s(&X, path, X.wbytes[0]) + vest_prefill_s(&X, path, (double)B * np, np) +
                 g.n_new * vest_step_s(&X, path, (int)B, max_ctx / 2.0);
  gen_free(&g);
  return V_OK;
}

/* Opens g's model into *m and checks it against the options (the --tp/--ep split, --tokens in the
 * vocabulary). Returns EXIT_OK with m open; else the exit code (EXIT_CHECK_FAILED: the model does not
 * open; EXIT_USAGE: an option does not fit it) with the error printed and m closed. */
static int gen_open_model(const gen_opts *g, ds_model *m) {
  const bool host = g->path.caps.host_weights;
  /* under TP each rank synthesizes only its shard: no full host copy */
  if (ds_model_open(m, g->model_spec, g->seed, (int)g->layers, host && g->tp == 0)) {
    cli_print_error("generate");
    return EXIT_CHECK_FAILED;
  }
  if (g->tp > 0 && ds_shard_check_ep(&m->cfg, (int)g->tp, g->ep) != V_OK) {
    verr_prefix("--tp%s: %s", g->ep ? " --ep" : "", m->source);
    cli_print_error("generate");
    ds_model_close(m);
    return EXIT_USAGE;
  }
  for (int i = 0; i < g->n_prompt; i++)
    if (g->prompt[i] < 0 || g->prompt[i] >= m->cfg.vocab_size) {
      VERR("--tokens: token %ld is outside the vocabulary [0, %d)", g->prompt[i], m->cfg.vocab_size);
      cli_print_error("generate");
      ds_model_close(m);
      return EXIT_USAGE;
    }
  return EXIT_OK;
}

/* Opens g's path on m into *p, sized for --batch sequences of the longest prompt plus -n tokens, its
 * events into trace. Returns EXIT_OK with p open; else the exit code (EXIT_USAGE: the context
 * exceeds the model's positions; EXIT_CHECK_FAILED: the path does not open) with the error printed. */
static int gen_open_path(const gen_opts *g, const ds_model *m, vtrace *trace, vpath *p) {
  const int max_prompt = g->n_prompt + (int)g->batch - 1;
  /* generating is no test of the path: a hand-over (latency to cuda-ref) runs as before; --trace shows it */
  vpath_opts po = {.max_seq = (int)g->batch, .max_ctx = max_prompt + (int)g->n_new + 1, .n_threads = (int)g->threads,
                   .trace = trace, .tp = (int)g->tp, .dcp = g->dcp, .ep = g->ep, .expect_fallback = true};
  if (po.max_ctx > m->cfg.max_position_embeddings) {
    VERR("prompt + -n = %d positions exceeds max_position_embeddings %d", po.max_ctx, m->cfg.max_position_embeddings);
    cli_print_error("generate");
    return EXIT_USAGE;
  }
  if (vpath_open(p, &g->path, m, &po)) { cli_print_error("generate"); return EXIT_CHECK_FAILED; }
  return EXIT_OK;
}

/* One decode of generate: what it runs on, its buffers and what it measured. */
typedef struct {
  const gen_opts *o;        /* the options */
  const ds_model *m;        /* the open model */
  vpath *p;                 /* the open path */
  vtrace *trace;            /* the path's events */
  int B, vocab, max_prompt; /* sequences (--batch); vocabulary; longest prompt (n_prompt + B - 1) */
  /* buffers (gen_alloc, gen_release) */
  int *seq, *ntok, *pos;    /* [B] the step's sequences, their token counts and start positions */
  int32_t *tok;             /* [B * max_prompt] the step's tokens */
  float *logits;            /* [B * vocab] the step's last logits, one row per live sequence */
  int32_t *out;             /* [B * (n_new + 1)] the tokens each sequence made */
  int *n_out, *plen;        /* [B] tokens made; prompt length */
  bool *done;               /* [B] the sequence made a --stop token */
  void *work;               /* vsample's scratch (vocab * 16 bytes) */
  /* measured */
  logit_stats ls;           /* over every row of logits sampled */
  double t_prefill, t_decode; /* seconds */
  long decoded;             /* tokens decoded after the prefill */
  int total_prompt;         /* prompt tokens prefilled, all sequences */
} gen_run;

/* The buffers of r (r->o, r->m set). Error: out of memory (what was allocated is freed by gen_release). */
static vstatus gen_alloc(gen_run *r) {
  const size_t B = (size_t)r->o->batch;
  r->B = (int)B;
  r->vocab = r->m->cfg.vocab_size;
  r->max_prompt = r->o->n_prompt + r->B - 1;
  r->ls = (logit_stats){.min_margin = INFINITY};
  r->seq = calloc(B, sizeof *r->seq), r->ntok = calloc(B, sizeof *r->ntok), r->pos = calloc(B, sizeof *r->pos);
  r->tok = calloc(B * (size_t)r->max_prompt, sizeof *r->tok);
  r->logits = malloc(B * (size_t)r->vocab * sizeof *r->logits);
  r->out = calloc(B * (size_t)(r->o->n_new + 1), sizeof *r->out);
  r->n_out = calloc(B, sizeof *r->n_out), r->plen = calloc(B, sizeof *r->plen);
  r->done = calloc(B, sizeof *r->done);
  r->work = malloc((size_t)r->vocab * 16);
  if (!r->seq || !r->ntok || !r->pos || !r->tok || !r->logits || !r->out || !r->n_out || !r->plen || !r->done ||
      !r->work)
    return VERR("out of memory");
  return V_OK;
}

static void gen_release(gen_run *r) {
  free(r->seq); free(r->ntok); free(r->pos); free(r->tok); free(r->logits); free(r->out); free(r->n_out); free(r->plen);
  free(r->done); free(r->work);
}

/* The tokens sequence b made ([n_out[b]] of n_new + 1). */
static int32_t *gen_out(const gen_run *r, int b) { return r->out + (size_t)b * (size_t)(r->o->n_new + 1); }

/* Prefills every sequence in one step: sequence b is the prompt plus b extra tokens derived from it.
 * Error: the path's forward. */
static vstatus gen_prefill(gen_run *r, vstep *st) {
  const long *prompt = r->o->prompt;
  const int n_prompt = r->o->n_prompt;
  int k = 0;
  for (int b = 0; b < r->B; b++) {
    r->seq[b] = b;
    r->plen[b] = n_prompt + b;
    r->ntok[b] = r->plen[b];
    r->pos[b] = 0;
    for (int j = 0; j < r->plen[b]; j++)
      r->tok[k++] = (int32_t)(j < n_prompt ? prompt[j] : (prompt[j % n_prompt] + 7 * b + j) % r->vocab);
    r->total_prompt += r->plen[b];
  }
  *st = (vstep){.n_seq = r->B, .seq = r->seq, .n_tokens = r->ntok, .start_pos = r->pos, .tokens = r->tok,
                .all_logits = false};
  const double t0 = vclock_now();
  VTRY(r->p->ops->forward(r->p->state, st, r->logits));
  r->t_prefill = vclock_now() - t0;
  vtrace_next_step(r->trace);
  return V_OK;
}

/* Chooses the next token of every live sequence from the last logits (their statistics into r->ls);
 * at `step` n_new only the statistics. */
static void gen_choose(gen_run *r, const vsampling *smp, long step) {
  const long n_new = r->o->n_new;
  int live = 0;
  for (int b = 0; b < r->B; b++) {
    if (r->done[b]) continue;
    const float *l = r->logits + (size_t)live * r->vocab;
    stats_add(&r->ls, l, r->vocab);
    int t = vsample(l, r->vocab, smp, b, step, r->work);
    live++;
    if (step == n_new) continue;
    gen_out(r, b)[r->n_out[b]++] = t;
    for (int q = 0; q < r->o->n_stops; q++) if (t == r->o->stops[q]) r->done[b] = true;
  }
}

/* Decodes -n tokens per sequence after gen_prefill (st: its step), all live sequences in each step,
 * until -n or every sequence made a --stop token. Error: the path's forward. */
static vstatus gen_decode(gen_run *r, vstep *st) {
  const long n_new = r->o->n_new;
  const vsampling smp = {.temperature = (float)r->o->temperature, .top_k = (int)r->o->top_k,
                         .top_p = (float)r->o->top_p, .seed = r->o->sample_seed};
  for (long step = 0; step <= n_new; step++) {
    gen_choose(r, &smp, step);
    if (step == n_new) break;
    /* next step: one new token per live sequence */
    int ns = 0;
    for (int b = 0; b < r->B; b++) {
      if (r->done[b]) continue;
      r->seq[ns] = b;
      r->ntok[ns] = 1;
      r->pos[ns] = r->plen[b] + r->n_out[b] - 1;
      r->tok[ns] = gen_out(r, b)[r->n_out[b] - 1];
      ns++;
    }
    if (ns == 0) break;
    st->n_seq = ns;
    const double t0 = vclock_now();
    VTRY(r->p->ops->forward(r->p->state, st, r->logits));
    r->t_decode += vclock_now() - t0;
    r->decoded += ns;
    vtrace_next_step(r->trace);
  }
  return V_OK;
}

static double per_s(double n, double s) { return s > 0 ? n / s : 0; }

/* --json: the decode (model, path, sequences, logit statistics, timing, trace) on stdout. */
static void gen_print_json(const gen_run *r) {
  const gen_opts *g = r->o;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model", r->m->source);
  cJSON_AddStringToObject(o, "path", g->path_name);
  cJSON_AddNumberToObject(o, "tp", (double)g->tp);
  cJSON_AddBoolToObject(o, "dcp", g->dcp);
  cJSON_AddBoolToObject(o, "ep", g->ep || g->path.ep);
  cJSON *seqs = cJSON_AddArrayToObject(o, "sequences");
  for (int b = 0; b < r->B; b++) {
    cJSON *so = cJSON_CreateObject();
    cJSON_AddNumberToObject(so, "prompt_len", r->plen[b]);
    cJSON *ta = cJSON_AddArrayToObject(so, "tokens");
    for (int j = 0; j < r->n_out[b]; j++) cJSON_AddItemToArray(ta, cJSON_CreateNumber(gen_out(r, b)[j]));
    cJSON_AddItemToArray(seqs, so);
  }
  cJSON *lo = cJSON_AddObjectToObject(o, "logits");
  cJSON_AddNumberToObject(lo, "min_top1_margin", r->ls.min_margin);
  cJSON_AddNumberToObject(lo, "max_abs", r->ls.max_abs);
  cJSON_AddNumberToObject(lo, "mean_entropy", r->ls.rows ? r->ls.sum_entropy / r->ls.rows : 0);
  cJSON_AddNumberToObject(lo, "nonfinite", (double)r->ls.nonfinite);
  cJSON *pf = cJSON_AddObjectToObject(o, "timing");
  cJSON_AddNumberToObject(pf, "prefill_s", r->t_prefill);
  cJSON_AddNumberToObject(pf, "prefill_tok_s", per_s(r->total_prompt, r->t_prefill));
  cJSON_AddNumberToObject(pf, "decode_s", r->t_decode);
  cJSON_AddNumberToObject(pf, "decode_tok_s", per_s((double)r->decoded, r->t_decode));
  char *tj = vtrace_to_json(r->trace);
  cJSON_AddItemToObject(o, "trace", cJSON_Parse(tj));
  free(tj);
  char *txt = cJSON_Print(o);
  puts(txt);
  free(txt);
  cJSON_Delete(o);
}

/* The decode as text on stdout: the sequences' tokens, logit statistics, speeds (--trace: the events). */
static void gen_print_text(const gen_run *r) {
  const gen_opts *g = r->o;
  printf("model %s, path %s%s, batch %d, %s\n", r->m->source, g->path_name, g->tp > 0 ? " (tensor parallel)" : "", r->B,
         g->temperature > 0 ? "sampling" : "greedy");
  if (g->tp > 0)
    printf("tp %ld%s%s\n", g->tp, g->ep ? ", expert parallel (ep)" : "",
           g->dcp ? ", decode context parallel (dcp)" : "");
  for (int b = 0; b < r->B; b++) {
    printf("seq %d (prompt %d):", b, r->plen[b]);
    for (int j = 0; j < r->n_out[b]; j++) printf(" %d", gen_out(r, b)[j]);
    printf("\n");
  }
  printf("logits: min top1-top2 margin %.4f, max |logit| %.3f, mean entropy %.3f nats, non-finite %ld\n",
         r->ls.min_margin, r->ls.max_abs, r->ls.rows ? r->ls.sum_entropy / r->ls.rows : 0, r->ls.nonfinite);
  printf("prefill: %d tokens in %.3f s (%.1f tok/s); decode: %ld tokens in %.3f s (%.1f tok/s at batch %d)\n",
         r->total_prompt, r->t_prefill, per_s(r->total_prompt, r->t_prefill), r->decoded, r->t_decode,
         per_s((double)r->decoded, r->t_decode), r->B);
  if (g->trace_on) vtrace_print(r->trace, stdout);
}

/* Under `vouch run`: one record of the decode, with its path trace, into the run sink. Error: out
 * of memory, or the sink's (naming the store and the record). */
static vstatus gen_store(const gen_run *r, const vrec_sink *sink) {
  const gen_opts *g = r->o;
  char id[96];
  snprintf(id, sizeof id, "b%d-n%ld-%s", r->B, g->n_new, g->temperature > 0 ? "sampled" : "greedy");
  vrecord *rec = rec_new("generate", id, g->path_name);
  if (!rec) return V_ERR;
  rec_param_str(rec, "model", r->m->source);
  rec_param_int(rec, "batch", r->B);
  rec_param_int(rec, "tp", g->tp);
  if (g->dcp) rec_param_int(rec, "dcp", 1);
  if (g->ep || g->path.ep) rec_param_int(rec, "ep", 1);
  rec_param_int(rec, "new_tokens", g->n_new);
  rec_param_num(rec, "temperature", g->temperature);
  rec_metric_value(rec, "decode_tokens_per_s", "tok/s", RB_HIGHER, per_s((double)r->decoded, r->t_decode));
  rec_metric_value(rec, "prefill_tokens_per_s", "tok/s", RB_HIGHER, per_s(r->total_prompt, r->t_prefill));
  rec_metric_value(rec, "min_top1_margin", "", RB_NONE, r->ls.min_margin);
  rec_check_add(rec, "logits_finite", r->ls.nonfinite == 0);
  char *tj = vtrace_to_json(r->trace);
  vstatus s = rec_emit(sink, rec, tj);
  free(tj);
  rec_free(rec);
  return s;
}

int cmd_generate(int argc, char **argv, const vrec_sink *sink) {
  gen_opts g;
  bool help;
  if (gen_parse(argc, argv, true, &g, &help)) { cli_print_error("generate"); return EXIT_USAGE; }
  if (help) { fputs(USAGE, stdout); return EXIT_OK; }
  ds_model m;
  int rc = gen_open_model(&g, &m);
  if (rc != EXIT_OK) { gen_free(&g); return rc; }
  vtrace trace;
  vtrace_init(&trace, g.trace_on || g.json);
  vpath p;
  if ((rc = gen_open_path(&g, &m, &trace, &p)) != EXIT_OK) {
    vtrace_free(&trace);
    ds_model_close(&m);
    gen_free(&g);
    return rc;
  }
  gen_run r = {.o = &g, .m = &m, .p = &p, .trace = &trace};
  vstep st;
  vstatus s = gen_alloc(&r);
  if (s == V_OK) s = gen_prefill(&r, &st);
  if (s == V_OK) s = gen_decode(&r, &st);
  if (s == V_OK) {
    if (g.json) gen_print_json(&r);
    else gen_print_text(&r);
    rc = r.ls.nonfinite ? EXIT_CHECK_FAILED : EXIT_OK;
    if (sink) s = gen_store(&r, sink); /* under `vouch run`: one record for this decode */
  }
  if (s) cli_print_error("generate");
  gen_release(&r);
  gen_free(&g);
  vpath_close(&p);
  vtrace_free(&trace);
  ds_model_close(&m);
  return s ? EXIT_CHECK_FAILED : rc;
}
