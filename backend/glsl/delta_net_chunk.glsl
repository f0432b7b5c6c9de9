// delta_net_chunk.glsl: the gated delta rule over a step's tokens in chunks
// of C (prefill). The rule and the state layout are delta_net.glsl's: per
// value head h (key head h % HK), M[j][i], j over values, i over keys, and
// per token M <- e^g M + u k^T with u = beta (v - e^g M k), o = M q SCALE.
// Within a chunk, with M0 the state before it and G_t the sum of the gates
// of its tokens up to t (G_t - G_s <= 0: the gates are log decays):
//   M_t = e^G_t M0 + sum_{s<=t} e^(G_t-G_s) u_s k_s^T
// so the chunk's u are the solution of a unit lower-triangular system (the
// WY / UT form of the rule),
//   u_t + sum_{s<t} A[t][s] u_s = beta_t (v_t - e^G_t M0 k_t),
//   A[t][s] = beta_t e^(G_t-G_s) (k_t . k_s),
// and the outputs and the state after the chunk are
//   o_t = (e^G_t M0 q_t + sum_{s<=t} B[t][s] u_s) SCALE,
//   B[t][s] = e^(G_t-G_s) (q_t . k_s),
//   M <- e^G_n M0 + sum_s e^(G_n-G_s) u_s k_s^T   (n: the chunk's last token).
// A and B (the chunk's attention-like C x C products) are shared by the
// head's D rows; the rows never meet otherwise.
//
// Lanes: L lanes share a row j of M, lane l holding its keys' slice
// [l DL, (l+1) DL) (DL = D / L) in registers, so a head is L workgroups of
// D / L rows each (D invocations a workgroup). M0 k_t and M0 q_t for the
// whole chunk depend only on the state before it, so they are computed
// first, TB tokens at a time (2 TB independent sums over the lane's slice,
// in 16-byte shared loads), and summed over the row's lanes by shuffles;
// then each lane solves its row's u_t by forward substitution (every lane
// of the row the same values, each in its own column of su), with no
// barrier between tokens; and the state update sums over the chunk's
// tokens for each of the lane's DL elements independently.
//
// Why (run 45, Qwen3.5-9B on the H200): the kernel this replaced (a thread
// per row, one workgroup per value head) took 793 us a layer of a 512-token
// step, 19 % of the step: 32 workgroups of 128 threads for the whole
// device, each thread's M0 k_t and M0 q_t two dependent D-long chains per
// token, and each token's v loaded from VRAM inside the serial loop.
//
// At position 0 the state reads as zeros; it is stored once at the end of
// the step. The lanes of a row are consecutive invocations of one subgroup
// (L <= 4, and every subgroup holds 4). With L2K_EPS / L2Q_EPS (fuse-delta)
// the staged keys and queries are L2-normed per row in shared memory, one
// barrier more a chunk.
// Defines: D, HK, HV, C, L, SCALE; after delta_net_io.glsl.
#extension GL_KHR_shader_subgroup_shuffle : require
layout(local_size_x = D) in;

#define D4 (D / 4u)       /* 16-byte vectors of a key row */
#define DL (D / L)        /* a lane's elements of its state row */
#define DL4 (DL / 4u)
#define RW (D / L)        /* rows of the head a workgroup holds */
#define TB 4u             /* tokens whose M0 k and M0 q are summed together */

shared vec4 sk4[C * D4], sq4[C * D4]; // the chunk's keys and queries, row t at t * D4
shared float su[C * D];               // v_t, then u_t, of invocation x's row at t * D + x: its own
shared float sa[C * C], sb[C * C];    // A and B above, [t][s] at t * C + s
shared float sgr[C], sg[C], sbeta[C]; // the gates, their running sums G_t, beta_t
#if defined(L2K_EPS) || defined(L2Q_EPS)
#define L2 1
shared float snorm[2 * C]; // fuse-delta: 1 / |k_t| at t, 1 / |q_t| at C + t
#endif

float hsum(vec4 a) { return (a.x + a.y) + (a.z + a.w); }

// Stages the chunk's n tokens from c0: keys, queries, the gates and beta,
// and v of this invocation's row into its own column of su.
void stage(uint c0, uint n, uint hk, uint h, uint j, uint x) {
    for (uint e = x; e < n * D4; e += D) {
        uint t = e / D4, b = K_IDX(c0 + t, hk, 4u * (e % D4)), a = Q_IDX(c0 + t, hk, 4u * (e % D4));
        sk4[e] = vec4(float(K_AT(b)), float(K_AT(b + 1u)), float(K_AT(b + 2u)), float(K_AT(b + 3u)));
        sq4[e] = vec4(float(Q_AT(a)), float(Q_AT(a + 1u)), float(Q_AT(a + 2u)), float(Q_AT(a + 3u)));
    }
    [[unroll]] for (uint t = 0u; t < C; t++)
        if (t < n) su[t * D + x] = float(V_AT(V_IDX(c0 + t, h, j)));
    for (uint t = x; t < n; t += D) { // C may exceed D
        sgr[t] = float(g[(c0 + t) * HV + h]);
        sbeta[t] = float(beta[(c0 + t) * HV + h]);
    }
}

// G_t, summed in token order (the rule's order of the decays); with
// fuse-delta's norms also each staged key's and query's 1 / |row| (their
// 2n rows spread over the workgroup).
void gate_sums(uint n, uint x) {
    for (uint t = x; t < n; t += D) {
        float cg = 0.0;
        for (uint s = 0u; s <= t; s++) cg += sgr[s];
        sg[t] = cg;
    }
#ifdef L2
    for (uint r = x; r < 2u * n; r += D) {
        uint t = r < n ? r : r - n;
        vec4 ss = vec4(0.0);
        if (r < n)
            for (uint i = 0u; i < D4; i++) ss += sk4[t * D4 + i] * sk4[t * D4 + i];
        else
            for (uint i = 0u; i < D4; i++) ss += sq4[t * D4 + i] * sq4[t * D4 + i];
#ifdef L2K_EPS
        if (r < n) snorm[r] = l2_scale(hsum(ss), L2K_EPS);
#endif
#ifdef L2Q_EPS
        if (r >= n) snorm[C + t] = l2_scale(hsum(ss), L2Q_EPS);
#endif
    }
#endif
}

#ifdef L2
// The staged keys and queries times their scales (after gate_sums' barrier).
void apply_norms(uint n, uint x) {
    for (uint e = x; e < n * D4; e += D) {
#ifdef L2K_EPS
        sk4[e] *= snorm[e / D4];
#endif
#ifdef L2Q_EPS
        sq4[e] *= snorm[C + e / D4];
#endif
    }
}
#endif

// A and B of the staged chunk: n x n dot products of D, spread over the
// workgroup (entries above the diagonal are never read).
void products(uint n, uint x) {
    for (uint e = x; e < n * n; e += D) {
        uint t = e / n, s = e % n;
        if (s > t) continue;
        vec4 kk = vec4(0.0), qk = vec4(0.0);
        for (uint i = 0u; i < D4; i++) {
            vec4 ks = sk4[s * D4 + i];
            kk += sk4[t * D4 + i] * ks;
            qk += sq4[t * D4 + i] * ks;
        }
        float decay = exp(sg[t] - sg[s]);
        sa[t * C + s] = sbeta[t] * decay * hsum(kk);
        sb[t * C + s] = decay * hsum(qk);
    }
}

// A sum over the row's L lanes (consecutive invocations of a subgroup).
float row_sum(float a) {
    [[unroll]] for (uint b = 1u; b < L; b <<= 1u) a += subgroupShuffleXor(a, b);
    return a;
}

void main() {
    uint h = gl_WorkGroupID.x / L, x = gl_LocalInvocationID.x, hk = h % HK;
    uint l = x % L, j = (gl_WorkGroupID.x % L) * RW + x / L; // lane, and the row of the head
    uint row = (h * D + j) * D + l * DL;                     // the lane's slice of M[j]
    float m[DL];
    bool fresh = step.pos == 0u; // a new sequence: the buffer holds the last one's state
    [[unroll]] for (uint i = 0u; i < DL; i++) m[i] = fresh ? 0.0 : st[row + i];
    for (uint c0 = 0u; c0 < step.T; c0 += C) {
        uint n = min(uint(C), step.T - c0);
        barrier(); // the previous chunk's keys, gates and products are read
        stage(c0, n, hk, h, j, x);
        barrier();
        gate_sums(n, x);
        barrier();
#ifdef L2
        apply_norms(n, x);
        barrier();
#endif
        products(n, x);
        barrier();
        for (uint t0 = 0u; t0 < n; t0 += TB) {
            // M0 k_t and M0 q_t of TB tokens over the lane's slice, then the row's
            vec4 wk[TB], wq[TB];
            [[unroll]] for (uint b = 0u; b < TB; b++) wk[b] = wq[b] = vec4(0.0);
            [[unroll]] for (uint i = 0u; i < DL4; i++) {
                vec4 mi = vec4(m[4u * i], m[4u * i + 1u], m[4u * i + 2u], m[4u * i + 3u]);
                [[unroll]] for (uint b = 0u; b < TB; b++) {
                    uint o = min(t0 + b, n - 1u) * D4 + l * DL4 + i;
                    wk[b] += mi * sk4[o];
                    wq[b] += mi * sq4[o];
                }
            }
            float mk[TB], mq[TB];
            [[unroll]] for (uint b = 0u; b < TB; b++) {
                mk[b] = row_sum(hsum(wk[b]));
                mq[b] = row_sum(hsum(wq[b]));
            }
            [[unroll]] for (uint b = 0u; b < TB; b++) {
                uint t = t0 + b;
                if (t >= n) break; // uniform
                float decay = exp(sg[t]);
                float u = sbeta[t] * (su[t * D + x] - decay * mk[b]);
                for (uint s = 0u; s < t; s++) u -= sa[t * C + s] * su[s * D + x];
                su[t * D + x] = u;
                float o = decay * mq[b];
                for (uint s = 0u; s <= t; s++) o += sb[t * C + s] * su[s * D + x];
                if (l == 0u) y[((c0 + t) * HV + h) * D + j] = ACT_T(o * SCALE);
            }
        }
        float last = sg[n - 1u], decay = exp(last);
        [[unroll]] for (uint i = 0u; i < DL; i++) m[i] *= decay;
        for (uint s = 0u; s < n; s++) {
            float us = exp(last - sg[s]) * su[s * D + x];
            [[unroll]] for (uint i = 0u; i < DL4; i++) {
                vec4 kv = sk4[s * D4 + l * DL4 + i];
                m[4u * i] += us * kv.x;
                m[4u * i + 1u] += us * kv.y;
                m[4u * i + 2u] += us * kv.z;
                m[4u * i + 3u] += us * kv.w;
            }
        }
    }
    [[unroll]] for (uint i = 0u; i < DL; i++) st[row + i] = m[i];
}
