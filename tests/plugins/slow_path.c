/* A --path-lib path for tests: "slow-ref" is cpu-ref whose forward() takes SLOW_PCT percent
 * longer (it waits that share of the step's own wall time after computing it), so a test can
 * plant a known slowdown of one step without editing vouch: a commit that swaps this library
 * built with SLOW_PCT=0 for one built with SLOW_PCT=10 is a 10% regression of that path.
 * The logits are cpu-ref's, unchanged. Loaded into the vouch binary, which exports its symbols. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <time.h>

#include "suites/paths/plugin.h"

VOUCH_PLUGIN_ABI;

#ifndef SLOW_PCT
#define SLOW_PCT 10
#endif

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static vstatus slow_forward(void *st, const vstep *s, float *logits) {
  double t0 = now_s();
  vstatus r = cpu_ref_ops.forward(st, s, logits);
  double until = now_s() + (now_s() - t0) * SLOW_PCT / 100.0;
  while (SLOW_PCT > 0 && now_s() < until) { /* sleep to the deadline, then spin the last 50 us */
    double left = until - now_s();
    if (left > 60e-6) {
      double w = left - 50e-6;
      struct timespec d = {(time_t)w, (long)((w - (double)(time_t)w) * 1e9)};
      while (nanosleep(&d, &d) != 0 && errno == EINTR) {}
    }
  }
  return r;
}

/* cpu-ref's operations (the state is cpu-ref's) with this forward; filled when vouch loads
 * the library, before it reads the symbol */
vpath_ops vouch_path_ops;

__attribute__((constructor)) static void slow_init(void) {
  vouch_path_ops = cpu_ref_ops;
  vouch_path_ops.name = "slow-ref";
  vouch_path_ops.desc = "cpu-ref with each forward() made SLOW_PCT% slower (a test's planted slowdown)";
  vouch_path_ops.forward = slow_forward;
}
