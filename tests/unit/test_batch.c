/* The batch decode schedule (zincc --parallel N) on the Vulkan device
 * (llvmpipe in CI), through real plans: each row of a batch step is a token
 * of its own sequence, at its own position, in its own KV slot.
 *   - Every row's logits against the reference interpreter run on that
 *     sequence alone (the same tolerance as the e2e tests).
 *   - A sequence gives bit-identical logits, hence the same greedy tokens,
 *     in a batch of one as among others at other positions, in any row,
 *     as the batch grows and shrinks; the matmuls are multi-row GEMVs.
 *   - The batch schedule runs its own graph (zpass_opts.batch_rows): q and
 *     k (and v) as one rows GEMV, the norms in the GEMVs' prologues, and
 *     int8 x where the decision says so (forced here: llvmpipe's
 *     products are not fast, so its default keeps fp32 x); every batch
 *     kernel is what its node of that graph decided.
 *   - The errors: no batch schedule, too many rows, a sequence twice, too
 *     many sequences for the plan's slots. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/lower.h"
#include "backend/plan.h"
#include "frontend/arch.h"
#include "frontend/mkmodel.h"
#include "ir/interp.h"
#include "passes/match.h"
#include "runtime/zrt.h"
#include "testutil.h"

enum { CTX = 32, CHUNK = 4, GEN = 6, NSEQ = 3 };

typedef struct model {
    gguf_file *f;
    zir_graph *ref;
    int V;
} model;

static void make_model(zmk_arch arch, zmk_quant q, const char *name, model *m) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = arch, o.quant = q, o.layers = 2, o.hidden = 256, o.ff = 512, o.heads = 4, o.kv_heads = 2;
    o.head_dim = 64, o.vocab = 320, o.seed = 7;
    zdiag d = {0};
    const char *path = tu_tmp(name);
    cr_assert_eq(zmk_write(&o, path, NULL, &d), ZOK, "%s", d.msg);
    cr_assert_eq(gguf_open(path, &m->f, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zir_build_from_gguf(m->f, &m->ref, &d), ZOK, "%s", d.msg);
    m->V = (int)m->ref->hp.n_vocab;
}

static void drop(model *m) {
    zir_graph_free(m->ref);
    gguf_close(m->f);
}

static const char *batch_disabled; /* passes the batch graph runs without (a test's), or NULL */

/* Both phases with the default pipeline for llvmpipe (int8 x as idot
 * says), parallel slots and, with them, the batch schedule's own graph
 * (*batch if not NULL, else freed). */
static zplan *compile(model *m, int64_t parallel, zpass_idot idot, zir_graph **batch) {
    zdiag d = {0};
    const ztarget *t = ztarget_find("llvmpipe");
    zir_graph *g[ZPLAN_SCHEDS] = {0};
    for (int ph = 0; ph <= ZPLAN_BATCH; ph++) {
        if (ph == ZPLAN_BATCH && !parallel) continue;
        cr_assert_eq(zir_build_from_gguf(m->f, &g[ph], &d), ZOK, "%s", d.msg);
        zpass_opts po = {.target = t,
                         .phase = ph == ZPLAN_DECODE ? ZPH_DECODE : ZPH_PREFILL,
                         .token_tile = t->prefill_tile,
                         .ctx = CTX,
                         .fuse_threshold = t->fuse_threshold,
                         .gemv_idot = idot,
                         .batch_rows = ph == ZPLAN_BATCH ? parallel : 0};
        cr_assert_eq(zpass_run_pipeline(g[ph], NULL, ph == ZPLAN_BATCH ? batch_disabled : NULL, &po, &d), ZOK, "%s",
                     d.msg);
    }
    zlower_opts lo = {.target = t,
                      .batch = g[ZPLAN_BATCH],
                      .max_tokens = CHUNK,
                      .ctx = CTX,
                      .parallel = parallel,
                      .gguf_path = m->f->path,
                      .gguf_base = m->f->base,
                      .gguf_size = m->f->size,
                      .gguf_hash = gguf_identity_hash(m->f)};
    zplan *p = NULL;
    cr_assert_eq(zlower(g, &lo, &p, &d), ZOK, "%s", d.msg);
    for (int ph = 0; ph < ZPLAN_PHASES; ph++)
        zir_graph_free(g[ph]);
    if (batch)
        *batch = g[ZPLAN_BATCH];
    else
        zir_graph_free(g[ZPLAN_BATCH]);
    return p;
}

/* The batch schedule's matmuls are multi-row GEMVs (zcost_batch_gemv: a
 * step of NSEQ rows), not GEMMs: what the bit-identity below covers. Each
 * dispatch's kernel is what its node of the batch graph decided: a rows
 * GEMV for fuse-qkv's kernels, int8 x (_idot) exactly for the matmuls
 * marked gemv_q8 (as many as want says: 0 none, else some), each after its
 * quantizing pass, no norm left as a kernel of its own before a matmul;
 * last, the top-k of every row (plans 1.4 on). */
static int uses_gemvn(const zplan *p, const zir_graph *bg, bool want_q8) {
    const zplan_schedule *s = &p->sched[ZPLAN_BATCH];
    int n = 0, rows = 0, q8 = 0, shared = 0;
    for (uint32_t i = s->first; i < s->first + s->count; i++) {
        const char *k = zplan_str(p, p->kernels[p->dispatches[i].kernel].name);
        const zir_value *v = zir_find(bg, zplan_str(p, p->dispatches[i].node));
        cr_assert_not_null(v, "batch dispatch %u (%s): no node '%s' in the batch graph", i, k,
                           zplan_str(p, p->dispatches[i].node));
        const zir_node *nd = v->producer;
        if (!strncmp(k, "topk", 4)) {
            cr_expect(i + 1 == s->first + s->count && strstr(k, "_rows"),
                      "batch dispatch %u runs %s: expected the top-k of every row, last", i, k);
            continue;
        }
        if (!strncmp(k, "gemvn_xq8_", 10)) { /* the quantizing pass, just before its int8-x GEMV */
            bool next =
                i + 1 < s->first + s->count &&
                !strcmp(zplan_str(p, p->dispatches[i + 1].node), zplan_str(p, p->dispatches[i].node)) &&
                strstr(zplan_str(p, p->kernels[p->dispatches[i + 1].kernel].name), "_idot");
            cr_expect(zpass_gemv_q8(nd) && next, "batch dispatch %u: %s for node '%s', not before its int8-x GEMV",
                      i, k, v->name);
            continue;
        }
        cr_expect(strncmp(k, "gemm", 4), "batch dispatch %u runs %s, a GEMM", i, k);
        cr_expect(strncmp(k, "rms_norm", 8), "batch dispatch %u runs %s: a norm of its own", i, k);
        n += !strncmp(k, "gemvn_", 6);
        bool is_rows = nd->op == ZOP_KERNEL && nd->kp.tmpl == ZKT_MATMUL_ROWS;
        cr_expect_eq(is_rows, !strncmp(k, "gemvn_rows_", 11), "batch dispatch %u: node '%s' runs %s", i,
                     v->name, k);
        rows += is_rows;
        cr_expect_eq(zpass_gemv_q8(nd), strstr(k, "_idot") != NULL, "batch dispatch %u: node '%s' (%s x) runs %s", i,
                     v->name, zpass_gemv_q8(nd) ? "int8" : "fp32", k);
        q8 += zpass_gemv_q8(nd);
        /* an int8-x GEMV that reads an earlier GEMV's quantized x (the lowering's
         * one pass for GEMVs of the same x, norm and weight groups) */
        shared += strstr(k, "_idot") && strncmp(zplan_str(p, p->kernels[p->dispatches[i - 1].kernel].name),
                                                "gemvn_xq8_", 10);
    }
    cr_assert_gt(n, 0, "the batch schedule runs no multi-row GEMV");
    if (!batch_disabled) cr_expect_gt(rows, 0, "the batch schedule runs no rows GEMV (fuse-qkv)");
    cr_expect_eq(q8 > 0, want_q8, "%d batch kernels with int8 x", q8);
    return shared;
}

static int32_t argmax(const float *row, int V) {
    int32_t best = 0;
    for (int i = 1; i < V; i++)
        if (row[i] > row[best]) best = i;
    return best;
}

/* One sequence of the test: its prompt, then GEN greedy tokens; tok holds
 * everything fed, logits[k] the logits of decode step k. */
typedef struct seq {
    zrt_seq *q;
    int32_t tok[CTX];
    int n_prompt, n_fed;
    float *logits; /* [GEN][V] */
    int steps;
} seq;

/* The prompt is read by the prefill schedule, or (by_batch) a token at a
 * time by the batch schedule alone, so that every position of the cache
 * comes from the batch graph (the int8-x reference runs that graph). */
static void start(zrt *rt, seq *s, uint64_t seed, int n_prompt, int V, bool by_batch) {
    tu_rng r = tu_rng_seed(seed);
    s->n_prompt = n_prompt;
    for (int i = 0; i < n_prompt; i++)
        s->tok[i] = (int32_t)(tu_next(&r) % (uint64_t)V);
    s->n_fed = n_prompt, s->steps = 0;
    zdiag d = {0};
    float *last = malloc(sizeof(float) * (size_t)V);
    zrt_seq_use(rt, s->q);
    zrt_reset(rt);
    zrt_seq_use(rt, NULL);
    for (int i = 0; by_batch && i < n_prompt; i++)
        cr_assert_eq(zrt_run_batch(rt, &s->q, &s->tok[i], 1, last, &d), ZOK, "%s", d.msg);
    zrt_seq_use(rt, s->q);
    if (!by_batch) cr_assert_eq(zrt_eval(rt, s->tok, n_prompt, NULL, &d), ZOK, "%s", d.msg);
    if (!by_batch) cr_assert_eq(zrt_last_logits(rt, last, &d), ZOK, "%s", d.msg);
    s->tok[s->n_fed] = argmax(last, V); /* the next token to feed */
    free(last);
    zrt_seq_use(rt, NULL);
}

/* One batch step over rows[0..n): each feeds its next token and takes the
 * greedy one after it. Each row's top-k, which the step selects on the GPU,
 * must be that of its row of logits (tu_top_matches). */
static void step(zrt *rt, seq **rows, int n, int V) {
    zrt_seq *qs[NSEQ];
    int32_t tok[NSEQ];
    float *lg = malloc(sizeof(float) * (size_t)n * (size_t)V);
    for (int i = 0; i < n; i++)
        qs[i] = rows[i]->q, tok[i] = rows[i]->tok[rows[i]->n_fed];
    zdiag d = {0};
    cr_assert_eq(zrt_run_batch(rt, qs, tok, n, lg, &d), ZOK, "%s", d.msg);
    for (int i = 0; i < n; i++) {
        zrt_sample_cand top[ZPLAN_TOPK_CAP];
        size_t nt = 0;
        char why[256];
        zrt_seq_use(rt, qs[i]);
        cr_assert_eq(zrt_top(rt, top, &nt, &d), ZOK, "batch row %d of %d: %s", i, n, d.msg);
        cr_assert(tu_top_matches(top, nt, lg + (size_t)i * V, V, ZPLAN_TOPK_K, why, sizeof why),
                  "batch row %d of %d: top-k: %s", i, n, why);
    }
    zrt_seq_use(rt, NULL);
    for (int i = 0; i < n; i++) {
        seq *s = rows[i];
        memcpy(s->logits + (size_t)s->steps * V, lg + (size_t)i * V, sizeof(float) * (size_t)V);
        s->steps++, s->n_fed++;
        s->tok[s->n_fed] = argmax(lg + (size_t)i * V, V);
    }
    free(lg);
}

/* Every decode step's logits of s against the interpreter's, run on the
 * sequence's tokens alone over ref: fp32 on both sides, 1e-3 of the RMS
 * (as e2e); with int8 x, over the batch graph (which rounds x as the
 * kernels do) at e2e's 6e-2: a last-bit difference upstream can flip one
 * element's rounding (test_kernels_e2e), a wrong kernel is O(1). */
static void check_reference(model *m, const zir_graph *ref, double tol, const seq *s, const char *what) {
    int V = m->V, n = s->n_fed;
    float *want = malloc(sizeof(float) * (size_t)n * (size_t)V);
    zdiag d = {0};
    zir_interp *it;
    cr_assert_eq(zir_interp_new(ref, CTX, &it, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zir_interp_step(it, s->tok, n, want, &d), ZOK, "%s", d.msg);
    zir_interp_free(it);
    double worst = 0;
    for (int k = 0; k < s->steps; k++) {
        const float *w = want + (size_t)(s->n_prompt + k) * V, *g = s->logits + (size_t)k * V;
        double rms = 0;
        for (int i = 0; i < V; i++)
            rms += (double)w[i] * w[i];
        rms = sqrt(rms / V) + 1e-30;
        for (int i = 0; i < V; i++) {
            double e = fabs((double)g[i] - w[i]) / rms;
            worst = e > worst ? e : worst;
            cr_assert(e <= tol, "%s: step %d (position %d) logit %d: batch %.6g, interpreter %.6g", what, k,
                      s->n_prompt + k, i, g[i], w[i]);
        }
    }
    cr_log_info("%s: %d steps, worst logit %.3g of the RMS against the interpreter", what, s->steps, worst);
    free(want);
}

static void run_identity(zmk_arch arch, zmk_quant q, const char *name, zpass_idot idot) {
    model m = {0};
    make_model(arch, q, name, &m);
    int V = m.V;
    zrt *rt;
    zrt_opts ro = {0};
    zdiag d = {0};
    zir_graph *bg = NULL;
    zplan *p = compile(&m, NSEQ, idot, &bg);
    bool q8 = idot == ZIDOT_ON;
    int shared = uses_gemvn(p, bg, q8);
    if (batch_disabled) /* q, k and v their own GEMVs of one x: k and v (where their types are q's) read q's */
        cr_expect_gt(shared, 0, "no int8-x GEMV without fuse-qkv shares a quantizing pass");
    cr_assert_eq(zrt_open_plan(p, &ro, &rt, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zrt_batch_rows(rt), NSEQ);
    seq a = {0}, b = {0}, c = {0}, alone = {0};
    cr_assert_eq(zrt_seq_new(rt, &b.q, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zrt_seq_new(rt, &c.q, &d), ZOK, "%s", d.msg);
    a.logits = malloc(sizeof(float) * GEN * (size_t)V);
    b.logits = malloc(sizeof(float) * GEN * (size_t)V);
    c.logits = malloc(sizeof(float) * GEN * (size_t)V);
    alone.logits = malloc(sizeof(float) * GEN * (size_t)V);

    /* A alone: the zrt's own sequence, batches of one row. */
    start(rt, &alone, 1, 5, V, q8);
    for (int k = 0; k < GEN; k++)
        step(rt, (seq *[]){&alone}, 1, V);

    /* A again among B and C, which sit at other positions and rows; the
     * batch grows from two rows to three, and shrinks when C stops. */
    start(rt, &b, 2, 9, V, q8);
    start(rt, &c, 3, 2, V, q8);
    start(rt, &a, 1, 5, V, q8);
    step(rt, (seq *[]){&b, &a}, 2, V);
    for (int k = 1; k < GEN - 2; k++)
        step(rt, (seq *[]){&c, &b, &a}, 3, V);
    step(rt, (seq *[]){&a, &b}, 2, V);
    step(rt, (seq *[]){&b, &a}, 2, V);
    /* C sat the last steps out: the top-k buffer holds no row of C's now. */
    zrt_sample_cand top[ZPLAN_TOPK_CAP];
    size_t nt = 0;
    zrt_seq_use(rt, c.q);
    cr_assert_eq(zrt_top(rt, top, &nt, &d), ZE_UNSUPPORTED, "a sequence's stale top-k was read as current");
    zrt_seq_use(rt, NULL);

    cr_assert_eq(a.steps, GEN);
    cr_assert(!memcmp(a.tok, alone.tok, sizeof(int32_t) * (size_t)(a.n_fed + 1)),
              "greedy tokens differ between A alone and A batched");
    for (int k = 0; k < GEN; k++)
        for (int i = 0; i < V; i++)
            cr_assert(!memcmp(&a.logits[(size_t)k * V + i], &alone.logits[(size_t)k * V + i], sizeof(float)),
                      "step %d logit %d: batched %.9g, alone %.9g (expected the same bits)", k, i,
                      a.logits[(size_t)k * V + i], alone.logits[(size_t)k * V + i]);
    const zir_graph *ref = q8 ? bg : m.ref;
    double tol = q8 ? 6e-2 : 1e-3;
    check_reference(&m, ref, tol, &a, "A");
    check_reference(&m, ref, tol, &b, "B");
    check_reference(&m, ref, tol, &c, "C");
    zir_graph_free(bg);

    zrt_seq_free(rt, b.q);
    zrt_seq_free(rt, c.q);
    zrt_close(rt);
    free(a.logits), free(b.logits), free(c.logits), free(alone.logits);
    drop(&m);
}

Test(batch, qwen3_q4_k_m_alone_equals_batched) {
    run_identity(ZMK_QWEN3, ZMK_Q4_K_M, "batch-qwen3.gguf", ZIDOT_TARGET);
}
Test(batch, llama_q8_0_alone_equals_batched) {
    run_identity(ZMK_LLAMA, ZMK_Q8_0, "batch-llama.gguf", ZIDOT_TARGET);
}
/* q4_K and q6_K matmuls with int8 x (the h200's default, forced here). */
Test(batch, qwen3_q4_k_m_int8_x_alone_equals_batched) {
    run_identity(ZMK_QWEN3, ZMK_Q4_K_M, "batch-qwen3-q8.gguf", ZIDOT_ON);
}

/* Without fuse-qkv, q, k and v are GEMVs of one x each: the lowering
 * dispatches x's quantizing pass once for those of one weight type. */
Test(batch, qwen3_q4_k_m_int8_x_one_x_pass_for_q_k_v) {
    batch_disabled = "fuse-qkv";
    run_identity(ZMK_QWEN3, ZMK_Q4_K_M, "batch-qwen3-q8-qkv.gguf", ZIDOT_ON);
    batch_disabled = NULL;
}

/* A mixture of experts: the expert GEMVs read each row's own experts, and
 * each row's route is ranked inside the gate+up GEMV (fuse-topk) from its
 * own router logits. */
Test(batch, qwen3moe_q4_k_m_alone_equals_batched) {
    run_identity(ZMK_QWEN3MOE, ZMK_Q4_K_M, "batch-moe.gguf", ZIDOT_TARGET);
}

/* Each refusal is one line that says what to do. */
Test(batch, errors) {
    model m = {0};
    make_model(ZMK_QWEN3, ZMK_Q4_K_M, "batch-err.gguf", &m);
    zrt *rt;
    zrt_opts ro = {0};
    zdiag d = {0};
    int32_t tok[3] = {1, 2, 3};

    cr_assert_eq(zrt_open_plan(compile(&m, 0, ZIDOT_TARGET, NULL), &ro, &rt, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zrt_batch_rows(rt), 0);
    cr_assert_eq(zrt_run_batch(rt, (zrt_seq *[]){NULL}, tok, 1, NULL, &d), ZE_UNSUPPORTED);
    cr_assert(strstr(d.msg, "recompile it with zincc --parallel N"), "%s", d.msg);
    zrt_close(rt);

    cr_assert_eq(zrt_open_plan(compile(&m, 2, ZIDOT_TARGET, NULL), &ro, &rt, &d), ZOK, "%s", d.msg);
    zrt_seq *q, *extra;
    cr_assert_eq(zrt_seq_new(rt, &q, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zrt_seq_new(rt, &extra, &d), ZE_INVALID);
    cr_assert(strstr(d.msg, "all 2 sequence slots of the plan are in use"), "%s", d.msg);
    cr_assert_eq(zrt_run_batch(rt, (zrt_seq *[]){NULL, q, NULL}, tok, 3, NULL, &d), ZE_INVALID);
    cr_assert(strstr(d.msg, "batch step of 3 rows: expected 1..2"), "%s", d.msg);
    cr_assert_eq(zrt_run_batch(rt, (zrt_seq *[]){q, q}, tok, 2, NULL, &d), ZE_INVALID);
    cr_assert(strstr(d.msg, "expected distinct sequences"), "%s", d.msg);
    tok[1] = 100000;
    cr_assert_eq(zrt_run_batch(rt, (zrt_seq *[]){NULL, q}, tok, 2, NULL, &d), ZE_INVALID);
    cr_assert(strstr(d.msg, "token 100000 at batch row 1"), "%s", d.msg);
    cr_assert_eq(zrt_run(rt, ZPLAN_BATCH, tok, 1, NULL, &d), ZE_INVALID);
    /* A freed slot is taken again, zeroed. */
    zrt_seq_free(rt, q);
    cr_assert_eq(zrt_seq_new(rt, &q, &d), ZOK, "%s", d.msg);
    zrt_seq_free(rt, q);
    zrt_close(rt);
    drop(&m);
}
