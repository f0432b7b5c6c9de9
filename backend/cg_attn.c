/* Attention kernels: the staged ops (scores, causal softmax, value mix: the
 * baseline, one dispatch each) and the fused ZKT_ATTENTION kernel (flash
 * attention with online softmax; backend/glsl/attention.glsl explains it),
 * which decode runs as attn_decode.glsl and prefill, on targets with matrix
 * units, as attn_cm.glsl (fp16 fragment products).
 * P = pos + T is known only at run time, so grids never scale with it:
 * workgroups loop over the cached positions instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

#define MAX_GRID_Y   65535
#define FA_WG        128 /* invocations of the fused kernel */
#define FA_BK_MAX    64  /* keys per block, before the shared-memory budget halves it */
#define FA_BK_MIN    8
#define FA_LANES_MAX 4

static zstatus unsupported(zdiag *d, const zir_node *n, const char *why) {
    return zdiag_set(d, ZE_UNSUPPORTED, "codegen: %s '%s': %s", zir_ops[n->op].name, n->out->name, why);
}

static void bind(zcg_kernel *k, const zir_value *v, bool written) {
    k->bind[k->n_bind++] = (zcg_binding){.value = v, .written = written};
}

static void bind_scratch(zcg_kernel *k, uint64_t bytes) {
    k->bind[k->n_bind++] = (zcg_binding){.value = NULL, .scratch_bytes = bytes, .written = true};
}

/* Geometry shared by every attention op. */
typedef struct geom {
    int64_t H, Hkv, D;
} geom;

/* q or an output [T, H, D]. */
static bool is_thd(const zir_value *v) {
    return v->rank == 3 && v->shape[0] == ZDIM_T && v->shape[1] > 0 && v->shape[2] > 0;
}

/* A cache view [P, Hkv, D]. */
static bool is_cache_view(const zir_value *v, int64_t D) {
    return v->rank == 3 && v->shape[0] == ZDIM_P && v->shape[1] > 0 && v->shape[2] == D;
}

/* Scores or probabilities [H, T, P]. */
static bool is_htp(const zir_value *v) {
    return v->rank == 3 && v->shape[0] > 0 && v->shape[1] == ZDIM_T && v->shape[2] == ZDIM_P;
}

static zstatus check_geom(const zir_node *n, const zir_value *q, const zir_value *kv, geom *gm, zdiag *d) {
    if (!is_thd(q) || !is_cache_view(kv, q->shape[2]))
        return unsupported(d, n, "expected q [T, H, D] and a cache view [P, Hkv, D]");
    *gm = (geom){q->shape[1], kv->shape[1], q->shape[2]};
    if (gm->H % gm->Hkv) return unsupported(d, n, "heads are not a multiple of the kv heads");
    return ZOK;
}

/* Grid of one workgroup per (head, tile of qt tokens). */
static void head_tile_grid(zcg_kernel *k, int64_t H, int64_t qt) {
    k->groups[0] = (zcg_affine){0, H, 1};
    k->groups[1] = (zcg_affine){1, 0, qt};
    k->groups[2] = (zcg_affine){0, 1, 1};
}

static zstatus compose(zcg_kernel *k, zarena *a, const char *const *defs, const char *const *files,
                       const zcg_opts *o, zdiag *d) {
    k->glsl = zcg_compose(a, defs, files, o);
    if (!k->glsl) return zdiag_set(d, ZE_NOMEM, "codegen: cannot compose kernel '%s'", k->name);
    return ZOK;
}

/* How a kernel tiles attention (attn_tile.glsl explains each field). */
typedef struct tiling {
    int64_t wg, qt, bk, ds, sc_n, mix_rows, mix_cols, mix_rowstep, lanes, split, max_qtiles, smem;
} tiling;

typedef enum tile_use { USE_FUSED, USE_SCORES, USE_MIX } tile_use;

/* Invocations: a multiple of D below 128, else 128 when it divides D, so
 * that an invocation owns whole columns of the output. */
static bool pick_wg(int64_t D, int64_t *wg) {
    *wg = D < FA_WG ? D * (FA_WG / D) : D % FA_WG == 0 ? FA_WG : D;
    return D > 0 && *wg <= 1024;
}

static void derive(tiling *t, int64_t D) {
    int64_t pairs = t->qt * t->bk;
    t->ds = pairs >= t->wg ? 1 : t->wg / pairs;
    t->sc_n = t->ds > 1 ? 1 : (pairs + t->wg - 1) / t->wg;
    t->mix_cols = D >= t->wg ? D / t->wg : 1;
    t->mix_rowstep = D >= t->wg ? 1 : t->wg / D;
    t->mix_rows = (t->qt + t->mix_rowstep - 1) / t->mix_rowstep;
    /* Lanes per softmax row: each level of their tree costs a barrier, and a
     * lane's serial share of the BK keys costs less, so a few lanes suffice. */
    t->lanes = 1;
    while (t->lanes < FA_LANES_MAX && t->lanes * 2 * t->qt <= t->wg && t->lanes * 2 <= t->bk)
        t->lanes *= 2;
}

static int64_t smem_floats(const tiling *t, int64_t D, tile_use u) {
    int64_t q = t->qt * D, k = t->bk * (D + 1) + (t->ds > 1 ? t->wg : 0), v = t->bk * D, s = t->qt * t->bk;
    if (u == USE_SCORES) return q + k + s;
    if (u == USE_MIX) return v + s;
    return q + k + v + s + t->qt * t->lanes + 3 * t->qt + 1;
}

/* The largest key block (a power of two) whose tiles fit the target's
 * shared memory, halving the query tile when even FA_BK_MIN keys do not
 * fit beside it (the tile is a tuning choice; results do not depend on it). */
static bool pick_tiling(int64_t qt, int64_t D, tile_use u, const zcg_opts *o, tiling *t) {
    memset(t, 0, sizeof *t);
    if (!pick_wg(D, &t->wg)) return false;
    int64_t budget = o->target ? o->target->smem_bytes : 16384;
    for (t->qt = qt < 1 ? 1 : qt > FA_WG ? FA_WG : qt; t->qt >= 1; t->qt /= 2)
        for (t->bk = FA_BK_MAX; t->bk >= FA_BK_MIN; t->bk /= 2) {
            derive(t, D);
            t->smem = 4 * smem_floats(t, D, u);
            if (t->smem <= budget) return true;
        }
    return false;
}

static const char *u64s(zarena *a, int64_t v) {
    return zarena_printf(a, "%lldu", (long long)v);
}

/* The #defines of attn_tile.glsl, plus extra (NULL-terminated pairs). */
static const char **tile_defs(zarena *a, const geom *gm, const tiling *t, float scale,
                              const char *const *extra) {
    const char *base[] = {"H",           zcg_i64(a, gm->H),
                          "HKV",         zcg_i64(a, gm->Hkv),
                          "D",           zcg_i64(a, gm->D),
                          "QT",          u64s(a, t->qt),
                          "BK",          u64s(a, t->bk),
                          "WG",          zcg_i64(a, t->wg),
                          "DS",          zcg_i64(a, t->ds),
                          "SC_N",        zcg_i64(a, t->sc_n),
                          "SCALE",       zarena_printf(a, "float(%.9g)", scale),
                          "MIX_ROWS",    u64s(a, t->mix_rows),
                          "MIX_COLS",    u64s(a, t->mix_cols),
                          "MIX_ROWSTEP", u64s(a, t->mix_rowstep),
                          NULL};
    int nb = 0, ne = 0;
    while (base[nb])
        nb++;
    while (extra && extra[ne])
        ne++;
    const char **defs = zarena_array(a, (size_t)(nb + ne + 1), sizeof *defs);
    if (!defs) return NULL;
    memcpy(defs, base, sizeof(char *) * (size_t)nb);
    if (ne) memcpy(defs + nb, extra, sizeof(char *) * (size_t)ne);
    return defs;
}

/* Staged kernels tile queries too, so that a key block serves QT queries;
 * decode has one. */
static int64_t staged_qt(const zcg_opts *o) {
    return o->phase == ZPH_DECODE ? 1 : 16;
}

static zstatus gen_scores(const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *k, zdiag *d) {
    geom gm;
    tiling t;
    zstatus s = check_geom(n, n->in[0], n->in[1], &gm, d);
    if (s) return s;
    if (!pick_tiling(staged_qt(o), gm.D, USE_SCORES, o, &t))
        return unsupported(d, n, "tiles exceed shared memory");
    snprintf(k->name, sizeof k->name, "attn_scores_h%lld_kv%lld_d%lld_q%lld", (long long)gm.H,
             (long long)gm.Hkv, (long long)gm.D, (long long)t.qt);
    bind(k, n->in[0], false);
    bind(k, n->in[1], false);
    bind(k, n->out, true);
    head_tile_grid(k, gm.H, t.qt);
    const char *const *defs = tile_defs(a, &gm, &t, n->attr.scale, NULL);
    const char *files[] = {"kv_io", "attn_scores", "attn_tile", "attn_scores_main", NULL};
    return defs ? compose(k, a, defs, files, o, d) : zdiag_set(d, ZE_NOMEM, "codegen: out of memory");
}

static zstatus gen_softmax(const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *k, zdiag *d) {
    if (!is_htp(n->in[0])) return unsupported(d, n, "expected scores of shape [H, T, P]");
    int64_t H = n->in[0]->shape[0];
    snprintf(k->name, sizeof k->name, "softmax_causal_h%lld", (long long)H);
    bind(k, n->in[0], false);
    bind(k, n->out, true);
    head_tile_grid(k, H, 1);
    const char *defs[] = {"WG", "128", NULL};
    const char *files[] = {"attn_reduce", "attn_softmax", NULL};
    return compose(k, a, defs, files, o, d);
}

static zstatus gen_mix(const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *k, zdiag *d) {
    geom gm;
    tiling t;
    zstatus s = check_geom(n, n->out, n->in[1], &gm, d);
    if (s) return s;
    if (!is_htp(n->in[0]) || n->in[0]->shape[0] != gm.H)
        return unsupported(d, n, "expected probabilities of shape [H, T, P]");
    if (!pick_tiling(staged_qt(o), gm.D, USE_MIX, o, &t))
        return unsupported(d, n, "tiles exceed shared memory");
    snprintf(k->name, sizeof k->name, "attn_mix_h%lld_kv%lld_d%lld_q%lld", (long long)gm.H, (long long)gm.Hkv,
             (long long)gm.D, (long long)t.qt);
    bind(k, n->in[0], false);
    bind(k, n->in[1], false);
    bind(k, n->out, true);
    head_tile_grid(k, gm.H, t.qt);
    const char *const *defs = tile_defs(a, &gm, &t, 1.0f, NULL);
    const char *files[] = {"kv_io", "attn_mix", "attn_tile", "attn_mix_main", NULL};
    return defs ? compose(k, a, defs, files, o, d) : zdiag_set(d, ZE_NOMEM, "codegen: out of memory");
}

/* The body ends in scores, softmax_causal, mix, each feeding the next
 * (before them: the head preparation fuse-attn-head folded in). */
static bool fa_body(const zir_node *n) {
    int b = n->n_body - 3;
    return b >= 0 && n->body[b]->op == ZOP_ATTN_SCORES && n->body[b + 1]->op == ZOP_SOFTMAX_CAUSAL &&
           n->body[b + 2]->op == ZOP_ATTN_MIX && n->body[b + 1]->in[0] == n->body[b]->out &&
           n->body[b + 2]->in[0] == n->body[b + 1]->out && n->body[b + 2]->out == n->out;
}

/* ---- decode: one token, heads prepared in the prologue (attn_decode.glsl) */

#define DEC_WG        128 /* invocations of the decode kernel */
#define DEC_UNROLL    2   /* keys per lane group a trip, their loads in flight together */
#define DEC_WG_PER_CU 2   /* decode workgroups per compute unit, at most, when the context splits */
#define DEC_MIN_TRIPS 4   /* trips of keys a chunk has at least */

/* The head preparation in kernel n's body that produces v: [rms_norm]
 * [rope] [kv_store], walked back from v; x is the value it starts from
 * (produced outside the body). */
typedef struct head_prep {
    const zir_node *norm, *rope, *store;
    const zir_value *x;
    int n;
} head_prep;

static const zir_node *body_producer(const zir_node *k, const zir_value *v) {
    const zir_node *p = v ? v->producer : NULL;
    return p && p->parent == k ? p : NULL;
}

static void head_chain(const zir_node *k, const zir_value *v, head_prep *h) {
    memset(h, 0, sizeof *h);
    const zir_node *p = body_producer(k, v);
    if (p && p->op == ZOP_KV_STORE) h->store = p, v = p->in[0], p = body_producer(k, v), h->n++;
    if (p && p->op == ZOP_ROPE) h->rope = p, v = p->in[0], p = body_producer(k, v), h->n++;
    if (p && p->op == ZOP_RMS_NORM) h->norm = p, v = p->in[0], h->n++;
    h->x = v;
}

static bool f32_vector(const zir_value *v, int64_t n) {
    return v && v->role == ZR_WEIGHT && v->dtype == ZT_F32 && v->rank == 1 && v->shape[0] == n &&
           v->nbytes >= (uint64_t)n * 4;
}

/* Whether the decode kernel can run attention kernel n (the pass asks the
 * same of the graph: one token, D a multiple of 8). */
static bool decode_fits(const zir_node *n, const geom *gm) {
    return n->kp.token_tile <= 1 && gm->D % 8 == 0 && gm->D / 8 <= DEC_WG;
}

/* How the decode kernel lays out its lanes (attn_decode.glsl): lanes per
 * key, keys per lane group a trip, q rows per merge pass, workgroups per
 * kv head and q part at most, keys per workgroup at least, and the
 * workgroups that share a kv head's q heads (qsplit, of gqw heads each). */
typedef struct dec_layout {
    int64_t lpk, unroll, rp, split, min_chunk, qsplit, gqw;
} dec_layout;

/* Workgroups per kv head's q heads: one per q head from four q heads a
 * kv head up, else 1. One workgroup for all eight of Qwen3-30B-A3B's (32 q
 * heads, 4 kv heads, D 128) took ~29 us a layer on the H200 against ~16.6
 * us at Qwen3-8B's four (32/8), with 228 registers a lane and 4-8
 * workgroups for the whole GPU at short contexts, and no setting of the
 * other knobs moved it. More workgroups read the kv head's keys and values
 * more times (from L2, as they run side by side) but cut the registers and
 * the serial work a key: run 58 (H100, the A3B's 12 layers) measured the
 * decode step at 1228 us with 2 parts of four heads, 1164 with 4 and 1125
 * with 8 (tg128 859 -> 908 -> 941); run 60 the 8B's tg128 at 286.3 with
 * one workgroup of its four heads and 301.3 with four. Below four heads a
 * kv head it is unmeasured and stays 1. ZINC_ATTN_QSPLIT=N (dividing GQ)
 * sets it. */
static int64_t decode_qsplit(int64_t gq) {
    return zcg_knob("ZINC_ATTN_QSPLIT", 1, gq, gq >= 4 ? gq : 1);
}

/* Lanes per key: a whole row of 16-byte slices, one a lane (D/8 lanes for
 * an f16 cache), as long as the target's subgroup holds them; a power of
 * two, for the shuffle tree. ZINC_ATTN_LPK=N picks another (D = 128: 16
 * lanes of one slice or 8 of two), to time both. Splits: the cost model's
 * (ceil(n_cu / kv_heads) workgroups per kv head when the context splits)
 * times DEC_WG_PER_CU, since one workgroup of four subgroups is too little
 * to hide the memory latency of a compute unit; ZINC_ATTN_SPLIT=N sets it;
 * each q part (decode_qsplit) splits its context alike. A chunk has at
 * least DEC_MIN_TRIPS trips of keys (ZINC_ATTN_MIN_CHUNK=N keys instead): a
 * shorter context runs fewer, fuller workgroups, and the combine has fewer
 * partials. */
static bool decode_layout(const zir_node *n, const geom *gm, const zcg_opts *o, int64_t rp_budget,
                          dec_layout *l) {
    int64_t c8 = gm->D / 8, gq = gm->H / gm->Hkv;
    int64_t sg = o->target && o->target->subgroup > 0 ? o->target->subgroup : 32, lpk = 1;
    while (c8 % (lpk * 2) == 0 && lpk * 2 <= sg)
        lpk *= 2;
    l->lpk = zcg_knob("ZINC_ATTN_LPK", 1, DEC_WG, lpk);
    if (c8 % l->lpk || (l->lpk & (l->lpk - 1))) return false;
    l->unroll = zcg_knob("ZINC_ATTN_UNROLL", 1, 8, DEC_UNROLL);
    l->split = n->kp.split > 1 ? zcg_knob("ZINC_ATTN_SPLIT", 2, 1024, n->kp.split * DEC_WG_PER_CU) : 1;
    l->min_chunk = zcg_knob("ZINC_ATTN_MIN_CHUNK", 1, 65536, DEC_MIN_TRIPS * (DEC_WG / l->lpk) * l->unroll);
    l->qsplit = decode_qsplit(gq);
    if (gq % l->qsplit) return false;
    int64_t gqw = l->gqw = gq / l->qsplit;
    /* shared floats: the prologue rows (the workgroup's q rows and the new
     * key), reduction slots, the combine's, and a merge entry per lane
     * group for rp rows */
    int64_t fixed = (gqw + 1) * gm->D + (gqw + 1) * DEC_WG;
    /* the combine's m and l of every chunk: at most a quarter of the budget */
    while (l->split > 2 && 4 * 2 * gqw * l->split > rp_budget / 4)
        l->split /= 2;
    if (l->split > 1) fixed += 2 * gqw * l->split;
    int64_t entry = (DEC_WG / l->lpk) * (gm->D + 2);
    for (l->rp = gqw; l->rp > 1 && (gqw % l->rp || 4 * (fixed + l->rp * entry) > rp_budget); l->rp--)
        ;
    return 4 * (fixed + l->rp * entry) <= rp_budget;
}

static const char *eps_lit(zarena *a, const zir_node *norm) {
    return norm ? zarena_printf(a, "float(%.9g)", norm->attr.eps) : "0.0";
}

static zstatus gen_decode(const zir_node *n, const geom *gm, const zcg_opts *o, zarena *a, zcg_kernel *k,
                          zdiag *d) {
    const zir_node *sc = n->body[n->n_body - 3], *mix = n->body[n->n_body - 1];
    head_prep qh, kh;
    head_chain(n, sc->in[0], &qh);
    head_chain(n, sc->in[1], &kh);
    if (qh.store || 3 + qh.n + kh.n != n->n_body || (kh.n && !kh.store))
        return unsupported(d, n, "expected [q: norm, rope] [k: norm, rope, kv_store] before the attention");
    int64_t D = gm->D, gq = gm->H / gm->Hkv;
    dec_layout lay;
    if (!decode_layout(n, gm, o, o->target ? o->target->smem_bytes : 16384, &lay))
        return unsupported(d, n,
                           "no decode lane layout: ZINC_ATTN_LPK is not a power of two dividing D/8, "
                           "ZINC_ATTN_QSPLIT does not divide the q heads of a kv head, "
                           "or the merge exceeds shared memory");
    if ((qh.norm && !f32_vector(qh.norm->in[1], D)) || (kh.norm && !f32_vector(kh.norm->in[1], D)))
        return unsupported(d, n, "expected f32 head norm weights as long as the head");
    if (qh.rope && kh.rope &&
        (memcmp(&qh.rope->attr.rope, &kh.rope->attr.rope, sizeof qh.rope->attr.rope) ||
         qh.rope->in[1] != kh.rope->in[1]))
        return unsupported(d, n, "q and k rotate differently");
    if (kh.store && !is_thd(kh.x)) return unsupported(d, n, "expected the new k rows as [T, Hkv, D]");
    const char *defs[96];
    int nd = 0;
    const zir_node *rope = qh.rope ? qh.rope : kh.rope;
    zstatus s = rope ? zcg_rope_defs(rope, D, a, defs, &nd, d) : ZOK;
    if (s) return s;
    if (!rope) defs[nd++] = "D", defs[nd++] = zcg_i64(a, D);
    int64_t split = lay.split;
    /* Bindings in order, each numbered for the kernel (1-based: 0 is the step). */
    bind(k, qh.x, false);
    defs[nd++] = "B_Q", defs[nd++] = zcg_i64(a, k->n_bind);
    if (qh.norm) {
        bind(k, qh.norm->in[1], false);
        defs[nd++] = "B_QNW", defs[nd++] = zcg_i64(a, k->n_bind);
    }
    if (kh.store) {
        bind(k, kh.x, false);
        defs[nd++] = "B_KX", defs[nd++] = zcg_i64(a, k->n_bind);
        if (kh.norm) {
            bind(k, kh.norm->in[1], false);
            defs[nd++] = "B_KNW", defs[nd++] = zcg_i64(a, k->n_bind);
        }
        bind(k, kh.store->in[1], true); /* the cache itself: its new row is written here */
    } else {
        bind(k, sc->in[1], false);
    }
    defs[nd++] = "B_K", defs[nd++] = zcg_i64(a, k->n_bind);
    bind(k, mix->in[1], false);
    defs[nd++] = "B_V", defs[nd++] = zcg_i64(a, k->n_bind);
    bind(k, n->out, true);
    defs[nd++] = "B_O", defs[nd++] = zcg_i64(a, k->n_bind);
    /* Partials and a ticket counter per (kv head, q part). */
    uint64_t parts = (uint64_t)gm->Hkv * (uint64_t)lay.qsplit;
    if (split > 1) {
        bind_scratch(k, parts * (uint64_t)split * (uint64_t)(lay.gqw * (D + 2)) * 4);
        defs[nd++] = "B_PART", defs[nd++] = zcg_i64(a, k->n_bind);
        bind_scratch(k, parts * 4);
        defs[nd++] = "B_CNT", defs[nd++] = zcg_i64(a, k->n_bind);
    }
    const char *kv[] = {"H",         zcg_i64(a, gm->H),
                        "HKV",       zcg_i64(a, gm->Hkv),
                        "GQ",        u64s(a, gq),
                        "QSPLIT",    u64s(a, lay.qsplit),
                        "WG",        zcg_i64(a, DEC_WG),
                        "LPK",       u64s(a, lay.lpk),
                        "UNROLL",    u64s(a, lay.unroll),
                        "RP",        u64s(a, lay.rp),
                        "SPLIT",     zcg_i64(a, split),
                        "MIN_CHUNK", u64s(a, lay.min_chunk),
                        "SCALE",     zarena_printf(a, "float(%.9g)", sc->attr.scale),
                        "QNORM",     qh.norm ? "1" : "0",
                        "QROPE",     qh.rope ? "1" : "0",
                        "KHEAD",     kh.store ? "1" : "0",
                        "KNORM",     kh.norm ? "1" : "0",
                        "KROPE",     kh.rope ? "1" : "0",
                        "QEPS",      eps_lit(a, qh.norm),
                        "KEPS",      eps_lit(a, kh.norm)};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        defs[nd++] = kv[i];
    defs[nd] = NULL;
    char qpart[24] = "";
    if (lay.qsplit > 1) snprintf(qpart, sizeof qpart, "_q%lld", (long long)lay.qsplit);
    snprintf(k->name, sizeof k->name, "attn_decode_h%lld_kv%lld_d%lld_l%lldu%lld%s%s%s%s", (long long)gm->H,
             (long long)gm->Hkv, (long long)D, (long long)lay.lpk, (long long)lay.unroll, qpart,
             split > 1 ? "+split" : "", qh.n ? "+qhead" : "", kh.n ? "+khead" : "");
    k->groups[0] = (zcg_affine){0, gm->Hkv * lay.qsplit * split, 1};
    k->groups[1] = (zcg_affine){0, 1, 1};
    k->groups[2] = (zcg_affine){0, 1, 1};
    static const char *const with_rope[] = {"rope_lib", "attn_decode", NULL};
    static const char *const without[] = {"attn_decode", NULL};
    return compose(k, a, defs, rope ? with_rope : without, o, d);
}

/* ---- prefill on the matrix units (attn_cm.glsl) ---------------------------- */

/* The tile: BR query rows in BR / 16 subgroups of 32, BC keys a block. */
enum { CM_SG = 32, CM_BR = 64, CM_GQ_MAX = 16 };
typedef struct cm_tile {
    int64_t br, bc, kv_len, smem;
} cm_tile;

/* Shared memory (attn_cm.glsl): the K and V blocks (or the Q tile before
 * them) in padded fp16 rows, then per subgroup an S tile (fp32) and a P
 * tile (fp16), and a float per row. */
static void cm_size(cm_tile *c, int64_t D) {
    int64_t ks8 = D / 8 + 1, nsg = c->br / 16, kv = 2 * c->bc * ks8, q = c->br * ks8;
    c->kv_len = kv > q ? kv : q;
    c->smem = 16 * (c->kv_len + nsg * 16 * (c->bc / 4 + 1) + nsg * 16 * (c->bc / 8 + 1)) + 4 * c->br;
}

/* 64 rows, and the longest key block (64, else 32, 16) that fits: at head
 * size 128 on 48 KiB that is 32 (31 KiB). ZINC_ATTN_CM=0 keeps the scalar
 * kernel; ZINC_ATTN_CM_LAYOUT=br,bc (multiples of 16, br <= 256) replaces
 * the tile, to measure others. */
static bool cm_pick(const zcg_opts *o, int64_t D, cm_tile *c) {
    const char *e = getenv("ZINC_ATTN_CM_LAYOUT");
    int br, bc;
    if (e && sscanf(e, "%d,%d", &br, &bc) == 2 && br >= 16 && br <= 256 && br % 16 == 0 && bc >= 16 &&
        bc <= 128 && bc % 16 == 0) {
        *c = (cm_tile){.br = br, .bc = bc};
        cm_size(c, D);
        return c->smem <= o->target->smem_bytes;
    }
    for (*c = (cm_tile){.br = CM_BR, .bc = 64}; c->bc >= 16; c->bc /= 2) {
        cm_size(c, D);
        if (c->smem <= o->target->smem_bytes) return true;
    }
    return false;
}

/* Prefill attention goes to the matrix units where the target has them
 * with subgroups of 32 (like the GEMM), the heads are a multiple of 16 up
 * to 128 (Q and the output stay in registers) and a kv head's query heads
 * fit a tile. */
static bool use_cm(const zir_node *n, const geom *gm, const zcg_opts *o, cm_tile *c) {
    int64_t gq = gm->H / gm->Hkv;
    if (zcg_knob_off("ZINC_ATTN_CM")) return false;
    return o->phase == ZPH_PREFILL && !o->batch && o->target->coopmat && o->target->subgroup == CM_SG && n->n_body == 3 &&
           n->kp.split <= 1 && gm->D % 16 == 0 && gm->D <= 128 && gq <= CM_GQ_MAX && cm_pick(o, gm->D, c) &&
           gq <= c->br;
}

static zstatus gen_fused_cm(const zir_node *n, const geom *gm, const cm_tile *c, const zcg_opts *o, zarena *a,
                            zcg_kernel *k, zdiag *d) {
    const zir_node *sc = n->body[0], *mix = n->body[2];
    int64_t gq = gm->H / gm->Hkv, tq = c->br / gq;
    snprintf(k->name, sizeof k->name, "attention_cm_h%lld_kv%lld_d%lld_q%lld_b%lld", (long long)gm->H,
             (long long)gm->Hkv, (long long)gm->D, (long long)tq, (long long)c->bc);
    bind(k, sc->in[0], false);
    bind(k, sc->in[1], false);
    bind(k, mix->in[1], false);
    bind(k, n->out, true);
    k->groups[0] = (zcg_affine){0, gm->Hkv, 1};
    k->groups[1] = (zcg_affine){1, 0, tq};
    k->groups[2] = (zcg_affine){0, 1, 1};
    const char *defs[] = {"H",      zcg_i64(a, gm->H),
                          "HKV",    zcg_i64(a, gm->Hkv),
                          "D",      zcg_i64(a, gm->D), /* an int: kv_io.glsl tests it in #if */
                          "GQ",     u64s(a, gq),
                          "TQ",     u64s(a, tq),
                          "ROWS",   u64s(a, tq * gq),
                          "NSG",    u64s(a, c->br / 16),
                          "BR",     u64s(a, c->br),
                          "BC",     u64s(a, c->bc),
                          "WG",     zcg_i64(a, c->br / 16 * CM_SG), /* an int: a layout qualifier */
                          "KV_LEN", u64s(a, c->kv_len),
                          "SCALE",  zarena_printf(a, "float(%.9g)", sc->attr.scale),
                          "TAU",    "8.0",
                          NULL};
    const char *files[] = {"kv_io", "attn_cm", NULL};
    return compose(k, a, defs, files, o, d);
}

static zstatus gen_fused(const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *k, zdiag *d) {
    if (!fa_body(n)) return unsupported(d, n, "expected a body of attn_scores, softmax_causal, attn_mix");
    const zir_node *sc = n->body[n->n_body - 3], *mix = n->body[n->n_body - 1];
    geom gm, gv;
    zstatus s = check_geom(n, sc->in[0], sc->in[1], &gm, d);
    if (!s) s = check_geom(n, mix->out, mix->in[1], &gv, d);
    if (s) return s;
    if (gv.H != gm.H || gv.Hkv != gm.Hkv || gv.D != gm.D)
        return unsupported(d, n, "q, k, v and the output disagree on heads or head_dim");
    if (o->phase == ZPH_DECODE && decode_fits(n, &gm)) return gen_decode(n, &gm, o, a, k, d);
    if (n->n_body != 3) return unsupported(d, n, "head preparation is fused only into decode attention");
    cm_tile c;
    if (use_cm(n, &gm, o, &c)) return gen_fused_cm(n, &gm, &c, o, a, k, d);
    /* Decode (one-token tiles): the query heads of a kv head share a tile,
     * so each key and value is read once for all of them (GQ rows). A batch
     * step's rows are tokens of different sequences: one-token tiles too. */
    int64_t tt = o->batch ? 1 : n->kp.token_tile;
    int64_t gq = tt <= 1 ? gm.H / gm.Hkv : 1;
    tiling t;
    if (!pick_tiling(tt * gq, gm.D, USE_FUSED, o, &t) || t.qt % gq) {
        gq = 1;
        if (!pick_tiling(tt, gm.D, USE_FUSED, o, &t))
            return unsupported(d, n, "a query tile and a key block exceed shared memory");
    }
    t.split = n->kp.split > 1 ? n->kp.split : 1;
    int64_t max_t = o->max_tokens > 0 ? o->max_tokens : 1, tq = t.qt / gq;
    t.max_qtiles = (max_t + tq - 1) / tq;
    snprintf(k->name, sizeof k->name, "attention_h%lld_kv%lld_d%lld_q%lld_b%lld%s%s", (long long)gm.H,
             (long long)gm.Hkv, (long long)gm.D, (long long)tq, (long long)t.bk, gq > 1 ? "_gqa" : "",
             t.split > 1 ? "+split" : "");
    bind(k, sc->in[0], false);
    bind(k, sc->in[1], false);
    bind(k, mix->in[1], false);
    bind(k, n->out, true);
    if (t.split > 1) {
        uint64_t slots = (uint64_t)(gm.H / gq) * (uint64_t)t.max_qtiles;
        bind_scratch(k, slots * (uint64_t)t.split * (uint64_t)(t.qt * (gm.D + 2)) * 4);
        bind_scratch(k, slots * 4);
    }
    k->groups[0] = (zcg_affine){0, gm.H / gq * t.split, 1};
    k->groups[1] = (zcg_affine){1, 0, tq};
    k->groups[2] = (zcg_affine){0, 1, 1};
    const char *extra[] = {"L",          u64s(a, t.lanes),      "SPLIT", zcg_i64(a, t.split),
                           "MAX_QTILES", u64s(a, t.max_qtiles), "GQ",    u64s(a, gq), NULL};
    const char *const *defs = tile_defs(a, &gm, &t, sc->attr.scale, extra);
    const char *files[] = {"kv_io", "attention", "attn_tile", "attention_main", NULL};
    return defs ? compose(k, a, defs, files, o, d) : zdiag_set(d, ZE_NOMEM, "codegen: out of memory");
}

zstatus zcg_attention(const zir_graph *g, const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *out,
                      zdiag *d) {
    (void)g;
    memset(out, 0, sizeof *out);
    if (o->max_tokens > MAX_GRID_Y) return unsupported(d, n, "steps of more than 65535 tokens");
    if (n->op == ZOP_KERNEL) {
        if (n->kp.tmpl == ZKT_ATTENTION) return gen_fused(n, o, a, out, d);
        return unsupported(d, n, "not an attention kernel");
    }
    if (o->batch) return unsupported(d, n, "staged attention has no batch form: expected fuse-attn in the pipeline");
    switch (n->op) {
    case ZOP_ATTN_SCORES: return gen_scores(n, o, a, out, d);
    case ZOP_SOFTMAX_CAUSAL: return gen_softmax(n, o, a, out, d);
    case ZOP_ATTN_MIX: return gen_mix(n, o, a, out, d);
    default: break;
    }
    return unsupported(d, n, "no attention kernel for this op");
}
