/* zincc --tune's pieces on a real Vulkan device (llvmpipe in CI): every
 * candidate GEMV layout the tuner may pick computes what the interpreter
 * computes, element for element; the tuner times each distinct decode GEMV
 * and picks one of the candidates per kernel key; and lowering with its
 * table compiles the chosen layouts. The timings themselves are not checked:
 * speed is measured in benchmarks (docs/performance.md), not tests. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "backend/tune.h"
#include "frontend/arch.h"
#include "frontend/gguf.h"
#include "frontend/mkmodel.h"
#include "kernel_harness.h"
#include "passes/pass.h"
#include "testutil.h"

enum { VOCAB = 600 };

/* Hidden 512, 6 heads of 48: q (288 rows), k and v (96) and the logits
 * (600) are not multiples of any layout's rows per workgroup. */
static gguf_file *model(zmk_quant q, const char *name) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = ZMK_QWEN3;
    o.quant = q;
    o.layers = 1;
    o.hidden = 512;
    o.ff = 1536;
    o.vocab = VOCAB;
    o.heads = 6;
    o.kv_heads = 2;
    o.head_dim = 48;
    o.seed = 5;
    zdiag d = {0};
    cr_assert_eq(zmk_write(&o, tu_tmp(name), NULL, &d), ZOK, "%s", d.msg);
    gguf_file *f = NULL;
    cr_assert_eq(gguf_open(tu_tmp(name), &f, &d), ZOK, "%s", d.msg);
    return f;
}

static zir_graph *decode_graph(const gguf_file *f, const ztarget *t) {
    zir_graph *g = NULL;
    zdiag d = {0};
    cr_assert_eq(zir_build_from_gguf(f, &g, &d), ZOK, "%s", d.msg);
    zpass_opts po = {
        .target = t, .phase = ZPH_DECODE, .token_tile = 1, .ctx = 64, .fuse_threshold = t->fuse_threshold};
    cr_assert_eq(zpass_run_pipeline(g, zpass_default_pipeline(), NULL, &po, &d), ZOK, "%s", d.msg);
    return g;
}

static bool is_gemv(const zir_graph *g, const zir_node *n, const zcg_opts *o) {
    zarena *a = zarena_new();
    zcg_kernel k;
    zdiag d = {0};
    bool yes = zcg_node(g, n, o, a, &k, &d) == ZOK && k.key[0];
    zarena_free(a);
    return yes;
}

/* The GEMVs that cover the template's paths: gate+up (two weights, SwiGLU,
 * the norm prologue), the attention output (the residual epilogue) and the
 * logits (q6_K in q4_K_M, 600 rows: a tail in every layout). */
static bool wanted(const zir_node *n) {
    const char *o = n->out->name;
    return !strcmp(o, "l0.act") || !strcmp(o, "l0.resid_attn") || !strcmp(o, "logits");
}

/* Those GEMVs of the model in the given layouts, at a decode step past pos 0. */
static void check_layouts(zmk_quant q, const char *name, const zcg_gemv *cand, int n_cand) {
    static kh_ctx k;
    char err[256];
    cr_assert(kh_open(&k, err, sizeof err), "no Vulkan device: %s", err);
    gguf_file *f = model(q, name);
    ztarget t = *ztarget_find("h200");
    if (t.smem_bytes > k.dev.prof.max_shared_memory) t.smem_bytes = k.dev.prof.max_shared_memory;
    zir_graph *g = decode_graph(f, &t);
    zir_interp *it;
    zdiag d = {0};
    cr_assert_eq(zir_interp_new(g, 64, &it, &d), ZOK, "%s", d.msg);
    int checked = 0;
    int32_t tok[2] = {7, 123};
    cr_assert_eq(zir_interp_step(it, &tok[0], 1, NULL, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zir_interp_step(it, &tok[1], 1, NULL, &d), ZOK, "%s", d.msg);
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zcg_opts o = {&t, ZPH_DECODE, 1, false, NULL, NULL};
        if (!is_gemv(g, g->nodes[i], &o) || !wanted(g->nodes[i])) continue;
        for (int c = 0; c < n_cand; c++) {
            o.force_gemv = &cand[c];
            kh_result r;
            zstatus s = kh_check_node(&k, g, g->nodes[i], &o, it, (zir_step){1, 1, 64}, &r, &d);
            cr_assert_eq(s, ZOK, "%s '%s' layout %d/%d/%d: %s", name, g->nodes[i]->out->name, cand[c].rs,
                         cand[c].unroll, cand[c].nsg, d.msg);
            cr_expect(r.max_err < 1e-4, "%s %s: error %.3g of the output RMS", name, r.kernel, r.max_err);
            checked++;
        }
    }
    cr_expect_eq(checked, 3 * n_cand, "%s: %d checks", name, checked);
    zir_interp_free(it);
    zir_graph_free(g);
    gguf_close(f);
    kh_close(&k);
}

/* q4_K and q6_K (their own group layouts) in every candidate the tuner may
 * pick; q8_0 (the generic 8-element groups) in the extreme ones. */
Test(tune, every_layout_matches_the_interpreter_q4_k_m, .timeout = 600) {
    int n;
    const zcg_gemv *cand = zvk_tune_candidates(&n);
    check_layouts(ZMK_Q4_K_M, "tq4.gguf", cand, n);
}
Test(tune, extreme_layouts_match_the_interpreter_q8_0, .timeout = 600) {
    static const zcg_gemv cand[] = {{8, 1, 4, 0}, {1, 2, 1, 0}, {4, 2, 8, 1}};
    check_layouts(ZMK_Q8_0, "tq8.gguf", cand, 3);
}

typedef struct seen_rows {
    int rows, best;
    char last_key[96];
} seen_rows;

static void on_row(void *ctx, const zvk_tune_row *r) {
    seen_rows *s = ctx;
    cr_expect(r->us > 0, "%s: %g us", r->name, r->us);
    if (r->best) {
        s->best++;
        return;
    }
    s->rows++;
    snprintf(s->last_key, sizeof s->last_key, "%s", r->key);
}

/* The tuner on the device: one winner per distinct GEMV, from the
 * candidates it was given (each timed over copies of its weights after a
 * warm-up), and lowering compiles the winners. */
Test(tune, picks_a_candidate_per_kernel, .timeout = 300) {
    static kh_ctx k;
    char err[256];
    cr_assert(kh_open(&k, err, sizeof err), "no Vulkan device: %s", err);
    gguf_file *f = model(ZMK_Q4_K_M, "tp.gguf");
    const ztarget *t = ztarget_find("llvmpipe");
    zir_graph *g = decode_graph(f, t);
    static const zcg_gemv cand[] = {{1, 1, 4, 0}, {2, 1, 1, 0}};
    seen_rows seen = {0};
    zvk_tune_opts o = {.target = t,
                       .ctx = 64,
                       .candidates = cand,
                       .n_candidates = 2,
                       .reps = 3,
                       .ring_bytes = 1u << 20, /* copies of the weights: the step-like runs */
                       .warm_s = 0.05,
                       .report = on_row,
                       .report_ctx = &seen};
    zarena *a = zarena_new();
    zcg_tuning tun;
    zdiag d = {0};
    cr_assert_eq(zvk_tune_gemv(&k.dev, g, &o, a, &tun, &d), ZOK, "%s", d.msg);
    /* q and k (one rows kernel: fuse-qkv), v (q6_K: a GEMV of its own),
     * o, the logits (the MLP is one split kernel, not a GEMV): 4 keys */
    cr_expect_eq(tun.n, 4, "%d kernel keys tuned", tun.n);
    /* codegen's own layout (4 rows here: llvmpipe has 2 compute units) and both candidates */
    cr_expect_eq(seen.rows, 3 * tun.n, "%d rows", seen.rows);
    cr_expect_eq(seen.best, tun.n);
    static const zcg_gemv keep = {0};
    for (int i = 0; i < tun.n; i++) {
        bool one_of = !memcmp(&tun.gemv[i], &cand[0], sizeof cand[0]) ||
                      !memcmp(&tun.gemv[i], &cand[1], sizeof cand[1]) ||
                      !memcmp(&tun.gemv[i], &keep, sizeof keep);
        cr_expect(one_of, "%s: layout %d/%d/%d", tun.key[i], tun.gemv[i].rs, tun.gemv[i].unroll,
                  tun.gemv[i].nsg);
    }
    /* Codegen with the table: each GEMV gets its key's layout. */
    zcg_opts co = {t, ZPH_DECODE, 1, false, &tun, NULL};
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zcg_kernel kn;
        cr_assert_eq(zcg_node(g, g->nodes[i], &co, a, &kn, &d), ZOK, "%s", d.msg);
        if (!kn.key[0]) continue;
        for (int j = 0; j < tun.n; j++) {
            if (strcmp(tun.key[j], kn.key)) continue;
            char want[32];
            int rs = tun.gemv[j].rs ? tun.gemv[j].rs : 4, nsg = tun.gemv[j].nsg ? tun.gemv[j].nsg : 4;
            snprintf(want, sizeof want, nsg == 4 ? "_r%d" : "_r%du1g%d", rs, nsg);
            cr_expect(strstr(kn.name, want), "%s: expected layout %s", kn.name, want);
        }
    }
    zarena_free(a);
    zir_graph_free(g);
    gguf_close(f);
    kh_close(&k);
}

/* zincc on tz.gguf with args (an -o FILE named under the test's tmp): its
 * exit status, and what its output must say (each of want, up to a NULL)
 * and must not. */
static void zincc_says(const char *args, int rc_want, const char *const *want, const char *not_want) {
    char a[256];
    const char *o = strstr(args, "-o ");
    snprintf(a, sizeof a, "%.*s-o '%s'", o ? (int)(o - args) : (int)strlen(args), args, o ? tu_tmp(o + 3) : "");
    char *log = NULL;
    int rc = tu_run(&log, "%s/zincc '%s' %s 2>&1", ZINC_BINARY_DIR, tu_tmp("tz.gguf"), a);
    cr_expect_eq(rc, rc_want, "zincc %s: %s", args, log ? log : "");
    for (int i = 0; want[i]; i++)
        cr_expect(log && strstr(log, want[i]), "zincc %s: no '%s' in: %s", args, want[i], log ? log : "");
    cr_expect(!(log && not_want && strstr(log, not_want)), "zincc %s: %s", args, log ? log : "");
    free(log);
}

/* zincc --tune: the table on stderr, a plan with the winners; refused where
 * there is no device to time on. */
Test(tune, zincc_tune_writes_a_tuned_plan, .timeout = 300) {
    gguf_file *f = model(ZMK_Q4_K_M, "tz.gguf");
    gguf_close(f);
    /* llvmpipe has no matrix units: no prefill GEMM of the plan is on them */
    zincc_says("--tune -o tz.zplan", 0,
               (const char *[]){"tuning the decode GEMVs and the prefill GEMMs on", "(default)", "-> gemv_",
                                "0 prefill GEMMs on the matrix units tuned", NULL},
               NULL);
    char *log = NULL;
    int rc = tu_run(&log, "%s/zinc info '%s' 2>&1", ZINC_BINARY_DIR, tu_tmp("tz.zplan"));
    cr_expect_eq(rc, 0, "%s", log ? log : "");
    free(log);
    /* one phase: the decode GEMVs alone say nothing of the prefill GEMMs */
    zincc_says("--tune=decode -o tz1.zplan", 0, (const char *[]){"tuning the decode GEMVs on", NULL}, "prefill GEMM");
    zincc_says("--tune=everything -o tz3.zplan", 64, (const char *[]){"--tune= expects prefill or decode", NULL}, NULL);
    zincc_says("--tune --target h200 -o tz2.zplan", 64, (const char *[]){"--tune times kernels on the device", NULL},
               NULL);
}
