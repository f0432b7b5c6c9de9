// moe_gemv.glsl: the chosen experts' rows of a stacked weight w[E, N, K],
// dequantized in the load path (dequant.glsl's DQ8), one subgroup per
// output row. Only the experts the route names are read: a decode token
// touches TOPK of the E experts.
//
//   plain (SUM 0): y[t, u, n] = x[t] (X3: x[t, u]) . w[e(t, u), n]; with GLU
//       y = silu(x . W0) * (x . W1), gate and up read in the same pass over x.
//       Grid: gl_WorkGroupID.y is the (token, slot) pair t * U + u.
//   SUM 1: y[t, n] = sum over u (in route order) of weight(t, u) * (x[t, u] .
//       w[e(t, u), n]), plus the residual (matmul_io.glsl's ADD_MODE 1): the
//       down projection, moe_sum and the residual add as one kernel, whose
//       [T, U, H] products never leave the chip. Grid y: the token.
//
// Prefill runs the same kernel with one workgroup row per (token, slot):
// each reads its expert's rows (shared in cache by tokens that chose the
// same expert), not a grouped GEMM (docs/performance.md says what is missing).
//
// Defines: WG, ROWS_WG (rows per workgroup), N, K, E, U, SUM, GLU, X3, RS
// (the route's floats a pair: 2, or 4 for moe_route's),
// B_ROUTE, and matmul_io.glsl's / dequant.glsl's (W0, W1 when GLU).
layout(local_size_x = WG) in;
layout(std430, binding = B_ROUTE) readonly buffer Rt { ACT_T route[]; };

// The expert of slot tu; an id the router cannot produce is clamped, so a
// corrupt route reads a wrong expert rather than out of bounds.
uint expert_of(uint tu) { return min(uint(float(route[uint(RS) * tu])), uint(E) - 1u); }

// x[xo .. xo+K) . row `row` of W0 (and W1), summed over the subgroup.
vec2 row_dot(uint xo, uint row) {
    float a0 = 0.0, a1 = 0.0;
    for (uint g = gl_SubgroupInvocationID; g < uint(K) / 8u; g += gl_SubgroupSize) {
        float xv[8], wv[8];
        load_x8(xo + 8u * g, xv);
        DQ8(WQ_W0, W0_TYPE, W0_ROWB, row, 8u * g, wv);
        [[unroll]] for (uint e = 0u; e < 8u; e++) a0 += xv[e] * wv[e];
#if GLU
        DQ8(WQ_W1, W1_TYPE, W1_ROWB, row, 8u * g, wv);
        [[unroll]] for (uint e = 0u; e < 8u; e++) a1 += xv[e] * wv[e];
#endif
    }
    return vec2(subgroupAdd(a0), subgroupAdd(a1));
}

#if SUM
void row_of(uint t, uint n) {
    precise float o = 0.0;
    for (uint u = 0u; u < uint(U); u++) {
        uint tu = t * uint(U) + u;
        precise float v = row_dot(tu * uint(K), expert_of(tu) * uint(N) + n).x * float(route[uint(RS) * tu + 1u]);
        o = u == 0u ? v : o + v;
    }
    if (gl_SubgroupInvocationID == 0u) store_y(t, n, epilogue(t, n, o));
}
#else
void row_of(uint tu, uint n) {
#if X3
    uint xo = tu * uint(K);
#else
    uint xo = (tu / uint(U)) * uint(K);
#endif
    vec2 s = row_dot(xo, expert_of(tu) * uint(N) + n);
#if GLU
    float v = silu(s.x) * s.y;
#else
    float v = s.x;
#endif
    if (gl_SubgroupInvocationID == 0u) store_y(tu, n, v);
}
#endif

void main() {
    uint r = gl_WorkGroupID.y;
#if SUM
    if (r >= step.T) return;
#else
    if (r >= step.T * uint(U)) return;
#endif
    for (uint i = gl_SubgroupID; i < uint(ROWS_WG); i += gl_NumSubgroups) {
        uint n = gl_WorkGroupID.x * uint(ROWS_WG) + i;
        if (n >= uint(N)) break; // uniform in the subgroup
        row_of(r, n);
    }
}
