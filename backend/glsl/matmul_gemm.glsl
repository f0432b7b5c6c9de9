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
// With GLU (gate W0, up W1; y = silu(gate) * up) the BN columns of the tile
// are BN/2 gate rows then the same BN/2 up rows, so a thread's columns j and
// j + TN/2 hold the gate and up sums of one output: the same inner loop,
// half the outputs per tile.
//
// MM_F16 (the mm-f16 pass): both operands are rounded to fp16 as they are
// staged, as the matrix units would take them (on a device without them).
//
// Defines: BM, BN, BK (multiple of 8), TM, TN (even), WG = (BM/TM)*(BN/TN),
// GLU, MM_F16, W*_TYPE/W*_ROWB; the tile itself is gemm_tile.glsl's.

#ifdef MM_F16
// Round to fp16 and back, without needing fp16 arithmetic on the device.
#define op_round(v) f16_rne(v)
#else
#define op_round(v) (v)
#endif

#if HAS_NORM
shared float sc_s[BM];
#endif

void load_tiles(uint m0, uint n0, uint k0, uint T) {
    uint tid = gl_LocalInvocationIndex;
    for (uint i = tid; i < uint(BM * BK); i += uint(WG)) {
        uint m = i / uint(BK), k = i % uint(BK), t = m0 + m, kk = k0 + k;
        float v = 0.0;
        if (t < T && kk < uint(K)) {
            v = x_at(t * uint(K) + kk);
#if HAS_NORM
            v = v * sc_s[m] * DQ1(WQ_NW, NW_TYPE, kk);
#endif
        }
        xs[k * uint(BMP) + m] = op_round(v);
    }
    for (uint i = tid; i < uint(BN * (BK / 8)); i += uint(WG)) {
        uint n = i / uint(BK / 8), c = (i % uint(BK / 8)) * 8u, row = n0 + n % uint(ON), kk = k0 + c;
        float v[8];
        bool ok = row < uint(N) && kk < uint(K);
#if GLU
        if (ok && n >= uint(ON)) DQ8(WQ_W1, W1_TYPE, W1_ROWB, row, kk, v);
        else if (ok) DQ8(WQ_W0, W0_TYPE, W0_ROWB, row, kk, v);
#else
        if (ok) DQ8(WQ_W0, W0_TYPE, W0_ROWB, row, kk, v);
#endif
        [[unroll]] for (uint j = 0u; j < 8u; j++) ws[(c + j) * uint(BNP) + n] = ok ? op_round(v[j]) : 0.0;
    }
}

void main() {
    uint tid = gl_LocalInvocationIndex, tx = tid % uint(GX), ty = tid / uint(GX);
    uint n0 = gl_WorkGroupID.x * uint(ON), m0 = gl_WorkGroupID.y * uint(BM), T = step.T;
    if (m0 >= T || m0 + uint(BM) <= first_needed_row(T)) return;
#if HAS_NORM
    for (uint m = gl_SubgroupID; m < uint(BM); m += gl_NumSubgroups) {
        float s = 0.0;
        if (m0 + m < T) s = subgroup_inv_rms((m0 + m) * uint(K), uint(K), NORM_EPS);
        if (subgroupElect()) sc_s[m] = s;
    }
    barrier();
#endif
    float acc[TM][TN];
    [[unroll]] for (uint i = 0u; i < uint(TM); i++)
        [[unroll]] for (uint j = 0u; j < uint(TN); j++) acc[i][j] = 0.0;
    for (uint k0 = 0u; k0 < uint(K); k0 += uint(BK)) {
        load_tiles(m0, n0, k0, T);
        barrier();
        tile_products(tx, ty, acc);
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < uint(TM); i++) {
        uint t = m0 + ty + i * uint(GY);
        if (t >= T) continue;
        [[unroll]] for (uint j = 0u; j < uint(JN); j++) {
            uint n = n0 + tx + j * uint(GX);
            if (n >= uint(N)) continue;
#if GLU
            float v = silu(acc[i][j]) * acc[i][j + uint(JN)];
#else
            float v = acc[i][j];
#endif
            store_y(t, n, epilogue(t, n, v));
        }
    }
}
