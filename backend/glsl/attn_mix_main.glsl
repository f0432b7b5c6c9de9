// attn_mix_main.glsl: the body of the staged mix kernel.
void main() {
    uint tid = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, t0 = gl_WorkGroupID.y * QT;
    if (t0 >= step.T) return;
    uint P = step.pos + step.T, kvh = h / (H / HKV);
    float acc[ACC_N];
    [[unroll]] for (uint c = 0; c < ACC_N; c++) acc[c] = 0.0;
    for (uint kb = 0; kb < P; kb += BK) {
        barrier(); // the previous block is consumed
        load_kv(kb, P, kvh, tid);
        for (uint i = tid; i < QT * BK; i += WG) {
            uint t = t0 + i / BK, key = kb + i % BK;
            float x = 0.0;
            if (t < step.T && key < P) x = float(pr[(h * step.T + t) * P + key]);
            ss[i] = x;
        }
        barrier();
        block_mix(acc, tid);
    }
    [[unroll]] for (uint m = 0; m < MIX_ROWS; m++) {
        uint r = mix_row(m, tid), t = t0 + r;
        if (r >= QT || t >= step.T) continue;
        [[unroll]] for (uint c = 0; c < MIX_COLS; c++) o[(t * H + h) * D + mix_col(c, tid)] = ACT_T(acc[m * MIX_COLS + c]);
    }
}
