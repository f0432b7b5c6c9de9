/* tokenizer: text <-> token ids from a GGUF's tokenizer.* metadata, with the
 * token ids llama.cpp gives.
 *
 *   tokenizer.ggml.model = gpt2   byte-level BPE (GPT-2 alphabet), merges ranked
 *                                 as stored, words split by tokenizer.ggml.pre:
 *                                 qwen2 (digits one by one) or llama-bpe (Llama 3,
 *                                 digits in runs of 3, whole words kept when they
 *                                 are tokens);
 *   tokenizer.ggml.model = llama  SentencePiece: pieces merged by score, spaces as
 *                                 U+2581, a space prefix, <0xXX> byte fallback.
 *
 * Special tokens (CONTROL, USER_DEFINED, UNKNOWN types) are matched in the raw
 * text before any splitting, longest first; CONTROL and UNKNOWN ones only when
 * ZRT_TOK_PARSE_SPECIAL is given, so user text cannot forge them by default.
 * BOS/EOS are added as tokenizer.ggml.add_bos_token / add_eos_token say (with
 * llama.cpp's defaults when absent). Only metadata is read: a vocab-only GGUF
 * with no tensors works. The tokenizer copies what it needs, so the gguf_file
 * may be closed afterwards. See docs/tokenizer.md. */
#ifndef ZINC_TOKENIZER_H
#define ZINC_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../frontend/gguf.h"
#include "../ir/arena.h"
#include "../ir/zstatus.h"

typedef struct zrt_tok zrt_tok;

typedef enum zrt_tok_model { ZRT_TOK_BPE, ZRT_TOK_SPM } zrt_tok_model;

/* Token attributes, derived from tokenizer.ggml.token_type as llama.cpp does. */
enum {
    ZRT_TOK_ATTR_UNKNOWN = 1 << 0,
    ZRT_TOK_ATTR_UNUSED = 1 << 1,
    ZRT_TOK_ATTR_NORMAL = 1 << 2,
    ZRT_TOK_ATTR_CONTROL = 1 << 3,
    ZRT_TOK_ATTR_USER_DEFINED = 1 << 4,
    ZRT_TOK_ATTR_BYTE = 1 << 5,
};

/* Flags of zrt_tok_encode. */
enum {
    ZRT_TOK_ADD_SPECIAL = 1 << 0,   /* add BOS / EOS where the metadata asks for them */
    ZRT_TOK_PARSE_SPECIAL = 1 << 1, /* recognise the text of control tokens ("<|im_start|>") */
};

/* Flags of zrt_tok_detokenize and zrt_tok_stream_new. */
enum {
    ZRT_TOK_REMOVE_SPECIAL = 1 << 0,  /* drop the leading BOS / trailing EOS that encode added */
    ZRT_TOK_UNPARSE_SPECIAL = 1 << 1, /* render control tokens as their text (else as nothing) */
};

#define ZRT_TOK_NULL (-1) /* "no such token" for bos/eos/eot/... */

/* Builds the tokenizer from f's metadata. */
zstatus zrt_tok_load(const gguf_file *f, zrt_tok **out, zdiag *d);
/* Opens the GGUF at path, builds the tokenizer and closes the file. */
zstatus zrt_tok_open(const char *path, zrt_tok **out, zdiag *d);
void zrt_tok_free(zrt_tok *t);

zrt_tok_model zrt_tok_kind(const zrt_tok *t);
const char *zrt_tok_pre(const zrt_tok *t); /* tokenizer.ggml.pre ("" for SentencePiece) */
uint32_t zrt_tok_n_vocab(const zrt_tok *t);
int32_t zrt_tok_bos(const zrt_tok *t);
int32_t zrt_tok_eos(const zrt_tok *t);
int32_t zrt_tok_eot(const zrt_tok *t); /* end of turn (<|im_end|>, <|eot_id|>...) */
bool zrt_tok_add_bos(const zrt_tok *t);
bool zrt_tok_add_eos(const zrt_tok *t);
/* Whether generation should stop at id: EOS, EOT, EOM, and the tokens
 * llama.cpp treats as end-of-generation by their text. */
bool zrt_tok_is_eog(const zrt_tok *t, int32_t id);
/* The vocabulary entry of id as stored, and its ZRT_TOK_ATTR_* bits; NULL / 0
 * when id is out of range. */
const char *zrt_tok_text(const zrt_tok *t, int32_t id);
unsigned zrt_tok_attr(const zrt_tok *t, int32_t id);
/* The id of a vocabulary entry, or ZRT_TOK_NULL. */
int32_t zrt_tok_find(const zrt_tok *t, const char *text, size_t len);

/* Tokenizes text[0..len) (any bytes; invalid UTF-8 is tokenized as llama.cpp
 * does). The ids are allocated in a. */
zstatus zrt_tok_encode(const zrt_tok *t, const char *text, size_t len, unsigned flags, zarena *a,
                       int32_t **ids, size_t *n_ids, zdiag *d);

/* A byte range of a text. */
typedef struct zrt_tok_span {
    size_t at, len;
} zrt_tok_span;

/* zrt_tok_encode, except that with ZRT_TOK_PARSE_SPECIAL the text of control
 * tokens is not recognised where it overlaps one of lit[0..n_lit): a chat
 * prompt's user messages. The template's markers become tokens, the user's
 * text stays text, and everything else tokenizes exactly as the whole text
 * does. */
zstatus zrt_tok_encode_guarded(const zrt_tok *t, const char *text, size_t len, unsigned flags,
                               const zrt_tok_span *lit, size_t n_lit, zarena *a, int32_t **ids, size_t *n_ids,
                               zdiag *d);

/* The bytes one token stands for (not NUL-terminated; may hold a NUL or an
 * incomplete UTF-8 sequence); empty for control tokens unless special.
 * Returns the length and sets *piece; an id out of range is empty. */
size_t zrt_tok_piece(const zrt_tok *t, int32_t id, bool special, const char **piece);

/* Text of a whole id list, as llama_detokenize: ZRT_TOK_* flags above, the
 * leading space SentencePiece added removed, and the tokenizer's clean-up of
 * spaces before punctuation where the vocabulary asks for it (llama-bpe).
 * The text (NUL-terminated, *len bytes) is allocated in a. An id out of
 * range is ZE_INVALID. */
zstatus zrt_tok_detokenize(const zrt_tok *t, const int32_t *ids, size_t n, unsigned flags, zarena *a,
                           char **text, size_t *len, zdiag *d);

/* Streaming detokenization for generation: push ids one at a time and get
 * back text that is always valid UTF-8. Bytes of a character split across
 * tokens are held until the character completes; a byte that cannot be part
 * of valid UTF-8 comes out as U+FFFD. No clean-up of spaces is done. */
typedef struct zrt_tok_stream zrt_tok_stream;
zrt_tok_stream *zrt_tok_stream_new(const zrt_tok *t, unsigned flags, zarena *a);
/* Returns the text completed by id (valid until the next call); *len bytes. */
const char *zrt_tok_stream_push(zrt_tok_stream *s, int32_t id, size_t *len);
/* Ends the stream: held bytes come out as U+FFFD each. */
const char *zrt_tok_stream_flush(zrt_tok_stream *s, size_t *len);

#endif
