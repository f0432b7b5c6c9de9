/* JSON output through jansson, shared by every writer: zincc --report=json,
 * zinc bench -o json and zinc serve's bodies. jansson builds and escapes;
 * two things it refuses are decided here once:
 *
 *   strings  jansson takes UTF-8 only, but a model path, an architecture or a
 *            tensor name read from a GGUF can hold any bytes. A byte that does
 *            not start a valid sequence becomes U+FFFD and the next byte is
 *            tried (overlong forms, surrogates and code points past U+10FFFF
 *            are invalid too), so the output is always valid JSON.
 *   numbers  JSON has no NaN or infinity and json_real refuses them: a number
 *            that is not finite is written as null. */
#ifndef ZINC_JSON_H
#define ZINC_JSON_H

#include <jansson.h>
#include <stdio.h>

#include "zstatus.h"

/* A JSON string of s (NULL gives ""), or of s[0..n); NULL on no memory. */
json_t *zjson_str(const char *s);
json_t *zjson_strn(const char *s, size_t n);
/* A JSON real, or null when v is NaN or infinite. */
json_t *zjson_num(double v);

/* Writes v (NULL: out of memory) and a newline to out, then frees v.
 * flags are json_dumpf's (JSON_INDENT, JSON_REAL_PRECISION...). */
zstatus zjson_write(json_t *v, FILE *out, size_t flags, zdiag *d);

#endif
