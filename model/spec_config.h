/* The config of a model spec without its weights: what `vouch run --dry-run` sizes paths from. */
#ifndef VOUCH_MODEL_SPEC_CONFIG_H
#define VOUCH_MODEL_SPEC_CONFIG_H

#include "common/vstatus.h"
#include "model/config.h"

/* spec as ds_model_open takes it: "synth:PRESET" (a built-in preset, `layers` > 0 overriding its
 * layer count, or a constructed "recall-*" preset), or a directory / config.json path (its
 * config.json). Reads no tensor and generates nothing. */
vstatus ds_spec_config(const char *spec, int layers, ds_config *out);

#endif
