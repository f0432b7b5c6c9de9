/* zinc serve: an OpenAI-compatible HTTP server (docs/server.md).
 *
 *   serve_api.c    requests (JSON, through jansson) to parameters, and the
 *                  response bodies; no HTTP, no device: what fuzz_serve runs
 *   serve_sched.c  the slots (one zrt sequence each: a KV cache, a sampler),
 *                  the queue and the scheduler thread that interleaves their
 *                  steps on the device
 *   cmd_serve.c    the command line and HTTP (libmicrohttpd) */
#ifndef ZINC_SERVE_H
#define ZINC_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../ir/arena.h"
#include "../ir/json.h" /* zjson_strn: text that may not be UTF-8 */
#include "../runtime/chat.h"
#include "../runtime/sampler.h"

enum { SRV_MAX_STOPS = 8, SRV_MAX_STOP_LEN = 256, SRV_MAX_MESSAGES = 4096 };

typedef enum srv_kind { SRV_CHAT, SRV_COMPLETION } srv_kind;

/* An error as the client sees it: an HTTP status and OpenAI's error body
 * {"error": {"message", "type", "code"}}. */
typedef struct srv_err {
    int status;       /* 400, 401, 404, 413, 503, ... */
    const char *type; /* "invalid_request_error", "authentication_error", "server_error", ... */
    const char *code; /* a short machine-readable reason, or NULL */
    char msg[512];
} srv_err;

/* Fills e and returns false (for `return srv_fail(...)`). */
bool srv_fail(srv_err *e, int status, const char *type, const char *code, const char *fmt, ...) ZPRINTF(5, 6);

/* What the server accepts, for validation. */
typedef struct srv_limits {
    const char *model; /* the served model's name: a request naming another is refused */
} srv_limits;

/* A generation request, its strings in the arena it was parsed into. */
typedef struct srv_req {
    srv_kind kind;
    zrt_chat_msg *msgs; /* chat: messages[0..n_msgs) */
    size_t n_msgs;
    const char *prompt; /* completion: the text (may hold NULs: prompt_len bytes) */
    size_t prompt_len;
    int64_t max_tokens; /* -1: until the slot's context is full */
    zrt_sample_params sp;
    const char *stop[SRV_MAX_STOPS];
    int n_stop;
    bool stream, include_usage;
    bool ignore_eos; /* llama-server's: end-of-generation tokens are never drawn */
    const char *model; /* as given, or the served one */
} srv_req;

/* Parses a body of /v1/chat/completions or /v1/completions. false: e says
 * why (400 for bad JSON or fields, 401 for another model). */
bool srv_parse_request(srv_kind kind, const char *body, size_t len, const srv_limits *lim, zarena *a,
                       srv_req *out, srv_err *e);

/* /tokenize {"content", "add_special", "with_pieces"} and /detokenize
 * {"tokens"}: llama-server's shapes. */
typedef struct srv_tok_req {
    const char *content;
    size_t content_len;
    bool add_special, with_pieces;
    int32_t *tokens; /* detokenize */
    size_t n_tokens;
} srv_tok_req;
bool srv_parse_tokenize(const char *body, size_t len, zarena *a, srv_tok_req *out, srv_err *e);
bool srv_parse_detokenize(const char *body, size_t len, zarena *a, srv_tok_req *out, srv_err *e);

/* The error body of e, NUL-terminated, malloc'd. */
char *srv_error_body(const srv_err *e);

/* A finished generation, for the response bodies. */
typedef struct srv_result {
    const char *text;
    size_t len;
    const char *finish; /* "stop" or "length" */
    int64_t n_prompt, n_gen;
} srv_result;

/* The identity of one response: its id ("chatcmpl-N" / "cmpl-N"), the
 * time it was created and the model. */
typedef struct srv_ident {
    char id[48];
    int64_t created;
    const char *model;
} srv_ident;

/* The whole body of a non-streaming response (malloc'd; NULL on no memory). */
char *srv_response_body(srv_kind kind, const srv_ident *id, const srv_result *r);
/* One server-sent event of a stream ("data: {...}\n\n", malloc'd): a piece
 * of text, the opening of a chat reply (role only: text NULL, finish NULL),
 * or the last chunk (finish set). */
char *srv_chunk_event(srv_kind kind, const srv_ident *id, const char *text, size_t len, const char *finish);
/* The usage-only chunk (stream_options.include_usage). */
char *srv_usage_event(srv_kind kind, const srv_ident *id, int64_t n_prompt, int64_t n_gen);

/* Serializes a jansson value compactly and frees it (NULL-safe). */
char *srv_dump(json_t *v);

/* ---- slots and the scheduler (serve_sched.c) ------------------------------ */

typedef struct zrt zrt;
typedef struct zrt_tok zrt_tok;
typedef struct srv srv;
typedef struct srv_job srv_job;

typedef struct srv_opts {
    int parallel;  /* slots: sequences generating at once */
    uint32_t ctx;  /* positions per slot (prompt + reply), at most the plan's */
    int queue_max; /* requests waiting for a slot before 503 */
    bool batch;    /* decode every generating slot in one batch step (the plan has the schedule) */
} srv_opts;

/* Opens n slots on r (one zrt sequence each) and starts the scheduler
 * thread. r stays the caller's; close the srv first. */
zstatus srv_open(zrt *r, const zrt_tok *tok, const srv_opts *o, srv **out, zdiag *d);
void srv_close(srv *s);
/* Whether the scheduler is up (GET /health). */
bool srv_ready(const srv *s);

/* Queues a generation of prompt[0..n) with rq's parameters. NULL with e
 * set: the prompt does not fit a slot (400), or the queue is full (503). The
 * job is the caller's until srv_release. */
srv_job *srv_submit(srv *s, const int32_t *prompt, size_t n, const srv_req *rq, srv_err *e);

/* What a job has produced since the caller last asked. */
typedef struct srv_news {
    char *text; /* new text, malloc'd (NULL when none) */
    size_t len;
    bool done;
    const char *finish; /* "stop" / "length" once done; NULL on an error */
    const char *error;  /* why it failed (stays valid until srv_release) */
    int64_t n_prompt, n_gen;
} srv_news;

/* Waits up to timeout_ms for new text or the end; *taken counts the bytes
 * handed out so far (start at 0). */
void srv_wait(srv_job *j, int timeout_ms, size_t *taken, srv_news *n);
/* Lets go of a job: a job still running is cancelled and its slot freed at
 * the next step (a client that went away). */
void srv_release(srv_job *j);

/* Counts a finished HTTP request by endpoint and status, for /metrics. */
void srv_count_request(srv *s, const char *endpoint, int status);
/* The Prometheus text of /metrics (malloc'd). */
char *srv_metrics(srv *s);

#endif
