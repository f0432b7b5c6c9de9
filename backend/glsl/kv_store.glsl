// kv_store.glsl: copies the step's T new rows of [T, Hkv, D] into rows
// pos .. pos+T-1 of the [C, Hkv, D] cache; older rows are left alone.
// Grid: gl_WorkGroupID.y is the token, x covers the ROW elements of a row.
// Defines: ROW (Hkv * D), WG.
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 1) readonly buffer X { ACT_T x[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { KV_T cache[]; };

void main() {
    uint t = gl_WorkGroupID.y, j = gl_GlobalInvocationID.x;
    if (t >= step.T || j >= ROW || ROW_POS(t) >= step.ctx) return;
    cache[ROW_KV(t) * ROW + j] = KV_T(x[t * ROW + j]);
}
