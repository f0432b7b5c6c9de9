/* fuse-conv: a delta-net layer's causal conv and the SiLU of its output as
 * one kernel (ZKT_CONV). Qwen3.5 (llama.cpp's qwen35.cpp) applies SiLU to
 * every channel the conv writes, and nothing else reads the conv's output:
 * the conv kernel computes each output in registers anyway, so SiLU there
 * removes a dispatch, a barrier and a [T, C] round trip through VRAM (C is
 * 8192 channels at the Qwen3.5-9B shape). Nothing to price: the fusion only
 * removes work. */
#include <stdio.h>

#include "cost.h"
#include "match.h"

zstatus zpass_fuse_conv(zir_graph *g, const zpass_opts *o, zdiag *d) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *u = g->nodes[i];
        if (u->op != ZOP_SILU || u->parent) continue;
        zir_node *p = u->in[0]->producer;
        if (!p || p->op != ZOP_SSM_CONV || p->parent || zpass_sole_consumer(g, p->out) != u) continue;
        char why[sizeof((zpass_decision *)0)->reason];
        snprintf(why, sizeof why,
                 "silu on the conv kernel's outputs: one dispatch and barrier fewer, '%s' never stored",
                 p->out->name);
        zir_node *k = zpass_fuse_pair(g, o, p, u, ZKT_CONV, why, d);
        if (!k) return d->code;
        i = k->id;
    }
    return ZOK;
}
