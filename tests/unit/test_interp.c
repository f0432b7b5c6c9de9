/* The reference interpreter against the naive forward pass (tests/unit/naive.c)
 * for every architecture, in prefill, in decode and in chunked prefill. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "frontend/arch.h"
#include "frontend/mkmodel.h"
#include "ir/interp.h"
#include "naive.h"
#include "testutil.h"

typedef struct model {
    gguf_file *f;
    zir_graph *g;
} model;

/* qwen3moe's expert count, experts used and expert width (defaults 8, 2, 256). */
static uint32_t moe_shape[3];

static model make(zmk_arch arch, zmk_quant q, bool tied, uint64_t seed, const char *name) {
    zmk_opts o;
    zmk_defaults(&o);
    if (moe_shape[0]) o.experts = moe_shape[0], o.experts_used = moe_shape[1], o.expert_ff = moe_shape[2];
    o.arch = arch;
    o.quant = q;
    o.tied = tied;
    o.seed = seed;
    o.layers = 2;
    o.hidden = 256;
    o.ff = 768;
    o.heads = 4;
    o.kv_heads = 2;
    o.head_dim = 64;
    o.vocab = 600;
    zdiag d = {0};
    const char *path = tu_tmp(name);
    cr_assert_eq(zmk_write(&o, path, NULL, &d), ZOK, "%s", d.msg);
    model m = {0};
    cr_assert_eq(gguf_open(path, &m.f, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zir_build_from_gguf(m.f, &m.g, &d), ZOK, "%s", d.msg);
    return m;
}

static void drop(model *m) {
    zir_graph_free(m->g);
    gguf_close(m->f);
}

/* Compares every element against the double-precision naive result. The
 * bound: fp32 accumulation over at most 768 terms through 2 layers gives
 * relative errors near 1e-6; 1e-5 of the row's RMS leaves headroom without
 * hiding a real bug (a wrong RoPE pair or a missing norm moves logits by O(1)). */
static void expect_close(const float *got, const double *want, int n, int V, const char *what) {
    double worst = 0;
    for (int t = 0; t < n; t++) {
        double rms = 0;
        for (int i = 0; i < V; i++)
            rms += want[(size_t)t * V + i] * want[(size_t)t * V + i];
        rms = sqrt(rms / V);
        cr_assert(rms > 1e-3, "%s: degenerate logits at row %d", what, t);
        for (int i = 0; i < V; i++) {
            double e = fabs(got[(size_t)t * V + i] - want[(size_t)t * V + i]) / rms;
            if (e > worst) worst = e;
            cr_assert(e < 1e-5, "%s: row %d logit %d: got %.7g, naive %.7g (error %.3g of the row RMS)", what,
                      t, i, got[(size_t)t * V + i], want[(size_t)t * V + i], e);
        }
    }
    cr_log_info("%s: worst error %.3g of row RMS", what, worst);
}

static void check_model(zmk_arch arch, zmk_quant q, bool tied, const char *name) {
    model m = make(arch, q, tied, 7, name);
    enum { N = 11 };
    int V = m.g->hp.n_vocab;
    tu_rng r = tu_rng_seed(42);
    int32_t tok[N];
    for (int i = 0; i < N; i++)
        tok[i] = (int32_t)(tu_next(&r) % (uint64_t)V);
    double *want = malloc(sizeof(double) * N * V);
    float *got = malloc(sizeof(float) * N * V);
    char err[256];
    cr_assert_eq(naive_forward(m.f, tok, N, want, err, sizeof err), 0, "%s", err);

    zir_interp *it;
    zdiag d = {0};
    cr_assert_eq(zir_interp_new(m.g, 32, &it, &d), ZOK, "%s", d.msg);
    for (int i = 0; i < N * V; i++)
        got[i] = NAN; /* poison */
    cr_assert_eq(zir_interp_step(it, tok, N, got, &d), ZOK, "%s", d.msg);
    expect_close(got, want, N, V, "prefill");

    zir_interp_reset(it);
    for (int i = 0; i < N * V; i++)
        got[i] = NAN;
    for (int t = 0; t < N; t++)
        cr_assert_eq(zir_interp_step(it, tok + t, 1, got + (size_t)t * V, &d), ZOK, "%s", d.msg);
    expect_close(got, want, N, V, "decode");

    zir_interp_reset(it); /* chunks of 4, 4, 3: prefill at a nonzero position */
    for (int i = 0; i < N * V; i++)
        got[i] = NAN;
    for (int t = 0; t < N; t += 4) {
        int c = N - t < 4 ? N - t : 4;
        cr_assert_eq(zir_interp_step(it, tok + t, c, got + (size_t)t * V, &d), ZOK, "%s", d.msg);
    }
    expect_close(got, want, N, V, "chunked prefill");
    zir_interp_free(it);
    free(want);
    free(got);
    drop(&m);
}

Test(interp, qwen3_q4_k_m) {
    check_model(ZMK_QWEN3, ZMK_Q4_K_M, false, "qwen3.gguf");
}
Test(interp, qwen3_f32_tied) {
    check_model(ZMK_QWEN3, ZMK_F32, true, "qwen3t.gguf");
}
Test(interp, llama_q8_0) {
    check_model(ZMK_LLAMA, ZMK_Q8_0, false, "llama.gguf");
}
Test(interp, llama_q4_k_m) {
    check_model(ZMK_LLAMA, ZMK_Q4_K_M, false, "llama4.gguf");
}
Test(interp, qwen2_f16) {
    check_model(ZMK_QWEN2, ZMK_F16, false, "qwen2.gguf");
}
Test(interp, qwen2_q4_k_m) {
    check_model(ZMK_QWEN2, ZMK_Q4_K_M, false, "qwen2q.gguf");
}

/* Mixture of experts: router, top-k with renormalized weights, stacked
 * experts (8 experts also take Q4_K_M's n_expert == 8 types). */
Test(interp, qwen3moe_q4_k_m) {
    check_model(ZMK_QWEN3MOE, ZMK_Q4_K_M, false, "qwen3moe.gguf");
}
Test(interp, qwen3moe_f32_e16) {
    moe_shape[0] = 16, moe_shape[1] = 5, moe_shape[2] = 96;
    check_model(ZMK_QWEN3MOE, ZMK_F32, true, "qwen3moe16.gguf");
}

Test(interp, rejects_bad_steps) {
    model m = make(ZMK_QWEN3, ZMK_F32, false, 3, "bad.gguf");
    zir_interp *it;
    zdiag d = {0};
    cr_assert_eq(zir_interp_new(m.g, 4, &it, &d), ZOK);
    int32_t tok[5] = {1, 2, 3, 4, 5};
    cr_expect_eq(zir_interp_step(it, tok, 5, NULL, &d), ZE_INVALID);
    cr_expect(strstr(d.msg, "context full") != NULL, "%s", d.msg);
    int32_t bad = 600;
    cr_expect_eq(zir_interp_step(it, &bad, 1, NULL, &d), ZE_INVALID);
    cr_expect(strstr(d.msg, "vocabulary") != NULL, "%s", d.msg);
    cr_expect_eq(zir_interp_pos(it), 0);
    zir_interp_free(it);
    drop(&m);
}
