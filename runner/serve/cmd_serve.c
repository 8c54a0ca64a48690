/* vouch serve: an OpenAI-compatible server over a vouch decode path (runner/serve/serve.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/interrupt.h"
#include "model/model.h"
#include "suites/engine/cli.h"
#include "runner/serve/cmd_serve.h"
#include "suites/sweep/sweep_suite.h"
#include "runner/serve/serve.h"
#include "suites/paths/paths.h"
#include "suites/paths/spec.h"

static const char USAGE[] =
    "usage: vouch serve [--path NAME] [--model DIR|synth:PRESET] [--port N] [--host ADDR]\n"
    "                   [--served-model-name NAME] [--max-seqs N] [--max-ctx N] [--max-batched-tokens N]\n"
    "                   [--spec K=..,AL=..] [--seed S] [--layers N] [--threads N] [--path-lib FILE]\n"
    "  Serves the path over HTTP with the OpenAI completions API (token ids in, token ids out; there\n"
    "  is no tokenizer). Endpoints:\n"
    "    POST /v1/completions  prompt (list of token ids), max_tokens, temperature, top_p, top_k, seed,\n"
    "                          stop_token_ids, min_tokens, ignore_eos, logprobs (0..20 top), stream\n"
    "                          (SSE `data:` chunks, then `data: [DONE]`), stream_options.include_usage;\n"
    "                          structured_outputs over token ids (choice: lists of ids; token_dfa);\n"
    "                          each choice carries token_ids. Stop strings, text constraints (json,\n"
    "                          regex, grammar, response_format json_*), echo, n > 1 are refused (400),\n"
    "                          a wrong model is 404 (docs/serving.md).\n"
    "    GET /v1/models, GET /health, GET /metrics (Prometheus text, vLLM's metric names).\n"
    "  Continuous batching: up to --max-seqs sequences (KV slots) at once; each forward step holds\n"
    "  every running decode and prefill chunks of new requests up to --max-batched-tokens tokens;\n"
    "  a mixed step the path's supports() refuses runs one sequence at a time.\n"
    "  --spec K=..,AL=..: synthetic speculative decoding as `vouch sweep --spec` (K+1 tokens verified\n"
    "  per sequence per step, AL kept; the accepted drafts are synthetic, so outputs with AL > 1 are\n"
    "  for throughput, not evals); /metrics counts drafts and accepted tokens as vLLM does.\n"
    "  Listens on loopback unless --host says otherwise; --port 0 takes a free port. Prints\n"
    "  `vouch serve: listening on http://HOST:PORT` on stderr when ready. SIGINT/SIGTERM: requests\n"
    "  in flight end as \"abort\", then the server exits 0.\n"
    "  defaults: --path cpu-ref --model synth:tiny --port 8000 --host 127.0.0.1 --max-seqs 16\n"
    "            --max-ctx min(4096, max_position_embeddings) --max-batched-tokens 512,\n"
    "            --served-model-name = the --model text\n";

int cmd_serve(int argc, char **argv) {
  const char *model_spec = "synth:tiny", *path_name = "cpu-ref", *host = "127.0.0.1", *name = NULL, *v;
  long port = 8000, max_seqs = 16, max_ctx = 0, max_batched = 512, layers = 0, threads = 0;
  int spec_k = 0, spec_al = 1;
  uint64_t seed = 0;
  serve_test_devices td = {0};
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(USAGE, stdout); return EXIT_OK; }
    if (cli_opt(argc, argv, &i, "--model", &v, &err)) { if (v) model_spec = v; }
    else if (cli_opt(argc, argv, &i, "--path", &v, &err)) { if (v) path_name = v; }
    else if (cli_opt(argc, argv, &i, "--path-lib", &v, &err)) { if (v) err = vpaths_load_lib(v); }
    else if (cli_opt(argc, argv, &i, "--host", &v, &err)) { if (v) host = v; }
    else if (cli_opt(argc, argv, &i, "--served-model-name", &v, &err)) { if (v) name = v; }
    else if (cli_opt(argc, argv, &i, "--port", &v, &err)) { if (v) err = cli_int("--port", v, 0, 65535, &port); }
    else if (cli_opt(argc, argv, &i, "--max-seqs", &v, &err)) { if (v) err = cli_int("--max-seqs", v, 1, 4096, &max_seqs); }
    else if (cli_opt(argc, argv, &i, "--max-ctx", &v, &err)) { if (v) err = cli_size("--max-ctx", v, &max_ctx); }
    else if (cli_opt(argc, argv, &i, "--max-batched-tokens", &v, &err)) {
      if (v) err = cli_int("--max-batched-tokens", v, 1, 1 << 20, &max_batched);
    }
    else if (cli_opt(argc, argv, &i, "--spec", &v, &err)) { if (v) err = sweep_spec_parse(v, &spec_k, &spec_al); }
    else if (cli_opt(argc, argv, &i, "--seed", &v, &err)) { if (v) err = cli_u64("--seed", v, &seed); }
    else if (cli_opt(argc, argv, &i, "--layers", &v, &err)) { if (v) err = cli_int("--layers", v, 1, 1000, &layers); }
    else if (cli_opt(argc, argv, &i, "--threads", &v, &err)) { if (v) err = cli_int("--threads", v, 0, 4096, &threads); }
    /* a test device, not in the usage: a server planted 20 % slower per decode step (--test-slowdown 0.2)
     * for the A/B of two servers (tests/cli/test_sweep_ab.sh); it is on the command line, so in the
     * launched side's spec and the run's manifest, never on by accident */
    else if (cli_opt(argc, argv, &i, "--test-slowdown", &v, &err)) {
      if (v && (cli_double("--test-slowdown", v, &td.slowdown) || !(td.slowdown >= 0 && td.slowdown <= 10)))
        err = VERR("--test-slowdown %s: must be in [0, 10]", v);
    }
    /* a test device too: logits scaled by 1 + F (--test-logit-scale 0.05), a planted numerics change for
     * served diverge's rule and its --kld-budget (tests/cli/test_diverge_budget.sh) */
    else if (cli_opt(argc, argv, &i, "--test-logit-scale", &v, &err)) {
      if (v && (cli_double("--test-logit-scale", v, &td.logit_scale) || !(td.logit_scale > -1 && td.logit_scale <= 10)))
        err = VERR("--test-logit-scale %s: must be in (-1, 10]", v);
    }
    else err = VERR("unknown option '%s' (see vouch serve --help)", a);
    if (err) { cli_print_error("serve"); return EXIT_USAGE; }
  }
  vpath_spec path;
  if (vpath_spec_parse(path_name, "--path", &path)) {
    cli_print_error("serve");
    return EXIT_USAGE;
  }
  if (!name) name = model_spec;
  ds_model m;
  const bool host_copy = path.caps.host_weights && path.tp == 0;
  if (ds_model_open(&m, model_spec, seed, (int)layers, host_copy)) { cli_print_error("serve"); return EXIT_CHECK_FAILED; }
  const int max_pos = m.cfg.max_position_embeddings;
  if (max_ctx == 0) max_ctx = max_pos < 4096 ? max_pos : 4096;
  if (max_ctx < 2 || max_ctx > max_pos) {
    VERR("--max-ctx %ld: must be in [2, max_position_embeddings %d] of %s", max_ctx, max_pos, m.source);
    cli_print_error("serve");
    ds_model_close(&m);
    return EXIT_USAGE;
  }
  /* serving is no test of the path: a hand-over (latency to cuda-ref) serves as before (the trace says it) */
  vpath_opts po = {.max_seq = (int)max_seqs, .max_ctx = (int)max_ctx, .n_threads = (int)threads, .expect_fallback = true};
  vpath p = {0};
  if (vpath_open(&p, &path, &m, &po)) { cli_print_error("serve"); ds_model_close(&m); return EXIT_CHECK_FAILED; }
  serve_sched s;
  serve_http *h = NULL;
  int bound = 0, rc = EXIT_OK;
  vinterrupt_install();
  if (serve_sched_start(&s, &p, &m, name, (int)max_seqs, (int)max_ctx, (int)max_batched, spec_k, spec_al, &td) ||
      serve_http_start(&h, &s, host, (int)port, &bound)) {
    cli_print_error("serve");
    rc = EXIT_CHECK_FAILED;
  } else {
    fprintf(stderr, "vouch serve: %s on %s as '%s', %ld slots x %ld positions, spec K=%d AL=%d\n", path_name,
            m.source, name, max_seqs, max_ctx, spec_k, spec_al);
    if (td.slowdown > 0) fprintf(stderr, "vouch serve: test device: every decode step slowed by %.0f%%\n", 100 * td.slowdown);
    if (td.logit_scale != 0)
      fprintf(stderr, "vouch serve: test device: every logits row scaled by %g\n", 1 + td.logit_scale);
    fprintf(stderr, "vouch serve: listening on http://%s%s%s:%d\n", strchr(host, ':') ? "[" : "", host,
            strchr(host, ':') ? "]" : "", bound);
    fflush(stderr);
    while (!vinterrupted()) usleep(50 * 1000);
    fprintf(stderr, "vouch serve: shutting down\n");
  }
  /* requests in flight end first (their streams close), then the listener, then the path */
  serve_sched_stop(&s);
  serve_http_stop(h);
  serve_sched_free(&s);
  vpath_close(&p);
  ds_model_close(&m);
  return rc;
}
