/* Helpers shared by the Criterion tests: temporary paths, random data,
 * and running the built command-line tools. */
#ifndef ZINC_TESTUTIL_H
#define ZINC_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A fresh path under a per-process temporary directory; the name is kept. */
const char *tu_tmp(const char *name);

/* xorshift64* generator: tests seed it explicitly so failures reproduce. */
typedef struct tu_rng {
    uint64_t s;
} tu_rng;
tu_rng tu_rng_seed(uint64_t seed);
uint64_t tu_next(tu_rng *r);
float tu_uniform(tu_rng *r, float lo, float hi);
float tu_normal(tu_rng *r);

/* Runs a shell command line, capturing stdout+stderr into a malloc'd string
 * (*out, may be NULL). Returns the exit status (or -1). */
int tu_run(char **out, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Reads a whole file into a malloc'd buffer; NULL on failure. */
void *tu_read_file(const char *path, size_t *size);
int tu_write_file(const char *path, const void *data, size_t size);

/* Whether top[0..n) is the GPU's top-k of row[0..V) (backend/glsl/topk.glsl):
 * every logit at or above the k-th largest, none missing, each with its
 * row's value, in any order. false with why (what differs) otherwise. */
struct zrt_sample_cand;
bool tu_top_matches(const struct zrt_sample_cand *top, size_t n, const float *row, int V, int k, char *why,
                    size_t why_len);

#endif
