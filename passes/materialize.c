/* Materialization analysis: what a partitioned graph moves through VRAM per
 * token in one phase (the rules are in report.h). It reads the partition the
 * passes left (top-level nodes, kernel bodies, dequant marks) and changes
 * nothing, so the same function prices the staged graph and the fused one. */
#include <string.h>

#include "cost.h"
#include "match.h"
#include "report.h"

const zir_value *zpass_mat_storage(const zir_value *v) {
    while (v && v->producer && v->producer->op != ZOP_KERNEL && zpass_flag(v->producer, ZF_VIEW))
        v = v->producer->in[0];
    return v;
}

static bool is_view(const zir_node *n) {
    return n->op != ZOP_KERNEL && zpass_flag(n, ZF_VIEW);
}

int zpass_mat_tile(const zir_node *n, const zpass_opts *o) {
    if (o->phase == ZPH_DECODE) return 1;
    if (n->op == ZOP_KERNEL && n->kp.token_tile > 0) return n->kp.token_tile;
    return zcost_token_tile(o);
}

static bool is_kv_store(const zir_node *n) {
    return zpass_kind(zpass_tail(n)) == ZK_KV;
}

/* Per-value counters while walking the graph, indexed by value id. */
typedef struct walk {
    const zir_graph *g;
    const zpass_opts *o;
    zpass_mat *m;
    int *reads;
    double *read_b;
} walk;

/* m->groups holds one slot per original node, so a new pair always fits. */
static zpass_mat_group *group_of(zpass_mat *m, int layer, zir_group grp) {
    for (int i = 0; i < m->n_groups; i++)
        if (m->groups[i].layer == layer && m->groups[i].group == grp) return &m->groups[i];
    zpass_mat_group *x = &m->groups[m->n_groups++];
    x->layer = layer;
    x->group = grp;
    return x;
}

/* Reads of activations by one top-level node, each stored value once. */
static void count_reads(walk *w, const zir_node *n) {
    const zir_value *seen[ZIR_MAX_IN];
    int n_seen = 0;
    int tile = zpass_mat_tile(n, w->o);
    for (int k = 0; k < n->n_in; k++) {
        const zir_value *r = zpass_mat_storage(n->in[k]);
        if (!r || r->role != ZR_ACTIVATION || !r->producer) continue;
        bool dup = false;
        for (int j = 0; j < n_seen; j++)
            dup |= seen[j] == r;
        if (dup) continue;
        seen[n_seen++] = r;
        double e = zpass_elems_per_token(r, w->o->ctx);
        /* A cache view is read in full by every token tile. */
        double per = is_kv_store(r->producer) ? e / tile : e;
        w->reads[r->id]++;
        w->read_b[r->id] += per * w->m->act_bytes;
    }
}

/* Weight and staged-dequant traffic of one original node. */
static void count_weights(const walk *w, const zir_node *b, int tile, zpass_mat_traffic *t) {
    int wslot = zpass_flag(b, ZF_W0) ? 0 : zpass_flag(b, ZF_W1) ? 1 : -1;
    double step = (double)w->m->step_tokens;
    for (int k = 0; k < b->n_in; k++) {
        const zir_value *v = b->in[k];
        if (!v || v->role != ZR_WEIGHT) continue;
        zir_step s1 = {1, 0, 1};
        double elems = (double)zir_value_elems(v, &s1);
        const ztype_info *ti = ztype_get((uint32_t)v->dtype);
        bool staged = k == wslot && ti && (ti->flags & ZTF_QUANT) && b->dequant == ZDQ_STAGED;
        if (zpass_kind(b) == ZK_GATHER && k == wslot) {
            /* A lookup touches T rows, not the table. */
            double rows = v->rank > 0 && v->shape[0] > 0 ? (double)v->shape[0] : 1;
            t->weight += (double)v->nbytes / rows;
            if (staged) t->scratch += 2.0 * 2.0 * elems / rows, t->dequant_dispatches++;
        } else if (staged) {
            /* The dequant kernel runs once per step; the consumer re-reads
             * its fp16 copy once per token tile. */
            t->weight += (double)v->nbytes / step;
            t->scratch += 2.0 * elems / step + 2.0 * elems / tile;
            t->dequant_dispatches++;
        } else if (zpass_kind(b) == ZK_MOE && k == wslot && v->rank == 3) {
            /* Each (token, slot) reads its chosen expert's rows: used /
             * experts of the stack per token, shared by no tile. */
            t->weight += (double)v->nbytes * (double)b->in[2]->shape[1] / (double)v->shape[0];
        } else {
            t->weight += (double)v->nbytes / tile;
        }
    }
}

/* A recurrent op reads its state once at the start of a step and writes it
 * once at the end (ssm_conv.glsl, delta_net.glsl): twice the state's f32
 * bytes per step, whatever the step's length. */
static void count_state(const walk *w, const zir_node *b, zpass_mat_traffic *t) {
    if (zpass_kind(b) != ZK_RECURRENT) return;
    zir_step s1 = {1, 0, 1};
    for (int k = 0; k < b->n_in; k++)
        if (b->in[k] && zir_value_is_state(b->in[k]))
            t->state += 2.0 * 4.0 * (double)zir_value_elems(b->in[k], &s1) / (double)w->m->step_tokens;
}

static void count_node(walk *w, const zir_node *n) {
    zpass_mat_group *grp = group_of(w->m, n->layer, n->group);
    grp->t.dispatches++;
    count_reads(w, n);
    int tile = zpass_mat_tile(n, w->o);
    if (n->op != ZOP_KERNEL) {
        count_weights(w, n, tile, &grp->t);
        count_state(w, n, &grp->t);
        return;
    }
    for (int i = 0; i < n->n_body; i++) {
        const zir_node *b = n->body[i];
        count_weights(w, b, tile, &group_of(w->m, b->layer, b->group)->t);
        count_state(w, b, &group_of(w->m, b->layer, b->group)->t);
    }
}

/* The write of an output v of a top-level node (its own, or an exported
 * body value of a kernel), and its value record. */
static void add_value(walk *w, const zir_node *n, const zir_value *v) {
    bool kv = v == n->out && is_kv_store(n), out = v == w->g->logits;
    int reads = w->reads[v->id];
    if (!kv && !out && reads == 0) return; /* dead, or read by nobody */
    zpass_mat_value *x = &w->m->values[w->m->n_values++];
    double e = zpass_elems_per_token(v, w->o->ctx);
    *x = (zpass_mat_value){.v = v,
                           .layer = n->layer,
                           .group = n->group,
                           .kind = kv    ? ZMAT_KV
                                   : out ? ZMAT_OUTPUT
                                         : ZMAT_ACT,
                           .width = v->width,
                           .writes = 1,
                           .reads = reads,
                           .elems = e,
                           .read_b = w->read_b[v->id]};
    /* The store writes the step's new rows: its input's elements per token. */
    double we = kv ? zpass_elems_per_token(zpass_tail(n)->in[0], w->o->ctx) : e;
    x->write_b = we * w->m->act_bytes;
    x->wide = x->kind == ZMAT_ACT && x->width > 1.0f;
    zpass_mat_traffic *t = &group_of(w->m, n->layer, n->group)->t;
    if (kv) {
        t->kv += x->write_b + x->read_b;
        return;
    }
    t->act += x->write_b + x->read_b;
    t->crossings += x->writes + x->reads;
    if (x->wide) {
        t->wide += x->write_b + x->read_b;
        t->wide_crossings += x->writes + x->reads;
    }
}

static void add_traffic(zpass_mat_traffic *a, const zpass_mat_traffic *b) {
    a->act += b->act;
    a->wide += b->wide;
    a->kv += b->kv;
    a->state += b->state;
    a->weight += b->weight;
    a->scratch += b->scratch;
    a->crossings += b->crossings;
    a->wide_crossings += b->wide_crossings;
    a->dispatches += b->dispatches;
    a->dequant_dispatches += b->dequant_dispatches;
}

static zstatus check_widths(const zir_graph *g, zdiag *d) {
    for (uint32_t i = 0; i < g->n_values; i++)
        if (g->values[i]->role == ZR_ACTIVATION && g->values[i]->width > 0) return ZOK;
    return zdiag_set(d, ZE_INVALID,
                     "materialize: no activation has a width: expected the width pass to run first");
}

zstatus zpass_materialize(const zir_graph *g, const zpass_opts *o, zarena *a, zpass_mat *out, zdiag *d) {
    zstatus s = check_widths(g, d);
    if (s) return s;
    zpass_mat *m = out;
    *m = (zpass_mat){
        .phase = o->phase, .step_tokens = zcost_step_tokens(o), .act_bytes = o->target->act_bytes};
    size_t originals = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        originals += g->nodes[i]->op == ZOP_KERNEL ? (size_t)g->nodes[i]->n_body : 1;
    walk w = {g, o, m, zarena_array(a, g->n_values, sizeof(int)),
              zarena_array(a, g->n_values, sizeof(double))};
    m->values = zarena_array(a, g->n_values, sizeof *m->values);
    m->groups = zarena_array(a, originals + 1, sizeof *m->groups);
    if (!w.reads || !w.read_b || !m->values || !m->groups) return zdiag_set(d, ZE_NOMEM, "out of memory");
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (!is_view(g->nodes[i])) count_node(&w, g->nodes[i]);
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_value *outs[ZIR_MAX_OUT];
        int n_out = is_view(g->nodes[i]) ? 0 : zir_node_outputs(g->nodes[i], outs, ZIR_MAX_OUT);
        for (int j = 0; j < n_out; j++)
            add_value(&w, g->nodes[i], outs[j]);
    }
    for (int i = 0; i < m->n_groups; i++)
        add_traffic(&m->total, &m->groups[i].t);
    return ZOK;
}

const zpass_mat_value *zpass_mat_find(const zpass_mat *m, const char *name) {
    for (int i = 0; i < m->n_values; i++)
        if (!strcmp(m->values[i].v->name, name)) return &m->values[i];
    return NULL;
}

const zpass_mat_group *zpass_mat_group_find(const zpass_mat *m, int layer, zir_group g) {
    for (int i = 0; i < m->n_groups; i++)
        if (m->groups[i].layer == layer && m->groups[i].group == g) return &m->groups[i];
    return NULL;
}

double zpass_mat_bytes(const zpass_mat_traffic *t) {
    return t->act + t->kv + t->state + t->weight + t->scratch;
}

double zpass_mat_est_us(const zpass_mat *m, const zpass_mat_traffic *t, const ztarget *tg) {
    double disp = (double)(t->dispatches + t->dequant_dispatches) / (double)m->step_tokens;
    return zpass_mat_bytes(t) / (tg->bandwidth_gbs * 1e3) + disp * tg->dispatch_us;
}
