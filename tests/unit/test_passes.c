/* The passes and the pass manager.
 *
 * 1. Equivalence: for every architecture, every transform alone (after
 *    shape,width) and the whole default pipeline, compiled for llvmpipe, h200
 *    and rdna4 in both phases with the verifier after every pass, the fused
 *    graph gives the same logits as the unfused one through the reference
 *    interpreter, in prefill, decode and chunked prefill. The interpreter runs
 *    a kernel's body op by op, so the comparison is exact: any difference is a
 *    wiring bug (a kernel reading the wrong value, a node moved before its
 *    input), not rounding.
 * 2. The fusion really happened: kernels are counted by template, each body is
 *    checked against its template's shape, and the count is written out by
 *    hand per target and phase, so that a pass that does nothing fails.
 * 3. Golden IR per pass (tests/passes/<pass>/<case>.zir); regenerate with
 *    ZINC_UPDATE_GOLDEN=1. The first line of each file is the zincc command
 *    that prints the rest, and one test runs that command.
 * 4. The pass manager: unknown names, --disable-pass, --print-after and
 *    --verify-each. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/arch.h"
#include "frontend/mkmodel.h"
#include "ir/interp.h"
#include "passes/pass.h"
#include "testutil.h"

/* ---- models ----------------------------------------------------------- */

typedef struct shape {
    uint32_t layers, hidden, ff, heads, kv_heads;
} shape;

/* The equivalence model: hidden 512 is where the targets part ways on the
 * MLP in prefill (see mlp_choice). Two layers, so that a kernel's output
 * feeding the next layer is exercised. */
static const shape EQ_SHAPE = {2, 512, 1536, 8, 4};
/* The golden model: one small layer keeps the files readable. */
static const shape GOLDEN_SHAPE = {1, 256, 768, 4, 2};

static void model_opts(zmk_arch arch, zmk_quant q, shape s, zmk_opts *o) {
    zmk_defaults(o);
    o->arch = arch;
    o->quant = q;
    o->layers = s.layers;
    o->hidden = s.hidden;
    o->ff = s.ff;
    o->heads = s.heads;
    o->kv_heads = s.kv_heads;
    o->head_dim = 64;
    o->vocab = 512;
    o->seed = 1;
    if (arch == ZMK_QWEN35 || arch == ZMK_QWEN35MOE) /* delta-net layers, then one of gated attention */
        o->full_attn = (int)s.layers;
}

static gguf_file *write_model(const zmk_opts *o, const char *name) {
    zdiag d = {0};
    const char *path = tu_tmp(name);
    cr_assert_eq(zmk_write(o, path, NULL, &d), ZOK, "%s", d.msg);
    gguf_file *f = NULL;
    cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
    return f;
}

static gguf_file *make_model(zmk_arch arch, zmk_quant q, shape s, const char *name) {
    zmk_opts o;
    model_opts(arch, q, s, &o);
    return write_model(&o, name);
}

/* What zincc passes for a target and phase (tools/zincc.c's defaults). */
static zpass_opts opts_for(const char *target, zpass_phase ph, zpass_report *rep) {
    const ztarget *t = ztarget_find(target);
    cr_assert_not_null(t, "no target profile '%s'", target);
    return (zpass_opts){.target = t,
                        .phase = ph,
                        .token_tile = t->prefill_tile,
                        .ctx = 4096,
                        .fuse_threshold = t->fuse_threshold,
                        .verify_each = true,
                        .report = rep};
}

static zir_graph *compile_without(const gguf_file *f, const char *pipeline, const char *disabled,
                                  const zpass_opts *o) {
    zir_graph *g = NULL;
    zdiag d = {0};
    cr_assert_eq(zir_build_from_gguf(f, &g, &d), ZOK, "%s", d.msg);
    zstatus s = zpass_run_pipeline(g, pipeline, disabled, o, &d);
    cr_assert_eq(s, ZOK, "pipeline %s (%s, %s): %s", pipeline, o->target->name, zpass_phase_name(o->phase),
                 d.msg);
    return g;
}

static zir_graph *compile(const gguf_file *f, const char *pipeline, const zpass_opts *o) {
    return compile_without(f, pipeline, NULL, o);
}

/* ---- running ------------------------------------------------------------ */

enum { N_TOK = 6, N_MODES = 3 }; /* prefill, decode, chunked prefill (4, 2) */
static const char *const mode_names[N_MODES] = {"prefill", "decode", "chunked prefill"};

static void step(zir_interp *it, const int32_t *tok, int n, float *out) {
    zdiag d = {0};
    cr_assert_eq(zir_interp_step(it, tok, n, out, &d), ZOK, "%s", d.msg);
}

/* Logits of all three modes into out[mode][N_TOK * vocab], poisoned with NaN
 * first so that a row the graph never wrote cannot pass as equal. */
static void run_modes(const zir_graph *g, const int32_t *tok, float *out[N_MODES]) {
    size_t n = (size_t)N_TOK * (size_t)g->hp.n_vocab;
    zir_interp *it;
    zdiag d = {0};
    cr_assert_eq(zir_interp_new(g, 32, &it, &d), ZOK, "%s", d.msg);
    for (int m = 0; m < N_MODES; m++) {
        out[m] = malloc(sizeof(float) * n);
        cr_assert_not_null(out[m]);
        for (size_t i = 0; i < n; i++)
            out[m][i] = NAN;
        zir_interp_reset(it);
        int chunk = m == 0 ? N_TOK : m == 1 ? 1 : 4;
        for (int t = 0; t < N_TOK; t += chunk) {
            int c = N_TOK - t < chunk ? N_TOK - t : chunk;
            step(it, tok + t, c, out[m] + (size_t)t * (size_t)g->hp.n_vocab);
        }
    }
    zir_interp_free(it);
}

static void free_modes(float *out[N_MODES]) {
    for (int m = 0; m < N_MODES; m++)
        free(out[m]);
}

/* Every element, exactly (see the file comment). */
static void expect_same(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        cr_assert(!isnan(want[i]), "%s: reference logit %zu is NaN", what, i);
        cr_assert(got[i] == want[i], "%s: logit %zu: fused %.9g, unfused %.9g", what, i, got[i], want[i]);
    }
}

/* The logits of f's graph as built, no pass at all, in every mode. */
static void unfused_logits(const gguf_file *f, const int32_t *tok, float *want[N_MODES]) {
    zir_graph *ref = NULL;
    zdiag d = {0};
    cr_assert_eq(zir_build_from_gguf(f, &ref, &d), ZOK, "%s", d.msg);
    run_modes(ref, tok, want);
    zir_graph_free(ref);
}

/* The logits of g in every mode are want's, element by element; frees g. */
static void expect_graph_same(zir_graph *g, const int32_t *tok, float *want[N_MODES]) {
    float *out[N_MODES];
    size_t n = (size_t)N_TOK * (size_t)g->hp.n_vocab;
    run_modes(g, tok, out);
    for (int m = 0; m < N_MODES; m++)
        expect_same(out[m], want[m], n, mode_names[m]);
    free_modes(out);
    zir_graph_free(g);
}

/* ---- kernel census ------------------------------------------------------ */

typedef struct census {
    int kernels[ZKT_COUNT]; /* [ZKT_NONE]: unused */
    int dequant_fused;      /* original nodes marked by fuse-dequant */
    int top;                /* top-level nodes */
} census;

/* The op names of a kernel's body, space-separated. */
static void body_string(const zir_node *k, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < k->n_body && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? " " : "", zir_ops[k->body[i]->op].name);
}

/* Each template's bodies as pass.h's zir_ktemplate comment states them. */
static bool body_fits(zir_ktemplate t, const char *b) {
    static const char *const ok[][7] = {
        [ZKT_MATMUL] = {"matmul add", "rms_norm matmul", "rms_norm matmul add", "matmul reshape kv_store",
                        "rms_norm matmul reshape kv_store", "rms_norm matmul add reshape kv_store",
                        "matmul add reshape kv_store"},
        [ZKT_GATE_UP_SWIGLU] = {"matmul matmul swiglu", "rms_norm matmul matmul swiglu"},
        [ZKT_MLP] = {"matmul matmul swiglu matmul", "rms_norm matmul matmul swiglu matmul",
                     "matmul matmul swiglu matmul add", "rms_norm matmul matmul swiglu matmul add"},
        [ZKT_ATTENTION] = {"attn_scores softmax_causal attn_mix",
                           /* decode, with the heads folded in (fuse-attn-head): qwen3, then llama/qwen2 */
                           "rms_norm rope rms_norm rope kv_store attn_scores softmax_causal attn_mix",
                           "rope rope kv_store attn_scores softmax_causal attn_mix"},
        [ZKT_HEAD] = {"rms_norm rope", "rms_norm rope kv_store", "rope kv_store"},
        [ZKT_MOE_GATE_UP] = {"matmul_id matmul_id swiglu", "rms_norm matmul_id matmul_id swiglu",
                             "moe_topk rms_norm matmul_id matmul_id swiglu"},
        [ZKT_MOE_DOWN] = {"matmul_id moe_sum", "matmul_id moe_sum add", "matmul_id" /* grouped */},
        [ZKT_MOE_SUM] = {"moe_sum add"},
        [ZKT_CONV] = {"ssm_conv silu"},
        [ZKT_DELTA] = {"slice reshape slice reshape slice reshape l2_norm l2_norm delta_net"},
        [ZKT_NORM_GATE] = {"rms_norm swiglu"},
        [ZKT_MATMUL_ROWS] =
            {"rms_norm matmul matmul", "rms_norm matmul matmul matmul",
             "rms_norm matmul matmul reshape kv_store", "rms_norm matmul matmul matmul reshape kv_store",
             /* a delta-net layer's beta, decay, qkv and z; z, beta, decay beside a q6_K qkv */
             "rms_norm matmul sigmoid matmul add softplus mul matmul matmul",
             "rms_norm matmul sigmoid matmul add softplus mul matmul"},
    };
    _Static_assert(sizeof ok / sizeof ok[0] == ZKT_COUNT, "a body list per template");
    for (size_t i = 0; i < sizeof ok[0] / sizeof ok[0][0]; i++)
        if (ok[t][i] && !strcmp(ok[t][i], b)) return true;
    return false;
}

static void count_dequant(const zir_node *n, census *c) {
    if (n->op == ZOP_KERNEL)
        for (int j = 0; j < n->n_body; j++)
            count_dequant(n->body[j], c);
    else
        c->dequant_fused += n->dequant == ZDQ_FUSED;
}

static census take_census(const zir_graph *g) {
    census c = {0};
    c.top = (int)g->n_nodes;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        count_dequant(n, &c);
        if (n->op != ZOP_KERNEL) continue;
        char b[256];
        body_string(n, b, sizeof b);
        cr_assert(n->kp.tmpl > ZKT_NONE && n->kp.tmpl < ZKT_COUNT, "kernel '%s' has no template",
                  n->out->name);
        cr_expect(body_fits(n->kp.tmpl, b), "kernel '%s' (%s) has body '%s'", n->out->name,
                  zir_ktemplate_name(n->kp.tmpl), b);
        c.kernels[n->kp.tmpl]++;
    }
    return c;
}

/* ---- what each pass must fuse, by hand --------------------------------- */

typedef enum pipe {
    P_DEQUANT,
    P_ATTN,
    P_MLP,
    P_NORM,
    P_RESIDUAL,
    P_HEAD,
    P_STORE,
    P_QKV,
    P_DEFAULT,
    P_COUNT
} pipe;
static const char *const pipe_names[P_COUNT] = {"fuse-dequant", "fuse-attn",     "fuse-mlp",
                                                "fuse-norm",    "fuse-residual", "fuse-head",
                                                "fuse-store",   "fuse-qkv",      "default"};

/* The MLP of the equivalence model (hidden 512, ff 1536, Q4_K):
 * - decode: one fused kernel on llvmpipe and rdna4 (removing three
 *   dispatches saves more than the partial sums cost); on h200 gate+up+
 *   SwiGLU, then down: 24 slices would leave most SMs idle, and the
 *   measured GEMV streams faster than the split MLP (passes/target.c);
 * - prefill on the GPUs: the on-chip accumulator of 4 x (512 + 64) B per
 *   token cuts the 64-token tile to 21 (h200, 48 KiB) or 28 (rdna4, 64 KiB)
 *   tokens, and re-reading ~1.4 MB of weights 3x / 2.3x as often costs more
 *   than the 2 crossings it saves: gate+up+SwiGLU;
 * - prefill on llvmpipe: its tile is 16 and 32 KiB holds 14, so the full
 *   MLP costs almost no extra weight traffic and wins. */
static zir_ktemplate mlp_choice(const char *target, zpass_phase ph) {
    if (ph == ZPH_DECODE) return strcmp(target, "h200") ? ZKT_MLP : ZKT_GATE_UP_SWIGLU;
    return strcmp(target, "llvmpipe") ? ZKT_GATE_UP_SWIGLU : ZKT_MLP;
}

static census expected(zmk_arch arch, pipe p, const char *target, zpass_phase ph) {
    int L = (int)EQ_SHAPE.layers, bias = arch == ZMK_QWEN2 ? 3 * L : 0;
    /* q: norm + rope (qwen3); k: [norm +] rope + store; llama's and qwen2's
     * q rope alone is no fusion */
    int heads = arch == ZMK_QWEN3 ? 2 * L : L;
    zir_ktemplate mlp = mlp_choice(target, ph);
    /* prefill on matrix units (h200, rdna4) keeps the norms as kernels of
     * their own: the GEMMs' tiles would each recompute them (fuse-norm) */
    bool tc = ph == ZPH_PREFILL && strcmp(target, "llvmpipe");
    census c = {0};
    /* embed + q, k, v, o, gate, up, down per layer + logits: all Q4_K or Q6_K */
    int dq = 1 + 7 * L + 1;
    switch (p) {
    case P_DEQUANT: c.dequant_fused = dq; break;
    case P_ATTN: c.kernels[ZKT_ATTENTION] = L; break;
    case P_MLP: c.kernels[mlp] = L; break;
    /* the output norm has one consumer; the attention norm is recomputed by
     * q, k and v, the MLP norm by gate and up (no MLP kernel yet) */
    case P_NORM: c.kernels[ZKT_MATMUL] = tc ? 0 : 1 + 5 * L; break;
    case P_RESIDUAL: c.kernels[ZKT_MATMUL] = 2 * L + bias; break;
    case P_HEAD: c.kernels[ZKT_HEAD] = heads; break;
    /* v -> reshape -> kv_store (qwen2's v bias is a node in between) */
    case P_STORE: c.kernels[ZKT_MATMUL] = arch == ZMK_QWEN2 ? 0 : L; break;
    /* in decode, q, k and v as one GEMV where they share a type: Q4_K_M
     * gives layer 1 of 2 a Q6_K attn_v (use_more_bits), which keeps a GEMV
     * of its own with a copy of the norm. qwen2's biases keep them apart.
     * Without fuse-mlp the MLP norm's gate and up are one too, the SwiGLU
     * reading both as exported values. */
    case P_QKV:
        c.kernels[ZKT_MATMUL_ROWS] = ph == ZPH_DECODE ? (bias ? 0 : L) + L : 0;
        c.kernels[ZKT_MATMUL] = ph == ZPH_DECODE && !bias ? 1 : 0;
        break;
    case P_DEFAULT:
        c.dequant_fused = dq;
        c.kernels[ZKT_ATTENTION] = L;
        c.kernels[mlp] = L;
        /* in decode, fuse-attn-head folds them into the attention kernel */
        c.kernels[ZKT_HEAD] = ph == ZPH_DECODE ? 0 : heads;
        /* attn_out + residual, output norm + logits, q, k and v with the
         * attention norm (and their biases), and down + residual when the
         * down projection is outside the MLP kernel */
        c.kernels[ZKT_MATMUL] = L + 1 + 3 * L + (mlp == ZKT_MLP ? 0 : L);
        /* without the norms: o and down with their residuals, v with its
         * store (qwen2: q, k and v with their biases) */
        if (tc) c.kernels[ZKT_MATMUL] = L + (bias ? 3 * L : L) + (mlp == ZKT_MLP ? 0 : L);
        /* fuse-qkv, as above: q, k (and v of layer 0) leave the count */
        if (ph == ZPH_DECODE && !bias) {
            c.kernels[ZKT_MATMUL_ROWS] = L;
            c.kernels[ZKT_MATMUL] -= 2 * L + 1;
        }
        break;
    default: break;
    }
    return c;
}

static void expect_census(const census *got, const census *want, const char *what) {
    for (int t = ZKT_NONE + 1; t < ZKT_COUNT; t++)
        cr_expect_eq(got->kernels[t], want->kernels[t], "%s: %d %s kernels, expected %d", what,
                     got->kernels[t], zir_ktemplate_name((zir_ktemplate)t), want->kernels[t]);
    cr_expect_eq(got->dequant_fused, want->dequant_fused, "%s: %d nodes dequantize in place, expected %d",
                 what, got->dequant_fused, want->dequant_fused);
}

/* The decisions a cost-model pass recorded: one per layer, as taken. */
static void expect_decisions(const zpass_report *r, pipe p, zir_ktemplate mlp, const char *what) {
    if (p != P_MLP && p != P_ATTN) return;
    zir_group grp = p == P_MLP ? ZG_MLP : ZG_ATTN;
    int n = 0;
    for (int i = 0; i < r->n; i++) {
        const zpass_decision *x = &r->items[i];
        if (x->group != grp) continue;
        n++;
        cr_expect(x->fused, "%s: layer %d not fused: %s", what, x->layer, x->reason);
        cr_expect_eq(x->chosen, p == P_MLP ? mlp : ZKT_ATTENTION, "%s: layer %d chose %s", what, x->layer,
                     zir_ktemplate_name(x->chosen));
        cr_expect_eq(x->crossings_after, 0.0 + (x->chosen == ZKT_GATE_UP_SWIGLU ? 2 : 0), "%s", what);
        cr_expect(x->reason[0], "%s: decision without a reason", what);
    }
    cr_expect_eq(n, (int)EQ_SHAPE.layers, "%s: %d decisions recorded", what, n);
}

/* ---- equivalence --------------------------------------------------------- */

static const char *const targets[] = {"llvmpipe", "h200", "rdna4"};

static void check_one(const gguf_file *f, zmk_arch arch, pipe p, const char *target, zpass_phase ph,
                      const int32_t *tok, float *want[N_MODES]) {
    char pipeline[256], what[160];
    if (p == P_DEFAULT)
        snprintf(pipeline, sizeof pipeline, "%s", zpass_default_pipeline());
    else
        snprintf(pipeline, sizeof pipeline, "shape,width,%s", pipe_names[p]);
    snprintf(what, sizeof what, "%s %s %s/%s", zmk_arch_name(arch), pipe_names[p], target,
             zpass_phase_name(ph));
    zpass_report rep = {.arena = zarena_new()};
    zpass_opts o = opts_for(target, ph, &rep);
    /* mm-f16 changes the arithmetic on purpose (fp16 operands on matrix
     * units): the fusions are checked without it, and its rounding against
     * the kernels in test_kernels_matmul. */
    zir_graph *g = compile_without(f, pipeline, "mm-f16", &o);
    census got = take_census(g), want_c = expected(arch, p, target, ph);
    expect_census(&got, &want_c, what);
    expect_decisions(&rep, p, mlp_choice(target, ph), what);
    float *out[N_MODES], *kv_want[N_MODES] = {0};
    run_modes(g, tok, out);
    /* The default pipeline also chooses the KV cache's storage (kv-type: f16
     * on the GPU targets), which rounds what is stored: the fusions must
     * then equal the unfused graph with the same storage. */
    if (p == P_DEFAULT) {
        zir_graph *k = compile(f, "shape,width,kv-type", &o);
        run_modes(k, tok, kv_want);
        want = kv_want;
        zir_graph_free(k);
    }
    size_t n = (size_t)N_TOK * (size_t)g->hp.n_vocab;
    for (int m = 0; m < N_MODES; m++) {
        char w[200];
        snprintf(w, sizeof w, "%s, run in %s", what, mode_names[m]);
        expect_same(out[m], want[m], n, w);
    }
    free_modes(out);
    if (kv_want[0]) free_modes(kv_want);
    zir_graph_free(g);
    zarena_free(rep.arena);
}

static void check_pipe(zmk_arch arch, pipe p) {
    gguf_file *f = make_model(arch, ZMK_Q4_K_M, EQ_SHAPE, "eq.gguf");
    tu_rng r = tu_rng_seed(1234 + (uint64_t)arch);
    int32_t tok[N_TOK];
    for (int i = 0; i < N_TOK; i++)
        tok[i] = (int32_t)(tu_next(&r) % 512);
    /* The reference: the graph as built, no pass at all. */
    float *want[N_MODES];
    unfused_logits(f, tok, want);
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++)
        for (int ph = 0; ph < ZPH_COUNT; ph++)
            check_one(f, arch, p, targets[t], (zpass_phase)ph, tok, want);
    free_modes(want);
    gguf_close(f);
}

#define EQ_TEST(arch_name, ARCH, pass_name, PIPE)                                                            \
    Test(equivalence, arch_name##_##pass_name, .timeout = 600) {                                             \
        check_pipe(ARCH, PIPE);                                                                              \
    }
#define EQ_ARCH(arch_name, ARCH)                                                                             \
    EQ_TEST(arch_name, ARCH, fuse_dequant, P_DEQUANT)                                                        \
    EQ_TEST(arch_name, ARCH, fuse_attn, P_ATTN)                                                              \
    EQ_TEST(arch_name, ARCH, fuse_mlp, P_MLP)                                                                \
    EQ_TEST(arch_name, ARCH, fuse_norm, P_NORM)                                                              \
    EQ_TEST(arch_name, ARCH, fuse_residual, P_RESIDUAL)                                                      \
    EQ_TEST(arch_name, ARCH, fuse_head, P_HEAD)                                                              \
    EQ_TEST(arch_name, ARCH, fuse_store, P_STORE)                                                            \
    EQ_TEST(arch_name, ARCH, fuse_qkv, P_QKV)                                                                \
    EQ_TEST(arch_name, ARCH, default_pipeline, P_DEFAULT)
EQ_ARCH(qwen3, ZMK_QWEN3)
EQ_ARCH(llama, ZMK_LLAMA)
EQ_ARCH(qwen2, ZMK_QWEN2)

/* qwen3moe (8 experts, 2 used): fuse-moe alone and the default pipeline give
 * the unfused logits exactly, with a moe_gate_up and a moe_down kernel per
 * layer, on every target and phase, and one decision per layer naming the
 * experts read. Decode runs them as GEMVs (the residual add inside
 * moe_down), prefill as grouped GEMMs (token tile above 1; moe_down is the
 * matmul_id alone), and the decision says so. */
static void check_moe(const char *pipeline) {
    gguf_file *f = make_model(ZMK_QWEN3MOE, ZMK_Q4_K_M, EQ_SHAPE, "eqmoe.gguf");
    int32_t tok[N_TOK] = {7, 300, 12, 511, 64, 3};
    float *want[N_MODES];
    unfused_logits(f, tok, want);
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++)
        for (int ph = 0; ph < ZPH_COUNT; ph++) {
            zpass_report rep = {.arena = zarena_new()};
            zpass_opts o = opts_for(targets[t], (zpass_phase)ph, &rep);
            zir_graph *g = compile_without(f, pipeline, "mm-f16,kv-type", &o);
            census c = take_census(g);
            cr_expect_eq(c.kernels[ZKT_MOE_GATE_UP], (int)EQ_SHAPE.layers, "%s: moe_gate_up kernels",
                         targets[t]);
            cr_expect_eq(c.kernels[ZKT_MOE_DOWN], (int)EQ_SHAPE.layers, "%s: moe_down kernels", targets[t]);
            int grouped = 0, decided = 0, said = 0, normed = 0, norms = 0, ranked = 0, topks = 0;
            for (uint32_t i = 0; i < g->n_nodes; i++) {
                const zir_node *k = g->nodes[i];
                grouped += k->op == ZOP_KERNEL && k->kp.token_tile > 1 &&
                           (k->kp.tmpl == ZKT_MOE_GATE_UP || k->kp.tmpl == ZKT_MOE_DOWN);
                bool gu = k->op == ZOP_KERNEL && k->kp.tmpl == ZKT_MOE_GATE_UP;
                for (int j = 0; gu && j < k->n_body; j++) {
                    normed += k->body[j]->op == ZOP_RMS_NORM;
                    ranked += k->body[j]->op == ZOP_MOE_TOPK && k->body[j]->exported;
                }
                norms += k->op == ZOP_RMS_NORM;
                topks += k->op == ZOP_MOE_TOPK;
            }
            /* decode (fuse-norm): the ffn norm in the prologues of the router
             * and of the expert gate+up GEMV, no norm left as a kernel; the
             * grouped GEMMs of prefill keep it apart */
            bool decode_default = !pipeline && ph == ZPH_DECODE;
            cr_expect_eq(normed, decode_default ? (int)EQ_SHAPE.layers : 0,
                         "%s %s: gate+up kernels with the norm", targets[t],
                         zpass_phase_name((zpass_phase)ph));
            if (decode_default) cr_expect_eq(norms, 0, "%s decode: norms left as kernels", targets[t]);
            /* decode (fuse-topk): the router's top-k in the gate+up GEMV's
             * prologue, its route exported to the down projection */
            cr_expect_eq(ranked, decode_default ? (int)EQ_SHAPE.layers : 0, "%s %s: gate+up kernels ranking",
                         targets[t], zpass_phase_name((zpass_phase)ph));
            cr_expect_eq(topks, decode_default ? 0 : (int)EQ_SHAPE.layers, "%s %s: top-k kernels", targets[t],
                         zpass_phase_name((zpass_phase)ph));
            int said_topk = 0;
            for (int i = 0; i < rep.n; i++)
                said_topk += rep.items[i].fused && !strncmp(rep.items[i].reason, "top-k ranked in the prologue", 28);
            cr_expect_eq(said_topk, decode_default ? (int)EQ_SHAPE.layers : 0, "%s %s: fuse-topk decisions",
                         targets[t], zpass_phase_name((zpass_phase)ph));
            cr_expect_eq(grouped, ph == ZPH_PREFILL ? 2 * (int)EQ_SHAPE.layers : 0, "%s %s: grouped kernels",
                         targets[t], zpass_phase_name((zpass_phase)ph));
            for (int i = 0; i < rep.n; i++) {
                decided += rep.items[i].fused && strstr(rep.items[i].reason, "experts: 2 of 8 read") != NULL;
                said += strstr(rep.items[i].reason, "(grouped GEMMs:") != NULL;
            }
            cr_expect_eq(decided, (int)EQ_SHAPE.layers, "%s: fuse-moe decisions", targets[t]);
            cr_expect_eq(said, ph == ZPH_PREFILL ? (int)EQ_SHAPE.layers : 0, "%s %s: grouped decisions",
                         targets[t], zpass_phase_name((zpass_phase)ph));
            expect_graph_same(g, tok, want);
            zarena_free(rep.arena);
        }
    free_modes(want);
    gguf_close(f);
}

Test(equivalence, qwen3moe_fuse_moe, .timeout = 600) {
    check_moe("shape,width,fuse-moe");
}
Test(equivalence, qwen3moe_default_pipeline, .timeout = 600) {
    check_moe(NULL);
}

/* mm-f16 gives the expert matmuls of prefill's grouped GEMMs fp16
 * operands where the target has matrix units (h200, rdna4), as it does the
 * dense GEMMs: the three of each layer, and nothing in decode (GEMVs) or on
 * llvmpipe. */
Test(passes, mm_f16_marks_grouped_expert_matmuls, .timeout = 300) {
    gguf_file *f = make_model(ZMK_QWEN3MOE, ZMK_Q4_K_M, EQ_SHAPE, "f16moe.gguf");
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++)
        for (int ph = 0; ph < ZPH_COUNT; ph++) {
            zpass_report rep = {.arena = zarena_new()};
            zpass_opts o = opts_for(targets[t], (zpass_phase)ph, &rep);
            zir_graph *g = compile(f, NULL, &o);
            int marked = 0, ids = 0;
            for (uint32_t i = 0; i < g->n_nodes; i++) {
                const zir_node *k = g->nodes[i];
                for (int j = 0; j < (k->op == ZOP_KERNEL ? k->n_body : 1); j++) {
                    const zir_node *x = k->op == ZOP_KERNEL ? k->body[j] : k;
                    ids += x->op == ZOP_MATMUL_ID;
                    marked += x->op == ZOP_MATMUL_ID && x->attr.mm_f16;
                }
            }
            bool want = ph == ZPH_PREFILL && o.target->coopmat;
            cr_expect_eq(ids, 3 * (int)EQ_SHAPE.layers, "%s %s: expert matmuls", targets[t],
                         zpass_phase_name((zpass_phase)ph));
            cr_expect_eq(marked, want ? ids : 0, "%s %s: expert matmuls with fp16 operands", targets[t],
                         zpass_phase_name((zpass_phase)ph));
            zir_graph_free(g);
            zarena_free(rep.arena);
        }
    gguf_close(f);
}

/* A qwen35 model whose delta-net layers' beta and alpha projections have
 * 32 rows, as Qwen3.5-9B's (EQ_SHAPE: a delta-net layer, then a gated
 * attention layer). */
static gguf_file *q35_32_rows(void) {
    zmk_opts o;
    model_opts(ZMK_QWEN35, ZMK_Q4_K_M, EQ_SHAPE, &o);
    o.ssm_heads = 32;
    return write_model(&o, "q35gemv.gguf");
}

typedef struct gemv_count {
    int gemv;     /* matmuls with attr.mm_gemv */
    int rows32;   /* matmuls of 32 rows */
    int gemv32;   /* of which mm_gemv, not mm_f16 */
    int gemm;     /* plain, matmul-kernel and gate+up matmuls of other widths but the logits */
    int gemm_f16; /* of which mm_f16, not mm_gemv */
    int said;     /* report lines of a multi-row GEMV decision */
} gemv_count;

static gemv_count count_gemvs(const zir_graph *g, const zpass_report *rep) {
    gemv_count c = {0};
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *k = g->nodes[i];
        bool gemm = k->out != g->logits &&
                    (k->op == ZOP_MATMUL ||
                     (k->op == ZOP_KERNEL && (k->kp.tmpl == ZKT_MATMUL || k->kp.tmpl == ZKT_GATE_UP_SWIGLU)));
        for (int j = 0; j < (k->op == ZOP_KERNEL ? k->n_body : 1); j++) {
            const zir_node *x = k->op == ZOP_KERNEL ? k->body[j] : k;
            if (x->op != ZOP_MATMUL) continue;
            bool r32 = x->in[1]->shape[0] == 32;
            c.gemv += x->attr.mm_gemv;
            c.rows32 += r32;
            c.gemv32 += r32 && x->attr.mm_gemv && !x->attr.mm_f16;
            c.gemm += gemm && !r32;
            c.gemm_f16 += gemm && !r32 && x->attr.mm_f16 && !x->attr.mm_gemv;
        }
    }
    for (int i = 0; rep && i < rep->n; i++)
        c.said += !strncmp(rep->items[i].reason, "multi-row GEMV", 14);
    return c;
}

/* mm-f16 and the cost model (zcost_prefill_gemv, 512-token steps): on
 * h200 in prefill the 32-row projections go to the multi-row GEMV
 * (attr.mm_gemv, fp32 operands: ~1.5 us against the GEMM tiles' floor, 8
 * K steps of 1 us), one report line each with the arithmetic, and every
 * wider matmul keeps the GEMMs and fp16 operands (256 rows: 11.7 us
 * against 8). llvmpipe and rdna4 (no measured GEMM step or GEMV
 * throughput) and decode never choose it. */
Test(passes, mm_f16_sends_32_row_prefill_matmuls_to_the_gemv, .timeout = 300) {
    unsetenv("ZINC_PREFILL_GEMV");
    gguf_file *f = q35_32_rows();
    int L = (int)EQ_SHAPE.layers - 1; /* the delta-net layers */
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++)
        for (int ph = 0; ph < ZPH_COUNT; ph++) {
            zpass_report rep = {.arena = zarena_new()};
            zpass_opts o = opts_for(targets[t], (zpass_phase)ph, &rep);
            zir_graph *g = compile(f, NULL, &o);
            gemv_count c = count_gemvs(g, &rep);
            bool want = ph == ZPH_PREFILL && !strcmp(targets[t], "h200");
            const char *ph_name = zpass_phase_name((zpass_phase)ph);
            cr_expect_eq(c.rows32, 2 * L, "%s %s: 32-row matmuls", targets[t], ph_name);
            cr_expect_eq(c.gemv, want ? 2 * L : 0, "%s %s: multi-row GEMVs", targets[t], ph_name);
            cr_expect_eq(c.gemv32, want ? 2 * L : 0, "%s %s: 32-row GEMVs, fp32", targets[t], ph_name);
            cr_expect_eq(c.said, want ? 2 * L : 0, "%s %s: GEMV decisions reported", targets[t], ph_name);
            if (ph == ZPH_PREFILL && o.target->coopmat)
                cr_expect(c.gemm > 0 && c.gemm_f16 == c.gemm, "%s: %d of %d wider matmuls in fp16",
                          targets[t], c.gemm_f16, c.gemm);
            for (int i = 0; want && i < rep.n; i++)
                if (!strncmp(rep.items[i].reason, "multi-row GEMV", 14))
                    cr_expect(strstr(rep.items[i].reason, "2 x 512 x 32 x 512 flop") &&
                                  strstr(rep.items[i].reason, "8 K steps"),
                              "%s", rep.items[i].reason);
            zir_graph_free(g);
            zarena_free(rep.arena);
        }
    gguf_close(f);
}

/* ZINC_PREFILL_GEMV=0 keeps the GEMMs on h200; =1 sends every prefill
 * matmul the multi-row GEMV can take to it on any target: plain matmuls
 * and matmul kernels (norm prologue, epilogues, KV store), not gate+up or
 * the whole MLP, nor the logits. Decode is never asked. */
Test(passes, prefill_gemv_knob, .timeout = 300) {
    gguf_file *f = q35_32_rows();
    setenv("ZINC_PREFILL_GEMV", "0", 1);
    zpass_opts o = opts_for("h200", ZPH_PREFILL, NULL);
    zir_graph *g = compile(f, NULL, &o);
    cr_expect_eq(count_gemvs(g, NULL).gemv, 0, "h200, ZINC_PREFILL_GEMV=0");
    zir_graph_free(g);
    setenv("ZINC_PREFILL_GEMV", "1", 1);
    for (int ph = 0; ph < ZPH_COUNT; ph++) {
        o = opts_for("llvmpipe", (zpass_phase)ph, NULL);
        g = compile(f, NULL, &o);
        int want = 0;
        for (uint32_t i = 0; i < g->n_nodes; i++) {
            const zir_node *k = g->nodes[i];
            want += k->out != g->logits &&
                    (k->op == ZOP_MATMUL || (k->op == ZOP_KERNEL && k->kp.tmpl == ZKT_MATMUL));
        }
        gemv_count c = count_gemvs(g, NULL);
        cr_expect(want > 2 * ((int)EQ_SHAPE.layers - 1), "%d matmul nodes", want);
        cr_expect_eq(c.gemv, ph == ZPH_PREFILL ? want : 0, "llvmpipe %s, ZINC_PREFILL_GEMV=1",
                     zpass_phase_name((zpass_phase)ph));
        zir_graph_free(g);
    }
    unsetenv("ZINC_PREFILL_GEMV");
    gguf_close(f);
}

/* qwen35 (EQ_SHAPE: a delta-net layer, then a gated attention layer, whose
 * sigmoid of a slice of q stays a kernel of its own): fuse-epilogue takes
 * beta's sigmoid and the decay's softplus and product by ssm_a into the
 * epilogues of their matmul kernels (after fuse-residual's bias), on every
 * target and phase: no sigmoid, softplus or mul is left outside a kernel,
 * each layer has one matmul kernel ending in a sigmoid and one ending in
 * softplus then mul, three decisions a layer say so, and the logits are
 * the unfused graph's exactly. */
Test(equivalence, qwen35_fuse_epilogue, .timeout = 600) {
    gguf_file *f = make_model(ZMK_QWEN35, ZMK_Q4_K_M, EQ_SHAPE, "eqq35.gguf");
    int32_t tok[N_TOK] = {7, 300, 12, 511, 64, 3};
    float *want[N_MODES];
    unfused_logits(f, tok, want);
    int L = (int)EQ_SHAPE.layers - 1; /* the delta-net layers */
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++)
        for (int ph = 0; ph < ZPH_COUNT; ph++) {
            zpass_report rep = {.arena = zarena_new()};
            zpass_opts o = opts_for(targets[t], (zpass_phase)ph, &rep);
            zir_graph *g = compile_without(f, "shape,width,fuse-dequant,fuse-residual,fuse-epilogue", "mm-f16,kv-type", &o);
            int loose = 0, beta = 0, decay = 0, said = 0;
            for (uint32_t i = 0; i < g->n_nodes; i++) {
                const zir_node *k = g->nodes[i];
                const zir_node *p = k->n_in ? k->in[0]->producer : NULL;
                loose += (k->op == ZOP_SIGMOID || k->op == ZOP_SOFTPLUS || k->op == ZOP_MUL) && p &&
                         (p->op == ZOP_MATMUL || (p->op == ZOP_KERNEL && p->kp.tmpl == ZKT_MATMUL));
                if (k->op != ZOP_KERNEL || k->kp.tmpl != ZKT_MATMUL) continue;
                const zir_node *last = k->body[k->n_body - 1], *prev = k->n_body > 1 ? k->body[k->n_body - 2] : NULL;
                beta += last->op == ZOP_SIGMOID;
                decay += last->op == ZOP_MUL && prev && prev->op == ZOP_SOFTPLUS;
            }
            for (int i = 0; i < rep.n; i++)
                said += !strncmp(rep.items[i].reason, "sigmoid done in the epilogue", 28) ||
                        !strncmp(rep.items[i].reason, "softplus done in the epilogue", 29) ||
                        !strncmp(rep.items[i].reason, "mul done in the epilogue", 24);
            const char *ph_name = zpass_phase_name((zpass_phase)ph);
            cr_expect_eq(loose, 0, "%s %s: sigmoid, softplus or mul outside a kernel", targets[t], ph_name);
            cr_expect_eq(beta, L, "%s %s: matmul kernels ending in a sigmoid", targets[t], ph_name);
            cr_expect_eq(decay, L, "%s %s: matmul kernels ending in softplus and mul", targets[t], ph_name);
            cr_expect_eq(said, 3 * L, "%s %s: fuse-epilogue decisions: %d of %d", targets[t], ph_name, said, rep.n);
            expect_graph_same(g, tok, want);
            zarena_free(rep.arena);
        }
    free_modes(want);
    gguf_close(f);
}

/* fuse-conv, fuse-delta and fuse-norm-gate on qwen35 and qwen35moe
 * (EQ_SHAPE: a delta-net layer, then a gated attention layer), every target
 * and phase, the whole default pipeline: each delta-net layer is three
 * kernels where it was nine (conv + SiLU; the three slices, two views, two
 * L2 norms and the delta rule; the norm times SiLU(z)), no ssm_conv, slice,
 * l2_norm, delta_net or the gated norm's swiglu is left outside them,
 * the report says each fusion, and the logits are the unfused graph's
 * exactly. */
static void check_delta_layer_fusions(zmk_arch arch, const char *file) {
    gguf_file *f = make_model(arch, ZMK_Q4_K_M, EQ_SHAPE, file);
    int32_t tok[N_TOK] = {7, 300, 12, 511, 64, 3};
    float *want[N_MODES];
    unfused_logits(f, tok, want);
    int L = (int)EQ_SHAPE.layers - 1; /* the delta-net layers */
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++)
        for (int ph = 0; ph < ZPH_COUNT; ph++) {
            zpass_report rep = {.arena = zarena_new()};
            zpass_opts o = opts_for(targets[t], (zpass_phase)ph, &rep);
            zir_graph *g = compile_without(f, NULL, "mm-f16,kv-type", &o); /* those two round */
            int loose = 0, conv = 0, delta = 0, gate = 0, said = 0;
            for (uint32_t i = 0; i < g->n_nodes; i++) {
                const zir_node *k = g->nodes[i];
                loose += k->op == ZOP_SSM_CONV || k->op == ZOP_L2_NORM || k->op == ZOP_DELTA_NET ||
                         (k->op == ZOP_SLICE && k->layer < L) || (k->op == ZOP_SWIGLU && k->layer < L);
                if (k->op != ZOP_KERNEL) continue;
                char b[256];
                body_string(k, b, sizeof b);
                conv += k->kp.tmpl == ZKT_CONV && !strcmp(b, "ssm_conv silu");
                delta += k->kp.tmpl == ZKT_DELTA &&
                         !strcmp(b, "slice reshape slice reshape slice reshape l2_norm l2_norm delta_net");
                gate += k->kp.tmpl == ZKT_NORM_GATE && !strcmp(b, "rms_norm swiglu");
            }
            for (int i = 0; i < rep.n; i++)
                said += rep.items[i].chosen == ZKT_CONV || rep.items[i].chosen == ZKT_DELTA ||
                        rep.items[i].chosen == ZKT_NORM_GATE;
            const char *ph_name = zpass_phase_name((zpass_phase)ph);
            cr_expect_eq(loose, 0, "%s %s: %d delta-net ops outside a kernel", targets[t], ph_name, loose);
            cr_expect_eq(conv, L, "%s %s: conv + silu kernels", targets[t], ph_name);
            cr_expect_eq(delta, L, "%s %s: delta kernels with the slices and norms", targets[t], ph_name);
            cr_expect_eq(gate, L, "%s %s: norm + gate kernels", targets[t], ph_name);
            cr_expect_eq(said, 3 * L, "%s %s: decisions: %d", targets[t], ph_name, said);
            expect_graph_same(g, tok, want);
            zarena_free(rep.arena);
        }
    free_modes(want);
    gguf_close(f);
}

Test(equivalence, qwen35_delta_layer_fusions, .timeout = 600) {
    check_delta_layer_fusions(ZMK_QWEN35, "eqq35d.gguf");
}

Test(equivalence, qwen35moe_delta_layer_fusions, .timeout = 600) {
    check_delta_layer_fusions(ZMK_QWEN35MOE, "eqq35md.gguf");
}

/* fuse-qkv on a delta-net layer: its qkv, z, beta and alpha read one normed
 * row; where they share a weight type they are one rows GEMV whose
 * segments carry beta's sigmoid and the decay's bias, softplus and product
 * by ssm_a, qkv and z leaving as they are for the conv and the gated norm. */

/* The rows kernel that computes l<l>.<what>, or NULL. */
static const zir_node *rows_of(const zir_graph *g, int l, const char *what) {
    char name[32];
    snprintf(name, sizeof name, "l%d.%s", l, what);
    const zir_value *v = zir_find(g, name);
    const zir_node *p = v ? v->producer : NULL;
    const zir_node *k = p && p->parent ? p->parent : p;
    return k && k->op == ZOP_KERNEL && k->kp.tmpl == ZKT_MATMUL_ROWS ? k : NULL;
}

/* Decisions whose reason starts with `start`. */
static int said(const zpass_report *r, const char *start) {
    int n = 0;
    for (int i = 0; i < r->n; i++)
        n += !strncmp(r->items[i].reason, start, strlen(start));
    return n;
}

/* Layer l of g (a delta-net layer): one rows kernel holding beta, the
 * decay and z (its output), and qkv too where want_qkv (else qkv a matmul
 * kernel of its own, with its copy of the norm); the verifier has checked
 * that every segment but the last is exported. */
static void expect_delta_rows(const zir_graph *g, int l, bool want_qkv, const char *what) {
    const zir_node *k = rows_of(g, l, "z");
    cr_assert_not_null(k, "%s: layer %d: z is not a rows GEMV's", what, l);
    char b[256];
    body_string(k, b, sizeof b);
    const char *want = want_qkv ? "rms_norm matmul sigmoid matmul add softplus mul matmul matmul"
                                : "rms_norm matmul sigmoid matmul add softplus mul matmul";
    cr_expect_str_eq(b, want, "%s: layer %d", what, l);
    cr_expect(rows_of(g, l, "beta") == k && rows_of(g, l, "decay") == k, "%s: layer %d: the gates", what, l);
    cr_expect((rows_of(g, l, "qkv") == k) == want_qkv, "%s: layer %d: qkv", what, l);
    char name[32];
    snprintf(name, sizeof name, "l%d.z", l);
    cr_expect_str_eq(k->out->name, name, "%s: the last segment gives the kernel's output", what);
    if (!want_qkv) {
        snprintf(name, sizeof name, "l%d.qkv", l);
        const zir_node *q = zir_find(g, name)->producer;
        cr_expect(q->op == ZOP_KERNEL && q->kp.tmpl == ZKT_MATMUL && q->body[0]->op == ZOP_RMS_NORM,
                  "%s: layer %d: the q6_K qkv keeps a GEMV and a norm of its own", what, l);
    }
}

/* The kernels of layer l's attention group, one line each: template and body. */
static void attn_layer_string(const zir_graph *g, int l, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (uint32_t i = 0; i < g->n_nodes && o < cap; i++) {
        const zir_node *n = g->nodes[i];
        if (n->layer != l || n->group != ZG_ATTN) continue;
        char b[256] = "";
        if (n->op == ZOP_KERNEL) body_string(n, b, sizeof b);
        o += (size_t)snprintf(buf + o, cap - o, "%s %s: %s\n", n->out->name,
                              n->op == ZOP_KERNEL ? zir_ktemplate_name(n->kp.tmpl) : zir_ops[n->op].name, b);
    }
}

/* Layer l's attention kernels are those fuse-qkv made before it took
 * epilogues and exported values (ZINC_ROWS_EXPORT=0). */
static void expect_attn_unchanged(const gguf_file *f, const zir_graph *g, int l, const zpass_opts *o,
                                  const char *what) {
    setenv("ZINC_ROWS_EXPORT", "0", 1);
    zpass_opts o2 = *o;
    o2.report = NULL;
    zir_graph *before = compile_without(f, NULL, "mm-f16,kv-type", &o2);
    unsetenv("ZINC_ROWS_EXPORT");
    static char a[8192], b[8192];
    attn_layer_string(g, l, a, sizeof a);
    attn_layer_string(before, l, b, sizeof b);
    cr_expect(strstr(a, " matmul_rows: "), "%s: no rows GEMV in the attention layer:\n%s", what, a);
    cr_expect_str_eq(a, b, "%s: the attention layer changed", what);
    zir_graph_free(before);
}

/* Whether layer l's qkv has the type of its z (the gates': all q4_K). */
static bool qkv_joins(const zir_graph *g, int l) {
    char q[48], z[48];
    snprintf(q, sizeof q, "blk.%d.attn_qkv.weight", l);
    snprintf(z, sizeof z, "blk.%d.attn_gate.weight", l);
    return zir_find(g, q)->dtype == zir_find(g, z)->dtype;
}

/* EQ_SHAPE's two layers (a delta-net layer, then gated attention) and
 * four (layer 2 a use_more_bits layer: its qkv q6_K, so z, beta and alpha
 * join without it; qwen35moe's eight experts make every qkv q8_0),
 * qwen35 and qwen35moe, every target, decode and a batch step of 4 rows
 * (multi-row GEMVs): the kernels above, a decision a layer with the count,
 * the attention layers as before, and the unfused graph's logits exactly.
 * Prefill leaves the projections apart. */
static void check_delta_rows(zmk_arch arch, uint32_t layers, const char *file) {
    shape sh = EQ_SHAPE;
    sh.layers = layers;
    gguf_file *f = make_model(arch, ZMK_Q4_K_M, sh, file);
    int32_t tok[N_TOK] = {7, 300, 12, 511, 64, 3};
    float *want[N_MODES];
    unfused_logits(f, tok, want);
    int L = (int)layers - 1; /* the delta-net layers */
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++)
        for (int mode = 0; mode < 3; mode++) {
            zpass_report rep = {.arena = zarena_new()};
            zpass_opts o = opts_for(targets[t], mode == 1 ? ZPH_PREFILL : ZPH_DECODE, &rep);
            if (mode == 2) o.phase = ZPH_PREFILL, o.batch_rows = 4;
            char what[96];
            snprintf(what, sizeof what, "%s %dL %s/%s", zmk_arch_name(arch), (int)layers, targets[t],
                     mode == 0   ? "decode"
                     : mode == 1 ? "prefill"
                                 : "batch of 4");
            zir_graph *g = compile_without(f, NULL, "mm-f16,kv-type", &o);
            int n4 = said(&rep, "4 of its 4 matmuls (2 with their epilogues) as one GEMV over their rows: "),
                n3 = said(&rep, "3 of its 4 matmuls (2 with their epilogues) as one GEMV over their rows: ");
            if (mode == 1) {
                for (int l = 0; l < (int)layers; l++)
                    cr_expect(!rows_of(g, l, "z") && !rows_of(g, l, "k"), "%s: layer %d has rows", what, l);
                cr_expect_eq(n4 + n3, 0, "%s: decisions", what);
            } else {
                int apart = 0;
                for (int l = 0; l < L; l++) {
                    expect_delta_rows(g, l, qkv_joins(g, l), what);
                    apart += !qkv_joins(g, l);
                }
                cr_expect_eq(n4, L - apart, "%s: 4-segment decisions", what);
                cr_expect_eq(n3, apart, "%s: 3-segment decisions", what);
                expect_attn_unchanged(f, g, L, &o, what);
            }
            expect_graph_same(g, tok, want);
            zarena_free(rep.arena);
        }
    free_modes(want);
    gguf_close(f);
}

Test(equivalence, qwen35_delta_rows, .timeout = 600) {
    check_delta_rows(ZMK_QWEN35, 2, "eqq35r.gguf");
    check_delta_rows(ZMK_QWEN35, 4, "eqq35r4.gguf");
}

Test(equivalence, qwen35moe_delta_rows, .timeout = 600) {
    check_delta_rows(ZMK_QWEN35MOE, 2, "eqq35mr.gguf");
}

/* ZINC_ROWS_EXPORT=0 (the A/B knob): segments only read through one view,
 * with no epilogue, as before: the delta layer's four projections keep
 * their own GEMVs (fuse-epilogue's gates in two of them), the attention
 * layer's q and k stay one. */
Test(passes, rows_export_knob_keeps_the_delta_gemvs) {
    gguf_file *f = make_model(ZMK_QWEN35, ZMK_Q4_K_M, EQ_SHAPE, "q35knob.gguf");
    setenv("ZINC_ROWS_EXPORT", "0", 1);
    zpass_opts o = opts_for("h200", ZPH_DECODE, NULL);
    zir_graph *g = compile(f, NULL, &o);
    unsetenv("ZINC_ROWS_EXPORT");
    static const char *const own[] = {"qkv", "z", "beta", "decay"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "l0.%s", own[i]);
        const zir_node *p = zir_find(g, name)->producer;
        cr_expect(p->op == ZOP_KERNEL && p->kp.tmpl == ZKT_MATMUL, "%s: %s", name,
                  zir_ktemplate_name(p->op == ZOP_KERNEL ? p->kp.tmpl : ZKT_NONE));
    }
    cr_expect_not_null(rows_of(g, 1, "k"), "ZINC_ROWS_EXPORT=0: the attention layer's q and k");
    zir_graph_free(g);
    gguf_close(f);
}

/* The analyses alone change nothing: a baseline for the counts above. */
Test(equivalence, analyses_fuse_nothing) {
    gguf_file *f = make_model(ZMK_QWEN3, ZMK_Q4_K_M, EQ_SHAPE, "an.gguf");
    zpass_opts o = opts_for("h200", ZPH_PREFILL, NULL);
    zir_graph *g = compile(f, "shape,width", &o);
    census c = take_census(g), none = {0};
    expect_census(&c, &none, "shape,width");
    zir_graph_free(g);
    gguf_close(f);
}

/* ---- golden IR per pass ------------------------------------------------- */

typedef struct golden_case {
    const char *file; /* under tests/passes/, named <pass>/<case>.zir */
    zmk_arch arch;
    zmk_quant quant;
    shape s;
    const char *passes, *target;
    zpass_phase phase;
} golden_case;

#define DEFAULT_PASSES                                                                                       \
    "shape,width,kv-type,fuse-dequant,fuse-attn,fuse-head,fuse-mlp,fuse-qkv,fuse-norm,fuse-residual,fuse-"   \
    "store"
static const golden_case goldens[] = {
    {"fuse-dequant/qwen3-q4km", ZMK_QWEN3, ZMK_Q4_K_M, GOLDEN_SHAPE, "shape,width,fuse-dequant", "h200",
     ZPH_PREFILL},
    {"fuse-dequant/llama-f16", ZMK_LLAMA, ZMK_F16, GOLDEN_SHAPE, "shape,width,fuse-dequant", "h200",
     ZPH_PREFILL},
    {"fuse-attn/qwen3-h200-prefill", ZMK_QWEN3, ZMK_Q4_K_M, GOLDEN_SHAPE, "shape,width,fuse-attn", "h200",
     ZPH_PREFILL},
    {"fuse-attn/qwen3-h200-decode", ZMK_QWEN3, ZMK_Q4_K_M, GOLDEN_SHAPE, "shape,width,fuse-attn", "h200",
     ZPH_DECODE},
    {"fuse-mlp/qwen3-h200-prefill", ZMK_QWEN3, ZMK_Q4_K_M, GOLDEN_SHAPE, "shape,width,fuse-mlp", "h200",
     ZPH_PREFILL},
    {"fuse-mlp/qwen3-h200-decode", ZMK_QWEN3, ZMK_Q4_K_M, GOLDEN_SHAPE, "shape,width,fuse-mlp", "h200",
     ZPH_DECODE},
    {"fuse-mlp/qwen3-hidden512-h200-prefill",
     ZMK_QWEN3,
     ZMK_Q4_K_M,
     {1, 512, 1536, 8, 4},
     "shape,width,fuse-mlp",
     "h200",
     ZPH_PREFILL},
    {"fuse-norm/qwen3-h200-prefill", ZMK_QWEN3, ZMK_Q4_K_M, GOLDEN_SHAPE, "shape,width,fuse-norm", "h200",
     ZPH_PREFILL},
    {"fuse-norm/after-fuse-mlp",
     ZMK_LLAMA,
     ZMK_Q4_K_M,
     {1, 512, 1536, 8, 4},
     "shape,width,fuse-mlp,fuse-norm",
     "h200",
     ZPH_PREFILL},
    {"fuse-residual/qwen2-h200-prefill", ZMK_QWEN2, ZMK_Q4_K_M, GOLDEN_SHAPE, "shape,width,fuse-residual",
     "h200", ZPH_PREFILL},
    {"fuse-store/llama-h200-decode", ZMK_LLAMA, ZMK_Q4_K_M, GOLDEN_SHAPE, "shape,width,fuse-norm,fuse-store",
     "h200", ZPH_DECODE},
    /* q, k and v; with no fuse-mlp before it, gate and up too (their
     * SwiGLU reads both, exported) */
    {"fuse-qkv/qwen3-h200-decode", ZMK_QWEN3, ZMK_Q4_K_M, GOLDEN_SHAPE, "shape,width,fuse-qkv", "h200",
     ZPH_DECODE},
    /* layer 1's attn_v is Q6_K: q and k fuse, v keeps a GEMV (and a norm)
     * of its own; fuse-store sends layer 0's v row into the cache */
    {"fuse-qkv/qwen3-2l-store-h200-decode",
     ZMK_QWEN3,
     ZMK_Q4_K_M,
     {2, 256, 768, 4, 2},
     "shape,width,fuse-qkv,fuse-norm,fuse-store",
     "h200",
     ZPH_DECODE},
    {"fuse-moe/qwen3moe-h200-decode", ZMK_QWEN3MOE, ZMK_Q4_K_M, GOLDEN_SHAPE, "shape,width,fuse-moe", "h200",
     ZPH_DECODE},
    {"default/qwen3-h200-prefill", ZMK_QWEN3, ZMK_Q4_K_M, GOLDEN_SHAPE, DEFAULT_PASSES, "h200", ZPH_PREFILL},
    {"default/qwen3-h200-decode", ZMK_QWEN3, ZMK_Q4_K_M, GOLDEN_SHAPE, DEFAULT_PASSES, "h200", ZPH_DECODE},
    {"default/llama-rdna4-decode", ZMK_LLAMA, ZMK_Q4_K_M, GOLDEN_SHAPE, DEFAULT_PASSES, "rdna4", ZPH_DECODE},
    {"default/qwen2-hidden512-rdna4-prefill",
     ZMK_QWEN2,
     ZMK_Q4_K_M,
     {1, 512, 1536, 8, 4},
     DEFAULT_PASSES,
     "rdna4",
     ZPH_PREFILL},
    {"default/qwen2-llvmpipe-prefill", ZMK_QWEN2, ZMK_Q4_K_M, GOLDEN_SHAPE, DEFAULT_PASSES, "llvmpipe",
     ZPH_PREFILL},
};
enum { N_GOLDEN = sizeof goldens / sizeof goldens[0] };

static const char *last_pass(const char *list) {
    const char *c = strrchr(list, ',');
    return c ? c + 1 : list;
}

/* The header line: the commands that print the rest of the file. */
static void golden_header(const golden_case *c, FILE *out) {
    fprintf(out,
            "# zinc mkmodel --arch %s --layers %u --hidden %u --ff %u --heads %u --kv-heads %u --head-dim 64 "
            "--vocab 512 --quant %s --seed 1 -o m.gguf && zincc m.gguf --target %s --phase %s --passes=%s "
            "--print-after=%s\n",
            zmk_arch_name(c->arch), c->s.layers, c->s.hidden, c->s.ff, c->s.heads, c->s.kv_heads,
            zmk_quant_name(c->quant), c->target, zpass_phase_name(c->phase), c->passes, last_pass(c->passes));
}

/* Header plus what --print-after of the last pass prints. */
static char *golden_text(const golden_case *c, const gguf_file *f, size_t *len) {
    char *text = NULL;
    FILE *mem = open_memstream(&text, len);
    cr_assert_not_null(mem);
    golden_header(c, mem);
    zpass_opts o = opts_for(c->target, c->phase, NULL);
    o.print_after = last_pass(c->passes);
    o.print_to = mem;
    zir_graph *g = compile(f, c->passes, &o);
    fclose(mem);
    zir_graph_free(g);
    return text;
}

static void golden_path(const golden_case *c, char *path, size_t cap) {
    snprintf(path, cap, "%s/tests/passes/%s.zir", ZINC_SOURCE_DIR, c->file);
}

Test(golden, per_pass) {
    for (int i = 0; i < N_GOLDEN; i++) {
        const golden_case *c = &goldens[i];
        gguf_file *f = make_model(c->arch, c->quant, c->s, "golden.gguf");
        size_t len, glen;
        char *text = golden_text(c, f, &len), path[512];
        golden_path(c, path, sizeof path);
        if (getenv("ZINC_UPDATE_GOLDEN"))
            cr_assert_eq(tu_write_file(path, text, len), 0, "cannot write %s", path);
        char *want = tu_read_file(path, &glen);
        cr_assert_not_null(want, "missing golden file %s (run with ZINC_UPDATE_GOLDEN=1)", path);
        cr_expect(glen == len && !memcmp(want, text, len), "printed IR differs from %s", path);
        free(want);
        free(text);
        gguf_close(f);
    }
}

/* The zincc command in each golden's header prints the rest of the file. */
Test(golden, zincc_prints_the_same) {
    for (int i = 0; i < N_GOLDEN; i++) {
        const golden_case *c = &goldens[i];
        gguf_file *f = make_model(c->arch, c->quant, c->s, "m.gguf");
        char path[512], *out = NULL;
        golden_path(c, path, sizeof path);
        size_t glen;
        char *want = tu_read_file(path, &glen);
        cr_assert_not_null(want, "missing golden file %s", path);
        char *body = memchr(want, '\n', glen); /* tu_read_file does not NUL-terminate */
        cr_assert_not_null(body);
        size_t blen = glen - (size_t)(body + 1 - want);
        int rc =
            tu_run(&out, "%s/zincc %s --target %s --phase %s --passes=%s --print-after=%s", ZINC_BINARY_DIR,
                   f->path, c->target, zpass_phase_name(c->phase), c->passes, last_pass(c->passes));
        cr_expect_eq(rc, 0, "zincc for %s: exit %d: %s", c->file, rc, out);
        cr_expect(out && strlen(out) == blen && !memcmp(out, body + 1, blen), "zincc output differs from %s",
                  path);
        free(out);
        free(want);
        gguf_close(f);
    }
}

/* ---- the pass manager --------------------------------------------------- */

static zir_graph *build_small(gguf_file **f) {
    *f = make_model(ZMK_QWEN3, ZMK_Q4_K_M, GOLDEN_SHAPE, "pm.gguf");
    zir_graph *g = NULL;
    zdiag d = {0};
    cr_assert_eq(zir_build_from_gguf(*f, &g, &d), ZOK, "%s", d.msg);
    return g;
}

static void expect_unknown(const char *passes, const char *disabled, const char *print_after,
                           const char *flag, const char *name) {
    gguf_file *f;
    zir_graph *g = build_small(&f);
    zpass_opts o = opts_for("h200", ZPH_PREFILL, NULL);
    o.print_after = print_after;
    zdiag d = {0};
    cr_expect_eq(zpass_run_pipeline(g, passes, disabled, &o, &d), ZE_INVALID, "%s accepted '%s'", flag, name);
    char needle[96];
    snprintf(needle, sizeof needle, "%s: unknown pass '%s'", flag, name);
    cr_expect(strstr(d.msg, needle), "message '%s' lacks \"%s\"", d.msg, needle);
    cr_expect(strstr(d.msg, "fuse-mlp"), "message '%s' does not list the passes", d.msg);
    zir_graph_free(g);
    gguf_close(f);
}

Test(manager, unknown_names_are_invalid) {
    expect_unknown("shape,width,fuse-everything", NULL, NULL, "--passes", "fuse-everything");
    expect_unknown("shape,,width", NULL, NULL, "--passes", "");
    expect_unknown(NULL, "fuse-attn,fuse-mpl", NULL, "--disable-pass", "fuse-mpl");
    expect_unknown(NULL, NULL, "width,fusemlp", "--print-after", "fusemlp");
}

/* An unknown name stops the pipeline before any pass runs. */
Test(manager, unknown_name_runs_nothing) {
    gguf_file *f;
    zir_graph *g = build_small(&f);
    zpass_opts o = opts_for("h200", ZPH_PREFILL, NULL);
    zdiag d = {0};
    cr_expect_eq(zpass_run_pipeline(g, "shape,width,fuse-attn,bogus", NULL, &o, &d), ZE_INVALID);
    census c = take_census(g), none = {0};
    expect_census(&c, &none, "after a rejected pipeline");
    zir_graph_free(g);
    gguf_close(f);
}

Test(manager, cli_names_the_unknown_pass) {
    gguf_file *f = make_model(ZMK_QWEN3, ZMK_Q4_K_M, GOLDEN_SHAPE, "cli.gguf");
    const char *flags[] = {"--passes=shape,nope", "--disable-pass=nope", "--print-after=nope"};
    for (int i = 0; i < 3; i++) {
        char *out = NULL;
        int rc = tu_run(&out, "%s/zincc %s %s", ZINC_BINARY_DIR, f->path, flags[i]);
        cr_expect_neq(rc, 0, "zincc %s succeeded", flags[i]);
        cr_expect(out && strstr(out, "unknown pass 'nope'"), "zincc %s: %s", flags[i], out);
        free(out);
    }
    gguf_close(f);
}

static char *print_of(const zir_graph *g) {
    char *text = NULL;
    size_t len;
    FILE *mem = open_memstream(&text, &len);
    cr_assert_not_null(mem);
    zir_print(g, mem);
    fclose(mem);
    return text;
}

/* Disabling a pass is the same as leaving it out of the list. */
Test(manager, disable_pass_removes_it) {
    gguf_file *f = make_model(ZMK_QWEN2, ZMK_Q4_K_M, GOLDEN_SHAPE, "dis.gguf");
    zpass_opts o = opts_for("rdna4", ZPH_DECODE, NULL); /* where decode takes the whole MLP */
    zir_graph *a = NULL,
              *b = compile(
                  f, "shape,width,kv-type,fuse-dequant,fuse-head,fuse-mlp,fuse-norm,fuse-residual,fuse-store",
                  &o);
    zdiag d = {0};
    cr_assert_eq(zir_build_from_gguf(f, &a, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zpass_run_pipeline(a, NULL, "fuse-attn", &o, &d), ZOK, "%s", d.msg);
    census c = take_census(a);
    cr_expect_eq(c.kernels[ZKT_ATTENTION], 0, "fuse-attn ran although disabled");
    cr_expect_gt(c.kernels[ZKT_MLP], 0, "the other passes did not run");
    char *ta = print_of(a), *tb = print_of(b);
    cr_expect_str_eq(ta, tb, "--disable-pass=fuse-attn differs from a pipeline without it");
    free(ta);
    free(tb);
    zir_graph_free(a);
    zir_graph_free(b);
    gguf_close(f);
}

/* The "# after" headers in the order printed, joined by '|'. */
static void headers(const char *text, char *out, size_t cap) {
    size_t o = 0;
    out[0] = 0;
    for (const char *p = strstr(text, "# after "); p && o < cap; p = strstr(p + 1, "# after ")) {
        const char *e = strchr(p, '\n');
        o += (size_t)snprintf(out + o, cap - o, "%s%.*s", o ? "|" : "", (int)(e - p - 8), p + 8);
    }
}

static char *run_printing(const gguf_file *f, const char *print_after) {
    char *text = NULL;
    size_t len;
    FILE *mem = open_memstream(&text, &len);
    zpass_opts o = opts_for("h200", ZPH_PREFILL, NULL);
    o.print_after = print_after;
    o.print_to = mem;
    zir_graph *g = compile(f, DEFAULT_PASSES, &o);
    fclose(mem);
    zir_graph_free(g);
    return text;
}

Test(manager, print_after_prints_exactly_there) {
    gguf_file *f = make_model(ZMK_QWEN3, ZMK_Q4_K_M, GOLDEN_SHAPE, "pa.gguf");
    char h[512];
    char *one = run_printing(f, "fuse-mlp");
    headers(one, h, sizeof h);
    cr_expect_str_eq(h, "fuse-mlp (prefill)");
    /* What it printed is the graph after fuse-mlp, not before or later. */
    zpass_opts o = opts_for("h200", ZPH_PREFILL, NULL);
    zir_graph *g = compile(f, "shape,width,kv-type,fuse-dequant,fuse-attn,fuse-head,fuse-mlp", &o);
    char *want = print_of(g);
    cr_expect_str_eq(strchr(one, '\n') + 1, want, "--print-after=fuse-mlp printed another graph");
    char *two = run_printing(f, "fuse-residual,shape"), *all = run_printing(f, "all");
    headers(two, h, sizeof h);
    cr_expect_str_eq(h, "shape (prefill)|fuse-residual (prefill)", "in pipeline order, not list order");
    headers(all, h, sizeof h);
    cr_expect_str_eq(h, "shape (prefill)|width (prefill)|kv-type (prefill)|fuse-dequant (prefill)|"
                        "fuse-attn (prefill)|fuse-head (prefill)|fuse-mlp (prefill)|fuse-qkv (prefill)|"
                        "fuse-norm (prefill)|fuse-residual (prefill)|fuse-store (prefill)");
    char *none = run_printing(f, NULL);
    cr_expect_str_eq(none, "", "printed without --print-after");
    free(one), free(two), free(all), free(none), free(want);
    zir_graph_free(g);
    gguf_close(f);
}

/* Out-of-tree passes for the manager's checks: one breaks an invariant the
 * verifier knows, one fails. */
static zstatus break_uses(zir_graph *g, const zpass_opts *o, zdiag *d) {
    (void)o, (void)d;
    g->logits->n_uses++;
    return ZOK;
}
static zstatus fail(zir_graph *g, const zpass_opts *o, zdiag *d) {
    (void)g, (void)o;
    return zdiag_set(d, ZE_UNSUPPORTED, "cannot do this");
}

Test(manager, verify_each_catches_a_broken_pass) {
    gguf_file *f;
    zir_graph *g = build_small(&f);
    zpass_info bad = {"breaker", break_uses, ZPK_TRANSFORM, false, "breaks use counts"};
    zpass_opts o = opts_for("h200", ZPH_PREFILL, NULL);
    zdiag d = {0};
    o.verify_each = false;
    cr_expect_eq(zpass_run_one(g, &bad, &o, &d), ZOK, "without --verify-each the break goes unnoticed");
    g->logits->n_uses--;
    o.verify_each = true;
    cr_expect_eq(zpass_run_one(g, &bad, &o, &d), ZE_INTERNAL);
    cr_expect(strstr(d.msg, "IR invalid after pass breaker") && strstr(d.msg, "logits"), "%s", d.msg);
    g->logits->n_uses--;
    zpass_info failing = {"failing", fail, ZPK_TRANSFORM, false, "fails"};
    cr_expect_eq(zpass_run_one(g, &failing, &o, &d), ZE_UNSUPPORTED);
    cr_expect_str_eq(d.msg, "pass failing: cannot do this");
    zir_graph_free(g);
    gguf_close(f);
}

Test(manager, registry) {
    /* The goldens spell the pipeline out; the default keeps these passes in
     * this order (new passes may join it). */
    const char *def = zpass_default_pipeline(), *at = def;
    char list[] = DEFAULT_PASSES;
    for (char *save = NULL, *n = strtok_r(list, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
        const char *hit = strstr(at, n);
        cr_expect_not_null(hit, "default pipeline '%s' lacks %s after its position %td", def, n, at - def);
        if (hit) at = hit + strlen(n);
    }
    for (int i = 0; i < zpass_count(); i++) {
        const zpass_info *p = zpass_at(i);
        cr_expect_eq(zpass_find(p->name), p, "%s", p->name);
        cr_expect(p->summary && p->summary[0], "%s has no summary", p->name);
    }
    cr_expect_null(zpass_find("kernel"));
    cr_expect_null(zpass_at(zpass_count()));
}

/* ---- what the targets choose -------------------------------------------- */

static const zir_node *kernel_of(const zir_graph *g, const char *out_name) {
    const zir_value *v = zir_find(g, out_name);
    cr_assert(v && v->producer && v->producer->op == ZOP_KERNEL, "'%s' is not a kernel's output", out_name);
    return v->producer;
}

/* The parameters each target picks for the equivalence model, by hand:
 * MLP tile = floor(shared memory / (4 x (512 + 64))) capped at the target's
 * tile; decode MLP split = min(compute units, 1536 / 64); decode attention
 * split = ceil(compute units / 4 kv heads) (a kv head's query heads share a
 * workgroup). */
Test(targets, choose_differently) {
    gguf_file *f = make_model(ZMK_QWEN3, ZMK_Q4_K_M, EQ_SHAPE, "tg.gguf");
    const struct {
        const char *target;
        zpass_phase ph;
        const char *mlp_out; /* the output of the MLP kernel */
        zir_ktemplate mlp;
        int mlp_tile, mlp_split, attn_tile, attn_split;
    } want[] = {
        {"llvmpipe", ZPH_PREFILL, "l1.resid_mlp", ZKT_MLP, 14, 1, 16, 1},
        {"h200", ZPH_PREFILL, "l1.act", ZKT_GATE_UP_SWIGLU, 64, 1, 16, 1},
        {"rdna4", ZPH_PREFILL, "l1.act", ZKT_GATE_UP_SWIGLU, 64, 1, 16, 1},
        {"llvmpipe", ZPH_DECODE, "l1.resid_mlp", ZKT_MLP, 1, 2, 1, 1},
        {"h200", ZPH_DECODE, "l1.act", ZKT_GATE_UP_SWIGLU, 1, 1, 1, 33},
        {"rdna4", ZPH_DECODE, "l1.resid_mlp", ZKT_MLP, 1, 24, 1, 16},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        zpass_opts o = opts_for(want[i].target, want[i].ph, NULL);
        zir_graph *g = compile(f, NULL, &o);
        const zir_node *m = kernel_of(g, want[i].mlp_out), *a = kernel_of(g, "l1.attn");
        const char *w = want[i].target;
        cr_expect_eq(m->kp.tmpl, want[i].mlp, "%s: MLP as %s", w, zir_ktemplate_name(m->kp.tmpl));
        cr_expect_eq(m->kp.token_tile, want[i].mlp_tile, "%s: MLP tile %d", w, m->kp.token_tile);
        cr_expect_eq(m->kp.split, want[i].mlp_split, "%s: MLP split %d", w, m->kp.split);
        cr_expect_eq(a->kp.token_tile, want[i].attn_tile, "%s: attention tile %d", w, a->kp.token_tile);
        cr_expect_eq(a->kp.split, want[i].attn_split, "%s: attention split %d", w, a->kp.split);
        zir_graph_free(g);
    }
    gguf_close(f);
}

/* A caller that leaves the tile at 0 gets the target's: no kernel is
 * planned with a tile of 0 tokens, whichever pass made it. */
Test(targets, tile_zero_means_the_targets) {
    gguf_file *f = make_model(ZMK_QWEN2, ZMK_Q4_K_M, GOLDEN_SHAPE, "t0.gguf");
    zpass_opts o = opts_for("rdna4", ZPH_PREFILL, NULL);
    o.token_tile = 0;
    zir_graph *g = compile(f, NULL, &o);
    int n = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *k = g->nodes[i];
        if (k->op != ZOP_KERNEL) continue;
        n++;
        cr_expect_geq(k->kp.token_tile, 1, "kernel '%s' has tile %d", k->out->name, k->kp.token_tile);
        if (k->kp.tmpl == ZKT_MATMUL) cr_expect_eq(k->kp.token_tile, 64, "kernel '%s'", k->out->name);
    }
    /* q, k, v (+ bias; their norm is a kernel of its own on matrix units),
     * k's rope + store, attention, attn_out, MLP; the logits a plain matmul */
    cr_expect_eq(n, 7, "%d kernels", n);
    zir_graph_free(g);
    gguf_close(f);
}

/* Running the pipeline again changes nothing: no pass fuses twice or trips
 * over the kernels an earlier run made. */
Test(manager, passes_are_idempotent) {
    gguf_file *f = make_model(ZMK_QWEN2, ZMK_Q4_K_M, GOLDEN_SHAPE, "idem.gguf");
    for (int ph = 0; ph < ZPH_COUNT; ph++) {
        zpass_opts o = opts_for("h200", (zpass_phase)ph, NULL);
        zir_graph *g = compile(f, NULL, &o);
        char *once = print_of(g);
        zdiag d = {0};
        cr_assert_eq(zpass_run_pipeline(g, NULL, NULL, &o, &d), ZOK, "%s", d.msg);
        char *twice = print_of(g);
        cr_expect_str_eq(twice, once, "a second run of the pipeline changed the graph (%s)",
                         zpass_phase_name((zpass_phase)ph));
        free(once);
        free(twice);
        zir_graph_free(g);
    }
    gguf_close(f);
}

/* kv-type: f16 on the GPU targets, f32 on llvmpipe, --kv-type over both;
 * a storage zincc does not know is refused. */
Test(passes, kv_type_by_target_and_flag) {
    gguf_file *f = make_model(ZMK_QWEN3, ZMK_Q4_K_M, GOLDEN_SHAPE, "kv.gguf");
    const struct {
        const char *target;
        zpass_kv flag;
        ztype want;
    } cases[] = {{"h200", ZKV_TARGET, ZT_F16},
                 {"rdna4", ZKV_TARGET, ZT_F16},
                 {"llvmpipe", ZKV_TARGET, ZT_F32},
                 {"h200", ZKV_F32, ZT_F32},
                 {"llvmpipe", ZKV_F16, ZT_F16}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zpass_opts o = opts_for(cases[i].target, ZPH_DECODE, NULL);
        o.kv_type = cases[i].flag;
        zir_graph *g = compile(f, "shape,width,kv-type", &o);
        int n = 0;
        for (uint32_t v = 0; v < g->n_values; v++) {
            if (g->values[v]->role != ZR_KV) continue;
            n++;
            cr_expect_eq(g->values[v]->dtype, cases[i].want, "%s, flag %d: %s is %s", cases[i].target,
                         cases[i].flag, g->values[v]->name, ztype_name(g->values[v]->dtype));
        }
        cr_expect_eq(n, 2 * (int)GOLDEN_SHAPE.layers);
        zir_graph_free(g);
    }
    char *log = NULL;
    int rc = tu_run(&log, "%s/zincc '%s' --kv-type q8_0 --target h200 --report 2>&1", ZINC_BINARY_DIR,
                    tu_tmp("kv.gguf"));
    cr_expect_eq(rc, 64, "%s", log ? log : "");
    cr_expect(log && strstr(log, "--kv-type expects f16 or f32"), "%s", log ? log : "");
    free(log);
    gguf_close(f);
}
