/* The top-k selection kernel appended to every schedule (backend/glsl/topk.glsl):
 * one dispatch of NSLICE workgroups, each selecting the largest logits of its
 * slice of the row, the last of them to finish merging their lists. */
#include "codegen.h"

#include <stdio.h>

#include "plan.h"

/* Most keys a thread holds in registers: a 4-bit field of a thread's
 * histogram counts them (backend/glsl/topk.glsl). */
#define TOPK_MAX_REG 15

typedef struct topk_shape {
    int64_t wg, per, slice, nslice, reg;
} topk_shape;

/* Both stages run the same eight barrier-separated passes over keys in
 * registers, so their cost is about a pass's fixed cost plus the keys a
 * thread holds: PER in stage 1 (a slice), NSLICE * K / WG in the merge.
 * Slices of about sqrt(V * K) logits balance the two (151936 logits: 46
 * slices of 3328 and 2944 candidates to merge, 13 and 12 keys a thread for
 * 256 threads). Larger vocabularies take larger workgroups. */
static bool topk_shape_for(int64_t V, topk_shape *s) {
    int64_t want = 1;
    while (want * want < V * ZPLAN_TOPK_K)
        want++;
    for (int64_t wg = 256; wg <= 1024; wg *= 2) {
        int64_t per = (want + wg - 1) / wg;
        s->wg = wg;
        s->per = per < 1 ? 1 : per > TOPK_MAX_REG ? TOPK_MAX_REG : per;
        s->slice = s->wg * s->per;
        s->nslice = (V + s->slice - 1) / s->slice;
        int64_t merge = (s->nslice * ZPLAN_TOPK_K + wg - 1) / wg;
        s->reg = merge > s->per ? merge : s->per;
        if (s->reg <= TOPK_MAX_REG) return true;
    }
    return false;
}

zstatus zcg_topk(const zir_graph *g, const zcg_opts *o, zarena *a, zcg_kernel *out, zdiag *d) {
    int64_t V = g->hp.n_vocab;
    topk_shape s;
    if (V < 1 || !topk_shape_for(V, &s))
        return zdiag_set(d, ZE_UNSUPPORTED,
                         "codegen: top-k of %lld logits: at most about 3.6 million fit the merge",
                         (long long)V);
    int64_t scr_words = 4 + 2 * s.nslice + 2 * s.nslice * ZPLAN_TOPK_CAP;
    const char *defs[] = {"N_VOCAB",  zcg_i64(a, V),
                          "TOPK_K",   zcg_i64(a, ZPLAN_TOPK_K),
                          "TOPK_CAP", zcg_i64(a, ZPLAN_TOPK_CAP),
                          "WG",       zcg_i64(a, s.wg),
                          "PER",      zcg_i64(a, s.per),
                          "SLICE",    zcg_i64(a, s.slice),
                          "NSLICE",   zcg_i64(a, s.nslice),
                          "REG",      zcg_i64(a, s.reg),
                          "BATCH",    o->batch ? "1" : "0",
                          /* a row's record and scratch words: the arrival counter, each slice's
                           * (t_g, c_g) and its list of TOPK_CAP (id, bits) pairs */
                          "TOPK_WORDS", zcg_i64(a, ZPLAN_TOPK_BYTES / 4),
                          "SCR_WORDS",  zcg_i64(a, scr_words),
                          NULL};
    const char *files[] = {"topk", NULL};
    /* The batch schedule selects every row, each into its own record and
     * scratch (grid y: the step's rows); the others the last row alone. */
    int64_t rows = o->batch ? o->max_tokens : 1;
    *out = (zcg_kernel){.n_bind = 3, .groups = {{0, s.nslice, 1}, {o->batch ? 1 : 0, o->batch ? 0 : 1, 1}, {0, 1, 1}}};
    snprintf(out->name, sizeof out->name, "topk%d_v%lld_s%lld%s", ZPLAN_TOPK_K, (long long)V,
             (long long)s.nslice, o->batch ? "_rows" : "");
    out->bind[0] = (zcg_binding){.value = g->logits};
    out->bind[1] = (zcg_binding){.special = ZCG_BIND_TOPK, .written = true};
    /* SCR_WORDS a row (backend/glsl/topk.glsl) */
    out->bind[2] = (zcg_binding){
        .scratch_bytes = 4 * (uint64_t)rows * (uint64_t)scr_words,
        .written = true};
    if (!(out->glsl = zcg_compose(a, defs, files, o))) return zdiag_set(d, ZE_NOMEM, "out of memory");
    return ZOK;
}
