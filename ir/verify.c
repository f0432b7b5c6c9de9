/* The IR verifier: every structural invariant the passes and the backend
 * rely on. It runs after every pass in tests (--verify-each). */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

/* Whether v may be read by a node at top-level position `at` (kernel == NULL)
 * or by body node number `at` of kernel k. */
static bool visible(const zir_value *v, const zir_node *k, uint32_t at, const zir_node *const *body) {
    const zir_node *p = v->producer;
    if (!p) return v->role != ZR_ACTIVATION;
    if (p->parent == NULL) return k ? p->id < k->id : p->id < at;
    /* another kernel's value: on chip, unless that kernel exports it */
    if (p->parent != k) return p->exported && (k ? p->parent->id < k->id : p->parent->id < at);
    for (uint32_t j = 0; j < at; j++)
        if (body[j] == p) return true;
    return false;
}

static zstatus verify_operands(const zir_graph *g, const zir_node *n, const zir_node *k, uint32_t at,
                               zdiag *d) {
    const zir_op_info *oi = &zir_ops[n->op];
    for (int i = 0; i < n->n_in; i++) {
        const zir_value *v = n->in[i];
        if (!v) continue; /* optional inputs are checked by shape inference */
        if (v->id >= g->n_values || g->values[v->id] != v)
            return zdiag_set(d, ZE_INTERNAL, "node '%s': input %d is not a value of this graph", n->out->name,
                             i);
        if (!visible(v, k, at, k ? (const zir_node *const *)k->body : NULL))
            return zdiag_set(d, ZE_INTERNAL,
                             "node '%s': input '%s' is produced later or inside another kernel", n->out->name,
                             v->name);
        bool weight_slot = (i == 0 && (oi->flags & ZF_W0)) || (i == 1 && (oi->flags & ZF_W1));
        if (weight_slot && v->role != ZR_WEIGHT)
            return zdiag_set(d, ZE_INTERNAL, "node '%s': input %d ('%s') must be a weight", n->out->name, i,
                             v->name);
        /* weights read whole: biases, rope factors, the delta-net's decay scale A */
        if (v->role == ZR_WEIGHT && !weight_slot &&
            !(n->op == ZOP_ROPE || n->op == ZOP_ADD || n->op == ZOP_MUL))
            return zdiag_set(d, ZE_INTERNAL, "node '%s': weight '%s' in a non-weight slot", n->out->name,
                             v->name);
    }
    /* The expert ids a route holds index a weight: only moe_topk makes them
     * (and moe_route sorts a moe_topk route, for matmul_id). */
    int route = n->op == ZOP_MATMUL_ID ? 2 : n->op == ZOP_MOE_SUM ? 1 : n->op == ZOP_MOE_ROUTE ? 0 : -1;
    const zir_node *rp = route >= 0 && n->in[route] ? n->in[route]->producer : NULL;
    if (rp && n->op == ZOP_MATMUL_ID && rp->op == ZOP_MOE_ROUTE) rp = rp->in[0] ? rp->in[0]->producer : NULL;
    if (route >= 0 && n->in[route] && (!rp || rp->op != ZOP_MOE_TOPK))
        return zdiag_set(d, ZE_INTERNAL, "node '%s': input %d ('%s') is not a moe_topk route", n->out->name,
                         route, n->in[route]->name);
    return ZOK;
}

zstatus zir_check_shape(const zir_node *n, zstatus code, zdiag *d) {
    int rank;
    zdim shape[ZIR_MAX_RANK];
    zstatus s = zir_infer_shape(n, &rank, shape, d);
    if (s) {
        zdiag_prefix(d, "node '%s'", n->out->name);
        return s;
    }
    if (rank != n->out->rank || memcmp(shape, n->out->shape, sizeof(zdim) * (size_t)rank))
        return zdiag_set(d, code, "node '%s': recorded shape differs from the inferred one", n->out->name);
    return ZOK;
}

static zstatus verify_op(const zir_graph *g, const zir_node *n, const zir_node *k, uint32_t at, zdiag *d) {
    if ((unsigned)n->op >= ZOP_COUNT || n->op == ZOP_KERNEL || n->n_in != zir_ops[n->op].arity)
        return zdiag_set(d, ZE_INTERNAL, "node '%s': bad op or arity", n->out ? n->out->name : "?");
    if (!n->out || n->out->role != ZR_ACTIVATION)
        return zdiag_set(d, ZE_INTERNAL, "node %u: output is not an activation", n->id);
    if (n->parent != k) return zdiag_set(d, ZE_INTERNAL, "node '%s': wrong parent kernel", n->out->name);
    /* the multi-row GEMV sums fp32 operands: a matmul computed there and
     * rounded to fp16 by the interpreter would be checked against the
     * wrong values */
    if (n->attr.mm_gemv && (n->op != ZOP_MATMUL || n->attr.mm_f16))
        return zdiag_set(d, ZE_INTERNAL,
                         "node '%s': a multi-row GEMV (mm_gemv) needs a matmul of fp32 operands",
                         n->out->name);
    zstatus s = verify_operands(g, n, k, at, d);
    return s ? s : zir_check_shape(n, ZE_INTERNAL, d);
}

/* Uses of v by the body nodes of k. */
static uint32_t body_uses(const zir_node *k, const zir_value *v) {
    uint32_t u = 0;
    for (int j = 0; j < k->n_body; j++)
        for (int i = 0; i < k->body[j]->n_in; i++)
            u += k->body[j]->in[i] == v;
    return u;
}

/* A matmul_rows kernel (fuse-qkv): its norm, then segments, each a matmul
 * and its epilogue chain (every chain node reading the node before it);
 * each segment's last node exported but the last segment's; then maybe a
 * store's reshapes and kv_store. The rows GEMV's codegen relies on it. */
static zstatus verify_rows(const zir_node *k, zdiag *d) {
    int end = k->n_body, segs = 0;
    if (end >= 2 && k->body[end - 1]->op == ZOP_KV_STORE)
        for (end--; end > 0 && k->body[end - 1]->op == ZOP_RESHAPE;)
            end--;
    if (zir_ops[k->body[0]->op].kind != ZK_NORM)
        return zdiag_set(d, ZE_INTERNAL, "kernel '%s' (matmul_rows): the body must start with its norm",
                         k->out->name);
    for (int j = 1; j < end; j++) {
        const zir_node *b = k->body[j];
        bool starts = zir_ops[b->op].kind == ZK_MATMUL;
        if (!starts && (j == 1 || b->in[0] != k->body[j - 1]->out))
            return zdiag_set(d, ZE_INTERNAL,
                             "kernel '%s' (matmul_rows): '%s' neither starts a segment nor takes the one "
                             "before it",
                             k->out->name, b->out->name);
        segs += starts;
        bool ends = j + 1 < end && zir_ops[k->body[j + 1]->op].kind == ZK_MATMUL;
        if (b->exported != ends)
            return zdiag_set(d, ZE_INTERNAL, "kernel '%s' (matmul_rows): '%s' %s", k->out->name, b->out->name,
                             ends ? "ends a segment but is not exported" : "is exported but ends no segment");
    }
    if (segs < 2 || segs > ZIR_MAX_SEGMENTS)
        return zdiag_set(d, ZE_INTERNAL, "kernel '%s' (matmul_rows): %d segments, expected 2 to %d",
                         k->out->name, segs, ZIR_MAX_SEGMENTS);
    return ZOK;
}

static zstatus verify_kernel(const zir_graph *g, const zir_node *k, zdiag *d) {
    if (k->n_body < 1 || !k->body || k->body[k->n_body - 1]->out != k->out || k->out->producer != k)
        return zdiag_set(d, ZE_INTERNAL, "kernel %u: output is not its last body node's", k->id);
    if (k->kp.tmpl <= ZKT_NONE || k->kp.tmpl >= ZKT_COUNT)
        return zdiag_set(d, ZE_INTERNAL, "kernel '%s': no template", k->out->name);
    for (int j = 0; j < k->n_body; j++) {
        const zir_node *b = k->body[j];
        zstatus s = verify_op(g, b, k, (uint32_t)j, d);
        if (s) return s;
        if (j < k->n_body - 1 && b->out->producer != b)
            return zdiag_set(d, ZE_INTERNAL, "kernel '%s': body value '%s' names another producer",
                             k->out->name, b->out->name);
        if (b->exported && (j == k->n_body - 1 || b->out == g->logits))
            return zdiag_set(d, ZE_INTERNAL, "kernel '%s': '%s' is exported but is the kernel's output",
                             k->out->name, b->out->name);
        if (j < k->n_body - 1 && !b->exported && body_uses(k, b->out) != b->out->n_uses)
            return zdiag_set(d, ZE_INTERNAL, "kernel '%s': on-chip value '%s' escapes the kernel",
                             k->out->name, b->out->name);
    }
    for (int i = 0; i < k->n_in; i++) {
        if (!k->in[i] || !body_uses(k, k->in[i]))
            return zdiag_set(d, ZE_INTERNAL, "kernel '%s': input %d is not used by its body", k->out->name,
                             i);
        for (int j = 0; j < i; j++)
            if (k->in[j] == k->in[i])
                return zdiag_set(d, ZE_INTERNAL, "kernel '%s': input '%s' listed twice", k->out->name,
                                 k->in[i]->name);
    }
    for (int j = 0; j < k->n_body; j++)
        for (int i = 0; i < k->body[j]->n_in; i++) {
            const zir_value *v = k->body[j]->in[i];
            if (!v || (v->producer && v->producer->parent == k)) continue;
            bool listed = false;
            for (int e = 0; e < k->n_in; e++)
                listed |= k->in[e] == v;
            if (!listed)
                return zdiag_set(d, ZE_INTERNAL, "kernel '%s': input '%s' is not listed", k->out->name,
                                 v->name);
        }
    return k->kp.tmpl == ZKT_MATMUL_ROWS ? verify_rows(k, d) : ZOK;
}

static zstatus verify_node(const zir_graph *g, uint32_t i, zdiag *d) {
    const zir_node *n = g->nodes[i];
    if (!n || n->id != i) return zdiag_set(d, ZE_INTERNAL, "node %u: id mismatch", i);
    if (n->parent) return zdiag_set(d, ZE_INTERNAL, "node %u: a body node at top level", i);
    if (n->op == ZOP_KERNEL) return verify_kernel(g, n, d);
    if (n->out && n->out->producer != n)
        return zdiag_set(d, ZE_INTERNAL, "node %u: output '%s' names another producer", i, n->out->name);
    return verify_op(g, n, NULL, i, d);
}

static void count_uses(const zir_node *n, uint32_t *uses) {
    if (n->op == ZOP_KERNEL) {
        for (int j = 0; j < n->n_body; j++)
            count_uses(n->body[j], uses);
        return;
    }
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k]) uses[n->in[k]->id]++;
}

static zstatus verify_uses(const zir_graph *g, zdiag *d) {
    uint32_t *uses = calloc(g->n_values ? g->n_values : 1, sizeof *uses);
    if (!uses) return zdiag_set(d, ZE_NOMEM, "out of memory in the verifier");
    for (uint32_t i = 0; i < g->n_nodes; i++)
        count_uses(g->nodes[i], uses);
    zstatus s = ZOK;
    for (uint32_t i = 0; i < g->n_values && !s; i++)
        if (uses[i] != g->values[i]->n_uses)
            s = zdiag_set(d, ZE_INTERNAL, "value '%s': use count %u, but %u uses found", g->values[i]->name,
                          g->values[i]->n_uses, uses[i]);
    free(uses);
    return s;
}

zstatus zir_verify(const zir_graph *g, zdiag *d) {
    if (HASH_COUNT(g->by_name) != g->n_values)
        return zdiag_set(d, ZE_INTERNAL, "name table has %u entries for %u values", HASH_COUNT(g->by_name),
                         g->n_values);
    for (uint32_t i = 0; i < g->n_values; i++) {
        const zir_value *v = g->values[i];
        if (v->id != i) return zdiag_set(d, ZE_INTERNAL, "value %u: id mismatch", i);
        if (v->role == ZR_WEIGHT && !v->data)
            return zdiag_set(d, ZE_INTERNAL, "weight '%s' has no data", v->name);
        if (v->role != ZR_ACTIVATION && v->producer)
            return zdiag_set(d, ZE_INTERNAL, "%s '%s' has a producer", zir_role_name(v->role), v->name);
        if (v->role == ZR_ACTIVATION && !v->producer)
            return zdiag_set(d, ZE_INTERNAL, "activation '%s' has no producer", v->name);
    }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zstatus s = verify_node(g, i, d);
        if (s) return s;
    }
    if (!g->tokens || g->tokens->role != ZR_INPUT)
        return zdiag_set(d, ZE_INTERNAL, "graph has no token input");
    if (!g->logits || !g->logits->producer || g->logits->producer->parent)
        return zdiag_set(d, ZE_INTERNAL, "graph has no logits output");
    return verify_uses(g, d);
}
