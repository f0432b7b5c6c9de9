// matmul_gemv.glsl: y[t, n] = x[t] . W[n] for decode (one token per
// workgroup row of the grid: gl_WorkGroupID.y = t), with the optional
// RMSNorm prologue, gate/up SwiGLU (GLU) and add epilogue.
//
// A subgroup owns one output row at a time: its lanes walk K in 8-element
// chunks (consecutive lanes read consecutive bytes of the row), and a
// subgroupAdd finishes the dot product. Each lane works on UNROLL chunks
// per trip with separate sums, so that their loads can be in flight
// together (on the H200, with x and weights read as vectors, 1, 2 and 4
// measured the same; more helps where fewer warps are resident). x and the
// weights are read with vector loads (load_x8, dequant.glsl). The norm needs no
// extra pass: the lanes sum x^2 over the same chunks, since together they
// cover the row, and the scale multiplies the finished dot product,
// (x . (w * nw)) * s.
//
// Defines: WG (threads), ROWS (rows per workgroup), GLU (W1 is the up
// projection: y = silu(x.W0) * (x.W1)), W0_TYPE/W0_ROWB, W1_TYPE/W1_ROWB.

layout(local_size_x = WG) in;

#ifndef UNROLL
#define UNROLL 4u
#endif

// One 8-element chunk at k0 of row n: a0 += x.W0, a1 += x.W1, ss += x.x.
void chunk(uint xo, uint n, uint k0, inout float a0, inout float a1, inout float ss) {
    float xv[8], wv[8];
    load_x8(xo + k0, xv);
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

void main() {
    uint t = gl_WorkGroupID.y;
    if (t >= step.T) return;
    uint xo = t * uint(K), nch = uint(K) / 8u, S = gl_SubgroupSize;
    uint r0 = gl_WorkGroupID.x * uint(ROWS);
    for (uint r = gl_SubgroupID; r < uint(ROWS); r += gl_NumSubgroups) {
        uint n = r0 + r;
        if (n >= uint(N)) break;
        float a0[UNROLL], a1[UNROLL], ss[UNROLL];
        [[unroll]] for (uint u = 0u; u < UNROLL; u++) {
            a0[u] = 0.0;
            a1[u] = 0.0;
            ss[u] = 0.0;
        }
        uint c = gl_SubgroupInvocationID;
        for (; c + (UNROLL - 1u) * S < nch; c += UNROLL * S)
            [[unroll]] for (uint u = 0u; u < UNROLL; u++) chunk(xo, n, (c + u * S) * 8u, a0[u], a1[u], ss[u]);
        for (; c < nch; c += S) chunk(xo, n, c * 8u, a0[0], a1[0], ss[0]);
        [[unroll]] for (uint u = 1u; u < UNROLL; u++) {
            a0[0] += a0[u];
            a1[0] += a1[u];
            ss[0] += ss[u];
        }
        float s0 = subgroupAdd(a0[0]);
#if GLU
        float s1 = subgroupAdd(a1[0]);
#endif
#if HAS_NORM
        float sc = inversesqrt(subgroupAdd(ss[0]) / float(K) + NORM_EPS);
        s0 *= sc;
#if GLU
        s1 *= sc;
#endif
#endif
        if (subgroupElect()) {
#if GLU
            float v = silu(s0) * s1;
#else
            float v = s0;
#endif
            yout[t * uint(N) + n] = ACT_T(epilogue(t, n, v));
        }
    }
}
