/* libFuzzer target: one .safetensors file (model/safetensors.c st_open). Properties: an error
 * is one non-empty line; an opened set's tensors lie inside their file's mapping (every byte
 * of each tensor is read, so ASan sees any overrun) and are found by name. */
#include <stdio.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  const char *p = fz_write("x.safetensors", data, n);
  st_set set;
  if (st_open(&set, p) != V_OK) {
    const char *m = verr_msg();
    fz_assert(m[0] && !strchr(m, '\n'), "st_open error is one non-empty line");
    return 0;
  }
  unsigned sum = 0;
  for (int i = 0; i < set.n_tensors; i++) {
    const vtensor *t = &set.tensors[i];
    const unsigned char *b = t->data;
    size_t nb = vtensor_nbytes(t);
    for (size_t k = 0; k < nb; k++) sum += b[k];
    fz_assert(st_find(&set, t->name) == t, "st_find finds each tensor");
  }
  st_close(&set);
  return (int)(sum & 0);
}
