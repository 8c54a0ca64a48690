/* Ctrl-C as a request, not a kill: the first SIGINT/SIGTERM sets a flag that long loops
 * (suites, sweeps) poll to stop after the case in flight, so every finished case stays
 * recorded and the run is marked incomplete. A second signal ends the process at once. */
#ifndef VOUCH_COMMON_INTERRUPT_H
#define VOUCH_COMMON_INTERRUPT_H

#include <stdbool.h>

void vinterrupt_install(void);
bool vinterrupted(void);

#endif
