// l2_norm.glsl: y = x / max(sqrt(sum x^2), eps) over the last dimension
// (ggml_l2_norm: the delta-net's q and k per head). One workgroup per row:
// gl_WorkGroupID.x is the row within its token, gl_WorkGroupID.y the token.
// Defines: N (row length), ROWS_PER_T, WG, EPS.
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 1) readonly buffer X { ACT_T x[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { ACT_T y[]; };

void main() {
    uint t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    if (t >= step.T) return; // uniform across the workgroup
    uint base = (t * ROWS_PER_T + gl_WorkGroupID.x) * N;
    float ss = 0.0;
    for (uint i = tid; i < N; i += WG) {
        float v = float(x[base + i]);
        ss += v * v;
    }
    float scale = 1.0 / max(sqrt(wg_sum(ss)), EPS);
    for (uint i = tid; i < N; i += WG) y[base + i] = ACT_T(float(x[base + i]) * scale);
}
