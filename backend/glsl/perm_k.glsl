// perm_k.glsl: Q4_K weights (and Q6_K in the weight-layout pass's
// planes) decoded straight into the A fragments of 16 x 16 x 16 products,
// with K permuted inside each step of 64 (one pair of Q4_K sub-blocks) or
// 128 (half a Q6_K block); for matmul_gemvn_cm.glsl (PERM_K) and
// matmul_cmp.glsl (the prefill GEMM).
// Needs CM_A, FRAG_RIGHT and FRAG_DOWN (the layout zvk_probe_fragmap
// measured), PERM_F32, and dequant.glsl's wquad, wpair and k4_scale_min.
//
// A sum over K does not depend on the order of its terms' K, only on A and
// B agreeing on it, so slice kk's column c is whichever element of the
// step puts lane l's A elements in the bytes that lane loaded. Lane l
// (g = l / 4, q = l % 4) holds rows g and g + 8 of an A fragment, columns
// 2q, 2q + 1, 2q + 8 and 2q + 9 (element e = 0 .. 3); it loads bytes 8q ..
// 8q+7 of the step's pair for each row, the elements 8q .. 8q+7 of
// sub-block 2p (low nibbles) and of 2p + 1 (high), and gives slice kk (kk
// >> 1: the nibble, kk & 1: the word) the bytes 0, 2, 1, 3 of a word as e =
// 0, 1, 2, 3. So a quad of lanes reads each of its rows' 32 bytes once,
// with no weight tile in shared memory and no exchange, and the two
// nibbles that a mask puts in a word's halves are one fp16 pair:
//   element (kk, c) = 32 (kk >> 1) + 8q + 4 (kk & 1) + (0, 2, 1, 3)[e],
//   q = (c & 7) >> 1, e = (c & 1) | ((c >> 3) << 1).
// x (the B side) is staged in that order (PK_STAGE_X).
//
// PERM_F32 decodes in fp32, bit for bit as dequant.glsl (a nibble in the
// mantissa of 2^23, less 2^23: float() of an integer is a slow
// conversion); else fp16 arithmetic (a nibble in the mantissa of 1024.0,
// less 1024, times the sub-block's scale: an exact integer, times d, plus
// dmin * min as the sum of two fp16s, where the interpreter rounds only
// the weight: two roundings a weight, neither shared by the sub-block).
// Run 66: with d * scale rounded to fp16, gate+up's error went past the
// fp16 tolerance; run 67: with dmin * min rounded to one fp16, too.

#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

#ifndef PERM_F32
#define PERM_F32 0
#endif
#define CM_A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define CM_B8 fcoopmatNV<16, gl_ScopeSubgroup, 16, 8>
#define CM_C8 fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>

// One matrix's share of a step for one of the lane's rows: the block's
// header (d, dmin, the scales) and bytes 8q .. 8q+7 of the pair's 32.
struct PK4 {
    uvec4 hd;
    uvec2 qv;
};
void pk_fetch(const uint which, uint rowb, uint row, uint k0, out PK4 r) {
    uint base = row * rowb + (k0 >> 8u) * 144u, p = (k0 & 255u) >> 6u;
    r.hd = wquad(which, base >> 4u);
    r.qv = wpair(which, (base + 16u + 32u * p + 8u * (gl_SubgroupInvocationID & 3u)) >> 3u);
}
#define PK_FETCH(which, ty, rowb, row, k0, r) pk_fetch(which, uint(rowb), row, k0, r)

// One matrix's four A fragments of a step, decoded from the lane's bytes.
void pk_frags(PK4 r[2], uint j, out CM_A a[4]) {
    [[unroll]] for (uint h = 0u; h < 2u; h++) {
        vec2 dm = unpackHalf2x16(r[h].hd.x);
        float sc0, mn0, sc1, mn1;
        k4_scale_min(r[h].hd.y, r[h].hd.z, r[h].hd.w, j, sc0, mn0);
        k4_scale_min(r[h].hd.y, r[h].hd.z, r[h].hd.w, j + 1u, sc1, mn1);
        [[unroll]] for (uint kk = 0u; kk < 4u; kk++) {
            uint w = (kk & 1u) == 0u ? r[h].qv.x : r[h].qv.y, sh = 4u * (kk >> 1u);
            float scf = (kk >> 1u) == 0u ? sc0 : sc1, o = dm.y * ((kk >> 1u) == 0u ? mn0 : mn1);
            uint lo = (w >> sh) & 0x000f000fu, hi = (w >> (sh + 8u)) & 0x000f000fu; // e = 0, 1 and 2, 3
            uint i0 = h << uint(FRAG_DOWN), i2 = i0 | (1u << uint(FRAG_RIGHT));
#if PERM_F32
            // fp32, as dequant.glsl: a nibble in the mantissa of 2^23, less 2^23
            // (exact, where float() of an integer is a slow conversion)
            float f0 = uintBitsToFloat((lo & 0xfu) | 0x4b000000u) - 8388608.0;
            float f1 = uintBitsToFloat((lo >> 16u) | 0x4b000000u) - 8388608.0;
            float f2 = uintBitsToFloat((hi & 0xfu) | 0x4b000000u) - 8388608.0;
            float f3 = uintBitsToFloat((hi >> 16u) | 0x4b000000u) - 8388608.0;
            float s = dm.x * scf;
            a[kk][i0] = float16_t(s * f0 - o);
            a[kk][i0 + 1u] = float16_t(s * f1 - o);
            a[kk][i2] = float16_t(s * f2 - o);
            a[kk][i2 + 1u] = float16_t(s * f3 - o);
#else
            // fp16: scale * q an exact integer (<= 945), d an fp16 of the
            // block, the offset -dmin * min as two fp16s (hi + lo: its rounding
            // to one fp16 is systematic over the sub-block, and run 67
            // measured it past the tolerance); scale * q exact (the nibble
            // + 1024, less 1024, times scale: no step rounds, fused or not)
            float16_t oh = float16_t(-o), ol = float16_t(-o - float(oh));
            f16vec2 sc2 = f16vec2(float16_t(scf)), d2 = f16vec2(float16_t(dm.x)), o2 = f16vec2(oh), l2 = f16vec2(ol);
            f16vec2 m2 = f16vec2(float16_t(1024.0));
            f16vec2 v01 = fma(d2, (unpackFloat2x16(lo | 0x64006400u) - m2) * sc2, o2) + l2;
            f16vec2 v23 = fma(d2, (unpackFloat2x16(hi | 0x64006400u) - m2) * sc2, o2) + l2;
            a[kk][i0] = v01.x;
            a[kk][i0 + 1u] = v01.y;
            a[kk][i2] = v23.x;
            a[kk][i2 + 1u] = v23.y;
#endif
        }
    }
}

// Q6_K planes (dequant.glsl's <slot>_Q6P: a row's quant nibbles, 128
// bytes a block, then its high bits, 64, its scales, 16, and its d's),
// steps of 128, half a block, the same permutation over 8 slices: quarter
// P = kk >> 1 of the half (elements 32 P .. 32 P + 31) is the low (P < 2)
// or high nibble of quant bytes 32 (P & 1) .. + 31 and bits 2 P of high-bit
// bytes 0 .. 31, scale 2 P + (l / 16) of the half's 8 (ggml's
// dequantize_row_q6_K). Lane q loads bytes 8q .. 8q+7 of both quant runs
// and of the high bits, the half's 8 scales and the block's d: element
// (kk, c) = 32 (kk >> 1) + 8q + 4 (kk & 1) + (0, 2, 1, 3)[e], as Q4_K's
// formula over 8 slices, so PK_STAGE_X stages x for it unchanged.
struct PK6 {
    uvec2 ql0, ql1, qh, sc;
    uint dw;
};
void pk6_fetch(const uint which, uint rowb, uint row, uint k0, out PK6 r) {
    uint off = row * rowb, nb = rowb / 210u, j = k0 >> 8u, h = (k0 >> 7u) & 1u;
    uint q8 = 8u * (gl_SubgroupInvocationID & 3u);
    r.ql0 = wpair(which, (off + 128u * j + 64u * h + q8) >> 3u);
    r.ql1 = wpair(which, (off + 128u * j + 64u * h + 32u + q8) >> 3u);
    r.qh = wpair(which, (off + 128u * nb + 64u * j + 32u * h + q8) >> 3u);
    r.sc = wpair(which, (off + 192u * nb + 16u * j + 8u * h) >> 3u);
    r.dw = wword(which, (off + 208u * nb + 2u * j) >> 2u);
}
#define PK6_FETCH(which, ty, rowb, row, k0, r) pk6_fetch(which, uint(rowb), row, k0, r)

// One matrix's eight A fragments of a Q6_K step (block j), with
// dequant.glsl's arithmetic, (d * scale) * (q - 32): in fp32 with
// PERM_F32, else d * scale rounded to fp16 times the exact q - 32 (no
// offset to cancel against, as Q4_K's dmin * min).
void pk6_frags(PK6 r[2], uint j, out CM_A a[8]) {
    uint qs = (gl_SubgroupInvocationID & 3u) >> 1u;
    [[unroll]] for (uint h = 0u; h < 2u; h++) {
        float d = unpackHalf2x16(r[h].dw >> (16u * (j & 1u))).x;
        [[unroll]] for (uint p = 0u; p < 4u; p++) {
            uint sb = qs + 2u * p;
            float ds = d * float(bitfieldExtract(int(sb < 4u ? r[h].sc.x : r[h].sc.y), int(8u * (sb & 3u)), 8));
            uvec2 w = (p & 1u) == 0u ? r[h].ql0 : r[h].ql1;
            [[unroll]] for (uint wi = 0u; wi < 2u; wi++) {
                uint kk = 2u * p + wi;
                uint q = ((w[wi] >> (4u * (p >> 1u))) & 0x0f0f0f0fu) |
                         (((r[h].qh[wi] >> (2u * p)) & 0x03030303u) << 4u); // six bits a byte
                uint lo = q & 0x00ff00ffu, hi = (q >> 8u) & 0x00ff00ffu; // e = 0, 1 and 2, 3
                uint i0 = h << uint(FRAG_DOWN), i2 = i0 | (1u << uint(FRAG_RIGHT));
#if PERM_F32
                float f0 = uintBitsToFloat((lo & 0xffu) | 0x4b000000u) - 8388640.0; // 2^23 + 32
                float f1 = uintBitsToFloat((lo >> 16u) | 0x4b000000u) - 8388640.0;
                float f2 = uintBitsToFloat((hi & 0xffu) | 0x4b000000u) - 8388640.0;
                float f3 = uintBitsToFloat((hi >> 16u) | 0x4b000000u) - 8388640.0;
                a[kk][i0] = float16_t(ds * f0);
                a[kk][i0 + 1u] = float16_t(ds * f1);
                a[kk][i2] = float16_t(ds * f2);
                a[kk][i2 + 1u] = float16_t(ds * f3);
#else
                f16vec2 ds2 = f16vec2(float16_t(ds)), m2 = f16vec2(float16_t(1056.0)); // 1024 + 32
                f16vec2 v01 = ds2 * (unpackFloat2x16(lo | 0x64006400u) - m2);
                f16vec2 v23 = ds2 * (unpackFloat2x16(hi | 0x64006400u) - m2);
                a[kk][i0] = v01.x;
                a[kk][i0 + 1u] = v01.y;
                a[kk][i2] = v23.x;
                a[kk][i2 + 1u] = v23.y;
#endif
            }
        }
    }
}

// An 8-element chunk of x (natural order, fp16 pairs in v) into a staged
// row in the permuted order: chunk kc (0 .. 7, Q6_K 0 .. 15) of a step is slices
// 2 (kc >> 2) and 2 (kc >> 2) + 1, their pairs q = kc & 3 (elements 0 and
// 2) and q + 4 (1 and 3), at 16-byte vectors 2s and 2s + 1 of the row.
#define PK_STAGE_X(arr, row0, kc, v)                                                                         \
    {                                                                                                        \
        uint q_ = (kc) & 3u, at_ = (row0) + 4u * ((kc) >> 2u);                                               \
        arr[at_][q_] = ((v).x & 0xffffu) | ((v).y << 16u);                                                   \
        arr[at_ + 1u][q_] = ((v).x >> 16u) | ((v).y & 0xffff0000u);                                          \
        arr[at_ + 2u][q_] = ((v).z & 0xffffu) | ((v).w << 16u);                                              \
        arr[at_ + 3u][q_] = ((v).z >> 16u) | ((v).w & 0xffff0000u);                                          \
    }
