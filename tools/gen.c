#include "gen.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

volatile sig_atomic_t gen_interrupted;

static void on_sigint(int sig) {
    (void)sig;
    gen_interrupted = 1;
}

void gen_install_sigint(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char gen_flags_help[] =
    "  -n N                 most tokens to generate, -1..16777216 (default 256; -1: until the context\n"
    "                       is full)\n"
    "  --stop TEXT          stop when the output ends with TEXT (repeatable, up to 8)\n"
    "  --ignore-eos         never sample an end-of-generation token: run to -n or the context's end\n";

void gen_defaults(gen_opts *o) {
    memset(o, 0, sizeof *o);
    zrt_sample_defaults(&o->sp);
    o->sp.seed = ZRT_SAMPLE_SEED_RANDOM; /* as llama.cpp: random unless given */
    o->n_predict = 256;
}

static int parse_one(gen_opts *o, int argc, char **argv, int *i, zdiag *d) {
    const char *v = NULL;
    bool miss = false;
    if (cli_opt(argc, argv, i, "-n", &v, &miss) || cli_opt(argc, argv, i, "--n-predict", &v, &miss)) {
        if (miss || !cli_parse_i64(v, -1, 1 << 24, &o->n_predict))
            return zdiag_set(d, ZE_INVALID, "-n expects -1..16777216 tokens"), -1;
        return 1;
    }
    if (cli_opt(argc, argv, i, "--stop", &v, &miss)) {
        if (miss || !*v || o->n_stop == GEN_MAX_STOPS)
            return zdiag_set(d, ZE_INVALID, "--stop expects a non-empty text (at most %d)", GEN_MAX_STOPS),
                   -1;
        o->stop[o->n_stop++] = v;
        return 1;
    }
    if (!strcmp(argv[*i], "--ignore-eos")) {
        o->ignore_eos = true;
        ++*i;
        return 1;
    }
    return zrt_sample_parse_arg(&o->sp, argc, argv, i, d);
}

int gen_parse_arg(gen_opts *o, int argc, char **argv, int *i, zdiag *d) {
    const char *flag = argv[*i];
    int r = parse_one(o, argc, argv, i, d);
    if (r > 0 && !o->given) o->given = flag;
    return r;
}

/* A seed for --seed -1: a different one each run, printed so that the run
 * can be repeated. */
static uint64_t draw_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32;
    return x & INT64_MAX; /* a value --seed accepts */
}

zstatus gen_open(gen_ctx *g, zrt *r, const gen_opts *o, zarena *a, zdiag *d) {
    memset(g, 0, sizeof *g);
    g->r = r;
    const zplan *p = zrt_plan(r);
    g->ctx = o->n_ctx && o->n_ctx < p->ctx ? o->n_ctx : p->ctx;
    zrt_sample_params sp = o->sp;
    if (sp.seed == ZRT_SAMPLE_SEED_RANDOM) {
        sp.seed = draw_seed();
        if (sp.temp > 0)
            fprintf(stderr, "zinc: seed %llu (--seed %llu repeats it)\n", (unsigned long long)sp.seed,
                    (unsigned long long)sp.seed);
    }
    g->seed = sp.seed;
    zstatus s = zrt_tok_load(zrt_gguf(r), &g->tok, d);
    if (!s && zrt_tok_n_vocab(g->tok) > p->n_vocab)
        s = zdiag_set(d, ZE_INVALID, "the tokenizer has %u tokens but the model's output has %u",
                      zrt_tok_n_vocab(g->tok), p->n_vocab);
    if (!s) s = zrt_sample_new(&sp, p->n_vocab, g->ctx, a, &g->smp, d);
    if (!s && o->ignore_eos) gen_ban_eog(g->smp, g->tok);
    if (!s && !(g->logits = zarena_array(a, p->n_vocab, sizeof(float))))
        s = zdiag_set(d, ZE_NOMEM, "out of memory");
    return s;
}

void gen_ban_eog(zrt_sampler *smp, const zrt_tok *tok) {
    for (uint32_t id = 0; id < zrt_tok_n_vocab(tok); id++)
        if (zrt_tok_is_eog(tok, (int32_t)id)) zrt_sample_ban(smp, (int32_t)id);
}

void gen_close(gen_ctx *g) {
    zrt_tok_free(g->tok);
    g->tok = NULL;
    free(g->reply);
    g->reply = NULL;
    g->reply_len = g->reply_cap = 0;
}

/* Output held back while it could still become a stop string. */
typedef struct holdback {
    char buf[1024];
    size_t len;
    FILE *out;
    gen_ctx *g; /* keeps what is written as the reply */
} holdback;

static void put(holdback *h, const char *p, size_t n) {
    fwrite(p, 1, n, h->out);
    gen_ctx *g = h->g;
    if (g->reply_len + n + 1 > g->reply_cap) {
        size_t cap = g->reply_cap ? g->reply_cap : 256;
        while (cap < g->reply_len + n + 1)
            cap *= 2;
        char *r = realloc(g->reply, cap);
        if (!r) return; /* the reply is kept whole or not grown: the output is what matters */
        g->reply = r, g->reply_cap = cap;
    }
    memcpy(g->reply + g->reply_len, p, n);
    g->reply_len += n;
    g->reply[g->reply_len] = 0;
}

/* Appends text; returns true when a stop string completed (the stop string
 * and what follows it are dropped). Prints what can no longer be a stop. */
static bool emit(holdback *h, const char *text, size_t len, const gen_opts *o) {
    for (size_t i = 0; i < len; i++) {
        if (h->len == sizeof h->buf) { /* longer than any stop: flush the oldest half */
            put(h, h->buf, h->len / 2);
            memmove(h->buf, h->buf + h->len / 2, h->len - h->len / 2);
            h->len -= h->len / 2;
        }
        h->buf[h->len++] = text[i];
        for (int k = 0; k < o->n_stop; k++) {
            size_t n = strlen(o->stop[k]);
            if (n <= h->len && !memcmp(h->buf + h->len - n, o->stop[k], n)) {
                put(h, h->buf, h->len - n);
                h->len = 0;
                return true;
            }
        }
    }
    size_t keep = 0; /* the longest suffix that is a prefix of some stop string */
    for (int k = 0; k < o->n_stop; k++) {
        size_t n = strlen(o->stop[k]);
        for (size_t m = n - 1; m > keep; m--)
            if (m <= h->len && !memcmp(h->buf + h->len - m, o->stop[k], m)) keep = m;
    }
    put(h, h->buf, h->len - keep);
    memmove(h->buf, h->buf + h->len - keep, keep);
    h->len = keep;
    fflush(h->out);
    return false;
}

/* The next token: from the GPU's top-k candidates when the sampler needs no
 * more, else from the whole row of logits (read back only then). */
zstatus gen_pick(zrt *r, zrt_sampler *smp, float *logits, int32_t *id, zdiag *d) {
    zrt_sample_cand top[ZPLAN_TOPK_CAP];
    size_t n = 0;
    zdiag ignore = {0};
    if (zrt_sample_needs_only_top(smp, ZPLAN_TOPK_K) && !zrt_top(r, top, &n, &ignore) && n >= ZPLAN_TOPK_K) {
        *id = zrt_sample_top(smp, top, n);
        return ZOK;
    }
    zstatus s = zrt_last_logits(r, logits, d);
    if (!s) *id = zrt_sample(smp, logits);
    return s;
}

/* Samples and feeds tokens until something ends the generation. */
static zstatus generate(gen_ctx *g, const gen_opts *o, FILE *out, gen_stats *st, zdiag *d) {
    zarena *a = zarena_new();
    zrt_tok_stream *ts = a ? zrt_tok_stream_new(g->tok, 0, a) : NULL;
    holdback h = {.len = 0, .out = out, .g = g};
    g->reply_len = 0;
    if (g->reply) g->reply[0] = 0;
    zstatus s = ts ? ZOK : zdiag_set(d, ZE_NOMEM, "out of memory");
    double t0 = now_s();
    while (!s) {
        if (gen_interrupted) {
            st->why = "interrupted";
            break;
        }
        if (o->n_predict >= 0 && st->n_gen >= o->n_predict) {
            st->why = "token limit";
            break;
        }
        int32_t id;
        if ((s = gen_pick(g->r, g->smp, g->logits, &id, d))) break;
        if (zrt_tok_is_eog(g->tok, id)) {
            st->why = "end of text";
            break;
        }
        zrt_sample_accept(g->smp, id);
        st->n_gen++;
        size_t len;
        const char *text = zrt_tok_stream_push(ts, id, &len);
        if (emit(&h, text, len, o)) {
            st->why = "stop string";
            break;
        }
        if ((uint64_t)zrt_pos(g->r) + 1 > g->ctx) {
            st->why = "context full";
            break;
        }
        s = zrt_eval(g->r, &id, 1, NULL, d);
    }
    size_t len;
    const char *rest = ts ? zrt_tok_stream_flush(ts, &len) : NULL;
    if (rest && strcmp(st->why ? st->why : "", "stop string")) emit(&h, rest, len, o);
    if (strcmp(st->why ? st->why : "", "stop string")) put(&h, h.buf, h.len);
    fflush(out);
    st->gen_s = now_s() - t0;
    zarena_free(a);
    return s;
}

zstatus gen_run(gen_ctx *g, const int32_t *prompt, size_t n, const gen_opts *o, FILE *out, gen_stats *st,
                zdiag *d) {
    memset(st, 0, sizeof *st);
    if ((uint64_t)zrt_pos(g->r) + n + 1 > g->ctx)
        return zdiag_set(d, ZE_INVALID,
                         "the prompt of %zu tokens does not fit: %lld of the context of %u are used "
                         "(give a larger -c)",
                         n, (long long)zrt_pos(g->r), g->ctx);
    for (size_t i = 0; i < n; i++)
        zrt_sample_accept(g->smp, prompt[i]);
    double t0 = now_s();
    zstatus s = n ? zrt_eval(g->r, prompt, (int)n, NULL, d) : ZOK;
    st->prompt_s = now_s() - t0;
    st->n_prompt = (int64_t)n;
    return s ? s : generate(g, o, out, st, d);
}

void gen_print_stats(const gen_stats *st, const zrt *r, FILE *to) {
    fprintf(
        to,
        "\nzinc: prompt %lld tokens, %.1f tok/s | generation %lld tokens, %.1f tok/s | %s | stopped: %s\n",
        (long long)st->n_prompt, st->prompt_s > 0 ? st->n_prompt / st->prompt_s : 0.0, (long long)st->n_gen,
        st->gen_s > 0 ? st->n_gen / st->gen_s : 0.0, zrt_device(r)->name, st->why ? st->why : "error");
}

void gen_check_template(const gen_ctx *g, zrt_chat_format f, const char *prog) {
    const char *m = zrt_chat_marker(f);
    int32_t id = zrt_tok_find(g->tok, m, strlen(m));
    if (id == ZRT_TOK_NULL ||
        !(zrt_tok_attr(g->tok, id) & (ZRT_TOK_ATTR_CONTROL | ZRT_TOK_ATTR_USER_DEFINED)))
        fprintf(stderr,
                "%s: warning: %s is not a special token of this model's vocabulary, so the %s template is "
                "probably not the one it was trained with (see --template)\n",
                prog, m, zrt_chat_name(f));
}

zstatus gen_chat_encode(const gen_ctx *g, zrt_chat_format f, const zrt_chat_msg *m, size_t n,
                        const char *after, unsigned flags, zarena *a, int32_t **ids, size_t *n_ids,
                        zdiag *d) {
    zrt_tok_span *sp = zarena_array(a, n ? n : 1, sizeof *sp);
    char *text;
    size_t len, off = 0, k = 0;
    zstatus s = sp ? zrt_chat_render_spans(f, m, n, true, a, &text, &len, sp, d)
                   : zdiag_set(d, ZE_NOMEM, "out of memory");
    if (s) return s;
    if (after) {
        const char *at = strstr(text, after);
        if (!at) return zdiag_set(d, ZE_INTERNAL, "chat template %s lost the reply", zrt_chat_name(f));
        off = (size_t)(at - text) + strlen(after);
    }
    for (size_t i = 0; i < n; i++) /* the contents after the cut, moved with it */
        if (sp[i].at >= off) sp[k++] = (zrt_tok_span){sp[i].at - off, sp[i].len};
    bool special = flags & ZRT_TOK_PARSE_SPECIAL;
    return zrt_tok_encode_guarded(g->tok, text + off, len - off,
                                  (flags & ZRT_TOK_ADD_SPECIAL) | ZRT_TOK_PARSE_SPECIAL, special ? NULL : sp,
                                  special ? 0 : k, a, ids, n_ids, d);
}

void gen_end_text(FILE *out) {
    if (isatty(fileno(out))) fputc('\n', out); /* the shell's prompt starts on a line of its own */
    fflush(out);
}
