/* fuse-moe: a mixture-of-experts MLP as two kernels. Staged it is six
 * dispatches: the chosen experts' gate and up (matmul_id), SwiGLU, down,
 * the weighted sum (moe_sum) and the residual add, and the [U, ff]
 * intermediate crosses VRAM six times per token. Fused, moe_gate_up computes
 * gate, up and SwiGLU in one pass over x, and moe_down computes the down
 * rows of every slot, weighs and sums them in route order and adds the
 * residual in its epilogue: only the SwiGLU output crosses (twice). Both
 * read only the chosen experts' rows, a GEMV per (token, slot).
 *
 * Prefill has a third partition: grouped GEMMs. A moe_route node sorts the
 * step's (token, slot) pairs by expert once, and moe_gate_up with a token
 * tile above 1 runs a GEMM per expert over its run of pairs
 * (backend/glsl/moe_gemm.glsl), so an expert's rows are read once per tile
 * of its tokens instead of once per token; the down projection is a kernel
 * of its own matmul_id (the same grouped GEMM, writing every (token, slot)
 * product) and moe_sum and the residual add are a third kernel. The cost model
 * prices the three partitions and the report states the weight bytes per
 * token of the GEMVs and of the grouped GEMMs against the whole stacks'. */
#include <stdio.h>

#include "cost.h"
#include "match.h"

typedef struct moe_match {
    zir_node *gate, *up, *glu, *down, *sum, *add;
} moe_match;

static bool is_expert_matmul(const zir_node *n) {
    return n && n->op != ZOP_KERNEL && zpass_kind(n) == ZK_MOE && zpass_flag(n, ZF_W1);
}

/* The weighted sum of a route's slots: the other two-input MoE op. */
static bool is_expert_sum(const zir_node *n, const zir_node *down) {
    return n && n->op != ZOP_KERNEL && zpass_kind(n) == ZK_MOE && !zpass_flag(n, ZF_W1) && n->n_in == 2 &&
           n->in[0] == down->out && n->in[1] == down->in[2];
}

static bool is_residual_add(const zir_node *n, const zir_value *v) {
    if (!n || n->op == ZOP_KERNEL || !zpass_flag(n, ZF_SUM) || n->n_in != 2) return false;
    const zir_value *other = n->in[0] == v ? n->in[1] : n->in[1] == v ? n->in[0] : NULL;
    return other && other->role == ZR_ACTIVATION && other->rank == 2 && other->dtype == ZT_F32 &&
           other->shape[1] == v->shape[1];
}

/* glu(gate(x), up(x)) -> down -> sum [-> add], one route, each value used once. */
static bool match(const zir_graph *g, zir_node *glu, moe_match *m) {
    if (glu->op == ZOP_KERNEL || !zpass_flag(glu, ZF_GLU)) return false;
    *m = (moe_match){.glu = glu, .gate = glu->in[0]->producer, .up = glu->in[1]->producer};
    if (!is_expert_matmul(m->gate) || !is_expert_matmul(m->up) || m->gate->in[0] != m->up->in[0] ||
        m->gate->in[2] != m->up->in[2] || glu->in[0]->n_uses != 1 || glu->in[1]->n_uses != 1)
        return false;
    m->down = zpass_sole_consumer(g, glu->out);
    if (!is_expert_matmul(m->down) || m->down->in[0] != glu->out || m->down->in[2] != m->gate->in[2])
        return false;
    m->sum = zpass_sole_consumer(g, m->down->out);
    if (!is_expert_sum(m->sum, m->down)) return false;
    m->add = zpass_sole_consumer(g, m->sum->out);
    if (!is_residual_add(m->add, m->sum->out)) m->add = NULL;
    return true;
}

static void record(const zpass_opts *o, const moe_match *m, const zcost_moe *c, const zcost_option *opt,
                   int pick, const char *why) {
    zpass_decision *x = zcost_record(o, m->glu, m->glu->out, opt, pick);
    if (!x) return;
    double whole = c->w_gate + c->w_up + c->w_down;
    static const char *const what[ZCOST_MOE_OPTIONS] = {
        "", " (moe_gate_up + moe_down GEMVs)",
        " (grouped GEMMs: moe_gate_up, moe_down by expert; moe_sum+add)"};
    int n = snprintf(x->reason, sizeof x->reason,
                     "%s%s; experts: %lld of %lld read, weights %.0f B/token as GEMVs", why, what[pick],
                     (long long)c->used, (long long)c->experts, zcost_moe_weight(c));
    if (n > 0 && (size_t)n < sizeof x->reason && opt[2].feasible)
        n += snprintf(x->reason + n, sizeof x->reason - (size_t)n, ", %.0f B/token as grouped GEMMs (%s)",
                      zcost_moe_grouped_weight(c, zcost_step_tokens(o), opt[2].token_tile), opt[2].note);
    else if (n > 0 && (size_t)n < sizeof x->reason)
        n += snprintf(x->reason + n, sizeof x->reason - (size_t)n, " (%s)", opt[2].note);
    if (n > 0 && (size_t)n < sizeof x->reason)
        snprintf(x->reason + n, sizeof x->reason - (size_t)n, " of the whole stacks' %.0f B", whole);
}

/* The grouped GEMMs' route: a moe_route node before the gate and up
 * matmuls sorts the pairs by expert once a step, and the three expert
 * matmuls read its [T,U,4] route (moe_sum keeps moe_topk's). */
static zstatus sort_route(zir_graph *g, const moe_match *m, zdiag *d) {
    zir_value *route = m->gate->in[2];
    char name[160];
    snprintf(name, sizeof name, "%s.sorted", route->name);
    zir_node *r = zir_node_add(g, ZOP_MOE_ROUTE, name, &route, 1, NULL, m->gate->layer, m->gate->group, d);
    if (!r) return d->code;
    r->out->width = route->width;
    zir_node_move(g, r, m->gate->id < m->up->id ? m->gate->id : m->up->id);
    zir_node *const mm[3] = {m->gate, m->up, m->down};
    for (int i = 0; i < 3; i++) {
        mm[i]->in[2] = r->out;
        route->n_uses--;
        r->out->n_uses++;
    }
    return ZOK;
}

/* gate+up+SwiGLU, then down+sum[+add]; one (token, slot) per workgroup row.
 * Grouped (tile > 1): the route sorted by expert, gate+up+SwiGLU and down
 * alone, as GEMMs by expert, then sum+add. */
static zstatus fuse(zir_graph *g, const moe_match *m, int tile, zdiag *d) {
    if (tile > 1) {
        zstatus s = sort_route(g, m, d);
        if (s) return s;
    }
    zir_node *gu[3] = {m->gate, m->up, m->glu};
    if (m->gate->id > m->up->id) gu[0] = m->up, gu[1] = m->gate;
    zir_kparams kp = {.tmpl = ZKT_MOE_GATE_UP, .token_tile = tile, .split = 1};
    if (!zir_fuse(g, gu, 3, &kp, d)) return d->code;
    zir_node *dn[3] = {m->down, m->sum, m->add};
    kp.tmpl = ZKT_MOE_DOWN;
    if (!zir_fuse(g, dn, tile > 1 ? 1 : m->add ? 3 : 2, &kp, d)) return d->code;
    if (tile == 1 || !m->add) return ZOK;
    zir_node *sa[2] = {m->sum, m->add};
    kp.tmpl = ZKT_MOE_SUM;
    return zir_fuse(g, sa, 2, &kp, d) ? ZOK : d->code;
}

zstatus zpass_fuse_moe(zir_graph *g, const zpass_opts *o, zdiag *d) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        moe_match m;
        if (!match(g, g->nodes[i], &m)) continue;
        const zir_value *wg = m.gate->in[1];
        zcost_moe c = {.hidden = wg->shape[2],
                       .ff = wg->shape[1],
                       .experts = wg->shape[0],
                       .used = m.gate->in[2]->shape[1],
                       .w_gate = zpass_weight_bytes(wg),
                       .w_up = zpass_weight_bytes(m.up->in[1]),
                       .w_down = zpass_weight_bytes(m.down->in[1])};
        zcost_option opt[ZCOST_MOE_OPTIONS];
        char why[200];
        zcost_price_moe(o, &c, opt);
        int pick = zcost_choose(o, opt, ZCOST_MOE_OPTIONS, why, sizeof why);
        record(o, &m, &c, opt, pick, why);
        if (!pick) continue;
        zstatus s = fuse(g, &m, pick == 2 ? opt[2].token_tile : 1, d);
        if (s) return s;
        i = m.down->parent->id;
    }
    return ZOK;
}
