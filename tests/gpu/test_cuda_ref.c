/* cuda-ref against the CPU: (1) weights generated on the GPU equal the CPU synthesizer's
 * bits; (2) cuda-ref logits follow cpu-ref's on synth:tiny (prefill 16 + 16 decode steps,
 * batch 1 and batch 3 with a mixed prefill+decode step, teacher-forced with cpu-ref's
 * top-1); (3) prefill(N) with all logits equals N single decode steps; plus lazy (GPU
 * generated) and uploaded weights giving bit-identical logits, supports(), fill_cache.
 *
 * Tolerances (logits compared per row, relative to the rms r of cpu-ref's row, ~1 here):
 * cuda-ref stores every activation in bf16 (unit roundoff u = 2^-9, rms relative error
 * per rounding ~u/sqrt(3) = 1.1e-3) while cpu-ref keeps float32; weights are the same
 * bf16 values on both sides. About 12 roundings lie on the path through each of the 3
 * layers plus the final norm, so the hidden state drifts by ~sqrt(40) * 1.1e-3 = 0.7% rms;
 * the largest of 1024 logits deviates by ~3.5 sigma of that: ~0.03 r. The bound for a
 * row is max|dlogit| <= 0.1 r (3x margin) and the pooled rms error <= 0.02 r.
 * One thing bf16 cannot bound: the router. When two experts' selection scores are
 * within the bf16 noise (~1e-3) the paths can pick different experts for a token; that
 * token's hidden state then moves by a whole expert output (~0.3 r, max over the vocab
 * ~1 r). Such rows are reported as outliers; at most 15% of rows may be outliers, and
 * even those stay below 4 r (garbage logits would be ~5 r). A real bug (wrong RoPE,
 * head layout, cache index, softmax) moves every row and fails the 10% rule.
 * Top-1: every non-outlier row where cpu-ref's top1-top2 margin > 0.05 must agree. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/path.h"
#include "common/trace.h"
#include "model/model.h"
#include "common/philox.h"
#include "reference/cpu/cpu_ref.h"
#include "reference/cuda/cuda_ref.h"
#include "tests/harness.h"
#include "tests/logit_compare.h"

#define SEED 20240917ull
#define PROMPT 16
#define DECODE 16
#define TIGHT 0.10        /* max|d| / r for a clean row */
#define MAX_OUTLIERS 0.15 /* fraction of rows (12 of 115 seen on an H200: router near-ties cascade through the KV cache) */


/* Runs one step; returns malloc'ed logits [rows, V] or NULL (after a failed CHECK). */
static float *run_step(const vpath_ops *ops, void *st, const vstep *s, int V) {
  const int rows = vstep_logit_rows(s);
  float *l = malloc((size_t)rows * V * sizeof(float));
  if (!l) {
    CHECK(0, "out of memory");
    return NULL;
  }
  for (size_t i = 0; i < (size_t)rows * V; i++) l[i] = NAN; /* poison: every logit must be written */
  vstatus r = ops->forward(st, s, l);
  CHECK(r == V_OK, "%s forward: %s", ops->name, verr_msg());
  if (r != V_OK) {
    free(l);
    return NULL;
  }
  return l;
}

static int32_t prompt_token(int which, int i, int V) {
  return (int32_t)(philox_bits(philox_key(SEED, "test_cuda_ref.prompt"), (uint64_t)which * 1000 + i) % (uint32_t)V);
}

/* (1) every tensor of synth:tiny generated on the GPU equals the CPU's bits. */
static void test_synth_bits(const ds_model *cpu) {
  ds_tensor_spec *specs;
  int n;
  CHECK_OK(ds_tensor_specs(&cpu->cfg, &specs, &n));
  if (g_test_fail) return;
  CHECK(n == cpu->n_synth, "spec count %d vs model %d", n, cpu->n_synth);
  int bad = 0;
  for (int i = 0; i < n && i < cpu->n_synth; i++) {
    const size_t bytes = (size_t)vtensor_numel(&cpu->synth[i]) * vdtype_size(specs[i].dtype);
    void *buf = malloc(bytes);
    if (!buf) { CHECK(0, "out of memory"); break; }
    vstatus s = cuda_synth_tensor_host(buf, &specs[i], SEED, specs[i].dtype);
    CHECK(s == V_OK, "cuda_synth_tensor_host(%s): %s", specs[i].name, verr_msg());
    if (s == V_OK && (cpu->synth[i].dtype != specs[i].dtype || memcmp(buf, cpu->synth[i].data, bytes) != 0)) {
      if (bad++ < 5) fprintf(stderr, "  GPU synth differs from CPU: %s\n", specs[i].name);
    }
    free(buf);
  }
  CHECK(bad == 0, "%d of %d tensors differ between GPU and CPU synthesis", bad, n);
  printf("synth bits: %d tensors compared, %d differ\n", n, bad);
  free(specs);
}

/* (2) batch 1: prefill 16 then 16 decode steps, teacher-forced with cpu-ref's top-1.
 * Returns cuda-ref's prefill logits (for the lazy/uploaded identity check). */
static float *batch1(void *cs, void *gs, int V, cmp_stats *c) {
  int32_t tok[PROMPT];
  for (int i = 0; i < PROMPT; i++) tok[i] = prompt_token(0, i, V);
  int seq = 0, n = PROMPT, sp = 0;
  vstep s = {1, &seq, &n, &sp, tok, true, NULL};
  float *lc = run_step(&cpu_ref_ops, cs, &s, V), *lg = run_step(&cuda_ref_ops, gs, &s, V);
  if (!lc || !lg) { free(lc); free(lg); return NULL; }
  cmp_rows(c, lc, lg, PROMPT, V, "b1 prefill");
  int t1;
  float m;
  cmp_top2(lc + (size_t)(PROMPT - 1) * V, V, &t1, &m);
  free(lc);
  for (int k = 0; k < DECODE; k++) {
    int32_t t = t1;
    int one = 1, pos = PROMPT + k;
    vstep d = {1, &seq, &one, &pos, &t, false, NULL};
    float *dc = run_step(&cpu_ref_ops, cs, &d, V), *dg = run_step(&cuda_ref_ops, gs, &d, V);
    if (!dc || !dg) { free(dc); free(dg); break; }
    cmp_rows(c, dc, dg, 1, V, "b1 decode");
    cmp_top2(dc, V, &t1, &m);
    free(dc);
    free(dg);
  }
  return lg;
}

/* (2) batch 3 in slots {3, 1, 2}: two prefills, then a mixed step (two decodes + a
 * prefill), then 16 decode steps of all three. */
static void batch3(void *cs, void *gs, int V, cmp_stats *c) {
  const int slots[3] = {3, 1, 2};
  for (int i = 0; i < 3; i++) {
    CHECK_OK(cpu_ref_ops.reset(cs, slots[i]));
    CHECK_OK(cuda_ref_ops.reset(gs, slots[i]));
  }
  int32_t tok[3 * PROMPT + 3];
  int len[3] = {0, 0, 0};
  int32_t next[3];
  /* step A: sequences 0 and 1 prefill */
  {
    for (int i = 0; i < 2 * PROMPT; i++) tok[i] = prompt_token(1 + i / PROMPT, i % PROMPT, V);
    int n[2] = {PROMPT, PROMPT}, sp[2] = {0, 0};
    vstep s = {2, slots, n, sp, tok, true, NULL};
    float *lc = run_step(&cpu_ref_ops, cs, &s, V), *lg = run_step(&cuda_ref_ops, gs, &s, V);
    if (!lc || !lg) { free(lc); free(lg); return; }
    cmp_rows(c, lc, lg, 2 * PROMPT, V, "b3 prefill");
    float m;
    cmp_top2(lc + (size_t)(PROMPT - 1) * V, V, &next[0], &m);
    cmp_top2(lc + (size_t)(2 * PROMPT - 1) * V, V, &next[1], &m);
    free(lc);
    free(lg);
    len[0] = len[1] = PROMPT;
  }
  /* step B (mixed): decode 0 and 1, prefill 2; last-token logits only */
  {
    tok[0] = next[0];
    tok[1] = next[1];
    for (int i = 0; i < PROMPT; i++) tok[2 + i] = prompt_token(3, i, V);
    int n[3] = {1, 1, PROMPT}, sp[3] = {len[0], len[1], 0};
    vstep s = {3, slots, n, sp, tok, false, NULL};
    float *lc = run_step(&cpu_ref_ops, cs, &s, V), *lg = run_step(&cuda_ref_ops, gs, &s, V);
    if (!lc || !lg) { free(lc); free(lg); return; }
    cmp_rows(c, lc, lg, 3, V, "b3 mixed");
    float m;
    for (int i = 0; i < 3; i++) cmp_top2(lc + (size_t)i * V, V, &next[i], &m);
    free(lc);
    free(lg);
    len[0]++, len[1]++, len[2] = PROMPT;
  }
  for (int k = 0; k < DECODE; k++) {
    int n[3] = {1, 1, 1}, sp[3] = {len[0], len[1], len[2]};
    vstep s = {3, slots, n, sp, next, false, NULL};
    float *lc = run_step(&cpu_ref_ops, cs, &s, V), *lg = run_step(&cuda_ref_ops, gs, &s, V);
    if (!lc || !lg) { free(lc); free(lg); return; }
    cmp_rows(c, lc, lg, 3, V, "b3 decode");
    float m;
    for (int i = 0; i < 3; i++) cmp_top2(lc + (size_t)i * V, V, &next[i], &m), len[i]++;
    free(lc);
    free(lg);
  }
}

/* (3) prefill(N) all_logits vs N single decode steps, both on cuda-ref (uploaded weights). */
static void prefill_vs_decode(void *gs, int V, const float *lazy_prefill) {
  int32_t tok[PROMPT];
  for (int i = 0; i < PROMPT; i++) tok[i] = prompt_token(0, i, V);
  int seq = 0, n = PROMPT, sp = 0;
  CHECK_OK(cuda_ref_ops.reset(gs, 0));
  vstep s = {1, &seq, &n, &sp, tok, true, NULL};
  float *pre = run_step(&cuda_ref_ops, gs, &s, V);
  if (!pre) return;
  if (lazy_prefill) {
    const int same = memcmp(pre, lazy_prefill, (size_t)PROMPT * V * sizeof(float)) == 0;
    CHECK(same, "weights generated on the GPU and weights uploaded from the host give different logits");
    printf("lazy (GPU-generated) vs uploaded weights: prefill logits %s\n", same ? "bit-identical" : "DIFFER");
  }
  cmp_stats c = {.what = "cuda-ref prefill vs decode", .tight = 0.05};
  int seq1 = 1;
  CHECK_OK(cuda_ref_ops.reset(gs, 1));
  for (int i = 0; i < PROMPT; i++) {
    int one = 1, pos = i;
    vstep d = {1, &seq1, &one, &pos, &tok[i], false, NULL};
    float *l = run_step(&cuda_ref_ops, gs, &d, V);
    if (!l) break;
    cmp_rows(&c, pre + (size_t)i * V, l, 1, V, "decode");
    free(l);
  }
  cmp_finish(&c, MAX_OUTLIERS);
  free(pre);
}

/* supports(): capacity limits are V_UNSUPPORTED, malformed steps V_ERR. */
static void test_supports(void *gs, int max_ctx) {
  int32_t t[4] = {5, 6, 7, 8};
  int seq = 2, n = 4, sp = max_ctx - 2;
  vstep s = {1, &seq, &n, &sp, t, false, NULL};
  CHECK(cuda_ref_ops.supports(gs, &s) == V_UNSUPPORTED, "positions past max_ctx must be V_UNSUPPORTED");
  CHECK_OK(cuda_ref_ops.reset(gs, 2));
  sp = 3; /* cache of slot 2 is empty: a gap */
  CHECK(cuda_ref_ops.supports(gs, &s) == V_ERR, "a step past the cached length must be an error");
  int seqs[2] = {1, 1}, ns[2] = {1, 1}, sps[2] = {0, 0};
  vstep dup = {2, seqs, ns, sps, t, false, NULL};
  CHECK(cuda_ref_ops.supports(gs, &dup) == V_ERR, "duplicate slots must be an error");
  int big = 99;
  vstep slot_out = {1, &big, &n, sps, t, false};
  CHECK(cuda_ref_ops.supports(gs, &slot_out) == V_UNSUPPORTED, "a slot past max_seq must be V_UNSUPPORTED");
  sp = 0;
  int32_t badtok = 1 << 30;
  vstep bt = {1, &seq, &ns[0], &sp, &badtok, false, NULL};
  float *l = malloc((size_t)65536 * sizeof(float)); /* >= one row of logits */
  if (l) CHECK(cuda_ref_ops.forward(gs, &bt, l) == V_ERR, "a token outside the vocabulary must be an error");
  free(l);
}

/* fill_cache: deterministic per seed, then decoding works on top of it. */
static void test_fill(void *gs, int V) {
  float *l[3] = {0};
  const uint64_t seeds[3] = {7, 7, 8};
  for (int k = 0; k < 3; k++) {
    CHECK_OK(cuda_ref_ops.fill_cache(gs, 2, 40, seeds[k]));
    int32_t t = 3;
    int seq = 2, one = 1, pos = 40;
    vstep d = {1, &seq, &one, &pos, &t, false, NULL};
    l[k] = run_step(&cuda_ref_ops, gs, &d, V);
  }
  if (l[0] && l[1] && l[2]) {
    int finite = 1;
    for (int i = 0; i < V; i++) finite &= isfinite(l[0][i]) != 0;
    CHECK(finite, "fill_cache + decode gave non-finite logits");
    CHECK(memcmp(l[0], l[1], (size_t)V * sizeof(float)) == 0, "fill_cache with the same seed is not deterministic");
    CHECK(memcmp(l[0], l[2], (size_t)V * sizeof(float)) != 0, "fill_cache ignores its seed");
  }
  for (int k = 0; k < 3; k++) free(l[k]);
}

int main(void) {
  if (cuda_device_count() == 0) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  ds_model cpu, lazy;
  CHECK_OK(ds_model_open(&cpu, "synth:tiny", SEED, 0, true));
  CHECK_OK(ds_model_open(&lazy, "synth:tiny", SEED, 0, false));
  if (g_test_fail) return test_finish();
  const int V = cpu.cfg.vocab_size;

  test_synth_bits(&cpu);

  vtrace tr;
  vtrace_init(&tr, true);
  vpath_opts o = {4, 64, 0, 0, NULL, NULL};
  vpath_opts og = o;
  og.trace = &tr;
  void *cs = NULL, *gs = NULL, *gu = NULL;
  CHECK_OK(cpu_ref_ops.open(&cs, &cpu, &o));
  CHECK_OK(cuda_ref_ops.open(&gs, &lazy, &og));
  if (cs && gs) {
    cmp_stats c = {.what = "cuda-ref vs cpu-ref", .tight = TIGHT};
    float *lazy_pre = batch1(cs, gs, V, &c);
    batch3(cs, gs, V, &c);
    cmp_finish(&c, MAX_OUTLIERS);
    const char *ops[] = {"embed", "rmsnorm", "linear", "rope", "kv_cache_store", "attention", "residual_add",
                         "silu_mul", "router_topk", "moe_gather", "moe_scatter_add", "lm_head"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
      CHECK(vtrace_has(&tr, ops[i], "ref", 0), "trace lacks cuda-ref op '%s'", ops[i]);
    CHECK_OK(cuda_ref_ops.open(&gu, &cpu, &o));
    if (gu) prefill_vs_decode(gu, V, lazy_pre);
    free(lazy_pre);
    test_supports(gs, o.max_ctx);
    test_fill(gs, V);
  }
  if (gu) cuda_ref_ops.close(gu);
  if (gs) cuda_ref_ops.close(gs);
  if (cs) cpu_ref_ops.close(cs);
  vtrace_free(&tr);
  ds_model_close(&lazy);
  ds_model_close(&cpu);
  return test_finish();
}
