/* A path as the user names it, parsed once where the name enters (an option, a plan, a test) and
 * handed down typed: NAME[:tpN][:ep][:dcp][@VARIANT] -> the registered path NAME, the TP degree,
 * dcp, ep, the variant words, and what the path declares (its vpath_caps, from the registry). Code
 * below the edge decides from these fields, never from the text (issue 35). */
#ifndef VOUCH_SUITES_PATHS_SPEC_H
#define VOUCH_SUITES_PATHS_SPEC_H

#include <stdbool.h>

#include "common/path.h"
#include "common/vstatus.h"

typedef struct {
  char name[128];       /* the text as given ("latency:tp4:dcp@tp_rsag"): records and messages print it */
  char base[64];        /* the registered path NAME ("latency") */
  int tp;               /* N of ":tpN" (1..4096); 0: the name fixes none (the caller's --tp applies) */
  bool dcp;             /* ":dcp": decode context parallelism over the TP ranks */
  bool ep;              /* ":ep": expert parallelism over the TP ranks */
  char variant[64];     /* the words after '@' ("tp_nccl,tp_split_in"); "": none (the caller's --variant) */
  const vpath_ops *ops; /* the path's declaration in the registry (suites/paths/paths.h); NULL only in a spec
                         * of vpath_spec_split (a name this build may lack: the dry run's prices) */
  vpath_caps caps;      /* ops->caps (zero without ops): host_weights, tp kind, dcp, ep, ... */
  bool splits_inputs;   /* caps.tp_splits_inputs(variant): under TP each rank reads only its share of the input
                         * projections and the router (the sweep's byte model) */
} vpath_spec;

/* Parses `text` into *out, checking it against the registry: the syntax NAME[:tpN][:ep][:dcp][@VARIANT]
 * (":ep" and ":dcp" after ":tpN", in either order, each at most once; N 1..4096; VARIANT 1..63
 * characters) and NAME a registered path (built-in, or loaded with --path-lib before). On failure *out
 * is zeroed and V_ERR is "ORIGIN: unknown path 'TEXT' (known: ...)" for a malformed name as for an
 * unknown one (the words vouch always printed); origin_option NULL: no "ORIGIN: " (generate's). */
vstatus vpath_spec_parse(const char *text, const char *origin_option, vpath_spec *out);
/* The syntax alone (no registry): *out as vpath_spec_parse fills it, with ops NULL and caps zero. False
 * when the text is malformed (out zeroed; nothing recorded). For vpath_spec_parse and the name-taking
 * compatibility functions of suites/paths/paths.h. */
bool vpath_spec_split(const char *text, vpath_spec *out);
/* Parses a list of n names into out[n] (vpath_spec_parse each, the same origin). */
vstatus vpath_specs_parse(const char *const *texts, int n, const char *origin_option, vpath_spec *out);

#endif
