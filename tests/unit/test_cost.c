/* The cost model against arithmetic done by hand (docs/cost-model.md works
 * the same numbers): the six crossings of a staged MLP, the two of
 * gate+up+SwiGLU, when the whole MLP fits on chip and when it does not, and
 * attention. The fusion passes run on hand-built graphs of real model shapes
 * (Qwen3-8B, Qwen3.5-9B), whose weights are never read, so their decision
 * records can be checked at sizes a generated model could not afford. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/cost.h"
#include "testutil.h"

static zpass_opts opts(const ztarget *t, zpass_phase ph) {
    return (zpass_opts){
        .target = t, .phase = ph, .token_tile = 0, .ctx = 4096, .fuse_threshold = t->fuse_threshold};
}

static const ztarget *target(const char *name) {
    const ztarget *t = ztarget_find(name);
    cr_assert_not_null(t, "no profile %s", name);
    return t;
}

/* Bytes of a Q4_K matrix: 144 bytes per 256 weights (0.5625 B/weight). */
static double q4k(int64_t rows, int64_t cols) {
    return (double)(rows * cols / 256 * 144);
}

static zcost_mlp mlp_shape(int64_t hidden, int64_t ff) {
    return (zcost_mlp){hidden, ff, q4k(ff, hidden), q4k(ff, hidden), q4k(hidden, ff)};
}

#define EXPECT_BYTES(got, want, what)                                                                        \
    cr_expect(fabs((got) - (want)) < 0.5, "%s: %.1f B, expected %.1f B", what, (double)(got), (double)(want))

static void expect_sum(const zcost_option *x) {
    EXPECT_BYTES(x->total, x->act + x->weight + x->partial + x->dispatch, "total = sum of the terms");
}

/* ---- the MLP ------------------------------------------------------------- */

/* Qwen3.5-9B's MLP in fp16: staged, the 11008-wide intermediate crosses VRAM
 * 6 times (gate and up write, SwiGLU reads both and writes, down reads):
 * 6 x 11008 x 2 = 132096 B = 129 KiB per token per layer. gate+up+SwiGLU
 * leaves one write and one read: 44032 B. Both per token, in either phase. */
Test(mlp, staged_and_gate_up_crossings) {
    zcost_mlp m = mlp_shape(4096, 11008);
    for (int ph = 0; ph < ZPH_COUNT; ph++) {
        zpass_opts o = opts(target("h200"), (zpass_phase)ph);
        zcost_option opt[ZCOST_MLP_OPTIONS];
        zcost_price_mlp(&o, &m, opt);
        cr_expect_eq(opt[0].tmpl, ZKT_NONE);
        cr_expect_eq(opt[0].dispatches, 4);
        cr_expect_eq(opt[0].crossings, 6.0);
        EXPECT_BYTES(opt[0].act, 132096, "staged");
        EXPECT_BYTES(opt[0].act / 1024, 129, "staged KiB");
        cr_expect_eq(opt[1].tmpl, ZKT_GATE_UP_SWIGLU);
        cr_expect_eq(opt[1].dispatches, 2);
        cr_expect_eq(opt[1].crossings, 2.0);
        EXPECT_BYTES(opt[1].act, 44032, "gate+up+SwiGLU");
        cr_expect_eq(opt[2].crossings, 0.0, "the full MLP keeps the intermediate on chip");
        cr_expect_eq(opt[2].act, 0.0);
        for (int i = 0; i < ZCOST_MLP_OPTIONS; i++)
            if (opt[i].feasible) expect_sum(&opt[i]);
    }
    /* llvmpipe keeps activations in fp32: twice the bytes, same crossings */
    zpass_opts o = opts(target("llvmpipe"), ZPH_DECODE);
    zcost_option opt[ZCOST_MLP_OPTIONS];
    zcost_price_mlp(&o, &m, opt);
    EXPECT_BYTES(opt[0].act, 6 * 11008 * 4, "staged fp32");
    EXPECT_BYTES(opt[1].act, 2 * 11008 * 4, "gate+up+SwiGLU fp32");
}

/* The weight and dispatch terms on h200: prefill tiles of 64 tokens share a
 * weight read; a dispatch + barrier (3 us at 4 TB/s = 12 MB) is spread over a
 * 512-token prefill step, or borne by the one decode token. */
Test(mlp, weight_and_dispatch_terms) {
    zcost_mlp m = mlp_shape(4096, 11008);
    double wb = 3 * q4k(11008, 4096);
    EXPECT_BYTES(wb, 76087296, "Q4_K weights");
    zpass_opts o = opts(target("h200"), ZPH_PREFILL);
    zcost_option opt[ZCOST_MLP_OPTIONS];
    zcost_price_mlp(&o, &m, opt);
    cr_expect_eq(opt[0].token_tile, 64);
    EXPECT_BYTES(opt[0].weight, wb / 64, "staged weights per token");
    EXPECT_BYTES(opt[0].dispatch, 4 * 12e6 / 512, "4 dispatches per prefill token");
    EXPECT_BYTES(opt[1].dispatch, 2 * 12e6 / 512, "2 dispatches per prefill token");
    o.token_tile = 32; /* --tile overrides the profile */
    zcost_price_mlp(&o, &m, opt);
    EXPECT_BYTES(opt[0].weight, wb / 32, "staged weights at tile 32");
    o = opts(target("h200"), ZPH_DECODE);
    zcost_price_mlp(&o, &m, opt);
    cr_expect_eq(opt[0].token_tile, 1);
    /* decode reads every weight per token, at the GEMV's measured fraction of the bandwidth */
    EXPECT_BYTES(opt[0].weight, wb / o.target->gemv_eff, "decode reads every weight per token");
    EXPECT_BYTES(opt[0].dispatch, 48e6, "4 decode dispatches");
}

/* Prefill on h200, hidden 4096: a token's fp32 accumulator row plus a 64-wide
 * intermediate block is 4 x (4096 + 64) = 16640 B, so 48 KiB holds 2 tokens
 * where the tile wants 64 (1040 KiB). Re-reading the weights 32x as often
 * costs far more than the 2 crossings saved: refused, gate+up+SwiGLU taken. */
Test(mlp, full_refused_for_shared_memory_h200_prefill) {
    zcost_mlp m = mlp_shape(4096, 11008);
    zpass_opts o = opts(target("h200"), ZPH_PREFILL);
    zcost_option opt[ZCOST_MLP_OPTIONS];
    zcost_price_mlp(&o, &m, opt);
    cr_expect_eq(opt[2].token_tile, 2);
    cr_expect(opt[2].feasible);
    EXPECT_BYTES(opt[2].weight, 76087296 / 2.0, "weights re-read per 2 tokens");
    cr_expect(strstr(opt[2].note, "1040 KiB > 48 KiB shared memory"), "%s", opt[2].note);
    cr_expect(strstr(opt[2].note, "tile cut to 2, weights re-read 32x"), "%s", opt[2].note);
    char why[256];
    cr_expect_eq(zcost_choose(&o, opt, ZCOST_MLP_OPTIONS, why, sizeof why), 1, "%s", why);
    cr_expect(strstr(why, "gate_up_swiglu: 1414710 -> 1279771 B/token (saves 134939"), "%s", why);
}

/* Past hidden 12224 not even one token fits in 48 KiB: infeasible in prefill;
 * in decode the hidden-wide fp32 partial alone (64 KiB) does not fit. */
Test(mlp, full_infeasible_when_one_token_does_not_fit) {
    zcost_mlp m = mlp_shape(16384, 4096);
    zcost_option opt[ZCOST_MLP_OPTIONS];
    zpass_opts o = opts(target("h200"), ZPH_PREFILL);
    zcost_price_mlp(&o, &m, opt);
    cr_expect_not(opt[2].feasible);
    cr_expect(isinf(opt[2].total));
    cr_expect(
        strstr(opt[2].note, "1-token fp32 accumulator of hidden 16384 needs 64.2 KiB > 48 KiB shared memory"),
        "%s", opt[2].note);
    o = opts(target("h200"), ZPH_DECODE);
    zcost_price_mlp(&o, &m, opt);
    cr_expect_not(opt[2].feasible);
    cr_expect(strstr(opt[2].note, "partial (64.0 KiB) exceeds 48 KiB shared memory"), "%s", opt[2].note);
    char why[256];
    cr_expect_neq(zcost_choose(&o, opt, ZCOST_MLP_OPTIONS, why, sizeof why), 2, "an infeasible option taken");
}

/* Accepted: a small hidden size (256: 38 tokens fit in 48 KiB), or a
 * generous profile whose shared memory holds the whole 64-token tile. */
Test(mlp, full_accepted_small_hidden_or_generous_profile) {
    zcost_option opt[ZCOST_MLP_OPTIONS];
    char why[256];
    zcost_mlp small = mlp_shape(256, 768);
    zpass_opts o = opts(target("h200"), ZPH_PREFILL);
    zcost_price_mlp(&o, &small, opt);
    cr_expect_eq(opt[2].token_tile, 38, "floor(49152 / (4 x 320))");
    cr_expect_eq(zcost_choose(&o, opt, ZCOST_MLP_OPTIONS, why, sizeof why), 2, "%s", why);
    cr_expect(strstr(why, "mlp: ") == why, "%s", why);

    ztarget big = *target("h200");
    big.name = "h200-1040k";
    big.smem_bytes = 1040 * 1024; /* exactly 64 x 16640 */
    zcost_mlp m = mlp_shape(4096, 11008);
    o = opts(&big, ZPH_PREFILL);
    zcost_price_mlp(&o, &m, opt);
    cr_expect_eq(opt[2].token_tile, 64);
    cr_expect_str_eq(opt[2].note, "", "no tile cut to explain");
    EXPECT_BYTES(opt[2].total, 76087296 / 64.0 + 12e6 / 512, "full MLP");
    cr_expect_eq(zcost_choose(&o, opt, ZCOST_MLP_OPTIONS, why, sizeof why), 2, "%s", why);
}

/* A saving under the threshold is not worth a new kernel. */
Test(mlp, threshold) {
    zcost_mlp m = mlp_shape(4096, 11008);
    zpass_opts o = opts(target("h200"), ZPH_PREFILL);
    o.fuse_threshold = 134940; /* gate+up+SwiGLU saves 134939 B */
    zcost_option opt[ZCOST_MLP_OPTIONS];
    char why[256];
    zcost_price_mlp(&o, &m, opt);
    cr_expect_eq(zcost_choose(&o, opt, ZCOST_MLP_OPTIONS, why, sizeof why), 0, "%s", why);
    cr_expect_str_eq(why, "best option (gate_up_swiglu) saves 134939 B/token < threshold 134940 B");
    o.fuse_threshold = 134939;
    cr_expect_eq(zcost_choose(&o, opt, ZCOST_MLP_OPTIONS, why, sizeof why), 1, "%s", why);
}

/* ---- the worked example of docs/cost-model.md: Qwen3-8B ----------------- */

typedef struct worked {
    const char *target;
    zpass_phase ph;
    double staged, gate_up, full;
    int pick, full_tile, full_split;
} worked;

/* Hidden 4096, intermediate 12288, Q4_K (84934656 B of MLP weights). */
static const worked qwen3_8b[] = {
    {"h200", ZPH_PREFILL, 1568310, 1423131, 42490765.5, 1, 2, 1},
    {"h200", ZPH_DECODE, 228859490.0, 204761186.0, 547166976, 1, 1, 132},
    {"rdna4", ZPH_PREFILL, 1499560, 1388756, 28317802, 1, 3, 1},
    {"rdna4", ZPH_DECODE, 97882112, 91383808, 90231808, 2, 1, 64},
};

Test(mlp, qwen3_8b_worked_example) {
    zcost_mlp m = mlp_shape(4096, 12288);
    for (size_t i = 0; i < sizeof qwen3_8b / sizeof qwen3_8b[0]; i++) {
        const worked *w = &qwen3_8b[i];
        zpass_opts o = opts(target(w->target), w->ph);
        zcost_option opt[ZCOST_MLP_OPTIONS];
        char why[256], what[64];
        zcost_price_mlp(&o, &m, opt);
        snprintf(what, sizeof what, "%s %s", w->target, zpass_phase_name(w->ph));
        EXPECT_BYTES(opt[0].total, w->staged, what);
        EXPECT_BYTES(opt[1].total, w->gate_up, what);
        EXPECT_BYTES(opt[2].total, w->full, what);
        cr_expect_eq(opt[2].token_tile, w->full_tile, "%s", what);
        cr_expect_eq(opt[2].split, w->full_split, "%s", what);
        cr_expect_eq(zcost_choose(&o, opt, ZCOST_MLP_OPTIONS, why, sizeof why), w->pick, "%s: %s", what, why);
    }
}

/* ---- mixture of experts ---------------------------------------------------- */

/* Qwen3-30B-A3B's experts in Q4_K: hidden 2048, 128 experts of width 768, 8
 * used. A stack is 128 x 884736 B = 113246208 B, the three 339738624 B.
 * As GEMVs a token reads 8/128 of them: 21233664 B. In a 512-token prefill
 * step the 4096 pairs touch all 128 experts (1 - (120/128)^512 of them),
 * 32 pairs each: one tile of 64 (the H200's) per expert, so the stacks are
 * read once a step, 339738624 / 512 = 663552 B a token, 32x less. Decode's
 * one token touches 8 experts once: the GEMVs' bytes, in more dispatches. */
static zcost_moe moe_30b(void) {
    double stack = 128 * q4k(768, 2048);
    return (zcost_moe){.hidden = 2048,
                       .ff = 768,
                       .experts = 128,
                       .used = 8,
                       .w_gate = stack,
                       .w_up = stack,
                       .w_down = stack};
}

Test(moe, grouped_gemms_in_prefill_gemvs_in_decode) {
    zcost_moe m = moe_30b();
    EXPECT_BYTES(zcost_moe_weight(&m), 21233664, "GEMV bytes a token");
    EXPECT_BYTES(zcost_moe_grouped_weight(&m, 512, 64), 663552, "grouped bytes a token, 512-token step");
    EXPECT_BYTES(zcost_moe_grouped_weight(&m, 1, 1), 21233664, "grouped bytes of one token");
    /* 16-pair tiles: two per expert, the stacks read twice a step. */
    EXPECT_BYTES(zcost_moe_grouped_weight(&m, 512, 16), 2 * 663552, "grouped bytes, 16-pair tiles");
    char why[256];
    zcost_option opt[ZCOST_MOE_OPTIONS];
    zpass_opts o = opts(target("h200"), ZPH_PREFILL);
    zcost_price_moe(&o, &m, opt);
    cr_expect(opt[2].feasible);
    cr_expect_eq(opt[2].token_tile, 64);
    cr_expect_eq(opt[2].dispatches, 4);
    EXPECT_BYTES(opt[2].weight, 663552, "grouped option's weight term");
    EXPECT_BYTES(opt[1].weight, 21233664, "GEMV option's weight term");
    expect_sum(&opt[2]);
    cr_expect_eq(zcost_choose(&o, opt, ZCOST_MOE_OPTIONS, why, sizeof why), 2, "prefill: %s", why);
    o = opts(target("h200"), ZPH_DECODE);
    zcost_price_moe(&o, &m, opt);
    cr_expect_eq(zcost_choose(&o, opt, ZCOST_MOE_OPTIONS, why, sizeof why), 1, "decode: %s", why);
    cr_expect(strstr(opt[2].note, "one token") != NULL, "%s", opt[2].note);
}

Test(moe, knob_keeps_the_gemvs) {
    setenv("ZINC_MOE_GROUPED", "0", 1);
    zcost_moe m = moe_30b();
    zcost_option opt[ZCOST_MOE_OPTIONS];
    zpass_opts o = opts(target("h200"), ZPH_PREFILL);
    zcost_price_moe(&o, &m, opt);
    char why[256];
    cr_expect(!opt[2].feasible);
    cr_expect(strstr(opt[2].note, "ZINC_MOE_GROUPED=0") != NULL, "%s", opt[2].note);
    cr_expect_eq(zcost_choose(&o, opt, ZCOST_MOE_OPTIONS, why, sizeof why), 1, "%s", why);
    unsetenv("ZINC_MOE_GROUPED");
}

/* ---- attention ----------------------------------------------------------- */

/* Qwen3-8B attention (32 heads, 8 KV heads of 128) at a 4096 context: the
 * fp32 score matrix is 32 x 4096 x 4 = 512 KiB per token, and staged it
 * crosses 4 times (scores written, read by softmax, probabilities written,
 * read by the mix). K and V are 2 x 4096 x 8 x 128 x 2 B = 16 MiB in fp16. */
static const zcost_attn QWEN3_8B_ATTN = {32, 8, 128, 4096};

Test(attention, staged_crossings_and_kv) {
    zpass_opts o = opts(target("h200"), ZPH_PREFILL);
    zcost_option opt[ZCOST_ATTN_OPTIONS];
    zcost_price_attn(&o, &QWEN3_8B_ATTN, opt);
    cr_expect_eq(opt[0].crossings, 4.0);
    cr_expect_eq(opt[0].dispatches, 3);
    EXPECT_BYTES(opt[0].act, 4 * 524288, "staged scores");
    EXPECT_BYTES(opt[0].weight, 16777216 / 64.0, "K/V per 64-token tile");
    cr_expect(opt[1].feasible, "%s", opt[1].note);
    cr_expect_eq(opt[1].crossings, 0.0);
    cr_expect_eq(opt[1].act, 0.0, "the scores never leave the chip");
    cr_expect_eq(opt[1].token_tile, 16, "query tile");
    EXPECT_BYTES(opt[1].weight, 16777216 / 16.0, "K/V re-read per 16 queries");
    expect_sum(&opt[0]);
    expect_sum(&opt[1]);
    cr_expect_lt(opt[1].total, opt[0].total);
    /* the scores grow with the context, K/V with it */
    zcost_attn longer = QWEN3_8B_ATTN;
    longer.ctx = 8192;
    zcost_option opt2[ZCOST_ATTN_OPTIONS];
    zcost_price_attn(&o, &longer, opt2);
    EXPECT_BYTES(opt2[0].act, 2 * opt[0].act, "scores at twice the context");
    EXPECT_BYTES(opt2[1].weight, 2 * opt[1].weight, "K/V at twice the context");
}

/* Decode: the query heads of a kv head share a workgroup, and 8 of them
 * cannot fill 132 SMs, so the context is split into ceil(132 / 8) = 17
 * ranges whose online-softmax partials (head_dim values + max + sum, fp32,
 * for each of the 32 heads) are written and read once. */
Test(attention, decode_split_fills_the_device) {
    zcost_option opt[ZCOST_ATTN_OPTIONS];
    zpass_opts o = opts(target("h200"), ZPH_DECODE);
    zcost_price_attn(&o, &QWEN3_8B_ATTN, opt);
    cr_expect_eq(opt[1].split, 17);
    EXPECT_BYTES(opt[1].partial, 2.0 * 17 * 32 * 130 * 4, "partials");
    EXPECT_BYTES(opt[1].total, 16777216 + 565760 + 12e6, "fused decode");
    EXPECT_BYTES(opt[0].total, 4 * 524288 + 16777216 + 36e6, "staged decode");
    o = opts(target("rdna4"), ZPH_DECODE);
    zcost_price_attn(&o, &QWEN3_8B_ATTN, opt);
    cr_expect_eq(opt[1].split, 8, "ceil(64 / 8)");
    zcost_attn shortctx = QWEN3_8B_ATTN;
    shortctx.ctx = 64; /* only 2 blocks of 32 positions to split */
    o = opts(target("h200"), ZPH_DECODE);
    zcost_price_attn(&o, &shortctx, opt);
    cr_expect_eq(opt[1].split, 2);
    char why[256];
    cr_expect_eq(zcost_choose(&o, opt, ZCOST_ATTN_OPTIONS, why, sizeof why), 1, "%s", why);
}

/* A head of 512 on llvmpipe: a 16-query tile and a 32-position K/V block in
 * fp32 need 162 KiB, five times its 32 KiB: staged attention stays. */
Test(attention, refused_when_blocks_do_not_fit) {
    zcost_attn wide = {8, 8, 512, 4096};
    zpass_opts o = opts(target("llvmpipe"), ZPH_PREFILL);
    zcost_option opt[ZCOST_ATTN_OPTIONS];
    zcost_price_attn(&o, &wide, opt);
    cr_expect_not(opt[1].feasible);
    cr_expect(strstr(opt[1].note, "q tile and K/V block need 162.0 KiB > 32 KiB shared memory"), "%s",
              opt[1].note);
    char why[256];
    cr_expect_eq(zcost_choose(&o, opt, ZCOST_ATTN_OPTIONS, why, sizeof why), 0);
    cr_expect(strstr(why, "no fused option is cheaper than staged"), "%s", why);
}

/* ---- the passes' decision records on hand-built graphs ------------------ */

static const uint8_t never_read[1];

static zir_value *weight(zir_graph *g, const char *name, int64_t rows, int64_t cols) {
    zdiag d = {0};
    zdim s[2] = {rows, cols};
    zir_value *w = zir_value_new(g, name, ZR_WEIGHT, ZT_Q4_K, 2, s, &d);
    cr_assert_not_null(w, "%s", d.msg);
    w->data = never_read; /* the passes price weights by size; nothing reads them */
    w->nbytes = (uint64_t)q4k(rows, cols);
    return w;
}

static zir_value *node(zir_graph *g, zir_op op, const char *name, zir_value *a, zir_value *b, zir_group grp) {
    zdiag d = {0};
    zir_value *in[2] = {a, b};
    zir_attrs at = {.scale = 0.088f};
    zir_node *n = zir_node_add(g, op, name, in, zir_ops[op].arity, &at, 0, grp, &d);
    cr_assert_not_null(n, "%s", d.msg);
    return n->out;
}

/* One layer's MLP: x -> gate, up -> swiglu -> down. */
static zir_graph *mlp_graph(int64_t hidden, int64_t ff) {
    zir_graph *g = zir_graph_new();
    g->hp = (zir_hparams){.arch = "synthetic", .n_layer = 1, .n_embd = (int)hidden, .n_ff = (int)ff};
    zdiag d = {0};
    zdim xs[2] = {ZDIM_T, hidden};
    zir_value *x = zir_value_new(g, "x", ZR_INPUT, ZT_F32, 2, xs, &d);
    zir_value *gate = node(g, ZOP_MATMUL, "l0.gate", x, weight(g, "wg", ff, hidden), ZG_MLP);
    zir_value *up = node(g, ZOP_MATMUL, "l0.up", x, weight(g, "wu", ff, hidden), ZG_MLP);
    zir_value *act = node(g, ZOP_SWIGLU, "l0.act", gate, up, ZG_MLP);
    g->tokens = x;
    g->logits = node(g, ZOP_MATMUL, "l0.down", act, weight(g, "wd", hidden, ff), ZG_MLP);
    cr_assert_eq(zir_verify(g, &d), ZOK, "%s", d.msg);
    return g;
}

static zpass_decision run_pass(zir_graph *g, const zpass_info *p, const zpass_opts *o0) {
    zpass_report rep = {.arena = zarena_new()};
    zpass_opts o = *o0;
    o.report = &rep;
    o.verify_each = true;
    zdiag d = {0};
    cr_assert_eq(zpass_run_one(g, zpass_find("width"), &o, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zpass_run_one(g, p, &o, &d), ZOK, "%s", d.msg);
    cr_assert_eq(rep.n, 1, "%d decisions", rep.n);
    zpass_decision x = rep.items[0];
    zarena_free(rep.arena); /* x.what points into the graph, not the report */
    return x;
}

static const zir_node *top_producer(const zir_graph *g, const char *name) {
    const zir_value *v = zir_find(g, name);
    cr_assert(v && v->producer);
    return v->producer;
}

/* fuse-mlp on Qwen3.5-9B's MLP: the decision carries the 6 -> 2 crossings,
 * 132096 -> 44032 B, and why the whole MLP was not taken. */
Test(passes, fuse_mlp_records_the_arithmetic) {
    zir_graph *g = mlp_graph(4096, 11008);
    zpass_opts o = opts(target("h200"), ZPH_PREFILL);
    zpass_decision x = run_pass(g, zpass_find("fuse-mlp"), &o);
    cr_expect(x.fused);
    cr_expect_eq(x.chosen, ZKT_GATE_UP_SWIGLU);
    cr_expect_str_eq(x.what, "l0.act");
    cr_expect_eq(x.group, ZG_MLP);
    EXPECT_BYTES(x.width * 4096, 11008, "width of the intermediate");
    cr_expect_eq(x.crossings_before, 6.0);
    cr_expect_eq(x.crossings_after, 2.0);
    EXPECT_BYTES(x.bytes_before, 132096, "before");
    EXPECT_BYTES(x.bytes_after, 44032, "after");
    cr_expect(strstr(x.reason, "gate_up_swiglu: 1414710 -> 1279771 B/token"), "%s", x.reason);
    cr_expect(strstr(x.reason, "full MLP: 38067086 B/token"), "%s", x.reason);
    cr_expect(strstr(x.reason, "48 KiB shared memory: tile cut to 2"), "%s", x.reason);
    const zir_node *k = top_producer(g, "l0.act");
    cr_expect_eq(k->op, ZOP_KERNEL);
    cr_expect_eq(k->kp.tmpl, ZKT_GATE_UP_SWIGLU);
    cr_expect_eq(top_producer(g, "l0.down")->op, ZOP_MATMUL, "down stays a kernel of its own");
    zir_graph_free(g);
}

Test(passes, fuse_mlp_refusal_names_shared_memory) {
    zir_graph *g = mlp_graph(16384, 4096);
    zpass_opts o = opts(target("h200"), ZPH_DECODE);
    zpass_decision x = run_pass(g, zpass_find("fuse-mlp"), &o);
    cr_expect_eq(x.chosen, ZKT_GATE_UP_SWIGLU);
    cr_expect(strstr(x.reason,
                     "full MLP refused: a hidden-wide fp32 partial (64.0 KiB) exceeds 48 KiB shared memory"),
              "%s", x.reason);
    zir_graph_free(g);
}

/* The 8B MLP in decode on h200: two GEMVs (gate+up+SwiGLU, then down)
 * stream the weights at 2.9x the split MLP's measured rate, which is worth
 * more than the dispatch and the 2 crossings of act they cost. */
Test(passes, fuse_mlp_streams_the_8b_decode_as_gemvs) {
    zir_graph *g = mlp_graph(4096, 12288);
    zpass_opts o = opts(target("h200"), ZPH_DECODE);
    zpass_decision x = run_pass(g, zpass_find("fuse-mlp"), &o);
    cr_expect_eq(x.chosen, ZKT_GATE_UP_SWIGLU);
    cr_expect_eq(x.crossings_after, 2.0);
    cr_expect(strstr(x.reason, "gate_up_swiglu: 228859490 -> 204761186 B/token"), "%s", x.reason);
    cr_expect(strstr(x.reason, "full MLP: 547166976 B/token"), "%s", x.reason);
    cr_expect(strstr(x.reason, "weights streamed at 16% of bandwidth (GEMV 47%)"), "%s", x.reason);
    cr_expect_eq(top_producer(g, "l0.down")->op, ZOP_MATMUL, "down stays a kernel of its own");
    zir_graph_free(g);
}

/* A tiny MLP (hidden 128, ff 8448: 132 slices of 64, every SM busy, 1.8 MB
 * of weights) is where one dispatch instead of two still wins in decode. */
Test(passes, fuse_mlp_takes_the_whole_small_mlp_in_decode) {
    zir_graph *g = mlp_graph(128, 8448);
    zpass_opts o = opts(target("h200"), ZPH_DECODE);
    zpass_decision x = run_pass(g, zpass_find("fuse-mlp"), &o);
    cr_expect_eq(x.chosen, ZKT_MLP, "%s", x.reason);
    cr_expect_eq(x.crossings_after, 0.0);
    cr_expect(strstr(x.reason, "partial sums 135168)"), "2 x 132 hidden-wide fp32 partials: %s", x.reason);
    cr_expect(strstr(x.reason, "split over 132 workgroups"), "%s", x.reason);
    const zir_node *k = top_producer(g, "l0.down");
    cr_expect_eq(k->kp.tmpl, ZKT_MLP);
    cr_expect_eq(k->kp.split, 132);
    cr_expect_eq(k->n_body, 4);
    zir_graph_free(g);
}

static zir_graph *attn_graph(const zcost_attn *a) {
    zir_graph *g = zir_graph_new();
    g->hp = (zir_hparams){.arch = "synthetic",
                          .n_layer = 1,
                          .n_embd = (int)(a->heads * a->head_dim),
                          .n_head = (int)a->heads,
                          .n_head_kv = (int)a->kv_heads,
                          .head_dim = (int)a->head_dim};
    zdiag d = {0};
    zdim qs[3] = {ZDIM_T, a->heads, a->head_dim}, ks[3] = {ZDIM_P, a->kv_heads, a->head_dim};
    zir_value *q = zir_value_new(g, "q", ZR_INPUT, ZT_F32, 3, qs, &d);
    zir_value *k = zir_value_new(g, "k_all", ZR_INPUT, ZT_F32, 3, ks, &d);
    zir_value *v = zir_value_new(g, "v_all", ZR_INPUT, ZT_F32, 3, ks, &d);
    zir_value *s = node(g, ZOP_ATTN_SCORES, "l0.scores", q, k, ZG_ATTN);
    zir_value *p = node(g, ZOP_SOFTMAX_CAUSAL, "l0.probs", s, NULL, ZG_ATTN);
    g->tokens = q;
    g->logits = node(g, ZOP_ATTN_MIX, "l0.attn", p, v, ZG_ATTN);
    cr_assert_eq(zir_verify(g, &d), ZOK, "%s", d.msg);
    return g;
}

Test(passes, fuse_attn_records_the_scores) {
    zir_graph *g = attn_graph(&QWEN3_8B_ATTN);
    zpass_opts o = opts(target("rdna4"), ZPH_DECODE);
    zpass_decision x = run_pass(g, zpass_find("fuse-attn"), &o);
    cr_expect(x.fused);
    cr_expect_eq(x.chosen, ZKT_ATTENTION);
    cr_expect_str_eq(x.what, "l0.scores");
    EXPECT_BYTES(x.width, 32.0 * 4096 / 4096, "scores are 32 x ctx wide over a 4096 hidden");
    EXPECT_BYTES(x.bytes_before, 4 * 524288, "staged scores");
    cr_expect_eq(x.bytes_after, 0.0);
    EXPECT_BYTES(x.extra_bytes, 2.0 * 8 * 32 * 130 * 4, "partials of an 8-way split (64 CUs / 8 kv heads)");
    cr_expect(strstr(x.reason, "attention: 28474368 -> 20243456 B/token"), "%s", x.reason);
    cr_expect(strstr(x.reason, "scores 32x4096 fp32 per token at ctx 4096"), "%s", x.reason);
    const zir_node *k = top_producer(g, "l0.attn");
    cr_expect_eq(k->kp.tmpl, ZKT_ATTENTION);
    cr_expect_eq(k->kp.split, 8);
    zir_graph_free(g);
}

Test(passes, fuse_attn_refusal_keeps_the_graph) {
    zcost_attn wide = {8, 8, 512, 4096};
    zir_graph *g = attn_graph(&wide);
    zpass_opts o = opts(target("llvmpipe"), ZPH_PREFILL);
    zpass_decision x = run_pass(g, zpass_find("fuse-attn"), &o);
    cr_expect_not(x.fused);
    cr_expect_eq(x.chosen, ZKT_NONE);
    cr_expect(strstr(x.reason, "no fused option") && strstr(x.reason, "shared memory"), "%s", x.reason);
    for (uint32_t i = 0; i < g->n_nodes; i++)
        cr_expect_neq(g->nodes[i]->op, ZOP_KERNEL, "a refused fusion made a kernel");
    zir_graph_free(g);
}

/* Qwen3-8B's attention projections: an RMSNorm feeding q (4096 rows), k and
 * v (1024 each), each read through a reshape to heads of 128; v's type is
 * vt (Q4_K_M's use_more_bits layers make it Q6_K). */
static zir_graph *qkv_graph(ztype vt) {
    zir_graph *g = zir_graph_new();
    g->hp = (zir_hparams){.arch = "synthetic", .n_layer = 1, .n_embd = 4096, .n_ff = 12288};
    zdiag d = {0};
    zdim xs[2] = {ZDIM_T, 4096}, ns[1] = {4096};
    zir_value *x = zir_value_new(g, "x", ZR_INPUT, ZT_F32, 2, xs, &d);
    zir_value *nw = zir_value_new(g, "attn_norm", ZR_WEIGHT, ZT_F32, 1, ns, &d);
    nw->data = never_read;
    nw->nbytes = 4 * 4096;
    zir_value *h = node(g, ZOP_RMS_NORM, "l0.attn_in", x, nw, ZG_ATTN);
    static const char *const names[3] = {"l0.q", "l0.k", "l0.v"};
    zir_value *heads = NULL;
    for (int i = 0; i < 3; i++) {
        zir_value *w = weight(g, names[i] + 3, i ? 1024 : 4096, 4096);
        if (i == 2 && vt == ZT_Q6_K) w->dtype = vt, w->nbytes = 1024 * 4096 / 256 * 210;
        zir_value *y = node(g, ZOP_MATMUL, names[i], h, w, ZG_ATTN);
        zir_attrs at = {.reshape = {3, {ZDIM_T, i ? 8 : 32, 128}}};
        char hn[16];
        snprintf(hn, sizeof hn, "%s_heads", names[i]);
        zir_node *r = zir_node_add(g, ZOP_RESHAPE, hn, &y, 1, &at, 0, ZG_ATTN, &d);
        cr_assert_not_null(r, "%s", d.msg);
        heads = r->out;
    }
    g->tokens = x;
    g->logits = heads;
    cr_assert_eq(zir_verify(g, &d), ZOK, "%s", d.msg);
    return g;
}

/* fuse-qkv in decode on h200: three GEMVs, each reading the 8 KiB fp16 x
 * and the 16 KiB norm weight, become one: two concurrent dispatches (no
 * barrier between the three: 0.64 MB each at 0.16 us x 4 TB/s, run 52),
 * two x reads and two norm-weight reads (at the GEMV's streaming rate)
 * saved; the weights are the same bytes. */
Test(passes, fuse_qkv_records_the_arithmetic) {
    zir_graph *g = qkv_graph(ZT_Q4_K);
    zpass_opts o = opts(target("h200"), ZPH_DECODE);
    zpass_decision x = run_pass(g, zpass_find("fuse-qkv"), &o);
    cr_expect(x.fused);
    cr_expect_eq(x.chosen, ZKT_MATMUL_ROWS);
    cr_expect_str_eq(x.what, "l0.attn_in");
    cr_expect_eq(x.crossings_before, 3.0);
    cr_expect_eq(x.crossings_after, 1.0);
    EXPECT_BYTES(x.bytes_before, 3 * 8192, "x read by each GEMV");
    EXPECT_BYTES(x.bytes_after, 8192, "x read once");
    const ztarget *t = target("h200");
    cr_assert_eq(t->concurrent_dispatch_us, 0.16);
    double saved = 2 * 0.64e6 + 2 * 8192 + 2 * 16384 / t->gemv_eff;
    char want[64];
    snprintf(want, sizeof want, "(saves %.0f >= threshold", saved);
    cr_expect(strstr(x.reason, "3 of its 3 matmuls as one GEMV over their rows: matmul_rows: "), "%s",
              x.reason);
    cr_expect(strstr(x.reason, want), "%s: %s", want, x.reason);
    const zir_node *k = top_producer(g, "l0.v");
    cr_expect_eq(k->kp.tmpl, ZKT_MATMUL_ROWS);
    cr_expect_eq(k->n_body, 4, "norm, q, k, v");
    cr_expect(k->body[1]->exported && k->body[2]->exported && !k->body[3]->exported);
    cr_expect_eq(top_producer(g, "l0.q")->parent, k, "q comes out of the same kernel");
    zir_graph_free(g);
}

/* v in Q6_K beside Q4_K q and k: q and k fuse (their type's own GEMV
 * layout stays); v gets a copy of the norm and a GEMV of its own. */
Test(passes, fuse_qkv_keeps_another_type_apart) {
    zir_graph *g = qkv_graph(ZT_Q6_K);
    zpass_opts o = opts(target("h200"), ZPH_DECODE);
    zpass_decision x = run_pass(g, zpass_find("fuse-qkv"), &o);
    cr_expect(x.fused);
    cr_expect(strstr(x.reason, "2 of its 3 matmuls as one GEMV"), "%s", x.reason);
    const zir_node *k = top_producer(g, "l0.k"), *v = top_producer(g, "l0.v");
    cr_expect_eq(k->kp.tmpl, ZKT_MATMUL_ROWS);
    cr_expect_eq(k->n_body, 3, "norm, q, k");
    cr_expect_eq(v->kp.tmpl, ZKT_MATMUL, "v: its own norm and GEMV");
    cr_expect_eq(v->body[0]->op, ZOP_RMS_NORM);
    zir_graph_free(g);
}

/* An f32 [n] weight (a norm's, a bias, the decay's A). */
static zir_value *f32_weight(zir_graph *g, const char *name, int64_t n) {
    zdiag d = {0};
    zdim s[1] = {n};
    zir_value *w = zir_value_new(g, name, ZR_WEIGHT, ZT_F32, 1, s, &d);
    cr_assert_not_null(w, "%s", d.msg);
    w->data = never_read;
    w->nbytes = 4 * (uint64_t)n;
    return w;
}

/* Qwen3.5-9B's delta-net projections: an RMSNorm (hidden 4096) feeding
 * beta (32 rows) and its sigmoid, alpha (32) plus dt_bias, softplus, times
 * A, qkv (8192, in qkv_type: Q6_K on Q4_K_M's use_more_bits layers) read
 * by a slice (the conv's stand-in: not a view), and z (4096) read through
 * a reshape to heads. */
static zir_graph *delta_graph(ztype qkv_type) {
    zir_graph *g = zir_graph_new();
    g->hp = (zir_hparams){.arch = "synthetic", .n_layer = 1, .n_embd = 4096, .n_ff = 12288};
    zdiag d = {0};
    zdim xs[2] = {ZDIM_T, 4096};
    zir_value *x = zir_value_new(g, "x", ZR_INPUT, ZT_F32, 2, xs, &d);
    zir_value *h = node(g, ZOP_RMS_NORM, "l0.attn_in", x, f32_weight(g, "attn_norm", 4096), ZG_ATTN);
    zir_value *b = node(g, ZOP_MATMUL, "l0.beta_logit", h, weight(g, "ssm_beta", 32, 4096), ZG_ATTN);
    node(g, ZOP_SIGMOID, "l0.beta", b, NULL, ZG_ATTN);
    zir_value *a = node(g, ZOP_MATMUL, "l0.alpha", h, weight(g, "ssm_alpha", 32, 4096), ZG_ATTN);
    a = node(g, ZOP_ADD, "l0.alpha_biased", a, f32_weight(g, "ssm_dt.bias", 32), ZG_ATTN);
    a = node(g, ZOP_SOFTPLUS, "l0.alpha_softplus", a, NULL, ZG_ATTN);
    node(g, ZOP_MUL, "l0.decay", a, f32_weight(g, "ssm_a", 32), ZG_ATTN);
    zir_value *wq = weight(g, "attn_qkv", 8192, 4096);
    if (qkv_type == ZT_Q6_K) wq->dtype = qkv_type, wq->nbytes = 8192 * 4096 / 256 * 210;
    zir_value *q = node(g, ZOP_MATMUL, "l0.qkv", h, wq, ZG_ATTN);
    zir_attrs sa = {.slice = {0, 8192}};
    cr_assert_not_null(zir_node_add(g, ZOP_SLICE, "l0.qkv_conv", &q, 1, &sa, 0, ZG_ATTN, &d), "%s", d.msg);
    zir_value *z = node(g, ZOP_MATMUL, "l0.z", h, weight(g, "attn_gate", 4096, 4096), ZG_ATTN);
    zir_attrs ra = {.reshape = {3, {ZDIM_T, 32, 128}}};
    zir_node *r = zir_node_add(g, ZOP_RESHAPE, "l0.z_heads", &z, 1, &ra, 0, ZG_ATTN, &d);
    cr_assert_not_null(r, "%s", d.msg);
    g->tokens = x;
    g->logits = r->out;
    cr_assert_eq(zir_verify(g, &d), ZOK, "%s", d.msg);
    return g;
}

/* fuse-qkv on the 9B's delta layer, decode on h200: four GEMVs (run 51:
 * 20.8 or 14.7 us for qkv, 10.7 for z, 8.7 and 7.9 for the two 32-row
 * gates, each its own dispatch reading x and the norm weight) become one:
 * three concurrent dispatches (0.64 MB each), three 8 KiB reads of x and
 * three of the 16 KiB norm weight saved. The gates' epilogues come along: one kernel
 * whose body is the norm, each matmul and its chain, beta, the decay and
 * qkv exported, z its output. */
Test(passes, fuse_qkv_takes_the_delta_layer_with_its_gates) {
    zir_graph *g = delta_graph(ZT_Q4_K);
    zpass_opts o = opts(target("h200"), ZPH_DECODE);
    zpass_decision x = run_pass(g, zpass_find("fuse-qkv"), &o);
    cr_expect(x.fused);
    cr_expect_eq(x.chosen, ZKT_MATMUL_ROWS);
    cr_expect_eq(x.crossings_before, 4.0);
    cr_expect_eq(x.crossings_after, 1.0);
    EXPECT_BYTES(x.bytes_before, 4 * 8192, "x read by each GEMV");
    EXPECT_BYTES(x.bytes_after, 8192, "x read once");
    double saved = 3 * 0.64e6 + 3 * 8192 + 3 * 16384 / target("h200")->gemv_eff;
    char want[64];
    snprintf(want, sizeof want, "(saves %.0f >= threshold", saved);
    cr_expect(strstr(x.reason, "4 of its 4 matmuls (2 with their epilogues) as one GEMV over their rows: "
                               "matmul_rows: "),
              "%s", x.reason);
    cr_expect(strstr(x.reason, want), "%s: %s", want, x.reason);
    const zir_node *k = top_producer(g, "l0.z");
    cr_assert_eq(k->kp.tmpl, ZKT_MATMUL_ROWS);
    static const char *const body[] = {"l0.attn_in", "l0.beta_logit",   "l0.beta",
                                       "l0.alpha",   "l0.alpha_biased", "l0.alpha_softplus",
                                       "l0.decay",   "l0.qkv",          "l0.z"};
    cr_assert_eq(k->n_body, 9);
    for (int i = 0; i < 9; i++) {
        cr_expect_str_eq(k->body[i]->out->name, body[i]);
        bool exported = i == 2 || i == 6 || i == 7;
        cr_expect_eq(k->body[i]->exported, exported, "%s", body[i]);
    }
    cr_expect_eq(k->n_in, 8, "x, the norm's, the four matrices, dt_bias and A");
    zir_graph_free(g);
}

/* qkv in Q6_K beside the Q4_K z, beta and alpha (Q4_K_M's use_more_bits
 * layers, 12 of the 9B's 24 delta layers): those three join, two
 * concurrent dispatches saved, and qkv keeps a GEMV with its own norm. */
Test(passes, fuse_qkv_keeps_a_q6_K_qkv_apart) {
    zir_graph *g = delta_graph(ZT_Q6_K);
    zpass_opts o = opts(target("h200"), ZPH_DECODE);
    zpass_decision x = run_pass(g, zpass_find("fuse-qkv"), &o);
    cr_expect(x.fused);
    double saved = 2 * 0.64e6 + 2 * 8192 + 2 * 16384 / target("h200")->gemv_eff;
    char want[64];
    snprintf(want, sizeof want, "(saves %.0f >= threshold", saved);
    cr_expect(strstr(x.reason, "3 of its 4 matmuls (2 with their epilogues) as one GEMV"), "%s", x.reason);
    cr_expect(strstr(x.reason, want), "%s: %s", want, x.reason);
    const zir_node *k = top_producer(g, "l0.z"), *q = top_producer(g, "l0.qkv");
    cr_expect_eq(k->kp.tmpl, ZKT_MATMUL_ROWS);
    cr_expect_eq(k->n_body, 8, "norm, beta and its sigmoid, alpha and its chain, z");
    cr_expect_eq(q->kp.tmpl, ZKT_MATMUL, "qkv: its own norm and GEMV");
    cr_expect_eq(q->body[0]->op, ZOP_RMS_NORM);
    zir_graph_free(g);
}

/* Prefill keeps the three GEMMs: nothing is fused, nothing recorded. */
Test(passes, fuse_qkv_is_decode_only) {
    zir_graph *g = qkv_graph(ZT_Q4_K);
    zpass_opts o = opts(target("h200"), ZPH_PREFILL);
    zdiag d = {0};
    cr_assert_eq(zpass_run_one(g, zpass_find("fuse-qkv"), &o, &d), ZOK, "%s", d.msg);
    for (uint32_t i = 0; i < g->n_nodes; i++)
        cr_expect_neq(g->nodes[i]->op, ZOP_KERNEL, "prefill made a kernel");
    zir_graph_free(g);
}

/* The batch schedule's matmuls: a multi-row GEMV of all the step's rows up
 * to 16 of them, the GEMMs beyond, and ZINC_BATCH_GEMV=0 keeps the GEMMs. */
Test(batch, gemv_up_to_16_rows) {
    char why[200];
    unsetenv("ZINC_BATCH_GEMV");
    static const int64_t rows[] = {1, 3, 8, 16, 17, 64};
    static const int want[] = {1, 3, 8, 16, 0, 0};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        cr_expect_eq(zcost_batch_gemv(ztarget_find("llvmpipe"), rows[i], why, sizeof why), want[i],
                     "%lld rows: %s", (long long)rows[i], why);
        cr_expect(strstr(why, want[i] ? "multi-row GEMV" : "GEMM"), "%s", why);
    }
    /* the H200's measured crossover: 16 rows (run 34), the registers' bound */
    cr_expect_eq(zcost_batch_gemv(ztarget_find("h200"), 16, why, sizeof why), 16, "%s", why);
    cr_expect_eq(zcost_batch_gemv(ztarget_find("h200"), 17, why, sizeof why), 0, "%s", why);
    cr_expect(strstr(why, "registers"), "%s", why);
    /* a target's crossover below the bound */
    ztarget t = *ztarget_find("h200");
    t.batch_gemv_rows = 8;
    cr_expect_eq(zcost_batch_gemv(&t, 8, why, sizeof why), 8, "%s", why);
    cr_expect_eq(zcost_batch_gemv(&t, 9, why, sizeof why), 0, "%s", why);
    cr_expect(strstr(why, "crossover"), "%s", why);
    setenv("ZINC_BATCH_GEMV", "0", 1);
    cr_expect_eq(zcost_batch_gemv(ztarget_find("llvmpipe"), 8, why, sizeof why), 0);
    cr_expect(strstr(why, "ZINC_BATCH_GEMV=0"), "%s", why);
    setenv("ZINC_BATCH_GEMV", "4", 1); /* the crossover moved, to measure it */
    cr_expect_eq(zcost_batch_gemv(ztarget_find("h200"), 4, why, sizeof why), 4, "%s", why);
    cr_expect_eq(zcost_batch_gemv(ztarget_find("h200"), 5, why, sizeof why), 0, "%s", why);
    unsetenv("ZINC_BATCH_GEMV");
}

/* The batch GEMV's rows a subgroup, the 8B's kernels on the h200 profile
 * (132 SMs) as run 80 measured them best: one row for gate+up, o and a
 * lone v, two for the output head, the rows GEMVs and the K-12288 downs. */
Test(batch, gemv_layout_by_kernel) {
    static const struct {
        int64_t N, K;
        bool glu;
        int rs, nsg;
    } c[] = {{12288, 4096, true, 1, 8}, {4096, 4096, false, 1, 8},  {1024, 4096, false, 1, 8},
             {151936, 4096, false, 2, 4}, {6144, 4096, false, 2, 4}, {5120, 4096, false, 2, 4},
             {4096, 12288, false, 2, 4}};
    char why[160];
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        int rs = 0, nsg = 0;
        zcost_batch_gemv_layout(ztarget_find("h200"), c[i].N, c[i].K, c[i].glu, why, sizeof why, &rs, &nsg);
        cr_expect(rs == c[i].rs && nsg == c[i].nsg, "N %lld K %lld: %d rows, %d subgroups (%s); expected %d, %d",
                  (long long)c[i].N, (long long)c[i].K, rs, nsg, why, c[i].rs, c[i].nsg);
        cr_expect(strstr(why, c[i].rs == 1 ? "1 row a subgroup" : "2 rows a subgroup"), "%s", why);
    }
}

/* The batch schedule's own graph (zpass_opts.batch_rows): its rows are the
 * step's tokens and tile; where they are multi-row GEMVs the whole-MLP
 * kernel (no multi-row form) is priced out, and fuse-qkv joins q, k and v
 * as in decode; past the crossover, prefill's decisions (no rows GEMV). */
Test(batch, own_graph_takes_decode_gemv_decisions) {
    zpass_opts o = opts(target("h200"), ZPH_PREFILL);
    o.batch_rows = 8;
    cr_expect(zcost_gemv_batch(&o));
    cr_expect_eq(zcost_step_tokens(&o), 8);
    cr_expect_eq(zcost_token_tile(&o), 8);
    zcost_mlp m = mlp_shape(256, 768); /* whole MLP wins in prefill at this width */
    zcost_option opt[ZCOST_MLP_OPTIONS];
    zcost_price_mlp(&o, &m, opt);
    cr_expect(!opt[2].feasible && isinf(opt[2].total), "%s", opt[2].note);
    cr_expect(strstr(opt[2].note, "no multi-row form"), "%s", opt[2].note);
    char why[240];
    cr_expect_eq(zcost_choose(&o, opt, ZCOST_MLP_OPTIONS, why, sizeof why), 1, "%s", why);
    zir_graph *g = qkv_graph(ZT_Q4_K);
    zdiag d = {0};
    cr_assert_eq(zpass_run_one(g, zpass_find("fuse-qkv"), &o, &d), ZOK, "%s", d.msg);
    int rows = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        rows += g->nodes[i]->op == ZOP_KERNEL && g->nodes[i]->kp.tmpl == ZKT_MATMUL_ROWS;
    cr_expect_eq(rows, 1, "the batch graph's q, k and v: %d rows GEMVs", rows);
    zir_graph_free(g);
    o.batch_rows = 17; /* past the H200's crossover: GEMMs, prefill's decisions */
    cr_expect(!zcost_gemv_batch(&o));
    g = qkv_graph(ZT_Q4_K);
    cr_assert_eq(zpass_run_one(g, zpass_find("fuse-qkv"), &o, &d), ZOK, "%s", d.msg);
    for (uint32_t i = 0; i < g->n_nodes; i++)
        cr_expect_neq(g->nodes[i]->op, ZOP_KERNEL, "a batch of GEMMs made a kernel");
    zir_graph_free(g);
}

/* ---- prefill's matmuls of few rows ---------------------------------------- */

/* The brief's arithmetic on h200 (docs/cost-model.md): a 512-token step of
 * Qwen3.5-9B's beta projection (N 32, K 4096) is 8 GEMM tiles, one wave
 * of 64 K steps at 1 us = 64 us, against 2 x 512 x 32 x 4096 flop at 11.5
 * TFLOP/s = 11.7 us: the GEMV. Its k projection (N 1024): 128 tiles, still
 * one wave, 64 us against 373.5: the GEMMs. A MoE router (N 128, K 2048):
 * 32 us against 23.3: the GEMV. A 64-token step of N 1024 is one tile row,
 * 64 us against 46.7: the GEMV. */
Test(prefill_gemv, h200_prices_the_gemm_floor) {
    unsetenv("ZINC_PREFILL_GEMV");
    const ztarget *t = target("h200");
    char why[240];
    cr_expect_eq(zcost_prefill_gemv(t, 32, 4096, 512, why, sizeof why), ZCOST_GEMVN_ROWS, "%s", why);
    cr_expect(strstr(why, "= 11.7 us <") &&
                  strstr(why, "8 tiles of 64x64 on 132 units: 1 wave x 64 K steps") &&
                  strstr(why, "= 64.0 us"),
              "%s", why);
    cr_expect_eq(zcost_prefill_gemv(t, 1024, 4096, 512, why, sizeof why), 0, "%s", why);
    cr_expect(!strncmp(why, "GEMM tiles: 128 tiles", 21) && strstr(why, "373.5 us"), "%s", why);
    cr_expect_eq(zcost_prefill_gemv(t, 128, 2048, 512, why, sizeof why), ZCOST_GEMVN_ROWS, "%s", why);
    cr_expect(strstr(why, "23.3 us") && strstr(why, "32.0 us"), "%s", why);
    cr_expect_eq(zcost_prefill_gemv(t, 1024, 4096, 64, why, sizeof why), ZCOST_GEMVN_ROWS, "%s", why);
    /* two waves: 2 x 64 steps */
    cr_expect_eq(zcost_prefill_gemv(t, 4096, 4096, 512, why, sizeof why), 0, "%s", why);
    cr_expect(strstr(why, "512 tiles") && strstr(why, "4 waves"), "%s", why);
    cr_expect_eq(zcost_prefill_gemv(t, 32, 4096, 512, NULL, 0), ZCOST_GEMVN_ROWS);
}

/* Targets without the two measurements keep the GEMMs; the knob forces
 * either side on any target, to measure. */
Test(prefill_gemv, unmeasured_targets_and_the_knob) {
    unsetenv("ZINC_PREFILL_GEMV");
    char why[240];
    static const char *const names[] = {"llvmpipe", "rdna4", "generic"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        cr_expect_eq(zcost_prefill_gemv(target(names[i]), 32, 4096, 512, why, sizeof why), 0, "%s: %s",
                     names[i], why);
        cr_expect(strstr(why, "no measured"), "%s: %s", names[i], why);
    }
    setenv("ZINC_PREFILL_GEMV", "0", 1);
    cr_expect_eq(zcost_prefill_gemv(target("h200"), 32, 4096, 512, why, sizeof why), 0, "%s", why);
    cr_expect(strstr(why, "ZINC_PREFILL_GEMV=0"), "%s", why);
    setenv("ZINC_PREFILL_GEMV", "1", 1);
    cr_expect_eq(zcost_prefill_gemv(target("llvmpipe"), 4096, 4096, 512, why, sizeof why), ZCOST_GEMVN_ROWS,
                 "%s", why);
    cr_expect(strstr(why, "ZINC_PREFILL_GEMV=1"), "%s", why);
    unsetenv("ZINC_PREFILL_GEMV");
}

/* The step it prices: the batch step's rows, else the prefill chunk
 * (zincc --chunk), else 512. */
Test(prefill_gemv, step_tokens) {
    zpass_opts o = opts(target("h200"), ZPH_PREFILL);
    cr_expect_eq(zcost_prefill_tokens(&o), 512);
    o.step_tokens = 96;
    cr_expect_eq(zcost_prefill_tokens(&o), 96);
    o.batch_rows = 24;
    cr_expect_eq(zcost_prefill_tokens(&o), 24);
}

/* Qwen3.5-9B's delta-layer gates as the passes see them (hand-built, the
 * weights never read): x -> beta (32 x 4096) -> sigmoid, and the k
 * projection (1024 x 4096), then a stand-in output matmul (the logits,
 * never priced). mm-f16 on h200's prefill sends beta to the multi-row GEMV
 * (attr.mm_gemv, not mm_f16) with its arithmetic in the report and keeps k
 * on the GEMMs in fp16, the GEMMs' side of the arithmetic on its line; a
 * 64-token chunk (zpass_opts.step_tokens) sends k too; rdna4 (matrix
 * units, no measurements) keeps both in fp16 and says nothing of GEMVs. */
static zir_graph *gates_graph(void) {
    zir_graph *g = zir_graph_new();
    g->hp = (zir_hparams){.arch = "synthetic", .n_layer = 1, .n_embd = 4096, .n_ff = 12288};
    zdiag d = {0};
    zdim xs[2] = {ZDIM_T, 4096};
    zir_value *x = zir_value_new(g, "x", ZR_INPUT, ZT_F32, 2, xs, &d);
    zir_value *b = node(g, ZOP_MATMUL, "l0.beta_raw", x, weight(g, "wb", 32, 4096), ZG_ATTN);
    node(g, ZOP_SIGMOID, "l0.beta", b, NULL, ZG_ATTN);
    zir_value *k = node(g, ZOP_MATMUL, "l0.k", x, weight(g, "wk", 1024, 4096), ZG_ATTN);
    g->tokens = x;
    g->logits = node(g, ZOP_MATMUL, "out", k, weight(g, "wo", 4096, 1024), ZG_OUTPUT);
    cr_assert_eq(zir_verify(g, &d), ZOK, "%s", d.msg);
    return g;
}

/* mm-f16 alone on the gates graph for target tn, a chunk of `chunk` tokens
 * (0: the default); the decisions in rep (the caller frees its arena). */
static zir_graph *gates_marked(const char *tn, int64_t chunk, zpass_report *rep) {
    zir_graph *g = gates_graph();
    *rep = (zpass_report){.arena = zarena_new()};
    zpass_opts o = opts(target(tn), ZPH_PREFILL);
    o.step_tokens = chunk;
    o.report = rep;
    o.verify_each = true;
    zdiag d = {0};
    cr_assert_eq(zpass_run_one(g, zpass_find("mm-f16"), &o, &d), ZOK, "%s", d.msg);
    return g;
}

Test(prefill_gemv, mm_f16_marks_the_9b_gates) {
    unsetenv("ZINC_PREFILL_GEMV");
    zpass_report rep;
    zir_graph *g = gates_marked("h200", 0, &rep);
    const zir_node *beta = top_producer(g, "l0.beta_raw"), *k = top_producer(g, "l0.k");
    const zir_node *out = top_producer(g, "out");
    cr_expect(beta->attr.mm_gemv && !beta->attr.mm_f16, "beta: gemv %d, f16 %d", beta->attr.mm_gemv,
              beta->attr.mm_f16);
    cr_expect(!k->attr.mm_gemv && k->attr.mm_f16, "k: gemv %d, f16 %d", k->attr.mm_gemv, k->attr.mm_f16);
    cr_expect(!out->attr.mm_gemv && out->attr.mm_f16);
    /* the three matmuls', then mm-f16's fp16 x (k, read only by the logits' fp16 GEMM) */
    cr_assert_eq(rep.n, 4, "%d decisions", rep.n);
    cr_expect(!strcmp(rep.items[3].what, "fp16 x") && strstr(rep.items[3].reason, "1 activation kept in fp16"),
              "%s: %s", rep.items[3].what, rep.items[3].reason);
    cr_expect(!strncmp(rep.items[0].reason, "multi-row GEMV", 14) && strstr(rep.items[0].reason, "11.7 us"),
              "%s", rep.items[0].reason);
    cr_expect(strstr(rep.items[1].reason, "fp16") && strstr(rep.items[1].reason, "GEMM tiles: 128 tiles"),
              "%s", rep.items[1].reason);
    cr_expect(!strstr(rep.items[2].reason, "GEMM tiles"), "the logits: %s", rep.items[2].reason);
    zir_graph_free(g);
    zarena_free(rep.arena);
    g = gates_marked("h200", 64, &rep);
    cr_expect(top_producer(g, "l0.beta_raw")->attr.mm_gemv && top_producer(g, "l0.k")->attr.mm_gemv);
    cr_expect(!top_producer(g, "out")->attr.mm_gemv);
    zir_graph_free(g);
    zarena_free(rep.arena);
    g = gates_marked("rdna4", 0, &rep);
    cr_expect(!top_producer(g, "l0.beta_raw")->attr.mm_gemv && top_producer(g, "l0.beta_raw")->attr.mm_f16);
    for (int i = 0; i < rep.n; i++)
        cr_expect(!strstr(rep.items[i].reason, "GEMM tiles") && !strstr(rep.items[i].reason, "GEMV"),
                  "rdna4: %s", rep.items[i].reason);
    zir_graph_free(g);
    zarena_free(rep.arena);
}
