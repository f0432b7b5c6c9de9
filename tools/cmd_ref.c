/* zinc ref: runs the CPU reference interpreter on a GGUF model with teacher
 * forcing and writes the logits of every position. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../frontend/arch.h"
#include "../ir/fileio.h"
#include "../ir/interp.h"
#include "../passes/pass.h"
#include "cli.h"

static const char *const usage =
    "usage: zinc ref MODEL.gguf --tokens 1,2,3 [--logits-out FILE] [--mode prefill|decode] [--ctx N] [--top "
    "K]\n"
    "                [--target NAME]\n"
    "\n"
    "Runs the CPU reference interpreter (fp32, weights dequantized) over the given\n"
    "token ids with teacher forcing: the logits of every input position are computed.\n"
    "\n"
    "  --tokens LIST      comma-separated token ids (required)\n"
    "  --logits-out FILE  write little-endian float32 logits, row-major [n_tokens][n_vocab]\n"
    "  --mode prefill     one step over all tokens (default)\n"
    "  --mode decode      one token per step through the KV cache; must agree with prefill to rounding\n"
    "  --ctx N            KV-cache capacity (default: the number of tokens)\n"
    "  --top K            print the K most likely next tokens after each position (default 0)\n"
    "  --target NAME      interpret the graph as zincc compiles it for this profile (llvmpipe, h200,\n"
    "                     rdna4, generic): its fusions and its roundings (fp16 KV cache, fp16 prefill\n"
    "                     matmul operands, int8 decode GEMV x), the reference for that plan's logits\n";

typedef struct ref_opts {
    const char *model, *out, *mode, *target;
    int32_t *tokens;
    int n_tokens;
    int64_t ctx, top;
} ref_opts;

static int parse(int argc, char **argv, ref_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        bool miss = false;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            exit(0);
        } else if (cli_opt(argc, argv, &i, "--tokens", &v, &miss)) {
            if (miss || !cli_parse_int_list(v, &o->tokens, &o->n_tokens))
                return cli_usage_error("zinc ref", "--tokens expects ids like 1,2,3");
        } else if (cli_opt(argc, argv, &i, "--logits-out", &v, &miss)) {
            if (miss) return cli_usage_error("zinc ref", "--logits-out expects a file");
            o->out = v;
        } else if (cli_opt(argc, argv, &i, "--mode", &v, &miss)) {
            if (miss || (strcmp(v, "prefill") && strcmp(v, "decode")))
                return cli_usage_error("zinc ref", "--mode expects prefill or decode");
            o->mode = v;
        } else if (cli_opt(argc, argv, &i, "--ctx", &v, &miss)) {
            if (miss || !cli_parse_i64(v, 1, 1 << 24, &o->ctx))
                return cli_usage_error("zinc ref", "--ctx expects a number of positions");
        } else if (cli_opt(argc, argv, &i, "--target", &v, &miss)) {
            if (miss || !ztarget_find(v))
                return cli_usage_error("zinc ref", "--target expects one of %s", ztarget_names());
            o->target = v;
        } else if (cli_opt(argc, argv, &i, "--top", &v, &miss)) {
            if (miss || !cli_parse_i64(v, 0, 100, &o->top))
                return cli_usage_error("zinc ref", "--top expects 0..100");
        } else if (argv[i][0] == '-' || o->model) {
            return cli_usage_error("zinc ref", "unexpected argument '%s'", argv[i]);
        } else {
            o->model = argv[i];
        }
    }
    if (!o->model) return cli_usage_error("zinc ref", "no model given");
    if (!o->tokens) return cli_usage_error("zinc ref", "--tokens is required");
    if (!o->ctx) o->ctx = o->n_tokens;
    if (o->ctx < o->n_tokens)
        return cli_usage_error("zinc ref", "--ctx %lld is below the %d tokens given", (long long)o->ctx,
                               o->n_tokens);
    return 0;
}

static void print_top(const float *row, int vocab, int pos, int k) {
    printf("pos %d top:", pos);
    bool *taken = calloc((size_t)vocab, 1);
    for (int j = 0; j < k && taken; j++) {
        int best = -1;
        for (int i = 0; i < vocab; i++)
            if (!taken[i] && (best < 0 || row[i] > row[best])) best = i;
        if (best < 0) break;
        taken[best] = true;
        printf(" %d (%.4f)", best, row[best]);
    }
    free(taken);
    printf("\n");
}

/* --target: the phase's default pipeline for the profile, as zincc runs it. */
static zstatus compile_like(const ref_opts *o, zir_graph *g, zdiag *d) {
    const ztarget *t = ztarget_find(o->target);
    bool decode = o->mode && !strcmp(o->mode, "decode");
    zpass_opts po = {.target = t,
                     .phase = decode ? ZPH_DECODE : ZPH_PREFILL,
                     .token_tile = t->prefill_tile,
                     .ctx = o->ctx,
                     .fuse_threshold = t->fuse_threshold};
    zstatus s = zpass_run_pipeline(g, zpass_default_pipeline(), NULL, &po, d);
    if (s) zdiag_prefix(d, "--target %s", o->target);
    return s;
}

static zstatus run(const ref_opts *o, const zir_graph *g, float *logits, zdiag *d) {
    zir_interp *it;
    zstatus s = zir_interp_new(g, o->ctx, &it, d);
    if (s) return s;
    int64_t V = g->hp.n_vocab;
    if (o->mode && !strcmp(o->mode, "decode")) {
        for (int t = 0; t < o->n_tokens && !s; t++)
            s = zir_interp_step(it, &o->tokens[t], 1, logits + t * V, d);
    } else {
        s = zir_interp_step(it, o->tokens, o->n_tokens, logits, d);
    }
    zir_interp_free(it);
    return s;
}

int cmd_ref(int argc, char **argv) {
    ref_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    zdiag d = {0};
    gguf_file *f = NULL;
    zir_graph *g = NULL;
    float *logits = NULL;
    zstatus s = gguf_open(o.model, &f, &d);
    if (!s) s = zir_build_from_gguf(f, &g, &d);
    if (!s && o.target) s = compile_like(&o, g, &d);
    if (!s && !(logits = malloc(sizeof(float) * (size_t)o.n_tokens * (size_t)g->hp.n_vocab)))
        s = zdiag_set(&d, ZE_NOMEM, "out of memory for %d x %d logits", o.n_tokens, g->hp.n_vocab);
    if (!s) s = run(&o, g, logits, &d);
    if (!s && o.out)
        s = zfile_write_atomic(o.out, logits, sizeof(float) * (size_t)o.n_tokens * (size_t)g->hp.n_vocab, &d);
    if (!s) {
        for (int t = 0; t < o.n_tokens && o.top; t++)
            print_top(logits + (size_t)t * g->hp.n_vocab, g->hp.n_vocab, t, (int)o.top);
        if (o.out)
            fprintf(stderr, "zinc ref: wrote %d x %d logits to %s\n", o.n_tokens, g->hp.n_vocab, o.out);
    }
    free(logits);
    free(o.tokens);
    zir_graph_free(g);
    gguf_close(f);
    return s ? cli_fail("zinc ref", &d) : 0;
}
