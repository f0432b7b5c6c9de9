// delta_net.glsl: the gated delta rule, token by token, with its state.
// Per value head h (key head h % HK) the state is M[j][i], j over values, i
// over keys ([HV, D, D], the interpreter's layout). For each token:
//   M *= exp(g);  d[j] = (v[j] - M[j] . k) * beta;  M[j][i] += k[i] d[j];
//   o[j] = (M[j] . q) * SCALE
// Row j of M needs only k, q, v[j] and the head's two gates: the rows never
// meet, so a head's rows are spread over D / RW workgroups of RW rows, and
// each row over LPK threads that hold E = D / LPK consecutive elements of
// it in registers for the whole step (a row's loads and stores are LPK
// threads' contiguous runs). The two dot products a token are each
// thread's E terms, then the row's LPK partials in order through shared
// memory (two barriers a token). The state is read once and written once a
// step, in place; at position 0 (a new sequence) it reads as zeros.
//
// Why: the previous form, a workgroup per value head and a thread per row
// (the whole row in its registers, each load of a subgroup 32 rows apart),
// ran 32 workgroups on the H200 at Qwen3.5-9B's shape and took 38.8 us a
// layer for 4 MB of state (docs/performance.md, run 43).
//
// Decode's kernel: prefill runs the chunked scan of delta_net_chunk.glsl
// (cg_recur.c chooses), which takes the state's serial step once a chunk.
// With L2K_EPS / L2Q_EPS (fuse-delta) each token's k and q are normed
// here: the row's threads' partial sums of squares through shared memory,
// one barrier more a token.
// Defines: D, HK, HV, SCALE, LPK (threads a row, dividing D), RW (rows a
// workgroup, dividing D), WG = RW * LPK; after delta_net_io.glsl.
layout(local_size_x = WG) in;

const uint E = D / LPK;
shared float red_k[WG], red_q[WG];
#if defined(L2K_EPS) || defined(L2Q_EPS)
shared vec2 red_n[WG]; // the partial sums of squares of k and q
#endif

void main() {
    uint tid = gl_LocalInvocationID.x, r = tid / LPK, c = tid % LPK;
    uint h = gl_WorkGroupID.x / (D / RW), j = (gl_WorkGroupID.x % (D / RW)) * RW + r, hk = h % HK;
    uint row = (h * D + j) * D + c * E;
    bool fresh = step.pos == 0u;
    float m[E];
    [[unroll]] for (uint e = 0u; e < E; e++) m[e] = fresh ? 0.0 : st[row + e];
    for (uint t = 0u; t < step.T; t++) {
        uint kb = K_IDX(t, hk, c * E), qb = Q_IDX(t, hk, c * E);
        float kk[E], qq[E];
        [[unroll]] for (uint e = 0u; e < E; e++) {
            kk[e] = float(K_AT(kb + e));
            qq[e] = float(Q_AT(qb + e));
        }
#if defined(L2K_EPS) || defined(L2Q_EPS)
        // the head rows' L2 norms: the row's LPK threads hold all of k and q
        // (every row of the workgroup the same); red_n is free, its last
        // reads came before the last token's first barrier
        vec2 pn = vec2(0.0);
        [[unroll]] for (uint e = 0u; e < E; e++) pn += vec2(kk[e] * kk[e], qq[e] * qq[e]);
        red_n[tid] = pn;
        barrier();
        pn = vec2(0.0);
        for (uint i = 0u; i < LPK; i++) pn += red_n[r * LPK + i];
#ifdef L2K_EPS
        float sk = l2_scale(pn.x, L2K_EPS);
        [[unroll]] for (uint e = 0u; e < E; e++) kk[e] *= sk;
#endif
#ifdef L2Q_EPS
        float sq = l2_scale(pn.y, L2Q_EPS);
        [[unroll]] for (uint e = 0u; e < E; e++) qq[e] *= sq;
#endif
#endif
        float decay = exp(float(g[t * HV + h])), b = float(beta[t * HV + h]);
        float mk = 0.0;
        [[unroll]] for (uint e = 0u; e < E; e++) {
            m[e] *= decay;
            mk += m[e] * kk[e];
        }
        // red_k is free: every read of the last token's came before its
        // second barrier
        red_k[tid] = mk;
        barrier();
        mk = 0.0;
        for (uint i = 0u; i < LPK; i++) mk += red_k[r * LPK + i];
        float dj = (float(V_AT(V_IDX(t, h, j))) - mk) * b;
        float o = 0.0;
        [[unroll]] for (uint e = 0u; e < E; e++) {
            m[e] += kk[e] * dj;
            o += m[e] * qq[e];
        }
        red_q[tid] = o; // free: the last token's reads came before this token's first barrier
        barrier();
        if (c == 0u) {
            o = 0.0;
            for (uint i = 0u; i < LPK; i++) o += red_q[r * LPK + i];
            y[(t * HV + h) * D + j] = ACT_T(o * SCALE);
        }
    }
    [[unroll]] for (uint e = 0u; e < E; e++) st[row + e] = m[e];
}
