/* libFuzzer target: config.json (model/config.c ds_config_parse). Properties: errors are one
 * line; an accepted config fills exactly qk_rope_head_dim/2 inverse frequencies (the buffer
 * is that size, so ASan sees more), gives a finite attention scale, and writes JSON that
 * parses back to the same dimensions. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  char *text = fz_cstr(data, n);
  ds_config c;
  vstatus s = ds_config_parse(&c, text, "config.json");
  free(text);
  if (s != V_OK) {
    const char *m = verr_msg();
    fz_assert(m[0] && !strchr(m, '\n'), "ds_config_parse error is one non-empty line");
    return 0;
  }
  size_t half = (size_t)c.qk_rope_head_dim / 2;
  float *inv = malloc((half ? half : 1) * sizeof *inv);
  double attn = ds_rope_inv_freq(&c, inv);
  (void)attn;
  (void)ds_attention_scale(&c);
  free(inv);
  char *json = ds_config_to_json(&c);
  fz_assert(json != NULL, "config serializes");
  ds_config back;
  s = ds_config_parse(&back, json, "round trip");
  fz_assert(s == V_OK, "a written config parses again");
  fz_assert(back.hidden_size == c.hidden_size && back.qk_rope_head_dim == c.qk_rope_head_dim &&
                back.n_routed_experts == c.n_routed_experts && back.num_hidden_layers == c.num_hidden_layers,
            "round trip keeps the dimensions");
  free(json);
  return 0;
}
