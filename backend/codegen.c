/* The codegen dispatcher and the source composer shared by all templates. */
#include "codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Generated at build time from the files in backend/glsl (CMakeLists.txt). */
typedef struct zcg_embedded {
    const char *name, *text;
} zcg_embedded;
extern const zcg_embedded zcg_embedded_files[];
extern const int zcg_embedded_count;

const char *zcg_glsl(const char *name) {
    for (int i = 0; i < zcg_embedded_count; i++)
        if (!strcmp(zcg_embedded_files[i].name, name)) return zcg_embedded_files[i].text;
    return NULL;
}

const char *zcg_i64(zarena *a, int64_t v) {
    return zarena_printf(a, "%lld", (long long)v);
}
const char *zcg_f32(zarena *a, float v) {
    return zarena_printf(a, "%.9g", v);
}

int64_t zcg_knob(const char *name, int64_t lo, int64_t hi, int64_t dflt) {
    const char *e = getenv(name);
    long long v = e ? atoll(e) : 0;
    return e && v >= lo && v <= hi ? v : dflt;
}

bool zcg_knob_off(const char *name) {
    const char *e = getenv(name);
    return e && !strcmp(e, "0");
}

/* Appends text to a growing arena string. */
typedef struct sbuf {
    zarena *a;
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void put(sbuf *s, const char *t) {
    size_t n = strlen(t);
    if (s->oom) return;
    if (s->len + n + 1 > s->cap) {
        size_t nc = (s->cap ? s->cap * 2 : 4096);
        while (nc < s->len + n + 1)
            nc *= 2;
        char *np = zarena_alloc(s->a, nc);
        if (!np) {
            s->oom = true;
            return;
        }
        if (s->len) memcpy(np, s->p, s->len);
        s->p = np;
        s->cap = nc;
    }
    memcpy(s->p + s->len, t, n + 1);
    s->len += n;
}

/* Whether a kernel reads the positions of its rows or writes the KV cache:
 * in the batch schedule it then reads each row's from the step buffer
 * (common.glsl's ROW_POS, ROW_KV). Other kernels are row-local, and keep the
 * prefill schedule's source, so the two share them. */
static bool reads_rows(const char *const *defs, const char *const *files) {
    static const char *const positional[] = {"head", "rope", "kv_store", "attention_main"};
    for (int i = 0; files && files[i]; i++)
        for (size_t j = 0; j < sizeof positional / sizeof *positional; j++)
            if (!strcmp(files[i], positional[j])) return true;
    for (int i = 0; defs && defs[i]; i += 2)
        if (!strcmp(defs[i], "Y_KV")) return true; /* a projection stored into the cache */
    return false;
}

const char *zcg_compose(zarena *a, const char *const *defs, const char *const *files, const zcg_opts *o) {
    sbuf s = {a, NULL, 0, 0, false};
    put(&s, "#version 450\n");
    if (o && o->act_f16) put(&s, "#define ACT_F16 1\n");
    if (o && o->batch && reads_rows(defs, files)) put(&s, "#define BATCH 1\n");
    for (int i = 0; defs && defs[i]; i += 2) {
        put(&s, "#define ");
        put(&s, defs[i]);
        put(&s, " ");
        put(&s, defs[i + 1] ? defs[i + 1] : "");
        put(&s, "\n");
    }
    const char *common = zcg_glsl("common");
    if (!common) return NULL;
    put(&s, common);
    for (int i = 0; files && files[i]; i++) {
        const char *t = zcg_glsl(files[i]);
        if (!t) return NULL;
        put(&s, "\n// ---- ");
        put(&s, files[i]);
        put(&s, ".glsl\n");
        put(&s, t);
    }
    return s.oom ? NULL : s.p;
}

static zstatus node_kernel(const zir_graph *g, const zir_node *n, const zcg_opts *o, zarena *a,
                           zcg_kernel *out, zdiag *d) {
    memset(out, 0, sizeof *out);
    if (n->parent) return zdiag_set(d, ZE_INTERNAL, "codegen: '%s' is not a top-level node", n->out->name);
    if (zir_ops[n->op].flags & ZF_VIEW) return ZOK; /* aliases its input: no kernel */
    if (n->op == ZOP_KERNEL) {
        switch (n->kp.tmpl) {
        case ZKT_ATTENTION: return zcg_attention(g, n, o, a, out, d);
        case ZKT_MATMUL:
        case ZKT_GATE_UP_SWIGLU:
        case ZKT_MLP:
        case ZKT_MATMUL_ROWS: return zcg_matmul_family(g, n, o, a, out, d);
        case ZKT_HEAD:
        case ZKT_NORM_GATE: return zcg_misc(g, n, o, a, out, d);
        case ZKT_CONV:
        case ZKT_DELTA: return zcg_recurrent(g, n, o, a, out, d);
        case ZKT_MOE_GATE_UP:
        case ZKT_MOE_DOWN:
        case ZKT_MOE_SUM: return zcg_moe(g, n, o, a, out, d);
        default: break;
        }
        return zdiag_set(d, ZE_UNSUPPORTED, "codegen: kernel '%s' has template %s, which has no generator",
                         n->out->name, zir_ktemplate_name(n->kp.tmpl));
    }
    switch (zir_ops[n->op].kind) {
    case ZK_MATMUL:
    case ZK_GATHER: return zcg_matmul_family(g, n, o, a, out, d);
    case ZK_ATTENTION: return zcg_attention(g, n, o, a, out, d);
    case ZK_MOE: return zcg_moe(g, n, o, a, out, d);
    default: return zcg_misc(g, n, o, a, out, d);
    }
}

/* The KV cache a bound value is (the cache, or a store's view of it). */
static const zir_value *cache_of(const zir_value *v) {
    if (!v || v->role == ZR_KV) return v;
    const zir_node *p = v->producer;
    if (p && p->op == ZOP_KERNEL) p = p->body[p->n_body - 1];
    return p && p->op == ZOP_KV_STORE ? p->in[1] : NULL;
}

/* A kernel that binds an f16 cache (the kv-type pass) declares it with
 * KV_T = float16_t (common.glsl): the define goes right after #version. */
static zstatus mark_kv_f16(zcg_kernel *k, zarena *a, zdiag *d) {
    bool f16 = false;
    for (int i = 0; i < k->n_bind; i++) {
        const zir_value *c = cache_of(k->bind[i].value);
        f16 |= c && c->dtype == ZT_F16;
    }
    if (!f16 || !k->glsl) return ZOK;
    size_t len = strlen(k->name);
    if (len + 6 < sizeof k->name) memcpy(k->name + len, "+kv16", 6);
    const char *nl = strchr(k->glsl, '\n');
    k->glsl = nl ? zarena_printf(a, "%.*s\n#define KV_F16 1%s", (int)(nl - k->glsl), k->glsl, nl) : NULL;
    return k->glsl ? ZOK : zdiag_set(d, ZE_NOMEM, "codegen: out of memory");
}

/* A kernel that binds an activation kept in fp16 (the mm-f16 pass: read
 * only as fp16 matmuls' x; written by matmul_io.glsl's store_y,
 * rms_norm.glsl or attention's kernels) declares it so: X_F16 where it
 * reads one, Y_F16 where it writes one (common.glsl), named "+xh", "+yh". */
static zstatus mark_act_f16(zcg_kernel *k, zarena *a, zdiag *d) {
    bool xf = false, yf = false;
    for (int i = 0; i < k->n_bind; i++) {
        const zir_value *v = k->bind[i].value;
        if (v && v->store_f16) *(k->bind[i].written ? &yf : &xf) = true;
    }
    if ((!xf && !yf) || !k->glsl) return ZOK;
    const char *tag = xf && yf ? "+xh+yh" : xf ? "+xh" : "+yh";
    size_t len = strlen(k->name), tl = strlen(tag);
    if (len + tl < sizeof k->name) memcpy(k->name + len, tag, tl + 1);
    const char *nl = strchr(k->glsl, '\n');
    k->glsl = nl ? zarena_printf(a, "%.*s%s%s%s", (int)(nl - k->glsl), k->glsl, xf ? "\n#define X_F16 1" : "",
                                 yf ? "\n#define Y_F16 1" : "", nl)
                 : NULL;
    return k->glsl ? ZOK : zdiag_set(d, ZE_NOMEM, "codegen: out of memory");
}

zstatus zcg_node(const zir_graph *g, const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *out,
                 zdiag *d) {
    zstatus s = node_kernel(g, n, o, a, out, d);
    if (!s) s = mark_kv_f16(out, a, d);
    return s ? s : mark_act_f16(out, a, d);
}
