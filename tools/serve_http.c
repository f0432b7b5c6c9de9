/* zinc serve's HTTP side, on libmicrohttpd: one thread per connection (so a
 * handler may wait for its tokens), an idle timeout and a connection limit
 * against slow clients, a body limit, and the endpoints of docs/server.md.
 *
 * libmicrohttpd is opened with dlopen when the server starts, so that the
 * zinc binary runs on machines without it (the other commands need it not);
 * `zinc serve` there says what to install. */
#include <dlfcn.h>
#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "../runtime/tokenizer.h"
#include "gen.h"
#include "serve_http.h"

/* ---- libmicrohttpd, opened at run time ------------------------------------ */

#define MHD_FUNCS(X)                                                                                         \
    X(MHD_start_daemon)                                                                                      \
    X(MHD_stop_daemon)                                                                                       \
    X(MHD_get_daemon_info)                                                                                   \
    X(MHD_get_connection_info)                                                                               \
    X(MHD_lookup_connection_value)                                                                           \
    X(MHD_create_response_from_buffer)                                                                       \
    X(MHD_create_response_from_callback)                                                                     \
    X(MHD_add_response_header)                                                                               \
    X(MHD_queue_response)                                                                                    \
    X(MHD_destroy_response)

#define X(f) static __typeof__(f) *p_##f;
MHD_FUNCS(X)
#undef X

static zstatus load_mhd(zdiag *d) {
    static void *lib;
    if (lib) return ZOK;
    lib = dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return zdiag_set(d, ZE_UNSUPPORTED,
                         "zinc serve needs libmicrohttpd, which is not installed (%s): install it "
                         "(apt-get install libmicrohttpd12)",
                         dlerror());
#define X(f)                                                                                                 \
    if (!(p_##f = (__typeof__(f) *)dlsym(lib, #f)))                                                          \
        return zdiag_set(d, ZE_UNSUPPORTED,                                                                  \
                         "libmicrohttpd.so.12 lacks %s: expected version 0.9.75 or later", #f);
    MHD_FUNCS(X)
#undef X
    return ZOK;
}

/* ---- requests ------------------------------------------------------------ */

/* A request being read: its body, up to the limit. */
typedef struct request {
    char *body;
    size_t len, cap;
    bool too_big;
} request;

typedef struct reply {
    int status;
    char *body; /* malloc'd */
    const char *type;
    bool retry_after;
} reply;

static reply error_reply(const srv_err *e) {
    char *b = srv_error_body(e);
    return (reply){e->status, b, "application/json", e->status == 503};
}

static reply fail(int status, const char *type, const char *code, const char *msg) {
    srv_err e;
    srv_fail(&e, status, type, code, "%s", msg);
    return error_reply(&e);
}

static reply json_reply(json_t *v) {
    char *b = srv_dump(v);
    return b ? (reply){200, b, "application/json", false} : fail(500, "server_error", NULL, "out of memory");
}

static srv *ready_srv(srv_http *h) {
    return __atomic_load_n(&h->s, __ATOMIC_ACQUIRE);
}

static void next_ident(srv_http *h, srv_kind kind, srv_ident *id) {
    unsigned long long n = __atomic_add_fetch(&h->next_id, 1, __ATOMIC_RELAXED);
    snprintf(id->id, sizeof id->id, "%s-%llu", kind == SRV_CHAT ? "chatcmpl" : "cmpl", n);
    id->created = (int64_t)time(NULL);
    id->model = h->model;
}

/* Whether the client has gone: its end of the socket is closed (a read
 * would return end of file) or broken. A client that only shut down its
 * sending side counts as gone too: nobody would read the answer. */
static bool peer_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = p_MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return true;
    struct pollfd p = {ci->connect_fd, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* The prompt's tokens: a chat rendered with the model's template (what the
 * messages say stays text), or a completion's text (special tokens parsed,
 * as llama-server does: the client writes the whole prompt). */
static bool encode(srv_http *h, const srv_req *rq, zarena *a, int32_t **ids, size_t *n, srv_err *e) {
    zdiag d = {0};
    zstatus s;
    if (rq->kind == SRV_CHAT) {
        gen_ctx g = {.tok = h->tok};
        s = gen_chat_encode(&g, h->fmt, rq->msgs, rq->n_msgs, NULL, ZRT_TOK_ADD_SPECIAL, a, ids, n, &d);
    } else
        s = zrt_tok_encode(h->tok, rq->prompt, rq->prompt_len, ZRT_TOK_ADD_SPECIAL | ZRT_TOK_PARSE_SPECIAL, a,
                           ids, n, &d);
    if (s == ZE_NOMEM) return srv_fail(e, 500, "server_error", NULL, "out of memory");
    if (s) return srv_fail(e, 400, "invalid_request_error", "invalid_prompt", "the prompt: %s", d.msg);
    return true;
}

/* A non-streaming generation: waits for the whole text, watching the client. */
static reply complete(srv_http *h, struct MHD_Connection *c, srv_job *j, srv_kind kind) {
    size_t taken = 0, len = 0;
    char *text = NULL;
    srv_news n;
    for (;;) {
        srv_wait(j, 100, &taken, &n);
        if (n.text) {
            char *t = realloc(text, len + n.len + 1);
            if (t) memcpy(t + len, n.text, n.len + 1), len += n.len, text = t;
            free(n.text);
        }
        if (n.done || h->stopping || peer_gone(c)) break;
    }
    reply r;
    if (!n.done) /* the client went away, or the server stops: nobody reads this */
        r = fail(499, "server_error", "cancelled", "the request was cancelled");
    else if (n.error)
        r = fail(500, "server_error", "generation_failed", n.error);
    else {
        srv_ident id;
        next_ident(h, kind, &id);
        srv_result res = {text ? text : "", len, n.finish, n.n_prompt, n.n_gen};
        char *b = srv_response_body(kind, &id, &res);
        r = b ? (reply){200, b, "application/json", false} : fail(500, "server_error", NULL, "out of memory");
    }
    free(text);
    srv_release(j);
    return r;
}

/* ---- streaming ----------------------------------------------------------- */

typedef struct stream {
    srv_http *h;
    struct MHD_Connection *c;
    srv_job *job;
    srv_kind kind;
    srv_ident id;
    bool include_usage, opened, finished;
    size_t taken;
    char *pend; /* events not yet handed to libmicrohttpd */
    size_t pend_len, pend_off;
} stream;

static void pend(stream *st, char *ev) {
    if (!ev) return;
    size_t n = strlen(ev);
    char *p = realloc(st->pend, st->pend_len + n);
    if (p) memcpy(p + st->pend_len, ev, n), st->pend = p, st->pend_len += n;
    free(ev);
}

static void pend_end(stream *st, const srv_news *n) {
    if (n->error) {
        srv_err e;
        srv_fail(&e, 500, "server_error", "generation_failed", "%s", n->error);
        char *b = srv_error_body(&e), *ev = b ? malloc(strlen(b) + 9) : NULL;
        if (ev) sprintf(ev, "data: %s\n\n", b);
        free(b);
        pend(st, ev);
    } else {
        pend(st, srv_chunk_event(st->kind, &st->id, NULL, 0, n->finish));
        if (st->include_usage) pend(st, srv_usage_event(st->kind, &st->id, n->n_prompt, n->n_gen));
    }
    pend(st, strdup("data: [DONE]\n\n"));
    st->finished = true;
}

/* libmicrohttpd asks for the next bytes of the stream: events as the
 * tokens come. It runs in the connection's own thread, so it may wait. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream *st = cls;
    (void)pos;
    for (;;) {
        if (st->pend_off < st->pend_len) {
            size_t n = st->pend_len - st->pend_off < max ? st->pend_len - st->pend_off : max;
            memcpy(buf, st->pend + st->pend_off, n);
            st->pend_off += n;
            if (st->pend_off == st->pend_len) st->pend_off = st->pend_len = 0;
            return (ssize_t)n;
        }
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        if (!st->opened && st->kind == SRV_CHAT) {
            st->opened = true;
            pend(st, srv_chunk_event(st->kind, &st->id, NULL, 0, NULL));
            continue;
        }
        if (st->h->stopping || peer_gone(st->c)) return MHD_CONTENT_READER_END_WITH_ERROR;
        srv_news n;
        srv_wait(st->job, 100, &st->taken, &n);
        if (n.text) pend(st, srv_chunk_event(st->kind, &st->id, n.text, n.len, NULL));
        free(n.text);
        if (n.done) pend_end(st, &n);
    }
}

static void stream_free(void *cls) {
    stream *st = cls;
    srv_release(st->job); /* cancels it when the client left early */
    free(st->pend);
    free(st);
}

/* ---- endpoints ------------------------------------------------------------- */

static reply generate(srv_http *h, struct MHD_Connection *c, srv_kind kind, const request *rq,
                      struct MHD_Response **streamed) {
    srv *s = ready_srv(h);
    zarena *a = zarena_new();
    srv_req r;
    srv_err e;
    int32_t *ids;
    size_t n;
    srv_limits lim = {h->model};
    srv_job *j = NULL;
    if (!a) return fail(500, "server_error", NULL, "out of memory");
    if (srv_parse_request(kind, rq->body ? rq->body : "", rq->len, &lim, a, &r, &e) &&
        encode(h, &r, a, &ids, &n, &e))
        j = srv_submit(s, ids, n, &r, &e);
    zarena_free(a); /* the job holds copies */
    if (!j) return error_reply(&e);
    if (!r.stream) return complete(h, c, j, kind);
    stream *st = calloc(1, sizeof *st);
    if (st) *st = (stream){.h = h, .c = c, .job = j, .kind = kind, .include_usage = r.include_usage};
    if (st) next_ident(h, kind, &st->id);
    *streamed =
        st ? p_MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free)
           : NULL;
    if (*streamed) return (reply){200, NULL, "text/event-stream", false};
    free(st);
    srv_release(j);
    return fail(500, "server_error", NULL, "out of memory");
}

static reply tokenize(srv_http *h, const request *rq) {
    zarena *a = zarena_new();
    srv_tok_req t;
    srv_err e;
    int32_t *ids;
    size_t n;
    zdiag d = {0};
    reply r;
    if (!a) return fail(500, "server_error", NULL, "out of memory");
    if (!srv_parse_tokenize(rq->body ? rq->body : "", rq->len, a, &t, &e))
        r = error_reply(&e);
    else if (zrt_tok_encode(h->tok, t.content, t.content_len,
                            ZRT_TOK_PARSE_SPECIAL | (t.add_special ? ZRT_TOK_ADD_SPECIAL : 0), a, &ids, &n,
                            &d))
        r = fail(400, "invalid_request_error", "invalid_content", d.msg);
    else {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            const char *piece;
            size_t len = zrt_tok_piece(h->tok, ids[i], true, &piece);
            json_array_append_new(
                arr, t.with_pieces ? json_pack("{s:i, s:o}", "id", ids[i], "piece", zjson_strn(piece, len))
                                   : json_integer(ids[i]));
        }
        r = json_reply(json_pack("{s:o}", "tokens", arr));
    }
    zarena_free(a);
    return r;
}

static reply detokenize(srv_http *h, const request *rq) {
    zarena *a = zarena_new();
    srv_tok_req t;
    srv_err e;
    char *text;
    size_t len;
    zdiag d = {0};
    reply r;
    if (!a) return fail(500, "server_error", NULL, "out of memory");
    if (!srv_parse_detokenize(rq->body ? rq->body : "", rq->len, a, &t, &e))
        r = error_reply(&e);
    else if (zrt_tok_detokenize(h->tok, t.tokens, t.n_tokens, 0, a, &text, &len, &d))
        r = fail(400, "invalid_request_error", "invalid_tokens", d.msg);
    else
        r = json_reply(json_pack("{s:o}", "content", zjson_strn(text, len)));
    zarena_free(a);
    return r;
}

static reply models(srv_http *h) {
    return json_reply(json_pack(
        "{s:s, s:[{s:o, s:s, s:I, s:s, s:{s:I, s:I, s:i}}]}", "object", "list", "data", "id",
        zjson_str(h->model), "object", "model", "created", (json_int_t)h->created, "owned_by", "zinc", "meta",
        "n_vocab", (json_int_t)h->n_vocab, "n_ctx_slot", (json_int_t)h->ctx, "slots", h->parallel));
}

/* Compares the key in constant time, so that its bytes cannot be timed. */
static bool key_ok(srv_http *h, struct MHD_Connection *c) {
    if (!h->api_key) return true;
    const char *auth = p_MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    size_t n = strlen(h->api_key), m = auth ? strlen(auth) : 0;
    if (m != n + 7 || strncmp(auth, "Bearer ", 7)) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(auth[7 + i] ^ h->api_key[i]);
    return diff == 0;
}

typedef enum route_kind {
    R_PAGE,
    R_HEALTH,
    R_MODELS,
    R_METRICS,
    R_TOKENIZE,
    R_DETOKENIZE,
    R_CHAT,
    R_COMPLETION
} route_kind;

static const struct route {
    const char *path, *method;
    route_kind kind;
    bool open; /* answered without the API key */
} routes[] = {
    {"/", "GET", R_PAGE, true},
    {"/index.html", "GET", R_PAGE, true},
    {"/health", "GET", R_HEALTH, true},
    {"/v1/health", "GET", R_HEALTH, true},
    {"/v1/models", "GET", R_MODELS, false},
    {"/models", "GET", R_MODELS, false},
    {"/metrics", "GET", R_METRICS, false},
    {"/tokenize", "POST", R_TOKENIZE, false},
    {"/detokenize", "POST", R_DETOKENIZE, false},
    {"/v1/chat/completions", "POST", R_CHAT, false},
    {"/chat/completions", "POST", R_CHAT, false},
    {"/v1/completions", "POST", R_COMPLETION, false},
    {"/completions", "POST", R_COMPLETION, false},
};

static const struct route *find_route(const char *url, const char *method, bool *wrong_method) {
    *wrong_method = false;
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++)
        if (!strcmp(url, routes[i].path)) {
            if (!strcmp(method, routes[i].method) ||
                (!strcmp(method, "HEAD") && !strcmp(routes[i].method, "GET")))
                return &routes[i];
            *wrong_method = true;
        }
    return NULL;
}

static reply route_request(srv_http *h, struct MHD_Connection *c, const struct route *rt, const request *rq,
                           struct MHD_Response **streamed) {
    if (rt->kind == R_PAGE) {
        char *b = malloc(srv_page_len + 1);
        if (b) memcpy(b, srv_page, srv_page_len + 1);
        return b ? (reply){200, b, "text/html; charset=utf-8", false}
                 : fail(500, "server_error", NULL, "out of memory");
    }
    if (!ready_srv(h)) {
        srv_err e;
        srv_fail(&e, 503, "unavailable_error", "loading", "the model is loading: try again in a moment");
        return error_reply(&e);
    }
    if (!rt->open && !key_ok(h, c))
        return fail(401, "authentication_error", "invalid_api_key",
                    "missing or wrong API key: expected the header 'Authorization: Bearer KEY' with the key "
                    "given to zinc serve --api-key");
    if (rq->too_big) {
        char msg[160];
        snprintf(msg, sizeof msg, "the body is larger than the limit of %zu bytes (zinc serve --max-body)",
                 h->max_body);
        return fail(413, "invalid_request_error", "body_too_large", msg);
    }
    switch (rt->kind) {
    case R_HEALTH: return json_reply(json_pack("{s:s}", "status", "ok"));
    case R_MODELS: return models(h);
    case R_METRICS: {
        char *m = srv_metrics(ready_srv(h));
        return m ? (reply){200, m, "text/plain; version=0.0.4", false}
                 : fail(500, "server_error", NULL, "out of memory");
    }
    case R_TOKENIZE: return tokenize(h, rq);
    case R_DETOKENIZE: return detokenize(h, rq);
    case R_CHAT: return generate(h, c, SRV_CHAT, rq, streamed);
    case R_COMPLETION: return generate(h, c, SRV_COMPLETION, rq, streamed);
    default: return fail(500, "server_error", NULL, "no handler");
    }
}

static enum MHD_Result send_reply(srv_http *h, struct MHD_Connection *c, const char *endpoint, reply r,
                                  struct MHD_Response *resp) {
    if (!resp && r.body)
        resp = p_MHD_create_response_from_buffer(strlen(r.body), r.body, MHD_RESPMEM_MUST_FREE);
    else if (!resp)
        resp = p_MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    else
        free(r.body);
    if (!resp) {
        free(r.body);
        return MHD_NO;
    }
    p_MHD_add_response_header(resp, "Content-Type", r.type);
    p_MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    if (r.retry_after) p_MHD_add_response_header(resp, "Retry-After", "1");
    if (r.status == 401 && h->api_key) p_MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    if (!strcmp(r.type, "text/event-stream")) p_MHD_add_response_header(resp, "Cache-Control", "no-cache");
    srv *s = ready_srv(h);
    if (s) srv_count_request(s, endpoint, r.status);
    enum MHD_Result ok = r.status == 499 ? MHD_NO : p_MHD_queue_response(c, (unsigned)r.status, resp);
    p_MHD_destroy_response(resp);
    return ok;
}

/* Reads the body (up to the limit; past it the rest is read and dropped, so
 * that the 413 reaches the client), then answers. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *size, void **ctx) {
    srv_http *h = cls;
    (void)version;
    request *rq = *ctx;
    if (!rq) {
        if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
        *ctx = rq;
        const char *cl = p_MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > h->max_body) rq->too_big = true;
        return MHD_YES;
    }
    if (*size) {
        if (!rq->too_big && rq->len + *size > h->max_body) rq->too_big = true;
        if (!rq->too_big) {
            if (rq->len + *size + 1 > rq->cap) {
                size_t cap = rq->cap ? rq->cap : 4096;
                while (cap < rq->len + *size + 1)
                    cap *= 2;
                char *b = realloc(rq->body, cap);
                if (!b) return MHD_NO;
                rq->body = b, rq->cap = cap;
            }
            memcpy(rq->body + rq->len, data, *size);
            rq->len += *size;
            rq->body[rq->len] = 0;
        }
        *size = 0;
        return MHD_YES;
    }
    if (!strcmp(method, "OPTIONS")) { /* a browser's CORS preflight */
        reply r = {204, NULL, "text/plain", false};
        struct MHD_Response *resp = p_MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        if (resp)
            p_MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        if (resp) p_MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        return send_reply(h, c, "options", r, resp);
    }
    bool wrong_method;
    const struct route *rt = find_route(url, method, &wrong_method);
    if (!rt) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 wrong_method ? "%.16s is not allowed on %.100s"
                              : "no endpoint %.16s %.100s (see docs/server.md)",
                 method, url);
        return send_reply(h, c, "other",
                          fail(wrong_method ? 405 : 404, "invalid_request_error", "not_found", msg), NULL);
    }
    struct MHD_Response *streamed = NULL;
    reply r = route_request(h, c, rt, rq, &streamed);
    return send_reply(h, c, rt->path, r, streamed);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **ctx,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    request *rq = *ctx;
    if (rq) free(rq->body);
    free(rq);
    *ctx = NULL;
}

static void on_log(void *cls, const char *fmt, va_list ap) {
    srv_http *h = cls;
    if (!h->verbose) return;
    fputs("zinc serve: libmicrohttpd: ", stderr);
    vfprintf(stderr, fmt, ap);
}

zstatus srv_http_start(srv_http *h, zdiag *d) {
    zstatus s = load_mhd(d);
    if (s) return s;
    struct sockaddr_storage ss;
    socklen_t len;
    if ((s = srv_http_addr(h->host, h->port, &ss, &len, d))) return s;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_USE_ERROR_LOG | (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    h->daemon = p_MHD_start_daemon(
        flags, h->port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, &ss, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)h->timeout_s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)h->max_connections,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
        MHD_OPTION_EXTERNAL_LOGGER, on_log, h, MHD_OPTION_END);
    if (!h->daemon)
        return zdiag_set(d, ZE_IO,
                         "cannot listen on %s port %d (in use, or not an address of this machine?): choose "
                         "another with --host/--port",
                         h->host, h->port);
    const union MHD_DaemonInfo *di = p_MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->bound_port = di ? di->port : (uint16_t)h->port;
    return ZOK;
}

void srv_http_stop(srv_http *h) {
    h->stopping = 1;
    if (h->daemon) p_MHD_stop_daemon(h->daemon);
    h->daemon = NULL;
}
