// common.glsl: included first by every kernel (after the #version line and
// the per-kernel #defines that codegen writes). It declares the step buffer
// at binding 0 and small helpers. ACT_T is the activation storage type.

#extension GL_EXT_control_flow_attributes : enable
#ifdef ACT_F16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define ACT_T float16_t
#else
#define ACT_T float
#endif
// One activation kept in fp16 (the mm-f16 pass): a matmul's x (X_F16:
// XACT_F16, matmul_io.glsl's f16vec4 x), a matmul's, a norm's or
// attention's output (Y_F16: YACT_T its type).
#if defined(X_F16) || defined(Y_F16)
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
#if defined(ACT_F16) || defined(X_F16)
#define XACT_F16 1
#endif
#if defined(ACT_F16) || defined(Y_F16)
#define YACT_T float16_t
#else
#define YACT_T float
#endif
// The KV cache's storage (the kv-type pass): arithmetic stays fp32.
#ifdef KV_F16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define KV_T float16_t
#else
#define KV_T float
#endif

layout(std430, set = 0, binding = 0) readonly buffer StepParams {
    uint T;    // tokens in this step
    uint pos;  // position of the first of them
    uint ctx;  // KV-cache capacity
    uint logits_rows; // of the T rows, how many last ones need logits (0: all)
#ifdef BATCH
    uvec2 rows[];     // the batch schedule: row t is a token at position rows[t].x of sequence slot rows[t].y
#endif
} step;

// Row t's position, and the row of the (slot-major) KV cache that holds it.
// A prefill or decode step's rows are consecutive positions of one sequence
// whose slot the executor binds; a batch step's rows each name their own.
#ifdef BATCH
#define ROW_POS(t) step.rows[t].x
#define ROW_KV(t) (step.rows[t].y * step.ctx + step.rows[t].x)
#else
#define ROW_POS(t) (step.pos + (t))
#define ROW_KV(t) (step.pos + (t))
#endif

// Byte access into a weight buffer bound as uint words: ggml blocks are not
// always 4-byte aligned (Q6_K is 210 bytes, Q8_0 34).
#define W_BYTE(buf, off) ((buf[(off) >> 2] >> (((off) & 3u) * 8u)) & 0xffu)
#define W_U16(buf, off) (W_BYTE(buf, off) | (W_BYTE(buf, (off) + 1u) << 8u))
#define W_F16(buf, off) unpackHalf2x16(W_U16(buf, off)).x
#define W_I8(buf, off) (int(W_BYTE(buf, off) << 24u) >> 24)

// The interpreter's (ggml's) float formulas of the elementwise activations,
// for unary.glsl's kernels and the matmul epilogue (matmul_io.glsl).
float silu(float x) { return x / (1.0 + exp(-x)); }
float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }
float softplus(float x) { return x > 20.0 ? x : log(1.0 + exp(x)); }

// v rounded to the nearest fp16 (ties to even, fp16 subnormals kept, beyond
// 65504 to infinity) and back, as the interpreter's zf32_to_f16 rounds it.
// packHalf2x16's rounding is not specified (Vulkan-Docs #1825): the H200's
// driver does not round so, and the scalar GEMMs' MM_F16 tiles missed the
// interpreter by 0.4-0.6 % of the RMS there (session 20).
float f16_rne(float v) {
    if (abs(v) < 6.103515625e-05) return roundEven(v * 16777216.0) * 5.9604644775390625e-08;
    uint b = floatBitsToUint(v);
    float r = uintBitsToFloat((b + 0x0FFFu + ((b >> 13) & 1u)) & 0xFFFFE000u);
    return abs(r) > 65504.0 ? uintBitsToFloat((b & 0x80000000u) | 0x7F800000u) : r;
}
