/* The fusion report: per phase, per layer group, what crossed VRAM in the
 * staged partition and what still does after fusion, next to the decision
 * and the arithmetic the fusion pass recorded. Text for people (identical
 * layers folded), JSON for tools (every layer). docs/report.md shows both. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "../ir/json.h"
#include "cost.h"
#include "report.h"

/* One line of a group: its wide intermediates, or one other decision. */
typedef struct rrow {
    const char *what; /* display name: "gate+up+act", "ffn_in" */
    double width;
    int cb, ca;    /* crossings before, after */
    double bb, ba; /* bytes per token before, after */
    const zpass_decision *dec;
    bool fused;
    const char *kernel; /* template of the kernel the value ended in, or "none" */
    const char *reason;
} rrow;

typedef struct rgroup {
    int layer;
    zir_group group;
    zpass_phase phase;
    const zpass_mat_group *gb, *ga; /* traffic before, after (ga NULL when the group vanished) */
    int n_rows;                     /* rows[0] is the wide intermediates' line */
    int first;                      /* 1 when rows[0] is empty: no wide value, no decision on one */
    rrow *rows;
    const char **wide; /* names of the wide values */
    int n_wide;
    const char *sig; /* text rows without the layer, to fold identical layers */
} rgroup;

typedef struct rctx {
    const zpass_rep *r;
    zarena *a;
} rctx;

void zpass_fmt_bytes(double b, char *buf, size_t n) {
    if (b == 0)
        snprintf(buf, n, "0 B");
    else if (b < 10 && b != floor(b))
        snprintf(buf, n, "%.2f B", b);
    else if (b < 1024)
        snprintf(buf, n, "%.0f B", b);
    else if (b < 1024.0 * 1024)
        snprintf(buf, n, "%.1f KiB", b / 1024);
    else if (b < 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.1f MiB", b / (1024.0 * 1024));
    else
        snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
}

/* "l12.ffn_in" -> "ffn_in", inside any text: layer prefixes after a
 * non-name character, so identical layers compare equal. */
static char *strip_layers(zarena *a, const char *s) {
    size_t n = strlen(s);
    char *o = zarena_alloc(a, n + 1);
    if (!o) return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n;) {
        bool start = i == 0 || !(s[i - 1] == '_' || s[i - 1] == '.' || (s[i - 1] >= 'a' && s[i - 1] <= 'z') ||
                                 (s[i - 1] >= '0' && s[i - 1] <= '9'));
        size_t k = i + 1;
        while (k < n && s[k] >= '0' && s[k] <= '9')
            k++;
        if (start && s[i] == 'l' && k > i + 1 && k < n && s[k] == '.') {
            i = k + 1;
            continue;
        }
        o[j++] = s[i++];
    }
    o[j] = 0;
    return o;
}

/* The kernel template a value ended in within the fused graph. */
static const char *kernel_of(const zir_graph *g, const char *name) {
    const zir_value *v = g ? zir_find(g, name) : NULL;
    const zir_node *p = v ? v->producer : NULL;
    if (p && p->parent) p = p->parent;
    if (!p || p->op != ZOP_KERNEL) return "none";
    return zir_ktemplate_name(p->kp.tmpl);
}

static bool decision_in(const zpass_decision *x, const rgroup *G) {
    return x->phase == G->phase && x->layer == G->layer && x->group == G->group;
}

static void value_row(const rgroup *G, const zpass_rep_phase *P, const zpass_decision *x, rrow *w,
                      zarena *a) {
    const zpass_mat_value *b = zpass_mat_find(&P->before, x->what);
    const zpass_mat_value *f = zpass_mat_find(&P->after, x->what);
    (void)G;
    *w = (rrow){.what = strip_layers(a, x->what),
                .width = x->width,
                .cb = b ? b->writes + b->reads : 0,
                .ca = f ? f->writes + f->reads : 0,
                .bb = b ? b->write_b + b->read_b : 0,
                .ba = f ? f->write_b + f->read_b : 0,
                .dec = x,
                .fused = x->fused,
                .kernel = kernel_of(P->fused, x->what),
                .reason = strip_layers(a, x->reason)};
}

/* rows[0]: the wide intermediates of the group, with the decision made on
 * one of them (fuse-mlp's, fuse-attn's). */
static zstatus main_row(const rctx *c, rgroup *G, const zpass_rep_phase *P) {
    const zpass_mat *B = &P->before;
    G->wide = zarena_array(c->a, (size_t)B->n_values + 1, sizeof *G->wide);
    char *names = zarena_alloc(c->a, 512);
    if (!G->wide || !names) return ZE_NOMEM;
    rrow *w = &G->rows[0];
    size_t len = 0;
    for (int i = 0; i < B->n_values; i++) {
        const zpass_mat_value *v = &B->values[i];
        if (!v->wide || v->layer != G->layer || v->group != G->group) continue;
        G->wide[G->n_wide++] = v->v->name;
        const char *s = strip_layers(c->a, v->v->name);
        if (s && len < 500) len += (size_t)snprintf(names + len, 512 - len, "%s%s", len ? "+" : "", s);
        if (v->width > w->width) w->width = v->width;
    }
    w->what = len ? names : "-";
    w->cb = G->gb ? G->gb->t.wide_crossings : 0;
    w->ca = G->ga ? G->ga->t.wide_crossings : 0;
    w->bb = G->gb ? G->gb->t.wide : 0;
    w->ba = G->ga ? G->ga->t.wide : 0;
    const zpass_report *D = c->r->decisions;
    for (int i = 0; D && i < D->n && !w->dec; i++)
        if (decision_in(&D->items[i], G) && D->items[i].width > 1.0) w->dec = &D->items[i];
    w->fused = w->dec ? w->dec->fused : w->ca < w->cb;
    w->kernel = kernel_of(P->fused, w->dec ? w->dec->what : G->n_wide ? G->wide[0] : "");
    w->reason = w->dec ? strip_layers(c->a, w->dec->reason) : "no fusion pass recorded a decision here";
    G->first = !G->n_wide && !w->dec;
    return ZOK;
}

static zstatus build_group(const rctx *c, rgroup *G, const zpass_rep_phase *P) {
    const zpass_report *D = c->r->decisions;
    int n = 1;
    for (int i = 0; D && i < D->n; i++)
        n += decision_in(&D->items[i], G);
    G->rows = zarena_array(c->a, (size_t)n, sizeof *G->rows);
    if (!G->rows || main_row(c, G, P)) return ZE_NOMEM;
    G->n_rows = 1;
    for (int i = 0; D && i < D->n; i++)
        if (decision_in(&D->items[i], G) && &D->items[i] != G->rows[0].dec)
            value_row(G, P, &D->items[i], &G->rows[G->n_rows++], c->a);
    return ZOK;
}

/* The groups of one phase, in the staged graph's order. */
static zstatus build_groups(const rctx *c, zpass_phase ph, rgroup **out, int *n, zdiag *d) {
    const zpass_rep_phase *P = &c->r->ph[ph];
    rgroup *gs = zarena_array(c->a, (size_t)P->before.n_groups + 1, sizeof *gs);
    if (!gs) return zdiag_set(d, ZE_NOMEM, "out of memory");
    for (int i = 0; i < P->before.n_groups; i++) {
        const zpass_mat_group *b = &P->before.groups[i];
        gs[i] = (rgroup){.layer = b->layer, .group = b->group, .phase = ph, .gb = b};
        gs[i].ga = zpass_mat_group_find(&P->after, b->layer, b->group);
        if (build_group(c, &gs[i], P)) return zdiag_set(d, ZE_NOMEM, "out of memory");
    }
    *out = gs;
    *n = P->before.n_groups;
    return ZOK;
}

/* ---- text ----------------------------------------------------------------- */

enum { NCOL = 8, MAXLINES = 4096 };

typedef struct table {
    const char *cell[MAXLINES][NCOL];
    bool right[NCOL];
    int n;
    const char *notes[26]; /* layer sets too long for the column, printed under the table */
    int n_notes;
} table;

static const char *fmt(zarena *a, const char *f, ...) ZPRINTF(2, 3);
static const char *fmt(zarena *a, const char *f, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    const char *s = zarena_strdup(a, buf);
    return s ? s : "?";
}

static const char *bytes_pair(zarena *a, double b, double f) {
    char x[32], y[32];
    zpass_fmt_bytes(b, x, sizeof x);
    zpass_fmt_bytes(f, y, sizeof y);
    return fmt(a, "%s -> %s", x, y);
}

static void row_cells(zarena *a, const rgroup *G, const rrow *w, bool first, const char **cell) {
    cell[0] = "";
    cell[1] = first ? zir_group_name(G->group) : "";
    cell[2] = w->what;
    cell[3] = fmt(a, "%.2f", w->width);
    cell[4] = fmt(a, "%d -> %d", w->cb, w->ca);
    cell[5] = bytes_pair(a, w->bb, w->ba);
    cell[6] = w->fused ? fmt(a, "fused (%s)", w->kernel) : "not fused";
    cell[7] = w->reason ? w->reason : "";
}

/* "0-3,5,7-35" for the layers whose groups print the same rows. */
static const char *layer_set(zarena *a, const rgroup *gs, int n, const rgroup *G, int *count) {
    char buf[512];
    size_t len = 0;
    int run0 = -2, prev = -2;
    *count = 0;
    for (int i = 0; i <= n; i++) {
        bool in = i < n && gs[i].group == G->group && gs[i].layer >= 0 && !strcmp(gs[i].sig, G->sig);
        *count += in;
        if (in && gs[i].layer == prev + 1) {
            prev = gs[i].layer;
            continue;
        }
        if ((in || i == n) && run0 >= 0 && len < 480)
            len += (size_t)snprintf(buf + len, sizeof buf - len, run0 == prev ? "%s%d" : "%s%d-%d",
                                    len ? "," : "", run0, prev);
        if (in) run0 = prev = gs[i].layer;
    }
    return fmt(a, "%s", len ? buf : "-");
}

static void signatures(zarena *a, rgroup *gs, int n) {
    for (int i = 0; i < n; i++) {
        char buf[4096];
        size_t len = 0;
        buf[0] = 0;
        for (int r = gs[i].first; r < gs[i].n_rows; r++) {
            const char *cell[NCOL];
            row_cells(a, &gs[i], &gs[i].rows[r], r == gs[i].first, cell);
            for (int k = 1; k < NCOL && len < sizeof buf - 1; k++)
                len += (size_t)snprintf(buf + len, sizeof buf - len, "%s|", cell[k]);
        }
        gs[i].sig = zarena_strdup(a, buf);
        if (!gs[i].sig) gs[i].sig = "";
    }
}

/* Columns padded to their widest cell, two spaces apart; right-aligned
 * where t->right says so; the last column is not padded. */
static void print_table(FILE *out, const table *t, int ncol) {
    int wid[NCOL] = {0};
    for (int i = 0; i < t->n; i++)
        for (int k = 0; k < ncol; k++) {
            int l = (int)strlen(t->cell[i][k]);
            if (l > wid[k]) wid[k] = l;
        }
    for (int i = 0; i < t->n; i++) {
        char line[2048];
        size_t len = 0;
        for (int k = 0; k < ncol && len < sizeof line; k++) {
            int w = k == ncol - 1 && !t->right[k] ? 0 : wid[k];
            len += (size_t)snprintf(line + len, sizeof line - len, t->right[k] ? "%*s%s" : "%-*s%s", w,
                                    t->cell[i][k], k < ncol - 1 ? "  " : "");
        }
        if (len >= sizeof line) len = sizeof line - 1;
        while (len && line[len - 1] == ' ')
            len--;
        fprintf(out, "%.*s\n", (int)len, line);
    }
}

static void add_line(table *t, const char *const *cells, int ncol) {
    if (t->n >= MAXLINES) return;
    for (int k = 0; k < ncol; k++)
        t->cell[t->n][k] = cells[k];
    t->n++;
}

/* The layers column: the set itself, or "[a] 16 layers" with the set in a
 * note under the table when it would widen every row (q4_K_M's use_more_bits
 * layers give sets like 0-3,6,9,...). */
static const char *layers_cell(zarena *a, const rgroup *gs, int n, const rgroup *G, table *t) {
    if (G->layer < 0) return "-";
    int count;
    const char *set = layer_set(a, gs, n, G, &count);
    if (strlen(set) <= 16 || t->n_notes >= 26) return set;
    char tag = (char)('a' + t->n_notes);
    t->notes[t->n_notes++] = fmt(a, "[%c] layers %s", tag, set);
    return fmt(a, "[%c] %d layers", tag, count);
}

/* One phase's table: a row block per layer group, identical layers folded. */
static void phase_table(const rctx *c, rgroup *gs, int n, table *t) {
    static const char *const head[NCOL] = {"layers",    "group",       "intermediate", "width",
                                           "crossings", "bytes/token", "decision",     "reason"};
    t->n = t->n_notes = 0;
    memset(t->right, 0, sizeof t->right);
    add_line(t, head, NCOL);
    signatures(c->a, gs, n);
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < i && gs[i].layer >= 0; j++)
            seen |= gs[j].layer >= 0 && gs[j].group == gs[i].group && !strcmp(gs[j].sig, gs[i].sig);
        if (seen) continue;
        for (int r = gs[i].first; r < gs[i].n_rows; r++) {
            const char *cell[NCOL];
            row_cells(c->a, &gs[i], &gs[i].rows[r], r == gs[i].first, cell);
            if (r == gs[i].first) cell[0] = layers_cell(c->a, gs, n, &gs[i], t);
            add_line(t, cell, NCOL);
        }
    }
}

static const char *ratio(zarena *a, double b, double f) {
    if (b == 0 && f == 0) return "-";
    if (f == 0) return "inf";
    return fmt(a, "%.2fx", b / f);
}

typedef double (*metric_fn)(const zpass_mat *m, const zpass_mat_traffic *t, const ztarget *tg);
static double m_act(const zpass_mat *m, const zpass_mat_traffic *t, const ztarget *tg) {
    return (void)m, (void)tg, t->act;
}
static double m_wide(const zpass_mat *m, const zpass_mat_traffic *t, const ztarget *tg) {
    return (void)m, (void)tg, t->wide;
}
static double m_kv(const zpass_mat *m, const zpass_mat_traffic *t, const ztarget *tg) {
    return (void)m, (void)tg, t->kv;
}
static double m_state(const zpass_mat *m, const zpass_mat_traffic *t, const ztarget *tg) {
    return (void)m, (void)tg, t->state;
}
static double m_wall(const zpass_mat *m, const zpass_mat_traffic *t, const ztarget *tg) {
    return (void)m, (void)tg, t->weight + t->scratch;
}
static double m_weight(const zpass_mat *m, const zpass_mat_traffic *t, const ztarget *tg) {
    return (void)m, (void)tg, t->weight;
}
static double m_scratch(const zpass_mat *m, const zpass_mat_traffic *t, const ztarget *tg) {
    return (void)m, (void)tg, t->scratch;
}
static double m_all(const zpass_mat *m, const zpass_mat_traffic *t, const ztarget *tg) {
    return (void)m, (void)tg, zpass_mat_bytes(t);
}
static double m_disp(const zpass_mat *m, const zpass_mat_traffic *t, const ztarget *tg) {
    return (void)tg, (double)(t->dispatches + t->dequant_dispatches) / (double)m->step_tokens;
}

/* The totals, as rows of the text table and keys of the JSON object. */
static const struct metric {
    const char *label, *key;
    metric_fn f;
    char unit;   /* 'b' bytes, 'n' number, 'u' microseconds */
    bool if_any; /* a text row only where some phase has it (the JSON key is always there) */
} metrics[] = {
    {"activations (all crossings)", "activation_bytes_per_token", m_act, 'b'},
    {"  wide intermediates", "wide_bytes_per_token", m_wide, 'b'},
    {"KV cache (store + attention reads)", "kv_bytes_per_token", m_kv, 'b'},
    {"recurrent state (read + write per step)", "state_bytes_per_token", m_state, 'b', true},
    {"weights incl. dequant scratch", "weight_total_bytes_per_token", m_wall, 'b'},
    {"  as stored", "weight_bytes_per_token", m_weight, 'b'},
    {"  staged dequant scratch", "scratch_bytes_per_token", m_scratch, 'b'},
    {"all traffic", "bytes_per_token", m_all, 'b'},
    {"dispatches per token", "dispatches_per_token", m_disp, 'n'},
    {"est. time per token", "est_us_per_token", zpass_mat_est_us, 'u'},
};
enum { N_METRICS = sizeof metrics / sizeof metrics[0] };

static const char *metric_cell(zarena *a, const struct metric *k, double v) {
    char b[32];
    if (k->unit == 'b') {
        zpass_fmt_bytes(v, b, sizeof b);
        return fmt(a, "%s", b);
    }
    return k->unit == 'u' ? fmt(a, "%.2f us", v) : fmt(a, v < 10 ? "%.3f" : "%.1f", v);
}

/* Whether metric k is nonzero in some phase, before or after fusion. */
static bool any_phase_has(const rctx *c, const struct metric *k) {
    for (int p = 0; p < ZPH_COUNT; p++) {
        const zpass_rep_phase *P = &c->r->ph[p];
        if (P->present && (k->f(&P->before, &P->before.total, c->r->target) != 0 ||
                           k->f(&P->after, &P->after.total, c->r->target) != 0))
            return true;
    }
    return false;
}

static void totals_table(const rctx *c, table *t) {
    const char *head[1 + 3 * ZPH_COUNT] = {"per token, whole model"};
    int ncol = 1;
    for (int p = 0; p < ZPH_COUNT; p++)
        if (c->r->ph[p].present) {
            head[ncol++] = fmt(c->a, "%s before", zpass_phase_name((zpass_phase)p));
            head[ncol++] = "after";
            head[ncol++] = "ratio";
        }
    t->n = 0;
    memset(t->right, 0, sizeof t->right);
    for (int k = 1; k < ncol; k++)
        t->right[k] = true;
    add_line(t, head, ncol);
    for (int i = 0; i < N_METRICS; i++) {
        const char *cell[1 + 3 * ZPH_COUNT] = {metrics[i].label};
        int k = 1;
        if (metrics[i].if_any && !any_phase_has(c, &metrics[i])) continue;
        for (int p = 0; p < ZPH_COUNT; p++) {
            const zpass_rep_phase *P = &c->r->ph[p];
            if (!P->present) continue;
            double b = metrics[i].f(&P->before, &P->before.total, c->r->target);
            double f = metrics[i].f(&P->after, &P->after.total, c->r->target);
            cell[k++] = metric_cell(c->a, &metrics[i], b);
            cell[k++] = metric_cell(c->a, &metrics[i], f);
            cell[k++] = ratio(c->a, b, f);
        }
        add_line(t, cell, ncol);
    }
}

static const zir_hparams *hparams(const zpass_rep *r) {
    for (int p = 0; p < ZPH_COUNT; p++)
        if (r->ph[p].present && r->ph[p].fused) return &r->ph[p].fused->hp;
    return NULL;
}

/* The weights the weight-layout pass keeps in q6_K planes (the same in
 * every phase's graph): how many, and their bytes. */
static int q6_planes(const zpass_rep *r, double *bytes) {
    int n = 0;
    *bytes = 0;
    for (int p = 0; p < ZPH_COUNT && !n; p++) {
        const zir_graph *g = r->ph[p].present ? r->ph[p].fused : NULL;
        for (uint32_t i = 0; g && i < g->n_values; i++)
            if (g->values[i]->role == ZR_WEIGHT && g->values[i]->layout == ZWL_Q6_PLANES) {
                n++;
                *bytes += (double)g->values[i]->nbytes;
            }
    }
    return n;
}

static void text_header(const zpass_rep *r, FILE *out) {
    const ztarget *t = r->target;
    const zir_hparams *h = hparams(r);
    fprintf(out, "zincc fusion report: %s\n", r->model ? r->model : "(model)");
    if (h)
        fprintf(out, "model   %s, %d layers, hidden %d, ff %d, heads %d/%d x %d, vocab %d\n", h->arch,
                h->n_layer, h->n_embd, h->n_ff, h->n_head, h->n_head_kv, h->head_dim, h->n_vocab);
    fprintf(out, "target  %s: %.0f GB/s, %.1f us per dispatch, %u KiB shared memory, %d-byte activations\n",
            t->name, t->bandwidth_gbs, t->dispatch_us, t->smem_bytes / 1024, t->act_bytes);
    fprintf(out, "        fusion threshold %.0f B/token/layer, attention priced at ctx %lld\n",
            r->fuse_threshold, (long long)r->ctx);
    fprintf(out, "before  staged partition (passes shape,width)\nafter   %s\n",
            r->pipeline ? r->pipeline : zpass_default_pipeline());
    fprintf(out,
            "crossings: VRAM writes + reads of the row's intermediates per token, bytes: their traffic\n");
}

zstatus zpass_rep_text(const zpass_rep *r, FILE *out, zdiag *d) {
    rctx c = {r, zarena_new()};
    table *t = c.a ? zarena_alloc(c.a, sizeof *t) : NULL;
    if (!t) {
        zarena_free(c.a);
        return zdiag_set(d, ZE_NOMEM, "out of memory");
    }
    text_header(r, out);
    zstatus s = ZOK;
    for (int p = 0; p < ZPH_COUNT && !s; p++) {
        const zpass_rep_phase *P = &r->ph[p];
        if (!P->present) continue;
        rgroup *gs;
        int n;
        if ((s = build_groups(&c, (zpass_phase)p, &gs, &n, d))) break;
        fprintf(out, "\n== %s: %lld-token steps, token tile %d; bytes per token per layer ==\n",
                zpass_phase_name((zpass_phase)p), (long long)P->after.step_tokens, P->token_tile);
        phase_table(&c, gs, n, t);
        print_table(out, t, NCOL);
        for (int i = 0; i < t->n_notes; i++)
            fprintf(out, "%s\n", t->notes[i]);
    }
    double qb;
    int nq = q6_planes(r, &qb);
    if (!s && nq) {
        char b[32];
        zpass_fmt_bytes(qb, b, sizeof b);
        fprintf(out,
                "\n== weight layouts (weight-layout) ==\nq6_K planes: %d matrices, %s: each row's quant nibbles, high "
                "bits, scales and d's 8-byte aligned (5 loads a GEMV group instead of 13), the same bytes; "
                "rewritten in place by the plan's load schedule\n",
                nq, b);
    }
    if (!s) {
        fprintf(out, "\n== totals ==\n");
        totals_table(&c, t);
        print_table(out, t, t->n ? 1 + 3 * (r->ph[0].present + r->ph[1].present) : 1);
    }
    zarena_free(c.a);
    return s;
}

/* ---- JSON ----------------------------------------------------------------- */

/* Built with jansson (ir/json.h: bytes that are not UTF-8 become U+FFFD,
 * numbers that are not finite become null), printed with 10 significant
 * digits. jbuild carries "out of memory" through the builders. */
typedef struct jbuild {
    const rctx *c;
    bool ok;
} jbuild;

/* o[k] = v, v stolen; a NULL o or v (no memory) fails the build. */
static void jset(jbuild *b, json_t *o, const char *k, json_t *v) {
    if (json_object_set_new(o, k, v)) b->ok = false;
}

static void jappend(jbuild *b, json_t *a, json_t *v) {
    if (json_array_append_new(a, v)) b->ok = false;
}

static json_t *jcost(jbuild *b, const zpass_decision *x) {
    json_t *o = json_object();
    jset(b, o, "crossings_before", zjson_num(x->crossings_before));
    jset(b, o, "crossings_after", zjson_num(x->crossings_after));
    jset(b, o, "bytes_before", zjson_num(x->bytes_before));
    jset(b, o, "bytes_after", zjson_num(x->bytes_after));
    jset(b, o, "extra_bytes", zjson_num(x->extra_bytes));
    jset(b, o, "template", zjson_str(zir_ktemplate_name(x->chosen)));
    return o;
}

static void jrow(jbuild *b, json_t *o, const rrow *w, const char *what) {
    jset(b, o, "intermediate", zjson_str(what));
    jset(b, o, "width", zjson_num(w->width));
    jset(b, o, "crossings_before", json_integer(w->cb));
    jset(b, o, "crossings_after", json_integer(w->ca));
    jset(b, o, "bytes_per_token_before", zjson_num(w->bb));
    jset(b, o, "bytes_per_token_after", zjson_num(w->ba));
    jset(b, o, "fused", json_boolean(w->fused));
    jset(b, o, "kernel", zjson_str(w->kernel));
    jset(b, o, "reason", zjson_str(w->dec ? w->dec->reason : w->reason));
    if (w->dec) jset(b, o, "cost_model", jcost(b, w->dec));
}

static json_t *jtraffic(jbuild *b, const zpass_mat *m, const zpass_mat_traffic *t) {
    json_t *o = json_object();
    for (int i = 0; i < N_METRICS; i++)
        jset(b, o, metrics[i].key, zjson_num(metrics[i].f(m, t, b->c->r->target)));
    jset(b, o, "crossings", json_integer(t->crossings));
    jset(b, o, "wide_crossings", json_integer(t->wide_crossings));
    jset(b, o, "dispatches_per_step", json_integer(t->dispatches + t->dequant_dispatches));
    return o;
}

static json_t *jgroup(jbuild *b, const rgroup *G) {
    const zpass_rep_phase *P = &b->c->r->ph[G->phase];
    static const zpass_mat_traffic none;
    json_t *o = json_object(), *wide = json_array(), *decisions = json_array();
    jset(b, o, "layer", json_integer(G->layer));
    jset(b, o, "group", zjson_str(zir_group_name(G->group)));
    jset(b, o, "phase", zjson_str(zpass_phase_name(G->phase)));
    for (int i = 0; i < G->n_wide; i++)
        jappend(b, wide, zjson_str(G->wide[i]));
    jset(b, o, "wide_values", wide);
    jrow(b, o, &G->rows[0], G->rows[0].dec ? G->rows[0].dec->what : G->rows[0].what);
    jset(b, o, "traffic_before", jtraffic(b, &P->before, &G->gb->t));
    jset(b, o, "traffic_after", jtraffic(b, &P->after, G->ga ? &G->ga->t : &none));
    for (int i = 1; i < G->n_rows; i++) {
        json_t *d = json_object();
        jrow(b, d, &G->rows[i], G->rows[i].dec->what);
        jappend(b, decisions, d);
    }
    jset(b, o, "decisions", decisions);
    return o;
}

static json_t *jheader(jbuild *b) {
    const zpass_rep *r = b->c->r;
    const ztarget *t = r->target;
    const zir_hparams *h = hparams(r);
    json_t *o = json_object(), *tg = json_object();
    jset(b, o, "model", zjson_str(r->model));
    if (h) {
        jset(b, o, "arch", zjson_str(h->arch));
        const struct {
            const char *key;
            int v;
        } hp[] = {{"layers", h->n_layer}, {"hidden", h->n_embd},      {"ff", h->n_ff},
                  {"heads", h->n_head},   {"kv_heads", h->n_head_kv}, {"head_dim", h->head_dim},
                  {"vocab", h->n_vocab}};
        for (size_t i = 0; i < sizeof hp / sizeof hp[0]; i++)
            jset(b, o, hp[i].key, json_integer(hp[i].v));
    }
    jset(b, tg, "name", zjson_str(t->name));
    jset(b, tg, "bandwidth_gbs", zjson_num(t->bandwidth_gbs));
    jset(b, tg, "dispatch_us", zjson_num(t->dispatch_us));
    jset(b, tg, "concurrent_dispatch_us", zjson_num(zcost_concurrent_dispatch_us(t)));
    jset(b, tg, "smem_bytes", json_integer(t->smem_bytes));
    jset(b, tg, "act_bytes", json_integer(t->act_bytes));
    jset(b, tg, "fuse_threshold", zjson_num(r->fuse_threshold));
    jset(b, o, "target", tg);
    jset(b, o, "ctx", json_integer(r->ctx));
    jset(b, o, "pipeline_before", zjson_str("shape,width"));
    jset(b, o, "pipeline_after", zjson_str(r->pipeline ? r->pipeline : zpass_default_pipeline()));
    return o;
}

static json_t *jtotals(jbuild *b) {
    json_t *o = json_object();
    for (int p = 0; p < ZPH_COUNT; p++) {
        const zpass_rep_phase *P = &b->c->r->ph[p];
        if (!P->present) continue;
        json_t *ph = json_object();
        jset(b, ph, "step_tokens", json_integer(P->after.step_tokens));
        jset(b, ph, "token_tile", json_integer(P->token_tile));
        jset(b, ph, "before", jtraffic(b, &P->before, &P->before.total));
        jset(b, ph, "after", jtraffic(b, &P->after, &P->after.total));
        jset(b, o, zpass_phase_name((zpass_phase)p), ph);
    }
    return o;
}

zstatus zpass_rep_json(const zpass_rep *r, FILE *out, zdiag *d) {
    rctx c = {r, zarena_new()};
    if (!c.a) return zdiag_set(d, ZE_NOMEM, "out of memory");
    rgroup *gs[ZPH_COUNT] = {0};
    int n[ZPH_COUNT] = {0};
    zstatus s = ZOK;
    for (int p = 0; p < ZPH_COUNT && !s; p++)
        if (r->ph[p].present) s = build_groups(&c, (zpass_phase)p, &gs[p], &n[p], d);
    if (!s) {
        jbuild b = {&c, true};
        json_t *root = jheader(&b);
        for (int pass = 0; pass < 2; pass++) { /* layer groups, then the rest */
            json_t *list = json_array();
            for (int p = 0; p < ZPH_COUNT; p++)
                for (int i = 0; i < n[p]; i++)
                    if ((gs[p][i].layer >= 0) == (pass == 0)) jappend(&b, list, jgroup(&b, &gs[p][i]));
            jset(&b, root, pass ? "globals" : "groups", list);
        }
        jset(&b, root, "totals", jtotals(&b));
        double qb;
        int nq = q6_planes(r, &qb);
        if (nq) {
            json_t *wl = json_object();
            jset(&b, wl, "q6_planes_matrices", json_integer(nq));
            jset(&b, wl, "q6_planes_bytes", json_real(qb));
            jset(&b, root, "weight_layouts", wl);
        }
        if (!b.ok) json_decref(root), root = NULL;
        s = zjson_write(root, out, JSON_INDENT(2) | JSON_REAL_PRECISION(10), d);
    }
    zarena_free(c.a);
    return s;
}
