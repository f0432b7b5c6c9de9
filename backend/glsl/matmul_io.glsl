// matmul_io.glsl: the activations of the matmul family and what their
// prologue (RMSNorm) and epilogue (bias or residual add, then fuse-epilogue's
// unary and product by a weight) need.
//
// Defines from codegen:
//   B_X, B_Y       input x[T,K] and output y[T,N] (fp16 with XACT_F16 / YACT_T)
//   B_R            residual r[T,N] (ADD_MODE 1); R_IS_X when r is x itself
//   HAS_NORM       x is RMS-normalized over K first (NORM_EPS, NW_TYPE)
//   ADD_MODE       0 none, 1 residual (activation), 2 bias (weight [N], BIAS_TYPE)
//   EPI_UNARY      0 none, 1 sigmoid, 2 softplus, 3 silu; EPI_MUL: times the f32 [N] weight at B_EMUL
//   N, K           output and contraction sizes

#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

// x is declared once, as vectors (K % 8 == 0): llvmpipe was seen to
// mishandle one buffer read through two declarations in a kernel.
#ifdef XACT_F16
layout(std430, binding = B_X) readonly buffer Xb4 { f16vec4 xin4[]; };
#else
layout(std430, binding = B_X) readonly buffer Xb4 { vec4 xin4[]; };
#endif

// Element i of x.
float x_at(uint i) { return float(xin4[i >> 2u][i & 3u]); }

#if ADD_MODE == 1
#ifdef R_IS_X
float radd_at(uint i) { return x_at(i); }
#else
layout(std430, binding = B_R) readonly buffer Rb { ACT_T radd[]; };
float radd_at(uint i) { return float(radd[i]); }
#endif
#endif

// x[off .. off+7] (off % 8 == 0) in two vector loads.
void load_x8(uint off, out float xv[8]) {
    vec4 a = vec4(xin4[off >> 2u]), b = vec4(xin4[(off >> 2u) + 1u]);
    xv = float[8](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
}
#ifdef XACT_F16
// x[o8 .. o8+7] (o8 % 8 == 0) as four fp16 pairs, bit for bit.
uvec4 x8_halves(uint o8) {
    f16vec4 a = xin4[o8 >> 2u], b = xin4[(o8 >> 2u) + 1u];
    return uvec4(packFloat2x16(a.xy), packFloat2x16(a.zw), packFloat2x16(b.xy), packFloat2x16(b.zw));
}
#endif
// How a GEMM holds x from its fetch to its staging (matmul_cm.glsl,
// matmul_cmp.glsl): fp32, converted to halves as it is staged, or, when
// the activations are fp16 and no norm is applied on the way (X_RAW), the
// halves themselves, copied bit for bit: no conversion and half the bytes.
// X_REGS(n) declares xr, n chunks of 8 elements.
#if defined(XACT_F16) && !HAS_NORM
#define X_RAW 1
#define X_REGS(n) uvec4 xr[n]
#else
#define X_RAW 0
#define X_REGS(n) vec4 xr[n][2]
#endif

#if HAS_NORM
// x[k .. k+3] of a row (v), times the row's 1 / rms (sc) and the norm weight.
vec4 x4_normed(vec4 v, float sc, uint k) {
    return v * sc *
           vec4(DQ1(WQ_NW, NW_TYPE, k), DQ1(WQ_NW, NW_TYPE, k + 1u), DQ1(WQ_NW, NW_TYPE, k + 2u),
                DQ1(WQ_NW, NW_TYPE, k + 3u));
}
#endif

// x[xo + k0 .. +7] times the norm weight (HAS_NORM; ss += x.x of the raw
// values), and sum += the 8 results. Needs dequant.glsl (the norm weight).
void x8_normed(uint xo, uint k0, out float v[8], inout float ss, inout float sum) {
    load_x8(xo + k0, v);
#if HAS_NORM
    float nv[8];
    DQ8(WQ_NW, NW_TYPE, 0u, 0u, k0, nv);
#endif
    [[unroll]] for (uint e = 0u; e < 8u; e++) {
#if HAS_NORM
        ss += v[e] * v[e];
        v[e] *= nv[e];
#endif
        sum += v[e];
    }
}

#ifdef Y_KV
// The output is the KV cache (a fused kv_store): rows pos .. pos+T-1 (a
// batch: each row's own).
layout(std430, binding = B_Y) writeonly buffer Yb { KV_T yout[]; };
void store_y(uint t, uint n, float v) { yout[ROW_KV(t) * uint(N) + n] = KV_T(v); }
#else
layout(std430, binding = B_Y) writeonly buffer Yb { YACT_T yout[]; };
void store_y(uint t, uint n, float v) { yout[t * uint(N) + n] = YACT_T(v); }
#endif

#ifndef EPI_UNARY
#define EPI_UNARY 0
#endif
#ifndef EPI_MUL
#define EPI_MUL 0
#endif
#if EPI_MUL
// the product's weight: f32 (the pass and codegen take no other type)
layout(std430, binding = B_EMUL) readonly buffer EMULb { float emul[]; };
#endif

// What the epilogue does to output element (t, n): the add, then
// fuse-epilogue's unary (1 sigmoid, 2 softplus, 3 silu: common.glsl's, as
// unary.glsl's kernels) and product by an [N] weight (EMUL).
float epilogue(uint t, uint n, float v) {
#if ADD_MODE == 1
    v += radd_at(t * uint(N) + n);
#elif ADD_MODE == 2
    v += DQ1(WQ_BIAS, BIAS_TYPE, n);
#endif
#if EPI_UNARY == 1
    v = sigmoid(v);
#elif EPI_UNARY == 2
    v = softplus(v);
#elif EPI_UNARY == 3
    v = silu(v);
#endif
#if EPI_MUL
    v *= emul[n];
#endif
    return v;
}

// The first token whose output row is needed: with LOGITS_ROWS (the
// logits of a prefill step) only the last step.logits_rows (0: all), so
// that tiles wholly before it return at once.
uint first_needed_row(uint T) {
#ifdef LOGITS_ROWS
    uint r = step.logits_rows;
    return r == 0u || r >= T ? 0u : T - r;
#else
    return 0u;
#endif
}

// 1 / rms of row t of x (length len), summed by one subgroup; every lane
// gets it. Used with HAS_NORM; the caller keeps control flow uniform.
float subgroup_inv_rms(uint row_off, uint len, float eps) {
    float ss = 0.0;
    for (uint k = gl_SubgroupInvocationID; k < len; k += gl_SubgroupSize) {
        float v = x_at(row_off + k);
        ss += v * v;
    }
    ss = subgroupAdd(ss);
    return inversesqrt(ss / float(len) + eps);
}
