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
// The route is moe_route's [T,U,4]: at rank r the expert, token and slot of
// the r-th pair sorted by expert, so expert e's pairs are one run of ranks. Each
// workgroup finds the runs' starts by binary search (a thread per expert),
// lays the experts' tiles out in expert order (ceil(count / BM) each) and
// takes tile gl_WorkGroupID.y; tiles past the last one return. Grid y:
// ceil((U*T + E*(BM-1)) / BM) >= sum over e of ceil(count_e / BM).
//
// Defines: BM, BN, BK (multiple of 8), TM, TN (even), WG = (BM/TM)*(BN/TN),
// N, K, E, U, GLU, X3, B_ROUTE, and matmul_io.glsl's / dequant.glsl's; the
// tile itself is gemm_tile.glsl's.

layout(std430, binding = B_ROUTE) readonly buffer Rt { ACT_T route[]; };

shared uint start_s[E + 1]; // each expert's first rank; start_s[E] = T * U
shared uint pair_s[BM];      // the tile's (token, slot) ids t * U + u

// The pair of rank r (of P) and the expert of rank r; values a sort cannot
// produce are clamped, so a corrupt route reads wrong rows rather than out
// of bounds.
uint pair_at(uint r, uint P) {
    return min(uint(float(route[4u * r + 2u])) * uint(U) + uint(float(route[4u * r + 3u])), P - 1u);
}
uint expert_at(uint r) { return min(uint(float(route[4u * r + 1u])), uint(E) - 1u); }

// The workgroup's tile: its expert e and its m pairs (pair_s); false past
// the last tile (uniform: every thread reads start_s).
bool find_tile(uint P, out uint e, out uint m) {
    uint tid = gl_LocalInvocationIndex;
    for (uint x = tid; x <= uint(E); x += uint(WG)) {
        uint lo = x < uint(E) ? 0u : P, hi = P; // the first rank whose expert is >= x
        while (lo < hi) {
            uint mid = (lo + hi) / 2u;
            if (expert_at(mid) < x) lo = mid + 1u;
            else hi = mid;
        }
        start_s[x] = lo;
    }
    barrier();
    uint tile = gl_WorkGroupID.y, base = 0u;
    for (e = 0u; e < uint(E); e++) {
        uint c = start_s[e + 1u] - start_s[e], nt = (c + uint(BM) - 1u) / uint(BM);
        if (tile < base + nt) {
            uint r0 = (tile - base) * uint(BM);
            m = min(uint(BM), c - r0);
            for (uint j = tid; j < m; j += uint(WG)) pair_s[j] = pair_at(start_s[e] + r0 + j, P);
            barrier();
            return true;
        }
        base += nt;
    }
    m = 0u;
    return false;
}

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
            v = x_at(row * uint(K) + kk);
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
        [[unroll]] for (uint j = 0u; j < 8u; j++) ws[(c + j) * uint(BNP) + n] = ok ? v[j] : 0.0;
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
