/* Requests to parameters and results to response bodies, with the fields
 * and semantics of OpenAI's API and llama-server's extensions. Every field a
 * request gives is checked for its type and range; a wrong one is refused
 * with the field's name, what it was and what is expected. Unknown fields
 * are ignored, as OpenAI's clients send many (frequency_penalty, user, ...). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define BAD "invalid_request_error"

bool srv_fail(srv_err *e, int status, const char *type, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    for (char *c = e->msg; *c; c++) /* one line, whatever a request's strings held */
        if ((unsigned char)*c < 0x20) *c = '?';
    e->status = status, e->type = type, e->code = code;
    return false;
}

char *srv_dump(json_t *v) {
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return s;
}

char *srv_error_body(const srv_err *e) {
    /* the message may quote a request's bytes, cut anywhere */
    json_t *err = json_pack("{s:o, s:s, s:s?}", "message", zjson_strn(e->msg, strlen(e->msg)), "type",
                            e->type, "code", e->code);
    if (err && e->status == 413) json_object_set_new(err, "status", json_integer(413));
    return srv_dump(err ? json_pack("{s:o}", "error", err) : NULL);
}

static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* The body as a JSON object; the error says where parsing stopped. */
static json_t *parse_object(const char *body, size_t len, srv_err *e) {
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        srv_fail(e, 400, BAD, "invalid_json",
                 "the body is not valid JSON: %s at line %d, column %d (byte %d): expected a JSON object",
                 je.text, je.line, je.column, je.position);
        return NULL;
    }
    if (!json_is_object(root)) {
        srv_fail(e, 400, BAD, "invalid_json", "the body is %s: expected a JSON object", type_name(root));
        json_decref(root);
        return NULL;
    }
    return root;
}

/* A number field in [lo, hi] (absent or null: *out unchanged). */
static bool get_num(json_t *o, const char *key, double lo, double hi, double *out, srv_err *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v))
        return srv_fail(e, 400, BAD, "invalid_type", "'%s' is %s: expected a number in [%g, %g]", key,
                        type_name(v), lo, hi);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return srv_fail(e, 400, BAD, "invalid_value", "'%s' is %g: expected a number in [%g, %g]", key, x, lo,
                        hi);
    *out = x;
    return true;
}

/* An integer field in [lo, hi]. */
static bool get_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, srv_err *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    json_int_t x; /* 3.0 is 3, as JavaScript clients may send it */
    if (json_is_integer(v))
        x = json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
             fabs(json_real_value(v)) < 9e15)
        x = (json_int_t)json_real_value(v);
    else
        return srv_fail(e, 400, BAD, "invalid_type", "'%s' is %s: expected an integer in [%lld, %lld]", key,
                        json_is_number(v) ? "a fraction" : type_name(v), (long long)lo, (long long)hi);
    if (x < lo || x > hi)
        return srv_fail(e, 400, BAD, "invalid_value", "'%s' is %lld: expected an integer in [%lld, %lld]",
                        key, (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return true;
}

static bool get_bool(json_t *o, const char *key, bool *out, srv_err *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v))
        return srv_fail(e, 400, BAD, "invalid_type", "'%s' is %s: expected true or false", key, type_name(v));
    *out = json_is_true(v);
    return true;
}

/* The sampler fields; llama.cpp's defaults where absent. */
static bool get_sampling(json_t *o, zrt_sample_params *sp, srv_err *e) {
    double temp = 0.8, top_p = 0.95, min_p = 0.05, rp = 1.0;
    int64_t top_k = 40, seed = -1, last_n = 64;
    zrt_sample_defaults(sp);
    if (!get_num(o, "temperature", 0, 100, &temp, e) || !get_num(o, "top_p", 0, 1, &top_p, e) ||
        !get_num(o, "min_p", 0, 1, &min_p, e) || !get_num(o, "repeat_penalty", 0.01, 100, &rp, e) ||
        !get_int(o, "top_k", 0, 1 << 30, &top_k, e) ||
        !get_int(o, "repeat_last_n", -1, 1 << 24, &last_n, e) || !get_int(o, "seed", -1, INT64_MAX, &seed, e))
        return false;
    sp->temp = (float)temp, sp->top_p = (float)top_p, sp->min_p = (float)min_p;
    sp->repeat_penalty = (float)rp, sp->top_k = (int32_t)top_k, sp->repeat_last_n = (int32_t)last_n;
    sp->seed = seed < 0 ? ZRT_SAMPLE_SEED_RANDOM : (uint64_t)seed;
    return true;
}

static bool add_stop(json_t *s, size_t i, zarena *a, srv_req *r, srv_err *e) {
    size_t n = json_is_string(s) ? json_string_length(s) : 0;
    if (!n || n > SRV_MAX_STOP_LEN)
        return srv_fail(e, 400, BAD, "invalid_value",
                        "'stop[%zu]' is %s: expected a non-empty string of at most %d bytes", i,
                        json_is_string(s) ? (n ? "too long" : "empty") : type_name(s), SRV_MAX_STOP_LEN);
    if (memchr(json_string_value(s), 0, n))
        return srv_fail(e, 400, BAD, "invalid_value", "'stop[%zu]' holds a NUL character", i);
    r->stop[r->n_stop++] = zarena_strndup(a, json_string_value(s), n);
    return r->stop[r->n_stop - 1] ? true : srv_fail(e, 500, "server_error", NULL, "out of memory");
}

/* "stop": a string or an array of up to SRV_MAX_STOPS non-empty strings. */
static bool get_stop(json_t *o, zarena *a, srv_req *r, srv_err *e) {
    json_t *v = json_object_get(o, "stop"), *s;
    size_t i;
    if (!v || json_is_null(v)) return true;
    if (json_is_string(v)) return add_stop(v, 0, a, r, e);
    if (!json_is_array(v) || json_array_size(v) > SRV_MAX_STOPS)
        return srv_fail(e, 400, BAD, "invalid_type",
                        "'stop' is %s: expected a string or an array of at most %d",
                        json_is_array(v) ? "a longer array" : type_name(v), SRV_MAX_STOPS);
    json_array_foreach(v, i, s) if (!add_stop(s, i, a, r, e)) return false;
    return true;
}

/* A message's content: a string, or an array of {"type": "text", "text"}
 * parts (joined), or null (an assistant's turn with none). */
static bool get_content(json_t *c, size_t i, zarena *a, const char **out, srv_err *e) {
    if (!c || json_is_null(c)) return (*out = ""), true;
    if (json_is_string(c)) {
        size_t n = json_string_length(c);
        if (memchr(json_string_value(c), 0, n))
            return srv_fail(e, 400, BAD, "invalid_value", "'messages[%zu].content' holds a NUL character", i);
        return (*out = zarena_strndup(a, json_string_value(c), n)), true;
    }
    if (!json_is_array(c))
        return srv_fail(e, 400, BAD, "invalid_type",
                        "'messages[%zu].content' is %s: expected a string or an array of text parts", i,
                        type_name(c));
    size_t j, len = 0;
    json_t *part;
    json_array_foreach(c, j, part) {
        json_t *t = json_object_get(part, "text");
        const char *type = json_string_value(json_object_get(part, "type"));
        if (!json_is_object(part) || !type || strcmp(type, "text") || !json_is_string(t))
            return srv_fail(
                e, 400, BAD, "invalid_value",
                "'messages[%zu].content[%zu]': expected {\"type\": \"text\", \"text\": ...} (only "
                "text parts are supported)",
                i, j);
        if (memchr(json_string_value(t), 0, json_string_length(t)))
            return srv_fail(e, 400, BAD, "invalid_value",
                            "'messages[%zu].content[%zu]' holds a NUL character", i, j);
        len += json_string_length(t);
    }
    char *s = zarena_alloc(a, len + 1), *p = s;
    if (!s) return srv_fail(e, 500, "server_error", NULL, "out of memory");
    json_array_foreach(c, j, part) {
        json_t *t = json_object_get(part, "text");
        memcpy(p, json_string_value(t), json_string_length(t));
        p += json_string_length(t);
    }
    *p = 0;
    return (*out = s), true;
}

static bool get_messages(json_t *o, zarena *a, srv_req *r, srv_err *e) {
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool", NULL};
    json_t *v = json_object_get(o, "messages"), *m;
    size_t i, n = json_array_size(v);
    if (!json_is_array(v) || !n || n > SRV_MAX_MESSAGES)
        return srv_fail(e, 400, BAD, "invalid_messages",
                        "'messages' is %s: expected an array of 1 to %d {\"role\", \"content\"} objects",
                        !v                 ? "missing"
                        : json_is_array(v) ? (n ? "too long" : "empty")
                                           : type_name(v),
                        SRV_MAX_MESSAGES);
    r->msgs = zarena_array(a, n, sizeof *r->msgs);
    if (!r->msgs) return srv_fail(e, 500, "server_error", NULL, "out of memory");
    json_array_foreach(v, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        size_t k = 0;
        while (role && roles[k] && strcmp(roles[k], role))
            k++;
        if (!json_is_object(m) || !role || !roles[k])
            return srv_fail(e, 400, BAD, "invalid_messages",
                            "'messages[%zu].role' is %s: expected one of system, developer, user, "
                            "assistant, tool",
                            i,
                            !json_is_object(m) ? "not in an object"
                            : role             ? "unknown"
                                               : "missing");
        /* developer is OpenAI's newer name for system */
        r->msgs[i].role = k <= 1 ? "system" : roles[k];
        if (!get_content(json_object_get(m, "content"), i, a, &r->msgs[i].content, e)) return false;
    }
    r->n_msgs = n;
    return true;
}

/* "prompt": a string, or an array holding one string. */
static bool get_prompt(json_t *o, zarena *a, srv_req *r, srv_err *e) {
    json_t *v = json_object_get(o, "prompt");
    if (json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0)))
        v = json_array_get(v, 0);
    if (!json_is_string(v))
        return srv_fail(e, 400, BAD, "invalid_prompt", "'prompt' is %s: expected a string (or [string])",
                        !v                 ? "missing"
                        : json_is_array(v) ? "an array of other than one string"
                                           : type_name(v));
    r->prompt_len = json_string_length(v);
    r->prompt = zarena_strndup(a, json_string_value(v), r->prompt_len);
    return r->prompt ? true : srv_fail(e, 500, "server_error", NULL, "out of memory");
}

static bool get_model(json_t *o, const srv_limits *lim, zarena *a, srv_req *r, srv_err *e) {
    json_t *v = json_object_get(o, "model");
    r->model = lim->model;
    if (!v || json_is_null(v)) return true;
    if (!json_is_string(v))
        return srv_fail(e, 400, BAD, "invalid_type", "'model' is %s: expected a string", type_name(v));
    if (strcmp(json_string_value(v), lim->model))
        return srv_fail(e, 401, BAD, "model_not_found",
                        "the model '%.200s' is not served here: expected '%s' (see GET /v1/models)",
                        json_string_value(v), lim->model);
    r->model = zarena_strdup(a, lim->model);
    return true;
}

/* max_tokens, or its newer name max_completion_tokens, or llama-server's
 * n_predict; -1 (or absent) until the context is full. */
static bool get_max_tokens(json_t *o, srv_req *r, srv_err *e) {
    r->max_tokens = -1;
    return get_int(o, "n_predict", -1, 1 << 24, &r->max_tokens, e) &&
           get_int(o, "max_completion_tokens", -1, 1 << 24, &r->max_tokens, e) &&
           get_int(o, "max_tokens", -1, 1 << 24, &r->max_tokens, e);
}

static bool get_fields(json_t *o, srv_kind kind, const srv_limits *lim, zarena *a, srv_req *r, srv_err *e) {
    int64_t n = 1;
    json_t *so = json_object_get(o, "stream_options");
    if (!get_int(o, "n", 1, 1, &n, e) || !get_model(o, lim, a, r, e) || !get_max_tokens(o, r, e) ||
        !get_sampling(o, &r->sp, e) || !get_stop(o, a, r, e) || !get_bool(o, "stream", &r->stream, e) ||
        !get_bool(o, "ignore_eos", &r->ignore_eos, e))
        return false;
    if (so && !json_is_null(so) && !json_is_object(so))
        return srv_fail(e, 400, BAD, "invalid_type", "'stream_options' is %s: expected an object",
                        type_name(so));
    if (so && !get_bool(so, "include_usage", &r->include_usage, e)) return false;
    return kind == SRV_CHAT ? get_messages(o, a, r, e) : get_prompt(o, a, r, e);
}

bool srv_parse_request(srv_kind kind, const char *body, size_t len, const srv_limits *lim, zarena *a,
                       srv_req *out, srv_err *e) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    json_t *o = parse_object(body, len, e);
    if (!o) return false;
    bool ok = get_fields(o, kind, lim, a, out, e);
    json_decref(o);
    return ok;
}

bool srv_parse_tokenize(const char *body, size_t len, zarena *a, srv_tok_req *out, srv_err *e) {
    memset(out, 0, sizeof *out);
    json_t *o = parse_object(body, len, e), *c = o ? json_object_get(o, "content") : NULL;
    bool ok = o != NULL;
    if (ok && !json_is_string(c))
        ok = srv_fail(e, 400, BAD, "invalid_type", "'content' is %s: expected a string",
                      c ? type_name(c) : "missing");
    if (ok)
        ok = get_bool(o, "add_special", &out->add_special, e) &&
             get_bool(o, "with_pieces", &out->with_pieces, e);
    if (ok) {
        out->content_len = json_string_length(c);
        out->content = zarena_strndup(a, json_string_value(c), out->content_len);
    }
    json_decref(o);
    return ok;
}

bool srv_parse_detokenize(const char *body, size_t len, zarena *a, srv_tok_req *out, srv_err *e) {
    memset(out, 0, sizeof *out);
    json_t *o = parse_object(body, len, e), *t = o ? json_object_get(o, "tokens") : NULL, *x;
    size_t i;
    bool ok = o != NULL;
    if (ok && !json_is_array(t))
        ok = srv_fail(e, 400, BAD, "invalid_type", "'tokens' is %s: expected an array of token ids",
                      t ? type_name(t) : "missing");
    if (ok && !(out->tokens = zarena_array(a, json_array_size(t) + 1, sizeof *out->tokens)))
        ok = srv_fail(e, 500, "server_error", NULL, "out of memory");
    if (ok) json_array_foreach(t, i, x) {
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX) {
                ok = srv_fail(e, 400, BAD, "invalid_value", "'tokens[%zu]' is %s: expected a token id (>= 0)",
                              i, json_is_integer(x) ? "negative or too large" : type_name(x));
                break;
            }
            out->tokens[out->n_tokens++] = (int32_t)json_integer_value(x);
        }
    json_decref(o);
    return ok;
}

/* ---- responses ----------------------------------------------------------- */

static json_t *usage(int64_t n_prompt, int64_t n_gen) {
    return json_pack("{s:I, s:I, s:I}", "prompt_tokens", (json_int_t)n_prompt, "completion_tokens",
                     (json_int_t)n_gen, "total_tokens", (json_int_t)(n_prompt + n_gen));
}

/* {"id", "object", "created", "model", "choices": [choice]} */
static json_t *envelope(const char *object, const srv_ident *id, json_t *choice) {
    json_t *choices = json_array();
    if (choice) json_array_append_new(choices, choice);
    return json_pack("{s:s, s:s, s:I, s:o, s:o}", "id", id->id, "object", object, "created",
                     (json_int_t)id->created, "model", zjson_str(id->model), "choices", choices);
}

char *srv_response_body(srv_kind kind, const srv_ident *id, const srv_result *r) {
    json_t *text = zjson_strn(r->text, r->len), *choice, *body;
    if (kind == SRV_CHAT)
        choice = json_pack("{s:i, s:{s:s, s:o}, s:s}", "index", 0, "message", "role", "assistant", "content",
                           text, "finish_reason", r->finish);
    else
        choice = json_pack("{s:i, s:o, s:n, s:s}", "index", 0, "text", text, "logprobs", "finish_reason",
                           r->finish);
    if (!choice) return NULL;
    body = envelope(kind == SRV_CHAT ? "chat.completion" : "text_completion", id, choice);
    if (body) json_object_set_new(body, "usage", usage(r->n_prompt, r->n_gen));
    return srv_dump(body);
}

static char *event(json_t *v) {
    char *s = srv_dump(v), *ev = s ? malloc(strlen(s) + 9) : NULL;
    if (ev) sprintf(ev, "data: %s\n\n", s);
    free(s);
    return ev;
}

char *srv_chunk_event(srv_kind kind, const srv_ident *id, const char *text, size_t len, const char *finish) {
    json_t *choice;
    if (kind == SRV_COMPLETION)
        choice = json_pack("{s:i, s:o, s:n, s:s?}", "index", 0, "text",
                           zjson_strn(text ? text : "", text ? len : 0), "logprobs", "finish_reason", finish);
    else if (!text && !finish) /* the opening: the role */
        choice = json_pack("{s:i, s:{s:s, s:s}, s:n}", "index", 0, "delta", "role", "assistant", "content",
                           "", "finish_reason");
    else
        choice = json_pack("{s:i, s:o, s:s?}", "index", 0, "delta",
                           text ? json_pack("{s:o}", "content", zjson_strn(text, len)) : json_object(),
                           "finish_reason", finish);
    if (!choice) return NULL;
    if (!finish) json_object_set_new(choice, "finish_reason", json_null());
    return event(envelope(kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion", id, choice));
}

char *srv_usage_event(srv_kind kind, const srv_ident *id, int64_t n_prompt, int64_t n_gen) {
    json_t *v = envelope(kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion", id, NULL);
    if (v) json_object_set_new(v, "usage", usage(n_prompt, n_gen));
    return event(v);
}
