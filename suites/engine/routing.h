/* Forced routing of MoE experts, the --routing option of `vouch sweep` and `vouch diverge`: the
 * router's choice replaced (vstep.forced_experts, common/path.h) by uniform or zipf draws from the
 * counter-based RNG, or replayed from a trace, while the combine weights stay the router's. "natural"
 * leaves the router alone.
 *
 * Routing trace file (--routing trace:FILE): JSON lines, one line per token, each line an
 * array with one entry per MoE layer, each entry the num_experts_per_tok expert ids of that
 * token in that layer: `[[3,17,5,9],[1,2,40,7]]`. Token t of step i replays line
 * (i*T + t) mod n_lines; if a line lists fewer layers than the model has MoE layers, MoE
 * layer j uses entry j mod n_entries. Every line must have the same number of entries, each
 * of exactly top-k distinct ids in [0, n_routed_experts). Empty lines and lines starting
 * with '#' are skipped. */
#ifndef VOUCH_SUITES_ENGINE_ROUTING_H
#define VOUCH_SUITES_ENGINE_ROUTING_H

#include <stdbool.h>
#include <stdint.h>

#include "common/vstatus.h"
#include "model/config.h"

typedef enum { ROUTE_NATURAL = 0, ROUTE_UNIFORM, ROUTE_ZIPF, ROUTE_TRACE } vroute_kind;

typedef struct {
  vroute_kind kind;
  double zipf_s;        /* ROUTE_ZIPF: popularity of rank r (0-based) is 1/(r+1)^s */
  bool fixed;           /* "uniform@fixed", "zipf:S@fixed": every step of a point routes the same (one draw per
                         * point): step times then vary only by measurement noise, not by how many experts a
                         * fresh draw touches; natural routing varies with the tokens, trace follows its file */
  char spec[560];       /* the option text ("zipf:1.2") */
  int32_t *ids;         /* ROUTE_TRACE: [n_lines][n_layers][k] expert ids */
  int n_lines, n_layers, k;
  /* prepared for one model (vrouting_prepare) */
  int E, K, n_moe;      /* routed experts, top-k, MoE layers */
  int *perm;            /* ROUTE_ZIPF: [n_moe][E] expert of each popularity rank */
  double *cdf;          /* ROUTE_ZIPF: [E] cumulative popularity of ranks */
} vrouting;

/* Parses "natural" | "uniform" | "zipf:S" (S > 0) | "trace:FILE" (reads and checks the file). */
vstatus vrouting_parse(const char *spec, vrouting *r);
/* Checks the routing against the model (trace k, ids < E) and precomputes tables. */
vstatus vrouting_prepare(vrouting *r, const ds_config *c, uint64_t seed);
void vrouting_free(vrouting *r);
/* Forced expert ids of step `step` (any integer; prefill chunks use negative ones) for T tokens:
 * out [n_moe][T][K]. Deterministic in (seed, step, layer, token). Not for ROUTE_NATURAL. */
void vrouting_fill(const vrouting *r, uint64_t seed, int64_t step, int T, int32_t *out);

#endif
