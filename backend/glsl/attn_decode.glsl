// attn_decode.glsl: attention for a step of one token (decode), with the
// preparation of its q and k heads folded in where fuse-attn-head put them
// in the kernel's body. A flash-decoding design: no shared memory and no
// barrier in the key loop.
//
// Why: the previous design (one key per invocation per round of WG keys,
// the GQ query rows read from shared memory by every invocation for every
// key, five barriers a round, a key-lane reduction through shared memory)
// took ~34 us a layer at position ~1024 and ~50 us at 4096 on the H200 at
// the Qwen3-8B shape (32 q heads, 8 kv heads, D 128, f16 cache), for K and
// V of 4-16 MB a layer (1.4-5.6 us at 3 TB/s); chunking did not change it.
//
// Lanes: the workgroup's WG invocations form NG = WG / LPK lane groups of
// LPK lanes. A lane group scores one key at a time: lane j of the group
// owns NS = D / (8 LPK) 16-byte slices of a row (slice c * LPK + j: each
// load instruction of a group reads LPK * 16 contiguous bytes), holds the
// same slices of the workgroup's GQW query rows in registers, and sums its
// partial dots over the group with subgroupShuffleXor. Each group keeps its
// own online softmax (m, l per q head) and its accumulator slices
// acc[GQW][8 NS] in registers, and walks keys g, g + NG, ... of the chunk,
// UNROLL of them a trip (their K and V loads all issued before any
// arithmetic). Every group
// runs the same number of trips (keys past the chunk weigh 0 and load the
// chunk's last row), so the shuffles are in uniform control flow.
//
// Subgroup sizes: LPK comes from the target's subgroup size (codegen). When
// the device's subgroup is smaller than LPK (a plan for a 32-wide target
// on llvmpipe's 8) the lane groups are consecutive invocations instead and
// every lane scores the whole key row against the q rows in shared memory
// (LPK times the K loads): correct on any device, fast only on the one the
// plan was made for, and still without a barrier in the loop (llvmpipe
// turns barriers into coroutines; LLVM's frame building was seen taking
// minutes on this kernel, together with a combine unrolled over SPLIT).
//
// Query split: the GQ = H / HKV query heads of a kv head go to QSPLIT
// workgroups of GQW = GQ / QSPLIT heads each, which read the same keys and
// values, each for its own q rows. One workgroup for all eight of
// Qwen3-30B-A3B's (32 q heads over 4 kv heads) took ~29 us a layer on the
// H200 against ~16.6 us at the 8B's four, with 228 registers a lane and
// 4-8 workgroups for the whole GPU at short contexts; fewer heads a
// workgroup cut the registers and the serial work a key and multiply the
// workgroups (one head a workgroup: run 58, the A3B's decode step 8 %
// faster than two parts of four; run 60, the 8B's 5 % faster than one
// workgroup of four; cg_attn.c's decode_qsplit). The
// workgroups of the grid are (kv head, q part, chunk), chunk fastest.
//
// Merge: the groups of a subgroup merge by shuffles (fast path), then the
// subgroups (or, on the slow path, all groups) of the workgroup through
// shared memory, RP q rows a pass. Context split: SPLIT workgroups per kv
// head and q part at most, but only as many as have MIN_CHUNK keys each.
// Their partials (m, l, acc) go to scratch, a set per (kv head, q part)
// with its own ticket counter; the last workgroup to take a ticket
// combines them (every partial's loads first, then the sums in chunk
// order: deterministic) and resets the counter for the next replay.
//
// Head preparation (QNORM, QROPE; KHEAD with KNORM, KROPE): the raw q rows
// of the projection are normalized and rotated in shared memory, then each
// lane loads its slices into registers. The raw k row of the new token is
// prepared by the workgroups whose chunk holds its position (the last one:
// QSPLIT of them, one per q part), each of which writes it into the cache
// and then reads it back like any other key: the cache is coherent, and no
// workgroup of another chunk reads that row. Every one of them stores it
// because none may read the row before a store of it is visible to it,
// and the workgroups of a dispatch cannot wait for each other. They compute
// the row from the same input with the same code, so their stores are the
// same bits: a read gets the row its workgroup prepared, whichever of the
// stores it observes and in whatever order they land. (Scoring the new key
// from the shared copy instead, rounded to fp16 in the shader, which would
// spare the cache round trip, measured 9e-5 off the interpreter on the
// H200, whose compiler appears to drop the fp16 rounding;
// docs/performance.md, run 14.)
//
// Defines: H, HKV, D, GQ, QSPLIT (workgroups per kv head's q heads,
// dividing GQ; 1 when undefined), WG, LPK (lanes per key, a power of two
// dividing D / 8), UNROLL (keys per group a trip), RP (q rows per merge
// pass, dividing GQW), SPLIT, MIN_CHUNK, SCALE, QNORM, QROPE, KHEAD, KNORM,
// KROPE, QEPS, KEPS, B_* (bindings), rope_lib's defines when a rope is in.
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
layout(local_size_x = WG) in;

#ifndef QSPLIT
#define QSPLIT 1u
#endif
#define GQW (GQ / QSPLIT) // the q heads of a workgroup

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
shared float cmw[GQW * SPLIT]; // the combine: each chunk's m, then its weight
shared float cml[GQW * SPLIT]; // each chunk's l; a row's first slot then holds the row's sum
#endif

#define NEG (-1.0e30) // "no key": finite, so exp(NEG - NEG) is 1, never NaN
const uint C8 = D / 8u;             // 8-element slices of a row
const uint NS = C8 / LPK;           // slices per lane
const uint SW = 8u * NS;            // a lane's floats of a row
const uint NG = WG / LPK;           // lane groups of the workgroup
const uint NROW = GQW + 1u;         // prologue rows: the q heads, then the new key
const uint OC = (D + WG - 1u) / WG; // output columns per invocation and row
const uint MW = D + 2u;             // a merge entry's row: m, l, acc[D]

shared float srow[NROW * D];
shared float wred[NROW * WG];  // a slot per (row, subgroup)
shared float smrg[NG * RP * MW]; // merge entries, RP rows a pass

// One 8-element slice of a K or V row (f16: one 16-byte load; f32: two).
#ifdef KV_F16
#define SLICE_T uvec4
#define kload(i) k8[i]
#define vload(i) v8[i]
float[8] unslice(uvec4 w) {
    vec2 a = unpackHalf2x16(w.x), b = unpackHalf2x16(w.y), c = unpackHalf2x16(w.z), e = unpackHalf2x16(w.w);
    return float[8](a.x, a.y, b.x, b.y, c.x, c.y, e.x, e.y);
}
#else
#define SLICE_T mat2x4
#define kload(i) mat2x4(k4[2u * (i)], k4[2u * (i) + 1u])
#define vload(i) mat2x4(v4[2u * (i)], v4[2u * (i) + 1u])
float[8] unslice(mat2x4 w) {
    return float[8](w[0].x, w[0].y, w[0].z, w[0].w, w[1].x, w[1].y, w[1].z, w[1].w);
}
#endif

#if KHEAD
// srow's key row into slice i of the cache, in the cache's type.
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

// Per-row sums over the workgroup (n rows of v). Every invocation calls
// it; wred is free again when it returns.
void wg_sums(inout float v[NROW], uint n) {
    [[unroll]] for (uint r = 0u; r < n; r++) v[r] = subgroupAdd(v[r]);
    if (subgroupElect())
        [[unroll]] for (uint r = 0u; r < n; r++) wred[r * WG + gl_SubgroupID] = v[r];
    barrier();
    [[unroll]] for (uint r = 0u; r < n; r++) {
        float x = wred[r * WG];
        for (uint i = 1u; i < gl_NumSubgroups; i++) x += wred[r * WG + i];
        v[r] = x;
    }
    barrier();
}

// The workgroup's GQW query rows (and the new key's row when own_k) into
// srow, prepared.
void prologue(uint h0, uint kvh, bool own_k, uint tid) {
    for (uint i = tid; i < NROW * D; i += WG) {
        uint r = i / D, e = i % D;
        float x = 0.0;
        if (r < GQW) x = float(q[(h0 + r) * D + e]);
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
    wg_sums(sq, NROW);
    // (x * scale) * w, in the interpreter's order.
    for (uint i = tid; i < NROW * D; i += WG) {
        uint r = i / D, e = i % D;
#if QNORM
        if (r < GQW) srow[i] = srow[i] * (1.0 / sqrt(sq[r] / float(D) + QEPS)) * uintBitsToFloat(qnw[e]);
#endif
#if KNORM
        if (r == GQW) srow[i] = srow[i] * (1.0 / sqrt(sq[r] / float(D) + KEPS)) * uintBitsToFloat(knw[e]);
#endif
    }
#endif
#if QROPE || KROPE
    barrier();
    // A pair belongs to one invocation, so it turns in place.
    for (uint i = tid; i < NROW * NPAIR; i += WG) {
        uint r = i / NPAIR, j = i % NPAIR;
        bool on = r < GQW ? QROPE != 0 : (KROPE != 0 && own_k);
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
    // Every q part's workgroup of the last chunk stores the row: the same
    // bits, so another's store landing after this one changes nothing.
    if (own_k && step.pos < step.ctx)
        for (uint c = tid; c < C8; c += WG) kstore8((step.pos * HKV + kvh) * C8 + c, GQW * D + 8u * c);
    memoryBarrierBuffer(); // the new key is visible to the workgroup's reads below
    barrier();
#endif
}

// The running state of a lane: softmax and accumulator slices per q row.
struct lane_state {
    float m[GQW], l[GQW], acc[GQW][SW];
};

// Folds (m2, l2, acc2) into s's row r: the online-softmax merge.
void fold(inout lane_state s, uint r, float m2, float l2, float a2[SW]) {
    float mn = max(s.m[r], m2), wa = exp(s.m[r] - mn), wb = exp(m2 - mn);
    s.l[r] = s.l[r] * wa + l2 * wb;
    [[unroll]] for (uint x = 0u; x < SW; x++) s.acc[r][x] = s.acc[r][x] * wa + a2[x] * wb;
    s.m[r] = mn;
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    // Workgroup (kv head kvh, q part qp, chunk s), the chunk fastest. kq =
    // kvh * QSPLIT + qp numbers the (kv head, q part) pairs: pair kq owns
    // the GQW q heads from kq * GQW = kvh * GQ + qp * GQW.
    uint kq = gl_WorkGroupID.x / SPLIT, s = gl_WorkGroupID.x % SPLIT;
    uint kvh = kq / QSPLIT, h0 = kq * GQW;
    uint kend = step.pos + 1u; // keys 0 ..= pos
    uint nsplit = min(uint(SPLIT), (kend + MIN_CHUNK - 1u) / MIN_CHUNK);
    uint chunk = (kend + nsplit - 1u) / nsplit;
    nsplit = (kend + chunk - 1u) / chunk; // every chunk holds a key
    if (s >= nsplit) return;              // uniform across the workgroup
    uint kbeg = s * chunk, kstop = min(kend, kbeg + chunk);

    // The last chunk's workgroups, one per q part, each prepare and store
    // the new key (the file's header says why that is safe).
    bool own_k = KHEAD != 0 && s == nsplit - 1u;
    prologue(h0, kvh, own_k, tid);

    // Lane group g, lane j within it: inside a subgroup when it is wide
    // enough (fast), else consecutive invocations (uniform either way).
    bool fast = gl_SubgroupSize >= LPK;
    uint g = fast ? gl_SubgroupID * (gl_SubgroupSize / LPK) + gl_SubgroupInvocationID / LPK : tid / LPK;
    uint j = fast ? gl_SubgroupInvocationID % LPK : tid % LPK;

    float qs[GQW][SW];
    lane_state st;
    [[unroll]] for (uint r = 0u; r < GQW; r++) {
        [[unroll]] for (uint c = 0u; c < NS; c++)
            [[unroll]] for (uint x = 0u; x < 8u; x++) qs[r][8u * c + x] = srow[r * D + 8u * (c * LPK + j) + x];
        st.m[r] = NEG;
        st.l[r] = 0.0;
        [[unroll]] for (uint x = 0u; x < SW; x++) st.acc[r][x] = 0.0;
    }

    uint trips = (kstop - kbeg + NG * UNROLL - 1u) / (NG * UNROLL);
    for (uint t = 0u; t < trips; t++) {
        uint kb = kbeg + t * NG * UNROLL + g;
        SLICE_T kw[UNROLL][NS], vw[UNROLL][NS];
        bool ok[UNROLL];
        [[unroll]] for (uint u = 0u; u < UNROLL; u++) {
            uint key = kb + u * NG;
            ok[u] = key < kstop;
            uint base = (min(key, kstop - 1u) * HKV + kvh) * C8 + j;
            [[unroll]] for (uint c = 0u; c < NS; c++) kw[u][c] = kload(base + c * LPK);
            [[unroll]] for (uint c = 0u; c < NS; c++) vw[u][c] = vload(base + c * LPK);
        }
        float sc[UNROLL][GQW];
        [[unroll]] for (uint u = 0u; u < UNROLL; u++)
            [[unroll]] for (uint r = 0u; r < GQW; r++) sc[u][r] = 0.0;
        if (fast) { // the lane's slices, then the group's sum: the same bits in all its lanes
            [[unroll]] for (uint u = 0u; u < UNROLL; u++)
                [[unroll]] for (uint c = 0u; c < NS; c++) {
                    float kv[8] = unslice(kw[u][c]);
                    [[unroll]] for (uint r = 0u; r < GQW; r++)
                        [[unroll]] for (uint x = 0u; x < 8u; x++) sc[u][r] += qs[r][8u * c + x] * kv[x];
                }
            [[unroll]] for (uint b = 1u; b < LPK; b <<= 1u)
                [[unroll]] for (uint u = 0u; u < UNROLL; u++)
                    [[unroll]] for (uint r = 0u; r < GQW; r++) sc[u][r] += subgroupShuffleXor(sc[u][r], b);
        } else { // every lane the whole row, against srow: no barrier in the loop
            [[unroll]] for (uint u = 0u; u < UNROLL; u++) {
                uint row = (min(kb + u * NG, kstop - 1u) * HKV + kvh) * C8;
                for (uint c = 0u; c < C8; c++) {
                    float kv[8] = unslice(kload(row + c));
                    [[unroll]] for (uint r = 0u; r < GQW; r++)
                        [[unroll]] for (uint x = 0u; x < 8u; x++) sc[u][r] += srow[r * D + 8u * c + x] * kv[x];
                }
            }
        }
        [[unroll]] for (uint r = 0u; r < GQW; r++) {
            float mn = st.m[r];
            [[unroll]] for (uint u = 0u; u < UNROLL; u++) mn = ok[u] ? max(mn, sc[u][r] * SCALE) : mn;
            float alpha = exp(st.m[r] - mn), p[UNROLL];
            st.l[r] *= alpha;
            [[unroll]] for (uint u = 0u; u < UNROLL; u++) {
                p[u] = ok[u] ? exp(sc[u][r] * SCALE - mn) : 0.0;
                st.l[r] += p[u];
            }
            [[unroll]] for (uint c = 0u; c < NS; c++) {
                [[unroll]] for (uint x = 0u; x < 8u; x++) st.acc[r][8u * c + x] *= alpha;
                [[unroll]] for (uint u = 0u; u < UNROLL; u++) {
                    float vv[8] = unslice(vw[u][c]);
                    [[unroll]] for (uint x = 0u; x < 8u; x++) st.acc[r][8u * c + x] += p[u] * vv[x];
                }
            }
            st.m[r] = mn;
        }
    }

    // The groups of a subgroup into its first (fast path): lane j of every
    // group holds the same columns.
    if (fast)
        for (uint b = LPK; b < gl_SubgroupSize; b <<= 1u)
            [[unroll]] for (uint r = 0u; r < GQW; r++) {
                float a2[SW];
                [[unroll]] for (uint x = 0u; x < SW; x++) a2[x] = subgroupShuffleXor(st.acc[r][x], b);
                fold(st, r, subgroupShuffleXor(st.m[r], b), subgroupShuffleXor(st.l[r], b), a2);
            }
    // Then the entries (subgroups, or groups on the slow path) through
    // shared memory: invocation tid ends with column tid + c * WG of row r
    // in fin[r][c], and the row's m and l.
    uint ne = fast ? gl_NumSubgroups : NG, e = fast ? gl_SubgroupID : g;
    bool writer = !fast || gl_SubgroupInvocationID < LPK;
    float fin[GQW][OC], fm[GQW], fl[GQW];
    [[unroll]] for (uint r0 = 0u; r0 < GQW; r0 += RP) {
        if (writer)
            [[unroll]] for (uint rr = 0u; rr < RP; rr++) {
                uint b = (e * RP + rr) * MW, r = r0 + rr;
                if (j == 0u) {
                    smrg[b] = st.m[r];
                    smrg[b + 1u] = st.l[r];
                }
                [[unroll]] for (uint c = 0u; c < NS; c++)
                    [[unroll]] for (uint x = 0u; x < 8u; x++)
                        smrg[b + 2u + 8u * (c * LPK + j) + x] = st.acc[r][8u * c + x];
            }
        barrier();
        [[unroll]] for (uint rr = 0u; rr < RP; rr++) {
            uint r = r0 + rr;
            float mm = NEG;
            for (uint i = 0u; i < ne; i++) mm = max(mm, smrg[(i * RP + rr) * MW]);
            float ll = 0.0, aa[OC];
            [[unroll]] for (uint c = 0u; c < OC; c++) aa[c] = 0.0;
            for (uint i = 0u; i < ne; i++) {
                uint b = (i * RP + rr) * MW;
                float w = exp(smrg[b] - mm);
                ll += smrg[b + 1u] * w;
                [[unroll]] for (uint c = 0u; c < OC; c++) {
                    uint col = tid + c * WG;
                    if (col < D) aa[c] += smrg[b + 2u + col] * w;
                }
            }
            fm[r] = mm;
            fl[r] = ll;
            [[unroll]] for (uint c = 0u; c < OC; c++) fin[r][c] = aa[c];
        }
        barrier();
    }

    if (nsplit == 1u) {
        [[unroll]] for (uint r = 0u; r < GQW; r++)
            [[unroll]] for (uint c = 0u; c < OC; c++) {
                uint i = tid + c * WG;
                if (i < D) o[(h0 + r) * D + i] = ACT_T(fin[r][c] / fl[r]);
            }
        return;
    }
#if SPLIT > 1
    const uint PSTRIDE = GQW * (D + 2u);
    uint pb = (kq * SPLIT + s) * PSTRIDE; // partials per (kv head, q part), then chunk
    [[unroll]] for (uint r = 0u; r < GQW; r++) {
        [[unroll]] for (uint c = 0u; c < OC; c++) {
            uint i = tid + c * WG;
            if (i < D) part[pb + 2u * GQW + r * D + i] = fin[r][c];
        }
        if (tid == 0u) {
            part[pb + r] = fm[r];
            part[pb + GQW + r] = fl[r];
        }
    }
    memoryBarrierBuffer(); // partials are visible before the ticket is taken
    barrier();
    if (tid == 0u) s_last = atomicAdd(cnt[kq], 1u) == nsplit - 1u;
    barrier();
    if (!s_last) return;
    memoryBarrierBuffer();
    // The combine, in three steps with every load of a step in flight at
    // once (its loops at run time, one memory round trip each, were most of
    // the kernel's ~25 us a layer at short contexts on the H200): every
    // chunk's m and l into shared memory; each row's max, the chunks'
    // weights exp(m - max) and the weighted sum of l by one invocation; the
    // weighted sums of the outputs, four chunks a trip. Sums in chunk order,
    // as before.
    uint p0 = kq * SPLIT * PSTRIDE;
    for (uint i = tid; i < GQW * nsplit; i += WG) {
        uint r = i / nsplit, u = i % nsplit, pu = p0 + u * PSTRIDE;
        cmw[r * SPLIT + u] = part[pu + r];
        cml[r * SPLIT + u] = part[pu + GQW + r];
    }
    barrier();
    if (tid < GQW) {
        float mm = NEG, ll = 0.0;
        for (uint u = 0u; u < nsplit; u++) mm = max(mm, cmw[tid * SPLIT + u]);
        for (uint u = 0u; u < nsplit; u++) {
            float w = exp(cmw[tid * SPLIT + u] - mm);
            cmw[tid * SPLIT + u] = w;
            ll += cml[tid * SPLIT + u] * w;
        }
        cml[tid * SPLIT] = ll;
    }
    barrier();
    float aa[GQW][OC];
    [[unroll]] for (uint r = 0u; r < GQW; r++)
        [[unroll]] for (uint c = 0u; c < OC; c++) aa[r][c] = 0.0;
    uint col[OC]; // a lane past D reads column D-1 and writes nothing
    [[unroll]] for (uint c = 0u; c < OC; c++) col[c] = p0 + 2u * GQW + min(tid + c * WG, D - 1u);
    uint u = 0u;
    for (; u + 4u <= nsplit; u += 4u) {
        float x[4][GQW][OC];
        [[unroll]] for (uint v = 0u; v < 4u; v++)
            [[unroll]] for (uint r = 0u; r < GQW; r++)
                [[unroll]] for (uint c = 0u; c < OC; c++)
                    x[v][r][c] = part[col[c] + (u + v) * PSTRIDE + r * D];
        [[unroll]] for (uint v = 0u; v < 4u; v++)
            [[unroll]] for (uint r = 0u; r < GQW; r++)
                [[unroll]] for (uint c = 0u; c < OC; c++) aa[r][c] += x[v][r][c] * cmw[r * SPLIT + u + v];
    }
    for (; u < nsplit; u++)
        [[unroll]] for (uint r = 0u; r < GQW; r++)
            [[unroll]] for (uint c = 0u; c < OC; c++)
                aa[r][c] += part[col[c] + u * PSTRIDE + r * D] * cmw[r * SPLIT + u];
    [[unroll]] for (uint r = 0u; r < GQW; r++)
        [[unroll]] for (uint c = 0u; c < OC; c++) {
            uint i = tid + c * WG;
            if (i < D) o[(h0 + r) * D + i] = ACT_T(aa[r][c] / cml[r * SPLIT]);
        }
    if (tid == 0u) cnt[kq] = 0u; // ready for the next replay
#endif
}
