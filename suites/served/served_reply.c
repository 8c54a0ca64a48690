/* The answers of /v1/completions and /v1/chat/completions, whole or streamed, into served_reply
 * (suites/served/served_text.h). Everything read here is untrusted: each field is checked for its
 * type and range before it is used, and the first malformed one fails the answer with its name. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/served/served_text.h"

/* Sets err (the first problem only; one line). Returns false, so `return fail(...)` reads well. */
static bool fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(char *err, size_t cap, const char *fmt, ...) {
  if (!cap || err[0]) return false;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
  vtext_one_line(err);
  return false;
}

/* Where a field is: an event's number in a stream ("event 3: ") or "" for a whole answer. */
typedef struct {
  const served_parse_opts *o;
  bool delta;          /* a stream event: text comes in delta.content / text pieces */
  int event;           /* the event's number (1-based) when delta */
  char *err;
  size_t cap;
} ctx;

#define WHERE(c) ((c)->delta ? "event " : ""), ((c)->delta ? (c)->event : 0), ((c)->delta ? ": " : "")
#define WFMT "%s%.0d%s"

static char *dup_str(const char *s) {
  const size_t n = strlen(s);
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n + 1);
  return d;
}

/* The id of a "token_id:N" name, else -1. */
static int32_t name_id(const char *name) {
  if (!name || strncmp(name, "token_id:", 9)) return -1;
  char *end;
  const long v = strtol(name + 9, &end, 10);
  return end != name + 9 && !*end && v >= 0 && v < 2147483647L ? (int32_t)v : -1;
}

/* The value of a JSON number that must be an int32 >= 0; false when it is not one. */
static bool as_id(const cJSON *v, int32_t *out) {
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble < 2147483647.0) ||
      v->valuedouble != floor(v->valuedouble))
    return false;
  *out = (int32_t)v->valuedouble;
  return true;
}

static void pos_free(served_pos *p) {
  free(p->token);
  free(p->bytes);
  for (int k = 0; k < p->n_top; k++) free(p->top[k].token);
  free(p->top);
  memset(p, 0, sizeof *p);
}

static void choice_free(served_choice *ch) {
  free(ch->text);
  for (int i = 0; i < ch->n_lp; i++) pos_free(&ch->lp[i]);
  free(ch->lp);
  free(ch->token_ids);
  memset(ch, 0, sizeof *ch);
}

void served_reply_free(served_reply *r) {
  for (int i = 0; i < r->n_choices; i++) choice_free(&r->choices[i]);
  free(r->choices);
  for (int i = 0; i < r->n_prompt_lp; i++) pos_free(&r->prompt_lp[i]);
  free(r->prompt_lp);
  free(r->prompt_token_ids);
  memset(r, 0, sizeof *r);
}

const served_choice *served_reply_choice(const served_reply *r, int index) {
  for (int i = 0; i < r->n_choices; i++)
    if (r->choices[i].index == index) return &r->choices[i];
  return NULL;
}

/* The choice with this index, appended when new. NULL: out of memory or too many (err set). */
static served_choice *choice_at(served_reply *r, int index, ctx *c) {
  for (int i = 0; i < r->n_choices; i++)
    if (r->choices[i].index == index) return &r->choices[i];
  if (r->n_choices >= SERVED_MAX_CHOICES) {
    fail(c->err, c->cap, WFMT "more than %d choices", WHERE(c), SERVED_MAX_CHOICES);
    return NULL;
  }
  served_choice *nc = realloc(r->choices, (size_t)(r->n_choices + 1) * sizeof *nc);
  if (!nc) { fail(c->err, c->cap, "out of memory for a choice"); return NULL; }
  r->choices = nc;
  served_choice *ch = &nc[r->n_choices++];
  memset(ch, 0, sizeof *ch);
  ch->index = index;
  ch->text = calloc(1, 1);
  if (!ch->text) { fail(c->err, c->cap, "out of memory for a choice"); return NULL; }
  return ch;
}

static bool text_add(served_choice *ch, const char *s, ctx *c) {
  const size_t n = strlen(s);
  if (!n) return true;
  char *nt = realloc(ch->text, ch->text_len + n + 1);
  if (!nt) return fail(c->err, c->cap, "out of memory for the answer's text");
  memcpy(nt + ch->text_len, s, n + 1);
  ch->text = nt;
  ch->text_len += n;
  return true;
}

/* A new position at the end of ch->lp (zeroed: logprob NaN, ids -1). NULL on out of memory. */
static served_pos *pos_new(served_choice *ch, ctx *c) {
  if (ch->n_lp == ch->cap_lp) {
    const int cap = ch->cap_lp ? ch->cap_lp * 2 : 16;
    served_pos *np = cap < (1 << 26) ? realloc(ch->lp, (size_t)cap * sizeof *np) : NULL;
    if (!np) { fail(c->err, c->cap, "out of memory for logprobs"); return NULL; }
    ch->lp = np;
    ch->cap_lp = cap;
  }
  served_pos *p = &ch->lp[ch->n_lp++];
  memset(p, 0, sizeof *p);
  p->logprob = NAN;
  p->id = -1;
  p->text_offset = -1;
  return p;
}

/* Adds an alternative to p. False: too many, or out of memory (err set). */
static bool alt_add(served_pos *p, const char *token, int32_t id, double lp, int rank, ctx *c, const char *field) {
  if (p->n_top >= SERVED_MAX_TOP) return fail(c->err, c->cap, WFMT "%s: more than %d alternatives", WHERE(c), field, SERVED_MAX_TOP);
  served_alt *na = realloc(p->top, (size_t)(p->n_top + 1) * sizeof *na);
  if (!na) return fail(c->err, c->cap, "out of memory for logprobs");
  p->top = na;
  char *t = dup_str(token);
  if (!t) return fail(c->err, c->cap, "out of memory for logprobs");
  na[p->n_top++] = (served_alt){.token = t, .id = id >= 0 ? id : name_id(token), .logprob = lp, .rank = rank};
  return true;
}

/* The array member `key` of o: NULL when absent or null (*bad false), or when of another type (*bad true). */
static const cJSON *opt_array(const cJSON *o, const char *key, bool *bad) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  *bad = v && !cJSON_IsNull(v) && !cJSON_IsArray(v);
  return cJSON_IsArray(v) ? v : NULL;
}

/* The legacy (completions) logprobs object lp of choice number ci into ch: tokens, token_logprobs,
 * top_logprobs ({token: logprob} per position, or null), text_offset. */
static bool legacy_logprobs(served_choice *ch, const cJSON *lp, int ci, ctx *c) {
  bool bt, bl, btop, boff;
  const cJSON *toks = opt_array(lp, "tokens", &bt), *tlp = opt_array(lp, "token_logprobs", &bl);
  const cJSON *top = opt_array(lp, "top_logprobs", &btop), *off = opt_array(lp, "text_offset", &boff);
  if (bt || !toks) return fail(c->err, c->cap, WFMT "choices[%d].logprobs.tokens: not a list", WHERE(c), ci);
  if (bl || !tlp) return fail(c->err, c->cap, WFMT "choices[%d].logprobs.token_logprobs: not a list", WHERE(c), ci);
  if (btop) return fail(c->err, c->cap, WFMT "choices[%d].logprobs.top_logprobs: not a list or null", WHERE(c), ci);
  if (boff) return fail(c->err, c->cap, WFMT "choices[%d].logprobs.text_offset: not a list", WHERE(c), ci);
  const int n = cJSON_GetArraySize(toks);
  if (cJSON_GetArraySize(tlp) != n)
    return fail(c->err, c->cap, WFMT "choices[%d].logprobs.token_logprobs: %d entries for %d tokens", WHERE(c), ci,
                cJSON_GetArraySize(tlp), n);
  if (top && cJSON_GetArraySize(top) != n)
    return fail(c->err, c->cap, WFMT "choices[%d].logprobs.top_logprobs: %d entries for %d tokens", WHERE(c), ci,
                cJSON_GetArraySize(top), n);
  if (off && cJSON_GetArraySize(off) != n)
    return fail(c->err, c->cap, WFMT "choices[%d].logprobs.text_offset: %d entries for %d tokens", WHERE(c), ci,
                cJSON_GetArraySize(off), n);
  const cJSON *t = toks->child, *l = tlp->child, *d = top ? top->child : NULL, *o = off ? off->child : NULL;
  for (int i = 0; i < n; i++, t = t->next, l = l->next, d = d ? d->next : NULL, o = o ? o->next : NULL) {
    if (!cJSON_IsString(t)) return fail(c->err, c->cap, WFMT "choices[%d].logprobs.tokens[%d]: not a string", WHERE(c), ci, i);
    if (!cJSON_IsNumber(l) && !cJSON_IsNull(l))
      return fail(c->err, c->cap, WFMT "choices[%d].logprobs.token_logprobs[%d]: not a number or null", WHERE(c), ci, i);
    if (d && !cJSON_IsObject(d) && !cJSON_IsNull(d))
      return fail(c->err, c->cap, WFMT "choices[%d].logprobs.top_logprobs[%d]: not an object or null", WHERE(c), ci, i);
    if (o && !(cJSON_IsNumber(o) && o->valuedouble >= 0 && o->valuedouble < 1e15))
      return fail(c->err, c->cap, WFMT "choices[%d].logprobs.text_offset[%d]: not an offset", WHERE(c), ci, i);
    served_pos *p = pos_new(ch, c);
    if (!p) return false;
    p->token = dup_str(t->valuestring);
    if (!p->token) return fail(c->err, c->cap, "out of memory for logprobs");
    p->id = name_id(t->valuestring);
    p->logprob = cJSON_IsNumber(l) ? l->valuedouble : NAN;
    p->text_offset = o ? (long)o->valuedouble : -1;
    const cJSON *e;
    if (cJSON_IsObject(d)) cJSON_ArrayForEach(e, d) {
        if (!cJSON_IsNumber(e))
          return fail(c->err, c->cap, WFMT "choices[%d].logprobs.top_logprobs[%d]: the value of '%.40s' is not a number",
                      WHERE(c), ci, i, e->string);
        if (!alt_add(p, e->string, -1, e->valuedouble, 0, c, "logprobs.top_logprobs")) return false;
      }
  }
  return true;
}

/* The chat logprobs object lp ({"content": [{token, logprob, bytes, top_logprobs}]}) into ch. */
static bool chat_logprobs(served_choice *ch, const cJSON *lp, int ci, ctx *c) {
  bool bad;
  const cJSON *content = opt_array(lp, "content", &bad), *e;
  if (bad) return fail(c->err, c->cap, WFMT "choices[%d].logprobs.content: not a list or null", WHERE(c), ci);
  int i = 0;
  cJSON_ArrayForEach(e, content) {
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(e, "token");
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(e, "logprob");
    bool bb, btop;
    const cJSON *bytes = opt_array(e, "bytes", &bb), *top = opt_array(e, "top_logprobs", &btop);
    if (!cJSON_IsObject(e)) return fail(c->err, c->cap, WFMT "choices[%d].logprobs.content[%d]: not an object", WHERE(c), ci, i);
    if (!cJSON_IsString(tok)) return fail(c->err, c->cap, WFMT "choices[%d].logprobs.content[%d].token: not a string", WHERE(c), ci, i);
    if (!cJSON_IsNumber(l)) return fail(c->err, c->cap, WFMT "choices[%d].logprobs.content[%d].logprob: not a number", WHERE(c), ci, i);
    if (bb) return fail(c->err, c->cap, WFMT "choices[%d].logprobs.content[%d].bytes: not a list or null", WHERE(c), ci, i);
    if (btop) return fail(c->err, c->cap, WFMT "choices[%d].logprobs.content[%d].top_logprobs: not a list", WHERE(c), ci, i);
    served_pos *p = pos_new(ch, c);
    if (!p) return false;
    p->token = dup_str(tok->valuestring);
    if (!p->token) return fail(c->err, c->cap, "out of memory for logprobs");
    p->id = name_id(tok->valuestring);
    p->logprob = l->valuedouble;
    if (bytes) {
      const int nb = cJSON_GetArraySize(bytes);
      p->bytes = malloc((size_t)(nb > 0 ? nb : 1));
      if (!p->bytes) return fail(c->err, c->cap, "out of memory for logprobs");
      const cJSON *b;
      cJSON_ArrayForEach(b, bytes) {
        if (!cJSON_IsNumber(b) || !(b->valuedouble >= 0 && b->valuedouble <= 255) || b->valuedouble != floor(b->valuedouble))
          return fail(c->err, c->cap, WFMT "choices[%d].logprobs.content[%d].bytes[%d]: not a byte", WHERE(c), ci, i, p->n_bytes);
        p->bytes[p->n_bytes++] = (unsigned char)b->valuedouble;
      }
    }
    int k = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, top) {
      const cJSON *at = cJSON_GetObjectItemCaseSensitive(a, "token"), *al = cJSON_GetObjectItemCaseSensitive(a, "logprob");
      if (!cJSON_IsString(at) || !cJSON_IsNumber(al))
        return fail(c->err, c->cap, WFMT "choices[%d].logprobs.content[%d].top_logprobs[%d]: not a {token, logprob} object",
                    WHERE(c), ci, i, k);
      if (!alt_add(p, at->valuestring, -1, al->valuedouble, 0, c, "logprobs.content[].top_logprobs")) return false;
      k++;
    }
    i++;
  }
  return true;
}

/* A list of token ids (v, named `field`) into *ids / *n (appended; *cap slots). */
static bool ids_add(const cJSON *v, int32_t **ids, int *n, int *cap, ctx *c, const char *field) {
  const cJSON *e;
  int k = 0;
  cJSON_ArrayForEach(e, v) {
    int32_t id;
    if (!as_id(e, &id)) return fail(c->err, c->cap, WFMT "%s[%d]: not a token id", WHERE(c), field, k);
    if (*n == *cap) {
      const int nc = *cap ? *cap * 2 : 64;
      int32_t *ni = nc < (1 << 28) ? realloc(*ids, (size_t)nc * sizeof *ni) : NULL;
      if (!ni) return fail(c->err, c->cap, "out of memory for token ids");
      *ids = ni, *cap = nc;
    }
    (*ids)[(*n)++] = id;
    k++;
  }
  return true;
}

/* vLLM's prompt_logprobs list (null, then {"<id>": {logprob, rank, decoded_token}} per position) into
 * r->prompt_lp; the chosen token of each position is resolved at the end (finalize). */
static bool prompt_logprobs(served_reply *r, const cJSON *pl, const char *field, ctx *c) {
  const int n = cJSON_GetArraySize(pl);
  served_pos *ps = calloc((size_t)(n > 0 ? n : 1), sizeof *ps);
  if (!ps) return fail(c->err, c->cap, "out of memory for prompt logprobs");
  for (int i = 0; i < r->n_prompt_lp; i++) pos_free(&r->prompt_lp[i]); /* a later copy replaces an earlier one */
  free(r->prompt_lp);
  r->prompt_lp = ps;
  r->n_prompt_lp = 0;
  r->prompt_lp_from = "prompt_logprobs";
  const cJSON *e;
  int i = 0;
  cJSON_ArrayForEach(e, pl) {
    served_pos *p = &ps[r->n_prompt_lp++];
    p->logprob = NAN, p->id = -1, p->text_offset = -1;
    if (cJSON_IsNull(e)) { i++; continue; }
    if (!cJSON_IsObject(e)) return fail(c->err, c->cap, WFMT "%s[%d]: not an object or null", WHERE(c), field, i);
    const cJSON *a;
    cJSON_ArrayForEach(a, e) {
      char *end;
      const long id = strtol(a->string, &end, 10);
      const cJSON *l = cJSON_GetObjectItemCaseSensitive(a, "logprob"), *rk = cJSON_GetObjectItemCaseSensitive(a, "rank");
      const cJSON *dt = cJSON_GetObjectItemCaseSensitive(a, "decoded_token");
      if (end == a->string || *end || id < 0 || id >= 2147483647L)
        return fail(c->err, c->cap, WFMT "%s[%d]: the key '%.40s' is not a token id", WHERE(c), field, i, a->string);
      if (!cJSON_IsObject(a) || !cJSON_IsNumber(l))
        return fail(c->err, c->cap, WFMT "%s[%d].%ld.logprob: not a number", WHERE(c), field, i, id);
      if (rk && !cJSON_IsNull(rk) && !(cJSON_IsNumber(rk) && rk->valuedouble >= 0 && rk->valuedouble < 2e9))
        return fail(c->err, c->cap, WFMT "%s[%d].%ld.rank: not a rank", WHERE(c), field, i, id);
      if (dt && !cJSON_IsNull(dt) && !cJSON_IsString(dt))
        return fail(c->err, c->cap, WFMT "%s[%d].%ld.decoded_token: not a string or null", WHERE(c), field, i, id);
      if (!alt_add(p, cJSON_IsString(dt) ? dt->valuestring : "", (int32_t)id, l->valuedouble,
                   cJSON_IsNumber(rk) ? (int)rk->valuedouble : 0, c, field))
        return false;
    }
    i++;
  }
  return true;
}

/* One choice object ch_j (number ci in its list) of an answer or event. */
static bool apply_choice(served_reply *r, const cJSON *cj, int ci, ctx *c) {
  if (!cJSON_IsObject(cj)) return fail(c->err, c->cap, WFMT "choices[%d]: not an object", WHERE(c), ci);
  const cJSON *ix = cJSON_GetObjectItemCaseSensitive(cj, "index");
  int index = ci;
  if (ix) {
    if (!cJSON_IsNumber(ix) || !(ix->valuedouble >= 0 && ix->valuedouble < SERVED_MAX_CHOICES) ||
        ix->valuedouble != floor(ix->valuedouble))
      return fail(c->err, c->cap, WFMT "choices[%d].index: not an index below %d", WHERE(c), ci, SERVED_MAX_CHOICES);
    index = (int)ix->valuedouble;
  }
  served_choice *ch = choice_at(r, index, c);
  if (!ch) return false;
  /* the text */
  const cJSON *txt;
  const char *tname;
  if (c->o->chat) {
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(cj, c->delta ? "delta" : "message");
    tname = c->delta ? "delta.content" : "message.content";
    if (!msg && c->delta) msg = cJSON_GetObjectItemCaseSensitive(cj, "message"); /* a server that sends whole messages */
    if (msg && !cJSON_IsObject(msg) && !cJSON_IsNull(msg))
      return fail(c->err, c->cap, WFMT "choices[%d].%s: not an object", WHERE(c), ci, c->delta ? "delta" : "message");
    if (!msg && !c->delta) return fail(c->err, c->cap, WFMT "choices[%d].message: missing", WHERE(c), ci);
    txt = cJSON_GetObjectItemCaseSensitive(msg, "content");
  } else {
    tname = "text";
    txt = cJSON_GetObjectItemCaseSensitive(cj, "text");
    if (!txt && !c->delta) return fail(c->err, c->cap, WFMT "choices[%d].text: missing", WHERE(c), ci);
  }
  if (txt && !cJSON_IsString(txt) && !cJSON_IsNull(txt))
    return fail(c->err, c->cap, WFMT "choices[%d].%s: not a string or null", WHERE(c), ci, tname);
  if (cJSON_IsString(txt) && !text_add(ch, txt->valuestring, c)) return false;
  /* why it ended */
  const cJSON *fin = cJSON_GetObjectItemCaseSensitive(cj, "finish_reason");
  if (fin && !cJSON_IsString(fin) && !cJSON_IsNull(fin))
    return fail(c->err, c->cap, WFMT "choices[%d].finish_reason: not a string or null", WHERE(c), ci);
  if (cJSON_IsString(fin)) {
    if (!fin->valuestring[0] || strlen(fin->valuestring) >= sizeof ch->finish_reason)
      return fail(c->err, c->cap, WFMT "choices[%d].finish_reason: not a reason ('%.40s')", WHERE(c), ci, fin->valuestring);
    snprintf(ch->finish_reason, sizeof ch->finish_reason, "%s", fin->valuestring);
  }
  const cJSON *sr = cJSON_GetObjectItemCaseSensitive(cj, "stop_reason");
  if (cJSON_IsString(sr)) snprintf(ch->stop_reason, sizeof ch->stop_reason, "%s", sr->valuestring);
  else if (cJSON_IsNumber(sr)) snprintf(ch->stop_reason, sizeof ch->stop_reason, "%.0f", sr->valuedouble);
  else if (sr && !cJSON_IsNull(sr))
    return fail(c->err, c->cap, WFMT "choices[%d].stop_reason: not a string, number or null", WHERE(c), ci);
  /* logprobs */
  const cJSON *lp = cJSON_GetObjectItemCaseSensitive(cj, "logprobs");
  if (lp && !cJSON_IsObject(lp) && !cJSON_IsNull(lp))
    return fail(c->err, c->cap, WFMT "choices[%d].logprobs: not an object or null", WHERE(c), ci);
  if (cJSON_IsObject(lp)) {
    ch->has_logprobs = true;
    if (!(c->o->chat ? chat_logprobs(ch, lp, ci, c) : legacy_logprobs(ch, lp, ci, c))) return false;
  }
  /* vLLM's token ids */
  bool bad;
  const cJSON *ids = opt_array(cj, "token_ids", &bad);
  if (bad) return fail(c->err, c->cap, WFMT "choices[%d].token_ids: not a list or null", WHERE(c), ci);
  if (ids) {
    char field[48];
    snprintf(field, sizeof field, "choices[%d].token_ids", ci);
    ch->has_token_ids = true;
    if (!ids_add(ids, &ch->token_ids, &ch->n_token_ids, &ch->cap_token_ids, c, field)) return false;
  }
  const cJSON *pids = opt_array(cj, "prompt_token_ids", &bad);
  if (bad) return fail(c->err, c->cap, WFMT "choices[%d].prompt_token_ids: not a list or null", WHERE(c), ci);
  if (pids && !r->prompt_token_ids) {
    int cap = 0;
    if (!ids_add(pids, &r->prompt_token_ids, &r->n_prompt_token_ids, &cap, c, "prompt_token_ids")) return false;
    if (!r->prompt_token_ids) r->prompt_token_ids = calloc(1, sizeof *r->prompt_token_ids); /* given, empty */
  }
  const cJSON *pl = opt_array(cj, "prompt_logprobs", &bad);
  if (bad) return fail(c->err, c->cap, WFMT "choices[%d].prompt_logprobs: not a list or null", WHERE(c), ci);
  if (pl && !r->prompt_lp_from && !prompt_logprobs(r, pl, "choices[].prompt_logprobs", c)) return false;
  return true;
}

/* One answer object (whole, or one stream event) applied to r. */
static bool apply(served_reply *r, const cJSON *j, ctx *c) {
  if (!cJSON_IsObject(j)) return fail(c->err, c->cap, WFMT "not a JSON object", WHERE(c));
  const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
  if (err && !cJSON_IsNull(err)) {
    const cJSON *m = cJSON_IsObject(err) ? cJSON_GetObjectItemCaseSensitive(err, "message") : err;
    return fail(c->err, c->cap, WFMT "the server answered an error: %.240s", WHERE(c),
                cJSON_IsString(m) ? m->valuestring : "(no message)");
  }
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id"), *model = cJSON_GetObjectItemCaseSensitive(j, "model");
  if (cJSON_IsString(id) && !r->id[0]) snprintf(r->id, sizeof r->id, "%s", id->valuestring);
  if (cJSON_IsString(model) && !r->model[0]) snprintf(r->model, sizeof r->model, "%s", model->valuestring);
  const cJSON *usage = cJSON_GetObjectItemCaseSensitive(j, "usage");
  if (usage && !cJSON_IsNull(usage)) {
    if (!cJSON_IsObject(usage)) return fail(c->err, c->cap, WFMT "usage: not an object or null", WHERE(c));
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens");
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(usage, "completion_tokens");
    if (pt && !(cJSON_IsNumber(pt) && pt->valuedouble >= 0 && pt->valuedouble < 1e12))
      return fail(c->err, c->cap, WFMT "usage.prompt_tokens: not a count", WHERE(c));
    if (ct && !(cJSON_IsNumber(ct) && ct->valuedouble >= 0 && ct->valuedouble < 1e12))
      return fail(c->err, c->cap, WFMT "usage.completion_tokens: not a count", WHERE(c));
    if (pt) r->prompt_tokens = (long)pt->valuedouble;
    if (ct) r->completion_tokens = (long)ct->valuedouble;
  }
  bool bad;
  const cJSON *pids = opt_array(j, "prompt_token_ids", &bad);
  if (bad) return fail(c->err, c->cap, WFMT "prompt_token_ids: not a list or null", WHERE(c));
  if (pids && !r->prompt_token_ids) {
    int cap = 0;
    if (!ids_add(pids, &r->prompt_token_ids, &r->n_prompt_token_ids, &cap, c, "prompt_token_ids")) return false;
    if (!r->prompt_token_ids) r->prompt_token_ids = calloc(1, sizeof *r->prompt_token_ids);
  }
  const cJSON *pl = opt_array(j, "prompt_logprobs", &bad);
  if (bad) return fail(c->err, c->cap, WFMT "prompt_logprobs: not a list or null", WHERE(c));
  if (pl && !prompt_logprobs(r, pl, "prompt_logprobs", c)) return false;
  const cJSON *chs = cJSON_GetObjectItemCaseSensitive(j, "choices");
  if (!chs && c->delta) return true; /* the usage event of a stream */
  if (!cJSON_IsArray(chs)) return fail(c->err, c->cap, WFMT "choices: not a list", WHERE(c));
  if (cJSON_GetArraySize(chs) > SERVED_MAX_CHOICES)
    return fail(c->err, c->cap, WFMT "choices: more than %d", WHERE(c), SERVED_MAX_CHOICES);
  const cJSON *cj;
  int ci = 0;
  cJSON_ArrayForEach(cj, chs) if (!apply_choice(r, cj, ci++, c)) return false;
  return true;
}

/* After the whole answer: the chosen token of each prompt_logprobs position, and echo's split. */
static bool finalize(served_reply *r, const served_parse_opts *o, char *err, size_t cap) {
  if (r->prompt_lp_from && !strcmp(r->prompt_lp_from, "prompt_logprobs")) {
    const bool ids = r->prompt_token_ids != NULL;
    if (ids && r->n_prompt_token_ids != r->n_prompt_lp)
      return fail(err, cap, "prompt_logprobs: %d positions for %d prompt_token_ids", r->n_prompt_lp, r->n_prompt_token_ids);
    for (int i = 0; i < r->n_prompt_lp; i++) {
      served_pos *p = &r->prompt_lp[i];
      if (ids) p->id = r->prompt_token_ids[i];
      if (!p->n_top) continue;
      const int32_t want = ids ? r->prompt_token_ids[i] : p->top[0].id; /* vLLM lists the prompt's token first */
      int k = 0;
      while (k < p->n_top && p->top[k].id != want) k++;
      if (k == p->n_top) return fail(err, cap, "prompt_logprobs[%d]: no entry for the prompt's token %d", i, want);
      p->id = want;
      p->logprob = p->top[k].logprob;
      p->rank = p->top[k].rank;
      p->token = dup_str(p->top[k].token);
      if (!p->token) return fail(err, cap, "out of memory for prompt logprobs");
    }
  }
  if (o->echo) {
    if (r->prompt_tokens < 0) return fail(err, cap, "echo: usage.prompt_tokens missing: the prompt's positions cannot be told apart");
    for (int i = 0; i < r->n_choices; i++) {
      served_choice *ch = &r->choices[i];
      if (!ch->has_logprobs) continue;
      const int m = (int)r->prompt_tokens;
      if (ch->n_lp < m)
        return fail(err, cap, "echo: choices[%d].logprobs holds %d positions, fewer than usage.prompt_tokens %d", i, ch->n_lp, m);
      if (!r->prompt_lp_from) { /* the first choice's prompt positions become the reply's */
        r->prompt_lp = malloc((size_t)(m > 0 ? m : 1) * sizeof *r->prompt_lp);
        if (!r->prompt_lp) return fail(err, cap, "out of memory for prompt logprobs");
        memcpy(r->prompt_lp, ch->lp, (size_t)m * sizeof *ch->lp);
        r->n_prompt_lp = m;
        r->prompt_lp_from = "echo";
      } else {
        for (int k = 0; k < m; k++) pos_free(&ch->lp[k]);
      }
      memmove(ch->lp, ch->lp + m, (size_t)(ch->n_lp - m) * sizeof *ch->lp);
      ch->n_lp -= m;
    }
  }
  return true;
}

static void reply_init(served_reply *r) {
  memset(r, 0, sizeof *r);
  r->prompt_tokens = r->completion_tokens = -1;
}

bool served_reply_parse(const char *json, const served_parse_opts *o, served_reply *r, char *err, size_t cap) {
  reply_init(r);
  if (cap) err[0] = 0;
  cJSON *j = cJSON_Parse(json ? json : "");
  ctx c = {.o = o, .err = err, .cap = cap};
  bool ok = j ? apply(r, j, &c) : fail(err, cap, "the answer is not JSON: %.80s", json ? json : "");
  cJSON_Delete(j);
  if (ok && r->n_choices == 0) ok = fail(err, cap, "choices: empty");
  return ok && finalize(r, o, err, cap);
}

/* ---- streams ---- */

void served_sse_init(served_sse *s, const served_parse_opts *o) {
  memset(s, 0, sizeof *s);
  s->o = *o;
  reply_init(&s->r);
}

/* One "data:" payload. */
static void sse_event(served_sse *s, const char *data, double now) {
  if (s->err[0]) return;
  if (!strcmp(data, "[DONE]")) { s->done = true; return; }
  if (s->done) { fail(s->err, sizeof s->err, "an event after 'data: [DONE]'"); return; }
  s->r.n_events++;
  cJSON *j = cJSON_Parse(data);
  ctx c = {.o = &s->o, .delta = true, .event = s->r.n_events, .err = s->err, .cap = sizeof s->err};
  /* what the event carried: text, tokens or logprobs (its arrival is a token time) */
  size_t text0 = 0;
  int lp0 = 0, ids0 = 0;
  for (int i = 0; i < s->r.n_choices; i++)
    text0 += s->r.choices[i].text_len, lp0 += s->r.choices[i].n_lp, ids0 += s->r.choices[i].n_token_ids;
  if (!j) fail(s->err, sizeof s->err, "event %d: not JSON: %.80s", s->r.n_events, data);
  else apply(&s->r, j, &c);
  cJSON_Delete(j);
  size_t text1 = 0;
  int lp1 = 0, ids1 = 0;
  for (int i = 0; i < s->r.n_choices; i++)
    text1 += s->r.choices[i].text_len, lp1 += s->r.choices[i].n_lp, ids1 += s->r.choices[i].n_token_ids;
  if (text1 == text0 && lp1 == lp0 && ids1 == ids0) return;
  if (s->n_event_t == s->cap_event_t) {
    const int cap = s->cap_event_t ? s->cap_event_t * 2 : 64;
    double *nt = cap < (1 << 26) ? realloc(s->event_t, (size_t)cap * sizeof *nt) : NULL;
    if (!nt) { fail(s->err, sizeof s->err, "out of memory for event times"); return; }
    s->event_t = nt, s->cap_event_t = cap;
  }
  s->event_t[s->n_event_t++] = now;
}

bool served_sse_feed(served_sse *s, const char *d, size_t n, double now) {
  if (s->n_line + n + 1 > s->cap_line) {
    const size_t cap = (s->n_line + n + 1) * 2;
    char *nl = realloc(s->line, cap);
    if (!nl) return fail(s->err, sizeof s->err, "out of memory for the stream");
    s->line = nl, s->cap_line = cap;
  }
  memcpy(s->line + s->n_line, d, n);
  s->n_line += n;
  s->line[s->n_line] = 0;
  char *start = s->line, *nl;
  while ((nl = memchr(start, '\n', s->n_line - (size_t)(start - s->line)))) {
    *nl = 0;
    if (nl > start && nl[-1] == '\r') nl[-1] = 0;
    if (!strncmp(start, "data:", 5)) sse_event(s, start[5] == ' ' ? start + 6 : start + 5, now);
    start = nl + 1;
  }
  const size_t rest = s->n_line - (size_t)(start - s->line);
  memmove(s->line, start, rest);
  s->n_line = rest;
  s->line[rest] = 0;
  return true;
}

bool served_sse_finish(served_sse *s) {
  if (s->n_line && !strncmp(s->line, "data:", 5)) /* a last event without its newline */
    sse_event(s, s->line[5] == ' ' ? s->line + 6 : s->line + 5, 0), s->n_line = 0;
  if (s->err[0]) return false;
  if (!s->done) return fail(s->err, sizeof s->err, "the stream ended without 'data: [DONE]' after %d events (cut off)", s->r.n_events);
  if (s->r.n_choices == 0) return fail(s->err, sizeof s->err, "the stream carried no choice");
  for (int i = 0; i < s->r.n_choices; i++)
    if (!s->r.choices[i].finish_reason[0])
      return fail(s->err, sizeof s->err, "choice %d of the stream ended without a finish_reason", s->r.choices[i].index);
  return finalize(&s->r, &s->o, s->err, sizeof s->err);
}

void served_sse_free(served_sse *s) {
  free(s->line);
  free(s->event_t);
  s->line = NULL, s->event_t = NULL;
  s->n_line = s->cap_line = 0;
  s->n_event_t = s->cap_event_t = 0;
}

bool served_stream_parse_text(const char *body, size_t n, const served_parse_opts *o, served_reply *r, char *err,
                              size_t cap) {
  served_sse s;
  served_sse_init(&s, o);
  bool ok = served_sse_feed(&s, body, n, 0);
  ok = served_sse_finish(&s) && ok;
  if (cap) snprintf(err, cap, "%s", s.err);
  *r = s.r;
  served_sse_free(&s);
  return ok;
}
