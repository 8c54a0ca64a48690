/* ds_model_open (model/model.h): the one opener that knows every kind of model spec. It sits above
 * model.c (directories, synthetic models of the built-in presets) and construct.c (the constructed
 * presets, which build on ds_model_synth), so neither of those calls the other back. */
#include <string.h>

#include "model/construct.h"
#include "model/model.h"

/* "synth:PRESET" past its prefix: a constructed preset (its own defaults; `layers` does not apply)
 * or a built-in one with `layers` (0: the preset's). */
static vstatus open_synth(ds_model *m, const char *preset, uint64_t seed, int layers, bool materialize) {
  if (construct_is_preset(preset)) return construct_model_open(m, preset, NULL, seed, NULL);
  ds_config cfg;
  VTRY(ds_preset_config(preset, layers, &cfg));
  return ds_model_synth(m, &cfg, preset, seed, materialize);
}

vstatus ds_model_open(ds_model *m, const char *spec, uint64_t seed, int layers, bool materialize) {
  if (strncmp(spec, "synth:", 6) != 0) return ds_model_open_dir(m, spec);
  memset(m, 0, sizeof *m);
  vstatus s = open_synth(m, spec + 6, seed, layers, materialize);
  if (s != V_OK) ds_model_close(m);
  return s;
}
