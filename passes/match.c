#include "match.h"

static uint32_t uses_by(const zir_node *n, const zir_value *v) {
    uint32_t u = 0;
    if (n->op == ZOP_KERNEL) {
        for (int i = 0; i < n->n_body; i++)
            u += uses_by(n->body[i], v);
        return u;
    }
    for (int k = 0; k < n->n_in; k++)
        u += n->in[k] == v;
    return u;
}

zir_node *zpass_sole_consumer(const zir_graph *g, const zir_value *v) {
    if (v == g->logits || v->n_uses == 0) return NULL;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        uint32_t u = uses_by(g->nodes[i], v);
        if (u) return u == v->n_uses ? g->nodes[i] : NULL;
    }
    return NULL;
}

int zpass_consumer_count(const zir_graph *g, const zir_value *v) {
    int c = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        c += uses_by(g->nodes[i], v) > 0;
    return c;
}

const zir_node *zpass_tail(const zir_node *n) {
    return n->op == ZOP_KERNEL ? n->body[n->n_body - 1] : n;
}
const zir_node *zpass_head(const zir_node *n) {
    return n->op == ZOP_KERNEL ? n->body[0] : n;
}

double zpass_elems_per_token(const zir_value *v, int64_t ctx) {
    zir_step s = {.T = 1, .pos = ctx - 1, .ctx = 1};
    return (double)zir_value_elems(v, &s);
}

zpass_decision *zpass_record_kept(const zpass_opts *o, const zir_node *at, const zir_value *v,
                                  zir_ktemplate chosen) {
    zpass_decision *x = zpass_report_add(o->report);
    if (!x) return NULL;
    double b = zpass_elems_per_token(v, o->ctx) * o->target->act_bytes;
    *x = (zpass_decision){.layer = at->layer,
                          .group = at->group,
                          .phase = o->phase,
                          .what = v->name,
                          .width = v->width,
                          .crossings_before = 2,
                          .crossings_after = 0,
                          .bytes_before = 2 * b,
                          .bytes_after = 0,
                          .fused = true,
                          .chosen = chosen};
    return x;
}
