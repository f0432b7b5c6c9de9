/* chat: renders a conversation into a prompt with the model's chat format.
 *
 * GGUFs carry a Jinja template (tokenizer.chat_template). Like llama.cpp's
 * llm_chat_detect_template, zinc does not run Jinja: it recognises the
 * template by the markers it contains and renders the format it stands for,
 * exactly as llama.cpp's llm_chat_apply_template does:
 *   chatml  <|im_start|>ROLE\nCONTENT<|im_end|>\n ...  (Qwen 2/2.5/3)
 *   llama3  <|start_header_id|>ROLE<|end_header_id|>\n\nTRIMMED<|eot_id|> ...
 * (llama3 has no <|begin_of_text|>: the tokenizer adds the BOS.) Templates of
 * other families are named in the error, which says how to choose a format
 * by hand (--template chatml|llama3). */
#ifndef ZINC_CHAT_H
#define ZINC_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "../frontend/gguf.h"
#include "../ir/arena.h"
#include "../ir/zstatus.h"
#include "tokenizer.h"

typedef enum zrt_chat_format { ZRT_CHAT_CHATML, ZRT_CHAT_LLAMA3, ZRT_CHAT_COUNT } zrt_chat_format;

typedef struct zrt_chat_msg {
    const char *role; /* "system", "user", "assistant", ... */
    const char *content;
} zrt_chat_msg;

const char *zrt_chat_name(zrt_chat_format f);
/* The marker that opens a turn ("<|im_start|>"): a model trained with the
 * format has it as a special token of its vocabulary. */
const char *zrt_chat_marker(zrt_chat_format f);
/* "chatml" / "llama3" (the --template values); ZE_INVALID naming them otherwise. */
zstatus zrt_chat_parse(const char *name, zrt_chat_format *out, zdiag *d);
/* Recognises a Jinja template (or a bare format name, as llama.cpp accepts). */
zstatus zrt_chat_detect(const char *tmpl, zrt_chat_format *out, zdiag *d);
/* The format for a model: override (a --template value) if not NULL, else
 * detected from tokenizer.chat_template. */
zstatus zrt_chat_for_gguf(const gguf_file *f, const char *override, zrt_chat_format *out, zdiag *d);

/* Renders msgs[0..n) and, when add_generation_prompt, the opening of the
 * assistant's turn. The text (NUL-terminated, *len bytes) is allocated in a. */
zstatus zrt_chat_render(zrt_chat_format f, const zrt_chat_msg *msgs, size_t n, bool add_generation_prompt,
                        zarena *a, char **text, size_t *len, zdiag *d);
/* The same, and where each message's content lies in the text (content[i],
 * n entries; may be NULL): for zrt_tok_encode_guarded, so that what a user
 * typed cannot become a control token of the template. */
zstatus zrt_chat_render_spans(zrt_chat_format f, const zrt_chat_msg *msgs, size_t n,
                              bool add_generation_prompt, zarena *a, char **text, size_t *len,
                              zrt_tok_span *content, zdiag *d);

#endif
