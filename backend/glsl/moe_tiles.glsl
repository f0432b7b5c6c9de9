// moe_tiles.glsl: the grouped GEMMs' tiles over moe_route's sorted pairs
// (moe_gemm.glsl's scalar tiles, matmul_cm.glsl's with MOE).
//
// The route is moe_route's [T,U,4]: at rank r the expert, token and slot of
// the r-th pair sorted by expert, so expert e's pairs are one run of ranks. Each
// workgroup finds the runs' starts by binary search (a thread per expert),
// lays the experts' tiles out in expert order (ceil(count / BM) each) and
// takes tile gl_WorkGroupID.y; tiles past the last one return. Grid y:
// ceil((U*T + E*(BM-1)) / BM) >= sum over e of ceil(count_e / BM).
//
// Defines: BM, WG, E, U, B_ROUTE.

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
