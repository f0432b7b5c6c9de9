// attn_cm.glsl: prefill flash attention on the matrix units (cooperative
// matrix, 16x16x16 fp16 products, fp32 sums): scores, causal softmax and
// the value mix of attention.glsl, with S = Q K^T and O += P V as fragment
// products.
//
// Workgroup (x = kv head, y = query tile): NSG subgroups of 32 own BR = 16 *
// NSG query rows, TQ tokens x the GQ query heads of the kv head (row r is
// token t0 + r / GQ of head kvh * GQ + r % GQ; ROWS = TQ * GQ of them are
// real), so each key and value block is read once for all GQ heads. Each
// subgroup owns 16 rows: its Q fragments (fp16) stay in registers, its O
// accumulators (16 x D fp32) too. Keys stream through in blocks of BC rows,
// staged in shared memory as fp16 (an f32 cache is rounded on the way in),
// the next block fetched into registers while this one computes.
//
// Per block and subgroup: S (fp32) goes through shared memory, where two
// lanes a row apply the scale, the causal mask (query t sees keys 0 ..=
// pos + t) and the online softmax: a running max m and sum l per row. P is
// rounded to fp16 for the P V product, and l sums the rounded values, so
// numerator and denominator agree. The output's rows are rescaled when a
// row's max grows, but only by more than TAU (P stays <= e^TAU, far from
// fp16's 65504): a later, smaller growth keeps the stale max, so that the
// rescale, a round trip of the accumulators through shared memory, is rare
// once the first blocks have set the max. The epilogue divides by l.
//
// Fragment elements are never indexed (their count and layout are not
// portable to KHR drivers; Debian's spirv-opt also crashes on arithmetic
// between two fragments): per-row work goes through shared memory, where
// the layout is ours. Written against GL_NV_cooperative_matrix like
// matmul_cm.glsl (backend/spv_coopmat.c makes it KHR where needed).
//
// Defines: H, HKV, D (a multiple of 16), GQ, TQ, ROWS, NSG, BR, BC (a
// multiple of 16), WG = 32 * NSG, SCALE, TAU, KV_LEN (the K and V blocks, or
// the Q tile before them, in 16-byte vectors).

#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x = WG) in;
#ifdef ACT_F16
layout(std430, set = 0, binding = 1) readonly buffer Q { uvec4 q8[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer Q { vec4 q4[]; };
#endif
KV_BUFFER(2, K, k); // views of the cache: P rows of HKV x D
KV_BUFFER(3, V, v);
layout(std430, set = 0, binding = 4) writeonly buffer O { YACT_T o[]; }; // Y_F16: read only by fp16 matmuls

#define CM_AB fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define CM_C fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define NEG (-1.0e30) // "no key": finite, like attn_tile.glsl's

// Strides and offsets count 16-byte vectors (8 halves, 4 floats). Rows are
// padded by one vector, so that a fragment's 16 rows fall in different banks.
const uint D8 = D / 8u, KS8 = D8 + 1u; // a Q, K or V row
const uint PS8 = BC / 8u + 1u;         // a row of P (halves)
const uint SS4 = BC / 4u + 1u;         // a row of S (floats)
const uint DF = D / 16u, CF = BC / 16u; // fragments across D, across a block
const uint VB = BC * KS8;              // V's block, after K's
const uint SG_S = 16u * SS4, SG_P = 16u * PS8;

shared uvec4 kvs8[KV_LEN]; // K block, V block; before the loop, the Q tile
shared uvec4 ss8[NSG * SG_S]; // per subgroup: S; a fragment on its way through
shared uvec4 ps8[NSG * SG_P]; // per subgroup: P
shared float srow[BR];        // a factor per row: the rescale, then 1 / l

// ---- loads ------------------------------------------------------------------

uvec4 pack8(float x[8]) {
    return uvec4(packHalf2x16(vec2(x[0], x[1])), packHalf2x16(vec2(x[2], x[3])), packHalf2x16(vec2(x[4], x[5])),
                 packHalf2x16(vec2(x[6], x[7])));
}

#ifdef KV_F16
#define KV_CHUNK(name, i) name##8[i]
#else
#define KV_CHUNK(name, i) pack8(kv8(name, i))
#endif

// A block of BC keys in 8-element chunks over the workgroup, zero from
// kend on (V rows there meet P = 0, and must not be NaN).
const uint KV_V = BC * D8, KV_PT = (KV_V + WG - 1u) / WG;
uvec4 kr[KV_PT], vr[KV_PT];

void fetch(uint kb, uint kend, uint kvh, uint tid) {
    [[unroll]] for (uint it = 0u; it < KV_PT; it++) {
        uint i = tid + it * WG, key = kb + i / D8, src = (key * HKV + kvh) * D8 + i % D8;
        kr[it] = uvec4(0u);
        vr[it] = uvec4(0u);
        if (i < KV_V && key < kend) {
            kr[it] = KV_CHUNK(k, src);
            vr[it] = KV_CHUNK(v, src);
        }
    }
}

void stage(uint tid) {
    [[unroll]] for (uint it = 0u; it < KV_PT; it++) {
        uint i = tid + it * WG, o8 = (i / D8) * KS8 + i % D8;
        if (i >= KV_V) break;
        kvs8[o8] = kr[it];
        kvs8[VB + o8] = vr[it];
    }
}

// The Q tile, rounded to fp16 (zero past T and past ROWS).
void load_q(uint h0, uint t0, uint tid) {
    for (uint i = tid; i < BR * D8; i += WG) {
        uint r = i / D8, c = i % D8, t = t0 + r / GQ, row = t * H + h0 + r % GQ;
        uvec4 x = uvec4(0u);
        if (r < ROWS && t < step.T) {
#ifdef ACT_F16
            x = q8[row * D8 + c];
#else
            vec4 a = q4[2u * (row * D8 + c)], b = q4[2u * (row * D8 + c) + 1u];
            x = uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
#endif
        }
        kvs8[r * KS8 + c] = x;
    }
}

// ---- the softmax of a block: lanes 2i and 2i+1 hold row i of the strip ----

// Reads this lane's half of its row of S (at sb), masked and scaled: keys
// from rlim on are not seen.
void read_s(uint sb, uint rr, uint half_, uint kb, uint rlim, out float x[BC / 2u]) {
    [[unroll]] for (uint w = 0u; w < BC / 8u; w++) {
        vec4 s = uintBitsToFloat(ss8[sb + rr * SS4 + half_ * (BC / 8u) + w]);
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            uint j = 4u * w + e;
            x[j] = kb + half_ * (BC / 2u) + j < rlim ? s[e] * SCALE : NEG;
        }
    }
}

// Writes the row's probabilities at max m to P (at pb) as fp16 and returns
// their sum, as rounded.
float write_p(uint pb, uint rr, uint half_, float x[BC / 2u], float m) {
    float sum = 0.0;
    [[unroll]] for (uint w = 0u; w < BC / 16u; w++) {
        uvec4 u;
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            float a = x[8u * w + 2u * e], b = x[8u * w + 2u * e + 1u];
            uint h = packHalf2x16(vec2(a > 0.5 * NEG ? exp(a - m) : 0.0, b > 0.5 * NEG ? exp(b - m) : 0.0));
            vec2 r = unpackHalf2x16(h);
            sum += r.x + r.y;
            u[e] = h;
        }
        ps8[pb + rr * PS8 + half_ * (BC / 16u) + w] = u;
    }
    return sum + subgroupShuffleXor(sum, 1u);
}

// ---- fragments through shared memory (a 16 x 16 fp32 tile at sb) ----------

// Multiplies the tile's row r by srow[r0 + r].
void scale_rows(uint sb, uint r0, uint lane) {
    [[unroll]] for (uint e = lane; e < 64u; e += 32u)
        ss8[sb + e] = floatBitsToUint(uintBitsToFloat(ss8[sb + e]) * srow[r0 + e / 4u]);
}

// The tile's elements to the output, times srow (1 / l) of their row.
void write_out(uint sb, uint r0, uint t0, uint h0, uint j, uint lane) {
    [[unroll]] for (uint e = lane; e < 256u; e += 32u) {
        uint row = r0 + e / 16u, t = t0 + row / GQ;
        float x = uintBitsToFloat(ss8[sb + e / 4u][e % 4u]) * srow[row];
        if (row < ROWS && t < step.T) o[(t * H + h0 + row % GQ) * D + j * 16u + e % 16u] = YACT_T(x);
    }
}

void sync_subgroup() {
    subgroupMemoryBarrierShared();
    subgroupBarrier();
}

void main() {
    uint tid = gl_LocalInvocationIndex, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    uint kvh = gl_WorkGroupID.x, h0 = kvh * GQ, t0 = gl_WorkGroupID.y * TQ;
    if (t0 >= step.T) return; // uniform across the workgroup
    uint tlast = min(t0 + TQ, step.T) - 1u, kend = step.pos + tlast + 1u; // keys the tile sees
    // This subgroup's strip of rows r0 .. r0+15: live if it holds a real
    // row; it sees keys below klim.
    uint r0 = 16u * sg;
    bool live = r0 < ROWS && t0 + r0 / GQ < step.T;
    uint klim = step.pos + min(t0 + min(r0 + 15u, ROWS - 1u) / GQ, tlast) + 1u;
    // This lane's softmax row (two lanes a row).
    uint rr = lane >> 1u, half_ = lane & 1u, row = r0 + rr, t = t0 + row / GQ;
    uint rlim = row < ROWS && t < step.T ? step.pos + t + 1u : 0u;
    uint sb = sg * SG_S, pb = sg * SG_P;

    fetch(0u, kend, kvh, tid);
    load_q(h0, t0, tid);
    barrier();
    CM_AB qf[DF];
    [[unroll]] for (uint kk = 0u; kk < DF; kk++) coopMatLoadNV(qf[kk], kvs8, r0 * KS8 + 2u * kk, KS8, false);
    CM_C acc[DF];
    [[unroll]] for (uint j = 0u; j < DF; j++) acc[j] = CM_C(0.0);
    float m = NEG, l = 0.0;

    for (uint kb = 0u; kb < kend; kb += BC) {
        barrier(); // the Q fragments, then the previous block, are loaded
        stage(tid);
        barrier();
        if (kb + BC < kend) fetch(kb + BC, kend, kvh, tid);
        if (!live || kb >= klim) continue; // uniform in the subgroup: no row sees the block
        [[unroll]] for (uint n = 0u; n < CF; n++) {
            CM_C s = CM_C(0.0);
            [[unroll]] for (uint kk = 0u; kk < DF; kk++) {
                CM_AB b;
                coopMatLoadNV(b, kvs8, n * 16u * KS8 + 2u * kk, KS8, true);
                s = coopMatMulAddNV(qf[kk], b, s);
            }
            coopMatStoreNV(s, ss8, sb + 4u * n, SS4, false);
        }
        sync_subgroup();
        float x[BC / 2u];
        read_s(sb, rr, half_, kb, rlim, x);
        float mb = NEG;
        [[unroll]] for (uint j = 0u; j < BC / 2u; j++) mb = max(mb, x[j]);
        mb = max(mb, subgroupShuffleXor(mb, 1u));
        float alpha = 1.0;
        bool grow = mb > m + TAU, rescale = subgroupAny(grow && m > 0.5 * NEG);
        if (grow) {
            alpha = exp(m - mb); // 0 on the row's first keys: its accumulator is still 0
            m = mb;
        }
        l = l * alpha + write_p(pb, rr, half_, x, m);
        if (rescale) { // a row's max grew by more than TAU: its accumulators follow
            if (half_ == 0u) srow[row] = alpha;
            [[unroll]] for (uint j = 0u; j < DF; j++) {
                sync_subgroup(); // S is read (j = 0), the last tile loaded back
                coopMatStoreNV(acc[j], ss8, sb, 4u, false);
                sync_subgroup();
                scale_rows(sb, r0, lane);
                sync_subgroup();
                coopMatLoadNV(acc[j], ss8, sb, 4u, false);
            }
        }
        sync_subgroup(); // P is written
        CM_AB pf[CF];
        [[unroll]] for (uint n = 0u; n < CF; n++) coopMatLoadNV(pf[n], ps8, pb + 2u * n, PS8, false);
        [[unroll]] for (uint j = 0u; j < DF; j++)
            [[unroll]] for (uint n = 0u; n < CF; n++) {
                CM_AB b;
                coopMatLoadNV(b, kvs8, VB + n * 16u * KS8 + 2u * j, KS8, false);
                acc[j] = coopMatMulAddNV(pf[n], b, acc[j]);
            }
    }

    // Epilogue: each accumulator through shared memory to o, over l. Rows
    // past ROWS or T (l = 0) are not written.
    if (!live) return;
    if (half_ == 0u) srow[row] = 1.0 / l;
    [[unroll]] for (uint j = 0u; j < DF; j++) {
        sync_subgroup(); // srow is set (j = 0), the last tile written out
        coopMatStoreNV(acc[j], ss8, sb, 4u, false);
        sync_subgroup();
        write_out(sb, r0, t0, h0, j, lane);
    }
}
