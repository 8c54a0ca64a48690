/* The kernel-suite variants of path "cpu-ref" (reference/opreg.h): cpu_variants.c adapts the CPU
 * reference ops to the suite's buffers (and adds the planted-bug "test" variants), comm_variants.c
 * runs the communication ops on simulated ranks. The numerics suite calls these once
 * (suites/kernels/kernels.h kernels_register_ops); each prints a registration error and goes on. */
#ifndef VOUCH_REFERENCE_CPU_VARIANTS_H
#define VOUCH_REFERENCE_CPU_VARIANTS_H

/* Registers the "cpu" variants of every op oracle_register_ops() registered, and the "test" ones. */
void cpu_variants_register(void);
/* Registers the "threads" variants of allreduce and allreduce_add_rmsnorm (R ranks as R threads). */
void comm_variants_register(void);
/* Registers the "test" variants of the declarations (fp32 outputs of bf16 variants, determinism) and
 * of small-scale activations (reference/cpu/test_variants.c). */
void test_variants_register(void);

#endif
