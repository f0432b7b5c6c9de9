/* The fusion report: per phase, per layer group, what crossed VRAM in the
 * staged partition and what still does after fusion, next to the decision
 * and the arithmetic the fusion pass recorded. Text for people (identical
 * layers folded), JSON for tools (every layer). docs/report.md shows both. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

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
    char unit; /* 'b' bytes, 'n' number, 'u' microseconds */
} metrics[] = {
    {"activations (all crossings)", "activation_bytes_per_token", m_act, 'b'},
    {"  wide intermediates", "wide_bytes_per_token", m_wide, 'b'},
    {"KV cache (store + attention reads)", "kv_bytes_per_token", m_kv, 'b'},
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
    if (!s) {
        fprintf(out, "\n== totals ==\n");
        totals_table(&c, t);
        print_table(out, t, t->n ? 1 + 3 * (r->ph[0].present + r->ph[1].present) : 1);
    }
    zarena_free(c.a);
    return s;
}

/* ---- JSON ----------------------------------------------------------------- */

static void jstr(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", out);
        else if (*p == '\t')
            fputs("\\t", out);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void jnum(FILE *out, double v) {
    if (isfinite(v))
        fprintf(out, "%.10g", v);
    else
        fputs("null", out);
}

static void jkey(FILE *out, bool *first, const char *k) {
    fprintf(out, "%s\"%s\": ", *first ? "" : ", ", k);
    *first = false;
}

static void jrow(FILE *out, const rrow *w, const char *what, bool *f) {
    jkey(out, f, "intermediate"), jstr(out, what);
    jkey(out, f, "width"), jnum(out, w->width);
    jkey(out, f, "crossings_before"), fprintf(out, "%d", w->cb);
    jkey(out, f, "crossings_after"), fprintf(out, "%d", w->ca);
    jkey(out, f, "bytes_per_token_before"), jnum(out, w->bb);
    jkey(out, f, "bytes_per_token_after"), jnum(out, w->ba);
    jkey(out, f, "fused"), fputs(w->fused ? "true" : "false", out);
    jkey(out, f, "kernel"), jstr(out, w->kernel);
    jkey(out, f, "reason"), jstr(out, w->dec ? w->dec->reason : w->reason);
    if (!w->dec) return;
    jkey(out, f, "cost_model");
    fprintf(out, "{\"crossings_before\": ");
    jnum(out, w->dec->crossings_before);
    fprintf(out, ", \"crossings_after\": ");
    jnum(out, w->dec->crossings_after);
    fprintf(out, ", \"bytes_before\": ");
    jnum(out, w->dec->bytes_before);
    fprintf(out, ", \"bytes_after\": ");
    jnum(out, w->dec->bytes_after);
    fprintf(out, ", \"extra_bytes\": ");
    jnum(out, w->dec->extra_bytes);
    fprintf(out, ", \"template\": ");
    jstr(out, zir_ktemplate_name(w->dec->chosen));
    fputc('}', out);
}

static void jtraffic(FILE *out, const zpass_mat *m, const zpass_mat_traffic *t, const ztarget *tg) {
    bool f = true;
    fputc('{', out);
    for (int i = 0; i < N_METRICS; i++)
        jkey(out, &f, metrics[i].key), jnum(out, metrics[i].f(m, t, tg));
    jkey(out, &f, "crossings"), fprintf(out, "%d", t->crossings);
    jkey(out, &f, "wide_crossings"), fprintf(out, "%d", t->wide_crossings);
    jkey(out, &f, "dispatches_per_step"), fprintf(out, "%d", t->dispatches + t->dequant_dispatches);
    fputc('}', out);
}

static void jgroup(const rctx *c, FILE *out, const rgroup *G) {
    const zpass_rep_phase *P = &c->r->ph[G->phase];
    static const zpass_mat_traffic none;
    bool f = true;
    fputs("    {", out);
    jkey(out, &f, "layer"), fprintf(out, "%d", G->layer);
    jkey(out, &f, "group"), jstr(out, zir_group_name(G->group));
    jkey(out, &f, "phase"), jstr(out, zpass_phase_name(G->phase));
    jkey(out, &f, "wide_values");
    fputc('[', out);
    for (int i = 0; i < G->n_wide; i++)
        fputs(i ? ", " : "", out), jstr(out, G->wide[i]);
    fputc(']', out);
    jrow(out, &G->rows[0], G->rows[0].dec ? G->rows[0].dec->what : G->rows[0].what, &f);
    jkey(out, &f, "traffic_before"), jtraffic(out, &P->before, &G->gb->t, c->r->target);
    jkey(out, &f, "traffic_after"), jtraffic(out, &P->after, G->ga ? &G->ga->t : &none, c->r->target);
    jkey(out, &f, "decisions");
    fputc('[', out);
    for (int i = 1; i < G->n_rows; i++) {
        bool g = true;
        fputs(i > 1 ? ", {" : "{", out);
        jrow(out, &G->rows[i], G->rows[i].dec->what, &g);
        fputc('}', out);
    }
    fputs("]}", out);
}

static void jheader(const zpass_rep *r, FILE *out) {
    const ztarget *t = r->target;
    const zir_hparams *h = hparams(r);
    fputs("{\n  \"model\": ", out), jstr(out, r->model);
    if (h) {
        fputs(",\n  \"arch\": ", out), jstr(out, h->arch);
        fprintf(out,
                ", \"layers\": %d, \"hidden\": %d, \"ff\": %d, \"heads\": %d, \"kv_heads\": %d, "
                "\"head_dim\": %d, \"vocab\": %d",
                h->n_layer, h->n_embd, h->n_ff, h->n_head, h->n_head_kv, h->head_dim, h->n_vocab);
    }
    fputs(",\n  \"target\": {\"name\": ", out), jstr(out, t->name);
    fprintf(out, ", \"bandwidth_gbs\": ");
    jnum(out, t->bandwidth_gbs);
    fprintf(out, ", \"dispatch_us\": ");
    jnum(out, t->dispatch_us);
    fprintf(out, ", \"smem_bytes\": %u, \"act_bytes\": %d, \"fuse_threshold\": ", t->smem_bytes,
            t->act_bytes);
    jnum(out, r->fuse_threshold);
    fprintf(out, "},\n  \"ctx\": %lld,\n  \"pipeline_before\": \"shape,width\",\n  \"pipeline_after\": ",
            (long long)r->ctx);
    jstr(out, r->pipeline ? r->pipeline : zpass_default_pipeline());
}

static void jtotals(const zpass_rep *r, FILE *out) {
    fputs(",\n  \"totals\": {", out);
    bool f = true;
    for (int p = 0; p < ZPH_COUNT; p++) {
        const zpass_rep_phase *P = &r->ph[p];
        if (!P->present) continue;
        fputs(f ? "\n    " : ",\n    ", out);
        f = false;
        jstr(out, zpass_phase_name((zpass_phase)p));
        fprintf(out,
                ": {\"step_tokens\": %lld, \"token_tile\": %d, \"before\": ", (long long)P->after.step_tokens,
                P->token_tile);
        jtraffic(out, &P->before, &P->before.total, r->target);
        fputs(", \"after\": ", out);
        jtraffic(out, &P->after, &P->after.total, r->target);
        fputc('}', out);
    }
    fputs("\n  }", out);
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
        jheader(r, out);
        for (int pass = 0; pass < 2; pass++) { /* layer groups, then the rest */
            fputs(pass ? ",\n  \"globals\": [" : ",\n  \"groups\": [", out);
            bool first = true;
            for (int p = 0; p < ZPH_COUNT; p++)
                for (int i = 0; i < n[p]; i++) {
                    if ((gs[p][i].layer >= 0) == (pass == 1)) continue;
                    fputs(first ? "\n" : ",\n", out);
                    first = false;
                    jgroup(&c, out, &gs[p][i]);
                }
            fputs("\n  ]", out);
        }
        jtotals(r, out);
        fputs("\n}\n", out);
    }
    zarena_free(c.a);
    return s;
}
