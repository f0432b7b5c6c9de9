/* fuse-head: the per-head preparation of q and k as one kernel. Qwen3
 * normalizes each head of q and k (RMSNorm over the head), then rotates it
 * (RoPE), and k then goes into the KV cache: three dispatches for k, two for
 * q, each writing a head-wide row for the next to read, with a barrier
 * between each pair. One kernel reads a head once, keeps it on chip, and
 * writes the rotated row (straight into the cache for k). In decode the
 * rows are a few KiB: what this saves is the dispatches and barriers. */
#include <stdio.h>

#include "cost.h"
#include "match.h"

static bool plain(const zir_node *n, zir_op op) {
    return n && n->op == op && !n->parent;
}

/* [rms_norm] rope [kv_store] around rope node r, into body; returns the count. */
static int match(const zir_graph *g, zir_node *r, zir_node **body) {
    int n = 0;
    zir_node *p = r->in[0]->producer;
    if (plain(p, ZOP_RMS_NORM) && p->out->rank == 3 && zpass_sole_consumer(g, p->out) == r) body[n++] = p;
    body[n++] = r;
    zir_node *c = zpass_sole_consumer(g, r->out);
    if (plain(c, ZOP_KV_STORE) && c->in[0] == r->out) body[n++] = c;
    return n;
}

static void record(const zpass_opts *o, zir_node *const *body, int n) {
    zpass_decision *x = zpass_report_add(o->report);
    if (!x) return;
    const zir_value *row = body[0]->out;
    double b = zpass_elems_per_token(row, 1) * o->target->act_bytes;
    *x = (zpass_decision){.layer = body[0]->layer,
                          .group = ZG_ATTN,
                          .phase = o->phase,
                          .what = row->name,
                          .width = row->width,
                          .crossings_before = 2.0 * (n - 1),
                          .crossings_after = 0,
                          .bytes_before = 2.0 * (n - 1) * b,
                          .bytes_after = 0,
                          .fused = true,
                          .chosen = ZKT_HEAD};
    snprintf(x->reason, sizeof x->reason, "%d per-head ops as one kernel: %d dispatches and barriers fewer",
             n, n - 1);
}

zstatus zpass_fuse_head(zir_graph *g, const zpass_opts *o, zdiag *d) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *r = g->nodes[i], *body[3];
        if (r->op != ZOP_ROPE) continue;
        int n = match(g, r, body);
        if (n < 2) continue;
        record(o, body, n);
        zir_kparams kp = {ZKT_HEAD, zcost_token_tile(o), 1};
        zir_node *k = zir_fuse(g, body, n, &kp, d);
        if (!k) return d->code;
        i = k->id;
    }
    return ZOK;
}
