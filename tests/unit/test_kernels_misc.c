/* The kernels of zcg_misc (rms_norm, add, swiglu, rope, kv_store) and
 * zcg_attention (staged scores / causal softmax / mix, fused attention with
 * and without a context split) against the CPU interpreter, every element,
 * on the default Vulkan device (llvmpipe in CI).
 *
 * Graphs: mkmodel models of each architecture (qwen3: per-head q/k norm,
 * NeoX RoPE; qwen2: QKV biases; llama: normal RoPE), unfused and after the
 * default pipeline for llvmpipe and h200 in both phases; and hand-built
 * graphs for what mkmodel cannot make (head_dim 128 with n_rot 64, RoPE
 * frequency factors and scaling, GQA 4:1 and 8:1 (the decode kernel's
 * query split), chosen attention tilings, RoPE at positions in the
 * thousands). Steps of T = 1, 7, 17 at position 0 and again at position T.
 * Kernels tuned for h200 run here too, with shared memory clamped to what
 * the device offers. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/spv_coopmat.h"
#include "frontend/arch.h"
#include "frontend/mkmodel.h"
#include "kernel_harness.h"
#include "testutil.h"

/* ---- error table ---------------------------------------------------------- */

enum {
    KK_RMS,
    KK_ADD,
    KK_SWIGLU,
    KK_ROPE,
    KK_KV,
    KK_SCORES,
    KK_SOFTMAX,
    KK_MIX,
    KK_ATTN,
    KK_ATTN_SPLIT,
    KK_N
};
static const char *const kk_name[KK_N] = {
    "rms_norm",    "add",     "swiglu",   "rope",      "kv_store",
    "attn_scores", "softmax", "attn_mix", "attention", "attention+split"};
/* Bounds on max |got - want| / rms(want), fp32 storage. The interpreter
 * sums in double (norm, softmax) or 8-way fp32 (dot products); the kernels
 * in fp32 in another order, so a few ulps of the output RMS apart. The copy
 * must be exact. A wrong pair, mask or head moves errors to O(1). */
static const double kk_tol[KK_N] = {5e-6, 1e-6, 5e-6, 5e-6, 0, 5e-6, 5e-6, 5e-6, 1e-5, 1e-5};
/* fp16 storage: inputs and outputs rounded to 11 bits (2^-12 = 2.4e-4 of
 * an element each time); the largest elements of a SwiGLU output are ~10x
 * its RMS, so three roundings reach ~1e-2 of the RMS there. The
 * cache's RMS also counts its empty rows (64 of them, as few as 1 in use),
 * which makes the store's rounding look up to 8x larger. */
static double f16_tol(int kk) {
    return kk == KK_KV ? 2e-2 : 1.5e-2;
}

/* The interpreter rounds nothing in attention but the cache (f16); the
 * kernel rounds q, k and v (an f32 cache) and P to fp16, 2^-11 relative at
 * most each, and its sums are fp32. A CPU model of those roundings (scores,
 * probabilities, values as the kernel forms them, against fp64) gave 1.5e-3
 * to 2.1e-3 of the output RMS at head size 128 and ordinary scores, 1.0e-2
 * with scores 8x larger (q_gain: an error of |s| 2^-11 in a score is one in
 * exp of it), nearly all from rounding q and k. A key dropped (a weight of
 * 1/300 on values of +-2 at position 300), a wrong head or mask: 3e-2 or more. */
#define TOL_ATTN_CM       5e-3
#define TOL_ATTN_CM_LARGE 2e-2

/* The bound for a kernel's result: the prefill attention on the matrix
 * units (attention_cm_*) rounds its operands to fp16, wherever it runs. */
static double kernel_tol(const char *kernel, int kk, bool f16) {
    double tol = f16 ? f16_tol(kk) : kk_tol[kk];
    return !strncmp(kernel, "attention_cm", 12) && tol < TOL_ATTN_CM ? TOL_ATTN_CM : tol;
}

typedef struct tally {
    double err[KK_N];
    long checks[KK_N];
    char attn[96]; /* the name of the last attention kernel checked */
} tally;

static int kind_of(const zir_node *n) {
    if (n->op == ZOP_KERNEL)
        return n->kp.tmpl != ZKT_ATTENTION ? -1 : n->kp.split > 1 ? KK_ATTN_SPLIT : KK_ATTN;
    switch (n->op) {
    case ZOP_RMS_NORM: return KK_RMS;
    case ZOP_ADD: return KK_ADD;
    case ZOP_SWIGLU: return KK_SWIGLU;
    case ZOP_ROPE: return KK_ROPE;
    case ZOP_KV_STORE: return KK_KV;
    case ZOP_ATTN_SCORES: return KK_SCORES;
    case ZOP_SOFTMAX_CAUSAL: return KK_SOFTMAX;
    case ZOP_ATTN_MIX: return KK_MIX;
    default: return -1;
    }
}

static void tally_log(const tally *t, const char *what) {
    char line[768];
    size_t o = (size_t)snprintf(line, sizeof line, "%s:", what);
    for (int i = 0; i < KK_N && o < sizeof line; i++)
        if (t->checks[i])
            o += (size_t)snprintf(line + o, sizeof line - o, " %s %.2g (%ld)", kk_name[i], t->err[i],
                                  t->checks[i]);
    cr_log_info("%s", line);
}

/* ---- device and options --------------------------------------------------- */

static kh_ctx dev;
static void open_dev(void) {
    char err[256];
    cr_assert(kh_open(&dev, err, sizeof err), "no Vulkan device: %s", err);
}
static void close_dev(void) {
    kh_close(&dev);
}

/* A target profile whose shared memory fits the device that runs the test:
 * h200's 48 KiB tiles do not fit llvmpipe's 32 KiB. */
static ztarget fit_target(const char *name) {
    const ztarget *t = ztarget_find(name);
    cr_assert_not_null(t, "no target '%s'", name);
    ztarget r = *t;
    if (dev.dev.prof.max_shared_memory && r.smem_bytes > dev.dev.prof.max_shared_memory)
        r.smem_bytes = dev.dev.prof.max_shared_memory;
    r.coopmat = r.coopmat && (dev.dev.prof.coopmat_nv || dev.dev.prof.coopmat_khr);
    return r;
}

/* ---- checking ------------------------------------------------------------- */

/* What a step checks: the compile options, the running tally, a label. */
typedef struct check_arg {
    const zcg_opts *o;
    tally *ty;
    const char *what;
} check_arg;

/* Every top-level node this file's generators own, for the step just run. */
static void check_nodes(const zir_graph *g, const zir_interp *it, zir_step st, void *arg) {
    const check_arg *c = arg;
    const zcg_opts *o = c->o;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        int kk = kind_of(n);
        if (kk < 0) continue;
        kh_result r;
        zdiag d = {0};
        /* A split kernel runs twice on the same scratch: its counters must be
         * back at zero for the second run (a replayed command buffer). */
        dev.replays = kk == KK_ATTN_SPLIT ? 2 : 1;
        zstatus s = kh_check_node(&dev, g, n, o, it, st, &r, &d);
        cr_assert_eq(s, ZOK, "%s: '%s' at T=%lld pos=%lld: %s", c->what, n->out->name, (long long)st.T,
                     (long long)st.pos, d.msg);
        double tol = kernel_tol(r.kernel, kk, o->act_f16);
        cr_assert(r.checked > 0, "%s: '%s' compared nothing", c->what, n->out->name);
        cr_assert(r.max_err <= tol, "%s: kernel %s for '%s' at T=%lld pos=%lld: error %.3g of the RMS > %.1g",
                  c->what, r.kernel, n->out->name, (long long)st.T, (long long)st.pos, r.max_err, tol);
        if (r.max_err > c->ty->err[kk]) c->ty->err[kk] = r.max_err;
        c->ty->checks[kk]++;
        if (kk >= KK_ATTN) snprintf(c->ty->attn, sizeof c->ty->attn, "%s", r.kernel);
    }
}

/* Steps of each T at position 0 and again at position T, checking all; a
 * schedule of one-token steps (decode: the runtime never gives it more)
 * gets six of them, at positions 0 to 5. */
static void run_steps(const zir_graph *g, const zcg_opts *o, int64_t ctx, tally *ty, const char *what) {
    check_arg c = {o, ty, what};
    zdiag d = {0};
    cr_assert_eq(kh_run_steps(g, ctx, o->max_tokens, 1234, check_nodes, &c, &d), ZOK, "%s: %s", what, d.msg);
}

/* ---- mkmodel models ------------------------------------------------------- */

static gguf_file *make_model(zmk_arch arch, const char *name) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = arch;
    o.quant = ZMK_Q8_0;
    o.seed = 11;
    o.layers = 1;
    o.hidden = 256;
    o.ff = 512;
    o.heads = 4;
    o.kv_heads = 2;
    o.head_dim = 64;
    o.vocab = 300;
    zdiag d = {0};
    const char *path = tu_tmp(name);
    cr_assert_eq(zmk_write(&o, path, NULL, &d), ZOK, "%s", d.msg);
    gguf_file *f;
    cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
    return f;
}

/* One way of compiling a model: the unfused graph or the default pipeline. */
typedef struct variant {
    const char *target;
    zpass_phase phase;
    const char *pipeline; /* NULL: the default */
    bool f16;
} variant;

static const variant variants[] = {
    {"llvmpipe", ZPH_PREFILL, "shape,width", false},
    {"llvmpipe", ZPH_PREFILL, NULL, false},
    {"llvmpipe", ZPH_DECODE, NULL, false},
    {"h200", ZPH_PREFILL, NULL, false},
    {"h200", ZPH_DECODE, NULL, false},
    {"h200", ZPH_DECODE, "shape,width", true},
};

static void check_model(zmk_arch arch, const char *file, tally *all) {
    gguf_file *f = make_model(arch, file);
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        const variant *x = &variants[v];
        ztarget t = fit_target(x->target);
        zir_graph *g;
        zdiag d = {0};
        cr_assert_eq(kh_compile(f, &t, x->phase, x->pipeline, &g, &d), ZOK, "%s", d.msg);
        zcg_opts co = {.target = &t,
                       .phase = x->phase,
                       .max_tokens = x->phase == ZPH_DECODE ? 1 : 64,
                       .act_f16 = x->f16};
        char what[128];
        snprintf(what, sizeof what, "%s %s %s %s%s", zmk_arch_name(arch), x->target,
                 zpass_phase_name(x->phase), x->pipeline ? "unfused" : "fused", x->f16 ? " fp16" : "");
        tally ty = {0};
        run_steps(g, &co, 64, &ty, what);
        tally_log(&ty, what);
        for (int i = 0; i < KK_N && !x->f16; i++) {
            if (ty.err[i] > all->err[i]) all->err[i] = ty.err[i];
            all->checks[i] += ty.checks[i];
        }
        zir_graph_free(g);
    }
    gguf_close(f);
}

TestSuite(kernels_misc, .init = open_dev, .fini = close_dev);

Test(kernels_misc, qwen3) {
    tally t = {0};
    check_model(ZMK_QWEN3, "kq3.gguf", &t);
    tally_log(&t, "qwen3 fp32 max");
    /* per-head q/k norm, NeoX rope, both attention forms, the split */
    int need[] = {KK_RMS,    KK_ADD,     KK_SWIGLU, KK_ROPE, KK_KV,
                  KK_SCORES, KK_SOFTMAX, KK_MIX,    KK_ATTN, KK_ATTN_SPLIT};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        cr_expect(t.checks[need[i]] > 0, "qwen3: no %s kernel was checked", kk_name[need[i]]);
}

Test(kernels_misc, qwen2) {
    tally t = {0};
    check_model(ZMK_QWEN2, "kq2.gguf", &t);
    tally_log(&t, "qwen2 fp32 max");
    cr_expect(t.checks[KK_ADD] > 0, "qwen2: no bias add was checked");
}

Test(kernels_misc, llama) {
    tally t = {0};
    check_model(ZMK_LLAMA, "kll.gguf", &t);
    tally_log(&t, "llama fp32 max");
    cr_expect(t.checks[KK_ROPE] > 0, "llama: no rope was checked");
}

/* ---- hand-built graphs ---------------------------------------------------- */

typedef struct hand_opts {
    int H, Hkv, D, n_rot;
    zir_rope_mode mode;
    float theta, freq_scale;
    bool factors;
    int vocab;
    float q_gain; /* q's norm weights scaled by this (0: 1): larger scores */
    bool k_norm;  /* a per-head RMSNorm on k before its RoPE (Qwen3's) */
} hand_opts;

static zir_value *hand_weight(zir_graph *g, const char *name, int rank, int64_t d0, int64_t d1, tu_rng *r,
                              float lo, float hi) {
    zdim shape[2] = {d0, d1};
    zdiag d = {0};
    zir_value *v = zir_value_new(g, name, ZR_WEIGHT, ZT_F32, rank, shape, &d);
    cr_assert_not_null(v, "%s", d.msg);
    int64_t n = rank == 2 ? d0 * d1 : d0;
    float *p = zarena_alloc(g->arena, (size_t)n * 4);
    cr_assert_not_null(p);
    for (int64_t i = 0; i < n; i++)
        p[i] = lo == hi ? lo : tu_uniform(r, lo, hi);
    v->data = p;
    v->nbytes = (uint64_t)n * 4;
    v->layer = 0;
    return v;
}

static zir_value *hand_op(zir_graph *g, zir_op op, const char *name, zir_value *a, zir_value *b,
                          const zir_attrs *at) {
    zir_value *in[2] = {a, b};
    zdiag d = {0};
    zir_node *n = zir_node_add(g, op, name, in, zir_ops[op].arity, at, 0, ZG_ATTN, &d);
    cr_assert_not_null(n, "%s: %s", name, d.msg);
    return n->out;
}

static zir_value *hand_reshape(zir_graph *g, const char *name, zir_value *x, int rank, zdim d1, zdim d2) {
    zir_attrs a = {.reshape = {rank, {ZDIM_T, d1, d2}}};
    return hand_op(g, ZOP_RESHAPE, name, x, NULL, &a);
}

static zir_graph *hand_graph_new(const hand_opts *h, zir_value **tokens) {
    zir_graph *g = zir_graph_new();
    cr_assert_not_null(g);
    g->hp = (zir_hparams){.arch = "hand",
                          .n_layer = 1,
                          .n_embd = h->H * h->D,
                          .n_ff = h->H * h->D,
                          .n_head = h->H,
                          .n_head_kv = h->Hkv,
                          .head_dim = h->D,
                          .n_vocab = h->vocab,
                          .n_ctx_train = 1 << 16,
                          .rms_eps = 1e-6f,
                          .rope_mode = h->mode,
                          .n_rot = h->n_rot,
                          .rope_theta = h->theta,
                          .rope_freq_scale = h->freq_scale};
    zdim ts[1] = {ZDIM_T};
    zdiag d = {0};
    *tokens = g->tokens = zir_value_new(g, "tokens", ZR_INPUT, ZT_I32, 1, ts, &d);
    cr_assert_not_null(g->tokens, "%s", d.msg);
    return g;
}

/* Rows of a random table, looked up by token: the inputs of everything else. */
static zir_value *hand_rows(zir_graph *g, const char *name, zir_value *tok, int64_t width, tu_rng *r) {
    char wn[64];
    snprintf(wn, sizeof wn, "%s.table", name);
    zir_value *w = hand_weight(g, wn, 2, g->hp.n_vocab, width, r, -2.0f, 2.0f);
    return hand_op(g, ZOP_EMBED, name, w, tok, NULL);
}

static zir_attrs hand_rope_attrs(const hand_opts *h) {
    return (zir_attrs){.rope = {h->mode, h->n_rot, h->theta, h->freq_scale}};
}

/* One attention block with a bias, per-head q norm, RoPE with frequency
 * factors on q and k, both KV stores, the three attention ops and a SwiGLU:
 * the shapes mkmodel cannot make (head_dim 128, n_rot < head_dim, GQA 4:1). */
static zir_graph *hand_attention(const hand_opts *h) {
    tu_rng r = tu_rng_seed(77);
    zir_value *tok;
    zir_graph *g = hand_graph_new(h, &tok);
    int64_t HD = (int64_t)h->H * h->D, KD = (int64_t)h->Hkv * h->D;
    zir_value *ff = h->factors ? hand_weight(g, "rope_freqs", 1, h->n_rot / 2, 0, &r, 1.0f, 8.0f) : NULL;
    zir_attrs ra = hand_rope_attrs(h), na = {.eps = 1e-6f}, sa = {.scale = 1.0f / sqrtf((float)h->D)};
    zir_value *qf = hand_rows(g, "q_flat", tok, HD, &r);
    zir_value *qb = hand_op(g, ZOP_ADD, "q_bias", qf, hand_weight(g, "bq", 1, HD, 0, &r, -1, 1), NULL);
    zir_value *q = hand_reshape(g, "q", qb, 3, h->H, h->D);
    float gain = h->q_gain > 0 ? h->q_gain : 1.0f;
    q = hand_op(g, ZOP_RMS_NORM, "q_norm", q, hand_weight(g, "qn", 1, h->D, 0, &r, 0.5f * gain, 1.5f * gain),
                &na);
    q = hand_op(g, ZOP_ROPE, "q_rope", q, ff, &ra);
    zir_value *k = hand_reshape(g, "k", hand_rows(g, "k_flat", tok, KD, &r), 3, h->Hkv, h->D);
    if (h->k_norm)
        k = hand_op(g, ZOP_RMS_NORM, "k_norm", k, hand_weight(g, "kn", 1, h->D, 0, &r, 0.5f, 1.5f), &na);
    k = hand_op(g, ZOP_ROPE, "k_rope", k, ff, &ra);
    zir_value *v = hand_reshape(g, "v", hand_rows(g, "v_flat", tok, KD, &r), 3, h->Hkv, h->D);
    zdim cs[3] = {ZDIM_C, h->Hkv, h->D};
    zdiag d = {0};
    zir_value *kc = zir_value_new(g, "k_cache", ZR_KV, ZT_F32, 3, cs, &d);
    zir_value *vc = zir_value_new(g, "v_cache", ZR_KV, ZT_F32, 3, cs, &d);
    cr_assert(kc && vc, "%s", d.msg);
    zir_value *kall = hand_op(g, ZOP_KV_STORE, "k_all", k, kc, NULL);
    zir_value *vall = hand_op(g, ZOP_KV_STORE, "v_all", v, vc, NULL);
    zir_value *s = hand_op(g, ZOP_ATTN_SCORES, "scores", q, kall, &sa);
    zir_value *p = hand_op(g, ZOP_SOFTMAX_CAUSAL, "probs", s, NULL, NULL);
    zir_value *o = hand_op(g, ZOP_ATTN_MIX, "attn", p, vall, NULL);
    o = hand_reshape(g, "attn_flat", o, 2, HD, 0);
    g->logits = hand_op(g, ZOP_SWIGLU, "out", o, qf, NULL);
    cr_assert_eq(zir_verify(g, &d), ZOK, "%s", d.msg);
    return g;
}

/* Fuses the attention ops of g by hand with a chosen tiling. */
static void fuse_attention(zir_graph *g, int token_tile, int split) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *s = g->nodes[i];
        if (s->op != ZOP_ATTN_SCORES) continue;
        zir_node *body[3] = {s, g->nodes[i + 1], g->nodes[i + 2]};
        cr_assert(body[1]->op == ZOP_SOFTMAX_CAUSAL && body[2]->op == ZOP_ATTN_MIX);
        zir_kparams kp = {.tmpl = ZKT_ATTENTION, .token_tile = token_tile, .split = split};
        zdiag d = {0};
        cr_assert_not_null(zir_fuse(g, body, 3, &kp, &d), "%s", d.msg);
        cr_assert_eq(zir_verify(g, &d), ZOK, "%s", d.msg);
        return;
    }
    cr_assert_fail("no attention to fuse");
}

static const hand_opts hand128 = {.H = 8,
                                  .Hkv = 2,
                                  .D = 128,
                                  .n_rot = 64,
                                  .mode = ZROPE_NORMAL,
                                  .theta = 500000.0f,
                                  .freq_scale = 0.25f,
                                  .factors = true,
                                  .vocab = 97};
/* Head sizes that change how a workgroup owns the output: 96 threads of one
 * column each, and 128 threads of two columns each. */
static const hand_opts hand96 = {.H = 6,
                                 .Hkv = 3,
                                 .D = 96,
                                 .n_rot = 32,
                                 .mode = ZROPE_NEOX,
                                 .theta = 10000.0f,
                                 .freq_scale = 1.0f,
                                 .vocab = 53};
static const hand_opts hand256 = {.H = 2,
                                  .Hkv = 1,
                                  .D = 256,
                                  .n_rot = 256,
                                  .mode = ZROPE_NEOX,
                                  .theta = 1000000.0f,
                                  .freq_scale = 1.0f,
                                  .vocab = 53};

Test(kernels_misc, hand_unfused_d128_partial_rope) {
    ztarget t = fit_target("h200");
    zcg_opts o = {.target = &t, .phase = ZPH_PREFILL, .max_tokens = 64};
    for (int mode = 0; mode < 2; mode++) {
        hand_opts h = hand128;
        h.mode = mode ? ZROPE_NEOX : ZROPE_NORMAL;
        zir_graph *g = hand_attention(&h);
        tally ty = {0};
        run_steps(g, &o, 48, &ty, mode ? "hand d128 neox" : "hand d128 normal");
        tally_log(&ty, mode ? "hand d128 r64 neox +factors" : "hand d128 r64 normal +factors");
        for (int k = 0; k < KK_ATTN; k++)
            cr_expect(ty.checks[k] > 0, "no %s kernel was checked", kk_name[k]);
        zir_graph_free(g);
    }
}

/* Query tiles that do and do not divide T, splits that leave chunks empty,
 * and a split kernel given more tokens than its scratch holds (max_tokens
 * 4: T = 7 and 17 run their later tiles unsplit). */
typedef struct tiling_case {
    const hand_opts *h;
    int token_tile, split;
    const char *target;
    bool f16;
} tiling_case;

static const tiling_case tilings[] = {
    {&hand128, 1, 1, "h200", false},      {&hand128, 1, 1, "h200", true},
    {&hand128, 16, 1, "llvmpipe", false}, {&hand128, 5, 1, "h200", false},
    {&hand128, 5, 1, "h200", true},       {&hand128, 1, 3, "llvmpipe", false},
    {&hand128, 4, 6, "h200", false},      {&hand128, 4, 6, "h200", true},
    {&hand128, 2, 40, "llvmpipe", false}, {&hand96, 3, 2, "h200", false},
    {&hand96, 16, 1, "llvmpipe", false},  {&hand256, 16, 1, "h200", false},
    {&hand256, 1, 4, "llvmpipe", false},
};

Test(kernels_misc, hand_fused_tilings) {
    for (size_t i = 0; i < sizeof tilings / sizeof tilings[0]; i++) {
        const tiling_case *c = &tilings[i];
        ztarget t = fit_target(c->target);
        zcg_opts o = {
            .target = &t, .phase = ZPH_DECODE, .max_tokens = c->token_tile == 1 ? 1 : 4, .act_f16 = c->f16};
        zir_graph *g = hand_attention(c->h);
        fuse_attention(g, c->token_tile, c->split);
        char what[96];
        snprintf(what, sizeof what, "hand d%d fused qt=%d split=%d %s%s", c->h->D, c->token_tile, c->split,
                 t.name, c->f16 ? " fp16" : "");
        tally ty = {0};
        run_steps(g, &o, 48, &ty, what);
        tally_log(&ty, what);
        cr_expect(ty.checks[c->split > 1 ? KK_ATTN_SPLIT : KK_ATTN] > 0, "%s: no attention checked", what);
        zir_graph_free(g);
    }
}

/* Decode deep in the context, the way a plan runs it: the passes fold the
 * q and k head preparation into the decode attention kernel
 * (fuse-attn-head), the cost model splits the context (on target t: split
 * says whether it must). A prefill of `pos` tokens in the interpreter, then
 * three one-token steps, each checked: several rounds of keys per chunk,
 * several chunks, the new key written by the kernel and read back. qsplit:
 * the query split the kernel's name must show (1: none; 0: unchecked). */
static void decode_deep_on(ztarget t, bool split, int qsplit, const hand_opts *h, int64_t pos, bool f16,
                           const char *what) {
    zir_graph *g = hand_attention(h);
    zpass_opts po = kh_pass_opts(&t, ZPH_DECODE);
    po.kv_type = f16 ? ZKV_F16 : ZKV_F32;
    zdiag d = {0};
    cr_assert_eq(zpass_run_pipeline(g, "shape,width,kv-type,fuse-attn,fuse-head,fuse-attn-head", NULL, &po, &d),
                 ZOK, "%s", d.msg);
    const zir_node *a = NULL;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == ZOP_KERNEL && g->nodes[i]->kp.tmpl == ZKT_ATTENTION) a = g->nodes[i];
    cr_assert(a && a->n_body > 3 && (a->kp.split > 1) == split,
              "%s: expected a%s attention with the heads inside", what, split ? " split" : "n unsplit");
    zcg_opts o = {.target = &t, .phase = ZPH_DECODE, .max_tokens = 1, .act_f16 = f16};
    zir_interp *it;
    cr_assert_eq(zir_interp_new(g, pos + 3, &it, &d), ZOK, "%s", d.msg);
    tu_rng r = tu_rng_seed(4242);
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)pos);
    for (int64_t i = 0; i < pos; i++)
        toks[i] = (int32_t)(tu_next(&r) % (uint64_t)h->vocab);
    cr_assert_eq(zir_interp_step(it, toks, pos, NULL, &d), ZOK, "%s", d.msg);
    tally ty = {0};
    check_arg c = {&o, &ty, what};
    for (int s = 0; s < 3; s++) {
        zir_step st = {1, pos + s, pos + 3};
        cr_assert_eq(zir_interp_step(it, toks + s, 1, NULL, &d), ZOK, "%s", d.msg);
        check_nodes(g, it, st, &c);
    }
    tally_log(&ty, what);
    int kk = split ? KK_ATTN_SPLIT : KK_ATTN;
    cr_expect(ty.checks[kk] == 3, "%s: the attention was checked %ld times", what, ty.checks[kk]);
    char tag[16];
    snprintf(tag, sizeof tag, "_q%d", qsplit);
    cr_expect(!qsplit || (qsplit > 1 ? strstr(ty.attn, tag) != NULL : strstr(ty.attn, "_q") == NULL),
              "%s: kernel %s, expected a query split of %d", what, ty.attn, qsplit);
    free(toks);
    zir_interp_free(it);
    zir_graph_free(g);
}

static void decode_deep_sg(int subgroup, const hand_opts *h, int64_t pos, bool f16, const char *what) {
    ztarget t = fit_target("h200");
    if (subgroup) t.subgroup = subgroup;
    decode_deep_on(t, true, 0, h, pos, f16, what);
}

static void decode_deep(const hand_opts *h, int64_t pos, bool f16, const char *what) {
    decode_deep_sg(0, h, pos, f16, what);
}

Test(kernels_misc, decode_deep_context) {
    decode_deep(&hand128, 700, false, "decode d128 normal rope +factors at 700");
    decode_deep(&hand128, 300, true, "decode d128 fp16 at 300");
    decode_deep(&hand96, 1000, false, "decode d96 neox at 1000");
    /* chunks shorter than a round (ZINC_ATTN_MIN_CHUNK, the measuring knob):
     * more partials, most invocations of a round without a key */
    setenv("ZINC_ATTN_MIN_CHUNK", "40", 1);
    decode_deep(&hand128, 500, false, "decode d128 chunks of 40 keys at 500");
    unsetenv("ZINC_ATTN_MIN_CHUNK");
}

/* GQ 8 and 1 at head size 64. */
static const hand_opts hand64g8 = {.H = 8,
                                   .Hkv = 1,
                                   .D = 64,
                                   .n_rot = 64,
                                   .mode = ZROPE_NEOX,
                                   .theta = 10000.0f,
                                   .freq_scale = 1.0f,
                                   .vocab = 53};
static const hand_opts hand64g1 = {.H = 2,
                                   .Hkv = 2,
                                   .D = 64,
                                   .n_rot = 32,
                                   .mode = ZROPE_NORMAL,
                                   .theta = 10000.0f,
                                   .freq_scale = 1.0f,
                                   .vocab = 53};

/* The decode kernel's lane layouts (attn_decode.glsl): h200's lane groups
 * of 16 (D 128) or 32 (D 256) span llvmpipe's 8-wide subgroups, and every
 * lane scores whole rows (decode_deep_context); here groups that fit the
 * subgroup and sum by shuffles: one group a subgroup (LPK 8: D 64, and D
 * 128 with two slices a lane, codegen told the subgroup is 8), two (D 96,
 * LPK 4; D 128, LPK 4), GQ 1 to 8, unrolls 2 and 3. (D 256 with four
 * slices a lane: hand_fused_tilings, llvmpipe split 4.) */
Test(kernels_misc, decode_lane_layouts) {
    decode_deep_on(fit_target("h200"), true, 8, &hand64g8, 400, false, "decode d64 gq8 (8 q parts) at 400");
    decode_deep(&hand64g1, 260, true, "decode d64 gq1 fp16 at 260");
    decode_deep_sg(8, &hand128, 300, true, "decode sg8 d128 fp16 at 300");
    decode_deep_sg(8, &hand96, 200, false, "decode sg8 d96 at 200");
    setenv("ZINC_ATTN_LPK", "4", 1);
    setenv("ZINC_ATTN_UNROLL", "3", 1);
    decode_deep(&hand128, 350, false, "decode d128 LPK 4 unroll 3 at 350");
    unsetenv("ZINC_ATTN_LPK");
    unsetenv("ZINC_ATTN_UNROLL");
}

/* Qwen3-30B-A3B's head layout (GQ 8, D 128, NeoX RoPE over the whole head,
 * q and k norms), on two kv heads. */
static const hand_opts hand128g8 = {.H = 16,
                                    .Hkv = 2,
                                    .D = 128,
                                    .n_rot = 128,
                                    .mode = ZROPE_NEOX,
                                    .theta = 1000000.0f,
                                    .freq_scale = 1.0f,
                                    .vocab = 61,
                                    .k_norm = true};

/* The query split (attn_decode.glsl's QSPLIT; a workgroup a q head by
 * default from GQ 8, run 58): workgroups of a kv head's last chunk, one per
 * q part, all store the new key and read it back; partials and tickets per
 * (kv head, q part). With the context split on h200's lanes (llvmpipe's
 * 8-wide subgroups: the slow path) and without it on a target of one
 * compute unit (subgroups of 8: the fast path, two slices a lane); two
 * parts of four q heads (the default before run 58) and four of two (fast
 * path, D 64); and one part of eight heads, the kernel before the split. */
Test(kernels_misc, decode_query_split) {
    decode_deep_on(fit_target("h200"), true, 8, &hand128g8, 300, true,
                   "decode d128 gq8 (8 q parts) fp16 at 300");
    ztarget one = fit_target("h200");
    one.n_cu = 1;
    one.subgroup = 8;
    decode_deep_on(one, false, 8, &hand128g8, 150, false, "decode sg8 d128 gq8 (8 q parts) unsplit at 150");
    setenv("ZINC_ATTN_QSPLIT", "2", 1);
    decode_deep_on(one, false, 2, &hand128g8, 150, false, "decode sg8 d128 gq8 (2 q parts) unsplit at 150");
    setenv("ZINC_ATTN_QSPLIT", "4", 1);
    decode_deep_on(fit_target("h200"), true, 4, &hand64g8, 300, false, "decode d64 gq8 (4 q parts) at 300");
    setenv("ZINC_ATTN_QSPLIT", "1", 1);
    decode_deep_on(fit_target("h200"), true, 1, &hand128g8, 200, false, "decode d128 gq8 (1 q part) at 200");
    unsetenv("ZINC_ATTN_QSPLIT");
}

/* The staged kernels at head sizes 96 and 256. */
Test(kernels_misc, hand_unfused_d96_d256) {
    const hand_opts *hs[] = {&hand96, &hand256};
    for (int i = 0; i < 2; i++) {
        ztarget t = fit_target("h200");
        zcg_opts o = {.target = &t, .phase = i ? ZPH_DECODE : ZPH_PREFILL, .max_tokens = 64};
        zir_graph *g = hand_attention(hs[i]);
        char what[64];
        snprintf(what, sizeof what, "hand d%d unfused %s", hs[i]->D, zpass_phase_name(o.phase));
        tally ty = {0};
        run_steps(g, &o, 48, &ty, what);
        tally_log(&ty, what);
        zir_graph_free(g);
    }
}

/* ---- prefill attention on the matrix units (attn_cm.glsl) ------------------- */

/* Head layouts: GQ 1, 2 (Qwen3-0.6B's 16:8), 3 (a tile of 63 rows), 4 (the
 * 8B's), at head sizes 128 and 64; f16 and f32 caches; fp16 activations;
 * q_gain: scores large enough that a row's max grows by more than TAU
 * between blocks (the accumulators' rescale). */
typedef struct cm_case {
    int H, Hkv, D;
    bool kv16, act16;
    float q_gain;
} cm_case;

static const cm_case cm_cases[] = {
    {8, 8, 128, false, false, 0}, {16, 8, 128, true, false, 0}, {8, 2, 128, true, true, 0},
    {8, 2, 128, false, false, 8}, {4, 4, 64, true, false, 0},   {8, 4, 64, false, true, 0},
    {12, 4, 64, true, false, 0},  {8, 2, 64, true, false, 8},
};
enum { N_CM_CASES = sizeof cm_cases / sizeof cm_cases[0] };

/* The hand attention block of case c, for prefill on target t, fused. */
static zir_graph *cm_graph(const cm_case *c, const ztarget *t, const zir_node **attn) {
    hand_opts h = hand128;
    h.H = c->H, h.Hkv = c->Hkv, h.D = c->D, h.n_rot = c->D / 2, h.q_gain = c->q_gain;
    zir_graph *g = hand_attention(&h);
    zpass_opts po = kh_pass_opts(t, ZPH_PREFILL);
    po.kv_type = c->kv16 ? ZKV_F16 : ZKV_F32;
    zdiag d = {0};
    cr_assert_eq(zpass_run_pipeline(g, "shape,width,kv-type", NULL, &po, &d), ZOK, "%s", d.msg);
    fuse_attention(g, 16, 1); /* whatever the cost model says of the hand block */
    *attn = NULL;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == ZOP_KERNEL && g->nodes[i]->kp.tmpl == ZKT_ATTENTION) *attn = g->nodes[i];
    cr_assert_not_null(*attn, "h%d kv%d d%d: the attention was not fused", c->H, c->Hkv, c->D);
    return g;
}

/* The kernel of node n for target t: with use_cm, the matrix-unit one. */
static void cm_kernel(const zir_graph *g, const zir_node *n, const ztarget *t, bool act16, bool use_cm,
                      zarena *a, zcg_kernel *kn) {
    zcg_opts o = {.target = t, .phase = ZPH_PREFILL, .max_tokens = 512, .act_f16 = act16};
    zdiag d = {0};
    cr_assert_eq(zcg_node(g, n, &o, a, kn, &d), ZOK, "%s", d.msg);
    cr_assert_eq(strstr(kn->name, "attention_cm_") != NULL, use_cm, "%s: %s the matrix units", kn->name,
                 use_cm ? "expected" : "did not expect");
}

/* h200's kernels cannot run on llvmpipe, but every case (and a few tiles
 * of ZINC_ATTN_CM_LAYOUT) must compile with the optimizer, as a plan
 * would, and the NV to KHR rewrite must accept it; ZINC_ATTN_CM=0 brings
 * back the scalar kernel. */
Test(kernels_misc, attention_cm_compiles, .timeout = 300) {
    static const char *const layouts[] = {NULL, "16,16", "32,64", "48,16"};
    const ztarget *t = ztarget_find("h200");
    zarena *a = zarena_new();
    for (int i = 0; i < N_CM_CASES; i++) {
        const cm_case *c = &cm_cases[i];
        const zir_node *n;
        zir_graph *g = cm_graph(c, t, &n);
        for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
            /* the layouts on every other case: a compile takes seconds under ASan */
            if (li && i % 2) continue;
            if (layouts[li]) setenv("ZINC_ATTN_CM_LAYOUT", layouts[li], 1);
            zcg_kernel kn;
            cm_kernel(g, n, t, c->act16, true, a, &kn);
            unsetenv("ZINC_ATTN_CM_LAYOUT");
            zvk_spirv spv;
            zdiag d = {0};
            zvk_glsl_opts go = {.name = kn.name, .optimize = true};
            cr_assert_eq(zvk_glsl_compile(a, kn.glsl, strlen(kn.glsl), &go, &spv, &d), ZOK, "%s", d.msg);
            cr_assert(zspv_uses_coopmat_nv(spv.words, spv.n_words), "%s: no NV cooperative matrix", kn.name);
            uint32_t *khr;
            size_t n_khr;
            cr_assert_eq(zspv_coopmat_nv_to_khr(spv.words, spv.n_words, a, &khr, &n_khr, &d), ZOK, "%s: %s",
                         kn.name, d.msg);
            cr_log_info("%s (%s): %zu words of SPIR-V", kn.name, layouts[li] ? layouts[li] : "default",
                        spv.n_words);
        }
        setenv("ZINC_ATTN_CM", "0", 1);
        zcg_kernel kn;
        cm_kernel(g, n, t, c->act16, false, a, &kn);
        unsetenv("ZINC_ATTN_CM");
        zir_graph_free(g);
    }
    zarena_free(a);
}


/* Steps of T tokens after a prefix of pos (unchecked, interpreter only):
 * one tile and less, several tiles, one ending mid-tile, a single token,
 * and steps deep enough in the cache to take several key blocks before
 * their first query's diagonal. */
typedef struct cm_step {
    int64_t pos, T;
} cm_step;
static const cm_step cm_steps[] = {{0, 64}, {0, 100}, {37, 77}, {130, 19}, {200, 1}, {201, 150}};

static void cm_run(const cm_case *c, const ztarget *t) {
    const zir_node *n;
    zir_graph *g = cm_graph(c, t, &n);
    zcg_opts o = {.target = t, .phase = ZPH_PREFILL, .max_tokens = 512, .act_f16 = c->act16};
    char what[96];
    snprintf(what, sizeof what, "h%d kv%d d%d %s cache%s%s", c->H, c->Hkv, c->D, c->kv16 ? "f16" : "f32",
             c->act16 ? " fp16" : "", c->q_gain > 0 ? " large scores" : "");
    tu_rng r = tu_rng_seed(555);
    double worst = 0, tol = c->q_gain > 1 ? TOL_ATTN_CM_LARGE : TOL_ATTN_CM;
    for (size_t s = 0; s < sizeof cm_steps / sizeof cm_steps[0]; s++) {
        const cm_step *st = &cm_steps[s];
        zir_interp *it;
        zdiag d = {0};
        cr_assert_eq(zir_interp_new(g, 512, &it, &d), ZOK, "%s", d.msg);
        int32_t toks[512];
        for (int64_t i = 0; i < st->pos + st->T; i++)
            toks[i] = (int32_t)(tu_next(&r) % (uint64_t)g->hp.n_vocab);
        if (st->pos) cr_assert_eq(zir_interp_step(it, toks, st->pos, NULL, &d), ZOK, "%s", d.msg);
        cr_assert_eq(zir_interp_step(it, toks + st->pos, st->T, NULL, &d), ZOK, "%s", d.msg);
        kh_result res;
        cr_assert_eq(kh_check_node(&dev, g, n, &o, it, (zir_step){st->T, st->pos, 512}, &res, &d), ZOK,
                     "%s T=%lld pos=%lld: %s", what, (long long)st->T, (long long)st->pos, d.msg);
        cr_assert(strstr(res.kernel, "attention_cm_"), "%s: ran %s, not the matrix-unit kernel", what,
                  res.kernel);
        cr_expect(res.max_err <= tol, "%s: %s at T=%lld pos=%lld: error %.3g of the RMS > %.1g", what,
                  res.kernel, (long long)st->T, (long long)st->pos, res.max_err, tol);
        if (res.max_err > worst) worst = res.max_err;
        zir_interp_free(it);
    }
    cr_log_info("%s: max error %.3g of the RMS", what, worst);
    zir_graph_free(g);
}

/* Runs only where the device has cooperative matrices and subgroups of 32
 * (the H200; llvmpipe has neither). */
Test(kernels_misc, prefill_attention_cm, .timeout = 600) {
    if (!(dev.dev.prof.coopmat_nv || dev.dev.prof.coopmat_khr) || dev.dev.prof.subgroup_size != 32)
        cr_skip_test("%s: no cooperative matrix with subgroups of 32", dev.dev.prof.name);
    ztarget t = fit_target("h200");
    for (int i = 0; i < N_CM_CASES; i++)
        cm_run(&cm_cases[i], &t);
}

/* How far a plain fp32 angle (float(pos) * float(c)) is from the double
 * one, for the log: what the double-float angle in rope.glsl avoids. */
static double naive_angle_error(const hand_opts *h, int64_t pos) {
    double worst = 0;
    for (int j = 0; j < h->n_rot / 2; j++) {
        double c = (double)h->freq_scale * pow((double)h->theta, -(double)(2 * j) / h->n_rot);
        float af = (float)pos * (float)c;
        double e =
            fabs(cos((double)af) - cos((double)pos * c)) + fabs(sin((double)af) - sin((double)pos * c));
        if (e > worst) worst = e;
    }
    return worst;
}

/* RoPE far into the context: a prefill of `pos` tokens, then a step of 17
 * at pos, checked; the angle there is up to pos * freq_scale rad. */
static void rope_far(const hand_opts *h, int64_t pos, const char *what) {
    tu_rng r = tu_rng_seed(99);
    zir_value *tok;
    zir_graph *g = hand_graph_new(h, &tok);
    zir_value *ff = h->factors ? hand_weight(g, "rope_freqs", 1, h->n_rot / 2, 0, &r, 1.0f, 8.0f) : NULL;
    zir_attrs ra = hand_rope_attrs(h);
    zir_value *x = hand_reshape(g, "x", hand_rows(g, "x_flat", tok, (int64_t)h->H * h->D, &r), 3, h->H, h->D);
    g->logits = hand_op(g, ZOP_ROPE, "x_rope", x, ff, &ra);
    ztarget t = fit_target("h200");
    zcg_opts o = {.target = &t, .phase = ZPH_PREFILL, .max_tokens = 64};
    zir_interp *it;
    zdiag d = {0};
    cr_assert_eq(zir_interp_new(g, pos + 17, &it, &d), ZOK, "%s", d.msg);
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)pos);
    for (int64_t i = 0; i < pos; i++)
        toks[i] = (int32_t)(tu_next(&r) % (uint64_t)h->vocab);
    cr_assert_eq(zir_interp_step(it, toks, pos, NULL, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zir_interp_step(it, toks, 17, NULL, &d), ZOK, "%s", d.msg);
    kh_result res;
    const zir_node *n = g->logits->producer;
    cr_assert_eq(kh_check_node(&dev, g, n, &o, it, (zir_step){17, pos, pos + 17}, &res, &d), ZOK, "%s",
                 d.msg);
    cr_log_info("%s at pos %lld: kernel %s error %.2g of the RMS (a plain fp32 angle: cos/sin off by %.2g)",
                what, (long long)pos, res.kernel, res.max_err, naive_angle_error(h, pos));
    cr_expect(res.max_err <= kk_tol[KK_ROPE], "%s at pos %lld: error %.3g", what, (long long)pos,
              res.max_err);
    free(toks);
    zir_interp_free(it);
    zir_graph_free(g);
}

Test(kernels_misc, rope_far_positions) {
    hand_opts h = {.H = 2,
                   .D = 128,
                   .n_rot = 96,
                   .mode = ZROPE_NEOX,
                   .theta = 10000.0f,
                   .freq_scale = 1.0f,
                   .vocab = 31};
    rope_far(&h, 4079, "neox theta 1e4");
    rope_far(&h, 30000, "neox theta 1e4");
    h.mode = ZROPE_NORMAL;
    h.theta = 500000.0f;
    h.freq_scale = 0.25f;
    h.factors = true;
    rope_far(&h, 4079, "normal theta 5e5 scale 0.25 +factors");
    rope_far(&h, 30000, "normal theta 5e5 scale 0.25 +factors");
}
