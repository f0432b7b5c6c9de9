/* The IR verifier: every structural invariant the passes and the backend
 * rely on. It runs after every pass in tests (--verify-each). */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

static zstatus verify_inputs(const zir_graph *g, const zir_node *n, zdiag *d) {
    const zir_op_info *oi = &zir_ops[n->op];
    for (int i = 0; i < n->n_in; i++) {
        const zir_value *v = n->in[i];
        if (!v) continue; /* optional inputs are checked by shape inference */
        if (v->id >= g->n_values || g->values[v->id] != v)
            return zdiag_set(d, ZE_INTERNAL, "node %u: input %d is not a value of this graph", n->id, i);
        if (v->producer && v->producer->id >= n->id)
            return zdiag_set(d, ZE_INTERNAL, "node %u ('%s'): input '%s' is produced later (node %u)", n->id,
                             n->out->name, v->name, v->producer->id);
        if (v->role == ZR_ACTIVATION && !v->producer)
            return zdiag_set(d, ZE_INTERNAL, "activation '%s' has no producer", v->name);
        bool weight_slot = (i == 0 && (oi->flags & ZF_W0)) || (i == 1 && (oi->flags & ZF_W1));
        if (weight_slot && v->role != ZR_WEIGHT)
            return zdiag_set(d, ZE_INTERNAL, "node '%s': input %d ('%s') must be a weight", n->out->name, i,
                             v->name);
        if (v->role == ZR_WEIGHT && !weight_slot && !(n->op == ZOP_ROPE || n->op == ZOP_ADD))
            return zdiag_set(d, ZE_INTERNAL, "node '%s': weight '%s' in a non-weight slot", n->out->name,
                             v->name);
    }
    return ZOK;
}

static zstatus verify_node(const zir_graph *g, uint32_t i, zdiag *d) {
    const zir_node *n = g->nodes[i];
    if (!n || n->id != i) return zdiag_set(d, ZE_INTERNAL, "node %u: id mismatch", i);
    if ((unsigned)n->op >= ZOP_COUNT || n->n_in != zir_ops[n->op].arity)
        return zdiag_set(d, ZE_INTERNAL, "node %u: bad op or arity", i);
    if (!n->out || n->out->producer != n || n->out->role != ZR_ACTIVATION)
        return zdiag_set(d, ZE_INTERNAL, "node %u: output is not an activation it produces", i);
    zstatus s = verify_inputs(g, n, d);
    if (s) return s;
    int rank;
    zdim shape[ZIR_MAX_RANK];
    if ((s = zir_infer_shape(n, &rank, shape, d))) {
        zdiag_prefix(d, "node %u ('%s')", i, n->out->name);
        return s;
    }
    if (rank != n->out->rank || memcmp(shape, n->out->shape, sizeof(zdim) * (size_t)rank))
        return zdiag_set(d, ZE_INTERNAL, "node %u ('%s'): recorded shape differs from the inferred one", i,
                         n->out->name);
    return ZOK;
}

static zstatus verify_uses(const zir_graph *g, zdiag *d) {
    uint32_t *uses = calloc(g->n_values ? g->n_values : 1, sizeof *uses);
    if (!uses) return zdiag_set(d, ZE_NOMEM, "out of memory in the verifier");
    for (uint32_t i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++)
            if (g->nodes[i]->in[k]) uses[g->nodes[i]->in[k]->id]++;
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
    }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zstatus s = verify_node(g, i, d);
        if (s) return s;
    }
    if (!g->tokens || g->tokens->role != ZR_INPUT)
        return zdiag_set(d, ZE_INTERNAL, "graph has no token input");
    if (!g->logits || !g->logits->producer) return zdiag_set(d, ZE_INTERNAL, "graph has no logits output");
    return verify_uses(g, d);
}
