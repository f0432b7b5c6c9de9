/* zinc tokenize: text to token ids and back with a model's tokenizer, for
 * checking ids against llama.cpp and for debugging prompts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/tokenizer.h"
#include "cli.h"
#include "model.h"

static const char *const usage =
    "usage: zinc tokenize MODEL.gguf|PLAN [--special] TEXT\n"
    "       zinc tokenize MODEL.gguf|PLAN [--special] --file PATH\n"
    "       zinc tokenize MODEL.gguf|PLAN [--special] --detok 1,2,3\n"
    "\n"
    "Prints the token ids of TEXT, comma-separated, as llama.cpp's tokenizer gives\n"
    "them. BOS/EOS are added only where the model's metadata asks for them\n"
    "(tokenizer.ggml.add_bos_token / add_eos_token). For a compiled plan, the\n"
    "tokenizer of the GGUF it was compiled from is used. Works on vocab-only GGUFs.\n"
    "\n"
    "  --special      the text of special tokens (\"<|im_start|>\") becomes those tokens;\n"
    "                 without it, such text is tokenized as ordinary characters.\n"
    "                 With --detok: render special tokens as their text (else as nothing).\n"
    "  --file PATH    tokenize the bytes of a file instead of TEXT\n"
    "  --detok LIST   print the text of comma-separated token ids instead\n"
    "  --gguf FILE    with a plan: the model's GGUF, when it moved since compilation\n";

typedef struct tok_opts {
    const char *model, *text, *file, *detok, *gguf;
    bool special;
} tok_opts;

static int parse(int argc, char **argv, tok_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        bool miss = false;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            exit(0);
        } else if (!strcmp(argv[i], "--special")) {
            o->special = true;
        } else if (cli_opt(argc, argv, &i, "--file", &v, &miss)) {
            if (miss) return cli_usage_error("zinc tokenize", "--file expects a path");
            o->file = v;
        } else if (cli_opt(argc, argv, &i, "--detok", &v, &miss)) {
            if (miss) return cli_usage_error("zinc tokenize", "--detok expects ids like 1,2,3");
            o->detok = v;
        } else if (cli_opt(argc, argv, &i, "--gguf", &v, &miss)) {
            if (miss) return cli_usage_error("zinc tokenize", "--gguf expects a path");
            o->gguf = v;
        } else if (!strcmp(argv[i], "--")) {
            if (i + 2 != argc || o->text)
                return cli_usage_error("zinc tokenize", "expected one TEXT after --");
            o->text = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("zinc tokenize", "unknown option '%s'", argv[i]);
        } else if (!o->model) {
            o->model = argv[i];
        } else if (!o->text) {
            o->text = argv[i];
        } else {
            return cli_usage_error("zinc tokenize", "unexpected argument '%s' (quote TEXT as one argument)",
                                   argv[i]);
        }
    }
    if (!o->model) return cli_usage_error("zinc tokenize", "no model given");
    if (!!o->text + !!o->file + !!o->detok != 1)
        return cli_usage_error("zinc tokenize", "expected exactly one of TEXT, --file or --detok");
    return 0;
}

static int print_ids(const zrt_tok *t, const char *text, size_t len, bool special) {
    zarena *a = zarena_new();
    int32_t *ids;
    size_t n;
    zdiag d = {0};
    unsigned flags = ZRT_TOK_ADD_SPECIAL | (special ? ZRT_TOK_PARSE_SPECIAL : 0);
    zstatus s =
        a ? zrt_tok_encode(t, text, len, flags, a, &ids, &n, &d) : zdiag_set(&d, ZE_NOMEM, "out of memory");
    if (!s) {
        for (size_t i = 0; i < n; i++)
            printf(i ? ",%d" : "%d", ids[i]);
        printf("\n");
    }
    zarena_free(a);
    return s ? cli_fail("zinc tokenize", &d) : 0;
}

static int print_text(const zrt_tok *t, const char *list, bool special) {
    int32_t *ids = NULL;
    int n = 0;
    if (*list && !cli_parse_int_list(list, &ids, &n))
        return cli_usage_error("zinc tokenize", "--detok expects ids like 1,2,3");
    zarena *a = zarena_new();
    char *text;
    size_t len;
    zdiag d = {0};
    unsigned flags = special ? ZRT_TOK_UNPARSE_SPECIAL : 0;
    zstatus s = a ? zrt_tok_detokenize(t, ids, (size_t)n, flags, a, &text, &len, &d)
                  : zdiag_set(&d, ZE_NOMEM, "out of memory");
    if (!s) {
        fwrite(text, 1, len, stdout);
        printf("\n");
    }
    zarena_free(a);
    free(ids);
    return s ? cli_fail("zinc tokenize", &d) : 0;
}

int cmd_tokenize(int argc, char **argv) {
    tok_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    zdiag d = {0};
    zrt_tok *t;
    model_opts m = {.path = o.model, .gguf = o.gguf};
    if (model_tokenizer(&m, &t, &d)) return cli_fail("zinc tokenize", &d);
    if (o.detok) {
        rc = print_text(t, o.detok, o.special);
    } else if (o.file) {
        size_t len = 0;
        char *buf = NULL;
        rc = cli_read_all(o.file, &buf, &len, &d) ? cli_fail("zinc tokenize", &d)
                                                  : print_ids(t, buf, len, o.special);
        free(buf);
    } else {
        rc = print_ids(t, o.text, strlen(o.text), o.special);
    }
    zrt_tok_free(t);
    return rc;
}
