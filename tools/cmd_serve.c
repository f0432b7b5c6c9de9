/* zinc serve: an OpenAI-compatible HTTP server (docs/server.md). It listens
 * first, so that /health answers 503 while the weights load, then opens the
 * model and its slots; SIGINT or SIGTERM stops it (running requests end
 * with an error). */
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "gen.h"
#include "model.h"
#include "serve_http.h"

static const char *const usage_head =
    "usage: zinc serve MODEL.gguf|PLAN.zplan [--host ADDR] [--port N] [--parallel N] [options]\n"
    "\n"
    "Serves the model over HTTP with OpenAI's API: POST /v1/chat/completions and\n"
    "/v1/completions (streaming with \"stream\": true), GET /v1/models, /health, /metrics,\n"
    "POST /tokenize and /detokenize, and a chat page at / (docs/server.md).\n"
    "\n"
    "  --host ADDR          address to listen on (default 127.0.0.1: this machine only)\n"
    "  --port N             port (default 8080; 0: any free one, printed at start)\n"
    "  -np, --parallel N    slots: requests generating at once, each with its own KV cache (default 4);\n"
    "                       they decode one at a time, each step the fast single-sequence decode\n"
    "  --batch              decode every generating slot in one batch step instead: a GGUF is\n"
    "                       compiled with zincc --parallel N (a plan must have been). Same tokens\n"
    "                       alone or batched; faster in all from about three generating slots, half\n"
    "                       the rate for one alone (on an H200, the 8B: 1 stream 153 tok/s, 8 streams\n"
    "                       587 in all, against 299 for one stream without it; docs/server.md)\n"
    "  --ctx-per-slot N     positions per slot, prompt and reply (default: the plan's context;\n"
    "                       with a GGUF the plan is compiled for it)\n"
    "  --api-key KEY        require 'Authorization: Bearer KEY' (default: $ZINC_API_KEY, else none)\n"
    "  --alias NAME         the model's name in the API (default: the file's name)\n"
    "  --template NAME      chat template: chatml or llama3 (default: from the model's metadata)\n"
    "  --queue N            requests that may wait for a slot before 503 (default 64)\n"
    "  --timeout S          close a connection idle for S seconds (default 30)\n"
    "  --max-body BYTES     largest request body (default 4194304)\n"
    "  --max-connections N  connections at once (default 256)\n"
    "  --verbose            print libmicrohttpd's messages\n"
    "\n"
    "model:\n";

typedef struct serve_opts {
    model_opts m;
    const char *host, *api_key, *alias, *tmpl;
    int64_t port, parallel, queue, timeout, max_body, max_conn;
    bool batch; /* --batch: one batch step for every generating slot */
    bool verbose;
} serve_opts;

static int parse_num(int argc, char **argv, int *i, const char *name, int64_t lo, int64_t hi, int64_t *out,
                     int *rc) {
    const char *v = NULL;
    bool miss = false;
    if (!cli_opt(argc, argv, i, name, &v, &miss)) return 0;
    if (miss || !cli_parse_i64(v, lo, hi, out))
        *rc = cli_usage_error("zinc serve", "%s expects a number in %lld..%lld, not '%s'", name,
                              (long long)lo, (long long)hi, v ? v : "");
    return 1;
}

static int parse_nums(int argc, char **argv, int *i, serve_opts *o, int *rc) {
    return parse_num(argc, argv, i, "--port", 0, 65535, &o->port, rc) ||
           parse_num(argc, argv, i, "--parallel", 1, 256, &o->parallel, rc) ||
           parse_num(argc, argv, i, "-np", 1, 256, &o->parallel, rc) ||
           parse_num(argc, argv, i, "--ctx-per-slot", 2, 1 << 24, &o->m.ctx, rc) ||
           parse_num(argc, argv, i, "--queue", 0, 1 << 20, &o->queue, rc) ||
           parse_num(argc, argv, i, "--timeout", 1, 86400, &o->timeout, rc) ||
           parse_num(argc, argv, i, "--max-body", 1024, (int64_t)1 << 30, &o->max_body, rc) ||
           parse_num(argc, argv, i, "--max-connections", 1, 65536, &o->max_conn, rc);
}

static int parse(int argc, char **argv, serve_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        bool miss = false;
        int rc = 0;
        zdiag d = {0};
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_head, stdout);
            fputs(model_flags_help, stdout);
            exit(0);
        }
        if (parse_nums(argc, argv, &i, o, &rc)) {
            if (rc) return rc;
            continue;
        }
        if (cli_opt(argc, argv, &i, "--host", &v, &miss))
            o->host = v;
        else if (cli_opt(argc, argv, &i, "--api-key", &v, &miss))
            o->api_key = v;
        else if (cli_opt(argc, argv, &i, "--alias", &v, &miss))
            o->alias = v;
        else if (cli_opt(argc, argv, &i, "--template", &v, &miss))
            o->tmpl = v;
        else if (!strcmp(argv[i], "--verbose"))
            o->verbose = true;
        else if (!strcmp(argv[i], "--batch"))
            o->batch = true;
        else {
            int g = model_parse_arg(&o->m, argc, argv, &i, &d);
            if (g < 0) return cli_usage_error("zinc serve", "%s", d.msg);
            if (g == 0 && (argv[i][0] == '-' || o->m.path)) return cli_unexpected("zinc serve", argv[i]);
            if (g == 0) o->m.path = argv[i];
        }
        if (miss) return cli_usage_error("zinc serve", "%s needs a value", argv[i]);
    }
    if (o->api_key && !*o->api_key) return cli_usage_error("zinc serve", "--api-key needs a non-empty key");
    /* --batch: a GGUF compiles with zincc --parallel N, and the slots decode in
     * one batch step; without it, one at a time with the decode schedule */
    o->m.parallel = o->batch ? o->parallel : 0;
    return o->m.path ? 0 : cli_usage_error("zinc serve", "no model given (a MODEL.gguf or a PLAN.zplan)");
}

zstatus srv_http_addr(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len, zdiag *d) {
    struct addrinfo hints = {.ai_flags = AI_NUMERICSERV | AI_PASSIVE, .ai_socktype = SOCK_STREAM}, *res;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int e = getaddrinfo(host, ps, &hints, &res);
    if (e)
        return zdiag_set(d, ZE_INVALID, "--host %s: %s (expected an address such as 127.0.0.1)", host,
                         gai_strerror(e));
    memset(ss, 0, sizeof *ss);
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return ZOK;
}

/* ---- loading, in a thread of its own while /health says 503 --------------- */

typedef struct loader {
    serve_opts *o;
    srv_http *h;
    zrt *r;
    zstatus status;
    zdiag d;
    pthread_t main;
    bool done;
} loader;

static const char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static zstatus load(loader *l) {
    srv_http *h = l->h;
    zdiag *d = &l->d;
    zstatus s = model_open("zinc serve", &l->o->m, &l->r, d);
    if (!s) s = zrt_tok_load(zrt_gguf(l->r), &h->tok, d);
    if (!s) s = zrt_chat_for_gguf(zrt_gguf(l->r), l->o->tmpl, &h->fmt, d);
    if (s) return s;
    int rows = l->o->batch ? zrt_batch_rows(l->r) : 0;
    if (rows && rows < l->o->parallel)
        return zdiag_set(d, ZE_INVALID,
                         "--parallel %lld: the plan's batch schedule takes at most %d sequences: expected "
                         "--parallel <= %d, or a plan compiled with zincc --parallel %lld",
                         (long long)l->o->parallel, rows, rows, (long long)l->o->parallel);
    if (l->o->batch && !zrt_batch_rows(l->r))
        return zdiag_set(d, ZE_INVALID,
                         "--batch: the plan has no batch decode schedule: expected a plan compiled with "
                         "zincc --parallel %lld, or serve without --batch (the slots then decode one at a time)",
                         (long long)l->o->parallel);
    h->n_vocab = zrt_plan(l->r)->n_vocab;
    h->ctx = model_ctx(&l->o->m, l->r);
    srv_opts so = {.parallel = (int)l->o->parallel, .ctx = h->ctx, .queue_max = (int)l->o->queue,
                   .batch = l->o->batch};
    srv *sv;
    if ((s = srv_open(l->r, h->tok, &so, &sv, d))) return s;
    __atomic_store_n(&h->s, sv, __ATOMIC_RELEASE);
    fprintf(stderr, "zinc serve: %s on %s, %d slots of %u positions (%s), %s template: ready\n", h->model,
            zrt_device(l->r)->name, h->parallel, h->ctx, l->o->batch ? "batched" : "one at a time",
            zrt_chat_name(h->fmt));
    return ZOK;
}

static void *load_thread(void *arg) {
    loader *l = arg;
    l->status = load(l);
    __atomic_store_n(&l->done, true, __ATOMIC_RELEASE);
    if (l->status) pthread_kill(l->main, SIGUSR1); /* wakes main's sigwait */
    return NULL;
}

static int run(serve_opts *o) {
    srv_http h = {.host = o->host,
                  .port = (int)o->port,
                  .api_key = o->api_key,
                  .max_body = (size_t)o->max_body,
                  .timeout_s = (int)o->timeout,
                  .max_connections = (int)o->max_conn,
                  .verbose = o->verbose,
                  .model = o->alias ? o->alias : base_name(o->m.path),
                  .parallel = (int)o->parallel,
                  .created = (int64_t)time(NULL)};
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT), sigaddset(&sigs, SIGTERM), sigaddset(&sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* every thread started from here on inherits it */
    signal(SIGPIPE, SIG_IGN);
    zdiag d = {0};
    zstatus s = srv_http_start(&h, &d);
    if (s) return cli_fail("zinc serve", &d);
    fprintf(stderr, "zinc serve: listening on http://%s%s%s:%u (loading %s)\n",
            strchr(o->host, ':') ? "[" : "", o->host, strchr(o->host, ':') ? "]" : "", h.bound_port,
            o->m.path);
    loader l = {.o = o, .h = &h, .main = pthread_self()};
    pthread_t t;
    if (pthread_create(&t, NULL, load_thread, &l)) {
        srv_http_stop(&h);
        return cli_fail("zinc serve", &(zdiag){ZE_NOMEM, "cannot start a thread"});
    }
    int sig = 0;
    sigwait(&sigs, &sig);
    if (!__atomic_load_n(&l.done, __ATOMIC_ACQUIRE)) { /* stopped while loading: nothing to keep */
        fprintf(stderr, "zinc serve: stopped while loading\n");
        _exit(128 + sig);
    }
    pthread_join(t, NULL);
    if (!l.status) fprintf(stderr, "zinc serve: stopping (signal %d)\n", sig);
    srv_http_stop(&h);
    srv_close(h.s);
    zrt_tok_free(h.tok);
    zrt_close(l.r);
    return l.status ? cli_fail("zinc serve", &l.d) : 0;
}

int cmd_serve(int argc, char **argv) {
    serve_opts o = {.host = "127.0.0.1",
                    .port = 8080,
                    .parallel = 4,
                    .queue = 64,
                    .timeout = 30,
                    .max_body = 4 << 20,
                    .max_conn = 256,
                    .api_key = getenv("ZINC_API_KEY")};
    if (o.api_key && !*o.api_key) o.api_key = NULL;
    int rc = parse(argc, argv, &o);
    return rc ? rc : run(&o);
}
