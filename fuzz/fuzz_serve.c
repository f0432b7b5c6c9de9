/* libFuzzer harness: zinc serve's request-to-parameters mapping
 * (tools/serve_api.c) on arbitrary bodies, and the bodies it builds.
 *
 * The first input byte picks the endpoint (bits 0-1: chat, completion,
 * tokenize, detokenize); the rest is the request body.
 *
 * Promises checked: a refused body gets a status of 400, 401 or 500, a
 * non-empty one-line message and an error body that is a JSON object; an
 * accepted request has 1..SRV_MAX_MESSAGES messages with a known role and a
 * content, at most SRV_MAX_STOPS non-empty stop strings, and sampler
 * parameters in their documented ranges; its messages render in every chat
 * format; and responses built from its text (as if the model had written
 * it) parse back as JSON that holds exactly that text. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/serve.h"
#include "common.h"

static void check_error(const srv_err *e) {
    if (e->status != 400 && e->status != 401 && e->status != 500)
        fz_fail("refused with status %d: %s", e->status, e->msg);
    if (!e->msg[0] || strchr(e->msg, '\n') || !e->type) fz_fail("a refusal without a one-line message");
    char *body = srv_error_body(e);
    json_t *v = body ? json_loads(body, 0, NULL) : NULL;
    if (!json_is_object(json_object_get(v, "error")))
        fz_fail("error body is not {\"error\": {...}}: %s", body);
    json_decref(v);
    free(body);
}

static void check_params(const srv_req *r) {
    const zrt_sample_params *p = &r->sp;
    if (!(p->temp >= 0 && p->temp <= 100) || !(p->top_p >= 0 && p->top_p <= 1) ||
        !(p->min_p >= 0 && p->min_p <= 1) || !(p->repeat_penalty > 0 && p->repeat_penalty <= 100) ||
        p->top_k < 0 || p->repeat_last_n < -1)
        fz_fail("sampler parameters out of range: temp %g top_p %g min_p %g rp %g top_k %d last_n %d",
                p->temp, p->top_p, p->min_p, p->repeat_penalty, p->top_k, p->repeat_last_n);
    if (r->max_tokens < -1 || r->n_stop < 0 || r->n_stop > SRV_MAX_STOPS || !r->model)
        fz_fail("max_tokens %lld, %d stops", (long long)r->max_tokens, r->n_stop);
    for (int i = 0; i < r->n_stop; i++)
        if (!r->stop[i] || !r->stop[i][0] || strlen(r->stop[i]) > SRV_MAX_STOP_LEN) fz_fail("stop %d", i);
}

static void check_messages(const srv_req *r, zarena *a) {
    static const char *const roles[] = {"system", "user", "assistant", "tool"};
    if (r->n_msgs < 1 || r->n_msgs > SRV_MAX_MESSAGES || !r->msgs) fz_fail("%zu messages", r->n_msgs);
    for (size_t i = 0; i < r->n_msgs; i++) {
        size_t k = 0;
        while (k < 4 && strcmp(r->msgs[i].role, roles[k]))
            k++;
        if (k == 4 || !r->msgs[i].content) fz_fail("message %zu: role '%s'", i, r->msgs[i].role);
    }
    for (int f = 0; f < ZRT_CHAT_COUNT; f++) {
        char *text;
        size_t len;
        zdiag d = {0};
        zstatus s = zrt_chat_render((zrt_chat_format)f, r->msgs, r->n_msgs, true, a, &text, &len, &d);
        fz_check(s, &d, "zrt_chat_render");
        if (s == ZOK && strlen(text) != len) fz_fail("rendered length %zu, strlen %zu", len, strlen(text));
    }
}

/* A response whose text is t[0..n): its JSON must give back t. */
static void check_roundtrip(srv_kind kind, const char *t, size_t n) {
    srv_ident id = {"fuzz-1", 1, "m"};
    srv_result res = {t, n, "stop", 3, 4};
    char *body = srv_response_body(kind, &id, &res);
    if (!body) fz_fail("no response body for %zu bytes of valid text", n);
    json_t *v = json_loads(body, JSON_ALLOW_NUL, NULL),
           *ch = json_array_get(json_object_get(v, "choices"), 0);
    json_t *text = kind == SRV_CHAT ? json_object_get(json_object_get(ch, "message"), "content")
                                    : json_object_get(ch, "text");
    if (json_string_length(text) != n || memcmp(json_string_value(text), t, n))
        fz_fail("the response's text differs from what was given");
    json_decref(v);
    free(body);
    char *ev = srv_chunk_event(kind, &id, t, n, NULL);
    if (!ev || strncmp(ev, "data: {", 7) || strcmp(ev + strlen(ev) - 2, "\n\n")) fz_fail("bad event: %s", ev);
    free(ev);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    zarena *a = zarena_new();
    srv_limits lim = {"m"};
    srv_err e = {0};
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    int mode = data[0] & 3;
    bool ok;
    if (mode <= 1) {
        srv_req r;
        srv_kind kind = mode ? SRV_COMPLETION : SRV_CHAT;
        ok = srv_parse_request(kind, body, len, &lim, a, &r, &e);
        if (ok) {
            check_params(&r);
            if (kind == SRV_CHAT) {
                check_messages(&r, a);
                check_roundtrip(kind, r.msgs[0].content, strlen(r.msgs[0].content));
            } else
                check_roundtrip(kind, r.prompt, r.prompt_len);
        }
    } else {
        srv_tok_req t;
        ok =
            mode == 2 ? srv_parse_tokenize(body, len, a, &t, &e) : srv_parse_detokenize(body, len, a, &t, &e);
        if (ok && mode == 2 && !t.content) fz_fail("tokenize without content");
        for (size_t i = 0; ok && mode == 3 && i < t.n_tokens; i++)
            if (t.tokens[i] < 0) fz_fail("a negative token id was accepted");
    }
    if (!ok) check_error(&e);
    if (fz_debug() && !ok) fprintf(stderr, "refused: %s\n", e.msg);
    zarena_free(a);
    return 0;
}
