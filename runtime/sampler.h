/* sampler: picks the next token from a row of logits, with llama.cpp's
 * samplers and their order:
 *   repeat penalty -> top-k -> top-p -> min-p -> temperature -> draw
 * (its default chain without DRY, typical-p, XTC and top-n-sigma, which are off
 * by default there). temp <= 0 is greedy: the first highest logit after the
 * repeat penalty. The draw uses a seeded xoshiro256** generator, so a seed
 * gives the same tokens on every machine; the stream differs from llama.cpp's
 * mt19937, so sampled (non-greedy) text matches llama.cpp in distribution,
 * not token for token. Pure C, no allocation after zrt_sample_new. */
#ifndef ZINC_SAMPLER_H
#define ZINC_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../ir/arena.h"
#include "../ir/zstatus.h"

typedef struct zrt_sample_params {
    float temp;            /* --temp: <= 0 is greedy (0.8) */
    int32_t top_k;         /* --top-k: <= 0 keeps all (40) */
    float top_p;           /* --top-p: >= 1 keeps all (0.95) */
    float min_p;           /* --min-p: <= 0 keeps all (0.05) */
    float repeat_penalty;  /* --repeat-penalty: 1 is off (1.0) */
    int32_t repeat_last_n; /* --repeat-last-n: tokens of history penalised; 0 off, -1 = ctx (64) */
    uint64_t seed;         /* --seed; ZRT_SAMPLE_SEED_RANDOM for -1 */
} zrt_sample_params;

/* --seed -1: the caller draws a seed (and says which), as llama.cpp does.
 * The sampler itself takes any value as a seed. */
#define ZRT_SAMPLE_SEED_RANDOM UINT64_MAX

/* llama.cpp's defaults (listed above); the seed is 0 here: callers that want
 * llama.cpp's "random unless given" set ZRT_SAMPLE_SEED_RANDOM and draw one. */
void zrt_sample_defaults(zrt_sample_params *p);

/* The flags, for --help texts. */
extern const char zrt_sample_flags_help[];

/* If argv[*i] is one of the sampler flags (--temp X or --temp=X ...), parses
 * its value into p, advances *i past it and returns 1; returns 0 for any
 * other argument; -1 (with d set) for a bad or missing value. */
int zrt_sample_parse_arg(zrt_sample_params *p, int argc, char **argv, int *i, zdiag *d);

/* A candidate token: id, logit, and its probability once computed. */
typedef struct zrt_sample_cand {
    int32_t id;
    float logit, p;
} zrt_sample_cand;

typedef struct zrt_sampler zrt_sampler;

/* A sampler over a vocabulary of n_vocab tokens; ctx resolves
 * repeat_last_n = -1. Everything lives in a. */
zstatus zrt_sample_new(const zrt_sample_params *p, uint32_t n_vocab, uint32_t ctx, zarena *a,
                       zrt_sampler **out, zdiag *d);
/* Records a token of the history the repeat penalty looks at: prompt
 * tokens (if they should count, as llama.cpp's tools do) and each sampled
 * token. */
void zrt_sample_accept(zrt_sampler *s, int32_t token);
/* Bans a token: neither zrt_sample nor zrt_sample_top draws it again
 * (llama.cpp's --ignore-eos bans the end-of-generation tokens so). false
 * for an id outside the vocabulary, or when it is the last one left. */
bool zrt_sample_ban(zrt_sampler *s, int32_t token);
/* Picks a token from logits[n_vocab] (not modified). Does not accept it. */
int32_t zrt_sample(zrt_sampler *s, const float *logits);
/* Whether zrt_sample_top gives what zrt_sample would from only the n
 * largest logits: no repeat penalty (it can lift smaller logits over larger
 * ones), and greedy or a top-k of at most n less the banned tokens (they
 * may all be among the n). */
bool zrt_sample_needs_only_top(const zrt_sampler *s, size_t n);
/* Picks a token from top[0..n): the n largest logits of a row, in any order
 * (the executor selects them on the GPU). Same draws as zrt_sample. */
int32_t zrt_sample_top(zrt_sampler *s, const zrt_sample_cand *top, size_t n);
/* Forgets the history and reseeds the generator. */
void zrt_sample_reset(zrt_sampler *s);

/* The pieces, for tests and for callers that build their own chain. Each
 * works on a candidate list (ids and logits, n entries) and returns how many
 * of the first entries remain. top-k (k > 0) and top-p leave the list sorted
 * by logit, descending, ties by id; min-p keeps the order it is given. */
size_t zrt_sample_top_k(zrt_sample_cand *c, size_t n, int32_t k);
size_t zrt_sample_top_p(zrt_sample_cand *c, size_t n, float p);
size_t zrt_sample_min_p(zrt_sample_cand *c, size_t n, float p);
void zrt_sample_softmax(zrt_sample_cand *c, size_t n);

#endif
