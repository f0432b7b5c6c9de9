// matmul_gemm.glsl: y[T, N] = x[T, K] . W[N, K]^T for prefill, any T.
//
// A workgroup owns a tile of BM tokens x BN rows. It walks K in steps of
// BK: the x tile (normalized on the way in when HAS_NORM) and the weight
// tile are staged in shared memory, so each weight element is dequantized
// once per token tile, and every thread accumulates a TM x TN block of
// outputs in registers. Threads form a (BM/TM) x (BN/TN) grid; a thread's
// tokens and rows are strided by the grid size so that neighbouring threads
// read neighbouring shared words.
//
// Defines: BM, BN, BK (multiple of 8), TM, TN, WG = (BM/TM)*(BN/TN),
// GLU (two weights W0 gate, W1 up; y = silu(gate) * up), W*_TYPE/W*_ROWB.

layout(local_size_x = WG) in;

#define GX (BN / TN) /* thread grid columns */
#define GY (BM / TM) /* thread grid rows */
#define BMP (BM + 1) /* padded strides: conflict-free column writes */
#define BNP (BN + 1)
#if GLU
#define NWM 2
#else
#define NWM 1
#endif

shared float xs[BK * BMP];        // [k][token]
shared float ws[NWM * BK * BNP];  // [matrix][k][row]
#if HAS_NORM
shared float sc_s[BM];
#endif

void load_tiles(uint m0, uint n0, uint k0, uint T) {
    uint tid = gl_LocalInvocationIndex;
    for (uint i = tid; i < uint(BM * BK); i += uint(WG)) {
        uint m = i / uint(BK), k = i % uint(BK), t = m0 + m, kk = k0 + k;
        float v = 0.0;
        if (t < T && kk < uint(K)) {
            v = float(xin[t * uint(K) + kk]);
#if HAS_NORM
            v = v * sc_s[m] * DQ1(WQ_NW, NW_TYPE, kk);
#endif
        }
        xs[k * uint(BMP) + m] = v;
    }
    for (uint i = tid; i < uint(BN * (BK / 8)); i += uint(WG)) {
        uint n = i / uint(BK / 8), c = (i % uint(BK / 8)) * 8u, row = n0 + n, kk = k0 + c;
        float v[8];
        bool ok = row < uint(N) && kk < uint(K);
        if (ok) DQ8(WQ_W0, W0_TYPE, W0_ROWB, row, kk, v);
        [[unroll]] for (uint j = 0u; j < 8u; j++) ws[(c + j) * uint(BNP) + n] = ok ? v[j] : 0.0;
#if GLU
        if (ok) DQ8(WQ_W1, W1_TYPE, W1_ROWB, row, kk, v);
        [[unroll]] for (uint j = 0u; j < 8u; j++) ws[(uint(BK) + c + j) * uint(BNP) + n] = ok ? v[j] : 0.0;
#endif
    }
}

void main() {
    uint tid = gl_LocalInvocationIndex, tx = tid % uint(GX), ty = tid / uint(GX);
    uint n0 = gl_WorkGroupID.x * uint(BN), m0 = gl_WorkGroupID.y * uint(BM), T = step.T;
    if (m0 >= T) return;
#if HAS_NORM
    for (uint m = gl_SubgroupID; m < uint(BM); m += gl_NumSubgroups) {
        float s = 0.0;
        if (m0 + m < T) s = subgroup_inv_rms((m0 + m) * uint(K), uint(K), NORM_EPS);
        if (subgroupElect()) sc_s[m] = s;
    }
    barrier();
#endif
    float acc0[TM][TN], acc1[TM][TN];
    [[unroll]] for (uint i = 0u; i < uint(TM); i++)
        [[unroll]] for (uint j = 0u; j < uint(TN); j++) {
            acc0[i][j] = 0.0;
            acc1[i][j] = 0.0;
        }
    for (uint k0 = 0u; k0 < uint(K); k0 += uint(BK)) {
        load_tiles(m0, n0, k0, T);
        barrier();
        for (uint k = 0u; k < uint(BK); k++) {
            float a[TM], b[TN];
            [[unroll]] for (uint i = 0u; i < uint(TM); i++) a[i] = xs[k * uint(BMP) + ty + i * uint(GY)];
            [[unroll]] for (uint j = 0u; j < uint(TN); j++) b[j] = ws[k * uint(BNP) + tx + j * uint(GX)];
            [[unroll]] for (uint i = 0u; i < uint(TM); i++)
                [[unroll]] for (uint j = 0u; j < uint(TN); j++) acc0[i][j] += a[i] * b[j];
#if GLU
            [[unroll]] for (uint j = 0u; j < uint(TN); j++) b[j] = ws[(uint(BK) + k) * uint(BNP) + tx + j * uint(GX)];
            [[unroll]] for (uint i = 0u; i < uint(TM); i++)
                [[unroll]] for (uint j = 0u; j < uint(TN); j++) acc1[i][j] += a[i] * b[j];
#endif
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < uint(TM); i++) {
        uint t = m0 + ty + i * uint(GY);
        if (t >= T) continue;
        [[unroll]] for (uint j = 0u; j < uint(TN); j++) {
            uint n = n0 + tx + j * uint(GX);
            if (n >= uint(N)) continue;
#if GLU
            float v = silu(acc0[i][j]) * acc1[i][j];
#else
            float v = acc0[i][j];
#endif
            yout[t * uint(N) + n] = ACT_T(epilogue(t, n, v));
        }
    }
}
