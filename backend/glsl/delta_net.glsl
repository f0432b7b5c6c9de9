// delta_net.glsl: the gated delta rule, token by token, with its state.
// Per value head h (key head h % HK) the state is M[j][i], j over values, i
// over keys ([HV, D, D], the interpreter's layout). For each token:
//   M *= exp(g);  d[j] = (v[j] - M[j] . k) * beta;  M[j][i] += k[i] d[j];
//   o[j] = (M[j] . q) * SCALE
// Row j of M needs only k, q, v[j] and the head's two gates, so thread j
// owns row j in registers for the whole step: the rows never meet, and the
// state is read once and written once per step (in place). At position 0
// (a new sequence) the state reads as zeros. A workgroup per value head;
// k and q of each token are staged in shared memory for its D threads.
// Decode's kernel: prefill runs the chunked scan of delta_net_chunk.glsl
// (cg_recur.c chooses), which takes the state's serial step once a chunk.
// Defines: D, HK, HV, SCALE; after delta_net_io.glsl.
layout(local_size_x = D) in;

shared float sq[D], sk[D];

void main() {
    uint h = gl_WorkGroupID.x, j = gl_LocalInvocationID.x, hk = h % HK;
    uint row = (h * D + j) * D;
    float m[D];
    load_row(row, m);
    for (uint t = 0; t < step.T; t++) {
        barrier(); // the previous token's q and k are read
        sq[j] = float(q[(t * HK + hk) * D + j]);
        sk[j] = float(k[(t * HK + hk) * D + j]);
        barrier();
        float decay = exp(float(g[t * HV + h])), b = float(beta[t * HV + h]);
        float mk = 0.0;
        for (uint i = 0; i < D; i++) {
            m[i] *= decay;
            mk += m[i] * sk[i];
        }
        float dj = (float(v[(t * HV + h) * D + j]) - mk) * b;
        float o = 0.0;
        for (uint i = 0; i < D; i++) {
            m[i] += sk[i] * dj;
            o += m[i] * sq[i];
        }
        y[(t * HV + h) * D + j] = ACT_T(o * SCALE);
    }
    for (uint i = 0; i < D; i++) st[row + i] = m[i];
}
