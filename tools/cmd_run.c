/* zinc run: executes a compiled plan on the Vulkan device.
 *   -p TEXT      generates text from a prompt (--chat wraps it in the
 *                model's chat template), streaming it to stdout;
 *   --tokens IDS evaluates the ids (teacher forcing) and can write every
 *                position's logits, in the same format as `zinc ref`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/fileio.h"
#include "cli.h"
#include "gen.h"
#include "model.h"

static const char *const usage_head =
    "usage: zinc run MODEL.gguf|PLAN.zplan -p TEXT [--chat] [generation options]\n"
    "       zinc run MODEL.gguf|PLAN.zplan --tokens 1,2,3 [--logits-out FILE] [--mode prefill|decode]\n"
    "\n"
    "Runs a model on a Vulkan device: a plan compiled by zincc, or a GGUF (compiled for\n"
    "the device on first use and kept in the plan cache).\n"
    "\n"
    "  -p, --prompt TEXT    generate a continuation of TEXT, streamed to stdout ('-': standard input)\n"
    "  -f, --file FILE      the prompt is the text of FILE (one final newline dropped)\n"
    "  --chat               wrap the prompt in the model's chat template (as the user's turn)\n"
    "  -sys, --system TEXT  with --chat: a system message first\n"
    "  --template NAME      with --chat: chatml or llama3 (default: from the model's metadata)\n"
    "  --special            the text of control tokens (<|im_start|> ...) in the prompt becomes those\n"
    "                       tokens; without it, the prompt (and a chat's messages) cannot forge them\n"
    "  --quiet              no statistics line after the text\n"
    "  --tokens LIST        evaluate these token ids (teacher forcing) instead of generating\n"
    "  --logits-out FILE    with --tokens: write float32 logits, row-major [n_tokens][n_vocab]\n"
    "  --mode prefill       with --tokens: run them through the prefill schedule, in chunks (default)\n"
    "  --mode decode        with --tokens: one at a time through the recorded decode step\n"
    "\n"
    "model:\n";

typedef struct run_opts {
    model_opts m;
    const char *out, *mode, *prompt, *file, *system, *tmpl;
    bool chat, special;
    int32_t *tokens;
    int n;
    gen_opts g;
} run_opts;

static void print_usage(void) {
    fputs(usage_head, stdout);
    fputs(model_flags_help, stdout);
    fputs("\ngeneration:\n", stdout);
    fputs(gen_flags_help, stdout);
    fputs(zrt_sample_flags_help, stdout);
}

static int parse_flag(int argc, char **argv, int *i, run_opts *o) {
    const char *v = NULL;
    bool miss = false;
    if (cli_opt(argc, argv, i, "--tokens", &v, &miss)) {
        free(o->tokens);
        o->tokens = NULL;
        if (miss || !cli_parse_int_list(v, &o->tokens, &o->n))
            return cli_usage_error("zinc run", "--tokens expects ids like 1,2,3");
    } else if (cli_opt(argc, argv, i, "--logits-out", &v, &miss))
        o->out = v;
    else if (cli_opt(argc, argv, i, "--mode", &v, &miss)) {
        if (!miss && strcmp(v, "prefill") && strcmp(v, "decode"))
            return cli_usage_error("zinc run", "--mode expects prefill or decode");
        o->mode = v;
    } else if (cli_opt(argc, argv, i, "-p", &v, &miss) || cli_opt(argc, argv, i, "--prompt", &v, &miss))
        o->prompt = v;
    else if (cli_opt(argc, argv, i, "-f", &v, &miss) || cli_opt(argc, argv, i, "--file", &v, &miss))
        o->file = v;
    else if (cli_opt(argc, argv, i, "--system", &v, &miss) || cli_opt(argc, argv, i, "-sys", &v, &miss) ||
             cli_opt(argc, argv, i, "--system-prompt", &v, &miss))
        o->system = v;
    else if (cli_opt(argc, argv, i, "--template", &v, &miss))
        o->tmpl = v;
    else if (!strcmp(argv[*i], "--chat"))
        o->chat = true;
    else if (!strcmp(argv[*i], "--special"))
        o->special = true;
    else if (!strcmp(argv[*i], "--quiet"))
        o->g.quiet = true;
    else
        return -1;
    return miss ? cli_usage_error("zinc run", "%s needs a value", argv[*i]) : 0;
}

/* Options that the chosen mode would ignore are errors, not silence. */
static int check(const run_opts *o) {
    const char *U = "zinc run";
    if (!o->m.path) return cli_usage_error(U, "no model given (a MODEL.gguf or a PLAN.zplan)");
    if (o->prompt && o->file) return cli_usage_error(U, "give the prompt once: -p TEXT or -f FILE");
    bool gen = o->prompt || o->file;
    if (!o->tokens == !gen) return cli_usage_error(U, "give either -p TEXT (or -f FILE) or --tokens IDS");
    if (gen && o->out) return cli_usage_error(U, "--logits-out goes with --tokens (-p generates text)");
    if (gen && o->mode) return cli_usage_error(U, "--mode goes with --tokens (-p prefills, then decodes)");
    if (o->tokens && o->g.given)
        return cli_usage_error(U, "%s goes with -p: --tokens evaluates the ids it is given", o->g.given);
    if (o->tokens && (o->chat || o->system || o->tmpl || o->special || o->g.quiet))
        return cli_usage_error(U, "--chat, --system, --template, --special and --quiet go with -p");
    if ((o->system || o->tmpl) && !o->chat)
        return cli_usage_error(U, "%s goes with --chat (it is part of the chat template)",
                               o->system ? "--system" : "--template");
    return 0;
}

static int parse(int argc, char **argv, run_opts *o) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            print_usage();
            exit(0);
        }
        int rc = parse_flag(argc, argv, &i, o);
        if (rc > 0) return rc;
        if (rc == 0) continue;
        zdiag d = {0};
        int g = model_parse_arg(&o->m, argc, argv, &i, &d);
        if (!g) g = gen_parse_arg(&o->g, argc, argv, &i, &d);
        if (g < 0) return cli_usage_error("zinc run", "%s", d.msg);
        if (g > 0) continue;
        if (argv[i][0] == '-' || o->m.path) return cli_unexpected("zinc run", argv[i]);
        o->m.path = argv[i];
    }
    return check(o);
}

static zstatus eval_tokens(zrt *r, const run_opts *o, zdiag *d) {
    uint32_t V = zrt_plan(r)->n_vocab;
    size_t n = (size_t)o->n * V;
    float *logits = malloc(sizeof(float) * n);
    zstatus s = logits ? ZOK : zdiag_set(d, ZE_NOMEM, "out of memory for logits");
    if (!s && (!o->mode || strcmp(o->mode, "decode"))) s = zrt_eval(r, o->tokens, o->n, logits, d);
    for (int t = 0; !s && o->mode && !strcmp(o->mode, "decode") && t < o->n; t++)
        s = zrt_run(r, ZPLAN_DECODE, &o->tokens[t], 1, logits + (size_t)t * V, d);
    if (!s && o->out) s = zfile_write_atomic(o->out, logits, sizeof(float) * n, d);
    if (!s)
        fprintf(stderr, "zinc run: %d tokens on %s%s%s\n", o->n, zrt_device(r)->name,
                o->out ? ", logits in " : "", o->out ? o->out : "");
    free(logits);
    return s;
}

/* The prompt's token ids: raw text, or one user turn of the chat template. */
static zstatus prompt_ids(const run_opts *o, const char *text, gen_ctx *g, zarena *a, int32_t **ids,
                          size_t *n, zdiag *d) {
    unsigned flags = ZRT_TOK_ADD_SPECIAL | (o->special ? ZRT_TOK_PARSE_SPECIAL : 0);
    if (!o->chat) return zrt_tok_encode(g->tok, text, strlen(text), flags, a, ids, n, d);
    zrt_chat_format f;
    zrt_chat_msg m[2];
    size_t k = 0;
    if (o->system) m[k++] = (zrt_chat_msg){"system", o->system};
    m[k++] = (zrt_chat_msg){"user", text};
    zstatus s = zrt_chat_for_gguf(zrt_gguf(g->r), o->tmpl, &f, d);
    if (s) return s;
    gen_check_template(g, f, "zinc run");
    return gen_chat_encode(g, f, m, k, NULL, flags, a, ids, n, d);
}

/* -f FILE or -p - (standard input): the prompt's text, one final newline
 * dropped as llama.cpp does. */
static zstatus read_prompt(const run_opts *o, char **text, zdiag *d) {
    const char *from = o->file ? o->file : !strcmp(o->prompt, "-") ? "-" : NULL;
    size_t len;
    *text = NULL;
    if (!from) return ZOK;
    zstatus s = cli_read_all(from, text, &len, d);
    if (!s && len && (*text)[len - 1] == '\n') (*text)[len - 1] = 0;
    return s;
}

static zstatus generate(zrt *r, const run_opts *o, zdiag *d) {
    zarena *a = zarena_new();
    gen_ctx g = {0};
    gen_stats st;
    int32_t *ids;
    size_t n;
    char *text = NULL;
    zstatus s = a ? read_prompt(o, &text, d) : zdiag_set(d, ZE_NOMEM, "out of memory");
    if (!s) s = gen_open(&g, r, &o->g, a, d);
    if (!s) s = prompt_ids(o, text ? text : o->prompt, &g, a, &ids, &n, d);
    if (!s && !n) s = zdiag_set(d, ZE_INVALID, "the prompt has no tokens");
    if (!s) {
        gen_install_sigint();
        s = gen_run(&g, ids, n, &o->g, stdout, &st, d);
        gen_end_text(stdout);
        if (!s && !o->g.quiet) gen_print_stats(&st, r, stderr);
    }
    gen_close(&g);
    free(text);
    zarena_free(a);
    return s;
}

int cmd_run(int argc, char **argv) {
    run_opts o = {0};
    gen_defaults(&o.g);
    int rc = parse(argc, argv, &o);
    if (rc) {
        free(o.tokens);
        return rc;
    }
    zdiag d = {0};
    zrt *r = NULL;
    zstatus s = model_open("zinc run", &o.m, &r, &d);
    if (!s) o.g.n_ctx = model_ctx(&o.m, r);
    if (!s) s = o.tokens ? eval_tokens(r, &o, &d) : generate(r, &o, &d);
    free(o.tokens);
    zrt_close(r);
    return s ? cli_fail("zinc run", &d) : 0;
}
