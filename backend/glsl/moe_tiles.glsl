// moe_tiles.glsl: the grouped GEMMs' tiles over moe_route's sorted pairs
// (moe_gemm.glsl's scalar tiles, matmul_cm.glsl's with MOE).
//
// The route is moe_route's [T,U,4]: at rank r the expert, token and slot of
// the r-th pair sorted by expert, so expert e's pairs are one run of ranks. Each
// workgroup finds the runs' starts (where the sorted experts step up), lays
// the experts' tiles out in expert order (ceil(count / BM) each, a scan) and
// takes tile gl_WorkGroupID.y; tiles past the last one return. Grid y:
// ceil((U*T + E*(BM-1)) / BM) >= sum over e of ceil(count_e / BM).
//
// Every workgroup does this prologue before its tile, so it is kept to two
// trips to the route and a few barriers: a down projection's tile walks K
// of 768 at 30B-A3B's shape, a dozen steps, where a binary search per
// expert (12 dependent loads) and a walk over the experts one after the
// other (E shared loads in a chain) were a large part of it.
//
// Defines: BM, WG, E, U, B_ROUTE; needs GL_KHR_shader_subgroup_arithmetic.

layout(std430, binding = B_ROUTE) readonly buffer Rt { ACT_T route[]; };

shared uint start_s[E + 1]; // each expert's first rank; start_s[E] = T * U
shared uint tiles_s[E];      // the tiles of experts 0 ..= e
shared uint part_s[WG];      // the scan's subgroup sums
shared uint pair_s[BM];      // the tile's (token, slot) ids t * U + u

// The pair of rank r (of P) and the expert of rank r; values a sort cannot
// produce are clamped, so a corrupt route reads wrong rows rather than out
// of bounds.
uint pair_at(uint r, uint P) {
    return min(uint(float(route[4u * r + 2u])) * uint(U) + uint(float(route[4u * r + 3u])), P - 1u);
}
uint expert_at(uint r) { return min(uint(float(route[4u * r + 1u])), uint(E) - 1u); }

#define RU 8u /* ranks a thread reads a trip: their loads in flight together */

// Each expert's first rank (the first rank whose expert is >= x) from where
// the sorted experts step up: rank r starts experts expert(r-1)+1 ..
// expert(r) (r = 0: from 0; r = P: up to E), each written once. The ranks'
// loads go RU a trip, where a binary search for each expert was 12
// dependent loads (and a route a sort cannot give leaves some experts at P:
// wrong tiles, read and written in bounds).
void expert_starts(uint P, uint tid) {
    for (uint x = tid; x <= uint(E); x += uint(WG)) start_s[x] = P;
    barrier();
    for (uint r0 = tid; r0 <= P; r0 += RU * uint(WG)) {
        uint lo[RU], hi[RU];
        [[unroll]] for (uint i = 0u; i < RU; i++) {
            uint r = r0 + i * uint(WG);
            lo[i] = r == 0u || r > P ? 0u : expert_at(r - 1u) + 1u;
            hi[i] = r < P ? expert_at(r) : uint(E);
        }
        [[unroll]] for (uint i = 0u; i < RU; i++) {
            uint r = r0 + i * uint(WG);
            if (r <= P)
                for (uint x = lo[i]; x <= hi[i]; x++) start_s[x] = r;
        }
    }
    barrier();
}

// tiles_s[e]: the tiles of experts 0 ..= e (ceil(count / BM) each), an
// inclusive scan by subgroups, WG experts a pass.
void expert_tiles(uint tid) {
    uint carry = 0u;
    for (uint x0 = 0u; x0 < uint(E); x0 += uint(WG)) {
        uint x = x0 + tid, c = x < uint(E) ? start_s[x + 1u] - start_s[x] : 0u;
        uint inc = subgroupInclusiveAdd((c + uint(BM) - 1u) / uint(BM));
        if (gl_SubgroupInvocationID == gl_SubgroupSize - 1u) part_s[gl_SubgroupID] = inc;
        barrier();
        uint before = carry;
        for (uint i = 0u; i < gl_SubgroupID; i++) before += part_s[i];
        if (x < uint(E)) tiles_s[x] = before + inc;
        for (uint i = 0u; i < gl_NumSubgroups; i++) carry += part_s[i];
        barrier();
    }
}

// The workgroup's tile: its expert e and its m pairs (pair_s); false past
// the last tile (uniform: every thread reads the same shared values).
bool find_tile(uint P, out uint e, out uint m) {
    uint tid = gl_LocalInvocationIndex, tile = gl_WorkGroupID.y;
    expert_starts(P, tid);
    expert_tiles(tid);
    m = 0u;
    e = 0u;
    if (tile >= tiles_s[uint(E) - 1u]) return false;
    uint lo = 0u, hi = uint(E) - 1u; // the first expert whose tiles pass this one
    while (lo < hi) {
        uint mid = (lo + hi) / 2u;
        if (tiles_s[mid] <= tile) lo = mid + 1u;
        else hi = mid;
    }
    e = lo;
    uint r0 = (tile - (e > 0u ? tiles_s[e - 1u] : 0u)) * uint(BM);
    m = min(uint(BM), start_s[e + 1u] - start_s[e] - r0);
    for (uint j = tid; j < m; j += uint(WG)) pair_s[j] = pair_at(min(start_s[e] + r0 + j, P - 1u), P);
    barrier();
    return true;
}
