/* The run sink: where suites' records go while `vouch run` executes a plan. The run hands its sink
 * down (runner/evidence/rundir.h vrundir_sink, through a plan step's entry point and vsuite_ctx.sink),
 * so suites store records without knowing the run's store, and no process-wide "current run" exists.
 * A NULL sink is a suite on its own: its records are only finalized (its --json output holds them).
 * The functions below take the sink (NULL allowed) and do what each case asks of it. */
#ifndef VOUCH_SUITES_ENGINE_SINK_H
#define VOUCH_SUITES_ENGINE_SINK_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/vstatus.h"
#include "suites/engine/record.h"

/* A run that takes records; ctx is handed back to each function. */
typedef struct {
  void *ctx; /* the run (a vrundir) */
  /* True when the run already holds record (suite, case_id, path) with a result. */
  bool (*stored)(void *ctx, const char *suite, const char *case_id, const char *path);
  /* Stores the not_run records r[0..n) (n > 0; status and reason set) the run holds no record of.
   * Error names the store and the record. */
  vstatus (*plan)(void *ctx, vrecord *const *r, int n);
  /* Stores r with `trace_json` (may be NULL) in place of its not_run copy, or only finalizes it
   * when the run already holds it with a result. Error names the store and the record. */
  vstatus (*emit)(void *ctx, vrecord *r, const char *trace_json);
  /* Adds `entry` (a served system's identity, suites/served/served_pair.h) to the run's manifest under
   * "servers", saved at once; an entry of the same role, url and model is kept once. Error names the file. */
  vstatus (*note_server)(void *ctx, const cJSON *entry);
  /* A redacting stream onto the run's logs/NAME.log (a launched server's output; close with fclose);
   * NULL with the error set when it cannot open. NULL function: the run keeps no logs. */
  FILE *(*log_open)(void *ctx, const char *name);
  /* The run's directory (absolute), where a step may keep files of its own beside the records, in a
   * folder it names (vouch sweep --ref-server: its rounds' result directories); they are bundled and
   * verified with the run. NULL function: the run has no directory of its own. */
  const char *(*dir)(void *ctx);
} vrec_sink;

/* True when `sink` (a resumed run; NULL: none) already holds record (suite, case_id, path) with a
 * result (not the not_run of a planned case, rec_plan): a suite may skip that case before running it. */
bool rec_stored(const vrec_sink *sink, const char *suite, const char *case_id, const char *path);
/* For suites, before their cases run: sets records r[0..n) (a case's records as they will be made:
 * ids and the parameters known up front, no metrics) to not_run with `reason` and, with a sink,
 * stores each whose (suite, case_id, path) the run holds no record of, in one transaction.
 * An interrupted run so shows every case it did not finish; each is replaced when its record is
 * stored (rec_emit). The caller still owns r. Error names the store and the record. */
vstatus rec_plan(const vrec_sink *sink, vrecord *const *r, int n, const char *reason);
/* For suites: with a sink, attaches `trace_json` (may be NULL) and stores r there, in place of its
 * not_run copy (rec_plan) in the same transaction; with none (NULL) only finalizes r. A record a
 * resumed run already holds with a result is only finalized. The caller still owns and frees r.
 * Error: the sink's, naming the store and the record, or rec_finalize's. */
vstatus rec_emit(const vrec_sink *sink, vrecord *r, const char *trace_json);
/* For suites that judge servers: the server's identity into the run's manifest (note_server);
 * nothing when sink is NULL. Error names the file. */
vstatus rec_note_server(const vrec_sink *sink, const cJSON *entry);
/* The run's directory (sink->dir), or NULL when sink is NULL or keeps none. */
const char *rec_sink_dir(const vrec_sink *sink);

#endif
