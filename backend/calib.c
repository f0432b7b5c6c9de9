/* The device's fixed costs, measured: what a dispatch costs back to back,
 * what one costs behind a barrier (the case of a decode step, where nearly
 * every kernel waits for the one before), and what a kernel that spans the
 * device costs behind a barrier. The cost model prices dispatches with a
 * per-target constant (passes/target.c); this is how that constant is
 * checked against the hardware (zinc bench --profile prints both). */
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "shaderc.h"

/* One store per workgroup: the kernel does as little as a kernel can
 * while still writing memory (a dispatch with no effect might be elided). */
static const char CALIB_GLSL[] = "#version 450\n"
                                 "layout(local_size_x = 256) in;\n"
                                 "layout(std430, binding = 0) buffer B { uint b[]; };\n"
                                 "void main() {\n"
                                 "    if (gl_LocalInvocationIndex == 0u) b[gl_WorkGroupID.x & 1023u] = gl_WorkGroupID.x;\n"
                                 "}\n";

enum {
    CALIB_WARM = 400, /* dispatches first, so that the clocks rise (backend/tune.c says why) */
    CALIB_N = 256,    /* dispatches per timed run */
    CALIB_REPS = 5    /* runs of each kind; the median is kept */
};

static int by_value(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

double zvk_median(double *v, size_t n) {
    qsort(v, n, sizeof *v, by_value);
    return n ? v[n / 2] : 0.0;
}

zstatus zvk_rig_open(zvk_device *dev, const char *name, const char *glsl, unsigned flags, const zvk_binding *b,
                     uint32_t n, uint32_t n_sets, uint32_t marks, zvk_rig *r, zdiag *d) {
    memset(r, 0, sizeof *r);
    if (n_sets < 1 || n_sets > ZVK_RIG_MAX_SETS)
        return zdiag_set(d, ZE_INTERNAL, "timing rig: %u descriptor sets, expected 1..%d", n_sets,
                         ZVK_RIG_MAX_SETS);
    zarena *a = zarena_new();
    zvk_glsl_opts go = {.name = name, .optimize = true, .int_dot = (flags & ZVK_RIG_INT_DOT) != 0};
    zvk_spirv spv = {0};
    zstatus s = a ? zvk_glsl_compile(a, glsl, strlen(glsl), &go, &spv, d) : ZE_NOMEM;
    zvk_pipeline_desc pd = {
        .name = name, .spirv = spv.words, .n_words = spv.n_words, .n_buffers = n, .keep_nv = (flags & ZVK_RIG_KEEP_NV) != 0};
    if (!s) s = zvk_pipeline_create(dev, &pd, &r->p, d);
    if (!s) s = zvk_desc_pool_create(dev, n_sets, n * n_sets, &r->pool, d);
    for (uint32_t i = 0; !s && i < n_sets; i++)
        s = zvk_desc_set(dev, r->pool, &r->p, b + (size_t)i * n, n, &r->sets[i], d);
    r->set = r->sets[0], r->n_sets = n_sets;
    if (!s) s = zvk_timer_create(dev, marks, &r->tm, d);
    zarena_free(a);
    if (s) zvk_rig_close(dev, r);
    return s;
}

void zvk_rig_close(zvk_device *dev, zvk_rig *r) {
    zvk_timer_destroy(dev, &r->tm);
    zvk_desc_pool_destroy(dev, &r->pool);
    zvk_pipeline_destroy(dev, &r->p);
    memset(r, 0, sizeof *r); /* closing twice is harmless */
}

/* Kind 0: one workgroup, no barrier; 1: one workgroup after a barrier;
 * 2: `wide` workgroups after a barrier. */
static zstatus record(zvk_device *dev, const zvk_pipeline *p, VkDescriptorSet set, uint32_t wide, zvk_cmd *c,
                      zvk_timer *tm, zdiag *d) {
    zstatus s = zvk_cmd_begin(dev, c, d);
    if (s) return s;
    zvk_timer_reset(c, tm);
    for (int w = 0; w < CALIB_WARM; w++)
        zvk_cmd_dispatch(c, p, set, NULL, wide, 1, 1);
    for (int r = 0; !s && r < CALIB_REPS; r++)
        for (int kind = 0; !s && kind < 3; kind++) {
            zvk_cmd_barrier(c);
            s = zvk_timer_mark(c, tm, d);
            for (int i = 0; i < CALIB_N; i++) {
                if (kind) zvk_cmd_barrier(c);
                zvk_cmd_dispatch(c, p, set, NULL, kind == 2 ? wide : 1, 1, 1);
            }
            if (!s) s = zvk_timer_mark(c, tm, d);
        }
    if (!s) s = zvk_cmd_end(dev, c, d);
    return s;
}

static void medians(const double *ns, zvk_calib *out) {
    double *v[3] = {&out->dispatch_us, &out->barrier_us, &out->wide_us};
    for (int kind = 0; kind < 3; kind++) {
        double t[CALIB_REPS];
        for (int r = 0; r < CALIB_REPS; r++) {
            int m = 2 * (3 * r + kind);
            t[r] = (ns[m + 1] - ns[m]) / CALIB_N / 1e3;
        }
        *v[kind] = zvk_median(t, CALIB_REPS);
    }
}

zstatus zvk_calibrate(zvk_device *dev, uint32_t wide_groups, zvk_calib *out, zdiag *d) {
    memset(out, 0, sizeof *out);
    if (!dev->prof.timestamps)
        return zdiag_set(d, ZE_UNSUPPORTED, "calibration: %s has no timestamps on its compute queue",
                         dev->prof.name);
    zvk_buffer buf = {0};
    zvk_rig rig = {0};
    zvk_cmd c = {0};
    double ns[2 * 3 * CALIB_REPS];
    uint32_t wide = wide_groups ? wide_groups : 1024;
    zstatus s = zvk_buffer_create(dev, 4096, ZVK_MEM_DEVICE, "calibration", &buf, d);
    zvk_binding b = {&buf, 0, 0};
    if (!s) s = zvk_rig_open(dev, "calib.comp", CALIB_GLSL, 0, &b, 1, 1, 2 * 3 * CALIB_REPS, &rig, d);
    if (!s) s = record(dev, &rig.p, rig.set, wide, &c, &rig.tm, d);
    if (!s) s = zvk_cmd_submit_wait(dev, &c, d);
    if (!s) s = zvk_timer_read(dev, &rig.tm, ns, d);
    if (!s) medians(ns, out);
    out->wide_groups = wide;
    out->n = CALIB_N;
    out->reps = CALIB_REPS;
    zvk_cmd_release(dev, &c);
    zvk_rig_close(dev, &rig);
    zvk_buffer_destroy(dev, &buf);
    if (s) zdiag_prefix(d, "calibrating %s", dev->prof.name);
    return s;
}

/* ---- the layout of a subgroup's matrix fragments ------------------------ */

/* Loads A (16 x 16), B and C (16 x 8: the M16 N8 K16 product, whose three
 * types differ, so that the KHR rewrite gives each its use and their
 * lengths stay defined) from shared memory where element (r, c) is
 * r * 16 + c, and writes each lane's elements; one product keeps them
 * alive. */
static const char FRAG_GLSL[] =
    "#version 450\n"
    "#extension GL_NV_cooperative_matrix : require\n"
    "#extension GL_KHR_memory_scope_semantics : require\n"
    "#extension GL_KHR_shader_subgroup_basic : require\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"
    "layout(local_size_x = 32) in;\n"
    "layout(std430, binding = 0) buffer O { float o[]; };\n"
    "shared float16_t h[256];\n"
    "shared float f[256];\n"
    "void main() {\n"
    "    uint l = gl_LocalInvocationIndex;\n"
    "    for (uint i = l; i < 256u; i += 32u) { h[i] = float16_t(float(i)); f[i] = float(i); }\n"
    "    barrier();\n"
    "    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a;\n"
    "    fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> b;\n"
    "    fcoopmatNV<32, gl_ScopeSubgroup, 16, 8> c;\n"
    "    coopMatLoadNV(a, h, 0u, 16u, false);\n"
    "    coopMatLoadNV(b, h, 0u, 16u, false);\n"
    "    coopMatLoadNV(c, f, 0u, 16u, false);\n"
    "    if (l == 0u) { o[0] = float(a.length()); o[1] = float(b.length()); o[2] = float(c.length()); }\n"
    "    for (int i = 0; i < a.length() && i < 16; i++) o[4u + l * 16u + uint(i)] = float(a[i]);\n"
    "    for (int i = 0; i < b.length() && i < 16; i++) o[516u + l * 16u + uint(i)] = float(b[i]);\n"
    "    for (int i = 0; i < c.length() && i < 16; i++) o[1028u + l * 16u + uint(i)] = c[i];\n"
    "    c = coopMatMulAddNV(a, b, c);\n"
    "    coopMatStoreNV(c, o, 1540u, 8u, false);\n"
    "}\n";

static bool has_f16_16(const zvk_profile *p) {
    uint32_t n = p->coopmat_khr ? p->n_coopmat_khr : p->n_coopmat_nv;
    const zvk_coopmat *sh = p->coopmat_khr ? p->coopmat_khr_shapes : p->coopmat_nv_shapes;
    for (uint32_t i = 0; i < n; i++)
        if (sh[i].m == 16 && sh[i].n == 8 && sh[i].k == 16 && sh[i].scope == 3 && sh[i].a == sh[i].b &&
            sh[i].c != sh[i].a)
            return true;
    return false;
}

zstatus zvk_probe_fragmap(zvk_device *dev, zvk_fragmap *m, zdiag *d) {
    memset(m, 0, sizeof *m);
    const zvk_profile *p = &dev->prof;
    if (!(p->coopmat_khr || p->coopmat_nv) || !has_f16_16(p) || p->subgroup_size != 32)
        return zdiag_set(d, ZE_UNSUPPORTED,
                         "fragment layout: %s has no 16x8x16 fp16 subgroup matrices on 32-lane subgroups",
                         p->name);
    enum { N = 1540 + 128 };
    zvk_buffer buf = {0};
    zvk_rig rig = {0};
    zvk_cmd c = {0};
    float *o = malloc(sizeof(float) * N);
    zstatus s = o ? zvk_buffer_create(dev, sizeof(float) * N, ZVK_MEM_DEVICE, "fragment probe", &buf, d)
                  : zdiag_set(d, ZE_NOMEM, "out of memory");
    zvk_binding b = {&buf, 0, 0};
    /* NV where the device has it: the KHR form of this probe (lengths, and
     * elements read by a running index) crashed NVIDIA's driver 580.159 in
     * run 62; the layouts are the same hardware registers. */
    if (!s) s = zvk_rig_open(dev, "fragmap.comp", FRAG_GLSL, ZVK_RIG_KEEP_NV, &b, 1, 1, 2, &rig, d);
    if (!s) s = zvk_cmd_begin(dev, &c, d);
    if (!s) zvk_cmd_dispatch(&c, &rig.p, rig.set, NULL, 1, 1, 1);
    if (!s) s = zvk_cmd_end(dev, &c, d);
    if (!s) s = zvk_cmd_submit_wait(dev, &c, d);
    if (!s) s = zvk_download(dev, &buf, 0, o, sizeof(float) * N, d);
    for (int u = 0; !s && u < ZVK_FRAG_USES; u++) {
        float len = o[u];
        if (!(len >= 1 && len <= 16 && len == (float)(int)len)) {
            s = zdiag_set(d, ZE_UNSUPPORTED, "fragment layout: use %d holds %g elements a lane: expected 1..16", u,
                          len);
            break;
        }
        m->len[u] = (uint32_t)len;
        for (int l = 0; l < 32 && !s; l++)
            for (uint32_t i = 0; i < m->len[u]; i++) {
                float v = o[4 + 512 * u + 16 * l + (int)i];
                if (!(v >= 0 && v < 256 && v == (float)(int)v)) {
                    s = zdiag_set(d, ZE_UNSUPPORTED, "fragment layout: use %d lane %d element %u reads %g", u, l, i,
                                  v);
                    break;
                }
                m->row[u][l][i] = (uint8_t)((int)v / 16), m->col[u][l][i] = (uint8_t)((int)v % 16);
            }
    }
    zvk_cmd_release(dev, &c);
    zvk_rig_close(dev, &rig);
    zvk_buffer_destroy(dev, &buf);
    free(o);
    if (s) zdiag_prefix(d, "probing %s", p->name);
    return s;
}

bool zvk_fragmap_a_quads(const zvk_fragmap *m, int *right_bit, int *down_bit) {
    if (m->len[ZVK_FRAG_A] != 8) return false;
    for (int right = 1; right <= 2; right++) {
        int down = 3 - right;
        bool ok = true;
        for (int l = 0; l < 32 && ok; l++)
            for (int i = 0; i < 8 && ok; i++)
                ok = m->row[ZVK_FRAG_A][l][i] == l / 4 + 8 * ((i >> down) & 1) &&
                     m->col[ZVK_FRAG_A][l][i] == 2 * (l % 4) + (i & 1) + 8 * ((i >> right) & 1);
        if (ok) {
            *right_bit = right, *down_bit = down;
            return true;
        }
    }
    return false;
}

int zvk_fragmap_b_quads(const zvk_fragmap *m) {
    if (m->len[ZVK_FRAG_B] != 4) return 0;
    for (int pair = 0; pair <= 1; pair++) {
        int eight = 1 - pair;
        bool ok = true;
        for (int l = 0; l < 32 && ok; l++)
            for (int i = 0; i < 4 && ok; i++)
                ok = m->row[ZVK_FRAG_B][l][i] == l / 4 + 8 * ((i >> eight) & 1) &&
                     m->col[ZVK_FRAG_B][l][i] == 2 * (l % 4) + ((i >> pair) & 1);
        if (ok) return pair + 1;
    }
    return 0;
}

bool zvk_probe_frag_order(zvk_device *dev, int *right_bit, int *down_bit, int *frag_b) {
    zvk_fragmap m;
    zdiag d = {0};
    *right_bit = *down_bit = *frag_b = 0;
    if (zvk_probe_fragmap(dev, &m, &d) != ZOK) return false;
    *frag_b = zvk_fragmap_b_quads(&m);
    return zvk_fragmap_a_quads(&m, right_bit, down_bit);
}
