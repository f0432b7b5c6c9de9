/* fuse-delta: the delta rule reads q, k and v where the conv left them, and
 * L2-normalizes q and k itself (ZKT_DELTA). Qwen3.5 slices the conv's
 * [T, 2 Hk D + Hv D] output into q, k and v, views each as heads, and
 * L2-normalizes q and k per head (llama.cpp's qwen35.cpp and
 * delta-net-base): five kernels (three copies, two norms) a layer, each a
 * dispatch, a barrier and a round trip of its rows through VRAM, in front
 * of a kernel that loads those rows anyway. The delta kernel instead takes
 * each operand as a column range of a row (a slice is an offset and a row
 * stride) and computes the norm of the head rows it loads (a head of D
 * elements: D squares and one sum, in its prologue). Nothing to price: the
 * fusion only removes work.
 *
 * Per operand (q, k, v: delta_net's inputs 0-2) it absorbs, walking up from
 * the delta rule, an l2_norm (q and k), then a reshape, then a slice, each
 * only when the delta rule is its only reader. */
#include <stdio.h>
#include <stdlib.h>

#include "cost.h"
#include "match.h"

enum { MAX_BODY = 10 };

static int by_id(const void *a, const void *b) {
    uint32_t x = (*(zir_node *const *)a)->id, y = (*(zir_node *const *)b)->id;
    return (x > y) - (x < y);
}

/* The node producing v when it can join the kernel as op: top-level, and
 * read only by the node `reader`. */
static zir_node *absorb(const zir_graph *g, const zir_value *v, zir_op op, const zir_node *reader) {
    zir_node *p = v->producer;
    return p && p->op == op && !p->parent && zpass_sole_consumer(g, v) == reader ? p : NULL;
}

zstatus zpass_fuse_delta(zir_graph *g, const zpass_opts *o, zdiag *d) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *n = g->nodes[i], *body[MAX_BODY];
        if (n->op != ZOP_DELTA_NET || n->parent) continue;
        int nb = 0, norms = 0, slices = 0;
        for (int a = 0; a < 3; a++) {
            const zir_node *reader = n;
            const zir_value *v = n->in[a];
            zir_node *p;
            if (a < 2 && (p = absorb(g, v, ZOP_L2_NORM, reader))) {
                body[nb++] = p, norms++;
                reader = p, v = p->in[0];
            }
            if ((p = absorb(g, v, ZOP_RESHAPE, reader))) {
                body[nb++] = p;
                reader = p, v = p->in[0];
            }
            if ((p = absorb(g, v, ZOP_SLICE, reader)) && p->in[0]->rank == 2) body[nb++] = p, slices++;
        }
        if (!norms && !slices) continue;
        qsort(body, (size_t)nb, sizeof *body, by_id);
        body[nb++] = n;
        zpass_decision *x = zpass_report_add(o->report);
        if (x) {
            double b = zpass_elems_per_token(n->in[0], 1) * o->target->act_bytes;
            *x = (zpass_decision){.layer = n->layer,
                                  .group = n->group,
                                  .phase = o->phase,
                                  .what = n->out->name,
                                  .width = n->out->width,
                                  .crossings_before = 2.0 * (norms + slices),
                                  .crossings_after = 0,
                                  .bytes_before = 2.0 * (norms + slices) * b,
                                  .bytes_after = 0,
                                  .fused = true,
                                  .chosen = ZKT_DELTA};
            snprintf(x->reason, sizeof x->reason,
                     "%d slices read as column ranges and %d l2 norms in the delta rule's prologue: "
                     "%d dispatches and barriers fewer",
                     slices, norms, slices + norms);
        }
        zir_kparams kp = {ZKT_DELTA, zcost_token_tile(o), 1};
        zir_node *k = zir_fuse(g, body, nb, &kp, d);
        if (!k) return d->code;
        i = k->id;
    }
    return ZOK;
}
