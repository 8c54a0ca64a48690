/* The run sink (suites/engine/sink.h): what a suite asks of the sink it was handed, NULL (a suite on
 * its own) included. */
#include "suites/engine/sink.h"

bool rec_stored(const vrec_sink *sink, const char *suite, const char *case_id, const char *path) {
  return sink && sink->stored(sink->ctx, suite, case_id, path);
}

vstatus rec_plan(const vrec_sink *sink, vrecord *const *r, int n, const char *reason) {
  for (int i = 0; i < n; i++) rec_set_status(r[i], REC_NOT_RUN, reason);
  if (!sink || n <= 0) return V_OK;
  return sink->plan(sink->ctx, r, n);
}

vstatus rec_emit(const vrec_sink *sink, vrecord *r, const char *trace_json) {
  if (!sink) return rec_finalize(r);
  return sink->emit(sink->ctx, r, trace_json);
}

vstatus rec_note_server(const vrec_sink *sink, const cJSON *entry) {
  if (!sink || !sink->note_server) return V_OK;
  return sink->note_server(sink->ctx, entry);
}

const char *rec_sink_dir(const vrec_sink *sink) { return sink && sink->dir ? sink->dir(sink->ctx) : NULL; }
