/* zincc --tune: the decode GEMVs' layouts, timed on the device (tune.h). */
#include "tune.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calib.h"

/* Rows per subgroup x groups per trip x subgroups per workgroup (x weights
 * declared restrict): around the default (RS by size, 1, 4), and the
 * corners measured on the H200 (docs/performance.md). */
static const zcg_gemv builtin[] = {
    {1, 1, 4, 0}, {2, 1, 4, 0}, {4, 1, 4, 0}, {8, 1, 4, 0}, {1, 2, 4, 0}, {2, 2, 4, 0}, {4, 2, 4, 0},
    {1, 1, 1, 0}, {2, 1, 1, 0}, {4, 1, 1, 0}, {1, 1, 2, 0}, {2, 1, 2, 0}, {4, 1, 2, 0}, {2, 1, 8, 0},
    {4, 1, 8, 0}, {1, 1, 4, 1}, {2, 1, 4, 1}, {4, 1, 4, 1}, {2, 1, 1, 1}, {4, 1, 2, 1},
    /* x read from L1 instead of staged in shared memory (X_SHARED): on the
     * H200 staging sped up q, k, v and slowed o and gate+up (run 12) */
    {1, 1, 4, 0, -1}, {2, 1, 4, 0, -1}, {4, 1, 4, 0, -1},
};

const zcg_gemv *zvk_tune_candidates(int *n) {
    *n = (int)(sizeof builtin / sizeof builtin[0]);
    return builtin;
}

/* The prefill GEMMs on the matrix units (matmul_cmp.glsl): tokens x
 * subgroups a workgroup. On the H100 (run 69) 8 subgroups took 8-11 % off
 * the 8B's o and q and slowed the rest; the token tile by the grid (the
 * default) took k and v to 64 tokens (run 71). */
static const zcg_gemv builtin_gemm[] = {
    {.bm = 128, .nsg = 4}, {.bm = 128, .nsg = 8}, {.bm = 128, .nsg = 2}, {.bm = 64, .nsg = 4},
    {.bm = 64, .nsg = 8},  {.bm = 64, .nsg = 2},  {.bm = 32, .nsg = 4},  {.bm = 32, .nsg = 8},
};

const zcg_gemv *zvk_tune_gemm_candidates(int *n) {
    *n = (int)(sizeof builtin_gemm / sizeof builtin_gemm[0]);
    return builtin_gemm;
}

/* The buffers of one kernel key, shared by its candidates: every binding
 * once, and the weights again in copies - 1 more places. A decode step
 * runs each kernel behind a barrier on weights the L2 does not hold (it
 * streams gigabytes); the timed runs do the same by going round the copies,
 * whose bytes together are more than any L2. */
typedef struct bench {
    zvk_buffer buf[ZCG_MAX_BIND], step;
    zvk_buffer *copy; /* [copies - 1][n]: only the weight bindings are made */
    int n, copies;
    double weight_bytes;
    int64_t T; /* the step's tokens: 1 (decode) or the prefill chunk */
} bench;

static uint64_t binding_bytes(const zcg_binding *b, const zvk_tune_opts *o, int64_t T) {
    const zir_value *v = b->value;
    zir_step one = {.T = T, .pos = 0, .ctx = o->ctx};
    if (!v) return b->scratch_bytes;
    if (v->role == ZR_WEIGHT) return v->nbytes;
    if (v->role == ZR_INPUT) return 4;
    return (uint64_t)zir_value_elems(v, &one) * (o->act_f16 || v->store_f16 ? 2u : 4u);
}

/* Weights hold the model's bytes (their timing does not depend on them, but
 * NaN-free data keeps every path honest); everything else is zero. */
static zstatus fill(zvk_device *dev, zvk_buffer *buf, const zir_value *v, uint64_t bytes, zdiag *d) {
    uint64_t n = (bytes + 3) & ~(uint64_t)3;
    zstatus s = zvk_buffer_create(dev, n ? n : 4, ZVK_MEM_DEVICE, v ? v->name : "scratch", buf, d);
    if (s || !n) return s;
    bool planes = v && v->role == ZR_WEIGHT && v->data && v->layout == ZWL_Q6_PLANES;
    if (v && v->role == ZR_WEIGHT && v->data && n == v->nbytes && !planes)
        return zvk_upload(dev, buf, 0, v->data, n, d);
    void *z = calloc(1, n);
    if (!z) return zdiag_set(d, ZE_NOMEM, "tune: out of memory");
    /* in the layout the kernel reads (the weight-layout pass's planes) */
    uint64_t k = v && v->rank ? (uint64_t)v->shape[v->rank - 1] : 0;
    if (planes && k)
        ztype_q6_planes(v->data, z, v->nbytes / (k / 256 * 210), k);
    else if (v && v->role == ZR_WEIGHT && v->data)
        memcpy(z, v->data, v->nbytes);
    s = zvk_upload(dev, buf, 0, z, n, d);
    free(z);
    return s;
}

static bool is_weight(const zcg_binding *b) {
    return b->value && b->value->role == ZR_WEIGHT;
}

static void bench_close(zvk_device *dev, bench *b) {
    for (int i = 0; i < b->n; i++)
        zvk_buffer_destroy(dev, &b->buf[i]);
    for (int i = 0; b->copy && i < (b->copies - 1) * ZCG_MAX_BIND; i++)
        zvk_buffer_destroy(dev, &b->copy[i]);
    free(b->copy);
    zvk_buffer_destroy(dev, &b->step);
    memset(b, 0, sizeof *b);
}

/* Copies of the weights so that they add up to ring_bytes: 2 at least (a
 * kernel never reads the weights it just read), ZVK_RIG_MAX_SETS at most. */
static int ring_copies(double weight_bytes, uint64_t ring_bytes) {
    if (!ring_bytes || weight_bytes <= 0) return 1;
    double c = (double)ring_bytes / weight_bytes + 1;
    return c < 2 ? 2 : c > ZVK_RIG_MAX_SETS ? ZVK_RIG_MAX_SETS : (int)c;
}

static zstatus bench_open(zvk_device *dev, const zcg_kernel *k, const zvk_tune_opts *o, int64_t T, bench *b,
                          zdiag *d) {
    memset(b, 0, sizeof *b);
    b->T = T;
    zstatus s = ZOK;
    for (int i = 0; !s && i < k->n_bind; i++) {
        const zir_value *v = k->bind[i].value;
        s = fill(dev, &b->buf[i], v, binding_bytes(&k->bind[i], o, T), d);
        if (!s) b->n = i + 1;
        if (is_weight(&k->bind[i])) b->weight_bytes += (double)v->nbytes;
    }
    b->copies = ring_copies(b->weight_bytes, o->ring_bytes);
    if (!s && b->copies > 1 && !(b->copy = calloc((size_t)(b->copies - 1) * ZCG_MAX_BIND, sizeof *b->copy)))
        s = zdiag_set(d, ZE_NOMEM, "tune: out of memory");
    for (int c = 0; !s && c < b->copies - 1; c++)
        for (int i = 0; !s && i < b->n; i++)
            if (is_weight(&k->bind[i]))
                s = fill(dev, &b->copy[c * ZCG_MAX_BIND + i], k->bind[i].value, binding_bytes(&k->bind[i], o, T), d);
    if (!s) s = zvk_buffer_create(dev, 16, ZVK_MEM_HOST, "step", &b->step, d);
    if (!s) memcpy(b->step.map, (uint32_t[4]){(uint32_t)T, 0, (uint32_t)o->ctx, 0}, 16);
    if (s) bench_close(dev, b);
    return s;
}

/* The bindings of copy c: the step, then each binding, the weights from
 * their c-th place. */
static void copy_bindings(const zcg_kernel *k, const bench *b, int c, zvk_binding *out) {
    out[0] = (zvk_binding){&b->step, 0, 0};
    for (int i = 0; i < b->n; i++)
        out[i + 1] = (zvk_binding){c && is_weight(&k->bind[i]) ? &b->copy[(c - 1) * ZCG_MAX_BIND + i] : &b->buf[i],
                                   0, 0};
}

/* Dispatches per timed run: the copies, round as often as it takes to make
 * at least this many (one run's time over its dispatches is one sample). */
#define TUNE_PER_RUN 16

/* Records one submission: a warm-up lap of the copies, then reps runs, each
 * between two timestamps and each dispatch behind a barrier, as in a step. */
static zstatus record(zvk_device *dev, const zcg_kernel *k, int64_t T, zvk_rig *rig, int laps, int reps,
                      zvk_cmd *c, zdiag *d) {
    uint32_t g[3];
    for (int a = 0; a < 3; a++)
        g[a] = (uint32_t)zcg_affine_eval(k->groups[a], T);
    zstatus s = zvk_cmd_begin(dev, c, d);
    if (s) return s;
    zvk_timer_reset(c, &rig->tm);
    for (uint32_t i = 0; i < rig->n_sets; i++) {
        zvk_cmd_barrier(c);
        zvk_cmd_dispatch(c, &rig->p, rig->sets[i], NULL, g[0], g[1], g[2]);
    }
    for (int r = 0; !s && r < reps; r++) {
        zvk_cmd_barrier(c);
        s = zvk_timer_mark(c, &rig->tm, d);
        for (int l = 0; l < laps; l++)
            for (uint32_t i = 0; i < rig->n_sets; i++) {
                zvk_cmd_barrier(c);
                zvk_cmd_dispatch(c, &rig->p, rig->sets[i], NULL, g[0], g[1], g[2]);
            }
        if (!s) s = zvk_timer_mark(c, &rig->tm, d);
    }
    if (!s) s = zvk_cmd_end(dev, c, d);
    return s;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The median time of one dispatch of kernel k, in microseconds. The same
 * submission runs again and again until warm_s have passed, then once more
 * for the timestamps: between candidates (shaderc compiles the next) an H200
 * drops to its idle clock, and run 40 measured the first few milliseconds'
 * worth of dispatches 3-5x slower than in a step (docs/performance.md). */
static zstatus time_kernel(zvk_device *dev, const zcg_kernel *k, const bench *b, const zvk_tune_opts *o,
                           double *us, int64_t *regs, zdiag *d) {
    zvk_rig rig = {0};
    zvk_cmd c = {0};
    int reps = o->reps > 0 ? o->reps : 15;
    int laps = (TUNE_PER_RUN + b->copies - 1) / b->copies;
    zvk_binding bind[ZVK_RIG_MAX_SETS * (ZCG_MAX_BIND + 1)];
    for (int i = 0; i < b->copies; i++)
        copy_bindings(k, b, i, bind + (size_t)i * (size_t)(b->n + 1));
    double *t = calloc((size_t)reps * 2, sizeof *t);
    zstatus s = t ? zvk_rig_open(dev, k->name, k->glsl, k->int_dot ? ZVK_RIG_INT_DOT : 0, bind, (uint32_t)b->n + 1, (uint32_t)b->copies,
                                 (uint32_t)reps * 2, &rig, d)
                  : zdiag_set(d, ZE_NOMEM, "tune: out of memory");
    if (!s) s = record(dev, k, b->T, &rig, laps, reps, &c, d);
    for (double t0 = now_s(); !s && now_s() - t0 < o->warm_s;)
        s = zvk_cmd_submit_wait(dev, &c, d);
    if (!s) s = zvk_cmd_submit_wait(dev, &c, d);
    if (!s) s = zvk_timer_read(dev, &rig.tm, t, d);
    for (int r = 0; !s && r < reps; r++)
        t[r] = (t[2 * r + 1] - t[2 * r]) / (laps * b->copies);
    if (!s) *us = zvk_median(t, (size_t)reps) / 1e3;
    *regs = rig.p.stats.valid ? rig.p.stats.registers : -1;
    zvk_cmd_release(dev, &c);
    zvk_rig_close(dev, &rig);
    free(t);
    return s;
}

static bool seen_key(const zcg_tuning *t, const char *key) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->key[i], key)) return true;
    return false;
}

/* Every candidate of node n's kernel (key def->key); the fastest goes into out. */
static zstatus tune_key(zvk_device *dev, const zir_graph *g, const zir_node *n, const zcg_kernel *def,
                        const zvk_tune_opts *o, zcg_opts co, const zcg_gemv *cand, int nc, zarena *a,
                        zcg_tuning *out, zdiag *d) {
    bench b;
    zstatus s = bench_open(dev, def, o, co.max_tokens, &b, d);
    zvk_tune_row best = {.us = -1};
    /* Codegen's own layout first (an all-zero layout keeps it), then each
     * candidate that differs from it. */
    for (int i = -1; !s && i < nc; i++) {
        zcg_kernel k = *def;
        zdiag skip = {0};
        co.force_gemv = i < 0 ? NULL : &cand[i];
        if (i >= 0 && zcg_node(g, n, &co, a, &k, &skip)) continue; /* a layout this target cannot hold */
        if (i >= 0 && !strcmp(k.name, def->name)) continue;
        zvk_tune_row r = {.key = def->key, .name = zarena_printf(a, "%s", k.name), .is_default = i < 0};
        if (i >= 0) r.layout = cand[i];
        s = time_kernel(dev, &k, &b, o, &r.us, &r.regs, d);
        if (s) break;
        r.gbs = r.us > 0 ? b.weight_bytes / (r.us * 1e3) : 0;
        if (o->report) o->report(o->report_ctx, &r);
        if (best.us < 0 || r.us < best.us) best = r;
    }
    bench_close(dev, &b);
    if (s || best.us < 0)
        return s ? s : zdiag_set(d, ZE_INTERNAL, "tune: no layout of '%s' compiled", def->key);
    best.best = true;
    if (o->report) o->report(o->report_ctx, &best);
    const char **keys = zarena_array(a, (size_t)out->n + 1, sizeof *keys);
    zcg_gemv *gv = zarena_array(a, (size_t)out->n + 1, sizeof *gv);
    if (!keys || !gv) return zdiag_set(d, ZE_NOMEM, "tune: out of memory");
    if (out->n) memcpy(keys, out->key, sizeof *keys * (size_t)out->n);
    if (out->n) memcpy(gv, out->gemv, sizeof *gv * (size_t)out->n);
    keys[out->n] = zarena_printf(a, "%s", def->key);
    gv[out->n++] = best.layout;
    out->key = keys;
    out->gemv = gv;
    return keys[out->n - 1] ? ZOK : zdiag_set(d, ZE_NOMEM, "tune: out of memory");
}

/* Every tunable kernel of g (compiled for phase, T tokens a step). */
static zstatus tune_graph(zvk_device *dev, const zir_graph *g, zpass_phase phase, int64_t T, const zcg_gemv *cand,
                          int nc, const zvk_tune_opts *o, zarena *a, zcg_tuning *out, zdiag *d) {
    if (!dev->prof.timestamps)
        return zdiag_set(d, ZE_UNSUPPORTED, "tune: %s has no timestamps on its compute queue",
                         dev->prof.name);
    zcg_opts co = {.target = o->target, .phase = phase, .max_tokens = T, .act_f16 = o->act_f16};
    zstatus s = ZOK;
    for (uint32_t i = 0; !s && i < g->n_nodes; i++) {
        zcg_kernel def;
        s = zcg_node(g, g->nodes[i], &co, a, &def, d);
        if (s || !def.glsl || !def.key[0] || seen_key(out, def.key)) continue;
        /* prefill: the GEMMs alone (their candidates are GEMM layouts) */
        if (phase == ZPH_PREFILL && strncmp(def.key, "gemm", 4)) continue;
        s = tune_key(dev, g, g->nodes[i], &def, o, co, cand, nc, a, out, d);
    }
    return s;
}

zstatus zvk_tune_gemv(zvk_device *dev, const zir_graph *g, const zvk_tune_opts *o, zarena *a, zcg_tuning *out,
                      zdiag *d) {
    memset(out, 0, sizeof *out);
    const zcg_gemv *cand = o->candidates ? o->candidates : builtin;
    int nc = o->candidates ? o->n_candidates : (int)(sizeof builtin / sizeof builtin[0]);
    return tune_graph(dev, g, ZPH_DECODE, 1, cand, nc, o, a, out, d);
}

zstatus zvk_tune_gemm(zvk_device *dev, const zir_graph *g, int64_t tokens, const zvk_tune_opts *o, zarena *a,
                      zcg_tuning *out, zdiag *d) {
    const zcg_gemv *cand = o->candidates ? o->candidates : builtin_gemm;
    int nc = o->candidates ? o->n_candidates : (int)(sizeof builtin_gemm / sizeof builtin_gemm[0]);
    return tune_graph(dev, g, ZPH_PREFILL, tokens > 0 ? tokens : 512, cand, nc, o, a, out, d);
}
