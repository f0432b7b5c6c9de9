/* Text generation for `zinc run -p` and `zinc chat`: a prompt is prefilled,
 * then tokens are sampled, streamed as valid UTF-8, and fed back through the
 * recorded decode step until an end-of-generation token, a stop string, the
 * token limit, a full context or Ctrl-C. */
#ifndef ZINC_GEN_H
#define ZINC_GEN_H

#include <signal.h>
#include <stdio.h>

#include "../runtime/chat.h"
#include "../runtime/sampler.h"
#include "../runtime/tokenizer.h"
#include "../runtime/zrt.h"

enum { GEN_MAX_STOPS = 8 };

typedef struct gen_opts {
    zrt_sample_params sp;
    int64_t n_predict; /* -n: most tokens to generate; -1 until the context is full */
    const char *stop[GEN_MAX_STOPS];
    int n_stop;
    const char *given; /* the first generation flag given, for "goes with -p" errors */
    uint32_t n_ctx;    /* the context a session may fill (-c); 0: the plan's */
    bool quiet;        /* --quiet: no stats line after a reply */
    bool ignore_eos;   /* --ignore-eos: the end-of-generation tokens are never drawn */
} gen_opts;

typedef struct gen_stats {
    int64_t n_prompt, n_gen;
    double prompt_s, gen_s;
    const char *why; /* "end of text", "stop string", "token limit", "context full", "interrupted" */
} gen_stats;

typedef struct gen_ctx {
    zrt *r;
    uint32_t ctx;  /* positions this session may use: -c, at most the plan's */
    uint64_t seed; /* the seed drawn for --seed -1, or the one given */
    zrt_tok *tok;
    zrt_sampler *smp;
    float *logits; /* [n_vocab] */
    int32_t last;  /* the last sampled token, not yet fed (an end of turn, say) */
    bool has_last;
    char *reply; /* the text the last gen_run wrote (NUL-terminated), for a chat's history */
    size_t reply_len, reply_cap;
} gen_ctx;

/* Set by the SIGINT handler that gen_install_sigint installs. */
extern volatile sig_atomic_t gen_interrupted;
void gen_install_sigint(void);

/* Loads the tokenizer and the sampler; a random seed (--seed -1) is drawn
 * here and printed on stderr when the sampler uses it. */
zstatus gen_open(gen_ctx *g, zrt *r, const gen_opts *o, zarena *a, zdiag *d);
void gen_close(gen_ctx *g);
/* Bans every end-of-generation token of tok from smp (--ignore-eos). */
void gen_ban_eog(zrt_sampler *smp, const zrt_tok *tok);

/* Feeds prompt[0..n) after what the model has seen, then generates, writing
 * the text to out as it comes. */
zstatus gen_run(gen_ctx *g, const int32_t *prompt, size_t n, const gen_opts *o, FILE *out, gen_stats *st,
                zdiag *d);

/* The next token after the last step: from the GPU's top-k candidates when
 * the sampler needs no more, else from the whole row of logits (read into
 * logits[n_vocab] only then). */
zstatus gen_pick(zrt *r, zrt_sampler *smp, float *logits, int32_t *id, zdiag *d);

/* Renders m[0..n) and the opening of the assistant's turn in format f, and
 * tokenizes it: the template's markers become special tokens, the messages'
 * contents stay text unless flags has ZRT_TOK_PARSE_SPECIAL (--special), so
 * that what a user types cannot forge a control token. With after, only the
 * rendering that follows the text after is kept (a later turn of a chat).
 * ZRT_TOK_ADD_SPECIAL adds the BOS as the model asks. */
zstatus gen_chat_encode(const gen_ctx *g, zrt_chat_format f, const zrt_chat_msg *m, size_t n,
                        const char *after, unsigned flags, zarena *a, int32_t **ids, size_t *n_ids, zdiag *d);

/* Warns when the chat format's turn marker is not a special token of the
 * model's vocabulary: a --template that does not fit the model. */
void gen_check_template(const gen_ctx *g, zrt_chat_format f, const char *prog);

/* Ends generated text: a newline when out is a terminal. */
void gen_end_text(FILE *out);

/* "prompt: 12 tokens, 850.1 tok/s | generation: 64 tokens, 120.3 tok/s | NVIDIA H200" */
void gen_print_stats(const gen_stats *st, const zrt *r, FILE *to);

/* Parses -n, --stop and the sampler flags; 1 when argv[*i] was one of them,
 * 0 when not, -1 (d set) for a bad value. */
int gen_parse_arg(gen_opts *o, int argc, char **argv, int *i, zdiag *d);
void gen_defaults(gen_opts *o);
extern const char gen_flags_help[];

#endif
