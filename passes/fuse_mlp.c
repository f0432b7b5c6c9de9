/* fuse-mlp: the SwiGLU MLP as fewer kernels. Staged it is four dispatches
 * and the intermediate (ff wide) crosses VRAM six times per token: gate and
 * up write it, SwiGLU reads both and writes, down reads. gate+up+SwiGLU as
 * one kernel leaves two crossings at no extra cost; the whole MLP in one
 * kernel leaves none, but pays in weight re-reads (prefill: the on-chip
 * accumulator shrinks the token tile) or partial sums (decode: the
 * intermediate is split across workgroups). The cost model decides. */
#include "cost.h"
#include "match.h"

typedef struct mlp_match {
    zir_node *gate, *up, *glu, *down;
} mlp_match;

static bool is_plain_matmul(const zir_node *n) {
    return n && n->op != ZOP_KERNEL && zpass_kind(n) == ZK_MATMUL;
}

/* glu(gate(x), up(x)) feeding down(): each intermediate used once. */
static bool match(const zir_graph *g, zir_node *glu, mlp_match *m) {
    if (glu->op == ZOP_KERNEL || !zpass_flag(glu, ZF_GLU)) return false;
    m->glu = glu;
    m->gate = glu->in[0]->producer;
    m->up = glu->in[1]->producer;
    if (!is_plain_matmul(m->gate) || !is_plain_matmul(m->up) || m->gate->in[0] != m->up->in[0]) return false;
    if (glu->in[0]->n_uses != 1 || glu->in[1]->n_uses != 1) return false;
    m->down = zpass_sole_consumer(g, glu->out);
    return is_plain_matmul(m->down) && m->down->in[0] == glu->out;
}

static void record(const zpass_opts *o, const mlp_match *m, const zcost_option *opt, int pick,
                   const char *why) {
    zpass_decision *x = zcost_record(o, m->glu, m->glu->out, opt, pick);
    if (!x) return;
    x->extra_bytes = opt[pick].weight - opt[0].weight + opt[pick].partial;
    const zcost_option *full = &opt[2];
    if (full->feasible)
        snprintf(x->reason, sizeof x->reason,
                 "%s; full MLP: %.0f B/token (weights %.0f, partial sums %.0f)%s%s", why, full->total,
                 full->weight, full->partial, full->note[0] ? "; " : "", full->note);
    else
        snprintf(x->reason, sizeof x->reason, "%s; full MLP refused: %s", why, full->note);
}

static zstatus fuse(zir_graph *g, const mlp_match *m, const zcost_option *opt, int pick, zdiag *d) {
    zir_node *body[4] = {m->gate, m->up, m->glu, m->down};
    if (m->gate->id > m->up->id) body[0] = m->up, body[1] = m->gate;
    zir_kparams kp = {.tmpl = opt[pick].tmpl, .token_tile = opt[pick].token_tile, .split = opt[pick].split};
    /* The down projection stays out of a gate+up kernel; any node between
     * glu and down is independent of them and keeps its place. */
    return zir_fuse(g, body, kp.tmpl == ZKT_MLP ? 4 : 3, &kp, d) ? ZOK : d->code;
}

zstatus zpass_fuse_mlp(zir_graph *g, const zpass_opts *o, zdiag *d) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        mlp_match m;
        if (!match(g, g->nodes[i], &m)) continue;
        zcost_mlp shape = {g->hp.n_embd, g->hp.n_ff, zpass_weight_bytes(m.gate->in[1]),
                           zpass_weight_bytes(m.up->in[1]), zpass_weight_bytes(m.down->in[1])};
        zcost_option opt[ZCOST_MLP_OPTIONS];
        char why[256];
        zcost_price_mlp(o, &shape, opt);
        int pick = zcost_choose(o, opt, ZCOST_MLP_OPTIONS, why, sizeof why);
        record(o, &m, opt, pick, why);
        if (!pick) continue;
        zstatus s = fuse(g, &m, opt, pick, d);
        if (s) return s;
        i = m.glu->parent->id;
    }
    return ZOK;
}
