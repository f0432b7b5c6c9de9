// moe_gemm.glsl: the chosen experts' rows of a stacked weight w[E, N, K] as
// grouped GEMMs, for prefill: the step's (token, slot) pairs are sorted by
// expert and each workgroup owns a tile of BM pairs of one expert x BN
// weight rows, so an expert's weight tile is dequantized once for up to BM
// of its tokens (moe_gemv.glsl reads it once per (token, slot)).
//
//   y[t, u, n] = x[t] (X3: x[t, u]) . w[e(t, u), n]; with GLU
//   y = silu(x . W0) * (x . W1), the tile's columns BN/2 gate rows then the
//   same BN/2 up rows (matmul_gemm.glsl's layout).
//
// The tiles over moe_route's sorted pairs are moe_tiles.glsl's.
//
// MM_F16 (the mm-f16 pass marked the expert matmuls): both operands are
// rounded to fp16 as they are staged, as the tensor-core form
// (matmul_cm.glsl with MOE) takes them, on a device without matrix units.
//
// Defines: BM, BN, BK (multiple of 8), TM, TN (even), WG = (BM/TM)*(BN/TN),
// N, K, E, U, GLU, X3, MM_F16, B_ROUTE, and matmul_io.glsl's / dequant.glsl's; the
// tile itself is gemm_tile.glsl's.

#ifdef MM_F16
// Round to fp16 and back, without needing fp16 arithmetic on the device.
#define op_round(v) f16_rne(v)
#else
#define op_round(v) (v)
#endif

void load_tiles(uint e, uint m, uint n0, uint k0) {
    uint tid = gl_LocalInvocationIndex;
    for (uint i = tid; i < uint(BM * BK); i += uint(WG)) {
        uint j = i / uint(BK), k = i % uint(BK), kk = k0 + k;
        float v = 0.0;
        if (j < m && kk < uint(K)) {
#if X3
            uint row = pair_s[j];
#else
            uint row = pair_s[j] / uint(U);
#endif
            v = op_round(x_at(row * uint(K) + kk));
        }
        xs[k * uint(BMP) + j] = v;
    }
    for (uint i = tid; i < uint(BN * (BK / 8)); i += uint(WG)) {
        uint n = i / uint(BK / 8), c = (i % uint(BK / 8)) * 8u, row = n0 + n % uint(ON), kk = k0 + c;
        float v[8];
        bool ok = row < uint(N) && kk < uint(K);
        uint wrow = e * uint(N) + row;
#if GLU
        if (ok && n >= uint(ON)) DQ8(WQ_W1, W1_TYPE, W1_ROWB, wrow, kk, v);
        else if (ok) DQ8(WQ_W0, W0_TYPE, W0_ROWB, wrow, kk, v);
#else
        if (ok) DQ8(WQ_W0, W0_TYPE, W0_ROWB, wrow, kk, v);
#endif
        [[unroll]] for (uint j = 0u; j < 8u; j++) ws[(c + j) * uint(BNP) + n] = ok ? op_round(v[j]) : 0.0;
    }
}

void main() {
    uint tid = gl_LocalInvocationIndex, tx = tid % uint(GX), ty = tid / uint(GX);
    uint P = step.T * uint(U), n0 = gl_WorkGroupID.x * uint(ON), e, m;
    if (!find_tile(P, e, m)) return;
    float acc[TM][TN];
    [[unroll]] for (uint i = 0u; i < uint(TM); i++)
        [[unroll]] for (uint j = 0u; j < uint(TN); j++) acc[i][j] = 0.0;
    for (uint k0 = 0u; k0 < uint(K); k0 += uint(BK)) {
        load_tiles(e, m, n0, k0);
        barrier();
        tile_products(tx, ty, acc);
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < uint(TM); i++) {
        uint j0 = ty + i * uint(GY);
        if (j0 >= m) continue;
        uint p = pair_s[j0];
        [[unroll]] for (uint j = 0u; j < uint(JN); j++) {
            uint n = n0 + tx + j * uint(GX);
            if (n >= uint(N)) continue;
#if GLU
            float v = silu(acc[i][j]) * acc[i][j + uint(JN)];
#else
            float v = acc[i][j];
#endif
            store_y(p, n, v);
        }
    }
}
