/* fuse-norm: an RMSNorm whose output feeds matmul kernels (as their
 * activation operand) moves into those kernels' prologues: each kernel reads
 * the hidden state, computes the row's scale while it walks K anyway, and
 * the normalized copy never crosses VRAM. A norm feeding several matmuls
 * (q, k and v; a MoE layer's router and its expert gate+up GEMV) is
 * recomputed in each: the sum of squares costs no extra read (the kernels
 * read x instead of the normalized x), and the norm's own dispatch, its
 * write and its barrier go away (run 48: 7.5 us a layer of the 30B-A3B's
 * decode step). A norm with any other consumer stays.
 *
 * Not in prefill on matrix units: there the consumers are tensor-core GEMMs
 * whose every column tile (N / BN of them: 64 for an 8B's q, 192 for its
 * gate+up) would read its 64 rows of x once more for the scales before
 * its first step, and scale each staged element: on the H200 the 2-layer
 * 8B-wide prefill step took 7277 us with the norms in the GEMMs and 5692
 * with them as kernels of their own (88 us for all eight; run 27,
 * docs/performance.md). A batch step's multi-row GEMVs (zpass_opts.batch_rows)
 * are decode's kind of kernel: they keep the prologue. */
#include <stdio.h>

#include "cost.h"
#include "match.h"
static bool takes_prologue(const zir_node *c, const zir_value *h) {
    const zir_node *head = zpass_head(c);
    if (zpass_kind(head) != ZK_MATMUL || head->in[0] != h) return false;
    if (c->op != ZOP_KERNEL) return true;
    return c->kp.tmpl == ZKT_MATMUL || c->kp.tmpl == ZKT_GATE_UP_SWIGLU || c->kp.tmpl == ZKT_MLP;
}

/* Prefill on matrix units: the GEMMs' tiles would each recompute the norm. */
static bool tiles_recompute(const zpass_opts *o, const zir_node *c) {
    if (o->phase != ZPH_PREFILL || !o->target->coopmat || o->mm_type == ZMM_F32 || zcost_gemv_batch(o))
        return false;
    return !c || c->op != ZOP_KERNEL || c->kp.tmpl != ZKT_MLP;
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
    if (fused && consumers == 1)
        snprintf(x->reason, sizeof x->reason, "norm computed in the prologue of its only consumer");
    else if (fused)
        snprintf(x->reason, sizeof x->reason,
                 "norm recomputed in the prologue of each of its %d matmuls (one dispatch and its barrier "
                 "fewer)",
                 consumers);
    else if (tiles_recompute(o, zpass_sole_consumer(g, n->out)))
        snprintf(x->reason, sizeof x->reason,
                 "kept as its own kernel: each column tile of the tensor-core GEMM%s would recompute it "
                 "(x read again for the scales)",
                 consumers > 1 ? "s" : "");
    else
        snprintf(x->reason, sizeof x->reason, "feeds %d kernels, not all matmuls that take a prologue",
                 consumers);
}

/* A decode expert gate+up GEMV kernel (fuse-moe) whose only use of v is as
 * the x of its two expert matmuls (matmul_gemv.glsl stages x normed): 2
 * uses; else what zpass_plain_matmul_reads says (q, k, v; a MoE router). */
static uint32_t prologue_reads(const zir_node *x, const zir_value *v) {
    if (x->op != ZOP_KERNEL || x->kp.tmpl != ZKT_MOE_GATE_UP || x->kp.token_tile > 1 || x->n_body != 3)
        return zpass_plain_matmul_reads(x, v);
    uint32_t as_x = 0;
    for (int j = 0; j < x->n_body; j++)
        for (int k = 0; k < x->body[j]->n_in; k++) {
            if (x->body[j]->in[k] != v) continue;
            if (k != 0 || zir_ops[x->body[j]->op].kind != ZK_MOE || !(zir_ops[x->body[j]->op].flags & ZF_W1))
                return 0;
            as_x++;
        }
    return as_x == 2 ? 2 : 0;
}

/* Splits norm n among its consumers: c[0] keeps n, the others get copies.
 * Returns the kernel of the last consumer. */
static zir_node *split(zir_graph *g, const zpass_opts *o, zir_node *n, zir_node **c, int nc, zdiag *d) {
    zir_node *k = NULL;
    for (int j = nc - 1; j >= 1; j--)
        if (!(k = zpass_norm_copy_into(g, o, n, c[j], d))) return NULL;
    zir_node *body[2] = {n, c[0]};
    zir_kparams kp = c[0]->op == ZOP_KERNEL ? c[0]->kp : (zir_kparams){ZKT_MATMUL, zcost_token_tile(o), 1};
    zir_node *k0 = zir_fuse(g, body, 2, &kp, d);
    return k0 && k && k->id > k0->id ? k : k0;
}

zstatus zpass_fuse_norm(zir_graph *g, const zpass_opts *o, zdiag *d) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *n = g->nodes[i];
        if (n->op == ZOP_KERNEL || zpass_kind(n) != ZK_NORM || !zpass_flag(n, ZF_W1) || n->out->rank != 2)
            continue;
        zir_node *c = zpass_sole_consumer(g, n->out), *many[ZPASS_MAX_MATMULS];
        if (tiles_recompute(o, c)) {
            record(g, o, n, false, zpass_consumer_count(g, n->out));
            continue;
        }
        int nc = c ? 0 : zpass_consumers_of(g, n->out, many, prologue_reads);
        if (nc) {
            record(g, o, n, true, nc);
            zir_node *last = split(g, o, n, many, nc, d);
            if (!last) return d->code;
            i = last->id;
            continue;
        }
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
