/* The matmul family of kernels (backend/cg_matmul.c: embed, GEMV, GEMM,
 * gate+up+SwiGLU, the fused MLP) on a real Vulkan device (llvmpipe in CI),
 * every element against the reference interpreter.
 *
 * One small one-layer model per weight type (f32, f16, bf16, q8_0, q4_K_M =
 * q4_K + q6_K + q5_0, q5_K, q4_0, q4_1, q5_0, q5_1, iq4_nl, iq4_xs + iq4_nl):
 * hidden 512, ff 1536, vocab 600. Llama and qwen3 get 6 heads of 48: q (288
 * rows), k and v (96) and the logits (600) are not multiples of the 64-row
 * tiles, and attn_output's rows of 288 are not a multiple of the 256-element
 * blocks (their 32-element stand-ins take them). Each model is compiled with
 * the default pipeline for llvmpipe and h200 in both phases: these graphs
 * hold every template (a census checks it). The interpreter runs steps of T
 * tokens at pos 0 and pos > 0 (prefill: 5 then 17; decode: 1, 3, 1) and
 * after each checked step kh_check_node runs every node of the family.
 *
 * Kernels compiled for h200 run here with the device's shared memory as the
 * limit (llvmpipe has 32 KiB, h200 48): a tile that does not fit is refused
 * with ZE_UNSUPPORTED, which a test below checks on purpose. */
#include <criterion/criterion.h>
#include <math.h>
#include <spirv-tools/libspirv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/calib.h"
#include "backend/codegen.h"
#include "backend/shaderc.h"
#include "backend/spv_coopmat.h"
#include "backend/tune.h"
#include "frontend/arch.h"
#include "frontend/gguf.h"
#include "frontend/mkmodel.h"
#include "kernel_harness.h"
#include "passes/match.h"
#include "passes/match.h"
#include "passes/pass.h"
#include "testutil.h"

/* ---- models ----------------------------------------------------------------- */

typedef struct mspec {
    const char *label;
    zmk_arch arch;
    zmk_quant quant;
    ztype retype; /* ZT_F32: as written; else 2-D weights rewritten in this type */
    /* With retype: NULL, or the types of attn_q, attn_k and attn_v instead */
    const ztype *qkv;
    int hidden, ff; /* 0: HIDDEN and FF */
} mspec;

/* Hidden 512 / ff 1536: h200 picks gate+up+SwiGLU in both phases (a GEMV
 * in decode), llvmpipe the whole MLP (a token tile in prefill, split in
 * decode), so each model exercises every MLP kernel. */
enum { HIDDEN = 512, FF = 1536, VOCAB = 600 };

static void model_opts(const mspec *m, zmk_opts *o) {
    zmk_defaults(o);
    o->arch = m->arch;
    o->quant = m->quant;
    o->layers = 1;
    o->hidden = m->hidden ? m->hidden : HIDDEN;
    o->ff = m->ff ? m->ff : FF;
    o->vocab = VOCAB;
    o->seed = 11;
    bool qwen2 = m->arch == ZMK_QWEN2; /* needs heads * head_dim == hidden */
    o->heads = qwen2 ? 8 : 6;
    o->kv_heads = 2;
    o->head_dim = qwen2 ? 64 : 48; /* 6 x 48 = 288 rows: not a multiple of any tile */
}

/* The type a retyped 2-D weight gets: t, or qkv's for attn_q, attn_k, attn_v. */
static ztype retype_of(const char *name, ztype t, const ztype *qkv) {
    static const char *const proj[3] = {".attn_q.", ".attn_k.", ".attn_v."};
    for (int i = 0; qkv && i < 3; i++)
        if (strstr(name, proj[i])) return qkv[i];
    return t;
}

/* Rewrites every 2-D weight of f in type t (qkv: see retype_of), falling
 * back to q8_0, then f32, for rows the type's blocks cannot hold, keeping
 * the metadata. */
static void retype_model(const gguf_file *f, ztype t, const ztype *qkv, const char *path) {
    gguf_writer *w = gguf_writer_new();
    cr_assert_not_null(w);
    for (uint64_t i = 0; i < f->n_kv; i++)
        gguf_set_value(w, f->kvs[i].key, &f->kvs[i].val);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *x = &f->tensors[i];
        cr_assert_eq(x->type, ZT_F32, "retype needs an f32 model: '%s' is %s", x->name, ztype_name(x->type));
        ztype to = x->n_dims != 2 ? ZT_F32 : retype_of(x->name, t, qkv);
        const ztype_info *ti = ztype_get((uint32_t)to);
        if (x->ne[0] % ti->block_elems) to = x->ne[0] % 32 ? ZT_F32 : ZT_Q8_0;
        uint64_t rows = x->n_elems / (uint64_t)x->ne[0], rb = ztype_row_bytes(to, (uint64_t)x->ne[0], NULL);
        uint8_t *buf = malloc(rb * rows);
        cr_assert_not_null(buf);
        for (uint64_t r = 0; r < rows; r++) {
            const float *src = (const float *)x->data + r * (uint64_t)x->ne[0];
            cr_assert_eq(ztype_quantize_row(to, src, buf + r * rb, x->ne[0]), ZOK);
        }
        gguf_add_tensor(w, x->name, to, x->n_dims, x->ne, buf, rb * rows);
        free(buf);
    }
    zdiag d = {0};
    cr_assert_eq(gguf_writer_write(w, path, &d), ZOK, "%s", d.msg);
    gguf_writer_free(w);
}

static gguf_file *open_model(const mspec *m) {
    zmk_opts o;
    model_opts(m, &o);
    zdiag d = {0};
    char name[64];
    snprintf(name, sizeof name, "%s.gguf", m->label);
    const char *path = tu_tmp(name);
    cr_assert_eq(zmk_write(&o, path, NULL, &d), ZOK, "%s", d.msg);
    gguf_file *f = NULL;
    cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
    if (m->retype == ZT_F32) return f;
    snprintf(name, sizeof name, "%s-retyped.gguf", m->label);
    const char *p2 = tu_tmp(name);
    retype_model(f, m->retype, m->qkv, p2);
    gguf_close(f);
    cr_assert_eq(gguf_open(p2, &f, &d), ZOK, "%s", d.msg);
    return f;
}

static zir_graph *compile_idot(const gguf_file *f, const ztarget *t, zpass_phase ph, zpass_idot idot) {
    zir_graph *g = NULL;
    zdiag d = {0};
    cr_assert_eq(zir_build_from_gguf(f, &g, &d), ZOK, "%s", d.msg);
    zpass_opts po = kh_pass_opts(t, ph);
    po.gemv_idot = idot;
    cr_assert_eq(zpass_run_pipeline(g, zpass_default_pipeline(), NULL, &po, &d), ZOK, "%s", d.msg);
    return g;
}

/* The default pipeline, the int8-x GEMVs off whatever the target would
 * choose (kernels_matmul/q4_K_int8_x turns them on). */
static zir_graph *compile(const gguf_file *f, const ztarget *t, zpass_phase ph) {
    return compile_idot(f, t, ph, ZIDOT_OFF);
}

/* A target profile limited to what the test device really has. */
static ztarget device_target(kh_ctx *k, const char *name) {
    const ztarget *t = ztarget_find(name);
    cr_assert_not_null(t);
    ztarget r = *t;
    if (r.smem_bytes > k->dev.prof.max_shared_memory) r.smem_bytes = k->dev.prof.max_shared_memory;
    /* Without matrix units (llvmpipe) the matmuls mm-f16 marked for the
     * target run on the scalar GEMM, which rounds its operands the same way. */
    r.coopmat = r.coopmat && (k->dev.prof.coopmat_nv || k->dev.prof.coopmat_khr);
    r.int_dot = r.int_dot && k->dev.prof.int_dot;
    /* the device's own fragment order, as zincc --target device probes it */
    r.frag_right = r.frag_down = r.frag_b = 0;
    if (r.coopmat) zvk_probe_frag_order(&k->dev, &r.frag_right, &r.frag_down, &r.frag_b);
    return r;
}

static kh_ctx *open_device(void) {
    static kh_ctx k;
    char err[256];
    cr_assert(kh_open(&k, err, sizeof err), "no Vulkan device: %s", err);
    return &k;
}

/* The device, where it has cooperative matrices; elsewhere (llvmpipe) the
 * test says what runs on the H200 and skips. */
static kh_ctx *open_coopmat_device(const char *what) {
    kh_ctx *k = open_device();
    if (!k->dev.prof.coopmat_nv && !k->dev.prof.coopmat_khr) {
        char name[256];
        snprintf(name, sizeof name, "%s", k->dev.prof.name);
        kh_close(k);
        cr_skip_test("%s has no cooperative matrices: %s runs on the H200", name, what);
    }
    return k;
}

/* ---- which nodes, and what they exercise ------------------------------------ */

static bool in_family(const zir_node *n) {
    if (n->op == ZOP_EMBED || n->op == ZOP_MATMUL) return true;
    return n->op == ZOP_KERNEL && (n->kp.tmpl == ZKT_MATMUL || n->kp.tmpl == ZKT_GATE_UP_SWIGLU ||
                                   n->kp.tmpl == ZKT_MLP || n->kp.tmpl == ZKT_MATMUL_ROWS);
}

/* What the census counts, read from the kernel names. */
typedef enum feat {
    F_EMBED,
    F_GEMV,
    F_GEMM,
    F_NORM,     /* rms_norm prologue */
    F_RESIDUAL, /* residual add epilogue */
    F_BIAS,     /* bias add epilogue (qwen2) */
    F_GATE_UP,  /* gate+up+SwiGLU */
    F_MLP_TILE, /* whole MLP, prefill token tile */
    F_MLP_SPLIT,
    F_GEMV_GATE_UP, /* gate+up+SwiGLU in decode */
    F_STORE,        /* the output stored into the KV cache (fuse-store) */
    F_ROWS,         /* q, k and v as one GEMV over their rows (fuse-qkv, decode) */
    F_COUNT
} feat;
static const char *const feat_names[F_COUNT] = {"embed",     "gemv",         "gemm",     "norm",
                                                "residual",  "bias",         "gate_up",  "mlp tiled",
                                                "mlp split", "gemv gate_up", "kv store", "gemv rows"};

static void census(const char *kname, bool *seen) {
    seen[F_EMBED] |= !strncmp(kname, "embed", 5);
    seen[F_GEMV] |= !strncmp(kname, "gemv", 4);
    seen[F_GEMM] |= !strncmp(kname, "gemm", 4);
    seen[F_NORM] |= strstr(kname, "+norm") != NULL;
    seen[F_RESIDUAL] |= strstr(kname, "+add") != NULL;
    seen[F_BIAS] |= strstr(kname, "+bias") != NULL;
    seen[F_GATE_UP] |= strstr(kname, "_gateup_") != NULL;
    seen[F_GEMV_GATE_UP] |= !strncmp(kname, "gemv_gateup_", 12);
    seen[F_STORE] |= strstr(kname, "+store") != NULL;
    seen[F_ROWS] |= !strncmp(kname, "gemv_rows_", 10) || !strncmp(kname, "gemvn_rows_", 11);
    /* mlp_<types>_h<H>_f<FF>_t<tile> or ..._s<split>; type names hold '_' */
    const char *f = strncmp(kname, "mlp", 3) ? NULL : strstr(kname, "_h");
    if (f && (f = strchr(f + 1, '_')) && (f = strchr(f + 1, '_')))
        seen[f[1] == 's' ? F_MLP_SPLIT : F_MLP_TILE] = true;
}

/* Worst error per kernel kind, for the log. */
typedef struct worst {
    char kind[32];
    double err;
    int n;
} worst;
enum { MAX_KINDS = 16 };

static void note(worst *w, const char *kname, double err) {
    bool seen[F_COUNT] = {0};
    census(kname, seen);
    char kind[32];
    snprintf(kind, sizeof kind, "%.*s%s%s", (int)strcspn(kname, "_"), kname, seen[F_GATE_UP] ? "_gateup" : "",
             strstr(kname, "_idot") ? "_idot" : "");
    if (seen[F_MLP_TILE] || seen[F_MLP_SPLIT])
        snprintf(kind, sizeof kind, "mlp_%s", seen[F_MLP_TILE] ? "tile" : "split");
    int i = 0;
    while (i < MAX_KINDS && w[i].kind[0] && strcmp(w[i].kind, kind))
        i++;
    if (i == MAX_KINDS) return;
    snprintf(w[i].kind, sizeof w[i].kind, "%s", kind);
    if (err > w[i].err) w[i].err = err;
    w[i].n++;
}

/* ---- running -------------------------------------------------------------------- */

typedef struct run_ctx {
    kh_ctx *k;
    const zir_graph *g;
    zcg_opts o;
    const ztarget *full; /* the target's real profile (o.target is clamped to the device) */
    const char *what;
    double tol;
    bool *seen;
    worst *w;
} run_ctx;

/* Matmuls with fp16 operands (the mm-f16 pass): the kernel and the
 * interpreter round the same values, but the normalized x they round
 * differs in its last fp32 bits (a sum in another order, the GPU's
 * inversesqrt), so a few elements round to the neighbouring half: 2^-11 of
 * an element each. Measured on llvmpipe: 1.3e-4 of the output RMS for a
 * plain matmul, 1.1e-3 through SwiGLU (outputs reach 10x their RMS). A
 * missing sub-block or a wrong scale is 1e-2 or more. */
#define TOL_MM16 4e-3

static bool mm_f16(const zir_node *n) {
    if (n->op == ZOP_MATMUL) return n->attr.mm_f16;
    for (int i = 0; i < n->n_body; i++)
        if (n->body[i]->op == ZOP_MATMUL && n->body[i]->attr.mm_f16) return true;
    return false;
}

/* A projection that stores into an f16 KV cache (fuse-store): both sides
 * round the row to half, but the GPU's sum differs from the interpreter's
 * in its last fp32 bits, so a few elements round to the neighbouring half:
 * 2^-11 of an element, and elements reach ~8x the RMS (1.8e-3 measured;
 * 1.9e-3 for q6_K, against the RMS of the rows stored). */
#define TOL_KV16 4e-3

/* fp32 activations: reduction order and exp/inversesqrt differ from the
 * interpreter's, ~1e-6 of the RMS; 1e-4 leaves room without hiding a wrong
 * scale or a missing sub-block (those are O(1e-2) or more). */
#define TOL_F32 1e-4
/* fp16 storage: inputs and outputs rounded to half, 2^-11 of each element.
 * Relative to the output RMS that is 2^-11 x max/RMS, and SwiGLU outputs
 * (a product of two near-Gaussians) reach 10x their RMS: 5e-3 measured. */
#define TOL_F16 1e-2

static bool stores_f16(const zir_node *n) {
    const zir_node *t = n->op == ZOP_KERNEL ? n->body[n->n_body - 1] : n;
    return t->op == ZOP_KV_STORE && t->in[1]->dtype == ZT_F16;
}

/* A kernel refused only because this device has less shared memory than
 * the target it was compiled for. */
static bool too_big_for_device(const run_ctx *r, const zir_node *n) {
    zarena *a = zarena_new();
    zcg_kernel kn;
    zdiag d = {0};
    zcg_opts o = r->o;
    o.target = r->full;
    bool fits_target = zcg_node(r->g, n, &o, a, &kn, &d) == ZOK;
    zarena_free(a);
    return fits_target && r->full->smem_bytes > r->o.target->smem_bytes;
}

static void check_nodes(run_ctx *r, const zir_interp *it, zir_step st) {
    for (uint32_t i = 0; i < r->g->n_nodes; i++) {
        const zir_node *n = r->g->nodes[i];
        if (!in_family(n)) continue;
        kh_result res;
        zdiag d = {0};
        zstatus s = kh_check_node(r->k, r->g, n, &r->o, it, st, &res, &d);
        if (s == ZE_UNSUPPORTED && too_big_for_device(r, n)) {
            cr_log_info("%s: '%s' skipped: %s", r->what, n->out->name, d.msg);
            continue;
        }
        cr_assert_eq(s, ZOK, "%s: node '%s' (T=%lld pos=%lld): %s", r->what, n->out->name, (long long)st.T,
                     (long long)st.pos, d.msg);
        double tol = mm_f16(n) && r->tol < TOL_MM16 ? TOL_MM16 : r->tol;
        if (stores_f16(n) && tol < TOL_KV16) tol = TOL_KV16;
        /* an output kept in fp16 (mm-f16's keep_f16): TOL_F16's rounding of
         * each element, SwiGLU's outputs at up to 10x their RMS */
        if (n->out->store_f16 && tol < TOL_F16) tol = TOL_F16;
        cr_expect(res.max_err < tol, "%s: %s ('%s', T=%lld pos=%lld): error %.3g of the output RMS > %.1g",
                  r->what, res.kernel, n->out->name, (long long)st.T, (long long)st.pos, res.max_err, tol);
        cr_assert_gt(res.checked, 0, "%s: %s checked nothing", r->what, res.kernel);
        /* An embedding is dequantization alone: what dequant.glsl decodes
         * must be what ir/dtype.c (and ggml) decode, to the bit. */
        cr_expect(r->o.act_f16 || strncmp(res.kernel, "embed", 5) || res.max_err == 0,
                  "%s: %s: error %.3g: the dequantized rows differ from the interpreter's", r->what,
                  res.kernel, res.max_err);
        census(res.kernel, r->seen);
        note(r->w, res.kernel, res.max_err);
    }
}

/* Steps of T tokens; those flagged are checked node by node. */
static void run_steps(run_ctx *r, const int64_t *T, const bool *check, int n_steps) {
    zir_interp *it;
    zdiag d = {0};
    cr_assert_eq(zir_interp_new(r->g, 64, &it, &d), ZOK, "%s", d.msg);
    tu_rng rng = tu_rng_seed(77);
    int64_t pos = 0;
    for (int s = 0; s < n_steps; s++) {
        int32_t tok[64];
        cr_assert_leq(T[s], 64);
        for (int64_t t = 0; t < T[s]; t++)
            tok[t] = (int32_t)(tu_next(&rng) % VOCAB);
        cr_assert_eq(zir_interp_step(it, tok, T[s], NULL, &d), ZOK, "%s", d.msg);
        r->k->tokens = tok;
        if (check[s]) check_nodes(r, it, (zir_step){T[s], pos, 64});
        r->k->tokens = NULL;
        pos += T[s];
    }
    zir_interp_free(it);
}

static const char *const TARGETS[] = {"llvmpipe", "h200"};

/* Prefill: 5 tokens at 0, then 17 at 5. Decode: 1 at 0, (3), 1 at 4. */
static void run_graph(run_ctx *r, zpass_phase ph) {
    static const int64_t pre_T[] = {5, 17}, dec_T[] = {1, 3, 1};
    static const bool pre_c[] = {true, true}, dec_c[] = {true, false, true};
    if (ph == ZPH_DECODE)
        run_steps(r, dec_T, dec_c, 3);
    else
        run_steps(r, pre_T, pre_c, 2);
}

static void check_model(const mspec *m, bool act_f16, double tol) {
    kh_ctx *k = open_device();
    gguf_file *f = open_model(m);
    bool seen[F_COUNT] = {0};
    worst w[MAX_KINDS] = {0};
    for (int ti = 0; ti < 2; ti++)
        for (int ph = 0; ph < ZPH_COUNT; ph++) {
            ztarget t = device_target(k, TARGETS[ti]);
            zir_graph *g = compile(f, ztarget_find(TARGETS[ti]), (zpass_phase)ph);
            char what[96];
            snprintf(what, sizeof what, "%s %s/%s%s", m->label, TARGETS[ti],
                     zpass_phase_name((zpass_phase)ph), act_f16 ? " f16" : "");
            run_ctx r = {k,
                         g,
                         {&t, (zpass_phase)ph, ph == ZPH_DECODE ? 1 : 17, act_f16},
                         ztarget_find(TARGETS[ti]),
                         what,
                         tol,
                         seen,
                         w};
            run_graph(&r, (zpass_phase)ph);
            zir_graph_free(g);
        }
    /* Whatever the cost model picks for the MLP, every model has these. */
    static const feat always[] = {F_EMBED,    F_GEMV,    F_GEMM,         F_NORM,
                                  F_RESIDUAL, F_GATE_UP, F_GEMV_GATE_UP, F_STORE};
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        cr_expect(seen[always[i]], "%s: no kernel exercised %s", m->label, feat_names[always[i]]);
    if (m->arch == ZMK_QWEN2) cr_expect(seen[F_BIAS], "%s: no kernel exercised the bias epilogue", m->label);
    /* qwen2's q, k and v biases keep them apart (fuse-qkv) */
    if (m->arch != ZMK_QWEN2) cr_expect(seen[F_ROWS], "%s: no kernel exercised the rows GEMV", m->label);
    for (int i = 0; i < MAX_KINDS && w[i].kind[0]; i++)
        cr_log_info("%s%s: %-12s max error %.3g of the output RMS over %d checks", m->label,
                    act_f16 ? " (f16)" : "", w[i].kind, w[i].err, w[i].n);
    gguf_close(f);
    kh_close(k);
}


/* The one-type files follow llama-quantize's fallbacks: in q4_k_m the
 * attn_output rows of 288 are Q5_0, in iq4_xs IQ4_NL. q6_K runs q6_K's own
 * GEMV layout for q, k and v together (GMODE 14). */
static const mspec MODELS[] = {
    {"f32", ZMK_QWEN2, ZMK_F32, ZT_F32},       {"f16", ZMK_LLAMA, ZMK_F16, ZT_F32},
    {"bf16", ZMK_QWEN3, ZMK_F32, ZT_BF16},     {"q8_0", ZMK_QWEN2, ZMK_Q8_0, ZT_F32},
    {"q4_k_m", ZMK_QWEN3, ZMK_Q4_K_M, ZT_F32}, {"q5_K", ZMK_LLAMA, ZMK_F32, ZT_Q5_K},
    {"q4_0", ZMK_QWEN3, ZMK_Q4_0, ZT_F32},     {"q4_1", ZMK_LLAMA, ZMK_Q4_1, ZT_F32},
    {"q5_0", ZMK_QWEN2, ZMK_Q5_0, ZT_F32},     {"q5_1", ZMK_QWEN3, ZMK_Q5_1, ZT_F32},
    {"iq4_nl", ZMK_LLAMA, ZMK_IQ4_NL, ZT_F32}, {"iq4_xs", ZMK_QWEN2, ZMK_IQ4_XS, ZT_F32},
    {"q6_K", ZMK_LLAMA, ZMK_F32, ZT_Q6_K},
};
enum { N_MODELS = sizeof MODELS / sizeof MODELS[0], M_Q4_K_M = 4 };

Test(kernels_matmul, f32, .timeout = 300) {
    check_model(&MODELS[0], false, TOL_F32);
}
Test(kernels_matmul, f16, .timeout = 300) {
    check_model(&MODELS[1], false, TOL_F32);
}
Test(kernels_matmul, bf16, .timeout = 300) {
    check_model(&MODELS[2], false, TOL_F32);
}
Test(kernels_matmul, q8_0, .timeout = 300) {
    check_model(&MODELS[3], false, TOL_F32);
}
Test(kernels_matmul, q4_k_m, .timeout = 300) {
    check_model(&MODELS[M_Q4_K_M], false, TOL_F32);
}
Test(kernels_matmul, q5_K, .timeout = 300) {
    check_model(&MODELS[5], false, TOL_F32);
}
Test(kernels_matmul, q4_0, .timeout = 300) {
    check_model(&MODELS[6], false, TOL_F32);
}
Test(kernels_matmul, q4_1, .timeout = 300) {
    check_model(&MODELS[7], false, TOL_F32);
}
Test(kernels_matmul, q5_0, .timeout = 300) {
    check_model(&MODELS[8], false, TOL_F32);
}
Test(kernels_matmul, q5_1, .timeout = 300) {
    check_model(&MODELS[9], false, TOL_F32);
}
Test(kernels_matmul, iq4_nl, .timeout = 300) {
    check_model(&MODELS[10], false, TOL_F32);
}
Test(kernels_matmul, iq4_xs, .timeout = 300) {
    check_model(&MODELS[11], false, TOL_F32);
}
Test(kernels_matmul, q6_K, .timeout = 300) {
    check_model(&MODELS[12], false, TOL_F32);
}
/* The weight-layout pass's q6_K planes: rows of 1024 and 2048 elements, so
 * every matrix is held as planes, rewritten on the device by the load
 * schedule's kernel (q6_planes.glsl) before each node runs, then read by
 * every kernel family (GEMM staging, GEMV groups, the rows GEMV, the
 * embedding) against the interpreter, which reads ggml's blocks. */
static const mspec Q6_PLANES = {"q6_K_planes", ZMK_QWEN3, ZMK_F32, ZT_Q6_K, NULL, 1024, 2048};

static int count_planes(const gguf_file *f, const char *target) {
    zir_graph *g = compile(f, ztarget_find(target), ZPH_DECODE);
    int n = 0;
    for (uint32_t i = 0; i < g->n_values; i++)
        n += g->values[i]->layout == ZWL_Q6_PLANES;
    zir_graph_free(g);
    return n;
}

Test(kernels_matmul, q6_K_planes, .timeout = 600) {
    gguf_file *f = open_model(&Q6_PLANES);
    /* q, k, v, o, gate, up, down and the tied or separate head: all q6_K */
    cr_expect_geq(count_planes(f, "llvmpipe"), 7, "the weight-layout pass left q6_K rows of 1024 in ggml's blocks");
    cr_expect_eq(count_planes(f, "llvmpipe"), count_planes(f, "h200"), "the layout must not depend on the target here");
    gguf_close(f);
    /* rows of 512 and 1536 (the other models) are not 8-byte aligned as planes: ggml's blocks stay */
    f = open_model(&MODELS[12]);
    cr_expect_eq(count_planes(f, "h200"), 0, "q6_K rows of 512 elements were put in planes");
    gguf_close(f);
    check_model(&Q6_PLANES, false, TOL_F32);
}

/* Every layout zincc --tune may give a prefill GEMM on the matrix units
 * (zvk_tune_gemm_candidates: tokens and subgroups a workgroup) computes
 * what the interpreter computes, element for element: gate+up, the q4_K
 * matmuls and the Q6_K planes, 5 tokens and 17 (partial token tiles in
 * every layout). Runs where the device has matrix units (the H200). */
static void check_cmp_layouts(kh_ctx *k, const mspec *m, const zcg_gemv *cand, int nc) {
    gguf_file *f = open_model(m);
    ztarget t = device_target(k, "h200");
    zir_graph *g = compile(f, ztarget_find("h200"), ZPH_PREFILL);
    zir_interp *it;
    zdiag d = {0};
    cr_assert_eq(zir_interp_new(g, 64, &it, &d), ZOK, "%s", d.msg);
    tu_rng rng = tu_rng_seed(91);
    int64_t pos = 0;
    int checked = 0;
    for (int64_t T = 5; T <= 17; T += 12) {
        int32_t tok[17];
        for (int64_t i = 0; i < T; i++)
            tok[i] = (int32_t)(tu_next(&rng) % VOCAB);
        cr_assert_eq(zir_interp_step(it, tok, T, NULL, &d), ZOK, "%s", d.msg);
        k->tokens = tok;
        for (uint32_t i = 0; i < g->n_nodes; i++)
            for (int c = 0; c < nc; c++) {
                zcg_opts o = {&t, ZPH_PREFILL, 17, false, NULL, &cand[c]};
                zarena *a = zarena_new();
                zcg_kernel kn;
                bool cmp = zcg_node(g, g->nodes[i], &o, a, &kn, &d) == ZOK && strstr(kn.name, "_cmp");
                char want[32];
                snprintf(want, sizeof want, "_cmp%dx%d", cand[c].bm, 16 * cand[c].nsg);
                /* Q6_K's 128-wide steps may take fewer tokens where shared memory asks */
                bool laid = cmp && (strstr(kn.name, want) || strstr(kn.name, "q6_K"));
                zarena_free(a);
                if (!cmp) continue;
                cr_expect(laid, "%s: layout %d x %d not compiled", kn.name, cand[c].bm, cand[c].nsg);
                kh_result r;
                zstatus s = kh_check_node(k, g, g->nodes[i], &o, it, (zir_step){T, pos, 64}, &r, &d);
                cr_assert_eq(s, ZOK, "%s '%s' (T=%lld): %s", m->label, g->nodes[i]->out->name, (long long)T, d.msg);
                cr_expect(r.max_err < TOL_MM16, "%s: %s (T=%lld): error %.3g of the output RMS > %.1g", m->label,
                          r.kernel, (long long)T, r.max_err, TOL_MM16);
                checked++;
            }
        k->tokens = NULL;
        pos += T;
    }
    cr_expect_geq(checked, 2 * nc, "%s: %d checks of the permuted GEMM", m->label, checked);
    cr_log_info("%s: %d checks of %d layouts", m->label, checked, nc);
    zir_interp_free(it);
    zir_graph_free(g);
    gguf_close(f);
}

Test(kernels_matmul, cmp_layouts_match_the_interpreter, .timeout = 600) {
    kh_ctx *k = open_coopmat_device("the prefill GEMM's tuned layouts");
    int nc;
    const zcg_gemv *cand = zvk_tune_gemm_candidates(&nc);
    check_cmp_layouts(k, &MODELS[M_Q4_K_M], cand, nc);
    check_cmp_layouts(k, &Q6_PLANES, cand, nc);
    kh_close(k);
}

/* Decode GEMVs with int8 x (attr.gemv_q8, GMODE 12 or 14 with IDOT): every
 * weight of one k-quant type (attn_output's rows of 288 fall back to q8_0
 * and stay float), for both targets, against the interpreter quantizing x
 * the same way. */
static void check_int8_x(const mspec *m) {
    kh_ctx *k = open_device();
    cr_assert(k->dev.prof.int_dot, "%s: no shaderIntegerDotProduct", k->dev.prof.name);
    gguf_file *f = open_model(m);
    bool seen[F_COUNT] = {0};
    worst w[MAX_KINDS] = {0};
    int n_q8 = 0;
    for (int ti = 0; ti < 2; ti++) {
        ztarget t = device_target(k, TARGETS[ti]);
        zir_graph *g = compile_idot(f, ztarget_find(TARGETS[ti]), ZPH_DECODE, ZIDOT_ON);
        for (uint32_t i = 0; i < g->n_nodes; i++)
            n_q8 += zpass_gemv_q8(g->nodes[i]);
        char what[96];
        snprintf(what, sizeof what, "%s int8 x %s/decode", m->label, TARGETS[ti]);
        run_ctx r = {k, g, {&t, ZPH_DECODE, 1, false}, ztarget_find(TARGETS[ti]), what, TOL_F32, seen, w};
        run_graph(&r, ZPH_DECODE);
        zir_graph_free(g);
    }
    cr_expect_gt(n_q8, 0, "no matmul was given int8 x");
    bool plain = false, gate_up = false;
    for (int i = 0; i < MAX_KINDS && w[i].kind[0]; i++) {
        plain |= !strcmp(w[i].kind, "gemv_idot");
        gate_up |= !strcmp(w[i].kind, "gemv_gateup_idot");
    }
    cr_expect(plain && gate_up, "the int8-x GEMV ran %s, %s", plain ? "alone" : "never alone",
              gate_up ? "as gate+up" : "never as gate+up");
    for (int i = 0; i < MAX_KINDS && w[i].kind[0]; i++)
        cr_log_info("%s int8 x: %-12s max error %.3g of the output RMS over %d checks", m->label, w[i].kind,
                    w[i].err, w[i].n);
    gguf_close(f);
    kh_close(k);
}

Test(kernels_matmul, q4_K_int8_x, .timeout = 300) {
    static const mspec m = {"q4_K", ZMK_LLAMA, ZMK_F32, ZT_Q4_K};
    check_int8_x(&m);
}
/* The mark needs the target's integer dot products, decode, the knob (or the
 * option) and GEMVs of one k-quant type; codegen refuses a mark it cannot
 * honour. No device needed. */
Test(kernels_matmul, int8_x_only_where_asked) {
    static const mspec m = {"q4_K_ask", ZMK_LLAMA, ZMK_F32, ZT_Q4_K};
    gguf_file *f = open_model(&m);
    static const struct {
        const char *target;
        zpass_phase ph;
        zpass_idot idot;
        bool want;
    } cases[] = {
        /* the target's choice: measured faster on the H200, not on llvmpipe
         * (functional, not accelerated); forced; none without the products */
        {"llvmpipe", ZPH_DECODE, ZIDOT_ON, true},       {"h200", ZPH_DECODE, ZIDOT_TARGET, true},
        {"llvmpipe", ZPH_DECODE, ZIDOT_TARGET, false},  {"h200", ZPH_DECODE, ZIDOT_OFF, false},
        {"generic", ZPH_DECODE, ZIDOT_ON, false},       {"llvmpipe", ZPH_PREFILL, ZIDOT_ON, false},
        {"h200", ZPH_PREFILL, ZIDOT_TARGET, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        zir_graph *g = compile_idot(f, ztarget_find(cases[c].target), cases[c].ph, cases[c].idot);
        int n = 0;
        for (uint32_t i = 0; i < g->n_nodes; i++)
            n += zpass_gemv_q8(g->nodes[i]);
        cr_expect_eq(n > 0, cases[c].want, "case %zu (%s): %d GEMVs with int8 x", c, cases[c].target, n);
        /* a mark the target cannot honour is an internal error, not a wrong kernel */
        ztarget no = *ztarget_find(cases[c].target);
        no.int_dot = false;
        zcg_opts o = {&no, cases[c].ph, 1, false};
        zarena *a = zarena_new();
        for (uint32_t i = 0; n && i < g->n_nodes; i++) {
            if (!zpass_gemv_q8(g->nodes[i])) continue;
            zcg_kernel kn;
            zdiag d = {0};
            cr_expect_eq(zcg_node(g, g->nodes[i], &o, a, &kn, &d), ZE_INTERNAL);
            cr_expect(strstr(d.msg, "integer dot products"), "%s", d.msg);
        }
        zarena_free(a);
        zir_graph_free(g);
    }
    gguf_close(f);
}

Test(kernels_matmul, q6_K_planes_int8_x, .timeout = 300) {
    check_int8_x(&Q6_PLANES);
}

Test(kernels_matmul, q6_K_int8_x, .timeout = 300) {
    static const mspec m = {"q6_K_i8", ZMK_QWEN3, ZMK_F32, ZT_Q6_K};
    check_int8_x(&m);
}

Test(kernels_matmul, q4_k_m_f16_activations, .timeout = 300) {
    check_model(&MODELS[M_Q4_K_M], true, TOL_F16);
}

/* ---- the batch schedule's multi-row GEMV ------------------------------------- */

/* The prefill graph for h200 (residual and bias epilogues,
 * gate+up+SwiGLU, the KV store), as the batch schedule runs it: every
 * matmul a multi-row GEMV of `rows` token rows a workgroup (zcg_opts
 * gemv_rows), at steps of 1, 3 and 16 tokens: with 16 rows a workgroup
 * 1 and 3 are partial and 16 whole, with 4 the step of 16 takes four
 * workgroup rows and 3 one partial one. mm-f16 stays off: the GEMV sums
 * fp32 operands, which the interpreter then computes too. The norm
 * prologue: the llvmpipe profile's graph (h200's prefill keeps its norms
 * as kernels of their own, for the tensor-core GEMMs' sake). */
static void check_gemvn(const mspec *m, int rows, bool act_f16, double tol) {
    kh_ctx *k = open_device();
    gguf_file *f = open_model(m);
    bool seen[F_COUNT] = {0};
    worst w[MAX_KINDS] = {0};
    ztarget t = device_target(k, "h200");
    zir_graph *g = NULL;
    zdiag d = {0};
    cr_assert_eq(zir_build_from_gguf(f, &g, &d), ZOK, "%s", d.msg);
    ztarget norms = *ztarget_find("h200");
    norms.coopmat = false; /* the norms in the GEMVs' prologues, as llvmpipe's prefill has them */
    zpass_opts po = kh_pass_opts(&norms, ZPH_PREFILL);
    cr_assert_eq(zpass_run_pipeline(g, NULL, "mm-f16", &po, &d), ZOK, "%s", d.msg);
    char what[96];
    snprintf(what, sizeof what, "%s h200/batch, %d rows a workgroup%s", m->label, rows,
             act_f16 ? " f16" : "");
    run_ctx r = {k, g, {&t, ZPH_PREFILL, 16, act_f16}, ztarget_find("h200"), what, tol, seen, w};
    r.o.gemv_rows = rows;
    static const int64_t T[] = {1, 3, 16};
    static const bool all[] = {true, true, true};
    run_steps(&r, T, all, 3);
    static const feat want[] = {F_GEMV, F_NORM, F_RESIDUAL, F_GATE_UP, F_STORE};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(seen[want[i]], "%s: no multi-row GEMV exercised %s", what, feat_names[want[i]]);
    if (m->arch == ZMK_QWEN2) cr_expect(seen[F_BIAS], "%s: no kernel exercised the bias epilogue", what);
    cr_expect(!seen[F_GEMM], "%s: a matmul ran as a GEMM", what);
    for (int i = 0; i < MAX_KINDS && w[i].kind[0]; i++) {
        cr_expect(!strncmp(w[i].kind, "gemvn", 5) || !strcmp(w[i].kind, "embed"), "%s: ran %s", what,
                  w[i].kind);
        cr_log_info("%s: %-12s max error %.3g of the output RMS over %d checks", what, w[i].kind, w[i].err,
                    w[i].n);
    }
    zir_graph_free(g);
    gguf_close(f);
    kh_close(k);
}

/* q4_k_m: q4_K's and q6_K's group layouts (GMODE 12, 14), q5_0's rows of
 * 288 the 8-element one; q8_0 (qwen2, biases) the 8-element one alone. */
Test(kernels_matmul, gemvn_q4_k_m, .timeout = 300) {
    check_gemvn(&MODELS[M_Q4_K_M], 16, false, TOL_F32);
    check_gemvn(&MODELS[M_Q4_K_M], 4, false, TOL_F32);
}
Test(kernels_matmul, gemvn_q8_0_q6_K, .timeout = 300) {
    check_gemvn(&MODELS[3], 16, false, TOL_F32);
    check_gemvn(&MODELS[12], 4, false, TOL_F32);
}
Test(kernels_matmul, gemvn_f16_activations, .timeout = 300) {
    check_gemvn(&MODELS[M_Q4_K_M], 8, true, TOL_F16);
}

/* The batch schedule's own graph (zpass_opts.batch_rows = rows, as zincc
 * --parallel compiles it) with int8 x forced (llvmpipe has the products,
 * not fast ones): q and k (and v where it shares their type) as one rows
 * GEMV, the norms in the prologues, every q4_K and q6_K matmul with
 * attr.gemv_q8, all multi-row GEMVs of `rows` token rows a workgroup, at
 * steps of 1, 3 and 8 tokens from fresh random tokens, against the
 * interpreter quantizing x the same way. Each int8-x GEMV runs its
 * quantizing pass first (kernel.pre, as the lowering dispatches it). */
static const char *gemvn_q8_want; /* a part of every int8-x GEMV's name (a knob's), or NULL */
static void check_gemvn_q8(const mspec *m, int rows) {
    kh_ctx *k = open_device();
    cr_assert(k->dev.prof.int_dot, "%s: no shaderIntegerDotProduct", k->dev.prof.name);
    gguf_file *f = open_model(m);
    bool seen[F_COUNT] = {0};
    worst w[MAX_KINDS] = {0};
    ztarget t = device_target(k, "h200");
    zir_graph *g = NULL;
    zdiag d = {0};
    cr_assert_eq(zir_build_from_gguf(f, &g, &d), ZOK, "%s", d.msg);
    zpass_opts po = kh_pass_opts(ztarget_find("h200"), ZPH_PREFILL);
    po.batch_rows = rows;
    po.gemv_idot = ZIDOT_ON;
    cr_assert_eq(zpass_run_pipeline(g, NULL, NULL, &po, &d), ZOK, "%s", d.msg);
    int n_q8 = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        n_q8 += zpass_gemv_q8(g->nodes[i]);
    cr_assert_gt(n_q8, 0, "no matmul of the batch graph was given int8 x");
    char what[96];
    snprintf(what, sizeof what, "%s h200/batch int8 x, %d rows a workgroup", m->label, rows);
    run_ctx r = {k, g, {&t, ZPH_PREFILL, 8, false}, ztarget_find("h200"), what, TOL_F32, seen, w};
    r.o.gemv_rows = rows;
    static const int64_t T[] = {1, 3, 8};
    static const bool all[] = {true, true, true};
    run_steps(&r, T, all, 3);
    cr_expect(seen[F_ROWS] && seen[F_NORM] && seen[F_GATE_UP] && !seen[F_GEMM],
              "%s: expected the rows GEMV, norm prologues and gate+up, and no GEMM", what);
    bool idot = false, gate_up = false;
    for (int i = 0; i < MAX_KINDS && w[i].kind[0]; i++) {
        cr_expect(!strncmp(w[i].kind, "gemvn", 5) || !strcmp(w[i].kind, "embed"), "%s: ran %s", what,
                  w[i].kind);
        idot |= !strcmp(w[i].kind, "gemvn_idot");
        gate_up |= !strcmp(w[i].kind, "gemvn_gateup_idot");
        cr_log_info("%s: %-18s max error %.3g of the output RMS over %d checks", what, w[i].kind, w[i].err,
                    w[i].n);
    }
    cr_expect(idot && gate_up, "%s: the int8-x multi-row GEMV ran %s, %s", what,
              idot ? "alone" : "never alone", gate_up ? "as gate+up" : "never as gate+up");
    /* a quantizing pass exactly before the int8-x GEMVs */
    zarena *a = zarena_new();
    int with_pre = 0, n_idot = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zcg_kernel kn;
        if (!in_family(g->nodes[i]) || zcg_node(g, g->nodes[i], &r.o, a, &kn, &d)) continue;
        bool idot_kernel = strstr(kn.name, "_idot") != NULL;
        n_idot += idot_kernel;
        if (idot_kernel && gemvn_q8_want)
            cr_expect(strstr(kn.name, gemvn_q8_want) && strstr(kn.pre->name, gemvn_q8_want), "%s: %s (%s) lacks '%s'",
                      what, kn.name, kn.pre->name, gemvn_q8_want);
        with_pre += kn.pre != NULL;
        cr_expect_eq(kn.pre != NULL, idot_kernel, "%s: %s %s a quantizing pass", what, kn.name,
                     kn.pre ? "has" : "lacks");
        if (kn.pre)
            cr_expect(strstr(kn.pre->name, "gemvn_xq8") && kn.pre->n_bind == kn.n_bind, "%s: %s", what,
                      kn.pre->name);
    }
    cr_expect(n_idot > 0 && with_pre == n_idot, "%s: %d int8-x GEMVs, %d quantizing passes", what, n_idot,
              with_pre);
    zarena_free(a);
    zir_graph_free(g);
    gguf_close(f);
    kh_close(k);
}

Test(kernels_matmul, gemvn_q4_K_int8_x, .timeout = 300) {
    static const mspec m = {"q4_K_bq8", ZMK_LLAMA, ZMK_F32, ZT_Q4_K};
    check_gemvn_q8(&m, 1);
    check_gemvn_q8(&m, 4);
    check_gemvn_q8(&m, 8);
}
Test(kernels_matmul, gemvn_q6_K_int8_x, .timeout = 300) {
    static const mspec m = {"q6_K_bq8", ZMK_QWEN3, ZMK_F32, ZT_Q6_K};
    check_gemvn_q8(&m, 1);
    check_gemvn_q8(&m, 4);
    check_gemvn_q8(&m, 8);
}
/* x's scratch slot-major, as the lanes load it (ZINC_GEMVN_XT=1, to
 * measure): the same bytes, so the same sums, at other addresses. */
Test(kernels_matmul, gemvn_int8_x_slot_major, .timeout = 300) {
    static const mspec q4 = {"q4_K_bq8", ZMK_LLAMA, ZMK_F32, ZT_Q4_K}, q6 = {"q6_K_bq8", ZMK_QWEN3, ZMK_F32, ZT_Q6_K};
    setenv("ZINC_GEMVN_XT", "1", 1);
    gemvn_q8_want = "_xt";
    check_gemvn_q8(&q4, 8);
    check_gemvn_q8(&q6, 3);
    gemvn_q8_want = NULL;
    unsetenv("ZINC_GEMVN_XT");
}

/* Q4_K_M: q and k in q4_K as one rows GEMV, v's q6_K on its own, q5_0's
 * rows of 288 with fp32 x. */
Test(kernels_matmul, gemvn_q4_k_m_int8_x, .timeout = 300) {
    check_gemvn_q8(&MODELS[M_Q4_K_M], 8);
}

/* ---- prefill's multi-row GEMV (attr.mm_gemv) -------------------------------- */

/* Qwen3.5 (a delta-net layer, then a gated attention layer) whose beta and
 * alpha projections have 32 rows, as Qwen3.5-9B's: hidden 512, so that the
 * h200 profile's cost model (zcost_prefill_gemv, 512-token steps) sends
 * exactly those two to the multi-row GEMV (about 1.5 us against the GEMM
 * tiles' floor of 8 K steps, 8 us) and keeps the rest on the GEMMs. */
static gguf_file *open_q35_as(zmk_quant q, uint32_t layers, const char *file) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = ZMK_QWEN35, o.quant = q, o.layers = layers, o.full_attn = layers;
    o.hidden = HIDDEN, o.ff = FF, o.vocab = VOCAB, o.seed = 13;
    o.heads = 8, o.kv_heads = 4, o.head_dim = 64; /* k and v: 256 rows, GEMMs */
    o.ssm_heads = 32, o.ssm_groups = 4, o.ssm_state = 32;
    zdiag d = {0};
    const char *path = tu_tmp(file);
    cr_assert_eq(zmk_write(&o, path, NULL, &d), ZOK, "%s", d.msg);
    gguf_file *f = NULL;
    cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
    return f;
}

static gguf_file *open_q35(void) {
    return open_q35_as(ZMK_Q4_K_M, 2, "q35gemv.gguf");
}

static bool has_mm_gemv(const zir_node *n) {
    if (n->op == ZOP_MATMUL) return n->attr.mm_gemv;
    for (int i = 0; n->op == ZOP_KERNEL && i < n->n_body; i++)
        if (n->body[i]->op == ZOP_MATMUL && n->body[i]->attr.mm_gemv) return true;
    return false;
}

/* The kernel codegen gives each matmul node: a multi-row GEMV
 * (gemvn_*_t<rows>, rows as in want_t) exactly where the pass set
 * attr.mm_gemv (zcg_opts gemv_rows stays 0: no batch schedule). Returns
 * how many; names the GEMVs' epilogues in epi (as add_suffix writes them). */
static int gemv_kernels(const zir_graph *g, const zcg_opts *o, const char *what, const char *want_t, char *epi,
                        size_t episz) {
    zarena *a = zarena_new();
    int n_gemv = 0;
    epi[0] = '\0';
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        zcg_kernel kn;
        zdiag d = {0};
        if (!in_family(n) || n->op == ZOP_EMBED) continue;
        cr_assert_eq(zcg_node(g, n, o, a, &kn, &d), ZOK, "%s: '%s': %s", what, n->out->name, d.msg);
        bool gemvn = !strncmp(kn.name, "gemvn_", 6);
        cr_expect_eq(gemvn, has_mm_gemv(n), "%s: '%s' (%s) runs %s", what, n->out->name,
                     has_mm_gemv(n) ? "mm_gemv" : "no mm_gemv", kn.name);
        if (gemvn) cr_expect(strstr(kn.name, want_t) != NULL, "%s: %s, expected %s", what, kn.name, want_t);
        n_gemv += gemvn;
        const char *plus = strchr(kn.name, '+');
        if (gemvn && plus && strlen(epi) + strlen(plus) + 2 < episz) strcat(strcat(epi, plus), " ");
    }
    zarena_free(a);
    return n_gemv;
}

/* Every element of every matmul node against the interpreter at steps of 1,
 * 17 and 40 fresh random tokens (16-row workgroups: one partial, one whole
 * and one partial, two whole and a half), outputs poisoned. The GEMVs sum
 * fp32 operands, as the interpreter does for matmuls without mm_f16. */
static void run_prefill_gemvs(kh_ctx *k, const zir_graph *g, const char *tn, const char *what) {
    bool seen[F_COUNT] = {0};
    worst w[MAX_KINDS] = {0};
    ztarget t = device_target(k, tn);
    run_ctx r = {k, g, {&t, ZPH_PREFILL, 64, false}, ztarget_find(tn), what, TOL_F32, seen, w};
    static const int64_t T[] = {1, 17, 40};
    static const bool all[] = {true, true, true};
    run_steps(&r, T, all, 3);
    bool gemvn = false;
    for (int i = 0; i < MAX_KINDS && w[i].kind[0]; i++) {
        gemvn |= !strcmp(w[i].kind, "gemvn");
        cr_log_info("%s: %-12s max error %.3g of the output RMS over %d checks", what, w[i].kind, w[i].err,
                    w[i].n);
    }
    cr_expect(gemvn, "%s: no multi-row GEMV ran", what);
}

/* h200's prefill: the cost model's choice, the two 32-row projections with
 * their epilogues (beta's sigmoid; alpha's bias, softplus and product by
 * ssm_a), and nothing else; 4 token rows a workgroup, whose 4 x 128
 * workgroups fill the H200's 132 SMs three deep at a 512-token step (16
 * rows would give 128). Run here (with the h200's n_cu, 64-token steps) the
 * GEMVs take 4 rows too: steps of 17 and 40 tokens end in partial tiles. */
Test(kernels_matmul, prefill_gemv_chosen_for_32_rows, .timeout = 300) {
    unsetenv("ZINC_PREFILL_GEMV");
    kh_ctx *k = open_device();
    gguf_file *f = open_q35();
    zir_graph *g = compile(f, ztarget_find("h200"), ZPH_PREFILL);
    zcg_opts o = {.target = ztarget_find("h200"), .phase = ZPH_PREFILL, .max_tokens = 512};
    char epi[256];
    cr_expect_eq(gemv_kernels(g, &o, "q35 h200/prefill", "_t4_", epi, sizeof epi), 2, "%s", epi);
    cr_expect(strstr(epi, "+sigmoid ") && strstr(epi, "+bias+softplus+mul "), "GEMV epilogues: %s", epi);
    run_prefill_gemvs(k, g, "h200", "q35 h200/prefill");
    zir_graph_free(g);
    gguf_close(f);
    kh_close(k);
}

/* ZINC_PREFILL_GEMV=1 on the llvmpipe profile, whose prefill keeps the
 * norms in the matmul kernels' prologues: every matmul but the logits a
 * multi-row GEMV, with the norm prologue, the residual add and the KV-cache
 * store besides the gates' epilogues. */
Test(kernels_matmul, prefill_gemv_forced_with_prologues, .timeout = 300) {
    setenv("ZINC_PREFILL_GEMV", "1", 1);
    kh_ctx *k = open_device();
    gguf_file *f = open_q35();
    zir_graph *g = compile(f, ztarget_find("llvmpipe"), ZPH_PREFILL);
    unsetenv("ZINC_PREFILL_GEMV");
    zcg_opts o = {.target = ztarget_find("llvmpipe"), .phase = ZPH_PREFILL, .max_tokens = 512};
    char epi[512];
    cr_expect_gt(gemv_kernels(g, &o, "q35 llvmpipe/prefill", "_t16_", epi, sizeof epi), 4, "%s", epi);
    static const char *const want[] = {"+norm", "+add", "+store", "+sigmoid", "+softplus"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(strstr(epi, want[i]), "no multi-row GEMV with %s: %s", want[i], epi);
    run_prefill_gemvs(k, g, "llvmpipe", "q35 llvmpipe/prefill, ZINC_PREFILL_GEMV=1");
    zir_graph_free(g);
    gguf_close(f);
    kh_close(k);
}

/* ---- a delta-net layer's projections as one rows GEMV (fuse-qkv) ------------- */

/* The rows kernels of g whose segments carry epilogues (a delta-net layer's:
 * beta's sigmoid, the decay's bias, softplus and product by ssm_a), into
 * k; returns how many. */
static int epilogue_rows(const zir_graph *g, const zir_node **k, int cap) {
    int n = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *x = g->nodes[i];
        bool epi = false;
        for (int j = 0; x->op == ZOP_KERNEL && x->kp.tmpl == ZKT_MATMUL_ROWS && j < x->n_body; j++)
            epi |= x->body[j]->op == ZOP_SIGMOID;
        if (epi && n < cap) k[n++] = x;
    }
    return n;
}

/* Each such kernel of g, every element of its outputs (beta, the decay,
 * and qkv and z where they share the gates' type), outputs poisoned,
 * against the interpreter at steps of T[s] fresh random tokens. Returns
 * how many kernels ran whose names hold `want` (a layout or type mark). */
static int check_delta_rows(kh_ctx *k, const zir_graph *g, const zcg_opts *o, const int64_t *T, int n_steps,
                            const char *want, const char *what) {
    const zir_node *rows[4];
    int nr = epilogue_rows(g, rows, 4), named = 0;
    cr_assert_gt(nr, 0, "%s: no rows GEMV with segment epilogues", what);
    zir_interp *it;
    zdiag d = {0};
    cr_assert_eq(zir_interp_new(g, 64, &it, &d), ZOK, "%s", d.msg);
    tu_rng rng = tu_rng_seed(4111);
    int64_t pos = 0;
    for (int s = 0; s < n_steps; s++) {
        int32_t tok[16];
        cr_assert_leq(T[s], 16);
        for (int64_t t = 0; t < T[s]; t++)
            tok[t] = (int32_t)(tu_next(&rng) % VOCAB);
        cr_assert_eq(zir_interp_step(it, tok, T[s], NULL, &d), ZOK, "%s", d.msg);
        for (int i = 0; i < nr; i++) {
            kh_result res;
            zstatus st = kh_check_node(k, g, rows[i], o, it, (zir_step){T[s], pos, 64}, &res, &d);
            cr_assert_eq(st, ZOK, "%s: '%s' (T=%lld): %s", what, rows[i]->out->name, (long long)T[s], d.msg);
            cr_expect(res.max_err < TOL_F32, "%s: %s (T=%lld pos=%lld): error %.3g of the output RMS", what,
                      res.kernel, (long long)T[s], (long long)pos, res.max_err);
            cr_expect(strstr(res.kernel, "+sigmoid.") && strstr(res.kernel, "+bias+softplus+mul."),
                      "%s: %s: no segment epilogues in the name", what, res.kernel);
            /* every row of every output: 32 + 32 gates, qkv 1280 and z 1024 where they joined */
            int64_t want_rows = 0;
            for (int j = 0; j < rows[i]->n_body; j++)
                want_rows += rows[i]->body[j]->op == ZOP_MATMUL ? rows[i]->body[j]->in[1]->shape[0] : 0;
            cr_expect_eq(res.checked, T[s] * want_rows, "%s: %s checked %lld elements", what, res.kernel,
                         (long long)res.checked);
            named += strstr(res.kernel, want) != NULL;
            if (s == n_steps - 1)
                cr_log_info("%s: %s max error %.3g of the output RMS", what, res.kernel, res.max_err);
        }
        pos += T[s];
    }
    zir_interp_free(it);
    return named;
}

/* Decode, the default pipeline for llvmpipe and h200 (clamped to the
 * device), at three one-token steps: with Q4_K_M, layers 0 and 1 put qkv,
 * z, beta and alpha (all q4_K) in one GEMV of four segments, layer 2 (a
 * use_more_bits layer: qkv in q6_K) z, beta and alpha in one of three;
 * with f16 weights the generic 8-element layout (GMODE 0) runs the four.
 * x in fp32 here, in int8 below. */
Test(kernels_matmul, delta_rows_fp32_x, .timeout = 300) {
    kh_ctx *k = open_device();
    static const struct {
        zmk_quant q;
        const char *file, *want;
        int segs[3]; /* matmuls of each delta layer's rows GEMV */
    } models[] = {
        {ZMK_Q4_K_M, "q35rows.gguf", "gemv_rows_q4_K+sigmoid.q4_K+bias+softplus+mul.q4_K", {4, 4, 3}},
        {ZMK_F16, "q35rows16.gguf", "gemv_rows_f16+sigmoid.f16+bias+softplus+mul.f16.f16_n", {4, 4, 4}}};
    static const int64_t T[] = {1, 1, 1};
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        gguf_file *f = open_q35_as(models[mi].q, 4, models[mi].file);
        for (int ti = 0; ti < 2; ti++) {
            ztarget t = device_target(k, TARGETS[ti]);
            zir_graph *g = compile(f, ztarget_find(TARGETS[ti]), ZPH_DECODE);
            char what[96];
            snprintf(what, sizeof what, "q35 %s %s/decode", models[mi].file, TARGETS[ti]);
            const zir_node *rows[4];
            cr_assert_eq(epilogue_rows(g, rows, 4), 3, "%s: a rows GEMV a delta layer", what);
            for (int i = 0; i < 3; i++) {
                int segs = 0;
                for (int j = 0; j < rows[i]->n_body; j++)
                    segs += rows[i]->body[j]->op == ZOP_MATMUL;
                cr_expect_eq(segs, models[mi].segs[i], "%s: layer %d: %d segments", what, i, segs);
            }
            zcg_opts o = {&t, ZPH_DECODE, 1, false};
            int named = check_delta_rows(k, g, &o, T, 3, models[mi].want, what);
            cr_expect_eq(named, 3 * 3, "%s: %d kernels named %s", what, named, models[mi].want);
            zir_graph_free(g);
        }
        gguf_close(f);
    }
    kh_close(k);
}

/* The same with int8 x (--gemv-x int8; the H200's default in decode),
 * against the interpreter quantizing x the same way: q4_K's integer-dot
 * layout with the segments' epilogues after the sums. */
Test(kernels_matmul, delta_rows_int8_x, .timeout = 300) {
    kh_ctx *k = open_device();
    cr_assert(k->dev.prof.int_dot, "%s: no shaderIntegerDotProduct", k->dev.prof.name);
    gguf_file *f = open_q35_as(ZMK_Q4_K_M, 4, "q35rows.gguf");
    static const int64_t T[] = {1, 1, 1};
    for (int ti = 0; ti < 2; ti++) {
        ztarget t = device_target(k, TARGETS[ti]);
        zir_graph *g = compile_idot(f, ztarget_find(TARGETS[ti]), ZPH_DECODE, ZIDOT_ON);
        const zir_node *rows[4];
        cr_assert_eq(epilogue_rows(g, rows, 4), 3);
        for (int i = 0; i < 3; i++)
            cr_expect(zpass_gemv_q8(rows[i]), "layer %d's rows GEMV has fp32 x", i);
        zcg_opts o = {&t, ZPH_DECODE, 1, false};
        char what[96];
        snprintf(what, sizeof what, "q35 int8 x %s/decode", TARGETS[ti]);
        cr_expect_eq(check_delta_rows(k, g, &o, T, 3, "_idot+norm", what), 3 * 3, "%s: int8-x kernels", what);
        zir_graph_free(g);
    }
    gguf_close(f);
    kh_close(k);
}

/* The batch schedule's own graph (zpass_opts.batch_rows 8, as zincc
 * --parallel 8 compiles it): the same rows GEMVs as multi-row GEMVs
 * (matmul_gemvn.glsl) of 8 token rows a workgroup, at steps of 1, 3 and 8
 * tokens, with fp32 x and with int8 x (its quantizing pass first). */
Test(kernels_matmul, delta_rows_batch, .timeout = 300) {
    kh_ctx *k = open_device();
    gguf_file *f = open_q35_as(ZMK_Q4_K_M, 4, "q35rows.gguf");
    static const int64_t T[] = {1, 3, 8};
    for (int q8 = 0; q8 < 2; q8++) {
        if (q8 && !k->dev.prof.int_dot) continue;
        ztarget t = device_target(k, "h200");
        zir_graph *g = NULL;
        zdiag d = {0};
        cr_assert_eq(zir_build_from_gguf(f, &g, &d), ZOK, "%s", d.msg);
        zpass_opts po = kh_pass_opts(ztarget_find("h200"), ZPH_PREFILL);
        po.batch_rows = 8;
        po.gemv_idot = q8 ? ZIDOT_ON : ZIDOT_OFF;
        cr_assert_eq(zpass_run_pipeline(g, NULL, NULL, &po, &d), ZOK, "%s", d.msg);
        zcg_opts o = {&t, ZPH_PREFILL, 8, false};
        o.gemv_rows = 8;
        char what[96];
        snprintf(what, sizeof what, "q35 h200/batch of 8%s", q8 ? ", int8 x" : "");
        int named = check_delta_rows(k, g, &o, T, 3, q8 ? "_t8_r2g4_idot+norm" : "_t8_r2g4+norm", what);
        cr_expect_eq(named, 3 * 3, "%s: multi-row GEMVs", what);
        zir_graph_free(g);
    }
    gguf_close(f);
    kh_close(k);
}

/* ---- the census: every template appears in the graphs checked above ---------- */

/* ZINC_DUMP_GLSL=dir writes each kernel's source to dir/<name>.comp, to
 * read it or feed it to glslc and a GPU by hand. */
static void dump(const zcg_kernel *kn) {
    const char *dir = getenv("ZINC_DUMP_GLSL");
    if (!dir) return;
    char path[512];
    snprintf(path, sizeof path, "%s/%s.comp", dir, kn->name);
    cr_expect_eq(tu_write_file(path, kn->glsl, strlen(kn->glsl)), 0, "cannot write %s", path);
}

/* A kernel's name without its sizes (_n<N>, _k<K> and the tile layout after
 * _cm): kernels that differ only in those #defines compile the same code. */
static void without_sizes(const char *name, char *out, size_t cap) {
    static const char digits[] = "0123456789";
    size_t o = 0;
    for (const char *c = name; *c && o + 4 < cap;) {
        if (c[0] == '_' && (c[1] == 'n' || c[1] == 'k') && c[2] && strchr(digits, c[2])) {
            c += 2 + strspn(c + 2, digits);
        } else if (!strncmp(c, "_cm", 3)) {
            memcpy(out + o, "_cm", 3);
            o += 3;
            c += 3 + strspn(c + 3, "0123456789xk");
        } else {
            out[o++] = *c++;
        }
    }
    out[o] = 0;
}

/* Whether key is new to the list (then added); a full list says no. */
static bool first_time(char (*keys)[96], int *n, int cap, const char *key) {
    for (int i = 0; i < *n; i++)
        if (!strcmp(keys[i], key)) return false;
    if (*n == cap) return false;
    snprintf(keys[(*n)++], sizeof keys[0], "%s", key);
    return true;
}

/* The tests above compile these same graphs and check every node of the
 * family; here, without a device, every template must be among them and
 * every node must get a kernel for its real target. Tensor-core kernels are
 * compiled once per name without sizes (weight types, template, prologue and
 * epilogue): glslang and spirv-opt take about a second each under ASan, and
 * the 12 models hold dozens that differ only in their sizes. */
Test(kernels_matmul, every_template_is_exercised, .timeout = 240) {
    bool seen[F_COUNT] = {0};
    int n_cm = 0, n_keys = 0;
    char keys[128][96];
    zarena *a = zarena_new();
    for (int mi = 0; mi < N_MODELS; mi++) {
        gguf_file *f = open_model(&MODELS[mi]);
        for (int ti = 0; ti < 2; ti++)
            for (int ph = 0; ph < ZPH_COUNT; ph++) {
                const ztarget *t = ztarget_find(TARGETS[ti]);
                zir_graph *g = compile(f, t, (zpass_phase)ph);
                zcg_opts o = {t, (zpass_phase)ph, ph == ZPH_DECODE ? 1 : 17, false};
                for (uint32_t i = 0; i < g->n_nodes; i++) {
                    if (!in_family(g->nodes[i])) continue;
                    zcg_kernel kn;
                    zdiag d = {0};
                    cr_assert_eq(zcg_node(g, g->nodes[i], &o, a, &kn, &d), ZOK, "%s %s/%s: %s",
                                 MODELS[mi].label, t->name, zpass_phase_name((zpass_phase)ph), d.msg);
                    cr_assert_not_null(kn.glsl);
                    /* tensor-core kernels cannot run here: they must at least compile */
                    char key[96];
                    without_sizes(kn.name, key, sizeof key);
                    if (strstr(kn.name, "_cm") && first_time(keys, &n_keys, 128, key)) {
                        zvk_spirv spv;
                        zvk_glsl_opts go = {.name = kn.name, .optimize = true};
                        cr_assert_eq(zvk_glsl_compile(a, kn.glsl, strlen(kn.glsl), &go, &spv, &d), ZOK, "%s",
                                     d.msg);
                        n_cm++;
                    }
                    census(kn.name, seen);
                    dump(&kn);
                }
                zir_graph_free(g);
            }
        gguf_close(f);
    }
    for (int i = 0; i < F_COUNT; i++)
        cr_expect(seen[i], "no graph holds a kernel with %s", feat_names[i]);
    cr_expect_gt(n_cm, 0, "no h200 prefill matmul compiled for the matrix units");
    zarena_free(a);
}

/* ---- split MLP across replays; tiles that do not fit ------------------------- */

static zir_node *find_mlp(const zir_graph *g) {
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == ZOP_KERNEL && g->nodes[i]->kp.tmpl == ZKT_MLP) return g->nodes[i];
    cr_assert_fail("no fused MLP in the graph");
    return NULL;
}

/* The last workgroup resets the split counter: three runs of the same
 * dispatch on the same scratch give the same, correct output each time.
 * h200 streams this model's decode MLP as GEMVs; priced at full speed, the
 * split kernel is what it would compile. */
Test(kernels_matmul, split_mlp_replays, .timeout = 120) {
    kh_ctx *k = open_device();
    gguf_file *f = open_model(&MODELS[M_Q4_K_M]);
    for (int ti = 0; ti < 2; ti++) {
        ztarget t = device_target(k, TARGETS[ti]), full = *ztarget_find(TARGETS[ti]);
        full.mlp_split_eff = t.mlp_split_eff = 1;
        zir_graph *g = compile(f, &full, ZPH_DECODE);
        zir_node *mlp = find_mlp(g);
        cr_assert_gt(mlp->kp.split, 1, "%s decode: split %d", TARGETS[ti], mlp->kp.split);
        zir_interp *it;
        zdiag d = {0};
        cr_assert_eq(zir_interp_new(g, 8, &it, &d), ZOK, "%s", d.msg);
        int32_t tok[1] = {42};
        cr_assert_eq(zir_interp_step(it, tok, 1, NULL, &d), ZOK, "%s", d.msg);
        kh_result res;
        k->replays = 3;
        k->tokens = tok;
        zcg_opts o = {&t, ZPH_DECODE, 1, false};
        cr_assert_eq(kh_check_node(k, g, mlp, &o, it, (zir_step){1, 0, 8}, &res, &d), ZOK, "%s", d.msg);
        cr_expect(res.max_err < TOL_F32, "%s: error %.3g after 3 replays", res.kernel, res.max_err);
        cr_expect(strstr(res.kernel, "_s") != NULL, "%s is not a split kernel", res.kernel);
        k->replays = 0;
        k->tokens = NULL;
        zir_interp_free(it);
        zir_graph_free(g);
    }
    gguf_close(f);
    kh_close(k);
}

/* The prefill MLP holds a tile x hidden fp32 accumulator in shared memory:
 * the tile the cost model chose fits; a bigger one is refused with
 * ZE_UNSUPPORTED and a message that says why, and no kernel. */
Test(kernels_matmul, mlp_tile_too_large_is_refused) {
    gguf_file *f = open_model(&MODELS[M_Q4_K_M]);
    const ztarget *t = ztarget_find("llvmpipe");
    zir_graph *g = compile(f, t, ZPH_PREFILL);
    zir_node *mlp = find_mlp(g);
    zarena *a = zarena_new();
    zcg_opts o = {t, ZPH_PREFILL, 64, false};
    zcg_kernel kn;
    zdiag d = {0};
    cr_assert_eq(zcg_node(g, mlp, &o, a, &kn, &d), ZOK, "tile %d: %s", mlp->kp.token_tile, d.msg);
    cr_assert_not_null(kn.glsl);
    mlp->kp.token_tile = 64; /* 64 x 512 x 4 B = 128 KiB > 32 KiB */
    memset(&d, 0, sizeof d);
    cr_assert_eq(zcg_node(g, mlp, &o, a, &kn, &d), ZE_UNSUPPORTED);
    cr_assert_null(kn.glsl);
    cr_expect(strstr(d.msg, "shared memory") && strstr(d.msg, mlp->out->name) && strstr(d.msg, "64-token"),
              "message: %s", d.msg);
    cr_log_info("refused: %s", d.msg);
    zarena_free(a);
    zir_graph_free(g);
    gguf_close(f);
}

/* ---- q, k and v of different types in one rows GEMV -------------------------- */

/* fuse-qkv fuses only matmuls of one weight type (each type's own GEMV
 * layout stays); the kernel takes any mix, in the generic layout. These
 * graphs are fused by hand as the pass would (passes/fuse_qkv.c), then
 * fuse-store sends v into the cache. */
static void fuse_qkv_by_hand(zir_graph *g) {
    zir_node *n = zir_find(g, "l0.attn_in")->producer, *c[ZPASS_MAX_MATMULS];
    int nc = zpass_matmul_consumers(g, n->out, c);
    cr_assert_eq(nc, 3, "the attention norm feeds %d matmuls", nc);
    zir_node *body[4] = {n, c[0], c[1], c[2]};
    for (int i = 0; i < 3; i++)
        zir_node_move(g, c[i], n->id + 1 + (uint32_t)i);
    zir_kparams kp = {ZKT_MATMUL_ROWS, 1, 1};
    zdiag d = {0};
    cr_assert_not_null(zir_fuse_outs(g, body, 4, c, 2, &kp, &d), "%s", d.msg);
    zpass_opts po = kh_pass_opts(ztarget_find("llvmpipe"), ZPH_DECODE);
    cr_assert_eq(zpass_run_pipeline(g, "fuse-store", NULL, &po, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zir_verify(g, &d), ZOK, "%s", d.msg);
}

/* q4_K q4_K q6_K is Q4_K_M's use_more_bits layer, which the pass leaves
 * as q+k and v; the other weights are f16. On llvmpipe (f32 cache) and
 * h200 (f16 cache), with fp32 and fp16 activations. */
Test(kernels_matmul, rows_type_mixes, .timeout = 300) {
    static const ztype mixes[][3] = {
        {ZT_Q4_K, ZT_Q4_K, ZT_Q6_K}, {ZT_Q8_0, ZT_F16, ZT_Q4_K}, {ZT_F16, ZT_Q6_K, ZT_Q8_0}};
    kh_ctx *k = open_device();
    for (size_t mi = 0; mi < sizeof mixes / sizeof mixes[0]; mi++) {
        char label[48];
        snprintf(label, sizeof label, "mix-%s.%s.%s", ztype_name(mixes[mi][0]), ztype_name(mixes[mi][1]),
                 ztype_name(mixes[mi][2]));
        mspec m = {label, ZMK_QWEN3, ZMK_F32, ZT_F16, mixes[mi]};
        gguf_file *f = open_model(&m);
        for (int run = 0; run < 4; run++) {
            bool seen[F_COUNT] = {0}, act_f16 = run & 1;
            worst w[MAX_KINDS] = {0};
            const char *tn = TARGETS[run / 2];
            ztarget t = device_target(k, tn);
            zir_graph *g = NULL;
            zdiag d = {0};
            cr_assert_eq(
                kh_compile(f, ztarget_find(tn), ZPH_DECODE, "shape,width,kv-type,fuse-dequant", &g, &d), ZOK,
                "%s", d.msg);
            fuse_qkv_by_hand(g);
            char what[96];
            snprintf(what, sizeof what, "%s %s/decode%s", label, tn, act_f16 ? " f16" : "");
            run_ctx r = {
                k,    g, {&t, ZPH_DECODE, 1, act_f16}, ztarget_find(tn), what, act_f16 ? TOL_F16 : TOL_F32,
                seen, w};
            run_graph(&r, ZPH_DECODE);
            cr_expect(seen[F_ROWS] && seen[F_STORE], "%s: the rows GEMV with the store did not run", what);
            zir_graph_free(g);
        }
        gguf_close(f);
    }
    kh_close(k);
}

/* A kernel's GLSL compiles with shaderc and passes the validator; with
 * rewrite, its NV cooperative matrices also take the KHR rewrite, none
 * left. */
static void check_spirv(zarena *a, const zcg_kernel *kn, bool rewrite, const char *note) {
    zdiag d = {0};
    zvk_glsl_opts go = {.name = kn->name, .optimize = true};
    zvk_spirv spv;
    cr_assert_eq(zvk_glsl_compile(a, kn->glsl, strlen(kn->glsl), &go, &spv, &d), ZOK, "%s%s: %s", kn->name, note,
                 d.msg);
    spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_2);
    spv_const_binary_t bin = {spv.words, spv.n_words};
    spv_diagnostic diag = NULL;
    cr_expect_eq(spvValidate(ctx, &bin, &diag), SPV_SUCCESS, "%s: %s", kn->name,
                 diag && diag->error ? diag->error : "invalid");
    spvDiagnosticDestroy(diag);
    spvContextDestroy(ctx);
    if (!rewrite) return;
    uint32_t *khr;
    size_t nk;
    cr_assert_eq(zspv_coopmat_nv_to_khr(spv.words, spv.n_words, a, &khr, &nk, &d), ZOK, "%s: %s", kn->name, d.msg);
    cr_expect(zspv_uses_coopmat_nv(spv.words, spv.n_words) && !zspv_uses_coopmat_nv(khr, nk), "%s: not rewritten",
              kn->name);
}

/* ---- the batch schedule's multi-row GEMV on the matrix units --------------- */

/* The batch graph as zincc --parallel compiles it for the h200 with its
 * GEMVs on the matrix units (at any row count here: ztarget.batch_gemv_cm_rows; the mm-f16 pass marks
 * them attr.mm_f16, matmul_gemvn_cm.glsl runs them after its x pass). */
static zir_graph *batch_cm_graph(const gguf_file *f, int rows, ztarget *t) {
    zir_graph *g = NULL;
    zdiag d = {0};
    cr_assert_eq(zir_build_from_gguf(f, &g, &d), ZOK, "%s", d.msg);
    t->batch_gemv_cm_rows = 1;
    zpass_opts po = kh_pass_opts(t, ZPH_PREFILL);
    po.batch_rows = rows;
    cr_assert_eq(zpass_run_pipeline(g, NULL, NULL, &po, &d), ZOK, "%s", d.msg);
    return g;
}

/* Every kernel of that graph, the rows GEMV (q, k, v), gate+up, the norm
 * prologues (in the x pass) and the KV store among them, on the device's
 * matrix units at steps of 1, 3, 8 and 16 tokens from fresh random tokens,
 * against the interpreter rounding the same operands to fp16. Cooperative
 * matrices do not run on llvmpipe: there the test says so and skips; the
 * device calls run it (docs/performance.md). */
static void check_gemvn_cm(const mspec *m, int rows) {
    kh_ctx *k = open_coopmat_device("the tensor-core multi-row GEMV");
    gguf_file *f = open_model(m);
    bool seen[F_COUNT] = {0};
    worst w[MAX_KINDS] = {0};
    ztarget t = device_target(k, "h200");
    zir_graph *g = batch_cm_graph(f, rows, &t);
    int n_f16 = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        n_f16 += zpass_gemv_node(g->nodes[i]) && zpass_gemv_f16(g->nodes[i]);
    cr_assert_gt(n_f16, 0, "no GEMV of the batch graph was given fp16 operands");
    char what[96];
    snprintf(what, sizeof what, "%s h200/batch on the matrix units, %d rows", m->label, rows);
    run_ctx r = {k, g, {&t, ZPH_PREFILL, rows, false}, ztarget_find("h200"), what, TOL_MM16, seen, w};
    r.o.gemv_rows = rows;
    static const int64_t T[] = {1, 3, 8, 16};
    static const bool all[] = {true, true, true, true};
    run_steps(&r, T, all, rows >= 16 ? 4 : 3);
    /* qwen2's biased q, k and v stay GEMVs of their own (the bias epilogue) */
    cr_expect((seen[F_ROWS] || m->arch == ZMK_QWEN2) && seen[F_NORM] && seen[F_GATE_UP] && !seen[F_GEMM],
              "%s: expected the rows GEMV, norm prologues and gate+up, and no GEMM", what);
    if (m->arch == ZMK_QWEN2) cr_expect(seen[F_BIAS], "%s: no kernel exercised the bias epilogue", what);
    for (int i = 0; i < MAX_KINDS && w[i].kind[0]; i++)
        cr_log_info("%s: %-18s max error %.3g of the output RMS over %d checks", what, w[i].kind, w[i].err,
                    w[i].n);
    /* the fp16 GEMVs that ran were the tensor-core kernel */
    zarena *a = zarena_new();
    int cm = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zcg_kernel kn;
        zdiag d = {0};
        if (!in_family(g->nodes[i]) || !zpass_gemv_f16(g->nodes[i])) continue;
        cr_assert_eq(zcg_node(g, g->nodes[i], &r.o, a, &kn, &d), ZOK, "%s: %s", what, d.msg);
        /* ZINC_BATCH_CMP=1 (a measurement): K permuted where the weights allow */
        cr_expect(strstr(kn.name, "_cm16") || strstr(kn.name, "_cmp"), "%s: %s", what, kn.name);
        cm++;
    }
    cr_expect_eq(cm, n_f16, "%s: %d tensor-core GEMVs of %d", what, cm, n_f16);
    zarena_free(a);
    zir_graph_free(g);
    gguf_close(f);
    kh_close(k);
}

Test(kernels_matmul, gemvn_cm_q4_k_m, .timeout = 300) {
    check_gemvn_cm(&MODELS[M_Q4_K_M], 8);
    check_gemvn_cm(&MODELS[M_Q4_K_M], 16);
}
Test(kernels_matmul, gemvn_cm_q8_0_q6_K, .timeout = 300) {
    check_gemvn_cm(&MODELS[3], 8);
    check_gemvn_cm(&MODELS[12], 16);
    check_gemvn_cm(&Q6_PLANES, 16); /* rows of 1024: planes (ZINC_GEMVN_CM_Q6RAW reads them raw) */
}

/* The layout of the device's matrix fragments (zvk_probe_fragmap): every
 * element of A, B and C found once, where the device has the matrices;
 * the log says whether A's is in mma's quads, and in which order (what
 * FRAG_A kernels assume). */
Test(kernels_matmul, fragment_layout, .timeout = 60) {
    kh_ctx *k = open_coopmat_device("the fragment probe");
    zvk_fragmap m;
    zdiag d = {0};
    cr_assert_eq(zvk_probe_fragmap(&k->dev, &m, &d), ZOK, "%s", d.msg);
    static const char *use[] = {"A", "B", "C"};
    for (int u = 0; u < ZVK_FRAG_USES; u++) {
        int seen[256] = {0}, cols = u == ZVK_FRAG_A ? 16 : 8;
        for (int l = 0; l < 32; l++)
            for (uint32_t i = 0; i < m.len[u]; i++)
                seen[m.row[u][l][i] * 16 + m.col[u][l][i]]++;
        for (int e = 0; e < 256; e++)
            cr_expect_eq(seen[e], e % 16 < cols, "%s: element (%d, %d) held %d times", use[u], e / 16, e % 16,
                         seen[e]);
        char line[512];
        int at = 0;
        for (int l = 0; l < 4; l++)
            for (uint32_t i = 0; i < m.len[u] && at < 480; i++)
                at += snprintf(line + at, sizeof line - (size_t)at, " %d:(%d,%d)", l, m.row[u][l][i], m.col[u][l][i]);
        cr_log_info("fragments of %s: %u a lane; lanes 0-3 hold%s", use[u], m.len[u], line);
    }
    int right, down;
    bool quads = zvk_fragmap_a_quads(&m, &right, &down);
    cr_log_info("A's fragments on %s: %s (right bit %d, down bit %d)", k->dev.prof.name,
                quads ? "in mma's quads" : "not in quads", quads ? right : -1, quads ? down : -1);
    /* the h200 profile names NVIDIA's order (plans compiled for it offline) */
    const ztarget *h = ztarget_find("h200");
    if (quads && k->dev.prof.vendor_id == 0x10de)
        cr_expect(right == h->frag_right && down == h->frag_down,
                  "A's element order differs from the h200 profile's (frag_right %d, frag_down %d)", h->frag_right,
                  h->frag_down);
    int fb = zvk_fragmap_b_quads(&m);
    cr_log_info("B's fragments: %s", fb == 1   ? "in quads, bit 0 the column pair, bit 1 eight down"
                                     : fb == 2 ? "in quads, bit 1 the column pair, bit 0 eight down"
                                               : "not in quads");
    if (k->dev.prof.vendor_id == 0x10de)
        cr_expect_eq(fb, h->frag_b, "B's element order %d differs from the h200 profile's %d", fb, h->frag_b);
    kh_close(k);
}

/* Where it cannot run (llvmpipe): every kernel of the batch graph's
 * tensor-core GEMVs and their x passes compiles, validates and takes the
 * NV to KHR rewrite; with h2 2, the staged nibbles decoded two at a time
 * in fp16 and fetched two steps ahead (ZINC_GEMVN_CM_H2=2
 * ZINC_GEMVN_CM_DEPTH=2: the q4_K ones), and q6_K planes read raw a step
 * ahead (ZINC_GEMVN_CM_Q6RAW=1, the planes model); h2 3: the fp32 decode's
 * bits without conversions instead (ZINC_GEMVN_CM_F32M=1). */
static void gemvn_cm_compiles(int h2, const mspec *ms) {
    unsetenv("ZINC_BATCH_CMP"); /* the default kernels (a device call may set the knob for the others) */
    if (h2) setenv(h2 == 3 ? "ZINC_GEMVN_CM_F32M" : "ZINC_GEMVN_CM_H2", h2 == 3 ? "1" : "2", 1),
        setenv("ZINC_GEMVN_CM_DEPTH", "2", 1), setenv("ZINC_GEMVN_CM_Q6RAW", "1", 1);
    else unsetenv("ZINC_GEMVN_CM_H2"), unsetenv("ZINC_GEMVN_CM_DEPTH"), unsetenv("ZINC_GEMVN_CM_Q6RAW");
    int rh = 0;
    gguf_file *f = open_model(ms);
    ztarget t = *ztarget_find("h200");
    zir_graph *g = batch_cm_graph(f, 8, &t);
    zcg_opts o = {.target = &t, .phase = ZPH_PREFILL, .max_tokens = 8, .gemv_rows = 8};
    int built = 0, glu = 0, segs = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        if (!in_family(n) || n->op == ZOP_EMBED) continue;
        zarena *a = zarena_new();
        zcg_kernel kn;
        zdiag d = {0};
        cr_assert_eq(zcg_node(g, n, &o, a, &kn, &d), ZOK, "'%s': %s", n->out->name, d.msg);
        if (!zpass_gemv_f16(n)) { /* rows of 288 (q5_0 here): not a multiple of the K step */
            cr_expect(!strstr(kn.name, "_cm16"), "'%s': %s", n->out->name, kn.name);
            zarena_free(a);
            continue;
        }
        cr_expect(strstr(kn.name, "_cm16") && kn.pre && strstr(kn.pre->name, "gemvn_xh"), "'%s': %s (%s)",
                  n->out->name, kn.name, kn.pre ? kn.pre->name : "no x pass");
        check_spirv(a, &kn, true, "");
        check_spirv(a, kn.pre, false, "");
        built++;
        glu += strstr(kn.name, "gateup") != NULL;
        segs += strstr(kn.name, "_rows") != NULL;
        rh += h2 == 3 ? strstr(kn.name, "k64rmd2") != NULL || strstr(kn.name, "k64r6md2") != NULL
                      : strstr(kn.name, "k64rh2d2") != NULL || strstr(kn.name, "k64r6hd2") != NULL;
        zarena_free(a);
    }
    cr_expect(built >= (ms == &MODELS[M_Q4_K_M] ? 5 : 3) && glu > 0 && segs > 0,
              "%s: %d tensor-core GEMVs (%d gate+up, %d rows)", ms->label, built, glu, segs);
    cr_expect(h2 ? rh >= 2 : rh == 0, "%s: %d GEMVs decode two nibbles at a time in fp16 or read q6_K planes raw",
              ms->label, rh);
    unsetenv("ZINC_GEMVN_CM_H2"), unsetenv("ZINC_GEMVN_CM_DEPTH"), unsetenv("ZINC_GEMVN_CM_Q6RAW");
    unsetenv("ZINC_GEMVN_CM_F32M");
    zir_graph_free(g);
    gguf_close(f);
}
Test(kernels_matmul, gemvn_cm_compiles_and_rewrites, .timeout = 300) {
    gemvn_cm_compiles(0, &MODELS[M_Q4_K_M]);
    for (int h2 = 2; h2 <= 3; h2++) {
        gemvn_cm_compiles(h2, &MODELS[M_Q4_K_M]);
        gemvn_cm_compiles(h2, &Q6_PLANES);
    }
}

/* The batch GEMVs with K permuted (ZINC_BATCH_CMP=1, a measurement):
 * matmul_cmp.glsl over 16 token rows, x from the fp16 x pass. Gate+up (all
 * q4_K here; the rows GEMVs keep their segments) takes it; it compiles,
 * validates and takes the KHR rewrite. It runs on the H200
 * (kernels_matmul/gemvn_cm* with the knob). */
Test(kernels_matmul, batch_cmp_compiles_and_rewrites, .timeout = 300) {
    setenv("ZINC_BATCH_CMP", "1", 1);
    gguf_file *f = open_model(&MODELS[M_Q4_K_M]);
    ztarget t = *ztarget_find("h200");
    zir_graph *g = batch_cm_graph(f, 16, &t);
    zcg_opts o = {.target = &t, .phase = ZPH_PREFILL, .max_tokens = 16, .gemv_rows = 16};
    int cmp = 0, glu = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        if (!in_family(n) || n->op == ZOP_EMBED || !zpass_gemv_f16(n)) continue;
        zarena *a = zarena_new();
        zcg_kernel kn;
        zdiag d = {0};
        cr_assert_eq(zcg_node(g, n, &o, a, &kn, &d), ZOK, "'%s': %s", n->out->name, d.msg);
        if (strstr(kn.name, "_cmp16x")) {
            cr_expect(kn.pre && strstr(kn.pre->name, "gemvn_xh"), "'%s': %s has no x pass", n->out->name, kn.name);
            check_spirv(a, &kn, true, "");
            cmp++;
            glu += strstr(kn.name, "gateup") != NULL;
        }
        zarena_free(a);
    }
    unsetenv("ZINC_BATCH_CMP");
    cr_expect(glu > 0, "%d permuted batch GEMVs, none of them gate+up", cmp);
    zir_graph_free(g);
    gguf_close(f);
}

/* Every layout zincc --tune may give a prefill GEMM on the matrix units
 * compiles, validates and takes the KHR rewrite, for the h200 graph's
 * gate+up, q4_K matmuls and Q6_K planes (they run on the H200:
 * kernels_matmul/cmp_layouts_match_the_interpreter). */
Test(kernels_matmul, cmp_layouts_compile_and_rewrite, .timeout = 300) {
    int nc;
    const zcg_gemv *cand = zvk_tune_gemm_candidates(&nc);
    const mspec *ms[] = {&MODELS[M_Q4_K_M], &Q6_PLANES};
    for (int mi = 0; mi < 2; mi++) {
        gguf_file *f = open_model(ms[mi]);
        const ztarget *t = ztarget_find("h200");
        zir_graph *g = compile(f, t, ZPH_PREFILL);
        int built = 0;
        for (int c = 0; c < nc; c++)
            for (uint32_t i = 0; i < g->n_nodes; i++) {
                zcg_opts o = {t, ZPH_PREFILL, 512, false, NULL, &cand[c]};
                zarena *a = zarena_new();
                zcg_kernel kn;
                zdiag d = {0};
                if (zcg_node(g, g->nodes[i], &o, a, &kn, &d) == ZOK && strstr(kn.name, "_cmp")) {
                    cr_expect(strstr(kn.key, "_cmp") && strcmp(kn.key, kn.name), "%s: key '%s' holds the layout",
                              kn.name, kn.key);
                    check_spirv(a, &kn, true, "");
                    built++;
                }
                zarena_free(a);
            }
        cr_expect_geq(built, 2 * nc, "%s: %d permuted GEMMs built over %d layouts", ms[mi]->label, built, nc);
        zir_graph_free(g);
        gguf_close(f);
    }
}

/* ---- the tensor-core GEMM where the device has no matrix units ------------ */

/* llvmpipe cannot run matmul_cm.glsl (no cooperative matrix), so the tests
 * above run its matmuls on the scalar GEMM there and on the matrix units
 * only on the H200. What is checked here runs everywhere: every prefill
 * matmul kernel that the full h200 profile puts on the matrix units, for
 * weights staged raw (q4_K), decoded on fetch (q6_K, q5_0, q8_0) and copied
 * (f16), with fp32 and fp16 activations (fp16 x with no norm is staged as
 * bit copies), compiles with shaderc, passes the validator, and takes the
 * NV to KHR rewrite with no NV left. */
static int n_cmp; /* of them, matmul_cmp.glsl's (K permuted) */
static int compile_cm_kernels(const mspec *m, bool act_f16) {
    gguf_file *f = open_model(m);
    zir_graph *g = compile(f, ztarget_find("h200"), ZPH_PREFILL);
    zcg_opts o = {.target = ztarget_find("h200"), .phase = ZPH_PREFILL, .max_tokens = 512, .act_f16 = act_f16};
    int built = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        if (!in_family(n)) continue;
        zarena *a = zarena_new();
        zcg_kernel kn;
        zdiag d = {0};
        cr_assert_eq(zcg_node(g, n, &o, a, &kn, &d), ZOK, "%s: '%s': %s", m->label, n->out->name, d.msg);
        if (strstr(kn.name, "_cm")) {
            check_spirv(a, &kn, true, act_f16 ? " (fp16 x)" : "");
            built++;
            n_cmp += strstr(kn.name, "_cmp") != NULL;
        }
        zarena_free(a);
    }
    zir_graph_free(g);
    gguf_close(f);
    return built;
}

Test(kernels_matmul, tensor_core_kernels_compile_and_rewrite, .timeout = 300) {
    const int models[] = {1 /* f16 */, 3 /* q8_0 */, M_Q4_K_M};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        for (int f16 = 0; f16 < 2; f16++)
            cr_expect_gt(compile_cm_kernels(&MODELS[models[i]], f16), 2, "%s: too few tensor-core kernels",
                         MODELS[models[i]].label);
}

/* The prefill GEMM with K permuted (ZINC_CM_PERM, off by default): its
 * q4_K matmuls, gate+up among them, and its q6_K planes, with the fp16 and
 * the fp32 decode and fp32 and fp16 x, compile, validate and take the KHR
 * rewrite. It runs on the H200 (kernels_matmul/q4_k_m* and
 * kernels_matmul/q6_K_planes with ZINC_CM_PERM set). */
Test(kernels_matmul, perm_gemm_compiles_and_rewrites, .timeout = 300) {
    for (int perm = 1; perm <= 2; perm++) {
        setenv("ZINC_CM_PERM", perm == 1 ? "1" : "2", 1);
        n_cmp = 0;
        for (int f16 = 0; f16 < 2; f16++)
            compile_cm_kernels(&MODELS[M_Q4_K_M], f16);
        cr_expect_gt(n_cmp, 2, "ZINC_CM_PERM=%d: %d permuted q4_K GEMMs", perm, n_cmp);
        n_cmp = 0;
        compile_cm_kernels(&Q6_PLANES, false);
        cr_expect_geq(n_cmp, 2, "ZINC_CM_PERM=%d: %d permuted GEMMs of q6_K planes", perm, n_cmp);
    }
    unsetenv("ZINC_CM_PERM");
}

/* Which prefill GEMM the target's facts choose: the h200 profile (its
 * fragment order known, cm_perm 2) puts q4_K matmuls on the permuted GEMM
 * with the fp32 decode; the same target with an unknown fragment order
 * (a device whose probe found no quads) keeps the staged tiles, whatever
 * ZINC_CM_PERM asks. */
/* Calls fn with the name of every matmul-family kernel of the q4_K_M test
 * model's h200 prefill graph, compiled for target t at 512-token steps. */
static void each_prefill_kernel(const ztarget *t, void (*fn)(const char *name, void *ctx), void *ctx) {
    gguf_file *f = open_model(&MODELS[M_Q4_K_M]);
    zir_graph *g = compile(f, ztarget_find("h200"), ZPH_PREFILL);
    zcg_opts o = {.target = t, .phase = ZPH_PREFILL, .max_tokens = 512};
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        if (!in_family(g->nodes[i])) continue;
        zarena *a = zarena_new();
        zcg_kernel kn;
        zdiag d = {0};
        cr_assert_eq(zcg_node(g, g->nodes[i], &o, a, &kn, &d), ZOK, "'%s': %s", g->nodes[i]->out->name, d.msg);
        fn(kn.name, ctx);
        zarena_free(a);
    }
    zir_graph_free(g);
    gguf_close(f);
}

typedef struct name_count {
    const char *what;
    int n;
} name_count;
static void count_one(const char *name, void *ctx) {
    name_count *c = ctx;
    c->n += strstr(name, c->what) != NULL;
}
static int count_names(const ztarget *t, const char *what) {
    name_count c = {what, 0};
    each_prefill_kernel(t, count_one, &c);
    return c.n;
}

Test(kernels_matmul, permuted_gemm_needs_the_fragment_order, .timeout = 120) {
    ztarget t = *ztarget_find("h200");
    cr_expect_geq(count_names(&t, "_cmp"), 2,
                  "the h200 profile's q4_K GEMMs (gate+up and a projection) are not the permuted form");
    cr_expect_eq(count_names(&t, "_cmp"), count_names(&t, "p32"), "the permuted GEMMs must decode in fp32");
    t.frag_right = t.frag_down = 0;
    setenv("ZINC_CM_PERM", "2", 1);
    cr_expect_eq(count_names(&t, "_cmp"), 0, "a permuted GEMM was compiled for an unknown fragment order");
    unsetenv("ZINC_CM_PERM");
    t = *ztarget_find("h200");
    t.cm_perm = 0;
    cr_expect_eq(count_names(&t, "_cmp"), 0, "cm_perm 0 still gave permuted GEMMs");
    cr_expect_gt(count_names(&t, "_cm"), 2, "cm_perm 0 left no staged tensor-core GEMM");
}

/* The permuted GEMM's token tile follows its grid (cmp_tokens): 128 tokens
 * where the row tiles of a 512-token step give at least 150 % (Q4_K, the
 * layout rule) or 90 % (Q6_K planes) of the target's compute units a
 * workgroup, halved while they do not, down to
 * 32; so no tile is smaller than it need be, and none underfills where a
 * smaller one would not. Checked on every permuted GEMM of the h200 plan
 * for the test model, whose projections (a few row tiles) take the small
 * tiles, and on a target of 8 compute units, where all take 128. */
typedef struct tile_census {
    int64_t n_cu;
    int n, small;
} tile_census;
static void check_tile(const char *name, void *ctx) {
    tile_census *c = ctx;
    const char *cm = strstr(name, "_cmp"), *nn = strstr(name, "_n");
    int bm = 0, rows = 0;
    long long N = 0;
    if (!cm || !nn || sscanf(cm, "_cmp%dx%d", &bm, &rows) != 2 || sscanf(nn, "_n%lld", &N) != 1 || rows <= 0) return;
    /* Q4_K by cg_matmul.c's cmp_rule (150 % of the compute units), Q6_K planes 90 % */
    int64_t fill = c->n_cu * (strstr(name, "q6_K") ? 90 : 150) / 100;
    int64_t cols = (N + rows - 1) / rows, grid = cols * ((512 + bm - 1) / bm);
    cr_expect(bm == 32 || grid >= fill, "%s: %lld workgroups, %lld fill the target", name, (long long)grid,
              (long long)fill);
    cr_expect(bm == 128 || cols * ((512 + 2 * bm - 1) / (2 * bm)) < fill, "%s: a tile of %d would fill", name,
              2 * bm);
    c->n++;
    c->small += bm < 128;
}
static void check_cmp_tiles(const ztarget *t, bool expect_small) {
    tile_census c = {t->n_cu, 0, 0};
    each_prefill_kernel(t, check_tile, &c);
    cr_expect_geq(c.n, 2, "%d permuted GEMMs", c.n);
    cr_expect(expect_small ? c.small > 0 : c.small == 0, "%d of %d permuted GEMMs with tiles under 128 tokens",
              c.small, c.n);
}

Test(kernels_matmul, permuted_gemm_tile_fills_the_device, .timeout = 120) {
    ztarget t = *ztarget_find("h200");
    check_cmp_tiles(&t, true);
    t.n_cu = 8;
    check_cmp_tiles(&t, false);
}

/* mm-f16's keep_f16 (ZINC_X16=0 turns it off): in the h200 prefill graph every value
 * kept in fp16 is written by a norm, attention or an fp16 matmul kernel
 * (or is a view of one) and read only as fp16 matmuls' x (or through such
 * a view); the norms before the projections, attention's output and the
 * SwiGLU product are among them, the logits and the residual stream are not; none
 * with ZINC_X16=0. Then every kernel of the model against the interpreter, which
 * rounds those values where they are written (on llvmpipe the scalar GEMMs
 * read them; the device calls run the tensor-core GEMMs). */
typedef struct kept {
    int n, glu, attn; /* values kept in fp16; of them, gate+up products and attention outputs */
} kept;
static kept kept_f16(const mspec *m) {
    gguf_file *f = open_model(m);
    zir_graph *g = compile(f, ztarget_find("h200"), ZPH_PREFILL);
    kept k = {0};
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *p = g->nodes[i];
        if (!p->out || !p->out->store_f16) continue;
        bool kernel = p->op == ZOP_KERNEL, attn = kernel && p->kp.tmpl == ZKT_ATTENTION;
        bool view = (zir_ops[p->op].flags & ZF_VIEW) != 0;
        k.n++;
        k.glu += kernel && p->kp.tmpl == ZKT_GATE_UP_SWIGLU;
        k.attn += attn;
        cr_expect(p->op == ZOP_RMS_NORM || attn || view || (mm_f16(p) && (p->op == ZOP_MATMUL || kernel)),
                  "'%s' kept in fp16", p->out->name);
        cr_expect(p->out != g->logits, "the logits kept in fp16");
        for (uint32_t j = 0; j < g->n_nodes; j++) {
            const zir_node *c = g->nodes[j];
            for (int b = 0; b < (c->op == ZOP_KERNEL ? c->n_body : 1); b++) {
                const zir_node *u = c->op == ZOP_KERNEL ? c->body[b] : c;
                for (int x = 0; x < u->n_in; x++)
                    if (u->in[x] == p->out) /* a view of it is kept in fp16 too, and checked as its own */
                        cr_expect((u->op == ZOP_MATMUL && x == 0 && u->attr.mm_f16) ||
                                      ((zir_ops[u->op].flags & ZF_VIEW) && u->out->store_f16),
                                  "'%s' read by '%s' (%s, input %d)", p->out->name, c->out->name,
                                  zir_ops[u->op].name, x);
            }
        }
    }
    zir_graph_free(g);
    gguf_close(f);
    return k;
}

Test(kernels_matmul, fp16_x_kept_only_for_fp16_matmuls, .timeout = 120) {
    setenv("ZINC_X16", "0", 1);
    cr_expect_eq(kept_f16(&MODELS[M_Q4_K_M]).n, 0, "values kept in fp16 with ZINC_X16=0");
    unsetenv("ZINC_X16");
    kept k = kept_f16(&MODELS[M_Q4_K_M]);
    cr_expect_geq(k.n, 4, "%d values kept in fp16: expected the norms, attention's and the SwiGLU product", k.n);
    cr_expect_gt(k.glu, 0, "no gate+up product kept in fp16");
    cr_expect_gt(k.attn, 0, "no attention output kept in fp16");
}

/* and with fp32 x (the h200 graph before run 72, ZINC_X16=0) */
Test(kernels_matmul, q4_k_m_fp32_x, .timeout = 300) {
    setenv("ZINC_X16", "0", 1);
    check_model(&MODELS[M_Q4_K_M], false, TOL_F32);
    unsetenv("ZINC_X16");
}
