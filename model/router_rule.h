/* The router's group score, one definition for the CPU reference, cuda-ref and the latency path
 * (host and device): DeepSeek-V3's group-limited routing ranks the n_group groups of experts by
 * the sum of each group's two highest choice values (sigmoid score + correction bias; one value
 * when a group has a single expert), ties broken by the lower index. */
#ifndef VOUCH_MODEL_ROUTER_RULE_H
#define VOUCH_MODEL_ROUTER_RULE_H

#if defined(__CUDACC__)
#define ROUTER_FN static __host__ __device__ __forceinline__
#else
#define ROUTER_FN static inline
#endif

/* Sum of the top two of cg[0..gs) (gs >= 1). */
ROUTER_FN float router_group_score(const float *cg, int gs) {
  int b1 = 0;
  for (int i = 1; i < gs; i++)
    if (cg[i] > cg[b1]) b1 = i;
  int b2 = -1;
  for (int i = 0; i < gs; i++)
    if (i != b1 && (b2 < 0 || cg[i] > cg[b2])) b2 = i;
  return b2 >= 0 ? cg[b1] + cg[b2] : cg[b1];
}

#endif
