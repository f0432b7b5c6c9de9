// attn_softmax.glsl (staged attention, step 2): causal softmax of s[H, T, P]
// over P. Query t sits at position pos + t and sees keys 0 ..= pos + t;
// the masked entries are written as exactly 0. One workgroup per row.
// Defines: WG. Includes attn_reduce.
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 1) readonly buffer S { ACT_T s[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { ACT_T y[]; };

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    if (t >= step.T) return;
    uint P = step.pos + step.T, last = step.pos + t, base = (h * step.T + t) * P;
    float mx = -3.0e38;
    for (uint p = tid; p <= last; p += WG) mx = max(mx, float(s[base + p]));
    mx = wg_max(mx);
    float sum = 0.0;
    for (uint p = tid; p <= last; p += WG) sum += exp(float(s[base + p]) - mx);
    sum = wg_sum(sum);
    for (uint p = tid; p < P; p += WG) y[base + p] = ACT_T(p <= last ? exp(float(s[base + p]) - mx) / sum : 0.0);
}
