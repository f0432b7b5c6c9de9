/* --emit=dot: the partitioned graph of one phase for graphviz. Every edge
 * into a node is a read, labelled with the bytes it moves per token, and
 * coloured by what it costs: red for a wide intermediate crossing VRAM, black
 * for other crossings, blue for KV-cache reads, grey dashed for views and
 * values that stay on chip. Kernels are clusters of the nodes they compute. */
#include <string.h>

#include "match.h"
#include "report.h"

typedef struct dot {
    const zir_graph *g;
    const zpass_opts *o;
    const zpass_mat *m;
    bool weights;
    FILE *out;
} dot;

static void qstr(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', out);
        if (*s == '\n')
            fputs("\\n", out);
        else
            fputc(*s, out);
    }
    fputc('"', out);
}

/* The graphviz id of the node that computes an original node. */
static void node_id(const zir_node *b, char *buf, size_t n) {
    if (!b->parent) {
        snprintf(buf, n, "n%u", b->id);
        return;
    }
    int j = 0;
    while (j < b->parent->n_body && b->parent->body[j] != b)
        j++;
    snprintf(buf, n, "k%u_%d", b->parent->id, j);
}

/* Where an edge carrying v starts: its (original) producer, or v itself. */
static void source_id(const zir_value *v, char *buf, size_t n) {
    const zir_node *p = v->producer;
    if (p && p->op == ZOP_KERNEL) p = p->body[p->n_body - 1];
    if (p)
        node_id(p, buf, n);
    else
        snprintf(buf, n, "v%u", v->id);
}

static void plain_node(const dot *x, const zir_node *b, const char *extra) {
    char id[32], label[256];
    node_id(b, id, sizeof id);
    const char *op = zir_ops[b->op].name;
    if (strcmp(op, b->out->name))
        snprintf(label, sizeof label, "%s\n%s", op, b->out->name);
    else
        snprintf(label, sizeof label, "%s", op);
    fprintf(x->out, "  %s [label=", id);
    qstr(x->out, label);
    fprintf(x->out, "%s];\n", extra);
}

static void kernel_cluster(const dot *x, const zir_node *k) {
    char label[160];
    if (k->layer >= 0)
        snprintf(label, sizeof label, "%s kernel, L%d: tile %d, split %d", zir_ktemplate_name(k->kp.tmpl),
                 k->layer, k->kp.token_tile, k->kp.split);
    else
        snprintf(label, sizeof label, "%s kernel: tile %d, split %d", zir_ktemplate_name(k->kp.tmpl),
                 k->kp.token_tile, k->kp.split);
    fprintf(x->out, "  subgraph cluster_k%u {\n    label=", k->id);
    qstr(x->out, label);
    fputs("; style=\"rounded,filled\"; fillcolor=\"#e8f0fe\"; color=\"#4a78c8\";\n", x->out);
    for (int j = 0; j < k->n_body; j++) {
        fputs("  ", x->out);
        plain_node(x, k->body[j], ", fillcolor=white");
    }
    fputs("  }\n", x->out);
}

static void edge(const dot *x, const char *from, const char *to, const char *label, const char *style) {
    fprintf(x->out, "  %s -> %s [label=", from, to);
    qstr(x->out, label);
    fprintf(x->out, ", %s];\n", style);
}

static const char *const GREY = "color=\"#9a9a9a\", fontcolor=\"#7a7a7a\", style=dashed";
static const char *const RED = "color=\"#d62728\", fontcolor=\"#d62728\", penwidth=2.2";
static const char *const BLUE = "color=\"#1f5fbf\", fontcolor=\"#1f5fbf\"";
static const char *const BLACK = "color=black";

/* The edge that brings v to original node b of top-level node c. */
static void read_edge(const dot *x, const zir_node *c, const zir_node *b, const zir_value *v) {
    char from[32], to[32], label[160], by[32];
    source_id(v, from, sizeof from);
    node_id(b, to, sizeof to);
    const zir_value *r = zpass_mat_storage(v);
    bool on_chip = v->producer && v->producer->parent == c;
    bool view = zpass_flag(b, ZF_VIEW); /* into a view: an alias, no data moves */
    if (on_chip || view || r->role == ZR_INPUT) {
        edge(x, from, to, on_chip ? v->name : "", r->role == ZR_INPUT ? BLACK : GREY);
        return;
    }
    bool kv = r->producer && zpass_kind(zpass_tail(r->producer)) == ZK_KV;
    double e = zpass_elems_per_token(r, x->o->ctx);
    double bytes = (kv ? e / zpass_mat_tile(c, x->o) : e) * x->m->act_bytes;
    zpass_fmt_bytes(bytes, by, sizeof by);
    snprintf(label, sizeof label, "%s\n%s/token", v->name, by);
    edge(x, from, to, label, kv ? BLUE : r->width > 1.0f ? RED : BLACK);
}

static void weight_edge(const dot *x, const zir_node *b, const zir_value *w) {
    char from[32], to[32], label[64];
    snprintf(from, sizeof from, "v%u", w->id);
    node_id(b, to, sizeof to);
    fprintf(x->out, "  %s [label=", from);
    qstr(x->out, w->name);
    fputs(", shape=box, fontsize=7, height=0.2, style=filled, fillcolor=\"#f0f0f0\"];\n", x->out);
    snprintf(label, sizeof label, "%s", ztype_name(w->dtype));
    edge(x, from, to, label, "color=\"#c0c0c0\", fontcolor=\"#9a9a9a\", arrowsize=0.5");
}

/* The inputs of the original nodes of top-level node c. */
static void node_edges(const dot *x, const zir_node *c) {
    int nb = c->op == ZOP_KERNEL ? c->n_body : 1;
    const zir_value *done[ZIR_MAX_IN * 4];
    int n_done = 0;
    for (int j = 0; j < nb; j++) {
        const zir_node *b = c->op == ZOP_KERNEL ? c->body[j] : c;
        for (int k = 0; k < b->n_in; k++) {
            const zir_value *v = b->in[k];
            if (!v || v->role == ZR_KV) continue; /* the cache is the store node itself */
            if (v->role == ZR_WEIGHT) {
                if (x->weights) weight_edge(x, b, v);
                continue;
            }
            bool dup = false; /* a kernel loads an outside value once: later uses are dotted */
            for (int i = 0; i < n_done; i++)
                dup |= done[i] == v;
            if (dup) {
                char from[32], to[32];
                source_id(v, from, sizeof from);
                node_id(b, to, sizeof to);
                edge(x, from, to, "", "color=\"#9a9a9a\", style=dotted");
                continue;
            }
            if (!(v->producer && v->producer->parent == c) && n_done < ZIR_MAX_IN * 4) done[n_done++] = v;
            read_edge(x, c, b, v);
        }
    }
}

static void nodes(const dot *x) {
    for (uint32_t i = 0; i < x->g->n_nodes; i++) {
        const zir_node *n = x->g->nodes[i];
        if (n->op == ZOP_KERNEL)
            kernel_cluster(x, n);
        else if (zpass_flag(n, ZF_VIEW))
            plain_node(x, n, ", shape=plain, style=\"\", fontcolor=\"#7a7a7a\", fontsize=8");
        else
            plain_node(x, n, zpass_kind(n) == ZK_KV ? ", shape=cylinder, fillcolor=\"#dfe9f7\"" : "");
    }
}

static void header(const dot *x) {
    const zpass_mat_traffic *t = &x->m->total;
    char act[32], wide[32], w[32], kv[32];
    zpass_fmt_bytes(t->act, act, sizeof act);
    zpass_fmt_bytes(t->wide, wide, sizeof wide);
    zpass_fmt_bytes(t->weight + t->scratch, w, sizeof w);
    zpass_fmt_bytes(t->kv, kv, sizeof kv);
    char label[768];
    snprintf(label, sizeof label,
             "zincc %s, target %s, ctx %lld: %d dispatches per step\\l"
             "per token: activations %s (wide %s), KV %s, weights %s\\l"
             "yellow: a dispatch of its own   blue box: a fused kernel   edges: reads, bytes per token\\l"
             "red: wide intermediate crossing VRAM   black: other crossing   blue: KV cache read   "
             "grey dashed: view or on chip\\l",
             zpass_phase_name(x->o->phase), x->o->target->name, (long long)x->o->ctx,
             t->dispatches + t->dequant_dispatches, act, wide, kv, w);
    fputs("digraph zincc {\n  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=11, labelloc=t, "
          "labeljust=l, nodesep=0.3, ranksep=0.3, label=\"",
          x->out);
    fputs(label, x->out);
    fputs("\"];\n  node [shape=box, style=\"rounded,filled\", fillcolor=\"#fff4d6\", fontname=\"Helvetica\", "
          "fontsize=9, margin=\"0.08,0.03\"];\n  edge [fontname=\"Helvetica\", fontsize=8, arrowsize=0.6];\n",
          x->out);
}

zstatus zpass_emit_dot(const zir_graph *g, const zpass_opts *o, const zpass_mat *m, bool weights, FILE *out,
                       zdiag *d) {
    if (!g || !m || m->phase != o->phase)
        return zdiag_set(d, ZE_INTERNAL, "emit dot: expected the materialization of the %s graph",
                         zpass_phase_name(o->phase));
    dot x = {g, o, m, weights, out};
    header(&x);
    fprintf(out, "  v%u [label=\"tokens\", shape=ellipse, fillcolor=white];\n", g->tokens->id);
    nodes(&x);
    for (uint32_t i = 0; i < g->n_nodes; i++)
        node_edges(&x, g->nodes[i]);
    if (g->logits) {
        char from[32], label[64], by[32];
        source_id(g->logits, from, sizeof from);
        zpass_fmt_bytes(zpass_elems_per_token(g->logits, o->ctx) * m->act_bytes, by, sizeof by);
        snprintf(label, sizeof label, "%s\n%s/token", g->logits->name, by);
        fputs("  output [label=\"output\", shape=ellipse, fillcolor=white];\n", out);
        edge(&x, from, "output", label, BLACK);
    }
    fputs("}\n", out);
    return ferror(out) ? zdiag_set(d, ZE_IO, "emit dot: write failed") : ZOK;
}
