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
// Prefill walks its tokens serially here: a chunked scan (the rows of a
// chunk of tokens at once, as matrix products) is the faster form.
// Defines: D, HK, HV, SCALE; bindings B_Q, B_K, B_V, B_G, B_BETA, B_S, B_Y.
layout(local_size_x = D) in;
layout(std430, set = 0, binding = B_Q) readonly buffer Q { ACT_T q[]; };
layout(std430, set = 0, binding = B_K) readonly buffer Kb { ACT_T k[]; };
layout(std430, set = 0, binding = B_V) readonly buffer V { ACT_T v[]; };
layout(std430, set = 0, binding = B_G) readonly buffer G { ACT_T g[]; };
layout(std430, set = 0, binding = B_BETA) readonly buffer Beta { ACT_T beta[]; };
layout(std430, set = 0, binding = B_S) buffer S { float st[]; };
layout(std430, set = 0, binding = B_Y) writeonly buffer Y { ACT_T y[]; };

shared float sq[D], sk[D];

void main() {
    uint h = gl_WorkGroupID.x, j = gl_LocalInvocationID.x, hk = h % HK;
    uint row = (h * D + j) * D;
    bool fresh = step.pos == 0u;
    float m[D];
    for (uint i = 0; i < D; i++) m[i] = fresh ? 0.0 : st[row + i];
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
