// mlp.glsl: the whole SwiGLU MLP in one kernel,
//   y = [r +] down( silu(x.gate) * (x.up) ),  x optionally RMS-normalized,
// with the intermediate staged on chip block by block, never in VRAM.
//
// The grid is NSPLIT x ceil(T / TT). Workgroup (s, j) owns tokens
// j*TT .. j*TT+TT-1 and the slice s*SLICE .. of the intermediate. It walks
// its slice in blocks of MB: each subgroup computes gate and up rows of the
// block for all its tokens (lanes split the hidden dimension), the SwiGLU
// values go to shared memory, then the block's share of the down projection
// is added into the TT x H fp32 accumulator in shared memory (each down
// element dequantized once per token tile).
//
// NSPLIT == 1 (prefill): the accumulator plus the add is the output.
// NSPLIT > 1 (decode): each workgroup writes its accumulator as a partial
// sum into the scratch binding, in RC chunks of the hidden dimension; the
// last one to bring a chunk (an atomic counter per token tile and chunk,
// which it resets for the next replay) adds that chunk's partials in slice
// order, so the result does not depend on which one is last.
//
// The norm costs no pass of its own: lanes walking a gate/up row see all of
// x, so they sum x^2 on the way and scale the finished dot products.
// Down-projection rows are read by groups of G = MB/8 lanes (8 elements
// each, neighbouring lanes on neighbouring bytes), finished by shuffles.
//
// Defines: H, FF, TT, MB (8 G, G a power of two <= 8), SLICE, NSPLIT, TMAX
// (token capacity of the scratch), RC (reduction chunks, split only), WG,
// DU (down rows per trip), GU (gate/up chunks per trip, each with its own
// sums so that their loads overlap); W0 gate, W1 up, W2 down (types and row
// bytes); B_SCR, SCR_CNT.

#extension GL_KHR_shader_subgroup_shuffle : require

layout(local_size_x = WG) in;

#define G (MB / 8)

shared float acc_s[TT * H];  // [token][hidden]
shared float act_s[TT * MB]; // [token][block row]

#if NSPLIT > 1
layout(std430, binding = B_SCR) coherent buffer Sb {
    uint scnt[SCR_CNT]; // [token tile][hidden chunk] arrival counters
    float spart[];      // [slice][token][hidden]
};
shared bool last_s;
#define RC_LEN ((H + RC - 1) / RC)
#endif

// One 8-element chunk at k0 of gate and up row f, for the tile's tokens.
void gu_chunk(uint t0, uint nt, uint f, uint k0, inout float ga[TT], inout float ua[TT], inout float ss[TT]) {
    float gv[8], uv[8];
    DQ8(WQ_W0, W0_TYPE, W0_ROWB, f, k0, gv);
    DQ8(WQ_W1, W1_TYPE, W1_ROWB, f, k0, uv);
#if HAS_NORM
    float nv[8];
    DQ8(WQ_NW, NW_TYPE, 0u, 0u, k0, nv);
#endif
    [[unroll]] for (uint t = 0u; t < uint(TT); t++) {
        if (t >= nt) break;
        float x8[8];
        load_x8((t0 + t) * uint(H) + k0, x8);
        [[unroll]] for (uint i = 0u; i < 8u; i++) {
            float xv = x8[i];
#if HAS_NORM
            ss[t] += xv * xv;
            xv *= nv[i];
#endif
            ga[t] += xv * gv[i];
            ua[t] += xv * uv[i];
        }
    }
}

// Gate and up rows fb .. fb+MB-1 for the tile's nt tokens -> act_s.
void gate_up_block(uint t0, uint nt, uint fb, uint f_hi) {
    uint S = gl_SubgroupSize, nch = uint(H) / 8u;
    for (uint r = gl_SubgroupID; r < uint(MB); r += gl_NumSubgroups) {
        uint f = fb + r;
        float ga[GU][TT], ua[GU][TT], ss[GU][TT];
        [[unroll]] for (uint u = 0u; u < uint(GU); u++)
            [[unroll]] for (uint t = 0u; t < uint(TT); t++) {
                ga[u][t] = 0.0;
                ua[u][t] = 0.0;
                ss[u][t] = 0.0;
            }
        if (f < f_hi) {
            uint c = gl_SubgroupInvocationID;
            for (; c + uint(GU - 1) * S < nch; c += uint(GU) * S)
                [[unroll]] for (uint u = 0u; u < uint(GU); u++) gu_chunk(t0, nt, f, (c + u * S) * 8u, ga[u], ua[u], ss[u]);
            for (; c < nch; c += S) gu_chunk(t0, nt, f, c * 8u, ga[0], ua[0], ss[0]);
        }
        [[unroll]] for (uint t = 0u; t < uint(TT); t++) {
            float g = 0.0, u = 0.0, q = 0.0;
            [[unroll]] for (uint v = 0u; v < uint(GU); v++) {
                g += ga[v][t];
                u += ua[v][t];
                q += ss[v][t];
            }
            g = subgroupAdd(g);
            u = subgroupAdd(u);
#if HAS_NORM
            float sc = inversesqrt(subgroupAdd(q) / float(H) + NORM_EPS);
            g *= sc;
            u *= sc;
#endif
            if (subgroupElect()) act_s[t * uint(MB) + r] = (f < f_hi && t < nt) ? silu(g) * u : 0.0;
        }
    }
}

// acc[t][h] += sum over the block of act[t][f] * down[h][f]: a group of G
// lanes per row h, lane g on elements 8g .. 8g+7 of the block; DU rows per
// trip, their loads issued together.
void down_block(uint nt, uint fb, uint f_hi) {
    uint S = gl_SubgroupSize, g = gl_SubgroupInvocationID % uint(G);
    uint grp = gl_SubgroupID * (S / uint(G)) + gl_SubgroupInvocationID / uint(G);
    uint ngrp = gl_NumSubgroups * (S / uint(G)), fc = fb + g * 8u;
    for (uint h0 = 0u; h0 < uint(H); h0 += uint(DU) * ngrp) {
        float v[DU][8];
        [[unroll]] for (uint u = 0u; u < uint(DU); u++) {
            uint h = h0 + u * ngrp + grp;
            if (h < uint(H) && fc < f_hi) DQ8(WQ_W2, W2_TYPE, W2_ROWB, h, fc, v[u]);
            else [[unroll]] for (uint i = 0u; i < 8u; i++) v[u][i] = 0.0;
        }
        [[unroll]] for (uint t = 0u; t < uint(TT); t++)
            [[unroll]] for (uint u = 0u; u < uint(DU); u++) {
                uint h = h0 + u * ngrp + grp;
                float a = 0.0;
                [[unroll]] for (uint i = 0u; i < 8u; i++) a += act_s[t * uint(MB) + g * 8u + i] * v[u][i];
#if G > 1
                a += subgroupShuffleXor(a, 1u);
#endif
#if G > 2
                a += subgroupShuffleXor(a, 2u);
#endif
#if G > 4
                a += subgroupShuffleXor(a, 4u);
#endif
                if (g == 0u && h < uint(H) && t < nt) acc_s[t * uint(H) + h] += a;
            }
    }
}

#if NSPLIT > 1
// Sum of the NSPLIT partials of element (t, h), in slice order whoever
// computes it; four independent loads per trip keep the memory busy.
float sum_partials(uint t, uint h) {
    float a[4] = float[4](0.0, 0.0, 0.0, 0.0);
    uint p = 0u, stride = uint(TMAX) * uint(H), o = t * uint(H) + h;
    for (; p + 3u < uint(NSPLIT); p += 4u)
        [[unroll]] for (uint j = 0u; j < 4u; j++) a[j] += spart[(p + j) * stride + o];
    for (; p < uint(NSPLIT); p++) a[0] += spart[p * stride + o];
    return (a[0] + a[1]) + (a[2] + a[3]);
}

// Writes this workgroup's partial sums chunk by chunk of the hidden
// dimension, starting at a chunk that depends on the slice, and counts each
// chunk in: whichever workgroup brings a chunk's last partial reduces that
// chunk (and resets its counter for the next replay). The rotation spreads
// the reduction over many workgroups instead of leaving it all to the last.
void publish(uint s, uint t0, uint nt) {
    uint tid = gl_LocalInvocationIndex, cb = gl_WorkGroupID.y * uint(RC);
    for (uint q = 0u; q < uint(RC); q++) {
        uint c = (s + q) % uint(RC), h_lo = min(c * uint(RC_LEN), uint(H));
        uint len = min(uint(RC_LEN), uint(H) - h_lo);
        for (uint i = tid; i < nt * len; i += uint(WG)) {
            uint t = i / len, h = h_lo + i % len;
            spart[(s * uint(TMAX) + t0 + t) * uint(H) + h] = acc_s[t * uint(H) + h];
        }
        memoryBarrierBuffer();
        barrier();
        if (tid == 0u) last_s = atomicAdd(scnt[cb + c], 1u) == uint(NSPLIT) - 1u;
        barrier();
        if (last_s) {
            memoryBarrierBuffer();
            for (uint i = tid; i < nt * len; i += uint(WG)) {
                uint t = t0 + i / len, h = h_lo + i % len;
                yout[t * uint(H) + h] = ACT_T(epilogue(t, h, sum_partials(t, h)));
            }
            if (tid == 0u) scnt[cb + c] = 0u;
        }
        barrier(); /* last_s is rewritten next round */
    }
}
#endif

void main() {
    uint tid = gl_LocalInvocationIndex, s = gl_WorkGroupID.x;
    uint T = min(step.T, uint(TMAX)), t0 = gl_WorkGroupID.y * uint(TT);
    if (t0 >= T) return;
    uint nt = min(uint(TT), T - t0);
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
    publish(s, t0, nt);
#endif
}
