/* fuse-qkv: in decode, the matmuls that read one normed row (q, k and v
 * of an attention block; qkv, z, beta and alpha of a Qwen3.5 delta-net
 * layer) become one GEMV over their concatenated rows: a kernel of several
 * outputs (template matmul_rows), whose prologue computes the norm once
 * and whose segments of rows each write their own destination (q, k, and
 * v, which fuse-store then sends straight into the V cache). Without it,
 * fuse-norm gives each matmul a copy of the norm: a dispatch each, each
 * reading x and the norm weight.
 *
 * A segment is a plain matmul whose output leaves the kernel as it is
 * (exported: read through a view, by the delta-net's conv, by anything),
 * or through the chain fuse-epilogue would have run in its own GEMV's
 * epilogue: [add of an [N] bias] sigmoid|softplus|silu [product by an [N]
 * weight] (beta = sigmoid(x W_beta); the decay softplus(x W_alpha +
 * dt_bias) * A), taken here into the segment's own epilogue. The two
 * 32-row gates of a 9B delta layer cost ~8 us a call for 74 KB of weights
 * (run 51: dispatch and latency, not bytes), which a segment of the qkv
 * and z GEMV does not pay. A matmul whose only reader is an add or a
 * product of another kind (a residual, or a bias with no activation
 * after it: qwen2's q, k and v) is not a segment: fuse-residual gives it
 * a GEMV with the add in its epilogue, as before this pass took chains
 * (qwen2's three biases and v's store would also take the kernel past
 * ZIR_MAX_IN inputs). The graph's logits are never a segment.
 *
 * The segments share one weight type, so that the GEMV keeps the type's
 * own group layout (matmul_gemv.glsl's GMODE); a matmul of another type (v
 * in q6_K beside q4_K q and k on Q4_K_M's use_more_bits layers; the 9B's
 * q6_K qkv beside q4_K z, beta and alpha) keeps a GEMV of its own, with its
 * own copy of the norm. The cost model prices the choice: dispatches and
 * x reads saved, the same weight bytes either way.
 * ZINC_ROWS_EXPORT=0 takes only segments read through one view, with no
 * epilogue (the rule before the delta-net's segments), to measure them.
 *
 * Decode, and a batch step whose matmuls are multi-row GEMVs
 * (zpass_opts.batch_rows; matmul_gemvn.glsl has the segments): a prefill
 * GEMM tile is already shared by its tokens, and the tensor-core GEMM has
 * no per-segment epilogue. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "match.h"

/* A segment: its matmul and the epilogue chain after it, in graph order. */
typedef struct seg {
    zir_node *mm, *chain[3];
    int n_chain;
} seg;

/* The last node of a segment: its output leaves the kernel. */
static zir_node *seg_end(const seg *s) {
    return s->n_chain ? s->chain[s->n_chain - 1] : s->mm;
}

/* An f32 [N] weight, read by element: a bias or the product's weight. */
static bool row_weight(const zir_value *w, int64_t N) {
    return w->role == ZR_WEIGHT && w->rank == 1 && w->dtype == ZT_F32 && w->shape[0] == N;
}

/* v's only reader, a plain top-level node taking v as input 0; else NULL. */
static zir_node *only_reader(const zir_graph *g, const zir_value *v) {
    zir_node *u = zpass_sole_consumer(g, v);
    return u && u->op != ZOP_KERNEL && u->in[0] == v ? u : NULL;
}

/* Segment s of matmul c: its chain, if its output goes on to one; false
 * when c cannot be a segment (see the file comment). */
static bool segment_of(const zir_graph *g, zir_node *c, seg *s) {
    *s = (seg){.mm = c};
    int64_t N = c->out->shape[1];
    zir_node *u = zpass_sole_consumer(g, c->out);
    if (getenv("ZINC_ROWS_EXPORT") && !strcmp(getenv("ZINC_ROWS_EXPORT"), "0"))
        return c->out != g->logits && u && u->op != ZOP_KERNEL && zpass_flag(u, ZF_VIEW);
    /* what fuse-residual or fuse-epilogue would put in c's own epilogue */
    bool epilogue = u && u->op != ZOP_KERNEL && (zpass_flag(u, ZF_SUM) || zpass_epilogue_unary(u));
    if (!epilogue) return c->out != g->logits; /* exported as it is */
    u = only_reader(g, c->out);
    if (u && zpass_flag(u, ZF_SUM) && u->n_in == 2 && row_weight(u->in[1], N)) {
        s->chain[s->n_chain++] = u;
        u = only_reader(g, u->out);
    }
    if (!u || !zpass_epilogue_unary(u)) return false; /* a bias or residual alone: fuse-residual's */
    s->chain[s->n_chain++] = u;
    u = only_reader(g, u->out);
    if (u && u->op == ZOP_MUL && row_weight(u->in[1], N)) s->chain[s->n_chain++] = u;
    return seg_end(s)->out != g->logits;
}

/* Adds v to the distinct inputs in[0..*n) if it is not there yet. */
static void add_input(const zir_value **in, int *n, const zir_value *v) {
    for (int i = 0; i < *n; i++)
        if (in[i] == v) return;
    in[(*n)++] = v;
}

/* Whether the kernel of norm n and segments s[0..ns) stays within
 * ZIR_MAX_IN external inputs (x, the norm weight, each segment's weights). */
static bool inputs_fit(const zir_node *n, const seg *s, int ns) {
    const zir_value *in[2 + 4 * ZIR_MAX_SEGMENTS];
    int k = 0;
    add_input(in, &k, n->in[0]);
    add_input(in, &k, n->in[1]);
    for (int i = 0; i < ns; i++) {
        add_input(in, &k, s[i].mm->in[1]);
        for (int j = 0; j < s[i].n_chain; j++)
            if (s[i].chain[j]->n_in > 1) add_input(in, &k, s[i].chain[j]->in[1]);
    }
    return k <= ZIR_MAX_IN;
}

/* The segments: the largest group of eligible consumers of one weight type
 * (the first group on a tie), in graph order, as many as fit the kernel
 * (ZIR_MAX_SEGMENTS, ZIR_MAX_IN). */
static int segments(const zir_graph *g, const zir_node *n, zir_node *const *c, int nc, seg *sg) {
    bool ok[ZPASS_MAX_MATMULS];
    seg all[ZPASS_MAX_MATMULS];
    int best = -1, best_n = 0;
    for (int j = 0; j < nc; j++)
        ok[j] = segment_of(g, c[j], &all[j]);
    for (int j = 0; j < nc; j++) {
        int same = 0;
        for (int i = 0; i < nc; i++)
            same += ok[i] && ok[j] && c[i]->in[1]->dtype == c[j]->in[1]->dtype;
        if (same > best_n) best = j, best_n = same;
    }
    int ns = 0;
    for (int i = 0; best >= 0 && i < nc && ns < ZIR_MAX_SEGMENTS; i++) {
        if (!ok[i] || c[i]->in[1]->dtype != c[best]->in[1]->dtype) continue;
        sg[ns] = all[i];
        ns += inputs_fit(n, sg, ns + 1);
    }
    return ns;
}

static void record(const zpass_opts *o, const zir_node *n, const zcost_option *opt, int pick, const seg *s,
                   int ns, int nc, const char *why) {
    zpass_decision *x = zcost_record(o, n, n->out, opt, pick);
    if (!x) return;
    int epi = 0;
    for (int i = 0; i < ns; i++)
        epi += s[i].n_chain > 0;
    char with[48] = "";
    if (epi)
        snprintf(with, sizeof with, " (%d with %s epilogue%s)", epi, epi > 1 ? "their" : "its",
                 epi > 1 ? "s" : "");
    if (ns < 2)
        snprintf(x->reason, sizeof x->reason,
                 "%d matmuls read the norm, but not two of one weight type whose outputs can leave a "
                 "rows GEMV (as they are, or through a sigmoid, softplus or SiLU chain): nothing to fuse",
                 nc);
    else
        snprintf(x->reason, sizeof x->reason, "%d of its %d matmuls%s %s: %s", ns, nc, with,
                 pick ? "as one GEMV over their rows" : "kept as GEMVs of their own", why);
}

/* Gives the consumers that are not segments their own copy of the norm,
 * then moves the segments (each matmul, then its chain) right after the
 * norm and fuses them: every segment's last node is exported but the
 * last's, which gives the kernel's output. */
static zir_node *fuse_rows(zir_graph *g, const zpass_opts *o, zir_node *n, zir_node **c, int nc, const seg *s,
                           int ns, zdiag *d) {
    for (int j = nc - 1; j >= 0; j--) {
        bool member = false;
        for (int i = 0; i < ns; i++)
            member |= s[i].mm == c[j];
        if (!member && !zpass_norm_copy_into(g, o, n, c[j], d)) return NULL;
    }
    zir_node *body[1 + ZIR_MAX_SEGMENTS * 4] = {n}, *outs[ZIR_MAX_SEGMENTS];
    int nb = 1;
    for (int i = 0; i < ns; i++) {
        zir_node_move(g, s[i].mm, n->id + (uint32_t)nb);
        body[nb++] = s[i].mm;
        for (int j = 0; j < s[i].n_chain; j++) {
            zir_node_move(g, s[i].chain[j], n->id + (uint32_t)nb);
            body[nb++] = s[i].chain[j];
        }
        outs[i] = seg_end(&s[i]);
    }
    zir_kparams kp = {ZKT_MATMUL_ROWS, zcost_token_tile(o), 1};
    return zir_fuse_outs(g, body, nb, outs, ns - 1, &kp, d);
}

zstatus zpass_fuse_qkv(zir_graph *g, const zpass_opts *o, zdiag *d) {
    if (o->phase != ZPH_DECODE && !zcost_gemv_batch(o)) return ZOK;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *n = g->nodes[i], *c[ZPASS_MAX_MATMULS];
        seg s[ZIR_MAX_SEGMENTS];
        if (n->op == ZOP_KERNEL || zpass_kind(n) != ZK_NORM || !zpass_flag(n, ZF_W1) || n->out->rank != 2)
            continue;
        int nc = zpass_matmul_consumers(g, n->out, c);
        if (!nc) continue;
        int ns = segments(g, n, c, nc, s);
        zcost_rows r = {n->out->shape[1], ns, 0, zpass_weight_bytes(n->in[1])};
        for (int j = 0; j < ns; j++)
            r.w_bytes += zpass_weight_bytes(s[j].mm->in[1]);
        zcost_option opt[ZCOST_ROWS_OPTIONS];
        zcost_price_rows(o, &r, opt);
        char why[240];
        int pick = ns >= 2 ? zcost_choose(o, opt, ZCOST_ROWS_OPTIONS, why, sizeof why) : 0;
        record(o, n, opt, pick, s, ns, nc, why);
        if (!pick) continue;
        zir_node *k = fuse_rows(g, o, n, c, nc, s, ns, d);
        if (!k) return d->code;
        i = k->id;
    }
    return ZOK;
}
