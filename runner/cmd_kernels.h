/* `vouch kernels`: the kernel numerics suite (suites/kernels.h) on the suite driver
 * (runner/suite_kernels.c). Exit code: 0 all ran cases passed, 1 a case failed, 2 usage error. */
#ifndef VOUCH_RUNNER_CMD_KERNELS_H
#define VOUCH_RUNNER_CMD_KERNELS_H

#include "runner/suite.h"

extern const vsuite vsuite_kernels;

#endif
