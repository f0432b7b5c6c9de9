// matmul_gemvn.glsl: y[t, n] = x[t] . W[n] for the few rows of a batch
// step (zincc --parallel N, each row a token of its own sequence): a
// workgroup reads its weight rows once for NTOK token rows (rows
// NTOK * gl_WorkGroupID.y ..), with the optional RMSNorm prologue, gate/up
// SwiGLU (GLU), the add or KV-store epilogue of matmul_io.glsl, or the
// segments of a matmul_rows kernel (SEGS: q, k and v over their
// concatenated rows, gemv_segs.glsl).
//
// The decode GEMV (matmul_gemv.glsl) streams the weights once per token;
// the GEMMs stage 16-64-token tiles that a step of a few rows leaves
// mostly empty. Here a subgroup owns RS rows and walks K in the groups of
// gemv_groups.glsl: each lane dequantizes a group of each of its rows once
// (the norm weight folded in), then for each token loads that group of x
// and adds the products to the token's sums, in registers. x comes from
// L1: NTOK x K floats do not fit shared memory.
//
// IDOT (GMODE 12 or 14; the matmuls' attr.gemv_q8): x was quantized once
// for the step by the kernel's quantizing pass (gemvn_quant.glsl, the
// decode GEMV's q8_1: d = amax/127 per 32 elements, q = round-to-even(x/d),
// x times the norm weight first) into gemvn_xq.glsl's layout, which every
// workgroup reads through L1. A lane unpacks a weight group of each of its
// rows once (q4_K: its nibbles masked into words; q6_K: its 6-bit values
// minus 32 as signed bytes) and meets each token's int8 x with packed
// 4x8-bit dot products (zdot4, idot.glsl). The interpreter quantizes x the
// same way (ir/interp.c), so the kernel is still checked element by element.
//
// A token's sums are formed in one order whatever the other rows (a
// lane's groups in K order, then one subgroupAdd; its x quantized alone),
// and rows past T are skipped by a branch uniform in the workgroup: a
// sequence alone gives the bits it gives among others
// (tests/unit/test_batch.c).
//
// Defines: WG (threads), NTOK (token rows per workgroup), RS (weight rows per subgroup),
// ROWS_WG (per workgroup), GMODE, IDOT, GLU (W1 is the up projection:
// y = silu(x.W0) * (x.W1)), W0_TYPE/W0_ROWB, W1_TYPE/W1_ROWB; SEGS, N0..N3,
// WG_SEG0..3, W2_TYPE/W2_ROWB, W3_TYPE/W3_ROWB and each segment's epilogue
// for the segments (gemv_segs.glsl); ABLATE (timing only, the values
// wrong: ZINC_GEMVN_ABLATE, IDOT): 1 one token's x for every token
// (no x loads but one), 2 no x and no products (the weights' loads only).

layout(local_size_x = WG) in;

#ifndef ABLATE
#define ABLATE 0
#endif

#ifndef IDOT
#define IDOT 0
#endif

#if GLU
#define NMAT 2u
#else
#define NMAT 1u
#endif

#if IDOT
// ---- int8 x --------------------------------------------------------------

#if GMODE == 12
// A group of a q4_K row: its two runs' nibbles as bytes (lo: sub-block 2p,
// hi: 2p+1), and the runs' scales d*sc and mins dmin*m, multiplied once
// for all the step's rows.
struct WQ8 {
    uvec4 lo, hi;
    vec4 a; // d * sc0, d * sc1, -dmin * m0, -dmin * m1
};
WQ8 w_q8(const uint which, uint rowb, uint row, uint g) {
    Q4G q = q4_group(which, rowb, row, g);
    WQ8 w;
    w.lo = q.qs & 0x0f0f0f0fu;
    w.hi = (q.qs >> 4u) & 0x0f0f0f0fu;
    w.a = vec4(q.dm.x * q.sc0, q.dm.x * q.sc1, -q.dm.y * q.m0, -q.dm.y * q.m1);
    return w;
}

// Token row tt's x over group g: the runs' int8 and ds = (d of run 0's
// block, of run 1's, d*sum(q) of run 0, of run 1), one load.
struct XG {
    uvec4 q0, q1;
    vec4 ds;
};
XG x_q8(uint tt, uint g) {
    XG x;
#if XQ_T
    x.q0 = XQ_SLOT(tt, 0u, g);
    x.q1 = XQ_SLOT(tt, 1u, g);
    x.ds = uintBitsToFloat(XQ_SLOT(tt, 2u, g));
#else
    uint k0 = run_start(g, 0u);
    x.q0 = XQ_Q16(tt, k0);
    x.q1 = XQ_Q16(tt, k0 + 32u);
    x.ds = uintBitsToFloat(XQ_G(tt, g));
#endif
    return x;
}

// acc += the group's dot product: the runs' integer sums, their scales, the mins.
void dot_q8(WQ8 w, XG x, inout float acc) {
    int i0 = 0, i1 = 0;
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        i0 = zdot4(w.lo[k], x.q0[k], i0);
        i1 = zdot4(w.hi[k], x.q1[k], i1);
    }
    acc = fma(w.a.x * x.ds.x, zi2f(i0), acc);
    acc = fma(w.a.y * x.ds.y, zi2f(i1), acc);
    acc = fma(w.a.z, x.ds.z, acc);
    acc = fma(w.a.w, x.ds.w, acc);
}
#else
// A group of a q6_K row: the 6-bit values minus 32 of its four runs as
// signed bytes (v ^ 32 is v - 32 as a 6-bit two's complement; bit 5
// spread to bits 6-7 sign-extends it: (b & 0x20) * 6 = 0xc0), so the
// products need no -32 * sum(q); the runs' scales times d.
struct WQ8 {
    uvec2 v[4];
    vec4 s;
};
WQ8 w_q8(const uint which, uint rowb, uint row, uint g) {
    Q6G q = q6_group(which, rowb, row, g);
    WQ8 w;
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        uvec2 ql = (k & 1u) != 0u ? q.qb : q.qa;
        uint nsh = (k >> 1u) * 4u, sbyte = q.sl + 2u * k;
        [[unroll]] for (uint h = 0u; h < 2u; h++) {
            uint u = ((ql[h] >> nsh) & 0x0f0f0f0fu) | (((q.qh[h] >> (2u * k)) & 0x03030303u) << 4u);
            uint b = u ^ 0x20202020u;
            w.v[k][h] = b | ((b & 0x20202020u) * 6u);
        }
        w.s[k] = q.d * float(bitfieldExtract(int(q.sc[sbyte >> 2u]), int(8u * (sbyte & 3u)), 8));
    }
    return w;
}

// Token row tt's x over group g: its four runs' int8 and their blocks' d.
struct XG {
    uvec2 q[4];
    vec4 dx;
};
XG x_q8(uint tt, uint g) {
    XG x;
#if XQ_T
    uvec4 a = XQ_SLOT(tt, 0u, g), b = XQ_SLOT(tt, 1u, g);
    x.q[0] = a.xy, x.q[1] = a.zw, x.q[2] = b.xy, x.q[3] = b.zw;
    x.dx = uintBitsToFloat(XQ_SLOT(tt, 2u, g));
#else
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        uint k0 = run_start(g, k);
        uvec4 q = XQ_Q16(tt, k0);
        x.q[k] = (k0 & 8u) != 0u ? q.zw : q.xy;
    }
    x.dx = uintBitsToFloat(XQ_G(tt, g));
#endif
    return x;
}

void dot_q8(WQ8 w, XG x, inout float acc) {
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        int is = zdot4(w.v[k][0], x.q[k][0], 0);
        is = zdot4(w.v[k][1], x.q[k][1], is);
        acc = fma(w.s[k] * x.dx[k], zi2f(is), acc);
    }
}
#endif
#define W_LOAD(which, ty, rowb, row, g, w) w = w_q8(which, rowb, row, g)
#define W_DECL(name, n) WQ8 name[n]

#else
// ---- fp32 x --------------------------------------------------------------

// Group g of a row, dequantized: run i's elements at i * RUNLEN.
#if GMODE == 12
void q4_dequant(const uint which, uint rowb, uint row, uint g, out float w[GE]) {
    Q4G q = q4_group(which, rowb, row, g);
    float a0 = q.dm.x * q.sc0, b0 = q.dm.y * q.m0, a1 = q.dm.x * q.sc1, b1 = q.dm.y * q.m1;
    [[unroll]] for (uint e = 0u; e < 16u; e++) {
        uint byte = q.qs[e >> 2u] >> (8u * (e & 3u));
        w[e] = a0 * float(byte & 0xfu) - b0;
        w[16u + e] = a1 * float((byte >> 4u) & 0xfu) - b1;
    }
}
#define W_GROUP(which, ty, rowb, row, g, w) q4_dequant(which, rowb, row, g, w)
#elif GMODE == 14
void q6_dequant(const uint which, uint rowb, uint row, uint g, out float w[GE]) {
    Q6G q = q6_group(which, rowb, row, g);
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        uvec2 ql = (k & 1u) != 0u ? q.qb : q.qa;
        uint nsh = (k >> 1u) * 4u, sbyte = q.sl + 2u * k;
        float s = q.d * float(bitfieldExtract(int(q.sc[sbyte >> 2u]), int(8u * (sbyte & 3u)), 8));
        [[unroll]] for (uint e = 0u; e < 8u; e++) {
            uint sh = 8u * (e & 3u), lo = (ql[e >> 2u] >> (sh + nsh)) & 0xfu;
            uint hi = (q.qh[e >> 2u] >> (sh + 2u * k)) & 3u;
            w[8u * k + e] = s * float(int(lo | (hi << 4u)) - 32);
        }
    }
}
#define W_GROUP(which, ty, rowb, row, g, w) q6_dequant(which, rowb, row, g, w)
#else
#define W_GROUP(which, ty, rowb, row, g, w) DQ8(which, ty, rowb, row, 8u * (g), w)
#endif
#define W_LOAD(which, ty, rowb, row, g, w) W_GROUP(which, ty, rowb, row, g, w)
#define W_DECL(name, n) float name[n][GE]

// Group g of x at offset xo, and ss += the squares (HAS_NORM).
void x_group(uint xo, uint g, out float xv[GE], inout float ss) {
    [[unroll]] for (uint i = 0u; i < NRUN; i++)
        [[unroll]] for (uint c = 0u; c < RUNLEN / 8u; c++) {
            float v[8];
            load_x8(xo + run_start(g, i) + 8u * c, v);
            [[unroll]] for (uint e = 0u; e < 8u; e++) {
                xv[i * RUNLEN + 8u * c + e] = v[e];
#if HAS_NORM
                ss += v[e] * v[e];
#endif
            }
        }
}

#if HAS_NORM
// The norm weight over group g.
void norm_group(uint g, out float nw[GE]) {
    [[unroll]] for (uint i = 0u; i < NRUN; i++)
        [[unroll]] for (uint c = 0u; c < RUNLEN / 8u; c++) {
            float v[8];
            DQ8(WQ_NW, NW_TYPE, 0u, 0u, run_start(g, i) + 8u * c, v);
            [[unroll]] for (uint e = 0u; e < 8u; e++) nw[i * RUNLEN + 8u * c + e] = v[e];
        }
}
#endif
#endif

// Matrix m's group g of row `row`, for segment seg (SEGS) or the kernel's
// matrices (m: 0 the first, 1 GLU's up): gemv_segs.glsl's W_SLOT.
#define W_OF(seg, m, row, g, w) W_SLOT(seg, m, W_LOAD, row, g, w)

// acc[(t * RS + r) * NMAT + m]: token t's sum for row r of matrix m.
float acc[NTOK * RS * NMAT];
float ss[NTOK];

// Group g of weight rows n0 .. n0+RS-1 (of segment seg), each matrix's,
// and its products with tokens t0 .. t0+nt-1, added to the sums.
void group(uint t0, uint nt, uint n0, uint g, const uint seg) {
    W_DECL(w, RS * NMAT);
    uint NS = seg_rows(seg);
    [[unroll]] for (uint r = 0u; r < RS; r++) {
        uint row = min(n0 + r, NS - 1u); // a tail row repeats the last one; not written
        [[unroll]] for (uint m = 0u; m < NMAT; m++) { W_OF(seg, m, row, g, w[r * NMAT + m]) }
    }
#if IDOT && ABLATE == 2
    // timing only: the weights' loads and unpacking, no x and no products
#if GMODE == 12
    [[unroll]] for (uint j = 0u; j < RS * NMAT; j++) acc[j] += zi2f(zdot4(w[j].lo.x, w[j].hi.y, 0));
#else
    [[unroll]] for (uint j = 0u; j < RS * NMAT; j++) acc[j] += zi2f(zdot4(w[j].v[0].x, w[j].v[3].y, 0));
#endif
#elif IDOT
#if ABLATE == 1
    XG xv0 = x_q8(t0, g); // timing only: one token's x for every token
#endif
    [[unroll]] for (uint t = 0u; t < NTOK; t++) {
        if (t >= nt) break; // uniform
#if ABLATE == 1
        XG xv = xv0;
#else
        XG xv = x_q8(t0 + t, g);
#endif
        [[unroll]] for (uint j = 0u; j < RS * NMAT; j++) dot_q8(w[j], xv, acc[t * RS * NMAT + j]);
    }
#else
#if HAS_NORM
    float nw[GE];
    norm_group(g, nw);
    [[unroll]] for (uint j = 0u; j < RS * NMAT; j++)
        [[unroll]] for (uint e = 0u; e < GE; e++) w[j][e] *= nw[e];
#endif
    [[unroll]] for (uint t = 0u; t < NTOK; t++) {
        if (t >= nt) break; // uniform
        float xv[GE];
        x_group((t0 + t) * uint(K), g, xv, ss[t]);
        [[unroll]] for (uint j = 0u; j < RS * NMAT; j++)
            [[unroll]] for (uint e = 0u; e < GE; e++) acc[t * RS * NMAT + j] += w[j][e] * xv[e];
    }
#endif
}

// Rows n0 .. n0+RS-1 (those below the segment's rows) of tokens t0 ..
// t0+nt-1: one subgroup.
void rows_of(uint t0, uint nt, uint n0, const uint seg) {
    uint S = gl_SubgroupSize, lane = gl_SubgroupInvocationID, NS = seg_rows(seg);
    [[unroll]] for (uint i = 0u; i < NTOK * RS * NMAT; i++) acc[i] = 0.0;
    [[unroll]] for (uint t = 0u; t < NTOK; t++) ss[t] = 0.0;
    for (uint g = lane; g < uint(K) / GE; g += S) group(t0, nt, n0, g, seg);
    [[unroll]] for (uint t = 0u; t < NTOK; t++) {
        if (t >= nt) break; // uniform
#if HAS_NORM && IDOT
        float sc = uintBitsToFloat(XQ_NORM(t0 + t).x);
#elif HAS_NORM
        float sc = inversesqrt(subgroupAdd(ss[t]) / float(K) + NORM_EPS);
#endif
        [[unroll]] for (uint r = 0u; r < RS; r++) {
            uint j = (t * RS + r) * NMAT;
            float v = subgroupAdd(acc[j]);
#if HAS_NORM
            v *= sc;
#endif
#if GLU
            float u = subgroupAdd(acc[j + 1u]);
#if HAS_NORM
            u *= sc;
#endif
            v = silu(v) * u;
#endif
            uint n = n0 + r;
            if (lane == (t * RS + r) % S && n < NS) store_seg(seg, t0 + t, n, v);
        }
    }
}

// A workgroup owns ROWS_WG rows of one segment; its subgroups take RS of
// them at a time (more each on a device whose subgroups are larger than
// the target's).
void rows_wg(uint t0, uint nt, uint wg, const uint seg) {
    for (uint r = gl_SubgroupID * uint(RS); r < uint(ROWS_WG); r += gl_NumSubgroups * uint(RS)) {
        uint n0 = wg * uint(ROWS_WG) + r;
        if (n0 >= seg_rows(seg)) break; // uniform in the subgroup, which uses no barrier
        rows_of(t0, nt, n0, seg);
    }
}

void main() {
    uint t0 = gl_WorkGroupID.y * uint(NTOK), wg = gl_WorkGroupID.x;
    if (t0 >= step.T) return; // uniform across the workgroup
    uint nt = min(uint(NTOK), step.T - t0);
#define ROWS_OF_WG(w, seg) rows_wg(t0, nt, w, seg)
    SEG_DISPATCH(wg, ROWS_OF_WG)
}
