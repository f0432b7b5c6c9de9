// matmul_gemvn_cm.glsl: a batch step's few rows (zincc --parallel N) on
// the matrix units: y[t, n] = x[t] . W[n] for up to 16 token rows, the
// weights read once for all of them, as matmul_gemvn.glsl does with
// scalar products.
//
// Why: the scalar multi-row GEMV streams each weight once but pays each
// token row's products itself; at 8 rows the 8B's gate+up took 77 us a
// layer against the one-row GEMV's 27 (run 34): its time grows with the
// rows. Here a weight is decoded once, to fp16, and the products of all
// the step's rows are one 16 x 16 x 16 matrix product per 16 weights of
// 16 rows.
//
// A workgroup owns 16 weight rows (of each matrix: gate and up with GLU)
// and the step's token rows t0 .. t0+15 (the columns of the products).
// Its NSG subgroups split K: subgroup s takes the BK-wide steps s, s + NSG,
// ... Each step, every lane of the subgroup decodes four 8-element chunks
// of each matrix's 16 x BK tile (dequant.glsl's DQ8: any weight type) into
// the subgroup's own region of shared memory as fp16, and after a
// subgroup barrier (no workgroup barrier in the K walk) the subgroup
// multiplies the tile with x's fragments. x comes from the x scratch (the
// pass gemvn_xh.glsl wrote it as fp16, normalized, before this kernel: a
// few KB that every workgroup reads through L1 and L2), staged by the
// subgroup beside its weight tile: loading the fragments straight from
// the buffer (X_GLOBAL, ZINC_GEMVN_CM_XG=1) measured the 8B's 8-row batch
// step at 15.6 ms against the int8-x scalar GEMV's 11.1 (run 59).
// At the end the subgroups' sums meet in shared memory and each
// invocation finishes two outputs: the SwiGLU of gate and up with GLU,
// the epilogue (matmul_io.glsl, gemv_segs.glsl).
//
// Measured (run 60, H100, the 8B's --parallel 16 plan): 1121 tok/s in all
// at 16 streams against the int8 GEMV's 759, a tie at 8, 0.56x at one
// (the same 16-column products at any row count), hence plans of 16 rows
// or more only (ztarget.batch_gemv_cm_rows). gate+up holds 193 registers a
// lane and is bound by its staging and occupancy, not its products.
//
// Operands are fp16 and sums fp32: the mm-f16 pass marks the matmuls so
// (attr.mm_f16) and the interpreter rounds them the same way, so the
// kernel is checked element by element. A token's sums do not depend on
// the other rows of the step (a product's columns are independent), so a
// sequence alone gives the bits it gives among others.
//
// Written against GL_NV_cooperative_matrix, as matmul_cm.glsl
// (spv_coopmat.c rewrites it to KHR where a device has only that).
//
// FRAG_A (with Q4_RAW; ZINC_GEMVN_CM_FRAG=1, a measurement): no weight
// tile in shared memory. Each lane decodes exactly the elements of the A
// fragments it holds, from the raw blocks in its registers, and writes
// them into the fragment: products of M16 N8 K16 (two for the 16 token
// rows, x staged as before), whose A layout zvk_probe_fragmap measured:
// lane l holds rows l / 4 and l / 4 + 8, columns 2 (l % 4) + {0, 1} and
// + 8 of a 16 x 16 tile; element i's column moves 8 right with bit
// FRAG_RIGHT of i and its row 8 down with bit FRAG_DOWN (NVIDIA's driver:
// 1 and 2), bit 0 the pair. Per step (a q4_K pair of sub-blocks) a lane
// needs both nibbles of 8 bytes of each of its two rows: the pair's 32
// bytes and the block's header, three 16-byte loads a row and matrix.
// Measured (run 63, H100): correct, but gate+up 117.8 us a call against
// the staged tiles' 87.8 (229 registers against 193), so it stays off.
//
// Defines: WG (NSG subgroups of SG), NSG, SG, BK (a multiple of 16, K's
// divisor), NTOK (16), GLU, W*_TYPE/W*_ROWB, SEGS and the segments'
// (gemv_segs.glsl), B_XH.
//
// Removed (session 30): x's B fragments built by each lane from its own
// loads (ZINC_GEMVN_CM_XREG, with PERM_K): wrong for q4_K on the H100 and
// slower even so (run 76: 794 against 834 tok/s at 8 streams, 1450
// against 1533 at 16); B's layout stays probed (ztarget.frag_b).

#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x = WG) in;

#define CM_AB fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define CM_C fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

#if GLU
#define NMAT 2u
#else
#define NMAT 1u
#endif
#define BK8 (BK / 8)       /* a tile row's 16-byte vectors */
#define BKP8 (BK8 + 1)     /* padded */
#define CPL (16 * BK8 / SG) /* 8-element chunks a lane decodes a step, each matrix */

layout(std430, binding = B_XH) readonly buffer XHb { uvec4 xh8[]; };

#if !FRAG_A && !PERM_K
shared uvec4 wt8[NSG * NMAT * 16 * BKP8]; // [subgroup][matrix][row][k / 8]
#endif
shared uvec4 red8[NSG * NMAT * 64];      // [subgroup][matrix][row][token / 4]: the sums, fp32
#ifndef X_GLOBAL
#define X_GLOBAL 0
#endif
#if !X_GLOBAL
shared uvec4 xs8[NSG * NTOK * BKP8]; // [subgroup][token][k / 8]: the step's x tile (PERM_K: K permuted)
#endif
#define XPL (NTOK * BK8 / SG) /* x's 16-byte vectors a lane stages a step */

#ifndef Q4_RAW
#define Q4_RAW 0
#endif
#ifndef DQ_H2
#define DQ_H2 0
#endif
#ifndef CM_ABLATE
#define CM_ABLATE 0
#endif
#ifndef CM_DEPTH2
#define CM_DEPTH2 0
#endif
#ifndef FRAG_A
#define FRAG_A 0
#endif
#ifndef PERM_K
#define PERM_K 0
#endif
#ifndef Q6_RAW
#define Q6_RAW 0
#endif
#define W_RAW (Q4_RAW || Q6_RAW)
#if DQ_H2 && (!W_RAW || X_GLOBAL || FRAG_A || PERM_K)
#error "DQ_H2 decodes raw q4_K or q6_K blocks into staged tiles, and stages x"
#endif
#ifndef DQ_MAGIC
#define DQ_MAGIC 0
#endif
#if DQ_MAGIC && (DQ_H2 || !W_RAW || FRAG_A || PERM_K)
#error "DQ_MAGIC decodes raw q4_K or q6_K blocks into staged tiles, in fp32"
#endif
#if DQ_MAGIC
// (DQ_MAGIC, ZINC_GEMVN_CM_F32M=1) The fp32 decode's arithmetic, bit for
// bit, without its integer-to-float conversions (a quarter of the FMA
// rate on NVIDIA): the float of the bits 0x4B000000 | q is 2^23 + q, and
// subtracting 2^23 leaves q exactly; a mask, an or and an add, all at the
// full rate. The elements keep their order (x is staged as it is).
const uvec4 BYTE_SH = uvec4(0u, 8u, 16u, 24u);
vec4 f4_of(uint w, uint mask, float bias) {
    return uintBitsToFloat(((uvec4(w) >> BYTE_SH) & mask) | 0x4B000000u) - bias;
}
#endif
#if DQ_H2
// Two nibbles to fp16 at once (DQ_H2, ZINC_GEMVN_CM_H2=1): 0x6400 | q is
// the half 1024 + q, minus 1024 is q exactly, and one fp16 fma scales it
// by d * scale and dmin * min (each rounded to fp16 first, where the fp32
// decode rounds only the product: within the fp16 tolerance). No integer
// to float conversion and no packing, which run at a quarter of the FMA
// rate; the pair is bytes 0 and 2 of the word, so the tile holds each 8
// elements in the order 0 2 1 3 4 6 5 7, and x's tile is staged so too
// (x_h2).
// DQ_H2 2: d * scale and dmin * min as fp16 pairs hi + lo (lo the
// remainder), w = (q hi_s - hi_m) + (q lo_s - lo_m): the scales' error
// 2^-17 where one fp16 scale's is 2^-12, an error every weight of a
// sub-block shares (DQ_H2 1 measured 0.8 % of the output RMS on gate+up
// against the tolerance's 0.4); each weight rounded twice.
uint nib2(uint w, f16vec2 s, f16vec2 mn, f16vec2 s_lo, f16vec2 mn_lo) {
    f16vec2 v = unpackFloat2x16((w & 0x000F000Fu) | 0x64006400u) - f16vec2(1024.0);
#if DQ_H2 == 2
    return packFloat2x16(fma(v, s, -mn) + fma(v, s_lo, -mn_lo));
#else
    return packFloat2x16(fma(v, s, -mn));
#endif
}
uvec4 x_h2(uvec4 v) {
    return uvec4((v.x & 0xFFFFu) | (v.y << 16u), (v.x >> 16u) | (v.y & 0xFFFF0000u),
                 (v.z & 0xFFFFu) | (v.w << 16u), (v.z >> 16u) | (v.w & 0xFFFF0000u));
}
// q6_K (Q6_RAW): four 6-bit values q of a word to fp16 pairs (q - 32
// exact: the halves 1024 + q minus 1056), times d * scale as an fp16 pair
// hi + lo: fma(v, hi, v lo), one rounding but for v lo's (2^-11 of 2^-12).
uint q6h2(uint q, f16vec2 s, f16vec2 s_lo) {
    f16vec2 v = unpackFloat2x16((q & 0x003F003Fu) | 0x64006400u) - f16vec2(1056.0);
    return packFloat2x16(fma(v, s, v * s_lo));
}
#endif
#if (FRAG_A || PERM_K) && !Q4_RAW
#error "FRAG_A and PERM_K decode raw q4_K blocks"
#endif
// Bytes 8c .. 8c + 7 of the 32 held in a (0-15) and b (16-31).
uvec2 chunk8(uvec4 a, uvec4 b, uint c) {
    return c < 2u ? (c == 0u ? a.xy : a.zw) : (c == 2u ? b.xy : b.zw);
}
// Eight floats as one staged vector of fp16 pairs.
uvec4 pack8(vec4 a, vec4 b) {
    return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}
#if Q4_RAW
// Q4_K raw: lane l of a subgroup owns row l / 2 of the step's tile and the
// sub-block 2p + (l & 1) of the step's pair p (a step of 64 is one pair):
// the block's header and the pair's 32 quant bytes, three 16-byte loads
// a matrix, issued a step ahead of their decoding (dequant.glsl's
// arithmetic, d * scale * q - dmin * min, as matmul_cm.glsl's stage_q4_K).
#define WRAW 3
// The three loads of one matrix's chunk (which, rowb: gemv_segs.glsl's W_SLOT).
void q4_fetch(const uint which, uint rowb, uint row, uint k0, out uvec4 r[WRAW]) {
    uint q = (row * rowb + (k0 >> 8u) * 144u) >> 4u, p = (k0 & 255u) >> 6u;
    r[0] = wquad(which, q);
    r[1] = wquad(which, q + 1u + 2u * p);
    r[2] = wquad(which, q + 2u + 2u * p);
}
#define Q4_FETCH(which, ty, rowb, row, k0, r) q4_fetch(which, uint(rowb), row, k0, r)
void fetch_w(uint n0, uint NS, uint k0, const uint seg, out uvec4 r[NMAT][WRAW]) {
    uint row = min(n0 + (gl_SubgroupInvocationID >> 1u), NS - 1u); // a tail row repeats the last one
    [[unroll]] for (uint m = 0u; m < NMAT; m++) { W_SLOT(seg, m, Q4_FETCH, row, k0, r[m]) }
}
#if FRAG_A
#define CM_A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define CM_B8 fcoopmatNV<16, gl_ScopeSubgroup, 16, 8>
#define CM_C8 fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>
#endif
#if PERM_K
// The step's raw bytes of the lane's two rows (l / 4 and l / 4 + 8), each matrix.
void fetch_pk(uint n0, uint NS, uint k0, const uint seg, out PK4 r[NMAT][2]) {
    uint g = gl_SubgroupInvocationID >> 2u;
    [[unroll]] for (uint h = 0u; h < 2u; h++) {
        uint row = min(n0 + g + 8u * h, NS - 1u); // a tail row repeats the last one
        [[unroll]] for (uint m = 0u; m < NMAT; m++) { W_SLOT(seg, m, PK_FETCH, row, k0, r[m][h]) }
    }
}
#endif
#if FRAG_A
// The step's raw blocks of the lane's two rows (l / 4 and l / 4 + 8), each matrix.
void fetch_wa(uint n0, uint NS, uint k0, const uint seg, out uvec4 r[NMAT][2][WRAW]) {
    uint g = gl_SubgroupInvocationID >> 2u;
    [[unroll]] for (uint h = 0u; h < 2u; h++) {
        uint row = min(n0 + g + 8u * h, NS - 1u); // a tail row repeats the last one
        [[unroll]] for (uint m = 0u; m < NMAT; m++) { W_SLOT(seg, m, Q4_FETCH, row, k0, r[m][h]) }
    }
}
// The A fragment of slice kk (K kk*16 .. kk*16+15 of the step) from a
// matrix's raw blocks: slices 0 and 1 are sub-block 2p (low nibbles of
// bytes 0-31), 2 and 3 sub-block 2p + 1 (their high nibbles); sc: d * scale
// and dmin * min of (row half, sub-block).
CM_A frag_a(uvec4 r[2][WRAW], vec2 sc[2][2], uint kk) {
    CM_A a;
    uint q = 2u * (gl_SubgroupInvocationID & 3u), sh = 4u * (kk >> 1u);
    [[unroll]] for (uint h = 0u; h < 2u; h++)
        [[unroll]] for (uint c = 0u; c < 2u; c++) {
            uint jb = (kk & 1u) * 16u + 8u * c + q; // the pair's byte, even
            uvec4 v = jb < 16u ? r[h][1] : r[h][2];
            uint w = v[(jb & 15u) >> 2u] >> (8u * (jb & 3u));
            vec2 s = sc[h][kk >> 1u];
            uint i = (c << uint(FRAG_RIGHT)) | (h << uint(FRAG_DOWN));
            a[i] = float16_t(s.x * float((w >> sh) & 0xfu) - s.y);
            a[i + 1u] = float16_t(s.x * float((w >> (8u + sh)) & 0xfu) - s.y);
        }
    return a;
}
vec2 q4_scale(uvec4 hd, uint j) {
    vec2 dm = unpackHalf2x16(hd.x);
    float sc, mn;
    k4_scale_min(hd.y, hd.z, hd.w, j, sc, mn);
    return vec2(dm.x * sc, dm.y * mn);
}
#elif !PERM_K
void stage_w(uint k0, uint base, uvec4 r[NMAT][WRAW]) {
    uint lane = gl_SubgroupInvocationID, h = lane & 1u, row = lane >> 1u;
    uint j = ((k0 & 255u) >> 5u) + h, sh = 4u * h;
    [[unroll]] for (uint m = 0u; m < NMAT; m++) {
        vec2 dm = unpackHalf2x16(r[m][0].x);
        float sc, mn;
        k4_scale_min(r[m][0].y, r[m][0].z, r[m][0].w, j, sc, mn);
        float d1 = dm.x * sc, m1 = dm.y * mn;
#if CM_ABLATE
        // timing only, the values wrong (ZINC_GEMVN_CM_ABLATE=1): the raw words staged, no decode
        [[unroll]] for (uint c = 0u; c < 4u; c++)
            wt8[base + (m * 16u + row) * uint(BKP8) + 4u * h + c] = r[m][1 + (c >> 1u)] ^ floatBitsToUint(d1 - m1);
#elif DQ_MAGIC
        [[unroll]] for (uint c = 0u; c < 4u; c++) {
            uvec2 qq = chunk8(r[m][1], r[m][2], c) >> sh;
            wt8[base + (m * 16u + row) * uint(BKP8) + 4u * h + c] =
                pack8(d1 * f4_of(qq.x, 0xfu, 8388608.0) - m1, d1 * f4_of(qq.y, 0xfu, 8388608.0) - m1);
        }
#elif DQ_H2
        float16_t sh16 = float16_t(d1), mh16 = float16_t(m1);
        f16vec2 s2 = f16vec2(sh16), m2 = f16vec2(mh16);
        f16vec2 sl = f16vec2(float16_t(d1 - float(sh16))), ml = f16vec2(float16_t(m1 - float(mh16)));
        [[unroll]] for (uint c = 0u; c < 4u; c++) {
            uvec2 qq = chunk8(r[m][1], r[m][2], c) >> sh;
            wt8[base + (m * 16u + row) * uint(BKP8) + 4u * h + c] =
                uvec4(nib2(qq.x, s2, m2, sl, ml), nib2(qq.x >> 8u, s2, m2, sl, ml), nib2(qq.y, s2, m2, sl, ml),
                      nib2(qq.y >> 8u, s2, m2, sl, ml));
        }
#else
        [[unroll]] for (uint c = 0u; c < 4u; c++) {
            uvec2 qq = chunk8(r[m][1], r[m][2], c);
            // the 8 elements 8c .. 8c+7 of the sub-block: bytes of qq.x then qq.y
            vec4 a = d1 * vec4(float((qq.x >> sh) & 0xfu), float((qq.x >> (8u + sh)) & 0xfu),
                               float((qq.x >> (16u + sh)) & 0xfu), float((qq.x >> (24u + sh)) & 0xfu)) - m1;
            vec4 b = d1 * vec4(float((qq.y >> sh) & 0xfu), float((qq.y >> (8u + sh)) & 0xfu),
                               float((qq.y >> (16u + sh)) & 0xfu), float((qq.y >> (24u + sh)) & 0xfu)) - m1;
            wt8[base + (m * 16u + row) * uint(BKP8) + 4u * h + c] = pack8(a, b);
        }
#endif
    }
}
#endif
#elif Q6_RAW
// q6_K planes raw (Q6_RAW, ZINC_GEMVN_CM_Q6RAW=1; the weight-layout
// pass's planes, rows 8-byte aligned): lane l owns row l / 2 of the
// step's tile and elements 32 (l & 1) .. + 31 of the step's 64, which are
// scale row k = 2 (s & 1) + (l & 1) of half h = s / 2 of the block (s the
// step in it): 32 quant bytes (nibble s & 1), 32 high-bit bytes (bits
// 2k), two scale bytes and d, fetched a step ahead of their decoding
// (dequant.glsl's q6_8, so the bits of DQ8's). Where DQ8 loaded each
// chunk's bytes when the step was staged, nothing ahead.
#define WRAW 5
void q6_fetch(const uint which, uint rowb, uint row, uint k0, out uvec4 r[WRAW]) {
    uint nb = rowb / 210u, ro = row * rowb, j = k0 >> 8u, s = (k0 & 255u) >> 6u, h = s >> 1u;
    uint hh = gl_SubgroupInvocationID & 1u, k = 2u * (s & 1u) + hh;
    uint ql = (ro + 128u * j + 64u * h + 32u * hh) >> 3u, qh = (ro + 128u * nb + 64u * j + 32u * h) >> 3u;
    r[0] = uvec4(wpair(which, ql), wpair(which, ql + 1u));
    r[1] = uvec4(wpair(which, ql + 2u), wpair(which, ql + 3u));
    r[2] = uvec4(wpair(which, qh), wpair(which, qh + 1u));
    r[3] = uvec4(wpair(which, qh + 2u), wpair(which, qh + 3u));
    r[4] = uvec4(wword(which, (ro + 192u * nb + 16u * j + 8u * h + 2u * k) >> 2u),
                 wword(which, (ro + 208u * nb + 2u * j) >> 2u), 0u, 0u);
}
#define Q6_FETCH(which, ty, rowb, row, k0, r) q6_fetch(which, uint(rowb), row, k0, r)
void fetch_w(uint n0, uint NS, uint k0, const uint seg, out uvec4 r[NMAT][WRAW]) {
    uint row = min(n0 + (gl_SubgroupInvocationID >> 1u), NS - 1u); // a tail row repeats the last one
    [[unroll]] for (uint m = 0u; m < NMAT; m++) { W_SLOT(seg, m, Q6_FETCH, row, k0, r[m]) }
}
void stage_w(uint k0, uint base, uvec4 r[NMAT][WRAW]) {
    uint lane = gl_SubgroupInvocationID, hh = lane & 1u, row = lane >> 1u;
    uint s = (k0 & 255u) >> 6u, k = 2u * (s & 1u) + hh;
    [[unroll]] for (uint m = 0u; m < NMAT; m++) {
        // the scale bytes at 2 (k & 1) of their word (rows 8-byte aligned), d at 2 (j & 1)
        uint sw = r[m][4].x >> (16u * hh);
        float d = unpackHalf2x16(r[m][4].y >> (16u * ((k0 >> 8u) & 1u))).x;
        [[unroll]] for (uint c = 0u; c < 4u; c++) {
            uvec2 ql = chunk8(r[m][0], r[m][1], c), qh = chunk8(r[m][2], r[m][3], c);
            float ds = d * float(bitfieldExtract(int(sw), 8 * int(c >> 1u), 8));
#if DQ_MAGIC || DQ_H2
            // the eight 6-bit values, a byte each
            uvec2 q = ((ql >> (4u * (s & 1u))) & 0x0F0F0F0Fu) | (((qh >> (2u * k)) & 0x03030303u) << 4u);
#endif
#if DQ_MAGIC
            // q - 32 exactly: the bias 2^23 + 32
            wt8[base + (m * 16u + row) * uint(BKP8) + 4u * hh + c] =
                pack8(ds * f4_of(q.x, 0xffu, 8388640.0), ds * f4_of(q.y, 0xffu, 8388640.0));
#elif DQ_H2
            // (DQ_H2) pairs of elements 0 2, 1 3, 4 6, 5 7, as the q4_K decode's
            float16_t hi = float16_t(ds);
            f16vec2 s2 = f16vec2(hi), sl = f16vec2(float16_t(ds - float(hi)));
            wt8[base + (m * 16u + row) * uint(BKP8) + 4u * hh + c] =
                uvec4(q6h2(q.x, s2, sl), q6h2(q.x >> 8u, s2, sl), q6h2(q.y, s2, sl), q6h2(q.y >> 8u, s2, sl));
#else
            float v[8];
            q6_8(ds, ql, qh, k, v);
            wt8[base + (m * 16u + row) * uint(BKP8) + 4u * hh + c] =
                pack8(vec4(v[0], v[1], v[2], v[3]), vec4(v[4], v[5], v[6], v[7]));
#endif
        }
    }
}
#else
// Other types: each lane decodes CPL 8-element chunks of each matrix
// (dequant.glsl's DQ8) when the step is staged; nothing is fetched ahead.
void stage_w_dq(uint k0, uint base, uint n0, uint NS, const uint seg) {
    uint lane = gl_SubgroupInvocationID;
    [[unroll]] for (uint i = 0u; i < uint(CPL); i++) {
        uint c = lane + i * uint(SG), r = c / uint(BK8), kc = c % uint(BK8);
        uint row = min(n0 + r, NS - 1u); // a tail row repeats the last one; not written
        [[unroll]] for (uint m = 0u; m < NMAT; m++) {
            float v[8];
            W_SLOT(seg, m, DQ8, row, k0 + 8u * kc, v)
            wt8[base + (m * 16u + r) * uint(BKP8) + kc] =
                uvec4(packHalf2x16(vec2(v[0], v[1])), packHalf2x16(vec2(v[2], v[3])),
                      packHalf2x16(vec2(v[4], v[5])), packHalf2x16(vec2(v[6], v[7])));
        }
    }
}
#endif

// x's tile of a step: NTOK token rows x BK, XPL 16-byte vectors a lane
// (rows past the step's feed only columns that are never stored).
void fetch_x(uint t0, uint k0, out uvec4 xr[XPL]) {
    [[unroll]] for (uint i = 0u; i < uint(XPL); i++) {
        uint c = gl_SubgroupInvocationID + i * uint(SG), tt = c / uint(BK8), kc = c % uint(BK8);
        xr[i] = xh8[(t0 + tt) * (uint(K) / 8u) + k0 / 8u + kc];
    }
}

void sums_out(uint t0, uint nt, uint n0, const uint seg);

#if !FRAG_A && !PERM_K
// Rows n0 .. n0+15 of segment seg, token rows t0 .. t0+nt-1.
void rows16(uint t0, uint nt, uint n0, const uint seg) {
    uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID, NS = seg_rows(seg);
    CM_C acc[NMAT];
    [[unroll]] for (uint m = 0u; m < NMAT; m++) acc[m] = CM_C(0.0);
    uint base = sg * NMAT * 16u * uint(BKP8), KS = uint(K) / uint(BK);
#if W_RAW
    uvec4 wr[NMAT][WRAW];
    if (sg < KS) fetch_w(n0, NS, sg * uint(BK), seg, wr);
#if CM_DEPTH2
    // (ZINC_GEMVN_CM_DEPTH=2) the loads two steps ahead: twice the bytes in flight
    uvec4 wr2[NMAT][WRAW];
    if (sg + uint(NSG) < KS) fetch_w(n0, NS, (sg + uint(NSG)) * uint(BK), seg, wr2);
#endif
#endif
    uvec4 xr[XPL];
    if (sg < KS) fetch_x(t0, sg * uint(BK), xr);
    for (uint ks = sg; ks < KS; ks += uint(NSG)) {
        uint k0 = ks * uint(BK);
#if W_RAW
        stage_w(k0, base, wr);
#else
        stage_w_dq(k0, base, n0, NS, seg);
#endif
#if !X_GLOBAL
        [[unroll]] for (uint i = 0u; i < uint(XPL); i++) {
            uint c = lane + i * uint(SG), tt = c / uint(BK8), kc = c % uint(BK8);
#if DQ_H2
            xs8[sg * 16u * uint(BKP8) + tt * uint(BKP8) + kc] = x_h2(xr[i]);
#else
            xs8[sg * 16u * uint(BKP8) + tt * uint(BKP8) + kc] = xr[i];
#endif
        }
#endif
        // the next step's loads, in flight while this one multiplies
        if (ks + uint(NSG) < KS) {
#if W_RAW && CM_DEPTH2
            wr = wr2;
            if (ks + uint(2 * NSG) < KS) fetch_w(n0, NS, k0 + uint(2 * NSG * BK), seg, wr2);
#elif W_RAW
            fetch_w(n0, NS, k0 + uint(NSG * BK), seg, wr);
#endif
            fetch_x(t0, k0 + uint(NSG * BK), xr);
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        [[unroll]] for (uint kk = 0u; kk < uint(BK) / 16u; kk++) {
            CM_AB a, b;
            // x's 16 K x 16 tokens, column-major: a token's K contiguous
#if X_GLOBAL
            coopMatLoadNV(b, xh8, t0 * (uint(K) / 8u) + k0 / 8u + 2u * kk, uint(K) / 8u, true);
#else
            coopMatLoadNV(b, xs8, sg * 16u * uint(BKP8) + 2u * kk, uint(BKP8), true);
#endif
            [[unroll]] for (uint m = 0u; m < NMAT; m++) {
                coopMatLoadNV(a, wt8, base + m * 16u * uint(BKP8) + 2u * kk, uint(BKP8), false);
                acc[m] = coopMatMulAddNV(a, b, acc[m]);
            }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier(); // the tiles are read before the next step overwrites them
    }
    [[unroll]] for (uint m = 0u; m < NMAT; m++) coopMatStoreNV(acc[m], red8, (sg * NMAT + m) * 64u, 4u, false);
    barrier();
    sums_out(t0, nt, n0, seg);
}
#endif

// The subgroups' sums, met in shared memory: output (row r, token t) is
// element r * 16 + t of each subgroup's.
void sums_out(uint t0, uint nt, uint n0, const uint seg) {
    uint NS = seg_rows(seg);
    for (uint i = gl_LocalInvocationIndex; i < 256u; i += uint(WG)) {
        uint r = i >> 4u, t = i & 15u, n = n0 + r;
        float v = 0.0;
#if GLU
        float u = 0.0;
#endif
        for (uint s = 0u; s < uint(NSG); s++) {
            v += uintBitsToFloat(red8[s * NMAT * 64u + (i >> 2u)][i & 3u]);
#if GLU
            u += uintBitsToFloat(red8[(s * NMAT + 1u) * 64u + (i >> 2u)][i & 3u]);
#endif
        }
#if GLU
        v = silu(v) * u;
#endif
        if (t < nt && n < NS) store_seg(seg, t0 + t, n, v);
    }
}

#if FRAG_A
// rows16 with the weights' fragments decoded in registers (FRAG_A).
void rows16_frag(uint t0, uint nt, uint n0, const uint seg) {
    uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID, NS = seg_rows(seg);
    CM_C8 acc[NMAT][2];
    [[unroll]] for (uint m = 0u; m < NMAT; m++) acc[m][0] = acc[m][1] = CM_C8(0.0);
    uint KS = uint(K) / uint(BK);
    uvec4 wr[NMAT][2][WRAW];
    if (sg < KS) fetch_wa(n0, NS, sg * uint(BK), seg, wr);
    uvec4 xr[XPL];
    if (sg < KS) fetch_x(t0, sg * uint(BK), xr);
    for (uint ks = sg; ks < KS; ks += uint(NSG)) {
        uint k0 = ks * uint(BK), j = (k0 & 255u) >> 5u;
        [[unroll]] for (uint i = 0u; i < uint(XPL); i++) {
            uint c = lane + i * uint(SG), tt = c / uint(BK8), kc = c % uint(BK8);
            xs8[sg * 16u * uint(BKP8) + tt * uint(BKP8) + kc] = xr[i];
        }
        // this step's blocks out of the prefetch registers, the next step's loads in flight
        uvec4 cur[NMAT][2][WRAW] = wr;
        if (ks + uint(NSG) < KS) {
            fetch_wa(n0, NS, k0 + uint(NSG * BK), seg, wr);
            fetch_x(t0, k0 + uint(NSG * BK), xr);
        }
        vec2 sc[NMAT][2][2];
        [[unroll]] for (uint m = 0u; m < NMAT; m++)
            [[unroll]] for (uint h = 0u; h < 2u; h++) {
                sc[m][h][0] = q4_scale(cur[m][h][0], j);
                sc[m][h][1] = q4_scale(cur[m][h][0], j + 1u);
            }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        [[unroll]] for (uint kk = 0u; kk < uint(BK) / 16u; kk++) {
            CM_B8 b0, b1;
            // x's 16 K x 8 tokens, twice, column-major: a token's K contiguous
            coopMatLoadNV(b0, xs8, sg * 16u * uint(BKP8) + 2u * kk, uint(BKP8), true);
            coopMatLoadNV(b1, xs8, sg * 16u * uint(BKP8) + 8u * uint(BKP8) + 2u * kk, uint(BKP8), true);
            [[unroll]] for (uint m = 0u; m < NMAT; m++) {
                CM_A a = frag_a(cur[m], sc[m], kk);
                acc[m][0] = coopMatMulAddNV(a, b0, acc[m][0]);
                acc[m][1] = coopMatMulAddNV(a, b1, acc[m][1]);
            }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier(); // x's tile is read before the next step overwrites it
    }
    [[unroll]] for (uint m = 0u; m < NMAT; m++)
        [[unroll]] for (uint h = 0u; h < 2u; h++)
            coopMatStoreNV(acc[m][h], red8, (sg * NMAT + m) * 64u + 2u * h, 4u, false);
    barrier();
    sums_out(t0, nt, n0, seg);
}
#endif

#if PERM_K
// rows16 with K permuted inside each step (PERM_K, perm_k.glsl says
// how): no weight tile in shared memory, x's tile staged in the permuted
// order. Measured (run 67, H100, the 8B's --parallel 16 plan): slower
// than the staged tiles, 1441 against 1531 tok/s in all at 16 streams
// (gate+up 3277 against 3154 us a step), and its fp16 decode past the
// fp16 tolerance (fp32 passes); so it stays a measurement.
#define NB8 (NTOK / 8) /* the products' 8-token halves */
void rows16_perm(uint t0, uint nt, uint n0, const uint seg) {
    uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID, NS = seg_rows(seg);
    CM_C8 acc[NMAT][NB8];
    [[unroll]] for (uint m = 0u; m < NMAT; m++)
        [[unroll]] for (uint u = 0u; u < uint(NB8); u++) acc[m][u] = CM_C8(0.0);
    uint KS = uint(K) / uint(BK), xb = sg * uint(NTOK) * uint(BKP8);
    PK4 wr[NMAT][2];
    uvec4 xr[XPL];
    if (sg < KS) {
        fetch_pk(n0, NS, sg * uint(BK), seg, wr);
        fetch_x(t0, sg * uint(BK), xr);
    }
    for (uint ks = sg; ks < KS; ks += uint(NSG)) {
        uint k0 = ks * uint(BK), j = (k0 & 255u) >> 5u;
        // x's tile in the permuted order
        [[unroll]] for (uint i = 0u; i < uint(XPL); i++) {
            uint c = lane + i * uint(SG), tt = c / uint(BK8), kc = c % uint(BK8);
            PK_STAGE_X(xs8, xb + tt * uint(BKP8), kc, xr[i])
        }
        PK4 cur[NMAT][2] = wr;
        if (ks + uint(NSG) < KS) { // the next step's loads, in flight while this one multiplies
            fetch_pk(n0, NS, k0 + uint(NSG * BK), seg, wr);
            fetch_x(t0, k0 + uint(NSG * BK), xr);
        }
        CM_A a[NMAT][4];
        [[unroll]] for (uint m = 0u; m < NMAT; m++) pk_frags(cur[m], j, a[m]);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        [[unroll]] for (uint kk = 0u; kk < 4u; kk++)
            [[unroll]] for (uint u = 0u; u < uint(NB8); u++) {
                CM_B8 b; // x's 16 K x 8 tokens, column-major: a token's K contiguous
                coopMatLoadNV(b, xs8, xb + 8u * u * uint(BKP8) + 2u * kk, uint(BKP8), true);
                [[unroll]] for (uint m = 0u; m < NMAT; m++) acc[m][u] = coopMatMulAddNV(a[m][kk], b, acc[m][u]);
            }
        subgroupMemoryBarrierShared();
        subgroupBarrier(); // x's tile is read before the next step overwrites it
    }
    [[unroll]] for (uint m = 0u; m < NMAT; m++)
        [[unroll]] for (uint u = 0u; u < uint(NB8); u++)
            coopMatStoreNV(acc[m][u], red8, (sg * NMAT + m) * 64u + 2u * u, 4u, false);
    barrier();
    sums_out(t0, nt, n0, seg);
}
#endif

void main() {
    uint t0 = gl_WorkGroupID.y * uint(NTOK), wg = gl_WorkGroupID.x;
    if (t0 >= step.T) return; // uniform across the workgroup
    uint nt = min(uint(NTOK), step.T - t0);
#if FRAG_A
#define ROWS16_OF_WG(w, seg) rows16_frag(t0, nt, (w) * 16u, seg)
#elif PERM_K
#define ROWS16_OF_WG(w, seg) rows16_perm(t0, nt, (w) * 16u, seg)
#else
#define ROWS16_OF_WG(w, seg) rows16(t0, nt, (w) * 16u, seg)
#endif
    SEG_DISPATCH(wg, ROWS16_OF_WG)
}
