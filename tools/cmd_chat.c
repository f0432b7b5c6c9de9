/* zinc chat: an interactive conversation. The KV cache is kept between
 * turns: each turn feeds only what is new (the end of the last reply's turn
 * and the user's message, in the chat template), never the whole history.
 * When a turn does not fit, the oldest turns are dropped (the system message
 * stays) and what remains is read again, as llama-cli's context shift does.
 * On a terminal, lines are read with libedit: editing, history (Up/Down). */
#include <editline/readline.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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
    "Chats with the model: type a message and press Enter (end a line with \\ to go on\n"
    "on the next one); an empty line does nothing, /clear starts a new conversation,\n"
    "/exit or end of input (Ctrl-D) quits, Ctrl-C stops a reply (at the prompt it discards the\n"
    "line; it never quits). The conversation stays\n"
    "in the KV cache, so each turn only processes the new message; when the context is\n"
    "full, the oldest turns are dropped (the system message stays) and the rest is read\n"
    "again. Up and Down recall earlier lines.\n"
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

/* ---- the conversation ---------------------------------------------------- */

typedef struct turn {
    char *user, *reply;
} turn;

typedef struct chat {
    gen_ctx g;
    zrt_chat_format f;
    const chat_opts *o;
    turn *turns; /* the turns the KV cache holds, oldest first */
    size_t n, cap;
} chat;

static void drop_turns(chat *c, size_t k) {
    if (!k) return;
    for (size_t i = 0; i < k; i++)
        free(c->turns[i].user), free(c->turns[i].reply);
    memmove(c->turns, c->turns + k, (c->n - k) * sizeof *c->turns);
    c->n -= k;
}

static zstatus keep_turn(chat *c, const char *msg, zdiag *d) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        turn *t = realloc(c->turns, cap * sizeof *t);
        if (!t) return zdiag_set(d, ZE_NOMEM, "out of memory");
        c->turns = t, c->cap = cap;
    }
    turn *t = &c->turns[c->n];
    t->user = strdup(msg);
    t->reply = strdup(c->g.reply ? c->g.reply : "");
    if (!t->user || !t->reply) {
        free(t->user), free(t->reply);
        return zdiag_set(d, ZE_NOMEM, "out of memory");
    }
    c->n++;
    return ZOK;
}

#define SENTINEL "\x01zinc-reply\x01"

/* The tokens of the whole conversation from turn `from` on, then msg: what a
 * fresh KV cache is given (system, the kept turns, the new message). */
static zstatus full_ids(const chat *c, size_t from, const char *msg, zarena *a, int32_t **ids, size_t *n,
                        zdiag *d) {
    size_t k = 0, max = 2 * (c->n - from) + 2;
    zrt_chat_msg *m = zarena_array(a, max, sizeof *m);
    if (!m) return zdiag_set(d, ZE_NOMEM, "out of memory");
    if (c->o->system) m[k++] = (zrt_chat_msg){"system", c->o->system};
    for (size_t i = from; i < c->n; i++) {
        m[k++] = (zrt_chat_msg){"user", c->turns[i].user};
        m[k++] = (zrt_chat_msg){"assistant", c->turns[i].reply};
    }
    m[k++] = (zrt_chat_msg){"user", msg};
    unsigned flags = ZRT_TOK_ADD_SPECIAL | (c->o->special ? ZRT_TOK_PARSE_SPECIAL : 0);
    return gen_chat_encode(&c->g, c->f, m, k, NULL, flags, a, ids, n, d);
}

/* The tokens a later turn adds after the reply in the cache: what the
 * template puts after an assistant reply, found by rendering a reply made of
 * a sentinel and keeping what follows it. */
static zstatus next_ids(const chat *c, const char *msg, zarena *a, int32_t **ids, size_t *n, zdiag *d) {
    zrt_chat_msg m[3] = {{"user", "-"}, {"assistant", SENTINEL}, {"user", msg}};
    unsigned flags = c->o->special ? ZRT_TOK_PARSE_SPECIAL : 0;
    return gen_chat_encode(&c->g, c->f, m, 3, SENTINEL, flags, a, ids, n, d);
}

/* Room a turn wants for its reply: -n, at most a quarter of the context. */
static uint64_t reply_room(const chat *c) {
    uint64_t quarter = c->g.ctx / 4 ? c->g.ctx / 4 : 1, n = (uint64_t)c->o->g.n_predict;
    return c->o->g.n_predict < 0 || n > quarter ? quarter : n ? n : 1;
}

/* The tokens of the next turn. When they do not fit beside what the cache
 * holds, the oldest turns are dropped until the conversation fits again
 * (*fresh: the cache must be reset and given all of *ids). ZE_INVALID when
 * the message does not fit even alone. */
static zstatus plan_turn(chat *c, const char *msg, zarena *a, int32_t **ids, size_t *n, bool *fresh,
                         zdiag *d) {
    uint64_t pos = (uint64_t)zrt_pos(c->g.r), room = reply_room(c);
    *fresh = pos == 0;
    zstatus s = *fresh ? full_ids(c, 0, msg, a, ids, n, d) : next_ids(c, msg, a, ids, n, d);
    if (s || (*fresh ? 0 : pos) + *n + room <= c->g.ctx) return s;
    size_t drop = 0;
    for (; drop <= c->n; drop++) {
        if ((s = full_ids(c, drop, msg, a, ids, n, d))) return s;
        if (*n + room <= c->g.ctx || (drop == c->n && *n + 1 <= c->g.ctx)) break;
    }
    if (drop > c->n)
        return zdiag_set(d, ZE_INVALID,
                         "the message needs %zu tokens with the template%s and one for the reply, more "
                         "than the context of %u: not sent (shorten it, or give a larger -c)",
                         *n, c->o->system ? " and the system message" : "", c->g.ctx);
    if (!*fresh)
        fprintf(stderr,
                "zinc chat: the context is full: dropped the oldest %zu turn%s, reading %zu tokens again\n",
                drop, drop == 1 ? "" : "s", *n);
    drop_turns(c, drop);
    *fresh = true;
    return ZOK;
}

static zstatus one_turn(chat *c, const char *msg, zdiag *d) {
    zarena *a = zarena_new();
    size_t n;
    int32_t *ids;
    bool fresh;
    gen_stats st;
    zdiag why = {0};
    if (!a) return zdiag_set(d, ZE_NOMEM, "out of memory");
    zstatus s = plan_turn(c, msg, a, &ids, &n, &fresh, &why);
    if (s == ZE_INVALID) { /* a message too long: said, and the session goes on */
        fprintf(stderr, "zinc chat: %s\n", why.msg);
        zarena_free(a);
        return ZOK;
    }
    if (s) *d = why;
    if (!s && fresh) zrt_reset(c->g.r);
    /* gen_interrupted is not cleared here: a Ctrl-C typed just after Enter,
     * while libedit was still handing the line over, stops this reply. */
    if (!s) s = gen_run(&c->g, ids, n, &c->o->g, stdout, &st, d);
    if (!s) s = keep_turn(c, msg, d);
    if (!s) {
        fputc('\n', stdout);
        if (!c->o->g.quiet) gen_print_stats(&st, c->g.r, stderr);
    }
    zarena_free(a);
    return s;
}

/* ---- reading lines ------------------------------------------------------- */

/* libedit's reads: a byte at a time, watching for Ctrl-C. A SIGINT that comes
 * while libedit is not inside read() (just before it), or that a driver
 * thread takes, only sets the flag, so the flag is checked between short
 * waits; EOF then ends the prompt. The terminal is read through a descriptor
 * of its own opened O_NONBLOCK: Ctrl-C flushes the terminal's input, and a
 * blocking read() after poll() saw the flushed bytes would wait for the next
 * key with the flag set (zinc chat then ignored that Ctrl-C). */
static int getc_or_interrupt(FILE *f) {
    (void)f;
    static int fd = -1;
    if (fd < 0 && (fd = open(ttyname(0) ? ttyname(0) : "/dev/tty", O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
        fd = 0;
    while (!gen_interrupted) {
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, 100);
        if (r < 0 && errno != EINTR) return EOF;
        unsigned char c;
        ssize_t n = r > 0 ? read(fd, &c, 1) : -1;
        /* A NUL is a Ctrl-D that came while the terminal was still in cooked
         * mode (libedit had not yet set raw mode, e.g. on a loaded machine):
         * Linux's line discipline stores that end-of-file as a NUL byte, which
         * a read in raw mode then returns. Handed to libedit as a NUL it
         * entered the line, and every later Ctrl-D only beeped; it is Ctrl-D. */
        if (n == 1) return c ? c : 4;
        if (r > 0 && (n == 0 || (errno != EAGAIN && errno != EINTR))) return EOF;
    }
    return EOF;
}

/* One line without its newline (malloc'd), or NULL at the end of input or
 * (*cancelled) on Ctrl-C. On a terminal libedit reads it: editing, and
 * history that Up recalls. Ctrl-C at the prompt discards the line but never
 * ends the session: it used to quit, and a Ctrl-C meant for a reply that had
 * just ended, or typed after a line that a loaded machine had not read yet
 * (the terminal echoes it before libedit takes the terminal, and Ctrl-C
 * flushes it), closed the chat (docs/chat-ctrl-c.md). */
static char *read_line(const char *prompt, bool *cancelled) {
    if (isatty(0)) {
        rl_getc_function = getc_or_interrupt;
        /* libedit's own signal handlers stay out: it installs them for each
         * line and, leaving, sets its EditLine pointer to NULL before putting
         * the previous handlers back, so a SIGINT that a Vulkan driver thread
         * took in between ran its handler on that NULL (CI, 2026-12-04: SEGV
         * in libedit's sig_handler, round 7 of chat_ctrl_c_never_closes_the_
         * session under ASan). zinc's own SIGINT handler only sets a flag,
         * which getc_or_interrupt watches; libedit still sets and restores the
         * terminal's mode around each line. */
        rl_catch_signals = 0;
        fflush(stdout);
        char *line = readline(prompt);
        *cancelled = !line && gen_interrupted;
        if (line && *line) add_history(line);
        return line;
    }
    size_t cap = 0;
    char *line = NULL;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    return line;
}

/* A message: lines that end in a backslash go on on the next line. A Ctrl-C
 * on any of them discards the whole message (NULL, *cancelled). */
static char *read_message(bool *cancelled) {
    char *msg = read_line("> ", cancelled);
    size_t len = msg ? strlen(msg) : 0;
    while (msg && len && msg[len - 1] == '\\') {
        msg[len - 1] = '\n';
        char *more = read_line(". ", cancelled);
        if (*cancelled) {
            free(msg);
            return NULL;
        }
        if (!more) break;
        size_t m = strlen(more);
        char *joined = realloc(msg, len + m + 1);
        if (!joined) {
            free(more);
            break;
        }
        memcpy(joined + len, more, m + 1);
        msg = joined, len += m;
        free(more);
    }
    return msg;
}

static void clear(chat *c) {
    drop_turns(c, c->n);
    zrt_reset(c->g.r);
    fprintf(stderr, "zinc chat: a new conversation\n");
}

static zstatus converse(zrt *r, const chat_opts *o, zdiag *d) {
    zarena *a = zarena_new();
    chat c = {.o = o};
    zstatus s = a ? gen_open(&c.g, r, &o->g, a, d) : zdiag_set(d, ZE_NOMEM, "out of memory");
    if (!s) s = zrt_chat_for_gguf(zrt_gguf(r), o->tmpl, &c.f, d);
    if (!s) {
        gen_check_template(&c.g, c.f, "zinc chat");
        fprintf(stderr,
                "zinc chat: %s on %s, %s template, context %u; /clear starts over, /exit or Ctrl-D quits\n",
                o->m.path, zrt_device(r)->name, zrt_chat_name(c.f), c.g.ctx);
    }
    gen_install_sigint();
    while (!s) {
        gen_interrupted = 0;
        if (isatty(0)) fputc('\n', stdout);
        bool cancelled = false;
        char *line = read_message(&cancelled);
        if (cancelled) {
            fprintf(stderr, "\nzinc chat: Ctrl-C discarded the line; /exit or Ctrl-D quits\n");
            continue;
        }
        if (!line || !strcmp(line, "/exit")) {
            if (!line && isatty(0)) fputc('\n', stdout); /* Ctrl-D: the shell's prompt on a line of its own */
            free(line);
            break;
        }
        if (!strcmp(line, "/clear"))
            clear(&c);
        else if (*line)
            s = one_turn(&c, line, d);
        free(line);
    }
    drop_turns(&c, c.n);
    free(c.turns);
    if (a) gen_close(&c.g);
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
