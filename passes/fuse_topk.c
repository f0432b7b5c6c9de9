/* fuse-topk: the router's top-k (moe_topk) moves into the prologue of the
 * expert gate+up GEMV that reads its route. Each workgroup of that kernel
 * (one (token, slot) pair and a block of rows) ranks its token's E router
 * logits in one subgroup while the others stage x (moe_topk_lib.glsl, the
 * moe_topk kernel's own arithmetic, so the route is the same bit for bit),
 * takes its slot's expert from shared memory, and the workgroup of the
 * token's first slot and first rows writes the route, which the down
 * projection reads. The top-k's dispatch and its barrier go: 7.5 us a
 * layer of the 30B-A3B decode step on the H200 (run 48; run 49 measured
 * the fused kernel 6 us a layer under the two), for E more
 * floats read by each workgroup from L2 (512 B at E 128) and one
 * subgroup's ranking beside the x staging it would wait for anyway.
 *
 * Only where that kernel is a GEMV (decode, the batch schedule's GEMVs):
 * prefill's grouped GEMMs read the route sorted by moe_route, which needs
 * every token's route first. Nothing to price, as with fuse-epilogue: a
 * dispatch goes, no kernel is added, and the route still crosses once for
 * the down projection. */
#include <stdio.h>

#include "cost.h"
#include "match.h"

/* The GEMV kernel whose expert matmuls read route r, when it is the only
 * reader of r before the kernel itself (nothing between them in graph order
 * uses r) and does not rank a route already. */
static zir_node *gate_up_reading(const zir_graph *g, const zir_node *t) {
    const zir_value *r = t->out;
    for (uint32_t i = t->id + 1; i < g->n_nodes; i++) {
        zir_node *k = g->nodes[i];
        bool reads = false;
        for (int j = 0; j < k->n_in; j++)
            reads |= k->in[j] == r;
        if (!reads) continue;
        if (k->op != ZOP_KERNEL || k->kp.tmpl != ZKT_MOE_GATE_UP || k->kp.token_tile > 1) return NULL;
        for (int j = 0; j < k->n_body; j++)
            if (k->body[j]->op == ZOP_MOE_TOPK) return NULL;
        return k;
    }
    return NULL;
}

zstatus zpass_fuse_topk(zir_graph *g, const zpass_opts *o, zdiag *d) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *t = g->nodes[i];
        if (t->op != ZOP_MOE_TOPK || t->out == g->logits) continue;
        zir_node *k = gate_up_reading(g, t);
        if (!k) continue;
        int64_t E = t->in[0]->rank == 2 ? t->in[0]->shape[1] : 0;
        zpass_decision *x = zpass_record_kept(o, t, t->out, ZKT_MOE_GATE_UP);
        if (x) {
            /* the route: written by the top-k, read by the GEMV and the down
             * projection -> written by the GEMV, read by the down projection */
            double b = x->bytes_before / 2;
            x->crossings_before = 3, x->crossings_after = 2;
            x->bytes_before = 3 * b, x->bytes_after = 2 * b;
            snprintf(x->reason, sizeof x->reason,
                     "top-k ranked in the prologue of the expert gate+up GEMV '%s' (each workgroup reads its "
                     "token's %lld router logits): one dispatch and its barrier fewer",
                     k->out->name, (long long)E);
        }
        /* the route leaves the kernel for the down projection (and any other
         * reader) unless the GEMV is its only one */
        bool outside = t->out->n_uses > 2;
        zir_node *body[2] = {t, k}, *outs[1] = {t};
        zir_node *kn = zir_fuse_outs(g, body, 2, outs, outside ? 1 : 0, &k->kp, d);
        if (!kn) return d->code;
        i = kn->id;
    }
    return ZOK;
}
