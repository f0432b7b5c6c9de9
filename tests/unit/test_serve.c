/* zinc serve end to end: a real server (the zinc binary, on llvmpipe in CI)
 * and a real HTTP client (libcurl). The endpoints and their shapes, streaming,
 * the same tokens for a request alone and among others, cancellation when a
 * client leaves, and every hostile case of docs/server.md answered with one
 * clear error while a stream runs on unharmed. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define ZINC  ZINC_BINARY_DIR "/zinc"
#define ZINCC ZINC_BINARY_DIR "/zincc"

/* ---- the server ----------------------------------------------------------- */

typedef struct server {
    pid_t pid;
    int port;
    char log[512];
} server;

/* A small qwen3 model compiled for the device: 2 layers, a context of ctx
 * (128 unless a test needs generations that last), prefill chunks of 8
 * tokens (so that prompts take several chunks); 4 sequence slots and a batch
 * decode schedule (--parallel 4), so that the slots decode in batch steps. */
static int plan_ctx = 128;

static const char *plan(void) {
    static char path[512];
    if (path[0]) return path;
    const char *gguf = tu_tmp("m.gguf");
    snprintf(path, sizeof path, "%s", tu_tmp("m.zplan"));
    char *out = NULL;
    int rc = tu_run(&out,
                    ZINC " mkmodel --arch qwen3 --layers 2 --hidden 256 --ff 512 --heads 4 --kv-heads 2 "
                         "--head-dim 64 --vocab 400 --quant q4_k_m --seed 3 -o %s && " ZINCC
                         " %s -o %s --ctx %d --chunk 8 --parallel 4",
                    gguf, gguf, path, plan_ctx);
    cr_assert_eq(rc, 0, "model: %s", out);
    free(out);
    return path;
}

static char *read_log(const server *s) {
    size_t n;
    char *t = tu_read_file(s->log, &n);
    if (!t) return strdup("");
    t = realloc(t, n + 1);
    t[n] = 0;
    return t;
}

/* Starts zinc serve on a free port with the extra flags and waits until it
 * is ready (it prints the port first, then "ready"). start() serves with
 * --batch (every generating slot in one batch step), start_mode(flags,
 * false) without it (the slots decode one at a time). */
static server start_mode(const char *flags, bool batch) {
    server s = {0};
    static int n;
    char name[32];
    snprintf(name, sizeof name, "serve-%d.log", n++);
    snprintf(s.log, sizeof s.log, "%s", tu_tmp(name));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "exec " ZINC " serve %s --port 0 %s%s 2>%s", plan(), batch ? "--batch " : "", flags,
             s.log);
    s.pid = fork();
    cr_assert(s.pid >= 0);
    if (s.pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive a test that crashed */
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1200; i++) { /* 120 s: a loaded CI machine under ASan */
        char *log = read_log(&s);
        const char *p = strstr(log, "listening on http://127.0.0.1:");
        if (p) s.port = atoi(p + strlen("listening on http://127.0.0.1:"));
        bool ready = strstr(log, "ready") != NULL;
        int st;
        if (waitpid(s.pid, &st, WNOHANG) == s.pid) cr_assert_fail("zinc serve exited: %s", log);
        free(log);
        if (ready && s.port) return s;
        usleep(100000);
    }
    cr_assert_fail("zinc serve did not become ready");
    return s;
}

static server start(const char *flags) { return start_mode(flags, true); }

/* Stops the server with SIGTERM: it must exit 0, with no sanitizer report. */
static void stop(server *s) {
    kill(s->pid, SIGTERM);
    int st = 0;
    for (int i = 0; i < 600 && waitpid(s->pid, &st, WNOHANG) == 0; i++)
        usleep(100000);
    char *log = read_log(s);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "zinc serve did not stop cleanly (status %d): %s", st,
              log);
    cr_expect(!strstr(log, "Sanitizer") && !strstr(log, "runtime error"), "%s", log);
    free(log);
}

/* ---- the client ------------------------------------------------------------ */

typedef struct resp {
    long status;
    char *body, *headers;
    size_t len, hlen;
} resp;

static size_t collect(char *p, size_t size, size_t n, void *ud) {
    char **buf = ud;
    size_t *len = (size_t *)(buf + 1);
    size_t k = size * n;
    *buf = realloc(*buf, *len + k + 1);
    memcpy(*buf + *len, p, k);
    *len += k;
    (*buf)[*len] = 0;
    return k;
}

/* One request; body NULL is a GET. extra: one more header, or NULL. */
static resp request(const server *s, const char *path, const char *body, size_t body_len, const char *extra) {
    struct {
        char *p;
        size_t len;
    } b = {0}, h = {0};
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
    CURL *c = curl_easy_init();
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (extra) hdr = curl_slist_append(hdr, extra);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    CURLcode rc = curl_easy_perform(c);
    cr_assert_eq(rc, CURLE_OK, "%s: %s", path, curl_easy_strerror(rc));
    resp r = {0, b.p ? b.p : strdup(""), h.p ? h.p : strdup(""), b.len, h.len};
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    return r;
}

static resp post(const server *s, const char *path, const char *body) {
    return request(s, path, body, strlen(body), NULL);
}

static void resp_free(resp *r) {
    free(r->body), free(r->headers);
}

static json_t *parse(const char *text) {
    json_error_t e;
    json_t *v = json_loads(text, JSON_ALLOW_NUL, &e); /* generated text may hold U+0000 */
    cr_assert_not_null(v, "not JSON (%s): %s", e.text, text);
    return v;
}

/* An OpenAI error: the status, and a body {"error": {"message", "type"}}
 * whose message holds what. */
static void expect_error(resp r, long status, const char *what) {
    cr_expect_eq(r.status, status, "status %ld, expected %ld: %s", r.status, status, r.body);
    json_t *v = parse(r.body), *e = json_object_get(v, "error");
    const char *msg = json_string_value(json_object_get(e, "message"));
    cr_expect(msg && json_is_string(json_object_get(e, "type")), "no OpenAI error body: %s", r.body);
    cr_expect(msg && strstr(msg, what), "'%s' not in the message: %s", what, r.body);
    json_decref(v);
    resp_free(&r);
}

/* A JSON string as its escaped text without the quotes (malloc'd): text
 * that may hold NULs, as C strings that compare and join like the text. */
static char *escaped(const json_t *str) {
    char *d = json_dumps(str, JSON_ENCODE_ANY);
    cr_assert(d && d[0] == '"');
    size_t n = strlen(d);
    memmove(d, d + 1, n - 2);
    d[n - 2] = 0;
    return d;
}

/* The text of a non-streaming chat reply (malloc'd, escaped), its finish reason
 * checked against finish (NULL: any). */
static char *chat_text(const server *s, const char *body, const char *finish) {
    resp r = post(s, "/v1/chat/completions", body);
    cr_assert_eq(r.status, 200, "%s", r.body);
    json_t *v = parse(r.body), *ch = json_array_get(json_object_get(v, "choices"), 0);
    json_t *text = json_object_get(json_object_get(ch, "message"), "content");
    cr_assert(json_is_string(text), "%s", r.body);
    if (finish)
        cr_expect_str_eq(json_string_value(json_object_get(ch, "finish_reason")), finish, "%s", r.body);
    char *t = escaped(text);
    json_decref(v);
    resp_free(&r);
    return t;
}

/* A streamed reply read as server-sent events: every event is "data: " and
 * JSON (or the final [DONE]), the text is the pieces joined (escaped). */
typedef struct sse {
    char *text;
    int chunks;
    char finish[16];
    bool done;
    json_t *usage;
} sse;

static sse read_sse(const char *body) {
    sse s = {strdup(""), 0, "", false, NULL};
    const char *p = body;
    while (*p) {
        const char *end = strstr(p, "\n\n");
        cr_assert_not_null(end, "an event without its blank line: %s", p);
        cr_assert(!strncmp(p, "data: ", 6), "an event that is not data: %.*s", (int)(end - p), p);
        cr_assert(!s.done, "events after [DONE]");
        if (!strncmp(p + 6, "[DONE]", 6)) {
            s.done = true;
            p = end + 2;
            continue;
        }
        char *ev = strndup(p + 6, (size_t)(end - p - 6));
        json_t *v = parse(ev), *ch = json_array_get(json_object_get(v, "choices"), 0);
        free(ev);
        if (json_object_get(v, "usage")) s.usage = json_incref(json_object_get(v, "usage"));
        json_t *delta = json_object_get(ch, "delta");
        json_t *pj = delta ? json_object_get(delta, "content") : json_object_get(ch, "text");
        char *piece = json_is_string(pj) ? escaped(pj) : NULL;
        if (piece) {
            s.text = realloc(s.text, strlen(s.text) + strlen(piece) + 1);
            strcat(s.text, piece);
            free(piece);
        }
        const char *f = json_string_value(json_object_get(ch, "finish_reason"));
        if (f) snprintf(s.finish, sizeof s.finish, "%s", f);
        s.chunks++;
        json_decref(v);
        p = end + 2;
    }
    return s;
}

static void sse_free(sse *s) {
    free(s->text);
    json_decref(s->usage);
}

/* ---- endpoints ------------------------------------------------------------- */

Test(serve, endpoints_and_shapes, .timeout = 300) {
    server s = start("--parallel 2");
    resp r = request(&s, "/health", NULL, 0, NULL);
    cr_expect_eq(r.status, 200);
    cr_expect_str_eq(r.body, "{\"status\":\"ok\"}");
    resp_free(&r);

    r = request(&s, "/v1/models", NULL, 0, NULL);
    json_t *v = parse(r.body);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(v, "data"), 0), "id")),
                     "m.zplan");
    json_decref(v), resp_free(&r);

    r = post(&s, "/v1/chat/completions",
             "{\"model\":\"m.zplan\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
             "{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":6,\"temperature\":0}");
    cr_assert_eq(r.status, 200, "%s", r.body);
    v = parse(r.body);
    json_t *ch = json_array_get(json_object_get(v, "choices"), 0), *u = json_object_get(v, "usage");
    cr_expect_str_eq(json_string_value(json_object_get(v, "object")), "chat.completion");
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(ch, "message"), "role")), "assistant");
    cr_expect_str_eq(json_string_value(json_object_get(ch, "finish_reason")), "length");
    cr_expect_eq(json_integer_value(json_object_get(u, "completion_tokens")), 6);
    int64_t prompt_tokens = json_integer_value(json_object_get(u, "prompt_tokens"));
    cr_expect_gt(prompt_tokens, 5);
    cr_expect_eq(json_integer_value(json_object_get(u, "total_tokens")), prompt_tokens + 6);
    json_decref(v), resp_free(&r);

    /* streaming: the same text as without, in chunks, usage at the end */
    char *whole = NULL;
    {
        r = post(&s, "/v1/completions",
                 "{\"prompt\":\"Once upon a time\",\"max_tokens\":7,\"temperature\":0}");
        v = parse(r.body);
        ch = json_array_get(json_object_get(v, "choices"), 0);
        cr_expect_str_eq(json_string_value(json_object_get(v, "object")), "text_completion");
        whole = escaped(json_object_get(ch, "text"));
        json_decref(v), resp_free(&r);
    }
    r = post(&s, "/v1/completions",
             "{\"prompt\":\"Once upon a time\",\"max_tokens\":7,\"temperature\":0,\"stream\":true,"
             "\"stream_options\":{\"include_usage\":true}}");
    cr_expect(strstr(r.headers, "text/event-stream"), "%s", r.headers);
    sse e = read_sse(r.body);
    cr_expect(e.done, "no [DONE]: %s", r.body);
    cr_expect_str_eq(e.text, whole);
    cr_expect_str_eq(e.finish, "length");
    cr_expect_gt(e.chunks, 2);
    cr_expect_eq(json_integer_value(json_object_get(e.usage, "completion_tokens")), 7);
    sse_free(&e), resp_free(&r), free(whole);

    /* tokenize and detokenize are each other's inverse */
    r = post(&s, "/tokenize", "{\"content\":\"Hello world, h\\u00e9llo\"}");
    v = parse(r.body);
    json_t *toks = json_object_get(v, "tokens");
    cr_assert_gt(json_array_size(toks), 3, "%s", r.body);
    json_t *req = json_pack("{s:O}", "tokens", toks); /* O: a new reference to toks */
    char *body = json_dumps(req, 0);
    json_decref(req), json_decref(v), resp_free(&r);
    r = post(&s, "/detokenize", body);
    free(body);
    v = parse(r.body);
    cr_expect_str_eq(json_string_value(json_object_get(v, "content")), "Hello world, h\xc3\xa9llo");
    json_decref(v), resp_free(&r);

    /* the page, and the metrics */
    r = request(&s, "/", NULL, 0, NULL);
    cr_expect(strstr(r.body, "/v1/chat/completions") && strstr(r.headers, "text/html"));
    resp_free(&r);
    r = request(&s, "/metrics", NULL, 0, NULL);
    cr_expect(strstr(r.body, "zinc_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 2"), "%s",
              r.body);
    cr_expect(strstr(r.body, "zinc_tokens_generated_total 20"), "%s", r.body);
    cr_expect(strstr(r.body, "zinc_kv_cache_used_ratio{slot=\"1\"}"), "%s", r.body);
    resp_free(&r);
    stop(&s);
}

/* ---- the same tokens alone and among others -------------------------------- */

typedef struct call {
    const server *s;
    const char *body;
    char *text;
} call;

static void *call_thread(void *arg) {
    call *c = arg;
    c->text = chat_text(c->s, c->body, NULL);
    return NULL;
}

/* Greedy and seeded requests give the same text alone as while three other
 * requests run in the other slots (their prompts prefilled in chunks
 * between this one's decode steps): in batch steps (--batch) and one slot
 * at a time. */
static void alone_and_interleaved(bool batch) {
    server s = start_mode("--parallel 4", batch);
    const char *bodies[4] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about rivers.\"}],\"max_tokens\":24,"
        "\"temperature\":0}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"A longer prompt, so that it takes several prefill "
        "chunks of eight tokens each while the others decode.\"}],\"max_tokens\":20,\"temperature\":0.9,"
        "\"seed\":42}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":16,\"temperature\":0.7,"
        "\"top_k\":5,\"seed\":7}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Count: one two three\"}],\"max_tokens\":24,"
        "\"temperature\":1.0,\"repeat_penalty\":1.3,\"seed\":9}",
    };
    char *alone[4];
    for (int i = 0; i < 4; i++)
        alone[i] = chat_text(&s, bodies[i], "length");
    cr_expect_str_neq(alone[0], alone[2], "different requests should differ");
    for (int round = 0; round < 2; round++) {
        call c[4];
        pthread_t t[4];
        for (int i = 0; i < 4; i++) {
            c[i] = (call){&s, bodies[(i + round) % 4], NULL};
            pthread_create(&t[i], NULL, call_thread, &c[i]);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(t[i], NULL);
            cr_expect_str_eq(c[i].text, alone[(i + round) % 4], "request %d differs when interleaved",
                             (i + round) % 4);
            free(c[i].text);
        }
    }
    for (int i = 0; i < 4; i++)
        free(alone[i]);
    stop(&s);
}

Test(serve, same_tokens_alone_and_interleaved_batched, .timeout = 300) { alone_and_interleaved(true); }

Test(serve, same_tokens_alone_and_interleaved_one_at_a_time, .timeout = 300) { alone_and_interleaved(false); }

/* ---- stop strings ---------------------------------------------------------- */

Test(serve, stop_strings, .timeout = 300) {
    server s = start("--parallel 1");
    const char *b = "{\"prompt\":\"The\",\"max_tokens\":40,\"temperature\":0}";
    resp r = post(&s, "/v1/completions", b);
    json_t *v = parse(r.body),
           *tj = json_object_get(json_array_get(json_object_get(v, "choices"), 0), "text");
    const char *text = json_string_value(tj);
    size_t len = json_string_length(tj);
    cr_assert_gt(len, 12, "%s", r.body);
    /* a stop made of 2 characters of the text from its 6th byte on: the
     * reply ends before its first occurrence */
    size_t at = 6, end;
    while (at < len && ((text[at] & 0xc0) == 0x80 || !text[at]))
        at++;
    for (end = at + 1; end < len && (text[end] & 0xc0) == 0x80; end++)
        ;
    for (end++; end < len && (text[end] & 0xc0) == 0x80; end++)
        ;
    cr_assert(end <= len && !memchr(text + at, 0, end - at));
    size_t first = 0;
    while (memcmp(text + first, text + at, end - at))
        first++;
    json_t *req = json_pack("{s:s, s:i, s:i, s:[s%], s:b}", "prompt", "The", "max_tokens", 40, "temperature",
                            0, "stop", text + at, end - at, "stream", 1);
    json_t *head = json_stringn(text, first);
    char *body = json_dumps(req, 0), *want = escaped(head);
    json_decref(head);
    resp rs = post(&s, "/v1/completions", body);
    sse e = read_sse(rs.body);
    cr_expect_str_eq(e.text, want, "stopped at byte %zu..%zu of the text", at, end);
    cr_expect_str_eq(e.finish, "stop");
    free(body), free(want), json_decref(req);
    sse_free(&e), resp_free(&rs), json_decref(v), resp_free(&r);
    stop(&s);
}

/* ---- hostile input ---------------------------------------------------------- */

/* A stream that runs while the hostile requests come: it must end as it
 * would alone. */
typedef struct bystander {
    const server *s;
    char *text;
} bystander;

static const char BYSTANDER[] =
    "{\"messages\":[{\"role\":\"user\",\"content\":\"Keep going\"}],\"max_tokens\":60,\"temperature\":0,"
    "\"stream\":true}";

static void *bystander_thread(void *arg) {
    bystander *b = arg;
    resp r = post(b->s, "/v1/chat/completions", BYSTANDER);
    sse e = read_sse(r.body);
    cr_expect(e.done && !strcmp(e.finish, "length"), "the bystander was harmed: %s", r.body);
    b->text = strdup(e.text);
    sse_free(&e), resp_free(&r);
    return NULL;
}

Test(serve, hostile_requests, .timeout = 300) {
    server s = start("--parallel 2 --max-body 65536");
    bystander alone = {&s, NULL}, during = {&s, NULL};
    bystander_thread(&alone);
    pthread_t t;
    pthread_create(&t, NULL, bystander_thread, &during);

    expect_error(post(&s, "/v1/chat/completions", "{\"messages\": [}"), 400, "not valid JSON");
    expect_error(post(&s, "/v1/chat/completions", "[1,2]"), 400, "expected a JSON object");
    expect_error(post(&s, "/v1/chat/completions", ""), 400, "not valid JSON");
    expect_error(post(&s, "/v1/chat/completions", "{\"messages\":\"hi\"}"), 400, "'messages' is a string");
    expect_error(post(&s, "/v1/chat/completions", "{\"messages\":[]}"), 400, "'messages' is empty");
    expect_error(post(&s, "/v1/chat/completions", "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}"),
                 400, "'messages[0].role' is unknown");
    expect_error(post(&s, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":5}]}"), 400,
                 "'messages[0].content' is a number");
    expect_error(post(&s, "/v1/chat/completions",
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}"),
                 400, "'temperature' is a string");
    expect_error(post(&s, "/v1/chat/completions",
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-5}"),
                 400, "'max_tokens' is -5");
    expect_error(post(&s, "/v1/chat/completions",
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":1.5}"),
                 400, "'top_p' is 1.5");
    expect_error(
        post(&s, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":3}"),
        400, "'n' is 3");
    expect_error(post(&s, "/v1/chat/completions",
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"a\",7]}"),
                 400, "'stop[1]' is a number");
    expect_error(post(&s, "/v1/completions", "{\"prompt\":{\"a\":1}}"), 400, "'prompt' is an object");
    expect_error(post(&s, "/v1/completions", "{\"prompt\":\"x\",\"stream\":\"yes\"}"), 400,
                 "'stream' is a string");
    expect_error(post(&s, "/v1/completions", "{\"prompt\":\"x\",\"ignore_eos\":1}"), 400,
                 "'ignore_eos' is a number");
    expect_error(request(&s, "/v1/completions", "{\"prompt\":\"a\0b\"}", 14, NULL), 400, "not valid JSON");
    expect_error(post(&s, "/detokenize", "{\"tokens\":[1, 99999]}"), 400, "99999");
    expect_error(post(&s, "/v1/chat/completions",
                      "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}"),
                 401, "'gpt-4o' is not served here");
    expect_error(request(&s, "/v1/nothing", NULL, 0, NULL), 404, "no endpoint GET /v1/nothing");
    expect_error(request(&s, "/v1/chat/completions", NULL, 0, NULL), 405, "not allowed");

    /* a prompt longer than a slot's context: 400 with the sizes */
    char *longp = malloc(20000);
    strcpy(longp, "{\"prompt\":\"");
    for (int i = 0; i < 300; i++)
        strcat(longp, "word ");
    strcat(longp, "\"}");
    expect_error(post(&s, "/v1/completions", longp), 400, "a slot holds 128");
    free(longp);

    /* a body over the limit: 413 */
    size_t big = 100000;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    huge[0] = '{', huge[big - 1] = '}', huge[big] = 0;
    expect_error(post(&s, "/v1/completions", huge), 413, "larger than the limit of 65536 bytes");
    free(huge);

    pthread_join(t, NULL);
    cr_expect_str_eq(during.text, alone.text, "the stream changed while hostile requests came");
    free(during.text), free(alone.text);
    resp r = request(&s, "/health", NULL, 0, NULL);
    cr_expect_eq(r.status, 200);
    resp_free(&r);
    stop(&s);
}

Test(serve, api_key, .timeout = 300) {
    server s = start("--api-key s3cret");
    const char *b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":2}";
    expect_error(post(&s, "/v1/chat/completions", b), 401, "missing or wrong API key");
    expect_error(request(&s, "/v1/chat/completions", b, strlen(b), "Authorization: Bearer s3creT"), 401,
                 "API key");
    expect_error(request(&s, "/v1/models", NULL, 0, "Authorization: Bearer "), 401, "API key");
    resp r = request(&s, "/v1/chat/completions", b, strlen(b), "Authorization: Bearer s3cret");
    cr_expect_eq(r.status, 200, "%s", r.body);
    resp_free(&r);
    r = request(&s, "/health", NULL, 0, NULL); /* health needs no key */
    cr_expect_eq(r.status, 200);
    resp_free(&r);
    stop(&s);
}

/* ---- connections that misbehave -------------------------------------------- */

static int connect_to(const server *s) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Reads until the server closes the connection; the seconds it took. */
static double wait_closed(int fd, double limit) {
    double t0 = now_s();
    char buf[4096];
    struct timeval tv = {(time_t)limit, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (read(fd, buf, sizeof buf) > 0)
        ;
    return now_s() - t0;
}

/* Slow-loris (headers that never end) and a half-sent body are cut off
 * after the idle timeout, while others are served meanwhile. */
Test(serve, slow_clients_time_out, .timeout = 300) {
    server s = start("--timeout 2");
    int loris = connect_to(&s), half = connect_to(&s);
    const char *part = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    cr_assert_gt(write(loris, part, strlen(part)), 0);
    const char *hb = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"prompt\":";
    cr_assert_gt(write(half, hb, strlen(hb)), 0);
    resp r = post(&s, "/v1/completions", "{\"prompt\":\"Hi\",\"max_tokens\":3}");
    cr_expect_eq(r.status, 200, "%s", r.body);
    resp_free(&r);
    double t1 = wait_closed(loris, 30), t2 = wait_closed(half, 30);
    cr_expect_lt(t1, 10, "slow-loris connection open for %.1f s", t1);
    cr_expect_lt(t2, 10, "half-sent body open for %.1f s", t2);
    close(loris), close(half);
    stop(&s);
}

/* A client that leaves mid-stream frees its slot at once: with one slot,
 * the next request is served, and /metrics counts one cancelled. */
Test(serve, disconnect_cancels, .timeout = 300) {
    plan_ctx = 4096; /* a generation that would last, were it not cancelled */
    server s = start("--parallel 1");
    int fd = connect_to(&s);
    const char *body = "{\"prompt\":\"Go on and on\",\"max_tokens\":100000,\"stream\":true,\"ignore_eos\":true}";
    char req[512];
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    cr_assert_gt(write(fd, req, strlen(req)), 0);
    char buf[4096];
    ssize_t n = 0, got = 0;
    while (got < 600 && (n = read(fd, buf, sizeof buf)) > 0) /* a few events */
        got += n;
    cr_assert_gt(got, 0);
    close(fd);
    double t0 = now_s();
    resp r = post(&s, "/v1/completions", "{\"prompt\":\"Next\",\"max_tokens\":3}");
    cr_expect_eq(r.status, 200, "%s", r.body);
    cr_expect_lt(now_s() - t0, 5, "the slot was not freed at once when the client left");
    resp_free(&r);
    /* The scheduler counts a finished generation when it next frees the
     * slot, which may come just after the reply reached the client. */
    for (int tries = 0;; tries++) {
        r = request(&s, "/metrics", NULL, 0, NULL);
        bool both = r.body && strstr(r.body, "zinc_generations_cancelled_total 1") &&
                    strstr(r.body, "zinc_generations_finished_total 1");
        if (both || tries == 50) break;
        resp_free(&r);
        usleep(100000);
    }
    cr_expect(strstr(r.body, "zinc_generations_cancelled_total 1"), "%s", r.body);
    cr_expect(strstr(r.body, "zinc_generations_finished_total 1"), "%s", r.body);
    resp_free(&r);
    stop(&s);
}

typedef struct held {
    const server *s;
    long status;
} held;

static void *long_stream(void *arg) {
    held *h = arg;
    resp r = post(h->s, "/v1/completions", "{\"prompt\":\"Long\",\"max_tokens\":60,\"stream\":true,\"ignore_eos\":true}");
    h->status = r.status;
    resp_free(&r);
    return NULL;
}

/* More clients than slots: one queued, the next refused with 503 and
 * Retry-After; all that were accepted finish. */
Test(serve, queue_full_is_503, .timeout = 300) {
    server s = start("--parallel 1 --queue 1");
    held a = {&s, 0}, b = {&s, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, long_stream, &a);
    for (int i = 0; i < 300; i++) { /* until a is generating */
        resp m = request(&s, "/metrics", NULL, 0, NULL);
        bool busy = strstr(m.body, "zinc_slots_busy 1") != NULL;
        resp_free(&m);
        if (busy) break;
        usleep(20000);
    }
    pthread_create(&tb, NULL, long_stream, &b);
    for (int i = 0; i < 300; i++) { /* until b waits */
        resp m = request(&s, "/metrics", NULL, 0, NULL);
        bool queued = strstr(m.body, "zinc_queue_depth 1") != NULL;
        resp_free(&m);
        if (queued) break;
        usleep(20000);
    }
    resp r = post(&s, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2}");
    cr_expect(strstr(r.headers, "Retry-After"), "%s", r.headers);
    expect_error(r, 503, "try again later");
    pthread_join(ta, NULL), pthread_join(tb, NULL);
    cr_expect_eq(a.status, 200);
    cr_expect_eq(b.status, 200);
    stop(&s);
}

Test(serve, usage_errors) {
    char *out = NULL;
    cr_expect_eq(tu_run(&out, ZINC " serve"), 64 << 0, "%s", out);
    cr_expect(strstr(out, "no model given"), "%s", out);
    free(out);
    cr_expect_eq(tu_run(&out, ZINC " serve %s --parallel 0", plan()), 64, "%s", out);
    cr_expect(strstr(out, "--parallel expects a number in 1..256"), "%s", out);
    free(out);
    cr_expect_eq(tu_run(&out, ZINC " serve /nonexistent.zplan --port 0"), 2, "%s", out);
    cr_expect(strstr(out, "cannot open /nonexistent.zplan"), "%s", out);
    free(out);
}
