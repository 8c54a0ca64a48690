/* Wall-clock timing on the host: seconds from CLOCK_MONOTONIC (never steps backwards). */
#ifndef VOUCH_COMMON_CLOCK_H
#define VOUCH_COMMON_CLOCK_H

#include <time.h>

static inline double vclock_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
