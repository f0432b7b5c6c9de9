// attention_main.glsl: the body of the fused kernel (attention.glsl has the
// declarations and the design; attn_tile.glsl the tiles).
const uint PSTRIDE = QT * (D + 2); // one partial: m[QT], l[QT], acc[QT * D]

// Online softmax over the block in ss: probabilities replace the scores,
// sa[r] gets the rescale factor of row r's accumulator, sm/sl advance.
void block_softmax(uint tid) {
    uint r = tid / L, lane = tid % L;
    bool row = r < QT;
    float mx = NEG;
    if (row) {
        for (uint j = lane; j < BK; j += L) mx = max(mx, ss[r * BK + j]);
        sred[r * L + lane] = mx;
    }
    barrier();
    for (uint w = L / 2; w > 0; w >>= 1) {
        if (row && lane < w) sred[r * L + lane] = max(sred[r * L + lane], sred[r * L + lane + w]);
        barrier();
    }
    float mnew = row ? max(sm[r], sred[r * L]) : NEG;
    barrier(); // every row has read its max before sred is reused
    float sum = 0.0;
    if (row) {
        for (uint j = lane; j < BK; j += L) {
            float sc = ss[r * BK + j];
            float p = sc > 0.5 * NEG ? exp(sc - mnew) : 0.0;
            ss[r * BK + j] = p;
            sum += p;
        }
        sred[r * L + lane] = sum;
    }
    barrier();
    for (uint w = L / 2; w > 0; w >>= 1) {
        if (row && lane < w) sred[r * L + lane] += sred[r * L + lane + w];
        barrier();
    }
    if (row && lane == 0u) {
        float alpha = exp(sm[r] - mnew);
        sa[r] = alpha;
        sl[r] = sl[r] * alpha + sred[r * L];
        sm[r] = mnew;
    }
    barrier();
}

void rescale(inout float acc[ACC_N], uint tid) {
    [[unroll]] for (uint m = 0; m < MIX_ROWS; m++) {
        float a = sa[min(mix_row(m, tid), QT - 1u)];
        [[unroll]] for (uint c = 0; c < MIX_COLS; c++) acc[m * MIX_COLS + c] *= a;
    }
}

#if SPLIT > 1
// Writes this workgroup's partial; true in the last workgroup of the tile,
// which then combines all of them into o.
bool publish(float acc[ACC_N], uint slot, uint s, uint nsplit, uint tid) {
    uint pb = (slot * SPLIT + s) * PSTRIDE;
    [[unroll]] for (uint m = 0; m < MIX_ROWS; m++) {
        uint r = mix_row(m, tid);
        [[unroll]] for (uint c = 0; c < MIX_COLS; c++)
            if (r < QT) part[pb + 2u * QT + r * D + mix_col(c, tid)] = acc[m * MIX_COLS + c];
    }
    if (tid < QT) {
        part[pb + tid] = sm[tid];
        part[pb + QT + tid] = sl[tid];
    }
    memoryBarrierBuffer(); // partials are visible before the ticket is taken
    barrier();
    if (tid == 0u) s_last = atomicAdd(cnt[slot], 1u) == nsplit - 1u;
    barrier();
    return s_last;
}

void combine(uint slot, uint nsplit, uint h, uint t0, uint tid) {
    memoryBarrierBuffer();
    uint p0 = slot * SPLIT * PSTRIDE;
    [[unroll]] for (uint m = 0; m < MIX_ROWS; m++) {
        uint r = mix_row(m, tid), t = t0 + r / GQ;
        if (r >= QT || t >= step.T) continue;
        float mx = NEG;
        for (uint u = 0; u < nsplit; u++) mx = max(mx, part[p0 + u * PSTRIDE + r]);
        float lsum = 0.0, a[MIX_COLS];
        [[unroll]] for (uint c = 0; c < MIX_COLS; c++) a[c] = 0.0;
        for (uint u = 0; u < nsplit; u++) {
            uint pu = p0 + u * PSTRIDE;
            float w = exp(part[pu + r] - mx);
            lsum += part[pu + QT + r] * w;
            [[unroll]] for (uint c = 0; c < MIX_COLS; c++) a[c] += part[pu + 2u * QT + r * D + mix_col(c, tid)] * w;
        }
        [[unroll]] for (uint c = 0; c < MIX_COLS; c++) o[(t * H + h + r % GQ) * D + mix_col(c, tid)] = YACT_T(a[c] / lsum);
    }
    if (tid == 0u) cnt[slot] = 0u; // ready for the next replay
}
#endif

void main() {
    uint tid = gl_LocalInvocationID.x;
    // x: the head (GQ = 1) or the kv head whose GQ query heads share the tile.
    uint hx = gl_WorkGroupID.x / SPLIT, s = gl_WorkGroupID.x % SPLIT, tile = gl_WorkGroupID.y;
    uint t0 = tile * (QT / GQ);
    uint nsplit = (SPLIT > 1 && tile < MAX_QTILES) ? SPLIT : 1u;
    if (t0 >= step.T || s >= nsplit) return; // uniform across the workgroup
    uint h = GQ > 1u ? hx * GQ : hx, kvh = h / (H / HKV);
#ifdef BATCH
    // A batch tile is one token (QT == GQ): its sequence's keys 0 ..= its position.
    kv_row0 = step.rows[t0].y * step.ctx;
    uint kend = ROW_POS(t0) + 1u;
#else
    uint kend = step.pos + min(t0 + QT / GQ, step.T); // keys the tile's last query sees, exclusive
#endif
    uint chunk = ((kend + nsplit - 1u) / nsplit + BK - 1u) / BK * BK;
    uint kbeg = s * chunk, kstop = min(kend, kbeg + chunk);

    load_q(h, t0, tid);
    if (tid < QT) {
        sm[tid] = NEG;
        sl[tid] = 0.0;
    }
    float acc[ACC_N];
    [[unroll]] for (uint c = 0; c < ACC_N; c++) acc[c] = 0.0;
    for (uint kb = kbeg; kb < kstop; kb += BK) {
        barrier(); // the previous block is consumed (and sq, sm, sl are set)
        load_kv(kb, kstop, kvh, tid);
        barrier();
        block_scores(kb, kstop, t0, true, tid);
        barrier();
        block_softmax(tid);
        rescale(acc, tid);
        block_mix(acc, tid);
    }
    barrier(); // sl is final

    if (nsplit == 1u) {
        [[unroll]] for (uint m = 0; m < MIX_ROWS; m++) {
            uint r = mix_row(m, tid), t = t0 + r / GQ;
            if (r >= QT || t >= step.T) continue;
            [[unroll]] for (uint c = 0; c < MIX_COLS; c++)
                o[(t * H + h + r % GQ) * D + mix_col(c, tid)] = YACT_T(acc[m * MIX_COLS + c] / sl[r]);
        }
        return;
    }
#if SPLIT > 1
    uint slot = hx * MAX_QTILES + tile;
    if (publish(acc, slot, s, nsplit, tid)) combine(slot, nsplit, h, t0, tid);
#endif
}
