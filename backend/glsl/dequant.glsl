// dequant.glsl: ggml block decoding inside a kernel, for weights bound as
// raw bytes (uint words). Layouts and formulas are those of ir/dtype.c.
//
// A kernel binds up to six weights; codegen defines B_<name> (the binding)
// for each one it uses:
//   B_W0, B_W1, B_W2  matrices (gate/up/down, or the one matmul / table)
//   B_W3              a fourth matrix (the segments of a rows GEMV)
//   B_NW              the RMSNorm scale [K]
//   B_BIAS            a bias [N]
// GLSL cannot pass a buffer to a function, so the helpers take a constant
// selector (WQ_*) that folds away once inlined. The type is chosen in the
// preprocessor: <slot>_TYPE is the ggml type id (f32 0, f16 1, q4_0 2,
// q4_1 3, q5_0 6, q5_1 7, q8_0 8, q4_K 12, q5_K 13, q6_K 14, iq4_nl 20,
// iq4_xs 23, bf16 30) and DQ8/DQ1 paste it onto a decoder's name, so a
// kernel holds only the decoders it uses.

// Weights are never written while a kernel runs: WEIGHTS_RESTRICT also
// promises the driver that nothing else aliases them (a layout the tuner
// times, since it may let the loads take a read-only cache path).
#ifdef WEIGHTS_RESTRICT
#define WQ_QUAL restrict readonly
#else
#define WQ_QUAL readonly
#endif

#define WQ_W0 0u
#define WQ_W1 1u
#define WQ_W2 2u
#define WQ_NW 3u
#define WQ_BIAS 4u
#define WQ_W3 5u

// Weights are seen as uint, uvec2 and uvec4 arrays (same binding) for 4-,
// 8- and 16-byte loads where the layout keeps them aligned: fewer, wider
// memory requests per lane. Only the views a type uses are declared, since
// every declaration counts against the stage's storage-buffer limit (16 on
// llvmpipe): words for f32/f16/bf16 (single elements), q8_0, q6_K and the
// 32-element blocks (unaligned blocks, or 8 bytes of quants at most); pairs
// for q4_K/q5_K quants; quads for whole float chunks and K-quant headers.
#define WQ_HAS_WORD(t)                                                                                         \
    ((t) == 0 || (t) == 1 || (t) == 30 || (t) == 8 || (t) == 14 || (t) == 2 || (t) == 3 || (t) == 6 ||      \
     (t) == 7 || (t) == 20 || (t) == 23)
#define WQ_HAS_PAIR(t) ((t) == 12 || (t) == 13)
// A matrix slot's weight in the weight-layout pass's q6_K planes (codegen's
// <slot>_Q6P): each row its blocks' quant nibbles (128 bytes a block), high
// bits (64), scales (16) and d's (2), every field 8-byte aligned, so it is
// read in pairs as well as words.
#ifndef W0_Q6P
#define W0_Q6P 0
#endif
#ifndef W1_Q6P
#define W1_Q6P 0
#endif
#ifndef W2_Q6P
#define W2_Q6P 0
#endif
#ifndef W3_Q6P
#define W3_Q6P 0
#endif
bool q6p(const uint which) {
    return (which == WQ_W0 && W0_Q6P != 0) || (which == WQ_W1 && W1_Q6P != 0) ||
           (which == WQ_W2 && W2_Q6P != 0) || (which == WQ_W3 && W3_Q6P != 0);
}
#define WQ_HAS_QUAD(t) ((t) == 0 || (t) == 1 || (t) == 30 || (t) == 12 || (t) == 13)
#ifdef B_W0
#if WQ_HAS_WORD(W0_TYPE)
layout(std430, binding = B_W0) WQ_QUAL buffer w0b { uint w0[]; };
#endif
#if WQ_HAS_PAIR(W0_TYPE) || W0_Q6P
layout(std430, binding = B_W0) WQ_QUAL buffer w0b2 { uvec2 w0_2[]; };
#endif
#if WQ_HAS_QUAD(W0_TYPE)
layout(std430, binding = B_W0) WQ_QUAL buffer w0b4 { uvec4 w0_4[]; };
#endif
#endif
#ifdef B_W1
#if WQ_HAS_WORD(W1_TYPE)
layout(std430, binding = B_W1) WQ_QUAL buffer w1b { uint w1[]; };
#endif
#if WQ_HAS_PAIR(W1_TYPE) || W1_Q6P
layout(std430, binding = B_W1) WQ_QUAL buffer w1b2 { uvec2 w1_2[]; };
#endif
#if WQ_HAS_QUAD(W1_TYPE)
layout(std430, binding = B_W1) WQ_QUAL buffer w1b4 { uvec4 w1_4[]; };
#endif
#endif
#ifdef B_W2
#if WQ_HAS_WORD(W2_TYPE)
layout(std430, binding = B_W2) WQ_QUAL buffer w2b { uint w2[]; };
#endif
#if WQ_HAS_PAIR(W2_TYPE) || W2_Q6P
layout(std430, binding = B_W2) WQ_QUAL buffer w2b2 { uvec2 w2_2[]; };
#endif
#if WQ_HAS_QUAD(W2_TYPE)
layout(std430, binding = B_W2) WQ_QUAL buffer w2b4 { uvec4 w2_4[]; };
#endif
#endif
#ifdef B_W3
#if WQ_HAS_WORD(W3_TYPE)
layout(std430, binding = B_W3) WQ_QUAL buffer w3b { uint w3[]; };
#endif
#if WQ_HAS_PAIR(W3_TYPE) || W3_Q6P
layout(std430, binding = B_W3) WQ_QUAL buffer w3b2 { uvec2 w3_2[]; };
#endif
#if WQ_HAS_QUAD(W3_TYPE)
layout(std430, binding = B_W3) WQ_QUAL buffer w3b4 { uvec4 w3_4[]; };
#endif
#endif
#ifdef B_NW
#if WQ_HAS_WORD(NW_TYPE)
layout(std430, binding = B_NW) WQ_QUAL buffer wnwb { uint wnw[]; };
#endif
#if WQ_HAS_PAIR(NW_TYPE)
layout(std430, binding = B_NW) WQ_QUAL buffer wnwb2 { uvec2 wnw_2[]; };
#endif
#if WQ_HAS_QUAD(NW_TYPE)
layout(std430, binding = B_NW) WQ_QUAL buffer wnwb4 { uvec4 wnw_4[]; };
#endif
#endif
#ifdef B_BIAS
#if WQ_HAS_WORD(BIAS_TYPE)
layout(std430, binding = B_BIAS) WQ_QUAL buffer wbiasb { uint wbias[]; };
#endif
#if WQ_HAS_PAIR(BIAS_TYPE)
layout(std430, binding = B_BIAS) WQ_QUAL buffer wbiasb2 { uvec2 wbias_2[]; };
#endif
#if WQ_HAS_QUAD(BIAS_TYPE)
layout(std430, binding = B_BIAS) WQ_QUAL buffer wbiasb4 { uvec4 wbias_4[]; };
#endif
#endif

// Word i, pair i (bytes 8i ..) and quad i (bytes 16i ..) of a weight.
uint wword(const uint which, uint i) {
#ifdef B_W0
#if WQ_HAS_WORD(W0_TYPE)
    if (which == WQ_W0) return w0[i];
#endif
#endif
#ifdef B_W1
#if WQ_HAS_WORD(W1_TYPE)
    if (which == WQ_W1) return w1[i];
#endif
#endif
#ifdef B_W2
#if WQ_HAS_WORD(W2_TYPE)
    if (which == WQ_W2) return w2[i];
#endif
#endif
#ifdef B_W3
#if WQ_HAS_WORD(W3_TYPE)
    if (which == WQ_W3) return w3[i];
#endif
#endif
#ifdef B_NW
#if WQ_HAS_WORD(NW_TYPE)
    if (which == WQ_NW) return wnw[i];
#endif
#endif
#ifdef B_BIAS
#if WQ_HAS_WORD(BIAS_TYPE)
    if (which == WQ_BIAS) return wbias[i];
#endif
#endif
    return 0u;
}
uvec2 wpair(const uint which, uint i) {
#ifdef B_W0
#if WQ_HAS_PAIR(W0_TYPE) || W0_Q6P
    if (which == WQ_W0) return w0_2[i];
#endif
#endif
#ifdef B_W1
#if WQ_HAS_PAIR(W1_TYPE) || W1_Q6P
    if (which == WQ_W1) return w1_2[i];
#endif
#endif
#ifdef B_W2
#if WQ_HAS_PAIR(W2_TYPE) || W2_Q6P
    if (which == WQ_W2) return w2_2[i];
#endif
#endif
#ifdef B_W3
#if WQ_HAS_PAIR(W3_TYPE) || W3_Q6P
    if (which == WQ_W3) return w3_2[i];
#endif
#endif
#ifdef B_NW
#if WQ_HAS_PAIR(NW_TYPE)
    if (which == WQ_NW) return wnw_2[i];
#endif
#endif
#ifdef B_BIAS
#if WQ_HAS_PAIR(BIAS_TYPE)
    if (which == WQ_BIAS) return wbias_2[i];
#endif
#endif
    return uvec2(0u);
}
uvec4 wquad(const uint which, uint i) {
#ifdef B_W0
#if WQ_HAS_QUAD(W0_TYPE)
    if (which == WQ_W0) return w0_4[i];
#endif
#endif
#ifdef B_W1
#if WQ_HAS_QUAD(W1_TYPE)
    if (which == WQ_W1) return w1_4[i];
#endif
#endif
#ifdef B_W2
#if WQ_HAS_QUAD(W2_TYPE)
    if (which == WQ_W2) return w2_4[i];
#endif
#endif
#ifdef B_W3
#if WQ_HAS_QUAD(W3_TYPE)
    if (which == WQ_W3) return w3_4[i];
#endif
#endif
#ifdef B_NW
#if WQ_HAS_QUAD(NW_TYPE)
    if (which == WQ_NW) return wnw_4[i];
#endif
#endif
#ifdef B_BIAS
#if WQ_HAS_QUAD(BIAS_TYPE)
    if (which == WQ_BIAS) return wbias_4[i];
#endif
#endif
    return uvec4(0u);
}

// Four bytes at any byte offset. The second word is read only when the
// offset is unaligned, and then it holds byte off+3, which the caller
// guarantees is inside the weight: no read past the buffer.
uint wu32(const uint which, uint off) {
    uint i = off >> 2u, s = (off & 3u) * 8u;
    uint lo = wword(which, i);
    if (s == 0u) return lo;
    return (lo >> s) | (wword(which, i + 1u) << (32u - s));
}

// A half at an even byte offset.
float wf16(const uint which, uint off) {
    return unpackHalf2x16(wword(which, off >> 2u) >> ((off & 2u) * 8u)).x;
}

uint ubyte(uint w, uint i) { return (w >> (i * 8u)) & 0xffu; }

// Byte i (0..11) of the 12 packed K-quant scale bytes held in s0..s2.
uint kscale_byte(uint s0, uint s1, uint s2, uint i) {
    uint w = i < 4u ? s0 : (i < 8u ? s1 : s2);
    return ubyte(w, i & 3u);
}

// Scale and min of sub-block j (ggml's get_scale_min_k4), branch-free so
// that the loads of neighbouring chunks can be scheduled together.
void k4_scale_min(uint s0, uint s1, uint s2, uint j, out float sc, out float m) {
    uint bj = kscale_byte(s0, s1, s2, j), bj4 = kscale_byte(s0, s1, s2, j + 4u);
    uint bjm4 = kscale_byte(s0, s1, s2, (j - 4u) & 7u); /* read for j >= 4 only */
    bool lo = j < 4u;
    sc = float(lo ? bj & 63u : (bj4 & 0xfu) | ((bjm4 >> 6u) << 4u));
    m = float(lo ? bj4 & 63u : (bj4 >> 4u) | ((bj >> 6u) << 4u));
}

// Rows of the float types start 16-byte aligned (K % 8 == 0).
void dq8_f32(const uint which, uint base, out float v[8]) {
    uvec4 a = wquad(which, base >> 4u), b = wquad(which, (base >> 4u) + 1u);
    v = float[8](uintBitsToFloat(a.x), uintBitsToFloat(a.y), uintBitsToFloat(a.z), uintBitsToFloat(a.w),
                 uintBitsToFloat(b.x), uintBitsToFloat(b.y), uintBitsToFloat(b.z), uintBitsToFloat(b.w));
}

void dq8_f16(const uint which, uint base, out float v[8]) {
    uvec4 q = wquad(which, base >> 4u);
    vec2 h0 = unpackHalf2x16(q.x), h1 = unpackHalf2x16(q.y), h2 = unpackHalf2x16(q.z), h3 = unpackHalf2x16(q.w);
    v = float[8](h0.x, h0.y, h1.x, h1.y, h2.x, h2.y, h3.x, h3.y);
}

void dq8_bf16(const uint which, uint base, out float v[8]) {
    uvec4 q = wquad(which, base >> 4u);
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        v[2u * i] = uintBitsToFloat(q[i] << 16u);
        v[2u * i + 1u] = uintBitsToFloat(q[i] & 0xffff0000u);
    }
}

// Q8_0: { f16 d; int8 qs[32] } (34 bytes), x = q * d.
void dq8_q8_0(const uint which, uint row_off, uint k0, out float v[8]) {
    uint off = row_off + (k0 >> 5u) * 34u;
    float d = wf16(which, off);
    uint q0 = wu32(which, off + 2u + (k0 & 31u)), q1 = wu32(which, off + 6u + (k0 & 31u));
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        v[i] = float(bitfieldExtract(int(q0), int(i * 8u), 8)) * d;
        v[i + 4u] = float(bitfieldExtract(int(q1), int(i * 8u), 8)) * d;
    }
}

// Q4_K: { f16 d, dmin; u8 scales[12]; u8 qs[128] } (144 bytes, word aligned).
// Sub-blocks 2p and 2p+1 share qs[32p .. 32p+31], low and high nibbles.
void dq8_q4_K(const uint which, uint row_off, uint k0, out float v[8]) {
    uint wi = (row_off + (k0 >> 8u) * 144u) >> 2u; /* blocks are 16-byte aligned */
    uint in_b = k0 & 255u, j = in_b >> 5u;
    uvec4 hd = wquad(which, wi >> 2u);
    vec2 dm = unpackHalf2x16(hd.x);
    float sc, m;
    k4_scale_min(hd.y, hd.z, hd.w, j, sc, m);
    float d1 = dm.x * sc, m1 = dm.y * m;
    uint qi = wi + 4u + ((32u * (j >> 1u) + (in_b & 31u)) >> 2u), sh = (j & 1u) * 4u;
    uvec2 qq = wpair(which, qi >> 1u);
    uint q0 = qq.x, q1 = qq.y;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        v[i] = d1 * float((q0 >> (8u * i + sh)) & 0xfu) - m1;
        v[i + 4u] = d1 * float((q1 >> (8u * i + sh)) & 0xfu) - m1;
    }
}

// Q5_K: { f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] } (176 bytes):
// Q4_K's layout plus a fifth bit, bit j of qh[l] for sub-block j.
void dq8_q5_K(const uint which, uint row_off, uint k0, out float v[8]) {
    uint wi = (row_off + (k0 >> 8u) * 176u) >> 2u; /* blocks are 16-byte aligned */
    uint in_b = k0 & 255u, j = in_b >> 5u, l = in_b & 31u;
    uvec4 hd = wquad(which, wi >> 2u);
    vec2 dm = unpackHalf2x16(hd.x);
    float sc, m;
    k4_scale_min(hd.y, hd.z, hd.w, j, sc, m);
    float d1 = dm.x * sc, m1 = dm.y * m;
    uvec2 hh = wpair(which, (wi + 4u + (l >> 2u)) >> 1u);
    uint h0 = hh.x, h1 = hh.y;
    uint qi = wi + 12u + ((32u * (j >> 1u) + l) >> 2u), sh = (j & 1u) * 4u;
    uvec2 qq = wpair(which, qi >> 1u);
    uint q0 = qq.x, q1 = qq.y;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint a = ((q0 >> (8u * i + sh)) & 0xfu) | (((h0 >> (8u * i + j)) & 1u) << 4u);
        uint b = ((q1 >> (8u * i + sh)) & 0xfu) | (((h1 >> (8u * i + j)) & 1u) << 4u);
        v[i] = d1 * float(a) - m1;
        v[i + 4u] = d1 * float(b) - m1;
    }
}

// Eight q6_K values d * scale * (q - 32) of scale row k from their quant
// bytes (ql: nibble k / 2 of each) and high-bit bytes (bits 2k).
void q6_8(float ds, uvec2 ql, uvec2 qh, uint k, out float v[8]) {
    uint sl = (k >> 1u) * 4u, shh = 2u * k;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        int a = int(((ql.x >> (8u * i + sl)) & 0xfu) | (((qh.x >> (8u * i + shh)) & 3u) << 4u)) - 32;
        int b = int(((ql.y >> (8u * i + sl)) & 0xfu) | (((qh.y >> (8u * i + shh)) & 3u) << 4u)) - 32;
        v[i] = ds * float(a);
        v[i + 4u] = ds * float(b);
    }
}

// Q6_K: { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d } (210 bytes, so
// blocks are not word aligned). In half h, element l + 32k takes a nibble
// of ql[64h + l + 32(k&1)] (high for k >= 2), bits 2k of qh[32h + l], and
// scale 8h + l/16 + 2k; x = d * scale * (q - 32).
void dq8_q6_K(const uint which, uint row_off, uint k0, out float v[8]) {
    uint off = row_off + (k0 >> 8u) * 210u;
    uint in_b = k0 & 255u, h = in_b >> 7u, k = (in_b >> 5u) & 3u, l = in_b & 31u;
    float d = wf16(which, off + 208u);
    uint so = off + 192u + 8u * h + (l >> 4u) + 2u * k; /* one byte: a 4-byte read could pass the end */
    int sc8 = bitfieldExtract(int(wword(which, so >> 2u) >> ((so & 3u) * 8u)), 0, 8);
    float ds = d * float(sc8);
    uint lo = off + 64u * h + l + 32u * (k & 1u), hb = off + 128u + 32u * h + l;
    uint ql0 = wu32(which, lo), ql1 = wu32(which, lo + 4u);
    uint qh0 = wu32(which, hb), qh1 = wu32(which, hb + 4u);
    q6_8(ds, uvec2(ql0, ql1), uvec2(qh0, qh1), k, v);
}

// The same elements of a row held as q6_K planes (the weight-layout pass:
// nb blocks a row; the row's quant nibbles, high bits, scales, d's): the
// eight quant and high-bit bytes as one aligned pair each.
void dq8_q6p(const uint which, uint row_off, uint nb, uint k0, out float v[8]) {
    uint j = k0 >> 8u, in_b = k0 & 255u, h = in_b >> 7u, k = (in_b >> 5u) & 3u, l = in_b & 31u;
    float d = wf16(which, row_off + 208u * nb + 2u * j);
    uint so = row_off + 192u * nb + 16u * j + 8u * h + (l >> 4u) + 2u * k;
    int sc8 = bitfieldExtract(int(wword(which, so >> 2u) >> ((so & 3u) * 8u)), 0, 8);
    uvec2 ql = wpair(which, (row_off + 128u * j + 64u * h + l + 32u * (k & 1u)) >> 3u);
    uvec2 qh = wpair(which, (row_off + 128u * nb + 64u * j + 32u * h + l) >> 3u);
    q6_8(d * float(sc8), ql, qh, k, v);
}
// ---- 32-element blocks (ggml's Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) and IQ4_XS.
// Byte l (0..15) of a block's qs holds element l in its low nibble and
// l + 16 in its high one, so elements e0 .. e0+7 (e0 % 8 == 0) are one
// nibble of 8 consecutive bytes from qs + (e0 & 15). Each decoder computes
// what ir/dtype.c does, operation for operation; `precise` keeps d * q + m
// from becoming an fma, so that the values are those of ggml's plain C.

// Nibble h (0 low, 1 high) of the 8 bytes in q0, q1, as 8 integers.
void nib8(uint q0, uint q1, uint h, out uint n[8]) {
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        n[i] = (q0 >> (8u * i + 4u * h)) & 0xfu;
        n[i + 4u] = (q1 >> (8u * i + 4u * h)) & 0xfu;
    }
}

// Q4_0: { f16 d; u8 qs[16] } (18 bytes, so blocks are 2-byte aligned), x = (q - 8) * d.
void dq8_q4_0(const uint which, uint row_off, uint k0, out float v[8]) {
    uint off = row_off + (k0 >> 5u) * 18u, e0 = k0 & 31u, n[8];
    float d = wf16(which, off);
    uint qo = off + 2u + (e0 & 15u);
    nib8(wu32(which, qo), wu32(which, qo + 4u), e0 >> 4u, n);
    [[unroll]] for (uint i = 0u; i < 8u; i++) v[i] = float(int(n[i]) - 8) * d;
}

// Q4_1: { f16 d, m; u8 qs[16] } (20 bytes, word aligned), x = q * d + m.
void dq8_q4_1(const uint which, uint row_off, uint k0, out float v[8]) {
    uint wi = (row_off + (k0 >> 5u) * 20u) >> 2u, e0 = k0 & 31u, n[8];
    vec2 dm = unpackHalf2x16(wword(which, wi));
    uint qi = wi + 1u + ((e0 & 15u) >> 2u);
    nib8(wword(which, qi), wword(which, qi + 1u), e0 >> 4u, n);
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        precise float x = float(n[i]) * dm.x + dm.y;
        v[i] = x;
    }
}

// Q5_0: { f16 d; u32 qh; u8 qs[16] } (22 bytes), x = (q - 16) * d, the 5th
// bit of element e at bit e of qh.
void dq8_q5_0(const uint which, uint row_off, uint k0, out float v[8]) {
    uint off = row_off + (k0 >> 5u) * 22u, e0 = k0 & 31u, n[8];
    float d = wf16(which, off);
    uint qh = wu32(which, off + 2u) >> e0, qo = off + 6u + (e0 & 15u);
    nib8(wu32(which, qo), wu32(which, qo + 4u), e0 >> 4u, n);
    [[unroll]] for (uint i = 0u; i < 8u; i++) v[i] = float(int(n[i] | (((qh >> i) & 1u) << 4u)) - 16) * d;
}

// Q5_1: { f16 d, m; u32 qh; u8 qs[16] } (24 bytes, word aligned), x = q * d + m.
void dq8_q5_1(const uint which, uint row_off, uint k0, out float v[8]) {
    uint wi = (row_off + (k0 >> 5u) * 24u) >> 2u, e0 = k0 & 31u, n[8];
    vec2 dm = unpackHalf2x16(wword(which, wi));
    uint qh = wword(which, wi + 1u) >> e0, qi = wi + 2u + ((e0 & 15u) >> 2u);
    nib8(wword(which, qi), wword(which, qi + 1u), e0 >> 4u, n);
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        precise float x = float(n[i] | (((qh >> i) & 1u) << 4u)) * dm.x + dm.y;
        v[i] = x;
    }
}

// IQ4_NL and IQ4_XS index ggml's kvalues_iq4nl.
const float KV_IQ4NL[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0,
                                     38.0, 53.0, 69.0, 89.0, 113.0);

// IQ4_NL: { f16 d; u8 qs[16] } (18 bytes), x = d * kvalues_iq4nl[q].
void dq8_iq4_nl(const uint which, uint row_off, uint k0, out float v[8]) {
    uint off = row_off + (k0 >> 5u) * 18u, e0 = k0 & 31u, n[8];
    float d = wf16(which, off);
    uint qo = off + 2u + (e0 & 15u);
    nib8(wu32(which, qo), wu32(which, qo + 4u), e0 >> 4u, n);
    [[unroll]] for (uint i = 0u; i < 8u; i++) v[i] = d * KV_IQ4NL[n[i]];
}

// IQ4_XS: { f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128] } (136 bytes,
// 8-byte aligned): sub-block j of 32 is laid out as an IQ4_NL block's qs at
// qs + 16j, with the scale ls = scales_l nibble j | 2 bits j of scales_h << 4;
// x = (d * (ls - 32)) * kvalues_iq4nl[q].
void dq8_iq4_xs(const uint which, uint row_off, uint k0, out float v[8]) {
    uint wi = (row_off + (k0 >> 8u) * 136u) >> 2u, in_b = k0 & 255u, j = in_b >> 5u, e0 = in_b & 31u, n[8];
    uint h0 = wword(which, wi), sl = wword(which, wi + 1u);
    uint ls = ((sl >> (4u * j)) & 0xfu) | (((h0 >> (16u + 2u * j)) & 3u) << 4u);
    float dl = unpackHalf2x16(h0).x * float(int(ls) - 32);
    uint qi = wi + 2u + 4u * j + ((e0 & 15u) >> 2u);
    nib8(wword(which, qi), wword(which, qi + 1u), e0 >> 4u, n);
    [[unroll]] for (uint i = 0u; i < 8u; i++) v[i] = dl * KV_IQ4NL[n[i]];
}

// One name per type id, so that DQ8 picks the decoder in the preprocessor:
// W0_TYPE is a plain number (12 for q4_K), pasted onto dq8_t.
void dq8_t0(const uint which, const uint rowb, uint row, uint k0, out float v[8]) {
    dq8_f32(which, row * rowb + k0 * 4u, v);
}
void dq8_t1(const uint which, const uint rowb, uint row, uint k0, out float v[8]) {
    dq8_f16(which, row * rowb + k0 * 2u, v);
}
void dq8_t30(const uint which, const uint rowb, uint row, uint k0, out float v[8]) {
    dq8_bf16(which, row * rowb + k0 * 2u, v);
}
// Block types address their row by bytes: row * rowb.
#define DQ8_BLOCKS(ty, fn)                                                                                     \
    void dq8_t##ty(const uint which, const uint rowb, uint row, uint k0, out float v[8]) {                     \
        fn(which, row * rowb, k0, v);                                                                          \
    }
DQ8_BLOCKS(2, dq8_q4_0)
DQ8_BLOCKS(3, dq8_q4_1)
DQ8_BLOCKS(6, dq8_q5_0)
DQ8_BLOCKS(7, dq8_q5_1)
DQ8_BLOCKS(8, dq8_q8_0)
DQ8_BLOCKS(12, dq8_q4_K)
DQ8_BLOCKS(13, dq8_q5_K)
void dq8_t14(const uint which, const uint rowb, uint row, uint k0, out float v[8]) {
    if (q6p(which))
        dq8_q6p(which, row * rowb, rowb / 210u, k0, v);
    else
        dq8_q6_K(which, row * rowb, k0, v);
}
DQ8_BLOCKS(20, dq8_iq4_nl)
DQ8_BLOCKS(23, dq8_iq4_xs)

// DQ8(which, TYPE, rowb, row, k0, v): elements k0 .. k0+7 (k0 % 8 == 0) of
// row `row` of a weight of type TYPE (a type-id macro) whose rows are rowb
// bytes. The extra level of macros expands TYPE before pasting.
#define DQ8_PASTE(ty, which, rowb, row, k0, v) dq8_t##ty(which, rowb, row, k0, v)
#define DQ8(which, ty, rowb, row, k0, v) DQ8_PASTE(ty, which, rowb, row, k0, v)

// One element k of a one-row weight (norm scales, biases) of type TYPE.
#define DQ1(which, ty, k) DQ1_PASTE(ty, which, k)
#define DQ1_PASTE(ty, which, k) dq1_t##ty(which, k)
float dq1_t0(const uint which, uint k) { return uintBitsToFloat(wword(which, k)); }
float dq1_t1(const uint which, uint k) { return wf16(which, k * 2u); }
float dq1_t30(const uint which, uint k) {
    return uintBitsToFloat(((wword(which, k >> 1u) >> ((k & 1u) * 16u)) & 0xffffu) << 16u);
}
// Block types: the element out of its group of 8.
#define DQ1_FROM_DQ8(ty)                                                                                       \
    float dq1_t##ty(const uint which, uint k) {                                                                \
        float v[8];                                                                                            \
        dq8_t##ty(which, 0u, 0u, k & ~7u, v);                                                                  \
        return v[k & 7u];                                                                                      \
    }
DQ1_FROM_DQ8(2)
DQ1_FROM_DQ8(3)
DQ1_FROM_DQ8(6)
DQ1_FROM_DQ8(7)
DQ1_FROM_DQ8(8)
DQ1_FROM_DQ8(12)
DQ1_FROM_DQ8(13)
DQ1_FROM_DQ8(14)
DQ1_FROM_DQ8(20)
DQ1_FROM_DQ8(23)
