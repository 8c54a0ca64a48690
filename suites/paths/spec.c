/* Path specs (suites/paths/spec.h): the one parser of a path's name. */
#include "suites/paths/spec.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/paths/paths.h"

/* The syntax of `text` into *out (ops NULL, caps zero); false when it is malformed. */
static bool split(const char *text, vpath_spec *out) {
  memset(out, 0, sizeof *out);
  if (strlen(text) >= sizeof out->name) return false;
  snprintf(out->name, sizeof out->name, "%s", text);
  char base[sizeof out->name];
  snprintf(base, sizeof base, "%s", text);
  char *at = strchr(base, '@');
  if (at) {
    if (!at[1] || strlen(at + 1) >= sizeof out->variant) return false; /* 1..63 characters */
    snprintf(out->variant, sizeof out->variant, "%s", at + 1);
    *at = 0;
  }
  char *c = strrchr(base, ':');
  for (;;) { /* trailing ":dcp" / ":ep", each once */
    if (c && strcmp(c, ":dcp") == 0 && !out->dcp) out->dcp = true;
    else if (c && strcmp(c, ":ep") == 0 && !out->ep) out->ep = true;
    else break;
    *c = 0;
    c = strrchr(base, ':');
  }
  if (c) {
    if (strncmp(c, ":tp", 3) != 0) return false; /* not :tpN, :ep or :dcp, or one of them twice */
    char *end;
    long v = strtol(c + 3, &end, 10);
    if (end == c + 3 || *end || v < 1 || v > 4096) return false;
    out->tp = (int)v;
    *c = 0;
  }
  /* an empty NAME, a second ':' (":dcp:tp2", ":tp2:tp2") or a NAME no registered path can have */
  if (!base[0] || strchr(base, ':') || strlen(base) >= sizeof out->base) return false;
  memcpy(out->base, base, strlen(base) + 1); /* fits: checked above */
  return true;
}

bool vpath_spec_split(const char *text, vpath_spec *out) {
  assert(text && out);
  if (split(text, out)) return true;
  memset(out, 0, sizeof *out);
  return false;
}

vstatus vpath_spec_parse(const char *text, const char *origin_option, vpath_spec *out) {
  assert(text && out);
  const char *pre = origin_option ? origin_option : "", *sep = origin_option ? ": " : "";
  /* a malformed name is an unknown one, in the words it always had (the golden outputs hold them) */
  out->ops = split(text, out) ? vpaths_find(out->base) : NULL;
  if (!out->ops) {
    memset(out, 0, sizeof *out);
    return VERR("%s%sunknown path '%s' (known: %s)", pre, sep, text, vpaths_names());
  }
  out->caps = out->ops->caps;
  out->splits_inputs = out->caps.tp_splits_inputs && out->caps.tp_splits_inputs(out->variant);
  return V_OK;
}

vstatus vpath_spec_lookup(const char *text, vpath_spec *out) {
  assert(text && out);
  if (!split(text, out)) {
    memset(out, 0, sizeof *out);
    return VERR("path '%s': malformed name", text);
  }
  out->ops = vpaths_find(out->base);
  if (out->ops) {
    out->caps = out->ops->caps;
    out->splits_inputs = out->caps.tp_splits_inputs && out->caps.tp_splits_inputs(out->variant);
  }
  return V_OK;
}

vstatus vpath_specs_parse(const char *const *texts, int n, const char *origin_option, vpath_spec *out) {
  for (int i = 0; i < n; i++) VTRY(vpath_spec_parse(texts[i], origin_option, &out[i]));
  return V_OK;
}
