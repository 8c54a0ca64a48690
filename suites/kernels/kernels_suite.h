/* `vouch kernels`: the kernel numerics suite (suites/kernels/kernels.h) on the suite driver
 * (suites/kernels/kernels_suite.c). Exit code: 0 all ran cases passed, 1 a case failed, 2 usage error. */
#ifndef VOUCH_SUITES_KERNELS_KERNELS_SUITE_H
#define VOUCH_SUITES_KERNELS_KERNELS_SUITE_H

#include "suites/engine/suite.h"

extern const vsuite vsuite_kernels;

#endif
