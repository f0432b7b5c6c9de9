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
// bytes, 16-byte loads) and are decoded as they are staged (Q6_K's too
// with Q6_RAW: words, its blocks being 210 bytes; measured no faster on the
// H100 in session 20), other types are decoded on fetch and held as packed
// halves. A thread stages WCH-
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
// (A 4, two steps' loads in flight in two register sets, measured nothing
// in run 30 and 1.5 % slower in run 39, and was taken out.)
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
// CM_PAD (ZINC_CM_PAD, a measurement): CM_PAD more bytes of shared memory,
// unused, so that fewer workgroups fit a compute unit: whether the
// workgroups that share one overlap each other's staging and products.
//
// CM_WG (VK_NV_cooperative_matrix2, where the device has it): the products
// are workgroup-scope matrices, the whole BM x BK x tile at once (gate and
// up as two accumulators of BM x ON), loaded from the same staged tiles; the
// driver decides how the workgroup's subgroups share them (on Hopper it may
// issue the warpgroup products that read shared memory themselves, which no
// subgroup-scope fragment can). WG is then the flexible shape's invocations
// and SGM x SGN only sizes the workgroup.
//
// MOE (prefill's grouped expert GEMMs, over moe_tiles.glsl's tiles): a
// workgroup's BM rows are one expert's run of sorted (token, slot) pairs,
// not consecutive tokens: x rows are gathered (x[t] for gate+up, x[t, u]
// with X3), the weight rows are the expert's (e * N + n of the stacked
// [E, N, K] tensor), and output row p = t * U + u is the pair's.
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
#ifndef MOE
#define MOE 0
#endif
#if MOE
#if X3
#define XROW(t) pair_s[t]
#else
#define XROW(t) (pair_s[t] / uint(U))
#endif
#define YROW(t) pair_s[t]
#else
#define XROW(t) (t)
#define YROW(t) (t)
#endif
uint wbase = 0u; // the first weight row of the tile's expert (MOE)

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
#ifndef CM_PAD
#define CM_PAD 0
#endif
#if CM_PAD
shared uint pad_s[CM_PAD / 4]; // kept by a store no invocation makes (main)
#endif
#ifndef CM_MFIRST
#define CM_MFIRST 0
#endif
#ifndef CM_WG
#define CM_WG 0
#endif
#ifndef CM_DIRECT
#define CM_DIRECT 0
#endif
#if CM_WG
#define WM_A fcoopmatNV<16, gl_ScopeWorkgroup, BM, BK>
#define WM_B fcoopmatNV<16, gl_ScopeWorkgroup, BK, ON>
#define WM_C fcoopmatNV<32, gl_ScopeWorkgroup, BM, ON>
#define WM_EPI (BM * ON / 4) /* an accumulator in shared memory, in 16-byte vectors */
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
#if CM_WG
#define WS_LEN (NBUF * WT_LEN > WM_EPI ? NBUF * WT_LEN : WM_EPI)
#else
#define WS_LEN (NBUF * WT_LEN > NSG * int(EPI_VEC) ? NBUF * WT_LEN : NSG * int(EPI_VEC))
#endif
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
#ifndef Q6_RAW
#define Q6_RAW 0
#endif
#define Q6W (WCH / 4 + 1) /* words of a raw Q6_K chunk's quant bytes, and of its high bits */
#define Q6V (Q6_RAW != 0 ? (2 * Q6W + 3 + 3) / 4 : 0) /* and its 16-byte registers (+ scale, d, where) */
#define NWV0 (QV + 2 > WCH / 8 ? QV + 2 : WCH / 8)
#define NWV (Q6V > NWV0 ? Q6V : NWV0) /* a chunk's registers: raw, or decoded halves */

X_REGS(XPT); // x as fetched (matmul_io.glsl: X_RAW)
uvec4 wr[WPT][NWV];

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

#if Q6_RAW
// A chunk of a Q6_K block as it is stored (dequant.glsl's dq8_q6_K says
// where its bytes are): the Q6W words holding its WCH quant bytes, the Q6W
// holding its WCH high-bit bytes, the word of its scale byte(s), the word
// of d, then where in them it starts: the block's byte offset mod 4 (the
// same for the quant, high-bit and d words), the scale byte's, and the
// quarter k of the half. Blocks are 210 bytes, so words, not quads; the
// last quant and high-bit words read into the next field of the block.
uint r6(uvec4 r[NWV], uint u) { return r[u >> 2u][u & 3u]; }
void fetch_q6_K(const uint which, uint rowb, uint row, uint k0, out uvec4 r[NWV]) {
    uint off = row * rowb + (k0 >> 8u) * 210u;
    uint in_b = k0 & 255u, h = in_b >> 7u, k = (in_b >> 5u) & 3u, l0 = in_b & 31u;
    uint lo = off + 64u * h + 32u * (k & 1u) + l0, hb = off + 128u + 32u * h + l0;
    uint so = off + 192u + 8u * h + 2u * k + (l0 >> 4u);
    [[unroll]] for (uint v = 0u; v < uint(NWV); v++) r[v] = uvec4(0u);
    [[unroll]] for (uint u = 0u; u < uint(Q6W); u++) {
        r[u >> 2u][u & 3u] = wword(which, (lo >> 2u) + u);
        r[(Q6W + u) >> 2u][(Q6W + u) & 3u] = wword(which, (hb >> 2u) + u);
    }
    r[(2 * Q6W) >> 2][(2 * Q6W) & 3] = wword(which, so >> 2u);
    r[(2 * Q6W + 1) >> 2][(2 * Q6W + 1) & 3] = wword(which, (off + 208u) >> 2u);
    r[(2 * Q6W + 2) >> 2][(2 * Q6W + 2) & 3] = (off & 3u) | ((so & 3u) << 2u) | (k << 4u);
}

// Word j of a raw run of words that starts s bits into word 0.
uint q6_word(uvec4 r[NWV], uint base, uint j, uint s) {
    uint a = r6(r, base + j);
    return s == 0u ? a : (a >> s) | (r6(r, base + j + 1u) << (32u - s));
}
#endif

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
// How a weight travels from fetch to stage: 1 raw Q4_K, 2 raw Q6_K, 0
// decoded on fetch (packed halves, or fp16 bit copies).
#if W0_TYPE == 12
#define W0_RAW 1
#elif W0_TYPE == 14 && Q6_RAW && !W0_Q6P
#define W0_RAW 2
#else
#define W0_RAW 0
#endif
#if GLU
#if W1_TYPE == 12
#define W1_RAW 1
#elif W1_TYPE == 14 && Q6_RAW && !W1_Q6P
#define W1_RAW 2
#else
#define W1_RAW 0
#endif
#endif

void fetch_w0(uint row, uint k0, out uvec4 r[NWV]) {
#if W0_RAW == 1
    fetch_q4_K(WQ_W0, uint(W0_ROWB), row, k0, r);
#elif W0_RAW == 2
    fetch_q6_K(WQ_W0, uint(W0_ROWB), row, k0, r);
#elif W0_TYPE == 1
    FETCH_F16(WQ_W0, W0_ROWB)
#else
    FETCH_DQ(WQ_W0, W0_TYPE, W0_ROWB)
#endif
}
#if GLU
void fetch_w1(uint row, uint k0, out uvec4 r[NWV]) {
#if W1_RAW == 1
    fetch_q4_K(WQ_W1, uint(W1_ROWB), row, k0, r);
#elif W1_RAW == 2
    fetch_q6_K(WQ_W1, uint(W1_ROWB), row, k0, r);
#elif W1_TYPE == 1
    FETCH_F16(WQ_W1, W1_ROWB)
#else
    FETCH_DQ(WQ_W1, W1_TYPE, W1_ROWB)
#endif
}
#endif

void fetch(uint m0, uint n0, uint k0, uint T) {
    uint tid = STAGER_ID;
    [[unroll]] for (uint r = 0u; r < uint(XPT); r++) {
        uint i = tid + r * uint(PT);
        uint t = m0 + i / uint(BK / 8), kk = k0 + (i % uint(BK / 8)) * 8u;
#if X_RAW
        xr[r] = i < uint(XV) && t < T ? x8_halves(XROW(t) * uint(K) + kk) : uvec4(0u);
#else
        [[unroll]] for (uint h = 0u; h < 2u; h++) {
            vec4 v = vec4(0.0);
            // raw: nothing here waits for the load (the norm is applied as
            // the step is staged), so the products run while it flies
            if (i < uint(XV) && t < T) v = vec4(xin4[(XROW(t) * uint(K) + kk + 4u * h) >> 2u]);
            xr[r][h] = v;
        }
#endif
    }
    [[unroll]] for (uint r = 0u; r < uint(WPT); r++) {
        uint i = tid + r * uint(PT);
        uint n = i / uint(BK / WCH), kk = k0 + (i % uint(BK / WCH)) * uint(WCH), row = n0 + n % uint(ON);
        [[unroll]] for (uint c = 0u; c < uint(NWV); c++) wr[r][c] = uvec4(0u);
        if (i < uint(WV) && row < uint(N)) {
#if GLU
            if (n >= uint(ON)) fetch_w1(wbase + row, kk, wr[r]);
            else fetch_w0(wbase + row, kk, wr[r]);
#else
            fetch_w0(wbase + row, kk, wr[r]);
#endif
        }
    }
}

uvec2 pack4(vec4 v) { return uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw)); }

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

#if Q6_RAW
// Decodes a fetched Q6_K chunk into WCH / 8 vectors of eight halves, with
// dq8_q6_K's arithmetic (d * scale * (q - 32)).
void stage_q6_K(uvec4 r[NWV], uint o) {
    uint meta = r6(r, uint(2 * Q6W + 2)), s = (meta & 3u) * 8u, sp = (meta >> 2u) & 3u, k = meta >> 4u;
    float d = unpackHalf2x16(r6(r, uint(2 * Q6W + 1)) >> s).x;
    uint scw = r6(r, uint(2 * Q6W)), sl = (k >> 1u) * 4u, shh = 2u * k;
    [[unroll]] for (uint w = 0u; w < uint(WCH / 8); w++) {
        /* the scale of elements 16 apart: WCH 32 spans two, read as bytes sp and sp + 1 */
        int sc8 = bitfieldExtract(int(scw >> ((sp + (w >> 1u)) * 8u)), 0, 8);
        float ds = d * float(sc8);
        uvec2 lo, hi;
        [[unroll]] for (uint hh = 0u; hh < 2u; hh++) {
            uint ql = q6_word(r, 0u, 2u * w + hh, s), qh = q6_word(r, uint(Q6W), 2u * w + hh, s);
            vec4 v;
            [[unroll]] for (uint i = 0u; i < 4u; i++)
                v[i] = ds * float(int(((ql >> (8u * i + sl)) & 0xfu) | (((qh >> (8u * i + shh)) & 3u) << 4u)) - 32);
            uvec2 p = pack4(v);
            if (hh == 0u) lo = p;
            else hi = p;
        }
        ws8[o + w] = uvec4(lo, hi);
    }
}
#endif

// Stages the step at k0 (fetched earlier into the registers) into buffer buf.
void stage(uint buf, uint k0) {
    uint tid = STAGER_ID;
    [[unroll]] for (uint r = 0u; r < uint(XPT); r++) {
        uint i = tid + r * uint(PT);
        if (i >= uint(XV)) continue;
        uint m = i / uint(BK / 8);
#if X_RAW
        xs8[buf * uint(XS_LEN) + m * uint(BKP8) + i % uint(BK / 8)] = xr[r];
#else
        vec4 v0 = xr[r][0], v1 = xr[r][1];
#if HAS_NORM
        uint k8 = k0 + (i % uint(BK / 8)) * 8u;
        v0 = x4_normed(v0, sc_s[m], k8);
        v1 = x4_normed(v1, sc_s[m], k8 + 4u);
#endif
        xs8[buf * uint(XS_LEN) + m * uint(BKP8) + i % uint(BK / 8)] = uvec4(pack4(v0), pack4(v1));
#endif
    }
    [[unroll]] for (uint r = 0u; r < uint(WPT); r++) {
        uint i = tid + r * uint(PT);
        if (i >= uint(WV)) continue;
        uint n = i / uint(BK / WCH), o = buf * uint(WT_LEN) + n * uint(BKP8) + (i % uint(BK / WCH)) * uint(WCH / 8);
#if GLU
        uint raw = n >= uint(ON) ? uint(W1_RAW) : uint(W0_RAW);
#else
        uint raw = uint(W0_RAW);
#endif
        if (raw == 1u) {
            stage_q4_K(wr[r], o);
#if Q6_RAW
        } else if (raw == 2u) {
            stage_q6_K(wr[r], o);
#endif
        } else {
            [[unroll]] for (uint c = 0u; c < uint(WCH / 8); c++) ws8[o + c] = wr[r][c];
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

#if CM_DIRECT
// CM_DIRECT (ZINC_CM_DIRECT, a measurement): fp16 weights and fp16 x with
// no norm on the way, loaded as fragments straight from VRAM (through L1),
// with no staging and no barrier: whether the staging through shared
// memory, and not the loads, is what a step waits on. Needs the step's
// tokens a multiple of BM (the rows past T are read, not guarded).
// Measured 2.3-3x slower than the staged tiles in every layout (run 54).
// With CM_WG the loads are workgroup-scope matrices (main).
layout(std430, binding = B_X) readonly buffer XDq { uvec4 xq8[]; };
void mma_direct(inout CM_C acc[FM][FW], uint m0, uint n0, uint k0, uint sm, uint sn) {
    uint ks = uint(K) / 8u; // a row, in 8-half vectors
    [[unroll]] for (uint kk = 0u; kk < uint(BK / 8); kk += 2u) {
        CM_AB a[FM];
        [[unroll]] for (uint i = 0u; i < uint(FM); i++)
            coopMatLoadNV(a[i], xq8, (m0 + sm * uint(FM * 16) + i * 16u) * ks + k0 / 8u + kk, ks, false);
        [[unroll]] for (uint j = 0u; j < uint(FW); j++) {
            CM_AB b;
#if GLU
            if (j >= uint(FO))
                coopMatLoadNV(b, w1_4, (n0 + wrow(sn, j) - uint(ON)) * ks + k0 / 8u + kk, ks, true);
            else
#endif
                coopMatLoadNV(b, w0_4, (n0 + wrow(sn, j)) * ks + k0 / 8u + kk, ks, true);
            [[unroll]] for (uint i = 0u; i < uint(FM); i++) acc[i][j] = coopMatMulAddNV(a[i], b, acc[i][j]);
        }
    }
}
#endif

#if CM_WG
// One K step of the workgroup's products: x (BM x BK, rows of the staged
// tile) by the weight tile's rows as columns (gate, then up at row ON).
#if GLU
void mma_wg(inout WM_C acc, inout WM_C accu) {
#else
void mma_wg(inout WM_C acc) {
#endif
    WM_A a;
    WM_B b;
    coopMatLoadNV(a, xs8, 0u, uint(BKP8), false);
    coopMatLoadNV(b, ws8, 0u, uint(BKP8), true);
    acc = coopMatMulAddNV(a, b, acc);
#if GLU
    coopMatLoadNV(b, ws8, uint(ON * BKP8), uint(BKP8), true);
    accu = coopMatMulAddNV(a, b, accu);
#endif
}

// The epilogue: each accumulator through shared memory (the weight tile's,
// free once the products are done), then to y, WG threads over the tile.
#if GLU
void epilogue_wg(WM_C acc, WM_C accu, uint m0, uint n0, uint T) {
#else
void epilogue_wg(WM_C acc, uint m0, uint n0, uint T) {
#endif
    uint tid = gl_LocalInvocationIndex;
    barrier();
    coopMatStoreNV(acc, ws8, 0u, uint(ON / 4), false);
    barrier();
#if GLU
    float g[(BM * ON + WG - 1) / WG];
    [[unroll]] for (uint r = 0u; r < uint((BM * ON + WG - 1) / WG); r++) {
        uint e = tid + r * uint(WG);
        g[r] = e < uint(BM * ON) ? silu(uintBitsToFloat(ws8[e / 4u][e % 4u])) : 0.0;
    }
    barrier();
    coopMatStoreNV(accu, ws8, 0u, uint(ON / 4), false);
    barrier();
#endif
    [[unroll]] for (uint r = 0u; r < uint((BM * ON + WG - 1) / WG); r++) {
        uint e = tid + r * uint(WG);
        if (e >= uint(BM * ON)) continue;
        uint t = m0 + e / uint(ON), n = n0 + e % uint(ON);
        float v = uintBitsToFloat(ws8[e / 4u][e % 4u]);
#if GLU
        v = g[r] * v;
#endif
        if (t < T && n < uint(N)) store_y(YROW(t), n, epilogue(YROW(t), n, v));
    }
}
#endif

void main() {
#if CM_PAD
    if (gl_WorkGroupID.z > 65535u) pad_s[gl_LocalInvocationIndex % uint(CM_PAD / 4)] = 0u;
#endif
#if MOE
    // the tile's expert and its pairs; T is the count of them
    uint e, T, n0 = gl_WorkGroupID.x * uint(ON), m0 = 0u;
    if (!find_tile(step.T * uint(U), e, T)) return;
    wbase = e * uint(N);
#elif CM_MFIRST
    // token tiles first: the workgroups that read one weight tile run
    // together, so it comes from VRAM once and from L2 for the others
    uint n0 = gl_WorkGroupID.y * uint(ON), m0 = gl_WorkGroupID.x * uint(BM), T = step.T;
#else
    uint n0 = gl_WorkGroupID.x * uint(ON), m0 = gl_WorkGroupID.y * uint(BM), T = step.T;
#endif
#if !MOE
    if (m0 >= T || m0 + uint(BM) <= first_needed_row(T)) return;
#endif
    uint sg = gl_SubgroupID, sm = sg / uint(SGN), sn = sg % uint(SGN), lane = gl_SubgroupInvocationID;
#if HAS_NORM
    for (uint m = sg; m < uint(BM); m += uint(WG / SG)) {
        float s = 0.0;
        if (m0 + m < T) s = subgroup_inv_rms((m0 + m) * uint(K), uint(K), NORM_EPS);
        if (subgroupElect()) sc_s[m] = s;
    }
    barrier();
#endif
#if CM_WG
    WM_C wacc = WM_C(0.0);
#if GLU
    WM_C waccu = WM_C(0.0);
#endif
#if CM_DIRECT
    // x and the weights as workgroup-scope matrices loaded from VRAM: how
    // they reach the matrix units (staged, and how) is the driver's choice
    uint ks = uint(K) / 8u;
    for (uint k0 = 0u; k0 < uint(K); k0 += uint(BK)) {
        WM_A a;
        WM_B b;
        coopMatLoadNV(a, xq8, m0 * ks + k0 / 8u, ks, false);
        coopMatLoadNV(b, w0_4, n0 * ks + k0 / 8u, ks, true);
        wacc = coopMatMulAddNV(a, b, wacc);
#if GLU
        coopMatLoadNV(b, w1_4, n0 * ks + k0 / 8u, ks, true);
        waccu = coopMatMulAddNV(a, b, waccu);
#endif
    }
#else
    fetch(m0, n0, 0u, T);
    for (uint k0 = 0u; k0 < uint(K); k0 += uint(BK)) {
        barrier(); // the previous step's tiles are loaded
        stage(0u, k0);
        barrier();
        if (k0 + uint(BK) < uint(K)) fetch(m0, n0, k0 + uint(BK), T);
#if GLU
        mma_wg(wacc, waccu);
#else
        mma_wg(wacc);
#endif
    }
#endif
#if GLU
    epilogue_wg(wacc, waccu, m0, n0, T);
#else
    epilogue_wg(wacc, m0, n0, T);
#endif
    return;
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
        fetch(m0, n0, 0u, T);
        stage(0u, 0u);
        if (uint(BK) < uint(K)) fetch(m0, n0, uint(BK), T);
    }
    barrier();
    for (uint k0 = 0u; k0 < uint(K); k0 += uint(BK)) {
        uint cur = (k0 / uint(BK)) & 1u;
        if (!producer) {
            mma_step(acc, cur, sm, sn);
        } else if (k0 + uint(BK) < uint(K)) {
            stage(cur ^ 1u, k0 + uint(BK));
            if (k0 + uint(2 * BK) < uint(K)) fetch(m0, n0, k0 + uint(2 * BK), T);
        }
        barrier();
    }
#elif CM_DIRECT
    for (uint k0 = 0u; k0 < uint(K); k0 += uint(BK)) mma_direct(acc, m0, n0, k0, sm, sn);
#else
    fetch(m0, n0, 0u, T);
#if CM_PIPE == 2
    stage(0u, 0u);
    barrier();
#endif
    for (uint k0 = 0u; k0 < uint(K); k0 += uint(BK)) {
#if CM_PIPE == 0
        barrier(); // the previous step's fragments are loaded
#if CM_ABLATE < 2
        stage(0u, k0);
#else
        if (k0 == 0u) stage(0u, k0);
#endif
        barrier();
#if CM_ABLATE == 3
        if (k0 == 0u) {
            [[unroll]] for (uint i = 0u; i < uint(FM); i++)
                coopMatLoadNV(a3[i], xs8, (sm * uint(FM * 16) + i * 16u) * uint(BKP8), uint(BKP8), false);
            [[unroll]] for (uint j = 0u; j < uint(FW); j++)
                coopMatLoadNV(b3[j], ws8, wrow(sn, j) * uint(BKP8), uint(BKP8), true);
        }
#endif
#if CM_ABLATE < 2
        if (k0 + uint(BK) < uint(K)) fetch(m0, n0, k0 + uint(BK), T);
#endif
#if CM_ABLATE != 1
        mma_step(acc, 0u, sm, sn);
#endif
#elif CM_PIPE == 1
        // Direct: this step's loads are waited for at once; other
        // workgroups on the SM hide the latency (fewer live registers).
        if (k0 > 0u) {
            barrier();
            fetch(m0, n0, k0, T);
        }
        stage(0u, k0);
        barrier();
        mma_step(acc, 0u, sm, sn);
#else
        // Double-buffered: the next step's loads fly during this step's
        // products and are staged into the other buffer; one barrier.
        uint cur = (k0 / uint(BK)) & 1u;
        bool more = k0 + uint(BK) < uint(K);
        if (more) fetch(m0, n0, k0 + uint(BK), T);
        mma_step(acc, cur, sm, sn);
        if (more) stage(cur ^ 1u, k0 + uint(BK));
        barrier();
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
                if (t < T && n < uint(N)) store_y(YROW(t), n, epilogue(YROW(t), n, v));
            }
            subgroupBarrier();
        }
}
