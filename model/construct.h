/* Constructed checkpoints: DeepSeek-V3-format models whose weights are built (not trained)
 * so that the model solves a key -> value retrieval task exactly. Presets "recall-mrcr"
 * (multi-needle retrieval) and "recall-chain" (pointer chasing) share one construction
 * with different difficulty defaults. The full construction is described in construct.c
 * and docs/evals.md.
 *
 * Token roles (the layout): bos, eos, filler tokens, pair(k, v) tokens that state
 * "key k has value v", and query(k) tokens that ask for key k's value. The answer to a
 * query is the token query(v): so for the chain task the answer is the next query. */
#ifndef VOUCH_MODEL_CONSTRUCT_H
#define VOUCH_MODEL_CONSTRUCT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/vstatus.h"
#include "model/model.h"

typedef struct {
  int n_keys;          /* NK: keys, also the values (a value is a key) */
  int family;          /* keys per near-duplicate family (the most needles mrcr can use) */
  double cos;          /* cosine between the key codes of two keys of one family (difficulty) */
  double gap;          /* attention-score gap (nats) between the matching key and a same-family
                          distractor: alpha * (1 - cos), alpha = the score of a perfect match */
  double answer_logit; /* nominal logit of the answer token at a query (others ~ N(0, 0.4)) */
  int layers;          /* decoder layers (>= 2): layer 0 dense random, layer 1 the circuit, rest random MoE */
  int max_pos;         /* max_position_embeddings */
} construct_opts;

typedef struct {
  construct_opts o;    /* the options the model was built with */
  int vocab;           /* vocab_size */
  int bos, eos;        /* special token ids */
  int filler0, n_filler; /* filler ids [filler0, filler0 + n_filler) */
  int pair0;           /* pair(k, v) = pair0 + k * n_keys + v */
  int query0;          /* query(k) = query0 + k */
  int circuit_layer;   /* layer whose attention head and MoE carry the answer */
  int circuit_head;    /* the matching attention head */
  int copy_expert;     /* the routed expert that carries the answer */
  double alpha;        /* attention score of a perfect key match (nats) */
} construct_layout;

static inline int construct_pair(const construct_layout *L, int k, int v) { return L->pair0 + k * L->o.n_keys + v; }
static inline int construct_query(const construct_layout *L, int k) { return L->query0 + k; }

/* True for "recall-mrcr" and "recall-chain". */
bool construct_is_preset(const char *name);
/* Space-separated names of the constructed presets. */
const char *construct_preset_names(void);
/* Default options of a constructed preset. */
vstatus construct_preset_opts(const char *preset, construct_opts *o);
/* Config and layout implied by the options (checked for consistency). */
vstatus construct_config(const construct_opts *o, ds_config *cfg, construct_layout *L);
/* Builds the model in host memory (materialized tensors: the random parts from the
 * counter-based RNG under `seed`, the circuit written over them). `o` NULL: preset defaults.
 * The layout goes to *L when L is not NULL. */
vstatus construct_model_open(ds_model *m, const char *preset, const construct_opts *o, uint64_t seed,
                             construct_layout *L);
/* Writes config.json, model.safetensors and vouch_construct.json (the layout) to `dir`. */
vstatus construct_write(const char *dir, const char *preset, const construct_opts *o, uint64_t seed);
/* Reads `dir`/vouch_construct.json into *L (written by construct_write). */
vstatus construct_layout_load(const char *dir, construct_layout *L);
/* The layout of an open model: for a constructed synthetic model (preset recall-*),
 * recomputed from the preset defaults; for a directory, read from vouch_construct.json.
 * An error naming the model when it is not a constructed checkpoint. */
vstatus construct_layout_of(const ds_model *m, construct_layout *L);

#endif
