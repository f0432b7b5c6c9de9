/* Whole models on the Vulkan device (llvmpipe in CI) against the CPU
 * reference interpreter: compile with the passes for a target, lower to a
 * plan, execute it with the runtime, and compare the logits of every
 * position, in prefill (chunked) and in decode (the recorded step replayed);
 * then the plan's top-k kernel alone, on rows made to be hard. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/codegen.h"
#include "backend/lower.h"
#include "backend/plan.h"
#include "backend/shaderc.h"
#include "frontend/arch.h"
#include "frontend/mkmodel.h"
#include "ir/interp.h"
#include "kernel_harness.h"
#include "runtime/zrt.h"
#include "testutil.h"

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
    o.full_attn = 2; /* qwen35: a delta-net layer, then a gated attention layer */
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
    /* nor matrix units: prefill keeps fp32 matmuls, as the reference does
     * (mm-f16's rounding is checked kernel by kernel in test_kernels_matmul) */
    capped.coopmat = false;
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

/* The GPU's top-k of the last step against its own row of logits
 * (tu_top_matches). */
static void check_top(zrt *rt, const float *row, int V) {
    zrt_sample_cand top[ZPLAN_TOPK_CAP];
    size_t n = 0;
    zdiag d = {0};
    char why[256];
    cr_assert_eq(zrt_top(rt, top, &n, &d), ZOK, "%s", d.msg);
    cr_assert(tu_top_matches(top, n, row, V, ZPLAN_TOPK_K, why, sizeof why), "top-k: %s", why);
}

/* n random token ids (seeded) into tok, and the reference interpreter's
 * logits for them in one step (malloc'd, [n][vocab]). */
static float *reference(fixture *x, uint64_t seed, int32_t *tok, int n, int ctx) {
    int V = x->ref->hp.n_vocab;
    tu_rng r = tu_rng_seed(seed);
    for (int i = 0; i < n; i++)
        tok[i] = (int32_t)(tu_next(&r) % (uint64_t)V);
    float *want = malloc(sizeof(float) * (size_t)n * (size_t)V);
    cr_assert_not_null(want);
    zdiag d = {0};
    zir_interp *it;
    cr_assert_eq(zir_interp_new(x->ref, ctx, &it, &d), ZOK);
    cr_assert_eq(zir_interp_step(it, tok, n, want, &d), ZOK, "%s", d.msg);
    zir_interp_free(it);
    return want;
}

/* Whether the compiled graph rounds some GEMV's x to int8 (attr.gemv_q8:
 * the h200 profile's choice in decode). */
static bool has_q8(const zir_graph *g) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        if (n->op == ZOP_MATMUL && n->attr.gemv_q8) return true;
        for (int j = 0; j < n->n_body; j++)
            if (n->body[j]->op == ZOP_MATMUL && n->body[j]->attr.gemv_q8) return true;
    }
    return false;
}

/* The decode graph as compiled, interpreted one token a step: where it
 * rounds x to int8 the reference must round it the same way (the
 * unfused graph does not). */
static void reference_decode(const zir_graph *g, const int32_t *tok, int n, int ctx, int V, float *want) {
    zdiag d = {0};
    zir_interp *it;
    cr_assert_eq(zir_interp_new(g, ctx, &it, &d), ZOK, "%s", d.msg);
    for (int t = 0; t < n; t++)
        cr_assert_eq(zir_interp_step(it, &tok[t], 1, want + (size_t)t * V, &d), ZOK, "%s", d.msg);
    zir_interp_free(it);
}

/* Dispatches of schedule ph whose kernel's name starts with prefix. */
static int dispatches_of(const zplan *p, int ph, const char *prefix) {
    int n = 0;
    for (uint32_t i = p->sched[ph].first; i < p->sched[ph].first + p->sched[ph].count; i++)
        n += !strncmp(zplan_str(p, p->kernels[p->dispatches[i].kernel].name), prefix, strlen(prefix));
    return n;
}

/* Returns the larger of the prefill and decode errors (of the RMS). */
static double run_model(zmk_arch arch, zmk_quant q, const char *target, const char *pipeline,
                        const char *name) {
    fixture x = {0};
    make_model(arch, q, name, &x);
    enum { N = 13, CHUNK = 5, CTX = 32 };
    /* The plan stores the KV cache as the kv-type pass says (f16 for h200):
     * the reference rounds what it stores the same way. */
    if (!pipeline || strstr(pipeline, "kv-type")) {
        zpass_opts po = {.target = ztarget_find(target), .phase = ZPH_PREFILL, .ctx = CTX};
        zdiag kd = {0};
        cr_assert_eq(zpass_run_pipeline(x.ref, "kv-type", NULL, &po, &kd), ZOK, "%s", kd.msg);
    }
    int V = x.ref->hp.n_vocab;
    int32_t tok[N];
    float *want = reference(&x, 5, tok, N, CTX), *got = malloc(sizeof(float) * N * V);
    zdiag d = {0};

    zrt *rt;
    zrt_opts ro = {0};
    zplan *p = compile(&x, target, pipeline, CHUNK, CTX);
    if (arch == ZMK_QWEN35 || arch == ZMK_QWEN35MOE) { /* prefill's delta rule is the chunked scan */
        int layers = x.ref->hp.n_layer / 2;            /* every other layer is a delta-net layer */
        cr_assert_eq(dispatches_of(p, ZPLAN_PREFILL, "delta_net_chunk_"), layers);
        cr_assert_eq(dispatches_of(p, ZPLAN_DECODE, "delta_net_hk"), layers, "decode: the token kernel");
    }
    cr_assert_eq(zrt_open_plan(p, &ro, &rt, &d), ZOK, "%s", d.msg);
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
    bool q8 = has_q8(x.g[ZPLAN_DECODE]);
    if (!strcmp(target, "h200") && q == ZMK_Q4_K_M) cr_expect(q8, "the h200 profile's decode GEMVs take int8 x");
    if (q8) reference_decode(x.g[ZPLAN_DECODE], tok, N, CTX, V, want);
    /* With int8 x a last-bit difference in x can flip one element's
     * rounding, a step of 1/127 of its block's largest, and the random
     * layers carry it on: rows without a flip agree to 1e-6, those with
     * one to 2-3e-2 (measured), where a wrong kernel is O(1). Each kernel
     * alone is checked at fp32 tolerance (kernels_matmul/q4_K_int8_x). */
    double e2 = q8 ? compare(got, want, N, V, 6e-2, "decode (int8 x, against the compiled graph)")
                   : compare(got, want, N, V, 1e-3, "decode");
    check_top(rt, got + (size_t)(N - 1) * V, V);
    cr_log_info("%s on %s (%s): prefill %.2g, decode %.2g of RMS", name, target,
                pipeline ? pipeline : "default", e1, e2);
    zrt_close(rt);
    free(want);
    free(got);
    drop(&x);
    return e1 > e2 ? e1 : e2;
}

Test(e2e, qwen3_q4_k_m_fused) {
    run_model(ZMK_QWEN3, ZMK_Q4_K_M, "llvmpipe", NULL, "e2e-qwen3.gguf");
}
Test(e2e, qwen3_q4_k_m_unfused) {
    run_model(ZMK_QWEN3, ZMK_Q4_K_M, "llvmpipe", "shape,width", "e2e-qwen3u.gguf");
}
Test(e2e, qwen3_h200_choices) {
    /* decode takes int8 x there (the h200 profile's gemv_int8) */
    run_model(ZMK_QWEN3, ZMK_Q4_K_M, "h200", NULL, "e2e-qwen3h.gguf");
}
/* The activations that only fp16 matmuls read kept in fp32 (mm-f16's
 * keep_f16 off, ZINC_X16=0; qwen3_h200_choices keeps the norms, attention's
 * output and the SwiGLU product of prefill in halves, the default). */
Test(e2e, qwen3_h200_fp32_x) {
    setenv("ZINC_X16", "0", 1);
    run_model(ZMK_QWEN3, ZMK_Q4_K_M, "h200", NULL, "e2e-qwen3x.gguf");
    unsetenv("ZINC_X16");
}
/* An f16 KV cache behind the staged kernels: the stores and the scores and
 * mix steps read and write the cache in half precision. */
Test(e2e, llama_f16_kv_unfused) {
    run_model(ZMK_LLAMA, ZMK_Q8_0, "h200", "shape,width,kv-type", "e2e-llamakv.gguf");
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
/* qwen3moe (8 experts, 2 used): the router's top-k, the expert GEMVs and the
 * weighted sum, fused by fuse-moe or one op at a time. With f32 weights the
 * plan is within fp32 rounding of the interpreter. */
Test(e2e, qwen3moe_q4_k_m_fused) {
    run_model(ZMK_QWEN3MOE, ZMK_Q4_K_M, "llvmpipe", NULL, "e2e-moe.gguf");
}
Test(e2e, qwen3moe_f32_fused) {
    double e = run_model(ZMK_QWEN3MOE, ZMK_F32, "llvmpipe", NULL, "e2e-moef.gguf");
    cr_expect_leq(e, 2e-5, "qwen3moe f32: %.3g of the RMS from the interpreter", e);
}
Test(e2e, qwen3moe_f32_unfused) {
    double e = run_model(ZMK_QWEN3MOE, ZMK_F32, "llvmpipe", "shape,width", "e2e-moeu.gguf");
    cr_expect_leq(e, 2e-5, "qwen3moe f32 unfused: %.3g of the RMS from the interpreter", e);
}

/* qwen35 (a gated delta-net layer and a gated attention layer) and
 * qwen35moe: the conv and delta-rule states carried across the prefill
 * chunks of 5, 5 and 3 tokens (each longer than the conv's 3-row window)
 * and across the 13 decode steps, after a reset in between; prefill's
 * delta rule is the chunked scan (one partial chunk a step), decode's the
 * token kernel (run_model checks the plan's kernels); imrope, the
 * sigmoid gate on the attention, the shared expert. The delta-net's ops are
 * one kernel each with or without the fusion passes (the fused attention,
 * MLP and matmul kernels have unfused runs of their own above), so only the
 * default pipeline runs, to keep CI's time. */
Test(e2e, qwen35_f32_fused) {
    double e = run_model(ZMK_QWEN35, ZMK_F32, "llvmpipe", NULL, "e2e-q35f.gguf");
    cr_expect_leq(e, 2e-5, "qwen35 f32: %.3g of the RMS from the interpreter", e);
}
/* Chunks of 4 tokens (the knob): the prefill steps of 5, 5 and 3 tokens
 * each end in a partial chunk, and the state passes from chunk to chunk
 * inside a step as well as from step to step. */
Test(e2e, qwen35_f32_chunks_of_4) {
    setenv("ZINC_DELTA_CHUNK", "4", 1);
    double e = run_model(ZMK_QWEN35, ZMK_F32, "llvmpipe", NULL, "e2e-q35c4.gguf");
    cr_expect_leq(e, 2e-5, "qwen35 f32, chunks of 4: %.3g of the RMS from the interpreter", e);
}
Test(e2e, qwen35_q4_k_m_fused) {
    run_model(ZMK_QWEN35, ZMK_Q4_K_M, "llvmpipe", NULL, "e2e-q35.gguf");
}
Test(e2e, qwen35moe_f32_fused) {
    double e = run_model(ZMK_QWEN35MOE, ZMK_F32, "llvmpipe", NULL, "e2e-q35moef.gguf");
    cr_expect_leq(e, 2e-5, "qwen35moe f32: %.3g of the RMS from the interpreter", e);
}
Test(e2e, qwen35moe_q4_k_m_fused) {
    run_model(ZMK_QWEN35MOE, ZMK_Q4_K_M, "llvmpipe", NULL, "e2e-q35moe.gguf");
}

/* Two sequences of a qwen35 model interleaved step by step: each has its
 * own conv and delta-rule states (and KV cache), so each gives the logits it
 * gives alone. The zrt's own sequence prefills 6 tokens while the second
 * decodes, then both decode in turn. */
Test(e2e, qwen35_sequences_keep_their_own_states) {
    fixture x = {0};
    make_model(ZMK_QWEN35, ZMK_F32, "e2e-q35seq.gguf", &x);
    enum { N = 9, CTX = 32 };
    int V = x.ref->hp.n_vocab;
    int32_t ta[N], tb[N];
    float *wa = reference(&x, 21, ta, N, CTX), *wb = reference(&x, 22, tb, N, CTX);
    float *ga = malloc(sizeof(float) * N * V), *gb = malloc(sizeof(float) * N * V);
    for (int i = 0; i < N * V; i++)
        ga[i] = gb[i] = NAN;
    zdiag d = {0};
    zrt *rt;
    zrt_opts ro = {0};
    cr_assert_eq(zrt_open_plan(compile(&x, "llvmpipe", NULL, 4, CTX), &ro, &rt, &d), ZOK, "%s", d.msg);
    zrt_seq *b;
    cr_assert_eq(zrt_seq_new(rt, &b, &d), ZOK, "%s", d.msg);
    for (int t = 0; t < N; t++) {
        zrt_seq_use(rt, b);
        cr_assert_eq(zrt_run(rt, ZPLAN_DECODE, &tb[t], 1, gb + t * V, &d), ZOK, "%s", d.msg);
        zrt_seq_use(rt, NULL);
        int at = t < 2 ? 4 * t : t + 4, n = t == 0 ? 4 : t == 1 ? 2 : 1; /* a: 4 + 2 tokens, then 1 */
        if (at < N)
            cr_assert_eq(zrt_run(rt, n > 1 ? ZPLAN_PREFILL : ZPLAN_DECODE, ta + at, n, ga + at * V, &d), ZOK,
                         "%s", d.msg);
    }
    compare(ga, wa, N, V, 1e-3, "sequence a");
    compare(gb, wb, N, V, 1e-3, "sequence b");
    zrt_seq_free(rt, b);
    zrt_close(rt);
    free(wa), free(wb), free(ga), free(gb);
    drop(&x);
}

/* Sampling needs the last row only: without a logits buffer to fill, the
 * executor asks for one row and the prefill logits GEMM skips the tiles
 * before it (40 tokens in one step are three 16-token tiles on llvmpipe).
 * The last row must equal the one computed with every row asked for, to
 * the bit (the same tile computes it), and the interpreter's. */
Test(e2e, prefill_logits_last_row_only) {
    fixture x = {0};
    make_model(ZMK_QWEN3, ZMK_Q4_K_M, "e2e-last.gguf", &x);
    enum { N = 40, CTX = 48 };
    int V = x.ref->hp.n_vocab;
    int32_t tok[N];
    float *want = reference(&x, 9, tok, N, CTX), *all = malloc(sizeof(float) * N * V),
          *last = malloc(sizeof(float) * V);
    zdiag d = {0};
    zrt *rt;
    zrt_opts ro = {0};
    cr_assert_eq(zrt_open_plan(compile(&x, "llvmpipe", NULL, N, CTX), &ro, &rt, &d), ZOK, "%s", d.msg);
    /* Other tokens first, every row: a skipped tile would leave their logits. */
    int32_t other[N];
    for (int i = 0; i < N; i++)
        other[i] = tok[N - 1 - i] ^ 1;
    cr_assert_eq(zrt_eval(rt, other, N, all, &d), ZOK, "%s", d.msg);
    zrt_reset(rt);
    for (int i = 0; i < V; i++)
        last[i] = NAN;
    cr_assert_eq(zrt_eval(rt, tok, N, NULL, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zrt_last_logits(rt, last, &d), ZOK, "%s", d.msg);
    check_top(rt, last, V);
    zrt_reset(rt);
    cr_assert_eq(zrt_eval(rt, tok, N, all, &d), ZOK, "%s", d.msg);
    compare(all, want, N, V, 1e-3, "all rows");
    for (int i = 0; i < V; i++)
        cr_assert(last[i] == all[(size_t)(N - 1) * V + i],
                  "logit %d of the last row: %.9g alone, %.9g with all rows", i, last[i],
                  all[(size_t)(N - 1) * V + i]);
    zrt_close(rt);
    free(want);
    free(all);
    free(last);
    drop(&x);
}

/* ---- the top-k kernel alone, on rows made to be hard ---------------------
 *
 * The plan's top-k dispatch (backend/glsl/topk.glsl) on the device, with
 * rows no model gives: vocabularies smaller than K, smaller than a slice and
 * not a multiple of it; every logit equal; hundreds of ties at the K-th
 * place, spread over the slices or all in one (whose list then overflows);
 * NaN, infinities, signed zeros, all-negative and sorted rows. Each result
 * is checked exactly: `total` is the number of logits at or above the K-th
 * largest, `count` is min(total, cap), and the candidates are distinct
 * logits of the row at or above it (all of them when total <= cap). */

/* The kernel's order: larger float, larger key; NaN above +inf, -NaN below -inf. */
static uint32_t order_key(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

static int cmp_u32_desc(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x > y ? -1 : x < y;
}

static void check_topk_exact(const uint32_t *t, const float *row, int V, const char *what) {
    uint32_t *keys = malloc(sizeof(uint32_t) * (size_t)V);
    for (int i = 0; i < V; i++)
        keys[i] = order_key(row[i]);
    qsort(keys, (size_t)V, sizeof *keys, cmp_u32_desc);
    uint32_t kth = V >= ZPLAN_TOPK_K ? keys[ZPLAN_TOPK_K - 1] : 0;
    uint32_t total = 0;
    for (int i = 0; i < V; i++)
        total += keys[i] >= kth;
    uint32_t count = total < ZPLAN_TOPK_CAP ? total : ZPLAN_TOPK_CAP;
    cr_assert_eq(t[1], total, "%s: total %u, %u logits are >= the %d-th largest", what, t[1], total,
                 ZPLAN_TOPK_K);
    cr_assert_eq(t[0], count, "%s: count %u, expected %u (total %u)", what, t[0], count, total);
    char *seen = calloc((size_t)V, 1);
    for (uint32_t i = 0; i < t[0]; i++) {
        uint32_t id = t[2 + 2 * i], bits = t[3 + 2 * i], want;
        cr_assert_lt(id, (uint32_t)V, "%s: candidate %u: id %u", what, i, id);
        memcpy(&want, &row[id], 4);
        cr_assert_eq(bits, want, "%s: candidate %u (id %u): bits %08x, row has %08x", what, i, id, bits,
                     want);
        cr_assert_geq(order_key(row[id]), kth, "%s: candidate %u (id %u) is below the threshold", what, i,
                      id);
        cr_assert_not(seen[id], "%s: id %u listed twice", what, id);
        seen[id] = 1;
    }
    free(seen);
    free(keys);
}

/* The top-k kernel compiled for vocabulary V, its buffers and pipeline. The
 * step has T = 2 rows: the kernel must read the last one (row 0 holds 1e30
 * everywhere, which would show). */
typedef struct topk_rig {
    kh_ctx k;
    zarena *a;
    zcg_kernel kn;
    zvk_buffer step, logits, top, scratch;
    zvk_pipeline p;
    VkDescriptorPool pool;
    VkDescriptorSet set;
    int V;
} topk_rig;

static void topk_open(topk_rig *r, int V) {
    char err[256];
    zdiag d = {0};
    memset(r, 0, sizeof *r);
    r->V = V;
    cr_assert(kh_open(&r->k, err, sizeof err), "no Vulkan device: %s", err);
    zir_value lv = {0};
    zir_graph g = {.hp = {.n_vocab = V}, .logits = &lv};
    zcg_opts o = {.target = ztarget_find("llvmpipe"), .phase = ZPH_DECODE, .max_tokens = 1};
    cr_assert_not_null(r->a = zarena_new());
    cr_assert_eq(zcg_topk(&g, &o, r->a, &r->kn, &d), ZOK, "%s", d.msg);
    cr_assert_eq(r->kn.n_bind, 3);
    zvk_glsl_opts go = {.name = r->kn.name, .optimize = true};
    zvk_spirv spv;
    cr_assert_eq(zvk_glsl_compile(r->a, r->kn.glsl, strlen(r->kn.glsl), &go, &spv, &d), ZOK, "%s", d.msg);
    zvk_device *dev = &r->k.dev;
    cr_assert_eq(zvk_buffer_create(dev, 16, ZVK_MEM_HOST, "step", &r->step, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_buffer_create(dev, 8 * (uint64_t)V, ZVK_MEM_HOST, "logits", &r->logits, &d), ZOK);
    cr_assert_eq(zvk_buffer_create(dev, ZPLAN_TOPK_BYTES, ZVK_MEM_HOST, "topk", &r->top, &d), ZOK);
    uint64_t sb = r->kn.bind[2].scratch_bytes;
    cr_assert_eq(zvk_buffer_create(dev, sb, ZVK_MEM_HOST, "scratch", &r->scratch, &d), ZOK);
    memset(r->scratch.map, 0, sb); /* as the executor leaves scratch at load */
    const uint32_t rows[4] = {2, 1, 2, 0};
    memcpy(r->step.map, rows, sizeof rows);
    for (int i = 0; i < V; i++)
        ((float *)r->logits.map)[i] = 1e30f;
    zvk_pipeline_desc pd = {.name = r->kn.name, .spirv = spv.words, .n_words = spv.n_words, .n_buffers = 4};
    cr_assert_eq(zvk_pipeline_create(dev, &pd, &r->p, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_desc_pool_create(dev, 1, 4, &r->pool, &d), ZOK, "%s", d.msg);
    zvk_binding b[4] = {{&r->step, 0, 0}, {&r->logits, 0, 0}, {&r->top, 0, 0}, {&r->scratch, 0, 0}};
    cr_assert_eq(zvk_desc_set(dev, r->pool, &r->p, b, 4, &r->set, &d), ZOK, "%s", d.msg);
}

static void topk_close(topk_rig *r) {
    zvk_desc_pool_destroy(&r->k.dev, &r->pool);
    zvk_pipeline_destroy(&r->k.dev, &r->p);
    zvk_buffer *bufs[] = {&r->step, &r->logits, &r->top, &r->scratch};
    for (int i = 0; i < 4; i++)
        zvk_buffer_destroy(&r->k.dev, bufs[i]);
    zarena_free(r->a);
    kh_close(&r->k);
}

/* One dispatch over row on the rig's buffers: rows run one after another
 * share the scratch, as replays of a recorded step do. */
static void topk_run(topk_rig *r, const float *row, const char *what) {
    zdiag d = {0};
    memcpy((float *)r->logits.map + r->V, row, sizeof(float) * (size_t)r->V);
    memset(r->top.map, 0xff, ZPLAN_TOPK_BYTES);
    zvk_cmd c = {0};
    cr_assert_eq(zvk_cmd_begin(&r->k.dev, &c, &d), ZOK, "%s", d.msg);
    zvk_cmd_dispatch(&c, &r->p, r->set, NULL, (uint32_t)zcg_affine_eval(r->kn.groups[0], 2),
                     (uint32_t)zcg_affine_eval(r->kn.groups[1], 2),
                     (uint32_t)zcg_affine_eval(r->kn.groups[2], 2));
    cr_assert_eq(zvk_cmd_run(&r->k.dev, &c, &d), ZOK, "%s", d.msg);
    cr_log_info("%s: %s: count %u, total %u", r->kn.name, what, ((uint32_t *)r->top.map)[0],
                ((uint32_t *)r->top.map)[1]);
    check_topk_exact(r->top.map, row, r->V, what);
}

/* Distinct-ish values, both signs: N(0, 1) * 8 - 2. */
static void fill_normal(float *row, int V, uint64_t seed) {
    tu_rng g = tu_rng_seed(seed);
    for (int i = 0; i < V; i++)
        row[i] = tu_normal(&g) * 8.0f - 2.0f;
}

/* n logits set to v at ids from `at`, `step` apart (wrapping), over a row
 * that fill_normal made and whose top 64 - `above` values are lowered below v:
 * so that the K-th largest is v with n ties. */
static void plant_ties(float *row, int V, int n, float v, int at, int step, int above) {
    for (int i = 0; i < V; i++)
        if (row[i] >= v) row[i] = v - 1.0f - (float)(i % 7);
    for (int i = 0; i < above; i++)
        row[(i * 37 + 11) % V] = v + 1.0f + (float)i;
    for (int i = 0; i < n; i++)
        row[(at + i * step) % V] = v;
}

/* Rows of vocabulary V: random, ties spread and in one slice (below and
 * above the cap), all equal, special values, all negative, sorted. */
static void topk_rows(int V) {
    topk_rig r;
    topk_open(&r, V);
    float *row = malloc(sizeof(float) * (size_t)V);
    struct {
        int n, at, step;
        const char *what;
    } ties[] = {{100, 3, 97, "100 ties at the K-th, spread"},
                {100, 5, 1, "100 ties at the K-th, one slice"},
                {300, 1, 61, "300 ties at the K-th, spread"},
                {300, 0, 1, "300 ties at the K-th, adjacent"},
                {700, 2, 1, "700 ties at the K-th, adjacent"}};
    for (int rep = 0; rep < 2; rep++) {
        fill_normal(row, V, 100 + (uint64_t)rep);
        topk_run(&r, row, "normal");
    }
    for (size_t t = 0; t < sizeof ties / sizeof ties[0]; t++) {
        fill_normal(row, V, 7);
        plant_ties(row, V, ties[t].n < V ? ties[t].n : V, 3.25f, ties[t].at, ties[t].step, 40);
        topk_run(&r, row, ties[t].what);
    }
    for (int i = 0; i < V; i++)
        row[i] = 1.5f;
    topk_run(&r, row, "all equal");
    fill_normal(row, V, 9);
    const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, INFINITY, NAN};
    for (int i = 0; i < 8; i++)
        row[(i * 131 + 17) % V] = special[i];
    topk_run(&r, row, "NaN, infinities, signed zeros");
    for (int i = 0; i < V; i++)
        row[i] = -1000.0f - fabsf(row[i]);
    topk_run(&r, row, "all negative");
    for (int i = 0; i < V; i++)
        row[i] = (float)i * 0.25f - 77.0f;
    topk_run(&r, row, "ascending");
    for (int i = 0; i < V; i++)
        row[i] = -(float)i * 0.25f;
    topk_run(&r, row, "descending");
    free(row);
    topk_close(&r);
}

Test(topk, vocab_below_k) {
    topk_rows(40);
}
Test(topk, vocab_below_a_slice) {
    topk_rows(200);
}
Test(topk, vocab_of_whole_slices) {
    topk_rows(512);
}
Test(topk, vocab_with_a_partial_slice) {
    topk_rows(5003);
}
Test(topk, vocab_151936) {
    topk_rows(151936);
}
Test(topk, vocab_262144_wider_workgroups) {
    topk_rows(262144); /* 512 threads a workgroup: 256 would hold too many keys a thread */
}
Test(topk, vocab_beyond_the_merge) {
    zir_value lv = {0};
    zir_graph g = {.hp = {.n_vocab = 4000000}, .logits = &lv};
    zcg_opts o = {.target = ztarget_find("llvmpipe")};
    zarena *a = zarena_new();
    zcg_kernel k;
    zdiag d = {0};
    cr_assert_eq(zcg_topk(&g, &o, a, &k, &d), ZE_UNSUPPORTED);
    cr_assert(strstr(d.msg, "4000000 logits"), "%s", d.msg);
    zarena_free(a);
}
