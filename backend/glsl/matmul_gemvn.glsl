// matmul_gemvn.glsl: y[t, n] = x[t] . W[n] for the few rows of a batch
// step (zincc --parallel N, each row a token of its own sequence): a
// workgroup reads its weight rows once for NTOK token rows (rows
// NTOK * gl_WorkGroupID.y ..), with the optional RMSNorm prologue, gate/up
// SwiGLU (GLU) and the add or KV-store epilogue of matmul_io.glsl.
//
// The decode GEMV (matmul_gemv.glsl) streams the weights once per token;
// the GEMMs stage 16-64-token tiles that a step of a few rows leaves
// mostly empty. Here a subgroup owns RS rows and walks K in the groups of
// gemv_groups.glsl: each lane dequantizes a group of each of its rows once
// (the norm weight folded in), then for each token loads that group of x
// and adds the products to the token's sums, in registers. x comes from
// L1: NTOK x K floats do not fit shared memory.
//
// A token's sums are formed in one order whatever the other rows (a
// lane's groups in K order, then one subgroupAdd), and rows past T are
// skipped by a branch uniform in the workgroup: a sequence alone gives
// the bits it gives among others (tests/unit/test_batch.c).
//
// Defines: WG (threads), NTOK (token rows per workgroup), RS (weight rows
// per subgroup), ROWS_WG (per workgroup), GMODE, GLU (W1 is the up
// projection: y = silu(x.W0) * (x.W1)), W0_TYPE/W0_ROWB, W1_TYPE/W1_ROWB.

layout(local_size_x = WG) in;

#if GLU
#define NMAT 2u
#else
#define NMAT 1u
#endif

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

// acc[(t * RS + r) * NMAT + m]: token t's sum for row r of matrix m.
float acc[NTOK * RS * NMAT];
float ss[NTOK];

// Group g of rows n0 .. n0+RS-1 for tokens t0 .. t0+nt-1.
void group(uint t0, uint nt, uint n0, uint g) {
    float w[RS * NMAT][GE];
    [[unroll]] for (uint r = 0u; r < RS; r++) {
        uint row = min(n0 + r, uint(N) - 1u); // a tail row repeats the last one; not written
        W_GROUP(WQ_W0, W0_TYPE, W0_ROWB, row, g, w[r * NMAT]);
#if GLU
        W_GROUP(WQ_W1, W1_TYPE, W1_ROWB, row, g, w[r * NMAT + 1u]);
#endif
    }
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
}

// Rows n0 .. n0+RS-1 (those below N) of tokens t0 .. t0+nt-1: one subgroup.
void rows_of(uint t0, uint nt, uint n0) {
    uint S = gl_SubgroupSize, lane = gl_SubgroupInvocationID;
    [[unroll]] for (uint i = 0u; i < NTOK * RS * NMAT; i++) acc[i] = 0.0;
    [[unroll]] for (uint t = 0u; t < NTOK; t++) ss[t] = 0.0;
    for (uint g = lane; g < uint(K) / GE; g += S) group(t0, nt, n0, g);
    [[unroll]] for (uint t = 0u; t < NTOK; t++) {
        if (t >= nt) break; // uniform
#if HAS_NORM
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
            if (lane == (t * RS + r) % S && n < uint(N)) store_y(t0 + t, n, epilogue(t0 + t, n, v));
        }
    }
}

// A workgroup owns ROWS_WG rows; its subgroups take RS of them at a time
// (more each on a device whose subgroups are larger than the target's).
void main() {
    uint t0 = gl_WorkGroupID.y * uint(NTOK);
    if (t0 >= step.T) return; // uniform across the workgroup
    uint nt = min(uint(NTOK), step.T - t0);
    for (uint r = gl_SubgroupID * uint(RS); r < uint(ROWS_WG); r += gl_NumSubgroups * uint(RS)) {
        uint n0 = gl_WorkGroupID.x * uint(ROWS_WG) + r;
        if (n0 >= uint(N)) break; // uniform in the subgroup, which uses no barrier
        rows_of(t0, nt, n0);
    }
}
