/* The run sink (suites/engine/sink.h): one installed run, or none. */
#include "suites/engine/sink.h"

static const vrec_sink *g_sink; /* the installed run; NULL: a suite on its own */

void rec_sink_set(const vrec_sink *s) { g_sink = s; }
bool rec_sink_active(void) { return g_sink != NULL; }

bool rec_stored(const char *suite, const char *case_id, const char *path) {
  return g_sink && g_sink->stored(g_sink->ctx, suite, case_id, path);
}

vstatus rec_plan(vrecord *const *r, int n, const char *reason) {
  for (int i = 0; i < n; i++) rec_set_status(r[i], REC_NOT_RUN, reason);
  if (!g_sink || n <= 0) return V_OK;
  return g_sink->plan(g_sink->ctx, r, n);
}

vstatus rec_emit(vrecord *r, const char *trace_json) {
  if (!g_sink) return rec_finalize(r);
  return g_sink->emit(g_sink->ctx, r, trace_json);
}

vstatus rec_note_server(const cJSON *entry) {
  if (!g_sink || !g_sink->note_server) return V_OK;
  return g_sink->note_server(g_sink->ctx, entry);
}
