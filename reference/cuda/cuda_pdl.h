/* Programmatic dependent launch (PDL, Hopper): a kernel launched with the programmatic
 * stream-serialization attribute may start while the kernel before it on the stream is still
 * running, once every block of that one has called pdl_trigger() (or exited). Inside CUDA graph
 * capture the attribute becomes a programmatic edge, so graph replays keep the overlap.
 *
 * The contract every kernel launched through pdl_launch() keeps:
 *   - before pdl_wait() it touches nothing another kernel writes or reads (only constant
 *     weights may be read early: prefetch), and writes nothing;
 *   - every thread calls pdl_wait() on every path, early exits included, so that a kernel's
 *     completion implies its predecessor's (the chain stays transitive);
 *   - pdl_trigger() comes after pdl_wait(): a kernel lets its successor launch only once its
 *     own predecessor has finished, so at most two kernels of a chain are resident at a time.
 * pdl_wait() returns at once in a kernel launched without the attribute, so the same kernels
 * run unchanged under plain launches (cuda-ref, the op registry, PDL switched off).
 *
 * Whether launches carry the attribute is a per-thread switch (pdl_set), off by default: the
 * latency path turns it on while it enqueues a step (variant word no_pdl keeps it off). */
#ifndef VOUCH_REFERENCE_CUDA_CUDA_PDL_H
#define VOUCH_REFERENCE_CUDA_CUDA_PDL_H

#include <cuda_runtime.h>

/* Waits until the predecessor grid has completed and its writes are visible. */
static __device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Lets the successor grid launch (once every block of this grid has called it or exited). */
static __device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* The calling thread's switch; returns the previous value. */
inline thread_local bool pdl_enabled_ = false;
static inline bool pdl_set(bool on) {
  const bool was = pdl_enabled_;
  pdl_enabled_ = on;
  return was;
}

/* kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when the switch is on. */
template <typename... KArgs, typename... Args>
static cudaError_t pdl_launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                              Args &&...args) {
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = pdl_enabled_ ? at : nullptr;
  cfg.numAttrs = pdl_enabled_ ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
}

#endif
