/* count-crossings: an out-of-tree analysis pass, and a program that runs it.
 *
 * The pass walks the top-level nodes of a compiled graph and counts, per
 * layer and group, the dispatches and the activation "crossings": every
 * write of a node's output to VRAM and every read of it by another
 * dispatch, in bytes per token at the context the options assume. Values
 * wider than the hidden state (the MLP intermediate, attention scores) are
 * counted apart: those are what fusion exists to keep on chip.
 *
 * The program compiles the model twice, once with only the analyses
 * (shape,width: every op its own dispatch) and once with the default
 * pipeline, runs the pass on both through zpass_run_one() (so --verify-each
 * and --print-after semantics apply to it as to any registered pass), and
 * prints the two side by side.
 *
 * It is not in passes/passes.def: a pass is a zpass_info, and any program
 * linking zinc_passes can declare its own. See examples/README.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/arch.h"
#include "passes/pass.h"

/* ---- the pass ------------------------------------------------------------ */

typedef struct cc_cell {
    int dispatches;
    int crossings, wide; /* all activation crossings; those of values wider than hidden */
    double bytes;        /* per token, all crossings */
} cc_cell;

/* One cell per (layer, group); row 0 holds the nodes outside layers. */
typedef struct cc_table {
    int n_layer;
    cc_cell *cells; /* (n_layer + 1) x ZG_COUNT */
} cc_table;

/* A pass has only the graph, the options and the report to write to; this
 * analysis keeps its table in the graph's arena (so it lives exactly as long
 * as the graph) and publishes it here for main() to read. */
static const cc_table *cc_result;

static cc_cell *cell(cc_table *t, const zir_node *n) {
    int row = n->layer >= 0 && n->layer < t->n_layer ? n->layer + 1 : 0;
    return &t->cells[row * ZG_COUNT + (int)n->group];
}

/* A view (reshape) moves no data: its reader reads what the view shows. */
static const zir_value *root(const zir_value *v) {
    while (v->producer && (zir_ops[v->producer->op].flags & ZF_VIEW))
        v = v->producer->in[0];
    return v;
}

/* What computes a node's output: itself, or a fused kernel's last body node. */
static const zir_node *tail_of(const zir_node *n) {
    return n->op == ZOP_KERNEL ? n->body[n->n_body - 1] : n;
}

/* The output of a KV-cache store (alone or ending a kernel) is a window on
 * the cache, not a new value: reading it is cache traffic, which the cost
 * model prices separately. */
static bool is_activation(const zir_value *v) {
    return v->role == ZR_ACTIVATION &&
           !(v->producer && (zir_ops[tail_of(v->producer)->op].flags & ZF_STATEFUL));
}

static void cross(cc_cell *c, const zir_value *v, const zpass_opts *o) {
    zir_step one = {.T = 1, .pos = o->ctx - 1, .ctx = o->ctx}; /* per token, at the assumed context */
    c->crossings++;
    c->wide += v->width > 1.0f + 1e-6f; /* the width pass measured it */
    c->bytes += (double)zir_value_elems(v, &one) * o->target->act_bytes;
}

/* One dispatch: each output (its own, and what a horizontal kernel
 * exports) is written once, each distinct activation it takes from outside
 * is read once. A kernel's inputs are exactly those. */
static void count_node(cc_table *t, const zir_node *n, const zpass_opts *o) {
    cc_cell *c = cell(t, n);
    c->dispatches++;
    const zir_node *tail = tail_of(n);
    bool stateful = zir_ops[tail->op].flags & ZF_STATEFUL;
    zir_value *outs[ZIR_MAX_OUT];
    int n_out = zir_node_outputs(n, outs, ZIR_MAX_OUT);
    for (int j = 0; j < n_out; j++) /* a store writes the new rows */
        cross(c, stateful && outs[j] == n->out ? tail->in[0] : outs[j], o);
    for (int i = 0; i < n->n_in; i++) {
        if (!n->in[i] || !is_activation(root(n->in[i]))) continue;
        bool seen = false;
        for (int j = 0; j < i; j++)
            seen |= n->in[j] && root(n->in[j]) == root(n->in[i]);
        if (!seen) cross(c, root(n->in[i]), o);
    }
}

static zstatus count_crossings(zir_graph *g, const zpass_opts *o, zdiag *d) {
    if (o->ctx < 1)
        return zdiag_set(d, ZE_INVALID, "count-crossings: context %lld: expected >= 1", (long long)o->ctx);
    cc_table *t = zarena_alloc(g->arena, sizeof *t);
    if (t) t->cells = zarena_array(g->arena, (size_t)(g->hp.n_layer + 1) * ZG_COUNT, sizeof *t->cells);
    if (!t || !t->cells) return zdiag_set(d, ZE_NOMEM, "count-crossings: out of memory");
    t->n_layer = g->hp.n_layer;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (!(zir_ops[g->nodes[i]->op].flags & ZF_VIEW)) count_node(t, g->nodes[i], o);
    cc_result = t;
    return ZOK;
}

static const zpass_info count_crossings_pass = {
    "count-crossings", count_crossings, ZPK_ANALYSIS, false,
    "dispatches and activation VRAM crossings per layer and group"};

/* ---- the program --------------------------------------------------------- */

typedef struct args {
    const char *model, *target, *passes;
    zpass_phase phase;
    long ctx;
} args;

static int usage(const char *why) {
    if (why) fprintf(stderr, "count-crossings: %s\n", why);
    fprintf(why ? stderr : stdout,
            "usage: count-crossings MODEL.gguf [--target NAME] [--phase prefill|decode] [--ctx N] "
            "[--passes a,b,c]\n");
    return why ? 2 : 0;
}

static int parse(int argc, char **argv, args *a) {
    *a = (args){.target = "h200", .phase = ZPH_DECODE, .ctx = 4096};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) exit(usage(NULL));
        if (argv[i][0] != '-' && !a->model)
            a->model = argv[i];
        else if (!v)
            return usage("an option lacks its value, or an argument is extra");
        else if (!strcmp(argv[i], "--target"))
            a->target = argv[++i];
        else if (!strcmp(argv[i], "--passes"))
            a->passes = argv[++i];
        else if (!strcmp(argv[i], "--ctx") && (a->ctx = strtol(argv[++i], NULL, 10)) < 1)
            return usage("--ctx expects a positive number");
        else if (!strcmp(argv[i], "--phase") && (strcmp(v, "prefill") && strcmp(v, "decode")))
            return usage("--phase expects prefill or decode");
        else if (!strcmp(argv[i], "--phase"))
            a->phase = !strcmp(argv[++i], "decode") ? ZPH_DECODE : ZPH_PREFILL;
        else if (strcmp(argv[i], "--ctx"))
            return usage("unknown option");
    }
    return a->model ? 0 : usage("no model given");
}

/* Builds the graph, runs the pipeline and then the pass; copies the table
 * out before the graph (and its arena) goes. */
static zstatus measure(const gguf_file *f, const char *pipeline, const zpass_opts *o, cc_cell *out,
                       zir_hparams *hp, zdiag *d) {
    zir_graph *g = NULL;
    zstatus s = zir_build_from_gguf(f, &g, d);
    if (!s) s = zpass_run_pipeline(g, pipeline, NULL, o, d);
    if (!s) s = zpass_run_one(g, &count_crossings_pass, o, d);
    if (!s) {
        memcpy(out, cc_result->cells, sizeof *out * (size_t)(g->hp.n_layer + 1) * ZG_COUNT);
        *hp = g->hp;
    }
    zir_graph_free(g);
    return s;
}

static void add_cell(cc_cell *sum, const cc_cell *c) {
    sum->dispatches += c->dispatches;
    sum->crossings += c->crossings;
    sum->wide += c->wide;
    sum->bytes += c->bytes;
}

static void print_row(const char *layer, const char *group, const cc_cell *a, const cc_cell *b) {
    printf("%-6s %-7s %7d %6d   %7d %6d   %7d %6d   %9.1f %9.1f\n", layer, group, a->dispatches,
           b->dispatches, a->crossings, b->crossings, a->wide, b->wide, a->bytes / 1024, b->bytes / 1024);
}

static void print_table(const zir_hparams *hp, const zpass_opts *o, const cc_cell *st, const cc_cell *fu) {
    printf("count-crossings: %s, %d layers, hidden %d, ff %d; target %s, %s, ctx %lld, %d-byte activations\n",
           hp->arch, hp->n_layer, hp->n_embd, hp->n_ff, o->target->name, zpass_phase_name(o->phase),
           (long long)o->ctx, o->target->act_bytes);
    printf("%-6s %-7s %14s   %14s   %14s   %19s\n", "", "", "dispatches", "crossings", "wide crossings",
           "KiB per token");
    printf("%-6s %-7s %7s %6s   %7s %6s   %7s %6s   %9s %9s\n", "layer", "group", "staged", "fused", "staged",
           "fused", "staged", "fused", "staged", "fused");
    cc_cell ts = {0}, tf = {0};
    for (int row = 0; row <= hp->n_layer; row++)
        for (int grp = 0; grp < ZG_COUNT; grp++) {
            const cc_cell *a = &st[row * ZG_COUNT + grp], *b = &fu[row * ZG_COUNT + grp];
            if (!a->dispatches && !b->dispatches) continue;
            char layer[16];
            snprintf(layer, sizeof layer, row ? "%d" : "-", row - 1);
            print_row(layer, zir_group_name((zir_group)grp), a, b);
            add_cell(&ts, a);
            add_cell(&tf, b);
        }
    print_row("total", "", &ts, &tf);
}

int main(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    const ztarget *t = ztarget_find(a.target);
    if (!t) return usage("unknown target");
    zpass_opts o = {.target = t,
                    .phase = a.phase,
                    .token_tile = t->prefill_tile,
                    .ctx = a.ctx,
                    .fuse_threshold = t->fuse_threshold,
                    .verify_each = true};
    zdiag d = {0};
    gguf_file *f = NULL;
    zir_hparams hp = {0};
    zstatus s = gguf_open(a.model, &f, &d);
    if (!s) s = zir_read_hparams(f, &hp, &d);
    size_t cells = (size_t)(hp.n_layer + 1) * ZG_COUNT;
    cc_cell *st = calloc(cells, sizeof *st), *fu = calloc(cells, sizeof *fu);
    if (!s && (!st || !fu)) s = zdiag_set(&d, ZE_NOMEM, "out of memory");
    if (!s) s = measure(f, "shape,width", &o, st, &hp, &d);
    if (!s) s = measure(f, a.passes, &o, fu, &hp, &d);
    if (!s) print_table(&hp, &o, st, fu);
    free(st);
    free(fu);
    gguf_close(f);
    if (s) fprintf(stderr, "count-crossings: %s\n", d.msg);
    return s ? 1 : 0;
}
