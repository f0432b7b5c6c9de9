/* The batch decode schedule (zincc --parallel N) on the Vulkan device
 * (llvmpipe in CI), through real plans: each row of a batch step is a token
 * of its own sequence, at its own position, in its own KV slot.
 *   - Every row's logits against the reference interpreter run on that
 *     sequence alone (the same tolerance as the e2e tests).
 *   - A sequence gives bit-identical logits, hence the same greedy tokens,
 *     in a batch of one as among others at other positions, in any row,
 *     as the batch grows and shrinks; the matmuls are multi-row GEMVs.
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

/* Both phases with the default pipeline for llvmpipe, and parallel slots. */
static zplan *compile(model *m, int64_t parallel) {
    zdiag d = {0};
    const ztarget *t = ztarget_find("llvmpipe");
    zir_graph *g[ZPLAN_PHASES];
    for (int ph = 0; ph < ZPLAN_PHASES; ph++) {
        cr_assert_eq(zir_build_from_gguf(m->f, &g[ph], &d), ZOK, "%s", d.msg);
        zpass_opts po = {.target = t,
                         .phase = ph == ZPLAN_DECODE ? ZPH_DECODE : ZPH_PREFILL,
                         .token_tile = t->prefill_tile,
                         .ctx = CTX,
                         .fuse_threshold = t->fuse_threshold};
        cr_assert_eq(zpass_run_pipeline(g[ph], NULL, NULL, &po, &d), ZOK, "%s", d.msg);
    }
    zlower_opts lo = {.target = t,
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
    return p;
}

/* The batch schedule's matmuls are multi-row GEMVs (zcost_batch_gemv: a
 * step of NSEQ rows), not GEMMs: what the bit-identity below covers. */
static void uses_gemvn(const zplan *p) {
    const zplan_schedule *s = &p->sched[ZPLAN_BATCH];
    int n = 0;
    for (uint32_t i = s->first; i < s->first + s->count; i++) {
        const char *k = zplan_str(p, p->kernels[p->dispatches[i].kernel].name);
        cr_expect(strncmp(k, "gemm", 4), "batch dispatch %u runs %s, a GEMM", i, k);
        n += !strncmp(k, "gemvn_", 6);
    }
    cr_assert_gt(n, 0, "the batch schedule runs no multi-row GEMV");
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

static void start(zrt *rt, seq *s, uint64_t seed, int n_prompt, int V) {
    tu_rng r = tu_rng_seed(seed);
    s->n_prompt = n_prompt;
    for (int i = 0; i < n_prompt; i++)
        s->tok[i] = (int32_t)(tu_next(&r) % (uint64_t)V);
    s->n_fed = n_prompt, s->steps = 0;
    zdiag d = {0};
    float *last = malloc(sizeof(float) * (size_t)V);
    zrt_seq_use(rt, s->q);
    zrt_reset(rt);
    cr_assert_eq(zrt_eval(rt, s->tok, n_prompt, NULL, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zrt_last_logits(rt, last, &d), ZOK, "%s", d.msg);
    s->tok[s->n_fed] = argmax(last, V); /* the next token to feed */
    free(last);
    zrt_seq_use(rt, NULL);
}

/* One batch step over rows[0..n): each feeds its next token and takes the
 * greedy one after it. */
static void step(zrt *rt, seq **rows, int n, int V) {
    zrt_seq *qs[NSEQ];
    int32_t tok[NSEQ];
    float *lg = malloc(sizeof(float) * (size_t)n * (size_t)V);
    for (int i = 0; i < n; i++)
        qs[i] = rows[i]->q, tok[i] = rows[i]->tok[rows[i]->n_fed];
    zdiag d = {0};
    cr_assert_eq(zrt_run_batch(rt, qs, tok, n, lg, &d), ZOK, "%s", d.msg);
    for (int i = 0; i < n; i++) {
        seq *s = rows[i];
        memcpy(s->logits + (size_t)s->steps * V, lg + (size_t)i * V, sizeof(float) * (size_t)V);
        s->steps++, s->n_fed++;
        s->tok[s->n_fed] = argmax(lg + (size_t)i * V, V);
    }
    free(lg);
}

/* Every decode step's logits of s against the interpreter's, run on the
 * sequence's tokens alone: fp32 on both sides, 1e-3 of the RMS (as e2e). */
static void check_reference(model *m, const seq *s, const char *what) {
    int V = m->V, n = s->n_fed;
    float *want = malloc(sizeof(float) * (size_t)n * (size_t)V);
    zdiag d = {0};
    zir_interp *it;
    cr_assert_eq(zir_interp_new(m->ref, CTX, &it, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zir_interp_step(it, s->tok, n, want, &d), ZOK, "%s", d.msg);
    zir_interp_free(it);
    for (int k = 0; k < s->steps; k++) {
        const float *w = want + (size_t)(s->n_prompt + k) * V, *g = s->logits + (size_t)k * V;
        double rms = 0;
        for (int i = 0; i < V; i++)
            rms += (double)w[i] * w[i];
        rms = sqrt(rms / V) + 1e-30;
        for (int i = 0; i < V; i++)
            cr_assert(fabs((double)g[i] - w[i]) / rms <= 1e-3,
                      "%s: step %d (position %d) logit %d: batch %.6g, interpreter %.6g", what, k,
                      s->n_prompt + k, i, g[i], w[i]);
    }
    free(want);
}

static void run_identity(zmk_arch arch, zmk_quant q, const char *name) {
    model m = {0};
    make_model(arch, q, name, &m);
    int V = m.V;
    zrt *rt;
    zrt_opts ro = {0};
    zdiag d = {0};
    zplan *p = compile(&m, NSEQ);
    uses_gemvn(p);
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
    start(rt, &alone, 1, 5, V);
    for (int k = 0; k < GEN; k++)
        step(rt, (seq *[]){&alone}, 1, V);

    /* A again among B and C, which sit at other positions and rows; the
     * batch grows from two rows to three, and shrinks when C stops. */
    start(rt, &b, 2, 9, V);
    start(rt, &c, 3, 2, V);
    start(rt, &a, 1, 5, V);
    step(rt, (seq *[]){&b, &a}, 2, V);
    for (int k = 1; k < GEN - 2; k++)
        step(rt, (seq *[]){&c, &b, &a}, 3, V);
    step(rt, (seq *[]){&a, &b}, 2, V);
    step(rt, (seq *[]){&b, &a}, 2, V);

    cr_assert_eq(a.steps, GEN);
    cr_assert(!memcmp(a.tok, alone.tok, sizeof(int32_t) * (size_t)(a.n_fed + 1)),
              "greedy tokens differ between A alone and A batched");
    for (int k = 0; k < GEN; k++)
        for (int i = 0; i < V; i++)
            cr_assert(!memcmp(&a.logits[(size_t)k * V + i], &alone.logits[(size_t)k * V + i], sizeof(float)),
                      "step %d logit %d: batched %.9g, alone %.9g (expected the same bits)", k, i,
                      a.logits[(size_t)k * V + i], alone.logits[(size_t)k * V + i]);
    check_reference(&m, &a, "A");
    check_reference(&m, &b, "B");
    check_reference(&m, &c, "C");

    zrt_seq_free(rt, b.q);
    zrt_seq_free(rt, c.q);
    zrt_close(rt);
    free(a.logits), free(b.logits), free(c.logits), free(alone.logits);
    drop(&m);
}

Test(batch, qwen3_q4_k_m_alone_equals_batched) {
    run_identity(ZMK_QWEN3, ZMK_Q4_K_M, "batch-qwen3.gguf");
}
Test(batch, llama_q8_0_alone_equals_batched) {
    run_identity(ZMK_LLAMA, ZMK_Q8_0, "batch-llama.gguf");
}

/* Each refusal is one line that says what to do. */
Test(batch, errors) {
    model m = {0};
    make_model(ZMK_QWEN3, ZMK_Q4_K_M, "batch-err.gguf", &m);
    zrt *rt;
    zrt_opts ro = {0};
    zdiag d = {0};
    int32_t tok[3] = {1, 2, 3};

    cr_assert_eq(zrt_open_plan(compile(&m, 0), &ro, &rt, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zrt_batch_rows(rt), 0);
    cr_assert_eq(zrt_run_batch(rt, (zrt_seq *[]){NULL}, tok, 1, NULL, &d), ZE_UNSUPPORTED);
    cr_assert(strstr(d.msg, "recompile it with zincc --parallel N"), "%s", d.msg);
    zrt_close(rt);

    cr_assert_eq(zrt_open_plan(compile(&m, 2), &ro, &rt, &d), ZOK, "%s", d.msg);
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
