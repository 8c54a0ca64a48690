/* Device memory bandwidth, measured the way the roofline needs it: a device-to-device copy
 * of a large buffer timed with CUDA events. The result counts bytes read plus bytes written
 * (2 x the buffer per copy), so it compares directly with bytes a decode step must read. */
#ifndef VOUCH_REFERENCE_CUDA_CUDA_MEMBW_H
#define VOUCH_REFERENCE_CUDA_CUDA_MEMBW_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "common/vstatus.h"

/* Copies `bytes` (0: 4 GiB; halved down to 256 MiB while the two buffers do not fit) from one
 * device buffer to another on GPU `device`, one untimed warm-up copy then `reps` (0: 5) timed
 * ones, each between two events. *gbs = 2 * bytes / (fastest copy time) in GB/s (1e9 B/s);
 * *used_bytes (may be NULL) gets the buffer size used. */
vstatus cuda_membw(int device, size_t bytes, int reps, double *gbs, size_t *used_bytes);

#ifdef __cplusplus
}
#endif

#endif
