// attn_tile.glsl: the tiles attention works on, in shared memory, shared by
// the fused kernel (attention.glsl) and the staged scores and mix kernels.
// A workgroup owns QT queries of one head h; keys and values of its kv head
// h / (H/HKV) pass through in blocks of BK rows.
//
// Scores: S[r][j] = q[t0+r] . k[kb+j] * SCALE. With fewer scores than
// invocations (decode: one query) DS invocations share a dot product, each
// taking every DS-th element, and add up through shared memory; otherwise
// each invocation computes SC_N scores of one key at once, so the loop over
// D has SC_N independent multiply-adds per key element it loads.
// Mix: an invocation owns MIX_ROWS rows (r_base + m * MIX_ROWSTEP) of
// MIX_COLS columns (e_base + k * WG) of the [QT, D] output, so the value it
// loads from sv serves MIX_ROWS independent multiply-adds.
// Defines: H, HKV, D, QT, BK, WG, SCALE, DS, SC_N, MIX_ROWS, MIX_COLS,
// MIX_ROWSTEP; TILE_Q, TILE_K, TILE_V for the arrays a kernel uses.

#define NEG (-1.0e30) // "no key": finite, so exp(NEG - NEG) is 1, never NaN
// GQ query heads share a tile (the fused kernel in decode: the heads of one
// kv head, so its keys are read once for all of them): row r of the tile is
// token t0 + r / GQ of head h + r % GQ. The staged kernels keep one head.
#ifndef GQ
#define GQ 1u
#endif
const uint KSTRIDE = D + 1; // sk rows padded: rows j and j+1 sit in different banks
// The cache row of key 0: a batch tile's sequence slot (one token a tile).
#ifdef BATCH
uint kv_row0 = 0u;
#else
const uint kv_row0 = 0u;
#endif

#ifdef TILE_Q
shared float sq[QT * D];
#endif
#ifdef TILE_K
shared float sk[BK * KSTRIDE];
#if DS > 1
shared float sdot[WG];
#endif
#endif
#ifdef TILE_V
shared float sv[BK * D];
#endif
shared float ss[QT * BK]; // scores, then probabilities

#ifdef TILE_Q
// The tile's rows: tokens from t0 of heads h .. h+GQ-1 (zero past T).
void load_q(uint h, uint t0, uint tid) {
    for (uint i = tid; i < QT * D; i += WG) {
        uint r = i / D, t = t0 + r / GQ;
        float x = 0.0;
        if (t < step.T) x = float(q[(t * H + h + r % GQ) * D + i % D]);
        sq[i] = x;
    }
}
#endif

// Keys (and values) kb .. kb+BK-1 of kv head kvh, zero from kstop on:
// fetch_kv loads into registers, store_kv moves them to shared memory. The
// loops have a constant trip count and unroll, so all of an invocation's
// loads are in flight before the first store waits on one. (Fetching block
// i+1 while block i computes measured no better on an H200: it costs ~20
// registers and the decode timings did not move beyond their noise.)
#ifdef KV_VEC8
// Eight elements of a row per load: BK * D / 8 chunks over the workgroup.
const uint LOAD_N = (BK * D / 8u + WG - 1) / WG;
#ifdef TILE_K
float kreg[LOAD_N][8];
#endif
#ifdef TILE_V
float vreg[LOAD_N][8];
#endif

void fetch_kv(uint kb, uint kstop, uint kvh, uint tid) {
    [[unroll]] for (uint it = 0; it < LOAD_N; it++) {
        uint i = tid + it * WG, key = kb + i / (D / 8u), src = (((kv_row0 + key) * HKV + kvh) * D) / 8u + i % (D / 8u);
        bool ok = i < BK * D / 8u && key < kstop;
#ifdef TILE_K
        kreg[it] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        if (ok) kreg[it] = kv8(k, src);
#endif
#ifdef TILE_V
        vreg[it] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        if (ok) vreg[it] = kv8(v, src);
#endif
    }
}

void store_kv(uint tid) {
    [[unroll]] for (uint it = 0; it < LOAD_N; it++) {
        uint i = tid + it * WG, j = i / (D / 8u), c = (i % (D / 8u)) * 8u;
        if (i >= BK * D / 8u) break;
        [[unroll]] for (uint e = 0; e < 8u; e++) {
#ifdef TILE_K
            sk[j * KSTRIDE + c + e] = kreg[it][e];
#endif
#ifdef TILE_V
            sv[j * D + c + e] = vreg[it][e];
#endif
        }
    }
}
#else
const uint LOAD_N = (BK * D + WG - 1) / WG;
#ifdef TILE_K
float kreg[LOAD_N];
#endif
#ifdef TILE_V
float vreg[LOAD_N];
#endif

void fetch_kv(uint kb, uint kstop, uint kvh, uint tid) {
    [[unroll]] for (uint it = 0; it < LOAD_N; it++) {
        uint i = tid + it * WG, key = kb + i / D, src = ((kv_row0 + key) * HKV + kvh) * D + i % D;
        bool ok = i < BK * D && key < kstop;
#ifdef TILE_K
        kreg[it] = 0.0;
        if (ok) kreg[it] = float(k[src]);
#endif
#ifdef TILE_V
        vreg[it] = 0.0;
        if (ok) vreg[it] = float(v[src]);
#endif
    }
}

void store_kv(uint tid) {
    [[unroll]] for (uint it = 0; it < LOAD_N; it++) {
        uint i = tid + it * WG;
        if (i >= BK * D) break;
#ifdef TILE_K
        sk[(i / D) * KSTRIDE + i % D] = kreg[it];
#endif
#ifdef TILE_V
        sv[i] = vreg[it];
#endif
    }
}
#endif

void load_kv(uint kb, uint kstop, uint kvh, uint tid) {
    fetch_kv(kb, kstop, kvh, tid);
    store_kv(tid);
}

#ifdef TILE_K
float masked(uint i, float dot, uint kb, uint kstop, uint t0, bool causal) {
    uint t = t0 + i / BK / GQ, key = kb + i % BK;
    bool ok = t < step.T && key < kstop && (!causal || key <= ROW_POS(t));
    return ok ? dot * SCALE : NEG;
}

// ss = the score block; causal: query t sees keys 0 ..= pos + t.
void block_scores(uint kb, uint kstop, uint t0, bool causal, uint tid) {
#if DS > 1
    uint pair = tid / DS, part = tid % DS;
    float a0 = 0.0, a1 = 0.0; // two chains: the loop is short and latency-bound
    if (pair < QT * BK) {
        uint qo = (pair / BK) * D, ko = (pair % BK) * KSTRIDE, e = part;
        for (; e + DS < D; e += 2u * DS) {
            a0 += sq[qo + e] * sk[ko + e];
            a1 += sq[qo + e + DS] * sk[ko + e + DS];
        }
        if (e < D) a0 += sq[qo + e] * sk[ko + e];
    }
    sdot[tid] = a0 + a1;
    barrier();
    if (pair < QT * BK && part == 0u) {
        float s = 0.0;
        for (uint u = 0; u < DS; u++) s += sdot[tid + u];
        ss[pair] = masked(pair, s, kb, kstop, t0, causal);
    }
#else
    float acc[SC_N];
    [[unroll]] for (uint c = 0; c < SC_N; c++) acc[c] = 0.0;
    for (uint e = 0; e < D; e++) {
        [[unroll]] for (uint c = 0; c < SC_N; c++) {
            uint i = min(tid + c * WG, QT * BK - 1u); // past the end: a harmless duplicate
            acc[c] += sq[(i / BK) * D + e] * sk[(i % BK) * KSTRIDE + e];
        }
    }
    [[unroll]] for (uint c = 0; c < SC_N; c++) {
        uint i = tid + c * WG;
        if (i < QT * BK) ss[i] = masked(i, acc[c], kb, kstop, t0, causal);
    }
#endif
}
#endif

#ifdef TILE_V
const uint ACC_N = MIX_ROWS * MIX_COLS;
uint mix_row(uint m, uint tid) { return (D >= WG ? 0u : tid / D) + m * MIX_ROWSTEP; }
uint mix_col(uint c, uint tid) { return (D >= WG ? tid : tid % D) + c * WG; }

// acc[m][c] += sum_j ss[row][j] * sv[j][col], in key order.
void block_mix(inout float acc[ACC_N], uint tid) {
    for (uint j = 0; j < BK; j++) {
        float vx[MIX_COLS];
        [[unroll]] for (uint c = 0; c < MIX_COLS; c++) vx[c] = sv[j * D + mix_col(c, tid)];
        [[unroll]] for (uint m = 0; m < MIX_ROWS; m++) {
            uint r = min(mix_row(m, tid), QT - 1u); // a row past QT computes a copy, never written out
            float p = ss[r * BK + j];
            [[unroll]] for (uint c = 0; c < MIX_COLS; c++) acc[m * MIX_COLS + c] += p * vx[c];
        }
    }
}
#endif
