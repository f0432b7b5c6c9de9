/* What `zinc run|chat|bench|tokenize` are given: a compiled plan, or a GGUF
 * that is compiled on first use into the plan cache (tools/plan_cache.c). The
 * options that choose and open a model are parsed here, once for all
 * commands. */
#ifndef ZINC_MODEL_H
#define ZINC_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "../runtime/tokenizer.h"
#include "../runtime/zrt.h"

typedef struct model_opts {
    const char *path;   /* PLAN.zplan or MODEL.gguf (the positional argument, or -m) */
    const char *gguf;   /* --gguf: the weights, when a plan's recorded GGUF moved */
    const char *device; /* --device */
    int64_t ctx;        /* -c: a GGUF's compiled context; at most a plan's own (0: default) */
    bool no_cache;      /* --no-cache: compile a GGUF in memory, read and write no cache */
    int64_t parallel;   /* a GGUF is compiled with zincc --parallel N (bench, serve); 0: without */
} model_opts;

/* The flags above, for --help texts. */
extern const char model_flags_help[];

/* Parses -m, --gguf, --device, -c/--ctx-size, --no-cache: 1 when argv[*i]
 * was one of them (*i advanced past its value), 0 when not, -1 (d set) for a
 * bad or missing value. */
int model_parse_arg(model_opts *o, int argc, char **argv, int *i, zdiag *d);

/* Whether the file at path starts with the GGUF magic. */
bool model_is_gguf(const char *path);

/* Opens o->path for running: a plan as it is (its recorded GGUF, or --gguf),
 * a GGUF through the plan cache. prog names the command in what it prints
 * (a compile says so on stderr). */
zstatus model_open(const char *prog, const model_opts *o, zrt **r, zdiag *d);

/* The tokenizer of o->path: a GGUF's own, or that of a plan's GGUF (its
 * recorded one, or --gguf). */
zstatus model_tokenizer(const model_opts *o, zrt_tok **t, zdiag *d);

/* The context a session may use: -c when given, else the plan's. */
uint32_t model_ctx(const model_opts *o, const zrt *r);

#endif
