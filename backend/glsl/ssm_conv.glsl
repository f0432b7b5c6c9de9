// ssm_conv.glsl: the delta-net's causal depthwise conv with its state.
// y[t, c] = sum_k win[t + k, c] * w[c, k] over win = concat(state, x), the
// products summed in k order as the interpreter (ggml_ssm_conv) does; the
// state [K-1, C] keeps the window's last K-1 rows for the next step. At
// position 0 (a new sequence) the state reads as zeros, whatever it holds.
// A thread per channel walks the step's T tokens with the window in
// registers: channels are independent, so the state updates in place.
// Defines: C (channels), K (taps), WG; bindings B_X, B_W (f32 taps as raw
// words), B_S (the state, f32), B_Y.
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = B_X) readonly buffer X { ACT_T x[]; };
layout(std430, set = 0, binding = B_W) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = B_S) buffer S { float st[]; };
layout(std430, set = 0, binding = B_Y) writeonly buffer Y { ACT_T y[]; };

void main() {
    uint c = gl_GlobalInvocationID.x;
    if (c >= C) return;
    float tap[K], win[K];
    [[unroll]] for (uint k = 0; k < K; k++) tap[k] = uintBitsToFloat(w[c * K + k]);
    bool fresh = step.pos == 0u;
    [[unroll]] for (uint k = 0; k + 1 < K; k++) win[k] = fresh ? 0.0 : st[k * C + c];
    for (uint t = 0; t < step.T; t++) {
        win[K - 1] = float(x[t * C + c]);
        float sum = 0.0;
        [[unroll]] for (uint k = 0; k < K; k++) sum += win[k] * tap[k];
        y[t * C + c] = ACT_T(sum);
        [[unroll]] for (uint k = 0; k + 1 < K; k++) win[k] = win[k + 1];
    }
    [[unroll]] for (uint k = 0; k + 1 < K; k++) st[k * C + c] = win[k];
}
