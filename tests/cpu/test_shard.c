/* The TP shard plan (model/shard.h): divisibility errors, local shapes, and every local tensor
 * equal to its slice of the full model, from a materialized full model (views and copies) and
 * from a lazy one (the shard stays lazy, with the right slice rule per split kind, until
 * ds_model_materialize generates exactly the bytes of the materialized model's shard). */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/shard.h"
#include "tests/harness.h"

/* Element (i, j) of a 1-D or 2-D tensor as float. */
static float at(const vtensor *t, int64_t i, int64_t j) {
  int64_t cols = t->ndim > 1 ? t->shape[1] : 1;
  return vtensor_get_f32(t, i * cols + j);
}

static const vtensor *by_name(const ds_model *m, const char *name) {
  if (strcmp(name, "lm_head.weight") == 0) return m->lm_head;
  for (int i = 0; i < m->n_synth; i++)
    if (strcmp(m->synth[i].name, name) == 0) return &m->synth[i];
  return NULL;
}

/* Every tensor of `local` equals the slice of `full` the plan gives rank r of N. Returns
 * the number of mismatching tensors. */
static int compare_slices(const ds_model *full, const ds_model *local, int r, int N) {
  int bad = 0;
  for (int i = 0; i < local->n_synth; i++) {
    const vtensor *t = &local->synth[i];
    const vtensor *f = by_name(full, t->name);
    if (!f || !t->data) {
      bad++;
      continue;
    }
    shard_split sp = ds_shard_rule(t->name);
    const int64_t rows = t->shape[0], cols = t->ndim > 1 ? t->shape[1] : 1;
    int64_t r0 = 0, c0 = 0;
    if (sp == SHARD_ROWS) r0 = r * rows;
    if (sp == SHARD_COLS) c0 = r * cols;
    if (sp == SHARD_VOCAB) r0 = local->vocab_begin;
    /* rows compared as bytes (same dtype); the first row also element by element as floats */
    int64_t diff = t->dtype != f->dtype;
    const size_t esz = vdtype_size(t->dtype);
    const int64_t fcols = f->ndim > 1 ? f->shape[1] : 1;
    for (int64_t a = 0; a < rows && !diff; a++)
      diff += memcmp((const char *)t->data + (size_t)(a * cols) * esz,
                     (const char *)f->data + (size_t)((r0 + a) * fcols + c0) * esz, (size_t)cols * esz) != 0;
    for (int64_t b = 0; b < cols && rows > 0; b++) {
      float x = at(t, 0, b), y = at(f, r0, c0 + b);
      diff += memcmp(&x, &y, sizeof x) != 0;
    }
    if (diff) {
      fprintf(stderr, "  %s (rank %d/%d, %s): %lld rows/elements differ\n", t->name, r, N, ds_shard_split_name(sp),
              (long long)diff);
      bad++;
    }
  }
  return bad;
}

/* Every rule local->lazy[i] is the slice of `full`'s tensor the plan gives rank r of N: the
 * full tensor's spec (lm_head tied: the embedding's), start / rows x cols / stride by split
 * kind. Counts the tensors seen per split kind into seen[4]; returns the mismatches. */
static int check_rules(const ds_model *full, const ds_model *local, int r, int N, int seen[4]) {
  int bad = 0;
  CHECK(local->lazy != NULL, "shard of a synthetic model records rules");
  if (!local->lazy) return 1;
  for (int i = 0; i < local->n_synth; i++) {
    const vtensor *t = &local->synth[i];
    const vtensor *f = by_name(full, t->name);
    const ds_synth_slice *sl = &local->lazy[i];
    if (!f) {
      bad++;
      continue;
    }
    const shard_split sp = ds_shard_rule(t->name);
    const int64_t rows = t->shape[0], cols = t->ndim > 1 ? t->shape[1] : 1;
    const int64_t fcols = f->ndim > 1 ? f->shape[1] : 1;
    int64_t start = 0;
    if (sp == SHARD_ROWS) start = r * rows * fcols;
    if (sp == SHARD_COLS) start = r * cols;
    if (sp == SHARD_VOCAB) {
      int v0, v1;
      ds_shard_vocab(full->cfg.vocab_size, N, r, &v0, &v1);
      start = (int64_t)v0 * fcols;
    }
    const bool ok = strcmp(sl->spec.name, f->name) == 0 && sl->spec.shape[0] == f->shape[0] &&
                    (f->ndim == 1 || sl->spec.shape[1] == fcols) && sl->spec.dtype == f->dtype &&
                    (sl->spec.kind != SYN_LINEAR || sl->spec.fan_in == fcols) && sl->start == start &&
                    sl->rows == rows && sl->cols == cols && sl->stride == fcols;
    if (!ok) {
      fprintf(stderr, "  %s (rank %d/%d, %s): rule %s start %lld [%lld x %lld] stride %lld fan_in %d; want %s start "
              "%lld [%lld x %lld] stride %lld\n", t->name, r, N, ds_shard_split_name(sp), sl->spec.name,
              (long long)sl->start, (long long)sl->rows, (long long)sl->cols, (long long)sl->stride, sl->spec.fan_in,
              f->name, (long long)start, (long long)rows, (long long)cols, (long long)fcols);
      bad++;
    }
    seen[sp]++;
  }
  return bad;
}

/* Tensors of `m` with host data, and tensors of a and b whose bytes differ. */
static int with_data(const ds_model *m) {
  int n = 0;
  for (int i = 0; i < m->n_synth; i++) n += m->synth[i].data != NULL;
  return n;
}
static int byte_diffs(const ds_model *a, const ds_model *b) {
  int bad = 0;
  for (int i = 0; i < a->n_synth && i < b->n_synth; i++) {
    const vtensor *x = &a->synth[i], *y = &b->synth[i];
    const size_t n = vtensor_nbytes(x);
    if (strcmp(x->name, y->name) || x->dtype != y->dtype || n != vtensor_nbytes(y) || !x->data || !y->data ||
        memcmp(x->data, y->data, n)) {
      fprintf(stderr, "  %s: bytes differ\n", x->name);
      bad++;
    }
  }
  return bad + (a->n_synth != b->n_synth);
}

static void test_rules(void) {
  CHECK(ds_shard_rule("model.layers.0.self_attn.q_a_proj.weight") == SHARD_REPLICATE, "q_a_proj replicated");
  CHECK(ds_shard_rule("model.layers.0.self_attn.kv_a_proj_with_mqa.weight") == SHARD_REPLICATE, "kv_a replicated");
  CHECK(ds_shard_rule("model.layers.0.self_attn.q_b_proj.weight") == SHARD_ROWS, "q_b rows");
  CHECK(ds_shard_rule("model.layers.0.self_attn.q_proj.weight") == SHARD_ROWS, "q_proj rows");
  CHECK(ds_shard_rule("model.layers.0.self_attn.kv_b_proj.weight") == SHARD_ROWS, "kv_b rows");
  CHECK(ds_shard_rule("model.layers.0.self_attn.o_proj.weight") == SHARD_COLS, "o_proj cols");
  CHECK(ds_shard_rule("model.layers.1.mlp.gate.weight") == SHARD_REPLICATE, "router replicated");
  CHECK(ds_shard_rule("model.layers.1.mlp.gate.e_score_correction_bias") == SHARD_REPLICATE, "bias replicated");
  CHECK(ds_shard_rule("model.layers.1.mlp.experts.3.up_proj.weight") == SHARD_ROWS, "expert up rows");
  CHECK(ds_shard_rule("model.layers.1.mlp.experts.3.down_proj.weight") == SHARD_COLS, "expert down cols");
  CHECK(ds_shard_rule("model.layers.1.mlp.shared_experts.gate_proj.weight") == SHARD_ROWS, "shared gate rows");
  CHECK(ds_shard_rule("model.layers.0.mlp.down_proj.weight") == SHARD_COLS, "dense down cols");
  CHECK(ds_shard_rule("model.embed_tokens.weight") == SHARD_REPLICATE, "embed replicated");
  CHECK(ds_shard_rule("lm_head.weight") == SHARD_VOCAB, "lm_head vocab");
  CHECK(ds_shard_rule("model.layers.0.input_layernorm.weight") == SHARD_REPLICATE, "norm replicated");
}

static void test_errors(void) {
  ds_config c;
  CHECK_OK(ds_preset_config("tiny", 0, &c));
  for (int n = 1; n <= 16; n *= 2) CHECK(ds_shard_check(&c, n) == V_OK, "tiny TP %d divides: %s", n, verr_msg());
  CHECK(ds_shard_check(&c, 3) == V_ERR, "TP 3 on tiny is an error");
  CHECK(strstr(verr_msg(), "TP 3 needs num_attention_heads (16) divisible by 3") != NULL, "message: %s", verr_msg());
  CHECK(ds_shard_check(&c, 32) == V_ERR && strstr(verr_msg(), "divisible by 32"), "TP 32: %s", verr_msg());
  CHECK(ds_shard_check(&c, 0) == V_ERR, "TP 0 is an error");
  ds_config d = c;
  d.moe_intermediate_size = 24; /* 16 heads divide by 16, 24 does not */
  CHECK(ds_shard_check(&d, 16) == V_ERR && strstr(verr_msg(), "moe_intermediate_size (24) divisible by 16"), "moe: %s",
        verr_msg());
  CHECK(ds_shard_check(&d, 8) == V_OK, "24 divides by 8");
  d = c;
  d.intermediate_size = 520;
  CHECK(ds_shard_check(&d, 16) == V_ERR && strstr(verr_msg(), "intermediate_size (520) divisible by 16"), "dense: %s",
        verr_msg());
  ds_model full, local;
  CHECK_OK(ds_model_open(&full, "synth:tiny", 3, 0, false));
  CHECK(ds_shard_model(&local, &full, 0, 3) == V_ERR && strstr(verr_msg(), "divisible by 3"), "shard TP 3: %s",
        verr_msg());
  CHECK(ds_shard_model(&local, &full, 4, 4) == V_ERR && strstr(verr_msg(), "rank 4 out of range"),
        "rank 4 of 4 is an error: %s", verr_msg());
  CHECK(ds_shard_model(&local, &full, -1, 2) == V_ERR && strstr(verr_msg(), "rank -1 out of range"),
        "rank -1 of 2 is an error: %s", verr_msg());
  /* a lazy shard whose rule is lost cannot be materialized (and says which tensor) */
  CHECK_OK(ds_shard_model(&local, &full, 1, 2));
  if (local.lazy) {
    local.lazy[3].spec.name[0] = 0;
    CHECK(ds_model_materialize(&local) == V_ERR && strstr(verr_msg(), local.synth[3].name) &&
              strstr(verr_msg(), "no synthesis rule"),
          "materialize without a rule: %s", verr_msg());
  }
  ds_model_close(&local);
  ds_model_close(&full);
  /* a materialized full model: the same rank errors */
  CHECK_OK(ds_model_open(&full, "synth:tiny", 3, 0, true));
  CHECK(ds_shard_model(&local, &full, 2, 2) == V_ERR && strstr(verr_msg(), "rank 2 out of range"),
        "rank 2 of 2 (materialized) is an error: %s", verr_msg());
  ds_model_close(&full);
}

static void test_vocab(void) {
  int v0, v1, next = 0;
  for (int r = 0; r < 16; r++) {
    ds_shard_vocab(1000, 16, r, &v0, &v1);
    CHECK(v0 == next && v1 > v0 && v1 - v0 <= 63, "rank %d: [%d, %d)", r, v0, v1);
    next = v1;
  }
  CHECK(next == 1000, "blocks cover the vocabulary (end %d)", next);
  ds_shard_vocab(1024, 4, 3, &v0, &v1);
  CHECK(v0 == 768 && v1 == 1024, "1024/4 rank 3: [%d, %d)", v0, v1);
}

static void test_shapes_and_values(const char *label, const ds_config *cfg, const int *tps, int n_tps) {
  ds_model full, lazy;
  CHECK_OK(ds_model_synth(&full, cfg, label, 11, true));
  CHECK_OK(ds_model_synth(&lazy, cfg, label, 11, false));
  const ds_config *c = &full.cfg;
  for (int k = 0; k < n_tps; k++) {
    const int N = tps[k];
    for (int r = 0; r < N; r++) {
      ds_model a, b;
      vstatus sa = ds_shard_model(&a, &full, r, N), sb = ds_shard_model(&b, &lazy, r, N);
      CHECK(sa == V_OK && sb == V_OK, "%s TP %d rank %d: %s", label, N, r, verr_msg());
      if (sa || sb) {
        if (!sa) ds_model_close(&a);
        if (!sb) ds_model_close(&b);
        continue;
      }
      const ds_layer *y0 = &a.layers[0], *y1 = &a.layers[c->num_hidden_layers - 1];
      const int Hl = c->num_attention_heads / N;
      CHECK(a.cfg.num_attention_heads == Hl && a.cfg.num_key_value_heads == Hl, "local heads %d",
            a.cfg.num_attention_heads);
      CHECK(a.tp_rank == r && a.tp_size == N, "tp fields %d/%d", a.tp_rank, a.tp_size);
      if (c->q_lora_rank > 0)
        CHECK(y0->q_b_proj->shape[0] == (int64_t)Hl * c->qk_head_dim && y0->q_b_proj->shape[1] == c->q_lora_rank,
              "q_b_proj shape");
      CHECK(y0->kv_b_proj->shape[0] == (int64_t)Hl * (c->qk_nope_head_dim + c->v_head_dim), "kv_b_proj rows");
      CHECK(y0->kv_a_proj_with_mqa->shape[0] == c->kv_lora_rank + c->qk_rope_head_dim, "kv_a replicated");
      CHECK(y0->o_proj->shape[0] == c->hidden_size && y0->o_proj->shape[1] == (int64_t)Hl * c->v_head_dim,
            "o_proj [%lld, %lld]", (long long)y0->o_proj->shape[0], (long long)y0->o_proj->shape[1]);
      CHECK(!y0->is_moe && y0->gate_proj->shape[0] == c->intermediate_size / N &&
                y0->down_proj->shape[1] == c->intermediate_size / N,
            "dense split");
      CHECK(y1->is_moe && y1->exp_up[0]->shape[0] == c->moe_intermediate_size / N &&
                y1->exp_down[c->n_routed_experts - 1]->shape[1] == c->moe_intermediate_size / N,
            "expert split");
      CHECK(y1->router->shape[0] == c->n_routed_experts && y1->router->shape[1] == c->hidden_size, "router whole");
      if (c->n_shared_experts > 0)
        CHECK(y1->sh_down->shape[1] == (int64_t)c->moe_intermediate_size * c->n_shared_experts / N, "shared split");
      int v0, v1;
      ds_shard_vocab(c->vocab_size, N, r, &v0, &v1);
      CHECK(a.vocab_begin == v0 && a.vocab_end == v1 && a.lm_head->shape[0] == v1 - v0, "lm_head rows [%d, %d)", v0,
            v1);
      CHECK(a.embed->shape[0] == c->vocab_size, "embeddings replicated");
      CHECK(compare_slices(&full, &a, r, N) == 0, "%s TP %d rank %d: slices of the materialized model", label, N, r);
      /* the lazy shard: nothing generated, every tensor's rule is its slice of the full tensor */
      CHECK(with_data(&a) == a.n_synth, "%s TP %d rank %d: materialized shard has all data", label, N, r);
      CHECK(with_data(&b) == 0, "%s TP %d rank %d: lazy shard holds no host data (%d tensors do)", label, N, r,
            with_data(&b));
      int seen[4] = {0};
      CHECK(check_rules(&full, &a, r, N, seen) == 0, "%s TP %d rank %d: rules of the materialized shard", label, N, r);
      memset(seen, 0, sizeof seen);
      CHECK(check_rules(&lazy, &b, r, N, seen) == 0, "%s TP %d rank %d: rules of the lazy shard", label, N, r);
      CHECK(seen[SHARD_REPLICATE] > 0 && seen[SHARD_ROWS] > 0 && seen[SHARD_COLS] > 0 && seen[SHARD_VOCAB] == (N > 1 || !c->tie_word_embeddings),
            "%s TP %d: split kinds seen %d %d %d %d", label, N, seen[0], seen[1], seen[2], seen[3]);
      CHECK_OK(ds_model_materialize(&b));
      CHECK(with_data(&b) == b.n_synth, "%s TP %d rank %d: materialized lazy shard has all data", label, N, r);
      CHECK(byte_diffs(&a, &b) == 0, "%s TP %d rank %d: materialized lazy shard == shard of the materialized model",
            label, N, r);
      CHECK(compare_slices(&full, &b, r, N) == 0, "%s TP %d rank %d: lazily synthesized shard", label, N, r);
      ds_model_close(&a);
      ds_model_close(&b);
    }
  }
  ds_model_close(&full);
  ds_model_close(&lazy);
}

int main(void) {
  test_rules();
  test_errors();
  test_vocab();
  ds_config c;
  CHECK_OK(ds_preset_config("tiny", 0, &c));
  const int tps[] = {1, 2, 4, 16};
  test_shapes_and_values("tiny", &c, tps, 4);
  /* tied embeddings and a vocabulary TP 16 does not divide (ceil blocks, last one short) */
  ds_config t = c;
  t.tie_word_embeddings = true;
  t.vocab_size = 1000;
  const int tps2[] = {16, 8};
  test_shapes_and_values("tiny-tied-v1000", &t, tps2, 2);
  /* small: tensors large enough for the threaded generation (column blocks across chunks) */
  CHECK_OK(ds_preset_config("small", 0, &c));
  const int tps3[] = {2, 4};
  test_shapes_and_values("small", &c, tps3, 2);
  return test_finish();
}
