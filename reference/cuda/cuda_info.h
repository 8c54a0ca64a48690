/* GPU facts for manifests (C linkage). */
#ifndef VOUCH_REFERENCE_CUDA_INFO_H
#define VOUCH_REFERENCE_CUDA_INFO_H
#ifdef __cplusplus
extern "C" {
#endif
/* JSON array text, one object per visible GPU ("[]" when none); malloc'ed, caller frees. */
char *cuda_gpu_info_json(void);
#ifdef __cplusplus
}
#endif
#endif
