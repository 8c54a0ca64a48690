/* Constructed checkpoints: the circuit answers retrieval queries on cpu-ref with the margins
 * the construction promises, in any position, against near-duplicate keys; breaking the
 * attention head or the MoE copy path breaks the answer; the file round trip keeps it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/construct.h"
#include "common/philox.h"
#include "reference/cpu/cpu_ref.h"
#include "suites/paths/paths.h"
#include "tests/cpu/path_specs.h"
#include "tests/harness.h"

/* Prefill n filler tokens with `needles` pairs of family 0 at spread depths, then query each
 * needle; returns the number answered right and the smallest margin. */
static int probe(const ds_model *m, const construct_layout *L, int n, int needles, uint64_t seed, double *min_margin) {
  vpath p;
  vpath_opts po = {.max_seq = 1, .max_ctx = n + needles + 1, .n_threads = 2};
  if (test_open(&p, "cpu-ref", m, &po) != V_OK) { fprintf(stderr, "%s\n", verr_msg()); return -1; }
  const int V = L->vocab;
  int32_t *tok = malloc((size_t)n * sizeof *tok);
  float *lg = malloc((size_t)V * sizeof *lg);
  uint64_t key = philox_key(seed, "probe");
  int keys[8], vals[8], posn[8];
  for (int i = 0; i < n; i++) tok[i] = L->filler0 + (int)(philox_unit(key, (uint64_t)i) * L->n_filler) % L->n_filler;
  tok[0] = L->bos;
  for (int i = 0; i < needles; i++) {
    keys[i] = i;                              /* family 0: keys 0..7 */
    vals[i] = (i * 7 + 3 + (int)seed) % L->o.n_keys; /* distinct values */
    posn[i] = 1 + (int)((double)(n - 2) * (i + 0.5) / needles);
    tok[posn[i]] = construct_pair(L, keys[i], vals[i]);
  }
  int seqv = 0, nt = n, sp = 0, right = 0;
  vstep s = {.n_seq = 1, .seq = &seqv, .n_tokens = &nt, .start_pos = &sp, .tokens = tok};
  vstatus st = p.ops->forward(p.state, &s, lg);
  *min_margin = INFINITY;
  for (int q = 0; q < needles && st == V_OK; q++) {
    int32_t qt = construct_query(L, keys[q]);
    nt = 1;
    sp = n + q;
    s.tokens = &qt;
    st = p.ops->forward(p.state, &s, lg);
    int ans = construct_query(L, vals[q]);
    double best_other = -INFINITY;
    for (int v = 0; v < V; v++)
      if (v != ans && lg[v] > best_other) best_other = lg[v];
    double margin = lg[ans] - best_other;
    if (margin < *min_margin) *min_margin = margin;
    if (margin > 0) right++;
  }
  if (st != V_OK) fprintf(stderr, "%s\n", verr_msg());
  vpath_close(&p);
  free(tok);
  free(lg);
  return st == V_OK ? right : -1;
}

static vtensor *find(ds_model *m, const char *name) {
  for (int i = 0; i < m->n_synth; i++)
    if (!strcmp(m->synth[i].name, name)) return &m->synth[i];
  return NULL;
}

int main(void) {
  ds_model m;
  construct_layout L;
  CHECK_OK(construct_model_open(&m, "recall-mrcr", NULL, 7, &L));
  CHECK(L.query0 + L.o.n_keys <= L.vocab, "layout fits the vocabulary");
  CHECK(construct_is_preset("recall-chain") && !construct_is_preset("tiny"), "preset names");
  double mm;
  int r = probe(&m, &L, 300, 8, 1, &mm);
  printf("recall-mrcr 8 needles, 300 ctx: %d/8 right, min margin %.2f\n", r, mm);
  CHECK(r == 8, "8 near-duplicate needles answered (%d)", r);
  CHECK(mm > 4, "answer margin %.2f > 4 logits", mm);
  r = probe(&m, &L, 1200, 4, 2, &mm);
  printf("recall-mrcr 4 needles, 1200 ctx: %d/4 right, min margin %.2f\n", r, mm);
  CHECK(r == 4, "4 needles at 1200 (%d)", r);

  /* break the MoE copy path: the copy expert's output is gone -> wrong answers */
  char name[160];
  snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%d.down_proj.weight", L.circuit_layer, L.copy_expert);
  vtensor *dn = find(&m, name);
  CHECK(dn != NULL, "copy expert found");
  if (dn) {
    size_t nb = vtensor_nbytes(dn);
    void *save = malloc(nb);
    memcpy(save, dn->data, nb);
    memset(dn->data, 0, nb);
    r = probe(&m, &L, 300, 8, 1, &mm);
    printf("copy expert zeroed: %d/8 right\n", r);
    CHECK(r == 0, "no answer survives without the routed copy expert (%d)", r);
    /* the combine weight without routed_scaling_factor (x 1/2.5) */
    for (int64_t i = 0; i < vtensor_numel(dn); i++)
      ((uint16_t *)dn->data)[i] = f32_to_bf16(bf16_to_f32(((uint16_t *)save)[i]) / 2.5f);
    r = probe(&m, &L, 300, 8, 1, &mm);
    printf("routed weight / 2.5: %d/8 right\n", r);
    CHECK(r == 0, "no answer survives a combine weight without the scaling factor (%d)", r);
    memcpy(dn->data, save, nb);
    free(save);
  }
  /* break the attention softmax scale (scores / 100, e.g. a lost scale fold): attention spreads over the filler */
  snprintf(name, sizeof name, "model.layers.%d.self_attn.kv_b_proj.weight", L.circuit_layer);
  vtensor *kb = find(&m, name);
  if (kb) {
    int64_t c = kb->shape[1], rows = m.cfg.qk_nope_head_dim, r0 = (int64_t)L.circuit_head * (m.cfg.qk_nope_head_dim + m.cfg.v_head_dim);
    for (int64_t i = r0 * c; i < (r0 + rows) * c; i++)
      ((uint16_t *)kb->data)[i] = f32_to_bf16(bf16_to_f32(((uint16_t *)kb->data)[i]) / 100.0f);
    r = probe(&m, &L, 1200, 4, 2, &mm);
    printf("attention scores / 100 at 1200 ctx: %d/4 right\n", r);
    CHECK(r == 0, "no answer survives a 100x smaller softmax scale (%d)", r);
  }
  ds_model_close(&m);

  /* file round trip: the directory loads and answers like the in-memory model */
  char dir[512];
  snprintf(dir, sizeof dir, "%s/recall", test_tmpdir());
  CHECK_OK(construct_write(dir, "recall-chain", NULL, 3));
  construct_layout L2;
  CHECK_OK(construct_layout_load(dir, &L2));
  ds_model m2;
  CHECK_OK(ds_model_open(&m2, dir, 0, 0, true));
  construct_layout L3;
  CHECK_OK(construct_layout_of(&m2, &L3));
  CHECK(L3.query0 == L2.query0 && L2.o.cos == 0.9, "layout read back");
  r = probe(&m2, &L2, 200, 8, 3, &mm);
  printf("recall-chain from disk, 8 needles: %d/8 right, min margin %.2f\n", r, mm);
  CHECK(r == 8, "loaded checkpoint answers (%d)", r);
  ds_model_close(&m2);
  return test_finish();
}
