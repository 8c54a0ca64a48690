/* The built-in ops of the numerics suite (suites/kernels/kernels.h kernels_register_ops): the one
 * place that knows every module registering into the op registry, so the registry (reference/opreg.h)
 * calls none of them and no layer calls up into another. */
#include "suites/kernels/kernels.h"

#include "reference/cpu/oracle.h"
#include "reference/cpu/variants.h"
#if defined(VOUCH_HAVE_CUDA) && defined(VOUCH_HAVE_CUDA_VARIANTS)
#include "kernels/latency.h"
#include "reference/cuda/cuda_variants.h"
#endif

/* Every built-in registration, ops first (variants name their op). */
static void register_all(void) {
  oracle_register_ops();
  cpu_variants_register();
  comm_variants_register();
  test_variants_register();
#if defined(VOUCH_HAVE_CUDA) && defined(VOUCH_HAVE_CUDA_VARIANTS)
  cuda_ref_register_variants();
  latency_register_variants();
  latency_tp_register_variants();
#endif
}

void kernels_register_ops(void) { vopreg_init(register_all); }
