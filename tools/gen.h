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
} gen_opts;

typedef struct gen_stats {
    int64_t n_prompt, n_gen;
    double prompt_s, gen_s;
    const char *why; /* "end of text", "stop string", "token limit", "context full", "interrupted" */
} gen_stats;

typedef struct gen_ctx {
    zrt *r;
    zrt_tok *tok;
    zrt_sampler *smp;
    float *logits; /* [n_vocab] */
    int32_t last;  /* the last sampled token, not yet fed (an end of turn, say) */
    bool has_last;
} gen_ctx;

/* Set by the SIGINT handler that gen_install_sigint installs. */
extern volatile sig_atomic_t gen_interrupted;
void gen_install_sigint(void);

zstatus gen_open(gen_ctx *g, zrt *r, const gen_opts *o, zarena *a, zdiag *d);
void gen_close(gen_ctx *g);

/* Feeds prompt[0..n) after what the model has seen, then generates, writing
 * the text to out as it comes. */
zstatus gen_run(gen_ctx *g, const int32_t *prompt, size_t n, const gen_opts *o, FILE *out, gen_stats *st,
                zdiag *d);

/* "prompt: 12 tokens, 850.1 tok/s | generation: 64 tokens, 120.3 tok/s | NVIDIA H200" */
void gen_print_stats(const gen_stats *st, const zrt *r, FILE *to);

/* Parses -n, --stop and the sampler flags; 1 when argv[*i] was one of them,
 * 0 when not, -1 (d set) for a bad value. */
int gen_parse_arg(gen_opts *o, int argc, char **argv, int *i, zdiag *d);
void gen_defaults(gen_opts *o);
extern const char gen_flags_help[];

#endif
