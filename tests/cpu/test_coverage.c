/* The coverage table (issue 37): a path's choices (vpath_ops.selectable) through the wrappers vpath_open
 * puts around it, cpu-ref's and its TP wrapper's against what their steps record; `vouch coverage` on
 * a path that does not enumerate; the report's join of the choices with the other records' `ran` on a
 * hand-made results set with a known gap; a run without coverage records. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/read_file.h"
#include "common/trace.h"
#include "reference/cpu/cpu_ref.h"
#include "runner/evidence/report.h"
#include "runner/evidence/report_coverage.h"
#include "suites/coverage/coverage_suite.h"
#include "suites/engine/record.h"
#include "suites/paths/paths.h"
#include "suites/paths/spec.h"
#include "tests/harness.h"

/* True when every `ran` event of `ran` is among sel's events (same path, op and variant). */
static bool ran_within(const vtrace *ran, const vtrace *sel, char *missing, size_t cap) {
  for (int i = 0; i < ran->n; i++) {
    const vtrace_event *e = &ran->ev[i];
    if (e->kind != TR_RAN) continue;
    bool found = false;
    for (int j = 0; j < sel->n && !found; j++)
      found = sel->ev[j].kind == TR_RAN && !strcmp(sel->ev[j].path, e->path) && !strcmp(sel->ev[j].op, e->op) &&
              !strcmp(sel->ev[j].variant, e->variant);
    if (!found) {
      snprintf(missing, cap, "%s %s/%s", e->path, e->op, e->variant);
      return false;
    }
  }
  return true;
}

/* Opens `name` on m, runs decode and verification steps, and checks its choices hold every pair it ran. */
static void check_path(const ds_model *m, const char *name, int want_min) {
  vpath_spec sp;
  CHECK_OK(vpath_spec_parse(name, NULL, &sp));
  vpath p = {0};
  vpath_opts o = {.max_seq = 8, .max_ctx = 64, .n_threads = 1};
  CHECK_OK(vpath_open(&p, &sp, m, &o));
  if (!p.ops) return;
  CHECK(p.ops->selectable != NULL, "%s: the wrapper forwards selectable", name);
  /* decode at batch 1 and 3, then a 3-token verification step */
  const int V = m->cfg.vocab_size;
  float *logits = malloc((size_t)9 * V * sizeof(float));
  int seq[3] = {0, 1, 2}, one[3] = {1, 1, 1}, three[1] = {3}, pos[3] = {0, 0, 0};
  int32_t tok[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  vstep s1 = {.n_seq = 1, .seq = seq, .n_tokens = one, .start_pos = pos, .tokens = tok};
  vstep s3 = {.n_seq = 3, .seq = seq, .n_tokens = one, .start_pos = (int[]){1, 0, 0}, .tokens = tok};
  vstep sv = {.n_seq = 1, .seq = seq, .n_tokens = three, .start_pos = (int[]){2}, .tokens = tok, .all_logits = true};
  CHECK_OK(p.ops->forward(p.state, &s1, logits));
  CHECK_OK(p.ops->forward(p.state, &s3, logits));
  CHECK_OK(p.ops->forward(p.state, &sv, logits));
  free(logits);
  vtrace sel;
  vtrace_init_tally(&sel);
  const vpath_envelope env = {.max_batch = 8, .max_context = 32, .max_tokens = 4};
  CHECK_OK(p.ops->selectable(p.state, &env, &sel));
  char missing[160] = "";
  CHECK(ran_within(vpath_ran(&p), &sel, missing, sizeof missing), "%s: its choices hold every pair it ran (missing %s)",
        name, missing);
  CHECK(sel.n >= want_min, "%s: %d choices (>= %d)", name, sel.n, want_min);
  const vtrace *ran = vpath_ran(&p);
  bool choices_ran = true;
  for (int i = 0; i < sel.n; i++) { /* cpu-ref has one variant per op: every choice ran */
    bool f = false;
    for (int j = 0; j < ran->n && !f; j++) f = !strcmp(ran->ev[j].op, sel.ev[i].op) && !strcmp(ran->ev[j].variant, sel.ev[i].variant);
    choices_ran &= f;
  }
  CHECK(choices_ran, "%s: every choice of a one-variant path ran in its steps", name);
  vtrace_free(&sel);
  vpath_close(&p);
}

/* A path like cpu-ref without an enumeration (a library of ABI 1 reads the same: selectable NULL). */
static vpath_ops g_noenum;

static void test_suite_without_enumeration(void) {
  g_noenum = cpu_ref_ops;
  g_noenum.name = "cov-noenum";
  g_noenum.selectable = NULL;
  CHECK_OK(vpaths_register(&g_noenum, "test_coverage.c"));
  char json[1024];
  snprintf(json, sizeof json, "%s/coverage.json", test_tmpdir());
  char *argv[] = {"coverage", "--model", "synth:tiny", "--paths", "cpu-ref,cov-noenum", "--batch", "4", "--context",
                  "64", "--spec", "3", "--json", json};
  const int rc = vsuite_main(&vsuite_coverage, (int)(sizeof argv / sizeof *argv), argv, NULL);
  CHECK(rc == 0, "vouch coverage exits 0 (%d)", rc);
  char *text = NULL;
  size_t n = 0;
  CHECK_OK(vfile_read(json, &text, &n));
  CHECK(text && strstr(text, "\"case_id\":\t\"attention/cpu on synth:tiny\"") &&
            strstr(text, "\"choice\":\t\"attention/cpu\"") && strstr(text, "\"max_tokens\":\t4"),
        "cpu-ref's choices are records, the envelope in their params");
  CHECK(text && strstr(text, "\"path\":\t\"cov-noenum\"") && strstr(text, "\"status\":\t\"not_supported\"") &&
            strstr(text, "the path does not enumerate its choices"),
        "a path without selectable: one not_supported record saying so");
  free(text);
}

/* A record of `suite` on path/model whose `ran` names the keys (NULL-terminated). */
static vrecord *rec_with(const char *suite, const char *id, const char *path, const char *model, const char *ran_path,
                         const char *const *keys, rec_status st) {
  vrecord *r = rec_new(suite, id, path);
  rec_param_str(r, "model", model);
  if (keys) {
    r->ran = cJSON_CreateObject();
    cJSON *o = cJSON_AddObjectToObject(r->ran, ran_path);
    for (int i = 0; keys[i]; i++) cJSON_AddNumberToObject(o, keys[i], 3);
  }
  if (st != REC_PASS) rec_set_status(r, st, "fixture: does not enumerate");
  rec_finalize(r);
  return r;
}

static vrecord *choice(const char *path, const char *model, const char *key) {
  vrecord *r = rec_new("coverage", key, path);
  rec_param_str(r, "model", model);
  rec_param_str(r, "when", "batch 8 x 1 token, context 65536");
  rec_finalize(r);
  return r;
}

static void test_report_join(void) {
  vresults r;
  memset(&r, 0, sizeof r);
  r.manifest = cJSON_CreateObject();
  r.results = cJSON_CreateObject();
  cJSON_AddStringToObject(r.results, "verdict", "pass");
  cJSON_AddTrueToObject(r.results, "complete");
  const char *k_mma[] = {"mla_decode/v3_mma", "linear/v6_cp_n8", NULL};
  const char *k_split[] = {"mla_decode/v1_split", NULL};
  const char *k_gemm[] = {"mla_decode/v2_gemm", NULL};
  vrecord *recs[] = {
      choice("latency", "synth:small", "mla_decode/v3_mma"),
      choice("latency", "synth:small", "mla_decode/v1_split"),
      choice("latency", "synth:small", "mla_decode/v2_gemm"), /* the gap: only kernels and another model ran it */
      choice("latency", "synth:small", "linear/v6_cp_n8"),
      rec_with("coverage", "-", "cuda-ref", "synth:small", NULL, NULL, REC_NOT_SUPPORTED),
      rec_with("diverge", "b1", "latency", "synth:small", "latency", k_mma, REC_PASS),
      rec_with("diverge", "b8", "latency@attn_split", "synth:small", "latency@attn_split", k_split, REC_PASS),
      rec_with("evals", "mrcr", "latency", "synth:small (seed 9, 4 layers)", "latency", k_mma, REC_PASS),
      rec_with("kernels", "mla", "latency", "synth:small", "latency", k_gemm, REC_PASS),
      rec_with("diverge", "k2", "latency", "synth:k2-lite", "latency", k_gemm, REC_PASS),
  };
  r.recs = recs;
  r.n = (int)(sizeof recs / sizeof *recs);
  CHECK(coverage_gaps(&r) == 1, "one gap (v2_gemm ran only in kernels and on another model): %d", coverage_gaps(&r));
  char *md = NULL, *html = NULL;
  CHECK_OK(report_markdown(&r, NULL, REPORT_MD_LIMIT, &md));
  CHECK(md && strstr(md, "**Coverage:** 4 (path, op, variant) choices") && strstr(md, "**1 never ran (GAP)**") &&
            strstr(md, "1 path without an enumeration"),
        "summary: the choices, the gap and the path without an enumeration");
  CHECK(md && strstr(md, "| latency on synth:small | `mla_decode/v2_gemm` | batch 8 x 1 token, context 65536 | "
                         "**GAP: never ran** |"),
        "the gap's row");
  CHECK(md && strstr(md, "| latency on synth:small | `mla_decode/v3_mma` | batch 8 x 1 token, context 65536 | "
                         "diverge synth:small ×1, evals synth:small ×1 |"),
        "a covered row names the steps that ran it");
  CHECK(md && strstr(md, "`mla_decode/v1_split` | batch 8 x 1 token, context 65536 | diverge synth:small ×1 |"),
        "a variant-forced spelling of the path covers its kernel");
  CHECK(md && strstr(md, "| cuda-ref on synth:small | (none) | | fixture: does not enumerate |"),
        "the path without an enumeration has its row");
  CHECK(md && strstr(md, "GAP: never ran") < strstr(md, "`mla_decode/v3_mma` | batch"), "gaps first");
  CHECK_OK(report_html(&r, &html));
  CHECK(html && strstr(html, "<h2>Coverage</h2>") && strstr(html, "class=\"fail\">GAP: never ran"), "html: the gap");
  free(md);
  free(html);
  /* a run without coverage records (an older bundle, or a plan without the step) says so */
  r.recs = recs + 5;
  r.n -= 5;
  CHECK(coverage_gaps(&r) == -1, "no coverage records: no gap count");
  CHECK_OK(report_markdown(&r, NULL, REPORT_MD_LIMIT, &md));
  CHECK(md && strstr(md, "**Coverage:** this run has no coverage records") && !strstr(md, "### Coverage"),
        "markdown: no coverage records, said, no table");
  CHECK_OK(report_html(&r, &html));
  CHECK(html && strstr(html, "this run has no coverage records"), "html: no coverage records, said");
  free(md);
  free(html);
  for (size_t i = 0; i < sizeof recs / sizeof *recs; i++) rec_free(recs[i]);
  cJSON_Delete(r.manifest);
  cJSON_Delete(r.results);
}

int main(void) {
  ds_model m;
  if (ds_model_open(&m, "synth:tiny", 0, 0, true)) {
    fprintf(stderr, "cannot open synth:tiny: %s\n", verr_msg());
    return 1;
  }
  check_path(&m, "cpu-ref", 8);
  check_path(&m, "cpu-ref:tp2", 10);
  ds_model_close(&m);
  test_suite_without_enumeration();
  test_report_join();
  return test_finish();
}
