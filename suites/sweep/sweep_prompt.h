/* Token-id prompts of a served sweep (suites/sweep/sweep_server.c): random prompts, and the blocks
 * of trace lines (equal hash ids give equal blocks, so a trace's shared prefixes stay shared).
 *
 * Cache-busting: every pass over a level draws tokens of its own. A level that runs again (the next
 * round of a `--ref-server` A/B on the same server, or the next concurrency level replaying the same
 * trace) would otherwise send the prompts it sent before, and a server with a prefix cache (vLLM's
 * automatic prefix caching, llama.cpp's prompt cache) would serve the new pass's prefill from the old
 * one: TTFT of every pass but the first would measure the cache. AIPerf's AgentX scenario salts each
 * session tree's first turn per run for the same reason (its `--cache-bust first_turn_prefix`); here
 * the salt is in every block's seed, so the sharing inside a pass (a trace's turns, its subagents,
 * a Mooncake trace's common prefixes) is kept and nothing is shared across passes. The two sides of
 * an A/B run their levels in the same order, so their k-th passes send the same prompts. The first
 * pass of the first level draws what vouch drew before the salt existed. */
#ifndef VOUCH_SUITES_SWEEP_SWEEP_PROMPT_H
#define VOUCH_SUITES_SWEEP_SWEEP_PROMPT_H

#include <stdint.h>

#include "suites/sweep/server_trace.h"

typedef struct {
  uint64_t seed; /* --seed */
  int level;     /* the concurrency level's index, 0.. */
  int pass;      /* passes over this level before this one (0: the first; an A/B's round - 1) */
  int block;     /* tokens per hash id (> 0) */
  int vocab;     /* token ids drawn in [0, vocab) (> 0) */
} sweep_prompt_key;

/* A 64-bit hash of two words (the sweep's seeded draws). */
uint64_t sweep_mix(uint64_t a, uint64_t b);

/* dst[0..len): token k of request i's prompt. With a trace line L, token k lies in block k / block,
 * drawn from L->hash[k / block] while the line names that block, and from (i, pass) past its
 * hash ids; L NULL: every token from (level, i, pass). Never fails. */
void sweep_prompt_fill(const sweep_prompt_key *key, const trace_line *L, int i, int32_t *dst, int len);

#endif
