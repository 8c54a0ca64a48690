#include "common/interrupt.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
  if (g_stop) {
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  g_stop = 1;
  static const char msg[] = "\nvouch: stopping after the case in flight (press Ctrl-C again to abort now)\n";
  ssize_t w = write(2, msg, sizeof msg - 1);
  (void)w;
}

void vinterrupt_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

bool vinterrupted(void) { return g_stop != 0; }
