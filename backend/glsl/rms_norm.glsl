// rms_norm.glsl: y = x / sqrt(mean(x^2) + eps) * w over the last dimension,
// for any rank: a [T, n] hidden state or per-head [T, H, D] rows.
// One workgroup per row: gl_WorkGroupID.x is the row within its token,
// gl_WorkGroupID.y the token (so a long prefill stays under the 65535 limit
// of one grid axis). The sum of squares is attn_reduce.glsl's wg_sum.
// GATE (fuse-norm-gate): y = silu(gate) * that, gate of x's shape at
// binding 4 (Qwen3.5's gated norm of the delta-net output).
// Defines: N (row length), ROWS_PER_T (rows per token), WG (threads), EPS.

layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 1) readonly buffer X { ACT_T x[]; };
layout(std430, set = 0, binding = 2) readonly buffer W { uint w[]; }; // f32 weight as raw words
layout(std430, set = 0, binding = 3) writeonly buffer Y { YACT_T y[]; }; // Y_F16: read only by fp16 matmuls
#ifdef GATE
layout(std430, set = 0, binding = 4) readonly buffer Gt { ACT_T gate[]; };
#endif


void main() {
    uint t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    if (t >= step.T) return; // uniform across the workgroup
    uint base = (t * ROWS_PER_T + gl_WorkGroupID.x) * N;
    float ss = 0.0;
    for (uint i = tid; i < N; i += WG) {
        float v = float(x[base + i]);
        ss += v * v;
    }
    float tot = wg_sum(ss);
    float scale = 1.0 / sqrt(tot / float(N) + EPS);
    // (x * scale) * w, in the interpreter's order.
    for (uint i = tid; i < N; i += WG) {
        float o = float(x[base + i]) * scale * uintBitsToFloat(w[i]);
#ifdef GATE
        o = silu(float(gate[base + i])) * o; // swiglu(gate, normed), the interpreter's order
#endif
        y[base + i] = YACT_T(o);
    }
}
