/* The config of a model spec without its weights (model/spec_config.h). */
#include "model/spec_config.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "model/construct.h"
#include "model/model.h"

vstatus ds_spec_config(const char *spec, int layers, ds_config *out) {
  if (!strncmp(spec, "synth:", 6)) {
    const char *preset = spec + 6;
    if (!construct_is_preset(preset)) return ds_preset_config(preset, layers, out);
    construct_opts o;
    construct_layout L;
    VTRY(construct_preset_opts(preset, &o));
    return construct_config(&o, out, &L);
  }
  char path[1024];
  struct stat sb;
  if (stat(spec, &sb) == 0 && S_ISDIR(sb.st_mode)) snprintf(path, sizeof path, "%s/config.json", spec);
  else snprintf(path, sizeof path, "%s", spec);
  return ds_config_load(out, path);
}
