/* fuse-store: a projection whose only use is the KV cache writes the cache
 * itself. v (and k, where no head kernel takes it) goes matmul -> reshape
 * to heads -> kv_store: two kernels, and the projection's row crosses VRAM
 * twice. The matmul kernel's epilogue can store its row straight into the
 * cache at the step's position (converted to the cache's type), which
 * saves the dispatch, its barrier, and the round trip. In decode that is
 * one of the ten dispatches of a layer. */
#include <stdio.h>

#include "cost.h"
#include "match.h"

/* The projection (a plain matmul or a [norm] matmul [bias] kernel) behind a
 * kv_store through a reshape, each the only use of the one before. */
static zir_node *projection(const zir_graph *g, const zir_node *st, zir_node **reshape) {
    const zir_value *in = st->in[0];
    zir_node *r = in->producer;
    if (!r || r->op != ZOP_RESHAPE || r->parent || zpass_sole_consumer(g, in) != st) return NULL;
    zir_node *p = r->in[0]->producer;
    if (!p || p->parent || zpass_sole_consumer(g, r->in[0]) != r) return NULL;
    if (p->op != ZOP_MATMUL &&
        !(p->op == ZOP_KERNEL && (p->kp.tmpl == ZKT_MATMUL || p->kp.tmpl == ZKT_MATMUL_ROWS)))
        return NULL;
    /* the cache is one more input: a rows kernel with segment epilogues
     * (fuse-qkv) may have none left */
    if (p->op == ZOP_KERNEL && p->n_in >= ZIR_MAX_IN) return NULL;
    *reshape = r;
    return p;
}

static void record(const zpass_opts *o, const zir_node *st, const zir_value *row) {
    zpass_decision *x = zpass_record_kept(o, st, row, ZKT_MATMUL);
    if (!x) return;
    snprintf(x->reason, sizeof x->reason,
             "the projection stores '%s' into the KV cache itself: a dispatch fewer", row->name);
}

zstatus zpass_fuse_store(zir_graph *g, const zpass_opts *o, zdiag *d) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *st = g->nodes[i], *r = NULL;
        if (st->op != ZOP_KV_STORE) continue;
        zir_node *p = projection(g, st, &r);
        if (!p) continue;
        zir_kparams kp = p->op == ZOP_KERNEL ? p->kp : (zir_kparams){ZKT_MATMUL, zcost_token_tile(o), 1};
        /* A kernel of several outputs: the store joins it where it stands,
         * before the readers of its other outputs. */
        if (p->op == ZOP_KERNEL && p->kp.tmpl == ZKT_MATMUL_ROWS) {
            zir_node_move(g, r, p->id + 1);
            zir_node_move(g, st, p->id + 2);
        }
        zir_node *body[3] = {p, r, st};
        record(o, st, r->in[0]);
        zir_node *kn = zir_fuse(g, body, 3, &kp, d);
        if (!kn) return d->code;
        i = kn->id;
    }
    return ZOK;
}
