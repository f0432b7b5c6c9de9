// gemvn_xq.glsl: a batch step's x quantized once for the int8-x multi-row
// GEMV (matmul_gemvn.glsl, IDOT). The kernel's quantizing pass
// (gemvn_quant.glsl, dispatched just before it with the same bindings)
// writes it and every workgroup of the GEMV reads it, where each workgroup
// used to quantize every row into shared memory itself (run 31: 6144
// workgroups of gate+up each quantizing 8 x 4096 elements, 3.9x slower
// than the decode GEMV at one row).
//
// Binding B_XQ (a scratch buffer), one region of XQ_ROW16 16-byte units
// per token row tt: its int8 x in element order (K bytes: 16 elements a
// unit), then floats: d * sum(q) of each 16-element run (q4_K's mins), d of
// each 32-element block, and the norm's 1/rms (HAS_NORM). One declaration,
// as uvec4 (llvmpipe was seen to mishandle a buffer read through two).
//
// Defines: XQ_ROW16, XQ_ACCESS (readonly or writeonly), K.

layout(std430, binding = B_XQ) XQ_ACCESS buffer XQb { uvec4 xq4[]; };

// The first float of token row tt's scales, and where each table starts.
#define XQ_F0(tt) ((tt) * uint(XQ_ROW16) * 4u + uint(K) / 4u)
#define XQ_SUMS(tt) XQ_F0(tt)
#define XQ_D(tt) (XQ_F0(tt) + uint(K) / 16u)
#define XQ_NORM(tt) (XQ_D(tt) + uint(K) / 32u)
// 16 elements of row tt's int8 x from its element k0 (k0 % 16 == 0).
#define XQ_Q16(tt, k0) xq4[(tt) * uint(XQ_ROW16) + ((k0) >> 4u)]
