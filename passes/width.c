/* width: marks every activation and KV cache with its elements per token
 * relative to the hidden size (3.0 for a 12288-wide MLP intermediate over a
 * 4096 hidden state). Attention scores grow with the context, so they are
 * measured at the context the options assume. */
#include "match.h"

zstatus zpass_width(zir_graph *g, const zpass_opts *o, zdiag *d) {
    if (g->hp.n_embd <= 0) return zdiag_set(d, ZE_INTERNAL, "graph has no hidden size");
    for (uint32_t i = 0; i < g->n_values; i++) {
        zir_value *v = g->values[i];
        if (v->role == ZR_ACTIVATION || v->role == ZR_KV)
            v->width = (float)(zpass_elems_per_token(v, o->ctx) / g->hp.n_embd);
    }
    return ZOK;
}
