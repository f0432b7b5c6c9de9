/* Qwen3.5's ops in the reference interpreter, each against a naive double
 * implementation written here from the maths (not from ir/interp.c), over
 * several steps so that the recurrent states are carried and reset; and tiny
 * qwen35 / qwen35moe models whose prefill, decode and chunked prefill agree.
 * The models' logits against llama.cpp are in tests/llamacpp/compare.sh. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/arch.h"
#include "frontend/mkmodel.h"
#include "ir/interp.h"
#include "testutil.h"

/* A graph whose token t embeds to row t of a random [V, H] table: the ops
 * under test read slices of that row. Its logits are the embedding. */
typedef struct rig {
    zir_graph *g;
    zir_value *x;
    float *table;
    int V, H;
} rig;

static float urand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) * 0x1.0p-24 * 2.0 - 1.0);
}

static rig rig_new(int V, int H, uint64_t seed) {
    rig r = {zir_graph_new(), NULL, malloc(sizeof(float) * (size_t)(V * H)), V, H};
    for (int i = 0; i < V * H; i++)
        r.table[i] = urand(&seed);
    zdiag d = {0};
    zdim ts[1] = {ZDIM_T}, es[2] = {V, H};
    r.g->hp.n_vocab = V;
    r.g->tokens = zir_value_new(r.g, "tokens", ZR_INPUT, ZT_I32, 1, ts, &d);
    zir_value *e = zir_value_new(r.g, "table", ZR_WEIGHT, ZT_F32, 2, es, &d);
    e->data = r.table;
    e->nbytes = sizeof(float) * (uint64_t)(V * H);
    zir_value *in[2] = {e, r.g->tokens};
    r.x = zir_node_add(r.g, ZOP_EMBED, "x", in, 2, NULL, -1, ZG_EMBED, &d)->out;
    r.g->logits = r.x;
    cr_assert_eq(d.code, ZOK, "%s", d.msg);
    return r;
}

static void rig_free(rig *r) {
    zir_graph_free(r->g);
    free(r->table);
}

static zir_value *add(rig *r, zir_op op, const char *name, zir_value *a, zir_value *b, const zir_attrs *at) {
    zdiag d = {0};
    zir_value *in[2] = {a, b};
    zir_node *n = zir_node_add(r->g, op, name, in, zir_ops[op].arity, at, 0, ZG_ATTN, &d);
    cr_assert(n, "%s: %s", name, d.msg);
    return n->out;
}

static zir_value *slice(rig *r, const char *name, int64_t off, int64_t len) {
    zir_attrs a = {.slice = {off, len}};
    return add(r, ZOP_SLICE, name, r->x, NULL, &a);
}

static zir_value *reshape3(rig *r, const char *name, zir_value *x, zdim a, zdim b) {
    zir_attrs at = {.reshape = {3, {ZDIM_T, a, b}}};
    return add(r, ZOP_RESHAPE, name, x, NULL, &at);
}

static zir_value *state(rig *r, const char *name, int rank, zdim a, zdim b, zdim c) {
    zdiag d = {0};
    zdim s[3] = {a, b, c};
    zir_value *v = zir_value_new(r->g, name, ZR_KV, ZT_F32, rank, s, &d);
    cr_assert(v, "%s", d.msg);
    return v;
}

/* Runs the token sequence 0, 1, ..., n-1 in steps of the given sizes and
 * calls check(t0, T) after each step. */
typedef void (*check_fn)(zir_interp *it, const rig *r, int t0, int T, void *ctx);
static void run_steps(rig *r, const int *steps, int n_steps, check_fn check, void *ctx) {
    zdiag d = {0};
    cr_assert_eq(zir_verify(r->g, &d), ZOK, "%s", d.msg);
    zir_interp *it;
    cr_assert_eq(zir_interp_new(r->g, 64, &it, &d), ZOK, "%s", d.msg);
    for (int pass = 0; pass < 2; pass++) { /* the second pass after a reset: the states restart from 0 */
        int t0 = 0;
        for (int s = 0; s < n_steps; s++) {
            int32_t tok[16];
            for (int i = 0; i < steps[s]; i++)
                tok[i] = t0 + i;
            cr_assert_eq(zir_interp_step(it, tok, steps[s], NULL, &d), ZOK, "%s", d.msg);
            check(it, r, t0, steps[s], ctx);
            t0 += steps[s];
        }
        zir_interp_reset(it);
    }
    zir_interp_free(it);
}

static void expect_near(float got, double want, double tol, const char *what, int i) {
    cr_expect(fabs(got - want) <= tol * (1.0 + fabs(want)), "%s[%d]: got %.9g, want %.9g", what, i, got,
              want);
}

/* ---- elementwise ------------------------------------------------------- */

typedef struct unary_ctx {
    zir_value *sig, *sp, *silu, *mul, *l2;
    int n, heads, hd;
} unary_ctx;

static void check_unary(zir_interp *it, const rig *r, int t0, int T, void *vc) {
    unary_ctx *c = vc;
    const float *sig = zir_interp_value(it, c->sig, NULL), *sp = zir_interp_value(it, c->sp, NULL);
    const float *silu = zir_interp_value(it, c->silu, NULL), *mul = zir_interp_value(it, c->mul, NULL);
    const float *l2 = zir_interp_value(it, c->l2, NULL);
    for (int t = 0; t < T; t++) {
        const float *x = r->table + (size_t)(t0 + t) * r->H;
        for (int i = 0; i < c->n; i++) {
            double v = x[i] * 30.0; /* the softplus input is scaled past its threshold of 20 */
            expect_near(sig[t * c->n + i], 1.0 / (1.0 + exp(-x[i])), 1e-6, "sigmoid", i);
            expect_near(sp[t * c->n + i], v > 20 ? v : log1p(exp(v)), 1e-6, "softplus", i);
            expect_near(silu[t * c->n + i], x[i] / (1.0 + exp(-x[i])), 1e-6, "silu", i);
            /* b = column 0 of each head: [T, heads, 1] broadcast over the head's dims */
            double b = x[c->n + (i / c->hd)];
            expect_near(mul[t * c->n + i], (double)x[i] * b, 1e-6, "mul", i);
        }
        for (int h = 0; h < c->heads; h++) {
            double ss = 0;
            for (int j = 0; j < c->hd; j++)
                ss += (double)x[h * c->hd + j] * x[h * c->hd + j];
            for (int j = 0; j < c->hd; j++)
                expect_near(l2[(t * c->heads + h) * c->hd + j], x[h * c->hd + j] / fmax(sqrt(ss), 1e-6), 1e-6,
                            "l2_norm", j);
        }
    }
}

Test(q35_ops, unary_mul_l2_slice) {
    rig r = rig_new(12, 40, 3);
    unary_ctx c = {.n = 32, .heads = 4, .hd = 8};
    zir_value *a = slice(&r, "a", 0, 32), *bcol = slice(&r, "b", 32, 4);
    c.sig = add(&r, ZOP_SIGMOID, "sig", a, NULL, NULL);
    c.silu = add(&r, ZOP_SILU, "silu", a, NULL, NULL);
    /* softplus of 30 x: mul by a [1]-shaped column of 30s made from the table */
    c.sp = add(&r, ZOP_SOFTPLUS, "sp", add(&r, ZOP_MUL, "a30", a, slice(&r, "k30", 36, 1), NULL), NULL, NULL);
    zir_value *a3 = reshape3(&r, "a3", a, 4, 8);
    zir_value *b3 = reshape3(&r, "b3", bcol, 4, 1);
    c.mul = add(&r, ZOP_MUL, "mul", a3, b3, NULL);
    zir_attrs eps = {.eps = 1e-6f};
    c.l2 = add(&r, ZOP_L2_NORM, "l2", a3, NULL, &eps);
    for (int t = 0; t < r.V; t++) /* column 36 holds 30 */
        r.table[t * r.H + 36] = 30.0f;
    int steps[] = {3, 1, 2};
    run_steps(&r, steps, 3, check_unary, &c);
    rig_free(&r);
}

Test(q35_ops, refuses_bad_shapes) {
    rig r = rig_new(4, 16, 1);
    zdiag d = {0};
    zir_attrs s = {.slice = {10, 8}};
    zir_value *in[3] = {r.x, NULL, NULL};
    cr_expect_null(zir_node_add(r.g, ZOP_SLICE, "bad", in, 1, &s, 0, ZG_ATTN, &d));
    cr_expect(strstr(d.msg, "slice [10, 18) of a last dimension of 16"), "%s", d.msg);
    zir_value *b = slice(&r, "b3", 0, 3);
    in[1] = b;
    cr_expect_null(zir_node_add(r.g, ZOP_MUL, "bad2", in, 2, NULL, 0, ZG_ATTN, &d));
    cr_expect(strstr(d.msg, "mul: input 1 axis 1: expected 16, found 3"), "%s", d.msg);
    in[1] = r.x; /* not a state buffer */
    zir_value *w = zir_find(r.g, "table");
    zir_value *cin[3] = {r.x, w, r.x};
    cr_expect_null(zir_node_add(r.g, ZOP_SSM_CONV, "bad3", cin, 3, NULL, 0, ZG_ATTN, &d));
    cr_expect(strstr(d.msg, "is not a state buffer"), "%s", d.msg);
    rig_free(&r);
}

/* ---- causal conv with state -------------------------------------------- */

typedef struct conv_ctx {
    zir_value *y;
    const float *w; /* [C][K] */
    int C, K;
} conv_ctx;

static void check_conv(zir_interp *it, const rig *r, int t0, int T, void *vc) {
    conv_ctx *c = vc;
    const float *y = zir_interp_value(it, c->y, NULL);
    for (int t = 0; t < T; t++)
        for (int ch = 0; ch < c->C; ch++) {
            double want = 0; /* the taps reach back K-1 tokens; before token 0 the input is 0 */
            for (int k = 0; k < c->K; k++) {
                int src = t0 + t - (c->K - 1) + k;
                if (src >= 0) want += (double)r->table[(size_t)src * r->H + ch] * c->w[ch * c->K + k];
            }
            expect_near(y[t * c->C + ch], want, 1e-5, "ssm_conv", ch);
        }
}

Test(q35_ops, ssm_conv_carries_its_state) {
    rig r = rig_new(16, 6, 5);
    conv_ctx c = {.C = 6, .K = 4};
    float w[24];
    uint64_t s = 11;
    for (int i = 0; i < 24; i++)
        w[i] = urand(&s);
    c.w = w;
    zdiag d = {0};
    zdim ws[2] = {6, 4};
    zir_value *wv = zir_value_new(r.g, "w", ZR_WEIGHT, ZT_F32, 2, ws, &d);
    wv->data = w;
    wv->nbytes = sizeof w;
    zir_value *st = state(&r, "conv_state", 2, 3, 6, 0);
    zir_value *in[3] = {r.x, wv, st};
    c.y = zir_node_add(r.g, ZOP_SSM_CONV, "y", in, 3, NULL, 0, ZG_ATTN, &d)->out;
    int steps[] = {2, 1, 1, 5, 1}; /* shorter and longer than the window */
    run_steps(&r, steps, 5, check_conv, &c);
    rig_free(&r);
}

/* ---- the gated delta rule ---------------------------------------------- */

enum { HK = 2, HV = 4, D = 4, X = 2 * HK * D + HV * D + 2 * HV };

typedef struct delta_ctx {
    zir_value *o;
    double S[HV][D][D]; /* S[h][key i][value j], carried over the whole sequence */
} delta_ctx;

/* S <- exp(g) S; S <- S + k (beta (v - S^T k))^T; o = S^T q / sqrt(D). */
static void check_delta(zir_interp *it, const rig *r, int t0, int T, void *vc) {
    delta_ctx *c = vc;
    const float *o = zir_interp_value(it, c->o, NULL);
    if (t0 == 0) memset(c->S, 0, sizeof c->S);
    for (int t = 0; t < T; t++) {
        const float *x = r->table + (size_t)(t0 + t) * r->H;
        for (int h = 0; h < HV; h++) {
            const float *q = x + (h % HK) * D, *k = x + HK * D + (h % HK) * D, *v = x + 2 * HK * D + h * D;
            double g = x[2 * HK * D + HV * D + h], beta = x[2 * HK * D + HV * D + HV + h];
            double sk[D] = {0};
            for (int i = 0; i < D; i++)
                for (int j = 0; j < D; j++) {
                    c->S[h][i][j] *= exp(g);
                    sk[j] += c->S[h][i][j] * k[i];
                }
            for (int i = 0; i < D; i++)
                for (int j = 0; j < D; j++)
                    c->S[h][i][j] += k[i] * beta * (v[j] - sk[j]);
            for (int j = 0; j < D; j++) {
                double want = 0;
                for (int i = 0; i < D; i++)
                    want += c->S[h][i][j] * q[i];
                expect_near(o[(t * HV + h) * D + j], want / sqrt(D), 1e-5, "delta_net", j);
            }
        }
    }
}

Test(q35_ops, delta_net_carries_its_state) {
    rig r = rig_new(16, X, 9);
    delta_ctx *c = calloc(1, sizeof *c);
    zir_value *q = reshape3(&r, "q", slice(&r, "qf", 0, HK * D), HK, D);
    zir_value *k = reshape3(&r, "k", slice(&r, "kf", HK * D, HK * D), HK, D);
    zir_value *v = reshape3(&r, "v", slice(&r, "vf", 2 * HK * D, HV * D), HV, D);
    zir_value *g = slice(&r, "g", 2 * HK * D + HV * D, HV);
    zir_value *b = slice(&r, "beta", 2 * HK * D + HV * D + HV, HV);
    zir_value *st = state(&r, "ssm_state", 3, HV, D, D);
    zdiag d = {0};
    zir_value *in[6] = {q, k, v, g, b, st};
    zir_attrs a = {.scale = 1.0f / sqrtf((float)D)};
    c->o = zir_node_add(r.g, ZOP_DELTA_NET, "o", in, 6, &a, 0, ZG_ATTN, &d)->out;
    int steps[] = {3, 1, 1, 6};
    run_steps(&r, steps, 4, check_delta, c);
    free(c);
    rig_free(&r);
}

/* ---- whole models: prefill = decode = chunked -------------------------- */

static void model_steps(zmk_arch arch, const char *file) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = arch, o.quant = ZMK_F32, o.layers = 4, o.full_attn = 2, o.hidden = 64, o.ff = 128;
    o.heads = 2, o.kv_heads = 1, o.head_dim = 32, o.vocab = 300, o.ssm_state = 16, o.ssm_groups = 1;
    o.ssm_heads = 2, o.experts = 4, o.experts_used = 2, o.expert_ff = 32, o.shared_ff = 48;
    zdiag d = {0};
    const char *path = tu_tmp(file);
    cr_assert_eq(zmk_write(&o, path, NULL, &d), ZOK, "%s", d.msg);
    gguf_file *f;
    zir_graph *g;
    cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zir_build_from_gguf(f, &g, &d), ZOK, "%s", d.msg);
    enum { N = 11 };
    int32_t tok[N] = {3, 17, 250, 9, 41, 41, 120, 7, 299, 0, 64};
    int V = g->hp.n_vocab, chunks[3][N] = {{N}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {4, 2, 5}};
    float *out[3];
    for (int m = 0; m < 3; m++) {
        zir_interp *it;
        cr_assert_eq(zir_interp_new(g, N, &it, &d), ZOK, "%s", d.msg);
        out[m] = malloc(sizeof(float) * (size_t)(N * V));
        for (int c = 0, t = 0; t < N; t += chunks[m][c++])
            cr_assert_eq(zir_interp_step(it, tok + t, chunks[m][c], out[m] + (size_t)t * V, &d), ZOK, "%s",
                         d.msg);
        zir_interp_free(it);
    }
    for (int i = 0; i < N * V; i++) {
        cr_expect(fabsf(out[1][i] - out[0][i]) <= 1e-5f * (1 + fabsf(out[0][i])), "decode [%d]", i);
        cr_expect(fabsf(out[2][i] - out[0][i]) <= 1e-5f * (1 + fabsf(out[0][i])), "chunked [%d]", i);
    }
    for (int m = 0; m < 3; m++)
        free(out[m]);
    zir_graph_free(g);
    gguf_close(f);
}

Test(q35_model, qwen35_prefill_decode_chunked) {
    model_steps(ZMK_QWEN35, "q35.gguf");
}

Test(q35_model, qwen35moe_prefill_decode_chunked) {
    model_steps(ZMK_QWEN35MOE, "q35moe.gguf");
}

/* zincc compiles a hybrid model, and zinc info shows its recurrent states:
 * a conv window and a delta-rule state for the delta-net layer (layer 0),
 * per sequence beside the KV cache of the attention layer (layer 1). The
 * plan's logits against the interpreter's are test_kernels_e2e's. */
Test(q35_model, zincc_compiles_and_info_shows_the_states) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = ZMK_QWEN35, o.layers = 2, o.full_attn = 2, o.hidden = 64, o.ff = 128, o.head_dim = 32,
    o.vocab = 300;
    zdiag d = {0};
    const char *path = tu_tmp("q35-zincc.gguf"), *plan = tu_tmp("q35.zplan");
    cr_assert_eq(zmk_write(&o, path, NULL, &d), ZOK, "%s", d.msg);
    char *out = NULL;
    int rc = tu_run(&out, ZINC_BINARY_DIR "/zincc %s -o %s --target llvmpipe --ctx 64", path, plan);
    cr_assert_eq(rc, 0, "zincc exit %d: %s", rc, out);
    free(out);
    rc = tu_run(&out, ZINC_BINARY_DIR "/zinc info %s --verbose", plan);
    cr_assert_eq(rc, 0, "zinc info exit %d: %s", rc, out);
    /* conv [3, 2*2*32 + 4*32] and delta [4, 32, 32], f32 */
    cr_expect(strstr(out, "format:    zinc plan 1.") && strstr(out, "state 0.02 MiB in 2,") &&
                  strstr(out, "state            0.00  l0.conv_state") &&
                  strstr(out, "state            0.02  l0.ssm_state") &&
                  strstr(out, "kv               0.02  l1.k_cache"),
              "%s", out);
    free(out);
}
