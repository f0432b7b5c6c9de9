// unary.glsl: y = UNOP(x) per element (silu, sigmoid, softplus).
// Grid: gl_WorkGroupID.y is the token, x covers its PER_T elements.
// Defines: PER_T, WG, UNOP(x).
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 1) readonly buffer X { ACT_T x[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { ACT_T y[]; };

void main() {
    uint t = gl_WorkGroupID.y, j = gl_GlobalInvocationID.x;
    if (t >= step.T || j >= PER_T) return;
    uint i = t * PER_T + j;
    float v = float(x[i]);
    y[i] = ACT_T(UNOP(v));
}
