// gemvn_quant.glsl: the quantizing pass of the int8-x multi-row GEMV: a
// workgroup per token row of the step, one invocation per 32-element block
// at a time, writes the row into gemvn_xq.glsl's layout as the decode
// GEMV's q8_1 (idot.glsl's q8_1_block: d = amax/127, q = round-to-even(x/d)),
// x times the norm weight first; then each group's scales, gathered from
// the blocks' through shared memory; and the norm's 1/rms, which the GEMV
// applies to the finished dot products. The interpreter quantizes the same
// values the same way (ir/interp.c zir_quantize_q8).

layout(local_size_x = WG) in;

shared float s_d[K / 32];   // d of each block
#if XQ_T
shared uvec4 s_q[K / 16];   // the int8 x, 16 elements a unit, gathered into slots after
#endif
#if GMODE == 12
shared float s_sum[K / 16]; // d * sum(q) of each 16-element run
#endif

void main() {
    uint tt = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x, xo = tt * uint(K);
    float ss = 0.0;
    for (uint r = tid; r < uint(K) / 32u; r += WG) {
        float v[32];
        float unused = 0.0;
        [[unroll]] for (uint c = 0u; c < 4u; c++) {
            float v8[8];
            x8_normed(xo, 32u * r + 8u * c, v8, ss, unused); // matmul_io.glsl
            [[unroll]] for (uint e = 0u; e < 8u; e++) v[8u * c + e] = v8[e];
        }
        uint w[8];
        int s[4]; // per 8 elements
        float d = q8_1_block(v, w, s);
#if XQ_T
        s_q[2u * r] = uvec4(w[0], w[1], w[2], w[3]);
        s_q[2u * r + 1u] = uvec4(w[4], w[5], w[6], w[7]);
#else
        XQ_Q16(tt, 32u * r) = uvec4(w[0], w[1], w[2], w[3]);
        XQ_Q16(tt, 32u * r + 16u) = uvec4(w[4], w[5], w[6], w[7]);
#endif
        s_d[r] = d;
#if GMODE == 12
        s_sum[2u * r] = d * float(s[0] + s[1]);
        s_sum[2u * r + 1u] = d * float(s[2] + s[3]);
#endif
    }
    barrier();
    for (uint g = tid; g < uint(K) / GE; g += WG) {
#if GMODE == 12
        uint k0 = run_start(g, 0u);
        vec4 ds = vec4(s_d[k0 >> 5u], s_d[(k0 >> 5u) + 1u], s_sum[k0 >> 4u], s_sum[(k0 >> 4u) + 2u]);
#else
        vec4 ds;
        [[unroll]] for (uint k = 0u; k < 4u; k++) ds[k] = s_d[run_start(g, k) >> 5u];
#endif
#if XQ_T
#if GMODE == 12
        XQ_SLOT(tt, 0u, g) = s_q[k0 >> 4u];
        XQ_SLOT(tt, 1u, g) = s_q[(k0 + 32u) >> 4u];
#else
        uvec2 h[4];
        [[unroll]] for (uint k = 0u; k < 4u; k++) {
            uint k1 = run_start(g, k);
            uvec4 q = s_q[k1 >> 4u];
            h[k] = (k1 & 8u) != 0u ? q.zw : q.xy;
        }
        XQ_SLOT(tt, 0u, g) = uvec4(h[0], h[1]);
        XQ_SLOT(tt, 1u, g) = uvec4(h[2], h[3]);
#endif
        XQ_SLOT(tt, 2u, g) = floatBitsToUint(ds);
#else
        XQ_G(tt, g) = floatBitsToUint(ds);
#endif
    }
#if HAS_NORM
    float tot = wg_sum(ss); // attn_reduce.glsl
    if (tid == 0u) XQ_NORM(tt).x = floatBitsToUint(inversesqrt(tot / float(K) + NORM_EPS));
#endif
}
