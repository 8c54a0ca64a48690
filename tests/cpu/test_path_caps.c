/* Paths declare their capabilities (vpath_caps, common/path.h) and the registry decides by them
 * (suites/paths/paths.c), never by a path's name or ops pointer:
 *   - the built-in paths' declarations (cpu-ref: host weights, TP on threads, dcp, ep; in CUDA
 *     builds cuda-ref and latency: device weights, TP over NCCL, dcp on latency only);
 *   - a path registered in code that copies cpu-ref's operations under another name gets TP, dcp and
 *     ep from its declaration: "twin:tp2" computes cpu-ref:tp2's logits bit for bit;
 *   - a twin that declares no TP, no dcp or no ep is refused with the capable paths named and its
 *     own reason appended; a TP refusal names the paths that do have TP;
 *   - a declaration is checked as untrusted input: each bad field is one error naming the origin
 *     and the field (bad name, duplicate, NULL forward, caps.tp out of range, dcp without tp, a bool
 *     that is not 0/1);
 *   - the variant-word helpers the paths' byte models use. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "reference/cpu/cpu_ref.h"
#include "suites/paths/paths.h"
#include "suites/paths/spec.h"
#include "tests/cpu/path_specs.h"
#include "tests/harness.h"

static void test_builtin(void) {
  CHECK(cpu_ref_ops.caps.host_weights && cpu_ref_ops.caps.tp == VPATH_TP_THREADS && cpu_ref_ops.caps.dcp &&
            cpu_ref_ops.caps.ep,
        "cpu-ref declares host weights, threads TP, dcp and ep");
  vpath_spec a, b, u;
  CHECK(vpath_spec_lookup("cpu-ref", &a) == V_OK && vpath_spec_lookup("cpu-ref:tp4:dcp@x", &b) == V_OK &&
            a.caps.host_weights && b.caps.host_weights && b.tp == 4 && b.dcp,
        "cpu-ref: host weights by any name");
  CHECK(vpath_spec_lookup("no-such-path", &u) == V_OK && !u.ops && !u.caps.host_weights,
        "an unknown name has no declaration, so no host weights");
  CHECK(vpath_spec_lookup("cpu-ref:tpx", &u) == V_ERR, "a malformed name is an error");
#ifdef VOUCH_HAVE_CUDA
  const vpath_ops *cr = vpaths_find("cuda-ref"), *lt = vpaths_find("latency");
  CHECK(cr && !cr->caps.host_weights && cr->caps.tp == VPATH_TP_NCCL && !cr->caps.dcp && !cr->caps.ep,
        "cuda-ref: device weights, NCCL TP, no dcp, no ep");
  CHECK(lt && !lt->caps.host_weights && lt->caps.tp == VPATH_TP_NCCL && lt->caps.dcp && !lt->caps.ep,
        "latency: device weights, NCCL TP, dcp, no ep");
#endif
}

static void test_variant_words(void) {
  vpath_spec s;
  CHECK(vpath_spec_split("latency:tp8@tp_nccl,tp_split_in", &s) && !strcmp(s.variant, "tp_nccl,tp_split_in") &&
            !strcmp(s.base, "latency") && s.tp == 8 && !s.ops,
        "variant after '@' (the syntax alone: no registry)");
  CHECK(vpath_spec_parse("cpu-ref", NULL, &s) == V_OK && !strcmp(s.variant, "") && s.ops == &cpu_ref_ops &&
            s.caps.host_weights && s.caps.tp == VPATH_TP_THREADS,
        "no '@': empty variant; the caps are the declaration's");
  CHECK(vpath_variant_has_word("tp_nccl,tp_split_in", "tp_split_in"), "last word found");
  CHECK(vpath_variant_has_word("tp_split_in,x", "tp_split_in"), "first word found");
  CHECK(!vpath_variant_has_word("tp_split_inx", "tp_split_in"), "only whole words count");
  CHECK(!vpath_variant_has_word("", "tp_split_in") && !vpath_variant_has_word("a,,b,", "tp_split_in"),
        "empty words match nothing");
}

/* Logits of one 3-token prefill on path `name` (vocab floats into out). */
static vstatus prefill_logits(const char *name, const ds_model *m, float *out) {
  vpath p;
  vpath_opts o = {.max_seq = 1, .max_ctx = 8, .n_threads = 1};
  VTRY(test_open(&p, name, m, &o));
  const int seq = 0, n = 3, start = 0;
  const int32_t tok[3] = {1, 2, 3};
  const vstep s = {.n_seq = 1, .seq = &seq, .n_tokens = &n, .start_pos = &start, .tokens = tok};
  vstatus r = p.ops->forward(p.state, &s, out);
  vpath_close(&p);
  return r;
}

/* Registered copies of cpu-ref: one with its capabilities, one with none of TP/dcp/ep. */
static vpath_ops g_twin, g_plain;

static void test_registered(const ds_model *m) {
  g_twin = cpu_ref_ops;
  g_twin.name = "twin";
  CHECK_OK(vpaths_register(&g_twin, "test_path_caps.c"));
  g_plain = cpu_ref_ops;
  g_plain.name = "plain";
  g_plain.caps.tp = VPATH_TP_NONE;
  g_plain.caps.dcp = g_plain.caps.ep = false;
  g_plain.caps.no_dcp_why = ": plain has one cache";
  CHECK_OK(vpaths_register(&g_plain, "test_path_caps.c"));
  const int V = m->cfg.vocab_size;
  float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
  if (!a || !b) { CHECK(0, "out of memory"); free(a); free(b); return; }
  CHECK_OK(prefill_logits("cpu-ref:tp2", m, a));
  CHECK_OK(prefill_logits("twin:tp2", m, b));
  CHECK(!memcmp(a, b, sizeof(float) * V), "twin:tp2 runs cpu-ref's TP wrapper from its declaration: bitwise equal");
  CHECK_OK(prefill_logits("twin:tp2:dcp", m, b));
  CHECK_OK(prefill_logits("twin:tp2:ep", m, b));

  vstatus s = prefill_logits("plain:tp2", m, b);
  CHECK(s == V_ERR && strstr(verr_msg(), "this path has no tensor-parallel support (cpu-ref") && strstr(verr_msg(), "twin"),
        "plain:tp2 refused, naming the paths with TP: %s", verr_msg());
  s = prefill_logits("plain:tp2:dcp", m, b);
  CHECK(s == V_UNSUPPORTED && strstr(verr_msg(), "(not plain: plain has one cache)") && strstr(verr_msg(), "twin"),
        "plain dcp not supported with its reason: %s", verr_msg());
  s = prefill_logits("plain:tp2:ep", m, b);
  CHECK(s == V_UNSUPPORTED && strstr(verr_msg(), "expert parallelism is implemented on cpu-ref") &&
            strstr(verr_msg(), "(not plain)"),
        "plain ep not supported: %s", verr_msg());
  free(a);
  free(b);
}

/* One bad declaration: registering it fails naming the origin and `field`. */
static void expect_bad(const vpath_ops *ops, const char *field) {
  vstatus s = vpaths_register(ops, "bad.so");
  CHECK(s == V_ERR && strstr(verr_msg(), "bad.so: ") && strstr(verr_msg(), field), "bad %s: %s", field, verr_msg());
}

static void test_bad_declarations(void) {
  static vpath_ops o[7];
  for (int i = 0; i < 7; i++) {
    o[i] = cpu_ref_ops;
    o[i].name = "bad";
  }
  o[0].name = "has:colon";
  expect_bad(&o[0], "vouch_path_ops.name");
  o[1].name = "cpu-ref";
  expect_bad(&o[1], "vouch_path_ops.name 'cpu-ref' is already a path");
  o[2].forward = NULL;
  expect_bad(&o[2], "vouch_path_ops.forward");
  o[3].caps.tp = (vpath_tp_kind)7;
  expect_bad(&o[3], "vouch_path_ops.caps.tp = 7");
  o[4].caps.tp = VPATH_TP_NONE;
  expect_bad(&o[4], "vouch_path_ops.caps.dcp needs caps.tp");
  memset(&o[5].caps.host_weights, 3, 1);
  expect_bad(&o[5], "vouch_path_ops.caps.host_weights is not a bool");
  o[6].name = "";
  expect_bad(&o[6], "vouch_path_ops.name");
  CHECK(!vpaths_find("bad"), "no bad declaration was registered");
}

int main(void) {
  ds_model m;
  if (ds_model_open(&m, "synth:tiny", 0, 0, true)) {
    fprintf(stderr, "cannot open synth:tiny: %s\n", verr_msg());
    return 1;
  }
  test_builtin();
  test_variant_words();
  test_registered(&m);
  test_bad_declarations();
  ds_model_close(&m);
  return test_finish();
}
