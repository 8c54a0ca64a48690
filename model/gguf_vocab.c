/* A Hugging Face tokenizer as llama.cpp's BPE vocabulary (see gguf_vocab.h). */
#include "model/gguf_vocab.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILE (1L << 30) /* a tokenizer.json above 1 GiB is refused, not read */

/* DeepSeek-V3's pre-tokenizer: three isolating regex splits, then byte-level mapping without
 * GPT-2's regex. llama.cpp calls it "deepseek-v3" (LLAMA_VOCAB_PRE_TYPE_DEEPSEEK3_LLM); the
 * patterns are compared as the tokenizer.json spells them (JSON-decoded, UTF-8). */
static const char *const DSV3_SPLITS[3] = {
    "\\p{N}{1,3}",
    "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\x0d\x0a\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\x0d\x0a]*|\\s*[\x0d\x0a]+|\\s+(?!\\S)|\\s+",
};

/* Reads path whole (NUL-terminated); error naming the file. */
static vstatus slurp(const char *path, char **out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return VERR("%s: cannot open: %s", path, strerror(errno));
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0) { fclose(f); return VERR("%s: cannot read its size", path); }
  if (n > MAX_FILE) { fclose(f); return VERR("%s: %ld bytes, more than a tokenizer file may hold (1 GiB)", path, n); }
  char *b = malloc((size_t)n + 1);
  if (!b) { fclose(f); return VERR("%s: out of memory for %ld bytes", path, n); }
  const size_t got = fread(b, 1, (size_t)n, f);
  fclose(f);
  if (got != (size_t)n) { free(b); return VERR("%s: read failed", path); }
  b[n] = 0;
  *out = b;
  return V_OK;
}

/* Parses path as a JSON object. */
static vstatus read_json(const char *path, cJSON **out) {
  char *txt;
  VTRY(slurp(path, &txt));
  *out = cJSON_Parse(txt);
  free(txt);
  if (!cJSON_IsObject(*out)) {
    cJSON_Delete(*out);
    *out = NULL;
    return VERR("%s: not a JSON object", path);
  }
  return V_OK;
}

/* ---- token text -> id: open addressing over the token table ---- */
typedef struct {
  int32_t *slot; /* [cap] token id + 1, 0 = empty */
  size_t cap;    /* a power of two, >= 2 x tokens */
} tmap;

static uint64_t fnv(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static int32_t tmap_find(const tmap *m, char *const *tokens, const char *s) {
  for (size_t i = fnv(s) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->slot[i]) return -1;
    if (!strcmp(tokens[m->slot[i] - 1], s)) return m->slot[i] - 1;
  }
}

/* Indexes tokens[0..n) (NULL entries skipped; a repeated text keeps its first id). */
static vstatus tmap_build(tmap *m, char *const *tokens, int n) {
  m->cap = 16;
  while (m->cap < 2 * (size_t)n) m->cap *= 2;
  m->slot = calloc(m->cap, sizeof *m->slot);
  if (!m->slot) return VERR("tokenizer: out of memory");
  for (int id = 0; id < n; id++) {
    if (!tokens[id]) continue;
    size_t i = fnv(tokens[id]) & (m->cap - 1);
    for (; m->slot[i]; i = (i + 1) & (m->cap - 1))
      if (!strcmp(tokens[m->slot[i] - 1], tokens[id])) break;
    if (!m->slot[i]) m->slot[i] = id + 1;
  }
  return V_OK;
}

void gguf_vocab_free(gguf_vocab *v) {
  if (v->tokens)
    for (int i = 0; i < v->n; i++) free(v->tokens[i]);
  if (v->merges)
    for (int i = 0; i < v->n_merges; i++) free(v->merges[i]);
  free(v->tokens);
  free(v->types);
  free(v->merges);
  free(v->chat_template);
  memset(v, 0, sizeof *v);
}

/* An id of the JSON number j in [0, vocab_size); names file and field on failure. */
static vstatus token_id(const cJSON *j, const char *file, const char *field, const char *what, int vocab_size,
                        int *id) {
  if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) || j->valuedouble < 0 || j->valuedouble > 1e9)
    return VERR("%s: field '%s': the id of %s is not a non-negative integer", file, field, what);
  if (j->valuedouble >= vocab_size)
    return VERR("%s: field '%s': %s has id %.0f, but the model's vocab_size is %d: the model is smaller than the "
                "tokenizer's vocabulary (give the model vocab_size >= the tokenizer's ids)",
                file, field, what, j->valuedouble, vocab_size);
  *id = (int)j->valuedouble;
  return V_OK;
}

/* Stores text as token id (the first definition; a second one with other text is an error). */
static vstatus put_token(gguf_vocab *v, int id, const char *text, int type, const char *file, const char *field) {
  if (v->tokens[id]) {
    if (strcmp(v->tokens[id], text))
      return VERR("%s: field '%s': id %d is both '%.40s' and '%.40s'", file, field, id, v->tokens[id], text);
    v->types[id] = type; /* an added token that repeats a vocabulary entry takes the added token's type */
    return V_OK;
  }
  if (!(v->tokens[id] = strdup(text))) return VERR("tokenizer: out of memory");
  v->types[id] = type;
  if (id + 1 > v->n_tokenizer) v->n_tokenizer = id + 1;
  return V_OK;
}

/* True when an added token's text looks like a control token (the converter's rule). */
static bool looks_special(const char *s) {
  const size_t n = strlen(s);
  static const char FW_OPEN[] = "<\xef\xbd\x9c", FW_CLOSE[] = "\xef\xbd\x9c>"; /* "<｜", "｜>" */
  if (n >= 4 && s[0] == '<' && s[1] == '|' && s[n - 2] == '|' && s[n - 1] == '>') return true;
  if (n >= 8 && !strncmp(s, FW_OPEN, 4) && !strcmp(s + n - 4, FW_CLOSE)) return true;
  return !strcmp(s, "<pad>") || !strcmp(s, "<mask>");
}

/* A user-defined token's text with U+2581 (lower one eighth block) written as a space. */
static char *spaces_for_2581(const char *s) {
  char *o = malloc(strlen(s) + 1), *p = o;
  if (!o) return NULL;
  while (*s) {
    if (!strncmp(s, "\xe2\x96\x81", 3)) { *p++ = ' '; s += 3; }
    else *p++ = *s++;
  }
  *p = 0;
  return o;
}

/* The pre-tokenizer's llama.cpp name, or an error naming the field. */
static vstatus pre_name(const cJSON *root, const char *file, const char **name) {
  const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
  const cJSON *ty = cJSON_GetObjectItemCaseSensitive(pt, "type");
  const cJSON *seq = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
  bool ok = cJSON_IsString(ty) && !strcmp(ty->valuestring, "Sequence") && cJSON_GetArraySize(seq) == 4;
  for (int i = 0; ok && i < 3; i++) {
    const cJSON *s = cJSON_GetArrayItem(seq, i);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(s, "type");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "pattern"), "Regex");
    const cJSON *bh = cJSON_GetObjectItemCaseSensitive(s, "behavior");
    ok = cJSON_IsString(st) && !strcmp(st->valuestring, "Split") && cJSON_IsString(re) &&
         !strcmp(re->valuestring, DSV3_SPLITS[i]) && cJSON_IsString(bh) && !strcmp(bh->valuestring, "Isolated") &&
         !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "invert"));
  }
  if (ok) {
    const cJSON *bl = cJSON_GetArrayItem(seq, 3);
    const cJSON *bt = cJSON_GetObjectItemCaseSensitive(bl, "type");
    ok = cJSON_IsString(bt) && !strcmp(bt->valuestring, "ByteLevel") &&
         cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(bl, "use_regex"));
  }
  if (!ok)
    return VERR("%s: field 'pre_tokenizer': not DeepSeek-V3's pre-tokenizer (three regex splits, then byte-level), "
                "the only one this exporter can name for llama.cpp", file);
  *name = "deepseek-v3";
  return V_OK;
}

/* The vocabulary, merges and added tokens of tokenizer.json. */
static vstatus read_tokenizer(const cJSON *root, const char *file, int vocab_size, gguf_vocab *v) {
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
  if (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE"))
    return VERR("%s: field 'model.type': only BPE tokenizers can be written as llama.cpp's gpt2 vocabulary (got %s)",
                file, cJSON_IsString(type) ? type->valuestring : "none");
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")))
    return VERR("%s: field 'model.byte_fallback': a byte-fallback (SentencePiece-style) BPE is not a byte-level one", file);
  const cJSON *dec = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "decoder"), "type");
  if (!cJSON_IsString(dec) || strcmp(dec->valuestring, "ByteLevel"))
    return VERR("%s: field 'decoder.type': expected ByteLevel (a byte-level BPE)", file);
  VTRY(pre_name(root, file, &v->pre));

  const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab"), *e;
  if (!cJSON_IsObject(vocab) || !vocab->child) return VERR("%s: field 'model.vocab': an object of token -> id is required", file);
  cJSON_ArrayForEach(e, vocab) {
    int id;
    VTRY(token_id(e, file, "model.vocab", "a token", vocab_size, &id));
    VTRY(put_token(v, id, e->string, GGUF_TOK_NORMAL, file, "model.vocab"));
  }

  const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
  if (added && !cJSON_IsArray(added)) return VERR("%s: field 'added_tokens': must be an array", file);
  int k = 0;
  cJSON_ArrayForEach(e, added) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
    int id;
    if (!cJSON_IsString(c) || !c->valuestring[0])
      return VERR("%s: field 'added_tokens[%d].content': a non-empty string is required", file, k);
    VTRY(token_id(cJSON_GetObjectItemCaseSensitive(e, "id"), file, "added_tokens", "an added token", vocab_size, &id));
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) || looks_special(c->valuestring)) {
      VTRY(put_token(v, id, c->valuestring, GGUF_TOK_CONTROL, file, "added_tokens"));
    } else {
      char *t = spaces_for_2581(c->valuestring);
      if (!t) return VERR("tokenizer: out of memory");
      vstatus s = put_token(v, id, t, GGUF_TOK_USER_DEFINED, file, "added_tokens");
      free(t);
      VTRY(s);
    }
    k++;
  }

  const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
  if (!cJSON_IsArray(merges)) return VERR("%s: field 'model.merges': an array is required", file);
  const int nm = cJSON_GetArraySize(merges);
  if (!(v->merges = calloc((size_t)(nm > 0 ? nm : 1), sizeof *v->merges))) return VERR("tokenizer: out of memory");
  k = 0;
  cJSON_ArrayForEach(e, merges) {
    char *m = NULL;
    if (cJSON_IsString(e)) { /* "left right": the two parts hold no space in a byte-level vocabulary */
      const char *sp = strchr(e->valuestring, ' ');
      if (!sp || sp == e->valuestring || !sp[1] || strchr(sp + 1, ' '))
        return VERR("%s: field 'model.merges[%d]': expected \"left right\", got \"%.40s\"", file, k, e->valuestring);
      m = strdup(e->valuestring);
    } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(e->child) &&
               cJSON_IsString(e->child->next)) { /* ["left", "right"] (newer tokenizers) */
      const char *a = e->child->valuestring, *b = e->child->next->valuestring;
      if (!a[0] || !b[0] || strchr(a, ' ') || strchr(b, ' '))
        return VERR("%s: field 'model.merges[%d]': a part is empty or holds a space (GGUF joins the parts with one)", file, k);
      if ((m = malloc(strlen(a) + strlen(b) + 2))) sprintf(m, "%s %s", a, b);
    } else {
      return VERR("%s: field 'model.merges[%d]': a string \"left right\" or a pair of strings is required", file, k);
    }
    if (!m) return VERR("tokenizer: out of memory");
    v->merges[v->n_merges++] = m;
    k++;
  }
  return V_OK;
}

/* tokenizer_config.json's special token `key` (a string, {"content": ...}, null or absent) as an id. */
static vstatus special_id(const cJSON *cfg, const char *file, const char *key, const tmap *map, const gguf_vocab *v,
                          int64_t *id) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, key);
  *id = -1;
  if (!t || cJSON_IsNull(t)) return V_OK;
  if (cJSON_IsObject(t)) t = cJSON_GetObjectItemCaseSensitive(t, "content");
  if (!cJSON_IsString(t)) return VERR("%s: field '%s': a token string, {\"content\": ...} or null is required", file, key);
  const int32_t i = tmap_find(map, v->tokens, t->valuestring);
  if (i < 0) return VERR("%s: field '%s': '%.60s' is not a token of tokenizer.json", file, key, t->valuestring);
  *id = i;
  return V_OK;
}

static vstatus read_config(const cJSON *cfg, const char *file, const tmap *map, gguf_vocab *v) {
  VTRY(special_id(cfg, file, "bos_token", map, v, &v->bos));
  VTRY(special_id(cfg, file, "eos_token", map, v, &v->eos));
  VTRY(special_id(cfg, file, "pad_token", map, v, &v->pad));
  VTRY(special_id(cfg, file, "unk_token", map, v, &v->unk));
  const char *flags[2] = {"add_bos_token", "add_eos_token"};
  int *dst[2] = {&v->add_bos, &v->add_eos};
  for (int i = 0; i < 2; i++) {
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(cfg, flags[i]);
    if (!b || cJSON_IsNull(b)) *dst[i] = -1;
    else if (cJSON_IsBool(b)) *dst[i] = cJSON_IsTrue(b);
    else return VERR("%s: field '%s': must be true or false", file, flags[i]);
  }
  const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template"), *e;
  if (cJSON_IsArray(ct)) { /* [{name, template}]: the one named "default" */
    const cJSON *pick = NULL;
    cJSON_ArrayForEach(e, ct) {
      const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
      if (cJSON_IsString(n) && !strcmp(n->valuestring, "default")) pick = cJSON_GetObjectItemCaseSensitive(e, "template");
    }
    if (!cJSON_IsString(pick)) return VERR("%s: field 'chat_template': a list without a \"default\" template", file);
    ct = pick;
  } else if (ct && !cJSON_IsNull(ct) && !cJSON_IsString(ct)) {
    return VERR("%s: field 'chat_template': a string or a list of {name, template} is required", file);
  }
  if (cJSON_IsString(ct) && !(v->chat_template = strdup(ct->valuestring))) return VERR("tokenizer: out of memory");
  return V_OK;
}

vstatus gguf_vocab_load(const char *dir, int vocab_size, gguf_vocab *v) {
  memset(v, 0, sizeof *v);
  v->bos = v->eos = v->pad = v->unk = -1;
  v->add_bos = v->add_eos = -1;
  if (vocab_size < 1) return VERR("tokenizer: the model's vocab_size %d is not positive", vocab_size);
  char tf[4096], cf[4096];
  if (snprintf(tf, sizeof tf, "%s/tokenizer.json", dir) >= (int)sizeof tf ||
      snprintf(cf, sizeof cf, "%s/tokenizer_config.json", dir) >= (int)sizeof cf)
    return VERR("%s: the folder name is too long", dir);
  v->n = vocab_size;
  v->tokens = calloc((size_t)vocab_size, sizeof *v->tokens);
  v->types = calloc((size_t)vocab_size, sizeof *v->types);
  if (!v->tokens || !v->types) {
    gguf_vocab_free(v);
    return VERR("tokenizer: out of memory for %d tokens", vocab_size);
  }
  cJSON *tok = NULL, *cfg = NULL;
  tmap map = {0};
  vstatus s = read_json(tf, &tok);
  if (!s) s = read_tokenizer(tok, tf, vocab_size, v);
  cJSON_Delete(tok);
  /* the ids the tokenizer leaves free (holes, and the model's logits past its last id) */
  for (int id = 0; !s && id < vocab_size; id++) {
    if (v->tokens[id]) continue;
    char pad[32];
    snprintf(pad, sizeof pad, "[PAD%d]", id);
    if (!(v->tokens[id] = strdup(pad))) s = VERR("tokenizer: out of memory");
    v->types[id] = GGUF_TOK_UNUSED;
  }
  if (!s) s = tmap_build(&map, v->tokens, vocab_size);
  if (!s) s = read_json(cf, &cfg);
  if (!s) s = read_config(cfg, cf, &map, v);
  cJSON_Delete(cfg);
  free(map.slot);
  if (s) gguf_vocab_free(v);
  return s;
}
