/* fuse-attn-head: in decode, the preparation of the new token's q and k
 * heads (fuse-head's kernels: per-head RMSNorm, RoPE, and for k the store
 * into the KV cache) moves into the attention kernel's prologue.
 *
 * With one token those kernels move a few KiB and compute next to nothing;
 * each still costs a dispatch and a barrier level between the projections
 * and attention (on the H200, ~5 us each per layer, 36 layers). The
 * attention kernel already holds its query heads on chip and reads the kv
 * head's keys, so it prepares q where it loads it, and the workgroup whose
 * key chunk holds the new position (each of them, where a kv head's query
 * heads are split over workgroups: they store the same bits) prepares k,
 * writes it into the cache and reads it back like every other key
 * (backend/glsl/attn_decode.glsl).
 *
 * Only in decode: with T tokens, the new keys are read by workgroups other
 * than the one that would write them, which needs a barrier between two
 * dispatches, i.e. today's schedule. The decode kernel also wants head_dim
 * to be a multiple of 8 (16-byte cache rows). */
#include <stdio.h>

#include "cost.h"
#include "match.h"

/* A head kernel (or a lone rope) that prepares v for attention kernel a only. */
static zir_node *head_for(const zir_graph *g, const zir_value *v, const zir_node *a, bool store) {
    zir_node *p = v->producer;
    if (!p || p->parent || zpass_sole_consumer(g, v) != a) return NULL;
    if (p->op == ZOP_KERNEL && p->kp.tmpl == ZKT_HEAD)
        return (zpass_tail(p)->op == ZOP_KV_STORE) == store ? p : NULL;
    return !store && p->op == ZOP_ROPE ? p : NULL;
}

static void record(const zpass_opts *o, const zir_node *a, int n) {
    zpass_decision *x = zpass_report_add(o->report);
    if (!x) return;
    *x = (zpass_decision){.layer = a->layer,
                          .group = ZG_ATTN,
                          .phase = o->phase,
                          .what = a->out->name,
                          .width = a->out->width,
                          .crossings_before = 2.0 * n,
                          .crossings_after = 0,
                          .fused = true,
                          .chosen = ZKT_ATTENTION};
    snprintf(x->reason, sizeof x->reason,
             "%s head preparation in the decode attention's prologue: %d dispatch%s and a barrier level fewer",
             n == 2 ? "q and k" : "one", n, n == 1 ? "" : "es");
}

zstatus zpass_fuse_attn_head(zir_graph *g, const zpass_opts *o, zdiag *d) {
    if (o->phase != ZPH_DECODE || g->hp.head_dim % 8) return ZOK;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *a = g->nodes[i];
        if (a->op != ZOP_KERNEL || a->kp.tmpl != ZKT_ATTENTION || a->n_body != 3) continue;
        const zir_node *sc = a->body[0];
        zir_node *qh = head_for(g, sc->in[0], a, false), *kh = head_for(g, sc->in[1], a, true), *top[3];
        int n = 0;
        if (qh && kh && kh->id < qh->id) top[n++] = kh, kh = NULL;
        if (qh) top[n++] = qh;
        if (kh) top[n++] = kh;
        if (!n) continue;
        top[n] = a;
        record(o, a, n);
        zir_kparams kp = a->kp;
        zir_node *k = zir_fuse(g, top, n + 1, &kp, d);
        if (!k) return d->code;
        i = k->id;
    }
    return ZOK;
}
