/* The record sink of one suite invocation: what a suite driver makes its records in, so that each
 * finished case is in the run's SQLite before the next case starts.
 *
 *   veng e = {0};
 *   for each case: r = eng_new(&e, "diverge", id, path); ...fill r...; eng_flush(&e, x->sink);
 *   eng_write_json(&e, json_file);   // --json FILE, once at the end
 *   eng_free(&e);
 *
 * eng_flush stores the records made since the last flush in the run sink it is handed (rec_emit,
 * suites/engine/sink.h; NULL, a suite on its own: nothing stored), so a crash, kill -9 or
 * Ctrl-C later keeps them. A resumed run (`vouch run --resume`) does not store a record it already holds. */
#ifndef VOUCH_SUITES_ENGINE_ENGINE_H
#define VOUCH_SUITES_ENGINE_ENGINE_H

#include "common/vstatus.h"
#include "suites/engine/record.h"
#include "suites/engine/sink.h"

typedef struct {
  vrecord **v;   /* [n] the invocation's records, in the order made (owned) */
  int n, cap;    /* records made; slots allocated */
  int stored;    /* v[0..stored) have been through eng_flush */
  char **traces; /* [cap] the path trace (JSON text) stored with v[i] (owned; NULL, or NULL entries: none) */
} veng;

/* A new record (rec_new) owned by e; NULL on out of memory (error set). */
vrecord *eng_new(veng *e, const char *suite, const char *case_id, const char *path);
/* Hands r (from rec_new) to e. On out of memory r is freed and the error set. */
vstatus eng_add(veng *e, vrecord *r);
/* Attaches a path trace (JSON text, copied) to the last record made in e: eng_flush stores it with
 * the record (rec_emit). Error: no record yet, or out of memory. */
vstatus eng_trace(veng *e, const char *json_text);
/* Finalizes and stores v[stored..n) in `sink`, in order (NULL: marks them flushed, stores nothing;
 * --json holds them). On a store error the records before the failing one are stored, the rest
 * stay unflushed; the error names the record. */
vstatus eng_flush(veng *e, const vrec_sink *sink);
/* Writes {"records": [...]} of every record to `file` (NULL: nothing), whole or not at all
 * (common/atomic_file.h). Error names the file. */
vstatus eng_write_json(const veng *e, const char *file);
void eng_free(veng *e);

#endif
