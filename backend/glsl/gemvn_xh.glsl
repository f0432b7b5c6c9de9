// gemvn_xh.glsl: the x pass of the tensor-core multi-row GEMV
// (matmul_gemvn_cm.glsl): a workgroup per token row of the step writes the
// row as the matrix units take it, fp16, normalized first where the kernel
// has the norm prologue ((x * 1/rms) * w, the interpreter's order, then
// rounded as attr.mm_f16 rounds a matmul's x). Dispatched just before the
// GEMV with the same bindings (codegen's kernel.pre); the scratch B_XH
// holds XH_ROWS rows of K halves, rows past the step's never read into an
// output (a matrix product's columns are independent).
//
// Defines: WG, K, HAS_NORM (NORM_EPS, NW_TYPE), B_XH.

layout(local_size_x = WG) in;

layout(std430, binding = B_XH) writeonly buffer XHb { uvec4 xh8[]; }; // 8 halves a vector

void main() {
    uint tt = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x, xo = tt * uint(K);
#if HAS_NORM
    float ss = 0.0;
    for (uint c = tid; c < uint(K) / 8u; c += WG) {
        float v[8];
        load_x8(xo + 8u * c, v); // matmul_io.glsl
        [[unroll]] for (uint e = 0u; e < 8u; e++) ss += v[e] * v[e];
    }
    float scale = inversesqrt(wg_sum(ss) / float(K) + NORM_EPS); // attn_reduce.glsl
#endif
    for (uint c = tid; c < uint(K) / 8u; c += WG) {
        float v[8];
        load_x8(xo + 8u * c, v);
#if HAS_NORM
        float nw[8];
        DQ8(WQ_NW, NW_TYPE, 0u, 0u, 8u * c, nw);
        [[unroll]] for (uint e = 0u; e < 8u; e++) v[e] = (v[e] * scale) * nw[e];
#endif
        xh8[tt * (uint(K) / 8u) + c] = uvec4(packHalf2x16(vec2(v[0], v[1])), packHalf2x16(vec2(v[2], v[3])),
                                             packHalf2x16(vec2(v[4], v[5])), packHalf2x16(vec2(v[6], v[7])));
    }
}
