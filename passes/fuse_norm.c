/* fuse-norm: an RMSNorm whose output feeds exactly one matmul kernel (as its
 * activation operand) moves into that kernel's prologue: the kernel reads the
 * hidden state, computes the row's scale, and the normalized copy never
 * crosses VRAM (one write and one read of a hidden-wide value saved). A norm
 * feeding several kernels (q, k and v) stays: fusing would recompute it in
 * each. */
#include "cost.h"
#include "match.h"

static bool takes_prologue(const zir_node *c, const zir_value *h) {
    const zir_node *head = zpass_head(c);
    if (zpass_kind(head) != ZK_MATMUL || head->in[0] != h) return false;
    if (c->op != ZOP_KERNEL) return true;
    return c->kp.tmpl == ZKT_MATMUL || c->kp.tmpl == ZKT_GATE_UP_SWIGLU || c->kp.tmpl == ZKT_MLP;
}

static void record(const zir_graph *g, const zpass_opts *o, const zir_node *n, bool fused, int consumers) {
    zpass_decision *x = zpass_report_add(o->report);
    if (!x) return;
    double b = (double)g->hp.n_embd * o->target->act_bytes;
    *x = (zpass_decision){.layer = n->layer,
                          .group = n->group,
                          .phase = o->phase,
                          .what = n->out->name,
                          .width = n->out->width,
                          .crossings_before = 1 + consumers,
                          .crossings_after = fused ? 0 : 1 + consumers,
                          .fused = fused,
                          .chosen = ZKT_MATMUL};
    x->bytes_before = x->crossings_before * b;
    x->bytes_after = x->crossings_after * b;
    if (fused)
        snprintf(x->reason, sizeof x->reason, "norm computed in the prologue of its only consumer");
    else
        snprintf(x->reason, sizeof x->reason, "feeds %d kernels: fusing would recompute the norm in each",
                 consumers);
}

zstatus zpass_fuse_norm(zir_graph *g, const zpass_opts *o, zdiag *d) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *n = g->nodes[i];
        if (n->op == ZOP_KERNEL || zpass_kind(n) != ZK_NORM || !zpass_flag(n, ZF_W1) || n->out->rank != 2)
            continue;
        zir_node *c = zpass_sole_consumer(g, n->out);
        if (!c || !takes_prologue(c, n->out)) {
            record(g, o, n, false, zpass_consumer_count(g, n->out));
            continue;
        }
        zir_kparams kp = c->op == ZOP_KERNEL ? c->kp : (zir_kparams){ZKT_MATMUL, zcost_token_tile(o), 1};
        zir_node *body[2] = {n, c};
        zir_node *k = zir_fuse(g, body, 2, &kp, d);
        if (!k) return d->code;
        record(g, o, n, true, 1);
        i = k->id;
    }
    return ZOK;
}
