/* fuse-norm-gate: an RMSNorm whose only reader multiplies it by SiLU of a
 * gate (swiglu(gate, norm(x))) as one kernel (ZKT_NORM_GATE). Qwen3.5's
 * delta-net output is normed per value head and gated by SiLU(z) before
 * ssm_out (llama.cpp's build_norm_gated): two dispatches that each read
 * and write the [T, Hv, D] rows, now one that reads x and z once. Nothing
 * to price: the fusion only removes work. */
#include <stdio.h>

#include "cost.h"
#include "match.h"

/* Elements a token of v: [T, constants...], else 0. */
static int64_t per_token(const zir_value *v) {
    if (v->rank < 1 || v->shape[0] != ZDIM_T) return 0;
    int64_t e = 1;
    for (int i = 1; i < v->rank; i++)
        e *= v->shape[i] > 0 ? v->shape[i] : 0;
    return e;
}

zstatus zpass_fuse_norm_gate(zir_graph *g, const zpass_opts *o, zdiag *d) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *u = g->nodes[i];
        if (u->op != ZOP_SWIGLU || u->parent) continue;
        zir_node *p = u->in[1]->producer;
        if (!p || p->op != ZOP_RMS_NORM || p->parent || u->in[0] == u->in[1] ||
            zpass_sole_consumer(g, p->out) != u)
            continue;
        int64_t per = per_token(p->out);
        if (!per || per_token(u->in[0]) != per || per_token(u->out) != per) continue;
        char why[sizeof((zpass_decision *)0)->reason];
        snprintf(
            why, sizeof why,
            "the gate's SiLU product in the norm kernel: one dispatch and barrier fewer, '%s' never stored",
            p->out->name);
        zir_node *k = zpass_fuse_pair(g, o, p, u, ZKT_NORM_GATE, why, d);
        if (!k) return d->code;
        i = k->id;
    }
    return ZOK;
}
