/* cpu-ref against golden logits from HF transformers (an implementation nobody here wrote):
 * DeepseekV3ForCausalLM in float32, eager attention, TF32 off, on the same synthetic
 * checkpoints (tests/golden/cases.json; regenerate with scripts/peers/make_golden.sh).
 *
 * Bound: max |dlogit| <= 1e-4 at every position (measured: ~5e-6). Both sides compute in float32; only the
 * order of summation differs (dot products of length <= 2048, three layers), which moves
 * logits of magnitude ~5 by ~1e-5. A semantic error (RoPE layout, YaRN ramp, mscale, causal
 * mask, router masking, expert weighting) moves them by 1e-2 or more. Top-1 must agree at
 * every position whose HF top1-top2 margin exceeds the bound. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "reference/cpu/cpu_ref.h"
#include "tests/harness.h"

#define BOUND 1e-4

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
  fclose(f);
  if (b) b[n] = 0;
  if (len) *len = (size_t)n;
  return b;
}

static void run_case(const cJSON *c) {
  const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
  const char *preset = cJSON_GetObjectItem(c, "preset")->valuestring;
  int seed = cJSON_GetObjectItem(c, "seed")->valueint, n = cJSON_GetObjectItem(c, "n_tokens")->valueint;
  ds_config cfg;
  CHECK_OK(ds_preset_config(preset, 0, &cfg));
  const cJSON *set;
  cJSON_ArrayForEach(set, cJSON_GetObjectItem(c, "set")) CHECK_OK(ds_config_override(&cfg, set->valuestring));
  char path[600];
  snprintf(path, sizeof path, "tests/golden/%s.f32", name);
  size_t len = 0;
  float *gold = (float *)slurp(test_src_path(path), &len);
  CHECK(gold != NULL, "%s: golden file %s missing", name, path);
  if (!gold) return;
  const int V = cfg.vocab_size;
  CHECK(len == (size_t)n * V * sizeof(float), "%s: golden size %zu, want %d x %d floats", name, len, n, V);
  if (len != (size_t)n * V * sizeof(float)) { free(gold); return; }

  ds_model m;
  CHECK_OK(ds_model_synth(&m, &cfg, preset, (uint64_t)seed, true));
  vpath_opts o = {.max_seq = 1, .max_ctx = n};
  void *st = NULL;
  CHECK_OK(cpu_ref_ops.open(&st, &m, &o));
  int32_t *tok = malloc((size_t)n * sizeof *tok);
  for (int j = 0; j < n; j++) tok[j] = (37 * j + 11 * seed) % V;
  int seqid = 0, ntok = n, pos = 0;
  vstep s = {.n_seq = 1, .seq = &seqid, .n_tokens = &ntok, .start_pos = &pos, .tokens = tok, .all_logits = true};
  float *lg = malloc((size_t)n * V * sizeof *lg);
  CHECK_OK(cpu_ref_ops.forward(st, &s, lg));
  double maxd = 0;
  int top_agree = 0, top_checked = 0;
  for (int j = 0; j < n; j++) {
    const float *a = lg + (size_t)j * V, *g = gold + (size_t)j * V;
    int ia = 0, ig = 0;
    float g1 = -INFINITY, g2 = -INFINITY;
    for (int v = 0; v < V; v++) {
      double d = fabs((double)a[v] - g[v]);
      if (!(d <= maxd)) maxd = d; /* NaN propagates into maxd */
      if (a[v] > a[ia]) ia = v;
      if (g[v] > g[ig]) ig = v;
      if (g[v] > g1) { g2 = g1; g1 = g[v]; } else if (g[v] > g2) g2 = g[v];
    }
    if (g1 - g2 > BOUND) { top_checked++; top_agree += ia == ig; }
  }
  printf("golden %-28s %3d positions: max |dlogit| %.3g (bound %.0e), top-1 agrees %d/%d\n", name, n, maxd, BOUND,
         top_agree, top_checked);
  CHECK(maxd <= BOUND, "%s: max |dlogit| %.3g > %.0e", name, maxd, BOUND);
  CHECK(top_agree == top_checked && top_checked > n / 2, "%s: top-1 agreement %d/%d", name, top_agree, top_checked);
  cpu_ref_ops.close(st);
  ds_model_close(&m);
  free(tok); free(lg); free(gold);
}

int main(void) {
  char *txt = slurp(test_src_path("tests/golden/cases.json"), NULL);
  CHECK(txt != NULL, "tests/golden/cases.json readable (VOUCH_SRC=%s)", getenv("VOUCH_SRC"));
  if (!txt) return test_finish();
  cJSON *root = cJSON_Parse(txt);
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) run_case(c);
  cJSON_Delete(root);
  free(txt);
  return test_finish();
}
