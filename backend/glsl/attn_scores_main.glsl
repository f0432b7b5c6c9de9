// attn_scores_main.glsl: the body of the staged scores kernel.
void main() {
    uint tid = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, t0 = gl_WorkGroupID.y * QT;
    if (t0 >= step.T) return;
    uint P = step.pos + step.T, kvh = h / (H / HKV);
    load_q(h, t0, tid);
    for (uint kb = 0; kb < P; kb += BK) {
        barrier(); // sq is set; the previous block is written out
        load_kv(kb, P, kvh, tid);
        barrier();
        block_scores(kb, P, t0, false, tid);
        barrier();
        for (uint i = tid; i < QT * BK; i += WG) {
            uint t = t0 + i / BK, key = kb + i % BK;
            if (t < step.T && key < P) s[(h * step.T + t) * P + key] = ACT_T(ss[i]);
        }
    }
}
