#include "cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PREFILL_STEP = 512, MLP_BLOCK = 64, KV_BLOCK = 32 };

/* A batch step's rows share each weight read and each dispatch: they are
 * its tokens and its tile. */
int64_t zcost_step_tokens(const zpass_opts *o) {
    return o->phase == ZPH_DECODE ? 1 : o->batch_rows > 0 ? o->batch_rows : PREFILL_STEP;
}
int zcost_token_tile(const zpass_opts *o) {
    if (o->phase == ZPH_DECODE) return 1;
    if (o->batch_rows > 0) return (int)o->batch_rows;
    return o->token_tile > 0 ? o->token_tile : o->target->prefill_tile;
}

double zcost_concurrent_dispatch_us(const ztarget *t) {
    return t->concurrent_dispatch_us > 0 ? t->concurrent_dispatch_us : t->dispatch_us;
}

/* concurrent of the dispatches need no barrier before them. */
static double dispatch_bytes(const zpass_opts *o, int dispatches, int concurrent) {
    double us = (dispatches - concurrent) * o->target->dispatch_us +
                concurrent * zcost_concurrent_dispatch_us(o->target);
    return us * 1e-6 * o->target->bandwidth_gbs * 1e9 / (double)zcost_step_tokens(o);
}

/* A measured efficiency of 0 means unmeasured: priced at full bandwidth. */
static double eff(double e) {
    return e > 0 ? e : 1;
}

/* Weight bytes as the time they take: decode kernels stream them at their
 * family's measured fraction of the bandwidth (ztarget's *_eff), so a
 * kernel that reads slowly pays for it in the same unit as the bytes it
 * saves. Prefill reads are shared by the tile and priced as they are. */
static double weight_time(const zpass_opts *o, double bytes, double e) {
    return o->phase == ZPH_DECODE ? bytes / eff(e) : bytes;
}

static void finish(const zpass_opts *o, zcost_option *x) {
    x->dispatch = dispatch_bytes(o, x->dispatches, x->concurrent);
    x->total = x->act + x->weight + x->partial + x->dispatch;
}

static void staged_like(const zpass_opts *o, const zcost_mlp *m, zcost_option *x, zir_ktemplate t, int disp,
                        int cross) {
    double wb = m->w_gate + m->w_up + m->w_down;
    *x = (zcost_option){.tmpl = t,
                        .feasible = true,
                        .token_tile = zcost_token_tile(o),
                        .split = 1,
                        .dispatches = disp,
                        .crossings = cross};
    x->act = cross * (double)m->ff * o->target->act_bytes;
    x->weight = weight_time(o, wb / x->token_tile, o->target->gemv_eff);
    finish(o, x);
}

/* Prefill: one workgroup owns a token tile and accumulates tile x hidden fp32
 * sums of the down projection on chip while it walks the intermediate in
 * blocks, so the tile shrinks to what shared memory holds and every weight
 * is re-read once per (smaller) tile. */
static void full_mlp_prefill(const zpass_opts *o, const zcost_mlp *m, zcost_option *x) {
    uint32_t smem = o->target->smem_bytes;
    int want = zcost_token_tile(o);
    double per_token = 4.0 * (double)(m->hidden + MLP_BLOCK);
    int tile = (int)floor(smem / per_token);
    if (tile > want) tile = want;
    *x = (zcost_option){.tmpl = ZKT_MLP, .token_tile = tile, .split = 1, .dispatches = 1, .crossings = 0};
    if (tile < 1) {
        snprintf(x->note, sizeof x->note,
                 "a 1-token fp32 accumulator of hidden %lld needs %.1f KiB > %.0f KiB shared memory",
                 (long long)m->hidden, per_token / 1024, smem / 1024.0);
        x->total = INFINITY;
        return;
    }
    x->feasible = true;
    x->weight = (m->w_gate + m->w_up + m->w_down) / tile;
    if (tile < want)
        snprintf(x->note, sizeof x->note,
                 "the %d-token tile's accumulator needs %.0f KiB > %.0f KiB shared memory: "
                 "tile cut to %d, weights re-read %dx as often",
                 want, want * per_token / 1024, smem / 1024.0, tile, (want + tile - 1) / tile);
    finish(o, x);
}

/* Decode: one token, so the intermediate is split across enough workgroups
 * to fill the device; each writes a hidden-wide fp32 partial sum that the
 * last one to finish reduces (written once, read once). */
static void full_mlp_decode(const zpass_opts *o, const zcost_mlp *m, zcost_option *x) {
    int split = o->target->n_cu;
    int64_t max_split = m->ff / MLP_BLOCK > 0 ? m->ff / MLP_BLOCK : 1;
    if (split > max_split) split = (int)max_split;
    *x = (zcost_option){.tmpl = ZKT_MLP, .feasible = true, .token_tile = 1, .split = split, .dispatches = 1};
    double acc = 4.0 * (double)m->hidden;
    if (acc > o->target->smem_bytes) {
        x->feasible = false;
        snprintf(x->note, sizeof x->note,
                 "a hidden-wide fp32 partial (%.1f KiB) exceeds %.0f KiB shared memory", acc / 1024,
                 o->target->smem_bytes / 1024.0);
        x->total = INFINITY;
        return;
    }
    /* mlp_split_eff was measured with a workgroup on every compute unit;
     * fewer slices than units leave the rest idle (Qwen3-0.6B's ff 3072 has
     * 48 slices of 64 for 132 SMs, and ran at a third of that). */
    double busy = split < o->target->n_cu ? (double)split / o->target->n_cu : 1.0;
    x->weight = weight_time(o, m->w_gate + m->w_up + m->w_down, o->target->mlp_split_eff * busy);
    x->partial = split > 1 ? 2.0 * split * acc : 0;
    snprintf(x->note, sizeof x->note,
             "intermediate split over %d workgroups: %d hidden-wide fp32 partial sums; weights streamed at "
             "%.0f%% of bandwidth (GEMV %.0f%%)",
             split, split, 100 * eff(o->target->mlp_split_eff) * busy, 100 * eff(o->target->gemv_eff));
    finish(o, x);
}

void zcost_price_mlp(const zpass_opts *o, const zcost_mlp *m, zcost_option opt[ZCOST_MLP_OPTIONS]) {
    staged_like(o, m, &opt[0], ZKT_NONE, 4, 6);
    staged_like(o, m, &opt[1], ZKT_GATE_UP_SWIGLU, 2, 2);
    if (zcost_gemv_batch(o)) {
        /* one workgroup per token tile would leave the device idle, one per
         * token and slice re-read the weights per row */
        opt[2] = (zcost_option){.tmpl = ZKT_MLP,
                                .token_tile = zcost_token_tile(o),
                                .split = 1,
                                .dispatches = 1,
                                .total = INFINITY};
        snprintf(
            opt[2].note, sizeof opt[2].note,
            "a batch step's matmuls are multi-row GEMVs, and the whole-MLP kernel has no multi-row form");
    } else if (o->phase == ZPH_DECODE)
        full_mlp_decode(o, m, &opt[2]);
    else
        full_mlp_prefill(o, m, &opt[2]);
}

double zcost_moe_weight(const zcost_moe *m) {
    return (m->w_gate + m->w_up + m->w_down) * (double)m->used / (double)m->experts;
}

double zcost_moe_grouped_weight(const zcost_moe *m, int64_t tokens, int tile) {
    double pairs = (double)tokens * (double)m->used, e = (double)m->experts;
    double touched = e * (1.0 - pow(1.0 - (double)m->used / e, (double)tokens));
    if (touched < 1) touched = 1;
    /* touched is within rounding of E for long steps: 32.0000001 pairs
     * an expert is one 32-pair tile, not two. */
    double tiles = touched * ceil(pairs / touched / (tile > 0 ? tile : 1) - 1e-6);
    return (m->w_gate + m->w_up + m->w_down) / e * tiles / (double)tokens;
}

/* Staged, the [U, ff] intermediate crosses six times (gate and up write it,
 * SwiGLU reads both and writes, down reads), the [U, hidden] expert outputs
 * twice and the summed row twice; fused, the SwiGLU output crosses twice
 * (moe_gate_up writes it, moe_down reads it) and the rest stays on chip.
 * Both read the same chosen experts' rows, once per (token, slot). Grouped
 * (moe_route, moe_gate_up, moe_down, moe_sum+add), the SwiGLU output and
 * the [U, hidden] products cross twice each, and the weights are read once
 * per expert tile; every workgroup also searches the
 * sorted route (T x U pairs, from cache) for the experts' runs, which is
 * not priced. */
void zcost_price_moe(const zpass_opts *o, const zcost_moe *m, zcost_option opt[ZCOST_MOE_OPTIONS]) {
    double ab = o->target->act_bytes, uff = (double)(m->used * m->ff), uh = (double)(m->used * m->hidden);
    double w = weight_time(o, zcost_moe_weight(m), o->target->gemv_eff);
    opt[0] = (zcost_option){
        .tmpl = ZKT_NONE, .feasible = true, .token_tile = 1, .split = 1, .dispatches = 6, .crossings = 6};
    opt[0].act = (6 * uff + 2 * uh + 2.0 * (double)m->hidden) * ab;
    opt[1] = (zcost_option){.tmpl = ZKT_MOE_GATE_UP,
                            .feasible = true,
                            .token_tile = 1,
                            .split = 1,
                            .dispatches = 2,
                            .crossings = 2};
    opt[1].act = 2 * uff * ab;
    for (int i = 0; i < 2; i++) {
        opt[i].weight = w;
        snprintf(opt[i].note, sizeof opt[i].note, "%lld of %lld experts read", (long long)m->used,
                 (long long)m->experts);
        finish(o, &opt[i]);
    }
    int tile = zcost_token_tile(o);
    int64_t S = zcost_step_tokens(o);
    const char *e = getenv("ZINC_MOE_GROUPED");
    opt[2] = (zcost_option){.tmpl = ZKT_MOE_GATE_UP,
                            .feasible = !(e && !strcmp(e, "0")),
                            .token_tile = tile,
                            .split = 1,
                            .dispatches = 4,
                            .crossings = 2};
    opt[2].act = (2 * uff + 2 * uh) * ab;
    opt[2].weight = weight_time(o, zcost_moe_grouped_weight(m, S, tile), o->target->gemv_eff);
    if (!opt[2].feasible) {
        snprintf(opt[2].note, sizeof opt[2].note, "ZINC_MOE_GROUPED=0 keeps the GEMVs");
        opt[2].total = INFINITY;
        return;
    }
    if (S == 1)
        snprintf(opt[2].note, sizeof opt[2].note, "one token a step: the GEMVs' rows, in 4 dispatches");
    else
        snprintf(opt[2].note, sizeof opt[2].note, "%lld-token step, %d-pair tiles", (long long)S, tile);
    finish(o, &opt[2]);
}

void zcost_price_attn(const zpass_opts *o, const zcost_attn *a, zcost_option opt[ZCOST_ATTN_OPTIONS]) {
    int tile = zcost_token_tile(o);
    double kv = 2.0 * (double)a->ctx * a->kv_heads * a->head_dim * o->target->act_bytes;
    double scores = (double)a->heads * a->ctx * 4.0; /* fp32 per token */
    opt[0] = (zcost_option){
        .tmpl = ZKT_NONE, .feasible = true, .token_tile = tile, .split = 1, .dispatches = 3, .crossings = 4};
    opt[0].act = 4 * scores;
    opt[0].weight = kv / tile;
    finish(o, &opt[0]);
    int qt = tile < 16 ? tile : 16;
    double smem =
        4.0 * qt * a->head_dim + 2.0 * KV_BLOCK * a->head_dim * o->target->act_bytes + 4.0 * qt * KV_BLOCK;
    opt[1] = (zcost_option){.tmpl = ZKT_ATTENTION, .token_tile = qt, .split = 1, .dispatches = 1};
    if (smem > o->target->smem_bytes) {
        snprintf(opt[1].note, sizeof opt[1].note,
                 "q tile and K/V block need %.1f KiB > %.0f KiB shared memory", smem / 1024,
                 o->target->smem_bytes / 1024.0);
        opt[1].total = INFINITY;
        return;
    }
    opt[1].feasible = true;
    opt[1].weight = kv / qt;
    if (o->phase == ZPH_DECODE) { /* split the context so the device fills: online-softmax partials */
        /* One workgroup per compute unit. Four (shorter key walks, more
         * partials to combine) measured 7 % faster attention on the 8B
         * shape but 31 % slower on the 0.6B on the H200 (docs/performance.md).
         * The decode kernel gives the query heads of a kv head one
         * workgroup, or two from eight heads a kv head up (backend/cg_attn.c,
         * ZINC_ATTN_QSPLIT), so kv_heads (or twice as many) workgroups per
         * split: the split is not halved for the second, until the H200
         * says whether twice the workgroups at long contexts cost. */
        int64_t s = (o->target->n_cu + a->kv_heads - 1) / a->kv_heads;
        int64_t max_s = a->ctx / KV_BLOCK > 0 ? a->ctx / KV_BLOCK : 1;
        opt[1].split = (int)(s < max_s ? s : max_s);
        opt[1].partial = opt[1].split > 1 ? 2.0 * opt[1].split * a->heads * (a->head_dim + 2) * 4.0 : 0;
    }
    finish(o, &opt[1]);
}

/* The weights are the same bytes either way; what the horizontal GEMV
 * saves is the dispatches and the re-reads of x and of the norm weight.
 * The separate GEMVs read the same x and write apart, so no barrier stands
 * between them: after the first, each adds what a concurrent dispatch
 * costs (ztarget.concurrent_dispatch_us), not a dispatch and its barrier. */
void zcost_price_rows(const zpass_opts *o, const zcost_rows *r, zcost_option opt[ZCOST_ROWS_OPTIONS]) {
    double x = (double)r->hidden * o->target->act_bytes;
    for (int i = 0; i < ZCOST_ROWS_OPTIONS; i++) {
        int reads = i ? 1 : r->segments;
        opt[i] = (zcost_option){.tmpl = i ? ZKT_MATMUL_ROWS : ZKT_NONE,
                                .feasible = true,
                                .token_tile = zcost_token_tile(o),
                                .split = 1,
                                .dispatches = reads,
                                .concurrent = reads - 1,
                                .crossings = reads};
        opt[i].act = reads * x;
        opt[i].weight = weight_time(o, r->w_bytes + reads * r->norm_bytes, o->target->gemv_eff);
        snprintf(opt[i].note, sizeof opt[i].note, "%d GEMV%s, x read %d time%s", reads, reads > 1 ? "s" : "",
                 reads, reads > 1 ? "s" : "");
        finish(o, &opt[i]);
    }
}

/* A batch step's rows are tokens of as many sequences: the GEMMs' tiles of
 * 16-64 tokens stay mostly empty, and on the H200 they streamed an 8B's
 * weights at ~170 GB/s for a handful of rows (docs/performance.md, run
 * 22), where the decode GEMVs stream 1.1-2 TB/s. The multi-row GEMV reads
 * each weight group once for all the rows, with a sum per row and weight
 * row in registers: up to ZCOST_GEMVN_ROWS rows it takes all of a step in
 * one workgroup row; beyond, the sums outgrow the registers and the GEMMs'
 * tiles fill. The GEMV's step grows with its rows where the GEMMs' does not:
 * the target's measured crossover (ztarget.batch_gemv_rows) bounds it too.
 * ZINC_BATCH_GEMV=0 keeps the GEMMs, =N moves the crossover to N rows (at
 * most ZCOST_GEMVN_ROWS), to measure the difference. */
int zcost_batch_gemv(const ztarget *t, int64_t rows, char *why, size_t whysz) {
    const char *e = getenv("ZINC_BATCH_GEMV");
    int most = t && t->batch_gemv_rows > 0 && t->batch_gemv_rows < ZCOST_GEMVN_ROWS ? t->batch_gemv_rows
                                                                                    : ZCOST_GEMVN_ROWS;
    int knob = e ? atoi(e) : -1;
    if (knob > 0) most = knob < ZCOST_GEMVN_ROWS ? knob : ZCOST_GEMVN_ROWS;
    int pick = rows >= 1 && rows <= most && knob != 0 ? (int)rows : 0;
    if (!why) return pick;
    if (pick)
        snprintf(
            why, whysz,
            "multi-row GEMV, %d rows a workgroup: %lld rows <= %d, the weights read once a step as decode "
            "streams them",
            pick, (long long)rows, most);
    else
        snprintf(why, whysz, "GEMM tiles: %lld rows %s", (long long)rows,
                 rows > ZCOST_GEMVN_ROWS   ? "outgrow the multi-row GEMV's registers"
                 : rows > most && knob > 0 ? "are past the crossover ZINC_BATCH_GEMV sets"
                 : rows > most ? "are past the target's measured crossover, where the GEMMs' tiles win"
                               : "(ZINC_BATCH_GEMV=0 keeps the GEMMs)");
    return pick;
}

/* The multi-row GEMV's rows a subgroup (docs/performance.md, run 80: the
 * 8B's batch step of 8 rows, each kernel at RS 2 and 1, H100). Two rows a
 * lane share each load of x, and a kernel whose subgroups fill the device
 * with work to spare wants that: the output head (151,936 rows, 462 us at
 * 2 against 762 at 1), q, k and v as one rows GEMV (6144 rows: 512 against
 * 660), the q6_K down (K 12288: 1350 against 1395). One row a subgroup
 * (8 subgroups a workgroup) doubles the subgroups where two rows a
 * subgroup leave at most 16 on an SM for a K walk of two steps a lane
 * (K <= 4096): o (4096 rows: 870 -> 802 us) and a v of its own (1024 rows:
 * 490 -> 354); and it halves gate+up's registers (its two matrices make
 * two rows four groups a lane: 119 registers -> 64; 2954 -> 2601 us).
 * ZINC_GEMVN_LAYOUT=rs,nsg replaces it (codegen), to measure. */
void zcost_batch_gemv_layout(const ztarget *t, int64_t N, int64_t K, bool glu, char *why, size_t whysz, int *rs,
                             int *nsg) {
    int64_t sms = t && t->n_cu > 0 ? t->n_cu : 132, per_sm = N / 2 / sms;
    bool one = glu || (per_sm <= 16 && K <= 4096);
    *rs = one ? 1 : 2;
    *nsg = one ? 8 : 4;
    if (why)
        snprintf(why, whysz, "%d row%s a subgroup, %d subgroups: %s", *rs, one ? "" : "s", *nsg,
                 glu   ? "gate+up holds two matrices' groups a row (registers)"
                 : one ? "two rows a subgroup would leave at most 16 subgroups an SM a short K walk"
                       : "two rows share x's loads, the device filled");
}

/* Prefill's matmuls of few rows (docs/performance.md, run 51): the
 * tensor-core GEMM gives a workgroup 64 tokens x 64 rows and walks K in
 * steps of 64 (zcg_cm_default's layout), so at N 32 a 512-token step is 8
 * workgroups on the H200's 132 SMs and its time the latency of the K walk:
 * Qwen3.5-9B's beta and alpha projections (N 32, K 4096, 134 MFLOP) took
 * ~64 us a call, 3.1 ms of a 98.8 ms step. Priced as that floor, waves of
 * tiles x K steps x the measured step (ztarget.cm_step_us), against the
 * multi-row GEMV's measured throughput (ztarget.gemvn_tflops): N 32 goes to
 * the GEMV (~12 us), N 1024 (128 tiles, still one wave, 64 us against
 * ~370) stays on the GEMMs. Both are one dispatch. The GEMV reads the
 * weights again for each workgroup row of 16 tokens (the GEMM for each
 * tile of 64), but at few rows they are small (N 32 x K 4096 in q4_K:
 * 74 KB) and come from L2. */
enum { CM_TILE_T = 64, CM_TILE_N = 64, CM_STEP_K = 64 };

int zcost_prefill_gemv(const ztarget *t, int64_t N, int64_t K, int64_t T, char *why, size_t whysz) {
    const char *e = getenv("ZINC_PREFILL_GEMV");
    int knob = e && (!strcmp(e, "0") || !strcmp(e, "1")) ? e[0] - '0' : -1;
    int64_t tiles = (N + CM_TILE_N - 1) / CM_TILE_N * ((T + CM_TILE_T - 1) / CM_TILE_T);
    int64_t cu = t->n_cu > 0 ? t->n_cu : 1, waves = (tiles + cu - 1) / cu,
            steps = (K + CM_STEP_K - 1) / CM_STEP_K;
    double gemm_us = (double)waves * (double)steps * t->cm_step_us;
    double flop = 2.0 * (double)T * (double)N * (double)K;
    double gemv_us = t->gemvn_tflops > 0 ? flop / (t->gemvn_tflops * 1e6) : 0;
    bool measured = t->cm_step_us > 0 && t->gemvn_tflops > 0;
    int pick = knob == 1 || (knob < 0 && measured && gemv_us < gemm_us) ? ZCOST_GEMVN_ROWS : 0;
    if (!why) return pick;
    char gemv[80], gemm[120], flops[120];
    snprintf(gemv, sizeof gemv, "multi-row GEMV, %d token rows a workgroup, fp32 operands", ZCOST_GEMVN_ROWS);
    snprintf(gemm, sizeof gemm,
             "%lld tiles of %dx%d on %lld units: %lld wave%s x %lld K steps x %.2f us = %.1f us",
             (long long)tiles, CM_TILE_T, CM_TILE_N, (long long)cu, (long long)waves, waves > 1 ? "s" : "",
             (long long)steps, t->cm_step_us, gemm_us);
    snprintf(flops, sizeof flops, "2 x %lld x %lld x %lld flop at %.1f TFLOP/s = %.1f us", (long long)T,
             (long long)N, (long long)K, t->gemvn_tflops, gemv_us);
    if (knob >= 0)
        snprintf(why, whysz, "%s (ZINC_PREFILL_GEMV=%d)", pick ? gemv : "GEMM tiles", knob);
    else if (!measured)
        snprintf(why, whysz, "GEMM tiles: the target has no measured GEMM step or multi-row GEMV throughput");
    else if (pick)
        snprintf(why, whysz, "%s: %s < the GEMM's floor, %s", gemv, flops, gemm);
    else
        snprintf(why, whysz, "GEMM tiles: %s <= the multi-row GEMV's %s", gemm, flops);
    return pick;
}

int64_t zcost_prefill_tokens(const zpass_opts *o) {
    return o->batch_rows > 0 ? o->batch_rows : o->step_tokens > 0 ? o->step_tokens : PREFILL_STEP;
}

bool zcost_gemv_batch(const zpass_opts *o) {
    return o->phase == ZPH_PREFILL && o->batch_rows > 0 &&
           zcost_batch_gemv(o->target, o->batch_rows, NULL, 0) > 0;
}

zpass_decision *zcost_record(const zpass_opts *o, const zir_node *at, const zir_value *v,
                             const zcost_option *opt, int pick) {
    zpass_decision *x = zpass_report_add(o->report);
    if (!x) return NULL;
    *x = (zpass_decision){.layer = at->layer,
                          .group = at->group,
                          .phase = o->phase,
                          .what = v->name,
                          .width = v->width,
                          .crossings_before = opt[0].crossings,
                          .crossings_after = opt[pick].crossings,
                          .bytes_before = opt[0].act,
                          .bytes_after = opt[pick].act,
                          .fused = pick != 0,
                          .chosen = opt[pick].tmpl};
    return x;
}

int zcost_choose(const zpass_opts *o, const zcost_option *opt, int n, char *why, size_t whysz) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (opt[i].feasible && opt[i].total < opt[best].total) best = i;
    double saved = opt[0].total - opt[best].total;
    if (best != 0 && saved < o->fuse_threshold) {
        snprintf(why, whysz, "best option (%s) saves %.0f B/token < threshold %.0f B",
                 zir_ktemplate_name(opt[best].tmpl), saved, o->fuse_threshold);
        return 0;
    }
    if (best == 0)
        snprintf(why, whysz, "no fused option is cheaper than staged (%.0f B/token)", opt[0].total);
    else
        snprintf(why, whysz, "%s: %.0f -> %.0f B/token (saves %.0f >= threshold %.0f)",
                 zir_ktemplate_name(opt[best].tmpl), opt[0].total, opt[best].total, saved, o->fuse_threshold);
    return best;
}
