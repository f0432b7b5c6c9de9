// moe_sum.glsl: y[t, h] = sum over u of weight(t, u) * x[t, u, h], the
// slots added in route order as ggml (and the interpreter) add them.
// With ADD the residual is added to the sum (moe_sum add, after prefill's
// grouped GEMMs). Grid: gl_WorkGroupID.y is the token, x covers H.
// Defines: H, U, WG, ADD. Bindings: 1 x [T, U, H], 2 route [T, U, 2],
// 3 y [T, H], 4 the residual [T, H] (ADD).
layout(local_size_x = WG) in;
layout(std430, binding = 1) readonly buffer X { ACT_T x[]; };
layout(std430, binding = 2) readonly buffer Rt { ACT_T route[]; };
layout(std430, binding = 3) writeonly buffer Y { ACT_T y[]; };
#if ADD
layout(std430, binding = 4) readonly buffer R { ACT_T resid[]; };
#endif

void main() {
    uint t = gl_WorkGroupID.y, h = gl_GlobalInvocationID.x;
    if (t >= step.T || h >= uint(H)) return;
    precise float o = 0.0;
    for (uint u = 0u; u < uint(U); u++) {
        uint tu = t * uint(U) + u;
        precise float v = float(x[tu * uint(H) + h]) * float(route[2u * tu + 1u]);
        o = u == 0u ? v : o + v;
    }
#if ADD
    o += float(resid[t * uint(H) + h]);
#endif
    y[t * uint(H) + h] = ACT_T(o);
}
