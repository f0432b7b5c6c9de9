// matmul_gemv.glsl: y[t, n] = x[t] . W[n] for decode (one token per
// workgroup row of the grid: gl_WorkGroupID.y = t), with the optional
// RMSNorm prologue, gate/up SwiGLU (GLU) and add epilogue.
//
// A subgroup owns one output row at a time: its lanes walk K in 8-element
// chunks (consecutive lanes read consecutive bytes of the row), and a
// subgroupAdd finishes the dot product. The norm needs no extra pass: the
// lanes sum x^2 over the same chunks, since together they cover the row,
// and the scale multiplies the finished dot product (x . (w * nw)) * s.
//
// Defines: WG (threads), ROWS (rows per workgroup), GLU (W1 is the up
// projection: y = silu(x.W0) * (x.W1)), W0_TYPE/W0_ROWB, W1_TYPE/W1_ROWB.

layout(local_size_x = WG) in;

void main() {
    uint t = gl_WorkGroupID.y;
    if (t >= step.T) return;
    uint xo = t * uint(K);
    uint r0 = gl_WorkGroupID.x * uint(ROWS);
    for (uint r = gl_SubgroupID; r < uint(ROWS); r += gl_NumSubgroups) {
        uint n = r0 + r;
        if (n >= uint(N)) break;
        float a0 = 0.0, a1 = 0.0, ss = 0.0;
        for (uint c = gl_SubgroupInvocationID; c < uint(K) / 8u; c += gl_SubgroupSize) {
            uint k0 = c * 8u;
            float xv[8], wv[8];
            [[unroll]] for (uint i = 0u; i < 8u; i++) xv[i] = float(xin[xo + k0 + i]);
#if HAS_NORM
            float nv[8];
            DQ8(WQ_NW, NW_TYPE, 0u, 0u, k0, nv);
            [[unroll]] for (uint i = 0u; i < 8u; i++) {
                ss += xv[i] * xv[i];
                xv[i] *= nv[i];
            }
#endif
            DQ8(WQ_W0, W0_TYPE, W0_ROWB, n, k0, wv);
            [[unroll]] for (uint i = 0u; i < 8u; i++) a0 += xv[i] * wv[i];
#if GLU
            DQ8(WQ_W1, W1_TYPE, W1_ROWB, n, k0, wv);
            [[unroll]] for (uint i = 0u; i < 8u; i++) a1 += xv[i] * wv[i];
#endif
        }
        a0 = subgroupAdd(a0);
#if GLU
        a1 = subgroupAdd(a1);
#endif
#if HAS_NORM
        float s = inversesqrt(subgroupAdd(ss) / float(K) + NORM_EPS);
        a0 *= s;
        a1 *= s;
#endif
        if (subgroupElect()) {
#if GLU
            float v = silu(a0) * a1;
#else
            float v = a0;
#endif
            yout[t * uint(N) + n] = ACT_T(epilogue(t, n, v));
        }
    }
}
