// gemv_segs.glsl: the segments of a matmul_rows kernel (fuse-qkv), for
// the decode GEMV (matmul_gemv.glsl) and the multi-row GEMV
// (matmul_gemvn.glsl). Needs matmul_io.glsl (store_y, epilogue).
//
// SEGS (a matmul_rows kernel, fuse-qkv): the rows are SEGS segments, each
// with its own weight W<s> (and type), N<s> rows and destination: Y<s> for
// all but the last, whose rows are the kernel's output (store_y: maybe the
// KV cache). Each segment starts a workgroup of its own (WG_SEG<s>), so a
// workgroup's segment is uniform; `seg` is a constant in every call below
// main's branch, and the selections on it fold away once inlined.
#ifndef SEGS
#define SEGS 0
#endif
#if SEGS
layout(std430, binding = B_Y0) writeonly buffer Y0b { ACT_T y0out[]; };
#if SEGS > 2
layout(std430, binding = B_Y1) writeonly buffer Y1b { ACT_T y1out[]; };
#endif
#endif

// Rows of segment seg (of the kernel when SEGS is 0).
uint seg_rows(const uint seg) {
#if SEGS
    return seg == 0u ? uint(N0) : seg == 1u ? uint(N1) : uint(N2);
#else
    return uint(N);
#endif
}

void store_seg(const uint seg, uint t, uint n, float v) {
#if SEGS
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
#endif
    store_y(t, n, epilogue(t, n, v));
}
