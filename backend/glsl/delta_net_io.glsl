// delta_net_io.glsl: what the two delta-rule kernels share (delta_net.glsl,
// token by token; delta_net_chunk.glsl, in chunks): their bindings and the
// load of one row of a value head's state, M[j][i] of [HV, D, D].
// Defines: D; bindings B_Q, B_K, B_V, B_G, B_BETA, B_S, B_Y.
layout(std430, set = 0, binding = B_Q) readonly buffer Q { ACT_T q[]; };
layout(std430, set = 0, binding = B_K) readonly buffer Kb { ACT_T k[]; };
layout(std430, set = 0, binding = B_V) readonly buffer V { ACT_T v[]; };
layout(std430, set = 0, binding = B_G) readonly buffer G { ACT_T g[]; };
layout(std430, set = 0, binding = B_BETA) readonly buffer Beta { ACT_T beta[]; };
layout(std430, set = 0, binding = B_S) buffer S { float st[]; };
layout(std430, set = 0, binding = B_Y) writeonly buffer Y { ACT_T y[]; };

// Row j of head h of the state, at `row`; zeros at position 0 (a new
// sequence: the buffer holds the last one's state).
void load_row(uint row, out float m[D]) {
    bool fresh = step.pos == 0u;
    for (uint i = 0; i < D; i++) m[i] = fresh ? 0.0 : st[row + i];
}
