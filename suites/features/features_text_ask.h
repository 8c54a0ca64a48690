/* What the checks of `vouch features --ref-server` share (suites/features/features_text_checks.h and
 * the checks' files _checks.c, _dist.c, _struct.c): a check's result, the session (the pair, the
 * options, the reference's greedy continuation), and how a check asks a server. */
#ifndef VOUCH_SUITES_FEATURES_FEATURES_TEXT_ASK_H
#define VOUCH_SUITES_FEATURES_FEATURES_TEXT_ASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/vstatus.h"
#include "suites/served/served_pair.h"
#include "suites/served/served_text.h"

typedef enum { FT_PASS, FT_FAIL, FT_UNDECIDED, FT_NOT_SUPPORTED, FT_ERROR } ft_status;

/* One check's result. */
typedef struct {
  ft_status status;
  char detail[700];      /* what was compared, the reference's figure beside the candidate's, or why it
                            is undecided / not supported */
  double cand, ref;      /* the figure compared, the candidate's and the reference's (NaN: none) */
  const char *unit;      /* its unit ("tokens", "nats", ...; "" none) */
  double bound;          /* the bound it was held to (NaN: an equality) */
  const char *bound_source; /* where the bound comes from (NULL: none) */
} ft_result;

/* What the checks share: the pair, the options and what the reference said once (its greedy
 * continuation, asked twice: the text checks are decided only when it reproduces itself). */
typedef struct {
  served_side *sv;       /* [2] sv[0] the candidate, sv[1] the reference (open) */
  uint64_t seed;         /* --seed: the prompt and the sampling seeds */
  const char *prompt;    /* the prompt the checks continue (picked by the seed) */
  served_struct_style style; /* how structured output is asked (with style_auto: the first the reference takes) */
  bool style_auto;
  /* the reference's greedy continuation (ft_greedy) */
  bool have_greedy;
  served_call greedy[2]; /* two asks of the same request, one at a time */
  bool greedy_same;      /* both answered the same text and finish reason */
  /* the candidate's own greedy continuation (ft_need_cand_greedy, one ask): where a build's numerics
   * take its text away from the reference's before the point a check looks at (a stop, n copies),
   * the feature is judged on the candidate's own text, so a numerical difference (logprobs' and
   * diverge's business) does not fail the stop and n checks as well */
  bool have_cand_greedy;
  served_call cand_greedy;
} ft_ctx;

void ft_ctx_free(ft_ctx *c);

#define FT_TOKENS 16       /* tokens of the greedy continuations */
#define FT_ABS_LP 1e-4     /* nats: the least logprob bound (servers print logprobs rounded; an exact
                              reference repeat would otherwise allow no difference at all) */

/* served_gen_default() with the check prompt, greedy, FT_TOKENS tokens, token ids asked. */
served_gen ft_greedy_gen(const ft_ctx *c);
/* Sends g (its model set here) to side (0 the candidate, 1 the reference) as one completions
 * request, whole or streamed (g.stream), into *out (zeroed first; free with served_calls_free(out, 1)).
 * Error only when the runner fails; the server's failure is in out. */
vstatus ft_ask(ft_ctx *c, int side, served_gen g, served_call *out);
/* Asks the reference's greedy continuation twice (once per context). */
vstatus ft_need_greedy(ft_ctx *c);
/* Asks the candidate's greedy continuation once (the request of ft_need_greedy). */
vstatus ft_need_cand_greedy(ft_ctx *c);
/* Bytes a and b share from the start (0 when either is NULL). */
size_t ft_common_prefix(const served_choice *a, const served_choice *b);
/* Choice 0 of an answered call, NULL when it failed or has none. */
const served_choice *ft_first(const served_call *call);
/* The completion tokens of choice 0: usage, else its token ids, else its logprob positions; -1 unknown. */
long ft_ntokens(const served_call *call);
/* Sets r's status and detail (printf). */
void ft_set(ft_result *r, ft_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* r from a reference call that failed: not_supported when it refused the request (HTTP 4xx), else
 * undecided; `what` names the request. */
void ft_ref_failed(ft_result *r, const served_call *call, const char *what);
/* A text for a detail line: at most 40 bytes, control bytes as '.', in quotes (into buf[cap]). */
const char *ft_show(const char *t, char *buf, size_t cap);

#endif
