/* The constants of the dry run's time model (suites/engine/estimate.c and the suites' estimate
 * functions), in one place. docs/dry-run.md says how each was calibrated; the sources are the H200
 * timings of main 3f9df21 (/work/shared/evidence/h200-main-3f9df21.txt, shared/device/README.md)
 * and the smoke plan timed on the 2-core development machine. They predict to within a factor of ~2, not better. */
#ifndef VOUCH_SUITES_ENGINE_ESTIMATE_COST_H
#define VOUCH_SUITES_ENGINE_ESTIMATE_COST_H

/* GPU decode step = bytes the step reads / (bandwidth x efficiency) + per-layer overhead. */
#define COST_GPU_BW 4.27e12          /* B/s: H200 bytes/roof_ms of bench_latency (5.348 GB in 1.252 ms) */
#define COST_LAT_EFF 0.85            /* latency: 85.5% of roofline at batch 1, 81% at 64 (k2-slice) */
#define COST_REF_EFF 0.18            /* cuda-ref: 6.0 ms at b1, 44 ms at b64 on k2-slice = 21%, 14% */
#define COST_LAT_LAYER_S 15e-6       /* s per layer and step: eval chain 1k/8k hops (recall-chain, 3 layers,
                                        read as latency, 8 samples: 64000 steps) in 3 s */
#define COST_REF_LAYER_S 100e-6      /* s per layer and step: cuda-ref's launches + the router's host sync */
/* GPU prompt rows (prefill: chunks past the 64-row envelope run cuda-ref's plain attention) and
 * fill_cache's per-position cache writes (cuBLAS GEMMs), FLOPs at these rates */
#define COST_GPU_PREFILL_FLOPS 3.2e12 /* FLOP/s of prompt attention: mrcr latency 4k/32k/128k x 2/8 needles x 2 samples, 27 s */
#define COST_GPU_PREFILL_GEMM_FLOPS 60e12 /* FLOP/s of the prompt rows' weight GEMMs: h200 step 18 (sweep
                                              prefill+decode, k2-slice 2 layers, 64 x 256 prompt rows:
                                              cuda-ref 0.78 s, latency 1.05 s on the H200, 6c28518) */
#define COST_GPU_FILL_FLOPS 60e12    /* FLOP/s: fill_cache (kv_b_proj over the positions) */
/* opening a GPU path: weights synthesized on the device at this rate, plus a fixed cost */
#define COST_GPU_SYNTH_BPS 40e9      /* B/s of weights generated (philox on the GPU) */
#define COST_GPU_OPEN_S 0.15         /* s: streams, cuBLAS handles, tables */
/* cpu-ref: FLOPs at this rate per core (fp32, OpenMP), plus a per-layer cost per step */
#define COST_CPU_FLOPS_CORE 1.0e9    /* FLOP/s per core: smoke mrcr step, 17.8 s on the 2-core dev machine */
#define COST_CPU_LAYER_S 3e-3        /* s per layer and step: smoke diverge, 128 tiny steps in 2.2 s */
#define COST_CPU_OPEN_BPS 1.0e9      /* B/s of host weights materialized (synthetic, per core) */
#define COST_CPU_FILL_FLOPS_CORE 2.0e9 /* FLOP/s per core: cpu-ref's fill_cache (kv_b_proj over the positions,
                                          long contiguous GEMMs, faster than a decode step's): pr's k2-lite
                                          b1 x 32k (1.1 TFLOP, 26-35 s) and small b8 x 65530 (2.2 TFLOP,
                                          79-87 s) on the H200 host's 16 cores, seeds 0-4 */
/* suites whose work is not a count of decode steps */
#define COST_FEAT_GPU_S_PER_KPOS 0.027 /* s per 1024 positions of --full-ctx for a GPU path pair: pr's
                                          features step (small at 131072, cuda-ref + latency, the cpu-ref
                                          floor) took 9 s twice on the H200 (17f5952), ~5.6 s of it the
                                          floor's; before the top-k heap (aac8f0e) it took 93-106 s */
#define COST_FEAT_STEPS 160.0        /* features on the CPU: decode steps per path at the full context
                                        (smoke features, tiny at 2048, 5.9 s) */
#define COST_COVERAGE_S 3.0 /* s for one path's choices after its open (coverage suite: no step runs; latency
                                 * captures one CUDA graph per distinct step key, about 1 ms each: not measured) */
#define COST_SWEEP_MEMBW_S 3.0       /* sweep: the host bandwidth copy (2 x 1 GiB), once when a CPU path runs */
#define COST_SWEEP_GPU_MEMBW_S 0.5   /* sweep: the GPU bandwidth kernel, once when a GPU path runs */
#define COST_KERNELS_GPU_S 74.0      /* kernels --quick --path latency, default presets, 1 seed: 74 s (51-61 s
                                        in the eighth and ninth sessions' pr runs) */
#define COST_KERNELS_CUDAREF_GPU_S 29.0 /* kernels --path cuda-ref, default presets, 1 seed: 1249 cases in
                                           28.6 s (h200 step 0 on the H200, ninth session) */
#define COST_KERNELS_CPU_S 60.0      /* kernels --quick, default presets, on the CPU (4x the tiny preset) */
#define COST_KERNELS_TINY_CPU_S 15.0 /* --quick --preset tiny on the CPU: the smoke plan's step 0, 15 s */
#define COST_KERNELS_TINY_GPU_S 3.0  /* the same on the H200 (the whole GPU smoke plan took 8 s) */
#define COST_KERNELS_ALL 2.5         /* --preset all over the default presets */
#define COST_KERNELS_FULL 4.0        /* --full runs this many times the cases of --quick */
#define COST_KERNELS_EVERY_PATH 1.5  /* no --path: every path's variants (cpu-ref's included) */

#endif
