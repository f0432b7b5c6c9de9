/* The CPU reference interpreter: the oracle every kernel and every fused
 * graph is checked against. It executes a graph in fp32 with weights
 * dequantized row by row from their stored type, keeps a KV cache between
 * steps, and favours being obviously right over being fast. */
#ifndef ZINC_INTERP_H
#define ZINC_INTERP_H

#include "ir.h"

typedef struct zir_interp zir_interp;

/* ctx: KV-cache capacity in positions. */
zstatus zir_interp_new(const zir_graph *g, int64_t ctx, zir_interp **out, zdiag *d);
void zir_interp_free(zir_interp *it);

/* Forgets the KV cache: the next step starts at position 0. */
void zir_interp_reset(zir_interp *it);
int64_t zir_interp_pos(const zir_interp *it);

/* Runs one step over n tokens at the current position, appending them to
 * the KV cache. logits (may be NULL) receives [n][n_vocab] floats. */
zstatus zir_interp_step(zir_interp *it, const int32_t *tokens, int64_t n, float *logits, zdiag *d);

/* The contents of a value after the last step (activations and KV caches),
 * with its element count; NULL for weights and inputs. For tests that
 * compare intermediates. */
const float *zir_interp_value(const zir_interp *it, const zir_value *v, int64_t *n_elems);

/* Dequantizes row r of a 2-D weight (or the whole of a 1-D one) into dst. */
zstatus zir_weight_row(const zir_value *w, int64_t r, float *dst, zdiag *d);

#endif
