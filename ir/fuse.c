/* zir_fuse: the one graph surgery every fusion pass uses. It folds a set of
 * top-level nodes into a kernel node; the passes decide what and why. */
#include "ir.h"

#include <string.h>

static const char *const ktemplate_names[ZKT_COUNT] = {"none",        "matmul", "gate_up_swiglu", "mlp",
                                                       "attention",   "head",   "moe_gate_up",    "moe_down",
                                                       "matmul_rows", "moe_sum",        "conv",
                                                       "delta",       "norm_gate"};
_Static_assert(sizeof ktemplate_names / sizeof ktemplate_names[0] == ZKT_COUNT,
               "ktemplate_names out of date");

const char *zir_ktemplate_name(zir_ktemplate t) {
    return (unsigned)t < ZKT_COUNT ? ktemplate_names[t] : "?";
}

static bool in_list(zir_node *const *list, int n, const zir_node *x) {
    for (int i = 0; i < n; i++)
        if (list[i] == x) return true;
    return false;
}

/* Uses of v by the original nodes that top[j] stands for. */
static uint32_t uses_in(const zir_node *t, const zir_value *v) {
    uint32_t u = 0;
    if (t->op == ZOP_KERNEL) {
        for (int i = 0; i < t->n_body; i++)
            u += uses_in(t->body[i], v);
        return u;
    }
    for (int k = 0; k < t->n_in; k++)
        u += t->in[k] == v;
    return u;
}

static zstatus check_top(const zir_graph *g, zir_node *const *top, int n, zir_node *const *outs, int n_outs,
                         zdiag *d) {
    if (n < 1) return zdiag_set(d, ZE_INTERNAL, "fuse: empty body");
    for (int i = 0; i < n; i++) {
        const zir_node *b = top[i];
        if (b->parent || b->id >= g->n_nodes || g->nodes[b->id] != b)
            return zdiag_set(d, ZE_INTERNAL, "fuse: node '%s' is not a top-level node", b->out->name);
        if (i && top[i - 1]->id >= b->id)
            return zdiag_set(d, ZE_INTERNAL, "fuse: body is not in graph order at '%s'", b->out->name);
    }
    /* Every output but the last and the exported ones must be consumed
     * inside the new kernel only. */
    for (int i = 0; i < n - 1; i++) {
        if (in_list(outs, n_outs, top[i]) && top[i]->out != g->logits) continue;
        uint32_t inside = 0;
        for (int j = i + 1; j < n; j++)
            inside += uses_in(top[j], top[i]->out);
        if (inside != top[i]->out->n_uses || top[i]->out == g->logits)
            return zdiag_set(d, ZE_INTERNAL, "fuse: '%s' is used outside the kernel", top[i]->out->name);
    }
    return ZOK;
}

/* The original (non-kernel) nodes, in order: kernels among top[] are flattened. */
static int flatten(zarena *a, zir_node *const *top, int n, zir_node ***out) {
    int m = 0;
    for (int i = 0; i < n; i++)
        m += top[i]->op == ZOP_KERNEL ? top[i]->n_body : 1;
    zir_node **flat = zarena_array(a, (size_t)m, sizeof *flat);
    if (!flat) return -1;
    m = 0;
    for (int i = 0; i < n; i++) {
        if (top[i]->op != ZOP_KERNEL) flat[m++] = top[i];
        for (int j = 0; top[i]->op == ZOP_KERNEL && j < top[i]->n_body; j++)
            flat[m++] = top[i]->body[j];
    }
    *out = flat;
    return m;
}

/* The distinct inputs of the body produced outside it, in first-use order. */
static int external_inputs(zir_node *const *body, int n, zir_value **ext, zdiag *d) {
    int m = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < body[i]->n_in; k++) {
            zir_value *v = body[i]->in[k];
            if (!v || (v->producer && in_list(body, n, v->producer))) continue;
            bool seen = false;
            for (int j = 0; j < m; j++)
                seen |= ext[j] == v;
            if (seen) continue;
            if (m == ZIR_MAX_IN) {
                zdiag_set(d, ZE_INTERNAL, "fuse: more than %d external inputs", ZIR_MAX_IN);
                return -1;
            }
            ext[m++] = v;
        }
    return m;
}

zir_node *zir_fuse(zir_graph *g, zir_node *const *top, int n, const zir_kparams *kp, zdiag *d) {
    return zir_fuse_outs(g, top, n, NULL, 0, kp, d);
}

zir_node *zir_fuse_outs(zir_graph *g, zir_node *const *top, int n, zir_node *const *outs, int n_outs,
                        const zir_kparams *kp, zdiag *d) {
    zir_value *ext[ZIR_MAX_IN];
    zir_node **body;
    int nb, m;
    for (int i = 0; i < n_outs; i++)
        if (!in_list(top, n, outs[i]) || outs[i] == top[n - 1]) {
            zdiag_set(d, ZE_INTERNAL, "fuse: exported '%s' is not an earlier body node", outs[i]->out->name);
            return NULL;
        }
    if (check_top(g, top, n, outs, n_outs, d)) return NULL;
    zir_node *k = zarena_alloc(g->arena, sizeof *k);
    if (!k || (nb = flatten(g->arena, top, n, &body)) < 0) {
        zdiag_set(d, ZE_NOMEM, "out of memory");
        return NULL;
    }
    /* Outputs of kernels being absorbed now come from their last body node. */
    for (int i = 0; i < n; i++)
        if (top[i]->op == ZOP_KERNEL) top[i]->out->producer = top[i]->body[top[i]->n_body - 1];
    if ((m = external_inputs(body, nb, ext, d)) < 0) {
        for (int i = 0; i < n; i++)
            if (top[i]->op == ZOP_KERNEL) top[i]->out->producer = top[i];
        return NULL;
    }
    zir_node *last = top[n - 1];
    memcpy(k->in, ext, sizeof *ext * (size_t)m);
    k->op = ZOP_KERNEL;
    k->n_in = m;
    k->out = last->out;
    k->layer = last->layer;
    k->group = last->group;
    k->body = body;
    k->n_body = nb;
    k->kp = *kp;
    for (int i = 0; i < nb; i++)
        body[i]->parent = k;
    for (int i = 0; i < n_outs; i++) /* a kernel's output comes from its last body node */
        (outs[i]->op == ZOP_KERNEL ? outs[i]->body[outs[i]->n_body - 1] : outs[i])->exported = true;
    k->out->producer = k;
    uint32_t w = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *x = g->nodes[i];
        if (x == last)
            x = k;
        else if (in_list(top, n, x))
            continue;
        x->id = w;
        g->nodes[w++] = x;
    }
    g->n_nodes = w;
    return k;
}
