// delta_net_scan.glsl: the serial half of the chunked delta rule
// (prefill), after delta_net_prep.glsl has solved every chunk's state-free
// part into the scratch X (its header says what is where). Per chunk, with
// M0 the state before it and row j of M held by L lanes (lane l the keys
// [l DL, (l+1) DL)):
//   u_t[j] = U_t[j] - M0[j] . W_t
//   o_t[j] = (e^G_t M0[j] . q_t + sum_{s<=t} B[t][s] u_s[j]) SCALE
//   M[j]  <- e^G_last M0[j] + sum_s e^(G_last-G_s) u_s[j] k_s
// The chunk's dot products are independent of each other (TB tokens at a
// time, summed over the row's lanes by shuffles), and nothing in the chain
// waits for VRAM: the next chunk's rows are loaded into registers while
// this one is computed, then stored to shared memory at the top of the
// next. A head is L workgroups of D / L rows (D invocations each).
//
// Why (run 51, Qwen3.5-9B on the H200): the one-kernel chunked scan
// (delta_net_chunk.glsl) took 836 us a layer of a 512-token step, 20 % of
// the step, for ~1.6 GFLOP: each of its 32 chunks waited on its own VRAM
// loads, five barriers, the C x C products and a forward substitution of
// dependent loads, all in series.
//
// At position 0 the state reads as zeros; it is stored once at the end.
// Defines: D, HK, HV, C, L, SCALE, XK, XQ, XW, XU (vec4 offsets), XB, XG
// (float offsets), B_X; after delta_net_io.glsl.
#extension GL_KHR_shader_subgroup_shuffle : require
layout(local_size_x = D) in;

layout(std430, set = 0, binding = B_X) readonly buffer X { vec4 x4[]; };

#define D4 (D / 4u)
#define DL (D / L)  /* a lane's elements of its state row */
#define DL4 (DL / 4u)
#define RW (D / L)  /* rows of the head a workgroup holds */
#define TB 4u       /* tokens whose M0 . W_t and M0 . q_t are summed together */
#define PV ((C * D4 + D - 1u) / D)  /* 16-byte rows of each of W, q and k a lane prefetches */
#define PB ((C * C + D - 1u) / D)   /* and of B's floats */
#define PG ((C + D - 1u) / D)       /* and of G's (C may exceed D) */

shared vec4 sw4[C * D4], sq4[C * D4], sk4[C * D4]; // W, the normed q and k of the chunk, row t at t * D4
shared float sb[C * C], sg[C];                     // B [t][s] at t * C + s, G_t

float xs(uint i) { return x4[i >> 2u][i & 3u]; }
float hsum(vec4 a) { return (a.x + a.y) + (a.z + a.w); }

// A sum over the row's L lanes (consecutive invocations of a subgroup).
float row_sum(float a) {
    [[unroll]] for (uint b = 1u; b < L; b <<= 1u) a += subgroupShuffleXor(a, b);
    return a;
}

// The rows of chunk c this invocation stages (e = x + p D) and its row's U.
vec4 pw[PV], pq[PV], pk[PV];
float pb[PB], pg[PG], pu[C];
void fetch(uint c, uint h, uint hk, uint j, uint x) {
    uint c0 = c * C;
    [[unroll]] for (uint p = 0u; p < PV; p++) {
        uint e = min(x + p * D, C * D4 - 1u), t = e / D4, i = e % D4;
        pw[p] = x4[uint(XW) + ((c0 + t) * HV + h) * D4 + i];
        pq[p] = x4[uint(XQ) + ((c0 + t) * HK + hk) * D4 + i];
        pk[p] = x4[uint(XK) + ((c0 + t) * HK + hk) * D4 + i];
    }
    [[unroll]] for (uint p = 0u; p < PB; p++) pb[p] = xs(uint(XB) + (c * HV + h) * (C * C) + min(x + p * D, C * C - 1u));
    [[unroll]] for (uint p = 0u; p < PG; p++) pg[p] = xs(uint(XG) + (c0 + min(x + p * D, uint(C) - 1u)) * HV + h);
    [[unroll]] for (uint t = 0u; t < C; t++) pu[t] = xs(uint(XU) * 4u + ((c0 + t) * HV + h) * D + j);
}

void main() {
    uint h = gl_WorkGroupID.x / L, x = gl_LocalInvocationID.x, hk = h % HK;
    uint l = x % L, j = (gl_WorkGroupID.x % L) * RW + x / L; // lane, and the row of the head
    uint row = (h * D + j) * D + l * DL;                     // the lane's slice of M[j]
    float m[DL];
    bool fresh = step.pos == 0u; // a new sequence: the buffer holds the last one's state
    [[unroll]] for (uint i = 0u; i < DL; i++) m[i] = fresh ? 0.0 : st[row + i];
    uint nc = (step.T + C - 1u) / C;
    fetch(0u, h, hk, j, x);
    for (uint c = 0u; c < nc; c++) {
        uint c0 = c * C, n = min(uint(C), step.T - c0);
        barrier(); // the previous chunk's rows are read
        [[unroll]] for (uint p = 0u; p < PV; p++) {
            uint e = x + p * D;
            if (e < C * D4) {
                sw4[e] = pw[p];
                sq4[e] = pq[p];
                sk4[e] = pk[p];
            }
        }
        [[unroll]] for (uint p = 0u; p < PB; p++)
            if (x + p * D < C * C) sb[x + p * D] = pb[p];
        [[unroll]] for (uint p = 0u; p < PG; p++)
            if (x + p * D < C) sg[x + p * D] = pg[p];
        float u[C];
        [[unroll]] for (uint t = 0u; t < C; t++) u[t] = pu[t];
        barrier();
        if (c + 1u < nc) fetch(c + 1u, h, hk, j, x); // in flight while this chunk is computed
        [[unroll]] for (uint t0 = 0u; t0 < C; t0 += TB) {
            vec4 ww[TB], wq[TB];
            [[unroll]] for (uint b = 0u; b < TB; b++) ww[b] = wq[b] = vec4(0.0);
            [[unroll]] for (uint i = 0u; i < DL4; i++) {
                vec4 mi = vec4(m[4u * i], m[4u * i + 1u], m[4u * i + 2u], m[4u * i + 3u]);
                [[unroll]] for (uint b = 0u; b < TB; b++) {
                    uint o = min(t0 + b, uint(C) - 1u) * D4 + l * DL4 + i;
                    ww[b] += mi * sw4[o];
                    wq[b] += mi * sq4[o];
                }
            }
            [[unroll]] for (uint b = 0u; b < TB; b++) {
                uint t = t0 + b;
                if (t < C) {
                    float mw = row_sum(hsum(ww[b])), mq = row_sum(hsum(wq[b]));
                    u[t] -= mw;
                    float o = exp(sg[t]) * mq;
                    [[unroll]] for (uint s = 0u; s <= t; s++) o += sb[t * C + s] * u[s];
                    if (t < n && t % L == l) y[((c0 + t) * HV + h) * D + j] = ACT_T(o * SCALE);
                }
            }
        }
        float last = sg[C - 1u];
        [[unroll]] for (uint s = 0u; s < C; s++) u[s] *= exp(last - sg[s]);
        float decay = exp(last);
        [[unroll]] for (uint i = 0u; i < DL; i++) m[i] *= decay;
        [[unroll]] for (uint s = 0u; s < C; s++) {
            [[unroll]] for (uint i = 0u; i < DL4; i++) {
                vec4 kv = sk4[s * D4 + l * DL4 + i];
                m[4u * i] += u[s] * kv.x;
                m[4u * i + 1u] += u[s] * kv.y;
                m[4u * i + 2u] += u[s] * kv.z;
                m[4u * i + 3u] += u[s] * kv.w;
            }
        }
    }
    [[unroll]] for (uint i = 0u; i < DL; i++) st[row + i] = m[i];
}
