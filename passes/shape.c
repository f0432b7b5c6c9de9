/* shape: re-infers every node's output shape in graph order and checks it
 * against the recorded one, so that a transform that rewired an input with a
 * different shape is caught at the pass that did it. */
#include <string.h>

#include "pass.h"

static zstatus check(const zir_node *n, zdiag *d) {
    int rank;
    zdim shape[ZIR_MAX_RANK];
    zstatus s = zir_infer_shape(n, &rank, shape, d);
    if (s) {
        zdiag_prefix(d, "node '%s'", n->out->name);
        return s;
    }
    if (rank != n->out->rank || memcmp(shape, n->out->shape, sizeof(zdim) * (size_t)rank))
        return zdiag_set(d, ZE_INVALID, "node '%s': inputs imply another shape than the one recorded",
                         n->out->name);
    return ZOK;
}

zstatus zpass_shape(zir_graph *g, const zpass_opts *o, zdiag *d) {
    (void)o;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        for (int j = 0; j < (n->op == ZOP_KERNEL ? n->n_body : 1); j++) {
            zstatus s = check(n->op == ZOP_KERNEL ? n->body[j] : n, d);
            if (s) return s;
        }
    }
    return ZOK;
}
