/* A Hugging Face tokenizer as llama.cpp's BPE ("gpt2") vocabulary, for the GGUF export.
 *
 * Reads a folder holding tokenizer.json (the fast tokenizer: model.vocab, model.merges,
 * added_tokens, pre_tokenizer, decoder) and tokenizer_config.json (bos/eos/pad/unk tokens,
 * add_bos_token / add_eos_token, chat_template), and produces what the GGUF's tokenizer.* keys
 * hold: every token's text (byte-level BPE text as the vocabulary spells it), its llama.cpp token
 * type, the merges, the special ids and the chat template.
 *
 * Token types follow llama.cpp's converter: vocabulary entries are NORMAL; added tokens are
 * CONTROL when marked special or when they look special ("<|...|>" or "<｜...｜>"), else
 * USER_DEFINED (with U+2581 written as a space); ids the tokenizer leaves free up to the model's
 * vocab_size are "[PAD<id>]" UNUSED tokens (DeepSeek-V3 defines 128815 ids and its model has 129280
 * logits). The pre-tokenizer is named as llama.cpp names it ("deepseek-v3"); a pre-tokenizer this
 * code does not recognize is refused, since llama.cpp would otherwise split text differently.
 *
 * Both files are untrusted input: every problem is a one-line error naming the file and field. */
#ifndef VOUCH_MODEL_GGUF_VOCAB_H
#define VOUCH_MODEL_GGUF_VOCAB_H

#include <stdint.h>

#include "common/vstatus.h"

/* llama.cpp's token types (llama_token_type / gguf TokenType) */
enum { GGUF_TOK_NORMAL = 1, GGUF_TOK_CONTROL = 3, GGUF_TOK_USER_DEFINED = 4, GGUF_TOK_UNUSED = 5 };

typedef struct {
  int n;                /* tokens written: the model's vocab_size (the tokenizer's ids, then padding) */
  int n_tokenizer;      /* ids the tokenizer defines (its largest id + 1), <= n */
  char **tokens;        /* [n] each token's text (UTF-8, NUL-terminated; "[PAD<id>]" for padding) */
  int32_t *types;       /* [n] GGUF_TOK_* */
  int n_merges;         /* entries of merges */
  char **merges;        /* [n_merges] "left right", in the tokenizer's priority order */
  const char *pre;      /* llama.cpp's name of the pre-tokenizer (a static string) */
  int64_t bos, eos, pad, unk; /* token ids the config names; -1: none */
  int add_bos, add_eos; /* tokenizer_config.json's add_bos_token / add_eos_token: 0, 1, or -1 (not given) */
  char *chat_template;  /* the Jinja chat template, NULL when the config has none */
} gguf_vocab;

/* Reads dir/tokenizer.json and dir/tokenizer_config.json for a model with `vocab_size` logits.
 * Error (naming the file and field): a file missing or not JSON, a tokenizer that is not
 * byte-level BPE, a pre-tokenizer not recognized, an id outside [0, vocab_size) (the model's
 * vocab_size is smaller than the tokenizer), two tokens with one id, a special token the
 * vocabulary lacks, out of memory. On error *v is left empty. */
vstatus gguf_vocab_load(const char *dir, int vocab_size, gguf_vocab *v);
void gguf_vocab_free(gguf_vocab *v);

#endif
