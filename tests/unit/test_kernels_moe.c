/* The mixture-of-experts kernels (backend/cg_moe.c) against the CPU
 * interpreter, every element, on the default Vulkan device (llvmpipe in CI):
 * the router's top-k, the expert GEMV alone (x [T, K] and [T, U, K]), gate+up
 * +SwiGLU, down + weighted sum + residual, the weighted sum alone, and
 * prefill's grouped GEMMs (the route sorted by expert, gate+up+SwiGLU and
 * down over each expert's run of pairs); the sorted route must match the
 * interpreter's exactly (ids, weights, and the stable order).
 *
 * Graphs: qwen3moe models from mkmodel, unfused (shape,width) and after the
 * default pipeline, in both phases, prefill again with ZINC_MOE_GROUPED=0
 * (the fused GEMVs over many tokens) and compiled for h200 (fp16 operands
 * in the grouped GEMMs: the matrix units where the device has them,
 * ZINC_MOE_CM=0 the scalar tiles), and decode with the GEMVs' loop unrolled by 3: Q4_K_M with 8 experts, 2 used (q4_K,
 * q5_K, q6_K and q8_0 experts by llama.cpp's rule), f32 with 6 experts, 3
 * used and widths that leave tail rows (hidden 72, expert width 40), and
 * Q8_0 with 8 experts, 4 used and its router zeroed, so every token takes
 * experts 0 to 3 (the lower ids win the ties) and the other four get none.
 * Prefill steps of T = 1, 17, 64 and 130 random tokens at position 0 and
 * again at position T (an expert's pairs fill the grouped tiles several
 * times over); decode six single tokens.
 *
 * The router's top-k alone, on hand-built graphs (logits looked up by
 * token): E of 6, 37, 128 and 300 (fewer experts than a subgroup's lanes,
 * and counts that no subgroup size divides, up to more than a lane keeps in
 * registers), rows of many ties (at the max, everywhere, and at p = 0 after
 * one expert takes all), kernels for llvmpipe's subgroup and for h200's 32
 * (on llvmpipe wider than the device's: the lanes recompute the experts
 * past their registers). Steps as above, every element compared. */
#include <criterion/criterion.h>
#include <spirv-tools/libspirv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/shaderc.h"
#include "backend/spv_coopmat.h"
#include "frontend/arch.h"
#include "frontend/mkmodel.h"
#include "kernel_harness.h"
#include "testutil.h"

enum {
    KM_TOPK,
    KM_ID,
    KM_GATE_UP,
    KM_DOWN,
    KM_SUM,
    KM_SUM_ADD,
    KM_ROUTE,
    KM_GROUPED_GATE_UP,
    KM_GROUPED_DOWN,
    KM_N
};
static const char *const km_name[KM_N] = {
    "moe_topk",    "matmul_id", "moe_gate_up",         "moe_down",        "moe_sum",
    "moe_sum+add", "moe_route", "grouped moe_gate_up", "grouped moe_down"};

/* Bounds on max |got - want| / rms(want) with fp32 storage: dot products
 * and sums in another order (a few ulps of the RMS). A wrong expert id, row
 * or slot moves the error to O(1). fp16 storage rounds every input and
 * output to 11 bits. */
#define KM_TOL     1e-5
#define KM_TOL_F16 1.5e-2
/* The grouped GEMMs sum K in one fp32 chain per output, as the dense GEMM
 * (test_kernels_matmul's TOL_F32), where the GEMV sums per lane and then
 * across the subgroup. */
#define KM_TOL_GEMM 1e-4
/* The grouped GEMMs compiled for h200: the mm-f16 pass gives them fp16
 * operands, which the kernel (matmul_cm.glsl with MOE on the H200's matrix
 * units, moe_gemm.glsl's scalar tiles rounding as it stages on llvmpipe)
 * and the interpreter round alike; the normalized x they round differs in
 * its last fp32 bits, so a few elements round to the neighbouring half
 * (test_kernels_matmul's TOL_MM16). A wrong pair, row or expert is O(1). */
#define KM_TOL_MM16 4e-3

static int kind_of(const zir_node *n) {
    if (n->op == ZOP_KERNEL && n->kp.tmpl == ZKT_MOE_SUM) return KM_SUM_ADD;
    if (n->op == ZOP_KERNEL && n->kp.token_tile > 1)
        return n->kp.tmpl == ZKT_MOE_GATE_UP ? KM_GROUPED_GATE_UP
               : n->kp.tmpl == ZKT_MOE_DOWN  ? KM_GROUPED_DOWN
                                             : -1;
    if (n->op == ZOP_KERNEL)
        return n->kp.tmpl == ZKT_MOE_GATE_UP ? KM_GATE_UP : n->kp.tmpl == ZKT_MOE_DOWN ? KM_DOWN : -1;
    switch (n->op) {
    case ZOP_MOE_TOPK: return KM_TOPK;
    case ZOP_MATMUL_ID: return KM_ID;
    case ZOP_MOE_SUM: return KM_SUM;
    case ZOP_MOE_ROUTE: return KM_ROUTE;
    default: return -1;
    }
}

static kh_ctx dev;
static void open_dev(void) {
    char err[256];
    cr_assert(kh_open(&dev, err, sizeof err), "no Vulkan device: %s", err);
}
static void close_dev(void) {
    kh_close(&dev);
}

typedef struct check_arg {
    const zcg_opts *o;
    long *checks;
    const char *what;
} check_arg;

/* The interpreter's moe_route by its definition, so that the kernel is not
 * only equal to the interpreter but right: column 0 is the route's ids,
 * and the ranks hold every (token, slot) once, ordered by expert, then
 * token, then slot, with its expert beside it. */
static void check_sorted_route(const zir_interp *it, const zir_node *n, zir_step st) {
    int64_t n_r, n_s, U = n->in[0]->shape[1], P = st.T * U;
    const float *r = zir_interp_value(it, n->in[0], &n_r), *s = zir_interp_value(it, n->out, &n_s);
    cr_assert(r && s && n_r == 2 * P && n_s == 4 * P, "'%s': no values", n->out->name);
    int64_t prev = -1;
    for (int64_t p = 0; p < P; p++) {
        cr_assert_eq(s[4 * p], r[2 * p], "'%s': id of pair %lld", n->out->name, (long long)p);
        int64_t pair = (int64_t)s[4 * p + 2] * U + (int64_t)s[4 * p + 3];
        cr_assert(pair >= 0 && pair < P && s[4 * p + 1] == r[2 * pair], "'%s': rank %lld", n->out->name,
                  (long long)p);
        int64_t key = (int64_t)s[4 * p + 1] * P + pair; /* by expert, then (token, slot) */
        cr_assert(key > prev, "'%s': rank %lld out of order", n->out->name, (long long)p);
        prev = key;
    }
}

static void check_nodes(const zir_graph *g, const zir_interp *it, zir_step st, void *arg) {
    const check_arg *c = arg;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        int kk = kind_of(n);
        if (kk < 0) continue;
        if (kk == KM_ROUTE) check_sorted_route(it, n, st);
        kh_result r;
        zdiag d = {0};
        zstatus s = kh_check_node(&dev, g, n, c->o, it, st, &r, &d);
        cr_assert_eq(s, ZOK, "%s: '%s' at T=%lld pos=%lld: %s", c->what, n->out->name, (long long)st.T,
                     (long long)st.pos, d.msg);
        double tol = kk == KM_ROUTE                                    ? 0
                     : c->o->act_f16                                   ? KM_TOL_F16
                     : kk >= KM_GROUPED_GATE_UP && n->body[0]->attr.mm_f16 ? KM_TOL_MM16
                     : kk >= KM_GROUPED_GATE_UP                        ? KM_TOL_GEMM
                                                                       : KM_TOL;
        cr_assert(r.checked > 0, "%s: '%s' compared nothing", c->what, n->out->name);
        cr_assert(r.max_err <= tol, "%s: %s for '%s' at T=%lld pos=%lld: error %.3g of the RMS > %.1g",
                  c->what, r.kernel, n->out->name, (long long)st.T, (long long)st.pos, r.max_err, tol);
        c->checks[kk]++;
    }
}

typedef struct model {
    const char *file;
    zmk_quant quant;
    uint32_t hidden, expert_ff, experts, used;
    bool zero_router; /* every token takes experts 0 .. used-1 */
} model;

/* Overwrites layer 0's router weight with zero bytes (zero in every type:
 * the block scales too), so all logits tie at 0. */
static void zero_router(const char *path) {
    gguf_file *f;
    zdiag d = {0};
    cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
    const gguf_tensor *r = gguf_find_tensor(f, "blk.0.ffn_gate_inp.weight");
    cr_assert(r, "%s: no router weight", path);
    long off = (long)(f->data_offset + r->offset);
    size_t n = (size_t)r->nbytes;
    gguf_close(f);
    void *zero = calloc(1, n);
    FILE *w = fopen(path, "r+b");
    cr_assert(zero && w, "cannot rewrite %s", path);
    cr_assert(fseek(w, off, SEEK_SET) == 0 && fwrite(zero, 1, n, w) == n, "cannot rewrite %s", path);
    cr_assert(fclose(w) == 0, "cannot rewrite %s", path);
    free(zero);
}

static gguf_file *make_model(const model *m) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = ZMK_QWEN3MOE;
    o.quant = m->quant;
    o.seed = 17;
    o.layers = 1;
    o.hidden = m->hidden;
    o.ff = 64;
    o.heads = 2;
    o.kv_heads = 1;
    o.head_dim = 32;
    o.vocab = 300;
    o.experts = m->experts;
    o.experts_used = m->used;
    o.expert_ff = m->expert_ff;
    zdiag d = {0};
    const char *path = tu_tmp(m->file);
    cr_assert_eq(zmk_write(&o, path, NULL, &d), ZOK, "%s", d.msg);
    if (m->zero_router) zero_router(path);
    gguf_file *f;
    cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
    return f;
}

typedef struct variant {
    zpass_phase phase;
    const char *pipeline; /* NULL: the default */
    bool f16;
    bool gemv; /* ZINC_MOE_GROUPED=0: prefill keeps the GEMVs */
    bool h200; /* compiled for h200 (fp16 operands in the grouped GEMMs), run within this device */
    int unroll; /* ZINC_MOE_GEMV_UNROLL for the expert GEMVs' kernels (0: the default) */
} variant;

static const variant variants[] = {
    {ZPH_PREFILL, "shape,width", false, false}, {ZPH_DECODE, "shape,width", false, false},
    {ZPH_PREFILL, NULL, false, false},          {ZPH_PREFILL, NULL, false, true},
    {ZPH_DECODE, NULL, false, false},           {ZPH_DECODE, NULL, true, false},
    {ZPH_PREFILL, NULL, false, false, true},    {ZPH_DECODE, NULL, false, false, false, 3},
};

/* The h200 profile limited to what this device has: its shared memory,
 * and the matrix units only where it has them (llvmpipe runs the grouped
 * GEMMs mm-f16 marked on the scalar tiles, which round the same way). */
static ztarget device_h200(void) {
    ztarget r = *ztarget_find("h200");
    if (r.smem_bytes > dev.dev.prof.max_shared_memory) r.smem_bytes = dev.dev.prof.max_shared_memory;
    r.coopmat = r.coopmat && (dev.dev.prof.coopmat_nv || dev.dev.prof.coopmat_khr);
    r.coopmat_wg = 0;
    r.int_dot = r.int_dot && dev.dev.prof.int_dot;
    return r;
}

/* Prefill steps of 1, 17, 64 and 130 random tokens, each at position 0
 * and again at position T (130 x 3 or 4 pairs: moe_route's threads walk
 * runs of two pairs); decode: kh_run_steps's six single tokens. */
enum { STEP_MAX = 130 };

static zstatus run_steps(const zir_graph *g, int64_t max_tokens, uint64_t seed, kh_step_fn fn, void *arg,
                         zdiag *d) {
    enum { CTX = 2 * STEP_MAX };
    if (max_tokens == 1) return kh_run_steps(g, CTX, 1, seed, fn, arg, d);
    static const int steps[] = {1, 17, 64, STEP_MAX};
    zir_interp *it;
    zstatus s = zir_interp_new(g, CTX, &it, d);
    if (s) return s;
    tu_rng r = tu_rng_seed(seed);
    for (size_t i = 0; i < sizeof steps / sizeof steps[0] && !s; i++) {
        zir_interp_reset(it);
        for (int rep = 0; rep < 2 && !s; rep++) {
            int32_t tok[STEP_MAX];
            for (int j = 0; j < steps[i]; j++)
                tok[j] = (int32_t)(tu_next(&r) % (uint64_t)g->hp.n_vocab);
            zir_step st = {steps[i], zir_interp_pos(it), CTX};
            if (!(s = zir_interp_step(it, tok, steps[i], NULL, d))) fn(g, it, st, arg);
        }
    }
    zir_interp_free(it);
    return s;
}

static void check_model(const model *m, long checks[KM_N]) {
    gguf_file *f = make_model(m);
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        const variant *x = &variants[v];
        ztarget t = x->h200 ? device_h200() : *ztarget_find("llvmpipe");
        zir_graph *g;
        zdiag d = {0};
        if (x->gemv) setenv("ZINC_MOE_GROUPED", "0", 1);
        cr_assert_eq(kh_compile(f, x->h200 ? ztarget_find("h200") : &t, x->phase, x->pipeline, &g, &d), ZOK,
                     "%s", d.msg);
        unsetenv("ZINC_MOE_GROUPED");
        int grouped = 0;
        for (uint32_t i = 0; i < g->n_nodes; i++)
            grouped += kind_of(g->nodes[i]) >= KM_GROUPED_GATE_UP;
        bool want = x->phase == ZPH_PREFILL && !x->pipeline && !x->gemv;
        cr_assert_eq(grouped, want ? 2 : 0, "%s: %d grouped kernels", m->file, grouped);
        zcg_opts co = {.target = &t,
                       .phase = x->phase,
                       .max_tokens = x->phase == ZPH_DECODE ? 1 : STEP_MAX,
                       .act_f16 = x->f16};
        char what[128];
        snprintf(what, sizeof what, "%s %s %s%s%s%s%s", m->file, zpass_phase_name(x->phase),
                 x->pipeline ? "unfused" : "fused", x->f16 ? " fp16" : "", x->gemv ? " GEMVs" : "",
                 x->h200 ? " h200" : "", x->unroll ? " unrolled" : "");
        check_arg c = {&co, checks, what};
        char un[8];
        snprintf(un, sizeof un, "%d", x->unroll);
        if (x->unroll) setenv("ZINC_MOE_GEMV_UNROLL", un, 1); /* read as the kernels are generated */
        cr_assert_eq(run_steps(g, co.max_tokens, 4321 + v, check_nodes, &c, &d), ZOK, "%s: %s", what, d.msg);
        unsetenv("ZINC_MOE_GEMV_UNROLL");
        zir_graph_free(g);
    }
    gguf_close(f);
}

static void expect_all_kinds(const long checks[KM_N], const char *what) {
    for (int i = 0; i < KM_N; i++)
        cr_expect(checks[i] > 0, "%s: no %s kernel was checked", what, km_name[i]);
}

TestSuite(kernels_moe, .init = open_dev, .fini = close_dev);

Test(kernels_moe, q4km_8_experts_2_used, .timeout = 300) {
    model m = {"kmoe_q4km.gguf", ZMK_Q4_K_M, 256, 256, 8, 2, false};
    long checks[KM_N] = {0};
    check_model(&m, checks);
    expect_all_kinds(checks, m.file);
}

Test(kernels_moe, f32_6_experts_3_used_tail_rows, .timeout = 300) {
    model m = {"kmoe_f32.gguf", ZMK_F32, 72, 40, 6, 3, false};
    long checks[KM_N] = {0};
    check_model(&m, checks);
    expect_all_kinds(checks, m.file);
}

/* Experts 0 to 3 take every token of a step (130 pairs each: nine 16-pair
 * tiles on llvmpipe, the last one partial), experts 4 to 7 none. */
Test(kernels_moe, q8_0_all_tokens_to_four_experts, .timeout = 300) {
    model m = {"kmoe_q80_zero.gguf", ZMK_Q8_0, 128, 96, 8, 4, true};
    long checks[KM_N] = {0};
    check_model(&m, checks);
    expect_all_kinds(checks, m.file);
}

/* More experts than a grouped tile's workgroup has threads (320 against
 * 256), most of them with no pair or one: the tiles' prologue scans the
 * experts' tile counts in two passes and fills the starts of the empty
 * experts between the ranks where the sorted experts step up. */
Test(kernels_moe, f32_320_experts_4_used_mostly_empty, .timeout = 300) {
    model m = {"kmoe_many.gguf", ZMK_F32, 64, 32, 320, 4, false};
    long checks[KM_N] = {0};
    check_model(&m, checks);
    expect_all_kinds(checks, m.file);
}

/* The grouped GEMMs on the matrix units (the default where the target has
 * them, ZINC_MOE_CM=0 the scalar tiles: matmul_cm.glsl with MOE) cannot run on llvmpipe, which has none. What can be checked here
 * is checked: generated for the full h200 profile, the gate+up and down
 * kernels of Q4_K_M experts (q4_K, and q6_K down by llama.cpp's rule)
 * compile with shaderc, the validator accepts the NV module, and the NV to
 * KHR rewrite (what the H200 loads by default and AMD needs) takes it and
 * leaves no NV instruction. The H200 runs them against the interpreter in
 * this file's other tests (scripts/ab-device.sh -t test_kernels_moe). */
Test(kernels_moe, grouped_tensor_core_kernels_compile_and_rewrite, .timeout = 300) {
    model m = {"kmoe_cm.gguf", ZMK_Q4_K_M, 256, 256, 8, 2, false};
    gguf_file *f = make_model(&m);
    const ztarget *t = ztarget_find("h200");
    zir_graph *g;
    zdiag d = {0};
    cr_assert_eq(kh_compile(f, t, ZPH_PREFILL, NULL, &g, &d), ZOK, "%s", d.msg);
    unsetenv("ZINC_MOE_CM"); /* the default */
    zcg_opts co = {.target = t, .phase = ZPH_PREFILL, .max_tokens = 512};
    int built = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        if (kind_of(n) < KM_GROUPED_GATE_UP) continue;
        zarena *a = zarena_new();
        zcg_kernel kn;
        cr_assert_eq(zcg_node(g, n, &co, a, &kn, &d), ZOK, "'%s': %s", n->out->name, d.msg);
        cr_assert(strstr(kn.name, "_cm"), "'%s': %s is not the tensor-core form", n->out->name, kn.name);
        zvk_glsl_opts go = {.name = kn.name, .optimize = true};
        zvk_spirv spv;
        cr_assert_eq(zvk_glsl_compile(a, kn.glsl, strlen(kn.glsl), &go, &spv, &d), ZOK, "%s: %s", kn.name, d.msg);
        cr_assert(zspv_uses_coopmat_nv(spv.words, spv.n_words), "%s: no cooperative matrix", kn.name);
        spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_2);
        spv_const_binary_t bin = {spv.words, spv.n_words};
        spv_diagnostic diag = NULL;
        spv_result_t r = spvValidate(ctx, &bin, &diag);
        cr_expect_eq(r, SPV_SUCCESS, "%s: %s", kn.name, diag && diag->error ? diag->error : "invalid");
        spvDiagnosticDestroy(diag);
        spvContextDestroy(ctx);
        uint32_t *khr;
        size_t nk;
        cr_assert_eq(zspv_coopmat_nv_to_khr(spv.words, spv.n_words, a, &khr, &nk, &d), ZOK, "%s: %s", kn.name,
                     d.msg);
        cr_expect(!zspv_uses_coopmat_nv(khr, nk), "%s: NV left after the rewrite", kn.name);
        built++;
        zarena_free(a);
    }
    cr_expect_eq(built, 2, "grouped kernels built: %d", built);
    zir_graph_free(g);
    gguf_close(f);
}

/* ---- the router's top-k on hand-built logits ------------------------------ */

enum { TK_VOCAB = 64 };

/* Row r of the logit table: uniform in [-4, 4] (r % 4 == 0), a few levels
 * (ties at the max and below), all equal, or one expert at 0 and the rest
 * at -200 (p = 0 after the first: every later pick a tie). */
static zir_graph *topk_graph(int64_t E, int K, uint64_t seed) {
    zir_graph *g = zir_graph_new();
    cr_assert_not_null(g);
    g->hp = (zir_hparams){
        .arch = "hand", .n_layer = 1, .n_embd = (uint32_t)E, .n_vocab = TK_VOCAB, .n_ctx_train = 1 << 16};
    zdim ts[1] = {ZDIM_T}, ws[2] = {TK_VOCAB, E};
    zdiag d = {0};
    zir_value *tok = g->tokens = zir_value_new(g, "tokens", ZR_INPUT, ZT_I32, 1, ts, &d);
    zir_value *w = zir_value_new(g, "router.table", ZR_WEIGHT, ZT_F32, 2, ws, &d);
    cr_assert(tok && w, "%s", d.msg);
    float *p = zarena_alloc(g->arena, sizeof(float) * TK_VOCAB * (size_t)E);
    cr_assert_not_null(p);
    tu_rng r = tu_rng_seed(seed);
    for (int64_t row = 0; row < TK_VOCAB; row++) {
        int64_t hot = (int64_t)(tu_next(&r) % (uint64_t)E);
        for (int64_t e = 0; e < E; e++) {
            float *x = &p[row * E + e];
            switch (row % 4) {
            case 0: *x = tu_uniform(&r, -4.0f, 4.0f); break;
            case 1: *x = 0.5f * (float)(tu_next(&r) % 4) - 1.0f; break;
            case 2: *x = 0.25f; break;
            default: *x = e == hot ? 0.0f : -200.0f;
            }
        }
    }
    w->data = p;
    w->nbytes = sizeof(float) * TK_VOCAB * (uint64_t)E;
    w->layer = 0;
    zir_value *in[2] = {w, tok};
    zir_node *l = zir_node_add(g, ZOP_EMBED, "router_logits", in, 2, NULL, 0, ZG_MLP, &d);
    cr_assert_not_null(l, "%s", d.msg);
    zir_attrs a = {.topk = K};
    zir_node *t = zir_node_add(g, ZOP_MOE_TOPK, "route", &l->out, 1, &a, 0, ZG_MLP, &d);
    cr_assert_not_null(t, "%s", d.msg);
    g->logits = t->out;
    cr_assert_eq(zir_verify(g, &d), ZOK, "%s", d.msg);
    return g;
}

Test(kernels_moe, topk_ties_and_odd_expert_counts, .timeout = 300) {
    static const struct {
        int64_t E;
        int K;
    } cases[] = {{6, 6}, {37, 5}, {128, 8}, {300, 3}};
    static const char *const targets[] = {"llvmpipe", "h200"};
    cr_log_info("device subgroup size %u", dev.dev.prof.subgroup_size);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t j = 0; j < sizeof targets / sizeof targets[0]; j++) {
            zir_graph *g = topk_graph(cases[i].E, cases[i].K, 99 + i);
            ztarget t = *ztarget_find(targets[j]);
            zcg_opts co = {.target = &t, .phase = ZPH_PREFILL, .max_tokens = STEP_MAX};
            char what[96];
            snprintf(what, sizeof what, "top-%d of %lld for %s", cases[i].K, (long long)cases[i].E,
                     targets[j]);
            long checks[KM_N] = {0};
            check_arg c = {&co, checks, what};
            zdiag d = {0};
            cr_assert_eq(run_steps(g, STEP_MAX, 77 + i, check_nodes, &c, &d), ZOK, "%s: %s", what, d.msg);
            cr_assert_eq(checks[KM_TOPK], 8, "%s: %ld steps checked", what, checks[KM_TOPK]);
            zir_graph_free(g);
        }
}
