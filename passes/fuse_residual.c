/* fuse-residual: an add whose first operand comes from a matmul kernel used
 * nowhere else runs in that kernel's epilogue: the residual add after the
 * attention output and down projections, and Qwen2's q/k/v biases. The
 * matmul's output never crosses VRAM before the add. */
#include "cost.h"
#include "match.h"

static bool takes_epilogue(const zir_node *p) {
    /* an exported output of a kernel (fuse-qkv) has no epilogue of its own */
    if (p->parent || zpass_kind(zpass_tail(p)) != ZK_MATMUL) return false;
    return p->op != ZOP_KERNEL || p->kp.tmpl == ZKT_MATMUL || p->kp.tmpl == ZKT_MLP;
}

/* The operand index produced by a fusable matmul, or -1. */
static int matmul_operand(const zir_graph *g, const zir_node *add) {
    for (int i = 0; i < 2; i++) {
        const zir_value *v = add->in[i];
        if (v->role == ZR_ACTIVATION && v->producer && takes_epilogue(v->producer) &&
            zpass_sole_consumer(g, v) == add)
            return i;
    }
    return -1;
}

static void record(const zir_graph *g, const zpass_opts *o, const zir_node *add, const zir_value *v) {
    zpass_decision *x = zpass_record_kept(o, add, v, ZKT_MATMUL);
    (void)g;
    if (!x) return;
    snprintf(x->reason, sizeof x->reason, "add done in the epilogue of the matmul producing '%s'", v->name);
}

zstatus zpass_fuse_residual(zir_graph *g, const zpass_opts *o, zdiag *d) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *add = g->nodes[i];
        if (add->op == ZOP_KERNEL || !zpass_flag(add, ZF_SUM) || add->n_in != 2) continue;
        int k = matmul_operand(g, add);
        if (k < 0) continue;
        zir_node *p = add->in[k]->producer;
        zir_kparams kp = p->op == ZOP_KERNEL ? p->kp : (zir_kparams){ZKT_MATMUL, zcost_token_tile(o), 1};
        zir_node *body[2] = {p, add};
        record(g, o, add, add->in[k]);
        zir_node *kn = zir_fuse(g, body, 2, &kp, d);
        if (!kn) return d->code;
        i = kn->id;
    }
    return ZOK;
}
