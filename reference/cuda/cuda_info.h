/* GPU facts for manifests (C linkage). */
#ifndef VOUCH_REFERENCE_CUDA_INFO_H
#define VOUCH_REFERENCE_CUDA_INFO_H
#ifdef __cplusplus
extern "C" {
#endif
/* JSON array text, one object per visible GPU ("[]" when none); malloc'ed, caller frees. */
char *cuda_gpu_info_json(void);
/* Free and total bytes, SM count and name of GPU `dev` (cudaMemGetInfo on it); 0 on success, -1 when
 * it cannot be queried. */
int cuda_gpu_mem(int dev, double *free_b, double *total_b, int *sms, char *name, int name_cap);
#ifdef __cplusplus
}
#endif
#endif
