#include "arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Chunks form a singly linked list; a request larger than the default chunk
 * gets a chunk of its own so that big tables do not waste a half-used chunk. */
typedef struct chunk {
    struct chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
} chunk;

struct zarena {
    chunk *head;
    size_t total;
};

enum { CHUNK_BYTES = 64 * 1024 };

zarena *zarena_new(void) {
    return calloc(1, sizeof(zarena));
}

void zarena_free(zarena *a) {
    if (!a) return;
    for (chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

static chunk *chunk_new(size_t cap) {
    chunk *c = malloc(sizeof(chunk) + cap);
    if (!c) return NULL;
    c->next = NULL;
    c->cap = cap;
    c->used = 0;
    return c;
}

void *zarena_alloc(zarena *a, size_t n) {
    if (!a || n > (SIZE_MAX >> 2)) return NULL;
    size_t need = (n + 15) & ~(size_t)15;
    if (need == 0) need = 16;
    chunk *c = a->head;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > CHUNK_BYTES ? need : CHUNK_BYTES;
        chunk *nc = chunk_new(cap);
        if (!nc) return NULL;
        if (c && need > CHUNK_BYTES) { /* keep filling the current chunk afterwards */
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            a->head = nc;
        }
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += need;
    a->total += need;
    memset(p, 0, n);
    return p;
}

void *zarena_array(zarena *a, size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) return NULL;
    return zarena_alloc(a, count * size);
}

char *zarena_strndup(zarena *a, const char *s, size_t n) {
    char *p = zarena_alloc(a, n + 1);
    if (p) memcpy(p, s, n);
    return p;
}

char *zarena_strdup(zarena *a, const char *s) {
    return zarena_strndup(a, s, strlen(s));
}

char *zarena_printf(zarena *a, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = n >= 0 ? zarena_alloc(a, (size_t)n + 1) : NULL;
    if (p) vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

size_t zarena_used(const zarena *a) {
    return a ? a->total : 0;
}
