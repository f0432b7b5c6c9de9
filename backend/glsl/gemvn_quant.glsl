// gemvn_quant.glsl: the quantizing pass of the int8-x multi-row GEMV: a
// workgroup per token row of the step, one invocation per 32-element block
// at a time, writes the row into gemvn_xq.glsl's layout as the decode
// GEMV's q8_1 (idot.glsl's q8_1_block: d = amax/127, q = round-to-even(x/d)),
// x times the norm weight first, and the norm's 1/rms, which the GEMV
// applies to the finished dot products. The interpreter quantizes the same
// values the same way (ir/interp.c zir_quantize_q8).

layout(local_size_x = WG) in;

void main() {
    uint tt = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x, xo = tt * uint(K);
    float ss = 0.0;
    for (uint r = tid; r < uint(K) / 32u; r += WG) {
        float v[32];
        [[unroll]] for (uint c = 0u; c < 4u; c++) {
            float v8[8];
            load_x8(xo + 32u * r + 8u * c, v8);
#if HAS_NORM
            float nv[8];
            DQ8(WQ_NW, NW_TYPE, 0u, 0u, 32u * r + 8u * c, nv);
#endif
            [[unroll]] for (uint e = 0u; e < 8u; e++) {
#if HAS_NORM
                ss += v8[e] * v8[e];
                v8[e] *= nv[e];
#endif
                v[8u * c + e] = v8[e];
            }
        }
        uint w[8];
        int s[4]; // per 8 elements
        float d = q8_1_block(v, w, s);
        XQ_Q16(tt, 32u * r) = uvec4(w[0], w[1], w[2], w[3]);
        XQ_Q16(tt, 32u * r + 16u) = uvec4(w[4], w[5], w[6], w[7]);
        uint f = XQ_SUMS(tt) + 2u * r;
        xq4[f >> 2u][f & 3u] = floatBitsToUint(d * float(s[0] + s[1]));
        f++;
        xq4[f >> 2u][f & 3u] = floatBitsToUint(d * float(s[2] + s[3]));
        f = XQ_D(tt) + r;
        xq4[f >> 2u][f & 3u] = floatBitsToUint(d);
    }
#if HAS_NORM
    float tot = wg_sum(ss); // attn_reduce.glsl
    uint f = XQ_NORM(tt);
    if (tid == 0u) xq4[f >> 2u][f & 3u] = floatBitsToUint(inversesqrt(tot / float(K) + NORM_EPS));
#endif
}
