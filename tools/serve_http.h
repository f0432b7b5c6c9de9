/* zinc serve's HTTP side (serve_http.c): the endpoints on libmicrohttpd. */
#ifndef ZINC_SERVE_HTTP_H
#define ZINC_SERVE_HTTP_H

#include <stdint.h>
#include <sys/socket.h>

#include "../runtime/chat.h"
#include "../runtime/tokenizer.h"
#include "serve.h"

typedef struct srv_http {
    /* set before srv_http_start */
    const char *host;
    int port;
    const char *api_key; /* NULL: none asked */
    size_t max_body;
    int timeout_s, max_connections;
    bool verbose;
    /* set by the loader before it publishes s */
    const char *model; /* the name clients give as "model" */
    zrt_tok *tok;
    zrt_chat_format fmt;
    uint32_t n_vocab, ctx;
    int parallel;
    int64_t created;
    srv *s; /* NULL while the model loads: requests get 503 (atomic) */
    /* the server's */
    struct MHD_Daemon *daemon;
    uint16_t bound_port;
    volatile int stopping;
    unsigned long long next_id;
} srv_http;

/* Starts listening (libmicrohttpd's threads answer from then on). */
zstatus srv_http_start(srv_http *h, zdiag *d);
/* Stops listening and waits for the connections' threads. */
void srv_http_stop(srv_http *h);
/* The address for host ("127.0.0.1", "::1", "0.0.0.0", "localhost"...). */
zstatus srv_http_addr(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len, zdiag *d);

/* The chat page (tools/serve_page.html), embedded at build time. */
extern const char srv_page[];
extern const size_t srv_page_len;

#endif
