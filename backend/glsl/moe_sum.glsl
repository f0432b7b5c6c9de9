// moe_sum.glsl: y[t, h] = sum over u of weight(t, u) * x[t, u, h], the
// slots added in route order as ggml (and the interpreter) add them.
// Grid: gl_WorkGroupID.y is the token, x covers H.
// Defines: H, U, WG. Bindings: 1 x [T, U, H], 2 route [T, U, 2], 3 y [T, H].
layout(local_size_x = WG) in;
layout(std430, binding = 1) readonly buffer X { ACT_T x[]; };
layout(std430, binding = 2) readonly buffer Rt { ACT_T route[]; };
layout(std430, binding = 3) writeonly buffer Y { ACT_T y[]; };

void main() {
    uint t = gl_WorkGroupID.y, h = gl_GlobalInvocationID.x;
    if (t >= step.T || h >= uint(H)) return;
    precise float o = 0.0;
    for (uint u = 0u; u < uint(U); u++) {
        uint tu = t * uint(U) + u;
        precise float v = float(x[tu * uint(H) + h]) * float(route[2u * tu + 1u]);
        o = u == 0u ? v : o + v;
    }
    y[t * uint(H) + h] = ACT_T(o);
}
