/* The paths' memory estimates (model/mem_estimate.h, suites/paths/paths.h vpath_estimate): against the
 * figures cuda-ref's refusal printed on the H200, against the tensors a synthetic model really has,
 * and the TP / DCP scaling the paths allocate by. */
#include <math.h>
#include <string.h>

#include "model/mem_estimate.h"
#include "model/model.h"
#include "model/shard.h"
#include "model/spec_config.h"
#include "suites/paths/paths.h"
#include "suites/paths/spec.h"
#include "tests/harness.h"

/* vpath_estimate of a path named as a plan names it (the dry run's way: the path need not be in this build) */
static vstatus est(const char *name, const ds_config *c, const vpath_opts *o, int sms, int rows, int logit_rows,
                   ds_mem_estimate *out) {
  vpath_spec sp;
  VTRY(vpath_spec_lookup(name, &sp));
  return vpath_estimate(&sp, c, o, sms, rows, logit_rows, out);
}

#define GIB 1073741824.0

/* cuda-ref on synth:k2-slice at max_seq 64 x max_ctx 32784 refused on the H200 (main 3f9df21) with
 * "needs 68.85 GiB of weights + 240.12 GiB of KV cache ... + 0.50 GiB working space". */
static void test_cuda_ref_matches_h200_refusal(void) {
  ds_config c;
  CHECK_OK(ds_preset_config("k2-slice", 0, &c));
  ds_mem_opts o = {.max_seq = 64, .max_ctx = 32784};
  ds_mem_estimate e;
  CHECK_OK(ds_mem_cuda_ref(&c, &o, &e));
  CHECK(fabs(e.weight_bytes / GIB - 68.85) < 0.005, "weights %.4f GiB, the H200 refusal said 68.85", e.weight_bytes / GIB);
  CHECK(fabs(e.kv_bytes / GIB - 240.12) < 0.005, "KV %.4f GiB, the H200 refusal said 240.12", e.kv_bytes / GIB);
  CHECK(fabs(e.work_bytes / GIB - 0.50) < 1e-9, "work %.4f GiB", e.work_bytes / GIB);
  vstatus s = ds_mem_check("cuda-ref", &e, &c, &o, 139.22 * GIB, 139.80 * GIB, "NVIDIA H200");
  CHECK(s == V_ERR && strstr(verr_msg(), "needs 68.85 GiB of weights + 240.12 GiB of KV cache (3 layers x max_seq 64 x "
                                         "max_ctx 32784, bf16 expanded per head) + 0.50 GiB working space") &&
            strstr(verr_msg(), "NVIDIA H200 has 139.22 GiB free of 139.80 GiB"),
        "refusal line: %s", verr_msg());
  CHECK(ds_mem_check("cuda-ref", &e, &c, &o, ds_mem_total(&e), ds_mem_total(&e), "x") == V_OK, "exactly fits");
}

/* cuda-ref grows its workspace to the rows of a forward (ensure_ws) and its logits to the logit
 * rows (ensure_logits). h200 step 18, the prefill+decode sweep on synth:k2-slice --layers 2 with
 * cuda-ref and latency open together at batch 64 x context 256 + 23 (prefill chunks of 64 x 128 =
 * 8192 rows, 64 logit rows), peaked on the H200 at 78.98 GiB of memory.used (143bb2e, fifteenth
 * session), 0.55 GiB of it the CUDA context vouch holds between steps; without the rows the
 * estimate said 76.55. With them it must bound the rest, and by little. */
static void test_cuda_ref_rows_match_h200_sweep(void) {
  ds_config c;
  CHECK_OK(ds_spec_config("synth:k2-slice", 2, &c));
  vpath_opts po = {.max_seq = 64, .max_ctx = 279};
  ds_mem_estimate ref0, ref, lat, lat0;
  CHECK_OK(est("cuda-ref", &c, &po, 132, 0, 0, &ref0));
  CHECK_OK(est("cuda-ref", &c, &po, 132, 8192, 64, &ref));
  CHECK_OK(est("latency", &c, &po, 132, 8192, 64, &lat));
  CHECK_OK(est("latency", &c, &po, 132, 0, 0, &lat0));
  const double before = (ds_mem_total(&ref0) + ds_mem_total(&lat)) / GIB, now = (ds_mem_total(&ref) + ds_mem_total(&lat)) / GIB;
  const double measured = 78.98 - 0.55;
  CHECK(fabs(before - 76.55) < 0.005, "without rows: %.2f GiB, the dry run printed 76.55", before);
  CHECK(now >= measured && now < measured + 0.5, "with 8192 rows: %.2f GiB against %.2f measured", now, measured);
  CHECK(ref.weight_bytes == ref0.weight_bytes && ref.kv_bytes == ref0.kv_bytes, "rows change the working space only");
  CHECK(ds_mem_total(&lat0) == ds_mem_total(&lat), "latency runs any rows in 64-row chunks: rows change nothing");
  /* the logits of a speculative step (batch 64 x K+1 = 8 rows each) and TP's partial sums and gathered blocks */
  ds_mem_estimate spec, tp0, tp;
  CHECK_OK(est("cuda-ref", &c, &po, 132, 512, 512, &spec));
  CHECK(spec.work_bytes - ref0.work_bytes >= 512.0 * c.vocab_size * 4, "512 logit rows of %d: +%.0f bytes", c.vocab_size,
        spec.work_bytes - ref0.work_bytes);
  CHECK_OK(est("cuda-ref:tp2", &c, &po, 132, 0, 0, &tp0));
  CHECK_OK(est("cuda-ref:tp2", &c, &po, 132, 512, 512, &tp));
  CHECK(tp.work_bytes - tp0.work_bytes > spec.work_bytes - ref0.work_bytes, "TP adds partials and gathered logits");
}

/* The weight bytes are the bytes of the tensors a synthetic model has (bf16, the router bias fp32). */
static void test_weights_are_the_tensors(const char *preset) {
  ds_config c;
  CHECK_OK(ds_preset_config(preset, 0, &c));
  ds_model m;
  CHECK_OK(ds_model_synth(&m, &c, preset, 1, false));
  double sum = 0;
  for (int i = 0; i < m.n_synth; i++) sum += (double)vtensor_numel(&m.synth[i]) * (m.synth[i].dtype == DT_F32 ? 4 : 2);
  ds_mem_opts o = {.max_seq = 1, .max_ctx = 16};
  ds_mem_estimate cpu, ref, lat;
  CHECK_OK(ds_mem_cpu_ref(&c, &o, &cpu));
  CHECK_OK(ds_mem_cuda_ref(&c, &o, &ref));
  CHECK_OK(ds_mem_latency(&c, &o, &lat));
  CHECK(cpu.weight_bytes == sum, "%s: cpu-ref weights %.0f, tensors %.0f", preset, cpu.weight_bytes, sum);
  CHECK(ref.weight_bytes >= sum && ref.weight_bytes < sum + 256.0 * m.n_synth, "%s: cuda-ref arena %.0f vs tensors %.0f",
        preset, ref.weight_bytes, sum);
  CHECK(lat.weight_bytes > sum, "%s: latency adds W_UK^T and staging (%.0f vs %.0f)", preset, lat.weight_bytes, sum);
  CHECK(cpu.host_bytes == ds_mem_total(&cpu) && !cpu.on_gpu && ref.on_gpu && ref.host_bytes == 0, "%s: placement",
        preset);
  ds_model_close(&m);
}

/* The latent cache is (kv_lora + rope) bf16 per position and layer; DCP splits it over the ranks. */
static void test_latency_cache_and_dcp(void) {
  ds_config c;
  CHECK_OK(ds_spec_config("synth:k2-slice", 0, &c));
  vpath_opts po = {.max_seq = 8, .max_ctx = 32768};
  ds_mem_estimate one, tp2, dcp2;
  CHECK_OK(est("latency", &c, &po, 132, 0, 0, &one));
  CHECK(one.kv_bytes == 3.0 * 8 * 32768 * (512 + 64) * 2, "latent cache %.0f", one.kv_bytes);
  CHECK(one.optional_bytes > 0 && one.ranks == 1, "v2_gemm workspace is optional: %.0f", one.optional_bytes);
  CHECK_OK(est("latency:tp2", &c, &po, 132, 0, 0, &tp2));
  CHECK_OK(est("latency:tp2:dcp", &c, &po, 132, 0, 0, &dcp2));
  CHECK(tp2.ranks == 2 && tp2.kv_bytes == one.kv_bytes && dcp2.kv_bytes == one.kv_bytes / 2, "tp2 kv %.0f, dcp2 kv %.0f",
        tp2.kv_bytes, dcp2.kv_bytes);
  CHECK(tp2.weight_bytes < 0.6 * one.weight_bytes, "a TP rank holds about half: %.1f of %.1f GiB", tp2.weight_bytes / GIB,
        one.weight_bytes / GIB);
  /* cpu-ref's simulated ranks live in one process: the host holds them all */
  ds_mem_estimate h1, h2;
  ds_config t;
  CHECK_OK(ds_spec_config("synth:tiny", 0, &t));
  CHECK_OK(est("cpu-ref", &t, &po, 0, 0, 0, &h1));
  CHECK_OK(est("cpu-ref:tp2", &t, &po, 0, 0, 0, &h2));
  CHECK(h2.host_bytes > h1.host_bytes * 0.9 && h2.host_bytes < h1.host_bytes * 1.6, "cpu-ref:tp2 host %.0f vs %.0f",
        h2.host_bytes, h1.host_bytes);
  CHECK(est("cuda-ref:tp3", &t, &po, 0, 0, 0, &h2) == V_ERR && strstr(verr_msg(), "divisible"),
        "TP 3 cannot split 16 heads: %s", verr_msg());
  CHECK(est("mypath", &t, &po, 0, 0, 0, &h2) == V_UNSUPPORTED, "no memory model for an unknown path");
}

/* Constructed presets and config.json paths give a config without weights. */
static void test_spec_config(void) {
  ds_config c;
  CHECK_OK(ds_spec_config("synth:recall-mrcr", 0, &c));
  CHECK(c.max_position_embeddings == 131072 && c.num_hidden_layers == 3, "recall-mrcr: %d positions, %d layers",
        c.max_position_embeddings, c.num_hidden_layers);
  CHECK_OK(ds_spec_config("synth:small", 2, &c));
  CHECK(c.num_hidden_layers == 2, "--layers 2 gives %d", c.num_hidden_layers);
  CHECK(ds_spec_config("synth:nope", 0, &c) == V_ERR && strstr(verr_msg(), "nope"), "unknown preset: %s", verr_msg());
  CHECK(ds_spec_config("/nonexistent/model", 0, &c) == V_ERR && strstr(verr_msg(), "/nonexistent/model"),
        "missing dir: %s", verr_msg());
}

int main(void) {
  test_cuda_ref_matches_h200_refusal();
  test_cuda_ref_rows_match_h200_sweep();
  test_weights_are_the_tensors("tiny");
  test_weights_are_the_tensors("small");
  test_latency_cache_and_dcp();
  test_spec_config();
  return test_finish();
}
