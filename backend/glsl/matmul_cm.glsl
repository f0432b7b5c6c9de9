// matmul_cm.glsl: prefill y[T, N] = x[T, K] . W[N, K]^T on the matrix
// units (cooperative matrix, 16x16x16 fp16 products, fp32 sums).
//
// A workgroup owns BM tokens x BN weight rows and walks K in steps of BK.
// Each step stages the x tile (normalized as it is staged when HAS_NORM)
// and the weight tile, dequantized from its ggml blocks, in shared memory
// as fp16: a decoded weight never goes back to VRAM. The next step's x and
// weight blocks are fetched into registers while the matrix units work on
// this one, and nothing uses them before the next stage, so the products
// do not wait for them; Q4_K blocks travel raw (the header and the quant
// bytes, 16-byte loads) and are decoded as they are staged, other types
// are decoded on fetch and held as packed halves. A thread stages WCH-
// element chunks of a row. SGM x SGN subgroups each own (BM / SGM) tokens
// x (BN / SGN) rows of the tile, FM x FW fragments of 16 x 16.
//
// With GLU (gate W0, up W1; y = silu(gate) * up) the tile's rows are BN/2
// gate rows then the same BN/2 up rows; each subgroup holds the gate and
// up fragments of the same outputs, and the epilogue combines them element
// by element once both are in shared memory.
//
// The kernel is written against GL_NV_cooperative_matrix (what Debian's
// shaderc compiles); backend/spv_coopmat.c rewrites it to the KHR form for
// devices that have only that. Operands are rounded to fp16: codegen picks
// this kernel only for matmuls the mm-f16 pass marked so, and the
// interpreter rounds them the same way.
//
// CM_PIPE orders a step: 0 (the default) stages, then fetches the next
// step into registers while the matrix units work; 1 fetches and stages a
// step directly (no registers live across the products); 2 double-buffers
// the shared tiles (one barrier a step). On the H200 0 measured fastest
// (docs/performance.md, session 5); ZINC_CM_PIPE selects the others.
// 3 specializes subgroups: SGM x SGN consumer subgroups only multiply, SGP
// producer subgroups only fetch, decode and stage, into two shared buffers
// (one barrier a step). A lane is one or the other, so its registers are
// the larger of the two roles' needs, not their sum. Measured 1.5-2x
// slower on the H200 (run 19: the staging, done by fewer subgroups, bounds
// the step); kept for measurement (ZINC_CM_PIPE=3, ZINC_CM_SGP).
//
// 4 is 0 with two steps' loads in flight (two register sets), for
// ZINC_CM_PIPE=4 to measure whether the step waits on their latency.
//
// WCH is a staging thread's chunk of a weight row: 16 elements (half a
// Q4_K sub-block, two 16-byte loads; the default, 5 % faster a prefill
// step in run 19) or 32 (a whole sub-block, three loads, half the threads).
//
// CM_ABLATE (ZINC_CM_ABLATE, a measurement, never a plan's default: its
// results are wrong on purpose): 1 leaves out the products (what the loads
// and staging cost alone), 2 the loads and staging after the first step
// (what the fragment loads and products cost alone), 3 also the fragment
// loads (the products alone, on fragments loaded once).
//
// Defines: BM, BN, BK (multiples of 16), SGM, SGN, SG (subgroup size),
// WG = (SGM * SGN + SGP) * SG, SGP (0 unless CM_PIPE 3), WCH, GLU, CM_PIPE,
// W*_TYPE/W*_ROWB.

#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x = WG) in;

#define CM_AB fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define CM_C fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

#define BKP8 ((BK + 8) / 8) /* padded row, in 8-half (16-byte) vectors: conflict-free fragment loads */
#if GLU
#define ON (BN / 2) /* outputs per tile */
#else
#define ON BN
#endif
#define FM (BM / SGM / 16) /* token fragments per subgroup */
#define FO (ON / SGN / 16) /* output fragments per subgroup */
#if GLU
#define FW (2 * FO) /* weight fragments: gate then up */
#else
#define FW FO
#endif
#define NSG (SGM * SGN)

// Halves packed in pairs (glslang loads NV matrices from uint vectors, not
// f16 vectors); offsets and strides below count 16-byte vectors.
#ifndef CM_PIPE
#define CM_PIPE 0
#endif
#ifndef WCH
#define WCH 32
#endif
#ifndef SGP
#define SGP 0
#endif
#ifndef CM_ABLATE
#define CM_ABLATE 0
#endif
#ifndef CM_MFIRST
#define CM_MFIRST 0
#endif
#if CM_PIPE == 2 || CM_PIPE == 3
#define NBUF 2 /* shared tiles double-buffered: one barrier a step */
#else
#define NBUF 1
#endif
#define XS_LEN (BM * BKP8)
#define WT_LEN (BN * BKP8)
shared uvec4 xs8[NBUF * XS_LEN]; // [buffer][token][k / 8]
#if GLU
#define EPI_VEC 128u /* the epilogue's share of a subgroup: two fragments, in 16-byte vectors */
#else
#define EPI_VEC 64u
#endif
#define WS_LEN (NBUF * WT_LEN > NSG * int(EPI_VEC) ? NBUF * WT_LEN : NSG * int(EPI_VEC))
shared uvec4 ws8[WS_LEN]; // [buffer][tile row][k / 8], then the epilogue's fragments
#if HAS_NORM
shared float sc_s[BM];
#endif

// Per-thread share of a step: x in 8-element chunks, weights in
// WCH-element chunks, over PT staging threads (every thread, or the
// producers).
#if CM_PIPE == 3
#define PT (SGP * SG)
#define STAGER_ID (gl_LocalInvocationIndex - uint(NSG * SG))
#else
#define PT WG
#define STAGER_ID gl_LocalInvocationIndex
#endif
#define XV (BM * BK / 8)
#define WV (BN * BK / WCH)
#define XPT ((XV + PT - 1) / PT)
#define WPT ((WV + PT - 1) / PT)
#define QV (WCH / 16)                          /* 16-byte quant vectors of a raw Q4_K chunk */
#define NWV (QV + 2 > WCH / 8 ? QV + 2 : WCH / 8) /* a chunk's registers: raw, or decoded halves */

#if CM_PIPE == 4
#define NSET 2 /* two steps in flight in registers */
#else
#define NSET 1
#endif
vec4 xr[NSET][XPT][2];
uvec4 wr[NSET][WPT][NWV];

// A chunk of a Q4_K sub-block as it is stored: the block's header (d, dmin,
// the 12 scale bytes) and the WCH / 2 quant bytes that hold it; r[QV + 1].x
// is the sub-block's index j.
void fetch_q4_K(const uint which, uint rowb, uint row, uint k0, out uvec4 r[NWV]) {
    uint q = (row * rowb + (k0 >> 8u) * 144u) >> 4u, j = (k0 & 255u) >> 5u;
    r[0] = wquad(which, q);
    uint v0 = q + 1u + 2u * (j >> 1u) + ((k0 >> 4u) & 1u); /* WCH 32 starts on an even vector */
    [[unroll]] for (uint v = 0u; v < uint(QV); v++) r[1u + v] = wquad(which, v0 + v);
    r[QV + 1] = uvec4(j, 0u, 0u, 0u);
}

uvec4 pack8(float v[8]) {
    return uvec4(packHalf2x16(vec2(v[0], v[1])), packHalf2x16(vec2(v[2], v[3])), packHalf2x16(vec2(v[4], v[5])),
                 packHalf2x16(vec2(v[6], v[7])));
}

// Other types: decoded on fetch, held as packed halves.
#define FETCH_DQ(which, ty, rowb)                                                                            \
    [[unroll]] for (uint c = 0u; c < uint(WCH / 8); c++) {                                                            \
        float v[8];                                                                                          \
        DQ8(which, ty, rowb, row, k0 + 8u * c, v);                                                           \
        r[c] = pack8(v);                                                                                     \
    }
// fp16 rows (ggml type 1, 16-byte aligned as K % 8 == 0) are bit copies.
#define FETCH_F16(which, rowb)                                                                               \
    [[unroll]] for (uint c = 0u; c < uint(WCH / 8); c++) r[c] = wquad(which, ((row * uint(rowb) + 2u * k0) >> 4u) + c);
#define W0_RAW (W0_TYPE == 12)
#if GLU
#define W1_RAW (W1_TYPE == 12)
#endif

// CM_H16: 1 stages Q4_K in packed fp16 arithmetic (below, stage_q4_K),
// 2 also decodes Q6_K so on fetch; a kernel does so only when every weight
// it reads is of such a type (x is staged in the weights' order).
#ifndef CM_H16
#define CM_H16 0
#endif
#define H16_TYPE(t) ((t) == 12 || (CM_H16 >= 2 && (t) == 14))
#if GLU
#define H16 (CM_H16 >= 1 && H16_TYPE(W0_TYPE) && H16_TYPE(W1_TYPE))
#else
#define H16 (CM_H16 >= 1 && H16_TYPE(W0_TYPE))
#endif

#if H16
// Q6_K (dequant.glsl's dq8_q6_K) decoded in packed fp16: q - 32 exactly (the
// 6-bit q ORed into the mantissa of 1024.0hf, then 1056 taken off), times
// d * scale rounded to fp16 once a sub-block of 16; pairs in the order 0, 2,
// 1, 3 of every 4 elements, as stage_q4_K's.
uvec4 dq8h_q6_K(const uint which, uint row_off, uint k0) {
    uint off = row_off + (k0 >> 8u) * 210u;
    uint in_b = k0 & 255u, h = in_b >> 7u, k = (in_b >> 5u) & 3u, l = in_b & 31u;
    float d = wf16(which, off + 208u);
    uint so = off + 192u + 8u * h + (l >> 4u) + 2u * k; /* one byte: a 4-byte read could pass the end */
    int sc8 = bitfieldExtract(int(wword(which, so >> 2u) >> ((so & 3u) * 8u)), 0, 8);
    f16vec2 ds = f16vec2(float16_t(d * float(sc8)));
    const f16vec2 k1056 = f16vec2(float16_t(1056.0));
    uint lo = off + 64u * h + l + 32u * (k & 1u), hb = off + 128u + 32u * h + l;
    uvec2 ql = uvec2(wu32(which, lo), wu32(which, lo + 4u)), qh = uvec2(wu32(which, hb), wu32(which, hb + 4u));
    uint sl = (k >> 1u) * 4u, shh = 2u * k;
    uvec4 r;
    [[unroll]] for (uint i = 0u; i < 2u; i++) {
        uint q = ((ql[i] >> sl) & 0x0f0f0f0fu) | (((qh[i] >> shh) & 0x03030303u) << 4u);
        f16vec2 a = unpackFloat2x16((q & 0x00ff00ffu) | 0x64006400u) - k1056;
        f16vec2 b = unpackFloat2x16(((q >> 8u) & 0x00ff00ffu) | 0x64006400u) - k1056;
        r[2u * i] = packFloat2x16(a * ds);
        r[2u * i + 1u] = packFloat2x16(b * ds);
    }
    return r;
}
#define FETCH_H16(which, ty, rowb)                                                                           \
    [[unroll]] for (uint c = 0u; c < uint(WCH / 8); c++) r[c] = dq8h_q6_K(which, row * uint(rowb), k0 + 8u * c);
#endif

void fetch_w0(uint row, uint k0, out uvec4 r[NWV]) {
#if W0_RAW
    fetch_q4_K(WQ_W0, uint(W0_ROWB), row, k0, r);
#elif H16
    FETCH_H16(WQ_W0, W0_TYPE, W0_ROWB)
#elif W0_TYPE == 1
    FETCH_F16(WQ_W0, W0_ROWB)
#else
    FETCH_DQ(WQ_W0, W0_TYPE, W0_ROWB)
#endif
}
#if GLU
void fetch_w1(uint row, uint k0, out uvec4 r[NWV]) {
#if W1_RAW
    fetch_q4_K(WQ_W1, uint(W1_ROWB), row, k0, r);
#elif H16
    FETCH_H16(WQ_W1, W1_TYPE, W1_ROWB)
#elif W1_TYPE == 1
    FETCH_F16(WQ_W1, W1_ROWB)
#else
    FETCH_DQ(WQ_W1, W1_TYPE, W1_ROWB)
#endif
}
#endif

void fetch(uint m0, uint n0, uint k0, uint T, const uint set) {
    uint tid = STAGER_ID;
    [[unroll]] for (uint r = 0u; r < uint(XPT); r++) {
        uint i = tid + r * uint(PT);
        uint t = m0 + i / uint(BK / 8), kk = k0 + (i % uint(BK / 8)) * 8u;
        [[unroll]] for (uint h = 0u; h < 2u; h++) {
            vec4 v = vec4(0.0);
            // raw: nothing here waits for the load (the norm is applied as
            // the step is staged), so the products run while it flies
            if (i < uint(XV) && t < T) v = vec4(xin4[(t * uint(K) + kk + 4u * h) >> 2u]);
            xr[set][r][h] = v;
        }
    }
    [[unroll]] for (uint r = 0u; r < uint(WPT); r++) {
        uint i = tid + r * uint(PT);
        uint n = i / uint(BK / WCH), kk = k0 + (i % uint(BK / WCH)) * uint(WCH), row = n0 + n % uint(ON);
        [[unroll]] for (uint c = 0u; c < uint(NWV); c++) wr[set][r][c] = uvec4(0u);
        if (i < uint(WV) && row < uint(N)) {
#if GLU
            if (n >= uint(ON)) fetch_w1(row, kk, wr[set][r]);
            else fetch_w0(row, kk, wr[set][r]);
#else
            fetch_w0(row, kk, wr[set][r]);
#endif
        }
    }
}

// With H16 (CM_H16, a measurement: see above) the staging decodes Q4_K in
// packed fp16 arithmetic, two elements an instruction, without
// conversions: a nibble ORed into the mantissa of 1024.0hf is 1024 + q exactly, 1024 is taken off (exact), then q * d1 - m1
// is one fp16 fma with d1 = d * scale and m1 = dmin * min rounded to fp16
// once per sub-block. That rounding is the only difference from the
// interpreter (which rounds the fp32 value d1 * q - m1 to fp16): the
// sub-block's scale off by at most 2^-12 of itself. On the H200 (run 38)
// the kernel tests' q4_k_m models failed with it, cause not yet found,
// so it is off by default. The nibbles of bytes 0 and 2 (1 and 3) of a word land in
// one packed pair, so within every 4 elements of K the staged order is
// 0, 2, 1, 3, and x is staged in the same order (a dot product does not
// mind the order of its terms, as long as both sides share it).
#if H16
uvec2 pack4(vec4 v) { return uvec2(packHalf2x16(v.xz), packHalf2x16(v.yw)); }
#else
uvec2 pack4(vec4 v) { return uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw)); }
#endif

#if H16
void stage_q4_K(uvec4 r[NWV], uint o) {
    uint j = r[QV + 1].x, sh = (j & 1u) * 4u;
    vec2 dm = unpackHalf2x16(r[0].x);
    float sc, m;
    k4_scale_min(r[0].y, r[0].z, r[0].w, j, sc, m);
    f16vec2 d1 = f16vec2(float16_t(dm.x * sc)), m1 = f16vec2(-float16_t(dm.y * m));
    const f16vec2 k1024 = f16vec2(float16_t(1024.0));
    [[unroll]] for (uint w = 0u; w < uint(WCH / 8); w++) {
        uvec2 qq = (w & 1u) == 0u ? r[1u + w / 2u].xy : r[1u + w / 2u].zw;
        uvec4 o4;
        [[unroll]] for (uint h = 0u; h < 2u; h++) {
            uint t = qq[h] >> sh;
            f16vec2 a = unpackFloat2x16((t & 0x000f000fu) | 0x64006400u) - k1024;
            f16vec2 b = unpackFloat2x16(((t >> 8u) & 0x000f000fu) | 0x64006400u) - k1024;
            o4[2u * h] = packFloat2x16(fma(a, d1, m1));
            o4[2u * h + 1u] = packFloat2x16(fma(b, d1, m1));
        }
        ws8[o + w] = o4;
    }
}
#else

// Decodes a fetched Q4_K chunk into WCH / 8 vectors of eight halves, with
// dequant.glsl's arithmetic (d * scale * q - dmin * min).
void stage_q4_K(uvec4 r[NWV], uint o) {
    uint j = r[QV + 1].x, sh = (j & 1u) * 4u;
    vec2 dm = unpackHalf2x16(r[0].x);
    float sc, m;
    k4_scale_min(r[0].y, r[0].z, r[0].w, j, sc, m);
    float d1 = dm.x * sc, m1 = dm.y * m;
    [[unroll]] for (uint w = 0u; w < uint(WCH / 8); w++) {
        uvec2 qq = (w & 1u) == 0u ? r[1u + w / 2u].xy : r[1u + w / 2u].zw;
        uvec2 lo, hi;
        [[unroll]] for (uint h = 0u; h < 2u; h++) {
            uint q = qq[h];
            vec4 v = vec4(float((q >> sh) & 0xfu), float((q >> (8u + sh)) & 0xfu),
                          float((q >> (16u + sh)) & 0xfu), float((q >> (24u + sh)) & 0xfu));
            uvec2 p = pack4(d1 * v - m1);
            if (h == 0u) lo = p;
            else hi = p;
        }
        ws8[o + w] = uvec4(lo, hi);
    }
}
#endif

// Stages the step at k0 (fetched earlier into the registers) into buffer buf.
void stage(uint buf, uint k0, const uint set) {
    uint tid = STAGER_ID;
    [[unroll]] for (uint r = 0u; r < uint(XPT); r++) {
        uint i = tid + r * uint(PT);
        if (i >= uint(XV)) continue;
        uint m = i / uint(BK / 8);
        vec4 v0 = xr[set][r][0], v1 = xr[set][r][1];
#if HAS_NORM
        uint k8 = k0 + (i % uint(BK / 8)) * 8u;
        float sc = sc_s[m];
        v0 = v0 * sc * vec4(DQ1(WQ_NW, NW_TYPE, k8), DQ1(WQ_NW, NW_TYPE, k8 + 1u), DQ1(WQ_NW, NW_TYPE, k8 + 2u),
                            DQ1(WQ_NW, NW_TYPE, k8 + 3u));
        v1 = v1 * sc * vec4(DQ1(WQ_NW, NW_TYPE, k8 + 4u), DQ1(WQ_NW, NW_TYPE, k8 + 5u),
                            DQ1(WQ_NW, NW_TYPE, k8 + 6u), DQ1(WQ_NW, NW_TYPE, k8 + 7u));
#endif
        xs8[buf * uint(XS_LEN) + m * uint(BKP8) + i % uint(BK / 8)] = uvec4(pack4(v0), pack4(v1));
    }
    [[unroll]] for (uint r = 0u; r < uint(WPT); r++) {
        uint i = tid + r * uint(PT);
        if (i >= uint(WV)) continue;
        uint n = i / uint(BK / WCH), o = buf * uint(WT_LEN) + n * uint(BKP8) + (i % uint(BK / WCH)) * uint(WCH / 8);
#if GLU
        bool raw = n >= uint(ON) ? W1_RAW : W0_RAW;
#else
        bool raw = W0_RAW;
#endif
        if (raw) {
            stage_q4_K(wr[set][r], o);
        } else {
            [[unroll]] for (uint c = 0u; c < uint(WCH / 8); c++) ws8[o + c] = wr[set][r][c];
        }
    }
}

// Tile row of this subgroup's weight fragment f.
uint wrow(uint sn, uint f) {
#if GLU
    return f < uint(FO) ? sn * uint(FO * 16) + f * 16u : uint(ON) + sn * uint(FO * 16) + (f - uint(FO)) * 16u;
#else
    return sn * uint(FO * 16) + f * 16u;
#endif
}

#if CM_ABLATE == 3
// The fragments of step 0's first slice, loaded once: what the products
// cost without any shared-memory loads (results wrong on purpose).
CM_AB a3[FM], b3[FW];
void mma_fixed(inout CM_C acc[FM][FW]) {
    [[unroll]] for (uint kk = 0u; kk < uint(BK / 8); kk += 2u)
        [[unroll]] for (uint j = 0u; j < uint(FW); j++)
            [[unroll]] for (uint i = 0u; i < uint(FM); i++) acc[i][j] = coopMatMulAddNV(a3[i], b3[j], acc[i][j]);
}
#endif

// One K step of this subgroup's products from shared buffer buf.
void mma_step(inout CM_C acc[FM][FW], uint buf, uint sm, uint sn) {
#if CM_ABLATE == 3
    if (buf == 0u) {
        mma_fixed(acc);
        return;
    }
#endif
    [[unroll]] for (uint kk = 0u; kk < uint(BK / 8); kk += 2u) {
        CM_AB a[FM];
        [[unroll]] for (uint i = 0u; i < uint(FM); i++)
            coopMatLoadNV(a[i], xs8, buf * uint(XS_LEN) + (sm * uint(FM * 16) + i * 16u) * uint(BKP8) + kk,
                          uint(BKP8), false);
        [[unroll]] for (uint j = 0u; j < uint(FW); j++) {
            CM_AB b;
            coopMatLoadNV(b, ws8, buf * uint(WT_LEN) + wrow(sn, j) * uint(BKP8) + kk, uint(BKP8), true);
            [[unroll]] for (uint i = 0u; i < uint(FM); i++) acc[i][j] = coopMatMulAddNV(a[i], b, acc[i][j]);
        }
    }
}

// CM_BAR (ZINC_CM_BAR, a measurement): how the K loop's barriers are
// written. 0: barrier() (an execution barrier with acquire-release of
// workgroup memory); 1: the same synchronization as a release fence on
// shared memory, an execution-only barrier and an acquire fence (the
// Vulkan memory model's fence-barrier-fence); 2: execution only, no memory semantics (relies on
// the hardware ordering shared memory at a barrier: not portable).
#ifndef CM_BAR
#define CM_BAR 0
#endif
#if CM_BAR == 1
#define STEP_BARRIER()                                                                                       \
    memoryBarrier(gl_ScopeWorkgroup, gl_StorageSemanticsShared, gl_SemanticsRelease),                        \
        controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, 0, 0),                                          \
        memoryBarrier(gl_ScopeWorkgroup, gl_StorageSemanticsShared, gl_SemanticsAcquire)
#elif CM_BAR == 2
#define STEP_BARRIER() controlBarrier(gl_ScopeWorkgroup, gl_ScopeInvocation, 0, 0)
#else
#define STEP_BARRIER() barrier()
#endif

void main() {
#if CM_MFIRST
    // token tiles first: the workgroups that read one weight tile run
    // together, so it comes from VRAM once and from L2 for the others
    uint n0 = gl_WorkGroupID.y * uint(ON), m0 = gl_WorkGroupID.x * uint(BM), T = step.T;
#else
    uint n0 = gl_WorkGroupID.x * uint(ON), m0 = gl_WorkGroupID.y * uint(BM), T = step.T;
#endif
    if (m0 >= T || m0 + uint(BM) <= first_needed_row(T)) return;
    uint sg = gl_SubgroupID, sm = sg / uint(SGN), sn = sg % uint(SGN), lane = gl_SubgroupInvocationID;
#if HAS_NORM
    for (uint m = sg; m < uint(BM); m += uint(WG / SG)) {
        float s = 0.0;
        if (m0 + m < T) s = subgroup_inv_rms((m0 + m) * uint(K), uint(K), NORM_EPS);
        if (subgroupElect()) sc_s[m] = s;
    }
    barrier();
#endif
    CM_C acc[FM][FW];
    [[unroll]] for (uint i = 0u; i < uint(FM); i++)
        [[unroll]] for (uint j = 0u; j < uint(FW); j++) acc[i][j] = CM_C(0.0);
#if CM_PIPE == 3
    // Producers stage step 0 and hold step 1 in registers; then, each step,
    // the consumers multiply from one buffer while the producers stage the
    // next step into the other and fetch the one after.
    bool producer = sg >= uint(NSG);
    if (producer) {
        fetch(m0, n0, 0u, T, 0u);
        stage(0u, 0u, 0u);
        if (uint(BK) < uint(K)) fetch(m0, n0, uint(BK), T, 0u);
    }
    STEP_BARRIER();
    for (uint k0 = 0u; k0 < uint(K); k0 += uint(BK)) {
        uint cur = (k0 / uint(BK)) & 1u;
        if (!producer) {
            mma_step(acc, cur, sm, sn);
        } else if (k0 + uint(BK) < uint(K)) {
            stage(cur ^ 1u, k0 + uint(BK), 0u);
            if (k0 + uint(2 * BK) < uint(K)) fetch(m0, n0, k0 + uint(2 * BK), T, 0u);
        }
        STEP_BARRIER();
    }
#elif CM_PIPE == 4
    // Two steps in flight: set 0 holds the even steps, set 1 the odd ones;
    // each step's loads are issued two steps before it is staged, so they
    // have two steps' products (and the other set's staging) to arrive.
    fetch(m0, n0, 0u, T, 0u);
    if (uint(BK) < uint(K)) fetch(m0, n0, uint(BK), T, 1u);
    for (uint k0 = 0u; k0 < uint(K); k0 += uint(2 * BK)) {
        STEP_BARRIER();
        stage(0u, k0, 0u);
        STEP_BARRIER();
        if (k0 + uint(2 * BK) < uint(K)) fetch(m0, n0, k0 + uint(2 * BK), T, 0u);
        mma_step(acc, 0u, sm, sn);
        if (k0 + uint(BK) >= uint(K)) break;
        STEP_BARRIER();
        stage(0u, k0 + uint(BK), 1u);
        STEP_BARRIER();
        if (k0 + uint(3 * BK) < uint(K)) fetch(m0, n0, k0 + uint(3 * BK), T, 1u);
        mma_step(acc, 0u, sm, sn);
    }
#else
    fetch(m0, n0, 0u, T, 0u);
#if CM_PIPE == 2
    stage(0u, 0u, 0u);
    STEP_BARRIER();
#endif
    for (uint k0 = 0u; k0 < uint(K); k0 += uint(BK)) {
#if CM_PIPE == 0
        STEP_BARRIER(); // the previous step's fragments are loaded
#if CM_ABLATE < 2
        stage(0u, k0, 0u);
#else
        if (k0 == 0u) stage(0u, k0, 0u);
#endif
        STEP_BARRIER();
#if CM_ABLATE == 3
        if (k0 == 0u) {
            [[unroll]] for (uint i = 0u; i < uint(FM); i++)
                coopMatLoadNV(a3[i], xs8, (sm * uint(FM * 16) + i * 16u) * uint(BKP8), uint(BKP8), false);
            [[unroll]] for (uint j = 0u; j < uint(FW); j++)
                coopMatLoadNV(b3[j], ws8, wrow(sn, j) * uint(BKP8), uint(BKP8), true);
        }
#endif
#if CM_ABLATE < 2
        if (k0 + uint(BK) < uint(K)) fetch(m0, n0, k0 + uint(BK), T, 0u);
#endif
#if CM_ABLATE != 1
        mma_step(acc, 0u, sm, sn);
#endif
#elif CM_PIPE == 1
        // Direct: this step's loads are waited for at once; other
        // workgroups on the SM hide the latency (fewer live registers).
        if (k0 > 0u) {
            STEP_BARRIER();
            fetch(m0, n0, k0, T, 0u);
        }
        stage(0u, k0, 0u);
        STEP_BARRIER();
        mma_step(acc, 0u, sm, sn);
#else
        // Double-buffered: the next step's loads fly during this step's
        // products and are staged into the other buffer; one barrier.
        uint cur = (k0 / uint(BK)) & 1u;
        bool more = k0 + uint(BK) < uint(K);
        if (more) fetch(m0, n0, k0 + uint(BK), T, 0u);
        mma_step(acc, cur, sm, sn);
        if (more) stage(cur ^ 1u, k0 + uint(BK), 0u);
        STEP_BARRIER();
#endif
    }
#endif
    // Epilogue: each fragment (with GLU, the gate and the up fragment of the
    // same outputs) through this subgroup's 16 x 16 floats of the weight
    // tile's shared memory (free once every subgroup is done with it), then
    // (SwiGLU, residual or bias) to y, 16 lanes to a row. Elements are
    // combined in shared memory, not in the fragments: a fragment's element
    // count is a specialization constant that KHR drivers need not accept.
    barrier();
#if CM_PIPE == 3
    if (sg >= uint(NSG)) return; // producers hold no sums (no barrier follows)
#endif
    uint cb = sg * EPI_VEC;
    [[unroll]] for (uint i = 0u; i < uint(FM); i++)
        [[unroll]] for (uint j = 0u; j < uint(FO); j++) {
            coopMatStoreNV(acc[i][j], ws8, cb, 4u, false);
#if GLU
            coopMatStoreNV(acc[i][j + uint(FO)], ws8, cb + 64u, 4u, false);
#endif
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (uint e = lane; e < 256u; e += uint(SG)) {
                uint t = m0 + sm * uint(FM * 16) + i * 16u + e / 16u, n = n0 + sn * uint(FO * 16) + j * 16u + e % 16u;
                float v = uintBitsToFloat(ws8[cb + e / 4u][e % 4u]);
#if GLU
                v = silu(v) * uintBitsToFloat(ws8[cb + 64u + e / 4u][e % 4u]);
#endif
                if (t < T && n < uint(N)) store_y(t, n, epilogue(t, n, v));
            }
            subgroupBarrier();
        }
}
