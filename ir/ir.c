/* Graph construction and shape inference. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

const zir_op_info zir_ops[ZOP_COUNT] = {
#define ZOP(NAME, name, arity, kind, flags) [ZOP_##NAME] = {name, arity, kind, flags},
#include "ops.def"
#undef ZOP
};

static const char *const kind_names[ZK_COUNT] = {
    "gather", "norm", "matmul", "elementwise", "shape", "kv", "attention", "fused", "moe", "recurrent",
};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == ZK_COUNT, "kind_names out of date");

static const char *const role_names[ZR_COUNT] = {"input", "weight", "activation", "kv"};
static const char *const group_names[ZG_COUNT] = {"-", "embed", "attn", "mlp", "output"};

const char *zir_kind_name(zir_kind k) {
    return (unsigned)k < ZK_COUNT ? kind_names[k] : "?";
}
const char *zir_role_name(zir_role r) {
    return (unsigned)r < ZR_COUNT ? role_names[r] : "?";
}
const char *zir_group_name(zir_group g) {
    return (unsigned)g < ZG_COUNT ? group_names[g] : "?";
}

zir_graph *zir_graph_new(void) {
    zarena *a = zarena_new();
    zir_graph *g = a ? zarena_alloc(a, sizeof *g) : NULL;
    if (!g) {
        zarena_free(a);
        return NULL;
    }
    g->arena = a;
    return g;
}

void zir_graph_free(zir_graph *g) {
    if (g) zarena_free(g->arena);
}

/* Grows an arena-backed pointer array; the old block is simply abandoned. */
static bool grow(zarena *a, void ***arr, uint32_t n, uint32_t *cap) {
    if (n < *cap) return true;
    uint32_t nc = *cap ? *cap * 2 : 64;
    void **na = zarena_array(a, nc, sizeof(void *));
    if (!na) return false;
    if (n) memcpy(na, *arr, n * sizeof(void *));
    *arr = na;
    *cap = nc;
    return true;
}

zir_value *zir_find(const zir_graph *g, const char *name) {
    zir_value *v = NULL;
    HASH_FIND_STR(g->by_name, name, v);
    return v;
}

zir_value *zir_value_new(zir_graph *g, const char *name, zir_role role, ztype dtype, int rank,
                         const zdim *shape, zdiag *d) {
    if (rank < 0 || rank > ZIR_MAX_RANK) {
        zdiag_set(d, ZE_INTERNAL, "value '%s': rank %d out of range", name, rank);
        return NULL;
    }
    if (zir_find(g, name)) {
        zdiag_set(d, ZE_INVALID, "value '%s' defined twice", name);
        return NULL;
    }
    zir_value *v = zarena_alloc(g->arena, sizeof *v);
    if (!v || !(v->name = zarena_strdup(g->arena, name)) ||
        !grow(g->arena, (void ***)&g->values, g->n_values, &g->cap_values)) {
        zdiag_set(d, ZE_NOMEM, "out of memory building the IR");
        return NULL;
    }
    v->id = g->n_values;
    v->role = role;
    v->dtype = dtype;
    v->rank = rank;
    memcpy(v->shape, shape, sizeof(zdim) * (size_t)rank);
    v->layer = -1;
    zhash_arena = g->arena;
    zhash_oom = 0;
    HASH_ADD_KEYPTR(hh, g->by_name, v->name, strlen(v->name), v);
    if (zhash_oom) {
        zdiag_set(d, ZE_NOMEM, "out of memory building the IR");
        return NULL;
    }
    g->values[g->n_values++] = v;
    return v;
}

zir_node *zir_node_add(zir_graph *g, zir_op op, const char *name, zir_value *const *in, int n_in,
                       const zir_attrs *attr, int32_t layer, zir_group group, zdiag *d) {
    if ((unsigned)op >= ZOP_COUNT || op == ZOP_KERNEL || n_in != zir_ops[op].arity) {
        zdiag_set(d, ZE_INTERNAL, "node '%s': bad op or arity", name);
        return NULL;
    }
    zir_node *n = zarena_alloc(g->arena, sizeof *n);
    if (!n || !grow(g->arena, (void ***)&g->nodes, g->n_nodes, &g->cap_nodes)) {
        zdiag_set(d, ZE_NOMEM, "out of memory building the IR");
        return NULL;
    }
    n->op = op;
    n->n_in = n_in;
    memcpy(n->in, in, sizeof(zir_value *) * (size_t)n_in);
    if (attr) n->attr = *attr;
    n->layer = layer;
    n->group = group;
    int rank;
    zdim shape[ZIR_MAX_RANK];
    if (zir_infer_shape(n, &rank, shape, d) != ZOK) {
        zdiag_prefix(d, "node '%s' (%s)", name, zir_ops[op].name);
        return NULL;
    }
    zir_value *out = zir_value_new(g, name, ZR_ACTIVATION, ZT_F32, rank, shape, d);
    if (!out) return NULL;
    out->producer = n;
    out->layer = layer;
    n->out = out;
    n->id = g->n_nodes;
    for (int i = 0; i < n_in; i++)
        if (in[i]) in[i]->n_uses++;
    g->nodes[g->n_nodes++] = n;
    return n;
}

void zir_node_move(zir_graph *g, zir_node *n, uint32_t pos) {
    uint32_t from = n->id;
    if (pos >= g->n_nodes || from >= g->n_nodes || g->nodes[from] != n) return;
    if (from < pos)
        memmove(&g->nodes[from], &g->nodes[from + 1], sizeof *g->nodes * (pos - from));
    else
        memmove(&g->nodes[pos + 1], &g->nodes[pos], sizeof *g->nodes * (from - pos));
    g->nodes[pos] = n;
    uint32_t lo = from < pos ? from : pos, hi = from < pos ? pos : from;
    for (uint32_t i = lo; i <= hi; i++)
        g->nodes[i]->id = i;
}

int64_t zir_value_elems(const zir_value *v, const zir_step *s) {
    int64_t n = 1;
    for (int i = 0; i < v->rank; i++)
        n *= zdim_eval(v->shape[i], s);
    return n;
}

bool zir_value_is_state(const zir_value *v) {
    if (v->role != ZR_KV) return false;
    for (int i = 0; i < v->rank; i++)
        if (v->shape[i] < 0) return false;
    return true;
}

int zir_node_outputs(const zir_node *n, zir_value **out, int cap) {
    int m = 0;
    for (int i = 0; n->op == ZOP_KERNEL && i < n->n_body - 1; i++)
        if (n->body[i]->exported && m < cap - 1) out[m++] = n->body[i]->out;
    out[m++] = n->out;
    return m;
}
