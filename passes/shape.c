/* shape: re-infers every node's output shape in graph order and checks it
 * against the recorded one, so that a transform that rewired an input with a
 * different shape is caught at the pass that did it. */
#include "pass.h"

zstatus zpass_shape(zir_graph *g, const zpass_opts *o, zdiag *d) {
    (void)o;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        for (int j = 0; j < (n->op == ZOP_KERNEL ? n->n_body : 1); j++) {
            zstatus s = zir_check_shape(n->op == ZOP_KERNEL ? n->body[j] : n, ZE_INVALID, d);
            if (s) return s;
        }
    }
    return ZOK;
}
