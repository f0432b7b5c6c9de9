/* An independent, deliberately naive forward pass for the tests: it reads
 * the GGUF directly (not the IR), dequantizes whole matrices, computes in
 * double precision, and re-runs the full sequence for every output without a
 * KV cache. It shares no code with the interpreter but the GGUF reader and
 * the dequantizers, which have their own tests. */
#ifndef ZINC_TEST_NAIVE_H
#define ZINC_TEST_NAIVE_H

#include <stdint.h>

#include "frontend/gguf.h"

/* Logits [n][vocab] for teacher-forced tokens; 0 on success, else an error
 * message in err. */
int naive_forward(const gguf_file *f, const int32_t *tokens, int n, double *logits, char *err, size_t errsz);

#endif
