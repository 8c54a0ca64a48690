/* Launcher environment (common/comm.h): which rank of how many this process is. */
#include <stdlib.h>
#include <string.h>

#include "common/comm.h"

/* Parses an environment integer in [lo, hi]; false when unset. */
static bool env_int(const char *name, int lo, int hi, int *out, vstatus *err) {
  const char *v = getenv(name);
  if (!v || !v[0]) return false;
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || x < lo || x > hi) {
    *err = VERR("environment variable %s='%s': expected an integer in [%d, %d]", name, v, lo, hi);
    return false;
  }
  *out = (int)x;
  return true;
}

bool vcomm_env_launch(int *rank, int *size, int *local_rank, vstatus *err) {
  static const char *const sets[][3] = {
      {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
  };
  *rank = 0;
  *size = 1;
  *local_rank = 0;
  *err = V_OK;
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
    int r = 0, n = 0, l = 0;
    bool hr = env_int(sets[i][0], 0, 1 << 20, &r, err);
    if (*err) return false;
    bool hn = env_int(sets[i][1], 1, 1 << 20, &n, err);
    if (*err) return false;
    if (!hr && !hn) continue;
    if (!hr || !hn) {
      *err = VERR("environment: %s and %s must be set together", sets[i][0], sets[i][1]);
      return false;
    }
    if (r >= n) {
      *err = VERR("environment: %s=%d is not below %s=%d", sets[i][0], r, sets[i][1], n);
      return false;
    }
    env_int(sets[i][2], 0, 1 << 20, &l, err);
    if (*err) return false;
    *rank = r;
    *size = n;
    *local_rank = l;
    return true;
  }
  return false;
}
