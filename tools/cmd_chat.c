/* zinc chat: an interactive conversation. The KV cache is kept between
 * turns: each turn feeds only what is new (the end of the last reply's turn
 * and the user's message, in the chat template), never the whole history. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "gen.h"
#include "model.h"

static const char *const usage_head =
    "usage: zinc chat MODEL.gguf|PLAN.zplan [--system TEXT] [--template chatml|llama3] [options]\n"
    "\n"
    "Chats with the model: type a message and press Enter; an empty line does nothing,\n"
    "/exit or end of input (Ctrl-D) quits, Ctrl-C stops a reply. The conversation stays\n"
    "in the KV cache, so each turn only processes the new message.\n"
    "\n"
    "  -sys, --system TEXT  a system message before the first turn\n"
    "  --template NAME      chat template: chatml or llama3 (default: from the model's metadata)\n"
    "  --special            the text of control tokens (<|im_end|> ...) in messages becomes those\n"
    "                       tokens; without it, what is typed cannot forge them\n"
    "  --quiet              no statistics line after each reply\n"
    "\n"
    "model:\n";

typedef struct chat_opts {
    model_opts m;
    const char *system, *tmpl;
    bool special;
    gen_opts g;
} chat_opts;

static int parse(int argc, char **argv, chat_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        bool miss = false;
        zdiag d = {0};
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_head, stdout);
            fputs(model_flags_help, stdout);
            fputs("\ngeneration:\n", stdout);
            fputs(gen_flags_help, stdout);
            fputs(zrt_sample_flags_help, stdout);
            exit(0);
        }
        if (cli_opt(argc, argv, &i, "--system", &v, &miss) || cli_opt(argc, argv, &i, "-sys", &v, &miss) ||
            cli_opt(argc, argv, &i, "--system-prompt", &v, &miss))
            o->system = v;
        else if (!strcmp(argv[i], "--special"))
            o->special = true;
        else if (!strcmp(argv[i], "--quiet"))
            o->g.quiet = true;
        else if (cli_opt(argc, argv, &i, "--template", &v, &miss))
            o->tmpl = v;
        else {
            int g = model_parse_arg(&o->m, argc, argv, &i, &d);
            if (!g) g = gen_parse_arg(&o->g, argc, argv, &i, &d);
            if (g < 0) return cli_usage_error("zinc chat", "%s", d.msg);
            if (g == 0 && (argv[i][0] == '-' || o->m.path)) return cli_unexpected("zinc chat", argv[i]);
            if (g == 0) o->m.path = argv[i];
        }
        if (miss) return cli_usage_error("zinc chat", "%s needs a value", argv[i]);
    }
    return o->m.path ? 0 : cli_usage_error("zinc chat", "no model given (a MODEL.gguf or a PLAN.zplan)");
}

#define SENTINEL "\x01zinc-reply\x01"

/* The tokens a turn adds to the conversation. The first turn is the whole
 * rendering (system, user, the assistant's opening); a later one is what the
 * template puts after an assistant reply: found by rendering a reply made of
 * a sentinel and keeping what follows it. */
static zstatus turn_ids(const gen_ctx *g, zrt_chat_format f, const chat_opts *o, bool first, const char *msg,
                        zarena *a, int32_t **ids, size_t *n, zdiag *d) {
    zrt_chat_msg m[3];
    size_t k = 0;
    if (first && o->system) m[k++] = (zrt_chat_msg){"system", o->system};
    if (!first) {
        m[k++] = (zrt_chat_msg){"user", "-"};
        m[k++] = (zrt_chat_msg){"assistant", SENTINEL};
    }
    m[k++] = (zrt_chat_msg){"user", msg};
    unsigned flags = (first ? ZRT_TOK_ADD_SPECIAL : 0) | (o->special ? ZRT_TOK_PARSE_SPECIAL : 0);
    return gen_chat_encode(g, f, m, k, first ? NULL : SENTINEL, flags, a, ids, n, d);
}

static zstatus one_turn(gen_ctx *g, zrt_chat_format f, const chat_opts *o, bool first, const char *msg,
                        zdiag *d) {
    zarena *a = zarena_new();
    size_t n;
    int32_t *ids;
    gen_stats st;
    zstatus s = a ? turn_ids(g, f, o, first, msg, a, &ids, &n, d) : zdiag_set(d, ZE_NOMEM, "out of memory");
    gen_interrupted = 0;
    if (!s) s = gen_run(g, ids, n, &o->g, stdout, &st, d);
    if (!s) {
        fputc('\n', stdout);
        if (!o->g.quiet) gen_print_stats(&st, g->r, stderr);
    }
    zarena_free(a);
    return s;
}

/* Reads one line into a malloc'd buffer without its newline; NULL at the end. */
static char *read_line(void) {
    size_t cap = 0;
    char *line = NULL;
    if (isatty(0)) fputs("\n> ", stdout);
    fflush(stdout);
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    return line;
}

static zstatus converse(zrt *r, const chat_opts *o, zdiag *d) {
    zarena *a = zarena_new();
    gen_ctx g;
    zrt_chat_format f;
    zstatus s = a ? gen_open(&g, r, &o->g, a, d) : zdiag_set(d, ZE_NOMEM, "out of memory");
    if (!s) s = zrt_chat_for_gguf(zrt_gguf(r), o->tmpl, &f, d);
    if (!s) {
        gen_check_template(&g, f, "zinc chat");
        fprintf(stderr, "zinc chat: %s on %s, %s template; /exit or Ctrl-D to quit\n", o->m.path,
                zrt_device(r)->name, zrt_chat_name(f));
    }
    gen_install_sigint();
    for (bool first = true; !s;) {
        gen_interrupted = 0;
        char *line = read_line();
        if (!line || !strcmp(line, "/exit")) {
            free(line);
            break;
        }
        if (*line) {
            s = one_turn(&g, f, o, first, line, d);
            first = false;
        }
        free(line);
    }
    gen_close(&g);
    zarena_free(a);
    return s;
}

int cmd_chat(int argc, char **argv) {
    chat_opts o = {0};
    gen_defaults(&o.g);
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    zdiag d = {0};
    zrt *r = NULL;
    zstatus s = model_open("zinc chat", &o.m, &r, &d);
    if (!s) o.g.n_ctx = model_ctx(&o.m, r);
    if (!s) s = converse(r, &o, &d);
    zrt_close(r);
    return s ? cli_fail("zinc chat", &d) : 0;
}
