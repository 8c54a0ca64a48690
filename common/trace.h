/* Path traces: which op variant ran at each step, and every fallback with its reason.
 * Paths append events; the runner prints them (--trace) and stores them in bundles.
 * A test that meant to run variant X fails when the trace shows X did not run. */
#ifndef VOUCH_COMMON_TRACE_H
#define VOUCH_COMMON_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { TR_RAN = 0, TR_FALLBACK = 1, TR_NOTE = 2 } vtrace_kind;

typedef struct {
  int64_t step;       /* forward() call number, from 0 */
  vtrace_kind kind;
  char path[24];      /* path that recorded it ("cuda-ref", "latency") */
  char op[32];        /* op name as registered ("rmsnorm", "mla_decode", ...) */
  char variant[48];   /* variant that ran; for a fallback, the path fallen back to */
  char detail[160];   /* shape/batch bucket, or the fallback's reason */
  int count;          /* times this same event repeated within the step (deduplicated) */
} vtrace_event;

typedef struct {
  bool enabled;       /* false: recording calls return at once */
  int64_t step;       /* current step number */
  vtrace_event *ev;   /* [n] events, in order */
  int n, cap;
  int max_events;     /* hard cap (default 1<<20); past it events are counted in dropped */
  int64_t dropped;
} vtrace;

void vtrace_init(vtrace *t, bool enabled);
void vtrace_free(vtrace *t);
void vtrace_next_step(vtrace *t);
/* Records that `variant` of `op` ran in `path`; identical consecutive events in one step
 * are merged (count++). */
void vtrace_ran(vtrace *t, const char *path, const char *op, const char *variant, const char *detail);
/* Records a fallback from `path` to `to` for `op`, with the reason. */
void vtrace_fallback(vtrace *t, const char *path, const char *op, const char *to, const char *reason);
void vtrace_note(vtrace *t, const char *path, const char *what);
/* True when some event in steps [from_step, now] shows `variant` of `op` ran. */
bool vtrace_has(const vtrace *t, const char *op, const char *variant, int64_t from_step);
/* Human-readable dump, one line per event. */
void vtrace_print(const vtrace *t, FILE *f);
/* JSON array text (caller frees). */
char *vtrace_to_json(const vtrace *t);

#endif
