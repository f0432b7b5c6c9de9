/* fuse-attn: scores, causal softmax and the value mix as one kernel (flash
 * attention): the H x P score matrix never touches VRAM. The cost model
 * checks that a query tile and a K/V block fit in shared memory and, in
 * decode, prices the online-softmax partials of a context split. */
#include "cost.h"
#include "match.h"

static void record(const zir_graph *g, const zpass_opts *o, const zir_node *s, const zcost_option *opt,
                   int pick, const char *why) {
    zpass_decision *x = zpass_report_add(o->report);
    if (!x) return;
    *x = (zpass_decision){.layer = s->layer,
                          .group = ZG_ATTN,
                          .phase = o->phase,
                          .what = s->out->name,
                          .width = s->out->width,
                          .crossings_before = opt[0].crossings,
                          .crossings_after = opt[pick].crossings,
                          .bytes_before = opt[0].act,
                          .bytes_after = opt[pick].act,
                          .extra_bytes = opt[pick].partial,
                          .fused = pick != 0,
                          .chosen = opt[pick].tmpl};
    snprintf(x->reason, sizeof x->reason, "%s; scores %lldx%lld fp32 per token at ctx %lld%s%s", why,
             (long long)g->hp.n_head, (long long)o->ctx, (long long)o->ctx, opt[1].note[0] ? "; " : "",
             opt[1].note);
}

/* scores -> causal softmax -> mix, each the only consumer of the last. */
static bool match(const zir_graph *g, zir_node *s, zir_node **p, zir_node **m) {
    if (s->op == ZOP_KERNEL || zpass_kind(s) != ZK_ATTENTION || s->out->rank != 3 ||
        s->out->shape[2] != ZDIM_P)
        return false;
    *p = zpass_sole_consumer(g, s->out);
    if (!*p || (*p)->op == ZOP_KERNEL || zpass_kind(*p) != ZK_NORM || !zpass_flag(*p, ZF_POSITIONAL))
        return false;
    *m = zpass_sole_consumer(g, (*p)->out);
    return *m && (*m)->op != ZOP_KERNEL && zpass_kind(*m) == ZK_ATTENTION && (*m)->in[0] == (*p)->out;
}

zstatus zpass_fuse_attn(zir_graph *g, const zpass_opts *o, zdiag *d) {
    const zir_hparams *h = &g->hp;
    zcost_attn a = {h->n_head, h->n_head_kv, h->head_dim, o->ctx};
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *s = g->nodes[i], *p, *m;
        if (!match(g, s, &p, &m)) continue;
        zcost_option opt[ZCOST_ATTN_OPTIONS];
        char why[256];
        zcost_price_attn(o, &a, opt);
        int pick = zcost_choose(o, opt, ZCOST_ATTN_OPTIONS, why, sizeof why);
        record(g, o, s, opt, pick, why);
        if (!pick) continue;
        zir_node *body[3] = {s, p, m};
        zir_kparams kp = {
            .tmpl = ZKT_ATTENTION, .token_tile = opt[pick].token_tile, .split = opt[pick].split};
        if (!zir_fuse(g, body, 3, &kp, d)) return d->code;
        i = s->parent->id; /* continue after the new kernel */
    }
    return ZOK;
}
