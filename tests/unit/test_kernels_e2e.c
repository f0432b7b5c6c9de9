/* Whole models on the Vulkan device (llvmpipe in CI) against the CPU
 * reference interpreter: compile with the passes for a target, lower to a
 * plan, execute it with the runtime, and compare the logits of every
 * position, in prefill (chunked) and in decode (the recorded step replayed). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/lower.h"
#include "frontend/arch.h"
#include "frontend/mkmodel.h"
#include "ir/interp.h"
#include "runtime/zrt.h"
#include "testutil.h"

static int cmp_float_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x > y ? -1 : x < y;
}

typedef struct fixture {
    gguf_file *f;
    zir_graph *ref;
    zir_graph *g[ZPLAN_PHASES];
} fixture;

static void make_model(zmk_arch arch, zmk_quant q, const char *name, fixture *x) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = arch, o.quant = q, o.layers = 2, o.hidden = 256, o.ff = 512, o.heads = 4, o.kv_heads = 2;
    o.head_dim = 64, o.vocab = 320, o.seed = 11;
    zdiag d = {0};
    const char *path = tu_tmp(name);
    cr_assert_eq(zmk_write(&o, path, NULL, &d), ZOK, "%s", d.msg);
    cr_assert_eq(gguf_open(path, &x->f, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zir_build_from_gguf(x->f, &x->ref, &d), ZOK, "%s", d.msg);
}

/* Compiles both phases with pipeline (NULL: the default) for target. */
static zplan *compile(fixture *x, const char *target, const char *pipeline, int64_t chunk, int64_t ctx) {
    zdiag d = {0};
    const ztarget *named = ztarget_find(target);
    cr_assert_not_null(named);
    /* Another target's choices, sized for shared memory every Vulkan device
     * here has (llvmpipe: 32 KiB): the executor refuses kernels sized beyond
     * the device, as it should. */
    ztarget capped = *named;
    if (capped.smem_bytes > 32768) capped.smem_bytes = 32768;
    const ztarget *t = &capped;
    for (int ph = 0; ph < ZPLAN_PHASES; ph++) {
        cr_assert_eq(zir_build_from_gguf(x->f, &x->g[ph], &d), ZOK, "%s", d.msg);
        zpass_opts po = {.target = t,
                         .phase = ph == ZPLAN_DECODE ? ZPH_DECODE : ZPH_PREFILL,
                         .token_tile = t->prefill_tile,
                         .ctx = ctx,
                         .fuse_threshold = t->fuse_threshold,
                         .verify_each = true};
        cr_assert_eq(zpass_run_pipeline(x->g[ph], pipeline, NULL, &po, &d), ZOK, "%s", d.msg);
    }
    zlower_opts lo = {.target = t,
                      .max_tokens = chunk,
                      .ctx = ctx,
                      .gguf_path = x->f->path,
                      .gguf_base = x->f->base,
                      .gguf_size = x->f->size,
                      .gguf_hash = gguf_identity_hash(x->f)};
    zplan *p = NULL;
    cr_assert_eq(zlower(x->g, &lo, &p, &d), ZOK, "%s", d.msg);
    return p;
}

static void drop(fixture *x) {
    for (int ph = 0; ph < ZPLAN_PHASES; ph++)
        zir_graph_free(x->g[ph]);
    zir_graph_free(x->ref);
    gguf_close(x->f);
}

/* Every logit within tol of the row's RMS; tol justified per call. */
static double compare(const float *got, const float *want, int n, int V, double tol, const char *what) {
    double worst = 0;
    for (int t = 0; t < n; t++) {
        double rms = 0;
        for (int i = 0; i < V; i++)
            rms += (double)want[t * V + i] * want[t * V + i];
        rms = sqrt(rms / V) + 1e-30;
        for (int i = 0; i < V; i++) {
            double e = fabs((double)got[t * V + i] - want[t * V + i]) / rms;
            cr_assert(e <= tol, "%s: row %d logit %d: GPU %.6g, interpreter %.6g (error %.3g of RMS > %.1g)",
                      what, t, i, got[t * V + i], want[t * V + i], e, tol);
            if (e > worst) worst = e;
        }
    }
    return worst;
}

/* The GPU's top-k of the last step against its own row of logits: at least
 * ZPLAN_TOPK_K candidates, each logit as stated, every one at or above the
 * K-th largest, and none of the larger ones missing. */
static void check_top(zrt *rt, const float *row, int V) {
    zrt_sample_cand top[ZPLAN_TOPK_CAP];
    size_t n = 0;
    zdiag d = {0};
    cr_assert_eq(zrt_top(rt, top, &n, &d), ZOK, "%s", d.msg);
    float *sorted = malloc(sizeof(float) * V);
    memcpy(sorted, row, sizeof(float) * V);
    qsort(sorted, V, sizeof(float), cmp_float_desc);
    float kth = sorted[ZPLAN_TOPK_K - 1];
    int above = 0;
    for (int i = 0; i < V; i++)
        above += row[i] >= kth;
    cr_assert_eq((int)n, above, "top-k kept %zu candidates, %d logits are >= the %d-th largest", n, above,
                 ZPLAN_TOPK_K);
    for (size_t i = 0; i < n; i++) {
        cr_assert(top[i].id >= 0 && top[i].id < V);
        cr_assert_eq(top[i].logit, row[top[i].id], "candidate %d: logit %g, row says %g", top[i].id,
                     top[i].logit, row[top[i].id]);
        cr_assert(top[i].logit >= kth);
    }
    free(sorted);
}

static void run_model(zmk_arch arch, zmk_quant q, const char *target, const char *pipeline,
                      const char *name) {
    fixture x = {0};
    make_model(arch, q, name, &x);
    enum { N = 13, CHUNK = 5, CTX = 32 };
    int V = x.ref->hp.n_vocab;
    tu_rng r = tu_rng_seed(5);
    int32_t tok[N];
    for (int i = 0; i < N; i++)
        tok[i] = (int32_t)(tu_next(&r) % (uint64_t)V);
    float *want = malloc(sizeof(float) * N * V), *got = malloc(sizeof(float) * N * V);
    zdiag d = {0};
    zir_interp *it;
    cr_assert_eq(zir_interp_new(x.ref, CTX, &it, &d), ZOK);
    cr_assert_eq(zir_interp_step(it, tok, N, want, &d), ZOK, "%s", d.msg);
    zir_interp_free(it);

    zrt *rt;
    zrt_opts ro = {0};
    cr_assert_eq(zrt_open_plan(compile(&x, target, pipeline, CHUNK, CTX), &ro, &rt, &d), ZOK, "%s", d.msg);
    for (int i = 0; i < N * V; i++)
        got[i] = NAN;
    cr_assert_eq(zrt_eval(rt, tok, N, got, &d), ZOK, "%s", d.msg); /* chunks of 5, 5, 3 */
    /* fp32 activations on both sides; the GPU sums in other orders, and its
     * exp/rsqrt differ in the last bits: 1e-3 of the RMS is far below what a
     * wrong kernel gives (O(1)) and above accumulated fp32 rounding. */
    double e1 = compare(got, want, N, V, 1e-3, "prefill");
    check_top(rt, got + (size_t)(N - 1) * V, V);
    zrt_reset(rt);
    for (int i = 0; i < N * V; i++)
        got[i] = NAN;
    for (int t = 0; t < N; t++)
        cr_assert_eq(zrt_run(rt, ZPLAN_DECODE, &tok[t], 1, got + t * V, &d), ZOK, "%s", d.msg);
    double e2 = compare(got, want, N, V, 1e-3, "decode");
    check_top(rt, got + (size_t)(N - 1) * V, V);
    cr_log_info("%s on %s (%s): prefill %.2g, decode %.2g of RMS", name, target,
                pipeline ? pipeline : "default", e1, e2);
    zrt_close(rt);
    free(want);
    free(got);
    drop(&x);
}

Test(e2e, qwen3_q4_k_m_fused) {
    run_model(ZMK_QWEN3, ZMK_Q4_K_M, "llvmpipe", NULL, "e2e-qwen3.gguf");
}
Test(e2e, qwen3_q4_k_m_unfused) {
    run_model(ZMK_QWEN3, ZMK_Q4_K_M, "llvmpipe", "shape,width", "e2e-qwen3u.gguf");
}
Test(e2e, qwen3_h200_choices) {
    run_model(ZMK_QWEN3, ZMK_Q4_K_M, "h200", NULL, "e2e-qwen3h.gguf");
}
Test(e2e, llama_q8_0_fused) {
    run_model(ZMK_LLAMA, ZMK_Q8_0, "llvmpipe", NULL, "e2e-llama.gguf");
}
Test(e2e, llama_f16_unfused) {
    run_model(ZMK_LLAMA, ZMK_F16, "llvmpipe", "shape,width", "e2e-llamau.gguf");
}
Test(e2e, qwen2_q4_k_m_fused) {
    run_model(ZMK_QWEN2, ZMK_Q4_K_M, "llvmpipe", NULL, "e2e-qwen2.gguf");
}
Test(e2e, qwen2_f32_unfused) {
    run_model(ZMK_QWEN2, ZMK_F32, "llvmpipe", "shape,width", "e2e-qwen2u.gguf");
}
