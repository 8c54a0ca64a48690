/* Lazy TP shards generated on the GPU (cuda_synth_model_tensor) equal the host slices: for
 * synth:tiny (q LoRA, untied) and a tied variant with a vocabulary TP 4 does not divide, at
 * TP 1, 2 and 4, every tensor of every rank's lazy shard (replicated, row blocks, column
 * blocks with a strided launch, the lm_head vocabulary block) is generated on the device and
 * compared byte for byte with ds_model_materialize of the same shard on the host, whole
 * (cuda_synth_model_tensor) and as its last 2/3 of rows (cuda_synth_model_rows); also the
 * unsharded lazy model's tensors, and the errors for a tensor without a rule and for rows past
 * the end. Exit 77 without a GPU. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "model/model.h"
#include "model/shard.h"
#include "reference/cuda/cuda_ref.h"
#include "tests/harness.h"

#define SEED 77ull

/* Generates every tensor of lazy model `m` on the GPU and compares it with `host` (the same
 * model materialized on the host). Returns the number of tensors that differ. */
static int compare_model(const ds_model *m, const ds_model *host, cudaStream_t st) {
  int bad = 0;
  for (int i = 0; i < m->n_synth; i++) {
    const vtensor *t = &m->synth[i], *h = &host->synth[i];
    const size_t bytes = vtensor_nbytes(t);
    if (t->data || !h->data || bytes != vtensor_nbytes(h)) {
      fprintf(stderr, "  %s: lazy %d, host data %d, %zu vs %zu bytes\n", t->name, t->data != NULL, h->data != NULL,
              bytes, vtensor_nbytes(h));
      bad++;
      continue;
    }
    void *d = NULL, *buf = malloc(bytes + 1);
    vstatus s = cudaMalloc(&d, bytes + 1) == cudaSuccess && buf ? V_OK : VERR("%s: out of memory", t->name);
    if (s == V_OK) s = cuda_synth_model_tensor(d, t->dtype, m, t, st);
    if (s == V_OK && cudaStreamSynchronize(st) != cudaSuccess) s = VERR("%s: stream sync failed", t->name);
    if (s == V_OK && cudaMemcpy(buf, d, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
      s = VERR("%s: copy to host failed", t->name);
    if (s != V_OK || memcmp(buf, h->data, bytes) != 0) {
      fprintf(stderr, "  %s: %s\n", t->name, s != V_OK ? verr_msg() : "GPU bytes differ from the host slice");
      bad++;
    }
    /* rows [r0, rows) alone (cuda_synth_model_rows), written at the start of dst */
    const int64_t rows = t->shape[0], r0 = rows / 3, rb = (int64_t)(bytes / (size_t)(rows > 0 ? rows : 1));
    if (s == V_OK && rows > 1) {
      s = cuda_synth_model_rows(d, t->dtype, m, t, r0, rows - r0, st);
      if (s == V_OK && cudaStreamSynchronize(st) != cudaSuccess) s = VERR("%s: stream sync failed", t->name);
      if (s == V_OK && cudaMemcpy(buf, d, (size_t)((rows - r0) * rb), cudaMemcpyDeviceToHost) != cudaSuccess)
        s = VERR("%s: copy to host failed", t->name);
      if (s != V_OK || memcmp(buf, (const char *)h->data + r0 * rb, (size_t)((rows - r0) * rb)) != 0) {
        fprintf(stderr, "  %s rows [%lld, %lld): %s\n", t->name, (long long)r0, (long long)rows,
                s != V_OK ? verr_msg() : "GPU bytes differ from the host rows");
        bad++;
      }
    }
    cudaFree(d);
    free(buf);
  }
  return bad;
}

static void test_config(const char *label, const ds_config *cfg, cudaStream_t st) {
  ds_model lazy, host;
  CHECK_OK(ds_model_synth(&lazy, cfg, label, SEED, false));
  CHECK_OK(ds_model_synth(&host, cfg, label, SEED, true));
  CHECK(compare_model(&lazy, &host, st) == 0, "%s: unsharded lazy tensors", label);
  const int tps[] = {1, 2, 4};
  for (int k = 0; k < 3; k++) {
    const int N = tps[k];
    for (int r = 0; r < N; r++) {
      ds_model a, b;
      vstatus sa = ds_shard_model(&a, &lazy, r, N), sb = ds_shard_model(&b, &lazy, r, N);
      CHECK(sa == V_OK && sb == V_OK, "%s TP %d rank %d: %s", label, N, r, verr_msg());
      if (sb == V_OK) CHECK_OK(ds_model_materialize(&b));
      if (sa == V_OK && sb == V_OK)
        CHECK(compare_model(&a, &b, st) == 0, "%s TP %d rank %d: GPU-generated shard == host slices", label, N, r);
      if (sa == V_OK) ds_model_close(&a);
      if (sb == V_OK) ds_model_close(&b);
    }
  }
  ds_model_close(&lazy);
  ds_model_close(&host);
}

int main(void) {
  if (cuda_device_count() == 0) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  cudaStream_t st;
  if (cudaStreamCreate(&st) != cudaSuccess) {
    fprintf(stderr, "cannot create a stream\n");
    return 1;
  }
  ds_config c;
  CHECK_OK(ds_preset_config("tiny", 0, &c));
  test_config("tiny", &c, st);
  ds_config t = c;
  t.tie_word_embeddings = true;
  t.vocab_size = 1001; /* TP 2 and 4 blocks of ceil(V/N) rows, the last one shorter */
  test_config("tiny-tied-v1001", &t, st);

  /* a tensor without a rule (as loaded from disk) is an error, not garbage */
  ds_model m;
  CHECK_OK(ds_model_synth(&m, &c, "tiny", SEED, false));
  if (m.lazy) {
    m.lazy[0].spec.name[0] = 0;
    void *d = NULL;
    CHECK(cudaMalloc(&d, vtensor_nbytes(&m.synth[0])) == cudaSuccess, "cudaMalloc");
    CHECK(cuda_synth_model_tensor(d, DT_BF16, &m, &m.synth[0], st) == V_ERR && strstr(verr_msg(), "no synthesis rule"),
          "no rule: %s", verr_msg());
    CHECK(cuda_synth_model_rows(d, DT_BF16, &m, &m.synth[1], 0, m.synth[1].shape[0] + 1, st) == V_ERR &&
              strstr(verr_msg(), "outside its"),
          "rows past the end: %s", verr_msg());
    cudaFree(d);
  }
  ds_model_close(&m);
  cudaStreamDestroy(st);
  return test_finish();
}
