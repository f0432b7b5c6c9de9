/* zarena: a bump allocator. Everything a graph, a parsed file or a plan owns
 * lives in one arena and is released at once with zarena_free: no scattered
 * free() calls, and no ownership questions. */
#ifndef ZINC_ARENA_H
#define ZINC_ARENA_H

#include <stddef.h>

typedef struct zarena zarena;

zarena *zarena_new(void);
void zarena_free(zarena *a);

/* Zeroed, 16-byte aligned; NULL when the host is out of memory or n is absurd. */
void *zarena_alloc(zarena *a, size_t n);
/* Zeroed array of count elements of size bytes, with an overflow check. */
void *zarena_array(zarena *a, size_t count, size_t size);
char *zarena_strdup(zarena *a, const char *s);
char *zarena_strndup(zarena *a, const char *s, size_t n);
char *zarena_printf(zarena *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Bytes handed out so far (for reports and tests). */
size_t zarena_used(const zarena *a);

#endif
