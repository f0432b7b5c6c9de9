/* fuse-dequant: every matmul, expert matmul and embedding lookup whose weight is
 * block-quantized dequantizes inside its own kernel. Staged, a Q4_K weight
 * (0.5625 B/weight) first becomes a 2 B/weight scratch copy that is written
 * and read back: about 8x the weight traffic. The fusion has no price, so it
 * is unconditional; the materialization analysis counts the bytes it saves. */
#include "match.h"

static void mark(zir_node *n) {
    int slot = zpass_flag(n, ZF_W0) ? 0 : zpass_flag(n, ZF_W1) ? 1 : -1;
    zir_kind k = zpass_kind(n);
    if (slot < 0 || !(k == ZK_MATMUL || k == ZK_GATHER || k == ZK_MOE)) return;
    const ztype_info *ti = ztype_get((uint32_t)n->in[slot]->dtype);
    if (ti && (ti->flags & ZTF_QUANT)) n->dequant = ZDQ_FUSED;
}

zstatus zpass_fuse_dequant(zir_graph *g, const zpass_opts *o, zdiag *d) {
    (void)o, (void)d;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *top = g->nodes[i];
        if (top->op != ZOP_KERNEL) mark(top);
        for (int j = 0; top->op == ZOP_KERNEL && j < top->n_body; j++)
            mark(top->body[j]);
    }
    return ZOK;
}
