// gemv_segs.glsl: the segments of a matmul_rows kernel (fuse-qkv), for
// the decode GEMV (matmul_gemv.glsl) and the multi-row GEMV
// (matmul_gemvn.glsl). Needs matmul_io.glsl (store_y, epilogue).
//
// SEGS (a matmul_rows kernel, fuse-qkv): the rows are SEGS (2 to 4)
// segments, each with its own weight W<s> (and type), N<s> rows and
// destination: Y<s> for all but the last, whose rows are the kernel's
// output (store_y: maybe the KV cache). Each segment starts a workgroup of
// its own (WG_SEG<s>), so a workgroup's segment is uniform; `seg` is a
// constant in every call below main's branch, and the selections on it
// fold away once inlined.
//
// A segment's epilogue (fuse-qkv takes the chain fuse-epilogue would have
// put in its own GEMV's: a Qwen3.5 delta layer's beta and decay), in the
// graph's order: B_S<s>_BIAS adds an f32 [N<s>] weight, S<s>_UNARY applies
// 1 sigmoid, 2 softplus or 3 silu (common.glsl's, as matmul_io.glsl's
// EPI_UNARY), B_S<s>_EMUL multiplies by an f32 [N<s>] weight.
#ifndef SEGS
#define SEGS 0
#endif
#if SEGS
layout(std430, binding = B_Y0) writeonly buffer Y0b { ACT_T y0out[]; };
#if SEGS > 2
layout(std430, binding = B_Y1) writeonly buffer Y1b { ACT_T y1out[]; };
#endif
#if SEGS > 3
layout(std430, binding = B_Y2) writeonly buffer Y2b { ACT_T y2out[]; };
#endif

// An epilogue's weight, read as floats (f32 only: codegen checks).
#define SEG_F32(b_, name) layout(std430, binding = b_) readonly buffer name##b { float name[]; };
#ifdef B_S0_BIAS
SEG_F32(B_S0_BIAS, s0bias)
#endif
#ifdef B_S1_BIAS
SEG_F32(B_S1_BIAS, s1bias)
#endif
#ifdef B_S2_BIAS
SEG_F32(B_S2_BIAS, s2bias)
#endif
#ifdef B_S3_BIAS
SEG_F32(B_S3_BIAS, s3bias)
#endif
#ifdef B_S0_EMUL
SEG_F32(B_S0_EMUL, s0emul)
#endif
#ifdef B_S1_EMUL
SEG_F32(B_S1_EMUL, s1emul)
#endif
#ifdef B_S2_EMUL
SEG_F32(B_S2_EMUL, s2emul)
#endif
#ifdef B_S3_EMUL
SEG_F32(B_S3_EMUL, s3emul)
#endif
#ifndef S0_UNARY
#define S0_UNARY 0
#endif
#ifndef S1_UNARY
#define S1_UNARY 0
#endif
#ifndef S2_UNARY
#define S2_UNARY 0
#endif
#ifndef S3_UNARY
#define S3_UNARY 0
#endif

// Segment seg's epilogue of its element n.
float seg_epilogue(const uint seg, uint n, float v) {
#ifdef B_S0_BIAS
    if (seg == 0u) v += s0bias[n];
#endif
#ifdef B_S1_BIAS
    if (seg == 1u) v += s1bias[n];
#endif
#ifdef B_S2_BIAS
    if (seg == 2u) v += s2bias[n];
#endif
#ifdef B_S3_BIAS
    if (seg == 3u) v += s3bias[n];
#endif
    uint u = seg == 0u   ? uint(S0_UNARY)
             : seg == 1u ? uint(S1_UNARY)
             : seg == 2u ? uint(S2_UNARY)
                         : uint(S3_UNARY);
    if (u == 1u)
        v = sigmoid(v);
    else if (u == 2u)
        v = softplus(v);
    else if (u == 3u)
        v = silu(v);
#ifdef B_S0_EMUL
    if (seg == 0u) v *= s0emul[n];
#endif
#ifdef B_S1_EMUL
    if (seg == 1u) v *= s1emul[n];
#endif
#ifdef B_S2_EMUL
    if (seg == 2u) v *= s2emul[n];
#endif
#ifdef B_S3_EMUL
    if (seg == 3u) v *= s3emul[n];
#endif
    return v;
}
#endif

// OP(which, type, rowb, a, b, c) on the weight of matrix m of segment
// seg: segment s's W<s> (SEGS), or GLU's gate (m 0, W0) and up (m 1, W1).
// Each is a branch that folds away where seg and m are constants; the
// multi-row GEMVs load their weight groups through it.
#if SEGS > 3
#define W_SLOT(seg, m, OP, a, b, c)                                                                         \
    if (seg == 0u) {                                                                                       \
        OP(WQ_W0, W0_TYPE, W0_ROWB, a, b, c);                                                              \
    } else if (seg == 1u) {                                                                                \
        OP(WQ_W1, W1_TYPE, W1_ROWB, a, b, c);                                                              \
    } else if (seg == 2u) {                                                                                \
        OP(WQ_W2, W2_TYPE, W2_ROWB, a, b, c);                                                              \
    } else {                                                                                               \
        OP(WQ_W3, W3_TYPE, W3_ROWB, a, b, c);                                                              \
    }
#elif SEGS > 2
#define W_SLOT(seg, m, OP, a, b, c)                                                                         \
    if (seg == 0u) {                                                                                       \
        OP(WQ_W0, W0_TYPE, W0_ROWB, a, b, c);                                                              \
    } else if (seg == 1u) {                                                                                \
        OP(WQ_W1, W1_TYPE, W1_ROWB, a, b, c);                                                              \
    } else {                                                                                               \
        OP(WQ_W2, W2_TYPE, W2_ROWB, a, b, c);                                                              \
    }
#elif SEGS || GLU
#define W_SLOT(seg, m, OP, a, b, c)                                                                         \
    if (seg == 0u && m == 0u) {                                                                            \
        OP(WQ_W0, W0_TYPE, W0_ROWB, a, b, c);                                                              \
    } else {                                                                                               \
        OP(WQ_W1, W1_TYPE, W1_ROWB, a, b, c);                                                              \
    }
#else
#define W_SLOT(seg, m, OP, a, b, c) OP(WQ_W0, W0_TYPE, W0_ROWB, a, b, c);
#endif

// Rows of segment seg (of the kernel when SEGS is 0).
uint seg_rows(const uint seg) {
#if SEGS
    return seg == 0u ? uint(N0) : seg == 1u ? uint(N1) : seg == 2u ? uint(N2) : uint(N3);
#else
    return uint(N);
#endif
}

void store_seg(const uint seg, uint t, uint n, float v) {
#if SEGS
    v = seg_epilogue(seg, n, v);
    if (seg == 0u) {
        y0out[t * uint(N0) + n] = ACT_T(v);
        return;
    }
#if SEGS > 2
    if (seg == 1u) {
        y1out[t * uint(N1) + n] = ACT_T(v);
        return;
    }
#endif
#if SEGS > 3
    if (seg == 2u) {
        y2out[t * uint(N2) + n] = ACT_T(v);
        return;
    }
#endif
    store_y(t, n, v);
#else
    store_y(t, n, epilogue(t, n, v));
#endif
}

// Runs ROWS(wg, s) (a call of the caller's, rows_wg) for workgroup wg's
// segment s, wg counted from that segment's first workgroup: each call
// with s a constant, so that what depends on the segment folds away.
#if SEGS
#define SEG_DISPATCH(wg, ROWS)                                                                             \
    if (wg < uint(WG_SEG1)) {                                                                              \
        ROWS(wg, 0u);                                                                                      \
    } else if (SEGS == 2 || wg < uint(WG_SEG2)) {                                                          \
        ROWS(wg - uint(WG_SEG1), 1u);                                                                      \
    } else if (SEGS == 3 || wg < uint(WG_SEG3)) {                                                          \
        ROWS(wg - uint(WG_SEG2), 2u);                                                                      \
    } else {                                                                                               \
        ROWS(wg - uint(WG_SEG3), 3u);                                                                      \
    }
#else
#define SEG_DISPATCH(wg, ROWS) ROWS(wg, 0u);
#endif
