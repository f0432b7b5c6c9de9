/* Lowering to a plan: tables, memory planning, scheduling. */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

#include "../passes/cost.h"
#include "codegen.h"
#include "shaderc.h"
#include "spv_coopmat.h"

enum { ALIGN = 256 };

/* A growable array in the plan's arena. */
#define GROW(lw, arr, n, cap)                                                                                \
    (((n) < (cap)) || grow_array((lw)->p->arena, (void **)&(arr), sizeof *(arr), (n), &(cap)))

static bool grow_array(zarena *a, void **arr, size_t elem, uint32_t n, uint32_t *cap) {
    uint32_t nc = *cap ? *cap * 2 : 64;
    void *na = zarena_array(a, nc, elem);
    if (!na) return false;
    if (n) memcpy(na, *arr, elem * n);
    *arr = na;
    *cap = nc;
    return true;
}

typedef struct kernel_src {
    const char *glsl;
    uint64_t hash;
} kernel_src;

typedef struct lw {
    zplan *p;
    const zlower_opts *o;
    zdiag *d;
    zarena *tmp; /* sources and per-phase tables */
    uint32_t cap_str, cap_buf, cap_kern, cap_spv, cap_bind, cap_disp, cap_srcs;
    kernel_src *srcs;
    uint32_t act; /* index of the activation buffer */
    uint64_t act_size;
    /* Per phase: each value's activation offset (or UINT64_MAX) and size. */
    uint64_t *off, *size;
    uint32_t transient; /* the buffer of every transient scratch binding (zcg_binding), or UINT32_MAX */
    struct access *accs; /* per plan binding: what its dispatch reads or writes */
    uint32_t cap_accs;
    bool oom;
} lw;

static uint32_t add_string(lw *w, const char *s) {
    zplan *p = w->p;
    uint32_t n = (uint32_t)strlen(s) + 1, at = p->n_strings_bytes;
    while (p->n_strings_bytes + n > w->cap_str)
        if (!grow_array(p->arena, (void **)&p->strings, 1, p->n_strings_bytes, &w->cap_str)) {
            w->oom = true;
            return 0; /* the empty string, which is always first */
        }
    memcpy(p->strings + at, s, n);
    p->n_strings_bytes += n;
    return at;
}

static uint32_t add_buffer(lw *w, zplan_buf_kind kind, const char *name, uint64_t size, uint64_t src) {
    zplan *p = w->p;
    if (!GROW(w, p->buffers, p->n_buffers, w->cap_buf)) return UINT32_MAX;
    p->buffers[p->n_buffers] = (zplan_buffer){kind, add_string(w, name), size ? size : 4, src};
    return p->n_buffers++;
}

static zplan_buffer *p_buf(lw *w, uint32_t i) {
    return &w->p->buffers[i];
}

static uint32_t find_buffer(const lw *w, zplan_buf_kind kind, const char *name) {
    for (uint32_t i = 0; i < w->p->n_buffers; i++)
        if (w->p->buffers[i].kind == (uint32_t)kind && !strcmp(zplan_str(w->p, w->p->buffers[i].name), name))
            return i;
    return UINT32_MAX;
}

static uint64_t round_up(uint64_t x, uint64_t a) {
    return (x + a - 1) / a * a;
}

/* ---- values to buffers ------------------------------------------------- */

/* The value whose storage v shares: through views to their source. */
static const zir_value *root(const zir_value *v) {
    while (v->producer && v->producer->op != ZOP_KERNEL && (zir_ops[v->producer->op].flags & ZF_VIEW))
        v = v->producer->in[0];
    return v;
}

/* The KV cache a value lives in (a cache, or a kv_store output), or NULL. */
static const zir_value *cache_of(const zir_value *v) {
    v = root(v);
    if (v->role == ZR_KV) return v;
    const zir_node *n = v->producer;
    if (n && n->op == ZOP_KERNEL) n = n->body[n->n_body - 1];
    return n && zir_ops[n->op].kind == ZK_KV ? n->in[1] : NULL;
}

/* Most tokens of a step of schedule ph. */
static int64_t sched_tokens(const zlower_opts *o, zplan_phase ph) {
    return ph == ZPLAN_DECODE ? 1 : ph == ZPLAN_BATCH ? o->parallel : o->max_tokens;
}

static int64_t n_seqs(const zlower_opts *o) {
    return o->parallel > 1 ? o->parallel : 1;
}

static int64_t elems(const zir_value *v, const zlower_opts *o, zplan_phase ph) {
    int64_t T = sched_tokens(o, ph);
    zir_step st = {.T = T, .pos = o->ctx - T, .ctx = o->ctx};
    return zir_value_elems(v, &st);
}

static int act_bytes(const zlower_opts *o) {
    return o->act_f16 ? 2 : 4;
}

/* An activation's element: fp16 where the plan keeps all, or the mm-f16
 * pass this one (value.store_f16). */
static int value_bytes(const zlower_opts *o, const zir_value *v) {
    return v->store_f16 ? 2 : act_bytes(o);
}

/* Buffers for weights (one per tensor: every binding starts at offset 0,
 * whatever the device's offset alignment) and KV caches. */
static zstatus declare_storage(lw *w, const zir_graph *g) {
    for (uint32_t i = 0; i < g->n_values && !w->oom; i++) {
        const zir_value *v = g->values[i];
        if (v->role == ZR_WEIGHT && find_buffer(w, ZPB_WEIGHTS, v->name) == UINT32_MAX) {
            uint64_t off = (uint64_t)((const uint8_t *)v->data - (const uint8_t *)w->o->gguf_base);
            if (add_buffer(w, ZPB_WEIGHTS, v->name, round_up(v->nbytes, 4), off) == UINT32_MAX) w->oom = true;
        } else if (zir_value_is_state(v) && find_buffer(w, ZPB_STATE, v->name) == UINT32_MAX) {
            /* a recurrent state: constant shape, f32, one per layer and sequence */
            if (n_seqs(w->o) > 1)
                return zdiag_set(w->d, ZE_UNSUPPORTED,
                                 "--parallel %lld: '%s' is a recurrent state, and plans with sequence slots "
                                 "do not hold states yet: expected a model without them (qwen3, llama, "
                                 "qwen3moe), or compile without --parallel",
                                 (long long)n_seqs(w->o), v->name);
            if (add_buffer(w, ZPB_STATE, v->name, (uint64_t)elems(v, w->o, ZPLAN_DECODE) * 4u, 0) ==
                UINT32_MAX)
                w->oom = true;
        } else if (v->role == ZR_KV && !zir_value_is_state(v) &&
                   find_buffer(w, ZPB_KV, v->name) == UINT32_MAX) {
            /* the kv-type pass chose the cache's storage; one slot per sequence */
            uint64_t bytes = (uint64_t)elems(v, w->o, ZPLAN_DECODE) * (v->dtype == ZT_F16 ? 2u : 4u);
            if (n_seqs(w->o) > 1 && bytes % ZPLAN_SLOT_ALIGN)
                return zdiag_set(w->d, ZE_UNSUPPORTED,
                                 "--parallel %lld: the KV cache '%s' holds %llu bytes a sequence, not a multiple "
                                 "of %d (the largest storage offset alignment): expected a --ctx that is a "
                                 "multiple of %d",
                                 (long long)w->o->parallel, v->name, (unsigned long long)bytes,
                                 ZPLAN_SLOT_ALIGN, ZPLAN_SLOT_ALIGN);
            bytes *= (uint64_t)n_seqs(w->o);
            if (v->dtype == ZT_F16) w->p->required |= ZPLAN_NEED_FP16 | ZPLAN_NEED_STORAGE16;
            if (add_buffer(w, ZPB_KV, v->name, bytes, 0) == UINT32_MAX) w->oom = true;
        }
    }
    return w->oom ? zdiag_set(w->d, ZE_NOMEM, "out of memory lowering the plan") : ZOK;
}

/* ---- activation memory ------------------------------------------------- */

/* Whether v lives in the activation arena (not a weight, cache, the token
 * input or the logits output). */
static bool in_arena(const zir_graph *g, const zir_value *v) {
    return v->role == ZR_ACTIVATION && v == root(v) && !cache_of(v) && v != g->logits;
}

typedef struct interval {
    uint32_t value;
    int start, end;
    uint64_t size, off;
} interval;

/* Last top-level position reading each arena value (through views). */
static void live_ends(const zir_graph *g, int *end) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k]) end[root(n->in[k])->id] = (int)i;
    }
}

/* First fit among the intervals live at iv's start, sorted by offset. */
static uint64_t place(interval *live, int n_live, uint64_t size) {
    uint64_t at = 0;
    for (int moved = 1; moved;) {
        moved = 0;
        for (int j = 0; j < n_live; j++)
            if (at < live[j].off + live[j].size && live[j].off < at + size) {
                at = live[j].off + live[j].size;
                moved = 1;
            }
    }
    return at;
}

/* The arena slots of one phase while plan_memory walks the nodes. */
typedef struct slots {
    interval *live;
    int n_live;
    uint64_t next;
    const int *end;
} slots;

/* Places value v, written at top-level position i. */
static void place_value(lw *w, slots *sl, const zir_value *v, int i, zplan_phase ph) {
    uint64_t size = round_up((uint64_t)elems(v, w->o, ph) * (uint64_t)value_bytes(w->o, v), ALIGN);
    int e = sl->end[v->id] > i ? sl->end[v->id] : i;
    int k = 0; /* drop intervals that ended before this one starts */
    for (int j = 0; j < sl->n_live; j++)
        if (sl->live[j].end >= i) sl->live[k++] = sl->live[j];
    sl->n_live = k;
    /* Decode values are a token wide: each gets its own place, so that
     * reusing a slot never orders two dispatches that are otherwise
     * independent (a write-after-read barrier). Prefill reuses slots. */
    uint64_t at = ph == ZPLAN_DECODE ? sl->next : place(sl->live, sl->n_live, size);
    sl->next = at + size;
    sl->live[sl->n_live++] = (interval){v->id, i, e, size, at};
    w->off[v->id] = at;
    w->size[v->id] = size;
    if (at + size > w->act_size) w->act_size = at + size;
}

static zstatus plan_memory(lw *w, const zir_graph *g, zplan_phase ph) {
    int *end = calloc(g->n_values, sizeof *end);
    interval *live = calloc(g->n_values + 1, sizeof *live);
    w->off = zarena_array(w->tmp, g->n_values, sizeof *w->off);
    w->size = zarena_array(w->tmp, g->n_values, sizeof *w->size);
    if (!end || !live || !w->off || !w->size) {
        free(end), free(live);
        return zdiag_set(w->d, ZE_NOMEM, "out of memory planning activations");
    }
    for (uint32_t i = 0; i < g->n_values; i++)
        w->off[i] = UINT64_MAX;
    live_ends(g, end);
    slots sl = {live, 0, 0, end};
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_value *outs[ZIR_MAX_OUT]; /* a kernel's exported values, then its output */
        int n_out = zir_node_outputs(g->nodes[i], outs, ZIR_MAX_OUT);
        for (int o = 0; o < n_out; o++)
            if (in_arena(g, outs[o])) place_value(w, &sl, outs[o], (int)i, ph);
    }
    free(end), free(live);
    return ZOK;
}

/* ---- kernels ------------------------------------------------------------ */

static uint64_t fnv(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* The kernel index for a source, compiling it the first time it is seen. */
static zstatus intern_kernel(lw *w, const zcg_kernel *k, uint32_t *index) {
    zplan *p = w->p;
    uint64_t h = fnv(k->glsl);
    for (uint32_t i = 0; i < p->n_kernels; i++)
        if (w->srcs[i].hash == h && !strcmp(w->srcs[i].glsl, k->glsl)) {
            *index = i;
            return ZOK;
        }
    zvk_glsl_opts go = {.name = k->name, .optimize = true, .int_dot = k->int_dot};
    zvk_spirv spv;
    zstatus s = zvk_glsl_compile(w->tmp, k->glsl, strlen(k->glsl), &go, &spv, w->d);
    if (s) {
        zdiag_prefix(w->d, "kernel %s", k->name);
        return s;
    }
    if (!GROW(w, p->kernels, p->n_kernels, w->cap_kern) ||
        (p->n_kernels >= w->cap_srcs &&
         !grow_array(w->tmp, (void **)&w->srcs, sizeof *w->srcs, p->n_kernels, &w->cap_srcs)))
        return zdiag_set(w->d, ZE_NOMEM, "out of memory");
    while (p->n_spirv_words + spv.n_words > w->cap_spv)
        if (!grow_array(p->arena, (void **)&p->spirv, 4, p->n_spirv_words, &w->cap_spv))
            return zdiag_set(w->d, ZE_NOMEM, "out of memory");
    memcpy(p->spirv + p->n_spirv_words, spv.words, spv.n_words * 4);
    /* Written in the NV form; the executor rewrites it for KHR-only devices. */
    if (zspv_uses_coopmat_nv(spv.words, spv.n_words)) p->required |= ZPLAN_NEED_COOPMAT_NV | ZPLAN_NEED_FP16;
    if (zspv_coopmat_workgroup_scope(spv.words, spv.n_words)) p->required |= ZPLAN_NEED_COOPMAT_WG;
    if (k->int_dot) p->required |= ZPLAN_NEED_INT_DOT;
    p->kernels[p->n_kernels] = (zplan_kernel){.name = add_string(w, k->name),
                                              .code = p->n_spirv_words,
                                              .n_words = (uint32_t)spv.n_words,
                                              .n_bindings = (uint32_t)k->n_bind + 1};
    w->srcs[p->n_kernels] = (kernel_src){k->glsl, h};
    p->n_spirv_words += (uint32_t)spv.n_words;
    *index = p->n_kernels++;
    if (w->o->progress) w->o->progress(w->o->progress_ctx, (int)p->n_kernels, 0);
    return ZOK;
}

/* ---- dispatches and barriers ------------------------------------------- */

typedef struct access {
    uint32_t buffer;
    uint64_t lo, hi;
    bool write;
} access;

typedef struct interval_set {
    access *a;
    int n, cap;
} interval_set;

static bool overlap(const access *x, const access *y) {
    return y->buffer == x->buffer && y->lo < x->hi && x->lo < y->hi;
}

static bool conflicts(const interval_set *open, const access *x) {
    for (int i = 0; i < open->n; i++)
        if (overlap(x, &open->a[i]) && (x->write || open->a[i].write)) return true;
    return false;
}

/* Where a bound value lives. */
static zstatus locate(lw *w, const zir_graph *g, const zcg_binding *b, zplan_binding *out) {
    const zir_value *v = b->value;
    const zir_value *c = v ? cache_of(v) : NULL;
    uint32_t buf = UINT32_MAX;
    uint64_t off = 0, range = 0;
    if (!v && b->special == ZCG_BIND_TOPK) {
        buf = w->p->topk_buffer;
    } else if (!v && b->transient) {
        uint64_t size = round_up(b->scratch_bytes, 4);
        if (w->transient == UINT32_MAX)
            buf = w->transient = add_buffer(w, ZPB_SCRATCH, "transient scratch", size, 0);
        else if (p_buf(w, w->transient)->size < size)
            p_buf(w, buf = w->transient)->size = size;
        else
            buf = w->transient;
    } else if (!v) {
        buf = add_buffer(w, ZPB_SCRATCH, "scratch", round_up(b->scratch_bytes, 4), 0);
    } else if (v->role == ZR_WEIGHT)
        buf = find_buffer(w, ZPB_WEIGHTS, v->name);
    else if (v->role == ZR_INPUT)
        buf = w->p->tokens_buffer;
    else if (c)
        buf = find_buffer(w, zir_value_is_state(c) ? ZPB_STATE : ZPB_KV, c->name);
    else if (root(v) == g->logits)
        buf = w->p->logits_buffer;
    else if (w->off[root(v)->id] != UINT64_MAX) {
        buf = w->act;
        off = w->off[root(v)->id];
        range = w->size[root(v)->id];
    }
    if (buf == UINT32_MAX)
        return zdiag_set(w->d, ZE_INTERNAL, "lowering: no storage for '%s'", v ? v->name : "scratch");
    *out = (zplan_binding){.buffer = buf, .offset = off, .range = range};
    return ZOK;
}

/* share: the first binding of a dispatch whose scratch buffers this one
 * binds too (a kernel's pre pass), or UINT32_MAX; scratch: the binding of
 * the kernel's one scratch buffer where an earlier pre pass wrote it
 * (reuse_pre), or NULL. */
static zstatus add_dispatch(lw *w, const zir_graph *g, const char *node, const zcg_kernel *k,
                            interval_set *open, uint32_t share, const zplan_binding *scratch) {
    zplan *p = w->p;
    uint32_t kernel = 0;
    zstatus s = intern_kernel(w, k, &kernel);
    if (s) return s;
    if (!GROW(w, p->dispatches, p->n_dispatches, w->cap_disp))
        return zdiag_set(w->d, ZE_NOMEM, "out of memory");
    zplan_dispatch *dp = &p->dispatches[p->n_dispatches];
    *dp = (zplan_dispatch){.kernel = kernel,
                           .first_binding = p->n_bindings,
                           .n_bindings = (uint32_t)k->n_bind + 1,
                           .node = add_string(w, node)};
    for (int a = 0; a < 3; a++)
        dp->groups[a] = (zplan_affine){k->groups[a].a, k->groups[a].b, k->groups[a].div};
    access acc[ZCG_MAX_BIND + 1];
    for (int i = 0; i <= k->n_bind; i++) {
        zplan_binding b = {.buffer = p->step_buffer};
        const zcg_binding *kb = i ? &k->bind[i - 1] : NULL;
        if (kb && !kb->value && !kb->special && share != UINT32_MAX)
            b = p->bindings[share + (uint32_t)i];
        else if (kb && !kb->value && !kb->special && !kb->transient && scratch)
            b = *scratch;
        else if (kb && (s = locate(w, g, kb, &b)))
            return s;
        if (!GROW(w, p->bindings, p->n_bindings, w->cap_bind) ||
            (p->n_bindings >= w->cap_accs &&
             !grow_array(w->tmp, (void **)&w->accs, sizeof *w->accs, p->n_bindings, &w->cap_accs)))
            return zdiag_set(w->d, ZE_NOMEM, "out of memory");
        uint64_t hi = b.range ? b.offset + b.range : p->buffers[b.buffer].size;
        acc[i] = (access){b.buffer, b.offset, hi, kb && kb->written};
        w->accs[p->n_bindings] = acc[i];
        p->bindings[p->n_bindings++] = b;
    }
    bool barrier = false;
    for (int i = 0; i <= k->n_bind; i++)
        barrier |= conflicts(open, &acc[i]);
    if (barrier) {
        dp->flags |= ZPLAN_BARRIER;
        open->n = 0;
    }
    for (int i = 0; i <= k->n_bind; i++) {
        if (open->n == open->cap) {
            int nc = open->cap ? open->cap * 2 : 64;
            access *na = realloc(open->a, sizeof *na * (size_t)nc);
            if (!na) return zdiag_set(w->d, ZE_NOMEM, "out of memory");
            open->a = na;
            open->cap = nc;
        }
        open->a[open->n++] = acc[i];
    }
    p->n_dispatches++;
    return ZOK;
}

/* Whether pre pass dispatch pre's inputs are untouched by dispatch at's
 * writes. Its inputs: its bindings (its kernel's, dispatch pre + 1's)
 * that neither writes, so x, the norm weight and the kernel's weights. */
static bool pre_intact(const lw *w, uint32_t pre, uint32_t at) {
    const zplan *p = w->p;
    const zplan_dispatch *a = &p->dispatches[pre], *b = &p->dispatches[at], *k = &p->dispatches[pre + 1];
    const access *in = w->accs + a->first_binding, *kin = w->accs + k->first_binding;
    for (uint32_t j = 1; j < b->n_bindings; j++) {
        const access *y = &w->accs[b->first_binding + j];
        if (!y->write) continue;
        for (uint32_t i = 1; i < a->n_bindings; i++)
            if (!in[i].write && !kin[i].write && overlap(&in[i], y)) return false;
    }
    return true;
}

/* Node k's pre pass is the previous node's (the same key: x, its norm and
 * the layout of the scratch) and its inputs are unchanged since: no
 * dispatch; k reads that one's scratch (the binding it wrote). */
static zstatus reuse_pre(const lw *w, uint32_t pre, const zcg_kernel *k, const zplan_binding **scratch) {
    const zplan_dispatch *a = &w->p->dispatches[pre];
    int n_scratch = 0;
    for (int i = 0; i < k->n_bind; i++)
        n_scratch += !k->bind[i].value && !k->bind[i].special && !k->bind[i].transient;
    *scratch = NULL;
    for (uint32_t i = 1; i < a->n_bindings; i++)
        if (w->accs[a->first_binding + i].write) {
            if (*scratch || n_scratch != 1)
                return zdiag_set(w->d, ZE_INTERNAL, "lowering: '%s' shares a pre pass but binds %d scratch buffers",
                                 k->name, n_scratch);
            *scratch = &w->p->bindings[a->first_binding + i];
        }
    if (!*scratch)
        return zdiag_set(w->d, ZE_INTERNAL, "lowering: the pre pass before '%s' writes no scratch", k->name);
    return ZOK;
}

static zstatus lower_phase(lw *w, const zir_graph *g, zplan_phase ph) {
    zcg_opts co = {.target = w->o->target,
                   .phase = ph == ZPLAN_DECODE ? ZPH_DECODE : ZPH_PREFILL,
                   .batch = ph == ZPLAN_BATCH,
                   .max_tokens = sched_tokens(w->o, ph),
                   .act_f16 = w->o->act_f16,
                   .tuning = w->o->tuning,
                   .gemv_rows = ph == ZPLAN_BATCH ? zcost_batch_gemv(w->o->target, w->o->parallel, NULL, 0) : 0};
    zstatus s = plan_memory(w, g, ph);
    interval_set open = {0};
    w->p->sched[ph] = (zplan_schedule){.first = w->p->n_dispatches,
                                       .max_tokens = (uint32_t)co.max_tokens,
                                       .logits_rows = (uint32_t)co.max_tokens};
    const char *prev_key = NULL; /* the previous node's pre pass (its key), if it had one */
    uint32_t prev_pre = 0;       /* and its dispatch */
    for (uint32_t i = 0; i < g->n_nodes && !s; i++) {
        zcg_kernel k;
        s = zcg_node(g, g->nodes[i], &co, w->tmp, &k, w->d);
        uint32_t pre = w->p->n_bindings;
        const char *node = g->nodes[i]->out->name;
        bool again = !s && k.glsl && k.pre && prev_key && !strcmp(prev_key, k.pre->key);
        zplan_binding scratch;
        const zplan_binding *reused = NULL;
        if (again && !(s = reuse_pre(w, prev_pre, &k, &reused)))
            scratch = *reused, reused = &scratch; /* a copy: the plan's bindings may move as they grow */
        else if (!s && k.glsl && k.pre) s = add_dispatch(w, g, node, k.pre, &open, UINT32_MAX, NULL);
        uint32_t at = w->p->n_dispatches;
        if (!s && k.glsl) s = add_dispatch(w, g, node, &k, &open, k.pre && !again ? pre : UINT32_MAX, reused);
        if (s && co.batch) zdiag_prefix(w->d, "batch schedule (--parallel %lld)", (long long)w->o->parallel);
        /* a later node may read this pre pass's scratch, while no dispatch since wrote what it read */
        if (!s && k.glsl && k.pre && k.pre->key[0] && !again) prev_key = k.pre->key, prev_pre = at - 1;
        if (!s && k.glsl && prev_key && !pre_intact(w, prev_pre, at)) prev_key = NULL;
    }
    /* The step's top-k candidates: of the last row, or of every row of a
     * batch step (plans 1.4 on), so that sampling reads no row of logits. */
    zcg_kernel k;
    if (!s) s = zcg_topk(g, &co, w->tmp, &k, w->d);
    if (!s) s = add_dispatch(w, g, g->logits->producer->out->name, &k, &open, UINT32_MAX, NULL);
    free(open.a);
    w->p->sched[ph].count = w->p->n_dispatches - w->p->sched[ph].first;
    /* The first dispatch of a phase waits for whatever ran before. */
    if (!s && w->p->sched[ph].count) w->p->dispatches[w->p->sched[ph].first].flags |= ZPLAN_BARRIER;
    return s;
}

/* The load schedule: each weight the weight-layout pass keeps in another
 * layout than ggml's, rewritten once on the device after the upload. The
 * graphs share the weight buffers, so they must agree on every layout. */
static zstatus lower_load(lw *w, const zir_graph *const *g, int ng) {
    zplan *p = w->p;
    zcg_opts co = {.target = w->o->target, .phase = ZPH_PREFILL, .max_tokens = 1, .act_f16 = w->o->act_f16};
    uint8_t *seen = calloc(p->n_buffers ? p->n_buffers : 1, 1); /* layout + 1 of each weight buffer */
    if (!seen) return zdiag_set(w->d, ZE_NOMEM, "out of memory");
    interval_set open = {0};
    uint32_t first = p->n_dispatches;
    zstatus s = ZOK;
    for (int i = 0; i < ng && !s; i++)
        for (uint32_t j = 0; g[i] && j < g[i]->n_values && !s; j++) {
            const zir_value *v = g[i]->values[j];
            uint32_t b = v->role == ZR_WEIGHT ? find_buffer(w, ZPB_WEIGHTS, v->name) : UINT32_MAX;
            if (b == UINT32_MAX) continue;
            if (seen[b] && seen[b] != v->layout + 1)
                s = zdiag_set(w->d, ZE_INTERNAL,
                              "lowering: weight '%s' has device layout %d in one phase's graph and %d in another: "
                              "expected one (the weight-layout pass decides by the weight and the target alone)",
                              v->name, seen[b] - 1, (int)v->layout);
            if (s || seen[b]) continue;
            seen[b] = (uint8_t)(v->layout + 1);
            if (v->layout == ZWL_GGUF) continue;
            zcg_kernel k;
            s = zcg_q6_planes(v, &co, w->tmp, &k, w->d);
            if (!s) s = add_dispatch(w, g[i], v->name, &k, &open, UINT32_MAX, NULL);
        }
    free(open.a);
    free(seen);
    uint32_t n = p->n_dispatches - first;
    p->sched[ZPLAN_LOAD] = n ? (zplan_schedule){.first = first, .count = n, .max_tokens = 1, .logits_rows = 1}
                             : (zplan_schedule){0};
    if (n) p->dispatches[first].flags |= ZPLAN_BARRIER; /* after the uploads */
    return s;
}

/* ---- the plan ----------------------------------------------------------- */

static zstatus header(lw *w, const zir_graph *g) {
    zplan *p = w->p;
    const zlower_opts *o = w->o;
    add_string(w, ""); /* offset 0 is the empty string */
    p->major = ZPLAN_VERSION_MAJOR;
    p->minor = ZPLAN_VERSION_MINOR;
    p->gguf_path = add_string(w, o->gguf_path ? o->gguf_path : "");
    p->gguf_size = o->gguf_size;
    p->gguf_hash = o->gguf_hash;
    p->arch = add_string(w, g->hp.arch ? g->hp.arch : "");
    p->n_vocab = (uint32_t)g->hp.n_vocab;
    p->n_embd = (uint32_t)g->hp.n_embd;
    p->n_layer = (uint32_t)g->hp.n_layer;
    p->ctx = (uint32_t)o->ctx;
    p->target = add_string(w, o->target->name);
    p->device_name = add_string(w, o->device_name ? o->device_name : "");
    p->vendor_id = o->vendor_id;
    p->device_id = o->device_id;
    p->subgroup_size = (uint32_t)o->target->subgroup;
    p->shared_bytes = o->target->smem_bytes;
    p->required = o->act_f16 ? ZPLAN_NEED_FP16 | ZPLAN_NEED_STORAGE16 : 0;
    zvk_toolchain tc;
    zdiag ignore = {0};
    p->compiler = add_string(w, zvk_toolchain_probe(&tc, &ignore)
                                    ? "zincc 0.1.0"
                                    : zarena_printf(w->tmp, "zincc 0.1.0, %s", tc.version));
    uint64_t rows = (uint64_t)(o->max_tokens > o->parallel ? o->max_tokens : o->parallel);
    p->n_seqs = (uint32_t)n_seqs(o);
    p->step_buffer = add_buffer(w, ZPB_STEP, "step", ZPLAN_STEP_BYTES(o->parallel), 0);
    p->tokens_buffer = add_buffer(w, ZPB_TOKENS, "tokens", rows * 4, 0);
    p->logits_buffer = add_buffer(w, ZPB_LOGITS, "logits", rows * (uint64_t)g->hp.n_vocab * 4, 0);
    p->topk_buffer = add_buffer(w, ZPB_TOPK, "topk", ZPLAN_TOPK_BYTES * (uint64_t)(o->parallel > 1 ? o->parallel : 1), 0);
    w->act = add_buffer(w, ZPB_ACT, "activations", ALIGN, 0);
    return w->oom ? zdiag_set(w->d, ZE_NOMEM, "out of memory") : ZOK;
}

zstatus zlower(zir_graph *const g[ZPLAN_PHASES], const zlower_opts *o, zplan **out, zdiag *d) {
    *out = NULL;
    if (o->max_tokens < 1 || o->ctx < o->max_tokens)
        return zdiag_set(d, ZE_INVALID, "prefill chunk %lld and context %lld: expected 1 <= chunk <= context",
                         (long long)o->max_tokens, (long long)o->ctx);
    if (o->parallel < 0 || o->parallel > ZPLAN_MAX_SEQS)
        return zdiag_set(d, ZE_INVALID, "--parallel %lld: expected 0 (none) to %d sequences",
                         (long long)o->parallel, ZPLAN_MAX_SEQS);
    zarena *a = zarena_new(), *tmp = zarena_new();
    zplan *p = a ? zarena_alloc(a, sizeof *p) : NULL;
    if (!p || !tmp) {
        zarena_free(a);
        zarena_free(tmp);
        return zdiag_set(d, ZE_NOMEM, "out of memory");
    }
    p->arena = a;
    lw w = {.p = p, .o = o, .d = d, .tmp = tmp, .transient = UINT32_MAX};
    zstatus s = header(&w, g[0]);
    for (int ph = 0; ph < ZPLAN_PHASES && !s; ph++) {
        s = declare_storage(&w, g[ph]);
        for (uint32_t i = 0; i < g[ph]->n_values; i++) /* an activation kept in fp16 (mm-f16) */
            if (g[ph]->values[i]->store_f16) w.p->required |= ZPLAN_NEED_FP16 | ZPLAN_NEED_STORAGE16;
    }
    if (!s && o->parallel && o->batch) s = declare_storage(&w, o->batch);
    for (int ph = 0; ph < ZPLAN_PHASES && !s; ph++)
        s = lower_phase(&w, g[ph], (zplan_phase)ph);
    if (!s && o->parallel) s = lower_phase(&w, o->batch ? o->batch : g[ZPLAN_PREFILL], ZPLAN_BATCH);
    const zir_graph *all[] = {g[ZPLAN_PREFILL], g[ZPLAN_DECODE], o->parallel ? o->batch : NULL};
    if (!s) s = lower_load(&w, all, 3);
    if (!s && w.oom) s = zdiag_set(d, ZE_NOMEM, "out of memory");
    if (!s) p->buffers[w.act].size = w.act_size ? w.act_size : ALIGN;
    zarena_free(tmp);
    if (s) {
        zarena_free(a);
        return s;
    }
    *out = p;
    return ZOK;
}
