// rope.glsl: rotary position embedding of x[T, H, D] (rope_lib.glsl has the
// angles). One thread per pair and one per pass-through element of a row.
// Defines: H, D, WG and rope_lib.glsl's.
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 1) readonly buffer X { ACT_T x[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { ACT_T y[]; };

void main() {
    uint t = gl_WorkGroupID.y, g = gl_GlobalInvocationID.x;
    if (t >= step.T || g >= H * ROW_THREADS) return;
    uint h = g / ROW_THREADS, j = g % ROW_THREADS, base = (t * H + h) * D;
    if (j >= NPAIR) {
        uint e = NR + (j - NPAIR);
        y[base + e] = x[base + e];
        return;
    }
    uint i0 = NEOX != 0 ? j : 2u * j, i1 = NEOX != 0 ? j + NPAIR : 2u * j + 1u;
    float cs, sn;
    rope_cos_sin(ROW_POS(t), j, cs, sn);
    float a = float(x[base + i0]), b = float(x[base + i1]);
    y[base + i0] = ACT_T(a * cs - b * sn);
    y[base + i1] = ACT_T(a * sn + b * cs);
}
