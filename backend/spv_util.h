/* A growing SPIR-V word buffer, shared by the module rewrites
 * (spv_coopmat.c, spv_idot.c, spv_tensor.c): each writes its module twice,
 * first counting the words (w NULL, cap 0), then into an array of that
 * size. */
#ifndef ZINC_SPV_UTIL_H
#define ZINC_SPV_UTIL_H
#include <stddef.h>
#include <stdint.h>

typedef struct zspv_obuf {
    uint32_t *w;
    size_t n, cap;
} zspv_obuf;

static inline void zspv_put(zspv_obuf *o, uint32_t x) {
    if (o->n < o->cap) o->w[o->n] = x;
    o->n++; /* past cap: caught once at the end */
}
#endif
