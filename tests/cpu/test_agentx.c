/* suites/sweep/server_agentx.h: AgentX (AIPerf weka_trace) traces into vouch's session lines: new
 * input per turn from the whole-prompt lengths, pauses from think_time / api_time / t, hash ids past
 * the shared prefix and scoped per trace, subagents and context cuts as sessions of their own, the
 * parent turn that joins each subagent (from duration_ms, else its requests' ends), the parent turn
 * that spawned it (the last at or before its t) with the recorded gap after it, one tree per
 * trace, the format told by the file's shape, a directory of trace files read as AIPerf reads one
 * (its own *.json files in name order, no links, ids distinct), and every broken field named with
 * FILE:LINE. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "suites/sweep/server_agentx.h"
#include "tests/harness.h"

static const char *write_file(const char *name, const char *text) {
  static char path[4][512];
  static int k;
  char *p = path[k++ % 4];
  snprintf(p, 512, "%s/%s", test_tmpdir(), name);
  FILE *f = fopen(p, "w");
  fputs(text, f);
  fclose(f);
  return p;
}

/* A trace: a main agent of two turns, a subagent of two (its second t relative to its start), and
 * a main turn whose prompt is shorter than the history (the agent cut its context). */
static const char TRACE[] =
    "{\n"
    "  \"id\": \"tr1\", \"models\": [\"m\"], \"block_size\": 4, \"hash_id_scope\": \"local\",\n"
    "  \"requests\": [\n"
    "    {\"t\": 0.0, \"type\": \"n\", \"model\": \"m\", \"in\": 8, \"out\": 3, \"hash_ids\": [1, 2], \"api_time\": 1.0, \"think_time\": 0.0},\n"
    "    {\"t\": 2.5, \"type\": \"s\", \"model\": \"m\", \"in\": 16, \"out\": 2, \"hash_ids\": [1, 2, 3, 4], \"api_time\": 0.5},\n"
    "    {\"t\": 1.0, \"type\": \"subagent\", \"agent_id\": \"a1\", \"status\": \"completed\", \"requests\": [\n"
    "      {\"t\": 1.2, \"type\": \"n\", \"model\": \"h\", \"in\": 6, \"out\": 2, \"hash_ids\": [1, 9]},\n"
    "      {\"t\": 0.5, \"type\": \"n\", \"model\": \"h\", \"in\": 10, \"out\": 1, \"hash_ids\": [1, 9, 10], \"think_time\": 0.25}]},\n"
    "    {\"t\": 4.0, \"type\": \"n\", \"model\": \"m\", \"in\": 12, \"out\": 4, \"hash_ids\": [1, 2, 5], \"think_time\": 0.1}\n"
    "  ]\n"
    "}\n";

/* The error of reading `text` contains `want`. */
static void bad(const char *text, const char *want) {
  const char *p = write_file("bad.json", text);
  trace_line *v = NULL;
  int n = 0, block = 0;
  const vstatus s = agentx_read(p, 0, &v, &n, &block);
  CHECK(s == V_ERR && strstr(verr_msg(), want) && strstr(verr_msg(), "bad.json:") && !strchr(verr_msg(), '\n'),
        "want '%s', got '%s'", want, s ? verr_msg() : "no error");
  if (s == V_OK) trace_free(v, n);
}

int main(void) {
  const char *p = write_file("t.json", TRACE);
  trace_format f = TRACE_FMT_AUTO;
  CHECK_OK(trace_format_detect(p, &f));
  CHECK(f == TRACE_FMT_AGENTX, "a pretty-printed trace is told by its shape (%d)", f);

  trace_line *v = NULL;
  int n = 0, block = 0;
  CHECK_OK(agentx_read(p, 0, &v, &n, &block));
  CHECK(n == 5 && block == 4, "5 turns (%d), block_size 4 (%d)", n, block);
  if (n == 5) {
    /* the main agent: turn 2's new input is 16 - (8 + 3); its pause t - (t0 + api_time) = 1.5 s */
    CHECK(v[0].session == 0 && v[0].turn == 0 && v[0].t_ms == 0 && v[0].in == 8 && v[0].out == 3 && v[0].n_hash == 2,
          "main turn 1");
    CHECK(v[1].session == 0 && v[1].turn == 1 && v[1].in == 5 && v[1].out == 2 && v[1].pause_ms == 1500 && v[1].n_hash == 2,
          "main turn 2: in %d pause %g hashes %d", v[1].in, v[1].pause_ms, v[1].n_hash);
    /* 12 < 16 + 2: the context was cut, a new session at its own time with its whole prompt */
    CHECK(v[2].session == 1 && v[2].turn == 0 && v[2].t_ms == 4000 && v[2].in == 12 && v[2].n_hash == 3,
          "context cut: session %d turn %d t %g in %d", v[2].session, v[2].turn, v[2].t_ms, v[2].in);
    CHECK(v[2].hash[0] == v[0].hash[0] && v[2].hash[1] == v[0].hash[1], "the cut session shares the trace's blocks");
    /* the subagent: its own session at 1.2 s; its second t (0.5 < 1.0) is relative to its start */
    CHECK(v[3].session == 2 && v[3].turn == 0 && v[3].t_ms == 1200 && v[3].in == 6 && v[3].hash[0] == v[0].hash[0],
          "subagent turn 1: session %d t %g", v[3].session, v[3].t_ms);
    CHECK(v[4].session == 2 && v[4].turn == 1 && v[4].in == 2 && v[4].out == 1 && v[4].pause_ms == 250 && v[4].n_hash == 1,
          "subagent turn 2: in %d pause %g hashes %d", v[4].in, v[4].pause_ms, v[4].n_hash);
    CHECK(v[1].hash[0] != v[0].hash[0] && v[4].hash[0] != v[3].hash[1], "later turns keep the ids past the shared prefix");
    /* the subagent ends at 1.5 s (its last request, 0.5 s after its start, no api_time): the main
     * turn at 2.5 s (line 1) joins both its lines; the main agent's own lines join nothing */
    CHECK(v[3].joiner == 2 && v[4].joiner == 2, "the subagent is joined by line 1 (joiners %d %d)", v[3].joiner, v[4].joiner);
    CHECK(v[0].joiner == 0 && v[1].joiner == 0 && v[2].joiner == 0, "the parent's lines join nothing");
    /* spawned by the main turn at 0 s (the last at or before the subagent's 1.0 s), which took its
     * recorded 1.0 s: no gap; only the subagent's first turn waits for it */
    CHECK(v[3].spawner == 1 && v[3].pause_ms == 0, "the subagent is spawned by line 0 (spawner %d, gap %g ms)", v[3].spawner,
          v[3].pause_ms);
    CHECK(v[0].spawner == 0 && v[1].spawner == 0 && v[2].spawner == 0 && v[4].spawner == 0, "no other line is spawned");
    int trees = 0, joins = 0;
    CHECK_OK(trace_tree_counts(v, n, &trees, &joins));
    CHECK(trees == 1 && joins == 1 && v[4].tree == 0 && v[2].tree == 0, "one tree (%d), one join turn (%d)", trees, joins);
    CHECK_OK(trace_sessions_fit(p, v, n, 18)); /* 16 + its 2 output tokens */
    CHECK(trace_sessions_fit(p, v, n, 17) == V_ERR && strstr(verr_msg(), "session 0 needs 18 tokens"),
          "the sessions' lengths are the recorded ones: %s", verr_msg());
  }
  const int64_t h1 = n ? v[0].hash[0] : 0;
  trace_free(v, n);

  /* duration_ms decides the end where given: 2 s after 1.0 s is after the turn at 2.5 s, so the
   * cut session's first turn (4.0 s, line 2) joins it; 3.5 s: no parent turn after it, no join;
   * null (AIPerf: launched in the background) falls back to the requests' ends */
  static const struct { const char *dur; int joiner; } ends[] = {{"2000", 3}, {"3500", 0}, {"null", 2}, {"1500", 2}};
  for (size_t k = 0; k < sizeof ends / sizeof *ends; k++) {
    char text[sizeof TRACE + 64];
    const char *at = strstr(TRACE, "\"agent_id\"");
    snprintf(text, sizeof text, "%.*s\"duration_ms\": %s, %s", (int)(at - TRACE), TRACE, ends[k].dur, at);
    CHECK_OK(agentx_read(write_file("dur.json", text), 0, &v, &n, &block));
    CHECK(n == 5 && v[3].joiner == ends[k].joiner && v[4].joiner == ends[k].joiner, "duration_ms %s: joiner %d, want %d",
          ends[k].dur, n == 5 ? v[3].joiner : -1, ends[k].joiner);
    trace_free(v, n);
  }

  /* spawns: the parent's last request at or before the subagent's t, the gap from its end (t +
   * api_time, else t); none when the subagent precedes every parent request, or when the spawner
   * would be at or after the join turn (requests out of time order: it would wait for itself) */
  p = write_file("spawn.jsonl",
                 "{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 4, \"out\": 1, \"api_time\": 0.25},"
                 " {\"t\": 0.5, \"type\": \"n\", \"in\": 8, \"out\": 1},"
                 " {\"t\": 0.375, \"type\": \"subagent\", \"requests\": [{\"t\": 0.375, \"type\": \"n\", \"in\": 4, \"out\": 1}]},"
                 " {\"t\": 1.25, \"type\": \"subagent\", \"requests\": [{\"t\": 1.25, \"type\": \"n\", \"in\": 4, \"out\": 1}]}]}\n"
                 "{\"block_size\": 4, \"requests\": [{\"t\": 1, \"type\": \"n\", \"in\": 4, \"out\": 1},"
                 " {\"t\": 0.5, \"type\": \"subagent\", \"requests\": [{\"t\": 0.5, \"type\": \"n\", \"in\": 4, \"out\": 1}]}]}\n"
                 "{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 4, \"out\": 1},"
                 " {\"t\": 5, \"type\": \"n\", \"in\": 4, \"out\": 1}, {\"t\": 1, \"type\": \"n\", \"in\": 4, \"out\": 1},"
                 " {\"t\": 2, \"type\": \"subagent\", \"duration_ms\": 1000, \"requests\": [{\"t\": 2, \"type\": \"n\", \"in\": 4, \"out\": 1}]}]}\n");
  CHECK_OK(agentx_read(p, 0, &v, &n, &block));
  CHECK(n == 10, "10 turns (%d)", n);
  if (n == 10) {
    /* lines: trace 1's parent 0, 1, subagents 2 (0.375 s), 3 (1.25 s); trace 2's parent 4, subagent 5;
     * trace 3's parent 6, 7, 8 (each a session: no prompt grows), subagent 9 */
    CHECK(v[2].spawner == 1 && v[2].pause_ms == 125 && v[2].joiner == 2,
          "at 0.375 s: spawned by line 0 (%d), 0.375 - (0 + 0.25) s later (%g ms), joined by line 1 (%d)", v[2].spawner,
          v[2].pause_ms, v[2].joiner);
    CHECK(v[3].spawner == 2 && v[3].pause_ms == 750 && v[3].joiner == 0,
          "at 1.25 s: spawned by line 1 (%d), 1.25 - 0.5 s later without api_time (%g ms), joined by none (%d)", v[3].spawner,
          v[3].pause_ms, v[3].joiner);
    CHECK(v[5].spawner == 0 && v[5].t_ms == 500 && v[5].joiner == 5,
          "before every parent request: spawned by none (%d), starts at its t", v[5].spawner);
    CHECK(v[9].joiner == 8 && v[9].spawner == 0, "spawner after the join turn: none (spawner %d, joiner %d)", v[9].spawner,
          v[9].joiner);
    for (int i = 0; i < n; i++)
      if (i != 2 && i != 3) CHECK(v[i].spawner == 0, "line %d spawned by none (%d)", i, v[i].spawner);
  }
  trace_free(v, n);

  /* parallel chains (AIPerf splits a capture's flattened workers by hash-id prefix): a request that
   * overlapped another chain's latest request in time, or shares no leading block with it, is not its
   * next turn. The parent interleaves its own turns (ids 7..) with a worker's (ids 9..); the subagent
   * interleaves two workers A (ids 1, 2, ..) and B (1, 3, ..) that share block 1 (a system prompt).
   * Read as one chain, A's second turn would have continued B's history. */
  const char *par = write_file("par.json",
                 "{\"block_size\": 4, \"requests\": ["
                 "{\"t\": 0, \"type\": \"n\", \"in\": 4, \"out\": 1, \"hash_ids\": [7], \"api_time\": 0.5},"
                 "{\"t\": 0.1, \"type\": \"n\", \"in\": 6, \"out\": 1, \"hash_ids\": [9], \"api_time\": 0.2},"
                 "{\"t\": 1.0, \"type\": \"subagent\", \"requests\": ["
                 " {\"t\": 1.0, \"type\": \"n\", \"in\": 8, \"out\": 2, \"hash_ids\": [1, 2], \"api_time\": 0.5},"
                 " {\"t\": 1.1, \"type\": \"n\", \"in\": 8, \"out\": 2, \"hash_ids\": [1, 3], \"api_time\": 0.5},"
                 " {\"t\": 1.6, \"type\": \"n\", \"in\": 14, \"out\": 1, \"hash_ids\": [1, 2, 4]},"
                 " {\"t\": 1.7, \"type\": \"n\", \"in\": 13, \"out\": 1, \"hash_ids\": [1, 3, 5]}]},"
                 "{\"t\": 3.0, \"type\": \"n\", \"in\": 9, \"out\": 1, \"hash_ids\": [7, 8]},"
                 "{\"t\": 3.1, \"type\": \"n\", \"in\": 9, \"out\": 1, \"hash_ids\": [9, 10]}]}\n");
  CHECK_OK(agentx_read(par, 0, &v, &n, &block));
  CHECK(n == 8, "8 turns (%d)", n);
  if (n == 8) {
    /* lines grouped by session: parent 0 (t 0, 3.0), worker 1 (0.1, 3.1), A 2 (1.0, 1.6), B 3 (1.1, 1.7) */
    int sess[8] = {0, 0, 1, 1, 2, 2, 3, 3}, turn[8] = {0, 1, 0, 1, 0, 1, 0, 1}, in[8] = {4, 4, 6, 2, 8, 4, 8, 3};
    double t[8] = {0, 3000, 100, 3100, 1000, 1600, 1100, 1700};
    for (int i = 0; i < 8; i++)
      CHECK(v[i].session == sess[i] && v[i].turn == turn[i] && v[i].in == in[i] && fabs(v[i].t_ms - t[i]) < 1e-6,
            "line %d: session %d turn %d in %d t %g", i, v[i].session, v[i].turn, v[i].in, v[i].t_ms);
    CHECK(v[1].n_hash == 1 && v[1].hash[0] != v[3].hash[0], "the parent's turn keeps the id past its own prefix");
    CHECK(fabs(v[3].pause_ms - 2800) < 1e-6 && fabs(v[5].pause_ms - 100) < 1e-6 && fabs(v[7].pause_ms - 100) < 1e-6,
          "pauses from each chain's own latest request: %g %g %g", v[3].pause_ms, v[5].pause_ms, v[7].pause_ms);
    /* spawned by the worker's turn at 0.1 s (the last own request at or before 1.0 s, line 2), which
     * ended at 0.3 s: A after 0.7 s, B at its own offset 0.1 s later; joined by the parent's 3.0 s
     * turn (line 1), the first own request after the subagent's end at 1.7 s */
    CHECK(v[4].spawner == 3 && v[6].spawner == 3 && fabs(v[4].pause_ms - 700) < 1e-6 && fabs(v[6].pause_ms - 800) < 1e-6,
          "both chains spawned by line 2: spawners %d %d, gaps %g %g", v[4].spawner, v[6].spawner, v[4].pause_ms, v[6].pause_ms);
    CHECK(v[5].spawner == 0 && v[7].spawner == 0 && v[0].spawner == 0 && v[2].spawner == 0, "later turns wait for none");
    CHECK(v[4].joiner == 2 && v[5].joiner == 2 && v[6].joiner == 2 && v[7].joiner == 2 && v[0].joiner == 0 && v[3].joiner == 0,
          "the subagent's chains are joined by line 1 (%d %d)", v[4].joiner, v[7].joiner);
    int trees = 0, joins = 0;
    CHECK_OK(trace_tree_counts(v, n, &trees, &joins));
    CHECK(trees == 1 && joins == 1, "one tree (%d), one join turn (%d)", trees, joins);
  }
  trace_free(v, n);
  /* --num-prompts 1 keeps the parent's session whole: the worker's turns between its turns are dropped
   * with the worker's session, not taken for the end of the list */
  CHECK_OK(agentx_read(par, 1, &v, &n, &block));
  CHECK(n == 2 && v[0].session == 0 && v[1].session == 0 && v[1].turn == 1 && fabs(v[1].t_ms - 3000) < 1e-6,
        "limit 1: the parent's two turns (%d lines)", n);
  trace_free(v, n);

  /* many parallel chains (a capture of 70 workers, each answering in 10 s, then each worker's second
   * turn): every second turn finds its own chain among the 70 open ones */
  {
    static char big[70 * 2 * 120 + 64];
    int at = snprintf(big, sizeof big, "{\"block_size\": 4, \"requests\": [");
    for (int r = 0; r < 2; r++)
      for (int c = 0; c < 70; c++)
        at += snprintf(big + at, sizeof big - (size_t)at,
                       "%s{\"t\": %g, \"type\": \"n\", \"in\": %d, \"out\": 1, \"hash_ids\": [%d%s], \"api_time\": 10}",
                       r || c ? "," : "", 20.0 * r + 0.01 * c, r ? 9 : 4, 1000 + c, r ? ", 7" : "");
    snprintf(big + at, sizeof big - (size_t)at, "]}\n");
    CHECK_OK(agentx_read(write_file("many.json", big), 0, &v, &n, &block));
    int later = 0;
    for (int i = 0; i < n; i++) later += v[i].turn == 1 && v[i].in == 9 - 5 && v[i].session == i / 2;
    CHECK(n == 140 && v[n - 1].session == 69 && later == 70, "70 chains of 2 turns: %d lines, %d sessions, %d second turns",
          n, n ? v[n - 1].session + 1 : 0, later);
    trace_free(v, n);
  }

  /* limit: the first session only */
  CHECK_OK(agentx_read(p, 1, &v, &n, &block));
  CHECK(n == 2 && v[1].session == 0, "--num-prompts 1 keeps session 0 (%d turns)", n);
  trace_free(v, n);

  /* one trace per line: ids are scoped to their trace; a Mooncake line is not AgentX */
  p = write_file("two.jsonl",
                 "{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 4, \"out\": 1, \"hash_ids\": [1]}]}\n"
                 "{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 4, \"out\": 1, \"hash_ids\": [1]}]}\n");
  CHECK_OK(trace_format_detect(p, &f));
  CHECK(f == TRACE_FMT_AGENTX, "one trace per line is told by its shape");
  CHECK_OK(agentx_read(p, 0, &v, &n, &block));
  CHECK(n == 2 && v[1].session == 1 && v[0].hash[0] != v[1].hash[0] && v[0].hash[0] == h1,
        "two traces, two sessions, id 1 of each a different block");
  CHECK(n == 2 && v[0].tree == 0 && v[1].tree == 1, "one tree per trace");
  trace_free(v, n);
  p = write_file("moon.jsonl", "{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 2, \"requests\": 3}\n");
  CHECK_OK(trace_format_detect(p, &f));
  CHECK(f == TRACE_FMT_MOONCAKE, "a Mooncake line (requests not a list) is Mooncake");
  p = write_file("broken.jsonl", "{\"timestamp\": 0,\n");
  CHECK_OK(trace_format_detect(p, &f));
  CHECK(f == TRACE_FMT_MOONCAKE, "a broken file goes to the Mooncake reader, which names the line");
  CHECK(trace_format_detect("/nonexistent/x.json", &f) == V_ERR, "a missing file");
  CHECK_OK(trace_format_parse("agentx", &f));
  CHECK(f == TRACE_FMT_AGENTX && trace_format_parse("weka", &f) == V_ERR && strstr(verr_msg(), "--trace-format"), "flag");

  /* broken traces: FILE:LINE and the field */
  bad("{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 0, \"out\": 1}]}",
      "bad.json:1: requests[0].in must be an integer");
  bad("\n\n{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 3, \"out\": 1.5}]}",
      "bad.json:3: requests[0].out must be");
  bad("{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 3, \"out\": 1}]}\n{\"block_size\": 4, \"requ",
      "bad.json:2: not valid JSON");
  bad("{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"q\", \"in\": 3, \"out\": 1}]}", "requests[0].type must be");
  bad("{\"block_size\": 4, \"requests\": [{\"t\": -1, \"type\": \"n\", \"in\": 3, \"out\": 1}]}", "requests[0].t must be");
  bad("{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 3, \"out\": 1, \"hash_ids\": [1, \"a\"]}]}",
      "requests[0].hash_ids[1] is not an integer");
  bad("{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 3, \"out\": 1, \"hash_ids\": 7}]}",
      "requests[0].hash_ids must be a list");
  bad("{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 3, \"out\": 1, \"think_time\": -2}]}",
      "requests[0].think_time must be");
  bad("{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 3, \"out\": 1, \"api_time\": \"x\"}]}",
      "requests[0].api_time must be");
  bad("{\"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 3, \"out\": 1}]}", "bad.json:1: block_size must be");
  bad("{\"block_size\": 4, \"hash_id_scope\": \"global\", \"requests\": []}", "hash_id_scope must be \"local\"");
  bad("{\"block_size\": 4, \"requests\": {}}", "requests must be a list");
  bad("{\"block_size\": 4, \"requests\": [7]}", "requests[0] must be an object");
  bad("{\"block_size\": 4, \"requests\": []}", "no requests in the trace");
  bad("[1, 2]", "bad.json:1: not a trace object");
  bad("{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 3, \"out\": 1}]}\n"
      "{\"block_size\": 8, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 3, \"out\": 1}]}",
      "bad.json:2: block_size 8, but an earlier trace of the file has 4");
  bad("{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 3, \"out\": 1},"
      "{\"t\": 1, \"type\": \"subagent\", \"requests\": [{\"t\": 1, \"type\": \"n\", \"in\": 3}]}]}",
      "requests[1].requests[0].out must be");
  bad("{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 3, \"out\": 1},"
      "{\"t\": 1, \"type\": \"subagent\", \"requests\": [{\"t\": 1, \"type\": \"subagent\", \"requests\": []}]}]}",
      "a subagent inside a subagent");
  bad("{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 3, \"out\": 1},"
      "{\"t\": 1, \"type\": \"subagent\"}]}",
      "requests[1].requests must be a list");
  /* a malformed join: the subagent's duration_ms */
  bad("{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 3, \"out\": 1},"
      "{\"t\": 1, \"type\": \"subagent\", \"duration_ms\": -5, \"requests\": []}]}",
      "bad.json:1: requests[1].duration_ms must be a number of ms >= 0");
  bad("{\"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 3, \"out\": 1},"
      "{\"t\": 1, \"type\": \"subagent\", \"duration_ms\": \"5\", \"requests\": []}]}",
      "requests[1].duration_ms must be");
  CHECK(agentx_read("/nonexistent/x.json", 0, &v, &n, &block) == V_ERR && strstr(verr_msg(), "cannot open"), "missing");

  /* a directory of trace files (AIPerf's layout): its own *.json files in name order, ids distinct */
  char d[512], q[600];
  snprintf(d, sizeof d, "%s/traces", test_tmpdir());
  CHECK(mkdir(d, 0755) == 0, "mkdir");
  write_file("traces/b.json", "{\"id\": \"b\", \"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 8, "
                              "\"out\": 1, \"hash_ids\": [1, 2]}]}");
  write_file("traces/a.json", "{\"id\": \"a\", \"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 4, "
                              "\"out\": 2, \"hash_ids\": [1]}, {\"t\": 1, \"type\": \"n\", \"in\": 12, \"out\": 1, "
                              "\"hash_ids\": [1, 2, 3]}]}");
  write_file("traces/notes.txt", "not a trace");
  snprintf(q, sizeof q, "%s/sub", d);
  CHECK(mkdir(q, 0755) == 0, "mkdir sub");
  write_file("traces/sub/c.json", "{\"id\": \"c\", \"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 4, "
                                  "\"out\": 1}]}");
  CHECK_OK(trace_format_detect(d, &f));
  CHECK(f == TRACE_FMT_AGENTX, "a directory is AgentX");
  CHECK_OK(agentx_read(d, 0, &v, &n, &block));
  CHECK(n == 3 && block == 4, "a.json's two turns and b.json's one; notes.txt and sub/ not read");
  CHECK(n == 3 && v[0].in == 4 && v[1].in == 12 - 6 && v[1].turn == 1 && v[2].in == 8 && v[2].session == 1,
        "a.json first (name order), then b.json");
  CHECK(n == 3 && v[0].tree == 0 && v[2].tree == 1 && v[0].hash[0] != v[2].hash[0], "a tree per file, ids scoped to it");
  trace_free(v, n);
  CHECK_OK(agentx_read(d, 1, &v, &n, &block));
  CHECK(n == 2 && v[1].session == 0, "--num-prompts 1 keeps a.json's session");
  trace_free(v, n);
  write_file("traces/c.json", "{\"id\": \"b\", \"block_size\": 4, \"requests\": [{\"t\": 0, \"type\": \"n\", \"in\": 4, "
                              "\"out\": 1}]}");
  CHECK(agentx_read(d, 0, &v, &n, &block) == V_ERR && strstr(verr_msg(), "traces/c.json:1: id \"b\" names an earlier trace"),
        "a repeated id names the file");
  snprintf(q, sizeof q, "%s/c.json", d);
  CHECK(unlink(q) == 0 && symlink("/etc/hostname", q) == 0, "a link in its place");
  CHECK(agentx_read(d, 0, &v, &n, &block) == V_ERR && strstr(verr_msg(), "traces/c.json: not a regular file"),
        "a link is not followed out of the directory");
  CHECK(unlink(q) == 0, "unlink");
  write_file("traces/c.json", "{\"id\": 3, \"block_size\": 8, \"requests\": []}");
  CHECK(agentx_read(d, 0, &v, &n, &block) == V_ERR && strstr(verr_msg(), "traces/c.json:1: block_size 8"),
        "every file's traces share one block_size");
  snprintf(q, sizeof q, "%s/sub", d);
  CHECK(agentx_read(q, 0, &v, &n, &block) == V_OK && n == 1, "a directory of one file");
  trace_free(v, n);
  snprintf(q, sizeof q, "%s/sub/c.json", d);
  CHECK(unlink(q) == 0, "unlink");
  snprintf(q, sizeof q, "%s/sub", d);
  CHECK(agentx_read(q, 0, &v, &n, &block) == V_ERR && strstr(verr_msg(), "no *.json trace files"), "an empty directory");
  return test_finish();
}
