/* cupti_trace: a CUPTI injection library that records every kernel's start and end (graph replays
 * included, with their graph id) and writes them at exit, for a per-kernel timeline of a CUDA-graph
 * step, which the eager per-op profile (bench_latency --ops) cannot give: in graph replay with
 * programmatic dependent launch, kernels overlap their neighbours.
 *   CUDA_INJECTION64_PATH=$PWD/libvouch_cupti_trace.so VOUCH_CUPTI_OUT=k.tsv bench_latency ...
 * Output: one line per kernel: start_ns end_ns graph_id graph_node_id stream_id grid(x,y,z) name.
 * Summarize with bench/cupti_summary.py. Needs libcupti (CUDA toolkit) at run time. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cupti.h>

#define BUF_BYTES (8u << 20)

static FILE *g_out;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = (uint8_t *)aligned_alloc(8, BUF_BYTES);
  *size = *buffer ? BUF_BYTES : 0;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity *rec = NULL;
  while (g_out && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
    fprintf(g_out, "%llu\t%llu\t%u\t%llu\t%u\t%d,%d,%d\t%s\n", (unsigned long long)k->start, (unsigned long long)k->end,
            k->graphId, (unsigned long long)k->graphNodeId, k->streamId, k->gridX, k->gridY, k->gridZ,
            k->name ? k->name : "?");
  }
  free(buffer);
}

static void at_exit(void) {
  cuptiActivityFlushAll(1);
  if (g_out) fclose(g_out);
  g_out = NULL;
}

/* Called by the CUDA driver when CUDA_INJECTION64_PATH names this library. */
int InitializeInjection(void) {
  const char *path = getenv("VOUCH_CUPTI_OUT");
  g_out = fopen(path ? path : "cupti_kernels.tsv", "w");
  if (!g_out) {
    fprintf(stderr, "cupti_trace: cannot write %s\n", path ? path : "cupti_kernels.tsv");
    return 0;
  }
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    fprintf(stderr, "cupti_trace: CUPTI activity setup failed\n");
    fclose(g_out);
    g_out = NULL;
    return 0;
  }
  atexit(at_exit);
  return 1;
}
