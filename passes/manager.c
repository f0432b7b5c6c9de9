/* The pass registry (from passes.def) and the pipeline runner. */
#include <stdlib.h>
#include <string.h>

#include "pass.h"

static const zpass_info registry[] = {
#define ZPASS(name, fn, kind, def, summary) {name, fn, kind, def, summary},
#include "passes.def"
#undef ZPASS
};
enum { N_PASSES = sizeof registry / sizeof registry[0] };

static const char *const phase_names[ZPH_COUNT] = {"prefill", "decode"};
const char *zpass_phase_name(zpass_phase p) {
    return (unsigned)p < ZPH_COUNT ? phase_names[p] : "?";
}

int zpass_count(void) {
    return N_PASSES;
}
const zpass_info *zpass_at(int i) {
    return i >= 0 && i < N_PASSES ? &registry[i] : NULL;
}

const zpass_info *zpass_find(const char *name) {
    for (int i = 0; i < N_PASSES; i++)
        if (!strcmp(registry[i].name, name)) return &registry[i];
    return NULL;
}

const char *zpass_default_pipeline(void) {
    static char buf[512];
    if (!buf[0]) {
        size_t o = 0;
        for (int i = 0; i < N_PASSES; i++)
            if (registry[i].in_default && o < sizeof buf)
                o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", o ? "," : "", registry[i].name);
    }
    return buf;
}

zpass_decision *zpass_report_add(zpass_report *r) {
    if (!r) return NULL;
    if (r->n == r->cap) {
        int nc = r->cap ? r->cap * 2 : 64;
        zpass_decision *ni = zarena_array(r->arena, (size_t)nc, sizeof *ni);
        if (!ni) return NULL;
        if (r->n) memcpy(ni, r->items, sizeof *ni * (size_t)r->n);
        r->items = ni;
        r->cap = nc;
    }
    zpass_decision *x = &r->items[r->n++];
    memset(x, 0, sizeof *x);
    return x;
}

/* Whether name appears in the comma-separated list (or the list is "all"). */
static bool in_list(const char *list, const char *name) {
    if (!list) return false;
    if (!strcmp(list, "all")) return true;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return true;
        p += len + (e ? 1 : 0);
    }
    return false;
}

/* Every name in a list must be a registered pass. */
static zstatus check_names(const char *list, const char *flag, zdiag *d) {
    if (!list || !strcmp(list, "all")) return ZOK;
    char name[64];
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), p);
        if (!zpass_find(name))
            return zdiag_set(d, ZE_INVALID, "%s: unknown pass '%s': expected one of %s", flag, name,
                             zpass_default_pipeline());
        p += len + (e ? 1 : 0);
    }
    return ZOK;
}

zstatus zpass_run_one(zir_graph *g, const zpass_info *p, const zpass_opts *o, zdiag *d) {
    zstatus s = p->run(g, o, d);
    if (s) {
        zdiag_prefix(d, "pass %s", p->name);
        return s;
    }
    if (o->verify_each && (s = zir_verify(g, d))) {
        zdiag_prefix(d, "IR invalid after pass %s", p->name);
        return s;
    }
    if (in_list(o->print_after, p->name)) {
        FILE *out = o->print_to ? o->print_to : stdout;
        fprintf(out, "# after %s (%s)\n", p->name, zpass_phase_name(o->phase));
        zir_print(g, out);
    }
    return ZOK;
}

/* Every pipeline compiles for a GPU: a graph with an op that has no GPU
 * kernel yet (ZF_NO_GPU) is refused here, before any pass reads it. */
static zstatus check_gpu_ops(const zir_graph *g, zdiag *d) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        if (!(zir_ops[n->op].flags & ZF_NO_GPU)) continue;
        return zdiag_set(d, ZE_UNSUPPORTED,
                         "%s model: op '%s' (layer %d) has no GPU kernel: GPU kernels for %s ops are not yet "
                         "available; `zinc ref` runs this model on the CPU",
                         g->hp.arch, zir_ops[n->op].name, n->layer, zir_kind_name(zir_ops[n->op].kind));
    }
    return ZOK;
}

zstatus zpass_run_pipeline(zir_graph *g, const char *pipeline, const char *disabled, const zpass_opts *o,
                           zdiag *d) {
    if (!pipeline) pipeline = zpass_default_pipeline();
    zstatus s = check_gpu_ops(g, d);
    if (!s) s = check_names(pipeline, "--passes", d);
    if (!s) s = check_names(disabled, "--disable-pass", d);
    if (!s) s = check_names(o->print_after, "--print-after", d);
    char name[64];
    for (const char *p = pipeline; !s && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), p);
        p += len + (e ? 1 : 0);
        if (!in_list(disabled, name)) s = zpass_run_one(g, zpass_find(name), o, d);
    }
    return s;
}
