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
// Defines: D, HK, HV, SCALE, LPK (threads a row, dividing D), RW (rows a
// workgroup, dividing D), WG = RW * LPK; after delta_net_io.glsl.
layout(local_size_x = WG) in;

const uint E = D / LPK;
shared float red_k[WG], red_q[WG];

void main() {
    uint tid = gl_LocalInvocationID.x, r = tid / LPK, c = tid % LPK;
    uint h = gl_WorkGroupID.x / (D / RW), j = (gl_WorkGroupID.x % (D / RW)) * RW + r, hk = h % HK;
    uint row = (h * D + j) * D + c * E;
    bool fresh = step.pos == 0u;
    float m[E];
    [[unroll]] for (uint e = 0u; e < E; e++) m[e] = fresh ? 0.0 : st[row + e];
    for (uint t = 0u; t < step.T; t++) {
        uint kb = (t * HK + hk) * D + c * E;
        float kk[E], qq[E];
        [[unroll]] for (uint e = 0u; e < E; e++) {
            kk[e] = float(k[kb + e]);
            qq[e] = float(q[kb + e]);
        }
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
        float dj = (float(v[(t * HV + h) * D + j]) - mk) * b;
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
