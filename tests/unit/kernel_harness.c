#include "kernel_harness.h"

#include "frontend/arch.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool kh_open(kh_ctx *k, char *err, size_t errsz) {
    memset(k, 0, sizeof *k);
    zdiag d = {0};
    uint32_t idx = 0;
    if (zvk_instance_create(&k->inst, &d) || zvk_select_device(&k->inst, NULL, &idx, &d) ||
        zvk_device_create(&k->inst, idx, &k->dev, &d)) {
        snprintf(err, errsz, "%s", d.msg);
        kh_close(k);
        return false;
    }
    k->ready = true;
    return true;
}

/* SPIR-V by kernel source: a test checks the same kernel at many steps, and
 * glslang's start-up (its built-in symbol table) dominates a check. The
 * cache lives until kh_close; Criterion runs each test in its own process. */
typedef struct kh_spv {
    struct kh_spv *next;
    const char *glsl;
    zvk_spirv spv;
} kh_spv;
static zarena *spv_arena;
static kh_spv *spv_list;

static zstatus compile_cached(const zcg_kernel *kn, zvk_spirv *out, zdiag *d) {
    for (const kh_spv *e = spv_list; e; e = e->next)
        if (!strcmp(e->glsl, kn->glsl)) {
            *out = e->spv;
            return ZOK;
        }
    if (!spv_arena && !(spv_arena = zarena_new())) return zdiag_set(d, ZE_NOMEM, "out of memory");
    kh_spv *e = zarena_alloc(spv_arena, sizeof *e);
    const char *src = zarena_strdup(spv_arena, kn->glsl);
    if (!e || !src) return zdiag_set(d, ZE_NOMEM, "out of memory");
    zvk_glsl_opts go = {.name = kn->name, .optimize = true, .int_dot = kn->int_dot};
    zstatus s = zvk_glsl_compile(spv_arena, kn->glsl, strlen(kn->glsl), &go, &e->spv, d);
    if (s) return s;
    e->glsl = src;
    e->next = spv_list;
    spv_list = e;
    *out = e->spv;
    return ZOK;
}

void kh_close(kh_ctx *k) {
    zarena_free(spv_arena);
    spv_arena = NULL;
    spv_list = NULL;
    zvk_device_destroy(&k->dev);
    zvk_instance_destroy(&k->inst);
    memset(k, 0, sizeof *k);
}

/* What one binding holds on the host, before and (expected) after. */
typedef struct slot {
    zvk_buffer buf;
    const float *want; /* expected contents after the dispatch (written bindings) */
    int64_t n;         /* floats to compare */
    /* The elements whose RMS scales the error: all, or a KV cache's rows
     * of the step (its other rows are old, or zeros past the position) */
    int64_t rms_lo, rms_hi;
    uint64_t bytes;
} slot;

static uint64_t round4(uint64_t n) {
    return (n + 3) & ~(uint64_t)3;
}

/* Host contents of a binding: weights as bytes, the rest as float. */
static zstatus fill(kh_ctx *k, const zcg_binding *b, const zir_interp *it, zir_step st, bool f16, slot *s,
                    zdiag *d) {
    const zir_value *v = b->value;
    int64_t n = 0;
    const float *src = NULL;
    if (!v)
        s->bytes = b->scratch_bytes;
    else if (v->role == ZR_WEIGHT)
        s->bytes = v->nbytes;
    else if (v->role == ZR_INPUT)
        s->bytes = (uint64_t)st.T * 4;
    else {
        src = zir_interp_value(it, v, &n);
        if (!src) return zdiag_set(d, ZE_INTERNAL, "no interpreter value for '%s'", v->name);
        s->bytes = (uint64_t)n * (f16 ? 2 : 4);
    }
    zstatus z = zvk_buffer_create(&k->dev, round4(s->bytes ? s->bytes : 4), ZVK_MEM_HOST,
                                  v ? v->name : "scratch", &s->buf, d);
    if (z) return z;
    unsigned char *m = s->buf.map;
    memset(m, 0, round4(s->bytes ? s->bytes : 4));
    if (v && v->role == ZR_WEIGHT) memcpy(m, v->data, v->nbytes);
    for (int64_t i = 0; src && i < n; i++) {
        if (f16)
            ((uint16_t *)m)[i] = zf32_to_f16(b->written ? NAN : src[i]);
        else
            ((float *)m)[i] = b->written ? NAN : src[i];
    }
    if (b->written && src) {
        s->want = src;
        s->n = s->rms_hi = n;
    }
    return ZOK;
}

/* A written KV cache keeps its old rows: only rows pos..pos+T-1 are
 * poisoned. A recurrent state is whole: the caller's contents before the
 * step (kh_ctx.state_in), or poison. */
static void unpoison_cache(const kh_ctx *k, const zcg_binding *b, zir_step st, bool f16, slot *s) {
    const zir_value *v = b->value;
    if (v && v == k->state && k->state_in && s->want)
        memcpy(s->buf.map, k->state_in, sizeof(float) * (size_t)s->n);
    if (!v || v->role != ZR_KV || zir_value_is_state(v) || !s->want) return;
    int64_t row = s->n / st.ctx;
    s->rms_lo = st.pos * row;
    s->rms_hi = (st.pos + st.T) * row;
    for (int64_t i = 0; i < s->n; i++) {
        int64_t r = i / row;
        if (r >= st.pos && r < st.pos + st.T) continue;
        if (f16)
            ((uint16_t *)s->buf.map)[i] = zf32_to_f16(s->want[i]);
        else
            ((float *)s->buf.map)[i] = s->want[i];
    }
}

/* Poisons a written binding again (a KV cache: its new rows only). */
static void repoison(const kh_ctx *k, const zcg_binding *b, zir_step st, bool f16, slot *s) {
    for (int64_t i = 0; s->want && i < s->n; i++) {
        if (f16)
            ((uint16_t *)s->buf.map)[i] = zf32_to_f16(NAN);
        else
            ((float *)s->buf.map)[i] = NAN;
    }
    unpoison_cache(k, b, st, f16, s);
}

static zstatus compare(const slot *s, bool f16, const char *name, kh_result *r, zdiag *d) {
    double ss = 0;
    for (int64_t i = s->rms_lo; i < s->rms_hi; i++)
        ss += (double)s->want[i] * s->want[i];
    int64_t m = s->rms_hi - s->rms_lo;
    double rms = sqrt(ss / (double)(m > 0 ? m : 1)) + 1e-30;
    for (int64_t i = 0; i < s->n; i++) {
        float got = f16 ? zf16_to_f32(((const uint16_t *)s->buf.map)[i]) : ((const float *)s->buf.map)[i];
        if (isnan(got) && !isnan(s->want[i]))
            return zdiag_set(d, ZE_INVALID, "'%s' element %lld was not written (still NaN)", name,
                             (long long)i);
        double e = fabs((double)got - s->want[i]) / rms;
        if (e > r->max_err) r->max_err = e;
    }
    r->checked += s->n;
    return ZOK;
}

static zstatus dispatch(kh_ctx *k, const zcg_kernel *kn, slot *slots, int n, zvk_buffer *stepb, zir_step st,
                        zdiag *d) {
    zarena *a = zarena_new();
    zvk_spirv spv = {0};
    zvk_pipeline p = {0};
    VkDescriptorPool pool = VK_NULL_HANDLE;
    VkDescriptorSet set;
    zvk_binding bind[ZCG_MAX_BIND + 1] = {{stepb, 0, 0}};
    for (int i = 0; i < n; i++)
        bind[i + 1] = (zvk_binding){&slots[i].buf, 0, 0};
    zstatus s = a ? compile_cached(kn, &spv, d) : ZE_NOMEM;
    zvk_pipeline_desc pd = {
        .name = kn->name, .spirv = spv.words, .n_words = spv.n_words, .n_buffers = (uint32_t)n + 1};
    if (!s) s = zvk_pipeline_create(&k->dev, &pd, &p, d);
    if (!s) s = zvk_desc_pool_create(&k->dev, 1, (uint32_t)n + 1, &pool, d);
    if (!s) s = zvk_desc_set(&k->dev, pool, &p, bind, (uint32_t)n + 1, &set, d);
    zvk_cmd c = {0};
    if (!s) s = zvk_cmd_begin(&k->dev, &c, d);
    if (!s) {
        zvk_cmd_dispatch(&c, &p, set, NULL, (uint32_t)zcg_affine_eval(kn->groups[0], st.T),
                         (uint32_t)zcg_affine_eval(kn->groups[1], st.T),
                         (uint32_t)zcg_affine_eval(kn->groups[2], st.T));
        s = zvk_cmd_run(&k->dev, &c, d);
    }
    zvk_desc_pool_destroy(&k->dev, &pool);
    zvk_pipeline_destroy(&k->dev, &p);
    zarena_free(a);
    return s;
}

/* The KV cache a binding is (the cache, or a store's view of it), or NULL. */
static const zir_value *cache_of(const zir_value *v) {
    if (!v || v->role == ZR_KV) return v;
    const zir_node *p = v->producer;
    if (p && p->op == ZOP_KERNEL) p = p->body[p->n_body - 1];
    return p && p->op == ZOP_KV_STORE ? p->in[1] : NULL;
}

/* Whether a binding is stored as f16: a cache by its dtype (kv-type), an
 * activation when the plan keeps activations in f16, or the mm-f16 pass
 * keeps this one so. */
static bool binding_f16(const zcg_binding *b, const zcg_opts *o) {
    const zir_value *c = cache_of(b->value);
    if (c) return c->dtype == ZT_F16;
    return b->value && b->value->role != ZR_WEIGHT && (o->act_f16 || b->value->store_f16);
}

zstatus kh_check_node(kh_ctx *k, const zir_graph *g, const zir_node *n, const zcg_opts *o,
                      const zir_interp *it, zir_step st, kh_result *r, zdiag *d) {
    memset(r, 0, sizeof *r);
    zarena *a = zarena_new();
    zcg_kernel kn;
    slot slots[ZCG_MAX_BIND] = {0};
    zvk_buffer stepb = {0};
    zstatus s = a ? zcg_node(g, n, o, a, &kn, d) : ZE_NOMEM;
    if (!s && !kn.glsl) s = zdiag_set(d, ZE_INVALID, "node '%s' has no kernel", n->out->name);
    if (!s) snprintf(r->kernel, sizeof r->kernel, "%s", kn.name);
    for (int i = 0; !s && i < kn.n_bind; i++) {
        s = fill(k, &kn.bind[i], it, st, binding_f16(&kn.bind[i], o), &slots[i], d);
        if (!s) unpoison_cache(k, &kn.bind[i], st, binding_f16(&kn.bind[i], o), &slots[i]);
        if (!s && kn.bind[i].value && kn.bind[i].value->role == ZR_INPUT) {
            const int32_t *tok =
                k->tokens ? k->tokens : (const int32_t *)zir_interp_value(it, kn.bind[i].value, NULL);
            if (tok)
                memcpy(slots[i].buf.map, tok, (size_t)st.T * 4);
            else
                s = zdiag_set(d, ZE_INVALID, "input '%s': no token ids (set kh_ctx.tokens)",
                              kn.bind[i].value->name);
        }
    }
    if (!s) s = zvk_buffer_create(&k->dev, 16, ZVK_MEM_HOST, "step", &stepb, d);
    if (!s) {
        uint32_t p[4] = {(uint32_t)st.T, (uint32_t)st.pos, (uint32_t)st.ctx, 0};
        memcpy(stepb.map, p, sizeof p);
    }
    /* A weight the weight-layout pass keeps in q6_K planes: rewritten on the
     * device by the load schedule's own kernel, as the executor does. */
    for (int i = 0; !s && i < kn.n_bind; i++) {
        const zir_value *v = kn.bind[i].value;
        if (!v || v->role != ZR_WEIGHT || v->layout == ZWL_GGUF) continue;
        zcg_kernel rk;
        s = zcg_q6_planes(v, o, a, &rk, d);
        if (!s) s = dispatch(k, &rk, &slots[i], 1, &stepb, st, d);
        /* byte for byte what the C reference (the tuner's) writes */
        uint8_t *want = s ? NULL : malloc(v->nbytes);
        uint64_t kk = (uint64_t)v->shape[v->rank - 1];
        if (!s && !want) s = zdiag_set(d, ZE_NOMEM, "out of memory");
        if (!s) ztype_q6_planes(v->data, want, v->nbytes / (kk / 256 * 210), kk);
        if (!s && memcmp(slots[i].buf.map, want, v->nbytes))
            s = zdiag_set(d, ZE_INTERNAL, "q6_planes: '%s' on the device differs from ztype_q6_planes", v->name);
        free(want);
        if (!s) r->relaid++;
    }
    for (int rep = 0; !s && rep < (k->replays > 1 ? k->replays : 1); rep++) {
        for (int i = 0; rep && i < kn.n_bind; i++)
            repoison(k, &kn.bind[i], st, binding_f16(&kn.bind[i], o), &slots[i]);
        if (kn.pre) s = dispatch(k, kn.pre, slots, kn.n_bind, &stepb, st, d); /* its scratch: the same slot */
        if (!s) s = dispatch(k, &kn, slots, kn.n_bind, &stepb, st, d);
        for (int i = 0; !s && i < kn.n_bind; i++)
            if (slots[i].want)
                s = compare(&slots[i], binding_f16(&kn.bind[i], o), kn.bind[i].value->name, r, d);
    }
    for (int i = 0; i < ZCG_MAX_BIND; i++)
        zvk_buffer_destroy(&k->dev, &slots[i].buf);
    zvk_buffer_destroy(&k->dev, &stepb);
    zarena_free(a);
    return s;
}

zpass_opts kh_pass_opts(const ztarget *t, zpass_phase ph) {
    return (zpass_opts){.target = t,
                        .phase = ph,
                        .token_tile = t->prefill_tile,
                        .ctx = 4096,
                        .fuse_threshold = t->fuse_threshold,
                        .verify_each = true};
}

zstatus kh_compile(const gguf_file *f, const ztarget *t, zpass_phase ph, const char *pipeline,
                   zir_graph **out, zdiag *d) {
    zpass_opts po = kh_pass_opts(t, ph);
    zstatus s = zir_build_from_gguf(f, out, d);
    if (!s) s = zpass_run_pipeline(*out, pipeline, NULL, &po, d);
    return s;
}

zstatus kh_run_steps(const zir_graph *g, int64_t ctx, int64_t max_tokens, uint64_t seed, kh_step_fn fn,
                     void *arg, zdiag *d) {
    static const int steps[] = {1, 7, 17};
    bool one = max_tokens == 1; /* a decode schedule: the runtime never gives it more */
    zir_interp *it;
    zstatus s = zir_interp_new(g, ctx, &it, d);
    if (s) return s;
    tu_rng r = tu_rng_seed(seed);
    for (size_t i = 0; i < (one ? 1 : sizeof steps / sizeof steps[0]) && !s; i++) {
        zir_interp_reset(it);
        for (int rep = 0; rep < (one ? 6 : 2) && !s; rep++) {
            int32_t tok[17];
            for (int j = 0; j < steps[i]; j++)
                tok[j] = (int32_t)(tu_next(&r) % (uint64_t)g->hp.n_vocab);
            zir_step st = {steps[i], zir_interp_pos(it), ctx};
            if (!(s = zir_interp_step(it, tok, steps[i], NULL, d))) fn(g, it, st, arg);
        }
    }
    zir_interp_free(it);
    return s;
}
