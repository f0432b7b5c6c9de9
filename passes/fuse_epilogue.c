/* fuse-epilogue: an elementwise sigmoid, softplus or SiLU of a matmul's
 * output, and then a product by an [N] weight, run in that matmul's
 * epilogue (after its bias or residual add, in the graph's order). In a
 * Qwen3.5 delta-net layer that is beta = sigmoid(x W_beta) and the decay
 * softplus(x W_alpha + dt_bias) * A: three dispatches a layer that each
 * read and write a few floats, at ~3.6 us apiece on the H200 (run 43).
 * The matmul's output never crosses VRAM before them, and no kernel is
 * added, so the fusion only removes: no cost model choice to make. Plain
 * matmul kernels only (a GEMV, GEMM or batch GEMV of one matmul): in
 * decode, where fuse-qkv made beta and alpha segments of the layer's rows
 * GEMV, it took these chains into their segments' epilogues first. */
#include <stdio.h>

#include "cost.h"
#include "match.h"

/* Where the epilogue chain of a matmul kernel stands: 0 the matmul or its
 * add, 1 after a unary, 2 after the product (nothing more fits). */
static int chain_stage(const zir_node *p) {
    const zir_node *t = zpass_tail(p);
    if (t->op == ZOP_MUL) return 2;
    if (zpass_epilogue_unary(t)) return 1;
    if (zpass_kind(t) == ZK_MATMUL || zpass_flag(t, ZF_SUM)) return 0;
    return 2;
}

/* The producer of u's input 0 when u can join its epilogue, else NULL. */
static zir_node *host(const zir_graph *g, const zir_node *u, int max_stage) {
    const zir_value *v = u->in[0];
    zir_node *p = v->producer;
    if (v->role != ZR_ACTIVATION || !p || p->parent || zpass_sole_consumer(g, v) != u || v == g->logits)
        return NULL;
    if (p->op == ZOP_KERNEL ? p->kp.tmpl != ZKT_MATMUL : p->op != ZOP_MATMUL) return NULL;
    if (v->rank != 2 || v->dtype != ZT_F32 || u->out->rank != 2 || u->out->shape[1] != v->shape[1]) return NULL;
    return chain_stage(p) <= max_stage ? p : NULL;
}

/* A product by a weight of the output's width (broadcast over tokens). */
static bool weight_product(const zir_node *u) {
    const zir_value *w = u->in[1];
    return u->op == ZOP_MUL && w->role == ZR_WEIGHT && w->rank == 1 && w->dtype == ZT_F32 &&
           w->shape[0] == u->in[0]->shape[1];
}

zstatus zpass_fuse_epilogue(zir_graph *g, const zpass_opts *o, zdiag *d) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *u = g->nodes[i], *p = NULL;
        if (zpass_epilogue_unary(u))
            p = host(g, u, 0);
        else if (weight_product(u))
            p = host(g, u, 1);
        if (!p) continue;
        zpass_decision *x = zpass_record_kept(o, u, u->in[0], ZKT_MATMUL);
        if (x)
            snprintf(x->reason, sizeof x->reason, "%s done in the epilogue of the matmul producing '%s'",
                     zir_ops[u->op].name, u->in[0]->name);
        zir_kparams kp = p->op == ZOP_KERNEL ? p->kp : (zir_kparams){ZKT_MATMUL, zcost_token_tile(o), 1};
        zir_node *body[2] = {p, u};
        zir_node *kn = zir_fuse(g, body, 2, &kp, d);
        if (!kn) return d->code;
        i = kn->id;
    }
    return ZOK;
}
