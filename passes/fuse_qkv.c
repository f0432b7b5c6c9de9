/* fuse-qkv: in decode, the matmuls that read one normed row (q, k and v
 * of an attention block) become one GEMV over their concatenated rows:
 * a kernel of several outputs (template matmul_rows), whose prologue
 * computes the norm once and whose segments of rows each write their own
 * destination (q, k, and v, which fuse-store then sends straight into the
 * V cache). Without it, fuse-norm gives each matmul a copy of the norm:
 * three dispatches, each reading x and the norm weight.
 *
 * A segment is a plain matmul whose output is read only through one view
 * (the reshape to heads): a bias add (qwen2) belongs in a per-matmul
 * epilogue, which the horizontal GEMV does not have. The segments share
 * one weight type, so that the GEMV keeps the type's own group layout
 * (matmul_gemv.glsl's GMODE); a matmul of another type (v in q6_K beside
 * q4_K q and k, on Q4_K_M's use_more_bits layers) keeps a GEMV of its own,
 * with its own copy of the norm. The cost model prices the choice:
 * dispatches and x reads saved, the same weight bytes either way.
 *
 * Decode, and a batch step whose matmuls are multi-row GEMVs
 * (zpass_opts.batch_rows; matmul_gemvn.glsl has the segments): a prefill
 * GEMM tile is already shared by its tokens, and the tensor-core GEMM has
 * no per-segment epilogue. */
#include <stdio.h>

#include "cost.h"
#include "match.h"

/* Whether matmul c can be a segment: its output is read through one view
 * only, and is not the graph's output. */
static bool segment_ok(const zir_graph *g, const zir_node *c) {
    const zir_node *u = zpass_sole_consumer(g, c->out);
    return c->out != g->logits && u && u->op != ZOP_KERNEL && zpass_flag(u, ZF_VIEW);
}

/* The segments: the largest group of eligible consumers of one weight type
 * (the first group on a tie), in graph order, at most ZIR_MAX_SEGMENTS. */
static int segments(const zir_graph *g, zir_node *const *c, int nc, zir_node **seg) {
    bool ok[ZPASS_MAX_MATMULS];
    int best = -1, best_n = 0;
    for (int j = 0; j < nc; j++)
        ok[j] = segment_ok(g, c[j]);
    for (int j = 0; j < nc; j++) {
        int same = 0;
        for (int i = 0; i < nc; i++)
            same += ok[i] && ok[j] && c[i]->in[1]->dtype == c[j]->in[1]->dtype;
        if (same > best_n) best = j, best_n = same;
    }
    int ns = 0;
    for (int i = 0; best >= 0 && i < nc && ns < ZIR_MAX_SEGMENTS; i++)
        if (ok[i] && c[i]->in[1]->dtype == c[best]->in[1]->dtype) seg[ns++] = c[i];
    return ns;
}

static void record(const zpass_opts *o, const zir_node *n, const zcost_option *opt, int pick, int ns, int nc,
                   const char *why) {
    zpass_decision *x = zcost_record(o, n, n->out, opt, pick);
    if (!x) return;
    if (ns < 2)
        snprintf(x->reason, sizeof x->reason,
                 "%d matmuls read the norm, but not two of one weight type whose outputs are read "
                 "through a view only: nothing to fuse",
                 nc);
    else
        snprintf(x->reason, sizeof x->reason, "%d of its %d matmuls %s: %s", ns, nc,
                 pick ? "as one GEMV over their rows" : "kept as GEMVs of their own", why);
}

/* Gives the consumers that are not segments their own copy of the norm,
 * then moves the segments right after the norm and fuses them. */
static zir_node *fuse_rows(zir_graph *g, const zpass_opts *o, zir_node *n, zir_node **c, int nc,
                           zir_node **seg, int ns, zdiag *d) {
    for (int j = nc - 1; j >= 0; j--) {
        bool member = false;
        for (int i = 0; i < ns; i++)
            member |= seg[i] == c[j];
        if (!member && !zpass_norm_copy_into(g, o, n, c[j], d)) return NULL;
    }
    zir_node *body[ZPASS_MAX_MATMULS + 1] = {n};
    for (int i = 0; i < ns; i++) {
        zir_node_move(g, seg[i], n->id + 1 + (uint32_t)i);
        body[1 + i] = seg[i];
    }
    zir_kparams kp = {ZKT_MATMUL_ROWS, zcost_token_tile(o), 1};
    return zir_fuse_outs(g, body, ns + 1, seg, ns - 1, &kp, d);
}

zstatus zpass_fuse_qkv(zir_graph *g, const zpass_opts *o, zdiag *d) {
    if (o->phase != ZPH_DECODE && !zcost_gemv_batch(o)) return ZOK;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *n = g->nodes[i], *c[ZPASS_MAX_MATMULS], *seg[ZPASS_MAX_MATMULS];
        if (n->op == ZOP_KERNEL || zpass_kind(n) != ZK_NORM || !zpass_flag(n, ZF_W1) || n->out->rank != 2)
            continue;
        int nc = zpass_matmul_consumers(g, n->out, c);
        if (!nc) continue;
        int ns = segments(g, c, nc, seg);
        zcost_rows r = {n->out->shape[1], ns, 0, zpass_weight_bytes(n->in[1])};
        for (int j = 0; j < ns; j++)
            r.w_bytes += zpass_weight_bytes(seg[j]->in[1]);
        zcost_option opt[ZCOST_ROWS_OPTIONS];
        zcost_price_rows(o, &r, opt);
        char why[240];
        int pick = ns >= 2 ? zcost_choose(o, opt, ZCOST_ROWS_OPTIONS, why, sizeof why) : 0;
        record(o, n, opt, pick, ns, nc, why);
        if (!pick) continue;
        zir_node *k = fuse_rows(g, o, n, c, nc, seg, ns, d);
        if (!k) return d->code;
        i = k->id;
    }
    return ZOK;
}
