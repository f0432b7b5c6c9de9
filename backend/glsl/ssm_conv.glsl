// ssm_conv.glsl: the delta-net's causal depthwise conv with its state.
// y[t, c] = sum_k win[t + k, c] * w[c, k] over win = concat(state, x), the
// products summed in k order as the interpreter (ggml_ssm_conv) does; the
// state [K-1, C] keeps the window's last K-1 rows for the next step. At
// position 0 (a new sequence) the state reads as zeros, whatever it holds.
//
// An invocation per channel and chunk of TT tokens (grid y: the chunks):
// it loads its TT + K - 1 window rows at once (all in flight together) and
// writes TT outputs. Before, a thread per channel walked all T tokens,
// one dependent VRAM round trip a token: 8192 channels (Qwen3.5-9B) were 32
// workgroups for the whole device, 512 round trips a prefill step. Only
// chunk 0 reads the old state (TT >= K - 1), and the same invocation then
// writes the new one, so no invocation reads a row another overwrites.
// Defines: C (channels), K (taps), TT (tokens a chunk, >= K - 1), WG,
// SILU_OUT (fuse-conv: y = silu(sum));
// bindings B_X, B_W (f32 taps as raw words), B_S (the state, f32), B_Y.
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = B_X) readonly buffer X { ACT_T x[]; };
layout(std430, set = 0, binding = B_W) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = B_S) buffer S { float st[]; };
layout(std430, set = 0, binding = B_Y) writeonly buffer Y { ACT_T y[]; };

// Row r of concat(state, x) for channel c, r counted from x's first row
// (the state's K-1 rows are r = -(K-1) .. -1).
float row_at(int r, uint c, bool fresh) {
    if (r >= 0) return float(x[uint(r) * C + c]);
    return fresh ? 0.0 : st[uint(r + K - 1) * C + c];
}

void main() {
    uint c = gl_GlobalInvocationID.x, t0 = gl_WorkGroupID.y * uint(TT);
    if (c >= C || t0 >= step.T) return;
    uint n = min(uint(TT), step.T - t0);
    bool fresh = step.pos == 0u;
    float tap[K], win[TT + K - 1];
    [[unroll]] for (uint k = 0u; k < K; k++) tap[k] = uintBitsToFloat(w[c * K + k]);
    [[unroll]] for (uint i = 0u; i < TT + K - 1; i++) {
        int r = int(t0 + i) - (K - 1);
        win[i] = r < int(step.T) ? row_at(r, c, fresh) : 0.0;
    }
    [[unroll]] for (uint j = 0u; j < TT; j++) {
        if (j >= n) break;
        float sum = 0.0;
        [[unroll]] for (uint k = 0u; k < K; k++) sum += win[j + k] * tap[k];
#ifdef SILU_OUT
        sum = silu(sum); // fuse-conv: the layer's SiLU on the conv's output
#endif
        y[(t0 + j) * C + c] = ACT_T(sum);
    }
    if (gl_WorkGroupID.y != 0u) return;
    // the window's last K-1 rows, all read before any is written
    float next[K - 1];
    [[unroll]] for (uint k = 0u; k + 1u < K; k++) next[k] = row_at(int(step.T + k) - (K - 1), c, fresh);
    [[unroll]] for (uint k = 0u; k + 1u < K; k++) st[k * C + c] = next[k];
}
