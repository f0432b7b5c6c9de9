// attn_decode.glsl: attention for a step of one token (decode), with the
// preparation of its q and k heads folded in where fuse-attn-head put them
// in the kernel's body.
//
// The tiled kernel (attention.glsl) serves prefill: a query tile, key
// blocks of 32, five barriers and two shared-memory trees per block. For
// one query that is all overhead: on the H200 it took ~22 us a layer for a
// few MiB of cache. Here one workgroup owns the GQ query heads of a kv head
// and one chunk of its keys, and walks the chunk in rounds of WG keys:
//   scores  each invocation owns one key: its whole row in flight (D/8
//           16-byte loads), dotted with the GQ query rows held in shared
//           memory (read by every invocation at once: broadcasts);
//   softmax the GQ row maxima and sums of a round: one subgroup reduction
//           each and a shared slot per subgroup (any subgroup size);
//   mix     invocation (key lane kl, column group cg) adds p * v for keys
//           kl, kl + KL, ... of the round into GQ x 8 accumulators.
// Key lanes are summed through shared memory at the end.
//
// Context split: SPLIT workgroups per kv head at most, but only as many as
// have MIN_CHUNK keys each (a short context gives few partials to combine;
// codegen's default is WG, a full round). The
// partials (m, l, acc) go to scratch; the last workgroup to take a ticket
// combines them and resets the counter for the next replay.
//
// Head preparation (QNORM, QROPE; KHEAD with KNORM, KROPE): the raw q rows
// of the projection are normalized and rotated in shared memory. The raw k
// row of the new token is prepared by the workgroup whose chunk holds its
// position (the last one), which writes it into the cache and then reads
// it back like any other key: the cache is coherent, and no other
// workgroup of the step reads that row. (Scoring the new key from the
// shared copy instead, rounded to fp16 in the shader, measured 9e-5 off the
// interpreter on the H200, whose compiler appears to drop the round trip;
// docs/performance.md, run 14.)
//
// Defines: H, HKV, D, GQ, WG, SPLIT, MIN_CHUNK, SCALE, QNORM, QROPE, KHEAD, KNORM,
// KROPE, QEPS, KEPS, B_* (bindings), rope_lib's defines when a rope is in.
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_basic : require
layout(local_size_x = WG) in;

layout(std430, set = 0, binding = B_Q) readonly buffer Q { ACT_T q[]; };
#if QNORM
layout(std430, set = 0, binding = B_QNW) readonly buffer QNW { uint qnw[]; }; // f32 as raw words
#endif
#if KHEAD
layout(std430, set = 0, binding = B_KX) readonly buffer KX { ACT_T kx[]; };
#if KNORM
layout(std430, set = 0, binding = B_KNW) readonly buffer KNW { uint knw[]; };
#endif
#define K_ACCESS coherent
#else
#define K_ACCESS readonly
#endif
#ifdef KV_F16
layout(std430, set = 0, binding = B_K) K_ACCESS buffer K { uvec4 k8[]; };
layout(std430, set = 0, binding = B_V) readonly buffer V { uvec4 v8[]; };
#else
layout(std430, set = 0, binding = B_K) K_ACCESS buffer K { vec4 k4[]; };
layout(std430, set = 0, binding = B_V) readonly buffer V { vec4 v4[]; };
#endif
layout(std430, set = 0, binding = B_O) writeonly buffer O { ACT_T o[]; };
#if SPLIT > 1
layout(std430, set = 0, binding = B_PART) coherent buffer Part { float part[]; };
layout(std430, set = 0, binding = B_CNT) coherent buffer Cnt { uint cnt[]; };
shared bool s_last;
#endif

#define NEG (-1.0e30) // "no key": finite, so exp(NEG - NEG) is 1, never NaN
const uint C8 = D / 8u;       // 8-element chunks of a row
const uint KL = WG / C8;      // key lanes of the mix
const uint NROW = GQ + 1u;    // shared rows: the q heads, then the new key
const uint OC = (D + WG - 1u) / WG; // output columns per invocation and row

shared float srow[NROW * D];
shared float ss[GQ * WG];  // probabilities of a round
shared float wred[NROW * WG]; // a slot per (row, subgroup)
shared float sacc[KL * D]; // one row's key-lane partial sums

// Elements 8i .. 8i+7 of a K or V binding (f16: one 16-byte load; f32: two).
float[8] unpack8(uvec4 w) {
    vec2 a = unpackHalf2x16(w.x), b = unpackHalf2x16(w.y), c = unpackHalf2x16(w.z), e = unpackHalf2x16(w.w);
    return float[8](a.x, a.y, b.x, b.y, c.x, c.y, e.x, e.y);
}
float[8] join8(vec4 a, vec4 b) { return float[8](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w); }
#ifdef KV_F16
#define krow8(i) unpack8(k8[i])
#define vrow8(i) unpack8(v8[i])
#else
#define krow8(i) join8(k4[2u * (i)], k4[2u * (i) + 1u])
#define vrow8(i) join8(v4[2u * (i)], v4[2u * (i) + 1u])
#endif

#if KHEAD
// srow's key row into chunk i of the cache, in the cache's type.
void kstore8(uint i, uint r0) {
#ifdef KV_F16
    uvec4 w;
    [[unroll]] for (uint c = 0u; c < 4u; c++)
        w[c] = packHalf2x16(vec2(srow[r0 + 2u * c], srow[r0 + 2u * c + 1u]));
    k8[i] = w;
#else
    k4[2u * i] = vec4(srow[r0], srow[r0 + 1u], srow[r0 + 2u], srow[r0 + 3u]);
    k4[2u * i + 1u] = vec4(srow[r0 + 4u], srow[r0 + 5u], srow[r0 + 6u], srow[r0 + 7u]);
#endif
}
#endif

// Per-row maxima or sums over the workgroup (n rows of v). Every
// invocation calls them; wred is free again when they return.
void wg_rows(inout float v[NROW], uint n, bool is_max) {
    [[unroll]] for (uint r = 0u; r < n; r++) v[r] = is_max ? subgroupMax(v[r]) : subgroupAdd(v[r]);
    if (subgroupElect())
        [[unroll]] for (uint r = 0u; r < n; r++) wred[r * WG + gl_SubgroupID] = v[r];
    barrier();
    [[unroll]] for (uint r = 0u; r < n; r++) {
        float x = wred[r * WG];
        for (uint i = 1u; i < gl_NumSubgroups; i++) x = is_max ? max(x, wred[r * WG + i]) : x + wred[r * WG + i];
        v[r] = x;
    }
    barrier();
}

// The GQ query rows (and the new key's row when own_k) into srow, prepared.
void prologue(uint h0, uint kvh, bool own_k, uint tid) {
    for (uint i = tid; i < NROW * D; i += WG) {
        uint r = i / D, e = i % D;
        float x = 0.0;
        if (r < GQ) x = float(q[(h0 + r) * D + e]);
#if KHEAD
        else if (own_k) x = float(kx[kvh * D + e]);
#endif
        srow[i] = x;
    }
#if QNORM || KNORM
    barrier();
    float sq[NROW];
    [[unroll]] for (uint r = 0u; r < NROW; r++) {
        sq[r] = 0.0;
        for (uint e = tid; e < D; e += WG) sq[r] += srow[r * D + e] * srow[r * D + e];
    }
    wg_rows(sq, NROW, false);
    // (x * scale) * w, in the interpreter's order.
    for (uint i = tid; i < NROW * D; i += WG) {
        uint r = i / D, e = i % D;
#if QNORM
        if (r < GQ) srow[i] = srow[i] * (1.0 / sqrt(sq[r] / float(D) + QEPS)) * uintBitsToFloat(qnw[e]);
#endif
#if KNORM
        if (r == GQ) srow[i] = srow[i] * (1.0 / sqrt(sq[r] / float(D) + KEPS)) * uintBitsToFloat(knw[e]);
#endif
    }
#endif
#if QROPE || KROPE
    barrier();
    // A pair belongs to one invocation, so it turns in place.
    for (uint i = tid; i < NROW * NPAIR; i += WG) {
        uint r = i / NPAIR, j = i % NPAIR;
        bool on = r < GQ ? QROPE != 0 : (KROPE != 0 && own_k);
        if (!on) continue;
        uint i0 = NEOX != 0 ? j : 2u * j, i1 = NEOX != 0 ? j + NPAIR : 2u * j + 1u;
        float cs, sn;
        rope_cos_sin(step.pos, j, cs, sn);
        float a = srow[r * D + i0], b = srow[r * D + i1];
        srow[r * D + i0] = a * cs - b * sn;
        srow[r * D + i1] = a * sn + b * cs;
    }
#endif
    barrier();
#if KHEAD
    if (own_k && step.pos < step.ctx)
        for (uint c = tid; c < C8; c += WG) kstore8((step.pos * HKV + kvh) * C8 + c, GQ * D + 8u * c);
    memoryBarrierBuffer(); // the new key is visible to the workgroup's reads below
    barrier();
#endif
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint kvh = gl_WorkGroupID.x / SPLIT, s = gl_WorkGroupID.x % SPLIT, h0 = kvh * GQ;
    uint kend = step.pos + 1u; // keys 0 ..= pos
    uint nsplit = min(uint(SPLIT), (kend + MIN_CHUNK - 1u) / MIN_CHUNK);
    uint chunk = (kend + nsplit - 1u) / nsplit;
    nsplit = (kend + chunk - 1u) / chunk; // every chunk holds a key
    if (s >= nsplit) return;              // uniform across the workgroup
    uint kbeg = s * chunk, kstop = min(kend, kbeg + chunk);

    bool own_k = KHEAD != 0 && s == nsplit - 1u;
    prologue(h0, kvh, own_k, tid);

    float m[GQ], l[GQ], acc[GQ][8];
    [[unroll]] for (uint r = 0u; r < GQ; r++) {
        m[r] = NEG;
        l[r] = 0.0;
        [[unroll]] for (uint e = 0u; e < 8u; e++) acc[r][e] = 0.0;
    }
    uint cg = tid % C8, kl = tid / C8;
    for (uint kr = kbeg; kr < kstop; kr += WG) {
        uint key = kr + tid;
        bool ok = key < kstop;
        float sc[NROW];
        [[unroll]] for (uint r = 0u; r < NROW; r++) sc[r] = 0.0;
        if (ok) {
            uint base = (key * HKV + kvh) * C8;
            [[unroll]] for (uint c = 0u; c < C8; c++) {
                float kv[8] = krow8(base + c);
                [[unroll]] for (uint r = 0u; r < GQ; r++)
                    [[unroll]] for (uint e = 0u; e < 8u; e++) sc[r] += srow[r * D + 8u * c + e] * kv[e];
            }
        }
        float mx[NROW];
        [[unroll]] for (uint r = 0u; r < NROW; r++) mx[r] = ok ? sc[r] * SCALE : NEG;
        wg_rows(mx, GQ, true);
        float ps[NROW], alpha[GQ];
        [[unroll]] for (uint r = 0u; r < GQ; r++) {
            float mnew = max(m[r], mx[r]);
            alpha[r] = exp(m[r] - mnew);
            float p = ok ? exp(sc[r] * SCALE - mnew) : 0.0;
            ss[r * WG + tid] = p;
            ps[r] = p;
            m[r] = mnew;
        }
        wg_rows(ps, GQ, false); // its barrier also publishes ss
        [[unroll]] for (uint r = 0u; r < GQ; r++) {
            l[r] = l[r] * alpha[r] + ps[r];
            [[unroll]] for (uint e = 0u; e < 8u; e++) acc[r][e] *= alpha[r];
        }
        // Past kstop p is 0: the clamped row (a real one) adds nothing, and
        // the loop keeps a constant trip count, all its loads in flight.
        [[unroll]] for (uint it = 0u; it < C8; it++) { // WG = KL * C8 keys
            uint j = kl + it * KL;
            float vv[8] = vrow8((min(kr + j, kstop - 1u) * HKV + kvh) * C8 + cg);
            [[unroll]] for (uint r = 0u; r < GQ; r++) {
                float p = ss[r * WG + j];
                [[unroll]] for (uint e = 0u; e < 8u; e++) acc[r][e] += p * vv[e];
            }
        }
        barrier(); // ss is read before the next round writes it
    }

    // Key lanes summed per row: column tid + c * WG of row r in fin.
    float fin[GQ][OC];
    [[unroll]] for (uint r = 0u; r < GQ; r++) {
        [[unroll]] for (uint e = 0u; e < 8u; e++) sacc[kl * D + 8u * cg + e] = acc[r][e];
        barrier();
        [[unroll]] for (uint c = 0u; c < OC; c++) {
            uint i = tid + c * WG;
            float a = 0.0;
            if (i < D)
                for (uint u = 0u; u < KL; u++) a += sacc[u * D + i];
            fin[r][c] = a;
        }
        barrier();
    }

    if (nsplit == 1u) {
        [[unroll]] for (uint r = 0u; r < GQ; r++)
            [[unroll]] for (uint c = 0u; c < OC; c++) {
                uint i = tid + c * WG;
                if (i < D) o[(h0 + r) * D + i] = ACT_T(fin[r][c] / l[r]);
            }
        return;
    }
#if SPLIT > 1
    const uint PSTRIDE = GQ * (D + 2u);
    uint pb = (kvh * SPLIT + s) * PSTRIDE;
    [[unroll]] for (uint r = 0u; r < GQ; r++) {
        [[unroll]] for (uint c = 0u; c < OC; c++) {
            uint i = tid + c * WG;
            if (i < D) part[pb + 2u * GQ + r * D + i] = fin[r][c];
        }
        if (tid == 0u) {
            part[pb + r] = m[r];
            part[pb + GQ + r] = l[r];
        }
    }
    memoryBarrierBuffer(); // partials are visible before the ticket is taken
    barrier();
    if (tid == 0u) s_last = atomicAdd(cnt[kvh], 1u) == nsplit - 1u;
    barrier();
    if (!s_last) return;
    memoryBarrierBuffer();
    uint p0 = kvh * SPLIT * PSTRIDE;
    [[unroll]] for (uint r = 0u; r < GQ; r++)
        [[unroll]] for (uint c = 0u; c < OC; c++) {
            uint i = tid + c * WG;
            if (i >= D) continue;
            float mm = NEG, ll = 0.0, aa = 0.0;
            [[unroll]] for (uint u = 0u; u < SPLIT; u++) {
                if (u >= nsplit) break;
                uint pu = p0 + u * PSTRIDE;
                float mu = part[pu + r], mn = max(mm, mu), wo = exp(mm - mn), wn = exp(mu - mn);
                ll = ll * wo + part[pu + GQ + r] * wn;
                aa = aa * wo + part[pu + 2u * GQ + r * D + i] * wn;
                mm = mn;
            }
            o[(h0 + r) * D + i] = ACT_T(aa / ll);
        }
    if (tid == 0u) cnt[kvh] = 0u; // ready for the next replay
#endif
}
