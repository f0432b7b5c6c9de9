// gemvn_xh.glsl: the x pass of the tensor-core multi-row GEMV
// (matmul_gemvn_cm.glsl): a workgroup per token row of the step writes the
// row as the matrix units take it, fp16, normalized first where the kernel
// has the norm prologue ((x * 1/rms) * w, the interpreter's order, then
// rounded as attr.mm_f16 rounds a matmul's x). Dispatched just before the
// GEMV with the same bindings (codegen's kernel.pre); the scratch B_XH
// holds XH_ROWS rows of K halves, rows past the step's never read into an
// output (a matrix product's columns are independent).
//
// X_REG (the GEMV's lanes build x's B fragments themselves,
// matmul_gemvn_cm.glsl's rows16_xreg): each 64-element step is written in
// their order, so that a lane loads one 16-byte vector a token and step:
// vector g (0 .. 7) holds, for slices kk = 0 .. 3 of the step, the two
// halves of K rows g and g + 8 of the permuted order (perm_k.glsl), the
// natural elements 32 (kk >> 1) + 8 (g >> 1) + 4 (kk & 1) + 2 (g & 1) + {0, 1}
// (word kk). Vector g takes 4 halves of chunk g >> 1 (sub-block 0) and 4
// of chunk 4 + (g >> 1) (sub-block 1).
//
// Defines: WG, K, HAS_NORM (NORM_EPS, NW_TYPE), B_XH, X_REG.

layout(local_size_x = WG) in;

#ifndef X_REG
#define X_REG 0
#endif

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
#if X_REG
        // vector g of step s: halves 2 (g & 1) + {0, 1} and + 4 of chunks g >> 1 and 4 + (g >> 1)
        uint s = c >> 3u, g = c & 7u, o = 2u * (g & 1u);
        float v[2][8];
        [[unroll]] for (uint h = 0u; h < 2u; h++) {
            uint k = 64u * s + 32u * h + 8u * (g >> 1u);
            load_x8(xo + k, v[h]);
#if HAS_NORM
            float nw[8];
            DQ8(WQ_NW, NW_TYPE, 0u, 0u, k, nw);
            [[unroll]] for (uint e = 0u; e < 8u; e++) v[h][e] = (v[h][e] * scale) * nw[e];
#endif
        }
        xh8[tt * (uint(K) / 8u) + c] =
            uvec4(packHalf2x16(vec2(v[0][o], v[0][o + 1u])), packHalf2x16(vec2(v[0][o + 4u], v[0][o + 5u])),
                  packHalf2x16(vec2(v[1][o], v[1][o + 1u])), packHalf2x16(vec2(v[1][o + 4u], v[1][o + 5u])));
#else
        float v[8];
        load_x8(xo + 8u * c, v);
#if HAS_NORM
        float nw[8];
        DQ8(WQ_NW, NW_TYPE, 0u, 0u, 8u * c, nw);
        [[unroll]] for (uint e = 0u; e < 8u; e++) v[e] = (v[e] * scale) * nw[e];
#endif
        xh8[tt * (uint(K) / 8u) + c] = uvec4(packHalf2x16(vec2(v[0], v[1])), packHalf2x16(vec2(v[2], v[3])),
                                             packHalf2x16(vec2(v[4], v[5])), packHalf2x16(vec2(v[6], v[7])));
#endif
    }
}
