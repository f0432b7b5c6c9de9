#include "match.h"

#include <stdio.h>

#include "cost.h"

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

int zpass_consumers_of(const zir_graph *g, const zir_value *v, zir_node **c, zpass_reader_uses reads_as) {
    int n = 0;
    uint32_t uses = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *x = g->nodes[i];
        bool reads = false;
        for (int k = 0; k < x->n_in; k++)
            reads |= x->in[k] == v;
        if (!reads) continue;
        uint32_t u = n < ZPASS_MAX_MATMULS ? reads_as(x, v) : 0;
        if (!u) return 0;
        uses += u;
        c[n++] = x;
    }
    return n >= 2 && uses == v->n_uses ? n : 0;
}

uint32_t zpass_plain_matmul_reads(const zir_node *x, const zir_value *v) {
    return x->op != ZOP_KERNEL && zpass_kind(x) == ZK_MATMUL && x->in[0] == v && x->in[1] != v;
}

int zpass_matmul_consumers(const zir_graph *g, const zir_value *v, zir_node **c) {
    return zpass_consumers_of(g, v, c, zpass_plain_matmul_reads);
}

zir_node *zpass_norm_copy_into(zir_graph *g, const zpass_opts *o, zir_node *n, zir_node *c, zdiag *d) {
    char name[160];
    snprintf(name, sizeof name, "%s@%s", n->out->name, c->out->name);
    zir_node *copy = zir_node_add(g, n->op, name, n->in, n->n_in, &n->attr, n->layer, n->group, d);
    if (!copy) return NULL;
    copy->out->width = n->out->width;
    copy->dequant = n->dequant;
    zir_node_move(g, copy, c->id);
    /* c's reads of n's output (a kernel's: its body's) become the copy's */
    int nb = c->op == ZOP_KERNEL ? c->n_body : 1;
    for (int j = 0; j < nb; j++) {
        zir_node *x = c->op == ZOP_KERNEL ? c->body[j] : c;
        for (int k = 0; k < x->n_in; k++)
            if (x->in[k] == n->out) {
                x->in[k] = copy->out;
                copy->out->n_uses++;
                n->out->n_uses--;
            }
    }
    for (int k = 0; c->op == ZOP_KERNEL && k < c->n_in; k++)
        if (c->in[k] == n->out) c->in[k] = copy->out;
    zir_kparams kp = c->op == ZOP_KERNEL ? c->kp : (zir_kparams){ZKT_MATMUL, zcost_token_tile(o), 1};
    zir_node *body[2] = {copy, c};
    return zir_fuse(g, body, 2, &kp, d);
}

zir_node *zpass_fuse_pair(zir_graph *g, const zpass_opts *o, zir_node *p, zir_node *u, zir_ktemplate t,
                          const char *reason, zdiag *d) {
    zpass_decision *x = zpass_record_kept(o, u, p->out, t);
    if (x) snprintf(x->reason, sizeof x->reason, "%s", reason);
    zir_node *body[2] = {p, u};
    zir_kparams kp = {t, zcost_token_tile(o), 1};
    return zir_fuse(g, body, 2, &kp, d);
}
