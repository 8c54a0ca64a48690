/* A path as the user names it, parsed once where the name enters (an option, a plan, a test) and
 * handed down typed: NAME[:tpN][:ep][:dcp][@VARIANT] -> the registered path NAME, the TP degree,
 * dcp, ep, the variant words, and what the path declares (its vpath_caps, from the registry). Code
 * below the edge decides from these fields, never from the text (issue 35). */
#ifndef VOUCH_SUITES_PATHS_SPEC_H
#define VOUCH_SUITES_PATHS_SPEC_H

#include <stdbool.h>

#include "common/path.h"
#include "common/vstatus.h"
#include "suites/paths/paths.h" /* vpath_spec, the registry */


/* Parses `text` into *out, checking it against the registry: the syntax NAME[:tpN][:ep][:dcp][@VARIANT]
 * (":ep" and ":dcp" after ":tpN", in either order, each at most once; N 1..4096; VARIANT 1..63
 * characters) and NAME a registered path (built-in, or loaded with --path-lib before). On failure *out
 * is zeroed and V_ERR is "ORIGIN: unknown path 'TEXT' (known: ...)" for a malformed name as for an
 * unknown one (the words vouch always printed); origin_option NULL: no "ORIGIN: " (generate's). */
vstatus vpath_spec_parse(const char *text, const char *origin_option, vpath_spec *out);
/* The syntax alone (no registry): *out as vpath_spec_parse fills it, with ops NULL and caps zero. False
 * when the text is malformed (out zeroed; nothing recorded). */
bool vpath_spec_split(const char *text, vpath_spec *out);
/* For the dry run, which prices paths this build may lack: the syntax (vpath_spec_split), then the
 * declaration when the path is registered (ops, caps, splits_inputs as vpath_spec_parse fills them;
 * ops NULL and caps zero when it is not). V_ERR "path 'TEXT': malformed name" when the syntax fails. */
vstatus vpath_spec_lookup(const char *text, vpath_spec *out);
/* Parses a list of n names into out[n] (vpath_spec_parse each, the same origin). */
vstatus vpath_specs_parse(const char *const *texts, int n, const char *origin_option, vpath_spec *out);

#endif
