// mlp.glsl: the whole SwiGLU MLP in one kernel,
//   y = [r +] down( silu(x.gate) * (x.up) ),  x optionally RMS-normalized,
// with the intermediate staged on chip block by block, never in VRAM.
//
// The grid is NSPLIT x ceil(T / TT). Workgroup (s, j) owns tokens
// j*TT .. j*TT+TT-1 and the slice s*SLICE .. of the intermediate. It walks
// its slice in blocks of MB: each subgroup computes gate and up rows of the
// block for all its tokens (lanes split the hidden dimension), the SwiGLU
// values go to shared memory, then every thread adds the block's share of
// the down projection into the TT x H fp32 accumulator for the hidden
// columns it owns (each down element dequantized once per token tile).
//
// NSPLIT == 1 (prefill): the accumulator plus the add is the output.
// NSPLIT > 1 (decode): each workgroup writes its accumulator as a partial
// sum into the scratch binding; the last one to finish (an atomic counter
// per token tile, which it resets for the next replay) adds the partials in
// slice order, so the result does not depend on which one is last.
//
// Defines: H, FF, TT, MB, SLICE, NSPLIT, TMAX (token capacity of the
// scratch), WG; W0 gate, W1 up, W2 down (types and row bytes); B_SCR.

layout(local_size_x = WG) in;

shared float acc_s[TT * H]; // [token][hidden]
shared float act_s[TT * MB]; // [token][block row]
shared float sc_s[TT];

#if NSPLIT > 1
layout(std430, binding = B_SCR) coherent buffer Sb {
    uint scnt[SCR_CNT]; // one counter per token tile
    float spart[];      // [slice][token][hidden]
};
shared bool last_s;
#endif

// Gate and up rows fb .. fb+MB-1 for the tile's nt tokens -> act_s.
void gate_up_block(uint t0, uint nt, uint fb, uint f_hi) {
    for (uint r = gl_SubgroupID; r < uint(MB); r += gl_NumSubgroups) {
        uint f = fb + r;
        float ga[TT], ua[TT];
        [[unroll]] for (uint t = 0u; t < uint(TT); t++) {
            ga[t] = 0.0;
            ua[t] = 0.0;
        }
        if (f < f_hi) {
            for (uint c = gl_SubgroupInvocationID; c < uint(H) / 8u; c += gl_SubgroupSize) {
                uint k0 = c * 8u;
                float gv[8], uv[8];
                DQ8(WQ_W0, W0_TYPE, W0_ROWB, f, k0, gv);
                DQ8(WQ_W1, W1_TYPE, W1_ROWB, f, k0, uv);
#if HAS_NORM
                float nv[8];
                DQ8(WQ_NW, NW_TYPE, 0u, 0u, k0, nv);
#endif
                [[unroll]] for (uint t = 0u; t < uint(TT); t++) {
                    if (t >= nt) break;
                    uint xo = (t0 + t) * uint(H) + k0;
                    [[unroll]] for (uint i = 0u; i < 8u; i++) {
#if HAS_NORM
                        float xv = float(xin[xo + i]) * nv[i];
#else
                        float xv = float(xin[xo + i]);
#endif
                        ga[t] += xv * gv[i];
                        ua[t] += xv * uv[i];
                    }
                }
            }
        }
        [[unroll]] for (uint t = 0u; t < uint(TT); t++) {
            float g = subgroupAdd(ga[t]) * sc_s[t], u = subgroupAdd(ua[t]) * sc_s[t];
            if (subgroupElect()) act_s[t * uint(MB) + r] = (f < f_hi && t < nt) ? silu(g) * u : 0.0;
        }
    }
}

// acc[t][h] += sum over the block of act[t][f] * down[h][f].
void down_block(uint nt, uint fb, uint f_hi) {
    for (uint h = gl_LocalInvocationIndex; h < uint(H); h += uint(WG)) {
        float wv[MB];
        [[unroll]] for (uint c = 0u; c < uint(MB); c += 8u) {
            float v[8];
            bool ok = fb + c < f_hi;
            if (ok) DQ8(WQ_W2, W2_TYPE, W2_ROWB, h, fb + c, v);
            [[unroll]] for (uint i = 0u; i < 8u; i++) wv[c + i] = ok ? v[i] : 0.0;
        }
        for (uint t = 0u; t < nt; t++) {
            float a = 0.0;
            [[unroll]] for (uint f = 0u; f < uint(MB); f++) a += act_s[t * uint(MB) + f] * wv[f];
            acc_s[t * uint(H) + h] += a;
        }
    }
}

void main() {
    uint tid = gl_LocalInvocationIndex, s = gl_WorkGroupID.x;
    uint T = min(step.T, uint(TMAX)), t0 = gl_WorkGroupID.y * uint(TT);
    if (t0 >= T) return;
    uint nt = min(uint(TT), T - t0);
    for (uint t = gl_SubgroupID; t < uint(TT); t += gl_NumSubgroups) {
        float sc = 1.0;
#if HAS_NORM
        if (t < nt) sc = subgroup_inv_rms((t0 + t) * uint(H), uint(H), NORM_EPS);
#endif
        if (subgroupElect()) sc_s[t] = sc;
    }
    for (uint i = tid; i < uint(TT * H); i += uint(WG)) acc_s[i] = 0.0;
    barrier();
    uint f_lo = s * uint(SLICE), f_hi = min(f_lo + uint(SLICE), uint(FF));
    for (uint fb = f_lo; fb < f_hi; fb += uint(MB)) {
        gate_up_block(t0, nt, fb, f_hi);
        barrier();
        down_block(nt, fb, f_hi);
        barrier();
    }
#if NSPLIT == 1
    for (uint i = tid; i < nt * uint(H); i += uint(WG)) {
        uint t = t0 + i / uint(H), h = i % uint(H);
        yout[t * uint(H) + h] = ACT_T(epilogue(t, h, acc_s[i]));
    }
#else
    for (uint i = tid; i < nt * uint(H); i += uint(WG))
        spart[(s * uint(TMAX) + t0) * uint(H) + i] = acc_s[i];
    memoryBarrierBuffer();
    barrier();
    if (tid == 0u) last_s = atomicAdd(scnt[gl_WorkGroupID.y], 1u) == uint(NSPLIT) - 1u;
    barrier();
    if (!last_s) return;
    memoryBarrierBuffer();
    for (uint i = tid; i < nt * uint(H); i += uint(WG)) {
        float v = 0.0;
        for (uint p = 0u; p < uint(NSPLIT); p++) v += spart[(p * uint(TMAX) + t0) * uint(H) + i];
        uint t = t0 + i / uint(H), h = i % uint(H);
        yout[t * uint(H) + h] = ACT_T(epilogue(t, h, v));
    }
    if (tid == 0u) scnt[gl_WorkGroupID.y] = 0u;
#endif
}
