/* The kernel-suite side of cuda-ref (reference/opreg.h): the "cuda" backend of the registry
 * (cuda_backend.cu: buffers in device memory) and the cuda-ref variants of the ops
 * (cuda_variants.cu). CUDA builds only; the numerics suite calls the registration once
 * (suites/kernels/kernels.h kernels_register_ops). */
#ifndef VOUCH_REFERENCE_CUDA_CUDA_VARIANTS_H
#define VOUCH_REFERENCE_CUDA_CUDA_VARIANTS_H

#ifdef __cplusplus
extern "C" {
#endif

struct vop_backend;

/* The "cuda" backend: device buffers on the current device (never NULL). */
const struct vop_backend *vop_backend_cuda(void);
/* Sets the registry's CUDA backend and registers the cuda-ref variants of the ops; a registration
 * that fails prints its error and the rest go on. */
void cuda_ref_register_variants(void);

#ifdef __cplusplus
}
#endif

#endif
