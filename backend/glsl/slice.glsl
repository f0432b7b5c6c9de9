// slice.glsl: y[.., 0 : LEN] = x[.., OFF : OFF + LEN] of the last dimension
// (the delta-net's q, k and v out of the conv's output, the gated
// attention's query and gate out of attn_q). A copy.
// Grid: gl_WorkGroupID.y is the token, x covers its PER_Y output elements.
// Defines: PER_X, PER_Y (elements per token in and out), N (x's last
// dimension), OFF, LEN, WG.
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 1) readonly buffer X { ACT_T x[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { ACT_T y[]; };

void main() {
    uint t = gl_WorkGroupID.y, j = gl_GlobalInvocationID.x;
    if (t >= step.T || j >= PER_Y) return;
    uint r = j / LEN, i = j % LEN;
    y[t * PER_Y + j] = x[t * PER_X + r * N + OFF + i];
}
